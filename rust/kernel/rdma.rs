// SPDX-License-Identifier: GPL-2.0

//! RDMA: the kernel's RDMA core (InfiniBand verbs, iWARP, RoCE), for providers ([`device`],
//! [`objects`], [`work_request`], [`completion_queue`], [`memory_region`], [`iw_provider`],
//! [`user`], [`user_map`], [`link`]) and consumers ([`client`], [`cm`],
//! [`kernel_qp`], [`dma_buffer`], [`fast_reg`]); [`fixed_ring`] is the queue both use.
//!
//! C headers: [`include/rdma/`](srctree/include/rdma/)

pub mod async_event;
pub mod client;
pub mod cm;
pub mod completion_queue;
pub mod device;
pub mod device_settings;
pub mod dma_buffer;
pub mod fast_reg;
pub mod fixed_ring;
pub mod iw_provider;
pub mod kernel_qp;
pub mod link;
pub mod memory_region;
pub mod objects;
pub mod shared_receive_queue;
pub mod user;
pub mod user_map;
pub mod work_request;
