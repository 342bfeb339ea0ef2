// SPDX-License-Identifier: GPL-2.0

//! The kernel's XArray as a table of reference-counted objects under allocated indices.
//!
//! A driver that hands out small integers naming its objects (an RDMA device's STag indices,
//! for instance) needs the index allocated, the object found by it from any context, and a
//! removal after which no lookup finds it. [`XArray`] is that, over `struct xarray` with
//! `XA_FLAGS_ALLOC1` (index 0 is never handed out) and `XA_FLAGS_LOCK_BH` (lookups may run in
//! softirq context): it holds one [`Arc`] reference per entry, a lookup returns a new
//! reference taken under the array's lock, and a removal gives the array's reference back.
//! Allocation starts its search where the caller says (`xa_alloc_cyclic`), so indices can be
//! made hard to predict.
//!
//! C header: [`include/linux/xarray.h`](srctree/include/linux/xarray.h)

use crate::{
    alloc::Flags,
    bindings,
    error::Result,
    ffi::c_ulong,
    prelude::*,
    sync::Arc,
    types::{ForeignOwnable, Opaque},
};
use core::{marker::PhantomData, ops::RangeInclusive};

/// A table of `Arc<T>` under indices it allocates.
///
/// # Invariants
///
/// `xa` is an initialised XArray with `XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_BH`; every entry in it
/// is a pointer from `Arc::<T>::into_foreign`, whose reference the array owns.
#[pin_data(PinnedDrop)]
pub struct XArray<T: Send + Sync + 'static> {
    #[pin]
    xa: Opaque<bindings::xarray>,
    _p: PhantomData<Arc<T>>,
}

// SAFETY: The array holds `Arc<T>`s, which may move between threads when `T: Send + Sync`;
// the XArray itself is used through its own lock.
unsafe impl<T: Send + Sync + 'static> Send for XArray<T> {}
// SAFETY: Every operation takes the XArray's lock (or uses its RCU-safe C functions), so
// shared references may be used from several threads at once.
unsafe impl<T: Send + Sync + 'static> Sync for XArray<T> {}

impl<T: Send + Sync + 'static> XArray<T> {
    /// An empty table.
    pub fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes; `xa_init_flags` initialises all of it.
            xa <- Opaque::ffi_init(|slot| unsafe { bindings::xa_init_alloc1_bh(slot) }),
            _p: PhantomData,
        })
    }

    fn xa(&self) -> *mut bindings::xarray {
        self.xa.get()
    }

    /// Enters `value` under a free index in `range`, searching from `start` upwards and then
    /// from the bottom of the range (`xa_alloc_cyclic`); returns the index. `EBUSY` when the
    /// range is full, `ENOMEM` when memory is short (`flags` may sleep unless atomic).
    pub fn alloc(
        &self,
        value: Arc<T>,
        range: RangeInclusive<u32>,
        start: u32,
        flags: Flags,
    ) -> Result<u32> {
        let (min, max) = (*range.start(), *range.end());
        if min == 0 || min > max {
            return Err(EINVAL);
        }
        let mut next = start.clamp(min, max);
        let mut id = 0u32;
        let entry = value.into_foreign();
        // SAFETY: `xa` is initialised (type invariant); `id` and `next` are valid for writes;
        // `entry` is an `Arc` pointer (aligned, so not an internal XArray entry).
        let ret = unsafe {
            bindings::xa_alloc_cyclic_bh(
                self.xa(),
                &mut id,
                entry.cast_mut(),
                min,
                max,
                &mut next,
                flags.as_raw(),
            )
        };
        if ret < 0 {
            // SAFETY: The array did not take `entry`: the reference is still ours.
            drop(unsafe { Arc::<T>::from_foreign(entry) });
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: The array owns the reference of `entry` now.
        Ok(id)
    }

    /// The object under `index`, with a reference of its own.
    pub fn get(&self, index: u32) -> Option<Arc<T>> {
        // SAFETY: `xa` is initialised (type invariant).
        unsafe { bindings::xa_lock_bh(self.xa()) };
        // SAFETY: As above.
        let entry = unsafe { bindings::xa_load(self.xa(), index as c_ulong) };
        let found = if entry.is_null() {
            None
        } else {
            // SAFETY: Entries are `Arc` pointers whose reference the array owns (type
            // invariant), and the lock keeps it from being removed while we borrow it.
            let borrowed = unsafe { Arc::<T>::borrow(entry) };
            Some(Arc::from(borrowed))
        };
        // SAFETY: Locked above.
        unsafe { bindings::xa_unlock_bh(self.xa()) };
        found
    }

    /// Takes the object under `index` out of the table; later lookups do not find it.
    pub fn remove(&self, index: u32) -> Option<Arc<T>> {
        // SAFETY: `xa` is initialised (type invariant).
        let entry = unsafe { bindings::xa_erase_bh(self.xa(), index as c_ulong) };
        if entry.is_null() {
            return None;
        }
        // SAFETY: The entry was an `Arc` pointer the array owned a reference for (type
        // invariant); erased, the reference is ours.
        Some(unsafe { Arc::<T>::from_foreign(entry) })
    }
}

#[pinned_drop]
impl<T: Send + Sync + 'static> PinnedDrop for XArray<T> {
    fn drop(self: Pin<&mut Self>) {
        let xa = self.xa();
        loop {
            let mut index: c_ulong = 0;
            // SAFETY: `xa` is initialised (type invariant); `index` is valid for writes.
            let entry = unsafe { bindings::xa_find_present(xa, &mut index) };
            if entry.is_null() {
                break;
            }
            // SAFETY: As above; `index` holds the entry just found, which we erase.
            let erased = unsafe { bindings::xa_erase_bh(xa, index) };
            if !erased.is_null() {
                // SAFETY: An `Arc` pointer the array owned a reference for (type invariant).
                drop(unsafe { Arc::<T>::from_foreign(erased) });
            }
        }
        // SAFETY: Empty now, and nobody else uses it (we are being dropped).
        unsafe { bindings::xa_destroy(xa) };
    }
}
