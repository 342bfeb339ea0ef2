// SPDX-License-Identifier: GPL-2.0

//! Network devices, as a protocol driver bound to one sees them.
//!
//! A software RDMA device is bound to a `struct net_device`: it takes its name and MAC for its
//! GUID and GID, its MTU for the path MTU, and its link state for the port state. This wraps a
//! reference-counted view of it (`dev_hold`/`dev_put`), so a driver can keep the netdev alive
//! for as long as it needs it.
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h)

use crate::{
    bindings,
    types::{AlwaysRefCounted, Opaque},
};
use core::ptr::NonNull;

/// The length of an interface name, including the terminating NUL (`IFNAMSIZ`).
pub const IFNAMSIZ: usize = bindings::IFNAMSIZ as usize;

/// A network device.
///
/// # Invariants
///
/// A `&NetDevice` refers to a valid `struct net_device` on which a reference is held (by the
/// caller of a callback, or by an [`ARef<NetDevice>`](crate::types::ARef)) for its lifetime.
#[repr(transparent)]
pub struct NetDevice(Opaque<bindings::net_device>);

// SAFETY: The reference count is managed with `dev_hold`/`dev_put`, which may be called from
// any thread, and the last `dev_put` only lets the unregistration that waits for it go on.
unsafe impl AlwaysRefCounted for NetDevice {
    fn inc_ref(&self) {
        // SAFETY: `self` is valid (type invariant), so it can take another reference.
        unsafe { bindings::dev_hold(self.0.get()) }
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller gives up a reference it holds.
        unsafe { bindings::dev_put(obj.cast::<bindings::net_device>().as_ptr()) }
    }
}

// SAFETY: The fields read here are read with the same tolerance for concurrent updates as the C
// code has (a rename or MTU change races benignly), and references may be dropped anywhere.
unsafe impl Send for NetDevice {}

// SAFETY: As above.
unsafe impl Sync for NetDevice {}

impl NetDevice {
    /// Creates a reference from a pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid `struct net_device` on which a reference is held for `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // SAFETY: `NetDevice` is a transparent wrapper; validity and the reference are the
        // caller's guarantee.
        unsafe { &*ptr.cast() }
    }

    /// The raw pointer, for other abstractions.
    pub fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// The interface index.
    pub fn ifindex(&self) -> i32 {
        // SAFETY: The device is valid; `ifindex` is fixed while it is registered.
        unsafe { (*self.0.get()).ifindex }
    }

    /// The interface name (NUL-padded, as `ifname`), copied now. A concurrent rename may give
    /// either name.
    pub fn name(&self) -> [u8; IFNAMSIZ] {
        // SAFETY: The device is valid; `name` is a plain array inside it.
        let name = unsafe { (*self.0.get()).name };
        // `c_char` is `u8` on some architectures and `i8` on others.
        #[allow(clippy::unnecessary_cast)]
        name.map(|c| c as u8)
    }

    /// The hardware address if it is an Ethernet-style 6-byte MAC. A concurrent address
    /// change (under RTNL) may give a mix of both, as it would to C readers.
    pub fn mac(&self) -> Option<[u8; 6]> {
        // SAFETY: The device is valid; `dev_addr` points to `addr_len` bytes while registered.
        // The volatile read makes no assumption about concurrent writers.
        unsafe {
            let dev = self.0.get();
            if (*dev).addr_len != 6 || (*dev).dev_addr.is_null() {
                return None;
            }
            Some(core::ptr::read_volatile((*dev).dev_addr.cast::<[u8; 6]>()))
        }
    }

    /// The current MTU.
    pub fn mtu(&self) -> u32 {
        // SAFETY: The device is valid; the helper reads with `READ_ONCE`.
        unsafe { bindings::netdev_mtu(self.0.get()) }
    }

    /// The largest MTU the device supports.
    pub fn max_mtu(&self) -> u32 {
        // SAFETY: The device is valid.
        unsafe { (*self.0.get()).max_mtu }
    }

    /// Whether the device is administratively up and has carrier.
    pub fn is_up(&self) -> bool {
        // SAFETY: The device is valid.
        unsafe { bindings::netif_running(self.0.get()) && bindings::netif_carrier_ok(self.0.get()) }
    }

    /// Whether this is a loopback device.
    pub fn is_loopback(&self) -> bool {
        // SAFETY: The device is valid.
        unsafe { (*self.0.get()).flags & bindings::net_device_flags_IFF_LOOPBACK != 0 }
    }
}
