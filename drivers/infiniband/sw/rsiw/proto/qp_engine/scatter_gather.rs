// SPDX-License-Identifier: GPL-2.0

//! Byte ranges of a work request's SGE list: gathering the payload of a Send or Write from it
//! and scattering a received Send into a receive request's, through the driver's
//! [`QpContext::local_read`] and [`QpContext::local_write`].
//!
//! The send queue, FPDU production and the receive side share these; nearly every list has
//! one SGE, which takes a path of its own.

use super::*;

/// The pieces of the byte range [`offset`, `offset` + `len`) of the
/// concatenation of some SGEs: (SGE, offset in it, offset in the range,
/// length).
struct SgePieces<'a, E: SgeEntry> {
    sges: core::slice::Iter<'a, E>,
    skip: u64,
    done: usize,
    len: usize,
}

impl<'a, E: SgeEntry> SgePieces<'a, E> {
    fn new(sges: &'a [E], offset: u32, len: usize) -> Self {
        Self {
            sges: sges.iter(),
            skip: u64::from(offset),
            done: 0,
            len,
        }
    }

    /// Whether the SGEs covered the whole range.
    fn complete(&self) -> bool {
        self.done >= self.len
    }
}

impl<'a, E: SgeEntry> Iterator for SgePieces<'a, E> {
    type Item = (&'a E, u32, usize, usize);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let left = self.len.checked_sub(self.done).filter(|&l| l > 0)?;
            let sge = self.sges.next()?;
            let sge_len = u64::from(sge.length());
            if self.skip >= sge_len {
                self.skip = self.skip.saturating_sub(sge_len);
            } else {
                let at = self.skip;
                self.skip = 0;
                let avail = sge_len.saturating_sub(at);
                let n = usize::try_from(avail).map_or(left, |a| a.min(left));
                let start = self.done;
                self.done = self.done.saturating_add(n);
                // `at` is below a 32-bit length.
                let at = u32::try_from(at).unwrap_or(u32::MAX);
                return Some((sge, at, start, n));
            }
        }
    }
}

/// The only SGE of `sges` if the `len` > 0 bytes from `offset` on lie inside
/// it, as nearly always: one piece, no need to iterate over [`SgePieces`].
fn single_sge<E: SgeEntry>(sges: &[E], offset: u32, len: usize) -> Option<&E> {
    match sges {
        [sge]
            if len > 0
                && u64::from(offset).saturating_add(len as u64) <= u64::from(sge.length()) =>
        {
            Some(sge)
        }
        _ => None,
    }
}

/// Reads bytes `offset..` of the concatenated `sges` into `out`.
pub(super) fn sg_read<X: QpContext>(
    ctx: &mut X,
    sges: &[X::Sge],
    offset: u32,
    out: &mut [u8],
) -> Result<(), WcStatus> {
    if let Some(sge) = single_sge(sges, offset, out.len()) {
        return ctx.local_read(sge, offset, out);
    }
    let mut pieces = SgePieces::new(sges, offset, out.len());
    for (sge, at, start, n) in pieces.by_ref() {
        let end = start.checked_add(n).ok_or(WcStatus::LocLenErr)?;
        let dst = out.get_mut(start..end).ok_or(WcStatus::LocLenErr)?;
        ctx.local_read(sge, at, dst)?;
    }
    if pieces.complete() {
        Ok(())
    } else {
        Err(WcStatus::LocLenErr)
    }
}

/// Writes `data` to bytes `offset..` of the concatenated `sges`.
pub(super) fn sg_write<X: QpContext>(
    ctx: &mut X,
    sges: &[X::Sge],
    offset: u32,
    data: &[u8],
) -> Result<(), WcStatus> {
    if let Some(sge) = single_sge(sges, offset, data.len()) {
        return ctx.local_write(sge, offset, data);
    }
    let mut pieces = SgePieces::new(sges, offset, data.len());
    for (sge, at, start, n) in pieces.by_ref() {
        let end = start.checked_add(n).ok_or(WcStatus::LocLenErr)?;
        let src = data.get(start..end).ok_or(WcStatus::LocLenErr)?;
        ctx.local_write(sge, at, src)?;
    }
    if pieces.complete() {
        Ok(())
    } else {
        Err(WcStatus::LocLenErr)
    }
}
