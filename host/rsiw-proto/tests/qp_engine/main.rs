// SPDX-License-Identifier: GPL-2.0

//! The QP engine: two engines wired back to back through byte pipes that
//! deliver in random pieces, each over an in-memory RNIC (memory regions,
//! SQ, RQ, CQ), for every work request kind, the credit and fence waits, the
//! local and remote errors and the flush. One module per topic; the pair and
//! the builders they share are in [`harness`], the mock RNIC in
//! [`engine_common::qp`].

#[path = "../engine_common/mod.rs"]
mod engine_common;
mod harness;

mod atomics;
mod by_reference;
mod errors;
mod flush;
mod fuzz_seeds;
mod immediate;
mod invalidation;
mod multi_sge_read;
mod read;
mod rtr;
mod send_recv;
mod slots;
mod sq_messages;
mod sq_order;
mod stats;
mod write;
