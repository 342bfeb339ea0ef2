// SPDX-License-Identifier: GPL-2.0

//! What a client transport shows in its debugfs file, `/sys/kernel/debug/rpcrdma2/client-N`.
//!
//! The file owns a reference to the transport's [`Report`] and shows it when read, whatever
//! the transport is doing: so the report holds copies of what the transport keeps elsewhere
//! (its endpoint, its negotiation, its property exchange, all of which come and go with
//! connections), updated by the transport where those change, and the counters
//! `/proc/self/mountstats` shows, which the transport counts in the report directly.

use crate::{
    debugfs::{write_properties, Address, Properties},
    proto::{
        properties::PeerProperties, property_exchange::LocalProperties, version::VersionRange,
    },
};
use core::{
    fmt::{self, Write},
    net::SocketAddr,
    sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering},
};
use kernel::{
    debugfs::{SeqFile, Show},
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

/// A client transport's values, shared by the transport and its debugfs file.
#[pin_data]
pub(crate) struct Report {
    /// What `/proc/self/mountstats` shows.
    pub(crate) counters: Counters,
    /// The server's last credit grant on the current connection (1 until its first).
    pub(crate) granted: AtomicU32,
    /// The calls sunrpc lets us have in flight for that grant (the congestion window).
    pub(crate) window: AtomicU32,
    /// The largest callback last offered to the NFS client's session (`bc_maxpayload`, which
    /// it asks when it creates a session; 0 until then).
    pub(crate) bc_max_payload: AtomicUsize,
    /// The current connection, as last told.
    #[pin]
    connection: Mutex<Connection>,
}

/// What the transport tells the report of its current connection.
#[derive(Clone, Copy)]
struct Connection {
    server: Option<SocketAddr>,
    local: Option<SocketAddr>,
    /// The versions the transport speaks (`version=`).
    versions: Option<VersionRange>,
    /// Our transport properties, once sent.
    sent: Option<Properties>,
    /// The server's, once received.
    received: Option<Properties>,
    /// The largest message we send inline, and the largest we expect.
    send_inline: usize,
    receive_inline: usize,
}

impl Report {
    /// A report of a transport not connected yet.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                counters: Counters::default(),
                granted: AtomicU32::new(1),
                window: AtomicU32::new(1),
                bc_max_payload: AtomicUsize::new(0),
                connection <- new_mutex!(Connection {
                    server: None,
                    local: None,
                    versions: None,
                    sent: None,
                    received: None,
                    send_inline: 0,
                    receive_inline: 0,
                }),
            }? Error),
            GFP_KERNEL,
        )
    }

    /// A new connection from `local` to `server`, speaking `versions`, with the inline
    /// thresholds of its connection setup: no properties exchanged on it yet.
    pub(crate) fn connected(
        &self,
        server: SocketAddr,
        local: Option<SocketAddr>,
        versions: VersionRange,
        (send_inline, receive_inline): (usize, usize),
    ) {
        *self.connection.lock() = Connection {
            server: Some(server),
            local,
            versions: Some(versions),
            sent: None,
            received: None,
            send_inline,
            receive_inline,
        };
    }

    /// We sent `local` as our transport properties.
    pub(crate) fn properties_sent(&self, local: LocalProperties) {
        self.connection.lock().sent = Some(local.into());
    }

    /// The server's properties are `peer` so far, and set our inline thresholds to
    /// `(send, receive)`.
    pub(crate) fn properties_received(
        &self,
        peer: PeerProperties,
        (send, receive): (usize, usize),
    ) {
        let mut connection = self.connection.lock();
        connection.received = Some(peer.into());
        connection.send_inline = send;
        connection.receive_inline = receive;
    }
}

impl Show for Report {
    fn show(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        let connection = *self.connection.lock();
        let c = &self.counters;
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        writeln!(m, "server: {}", Address(connection.server))?;
        writeln!(m, "local: {}", Address(connection.local))?;
        match connection.versions {
            Some(v) => writeln!(m, "versions_offered: {}-{}", v.low, v.high)?,
            None => writeln!(m, "versions_offered: none")?,
        }
        // 0 until the connection's first message from the server settled it.
        writeln!(m, "version: {}", c.version.load(Ordering::Relaxed))?;
        let refused = get(&c.version_fallbacks);
        writeln!(
            m,
            "v2_probe_refused: {}",
            if refused != 0 { "yes" } else { "no" }
        )?;
        writeln!(m, "v2_probes_refused: {refused}")?;
        write_properties(m, "sent", connection.sent)?;
        write_properties(m, "received", connection.received)?;
        writeln!(m, "inline_send: {}", connection.send_inline)?;
        writeln!(m, "inline_receive: {}", connection.receive_inline)?;
        writeln!(
            m,
            "credits_granted: {}",
            self.granted.load(Ordering::Relaxed)
        )?;
        writeln!(m, "credits_window: {}", self.window.load(Ordering::Relaxed))?;
        writeln!(
            m,
            "backchannel_max_payload: {}",
            self.bc_max_payload.load(Ordering::Relaxed)
        )?;
        // The mountstats counters, by the C transport's names where it has them.
        for (key, value) in [
            ("read_chunk_count", get(&c.read_chunks)),
            ("write_chunk_count", get(&c.write_chunks)),
            ("reply_chunk_count", get(&c.reply_chunks)),
            ("total_rdma_request", get(&c.rdma_request)),
            ("total_rdma_reply", get(&c.rdma_reply)),
            ("pullup_copy_count", get(&c.pullup_copy)),
            ("fixup_copy_count", get(&c.fixup_copy)),
            ("failed_marshal_count", get(&c.failed_marshal)),
            ("bad_reply_count", get(&c.bad_reply)),
            ("nomsg_call_count", get(&c.nomsg_calls)),
            ("mrs_allocated", get(&c.mrs_allocated)),
            ("local_inv_needed", get(&c.local_invs)),
            ("empty_sendctx_q", get(&c.no_send_buffer)),
            ("connprop_sent", get(&c.connprop_sent)),
            ("connprop_received", get(&c.connprop_received)),
            ("continued_calls", get(&c.continued_calls)),
            ("continued_call_sends", get(&c.continued_sends)),
            ("continued_replies", get(&c.continued_replies)),
            ("continued_reply_sends", get(&c.continued_fragments)),
            ("remote_invalidations", get(&c.remote_invs)),
        ] {
            writeln!(m, "{key}: {value}")?;
        }
        writeln!(
            m,
            "largest_segment: {}",
            c.largest_segment.load(Ordering::Relaxed)
        )
    }
}

/// The transport's counters, those of the C transport's `mountstats` line and two more.
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
    /// Calls with a Read chunk (`read_chunk_count`).
    pub(crate) read_chunks: AtomicU64,
    /// Calls with a Write chunk (`write_chunk_count`).
    pub(crate) write_chunks: AtomicU64,
    /// Calls with a Reply chunk (`reply_chunk_count`).
    pub(crate) reply_chunks: AtomicU64,
    /// Bytes of calls the server pulled by RDMA Read (`total_rdma_request`).
    pub(crate) rdma_request: AtomicU64,
    /// Bytes of replies the server pushed by RDMA Write (`total_rdma_reply`).
    pub(crate) rdma_reply: AtomicU64,
    /// Calls sent as `RDMA_NOMSG` (`nomsg_call_count`).
    pub(crate) nomsg_calls: AtomicU64,
    /// MRs allocated (`mrs_allocated`).
    pub(crate) mrs_allocated: AtomicU64,
    /// Regions invalidated (`local_inv_needed`).
    pub(crate) local_invs: AtomicU64,
    /// Regions the server invalidated with a reply's Send (Send With Invalidate).
    pub(crate) remote_invs: AtomicU64,
    /// The protocol version of the current connection once settled, else 0.
    pub(crate) version: AtomicU32,
    /// Probes the server refused with `ERR_VERS`.
    pub(crate) version_fallbacks: AtomicU64,
    /// `RDMA2_CONNPROP` messages sent.
    pub(crate) connprop_sent: AtomicU64,
    /// `RDMA2_CONNPROP` messages received and applied.
    pub(crate) connprop_received: AtomicU64,
    /// The receive buffer size (`RBSIZ`) of the current connection's server, once its
    /// properties arrived, else 0.
    pub(crate) peer_rbsiz: AtomicU32,
    /// Calls sent over several Sends (Message Continuation).
    pub(crate) continued_calls: AtomicU64,
    /// The Sends of those calls.
    pub(crate) continued_sends: AtomicU64,
    /// Continued replies received whole.
    pub(crate) continued_replies: AtomicU64,
    /// The Sends (fragments) those replies came in.
    pub(crate) continued_fragments: AtomicU64,
    /// The longest segment a call offered (bounded by a Version 2 server's `RSSIZ`).
    pub(crate) largest_segment: AtomicU32,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }
}
