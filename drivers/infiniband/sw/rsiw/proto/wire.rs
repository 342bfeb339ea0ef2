// SPDX-License-Identifier: GPL-2.0

//! Big-endian field access and the error every encoder returns.
//!
//! All iWARP headers are in network byte order. These helpers read and write
//! fixed-width fields at an offset of a slice and report "too short" as `None`
//! or an [`EncodeError`] instead of panicking, which is what lets the decoders
//! and encoders in the sibling modules be free of indexing panics.

/// Why an encoder could not write its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError {
    /// The output buffer is shorter than the encoded form.
    BufferTooSmall {
        /// Bytes the encoded form needs.
        needed: usize,
    },
    /// A field value does not fit its wire width or violates the protocol.
    ValueOutOfRange,
}

/// Returns `N` bytes of `buf` starting at `offset`, or `None` if too short.
pub fn read_array<const N: usize>(buf: &[u8], offset: usize) -> Option<[u8; N]> {
    let end = offset.checked_add(N)?;
    let bytes = buf.get(offset..end)?;
    bytes.try_into().ok()
}

/// Reads the byte at `offset`.
pub fn read_u8(buf: &[u8], offset: usize) -> Option<u8> {
    buf.get(offset).copied()
}

/// Reads a big-endian `u16` at `offset`.
pub fn read_be16(buf: &[u8], offset: usize) -> Option<u16> {
    read_array(buf, offset).map(u16::from_be_bytes)
}

/// Reads a big-endian `u32` at `offset`.
pub fn read_be32(buf: &[u8], offset: usize) -> Option<u32> {
    read_array(buf, offset).map(u32::from_be_bytes)
}

/// Reads a big-endian `u64` at `offset`.
pub fn read_be64(buf: &[u8], offset: usize) -> Option<u64> {
    read_array(buf, offset).map(u64::from_be_bytes)
}

/// Copies `bytes` into `out` at `offset`.
pub fn write_bytes(out: &mut [u8], offset: usize, bytes: &[u8]) -> Result<(), EncodeError> {
    let end = offset
        .checked_add(bytes.len())
        .ok_or(EncodeError::ValueOutOfRange)?;
    let dst = out
        .get_mut(offset..end)
        .ok_or(EncodeError::BufferTooSmall { needed: end })?;
    dst.copy_from_slice(bytes);
    Ok(())
}

/// Writes a big-endian `u16` at `offset`.
pub fn write_be16(out: &mut [u8], offset: usize, value: u16) -> Result<(), EncodeError> {
    write_bytes(out, offset, &value.to_be_bytes())
}

/// Writes a big-endian `u32` at `offset`.
pub fn write_be32(out: &mut [u8], offset: usize, value: u32) -> Result<(), EncodeError> {
    write_bytes(out, offset, &value.to_be_bytes())
}

/// Writes a big-endian `u64` at `offset`.
pub fn write_be64(out: &mut [u8], offset: usize, value: u64) -> Result<(), EncodeError> {
    write_bytes(out, offset, &value.to_be_bytes())
}

/// Fails with [`EncodeError::BufferTooSmall`] unless `out` holds `needed` bytes.
pub fn ensure_room(out: &[u8], needed: usize) -> Result<(), EncodeError> {
    if out.len() < needed {
        Err(EncodeError::BufferTooSmall { needed })
    } else {
        Ok(())
    }
}

/// Adjusts an error from encoding into `out[offset..]` so that it describes
/// the whole of `out`.
pub fn shift_error(error: EncodeError, offset: usize) -> EncodeError {
    match error {
        EncodeError::BufferTooSmall { needed } => match needed.checked_add(offset) {
            Some(needed) => EncodeError::BufferTooSmall { needed },
            None => EncodeError::ValueOutOfRange,
        },
        other => other,
    }
}
