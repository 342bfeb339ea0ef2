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

use super::{
    registration::{HeldReply, Region, Registrations, MAX_REGIONS, REGION_PAGES},
    ClientTransport, Counters, Receiver, Sending, INLINE_SIZE, MAX_REQUESTS,
};
use crate::devices::Devices;
use crate::proto::{
    call_plan::{
        inline_ranges, plan_v1, rely_on_continuation, CallChunks, CallLayout, CallPlan, DdpItem,
        PlanThresholds, ReplyChunks, ReplyContinuation,
    },
    chunk::{ChunkListsRef, ReadSegment, Segment},
    cm_private::CmPrivateData,
    continuation::MAX_SENT_FRAGMENTS,
    v1::V1_DEFAULT_INLINE,
    v2::EMPTY_MSG_HEADER_LEN,
    wire::{self, BodyRef, Credits, Direction, Outgoing, Revision},
};
use core::{
    net::SocketAddr,
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
            kernel_qp::{QpCaps, SendWr, Sge},
            mapped_pages::MappedPages,
        },
        fixed_ring::FixedRing,
    },
    sunrpc::xprt::{Rqst, XdrBuf, XdrPages, XdrPart, Xprt, XDRBUF_READ, XDRBUF_WRITE},
    sync::{Arc, Mutex},
    time::msecs_to_jiffies,
};

/// Whether a call too large to send inline was reported (once per module load).
static TOO_LARGE_REPORTED: AtomicBool = AtomicBool::new(false);

/// Receives kept posted: one per call in flight, two to spare, those for callbacks, and
/// [`MAX_SENT_FRAGMENTS`] - 1 for a continued reply. A Version 2 server may send a reply in up
/// to [`MAX_SENT_FRAGMENTS`] Sends (draft section 4.4.2), each taking one of our receives, while
/// its call was granted one. Our server sends one continued reply at a time per connection
/// (the next waits until the Sends of the one before completed), so its extra Sends find these
/// receives; a fragment's receive is posted again as soon as it is copied out (see
/// [`Endpoint::repost_now`]). They are posted from the start: the version is settled only
/// later, and Version 1 leaves them unused.
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
/// A resend allowed on the connection ([`Endpoint::allow_resend`]) is this bit and the XID.
const RESEND: u64 = 1 << 32;

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
    /// The call the server refused with `ERR_VERS`, which may be sent again on this
    /// connection: [`RESEND`] and its XID, or 0.
    resend: AtomicU64,
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
        let private = CmPrivateData::new(threshold, threshold, false).encode();
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
                resend: AtomicU64::new(0),
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

    /// Sets the largest message we send inline and the largest we expect inline: the Version 2
    /// server's properties say what it receives and what it sends.
    pub(crate) fn set_limits(&self, send: usize, recv: usize) {
        self.send_limit.store(send, Ordering::Relaxed);
        self.recv_limit.store(recv, Ordering::Relaxed);
    }

    /// Lets call `xid`, which the server refused with `ERR_VERS`, be sent again on this
    /// connection (once).
    pub(crate) fn allow_resend(&self, xid: u32) {
        self.resend
            .store(RESEND | u64::from(xid), Ordering::Release);
    }

    /// Whether call `xid` may be sent again on this connection; it may once.
    pub(crate) fn take_resend(&self, xid: u32) -> bool {
        let allowed = RESEND | u64::from(xid);
        self.resend
            .compare_exchange(allowed, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
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
        let (layout, mut plan) = plan_call(rqst, &self.thresholds(sending)).inspect_err(|_| {
            Counters::add(&counters.failed_marshal, 1);
        })?;
        // A Version 2 server continues a moderately sized reply over several Sends instead.
        if sending.revision == Revision::V2Draft01 && sending.probe_limit.is_none() {
            let continuation = ReplyContinuation {
                threshold: self.recv_limit.load(Ordering::Relaxed),
                final_header_len: EMPTY_MSG_HEADER_LEN,
                max_sends: MAX_SENT_FRAGMENTS,
            };
            plan = rely_on_continuation(&layout, plan, &continuation);
        }
        let mut chunks = Chunks::new()?;
        let record = if plan.call == CallChunks::Inline && plan.reply == ReplyChunks::Inline {
            None
        } else {
            Some(self.register(xprt, rqst, &layout, &plan, &mut chunks, counters)?)
        };
        let call = Call {
            xprt,
            rqst,
            sending,
            layout: &layout,
            plan: &plan,
        };
        let result = self.post_call(&call, buffer, index, &chunks, counters);
        if result.is_err() {
            if let Some(record) = record {
                self.abandon(record);
            }
        }
        result.inspect(|()| {
            let c = counters;
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
    /// the Send.
    fn post_call(
        &self,
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
                    credits: Credits {
                        granted: MAX_REQUESTS as u16,
                        max: MAX_REQUESTS as u16,
                    },
                    direction: Direction::Call,
                    body: match plan.call {
                        CallChunks::PositionZero { .. } => BodyRef::NoMsg(lists),
                        _ => BodyRef::Msg(lists),
                    },
                };
                wire::encode(sending.revision, &mut header, &outgoing)
            })
            .map_err(|_| EMSGSIZE)?;
        let ranges = inline_ranges(call.layout, plan);
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
        buffer.write(0, header.get(..header_len).ok_or(EINVAL)?)?;
        let mut offset = header_len;
        let snd = rqst.snd_buf();
        for range in ranges {
            if range.is_empty() {
                continue;
            }
            snd.for_each_segment_in(range, |segment| {
                buffer.write(offset, segment)?;
                offset += segment.len();
                Ok(())
            })?;
        }
        Counters::add(&counters.pullup_copy, offset - header_len);
        call.xprt
            .send_as(sending, total, || self.post_buffer(buffer, index, offset))
    }

    /// Posts the first `len` bytes of send buffer `index` (`buffer`) as one Send.
    fn post_buffer(&self, buffer: &Arc<DmaBuffer>, index: usize, len: usize) -> Result {
        let send = SendWr::Send {
            local: Sge {
                buffer,
                offset: 0,
                len,
            },
            solicited: false,
        };
        self.id
            .qp()?
            .post_send(&send, SendTag::Send(index).encode())
            .map_err(|_| ENOTCONN)
    }

    /// Registers the memory behind the chunks of `plan` and fills `chunks` with their
    /// segments; returns the call's record.
    fn register(
        &self,
        xprt: &Xprt<ClientTransport>,
        rqst: &Rqst<'_>,
        layout: &CallLayout,
        plan: &CallPlan,
        chunks: &mut Chunks,
        counters: &Counters,
    ) -> Result<usize> {
        let regs = &self.buffers.registrations;
        let call = rqst.snd_buf();
        // The parts of the call's buffers each chunk covers, and their use.
        let mut parts: KVec<(XdrPages<'_>, Use)> = KVec::with_capacity(8, GFP_KERNEL)?;
        match plan.call {
            CallChunks::Inline => {}
            CallChunks::ReadChunk { position, .. } => {
                if let Some(pages) = call.pages(XdrPart::Pages)? {
                    parts.push((pages, Use::Read(position)), GFP_KERNEL)?;
                }
            }
            CallChunks::PositionZero { .. } => {
                for part in [XdrPart::Head, XdrPart::Pages, XdrPart::Tail] {
                    if let Some(pages) = call.pages(part)? {
                        parts.push((pages, Use::Read(0)), GFP_KERNEL)?;
                    }
                }
            }
        }
        match plan.reply {
            ReplyChunks::Inline => {}
            ReplyChunks::WriteChunk { .. } => {
                if let Some(pages) = xprt.reply_pages(rqst, XdrPart::Pages)? {
                    parts.push((pages, Use::Write), GFP_KERNEL)?;
                }
            }
            ReplyChunks::ReplyChunk { .. } => {
                for part in [XdrPart::Head, XdrPart::Pages, XdrPart::Tail] {
                    if let Some(pages) = xprt.reply_pages(rqst, part)? {
                        parts.push((pages, Use::Reply), GFP_KERNEL)?;
                    }
                }
            }
        }
        // Each part in pieces of at most `region_pages` pages: one region, one segment each.
        let span = self.region_pages as usize * PAGE_SIZE;
        let mut pieces: KVec<(usize, usize, usize)> = KVec::with_capacity(MAX_REGIONS, GFP_KERNEL)?;
        for (part, (pages, _)) in parts.iter().enumerate() {
            let mut from = 0;
            let mut room = span - pages.offset();
            while from < pages.len() {
                let len = room.min(pages.len() - from);
                if pieces.len() == MAX_REGIONS {
                    return Err(EMSGSIZE);
                }
                pieces.push((part, from, len), GFP_KERNEL)?;
                from += len;
                room = span;
            }
        }
        if pieces.is_empty() {
            // Cannot be: a planned chunk covers a part that is not empty.
            return Err(EINVAL);
        }
        let record = regs.reserve(rqst.xid(), *layout, *plan).map_err(|e| {
            if e == EEXIST {
                ENOTCONN
            } else {
                e
            }
        })?;
        let mut mrs = KVec::with_capacity(pieces.len(), GFP_KERNEL)?;
        let mapped = (|| -> Result<KVec<Arc<MappedPages>>> {
            let allocated = regs.take_mrs(&self.pd, self.region_pages, pieces.len(), &mut mrs)?;
            Counters::add(&counters.mrs_allocated, allocated);
            let mut mapped = KVec::with_capacity(pieces.len(), GFP_KERNEL)?;
            for &(part, from, len) in pieces.iter() {
                let (pages, _) = parts.get(part).ok_or(EINVAL)?;
                mapped.push(MappedPages::of_xdr(&self.pd, pages, from, len)?, GFP_KERNEL)?;
            }
            Ok(mapped)
        })();
        let mapped = match mapped {
            Ok(mapped) => mapped,
            Err(e) => {
                regs.put_mrs(mrs);
                regs.discard_unregistered(record);
                // Out of MRs or memory for now: the call is sent again later.
                return Err(if e == ENOMEM { ENOBUFS } else { e });
            }
        };
        let qp = self.id.qp()?;
        let regions = pieces.iter().zip(mrs).zip(mapped);
        for (registered, ((&(part, _, len), mr), pages)) in regions.enumerate() {
            let Some((_, usage)) = parts.get(part) else {
                break;
            };
            let access = match usage {
                Use::Read(_) => Access::REMOTE_READ,
                Use::Write | Use::Reply => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            };
            let posted = qp.post_send(
                &SendWr::RegPages {
                    mr: &mr,
                    pages: &pages,
                    access,
                },
                SendTag::Register(record).encode(),
            );
            let segment = Segment {
                handle: mr.rkey(),
                length: u32::try_from(len)?,
                offset: mr.iova(),
            };
            if regs.add_region(record, Region { mr, pages }).is_err() || posted.is_err() {
                if registered == 0 {
                    regs.discard_unregistered(record);
                } else {
                    self.abandon(record);
                }
                return Err(ENOTCONN);
            }
            chunks.push(*usage, segment)?;
            if let Use::Read(_) = usage {
                Counters::add(&counters.rdma_request, len);
            }
        }
        Ok(record)
    }

    /// Ends record `record` of a call that will not be sent: its regions are invalidated
    /// (the record goes when that completed); if that cannot be posted, the connection is
    /// broken and goes.
    fn abandon(&self, record: usize) {
        let qp = self.id.qp();
        let posted = self
            .buffers
            .registrations
            .invalidate(record, None, |mr| match &qp {
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
    /// arrived; `reply` is delivered when that completed. `Err` if the connection is broken.
    pub(crate) fn invalidate_for_reply(&self, record: usize, reply: HeldReply) -> Result {
        let qp = self.id.qp()?;
        self.buffers
            .registrations
            .invalidate(record, Some(reply), |mr| {
                qp.post_send(
                    &SendWr::LocalInv { mr },
                    SendTag::Invalidate(record).encode(),
                )
            })
            .map(|_| ())
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

    /// Sends a message of our own, not a call: `header`, then `body`, inline in one Send (a
    /// reply on the backchannel).
    ///
    /// `EMSGSIZE` if it does not fit the server's inline threshold, `ENOBUFS` if every send
    /// buffer is in use, `ENOTCONN` if the queue pair refuses work.
    pub(crate) fn send_message(
        &self,
        header: &[u8],
        body: &XdrBuf<'_>,
        counters: &Counters,
    ) -> Result {
        if header.len() + body.layout().len() as usize > self.send_limit() {
            Counters::add(&counters.failed_marshal, 1);
            return Err(EMSGSIZE);
        }
        self.with_send_buffer(counters, |buffer, index| {
            buffer.write(0, header)?;
            let mut offset = header.len();
            body.for_each_segment(|segment| {
                buffer.write(offset, segment)?;
                offset += segment.len();
                Ok(())
            })?;
            Counters::add(&counters.pullup_copy, offset - header.len());
            self.post_buffer(buffer, index, offset)
        })
    }

    /// Sends `message`, a transport header that carries no RPC message (`RDMA2_CONNPROP`,
    /// `RDMA2_ERROR`), in one Send.
    ///
    /// `EMSGSIZE` if it does not fit the server's inline threshold, `ENOBUFS` if every send
    /// buffer is in use, `ENOTCONN` if the queue pair refuses work.
    pub(crate) fn send_control(&self, message: &[u8], counters: &Counters) -> Result {
        if message.len() > self.send_limit() {
            return Err(EMSGSIZE);
        }
        self.with_send_buffer(counters, |buffer, index| {
            buffer.write(0, message)?;
            self.post_buffer(buffer, index, message.len())
        })
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
}

/// What a region is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Use {
    /// A Read chunk segment at this XDR position.
    Read(u32),
    /// A segment of the Write chunk.
    Write,
    /// A segment of the Reply chunk.
    Reply,
}

/// The segments of a call's chunks, in wire order.
struct Chunks {
    reads: KVec<ReadSegment>,
    write: KVec<Segment>,
    reply: KVec<Segment>,
}

impl Chunks {
    fn new() -> Result<Self> {
        Ok(Self {
            reads: KVec::with_capacity(MAX_REGIONS, GFP_KERNEL)?,
            write: KVec::with_capacity(MAX_REGIONS, GFP_KERNEL)?,
            reply: KVec::with_capacity(MAX_REGIONS, GFP_KERNEL)?,
        })
    }

    fn push(&mut self, usage: Use, target: Segment) -> Result {
        match usage {
            Use::Read(position) => self
                .reads
                .push(ReadSegment { position, target }, GFP_KERNEL)?,
            Use::Write => self.write.push(target, GFP_KERNEL)?,
            Use::Reply => self.reply.push(target, GFP_KERNEL)?,
        }
        Ok(())
    }

    /// Passes the lists, as the encoder takes them, to `f`.
    fn with_lists<R>(&self, f: impl FnOnce(ChunkListsRef<'_>) -> R) -> R {
        let write_list = [&self.write[..]];
        f(ChunkListsRef {
            reads: &self.reads,
            writes: if self.write.is_empty() {
                &[]
            } else {
                &write_list
            },
            reply: (!self.reply.is_empty()).then_some(&self.reply[..]),
        })
    }
}

/// The layout of the call of `rqst` and its chunk plan. Data items go apart from the message
/// (Read and Write chunks) unless the credential protects the whole message; a layout the
/// plan refuses with them is planned without them.
fn plan_call(rqst: &Rqst<'_>, thresholds: &PlanThresholds) -> Result<(CallLayout, CallPlan)> {
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
    if let Ok(plan) = plan_v1(&layout, thresholds) {
        return Ok((layout, plan));
    }
    layout.call_ddp = None;
    layout.reply_ddp = None;
    plan_v1(&layout, thresholds)
        .map(|plan| (layout, plan))
        .map_err(|_| EMSGSIZE)
}
