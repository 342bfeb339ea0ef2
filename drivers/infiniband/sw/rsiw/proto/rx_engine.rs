// SPDX-License-Identifier: GPL-2.0

//! The receive engine of one RDMAP stream: bytes in, placed data and
//! completions out.
//!
//! After MPA connection setup every byte TCP delivers belongs to an FPDU.
//! [`RxEngine::feed`] takes those bytes in whatever pieces the socket hands
//! over and drives the protocol layers built in the sibling modules:
//!
//! - [`super::fpdu::FpduReceiver`] finds the FPDUs, collects each DDP/RDMAP
//!   header and checks the CRC32c over the whole FPDU;
//! - [`super::rdmap::Segment::decode`] validates the headers (the common
//!   data segments through [`super::rdmap::DataSegment::decode`]);
//! - [`super::placement`] decides whether and where the payload may go, and
//!   keeps the MSN/MO state of the untagged queues;
//! - [`super::ord_ird`] accounts for RDMA Read and Atomic requests (IRD, as
//!   the responder) and their responses (ORD, as the requester).
//!
//! The driver supplies what needs its own state through [`RxContext`]:
//! memory region lookups, receive buffers, the copy of payload into memory,
//! the credit queues and the completion of messages.
//!
//! # Direct placement and the CRC
//!
//! Payload is placed as it arrives, piece by piece, without staging the FPDU.
//! Like the C siw, the engine therefore only learns whether the FPDU was
//! intact after its payload has been placed: the CRC is computed
//! incrementally and compared at the end. Nothing is *completed* before that
//! comparison: message completions ([`RxEvent`]) are reported only once the
//! last FPDU of a message has passed it, and headers without payload (Read
//! and Atomic requests, Immediate Data, Terminate) are acted on only then.
//! If the CRC does not match, bytes already placed for the FPDU may be
//! garbage; the stream is terminated (MPA CRC error), which makes the whole
//! message fail, so the consumer never sees them as valid data.
//!
//! When CRC is enabled, an error found in a header is also held back until
//! the end of the FPDU (its payload is dropped): a header that fails its
//! checks is then reported as the CRC error it most likely is when the CRC
//! does not match either. Without CRC the error is reported at once.
//!
//! # Termination
//!
//! Every error ends the stream: [`RxEngine::feed`] returns the
//! [`TermError`], the engine accepts no more input, and
//! [`RxEngine::termination`] gives the TERMINATE to send, with the offending
//! segment's headers to echo. A
//! TERMINATE received from the peer is delivered as [`RxEvent::Terminate`]
//! and also ends the stream.

use super::atomic::{AtomicRequestHeader, AtomicResponseHeader};
use super::crc32c::Crc32c;
use super::ddp::{
    DdpHeader, QueueNumber, TaggedHeader, UntaggedHeader, TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN,
};
use super::fpdu::{FpduReceiver, RxEvent as FpduEvent, WholeFpdu, MAX_HEADER_LEN};
use super::immediate::ImmediateData;
use super::ord_ird::{RequestKind, Requester, Responder};
use super::pieces::Pieces;
use super::placement::{
    grant_tagged, Grant, MemoryRegion, TaggedAccess, TaggedUse, UntaggedPlacement, UntaggedQueues,
    UntaggedSegment,
};
use super::rdmap::{DataSegment, Opcode, OpcodeHeader, ReadRequestHeader, Segment};
use super::term_error::TermError;
use super::terminate::TerminateMessage;
use super::wire;

/// What the receive engine needs from the driver.
///
/// Every method that can fail returns the error to terminate the stream
/// with; the engine then stops and reports it like its own errors.
pub trait RxContext {
    /// The memory region the index part of `stag` names, if any. The engine
    /// checks the key, state, protection domain, rights and bounds itself.
    fn lookup_stag(&mut self, stag: u32) -> Option<MemoryRegion>;

    /// Copies `data` into the tagged buffer `grant` names (its length is
    /// `data.len()`). The grant was checked against the region returned by
    /// [`Self::lookup_stag`] when the segment's header arrived; the driver
    /// checks it again ([`Grant::recheck`]) under the lock it copies under,
    /// and places nothing if that fails.
    fn place_tagged(&mut self, grant: &Grant, data: &[u8]) -> Result<(), TermError>;

    /// [`Self::place_tagged`] for payload that arrived in several pieces
    /// ([`RxEngine::feed_pieces`]): one call for the whole run, which a
    /// driver can check and place at once. By default, piece by piece.
    fn place_tagged_pieces(&mut self, grant: &Grant, data: Pieces<'_>) -> Result<(), TermError> {
        data.try_for_each_at(|at, piece| {
            let piece_grant = grant
                .narrow(at as u64, piece.len() as u64)
                .ok_or(TermError::DdpLocalCatastrophic)?;
            self.place_tagged(&piece_grant, piece)
        })
    }

    /// Takes the next posted receive buffer for an arriving Send or
    /// Immediate Data message and returns its total length, or `None` if no
    /// buffer is posted.
    fn recv_buffer(&mut self) -> Option<u64>;

    /// Copies `data` into the receive buffer taken last, at `offset`. The
    /// range lies within the length [`Self::recv_buffer`] returned.
    fn place_untagged(&mut self, offset: u32, data: &[u8]) -> Result<(), TermError>;

    /// [`Self::place_untagged`] for payload that arrived in several pieces,
    /// as [`Self::place_tagged_pieces`]. By default, piece by piece.
    fn place_untagged_pieces(&mut self, offset: u32, data: Pieces<'_>) -> Result<(), TermError> {
        data.try_for_each_at(|at, piece| {
            let at = u32::try_from(at).unwrap_or(u32::MAX);
            self.place_untagged(offset.saturating_add(at), piece)
        })
    }

    /// The requester's outstanding Read and Atomic requests (ORD), which the
    /// send path fills and incoming responses drain.
    fn requester(&mut self) -> &mut Requester;

    /// The responder's pending Read and Atomic requests (IRD), which
    /// incoming requests fill and the send path drains.
    fn responder(&mut self) -> &mut Responder;

    /// Reports a completed message. Returning an error (for instance when
    /// the STag of a Send with Invalidate cannot be invalidated) terminates
    /// the stream with it.
    fn deliver(&mut self, event: RxEvent<'_>) -> Result<(), TermError>;

    /// The last segment of an RDMA Write was placed and passed its CRC check.
    /// RDMA Writes complete nothing at the data sink, so this is only a hint
    /// for consumers that need to know what preceded a message, such as an
    /// Immediate Data message completing an RDMA Write with Immediate
    /// (RFC 7306 section 6). The default ignores it.
    fn rdma_write_done(&mut self) {}

    /// An FPDU of `wire_len` bytes (length field, ULPDU, pad and CRC field) began: its header
    /// is in. For counting; the default ignores it.
    fn fpdu_received(&mut self, _wire_len: usize) {}

    /// Accounts for a Read Response segment answering the request in ORD
    /// slot `slot` before its payload is placed: `len` bytes at tagged offset
    /// `to` of `stag`, the response's last segment if `last`. The segments
    /// must fill the sink that request named, in order: each in its STag,
    /// starting where the one before ended (the first at the sink's start),
    /// not past its end, and the last one ending there. Returns the error to
    /// terminate with for any other segment. Without this a peer could aim a
    /// Read Response at any locally writable region (RFC 5040 section 4.4:
    /// the sink STag of a Read Response is the one the requester advertised),
    /// or have a Read complete with sink bytes it never sent.
    fn accept_read_response(
        &mut self,
        slot: usize,
        stag: u32,
        to: u64,
        len: usize,
        last: bool,
    ) -> Result<(), TermError>;
}

/// A message the engine received in full, its CRC verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxEvent<'a> {
    /// A Send family message filled the receive buffer taken for it.
    Send {
        /// Its MSN on queue 0.
        msn: u32,
        /// Bytes placed.
        len: u32,
        /// The sender asked for a solicited event.
        solicited: bool,
        /// The STag a Send with Invalidate asks to invalidate.
        invalidate: Option<u32>,
    },
    /// An Immediate Data message (RFC 7306 section 6) consumed a receive
    /// buffer; nothing was placed in it. After an RDMA Write this completes
    /// an RDMA Write with Immediate.
    Immediate {
        /// Its MSN on queue 0.
        msn: u32,
        /// The eight bytes of Immediate Data.
        data: ImmediateData,
        /// Immediate Data with SE.
        solicited: bool,
    },
    /// An RDMA Read Request, queued in IRD slot `slot`; answer it in order.
    ReadRequest {
        /// The responder slot it occupies.
        slot: usize,
        /// The request.
        header: ReadRequestHeader,
        /// The source, checked for `read_size` bytes of remote read access.
        source: Grant,
    },
    /// The last segment of a Read Response was placed: the request in ORD
    /// slot `slot` is done.
    ReadResponse {
        /// The requester slot it occupied.
        slot: usize,
    },
    /// An Atomic Request (RFC 7306 section 5.2.1), queued in IRD slot
    /// `slot`; execute it and answer it in order.
    AtomicRequest {
        /// The responder slot it occupies.
        slot: usize,
        /// The request.
        header: AtomicRequestHeader,
        /// The target word, checked for remote atomic access and 64-bit
        /// alignment.
        target: Grant,
    },
    /// An Atomic Response (RFC 7306 section 5.2.2) answered the request in
    /// ORD slot `slot`.
    AtomicResponse {
        /// The requester slot it occupied.
        slot: usize,
        /// The response.
        header: AtomicResponseHeader,
    },
    /// The peer terminated the stream. The engine accepts no more input.
    Terminate(TerminateMessage<'a>),
}

/// Why the engine stopped, and what to tell the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxTermination {
    error: TermError,
    header: [u8; MAX_HEADER_LEN],
    header_len: usize,
    ulpdu_len: usize,
}

impl RxTermination {
    fn new(error: TermError, current: Option<&Current>) -> Self {
        let mut term = Self {
            error,
            header: [0; MAX_HEADER_LEN],
            header_len: 0,
            ulpdu_len: 0,
        };
        if let Some(cur) = current {
            let header = cur.header();
            if let Some(dst) = term.header.get_mut(..header.len()) {
                dst.copy_from_slice(header);
                term.header_len = header.len();
            }
            term.ulpdu_len = cur.ulpdu_len;
        }
        term
    }

    /// The error to report.
    pub const fn error(&self) -> TermError {
        self.error
    }

    /// The headers of the offending segment, if the error is about one.
    pub fn offending_header(&self) -> Option<&[u8]> {
        match self.header.get(..self.header_len) {
            Some(h) if !h.is_empty() => Some(h),
            _ => None,
        }
    }

    /// The TERMINATE body to send: the error with the headers
    /// [`TermError::echo_flags`] asks to echo, and the length of the whole
    /// offending segment in the DDP Segment Length field.
    pub fn message(&self) -> TerminateMessage<'_> {
        let mut message = TerminateMessage::reporting(self.error, self.offending_header());
        if message.segment_length.is_some() {
            message.segment_length = Some(u16::try_from(self.ulpdu_len).unwrap_or(u16::MAX));
        }
        message
    }
}

/// Where the payload of the current segment goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Nowhere: no payload, or dropped until a held-back error is reported.
    Drop,
    /// Into the tagged buffer the segment's whole payload was granted.
    Tagged(Grant),
    /// Into the bound receive buffer, from `offset`.
    Untagged { offset: u32 },
}

/// What to do once the current FPDU has passed its CRC check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Done {
    Nothing,
    Send {
        msn: u32,
        len: u32,
        solicited: bool,
        invalidate: Option<u32>,
    },
    Immediate {
        msn: u32,
        data: ImmediateData,
        solicited: bool,
    },
    ReadRequest {
        slot: usize,
        header: ReadRequestHeader,
        source: Grant,
    },
    ReadResponse,
    /// The last segment of an RDMA Write.
    Write,
    AtomicRequest {
        slot: usize,
        header: AtomicRequestHeader,
        target: Grant,
    },
    AtomicResponse(AtomicResponseHeader),
    Terminate,
}

/// The segment being received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Current {
    header: [u8; MAX_HEADER_LEN],
    header_len: usize,
    ulpdu_len: usize,
    place: Place,
    done: Done,
    /// An error held back until the CRC has been checked.
    held: Option<TermError>,
}

impl Current {
    const EMPTY: Self = Self {
        header: [0; MAX_HEADER_LEN],
        header_len: 0,
        ulpdu_len: 0,
        place: Place::Drop,
        done: Done::Nothing,
        held: None,
    };

    fn header(&self) -> &[u8] {
        self.header.get(..self.header_len).unwrap_or(&[])
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Running,
    /// The peer sent a TERMINATE.
    Closed,
    Failed(RxTermination),
}

/// Everything but the FPDU parser, so that its borrows stay disjoint.
#[derive(Debug, Clone)]
struct State {
    crc_enabled: bool,
    pd: u32,
    queues: UntaggedQueues,
    current: Option<Current>,
    stage: Stage,
}

/// The receive engine of one RDMAP stream. It is on cache lines of its own: a QP receives on
/// another CPU than it sends (in a ping-pong, in the peer's send), and lines shared with the
/// sending side would move between the CPUs with every message.
#[derive(Debug, Clone)]
#[repr(align(64))]
pub struct RxEngine<C: Crc32c + Copy> {
    fpdu: FpduReceiver<C>,
    state: State,
}

impl<C: Crc32c + Copy> RxEngine<C> {
    /// An engine at the start of the FPDU stream of a QP in protection
    /// domain `pd`; `crc_enabled` is the negotiated MPA CRC setting.
    pub fn new(engine: C, crc_enabled: bool, pd: u32) -> Self {
        Self {
            fpdu: FpduReceiver::new(engine, crc_enabled),
            state: State {
                crc_enabled,
                pd,
                queues: UntaggedQueues::new(),
                current: None,
                stage: Stage::Running,
            },
        }
    }

    /// The untagged queues' state (expected MSNs, message in progress).
    pub fn queues(&self) -> &UntaggedQueues {
        &self.state.queues
    }

    /// Counts one whole message on `queue` as received outside the engine:
    /// the RFC 6581 ready-to-receive message connection setup consumed
    /// before the stream was handed over
    /// ([`super::placement::UntaggedQueue::skip_message`]); the next message
    /// on `queue` must carry the following MSN. Returns `false`, changing
    /// nothing, while a message is in progress on `queue`.
    pub fn skip_message(&mut self, queue: QueueNumber) -> bool {
        self.state
            .queues
            .get_mut(queue as u32)
            .is_ok_and(|q| q.skip_message())
    }

    /// Whether the engine still accepts input.
    pub fn is_running(&self) -> bool {
        self.state.stage == Stage::Running
    }

    /// The termination the engine stopped with, if it did.
    pub fn termination(&self) -> Option<&RxTermination> {
        match &self.state.stage {
            Stage::Failed(t) => Some(t),
            _ => None,
        }
    }

    /// Consumes `chunk`, placing payload and delivering completions through
    /// `ctx`. Returns the bytes consumed: all of `chunk`, or fewer if a
    /// TERMINATE from the peer ended the stream within it (the rest is
    /// ignored, and later calls consume nothing). On error the stream is
    /// dead: its error is returned, now and on every later call, and
    /// [`Self::termination`] describes the TERMINATE to send.
    pub fn feed<X: RxContext>(&mut self, chunk: &[u8], ctx: &mut X) -> Result<usize, TermError> {
        self.feed_until::<X, false>(chunk, ctx)
    }

    /// As [`Self::feed`] over the bytes of `pieces` in order (the pieces of
    /// a socket buffer), with the same result as feeding each piece in turn;
    /// but the payload of a segment that runs over several pieces is placed
    /// with one [`RxContext::place_tagged_pieces`] or
    /// [`RxContext::place_untagged_pieces`] call.
    pub fn feed_pieces<X: RxContext>(
        &mut self,
        pieces: Pieces<'_>,
        ctx: &mut X,
    ) -> Result<usize, TermError> {
        let mut rest = pieces;
        let mut consumed = 0;
        while !rest.is_empty() {
            match self.state.stage {
                Stage::Running => {}
                Stage::Closed => break,
                Stage::Failed(t) => return Err(t.error),
            }
            let left = self.fpdu.payload_left();
            let n = if left > 0 {
                // Inside a payload: place all of it that is here at once.
                let (run, _) = rest.split_at(left);
                let offset = self.fpdu.payload_taken();
                let _: Result<(), ()> = run.try_for_each(|piece| {
                    self.fpdu.take_payload(piece);
                    Ok(())
                });
                if let Err(e) = self.state.on_payload(run, offset, ctx) {
                    self.state.fail(e);
                }
                run.len()
            } else {
                // Up to the next payload, within the first piece.
                let n = self.feed_until::<X, true>(rest.first(), ctx)?;
                if n == 0 {
                    break;
                }
                n
            };
            consumed += n;
            rest = rest.split_at(n).1;
        }
        match self.state.stage {
            Stage::Failed(t) => Err(t.error),
            _ => Ok(consumed),
        }
    }

    /// [`Self::feed`], which with `PAYLOAD` stops where a payload begins.
    #[inline]
    fn feed_until<X: RxContext, const PAYLOAD: bool>(
        &mut self,
        chunk: &[u8],
        ctx: &mut X,
    ) -> Result<usize, TermError> {
        let mut consumed = 0;
        loop {
            if PAYLOAD && self.fpdu.payload_left() > 0 {
                return Ok(consumed);
            }
            match self.state.stage {
                Stage::Running => {}
                Stage::Closed => return Ok(consumed),
                Stage::Failed(t) => return Err(t.error),
            }
            let rest = match chunk.get(consumed..) {
                Some(rest) if !rest.is_empty() => rest,
                _ => return Ok(consumed),
            };
            if let Some(fpdu) = self.fpdu.take_whole(rest) {
                consumed = consumed.saturating_add(fpdu.len);
                self.state.on_whole(&fpdu, ctx)?;
                continue;
            }
            let (n, event) = match self.fpdu.step(rest) {
                Ok(step) => step,
                Err(e) => {
                    // The FPDU was damaged: whatever its header said, the
                    // CRC error is the one to report.
                    let term = RxTermination::new(e.term(), None);
                    self.state.stage = Stage::Failed(term);
                    return Err(term.error);
                }
            };
            consumed = consumed.saturating_add(n);
            let result = match event {
                None if n == 0 => return Ok(consumed),
                None => Ok(()),
                Some(FpduEvent::Header { header, ulpdu_len }) => {
                    self.state.on_header(header, ulpdu_len, ctx);
                    Ok(())
                }
                Some(FpduEvent::Payload { data, offset }) => {
                    let data = [data];
                    self.state.on_payload(Pieces::one(&data), offset, ctx)
                }
                Some(FpduEvent::Complete { .. }) => self.state.on_complete(ctx),
            };
            if let Err(e) = result {
                self.state.fail(e);
            }
        }
    }
}

/// Copies the first `len` bytes of `src` to the start of `dst`, the DDP
/// header of a data segment (nearly every segment's whole header) with a
/// fixed-size move rather than a call to `memcpy`.
#[inline]
fn copy_header(dst: &mut [u8], src: &[u8], len: usize) {
    fn fixed<const N: usize>(dst: &mut [u8], src: &[u8]) -> bool {
        match (dst.get_mut(..N), wire::read_array::<N>(src, 0)) {
            (Some(dst), Some(src)) => {
                dst.copy_from_slice(&src);
                true
            }
            _ => false,
        }
    }
    let copied = match len {
        TAGGED_HEADER_LEN => fixed::<TAGGED_HEADER_LEN>(dst, src),
        UNTAGGED_HEADER_LEN => fixed::<UNTAGGED_HEADER_LEN>(dst, src),
        _ => false,
    };
    if !copied {
        if let (Some(dst), Some(src)) = (dst.get_mut(..len), src.get(..len)) {
            dst.copy_from_slice(src);
        }
    }
}

/// Where the payload of a Send family segment placed as `placement` goes,
/// and what to do when it is complete.
fn send_plan(
    opcode: Opcode,
    placement: &UntaggedPlacement,
    invalidate: Option<u32>,
    payload_len: usize,
) -> (Place, Done) {
    let place = if payload_len == 0 {
        Place::Drop
    } else {
        Place::Untagged {
            offset: placement.offset,
        }
    };
    let done = match placement.message_len {
        Some(len) => Done::Send {
            msn: placement.msn,
            len,
            solicited: opcode.solicited_event(),
            invalidate,
        },
        None => Done::Nothing,
    };
    (place, done)
}

impl State {
    /// Records the stream's end with `error` about the current segment.
    fn fail(&mut self, error: TermError) {
        let term = RxTermination::new(error, self.current.as_ref());
        self.stage = Stage::Failed(term);
    }

    /// Acts on a whole FPDU as on the events of its parts: header,
    /// payload, then the CRC check and completion. A CRC error ends the
    /// stream at once; other errors end it as in [`RxEngine::feed`].
    fn on_whole<X: RxContext>(
        &mut self,
        fpdu: &WholeFpdu<'_>,
        ctx: &mut X,
    ) -> Result<(), TermError> {
        self.on_header(fpdu.header, fpdu.ulpdu_len, ctx);
        if self.stage != Stage::Running {
            return Ok(());
        }
        if !fpdu.payload.is_empty() {
            let payload = [fpdu.payload];
            if let Err(e) = self.on_payload(Pieces::one(&payload), 0, ctx) {
                self.fail(e);
                return Ok(());
            }
        }
        if let Err(e) = fpdu.crc {
            // As in `RxEngine::feed`: the CRC error is the one to report.
            let term = RxTermination::new(e.term(), None);
            self.stage = Stage::Failed(term);
            return Err(term.error);
        }
        if let Err(e) = self.on_complete(ctx) {
            self.fail(e);
        }
        Ok(())
    }

    fn on_header<X: RxContext>(&mut self, header: &[u8], ulpdu_len: usize, ctx: &mut X) {
        ctx.fpdu_received(super::fpdu::fpdu_len(ulpdu_len));
        let header_len = header.len().min(MAX_HEADER_LEN);
        let payload_len = ulpdu_len.saturating_sub(header_len);
        let planned = self.plan(header, payload_len, ctx);
        // Updated in place: the segment is copied neither here nor when it
        // completes, and its header buffer is not cleared (only the bytes up
        // to `header_len` count).
        let cur = self.current.get_or_insert(Current::EMPTY);
        cur.header_len = header_len;
        cur.ulpdu_len = ulpdu_len;
        cur.place = Place::Drop;
        cur.done = Done::Nothing;
        cur.held = None;
        copy_header(&mut cur.header, header, header_len);
        match planned {
            Ok((place, done)) => {
                cur.place = place;
                cur.done = done;
            }
            Err(e) if self.crc_enabled => cur.held = Some(e),
            Err(e) => self.fail(e),
        }
    }

    /// Validates a segment's headers and claims what it needs (a receive
    /// buffer, an IRD entry), returning where its payload goes and what to
    /// do when it is complete.
    fn plan<X: RxContext>(
        &mut self,
        header: &[u8],
        payload_len: usize,
        ctx: &mut X,
    ) -> Result<(Place, Done), TermError> {
        // Nearly every segment is a data segment: read without building a
        // `Segment`, with the same checks.
        match DataSegment::decode(header) {
            Some(DataSegment::Tagged(opcode, h)) => {
                return self.plan_tagged(opcode, &h, payload_len, ctx)
            }
            Some(data @ DataSegment::Untagged(opcode, h)) => {
                let invalidate = data.invalidate_stag();
                return self.plan_send(opcode, &h, invalidate, payload_len, ctx);
            }
            None => {}
        }
        let seg = Segment::decode(header).map_err(|e| e.term())?;
        let opcode = seg.opcode;
        if !opcode.carries_payload() && payload_len != 0 {
            // The header-only message is longer than its header.
            return Err(TermError::RdmapCatastrophicStream);
        }
        let untagged = match seg.ddp {
            DdpHeader::Tagged(h) => return self.plan_tagged(opcode, &h, payload_len, ctx),
            DdpHeader::Untagged(h) => h,
        };
        let placement = self.place_untagged(&untagged, payload_len, ctx)?;
        let msn = placement.msn;
        let done = match seg.header {
            OpcodeHeader::None => {
                let invalidate = seg.invalidate_stag();
                return Ok(send_plan(opcode, &placement, invalidate, payload_len));
            }
            OpcodeHeader::Immediate(data) => Done::Immediate {
                msn,
                data,
                solicited: opcode.solicited_event(),
            },
            OpcodeHeader::ReadRequest(header) => {
                let access = TaggedAccess::read_source(&header);
                let region = if access.len == 0 {
                    None
                } else {
                    ctx.lookup_stag(access.stag)
                };
                let source = grant_tagged(region.as_ref(), self.pd, &access)?;
                // The response's segments would run past 2^64 in the sink:
                // refused on arrival, before it takes an IRD entry, not while
                // answering it. The sink is the requester's buffer, but its
                // range is the request's own: RFC 5040 section 7.2 reports an
                // error in an incoming Read Request with both its headers
                // echoed, and the remote protection error "TO wrap" (0/1/0x04,
                // section 4.8) is the one for a range that wraps, as for the
                // source.
                if header
                    .sink_tagged_offset
                    .checked_add(u64::from(header.read_size))
                    .is_none()
                {
                    return Err(TermError::RdmapToWrap);
                }
                let slot = ctx.responder().accept(RequestKind::Read)?;
                Done::ReadRequest {
                    slot,
                    header,
                    source,
                }
            }
            OpcodeHeader::AtomicRequest(header) => {
                let access = TaggedAccess::atomic_target(&header);
                let region = ctx.lookup_stag(access.stag);
                let target = grant_tagged(region.as_ref(), self.pd, &access)?;
                let slot = ctx.responder().accept(RequestKind::Atomic)?;
                Done::AtomicRequest {
                    slot,
                    header,
                    target,
                }
            }
            OpcodeHeader::AtomicResponse(header) => {
                match ctx.requester().front() {
                    Some((_, RequestKind::Atomic)) => {}
                    _ => return Err(TermError::RdmapUnexpectedOpcode),
                }
                Done::AtomicResponse(header)
            }
            OpcodeHeader::Terminate(_) => Done::Terminate,
        };
        Ok((Place::Drop, done))
    }

    /// [`Self::plan`] for a tagged segment (RDMA Write or Read Response).
    fn plan_tagged<X: RxContext>(
        &mut self,
        opcode: Opcode,
        h: &TaggedHeader,
        payload_len: usize,
        ctx: &mut X,
    ) -> Result<(Place, Done), TermError> {
        let usage = if opcode == Opcode::ReadResponse {
            // A response nobody asked for.
            match ctx.requester().front() {
                Some((slot, RequestKind::Read)) => ctx.accept_read_response(
                    slot,
                    h.stag,
                    h.tagged_offset,
                    payload_len,
                    h.control.last,
                )?,
                _ => return Err(TermError::RdmapUnexpectedOpcode),
            }
            TaggedUse::ReadResponse
        } else {
            TaggedUse::RdmaWrite
        };
        let access = TaggedAccess::segment(usage, h, payload_len);
        let region = if access.len == 0 {
            None
        } else {
            ctx.lookup_stag(h.stag)
        };
        let grant = grant_tagged(region.as_ref(), self.pd, &access)?;
        let place = if payload_len == 0 {
            Place::Drop
        } else {
            Place::Tagged(grant)
        };
        let done = match (opcode, h.control.last) {
            (Opcode::ReadResponse, true) => Done::ReadResponse,
            (Opcode::RdmaWrite, true) => Done::Write,
            _ => Done::Nothing,
        };
        Ok((place, done))
    }

    /// [`Self::plan`] for a segment of the Send family, which asks to
    /// invalidate `invalidate`.
    fn plan_send<X: RxContext>(
        &mut self,
        opcode: Opcode,
        h: &UntaggedHeader,
        invalidate: Option<u32>,
        payload_len: usize,
        ctx: &mut X,
    ) -> Result<(Place, Done), TermError> {
        let placement = self.place_untagged(h, payload_len, ctx)?;
        Ok(send_plan(opcode, &placement, invalidate, payload_len))
    }

    /// Places an untagged segment on its queue; the first segment of a
    /// message on queue 0 claims the next receive buffer first.
    fn place_untagged<X: RxContext>(
        &mut self,
        h: &UntaggedHeader,
        payload_len: usize,
        ctx: &mut X,
    ) -> Result<UntaggedPlacement, TermError> {
        let segment = UntaggedSegment::new(h, payload_len);
        let send_queue = self.queues.send;
        if h.queue_number == QueueNumber::Send as u32
            && send_queue.needs_buffer()
            && h.msn == send_queue.expected_msn()
        {
            // Without a buffer, placement reports "no buffer".
            if let Some(len) = ctx.recv_buffer() {
                self.queues.send.bind_buffer(len);
            }
        }
        self.queues.place(&segment)
    }

    /// Places `data`, the payload of the current segment from its byte
    /// `offset` on.
    fn on_payload<X: RxContext>(
        &mut self,
        data: Pieces<'_>,
        offset: usize,
        ctx: &mut X,
    ) -> Result<(), TermError> {
        let Some(cur) = self.current.as_ref() else {
            return Ok(());
        };
        match cur.place {
            Place::Drop => Ok(()),
            Place::Tagged(grant) => {
                let here = u64::try_from(offset)
                    .ok()
                    .and_then(|at| grant.narrow(at, data.len() as u64))
                    .ok_or(TermError::DdpLocalCatastrophic)?;
                ctx.place_tagged_pieces(&here, data)
            }
            Place::Untagged { offset: base } => {
                let at = u32::try_from(offset)
                    .ok()
                    .and_then(|o| base.checked_add(o))
                    .ok_or(TermError::DdpLocalCatastrophic)?;
                ctx.place_untagged_pieces(at, data)
            }
        }
    }

    #[inline]
    fn on_complete<X: RxContext>(&mut self, ctx: &mut X) -> Result<(), TermError> {
        let Some((held, done)) = self.current.as_ref().map(|cur| (cur.held, cur.done)) else {
            return Ok(());
        };
        if let Some(e) = held {
            return Err(e);
        }
        let event = match done {
            Done::Nothing => return Ok(()),
            Done::Write => {
                ctx.rdma_write_done();
                return Ok(());
            }
            Done::Send {
                msn,
                len,
                solicited,
                invalidate,
            } => RxEvent::Send {
                msn,
                len,
                solicited,
                invalidate,
            },
            Done::Immediate {
                msn,
                data,
                solicited,
            } => RxEvent::Immediate {
                msn,
                data,
                solicited,
            },
            Done::ReadRequest {
                slot,
                header,
                source,
            } => RxEvent::ReadRequest {
                slot,
                header,
                source,
            },
            Done::ReadResponse => RxEvent::ReadResponse {
                slot: ctx.requester().complete(RequestKind::Read)?,
            },
            Done::AtomicRequest {
                slot,
                header,
                target,
            } => RxEvent::AtomicRequest {
                slot,
                header,
                target,
            },
            Done::AtomicResponse(header) => RxEvent::AtomicResponse {
                slot: ctx.requester().complete(RequestKind::Atomic)?,
                header,
            },
            Done::Terminate => {
                self.stage = Stage::Closed;
                let header = self.current.as_ref().map_or(&[][..], Current::header);
                let message = match Segment::decode(header) {
                    Ok(Segment {
                        header: OpcodeHeader::Terminate(m),
                        ..
                    }) => m,
                    // Decoded once already; cannot differ.
                    _ => return Err(TermError::RdmapCatastrophicStream),
                };
                return ctx.deliver(RxEvent::Terminate(message));
            }
        };
        ctx.deliver(event)
    }
}
