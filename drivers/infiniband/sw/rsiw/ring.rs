// SPDX-License-Identifier: GPL-2.0

//! A fixed-size ring of work requests, for the queues of kernel consumers (a QP's send and
//! receive queues, a shared receive queue): allocated at creation, so posting never allocates.

use kernel::prelude::*;

/// A fixed-size ring of work requests.
pub(crate) struct Ring<T: Copy> {
    slots: KVec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T: Copy> Ring<T> {
    pub(crate) fn new(n: u32) -> Result<Self> {
        let mut slots = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        for _ in 0..n {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            slots,
            head: 0,
            len: 0,
        })
    }

    pub(crate) fn push(&mut self, v: T) -> Result {
        let cap = self.slots.len();
        if self.len == cap {
            return Err(ENOMEM);
        }
        let at = wrap(self.head + self.len, cap);
        if let Some(slot) = self.slots.get_mut(at) {
            *slot = Some(v);
        }
        self.len += 1;
        Ok(())
    }

    pub(crate) fn peek(&self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        *self.slots.get(self.head)?
    }

    /// The number of entries queued.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn pop(&mut self) -> Option<T> {
        let v = self.peek()?;
        if let Some(slot) = self.slots.get_mut(self.head) {
            *slot = None;
        }
        self.head = wrap(self.head + 1, self.slots.len());
        self.len -= 1;
        Some(v)
    }
}

/// The slot of position `at` (below twice `cap`) in a ring of `cap` slots. A subtraction, not
/// `%`: no division, and no panic path for a zero `cap` (objtool does not know the panic
/// function of a remainder by zero to be `noreturn`).
pub(crate) fn wrap(at: usize, cap: usize) -> usize {
    at.checked_sub(cap).unwrap_or(at)
}
