// SPDX-License-Identifier: GPL-2.0

//! Counters of chosen queue pairs, as `rdma statistic qp` binds them and `rdma statistic show`
//! shows them.
//!
//! A user binds QPs to counters: by hand (`rdma statistic qp bind link DEV/PORT lqpn N`), or
//! by a rule (`rdma statistic qp set link DEV/PORT auto type on`: each user QP is bound, when
//! it moves to INIT, to the counter of its kind, made for the first such QP). The RDMA core
//! keeps the counters (`struct rdma_counter`, with an id the driver picks, unique in the
//! device) and asks the driver to:
//!
//! - bind a QP to a counter (`counter_bind_qp`), the counter's first QP with no id yet: the
//!   driver makes its counts and returns the id; the driver also records the binding in the
//!   QP (`ib_qp.counter`), which is what the core tests and lists;
//! - unbind a QP (`counter_unbind_qp`; the core does so before it destroys the QP), after
//!   which the QP's counts go where unbound QPs' go;
//! - free a counter whose last QP left (`counter_dealloc`), after reading it a last time;
//! - allocate a counter's values (`counter_alloc_stats`), here with the port's names
//!   ([`Driver::PORT_COUNTERS`]), and fill them in (`counter_update_stats`).
//!
//! The core shows a port's counters (`rdma statistic show link`, sysfs `hw_counters`) as the
//! driver's values plus those of every live counter plus those of every freed one. So a
//! driver counts each event once: for a bound QP in its counter, otherwise in the port's
//! values. The core serialises the four calls of one counter (its mutex) and refuses binding
//! a bound QP, unbinding an unbound one, and mixing devices or ports; the callbacks check the
//! device again, since a counter of one device must never reach another's driver.
//!
//! C header: [`include/rdma/rdma_counter.h`](srctree/include/rdma/rdma_counter.h)

use super::{
    device::{with_driver, Device, Driver},
    hw_stats::alloc_hw_port_stats_callback,
    objects::queue_pair,
};
use crate::{bindings, error::from_result, ffi::c_int, prelude::*};
use core::{
    num::NonZeroU32,
    sync::atomic::{AtomicU64, Ordering},
};

/// The id of a QP counter, unique among the live counters of its device; what `rdma
/// statistic` calls `cntn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCounterId(NonZeroU32);

impl QpCounterId {
    /// The id `n`, if it is one (not 0: the core's mark of a counter that has none yet).
    pub fn new(n: u32) -> Option<Self> {
        NonZeroU32::new(n).map(Self)
    }

    /// The number.
    pub fn get(self) -> u32 {
        self.0.get()
    }
}

/// `counter_bind_qp`: binds `qp` to `counter`, whose id the driver picks if it has none.
///
/// # Safety
///
/// Called by the RDMA core with a counter of one of our devices, under the counter's mutex,
/// and a live QP of ours that the core keeps alive for the call.
pub(crate) unsafe extern "C" fn counter_bind_qp_callback<T: Driver>(
    counter: *mut bindings::rdma_counter,
    qp: *mut bindings::ib_qp,
) -> c_int {
    from_result(|| {
        // SAFETY: Both are valid and the counter's mutex is held (the caller's guarantee):
        // nothing else writes its id.
        let (ibdev, id, port) = unsafe { ((*counter).device, (*counter).id, (*counter).port) };
        // SAFETY: As above.
        if unsafe { (*qp).device } != ibdev {
            return Err(EINVAL);
        }
        let existing = QpCounterId::new(id);
        // SAFETY: A live QP of ours (the caller's guarantee).
        let qp_obj = unsafe { queue_pair::<T>(qp) };
        let bind = |d: &T, dev: &Device| d.bind_qp_counter(dev, existing, port, qp_obj);
        // SAFETY: A device of ours, alive for the call.
        let got = unsafe { with_driver::<T, _>(ibdev, bind) }?;
        if existing.is_some_and(|e| e != got) {
            // The driver moved the QP to a counter the core does not know of.
            // SAFETY: As above.
            unsafe { with_driver::<T, _>(ibdev, |d, dev| d.unbind_qp_counter(dev, qp_obj)) };
            return Err(EINVAL);
        }
        // SAFETY: Both valid; the counter's mutex is held, under which the core reads and
        // writes the id and the QP's binding.
        unsafe {
            (*counter).id = got.get();
            (*qp).counter = counter;
        }
        Ok(0)
    })
}

/// `counter_unbind_qp`: unbinds `qp` from its counter; it cannot fail.
///
/// # Safety
///
/// Called by the RDMA core with a live QP of ours that is bound to a counter, under that
/// counter's mutex.
pub(crate) unsafe extern "C" fn counter_unbind_qp_callback<T: Driver>(
    qp: *mut bindings::ib_qp,
) -> c_int {
    // SAFETY: A live QP of ours (the caller's guarantee).
    let (ibdev, qp_obj) = unsafe { ((*qp).device, queue_pair::<T>(qp)) };
    // SAFETY: A device of ours, alive for the call.
    unsafe { with_driver::<T, _>(ibdev, |d, dev| d.unbind_qp_counter(dev, qp_obj)) };
    // SAFETY: As above, under the counter's mutex.
    unsafe { (*qp).counter = core::ptr::null_mut() };
    0
}

/// `counter_dealloc`: the counter's last QP left and the core read it a last time.
///
/// # Safety
///
/// Called by the RDMA core with a counter of one of our devices, once, before freeing it.
pub(crate) unsafe extern "C" fn counter_dealloc_callback<T: Driver>(
    counter: *mut bindings::rdma_counter,
) -> c_int {
    // SAFETY: Valid for the call (the caller's guarantee).
    let (ibdev, id) = unsafe { ((*counter).device, (*counter).id) };
    if let Some(id) = QpCounterId::new(id) {
        // SAFETY: A device of ours, alive for the call.
        unsafe { with_driver::<T, _>(ibdev, |d, dev| d.dealloc_qp_counter(dev, id)) };
    }
    0
}

/// `counter_alloc_stats`: a counter's values, with the port's names.
///
/// # Safety
///
/// Called by the RDMA core with a counter of one of our devices.
pub(crate) unsafe extern "C" fn counter_alloc_stats_callback<T: Driver>(
    counter: *mut bindings::rdma_counter,
) -> *mut bindings::rdma_hw_stats {
    // SAFETY: Valid for the call (the caller's guarantee).
    let (ibdev, port) = unsafe { ((*counter).device, (*counter).port) };
    // SAFETY: A device of ours.
    unsafe { alloc_hw_port_stats_callback::<T>(ibdev, port) }
}

/// `counter_update_stats`: fills in the counter's values.
///
/// # Safety
///
/// Called by the RDMA core with a counter of one of our devices, whose values
/// [`counter_alloc_stats_callback`] allocated, under the counter's mutex.
pub(crate) unsafe extern "C" fn counter_update_stats_callback<T: Driver>(
    counter: *mut bindings::rdma_counter,
) -> c_int {
    from_result(|| {
        // SAFETY: Valid for the call (the caller's guarantee).
        let (ibdev, id, port, stats) = unsafe {
            (
                (*counter).device,
                (*counter).id,
                (*counter).port,
                (*counter).stats,
            )
        };
        let id = QpCounterId::new(id).ok_or(EINVAL)?;
        if stats.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: `stats` is the counter's values (the caller's guarantee).
        let len = usize::try_from(unsafe { (*stats).num_counters }).map_err(|_| EINVAL)?;
        if len != T::PORT_COUNTERS.len() {
            return Err(EINVAL);
        }
        let mut values = KVec::from_elem(0u64, len, GFP_KERNEL)?;
        let fill = |d: &T, dev: &Device| d.qp_counter_values(dev, id, port, &mut values);
        // SAFETY: A device of ours, alive for the call.
        unsafe { with_driver::<T, _>(ibdev, fill) }?;
        // SAFETY: `rdma_alloc_hw_stats_struct` allocated `num_counters` values after the
        // header, aligned for 64 bits; no reference is made.
        let slots = unsafe { core::ptr::addr_of_mut!((*stats).value) }.cast::<u64>();
        for (i, v) in values.iter().enumerate() {
            // The core reads the values without a lock of ours (it sums them for the port
            // under none): each is stored whole, as `WRITE_ONCE` would.
            // SAFETY: `i < len`, inside the allocation; the core accesses the values only
            // as whole aligned words.
            unsafe { AtomicU64::from_ptr(slots.add(i)) }.store(*v, Ordering::Relaxed);
        }
        Ok(0)
    })
}

/// A driver with QP counters has port counters, whose names its counters share, and QPs.
pub(crate) const fn check<T: Driver>() {
    if T::HAS_BIND_QP_COUNTER {
        assert!(T::HAS_PORT_COUNTERS && T::HAS_CREATE_QP);
    }
}
