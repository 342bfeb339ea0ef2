// SPDX-License-Identifier: GPL-2.0

//! The transmit engine of one RDMAP stream: work requests in, FPDUs out.
//!
//! [`TxEngine::start`] turns one work request into a [`TxMessage`], which
//! yields the message's FPDUs one by one. For each FPDU it writes the MPA
//! length field and the DDP/RDMAP headers into a buffer of the caller and
//! names the range of the work request's payload that follows; the caller
//! then hashes that payload into the FPDU's CRC ([`TxFpdu::hash_payload`])
//! while mapping it, and asks for the trailer (pad and CRC,
//! [`TxFpdu::trailer`]). The kernel can so send header, payload pages and
//! trailer as one vector without copying the payload:
//!
//! ```text
//! | length + headers (caller buffer) | payload (user/kernel pages) | pad + CRC |
//! ```
//!
//! Segmentation follows [`super::segmenter`]: every FPDU fits the FPDU size
//! derived from the MSS. The engine numbers the untagged messages of each
//! queue (MSNs start at 1); messages must be sent in the order they were
//! started. An RDMA Write with Immediate is the RDMA Write followed by an
//! Immediate Data message (RFC 7306 section 6), both produced by one
//! [`TxMessage`].
//!
//! The engine does not take ORD credits nor free IRD entries: the caller
//! does that with [`super::ord_ird`] before starting a Read or Atomic
//! Request and after sending the last FPDU of a response.

use core::num::NonZeroU32;

use super::atomic::{AtomicRequestHeader, AtomicResponseHeader};
use super::crc32c::{Crc32c, Crc32cDigest};
use super::ddp::{
    DdpControl, DdpHeader, QueueNumber, DDP_VERSION, TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN,
};
use super::fpdu::{self, FpduTrailer, LENGTH_FIELD_LEN, MAX_HEADER_LEN};
use super::immediate::ImmediateData;
use super::placement::UntaggedQueue;
use super::rdmap::{self, Opcode, OpcodeHeader, ReadRequestHeader};
use super::segmenter::{self, Segments, TxSegment};
use super::terminate::TerminateMessage;
use super::wire::{self, EncodeError};

/// Largest header an FPDU can start with: the MPA length field and the
/// DDP/RDMAP headers. Header buffers of this size always suffice.
pub const MAX_FPDU_HEADER_LEN: usize = LENGTH_FIELD_LEN + MAX_HEADER_LEN;

/// One work request to transmit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkRequest<'a> {
    /// Send, with optional solicited event and remote invalidation.
    Send {
        /// Payload bytes.
        len: u32,
        /// Send with Solicited Event.
        solicited: bool,
        /// Send with Invalidate of this STag.
        invalidate: Option<u32>,
    },
    /// RDMA Write.
    Write {
        /// STag of the remote buffer.
        stag: u32,
        /// Tagged offset of the first byte.
        tagged_offset: u64,
        /// Payload bytes.
        len: u32,
    },
    /// RDMA Write followed by Immediate Data (RFC 7306 section 6).
    WriteImmediate {
        /// STag of the remote buffer.
        stag: u32,
        /// Tagged offset of the first byte.
        tagged_offset: u64,
        /// Payload bytes.
        len: u32,
        /// The Immediate Data.
        data: ImmediateData,
        /// Immediate Data with SE.
        solicited: bool,
    },
    /// Immediate Data on its own (RFC 7306 section 6).
    Immediate {
        /// The Immediate Data.
        data: ImmediateData,
        /// Immediate Data with SE.
        solicited: bool,
    },
    /// RDMA Read Request.
    ReadRequest(ReadRequestHeader),
    /// RDMA Read Response, `len` bytes of the source into the sink.
    ReadResponse {
        /// The sink STag from the request.
        sink_stag: u32,
        /// The sink tagged offset from the request.
        sink_tagged_offset: u64,
        /// Payload bytes (the request's read size).
        len: u32,
    },
    /// Atomic Request (RFC 7306 section 5.2.1).
    AtomicRequest(AtomicRequestHeader),
    /// Atomic Response (RFC 7306 section 5.2.2).
    AtomicResponse(AtomicResponseHeader),
    /// Terminate.
    Terminate(TerminateMessage<'a>),
}

/// Why a work request cannot be transmitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxError {
    /// The FPDU size leaves no room for the headers and a payload byte.
    FpduTooSmall,
    /// The tagged offset of a segment would wrap 2^64.
    ToWrap,
    /// A header could not be encoded.
    Encode(EncodeError),
}

impl From<EncodeError> for TxError {
    fn from(e: EncodeError) -> Self {
        Self::Encode(e)
    }
}

/// The next MSN of every untagged queue of the outgoing stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Msns([u32; 4]);

impl Msns {
    fn take(&mut self, queue: QueueNumber) -> u32 {
        match self.0.get_mut(queue as usize) {
            Some(next) => {
                let msn = *next;
                *next = next.wrapping_add(1);
                msn
            }
            None => 0,
        }
    }
}

/// The transmit engine of one RDMAP stream.
#[derive(Debug, Clone, Copy)]
pub struct TxEngine<C: Crc32c + Copy> {
    crc: Option<C>,
    fpdu_size: usize,
    msns: Msns,
}

impl<C: Crc32c + Copy> TxEngine<C> {
    /// An engine for a new stream; `crc` is the CRC engine if CRC was
    /// negotiated, and `fpdu_size` the largest FPDU to send
    /// ([`segmenter::fpdu_size`]).
    pub fn new(crc: Option<C>, fpdu_size: usize) -> Self {
        let first = UntaggedQueue::FIRST_MSN;
        Self {
            crc,
            fpdu_size,
            msns: Msns([first; 4]),
        }
    }

    /// Changes the FPDU size for messages started from now on (the MSS or
    /// GSO size of the connection changed).
    pub fn set_fpdu_size(&mut self, fpdu_size: usize) {
        self.fpdu_size = fpdu_size;
    }

    /// Whether FPDUs carry a CRC.
    pub const fn has_crc(&self) -> bool {
        self.crc.is_some()
    }

    /// The FPDU size in force.
    pub const fn fpdu_size(&self) -> usize {
        self.fpdu_size
    }

    /// The MSN the next message on `queue` gets.
    pub fn next_msn(&self, queue: QueueNumber) -> u32 {
        self.msns.0.get(queue as usize).copied().unwrap_or(0)
    }

    /// Counts one message on `queue` that was sent outside the engine, so
    /// that the next one gets the following MSN: the RFC 6581
    /// ready-to-receive message connection setup sent before the stream was
    /// handed over (a zero-length Send takes MSN 1 of queue 0, a zero-length
    /// Read Request MSN 1 of queue 1). Returns the MSN it took.
    pub fn skip_msn(&mut self, queue: QueueNumber) -> u32 {
        self.msns.take(queue)
    }

    /// Starts transmitting `wr`, assigning its MSNs. Messages must be sent in
    /// the order they are started; on error nothing is assigned.
    #[inline]
    pub fn start<'a>(&mut self, wr: WorkRequest<'a>) -> Result<TxMessage<'a, C>, TxError> {
        let (opcode, len) = match wr {
            WorkRequest::Send {
                len,
                solicited,
                invalidate,
            } => (send_opcode(solicited, invalidate.is_some()), len),
            WorkRequest::Write { len, .. } | WorkRequest::WriteImmediate { len, .. } => {
                (Opcode::RdmaWrite, len)
            }
            WorkRequest::Immediate { solicited, .. } => (immediate_opcode(solicited), 0),
            WorkRequest::ReadRequest(_) => (Opcode::ReadRequest, 0),
            WorkRequest::ReadResponse { len, .. } => (Opcode::ReadResponse, len),
            WorkRequest::AtomicRequest(_) => (Opcode::AtomicRequest, 0),
            WorkRequest::AtomicResponse(_) => (Opcode::AtomicResponse, 0),
            WorkRequest::Terminate(_) => (Opcode::Terminate, 0),
        };
        let max_ulpdu = segmenter::max_ulpdu_len(self.fpdu_size);
        let max_payload = if opcode.carries_payload() {
            segmenter::max_payload_for(self.fpdu_size, opcode).ok_or(TxError::FpduTooSmall)?
        } else if opcode.header_len() <= max_ulpdu {
            NonZeroU32::MIN
        } else {
            return Err(TxError::FpduTooSmall);
        };
        if let WorkRequest::WriteImmediate { solicited, .. } = wr {
            if immediate_opcode(solicited).header_len() > max_ulpdu {
                return Err(TxError::FpduTooSmall);
            }
        }
        let msn = opcode
            .queue_number()
            .map_or(0, |queue| self.msns.take(queue));
        let immediate_msn = match wr {
            WorkRequest::WriteImmediate { .. } => self.msns.take(QueueNumber::Send),
            _ => 0,
        };
        Ok(TxMessage {
            wr,
            opcode,
            crc: self.crc,
            msn,
            immediate_msn,
            segments: segmenter::segments(len, max_payload),
            max_ulpdu,
            phase: Phase::Main,
        })
    }
    /// Starts the Send or RDMA Write `wr` as [`Self::start`] does if all of it
    /// is one FPDU that fits `out`: writes that FPDU's header into `out` and
    /// describes it. Otherwise (another kind of work request, more than one
    /// FPDU, or an error) it assigns nothing and returns `None`. This is how a
    /// small message skips keeping a [`TxMessage`].
    ///
    /// Every small message takes this way, so the header is written here as
    /// one fixed-size array of big-endian words rather than through the
    /// general encoder `frame` uses (the host tests check that both write the
    /// same bytes).
    pub fn start_whole(&mut self, wr: WorkRequest<'_>, out: &mut [u8]) -> Option<TxFpdu<C>> {
        let max_ulpdu = segmenter::max_ulpdu_len(self.fpdu_size);
        let (header_len, len, ulpdu_len) = match wr {
            WorkRequest::Send {
                len,
                solicited,
                invalidate,
            } => {
                const HEADER: usize = LENGTH_FIELD_LEN + UNTAGGED_HEADER_LEN;
                let ulpdu_len = whole_ulpdu_len(UNTAGGED_HEADER_LEN, len, max_ulpdu, out.len())?;
                let opcode = send_opcode(solicited, invalidate.is_some());
                let msn = self.next_msn(QueueNumber::Send);
                let [w0, w1, w2, w3] = first_word(ulpdu_len, false, opcode)?.to_be_bytes();
                let [i0, i1, i2, i3] = invalidate.unwrap_or(0).to_be_bytes();
                let [q0, q1, q2, q3] = (QueueNumber::Send as u32).to_be_bytes();
                let [n0, n1, n2, n3] = msn.to_be_bytes();
                *out.first_chunk_mut::<HEADER>()? = [
                    w0, w1, w2, w3, i0, i1, i2, i3, q0, q1, q2, q3, n0, n1, n2, n3, 0, 0, 0, 0,
                ];
                self.msns.take(QueueNumber::Send);
                (HEADER, len, ulpdu_len)
            }
            WorkRequest::Write {
                stag,
                tagged_offset,
                len,
            } => {
                const HEADER: usize = LENGTH_FIELD_LEN + TAGGED_HEADER_LEN;
                let ulpdu_len = whole_ulpdu_len(TAGGED_HEADER_LEN, len, max_ulpdu, out.len())?;
                let [w0, w1, w2, w3] =
                    first_word(ulpdu_len, true, Opcode::RdmaWrite)?.to_be_bytes();
                let [s0, s1, s2, s3] = stag.to_be_bytes();
                let [t0, t1, t2, t3, t4, t5, t6, t7] = tagged_offset.to_be_bytes();
                *out.first_chunk_mut::<HEADER>()? = [
                    w0, w1, w2, w3, s0, s1, s2, s3, t0, t1, t2, t3, t4, t5, t6, t7,
                ];
                (HEADER, len, ulpdu_len)
            }
            _ => return None,
        };
        let digest = self.crc.map(|engine| {
            let mut digest = Crc32cDigest::new(engine);
            digest.update(out.get(..header_len).unwrap_or(&[]));
            digest
        });
        Some(TxFpdu {
            header_len,
            payload_offset: 0,
            payload_len: len,
            last: true,
            ulpdu_len,
            digest,
        })
    }
}

/// The ULPDU length of a whole message of `len` payload bytes after `headers` bytes of DDP
/// and RDMAP headers, if that is one FPDU of at most `max_ulpdu` that fits `room` bytes.
#[inline]
fn whole_ulpdu_len(headers: usize, len: u32, max_ulpdu: usize, room: usize) -> Option<usize> {
    usize::try_from(len)
        .ok()
        .and_then(|len| headers.checked_add(len))
        .filter(|&ulpdu_len| ulpdu_len <= max_ulpdu && fpdu::fpdu_len(ulpdu_len) <= room)
}

/// The first word of the FPDU of a whole message: the ULPDU_Length field, the DDP control
/// byte of a last segment (`tagged` or not) and the RDMAP control byte of `opcode`.
#[inline]
fn first_word(ulpdu_len: usize, tagged: bool, opcode: Opcode) -> Option<u32> {
    let length = u16::try_from(ulpdu_len).ok()?;
    let ddp = DdpControl {
        tagged,
        last: true,
        reserved: 0,
        version: DDP_VERSION,
    }
    .to_byte()
    .ok()?;
    let rdmap = rdmap::RdmapControl::for_opcode(opcode).to_byte().ok()?;
    Some(u32::from(length) << 16 | u32::from(ddp) << 8 | u32::from(rdmap))
}

/// Writes the start of one FPDU into `out`: the MPA length field, then `ddp` and `header`, for
/// `segment`'s payload to follow (`last` if it ends the work request); fails if the ULPDU would
/// be longer than `max_ulpdu`.
#[inline]
fn frame<C: Crc32c + Copy>(
    crc: Option<C>,
    max_ulpdu: usize,
    ddp: &DdpHeader,
    header: &OpcodeHeader<'_>,
    segment: &TxSegment,
    last: bool,
    out: &mut [u8],
) -> Result<TxFpdu<C>, TxError> {
    let body = out.get_mut(LENGTH_FIELD_LEN..).unwrap_or(&mut []);
    let headers_len = rdmap::encode_headers(ddp, header, body)
        .map_err(|e| wire::shift_error(e, LENGTH_FIELD_LEN))?;
    if headers_len > MAX_HEADER_LEN {
        // The receiver could not collect it (a TERMINATE echoing more
        // than a segment's headers).
        return Err(TxError::Encode(EncodeError::ValueOutOfRange));
    }
    let ulpdu_len = usize::try_from(segment.len)
        .ok()
        .and_then(|len| headers_len.checked_add(len))
        .filter(|&len| len <= max_ulpdu)
        .ok_or(TxError::FpduTooSmall)?;
    let length = fpdu::length_field(ulpdu_len)?;
    // A fixed-size move, not a call to `write_bytes` and `memcpy`.
    out.get_mut(..LENGTH_FIELD_LEN)
        .ok_or(EncodeError::BufferTooSmall {
            needed: LENGTH_FIELD_LEN,
        })?
        .copy_from_slice(&length);
    let header_len = LENGTH_FIELD_LEN
        .checked_add(headers_len)
        .ok_or(EncodeError::ValueOutOfRange)?;
    let digest = crc.map(|engine| {
        let mut digest = Crc32cDigest::new(engine);
        digest.update(out.get(..header_len).unwrap_or(&[]));
        digest
    });
    Ok(TxFpdu {
        header_len,
        payload_offset: segment.offset,
        payload_len: segment.len,
        last,
        ulpdu_len,
        digest,
    })
}

/// The opcode of a Send, with Solicited Event and with Invalidate as asked.
const fn send_opcode(solicited: bool, invalidate: bool) -> Opcode {
    match (solicited, invalidate) {
        (false, false) => Opcode::Send,
        (true, false) => Opcode::SendSe,
        (false, true) => Opcode::SendInvalidate,
        (true, true) => Opcode::SendSeInvalidate,
    }
}

const fn immediate_opcode(solicited: bool) -> Opcode {
    if solicited {
        Opcode::ImmediateDataSe
    } else {
        Opcode::ImmediateData
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The segments of the main message.
    Main,
    /// The Immediate Data message of an RDMA Write with Immediate.
    Immediate,
    Done,
}

/// The FPDUs of one work request, produced in order.
#[derive(Debug, Clone, Copy)]
pub struct TxMessage<'a, C: Crc32c + Copy> {
    wr: WorkRequest<'a>,
    opcode: Opcode,
    crc: Option<C>,
    msn: u32,
    immediate_msn: u32,
    segments: Segments,
    max_ulpdu: usize,
    phase: Phase,
}

/// One FPDU whose header has been written.
#[derive(Debug, Clone, Copy)]
pub struct TxFpdu<C: Crc32c + Copy> {
    /// Bytes written at the start of the caller's buffer: the MPA length
    /// field and the DDP/RDMAP headers.
    pub header_len: usize,
    /// Offset in the work request's payload of the bytes to send next.
    pub payload_offset: u32,
    /// Number of payload bytes to send next.
    pub payload_len: u32,
    /// Whether this is the work request's last FPDU.
    pub last: bool,
    ulpdu_len: usize,
    digest: Option<Crc32cDigest<C>>,
}

impl<C: Crc32c + Copy> TxFpdu<C> {
    /// Feeds the next piece of this FPDU's payload into its CRC. The pieces
    /// must add up to exactly the payload range, in order.
    pub fn hash_payload(&mut self, data: &[u8]) {
        if let Some(digest) = self.digest.as_mut() {
            digest.update(data);
        }
    }

    /// The pad and CRC that follow the payload.
    pub fn trailer(&self) -> FpduTrailer {
        FpduTrailer::new(self.ulpdu_len, self.digest)
    }

    /// Writes [`Self::trailer`] into `out`, which must be exactly
    /// [`Self::trailer_len`] long; returns `false`, writing nothing, if it is
    /// not.
    pub fn write_trailer(&self, out: &mut [u8]) -> bool {
        fpdu::write_trailer(out, self.ulpdu_len, self.digest)
    }

    /// Length of the trailer.
    pub fn trailer_len(&self) -> usize {
        fpdu::trailer_len(self.ulpdu_len)
    }

    /// Total length of the FPDU on the wire.
    pub fn wire_len(&self) -> usize {
        fpdu::fpdu_len(self.ulpdu_len)
    }
}

impl<'a, C: Crc32c + Copy> TxMessage<'a, C> {
    /// The opcode of the main message.
    pub const fn opcode(&self) -> Opcode {
        self.opcode
    }

    /// The MSN of the main message (0 for tagged messages).
    pub const fn msn(&self) -> u32 {
        self.msn
    }

    /// Whether every FPDU has been produced.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Writes the header of the next FPDU into `out` (which
    /// [`MAX_FPDU_HEADER_LEN`] bytes always suffice for) and describes the
    /// FPDU, or returns `None` once the message is complete. On error the
    /// message does not advance.
    pub fn next_fpdu(&mut self, out: &mut [u8]) -> Result<Option<TxFpdu<C>>, TxError> {
        let fpdu = self.peek_fpdu(out)?;
        match fpdu {
            Some(_) => self.advance(),
            None => self.phase = Phase::Done,
        }
        Ok(fpdu)
    }

    /// As [`Self::next_fpdu`], without advancing: [`Self::advance`] moves
    /// past the FPDU once it is sent.
    pub fn peek_fpdu(&self, out: &mut [u8]) -> Result<Option<TxFpdu<C>>, TxError> {
        let (segment, immediate) = match self.phase {
            Phase::Done => return Ok(None),
            Phase::Immediate => (
                TxSegment {
                    offset: 0,
                    len: 0,
                    last: true,
                },
                true,
            ),
            Phase::Main => {
                let mut peek = self.segments;
                match peek.next() {
                    Some(segment) => (segment, false),
                    None => return Ok(None),
                }
            }
        };
        let ddp = self.ddp_header(&segment, immediate)?;
        let header = self.opcode_header(immediate);
        let has_immediate = matches!(self.wr, WorkRequest::WriteImmediate { .. });
        let last = immediate || (segment.last && !has_immediate);
        frame(self.crc, self.max_ulpdu, &ddp, &header, &segment, last, out).map(Some)
    }

    /// Moves past the FPDU [`Self::peek_fpdu`] described.
    pub fn advance(&mut self) {
        self.phase = match self.phase {
            Phase::Main => match self.segments.next() {
                Some(segment) if !segment.last => Phase::Main,
                Some(_) if matches!(self.wr, WorkRequest::WriteImmediate { .. }) => {
                    Phase::Immediate
                }
                _ => Phase::Done,
            },
            _ => Phase::Done,
        };
    }

    /// The DDP header of `segment` (of the Immediate Data message after an
    /// RDMA Write if `immediate`).
    fn ddp_header(&self, segment: &TxSegment, immediate: bool) -> Result<DdpHeader, TxError> {
        let untagged = |opcode: Opcode, ulp: u32, msn: u32| {
            rdmap::untagged_header(opcode, segment.last, ulp, msn, segment.offset)
        };
        match self.wr {
            WorkRequest::WriteImmediate { solicited, .. } if immediate => {
                Ok(untagged(immediate_opcode(solicited), 0, self.immediate_msn))
            }
            WorkRequest::Write {
                stag,
                tagged_offset,
                ..
            }
            | WorkRequest::WriteImmediate {
                stag,
                tagged_offset,
                ..
            }
            | WorkRequest::ReadResponse {
                sink_stag: stag,
                sink_tagged_offset: tagged_offset,
                ..
            } => {
                let to = tagged_offset
                    .checked_add(u64::from(segment.offset))
                    .ok_or(TxError::ToWrap)?;
                Ok(rdmap::tagged_header(self.opcode, segment.last, stag, to))
            }
            WorkRequest::Send { invalidate, .. } => {
                Ok(untagged(self.opcode, invalidate.unwrap_or(0), self.msn))
            }
            WorkRequest::Immediate { .. }
            | WorkRequest::ReadRequest(_)
            | WorkRequest::AtomicRequest(_)
            | WorkRequest::AtomicResponse(_)
            | WorkRequest::Terminate(_) => Ok(untagged(self.opcode, 0, self.msn)),
        }
    }

    /// The RDMAP header that follows the DDP header (of the Immediate Data
    /// message after an RDMA Write if `immediate`).
    fn opcode_header(&self, immediate: bool) -> OpcodeHeader<'a> {
        match self.wr {
            WorkRequest::WriteImmediate { data, .. } if immediate => OpcodeHeader::Immediate(data),
            WorkRequest::Immediate { data, .. } => OpcodeHeader::Immediate(data),
            WorkRequest::ReadRequest(h) => OpcodeHeader::ReadRequest(h),
            WorkRequest::AtomicRequest(h) => OpcodeHeader::AtomicRequest(h),
            WorkRequest::AtomicResponse(h) => OpcodeHeader::AtomicResponse(h),
            WorkRequest::Terminate(m) => OpcodeHeader::Terminate(m),
            WorkRequest::Write { .. }
            | WorkRequest::WriteImmediate { .. }
            | WorkRequest::ReadResponse { .. }
            | WorkRequest::Send { .. } => OpcodeHeader::None,
        }
    }
}
