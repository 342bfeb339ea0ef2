// SPDX-License-Identifier: GPL-2.0

//! MPA Request, Reply and Reject frames (RFC 5044 section 7.1, RFC 6581).
//!
//! Before a TCP connection carries FPDUs, the initiator sends an MPA Request
//! frame and the responder answers with an MPA Reply frame (a Reject is a
//! Reply with the R flag set). Both are a fixed 20-byte header followed by up
//! to 512 bytes of private data:
//!
//! ```text
//! | Key: "MPA ID Req Frame" or "MPA ID Rep Frame" (16 bytes)           |
//! |M|C|R|S| Res   |   Rev (8)     |        PD_Length (16)             |
//! | Private Data (PD_Length bytes) ...                                |
//! ```
//!
//! M asks for markers, C for CRC32c, R rejects. S (RFC 6581) says that the
//! private data starts with the 4-byte enhanced connection establishment
//! data, which carries the 14-bit IRD and ORD and the peer-to-peer flags:
//!
//! ```text
//! |A|B|           IRD (14)        |C|D|           ORD (14)        |
//! ```
//!
//! A selects the peer-to-peer model; B, C and D offer a zero-length Send,
//! RDMA Write or RDMA Read as the ready-to-receive (RTR) indication. An IRD or
//! ORD of 0x3FFF means "no automatic negotiation".
//!
//! S sits in what RFC 5044 calls the reserved bits, which a revision 1 peer
//! must not check, so the enhanced data is only recognised in revision 2 (or
//! later) frames. What to *do* with a frame is decided in
//! [`super::mpa_negotiation`]; this module only moves bytes.

use super::term_error::TermError;
use super::wire::{self, EncodeError};

/// Length of the key.
pub const KEY_LEN: usize = 16;

/// The key of an MPA Request frame.
pub const REQUEST_KEY: [u8; KEY_LEN] = *b"MPA ID Req Frame";

/// The key of an MPA Reply (or Reject) frame.
pub const REPLY_KEY: [u8; KEY_LEN] = *b"MPA ID Rep Frame";

/// Length of the fixed frame header (key, flags, revision, PD length).
pub const FRAME_HEADER_LEN: usize = 20;

/// Largest private data length RFC 5044 allows.
pub const MAX_PRIVATE_DATA_LEN: usize = 512;

/// Length of the RFC 6581 enhanced connection establishment data.
pub const ENHANCED_DATA_LEN: usize = 4;

/// IRD/ORD value meaning "no automatic negotiation" (RFC 6581 section 9.1).
pub const NO_NEGOTIATION: u16 = 0x3FFF;

/// Largest value of the 14-bit IRD and ORD fields.
pub const MAX_IRD_ORD: u16 = 0x3FFF;

/// MPA revision 1 (RFC 5044).
pub const REVISION_1: u8 = 1;

/// MPA revision 2 (RFC 6581, enhanced connection establishment).
pub const REVISION_2: u8 = 2;

const FLAG_MARKERS: u8 = 0x80;
const FLAG_CRC: u8 = 0x40;
const FLAG_REJECT: u8 = 0x20;
const FLAG_ENHANCED: u8 = 0x10;
const RESERVED_MASK: u8 = 0x0F;

/// The reserved bit by which a frame's sender says it takes FPDUs larger than one TCP segment
/// (one GSO packet of segments). The C siw calls it `MPA_RR_FLAG_GSO_EXP`; RFC 5044 peers
/// send zero there and ignore it, so it only ever turns on between software peers that both
/// set it.
pub const RESERVED_LARGE_FPDUS: u8 = 0x08;

const FLAG_A: u16 = 0x8000;
const FLAG_B: u16 = 0x4000;
const FLAG_C: u16 = 0x8000;
const FLAG_D: u16 = 0x4000;

/// Which of the two frames a key announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// MPA Request, sent by the initiator.
    Request,
    /// MPA Reply or Reject, sent by the responder.
    Reply,
}

impl FrameKind {
    /// The key of this kind of frame.
    pub const fn key(self) -> &'static [u8; KEY_LEN] {
        match self {
            Self::Request => &REQUEST_KEY,
            Self::Reply => &REPLY_KEY,
        }
    }
}

/// The flag bits of an MPA frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MpaFlags {
    /// M: the sender requires markers in the stream it receives.
    pub markers: bool,
    /// C: CRC32c is desired (request) or in use (reply).
    pub crc: bool,
    /// R: the connection is rejected (reply only).
    pub reject: bool,
    /// S (RFC 6581): the private data begins with enhanced data.
    pub enhanced: bool,
    /// The remaining reserved bits (4 bits), never checked. The top one is
    /// [`RESERVED_LARGE_FPDUS`]; the others are sent as zero.
    pub reserved: u8,
}

impl MpaFlags {
    /// Whether the sender takes FPDUs larger than one TCP segment
    /// ([`RESERVED_LARGE_FPDUS`]).
    pub const fn large_fpdus(&self) -> bool {
        self.reserved & RESERVED_LARGE_FPDUS != 0
    }

    /// These flags, saying (or not) that the sender takes FPDUs larger than one TCP
    /// segment.
    pub const fn with_large_fpdus(self, large: bool) -> Self {
        let reserved = if large {
            self.reserved | RESERVED_LARGE_FPDUS
        } else {
            self.reserved & !RESERVED_LARGE_FPDUS
        };
        Self { reserved, ..self }
    }

    /// Unpacks the flags byte.
    pub const fn from_byte(byte: u8) -> Self {
        Self {
            markers: byte & FLAG_MARKERS != 0,
            crc: byte & FLAG_CRC != 0,
            reject: byte & FLAG_REJECT != 0,
            enhanced: byte & FLAG_ENHANCED != 0,
            reserved: byte & RESERVED_MASK,
        }
    }

    /// Packs the flags byte.
    pub fn to_byte(&self) -> Result<u8, EncodeError> {
        if self.reserved > RESERVED_MASK {
            return Err(EncodeError::ValueOutOfRange);
        }
        let mut byte = self.reserved;
        for (set, bit) in [
            (self.markers, FLAG_MARKERS),
            (self.crc, FLAG_CRC),
            (self.reject, FLAG_REJECT),
            (self.enhanced, FLAG_ENHANCED),
        ] {
            if set {
                byte |= bit;
            }
        }
        Ok(byte)
    }
}

/// The ready-to-receive indications of RFC 6581 section 9.2 (flags B, C, D).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RtrKinds {
    /// B: zero-length Send.
    pub send: bool,
    /// C: zero-length RDMA Write.
    pub write: bool,
    /// D: zero-length RDMA Read.
    pub read: bool,
}

impl RtrKinds {
    /// No RTR indication.
    pub const NONE: Self = Self {
        send: false,
        write: false,
        read: false,
    };

    /// Whether no kind is set.
    pub const fn is_empty(&self) -> bool {
        !(self.send || self.write || self.read)
    }

    /// The kinds set in both.
    pub const fn intersection(&self, other: &Self) -> Self {
        Self {
            send: self.send && other.send,
            write: self.write && other.write,
            read: self.read && other.read,
        }
    }

    /// Whether `kind` is set.
    pub const fn contains(&self, kind: RtrKind) -> bool {
        match kind {
            RtrKind::Send => self.send,
            RtrKind::Write => self.write,
            RtrKind::Read => self.read,
        }
    }

    /// The set holding only `kind`.
    pub const fn only(kind: RtrKind) -> Self {
        Self {
            send: matches!(kind, RtrKind::Send),
            write: matches!(kind, RtrKind::Write),
            read: matches!(kind, RtrKind::Read),
        }
    }
}

/// One ready-to-receive indication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtrKind {
    /// A zero-length Send (needs a posted receive at the responder).
    Send,
    /// A zero-length RDMA Write.
    Write,
    /// A zero-length RDMA Read (needs a responder IRD of at least 1).
    Read,
}

/// The RFC 6581 enhanced connection establishment data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnhancedData {
    /// Inbound RDMA Read queue depth (14 bits; [`NO_NEGOTIATION`] allowed).
    pub ird: u16,
    /// Outbound RDMA Read queue depth (14 bits; [`NO_NEGOTIATION`] allowed).
    pub ord: u16,
    /// A: peer-to-peer connection model.
    pub peer_to_peer: bool,
    /// B, C, D: RTR indications requested or supported.
    pub rtr: RtrKinds,
}

impl EnhancedData {
    /// Unpacks the four bytes.
    pub const fn from_bytes(bytes: [u8; ENHANCED_DATA_LEN]) -> Self {
        let [a, b, c, d] = bytes;
        let ird = u16::from_be_bytes([a, b]);
        let ord = u16::from_be_bytes([c, d]);
        Self {
            ird: ird & MAX_IRD_ORD,
            ord: ord & MAX_IRD_ORD,
            peer_to_peer: ird & FLAG_A != 0,
            rtr: RtrKinds {
                send: ird & FLAG_B != 0,
                write: ord & FLAG_C != 0,
                read: ord & FLAG_D != 0,
            },
        }
    }

    /// Packs the four bytes. Fails if IRD or ORD exceed 14 bits.
    pub fn to_bytes(&self) -> Result<[u8; ENHANCED_DATA_LEN], EncodeError> {
        if self.ird > MAX_IRD_ORD || self.ord > MAX_IRD_ORD {
            return Err(EncodeError::ValueOutOfRange);
        }
        let mut ird = self.ird;
        let mut ord = self.ord;
        if self.peer_to_peer {
            ird |= FLAG_A;
        }
        if self.rtr.send {
            ird |= FLAG_B;
        }
        if self.rtr.write {
            ord |= FLAG_C;
        }
        if self.rtr.read {
            ord |= FLAG_D;
        }
        let [a, b] = ird.to_be_bytes();
        let [c, d] = ord.to_be_bytes();
        Ok([a, b, c, d])
    }
}

/// The fixed 20-byte header of an MPA frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MpaHeader {
    /// Request or reply, from the key.
    pub kind: FrameKind,
    /// The flag bits.
    pub flags: MpaFlags,
    /// The MPA revision.
    pub revision: u8,
    /// Length of the private data that follows.
    pub private_data_len: u16,
}

impl MpaHeader {
    /// Whether the private data starts with enhanced data: S is set in a
    /// revision 2 or later frame.
    pub const fn has_enhanced_data(&self) -> bool {
        self.flags.enhanced && self.revision >= REVISION_2
    }

    /// Length of the whole frame.
    pub const fn frame_len(&self) -> usize {
        FRAME_HEADER_LEN + self.private_data_len as usize
    }

    /// Decodes and validates the header at the start of `buf`, which must be
    /// a frame of `expected` kind. The kernel reads these 20 bytes first to
    /// learn how much private data follows.
    pub fn decode(buf: &[u8], expected: FrameKind) -> Result<Self, MpaError> {
        let key: [u8; KEY_LEN] = wire::read_array(buf, 0).ok_or(MpaError::Truncated {
            needed: FRAME_HEADER_LEN,
        })?;
        if &key != expected.key() {
            return Err(MpaError::BadKey);
        }
        let truncated = MpaError::Truncated {
            needed: FRAME_HEADER_LEN,
        };
        let flags = MpaFlags::from_byte(wire::read_u8(buf, 16).ok_or(truncated)?);
        let revision = wire::read_u8(buf, 17).ok_or(truncated)?;
        let private_data_len = wire::read_be16(buf, 18).ok_or(truncated)?;
        if usize::from(private_data_len) > MAX_PRIVATE_DATA_LEN {
            return Err(MpaError::PrivateDataTooLong(private_data_len));
        }
        let header = Self {
            kind: expected,
            flags,
            revision,
            private_data_len,
        };
        if header.has_enhanced_data() && usize::from(private_data_len) < ENHANCED_DATA_LEN {
            return Err(MpaError::EnhancedDataMissing);
        }
        Ok(header)
    }

    /// Encodes the header into `out` and returns its length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        if usize::from(self.private_data_len) > MAX_PRIVATE_DATA_LEN {
            return Err(EncodeError::ValueOutOfRange);
        }
        wire::ensure_room(out, FRAME_HEADER_LEN)?;
        wire::write_bytes(out, 0, self.kind.key())?;
        wire::write_bytes(out, 16, &[self.flags.to_byte()?, self.revision])?;
        wire::write_be16(out, 18, self.private_data_len)?;
        Ok(FRAME_HEADER_LEN)
    }
}

/// A complete MPA frame, borrowing its private data from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MpaFrame<'a> {
    /// The fixed header.
    pub header: MpaHeader,
    /// The enhanced data, if the header announces it.
    pub enhanced: Option<EnhancedData>,
    /// The ULP private data (after the enhanced data, if any).
    pub ulp_private_data: &'a [u8],
}

/// Why an MPA frame was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MpaError {
    /// More bytes are needed; not an error while the stream is still open.
    Truncated {
        /// Total bytes the frame needs.
        needed: usize,
    },
    /// The key is not the one expected.
    BadKey,
    /// PD_Length exceeds [`MAX_PRIVATE_DATA_LEN`].
    PrivateDataTooLong(u16),
    /// S is set but the private data is too short for the enhanced data.
    EnhancedDataMissing,
}

impl MpaError {
    /// The TERMINATE error to report: every malformed frame is an invalid
    /// MPA Request/Reply (RFC 5044, code 4).
    pub const fn term(self) -> TermError {
        TermError::MpaInvalidRequestReply
    }
}

impl<'a> MpaFrame<'a> {
    /// Decodes a complete frame of `expected` kind from the start of `buf`
    /// and returns it with its length. Bytes after the frame are not looked
    /// at (they are the peer's first FPDU, or garbage).
    pub fn decode(buf: &'a [u8], expected: FrameKind) -> Result<(Self, usize), MpaError> {
        let header = MpaHeader::decode(buf, expected)?;
        let len = header.frame_len();
        let private_data = buf
            .get(FRAME_HEADER_LEN..len)
            .ok_or(MpaError::Truncated { needed: len })?;
        let (enhanced, ulp_private_data) = if header.has_enhanced_data() {
            let bytes = wire::read_array(private_data, 0).ok_or(MpaError::EnhancedDataMissing)?;
            let rest = private_data.get(ENHANCED_DATA_LEN..).unwrap_or(&[]);
            (Some(EnhancedData::from_bytes(bytes)), rest)
        } else {
            (None, private_data)
        };
        Ok((
            Self {
                header,
                enhanced,
                ulp_private_data,
            },
            len,
        ))
    }
}

/// Encodes a frame into `out` and returns its length. The S flag and the
/// private data length are derived from `enhanced` and `ulp_private_data`;
/// the other header fields are taken as given.
pub fn encode_frame(
    out: &mut [u8],
    kind: FrameKind,
    mut flags: MpaFlags,
    revision: u8,
    enhanced: Option<&EnhancedData>,
    ulp_private_data: &[u8],
) -> Result<usize, EncodeError> {
    flags.enhanced = enhanced.is_some();
    if flags.enhanced && revision < REVISION_2 {
        return Err(EncodeError::ValueOutOfRange);
    }
    let enhanced_len = if flags.enhanced { ENHANCED_DATA_LEN } else { 0 };
    let pd_len = enhanced_len
        .checked_add(ulp_private_data.len())
        .filter(|&len| len <= MAX_PRIVATE_DATA_LEN)
        .ok_or(EncodeError::ValueOutOfRange)?;
    let header = MpaHeader {
        kind,
        flags,
        revision,
        private_data_len: u16::try_from(pd_len).map_err(|_| EncodeError::ValueOutOfRange)?,
    };
    wire::ensure_room(out, header.frame_len())?;
    let mut len = header.encode(out)?;
    if let Some(data) = enhanced {
        wire::write_bytes(out, len, &data.to_bytes()?)?;
        len += ENHANCED_DATA_LEN;
    }
    wire::write_bytes(out, len, ulp_private_data)?;
    Ok(header.frame_len())
}
