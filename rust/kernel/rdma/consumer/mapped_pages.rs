// SPDX-License-Identifier: GPL-2.0

//! Pages that belong to someone else, held and DMA-mapped for one device so that a
//! fast-registration region can expose them to a peer.
//!
//! A transport lets a peer write straight into memory it does not own: the NFS client's read
//! reply pages (from the page cache) are registered so that the server RDMA Writes the file data
//! into them, and a write call's pages so that it RDMA Reads them. [`MappedPages`] takes a
//! reference on each page (`get_page`) for as long as it lives and maps a byte range of them
//! with a scatterlist (`ib_dma_map_sg`); a [`FastRegMr`](super::fast_reg::FastRegMr) registered
//! over them keeps them until a `LOCAL_INV` of it completed, its next registration or its end.
//! So the device, and a peer through it, only ever reaches pages that exist, whatever the owner
//! of the pages does meanwhile: keeping the peer from writing into pages their owner has reused
//! is the protocol's business (invalidate before the pages go back), not memory safety's.
//!
//! The pages may also be those of an RPC call's buffers ([`MappedPages::of_xdr`]).
//!
//! The CPU sees what the device wrote after [`MappedPages::sync_for_cpu`], or once the mapping
//! is dropped (unmapping syncs).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::client::ProtectionDomain;
use crate::sunrpc::xprt::XdrPages;
use crate::{
    bindings, ffi::c_int, page::Page, page::PAGE_SIZE, prelude::*, sync::Arc, types::Opaque,
};
use core::ptr::NonNull;

const BIDIRECTIONAL: bindings::dma_data_direction = bindings::dma_data_direction_DMA_BIDIRECTIONAL;

/// A byte range over pages, with a reference held on each page and the range DMA-mapped for
/// one device.
///
/// # Invariants
///
/// `pages` holds one reference (`get_page`) on each page, dropped in `drop`. `sg` has one
/// entry per page, initialised as one table and mapped with `ib_dma_map_sg` for `pd`'s device
/// (`mapped` entries resulted) until `drop`; it is never changed after that, so it may be
/// read through shared references. The range is `len` bytes from `offset` in the first page.
pub struct MappedPages {
    sg: KVec<Opaque<bindings::scatterlist>>,
    pages: KVec<NonNull<bindings::page>>,
    mapped: c_int,
    offset: usize,
    len: usize,
    pd: Arc<ProtectionDomain>,
}

// SAFETY: The page references and the mapping may be released from any thread.
unsafe impl Send for MappedPages {}
// SAFETY: Nothing is changed through shared references (type invariant).
unsafe impl Sync for MappedPages {}

impl MappedPages {
    /// Maps `len` bytes of `pages` from byte `offset` (counted from the first page) for `pd`'s
    /// device. `EINVAL` if the range is empty or runs past the pages.
    pub fn new(
        pd: &Arc<ProtectionDomain>,
        pages: &[Page],
        offset: usize,
        len: usize,
    ) -> Result<Arc<Self>> {
        let mut raw = KVec::with_capacity(pages.len(), GFP_KERNEL)?;
        for page in pages {
            raw.push(page.as_ptr(), GFP_KERNEL)?;
        }
        // SAFETY: Each page is owned by a `Page` borrowed for the call.
        unsafe { Self::from_raw_pages(pd, &raw, offset, len) }
    }

    /// Maps `len` bytes from byte `from` of a call's buffer `xdr` for `pd`'s device (a
    /// transport registers a long range in pieces, one region each). `EINVAL` if the bytes
    /// are not all in `xdr`.
    pub fn of_xdr(
        pd: &Arc<ProtectionDomain>,
        xdr: &XdrPages<'_>,
        from: usize,
        len: usize,
    ) -> Result<Arc<Self>> {
        let end = from.checked_add(len).ok_or(EINVAL)?;
        if end > xdr.len() {
            return Err(EINVAL);
        }
        // SAFETY: The request keeps the pages of `xdr` while it is borrowed (its invariant).
        unsafe { Self::from_raw_pages(pd, xdr.raw_pages(), xdr.offset() + from, len) }
    }

    /// Maps `len` bytes of the pages `pages` from byte `offset` for `pd`'s device, holding a
    /// reference on each page it uses.
    ///
    /// # Safety
    ///
    /// Every pointer in `pages` is a valid page that its owner keeps for the call.
    pub(crate) unsafe fn from_raw_pages(
        pd: &Arc<ProtectionDomain>,
        pages: &[*mut bindings::page],
        offset: usize,
        len: usize,
    ) -> Result<Arc<Self>> {
        // The pages the range touches, and where it starts in the first of them.
        let skip = offset / PAGE_SIZE;
        let first = offset % PAGE_SIZE;
        let end = first.checked_add(len).ok_or(EINVAL)?;
        let count = end.div_ceil(PAGE_SIZE);
        let used = pages
            .get(skip..)
            .and_then(|p| p.get(..count))
            .ok_or(EINVAL)?;
        if len == 0 || u32::try_from(len).is_err() {
            return Err(EINVAL);
        }
        let nents = c_int::try_from(count)?;
        let mut sg = KVec::with_capacity(count, GFP_KERNEL)?;
        let mut held = KVec::with_capacity(count, GFP_KERNEL)?;
        for _ in 0..count {
            sg.push(Opaque::uninit(), GFP_KERNEL)?;
        }
        let table = sg.as_mut_ptr().cast::<bindings::scatterlist>();
        // SAFETY: `table` has `count` entries, ours to initialise.
        unsafe { bindings::sg_init_table(table, nents as u32) };
        let mut at = first;
        let mut left = len;
        for (index, &page) in used.iter().enumerate() {
            let page = NonNull::new(page).ok_or(EINVAL)?;
            let piece = left.min(PAGE_SIZE - at);
            // SAFETY: `page` is valid for the call (the caller's guarantee); the reference
            // taken is dropped in `drop` (or below, if this fails half-way).
            unsafe { bindings::get_page(page.as_ptr()) };
            // Cannot fail: the capacity is `count`.
            let _ = held.push(page, GFP_KERNEL);
            // SAFETY: `index < count` entries of the initialised table; `piece` bytes from
            // `at` lie within the page.
            unsafe {
                bindings::sg_set_page(table.add(index), page.as_ptr(), piece as u32, at as u32)
            };
            left -= piece;
            at = 0;
        }
        let put_all = |held: &KVec<NonNull<bindings::page>>| {
            for page in held.iter() {
                // SAFETY: Each reference was taken above.
                unsafe { bindings::put_page(page.as_ptr()) };
            }
        };
        let device = pd.device().as_raw();
        // SAFETY: The table describes pages we hold; the device is registered (the PD holds a
        // reference to it).
        let mapped = unsafe { bindings::ib_dma_map_sg(device, table, nents, BIDIRECTIONAL) };
        if mapped <= 0 {
            put_all(&held);
            return Err(ENOMEM);
        }
        let this = Arc::new(
            Self {
                sg,
                pages: held,
                mapped,
                offset: first,
                len,
                pd: pd.clone(),
            },
            GFP_KERNEL,
        );
        // On failure, the value was dropped, which unmapped and released everything.
        // INVARIANT: References held and the table mapped, above.
        Ok(this?)
    }

    /// Bytes in the range.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty (never: a range has at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The protection domain the pages are mapped for.
    pub fn pd(&self) -> &Arc<ProtectionDomain> {
        &self.pd
    }

    /// Makes what the device wrote into the pages visible to the CPU.
    pub fn sync_for_cpu(&self) {
        // SAFETY: The table is mapped for the PD's device (type invariant); syncing only
        // orders caches, whatever the device does meanwhile.
        unsafe {
            bindings::ib_dma_sync_sg_for_cpu(
                self.pd.device().as_raw(),
                self.table(),
                self.nents(),
                BIDIRECTIONAL,
            )
        };
    }

    /// The local memory of a work request for `len` bytes of the range from byte `offset`,
    /// reached with the PD's local DMA key: `EINVAL` unless they are at least one byte, all in
    /// the range and within one mapped segment (the bytes of one page always are).
    pub(crate) fn sge(&self, offset: usize, len: usize) -> Result<bindings::ib_sge> {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if len == 0 || end > self.len {
            return Err(EINVAL);
        }
        let table = self.table();
        let mut start = 0usize;
        for index in 0..usize::try_from(self.mapped)? {
            // SAFETY: The first `mapped` entries of the table hold the mapping (type
            // invariant); the table is not changed while `self` lives.
            let (addr, seg_len) = unsafe {
                let entry = table.add(index);
                (bindings::sg_dma_address(entry), bindings::sg_dma_len(entry))
            };
            let seg_end = start + seg_len as usize;
            if offset < seg_end {
                if end > seg_end {
                    return Err(EINVAL);
                }
                return Ok(bindings::ib_sge {
                    addr: addr + (offset - start) as u64,
                    length: u32::try_from(len)?,
                    lkey: self.pd.local_dma_lkey(),
                });
            }
            start = seg_end;
        }
        Err(EINVAL)
    }

    /// The mapped scatterlist, for `ib_map_mr_sg`, which only reads it.
    pub(crate) fn table(&self) -> *mut bindings::scatterlist {
        self.sg.as_ptr().cast_mut().cast()
    }

    /// Entries of the table the mapping produced.
    pub(crate) fn mapped_nents(&self) -> c_int {
        self.mapped
    }

    /// Entries of the table.
    fn nents(&self) -> c_int {
        // Cannot fail: checked when made.
        c_int::try_from(self.sg.len()).unwrap_or(c_int::MAX)
    }

    /// Pages the range spans (what a region must be able to map).
    pub(crate) fn page_count(&self) -> usize {
        (self.offset + self.len).div_ceil(PAGE_SIZE)
    }
}

impl Drop for MappedPages {
    fn drop(&mut self) {
        // SAFETY: The table was mapped in `from_raw_pages` with these entries (type
        // invariant); nothing uses the mapping any more (registrations and work requests hold
        // references to this value).
        unsafe {
            bindings::ib_dma_unmap_sg(
                self.pd.device().as_raw(),
                self.table(),
                self.nents(),
                BIDIRECTIONAL,
            )
        };
        for page in self.pages.iter() {
            // SAFETY: Each reference was taken in `from_raw_pages` (type invariant).
            unsafe { bindings::put_page(page.as_ptr()) };
        }
    }
}
