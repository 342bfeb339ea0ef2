// SPDX-License-Identifier: GPL-2.0

//! A run of bytes held in several slices, taken as one.
//!
//! TCP hands received bytes over as a socket buffer: a head and page
//! fragments, each a separate slice. The payload of one DDP segment spans
//! many of them (a 64 KiB RDMA Write arrives in about sixteen). Placing it
//! piece by piece costs a region lookup, lock and bounds check per piece;
//! [`Pieces`] lets the receive path describe the whole run at once, so that
//! the driver checks once and copies each piece where it belongs.

/// Bytes `skip..skip + len` of the concatenation of `slices`.
///
/// # Invariants
///
/// `skip` lies within the first slice, or is 0, and the slices hold at least
/// `skip + len` bytes.
#[derive(Clone, Copy, Debug)]
pub struct Pieces<'a> {
    slices: &'a [&'a [u8]],
    skip: usize,
    len: usize,
}

impl<'a> Pieces<'a> {
    /// All the bytes of `slices`, in order.
    pub fn new(slices: &'a [&'a [u8]]) -> Self {
        let len = slices.iter().map(|s| s.len()).sum();
        Self {
            slices,
            skip: 0,
            len,
        }
    }

    /// The bytes of `slice`, one piece (`slice` is a one-element array
    /// holding it, which [`core::slice::from_ref`] makes).
    pub fn one(slice: &'a [&'a [u8]; 1]) -> Self {
        Self {
            slices: slice,
            skip: 0,
            len: slice[0].len(),
        }
    }

    /// The number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The contiguous bytes at the start: the rest of the first non-empty
    /// slice, at most [`Self::len`] of them.
    pub fn first(&self) -> &'a [u8] {
        let mut skip = self.skip;
        for slice in self.slices {
            let rest = slice.get(skip..).unwrap_or(&[]);
            if !rest.is_empty() || self.len == 0 {
                return rest.get(..self.len.min(rest.len())).unwrap_or(&[]);
            }
            skip = 0;
        }
        &[]
    }

    /// The first `n` bytes (all of them if fewer) and the rest.
    pub fn split_at(self, n: usize) -> (Self, Self) {
        let n = n.min(self.len);
        let head = Self { len: n, ..self };
        // Walk to the slice that byte `n` lies in.
        let mut at = self.skip.saturating_add(n);
        let mut slices = self.slices;
        while let Some((first, others)) = slices.split_first() {
            if at < first.len() || others.is_empty() {
                break;
            }
            at -= first.len();
            slices = others;
        }
        let rest = Self {
            slices,
            skip: if self.len == n { 0 } else { at },
            len: self.len - n,
        };
        (head, rest)
    }

    /// Runs `f` over the bytes in order, one contiguous slice at a time
    /// (never an empty one), until it fails.
    pub fn try_for_each<E>(&self, mut f: impl FnMut(&'a [u8]) -> Result<(), E>) -> Result<(), E> {
        let mut left = self.len;
        let mut skip = self.skip;
        for slice in self.slices {
            if left == 0 {
                break;
            }
            let rest = slice.get(skip..).unwrap_or(&[]);
            skip = 0;
            let chunk = rest.get(..left.min(rest.len())).unwrap_or(&[]);
            if !chunk.is_empty() {
                left -= chunk.len();
                f(chunk)?;
            }
        }
        Ok(())
    }

    /// [`Self::try_for_each`], also telling `f` where in the run each slice
    /// starts.
    pub fn try_for_each_at<E>(
        &self,
        mut f: impl FnMut(usize, &'a [u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut at = 0;
        self.try_for_each(|chunk| {
            f(at, chunk)?;
            at += chunk.len();
            Ok(())
        })
    }

    /// Copies the first `dst.len()` bytes into `dst`; `false` (with `dst`
    /// partly written) if there are fewer.
    pub fn copy_to(&self, dst: &mut [u8]) -> bool {
        if dst.len() > self.len {
            return false;
        }
        let (head, _) = self.split_at(dst.len());
        let copied: Result<(), ()> = head.try_for_each_at(|at, chunk| {
            let end = at + chunk.len();
            dst.get_mut(at..end).ok_or(())?.copy_from_slice(chunk);
            Ok(())
        });
        copied.is_ok()
    }
}
