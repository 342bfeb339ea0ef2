// SPDX-License-Identifier: GPL-2.0

//! A provider's shared receive queues (SRQs).
//!
//! An SRQ is a pool of receive work requests that several queue pairs take from, so a consumer
//! with many connections (an NVMe-oF target, say) posts receive buffers once for all. Like the
//! other verbs objects it follows the object-size model (`size_ib_srq`): the core allocates an
//! `SrqContainer`, the core's `ib_srq` followed by the provider's queue, written on creation
//! and dropped on destruction. A queue pair created on an SRQ gets the provider's queue
//! ([`super::objects::QpQueues`]).
//!
//! The consumer arms a limit (`ib_modify_srq` with `IB_SRQ_LIMIT`); when fewer receives than
//! that are posted, the provider raises `IB_EVENT_SRQ_LIMIT_REACHED` through [`SrqEvents`] and
//! the limit disarms.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    async_event::SrqEvents,
    device::{with_driver, Driver},
    objects::PdId,
    user::user_verb,
    work_request::{post_recv_chain, RecvWr},
};
use crate::{bindings, error::from_result, ffi::c_int, prelude::*, sync::Arc};
use core::mem::ManuallyDrop;

/// The sizes and limit of an SRQ (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrqAttributes {
    /// Receive work requests it holds.
    pub max_wr: u32,
    /// Scatter/gather entries per receive work request.
    pub max_sge: u32,
    /// The armed limit, 0 for none.
    pub limit: u32,
}

/// A change of an SRQ (`ib_modify_srq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqModify {
    /// A new size (`IB_SRQ_MAX_WR`), if asked for.
    pub max_wr: Option<u32>,
    /// A limit to arm (`IB_SRQ_LIMIT`), if asked for.
    pub limit: Option<u32>,
}

/// A provider's shared receive queue; dropped when the SRQ is destroyed.
pub trait SharedReceiveQueue: Send + Sync {
    /// `modify_srq`.
    fn modify(&self, _req: &SrqModify) -> Result {
        Err(EOPNOTSUPP)
    }

    /// `query_srq`.
    fn query(&self) -> Result<SrqAttributes>;

    /// `post_srq_recv`: queues a receive work request; an error refuses it.
    fn post_recv(&self, _wr: &RecvWr<'_>) -> Result {
        Err(EOPNOTSUPP)
    }

    /// The SRQ is destroyed; no verb reaches it any more.
    fn destroy(&self) {}
}

/// An SRQ as the core allocates it (`size_ib_srq`): the core object, then the provider's queue.
#[repr(C)]
pub(crate) struct SrqContainer<Q> {
    ibsrq: bindings::ib_srq,
    queue: ManuallyDrop<Arc<Q>>,
    events: ManuallyDrop<SrqEvents>,
}

/// The provider's queue of `srq`.
///
/// # Safety
///
/// `srq` must be an SRQ that `create_srq_callback::<T>` created and that is not destroyed
/// yet, for the lifetime `'a`.
pub(crate) unsafe fn shared_queue<'a, T: Driver>(srq: *mut bindings::ib_srq) -> &'a Arc<T::Srq> {
    // SAFETY: Written by `create_srq_callback::<T>` (the caller's guarantee), alive until
    // destroy.
    unsafe { &(*srq.cast::<SrqContainer<T::Srq>>()).queue }
}

/// `create_srq`.
///
/// # Safety
///
/// Called by the RDMA core with a zeroed SRQ container of one of our devices (its `device`
/// and `pd` set), valid `init`, and the user verb's udata or null for a kernel SRQ.
pub(crate) unsafe extern "C" fn create_srq_callback<T: Driver>(
    srq: *mut bindings::ib_srq,
    init: *mut bindings::ib_srq_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `srq` and `init` are valid; the core set `device` and `pd`.
        let (ibdev, pd, i) = unsafe { ((*srq).device, (*srq).pd, &mut *init) };
        if i.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
            return Err(EOPNOTSUPP);
        }
        let mut attr = SrqAttributes {
            max_wr: i.attr.max_wr,
            max_sge: i.attr.max_sge,
            limit: i.attr.srq_limit,
        };
        // SAFETY: A non-null udata is the user verb's, valid for the call.
        let mut user = unsafe { user_verb(udata) };
        let events = SrqEvents::new(srq)?;
        let given = events.clone();
        // SAFETY: The core hands an SRQ of a live PD of this device.
        let pd = unsafe { PdId::of(pd) };
        let create = |d: &T, dev: &_| d.create_srq(dev, pd, &mut attr, user.as_mut(), given);
        // SAFETY: A device of `T`'s, alive while it has SRQs.
        let queue = unsafe { with_driver::<T, _>(ibdev, create) }?;
        i.attr.max_wr = attr.max_wr;
        i.attr.max_sge = attr.max_sge;
        let container = srq.cast::<SrqContainer<T::Srq>>();
        // SAFETY: The core allocated `size_ib_srq` bytes, an `SrqContainer`; `queue` and
        // `events` are written once here and taken once in `destroy_srq_callback`.
        unsafe {
            core::ptr::addr_of_mut!((*container).queue).write(ManuallyDrop::new(queue));
            core::ptr::addr_of_mut!((*container).events).write(ManuallyDrop::new(events));
        }
        Ok(0)
    })
}

/// `modify_srq`.
///
/// # Safety
///
/// Called by the RDMA core with a live SRQ of ours and a valid `attr`.
pub(crate) unsafe extern "C" fn modify_srq_callback<T: Driver>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
    mask: bindings::ib_srq_attr_mask,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `attr` is valid for the call (the caller's guarantee).
        let a = unsafe { &*attr };
        let req = SrqModify {
            max_wr: (mask & bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR != 0).then_some(a.max_wr),
            limit: (mask & bindings::ib_srq_attr_mask_IB_SRQ_LIMIT != 0).then_some(a.srq_limit),
        };
        // SAFETY: A live SRQ of ours (the caller's guarantee).
        unsafe { shared_queue::<T>(srq) }.modify(&req)?;
        Ok(0)
    })
}

/// `query_srq`.
///
/// # Safety
///
/// Called by the RDMA core with a live SRQ of ours and a valid `attr`.
pub(crate) unsafe extern "C" fn query_srq_callback<T: Driver>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
) -> c_int {
    from_result(|| {
        // SAFETY: A live SRQ of ours (the caller's guarantee).
        let q = unsafe { shared_queue::<T>(srq) }.query()?;
        // SAFETY: `attr` is valid for writes (the caller's guarantee).
        unsafe {
            (*attr).max_wr = q.max_wr;
            (*attr).max_sge = q.max_sge;
            (*attr).srq_limit = q.limit;
        }
        Ok(0)
    })
}

/// `destroy_srq`.
///
/// # Safety
///
/// Called by the RDMA core with an SRQ that `create_srq_callback` created, once, with no user
/// left (no QP uses it).
pub(crate) unsafe extern "C" fn destroy_srq_callback<T: Driver>(
    srq: *mut bindings::ib_srq,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    let container = srq.cast::<SrqContainer<T::Srq>>();
    // SAFETY: Written by `create_srq_callback`; nothing uses them after this.
    let (queue, events) = unsafe {
        (
            ManuallyDrop::take(&mut (*container).queue),
            ManuallyDrop::take(&mut (*container).events),
        )
    };
    events.shut();
    queue.destroy();
    drop(queue);
    0
}

/// `post_srq_recv`: hands the chain to the SRQ one request at a time; the first refused one is
/// reported in `bad`.
///
/// # Safety
///
/// Called by the RDMA core with a live SRQ of ours, a valid chain and a valid `bad`.
pub(crate) unsafe extern "C" fn post_srq_recv_callback<T: Driver>(
    srq: *mut bindings::ib_srq,
    wr: *const bindings::ib_recv_wr,
    bad: *mut *const bindings::ib_recv_wr,
) -> c_int {
    // SAFETY: A live SRQ of ours (the caller's guarantee).
    let queue = unsafe { shared_queue::<T>(srq) };
    // SAFETY: A valid chain and `bad` (the caller's guarantee).
    unsafe { post_recv_chain(wr, bad, |view| queue.post_recv(view)) }
}
