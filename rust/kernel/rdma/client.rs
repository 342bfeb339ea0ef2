// SPDX-License-Identifier: GPL-2.0

//! The consumer side of the RDMA core, as far as it is wrapped yet: finding a device and
//! allocating protection domains and completion queues on it.
//!
//! In-kernel consumers (NFS, NVMe-oF, our tests) use devices through these calls; the
//! provider side is in [`super::device`].
//!
//! Kernel verbs are only for *kverbs providers*: devices that implement every verb the RDMA
//! core calls without checking (`ib_device_check_mandatory`). The core's own clients skip the
//! other devices; `ib_alloc_pd` on one would call a missing op. So every allocation here first
//! checks the device and answers `EOPNOTSUPP` for a device that is not a kverbs provider.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{
    bindings,
    error::{from_err_ptr, Result},
    prelude::*,
    str::CStr,
};
use core::ptr::NonNull;

/// A registered device, found by name; holds a registration reference (`ib_device_get_by_name`)
/// until dropped.
///
/// # Invariants
///
/// `ptr` is a registered device on which this value holds a registration reference.
pub struct DeviceRef {
    ptr: NonNull<bindings::ib_device>,
}

// SAFETY: A registration reference may be used and dropped from any thread.
unsafe impl Send for DeviceRef {}
// SAFETY: The calls made through `&DeviceRef` are thread-safe in the RDMA core.
unsafe impl Sync for DeviceRef {}

impl DeviceRef {
    /// The device called `name`, if it is registered (any driver).
    pub fn by_name(name: &CStr) -> Option<Self> {
        // SAFETY: `name` is a valid C string; the function returns a device with a
        // registration reference, or null.
        let ptr = unsafe {
            bindings::ib_device_get_by_name(
                name.as_char_ptr(),
                bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
            )
        };
        // INVARIANT: Non-null means registered and referenced.
        NonNull::new(ptr).map(|ptr| Self { ptr })
    }

    /// Whether the device implements every kernel verb (see the module documentation).
    pub fn is_kverbs_provider(&self) -> bool {
        // SAFETY: The device is registered (type invariant); the flag is set at registration and
        // read through the raw pointer without referencing the rest of the device.
        unsafe { bindings::ib_device::kverbs_provider_raw(self.ptr.as_ptr()) != 0 }
    }

    fn check_kverbs(&self) -> Result {
        if self.is_kverbs_provider() {
            Ok(())
        } else {
            Err(EOPNOTSUPP)
        }
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Result<ProtectionDomain<'_>> {
        self.check_kverbs()?;
        // SAFETY: The device is registered (type invariant); the caller string is static.
        let pd = unsafe {
            bindings::__ib_alloc_pd(self.ptr.as_ptr(), 0, crate::c_str!("rust").as_char_ptr())
        };
        let pd = from_err_ptr(pd)?;
        // INVARIANT: `__ib_alloc_pd` succeeded.
        Ok(ProtectionDomain { pd, _dev: self })
    }

    /// Allocates a completion queue of `entries` that the caller polls (`IB_POLL_DIRECT`).
    pub fn alloc_cq(&self, entries: u32) -> Result<CompletionQueue<'_>> {
        self.check_kverbs()?;
        let entries = i32::try_from(entries).map_err(|_| EINVAL)?;
        // SAFETY: The device is registered; no private data; the caller string is static.
        let cq = unsafe {
            bindings::__ib_alloc_cq(
                self.ptr.as_ptr(),
                core::ptr::null_mut(),
                entries,
                0,
                bindings::ib_poll_context_IB_POLL_DIRECT,
                crate::c_str!("rust").as_char_ptr(),
            )
        };
        let cq = from_err_ptr(cq)?;
        // INVARIANT: `__ib_alloc_cq` succeeded.
        Ok(CompletionQueue { cq, _dev: self })
    }
}

impl Drop for DeviceRef {
    fn drop(&mut self) {
        // SAFETY: Gives back the reference we hold (type invariant).
        unsafe { bindings::ib_device_put(self.ptr.as_ptr()) };
    }
}

/// A protection domain, deallocated on drop.
///
/// # Invariants
///
/// `pd` was allocated by `__ib_alloc_pd` on `_dev`'s device and is owned by this value.
pub struct ProtectionDomain<'a> {
    pd: *mut bindings::ib_pd,
    _dev: &'a DeviceRef,
}

impl ProtectionDomain<'_> {}

impl Drop for ProtectionDomain<'_> {
    fn drop(&mut self) {
        // SAFETY: We own `pd` (type invariant); a kernel PD has no user data.
        unsafe { bindings::ib_dealloc_pd_user(self.pd, core::ptr::null_mut()) };
    }
}

/// A completion queue, freed on drop.
///
/// # Invariants
///
/// `cq` was allocated by `__ib_alloc_cq` on `_dev`'s device and is owned by this value.
pub struct CompletionQueue<'a> {
    cq: *mut bindings::ib_cq,
    _dev: &'a DeviceRef,
}

impl Drop for CompletionQueue<'_> {
    fn drop(&mut self) {
        // SAFETY: We own `cq` (type invariant).
        unsafe { bindings::ib_free_cq(self.cq) };
    }
}
