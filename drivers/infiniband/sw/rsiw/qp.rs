// SPDX-License-Identifier: GPL-2.0

//! Queue pairs, with their data path.
//!
//! The protocol work is [`QpEngine`]'s (`proto/qp_engine.rs`); this file gives it a home:
//!
//! - a kernel consumer's send and receive queues are rings here, filled by
//!   `post_send`/`post_recv`; a process's are rings in memory it shares with the kernel
//!   ([`UserRings`]), filled by the provider library, with `post_send` as the doorbell;
//! - received bytes reach the engine in the socket's `sk_data_ready` (softirq), under the QP's
//!   bottom-half lock, and are placed straight into the consumer's memory;
//! - FPDUs leave from a work item (process context), or right from a process's doorbell: it
//!   asks the engine for a buffer of FPDUs, drops the lock and writes them to the socket
//!   without waiting for room ([`crate::tx`]). What TCP cannot take yet waits in the QP until
//!   the socket's `write_space` queues the work again, so a peer that stops reading holds
//!   up nothing but its own QP. The same work item runs the connection's end (flush, close,
//!   iw_cm events), so that never runs in softirq context;
//! - completions go to the send or receive [`Cq`].
//!
//! # States
//!
//! A QP is idle (RESET/INIT/RTR, work requests only queue) until the connection manager
//! ([`crate::cm`]) attaches an established connection: then RTS. A graceful close (the ULP's
//! `rdma_disconnect`, which iw_cm turns into a move to SQD) half-closes TCP and waits for the
//! peer's close (in ERROR it has nothing left to close and succeeds); an abrupt one (ERROR), a
//! TERMINATE either way, or the peer closing, ends the connection at once: ERROR, every
//! outstanding work request flushed, iw_cm told (DISCONNECT if the peer started it, then
//! CLOSE). In ERROR, new work requests complete at once as flushed, which is what
//! `ib_drain_qp` relies on.

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::{
    c_str,
    net::tcp::{RxQueue, Shutdown, TcpCallbacks, TcpSocket, TcpState},
    new_mutex, new_spinlock_bh,
    owned_workqueue::OwnedQueue,
    prelude::*,
    rdma::{
        fixed_ring::FixedRing,
        provider::{
            async_event::{QpEvent, QpEvents},
            iw_provider::{ConnectedId, IwCmId, Up},
            memory_region::DmaRange,
            objects::{PdId, QpHandle, QpInitAttributes, QpModify, QpQuery, QueuePair},
            restrack::RestrackAttrs,
            work_request::{RecvWr, SendWr},
        },
    },
    sync::{lock::spinlock_bh::BhDisabled, Arc, Mutex, SpinLockBh},
    workqueue::{impl_has_work, new_work, Work, WorkItem},
    xarray::{Irq, XArray},
};

use crate::{
    counters::Counters,
    cq::Cq,
    kernel_crc32c::KernelCrc32c,
    mr::{LocalAccess, LocalError, Mr, MrTable},
    proto::{
        mpa::RtrKind,
        pieces::Pieces,
        placement::{self, Grant},
        qp_engine::{
            AtomicOp, Completion, EngineConfig, Outstanding, PayloadSource, Pending, QpContext,
            QpEngine, RecvRequest, RtrState, SendRequest, SlotStorage, Transmitted, WcOpcode,
            WcStatus,
        },
        qp_event::EventKind,
        terminate::TermError,
        work_request::SgeEntry,
    },
    quota::Place,
    sge::QpSge,
    srq::Srq,
    tx::{Refs, Sent, Transmitter, TxBuffers, TxTarget},
    user_rings::{UserRings, INLINE_LKEY},
    verbs_wr,
};

mod context;
mod report;
mod rx;
use context::{Ctx, MrCache};

/// `IB_QPS_*` values the verbs use.
mod ib_state {
    pub(super) const RESET: u32 = 0;
    pub(super) const INIT: u32 = 1;
    pub(super) const RTR: u32 = 2;
    pub(super) const RTS: u32 = 3;
    pub(super) const SQD: u32 = 4;
    pub(super) const ERR: u32 = 6;
}

/// Bytes of FPDUs the transmit work builds per `sendmsg`.
const TX_BUFFER: usize = 64 * 1024;

/// The iWARP state of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Not connected yet (RESET, INIT or RTR to the verbs).
    Idle(u32),
    /// Connected.
    Rts,
    /// Closing gracefully: TCP half-closed, waiting for the peer.
    Closing,
    /// Failed or closed: work requests are flushed.
    Error,
}

/// Where the work requests wait.
// One per QP, built in place and never moved: boxing the process's queues (which hold the
// entries they decode) would add a pointer hop to every message.
#[allow(clippy::large_enum_variant)]
enum WorkQueues {
    /// A kernel consumer's rings.
    Kernel {
        sq: FixedRing<SendRequest<QpSge>>,
        rq: FixedRing<RecvRequest<QpSge>>,
    },
    /// A process's rings.
    User(UserRings),
    /// Destroyed: a process's rings went back to it.
    Released,
}

/// What the engine's context borrows besides the engine.
struct Queues {
    state: State,
    /// The terms of the connection, once there is one.
    terms: Option<Terms>,
    work: WorkQueues,
    /// The regions each kind of access used last.
    mr_cache: MrCache,
    /// The QP counter it is bound to, which its counts go to instead of the device's.
    counter: Option<Arc<Counters>>,
}

/// The engine's per-slot state, on the heap (too big for a kernel stack).
struct HeapSlots {
    outstanding: KVec<Outstanding<QpSge>>,
    pending: KVec<Pending>,
}

impl HeapSlots {
    fn new() -> Result<Self> {
        let depth = usize::from(crate::proto::ord_ird::MAX_DEPTH);
        Ok(Self {
            outstanding: KVec::from_elem(Outstanding::EMPTY, depth, GFP_KERNEL)?,
            pending: KVec::from_elem(Pending::EMPTY, depth, GFP_KERNEL)?,
        })
    }
}

impl SlotStorage<QpSge> for HeapSlots {
    fn outstanding(&self) -> &[Outstanding<QpSge>] {
        &self.outstanding
    }
    fn outstanding_mut(&mut self) -> &mut [Outstanding<QpSge>] {
        &mut self.outstanding
    }
    fn pending(&self) -> &[Pending] {
        &self.pending
    }
    fn pending_mut(&mut self) -> &mut [Pending] {
        &mut self.pending
    }
}

/// The data path of one connection.
type Engine = QpEngine<KernelCrc32c, HeapSlots, QpSge>;

/// The part of a QP under its bottom-half lock.
struct Inner {
    engine: Option<KBox<Engine>>,
    queues: Queues,
    /// Room for the SQ head while the engine looks at it, decoded there in place.
    sq_head: SendRequest<QpSge>,
}

/// The connection of a QP, used from process context.
struct Connection {
    socket: Arc<TcpSocket>,
    /// iw_cm's id while iw_cm thinks the connection up; CLOSE goes when it is dropped.
    cm_id: Option<ConnectedId>,
}

/// Flags of [`Qp::flags`].
mod flag {
    /// The peer closed its side of TCP.
    pub(super) const PEER_CLOSED: u32 = 1;
    /// The engine terminated the stream.
    pub(super) const TERMINATED: u32 = 2;
    /// The QP is being destroyed.
    pub(super) const DEAD: u32 = 4;
    /// The ULP asked for an abrupt close.
    pub(super) const ABORT: u32 = 8;
}

/// A kernel QP.
#[pin_data]
pub(crate) struct Qp {
    pub(crate) qpn: u32,
    pub(crate) handle: QpHandle,
    pd: PdId,
    mrs: Arc<MrTable>,
    scq: Arc<Cq>,
    rcq: Arc<Cq>,
    signal_all: bool,
    caps: QpInitAttributes,
    /// The shared receive queue its receives come from, if any.
    srq: Option<Arc<Srq>>,
    /// Raises its asynchronous events.
    events: QpEvents,
    flags: AtomicU32,
    /// What starts the transmitter again.
    tx_wake: TxWake,
    #[pin]
    inner: SpinLockBh<Inner>,
    #[pin]
    connection: Mutex<Option<Connection>>,
    #[pin]
    tx: Mutex<Transmitter>,
    kicker: Arc<Kicker>,
    /// The module's workqueue, which runs `kicker`.
    queue: Arc<OwnedQueue>,
    /// The device's counters, which the engine's counts go to.
    counters: Arc<Counters>,
    /// Its place among the device's QPs.
    place: Place,
    /// The device's QPs by number, and whether this QP is listed there ([`Qp::list`]).
    table: Arc<QpTable>,
    listed: AtomicBool,
}

/// What starts a QP's transmitter again, besides a process's doorbell.
struct TxWake {
    /// A transmission found the socket full and waits for its `write_space`.
    blocked: AtomicBool,
    /// Send requests were queued in RTS since the transmitter was last started for a chain.
    queued: AtomicBool,
}

/// A device's QPs by number: what iw_cm finds them by (`iw_get_qp`, with interrupts
/// disabled).
pub(crate) type QpTable = XArray<Qp, Irq>;

/// The work item of a QP. It is its own object so that code holding only `&Qp` (the verbs,
/// the socket callbacks) can queue it; it holds the QP until the QP is destroyed.
#[pin_data]
struct Kicker {
    #[pin]
    qp: SpinLockBh<Option<Arc<Qp>>>,
    #[pin]
    work: Work<Kicker>,
}

impl_has_work! {
    impl HasWork<Self> for Kicker { self.work }
}

impl WorkItem for Kicker {
    type Pointer = Arc<Kicker>;

    fn run(this: Arc<Kicker>) {
        let qp = this.qp.lock().clone();
        if let Some(qp) = qp {
            qp.transmit();
            qp.check_end();
        }
    }
}

/// An established connection.
pub(crate) struct Established {
    pub(crate) socket: Arc<TcpSocket>,
    pub(crate) cm_id: IwCmId,
    pub(crate) terms: Terms,
}

/// The terms the MPA exchange set up a connection on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Terms {
    /// The MPA revision.
    pub(crate) revision: u8,
    pub(crate) crc: bool,
    pub(crate) ird: u16,
    pub(crate) ord: u16,
    /// The RTR message of a peer-to-peer connection, exchanged by the connection manager.
    pub(crate) rtr: RtrState,
    /// Both sides said they take FPDUs larger than one TCP segment.
    pub(crate) large_fpdus: bool,
}

/// The FPDU size for `socket` now: one TCP segment, as large as the path's segments, so that
/// FPDUs and segments line up for the receiver; with `large`, one GSO packet of segments (MPA
/// caps either at 64 KiB), which the receiver takes in one go.
fn fpdu_size(socket: &TcpSocket, large: bool) -> usize {
    let segments = if large { socket.gso_segments() } else { 1 };
    crate::proto::segmenter::fpdu_size(socket.mss().max(128), segments.into())
}

/// The number the engine's placement checks know the QP's PD by.
const PD_NUMBER: u32 = 1;

impl Qp {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        qpn: u32,
        handle: QpHandle,
        pd: PdId,
        mrs: Arc<MrTable>,
        scq: Arc<Cq>,
        rcq: Arc<Cq>,
        caps: QpInitAttributes,
        place: Place,
        table: Arc<QpTable>,
        queue: Arc<OwnedQueue>,
        counters: Arc<Counters>,
        user: Option<UserRings>,
        srq: Option<Arc<Srq>>,
        events: QpEvents,
    ) -> Result<Arc<Self>> {
        let tx = Transmitter {
            target: None,
            buffers: TxBuffers::new(TX_BUFFER)?,
            fin_after_unsent: false,
        };
        let kicker = Arc::pin_init(
            pin_init!(Kicker {
                qp <- new_spinlock_bh!(None, "Kicker::qp"),
                work <- new_work!("rsiw::Qp::work"),
            }),
            GFP_KERNEL,
        )?;
        let work = match user {
            Some(u) => WorkQueues::User(u),
            None => WorkQueues::Kernel {
                sq: FixedRing::new(caps.max_send_wr as usize, GFP_KERNEL)?,
                rq: FixedRing::new(caps.max_recv_wr.max(1) as usize, GFP_KERNEL)?,
            },
        };
        let queues = Queues {
            state: State::Idle(ib_state::RESET),
            terms: None,
            work,
            mr_cache: MrCache::default(),
            counter: None,
        };
        let own_kicker = kicker.clone();
        let qp = Arc::pin_init(
            pin_init!(Self {
                qpn,
                handle,
                pd,
                mrs,
                scq,
                rcq,
                signal_all: caps.signal_all,
                caps,
                srq,
                events,
                flags: AtomicU32::new(0),
                tx_wake: TxWake {
                    blocked: AtomicBool::new(false),
                    queued: AtomicBool::new(false),
                },
                inner <- new_spinlock_bh!(
                    Inner {
                        engine: None,
                        queues,
                        sq_head: SendRequest::EMPTY,
                    },
                    "Qp::inner"
                ),
                connection <- new_mutex!(None, "Qp::connection"),
                tx <- new_mutex!(tx, "Qp::tx"),
                kicker: own_kicker,
                queue,
                counters,
                place,
                table,
                listed: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )?;
        *kicker.qp.lock() = Some(qp.clone());
        Ok(qp)
    }

    /// Moves the QP to `state` (under its lock, whose `queues` these are).
    fn set_state(&self, queues: &mut Queues, state: State) {
        if queues.state != state {
            pr_debug!("QP {}: {:?} -> {:?}\n", self.qpn, queues.state, state);
            queues.state = state;
        }
    }

    /// Where the QP counts: its QP counter, or the device's counters (`queues` is under its
    /// lock).
    fn sink<'a>(&'a self, queues: &'a Queues) -> &'a Counters {
        queues.counter.as_deref().unwrap_or(&self.counters)
    }

    /// Queues the QP's work.
    fn kick(&self) {
        if self.flags.load(Ordering::Relaxed) & flag::DEAD == 0 {
            // Already queued is fine: the queued run sees the new work.
            let _ = self.queue.enqueue(self.kicker.clone());
        }
    }

    /// Gives the QP the engine of connection `est` and moves it to RTS.
    fn ready_engine(&self, est: &Established) -> Result {
        let fpdu_size = fpdu_size(&est.socket, est.terms.large_fpdus);
        let config = EngineConfig {
            crc: est.terms.crc,
            fpdu_size,
            pd: PD_NUMBER,
            ird: est.terms.ird,
            ord: est.terms.ord,
            rtr: est.terms.rtr,
        };
        let engine = KBox::new(
            QpEngine::with_slots(config, KernelCrc32c, HeapSlots::new()?),
            GFP_KERNEL,
        )?;
        let mut inner = self.inner.lock();
        if inner.queues.state == State::Error {
            return Err(ECONNABORTED);
        }
        inner.engine = Some(engine);
        inner.queues.terms = Some(est.terms);
        self.set_state(&mut inner.queues, State::Rts);
        Ok(())
    }

    /// The connection manager attaches an established connection: the QP goes to RTS, then
    /// `announce` tells the peer and iw_cm (the MPA reply, ESTABLISHED or CONNECT_REPLY: the
    /// ULP must find the QP in RTS when it hears), then data flows. If the QP cannot take the
    /// connection, `announce` gets the error instead (to report a failed connect). If
    /// `announce` fails, iw_cm has not seen the connection up: the QP goes to ERROR without a
    /// CLOSE. Otherwise it returns the id iw_cm hears CLOSE on, which the QP keeps until the
    /// connection ends.
    pub(crate) fn attach(
        self: &Arc<Self>,
        est: Established,
        announce: impl FnOnce(&TcpSocket, IwCmId, Result) -> Result<ConnectedId>,
    ) -> Result {
        let ready = self.ready_engine(&est);
        let cm_id = est.cm_id;
        if let Err(e) = ready {
            let _ = announce(&est.socket, cm_id, Err(e));
            return Err(e);
        }
        est.socket.set_nodelay();
        let cm_id = match announce(&est.socket, cm_id, Ok(())) {
            Ok(connected) => connected,
            Err(e) => {
                self.to_error();
                return Err(e);
            }
        };
        let socket = est.socket.clone();
        self.tx.lock().target = Some(TxTarget {
            socket: socket.clone(),
            large_fpdus: est.terms.large_fpdus,
        });
        *self.connection.lock() = Some(Connection {
            socket: est.socket,
            cm_id: Some(cm_id),
        });
        if socket.install_callbacks(self.clone()).is_err() {
            // ESTABLISHED was delivered: the connection ends as any other does, the QP in
            // error and iw_cm told with CLOSE.
            self.flags.fetch_or(flag::ABORT, Ordering::Relaxed);
            self.end(false);
            return Ok(());
        }
        // iw_cm holds the QP from `announce` until it hears CLOSE. A destroy or a move to ERROR
        // that came after `announce` but before the connection was stored found nothing to
        // close: the connection ends here, or the destroy would wait for iw_cm for ever.
        if self.inner.lock().queues.state == State::Error {
            drop(socket.remove_callbacks());
            self.end(false);
            return Ok(());
        }
        socket.poke_data_ready();
        // A FIN or reset that came before the callbacks were there (the peer may close right
        // after it heard the connection was up) is not announced again; the bytes before it
        // were taken just above.
        self.state_change(socket.state());
        self.kick();
        Ok(())
    }

    /// A connection accepted for this QP failed before it was attached (a peer-to-peer
    /// initiator's RTR did not come): the QP goes to ERROR, and iw_cm, which has no way to hear
    /// of a passive connection failing once `iw_accept` returned, hears it come up and close.
    pub(crate) fn accepted_connection_failed(&self, id: IwCmId) {
        self.to_error();
        if let Ok(up) = id.connected(Up::Established) {
            // CLOSE.
            drop(up);
        }
    }

    /// Runs the engine with its context (which may take payload by reference into `refs`) and
    /// its room for the SQ head.
    fn with_engine<R>(
        &self,
        refs: Option<Refs<'_>>,
        f: impl FnOnce(&mut Engine, &mut Ctx<'_>, &mut SendRequest<QpSge>) -> R,
    ) -> Option<R> {
        let mut guard = self.inner.lock();
        let (inner, bh) = guard.with_bh_disabled();
        let Inner {
            engine,
            queues,
            sq_head,
        } = inner;
        let engine = engine.as_mut()?;
        let mut ctx = Ctx {
            queues,
            qp: self,
            flushing: false,
            refs,
            bh,
        };
        Some(f(engine, &mut ctx, sq_head))
    }

    /// Builds FPDUs and writes them to the socket until the engine has nothing more or the
    /// socket no room (see [`crate::tx`]). The lock also keeps transmissions in the order the
    /// engine built them. Returns whether the QP was connected and in RTS.
    fn transmit(&self) -> bool {
        let mut guard = self.tx.lock();
        let Transmitter {
            target,
            buffers,
            fin_after_unsent,
        } = &mut *guard;
        let Some(target) = target.as_ref() else {
            return false;
        };
        // Until the engine says otherwise: a transmission that waits for room is connected.
        let mut rts = true;
        let socket = &*target.socket;
        // TCP's segment size grows after the handshake (and changes with the path): messages
        // started from here on follow it.
        let fpdu_size = fpdu_size(socket, target.large_fpdus);
        loop {
            if self.flags.load(Ordering::Relaxed) & (flag::DEAD | flag::ABORT) != 0 {
                return true;
            }
            let sent = match buffers.flush(socket) {
                Ok(true) => {
                    if core::mem::take(fin_after_unsent) {
                        // A graceful close waited for the rest; the peer's close ends it.
                        let _ = socket.shutdown(Shutdown::Write);
                    }
                    let (out, refs, budget) = buffers.begin();
                    let t = self
                        .with_engine(refs, |engine, ctx, sq_head| {
                            rts = ctx.queues.state == State::Rts;
                            if !rts && !engine.wants_transmit() {
                                return Transmitted::default();
                            }
                            engine.set_fpdu_size(fpdu_size);
                            let t = engine.transmit_by_reference(ctx, sq_head, out, budget);
                            let sink = self.sink(ctx.queues);
                            engine.take_tx_stats(|s, n| sink.data(s, n));
                            if engine.is_terminated() {
                                self.flags.fetch_or(flag::TERMINATED, Ordering::Relaxed);
                            }
                            t
                        })
                        .unwrap_or_default();
                    buffers.finish(socket, t)
                }
                Ok(false) => Ok(Sent::Blocked),
                Err(e) => Err(e),
            };
            match sent {
                Ok(Sent::More) => {}
                Ok(Sent::Idle) => return rts,
                Ok(Sent::Blocked) => {
                    self.wait_for_room(socket);
                    return rts;
                }
                Err(_) => {
                    self.flags.fetch_or(flag::PEER_CLOSED, Ordering::Relaxed);
                    return rts;
                }
            }
        }
    }

    /// The socket had no room for a transmission: its `write_space` queues the work once it
    /// has. Room that came before the flag was up had no one to tell, so it is looked for
    /// once more after.
    fn wait_for_room(&self, socket: &TcpSocket) {
        self.tx_wake.blocked.store(true, Ordering::SeqCst);
        if socket.is_writeable() && self.tx_wake.blocked.swap(false, Ordering::SeqCst) {
            self.kick();
        }
    }

    /// Ends the connection if something asked for it.
    fn check_end(&self) {
        let flags = self.flags.load(Ordering::Relaxed);
        if flags & (flag::PEER_CLOSED | flag::TERMINATED | flag::ABORT | flag::DEAD) != 0 {
            self.end(flags & flag::PEER_CLOSED != 0);
        }
    }

    /// The QP to ERROR: every outstanding and queued work request completes as flushed and
    /// the engine goes.
    fn to_error(&self) {
        let mut guard = self.inner.lock();
        let (inner, bh) = guard.with_bh_disabled();
        let Inner { engine, queues, .. } = inner;
        let was_in_error = queues.state == State::Error;
        self.set_state(queues, State::Error);
        let mut ctx = Ctx {
            queues,
            qp: self,
            flushing: true,
            refs: None,
            bh,
        };
        match engine.as_mut() {
            Some(e) => {
                e.flush(&mut ctx);
                let sink = self.sink(ctx.queues);
                e.take_stats(|s, n| sink.data(s, n));
            }
            None => ctx.flush_queues(),
        }
        *engine = None;
        drop(guard);
        if self.srq.is_some() && !was_in_error {
            // No receive will be taken from the SRQ any more (`ib_drain_qp` waits for this).
            self.events.raise(QpEvent::LastWqeReached);
        }
    }

    /// Ends the connection: the QP to ERROR, everything flushed, TCP closed, iw_cm told.
    fn end(&self, peer_started: bool) {
        let mut failed = None;
        {
            let guard = self.inner.lock();
            if let Some(e) = guard.engine.as_ref() {
                if let Some(error) = e.termination() {
                    // A protection violation found here is an access error; anything else,
                    // and whatever the peer reported, is fatal.
                    failed = Some(if e.peer_terminated() {
                        EventKind::Fatal
                    } else {
                        EventKind::for_term_error(error)
                    });
                    let (layer, kind, code) =
                        (error.layer() as u8, error.error_type(), error.error_code());
                    let by = if e.peer_terminated() { "peer" } else { "rsiw" };
                    pr_debug!(
                        "QP {}: terminated by {by}: {error:?} (layer {layer}, type {kind}, code {code:#x})\n",
                        self.qpn
                    );
                }
            }
        }
        self.to_error();
        // The stream failed (TERMINATE sent or received): the QP is in error.
        match failed {
            Some(EventKind::AccessError) => self.events.raise(QpEvent::AccessError),
            Some(_) => self.events.raise(QpEvent::Fatal),
            None => {}
        }
        let connection = self.connection.lock().take();
        if let Some(mut c) = connection {
            c.socket.remove_callbacks();
            let _ = c.socket.shutdown(Shutdown::Both);
            // What TCP had no room for goes with the connection.
            let mut tx = self.tx.lock();
            tx.target = None;
            tx.buffers.discard_unsent();
            tx.fin_after_unsent = false;
            drop(tx);
            if let Some(id) = c.cm_id.take() {
                if peer_started {
                    let _ = id.disconnect(Ok(()));
                }
                id.close();
            }
        }
    }

    fn post_send_inner(&self, wr: &SendWr<'_>) -> Result {
        let request = verbs_wr::send_request(wr, self.signal_all)?;
        let state = {
            let mut inner = self.inner.lock();
            let state = inner.queues.state;
            let WorkQueues::Kernel { sq, .. } = &mut inner.queues.work else {
                // A process posts through its shared ring.
                return Err(EINVAL);
            };
            if state != State::Error {
                // A full queue: the consumer posted past the depth it asked for.
                sq.push(request).map_err(|_| ENOMEM)?;
            }
            state
        };
        match state {
            State::Error => self.flushed(request.wr_id, request.op.wc_opcode()),
            State::Rts => {
                // The transmitter starts once for the chain (`send_chain_end`).
                self.tx_wake.queued.store(true, Ordering::Release);
            }
            _ => {}
        }
        Ok(())
    }

    /// Lists the new QP under its number in the device's table; `EBUSY` if a QP created at
    /// the same time has the number.
    pub(crate) fn list(self: &Arc<Self>) -> Result {
        self.table.insert(self.qpn, self.clone(), GFP_KERNEL)?;
        self.listed.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Whether the consumer destroyed it.
    pub(crate) fn is_destroyed(&self) -> bool {
        self.flags.load(Ordering::Relaxed) & flag::DEAD != 0
    }

    /// The QP is destroyed: the connection ends now and nothing runs for it any more.
    fn shut(&self) {
        self.flags.fetch_or(flag::DEAD, Ordering::Relaxed);
        self.end(false);
        // The process's rings leave with the QP (its user context checks that they did);
        // dropped outside the lock, as removing a mapping may sleep.
        let work = core::mem::replace(&mut self.inner.lock().queues.work, WorkQueues::Released);
        drop(work);
        // The work item lets go of the QP (a run in progress keeps its own reference).
        *self.kicker.qp.lock() = None;
        // The transmit buffers go now, not with the QP's last reference.
        self.tx.lock().buffers.release();
    }

    /// Reports the completion `c` to the send or receive CQ.
    fn complete(&self, c: &Completion) {
        self.cq_of(c)
            .push(c, self.handle.completion_tag(), self.qpn);
    }

    /// [`Qp::complete`] from under the QP's lock (`bh`).
    fn complete_in_bh(&self, bh: BhDisabled<'_>, c: &Completion) {
        self.cq_of(c)
            .push_in_bh(bh, c, self.handle.completion_tag(), self.qpn);
    }

    /// The CQ a completion goes to.
    #[inline]
    fn cq_of(&self, c: &Completion) -> &Cq {
        match c.opcode {
            WcOpcode::Recv | WcOpcode::RecvRdmaWithImm => &self.rcq,
            _ => &self.scq,
        }
    }

    /// A flushed completion for a work request posted in ERROR.
    fn flushed(&self, wr_id: u64, opcode: WcOpcode) {
        self.complete(&Completion {
            wr_id,
            status: WcStatus::WrFlushErr,
            opcode,
            byte_len: 0,
            imm: None,
            invalidated: None,
            solicited: false,
        });
    }

    /// Takes an entry a process wrote with `take`, which decodes it in place and says whether
    /// there was one, looking at up to `limit` of them: a malformed one completes with its
    /// error and fails the QP ([`Qp::bad_user_entry`]), and the next is looked at (a flush
    /// goes through a ring's worth, a running QP takes no more).
    #[inline]
    fn take_user(
        &self,
        limit: u32,
        mut take: impl FnMut() -> core::result::Result<bool, Completion>,
    ) -> bool {
        for _ in 0..limit {
            match take() {
                Ok(taken) => return taken,
                Err(bad) => self.bad_user_entry(&bad),
            }
        }
        false
    }

    /// A process's entry was malformed: it completed with an error, and the QP fails.
    fn bad_user_entry(&self, c: &Completion) {
        self.complete(c);
        self.flags.fetch_or(flag::ABORT, Ordering::Relaxed);
        self.kick();
    }
}

impl QueuePair for Qp {
    fn modify(&self, req: &QpModify) -> Result {
        let Some(target) = req.state else {
            return Ok(());
        };
        let mut inner = self.inner.lock();
        match (inner.queues.state, target) {
            (State::Idle(_), ib_state::RESET | ib_state::INIT | ib_state::RTR) => {
                self.set_state(&mut inner.queues, State::Idle(target));
                Ok(())
            }
            // iw_cm moves the QP to RTS itself once the connection is up; the verbs may
            // confirm it.
            (State::Rts, ib_state::RTS) => Ok(()),
            (State::Rts, ib_state::SQD) => {
                self.set_state(&mut inner.queues, State::Closing);
                drop(inner);
                let mut tx = self.tx.lock();
                let Transmitter {
                    target,
                    buffers,
                    fin_after_unsent,
                } = &mut *tx;
                if let Some(target) = target.as_ref() {
                    if buffers.has_unsent() {
                        // FIN after the rest TCP had no room for: the transmission sends it.
                        *fin_after_unsent = true;
                    } else {
                        // FIN after what is queued; the peer's close ends the connection.
                        let _ = target.socket.shutdown(Shutdown::Write);
                    }
                }
                Ok(())
            }
            // A graceful close of a connection that already ended (the peer closed first and
            // iw_cm has not taken the CLOSE yet): nothing is left to close, as with the C siw.
            (State::Closing | State::Error, ib_state::SQD) => Ok(()),
            (_, ib_state::ERR) => {
                drop(inner);
                self.flags.fetch_or(flag::ABORT, Ordering::Relaxed);
                self.end(false);
                Ok(())
            }
            (State::Error, ib_state::RESET) => {
                self.set_state(&mut inner.queues, State::Idle(ib_state::RESET));
                inner.queues.terms = None;
                // What ended the last connection does not carry over to the next.
                self.flags.fetch_and(flag::DEAD, Ordering::Relaxed);
                Ok(())
            }
            _ => Err(EINVAL),
        }
    }

    fn query(&self) -> Result<QpQuery> {
        let state = match self.inner.lock().queues.state {
            // iWARP has no RESET: IDLE reads as INIT, as with the C siw.
            State::Idle(s) => s.max(ib_state::INIT),
            State::Rts => ib_state::RTS,
            State::Closing => ib_state::SQD,
            State::Error => ib_state::ERR,
        };
        Ok(QpQuery {
            state,
            access_flags: 0,
            max_send_wr: self.caps.max_send_wr,
            max_recv_wr: self.caps.max_recv_wr,
            max_send_sge: self.caps.max_send_sge,
            max_recv_sge: self.caps.max_recv_sge,
            max_inline_data: self.caps.max_inline_data,
        })
    }

    fn post_send(&self, wr: &SendWr<'_>) -> Result {
        self.post_send_inner(wr)
    }

    fn send_chain_end(&self) {
        // As the C siw: the work item transmits a kernel QP's chain (a poster may not be able
        // to sleep). A chain queued by another poster meanwhile goes with this start.
        // `post_send` has no `Arc` of the QP: the device's table has one.
        if self.tx_wake.queued.swap(false, Ordering::AcqRel) {
            self.kick();
        }
    }

    fn destroy(&self) {
        self.shut();
        self.place.leave();
        // Not found by its number any more; the entry's reference is dropped outside the
        // table's lock (at the end of the statement).
        if self.listed.swap(false, Ordering::Relaxed) {
            drop(self.table.remove(self.qpn));
        }
    }

    fn post_recv(&self, wr: &RecvWr<'_>) -> Result {
        let request = verbs_wr::recv_request(wr)?;
        let flushed = {
            let mut inner = self.inner.lock();
            let state = inner.queues.state;
            let WorkQueues::Kernel { rq, .. } = &mut inner.queues.work else {
                return Err(EINVAL);
            };
            if state == State::Error {
                true
            } else {
                rq.push(request).map_err(|_| ENOMEM)?;
                false
            }
        };
        if flushed {
            self.flushed(request.wr_id, WcOpcode::Recv);
        }
        Ok(())
    }

    fn fill_restrack(&self, attrs: &mut RestrackAttrs<'_>) -> Result {
        self.restrack(attrs)
    }

    fn doorbell(&self) -> Result {
        // The doorbell is a system call of the process: a connected QP transmits right here,
        // as the C siw does, rather than waking the work item (a scheduling round trip per
        // message). A transmission already running holds the buffer; this one then sends what
        // is left. The transmission checks the state under the QP lock, so the common case
        // takes it once.
        if self.transmit() {
            if self.flags.load(Ordering::Relaxed) != 0 {
                // Something ended the connection: the work item runs the end.
                self.kick();
            }
            return Ok(());
        }
        let mut guard = self.inner.lock();
        let (inner, bh) = guard.with_bh_disabled();
        let Inner { queues, .. } = inner;
        if !matches!(queues.work, WorkQueues::User(_)) {
            return Err(EINVAL);
        }
        if queues.state == State::Error {
            // New work requests complete at once as flushed.
            Ctx {
                queues,
                qp: self,
                flushing: true,
                refs: None,
                bh,
            }
            .flush_queues();
        }
        Ok(())
    }
}
