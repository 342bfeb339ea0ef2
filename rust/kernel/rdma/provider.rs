// SPDX-License-Identifier: GPL-2.0

//! The provider side of the RDMA core: what an RDMA device driver implements and gets.
//!
//! A provider registers devices ([`device`]) and implements the verbs the RDMA core calls on
//! them, as the methods of [`device::Driver`] and of the objects it creates ([`objects`],
//! [`shared_receive_queue`], [`memory_region`]). It sees work requests as the consumer posted
//! them ([`work_request`]), reports completions ([`completion_queue`]) and asynchronous events
//! ([`async_event`]), runs iWARP connections for iw_cm ([`iw_provider`]), serves user space
//! ([`user`], [`user_map`]), and may offer settings ([`device_settings`]), hardware counters
//! ([`hw_stats`]) and counters of chosen QPs ([`qp_counter`]), its own detail of its resources
//! ([`restrack`]) and an `rdma link` type ([`link`]).
//!
//! The two sides of the RDMA core see the same C objects from opposite ends (a consumer posts
//! the work request a provider executes), so each is a module of its own: a driver's author
//! finds here everything a provider is given, and a kernel ULP imports only
//! [`consumer`](super::consumer). Types with the same C origin may exist on both sides, each
//! shaped for its reader (a completion's status here is what a provider reports, there what a
//! consumer tests).
//!
//! Documentation: `Documentation/rdma-provider.rst`.

pub mod async_event;
pub mod completion_queue;
pub mod device;
pub mod device_settings;
pub mod hw_stats;
pub mod iw_provider;
pub mod link;
pub mod memory_region;
pub mod objects;
pub mod qp_counter;
pub mod restrack;
pub mod shared_receive_queue;
pub mod user;
pub mod user_map;
pub mod work_request;
