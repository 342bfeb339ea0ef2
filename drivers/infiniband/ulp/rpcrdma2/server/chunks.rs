// SPDX-License-Identifier: GPL-2.0

//! The chunks of a call and of its reply (RFC 8166, section 3.4): what the server reads from
//! the client's memory and writes into it.
//!
//! **Read chunks.** A client sends a call's bulk data (a WRITE's data, a symlink's target) in a
//! Read chunk at the data item's position in the call, or the whole call in a Position Zero
//! Read chunk (`RDMA_NOMSG`) when it does not fit inline. The server RDMA Reads the chunk
//! straight into the request's pages ([`pull`]): the pages are mapped for the device
//! ([`SvcRqst::map_pages`]) and registered with fast-registration MRs of the connection
//! (remote write access: on iWARP the Read Response is placed through the sink's key), the
//! Reads land in them, and the MRs are invalidated before the call is handed to the service:
//! on iWARP by the last Read into each (RDMA Read with Local Invalidate), so that the thread
//! waits once; elsewhere by `LOCAL_INV`s once the Reads completed.
//! The call is then placed as the C transport places it: for a data item, the inline part
//! up to the chunk's position is the head (in the first page), the chunk's data the page
//! data from the second page on, rounded up to XDR size with zeroes (the client sends no
//! padding, RFC 8166 section 3.4.5), and the rest of the inline part the tail; a whole call
//! starts in the first page. A call has at most one Read chunk: the Linux client never sends
//! more, and anything else earns `ERR_CHUNK`.
//!
//! **Write chunks and the Reply chunk.** A call's Write list and Reply chunk are kept in its
//! context ([`CallChunks`]) until the reply. The service tells which bytes of the reply are
//! its bulk data (`xpo_result_payload`, a READ's data); they go to the first Write chunk, the
//! rest of the reply inline (without the data item's XDR padding, section 3.4.6), or, if it
//! does not fit the client's inline threshold, through the Reply chunk (`RDMA_NOMSG`). Bulk
//! data in the page part of `rq_res` (a READ's file data, often the page cache's pages) is
//! written from where it is: the pages are mapped for the device with a reference held on
//! each ([`MappedPages`]). A few pages or more are registered in an MR of the connection and
//! the Writes read through it, the MR invalidated after the reply's Send; fewer are read a
//! page per Write with the local DMA key, as svcrdma writes a reply's pages. The pages stay
//! the device's until the last Write or the invalidation completed, whatever the service does
//! with them (it lets its references go when the call ends). Anything else (the Reply chunk's bytes, head and tail, which the thread reuses) is copied
//! into the connection's bounce buffers and written from there. The reply's Send goes in one
//! chain with its Writes (the queue pair delivers them first, and the device sends them
//! together), and the thread does not wait for the Writes ([`PendingWrites`]): their last
//! completion puts the bounce buffers and MRs back in the pools, as svcrdma's Send context
//! lets its pages go on completion.
//! Every Write stays within the client's segment; a Write chunk smaller than the data, or a
//! reply that fits neither inline nor the Reply chunk, earns `ERR_CHUNK` (RFC 8166, section
//! 4.5: the Responder cannot send the reply the Requester provided for).

use super::rdma::{OpGuard, Rdma, Returns, BOUNCE_SIZE};
use crate::proto::{
    chunk::{ChunkLists, ReadChunk, ReadList, Segment},
    xdr::roundup,
};
use core::ops::Range;
use kernel::{
    page::PAGE_SIZE,
    prelude::*,
    rdma::consumer::{
        dma_buffer::DmaBuffer,
        fast_reg::{Access, FastRegMr},
        kernel_qp::{KernelQp, PagesSge, RegionSge, Remote, SendChain, SendWr, Sge},
        mapped_pages::MappedPages,
    },
    sunrpc::{
        svc_xprt::SvcRqst,
        xprt::{XdrBuf, XdrPages, XdrPart},
    },
    sync::Arc,
};

/// The most a Read chunk carries: the service's largest payload and a page for the call's
/// own header.
pub(crate) const MAX_READ: usize = super::MAX_PAYLOAD as usize + PAGE_SIZE;

/// What a call's Write list and Reply chunk offer its reply, kept from `recvfrom` to
/// `sendto` (the call's context).
pub(crate) struct CallChunks {
    /// The Write list, one array of segments per chunk.
    pub(crate) writes: KVec<KVec<Segment>>,
    /// The Reply chunk.
    pub(crate) reply: Option<KVec<Segment>>,
    /// The reply's bulk data, from `xpo_result_payload`: offset and length in `rq_res`.
    pub(crate) payload: Option<(u32, u32)>,
    /// The client's region the reply's (last) Send invalidates, a Send With Invalidate
    /// ([`reply_invalidation`](crate::proto::remote_invalidation::reply_invalidation)).
    pub(crate) invalidate: Option<u32>,
}

impl CallChunks {
    /// The context of a call with `lists` whose reply invalidates `invalidate`: `None` if the
    /// call offers no Write list nor Reply chunk, and no region to invalidate.
    pub(crate) fn of(
        lists: &ChunkLists<'_>,
        invalidate: Option<u32>,
    ) -> Result<Option<KBox<Self>>> {
        if lists.writes.is_empty() && lists.reply.is_none() && invalidate.is_none() {
            return Ok(None);
        }
        let mut writes = KVec::with_capacity(lists.writes.chunk_count() as usize, GFP_KERNEL)?;
        for chunk in lists.writes.chunks() {
            writes.push(collect(chunk.segments())?, GFP_KERNEL)?;
        }
        let reply = match &lists.reply {
            Some(chunk) => Some(collect(chunk.segments())?),
            None => None,
        };
        Ok(Some(KBox::new(
            Self {
                writes,
                reply,
                payload: None,
                invalidate,
            },
            GFP_KERNEL,
        )?))
    }
}

fn collect(segments: impl Iterator<Item = Segment>) -> Result<KVec<Segment>> {
    let mut out = KVec::new();
    for segment in segments {
        out.push(segment, GFP_KERNEL)?;
    }
    Ok(out)
}

/// Bytes a chunk offers.
fn capacity(segments: &[Segment]) -> u64 {
    segments.iter().map(|s| u64::from(s.length)).sum()
}

/// What a call's Read list asks of the server.
pub(crate) enum ReadPlan<'a> {
    /// Nothing: the call is inline.
    Inline,
    /// A data item of `len` bytes at byte `position` of the inline part.
    DataItem {
        chunk: ReadChunk<'a>,
        position: usize,
        len: usize,
    },
    /// The whole call, `len` bytes (Position Zero).
    Call { chunk: ReadChunk<'a>, len: usize },
}

/// Why a call's chunks cannot be served.
#[derive(Clone, Copy)]
pub(crate) enum Unserved {
    /// `RDMA_NOMSG` without a Position Zero Read chunk.
    NoMsgWithoutCall,
    /// More than one Read chunk.
    ReadChunks(u32),
    /// An empty Read chunk, or one over [`MAX_READ`].
    ReadLength(u64),
    /// A Read chunk past the inline part, or a Position Zero one beside inline bytes.
    Position(u32),
    /// The request has too few pages for the chunk.
    Pages,
}

impl core::fmt::Display for Unserved {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoMsgWithoutCall => f.write_str("RDMA_NOMSG without a Position Zero Read chunk"),
            Self::ReadChunks(n) => write!(f, "{n} Read chunks"),
            Self::ReadLength(n) => write!(f, "a Read chunk of {n} bytes"),
            Self::Position(p) => write!(f, "a Read chunk at position {p}"),
            Self::Pages => f.write_str("too few pages for the Read chunk"),
        }
    }
}

/// The plan for `reads` of a call whose inline part is `inline_len` bytes (`nomsg`: an
/// `RDMA_NOMSG` call, which has none).
pub(crate) fn plan_reads<'a>(
    reads: &ReadList<'a>,
    inline_len: usize,
    nomsg: bool,
) -> core::result::Result<ReadPlan<'a>, Unserved> {
    if reads.is_empty() {
        return if nomsg {
            Err(Unserved::NoMsgWithoutCall)
        } else {
            Ok(ReadPlan::Inline)
        };
    }
    if reads.chunk_count() != 1 {
        return Err(Unserved::ReadChunks(reads.chunk_count()));
    }
    let chunk = reads.chunks().next().ok_or(Unserved::ReadChunks(0))?;
    let length = chunk.length();
    let len = usize::try_from(length)
        .ok()
        .filter(|&l| l > 0 && l <= MAX_READ)
        .ok_or(Unserved::ReadLength(length))?;
    let position = chunk.position as usize;
    match (position, nomsg) {
        (0, _) if inline_len == 0 => Ok(ReadPlan::Call { chunk, len }),
        (p, false) if p > 0 && p <= inline_len => Ok(ReadPlan::DataItem {
            chunk,
            position: p,
            len,
        }),
        _ => Err(Unserved::Position(chunk.position)),
    }
}

/// RDMA Reads the `len` bytes of `chunk` into the request's pages from page `first` on, and
/// waits for them. `give_up` breaks the connection should the device not complete in time;
/// the pages are then given up by the request (the device may still write them). The MRs
/// are invalidated before this returns successfully.
pub(crate) fn pull(
    qp: &KernelQp,
    rdma: &Rdma,
    rqst: &mut SvcRqst<'_>,
    chunk: &ReadChunk<'_>,
    first: usize,
    len: usize,
    give_up: &dyn Fn(),
) -> Result {
    let region = rdma.region_bytes();
    let pieces = len.div_ceil(region);
    let page_count = len.div_ceil(PAGE_SIZE);
    let mut mrs: KVec<Arc<FastRegMr>> = KVec::with_capacity(pieces, GFP_KERNEL)?;
    let mut op = rdma.begin()?;
    let unposted = |tag| rdma.ops().completed(tag, false);
    let mut chain = qp.send_chain(&unposted);
    let mut reads = Reads {
        chain: &mut chain,
        rdma,
        op: &mut op,
        mrs: &mut mrs,
    };
    let posted = reads.post(rqst, chunk, first, len);
    let posted = posted.and(chain.post());
    drop(chain);
    let read = op.wait(give_up);
    if read == Err(ETIMEDOUT) {
        rqst.give_up_pages(first, page_count);
        return Err(ETIMEDOUT);
    }
    // Whatever happened, no registration of the request's pages may outlive the call: on
    // iWARP each region's last Read ended it, if every Read succeeded.
    let invalidated = if rdma.read_invalidates() && posted.is_ok() && read.is_ok() {
        Ok(())
    } else {
        invalidate(qp, rdma, &mrs, give_up)
    };
    if invalidated.is_err() {
        // The regions may still reach the pages: the request lets them go.
        rqst.give_up_pages(first, page_count);
        return posted.and(read).and(invalidated);
    }
    for mr in mrs {
        rdma.put_mr(mr);
    }
    posted.and(read)
}

/// The Reads of one Read chunk, in one chain of one op, and the MRs they land in.
struct Reads<'a, 'b, 'c> {
    chain: &'a mut SendChain<'c>,
    rdma: &'a Rdma,
    op: &'a mut OpGuard<'b>,
    mrs: &'a mut KVec<Arc<FastRegMr>>,
}

impl Reads<'_, '_, '_> {
    /// Registers the pages for `len` bytes from page `first` of `rqst` (one MR per
    /// `region_bytes`) and posts the Reads of `chunk`'s segments into them, in order; on iWARP
    /// the last Read into each MR ends its registration. `EINVAL` unless the segments hold
    /// exactly `len` bytes.
    fn post(
        &mut self,
        rqst: &SvcRqst<'_>,
        chunk: &ReadChunk<'_>,
        first: usize,
        len: usize,
    ) -> Result {
        let region = self.rdma.region_bytes();
        let mut start = 0;
        while start < len {
            let n = (len - start).min(region);
            let pages = rqst.map_pages(self.rdma.pd(), first + start / PAGE_SIZE, n)?;
            let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
            self.op
                .register(self.chain, self.rdma, &pages, access, self.mrs)?;
            start += n;
        }
        let mut at = 0usize;
        for segment in chunk.segments() {
            let seg_len = segment.target.length as usize;
            let mut done = 0usize;
            while done < seg_len {
                let off = at % region;
                let mr = self.mrs.get(at / region).ok_or(EINVAL)?;
                let n = (seg_len - done).min(region - off).min(len - at);
                if n == 0 {
                    return Err(EINVAL);
                }
                let addr = segment
                    .target
                    .offset
                    .checked_add(done as u64)
                    .ok_or(EINVAL)?;
                // The MR is full, or the chunk ends: no Read lands in it after this one.
                let last = off + n == region || at + n == len;
                self.op.post(
                    self.chain,
                    &SendWr::ReadIntoRegion {
                        local: RegionSge {
                            mr,
                            offset: off,
                            len: n,
                        },
                        remote: Remote {
                            addr,
                            rkey: segment.target.handle,
                        },
                        invalidate: last && self.rdma.read_invalidates(),
                    },
                )?;
                done += n;
                at += n;
            }
        }
        if at == len {
            Ok(())
        } else {
            Err(EINVAL)
        }
    }
}

/// Invalidates `mrs` and waits.
fn invalidate(qp: &KernelQp, rdma: &Rdma, mrs: &[Arc<FastRegMr>], give_up: &dyn Fn()) -> Result {
    if mrs.is_empty() {
        return Ok(());
    }
    let mut op = rdma.begin()?;
    let unposted = |tag| rdma.ops().completed(tag, false);
    let mut chain = qp.send_chain(&unposted);
    let mut posted = Ok(());
    for mr in mrs {
        posted = op.post(&mut chain, &SendWr::LocalInv { mr });
        if posted.is_err() {
            break;
        }
    }
    let posted = posted.and(chain.post());
    drop(chain);
    let waited = op.wait(give_up);
    posted.and(waited)
}

/// How a reply goes back.
pub(crate) struct ReplyPlan {
    /// Bytes of `rq_res` for the first Write chunk.
    pub(crate) payload: Option<Range<usize>>,
    /// The rest of the reply, in order.
    pub(crate) rest: [Range<usize>; 2],
    /// Whether the rest goes through the Reply chunk.
    pub(crate) reply_chunk: bool,
}

impl ReplyPlan {
    /// Bytes of the rest.
    pub(crate) fn rest_len(&self) -> usize {
        self.rest.iter().map(|r| r.len()).sum()
    }

    /// The parts of the reply that bytes `from..from + len` of the rest are (a piece of a
    /// continued reply), in order; empty ones are to be skipped.
    pub(crate) fn rest_piece(&self, from: usize, len: usize) -> [Range<usize>; 2] {
        let mut piece = [0..0, 0..0];
        let (mut skip, mut want) = (from, len);
        for (part, range) in piece.iter_mut().zip(self.rest.iter()) {
            let start = range.start.saturating_add(skip.min(range.len()));
            skip = skip.saturating_sub(range.len());
            let end = start.saturating_add(want).min(range.end);
            want = want.saturating_sub(end - start);
            *part = start..end;
        }
        piece
    }
}

/// Splits a reply of `total` bytes with `chunks`: `None` if its bulk data does not fit the
/// Write chunk. Whether the rest goes inline is decided with the header's length
/// ([`ReplyPlan::reply_chunk`] is false here).
pub(crate) fn plan_reply(total: usize, chunks: &CallChunks) -> Option<ReplyPlan> {
    let payload = match (chunks.writes.first(), chunks.payload) {
        (Some(chunk), Some((offset, len))) if len > 0 => {
            let (offset, len) = (offset as usize, len as usize);
            let end = offset.checked_add(len).filter(|&e| e <= total)?;
            if u64::try_from(len).ok()? > capacity(chunk) {
                return None;
            }
            Some(offset..end)
        }
        _ => None,
    };
    let rest = match &payload {
        Some(p) => {
            // The data item's XDR padding is neither written nor sent inline.
            let after = roundup(p.end - p.start)
                .and_then(|r| r.checked_add(p.start))
                .map_or(total, |e| e.min(total));
            [0..p.start, after..total]
        }
        None => [0..total, total..total],
    };
    Some(ReplyPlan {
        payload,
        rest,
        reply_chunk: false,
    })
}

/// Whether the Reply chunk of `chunks` holds `len` bytes.
pub(crate) fn reply_chunk_holds(chunks: &CallChunks, len: usize) -> bool {
    chunks
        .reply
        .as_ref()
        .is_some_and(|r| u64::try_from(len).is_ok_and(|l| l <= capacity(r)))
}

/// The chunks of a reply as reported in its header: the Write list, and the Reply chunk if
/// used, each segment with the bytes written into it.
pub(crate) struct Written {
    pub(crate) writes: KVec<KVec<Segment>>,
    pub(crate) reply: Option<KVec<Segment>>,
}

/// The RDMA Writes of a reply, added to the chain its Send ends: the queue pair delivers them
/// first. Nobody waits for them ([`PendingWrites::finish`]): their bounce buffers and MRs go
/// back to the pools with their last completion. Dropped unfinished, the op's slot goes with
/// its last completion and neither is reused (the queue pair's slots keep them alive until
/// then).
pub(crate) struct PendingWrites<'a> {
    op: Option<OpGuard<'a>>,
    returns: Returns,
}

impl PendingWrites<'_> {
    /// Ends the chain that holds the Writes (and the reply's Send, added after them): adds the
    /// invalidation of each MR the Writes read through, posts the chain and lets the Writes
    /// complete on their own. Returns what posting the chain returned.
    pub(crate) fn finish(mut self, chain: &mut SendChain<'_>) -> Result {
        let Some(mut op) = self.op.take() else {
            return chain.post();
        };
        let mut added = Ok(());
        for mr in self.returns.mrs.iter() {
            // The queue pair runs them after the Writes before them. One that cannot be
            // added fails the op: its MRs are then not reused.
            added = op.post(chain, &SendWr::LocalInv { mr });
            if added.is_err() {
                break;
            }
        }
        let posted = chain.post();
        op.finish_later(core::mem::take(&mut self.returns));
        added.and(posted)
    }
}

/// RDMA Writes the chunks of `plan` from `res`, added to `chain` (whose `unposted` hands the
/// op's tags to [`super::rdma::Ops::completed`]); returns the segments to report, each with
/// the bytes written into it (the Write list's and the Reply chunk's), and the Writes to
/// finish after the reply's Send was posted. A Write that could not be added fails the push,
/// after the chain was posted.
pub(crate) fn push<'a>(
    chain: &mut SendChain<'_>,
    rdma: &'a Rdma,
    res: &XdrBuf<'_>,
    chunks: &CallChunks,
    plan: &ReplyPlan,
) -> Result<(Written, PendingWrites<'a>)> {
    let mut writes = KVec::with_capacity(chunks.writes.len(), GFP_KERNEL)?;
    for chunk in chunks.writes.iter() {
        let mut unused = KVec::with_capacity(chunk.len(), GFP_KERNEL)?;
        for segment in chunk.iter() {
            unused.push(
                Segment {
                    length: 0,
                    ..*segment
                },
                GFP_KERNEL,
            )?;
        }
        writes.push(unused, GFP_KERNEL)?;
    }
    let mut reply = None;
    let needs_writes = plan.payload.is_some() || plan.reply_chunk;
    if !needs_writes {
        let none = PendingWrites {
            op: None,
            returns: Returns::default(),
        };
        return Ok((Written { writes, reply }, none));
    }
    let mut returns = Returns::default();
    let mut op = rdma.begin()?;
    let posted = (|| -> Result {
        if let (Some(payload), Some(chunk), Some(out)) =
            (&plan.payload, chunks.writes.first(), writes.first_mut())
        {
            let mut pusher = Pusher::new(chain, rdma, &mut op, chunk, out, &mut returns);
            match in_pages(res, payload)? {
                Some((pages, from)) if payload.len() >= IN_PLACE_MIN => {
                    pusher.push_pages(&pages, from, payload.len())?
                }
                Some((pages, from)) => pusher.push_mapped(&pages, from, payload.len())?,
                None => {
                    res.for_each_segment_in(payload.clone(), |bytes| pusher.push(bytes))?;
                    pusher.flush()?;
                }
            }
        }
        if plan.reply_chunk {
            let chunk = chunks.reply.as_ref().ok_or(EINVAL)?;
            let mut out = collect(chunk.iter().map(|s| Segment { length: 0, ..*s }))?;
            let mut pusher = Pusher::new(chain, rdma, &mut op, chunk, &mut out, &mut returns);
            for range in plan.rest.iter().filter(|r| !r.is_empty()) {
                res.for_each_segment_in(range.clone(), |bytes| pusher.push(bytes))?;
            }
            pusher.flush()?;
            reply = Some(out);
        }
        Ok(())
    })();
    let pending = PendingWrites {
        op: Some(op),
        returns,
    };
    if let Err(e) = posted {
        // What was added goes (or is handed back) before the op is let go.
        let _ = pending.finish(chain);
        return Err(e);
    }
    Ok((Written { writes, reply }, pending))
}

/// Bulk data in pages at least this long is written through a registration of its pages
/// ([`Pusher::push_pages`]); shorter data a page at a time with the local DMA key
/// ([`Pusher::push_mapped`]): a registration and its invalidation cost two work requests and
/// their completions, as many as the Writes of a few pages.
const IN_PLACE_MIN: usize = 4 * PAGE_SIZE;

/// The page data of `res` and where `range` starts in it, if `range` lies in it: a READ's
/// data.
fn in_pages<'a>(res: &XdrBuf<'a>, range: &Range<usize>) -> Result<Option<(XdrPages<'a>, usize)>> {
    let layout = res.layout();
    let start = layout.head_len();
    let end = start.saturating_add(layout.page_len() as usize);
    if range.is_empty() || range.start < start || range.end > end {
        return Ok(None);
    }
    Ok(res
        .pages(XdrPart::Pages)?
        .map(|pages| (pages, range.start - start)))
}

/// RDMA Writes bytes into a chunk's segments, in order: from the pages they are in, through
/// an MR registered over them ([`Pusher::push_pages`]) or with the local DMA key
/// ([`Pusher::push_mapped`]), or copied into bounce buffers ([`Pusher::push`]).
struct Pusher<'a, 'b, 'c> {
    chain: &'a mut SendChain<'c>,
    rdma: &'a Rdma,
    op: &'a mut OpGuard<'b>,
    segments: &'a [Segment],
    /// The segments as reported: the bytes written into each.
    written: &'a mut KVec<Segment>,
    /// The segment being filled, and bytes in it.
    segment: usize,
    segment_used: u32,
    /// The bounce buffer being filled, and bytes in it.
    bounce: Option<Arc<DmaBuffer>>,
    fill: usize,
    /// The bounce buffers and MRs used, kept until the op completed.
    returns: &'a mut Returns,
}

/// The local memory of a Write.
#[derive(Clone, Copy)]
enum Source<'a> {
    Bounce(&'a Arc<DmaBuffer>),
    Region(&'a Arc<FastRegMr>),
    /// Mapped pages, from the byte given of their range.
    Pages(&'a Arc<MappedPages>, usize),
}

impl<'a, 'b, 'c> Pusher<'a, 'b, 'c> {
    fn new(
        chain: &'a mut SendChain<'c>,
        rdma: &'a Rdma,
        op: &'a mut OpGuard<'b>,
        segments: &'a [Segment],
        written: &'a mut KVec<Segment>,
        returns: &'a mut Returns,
    ) -> Self {
        Self {
            chain,
            rdma,
            op,
            segments,
            written,
            segment: 0,
            segment_used: 0,
            bounce: None,
            fill: 0,
            returns,
        }
    }

    /// Writes `len` bytes of `pages` from byte `from` where they are: registered in pieces
    /// of at most an MR's reach, each read by the Writes through its MR (which keeps the
    /// pages until its invalidation, added by [`PendingWrites::finish`], completed).
    fn push_pages(&mut self, pages: &XdrPages<'_>, from: usize, len: usize) -> Result {
        let region = self.rdma.region_bytes();
        let mut done = 0;
        while done < len {
            let at = from + done;
            // Pieces after the first start on a page boundary.
            let in_page = (pages.offset() + at) % PAGE_SIZE;
            let n = (len - done).min(region - in_page);
            let mapped = MappedPages::of_xdr(self.rdma.pd(), pages, at, n)?;
            let mr = self.op.register(
                self.chain,
                self.rdma,
                &mapped,
                Access::LOCAL_WRITE,
                &mut self.returns.mrs,
            )?;
            self.write(Source::Region(&mr), n)?;
            done += n;
        }
        Ok(())
    }

    /// Writes `len` bytes of `pages` from byte `from` where they are, mapped for the device
    /// and read with the local DMA key, at most a page's bytes per Write (each keeps the pages
    /// until it completed).
    fn push_mapped(&mut self, pages: &XdrPages<'_>, from: usize, len: usize) -> Result {
        let mapped = MappedPages::of_xdr(self.rdma.pd(), pages, from, len)?;
        let mut done = 0;
        while done < len {
            let in_page = (pages.offset() + from + done) % PAGE_SIZE;
            let n = (len - done).min(PAGE_SIZE - in_page);
            self.write(Source::Pages(&mapped, done), n)?;
            done += n;
        }
        Ok(())
    }

    /// Copies `bytes` in, writing each bounce buffer out as it fills.
    fn push(&mut self, mut bytes: &[u8]) -> Result {
        while !bytes.is_empty() {
            let bounce = match &self.bounce {
                Some(bounce) => bounce.clone(),
                None => {
                    let bounce = self.rdma.take_bounce()?;
                    // Kept until the op completed, whatever happens.
                    self.returns.bounces.push(bounce.clone(), GFP_KERNEL)?;
                    self.bounce = Some(bounce.clone());
                    self.fill = 0;
                    bounce
                }
            };
            let n = bytes.len().min(BOUNCE_SIZE - self.fill);
            let (now, later) = bytes.split_at(n);
            bounce.write(self.fill, now)?;
            self.fill += n;
            bytes = later;
            if self.fill == BOUNCE_SIZE {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Writes what the bounce buffer holds into the segments; `EMSGSIZE` if they are full.
    fn flush(&mut self) -> Result {
        let Some(bounce) = self.bounce.take() else {
            return Ok(());
        };
        self.write(Source::Bounce(&bounce), self.fill)?;
        self.fill = 0;
        Ok(())
    }

    /// Writes the first `len` bytes of `source` into the segments, from where the last Write
    /// ended; `EMSGSIZE` if they are full.
    fn write(&mut self, source: Source<'_>, len: usize) -> Result {
        let mut at = 0;
        while at < len {
            let segment = self.segments.get(self.segment).ok_or(EMSGSIZE)?;
            let room = (segment.length - self.segment_used) as usize;
            if room == 0 {
                self.segment += 1;
                self.segment_used = 0;
                continue;
            }
            let n = room.min(len - at);
            let addr = segment
                .offset
                .checked_add(u64::from(self.segment_used))
                .ok_or(EINVAL)?;
            let remote = Remote {
                addr,
                rkey: segment.handle,
            };
            let wr = match source {
                Source::Bounce(buffer) => SendWr::Write {
                    local: Sge {
                        buffer,
                        offset: at,
                        len: n,
                    },
                    remote,
                },
                Source::Region(mr) => SendWr::WriteFromRegion {
                    local: RegionSge {
                        mr,
                        offset: at,
                        len: n,
                    },
                    remote,
                },
                Source::Pages(pages, base) => SendWr::WriteFromPages {
                    local: PagesSge {
                        pages,
                        offset: base + at,
                        len: n,
                    },
                    remote,
                },
            };
            self.op.post(self.chain, &wr)?;
            // `n <= room`, which fits a `u32`.
            self.segment_used += n as u32;
            if let Some(out) = self.written.get_mut(self.segment) {
                out.length = self.segment_used;
            }
            at += n;
        }
        Ok(())
    }
}
