// SPDX-License-Identifier: GPL-2.0

//! Random numbers from the kernel's cryptographically secure generator, for values a remote
//! party must not be able to predict (RDMA STag keys, for instance; RFC 5040 section 8).
//!
//! C header: [`include/linux/random.h`](srctree/include/linux/random.h)

/// A random `u32` (`get_random_u32`), from any context.
pub fn random_u32() -> u32 {
    // SAFETY: `get_random_u32` has no precondition and may be called from any context.
    unsafe { crate::bindings::get_random_u32() }
}
