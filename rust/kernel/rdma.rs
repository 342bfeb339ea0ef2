// SPDX-License-Identifier: GPL-2.0

//! RDMA: the kernel's RDMA core (InfiniBand verbs, iWARP, RoCE), in two sides.
//!
//! - [`provider`]: what an RDMA device driver (rsiw, a software iWARP RNIC) implements and
//!   gets: device registration and the [`Driver`](provider::device::Driver) trait, its verbs
//!   objects, work requests and completions as it sees them, memory regions, iw_cm, user
//!   space, `rdma link`.
//! - [`consumer`]: what a kernel ULP (NFS, NVMe-oF, rpcrdma2) uses: devices and protection
//!   domains, rdma_cm connections, kernel queue pairs, DMA buffers, fast registration.
//!
//! [`fixed_ring`] is the queue both sides use.
//!
//! C headers: [`include/rdma/`](srctree/include/rdma/)

pub mod consumer;
pub mod fixed_ring;
pub mod provider;
