// SPDX-License-Identifier: GPL-2.0

//! XDR (RFC 4506) primitives over borrowed buffers.
//!
//! Every RPC-over-RDMA header is an XDR stream of big-endian 32-bit units.
//! [`XdrReader`] walks a received buffer without copying: opaque data comes
//! back as a sub-slice of the input, and counted arrays are only *measured*
//! (the count is checked against both a caller limit and the bytes that are
//! really left) so that nothing is ever sized from an attacker's count.
//! [`XdrWriter`] encodes into a caller-owned `&mut [u8]` and reports
//! [`EncodeError::BufferTooSmall`] instead of growing anything.
//!
//! Optional-data (`T *x`) is a boolean discriminant followed by the item;
//! discriminated unions are a `u32` discriminant followed by the arm, which
//! callers decode with [`XdrReader::u32`] and a `match`.

/// Size in bytes of one XDR unit.
pub const XDR_UNIT: usize = 4;

/// A failure to decode an XDR item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdrError {
    /// The input ended before the item was complete.
    Truncated,
    /// An optional-data or boolean discriminant was neither 0 nor 1.
    BadBool(u32),
    /// A length or count exceeded the configured limit.
    TooLong,
}

/// A failure to encode into a caller buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError {
    /// The destination buffer cannot hold the encoded item.
    BufferTooSmall,
    /// A length does not fit its 32-bit wire field.
    TooLong,
    /// The header revision has no such message (a continuation fragment in Version 1).
    NotInRevision,
}

/// Rounds `len` up to the next multiple of [`XDR_UNIT`]; `None` on overflow.
pub const fn roundup(len: usize) -> Option<usize> {
    match len.checked_add(XDR_UNIT - 1) {
        Some(v) => Some(v & !(XDR_UNIT - 1)),
        None => None,
    }
}

/// A cursor that decodes XDR items from a borrowed buffer.
#[derive(Debug, Clone)]
pub struct XdrReader<'a> {
    rest: &'a [u8],
    consumed: usize,
}

impl<'a> XdrReader<'a> {
    /// Starts decoding at the beginning of `buf`.
    pub const fn new(buf: &'a [u8]) -> Self {
        Self {
            rest: buf,
            consumed: 0,
        }
    }

    /// Number of bytes decoded so far.
    pub const fn position(&self) -> usize {
        self.consumed
    }

    /// Number of bytes not yet decoded.
    pub const fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// The undecoded remainder of the input.
    pub const fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// Takes exactly `n` raw bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], XdrError> {
        let (head, tail) = split_at_checked(self.rest, n).ok_or(XdrError::Truncated)?;
        self.rest = tail;
        self.consumed = self.consumed.saturating_add(n);
        Ok(head)
    }

    /// Skips `n` raw bytes.
    pub fn skip(&mut self, n: usize) -> Result<(), XdrError> {
        self.take(n).map(|_| ())
    }

    /// Decodes an unsigned 32-bit integer.
    pub fn u32(&mut self) -> Result<u32, XdrError> {
        let (word, tail) = self
            .rest
            .split_first_chunk::<4>()
            .ok_or(XdrError::Truncated)?;
        self.rest = tail;
        self.consumed = self.consumed.saturating_add(4);
        Ok(u32::from_be_bytes(*word))
    }

    /// Decodes an unsigned 64-bit integer (XDR hyper).
    pub fn u64(&mut self) -> Result<u64, XdrError> {
        let (word, tail) = self
            .rest
            .split_first_chunk::<8>()
            .ok_or(XdrError::Truncated)?;
        self.rest = tail;
        self.consumed = self.consumed.saturating_add(8);
        Ok(u64::from_be_bytes(*word))
    }

    /// Decodes a boolean, which is also the discriminant of optional-data.
    pub fn bool(&mut self) -> Result<bool, XdrError> {
        match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(XdrError::BadBool(other)),
        }
    }

    /// Decodes optional-data: the discriminant, then `item` when present.
    pub fn optional<T>(
        &mut self,
        item: impl FnOnce(&mut Self) -> Result<T, XdrError>,
    ) -> Result<Option<T>, XdrError> {
        if self.bool()? {
            item(self).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Decodes fixed-length opaque data of `len` bytes plus its roundup.
    pub fn opaque_fixed(&mut self, len: usize) -> Result<&'a [u8], XdrError> {
        let padded = roundup(len).ok_or(XdrError::TooLong)?;
        let data = self.take(padded)?;
        data.get(..len).ok_or(XdrError::Truncated)
    }

    /// Decodes variable-length opaque data (`opaque<max>`).
    pub fn opaque(&mut self, max: usize) -> Result<&'a [u8], XdrError> {
        let len = usize::try_from(self.u32()?).map_err(|_| XdrError::TooLong)?;
        if len > max {
            return Err(XdrError::TooLong);
        }
        self.opaque_fixed(len)
    }

    /// Decodes the count of a counted array whose elements are `elem_size`
    /// bytes each, checking it against `max` and against the bytes left.
    pub fn array_count(&mut self, elem_size: usize, max: u32) -> Result<u32, XdrError> {
        let count = self.u32()?;
        if count > max {
            return Err(XdrError::TooLong);
        }
        let bytes = usize::try_from(count)
            .ok()
            .and_then(|c| c.checked_mul(elem_size))
            .ok_or(XdrError::TooLong)?;
        if bytes > self.remaining() {
            return Err(XdrError::Truncated);
        }
        Ok(count)
    }
}

/// An XDR encoder that writes into a caller-owned buffer.
#[derive(Debug)]
pub struct XdrWriter<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl<'b> XdrWriter<'b> {
    /// Starts encoding at the beginning of `buf`.
    pub fn new(buf: &'b mut [u8]) -> Self {
        Self { buf, len: 0 }
    }

    /// Number of bytes encoded so far.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing has been encoded yet.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends raw bytes without padding.
    pub fn put_bytes(&mut self, data: &[u8]) -> Result<(), EncodeError> {
        let end = self
            .len
            .checked_add(data.len())
            .ok_or(EncodeError::BufferTooSmall)?;
        let dst = self
            .buf
            .get_mut(self.len..end)
            .ok_or(EncodeError::BufferTooSmall)?;
        dst.copy_from_slice(data);
        self.len = end;
        Ok(())
    }

    /// Encodes an unsigned 32-bit integer.
    pub fn put_u32(&mut self, v: u32) -> Result<(), EncodeError> {
        self.put_bytes(&v.to_be_bytes())
    }

    /// Encodes an unsigned 64-bit integer.
    pub fn put_u64(&mut self, v: u64) -> Result<(), EncodeError> {
        self.put_bytes(&v.to_be_bytes())
    }

    /// Encodes a boolean or optional-data discriminant.
    pub fn put_bool(&mut self, v: bool) -> Result<(), EncodeError> {
        self.put_u32(u32::from(v))
    }

    /// Encodes fixed-length opaque data followed by zero roundup padding.
    pub fn put_opaque_fixed(&mut self, data: &[u8]) -> Result<(), EncodeError> {
        let padded = roundup(data.len()).ok_or(EncodeError::TooLong)?;
        self.put_bytes(data)?;
        let pad = padded.saturating_sub(data.len());
        self.put_bytes([0u8; XDR_UNIT].get(..pad).unwrap_or(&[]))
    }

    /// Encodes variable-length opaque data: its length, bytes and padding.
    pub fn put_opaque(&mut self, data: &[u8]) -> Result<(), EncodeError> {
        let len = u32::try_from(data.len()).map_err(|_| EncodeError::TooLong)?;
        self.put_u32(len)?;
        self.put_opaque_fixed(data)
    }
}

/// `slice::split_at_checked`, which the kernel's minimum Rust (1.78) lacks: the first `n`
/// bytes and the rest, or `None` when there are fewer than `n`.
pub fn split_at_checked(s: &[u8], n: usize) -> Option<(&[u8], &[u8])> {
    Some((s.get(..n)?, s.get(n..)?))
}
