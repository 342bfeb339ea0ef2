// SPDX-License-Identifier: GPL-2.0

//! RDMA: the kernel's RDMA core (InfiniBand verbs, iWARP, RoCE), for providers ([`device`],
//! [`objects`], [`user`], [`user_map`], [`link`]) and consumers ([`client`], [`cm`],
//! [`kernel_qp`], [`dma_buffer`], [`fast_reg`]).
//!
//! C headers: [`include/rdma/`](srctree/include/rdma/)

pub mod client;
pub mod cm;
pub mod device;
pub mod dma_buffer;
pub mod fast_reg;
mod fixed_ring;
pub mod kernel_qp;
pub mod link;
pub mod objects;
pub mod user;
pub mod user_map;
