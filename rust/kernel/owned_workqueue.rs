// SPDX-License-Identifier: GPL-2.0

//! A workqueue owned by a module, so that none of its work items runs after the module is
//! gone.
//!
//! Work items queued on the system workqueues run module code at any time; a module that
//! unloads while one is queued or running leaves the kernel to call freed code. An
//! [`OwnedQueue`] is allocated by the module and shut down by it after it has stopped
//! everything that queues work: [`OwnedQueue::shut_down`] refuses new work and destroys the
//! queue, which first runs what is queued to completion (`destroy_workqueue` drains it).
//!
//! C header: [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h)

use crate::{
    bindings,
    error::{code::ENOMEM, Result},
    str::CStr,
    workqueue::{Queue, RawWorkItem},
};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A workqueue of one's own.
///
/// # Invariants
///
/// `wq` is a workqueue from `alloc_workqueue`, not destroyed while `alive` is true,
/// `enqueuing` is not zero or `armed` is not zero; after [`OwnedQueue::shut_down`] it is
/// destroyed and never used.
pub struct OwnedQueue {
    wq: *mut bindings::workqueue_struct,
    alive: AtomicBool,
    /// Enqueue calls between their check of `alive` and the end of their use of `wq`.
    enqueuing: AtomicUsize,
    /// Delayed work items pending on `wq` (see [`crate::delayed_work`]), each counted from
    /// before it is queued until it starts running or is cancelled.
    armed: AtomicUsize,
}

// SAFETY: A workqueue is used from any thread; the fields are atomics or the queue itself.
unsafe impl Send for OwnedQueue {}
// SAFETY: As above.
unsafe impl Sync for OwnedQueue {}

impl OwnedQueue {
    /// Allocates an unbound workqueue named `name` (shown in `ps` as its workers' names).
    pub fn new(name: &'static CStr) -> Result<Self> {
        // SAFETY: The format is a `%s` and its argument a NUL-terminated string, as the
        // variadic `alloc_workqueue` takes them.
        let wq = unsafe {
            bindings::alloc_workqueue(
                crate::c_str!("%s").as_char_ptr(),
                bindings::wq_flags_WQ_UNBOUND,
                0,
                name.as_char_ptr(),
            )
        };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        // INVARIANT: A fresh queue, alive.
        Ok(Self {
            wq,
            alive: AtomicBool::new(true),
            enqueuing: AtomicUsize::new(0),
            armed: AtomicUsize::new(0),
        })
    }

    /// Queues `w`, unless the queue was shut down: then `None` (and `w` is dropped).
    pub fn enqueue<W, const ID: u64>(&self, w: W) -> Option<W::EnqueueOutput>
    where
        W: RawWorkItem<ID> + Send + 'static,
    {
        self.enqueuing.fetch_add(1, Ordering::SeqCst);
        let out = if self.alive.load(Ordering::SeqCst) {
            // SAFETY: `alive` was true after we counted ourselves in `enqueuing`, so
            // `shut_down` waits for us before it destroys the queue (the invariant).
            let queue = unsafe { Queue::from_raw(self.wq) };
            Some(queue.enqueue(w))
        } else {
            None
        };
        self.enqueuing.fetch_sub(1, Ordering::SeqCst);
        out
    }

    /// Calls `arm` with the queue, unless the queue was shut down: then `None`. `arm` queues
    /// delayed work and counts it in [`Self::armed_counter`] before it does.
    pub(crate) fn enqueue_delayed<R>(
        &self,
        arm: impl FnOnce(*mut bindings::workqueue_struct) -> R,
    ) -> Option<R> {
        self.enqueuing.fetch_add(1, Ordering::SeqCst);
        let out = if self.alive.load(Ordering::SeqCst) {
            // `alive` was true after we counted ourselves in: `shut_down` waits for us.
            Some(arm(self.wq))
        } else {
            None
        };
        self.enqueuing.fetch_sub(1, Ordering::SeqCst);
        out
    }

    /// The count of delayed work items pending on the queue.
    pub(crate) fn armed_counter(&self) -> &AtomicUsize {
        &self.armed
    }

    /// Refuses new work, waits for delayed work to leave its timers, runs what is queued to
    /// completion and destroys the queue. Call it after whatever queues work has stopped, and
    /// after cancelling delayed work not to wait for it; later calls do nothing.
    pub fn shut_down(&self) {
        if !self.alive.swap(false, Ordering::SeqCst) {
            return;
        }
        while self.enqueuing.load(Ordering::SeqCst) != 0 {
            core::hint::spin_loop();
        }
        // A timer that fires queues its work on `wq`: wait until none is left.
        while self.armed.load(Ordering::SeqCst) != 0 {
            // SAFETY: Sleeping is allowed here: destroying a workqueue sleeps too.
            unsafe { bindings::msleep(10) };
        }
        // SAFETY: No enqueue can reach the queue any more (`alive` is false and none is in
        // flight); it was allocated by `new` and is destroyed once, here.
        unsafe { bindings::destroy_workqueue(self.wq) };
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        self.shut_down();
    }
}
