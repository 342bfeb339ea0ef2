// SPDX-License-Identifier: GPL-2.0

//! The TERMINATE message.
//!
//! When an RDMAP stream fails, the side that detected the error sends a
//! TERMINATE (RDMAP opcode 0x7, untagged queue 2, RFC 5040 section 4.8). It
//! names the failing layer, error type and error code, and may echo the DDP
//! and RDMAP headers of the segment that caused it. The errors it can report
//! are catalogued in [`super::term_error`] and re-exported here
//! ([`TermError`], [`Layer`], [`EchoFlags`], [`ALL_TERM_ERRORS`]).
//!
//! Layout of the message body, after the untagged DDP header:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! | Layer | EType |  Error Code   |M|D|R|       Reserved          |
//! |  DDP Segment Length (M or D)  | Terminated DDP Header (D) ... |
//! |                Terminated RDMA Header (R) ...                 |
//! ```
//!
//! The segment length field takes the place of the MPA length in front of
//! the echoed DDP header; it is present whenever M or D is set. The DDP header
//! is 14 bytes if its T bit is set and 18 bytes otherwise. The RDMA header is
//! whatever follows (28 bytes for an RDMA Read Request).

use super::ddp;
use super::rdmap_control::{Opcode, RdmapControl};
use super::wire::{self, EncodeError};

pub use super::term_error::{EchoFlags, Layer, TermError, ALL_TERM_ERRORS};

pub use super::rdmap_control::TERMINATE_CONTROL_LEN;

/// Length of the DDP Segment Length field.
pub const SEGMENT_LENGTH_LEN: usize = 2;

const FLAG_M: u32 = 0x0000_8000;
const FLAG_D: u32 = 0x0000_4000;
const FLAG_R: u32 = 0x0000_2000;
const RESERVED_MASK: u32 = 0x0000_1FFF;

/// The 32-bit Terminate Control field, kept raw so that undefined triples
/// and reserved bits survive a decode/encode round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminateControl {
    /// Layer (4 bits).
    pub layer: u8,
    /// Error type (4 bits).
    pub error_type: u8,
    /// Error code.
    pub error_code: u8,
    /// The M, D and R flags.
    pub flags: EchoFlags,
    /// Reserved bits (13 bits), zero on transmit, ignored on receive.
    pub reserved: u16,
}

impl TerminateControl {
    /// Builds the control field for `error` with `flags`.
    pub fn new(error: TermError, flags: EchoFlags) -> Self {
        let (layer, error_type, error_code) = error.triple();
        Self {
            layer: layer as u8,
            error_type,
            error_code,
            flags,
            reserved: 0,
        }
    }

    /// The defined error this field names, if any.
    pub fn error(&self) -> Option<TermError> {
        TermError::from_triple(self.layer, self.error_type, self.error_code)
    }

    /// Unpacks the field from its wire value.
    pub fn from_word(word: u32) -> Self {
        let [b0, code, _, _] = word.to_be_bytes();
        Self {
            layer: b0 >> 4,
            error_type: b0 & 0x0F,
            error_code: code,
            flags: EchoFlags {
                segment_length: word & FLAG_M != 0,
                ddp_header: word & FLAG_D != 0,
                rdmap_header: word & FLAG_R != 0,
            },
            reserved: (word & RESERVED_MASK) as u16,
        }
    }

    /// Packs the field into its wire value.
    pub fn to_word(&self) -> Result<u32, EncodeError> {
        if self.layer > 0x0F || self.error_type > 0x0F || u32::from(self.reserved) > RESERVED_MASK {
            return Err(EncodeError::ValueOutOfRange);
        }
        let mut word = u32::from(self.layer) << 28
            | u32::from(self.error_type) << 24
            | u32::from(self.error_code) << 16
            | u32::from(self.reserved);
        if self.flags.segment_length {
            word |= FLAG_M;
        }
        if self.flags.ddp_header {
            word |= FLAG_D;
        }
        if self.flags.rdmap_header {
            word |= FLAG_R;
        }
        Ok(word)
    }
}

/// A decoded TERMINATE body, borrowing the echoed headers from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminateMessage<'a> {
    /// The Terminate Control field.
    pub control: TerminateControl,
    /// The DDP Segment Length field, present when M or D is set (its value
    /// is meaningful only when M is set).
    pub segment_length: Option<u16>,
    /// The echoed DDP header (14 or 18 bytes, starting with the DDP control
    /// byte), present when D is set.
    pub ddp_header: Option<&'a [u8]>,
    /// The echoed RDMA header (all remaining bytes), present when R is set.
    pub rdmap_header: Option<&'a [u8]>,
}

/// Why a TERMINATE body could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminateError {
    /// The body ends before a field its flags announce.
    Truncated,
    /// Bytes follow the announced fields although R is clear.
    TrailingBytes,
}

impl TerminateError {
    /// The error to report for a malformed TERMINATE: a catastrophic error
    /// localized to the RDMAP stream (RFC 5040 section 7.2). Usually the
    /// stream is torn down without replying, since the peer already failed.
    pub const fn term(self) -> TermError {
        TermError::RdmapCatastrophicStream
    }
}

impl<'a> TerminateMessage<'a> {
    /// The TERMINATE body reporting `error` about the `offending` ULPDU (the
    /// DDP segment that caused it, if any). The headers are echoed as
    /// [`TermError::echo_flags`] asks, as far as `offending` holds them: the
    /// DDP header, and for protection errors also the opcode's own RDMA header
    /// (e.g. the 28-byte Read Request header; empty for a Send). Send the
    /// result with [`super::rdmap::encode_headers`] on queue 2.
    pub fn reporting(error: TermError, offending: Option<&'a [u8]>) -> Self {
        let wanted = error.echo_flags();
        let mut message = Self {
            control: TerminateControl::new(error, EchoFlags::default()),
            segment_length: None,
            ddp_header: None,
            rdmap_header: None,
        };
        let Some(segment) = offending else {
            return message;
        };
        if !wanted.ddp_header {
            return message;
        }
        let Some(&first) = segment.first() else {
            return message;
        };
        let ddp_len = ddp::DdpControl::from_byte(first).header_len();
        let Some(ddp_header) = segment.get(..ddp_len) else {
            return message;
        };
        message.ddp_header = Some(ddp_header);
        message.segment_length = Some(u16::try_from(segment.len()).unwrap_or(u16::MAX));
        message.control.flags.ddp_header = true;
        message.control.flags.segment_length = wanted.segment_length;
        if wanted.rdmap_header {
            let rdmap_len = segment
                .get(1)
                .and_then(|&b| Opcode::from_u8(RdmapControl::from_byte(b).opcode))
                .map_or(0, |op| op.rdmap_header_len());
            let end = ddp_len.saturating_add(rdmap_len);
            if let Some(rdmap_header) = segment.get(ddp_len..end) {
                message.rdmap_header = Some(rdmap_header);
                message.control.flags.rdmap_header = true;
            }
        }
        message
    }

    /// Decodes the body of a TERMINATE (the bytes after its untagged DDP
    /// header, up to the end of the ULPDU).
    pub fn decode(body: &'a [u8]) -> Result<Self, TerminateError> {
        let word = wire::read_be32(body, 0).ok_or(TerminateError::Truncated)?;
        let control = TerminateControl::from_word(word);
        let flags = control.flags;
        let mut rest = body.get(TERMINATE_CONTROL_LEN..).unwrap_or(&[]);
        let mut segment_length = None;
        let mut ddp_header = None;
        if flags.segment_length || flags.ddp_header {
            segment_length = Some(wire::read_be16(rest, 0).ok_or(TerminateError::Truncated)?);
            rest = rest.get(SEGMENT_LENGTH_LEN..).unwrap_or(&[]);
        }
        if flags.ddp_header {
            let first = wire::read_u8(rest, 0).ok_or(TerminateError::Truncated)?;
            let len = ddp::DdpControl::from_byte(first).header_len();
            if rest.len() < len {
                return Err(TerminateError::Truncated);
            }
            let (header, tail) = rest.split_at(len);
            ddp_header = Some(header);
            rest = tail;
        }
        let rdmap_header = if flags.rdmap_header {
            Some(rest)
        } else if rest.is_empty() {
            None
        } else {
            return Err(TerminateError::TrailingBytes);
        };
        Ok(Self {
            control,
            segment_length,
            ddp_header,
            rdmap_header,
        })
    }

    /// Encodes the body into `out` and returns its length. The flags in
    /// `control` must agree with the optional fields: a field is written iff
    /// its flag asks for it, and an echoed DDP header must be exactly as long
    /// as its T bit says.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        let flags = self.control.flags;
        let length_present = flags.segment_length || flags.ddp_header;
        if length_present != self.segment_length.is_some()
            || flags.ddp_header != self.ddp_header.is_some()
            || flags.rdmap_header != self.rdmap_header.is_some()
        {
            return Err(EncodeError::ValueOutOfRange);
        }
        wire::write_be32(out, 0, self.control.to_word()?)?;
        let mut len = TERMINATE_CONTROL_LEN;
        if let Some(seg_len) = self.segment_length {
            wire::write_be16(out, len, seg_len)?;
            len += SEGMENT_LENGTH_LEN;
        }
        if let Some(header) = self.ddp_header {
            let first = header
                .first()
                .copied()
                .ok_or(EncodeError::ValueOutOfRange)?;
            if header.len() != ddp::DdpControl::from_byte(first).header_len() {
                return Err(EncodeError::ValueOutOfRange);
            }
            wire::write_bytes(out, len, header)?;
            len = len
                .checked_add(header.len())
                .ok_or(EncodeError::ValueOutOfRange)?;
        }
        if let Some(header) = self.rdmap_header {
            wire::write_bytes(out, len, header)?;
            len = len
                .checked_add(header.len())
                .ok_or(EncodeError::ValueOutOfRange)?;
        }
        Ok(len)
    }
}
