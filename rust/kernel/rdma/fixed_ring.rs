// SPDX-License-Identifier: GPL-2.0

//! A first-in first-out queue of fixed capacity, allocated once.
//!
//! RDMA queues are sized by their owner when it is created: the consumer abstractions queue
//! connection events and work completions from RDMA core callbacks, and a provider queues a
//! kernel consumer's work requests and completions as it posts them. Allocating there would add
//! a failure path to every event and every post, often in atomic context; the ring is allocated
//! up front instead, and a full ring is an error its owner reports.

use crate::{alloc::Flags, prelude::*};

/// A FIFO of at most `capacity` values.
pub struct FixedRing<T> {
    slots: KVec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T> FixedRing<T> {
    /// An empty ring for `capacity` values. A ring of capacity 0 refuses every value.
    pub fn new(capacity: usize, flags: Flags) -> Result<Self> {
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
    pub fn push(&mut self, value: T) -> core::result::Result<(), T> {
        let capacity = self.slots.len();
        if self.len == capacity {
            return Err(value);
        }
        match self.slots.get_mut(wrap(self.head + self.len, capacity)) {
            Some(slot) => {
                *slot = Some(value);
                self.len += 1;
                Ok(())
            }
            None => Err(value),
        }
    }

    /// The oldest value, left in the ring.
    pub fn peek(&self) -> Option<&T> {
        if self.len == 0 {
            return None;
        }
        self.slots.get(self.head)?.as_ref()
    }

    /// Removes the oldest value.
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let value = self.slots.get_mut(self.head)?.take();
        self.head = wrap(self.head + 1, self.slots.len());
        self.len -= 1;
        value
    }

    /// The number of values in the ring.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the ring holds no value.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The slot of position `at` (below twice `capacity`) in a ring of `capacity` slots. A
/// subtraction rather than `%`: a remainder leaves a panic path for a zero divisor, whose panic
/// function objtool does not know to be `noreturn` (it warns where one ends a function).
fn wrap(at: usize, capacity: usize) -> usize {
    at.checked_sub(capacity).unwrap_or(at)
}
