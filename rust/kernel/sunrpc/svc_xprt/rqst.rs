// SPDX-License-Identifier: GPL-2.0

//! A server thread's request (`struct svc_rqst`), as a transport's `recvfrom` and `sendto` see
//! it.

use crate::{
    bindings,
    page::PAGE_SIZE,
    prelude::*,
    sunrpc::xprt::{XdrBuf, XdrBufLayout},
};
use core::{marker::PhantomData, ptr::NonNull};

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
        if message.len() > PAGE_SIZE {
            return Err(EMSGSIZE);
        }
        let len = u32::try_from(message.len())?;
        let r = self.raw_mut();
        let (first, second) = (r.rq_pages[0], r.rq_pages[1]);
        if first.is_null() || second.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: `first` is a page of the request, in the kernel's linear map (`svc_alloc_arg`
        // allocates them with `GFP_KERNEL`).
        let base = unsafe { bindings::page_address(first) }.cast::<u8>();
        // SAFETY: `base` is a whole page, which holds `message` (checked above); the page is
        // the request's, which no one else writes now.
        unsafe { core::ptr::copy_nonoverlapping(message.as_ptr(), base, message.len()) };
        let pages = r.rq_pages.as_mut_ptr();
        let arg = &mut r.rq_arg;
        arg.head[0].iov_base = base.cast();
        arg.head[0].iov_len = message.len();
        arg.tail[0].iov_base = core::ptr::null_mut();
        arg.tail[0].iov_len = 0;
        // SAFETY: `rq_pages` has more than two entries.
        arg.pages = unsafe { pages.add(1) };
        arg.page_base = 0;
        arg.page_len = 0;
        arg.buflen = len;
        arg.len = len;
        // SAFETY: As above: the reply starts at the second page, the next free one after it.
        unsafe {
            r.rq_respages = pages.add(1);
            r.rq_next_page = pages.add(2);
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
