// SPDX-License-Identifier: GPL-2.0

//! Work items that run after a delay, on a module's [`OwnedQueue`]: deadlines and retries
//! that must not hold a worker while they wait.
//!
//! A [`DelayedWork`] is a field of a reference-counted work item, bound to one owned queue
//! when it is made. [`DelayedWork::run_after`] arms it with an `Arc` of its item, which the
//! queue keeps until the item runs (or until [`DelayedWork::cancel`] takes it back), as
//! [`OwnedQueue::enqueue`] does for immediate work. Armed again before it ran, it runs once,
//! at the new time.
//!
//! An item may wait on its timer after everything else of its module stopped; its queue then
//! counts it, and [`OwnedQueue::shut_down`] waits for every counted item to leave its timer
//! before it destroys the queue, so that no timer ever queues work on a destroyed queue.
//!
//! C header: [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h)

use crate::{
    bindings,
    owned_workqueue::OwnedQueue,
    prelude::*,
    str::CStr,
    sync::{Arc, LockClassKey},
    time::{msecs_to_jiffies, Msecs},
    types::Opaque,
    workqueue::{HasWork, RawWorkItem, Work, WorkItem, WorkItemPointer},
};
use core::{marker::PhantomData, sync::atomic::Ordering};

/// A `struct delayed_work` of the item `T`, bound to one [`OwnedQueue`].
///
/// # Invariants
///
/// `dwork` was initialised with the trampoline `run::<T, ID>` as its function; each time it
/// is pending (on its timer or its queue) it holds one `Arc<T>` made with `Arc::into_raw`, for
/// the item that contains it, and counts once in `queue`'s armed items; it is only ever queued
/// on `queue`.
#[pin_data]
#[repr(C)]
pub struct DelayedWork<T: ?Sized, const ID: u64 = 0> {
    /// First, so that a pointer to the `work_struct` in it is one to this field too.
    #[pin]
    dwork: Opaque<bindings::delayed_work>,
    queue: Arc<OwnedQueue>,
    _inner: PhantomData<T>,
}

// SAFETY: Kernel work items are usable from any thread; `T` is not contained.
unsafe impl<T: ?Sized, const ID: u64> Send for DelayedWork<T, ID> {}
// SAFETY: As above.
unsafe impl<T: ?Sized, const ID: u64> Sync for DelayedWork<T, ID> {}

/// Declares that a type has a [`DelayedWork<T, ID>`] field; implemented with
/// [`impl_has_delayed_work!`], which also implements [`HasWork`] for the `work_struct` in it.
///
/// # Safety
///
/// `OFFSET` is the offset of a field of type [`DelayedWork<T, ID>`] in `Self`, and
/// [`HasWork::OFFSET`] is the same offset.
pub unsafe trait HasDelayedWork<T, const ID: u64 = 0>: HasWork<T, ID> {
    /// The offset of the [`DelayedWork<T, ID>`] field.
    const OFFSET: usize;

    /// The [`DelayedWork<T, ID>`] field.
    fn delayed_work(&self) -> &DelayedWork<T, ID>;
}

/// Implements [`HasDelayedWork`] and [`HasWork`] for a type with a [`DelayedWork`] field:
/// `impl_has_delayed_work! { impl HasDelayedWork<Self, 1> for Item { self.deadline } }`.
#[macro_export]
macro_rules! impl_has_delayed_work {
    ($(impl$({$($generics:tt)*})?
       HasDelayedWork<$work_type:ty $(, $id:tt)?>
       for $self:ty
       { self.$field:ident }
    )*) => {$(
        // SAFETY: The offset is that of the field, whose type `delayed_work` checks; the
        // `DelayedWork` is `repr(C)` with the `delayed_work` first, whose first member is its
        // `work_struct`, which a `Work` (`repr(transparent)`) is.
        unsafe impl$(<$($generics)+>)? $crate::workqueue::HasWork<$work_type $(, $id)?>
            for $self
        {
            const OFFSET: usize = ::core::mem::offset_of!(Self, $field) as usize;
        }
        // SAFETY: As above.
        unsafe impl$(<$($generics)+>)? $crate::delayed_work::HasDelayedWork<$work_type $(, $id)?>
            for $self
        {
            const OFFSET: usize = ::core::mem::offset_of!(Self, $field) as usize;

            fn delayed_work(&self) -> &$crate::delayed_work::DelayedWork<$work_type $(, $id)?> {
                &self.$field
            }
        }
    )*};
}
pub use impl_has_delayed_work;

/// Makes a [`DelayedWork`] on `queue`, with a lockdep class of its own for each call site.
#[macro_export]
macro_rules! new_delayed_work {
    ($queue:expr $(, $name:literal)?) => {
        $crate::delayed_work::DelayedWork::new(
            $queue,
            $crate::optional_name!($($name)?),
            $crate::static_lock_class!(),
        )
    };
}
pub use new_delayed_work;

impl<T, const ID: u64> DelayedWork<T, ID>
where
    T: WorkItem<ID, Pointer = Arc<T>> + HasDelayedWork<T, ID> + Send + Sync + 'static,
{
    /// A delayed work that runs `T`'s [`WorkItem::run`] on `queue`.
    pub fn new(
        queue: Arc<OwnedQueue>,
        name: &'static CStr,
        key: &'static LockClassKey,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            // INVARIANT: `run::<T, ID>` is the function; nothing is pending yet.
            dwork <- Opaque::ffi_init(|slot| {
                // SAFETY: `slot` is the field's memory, valid for writes; `run` may be a work
                // function for this item (see its safety comment), the name and key are
                // static.
                unsafe {
                    bindings::init_delayed_work_with_key(
                        slot,
                        Some(run::<T, ID>),
                        name.as_char_ptr(),
                        key.as_ptr(),
                    )
                }
            }),
            queue,
            _inner: PhantomData,
        })
    }

    /// Runs `item` — the item this field belongs to — `delay` milliseconds from now; if it was
    /// waiting already, it now runs at this time instead (and `item` is dropped). Returns
    /// whether it will run: `false` if the queue was shut down.
    pub fn run_after(item: Arc<T>, delay: Msecs) -> bool {
        let queue = item.delayed_work().queue.clone();
        let jiffies = msecs_to_jiffies(delay);
        let counter = queue.armed_counter();
        queue
            .enqueue_delayed(|wq| {
                counter.fetch_add(1, Ordering::SeqCst);
                // A `Work` in a `DelayedWork` (the `HasWork` offset): its `work_struct` is the
                // first member of the `delayed_work`.
                let queue_it = |work_ptr: *mut bindings::work_struct| {
                    let dwork = work_ptr.cast::<bindings::delayed_work>();
                    // SAFETY: `dwork` is the initialised `delayed_work` of a live item; `wq` is
                    // alive for the call (`enqueue_delayed`) and the only queue this work is
                    // ever queued on (the invariant).
                    !unsafe {
                        bindings::mod_delayed_work_on(
                            bindings::wq_misc_consts_WORK_CPU_UNBOUND as _,
                            wq,
                            dwork,
                            jiffies,
                        )
                    }
                };
                // SAFETY: `queue_it` returns `true` only if `mod_delayed_work_on` queued the
                // item afresh (it returns `false` then), which consumes the pointer; `false`
                // when the item was pending already, the one case the contract allows. The
                // pointer stays valid until the work runs (`__enqueue`'s promise).
                let out = unsafe { item.__enqueue(queue_it) };
                if out.is_err() {
                    // INVARIANT: It was pending, and counted, already.
                    counter.fetch_sub(1, Ordering::SeqCst);
                }
            })
            .is_some()
    }

    /// Takes the item off its timer if it is waiting there or on its queue, and returns the
    /// reference it held. `None` if it was not pending (it may be running).
    pub fn cancel(&self) -> Option<Arc<T>> {
        // SAFETY: `dwork` is initialised.
        if !unsafe { bindings::cancel_delayed_work(self.dwork.get()) } {
            return None;
        }
        self.queue.armed_counter().fetch_sub(1, Ordering::SeqCst);
        // SAFETY: The work was pending and is not any more: the `Arc` it held (the invariant)
        // is ours. This field is the `HasDelayedWork` field of its item, so subtracting the
        // offset gives the pointer `Arc::into_raw` returned.
        let item = unsafe {
            (self as *const Self)
                .cast::<u8>()
                .sub(<T as HasDelayedWork<T, ID>>::OFFSET)
                .cast::<T>()
        };
        // SAFETY: See above.
        Some(unsafe { Arc::from_raw(item) })
    }
}

/// The work function of a [`DelayedWork`]: takes the item out of its queue's armed count,
/// then runs it as any `Arc` work item runs.
///
/// # Safety
///
/// `ptr` is the `work_struct` of a pending [`DelayedWork<T, ID>`] field of a `T`.
unsafe extern "C" fn run<T, const ID: u64>(ptr: *mut bindings::work_struct)
where
    T: WorkItem<ID, Pointer = Arc<T>> + HasDelayedWork<T, ID> + Send + Sync + 'static,
{
    // SAFETY: `ptr` is the work of a `DelayedWork<T, ID>` field (the `HasWork` offset);
    // the item is alive, as the pending work holds a reference to it.
    let item = unsafe { T::work_container_of(ptr.cast::<Work<T, ID>>()) };
    // SAFETY: As above.
    let counter = unsafe { &*item }.delayed_work().queue.armed_counter();
    // The queue is not destroyed before this work finishes running (`destroy_workqueue`
    // drains it), so it may stop waiting now.
    counter.fetch_sub(1, Ordering::SeqCst);
    // SAFETY: `ptr` is the `work_struct` of a pending `Arc<T>` work item of `T` for `ID`,
    // which is what this function requires.
    unsafe { <Arc<T> as WorkItemPointer<ID>>::run(ptr) };
}
