// SPDX-License-Identifier: GPL-2.0

//! DDP segment headers (RFC 5041).
//!
//! Every iWARP ULPDU starts with a DDP header. Its first byte is the DDP
//! control field (T: tagged, L: last segment of the message, DV: DDP version
//! 1); the second byte belongs to the upper layer, RDMAP, which keeps its own
//! control field there (see [`super::rdmap`]).
//!
//! ```text
//! Tagged (14 bytes):   |T|L|Rsvd|DV| RDMAP ctrl | STag (32) | TO (64) |
//! Untagged (18 bytes): |T|L|Rsvd|DV| RDMAP ctrl | ULP rsvd (32) |
//!                      | QN (32) | MSN (32) | MO (32) |
//! ```
//!
//! Tagged segments are placed directly at an advertised buffer (STag + tagged
//! offset); untagged segments are placed into the next buffer of queue QN,
//! message MSN, at message offset MO. The queue numbers in use are those of
//! RFC 5040 plus the atomic response queue of RFC 7306 ([`QueueNumber`]).

use super::term_error::TermError;
use super::wire::{self, EncodeError};

/// The DDP version this implementation speaks (DV field).
pub const DDP_VERSION: u8 = 1;

/// Length of a tagged DDP header, including both control bytes.
pub const TAGGED_HEADER_LEN: usize = 14;

/// Length of an untagged DDP header, including both control bytes.
pub const UNTAGGED_HEADER_LEN: usize = 18;

const FLAG_TAGGED: u8 = 0x80;
const FLAG_LAST: u8 = 0x40;
const RESERVED_MASK: u8 = 0x3C;
const VERSION_MASK: u8 = 0x03;

/// The untagged queues (RFC 5040 section 5, RFC 7306 section 10.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum QueueNumber {
    /// Queue 0: Send variants and Immediate Data.
    Send = 0,
    /// Queue 1: RDMA Read Requests and Atomic Requests.
    ReadRequest = 1,
    /// Queue 2: Terminate.
    Terminate = 2,
    /// Queue 3: Atomic Responses (RFC 7306).
    AtomicResponse = 3,
}

impl QueueNumber {
    /// Maps a wire QN to a known queue.
    pub const fn from_u32(qn: u32) -> Option<Self> {
        match qn {
            0 => Some(Self::Send),
            1 => Some(Self::ReadRequest),
            2 => Some(Self::Terminate),
            3 => Some(Self::AtomicResponse),
            _ => None,
        }
    }
}

/// The DDP control byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DdpControl {
    /// T: the segment is tagged.
    pub tagged: bool,
    /// L: last segment of the DDP message.
    pub last: bool,
    /// Reserved bits (4 bits), zero on transmit, not checked on receive.
    pub reserved: u8,
    /// DV: DDP version (2 bits).
    pub version: u8,
}

impl DdpControl {
    /// Unpacks the control byte.
    pub const fn from_byte(byte: u8) -> Self {
        Self {
            tagged: byte & FLAG_TAGGED != 0,
            last: byte & FLAG_LAST != 0,
            reserved: (byte & RESERVED_MASK) >> 2,
            version: byte & VERSION_MASK,
        }
    }

    /// Packs the control byte.
    pub fn to_byte(&self) -> Result<u8, EncodeError> {
        if self.reserved > 0x0F || self.version > VERSION_MASK {
            return Err(EncodeError::ValueOutOfRange);
        }
        let mut byte = self.reserved << 2 | self.version;
        if self.tagged {
            byte |= FLAG_TAGGED;
        }
        if self.last {
            byte |= FLAG_LAST;
        }
        Ok(byte)
    }

    /// Length of the DDP header this control byte starts.
    pub const fn header_len(&self) -> usize {
        if self.tagged {
            TAGGED_HEADER_LEN
        } else {
            UNTAGGED_HEADER_LEN
        }
    }
}

/// A tagged DDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaggedHeader {
    /// The DDP control byte (its `tagged` flag is set).
    pub control: DdpControl,
    /// The RDMAP control byte that follows it.
    pub rdmap_control: u8,
    /// Steering tag of the target buffer.
    pub stag: u32,
    /// Tagged offset within the target buffer.
    pub tagged_offset: u64,
}

/// An untagged DDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UntaggedHeader {
    /// The DDP control byte (its `tagged` flag is clear).
    pub control: DdpControl,
    /// The RDMAP control byte that follows it.
    pub rdmap_control: u8,
    /// The 32 bits reserved for the ULP; RDMAP carries the Invalidate STag of
    /// Send with Invalidate here.
    pub ulp_reserved: u32,
    /// Queue number.
    pub queue_number: u32,
    /// Message sequence number.
    pub msn: u32,
    /// Message offset.
    pub message_offset: u32,
}

impl TaggedHeader {
    /// The header on the wire (the T bit as `control` has it).
    pub fn to_bytes(&self) -> Result<[u8; TAGGED_HEADER_LEN], EncodeError> {
        let [s0, s1, s2, s3] = self.stag.to_be_bytes();
        let [t0, t1, t2, t3, t4, t5, t6, t7] = self.tagged_offset.to_be_bytes();
        Ok([
            self.control.to_byte()?,
            self.rdmap_control,
            s0,
            s1,
            s2,
            s3,
            t0,
            t1,
            t2,
            t3,
            t4,
            t5,
            t6,
            t7,
        ])
    }
}

impl UntaggedHeader {
    /// The header on the wire (the T bit as `control` has it).
    pub fn to_bytes(&self) -> Result<[u8; UNTAGGED_HEADER_LEN], EncodeError> {
        let [u0, u1, u2, u3] = self.ulp_reserved.to_be_bytes();
        let [q0, q1, q2, q3] = self.queue_number.to_be_bytes();
        let [n0, n1, n2, n3] = self.msn.to_be_bytes();
        let [o0, o1, o2, o3] = self.message_offset.to_be_bytes();
        Ok([
            self.control.to_byte()?,
            self.rdmap_control,
            u0,
            u1,
            u2,
            u3,
            q0,
            q1,
            q2,
            q3,
            n0,
            n1,
            n2,
            n3,
            o0,
            o1,
            o2,
            o3,
        ])
    }
}

/// A decoded DDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DdpHeader {
    /// A tagged segment.
    Tagged(TaggedHeader),
    /// An untagged segment.
    Untagged(UntaggedHeader),
}

/// Why a DDP header was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DdpError {
    /// The ULPDU is shorter than the header its T bit announces.
    Truncated {
        /// Whether the header claimed to be tagged.
        tagged: bool,
    },
    /// DV is not [`DDP_VERSION`].
    InvalidVersion {
        /// Whether the header claimed to be tagged.
        tagged: bool,
        /// The version received.
        version: u8,
    },
    /// An untagged segment names a queue that does not exist.
    InvalidQueueNumber(u32),
}

impl DdpError {
    /// The TERMINATE error RFC 5041 section 7 prescribes.
    pub const fn term(self) -> TermError {
        match self {
            // A segment too short to carry its own header cannot be
            // attributed to any buffer: a local catastrophic DDP error.
            Self::Truncated { .. } => TermError::DdpLocalCatastrophic,
            Self::InvalidVersion { tagged: true, .. } => TermError::DdpTaggedInvalidVersion,
            Self::InvalidVersion { tagged: false, .. } => TermError::DdpUntaggedInvalidVersion,
            Self::InvalidQueueNumber(_) => TermError::DdpInvalidQn,
        }
    }
}

impl DdpHeader {
    /// Decodes the DDP header at the start of `ulpdu`, checking the version
    /// and, for untagged segments, that the queue exists. Returns the header
    /// and its length.
    pub fn decode(ulpdu: &[u8]) -> Result<(Self, usize), DdpError> {
        let first = wire::read_u8(ulpdu, 0).ok_or(DdpError::Truncated { tagged: false })?;
        let control = DdpControl::from_byte(first);
        let tagged = control.tagged;
        let truncated = DdpError::Truncated { tagged };
        if ulpdu.len() < control.header_len() {
            return Err(truncated);
        }
        if control.version != DDP_VERSION {
            return Err(DdpError::InvalidVersion {
                tagged,
                version: control.version,
            });
        }
        let rdmap_control = wire::read_u8(ulpdu, 1).ok_or(truncated)?;
        if tagged {
            let header = TaggedHeader {
                control,
                rdmap_control,
                stag: wire::read_be32(ulpdu, 2).ok_or(truncated)?,
                tagged_offset: wire::read_be64(ulpdu, 6).ok_or(truncated)?,
            };
            Ok((Self::Tagged(header), TAGGED_HEADER_LEN))
        } else {
            let header = UntaggedHeader {
                control,
                rdmap_control,
                ulp_reserved: wire::read_be32(ulpdu, 2).ok_or(truncated)?,
                queue_number: wire::read_be32(ulpdu, 6).ok_or(truncated)?,
                msn: wire::read_be32(ulpdu, 10).ok_or(truncated)?,
                message_offset: wire::read_be32(ulpdu, 14).ok_or(truncated)?,
            };
            if QueueNumber::from_u32(header.queue_number).is_none() {
                return Err(DdpError::InvalidQueueNumber(header.queue_number));
            }
            Ok((Self::Untagged(header), UNTAGGED_HEADER_LEN))
        }
    }

    /// Encodes the header into `out` and returns its length. The T bit of
    /// the control byte must match the variant.
    #[inline]
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        // One fixed-size move of the whole header, checked before anything
        // is written.
        match self {
            Self::Tagged(h) => {
                if !h.control.tagged {
                    return Err(EncodeError::ValueOutOfRange);
                }
                let dst = out
                    .get_mut(..TAGGED_HEADER_LEN)
                    .ok_or(EncodeError::BufferTooSmall {
                        needed: TAGGED_HEADER_LEN,
                    })?;
                dst.copy_from_slice(&h.to_bytes()?);
                Ok(TAGGED_HEADER_LEN)
            }
            Self::Untagged(h) => {
                if h.control.tagged {
                    return Err(EncodeError::ValueOutOfRange);
                }
                let dst =
                    out.get_mut(..UNTAGGED_HEADER_LEN)
                        .ok_or(EncodeError::BufferTooSmall {
                            needed: UNTAGGED_HEADER_LEN,
                        })?;
                dst.copy_from_slice(&h.to_bytes()?);
                Ok(UNTAGGED_HEADER_LEN)
            }
        }
    }

    /// The DDP control byte.
    pub const fn control(&self) -> DdpControl {
        match self {
            Self::Tagged(h) => h.control,
            Self::Untagged(h) => h.control,
        }
    }

    /// The RDMAP control byte carried in the second header byte.
    pub const fn rdmap_control(&self) -> u8 {
        match self {
            Self::Tagged(h) => h.rdmap_control,
            Self::Untagged(h) => h.rdmap_control,
        }
    }

    /// Length of this header on the wire.
    pub const fn header_len(&self) -> usize {
        self.control().header_len()
    }
}
