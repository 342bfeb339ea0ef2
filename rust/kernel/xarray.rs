// SPDX-License-Identifier: GPL-2.0

//! The kernel's XArray as a table of reference-counted objects under allocated indices.
//!
//! A driver that hands out small integers naming its objects (an RDMA device's STag indices,
//! for instance) needs the index allocated, the object found by it from any context, and a
//! removal after which no lookup finds it. [`XArray`] is that, over `struct xarray` with
//! `XA_FLAGS_ALLOC1` (index 0 is never handed out): it holds one [`Arc`] reference per entry,
//! a lookup returns a new reference taken under the array's lock, and a removal gives the
//! array's reference back. Allocation starts its search where the caller says
//! (`xa_alloc_cyclic`), so indices can be made hard to predict.
//!
//! Where lookups run decides how the lock is taken, a type parameter: [`Bh`] (the default;
//! lookups may run in softirq context, `XA_FLAGS_LOCK_BH`) or [`Irq`] (lookups may run with
//! interrupts disabled, `XA_FLAGS_LOCK_IRQ`, the lock taken with `irqsave`).
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
use core::{ffi::c_void, marker::PhantomData, ops::RangeInclusive};

mod private {
    pub trait Sealed {}
}

/// How an [`XArray`]'s lock is taken: [`Bh`] or [`Irq`].
///
/// # Safety
///
/// The functions are the XArray functions of one locking flavour, matching the flags `init`
/// sets; `lock` and `unlock` take and release the array's lock, `unlock` given what `lock`
/// returned.
pub unsafe trait LockContext: private::Sealed {
    #[doc(hidden)]
    /// # Safety
    ///
    /// `xa` is valid for writes.
    unsafe fn init(xa: *mut bindings::xarray);
    #[doc(hidden)]
    /// # Safety
    ///
    /// `xa` was initialised by `init`; `id` and `next` are valid for writes.
    #[allow(clippy::too_many_arguments)]
    unsafe fn alloc_cyclic(
        xa: *mut bindings::xarray,
        id: *mut u32,
        entry: *mut c_void,
        min: u32,
        max: u32,
        next: *mut u32,
        gfp: bindings::gfp_t,
    ) -> i32;
    #[doc(hidden)]
    /// # Safety
    ///
    /// `xa` was initialised by `init`.
    unsafe fn insert(
        xa: *mut bindings::xarray,
        index: c_ulong,
        entry: *mut c_void,
        gfp: bindings::gfp_t,
    ) -> i32;
    #[doc(hidden)]
    /// # Safety
    ///
    /// `xa` was initialised by `init`.
    unsafe fn erase(xa: *mut bindings::xarray, index: c_ulong) -> *mut c_void;
    #[doc(hidden)]
    /// # Safety
    ///
    /// `xa` was initialised by `init`; the lock is released with `unlock`.
    unsafe fn lock(xa: *mut bindings::xarray) -> c_ulong;
    #[doc(hidden)]
    /// # Safety
    ///
    /// The lock of `xa` is held, taken by `lock`, which returned `flags`.
    unsafe fn unlock(xa: *mut bindings::xarray, flags: c_ulong);
}

/// Lookups may run in softirq context: the lock disables bottom halves.
pub struct Bh;

/// Lookups may run with interrupts disabled: the lock disables interrupts.
pub struct Irq;

impl private::Sealed for Bh {}
impl private::Sealed for Irq {}

// SAFETY: The `_bh` functions, and the flags for them.
unsafe impl LockContext for Bh {
    unsafe fn init(xa: *mut bindings::xarray) {
        // SAFETY: The caller's promise.
        unsafe { bindings::xa_init_alloc1_bh(xa) }
    }
    unsafe fn alloc_cyclic(
        xa: *mut bindings::xarray,
        id: *mut u32,
        entry: *mut c_void,
        min: u32,
        max: u32,
        next: *mut u32,
        gfp: bindings::gfp_t,
    ) -> i32 {
        // SAFETY: The caller's promise.
        unsafe { bindings::xa_alloc_cyclic_bh(xa, id, entry, min, max, next, gfp) }
    }
    unsafe fn insert(
        xa: *mut bindings::xarray,
        index: c_ulong,
        entry: *mut c_void,
        gfp: bindings::gfp_t,
    ) -> i32 {
        // SAFETY: The caller's promise.
        unsafe { bindings::xa_insert_bh(xa, index, entry, gfp) }
    }
    unsafe fn erase(xa: *mut bindings::xarray, index: c_ulong) -> *mut c_void {
        // SAFETY: The caller's promise.
        unsafe { bindings::xa_erase_bh(xa, index) }
    }
    unsafe fn lock(xa: *mut bindings::xarray) -> c_ulong {
        // SAFETY: The caller's promise.
        unsafe { bindings::xa_lock_bh(xa) };
        0
    }
    unsafe fn unlock(xa: *mut bindings::xarray, _flags: c_ulong) {
        // SAFETY: The caller's promise.
        unsafe { bindings::xa_unlock_bh(xa) }
    }
}

// SAFETY: The `_irq` functions, and the flags for them; the lock is taken with `irqsave`.
unsafe impl LockContext for Irq {
    unsafe fn init(xa: *mut bindings::xarray) {
        // SAFETY: The caller's promise.
        unsafe { bindings::xa_init_alloc1_irq(xa) }
    }
    unsafe fn alloc_cyclic(
        xa: *mut bindings::xarray,
        id: *mut u32,
        entry: *mut c_void,
        min: u32,
        max: u32,
        next: *mut u32,
        gfp: bindings::gfp_t,
    ) -> i32 {
        // SAFETY: The caller's promise.
        unsafe { bindings::xa_alloc_cyclic_irq(xa, id, entry, min, max, next, gfp) }
    }
    unsafe fn insert(
        xa: *mut bindings::xarray,
        index: c_ulong,
        entry: *mut c_void,
        gfp: bindings::gfp_t,
    ) -> i32 {
        // SAFETY: The caller's promise.
        unsafe { bindings::xa_insert_irq(xa, index, entry, gfp) }
    }
    unsafe fn erase(xa: *mut bindings::xarray, index: c_ulong) -> *mut c_void {
        // SAFETY: The caller's promise.
        unsafe { bindings::xa_erase_irq(xa, index) }
    }
    unsafe fn lock(xa: *mut bindings::xarray) -> c_ulong {
        // SAFETY: The caller's promise.
        unsafe { bindings::xa_lock_irqsave(xa) }
    }
    unsafe fn unlock(xa: *mut bindings::xarray, flags: c_ulong) {
        // SAFETY: The caller's promise.
        unsafe { bindings::xa_unlock_irqrestore(xa, flags) }
    }
}

/// A table of `Arc<T>` under indices it allocates.
///
/// # Invariants
///
/// `xa` is an XArray initialised by `L::init`; every entry in it is a pointer from
/// `Arc::<T>::into_foreign`, whose reference the array owns.
#[pin_data(PinnedDrop)]
pub struct XArray<T: Send + Sync + 'static, L: LockContext = Bh> {
    #[pin]
    xa: Opaque<bindings::xarray>,
    _p: PhantomData<(Arc<T>, L)>,
}

// SAFETY: The array holds `Arc<T>`s, which may move between threads when `T: Send + Sync`;
// the XArray itself is used through its own lock.
unsafe impl<T: Send + Sync + 'static, L: LockContext> Send for XArray<T, L> {}
// SAFETY: Every operation takes the XArray's lock (or uses its RCU-safe C functions), so
// shared references may be used from several threads at once.
unsafe impl<T: Send + Sync + 'static, L: LockContext> Sync for XArray<T, L> {}

impl<T: Send + Sync + 'static, L: LockContext> XArray<T, L> {
    /// An empty table.
    pub fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes; `xa_init_flags` initialises all of it.
            xa <- Opaque::ffi_init(|slot| unsafe { L::init(slot) }),
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
            L::alloc_cyclic(
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

    /// Enters `value` under `index` (not 0). `EBUSY` if the index is taken, `ENOMEM` when
    /// memory is short.
    pub fn insert(&self, index: u32, value: Arc<T>, flags: Flags) -> Result {
        if index == 0 {
            return Err(EINVAL);
        }
        let entry = value.into_foreign();
        // SAFETY: `xa` is initialised (type invariant); `entry` is an `Arc` pointer (aligned,
        // so not an internal XArray entry).
        let ret = unsafe {
            L::insert(
                self.xa(),
                index as c_ulong,
                entry.cast_mut(),
                flags.as_raw(),
            )
        };
        if ret < 0 {
            // SAFETY: The array did not take `entry`: the reference is still ours.
            drop(unsafe { Arc::<T>::from_foreign(entry) });
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: The array owns the reference of `entry` now.
        Ok(())
    }

    /// The object under `index`, with a reference of its own.
    pub fn get(&self, index: u32) -> Option<Arc<T>> {
        // SAFETY: `xa` is initialised (type invariant).
        let flags = unsafe { L::lock(self.xa()) };
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
        unsafe { L::unlock(self.xa(), flags) };
        found
    }

    /// The object at the lowest index of `from` or above, with its index and a reference of
    /// its own: `find(0)`, then `find(i + 1)` after index `i`, visits once each object that
    /// stays in the table meanwhile.
    pub fn find(&self, from: u32) -> Option<(u32, Arc<T>)> {
        let mut index = from as c_ulong;
        // SAFETY: `xa` is initialised (type invariant).
        let flags = unsafe { L::lock(self.xa()) };
        // SAFETY: As above; `index` is valid for writes.
        let entry = unsafe { bindings::xa_find_present(self.xa(), &mut index) };
        let found = match u32::try_from(index) {
            Ok(index) if !entry.is_null() => {
                // SAFETY: As in `get`.
                let borrowed = unsafe { Arc::<T>::borrow(entry) };
                Some((index, Arc::from(borrowed)))
            }
            _ => None,
        };
        // SAFETY: Locked above.
        unsafe { L::unlock(self.xa(), flags) };
        found
    }

    /// Takes the object under `index` out of the table; later lookups do not find it.
    pub fn remove(&self, index: u32) -> Option<Arc<T>> {
        // SAFETY: `xa` is initialised (type invariant).
        let entry = unsafe { L::erase(self.xa(), index as c_ulong) };
        if entry.is_null() {
            return None;
        }
        // SAFETY: The entry was an `Arc` pointer the array owned a reference for (type
        // invariant); erased, the reference is ours.
        Some(unsafe { Arc::<T>::from_foreign(entry) })
    }
}

#[pinned_drop]
impl<T: Send + Sync + 'static, L: LockContext> PinnedDrop for XArray<T, L> {
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
            let erased = unsafe { L::erase(xa, index) };
            if !erased.is_null() {
                // SAFETY: An `Arc` pointer the array owned a reference for (type invariant).
                drop(unsafe { Arc::<T>::from_foreign(erased) });
            }
        }
        // SAFETY: Empty now, and nobody else uses it (we are being dropped).
        unsafe { bindings::xa_destroy(xa) };
    }
}
