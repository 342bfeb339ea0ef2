// SPDX-License-Identifier: GPL-2.0

//! The consumer side of the RDMA core: what a kernel ULP (NFS, NVMe-oF, rpcrdma2, our tests)
//! uses to move data over an RDMA device.
//!
//! A consumer finds a device and allocates protection domains ([`client`]), hears of its
//! removal ([`device_removal`]), connects with rdma_cm ([`cm`]), posts work requests on the
//! connection's queue pair and collects their completions ([`kernel_qp`]), in memory mapped for
//! the device ([`dma_buffer`], or someone else's pages: [`mapped_pages`]) and, for a peer's RDMA
//! Read or Write, registered with a fast-registration memory region ([`fast_reg`]).
//!
//! The two sides of the RDMA core see the same C objects from opposite ends (a consumer posts
//! the work request a provider executes), so each is a module of its own: a ULP imports only
//! this one, and the verbs a driver implements ([`provider`](super::provider)) stay out of its
//! way. Types with the same C origin may exist on both sides, each shaped for its reader.
//!
//! Documentation: `Documentation/rdma-consumer.rst`.

pub mod client;
pub mod cm;
pub mod device_removal;
pub mod dma_buffer;
pub mod fast_reg;
pub mod kernel_qp;
pub mod mapped_pages;
