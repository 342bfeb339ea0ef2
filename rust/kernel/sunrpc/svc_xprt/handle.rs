// SPDX-License-Identifier: GPL-2.0

//! How a server transport's own asynchronous contexts reach it.
//!
//! A server transport runs code the RPC server does not call: the completion handler of its
//! queue pair, its connection events. That code needs the transport (to queue it for a thread,
//! to close it) but must not hold a reference on it: the last reference frees the transport,
//! and freeing it drains the queue pair, which waits for that very code.
//!
//! A [`SvcHandle`] reaches the transport without a reference: `xpo_free` revokes it before `T`
//! is dropped. A context that runs after that (a completion flushed while `T` drains its queue
//! pair) finds the transport gone and does nothing.

use super::{SvcTransport, SvcXprt};
use crate::{
    prelude::*,
    str::CStr,
    sync::{Arc, LockClassKey, Mutex},
};
use core::ptr::NonNull;

/// The lock class of every handle's lock, made outside the generic code: a static in a generic
/// function is one key, but its name is copied into every module that instantiates it, and
/// lockdep refuses one key under two names.
#[inline(never)]
fn lock_class() -> (&'static CStr, &'static LockClassKey) {
    (
        crate::c_str!("sunrpc::svc_xprt::SvcHandle"),
        crate::static_lock_class!(),
    )
}

/// The transport a handle reaches.
struct Target<T: SvcTransport>(NonNull<SvcXprt<T>>);

// SAFETY: Only `&SvcXprt<T>` is made from it, and `SvcXprt<T>` is `Sync`.
unsafe impl<T: SvcTransport> Send for Target<T> {}

/// Reaches a server transport of `T` until it is freed; see the module documentation.
///
/// # Invariants
///
/// While `xprt` holds a target, it is a live `SvcXprt<T>`: `xpo_free` revokes the handle
/// (under the lock, so after every [`SvcHandle::with`] in progress) before anything of the
/// transport goes.
#[pin_data]
pub struct SvcHandle<T: SvcTransport> {
    #[pin]
    xprt: Mutex<Option<Target<T>>>,
}

impl<T: SvcTransport> SvcHandle<T> {
    /// A handle on the transport at `xprt`.
    ///
    /// # Safety
    ///
    /// `xprt` is a `SvcXprt<T>` whose `svc_xprt` is initialised, that stays live until it
    /// calls [`SvcHandle::revoke`] on the handle.
    pub(super) unsafe fn new(xprt: NonNull<SvcXprt<T>>) -> Result<Arc<Self>> {
        let (name, key) = lock_class();
        // INVARIANT: Live until revoked (the caller's guarantee).
        Arc::pin_init(
            pin_init!(Self {
                xprt <- Mutex::new(Some(Target(xprt)), name, key),
            }),
            GFP_KERNEL,
        )
    }

    /// Runs `f` on the transport, or returns `None` if it was freed.
    ///
    /// The transport cannot be freed while `f` runs: freeing it waits for `f`. So `f` must not
    /// drop a reference to it (see [`SvcXprtRef`](super::SvcXprtRef)); the `SvcXprt` methods
    /// that do not sleep are what it is for.
    pub fn with<R>(&self, f: impl FnOnce(&SvcXprt<T>) -> R) -> Option<R> {
        let target = self.xprt.lock();
        let xprt = target.as_ref()?;
        // SAFETY: Live while the handle holds it, which it does until the lock is released
        // (type invariant).
        Some(f(unsafe { xprt.0.as_ref() }))
    }

    /// Cuts the handle off its transport, after every [`SvcHandle::with`] in progress.
    pub(super) fn revoke(&self) {
        *self.xprt.lock() = None;
    }
}
