// SPDX-License-Identifier: GPL-2.0

//! Host build of rsiw's pure iWARP protocol code.
//!
//! The sources live in `drivers/infiniband/sw/rsiw/proto*` and are compiled
//! unchanged into the kernel module; this crate only points at them so that
//! `cargo test` and `cargo fuzz` exercise the very same files. The lints
//! mirror the kernel's Rust build flags.

#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, clippy::all)]

// A `#[path]` on `mod proto;` itself would make `proto.rs` behave like a
// `mod.rs` and look for its children next to it. Pointing an inline module
// at the driver directory instead keeps the kernel's layout: `proto.rs` with
// its children in `proto/`.
#[path = "../../../drivers/infiniband/sw/rsiw"]
mod rsiw {
    pub mod proto;
}

pub use rsiw::proto;
