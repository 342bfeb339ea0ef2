// SPDX-License-Identifier: GPL-2.0

//! A server thread's request (`struct svc_rqst`), as a transport's `recvfrom` and `sendto` see
//! it.

use crate::{
    bindings,
    page::PAGE_SIZE,
    prelude::*,
    rdma::consumer::{client::ProtectionDomain, mapped_pages::MappedPages},
    sunrpc::xprt::{XdrBuf, XdrBufLayout},
    sync::Arc,
};
use core::{marker::PhantomData, ops::Range, ptr::NonNull};

/// Where a call lies in the request's pages ([`SvcRqst::place_arg`]): its head from the start
/// of the first page, its page data from the start of the second page on, its tail in the
/// first page after the head.
#[derive(Clone, Debug)]
pub struct ArgPlacement {
    /// Bytes of the head, from the start of the first page.
    pub head_len: usize,
    /// Bytes of page data, from the start of the second page.
    pub page_len: usize,
    /// The tail: bytes of the first page, after the head.
    pub tail: Range<usize>,
    /// Pages the call occupies from the first; the reply is built from the next one on.
    pub pages: usize,
}

/// A server thread's request, lent to a transport for one `recvfrom` or `sendto` call.
///
/// # Invariants
///
/// `rqst` is the request of the call in progress, whose thread lends it to the transport for
/// `'a`; its `rq_pages` holds the pages `svc_alloc_arg` allocated, and `rq_xprt` is the
/// transport called.
pub struct SvcRqst<'a> {
    rqst: NonNull<bindings::svc_rqst>,
    _call: PhantomData<&'a mut bindings::svc_rqst>,
}

impl SvcRqst<'_> {
    /// # Safety
    ///
    /// `rqst` is the request of an `xpo_recvfrom` or `xpo_sendto` call in progress, lent for
    /// `'a`.
    pub(crate) unsafe fn from_raw<'a>(rqst: NonNull<bindings::svc_rqst>) -> SvcRqst<'a> {
        // INVARIANT: The caller's guarantee.
        SvcRqst {
            rqst,
            _call: PhantomData,
        }
    }

    fn raw(&self) -> &bindings::svc_rqst {
        // SAFETY: Lent to us for `'a` (type invariant).
        unsafe { self.rqst.as_ref() }
    }

    fn raw_mut(&mut self) -> &mut bindings::svc_rqst {
        // SAFETY: Lent to us for `'a`, exclusively: its thread waits for the call (type
        // invariant).
        unsafe { self.rqst.as_mut() }
    }

    /// The XID of the call being answered, in host byte order (set by the RPC server when it
    /// decoded the call: for `sendto`).
    pub fn xid(&self) -> u32 {
        u32::from_be(self.raw().rq_xid)
    }

    /// Places the RPC call `message` in the request (`rq_arg`): copied into its first page,
    /// the reply to be built from the second page on (`rq_respages`), with the transport's
    /// addresses as the call's (`svc_xprt_copy_addrs`). Calls over RDMA need no privileged
    /// port: the request is marked secure, as the C transport does.
    ///
    /// `EMSGSIZE` if the call is longer than a page, `ENOMEM` if the request lacks its pages.
    pub fn set_arg(&mut self, message: &[u8]) -> Result {
        self.write_page(0, 0, message)
            .map_err(|e| if e == EINVAL { EMSGSIZE } else { e })?;
        self.place_arg(&ArgPlacement {
            head_len: message.len(),
            page_len: 0,
            tail: message.len()..message.len(),
            pages: 1,
        })
    }

    /// How many pages the request has: those `svc_alloc_arg` allocated, up to `rq_page_end`
    /// (a call and its reply share them). Known without looking at the pages: the array has
    /// room for a megabyte's worth.
    pub fn page_count(&self) -> usize {
        let r = self.raw();
        let entry = core::mem::size_of::<*mut bindings::page>();
        (r.rq_page_end as usize)
            .checked_sub(r.rq_pages.as_ptr() as usize)
            .map_or(0, |bytes| bytes / entry)
            .min(r.rq_pages.len())
    }

    /// The request's page `index`, if it has it.
    fn page(&self, index: usize) -> Result<NonNull<bindings::page>> {
        if index >= self.page_count() {
            return Err(ENOMEM);
        }
        NonNull::new(*self.raw().rq_pages.get(index).ok_or(ENOMEM)?).ok_or(ENOMEM)
    }

    /// Copies `data` into the request's page `index` at byte `offset`. `EINVAL` if it does
    /// not fit the page, `ENOMEM` if the request lacks the page.
    pub fn write_page(&mut self, index: usize, offset: usize, data: &[u8]) -> Result {
        let page = self.page(index)?;
        match offset.checked_add(data.len()) {
            Some(end) if end <= PAGE_SIZE => {}
            _ => return Err(EINVAL),
        }
        // SAFETY: `page` is a page of the request, in the kernel's linear map (`svc_alloc_arg`
        // allocates them with `GFP_KERNEL`).
        let base = unsafe { bindings::page_address(page.as_ptr()) }.cast::<u8>();
        // SAFETY: `offset + data.len()` bytes lie within the page (checked above); the page is
        // the request's, which no one else writes now (a device that wrote it is done: the
        // transport waited for it, or gave the page up).
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), base.add(offset), data.len()) };
        Ok(())
    }

    /// Maps `len` bytes of the request's pages from the start of page `first` for `pd`'s
    /// device, for the device to write a call into them. The mapping holds a reference on
    /// each page: should the call end while the device may still write them, the transport
    /// gives them up ([`Self::give_up_pages`]), and they live on until the mapping goes.
    /// `ENOMEM` if the request lacks the pages, `EINVAL` for an empty range.
    pub fn map_pages(
        &self,
        pd: &Arc<ProtectionDomain>,
        first: usize,
        len: usize,
    ) -> Result<Arc<MappedPages>> {
        let count = len.div_ceil(PAGE_SIZE);
        let end = first.checked_add(count).ok_or(EINVAL)?;
        if end > self.page_count() {
            return Err(ENOMEM);
        }
        let pages = self.raw().rq_pages.get(first..end).ok_or(ENOMEM)?;
        // An entry given up ([`Self::give_up_pages`]) is empty until the next call.
        if pages.iter().any(|p| p.is_null()) {
            return Err(ENOMEM);
        }
        // SAFETY: The pages are the request's (non-null: checked above), kept by it for the
        // call at least; the mapping takes its own reference on each.
        unsafe { MappedPages::from_raw_pages(pd, pages, 0, len) }
    }

    /// Lets `count` pages from page `first` go out of the request (a device may still write
    /// them): the request drops its references, and the RPC server allocates new pages in
    /// their place before the thread's next call (`svc_alloc_arg` fills empty entries). Call
    /// it only when the call is not handed over (`recvfrom` fails): the call's buffer no
    /// longer has these pages.
    pub fn give_up_pages(&mut self, first: usize, count: usize) {
        let available = self.page_count();
        let r = self.raw_mut();
        // Nothing past `page_count`: those entries are not the request's.
        let end = first.saturating_add(count).min(available);
        for index in first..end {
            if let Some(entry) = r.rq_pages.get_mut(index) {
                let page = core::mem::replace(entry, core::ptr::null_mut());
                if !page.is_null() {
                    // SAFETY: The request's own reference on its page (`svc_alloc_arg`), given
                    // up here with the entry emptied; a mapping of it holds its own.
                    unsafe { bindings::put_page(page) };
                }
            }
        }
        // The reply's pages start at the first page until a call is placed: nothing of the
        // emptied entries is released again.
        let pages = r.rq_pages.as_mut_ptr();
        r.rq_respages = pages;
        r.rq_next_page = pages;
    }

    /// Describes the call placed in the request's pages (`rq_arg`) as `placement` says, the
    /// reply to be built from the page after it (`rq_respages`), with the transport's
    /// addresses as the call's (`svc_xprt_copy_addrs`). Calls over RDMA need no privileged
    /// port: the request is marked secure, as the C transport does.
    ///
    /// `EINVAL` if the placement does not fit its pages (or leaves none for the reply),
    /// `ENOMEM` if the request lacks the pages.
    pub fn place_arg(&mut self, placement: &ArgPlacement) -> Result {
        let p = placement;
        let data_pages = p.page_len.div_ceil(PAGE_SIZE);
        if p.head_len > PAGE_SIZE
            || p.tail.start < p.head_len
            || p.tail.start > p.tail.end
            || p.tail.end > PAGE_SIZE
            || p.pages == 0
            || p.pages < 1 + data_pages
        {
            return Err(EINVAL);
        }
        let len = p
            .head_len
            .checked_add(p.page_len)
            .and_then(|n| n.checked_add(p.tail.len()))
            .ok_or(EINVAL)?;
        let len = u32::try_from(len)?;
        // The call's pages and one for the reply.
        if p.pages.checked_add(1).ok_or(EINVAL)? > self.page_count() {
            return Err(ENOMEM);
        }
        let first = self.page(0)?;
        let r = self.raw_mut();
        // SAFETY: `first` is a page of the request, in the kernel's linear map.
        let base = unsafe { bindings::page_address(first.as_ptr()) }.cast::<u8>();
        let pages = r.rq_pages.as_mut_ptr();
        let arg = &mut r.rq_arg;
        arg.head[0].iov_base = base.cast();
        arg.head[0].iov_len = p.head_len;
        if p.tail.is_empty() {
            arg.tail[0].iov_base = core::ptr::null_mut();
            arg.tail[0].iov_len = 0;
        } else {
            // SAFETY: `tail.start < PAGE_SIZE`: within the first page (checked above).
            arg.tail[0].iov_base = unsafe { base.add(p.tail.start) }.cast();
            arg.tail[0].iov_len = p.tail.len();
        }
        // SAFETY: `rq_pages` has more than `p.pages + 1` entries (checked above).
        arg.pages = unsafe { pages.add(1) };
        arg.page_base = 0;
        arg.page_len = u32::try_from(p.page_len)?;
        arg.buflen = len;
        arg.len = len;
        // SAFETY: As above: the reply starts at the page after the call's, the next free one
        // after it, both within `rq_pages`.
        unsafe {
            r.rq_respages = pages.add(p.pages);
            r.rq_next_page = pages.add(p.pages + 1);
        }
        r.rq_prot = bindings::IPPROTO_MAX;
        let (rqst, xprt) = (self.rqst.as_ptr(), self.raw().rq_xprt);
        // SAFETY: The request and its transport are live for the call; the secure flag is set
        // atomically.
        unsafe {
            bindings::svc_xprt_copy_addrs(rqst, xprt);
            bindings::svc_rqst_set_flag(rqst, bindings::RQ_SECURE);
        }
        Ok(())
    }

    /// The reply the service encoded (`rq_res`), for `sendto`.
    pub fn res(&self) -> XdrBuf<'_> {
        // SAFETY: During `sendto` the reply is encoded and stays unchanged until the call
        // returns: its head and tail in the request's pages, its page data in `rq_res.pages`.
        unsafe { XdrBuf::from_raw(&self.raw().rq_res) }
    }

    /// The layout of the call as placed (`rq_arg`).
    pub fn arg_layout(&self) -> XdrBufLayout<'_> {
        // SAFETY: As for `res`: `rq_arg` describes memory of the request.
        unsafe { XdrBuf::from_raw(&self.raw().rq_arg) }.layout()
    }
}
