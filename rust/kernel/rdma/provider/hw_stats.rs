// SPDX-License-Identifier: GPL-2.0

//! A port's hardware counters, as `rdma statistic show link DEV/PORT` and
//! `/sys/class/infiniband/DEV/ports/PORT/hw_counters/` show them.
//!
//! A driver names its counters once, statically ([`Driver::PORT_COUNTERS`], a list of
//! [`HwCounter`]s), and fills in their values when the RDMA core asks
//! ([`Driver::port_counters`]). The core allocates the values (`alloc_hw_port_stats`, here
//! with the driver's names), asks for them at most once per 10 ms (`get_hw_stats`, under the
//! values' mutex) and frees them with the device. The names live as long as the module, and
//! the core reads them only while the device is registered, which ends before the module can
//! go ([`super::device::DeviceSet`]).
//!
//! [`PerCpuCounters`] is where a driver may keep the counts: an array of 64-bit counters per
//! CPU. Counting is one `this_cpu_add` (on x86, one instruction with no lock prefix, safe
//! from any context, interrupts and softirqs included), so a data path counts without a lock
//! and without sharing a cache line between CPUs; reading sums every possible CPU's copy,
//! which is what the core's request does.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::device::{with_driver, Driver};
use crate::{bindings, error::from_result, ffi::c_int, prelude::*, str::CStr};

/// The name of one counter (`struct rdma_stat_desc`), in the static list a driver declares.
///
/// # Invariants
///
/// `0.name` points to a `'static` NUL-terminated string and `0.priv_` is null.
#[repr(transparent)]
pub struct HwCounter(bindings::rdma_stat_desc);

// SAFETY: A pointer to a `'static` immutable string and plain integers: nothing in it is
// mutable or tied to a thread.
unsafe impl Sync for HwCounter {}

impl HwCounter {
    /// A counter called `name` (what `rdma statistic` and sysfs show).
    pub const fn new(name: &'static CStr) -> Self {
        // INVARIANT: `name` is `'static`; `priv_` is null.
        Self(bindings::rdma_stat_desc {
            name: name.as_char_ptr(),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }
}

/// `alloc_hw_port_stats`: the values of `T`'s counters, for the core to keep.
///
/// # Safety
///
/// Called by the RDMA core with a device of ours.
pub(crate) unsafe extern "C" fn alloc_hw_port_stats_callback<T: Driver>(
    _ibdev: *mut bindings::ib_device,
    _port: u32,
) -> *mut bindings::rdma_hw_stats {
    let names = T::PORT_COUNTERS;
    let Ok(len) = c_int::try_from(names.len()) else {
        return core::ptr::null_mut();
    };
    // SAFETY: `HwCounter` is a transparent `rdma_stat_desc`, so `names` is an array of `len`
    // of them; it is `'static` (module memory), and the core reads it only while the device
    // is registered, which ends before the module unloads. The function returns the values
    // with `descs` pointing to it, or null.
    unsafe {
        bindings::rdma_alloc_hw_stats_struct(
            names.as_ptr().cast(),
            len,
            bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as crate::ffi::c_ulong,
        )
    }
}

/// `get_hw_stats`: the driver fills in every value; returns how many.
///
/// # Safety
///
/// Called by the RDMA core with a device of ours and values that
/// [`alloc_hw_port_stats_callback`] allocated for it, under the values' mutex.
pub(crate) unsafe extern "C" fn get_hw_stats_callback<T: Driver>(
    ibdev: *mut bindings::ib_device,
    stats: *mut bindings::rdma_hw_stats,
    port: u32,
    _index: c_int,
) -> c_int {
    from_result(|| {
        // SAFETY: `stats` is valid and the core holds its mutex, so we are its only writer
        // (the caller's guarantee).
        let stats = unsafe { &mut *stats };
        let len = usize::try_from(stats.num_counters).map_err(|_| EINVAL)?;
        if len != T::PORT_COUNTERS.len() {
            return Err(EINVAL);
        }
        // SAFETY: `rdma_alloc_hw_stats_struct` allocated `num_counters` values after the
        // header.
        let values = unsafe { stats.value.as_mut_slice(len) };
        // SAFETY: A device of ours, alive for the call.
        unsafe { with_driver::<T, _>(ibdev, |d, dev| d.port_counters(dev, port, values)) }?;
        Ok(stats.num_counters)
    })
}

/// Counters of 64 bits, one array of them per CPU; see the module documentation.
///
/// # Invariants
///
/// `ptr` is a per-CPU allocation of `len` `u64`s (`__alloc_percpu_gfp`), owned by this
/// object; it is a per-CPU cookie, never dereferenced as an ordinary pointer.
pub struct PerCpuCounters {
    ptr: *mut u64,
    len: usize,
}

// SAFETY: The per-CPU memory belongs to the object; every access goes through the per-CPU
// accessors, which are safe from any thread and context.
unsafe impl Send for PerCpuCounters {}
// SAFETY: As above: `add` and `sum` from several threads at once are what per-CPU counters
// are for (each CPU adds to its own copy; a sum reads whole 64-bit words).
unsafe impl Sync for PerCpuCounters {}

impl PerCpuCounters {
    /// `len` counters, all 0.
    pub fn new(len: usize) -> Result<Self> {
        if len == 0 || len.checked_mul(core::mem::size_of::<u64>()).is_none() {
            return Err(EINVAL);
        }
        // SAFETY: Any length; returns zeroed per-CPU memory or null.
        let ptr = unsafe { bindings::rdma_counters_alloc(len) };
        if ptr.is_null() {
            return Err(ENOMEM);
        }
        // INVARIANT: A fresh allocation of `len` counters.
        Ok(Self { ptr, len })
    }

    /// The number of counters.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none (never: `new` refuses that).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `n` to counter `index` on this CPU; an index out of range is ignored.
    #[inline]
    pub fn add(&self, index: usize, n: u64) {
        if index < self.len {
            // SAFETY: `ptr` is a per-CPU array of `len` counters (type invariant) and
            // `index` is inside it.
            unsafe { bindings::rdma_counters_add(self.ptr, index, n) };
        }
    }

    /// Counter `index` summed over every possible CPU (0 out of range).
    pub fn sum(&self, index: usize) -> u64 {
        if index >= self.len {
            return 0;
        }
        // SAFETY: As in `add`.
        unsafe { bindings::rdma_counters_sum(self.ptr, index) }
    }
}

impl Drop for PerCpuCounters {
    fn drop(&mut self) {
        // SAFETY: Our allocation (type invariant), freed once; `free_percpu` may be called
        // from any context.
        unsafe { bindings::free_percpu(self.ptr.cast()) };
    }
}

/// The hardware counter callbacks are set only for a driver with counters, which names some.
pub(crate) const fn check<T: Driver>() {
    if T::HAS_PORT_COUNTERS {
        assert!(!T::PORT_COUNTERS.is_empty());
    }
}
