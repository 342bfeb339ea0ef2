// SPDX-License-Identifier: GPL-2.0

//! The server transport: what carries an NFS server's calls and replies over RDMA connections.
//!
//! An RPC service (nfsd) opens a listener by class name: `echo "rdma 20049" >
//! /proc/fs/nfsd/portlist`. The class is "rdma" with ident `XPRT_TRANSPORT_RDMA` (256), or,
//! with the module parameter `coexist=1`, "rdma2" with an ident of its own ([`RDMA2_IDENT`]),
//! so that it serves beside the C `rpcrdma` module in one kernel (`echo "rdma2 20050" >
//! /proc/fs/nfsd/portlist`). nfsd derives the ident of an NFSv4.1 callback client from the
//! class's (ored with `XPRT_TRANSPORT_BC`), so each server class comes with a client class of
//! that ident for its connections' backchannel ([`backchannel`]): nfsd's callbacks go to the
//! client on its own connection, and its replies come back on it.
//!
//! The RPC server drives the transports through the sunrpc abstraction
//! (`kernel::sunrpc::svc_xprt`):
//!
//! - a [`Listener`] is an rdma_cm id bound and listening in the service's namespace (IPv6
//!   listeners take IPv6 only, so that an IPv4 one shares their port). A connection request
//!   queues the listener for a server thread, whose **accept** makes a [`Connection`].
//! - a **connection** has a queue pair with receives posted for the credits it grants, the
//!   backchannel and a batch to spare, and accepts with RFC 8797 private data. Its completions
//!   go to its [`Receiver`], which queues each received message and the connection for a
//!   thread.
//! - **recvfrom** takes one message, decodes its Version 1 header with the protocol core and
//!   places the RPC call in the thread's request: copied from the receive buffer, and its Read
//!   chunk, if any, RDMA Read into the request's pages ([`chunks`]); **sendto** sends the
//!   reply after a Version 1 header with a credit grant, its bulk data RDMA Written into the
//!   call's Write chunk, the rest inline or, when that does not fit, RDMA Written into the
//!   call's Reply chunk. A thread sleeps until the RDMA operations it posted completed
//!   ([`rdma`]). A received reply to one of nfsd's callbacks is no call: `recvfrom` hands it
//!   to the connection's backchannel transport.
//!
//! What this transport serves: Version 1 calls sent inline, or with one Read chunk (a data
//! item, or the whole call at Position Zero) of up to 1 MiB and a page, with a Write list and
//! a Reply chunk for their replies: the service's bulk data (`xpo_result_payload`) goes to the
//! first Write chunk, a reply that does not fit the client's inline threshold to the Reply
//! chunk, or, on a Version 2 connection without a Reply chunk large enough, as a continued
//! reply over up to four Sends. A call with more Read chunks, or a reply the client's chunks
//! (and continuation) cannot hold, is answered with `RDMA_ERROR`/`ERR_CHUNK` (in Version 2
//! `RDMA2_ERR_WRITE_RESOURCE` or `RDMA2_ERR_REPLY_RESOURCE`); a header of another version earns `ERR_VERS`, a
//! malformed one `ERR_CHUNK` (RFC 8166, section 5.3.2). A reply to a call that offered one
//! region, from a client that takes remote invalidation (RFC 8797), invalidates it with its
//! Send (Send With Invalidate), sparing the client a `LOCAL_INV`. In Version 2 a call may also
//! come over several Sends (Message Continuation, draft section 4.4.2): the connection
//! reassembles it and serves it as an inline call with the last Send's chunks; a broken
//! sequence earns `RDMA2_ERR_INVAL_CONT` ([`connection`]). Replies are never continued.

use crate::proto::properties::{DEFAULT_MAX_SEGMENT_COUNT, DEFAULT_MAX_SEGMENT_SIZE};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    c_str,
    prelude::*,
    str::CStr,
    sunrpc::{
        svc_xprt_class::{ListenArgs, ServerClass, ServerClassSlot, SvcXprtPtr},
        xprt_class::{ClassSlot, XPRT_TRANSPORT_RDMA},
    },
};

mod backchannel;
mod buffers;
mod chunks;
mod connection;
mod listener;
mod rdma;
mod receiver;
pub(crate) mod report;

pub(crate) use backchannel::BackchannelClass;
use connection::Connection;
use listener::Listener;
use receiver::Receiver;

/// The ident of the class "rdma2" (`coexist=1`): none of the kernel's transports has it, and
/// no client transport has it with `XPRT_TRANSPORT_BC`.
pub(crate) const RDMA2_IDENT: i32 = 0x7232;

/// The largest RPC payload, as the C transport's (`RPCSVC_MAXPAYLOAD_RDMA`): 1 MiB.
const MAX_PAYLOAD: u32 = 1 << 20;

/// The server's inline threshold of new connections, both ways: what it tells clients it
/// receives (RFC 8797 private data, Version 2's `RBSIZ`), and the most it sends inline
/// (`server_inline_threshold`, by default the module's `inline_threshold`).
static INLINE_THRESHOLD: AtomicU32 = AtomicU32::new(crate::client::INLINE_SIZE);

/// Sets the server's inline threshold (the module's init, before the class is registered):
/// from 1024 to [`INLINE_SIZE`](crate::client::INLINE_SIZE) bytes.
pub(crate) fn set_inline_threshold(bytes: u32) {
    INLINE_THRESHOLD.store(
        bytes.clamp(1024, crate::client::INLINE_SIZE),
        Ordering::Relaxed,
    );
}

/// The server's inline threshold of new connections.
pub(crate) fn inline_threshold() -> u32 {
    INLINE_THRESHOLD.load(Ordering::Relaxed)
}

/// The largest RDMA segment a Version 2 client is told the server takes (`RSSIZ`): the draft's
/// default unless `server_max_segment_size` says less. The server serves segments of any size
/// (it moves them in pieces of its own), so it takes a larger one all the same.
static MAX_SEGMENT_SIZE: AtomicU32 = AtomicU32::new(DEFAULT_MAX_SEGMENT_SIZE);

/// The most segments a Version 2 client's call may carry (`RCSIZ`, the draft's default): the
/// server refuses a call with more with `RDMA2_ERR_SEGMENTS`.
pub(crate) const MAX_SEGMENT_COUNT: u32 = DEFAULT_MAX_SEGMENT_COUNT;

/// Sets the `RSSIZ` the server advertises (the module's init, before the class is registered).
pub(crate) fn set_max_segment_size(bytes: u32) {
    MAX_SEGMENT_SIZE.store(bytes, Ordering::Relaxed);
}

/// The `RSSIZ` the server advertises.
pub(crate) fn max_segment_size() -> u32 {
    MAX_SEGMENT_SIZE.load(Ordering::Relaxed)
}

/// A server class and the client class of its connections' backchannel
/// ([`BackchannelClass`]).
pub(crate) trait WithBackchannel: ServerClass {
    /// The backchannel class's name.
    const BC_NAME: &'static CStr;
    /// The backchannel class's slot.
    const BC_SLOT: &'static ClassSlot;
}

/// The server class "rdma", ident 256: the C `rpcrdma` module's name and ident.
pub(crate) struct RdmaClass;

static RDMA_CLASS: ServerClassSlot = ServerClassSlot::new();

impl ServerClass for RdmaClass {
    const NAME: &'static CStr = c_str!("rdma");
    const IDENT: i32 = XPRT_TRANSPORT_RDMA;
    const MAX_PAYLOAD: u32 = MAX_PAYLOAD;
    const SLOT: &'static ServerClassSlot = &RDMA_CLASS;
    type Listener = Listener<Self>;
    type Connection = Connection<Self>;

    fn create(args: &ListenArgs<'_>) -> Result<SvcXprtPtr> {
        Listener::<Self>::create(args)
    }
}

static RDMA_BC_CLASS: ClassSlot = ClassSlot::new();

impl WithBackchannel for RdmaClass {
    const BC_NAME: &'static CStr = c_str!("rdma backchannel");
    const BC_SLOT: &'static ClassSlot = &RDMA_BC_CLASS;
}

/// The server class "rdma2", ident [`RDMA2_IDENT`]: beside the C `rpcrdma` module.
pub(crate) struct Rdma2Class;

static RDMA2_CLASS: ServerClassSlot = ServerClassSlot::new();

impl ServerClass for Rdma2Class {
    const NAME: &'static CStr = c_str!("rdma2");
    const IDENT: i32 = RDMA2_IDENT;
    const MAX_PAYLOAD: u32 = MAX_PAYLOAD;
    const SLOT: &'static ServerClassSlot = &RDMA2_CLASS;
    type Listener = Listener<Self>;
    type Connection = Connection<Self>;

    fn create(args: &ListenArgs<'_>) -> Result<SvcXprtPtr> {
        Listener::<Self>::create(args)
    }
}

static RDMA2_BC_CLASS: ClassSlot = ClassSlot::new();

impl WithBackchannel for Rdma2Class {
    const BC_NAME: &'static CStr = c_str!("rdma2 backchannel");
    const BC_SLOT: &'static ClassSlot = &RDMA2_BC_CLASS;
}
