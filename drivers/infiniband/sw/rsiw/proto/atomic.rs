// SPDX-License-Identifier: GPL-2.0

//! Atomic operations (RFC 7306 section 5).
//!
//! An Atomic Request (RDMAP opcode 0xA, queue 1, sharing the IRD/ORD credits
//! of RDMA Read) asks the responder to read a 64-bit aligned word of a tagged
//! buffer, combine it with operands from the request and write it back, all
//! atomically; the Atomic Response (opcode 0xB, queue 3) returns the original
//! word. This module holds both headers and the arithmetic itself, which is
//! pure and so is tested here rather than in the kernel:
//!
//! - FetchAdd adds per field: every bit set in the Add Mask marks the most
//!   significant bit of a field, and the carry out of that bit is discarded.
//!   A zero mask is one plain 64-bit addition.
//! - CmpSwap compares only the bits set in the Compare Mask and, on a match,
//!   replaces only the bits set in the Swap Mask. All-ones masks give the
//!   plain compare-and-swap.
//!
//! ```text
//! Request (52 bytes): | Reserved (28) | AOpCode (4) | Request Identifier |
//!   | Remote STag | Remote TO (64) | Add/Swap Data (64) | Add/Swap Mask (64) |
//!   | Compare Data (64) | Compare Mask (64) |
//! Response (12 bytes): | Original Request Identifier | Original Value (64) |
//! ```

use super::term_error::TermError;
use super::wire::{self, EncodeError};

/// Required alignment of the target address, in bytes.
pub const ATOMIC_ALIGNMENT: u64 = 8;

const AOPCODE_MASK: u32 = 0x0000_000F;
const RESERVED_MASK: u32 = 0xFFFF_FFF0;

/// Atomic operation codes (AOpCode, RFC 7306 section 10.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum AtomicOpcode {
    /// Masked fetch-and-add.
    FetchAdd = 0x0,
    /// Masked compare-and-swap.
    CmpSwap = 0x2,
}

impl AtomicOpcode {
    /// Maps a 4-bit AOpCode to a defined operation.
    pub const fn from_u8(value: u8) -> Option<Self> {
        match value {
            0x0 => Some(Self::FetchAdd),
            0x2 => Some(Self::CmpSwap),
            _ => None,
        }
    }
}

/// Why an atomic header or operation was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicError {
    /// The header is shorter than its fixed length.
    Truncated,
    /// The AOpCode is not one this RNIC implements.
    UnsupportedOpcode(u8),
    /// The target address is not 64-bit aligned.
    Misaligned(u64),
}

impl AtomicError {
    /// The TERMINATE error to report. RFC 7306 section 8.2 prescribes
    /// "catastrophic error, localized to RDMAP stream" for misalignment; an
    /// unsupported AOpCode is reported as an unexpected opcode, and a short
    /// header like any malformed RDMAP message.
    pub const fn term(self) -> TermError {
        match self {
            Self::Truncated | Self::Misaligned(_) => TermError::RdmapCatastrophicStream,
            Self::UnsupportedOpcode(_) => TermError::RdmapUnexpectedOpcode,
        }
    }
}

/// Fetch-and-add over fields delimited by `add_mask`: each set bit is the
/// most significant bit of a field and the carry out of it is discarded.
pub const fn masked_fetch_add(original: u64, add: u64, add_mask: u64) -> u64 {
    // Add with the field MSBs cleared: a carry into an MSB stops there, as
    // both operand bits are zero. Then fold the operands' MSBs back in
    // without carry.
    let partial = (original & !add_mask).wrapping_add(add & !add_mask);
    partial ^ ((original ^ add) & add_mask)
}

/// Plain 64-bit fetch-and-add (the result of a zero Add Mask).
pub const fn fetch_add(original: u64, add: u64) -> u64 {
    original.wrapping_add(add)
}

/// Compare-and-swap restricted to `compare_mask` for the comparison and to
/// `swap_mask` for the replacement. Returns the new value of the target.
pub const fn masked_cmp_swap(
    original: u64,
    compare: u64,
    compare_mask: u64,
    swap: u64,
    swap_mask: u64,
) -> u64 {
    if (compare ^ original) & compare_mask == 0 {
        (original & !swap_mask) | (swap & swap_mask)
    } else {
        original
    }
}

/// Plain compare-and-swap (all-ones masks).
pub const fn cmp_swap(original: u64, compare: u64, swap: u64) -> u64 {
    masked_cmp_swap(original, compare, u64::MAX, swap, u64::MAX)
}

/// Fails unless `address` is 64-bit aligned.
pub const fn check_alignment(address: u64) -> Result<(), AtomicError> {
    if address % ATOMIC_ALIGNMENT == 0 {
        Ok(())
    } else {
        Err(AtomicError::Misaligned(address))
    }
}

/// The Atomic Operation Request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicRequestHeader {
    /// Reserved bits (28 bits), zero on transmit, ignored on receive.
    pub reserved: u32,
    /// AOpCode (4 bits), kept raw; see [`Self::opcode`].
    pub aopcode: u8,
    /// Identifier the response echoes.
    pub request_id: u32,
    /// STag of the target buffer.
    pub remote_stag: u32,
    /// Tagged offset of the target word.
    pub remote_tagged_offset: u64,
    /// Add Data or Swap Data.
    pub add_swap_data: u64,
    /// Add Mask or Swap Mask.
    pub add_swap_mask: u64,
    /// Compare Data (CmpSwap only).
    pub compare_data: u64,
    /// Compare Mask (CmpSwap only).
    pub compare_mask: u64,
}

impl AtomicRequestHeader {
    /// Length of the header.
    pub const LEN: usize = 52;

    /// A FetchAdd request; a zero `add_mask` is a plain 64-bit add. The
    /// unused compare fields are set as RFC 7306 asks (zero data, all-ones
    /// mask).
    pub const fn fetch_add(
        request_id: u32,
        remote_stag: u32,
        remote_tagged_offset: u64,
        add: u64,
        add_mask: u64,
    ) -> Self {
        Self {
            reserved: 0,
            aopcode: AtomicOpcode::FetchAdd as u8,
            request_id,
            remote_stag,
            remote_tagged_offset,
            add_swap_data: add,
            add_swap_mask: add_mask,
            compare_data: 0,
            compare_mask: u64::MAX,
        }
    }

    /// A CmpSwap request; all-ones masks give the plain operation.
    pub const fn cmp_swap(
        request_id: u32,
        remote_stag: u32,
        remote_tagged_offset: u64,
        compare: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    ) -> Self {
        Self {
            reserved: 0,
            aopcode: AtomicOpcode::CmpSwap as u8,
            request_id,
            remote_stag,
            remote_tagged_offset,
            add_swap_data: swap,
            add_swap_mask: swap_mask,
            compare_data: compare,
            compare_mask,
        }
    }

    /// The operation, if the AOpCode is supported.
    pub const fn opcode(&self) -> Result<AtomicOpcode, AtomicError> {
        match AtomicOpcode::from_u8(self.aopcode) {
            Some(op) => Ok(op),
            None => Err(AtomicError::UnsupportedOpcode(self.aopcode)),
        }
    }

    /// Computes the value to write back given the `original` target word.
    pub const fn apply(&self, original: u64) -> Result<u64, AtomicError> {
        match self.opcode() {
            Ok(AtomicOpcode::FetchAdd) => Ok(masked_fetch_add(
                original,
                self.add_swap_data,
                self.add_swap_mask,
            )),
            Ok(AtomicOpcode::CmpSwap) => Ok(masked_cmp_swap(
                original,
                self.compare_data,
                self.compare_mask,
                self.add_swap_data,
                self.add_swap_mask,
            )),
            Err(e) => Err(e),
        }
    }

    /// Decodes the header from the first 52 bytes of `buf`. The AOpCode is
    /// checked; alignment needs the resolved address and is left to
    /// [`check_alignment`].
    pub fn decode(buf: &[u8]) -> Result<Self, AtomicError> {
        let t = AtomicError::Truncated;
        let word = wire::read_be32(buf, 0).ok_or(t)?;
        let header = Self {
            reserved: (word & RESERVED_MASK) >> 4,
            aopcode: (word & AOPCODE_MASK) as u8,
            request_id: wire::read_be32(buf, 4).ok_or(t)?,
            remote_stag: wire::read_be32(buf, 8).ok_or(t)?,
            remote_tagged_offset: wire::read_be64(buf, 12).ok_or(t)?,
            add_swap_data: wire::read_be64(buf, 20).ok_or(t)?,
            add_swap_mask: wire::read_be64(buf, 28).ok_or(t)?,
            compare_data: wire::read_be64(buf, 36).ok_or(t)?,
            compare_mask: wire::read_be64(buf, 44).ok_or(t)?,
        };
        header.opcode()?;
        Ok(header)
    }

    /// Encodes the header into `out` and returns its length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        if self.reserved > (RESERVED_MASK >> 4) || u32::from(self.aopcode) > AOPCODE_MASK {
            return Err(EncodeError::ValueOutOfRange);
        }
        wire::ensure_room(out, Self::LEN)?;
        wire::write_be32(out, 0, self.reserved << 4 | u32::from(self.aopcode))?;
        wire::write_be32(out, 4, self.request_id)?;
        wire::write_be32(out, 8, self.remote_stag)?;
        wire::write_be64(out, 12, self.remote_tagged_offset)?;
        wire::write_be64(out, 20, self.add_swap_data)?;
        wire::write_be64(out, 28, self.add_swap_mask)?;
        wire::write_be64(out, 36, self.compare_data)?;
        wire::write_be64(out, 44, self.compare_mask)?;
        Ok(Self::LEN)
    }
}

/// The Atomic Operation Response header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicResponseHeader {
    /// The Request Identifier of the request answered.
    pub request_id: u32,
    /// The target word before the operation.
    pub original_value: u64,
}

impl AtomicResponseHeader {
    /// Length of the header.
    pub const LEN: usize = 12;

    /// Decodes the header from the first 12 bytes of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Self, AtomicError> {
        let t = AtomicError::Truncated;
        Ok(Self {
            request_id: wire::read_be32(buf, 0).ok_or(t)?,
            original_value: wire::read_be64(buf, 4).ok_or(t)?,
        })
    }

    /// Encodes the header into `out` and returns its length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        wire::ensure_room(out, Self::LEN)?;
        wire::write_be32(out, 0, self.request_id)?;
        wire::write_be64(out, 4, self.original_value)?;
        Ok(Self::LEN)
    }
}
