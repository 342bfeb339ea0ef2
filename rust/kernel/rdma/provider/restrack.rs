// SPDX-License-Identifier: GPL-2.0

//! A provider's own detail of its resources, as `rdma -dd resource show qp` shows it.
//!
//! The RDMA core's resource tracking (restrack) answers `rdma resource show` with what the
//! core knows of each object, then lets the provider add attributes of its own
//! (`fill_res_qp_entry`): named values in a nest (`RDMA_NLDEV_ATTR_DRIVER`) of the netlink
//! message, which iproute2 prints with `-dd`. A driver's queue pairs and memory regions write
//! them in [`QueuePair::fill_restrack`] and
//! [`MemoryRegion::fill_restrack`](super::memory_region::MemoryRegion::fill_restrack) through
//! [`RestrackAttrs`].
//!
//! An rdma_cm id (`rdma resource show cm_id`) is the connection manager's object, not the
//! driver's: on an iWARP device the driver knows the iw_cm id under it, which it was handed
//! to connect or accept, so the core's rdma_cm id is turned into that id's identity
//! ([`IwCmId::key`](super::iw_provider::IwCmId::key)) for
//! [`Driver::fill_restrack_cm_id`](super::device::Driver::fill_restrack_cm_id). The identity
//! is only compared, never followed.
//!
//! C header: [`include/rdma/restrack.h`](srctree/include/rdma/restrack.h)

use super::{
    device::{with_driver, Driver},
    memory_region::memory_region,
    objects::{queue_pair, QueuePair},
};
use crate::{bindings, error::from_result, error::to_result, ffi::c_int, prelude::*, str::CStr};
use core::marker::PhantomData;

/// The driver attributes of one resource in a netlink message being built.
///
/// # Invariants
///
/// `skb` is a message being filled, with a nest for driver attributes open, for the lifetime
/// `'a`, and nothing else writes to it meanwhile.
pub struct RestrackAttrs<'a> {
    skb: *mut bindings::sk_buff,
    _borrow: PhantomData<&'a mut bindings::sk_buff>,
}

impl RestrackAttrs<'_> {
    /// Adds `name` with the value `value`; `EMSGSIZE` when the message is full.
    pub fn put_u32(&mut self, name: &CStr, value: u32) -> Result {
        // SAFETY: `skb` is being filled (type invariant); the function copies the name.
        to_result(unsafe { bindings::rdma_nl_put_driver_u32(self.skb, name.as_char_ptr(), value) })
    }

    /// Adds `name` with the value `value`, which iproute2 prints in hexadecimal.
    pub fn put_u32_hex(&mut self, name: &CStr, value: u32) -> Result {
        // SAFETY: As in `put_u32`.
        to_result(unsafe {
            bindings::rdma_nl_put_driver_u32_hex(self.skb, name.as_char_ptr(), value)
        })
    }

    /// Adds `name` with the 64-bit value `value`.
    pub fn put_u64(&mut self, name: &CStr, value: u64) -> Result {
        // SAFETY: As in `put_u32`.
        to_result(unsafe { bindings::rdma_nl_put_driver_u64(self.skb, name.as_char_ptr(), value) })
    }

    /// Adds `name` with the string `value`.
    pub fn put_str(&mut self, name: &CStr, value: &CStr) -> Result {
        // SAFETY: As in `put_u32`; the function copies both strings.
        to_result(unsafe {
            bindings::rdma_nl_put_driver_string(self.skb, name.as_char_ptr(), value.as_char_ptr())
        })
    }
}

/// `fill_res_qp_entry`: the driver's attributes of `qp`, in a nest of their own.
///
/// # Safety
///
/// Called by the RDMA core with a message being filled and a QP of ours on which it holds a
/// resource-tracking reference: `destroy_qp` is not called before that reference is dropped
/// (`ib_destroy_qp_user` drains the references first).
pub(crate) unsafe extern "C" fn fill_res_qp_entry_callback<T: Driver>(
    msg: *mut bindings::sk_buff,
    qp: *mut bindings::ib_qp,
) -> c_int {
    from_result(|| {
        // SAFETY: A QP of ours that is not destroyed during the call (the caller's guarantee).
        let qp = unsafe { queue_pair::<T>(qp) };
        // SAFETY: `msg` is being filled for us (the caller's guarantee).
        unsafe { fill_nested(msg, |attrs| qp.fill_restrack(attrs)) }
    })
}

/// `fill_res_mr_entry`: the driver's attributes of `mr`, in a nest of their own.
///
/// # Safety
///
/// Called by the RDMA core with a message being filled and an MR of ours on which it holds a
/// resource-tracking reference: `dereg_mr` is not called before that reference is dropped
/// (`ib_dereg_mr_user` drains the references first).
pub(crate) unsafe extern "C" fn fill_res_mr_entry_callback(
    msg: *mut bindings::sk_buff,
    mr: *mut bindings::ib_mr,
) -> c_int {
    from_result(|| {
        // SAFETY: An MR of ours, not deregistered during the call (the caller's guarantee).
        let mr = unsafe { memory_region(mr) };
        // SAFETY: `msg` is being filled for us (the caller's guarantee).
        unsafe { fill_nested(msg, |attrs| mr.fill_restrack(attrs)) }
    })
}

/// `fill_res_cm_id_entry`: the driver's attributes of the connection of an rdma_cm id, in a
/// nest of their own.
///
/// # Safety
///
/// Called by the RDMA core with a message being filled and an rdma_cm id of one of our
/// devices on which it holds a resource-tracking reference (the id, and the iw_cm id under it,
/// are not destroyed before that reference is dropped).
pub(crate) unsafe extern "C" fn fill_res_cm_id_entry_callback<T: Driver>(
    msg: *mut bindings::sk_buff,
    id: *mut bindings::rdma_cm_id,
) -> c_int {
    from_result(|| {
        // SAFETY: A live rdma_cm id (the caller's guarantee); the function returns its iw_cm
        // id, or null for an id without one.
        let iw = unsafe { bindings::rdma_iw_cm_id(id) };
        if iw.is_null() {
            return Ok(0);
        }
        // SAFETY: As above; the id's device is ours (the core calls its device's op).
        let ibdev = unsafe { (*id).device };
        let key = iw as usize;
        // SAFETY: `msg` is being filled for us (the caller's guarantee); the device is ours
        // and alive for the call.
        unsafe {
            fill_nested(msg, |attrs| {
                with_driver::<T, _>(ibdev, |d, dev| d.fill_restrack_cm_id(dev, key, attrs))
            })
        }
    })
}

/// Runs `fill` with the driver attributes of a resource in `msg`, in a nest of their own
/// (removed again if `fill` fails).
///
/// # Safety
///
/// `msg` must be a netlink message the RDMA core is filling for us, for the call.
unsafe fn fill_nested(
    msg: *mut bindings::sk_buff,
    fill: impl FnOnce(&mut RestrackAttrs<'_>) -> Result,
) -> Result<c_int> {
    // SAFETY: `msg` is being filled (the caller's guarantee).
    let nest = unsafe {
        bindings::nla_nest_start_noflag(
            msg,
            bindings::rdma_nldev_attr_RDMA_NLDEV_ATTR_DRIVER as c_int,
        )
    };
    if nest.is_null() {
        return Err(EMSGSIZE);
    }
    // INVARIANT: The nest is open, and the message is ours for the call.
    let mut attrs = RestrackAttrs {
        skb: msg,
        _borrow: PhantomData,
    };
    match fill(&mut attrs) {
        Ok(()) => {
            // SAFETY: `nest` was opened in `msg` above.
            unsafe { bindings::nla_nest_end(msg, nest) };
            Ok(0)
        }
        Err(e) => {
            // SAFETY: As above; this trims what the driver added.
            unsafe { bindings::nla_nest_cancel(msg, nest) };
            Err(e)
        }
    }
}
