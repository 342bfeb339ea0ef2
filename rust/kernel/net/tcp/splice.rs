// SPDX-License-Identifier: GPL-2.0

//! Memory TCP takes by page reference (`MSG_SPLICE_PAGES`).
//!
//! A protocol that frames data read from memory it does not own (iWARP sends FPDUs out of the
//! consumer's registered buffers) would otherwise copy twice: into its own frame buffer, then
//! into socket buffers. With `MSG_SPLICE_PAGES` the socket buffers take page references
//! instead, so the bytes are copied by nobody on transmit. What that asks of the sender is that
//! the pages stay alive while TCP holds them (each socket buffer takes its own reference) and
//! that nobody writes bytes that were handed over, since TCP reads them until the peer
//! acknowledges them.
//!
//! - [`PagePiece`] is a byte range within one page (or one compound allocation) plus a page
//!   reference, so a piece keeps its memory alive however long it is kept;
//! - [`SpliceBuffer`] is memory of our own for what is not already in pages (a protocol's
//!   headers, or copied payload): written in place, then handed over piece by piece, never
//!   written again once handed over;
//! - [`SpliceList`] collects pieces in wire order; [`TcpSocket::send_list`] sends them in one
//!   call.
//!
//! C headers: [`include/linux/net.h`](srctree/include/linux/net.h),
//! [`include/linux/bvec.h`](srctree/include/linux/bvec.h)

use super::{to_len, MsgFlags, TcpSocket};
use crate::{
    alloc::{
        flags::{GFP_KERNEL, GFP_NOWAIT},
        KVec,
    },
    bindings,
    error::{code::*, Result},
};
use core::ptr::NonNull;

/// A byte range of a page that TCP may take by reference, with a reference on the page.
///
/// # Invariants
///
/// `0.bv_page` is a page (or the head of a compound allocation) that is not a slab page and has
/// a kernel mapping; this value holds one reference on it. `0.bv_offset..0.bv_offset +
/// 0.bv_len` lies inside the page (or the compound allocation).
pub struct PagePiece(bindings::bio_vec);

// SAFETY: A page reference may be taken and dropped from any thread.
unsafe impl Send for PagePiece {}

impl PagePiece {
    /// The piece of `len` bytes at kernel virtual address `addr`, if that memory is in a page
    /// TCP can take by reference: one with a linear mapping (not vmalloc) that is not a slab
    /// page (`sendpage_ok`), and the range does not cross a page boundary.
    ///
    /// # Safety
    ///
    /// `addr..addr + len` must be mapped kernel memory that stays allocated for the duration of
    /// the call (the piece takes its own page reference before returning).
    pub unsafe fn from_kernel_address(addr: usize, len: usize) -> Option<Self> {
        let page_size = bindings::PAGE_SIZE;
        let offset = addr % page_size;
        if len == 0 || offset.checked_add(len)? > page_size {
            return None;
        }
        let ptr = addr as *const core::ffi::c_void;
        // SAFETY: Any address may be asked about.
        if !unsafe { bindings::virt_addr_valid(ptr) } {
            return None;
        }
        // SAFETY: A linear-map address (checked above) has a `struct page`.
        let page = unsafe { bindings::virt_to_page(ptr) };
        // SAFETY: `page` is the page of memory the caller keeps allocated.
        if page.is_null() || !unsafe { bindings::sendpage_ok(page) } {
            return None;
        }
        // SAFETY: As above; the page is in use (`sendpage_ok` saw a reference), so taking one
        // more is allowed.
        unsafe { bindings::get_page(page) };
        // INVARIANT: One reference taken; the range is inside the page; not slab; mapped.
        Some(Self(bindings::bio_vec {
            bv_page: page,
            bv_len: len as u32,
            bv_offset: offset as u32,
        }))
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.0.bv_len as usize
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.0.bv_len == 0
    }
}

impl Drop for PagePiece {
    fn drop(&mut self) {
        // SAFETY: We hold one reference (type invariant).
        unsafe { bindings::put_page(self.0.bv_page) };
    }
}

/// The allocation order of a [`SpliceBuffer`].
const SPLICE_ORDER: u32 = 4;

/// Memory of our own to send by page reference: 64 KiB of physically contiguous pages (one
/// compound allocation), filled from the front and handed over in pieces. Bytes before
/// [`SpliceBuffer::unsent_mut`] have gone to TCP and are never written again; the socket
/// buffers hold page references, so the allocation lives until TCP and this value are both
/// done with it.
///
/// # Invariants
///
/// `page` is the head of a compound allocation of `1 << SPLICE_ORDER` pages, of which this
/// value holds one reference; `addr` is its kernel mapping, [`SpliceBuffer::LEN`] bytes long.
/// Bytes `handed..LEN` are written by nobody but this value; `handed <= LEN`.
pub struct SpliceBuffer {
    page: NonNull<bindings::page>,
    addr: NonNull<u8>,
    handed: usize,
}

// SAFETY: The pages are plain memory owned through one reference; any thread may use or drop
// it.
unsafe impl Send for SpliceBuffer {}

#[cfg(CONFIG_HIGHMEM)]
compile_error!("SpliceBuffer needs pages with a permanent kernel mapping");

impl SpliceBuffer {
    /// Its size in bytes.
    pub const LEN: usize = bindings::PAGE_SIZE << SPLICE_ORDER;

    /// Allocates one; fails quietly (no warning) when memory is too fragmented, so the caller
    /// can fall back to copying.
    pub fn new() -> Result<Self> {
        let flags = bindings::GFP_KERNEL
            | (1 << bindings::___GFP_COMP_BIT)
            | (1 << bindings::___GFP_NOWARN_BIT);
        // SAFETY: Any flags and order may be asked for; null means failure.
        let raw = unsafe { bindings::alloc_pages(flags, SPLICE_ORDER) };
        let page = NonNull::new(raw).ok_or(ENOMEM)?;
        // SAFETY: A fresh allocation; without highmem it has a permanent mapping.
        let addr = unsafe { bindings::page_address(page.as_ptr()) };
        let Some(addr) = NonNull::new(addr.cast::<u8>()) else {
            // SAFETY: Ours, just allocated with this order.
            unsafe { bindings::__free_pages(page.as_ptr(), SPLICE_ORDER) };
            return Err(ENOMEM);
        };
        // INVARIANT: One reference, ours; the mapping covers the whole compound allocation;
        // nothing handed over yet.
        Ok(Self {
            page,
            addr,
            handed: 0,
        })
    }

    /// The bytes not handed over yet, to fill.
    #[inline]
    pub fn unsent_mut(&mut self) -> &mut [u8] {
        // SAFETY: Bytes `handed..LEN` are mapped and written only through this value (type
        // invariant), borrowed mutably with `self`.
        unsafe {
            core::slice::from_raw_parts_mut(
                self.addr.as_ptr().add(self.handed),
                Self::LEN - self.handed,
            )
        }
    }

    /// How many bytes are not handed over yet.
    #[inline]
    pub fn unsent_len(&self) -> usize {
        Self::LEN - self.handed
    }

    /// Hands the next `len` unsent bytes over as a piece (for a [`SpliceList`]); from now on
    /// they are never written again. `None` if fewer are left or `len` is 0.
    pub fn hand_over(&mut self, len: usize) -> Option<PagePiece> {
        if len == 0 || len > self.unsent_len() {
            return None;
        }
        // SAFETY: The allocation is ours and alive (type invariant); one more reference on
        // its head keeps the whole compound allocation.
        unsafe { bindings::get_page(self.page.as_ptr()) };
        let piece = PagePiece(bindings::bio_vec {
            bv_page: self.page.as_ptr(),
            bv_len: len as u32,
            bv_offset: self.handed as u32,
        });
        // INVARIANT: The handed-over bytes leave the writable range; `handed + len <= LEN`.
        self.handed += len;
        Some(piece)
    }
}

impl Drop for SpliceBuffer {
    fn drop(&mut self) {
        // SAFETY: Drops our reference (type invariant); pieces and socket buffers hold theirs,
        // and the last one frees the allocation.
        unsafe { bindings::__free_pages(self.page.as_ptr(), SPLICE_ORDER) };
    }
}

/// Pieces to send in order by one [`TcpSocket::send_list`], with room fixed when it is made
/// (pushing never allocates).
///
/// # Invariants
///
/// Each entry of `vecs` is a [`PagePiece`]'s `bio_vec` whose page reference the list holds;
/// `len` is the sum of their lengths.
pub struct SpliceList {
    vecs: KVec<bindings::bio_vec>,
    len: usize,
}

// SAFETY: Page references may be held and dropped from any thread.
unsafe impl Send for SpliceList {}

impl SpliceList {
    /// An empty list with room for `capacity` pieces.
    pub fn with_capacity(capacity: usize) -> Result<Self> {
        Ok(Self {
            vecs: KVec::with_capacity(capacity, GFP_KERNEL)?,
            len: 0,
        })
    }

    /// Appends `piece`; gives it back when the list is full.
    pub fn push(&mut self, piece: PagePiece) -> core::result::Result<(), PagePiece> {
        if self.vecs.len() == self.vecs.capacity() {
            return Err(piece);
        }
        let vec = piece.0;
        // With room left, pushing does not allocate, so it cannot fail.
        if self.vecs.push(vec, GFP_NOWAIT).is_err() {
            return Err(piece);
        }
        // INVARIANT: The piece's reference moves into the list.
        core::mem::forget(piece);
        self.len += vec.bv_len as usize;
        Ok(())
    }

    /// Puts `piece` before the `index`th piece (at the end if there are fewer); gives it back
    /// when the list is full.
    pub fn insert(
        &mut self,
        index: usize,
        piece: PagePiece,
    ) -> core::result::Result<(), PagePiece> {
        self.push(piece)?;
        let from = index.min(self.vecs.len() - 1);
        if let Some(tail) = self.vecs.as_mut_slice().get_mut(from..) {
            tail.rotate_right(1);
        }
        Ok(())
    }

    /// How many pieces it holds.
    #[inline]
    pub fn count(&self) -> usize {
        self.vecs.len()
    }

    /// How many pieces it can hold.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.vecs.capacity()
    }

    /// Drops the pieces from the `count`th on (and their page references).
    #[inline]
    pub fn truncate(&mut self, count: usize) {
        let Some(dropped) = self.vecs.get(count..) else {
            return;
        };
        for vec in dropped {
            self.len -= vec.bv_len as usize;
            // SAFETY: The list holds this reference (type invariant); the entry goes below.
            unsafe { bindings::put_page(vec.bv_page) };
        }
        // SAFETY: Shrinking; `bio_vec` is plain data whose references were dropped above.
        unsafe { self.vecs.set_len(count) };
    }

    /// Drops its first `n` bytes (those TCP took): the pieces they cover whole, with their
    /// page references, and the start of the piece they end in.
    fn advance(&mut self, n: usize) {
        let mut left = n.min(self.len);
        let mut whole = 0;
        for vec in self.vecs.iter_mut() {
            let len = vec.bv_len as usize;
            if left >= len {
                left -= len;
                self.len -= len;
                whole += 1;
                // SAFETY: The list holds this reference (type invariant); the entry leaves the
                // list below.
                unsafe { bindings::put_page(vec.bv_page) };
            } else {
                // INVARIANT: The piece shrinks from the front, so it stays inside its page.
                vec.bv_offset += left as u32;
                vec.bv_len -= left as u32;
                self.len -= left;
                break;
            }
        }
        let count = self.vecs.len();
        self.vecs.as_mut_slice().copy_within(whole.., 0);
        // SAFETY: Shrinking by the `whole` entries whose references were dropped above; the
        // ones after them moved to the front.
        unsafe { self.vecs.set_len(count - whole) };
    }

    /// Total bytes in it.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Empties it, dropping the page references.
    #[inline]
    pub fn clear(&mut self) {
        self.truncate(0);
    }
}

impl Drop for SpliceList {
    fn drop(&mut self) {
        self.clear();
    }
}

impl TcpSocket {
    /// Sends the pieces of `list` in order, the socket buffers taking the pages by reference
    /// (`MSG_SPLICE_PAGES`), and takes what TCP queued off the list. Blocks until all of it
    /// is queued, unless `flags` has [`MsgFlags::DONTWAIT`]: then it queues what the socket
    /// has room for and returns `EAGAIN` with the rest still in the list
    /// ([`super::TcpCallbacks::write_space`] tells when to go on). On any other error the list
    /// is emptied: the stream is broken.
    pub fn send_list(&self, list: &mut SpliceList, flags: MsgFlags) -> Result {
        let total = list.len();
        let mut msg = super::message(flags.0 | bindings::MSG_SPLICE_PAGES);
        // SAFETY: The list's entries describe `total` bytes of pages it holds references on,
        // alive and unchanged for the call (the stack takes its own references for what it
        // keeps); `msg` is ours.
        unsafe {
            bindings::iov_iter_bvec(
                &mut msg.msg_iter,
                bindings::ITER_SOURCE,
                list.vecs.as_ptr(),
                list.vecs.len() as _,
                total,
            )
        };
        let mut sent = 0;
        let result = loop {
            if sent >= total {
                break Ok(());
            }
            // SAFETY: `sock` is valid; `msg` describes the pieces as above, advanced past what
            // earlier calls queued.
            match to_len(unsafe { bindings::sock_sendmsg(self.sock.as_ptr(), &mut msg) }) {
                Ok(0) => break Err(EPIPE),
                Ok(n) => sent += n,
                Err(e) => break Err(e),
            }
        };
        match result {
            Err(e) if e == EAGAIN => list.advance(sent),
            _ => list.clear(),
        }
        result
    }
}
