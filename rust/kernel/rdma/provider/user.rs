// SPDX-License-Identifier: GPL-2.0

//! The user-space side of a provider's verbs: the driver data a verb carries ([`UserData`]),
//! the verb with its user context ([`UserVerb`]), and user contexts themselves — opened by a
//! process through the provider library, closed by it, or cut off (disassociated) when the
//! device goes away while it is still open.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/uverbs_ioctl.h`](srctree/include/rdma/uverbs_ioctl.h)

use super::{
    device::{with_driver, Driver},
    user_map::ContextMappings,
};
use crate::{bindings, error::from_result, ffi::c_int, prelude::*, sync::Arc};
use core::mem::ManuallyDrop;

/// A user context as the core allocates it (`size_ib_ucontext`): the core object, then the
/// set of its mmap entries ([`super::user_map`]).
#[repr(C)]
pub(crate) struct UcontextContainer {
    ibuctx: bindings::ib_ucontext,
    mappings: ManuallyDrop<Arc<ContextMappings>>,
}

/// The driver-specific data a user-space verb carries (`struct ib_udata`): the request the
/// provider library sent and room for its response.
///
/// # Invariants
///
/// `inner` is the `ib_udata` of the verb being executed, valid for `'a`; its buffers are
/// user-space addresses of `inlen`/`outlen` bytes.
pub struct UserData<'a> {
    pub(crate) inner: &'a bindings::ib_udata,
}

impl UserData<'_> {
    /// The size of the request.
    pub fn in_len(&self) -> usize {
        self.inner.inlen
    }

    /// The room for the response.
    pub fn out_len(&self) -> usize {
        self.inner.outlen
    }

    /// Writes `data` as the response: `EINVAL` if there is not room for it, `EFAULT` if the
    /// user buffer is not writable.
    pub fn write_response(&mut self, data: &[u8]) -> Result {
        if data.len() > self.inner.outlen {
            return Err(EINVAL);
        }
        // The buffer is user memory: the copy checks access.
        crate::uaccess::UserSlice::new(self.inner.outbuf as usize, data.len())
            .writer()
            .write_slice(data)
    }
}

/// `alloc_ucontext`: the core allocated `uctx` (object-size model, the bare `ib_ucontext`).
///
/// # Safety
///
/// Called by the RDMA core with a context of one of our devices and the verb's `udata`.
pub(crate) unsafe extern "C" fn alloc_ucontext_callback<T: Driver>(
    uctx: *mut bindings::ib_ucontext,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `uctx` is valid and its `device` set by the core; `udata` is valid for the
        // call (user verbs always pass one), or null.
        let (ibdev, udata) = unsafe { ((*uctx).device, udata.as_ref()) };
        // INVARIANT: The verb's `ib_udata`, valid for the call.
        let mut udata = UserData {
            inner: udata.ok_or(EINVAL)?,
        };
        let mappings = ContextMappings::new()?;
        // SAFETY: A device of ours, alive while it has contexts.
        unsafe { with_driver::<T, _>(ibdev, |d, dev| d.alloc_ucontext(dev, &mut udata)) }?;
        let container = uctx.cast::<UcontextContainer>();
        // SAFETY: The core allocated `size_ib_ucontext` bytes, a `UcontextContainer`; the set
        // is written once here and taken once in `dealloc_ucontext_callback`.
        unsafe {
            core::ptr::addr_of_mut!((*container).mappings).write(ManuallyDrop::new(mappings))
        };
        Ok(0)
    })
}

/// `dealloc_ucontext`.
///
/// # Safety
///
/// Called by the RDMA core with a context that `alloc_ucontext_callback` accepted.
pub(crate) unsafe extern "C" fn dealloc_ucontext_callback<T: Driver>(
    uctx: *mut bindings::ib_ucontext,
) {
    // SAFETY: `uctx` is valid and its `device` set by the core.
    let ibdev = unsafe { (*uctx).device };
    // SAFETY: A device of ours, alive while it has contexts.
    unsafe { with_driver::<T, _>(ibdev, |d, dev| d.dealloc_ucontext(dev)) };
    let container = uctx.cast::<UcontextContainer>();
    // SAFETY: Written by `alloc_ucontext_callback`, which accepted the context; taken once.
    let mappings = unsafe { ManuallyDrop::take(&mut (*container).mappings) };
    // The core frees the context on return, and requires it to have no entry left.
    mappings.close();
}

/// The user verb a creation callback runs for, or `None` for a kernel object.
///
/// # Safety
///
/// `udata` must be null or the `driver_udata` of the attribute bundle of the user verb being
/// executed, valid for `'a` (the RDMA core passes that to creation ops).
pub(crate) unsafe fn user_verb<'a>(udata: *mut bindings::ib_udata) -> Option<UserVerb<'a>> {
    if udata.is_null() {
        return None;
    }
    // SAFETY: `udata` lives in its bundle (the caller's guarantee), whose context is the user
    // context of the verb; both are valid for `'a`.
    let (udata, ucontext) = unsafe {
        let attrs = bindings::uverbs_attr_bundle_of_udata(udata);
        (&*udata, bindings::uverbs_attr_bundle_context(attrs))
    };
    // INVARIANT: The verb's udata and user context, valid for `'a`.
    Some(UserVerb {
        udata: UserData { inner: udata },
        ucontext,
    })
}

/// `disassociate_ucontext`: the device is going away while user contexts are open. With this
/// op the RDMA core does not wait for user space to close them: it cuts them off (later verbs
/// fail with `EIO`) and then destroys their objects through the usual verbs. What a provider
/// mapped with [`super::user_map`] needs no zapping: the process's mapping holds references on
/// the pages, which outlive the entry and the device.
///
/// # Safety
///
/// Called by the RDMA core with a context of one of our devices.
pub(crate) unsafe extern "C" fn disassociate_ucontext_callback(_uctx: *mut bindings::ib_ucontext) {}

/// A user-space verb in progress: its driver data and its user context.
///
/// # Invariants
///
/// `ucontext` is the user context of the verb being executed, alive for `'a`.
pub struct UserVerb<'a> {
    pub(crate) udata: UserData<'a>,
    pub(crate) ucontext: *mut bindings::ib_ucontext,
}

impl<'a> UserVerb<'a> {
    /// The verb's driver data (request and response).
    pub fn udata(&mut self) -> &mut UserData<'a> {
        &mut self.udata
    }

    /// The set of mmap entries of the verb's user context.
    pub(crate) fn mappings(&self) -> &Arc<ContextMappings> {
        // SAFETY: The verb's context is alive for `'a` (type invariant); it is a context of
        // one of our devices, so a `UcontextContainer` whose set `alloc_ucontext_callback`
        // wrote (a verb runs only on a context the driver accepted).
        unsafe { &(*self.ucontext.cast::<UcontextContainer>()).mappings }
    }
}
