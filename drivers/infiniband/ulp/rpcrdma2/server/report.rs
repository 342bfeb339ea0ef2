// SPDX-License-Identifier: GPL-2.0

//! What a server connection shows in its debugfs file, `/sys/kernel/debug/rpcrdma2/server-N`.
//!
//! The file owns a reference to the connection's [`Report`] and shows it when read, so the
//! report holds the connection's counters and values itself (the connection counts and sets
//! them there), and a copy of what the property exchange keeps under its lock.

use crate::{
    debugfs::{write_properties, Address, Properties},
    proto::{properties::PeerProperties, property_exchange::LocalProperties},
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

/// A server connection's values, shared by the connection and its debugfs file.
#[pin_data]
pub(crate) struct Report {
    /// What the connection knew of itself when it was accepted.
    pub(crate) accepted: Accepted,
    /// Its version, inline limit, credits and counters, which the connection sets.
    pub(crate) values: Values,
    /// The transport property exchange, as last told.
    #[pin]
    exchange: Mutex<Exchange>,
}

/// What a connection knows of itself when it is accepted.
pub(crate) struct Accepted {
    /// The client's address and ours.
    pub(crate) remote: Option<SocketAddr>,
    pub(crate) local: Option<SocketAddr>,
    /// Our inline threshold, both ways (the module's `server_inline_threshold` when accepted).
    pub(crate) threshold: u32,
    /// What the client receives inline by its RFC 8797 private data (Version 1's; 1024
    /// without), and whether it takes Send With Invalidate.
    pub(crate) private_receive: u32,
    pub(crate) remote_invalidation: bool,
    /// The largest message we send inline at first.
    pub(crate) send_limit: usize,
}

/// A connection's values that change.
#[derive(Default)]
pub(crate) struct Values {
    /// The connection's protocol version (`rdma_vers`), 0 until its first message of a
    /// version it speaks.
    pub(crate) version: AtomicU32,
    /// The largest message we send inline, at most our inline threshold: in Version 1 what
    /// the client receives (RFC 8797; 1024 bytes without its private data), in Version 2 its
    /// receive buffer size (`RBSIZ`, 4096 bytes by default).
    pub(crate) send_limit: AtomicUsize,
    /// The credits our last message granted.
    pub(crate) granted: AtomicU32,
    /// Replies sent in a Send With Invalidate, and Version 2 calls whose `rdma_inv_handle`
    /// named none of their segments (answered with a plain Send).
    pub(crate) sends_with_invalidate: AtomicU64,
    pub(crate) unmatched_inv_handles: AtomicU64,
    /// Replies sent as continued replies, and the Sends they took.
    pub(crate) continued_replies: AtomicU64,
    pub(crate) continued_sends: AtomicU64,
    /// Continued calls received whole, the messages that were part of one (the last one
    /// included), and the continuation violations answered with an error.
    pub(crate) continued_calls: AtomicU64,
    pub(crate) continued_fragments: AtomicU64,
    pub(crate) continuations_refused: AtomicU64,
}

/// What the connection tells the report of the property exchange.
#[derive(Clone, Copy)]
struct Exchange {
    /// Our properties, once sent, and in how many `RDMA2_CONNPROP`.
    sent: Option<Properties>,
    sent_messages: u32,
    /// The client's, once received, and in how many.
    received: Option<Properties>,
    received_messages: u32,
}

impl Report {
    /// The report of a connection just accepted.
    pub(crate) fn new(accepted: Accepted) -> Result<Arc<Self>> {
        let values = Values::default();
        values
            .send_limit
            .store(accepted.send_limit, Ordering::Relaxed);
        Arc::pin_init(
            try_pin_init!(Self {
                accepted,
                values,
                exchange <- new_mutex!(Exchange {
                    sent: None,
                    sent_messages: 0,
                    received: None,
                    received_messages: 0,
                }),
            }? Error),
            GFP_KERNEL,
        )
    }

    /// We sent `local` as our transport properties, in `messages` `RDMA2_CONNPROP`.
    pub(crate) fn properties_sent(&self, local: LocalProperties, messages: u32) {
        let mut exchange = self.exchange.lock();
        exchange.sent = Some(local.into());
        exchange.sent_messages = messages;
    }

    /// The client's properties are `peer` so far, from `messages` `RDMA2_CONNPROP`.
    pub(crate) fn properties_received(&self, peer: PeerProperties, messages: u32) {
        let mut exchange = self.exchange.lock();
        exchange.received = Some(peer.into());
        exchange.received_messages = messages;
    }

    /// Counts one more in `counter`.
    pub(crate) fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

impl Show for Report {
    fn show(&self, m: &mut SeqFile<'_>) -> fmt::Result {
        let exchange = *self.exchange.lock();
        let (a, v) = (&self.accepted, &self.values);
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        writeln!(m, "client: {}", Address(a.remote))?;
        writeln!(m, "local: {}", Address(a.local))?;
        // 0 until the client's first message settled it.
        writeln!(m, "version: {}", v.version.load(Ordering::Relaxed))?;
        writeln!(m, "client_private_data_receive: {}", a.private_receive)?;
        writeln!(
            m,
            "client_takes_send_with_invalidate: {}",
            if a.remote_invalidation { "yes" } else { "no" }
        )?;
        write_properties(m, "sent", exchange.sent)?;
        write_properties(m, "received", exchange.received)?;
        writeln!(m, "connprop_sent: {}", exchange.sent_messages)?;
        writeln!(m, "connprop_received: {}", exchange.received_messages)?;
        writeln!(m, "inline_threshold: {}", a.threshold)?;
        writeln!(m, "inline_send: {}", v.send_limit.load(Ordering::Relaxed))?;
        writeln!(m, "credits_granted: {}", v.granted.load(Ordering::Relaxed))?;
        for (key, value) in [
            ("sends_with_invalidate", get(&v.sends_with_invalidate)),
            ("unmatched_inv_handles", get(&v.unmatched_inv_handles)),
            ("continued_replies", get(&v.continued_replies)),
            ("continued_reply_sends", get(&v.continued_sends)),
            ("continued_calls", get(&v.continued_calls)),
            ("continued_call_messages", get(&v.continued_fragments)),
            ("continuations_refused", get(&v.continuations_refused)),
        ] {
            writeln!(m, "{key}: {value}")?;
        }
        Ok(())
    }
}
