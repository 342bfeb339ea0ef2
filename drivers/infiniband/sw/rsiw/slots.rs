// SPDX-License-Identifier: GPL-2.0

//! A small unordered collection with fallible insertion, for the device's lists of QPs, CQs,
//! listeners and pending connections (the kernel's `KVec` of 6.12 cannot remove elements).

use kernel::prelude::*;

/// Values in reusable slots.
pub(crate) struct Slots<T>(KVec<Option<T>>);

impl<T> Slots<T> {
    /// An empty collection.
    pub(crate) const fn new() -> Self {
        Self(KVec::new())
    }

    /// Adds `v`, reusing a free slot if there is one, else allocating with `flags`.
    pub(crate) fn insert(&mut self, v: T, flags: kernel::alloc::Flags) -> Result {
        match self.0.iter_mut().find(|s| s.is_none()) {
            Some(slot) => *slot = Some(v),
            None => self.0.push(Some(v), flags)?,
        }
        Ok(())
    }

    /// Takes out the first value `f` accepts.
    pub(crate) fn take_where(&mut self, f: impl Fn(&T) -> bool) -> Option<T> {
        self.0
            .iter_mut()
            .find(|s| s.as_ref().is_some_and(&f))
            .and_then(Option::take)
    }

    /// The values.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.0.iter().filter_map(Option::as_ref)
    }

    /// Takes every value out.
    pub(crate) fn take_all(&mut self) -> Self {
        Self(core::mem::take(&mut self.0))
    }
}
