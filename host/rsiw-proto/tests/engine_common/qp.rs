// SPDX-License-Identifier: GPL-2.0

//! An in-memory RNIC behind [`QpContext`], shared by the QP engine tests and
//! the `qp_engine` fuzz target (which includes this file by path, so it uses
//! only `std` and `rsiw_proto`): memory regions, SQ, RQ and CQ, the local
//! operations, and offers of payload to send by reference, each recorded.
//!
//! [`Node`] overrides the provided methods a driver overrides
//! ([`QpContext::peek_send_into`], [`QpContext::tagged_write_pieces`],
//! [`QpContext::sink_write_pieces`]);
//! [`TraitDefaults`] is the same node on the trait's own versions.

#![allow(dead_code)]

use std::borrow::{Borrow, BorrowMut};
use std::collections::VecDeque;
use std::fmt;
use std::ops::{Deref, DerefMut};

use rsiw_proto::proto::crc32c::SoftCrc32c;
use rsiw_proto::proto::pieces::Pieces;
use rsiw_proto::proto::placement::{AccessFlags, Grant, MemoryRegion, StagState, TaggedUse};
use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::terminate::TermError;

/// The protection domain of every QP and region.
pub const PD: u32 = 3;

/// Access rights (`IB_ACCESS_*`).
pub const LOCAL_WRITE: u32 = 1;
pub const REMOTE_WRITE: u32 = 2;
pub const REMOTE_READ: u32 = 4;
pub const REMOTE_ATOMIC: u32 = 8;
pub const ALL: u32 = LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC;

/// A memory region of the mock RNIC; STag index = its position in the table.
#[derive(Debug, Clone)]
pub struct Mr {
    pub stag: u32,
    pub pd: u32,
    pub access: u32,
    pub base: u64,
    /// Tagged offsets count from the region's start rather than from
    /// virtual address 0.
    pub zero_based: bool,
    pub valid: bool,
    /// Changes on every registration and invalidation (`MemoryRegion::epoch`).
    pub epoch: u64,
    pub data: Vec<u8>,
}

/// Which offers to send payload by reference a [`Node`] takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Accept {
    /// None: the engine copies (what a context without the method does).
    #[default]
    Never,
    /// Every one.
    Always,
    /// The first, third, fifth, ... offer.
    EveryOther,
    /// As [`xorshift`] on [`Node::rng`] decides.
    Random,
}

/// Where the payload of an offer lies: [`PayloadSource`], owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Gather {
        sges: Vec<Sge>,
        offset: u32,
        len: u32,
    },
    Tagged {
        stag: u32,
        offset: u64,
        len: u32,
    },
}

impl Source {
    pub fn len(&self) -> u32 {
        match *self {
            Source::Gather { len, .. } | Source::Tagged { len, .. } => len,
        }
    }
}

/// One [`QpContext::send_by_reference`] call a [`Node`] got.
#[derive(Clone, PartialEq, Eq)]
pub struct Offer {
    pub source: Source,
    pub at: usize,
    pub taken: bool,
    /// The bytes taken, read when the offer was made (empty if refused).
    pub payload: Vec<u8>,
}

impl fmt::Debug for Offer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Offer")
            .field("source", &self.source)
            .field("at", &self.at)
            .field("taken", &self.taken)
            .field("payload_len", &self.payload.len())
            .finish()
    }
}

/// A Read work request whose sinks a [`Node`] watches: which of their bytes
/// Read Responses wrote.
#[derive(Debug, Clone)]
pub struct PostedRead {
    pub wr_id: u64,
    pub sinks: Vec<Sge>,
    /// Per sink, per byte: written by a Read Response.
    pub placed: Vec<Vec<bool>>,
    pub completed: bool,
}

impl PostedRead {
    pub fn new(wr_id: u64, sinks: &[Sge]) -> Self {
        Self {
            wr_id,
            sinks: sinks.to_vec(),
            placed: sinks
                .iter()
                .map(|s| vec![false; s.length as usize])
                .collect(),
            completed: false,
        }
    }

    /// Counts the bytes at virtual addresses `va..va + len` of the region
    /// `stag` names as placed, where they lie in a sink.
    pub fn place(&mut self, stag: u32, va: u64, len: usize) {
        for (sink, placed) in self.sinks.iter().zip(&mut self.placed) {
            if sink.lkey != stag {
                continue;
            }
            for (i, byte) in placed.iter_mut().enumerate() {
                let at = sink.addr + i as u64;
                if (va..va + len as u64).contains(&at) {
                    *byte = true;
                }
            }
        }
    }

    pub fn filled(&self) -> bool {
        self.placed.iter().flatten().all(|&b| b)
    }
}

/// One side's RNIC state behind [`QpContext`].
#[derive(Debug, Default)]
pub struct Node {
    pub mrs: Vec<Mr>,
    pub sq: VecDeque<SendRequest>,
    pub rq: VecDeque<RecvRequest>,
    pub cq: Vec<Completion>,
    /// Log of local operations, to check SQ order.
    pub log: Vec<String>,
    /// Which offers of payload by reference to take.
    pub accept: Accept,
    /// State of [`Accept::Random`] (never 0).
    pub rng: u64,
    /// Every offer, taken or not.
    pub offers: Vec<Offer>,
    /// If set, the only gather lists that may be offered: the engine offering
    /// any other one panics.
    pub offerable: Option<Vec<Vec<Sge>>>,
    /// Reads whose sinks are watched, in SQ order: tagged writes count
    /// towards the oldest one not completed (the one whose responses
    /// arrive, as they come in request order), and a Read that completes
    /// successfully with a sink byte no response wrote panics.
    pub reads: Vec<PostedRead>,
}

impl Node {
    /// Adds a region of `len` bytes at virtual address `base` and returns
    /// its STag (index << 8 | key).
    pub fn mr(&mut self, len: usize, base: u64, access: u32) -> u32 {
        let index = u32::try_from(self.mrs.len()).unwrap() + 1;
        let stag = index << 8 | 0x5a;
        while self.mrs.len() < index as usize {
            self.mrs.push(Mr {
                stag: 0,
                pd: 0,
                access: 0,
                base: 0,
                zero_based: false,
                valid: false,
                epoch: 0,
                data: Vec::new(),
            });
        }
        self.mrs.push(Mr {
            stag,
            pd: PD,
            access,
            base,
            zero_based: false,
            valid: true,
            epoch: 0,
            data: vec![0; len],
        });
        stag
    }

    pub fn region(&self, stag: u32) -> &Mr {
        &self.mrs[(stag >> 8) as usize]
    }

    pub fn region_mut(&mut self, stag: u32) -> &mut Mr {
        &mut self.mrs[(stag >> 8) as usize]
    }

    pub fn fill(&mut self, stag: u32, seed: u8) {
        for (i, b) in self.region_mut(stag).data.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(13) ^ seed;
        }
    }

    /// The local region `sge` may use, and the index of its first byte.
    /// The engine never asks for bytes past the end of an SGE.
    fn local(
        &mut self,
        sge: &Sge,
        offset: u32,
        len: usize,
        write: bool,
    ) -> Result<(&mut Mr, usize), WcStatus> {
        assert!(
            u64::from(offset) + len as u64 <= u64::from(sge.length),
            "{len} bytes at {offset} of {sge:?}"
        );
        let mr = self
            .mrs
            .get_mut((sge.lkey >> 8) as usize)
            .filter(|mr| mr.stag == sge.lkey && mr.valid && mr.pd == PD)
            .ok_or(WcStatus::LocProtErr)?;
        if write && mr.access & LOCAL_WRITE == 0 {
            return Err(WcStatus::LocProtErr);
        }
        let start = sge
            .addr
            .checked_sub(mr.base)
            .and_then(|s| s.checked_add(u64::from(offset)))
            .and_then(|s| usize::try_from(s).ok())
            .ok_or(WcStatus::LocProtErr)?;
        match start.checked_add(len) {
            Some(end) if end <= mr.data.len() => Ok((mr, start)),
            _ => Err(WcStatus::LocProtErr),
        }
    }

    /// The bytes `grant` names, re-checked against the region as it is now,
    /// as a driver must check every access; a grant that passes lies inside
    /// the region.
    pub fn granted(&mut self, grant: &Grant) -> Result<&mut [u8], TermError> {
        let region = self.lookup_stag(grant.access.stag);
        let offset = grant.recheck(region.as_ref(), PD)?;
        let len = usize::try_from(grant.access.len).expect("a length inside the region");
        let bytes = self.tagged(grant.access.stag, offset, len);
        Ok(bytes.expect("a grant that passes names bytes of its region"))
    }

    /// `len` bytes at byte `offset` of the region `stag` names, unchecked.
    pub fn tagged(&mut self, stag: u32, offset: u64, len: usize) -> Result<&mut [u8], TermError> {
        let mr = self
            .mrs
            .get_mut((stag >> 8) as usize)
            .ok_or(TermError::DdpInvalidStag)?;
        let start = usize::try_from(offset).map_err(|_| TermError::DdpBaseBounds)?;
        let end = start.checked_add(len).ok_or(TermError::DdpBaseBounds)?;
        mr.data.get_mut(start..end).ok_or(TermError::DdpBaseBounds)
    }

    /// The bytes a driver sends for `source`: a gather list resolved as
    /// `local_read` resolves it, a region by STag and byte offset; `None` if
    /// some of them are not there.
    pub fn resolve(&mut self, source: &Source) -> Option<Vec<u8>> {
        match source {
            Source::Gather { sges, offset, len } => {
                let mut bytes = Vec::new();
                let mut skip = u64::from(*offset);
                let mut left = *len as usize;
                for sge in sges {
                    let sge_len = u64::from(sge.length);
                    if left == 0 {
                        break;
                    }
                    if skip >= sge_len {
                        skip -= sge_len;
                        continue;
                    }
                    let mut piece = vec![0; ((sge_len - skip) as usize).min(left)];
                    self.local_read(sge, skip as u32, &mut piece).ok()?;
                    left -= piece.len();
                    bytes.extend_from_slice(&piece);
                    skip = 0;
                }
                (left == 0).then_some(bytes)
            }
            Source::Tagged { stag, offset, len } => self
                .tagged(*stag, *offset, *len as usize)
                .ok()
                .map(|b| b.to_vec()),
        }
    }

    /// [`Self::resolve`], for sources known to be good.
    pub fn payload(&mut self, source: &Source) -> Vec<u8> {
        self.resolve(source)
            .unwrap_or_else(|| panic!("{source:?} is not in memory"))
    }

    pub fn taken(&self) -> impl Iterator<Item = &Offer> {
        self.offers.iter().filter(|o| o.taken)
    }

    pub fn recv_completions(&self) -> Vec<Completion> {
        self.cq
            .iter()
            .filter(|c| matches!(c.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm))
            .copied()
            .collect()
    }

    /// Counts `len` bytes a tagged write placed at `grant` towards the
    /// oldest watched Read not completed. Only Read Responses write into
    /// the sinks' region where Reads are watched (it grants no remote
    /// write).
    fn note_placed(&mut self, grant: &Grant, len: usize) {
        if let Some(read) = self.reads.iter_mut().find(|r| !r.completed) {
            read.place(grant.access.stag, grant.access.tagged_offset, len);
        }
    }

    /// Whether to take the next offer, as [`Self::accept`] says.
    fn takes_offer(&mut self) -> bool {
        match self.accept {
            Accept::Never => false,
            Accept::Always => true,
            Accept::EveryOther => self.offers.len() & 1 == 0,
            Accept::Random => xorshift(&mut self.rng) & 1 != 0,
        }
    }
}

/// What a driver's room for the SQ head may hold from before: a request
/// the engine must not mistake for the head (it overwrites the room first).
pub const STALE_HEAD: SendRequest = SendRequest {
    wr_id: 0xdead,
    op: SendOp::Read {
        remote_addr: 0x1234,
        rkey: 0x5566,
    },
    sges: SgeList::single(Sge {
        addr: 99,
        length: 7,
        lkey: 0x7788,
    }),
    signaled: true,
    fence: true,
};

impl QpContext for Node {
    type Sge = Sge;

    fn peek_send(&mut self) -> Option<SendRequest> {
        self.sq.front().copied()
    }

    /// As a driver that decodes in place: on an empty queue the room is
    /// left holding something else.
    fn peek_send_into(&mut self, out: &mut SendRequest) -> bool {
        match self.sq.front() {
            Some(wr) => {
                *out = *wr;
                true
            }
            None => {
                *out = STALE_HEAD;
                false
            }
        }
    }

    fn pop_send(&mut self) {
        self.sq.pop_front();
    }

    fn pop_recv(&mut self) -> Option<RecvRequest> {
        self.rq.pop_front()
    }

    fn complete(&mut self, c: Completion) {
        if c.opcode == WcOpcode::RdmaRead {
            if let Some(read) = self.reads.iter_mut().find(|r| r.wr_id == c.wr_id) {
                assert!(
                    c.status != WcStatus::Success || read.filled(),
                    "a Read completed successfully with sink bytes no response placed"
                );
                read.completed = true;
            }
        }
        self.cq.push(c);
    }

    fn local_read(&mut self, sge: &Sge, offset: u32, out: &mut [u8]) -> Result<(), WcStatus> {
        let (mr, start) = self.local(sge, offset, out.len(), false)?;
        out.copy_from_slice(&mr.data[start..start + out.len()]);
        Ok(())
    }

    fn local_write(&mut self, sge: &Sge, offset: u32, data: &[u8]) -> Result<(), WcStatus> {
        let (mr, start) = self.local(sge, offset, data.len(), true)?;
        mr.data[start..start + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn lookup_stag(&mut self, stag: u32) -> Option<MemoryRegion> {
        let mr = self.mrs.get((stag >> 8) as usize)?;
        Some(MemoryRegion {
            stag: mr.stag,
            state: if mr.valid {
                StagState::Valid
            } else {
                StagState::Invalid
            },
            pd: mr.pd,
            access: AccessFlags::from_ib(mr.access),
            base: mr.base,
            len: mr.data.len() as u64,
            zero_based: mr.zero_based,
            epoch: mr.epoch,
        })
    }

    fn tagged_read(&mut self, grant: &Grant, out: &mut [u8]) -> Result<(), TermError> {
        assert_eq!(grant.access.len, out.len() as u64);
        out.copy_from_slice(self.granted(grant)?);
        Ok(())
    }

    fn tagged_write(&mut self, grant: &Grant, data: &[u8]) -> Result<(), TermError> {
        assert_eq!(grant.access.len, data.len() as u64);
        self.granted(grant)?.copy_from_slice(data);
        self.note_placed(grant, data.len());
        Ok(())
    }

    fn tagged_write_pieces(&mut self, grant: &Grant, data: Pieces<'_>) -> Result<(), TermError> {
        assert_eq!(grant.access.len, data.len() as u64);
        assert!(data.copy_to(self.granted(grant)?));
        self.note_placed(grant, data.len());
        Ok(())
    }

    /// Checks that the engine names the sink the Read Response lands in: an
    /// entry of the Read being answered (the oldest watched one not
    /// completed, if Reads are watched), holding the whole grant.
    fn sink_write_pieces(
        &mut self,
        sink: &Sge,
        grant: &Grant,
        data: Pieces<'_>,
    ) -> Result<(), TermError> {
        let access = &grant.access;
        assert_eq!(access.usage, TaggedUse::ReadResponse, "{grant:?}");
        assert_eq!(access.stag, sink.lkey, "{grant:?} outside {sink:?}");
        assert!(
            access.tagged_offset >= sink.addr
                && access.tagged_offset + access.len <= sink.addr + u64::from(sink.length),
            "{grant:?} outside {sink:?}"
        );
        if let Some(read) = self.reads.iter().find(|r| !r.completed) {
            assert!(read.sinks.contains(sink), "{sink:?} not a sink of {read:?}");
        }
        self.tagged_write_pieces(grant, data)
    }

    fn tagged_atomic(&mut self, grant: &Grant, op: AtomicOp) -> Result<u64, TermError> {
        let word = self.granted(grant)?;
        let old = u64::from_ne_bytes(word.try_into().expect("8 bytes"));
        word.copy_from_slice(&op.apply(old).to_ne_bytes());
        Ok(old)
    }

    fn invalidate_remote(&mut self, stag: u32) -> Result<(), TermError> {
        match self.mrs.get_mut((stag >> 8) as usize) {
            Some(mr) if mr.stag == stag && mr.pd == PD && mr.valid => {
                mr.valid = false;
                mr.epoch = mr.epoch.wrapping_add(1);
                self.log.push(format!("remote-inv {stag:#x}"));
                Ok(())
            }
            _ => Err(TermError::RdmapProtectionCannotInvalidate),
        }
    }

    fn invalidate_local(&mut self, stag: u32) -> Result<(), WcStatus> {
        match self.mrs.get_mut((stag >> 8) as usize) {
            Some(mr) if mr.stag == stag && mr.valid => {
                mr.valid = false;
                mr.epoch = mr.epoch.wrapping_add(1);
                self.log.push(format!("local-inv {stag:#x}"));
                Ok(())
            }
            _ => Err(WcStatus::LocProtErr),
        }
    }

    fn register(
        &mut self,
        stag: u32,
        access: u32,
        _iova: u64,
        _length: u64,
    ) -> Result<(), WcStatus> {
        match self.mrs.get_mut((stag >> 8) as usize) {
            Some(mr) if mr.pd == PD => {
                mr.stag = stag;
                mr.access = access;
                mr.valid = true;
                mr.epoch = mr.epoch.wrapping_add(1);
                self.log.push(format!("reg {stag:#x}"));
                Ok(())
            }
            _ => Err(WcStatus::LocProtErr),
        }
    }

    fn send_by_reference(&mut self, source: PayloadSource<'_>, at: usize) -> bool {
        if let (Some(offerable), PayloadSource::Gather { sges, .. }) = (&self.offerable, &source) {
            assert!(
                offerable.iter().any(|list| list == sges),
                "offered a signalled or small work request"
            );
        }
        let take = self.takes_offer();
        let source = match source {
            PayloadSource::Gather { sges, offset, len } => {
                let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
                assert!(
                    u64::from(offset) + u64::from(len) <= total,
                    "outside the SGEs"
                );
                Source::Gather {
                    sges: sges.to_vec(),
                    offset,
                    len,
                }
            }
            PayloadSource::Tagged(grant) => {
                let stag = grant.access.stag;
                let region = self.lookup_stag(stag);
                let Ok(offset) = grant.recheck(region.as_ref(), PD) else {
                    // Refused: the engine's copy finds and reports the error.
                    self.offers.push(Offer {
                        source: Source::Tagged {
                            stag,
                            offset: u64::MAX,
                            len: 0,
                        },
                        at,
                        taken: false,
                        payload: Vec::new(),
                    });
                    return false;
                };
                let len = u32::try_from(grant.access.len).unwrap();
                Source::Tagged { stag, offset, len }
            }
        };
        // A driver must check the pages exist before it takes them; if not,
        // the engine's copy finds the error.
        let payload = if take { self.resolve(&source) } else { None };
        let taken = payload.is_some();
        self.offers.push(Offer {
            source,
            at,
            taken,
            payload: payload.unwrap_or_default(),
        });
        taken
    }
}

/// A [`Node`] as a context that implements only what [`QpContext`]
/// requires (and [`QpContext::send_by_reference`]): the engine goes through
/// the trait's own `peek_send_into`, `pop_recv_into` and
/// `tagged_write_pieces`.
#[derive(Debug, Default)]
pub struct TraitDefaults(pub Node);

impl Deref for TraitDefaults {
    type Target = Node;

    fn deref(&self) -> &Node {
        &self.0
    }
}

impl DerefMut for TraitDefaults {
    fn deref_mut(&mut self) -> &mut Node {
        &mut self.0
    }
}

impl Borrow<Node> for TraitDefaults {
    fn borrow(&self) -> &Node {
        &self.0
    }
}

impl BorrowMut<Node> for TraitDefaults {
    fn borrow_mut(&mut self) -> &mut Node {
        &mut self.0
    }
}

impl QpContext for TraitDefaults {
    type Sge = Sge;

    fn peek_send(&mut self) -> Option<SendRequest> {
        self.0.peek_send()
    }

    fn pop_send(&mut self) {
        self.0.pop_send();
    }

    fn pop_recv(&mut self) -> Option<RecvRequest> {
        self.0.pop_recv()
    }

    fn complete(&mut self, c: Completion) {
        self.0.complete(c);
    }

    fn local_read(&mut self, sge: &Sge, offset: u32, out: &mut [u8]) -> Result<(), WcStatus> {
        self.0.local_read(sge, offset, out)
    }

    fn local_write(&mut self, sge: &Sge, offset: u32, data: &[u8]) -> Result<(), WcStatus> {
        self.0.local_write(sge, offset, data)
    }

    fn lookup_stag(&mut self, stag: u32) -> Option<MemoryRegion> {
        self.0.lookup_stag(stag)
    }

    fn tagged_read(&mut self, grant: &Grant, out: &mut [u8]) -> Result<(), TermError> {
        self.0.tagged_read(grant, out)
    }

    fn tagged_write(&mut self, grant: &Grant, data: &[u8]) -> Result<(), TermError> {
        self.0.tagged_write(grant, data)
    }

    fn tagged_atomic(&mut self, grant: &Grant, op: AtomicOp) -> Result<u64, TermError> {
        self.0.tagged_atomic(grant, op)
    }

    fn invalidate_remote(&mut self, stag: u32) -> Result<(), TermError> {
        self.0.invalidate_remote(stag)
    }

    fn invalidate_local(&mut self, stag: u32) -> Result<(), WcStatus> {
        self.0.invalidate_local(stag)
    }

    fn register(&mut self, stag: u32, access: u32, iova: u64, length: u64) -> Result<(), WcStatus> {
        self.0.register(stag, access, iova, length)
    }

    fn send_by_reference(&mut self, source: PayloadSource<'_>, at: usize) -> bool {
        self.0.send_by_reference(source, at)
    }
}

/// One [`QpEngine::transmit_by_reference`] call into `out`, with `sq_head`
/// as the room for the SQ head, checked: what it reports, and the wire bytes
/// a driver sends (the buffer with the payload of every offer taken inserted
/// at its place).
pub fn checked_transmit_by_reference<S: SlotStorage, X: QpContext<Sge = Sge> + BorrowMut<Node>>(
    engine: &mut QpEngine<SoftCrc32c, S>,
    ctx: &mut X,
    out: &mut [u8],
    sq_head: &mut SendRequest,
    budget: usize,
) -> (Transmitted, Vec<u8>) {
    let first = <X as Borrow<Node>>::borrow(ctx).offers.len();
    let out_len = out.len();
    let t = engine.transmit_by_reference(ctx, sq_head, out, budget);
    assert!(t.buffered <= out_len, "{t:?} out of {out_len}");
    assert!(t.buffered + t.referenced <= budget, "{t:?} over {budget}");
    let node: &Node = <X as Borrow<Node>>::borrow(ctx);
    let mut wire = Vec::with_capacity(t.buffered + t.referenced);
    let mut pos = 0;
    for offer in node.offers[first..].iter().filter(|o| o.taken) {
        // Each taken payload follows a header of its own.
        assert!(
            offer.at > pos && offer.at <= t.buffered,
            "{offer:?} in {t:?}"
        );
        assert!(offer.source.len() > 0, "{offer:?}");
        wire.extend_from_slice(&out[pos..offer.at]);
        wire.extend_from_slice(&offer.payload);
        pos = offer.at;
    }
    wire.extend_from_slice(&out[pos..t.buffered]);
    assert_eq!(wire.len(), t.buffered + t.referenced, "{t:?}");
    (t, wire)
}

/// xorshift64: the next value of `rng` (which must not be 0).
pub fn xorshift(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

pub fn sge(addr: u64, length: u32, lkey: u32) -> Sge {
    Sge { addr, length, lkey }
}
