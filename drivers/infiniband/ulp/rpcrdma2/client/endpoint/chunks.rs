// SPDX-License-Identifier: GPL-2.0

//! The chunks of a call: the memory behind its Read, Write and Reply chunks registered
//! ([`Endpoint::register`]) and their segments in wire order ([`Chunks`]).

use super::*;

/// What a region is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Use {
    /// A Read chunk segment at this XDR position.
    Read(u32),
    /// A segment of the Write chunk.
    Write,
    /// A segment of the Reply chunk.
    Reply,
}

/// The segments of a call's chunks, in wire order.
pub(super) struct Chunks {
    reads: KVec<ReadSegment>,
    write: KVec<Segment>,
    reply: KVec<Segment>,
}

impl Chunks {
    /// No segments; nothing is allocated until one is pushed (most calls go inline).
    pub(super) fn new() -> Self {
        Self {
            reads: KVec::new(),
            write: KVec::new(),
            reply: KVec::new(),
        }
    }

    pub(super) fn push(&mut self, usage: Use, target: Segment) -> Result {
        match usage {
            Use::Read(position) => self
                .reads
                .push(ReadSegment { position, target }, GFP_KERNEL)?,
            Use::Write => self.write.push(target, GFP_KERNEL)?,
            Use::Reply => self.reply.push(target, GFP_KERNEL)?,
        }
        Ok(())
    }

    /// The handles of the segments, in wire order.
    pub(super) fn handles(&self) -> impl Iterator<Item = u32> + '_ {
        let reads = self.reads.iter().map(|s| s.target.handle);
        let writes = Iterator::chain(self.write.iter(), self.reply.iter()).map(|s| s.handle);
        Iterator::chain(reads, writes)
    }

    /// Passes the lists, as the encoder takes them, to `f`.
    pub(super) fn with_lists<R>(&self, f: impl FnOnce(ChunkListsRef<'_>) -> R) -> R {
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

impl Endpoint {
    /// Registers the memory behind the chunks of `plan` and fills `chunks` with their
    /// segments; returns the call's record. The registrations are added to `chain`, which
    /// the call's Send ends; on failure, they are posted before the record is abandoned.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn register(
        &self,
        chain: &mut SendChain<'_>,
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
        // Each part in pieces of at most a segment's span (whole pages, at most a region's):
        // one region, one segment each, no more than the server takes.
        let span = self.segment_span.load(Ordering::Relaxed);
        let count = self.segment_count.load(Ordering::Relaxed).min(MAX_REGIONS);
        let mut pieces: KVec<(usize, usize, usize)> = KVec::with_capacity(count, GFP_KERNEL)?;
        for (part, (pages, _)) in parts.iter().enumerate() {
            let mut from = 0;
            let mut room = span.checked_sub(pages.offset()).ok_or(EMSGSIZE)?;
            while from < pages.len() {
                let len = room.min(pages.len() - from);
                if pieces.len() >= count {
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
        let regions = pieces.iter().zip(mrs).zip(mapped);
        for (registered, ((&(part, _, len), mr), pages)) in regions.enumerate() {
            let Some((_, usage)) = parts.get(part) else {
                break;
            };
            let access = match usage {
                Use::Read(_) => Access::REMOTE_READ,
                Use::Write | Use::Reply => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            };
            // No completion of its own unless it fails: it rides on the call's Send.
            let posted = chain.add_unsignaled(
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
                    // The registrations go before their invalidations.
                    let _ = chain.post();
                    self.abandon(record);
                }
                return Err(ENOTCONN);
            }
            chunks.push(*usage, segment)?;
            counters
                .largest_segment
                .fetch_max(segment.length, Ordering::Relaxed);
            if let Use::Read(_) = usage {
                Counters::add(&counters.rdma_request, len);
            }
        }
        Ok(record)
    }
}
