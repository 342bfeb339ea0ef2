// SPDX-License-Identifier: GPL-2.0

//! Host build of the rpcrdma2 protocol core.
//!
//! The sources live in the driver directory and are compiled unchanged into
//! the kernel module; this crate only points at them so that `cargo test`
//! and `cargo fuzz` exercise the exact same files.

#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

// A `#[path]` on an inline module sets the directory its children are
// looked up in, so `proto.rs` finds its submodules in `proto/` exactly as it
// does when the kernel module's crate root declares `pub mod proto;`.
#[path = "../../../drivers/infiniband/ulp/rpcrdma2"]
mod driver {
    pub mod proto;
}

pub use driver::proto;
