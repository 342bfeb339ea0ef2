// SPDX-License-Identifier: GPL-2.0

//! How a transport's own asynchronous contexts reach it.
//!
//! A transport runs code the RPC client does not call: the completion handler of its queue
//! pair, its connect worker, its timers. That code needs the transport (to deliver a reply, to
//! mark it disconnected), yet must not hold a reference on it: the transport owns those
//! contexts, and its last reference goes only when the RPC client lets go of it, which would
//! never happen while one of them held another (`destroy` would never run to tear them down).
//!
//! A [`Handle`] reaches the transport without a reference: the abstraction revokes every
//! handle of a transport when the transport is destroyed, before `T` is dropped. A context
//! that still runs then (a completion flushed while `T` drains its queue pair) finds the
//! transport gone and does nothing.

use super::{Transport, Xprt};
use crate::{
    prelude::*,
    str::CStr,
    sync::{Arc, LockClassKey, Mutex},
};
use core::ptr::NonNull;

/// The lock class of every handle's lock. Generic code must not make its own: a static in a
/// generic function is one key, but its name is copied into every module that instantiates the
/// function, and lockdep refuses one key under two names.
#[inline(never)]
fn lock_class() -> (&'static CStr, &'static LockClassKey) {
    (
        crate::c_str!("sunrpc::xprt::Handle"),
        crate::static_lock_class!(),
    )
}

/// The transport a handle reaches.
struct Target<T: Transport>(NonNull<Xprt<T>>);

// SAFETY: Only `&Xprt<T>` is made from it, and `Xprt<T>` is `Sync`.
unsafe impl<T: Transport> Send for Target<T> {}

/// Reaches a transport of `T` until the transport is destroyed; see the module documentation.
///
/// # Invariants
///
/// While `xprt` holds a target, it is a live `Xprt<T>`: `destroy` revokes the handle (under
/// the lock, so after every [`Handle::with`] in progress) before anything of the transport
/// goes.
#[pin_data]
pub struct Handle<T: Transport> {
    #[pin]
    xprt: Mutex<Option<Target<T>>>,
}

impl<T: Transport> Handle<T> {
    /// A handle on the transport at `xprt`.
    ///
    /// # Safety
    ///
    /// `xprt` is a live `Xprt<T>` whose `destroy` calls [`Handle::revoke`] on the handle
    /// before the transport goes.
    pub(super) unsafe fn new(xprt: NonNull<Xprt<T>>) -> Result<Arc<Self>> {
        let (name, key) = lock_class();
        // INVARIANT: Live until revoked (the caller's guarantee).
        Arc::pin_init(
            pin_init!(Self {
                xprt <- Mutex::new(Some(Target(xprt)), name, key),
            }),
            GFP_KERNEL,
        )
    }

    /// Runs `f` on the transport, or returns `None` if the transport was destroyed.
    ///
    /// The transport cannot be destroyed while `f` runs: its destruction waits for `f`, so `f`
    /// must not wait for the transport's destruction (it may drop references on it: the
    /// destruction itself runs from a work item).
    pub fn with<R>(&self, f: impl FnOnce(&Xprt<T>) -> R) -> Option<R> {
        let target = self.xprt.lock();
        let xprt = target.as_ref()?;
        // SAFETY: Live while the handle holds it, which it does until the lock is released
        // (type invariant).
        Some(f(unsafe { xprt.0.as_ref() }))
    }

    /// Cuts the handle off its transport, after every [`Handle::with`] in progress.
    pub(super) fn revoke(&self) {
        *self.xprt.lock() = None;
    }
}
