// SPDX-License-Identifier: GPL-2.0

//! The completions and connection events of an endpoint: replies in, send buffers back,
//! connection loss.
//!
//! A [`Receiver`] runs from the queue pair's CQ work (`IB_POLL_WORKQUEUE`: process context,
//! one completion at a time, in order). It reaches its transport through the transport's
//! handle (which holds no reference: the transport owns the endpoint that owns the receiver)
//! and acts only while its endpoint is the current one: completions flushed while an old
//! endpoint drains reach nothing.
//!
//! A reply may come in a Send With Invalidate of one of its call's regions (RFC 8797 in
//! Version 1, `rdma_inv_handle` in Version 2): the completion's proof of that goes with the
//! message to the call's record, which then needs no `LOCAL_INV` for that region. A proof no
//! record takes (a key that is none of the call's regions, or a message that answers no call
//! with registered memory) fails the connection.
//!
//! On a Version 2 connection the server may continue a reply over several Sends (draft section
//! 4.4.2): the receiver's [`Reassembly`] concatenates their payloads into a buffer allocated
//! once with the endpoint, and the whole reply is delivered as an inline reply of that length.

use super::{
    endpoint::{Buffers, SendTag},
    registration::ReplyKind,
    ClientTransport, Counters, INLINE_SIZE,
};
use crate::proto::{
    call_plan::{place_reply, CallLayout, CallPlan, ReplyChunks, ReplyPlacement},
    chunk::ChunkLists,
    continuation::{Reassembler, SliceStorage, RECEIVE_LIMITS},
    wire::Body,
};
use core::{
    cell::Cell,
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{
    new_mutex,
    prelude::*,
    rdma::consumer::{
        cm::{CmEvent, CmEventWatcher},
        device_removal::RemovalHandler,
        kernel_qp::{CompletionHandler, WorkCompletion},
    },
    sunrpc::xprt::{Handle, ReplyBuf},
    sync::{Arc, Mutex},
};

/// The reassembly of continued replies: their payloads so far, in a buffer of
/// [`RECEIVE_LIMITS`]`.max_len` bytes.
pub(crate) type Reassembly = Reassembler<SliceStorage<KVec<u8>>>;

/// Takes the completions and connection events of one endpoint.
#[pin_data]
pub(crate) struct Receiver {
    xprt: Arc<Handle<ClientTransport>>,
    buffers: Arc<Buffers>,
    /// A received message, copied out of its receive buffer before that is posted again.
    #[pin]
    message: Mutex<KVec<u8>>,
    /// The continued reply being received. A mutex: completions run in process context.
    #[pin]
    reassembly: Mutex<Reassembly>,
    /// The device is being removed: the endpoint must go, even if it was not yet the current
    /// one when the removal began.
    device_removed: AtomicBool,
    /// A failed request was reported: the first says why the connection ends.
    failure_reported: AtomicBool,
}

impl Receiver {
    pub(crate) fn new(
        xprt: Arc<Handle<ClientTransport>>,
        buffers: Arc<Buffers>,
    ) -> Result<Arc<Self>> {
        let message = KVec::from_elem(0u8, INLINE_SIZE as usize, GFP_KERNEL)?;
        let storage = KVec::from_elem(0u8, RECEIVE_LIMITS.max_len, GFP_KERNEL)?;
        let reassembly = Reassembler::new(SliceStorage::new(storage), RECEIVE_LIMITS);
        Arc::pin_init(
            pin_init!(Self {
                xprt,
                buffers,
                message <- new_mutex!(message),
                reassembly <- new_mutex!(reassembly),
                device_removed: AtomicBool::new(false),
                failure_reported: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )
    }

    /// Whether the endpoint's device is being removed.
    pub(crate) fn is_device_removed(&self) -> bool {
        self.device_removed.load(Ordering::SeqCst)
    }

    /// The connection failed or is being torn down: if it is the current one, the RPC client
    /// closes it and connects again.
    fn lost(&self) {
        let generation = self.buffers.generation;
        self.xprt
            .with(|xprt| ClientTransport::connection_lost(xprt, generation));
    }
}

impl CompletionHandler for Receiver {
    fn completed(&self, wc: &WorkCompletion) {
        if !wc.is_recv {
            self.send_completed(wc);
            return;
        }
        let index = wc.tag as usize;
        if !wc.status.is_success() {
            self.failed(wc);
            return;
        }
        let mut message = self.message.lock();
        let len = (wc.byte_len as usize).min(message.len());
        let Some(message) = message.get_mut(..len) else {
            return;
        };
        let copied = match self.buffers.recvs.get(index) {
            Some(buffer) => buffer.read(0, message),
            None => return,
        };
        let generation = self.buffers.generation;
        let remote = Cell::new(wc.remote_invalidation());
        let held = copied.is_ok()
            && self
                .xprt
                .with(|xprt| {
                    xprt.is_current(generation)
                        && ClientTransport::received(
                            xprt,
                            generation,
                            message,
                            index,
                            &self.reassembly,
                            &remote,
                        )
                })
                .unwrap_or(false);
        if !held {
            self.buffers.repost_later(index);
        }
        if let Some(proof) = remote.get() {
            // The server invalidated memory that is no region of the call its message answers
            // (or the message answers no call): it may be another call's, which the server
            // could still be writing. The connection goes; the calls are sent again.
            self.xprt
                .with(|xprt| Counters::add(&xprt.report.counters.bad_reply, 1));
            if !self.failure_reported.swap(true, Ordering::Relaxed) {
                pr_warn!(
                    "connection lost: the server's Send invalidated key {:#x}, no region of the \
                     call it answers\n",
                    proof.rkey()
                );
            }
            self.lost();
        }
    }
}

impl Receiver {
    /// A Send, registration or invalidation completed.
    fn send_completed(&self, wc: &WorkCompletion) {
        let ok = wc.status.is_success();
        match SendTag::decode(wc.tag) {
            Some(SendTag::Send(index)) => self.buffers.send_done(index),
            // A registration rides on its call's Send: it completes only if it failed or was
            // flushed.
            Some(SendTag::Register(_)) => {}
            Some(SendTag::Invalidate(record)) => {
                if ok {
                    self.xprt
                        .with(|xprt| Counters::add(&xprt.report.counters.local_invs, 1));
                }
                let regs = &self.buffers.registrations;
                if let Some(finished) = regs.invalidated(record, ok) {
                    if let Some(reply) = &finished.reply {
                        self.deliver_held(&finished, reply);
                    }
                }
            }
            None => {}
        }
        if !ok {
            self.failed(wc);
        }
    }

    /// A request failed: the connection is lost. The first failure that is not a flush (the
    /// consequence of another) is reported, with what failed.
    fn failed(&self, wc: &WorkCompletion) {
        if !wc.status.is_flush() && !self.failure_reported.swap(true, Ordering::Relaxed) {
            let what = if wc.is_recv {
                "a receive"
            } else {
                match SendTag::decode(wc.tag) {
                    Some(SendTag::Send(_)) => "a Send",
                    Some(SendTag::Register(_)) => "a registration (REG_MR)",
                    Some(SendTag::Invalidate(_)) => "an invalidation (LOCAL_INV)",
                    None => "a request",
                }
            };
            pr_warn!(
                "connection lost: {} failed (work completion status {})\n",
                what,
                wc.status.raw()
            );
        }
        self.lost();
    }

    /// Delivers a reply that waited in its receive buffer for its call's invalidations, and
    /// posts the buffer again.
    fn deliver_held(
        &self,
        finished: &super::registration::Finished,
        reply: &super::registration::HeldReply,
    ) {
        let generation = self.buffers.generation;
        let Some(recv_index) = reply.recv_index else {
            // A continued reply: its payload was copied out, its receives posted again.
            self.xprt.with(|xprt| {
                if xprt.is_current(generation) {
                    ClientTransport::deliver(xprt, finished, reply, &[]);
                }
            });
            return;
        };
        let mut message = self.message.lock();
        let copied = match (
            self.buffers.recvs.get(recv_index),
            message.get_mut(..reply.len),
        ) {
            (Some(buffer), Some(message)) => buffer.read(0, message).is_ok(),
            _ => false,
        };
        self.buffers.repost_later(recv_index);
        let Some(message) = message.get(..reply.len).filter(|_| copied) else {
            return;
        };
        self.xprt.with(|xprt| {
            if xprt.is_current(generation) {
                ClientTransport::deliver(xprt, finished, reply, message);
            }
        });
    }
}

/// How the reply `body` (of a message of `message_len` bytes) to a call planned as `plan` for
/// `layout` is delivered: checked against what the call offered, never trusting the server.
pub(crate) fn reply_kind(
    body: &Body<'_>,
    layout: &CallLayout,
    plan: &CallPlan,
    message_len: usize,
) -> ReplyKind {
    match body {
        Body::Msg {
            chunks,
            payload,
            more: false,
        } => match msg_placement(chunks, layout, plan, payload.len()) {
            Some(placement) => ReplyKind::Msg {
                payload: message_len - payload.len()..message_len,
                placement,
            },
            None => ReplyKind::Failed,
        },
        Body::NoMsg { chunks } => {
            let (ReplyChunks::ReplyChunk { len }, Some(chunk)) = (plan.reply, chunks.reply) else {
                return ReplyKind::Failed;
            };
            let written = chunk.length();
            if written == 0 || written > u64::from(len) || !chunks.writes.is_empty() {
                return ReplyKind::Failed;
            }
            match usize::try_from(written) {
                Ok(len) => ReplyKind::NoMsg { len },
                Err(_) => ReplyKind::Failed,
            }
        }
        // A continuation, which we do not reassemble, an error or no message.
        Body::Msg { more: true, .. } | Body::Error(_) | Body::Control | Body::Properties { .. } => {
            ReplyKind::Failed
        }
    }
}

/// Where the bulk data of an `RDMA_MSG` reply with `chunks` and an inline payload of
/// `inline_len` bytes (the whole payload of a continued reply) went, for a call planned as
/// `plan` for `layout`; `None` if it does not fit what the call offered.
pub(crate) fn msg_placement(
    chunks: &ChunkLists<'_>,
    layout: &CallLayout,
    plan: &CallPlan,
    inline_len: usize,
) -> Option<ReplyPlacement> {
    if chunks.writes.chunk_count() > 1
        || chunks.reply.is_some_and(|c| c.length() != 0)
        || !chunks.reads.is_empty()
    {
        return None;
    }
    let written = chunks.writes.chunks().next().map_or(0, |c| c.length());
    place_reply(layout, plan, inline_len, written).ok()
}

/// Rebuilds an `RDMA_MSG` reply in the call's receive buffer: `payload` is its inline part,
/// `placement` says where the bulk data the server wrote lies.
pub(crate) fn place(
    buf: &mut ReplyBuf<'_>,
    payload: &[u8],
    placement: &ReplyPlacement,
    counters: &Counters,
) -> Result {
    match *placement {
        ReplyPlacement::Inline { len } => {
            let inline = payload.get(..len).ok_or(EPROTO)?;
            if buf.write(inline) != len {
                return Err(EMSGSIZE);
            }
            Counters::add(&counters.fixup_copy, len);
        }
        ReplyPlacement::Placed {
            head,
            data,
            pad,
            tail,
        } => {
            if head < buf.head_len() {
                buf.trim_head(head)?;
            }
            let before = payload.get(..head).ok_or(EPROTO)?;
            let after = payload.get(head..head + tail).ok_or(EPROTO)?;
            if buf.write(before) != head
                || buf.skip(data + pad) != data + pad
                || buf.write(after) != tail
            {
                return Err(EMSGSIZE);
            }
            Counters::add(&counters.fixup_copy, head + tail);
            Counters::add(&counters.rdma_reply, data);
        }
    }
    Ok(())
}

impl RemovalHandler for Receiver {
    fn device_removed(&self) {
        // Noted first: an endpoint still connecting sees it once it is current (see
        // `ClientTransport::connect_now`), one that is current already is closed now.
        self.device_removed.store(true, Ordering::SeqCst);
        pr_info!("the device is being removed: closing its connection\n");
        self.lost();
    }
}

impl CmEventWatcher for Receiver {
    fn event(&self, event: &CmEvent) {
        // The server went away, or the device did: rdma_cm then waits until the id is
        // destroyed, which closing the connection does (from the RPC client's worker).
        if matches!(event, CmEvent::Disconnected | CmEvent::DeviceRemoval) {
            let generation = self.buffers.generation;
            let current = self.xprt.with(|xprt| xprt.is_current(generation));
            if current == Some(true) && !self.failure_reported.swap(true, Ordering::Relaxed) {
                pr_info!("connection lost: {}\n", event.name());
            }
            self.lost();
        }
    }
}
