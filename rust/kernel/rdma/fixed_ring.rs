// SPDX-License-Identifier: GPL-2.0

//! A first-in first-out queue of fixed capacity, allocated once.
//!
//! The consumer abstractions queue connection events and work completions from RDMA core
//! callbacks. Allocating there would add a failure path to every event; the ring is sized when
//! its owner is created instead, and a full ring is an error the owner reports.

use crate::{alloc::Flags, prelude::*};

/// A FIFO of at most `capacity` values.
pub(crate) struct FixedRing<T> {
    slots: KVec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T> FixedRing<T> {
    /// An empty ring for `capacity` values (at least one).
    pub(crate) fn new(capacity: usize, flags: Flags) -> Result<Self> {
        let capacity = capacity.max(1);
        let mut slots = KVec::with_capacity(capacity, flags)?;
        for _ in 0..capacity {
            slots.push(None, flags)?;
        }
        Ok(Self {
            slots,
            head: 0,
            len: 0,
        })
    }

    /// Appends `value`, or gives it back when the ring is full.
    pub(crate) fn push(&mut self, value: T) -> core::result::Result<(), T> {
        let capacity = self.slots.len();
        if self.len == capacity {
            return Err(value);
        }
        match self.slots.get_mut((self.head + self.len) % capacity) {
            Some(slot) => {
                *slot = Some(value);
                self.len += 1;
                Ok(())
            }
            None => Err(value),
        }
    }

    /// Removes the oldest value.
    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let value = self.slots.get_mut(self.head)?.take();
        self.head = (self.head + 1) % self.slots.len();
        self.len -= 1;
        value
    }

    /// Whether the ring holds no value.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
}
