// SPDX-License-Identifier: GPL-2.0

//! The engine's context: what [`QpEngine`](crate::proto::qp_engine::QpEngine) reaches of a QP
//! while it runs under the QP's lock. Its queues (a kernel consumer's rings or a process's),
//! its memory (each access checked against the region table when it happens, through the
//! QP's region cache) and its CQs.

use super::*;

/// The region each kind of access used last, so that the next access to it skips the table
/// (its lock and a reference count are shared by every CPU that moves data). Each is on a
/// cache line of its own: sending and receiving run on different CPUs.
#[derive(Default)]
pub(super) struct MrCache {
    /// Local reads: payload sent.
    local_read: OwnLine<Option<Arc<Mr>>>,
    /// Local writes: receive buffers.
    local_write: OwnLine<Option<Arc<Mr>>>,
    /// Tagged reads: Read Responses sent.
    tagged_read: OwnLine<Option<Arc<Mr>>>,
    /// Tagged writes: RDMA Writes and Read Responses placed.
    tagged_write: OwnLine<Option<Arc<Mr>>>,
}

/// A value on a cache line of its own.
#[derive(Default)]
#[repr(align(64))]
struct OwnLine<T>(T);

/// The engine's view of the QP's queues, memory and CQs.
pub(super) struct Ctx<'a> {
    pub(super) queues: &'a mut Queues,
    pub(super) qp: &'a Qp,
    /// The QP is being flushed: a shared receive queue keeps its work requests.
    pub(super) flushing: bool,
    /// Where payload sent by reference goes, while transmitting.
    pub(super) refs: Option<Refs<'a>>,
    /// The QP's lock is held: bottom halves are disabled.
    pub(super) bh: BhDisabled<'a>,
}

impl<'a> Ctx<'a> {
    /// Flushes the queues without an engine (never connected, or posted to in ERROR).
    pub(super) fn flush_queues(&mut self) {
        let flushed = |wr_id, opcode| Completion {
            wr_id,
            status: WcStatus::WrFlushErr,
            opcode,
            byte_len: 0,
            imm: None,
            invalidated: None,
            solicited: false,
        };
        // A process may keep posting: at most one ring's worth each.
        for _ in 0..self.qp.caps.max_send_wr {
            let Some(wr) = self.peek_send() else { break };
            self.pop_send();
            self.complete(flushed(wr.wr_id, wr.op.wc_opcode()));
        }
        for _ in 0..self.qp.caps.max_recv_wr {
            let Some(wr) = self.pop_recv() else { break };
            self.complete(flushed(wr.wr_id, WcOpcode::Recv));
        }
    }

    fn region(&self, stag: u32) -> Option<placement::MemoryRegion> {
        self.qp.mrs.describe(stag, self.qp.pd, PD_NUMBER)
    }

    /// The QP's regions, as this context (holding the QP's lock) reaches them.
    fn mem(&self) -> MemAccess<'a> {
        MemAccess {
            qp: self.qp,
            bh: self.bh,
        }
    }
}

/// What an access to the QP's memory needs besides the region cache it uses: the QP (its
/// regions and PD) and the proof that its lock, a BH lock, is held.
#[derive(Clone, Copy)]
struct MemAccess<'a> {
    qp: &'a Qp,
    bh: BhDisabled<'a>,
}

impl MemAccess<'_> {
    /// Runs `f` over `len` bytes at `offset` within `sge`, checked for a local access (`write`
    /// or read), with the region cache `cache` ([`MrTable::local`]).
    fn local(
        self,
        cache: &mut Option<Arc<Mr>>,
        sge: &QpSge,
        offset: u32,
        len: usize,
        write: bool,
        mut f: impl FnMut(DmaRange<'_>, usize) -> Result,
    ) -> core::result::Result<(), WcStatus> {
        sge.addr()
            .checked_add(u64::from(offset))
            .ok_or(WcStatus::LocLenErr)?;
        let mut at = 0;
        let mut piece = |r: DmaRange<'_>| {
            f(r, at)?;
            at += r.len();
            Ok(())
        };
        self.qp
            .mrs
            .local(
                self.bh,
                cache,
                LocalAccess {
                    pd: self.qp.pd,
                    sge,
                    offset: u64::from(offset),
                    len: len as u64,
                    write,
                },
                &mut piece,
            )
            .map_err(|e| match e {
                LocalError::Protection => WcStatus::LocProtErr,
                LocalError::Access => WcStatus::LocAccessErr,
            })
    }

    /// Runs `f` over the memory `grant` names once it passed its re-check ([`MrTable::tagged`]);
    /// `cache` is the region this kind of access used last, `sink` the local entry a Read
    /// Response lands in.
    fn tagged(
        self,
        cache: &mut Option<Arc<Mr>>,
        grant: &Grant,
        sink: Option<&QpSge>,
        mut f: impl FnMut(DmaRange<'_>, usize) -> Result,
    ) -> core::result::Result<(), TermError> {
        let mut at = 0;
        let mut piece = |r: DmaRange<'_>| {
            f(r, at)?;
            at += r.len();
            Ok(())
        };
        self.qp
            .mrs
            .tagged(self.bh, cache, self.qp.pd, grant, sink, &mut piece)
    }
}

impl Ctx<'_> {
    /// How many of a process's entries one take may look at: a ring's worth (`ring`) when
    /// flushing (malformed ones complete with their error on the way), one otherwise.
    fn user_entries(&self, ring: u32) -> u32 {
        if self.flushing {
            ring
        } else {
            1
        }
    }
}

impl QpContext for Ctx<'_> {
    type Sge = QpSge;

    fn peek_send(&mut self) -> Option<SendRequest<QpSge>> {
        let mut wr = SendRequest::EMPTY;
        self.peek_send_into(&mut wr).then_some(wr)
    }

    #[inline]
    fn peek_send_into(&mut self, out: &mut SendRequest<QpSge>) -> bool {
        let limit = self.user_entries(self.qp.caps.max_send_wr);
        match &mut self.queues.work {
            WorkQueues::Kernel { sq, .. } => sq.peek().map(|wr| *out = *wr).is_some(),
            // Decoded straight into the engine's room: no copy of the request.
            WorkQueues::User(u) => self.qp.take_user(limit, || u.peek_send(out)),
            WorkQueues::Released => false,
        }
    }

    fn pop_send(&mut self) {
        match &mut self.queues.work {
            WorkQueues::Kernel { sq, .. } => {
                sq.pop();
            }
            WorkQueues::User(u) => u.pop_send(),
            WorkQueues::Released => {}
        }
    }

    fn pop_recv(&mut self) -> Option<RecvRequest<QpSge>> {
        let mut wr = RecvRequest::<QpSge>::EMPTY;
        self.pop_recv_into(&mut wr).then_some(wr)
    }

    #[inline]
    fn pop_recv_into(&mut self, out: &mut RecvRequest<QpSge>) -> bool {
        if let Some(srq) = &self.qp.srq {
            if self.flushing {
                return false;
            }
            return match srq.take() {
                Ok(Some(wr)) => {
                    *out = wr;
                    true
                }
                Ok(None) => false,
                Err(bad) => {
                    self.qp.bad_user_entry(&bad);
                    false
                }
            };
        }
        let limit = self.user_entries(self.qp.caps.max_recv_wr);
        match &mut self.queues.work {
            WorkQueues::Kernel { rq, .. } => rq.pop().map(|wr| *out = wr).is_some(),
            // Decoded straight into `out`: no copy of the request.
            WorkQueues::User(u) => self.qp.take_user(limit, || u.pop_recv(out)),
            WorkQueues::Released => false,
        }
    }

    fn complete(&mut self, c: Completion) {
        self.qp.complete_in_bh(self.bh, &c);
    }

    #[inline]
    fn local_read(
        &mut self,
        sge: &QpSge,
        offset: u32,
        out: &mut [u8],
    ) -> core::result::Result<(), WcStatus> {
        if let WorkQueues::User(u) = &self.queues.work {
            if sge.lkey() == INLINE_LKEY {
                let data = u
                    .inline_data(sge, offset, out.len())
                    .ok_or(WcStatus::LocLenErr)?;
                out.copy_from_slice(data);
                return Ok(());
            }
        }
        let len = out.len();
        let mem = self.mem();
        let cache = &mut self.queues.mr_cache.local_read.0;
        mem.local(cache, sge, offset, len, false, |r, at| {
            let dst = out.get_mut(at..at + r.len()).ok_or(EINVAL)?;
            r.read(0, dst)
        })
    }

    #[inline]
    fn local_write(
        &mut self,
        sge: &QpSge,
        offset: u32,
        data: &[u8],
    ) -> core::result::Result<(), WcStatus> {
        let mem = self.mem();
        let cache = &mut self.queues.mr_cache.local_write.0;
        mem.local(cache, sge, offset, data.len(), true, |r, at| {
            r.write(0, data.get(at..at + r.len()).ok_or(EINVAL)?)
        })
    }

    fn lookup_stag(&mut self, stag: u32) -> Option<placement::MemoryRegion> {
        self.region(stag)
    }

    fn tagged_read(
        &mut self,
        grant: &Grant,
        out: &mut [u8],
    ) -> core::result::Result<(), TermError> {
        if grant.access.len != out.len() as u64 {
            return Err(TermError::RdmapLocalCatastrophic);
        }
        let mem = self.mem();
        let cache = &mut self.queues.mr_cache.tagged_read.0;
        mem.tagged(cache, grant, None, |r, at| {
            r.read(0, out.get_mut(at..at + r.len()).ok_or(EINVAL)?)
        })
    }

    fn tagged_write(&mut self, grant: &Grant, data: &[u8]) -> core::result::Result<(), TermError> {
        let data = [data];
        self.tagged_write_pieces(grant, Pieces::one(&data))
    }

    fn tagged_write_pieces(
        &mut self,
        grant: &Grant,
        data: Pieces<'_>,
    ) -> core::result::Result<(), TermError> {
        self.place_pieces(grant, None, data)
    }

    fn sink_write_pieces(
        &mut self,
        sink: &QpSge,
        grant: &Grant,
        data: Pieces<'_>,
    ) -> core::result::Result<(), TermError> {
        self.place_pieces(grant, Some(sink), data)
    }

    fn tagged_atomic(
        &mut self,
        grant: &Grant,
        op: AtomicOp,
    ) -> core::result::Result<u64, TermError> {
        // Atomic with respect to every other atomic of the device (IB_ATOMIC_HCA), and one
        // access: the word is read and written under one check of the region. An aligned
        // 8-byte word lies in one page, so in one range.
        let mem = self.mem();
        let cache = &mut self.queues.mr_cache.tagged_write.0;
        let mut old = None;
        self.qp.mrs.with_atomics_serialised(|| {
            mem.tagged(cache, grant, None, |r, _| {
                let mut word = [0u8; 8];
                r.read(0, &mut word)?;
                let value = u64::from_ne_bytes(word);
                r.write(0, &op.apply(value).to_ne_bytes())?;
                old = Some(value);
                Ok(())
            })
        })?;
        old.ok_or(TermError::RdmapLocalCatastrophic)
    }

    fn invalidate_remote(&mut self, stag: u32) -> core::result::Result<(), TermError> {
        self.qp
            .mrs
            .invalidate(self.qp.pd, stag)
            .map_err(|_| TermError::RdmapOperationCannotInvalidate)
    }

    fn invalidate_local(&mut self, stag: u32) -> core::result::Result<(), WcStatus> {
        self.qp
            .mrs
            .invalidate(self.qp.pd, stag)
            .map_err(|_| WcStatus::LocProtErr)
    }

    fn register(
        &mut self,
        stag: u32,
        access: u32,
        iova: u64,
        length: u64,
    ) -> core::result::Result<(), WcStatus> {
        self.qp
            .mrs
            .register(self.qp.pd, stag, access, iova, length)
            .map_err(|_| WcStatus::LocProtErr)
    }

    fn send_by_reference(&mut self, source: PayloadSource<'_, QpSge>, at: usize) -> bool {
        let Some(mut refs) = self.refs.take() else {
            return false;
        };
        // The cache goes out for the walk, as `self` is borrowed for it.
        let mut cache = self.queues.mr_cache.tagged_read.0.take();
        let this = &*self;
        let taken = refs.take(at, |push| {
            // A range that cannot be spliced, or fails a check, aborts the walk: the engine
            // then copies it, and finds and reports any error on the way.
            let mut pieces = |r: DmaRange<'_>, _: usize| match r.page_pieces(push)? {
                true => Ok(()),
                false => Err(EAGAIN),
            };
            match source {
                PayloadSource::Gather { sges, offset, len } => {
                    this.gather_pieces(sges, offset, len, &mut pieces)
                }
                PayloadSource::Tagged(grant) => {
                    let tagged = this.mem().tagged(&mut cache, &grant, None, &mut pieces);
                    Ok(tagged.is_ok())
                }
            }
        });
        self.queues.mr_cache.tagged_read.0 = cache;
        self.refs = Some(refs);
        taken
    }
}

impl Ctx<'_> {
    /// Places `data` where `grant` names (within `sink`, for a Read Response).
    fn place_pieces(
        &mut self,
        grant: &Grant,
        sink: Option<&QpSge>,
        data: Pieces<'_>,
    ) -> core::result::Result<(), TermError> {
        if grant.access.len != data.len() as u64 {
            return Err(TermError::DdpLocalCatastrophic);
        }
        // The region is looked up, locked and checked once for the whole run; each of its
        // pages then takes the pieces that land in it.
        let mem = self.mem();
        let cache = &mut self.queues.mr_cache.tagged_write.0;
        let mut rest = data;
        mem.tagged(cache, grant, sink, |r, _| {
            let (here, after) = rest.split_at(r.len());
            rest = after;
            here.try_for_each_at(|at, piece| r.write(at, piece))
        })
    }

    /// Walks bytes `offset..offset + len` of the gather list `sges` (checked as a local read
    /// would be); `Ok(false)` if they are not all there or some check fails.
    fn gather_pieces(
        &self,
        sges: &[QpSge],
        offset: u32,
        len: u32,
        mut f: impl FnMut(DmaRange<'_>, usize) -> Result,
    ) -> Result<bool> {
        let mut skip = offset;
        let mut left = len;
        for sge in sges {
            if left == 0 {
                break;
            }
            if skip >= sge.length() {
                skip -= sge.length();
                continue;
            }
            if sge.lkey() == INLINE_LKEY && matches!(self.queues.work, WorkQueues::User(_)) {
                return Ok(false);
            }
            let n = core::cmp::min(sge.length() - skip, left);
            // Payload sent by reference is large: its lookup is not worth caching.
            if self
                .mem()
                .local(&mut None, sge, skip, n as usize, false, &mut f)
                .is_err()
            {
                return Ok(false);
            }
            skip = 0;
            left -= n;
        }
        Ok(left == 0)
    }
}
