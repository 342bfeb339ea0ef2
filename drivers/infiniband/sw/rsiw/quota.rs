// SPDX-License-Identifier: GPL-2.0

//! How many objects of a kind a device may have at once, and each object's place among them.
//!
//! A device counts its QPs, CQs and SRQs against limits (the design limits, or lower ones the
//! module was loaded with). An object takes its [`Place`] when it is created and gives it back
//! when the consumer destroys it ([`Place::leave`]), not when its last reference goes, which
//! may be later (a QP's work item, a connection): a consumer that destroyed one may create the
//! next at once. A place dropped without leaving (a creation that failed) is given back then.

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::{prelude::*, sync::Arc};

/// A device's count of one kind of object, and its limit.
pub(crate) struct Quota {
    taken: AtomicU32,
    max: u32,
}

impl Quota {
    /// A quota of `max` objects, none taken.
    pub(crate) fn new(max: u32) -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                taken: AtomicU32::new(0),
                max,
            },
            GFP_KERNEL,
        )?)
    }

    /// Takes a place for a new object; `ENOMEM` when all are taken.
    pub(crate) fn take(self: &Arc<Self>) -> Result<Place> {
        self.taken
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.max).then_some(n + 1)
            })
            .map_err(|_| ENOMEM)?;
        Ok(Place {
            quota: self.clone(),
            left: AtomicBool::new(false),
        })
    }

    /// The most objects there may be.
    pub(crate) fn max(&self) -> u32 {
        self.max
    }
}

/// One object's place in its [`Quota`].
pub(crate) struct Place {
    quota: Arc<Quota>,
    left: AtomicBool,
}

impl Place {
    /// The consumer destroyed the object: its place is given back (once, however often this
    /// is called).
    pub(crate) fn leave(&self) {
        if !self.left.swap(true, Ordering::Relaxed) {
            self.quota.taken.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.leave();
    }
}
