// SPDX-License-Identifier: GPL-2.0

//! A connection: one client's queue pair, and the calls and replies it carries.
//!
//! A server thread takes one received message at a time ([`SvcTransport::recvfrom`]): the
//! protocol core decodes its header, an inline call is copied into the thread's request, and a
//! Read chunk is RDMA Read into its pages ([`chunks`](super::chunks)). The reply goes back
//! ([`SvcTransport::sendto`]) after a header that grants the client credits: inline, with its
//! bulk data RDMA Written into the call's Write chunk, or through the call's Reply chunk when
//! it does not fit inline. On a Version 2 connection a reply that does not fit inline, and
//! that the call gave no Reply chunk large enough for, goes as a continued reply (draft section
//! 4.4.2: the Responder SHOULD use Message Continuation): up to [`MAX_SENT_FRAGMENTS`] Sends of
//! at most what the client receives, each but the last an `RDMA2_MSG` with `RDMA2_F_MORE` and
//! no chunks, the last with the Write list (see [`Buffers::begin_continued`] for the client's
//! receives this takes). What cannot be served earns an `RDMA_ERROR` (`RDMA2_ERROR`) in its
//! place: the client's call then fails instead of waiting for a reply.
//!
//! The connection speaks the version of the first message of a version it supports (1 or 2),
//! for its whole life, in the layout the protocol core's [`wire`] revision gives that version
//! (draft section 4.2.3.3); a message of another version earns `ERR_VERS` ([`wire::admit`]).
//!
//! A Version 2 connection exchanges transport properties (draft sections 5 and 6.3.4): the
//! client's first message, its `RDMA2_CONNPROP` in our client's case, settles the version, and
//! our own `RDMA2_CONNPROP` goes out before anything else we send on the connection, granting
//! the client its credits. The client's properties apply as each of its `RDMA2_CONNPROP`
//! arrives ([`PropertyExchange`]): what we send inline follows its receive buffer size. Before
//! that, a Version 2 connection assumes the draft's defaults (4096 bytes each way, at most our
//! own threshold), not the RFC 8797 private data, which is Version 1's. A first Version 2
//! message longer than the 1024 bytes the draft allows it ends the connection.
//!
//! A Version 2 client may send a call over several Sends (Message Continuation, draft sections
//! 4.4.2 and 6.2.2.2): each message but the last has `RDMA2_F_MORE` and no chunks. The
//! connection reassembles them in storage of [`RECEIVE_LIMITS`] bytes allocated when it is
//! accepted, so that nothing allocates per fragment; each fragment's receive buffer is posted
//! again as soon as it is copied out, as for any message. The last fragment's chunk lists
//! go with the whole payload, which is then served as an inline call. A broken sequence
//! (another XID or header type in the middle, too long, too many fragments) earns
//! `RDMA2_ERR_INVAL_CONT` (`RDMA2_ERR_SYSTEM` if only our storage ran out), and the rest of the
//! abandoned sequence is dropped silently. Messages reach the reassembler in the order they
//! arrived: a thread takes its lock before it takes a message off the queue. The connection's
//! continued calls are counted and logged when it closes.

use super::{
    backchannel::Callbacks,
    buffers::{Buffers, Received, CONTINUED_TAG, CREDITS, RECVS, SENDS},
    chunks::{self, CallChunks, ReadPlan, Unserved},
    listener::Listener,
    rdma::{Rdma, OPS, OP_TAG, OP_WRS},
    Receiver, WithBackchannel,
};
use crate::{
    client::INLINE_SIZE,
    devices::Devices,
    proto::{
        chunk::{ChunkLimits, ChunkListsRef, Segment},
        cm_private::CmPrivateData,
        continuation::{
            plan_fragments, FragmentPlan, Reassembled, Reassembler, SliceStorage,
            MAX_SENT_FRAGMENTS, RECEIVE_LIMITS,
        },
        error::{ErrorBody, ErrorReply, Fault, V2Error},
        negotiation::FIRST_MESSAGE_MAX,
        payload_format::PayloadFormat,
        properties::{PeerProperties, ReverseSupport},
        property_exchange::{
            send_threshold, split_properties, ExchangeEvent, LocalProperties, PropertyExchange,
        },
        remote_invalidation::{reply_invalidation, ReplyInvalidation},
        reply_choice::{choose_reply_v2, ReplyShape},
        v1::V1_DEFAULT_INLINE,
        v2::{self, Credit, Flags},
        version::{Version, VersionRange},
        wire::{self, Body, BodyRef, Credits, Direction, Header, Outgoing, Refusal, Revision},
        xdr::roundup,
    },
};
use core::{
    fmt,
    marker::PhantomData,
    net::SocketAddr,
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{
    debugfs, new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    rdma::consumer::{
        client::ProtectionDomain,
        cm::{CmId, ConnParam, ReceivedParam},
        device_removal::DeviceUse,
        dma_buffer::DmaBuffer,
        kernel_qp::{QpCaps, SendChain, SendWr, Sge},
    },
    sunrpc::{
        svc_xprt::{ArgPlacement, Kind, SvcRqst, SvcTransport, SvcXprt},
        svc_xprt_class::SvcXprtPtr,
        xprt::XdrBuf,
    },
    sync::{
        lock::{mutex::MutexBackend, Guard},
        Arc, Mutex,
    },
};

/// Whether a call with chunks we do not serve was reported (once per module load).
static CHUNKS_REPORTED: AtomicBool = AtomicBool::new(false);
/// Whether a reply that could not be sent was reported (once per module load).
static TOO_LARGE_REPORTED: AtomicBool = AtomicBool::new(false);

mod properties;
mod send;
use super::report::{Accepted, Report};
use properties::{Exchange, Exchanged};
use send::{encode_header, reply_header_len};

/// Room for the header of an error reply (the fixed words and an error body), or of a message
/// without chunks.
pub(super) const HEADER_ROOM: usize = 64;
/// The versions the server speaks.
const VERSIONS: VersionRange = VersionRange::V1_AND_V2;
/// Pages one region maps at most (the C siw's and rsiw's fast-registration limit).
const REGION_PAGES: u32 = 256;

/// One client's connection, of class `C`.
pub(crate) struct Connection<C: WithBackchannel> {
    /// Dropped first: drains and destroys the queue pair, then the id.
    id: CmId,
    buffers: Arc<Buffers>,
    /// The RDMA operations of chunks, their MRs and bounce buffers.
    rdma: Arc<Rdma>,
    _pd: Arc<ProtectionDomain>,
    /// Our inline threshold, both ways ([`super::inline_threshold`] when accepted).
    threshold: u32,
    /// The transport property exchange of a Version 2 connection.
    exchange: Pin<KBox<Mutex<Exchange>>>,
    /// The continued call being reassembled; its lock orders the messages fed to it.
    reassembly: Pin<KBox<Mutex<Reassembly>>>,
    /// The client takes Send With Invalidate (RFC 8797).
    remote_invalidation: bool,
    /// The connection's version, inline limit and counters, shown in its debugfs file.
    report: Arc<Report>,
    /// The client's address, for messages.
    remote: Option<SocketAddr>,
    /// The backchannel: nfsd's callbacks to the client.
    callbacks: Callbacks<C>,
    /// `/sys/kernel/debug/rpcrdma2/server-N`, showing `report`.
    _debugfs: Option<debugfs::File<Report>>,
    _class: PhantomData<C>,
    /// Dropped last, once nothing of the device is used any more (see [`Devices`]).
    _device_use: DeviceUse,
}

/// Accepts the connection request `id` with the client's parameters `param`, for `listener`:
/// a queue pair with every receive posted, then the acceptance with our RFC 8797 private data.
pub(crate) fn accept<C: WithBackchannel>(
    listener: &SvcXprt<Listener<C>>,
    mut id: CmId,
    param: &ReceivedParam,
) -> Result<SvcXprtPtr> {
    let peer = CmPrivateData::decode(&param.private_data);
    let client_receives = peer.map_or(V1_DEFAULT_INLINE, |p| p.recv_size);
    // The server's inline threshold (`server_inline_threshold=`, at most our buffers' size)
    // is what we advertise both ways, and the most we send inline.
    let threshold = super::inline_threshold();
    let send_limit = client_receives.min(threshold) as usize;
    let device = id.device()?;
    let caps = device.caps();
    let pd = device.alloc_pd()?;
    let buffers = Buffers::new(&pd)?;
    let rdma = Rdma::new(&pd, caps.max_fast_reg_pages.clamp(1, REGION_PAGES))?;
    let local = id.local_address().ok();
    let remote = id.peer_address().ok();
    let xprt = SvcXprt::<Connection<C>>::create(
        listener.server(),
        listener.net(),
        Kind::Connection,
        local.as_ref(),
        remote.as_ref(),
        |handle| {
            let receiver = Arc::new(
                Receiver {
                    handle,
                    buffers: buffers.clone(),
                    failure_reported: AtomicBool::new(false),
                    ops: rdma.ops().clone(),
                },
                GFP_KERNEL,
            )?;
            // Refused while the device is being removed; a removal that starts later closes
            // the connection through the receiver.
            let device_use = DeviceUse::new::<Devices>(&device, receiver.clone())?;
            let qp_caps = QpCaps {
                max_send_wr: ((SENDS + OPS * OP_WRS) as u32).min(caps.max_qp_wr),
                max_recv_wr: RECVS as u32,
            };
            let qp = id.create_qp_with_handler(&pd, qp_caps, receiver.clone())?;
            for (index, buffer) in buffers.recvs.iter().enumerate() {
                let sge = Sge {
                    buffer,
                    offset: 0,
                    len: INLINE_SIZE as usize,
                };
                qp.post_recv(sge, index as u64)?;
                buffers.posted(1);
            }
            id.watch(receiver);
            let private = CmPrivateData::new(threshold, threshold, false).encode();
            let depth = caps.max_qp_rd_atom.min(16) as u8;
            let report = Report::new(Accepted {
                remote,
                local,
                threshold,
                private_receive: client_receives,
                remote_invalidation: peer.is_some_and(|p| p.remote_invalidation()),
                send_limit,
            })?;
            id.accept(&ConnParam {
                private_data: &private,
                responder_resources: param.responder_resources.min(depth),
                initiator_depth: param.initiator_depth.min(depth),
                retry_count: 6,
                rnr_retry_count: 0,
            })?;
            Ok(Connection {
                id,
                buffers,
                rdma,
                _pd: pd,
                threshold,
                exchange: KBox::pin_init(new_mutex!(Exchange::new()), GFP_KERNEL)?,
                reassembly: KBox::pin_init(new_mutex!(Reassembly::new()?), GFP_KERNEL)?,
                remote_invalidation: peer.is_some_and(|p| p.remote_invalidation()),
                _debugfs: crate::debugfs::file("server", report.clone()),
                report,
                remote,
                callbacks: Callbacks::new()?,
                _class: PhantomData,
                _device_use: device_use,
            })
        },
    )?;
    pr_info!(
        "accepted {} (it receives {} bytes inline{})\n",
        Peer(remote),
        client_receives,
        match peer {
            Some(p) if p.remote_invalidation() => ", takes Send With Invalidate",
            Some(_) => "",
            None => ", no RFC 8797 private data",
        }
    );
    Ok(xprt)
}

/// Message Continuation of a connection's calls (draft section 4.4.2); the report counts what
/// came of it.
struct Reassembly {
    reassembler: Reassembler<SliceStorage<KVVec<u8>>>,
}

impl Reassembly {
    /// Allocates the storage of the largest call we reassemble, once per connection (32 KiB:
    /// virtually contiguous will do).
    fn new() -> Result<Self> {
        let storage = KVVec::from_elem(0u8, RECEIVE_LIMITS.max_len, GFP_KERNEL)?;
        Ok(Self {
            reassembler: Reassembler::new(SliceStorage::new(storage), RECEIVE_LIMITS),
        })
    }
}

/// The held lock of a connection's [`Reassembly`].
type ReassemblyGuard<'a> = Guard<'a, Reassembly, MutexBackend>;

/// A client's address for messages, if it is known.
pub(super) struct Peer(pub(super) Option<SocketAddr>);

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(address) => write!(f, "{address}"),
            None => f.write_str("a client"),
        }
    }
}

impl<C: WithBackchannel> Connection<C> {
    /// Posts receive buffer `index` again; the connection goes if that fails.
    fn repost(xprt: &SvcXprt<Self>, index: usize) {
        let posted = xprt.id.qp().and_then(|qp| {
            let buffer = xprt.buffers.recvs.get(index).ok_or(EINVAL)?;
            let sge = Sge {
                buffer,
                offset: 0,
                len: INLINE_SIZE as usize,
            };
            qp.post_recv(sge, index as u64)
        });
        match posted {
            Ok(()) => xprt.buffers.posted(1),
            Err(_) => xprt.deferred_close(),
        }
    }

    /// Copies the message `received` out of its receive buffer.
    fn read_message(&self, received: Received) -> Result<KVec<u8>> {
        let buffer = self.buffers.recvs.get(received.index).ok_or(EINVAL)?;
        let len = received.len.min(INLINE_SIZE as usize);
        let mut message = KVec::from_elem(0u8, len, GFP_KERNEL)?;
        buffer.read(0, &mut message)?;
        Ok(message)
    }

    /// The connection's backchannel.
    pub(super) fn callbacks(&self) -> &Callbacks<C> {
        &self.callbacks
    }

    /// The largest message we send inline.
    pub(super) fn send_limit(&self) -> usize {
        self.report.values.send_limit.load(Ordering::Relaxed)
    }

    /// The largest callback: what one Send carries inline after the largest header of a
    /// message without chunks, or eight Sends where both sides take continued
    /// reverse-direction messages; at most a page (the client's callback buffer). 0 where
    /// no callback goes (nfsd gets no backchannel then).
    pub(super) fn callback_limit(&self) -> usize {
        let header = [Revision::V1, Revision::V2Draft01]
            .iter()
            .filter_map(|r| wire::header_len(*r, &ChunkListsRef::EMPTY))
            .max()
            .unwrap_or(HEADER_ROOM);
        self.reverse_direction()
            .sends
            .max_payload(self.send_limit(), header, PAGE_SIZE)
    }

    /// The client's address, if it is known.
    pub(super) fn remote(&self) -> Option<SocketAddr> {
        self.remote
    }

    /// Encodes into `buf` the header of the callback `xid` in the connection's revision: an
    /// `RDMA_MSG` without chunks asking for `credits` (with `fragment`, Version 2's header of a
    /// Send that a continued callback's next Send follows); returns its length.
    pub(super) fn encode_callback_header(
        &self,
        buf: &mut [u8],
        xid: u32,
        credits: u32,
        fragment: bool,
    ) -> Result<usize> {
        let credits = u16::try_from(credits).unwrap_or(u16::MAX);
        let outgoing = Outgoing {
            xid,
            credits: Credits {
                granted: credits,
                max: credits,
            },
            direction: Direction::Call,
            body: if fragment {
                BodyRef::Fragment
            } else {
                BodyRef::Msg(ChunkListsRef::EMPTY)
            },
        };
        wire::encode(self.revision(), buf, &outgoing).map_err(|_| EINVAL)
    }

    /// Breaks the connection: its outstanding work requests are flushed.
    fn give_up(xprt: &SvcXprt<Self>) {
        xprt.deferred_close();
        let _ = xprt.id.disconnect();
    }

    /// Takes a reverse-direction message of a Version 2 connection (a reply to one of our
    /// callbacks, whole or a fragment of a continued one: [`wire::is_reverse_v2`]), fed to the
    /// connection's reassembler, which the client's calls share (a sender interleaves no two
    /// messages' fragments, draft section 4.4.2). One that is no reply, or a continued one
    /// broken, is dropped and counted: for callbacks we are the Requester, which answers no
    /// error (draft section 6.2.2.2), and the callback times out.
    fn take_reverse(&self, header: &Header<'_>, reassembly: &mut ReassemblyGuard<'_>) {
        let credits = u32::from(header.credits.granted);
        let callbacks = &self.callbacks;
        match reassembly.reassembler.accept_part(header.part()) {
            Ok(Reassembled::Whole(_)) => match wire::inline_reverse_reply(header) {
                Some(reply) => callbacks.reply(header.xid, credits, reply, 1),
                None => callbacks.unusable(header.xid),
            },
            Ok(Reassembled::Complete { xid, fragments }) => {
                let no_chunks = header.chunks().is_some_and(|c| c.is_empty());
                let payload = reassembly.reassembler.storage().data();
                match wire::reverse_payload(crate::proto::role::Endpoint::Server, xid, payload) {
                    Some(reply) if no_chunks => callbacks.reply(xid, credits, reply, fragments),
                    _ => callbacks.unusable(xid),
                }
            }
            Ok(
                Reassembled::Pending
                | Reassembled::Dropped
                | Reassembled::External
                | Reassembled::Control,
            ) => {}
            Err(e) => {
                pr_debug!(
                    "{}: continued reply {:#x} to a callback broken ({:?})\n",
                    Peer(self.remote),
                    e.xid,
                    e.violation
                );
                callbacks.unusable(e.xid);
            }
        }
    }

    /// Decodes `message` and places its call in `rqst` (reading its Read chunk), with the
    /// context its reply needs in `ctxt`; returns the call's length, or 0 for a message that
    /// carries none (it was answered with an error, dropped, or is a fragment of a continued
    /// call that is not complete yet). `reassembly` is held since the message was taken off
    /// the queue: the message is fed to it, and a completed continued call is served from it.
    fn take_call(
        xprt: &SvcXprt<Self>,
        message: &[u8],
        mut reassembly: ReassemblyGuard<'_>,
        rqst: &mut SvcRqst<'_>,
        ctxt: &mut Option<KBox<CallChunks>>,
    ) -> Result<usize> {
        let first = xprt.report.values.version.load(Ordering::Acquire) == 0;
        let admitted = xprt.admit(message);
        // A Version 2 client's first message must fit a Version 1 server's receive (draft
        // section 4.2.3); one that does not would have cost it the connection there, and
        // costs it the connection here.
        if first && matches!(admitted, Ok(Revision::V2Draft01)) && message.len() > FIRST_MESSAGE_MAX
        {
            pr_info!(
                "{} sent a first Version 2 message of {} bytes, more than {}: closing the \
                 connection\n",
                Peer(xprt.remote),
                message.len(),
                FIRST_MESSAGE_MAX
            );
            Self::give_up(xprt);
            return Ok(0);
        }
        let decoded = admitted.and_then(|revision| {
            if revision == Revision::V2Draft01 {
                // Our properties go first, whatever the client's first message is.
                Self::send_properties(xprt, &mut xprt.exchange.lock());
            }
            // Version 2 calls carry at most the segments our `RCSIZ` says.
            let limits = match revision {
                Revision::V2Draft01 => {
                    ChunkLimits::with_header_segments(crate::server::MAX_SEGMENT_COUNT)
                }
                Revision::V1 => ChunkLimits::DEFAULT,
            };
            wire::decode_as(revision, message, &limits, VERSIONS)
        });
        if let Ok(header) = &decoded {
            if header.revision == Revision::V2Draft01 {
                if let Exchanged::Consumed = xprt.take_properties(header) {
                    return Ok(0);
                }
            }
            // A reply to one of our callbacks is no call: it goes to the backchannel.
            if header.revision == Revision::V2Draft01
                && wire::is_reverse_v2(header, crate::proto::role::Endpoint::Server)
            {
                xprt.take_reverse(header, &mut reassembly);
                return Ok(0);
            }
            if let Some(reply) = wire::inline_reverse_reply(header) {
                let credits = u32::from(header.credits.granted);
                xprt.callbacks.reply(header.xid, credits, reply, 1);
                return Ok(0);
            }
        }
        let malformed = |fault: Fault| {
            pr_debug!("a malformed message: {:?}\n", fault);
            if let Some(reply) = fault.reply() {
                xprt.send_error(&reply);
            }
            Ok(0)
        };
        let header = match decoded {
            Ok(header) => header,
            Err(fault) => {
                // A refused fragment ends its sequence, and the rest of it goes unread.
                if let Some((xid, more)) = wire::peek_continued(xprt.revision(), message) {
                    reassembly.reassembler.refused(xid, more);
                }
                return malformed(fault);
            }
        };
        let revision = header.revision;
        let refuse = |why: Refusal| xprt.send_error(&wire::refusal(revision, header.xid, why));
        // A Version 1 message is never a fragment: it goes through as it came.
        let continued = match reassembly.reassembler.accept_part(header.part()) {
            Ok(Reassembled::Whole(_) | Reassembled::External | Reassembled::Control) => false,
            Ok(Reassembled::Pending) => {
                Report::count(&xprt.report.values.continued_fragments);
                return Ok(0);
            }
            Ok(Reassembled::Dropped) => return Ok(0),
            Ok(Reassembled::Complete { .. }) => {
                Report::count(&xprt.report.values.continued_fragments);
                Report::count(&xprt.report.values.continued_calls);
                true
            }
            Err(e) => {
                Report::count(&xprt.report.values.continuations_refused);
                drop(reassembly);
                let why = match e.error() {
                    V2Error::System => Refusal::System,
                    _ => Refusal::Continuation,
                };
                pr_debug!(
                    "{}: continued call {:#x} broken ({:?})\n",
                    Peer(xprt.remote),
                    e.xid,
                    e.violation
                );
                xprt.send_error(&wire::refusal(revision, e.xid, why));
                return Ok(0);
            }
        };
        // Other messages need the lock no longer; a completed continued call is served from
        // the reassembly storage, under it.
        let held = if continued {
            Some(reassembly)
        } else {
            drop(reassembly);
            None
        };
        let (lists, payload, nomsg) = match header.body {
            // Cannot be: every fragment went to the reassembler.
            Body::Msg { more: true, .. } => {
                refuse(Refusal::Continuation);
                return Ok(0);
            }
            Body::Msg {
                chunks, payload, ..
            } => match &held {
                Some(r) => (chunks, r.reassembler.storage().data(), false),
                None => (chunks, payload, false),
            },
            Body::NoMsg { chunks } => (chunks, &[][..], true),
            // None is a call: dropped (a credit grant's credits are ours to ignore).
            Body::Error(_) | Body::Control | Body::Properties { .. } => return Ok(0),
        };
        if let Err(fault) = wire::check_call_payload(&header, payload) {
            return malformed(fault);
        }
        let unserved = |why: Unserved| {
            let refusal = match why {
                Unserved::NoMsgWithoutCall | Unserved::Position(_) => Refusal::Malformed,
                Unserved::ReadChunks(_) => Refusal::ReadChunks { max: 1 },
                Unserved::ReadLength(_) | Unserved::Pages => Refusal::System,
            };
            let reply = wire::refusal(revision, header.xid, refusal);
            if !CHUNKS_REPORTED.swap(true, Ordering::Relaxed) {
                pr_info!(
                    "a call's chunks cannot be served ({}): {} for call {:#x}\n",
                    why,
                    reply.body.name(),
                    header.xid
                );
            }
            xprt.send_error(&reply);
            Ok(0)
        };
        let plan = match chunks::plan_reads(&lists.reads, payload.len(), nomsg) {
            Ok(plan) => plan,
            Err(why) => return unserved(why),
        };
        // Version 1 leaves the region to the server (RFC 8797), Version 2 names it in
        // `rdma_inv_handle`: the reply's last Send invalidates it.
        let invalidation = reply_invalidation(
            revision,
            xprt.remote_invalidation,
            header.inv_handle,
            &lists,
        );
        if let ReplyInvalidation::Unmatched(handle) = invalidation {
            xprt.report
                .values
                .unmatched_inv_handles
                .fetch_add(1, Ordering::Relaxed);
            pr_debug!(
                "{}: call {:#x} names {:#x} in rdma_inv_handle, none of its segments\n",
                Peer(xprt.remote),
                header.xid,
                handle
            );
        }
        *ctxt = CallChunks::of(&lists, invalidation.handle())?;
        let give_up = || Self::give_up(xprt);
        // Pages of the call, and one for the reply.
        let fits = |pages: usize| pages < rqst.page_count();
        match plan {
            // A call sent whole in one Send fits a page; a continued one may take several.
            ReadPlan::Inline if payload.len() <= PAGE_SIZE => {
                rqst.set_arg(payload)?;
                Ok(payload.len())
            }
            ReadPlan::Inline => {
                let len = payload.len();
                let pages = len.div_ceil(PAGE_SIZE);
                if !fits(pages) {
                    return unserved(Unserved::Pages);
                }
                for (index, part) in payload.chunks(PAGE_SIZE).enumerate() {
                    rqst.write_page(index, 0, part)?;
                }
                rqst.place_arg(&ArgPlacement {
                    head_len: PAGE_SIZE,
                    page_len: len.saturating_sub(PAGE_SIZE),
                    tail: PAGE_SIZE..PAGE_SIZE,
                    pages,
                })?;
                Ok(len)
            }
            ReadPlan::DataItem {
                chunk,
                position,
                len,
            } => {
                let padded = roundup(len).ok_or(EINVAL)?;
                let pages = 1 + padded.div_ceil(PAGE_SIZE);
                // The inline part goes in the first page, around the data's pages.
                if !fits(pages) || payload.len() > PAGE_SIZE {
                    return unserved(Unserved::Pages);
                }
                rqst.write_page(0, 0, payload)?;
                // A continued call's storage is not needed beyond this point.
                let payload_len = payload.len();
                drop(held);
                let qp = xprt.id.qp()?;
                if let Err(e) = chunks::pull(qp, &xprt.rdma, rqst, &chunk, 1, len, &give_up) {
                    pr_info!("a Read chunk failed ({:?}): closing the connection\n", e);
                    give_up();
                    return Ok(0);
                }
                if padded > len {
                    let zeroes = [0u8; 4];
                    let at = 1 + len / PAGE_SIZE;
                    rqst.write_page(at, len % PAGE_SIZE, &zeroes[..padded - len])?;
                }
                rqst.place_arg(&ArgPlacement {
                    head_len: position,
                    page_len: padded,
                    tail: position..payload_len,
                    pages,
                })?;
                Ok(payload_len + padded)
            }
            ReadPlan::Call { chunk, len } => {
                let pages = len.div_ceil(PAGE_SIZE);
                if !fits(pages) {
                    return unserved(Unserved::Pages);
                }
                let qp = xprt.id.qp()?;
                if let Err(e) = chunks::pull(qp, &xprt.rdma, rqst, &chunk, 0, len, &give_up) {
                    pr_info!(
                        "a Position Zero Read chunk failed ({:?}): closing the connection\n",
                        e
                    );
                    give_up();
                    return Ok(0);
                }
                let head = len.min(PAGE_SIZE);
                rqst.place_arg(&ArgPlacement {
                    head_len: head,
                    page_len: len.saturating_sub(head),
                    tail: head..head,
                    pages,
                })?;
                Ok(len)
            }
        }
    }

    /// The credits to grant in a header going out now: what the posted receives honour, of
    /// at most [`CREDITS`].
    fn credits(&self) -> Credits {
        let granted = u16::try_from(self.buffers.grant()).unwrap_or(CREDITS);
        self.report
            .values
            .granted
            .store(u32::from(granted), Ordering::Relaxed);
        Credits {
            granted,
            max: CREDITS,
        }
    }

    /// The revision the connection speaks; Version 1 until its first message settled it.
    fn revision(&self) -> Revision {
        Version::from_u32(self.report.values.version.load(Ordering::Acquire))
            .map_or(Revision::V1, Revision::of)
    }

    /// The revision `message` is to be decoded in, settling the connection's version with its
    /// first message of a supported version; or the fault to answer (`ERR_VERS`).
    fn admit(&self, message: &[u8]) -> core::result::Result<Revision, Fault> {
        let settled = Version::from_u32(self.report.values.version.load(Ordering::Acquire));
        let version = wire::admit_message(message, settled, VERSIONS)?;
        if settled.is_none() {
            let first = self.report.values.version.compare_exchange(
                0,
                version.as_u32(),
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            match first {
                Ok(_) => pr_info!(
                    "{} speaks RPC-over-RDMA {}\n",
                    Peer(self.remote),
                    Revision::of(version).name()
                ),
                // Another thread's message settled it first: judged by that.
                Err(other) => {
                    let settled = Version::from_u32(other);
                    return wire::admit_message(message, settled, VERSIONS).map(Revision::of);
                }
            }
        }
        Ok(Revision::of(version))
    }
}

#[vtable]
impl<C: WithBackchannel> SvcTransport for Connection<C> {
    type Class = C;
    type Context = CallChunks;

    fn has_wspace(xprt: &SvcXprt<Self>) -> bool {
        xprt.buffers.has_send()
    }

    fn recvfrom(
        xprt: &SvcXprt<Self>,
        rqst: &mut SvcRqst<'_>,
        ctxt: &mut Option<KBox<CallChunks>>,
    ) -> Result<usize> {
        // Taken before the message, so that the fragments of a continued call reach the
        // reassembler in the order they arrived, whichever threads take them.
        let reassembly = xprt.reassembly.lock();
        let next = xprt.buffers.next(|| xprt.clear_data_pending());
        // Another thread may take the next message now.
        xprt.received();
        let Some(received) = next else {
            return Ok(0);
        };
        let message = xprt.read_message(received);
        // The message is copied out: its buffer takes the next one while a chunk is read.
        Self::repost(xprt, received.index);
        Self::take_call(xprt, &message?, reassembly, rqst, ctxt)
    }

    /// The first non-empty bulk data item of the reply goes to the first Write chunk; the
    /// items after it (a COMPOUND of several READs, which the Linux client never sends) stay
    /// inline, and further Write chunks are reported unused.
    fn result_payload(ctxt: &mut CallChunks, offset: u32, len: u32) -> Result {
        if len != 0 && ctxt.payload.is_none() {
            ctxt.payload = Some((offset, len));
        }
        Ok(())
    }

    fn sendto(
        xprt: &SvcXprt<Self>,
        rqst: &mut SvcRqst<'_>,
        ctxt: Option<&mut CallChunks>,
    ) -> Result<usize> {
        let xid = rqst.xid();
        let res = rqst.res();
        let total = res.layout().len() as usize;
        let revision = xprt.revision();
        let grant = xprt.credits();
        let no_chunks = CallChunks {
            writes: KVec::new(),
            reply: None,
            payload: None,
            invalidate: None,
        };
        let chunks = ctxt.map_or(&no_chunks, |c| &*c);
        let fail = |why: Refusal, len: usize| {
            let reply = wire::refusal(revision, xid, why);
            if !TOO_LARGE_REPORTED.swap(true, Ordering::Relaxed) {
                pr_info!(
                    "a reply of {} bytes cannot be sent ({:?}; the client receives {} inline): \
                     {} for call {:#x}\n",
                    len,
                    why,
                    xprt.send_limit(),
                    reply.body.name(),
                    xid
                );
            }
            xprt.send_error(&reply);
            Ok(0)
        };
        let Some(mut plan) = chunks::plan_reply(total, chunks) else {
            let needed = chunks.payload.map_or(0, |(_, len)| len);
            return fail(Refusal::WriteResource { needed }, total);
        };
        let rest_len = plan.rest_len();
        // The header as it goes inline: the Write list, no Reply chunk.
        let header_len = reply_header_len(revision, &chunks.writes, None)?;
        let send_limit = xprt.send_limit();
        let mut continued = false;
        if header_len + rest_len > send_limit {
            let reply = chunks.reply.as_deref();
            let nomsg_len = reply_header_len(revision, &chunks.writes, reply)?;
            // The Write chunks were checked: the core chooses between the Reply chunk (which
            // must be used when it holds the reply) and, in Version 2, continuation.
            let holds = chunks::reply_chunk_holds(chunks, rest_len) && nomsg_len <= send_limit;
            let shape = ReplyShape {
                ddp_results: &[],
                write_chunk_capacity: &[],
                reply_chunk_capacity: holds.then_some(rest_len as u64),
                payload_len: rest_len,
                header_len,
                threshold: send_limit,
                max_sends: match revision {
                    Revision::V2Draft01 => MAX_SENT_FRAGMENTS,
                    Revision::V1 => 1,
                },
            };
            match choose_reply_v2(&shape) {
                Ok(PayloadFormat::Special) => plan.reply_chunk = true,
                Ok(PayloadFormat::Continued { .. }) => continued = true,
                Ok(PayloadFormat::Simple) => {}
                Err(_) => {
                    let needed = u32::try_from(rest_len).unwrap_or(u32::MAX);
                    return fail(Refusal::ReplyResource { needed }, total);
                }
            }
        }
        let give_up = || Self::give_up(xprt);
        let qp = match xprt.id.qp() {
            Ok(qp) => qp,
            Err(e) => {
                give_up();
                return Err(e);
            }
        };
        // The Writes and the Send go in one chain.
        let unposted = |tag| xprt.unposted(tag);
        let mut chain = qp.send_chain(&unposted);
        let (written, writes) = match chunks::push(&mut chain, &xprt.rdma, &res, chunks, &plan) {
            Ok(pushed) => pushed,
            Err(e) => {
                pr_info!(
                    "a reply's chunks could not be written ({:?}): closing the connection\n",
                    e
                );
                give_up();
                return Err(e);
            }
        };
        let header = encode_header(
            revision,
            xid,
            grant,
            &written.writes,
            written.reply.as_deref(),
            plan.reply_chunk,
        )?;
        let sent = if continued {
            xprt.send_continued(
                &mut chain,
                &res,
                &plan,
                &header,
                chunks.invalidate,
                xid,
                grant,
            )
        } else {
            xprt.send_in(
                &mut chain,
                &header,
                chunks.invalidate,
                |buffer, mut offset| {
                    if plan.reply_chunk {
                        return Ok(0);
                    }
                    for range in plan.rest.iter().filter(|r| !r.is_empty()) {
                        res.for_each_segment_in(range.clone(), |segment| {
                            buffer.write(offset, segment)?;
                            offset += segment.len();
                            Ok(())
                        })?;
                    }
                    Ok(offset - header.len())
                },
            )
        };
        // The Writes went before the Send on the queue pair (posted, if the Send could not
        // be, here), the invalidations of the MRs they read through after it; their bounce
        // buffers and MRs go back to the pools once they completed.
        let posted = writes.finish(&mut chain);
        match sent.and(posted) {
            Ok(()) => Ok(total),
            Err(e) => {
                pr_info!(
                    "a reply could not be sent ({:?}): closing the connection\n",
                    e
                );
                xprt.deferred_close();
                Err(e)
            }
        }
    }

    fn detach(xprt: &SvcXprt<Self>) {
        if xprt.revision() == Revision::V2Draft01 {
            pr_info!(
                "{}: closing a Version 2 connection: {} continued replies sent, in {} Sends\n",
                Peer(xprt.remote),
                xprt.report.values.continued_replies.load(Ordering::Relaxed),
                xprt.report.values.continued_sends.load(Ordering::Relaxed)
            );
        }
        let invalidating = xprt
            .report
            .values
            .sends_with_invalidate
            .load(Ordering::Relaxed);
        let unmatched = xprt
            .report
            .values
            .unmatched_inv_handles
            .load(Ordering::Relaxed);
        if invalidating != 0 || unmatched != 0 {
            pr_info!(
                "{}: closing: {} replies sent With Invalidate, {} rdma_inv_handle values \
                 matching no segment\n",
                Peer(xprt.remote),
                invalidating,
                unmatched
            );
        }
        xprt.callbacks.close();
        let _ = xprt.id.disconnect();
        let r = &xprt.report.values;
        let calls = r.continued_calls.load(Ordering::Relaxed);
        let fragments = r.continued_fragments.load(Ordering::Relaxed);
        let refused = r.continuations_refused.load(Ordering::Relaxed);
        if fragments != 0 || refused != 0 {
            pr_info!(
                "{}: closed; continued calls received: {} ({} messages), {} broken sequences \
                 refused\n",
                Peer(xprt.remote),
                calls,
                fragments,
                refused
            );
        }
    }
}
