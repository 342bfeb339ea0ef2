// SPDX-License-Identifier: GPL-2.0

//! The ops table of a server transport type (`struct svc_xprt_ops`) and its trampolines.

use super::{SvcRqst, SvcTransport, SvcXprt};
use crate::{
    bindings,
    ffi::{c_int, c_uint, c_void},
    prelude::*,
};
use core::{marker::PhantomData, ptr::NonNull};

/// The trampolines of server transport `T` and its ops table.
pub struct Adapter<T: SvcTransport>(PhantomData<T>);

impl<T: SvcTransport> Adapter<T> {
    /// Every transport of `T` uses this table. `xpo_create` is the class's (set in its slot);
    /// `xpo_recvfrom`, `xpo_sendto`, `xpo_result_payload`, `xpo_release_ctxt` and
    /// `xpo_kill_temp_xprt` are called unconditionally by the RPC server, so they are never
    /// null (a listener's take and send nothing).
    pub const OPS: bindings::svc_xprt_ops = bindings::svc_xprt_ops {
        xpo_create: None,
        xpo_accept: if T::HAS_ACCEPT {
            Some(Self::accept)
        } else {
            None
        },
        xpo_has_wspace: Some(Self::has_wspace),
        xpo_recvfrom: if T::HAS_RECVFROM {
            Some(Self::recvfrom)
        } else {
            Some(Self::no_recvfrom)
        },
        xpo_sendto: if T::HAS_SENDTO {
            Some(Self::sendto)
        } else {
            Some(Self::no_sendto)
        },
        xpo_result_payload: Some(Self::result_payload),
        xpo_release_ctxt: Some(Self::release_ctxt),
        xpo_detach: Some(Self::detach),
        xpo_free: Some(Self::free),
        xpo_kill_temp_xprt: Some(Self::kill_temp_xprt),
        xpo_handshake: None,
    };

    /// [`Self::OPS`], as the transports point to it.
    pub(super) const OPS_REF: &'static bindings::svc_xprt_ops = &Self::OPS;

    /// `xpo_accept`: `XPT_CONN` is cleared first, see [`SvcTransport::accept`].
    ///
    /// # Safety
    ///
    /// Called by a server thread with a listener of `T`, which it holds.
    unsafe extern "C" fn accept(xprt: *mut bindings::svc_xprt) -> *mut bindings::svc_xprt {
        // SAFETY: A transport of `T`, live for the call; its flags change atomically.
        let x = unsafe {
            bindings::svc_xprt_clear_flag(xprt, bindings::XPT_CONN);
            SvcXprt::<T>::from_raw(xprt)
        };
        match T::accept(x) {
            Some(new) => new.into_raw(),
            None => core::ptr::null_mut(),
        }
    }

    /// `xpo_has_wspace`.
    ///
    /// # Safety
    ///
    /// Called by the RPC server with a transport of `T`.
    unsafe extern "C" fn has_wspace(xprt: *mut bindings::svc_xprt) -> c_int {
        // SAFETY: A transport of `T`, live for the call.
        T::has_wspace(unsafe { SvcXprt::from_raw(xprt) }).into()
    }

    /// `xpo_recvfrom`: until `T` places a call, the request's pages all stay the request's
    /// (`rq_respages` at the first: `svc_xprt_release` releases none of them).
    ///
    /// # Safety
    ///
    /// Called by a server thread with its request, whose transport is of `T`.
    unsafe extern "C" fn recvfrom(rqstp: *mut bindings::svc_rqst) -> c_int {
        let Some(rqst) = NonNull::new(rqstp) else {
            return 0;
        };
        // SAFETY: The thread's request, ours for the call.
        let xprt = unsafe {
            let r = rqst.as_ptr();
            (*r).rq_respages = (*r).rq_pages.as_mut_ptr();
            (*r).rq_next_page = (*r).rq_respages;
            (*r).rq_xprt_ctxt = core::ptr::null_mut();
            (*r).rq_xprt
        };
        // SAFETY: Lent for the call.
        let mut view = unsafe { SvcRqst::from_raw(rqst) };
        let mut ctxt = None;
        // SAFETY: A transport of `T`, which the thread holds for the call.
        let ret = match T::recvfrom(unsafe { SvcXprt::from_raw(xprt) }, &mut view, &mut ctxt) {
            Ok(len) => c_int::try_from(len).unwrap_or(0),
            Err(e) => e.to_errno(),
        };
        if ret > 0 {
            if let Some(ctxt) = ctxt {
                // SAFETY: The thread's request, ours for the call; the context is a
                // `KBox<T::Context>` that `release_ctxt` of this transport type drops.
                unsafe { (*rqst.as_ptr()).rq_xprt_ctxt = KBox::into_raw(ctxt).cast() };
            }
        }
        ret
    }

    /// The context of the call in `rqstp`, if `recvfrom` gave it one.
    ///
    /// # Safety
    ///
    /// `rqstp` is a request of a transport of `T`, lent by its thread for `'a`.
    unsafe fn context<'a>(rqstp: *mut bindings::svc_rqst) -> Option<&'a mut T::Context> {
        // SAFETY: The caller's guarantee. `rq_xprt_ctxt` of a request of `T` is null or what
        // `recvfrom` above stored (possibly carried through a deferral, which moves it from
        // request to request of the same transport): a live `KBox<T::Context>`, which only
        // the request's thread uses until `release_ctxt`.
        unsafe { (*rqstp).rq_xprt_ctxt.cast::<T::Context>().as_mut() }
    }

    /// `xpo_sendto`.
    ///
    /// # Safety
    ///
    /// Called by a server thread with its request, whose transport is of `T`.
    unsafe extern "C" fn sendto(rqstp: *mut bindings::svc_rqst) -> c_int {
        let Some(rqst) = NonNull::new(rqstp) else {
            return -(bindings::EINVAL as c_int);
        };
        // SAFETY: The thread's request, ours for the call.
        let xprt = unsafe { (*rqst.as_ptr()).rq_xprt };
        // SAFETY: A request of `T`, lent for the call.
        let ctxt = unsafe { Self::context(rqst.as_ptr()) };
        // SAFETY: Lent for the call.
        let mut view = unsafe { SvcRqst::from_raw(rqst) };
        // SAFETY: A transport of `T`, which the thread holds for the call.
        match T::sendto(unsafe { SvcXprt::from_raw(xprt) }, &mut view, ctxt) {
            Ok(len) => c_int::try_from(len).unwrap_or(c_int::MAX),
            Err(e) => e.to_errno(),
        }
    }

    /// `xpo_recvfrom` of a transport that carries no calls (a listener): none is taken.
    extern "C" fn no_recvfrom(_rqstp: *mut bindings::svc_rqst) -> c_int {
        0
    }

    /// `xpo_sendto` of a transport that carries no calls (a listener): nothing is sent.
    extern "C" fn no_sendto(_rqstp: *mut bindings::svc_rqst) -> c_int {
        -(bindings::ENOTCONN as c_int)
    }

    /// `xpo_result_payload`: tells the call's context, if it has one.
    ///
    /// # Safety
    ///
    /// Called by a server thread encoding the reply of its request, whose transport is of `T`.
    unsafe extern "C" fn result_payload(
        rqstp: *mut bindings::svc_rqst,
        offset: c_uint,
        length: c_uint,
    ) -> c_int {
        // SAFETY: A request of `T`, lent by its thread for the call.
        match unsafe { Self::context(rqstp) } {
            Some(ctxt) => match T::result_payload(ctxt, offset, length) {
                Ok(()) => 0,
                Err(e) => e.to_errno(),
            },
            None => 0,
        }
    }

    /// `xpo_release_ctxt`: drops a call's context.
    ///
    /// # Safety
    ///
    /// Called by the RPC server with a transport of `T` and the `rq_xprt_ctxt` of one of its
    /// calls (null or what `recvfrom` stored), which no one uses any more.
    unsafe extern "C" fn release_ctxt(_xprt: *mut bindings::svc_xprt, ctxt: *mut c_void) {
        if !ctxt.is_null() {
            // SAFETY: Made by `KBox::into_raw` in `recvfrom`, and released once (the caller's
            // guarantee: the RPC server clears the pointer as it calls this).
            drop(unsafe { KBox::from_raw(ctxt.cast::<T::Context>()) });
        }
    }

    /// `xpo_kill_temp_xprt`: nothing to do before an idle connection is closed.
    extern "C" fn kill_temp_xprt(_xprt: *mut bindings::svc_xprt) {}

    /// `xpo_detach`.
    ///
    /// # Safety
    ///
    /// Called by the RPC server with a transport of `T` being closed.
    unsafe extern "C" fn detach(xprt: *mut bindings::svc_xprt) {
        // SAFETY: A transport of `T`, live for the call.
        T::detach(unsafe { SvcXprt::from_raw(xprt) });
    }

    /// `xpo_free`: the last reference went.
    ///
    /// # Safety
    ///
    /// Called once, by the last `svc_xprt_put` of a transport of `T`, after every other op.
    unsafe extern "C" fn free(xprt: *mut bindings::svc_xprt) {
        let c = xprt.cast::<SvcXprt<T>>();
        // SAFETY: The transport is set up (type invariant of `SvcXprt`) and the RPC server no
        // longer uses it; once its handle is revoked, nothing does. It was allocated as a
        // `KBox<SvcXprt<T>>` by `SvcXprt::create`; dropping the box drops the handle and `T`.
        unsafe {
            (*c).handle.revoke();
            drop(KBox::from_raw(c));
        }
    }
}
