// SPDX-License-Identifier: GPL-2.0

//! What a transport sees of a call: the request (`struct rpc_rqst`), its task, the encoded call
//! and the buffer its reply goes to (`struct xdr_buf`: head, page data, tail).

use crate::{bindings, ffi::c_void, page::PAGE_SIZE, prelude::*};
use core::{marker::PhantomData, ops::Range, ptr::NonNull};

/// How a request's buffer is allocated: like `GFP_NOFS` (NFS writeback may be what needs the
/// memory), failing rather than retrying hard or warning (the RPC client retries later), as
/// one compound page, so that a reference on any of its pages keeps all of them.
pub(super) const BUFFER_GFP: bindings::gfp_t = (1 << bindings::___GFP_DIRECT_RECLAIM_BIT)
    | (1 << bindings::___GFP_KSWAPD_RECLAIM_BIT)
    | (1 << bindings::___GFP_IO_BIT)
    | (1 << bindings::___GFP_NOWARN_BIT)
    | (1 << bindings::___GFP_NORETRY_BIT)
    | (1 << bindings::___GFP_COMP_BIT);

/// The page order of a buffer of `size` bytes.
pub(super) fn buffer_order(size: usize) -> u32 {
    let pages = size.max(1).div_ceil(PAGE_SIZE);
    pages.next_power_of_two().trailing_zeros()
}

/// A call's request (`struct rpc_rqst`), for the callback it is passed to.
///
/// # Invariants
///
/// `ptr` is a valid request, owned by the RPC client, for `'a`.
pub struct Rqst<'a> {
    ptr: NonNull<bindings::rpc_rqst>,
    _call: PhantomData<&'a bindings::rpc_rqst>,
}

impl Rqst<'_> {
    /// # Safety
    ///
    /// `ptr` is a valid request for the view's lifetime.
    pub(super) unsafe fn from_raw(ptr: *mut bindings::rpc_rqst) -> Option<Self> {
        // INVARIANT: The caller's guarantee.
        NonNull::new(ptr).map(|ptr| Self {
            ptr,
            _call: PhantomData,
        })
    }

    fn raw(&self) -> &bindings::rpc_rqst {
        // SAFETY: Valid for `'a` (type invariant).
        unsafe { self.ptr.as_ref() }
    }

    /// The call's XID, in host byte order.
    pub fn xid(&self) -> u32 {
        u32::from_be(self.raw().rq_xid)
    }

    /// The connect cookie of the connection the call was last sent on
    /// ([`Xprt::connect_cookie`](super::Xprt::connect_cookie) then); one less than the
    /// transport's at the time the call was made, if it was never sent.
    pub fn connect_cookie(&self) -> u32 {
        self.raw().rq_connect_cookie
    }

    /// Whether this is a reply of the backchannel (it has no call buffer).
    pub fn is_backchannel_reply(&self) -> bool {
        self.raw().rq_buffer.is_null()
    }

    /// The encoded call (`rq_snd_buf`), stable while the call is being sent.
    pub fn snd_buf(&self) -> XdrBuf<'_> {
        XdrBuf {
            buf: &self.raw().rq_snd_buf,
            owner: self.buffer_range(),
        }
    }

    /// Where the request's buffer (`rq_buffer`, call then reply part) lies, if it has one.
    ///
    /// The transport's `buf_alloc` allocated it as one compound page (see the adapter), so each
    /// of its pages may be referenced on its own.
    fn buffer_range(&self) -> Option<Range<usize>> {
        let r = self.raw();
        let start = r.rq_buffer as usize;
        let len = r.rq_callsize.checked_add(r.rq_rcvsize)?;
        (start != 0).then_some(start..start.checked_add(len)?)
    }

    /// Whether the call's credential protects the whole message (RPCSEC_GSS integrity or
    /// privacy): its data items must then travel inside the message, never placed apart
    /// (`RPCAUTH_AUTH_DATATOUCH`).
    pub fn auth_touches_data(&self) -> bool {
        let cred = self.raw().rq_cred;
        if cred.is_null() {
            return false;
        }
        // SAFETY: A call's credential and its auth are valid while the call is.
        let auth = unsafe { (*cred).cr_auth };
        if auth.is_null() {
            return false;
        }
        // SAFETY: As above.
        let flags = unsafe { (*auth).au_flags };
        flags & (1 << bindings::RPCAUTH_AUTH_DATATOUCH) != 0
    }

    /// The part `part` of the reply buffer (`rq_rcv_buf`) as pages, for a device to write the
    /// reply into: `None` if the part is empty. Missing pages of a sparse page array are
    /// allocated (the request frees them with the others).
    ///
    /// # Safety
    ///
    /// The caller keeps every other writer of the page array out (the transport's receive lock)
    /// for the call.
    pub(super) unsafe fn rcv_pages(&self, part: XdrPart) -> Result<Option<XdrPages<'_>>> {
        let buf = &self.raw().rq_rcv_buf;
        // SAFETY: The caller keeps other writers of the page array out.
        unsafe { xdr_part_pages(buf, self.buffer_range(), part, true) }
    }

    /// The layout of the buffer the reply goes to (`rq_rcv_buf`). Its contents are only written
    /// through [`Xprt::complete_reply`](super::Xprt::complete_reply).
    pub fn rcv_buf(&self) -> XdrBufLayout<'_> {
        XdrBufLayout {
            buf: &self.raw().rq_rcv_buf,
        }
    }
}

/// An RPC task (`struct rpc_task`), for the callback it is passed to.
///
/// # Invariants
///
/// `ptr` is a valid task for `'a`.
pub struct Task<'a> {
    ptr: NonNull<bindings::rpc_task>,
    _call: PhantomData<&'a bindings::rpc_task>,
}

impl Task<'_> {
    /// # Safety
    ///
    /// `ptr` is a valid task for the view's lifetime.
    pub(super) unsafe fn from_raw(ptr: *mut bindings::rpc_task) -> Option<Self> {
        // INVARIANT: The caller's guarantee.
        NonNull::new(ptr).map(|ptr| Self {
            ptr,
            _call: PhantomData,
        })
    }

    fn raw(&self) -> &bindings::rpc_task {
        // SAFETY: Valid for `'a` (type invariant).
        unsafe { self.ptr.as_ref() }
    }

    /// The task's current status (`tk_status`).
    pub fn status(&self) -> i32 {
        self.raw().tk_status
    }

    /// The task's request, if it has one.
    pub fn rqst(&self) -> Option<Rqst<'_>> {
        // SAFETY: A task's request is valid while the task is in a transport callback.
        unsafe { Rqst::from_raw(self.raw().tk_rqstp) }
    }
}

/// The page data of an `xdr_buf` is the target of a file read (`XDRBUF_READ`).
pub const XDRBUF_READ: u32 = bindings::XDRBUF_READ;
/// The page data of an `xdr_buf` is the source of a file write (`XDRBUF_WRITE`).
pub const XDRBUF_WRITE: u32 = bindings::XDRBUF_WRITE;
/// The page array of an `xdr_buf` may have holes, filled when the reply arrives
/// (`XDRBUF_SPARSE_PAGES`).
pub const XDRBUF_SPARSE_PAGES: u32 = bindings::XDRBUF_SPARSE_PAGES;

/// The layout of an XDR buffer (`struct xdr_buf`): head, page data, tail.
pub struct XdrBufLayout<'a> {
    buf: &'a bindings::xdr_buf,
}

impl XdrBufLayout<'_> {
    /// The length of the head.
    pub fn head_len(&self) -> usize {
        self.buf.head[0].iov_len
    }

    /// Where the page data starts in the first page (`page_base`).
    pub fn page_base(&self) -> u32 {
        self.buf.page_base
    }

    /// The length of the page data (`page_len`).
    pub fn page_len(&self) -> u32 {
        self.buf.page_len
    }

    /// The length of the tail.
    pub fn tail_len(&self) -> usize {
        self.buf.tail[0].iov_len
    }

    /// The length of the XDR message (`len`).
    pub fn len(&self) -> u32 {
        self.buf.len
    }

    /// Whether the message is empty.
    pub fn is_empty(&self) -> bool {
        self.buf.len == 0
    }

    /// The size of the whole buffer (`buflen`).
    pub fn buflen(&self) -> u32 {
        self.buf.buflen
    }

    /// Its flags: [`XDRBUF_READ`], [`XDRBUF_WRITE`], [`XDRBUF_SPARSE_PAGES`].
    pub fn flags(&self) -> u32 {
        self.buf.flags
    }
}

/// An encoded XDR buffer (`struct xdr_buf`) that does not change while it is viewed.
///
/// # Invariants
///
/// `buf` describes memory that is valid and not written for `'a`: a head and a tail in kernel
/// memory and `page_len` bytes from `page_base` of its page array, whose pages are present.
/// `owner`, if any, is the request's buffer, pages allocated by the transport's `buf_alloc`
/// and kept for `'a`.
pub struct XdrBuf<'a> {
    buf: &'a bindings::xdr_buf,
    owner: Option<Range<usize>>,
}

impl<'a> XdrBuf<'a> {
    /// A view of `buf`, which no request's own buffer backs.
    ///
    /// # Safety
    ///
    /// `buf` describes memory that is valid and not written for `'a`: a head and a tail in
    /// kernel memory and `page_len` bytes from `page_base` of its page array, whose pages are
    /// present.
    pub(crate) unsafe fn from_raw(buf: &'a bindings::xdr_buf) -> Self {
        // INVARIANT: The caller's guarantee; no owner.
        Self { buf, owner: None }
    }

    /// Its layout.
    pub fn layout(&self) -> XdrBufLayout<'a> {
        XdrBufLayout { buf: self.buf }
    }

    /// The head.
    pub fn head(&self) -> &[u8] {
        kvec_bytes(&self.buf.head[0])
    }

    /// The tail.
    pub fn tail(&self) -> &[u8] {
        kvec_bytes(&self.buf.tail[0])
    }

    /// Passes the message to `f` in pieces, in order: head, page data page by page, tail.
    pub fn for_each_segment(&self, mut f: impl FnMut(&[u8]) -> Result) -> Result {
        if !self.head().is_empty() {
            f(self.head())?;
        }
        let page_size = crate::page::PAGE_SIZE;
        let mut off = self.buf.page_base as usize;
        let mut left = self.buf.page_len as usize;
        while left > 0 {
            let in_page = off % page_size;
            let n = core::cmp::min(page_size - in_page, left);
            // SAFETY: The page array covers the page data (type invariant).
            let page = unsafe { *self.buf.pages.add(off / page_size) };
            if page.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: `page` is a present page of the buffer; mapped for this block only.
            let r = unsafe {
                let base = bindings::kmap_local_page(page).cast::<u8>();
                let r = f(core::slice::from_raw_parts(base.add(in_page), n));
                bindings::kunmap_local(base.cast::<c_void>());
                r
            };
            r?;
            off += n;
            left -= n;
        }
        if !self.tail().is_empty() {
            f(self.tail())?;
        }
        Ok(())
    }

    /// Passes the bytes `range` of the message to `f` in pieces, in order.
    pub fn for_each_segment_in(
        &self,
        range: Range<usize>,
        mut f: impl FnMut(&[u8]) -> Result,
    ) -> Result {
        let mut at = 0usize;
        self.for_each_segment(|segment| {
            let seg = at..at + segment.len();
            at = seg.end;
            let from = range.start.max(seg.start);
            let to = range.end.min(seg.end);
            if from < to {
                f(segment
                    .get(from - seg.start..to - seg.start)
                    .ok_or(EINVAL)?)?;
            }
            Ok(())
        })
    }

    /// The part `part` of the message as pages, for a device to read it: `None` if the part
    /// is empty. `EINVAL` if a head or tail lies outside the request's own buffer (it then
    /// cannot be referenced by page) or a page is missing.
    pub fn pages(&self, part: XdrPart) -> Result<Option<XdrPages<'a>>> {
        // SAFETY: `false`: the page array is only read.
        unsafe { xdr_part_pages(self.buf, self.owner.clone(), part, false) }
    }
}

/// A part of an `xdr_buf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdrPart {
    /// The head (`head[0]`).
    Head,
    /// The page data (`page_len` bytes from `page_base` of `pages`).
    Pages,
    /// The tail (`tail[0]`).
    Tail,
}

/// Bytes of a call's buffers as the pages they lie in, for a device to reach them by page
/// reference (a scatterlist), without copying.
///
/// # Invariants
///
/// Every entry of `pages` is a valid page that the request keeps for `'a`; the bytes are `len`
/// (at least one) bytes from `offset` in the first page, within the pages.
pub struct XdrPages<'a> {
    pages: KVec<*mut bindings::page>,
    offset: usize,
    len: usize,
    _buf: PhantomData<&'a bindings::xdr_buf>,
}

impl XdrPages<'_> {
    /// Bytes in the range.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty (never: empty parts have no `XdrPages`).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where the bytes start in the first page.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The pages, each valid while `self` is (type invariant).
    pub(crate) fn raw_pages(&self) -> &[*mut bindings::page] {
        &self.pages
    }
}

/// Fills the empty slot `slot` of a page array with `flags` (an `xdr_buf`'s) with a new page,
/// if the array is sparse (`XDRBUF_SPARSE_PAGES`): the request owns the page once stored and
/// frees it with its others. `EINVAL` if the array is not sparse, `ENOMEM` if no page is free.
///
/// # Safety
///
/// `slot` is an entry of a request's page array that the caller may write.
unsafe fn fill_sparse(slot: *mut *mut bindings::page, flags: u32) -> Result<*mut bindings::page> {
    if flags & XDRBUF_SPARSE_PAGES == 0 {
        return Err(EINVAL);
    }
    // SAFETY: Allocates one page; the result is checked.
    let page = unsafe { bindings::alloc_pages(bindings::GFP_NOWAIT, 0) };
    if page.is_null() {
        return Err(ENOMEM);
    }
    // SAFETY: The caller's guarantee.
    unsafe { *slot = page };
    Ok(page)
}

/// The pages of part `part` of `buf`, whose head and tail must lie in `owner`.
///
/// # Safety
///
/// `buf` is valid for `'a`, its pages kept by their owner for `'a`; `owner` is memory of whole
/// pages in the linear map kept for `'a`. With `fill`, missing pages of a sparse array are
/// allocated into it, which the caller keeps other writers of the array out for.
unsafe fn xdr_part_pages<'a>(
    buf: &'a bindings::xdr_buf,
    owner: Option<Range<usize>>,
    part: XdrPart,
    fill: bool,
) -> Result<Option<XdrPages<'a>>> {
    let kvec = if part == XdrPart::Head {
        &buf.head[0]
    } else {
        &buf.tail[0]
    };
    let (first_page, offset, len, count) = match part {
        XdrPart::Head | XdrPart::Tail => {
            let v = kvec;
            if v.iov_len == 0 {
                return Ok(None);
            }
            let start = v.iov_base as usize;
            let end = start.checked_add(v.iov_len).ok_or(EINVAL)?;
            let owner = owner.ok_or(EINVAL)?;
            if start < owner.start || end > owner.end {
                return Err(EINVAL);
            }
            (
                None,
                start % PAGE_SIZE,
                v.iov_len,
                (start % PAGE_SIZE + v.iov_len).div_ceil(PAGE_SIZE),
            )
        }
        XdrPart::Pages => {
            let len = buf.page_len as usize;
            if len == 0 {
                return Ok(None);
            }
            let base = buf.page_base as usize;
            (
                Some(base / PAGE_SIZE),
                base % PAGE_SIZE,
                len,
                (base % PAGE_SIZE + len).div_ceil(PAGE_SIZE),
            )
        }
    };
    let mut pages = KVec::with_capacity(count, GFP_KERNEL)?;
    for i in 0..count {
        let page = match first_page {
            None => {
                let addr = (kvec.iov_base as usize / PAGE_SIZE + i) * PAGE_SIZE;
                // SAFETY: `addr` is a page of `owner`, in the linear map (checked above).
                unsafe { bindings::virt_to_page(addr as *const c_void) }
            }
            Some(first) => {
                // SAFETY: The page array covers the page data (the caller's guarantee).
                let slot = unsafe { buf.pages.add(first + i) };
                // SAFETY: As above.
                let page = unsafe { *slot };
                match (page.is_null(), fill) {
                    (false, _) => page,
                    // SAFETY: The slot is in the array, which the caller lets us write.
                    (true, true) => unsafe { fill_sparse(slot, buf.flags) }?,
                    (true, false) => return Err(EINVAL),
                }
            }
        };
        // Cannot fail: the capacity is `count`.
        pages.push(page, GFP_KERNEL)?;
    }
    // INVARIANT: The pages are the request's (its buffer's or its page array's), kept for `'a`
    // (the caller's guarantee); the range lies within them.
    Ok(Some(XdrPages {
        pages,
        offset,
        len,
        _buf: PhantomData,
    }))
}

fn kvec_bytes(v: &bindings::kvec) -> &[u8] {
    if v.iov_base.is_null() || v.iov_len == 0 {
        return &[];
    }
    // SAFETY: The kvec belongs to an `XdrBuf`, whose memory is valid and unchanged for the
    // borrow (its type invariant).
    unsafe { core::slice::from_raw_parts(v.iov_base.cast::<u8>(), v.iov_len) }
}

/// The receive buffer of a call, for [`Xprt::complete_reply`](super::Xprt::complete_reply) to
/// copy a reply into.
///
/// Bytes go in order into the head, the page data and the tail as the call laid them out,
/// never beyond `buflen`, the way the socket transports copy (`xdr_partial_copy_from_skb`): the
/// layout is not changed, so the buffer the call decodes stays identical to this one except for
/// the length `xprt_complete_rqst` sets.
///
/// # Invariants
///
/// `buf` is the `rq_private_buf` and `rcv` the `rq_rcv_buf` of a pinned request that no one
/// else writes or reads until the reply is completed.
pub struct ReplyBuf<'a> {
    buf: *mut bindings::xdr_buf,
    rcv: *mut bindings::xdr_buf,
    pos: usize,
    _call: PhantomData<&'a mut bindings::xdr_buf>,
}

impl ReplyBuf<'_> {
    /// # Safety
    ///
    /// `buf` is the `rq_private_buf` and `rcv` the `rq_rcv_buf` of a pinned request that no
    /// one else writes or reads until the reply is completed, for the view's lifetime.
    pub(super) unsafe fn new(buf: *mut bindings::xdr_buf, rcv: *mut bindings::xdr_buf) -> Self {
        // INVARIANT: The caller's guarantee.
        Self {
            buf,
            rcv,
            pos: 0,
            _call: PhantomData,
        }
    }

    /// Shortens the head to `len` bytes before anything is written (both the buffer the reply
    /// is written to and the one the call decodes, which must stay identical), so that the
    /// page data starts right after `len` bytes of reply: for a reply whose bulk data a device
    /// already placed at the start of the pages. `EINVAL` if the head is shorter or something
    /// was written.
    pub fn trim_head(&mut self, len: usize) -> Result {
        let head = self.raw().head[0].iov_len;
        if self.pos != 0 || len > head {
            return Err(EINVAL);
        }
        let delta = head - len;
        for b in [self.buf, self.rcv] {
            // SAFETY: Both buffers are ours to change until the reply is completed (type
            // invariant).
            unsafe {
                (*b).head[0].iov_len = len;
                (*b).buflen = (*b).buflen.saturating_sub(delta as u32);
            }
        }
        Ok(())
    }

    /// Counts the next `n` bytes as written without writing them: a device placed them.
    /// Returns how many fitted.
    pub fn skip(&mut self, n: usize) -> usize {
        let n = n.min(self.capacity().saturating_sub(self.pos));
        self.pos += n;
        n
    }

    fn raw(&self) -> &bindings::xdr_buf {
        // SAFETY: Valid and ours (type invariant).
        unsafe { &*self.buf }
    }

    /// How many bytes the buffer takes.
    pub fn capacity(&self) -> usize {
        let b = self.raw();
        let total = b.head[0].iov_len + b.page_len as usize + b.tail[0].iov_len;
        core::cmp::min(total, b.buflen as usize)
    }

    /// The length of the head.
    pub fn head_len(&self) -> usize {
        self.raw().head[0].iov_len
    }

    /// How many bytes were written.
    pub fn written(&self) -> usize {
        self.pos
    }

    /// Appends `data`; returns how many bytes fitted (fewer than `data.len()` once full).
    pub fn write(&mut self, data: &[u8]) -> usize {
        let mut done = 0;
        let limit = self.capacity();
        while done < data.len() && self.pos < limit {
            let Some(taken) = self.write_segment(&data[done..], limit) else {
                break;
            };
            done += taken;
            self.pos += taken;
        }
        done
    }

    /// Writes into the segment at `pos`; `None` if the page there is missing.
    fn write_segment(&mut self, data: &[u8], limit: usize) -> Option<usize> {
        let (head_len, page_len, flags) = {
            let b = self.raw();
            (b.head[0].iov_len, b.page_len as usize, b.flags)
        };
        let pos = self.pos;
        let page_size = crate::page::PAGE_SIZE;
        if pos < head_len || pos >= head_len + page_len {
            let (base, off, len) = if pos < head_len {
                (self.raw().head[0].iov_base, pos, head_len)
            } else {
                let t = &self.raw().tail[0];
                (t.iov_base, pos - head_len - page_len, t.iov_len)
            };
            let n = data.len().min(len - off).min(limit - pos);
            // SAFETY: The head and tail are `iov_len` bytes of the request's reply buffer,
            // ours to write (type invariant); `off + n` is within.
            unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), base.cast::<u8>().add(off), n) };
            return Some(n);
        }
        let off = self.raw().page_base as usize + (pos - head_len);
        let in_page = off % page_size;
        let n = data
            .len()
            .min(page_size - in_page)
            .min(head_len + page_len - pos)
            .min(limit - pos);
        // SAFETY: The page array covers the page data (type invariant).
        let slot = unsafe { self.raw().pages.add(off / page_size) };
        // SAFETY: `slot` is in the page array, ours to write while the request is pinned.
        let mut page = unsafe { *slot };
        if page.is_null() {
            // SAFETY: As above.
            page = unsafe { fill_sparse(slot, flags) }.ok()?;
        }
        // SAFETY: `page` is a page of the request's reply buffer, ours to write; mapped for
        // this block only, and `in_page + n` is within it.
        unsafe {
            let base = bindings::kmap_local_page(page).cast::<u8>();
            core::ptr::copy_nonoverlapping(data.as_ptr(), base.add(in_page), n);
            bindings::flush_dcache_page(page);
            bindings::kunmap_local(base.cast::<c_void>());
        }
        Some(n)
    }
}
