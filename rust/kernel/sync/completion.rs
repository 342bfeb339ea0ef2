// SPDX-License-Identifier: GPL-2.0

//! Completions: one thread waits until another says that something is done.
//!
//! A driver waits for a connection to be set up, for a TX thread to stop, for the last user
//! of an object to let go. `struct completion` counts `complete` calls, so one that comes
//! before the wait is not lost.
//!
//! C header: [`include/linux/completion.h`](srctree/include/linux/completion.h)

use crate::{bindings, prelude::*, time::Jiffies, types::Opaque};

/// A completion.
///
/// # Examples
///
/// ```
/// use kernel::sync::{Arc, Completion};
///
/// let done = Arc::pin_init(Completion::new(), GFP_KERNEL)?;
/// done.complete();
/// done.wait();
/// # Ok::<(), Error>(())
/// ```
///
/// # Invariants
///
/// `inner` was initialised with `init_completion` and is pinned.
#[pin_data]
pub struct Completion {
    #[pin]
    inner: Opaque<bindings::completion>,
}

// SAFETY: A completion may be completed and waited on from any thread.
unsafe impl Send for Completion {}

// SAFETY: Every method takes `&self` and the C functions do their own locking.
unsafe impl Sync for Completion {}

impl Completion {
    /// A completion with nothing completed yet.
    pub fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `init_completion` initialises the pinned slot in place.
            inner <- Opaque::ffi_init(|slot| unsafe { bindings::init_completion(slot) }),
        })
    }

    /// Completes once: wakes one waiter, or lets the next wait pass.
    pub fn complete(&self) {
        // SAFETY: `inner` is initialised (type invariant).
        unsafe { bindings::complete(self.inner.get()) }
    }

    /// Completes for good: every current and future wait passes.
    pub fn complete_all(&self) {
        // SAFETY: `inner` is initialised (type invariant).
        unsafe { bindings::complete_all(self.inner.get()) }
    }

    /// Waits (uninterruptibly) until completed, consuming one completion.
    pub fn wait(&self) {
        // SAFETY: `inner` is initialised (type invariant).
        unsafe { bindings::wait_for_completion(self.inner.get()) }
    }

    /// Waits at most `timeout` jiffies; returns whether it was completed (and consumed one).
    pub fn wait_timeout(&self, timeout: Jiffies) -> bool {
        // SAFETY: `inner` is initialised (type invariant).
        unsafe { bindings::wait_for_completion_timeout(self.inner.get(), timeout) != 0 }
    }

    /// Consumes one completion if there is one, without waiting.
    pub fn try_wait(&self) -> bool {
        // SAFETY: `inner` is initialised (type invariant).
        unsafe { bindings::try_wait_for_completion(self.inner.get()) }
    }
}

#[cfg(CONFIG_KUNIT)]
mod tests {
    use super::Completion;
    use crate::{
        kunit::suite::Test, kunit_expect, prelude::*, sync::Arc, time::msecs_to_jiffies, workqueue,
    };

    fn completions_are_counted(test: &mut Test) -> Result {
        let c = KBox::pin_init(Completion::new(), GFP_KERNEL)?;
        kunit_expect!(test, !c.try_wait());
        c.complete();
        c.complete();
        kunit_expect!(test, c.try_wait());
        kunit_expect!(test, c.wait_timeout(1));
        kunit_expect!(test, !c.try_wait());
        Ok(())
    }

    fn wait_times_out(test: &mut Test) -> Result {
        let c = KBox::pin_init(Completion::new(), GFP_KERNEL)?;
        kunit_expect!(test, !c.wait_timeout(msecs_to_jiffies(20)));
        Ok(())
    }

    fn completed_from_another_thread(test: &mut Test) -> Result {
        let started = Arc::pin_init(Completion::new(), GFP_KERNEL)?;
        let done = Arc::pin_init(Completion::new(), GFP_KERNEL)?;
        let (s, d) = (started.clone(), done.clone());
        workqueue::system().try_spawn(GFP_KERNEL, move || {
            s.complete();
            d.complete();
        })?;
        kunit_expect!(test, started.wait_timeout(msecs_to_jiffies(5000)));
        kunit_expect!(test, done.wait_timeout(msecs_to_jiffies(5000)));
        Ok(())
    }

    fn complete_all_lets_every_wait_pass(test: &mut Test) -> Result {
        let c = KBox::pin_init(Completion::new(), GFP_KERNEL)?;
        c.complete_all();
        for _ in 0..3 {
            kunit_expect!(test, c.wait_timeout(1));
        }
        Ok(())
    }

    crate::kunit_suite!(
        rust_completion,
        [
            completions_are_counted,
            wait_times_out,
            completed_from_another_thread,
            complete_all_lets_every_wait_pass
        ]
    );
}
