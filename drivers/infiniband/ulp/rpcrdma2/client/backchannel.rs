// SPDX-License-Identifier: GPL-2.0

//! The backchannel (RFC 8167; draft section 4.5 in Version 2): the calls an NFSv4.1 server sends its client
//! over the client's own connection (CB_NULL, CB_SEQUENCE, CB_RECALL, ...), and the client's
//! replies to them, as the kernel's C transport carries them.
//!
//! - **Calls in.** A received `RDMA_MSG` without chunks whose RPC message is a Call (in
//!   Version 2 without `RDMA2_F_RESPONSE`) is a callback ([`inline_reverse_call`]). Its credit field is the server's backchannel
//!   credits, not a grant for the client's calls, so it never reaches the congestion window.
//!   The Call is copied into one of the RPC client's backchannel requests and queued for the
//!   NFS client's callback service ([`Xprt::deliver_backchannel_call`]); its receive buffer
//!   is posted again at once, like any other.
//! - **Replies out.** The service's reply reaches `send_request` as a request without a call
//!   buffer; it goes out as an `RDMA_MSG` without chunks (in Version 2 with
//!   `RDMA2_F_RESPONSE`), header and reply in one Send. Its
//!   credit field grants the server [`BC_SLOTS`] calls in flight: the server's backchannel
//!   takes it as its congestion window (clamped to its own two).
//! - **Receives.** Besides one per call of ours in flight and two spare, the endpoint keeps
//!   [`RECEIVES`] more posted for callbacks: twice the credits granted, as the C client does.
//! - **Reverse-direction support.** In Version 2 our transport properties say what we take
//!   in the reverse direction (`RDMA2_PROPID_BRS`, draft section 5.2.5): [`REVERSE`], callbacks
//!   whole or continued (`RDMA2_F_RESPONSE` clear tells a callback's fragments, which the
//!   endpoint's reassembler puts together as it does replies). A callback in a form it does
//!   not cover is dropped and counted, as one that finds no free request. When the server
//!   takes continued ones too, a reply longer than the server receives goes continued, over up
//!   to [`MAX_REVERSE_FRAGMENTS`] Sends.
//! - **Sizes** offered to the NFS client for its session: callbacks and their replies of up to
//!   what one Send carries within the smaller of the two sides' inline thresholds, or, where
//!   both sides take continued ones, [`MAX_REVERSE_FRAGMENTS`] Sends; at most a page (a
//!   backchannel request's buffer); [`BC_SLOTS`] of them in flight. The NFS client reads the
//!   size when it creates its session, after the connection's transport properties.

use super::{receive::Reassembly, ClientTransport, Counters};
use crate::proto::{
    chunk::ChunkListsRef,
    continuation::{plan_fragments, Reassembled, MAX_REVERSE_FRAGMENTS},
    payload_format::PayloadFormat,
    properties::ReverseSupport,
    reverse::{check_reverse_support, reverse_sends, ReverseSends},
    role::Endpoint,
    wire::{self, inline_reverse_call, BodyRef, Credits, Direction, Header, Outgoing, Revision},
};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use kernel::{
    page::PAGE_SIZE,
    prelude::*,
    sunrpc::xprt::{Rqst, Xprt},
    sync::Mutex,
};

/// Callbacks the server may have in flight: the credits each reply grants, and the slots
/// offered for the session's backchannel (`bc_num_slots`). The C client's 16, the NFS client's
/// default number of callback slots.
pub(crate) const BC_SLOTS: u32 = 16;

/// What we take in the reverse direction, the `RDMA2_PROPID_BRS` of our transport properties:
/// callbacks without chunks, whole in one Send or continued over several
/// (`RDMA2_RVRSDIR_CONT`).
pub(crate) const REVERSE: ReverseSupport = ReverseSupport::Continued;

/// Receives posted for callbacks, besides those for the replies to our calls.
pub(crate) const RECEIVES: usize = 2 * BC_SLOTS as usize;

/// Room for the header of a message without chunks: 28 bytes in Version 1 (XID, version,
/// credits, `RDMA_MSG` and three empty chunk lists), 36 in Version 2 (`rdma_flags` and
/// `rdma_inv_handle` more).
const HEADER_ROOM: usize = 36;

/// Whether a callback that found no free request was reported (once per module load).
static OVERFLOW_REPORTED: AtomicBool = AtomicBool::new(false);

/// The backchannel state of a transport: sizes and counts.
pub(crate) struct Backchannel {
    /// The largest message the server receives inline on the current connection, with ours
    /// (0 before the first connection).
    send_limit: AtomicUsize,
    /// The header of a message without chunks in the current connection's revision.
    header_len: AtomicUsize,
    /// Callbacks handed to the callback service.
    calls: AtomicU64,
    /// Replies sent.
    replies: AtomicU64,
    /// Callbacks dropped (no service, no free request, too large).
    dropped: AtomicU64,
    /// Whether both sides take continued reverse-direction messages on the current
    /// connection (`RDMA2_RVRSDIR_CONT` or more each, Version 2).
    continued: AtomicBool,
    /// Callbacks received continued (Version 2), and the Sends they came in.
    continued_calls: AtomicU64,
    continued_call_sends: AtomicU64,
    /// Replies sent continued, and their Sends.
    continued_replies: AtomicU64,
    continued_reply_sends: AtomicU64,
}

impl Backchannel {
    pub(crate) const fn new() -> Self {
        Self {
            send_limit: AtomicUsize::new(0),
            header_len: AtomicUsize::new(HEADER_ROOM),
            calls: AtomicU64::new(0),
            replies: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            continued: AtomicBool::new(false),
            continued_calls: AtomicU64::new(0),
            continued_call_sends: AtomicU64::new(0),
            continued_replies: AtomicU64::new(0),
            continued_reply_sends: AtomicU64::new(0),
        }
    }

    /// A connection is up on which the server receives `send_limit` bytes inline (no more
    /// than we send), speaking `revision` (until a fall back).
    pub(crate) fn connected(&self, send_limit: usize, revision: Revision) {
        self.send_limit.store(send_limit, Ordering::Relaxed);
        self.fell_back(revision);
    }

    /// A new connection: until the server's properties say otherwise, it takes reverse-direction
    /// messages only whole.
    pub(crate) fn reset_reverse(&self) {
        self.continued.store(false, Ordering::Relaxed);
    }

    /// The server's transport properties said it takes `peer` in the reverse direction.
    pub(crate) fn peer_reverse(&self, peer: ReverseSupport) {
        let continued = reverse_sends(REVERSE, peer) == ReverseSends::Continued;
        self.continued.store(continued, Ordering::Relaxed);
    }

    /// The connection speaks `revision` from now on.
    pub(crate) fn fell_back(&self, revision: Revision) {
        let len = wire::header_len(revision, &ChunkListsRef::EMPTY).unwrap_or(HEADER_ROOM);
        self.header_len.store(len, Ordering::Relaxed);
    }

    /// The largest callback, and reply to one, in bytes (`bc_maxpayload`): what one Send
    /// carries each way, or eight when both sides take continued reverse-direction messages;
    /// at most a page (a backchannel request's buffer). Does not sleep.
    pub(crate) fn max_payload(&self) -> usize {
        let limit = match self.send_limit.load(Ordering::Relaxed) {
            // Not connected yet: what both sides would offer by default.
            0 => super::INLINE_SIZE as usize,
            n => n,
        };
        let sends = if self.continued.load(Ordering::Relaxed) {
            ReverseSends::Continued
        } else {
            ReverseSends::Simple
        };
        sends.max_payload(
            limit.min(super::INLINE_SIZE as usize),
            self.header_len.load(Ordering::Relaxed),
            PAGE_SIZE,
        )
    }
}

impl Drop for Backchannel {
    fn drop(&mut self) {
        let calls = *self.calls.get_mut();
        let dropped = *self.dropped.get_mut();
        if calls > 0 || dropped > 0 {
            pr_info!(
                "backchannel: {} callbacks served, {} replies sent, {} callbacks dropped; \
                 continued: {} callbacks received in {} Sends, {} replies sent in {} Sends\n",
                calls,
                *self.replies.get_mut(),
                dropped,
                *self.continued_calls.get_mut(),
                *self.continued_call_sends.get_mut(),
                *self.continued_replies.get_mut(),
                *self.continued_reply_sends.get_mut()
            );
        }
    }
}

/// Takes a received message if it is a callback and hands it to the callback service; returns
/// whether it took the message (the caller then does nothing more with it).
pub(super) fn received(xprt: &Xprt<ClientTransport>, header: &Header<'_>) -> bool {
    let Some(call) = inline_reverse_call(header) else {
        return false;
    };
    // Version 2: only what our properties said we take (no chunks).
    if header.revision == Revision::V2Draft01 {
        if let Err(e) = check_reverse_support(REVERSE, PayloadFormat::Simple, false, false, false) {
            xprt.backchannel.dropped.fetch_add(1, Ordering::Relaxed);
            pr_debug!(
                "callback {:#x} dropped: we take none ({:?})\n",
                header.xid,
                e
            );
            return true;
        }
    }
    deliver(xprt, header.xid, call);
    true
}

/// Takes a reverse-direction message of a Version 2 connection (a callback, whole or a
/// fragment of a continued one: [`wire::is_reverse_v2`]), feeding it to `reassembly`, which
/// the server's other messages share (a sender interleaves no two messages' fragments, draft
/// section 4.4.2). A fragment is copied out and its receive buffer `recv_index` posted again
/// at once; returns whether that was done. A message that is no callback, or a continued one
/// broken, is dropped and counted: a Requester answers no error (draft section 6.2.2.2).
pub(super) fn received_v2(
    xprt: &Xprt<ClientTransport>,
    generation: u32,
    header: &Header<'_>,
    recv_index: usize,
    reassembly: &Mutex<Reassembly>,
) -> bool {
    let bc = &xprt.backchannel;
    let mut reassembly = reassembly.lock();
    match reassembly.accept_part(header.part()) {
        Ok(Reassembled::Whole(_)) => {
            drop(reassembly);
            if !received(xprt, header) {
                bc.dropped.fetch_add(1, Ordering::Relaxed);
                pr_debug!(
                    "a reverse-direction message {:#x} that is no callback dropped\n",
                    header.xid
                );
            }
            false
        }
        Ok(Reassembled::Pending) => {
            drop(reassembly);
            xprt.with_endpoint(generation, |endpoint| endpoint.repost_now(recv_index));
            true
        }
        Ok(Reassembled::Complete { xid, fragments }) => {
            let sends = fragments as usize;
            let no_chunks = header.chunks().is_some_and(|c| c.is_empty());
            let format = PayloadFormat::Continued { sends };
            let supported = check_reverse_support(REVERSE, format, false, false, false);
            let payload = reassembly.storage().data();
            match wire::reverse_payload(Endpoint::Client, xid, payload) {
                Some(call) if no_chunks && supported.is_ok() => {
                    bc.continued_calls.fetch_add(1, Ordering::Relaxed);
                    bc.continued_call_sends
                        .fetch_add(sends as u64, Ordering::Relaxed);
                    deliver(xprt, xid, call);
                }
                _ => {
                    bc.dropped.fetch_add(1, Ordering::Relaxed);
                    pr_debug!(
                        "a continued reverse-direction message {:#x} that is no callback dropped\n",
                        xid
                    );
                }
            }
            false
        }
        Ok(Reassembled::Dropped | Reassembled::External | Reassembled::Control) => false,
        Err(e) => {
            bc.dropped.fetch_add(1, Ordering::Relaxed);
            pr_debug!(
                "a continued callback {:#x} broken ({:?}): dropped\n",
                e.xid,
                e.violation
            );
            false
        }
    }
}

/// Hands the callback `call` (RPC XID `xid`) to the callback service.
fn deliver(xprt: &Xprt<ClientTransport>, xid: u32, call: &[u8]) {
    let bc = &xprt.backchannel;
    match xprt.deliver_backchannel_call(call) {
        Ok(()) => {
            bc.calls.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => {
            bc.dropped.fetch_add(1, Ordering::Relaxed);
            if e == ENOMEM {
                // More callbacks than the credits we granted (or no memory): as the C client,
                // start over on a new connection, where the server retries.
                if !OVERFLOW_REPORTED.swap(true, Ordering::Relaxed) {
                    pr_warn!("backchannel overflow: the connection is closed\n");
                }
                xprt.force_disconnect();
            } else {
                pr_debug!("callback {:#x} dropped ({:?})\n", xid, e);
            }
        }
    }
}

/// Sends the callback service's reply of `rqst`, a request without call buffer: in one Send,
/// or continued over several when both sides take continued reverse-direction messages and
/// it is longer than the server receives (or than `reverse_inline_threshold`).
///
/// `ENOTCONN` if there is no connection (the reply is dropped, the server calls again on the
/// next one), or as [`super::endpoint::Endpoint::send_message`].
pub(super) fn send_reply(xprt: &Xprt<ClientTransport>, rqst: &Rqst<'_>) -> Result {
    let endpoint = xprt.endpoint().ok_or(ENOTCONN)?;
    let revision = xprt.sending().revision;
    let encode = |buf: &mut [u8], body| {
        let outgoing = Outgoing {
            xid: rqst.xid(),
            credits: Credits {
                granted: BC_SLOTS as u16,
                max: BC_SLOTS as u16,
            },
            direction: Direction::Reply,
            body,
        };
        wire::encode(revision, buf, &outgoing).map_err(|_| EINVAL)
    };
    let mut header = [0u8; HEADER_ROOM];
    let len = encode(&mut header, BodyRef::Msg(ChunkListsRef::EMPTY))?;
    let header = header.get(..len).ok_or(EINVAL)?;
    let counters: &Counters = &xprt.report.counters;
    let bc = &xprt.backchannel;
    let body = rqst.snd_buf();
    let body_len = body.layout().len() as usize;
    let limit = crate::reverse_send_limit(endpoint.send_limit());
    let split = if bc.continued.load(Ordering::Relaxed) && len + body_len > limit {
        plan_fragments(body_len, limit, len, MAX_REVERSE_FRAGMENTS).ok()
    } else {
        None
    };
    // Without a split, one Send (which fails if the server cannot take it whole).
    let sent = if let Some(split) = split {
        let mut fragment = [0u8; HEADER_ROOM];
        let fragment_len = encode(&mut fragment, BodyRef::Fragment)?;
        let fragment = fragment.get(..fragment_len).ok_or(EINVAL)?;
        endpoint
            .send_message_continued(fragment, header, &body, &split, counters)
            .inspect(|()| {
                if split.count() > 1 {
                    bc.continued_replies.fetch_add(1, Ordering::Relaxed);
                    bc.continued_reply_sends
                        .fetch_add(split.count() as u64, Ordering::Relaxed);
                }
            })
    } else {
        endpoint.send_message(header, &body, counters)
    };
    sent.inspect_err(|e| {
        if *e == ENOTCONN {
            xprt.force_disconnect();
        }
    })?;
    bc.replies.fetch_add(1, Ordering::Relaxed);
    Ok(())
}
