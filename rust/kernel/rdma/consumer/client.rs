// SPDX-License-Identifier: GPL-2.0

//! The consumer side of the RDMA core: finding a device, its capabilities, and protection
//! domains on it. Connections are in [`super::cm`], queue pairs in [`super::kernel_qp`], memory in
//! [`super::dma_buffer`] and [`super::fast_reg`].
//!
//! In-kernel consumers (NFS, NVMe-oF, our tests) use devices through these calls; the
//! provider side is in [`crate::rdma::provider::device`].
//!
//! Kernel verbs are only for *kverbs providers*: devices that implement every verb the RDMA
//! core calls without checking (`ib_device_check_mandatory`). The core's own clients skip the
//! other devices; `ib_alloc_pd` on one would call a missing op. So every allocation here first
//! checks the device and answers `EOPNOTSUPP` for a device that is not a kverbs provider.
//!
//! Every object holds a registration reference on its device ([`DeviceRef`]): unregistration
//! waits until they are all dropped, so a consumer must drop its objects when the device goes
//! away (rdma_cm reports it with [`super::cm::CmEvent::DeviceRemoval`]).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use crate::{
    bindings,
    error::{from_err_ptr, Result},
    prelude::*,
    str::CStr,
    sync::Arc,
};
use core::ptr::NonNull;

/// A registered device; holds a registration reference until dropped.
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

/// What a device can do, as the consumer sees it (`struct ib_device_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceCaps {
    /// Scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Work requests per queue.
    pub max_qp_wr: u32,
    /// RDMA Reads and atomics a QP can answer at once (IRD).
    pub max_qp_rd_atom: u32,
    /// RDMA Reads and atomics a QP can have outstanding (ORD).
    pub max_qp_init_rd_atom: u32,
    /// Atomic operations: `None`, or atomic with respect to this device or to all.
    pub atomic: AtomicCap,
    /// Masked atomic operations.
    pub masked_atomic: AtomicCap,
    /// Pages in one fast-registration MR.
    pub max_fast_reg_pages: u32,
    /// An iWARP RNIC (`RDMA_NODE_RNIC`): the sink of an RDMA Read must be registered with
    /// remote write access, and a Read may end its sink's registration
    /// ([`SendWr::ReadIntoRegion`](super::kernel_qp::SendWr::ReadIntoRegion)'s `invalidate`).
    pub iwarp: bool,
}

/// How atomic operations are supported (`enum ib_atomic_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicCap {
    /// Not at all.
    None,
    /// Atomic with respect to other atomics on this device.
    Device,
    /// Atomic with respect to every access to the memory.
    Global,
}

impl AtomicCap {
    fn from_raw(raw: bindings::ib_atomic_cap) -> Self {
        match raw {
            bindings::ib_atomic_cap_IB_ATOMIC_HCA => Self::Device,
            bindings::ib_atomic_cap_IB_ATOMIC_GLOB => Self::Global,
            _ => Self::None,
        }
    }
}

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

    /// Takes a registration reference on `ptr`; `ENODEV` if it is being unregistered.
    ///
    /// # Safety
    ///
    /// `ptr` is a device that stays allocated during the call.
    pub(crate) unsafe fn try_get(ptr: *mut bindings::ib_device) -> Result<Self> {
        let ptr = NonNull::new(ptr).ok_or(ENODEV)?;
        // SAFETY: The device is allocated (safety requirement).
        if unsafe { bindings::ib_device_try_get(ptr.as_ptr()) } {
            // INVARIANT: The reference was taken.
            Ok(Self { ptr })
        } else {
            Err(ENODEV)
        }
    }

    /// Another registration reference on the same device.
    pub fn try_clone(&self) -> Result<Self> {
        // SAFETY: Our reference keeps the device allocated.
        unsafe { Self::try_get(self.ptr.as_ptr()) }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ptr.as_ptr()
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

    /// The device's capabilities.
    pub fn caps(&self) -> DeviceCaps {
        // SAFETY: The device is registered (type invariant); its attributes are filled before
        // registration and not changed afterwards.
        let attrs = unsafe { &(*self.ptr.as_ptr()).attrs };
        // SAFETY: As for `attrs`: the node type is set before registration.
        let node_type = unsafe { (*self.ptr.as_ptr()).node_type };
        let u = |v: i32| u32::try_from(v).unwrap_or(0);
        DeviceCaps {
            max_send_sge: u(attrs.max_send_sge),
            max_recv_sge: u(attrs.max_recv_sge),
            max_qp_wr: u(attrs.max_qp_wr),
            max_qp_rd_atom: u(attrs.max_qp_rd_atom),
            max_qp_init_rd_atom: u(attrs.max_qp_init_rd_atom),
            atomic: AtomicCap::from_raw(attrs.atomic_cap),
            masked_atomic: AtomicCap::from_raw(attrs.masked_atomic_cap),
            max_fast_reg_pages: attrs.max_fast_reg_page_list_len,
            iwarp: u32::from(node_type) == bindings::RDMA_NODE_RNIC,
        }
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Result<Arc<ProtectionDomain>> {
        self.check_kverbs()?;
        let dev = self.try_clone()?;
        // SAFETY: The device is registered (type invariant); the caller string is static.
        let pd = unsafe {
            bindings::__ib_alloc_pd(self.ptr.as_ptr(), 0, crate::c_str!("rust").as_char_ptr())
        };
        let pd = NonNull::new(from_err_ptr(pd)?).ok_or(ENOMEM)?;
        // INVARIANT: `__ib_alloc_pd` succeeded.
        Ok(Arc::new(ProtectionDomain { pd, dev }, GFP_KERNEL)?)
    }
}

impl Drop for DeviceRef {
    fn drop(&mut self) {
        // SAFETY: Gives back the reference we hold (type invariant).
        unsafe { bindings::ib_device_put(self.ptr.as_ptr()) };
    }
}

/// A protection domain, deallocated on drop. Queue pairs, buffers and memory regions created
/// in it share it through an [`Arc`].
///
/// # Invariants
///
/// `pd` was allocated by `__ib_alloc_pd` on `dev`'s device and is owned by this value.
pub struct ProtectionDomain {
    pd: NonNull<bindings::ib_pd>,
    dev: DeviceRef,
}

// SAFETY: A kernel PD may be used and freed from any thread.
unsafe impl Send for ProtectionDomain {}
// SAFETY: Nothing is mutated through `&ProtectionDomain`.
unsafe impl Sync for ProtectionDomain {}

impl ProtectionDomain {
    /// The device the domain is on.
    pub fn device(&self) -> &DeviceRef {
        &self.dev
    }

    /// The key that gives local access to all DMA-mapped memory of this domain.
    pub fn local_dma_lkey(&self) -> u32 {
        // SAFETY: `pd` is valid (type invariant); the key is set at allocation.
        unsafe { (*self.pd.as_ptr()).local_dma_lkey }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_pd {
        self.pd.as_ptr()
    }
}

impl Drop for ProtectionDomain {
    fn drop(&mut self) {
        // SAFETY: We own `pd` (type invariant); a kernel PD has no user data.
        unsafe { bindings::ib_dealloc_pd_user(self.pd.as_ptr(), core::ptr::null_mut()) };
    }
}
