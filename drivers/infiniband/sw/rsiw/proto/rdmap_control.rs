// SPDX-License-Identifier: GPL-2.0

//! The RDMAP control byte and its opcodes (RFC 5040 section 4.2, RFC 7306).
//!
//! The control byte is the second byte of every DDP header: RV (the RDMAP version), two
//! reserved bits and a 4-bit opcode. Each opcode fixes whether its segments are tagged, which
//! untagged queue they use and how long the opcode's own header after the DDP header is. Both
//! the segment decoder ([`super::rdmap`]) and the TERMINATE that echoes a failing segment's
//! headers ([`super::terminate`]) need that, so it lives here, below both.

use super::atomic::{AtomicRequestHeader, AtomicResponseHeader};
use super::ddp::QueueNumber;
use super::immediate::IMMEDIATE_DATA_LEN;
use super::wire::EncodeError;

/// Length of the Terminate Control field, the Terminate opcode's own header.
pub const TERMINATE_CONTROL_LEN: usize = 4;

/// The RDMAP version this implementation speaks (RV field).
pub const RDMAP_VERSION: u8 = 1;

/// Length of the RDMA Read Request header that follows the DDP header.
pub const READ_REQUEST_HEADER_LEN: usize = 28;

const VERSION_SHIFT: u8 = 6;
const RESERVED_MASK: u8 = 0x30;
const OPCODE_MASK: u8 = 0x0F;

/// RDMAP message opcodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Opcode {
    /// RDMA Write.
    RdmaWrite = 0x0,
    /// RDMA Read Request.
    ReadRequest = 0x1,
    /// RDMA Read Response.
    ReadResponse = 0x2,
    /// Send.
    Send = 0x3,
    /// Send with Invalidate.
    SendInvalidate = 0x4,
    /// Send with Solicited Event.
    SendSe = 0x5,
    /// Send with Solicited Event and Invalidate.
    SendSeInvalidate = 0x6,
    /// Terminate.
    Terminate = 0x7,
    /// Immediate Data (RFC 7306).
    ImmediateData = 0x8,
    /// Immediate Data with Solicited Event (RFC 7306).
    ImmediateDataSe = 0x9,
    /// Atomic Request (RFC 7306).
    AtomicRequest = 0xA,
    /// Atomic Response (RFC 7306).
    AtomicResponse = 0xB,
}

impl Opcode {
    /// Maps a 4-bit opcode to a defined message.
    pub const fn from_u8(value: u8) -> Option<Self> {
        Some(match value {
            0x0 => Self::RdmaWrite,
            0x1 => Self::ReadRequest,
            0x2 => Self::ReadResponse,
            0x3 => Self::Send,
            0x4 => Self::SendInvalidate,
            0x5 => Self::SendSe,
            0x6 => Self::SendSeInvalidate,
            0x7 => Self::Terminate,
            0x8 => Self::ImmediateData,
            0x9 => Self::ImmediateDataSe,
            0xA => Self::AtomicRequest,
            0xB => Self::AtomicResponse,
            _ => return None,
        })
    }

    /// Whether the message uses the tagged buffer model.
    pub const fn is_tagged(self) -> bool {
        matches!(self, Self::RdmaWrite | Self::ReadResponse)
    }

    /// The untagged queue the message targets (`None` for tagged messages).
    pub const fn queue_number(self) -> Option<QueueNumber> {
        match self {
            Self::RdmaWrite | Self::ReadResponse => None,
            Self::ReadRequest | Self::AtomicRequest => Some(QueueNumber::ReadRequest),
            Self::Terminate => Some(QueueNumber::Terminate),
            Self::AtomicResponse => Some(QueueNumber::AtomicResponse),
            Self::Send
            | Self::SendInvalidate
            | Self::SendSe
            | Self::SendSeInvalidate
            | Self::ImmediateData
            | Self::ImmediateDataSe => Some(QueueNumber::Send),
        }
    }

    /// Length of the opcode's own header after the DDP header (for
    /// Terminate: the fixed Terminate Control field only).
    pub const fn rdmap_header_len(self) -> usize {
        match self {
            Self::ReadRequest => READ_REQUEST_HEADER_LEN,
            Self::Terminate => TERMINATE_CONTROL_LEN,
            Self::ImmediateData | Self::ImmediateDataSe => IMMEDIATE_DATA_LEN,
            Self::AtomicRequest => AtomicRequestHeader::LEN,
            Self::AtomicResponse => AtomicResponseHeader::LEN,
            _ => 0,
        }
    }

    /// Length of DDP plus RDMAP headers of a segment of this message.
    pub const fn header_len(self) -> usize {
        let ddp = if self.is_tagged() {
            super::ddp::TAGGED_HEADER_LEN
        } else {
            super::ddp::UNTAGGED_HEADER_LEN
        };
        ddp + self.rdmap_header_len()
    }

    /// Whether the message must fit in a single DDP segment because it
    /// carries a header of its own (Read Request, Terminate, Immediate Data,
    /// atomics).
    pub const fn is_single_segment(self) -> bool {
        self.rdmap_header_len() != 0
    }

    /// Whether the message carries ULP payload after its headers.
    pub const fn carries_payload(self) -> bool {
        matches!(
            self,
            Self::RdmaWrite
                | Self::ReadResponse
                | Self::Send
                | Self::SendInvalidate
                | Self::SendSe
                | Self::SendSeInvalidate
        )
    }

    /// Whether the message asks for a solicited event.
    pub const fn solicited_event(self) -> bool {
        matches!(
            self,
            Self::SendSe | Self::SendSeInvalidate | Self::ImmediateDataSe
        )
    }

    /// Whether the untagged ULP field carries an STag to invalidate.
    pub const fn invalidates(self) -> bool {
        matches!(self, Self::SendInvalidate | Self::SendSeInvalidate)
    }
}

/// The RDMAP control byte, kept raw so reserved bits and unknown opcodes
/// survive a round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmapControl {
    /// RV: RDMAP version (2 bits).
    pub version: u8,
    /// Reserved bits (2 bits), zero on transmit, not checked on receive.
    pub reserved: u8,
    /// The opcode (4 bits).
    pub opcode: u8,
}

impl RdmapControl {
    /// The control byte a sender puts in front of `opcode`.
    pub const fn for_opcode(opcode: Opcode) -> Self {
        Self {
            version: RDMAP_VERSION,
            reserved: 0,
            opcode: opcode as u8,
        }
    }

    /// Unpacks the control byte.
    pub const fn from_byte(byte: u8) -> Self {
        Self {
            version: byte >> VERSION_SHIFT,
            reserved: (byte & RESERVED_MASK) >> 4,
            opcode: byte & OPCODE_MASK,
        }
    }

    /// Packs the control byte.
    pub fn to_byte(&self) -> Result<u8, EncodeError> {
        if self.version > 3 || self.reserved > 3 || self.opcode > OPCODE_MASK {
            return Err(EncodeError::ValueOutOfRange);
        }
        Ok(self.version << VERSION_SHIFT | self.reserved << 4 | self.opcode)
    }
}
