// SPDX-License-Identifier: GPL-2.0

//! Per-device settings of a provider, as files under the device in sysfs
//! (`/sys/class/infiniband/<dev>/<name>`).
//!
//! A driver names its settings ([`super::device::Driver::settings`]); registration builds a
//! `device_attribute` for each and hands the group to the RDMA core as the device's
//! `device_group`, which it adds to the device's sysfs directory when it registers the device
//! and removes when it unregisters it. Reads and writes of a file come to the driver's
//! [`show_setting`](super::device::Driver::show_setting) and
//! [`store_setting`](super::device::Driver::store_setting) with the setting's index.
//!
//! The group lives in the device's container and is freed by `dealloc_driver`, after the
//! core removed the files.

use super::device::{with_driver, Device, Driver};
use crate::{
    alloc::{flags::GFP_KERNEL, KBox, KVec},
    bindings,
    error::Result,
    ffi::c_char,
    prelude::*,
    str::CStr,
};

/// The attributes of one device's settings.
///
/// # Invariants
///
/// `group.attrs` points to `ptrs`, a null-terminated list of the `attr` fields of `attrs`,
/// whose buffers are never reallocated after construction.
pub(crate) struct SettingsGroup {
    attrs: KVec<bindings::device_attribute>,
    ptrs: KVec<*mut bindings::attribute>,
    group: bindings::attribute_group,
}

impl SettingsGroup {
    /// A group for `names`, read-write for root, read-only for others.
    pub(crate) fn new<T: Driver>(names: &[&'static CStr]) -> Result<KBox<Self>> {
        #[cfg(CONFIG_DEBUG_LOCK_ALLOC)]
        let key = crate::static_lock_class!();
        let mut attrs = KVec::with_capacity(names.len(), GFP_KERNEL)?;
        for name in names {
            let mut a = bindings::device_attribute::default();
            a.attr.name = name.as_char_ptr();
            a.attr.mode = 0o644;
            // A dynamically allocated attribute needs a static lockdep key (`sysfs_attr_init`).
            #[cfg(CONFIG_DEBUG_LOCK_ALLOC)]
            {
                a.attr.key = key.as_ptr();
            }
            a.show = Some(show_callback::<T>);
            a.store = Some(store_callback::<T>);
            attrs.push(a, GFP_KERNEL)?;
        }
        let mut ptrs = KVec::with_capacity(names.len() + 1, GFP_KERNEL)?;
        for a in attrs.iter_mut() {
            ptrs.push(core::ptr::addr_of_mut!(a.attr), GFP_KERNEL)?;
        }
        ptrs.push(core::ptr::null_mut(), GFP_KERNEL)?;
        let mut group = KBox::new(
            Self {
                attrs,
                ptrs,
                group: bindings::attribute_group::default(),
            },
            GFP_KERNEL,
        )?;
        // INVARIANT: Both vectors are complete; they are not changed any more.
        group.group.attrs = group.ptrs.as_mut_ptr();
        Ok(group)
    }

    /// The group, for `ib_device_ops::device_group`.
    pub(crate) fn as_raw(&self) -> *const bindings::attribute_group {
        &self.group
    }

    /// The index of `attr` in the group.
    fn index_of(&self, attr: *const bindings::device_attribute) -> Option<usize> {
        let base = self.attrs.as_ptr() as usize;
        let at = (attr as usize).checked_sub(base)?;
        let size = core::mem::size_of::<bindings::device_attribute>();
        let index = at / size;
        (at % size == 0 && index < self.attrs.len()).then_some(index)
    }
}

/// Output of a setting's `show`: at most a page, as sysfs gives.
pub struct SettingOutput<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl SettingOutput<'_> {
    /// Appends `s`; text beyond the page is cut.
    pub fn push_str(&mut self, s: &str) {
        for b in s.bytes() {
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = b;
                self.len += 1;
            }
        }
    }
}

impl core::fmt::Write for SettingOutput<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.push_str(s);
        Ok(())
    }
}

/// Finds the device, its settings group and the setting's index for a sysfs callback.
///
/// # Safety
///
/// `dev` must be the `struct device` of one of our registered devices and `attr` one of its
/// settings' attributes.
unsafe fn lookup<T: Driver, R>(
    dev: *mut bindings::device,
    attr: *mut bindings::device_attribute,
    f: impl FnOnce(&T, &Device, usize) -> Result<R>,
) -> Result<R> {
    // SAFETY: `dev` is the core device of an `ib_device` (the caller's guarantee).
    let ibdev = unsafe { bindings::rdma_device_to_ibdev(dev) };
    // SAFETY: The device is registered while its sysfs files exist, so alive; the group is
    // the one `register` installed.
    let group = unsafe { super::device::settings_group(ibdev) }.ok_or(EINVAL)?;
    let index = group.index_of(attr).ok_or(EINVAL)?;
    // SAFETY: As above.
    unsafe { with_driver::<T, _>(ibdev, |d, device| f(d, device, index)) }
}

/// `show` of a setting.
///
/// # Safety
///
/// Called by sysfs with one of our devices, one of its settings and a page-sized buffer.
unsafe extern "C" fn show_callback<T: Driver>(
    dev: *mut bindings::device,
    attr: *mut bindings::device_attribute,
    buf: *mut c_char,
) -> isize {
    // SAFETY: sysfs gives a page to write into.
    let page = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), bindings::PAGE_SIZE) };
    let mut out = SettingOutput { buf: page, len: 0 };
    // SAFETY: The caller's guarantee.
    let shown = unsafe {
        lookup::<T, _>(dev, attr, |d, device, i| {
            d.show_setting(device, i, &mut out)
        })
    };
    match shown {
        Ok(()) => {
            out.push_str("\n");
            out.len as isize
        }
        Err(e) => e.to_errno() as isize,
    }
}

/// `store` of a setting.
///
/// # Safety
///
/// Called by sysfs with one of our devices, one of its settings and `count` bytes.
unsafe extern "C" fn store_callback<T: Driver>(
    dev: *mut bindings::device,
    attr: *mut bindings::device_attribute,
    buf: *const c_char,
    count: usize,
) -> isize {
    // SAFETY: sysfs gives `count` bytes.
    let input = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), count) };
    let text = match core::str::from_utf8(input) {
        Ok(t) => t.trim(),
        Err(_) => return EINVAL.to_errno() as isize,
    };
    let store = |d: &T, device: &Device, i| d.store_setting(device, i, text);
    // SAFETY: The caller's guarantee.
    let stored = unsafe { lookup::<T, _>(dev, attr, store) };
    match stored {
        Ok(()) => count as isize,
        Err(e) => e.to_errno() as isize,
    }
}
