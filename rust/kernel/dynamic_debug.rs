// SPDX-License-Identifier: GPL-2.0

//! Dynamic debug call sites for Rust's [`pr_debug!`](crate::pr_debug).
//!
//! A C `pr_debug()` in a kernel with `CONFIG_DYNAMIC_DEBUG` is a call site described by a
//! `struct _ddebug` in the `__dyndbg` section of its object. The dynamic debug core takes that
//! section from the kernel image at boot and from each module when it loads, lists every site
//! in `<debugfs>/dynamic_debug/control` (file, line, module, function, format), and sets a
//! site's flags from what is written there: `echo 'module rsiw +p' > .../control` switches on
//! every site of a module, `-p` off again, and `file`, `func`, `line` and `format` select
//! fewer. A site prints only while its `p` flag is set; the other flags add the module, the
//! function, the line or the thread to the message.
//!
//! [`pr_debug!`](crate::pr_debug) does the same for Rust: each invocation places a
//! [`Descriptor`] in the `__dyndbg` section of the crate that invokes it (the kernel crate or
//! a module), with the function field holding the invoking module's path (`rsiw::qp`: Rust
//! has no name of the enclosing function to give, and `func rsiw::qp*` selects by it), and
//! prints through `__dynamic_pr_debug`, which adds what the flags ask for, only while the flag
//! is set. The message has the prefix of the other `pr_*!` messages (`rsiw: `).
//!
//! A descriptor is a static that the core writes (the flags, and the static key that C call
//! sites patch their code with) under its lock while Rust code reads the flags: [`Descriptor`]
//! is therefore [`Opaque`], and the flags are read with a volatile load of their word, as a C
//! site without jump labels reads them. No code branches on the descriptor's static key: when
//! the core switches the site, `static_branch_enable` finds no jump entry for the key and only
//! sets its count.
//!
//! C header: [`include/linux/dynamic_debug.h`](srctree/include/linux/dynamic_debug.h)

use crate::{bindings, ffi::c_void, str::CStr, types::Opaque};
use core::{fmt, ptr};

/// Bits of the bit-field word of `struct _ddebug` (`lineno:18`, `class_id:6`, `flags:8`, in
/// that order from the least significant bit, as C lays bit-fields out on the little-endian
/// targets the kernel builds Rust for). The KUnit suite below checks them against bindgen's
/// accessors.
const LINENO_BITS: u32 = 18;
const CLASS_SHIFT: u32 = LINENO_BITS;
const CLASS_BITS: u32 = 6;
const FLAGS_SHIFT: u32 = CLASS_SHIFT + CLASS_BITS;
/// `_DPRINTK_CLASS_DFLT`: the site belongs to no class, so that plain queries select it.
const CLASS_DEFAULT: u32 = (1 << CLASS_BITS) - 1;

/// One `pr_debug!` call site: a `struct _ddebug` the dynamic debug core lists and switches.
///
/// # Invariants
///
/// The strings it points to are NUL-terminated and `'static`; its bit-field word holds a line
/// number, the default class and flags written only by the dynamic debug core.
#[repr(transparent)]
pub struct Descriptor(Opaque<bindings::_ddebug>);

// SAFETY: The dynamic debug core writes a descriptor's flags and key under its own lock; Rust
// code only reads the flags (a volatile load) and passes the descriptor to C, which any thread
// may do, as any thread may run a C call site.
unsafe impl Sync for Descriptor {}

impl Descriptor {
    /// A call site in module `module` (its `KBUILD_MODNAME`), function `function`, at
    /// `file:line`, printing `format`; switched off, as the core starts every site without
    /// `DEBUG`.
    ///
    /// Used by [`pr_debug!`](crate::pr_debug) to build the static it places in the `__dyndbg`
    /// section; a descriptor anywhere else is unknown to the core and stays off.
    pub const fn new(
        module: &'static CStr,
        function: &'static CStr,
        file: &'static CStr,
        format: &'static CStr,
        line: u32,
    ) -> Self {
        // SAFETY: All-zero is a valid `struct _ddebug`: null strings (set below), a zero
        // bit-field word (set below) and a disabled static key without jump entries, which is
        // `STATIC_KEY_FALSE_INIT`.
        let mut site: bindings::_ddebug = unsafe { core::mem::zeroed() };
        site.modname = module.as_char_ptr();
        site.function = function.as_char_ptr();
        site.filename = file.as_char_ptr();
        site.format = format.as_char_ptr();
        let word = (line & ((1 << LINENO_BITS) - 1)) | (CLASS_DEFAULT << CLASS_SHIFT);
        site._bitfield_1 = bindings::__BindgenBitfieldUnit::new(word.to_ne_bytes());
        // INVARIANT: The strings are `'static` `CStr`s, and the word holds `line`, the default
        // class and no flag.
        Self(Opaque::new(site))
    }

    /// Whether the site is switched on (its `p` flag is set).
    #[inline]
    pub fn enabled(&self) -> bool {
        let site = self.0.get();
        let word =
            // SAFETY: `site` points to the descriptor, valid as long as `self`, and its bit-field
            // unit is a `#[repr(C)]` wrapper of its four bytes. The core may write the word on
            // another CPU: it is read once, with a volatile load, as C reads it.
            unsafe { ptr::read_volatile(ptr::addr_of!((*site)._bitfield_1).cast::<[u8; 4]>()) };
        let flags = u32::from_ne_bytes(word) >> FLAGS_SHIFT;
        flags & bindings::_DPRINTK_FLAGS_PRINT != 0
    }

    /// Prints `args` at the debug level, with the module prefix of the other `pr_*!` messages
    /// and what the site's flags add.
    #[cold]
    pub fn print(&self, args: fmt::Arguments<'_>) {
        let site = self.0.get();
        // SAFETY: `site` is valid (as above); `modname` is written once, when the descriptor is
        // made, and read here without a reference to the rest, which the core may write.
        let module = unsafe { ptr::read(ptr::addr_of!((*site).modname)) };
        // SAFETY: `site` is a valid descriptor (the core only reads what it did not write, and
        // takes its own lock for its flags); the format takes a NUL-terminated string (the
        // module's name, by the type invariant) and a `fmt::Arguments` for `%pA`, which lives
        // through the call.
        unsafe {
            bindings::__dynamic_pr_debug(
                site,
                crate::c_str!("%s: %pA").as_char_ptr(),
                module,
                ptr::from_ref(&args).cast::<c_void>(),
            )
        };
    }
}

/// `bytes` as a C string for a call site's descriptor: the module's `__LOG_PREFIX`, or a path
/// or format to which the macro appended the NUL. Bytes with another NUL in them (a format
/// literal written with `\0`) give the empty string, which the control file then shows.
#[doc(hidden)]
pub const fn site_str(bytes: &'static [u8]) -> &'static CStr {
    match CStr::from_bytes_with_nul(bytes) {
        Ok(s) => s,
        Err(_) => crate::c_str!(""),
    }
}

/// The call site of one [`pr_debug!`](crate::pr_debug) with `CONFIG_DYNAMIC_DEBUG`: a
/// [`Descriptor`] in the `__dyndbg` section, and the message printed while it is switched on.
#[doc(hidden)]
#[macro_export]
#[expect(clippy::crate_in_macro_def)]
macro_rules! dynamic_pr_debug (
    ($format:literal $($arg:tt)*) => ({
        // Not `#[used]`: that marks the section SHF_GNU_RETAIN, the bit module loading takes
        // for SHF_RO_AFTER_INIT, and the core could no longer write the descriptor. The code
        // below refers to it, which keeps it.
        #[link_section = "__dyndbg"]
        static DESCRIPTOR: $crate::dynamic_debug::Descriptor =
            $crate::dynamic_debug::Descriptor::new(
                $crate::dynamic_debug::site_str(crate::__LOG_PREFIX),
                $crate::dynamic_debug::site_str(concat!(module_path!(), "\0").as_bytes()),
                $crate::dynamic_debug::site_str(concat!(file!(), "\0").as_bytes()),
                $crate::dynamic_debug::site_str(concat!($format, "\0").as_bytes()),
                line!(),
            );
        if DESCRIPTOR.enabled() {
            DESCRIPTOR.print(format_args!($format $($arg)*));
        }
    })
);

#[cfg(CONFIG_KUNIT)]
mod tests {
    use super::{Descriptor, CLASS_DEFAULT};
    use crate::{bindings, c_str, kunit::suite::Test, kunit_expect, prelude::*};

    /// A descriptor of this file at `line`, known to no one but the test.
    fn site_at(line: u32) -> Descriptor {
        Descriptor::new(
            c_str!("rust_kernel"),
            c_str!("kernel::dynamic_debug::tests"),
            c_str!("rust/kernel/dynamic_debug.rs"),
            c_str!("format"),
            line,
        )
    }

    /// The bit-field word as [`Descriptor::new`] writes it reads back through bindgen's
    /// accessors, which know the C layout: the line, the default class, no flag.
    fn bit_fields_match_the_c_layout(test: &mut Test) -> Result {
        let site = site_at(123_457);
        // SAFETY: `site` is a local descriptor no other thread sees.
        let raw = unsafe { &*site.0.get() };
        kunit_expect!(test, raw.lineno() == 123_457);
        kunit_expect!(test, raw.class_id() == CLASS_DEFAULT);
        kunit_expect!(test, raw.flags() == 0);
        kunit_expect!(test, !site.enabled());
        Ok(())
    }

    /// The `p` flag, set as the core sets it, switches the site on, and only that flag does.
    fn the_print_flag_switches_the_site(test: &mut Test) -> Result {
        let site = site_at(7);
        // SAFETY: `site` is a local descriptor no other thread sees.
        let raw = unsafe { &mut *site.0.get() };
        raw.set_flags(bindings::_DPRINTK_FLAGS_INCL_MODNAME | bindings::_DPRINTK_FLAGS_INCL_LINENO);
        kunit_expect!(test, !site.enabled());
        // SAFETY: As above.
        let raw = unsafe { &mut *site.0.get() };
        raw.set_flags(bindings::_DPRINTK_FLAGS_PRINT);
        kunit_expect!(test, site.enabled());
        // SAFETY: As above.
        let raw = unsafe { &*site.0.get() };
        kunit_expect!(test, raw.lineno() == 7);
        Ok(())
    }

    crate::kunit_suite!(
        rust_dynamic_debug,
        [
            bit_fields_match_the_c_layout,
            the_print_flag_switches_the_site
        ]
    );
}
