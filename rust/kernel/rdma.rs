// SPDX-License-Identifier: GPL-2.0

//! RDMA: the kernel's RDMA core (InfiniBand verbs, iWARP, RoCE), for providers ([`device`],
//! [`objects`], [`user`], [`user_map`], [`link`]) and consumers ([`client`]).
//!
//! C headers: [`include/rdma/`](srctree/include/rdma/)

pub mod client;
pub mod device;
pub mod link;
pub mod objects;
pub mod user;
pub mod user_map;
