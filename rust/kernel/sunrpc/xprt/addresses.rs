// SPDX-License-Identifier: GPL-2.0

//! The server address of a transport as the RPC client displays it (`address_strings`:
//! `/proc/self/mountstats`, `rpc_peeraddr2str`), set up as `xprt_rdma_format_addresses` does.

use crate::{
    bindings,
    ffi::{c_char, c_void},
    prelude::*,
    str::{CStr, CString},
};
use core::{fmt, mem::size_of, ptr::addr_of};

/// The address family of a server address the abstraction can display.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    V4,
    V6,
}

pub(super) fn address_family(sap: *const bindings::sockaddr, len: usize) -> Result<Family> {
    if sap.is_null() || len < size_of::<bindings::__kernel_sa_family_t>() {
        return Err(EINVAL);
    }
    // SAFETY: `sap` has `len` bytes (the client's guarantee), enough for the family.
    let family = u32::from(unsafe { (*sap).sa_family });
    match family {
        bindings::AF_INET if len >= size_of::<bindings::sockaddr_in>() => Ok(Family::V4),
        bindings::AF_INET6 if len >= size_of::<bindings::sockaddr_in6>() => Ok(Family::V6),
        bindings::AF_INET | bindings::AF_INET6 => Err(EINVAL),
        _ => Err(EAFNOSUPPORT),
    }
}

/// The display strings the abstraction allocates (the others are static).
const ALLOCATED: [u32; 4] = [
    bindings::rpc_display_format_t_RPC_DISPLAY_ADDR,
    bindings::rpc_display_format_t_RPC_DISPLAY_PORT,
    bindings::rpc_display_format_t_RPC_DISPLAY_HEX_ADDR,
    bindings::rpc_display_format_t_RPC_DISPLAY_HEX_PORT,
];

/// A `kstrdup` of `s`, for `address_strings`.
fn kstrdup(s: &CStr) -> Result<*const c_char> {
    // SAFETY: `s` is NUL-terminated.
    let p = unsafe { bindings::kstrdup(s.as_char_ptr(), bindings::GFP_KERNEL) };
    if p.is_null() {
        return Err(ENOMEM);
    }
    Ok(p)
}

fn kstrdup_fmt(args: fmt::Arguments<'_>) -> Result<*const c_char> {
    kstrdup(&CString::try_from_fmt(args)?)
}

/// Sets the display strings of `x`'s address as `xprt_rdma_format_addresses` does.
///
/// # Safety
///
/// `x` is a transport being set up, with its address set, that no one else uses yet; its
/// allocated strings are null.
pub(super) unsafe fn format_addresses(
    x: *mut bindings::rpc_xprt,
    netid: &'static CStr,
    proto: &'static CStr,
) -> Result {
    // SAFETY: The address was set, with its length (the caller's guarantee).
    let (sap, len) = unsafe {
        (
            addr_of!((*x).addr).cast::<bindings::sockaddr>(),
            (*x).addrlen,
        )
    };
    let hex = match address_family(sap, len)? {
        Family::V4 => {
            // SAFETY: An IPv4 address of the size of `sockaddr_in` (checked).
            let a = unsafe { (*sap.cast::<bindings::sockaddr_in>()).sin_addr.s_addr };
            kstrdup_fmt(format_args!("{:08x}", u32::from_be(a)))?
        }
        Family::V6 => {
            // SAFETY: An IPv6 address of the size of `sockaddr_in6` (checked).
            let a = unsafe {
                (*sap.cast::<bindings::sockaddr_in6>())
                    .sin6_addr
                    .in6_u
                    .u6_addr8
            };
            let mut s = [0u8; 33];
            for (i, b) in a.iter().enumerate() {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                s[2 * i] = HEX[usize::from(b >> 4)];
                s[2 * i + 1] = HEX[usize::from(b & 0xf)];
            }
            kstrdup(CStr::from_bytes_with_nul(&s)?)?
        }
    };
    // SAFETY: The caller's guarantee; each string is set as soon as it exists, so that
    // `free_addresses` frees it on failure.
    unsafe {
        let strings = &mut (*x).address_strings;
        strings[bindings::rpc_display_format_t_RPC_DISPLAY_HEX_ADDR as usize] = hex;
        strings[bindings::rpc_display_format_t_RPC_DISPLAY_NETID as usize] = netid.as_char_ptr();
        strings[bindings::rpc_display_format_t_RPC_DISPLAY_PROTO as usize] = proto.as_char_ptr();
        let mut buf = [0 as c_char; 128];
        bindings::rpc_ntop(sap, buf.as_mut_ptr(), buf.len());
        strings[bindings::rpc_display_format_t_RPC_DISPLAY_ADDR as usize] =
            kstrdup(CStr::from_char_ptr(buf.as_ptr()))?;
        set_port_strings(x)
    }
}

/// Sets the port's display strings of `x` from its address, freeing the old ones.
///
/// # Safety
///
/// `x` is a live transport whose port strings no one else changes meanwhile (rpcbind sets the
/// port once per bind, under `XPRT_BINDING`).
pub(super) unsafe fn set_port_strings(x: *mut bindings::rpc_xprt) -> Result {
    // SAFETY: The caller's guarantee.
    unsafe {
        let port = bindings::rpc_get_port(addr_of!((*x).addr).cast());
        let strings = &mut (*x).address_strings;
        let mut ret = Ok(());
        for (i, s) in [
            (
                bindings::rpc_display_format_t_RPC_DISPLAY_PORT,
                kstrdup_fmt(format_args!("{}", port)),
            ),
            (
                bindings::rpc_display_format_t_RPC_DISPLAY_HEX_PORT,
                kstrdup_fmt(format_args!("{:4x}", port)),
            ),
        ] {
            let new = match s {
                Ok(p) => p,
                Err(e) => {
                    ret = Err(e);
                    core::ptr::null()
                }
            };
            let old = core::mem::replace(&mut strings[i as usize], new);
            bindings::kfree(old.cast::<c_void>());
        }
        ret
    }
}

/// Frees the display strings the abstraction allocated, leaving null.
///
/// # Safety
///
/// `x` is a transport that no one reads any more; its allocated strings are null or from
/// `kstrdup`.
pub(super) unsafe fn free_addresses(x: *mut bindings::rpc_xprt) {
    for i in ALLOCATED {
        // SAFETY: The caller's guarantee.
        unsafe {
            let s = core::mem::replace(&mut (*x).address_strings[i as usize], core::ptr::null());
            bindings::kfree(s.cast::<c_void>());
        }
    }
}
