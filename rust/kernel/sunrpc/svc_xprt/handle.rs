// SPDX-License-Identifier: GPL-2.0

//! How a server transport's own asynchronous contexts reach it.
//!
//! A server transport runs code the RPC server does not call: the completion handler of its
//! queue pair, its connection events. That code needs the transport (to queue it for a thread,
//! to close it) but must not hold a reference on it: the last reference frees the transport,
//! and freeing it drains the queue pair, which waits for that very code.
//!
//! A [`SvcHandle`] reaches the transport without a reference, in three stages:
//!
//! - **set-up**: while [`SvcXprt::create`](super::SvcXprt::create) initialises `T`, there is
//!   no transport to reach yet, but its contexts may already run (a listener's first
//!   connection request, a connection's first call, a device removal). What they signal
//!   ([`Signal`]) is kept and takes effect once the transport is set up: nothing is lost.
//! - **live**: from then on [`SvcHandle::with`] runs code on the transport and
//!   [`SvcHandle::signal`] acts at once.
//! - **revoked**: `xpo_free` (or a failed set-up) revokes the handle before `T` is dropped. A
//!   context that runs after that (a completion flushed while `T` drains its queue pair) finds
//!   the transport gone and does nothing.

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

/// What a transport's own contexts tell the RPC server about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// A listener has connections pending ([`SvcXprt::set_conn_pending`]).
    ConnPending,
    /// The transport has calls pending ([`SvcXprt::set_data_pending`] and
    /// [`SvcXprt::enqueue`]).
    DataPending,
    /// The transport may take work again, a send buffer being free, say
    /// ([`SvcXprt::enqueue`]).
    Ready,
    /// The transport failed or is going: a server thread closes it
    /// ([`SvcXprt::deferred_close`]).
    Close,
}

/// Signals kept while the transport is set up.
#[derive(Default)]
struct Kept {
    conn: bool,
    data: bool,
    close: bool,
}

/// The transport a handle reaches.
struct Target<T: SvcTransport>(NonNull<SvcXprt<T>>);

/// Where a handle is in its life.
enum Stage<T: SvcTransport> {
    SetUp(Kept),
    Live(Target<T>),
    Revoked,
}

// SAFETY: Only `&SvcXprt<T>` is made from a target, and `SvcXprt<T>` is `Sync`.
unsafe impl<T: SvcTransport> Send for Stage<T> {}

/// Reaches a server transport of `T` until it is freed; see the module documentation.
///
/// # Invariants
///
/// In [`Stage::Live`] the target is a set-up `SvcXprt<T>` (its `T` initialised) that stays
/// live until the handle is revoked: `xpo_free` revokes it (under the lock, so after every
/// [`SvcHandle::with`] in progress) before anything of the transport goes.
#[pin_data]
pub struct SvcHandle<T: SvcTransport> {
    #[pin]
    stage: Mutex<Stage<T>>,
}

impl<T: SvcTransport> SvcHandle<T> {
    /// A handle on a transport being set up.
    pub(super) fn new() -> Result<Arc<Self>> {
        let (name, key) = lock_class();
        Arc::pin_init(
            pin_init!(Self {
                stage <- Mutex::new(Stage::SetUp(Kept::default()), name, key),
            }),
            GFP_KERNEL,
        )
    }

    /// The transport at `xprt` is set up: the handle reaches it from now on, and what was
    /// signalled meanwhile takes effect. Nothing if the handle was revoked.
    ///
    /// # Safety
    ///
    /// `xprt` is a `SvcXprt<T>` whose `T` is initialised, that stays live until it calls
    /// [`SvcHandle::revoke`] on the handle.
    pub(super) unsafe fn attach(&self, xprt: NonNull<SvcXprt<T>>) {
        let mut stage = self.stage.lock();
        let Stage::SetUp(kept) = &*stage else {
            return;
        };
        // SAFETY: Set up and live (the caller's guarantee).
        let x = unsafe { xprt.as_ref() };
        if kept.conn {
            x.set_conn_pending();
        }
        if kept.data {
            x.set_data_pending();
            x.enqueue();
        }
        if kept.close {
            x.deferred_close();
        }
        // INVARIANT: Set up and live until revoked (the caller's guarantee).
        *stage = Stage::Live(Target(xprt));
    }

    /// Runs `f` on the transport, or returns `None` if it is not set up yet or was freed.
    ///
    /// The transport cannot be freed while `f` runs: freeing it waits for `f`. So `f` must not
    /// drop a reference to it (see [`SvcXprtRef`](super::SvcXprtRef)); the `SvcXprt` methods
    /// that do not sleep are what it is for. A signal that must not be lost while the
    /// transport is set up goes through [`SvcHandle::signal`] instead.
    pub fn with<R>(&self, f: impl FnOnce(&SvcXprt<T>) -> R) -> Option<R> {
        let stage = self.stage.lock();
        let Stage::Live(target) = &*stage else {
            return None;
        };
        // SAFETY: Set up and live while the handle holds it, which it does until the lock is
        // released (type invariant).
        Some(f(unsafe { target.0.as_ref() }))
    }

    /// Tells the RPC server `signal` about the transport: at once if it is live, once it is
    /// set up if it is not yet, never once it was freed. Must not sleep; takes the handle's
    /// lock, so it may be called under a lock of the transport's own that
    /// [`SvcHandle::with`]'s callers do not take.
    pub fn signal(&self, signal: Signal) {
        let mut stage = self.stage.lock();
        match &mut *stage {
            Stage::SetUp(kept) => match signal {
                Signal::ConnPending => kept.conn = true,
                Signal::DataPending => kept.data = true,
                Signal::Ready => {}
                Signal::Close => kept.close = true,
            },
            Stage::Live(target) => {
                // SAFETY: As in `with`.
                let x = unsafe { target.0.as_ref() };
                match signal {
                    Signal::ConnPending => x.set_conn_pending(),
                    Signal::DataPending => {
                        x.set_data_pending();
                        x.enqueue();
                    }
                    Signal::Ready => x.enqueue(),
                    Signal::Close => x.deferred_close(),
                }
            }
            Stage::Revoked => {}
        }
    }

    /// Cuts the handle off its transport, after every [`SvcHandle::with`] in progress.
    pub(super) fn revoke(&self) {
        *self.stage.lock() = Stage::Revoked;
    }
}
