// SPDX-License-Identifier: GPL-2.0

//! Transmit segmentation: how one RDMAP message is cut into DDP segments.
//!
//! Without markers, the receiver finds FPDU boundaries only by following the
//! length fields, and it can place a segment as soon as its TCP segment
//! arrives only if FPDUs and TCP segments line up. Like siw, rsiw therefore
//! sizes every FPDU to at most one TCP segment (or one GSO batch of them),
//! and the payload of each DDP segment is what is left of that size after
//! the MPA length field, the DDP/RDMAP headers, the pad and the CRC.
//!
//! The CRC field is sent whether or not CRC was negotiated (as zeros when it
//! was not, see [`super::fpdu`]), so the overhead does not depend on it.
//!
//! [`segments`] then yields the (offset, length, last) triples of the
//! segments: the MO of an untagged segment, or what to add to the starting TO
//! of a tagged one. A zero-length message is one empty segment with L set,
//! which is what RFC 6581's zero-length Send and Write RTR indications are.

use core::iter::FusedIterator;
use core::num::NonZeroU32;

use super::fpdu::{CRC_LEN, LENGTH_FIELD_LEN};
use super::rdmap::Opcode;

/// Largest ULPDU MPA can frame (ULPDU_Length is a 16-bit field).
pub const MAX_ULPDU_LEN: usize = u16::MAX as usize;

/// The FPDU size for a TCP connection with maximum segment size `mss` that
/// may send `gso_segments` segments in one go (0 counts as 1): their total,
/// rounded down to a multiple of 8 as siw does, since loopback may report an
/// odd MSS.
pub const fn fpdu_size(mss: u32, gso_segments: u32) -> usize {
    let segments = if gso_segments == 0 { 1 } else { gso_segments };
    (mss as usize).saturating_mul(segments as usize) & !7
}

/// Largest ULPDU whose FPDU (length field, ULPDU, pad, CRC) fits in
/// `fpdu_size` bytes, and which MPA can frame.
#[inline]
pub const fn max_ulpdu_len(fpdu_size: usize) -> usize {
    // Length field, ULPDU and pad together are a multiple of 4.
    let framed = fpdu_size.saturating_sub(CRC_LEN) & !3;
    let ulpdu = framed.saturating_sub(LENGTH_FIELD_LEN);
    if ulpdu < MAX_ULPDU_LEN {
        ulpdu
    } else {
        MAX_ULPDU_LEN
    }
}

/// Most payload bytes a DDP segment can carry in an FPDU of `fpdu_size`
/// bytes after `header_len` bytes of DDP and RDMAP headers; `None` if not
/// even one byte fits.
#[inline]
pub fn max_payload(fpdu_size: usize, header_len: usize) -> Option<NonZeroU32> {
    let payload = max_ulpdu_len(fpdu_size).checked_sub(header_len)?;
    NonZeroU32::new(u32::try_from(payload).ok()?)
}

/// [`max_payload`] for the segments of `opcode`.
#[inline]
pub fn max_payload_for(fpdu_size: usize, opcode: Opcode) -> Option<NonZeroU32> {
    max_payload(fpdu_size, opcode.header_len())
}

/// One DDP segment of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxSegment {
    /// Offset of the segment's payload in the message (the MO, or the
    /// distance from the message's first TO).
    pub offset: u32,
    /// Payload bytes in the segment.
    pub len: u32,
    /// Whether this is the last segment (the L flag).
    pub last: bool,
}

/// The segments of one message, in order. The iterator is `Copy`, so the
/// transmit path can keep it as its progress through a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segments {
    offset: u32,
    remaining: u32,
    max_payload: NonZeroU32,
    done: bool,
}

/// Splits a message of `message_len` payload bytes into segments of at most
/// `max_payload` bytes. Every segment but the last is full.
pub const fn segments(message_len: u32, max_payload: NonZeroU32) -> Segments {
    Segments {
        offset: 0,
        remaining: message_len,
        max_payload,
        done: false,
    }
}

impl Iterator for Segments {
    type Item = TxSegment;

    #[inline]
    fn next(&mut self) -> Option<TxSegment> {
        if self.done {
            return None;
        }
        let len = self.remaining.min(self.max_payload.get());
        let segment = TxSegment {
            offset: self.offset,
            len,
            last: len == self.remaining,
        };
        self.remaining = self.remaining.saturating_sub(len);
        // offset + remaining never exceeds the message length, a u32.
        self.offset = self.offset.saturating_add(len);
        self.done = segment.last;
        Some(segment)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = if self.done {
            0
        } else {
            let max = self.max_payload.get();
            let full = self.remaining / max;
            let partial = u32::from(self.remaining % max != 0 || self.remaining == 0);
            full.saturating_add(partial) as usize
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for Segments {}

impl FusedIterator for Segments {}
