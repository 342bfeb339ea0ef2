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
//! FPDUs to TCP, as the C siw completes after sendmsg), Reads
//! when their last Read Response segment has been placed, Atomics when their
//! response's original value has been written to the local buffer.
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
//! This file holds the driver's interface and the engine's entry points; its parts are in
//! child modules: `slots` (ORD and IRD slot entries and their storage), `state` (the engine's
//! state besides the stream engines), `rtr` (the peer-to-peer RTR), `produce` (the FPDUs of
//! the message in flight) and `rx_adapter` (the receive side).

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
use super::term_error::{Layer, TermError};
use super::terminate::TerminateMessage;
use super::tx_engine::{TxEngine, TxMessage, WorkRequest, MAX_FPDU_HEADER_LEN};
use super::wire;
use produce::{produce, sq_message_request, Room};
use rx_adapter::RxAdapter;
use slots::{DEPTH, NO_OUTSTANDING};
use state::{BoundRecv, InFlight, Job, LastRx, SplitRead, Stage, State};

mod produce;
mod rtr;
mod rx_adapter;
mod slots;
mod state;
pub use super::work_request::{
    AtomicOp, Completion, RecvRequest, SendOp, SendRequest, Sge, SgeList, WcOpcode, WcStatus,
    MAX_SGE,
};
pub use rtr::RtrState;
pub use slots::{InlineSlots, Outstanding, Pending, SlotStorage};

/// Bytes an atomic operation returns.
const ATOMIC_LEN: u32 = 8;

/// Room that always suffices for an FPDU without payload: the length field
/// and headers, at most 3 pad bytes and the CRC.
const HEADER_ONLY_FPDU_ROOM: usize = MAX_FPDU_HEADER_LEN + 3 + CRC_LEN;

/// Upper bound on the entries one [`QpEngine::flush`] takes from each of the
/// driver's queues, so that a context whose pop does not pop cannot hang it.
const FLUSH_LIMIT: u32 = 1 << 20;

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
    /// The work request at the head of the send queue, left there.
    fn peek_send(&mut self) -> Option<SendRequest>;
    /// [`Self::peek_send`] into `out`; `false` if the queue is empty (`out`
    /// may have changed then). The engine looks at the SQ head there, in the
    /// caller's room ([`QpEngine::transmit_by_reference`]): a request is
    /// large, and a driver that decodes it can do so in place rather than
    /// copy it per message. By default, through [`Self::peek_send`].
    fn peek_send_into(&mut self, out: &mut SendRequest) -> bool {
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
    fn pop_recv(&mut self) -> Option<RecvRequest>;
    /// Takes the next receive request into `out`; `false` if there is none
    /// (`out` may have changed then). A request is large: a driver that
    /// decodes it can do so in place. By default, through
    /// [`Self::pop_recv`].
    fn pop_recv_into(&mut self, out: &mut RecvRequest) -> bool {
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
    fn local_read(&mut self, sge: &Sge, offset: u32, out: &mut [u8]) -> Result<(), WcStatus>;
    /// Writes `data` at `offset` within `sge` (checked like
    /// [`Self::local_read`], plus local write access).
    fn local_write(&mut self, sge: &Sge, offset: u32, data: &[u8]) -> Result<(), WcStatus>;
    /// The memory region the index part of `stag` names, if any; the engine
    /// checks key, state, PD, rights and bounds.
    fn lookup_stag(&mut self, stag: u32) -> Option<MemoryRegion>;
    /// Reads the `out.len()` bytes `grant` names (a Read Response's source).
    fn tagged_read(&mut self, grant: &Grant, out: &mut [u8]) -> Result<(), TermError>;
    /// Writes `data` where `grant` names (an RDMA Write or a Read Response
    /// being placed).
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
    fn send_by_reference(&mut self, source: PayloadSource<'_>, at: usize) -> bool {
        let _ = (source, at);
        false
    }
}

/// Unsignalled work requests of at least this many bytes are offered for
/// sending by reference (the C siw's threshold: a page).
pub const BY_REFERENCE_FROM: u32 = 4096;

/// Payload bytes of one FPDU, where they are in memory.
#[derive(Debug, Clone, Copy)]
pub enum PayloadSource<'a> {
    /// Bytes `offset..offset + len` of a work request's gather list.
    Gather {
        /// The gather list.
        sges: &'a [Sge],
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
pub struct QpEngine<C: Crc32c + Copy, S: SlotStorage = InlineSlots> {
    rx: RxEngine<C>,
    tx: TxEngine<C>,
    fpdu_size: usize,
    inflight: Option<InFlight<C>>,
    /// The completion of a message produced whole on the previous call,
    /// written on the next one: after the driver handed its FPDUs to TCP.
    deferred: Option<Completion>,
    st: State<S>,
}

/// The error reported for a local failure of a work request: an RDMAP local
/// catastrophic error (RFC 5040 section 7.2).
const LOCAL_FAILURE: TermError = TermError::RdmapLocalCatastrophic;

/// The completion status for a request the peer terminated the stream over.
fn remote_status(error: TermError) -> WcStatus {
    use TermError::*;
    match (error.layer(), error.error_type()) {
        (Layer::Rdmap, 1) | (Layer::Ddp, 1) => WcStatus::RemAccessErr,
        (Layer::Ddp, 2) => WcStatus::RemInvReqErr,
        _ => match error {
            RdmapInvalidVersion | RdmapUnexpectedOpcode => WcStatus::RemInvReqErr,
            _ => WcStatus::RemOpErr,
        },
    }
}

/// The pieces of the byte range [`offset`, `offset` + `len`) of the
/// concatenation of some SGEs: (SGE, offset in it, offset in the range,
/// length).
struct SgePieces<'a> {
    sges: core::slice::Iter<'a, Sge>,
    skip: u64,
    done: usize,
    len: usize,
}

impl<'a> SgePieces<'a> {
    fn new(sges: &'a [Sge], offset: u32, len: usize) -> Self {
        Self {
            sges: sges.iter(),
            skip: u64::from(offset),
            done: 0,
            len,
        }
    }

    /// Whether the SGEs covered the whole range.
    fn complete(&self) -> bool {
        self.done >= self.len
    }
}

impl<'a> Iterator for SgePieces<'a> {
    type Item = (&'a Sge, u32, usize, usize);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let left = self.len.checked_sub(self.done).filter(|&l| l > 0)?;
            let sge = self.sges.next()?;
            let sge_len = u64::from(sge.length);
            if self.skip >= sge_len {
                self.skip = self.skip.saturating_sub(sge_len);
            } else {
                let at = self.skip;
                self.skip = 0;
                let avail = sge_len.saturating_sub(at);
                let n = usize::try_from(avail).map_or(left, |a| a.min(left));
                let start = self.done;
                self.done = self.done.saturating_add(n);
                // `at` is below a 32-bit length.
                let at = u32::try_from(at).unwrap_or(u32::MAX);
                return Some((sge, at, start, n));
            }
        }
    }
}

/// The only SGE of `sges` if the `len` > 0 bytes from `offset` on lie inside
/// it, as nearly always: one piece, no need to iterate over [`SgePieces`].
fn single_sge(sges: &[Sge], offset: u32, len: usize) -> Option<&Sge> {
    match sges {
        [sge]
            if len > 0 && u64::from(offset).saturating_add(len as u64) <= u64::from(sge.length) =>
        {
            Some(sge)
        }
        _ => None,
    }
}

/// Reads bytes `offset..` of the concatenated `sges` into `out`.
fn sg_read<X: QpContext>(
    ctx: &mut X,
    sges: &[Sge],
    offset: u32,
    out: &mut [u8],
) -> Result<(), WcStatus> {
    if let Some(sge) = single_sge(sges, offset, out.len()) {
        return ctx.local_read(sge, offset, out);
    }
    let mut pieces = SgePieces::new(sges, offset, out.len());
    for (sge, at, start, n) in pieces.by_ref() {
        let end = start.checked_add(n).ok_or(WcStatus::LocLenErr)?;
        let dst = out.get_mut(start..end).ok_or(WcStatus::LocLenErr)?;
        ctx.local_read(sge, at, dst)?;
    }
    if pieces.complete() {
        Ok(())
    } else {
        Err(WcStatus::LocLenErr)
    }
}

/// Writes `data` to bytes `offset..` of the concatenated `sges`.
fn sg_write<X: QpContext>(
    ctx: &mut X,
    sges: &[Sge],
    offset: u32,
    data: &[u8],
) -> Result<(), WcStatus> {
    if let Some(sge) = single_sge(sges, offset, data.len()) {
        return ctx.local_write(sge, offset, data);
    }
    let mut pieces = SgePieces::new(sges, offset, data.len());
    for (sge, at, start, n) in pieces.by_ref() {
        let end = start.checked_add(n).ok_or(WcStatus::LocLenErr)?;
        let src = data.get(start..end).ok_or(WcStatus::LocLenErr)?;
        ctx.local_write(sge, at, src)?;
    }
    if pieces.complete() {
        Ok(())
    } else {
        Err(WcStatus::LocLenErr)
    }
}

/// How producing the FPDUs of the message in flight ended.
enum Produced {
    /// The message is done.
    Done,
    /// The buffer is full.
    Full,
    /// A local failure: complete the work request with the status (if it is
    /// one) and terminate with the error.
    Failed(WcStatus, TermError),
}

/// What starting the next piece of work did.
enum Started {
    /// A message is in flight.
    Message,
    /// A message went out whole; its completion waits for the next call.
    Completing,
    /// A local operation ran, or a work request failed; look again.
    Again,
    /// Nothing to do now.
    Idle,
}

impl<C: Crc32c + Copy> QpEngine<C> {
    /// The data path of a connection whose MPA negotiation gave `config`, with its slots
    /// inside.
    pub fn new(config: EngineConfig, crc: C) -> Self {
        Self::with_slots(config, crc, InlineSlots::new())
    }
}

impl<C: Crc32c + Copy, S: SlotStorage> QpEngine<C, S> {
    /// The data path of a connection whose MPA negotiation gave `config`, keeping its
    /// per-slot state in `slots` (which should be empty).
    pub fn with_slots(config: EngineConfig, crc: C, slots: S) -> Self {
        let mut engine = Self {
            rx: RxEngine::new(crc, config.crc, config.pd),
            tx: TxEngine::new(config.crc.then_some(crc), config.fpdu_size),
            fpdu_size: config.fpdu_size,
            inflight: None,
            deferred: None,
            st: State {
                pd: config.pd,
                requester: Requester::new(config.ord),
                responder: Responder::new(config.ird),
                slots,
                stage: Stage::Running,
                sq_stalled: false,
                sq_unblocked: false,
                next_request_id: 0,
                split: None,
                rx_line: [],
                recv: BoundRecv {
                    wr: RecvRequest {
                        wr_id: 0,
                        sges: SgeList::EMPTY,
                    },
                    bound: false,
                },
                recv_status: None,
                last_rx: LastRx::Other,
            },
        };
        engine.start_past_rtr(config.rtr);
        engine
    }

    /// Changes the FPDU size for messages started from now on.
    pub fn set_fpdu_size(&mut self, fpdu_size: usize) {
        self.fpdu_size = fpdu_size;
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
                // A deferred completion is the next call's, which the
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
    pub fn receive<X: QpContext>(&mut self, bytes: &[u8], ctx: &mut X) -> Result<usize, TermError> {
        let bytes = [bytes];
        self.receive_pieces(Pieces::one(&bytes), ctx)
    }

    /// As [`Self::receive`] for the bytes of `pieces` in order (a socket
    /// buffer's head and fragments): a payload that runs over several pieces
    /// is placed with one [`QpContext::tagged_write_pieces`].
    pub fn receive_pieces<X: QpContext>(
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

    /// Writes whole FPDUs into `out` (at most `out.len()` bytes; at least
    /// 4 KiB, and the same size on every call, or FPDUs are sized down to
    /// it) for, in order: a pending TERMINATE, responder work (Read and
    /// Atomic Responses in arrival order), then the SQ. Returns the bytes
    /// written; 0 means nothing to send now. Payload is always copied.
    pub fn transmit<X: QpContext>(&mut self, ctx: &mut X, out: &mut [u8]) -> usize {
        let budget = out.len();
        let mut sq_head = SendRequest::EMPTY;
        self.produce_fpdus(ctx, &mut sq_head, out, budget, false)
            .buffered
    }

    /// As [`Self::transmit`], with FPDUs of up to `budget` bytes on the wire
    /// in all (at least 4 KiB, the same on every call), whose payload `ctx`
    /// may take by reference ([`QpContext::send_by_reference`]); `out` then
    /// holds the rest of the FPDUs, and needs room only for them. `sq_head`
    /// is room for the SQ head while the engine looks at it
    /// ([`QpContext::peek_send_into`]); what it holds before and after does
    /// not matter.
    pub fn transmit_by_reference<X: QpContext>(
        &mut self,
        ctx: &mut X,
        sq_head: &mut SendRequest,
        out: &mut [u8],
        budget: usize,
    ) -> Transmitted {
        let by_reference = !self.tx.has_crc();
        self.produce_fpdus(ctx, sq_head, out, budget, by_reference)
    }

    /// The FPDUs of [`Self::transmit_by_reference`], offering payload only if `by_reference`.
    #[inline]
    fn produce_fpdus<X: QpContext>(
        &mut self,
        ctx: &mut X,
        sq_head: &mut SendRequest,
        out: &mut [u8],
        budget: usize,
        by_reference: bool,
    ) -> Transmitted {
        self.tx.set_fpdu_size(self.fpdu_size.min(budget));
        self.st.sq_unblocked = false;
        self.finish_if_deferred(ctx);
        let mut room = Room {
            out,
            pos: 0,
            wire_left: budget,
            referenced: 0,
            short: false,
            by_reference,
        };
        // Most calls find nothing to send, or only the SQ head: tell so
        // before setting up to produce FPDUs, with the SQ head's one peek.
        let head_next = self.st.stage == Stage::Running
            && self.inflight.is_none()
            && self.st.split.is_none()
            && self.responder_ready().is_none();
        if !head_next {
            return self.produce_fpdus_from(ctx, sq_head, false, room);
        }
        if !ctx.peek_send_into(sq_head) {
            return Transmitted {
                idle: true,
                ..Transmitted::default()
            };
        }
        // The head starts here, without the loop's set-up: a small Send or
        // Write (what a latency-bound application sends) is then already
        // produced, and one to complete, or a head that must wait, ends the
        // call as it would in the loop.
        match self.start_sq_head(ctx, sq_head, &mut room) {
            Started::Completing => room.transmitted(false),
            Started::Idle => room.transmitted(true),
            Started::Message | Started::Again => self.produce_fpdus_from(ctx, sq_head, false, room),
        }
    }

    /// [`Self::produce_fpdus`] into `room`, starting with the SQ head in
    /// `sq_head` if it was `peeked` already (and is next).
    fn produce_fpdus_from<X: QpContext>(
        &mut self,
        ctx: &mut X,
        sq_head: &mut SendRequest,
        mut peeked: bool,
        mut room: Room<'_>,
    ) -> Transmitted {
        let mut idle = false;
        loop {
            match self.st.stage {
                Stage::Running => {}
                Stage::Pending { error, from_rx } => {
                    self.send_terminate(&mut room, error, from_rx);
                    break;
                }
                _ => {
                    idle = true;
                    break;
                }
            }
            if self.inflight.is_none() {
                let head_peeked = core::mem::take(&mut peeked);
                match self.start_next(ctx, sq_head, head_peeked, &mut room) {
                    Started::Message | Started::Again => {}
                    Started::Completing => break,
                    Started::Idle => {
                        idle = true;
                        break;
                    }
                }
            }
            // Worked on in place: the job is large, and copying it out and
            // back costs more than producing a small message's FPDU.
            let Some(inflight) = self.inflight.as_mut() else {
                continue;
            };
            match produce(inflight, ctx, &mut room) {
                Produced::Full => break,
                Produced::Done => match inflight.completion() {
                    // As the C siw does, a work request completes once its
                    // FPDUs are with TCP, not before: a peer waiting for
                    // them (a ping-pong) does not wait for the completion.
                    Some(completion) if !room.is_empty() => {
                        self.deferred = Some(completion);
                        self.inflight = None;
                        break;
                    }
                    _ => self.finish(ctx),
                },
                Produced::Failed(status, error) => {
                    if let Job::Sq { wr, .. } = &inflight.job {
                        ctx.complete(Completion::send(wr, status, 0));
                    }
                    self.fail_local(error);
                }
            }
        }
        room.transmitted(idle)
    }

    /// Emits the pending TERMINATE into `room` if it fits.
    fn send_terminate(&mut self, room: &mut Room<'_>, error: TermError, rx: bool) {
        let Some(rest) = room.out.get_mut(room.pos..) else {
            room.short = true;
            return;
        };
        if rest.len() < HEADER_ONLY_FPDU_ROOM {
            room.short = true;
            return;
        }
        if room.wire_left < HEADER_ONLY_FPDU_ROOM {
            return;
        }
        let message = match self.rx.termination() {
            Some(t) if rx => t.message(),
            _ => TerminateMessage::reporting(error, None),
        };
        self.st.stage = Stage::Sent(error);
        let Ok(mut msg) = self.tx.start(WorkRequest::Terminate(message)) else {
            return;
        };
        let Ok(Some(fpdu)) = msg.next_fpdu(rest) else {
            return;
        };
        let trailer = fpdu.trailer();
        let end = fpdu.header_len.checked_add(trailer.as_bytes().len());
        if end == Some(fpdu.wire_len())
            && wire::write_bytes(rest, fpdu.header_len, trailer.as_bytes()).is_ok()
        {
            room.pos = room.pos.saturating_add(fpdu.wire_len());
            room.wire_left = room.wire_left.saturating_sub(fpdu.wire_len());
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

    /// The IRD slot whose response can be sent next.
    fn responder_ready(&self) -> Option<usize> {
        let (slot, _) = self.st.responder.front()?;
        match self.st.slots.pending().get(slot) {
            Some(Pending::Read { .. } | Pending::Atomic(_)) => Some(slot),
            _ => None,
        }
    }

    /// Starts the next response or SQ work request; `sq_head` holds the SQ
    /// head if the caller `peeked` it already (and nothing comes before it),
    /// else is room to peek it into.
    fn start_next<X: QpContext>(
        &mut self,
        ctx: &mut X,
        sq_head: &mut SendRequest,
        peeked: bool,
        room: &mut Room<'_>,
    ) -> Started {
        if let Some(slot) = self.responder_ready() {
            return self.start_response(slot);
        }
        if let Some(split) = self.st.split {
            // The rest of a Read into several SGEs: it is the SQ head (no
            // fence to wait for, it waited before its first part).
            return match self.start_read(ctx, &split.wr, split.next, split.parts) {
                Ok(started) => {
                    if !matches!(started, Started::Idle) {
                        self.st.sq_stalled = false;
                    }
                    started
                }
                Err(status) => {
                    // Its parts out complete nothing: it completes here.
                    self.st.split = None;
                    ctx.complete(Completion::send(&split.wr, status, 0));
                    self.fail_local(LOCAL_FAILURE);
                    Started::Again
                }
            };
        }
        // The SQ head stays in the caller's room, borrowed: it is large.
        if !peeked && !ctx.peek_send_into(sq_head) {
            return Started::Idle;
        }
        self.start_sq_head(ctx, sq_head, room)
    }

    /// Starts the SQ head `wr`, if it need not wait.
    fn start_sq_head<X: QpContext>(
        &mut self,
        ctx: &mut X,
        wr: &SendRequest,
        room: &mut Room<'_>,
    ) -> Started {
        let is_request = matches!(
            wr.op,
            SendOp::Read { .. }
                | SendOp::ReadInv { .. }
                | SendOp::FetchAdd { .. }
                | SendOp::CmpSwap { .. }
        );
        if wr.fence && self.st.requester.outstanding() > 0 {
            self.st.sq_stalled = true;
            return Started::Idle;
        }
        let result = match wr.op {
            SendOp::RegMr {
                stag,
                access,
                iova,
                length,
            } => {
                let r = ctx.register(stag, access, iova, length);
                self.local_op_done(ctx, wr, r)
            }
            SendOp::LocalInv { stag } => {
                let r = ctx.invalidate_local(stag);
                self.local_op_done(ctx, wr, r)
            }
            _ if is_request => self.start_request(ctx, wr),
            _ => self.start_sq_message(ctx, wr, room),
        };
        self.sq_head_started(ctx, wr, result)
    }

    /// What starting the SQ head `wr` came to: a work request that failed to
    /// start completes with its error and fails the stream.
    fn sq_head_started<X: QpContext>(
        &mut self,
        ctx: &mut X,
        wr: &SendRequest,
        result: Result<Started, WcStatus>,
    ) -> Started {
        match result {
            Ok(started) => {
                if !matches!(started, Started::Idle) {
                    self.st.sq_stalled = false;
                }
                started
            }
            Err(status) => {
                ctx.pop_send();
                ctx.complete(Completion::send(wr, status, 0));
                self.fail_local(LOCAL_FAILURE);
                Started::Again
            }
        }
    }

    fn local_op_done<X: QpContext>(
        &mut self,
        ctx: &mut X,
        wr: &SendRequest,
        result: Result<(), WcStatus>,
    ) -> Result<Started, WcStatus> {
        result?;
        ctx.pop_send();
        if wr.signaled {
            ctx.complete(Completion::send(wr, WcStatus::Success, 0));
        }
        Ok(Started::Again)
    }

    /// Starts a Send or Write work request; one of a single FPDU goes into `room` right away.
    fn start_sq_message<X: QpContext>(
        &mut self,
        ctx: &mut X,
        wr: &SendRequest,
        room: &mut Room<'_>,
    ) -> Result<Started, WcStatus> {
        let len = wr
            .sges
            .total_len()
            .and_then(|l| u32::try_from(l).ok())
            .ok_or(WcStatus::LocLenErr)?;
        let (request, then) = sq_message_request(wr, len)?;
        if then.is_none() && len < BY_REFERENCE_FROM {
            if let Some(started) = self.send_whole(ctx, wr, request, len, room)? {
                return Ok(started);
            }
        }
        let msg = self.tx.start(request).map_err(|_| WcStatus::LocQpOpErr)?;
        self.inflight = Some(InFlight {
            msg,
            job: Job::Sq { wr: *wr, len, then },
        });
        // The engine holds the request now; its SGEs stay the driver's to
        // keep valid until it completes.
        ctx.pop_send();
        Ok(Started::Message)
    }

    /// Produces the message of `wr` (`request`, `len` payload bytes) into `room` if it is one
    /// FPDU that fits there, and takes `wr` from the SQ. Returns `None`, having done nothing, if
    /// it is not. Such a message (what a latency-bound application sends) is never the one in
    /// flight: that would copy the work request and the message state in and out for nothing.
    fn send_whole<X: QpContext>(
        &mut self,
        ctx: &mut X,
        wr: &SendRequest,
        request: WorkRequest<'_>,
        len: u32,
        room: &mut Room<'_>,
    ) -> Result<Option<Started>, WcStatus> {
        let Some(rest) = room.out.get_mut(room.pos..) else {
            return Ok(None);
        };
        let end = rest.len().min(room.wire_left);
        let Some(rest) = rest.get_mut(..end) else {
            return Ok(None);
        };
        let Some(mut fpdu) = self.tx.start_whole(request, rest) else {
            return Ok(None);
        };
        let wire_len = fpdu.wire_len();
        let payload_end = usize::try_from(len)
            .ok()
            .and_then(|len| fpdu.header_len.checked_add(len))
            .ok_or(WcStatus::LocLenErr)?;
        let payload = rest
            .get_mut(fpdu.header_len..payload_end)
            .ok_or(WcStatus::LocLenErr)?;
        if !payload.is_empty() {
            sg_read(ctx, wr.sges.as_slice(), 0, payload)?;
            fpdu.hash_payload(payload);
        }
        let written = rest
            .get_mut(payload_end..wire_len)
            .is_some_and(|dst| fpdu.write_trailer(dst));
        if !written {
            return Err(WcStatus::LocQpOpErr);
        }
        room.pos = room.pos.saturating_add(wire_len);
        room.wire_left = room.wire_left.saturating_sub(wire_len);
        ctx.pop_send();
        if !wr.signaled {
            return Ok(Some(Started::Again));
        }
        self.deferred = Some(Completion::send(wr, WcStatus::Success, len));
        Ok(Some(Started::Completing))
    }

    /// Checks a Read sink: it is placed as a tagged buffer, so check it before the Read goes
    /// out, and a bad sink is a local error, not the peer's.
    fn check_sink<X: QpContext>(&self, ctx: &mut X, sge: &Sge) -> Result<(), WcStatus> {
        let region = ctx.lookup_stag(sge.lkey);
        let access = TaggedAccess {
            usage: TaggedUse::ReadResponse,
            stag: sge.lkey,
            tagged_offset: sge.addr,
            len: u64::from(sge.length),
        };
        check_tagged(region.as_ref(), self.st.pd, &access)
            .map(|_| ())
            .map_err(|_| WcStatus::LocProtErr)
    }

    /// Starts part `part` of a Read work request: the Read Request for the first non-empty
    /// SGE from index `next` on, if an ORD credit is free. The first part takes the work
    /// request off the SQ; while parts remain, [`State::split`] holds it.
    fn start_read<X: QpContext>(
        &mut self,
        ctx: &mut X,
        wr: &SendRequest,
        next: u8,
        part: u8,
    ) -> Result<Started, WcStatus> {
        let (remote_addr, rkey, invalidate) = match wr.op {
            SendOp::Read { remote_addr, rkey } => (remote_addr, rkey, false),
            SendOp::ReadInv { remote_addr, rkey } => (remote_addr, rkey, true),
            _ => return Err(WcStatus::LocQpOpErr),
        };
        let sges = wr.sges.as_slice();
        if invalidate && sges.len() > 1 {
            return Err(WcStatus::LocQpOpErr);
        }
        let total = wr
            .sges
            .total_len()
            .and_then(|l| u32::try_from(l).ok())
            .ok_or(WcStatus::LocLenErr)?;
        // Part i reads from the source where the SGEs before it end.
        let source = |index: usize| {
            let before = sges
                .iter()
                .take(index)
                .fold(0u64, |sum, sge| sum.saturating_add(u64::from(sge.length)));
            remote_addr.checked_add(before).ok_or(WcStatus::LocLenErr)
        };
        if part == 0 {
            // Every part is checked before the first goes out, so that a bad
            // one fails the work request before anything is sent.
            for (index, sge) in sges.iter().enumerate() {
                if sge.length > 0 {
                    self.check_sink(ctx, sge)?;
                    source(index)?;
                }
            }
        }
        let found = sges
            .iter()
            .enumerate()
            .skip(usize::from(next))
            .find(|(_, sge)| sge.length > 0);
        let (index, sge) = match found {
            Some((index, sge)) => (index, *sge),
            // No data to read at all: a zero-length Read, into the first SGE
            // if there is one.
            None if part == 0 => (sges.len(), sges.first().copied().unwrap_or_default()),
            None => return Err(WcStatus::LocQpOpErr),
        };
        if part > 0 {
            // Checked before the first part; still the same region?
            self.check_sink(ctx, &sge)?;
        }
        let last = sges
            .iter()
            .skip(index.saturating_add(1))
            .all(|sge| sge.length == 0);
        let header = ReadRequestHeader {
            sink_stag: sge.lkey,
            sink_tagged_offset: sge.addr,
            read_size: sge.length,
            source_stag: rkey,
            source_tagged_offset: source(index)?,
        };
        let next = u8::try_from(index.saturating_add(1)).map_err(|_| WcStatus::LocQpOpErr)?;
        let issued = Outstanding {
            wr_id: wr.wr_id,
            signaled: wr.signaled,
            opcode: wr.op.wc_opcode(),
            len: if last { total } else { sge.length },
            sge,
            placed: 0,
            msn: 0,
            request_id: 0,
            invalidate,
            live: true,
            rtr: false,
            part,
            last,
        };
        let started = self.issue(RequestKind::Read, WorkRequest::ReadRequest(header), issued)?;
        if matches!(started, Started::Message) {
            if part == 0 {
                // The engine holds the request now; its SGEs stay the
                // driver's to keep valid until it completes.
                ctx.pop_send();
            }
            self.st.split = (!last).then_some(SplitRead {
                wr: *wr,
                next,
                parts: part.saturating_add(1),
            });
        }
        Ok(started)
    }

    /// Starts a Read or Atomic Request, if an ORD credit is free.
    fn start_request<X: QpContext>(
        &mut self,
        ctx: &mut X,
        wr: &SendRequest,
    ) -> Result<Started, WcStatus> {
        let sges = wr.sges.as_slice();
        let (request, sge, request_id) = match wr.op {
            SendOp::Read { .. } | SendOp::ReadInv { .. } => return self.start_read(ctx, wr, 0, 0),
            SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
                add_mask,
            } => {
                let op = AtomicOp::FetchAdd {
                    add,
                    mask: add_mask,
                };
                let id = self.st.next_request_id;
                (op.request(id, rkey, remote_addr), atomic_sge(sges)?, id)
            }
            SendOp::CmpSwap {
                remote_addr,
                rkey,
                compare,
                compare_mask,
                swap,
                swap_mask,
            } => {
                let op = AtomicOp::CmpSwap {
                    compare,
                    compare_mask,
                    swap,
                    swap_mask,
                };
                let id = self.st.next_request_id;
                (op.request(id, rkey, remote_addr), atomic_sge(sges)?, id)
            }
            _ => return Err(WcStatus::LocQpOpErr),
        };
        let issued = Outstanding {
            wr_id: wr.wr_id,
            signaled: wr.signaled,
            opcode: wr.op.wc_opcode(),
            len: ATOMIC_LEN,
            sge,
            request_id,
            live: true,
            ..NO_OUTSTANDING
        };
        let started = self.issue(
            RequestKind::Atomic,
            WorkRequest::AtomicRequest(request),
            issued,
        )?;
        if matches!(started, Started::Message) {
            self.st.next_request_id = self.st.next_request_id.wrapping_add(1);
            ctx.pop_send();
        }
        Ok(started)
    }

    /// Sends `request` if an ORD credit is free, recording `issued` (its MSN
    /// filled in) in the slot it takes; the SQ stalls if none is.
    fn issue(
        &mut self,
        kind: RequestKind,
        request: WorkRequest<'static>,
        issued: Outstanding,
    ) -> Result<Started, WcStatus> {
        let slot = match self.st.requester.try_issue(kind) {
            Ok(slot) => slot,
            Err(IssueError::WouldExceed) => {
                self.st.sq_stalled = true;
                return Ok(Started::Idle);
            }
            Err(IssueError::NoCredits) => return Err(WcStatus::LocQpOpErr),
        };
        if self.st.slots.outstanding().get(slot).is_none() {
            // Slot storage shorter than the ring: a request that could not
            // be tracked must not be sent. (Its credit stays taken; the
            // stream ends here anyway.)
            return Err(WcStatus::LocQpOpErr);
        }
        let msg = self.tx.start(request).map_err(|_| WcStatus::LocQpOpErr)?;
        if let Some(o) = self.st.slots.outstanding_mut().get_mut(slot) {
            *o = Outstanding {
                msn: msg.msn(),
                ..issued
            };
        }
        self.inflight = Some(InFlight {
            msg,
            job: Job::Request,
        });
        Ok(Started::Message)
    }

    /// Starts the response to the request in IRD `slot`.
    fn start_response(&mut self, slot: usize) -> Started {
        let (request, job) = match self.st.slots.pending().get(slot).copied() {
            Some(Pending::Read { header, source }) => (
                WorkRequest::ReadResponse {
                    sink_stag: header.sink_stag,
                    sink_tagged_offset: header.sink_tagged_offset,
                    len: header.read_size,
                },
                Job::ReadResponse { slot, source },
            ),
            Some(Pending::Atomic(header)) => (
                WorkRequest::AtomicResponse(header),
                Job::AtomicResponse { slot },
            ),
            _ => return Started::Idle,
        };
        match self.tx.start(request) {
            Ok(msg) => {
                self.inflight = Some(InFlight { msg, job });
                Started::Message
            }
            Err(_) => {
                self.fail_local(LOCAL_FAILURE);
                Started::Again
            }
        }
    }

    /// Finishes the message produced whole on the call before, whose
    /// completion waited for the driver to hand its FPDUs to TCP.
    fn finish_if_deferred<X: QpContext>(&mut self, ctx: &mut X) {
        if let Some(completion) = self.deferred.take() {
            ctx.complete(completion);
        }
    }

    /// Wraps up the message in flight, whose last FPDU was produced: it ends, or the Immediate
    /// Data that follows it takes its place.
    fn finish<X: QpContext>(&mut self, ctx: &mut X) {
        let Some(inflight) = self.inflight.as_mut() else {
            return;
        };
        match &mut inflight.job {
            Job::Sq { wr, len, then } => match then.take() {
                Some((data, solicited)) => {
                    match self.tx.start(WorkRequest::Immediate { data, solicited }) {
                        Ok(msg) => inflight.msg = msg,
                        Err(_) => {
                            ctx.complete(Completion::send(wr, WcStatus::LocQpOpErr, 0));
                            self.fail_local(LOCAL_FAILURE);
                        }
                    }
                }
                None => {
                    if wr.signaled {
                        ctx.complete(Completion::send(wr, WcStatus::Success, *len));
                    }
                    self.inflight = None;
                }
            },
            Job::Request => self.inflight = None,
            Job::ReadResponse { slot, .. } | Job::AtomicResponse { slot } => {
                let slot = *slot;
                self.inflight = None;
                self.st.responder.finish();
                if let Some(p) = self.st.slots.pending_mut().get_mut(slot) {
                    *p = Pending::Empty;
                }
            }
        }
    }

    /// QP to error: completes every outstanding request (ORD slots, the
    /// partially sent work request) and every queued SQ and RQ entry with
    /// [`WcStatus::WrFlushErr`], signaled or not (a message already produced
    /// whole completes as sent). A pending TERMINATE stays pending; otherwise
    /// nothing is sent any more.
    pub fn flush<X: QpContext>(&mut self, ctx: &mut X) {
        if self.st.stage == Stage::Running {
            self.st.stage = Stage::Flushed;
        }
        // A message produced whole, whose completion waited for the next
        // call, went to TCP before the flush: it completes as it would have.
        self.finish_if_deferred(ctx);
        if let Some(InFlight {
            job: Job::Sq { wr, .. },
            ..
        }) = self.inflight.take()
        {
            ctx.complete(Completion::send(&wr, WcStatus::WrFlushErr, 0));
        }
        while let Some((slot, kind)) = self.st.requester.front() {
            if self.st.requester.complete(kind).is_err() {
                break;
            }
            if let Some(o) = self.st.slots.outstanding_mut().get_mut(slot) {
                if o.live {
                    o.live = false;
                    // A Read into several SGEs completes once, on its last
                    // part (or below, if that was not sent yet).
                    if o.last && !o.rtr {
                        ctx.complete(Completion::recv(o.wr_id, WcStatus::WrFlushErr, o.opcode, 0));
                    }
                }
            }
        }
        for o in self.st.slots.outstanding_mut().iter_mut() {
            o.live = false;
        }
        if let Some(split) = self.st.split.take() {
            ctx.complete(Completion::send(&split.wr, WcStatus::WrFlushErr, 0));
        }
        while self.st.responder.finish().is_some() {}
        for p in self.st.slots.pending_mut().iter_mut() {
            *p = Pending::Empty;
        }
        let mut budget = FLUSH_LIMIT;
        while let Some(wr) = ctx.peek_send() {
            ctx.pop_send();
            ctx.complete(Completion::send(&wr, WcStatus::WrFlushErr, 0));
            budget = budget.saturating_sub(1);
            if budget == 0 {
                break;
            }
        }
        if let Some(wr_id) = self.st.recv.take_id() {
            let status = self.st.recv_status.take().unwrap_or(WcStatus::WrFlushErr);
            ctx.complete(Completion::recv(wr_id, status, WcOpcode::Recv, 0));
        }
        let mut budget = FLUSH_LIMIT;
        while let Some(wr) = ctx.pop_recv() {
            ctx.complete(Completion::recv(
                wr.wr_id,
                WcStatus::WrFlushErr,
                WcOpcode::Recv,
                0,
            ));
            budget = budget.saturating_sub(1);
            if budget == 0 {
                break;
            }
        }
    }
}

/// The result buffer of an atomic: exactly one SGE of at least 8 bytes.
fn atomic_sge(sges: &[Sge]) -> Result<Sge, WcStatus> {
    match sges {
        [sge] if sge.length >= ATOMIC_LEN => Ok(*sge),
        [_] => Err(WcStatus::LocLenErr),
        _ => Err(WcStatus::LocQpOpErr),
    }
}
