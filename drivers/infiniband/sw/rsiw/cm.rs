// SPDX-License-Identifier: GPL-2.0

//! Connection management: the iw_cm provider verbs over kernel TCP sockets.
//!
//! - `iw_connect` connects TCP (blocking, in the caller's context, as the C siw does), sends
//!   the MPA Request and leaves the reply to a [`Connecting`] work item, which reports it to
//!   iw_cm as CONNECT_REPLY and attaches the connection to the QP.
//! - `iw_create_listen` binds and listens; the listener's `sk_data_ready` queues its work,
//!   which accepts sockets and starts a [`Pending`] connection for each: its work reads the
//!   MPA Request and reports it as CONNECT_REQUEST. `iw_accept` and `iw_reject` find the
//!   pending connection by the number given as provider data and answer it.
//!
//! The MPA exchange runs the pure state machines of `proto/mpa_handshake.rs`, reading with
//! `MSG_PEEK` and then consuming exactly what the machine used, so no byte of the stream after
//! the MPA frame is ever taken from the socket here: the QP's receive path sees all of them.
//! Every blocking receive has the MPA timeout.
//!
//! Peer-to-peer model (RFC 6581): with the device's `peer_to_peer` setting the initiator asks
//! for it, offering the device's RTR kinds; once accepted it sends the RTR message as the first
//! FPDU, before iw_cm (and the ULP) hear CONNECT_REPLY, so nothing can precede it. A responder
//! accepts it with the same kinds: `iw_accept` sends the MPA Reply and waits, in the caller's
//! context, for the RTR (answering a Read RTR with its zero-length Read Response) before it
//! reports ESTABLISHED; a wrong or missing RTR fails `iw_accept`, which iw_cm handles (it
//! cannot take a CLOSE before ESTABLISHED on the passive side). Failures of the setup that
//! RFC 6581 section 8 names are reported to the peer with a TERMINATE (layer 2, type 0). The
//! QP's engine starts knowing which RTR went by ([`RtrState`]), as the RTR takes a message
//! number.

use core::{
    net::SocketAddr,
    sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering},
};
use kernel::{
    net::tcp::{MsgFlags, RxQueue, Shutdown, TcpCallbacks, TcpSocket},
    new_mutex,
    owned_workqueue::OwnedQueue,
    prelude::*,
    rdma::iw_provider::{IwCmId, IwConnParam, IwEvent, Up, MAX_EVENT_PRIVATE_DATA},
    sync::{Arc, Mutex},
    time::{ktime_ms_delta, msecs_to_jiffies, Ktime},
    workqueue::{impl_has_work, new_work, Work, WorkItem},
};

use crate::{
    kernel_crc32c::KernelCrc32c,
    proto::{
        mpa::RtrKinds,
        mpa_handshake::{terminate_fpdu, HandshakeError},
        mpa_handshake::{
            Accepted, InitiatorEvent, InitiatorHandshake, ResponderEvent, ResponderHandshake,
            MAX_FRAME_LEN,
        },
        mpa_negotiation::{CrcPolicy, InitiatorConfig, QueueDepth, ResponderConfig},
        ord_ird::MAX_DEPTH,
        qp_engine::RtrState,
    },
    qp::{Established, Qp},
    settings::Settings,
    slots::Slots,
};

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
}

impl Cm {
    pub(crate) fn new(queue: Arc<OwnedQueue>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                listeners <- new_mutex!(Slots::new(), "Cm::listeners"),
                pending <- new_mutex!(Slots::new(), "Cm::pending"),
                next_pending: AtomicUsize::new(1),
                settings: Settings::new(),
                queue,
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
        let pending = self.pending.lock().take_all();
        for p in pending.iter() {
            let _ = p.socket.shutdown(Shutdown::Both);
        }
    }

    /// Closes the oldest connection of `listener` still in its MPA exchange, to make room for
    /// a new one. Returns whether there was one.
    fn evict_oldest_handshake(&self, listener: &Arc<Listener>) -> bool {
        let list = self.pending.lock();
        let oldest = list
            .iter()
            .filter(|p| Arc::ptr_eq(&p.listener, listener) && p.exchanging.load(Ordering::Relaxed))
            .min_by_key(|p| p.key);
        let Some(p) = oldest else {
            return false;
        };
        p.exchanging.store(false, Ordering::Relaxed);
        // Its exchange's receive returns; its work ends the handshake.
        let _ = p.socket.shutdown(Shutdown::Both);
        true
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
    }
}

/// Receives one MPA frame's worth of bytes for `feed`, which returns how many it used and
/// whether it is done: peeks, feeds, consumes what was used. The whole exchange takes at most
/// `timeout_ms` (the device's `mpa_timeout_ms`), however the peer spreads its bytes:
/// `ETIMEDOUT` then.
fn exchange(
    socket: &TcpSocket,
    timeout_ms: u32,
    feed: &mut dyn FnMut(&[u8]) -> (usize, bool),
) -> Result {
    let start = Ktime::ktime_get();
    // Each wait for the peer gets what is left of the time.
    let wait = || -> Result {
        let spent = ktime_ms_delta(Ktime::ktime_get(), start).max(0);
        let left = i64::from(timeout_ms).saturating_sub(spent);
        let left = u32::try_from(left)
            .ok()
            .filter(|&ms| ms > 0)
            .ok_or(ETIMEDOUT)?;
        socket.set_receive_timeout(msecs_to_jiffies(left));
        Ok(())
    };
    // A receive timeout reads as EAGAIN.
    let timed_out = |e: Error| if e == EAGAIN { ETIMEDOUT } else { e };
    let mut buf = [0u8; MAX_FRAME_LEN];
    loop {
        wait()?;
        let n = socket.recv(&mut buf, MsgFlags::PEEK).map_err(timed_out)?;
        if n == 0 {
            return Err(ECONNRESET);
        }
        let (used, done) = feed(buf.get(..n).ok_or(EINVAL)?);
        if used > 0 {
            let mut left = used;
            while left > 0 {
                let got = socket.recv(buf.get_mut(..left).ok_or(EINVAL)?, MsgFlags::NONE)?;
                if got == 0 {
                    return Err(ECONNRESET);
                }
                left -= got;
            }
        }
        if done {
            return Ok(());
        }
        if used == 0 {
            // The machine needs more than what is queued: wait for more than `n` bytes.
            let mut more = [0u8; MAX_FRAME_LEN];
            let want = (n + 1).min(more.len());
            wait()?;
            socket
                .recv(
                    more.get_mut(..want).ok_or(EINVAL)?,
                    MsgFlags::PEEK | MsgFlags::WAITALL,
                )
                .map_err(timed_out)?;
        }
    }
}

// ---- Active side ----

/// An `iw_connect` waiting for the MPA Reply.
#[pin_data]
struct Connecting {
    #[pin]
    state: Mutex<
        Option<(
            IwCmId,
            Arc<TcpSocket>,
            InitiatorHandshake,
            Arc<Qp>,
            u32,
            u32,
            bool,
        )>,
    >,
    /// How long the MPA exchange may take ([`exchange`]).
    timeout_ms: u32,
    #[pin]
    work: Work<Connecting>,
}

impl_has_work! {
    impl HasWork<Self> for Connecting { self.work }
}

impl WorkItem for Connecting {
    type Pointer = Arc<Connecting>;

    fn run(this: Arc<Connecting>) {
        let Some((id, socket, mut hs, qp, ird, ord, crc_required)) = this.state.lock().take()
        else {
            return;
        };
        let timeout_ms = this.timeout_ms;
        let mut event = None;
        let result = exchange(&socket, timeout_ms, &mut |bytes| match hs.on_bytes(bytes) {
            Ok((used, ev)) => {
                let done = ev.is_some();
                event = ev;
                (used, done)
            }
            Err(_) => (0, true),
        });
        let local = socket.local_addr();
        let remote = socket.peer_addr();
        let (Ok(local), Ok(remote)) = (local, remote) else {
            let _ = socket.shutdown(Shutdown::Both);
            return;
        };
        fn failed<'a>(
            (local, remote): (SocketAddr, SocketAddr),
            error: Error,
            private_data: &'a [u8],
            ird: u8,
            ord: u8,
        ) -> IwEvent<'a> {
            IwEvent::ConnectFailed {
                error,
                local,
                remote,
                private_data,
                ird,
                ord,
            }
        }
        let addrs = (local, remote);
        match (result, event) {
            (Ok(()), Some(InitiatorEvent::Connected(decision))) => {
                let ird = depth(decision.local_ird, ird);
                let ord = depth(decision.local_ord, ord);
                // The ULP hears the responder's own IRD and ORD (RFC 6581 section 9.1), which
                // rdma_cm reports as the initiator depth and responder resources; without
                // enhanced data (revision 1), our depths.
                let (ulp_ird, ulp_ord) = decision.peer.map_or((ird, ord), |p| (p.ird, p.ord));
                // Peer-to-peer: the RTR is the first FPDU, sent before anyone hears of the
                // connection.
                let mut rtr = [0u8; MAX_FRAME_LEN];
                let sent = hs
                    .rtr_fpdu(&mut rtr, KernelCrc32c)
                    .map_err(|_| EINVAL)
                    .and_then(|n| match rtr.get(..n) {
                        Some([]) => Ok(()),
                        Some(bytes) => socket.send(bytes, MsgFlags::NOSIGNAL).map(|_| ()),
                        None => Err(EINVAL),
                    });
                if let Err(e) = sent {
                    let _ = id.deliver(failed(addrs, e, &[], 0, 0));
                    let _ = socket.shutdown(Shutdown::Both);
                    return;
                }
                let data = hs.peer_private_data();
                if data.len() > MAX_EVENT_PRIVATE_DATA {
                    // More than iw_cm can hand the ULP: the connection fails, said so.
                    let _ = id.deliver(failed(addrs, EMSGSIZE, &[], 0, 0));
                    let _ = socket.shutdown(Shutdown::Both);
                    return;
                }
                let attached = qp.attach(
                    Established {
                        socket: socket.clone(),
                        cm_id: id,
                        crc: decision.use_crc,
                        ird,
                        ord,
                        rtr: RtrState::initiator(decision.rtr),
                        large_fpdus: decision.large_fpdus,
                    },
                    |_, id, status| {
                        let (ird, ord) = (clamp_u8(ulp_ird), clamp_u8(ulp_ord));
                        if let Err(e) = status {
                            let _ = id.deliver(failed(addrs, e, data, ird, ord));
                            return Err(ECONNRESET);
                        }
                        let (local, remote) = addrs;
                        id.connected(Up::Accepted {
                            local,
                            remote,
                            private_data: data,
                            ird,
                            ord,
                        })
                        .map_err(|(_, e)| e)
                    },
                );
                if attached.is_err() {
                    let _ = socket.shutdown(Shutdown::Both);
                }
            }
            (Ok(()), Some(InitiatorEvent::Rejected { peer })) => {
                // A reject carries the responder's IRD and ORD to the ULP too (section 9.1).
                let (ird, ord) = peer.map_or((0, 0), |p| (p.ird, p.ord));
                // Private data iw_cm cannot carry stays out of the refusal.
                let data = Some(hs.peer_private_data())
                    .filter(|d| d.len() <= MAX_EVENT_PRIVATE_DATA)
                    .unwrap_or(&[]);
                let _ = id.deliver(failed(
                    addrs,
                    ECONNREFUSED,
                    data,
                    clamp_u8(ird),
                    clamp_u8(ord),
                ));
                let _ = socket.shutdown(Shutdown::Both);
            }
            (Ok(()), Some(InitiatorEvent::Failed(error))) => {
                // E.g. no RTR kind in common (RFC 6581 section 8: TERMINATE 2/0/7).
                send_terminate(&socket, error, crc_required);
                let _ = id.deliver(failed(addrs, ECONNREFUSED, &[], 0, 0));
                let _ = socket.shutdown(Shutdown::Both);
            }
            (Err(e), _) => {
                let e = if e == EAGAIN { ETIMEDOUT } else { e };
                let _ = id.deliver(failed(addrs, e, &[], 0, 0));
                let _ = socket.shutdown(Shutdown::Both);
            }
            _ => {
                let _ = id.deliver(failed(addrs, ECONNRESET, &[], 0, 0));
                let _ = socket.shutdown(Shutdown::Both);
            }
        }
    }
}

/// `iw_connect`.
pub(crate) fn connect(cm: &Cm, qp: Arc<Qp>, id: IwCmId, param: &IwConnParam<'_>) -> Result {
    let remote = id.remote_addr()?;
    let local = id.local_addr()?;
    let socket = TcpSocket::new(&remote)?;
    socket.set_reuseaddr();
    if !local.ip().is_unspecified() || local.port() != 0 {
        socket.bind(&local)?;
    }
    socket.connect(&remote, false)?;
    let ird = param.ird.min(u32::from(cm.settings.max_ird()));
    let ord = param.ord.min(u32::from(cm.settings.max_ord()));
    let mut hs = InitiatorHandshake::new(InitiatorConfig {
        crc: cm.settings.crc(),
        enhanced: cm.settings.enhanced(),
        ird: ird as u16,
        ord: ord as u16,
        max_ird: cm.settings.max_ird(),
        peer_to_peer: cm.settings.peer_to_peer(),
        rtr: if cm.settings.peer_to_peer() {
            cm.settings.rtr_kinds()
        } else {
            RtrKinds::NONE
        },
        large_fpdus: cm.settings.large_fpdus(),
    });
    // Whether a TERMINATE for a failed setup carries a CRC: the reply may not say.
    let crc_required = cm.settings.crc() == CrcPolicy::Required;
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = hs
        .request(param.private_data, &mut frame)
        .map_err(|_| EINVAL)?;
    socket.send(frame.get(..len).ok_or(EINVAL)?, MsgFlags::NOSIGNAL)?;
    let socket = Arc::new(socket, GFP_KERNEL)?;
    let connecting = Arc::pin_init(
        pin_init!(Connecting {
            state <- new_mutex!(
                Some((id, socket, hs, qp, ird, ord, crc_required)),
                "Connecting::state"
            ),
            timeout_ms: cm.settings.mpa_timeout_ms(),
            work <- new_work!("rsiw::Connecting::work"),
        }),
        GFP_KERNEL,
    )?;
    let _ = cm.queue.enqueue(connecting);
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
            let Ok(socket) = Arc::new(socket, GFP_KERNEL) else {
                continue;
            };
            let key = this.cm.next_pending.fetch_add(1, Ordering::Relaxed);
            let pending = Arc::pin_init(
                pin_init!(Pending {
                    key,
                    listener: this.clone(),
                    exchanging: AtomicBool::new(true),
                    socket,
                    hs <- new_mutex!(None, "Pending::hs"),
                    work <- new_work!("rsiw::Pending::work"),
                }),
                GFP_KERNEL,
            );
            let Ok(p) = pending else {
                continue;
            };
            // Listed from the start, so that unlisten and device removal close it too; its
            // work's run ends the handshake.
            this.handshakes.fetch_add(1, Ordering::Relaxed);
            let listed = this.cm.pending.lock().insert(p.clone(), GFP_KERNEL).is_ok();
            if !listed || !matches!(this.cm.queue.enqueue(p.clone()), Some(Ok(()))) {
                drop(Handshake {
                    pending: p,
                    delivered: false,
                });
            }
        }
    }
}

/// Connections a listener may have in their MPA exchange at once: each blocks a worker of the
/// module's queue (256 of them) until its deadline, so that slow peers cannot take them all.
/// One more connection closes the oldest exchange: a peer that opens connections and stalls
/// them keeps a legitimate one out only while it opens more than [`MAX_HANDSHAKES`] in the
/// time that one's exchange takes.
const MAX_HANDSHAKES: u32 = 64;

/// The MPA exchange of a pending connection, counted against its listener's
/// [`MAX_HANDSHAKES`]. Ending it without having delivered the request to the ULP takes the
/// connection off the device's list and closes it.
struct Handshake {
    pending: Arc<Pending>,
    delivered: bool,
}

impl Drop for Handshake {
    fn drop(&mut self) {
        self.pending.exchanging.store(false, Ordering::Relaxed);
        let listener = &self.pending.listener;
        listener.handshakes.fetch_sub(1, Ordering::Relaxed);
        if !self.delivered {
            drop(listener.cm.take_pending(self.pending.key));
            let _ = self.pending.socket.shutdown(Shutdown::Both);
        }
    }
}

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
    let mut list = cm.pending.lock();
    while let Some(p) = list.take_where(|p| Arc::ptr_eq(&p.listener, &listener)) {
        let _ = p.socket.shutdown(Shutdown::Both);
    }
    Ok(())
}

/// An accepted TCP connection before the ULP's accept or reject.
#[pin_data]
pub(crate) struct Pending {
    /// Keys grow with each accepted connection: the smallest is the oldest.
    key: usize,
    listener: Arc<Listener>,
    /// In its MPA exchange, and not closed to make room for a newer one.
    exchanging: AtomicBool,
    socket: Arc<TcpSocket>,
    #[pin]
    hs: Mutex<Option<ResponderHandshake<KernelCrc32c>>>,
    #[pin]
    work: Work<Pending>,
}

impl_has_work! {
    impl HasWork<Self> for Pending { self.work }
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

impl WorkItem for Pending {
    type Pointer = Arc<Pending>;

    fn run(this: Arc<Pending>) {
        let mut handshake = Handshake {
            pending: this.clone(),
            delivered: false,
        };
        let cm = this.listener.cm.clone();
        let mut hs = ResponderHandshake::new(responder_config(&cm), KernelCrc32c);
        let mut event = None;
        let result = exchange(&this.socket, cm.settings.mpa_timeout_ms(), &mut |bytes| {
            let (used, ev) = hs.on_bytes(bytes);
            let done = ev.is_some();
            event = ev;
            (used, done)
        });
        if !this.exchanging.load(Ordering::Relaxed) {
            // Closed to make room for a newer connection.
            return;
        }
        let request = match (result, event) {
            (Ok(()), Some(ResponderEvent::ConnectRequest(r))) => r,
            (Ok(()), Some(ResponderEvent::Failed(_))) => {
                // A request we cannot serve (markers, P2P, CRC policy): MPA Reject.
                let mut frame = [0u8; MAX_FRAME_LEN];
                if let Ok(len) = hs.reject(&[], &mut frame) {
                    let _ = this
                        .socket
                        .send(&frame[..len.min(MAX_FRAME_LEN)], MsgFlags::NOSIGNAL);
                }
                let _ = this.socket.shutdown(Shutdown::Both);
                return;
            }
            _ => {
                let _ = this.socket.shutdown(Shutdown::Both);
                return;
            }
        };
        let (Ok(local), Ok(remote)) = (this.socket.local_addr(), this.socket.peer_addr()) else {
            return;
        };
        let (ird, ord) = request.peer.map_or((0, 0), |p| (p.ird, p.ord));
        let data = hs.peer_private_data();
        let mut copy = [0u8; MAX_FRAME_LEN];
        let n = data.len().min(copy.len());
        copy[..n].copy_from_slice(&data[..n]);
        *this.hs.lock() = Some(hs);
        // Until the request is delivered, the listener cannot close under us; one closed (or
        // a device removed) meanwhile took the connection off the list.
        let _delivering = this.listener.delivering.lock();
        let listed = cm.pending.lock().iter().any(|p| Arc::ptr_eq(p, &this));
        if this.listener.closed.load(Ordering::Relaxed) || !listed {
            return;
        }
        handshake.delivered = this
            .listener
            .id
            .deliver(IwEvent::ConnectRequest {
                provider_data: this.key,
                local,
                remote,
                private_data: &copy[..n],
                ird: clamp_u8(ird),
                ord: clamp_u8(ord),
            })
            .is_ok();
    }
}

/// `iw_accept`.
pub(crate) fn accept(cm: &Cm, qp: Arc<Qp>, id: IwCmId, param: &IwConnParam<'_>) -> Result {
    let pending = cm.take_pending(id.provider_data()).ok_or(EINVAL)?;
    let mut frame = [0u8; MAX_FRAME_LEN];
    let ird = param.ird.min(u32::from(cm.settings.max_ird())) as u16;
    let ord = param.ord.min(u32::from(cm.settings.max_ord())) as u16;
    let accepted = {
        let mut hs = pending.hs.lock();
        let hs = hs.as_mut().ok_or(EINVAL)?;
        hs.accept(param.private_data, ird, ord, &mut frame)
    };
    let Ok(Accepted {
        len,
        decision,
        established,
    }) = accepted
    else {
        let _ = pending.socket.shutdown(Shutdown::Both);
        return Err(EINVAL);
    };
    let socket = pending.socket.clone();
    let reply = frame.get(..len).ok_or(EINVAL)?;
    let mut rtr = RtrState::None;
    let mut rtr_response = [0u8; MAX_FRAME_LEN];
    let mut rtr_response_len = 0;
    if !established {
        // Peer-to-peer: the reply goes now, the connection is up once the RTR arrives.
        socket.send(reply, MsgFlags::NOSIGNAL)?;
        let mut hs = pending.hs.lock();
        let hs = hs.as_mut().ok_or(EINVAL)?;
        let mut event = None;
        let result = exchange(&socket, cm.settings.mpa_timeout_ms(), &mut |bytes| {
            let (used, ev) = hs.on_bytes(bytes);
            let done = ev.is_some();
            event = ev;
            (used, done)
        });
        let received = match (result, event) {
            (Ok(()), Some(ResponderEvent::Established(r))) => r,
            (Ok(()), Some(ResponderEvent::Failed(error))) => {
                // E.g. an RTR of a kind not negotiated (RFC 6581 section 8: 2/0/7).
                send_terminate(&socket, error, decision.use_crc);
                let _ = socket.shutdown(Shutdown::Both);
                return Err(ECONNREFUSED);
            }
            (Err(e), _) => {
                let _ = socket.shutdown(Shutdown::Both);
                return Err(if e == EAGAIN { ETIMEDOUT } else { e });
            }
            _ => {
                let _ = socket.shutdown(Shutdown::Both);
                return Err(ECONNRESET);
            }
        };
        // A Read RTR is answered by a zero-length Read Response, our first FPDU.
        rtr_response_len = hs.rtr_response(&mut rtr_response).map_err(|_| EINVAL)?;
        rtr = RtrState::responder(Some(received));
    }
    let ird = depth(decision.local_ird, u32::from(ird));
    let ord = depth(decision.local_ord, u32::from(ord));
    let first = if established {
        reply
    } else {
        rtr_response.get(..rtr_response_len).ok_or(EINVAL)?
    };
    let attached = qp.attach(
        Established {
            socket: socket.clone(),
            cm_id: id,
            crc: decision.use_crc,
            ird,
            ord,
            rtr,
            large_fpdus: decision.large_fpdus,
        },
        |socket, id, status| {
            // A QP that cannot take the connection fails iw_accept, which tells iw_cm.
            status?;
            if !first.is_empty() {
                socket.send(first, MsgFlags::NOSIGNAL)?;
            }
            id.connected(Up::Established).map_err(|(_, e)| e)
        },
    );
    if attached.is_err() {
        let _ = socket.shutdown(Shutdown::Both);
    }
    attached
}

/// `iw_reject`.
pub(crate) fn reject(cm: &Cm, id: IwCmId, private_data: &[u8]) -> Result {
    let pending = cm.take_pending(id.provider_data()).ok_or(EINVAL)?;
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = {
        let mut hs = pending.hs.lock();
        let hs = hs.as_mut().ok_or(EINVAL)?;
        hs.reject(private_data, &mut frame).map_err(|_| EINVAL)?
    };
    let _ = pending
        .socket
        .send(frame.get(..len).ok_or(EINVAL)?, MsgFlags::NOSIGNAL);
    let _ = pending.socket.shutdown(Shutdown::Both);
    Ok(())
}
