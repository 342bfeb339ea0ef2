// SPDX-License-Identifier: GPL-2.0

//! One connection of a client transport: the rdma_cm id with its queue pair, the buffers the
//! device sends from and receives into, and what the server said about its own buffers.
//!
//! Buffers belong to the endpoint, not to calls: [`INLINE_SIZE`] bytes each, mapped once.
//! A call is copied into a free send buffer, which its Send completion frees again; a
//! received message is copied out of its receive buffer by the [`Receiver`], and the buffer is
//! posted again before the next call is sent (so a server's replies always find one: every
//! call in flight had one posted before it went out).
//!
//! A new connection is a new endpoint: nothing of an old one, its buffers included, is used
//! again, and its completions are told apart by its generation.
//!
//! On a Version 2 connection a call that does not fit one Send goes over up to
//! [`MAX_SENT_FRAGMENTS`] when it fits them (Message Continuation, draft sections 4.4.2 and
//! 6.3.2; the protocol core's `plan_sends` decides), each from its own send buffer: all but the
//! last carry a header with `RDMA2_F_MORE` and no chunks, the last the call's chunk lists. One
//! such call at a time (see [`ClientTransport::continuation_sends`](super::ClientTransport) for
//! the credits).

use super::{
    registration::{
        Finished, HeldReply, Invalidating, Region, Registrations, MAX_REGIONS, REGION_PAGES,
    },
    ClientTransport, Counters, Receiver, Sending, INLINE_SIZE, MAX_REQUESTS,
};
use crate::devices::Devices;
use crate::proto::{
    call_plan::{
        fragment_ranges, inline_ranges, plan_sends, rely_on_continuation, CallChunks, CallLayout,
        CallPlan, ContinuationRoom, DdpItem, PlanThresholds, ReplyChunks, ReplyContinuation,
        SendPlan,
    },
    chunk::{ChunkListsRef, ReadSegment, Segment},
    cm_private::CmPrivateData,
    continuation::{FragmentPlan, MAX_SENT_FRAGMENTS},
    remote_invalidation::solicited_handle,
    v1::V1_DEFAULT_INLINE,
    v2::EMPTY_MSG_HEADER_LEN,
    wire::{self, BodyRef, Credits, Direction, Outgoing, Revision},
};
use core::{
    net::SocketAddr,
    ops::Range,
    sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
};
use kernel::{
    new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    rdma::{
        consumer::{
            client::ProtectionDomain,
            cm::{CmEvent, CmId, ConnParam},
            device_removal::DeviceUse,
            dma_buffer::DmaBuffer,
            fast_reg::Access,
            kernel_qp::{QpCaps, RemoteInvalidation, SendChain, SendWr, Sge},
            mapped_pages::MappedPages,
        },
        fixed_ring::FixedRing,
    },
    sunrpc::xprt::{Rqst, XdrBuf, XdrPages, XdrPart, Xprt, XDRBUF_READ, XDRBUF_WRITE},
    sync::{Arc, Mutex},
    time::msecs_to_jiffies,
};

mod chunks;
mod messages;
use chunks::Chunks;

/// Whether a call too large to send inline was reported (once per module load).
static TOO_LARGE_REPORTED: AtomicBool = AtomicBool::new(false);

/// Receives kept posted: one per call in flight, two to spare, those for callbacks, and
/// [`MAX_SENT_FRAGMENTS`] - 1 for continued replies. A Version 2 server may send a reply in up
/// to [`MAX_SENT_FRAGMENTS`] Sends (draft section 4.4.2), each taking one of our receives, while
/// its call was granted one. Our server has at most [`MAX_SENT_FRAGMENTS`] Sends of continued
/// replies in flight per connection (a reply waits until those before it that leave it no room
/// completed), so their extra Sends find these receives; a fragment's receive is posted again
/// as soon as it is copied out (see [`Endpoint::repost_now`]). They are posted from the start:
/// the version is settled only later, and Version 1 leaves them unused.
const RECVS: usize =
    MAX_REQUESTS as usize + 2 + super::backchannel::RECEIVES + (MAX_SENT_FRAGMENTS - 1);
/// Send buffers: a call's buffer is free again only once its Send completed, which may be
/// after its reply arrived.
const SENDS: usize = 2 * MAX_REQUESTS as usize;
/// Send queue entries: the Sends, and a registration and an invalidation for each region of
/// each record.
const SEND_QUEUE: usize = SENDS + 2 * super::registration::RECORDS * MAX_REGIONS;
/// Bytes kept for the transport header out of each inline threshold: the largest header this
/// transport sends (four Read segments, a Write chunk of two segments, a Reply chunk of four)
/// or receives (the server echoes the Write list and Reply chunk) is 236 bytes in Version 1,
/// 244 in Version 2 (`rdma_flags` and `rdma_inv_handle` more).
pub(crate) const HEADER_RESERVE: usize = 256;
/// The continued call in flight ([`Endpoint::continued`]) is this bit and its XID.
const CONTINUED: u64 = 1 << 32;

/// What a send queue completion's tag says it was: the Send of send buffer `index`, or a
/// registration or invalidation of record `index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendTag {
    Send(usize),
    Register(usize),
    Invalidate(usize),
}

impl SendTag {
    const KIND_SHIFT: u32 = 32;

    pub(crate) fn encode(self) -> u64 {
        let (kind, index) = match self {
            Self::Send(i) => (0u64, i),
            Self::Register(i) => (1, i),
            Self::Invalidate(i) => (2, i),
        };
        (kind << Self::KIND_SHIFT) | index as u64
    }

    pub(crate) fn decode(tag: u64) -> Option<Self> {
        let index = usize::try_from(tag & u64::from(u32::MAX)).ok()?;
        match tag >> Self::KIND_SHIFT {
            0 => Some(Self::Send(index)),
            1 => Some(Self::Register(index)),
            2 => Some(Self::Invalidate(index)),
            _ => None,
        }
    }
}
/// How long address and route resolution may take, in milliseconds.
const RESOLVE_MS: u32 = 5000;
/// How long the connection may take to be established, in milliseconds.
const ESTABLISH_MS: u32 = 30_000;

/// The buffers of an endpoint, shared with its [`Receiver`].
#[pin_data]
pub(crate) struct Buffers {
    /// The endpoint's generation (see [`ClientTransport`]).
    pub(crate) generation: u32,
    sends: KVec<Arc<DmaBuffer>>,
    pub(crate) recvs: KVec<Arc<DmaBuffer>>,
    /// Indices of send buffers no Send uses.
    #[pin]
    free_sends: Mutex<FixedRing<usize>>,
    /// Indices of receive buffers whose message was taken, to post again.
    #[pin]
    to_repost: Mutex<FixedRing<usize>>,
    /// The memory calls registered for the server.
    #[pin]
    pub(crate) registrations: Registrations,
}

impl Buffers {
    fn new(pd: &Arc<ProtectionDomain>, generation: u32) -> Result<Arc<Self>> {
        let mut sends = KVec::with_capacity(SENDS, GFP_KERNEL)?;
        let mut free = FixedRing::new(SENDS, GFP_KERNEL)?;
        for index in 0..SENDS {
            sends.push(DmaBuffer::new(pd, INLINE_SIZE as usize)?, GFP_KERNEL)?;
            let _ = free.push(index);
        }
        let mut recvs = KVec::with_capacity(RECVS, GFP_KERNEL)?;
        for _ in 0..RECVS {
            recvs.push(DmaBuffer::new(pd, INLINE_SIZE as usize)?, GFP_KERNEL)?;
        }
        let to_repost = FixedRing::new(RECVS, GFP_KERNEL)?;
        let registrations = Registrations::new()?;
        Arc::pin_init(
            try_pin_init!(Self {
                generation,
                sends,
                recvs,
                free_sends <- new_mutex!(free),
                to_repost <- new_mutex!(to_repost),
                registrations <- registrations,
            }? Error),
            GFP_KERNEL,
        )
    }

    /// The Send that used send buffer `index` completed.
    pub(crate) fn send_done(&self, index: usize) {
        if index < self.sends.len() {
            // Cannot be full: each index is in the ring or in use, never both.
            let _ = self.free_sends.lock().push(index);
        }
    }

    /// The message of receive buffer `index` was taken: post the buffer again.
    pub(crate) fn repost_later(&self, index: usize) {
        if index < self.recvs.len() {
            // Cannot be full, as for `send_done`.
            let _ = self.to_repost.lock().push(index);
        }
    }
}

/// A connection to the server; dropping it drains and destroys the queue pair, then the id.
pub(crate) struct Endpoint {
    id: CmId,
    pd: Arc<ProtectionDomain>,
    buffers: Arc<Buffers>,
    /// Pages one region maps: the device's fast-registration limit, at most [`REGION_PAGES`].
    region_pages: u32,
    /// The largest message the server receives inline, at most our inline threshold: in
    /// Version 1 what its RFC 8797 private data says (1024 bytes without it), in Version 2 its
    /// receive buffer size (`RBSIZ`, 4096 bytes by default), once its properties arrived.
    send_limit: AtomicUsize,
    /// The largest message we expect from the server inline, and plan replies around: what we
    /// told the server we receive, in Version 2 at most its send size (`SBSIZ`).
    recv_limit: AtomicUsize,
    /// Bytes one segment of a chunk covers at most: a region's, in Version 2 at most the
    /// server's `RSSIZ` (in whole pages).
    segment_span: AtomicUsize,
    /// Segments one call offers at most: [`MAX_REGIONS`], in Version 2 at most the server's
    /// `RCSIZ` (0 when the server takes no segment we can make: then no call has chunks).
    segment_count: AtomicUsize,
    /// The call sent over several Sends that has not had its reply nor been released:
    /// [`CONTINUED`] and its XID, or 0. Never more than one.
    continued: AtomicU64,
    receiver: Arc<Receiver>,
    /// The endpoint's use of its device, which the device's removal waits for: dropped last,
    /// once everything above let go of the device.
    _device_use: DeviceUse,
}

/// Waits for the next event of `id`, which must be `wanted` (a resolution step).
fn expect_event(id: &CmId, wanted: &str) -> Result {
    let event = id.next_event(msecs_to_jiffies(RESOLVE_MS))?;
    if event.name() == wanted {
        return Ok(());
    }
    pr_info!("connecting: {} instead of {}\n", event.name(), wanted);
    Err(match event {
        CmEvent::AddrError(_) | CmEvent::RouteError(_) => EHOSTUNREACH,
        _ => ECONNABORTED,
    })
}

impl Endpoint {
    /// Connects to `server` in the transport's namespace; the endpoint's completions go to a
    /// [`Receiver`] of generation `generation`.
    pub(crate) fn connect(
        xprt: &Xprt<ClientTransport>,
        server: SocketAddr,
        generation: u32,
    ) -> Result<Arc<Self>> {
        let mut id = CmId::new_in(xprt.net())?;
        id.resolve_addr(None, &server, RESOLVE_MS)?;
        expect_event(&id, "ADDR_RESOLVED")?;
        id.resolve_route(RESOLVE_MS)?;
        expect_event(&id, "ROUTE_RESOLVED")?;
        let device = id.device()?;
        let depth = device.caps().max_qp_rd_atom.min(16) as u8;
        let region_pages = device.caps().max_fast_reg_pages.min(REGION_PAGES);
        if region_pages < 2 {
            return Err(EOPNOTSUPP);
        }
        let pd = device.alloc_pd()?;
        let buffers = Buffers::new(&pd, generation)?;
        let receiver = Receiver::new(xprt.handle(), buffers.clone())?;
        let device_use = DeviceUse::new::<Devices>(&device, receiver.clone())?;
        let caps = QpCaps {
            max_send_wr: (SEND_QUEUE as u32).min(device.caps().max_qp_wr),
            max_recv_wr: RECVS as u32,
        };
        let qp = id.create_qp_with_handler(&pd, caps, receiver.clone())?;
        for (index, buffer) in buffers.recvs.iter().enumerate() {
            qp.post_recv(
                Sge {
                    buffer,
                    offset: 0,
                    len: INLINE_SIZE as usize,
                },
                index as u64,
            )?;
        }
        let threshold = super::inline_threshold();
        // We take Send With Invalidate: a Version 1 server may invalidate a call's region with
        // its reply (RFC 8797); Version 2 names the region per call (`rdma_inv_handle`).
        let private = CmPrivateData::new(threshold, threshold, true).encode();
        id.connect(&ConnParam {
            private_data: &private,
            responder_resources: depth,
            initiator_depth: depth,
            retry_count: 6,
            rnr_retry_count: 0,
        })?;
        let peer = match id.next_event(msecs_to_jiffies(ESTABLISH_MS))? {
            CmEvent::Established(param) => CmPrivateData::decode(&param.private_data),
            CmEvent::Rejected(status, _) => {
                pr_info!("connection to {} rejected ({})\n", server, status);
                return Err(ECONNREFUSED);
            }
            event => {
                pr_info!("connecting to {}: {}\n", server, event.name());
                return Err(ECONNREFUSED);
            }
        };
        // From now on a disconnect or the device going away ends the connection at once.
        id.watch(receiver.clone());
        let server_receives = peer.map_or(V1_DEFAULT_INLINE, |p| p.recv_size);
        let send_limit = server_receives.min(threshold) as usize;
        pr_info!(
            "connected to {} (the server receives {} bytes inline{}, we {})\n",
            server,
            server_receives,
            if peer.is_some() {
                ""
            } else {
                ", no RFC 8797 private data"
            },
            threshold
        );
        Ok(Arc::new(
            Self {
                id,
                pd,
                buffers,
                region_pages,
                send_limit: AtomicUsize::new(send_limit),
                recv_limit: AtomicUsize::new(threshold as usize),
                segment_span: AtomicUsize::new(region_pages as usize * PAGE_SIZE),
                segment_count: AtomicUsize::new(MAX_REGIONS),
                continued: AtomicU64::new(0),
                receiver,
                _device_use: device_use,
            },
            GFP_KERNEL,
        )?)
    }

    /// Whether the endpoint's device is being removed.
    pub(crate) fn is_device_removed(&self) -> bool {
        self.receiver.is_device_removed()
    }

    /// The largest message the server receives inline (and we send).
    pub(crate) fn send_limit(&self) -> usize {
        self.send_limit.load(Ordering::Relaxed)
    }

    /// The largest message we expect inline.
    pub(crate) fn recv_limit(&self) -> usize {
        self.recv_limit.load(Ordering::Relaxed)
    }

    /// Our address on the connection, if known.
    pub(crate) fn local_address(&self) -> Option<SocketAddr> {
        self.id.local_address().ok()
    }

    /// Sets the largest message we send inline and the largest we expect inline: the Version 2
    /// server's properties say what it receives and what it sends.
    pub(crate) fn set_limits(&self, send: usize, recv: usize) {
        self.send_limit.store(send, Ordering::Relaxed);
        self.recv_limit.store(recv, Ordering::Relaxed);
    }

    /// Bytes a region of ours maps at most.
    pub(crate) fn region_bytes(&self) -> usize {
        self.region_pages as usize * PAGE_SIZE
    }

    /// Sets what a segment covers and how many a call offers at most: the Version 2 server's
    /// `RSSIZ` and `RCSIZ` say what it takes.
    pub(crate) fn set_segment_limits(&self, span: usize, count: usize) {
        self.segment_span.store(span, Ordering::Relaxed);
        self.segment_count.store(count, Ordering::Relaxed);
    }

    /// Takes the one continued call's place for call `xid`; `false` if another has it.
    fn take_continued(&self, xid: u32) -> bool {
        self.continued
            .compare_exchange(
                0,
                CONTINUED | u64::from(xid),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Call `xid` got its reply or ends: if it was the continued call in flight, another may
    /// go.
    pub(crate) fn continued_done(&self, xid: u32) {
        let _ = self.continued.compare_exchange(
            CONTINUED | u64::from(xid),
            0,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Asks the server to end the connection; the queue pair flushes what is posted.
    pub(crate) fn disconnect(&self) {
        let _ = self.id.disconnect();
    }

    /// Posts receive buffer `index` again now (a fragment of a continued reply, copied out),
    /// or, if that fails, with the next call.
    pub(crate) fn repost_now(&self, index: usize) {
        let posted = self.id.qp().and_then(|qp| {
            let buffer = self.buffers.recvs.get(index).ok_or(EINVAL)?;
            let sge = Sge {
                buffer,
                offset: 0,
                len: INLINE_SIZE as usize,
            };
            qp.post_recv(sge, index as u64)
        });
        if posted.is_err() {
            self.buffers.repost_later(index);
        }
    }

    /// Posts the receive buffers whose messages were taken.
    fn repost(&self) -> Result {
        let qp = self.id.qp()?;
        loop {
            let Some(index) = self.buffers.to_repost.lock().pop() else {
                return Ok(());
            };
            let buffer = self.buffers.recvs.get(index).ok_or(EINVAL)?;
            let sge = Sge {
                buffer,
                offset: 0,
                len: INLINE_SIZE as usize,
            };
            if let Err(e) = qp.post_recv(sge, index as u64) {
                self.buffers.repost_later(index);
                return Err(e);
            }
        }
    }

    /// Sends the call of `rqst` with the chunks the protocol core plans for it: a header of
    /// the connection's version, then the inline part of the call, as one Send, after the
    /// registrations of its chunks' memory. While the version is unsettled the call is the
    /// probe: at most 1024 bytes go inline.
    ///
    /// `EMSGSIZE` or `EIO` if the call cannot be sent at all, `ENOBUFS` if a send buffer, a
    /// record or an MR is lacking for now, `ENOTCONN` if the queue pair refuses work or the
    /// call was sent on this connection before.
    pub(crate) fn send_call(
        &self,
        xprt: &Xprt<ClientTransport>,
        rqst: &Rqst<'_>,
        counters: &Counters,
    ) -> Result {
        self.with_send_buffer(counters, |buffer, index| {
            self.marshal_and_post(xprt, rqst, buffer, index, counters)
        })
    }

    /// Runs `f` with a free send buffer and its index, after posting the receive buffers
    /// whose messages were taken; the buffer is free again if `f` fails.
    ///
    /// `ENOBUFS` if every send buffer is in use, `ENOTCONN` if the queue pair refuses work.
    fn with_send_buffer(
        &self,
        counters: &Counters,
        f: impl FnOnce(&Arc<DmaBuffer>, usize) -> Result,
    ) -> Result {
        self.repost().map_err(|_| ENOTCONN)?;
        let Some(index) = self.buffers.free_sends.lock().pop() else {
            Counters::add(&counters.no_send_buffer, 1);
            return Err(ENOBUFS);
        };
        let result = self
            .buffers
            .sends
            .get(index)
            .ok_or(EINVAL)
            .and_then(|buffer| f(buffer, index));
        if result.is_err() {
            self.buffers.send_done(index);
        }
        result
    }

    /// The most bytes a message sent as `sending` may have.
    fn send_limit_of(&self, sending: Sending) -> usize {
        sending
            .probe_limit
            .map_or(self.send_limit(), |probe| probe.min(self.send_limit()))
    }

    /// The thresholds the plan applies: what the server receives inline and what we do, less
    /// the header.
    fn thresholds(&self, sending: Sending) -> PlanThresholds {
        PlanThresholds {
            send: self.send_limit_of(sending).saturating_sub(HEADER_RESERVE),
            recv: self
                .recv_limit
                .load(Ordering::Relaxed)
                .saturating_sub(HEADER_RESERVE),
        }
    }

    fn marshal_and_post(
        &self,
        xprt: &Xprt<ClientTransport>,
        rqst: &Rqst<'_>,
        buffer: &Arc<DmaBuffer>,
        index: usize,
        counters: &Counters,
    ) -> Result {
        let sending = xprt.sending();
        let thresholds = self.thresholds(sending);
        // Version 2, the version settled, and no other continued call in flight.
        let room = (sending.revision == Revision::V2Draft01
            && sending.probe_limit.is_none()
            && self.continued.load(Ordering::Acquire) == 0)
            .then(|| ContinuationRoom {
                limit: self.send_limit_of(sending),
                final_header: HEADER_RESERVE,
                max_sends: xprt.continuation_sends(),
            });
        let failed = |_: &Error| Counters::add(&counters.failed_marshal, 1);
        let (layout, mut sends) =
            plan_call(rqst, &thresholds, room.as_ref()).inspect_err(failed)?;
        if sends.fragments.is_some() && !self.take_continued(rqst.xid()) {
            (_, sends) = plan_call(rqst, &thresholds, None).inspect_err(failed)?;
        }
        // A Version 2 server continues a moderately sized reply over several Sends instead.
        if sending.revision == Revision::V2Draft01 && sending.probe_limit.is_none() {
            let continuation = ReplyContinuation {
                threshold: self.recv_limit.load(Ordering::Relaxed),
                final_header_len: EMPTY_MSG_HEADER_LEN,
                max_sends: MAX_SENT_FRAGMENTS,
            };
            sends.plan = rely_on_continuation(&layout, sends.plan, &continuation);
        }
        let call = Call {
            xprt,
            rqst,
            sending,
            layout: &layout,
            plan: &sends.plan,
            fragments: sends.fragments,
        };
        let result = self.register_and_post(&call, buffer, index, counters);
        if result.is_err() && sends.fragments.is_some() {
            self.continued_done(rqst.xid());
        }
        result
    }

    /// Registers the memory behind the chunks of `call` and posts it, its last (or only) Send
    /// from send buffer `index` (`buffer`).
    fn register_and_post(
        &self,
        call: &Call<'_, '_>,
        buffer: &Arc<DmaBuffer>,
        index: usize,
        counters: &Counters,
    ) -> Result {
        let (xprt, rqst, layout, plan) = (call.xprt, call.rqst, call.layout, *call.plan);
        let qp = self.id.qp().map_err(|_| ENOTCONN)?;
        // The registrations and the Send go in one chain. A request of it not posted fails
        // the call, whose send buffer and record are let go here.
        let ignore = |_| {};
        let mut chain = qp.send_chain(&ignore);
        let mut chunks = Chunks::new();
        let record = if plan.call == CallChunks::Inline && plan.reply == ReplyChunks::Inline {
            None
        } else {
            Some(self.register(&mut chain, xprt, rqst, layout, &plan, &mut chunks, counters)?)
        };
        let result = self.post_call(&mut chain, call, buffer, index, &chunks, counters);
        if result.is_err() {
            // The registrations go before their invalidations.
            let _ = chain.post();
            if let Some(record) = record {
                self.abandon(record);
            }
        }
        result.inspect(|()| {
            let c = counters;
            if let Some(fragments) = &call.fragments {
                Counters::add(&c.continued_calls, 1);
                Counters::add(&c.continued_sends, fragments.count());
            }
            match plan.call {
                CallChunks::Inline => {}
                CallChunks::ReadChunk { .. } => Counters::add(&c.read_chunks, 1),
                CallChunks::PositionZero { .. } => {
                    Counters::add(&c.read_chunks, 1);
                    Counters::add(&c.nomsg_calls, 1);
                }
            }
            match plan.reply {
                ReplyChunks::Inline => {}
                ReplyChunks::WriteChunk { .. } => Counters::add(&c.write_chunks, 1),
                ReplyChunks::ReplyChunk { .. } => Counters::add(&c.reply_chunks, 1),
            }
        })
    }

    /// Encodes the header and the inline part of `call` into send buffer `index` and posts
    /// the Send, the last request of `chain`.
    fn post_call(
        &self,
        chain: &mut SendChain<'_>,
        call: &Call<'_, '_>,
        buffer: &Arc<DmaBuffer>,
        index: usize,
        chunks: &Chunks,
        counters: &Counters,
    ) -> Result {
        let (rqst, plan, sending) = (call.rqst, call.plan, call.sending);
        let mut header = [0u8; HEADER_RESERVE];
        let header_len = chunks
            .with_lists(|lists| {
                let outgoing = Outgoing {
                    xid: rqst.xid(),
                    credits: CALL_CREDITS,
                    direction: Direction::Call,
                    body: match plan.call {
                        CallChunks::PositionZero { .. } => BodyRef::NoMsg(lists),
                        _ => BodyRef::Msg(lists),
                    },
                };
                // The reply may invalidate the call's first region (Version 2).
                let inv_handle = solicited_handle(sending.revision, chunks.handles());
                wire::encode_soliciting(sending.revision, &mut header, &outgoing, inv_handle)
            })
            .map_err(|_| EMSGSIZE)?;
        let header = header.get(..header_len).ok_or(EINVAL)?;
        let ranges = inline_ranges(call.layout, plan);
        if let Some(fragments) = &call.fragments {
            // The registrations first, the Sends on their own.
            chain.post().map_err(|_| ENOTCONN)?;
            let last = (buffer, index);
            return self.post_fragments(call, fragments, last, header, &ranges, counters);
        }
        let inline: usize = ranges.iter().map(|r| r.len()).sum();
        let total = header_len + inline;
        let limit = self.send_limit_of(sending);
        if total > limit {
            Counters::add(&counters.failed_marshal, 1);
            if !TOO_LARGE_REPORTED.swap(true, Ordering::Relaxed) {
                pr_warn!(
                    "a call of {} bytes does not fit the server's {} inline\n",
                    total,
                    limit
                );
            }
            return Err(EMSGSIZE);
        }
        let len = fill(buffer, header, &rqst.snd_buf(), &ranges)?;
        Counters::add(&counters.pullup_copy, len - header_len);
        call.xprt.send_as(sending, total, || {
            self.add_buffer(chain, buffer, index, len)?;
            chain.post().map_err(|_| ENOTCONN)
        })
    }

    /// Sends `call` over the Sends of `fragments`, in order: the others from send buffers
    /// taken now, after a header with `RDMA2_F_MORE` and no chunks, then the last from `last`
    /// (a send buffer and its index, which the caller frees if this fails) after the call's
    /// `header`. `ranges` are the call's inline bytes. Nothing is posted if a send buffer is
    /// lacking (`ENOBUFS`); `ENOTCONN` if the queue pair refused a Send after others went out
    /// (the server holds part of the call: the connection goes).
    fn post_fragments(
        &self,
        call: &Call<'_, '_>,
        fragments: &FragmentPlan,
        last: (&Arc<DmaBuffer>, usize),
        header: &[u8],
        ranges: &[Range<usize>; 2],
        counters: &Counters,
    ) -> Result {
        let count = fragments.count();
        let mut taken = [0usize; MAX_SENT_FRAGMENTS];
        let others = taken.get_mut(..count.saturating_sub(1)).ok_or(EMSGSIZE)?;
        if !self.take_sends(others) {
            Counters::add(&counters.no_send_buffer, 1);
            return Err(ENOBUFS);
        }
        let others = &*others;
        let buffer_of = |i: usize| match others.get(i) {
            Some(&index) => self.buffers.sends.get(index).map(|b| (b, index)),
            None => Some(last),
        };
        let written = (|| -> Result<([usize; MAX_SENT_FRAGMENTS], usize)> {
            let outgoing = Outgoing {
                xid: call.rqst.xid(),
                credits: CALL_CREDITS,
                direction: Direction::Call,
                body: BodyRef::Fragment,
            };
            let mut more = [0u8; HEADER_RESERVE];
            let more_len =
                wire::encode(call.sending.revision, &mut more, &outgoing).map_err(|_| EMSGSIZE)?;
            let more = more.get(..more_len).ok_or(EINVAL)?;
            let limit = self.send_limit_of(call.sending);
            let snd = call.rqst.snd_buf();
            let mut lens = [0usize; MAX_SENT_FRAGMENTS];
            let mut copied = 0;
            for (i, fragment) in fragments.fragments().enumerate() {
                let (buffer, _) = buffer_of(i).ok_or(EINVAL)?;
                let head = if fragment.more { more } else { header };
                if head.len() + fragment.len > limit {
                    return Err(EMSGSIZE);
                }
                let len = fill(buffer, head, &snd, &fragment_ranges(ranges, &fragment))?;
                *lens.get_mut(i).ok_or(EINVAL)? = len;
                copied += len - head.len();
            }
            Ok((lens, copied))
        })();
        let mut posted = 0;
        let sent = written.and_then(|(lens, copied)| {
            let total: usize = lens.iter().sum();
            call.xprt.send_as(call.sending, total, || {
                for (i, &len) in lens.iter().take(count).enumerate() {
                    let (buffer, index) = buffer_of(i).ok_or(EINVAL)?;
                    self.post_buffer(buffer, index, len)?;
                    posted = i + 1;
                }
                Ok(())
            })?;
            Ok(copied)
        });
        // The send buffers of Sends not posted are free again (but `last`, the caller's).
        for &index in others.iter().skip(posted) {
            self.buffers.send_done(index);
        }
        match sent {
            Ok(copied) => {
                Counters::add(&counters.pullup_copy, copied);
                Ok(())
            }
            Err(_) if posted > 0 => Err(ENOTCONN),
            Err(e) => Err(e),
        }
    }

    /// Takes a free send buffer into each entry of `out`, all or none: `false` if there are
    /// not as many free.
    fn take_sends(&self, out: &mut [usize]) -> bool {
        let mut free = self.buffers.free_sends.lock();
        if free.len() < out.len() {
            return false;
        }
        for taken in 0..out.len() {
            let Some(index) = free.pop() else {
                // Cannot be (there were enough): those taken go back.
                for &index in out.iter().take(taken) {
                    let _ = free.push(index);
                }
                return false;
            };
            if let Some(slot) = out.get_mut(taken) {
                *slot = index;
            }
        }
        true
    }

    /// Posts the first `len` bytes of send buffer `index` (`buffer`) as one Send.
    fn post_buffer(&self, buffer: &Arc<DmaBuffer>, index: usize, len: usize) -> Result {
        let ignore = |_| {};
        let mut chain = self.id.qp()?.send_chain(&ignore);
        self.add_buffer(&mut chain, buffer, index, len)?;
        chain.post().map_err(|_| ENOTCONN)
    }

    /// Adds the Send of the first `len` bytes of send buffer `index` (`buffer`) to `chain`.
    fn add_buffer(
        &self,
        chain: &mut SendChain<'_>,
        buffer: &Arc<DmaBuffer>,
        index: usize,
        len: usize,
    ) -> Result {
        let send = SendWr::Send {
            local: Sge {
                buffer,
                offset: 0,
                len,
            },
            solicited: false,
        };
        chain
            .add(&send, SendTag::Send(index).encode())
            .map_err(|_| ENOTCONN)
    }

    /// Ends record `record` of a call that will not be sent: its regions are invalidated
    /// (the record goes when that completed); if that cannot be posted, the connection is
    /// broken and goes.
    fn abandon(&self, record: usize) {
        let qp = self.id.qp();
        let posted = self
            .buffers
            .registrations
            .invalidate(record, None, None, |mr| match &qp {
                Ok(qp) => qp.post_send(
                    &SendWr::LocalInv { mr },
                    SendTag::Invalidate(record).encode(),
                ),
                Err(e) => Err(*e),
            });
        if posted.is_err() {
            self.disconnect();
        }
    }

    /// Starts invalidating the regions of record `record`, for the reply `reply` that
    /// arrived, whose Send invalidated the region `remote` names if it was a Send With
    /// Invalidate: `Ok(None)` while `LOCAL_INV`s of the others run (then `reply` is
    /// delivered), the finished record if none was needed. `EPROTO` if `remote` is not a region
    /// of the call; other errors if the connection is broken.
    pub(crate) fn invalidate_for_reply(
        &self,
        record: usize,
        reply: HeldReply,
        remote: Option<&RemoteInvalidation>,
    ) -> Result<Option<Finished>> {
        let qp = self.id.qp()?;
        let invalidating =
            self.buffers
                .registrations
                .invalidate(record, Some(reply), remote, |mr| {
                    qp.post_send(
                        &SendWr::LocalInv { mr },
                        SendTag::Invalidate(record).encode(),
                    )
                })?;
        Ok(match invalidating {
            Invalidating::Posted => None,
            Invalidating::Done(finished) => Some(finished),
        })
    }

    /// The call `xid` ends and its buffers go back: if the server may still reach them, their
    /// regions are invalidated first, and this waits until that completed.
    pub(crate) fn release_call(&self, xid: u32) {
        let regs = &self.buffers.registrations;
        let Some((record, registered)) = regs.lookup(xid) else {
            return;
        };
        if registered.is_some() {
            self.abandon(record);
        }
        regs.wait_gone(xid);
    }

    /// The memory registrations of this endpoint.
    pub(crate) fn registrations(&self) -> &Registrations {
        &self.buffers.registrations
    }

    /// This endpoint's generation.
    pub(crate) fn generation(&self) -> u32 {
        self.buffers.generation
    }
}

/// A call being sent: its request, how it goes out, its layout and chunk plan.
struct Call<'a, 'r> {
    xprt: &'a Xprt<ClientTransport>,
    rqst: &'a Rqst<'r>,
    sending: Sending,
    layout: &'a CallLayout,
    plan: &'a CallPlan,
    /// The Sends of a continued call; `None` for one Send.
    fragments: Option<FragmentPlan>,
}

/// The credit word of our calls: the requests we may have in flight.
const CALL_CREDITS: Credits = Credits {
    granted: MAX_REQUESTS as u16,
    max: MAX_REQUESTS as u16,
};

/// Writes `header` and then the bytes `ranges` of the call `snd` (empty ones skipped) into
/// `buffer`; returns the bytes written.
fn fill(
    buffer: &DmaBuffer,
    header: &[u8],
    snd: &XdrBuf<'_>,
    ranges: &[Range<usize>; 2],
) -> Result<usize> {
    buffer.write(0, header)?;
    let mut offset = header.len();
    for range in ranges.iter().filter(|r| !r.is_empty()) {
        snd.for_each_segment_in(range.clone(), |segment| {
            buffer.write(offset, segment)?;
            offset += segment.len();
            Ok(())
        })?;
    }
    Ok(offset)
}

/// The layout of the call of `rqst` and its chunk plan, over several Sends if `room` allows
/// it and the call needs them. Data items go apart from the message (Read and Write chunks)
/// unless the credential protects the whole message; a layout the plan refuses with them is
/// planned without them.
fn plan_call(
    rqst: &Rqst<'_>,
    thresholds: &PlanThresholds,
    room: Option<&ContinuationRoom>,
) -> Result<(CallLayout, SendPlan)> {
    let snd = rqst.snd_buf().layout();
    let rcv = rqst.rcv_buf();
    let ddp = !rqst.auth_touches_data();
    let item = |flags: u32, flag: u32, head: usize, len: u32| {
        (ddp && flags & flag != 0 && len > 0).then_some(DdpItem {
            position: head,
            len: len as usize,
        })
    };
    let mut layout = CallLayout {
        call_len: snd.len() as usize,
        call_ddp: item(snd.flags(), XDRBUF_WRITE, snd.head_len(), snd.page_len()),
        reply_max: rcv.buflen() as usize,
        reply_ddp: item(rcv.flags(), XDRBUF_READ, rcv.head_len(), rcv.page_len()),
    };
    if let Ok(sends) = plan_sends(&layout, thresholds, room) {
        return Ok((layout, sends));
    }
    layout.call_ddp = None;
    layout.reply_ddp = None;
    plan_sends(&layout, thresholds, room)
        .map(|sends| (layout, sends))
        .map_err(|_| EMSGSIZE)
}
