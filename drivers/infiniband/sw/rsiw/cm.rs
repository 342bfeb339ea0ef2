// SPDX-License-Identifier: GPL-2.0

//! Connection management: the iw_cm provider verbs over kernel TCP sockets.
//!
//! - `iw_connect` connects TCP (blocking, in the caller's context, as the C siw does), sends
//!   the MPA Request and leaves the reply to a `Connecting` work item ([`active`]), which
//!   reports it to iw_cm as CONNECT_REPLY and attaches the connection to the QP.
//! - `iw_create_listen` binds and listens; the listener's `sk_data_ready` queues its work,
//!   which accepts sockets and starts a [`Pending`] connection for each: its work reads the
//!   MPA Request and reports it as CONNECT_REQUEST. `iw_accept` and `iw_reject` find the
//!   pending connection by the number given as provider data and answer it.
//!
//! No exchange waits for the peer in a worker: the socket's `sk_data_ready` (and
//! `sk_state_change`) queue the connection's work, which takes what has arrived without
//! blocking and returns when the frame is not whole yet. Each exchange has a deadline, the
//! device's `mpa_timeout_ms` from its start, kept by a delayed work that closes it: a peer that
//! trickles its bytes or stalls costs a socket until then, never a worker.
//!
//! The MPA exchange runs the pure state machines of `proto/mpa_handshake.rs`, reading with
//! `MSG_PEEK` and then consuming exactly what the machine used, so no byte of the stream after
//! the MPA frame is ever taken from the socket here: the QP's receive path sees all of them.
//!
//! Peer-to-peer model (RFC 6581): with the device's `peer_to_peer` setting the initiator asks
//! for it, offering the device's RTR kinds; once accepted it sends the RTR message as the first
//! FPDU, before iw_cm (and the ULP) hear CONNECT_REPLY, so nothing can precede it. A responder
//! accepts it with the same kinds: `iw_accept` sends the MPA Reply and returns; the RTR is
//! awaited as the request was, with a deadline of its own (answering a Read RTR with its
//! zero-length Read Response), and ESTABLISHED follows it. A wrong or missing RTR closes the
//! connection; iw_cm, which cannot take a CLOSE before ESTABLISHED on the passive side, hears
//! ESTABLISHED and then CLOSE, with the QP in error. Failures of the setup that RFC 6581
//! section 8 names are reported to the peer with a TERMINATE (layer 2, type 0). The QP's
//! engine starts knowing which RTR went by ([`RtrState`]), as the RTR takes a message number.

use core::{
    net::SocketAddr,
    sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering},
};
use kernel::{
    delayed_work::{impl_has_delayed_work, new_delayed_work, DelayedWork},
    net::tcp::{MsgFlags, RxQueue, Shutdown, TcpCallbacks, TcpSocket, TcpState},
    new_mutex,
    owned_workqueue::OwnedQueue,
    prelude::*,
    rdma::provider::iw_provider::{IwCmId, IwConnParam, IwEvent, Up, MAX_EVENT_PRIVATE_DATA},
    sync::{Arc, Mutex},
    workqueue::{impl_has_work, new_work, HasWork, Work, WorkItem},
};

use crate::{
    counters::{CmStat, Counters},
    kernel_crc32c::KernelCrc32c,
    proto::{
        mpa::RtrKinds,
        mpa_handshake::{terminate_fpdu, HandshakeError},
        mpa_handshake::{
            Accepted, InitiatorEvent, InitiatorHandshake, ReceivedRtr, ResponderEvent,
            ResponderHandshake, MAX_FRAME_LEN,
        },
        mpa_negotiation::{CrcPolicy, InitiatorConfig, QueueDepth, ResponderConfig},
        ord_ird::MAX_DEPTH,
        qp_engine::RtrState,
        stats::Stat,
    },
    qp::{Established, Qp, Terms},
    settings::Settings,
    slots::Slots,
};

mod active;
pub(crate) use active::connect;

/// The connection-management state of a device.
#[pin_data]
pub(crate) struct Cm {
    #[pin]
    listeners: Mutex<Slots<Arc<Listener>>>,
    #[pin]
    pending: Mutex<Slots<Arc<Pending>>>,
    next_pending: AtomicUsize,
    /// The device's protocol settings.
    pub(crate) settings: Settings,
    /// The module's workqueue, for the connection work.
    pub(crate) queue: Arc<OwnedQueue>,
    /// The device's counters.
    pub(crate) counters: Arc<Counters>,
}

impl Cm {
    pub(crate) fn new(queue: Arc<OwnedQueue>, counters: Arc<Counters>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                listeners <- new_mutex!(Slots::new(), "Cm::listeners"),
                pending <- new_mutex!(Slots::new(), "Cm::pending"),
                next_pending: AtomicUsize::new(1),
                settings: Settings::new(),
                queue,
                counters,
            }),
            GFP_KERNEL,
        )
    }

    /// Closes every listener and pending connection (the device goes away).
    pub(crate) fn shut_down(&self) {
        let listeners = self.listeners.lock().take_all();
        for l in listeners.iter() {
            l.close();
        }
        while let Some(p) = self.pending.lock().take_where(|_| true) {
            p.close();
        }
    }

    /// Closes the oldest connection of `listener` still in its MPA exchange, to make room for
    /// a new one. Returns whether there was one.
    fn evict_oldest_handshake(&self, listener: &Arc<Listener>) -> bool {
        let oldest = self
            .pending
            .lock()
            .iter()
            .filter(|p| Arc::ptr_eq(&p.listener, listener) && p.exchanging.load(Ordering::Relaxed))
            .min_by_key(|p| p.key)
            .cloned();
        match oldest {
            Some(p) => {
                p.close();
                true
            }
            None => false,
        }
    }

    fn find_pending(&self, key: usize) -> Option<Arc<Pending>> {
        self.pending.lock().iter().find(|p| p.key == key).cloned()
    }

    fn take_pending(&self, key: usize) -> Option<Arc<Pending>> {
        self.pending.lock().take_where(|p| p.key == key)
    }
}

fn clamp_u8(v: u16) -> u8 {
    v.min(u16::from(u8::MAX)) as u8
}

fn depth(d: QueueDepth, current: u32) -> u16 {
    match d {
        QueueDepth::Set(v) => v,
        QueueDepth::Unchanged => current.min(u32::from(MAX_DEPTH)) as u16,
    }
}

/// Reports the failed setup `error` to the peer with a TERMINATE, if RFC 6581 section 8 names
/// one for it.
fn send_terminate(socket: &TcpSocket, error: HandshakeError, crc: bool) {
    let Some(term) = error.term() else { return };
    let mut frame = [0u8; MAX_FRAME_LEN];
    if let Ok(n) = terminate_fpdu(term, crc.then_some(KernelCrc32c), &mut frame) {
        if let Some(bytes) = frame.get(..n) {
            let _ = socket.send(bytes, MsgFlags::NOSIGNAL);
        }
        if let Ok(peer) = socket.peer_addr() {
            pr_debug!("{peer}: TERMINATE sent for a failed MPA exchange: {error:?}\n");
        }
    }
}

/// Counts and logs a connection set up by an MPA exchange (`role` says which side we were).
fn count_established(qp: &Qp, role: &str, socket: &TcpSocket, terms: &Terms) {
    qp.count_established(terms);
    if let Ok(peer) = socket.peer_addr() {
        pr_debug!(
            "{peer}: MPA revision {} established as {role}: CRC {}, IRD {} ORD {}, RTR {:?}\n",
            terms.revision,
            terms.crc,
            terms.ird,
            terms.ord,
            terms.rtr
        );
    }
}

/// Counts and logs an MPA exchange that failed (`why`).
fn count_failed(cm: &Cm, socket: &TcpSocket, why: &str) {
    cm.counters.cm(CmStat::Failed);
    if let Ok(peer) = socket.peer_addr() {
        pr_debug!("{peer}: MPA exchange failed: {why}\n");
    }
}

/// What a step of an MPA exchange came to.
enum Step<E> {
    /// The frame is not whole yet: the next `sk_data_ready` goes on.
    More,
    /// The state machine's event.
    Done(E),
    /// The stream ended or failed.
    Failed(Error),
}

/// Feeds what the socket has queued to `feed`, which returns how many bytes it used and its
/// event, if any: peeks, feeds, consumes what was used, until an event or until `feed` needs
/// more than has arrived. Never waits for the peer.
fn step<E>(socket: &TcpSocket, mut feed: impl FnMut(&[u8]) -> (usize, Option<E>)) -> Step<E> {
    let mut buf = [0u8; MAX_FRAME_LEN];
    loop {
        let n = match socket.recv(&mut buf, MsgFlags::PEEK | MsgFlags::DONTWAIT) {
            Ok(0) => return Step::Failed(ECONNRESET),
            Ok(n) => n,
            Err(e) if e == EAGAIN => return Step::More,
            Err(e) => return Step::Failed(e),
        };
        let Some(queued) = buf.get(..n) else {
            return Step::Failed(EINVAL);
        };
        let (used, event) = feed(queued);
        let mut left = used;
        while left > 0 {
            // Peeked before: these bytes are queued.
            match buf
                .get_mut(..left)
                .map(|b| socket.recv(b, MsgFlags::DONTWAIT))
            {
                Some(Ok(got)) if got > 0 => left -= got.min(left),
                Some(Err(e)) => return Step::Failed(e),
                _ => return Step::Failed(ECONNRESET),
            }
        }
        if let Some(event) = event {
            return Step::Done(event);
        }
        if used == 0 {
            return Step::More;
        }
    }
}

/// Socket callbacks that queue a connection's work when its peer sent bytes or its TCP state
/// changed (a FIN, a reset): the callbacks hold an `Arc` of it, until removed.
struct StepOnData<T> {
    item: Arc<T>,
    queue: Arc<OwnedQueue>,
}

impl<T> TcpCallbacks for StepOnData<T>
where
    T: WorkItem<Pointer = Arc<T>> + HasWork<T> + Send + Sync + 'static,
{
    fn data_ready(&self, _rx: &mut RxQueue<'_>) {
        let _ = self.queue.enqueue(self.item.clone());
    }

    fn state_change(&self, _state: TcpState) {
        let _ = self.queue.enqueue(self.item.clone());
    }
}

/// Has `item`'s work run whenever its socket has news, and once now for what came before.
fn step_on_data<T>(item: &Arc<T>, socket: &TcpSocket, queue: &Arc<OwnedQueue>) -> Result
where
    T: WorkItem<Pointer = Arc<T>> + HasWork<T> + Send + Sync + 'static,
{
    let callbacks = Arc::new(
        StepOnData {
            item: item.clone(),
            queue: queue.clone(),
        },
        GFP_KERNEL,
    )?;
    socket.install_callbacks(callbacks)?;
    let _ = queue.enqueue(item.clone());
    Ok(())
}

// ---- Passive side ----

/// A listening socket of an iw_cm id.
#[pin_data]
pub(crate) struct Listener {
    id: IwCmId,
    socket: TcpSocket,
    cm: Arc<Cm>,
    closed: AtomicBool,
    /// Connections in their MPA exchange, at most [`MAX_HANDSHAKES`].
    handshakes: AtomicU32,
    /// Held while a connection request is delivered to `id`, and by [`Self::close`]: once the
    /// listener is closed (iw_cm may then free `id`), nothing is delivered to it any more.
    #[pin]
    delivering: Mutex<()>,
    #[pin]
    work: Work<Listener>,
}

impl_has_work! {
    impl HasWork<Self> for Listener { self.work }
}

impl Listener {
    fn close(&self) {
        let _delivering = self.delivering.lock();
        self.closed.store(true, Ordering::Relaxed);
        self.socket.remove_callbacks();
        let _ = self.socket.shutdown(Shutdown::Both);
    }
}

/// The listener's work queues itself from `sk_data_ready`; it needs an `Arc` of itself there,
/// which the callbacks object holds.
struct ListenerCallbacks(Arc<Listener>);

impl TcpCallbacks for ListenerCallbacks {
    fn data_ready(&self, _rx: &mut RxQueue<'_>) {
        if !self.0.closed.load(Ordering::Relaxed) {
            let _ = self.0.cm.queue.enqueue(self.0.clone());
        }
    }
}

impl WorkItem for Listener {
    type Pointer = Arc<Listener>;

    fn run(this: Arc<Listener>) {
        let this = &this;
        while !this.closed.load(Ordering::Relaxed) {
            let Ok(socket) = this.socket.accept(true) else {
                return;
            };
            if this.handshakes.load(Ordering::Relaxed) >= MAX_HANDSHAKES
                && !this.cm.evict_oldest_handshake(this)
            {
                // Every exchange of the listener is already on its way out.
                let _ = socket.shutdown(Shutdown::Both);
                continue;
            }
            let _ = Pending::start(this, socket);
        }
    }
}

/// Connections a listener may have in their MPA exchange at once. One more closes the oldest
/// exchange: a peer that opens connections and stalls them keeps a legitimate one out only
/// while it opens more than [`MAX_HANDSHAKES`] in the time that one's exchange takes.
const MAX_HANDSHAKES: u32 = 64;

/// `iw_create_listen`. A wildcard address listens on the device's interface only (`ifindex`),
/// so that the listeners of several devices, rsiw or others, can share a port.
pub(crate) fn listen(cm: &Arc<Cm>, id: IwCmId, backlog: u32, ifindex: i32) -> Result {
    let local = id.local_addr()?;
    let socket = TcpSocket::new(&local)?;
    socket.set_reuseaddr();
    if local.is_ipv6() && id.afonly() {
        socket.set_v6only()?;
    }
    if local.ip().is_unspecified() {
        socket.bind_to_device(ifindex)?;
    }
    socket.bind(&local)?;
    socket.listen(backlog.clamp(1, 1024))?;
    let listener = Arc::pin_init(
        pin_init!(Listener {
            id,
            socket,
            cm: cm.clone(),
            closed: AtomicBool::new(false),
            handshakes: AtomicU32::new(0),
            delivering <- new_mutex!((), "Listener::delivering"),
            work <- new_work!("rsiw::Listener::work"),
        }),
        GFP_KERNEL,
    )?;
    cm.listeners.lock().insert(listener.clone(), GFP_KERNEL)?;
    let installed = Arc::new(ListenerCallbacks(listener.clone()), GFP_KERNEL)
        .map_err(Error::from)
        .and_then(|callbacks| listener.socket.install_callbacks(callbacks));
    if let Err(e) = installed {
        // iw_cm never destroys a listener it failed to create: the port goes now.
        let key = listener.id.key();
        if let Some(l) = cm.listeners.lock().take_where(|l| l.id.key() == key) {
            l.close();
        }
        return Err(e);
    }
    // Connections that came in before the callbacks were there.
    let _ = cm.queue.enqueue(listener);
    Ok(())
}

/// `iw_destroy_listen`.
pub(crate) fn unlisten(cm: &Cm, key: usize) -> Result {
    let listener = cm
        .listeners
        .lock()
        .take_where(|l| l.id.key() == key)
        .ok_or(EINVAL)?;
    listener.close();
    // Its pending connections go with it.
    loop {
        let next = cm
            .pending
            .lock()
            .take_where(|p| Arc::ptr_eq(&p.listener, &listener));
        match next {
            Some(p) => p.close(),
            None => return Ok(()),
        }
    }
}

/// A peer-to-peer connection accepted by the ULP, waiting for the initiator's RTR.
struct AwaitingRtr {
    hs: ResponderHandshake<KernelCrc32c>,
    qp: Arc<Qp>,
    id: IwCmId,
    crc: bool,
    large_fpdus: bool,
    ird: u16,
    ord: u16,
    /// The MPA revision of the exchange.
    revision: u8,
}

/// Where a pending connection is.
enum Stage {
    /// In its MPA exchange: reading the MPA Request.
    Request(ResponderHandshake<KernelCrc32c>),
    /// CONNECT_REQUEST delivered: waiting for the ULP's accept or reject.
    Delivered(ResponderHandshake<KernelCrc32c>),
    /// Accepted in the peer-to-peer model: waiting for the RTR.
    AwaitingRtr(AwaitingRtr),
    /// Handed to its QP, refused or closed.
    Over,
}

/// An accepted TCP connection before its QP takes it.
///
/// It is on the device's list from its start until it is over, so that unlisten and device
/// removal close it; while its stage waits for the peer, its socket's callbacks and its
/// deadline hold references to it.
#[pin_data]
pub(crate) struct Pending {
    /// Keys grow with each accepted connection: the smallest is the oldest.
    key: usize,
    listener: Arc<Listener>,
    /// In its MPA exchange, counted in its listener's handshakes.
    exchanging: AtomicBool,
    socket: Arc<TcpSocket>,
    #[pin]
    stage: Mutex<Stage>,
    /// Steps the exchange when bytes arrive.
    #[pin]
    work: Work<Pending, 0>,
    /// Closes it at its deadline.
    #[pin]
    deadline: DelayedWork<Pending, 1>,
}

impl_has_work! {
    impl HasWork<Self, 0> for Pending { self.work }
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self, 1> for Pending { self.deadline }
}

fn responder_config(cm: &Cm) -> ResponderConfig {
    ResponderConfig {
        crc: cm.settings.crc(),
        enhanced: true,
        max_ird: cm.settings.max_ird(),
        ord: cm.settings.max_ord(),
        min_ord: 0,
        rtr: cm.settings.rtr_kinds(),
        large_fpdus: cm.settings.large_fpdus(),
    }
}

impl Pending {
    /// Starts the MPA exchange of a connection `listener` accepted.
    fn start(listener: &Arc<Listener>, socket: TcpSocket) -> Result {
        let cm = &listener.cm;
        let socket = Arc::new(socket, GFP_KERNEL)?;
        let shared = socket.clone();
        let p = Arc::pin_init(
            pin_init!(Pending {
                key: cm.next_pending.fetch_add(1, Ordering::Relaxed),
                listener: listener.clone(),
                exchanging: AtomicBool::new(true),
                socket: shared,
                stage <- new_mutex!(
                    Stage::Request(ResponderHandshake::new(responder_config(cm), KernelCrc32c)),
                    "Pending::stage"
                ),
                work <- new_work!("rsiw::Pending::work"),
                deadline <- new_delayed_work!(cm.queue.clone(), "rsiw::Pending::deadline"),
            }),
            GFP_KERNEL,
        );
        let p = match p {
            Ok(p) => p,
            Err(e) => {
                let _ = socket.shutdown(Shutdown::Both);
                return Err(e);
            }
        };
        listener.handshakes.fetch_add(1, Ordering::Relaxed);
        // Listed first, so that unlisten and device removal close it too.
        if let Err(e) = cm.pending.lock().insert(p.clone(), GFP_KERNEL) {
            p.close();
            return Err(e);
        }
        let started = {
            // A close meanwhile found the stage over, or finds the callbacks and the deadline.
            let stage = p.stage.lock();
            if matches!(*stage, Stage::Over) {
                return Ok(());
            }
            DelayedWork::run_after(p.clone(), cm.settings.mpa_timeout_ms())
                && step_on_data(&p, &socket, &cm.queue).is_ok()
        };
        if !started {
            p.close();
        }
        Ok(())
    }

    /// Leaves the MPA exchange (the first call does): its listener counts one fewer.
    fn leave_exchange(&self) {
        if self.exchanging.swap(false, Ordering::Relaxed) {
            self.listener.handshakes.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Stops waiting for the peer: off the device's list, callbacks and deadline gone.
    fn retire(&self) {
        self.leave_exchange();
        drop(self.listener.cm.take_pending(self.key));
        drop(self.socket.remove_callbacks());
        drop(self.deadline.cancel());
    }

    /// Ends the connection. One the ULP accepted fails for it (see
    /// [`Qp::accepted_connection_failed`]).
    fn close(&self) {
        let stage = core::mem::replace(&mut *self.stage.lock(), Stage::Over);
        self.retire();
        let _ = self.socket.shutdown(Shutdown::Both);
        if let Stage::AwaitingRtr(a) = stage {
            a.qp.accepted_connection_failed(a.id);
        }
    }

    /// The MPA Request is in: iw_cm hears CONNECT_REQUEST.
    fn deliver_request(this: &Arc<Self>, private_data: &[u8], ird: u16, ord: u16) {
        let (Ok(local), Ok(remote)) = (this.socket.local_addr(), this.socket.peer_addr()) else {
            this.close();
            return;
        };
        pr_debug!("{remote}: MPA Request received (IRD {ird} ORD {ord})\n");
        // The ULP answers when it will: no deadline until then.
        drop(this.deadline.cancel());
        this.leave_exchange();
        // Until the request is delivered, the listener cannot close under us; one closed (or
        // a device removed) meanwhile took the connection off the list.
        let delivered = {
            let _delivering = this.listener.delivering.lock();
            let listed = this
                .listener
                .cm
                .pending
                .lock()
                .iter()
                .any(|p| Arc::ptr_eq(p, this));
            !this.listener.closed.load(Ordering::Relaxed)
                && listed
                && this
                    .listener
                    .id
                    .deliver(IwEvent::ConnectRequest {
                        provider_data: this.key,
                        local,
                        remote,
                        private_data,
                        ird: clamp_u8(ird),
                        ord: clamp_u8(ord),
                    })
                    .is_ok()
        };
        if !delivered {
            this.close();
        }
    }
}

impl WorkItem<0> for Pending {
    type Pointer = Arc<Pending>;

    fn run(this: Arc<Pending>) {
        let mut stage = this.stage.lock();
        match &mut *stage {
            Stage::Request(hs) => {
                let event = match step(&this.socket, |bytes: &[u8]| hs.on_bytes(bytes)) {
                    Step::More => return,
                    Step::Done(event) => Some(event),
                    Step::Failed(_) => None,
                };
                let Stage::Request(mut hs) = core::mem::replace(&mut *stage, Stage::Over) else {
                    return;
                };
                match event {
                    Some(ResponderEvent::ConnectRequest(request)) => {
                        let (ird, ord) = request.peer.map_or((0, 0), |p| (p.ird, p.ord));
                        let mut data = [0u8; MAX_FRAME_LEN];
                        let private = hs.peer_private_data();
                        let n = private.len().min(data.len());
                        data[..n].copy_from_slice(&private[..n]);
                        *stage = Stage::Delivered(hs);
                        drop(stage);
                        Pending::deliver_request(&this, &data[..n], ird, ord);
                    }
                    Some(ResponderEvent::Failed(error)) => {
                        // A request we cannot serve (markers, P2P, CRC policy): MPA Reject.
                        drop(stage);
                        let cm = &this.listener.cm;
                        cm.counters.cm(CmStat::RejectsSent);
                        if let Ok(peer) = this.socket.peer_addr() {
                            pr_debug!("{peer}: MPA Request refused: {error:?}\n");
                        }
                        let mut frame = [0u8; MAX_FRAME_LEN];
                        if let Ok(len) = hs.reject(&[], &mut frame) {
                            if let Some(bytes) = frame.get(..len) {
                                let _ = this.socket.send(bytes, MsgFlags::NOSIGNAL);
                            }
                        }
                        this.close();
                    }
                    _ => {
                        drop(stage);
                        count_failed(&this.listener.cm, &this.socket, "no MPA Request");
                        this.close();
                    }
                }
            }
            Stage::AwaitingRtr(a) => {
                let event = match step(&this.socket, |bytes: &[u8]| a.hs.on_bytes(bytes)) {
                    Step::More => return,
                    Step::Done(event) => Some(event),
                    Step::Failed(_) => None,
                };
                match event {
                    Some(ResponderEvent::Established(received)) => {
                        let Stage::AwaitingRtr(a) = core::mem::replace(&mut *stage, Stage::Over)
                        else {
                            return;
                        };
                        drop(stage);
                        this.retire();
                        rtr_received(&this.listener.cm, &this.socket, a, received);
                    }
                    Some(ResponderEvent::Failed(error)) => {
                        // E.g. an RTR of a kind not negotiated (RFC 6581 section 8: 2/0/7).
                        send_terminate(&this.socket, error, a.crc);
                        drop(stage);
                        let cm = &this.listener.cm;
                        if error.term().is_some() {
                            cm.counters.data(Stat::TerminateTxMpa, 1);
                        }
                        count_failed(cm, &this.socket, "RTR refused");
                        this.close();
                    }
                    _ => {
                        drop(stage);
                        count_failed(&this.listener.cm, &this.socket, "no RTR");
                        this.close();
                    }
                }
            }
            // Bytes behind the request (an early RTR) wait for the accept.
            Stage::Delivered(_) | Stage::Over => {}
        }
    }
}

impl WorkItem<1> for Pending {
    type Pointer = Arc<Pending>;

    fn run(this: Arc<Pending>) {
        let waiting = matches!(
            *this.stage.lock(),
            Stage::Request(_) | Stage::AwaitingRtr(_)
        );
        if waiting {
            count_failed(&this.listener.cm, &this.socket, "deadline");
            this.close();
        }
    }
}

/// The peer-to-peer initiator's RTR (`received`) came: the QP takes the connection, sending a
/// Read RTR's zero-length Read Response as its first FPDU, and iw_cm hears ESTABLISHED.
fn rtr_received(cm: &Cm, socket: &Arc<TcpSocket>, a: AwaitingRtr, received: ReceivedRtr) {
    let AwaitingRtr {
        hs,
        qp,
        id,
        crc,
        large_fpdus,
        ird,
        ord,
        revision,
    } = a;
    let mut response = [0u8; MAX_FRAME_LEN];
    let Ok(len) = hs.rtr_response(&mut response) else {
        let _ = socket.shutdown(Shutdown::Both);
        count_failed(cm, socket, "no RTR response");
        qp.accepted_connection_failed(id);
        return;
    };
    let first = response.get(..len).unwrap_or(&[]);
    let terms = Terms {
        revision,
        crc,
        ird,
        ord,
        rtr: RtrState::responder(Some(received)),
        large_fpdus,
    };
    let connected = &mut false;
    let attached = qp.attach(
        Established {
            socket: socket.clone(),
            cm_id: id,
            terms,
        },
        |socket, id, status| {
            let sent = status.and_then(|()| {
                if !first.is_empty() {
                    socket.send(first, MsgFlags::NOSIGNAL)?;
                }
                Ok(())
            });
            match sent {
                Ok(()) => {
                    let up = id.connected(Up::Established).map_err(|(_, e)| e)?;
                    *connected = true;
                    Ok(up)
                }
                Err(e) => {
                    // Accepted already: iw_cm hears ESTABLISHED and CLOSE.
                    if let Ok(up) = id.connected(Up::Established) {
                        drop(up);
                    }
                    Err(e)
                }
            }
        },
    );
    if attached.is_err() {
        let _ = socket.shutdown(Shutdown::Both);
    }
    if *connected {
        count_established(&qp, "responder", socket, &terms);
    } else {
        count_failed(cm, socket, "RTR response or attach failed");
    }
}

/// `iw_accept`. In the peer-to-peer model it returns once the MPA Reply is sent; the
/// connection's work takes the RTR.
pub(crate) fn accept(cm: &Cm, qp: Arc<Qp>, id: IwCmId, param: &IwConnParam<'_>) -> Result {
    let pending = cm.find_pending(id.provider_data()).ok_or(EINVAL)?;
    let mut frame = [0u8; MAX_FRAME_LEN];
    let ird = param.ird.min(u32::from(cm.settings.max_ird())) as u16;
    let ord = param.ord.min(u32::from(cm.settings.max_ord())) as u16;
    let mut stage = pending.stage.lock();
    let Stage::Delivered(mut hs) = core::mem::replace(&mut *stage, Stage::Over) else {
        return Err(EINVAL);
    };
    let Ok(Accepted {
        len,
        decision,
        established,
    }) = hs.accept(param.private_data, ird, ord, &mut frame)
    else {
        drop(stage);
        count_failed(cm, &pending.socket, "accept refused by the negotiation");
        pending.close();
        return Err(EINVAL);
    };
    let socket = pending.socket.clone();
    let reply = frame.get(..len).ok_or(EINVAL)?;
    let ird = depth(decision.local_ird, u32::from(ird));
    let ord = depth(decision.local_ord, u32::from(ord));
    if !established {
        // Peer-to-peer: the reply goes now, the connection is up once the RTR arrives.
        if let Err(e) = socket.send(reply, MsgFlags::NOSIGNAL) {
            drop(stage);
            pending.close();
            return Err(e);
        }
        *stage = Stage::AwaitingRtr(AwaitingRtr {
            hs,
            qp,
            id,
            crc: decision.use_crc,
            large_fpdus: decision.large_fpdus,
            ird,
            ord,
            revision: decision.revision,
        });
        drop(stage);
        // The RTR's own deadline; the work looks at what came already.
        if !DelayedWork::run_after(pending.clone(), cm.settings.mpa_timeout_ms()) {
            pending.close();
        }
        let _ = cm.queue.enqueue::<_, 0>(pending);
        return Ok(());
    }
    drop(stage);
    pending.retire();
    let terms = Terms {
        revision: decision.revision,
        crc: decision.use_crc,
        ird,
        ord,
        rtr: RtrState::None,
        large_fpdus: decision.large_fpdus,
    };
    let connected = &mut false;
    let attached = qp.attach(
        Established {
            socket: socket.clone(),
            cm_id: id,
            terms,
        },
        |socket, id, status| {
            // A QP that cannot take the connection fails iw_accept, which tells iw_cm.
            status?;
            socket.send(reply, MsgFlags::NOSIGNAL)?;
            let up = id.connected(Up::Established).map_err(|(_, e)| e)?;
            *connected = true;
            Ok(up)
        },
    );
    if attached.is_err() {
        let _ = socket.shutdown(Shutdown::Both);
    }
    if *connected {
        count_established(&qp, "responder", &socket, &terms);
    } else {
        count_failed(cm, &socket, "accept failed");
    }
    attached
}

/// `iw_reject`.
pub(crate) fn reject(cm: &Cm, id: IwCmId, private_data: &[u8]) -> Result {
    let pending = cm.find_pending(id.provider_data()).ok_or(EINVAL)?;
    let mut frame = [0u8; MAX_FRAME_LEN];
    let stage = core::mem::replace(&mut *pending.stage.lock(), Stage::Over);
    let refusal = match stage {
        Stage::Delivered(mut hs) => hs
            .reject(private_data, &mut frame)
            .map(Some)
            .map_err(|_| EINVAL),
        // Accepted, still waiting for its RTR: iw_cm destroys the id, which hears no more.
        Stage::AwaitingRtr(_) => Ok(None),
        _ => Err(EINVAL),
    };
    if let Ok(Some(len)) = refusal {
        if let Some(bytes) = frame.get(..len) {
            let _ = pending.socket.send(bytes, MsgFlags::NOSIGNAL);
        }
        cm.counters.cm(CmStat::RejectsSent);
        if let Ok(peer) = pending.socket.peer_addr() {
            pr_debug!("{peer}: MPA Request rejected by the ULP\n");
        }
    }
    pending.close();
    refusal.map(|_| ())
}
