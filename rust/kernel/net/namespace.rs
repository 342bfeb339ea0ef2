// SPDX-License-Identifier: GPL-2.0

//! Network namespaces (`struct net`).
//!
//! Addresses, devices and connections belong to a network namespace. Kernel code that opens a
//! connection on someone's behalf (a mount's RPC transport, say) does so in that caller's
//! namespace, not in the initial one. A [`Namespace`] is only ever borrowed here: whoever hands
//! one out keeps it alive for the borrow, and the subsystems that keep a namespace (rdma_cm
//! ids, sockets) take their own reference.
//!
//! C header: [`include/net/net_namespace.h`](srctree/include/net/net_namespace.h)

use crate::{bindings, types::Opaque};

/// A network namespace.
///
/// # Invariants
///
/// A `&Namespace` refers to a live `struct net` for the borrow's lifetime.
#[repr(transparent)]
pub struct Namespace(Opaque<bindings::net>);

// SAFETY: A namespace is used from any thread through functions that do their own locking.
unsafe impl Send for Namespace {}
// SAFETY: As above.
unsafe impl Sync for Namespace {}

impl Namespace {
    /// The initial network namespace (`init_net`), which lives for ever.
    pub fn initial() -> &'static Self {
        // SAFETY: `init_net` is never freed; `Namespace` is a transparent wrapper of `net`.
        unsafe { Self::from_raw(core::ptr::addr_of_mut!(bindings::init_net)) }
    }

    /// The namespace `ptr` points to.
    ///
    /// # Safety
    ///
    /// `ptr` is a live `struct net` that stays alive for `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::net) -> &'a Self {
        // INVARIANT: The caller's guarantee.
        // SAFETY: `Namespace` is a transparent wrapper of `net`; valid for `'a` (the caller's
        // guarantee).
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The `struct net`.
    pub fn as_raw(&self) -> *mut bindings::net {
        self.0.get()
    }
}
