// SPDX-License-Identifier: GPL-2.0

//! The sans-IO data path of one RC queue pair: work requests and received
//! bytes in, FPDUs and completions out.
//!
//! [`QpEngine`] ties the stream engines ([`super::rx_engine`],
//! [`super::tx_engine`]) to the credit queues ([`super::ord_ird`]) and to the
//! driver's queues and memory, which it reaches through [`QpContext`]. The
//! driver locks the engine and
//!
//! - calls [`QpEngine::receive`] with whatever bytes TCP delivered;
//! - calls [`QpEngine::transmit`] with a buffer it then writes to the socket,
//!   whenever the SQ got work or [`QpEngine::wants_transmit`] says so;
//!   [`QpEngine::transmit_by_reference`] lets the driver send payload by page
//!   reference instead (see below);
//! - calls [`QpEngine::flush`] when the QP goes to the error state.
//!
//! # Transmit order
//!
//! A pending TERMINATE goes first; after it nothing else is sent. Then the
//! responder's work, in arrival order: Read Responses (their payload read
//! from the source region in FPDU-sized pieces) and Atomic Responses (the
//! operation was executed when the request arrived). Then the send queue.
//! Messages are never interleaved: once a message's first FPDU is out, its
//! other FPDUs follow before any other message starts, so a responder message
//! waits for the end of the SQ message in progress. A Send or Write of one
//! FPDU (and less than [`BY_REFERENCE_FROM`] bytes) that fits the buffer is
//! produced straight from the SQ head without becoming the message in
//! progress, which spares copying the work request and the message state.
//!
//! Send queue work requests are taken in order. A Read or Atomic waits, still
//! queued, until an ORD credit is free; a fenced work request waits until no
//! Read or Atomic is outstanding. Local operations (memory registration and
//! local invalidation) run when they reach the head of the queue. Send and
//! Write work requests complete once their last FPDU has been produced (a
//! signalled one on the transmit call after, once the driver handed the
//! FPDUs to TCP, as the C siw completes after sendmsg; one call carries up to
//! [`deferred::DEFERRED_MAX`] of them), Reads when their last Read Response
//! segment has been placed, Atomics when their response's original value has
//! been written to the local buffer.
//!
//! # Payload by reference
//!
//! With MPA CRCs off, the engine offers each FPDU's payload to
//! [`QpContext::send_by_reference`] before copying it into the buffer. A
//! driver that takes it sends the bytes straight from the consumer's pages
//! (zero copy) between the FPDU's header and its pad and CRC, which the
//! engine writes back to back into the buffer. Like the C siw, the engine
//! offers only the payload of Read Responses and of unsignalled work requests
//! of at least [`BY_REFERENCE_FROM`] bytes: TCP may still read the pages after
//! the work request completed (until the data is acknowledged), and a
//! signalled completion tells the consumer its buffer is free again.
//!
//! # Reads into several SGEs
//!
//! An RDMA Read Request names one sink (RFC 5040 section 4.4: STag, tagged
//! offset, length), so a [`SendOp::Read`] into several SGEs (up to
//! [`MAX_SGE`]) goes as consecutive Read Requests, its *parts*: one per
//! non-empty SGE, in SGE order, each reading the SGE's length into the SGE
//! (its lkey the sink STag, its address the sink tagged offset) from the
//! source where the SGEs before it end (`remote_addr` plus their lengths),
//! with the same rkey. Empty SGEs are skipped; a Read with no SGE or only
//! empty ones is one zero-length Read Request, into its first SGE if it has
//! one. Every sink is checked before the first part goes out, so a bad one
//! fails the work request before anything is sent.
//!
//! Each part takes an ORD credit of its own. The work request leaves the SQ
//! with its first part; while parts remain it stands for the SQ head: the
//! parts that fit the free credits go out, the others as responses free
//! credits, and no later work request starts before its last part is out
//! (a fenced one then waits for every part's response, as for any Read).
//! Each part's Read Response is placed only inside that part's sink. The
//! work request completes once, on its last part's response (byte length the
//! sum of the SGEs); if a part fails (the peer's TERMINATE echoes it, its
//! response is refused, a flush, a local error issuing a later part) it
//! completes once, with that status, and its other parts complete nothing.
//! [`SendOp::ReadInv`] invalidates its one sink and still takes exactly one
//! SGE (or none).
//!
//! # Read Responses
//!
//! A Read completes successfully only if its responses placed every byte of
//! its sinks: the completion tells the consumer the sink holds the source's
//! bytes, and a peer that sent fewer (one zero-length last segment, say)
//! would otherwise hand it whatever the sink held before. The segments of
//! one Read Response arrive in order, each where the one before ended (DDP
//! segments of a message in order over TCP, RFC 5041 section 5; responses in
//! request order, RFC 5040 section 5.5), so each part ([`Outstanding`])
//! tracks the bytes placed so far: a segment must be in the part's sink STag,
//! start at the sink's address plus those bytes and not pass the sink's end,
//! and the last one must end there. Any other segment (outside the sink, out
//! of order, overlapping, or a last one that leaves bytes unplaced) is
//! refused before its payload is placed: the stream terminates with a DDP
//! base or bounds violation (RFC 5041 section 7; siw reports the same for a
//! response at an unexpected offset or of a wrong length) and the Read
//! completes with [`WcStatus::BadRespErr`], the verbs status for a malformed
//! response, at once (with CRCs on, before the CRC of the segment's FPDU is
//! checked: whichever error the stream ends with, the Read has failed). A
//! zero-length Read takes one zero-length last segment at its sink's address.
//!
//! A segment's payload is placed through [`QpContext::sink_write_pieces`], with the sink
//! entry of the Read it answers as the work request held it: the driver may place it by
//! that entry rather than by the STag alone. (RDMA Writes are placed through
//! [`QpContext::tagged_write_pieces`].)
//!
//! # Scatter/gather entries
//!
//! The engine takes work requests whose entries are of the driver's type
//! ([`QpContext::Sge`], any [`SgeEntry`]; [`Sge`] by default), keeps them in its slots
//! ([`Outstanding`]) and hands them back to the driver ([`QpContext::local_read`],
//! [`QpContext::local_write`], [`QpContext::sink_write_pieces`], [`PayloadSource::Gather`])
//! unchanged. It builds no entry but [`SgeEntry::EMPTY`] (the sink of a zero-length Read
//! without SGEs, and of the RTR's Read), which it never hands to the driver: every entry
//! the driver gets came from a work request the driver gave it.
//!
//! # Immediate Data
//!
//! RFC 7306 section 6 defines Immediate Data as a message of its own that
//! consumes a receive buffer, and RDMA Write with Immediate as an RDMA Write
//! followed by an Immediate Data message. It defines no Send with Immediate;
//! rsiw sends a zero-length [`SendOp::SendImm`] as an Immediate Data message
//! alone: it consumes one receive request at the peer, which completes as
//! [`WcOpcode::Recv`] with the value and byte length 0 — the verbs meaning of
//! a zero-length Send with Immediate, and what any RFC 7306 peer makes of
//! it. A Send with Immediate that carries data goes as a Send followed by an
//! Immediate Data message and so consumes **two** receive requests: the Send
//! completes the first ([`WcOpcode::Recv`] with its length), the Immediate
//! Data the second ([`WcOpcode::Recv`] with the value, length 0). Immediate
//! Data right after an RDMA Write completes a receive request as
//! [`WcOpcode::RecvRdmaWithImm`] with byte length 0 (the data sink does not
//! learn the Write's length); the receiver knows what came before from its
//! engine's events and the [`RxContext::rdma_write_done`] hint. RFC 7306 has
//! only the one Immediate Data message, so a zero-length Send with Immediate
//! posted right after an RDMA Write reaches the peer as an RDMA Write with
//! Immediate: the wire cannot tell them apart.
//!
//! # Peer-to-peer connections
//!
//! In the peer-to-peer model of RFC 6581 the initiator's first FPDU is a
//! zero-length ready-to-receive (RTR) message, sent and checked by
//! connection setup ([`super::mpa_handshake`]) before the engine starts; the
//! responder also answers a Read RTR there. The RTR is a message of the
//! RDMAP stream all the same, and [`EngineConfig::rtr`] makes the engine
//! start past it ([`RtrState`]):
//!
//! - a Send RTR took MSN 1 of queue 0: the initiator's first Send family or
//!   Immediate Data message carries MSN 2, and the responder expects MSN 2
//!   (the RTR consumed no receive request);
//! - a Read RTR took MSN 1 of queue 1, which Read and Atomic Requests share
//!   (RFC 7306 section 5.2): the initiator's first Read or Atomic Request
//!   carries MSN 2, and the responder expects MSN 2 with no IRD entry
//!   taken (its Read Response is already sent). At the initiator the RTR
//!   holds an ORD credit ([`Requester::issue_rtr_read`]) until its
//!   zero-length Read Response (STag [`RTR_STAG`], offset 0) arrives, which
//!   frees it and completes nothing; any other Read Response is refused as
//!   before;
//! - a Write RTR changes nothing.
//!
//! # Errors
//!
//! A local error on a work request (a bad local key, a Read with Invalidate
//! into more than one SGE, no ORD at all, ...) completes it with the matching
//! status and terminates the stream: a TERMINATE reporting an RDMAP local
//! catastrophic error (RFC 5040 section 7.2, layer 0, type 0, code 0) is
//! pending for [`QpEngine::transmit`], and nothing else is sent or received.
//! Errors found in received data are reported by the receive engine with the
//! RFC's codes; the TERMINATE then echoes the offending headers.
//!
//! A TERMINATE from the peer ends the stream. If it echoes the header of a
//! Read or Atomic Request of ours (queue 1, matched by its MSN), that request
//! completes at once with a status derived from the reported error
//! ([`WcStatus::RemAccessErr`] for protection errors, ...); for a part of a
//! Read into several SGEs, that is the work request's only completion.
//! Everything else outstanding completes with [`WcStatus::WrFlushErr`] when
//! the driver calls [`QpEngine::flush`]. RDMA Writes and Sends have completed
//! already when their last FPDU was produced, so an error the peer finds in
//! them only shows as the TERMINATE.
//!
//! # Modules
//!
//! This file holds the driver's interface ([`QpContext`], [`EngineConfig`]), the engine and
//! its entry points other than transmitting and flushing. The rest is in child modules, one
//! concern each:
//!
//! - `slots`: the ORD and IRD slot entries and their storage;
//! - `state`: the engine's state besides the stream engines (the message in flight, the
//!   stage of the stream);
//! - `rtr`: the peer-to-peer RTR;
//! - `transmit`: the transmit loop and its order;
//! - `send_queue`: starting the SQ head (fences, ORD credits, local operations, Reads into
//!   several SGEs);
//! - `produce`: the FPDUs of the message in flight;
//! - `scatter_gather`: byte ranges of SGE lists;
//! - `rx_adapter`: the receive side;
//! - `flush`: the QP going to the error state.

use super::atomic::AtomicResponseHeader;
use super::crc32c::Crc32c;
use super::ddp::{DdpHeader, QueueNumber};
use super::fpdu::CRC_LEN;
use super::immediate::ImmediateData;
use super::mpa::RtrKind;
use super::mpa_handshake::{ReceivedRtr, RTR_STAG};
use super::ord_ird::{IssueError, RequestKind, Requester, Responder, MAX_DEPTH};
use super::pieces::Pieces;
use super::placement::{check_tagged, Grant, MemoryRegion, TaggedAccess, TaggedUse};
use super::rdmap::ReadRequestHeader;
use super::rx_engine::{RxContext, RxEngine, RxEvent};
use super::stats::{Stat, Stats};
use super::term_error::{Layer, TermError};
use super::terminate::TerminateMessage;
use super::tx_engine::{TxEngine, TxMessage, WorkRequest, MAX_FPDU_HEADER_LEN};
use super::wire;

// The engine's parts in the child modules below reach each other's items, and the imports
// above, through their `use super::*`.
use deferred::Deferred;
use produce::{produce, sq_message_request, Produced, Room, HEADER_ONLY_FPDU_ROOM};
use rx_adapter::RxAdapter;
use scatter_gather::{sg_read, sg_write};
use slots::DEPTH;
use state::{BoundRecv, InFlight, Job, LastRx, SplitRead, Stage, State};
use transmit::Started;

mod deferred;
mod flush;
mod produce;
mod rtr;
mod rx_adapter;
mod scatter_gather;
mod send_queue;
mod slots;
mod state;
mod transmit;
pub use super::work_request::{
    AtomicOp, Completion, RecvRequest, SendOp, SendRequest, Sge, SgeEntry, SgeList, WcOpcode,
    WcStatus, MAX_SGE,
};
pub use rtr::RtrState;
pub use slots::{InlineSlots, Outstanding, Pending, SlotStorage};

/// What the engine needs from the driver: its queues, its completion queue
/// and its memory.
///
/// The `tagged_*` methods perform a [`Grant`]: an access the engine checked
/// against the region [`Self::lookup_stag`] returned when the request or
/// segment arrived. The region may have been invalidated, re-registered or
/// deregistered since, so the driver checks the grant again
/// ([`Grant::recheck`]) under the lock it accesses the memory under, and
/// accesses nothing if that fails.
pub trait QpContext {
    /// The scatter/gather entries of the driver's work requests ([`Sge`], or a type of the
    /// driver's own): the engine hands back only entries the driver's requests held, and
    /// builds none but [`SgeEntry::EMPTY`].
    type Sge: SgeEntry;
    /// The work request at the head of the send queue, left there.
    fn peek_send(&mut self) -> Option<SendRequest<Self::Sge>>;
    /// [`Self::peek_send`] into `out`; `false` if the queue is empty (`out`
    /// may have changed then). The engine looks at the SQ head there, in the
    /// caller's room ([`QpEngine::transmit_by_reference`]): a request is
    /// large, and a driver that decodes it can do so in place rather than
    /// copy it per message. By default, through [`Self::peek_send`].
    fn peek_send_into(&mut self, out: &mut SendRequest<Self::Sge>) -> bool {
        match self.peek_send() {
            Some(wr) => {
                *out = wr;
                true
            }
            None => false,
        }
    }
    /// Removes the head of the send queue (the engine has taken a copy).
    fn pop_send(&mut self);
    /// Takes the next receive request.
    fn pop_recv(&mut self) -> Option<RecvRequest<Self::Sge>>;
    /// Takes the next receive request into `out`; `false` if there is none
    /// (`out` may have changed then). A request is large: a driver that
    /// decodes it can do so in place. By default, through
    /// [`Self::pop_recv`].
    fn pop_recv_into(&mut self, out: &mut RecvRequest<Self::Sge>) -> bool {
        match self.pop_recv() {
            Some(wr) => {
                *out = wr;
                true
            }
            None => false,
        }
    }
    /// A completion for the CQ (send completions only for signaled work
    /// requests or errors; receive completions always).
    fn complete(&mut self, c: Completion);
    /// Reads `out.len()` bytes at `offset` within `sge` (lkey to region, PD,
    /// bounds and local access are the driver's to check).
    fn local_read(&mut self, sge: &Self::Sge, offset: u32, out: &mut [u8]) -> Result<(), WcStatus>;
    /// Writes `data` at `offset` within `sge` (checked like
    /// [`Self::local_read`], plus local write access).
    fn local_write(&mut self, sge: &Self::Sge, offset: u32, data: &[u8]) -> Result<(), WcStatus>;
    /// The memory region the index part of `stag` names, if any; the engine
    /// checks key, state, PD, rights and bounds.
    fn lookup_stag(&mut self, stag: u32) -> Option<MemoryRegion>;
    /// Reads the `out.len()` bytes `grant` names (a Read Response's source).
    fn tagged_read(&mut self, grant: &Grant, out: &mut [u8]) -> Result<(), TermError>;
    /// Writes `data` where `grant` names (an RDMA Write being placed; a Read
    /// Response goes through [`Self::sink_write_pieces`]).
    fn tagged_write(&mut self, grant: &Grant, data: &[u8]) -> Result<(), TermError>;
    /// [`Self::tagged_write`] of payload received in several pieces, in one
    /// call that can look the region up once. By default, piece by piece.
    fn tagged_write_pieces(&mut self, grant: &Grant, data: Pieces<'_>) -> Result<(), TermError> {
        data.try_for_each_at(|at, piece| {
            let piece_grant = grant
                .narrow(at as u64, piece.len() as u64)
                .ok_or(TermError::DdpLocalCatastrophic)?;
            self.tagged_write(&piece_grant, piece)
        })
    }
    /// Places a Read Response's payload (in pieces) at `grant`, which lies within `sink`, the
    /// Read's sink entry as the work request posted it (`grant.access.tagged_offset` is
    /// `sink.addr()` plus the bytes placed before). By default as any tagged write.
    fn sink_write_pieces(
        &mut self,
        sink: &Self::Sge,
        grant: &Grant,
        data: Pieces<'_>,
    ) -> Result<(), TermError> {
        let _ = sink;
        self.tagged_write_pieces(grant, data)
    }
    /// Executes `op` atomically with respect to all other atomics of the
    /// device on the word `grant` names; returns the original value.
    fn tagged_atomic(&mut self, grant: &Grant, op: AtomicOp) -> Result<u64, TermError>;
    /// Send with Invalidate received: invalidate `stag` (it must belong to
    /// the QP's PD, be valid and allow remote invalidation).
    fn invalidate_remote(&mut self, stag: u32) -> Result<(), TermError>;
    /// Local invalidation work request.
    fn invalidate_local(&mut self, stag: u32) -> Result<(), WcStatus>;
    /// Memory registration work request: `stag` becomes valid with `access`,
    /// its first byte at I/O virtual address `iova`, `length` bytes long.
    fn register(&mut self, stag: u32, access: u32, iova: u64, length: u64) -> Result<(), WcStatus>;
    /// Offers to send the payload `source` describes by reference: the driver
    /// sends it right before byte `at` of the transmit buffer (where the FPDU's
    /// header ends and its pad and CRC follow) instead of the engine copying it
    /// there. Return `false` (the default) to have it copied, which is also
    /// how any error in `source` is found and reported.
    fn send_by_reference(&mut self, source: PayloadSource<'_, Self::Sge>, at: usize) -> bool {
        let _ = (source, at);
        false
    }
}

/// Unsignalled work requests of at least this many bytes are offered for
/// sending by reference (the C siw's threshold: a page).
pub const BY_REFERENCE_FROM: u32 = 4096;

/// Payload bytes of one FPDU, where they are in memory.
#[derive(Debug, Clone, Copy)]
pub enum PayloadSource<'a, S: SgeEntry = Sge> {
    /// Bytes `offset..offset + len` of a work request's gather list.
    Gather {
        /// The gather list.
        sges: &'a [S],
        /// Where the bytes start in the concatenated list.
        offset: u32,
        /// How many.
        len: u32,
    },
    /// The bytes of a Read Response's source `grant` names (checked when
    /// the request arrived; the driver checks it again).
    Tagged(Grant),
}

/// What one [`QpEngine::transmit_by_reference`] call produced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Transmitted {
    /// Bytes written into the buffer.
    pub buffered: usize,
    /// Payload bytes the driver took by reference.
    pub referenced: usize,
    /// FPDUs produced (their bytes are `buffered` and `referenced`).
    pub fpdus: usize,
    /// It stopped because the buffer had no room for the next FPDU (as
    /// opposed to the budget being used up or nothing more to send): call
    /// again with a larger buffer.
    pub short: bool,
    /// It stopped because there was nothing more to send: until new work
    /// arrives (a posted work request, a received request or response),
    /// another call produces nothing.
    pub idle: bool,
}

impl Transmitted {
    /// Whether nothing was produced.
    pub fn is_empty(&self) -> bool {
        self.buffered == 0 && self.referenced == 0
    }
}

/// The parameters of one connection's data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineConfig {
    /// MPA CRC was negotiated.
    pub crc: bool,
    /// The largest FPDU to send ([`super::segmenter::fpdu_size`]).
    pub fpdu_size: usize,
    /// The QP's protection domain.
    pub pd: u32,
    /// Inbound Read/Atomic queue depth (as responder).
    pub ird: u16,
    /// Outbound Read/Atomic queue depth (as requester).
    pub ord: u16,
    /// The ready-to-receive message of a peer-to-peer connection (RFC 6581),
    /// which connection setup exchanged before the engine starts;
    /// [`RtrState::None`] in the client-server model.
    pub rtr: RtrState,
}

/// The data path of one RC queue pair. No allocation; about 14 KiB, so the
/// kernel keeps it in a box.
///
/// `S` keeps its per-slot state; `E` is the type of the scatter/gather entries of the work
/// requests it takes ([`QpContext::Sge`] of the contexts it works with).
pub struct QpEngine<C: Crc32c + Copy, S: SlotStorage<E> = InlineSlots, E: SgeEntry = Sge> {
    rx: RxEngine<C>,
    tx: TxEngine<C>,
    fpdu_size: usize,
    inflight: Option<InFlight<C, E>>,
    /// The completions of signalled messages produced whole on the
    /// previous call, written on the next one: after the driver handed
    /// their FPDUs to TCP.
    deferred: Deferred,
    st: State<S, E>,
}

/// The error reported for a local failure of a work request: an RDMAP local
/// catastrophic error (RFC 5040 section 7.2).
const LOCAL_FAILURE: TermError = TermError::RdmapLocalCatastrophic;

impl<C: Crc32c + Copy> QpEngine<C> {
    /// The data path of a connection whose MPA negotiation gave `config`, with its slots
    /// inside.
    pub fn new(config: EngineConfig, crc: C) -> Self {
        Self::with_slots(config, crc, InlineSlots::new())
    }
}

impl<C: Crc32c + Copy, S: SlotStorage<E>, E: SgeEntry> QpEngine<C, S, E> {
    /// The data path of a connection whose MPA negotiation gave `config`, keeping its
    /// per-slot state in `slots` (which should be empty).
    pub fn with_slots(config: EngineConfig, crc: C, slots: S) -> Self {
        let mut engine = Self {
            rx: RxEngine::new(crc, config.crc, config.pd),
            tx: TxEngine::new(config.crc.then_some(crc), config.fpdu_size),
            fpdu_size: config.fpdu_size,
            inflight: None,
            deferred: Deferred::new(),
            st: State {
                pd: config.pd,
                requester: Requester::new(config.ord),
                responder: Responder::new(config.ird),
                slots,
                stage: Stage::Running,
                sq_stalled: false,
                sq_unblocked: false,
                tx_stats: Stats::ZERO,
                next_request_id: 0,
                split: None,
                rx_line: [],
                recv: BoundRecv {
                    wr: RecvRequest::EMPTY,
                    bound: false,
                },
                recv_status: None,
                last_rx: LastRx::Other,
                rx_stats: Stats::ZERO,
            },
        };
        engine.start_past_rtr(config.rtr);
        engine
    }

    /// Changes the FPDU size for messages started from now on.
    pub fn set_fpdu_size(&mut self, fpdu_size: usize) {
        self.fpdu_size = fpdu_size;
    }

    /// Takes what the data path counted since the last call ([`super::stats`]).
    pub fn take_stats(&mut self, mut f: impl FnMut(Stat, u64)) {
        self.st.tx_stats.drain(&mut f);
        self.st.rx_stats.drain(&mut f);
    }

    /// Takes what the transmitting side counted since the last call: after a transmission,
    /// without touching the receiving side's cache lines.
    #[inline]
    pub fn take_tx_stats(&mut self, f: impl FnMut(Stat, u64)) {
        self.st.tx_stats.drain(f);
    }

    /// Takes what the receiving side counted since the last call.
    #[inline]
    pub fn take_rx_stats(&mut self, f: impl FnMut(Stat, u64)) {
        self.st.rx_stats.drain(f);
    }

    /// The requester's credits (ORD).
    pub fn requester(&self) -> &Requester {
        &self.st.requester
    }

    /// The responder's queue (IRD).
    pub fn responder(&self) -> &Responder {
        &self.st.responder
    }

    /// Whether `transmit` has something to send: a TERMINATE, responder
    /// work, the rest of a message, or an SQ head a response just unblocked
    /// (new SQ work is the driver's to know).
    pub fn wants_transmit(&self) -> bool {
        match self.st.stage {
            Stage::Pending { .. } => true,
            Stage::Running => {
                // Deferred completions are the next call's, which the
                // transmitter makes anyway (the call before was not idle).
                self.inflight.is_some()
                    || self.responder_ready().is_some()
                    || (self.st.sq_stalled && self.st.sq_unblocked)
            }
            _ => false,
        }
    }

    /// Whether the stream has ended (an error of either side, or a flush).
    pub fn is_terminated(&self) -> bool {
        self.st.stage != Stage::Running
    }

    /// The error the stream ended with, if it did: ours (sent or pending) or
    /// the peer's.
    pub fn termination(&self) -> Option<TermError> {
        match self.st.stage {
            Stage::Running | Stage::Flushed => None,
            Stage::Pending { error, .. } | Stage::Sent(error) | Stage::Peer(error) => Some(error),
        }
    }

    /// Whether the peer terminated the stream.
    pub fn peer_terminated(&self) -> bool {
        matches!(self.st.stage, Stage::Peer(_))
    }

    /// Consumes received stream bytes (any split), placing data through
    /// `ctx` and completing requests. Returns the bytes consumed (all of
    /// them while the stream runs). `Err` means the stream is terminated: a
    /// TERMINATE is then pending for [`Self::transmit`], unless the peer sent
    /// one (its error is returned) or ours is out already.
    pub fn receive<X: QpContext<Sge = E>>(
        &mut self,
        bytes: &[u8],
        ctx: &mut X,
    ) -> Result<usize, TermError> {
        let bytes = [bytes];
        self.receive_pieces(Pieces::one(&bytes), ctx)
    }

    /// As [`Self::receive`] for the bytes of `pieces` in order (a socket
    /// buffer's head and fragments): a payload that runs over several pieces
    /// is placed with one [`QpContext::tagged_write_pieces`] (or
    /// [`QpContext::sink_write_pieces`] for a Read Response).
    pub fn receive_pieces<X: QpContext<Sge = E>>(
        &mut self,
        pieces: Pieces<'_>,
        ctx: &mut X,
    ) -> Result<usize, TermError> {
        match self.st.stage {
            Stage::Running => {}
            Stage::Pending { error, .. } | Stage::Sent(error) | Stage::Peer(error) => {
                return Err(error)
            }
            Stage::Flushed => return Err(TermError::RdmapCatastrophicStream),
        }
        let mut adapter = RxAdapter {
            st: &mut self.st,
            ctx,
        };
        match self.rx.feed_pieces(pieces, &mut adapter) {
            Ok(n) => match self.st.stage {
                Stage::Peer(error) => Err(error),
                _ => Ok(n),
            },
            Err(error) => {
                if self.st.stage == Stage::Running {
                    self.st.stage = Stage::Pending {
                        error,
                        from_rx: true,
                    };
                }
                Err(error)
            }
        }
    }

    /// Ends the stream over a local failure.
    fn fail_local(&mut self, error: TermError) {
        self.inflight = None;
        if self.st.stage == Stage::Running {
            self.st.stage = Stage::Pending {
                error,
                from_rx: false,
            };
        }
    }
}
