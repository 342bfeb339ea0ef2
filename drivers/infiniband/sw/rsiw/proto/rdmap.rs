// SPDX-License-Identifier: GPL-2.0

//! RDMAP messages (RFC 5040, extended by RFC 7306).
//!
//! RDMAP rides on DDP: its control field is the second byte of every DDP
//! header (RV: RDMAP version 1, two reserved bits, a 4-bit opcode), and some
//! opcodes add a header of their own right after the DDP header (Read Request,
//! Terminate, Immediate Data, Atomic Request/Response). Each opcode fixes
//! whether the segment is tagged and, if untagged, which queue it uses
//! ([`Opcode::queue_number`]).
//!
//! [`Segment::decode`] turns a whole ULPDU into a typed view: the DDP header,
//! the opcode, the opcode's header and the payload that follows. It performs
//! every check that needs no connection state, in the order the RFCs assign
//! them to layers (DDP first, then RDMAP), so the first failure found is the
//! one reported in the TERMINATE.

use super::atomic::{AtomicError, AtomicRequestHeader, AtomicResponseHeader};
use super::ddp::{
    DdpControl, DdpError, DdpHeader, QueueNumber, TaggedHeader, UntaggedHeader, TAGGED_HEADER_LEN,
    UNTAGGED_HEADER_LEN,
};
use super::immediate::ImmediateData;
use super::term_error::TermError;
use super::terminate::{TerminateError, TerminateMessage};
use super::wire::{self, EncodeError};

pub use super::rdmap_control::{
    Opcode, RdmapControl, RDMAP_VERSION, READ_REQUEST_HEADER_LEN, TERMINATE_CONTROL_LEN,
};

/// The RDMA Read Request header (RFC 5040 section 4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequestHeader {
    /// STag of the requester's buffer the response is written to.
    pub sink_stag: u32,
    /// Tagged offset in the sink buffer.
    pub sink_tagged_offset: u64,
    /// Number of bytes to read.
    pub read_size: u32,
    /// STag of the responder's buffer to read from.
    pub source_stag: u32,
    /// Tagged offset in the source buffer.
    pub source_tagged_offset: u64,
}

impl ReadRequestHeader {
    /// Decodes the header from the first 28 bytes of `buf`.
    pub fn decode(buf: &[u8]) -> Option<Self> {
        Some(Self {
            sink_stag: wire::read_be32(buf, 0)?,
            sink_tagged_offset: wire::read_be64(buf, 4)?,
            read_size: wire::read_be32(buf, 12)?,
            source_stag: wire::read_be32(buf, 16)?,
            source_tagged_offset: wire::read_be64(buf, 20)?,
        })
    }

    /// Encodes the header into `out` and returns its length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        wire::ensure_room(out, READ_REQUEST_HEADER_LEN)?;
        wire::write_be32(out, 0, self.sink_stag)?;
        wire::write_be64(out, 4, self.sink_tagged_offset)?;
        wire::write_be32(out, 12, self.read_size)?;
        wire::write_be32(out, 16, self.source_stag)?;
        wire::write_be64(out, 20, self.source_tagged_offset)?;
        Ok(READ_REQUEST_HEADER_LEN)
    }
}

/// The opcode-specific header of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpcodeHeader<'a> {
    /// The opcode has no header of its own (Write, Read Response, Sends).
    None,
    /// RDMA Read Request.
    ReadRequest(ReadRequestHeader),
    /// Terminate, with its echoed headers.
    Terminate(TerminateMessage<'a>),
    /// Immediate Data or Immediate Data with SE.
    Immediate(ImmediateData),
    /// Atomic Request.
    AtomicRequest(AtomicRequestHeader),
    /// Atomic Response.
    AtomicResponse(AtomicResponseHeader),
}

/// A decoded ULPDU: one DDP segment of an RDMAP message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment<'a> {
    /// The DDP header.
    pub ddp: DdpHeader,
    /// The RDMAP control byte.
    pub control: RdmapControl,
    /// The opcode, validated.
    pub opcode: Opcode,
    /// The opcode-specific header.
    pub header: OpcodeHeader<'a>,
    /// The ULP payload after all headers (empty for messages without one).
    pub payload: &'a [u8],
}

/// Why a ULPDU was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RdmapError {
    /// The DDP header is invalid.
    Ddp(DdpError),
    /// RV is not [`RDMAP_VERSION`].
    InvalidVersion(u8),
    /// The opcode is not defined.
    InvalidOpcode(u8),
    /// The T bit disagrees with the opcode.
    WrongBufferModel(Opcode),
    /// The untagged queue disagrees with the opcode.
    WrongQueue {
        /// The opcode received.
        opcode: Opcode,
        /// The queue number received.
        queue_number: u32,
    },
    /// A message that must be a single segment is not (L clear or MO != 0).
    NotSingleSegment(Opcode),
    /// The ULPDU ends inside the opcode's header.
    Truncated(Opcode),
    /// Bytes follow the header of a message that carries no payload.
    UnexpectedPayload(Opcode),
    /// The TERMINATE body is malformed.
    Terminate(TerminateError),
    /// The atomic header is malformed.
    Atomic(AtomicError),
}

impl RdmapError {
    /// The TERMINATE error RFC 5040 section 7 (and RFC 7306 section 8)
    /// prescribe.
    pub const fn term(self) -> TermError {
        match self {
            Self::Ddp(e) => e.term(),
            Self::InvalidVersion(_) => TermError::RdmapInvalidVersion,
            Self::InvalidOpcode(_) | Self::WrongBufferModel(_) => TermError::RdmapUnexpectedOpcode,
            Self::WrongQueue { .. } => TermError::DdpInvalidQn,
            Self::NotSingleSegment(_) | Self::Truncated(_) | Self::UnexpectedPayload(_) => {
                TermError::RdmapCatastrophicStream
            }
            Self::Terminate(e) => e.term(),
            Self::Atomic(e) => e.term(),
        }
    }
}

impl<'a> Segment<'a> {
    /// Decodes a ULPDU (the bytes between the MPA length and the pad).
    pub fn decode(ulpdu: &'a [u8]) -> Result<Self, RdmapError> {
        let (ddp, ddp_len) = DdpHeader::decode(ulpdu).map_err(RdmapError::Ddp)?;
        let control = RdmapControl::from_byte(ddp.rdmap_control());
        if control.version != RDMAP_VERSION {
            return Err(RdmapError::InvalidVersion(control.version));
        }
        let opcode =
            Opcode::from_u8(control.opcode).ok_or(RdmapError::InvalidOpcode(control.opcode))?;
        match (&ddp, opcode.queue_number()) {
            (DdpHeader::Tagged(_), None) => {}
            (DdpHeader::Untagged(h), Some(qn)) => {
                if h.queue_number != qn as u32 {
                    return Err(RdmapError::WrongQueue {
                        opcode,
                        queue_number: h.queue_number,
                    });
                }
                if opcode.is_single_segment() && (!h.control.last || h.message_offset != 0) {
                    return Err(RdmapError::NotSingleSegment(opcode));
                }
            }
            _ => return Err(RdmapError::WrongBufferModel(opcode)),
        }
        let rest = ulpdu.get(ddp_len..).unwrap_or(&[]);
        let header_len = opcode.rdmap_header_len();
        if rest.len() < header_len {
            return Err(RdmapError::Truncated(opcode));
        }
        let (head, payload) = rest.split_at(header_len);
        let truncated = RdmapError::Truncated(opcode);
        let header = match opcode {
            Opcode::ReadRequest => {
                OpcodeHeader::ReadRequest(ReadRequestHeader::decode(head).ok_or(truncated)?)
            }
            Opcode::Terminate => {
                // The echoed headers are part of the TERMINATE, not payload.
                let message = TerminateMessage::decode(rest).map_err(RdmapError::Terminate)?;
                return Ok(Self {
                    ddp,
                    control,
                    opcode,
                    header: OpcodeHeader::Terminate(message),
                    payload: &[],
                });
            }
            Opcode::ImmediateData | Opcode::ImmediateDataSe => {
                OpcodeHeader::Immediate(ImmediateData::decode(head).ok_or(truncated)?)
            }
            Opcode::AtomicRequest => OpcodeHeader::AtomicRequest(
                AtomicRequestHeader::decode(head).map_err(RdmapError::Atomic)?,
            ),
            Opcode::AtomicResponse => OpcodeHeader::AtomicResponse(
                AtomicResponseHeader::decode(head).map_err(RdmapError::Atomic)?,
            ),
            _ => OpcodeHeader::None,
        };
        if !opcode.carries_payload() && !payload.is_empty() {
            return Err(RdmapError::UnexpectedPayload(opcode));
        }
        Ok(Self {
            ddp,
            control,
            opcode,
            header,
            payload,
        })
    }

    /// The STag a Send with Invalidate asks to invalidate.
    pub fn invalidate_stag(&self) -> Option<u32> {
        match self.ddp {
            DdpHeader::Untagged(h) if self.opcode.invalidates() => Some(h.ulp_reserved),
            _ => None,
        }
    }
}

/// The headers of a data segment: a segment of a message that carries payload
/// and has no header of its own (RDMA Write and Read Response, tagged; the
/// Send family, untagged). Nearly every segment received is one, and
/// [`Self::decode`] reads it without building a [`Segment`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataSegment {
    /// An RDMA Write or Read Response segment.
    Tagged(Opcode, TaggedHeader),
    /// A segment of a Send, Send with Invalidate, Send with SE, or Send with
    /// SE and Invalidate.
    Untagged(Opcode, UntaggedHeader),
}

impl DataSegment {
    /// Decodes the headers at the start of `ulpdu` if they are those of a
    /// data segment that [`Segment::decode`] accepts; the segment is then
    /// the one it returns, with [`OpcodeHeader::None`] and the payload after
    /// the DDP header. `None` for every other ULPDU, valid or not: leave it
    /// to [`Segment::decode`], which also tells what is wrong with it.
    #[inline]
    pub fn decode(ulpdu: &[u8]) -> Option<Self> {
        let [ddp, rdmap] = wire::read_array(ulpdu, 0)?;
        let control = DdpControl::from_byte(ddp);
        let rdmap_control = RdmapControl::from_byte(rdmap);
        if control.version != super::ddp::DDP_VERSION || rdmap_control.version != RDMAP_VERSION {
            return None;
        }
        let opcode = Opcode::from_u8(rdmap_control.opcode)?;
        if !opcode.carries_payload() || opcode.is_tagged() != control.tagged {
            return None;
        }
        // The whole header at once, as fixed-size reads.
        if control.tagged {
            let [_, _, s0, s1, s2, s3, t0, t1, t2, t3, t4, t5, t6, t7] =
                wire::read_array::<TAGGED_HEADER_LEN>(ulpdu, 0)?;
            let header = TaggedHeader {
                control,
                rdmap_control: rdmap,
                stag: u32::from_be_bytes([s0, s1, s2, s3]),
                tagged_offset: u64::from_be_bytes([t0, t1, t2, t3, t4, t5, t6, t7]),
            };
            return Some(Self::Tagged(opcode, header));
        }
        let [_, _, u0, u1, u2, u3, q0, q1, q2, q3, n0, n1, n2, n3, o0, o1, o2, o3] =
            wire::read_array::<UNTAGGED_HEADER_LEN>(ulpdu, 0)?;
        let header = UntaggedHeader {
            control,
            rdmap_control: rdmap,
            ulp_reserved: u32::from_be_bytes([u0, u1, u2, u3]),
            queue_number: u32::from_be_bytes([q0, q1, q2, q3]),
            msn: u32::from_be_bytes([n0, n1, n2, n3]),
            message_offset: u32::from_be_bytes([o0, o1, o2, o3]),
        };
        // The Send family's queue.
        if header.queue_number != QueueNumber::Send as u32 {
            return None;
        }
        Some(Self::Untagged(opcode, header))
    }

    /// The opcode.
    pub const fn opcode(&self) -> Opcode {
        match self {
            Self::Tagged(opcode, _) | Self::Untagged(opcode, _) => *opcode,
        }
    }

    /// The DDP header.
    pub const fn ddp(&self) -> DdpHeader {
        match self {
            Self::Tagged(_, h) => DdpHeader::Tagged(*h),
            Self::Untagged(_, h) => DdpHeader::Untagged(*h),
        }
    }

    /// The STag a Send with Invalidate asks to invalidate
    /// ([`Segment::invalidate_stag`]).
    pub const fn invalidate_stag(&self) -> Option<u32> {
        match self {
            Self::Untagged(opcode, h) if opcode.invalidates() => Some(h.ulp_reserved),
            _ => None,
        }
    }
}

/// Builds the tagged DDP header of an RDMA Write or Read Response segment.
pub fn tagged_header(opcode: Opcode, last: bool, stag: u32, tagged_offset: u64) -> DdpHeader {
    DdpHeader::Tagged(TaggedHeader {
        control: DdpControl {
            tagged: true,
            last,
            reserved: 0,
            version: super::ddp::DDP_VERSION,
        },
        rdmap_control: RdmapControl::for_opcode(opcode).to_byte().unwrap_or(0),
        stag,
        tagged_offset,
    })
}

/// Builds the untagged DDP header of a segment of `opcode` on the queue the
/// opcode prescribes. `ulp_reserved` is the Invalidate STag for Send with
/// Invalidate and zero otherwise.
pub fn untagged_header(
    opcode: Opcode,
    last: bool,
    ulp_reserved: u32,
    msn: u32,
    message_offset: u32,
) -> DdpHeader {
    let queue_number = match opcode.queue_number() {
        Some(qn) => qn as u32,
        None => QueueNumber::Send as u32,
    };
    DdpHeader::Untagged(UntaggedHeader {
        control: DdpControl {
            tagged: false,
            last,
            reserved: 0,
            version: super::ddp::DDP_VERSION,
        },
        rdmap_control: RdmapControl::for_opcode(opcode).to_byte().unwrap_or(0),
        ulp_reserved,
        queue_number,
        msn,
        message_offset,
    })
}

/// Encodes the DDP header followed by the opcode header into `out` and
/// returns the number of bytes written. The payload, if any, is sent after
/// this by the caller.
#[inline]
pub fn encode_headers(
    ddp: &DdpHeader,
    header: &OpcodeHeader<'_>,
    out: &mut [u8],
) -> Result<usize, EncodeError> {
    let ddp_len = ddp.encode(out)?;
    let rest = out.get_mut(ddp_len..).unwrap_or(&mut []);
    let op_len = match header {
        OpcodeHeader::None => Ok(0),
        OpcodeHeader::ReadRequest(h) => h.encode(rest),
        OpcodeHeader::Terminate(m) => m.encode(rest),
        OpcodeHeader::Immediate(d) => d.encode(rest),
        OpcodeHeader::AtomicRequest(h) => h.encode(rest),
        OpcodeHeader::AtomicResponse(h) => h.encode(rest),
    }
    .map_err(|e| wire::shift_error(e, ddp_len))?;
    ddp_len
        .checked_add(op_len)
        .ok_or(EncodeError::ValueOutOfRange)
}
