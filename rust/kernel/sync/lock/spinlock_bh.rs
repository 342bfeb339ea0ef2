// SPDX-License-Identifier: GPL-2.0

//! A spinlock that also disables bottom halves (softirqs) while held.
//!
//! Data shared between process context and a softirq — a socket's `sk_data_ready` callback, a
//! timer, NAPI — needs this: with a plain [`SpinLock`](super::spinlock::SpinLock), a softirq
//! that interrupts the holder on the same CPU and takes the lock deadlocks (lockdep reports it
//! as an inconsistent lock state). Taken from a softirq itself, `spin_lock_bh` is fine too.
//!
//! C header: [`include/linux/spinlock.h`](srctree/include/linux/spinlock.h)

use super::Guard;
use crate::bindings;
use core::marker::PhantomData;

/// Creates a [`SpinLockBh`] initialiser with the given name and a newly-created lock class.
///
/// It uses the name if one is given, otherwise it generates one based on the file name and
/// line number.
#[macro_export]
macro_rules! new_spinlock_bh {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::sync::SpinLockBh::new(
            $inner, $crate::optional_name!($($name)?), $crate::static_lock_class!())
    };
}
pub use new_spinlock_bh;

/// A spinlock that disables bottom halves while held; see the module documentation.
///
/// # Examples
///
/// ```
/// use kernel::sync::{new_spinlock_bh, SpinLockBh};
///
/// let lock = KBox::pin_init(new_spinlock_bh!(0u32), GFP_KERNEL)?;
/// *lock.lock() += 1;
/// assert_eq!(*lock.lock(), 1);
/// # Ok::<(), Error>(())
/// ```
pub type SpinLockBh<T> = super::Lock<T, SpinLockBhBackend>;

/// A kernel `spinlock_t` taken with `spin_lock_bh`.
pub struct SpinLockBhBackend;

// SAFETY: The underlying kernel `spinlock_t` object ensures mutual exclusion. `relock` uses the
// default implementation that always calls the same locking method.
unsafe impl super::Backend for SpinLockBhBackend {
    type State = bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const crate::ffi::c_char,
        key: *mut bindings::lock_class_key,
    ) {
        // SAFETY: The safety requirements ensure that `ptr` is valid for writes, and `name` and
        // `key` are valid for read indefinitely.
        unsafe { bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: The safety requirements of this function ensure that `ptr` points to valid
        // memory, and that it has been initialised before.
        unsafe { bindings::spin_lock_bh(ptr) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: The safety requirements of this function ensure that `ptr` is valid and that
        // the caller is the owner of the spinlock, taken by `lock` above.
        unsafe { bindings::spin_unlock_bh(ptr) }
    }
}

/// Proof that bottom halves are disabled on this CPU for `'a`: a [`SpinLockBh`] is held that
/// long. [`SpinLockBh::lock_in_bh`] takes it.
///
/// # Invariants
///
/// For all of `'a`, the current thread holds a [`SpinLockBh`] (so bottom halves are disabled
/// and it does not migrate). The token stays on this thread (it is neither `Send` nor `Sync`).
#[derive(Clone, Copy)]
pub struct BhDisabled<'a>(PhantomData<(&'a (), *mut ())>);

impl<T: ?Sized> Guard<'_, T, SpinLockBhBackend> {
    /// The protected data, with the proof that bottom halves stay disabled while it is
    /// borrowed.
    pub fn with_bh_disabled(&mut self) -> (&mut T, BhDisabled<'_>) {
        // INVARIANT: The guard holds its lock, taken with `spin_lock_bh`, while it is borrowed.
        (&mut **self, BhDisabled(PhantomData))
    }
}

impl<T: ?Sized> SpinLockBh<T> {
    /// Takes the lock where bottom halves are disabled already (`_bh`), as `spin_lock` does in
    /// C within a `spin_lock_bh` section: disabling them again, and checking for pending
    /// softirqs when they are enabled again, would be wasted work.
    #[inline]
    pub fn lock_in_bh<'a>(&'a self, _bh: BhDisabled<'a>) -> NestedGuard<'a, T> {
        // SAFETY: The lock is initialised (it was created through `Lock::new`).
        unsafe { bindings::spin_lock(self.state.get()) };
        // INVARIANT: Taken just above, with bottom halves disabled for all of `'a`.
        NestedGuard {
            lock: self,
            _not_send: PhantomData,
        }
    }
}

/// The guard of a [`SpinLockBh`] taken with [`SpinLockBh::lock_in_bh`]; releases it when
/// dropped.
///
/// # Invariants
///
/// The current thread holds `lock`, taken with `spin_lock` while bottom halves are disabled,
/// which they stay for the guard's lifetime.
pub struct NestedGuard<'a, T: ?Sized> {
    lock: &'a SpinLockBh<T>,
    _not_send: PhantomData<*mut ()>,
}

impl<T: ?Sized> core::ops::Deref for NestedGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: The lock is held (type invariant), so the data is ours to use.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> core::ops::DerefMut for NestedGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: The lock is held (type invariant), so the data is ours to use.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for NestedGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: The lock is held, taken with `spin_lock` (type invariant).
        unsafe { bindings::spin_unlock(self.lock.state.get()) };
    }
}
