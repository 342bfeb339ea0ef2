// SPDX-License-Identifier: GPL-2.0

//! String parameters of loadable modules (`module_param(name, charp, 0444)` in C).
//!
//! The module macro of this kernel has no parameters, yet a sample a user loads by hand needs
//! to be told what to do (`modprobe rust_rdma_ping addr=198.18.0.1`). A parameter is a
//! `struct kernel_param` in the module's `__param` section, which the module loader parses the
//! command line against before the module's init runs; [`module_param_str!`](crate::module_param_str) emits one.
//!
//! Only read-only (`0444`) string parameters exist here: the value is written by the loader
//! before init and never again, so reading it needs no lock.
//!
//! C header: [`include/linux/moduleparam.h`](srctree/include/linux/moduleparam.h)

use crate::{bindings, ffi::c_char, str::CStr};
use core::cell::UnsafeCell;

/// The value of a string parameter.
///
/// # Invariants
///
/// `value` is null or a NUL-terminated string set by the module loader before the module's init
/// ran; it is not changed while the module is live.
pub struct StrParam {
    value: UnsafeCell<*mut c_char>,
}

// SAFETY: The value is only written before the module's init (type invariant).
unsafe impl Sync for StrParam {}

impl StrParam {
    /// A parameter that was not given.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Self {
            value: UnsafeCell::new(core::ptr::null_mut()),
        }
    }

    /// The value given at load time, if any.
    pub fn get(&self) -> Option<&CStr> {
        // SAFETY: No writes happen while the module is live (type invariant).
        let ptr = unsafe { *self.value.get() };
        if ptr.is_null() {
            return None;
        }
        // SAFETY: A non-null value is a NUL-terminated string that lives as long as the module
        // (type invariant), longer than `&self`.
        Some(unsafe { CStr::from_char_ptr(ptr) })
    }
}

/// A `struct kernel_param` describing a [`StrParam`], for the `__param` section.
#[repr(transparent)]
pub struct ParamRecord(bindings::kernel_param);

// SAFETY: The record is read by the module loader only; it points to static data.
unsafe impl Sync for ParamRecord {}

impl ParamRecord {
    /// The record of read-only string parameter `name` stored in `value`.
    pub const fn charp(name: &'static CStr, value: &'static StrParam) -> Self {
        Self(bindings::kernel_param {
            name: name.as_char_ptr(),
            // The loader's lock for modules without one is the global parameter lock.
            mod_: core::ptr::null_mut(),
            ops: core::ptr::addr_of!(bindings::param_ops_charp),
            perm: 0o444,
            level: -1,
            flags: 0,
            __bindgen_anon_1: bindings::kernel_param__bindgen_ty_1 {
                arg: value.value.get().cast(),
            },
        })
    }
}

/// Declares the read-only string module parameter `$param`, stored in the [`StrParam`] static
/// `$name`.
///
/// ```ignore
/// kernel::module_param_str!(ADDR, "addr");
/// let addr: Option<&CStr> = ADDR.get();
/// ```
#[macro_export]
macro_rules! module_param_str {
    ($name:ident, $param:literal) => {
        static $name: $crate::module_param::StrParam = $crate::module_param::StrParam::new();
        const _: () = {
            #[link_section = "__param"]
            #[used]
            static PARAM: $crate::module_param::ParamRecord =
                $crate::module_param::ParamRecord::charp($crate::c_str!($param), &$name);
        };
    };
}
