// SPDX-License-Identifier: GPL-2.0

//! The RPC-over-RDMA protocol core: wire formats and protocol rules of
//! Version 1 (RFC 8166, RFC 8167, RFC 8797) and Version 2
//! (draft-ietf-nfsv4-rpcrdma-version-two-01), without any I/O.
//!
//! This code is *pure* on purpose: it uses `core` only (no `alloc`, no
//! kernel crate, no `unsafe`), decodes by borrowing the received buffer and
//! encodes into caller buffers, and models connection behaviour (credits,
//! version negotiation, property exchange, continuation) as state machines
//! driven by explicit events. That lets the very same files be compiled into
//! the `rpcrdma2` kernel module and into a host crate where they are unit
//! tested, property tested and fuzzed. Every decoder failure is a
//! [`error::Fault`] that names the error the peer must receive (or that the
//! message must be dropped silently), and no input can make it panic.

pub mod call_plan;
pub mod chunk;
pub mod cm_private;
pub mod continuation;
pub mod credits;
pub mod dispatch;
pub mod error;
pub mod inline_threshold;
pub mod negotiation;
pub mod payload_format;
pub mod properties;
pub mod property_exchange;
pub mod remote_invalidation;
pub mod reply_choice;
pub mod reverse;
pub mod role;
pub mod v1;
pub mod v2;
pub mod version;
pub mod wire;
pub mod xdr;
pub mod xid_table;
