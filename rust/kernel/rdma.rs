// SPDX-License-Identifier: GPL-2.0

//! RDMA: the provider side of the kernel's RDMA core (InfiniBand verbs, iWARP, RoCE).
//!
//! C headers: [`include/rdma/`](srctree/include/rdma/)

pub mod device;
pub mod link;
