// SPDX-License-Identifier: GPL-2.0

//! The client transport: what carries an NFS client's calls over an RDMA connection.
//!
//! The RPC client creates one [`ClientTransport`] per server (class "rdma", ident 256) and
//! drives it through the sunrpc abstraction (`kernel::sunrpc::xprt`):
//!
//! - **connect** sets up an [`Endpoint`] from a worker ([`ConnectWork`]): rdma_cm address and route resolution in
//!   the client's network namespace, a queue pair whose completions go to the endpoint's
//!   [`Receiver`], every receive posted, then the connection with RFC 8797 private data.
//! - **send_request** marshals the call into one of the endpoint's send buffers: a Version 1
//!   `RDMA_MSG` header followed by the whole RPC call, and posts it as one Send.
//! - each **receive** is decoded by the protocol core, its credit grant becomes the congestion
//!   window, and its RPC reply is copied into the waiting call's receive buffer; a call from
//!   the server (an NFSv4.1 callback) goes to the [`backchannel`], whose replies go out
//!   through **send_request** too.
//! - **close** disconnects and drops the endpoint; the next connect builds a fresh one.
//!
//! What this transport carries: calls and replies that fit the inline threshold of both
//! sides. Calls larger than that fail with `EMSGSIZE` (they need Read chunks), and the
//! transport offers the RPC client a maximum payload that keeps replies of NFS reads and
//! directory listings inline; chunks and memory registration are not implemented yet.
//!
//! A call is never sent twice on one connection (RFC 8166, section 3.3.2): the server would
//! count it against its credits again. A retransmission closes the connection instead, and
//! the call goes out on the next one.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::{
    c_str, new_mutex,
    prelude::*,
    str::CStr,
    sunrpc::{
        xprt::{Config, Connect, Rqst, Stats, Timeout, Transport, Xprt, IPPROTO_TCP},
        xprt_class::{ClassSlot, CreateArgs, TransportClass, TransportPtr, XPRT_TRANSPORT_RDMA},
    },
    sync::{Arc, Mutex},
    time::msecs_to_jiffies,
};

mod backchannel;
mod connect;
mod endpoint;
mod receive;

use backchannel::Backchannel;
use connect::ConnectWork;
use endpoint::Endpoint;
use receive::Receiver;

/// Bytes of our send and receive buffers: the inline threshold we offer in both directions
/// (the C implementations' default).
pub(crate) const INLINE_SIZE: u32 = 4096;

/// Calls in flight we ask the server for (`rdma_credit` of our calls), and the receives posted
/// for their replies.
pub(crate) const MAX_REQUESTS: u32 = 64;

/// The largest RPC payload offered to the RPC client: NFS sizes its reads, writes and
/// directory listings by it (rounded down to a power of two, so 2 KiB), which keeps them and
/// their replies within [`INLINE_SIZE`] with room for the RPC and NFS headers.
const MAX_PAYLOAD: usize = 3072;

/// The client transport class: ident `XPRT_TRANSPORT_RDMA`, netids "rdma" and "rdma6".
pub(crate) struct ClientClass;

static CLIENT_CLASS: ClassSlot = ClassSlot::new();

impl TransportClass for ClientClass {
    const NAME: &'static CStr = c_str!("rdma");
    const IDENT: i32 = XPRT_TRANSPORT_RDMA;
    const NETIDS: &'static [&'static CStr] = &[c_str!("rdma"), c_str!("rdma6")];
    const SLOT: &'static ClassSlot = &CLIENT_CLASS;

    fn setup(args: &CreateArgs<'_>) -> Result<TransportPtr> {
        Xprt::<ClientTransport>::create(args, &config(), ClientTransport::new())
    }
}

/// The transport's timeouts and sizes, those of the C transport: a minute per call with
/// two retries, a five-second first reconnect delay, disconnect after five idle minutes.
fn config() -> Config {
    let hz = msecs_to_jiffies(1000);
    Config {
        timeout: Timeout {
            initval: 60 * hz,
            maxval: 60 * hz,
            increment: 0,
            retries: 2,
            exponential: false,
        },
        connect_timeout: 60 * hz,
        max_reconnect_timeout: 60 * hz,
        bind_timeout: 60 * hz,
        reestablish_timeout: 5 * hz,
        idle_timeout: 5 * 60 * hz,
        max_payload: MAX_PAYLOAD,
        prealloc_slots: MAX_REQUESTS,
        max_slots: MAX_REQUESTS,
        prot: IPPROTO_TCP,
        proto_name: c_str!("rdma"),
    }
}

/// One RPC client's transport to one server.
///
/// # Invariants
///
/// `generation` is odd while `endpoint` holds an endpoint, and that endpoint's generation.
#[pin_data]
pub(crate) struct ClientTransport {
    /// The connection, while there is one.
    #[pin]
    endpoint: Mutex<Option<Arc<Endpoint>>>,
    /// Counts endpoints in and out, so that a completion of an old one is told apart.
    generation: AtomicU32,
    /// What `/proc/self/mountstats` shows.
    counters: Counters,
    /// The backchannel's sizes and counts.
    backchannel: Backchannel,
}

/// The transport's counters, those of the C transport's `mountstats` line.
#[derive(Default)]
pub(crate) struct Counters {
    /// Bytes of calls copied into send buffers (`pullup_copy_count`).
    pub(crate) pullup_copy: AtomicU64,
    /// Bytes of replies copied into the calls' receive buffers (`fixup_copy_count`).
    pub(crate) fixup_copy: AtomicU64,
    /// Calls that could not be marshaled (`failed_marshal_count`).
    pub(crate) failed_marshal: AtomicU64,
    /// Replies that were malformed or transport errors (`bad_reply_count`).
    pub(crate) bad_reply: AtomicU64,
    /// Sends that found no free send buffer (`empty_sendctx_q`).
    pub(crate) no_send_buffer: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }
}

impl ClientTransport {
    fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            endpoint <- new_mutex!(None),
            generation: AtomicU32::new(0),
            counters: Counters::default(),
            backchannel: Backchannel::new(),
        }? Error)
    }

    /// The current endpoint, if connected.
    fn endpoint(&self) -> Option<Arc<Endpoint>> {
        self.endpoint.lock().clone()
    }

    /// Whether `generation` is the current endpoint's.
    fn is_current(&self, generation: u32) -> bool {
        self.generation.load(Ordering::Acquire) == generation
    }

    /// Takes the endpoint out (the generation moves on first, so that its completions are
    /// stale from now on), for the caller to drop outside the lock.
    fn take_endpoint(&self) -> Option<Arc<Endpoint>> {
        let mut slot = self.endpoint.lock();
        let old = slot.take();
        if old.is_some() {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        old
    }

    /// Sets up a new endpoint and makes it current.
    fn connect_now(xprt: &Xprt<Self>) -> Result {
        drop(xprt.take_endpoint());
        let server = xprt.server_address()?;
        let generation = xprt.generation.load(Ordering::Acquire).wrapping_add(1);
        let endpoint = Endpoint::connect(xprt, server, generation)?;
        xprt.backchannel.connected(endpoint.send_limit());
        // Until the server's first grant: one call at a time.
        xprt.set_credits(1);
        let mut slot = xprt.endpoint.lock();
        xprt.generation.store(generation, Ordering::Release);
        *slot = Some(endpoint);
        Ok(())
    }

    /// A message arrived on the current endpoint.
    fn received(xprt: &Xprt<Self>, message: &[u8]) {
        use crate::proto::v1::{self, V1Body, V1DecodeConfig};
        let header = match v1::decode(message, &V1DecodeConfig::default()) {
            Ok(header) => header,
            Err(fault) => {
                pr_debug!("dropped a malformed message from the server: {:?}\n", fault);
                Counters::add(&xprt.counters.bad_reply, 1);
                return;
            }
        };
        if backchannel::received(xprt, &header) {
            return;
        }
        xprt.set_credits(header.credit.clamp(1, MAX_REQUESTS));
        let xid = header.xid;
        let delivered = match header.body {
            V1Body::Msg { chunks, payload } if chunks.is_empty() => {
                xprt.complete_reply(xid, |buf| {
                    if buf.write(payload) == payload.len() {
                        Counters::add(&xprt.counters.fixup_copy, payload.len());
                        Ok(())
                    } else {
                        Err(EMSGSIZE)
                    }
                })
            }
            // Chunks we never offered, or a reply that is not inline at all.
            V1Body::Msg { .. } | V1Body::NoMsg { .. } => Err(EPROTO),
            V1Body::Error(error) => {
                pr_debug!("server answered call {:#x} with {:?}\n", xid, error);
                Counters::add(&xprt.counters.bad_reply, 1);
                xprt.fail_call(xid, EIO)
            }
            V1Body::Done => return,
        };
        match delivered {
            Ok(()) => {}
            // A reply to a call that is gone (it timed out, or was interrupted).
            Err(e) if e == ENOENT => {}
            // Unusable for its call: the call fails rather than waits for ever.
            Err(e) => {
                pr_debug!("reply to call {:#x} unusable ({:?})\n", xid, e);
                Counters::add(&xprt.counters.bad_reply, 1);
                let _ = xprt.fail_call(xid, EIO);
            }
        }
    }

    /// The endpoint of `generation` lost its connection (a flushed or failed completion).
    fn connection_lost(xprt: &Xprt<Self>, generation: u32) {
        if xprt.is_current(generation) {
            xprt.force_disconnect();
        }
    }
}

#[vtable]
impl Transport for ClientTransport {
    type Class = ClientClass;

    const BACKCHANNEL: bool = true;

    fn bc_maxpayload(xprt: &Xprt<Self>) -> usize {
        xprt.backchannel.max_payload()
    }

    fn bc_num_slots(_xprt: &Xprt<Self>) -> u32 {
        backchannel::BC_SLOTS
    }

    fn connect(xprt: &Xprt<Self>, connect: Connect<Self>) {
        let reconnect = xprt.generation.load(Ordering::Acquire) != 0;
        ConnectWork::queue(connect, reconnect);
    }

    fn close(xprt: &Xprt<Self>) {
        if let Some(endpoint) = xprt.take_endpoint() {
            endpoint.disconnect();
        }
    }

    fn send_request(xprt: &Xprt<Self>, rqst: &Rqst<'_>) -> Result {
        if rqst.is_backchannel_reply() {
            return backchannel::send_reply(xprt, rqst);
        }
        let endpoint = xprt.endpoint().ok_or(ENOTCONN)?;
        // A retransmission on the connection the call went out on: the server may still hold
        // the call's credit, so the connection goes and the call waits for the next one.
        if rqst.connect_cookie() == xprt.connect_cookie() {
            xprt.force_disconnect();
            return Err(ENOTCONN);
        }
        endpoint.send_call(rqst, &xprt.counters).inspect_err(|e| {
            if *e == ENOTCONN {
                xprt.force_disconnect();
            }
        })
    }

    fn print_stats(xprt: &Xprt<Self>, stats: &Stats<'_>) {
        let c = &xprt.counters;
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        // The C transport's columns: chunks (read, write, reply), bytes moved by RDMA (call,
        // reply), copies, registrations the hard way, marshal failures, bad replies, NOMSG
        // calls, MRs (recycled, orphaned, allocated), local invalidations, empty send queue,
        // and a column kept at 0. No chunks and no MRs here: their columns are 0.
        stats.print(format_args!(
            " 0 0 0 0 0 {} {} 0 {} {} 0 0 0 0 0 {} 0",
            get(&c.pullup_copy),
            get(&c.fixup_copy),
            get(&c.failed_marshal),
            get(&c.bad_reply),
            get(&c.no_send_buffer)
        ));
    }
}
