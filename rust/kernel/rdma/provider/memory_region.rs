// SPDX-License-Identifier: GPL-2.0

//! A provider's memory regions, and access to the memory behind them.
//!
//! A software provider (siw, rxe, rsiw) has no DMA engine: the RDMA core gives its devices no
//! `dma_device`, so `ib_uses_virt_dma()` holds and every "DMA address" a kernel consumer hands
//! to it — in a scatter/gather entry, in an MR page list — is the kernel virtual address the
//! consumer mapped with `ib_dma_map_*`. The consumer keeps that memory mapped until the work
//! request completes, or until the MR is invalidated or deregistered: that is the verbs
//! contract the provider relies on, in C as here.
//!
//! This module turns those addresses into [`DmaRange`]s the provider copies through, and only
//! from the three places the core hands them over:
//!
//! - a DMA MR (`get_dma_mr`, the MR `ib_alloc_pd` makes for its `local_dma_lkey`) stands for
//!   all of memory; its [`DmaMemory`] turns the bytes of a scatter/gather entry a kernel
//!   consumer posted with its key ([`Sge`], had only from a posted work request) into a range;
//! - a fast-registration MR (`alloc_mr`, filled by `map_mr_sg` and made valid by a REG_MR work
//!   request) has a [`PageList`] of the pages the core's `ib_sg_to_pages` produced;
//! - a user MR (`reg_user_mr`) has the [`UserPages`] `ib_umem_get` pinned in the process.
//!
//! The core does not allocate MRs for providers (there is no `size_ib_mr`): the callbacks here
//! allocate an `MrContainer` holding the `ib_mr` and the provider's object, and free it on
//! `dereg_mr`.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    device::{with_driver, Driver},
    objects::PdId,
    restrack::RestrackAttrs,
    work_request::Sge,
};
#[cfg(CONFIG_INET)]
use crate::net::tcp::splice::PagePiece;
use crate::{
    alloc::{flags::GFP_KERNEL, KBox, KVVec},
    bindings,
    error::{from_result, Result},
    ffi::{c_int, c_uint},
    prelude::*,
    sync::Arc,
};
use core::{
    marker::PhantomData,
    mem::ManuallyDrop,
    ptr::NonNull,
    sync::atomic::{AtomicU64, Ordering},
};

/// `IB_ACCESS_LOCAL_WRITE`.
pub const ACCESS_LOCAL_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
/// `IB_ACCESS_REMOTE_WRITE`.
pub const ACCESS_REMOTE_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
/// `IB_ACCESS_REMOTE_READ`.
pub const ACCESS_REMOTE_READ: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ;
/// `IB_ACCESS_REMOTE_ATOMIC`.
pub const ACCESS_REMOTE_ATOMIC: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;

/// A byte range of kernel memory a consumer made available to a software device, for as long
/// as `'a`: the borrow of what grants it (a [`DmaMemory`], a [`PageList`], [`UserPages`]),
/// which a driver holds under the lock of the memory region it checked. A range cannot be kept
/// beyond that borrow: the callbacks that hand ranges out take any lifetime.
///
/// # Invariants
///
/// `addr..addr + len` is a kernel virtual address range that a kernel consumer handed to the
/// device through the verbs (a posted scatter/gather entry under a DMA MR, or a page of a
/// fast-registration MR), or part of a page pinned for a user MR, as described in the module
/// documentation, and stays so for `'a`.
#[derive(Clone, Copy, Debug)]
pub struct DmaRange<'a> {
    addr: usize,
    len: usize,
    _grant: PhantomData<&'a ()>,
}

impl<'a> DmaRange<'a> {
    /// A range of what `_grant` grants.
    ///
    /// # Safety
    ///
    /// `addr..addr + len` must meet the type invariant for `'a`.
    unsafe fn new(_grant: &'a impl ?Sized, addr: usize, len: usize) -> Self {
        // INVARIANT: The caller's guarantee.
        Self {
            addr,
            len,
            _grant: PhantomData,
        }
    }

    /// Its length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The part `offset..offset + len` of the range, if it lies inside.
    #[inline]
    pub fn sub(&self, offset: usize, len: usize) -> Option<Self> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // INVARIANT: A part of a range the consumer made available, for as long.
        Some(Self {
            addr: self.addr.checked_add(offset)?,
            len,
            _grant: PhantomData,
        })
    }

    /// Copies `out.len()` bytes from `offset` into `out`.
    #[inline]
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result {
        let part = self.sub(offset, out.len()).ok_or(EINVAL)?;
        // SAFETY: By the type invariant the consumer keeps `part` mapped, readable for
        // `out.len()` bytes; `out` is a distinct Rust buffer, so the two do not overlap. The
        // consumer may write the memory concurrently, as a DMA engine would see it: bytes are
        // copied, never referenced.
        unsafe {
            core::ptr::copy_nonoverlapping(part.addr as *const u8, out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    /// The range as pieces TCP can take by page reference, one per page, each holding a page
    /// reference (so they stay valid after the consumer lets go of the memory). `Ok(false)` if
    /// some page cannot be sent that way (vmalloc or slab memory; the pieces before it were
    /// given to `f`): copy the range instead.
    #[cfg(CONFIG_INET)]
    pub fn page_pieces(&self, f: &mut dyn FnMut(PagePiece) -> Result) -> Result<bool> {
        let page_size = bindings::PAGE_SIZE;
        let mut at = 0;
        while at < self.len {
            let addr = self.addr + at;
            let n = core::cmp::min(self.len - at, page_size - addr % page_size);
            // SAFETY: By the type invariant the consumer keeps the range mapped, during this
            // call at least; the piece takes its own page reference.
            let Some(piece) = (unsafe { PagePiece::from_kernel_address(addr, n) }) else {
                return Ok(false);
            };
            f(piece)?;
            at += n;
        }
        Ok(true)
    }

    /// Copies `data` into the range at `offset`.
    #[inline]
    pub fn write(&self, offset: usize, data: &[u8]) -> Result {
        let part = self.sub(offset, data.len()).ok_or(EINVAL)?;
        // SAFETY: As in `read`: `part` is mapped for `data.len()` bytes and does not overlap the
        // Rust buffer `data`, and the consumer granted write access (the provider checks the
        // MR's rights before it writes).
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), part.addr as *mut u8, data.len()) };
        Ok(())
    }
}

/// All of memory, as a DMA MR grants it to kernel consumers: the bytes of each scatter/gather
/// entry a kernel consumer posts under the MR's key.
///
/// A range is had only for an entry of a posted work request ([`Sge`], which only the views
/// of this crate's work requests hand out) whose key is this MR's, and only within the entry.
/// So neither an address from elsewhere (a user process's, a peer's) nor an entry of another
/// MR (whose address is an I/O virtual address of that MR, not a kernel one) can become
/// memory. The key is the one the core learned when the MR was created; it is forgotten when
/// the MR is deregistered, so that a key reused by a later MR of the device does not open this
/// one.
///
/// # Invariants
///
/// Only this module creates it, for a DMA MR the RDMA core asked for (`get_dma_mr` is not
/// reachable from user space). `key` holds the MR's key while the MR is registered, and
/// `DmaKey::NONE` before and after.
pub struct DmaMemory {
    key: Arc<DmaKey>,
}

/// The key of a DMA MR, shared by its [`DmaMemory`] and its container: set once the MR's key
/// is known, cleared when the MR is deregistered.
struct DmaKey(AtomicU64);

impl DmaKey {
    /// No key: no 32-bit key equals it.
    const NONE: u64 = 1 << 32;

    fn new() -> Result<Arc<Self>> {
        Ok(Arc::new(Self(AtomicU64::new(Self::NONE)), GFP_KERNEL)?)
    }

    fn set(&self, key: u32) {
        self.0.store(u64::from(key), Ordering::Release);
    }

    fn clear(&self) {
        self.0.store(Self::NONE, Ordering::Release);
    }

    fn is(&self, key: u32) -> bool {
        self.0.load(Ordering::Acquire) == u64::from(key)
    }
}

impl DmaMemory {
    /// The `len` bytes at `offset` within `sge`, an entry a kernel consumer posted under this
    /// MR's key; `None` if the entry is under another key (or the MR is not registered), or
    /// the bytes are not all in the entry.
    pub fn range(&self, sge: &Sge, offset: u64, len: u64) -> Option<DmaRange<'_>> {
        if !self.key.is(sge.lkey()) || offset.checked_add(len)? > u64::from(sge.length()) {
            return None;
        }
        let addr = usize::try_from(sge.addr().checked_add(offset)?).ok()?;
        let len = usize::try_from(len).ok()?;
        addr.checked_add(len)?;
        if addr == 0 {
            return None;
        }
        // SAFETY: `sge` is an entry a kernel consumer posted under this MR's key while it is
        // registered (checked just now), so its address is a kernel virtual address the
        // consumer mapped (the module documentation), and `addr..addr + len` lies inside it.
        Some(unsafe { DmaRange::new(self, addr, len) })
    }
}

/// The pages of a fast-registration MR, as `map_mr_sg` set them.
///
/// # Invariants
///
/// The first `count` entries of `pages` are the addresses `ib_sg_to_pages` reported for pages
/// of `1 << page_shift` bytes; `iova` and `length` are the MR's after the mapping.
pub struct PageList {
    /// Possibly large (a user MR's page per 4 KiB): kvmalloc'ed, so that no single kmalloc
    /// goes over the allocator's limit.
    pages: KVVec<u64>,
    count: usize,
    /// Where the first byte lies in the first page.
    first_offset: u64,
    iova: u64,
    length: u64,
    /// Pages are `1 << page_shift` bytes (the core's page sizes are powers of two).
    page_shift: u32,
}

impl PageList {
    /// An empty list with room for `max_pages` pages.
    pub fn new(max_pages: u32) -> Result<Self> {
        let pages = KVVec::from_elem(0, max_pages as usize, GFP_KERNEL)?;
        Ok(Self {
            pages,
            count: 0,
            first_offset: 0,
            iova: 0,
            length: 0,
            page_shift: 12,
        })
    }

    /// The I/O virtual address of the first byte.
    #[inline]
    pub fn iova(&self) -> u64 {
        self.iova
    }

    /// The length of the mapping in bytes.
    #[inline]
    pub fn length(&self) -> u64 {
        self.length
    }

    /// A registration names the mapping's first byte `iova` (consumers may move the I/O
    /// virtual address after mapping) and covers `length` bytes of it.
    pub fn register_at(&mut self, iova: u64, length: u64) -> Result {
        if length > self.length {
            return Err(EINVAL);
        }
        iova.checked_add(length).ok_or(EINVAL)?;
        self.iova = iova;
        self.length = length;
        Ok(())
    }

    /// Calls `f` with the memory of `len` bytes starting `offset` bytes after the start of the
    /// mapping, in page-contiguous pieces and in order. Fails if the range is not mapped.
    #[inline]
    pub fn for_each_range(
        &self,
        offset: u64,
        len: u64,
        mut f: impl FnMut(DmaRange<'_>) -> Result,
    ) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.length {
            return Err(EINVAL);
        }
        let mut at = offset.checked_add(self.first_offset).ok_or(EINVAL)?;
        let mut left = len;
        let page_size = 1u64 << self.page_shift;
        while left > 0 {
            // The page size is a power of two: shifts and masks.
            let index = usize::try_from(at >> self.page_shift).map_err(|_| EINVAL)?;
            let in_page = at & (page_size - 1);
            if index >= self.count {
                return Err(EINVAL);
            }
            let page = *self.pages.get(index).ok_or(EINVAL)?;
            let piece = core::cmp::min(left, page_size - in_page);
            let addr =
                usize::try_from(page.checked_add(in_page).ok_or(EINVAL)?).map_err(|_| EINVAL)?;
            let piece_len = usize::try_from(piece).map_err(|_| EINVAL)?;
            addr.checked_add(piece_len).ok_or(EINVAL)?;
            // SAFETY: A piece of a page the core mapped for the consumer, which stays mapped
            // while the list is borrowed (it is the MR's).
            f(unsafe { DmaRange::new(self, addr, piece_len) })?;
            at += piece;
            left -= piece;
        }
        Ok(())
    }
}

/// A provider's memory region; dropped when the MR is deregistered.
pub trait MemoryRegion: Send + Sync {
    /// `map_mr_sg`: the consumer maps a scatterlist onto a fast-registration MR. Call `fill`
    /// with the MR's page list (locked as the provider sees fit); it replaces the pages and
    /// returns the number of scatterlist entries mapped.
    fn map_pages(&self, _fill: &mut dyn FnMut(&mut PageList) -> Result<u32>) -> Result<u32> {
        Err(EOPNOTSUPP)
    }

    /// The consumer deregisters the MR (`dereg_mr`): no new access may start. The object
    /// itself is dropped once the provider lets go of it.
    fn deregister(&self) {}

    /// Adds the provider's detail of the MR to `rdma resource show mr`
    /// ([`super::restrack`]); nothing by default.
    fn fill_restrack(&self, _attrs: &mut RestrackAttrs<'_>) -> Result {
        Ok(())
    }
}

/// The provider's object of `mr`.
///
/// # Safety
///
/// `mr` must be an MR that `new_mr` allocated and that is not deregistered yet, for the
/// lifetime `'a`.
pub(crate) unsafe fn memory_region<'a>(mr: *mut bindings::ib_mr) -> &'a dyn MemoryRegion {
    // SAFETY: `mr` is the first field of a live container (the caller's guarantee), whose
    // `mr` field `new_mr` wrote and only `dereg_mr_callback` takes.
    unsafe { &**(*mr.cast::<MrContainer>()).mr }
}

/// What a provider answers when it creates an MR: its object and its key (lkey and rkey).
pub struct NewMr {
    /// The provider's object.
    pub mr: Arc<dyn MemoryRegion>,
    /// The local and remote key.
    pub key: u32,
}

/// An MR as this module allocates it: the core's `ib_mr`, then the provider's object.
///
/// # Invariants
///
/// `filling` is null, or points to the page list a `map_mr_sg_callback` is filling right now.
#[repr(C)]
struct MrContainer {
    ibmr: bindings::ib_mr,
    mr: ManuallyDrop<Arc<dyn MemoryRegion>>,
    filling: *mut PageList,
    /// A DMA MR's key, as its [`DmaMemory`] sees it.
    dma_key: Option<Arc<DmaKey>>,
}

/// Allocates the container of a new MR and returns the `ib_mr`, or an `ERR_PTR`. A DMA MR's
/// `dma_key` takes the MR's key.
fn new_mr(created: Result<NewMr>, dma_key: Option<Arc<DmaKey>>) -> *mut bindings::ib_mr {
    let created = match created {
        Ok(c) => c,
        Err(e) => return e.to_ptr(),
    };
    // SAFETY: `ib_mr` is plain data for which all zeroes is valid (the core fills it in).
    let ibmr: bindings::ib_mr = unsafe { core::mem::zeroed() };
    // Kept to deregister the MR if its container cannot be had: the core never learns of it
    // then, and would never deregister it.
    let provider = created.mr.clone();
    let container = MrContainer {
        ibmr,
        mr: ManuallyDrop::new(created.mr),
        filling: core::ptr::null_mut(),
        dma_key,
    };
    match KBox::new(container, GFP_KERNEL) {
        Ok(b) => {
            let raw = KBox::into_raw(b);
            // SAFETY: `raw` is the container just leaked.
            if let Some(key) = unsafe { &(*raw).dma_key } {
                key.set(created.key);
            }
            // SAFETY: `raw` is the container just leaked; `ibmr` is its first field.
            unsafe {
                (*raw).ibmr.lkey = created.key;
                (*raw).ibmr.rkey = created.key;
                core::ptr::addr_of_mut!((*raw).ibmr)
            }
        }
        Err(e) => {
            // `KBox::new` dropped the container; no access may start on the MR any more.
            provider.deregister();
            Error::from(e).to_ptr()
        }
    }
}

/// `get_dma_mr`.
///
/// # Safety
///
/// Called by the RDMA core with a live PD of one of our devices.
pub(crate) unsafe extern "C" fn get_dma_mr_callback<T: Driver>(
    pd: *mut bindings::ib_pd,
    access: c_int,
) -> *mut bindings::ib_mr {
    // SAFETY: `pd` is valid and its `device` set by the core.
    let ibdev = unsafe { (*pd).device };
    // SAFETY: A live PD of one of our devices (the caller's guarantee).
    let id = unsafe { PdId::of(pd) };
    let key = match DmaKey::new() {
        Ok(key) => key,
        Err(e) => return e.to_ptr(),
    };
    let mem = DmaMemory { key: key.clone() };
    let create = |d: &T, dev: &_| d.get_dma_mr(dev, id, access as u32, mem);
    // SAFETY: A device of ours, alive while it has PDs.
    new_mr(unsafe { with_driver::<T, _>(ibdev, create) }, Some(key))
}

/// `alloc_mr`.
///
/// # Safety
///
/// Called by the RDMA core with a live PD of one of our devices.
pub(crate) unsafe extern "C" fn alloc_mr_callback<T: Driver>(
    pd: *mut bindings::ib_pd,
    mr_type: bindings::ib_mr_type,
    max_num_sg: u32,
) -> *mut bindings::ib_mr {
    if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
        return EOPNOTSUPP.to_ptr();
    }
    // SAFETY: `pd` is valid and its `device` set by the core.
    let ibdev = unsafe { (*pd).device };
    // SAFETY: A live PD of one of our devices (the caller's guarantee).
    let id = unsafe { PdId::of(pd) };
    let create = |d: &T, dev: &_| d.alloc_mr(dev, id, max_num_sg);
    // SAFETY: A device of ours, alive while it has PDs.
    new_mr(unsafe { with_driver::<T, _>(ibdev, create) }, None)
}

/// User memory pinned for a memory region (`ib_umem`), with its pages as a page list.
///
/// `ib_umem_get` pins the pages of the process's buffer and maps them for the device; for a
/// software device that mapping is the identity (virtual DMA, see the module documentation),
/// so each page's "DMA address" is the kernel virtual address of the pinned page, which the
/// provider copies through as it does for fast-registration MRs. That holds where every page
/// has a kernel mapping, i.e. without `CONFIG_HIGHMEM` (all 64-bit architectures).
///
/// Dropping it unpins the pages (`ib_umem_release`), which may sleep: drop it in process
/// context, e.g. in [`MemoryRegion::deregister`].
///
/// # Invariants
///
/// `umem` is a live `ib_umem` from `ib_umem_get`, owned by this value. The first `count`
/// entries of `list.pages` are the kernel virtual addresses of its pages, in order, pinned
/// until `umem` is released; `list.iova` and `list.length` are the region's.
pub struct UserPages {
    umem: NonNull<bindings::ib_umem>,
    list: PageList,
}

// SAFETY: The pinned pages and the `ib_umem` may be used and released from any thread.
unsafe impl Send for UserPages {}
// SAFETY: `&UserPages` only copies to and from the pages, as `DmaRange` does.
unsafe impl Sync for UserPages {}

#[cfg(CONFIG_HIGHMEM)]
compile_error!("user MRs of software devices need every page mapped in the kernel");

impl UserPages {
    /// Pins `length` bytes of the current process at `start` for `ibdev`, named by the I/O
    /// virtual address `iova` in work requests.
    ///
    /// # Safety
    ///
    /// `ibdev` is a registered device of ours; called in the process's context (a user verb).
    unsafe fn pin(
        ibdev: *mut bindings::ib_device,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
    ) -> Result<Self> {
        if length == 0 {
            return Err(EINVAL);
        }
        iova.checked_add(length).ok_or(EINVAL)?;
        let addr = usize::try_from(start).map_err(|_| EINVAL)?;
        let size = usize::try_from(length).map_err(|_| EINVAL)?;
        let page = bindings::PAGE_SIZE as u64;
        let first = start & !(page - 1);
        let end = start.checked_add(length).ok_or(EINVAL)?;
        let pages = end.div_ceil(page) - first / page;
        let pages = u32::try_from(pages).map_err(|_| ENOMEM)?;
        // SAFETY: `ibdev` is live (the caller's guarantee); the core checks the range against
        // the process's memory and its locked-memory limit.
        let umem = crate::error::from_err_ptr(unsafe {
            bindings::ib_umem_get(ibdev, addr as _, size, access)
        })?;
        // INVARIANT: `umem` is ours; the list is filled below before anyone sees it.
        let mut this = Self {
            umem: NonNull::new(umem).ok_or(ENOMEM)?,
            list: PageList::new(0)?,
        };
        // Sized once the core checked the locked-memory limit: a process cannot make the
        // provider allocate for more memory than it may pin.
        let mut list = PageList::new(pages)?;
        // SAFETY: `ib_block_iter` is plain data, set up by the start call.
        let mut iter: bindings::ib_block_iter = unsafe { core::mem::zeroed() };
        // SAFETY: `umem` is live; the iterator walks its DMA-mapped scatterlist in pages.
        unsafe {
            bindings::__rdma_umem_block_iter_start(&mut iter, umem, bindings::PAGE_SIZE as _)
        };
        // SAFETY: As above, `iter` started on `umem`.
        while unsafe { bindings::__rdma_umem_block_iter_next(&mut iter) } {
            let slot = list.pages.get_mut(list.count).ok_or(EINVAL)?;
            // SAFETY: `iter` is on a block of `umem`.
            *slot = unsafe { bindings::rdma_block_iter_dma_address(&mut iter) };
            list.count += 1;
        }
        if list.count as u64 != u64::from(pages) {
            return Err(EINVAL);
        }
        list.first_offset = start - first;
        list.iova = iova;
        list.length = length;
        list.page_shift = bindings::PAGE_SHIFT;
        this.list = list;
        Ok(this)
    }

    /// The I/O virtual address of the first byte.
    #[inline]
    pub fn iova(&self) -> u64 {
        self.list.iova()
    }

    /// The length of the region in bytes.
    #[inline]
    pub fn length(&self) -> u64 {
        self.list.length()
    }

    /// Calls `f` with the memory of `len` bytes starting `offset` bytes after the start of the
    /// region, in page-contiguous pieces and in order. Fails if the range is not inside.
    #[inline]
    pub fn for_each_range(
        &self,
        offset: u64,
        len: u64,
        f: impl FnMut(DmaRange<'_>) -> Result,
    ) -> Result {
        self.list.for_each_range(offset, len, f)
    }
}

impl Drop for UserPages {
    fn drop(&mut self) {
        // SAFETY: Ours to release (type invariant); no `DmaRange` into the pages outlives a
        // `for_each_range` call on `&self`.
        unsafe { bindings::ib_umem_release(self.umem.as_ptr()) };
    }
}

/// `reg_user_mr`: pins the process's buffer and hands it to the driver.
///
/// # Safety
///
/// Called by the RDMA core for a user verb, in the process's context, with a live PD of one
/// of our devices and the verb's `udata`.
pub(crate) unsafe extern "C" fn reg_user_mr_callback<T: Driver>(
    pd: *mut bindings::ib_pd,
    start: u64,
    length: u64,
    virt_addr: u64,
    access: c_int,
    udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    if udata.is_null() {
        return EINVAL.to_ptr();
    }
    if access as u32 & bindings::ib_access_flags_IB_ACCESS_ON_DEMAND != 0 {
        return EOPNOTSUPP.to_ptr();
    }
    // SAFETY: `pd` is valid and its `device` set by the core.
    let ibdev = unsafe { (*pd).device };
    // SAFETY: Our device, in the process's context (the caller's guarantee).
    let pages = match unsafe { UserPages::pin(ibdev, start, length, virt_addr, access) } {
        Ok(p) => p,
        Err(e) => return e.to_ptr(),
    };
    // SAFETY: `udata` is the verb's, valid for the call (checked non-null above).
    let inner = unsafe { &*udata };
    let mut udata = super::user::UserData { inner };
    // SAFETY: A live PD of one of our devices (the caller's guarantee).
    let id = unsafe { PdId::of(pd) };
    let create = |d: &T, dev: &_| d.reg_user_mr(dev, id, access as u32, pages, &mut udata);
    // SAFETY: A device of ours, alive while it has PDs.
    new_mr(unsafe { with_driver::<T, _>(ibdev, create) }, None)
}

/// The `set_page` callback of `ib_sg_to_pages`: appends a page to the list being filled.
///
/// # Safety
///
/// Called by `ib_sg_to_pages` from `map_mr_sg_callback` with that call's MR.
unsafe extern "C" fn set_page_callback(mr: *mut bindings::ib_mr, addr: u64) -> c_int {
    let container = mr.cast::<MrContainer>();
    // SAFETY: `map_mr_sg_callback` set `filling` to the list it holds exclusively for the call.
    let list = unsafe { &mut *(*container).filling };
    match list.pages.get_mut(list.count) {
        Some(slot) => {
            *slot = addr;
            list.count += 1;
            0
        }
        None => ENOMEM.to_errno(),
    }
}

/// `map_mr_sg`.
///
/// # Safety
///
/// Called by the RDMA core with an MR that `alloc_mr_callback` created and a valid scatterlist
/// of `sg_nents` entries.
pub(crate) unsafe extern "C" fn map_mr_sg_callback(
    mr: *mut bindings::ib_mr,
    sg: *mut bindings::scatterlist,
    sg_nents: c_int,
    sg_offset: *mut c_uint,
) -> c_int {
    let container = mr.cast::<MrContainer>();
    let mut fill = |list: &mut PageList| -> Result<u32> {
        list.count = 0;
        // SAFETY: `container` is live (the caller's guarantee); `filling` is reset before the
        // list's borrow ends, and the consumer serialises map calls on one MR.
        let mapped = unsafe {
            (*container).filling = list;
            let n = bindings::ib_sg_to_pages(mr, sg, sg_nents, sg_offset, Some(set_page_callback));
            (*container).filling = core::ptr::null_mut();
            n
        };
        if mapped < 0 {
            return Err(Error::from_errno(mapped));
        }
        // SAFETY: `ib_sg_to_pages` set the MR's iova, length and page size.
        let page_size = unsafe {
            list.iova = (*mr).iova;
            list.length = (*mr).length;
            (*mr).page_size
        };
        if !page_size.is_power_of_two() {
            list.count = 0;
            return Err(EINVAL);
        }
        list.page_shift = page_size.trailing_zeros();
        // The first page starts at the first byte rounded down to the page size.
        list.first_offset = list.iova & (u64::from(page_size) - 1);
        // INVARIANT: The pages and geometry are those `ib_sg_to_pages` reported.
        Ok(mapped as u32)
    };
    // SAFETY: Written by `new_mr`, alive until `dereg_mr`.
    let provider = unsafe { &**(*container).mr };
    match provider.map_pages(&mut fill) {
        Ok(n) => n as c_int,
        Err(e) => e.to_errno(),
    }
}

/// `dereg_mr`.
///
/// # Safety
///
/// Called by the RDMA core, once, with an MR that `new_mr` allocated and nothing uses.
pub(crate) unsafe extern "C" fn dereg_mr_callback(
    mr: *mut bindings::ib_mr,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `mr` is the first field of a container `new_mr` leaked from a `KBox`; taking
        // it back frees it once.
        let mut container = unsafe { KBox::from_raw(mr.cast::<MrContainer>()) };
        if let Some(key) = &container.dma_key {
            key.clear();
        }
        container.mr.deregister();
        // SAFETY: Written by `new_mr` and taken only here.
        drop(unsafe { ManuallyDrop::take(&mut container.mr) });
        Ok(0)
    })
}

#[cfg(CONFIG_KUNIT)]
mod tests {
    use super::{DmaKey, DmaMemory, Sge};
    use crate::{kunit::suite::Test, kunit_expect, kunit_expect_eq, prelude::*};

    const KEY: u32 = 0x1234_5601;

    /// A DMA MR's memory whose key is `key` (`None`: not registered), over a buffer of the test.
    fn memory(key: Option<u32>) -> Result<DmaMemory> {
        let cell = DmaKey::new()?;
        if let Some(key) = key {
            cell.set(key);
        }
        Ok(DmaMemory { key: cell })
    }

    fn entry(buf: &[u8; 64], lkey: u32) -> Sge {
        Sge::posted_for_test(buf.as_ptr() as u64, buf.len() as u32, lkey)
    }

    fn bytes_of_a_posted_entry_are_reached(test: &mut Test) -> Result {
        let mut buf = [0u8; 64];
        buf[10] = 0x5a;
        let mem = memory(Some(KEY))?;
        let sge = entry(&buf, KEY);
        let range = mem.range(&sge, 8, 16);
        kunit_expect!(test, range.is_some());
        if let Some(range) = range {
            kunit_expect_eq!(test, range.len(), 16);
            let mut out = [0u8; 4];
            range.read(0, &mut out)?;
            kunit_expect_eq!(test, out, [0, 0, 0x5a, 0]);
        }
        kunit_expect!(test, mem.range(&sge, 0, 64).is_some());
        Ok(())
    }

    fn nothing_outside_the_entry(test: &mut Test) -> Result {
        let buf = [0u8; 64];
        let mem = memory(Some(KEY))?;
        let sge = entry(&buf, KEY);
        kunit_expect!(test, mem.range(&sge, 60, 8).is_none());
        kunit_expect!(test, mem.range(&sge, 64, 1).is_none());
        kunit_expect!(test, mem.range(&sge, u64::MAX, 2).is_none());
        Ok(())
    }

    fn only_under_the_mrs_key(test: &mut Test) -> Result {
        let buf = [0u8; 64];
        // The entry of another MR: its address is that MR's, not a kernel address.
        let mem = memory(Some(KEY))?;
        kunit_expect!(test, mem.range(&entry(&buf, KEY + 1), 0, 8).is_none());
        // Before the core learned the key, and after deregistration.
        let unkeyed = memory(None)?;
        kunit_expect!(test, unkeyed.range(&entry(&buf, KEY), 0, 8).is_none());
        let dead = memory(Some(KEY))?;
        dead.key.clear();
        kunit_expect!(test, dead.range(&entry(&buf, KEY), 0, 8).is_none());
        Ok(())
    }

    crate::kunit_suite!(
        rust_rdma_dma_memory,
        [
            bytes_of_a_posted_entry_are_reached,
            nothing_outside_the_entry,
            only_under_the_mrs_key
        ]
    );
}
