// SPDX-License-Identifier: GPL-2.0

//! Fast-registration memory regions: how a kernel consumer lets a remote peer read or write its
//! memory.
//!
//! A [`FastRegMr`] is allocated once (`ib_alloc_mr`, type `IB_MR_TYPE_MEM_REG`) and then
//! (re)registered over a [`DmaBuffer`] or over [`MappedPages`] by a `REG_MR` work request
//! ([`super::kernel_qp::SendWr::RegMr`], [`super::kernel_qp::SendWr::RegPages`]) and
//! invalidated by `LOCAL_INV` or by a peer's Send
//! with Invalidate; it must be invalid again before the next `REG_MR` (rxe fails the request
//! and the QP otherwise). Each registration gets a fresh key (`ib_inc_rkey`), so a stale key held by
//! the peer no longer matches. The region keeps the buffer or pages alive while registered (until
//! a `LOCAL_INV` of that registration completed, its next registration or its end): a peer can
//! only ever reach memory that exists.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    client::ProtectionDomain, dma_buffer::DmaBuffer, kernel_qp::RemoteInvalidation,
    mapped_pages::MappedPages,
};
use crate::{
    bindings,
    error::from_err_ptr,
    ffi::c_int,
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};
use core::ptr::NonNull;

/// Access rights of a memory region (`enum ib_access_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access(u32);

impl Access {
    /// The device may write (needed for any remote write or atomic).
    pub const LOCAL_WRITE: Self = Self(bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE);
    /// Remote peers may RDMA Write.
    pub const REMOTE_WRITE: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE);
    /// Remote peers may RDMA Read.
    pub const REMOTE_READ: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_READ);
    /// Remote peers may run atomic operations.
    pub const REMOTE_ATOMIC: Self = Self(bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC);

    pub(crate) fn bits(self) -> u32 {
        self.0
    }
}

impl core::ops::BitOr for Access {
    type Output = Self;
    fn bitor(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

/// A fast-registration memory region.
///
/// # Invariants
///
/// `mr` was allocated by `ib_alloc_mr` in `pd` and is owned by this value; its keys and mapping
/// are only changed with `registered` locked.
#[pin_data]
pub struct FastRegMr {
    mr: MrGuard,
    pd: Arc<ProtectionDomain>,
    max_pages: u32,
    #[pin]
    registered: Mutex<Option<Registered>>,
}

/// What a region was last registered over, kept until the next registration; a work request
/// whose local memory is the region holds a clone until it completes.
#[derive(Clone)]
pub(crate) enum Registered {
    Buffer { _buffer: Arc<DmaBuffer> },
    Pages { _pages: Arc<MappedPages> },
}

// SAFETY: The MR may be used and freed from any thread.
unsafe impl Send for FastRegMr {}
// SAFETY: The mutable parts of the MR are changed under `registered`.
unsafe impl Sync for FastRegMr {}

/// What a `REG_MR` work request needs, taken under the region's lock.
pub(crate) struct Mapped {
    pub(crate) mr: *mut bindings::ib_mr,
    pub(crate) key: u32,
}

impl FastRegMr {
    /// Allocates a region that can map up to `max_pages` pages.
    pub fn new(pd: &Arc<ProtectionDomain>, max_pages: u32) -> Result<Arc<Self>> {
        // SAFETY: `pd` is a valid kernel PD.
        let mr = unsafe {
            bindings::ib_alloc_mr(
                pd.as_raw(),
                bindings::ib_mr_type_IB_MR_TYPE_MEM_REG,
                max_pages,
            )
        };
        let mr = MrGuard(NonNull::new(from_err_ptr(mr)?).ok_or(ENOMEM)?);
        // INVARIANT: Allocated above and owned by the new value (the guard frees it if the
        // value cannot be allocated).
        Arc::pin_init(
            pin_init!(Self {
                mr,
                pd: pd.clone(),
                max_pages,
                registered <- new_mutex!(None),
            }),
            GFP_KERNEL,
        )
    }

    /// The key a peer uses to reach the memory (valid once registered).
    pub fn rkey(&self) -> u32 {
        let _guard = self.registered.lock();
        // SAFETY: `mr` is valid; its keys change only under the lock we hold (type invariant).
        unsafe { (*self.mr.0.as_ptr()).rkey }
    }

    /// The address a peer uses for the first byte of the registered buffer.
    pub fn iova(&self) -> u64 {
        let _guard = self.registered.lock();
        // SAFETY: As in `rkey`.
        unsafe { (*self.mr.0.as_ptr()).iova }
    }

    /// The protection domain of the region.
    pub fn pd(&self) -> &Arc<ProtectionDomain> {
        &self.pd
    }

    /// Maps `buffer` into the region with a fresh key, for a `REG_MR` work request.
    pub(crate) fn map(&self, buffer: &Arc<DmaBuffer>) -> Result<Mapped> {
        if !Arc::ptr_eq(buffer.pd(), &self.pd) {
            return Err(EINVAL);
        }
        let len = u32::try_from(buffer.len())?;
        let pages = buffer.len().div_ceil(bindings::PAGE_SIZE) + 1;
        let mut sg = bindings::scatterlist::default();
        // SAFETY: `sg` is a local scatterlist describing the buffer's kmalloc'ed memory, with
        // the DMA address the buffer was mapped at.
        unsafe {
            bindings::sg_init_one(&mut sg, buffer.cpu_addr().cast(), len);
            bindings::sg_dma_set(&mut sg, buffer.dma_addr(), len);
        }
        let keep = Registered::Buffer {
            _buffer: buffer.clone(),
        };
        // SAFETY: `sg` is one entry mapped for the buffer's device, which is the region's (same
        // PD), and lives across the call.
        unsafe { self.register(&mut sg, 1, pages, keep) }
    }

    /// Maps `pages` into the region with a fresh key, for a `REG_MR` work request.
    pub(crate) fn map_pages(&self, pages: &Arc<MappedPages>) -> Result<Mapped> {
        if !Arc::ptr_eq(pages.pd(), &self.pd) {
            return Err(EINVAL);
        }
        let keep = Registered::Pages {
            _pages: pages.clone(),
        };
        // SAFETY: The table is mapped for the pages' device, which is the region's (same PD),
        // and kept alive by `keep`.
        unsafe {
            self.register(
                pages.table(),
                pages.mapped_nents(),
                pages.page_count(),
                keep,
            )
        }
    }

    /// Maps the `nents` entries of `sg` (spanning `pages` pages) into the region with a fresh
    /// key, and keeps `keep`, the memory they describe, until the next registration.
    ///
    /// # Safety
    ///
    /// `sg` has `nents` entries DMA-mapped for the region's device, valid for the call, which
    /// describe memory that `keep` keeps alive and mapped.
    unsafe fn register(
        &self,
        sg: *mut bindings::scatterlist,
        nents: c_int,
        pages: usize,
        keep: Registered,
    ) -> Result<Mapped> {
        if pages > self.max_pages as usize {
            return Err(EINVAL);
        }
        let mut registered = self.registered.lock();
        let mr = self.mr.0.as_ptr();
        // SAFETY: `mr` is valid and its keys are ours to change under the lock (type
        // invariant); `sg` is as the caller guarantees, and only read.
        let mapped = unsafe {
            let key = bindings::ib_inc_rkey((*mr).rkey) as u8;
            bindings::ib_update_fast_reg_key(mr, key);
            bindings::ib_map_mr_sg(
                mr,
                sg,
                nents,
                core::ptr::null_mut(),
                bindings::PAGE_SIZE as u32,
            )
        };
        if mapped != nents {
            return Err(if mapped < 0 {
                Error::from_errno(mapped)
            } else {
                EINVAL
            });
        }
        *registered = Some(keep);
        // SAFETY: As above.
        let key = unsafe { (*mr).rkey };
        Ok(Mapped { mr, key })
    }

    /// The registration under key `key` ended: a `LOCAL_INV` of it completed, its `REG_MR`
    /// was never posted, or a peer's Send With Invalidate invalidated it. If it is still the
    /// current one, the memory it kept is let go (pages are unmapped once no one else holds
    /// them) and this returns true; a newer registration (a new key) is kept.
    pub(crate) fn registration_ended(&self, key: u32) -> bool {
        let mut registered = self.registered.lock();
        // SAFETY: As in `rkey`.
        let current = unsafe { (*self.mr.0.as_ptr()).rkey };
        let old = if current == key {
            registered.take()
        } else {
            None
        };
        drop(registered);
        let ended = old.is_some();
        drop(old);
        ended
    }

    /// A received Send With Invalidate (`proof`) invalidated a registration: if it is this
    /// region's current one, its memory is let go as after a `LOCAL_INV`, and this returns
    /// true (the region needs no `LOCAL_INV` before its next registration). False if the key is
    /// another region's, or an earlier registration's of this one.
    pub fn remotely_invalidated(&self, proof: &RemoteInvalidation) -> bool {
        self.registration_ended(proof.rkey())
    }

    /// The local scatter/gather entry for `len` bytes at `offset` of the current registration
    /// (counted from its first byte), with the memory it covers, for a work request whose
    /// local memory is the region (the sink of an RDMA Read on iWARP must be registered with
    /// remote write access). `EINVAL` if the region is not registered or the range runs past
    /// the registration.
    pub(crate) fn local_sge(
        &self,
        offset: usize,
        len: usize,
    ) -> Result<(bindings::ib_sge, Registered)> {
        let registered = self.registered.lock();
        let keep = registered.as_ref().ok_or(EINVAL)?.clone();
        let mr = self.mr.0.as_ptr();
        // SAFETY: `mr` is valid; its keys and mapping change only under the lock we hold (type
        // invariant).
        let (iova, length, lkey) = unsafe { ((*mr).iova, (*mr).length, (*mr).lkey) };
        let offset = u64::try_from(offset)?;
        let end = offset.checked_add(u64::try_from(len)?).ok_or(EINVAL)?;
        if end > length {
            return Err(EINVAL);
        }
        let sge = bindings::ib_sge {
            addr: iova.checked_add(offset).ok_or(EINVAL)?,
            length: u32::try_from(len)?,
            lkey,
        };
        Ok((sge, keep))
    }

    /// Bytes the current registration covers.
    pub fn length(&self) -> u64 {
        let _guard = self.registered.lock();
        // SAFETY: As in `rkey`.
        unsafe { (*self.mr.0.as_ptr()).length }
    }
}

/// Owns an MR allocated by `ib_alloc_mr` and deregisters it on drop.
///
/// # Invariants
///
/// The MR was allocated by `ib_alloc_mr` and is owned by this value.
struct MrGuard(NonNull<bindings::ib_mr>);

impl Drop for MrGuard {
    fn drop(&mut self) {
        // SAFETY: We own the MR (type invariant); work requests using it hold a reference to
        // the region that owns this guard, so none is outstanding.
        unsafe { bindings::ib_dereg_mr_user(self.0.as_ptr(), core::ptr::null_mut()) };
    }
}
