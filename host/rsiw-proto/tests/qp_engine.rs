// SPDX-License-Identifier: GPL-2.0

//! The QP engine: two engines wired back to back through byte pipes that
//! deliver in random pieces, each over an in-memory RNIC (memory regions,
//! SQ, RQ, CQ), for every work request kind, the credit and fence waits, the
//! local and remote errors and the flush.

use std::collections::VecDeque;

use proptest::prelude::*;
use rsiw_proto::proto::crc32c::SoftCrc32c;
use rsiw_proto::proto::ddp::DdpHeader;
use rsiw_proto::proto::fpdu::encode_fpdu;
use rsiw_proto::proto::immediate::ImmediateData;
use rsiw_proto::proto::mpa::{RtrKind, RtrKinds};
use rsiw_proto::proto::mpa_handshake::{
    self, InitiatorEvent, InitiatorHandshake, ReceivedRtr, ResponderEvent, ResponderHandshake,
    MAX_FRAME_LEN,
};
use rsiw_proto::proto::mpa_negotiation::{CrcPolicy, InitiatorConfig, QueueDepth, ResponderConfig};
use rsiw_proto::proto::ord_ird::MAX_DEPTH;
use rsiw_proto::proto::pieces::Pieces;
use rsiw_proto::proto::placement::{AccessFlags, Grant, MemoryRegion, StagState};
use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::rdmap::{self, Opcode, OpcodeHeader, ReadRequestHeader, Segment};
use rsiw_proto::proto::terminate::{TermError, TerminateMessage};
use rsiw_proto::proto::tx_engine::{TxEngine, WorkRequest, MAX_FPDU_HEADER_LEN};

const PD: u32 = 3;

const LOCAL_WRITE: u32 = 1;
const REMOTE_WRITE: u32 = 2;
const REMOTE_READ: u32 = 4;
const REMOTE_ATOMIC: u32 = 8;
const ALL: u32 = LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC;

/// A memory region of the mock RNIC; STag index = its position in the table.
#[derive(Debug, Clone)]
struct Mr {
    stag: u32,
    pd: u32,
    access: u32,
    base: u64,
    valid: bool,
    /// Changes on every registration and invalidation (`MemoryRegion::epoch`).
    epoch: u64,
    data: Vec<u8>,
}

/// Which offers to send payload by reference a [`Node`] takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Accept {
    /// None: the engine copies (what a context without the method does).
    #[default]
    Never,
    /// Every one.
    Always,
    /// The first, third, fifth, ... offer.
    EveryOther,
}

/// Where the payload of an offer lies: [`PayloadSource`], owned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
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
    fn len(&self) -> u32 {
        match *self {
            Source::Gather { len, .. } | Source::Tagged { len, .. } => len,
        }
    }
}

/// One [`QpContext::send_by_reference`] call a [`Node`] got.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Offer {
    source: Source,
    at: usize,
    taken: bool,
}

/// One side's RNIC state behind [`QpContext`].
#[derive(Debug, Default)]
struct Node {
    mrs: Vec<Mr>,
    sq: VecDeque<SendRequest>,
    rq: VecDeque<RecvRequest>,
    cq: Vec<Completion>,
    /// Log of local operations, to check SQ order.
    log: Vec<String>,
    /// Which offers of payload by reference to take.
    accept: Accept,
    /// Every offer, taken or not.
    offers: Vec<Offer>,
}

impl Node {
    /// Adds a region of `len` bytes at virtual address `base` and returns
    /// its STag (index << 8 | key).
    fn mr(&mut self, len: usize, base: u64, access: u32) -> u32 {
        let index = u32::try_from(self.mrs.len()).unwrap() + 1;
        let stag = index << 8 | 0x5a;
        while self.mrs.len() < index as usize {
            self.mrs.push(Mr {
                stag: 0,
                pd: 0,
                access: 0,
                base: 0,
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
            valid: true,
            epoch: 0,
            data: vec![0; len],
        });
        stag
    }

    fn region(&self, stag: u32) -> &Mr {
        &self.mrs[(stag >> 8) as usize]
    }

    fn region_mut(&mut self, stag: u32) -> &mut Mr {
        &mut self.mrs[(stag >> 8) as usize]
    }

    fn fill(&mut self, stag: u32, seed: u8) {
        for (i, b) in self.region_mut(stag).data.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(13) ^ seed;
        }
    }

    /// The local region `sge` may use, and the index of its first byte.
    fn local(
        &mut self,
        sge: &Sge,
        offset: u32,
        len: usize,
        write: bool,
    ) -> Result<(&mut Mr, usize), WcStatus> {
        let mr = self
            .mrs
            .get_mut((sge.lkey >> 8) as usize)
            .filter(|mr| mr.stag == sge.lkey && mr.valid && mr.pd == PD)
            .ok_or(WcStatus::LocProtErr)?;
        if write && mr.access & LOCAL_WRITE == 0 {
            return Err(WcStatus::LocProtErr);
        }
        if u64::from(offset) + len as u64 > u64::from(sge.length) {
            return Err(WcStatus::LocLenErr);
        }
        let start = sge.addr.checked_sub(mr.base).ok_or(WcStatus::LocProtErr)? + u64::from(offset);
        if start + len as u64 > mr.data.len() as u64 {
            return Err(WcStatus::LocProtErr);
        }
        Ok((mr, start as usize))
    }

    /// The bytes `grant` names, re-checked against the region as it is now,
    /// as a driver must check every access.
    fn granted(&mut self, grant: &Grant) -> Result<&mut [u8], TermError> {
        let region = self.lookup_stag(grant.access.stag);
        let offset = grant.recheck(region.as_ref(), PD)?;
        let len = usize::try_from(grant.access.len).map_err(|_| TermError::DdpBaseBounds)?;
        self.tagged(grant.access.stag, offset, len)
    }

    fn tagged(&mut self, stag: u32, offset: u64, len: usize) -> Result<&mut [u8], TermError> {
        let mr = self
            .mrs
            .get_mut((stag >> 8) as usize)
            .ok_or(TermError::DdpInvalidStag)?;
        let start = usize::try_from(offset).map_err(|_| TermError::DdpBaseBounds)?;
        mr.data
            .get_mut(start..start + len)
            .ok_or(TermError::DdpBaseBounds)
    }

    /// The bytes a driver sends for `source`: a gather list resolved as
    /// `local_read` resolves it, a region by STag and byte offset; `None` if
    /// some of them are not there.
    fn resolve(&mut self, source: &Source) -> Option<Vec<u8>> {
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
    fn payload(&mut self, source: &Source) -> Vec<u8> {
        self.resolve(source)
            .unwrap_or_else(|| panic!("{source:?} is not in memory"))
    }

    fn taken(&self) -> impl Iterator<Item = &Offer> {
        self.offers.iter().filter(|o| o.taken)
    }

    fn recv_completions(&self) -> Vec<Completion> {
        self.cq
            .iter()
            .filter(|c| matches!(c.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm))
            .copied()
            .collect()
    }
}

/// What a driver's room for the SQ head may hold from before: a request
/// the engine must not mistake for the head (it overwrites the room first).
const STALE_HEAD: SendRequest = SendRequest {
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
            zero_based: false,
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
        Ok(())
    }

    fn tagged_write_pieces(&mut self, grant: &Grant, data: Pieces<'_>) -> Result<(), TermError> {
        assert_eq!(grant.access.len, data.len() as u64);
        assert!(data.copy_to(self.granted(grant)?));
        Ok(())
    }

    fn tagged_atomic(&mut self, grant: &Grant, op: AtomicOp) -> Result<u64, TermError> {
        let word = self.granted(grant)?;
        let old = u64::from_ne_bytes(word.try_into().unwrap());
        word.copy_from_slice(&op.apply(old).to_ne_bytes());
        Ok(old)
    }

    fn invalidate_remote(&mut self, stag: u32) -> Result<(), TermError> {
        match self.mrs.get_mut((stag >> 8) as usize) {
            Some(mr) if mr.stag == stag && mr.pd == PD && mr.valid => {
                mr.valid = false;
                mr.epoch += 1;
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
                mr.epoch += 1;
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
                mr.epoch += 1;
                self.log.push(format!("reg {stag:#x}"));
                Ok(())
            }
            _ => Err(WcStatus::LocProtErr),
        }
    }

    fn send_by_reference(&mut self, source: PayloadSource<'_>, at: usize) -> bool {
        let taken = match self.accept {
            Accept::Never => false,
            Accept::Always => true,
            Accept::EveryOther => self.offers.len() % 2 == 0,
        };
        let source = match source {
            PayloadSource::Gather { sges, offset, len } => Source::Gather {
                sges: sges.to_vec(),
                offset,
                len,
            },
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
                    });
                    return false;
                };
                let len = u32::try_from(grant.access.len).unwrap();
                Source::Tagged { stag, offset, len }
            }
        };
        // A driver must check the pages exist before it takes them; if not,
        // the engine's copy finds the error.
        let taken = taken && self.resolve(&source).is_some();
        self.offers.push(Offer { source, at, taken });
        taken
    }
}

/// One [`QpEngine::transmit_by_reference`] call into a buffer of `out_len`
/// bytes, checked: what it reports, and the wire bytes a driver sends (the
/// buffer with the payload of every offer taken inserted at its place).
fn transmit_by_reference<S: SlotStorage>(
    engine: &mut QpEngine<SoftCrc32c, S>,
    node: &mut Node,
    out_len: usize,
    budget: usize,
) -> (Transmitted, Vec<u8>) {
    let first = node.offers.len();
    let mut out = vec![0u8; out_len];
    let mut sq_head = STALE_HEAD;
    let t = engine.transmit_by_reference(node, &mut sq_head, &mut out, budget);
    assert!(t.buffered <= out_len, "{t:?} out of {out_len}");
    assert!(t.buffered + t.referenced <= budget, "{t:?} over {budget}");
    let taken: Vec<Offer> = node.offers[first..]
        .iter()
        .filter(|o| o.taken)
        .cloned()
        .collect();
    let mut wire = Vec::with_capacity(t.buffered + t.referenced);
    let mut pos = 0;
    for offer in &taken {
        // Each taken payload follows a header of its own.
        assert!(
            offer.at > pos && offer.at <= t.buffered,
            "{offer:?} in {t:?}"
        );
        assert!(offer.source.len() > 0, "{offer:?}");
        wire.extend_from_slice(&out[pos..offer.at]);
        wire.extend_from_slice(&node.payload(&offer.source));
        pos = offer.at;
    }
    wire.extend_from_slice(&out[pos..t.buffered]);
    assert_eq!(wire.len(), t.buffered + t.referenced, "{t:?}");
    (t, wire)
}

type Engine = QpEngine<SoftCrc32c>;

/// Two QPs connected by two byte pipes.
struct Pair<S: SlotStorage = InlineSlots> {
    a: QpEngine<SoftCrc32c, S>,
    b: QpEngine<SoftCrc32c, S>,
    na: Node,
    nb: Node,
    /// Bytes in flight from a to b and from b to a.
    ab: Vec<u8>,
    ba: Vec<u8>,
    rng: u64,
    /// Size of the transmit buffer.
    out_len: usize,
    /// Bytes each side transmitted in total.
    sent: [usize; 2],
    /// Everything each side transmitted, if `record`.
    wire: [Vec<u8>; 2],
    record: bool,
    /// Transmit with [`QpEngine::transmit_by_reference`] instead.
    by_ref: Option<ByRef>,
    /// What each side's `transmit_by_reference` calls reported.
    stats: [TxStats; 2],
}

/// How a [`Pair`] calls [`QpEngine::transmit_by_reference`].
#[derive(Debug, Clone, Copy)]
struct ByRef {
    /// Size of the buffer.
    out_len: usize,
    budget: usize,
}

/// Totals of one side's [`QpEngine::transmit_by_reference`] calls.
#[derive(Debug, Clone, Copy, Default)]
struct TxStats {
    calls: usize,
    buffered: usize,
    referenced: usize,
    /// Calls that were short.
    shorts: usize,
}

#[derive(Debug, Clone, Copy)]
struct Setup {
    crc: bool,
    fpdu_size: usize,
    ord: u16,
    ird: u16,
    seed: u64,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            crc: true,
            fpdu_size: 1024,
            ord: 8,
            ird: 8,
            seed: 1,
        }
    }
}

impl Pair {
    fn new(setup: Setup) -> Self {
        Self::with_slots(setup, InlineSlots::new(), InlineSlots::new())
    }
}

impl<S: SlotStorage> Pair<S> {
    /// Two QPs keeping their per-slot state in `a_slots` and `b_slots`.
    fn with_slots(setup: Setup, a_slots: S, b_slots: S) -> Self {
        let config = EngineConfig {
            crc: setup.crc,
            fpdu_size: setup.fpdu_size,
            pd: PD,
            ird: setup.ird,
            ord: setup.ord,
            rtr: RtrState::None,
        };
        Self::configured(config, config, setup.seed, a_slots, b_slots)
    }

    /// Two QPs of configurations of their own.
    fn configured(a: EngineConfig, b: EngineConfig, seed: u64, a_slots: S, b_slots: S) -> Self {
        Self {
            a: QpEngine::with_slots(a, SoftCrc32c, a_slots),
            b: QpEngine::with_slots(b, SoftCrc32c, b_slots),
            na: Node::default(),
            nb: Node::default(),
            ab: Vec::new(),
            ba: Vec::new(),
            rng: seed | 1,
            out_len: 4096,
            sent: [0; 2],
            wire: [Vec::new(), Vec::new()],
            record: false,
            by_ref: None,
            stats: [TxStats::default(); 2],
        }
    }

    fn rand(&mut self) -> u64 {
        // xorshift64
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// One transmit call of a side (true: a); with `by_ref` one
    /// `transmit_by_reference` call, and a second one into a large buffer if
    /// the first produced nothing for lack of room.
    fn tx(&mut self, from_a: bool) -> usize {
        if let Some(mode) = self.by_ref {
            let (engine, node) = if from_a {
                (&mut self.a, &mut self.na)
            } else {
                (&mut self.b, &mut self.nb)
            };
            let stats = &mut self.stats[usize::from(!from_a)];
            let mut out_len = mode.out_len;
            let wire = loop {
                let (t, wire) = transmit_by_reference(engine, node, out_len, mode.budget);
                stats.calls += 1;
                stats.buffered += t.buffered;
                stats.referenced += t.referenced;
                stats.shorts += usize::from(t.short);
                if t.short && t.is_empty() && out_len < 1 << 17 {
                    out_len = 1 << 17;
                    continue;
                }
                break wire;
            };
            return self.sent_bytes(from_a, &wire);
        }
        let mut out = vec![0u8; self.out_len];
        let n = if from_a {
            self.a.transmit(&mut self.na, &mut out)
        } else {
            self.b.transmit(&mut self.nb, &mut out)
        };
        assert!(n <= out.len());
        self.sent_bytes(from_a, &out[..n])
    }

    /// Puts bytes a side transmitted on the wire; returns how many.
    fn sent_bytes(&mut self, from_a: bool, out: &[u8]) -> usize {
        let n = out.len();
        if from_a {
            self.ab.extend_from_slice(&out[..n]);
            self.sent[0] += n;
        } else {
            self.ba.extend_from_slice(&out[..n]);
            self.sent[1] += n;
        }
        if self.record {
            self.wire[usize::from(!from_a)].extend_from_slice(&out[..n]);
        }
        n
    }

    /// Delivers everything in flight towards one side, in random pieces.
    fn rx(&mut self, to_b: bool) {
        let mut pending = if to_b {
            std::mem::take(&mut self.ab)
        } else {
            std::mem::take(&mut self.ba)
        };
        let mut pos = 0;
        while pos < pending.len() {
            // A socket buffer of one to four pieces.
            let start = pos;
            let mut pieces: Vec<&[u8]> = Vec::new();
            for _ in 0..self.rand() % 4 + 1 {
                let r = self.rand();
                let piece = match r % 4 {
                    0 => 1,
                    1 => (r >> 8) as usize % 7 + 1,
                    2 => (r >> 8) as usize % 300 + 1,
                    _ => pending.len() - pos,
                };
                let end = (pos + piece).min(pending.len());
                if end > pos {
                    pieces.push(&pending[pos..end]);
                }
                pos = end;
            }
            let result = match (to_b, pieces.as_slice()) {
                // One piece through `receive`, more through `receive_pieces`.
                (true, [one]) => self.b.receive(one, &mut self.nb),
                (false, [one]) => self.a.receive(one, &mut self.na),
                (true, _) => self.b.receive_pieces(Pieces::new(&pieces), &mut self.nb),
                (false, _) => self.a.receive_pieces(Pieces::new(&pieces), &mut self.na),
            };
            match result {
                Ok(n) => assert_eq!(n, pos - start),
                // The stream is dead: the rest is dropped.
                Err(_) => break,
            }
        }
        pending.clear();
    }

    /// Runs both sides until neither has anything to send.
    fn pump(&mut self) {
        for _ in 0..100_000 {
            let n = self.tx(true) + self.tx(false);
            let moved = !self.ab.is_empty() || !self.ba.is_empty();
            self.rx(true);
            self.rx(false);
            if n == 0 && !moved {
                return;
            }
        }
        panic!("no quiescence");
    }
}

/// `cq`'s completions split into the send queue's and the receive queue's,
/// each in order.
fn by_queue(cq: &[Completion]) -> (Vec<Completion>, Vec<Completion>) {
    cq.iter()
        .partition(|c| !matches!(c.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm))
}

fn sge(addr: u64, length: u32, lkey: u32) -> Sge {
    Sge { addr, length, lkey }
}

fn sges(list: &[Sge]) -> SgeList {
    SgeList::new(list).unwrap()
}

fn wr(wr_id: u64, op: SendOp, list: &[Sge]) -> SendRequest {
    SendRequest {
        wr_id,
        op,
        sges: sges(list),
        signaled: true,
        fence: false,
    }
}

fn send_op() -> SendOp {
    SendOp::Send {
        solicited: false,
        invalidate: None,
    }
}

fn ok(wr_id: u64, opcode: WcOpcode, byte_len: u32) -> Completion {
    Completion {
        wr_id,
        status: WcStatus::Success,
        opcode,
        byte_len,
        imm: None,
        invalidated: None,
        solicited: false,
    }
}

fn err(wr_id: u64, opcode: WcOpcode, status: WcStatus) -> Completion {
    Completion {
        wr_id,
        status,
        opcode,
        byte_len: 0,
        imm: None,
        invalidated: None,
        solicited: false,
    }
}

/// The setups every data-moving test runs under: CRC on and off, FPDUs
/// small enough to segment, and several delivery splits.
fn setups() -> Vec<Setup> {
    let mut v = Vec::new();
    for crc in [true, false] {
        for fpdu_size in [128, 1000, 4096, 65536] {
            for seed in [1, 0x9e37_79b9_7f4a_7c15] {
                v.push(Setup {
                    crc,
                    fpdu_size,
                    seed,
                    ..Setup::default()
                });
            }
        }
    }
    v
}

const VA: u64 = 0x7f00_0000_1000;

#[test]
fn sge_list_limits() {
    let one = sge(1, 2, 3);
    assert!(SgeList::new(&[one; MAX_SGE]).is_some());
    assert!(SgeList::new(&[one; MAX_SGE + 1]).is_none());
    let full = SgeList::new(&[sge(0, u32::MAX, 0); MAX_SGE]).unwrap();
    assert_eq!(full.total_len(), Some(u64::from(u32::MAX) * MAX_SGE as u64));
    assert_eq!(SgeList::new(&[]).unwrap().as_slice(), &[]);
    assert_eq!(SgeList::single(one).as_slice(), &[one]);
}

#[test]
fn send_recv_multi_sge() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let src = p.na.mr(3000, VA, LOCAL_WRITE);
        p.na.fill(src, 7);
        let dst = p.nb.mr(4000, VA, LOCAL_WRITE);
        // 1000 + 0 + 1500 bytes from two places of the source.
        p.na.sq.push_back(wr(
            1,
            send_op(),
            &[
                sge(VA + 100, 1000, src),
                sge(VA, 0, src),
                sge(VA + 1500, 1500, src),
            ],
        ));
        // Into three receive SGEs, the last one larger than needed.
        p.nb.rq.push_back(RecvRequest {
            wr_id: 10,
            sges: sges(&[
                sge(VA + 3000, 700, dst),
                sge(VA, 1300, dst),
                sge(VA + 2000, 1000, dst),
            ]),
        });
        p.pump();
        assert_eq!(p.na.cq, vec![ok(1, WcOpcode::Send, 2500)], "{setup:?}");
        assert_eq!(p.nb.cq, vec![ok(10, WcOpcode::Recv, 2500)], "{setup:?}");
        let s = &p.na.region(src).data;
        let message: Vec<u8> = [&s[100..1100], &s[1500..3000]].concat();
        let d = &p.nb.region(dst).data;
        let placed: Vec<u8> = [&d[3000..3700], &d[0..1300], &d[2000..2500]].concat();
        assert_eq!(placed, message, "{setup:?}");
        assert!(d[2500..3000].iter().all(|&b| b == 0));
        assert!(!p.a.is_terminated() && !p.b.is_terminated());
    }
}

#[test]
fn send_with_se_and_unsignaled() {
    let mut p = Pair::new(Setup::default());
    let src = p.na.mr(64, VA, LOCAL_WRITE);
    let dst = p.nb.mr(64, VA, LOCAL_WRITE);
    let mut w = wr(
        1,
        SendOp::Send {
            solicited: true,
            invalidate: None,
        },
        &[sge(VA, 10, src)],
    );
    w.signaled = false;
    p.na.sq.push_back(w);
    p.na.sq.push_back(wr(2, send_op(), &[]));
    for id in [20, 21] {
        p.nb.rq.push_back(RecvRequest {
            wr_id: id,
            sges: sges(&[sge(VA, 64, dst)]),
        });
    }
    p.pump();
    // The unsignaled Send completes nothing at the sender.
    assert_eq!(p.na.cq, vec![ok(2, WcOpcode::Send, 0)]);
    let mut first = ok(20, WcOpcode::Recv, 10);
    first.solicited = true;
    assert_eq!(p.nb.cq, vec![first, ok(21, WcOpcode::Recv, 0)]);
}

#[test]
fn send_with_invalidate() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let dst = p.nb.mr(64, VA, LOCAL_WRITE);
        let target = p.nb.mr(64, VA, REMOTE_WRITE);
        p.na.sq.push_back(wr(
            1,
            SendOp::Send {
                solicited: true,
                invalidate: Some(target),
            },
            &[],
        ));
        p.nb.rq.push_back(RecvRequest {
            wr_id: 5,
            sges: sges(&[sge(VA, 64, dst)]),
        });
        p.pump();
        let mut c = ok(5, WcOpcode::Recv, 0);
        c.invalidated = Some(target);
        c.solicited = true;
        assert_eq!(p.nb.cq, vec![c]);
        assert!(!p.nb.region(target).valid);
        assert_eq!(p.na.cq, vec![ok(1, WcOpcode::Send, 0)]);
    }
}

#[test]
fn send_with_bad_invalidate_terminates() {
    let mut p = Pair::new(Setup::default());
    let dst = p.nb.mr(64, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(
        1,
        SendOp::Send {
            solicited: false,
            invalidate: Some(0x7700),
        },
        &[],
    ));
    p.nb.rq.push_back(RecvRequest {
        wr_id: 5,
        sges: sges(&[sge(VA, 64, dst)]),
    });
    p.pump();
    let c = p.nb.cq[0];
    assert_eq!(
        (c.wr_id, c.status, c.invalidated),
        (5, WcStatus::RemInvReqErr, None)
    );
    assert_eq!(
        p.b.termination(),
        Some(TermError::RdmapProtectionCannotInvalidate)
    );
    assert!(p.a.peer_terminated());
    assert_eq!(
        p.a.termination(),
        Some(TermError::RdmapProtectionCannotInvalidate)
    );
}

#[test]
fn rdma_write() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let src = p.na.mr(5000, VA, 0);
        p.na.fill(src, 3);
        let dst = p.nb.mr(8192, 0x1000, REMOTE_WRITE);
        p.na.sq.push_back(wr(
            1,
            SendOp::Write {
                remote_addr: 0x1000 + 100,
                rkey: dst,
            },
            &[sge(VA, 3000, src), sge(VA + 4000, 1000, src)],
        ));
        let mut quiet = wr(
            2,
            SendOp::Write {
                remote_addr: 0x1000 + 6000,
                rkey: dst,
            },
            &[sge(VA, 10, src)],
        );
        quiet.signaled = false;
        p.na.sq.push_back(quiet);
        p.pump();
        assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaWrite, 4000)]);
        assert!(p.nb.cq.is_empty());
        let s = &p.na.region(src).data;
        let d = &p.nb.region(dst).data;
        assert_eq!(&d[100..3100], &s[..3000]);
        assert_eq!(&d[3100..4100], &s[4000..5000]);
        assert_eq!(&d[6000..6010], &s[..10]);
        assert!(d[..100].iter().all(|&b| b == 0));
    }
}

#[test]
fn rdma_write_with_immediate() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let src = p.na.mr(2000, VA, 0);
        p.na.fill(src, 9);
        let dst = p.nb.mr(2000, 0, REMOTE_WRITE);
        let rbuf = p.nb.mr(16, VA, LOCAL_WRITE);
        p.na.sq.push_back(wr(
            1,
            SendOp::WriteImm {
                remote_addr: 0,
                rkey: dst,
                imm: 0xdead_beef,
            },
            &[sge(VA, 2000, src)],
        ));
        p.nb.rq.push_back(RecvRequest {
            wr_id: 8,
            sges: sges(&[sge(VA, 16, rbuf)]),
        });
        p.pump();
        assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaWrite, 2000)]);
        let mut c = ok(8, WcOpcode::RecvRdmaWithImm, 0);
        c.imm = Some(0xdead_beef);
        assert_eq!(p.nb.cq, vec![c]);
        assert_eq!(p.nb.region(dst).data, p.na.region(src).data);
    }
}

#[test]
fn send_with_immediate_takes_one_receive_per_message() {
    for setup in setups() {
        for len in [0u32, 300] {
            let mut p = Pair::new(setup);
            let src = p.na.mr(300, VA, 0);
            p.na.fill(src, 1);
            let dst = p.nb.mr(1000, VA, LOCAL_WRITE);
            p.na.sq.push_back(wr(
                1,
                SendOp::SendImm {
                    imm: 42,
                    solicited: true,
                },
                &[sge(VA, len, src)],
            ));
            // A Write in between and a Write with Immediate after it: each
            // Immediate Data message is classified by what preceded it.
            let wdst = p.nb.mr(16, 0, REMOTE_WRITE);
            p.na.sq.push_back(wr(
                2,
                SendOp::Write {
                    remote_addr: 0,
                    rkey: wdst,
                },
                &[sge(VA, 4, src)],
            ));
            p.na.sq.push_back(wr(
                3,
                SendOp::SendImm {
                    imm: 43,
                    solicited: false,
                },
                &[],
            ));
            for id in 0..4 {
                p.nb.rq.push_back(RecvRequest {
                    wr_id: 100 + id,
                    sges: sges(&[sge(VA + 500 * (id % 2), 500, dst)]),
                });
            }
            p.pump();
            assert_eq!(
                p.na.cq,
                vec![
                    ok(1, WcOpcode::Send, len),
                    ok(2, WcOpcode::RdmaWrite, 4),
                    ok(3, WcOpcode::Send, 0)
                ]
            );
            // A zero-length Send with Immediate is the Immediate Data message
            // alone (one receive); with data it is a Send, then Immediate Data.
            let mut expected = Vec::new();
            let mut next = 100;
            if len > 0 {
                expected.push(ok(next, WcOpcode::Recv, len));
                next += 1;
            }
            let mut imm = ok(next, WcOpcode::Recv, 0);
            imm.imm = Some(42);
            imm.solicited = true;
            expected.push(imm);
            // RFC 7306 has one Immediate Data message: right after an RDMA
            // Write it completes an RDMA Write with Immediate, whatever the
            // sender's verb was.
            let mut imm2 = ok(next + 1, WcOpcode::RecvRdmaWithImm, 0);
            imm2.imm = Some(43);
            expected.push(imm2);
            assert_eq!(p.nb.cq, expected, "{setup:?}");
            let n = len as usize;
            assert_eq!(&p.nb.region(dst).data[..n], &p.na.region(src).data[..n]);
        }
    }
}

#[test]
fn rdma_read_with_invalidate_invalidates_the_sink_on_completion() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let source = p.nb.mr(3000, 0x10_0000, REMOTE_READ);
        p.nb.fill(source, 9);
        let sink = p.na.mr(3000, VA, LOCAL_WRITE);
        p.na.sq.push_back(wr(
            1,
            SendOp::ReadInv {
                remote_addr: 0x10_0000,
                rkey: source,
            },
            &[sge(VA, 3000, sink)],
        ));
        p.pump();
        assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, 3000)], "{setup:?}");
        assert_eq!(
            &p.na.region(sink).data[..3000],
            &p.nb.region(source).data[..3000]
        );
        // The sink's STag is invalid now: a Send from it fails locally.
        assert!(!p.na.region(sink).valid, "{setup:?}");
        p.na.sq.push_back(wr(2, send_op(), &[sge(VA, 16, sink)]));
        p.pump();
        assert_ne!(p.na.cq.last().map(|c| c.status), Some(WcStatus::Success));
    }
}

#[test]
fn rdma_read() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let source = p.nb.mr(6000, 0x10_0000, REMOTE_READ);
        p.nb.fill(source, 5);
        let sink = p.na.mr(6000, VA, LOCAL_WRITE);
        p.na.sq.push_back(wr(
            1,
            SendOp::Read {
                remote_addr: 0x10_0000 + 500,
                rkey: source,
            },
            &[sge(VA + 10, 5000, sink)],
        ));
        // A zero-length Read (the RTR form) needs no SGE.
        p.na.sq.push_back(wr(
            2,
            SendOp::Read {
                remote_addr: 0,
                rkey: 0,
            },
            &[],
        ));
        p.pump();
        assert_eq!(
            p.na.cq,
            vec![
                ok(1, WcOpcode::RdmaRead, 5000),
                ok(2, WcOpcode::RdmaRead, 0)
            ],
            "{setup:?}"
        );
        assert_eq!(
            &p.na.region(sink).data[10..5010],
            &p.nb.region(source).data[500..5500]
        );
        assert_eq!(p.a.requester().outstanding(), 0);
        assert_eq!(p.b.responder().pending(), 0);
        assert!(!p.a.wants_transmit() && !p.b.wants_transmit());
    }
}

#[test]
fn read_waits_for_ord_credits() {
    let mut p = Pair::new(Setup {
        ord: 2,
        ird: 2,
        ..Setup::default()
    });
    let source = p.nb.mr(1000, 0, REMOTE_READ);
    p.nb.fill(source, 2);
    let sink = p.na.mr(1000, VA, LOCAL_WRITE);
    for i in 0..5u64 {
        p.na.sq.push_back(wr(
            i,
            SendOp::Read {
                remote_addr: 100 * i,
                rkey: source,
            },
            &[sge(VA + 100 * i, 100, sink)],
        ));
    }
    p.tx(true);
    // Two requests out, the third waits on the SQ.
    assert_eq!(p.a.requester().outstanding(), 2);
    assert_eq!(p.na.sq.len(), 3);
    assert_eq!(p.tx(true), 0);
    assert!(!p.a.wants_transmit());
    p.rx(true);
    assert!(p.b.wants_transmit());
    p.tx(false);
    p.rx(false);
    // The responses freed the credits: the SQ may go on.
    assert!(p.a.wants_transmit());
    assert_eq!(p.na.cq.len(), 2);
    p.pump();
    let ids: Vec<u64> = p.na.cq.iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, vec![0, 1, 2, 3, 4]);
    assert!(p.na.cq.iter().all(|c| c.status == WcStatus::Success));
    assert_eq!(
        &p.na.region(sink).data[..500],
        &p.nb.region(source).data[..500]
    );
}

#[test]
fn fence_waits_for_reads() {
    let mut p = Pair::new(Setup::default());
    let source = p.nb.mr(100, 0, REMOTE_READ);
    let sink = p.na.mr(100, VA, LOCAL_WRITE);
    let dst = p.nb.mr(100, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: source,
        },
        &[sge(VA, 100, sink)],
    ));
    let mut fenced = wr(2, send_op(), &[]);
    fenced.fence = true;
    p.na.sq.push_back(fenced);
    p.nb.rq.push_back(RecvRequest {
        wr_id: 9,
        sges: sges(&[sge(VA, 100, dst)]),
    });
    p.tx(true);
    assert_eq!(p.na.sq.len(), 1);
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![ok(1, WcOpcode::RdmaRead, 100), ok(2, WcOpcode::Send, 0)]
    );
}

#[test]
fn atomics() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let target = p.nb.mr(64, 0x8000, REMOTE_ATOMIC);
        p.nb.region_mut(target).data[8..16].copy_from_slice(&100u64.to_ne_bytes());
        p.nb.region_mut(target).data[16..24]
            .copy_from_slice(&0x00ff_00ff_00ff_00ffu64.to_ne_bytes());
        let result = p.na.mr(64, VA, LOCAL_WRITE);
        let ops = [
            SendOp::FetchAdd {
                remote_addr: 0x8008,
                rkey: target,
                add: 5,
                add_mask: 0,
            },
            SendOp::CmpSwap {
                remote_addr: 0x8008,
                rkey: target,
                compare: 105,
                compare_mask: u64::MAX,
                swap: 7,
                swap_mask: u64::MAX,
            },
            // A failing compare.
            SendOp::CmpSwap {
                remote_addr: 0x8008,
                rkey: target,
                compare: 105,
                compare_mask: u64::MAX,
                swap: 9,
                swap_mask: u64::MAX,
            },
            // Two 32-bit fields: the low field's carry is dropped.
            SendOp::FetchAdd {
                remote_addr: 0x8010,
                rkey: target,
                add: 0x0000_0001_ff01_0000,
                add_mask: 0x8000_0000_8000_0000,
            },
            // Masked compare on the low byte, swap of the high byte only.
            SendOp::CmpSwap {
                remote_addr: 0x8010,
                rkey: target,
                compare: 0xff,
                compare_mask: 0xff,
                swap: 0xab00_0000_0000_0000,
                swap_mask: 0xff00_0000_0000_0000,
            },
        ];
        for (i, op) in ops.iter().enumerate() {
            p.na.sq
                .push_back(wr(i as u64, *op, &[sge(VA + 8 * i as u64, 8, result)]));
        }
        p.pump();
        let opcodes: Vec<_> =
            p.na.cq
                .iter()
                .map(|c| (c.wr_id, c.status, c.byte_len))
                .collect();
        assert_eq!(
            opcodes,
            (0..5)
                .map(|i| (i, WcStatus::Success, 8))
                .collect::<Vec<_>>(),
            "{setup:?}"
        );
        assert_eq!(p.na.cq[1].opcode, WcOpcode::CompSwap);
        // The masked forms complete as such.
        assert_eq!(p.na.cq[3].opcode, WcOpcode::MaskedFetchAdd);
        assert_eq!(p.na.cq[4].opcode, WcOpcode::MaskedCompSwap);
        let word = |d: &[u8], i: usize| u64::from_ne_bytes(d[8 * i..8 * i + 8].try_into().unwrap());
        let r = &p.na.region(result).data;
        let originals: Vec<u64> = (0..5).map(|i| word(r, i)).collect();
        let second = 0x00ff_00ff_00ff_00ffu64;
        let added = AtomicOp::FetchAdd {
            add: 0x0000_0001_ff01_0000,
            mask: 0x8000_0000_8000_0000,
        }
        .apply(second);
        assert_eq!(originals, vec![100, 105, 7, second, added]);
        let t = &p.nb.region(target).data;
        assert_eq!(word(t, 1), 7);
        assert_eq!(
            word(t, 2),
            (added & !0xff00_0000_0000_0000) | 0xab00_0000_0000_0000
        );
    }
}

/// The reference semantics of RFC 7306 section 5.1, bit by bit.
fn reference(op: &AtomicOp, old: u64) -> u64 {
    match *op {
        AtomicOp::FetchAdd { add, mask } => {
            // Ripple-carry addition whose carry stops at every mask bit.
            let mut result = 0u64;
            let mut carry = 0u64;
            for bit in 0..64 {
                let a = old >> bit & 1;
                let b = add >> bit & 1;
                let sum = a + b + carry;
                result |= (sum & 1) << bit;
                carry = if mask >> bit & 1 == 1 { 0 } else { sum >> 1 };
            }
            result
        }
        AtomicOp::CmpSwap {
            compare,
            compare_mask,
            swap,
            swap_mask,
        } => {
            let matches = (0..64).all(|bit| {
                compare_mask >> bit & 1 == 0 || (old >> bit & 1) == (compare >> bit & 1)
            });
            if !matches {
                return old;
            }
            (0..64).fold(0u64, |acc, bit| {
                let from = if swap_mask >> bit & 1 == 1 { swap } else { old };
                acc | (from >> bit & 1) << bit
            })
        }
    }
}

fn boundary_masks() -> Vec<u64> {
    let mut v = vec![0, u64::MAX, 0x8000_0000_8000_0000, 0x8080_8080_8080_8080];
    v.extend((0..64).map(|b| 1u64 << b));
    v.extend((0..64).map(|b| !(1u64 << b)));
    v
}

#[test]
fn atomic_op_boundary_masks() {
    let values = [
        0,
        1,
        u64::MAX,
        0x8000_0000_0000_0000,
        0x7fff_ffff_ffff_ffff,
        0x0123_4567_89ab_cdef,
    ];
    for mask in boundary_masks() {
        for &old in &values {
            for &x in &values {
                let add = AtomicOp::FetchAdd { add: x, mask };
                assert_eq!(add.apply(old), reference(&add, old), "{add:?} on {old:#x}");
                for &y in &values {
                    for other in [0, u64::MAX] {
                        for (cm, sm) in [(mask, other), (other, mask)] {
                            let cas = AtomicOp::CmpSwap {
                                compare: x,
                                compare_mask: cm,
                                swap: y,
                                swap_mask: sm,
                            };
                            assert_eq!(cas.apply(old), reference(&cas, old), "{cas:?} on {old:#x}");
                        }
                    }
                }
            }
        }
    }
    // The unmasked forms.
    assert_eq!(AtomicOp::FetchAdd { add: 1, mask: 0 }.apply(u64::MAX), 0);
    let cas = AtomicOp::CmpSwap {
        compare: 3,
        compare_mask: u64::MAX,
        swap: 4,
        swap_mask: u64::MAX,
    };
    assert_eq!((cas.apply(3), cas.apply(5)), (4, 5));
}

proptest! {
    #[test]
    fn atomic_op_matches_reference(old: u64, a: u64, b: u64, m1: u64, m2: u64, fetch: bool) {
        let op = if fetch {
            AtomicOp::FetchAdd { add: a, mask: m1 }
        } else {
            AtomicOp::CmpSwap { compare: a, compare_mask: m1, swap: b, swap_mask: m2 }
        };
        prop_assert_eq!(op.apply(old), reference(&op, old));
    }

    #[test]
    fn send_survives_any_split(seed: u64, len in 0u32..6000, fpdu in 64usize..4096, crc: bool) {
        let mut p = Pair::new(Setup { crc, fpdu_size: fpdu, seed, ..Setup::default() });
        let src = p.na.mr(6000, VA, 0);
        p.na.fill(src, seed as u8);
        let dst = p.nb.mr(6000, VA, LOCAL_WRITE);
        p.na.sq.push_back(wr(1, send_op(), &[sge(VA, len, src)]));
        p.nb.rq.push_back(RecvRequest { wr_id: 2, sges: sges(&[sge(VA, 6000, dst)]) });
        p.pump();
        prop_assert_eq!(&p.nb.cq, &vec![ok(2, WcOpcode::Recv, len)]);
        let n = len as usize;
        prop_assert_eq!(&p.nb.region(dst).data[..n], &p.na.region(src).data[..n]);
    }
}

#[test]
fn local_ops_run_in_sq_order() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let local = p.na.mr(64, VA, LOCAL_WRITE);
        let dst = p.nb.mr(256, VA, LOCAL_WRITE);
        p.na.fill(local, 4);
        let fresh = local & !0xff | 0x77;
        p.na.sq.push_back(wr(1, send_op(), &[sge(VA, 8, local)]));
        p.na.sq
            .push_back(wr(2, SendOp::LocalInv { stag: local }, &[]));
        p.na.sq.push_back(wr(
            3,
            SendOp::RegMr {
                stag: fresh,
                access: LOCAL_WRITE,
                iova: 0,
                length: 0,
            },
            &[],
        ));
        p.na.sq.push_back(wr(4, send_op(), &[sge(VA, 16, fresh)]));
        for id in 0..2 {
            p.nb.rq.push_back(RecvRequest {
                wr_id: 10 + id,
                sges: sges(&[sge(VA + 128 * id, 128, dst)]),
            });
        }
        p.pump();
        assert_eq!(
            p.na.cq,
            vec![
                ok(1, WcOpcode::Send, 8),
                ok(2, WcOpcode::LocalInv, 0),
                ok(3, WcOpcode::RegMr, 0),
                ok(4, WcOpcode::Send, 16)
            ]
        );
        assert_eq!(
            p.na.log,
            vec![format!("local-inv {local:#x}"), format!("reg {fresh:#x}")]
        );
        assert_eq!(p.nb.recv_completions().len(), 2);

        // Invalidated and then used: the Send fails locally.
        p.na.sq
            .push_back(wr(5, SendOp::LocalInv { stag: fresh }, &[]));
        p.na.sq.push_back(wr(6, send_op(), &[sge(VA, 16, fresh)]));
        p.pump();
        assert_eq!(p.na.cq[4], ok(5, WcOpcode::LocalInv, 0));
        assert_eq!(p.na.cq[5], err(6, WcOpcode::Send, WcStatus::LocProtErr));
        assert!(p.a.is_terminated());
        assert!(p.b.peer_terminated());
    }
}

#[test]
fn bad_lkey_completes_in_error_and_terminates_peer() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let dst = p.nb.mr(64, VA, LOCAL_WRITE);
        p.nb.rq.push_back(RecvRequest {
            wr_id: 3,
            sges: sges(&[sge(VA, 64, dst)]),
        });
        // Not even signaled: errors always complete.
        let mut w = wr(1, send_op(), &[sge(VA, 16, 0x4242)]);
        w.signaled = false;
        p.na.sq.push_back(w);
        p.na.sq.push_back(wr(2, send_op(), &[]));
        p.pump();
        assert_eq!(p.na.cq, vec![err(1, WcOpcode::Send, WcStatus::LocProtErr)]);
        assert_eq!(p.a.termination(), Some(TermError::RdmapLocalCatastrophic));
        assert!(p.b.peer_terminated());
        assert_eq!(p.b.termination(), Some(TermError::RdmapLocalCatastrophic));
        // The rest flushes.
        p.a.flush(&mut p.na);
        p.b.flush(&mut p.nb);
        assert_eq!(p.na.cq[1], err(2, WcOpcode::Send, WcStatus::WrFlushErr));
        assert_eq!(p.nb.cq, vec![err(3, WcOpcode::Recv, WcStatus::WrFlushErr)]);
    }
}

#[test]
fn bad_post_parameters() {
    // A Read with Invalidate has one sink, the region it invalidates.
    let mut p = Pair::new(Setup::default());
    let m = p.na.mr(64, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(
        1,
        SendOp::ReadInv {
            remote_addr: 0,
            rkey: 0x100,
        },
        &[sge(VA, 8, m), sge(VA + 8, 8, m)],
    ));
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![err(1, WcOpcode::RdmaRead, WcStatus::LocQpOpErr)]
    );

    let mut p = Pair::new(Setup::default());
    let m = p.na.mr(64, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(
        1,
        SendOp::FetchAdd {
            remote_addr: 0,
            rkey: 0x100,
            add: 1,
            add_mask: 0,
        },
        &[sge(VA, 4, m)],
    ));
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![err(1, WcOpcode::FetchAdd, WcStatus::LocLenErr)]
    );

    // A Read sink without local write access is a local protection error.
    let mut p = Pair::new(Setup::default());
    let m = p.na.mr(64, VA, 0);
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: 0x100,
        },
        &[sge(VA, 8, m)],
    ));
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![err(1, WcOpcode::RdmaRead, WcStatus::LocProtErr)]
    );
    assert!(p.b.peer_terminated());

    // ORD 0: a Read can never be sent.
    let mut p = Pair::new(Setup {
        ord: 0,
        ..Setup::default()
    });
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: 0,
        },
        &[],
    ));
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![err(1, WcOpcode::RdmaRead, WcStatus::LocQpOpErr)]
    );
}

#[test]
fn bad_remote_stag_fails_the_request() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let source = p.nb.mr(64, 0, REMOTE_WRITE); // no remote read
        let sink = p.na.mr(64, VA, LOCAL_WRITE);
        p.na.sq.push_back(wr(
            1,
            SendOp::Read {
                remote_addr: 0,
                rkey: 0x1234_5600,
            },
            &[sge(VA, 8, sink)],
        ));
        p.pump();
        assert_eq!(p.b.termination(), Some(TermError::RdmapInvalidStag));
        assert_eq!(
            p.na.cq,
            vec![err(1, WcOpcode::RdmaRead, WcStatus::RemAccessErr)]
        );
        assert!(p.a.peer_terminated());

        // Access rights: the second of two Reads fails, the first completes.
        let mut p = Pair::new(setup);
        let good = p.nb.mr(64, 0, REMOTE_READ);
        let _ = source;
        let bad = p.nb.mr(64, 0, REMOTE_WRITE);
        let sink = p.na.mr(64, VA, LOCAL_WRITE);
        p.na.sq.push_back(wr(
            1,
            SendOp::Read {
                remote_addr: 0,
                rkey: good,
            },
            &[sge(VA, 8, sink)],
        ));
        p.na.sq.push_back(wr(
            2,
            SendOp::FetchAdd {
                remote_addr: 0,
                rkey: bad,
                add: 1,
                add_mask: 0,
            },
            &[sge(VA + 8, 8, sink)],
        ));
        p.na.sq.push_back(wr(3, send_op(), &[]));
        p.pump();
        assert_eq!(p.b.termination(), Some(TermError::RdmapAccessRights));
        // The Send was out before the TERMINATE came back; the Read Response
        // was never sent: the TERMINATE goes first.
        assert_eq!(
            p.na.cq,
            vec![
                ok(3, WcOpcode::Send, 0),
                err(2, WcOpcode::FetchAdd, WcStatus::RemAccessErr)
            ]
        );
        p.a.flush(&mut p.na);
        let rest: Vec<_> = p.na.cq[2..].iter().map(|c| (c.wr_id, c.status)).collect();
        assert_eq!(rest, vec![(1, WcStatus::WrFlushErr)]);
    }
}

#[test]
fn bad_write_terminates_the_peer() {
    let mut p = Pair::new(Setup::default());
    let src = p.na.mr(64, VA, 0);
    let dst = p.nb.mr(64, 0, REMOTE_READ);
    p.na.sq.push_back(wr(
        1,
        SendOp::Write {
            remote_addr: 0,
            rkey: dst,
        },
        &[sge(VA, 64, src)],
    ));
    p.pump();
    // The Write completed when it was sent; the TERMINATE says what happened.
    assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaWrite, 64)]);
    assert_eq!(p.a.termination(), Some(TermError::RdmapAccessRights));
    assert!(p.a.peer_terminated());
}

#[test]
fn no_receive_posted_terminates() {
    for crc in [true, false] {
        let mut p = Pair::new(Setup {
            crc,
            ..Setup::default()
        });
        p.na.sq.push_back(wr(1, send_op(), &[]));
        p.pump();
        assert_eq!(p.b.termination(), Some(TermError::DdpMsnNoBuffer));
        assert!(p.a.peer_terminated());
        assert_eq!(p.a.termination(), Some(TermError::DdpMsnNoBuffer));
        // The Send was out before the peer objected.
        assert_eq!(p.na.cq, vec![ok(1, WcOpcode::Send, 0)]);
        assert!(!p.a.wants_transmit() && !p.b.wants_transmit());
    }
}

#[test]
fn message_too_long_terminates() {
    let mut p = Pair::new(Setup::default());
    let src = p.na.mr(64, VA, 0);
    let dst = p.nb.mr(64, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(1, send_op(), &[sge(VA, 64, src)]));
    p.nb.rq.push_back(RecvRequest {
        wr_id: 2,
        sges: sges(&[sge(VA, 32, dst)]),
    });
    p.pump();
    assert_eq!(p.b.termination(), Some(TermError::DdpMessageTooLong));
    p.b.flush(&mut p.nb);
    assert_eq!(p.nb.cq, vec![err(2, WcOpcode::Recv, WcStatus::WrFlushErr)]);
}

#[test]
fn flush_completes_everything() {
    let mut p = Pair::new(Setup {
        ord: 1,
        ..Setup::default()
    });
    let src = p.na.mr(100_000, VA, LOCAL_WRITE);
    let remote = p.nb.mr(100_000, 0, ALL);
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: remote,
        },
        &[sge(VA, 8, src)],
    ));
    // A big Write, partly sent when the QP goes to error.
    let mut w = wr(
        2,
        SendOp::Write {
            remote_addr: 0,
            rkey: remote,
        },
        &[sge(VA, 100_000, src)],
    );
    w.signaled = false;
    p.na.sq.push_back(w);
    p.na.sq.push_back(wr(
        3,
        SendOp::FetchAdd {
            remote_addr: 0,
            rkey: remote,
            add: 1,
            add_mask: 0,
        },
        &[sge(VA, 8, src)],
    ));
    let mut quiet = wr(4, SendOp::LocalInv { stag: src }, &[]);
    quiet.signaled = false;
    p.na.sq.push_back(quiet);
    p.na.rq.push_back(RecvRequest {
        wr_id: 5,
        sges: sges(&[]),
    });
    assert!(p.tx(true) > 3000);
    assert!(p.a.wants_transmit());
    assert_eq!(p.a.requester().outstanding(), 1);
    p.a.flush(&mut p.na);
    assert!(p.a.is_terminated());
    assert!(!p.a.wants_transmit());
    let got: Vec<_> =
        p.na.cq
            .iter()
            .map(|c| (c.wr_id, c.status, c.opcode))
            .collect();
    use WcOpcode::*;
    use WcStatus::WrFlushErr as F;
    assert_eq!(
        got,
        vec![
            (2, F, RdmaWrite),
            (1, F, RdmaRead),
            (3, F, FetchAdd),
            (4, F, LocalInv),
            (5, F, Recv)
        ]
    );
    assert_eq!(p.tx(true), 0);
    // Flushing again finds nothing.
    p.a.flush(&mut p.na);
    assert_eq!(p.na.cq.len(), 5);
}

#[test]
fn flush_after_peer_terminate_keeps_nothing_pending() {
    let mut p = Pair::new(Setup::default());
    let sink = p.na.mr(64, VA, LOCAL_WRITE);
    for i in 0..3 {
        p.na.sq.push_back(wr(
            i,
            SendOp::Read {
                remote_addr: 0,
                rkey: 0x0009_9900,
            },
            &[sge(VA, 8, sink)],
        ));
    }
    p.pump();
    p.a.flush(&mut p.na);
    let got: Vec<_> = p.na.cq.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(
        got,
        vec![
            (0, WcStatus::RemAccessErr),
            (1, WcStatus::WrFlushErr),
            (2, WcStatus::WrFlushErr)
        ]
    );
}

#[test]
fn both_directions_at_once() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let a_mem = p.na.mr(20_000, VA, ALL);
        let b_mem = p.nb.mr(20_000, VA, ALL);
        p.na.fill(a_mem, 1);
        p.nb.fill(b_mem, 2);
        for i in 0..4u64 {
            p.na.sq.push_back(wr(
                i,
                SendOp::Read {
                    remote_addr: VA + 4000 * i,
                    rkey: b_mem,
                },
                &[sge(VA + 10_000 + 2000 * i, 2000, a_mem)],
            ));
            p.nb.sq.push_back(wr(
                i,
                SendOp::Write {
                    remote_addr: VA + 2000 * i,
                    rkey: a_mem,
                },
                &[sge(VA + 12_000 + 2000 * i, 2000, b_mem)],
            ));
        }
        p.pump();
        assert_eq!(p.na.cq.len(), 4);
        assert_eq!(p.nb.cq.len(), 4);
        assert!(p
            .na
            .cq
            .iter()
            .chain(&p.nb.cq)
            .all(|c| c.status == WcStatus::Success));
        let a = &p.na.region(a_mem).data;
        let b = &p.nb.region(b_mem).data;
        for i in 0..4 {
            assert_eq!(
                &a[10_000 + 2000 * i..12_000 + 2000 * i],
                &b[4000 * i..4000 * i + 2000]
            );
        }
        assert_eq!(&a[..8000], &b[12_000..20_000]);
    }
}

#[test]
fn corrupted_fpdu_terminates_with_crc_error() {
    let mut p = Pair::new(Setup::default());
    let src = p.na.mr(500, VA, 0);
    p.na.fill(src, 6);
    let dst = p.nb.mr(500, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(1, send_op(), &[sge(VA, 500, src)]));
    p.nb.rq.push_back(RecvRequest {
        wr_id: 2,
        sges: sges(&[sge(VA, 500, dst)]),
    });
    p.tx(true);
    // A payload byte of the first FPDU.
    p.ab[40] ^= 0x10;
    p.pump();
    assert_eq!(p.b.termination(), Some(TermError::MpaCrc));
    assert!(p.a.peer_terminated());
    // Nothing was completed on the damaged message.
    assert!(p.nb.cq.is_empty());
    p.b.flush(&mut p.nb);
    assert_eq!(p.nb.cq, vec![err(2, WcOpcode::Recv, WcStatus::WrFlushErr)]);
}

/// The stream a (possibly hostile) peer sends for `wr`, its payload taken
/// from `payload`, encoded by a transmit engine of its own.
fn forge(crc: bool, fpdu_size: usize, wr: WorkRequest<'_>, payload: &[u8]) -> Vec<u8> {
    let mut tx = TxEngine::new(crc.then_some(SoftCrc32c), fpdu_size);
    let mut out = Vec::new();
    frame_into(&mut tx, wr, payload, &mut out);
    out
}

/// Appends to `out` the FPDUs `tx` makes of `wr`, its payload taken from
/// `payload`.
fn frame_into(
    tx: &mut TxEngine<SoftCrc32c>,
    wr: WorkRequest<'_>,
    payload: &[u8],
    out: &mut Vec<u8>,
) {
    let mut msg = tx.start(wr).unwrap();
    let mut header = [0u8; MAX_FPDU_HEADER_LEN];
    while let Some(mut fpdu) = msg.next_fpdu(&mut header).unwrap() {
        out.extend_from_slice(&header[..fpdu.header_len]);
        let start = fpdu.payload_offset as usize;
        let data = &payload[start..start + fpdu.payload_len as usize];
        fpdu.hash_payload(data);
        out.extend_from_slice(data);
        out.extend_from_slice(fpdu.trailer().as_bytes());
    }
}

/// The sink of the Read the hostile peer answers: 1000 bytes in the middle
/// of a 6000-byte region at `VA`.
const SINK_OFFSET: usize = 1000;
const SINK_LEN: u32 = 1000;
const SINK_END: usize = SINK_OFFSET + SINK_LEN as usize;
/// Bytes the forged Read Responses carry.
const FORGED: u8 = 0xa5;

/// A's regions in the forged Read Response tests.
#[derive(Debug, Clone, Copy)]
struct Regions {
    /// The region of the first Read's sink.
    sink: u32,
    /// A region with every right that no Read names.
    other: u32,
    /// The region of the second Read's sink (all of it).
    next: u32,
}

/// Where a forged Read Response goes: (STag, tagged offset, length).
type Aim<'a> = &'a dyn Fn(Regions) -> (u32, u64, u32);

/// A posts a Read into [`SINK_OFFSET`, `SINK_END`) of its region `sink`,
/// and a second one into the region `next`; the peer ignores them and
/// answers the first with a Read Response aimed by `aim`, in FPDUs of
/// `forged_fpdu` bytes. A must refuse it: terminate with a DDP base/bounds
/// error, place nothing outside the sink, and complete the Read as a bad
/// response. Returns the sink region's bytes.
fn refuse_forged_read_response(setup: Setup, forged_fpdu: usize, aim: Aim<'_>) -> Vec<u8> {
    let mut p = Pair::new(setup);
    // Every region is locally writable, a Read Response's requirement: the
    // only thing that keeps the response out of them is the sink the Read
    // named.
    let sink = p.na.mr(6000, VA, LOCAL_WRITE | REMOTE_WRITE);
    let other = p.na.mr(6000, VA, ALL);
    let next = p.na.mr(6000, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: 0x100,
        },
        &[sge(VA + SINK_OFFSET as u64, SINK_LEN, sink)],
    ));
    p.na.sq.push_back(wr(
        2,
        SendOp::Read {
            remote_addr: 0,
            rkey: 0x100,
        },
        &[sge(VA, 6000, next)],
    ));
    p.tx(true);
    assert_eq!(p.a.requester().outstanding(), 2);
    // The peer reads the requests but does not run a real responder.
    p.ab.clear();
    let (stag, to, len) = aim(Regions { sink, other, next });
    let payload = vec![FORGED; len as usize];
    let response = WorkRequest::ReadResponse {
        sink_stag: stag,
        sink_tagged_offset: to,
        len,
    };
    p.ba = forge(setup.crc, forged_fpdu, response, &payload);
    p.rx(false);
    assert!(p.a.is_terminated() && !p.a.peer_terminated(), "{setup:?}");
    assert_eq!(
        p.a.termination(),
        Some(TermError::DdpBaseBounds),
        "{setup:?}"
    );
    assert_eq!(
        p.a.receive(&[0; 4], &mut p.na),
        Err(TermError::DdpBaseBounds)
    );
    // Nothing landed outside the sink.
    for region in [other, next] {
        assert!(
            p.na.region(region).data.iter().all(|&b| b == 0),
            "{setup:?}"
        );
    }
    let data = p.na.region(sink).data.clone();
    assert!(data[..SINK_OFFSET].iter().all(|&b| b == 0), "{setup:?}");
    assert!(data[SINK_END..].iter().all(|&b| b == 0), "{setup:?}");
    let refused = err(1, WcOpcode::RdmaRead, WcStatus::BadRespErr);
    assert_eq!(p.na.cq, vec![refused], "{setup:?}");
    // The TERMINATE is pending and says so: the peer decodes it.
    assert!(p.a.wants_transmit());
    assert!(p.tx(true) > 0);
    assert!(!p.a.wants_transmit());
    p.rx(true);
    assert!(p.b.peer_terminated(), "{setup:?}");
    assert_eq!(
        p.b.termination(),
        Some(TermError::DdpBaseBounds),
        "{setup:?}"
    );
    assert_eq!(p.tx(true), 0);
    // The second Read is flushed; neither ever completes successfully.
    p.a.flush(&mut p.na);
    assert_eq!(
        p.na.cq,
        vec![refused, err(2, WcOpcode::RdmaRead, WcStatus::WrFlushErr)],
        "{setup:?}"
    );
    data
}

#[test]
fn read_response_into_another_region_is_refused() {
    let aims: [Aim<'_>; 3] = [
        // Another valid region with every right, at the sink's address.
        &|r| (r.other, VA + SINK_OFFSET as u64, 100),
        // The same, all of it.
        &|r| (r.other, VA, 6000),
        // The sink of the second Read, still outstanding behind the first.
        &|r| (r.next, VA, SINK_LEN),
    ];
    for setup in setups() {
        for aim in aims {
            let sink = refuse_forged_read_response(setup, 1024, aim);
            assert!(sink.iter().all(|&b| b == 0), "{setup:?}");
        }
    }
}

#[test]
fn read_response_outside_the_sink_is_refused() {
    let aims: [Aim<'_>; 5] = [
        // Right after the sink, in the same region.
        &|r| (r.sink, VA + SINK_END as u64, 100),
        // Right before it.
        &|r| (r.sink, VA, 100),
        // Overlapping its start by one byte.
        &|r| (r.sink, VA + SINK_OFFSET as u64 - 1, 100),
        // Overlapping its end by one byte.
        &|r| (r.sink, VA + SINK_END as u64 - 99, 100),
        // Far away, where the tagged offset would wrap with the length.
        &|r| (r.sink, u64::MAX - 50, 50),
    ];
    for setup in setups() {
        for aim in aims {
            let sink = refuse_forged_read_response(setup, 1024, aim);
            assert!(sink.iter().all(|&b| b == 0), "{setup:?}");
        }
    }
}

#[test]
fn read_response_overflowing_the_sink_later_is_refused() {
    // The response starts at the sink and is longer than it: the first
    // FPDUs fit (and are placed), a later one does not.
    for setup in setups() {
        for (fpdu, len) in [(300, SINK_LEN + 1), (300, 3000), (700, SINK_LEN + 200)] {
            let sink = refuse_forged_read_response(setup, fpdu, &|r| {
                (r.sink, VA + SINK_OFFSET as u64, len)
            });
            let placed = sink[SINK_OFFSET..SINK_END]
                .iter()
                .take_while(|&&b| b == FORGED)
                .count();
            assert!(placed > 0, "{setup:?} {fpdu} {len}");
            assert!(
                sink[SINK_OFFSET + placed..SINK_END].iter().all(|&b| b == 0),
                "{setup:?} {fpdu} {len}"
            );
        }
    }
}

/// A Read Response segment the peer sends: (offset in the sink, length, the
/// last of its response).
type Seg = (u32, u32, bool);

/// The byte forged responses carry for offset `at` of a sink: never 0, so
/// that what was placed shows.
fn sink_byte(at: usize) -> u8 {
    (at % 251) as u8 + 1
}

/// The FPDU of Read Response segment `seg` into the sink at tagged offset
/// `base` of `stag`, carrying the sink's bytes ([`sink_byte`]).
fn response_segment(crc: bool, stag: u32, base: u64, (at, len, last): Seg) -> Vec<u8> {
    let ddp = rdmap::tagged_header(Opcode::ReadResponse, last, stag, base + u64::from(at));
    let mut ulpdu = vec![0u8; MAX_FPDU_HEADER_LEN];
    let n = rdmap::encode_headers(&ddp, &OpcodeHeader::None, &mut ulpdu).unwrap();
    ulpdu.truncate(n);
    ulpdu.extend((at..at + len).map(|k| sink_byte(k as usize)));
    let mut out = vec![0u8; ulpdu.len() + 16];
    let n = encode_fpdu(&mut out, &ulpdu, crc.then_some(SoftCrc32c)).unwrap();
    out.truncate(n);
    out
}

/// A posts a Read of `len` bytes into its region at [`SINK_OFFSET`], and a
/// second Read behind it; the peer answers the first with `segments` and
/// nothing else. Returns the pair once A received them, and the sink's
/// STag.
fn answer_read(setup: Setup, len: u32, segments: &[Seg]) -> (Pair, u32) {
    let mut p = Pair::new(setup);
    let sink = p.na.mr(6000, VA, LOCAL_WRITE);
    let next = p.na.mr(6000, VA, LOCAL_WRITE);
    let base = VA + SINK_OFFSET as u64;
    for (wr_id, sge) in [(1, sge(base, len, sink)), (2, sge(VA, 100, next))] {
        let read = SendOp::Read {
            remote_addr: 0,
            rkey: 0x100,
        };
        p.na.sq.push_back(wr(wr_id, read, &[sge]));
    }
    p.tx(true);
    assert_eq!(p.a.requester().outstanding(), 2);
    // The peer reads the requests but does not run a real responder.
    p.ab.clear();
    for &seg in segments {
        p.ba.extend(response_segment(setup.crc, sink, base, seg));
    }
    p.rx(false);
    (p, sink)
}

/// `segments` fill a Read of `len` bytes: it completes, its sink holds them.
fn read_is_filled(len: u32, segments: &[Seg]) {
    for setup in setups() {
        let ctx = format!("{segments:?} {setup:?}");
        let (p, sink) = answer_read(setup, len, segments);
        assert!(!p.a.is_terminated(), "{ctx}");
        assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, len)], "{ctx}");
        let data = &p.na.region(sink).data;
        let end = SINK_OFFSET + len as usize;
        for (k, &b) in data[SINK_OFFSET..end].iter().enumerate() {
            assert_eq!(b, sink_byte(k), "{ctx}");
        }
        assert!(data[..SINK_OFFSET].iter().all(|&b| b == 0), "{ctx}");
        assert!(data[end..].iter().all(|&b| b == 0), "{ctx}");
        assert_eq!(p.a.requester().outstanding(), 1, "{ctx}");
    }
}

/// `segments` do not fill a Read of `len` bytes in order: A terminates with a
/// DDP base or bounds violation at the first wrong one, the Read completes
/// as a bad response (never successfully), and nothing lands outside its
/// sink.
fn read_is_refused(len: u32, segments: &[Seg]) {
    for setup in setups() {
        let ctx = format!("{segments:?} {setup:?}");
        let (mut p, sink) = answer_read(setup, len, segments);
        assert_eq!(p.a.termination(), Some(TermError::DdpBaseBounds), "{ctx}");
        assert!(!p.a.peer_terminated(), "{ctx}");
        let refused = err(1, WcOpcode::RdmaRead, WcStatus::BadRespErr);
        assert_eq!(p.na.cq, vec![refused], "{ctx}");
        let data = &p.na.region(sink).data;
        let end = SINK_OFFSET + len as usize;
        assert!(data[..SINK_OFFSET].iter().all(|&b| b == 0), "{ctx}");
        assert!(data[end..].iter().all(|&b| b == 0), "{ctx}");
        for mr in p.na.mrs.iter().filter(|mr| mr.stag != sink) {
            assert!(mr.data.iter().all(|&b| b == 0), "{ctx}");
        }
        // The TERMINATE goes out and says so.
        assert!(p.tx(true) > 0, "{ctx}");
        p.rx(true);
        assert!(p.b.peer_terminated(), "{ctx}");
        assert_eq!(p.b.termination(), Some(TermError::DdpBaseBounds), "{ctx}");
        // The flush completes the Read behind it, and this one no more.
        p.a.flush(&mut p.na);
        p.a.flush(&mut p.na);
        let flushed = err(2, WcOpcode::RdmaRead, WcStatus::WrFlushErr);
        assert_eq!(p.na.cq, vec![refused, flushed], "{ctx}");
    }
}

#[test]
fn read_completes_once_its_responses_placed_every_sink_byte_in_order() {
    // One segment.
    read_is_filled(SINK_LEN, &[(0, SINK_LEN, true)]);
    // Several, in order.
    read_is_filled(
        SINK_LEN,
        &[
            (0, 1, false),
            (1, 299, false),
            (300, 600, false),
            (900, 100, true),
        ],
    );
    // The last one empty, at the sink's end.
    read_is_filled(SINK_LEN, &[(0, SINK_LEN, false), (SINK_LEN, 0, true)]);
    // A zero-length Read: one zero-length last segment at the sink's address.
    read_is_filled(0, &[(0, 0, true)]);
}

#[test]
fn read_answered_by_one_zero_length_last_segment_fails() {
    read_is_refused(SINK_LEN, &[(0, 0, true)]);
    read_is_refused(1, &[(0, 0, true)]);
    // Also after some of the bytes.
    read_is_refused(SINK_LEN, &[(0, 500, false), (500, 0, true)]);
}

#[test]
fn read_response_segments_out_of_order_fail() {
    let half = SINK_LEN / 2;
    // The second half first.
    read_is_refused(SINK_LEN, &[(half, half, false), (0, half, true)]);
    read_is_refused(SINK_LEN, &[(half, half, true)]);
    // A gap: bytes 500..600 never sent, the total still the sink's length.
    read_is_refused(SINK_LEN, &[(0, 500, false), (600, 500, true)]);
    // A zero-length Read answered anywhere but at its sink's address.
    read_is_refused(0, &[(1, 0, true)]);
}

#[test]
fn overlapping_read_response_segments_fail() {
    // 600 + 400 bytes, the sink's length, the second over the first.
    read_is_refused(SINK_LEN, &[(0, 600, false), (200, 400, true)]);
    // The same segment twice.
    read_is_refused(SINK_LEN, &[(0, 500, false), (0, 500, true)]);
    read_is_refused(
        SINK_LEN,
        &[(0, 500, false), (0, 500, false), (500, 500, true)],
    );
}

#[test]
fn read_response_short_of_the_sink_fails() {
    read_is_refused(SINK_LEN, &[(0, SINK_LEN - 1, true)]);
    read_is_refused(SINK_LEN, &[(0, 400, false), (400, 300, true)]);
}

#[test]
fn read_response_longer_than_the_sink_fails() {
    read_is_refused(SINK_LEN, &[(0, SINK_LEN + 1, true)]);
    read_is_refused(SINK_LEN, &[(0, 600, false), (600, 500, true)]);
    // The sink filled, and then more, with the last flag only after.
    read_is_refused(SINK_LEN, &[(0, SINK_LEN, false), (SINK_LEN, 1, true)]);
    read_is_refused(0, &[(0, 1, true)]);
}

/// Slot storage in two vectors, as a driver keeps it on the heap.
struct VecSlots {
    outstanding: Vec<Outstanding>,
    pending: Vec<Pending>,
}

impl VecSlots {
    fn new(len: usize) -> Self {
        Self {
            outstanding: vec![Outstanding::EMPTY; len],
            pending: vec![Pending::EMPTY; len],
        }
    }
}

impl SlotStorage for VecSlots {
    fn outstanding(&self) -> &[Outstanding] {
        &self.outstanding
    }
    fn outstanding_mut(&mut self) -> &mut [Outstanding] {
        &mut self.outstanding
    }
    fn pending(&self) -> &[Pending] {
        &self.pending
    }
    fn pending_mut(&mut self) -> &mut [Pending] {
        &mut self.pending
    }
}

/// What a run left behind: both CQs, both memories, the bytes sent.
type Outcome = (
    Vec<Completion>,
    Vec<Completion>,
    Vec<u8>,
    Vec<u8>,
    [usize; 2],
);

/// Both sides Read from and Fetch-and-Add into each other, more requests
/// than there are slots, so that the slot ring wraps.
fn read_atomic_exchange<S: SlotStorage>(mut p: Pair<S>) -> Outcome {
    const REQUESTS: u64 = MAX_DEPTH as u64 + 30;
    let ma = p.na.mr(4096, VA, ALL);
    let mb = p.nb.mr(4096, VA, ALL);
    p.na.fill(ma, 1);
    p.nb.fill(mb, 2);
    p.na.region_mut(ma).data[..8].fill(0);
    p.nb.region_mut(mb).data[..8].fill(0);
    for (node, mem, peer) in [(&mut p.na, ma, mb), (&mut p.nb, mb, ma)] {
        for i in 0..REQUESTS {
            let slot = i % 32;
            let w = if i % 2 == 0 {
                wr(
                    i,
                    SendOp::Read {
                        remote_addr: VA + 64 + 16 * slot,
                        rkey: peer,
                    },
                    &[sge(VA + 2048 + 16 * slot, 16, mem)],
                )
            } else {
                wr(
                    i,
                    SendOp::FetchAdd {
                        remote_addr: VA,
                        rkey: peer,
                        add: 1,
                        add_mask: 0,
                    },
                    &[sge(VA + 8, 8, mem)],
                )
            };
            node.sq.push_back(w);
        }
    }
    p.pump();
    for cq in [&p.na.cq, &p.nb.cq] {
        let got: Vec<_> = cq.iter().map(|c| (c.wr_id, c.status)).collect();
        let want: Vec<_> = (0..REQUESTS).map(|i| (i, WcStatus::Success)).collect();
        assert_eq!(got, want);
    }
    let word = |d: &[u8], at: usize| u64::from_ne_bytes(d[at..at + 8].try_into().unwrap());
    for (mem, node) in [(ma, &p.na), (mb, &p.nb)] {
        let d = &node.region(mem).data;
        // Every Fetch-and-Add of the peer landed; ours saw the last value.
        assert_eq!(word(d, 0), REQUESTS / 2);
        assert_eq!(word(d, 8), REQUESTS / 2 - 1);
    }
    assert!(!p.a.is_terminated() && !p.b.is_terminated());
    (
        p.na.cq,
        p.nb.cq,
        p.na.mrs[(ma >> 8) as usize].data.clone(),
        p.nb.mrs[(mb >> 8) as usize].data.clone(),
        p.sent,
    )
}

#[test]
fn heap_slot_storage_behaves_like_inline() {
    for setup in setups() {
        let inline = read_atomic_exchange(Pair::new(setup));
        let depth = usize::from(MAX_DEPTH);
        let heap = read_atomic_exchange(Pair::with_slots(
            setup,
            VecSlots::new(depth),
            VecSlots::new(depth),
        ));
        assert_eq!(inline, heap, "{setup:?}");
    }
}

/// Every work request in `ids` completed exactly once, none successfully.
fn all_failed_once(cq: &[Completion], ids: &[u64]) {
    let mut got: Vec<u64> = cq.iter().map(|c| c.wr_id).collect();
    got.sort_unstable();
    assert_eq!(got, ids, "{cq:?}");
    assert!(cq.iter().all(|c| c.status != WcStatus::Success), "{cq:?}");
}

fn requests(node: &mut Node, rkey: u32, sink: u32) {
    for (i, op) in [
        SendOp::Read {
            remote_addr: 0,
            rkey,
        },
        SendOp::FetchAdd {
            remote_addr: 0,
            rkey,
            add: 1,
            add_mask: 0,
        },
        SendOp::Read {
            remote_addr: 8,
            rkey,
        },
        SendOp::FetchAdd {
            remote_addr: 8,
            rkey,
            add: 1,
            add_mask: 0,
        },
    ]
    .into_iter()
    .enumerate()
    {
        node.sq
            .push_back(wr(i as u64 + 1, op, &[sge(VA + 8 * i as u64, 8, sink)]));
    }
}

#[test]
fn short_slot_storage_fails_requests_cleanly() {
    let setup = Setup {
        ord: 4,
        ird: 4,
        ..Setup::default()
    };
    // The requester has one slot: the second request cannot be tracked, so
    // it fails locally before it is sent, and the rest flush.
    let mut p = Pair::with_slots(
        setup,
        VecSlots::new(1),
        VecSlots::new(usize::from(MAX_DEPTH)),
    );
    let remote = p.nb.mr(64, 0, ALL);
    let sink = p.na.mr(64, VA, LOCAL_WRITE);
    requests(&mut p.na, remote, sink);
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![err(2, WcOpcode::FetchAdd, WcStatus::LocQpOpErr)]
    );
    assert_eq!(p.a.termination(), Some(TermError::RdmapLocalCatastrophic));
    assert!(p.b.peer_terminated());
    // The Fetch-and-Add never reached the peer.
    assert!(p.nb.region(remote).data.iter().all(|&b| b == 0));
    p.a.flush(&mut p.na);
    p.b.flush(&mut p.nb);
    all_failed_once(&p.na.cq, &[1, 2, 3, 4]);
    p.a.flush(&mut p.na);
    assert_eq!(p.na.cq.len(), 4);

    // The responder has one slot: the second request terminates the stream
    // before it is executed.
    let mut p = Pair::with_slots(
        setup,
        VecSlots::new(usize::from(MAX_DEPTH)),
        VecSlots::new(1),
    );
    let remote = p.nb.mr(64, 0, ALL);
    let sink = p.na.mr(64, VA, LOCAL_WRITE);
    requests(&mut p.na, remote, sink);
    p.pump();
    assert_eq!(p.b.termination(), Some(TermError::RdmapCatastrophicStream));
    assert!(p.a.peer_terminated());
    assert!(p.nb.region(remote).data.iter().all(|&b| b == 0));
    p.a.flush(&mut p.na);
    p.b.flush(&mut p.nb);
    all_failed_once(&p.na.cq, &[1, 2, 3, 4]);

    // No storage at all.
    let mut p = Pair::with_slots(setup, VecSlots::new(0), VecSlots::new(0));
    let remote = p.nb.mr(64, 0, ALL);
    let sink = p.na.mr(64, VA, LOCAL_WRITE);
    requests(&mut p.na, remote, sink);
    p.pump();
    p.a.flush(&mut p.na);
    all_failed_once(&p.na.cq, &[1, 2, 3, 4]);
    assert_eq!(p.na.cq[0], err(1, WcOpcode::RdmaRead, WcStatus::LocQpOpErr));

    // Slots rotate through all MAX_DEPTH entries whatever the ORD: with ORD 1
    // and one slot, the first Read works, the second (slot 1) cannot.
    let mut p = Pair::with_slots(
        Setup {
            ord: 1,
            ..Setup::default()
        },
        VecSlots::new(1),
        VecSlots::new(1),
    );
    let remote = p.nb.mr(64, 0, ALL);
    p.nb.fill(remote, 3);
    let sink = p.na.mr(64, VA, LOCAL_WRITE);
    for i in 0..2 {
        p.na.sq.push_back(wr(
            i,
            SendOp::Read {
                remote_addr: 0,
                rkey: remote,
            },
            &[sge(VA, 8, sink)],
        ));
    }
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![
            ok(0, WcOpcode::RdmaRead, 8),
            err(1, WcOpcode::RdmaRead, WcStatus::LocQpOpErr)
        ]
    );
    assert_eq!(&p.na.region(sink).data[..8], &p.nb.region(remote).data[..8]);
}

/// Writes the seed corpus of the `qp_engine` fuzz target
/// (`fuzz/seeds/qp_engine/`): streams a peer sends to the fuzzed engine (its
/// own work requests, and the responses to Reads the target posts),
/// addressed to the regions of its mock RNIC (STag index i, key 0; region 0
/// zero-based, the others at 0x1000 * i), behind the target's three
/// configuration bytes. Run with `cargo test --test qp_engine -- --ignored`.
#[test]
#[ignore = "regenerates the fuzz seeds"]
fn write_fuzz_seeds() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/qp_engine");
    std::fs::create_dir_all(dir).unwrap();
    let all = vec![
        wr(1, send_op(), &[sge(VA, 40, 0)]),
        wr(
            2,
            SendOp::Send {
                solicited: true,
                invalidate: Some(0x100),
            },
            &[sge(VA, 8, 0)],
        ),
        wr(
            3,
            SendOp::Write {
                remote_addr: 16,
                rkey: 0,
            },
            &[sge(VA, 64, 0)],
        ),
        wr(
            4,
            SendOp::WriteImm {
                remote_addr: 0x80,
                rkey: 0,
                imm: 9,
            },
            &[sge(VA, 32, 0)],
        ),
        wr(
            5,
            SendOp::Read {
                remote_addr: 0x2000,
                rkey: 0x200,
            },
            &[sge(VA, 100, 0)],
        ),
        wr(
            6,
            SendOp::FetchAdd {
                remote_addr: 0x3008,
                rkey: 0x300,
                add: 3,
                add_mask: 0x8000_0000,
            },
            &[sge(VA, 8, 0)],
        ),
        wr(
            7,
            SendOp::CmpSwap {
                remote_addr: 8,
                rkey: 0,
                compare: 0,
                compare_mask: u64::MAX,
                swap: 5,
                swap_mask: 0xffff,
            },
            &[sge(VA, 8, 0)],
        ),
        wr(
            8,
            SendOp::SendImm {
                imm: 7,
                solicited: false,
            },
            &[sge(VA, 10, 0)],
        ),
    ];
    let mut scenarios: Vec<(String, Vec<SendRequest>)> = vec![("all".into(), all.clone())];
    for w in &all {
        scenarios.push((format!("wr{}", w.wr_id), vec![*w]));
    }
    for crc in [false, true] {
        for (name, ops) in &scenarios {
            let config = EngineConfig {
                crc,
                fpdu_size: 200,
                pd: PD,
                ird: 8,
                ord: 8,
                rtr: RtrState::None,
            };
            let mut b = Engine::new(config, SoftCrc32c);
            let mut nb = Node::default();
            // The peer's own memory: index 0, key 0, with every right.
            nb.mrs.push(Mr {
                stag: 0,
                pd: PD,
                access: ALL,
                base: VA,
                valid: true,
                epoch: 0,
                data: (0..=255).collect(),
            });
            nb.sq.extend(ops.iter().copied());
            let mut stream = Vec::new();
            let mut out = vec![0u8; 4096];
            loop {
                let n = b.transmit(&mut nb, &mut out);
                if n == 0 {
                    break;
                }
                stream.extend_from_slice(&out[..n]);
            }
            assert!(nb.sq.is_empty() && !b.is_terminated());
            // The target's bytes: CRC, IRD 7, ORD 1, FPDU size 200; a split
            // seed (7: no RTR); 7 receives and no send requests posted.
            let mut seed = vec![u8::from(crc) | 7 << 1 | 1 << 6, 7, 7];
            seed.extend_from_slice(&stream);
            let crc_name = if crc { "crc" } else { "nocrc" };
            std::fs::write(format!("{dir}/{name}-{crc_name}"), seed).unwrap();
        }
    }
    // The target's own Reads, answered. With the posts byte 8 | 7 it posts
    // one Read (and 7 receives): with the split byte 7 into 8 bytes at 0x4000
    // of its region 4 (STag 0x400), with 14 into three SGEs, the second
    // empty, so two parts: 8 bytes each at 0x4000 and 0x4050. ORD 2, so that
    // both parts go out before their responses come.
    for crc in [false, true] {
        for (name, split, sinks) in [("read", 7, &[0x4000][..]), ("read2", 14, &[0x4000, 0x4050])] {
            let mut seed = vec![u8::from(crc) | 7 << 1 | 1 << 4 | 1 << 6, split, 8 | 7];
            for &sink in sinks {
                let response = WorkRequest::ReadResponse {
                    sink_stag: 4 << 8,
                    sink_tagged_offset: sink,
                    len: 8,
                };
                seed.extend(forge(crc, 200, response, &[0x5a; 8]));
            }
            let crc_name = if crc { "crc" } else { "nocrc" };
            std::fs::write(format!("{dir}/{name}-{crc_name}"), seed).unwrap();
        }
    }
}

// Peer-to-peer connections (RFC 6581): the engines start past the RTR
// message that a real MPA setup exchanged.

/// The engine configurations of both sides of a peer-to-peer setup, and the
/// bytes the responder sent for the RTR (its Read Response to a Read RTR).
#[derive(Debug, Clone)]
struct P2p {
    initiator: EngineConfig,
    responder: EngineConfig,
    rtr: Vec<u8>,
    rtr_response: Vec<u8>,
}

/// Depths of a peer-to-peer setup: what the initiator asks for (its IRD,
/// ORD) and what the responder's ULP accepts with (IRD, ORD).
#[derive(Debug, Clone, Copy)]
struct Depths {
    initiator_ird: u16,
    initiator_ord: u16,
    responder_ird: u16,
    responder_ord: u16,
}

const DEPTHS: Depths = Depths {
    initiator_ird: 3,
    initiator_ord: 2,
    responder_ird: 4,
    responder_ord: 3,
};

fn set(depth: QueueDepth) -> u16 {
    match depth {
        QueueDepth::Set(d) => d,
        QueueDepth::Unchanged => panic!("enhanced setups negotiate the depths"),
    }
}

/// Runs the pure MPA handshakes end to end, the initiator offering only
/// `kind`, the responder every kind, and returns the engine configurations
/// they give.
fn p2p_setup(kind: RtrKind, crc: bool, fpdu_size: usize, depths: Depths) -> P2p {
    let policy = if crc {
        CrcPolicy::Required
    } else {
        CrcPolicy::Disabled
    };
    let offered = RtrKinds {
        send: kind == RtrKind::Send,
        write: kind == RtrKind::Write,
        read: kind == RtrKind::Read,
    };
    let mut ini = InitiatorHandshake::new(InitiatorConfig {
        crc: policy,
        enhanced: true,
        ird: depths.initiator_ird,
        ord: depths.initiator_ord,
        max_ird: 16,
        peer_to_peer: true,
        rtr: offered,
        large_fpdus: false,
    });
    let mut res = ResponderHandshake::new(
        ResponderConfig {
            crc: policy,
            enhanced: true,
            max_ird: 16,
            ord: depths.responder_ord,
            min_ord: 0,
            rtr: RtrKinds {
                send: true,
                write: true,
                read: true,
            },
            large_fpdus: false,
        },
        SoftCrc32c,
    );
    let mut buf = [0u8; MAX_FRAME_LEN];
    let n = ini.request(b"p2p", &mut buf).unwrap();
    let (used, event) = res.on_bytes(&buf[..n]);
    assert_eq!(used, n);
    assert!(matches!(event, Some(ResponderEvent::ConnectRequest(_))));
    let accepted = res
        .accept(b"ok", depths.responder_ird, depths.responder_ord, &mut buf)
        .unwrap();
    assert!(!accepted.established);
    let (used, event) = ini.on_bytes(&buf[..accepted.len]).unwrap();
    assert_eq!(used, accepted.len);
    let Some(InitiatorEvent::Connected(decision)) = event else {
        panic!("{event:?}");
    };
    assert_eq!(decision.rtr, Some(kind));
    assert_eq!(decision.use_crc, crc);
    let n = ini.rtr_fpdu(&mut buf, SoftCrc32c).unwrap();
    let rtr = buf[..n].to_vec();
    let (used, event) = res.on_bytes(&rtr);
    assert_eq!(used, n);
    let Some(ResponderEvent::Established(received)) = event else {
        panic!("{event:?}");
    };
    assert_eq!(received.kind(), kind);
    assert!(res.is_established());
    let n = res.rtr_response(&mut buf).unwrap();
    let rtr_response = buf[..n].to_vec();
    assert_eq!(rtr_response.is_empty(), kind != RtrKind::Read);
    let d = accepted.decision;
    P2p {
        initiator: EngineConfig {
            crc: decision.use_crc,
            fpdu_size,
            pd: PD,
            ird: set(decision.local_ird),
            ord: set(decision.local_ord),
            rtr: RtrState::initiator(decision.rtr),
        },
        responder: EngineConfig {
            crc: d.use_crc,
            fpdu_size,
            pd: PD,
            ird: set(d.local_ird),
            ord: set(d.local_ord),
            rtr: RtrState::responder(Some(received)),
        },
        rtr,
        rtr_response,
    }
}

/// The pair of a peer-to-peer setup: a the initiator, b the responder,
/// recording what they send.
fn p2p_pair(setup: &P2p, seed: u64) -> Pair {
    let mut p = Pair::configured(
        setup.initiator,
        setup.responder,
        seed,
        InlineSlots::new(),
        InlineSlots::new(),
    );
    p.record = true;
    p
}

/// Hands the responder's Read Response to a Read RTR to the initiator's
/// engine, the first bytes of its stream.
fn deliver_rtr_response(p: &mut Pair, setup: &P2p) {
    p.ba.extend_from_slice(&setup.rtr_response);
    p.rx(false);
}

/// A segment on the wire: its opcode, and (QN, MSN) if it is untagged.
type WireSegment = (Opcode, Option<(u32, u32)>);

/// The segments of an FPDU stream (no markers).
fn segments(mut stream: &[u8]) -> Vec<WireSegment> {
    let mut v = Vec::new();
    while !stream.is_empty() {
        let len = usize::from(u16::from_be_bytes([stream[0], stream[1]]));
        let seg = Segment::decode(&stream[2..2 + len]).unwrap();
        let untagged = match seg.ddp {
            DdpHeader::Untagged(h) => Some((h.queue_number, h.msn)),
            DdpHeader::Tagged(_) => None,
        };
        v.push((seg.opcode, untagged));
        let wire = (2 + len).next_multiple_of(4) + 4;
        stream = &stream[wire..];
    }
    v
}

/// The MSNs of the last segments of each message on queue `qn`.
fn msns(segments: &[WireSegment], qn: u32) -> Vec<u32> {
    let mut v: Vec<u32> = segments
        .iter()
        .filter_map(|(_, u)| u.filter(|(q, _)| *q == qn).map(|(_, msn)| msn))
        .collect();
    v.dedup();
    v
}

const ALL_KINDS: [RtrKind; 3] = [RtrKind::Send, RtrKind::Write, RtrKind::Read];

#[test]
fn rtr_state_defaults_to_client_server() {
    assert_eq!(RtrState::default(), RtrState::None);
    assert_eq!(RtrState::initiator(None), RtrState::None);
    assert_eq!(RtrState::responder(None), RtrState::None);
    for kind in ALL_KINDS {
        assert_eq!(RtrState::initiator(Some(kind)), RtrState::Sent(kind));
    }
    assert_eq!(
        RtrState::responder(Some(ReceivedRtr::Send)),
        RtrState::Received(RtrKind::Send)
    );
    assert_eq!(
        RtrState::responder(Some(ReceivedRtr::Write)),
        RtrState::Received(RtrKind::Write)
    );
}

/// Each RTR kind after a real MPA setup: the responder sends first, then
/// Sends (and Immediate Data) both ways into posted receives, RDMA Reads
/// both ways up to the ORD limit, Writes both ways and an atomic, with the
/// MSNs each side uses checked on the wire.
#[test]
fn p2p_traffic_after_each_rtr_kind() {
    for kind in ALL_KINDS {
        for (crc, fpdu_size, seed) in [(true, 1024, 1), (false, 128, 0x9e37_79b9_7f4a_7c15)] {
            let setup = p2p_setup(kind, crc, fpdu_size, DEPTHS);
            let ctx = format!("{kind:?} crc {crc} fpdu {fpdu_size}");
            // Negotiated: the responder's IRD is the initiator's ORD 2 (its
            // ULP allows up to 4), its ORD 3 fits the initiator's IRD 3.
            assert_eq!((setup.initiator.ord, setup.initiator.ird), (2, 3), "{ctx}");
            assert_eq!((setup.responder.ord, setup.responder.ird), (3, 2), "{ctx}");
            let mut p = p2p_pair(&setup, seed);
            if kind == RtrKind::Read {
                assert_eq!(p.a.requester().outstanding(), 1, "{ctx}");
                deliver_rtr_response(&mut p, &setup);
                assert_eq!(p.a.requester().outstanding(), 0, "{ctx}");
            } else {
                assert_eq!(p.a.requester().outstanding(), 0, "{ctx}");
            }
            assert!(p.na.cq.is_empty(), "{ctx}");
            assert_eq!(p.b.responder().pending(), 0, "{ctx}");
            assert!(!p.a.wants_transmit() && !p.b.wants_transmit(), "{ctx}");
            p2p_exchange(&mut p, &ctx);

            let to_b = segments(&p.wire[0]);
            let to_a = segments(&p.wire[1]);
            let send_first = if kind == RtrKind::Send { 2 } else { 1 };
            let read_first = if kind == RtrKind::Read { 2 } else { 1 };
            // Initiator to responder: 2 Sends, 1 Immediate Data, 3 Reads
            // and an atomic, each queue counting on past the RTR.
            assert_eq!(
                msns(&to_b, 0),
                (send_first..send_first + 3).collect::<Vec<_>>(),
                "{ctx}"
            );
            assert_eq!(
                msns(&to_b, 1),
                (read_first..read_first + 4).collect::<Vec<_>>(),
                "{ctx}"
            );
            // Responder to initiator: its own counts start at 1.
            assert_eq!(msns(&to_a, 0), vec![1, 2], "{ctx}");
            assert_eq!(msns(&to_a, 1), vec![1, 2, 3, 4], "{ctx}");
            for (op, _) in to_a.iter().chain(&to_b) {
                assert_ne!(*op, Opcode::Terminate, "{ctx}");
            }
            assert!(!p.a.is_terminated() && !p.b.is_terminated(), "{ctx}");
        }
    }
}

/// The traffic of [`p2p_traffic_after_each_rtr_kind`]; a initiator, b
/// responder, ORD 2 at a, 3 at b.
fn p2p_exchange(p: &mut Pair, ctx: &str) {
    let a_src = p.na.mr(4096, VA, LOCAL_WRITE | REMOTE_READ | REMOTE_WRITE);
    p.na.fill(a_src, 1);
    let a_dst =
        p.na.mr(4096, VA, LOCAL_WRITE | REMOTE_WRITE | REMOTE_ATOMIC);
    let b_src = p.nb.mr(4096, VA, LOCAL_WRITE | REMOTE_READ | REMOTE_WRITE);
    p.nb.fill(b_src, 2);
    let b_dst =
        p.nb.mr(4096, VA, LOCAL_WRITE | REMOTE_WRITE | REMOTE_ATOMIC);

    // The responder talks first: what the RTR is for.
    p.na.rq.push_back(RecvRequest {
        wr_id: 100,
        sges: sges(&[sge(VA, 1000, a_dst)]),
    });
    p.nb.sq
        .push_back(wr(200, send_op(), &[sge(VA, 700, b_src)]));
    p.pump();
    assert_eq!(p.nb.cq, vec![ok(200, WcOpcode::Send, 700)], "{ctx}");
    assert_eq!(p.na.cq, vec![ok(100, WcOpcode::Recv, 700)], "{ctx}");
    assert_eq!(
        p.na.region(a_dst).data[..700],
        p.nb.region(b_src).data[..700]
    );
    p.na.cq.clear();
    p.nb.cq.clear();

    // Sends both ways, with Immediate Data from the initiator.
    for id in 0..3 {
        p.nb.rq.push_back(RecvRequest {
            wr_id: 300 + id,
            sges: sges(&[sge(VA + 1000 * id, 1000, b_dst)]),
        });
    }
    p.na.sq.push_back(wr(1, send_op(), &[sge(VA, 900, a_src)]));
    p.na.sq.push_back(wr(
        2,
        SendOp::SendImm {
            imm: 77,
            solicited: false,
        },
        &[],
    ));
    p.na.sq
        .push_back(wr(3, send_op(), &[sge(VA + 1000, 10, a_src)]));
    p.na.rq.push_back(RecvRequest {
        wr_id: 101,
        sges: sges(&[sge(VA + 1000, 100, a_dst)]),
    });
    p.nb.sq.push_back(wr(201, send_op(), &[sge(VA, 50, b_src)]));
    p.pump();
    // Send and receive completions go to CQs of their own: how the two
    // interleave here is the pump's, so each is compared on its own.
    assert_eq!(
        by_queue(&p.na.cq),
        (
            vec![
                ok(1, WcOpcode::Send, 900),
                ok(2, WcOpcode::Send, 0),
                ok(3, WcOpcode::Send, 10),
            ],
            vec![ok(101, WcOpcode::Recv, 50)],
        ),
        "{ctx}"
    );
    let mut imm = ok(301, WcOpcode::Recv, 0);
    imm.imm = Some(77);
    assert_eq!(
        by_queue(&p.nb.cq),
        (
            vec![ok(201, WcOpcode::Send, 50)],
            vec![
                ok(300, WcOpcode::Recv, 900),
                imm,
                ok(302, WcOpcode::Recv, 10)
            ],
        ),
        "{ctx}"
    );
    assert_eq!(
        p.nb.region(b_dst).data[..900],
        p.na.region(a_src).data[..900]
    );
    p.na.cq.clear();
    p.nb.cq.clear();

    // RDMA Reads both ways, one more than the ORD: the ORD go out at once,
    // the last waits for a credit.
    for (i, id) in (10..13u64).enumerate() {
        let at = 100 * i as u64;
        p.na.sq.push_back(wr(
            id,
            SendOp::Read {
                remote_addr: VA + at,
                rkey: b_src,
            },
            &[sge(VA + 2000 + at, 100, a_dst)],
        ));
    }
    for (i, id) in (210..214u64).enumerate() {
        let at = 100 * i as u64;
        p.nb.sq.push_back(wr(
            id,
            SendOp::Read {
                remote_addr: VA + at,
                rkey: a_src,
            },
            &[sge(VA + 3000 + at, 100, b_dst)],
        ));
    }
    p.tx(true);
    p.tx(false);
    assert_eq!(p.a.requester().outstanding(), 2, "{ctx}");
    assert_eq!(p.na.sq.len(), 1, "{ctx}");
    assert_eq!(p.b.requester().outstanding(), 3, "{ctx}");
    assert_eq!(p.nb.sq.len(), 1, "{ctx}");
    p.pump();
    let reads = |ids: std::ops::Range<u64>| -> Vec<Completion> {
        ids.map(|id| ok(id, WcOpcode::RdmaRead, 100)).collect()
    };
    assert_eq!(p.na.cq, reads(10..13), "{ctx}");
    assert_eq!(p.nb.cq, reads(210..214), "{ctx}");
    assert_eq!(
        p.na.region(a_dst).data[2000..2300],
        p.nb.region(b_src).data[..300]
    );
    assert_eq!(
        p.nb.region(b_dst).data[3000..3400],
        p.na.region(a_src).data[..400]
    );
    assert_eq!(p.a.requester().outstanding(), 0, "{ctx}");
    assert_eq!(p.b.requester().outstanding(), 0, "{ctx}");
    p.na.cq.clear();
    p.nb.cq.clear();

    // Writes both ways, and an atomic on queue 1 from the initiator.
    p.na.sq.push_back(wr(
        20,
        SendOp::Write {
            remote_addr: VA + 3500,
            rkey: b_dst,
        },
        &[sge(VA, 500, a_src)],
    ));
    p.na.sq.push_back(wr(
        21,
        SendOp::FetchAdd {
            remote_addr: VA + 4088,
            rkey: b_dst,
            add: 5,
            add_mask: 0,
        },
        &[sge(VA + 4088, 8, a_dst)],
    ));
    p.nb.sq.push_back(wr(
        220,
        SendOp::Write {
            remote_addr: VA + 3500,
            rkey: a_dst,
        },
        &[sge(VA, 500, b_src)],
    ));
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![
            ok(20, WcOpcode::RdmaWrite, 500),
            ok(21, WcOpcode::FetchAdd, 8)
        ],
        "{ctx}"
    );
    assert_eq!(p.nb.cq, vec![ok(220, WcOpcode::RdmaWrite, 500)], "{ctx}");
    assert_eq!(
        p.nb.region(b_dst).data[3500..4000],
        p.na.region(a_src).data[..500]
    );
    assert_eq!(
        p.na.region(a_dst).data[3500..4000],
        p.nb.region(b_src).data[..500]
    );
    assert_eq!(p.nb.region(b_dst).data[4088..4096], 5u64.to_ne_bytes());
}

#[test]
fn received_send_rtr_refuses_a_first_send_with_msn_1() {
    let setup = p2p_setup(RtrKind::Send, true, 1024, DEPTHS);
    // The peer behaves as if there had been no RTR.
    let client_server = EngineConfig {
        rtr: RtrState::None,
        ..setup.initiator
    };
    let mut p = Pair::configured(
        client_server,
        setup.responder,
        1,
        InlineSlots::new(),
        InlineSlots::new(),
    );
    let dst = p.nb.mr(64, VA, LOCAL_WRITE);
    p.nb.rq.push_back(RecvRequest {
        wr_id: 5,
        sges: sges(&[sge(VA, 64, dst)]),
    });
    p.na.sq.push_back(wr(1, send_op(), &[]));
    p.pump();
    assert_eq!(p.b.termination(), Some(TermError::DdpMsnRange));
    assert!(p.a.peer_terminated());
    // The receive was not consumed by the refused Send.
    assert!(p.nb.cq.is_empty());
    assert_eq!(p.nb.rq.len(), 1);
}

#[test]
fn received_read_rtr_refuses_a_first_read_with_msn_1() {
    let setup = p2p_setup(RtrKind::Read, true, 1024, DEPTHS);
    let client_server = EngineConfig {
        rtr: RtrState::None,
        ..setup.initiator
    };
    let mut p = Pair::configured(
        client_server,
        setup.responder,
        1,
        InlineSlots::new(),
        InlineSlots::new(),
    );
    let source = p.nb.mr(64, VA, REMOTE_READ);
    let sink = p.na.mr(64, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: VA,
            rkey: source,
        },
        &[sge(VA, 64, sink)],
    ));
    p.pump();
    assert_eq!(p.b.termination(), Some(TermError::DdpMsnRange));
    assert_eq!(p.b.responder().pending(), 0);
    assert!(p.a.peer_terminated());
    // The TERMINATE echoes the Read Request: it fails at once, as an
    // invalid request (a DDP untagged buffer error).
    assert_eq!(
        p.na.cq,
        vec![err(1, WcOpcode::RdmaRead, WcStatus::RemInvReqErr)]
    );
}

#[test]
fn second_rtr_read_response_terminates() {
    for crc in [true, false] {
        let setup = p2p_setup(RtrKind::Read, crc, 1024, DEPTHS);
        let mut p = p2p_pair(&setup, 3);
        deliver_rtr_response(&mut p, &setup);
        assert!(!p.a.is_terminated());
        assert_eq!(p.a.requester().outstanding(), 0);
        deliver_rtr_response(&mut p, &setup);
        assert_eq!(p.a.termination(), Some(TermError::RdmapUnexpectedOpcode));
        assert!(p.na.cq.is_empty());
        p.pump();
        assert!(p.b.peer_terminated());
    }
}

/// With a Read RTR outstanding, a Read Response other than its zero-length
/// one at STag 1 is refused.
#[test]
fn read_rtr_accepts_only_its_own_response() {
    let setup = p2p_setup(RtrKind::Read, true, 1024, DEPTHS);
    let sink = Node::default().mr(64, VA, ALL);
    let forged = [
        // Aimed at another STag.
        (sink, 0, 0),
        // At STag 1, with payload.
        (mpa_handshake::RTR_STAG, 0, 8),
        // At STag 1, another offset.
        (mpa_handshake::RTR_STAG, 4, 0),
    ];
    for (stag, to, len) in forged {
        let mut p = p2p_pair(&setup, 5);
        p.na.mr(64, VA, ALL);
        let response = forge(
            true,
            1024,
            WorkRequest::ReadResponse {
                sink_stag: stag,
                sink_tagged_offset: to,
                len,
            },
            &[0xa5; 8],
        );
        p.ba.extend_from_slice(&response);
        p.rx(false);
        assert_eq!(p.a.termination(), Some(TermError::DdpBaseBounds));
        assert!(p.na.cq.is_empty());
    }
}

/// ORD 1 with a Read RTR: the RTR holds the only credit, so the first real
/// Read waits for the RTR's response.
#[test]
fn read_rtr_holds_an_ord_credit_until_its_response() {
    let depths = Depths {
        initiator_ord: 1,
        ..DEPTHS
    };
    for crc in [true, false] {
        let setup = p2p_setup(RtrKind::Read, crc, 1024, depths);
        assert_eq!(setup.initiator.ord, 1);
        let mut p = p2p_pair(&setup, 9);
        let source = p.nb.mr(256, VA, REMOTE_READ);
        p.nb.fill(source, 4);
        let sink = p.na.mr(256, VA, LOCAL_WRITE);
        p.na.sq.push_back(wr(
            1,
            SendOp::Read {
                remote_addr: VA,
                rkey: source,
            },
            &[sge(VA, 256, sink)],
        ));
        assert_eq!(p.tx(true), 0);
        assert_eq!(p.na.sq.len(), 1);
        assert_eq!(p.a.requester().outstanding(), 1);
        assert!(!p.a.wants_transmit());
        deliver_rtr_response(&mut p, &setup);
        assert!(p.na.cq.is_empty());
        assert_eq!(p.a.requester().outstanding(), 0);
        // The response unblocked the SQ.
        assert!(p.a.wants_transmit());
        assert!(p.tx(true) > 0);
        assert!(p.na.sq.is_empty());
        assert_eq!(
            segments(&p.wire[0]),
            vec![(Opcode::ReadRequest, Some((1, 2)))]
        );
        p.pump();
        assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, 256)]);
        assert_eq!(p.na.region(sink).data, p.nb.region(source).data);
        assert!(!p.a.is_terminated() && !p.b.is_terminated());
    }
}

/// The RTR's credit completes nothing when the QP is flushed or the peer
/// terminates over it before its response arrives.
#[test]
fn read_rtr_never_completes() {
    let setup = p2p_setup(RtrKind::Read, true, 1024, DEPTHS);
    let mut p = p2p_pair(&setup, 1);
    p.a.flush(&mut p.na);
    assert!(p.na.cq.is_empty());
    assert_eq!(p.a.requester().outstanding(), 0);

    // A TERMINATE echoing the RTR (queue 1, MSN 1), as a responder that
    // refused it would send.
    let mut p = p2p_pair(&setup, 1);
    let rtr_ulpdu =
        &setup.rtr[2..2 + usize::from(u16::from_be_bytes([setup.rtr[0], setup.rtr[1]]))];
    let terminate = forge(
        true,
        1024,
        WorkRequest::Terminate(TerminateMessage::reporting(
            TermError::RdmapCatastrophicStream,
            Some(rtr_ulpdu),
        )),
        &[],
    );
    p.ba.extend_from_slice(&terminate);
    p.rx(false);
    assert!(p.a.peer_terminated());
    assert!(p.na.cq.is_empty());
    p.a.flush(&mut p.na);
    assert!(p.na.cq.is_empty());
}

// Reads into several SGEs: one Read Request per non-empty SGE, in order, each
// with its own ORD credit; the work request completes once, on the last.

/// Where the three sinks of [`multi_read`] lie in their regions of A:
/// (offset in the region, length).
const PARTS: [(u64, u32); 3] = [(100, 1500), (7, 700), (1000, 2300)];
/// The offset in B's source region the multi-SGE Read starts at.
const PART_SOURCE: u64 = 200;
/// The total length of the three parts.
const PARTS_LEN: u32 = 1500 + 700 + 2300;
/// B's source region's address.
const SOURCE_VA: u64 = 0x10_0000;

/// A Pair whose A has three sink regions and whose B has a filled source
/// region of `source_len` bytes; returns the sinks' STags, the source's and
/// the 3-SGE Read (`wr_id` 1).
fn multi_read(p: &mut Pair, source_len: usize) -> ([u32; 3], u32, SendRequest) {
    let sinks = [0; 3].map(|_| p.na.mr(4000, VA, LOCAL_WRITE));
    let source = p.nb.mr(source_len, SOURCE_VA, REMOTE_READ);
    p.nb.fill(source, 7);
    let list: Vec<Sge> = sinks
        .iter()
        .zip(PARTS)
        .map(|(&sink, (at, len))| sge(VA + at, len, sink))
        .collect();
    let read = wr(
        1,
        SendOp::Read {
            remote_addr: SOURCE_VA + PART_SOURCE,
            rkey: source,
        },
        &list,
    );
    (sinks, source, read)
}

/// The three sinks hold the source's bytes in order, and nothing else.
fn check_parts(p: &Pair, sinks: [u32; 3], source: u32, ctx: &str) {
    let src = &p.nb.region(source).data;
    let mut from = PART_SOURCE as usize;
    for (&sink, (at, len)) in sinks.iter().zip(PARTS) {
        let (at, len) = (at as usize, len as usize);
        let data = &p.na.region(sink).data;
        assert_eq!(&data[at..at + len], &src[from..from + len], "{ctx}");
        assert!(data[..at].iter().all(|&b| b == 0), "{ctx}");
        assert!(data[at + len..].iter().all(|&b| b == 0), "{ctx}");
        from += len;
    }
}

/// The opcodes of the segments A sent.
fn sent_opcodes(p: &Pair) -> Vec<Opcode> {
    segments(&p.wire[0]).into_iter().map(|(op, _)| op).collect()
}

#[test]
fn multi_sge_read_fills_the_sinks_in_order() {
    for ord in [8, 2, 1] {
        for setup in setups() {
            let setup = Setup { ord, ..setup };
            let ctx = format!("{setup:?}");
            let mut p = Pair::new(setup);
            p.record = true;
            let (sinks, source, read) = multi_read(&mut p, 6000);
            p.na.sq.push_back(read);
            p.pump();
            assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, PARTS_LEN)], "{ctx}");
            check_parts(&p, sinks, source, &ctx);
            // One Read Request per SGE, MSNs 1 to 3 of queue 1.
            let segs = segments(&p.wire[0]);
            assert_eq!(msns(&segs, 1), vec![1, 2, 3], "{ctx}");
            assert_eq!(sent_opcodes(&p), vec![Opcode::ReadRequest; 3], "{ctx}");
            assert_eq!(p.a.requester().outstanding(), 0);
            assert_eq!(p.b.responder().pending(), 0);
            assert!(!p.a.wants_transmit() && !p.b.wants_transmit());
            assert!(!p.a.is_terminated() && !p.b.is_terminated());
        }
    }
}

#[test]
fn multi_sge_read_parts_take_one_credit_each() {
    // ORD 8: all three parts go at once.
    let mut p = Pair::new(Setup::default());
    let (sinks, source, read) = multi_read(&mut p, 6000);
    p.na.sq.push_back(read);
    p.tx(true);
    assert_eq!(p.a.requester().outstanding(), 3);
    assert!(p.na.sq.is_empty());
    assert!(!p.a.wants_transmit());
    p.pump();
    assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, PARTS_LEN)]);
    check_parts(&p, sinks, source, "ord 8");

    // ORD 1: one part at a time, the next as the response to the previous
    // one frees its credit; the work request completes on the last.
    let mut p = Pair::new(Setup {
        ord: 1,
        ..Setup::default()
    });
    p.record = true;
    let (sinks, source, read) = multi_read(&mut p, 6000);
    p.na.sq.push_back(read);
    for part in 0..3 {
        assert!(p.tx(true) > 0, "part {part}");
        assert_eq!(p.a.requester().outstanding(), 1, "part {part}");
        // Taken from the SQ with its first part.
        assert!(p.na.sq.is_empty());
        // The next part waits for the credit.
        assert_eq!(p.tx(true), 0, "part {part}");
        assert!(!p.a.wants_transmit(), "part {part}");
        p.rx(true);
        assert!(p.b.wants_transmit());
        p.tx(false);
        p.rx(false);
        assert_eq!(p.a.requester().outstanding(), 0, "part {part}");
        if part < 2 {
            assert!(p.na.cq.is_empty(), "part {part}");
            assert!(p.a.wants_transmit(), "part {part}");
        }
    }
    assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, PARTS_LEN)]);
    assert!(!p.a.wants_transmit());
    assert_eq!(p.tx(true), 0);
    check_parts(&p, sinks, source, "ord 1");
    assert_eq!(msns(&segments(&p.wire[0]), 1), vec![1, 2, 3]);

    // ORD 2: two parts, then the third.
    let mut p = Pair::new(Setup {
        ord: 2,
        ..Setup::default()
    });
    let (sinks, source, read) = multi_read(&mut p, 6000);
    p.na.sq.push_back(read);
    p.tx(true);
    assert_eq!(p.a.requester().outstanding(), 2);
    p.pump();
    assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, PARTS_LEN)]);
    check_parts(&p, sinks, source, "ord 2");
}

#[test]
fn work_requests_after_a_multi_sge_read_wait_for_it() {
    for ord in [1, 8] {
        for setup in setups() {
            let setup = Setup { ord, ..setup };
            let ctx = format!("{setup:?}");
            let mut p = Pair::new(setup);
            p.record = true;
            let (sinks, source, read) = multi_read(&mut p, 6000);
            let dst = p.nb.mr(64, VA, LOCAL_WRITE);
            let word = p.nb.mr(8, 0, REMOTE_ATOMIC);
            let result = p.na.mr(16, VA, LOCAL_WRITE);
            p.nb.rq.push_back(RecvRequest {
                wr_id: 10,
                sges: sges(&[sge(VA, 64, dst)]),
            });
            p.nb.rq.push_back(RecvRequest {
                wr_id: 11,
                sges: sges(&[sge(VA, 64, dst)]),
            });
            p.na.sq.push_back(read);
            p.na.sq.push_back(wr(2, send_op(), &[]));
            p.na.sq.push_back(wr(
                3,
                SendOp::Read {
                    remote_addr: SOURCE_VA,
                    rkey: source,
                },
                &[sge(VA, 8, result)],
            ));
            p.na.sq.push_back(wr(
                4,
                SendOp::FetchAdd {
                    remote_addr: 0,
                    rkey: word,
                    add: 5,
                    add_mask: 0,
                },
                &[sge(VA + 8, 8, result)],
            ));
            let mut fenced = wr(5, send_op(), &[]);
            fenced.fence = true;
            p.na.sq.push_back(fenced);
            p.pump();
            // Requests complete in order. The unfenced Send completes when it
            // is sent, right after the Read's last part (before its
            // response); the fenced Send waits for all the parts' responses.
            let ids: Vec<u64> = p.na.cq.iter().map(|c| c.wr_id).collect();
            assert_eq!(ids, vec![2, 1, 3, 4, 5], "{ctx}");
            assert!(
                p.na.cq.iter().all(|c| c.status == WcStatus::Success),
                "{ctx}"
            );
            assert_eq!(p.na.cq[1].byte_len, PARTS_LEN);
            check_parts(&p, sinks, source, &ctx);
            // On the wire, nothing overtook a part: the three Read Requests,
            // then the Send, then the later requests, then the fenced Send.
            use Opcode::*;
            assert_eq!(
                sent_opcodes(&p),
                vec![
                    ReadRequest,
                    ReadRequest,
                    ReadRequest,
                    Send,
                    ReadRequest,
                    AtomicRequest,
                    Send
                ],
                "{ctx}"
            );
        }
    }
}

#[test]
fn multi_sge_read_failing_at_the_peer_completes_once() {
    // The source region ends inside part 1, 2 or 3: the peer terminates on
    // that part's Read Request, which completes the work request in error;
    // the flush then completes it no more.
    for (failing, source_len) in [(1, 1000), (2, 2000), (3, 4000)] {
        for ord in [1, 2, 8] {
            for setup in setups() {
                let setup = Setup { ord, ..setup };
                let ctx = format!("part {failing} {setup:?}");
                let mut p = Pair::new(setup);
                let (_, _, read) = multi_read(&mut p, source_len);
                p.na.sq.push_back(read);
                p.na.sq.push_back(wr(
                    2,
                    SendOp::Read {
                        remote_addr: SOURCE_VA,
                        rkey: p.nb.mrs[1].stag,
                    },
                    &[sge(VA, 8, p.na.mrs[1].stag)],
                ));
                p.pump();
                assert!(p.a.peer_terminated(), "{ctx}");
                assert_eq!(p.b.termination(), Some(TermError::RdmapBaseBounds));
                assert_eq!(
                    p.na.cq,
                    vec![err(1, WcOpcode::RdmaRead, WcStatus::RemAccessErr)],
                    "{ctx}"
                );
                p.a.flush(&mut p.na);
                p.a.flush(&mut p.na);
                assert_eq!(
                    p.na.cq,
                    vec![
                        err(1, WcOpcode::RdmaRead, WcStatus::RemAccessErr),
                        err(2, WcOpcode::RdmaRead, WcStatus::WrFlushErr)
                    ],
                    "{ctx}"
                );
                assert!(!p.a.wants_transmit());
            }
        }
    }
}

#[test]
fn flush_in_the_middle_of_a_multi_sge_read_completes_it_once() {
    // After `responses` of its parts' responses arrived.
    for (ord, responses) in [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (8, 0), (8, 2)] {
        let ctx = format!("ord {ord}, {responses} responses");
        let mut p = Pair::new(Setup {
            ord,
            ..Setup::default()
        });
        let (_, _, read) = multi_read(&mut p, 6000);
        p.na.sq.push_back(read);
        p.na.sq.push_back(wr(2, send_op(), &[]));
        p.nb.rq.push_back(RecvRequest {
            wr_id: 9,
            sges: sges(&[]),
        });
        p.tx(true);
        // B answers the parts A sent; A gets `responses` of the answers, byte
        // by byte, and sends the parts the freed credits allow.
        let mut stream = Vec::new();
        let mut from = 0;
        for _ in 0..responses {
            let before = p.a.requester().outstanding();
            while p.a.requester().outstanding() == before {
                if from == stream.len() {
                    p.rx(true);
                    p.tx(false);
                    stream = std::mem::take(&mut p.ba);
                    from = 0;
                }
                p.a.receive(&stream[from..from + 1], &mut p.na).unwrap();
                from += 1;
            }
            p.tx(true);
        }
        // Once the last part is out, the Send behind the Read goes and
        // completes; before, it waits on the SQ.
        let all_out = ord + responses >= 3;
        assert_eq!(p.a.requester().outstanding(), ord.min(3 - responses));
        // A signalled message completes on the call after the one that
        // produced it.
        p.tx(true);
        let sent = vec![ok(2, WcOpcode::Send, 0)];
        assert_eq!(p.na.cq, if all_out { sent } else { vec![] }, "{ctx}");
        p.a.flush(&mut p.na);
        let mut want = vec![err(1, WcOpcode::RdmaRead, WcStatus::WrFlushErr)];
        if all_out {
            want.insert(0, ok(2, WcOpcode::Send, 0));
        } else {
            want.push(err(2, WcOpcode::Send, WcStatus::WrFlushErr));
        }
        assert_eq!(p.na.cq, want, "{ctx}");
        p.a.flush(&mut p.na);
        assert_eq!(p.na.cq.len(), 2, "{ctx}");
        // The rest of the responses finds the stream gone.
        if from < stream.len() {
            assert!(p.a.receive(&stream[from..], &mut p.na).is_err());
        }
        assert_eq!(p.na.cq.len(), 2, "{ctx}");
        assert_eq!(p.tx(true), 0);
    }
}

/// Where a forged Read Response to part 2 goes, given the three sinks: (STag,
/// tagged offset, length).
type PartAim<'a> = &'a dyn Fn([u32; 3]) -> (u32, u64, u32);

#[test]
fn read_response_outside_its_parts_sink_is_refused() {
    // A Read into the three sinks; the peer answers part 1 correctly, then
    // aims part 2's response elsewhere.
    let aims: [PartAim<'_>; 5] = [
        // Part 1's sink.
        &|s| (s[0], VA + PARTS[0].0, PARTS[1].1),
        // Part 3's sink, which a later request names.
        &|s| (s[2], VA + PARTS[2].0, PARTS[1].1),
        // Part 2's region, one byte before its sink.
        &|s| (s[1], VA + PARTS[1].0 - 1, PARTS[1].1),
        // Part 2's sink, one byte longer.
        &|s| (s[1], VA + PARTS[1].0, PARTS[1].1 + 1),
        // Part 2's sink's length at part 1's address.
        &|s| (s[1], VA + PARTS[0].0, PARTS[1].1),
    ];
    for setup in setups() {
        for (i, aim) in aims.iter().enumerate() {
            let ctx = format!("aim {i} {setup:?}");
            let mut p = Pair::new(setup);
            let (sinks, _, read) = multi_read(&mut p, 6000);
            p.na.sq.push_back(read);
            p.tx(true);
            assert_eq!(p.a.requester().outstanding(), 3);
            p.ab.clear();
            let first = vec![FORGED; PARTS[0].1 as usize];
            let mut stream = forge(
                setup.crc,
                4096,
                WorkRequest::ReadResponse {
                    sink_stag: sinks[0],
                    sink_tagged_offset: VA + PARTS[0].0,
                    len: PARTS[0].1,
                },
                &first,
            );
            let (stag, to, len) = aim(sinks);
            stream.extend(forge(
                setup.crc,
                4096,
                WorkRequest::ReadResponse {
                    sink_stag: stag,
                    sink_tagged_offset: to,
                    len,
                },
                &vec![FORGED; len as usize],
            ));
            p.ba = stream;
            p.rx(false);
            assert_eq!(p.a.termination(), Some(TermError::DdpBaseBounds), "{ctx}");
            assert!(!p.a.peer_terminated());
            // Part 1 landed in its sink, nothing else anywhere.
            let (at, len) = (PARTS[0].0 as usize, PARTS[0].1 as usize);
            let data = &p.na.region(sinks[0]).data;
            assert!(data[at..at + len].iter().all(|&b| b == FORGED), "{ctx}");
            assert!(data[..at].iter().all(|&b| b == 0), "{ctx}");
            assert!(data[at + len..].iter().all(|&b| b == 0), "{ctx}");
            for sink in &sinks[1..] {
                assert!(p.na.region(*sink).data.iter().all(|&b| b == 0), "{ctx}");
            }
            // The work request completes once, as a bad response; the flush
            // completes it no more.
            let refused = vec![err(1, WcOpcode::RdmaRead, WcStatus::BadRespErr)];
            assert_eq!(p.na.cq, refused, "{ctx}");
            assert!(p.tx(true) > 0);
            p.a.flush(&mut p.na);
            p.a.flush(&mut p.na);
            assert_eq!(p.na.cq, refused, "{ctx}");
        }
    }
}

#[test]
fn multi_sge_read_completes_only_once_every_part_is_filled() {
    // The peer answers each of the three parts in two segments, except that
    // part `short`'s response is one zero-length last segment.
    for short in [None, Some(0), Some(1), Some(2)] {
        for setup in setups() {
            let ctx = format!("short {short:?} {setup:?}");
            let mut p = Pair::new(setup);
            let (sinks, _, read) = multi_read(&mut p, 6000);
            p.na.sq.push_back(read);
            p.tx(true);
            assert_eq!(p.a.requester().outstanding(), 3, "{ctx}");
            p.ab.clear();
            for (part, (&sink, (at, len))) in sinks.iter().zip(PARTS).enumerate() {
                let segments = if short == Some(part) {
                    vec![(0, 0, true)]
                } else {
                    vec![(0, len / 2, false), (len / 2, len - len / 2, true)]
                };
                for seg in segments {
                    p.ba.extend(response_segment(setup.crc, sink, VA + at, seg));
                }
            }
            p.rx(false);
            // The parts before the short one were placed, the others not.
            for (part, (&sink, (at, len))) in sinks.iter().zip(PARTS).enumerate() {
                let (at, len) = (at as usize, len as usize);
                let data = &p.na.region(sink).data;
                let placed = short.map_or(true, |short| part < short);
                for (k, &b) in data[at..at + len].iter().enumerate() {
                    assert_eq!(b, if placed { sink_byte(k) } else { 0 }, "{ctx}");
                }
            }
            if short.is_none() {
                assert!(!p.a.is_terminated(), "{ctx}");
                assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, PARTS_LEN)], "{ctx}");
                continue;
            }
            assert_eq!(p.a.termination(), Some(TermError::DdpBaseBounds), "{ctx}");
            // The work request completes once, as a bad response.
            let refused = vec![err(1, WcOpcode::RdmaRead, WcStatus::BadRespErr)];
            assert_eq!(p.na.cq, refused, "{ctx}");
            p.a.flush(&mut p.na);
            p.a.flush(&mut p.na);
            assert_eq!(p.na.cq, refused, "{ctx}");
        }
    }
}

#[test]
fn read_request_whose_source_or_sink_wraps_is_refused_on_arrival() {
    // (source TO, sink TO, length): sinks that end past 2^64 by one byte or
    // many, the source valid; a source that does.
    let cases = [
        (SOURCE_VA, u64::MAX, 2),
        (SOURCE_VA, u64::MAX - 99, 101),
        (SOURCE_VA, u64::MAX - 4000, 5000),
        (u64::MAX - 10, 0, 100),
    ];
    for (source_to, sink_to, len) in cases {
        for setup in setups() {
            let ctx = format!("{source_to:#x} {sink_to:#x} {len} {setup:?}");
            let mut p = Pair::new(setup);
            let source = p.nb.mr(6000, SOURCE_VA, REMOTE_READ);
            let request = ReadRequestHeader {
                sink_stag: 0x1234,
                sink_tagged_offset: sink_to,
                read_size: len,
                source_stag: source,
                source_tagged_offset: source_to,
            };
            p.ab = forge(setup.crc, 4096, WorkRequest::ReadRequest(request), &[]);
            p.rx(true);
            assert_eq!(p.b.termination(), Some(TermError::RdmapToWrap), "{ctx}");
            // Nothing was queued to answer: the TERMINATE is all B sends.
            assert_eq!(p.b.responder().pending(), 0, "{ctx}");
            p.record = true;
            p.tx(false);
            let sent: Vec<Opcode> = segments(&p.wire[1]).iter().map(|s| s.0).collect();
            assert_eq!(sent, vec![Opcode::Terminate], "{ctx}");
            p.rx(false);
            assert!(p.a.peer_terminated(), "{ctx}");
            assert_eq!(p.a.termination(), Some(TermError::RdmapToWrap), "{ctx}");
            assert_eq!(p.tx(false), 0, "{ctx}");
        }
    }
}

#[test]
fn zero_length_sges_of_a_read_are_skipped() {
    for ord in [1, 8] {
        let setup = Setup {
            ord,
            ..Setup::default()
        };
        let mut p = Pair::new(setup);
        p.record = true;
        let source = p.nb.mr(1000, SOURCE_VA, REMOTE_READ);
        p.nb.fill(source, 4);
        let sink = p.na.mr(1000, VA, LOCAL_WRITE);
        // Zero-length SGEs are not looked at: not even their keys.
        p.na.sq.push_back(wr(
            1,
            SendOp::Read {
                remote_addr: SOURCE_VA + 10,
                rkey: source,
            },
            &[
                sge(0, 0, 0xdead_beef),
                sge(VA + 500, 100, sink),
                sge(VA, 0, 0x1234),
                sge(VA, 200, sink),
                sge(1, 0, 0),
            ],
        ));
        // Only zero-length SGEs: one zero-length Read, as with a single one.
        p.na.sq.push_back(wr(
            2,
            SendOp::Read {
                remote_addr: 0,
                rkey: source,
            },
            &[sge(VA, 0, sink), sge(VA + 8, 0, 0x77)],
        ));
        p.pump();
        assert_eq!(
            p.na.cq,
            vec![ok(1, WcOpcode::RdmaRead, 300), ok(2, WcOpcode::RdmaRead, 0)],
            "ord {ord}"
        );
        let src = &p.nb.region(source).data;
        let data = &p.na.region(sink).data;
        assert_eq!(&data[500..600], &src[10..110]);
        assert_eq!(&data[..200], &src[110..310]);
        assert!(data[200..500].iter().all(|&b| b == 0));
        assert!(data[600..].iter().all(|&b| b == 0));
        assert_eq!(msns(&segments(&p.wire[0]), 1), vec![1, 2, 3], "ord {ord}");
    }
}

#[test]
fn multi_sge_read_local_errors() {
    // A bad sink anywhere fails the Read before any part is sent.
    for bad in 0..3 {
        let mut p = Pair::new(Setup::default());
        let (mut sinks, _, mut read) = multi_read(&mut p, 6000);
        sinks[bad] = 0x7700;
        let list: Vec<Sge> = sinks
            .iter()
            .zip(PARTS)
            .map(|(&sink, (at, len))| sge(VA + at, len, sink))
            .collect();
        read.sges = sges(&list);
        p.na.sq.push_back(read);
        p.na.sq.push_back(wr(2, send_op(), &[]));
        p.pump();
        assert_eq!(
            p.na.cq,
            vec![err(1, WcOpcode::RdmaRead, WcStatus::LocProtErr)],
            "sink {bad}"
        );
        assert_eq!(p.b.responder().pending(), 0);
        assert!(p.b.peer_terminated());
        p.a.flush(&mut p.na);
        assert_eq!(p.na.cq.len(), 2);
    }

    // A source range past the end of the address space.
    let mut p = Pair::new(Setup::default());
    let sink = p.na.mr(64, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: u64::MAX - 4,
            rkey: 0x100,
        },
        &[sge(VA, 8, sink), sge(VA + 8, 8, sink)],
    ));
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![err(1, WcOpcode::RdmaRead, WcStatus::LocLenErr)]
    );

    // More than 4 GiB in all.
    let mut p = Pair::new(Setup::default());
    let sink = p.na.mr(64, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: 0x100,
        },
        &[sge(VA, u32::MAX, sink), sge(VA, 1, sink)],
    ));
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![err(1, WcOpcode::RdmaRead, WcStatus::LocLenErr)]
    );
}

#[test]
fn read_into_max_sge_sinks() {
    // No more than MAX_SGE SGEs can be posted.
    let one = sge(VA, 10, 0x100);
    assert!(SgeList::new(&[one; MAX_SGE + 1]).is_none());
    for ord in [1, 3, 8] {
        let mut p = Pair::new(Setup {
            ord,
            ..Setup::default()
        });
        let source = p.nb.mr(4096, 0, REMOTE_READ);
        p.nb.fill(source, 9);
        let sink = p.na.mr(4096, VA, LOCAL_WRITE);
        // Six sinks in reverse order within the region.
        let list: Vec<Sge> = (0..MAX_SGE as u64)
            .map(|i| sge(VA + 3000 - 500 * i, 300 + i as u32, sink))
            .collect();
        p.na.sq.push_back(wr(
            1,
            SendOp::Read {
                remote_addr: 0,
                rkey: source,
            },
            &list,
        ));
        p.pump();
        let total: u32 = list.iter().map(|s| s.length).sum();
        assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, total)]);
        let src = &p.nb.region(source).data;
        let data = &p.na.region(sink).data;
        let mut from = 0;
        for s in &list {
            let at = (s.addr - VA) as usize;
            let len = s.length as usize;
            assert_eq!(&data[at..at + len], &src[from..from + len], "ord {ord}");
            from += len;
        }
    }
}

// Payload by reference: the driver sends the payload of some FPDUs straight
// from memory, between the header and trailer the engine writes.

/// Fills a region with bytes that do not repeat with any short period, so
/// that payload from a wrong offset cannot pass for the right one.
fn noise(node: &mut Node, stag: u32, seed: u64) {
    for (i, b) in node.region_mut(stag).data.iter_mut().enumerate() {
        *b = ((i as u64 ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8;
    }
}

/// What some traffic must leave behind, and which payloads may be offered
/// for sending by reference.
#[derive(Debug, Default)]
struct Traffic {
    /// (region of a, byte offset, the bytes it must hold then).
    at_a: Vec<(u32, usize, Vec<u8>)>,
    /// The same at b.
    at_b: Vec<(u32, usize, Vec<u8>)>,
    /// a's completions, in wr_id order.
    cq_a: Vec<Completion>,
    /// b's completions, in order.
    cq_b: Vec<Completion>,
    /// The gather lists of the work requests a may offer, and their length.
    gathers: Vec<(Vec<Sge>, u32)>,
    /// The Read Responses b may offer: (source STag, byte offset, length).
    tagged: Vec<(u32, u64, u32)>,
}

/// The bytes `list` gathers from `node`.
fn gathered(node: &mut Node, list: &[Sge]) -> Vec<u8> {
    let len: u32 = list.iter().map(|s| s.length).sum();
    node.payload(&Source::Gather {
        sges: list.to_vec(),
        offset: 0,
        len,
    })
}

impl Traffic {
    /// Posts on a three RDMA Writes and three Sends of about 64 KiB each
    /// (ids `first..first + 6`), from gather lists of up to three SGEs (one
    /// of them empty; lengths not multiples of 4, so that FPDUs get pads)
    /// scattered over a source region; receive requests for the Sends at b.
    fn bulk(&mut self, p: &mut Pair, first: u64, signaled: bool) {
        const LISTS: [&[u32]; 6] = [
            &[30_001, 20_002, 15_534],
            &[1, 65_534],
            &[4_095, 4_097, 57_341],
            &[40_000, 25_539],
            &[12_345, 0, 53_190],
            &[65_538],
        ];
        const SLOT: usize = 70_000;
        let src = p.na.mr(420_000, 0x1000_0000, 0);
        noise(&mut p.na, src, first);
        let wdst = p.nb.mr(6 * SLOT + 16, 0x2000_0000, REMOTE_WRITE);
        let rdst = p.nb.mr(6 * SLOT + 16, 0x2100_0000, LOCAL_WRITE);
        let mut cursor = 0x1000_0000 + 5;
        for (k, lengths) in LISTS.iter().enumerate() {
            let list: Vec<Sge> = lengths
                .iter()
                .map(|&len| {
                    let s = sge(cursor, len, src);
                    cursor += u64::from(len) + 7;
                    s
                })
                .collect();
            let len: u32 = lengths.iter().sum();
            let bytes = gathered(&mut p.na, &list);
            let at = k * SLOT + 3;
            let id = first + k as u64;
            let (op, opcode) = if k % 2 == 0 {
                let op = SendOp::Write {
                    remote_addr: 0x2000_0000 + at as u64,
                    rkey: wdst,
                };
                self.at_b.push((wdst, at, bytes));
                (op, WcOpcode::RdmaWrite)
            } else {
                p.nb.rq.push_back(RecvRequest {
                    wr_id: id,
                    sges: sges(&[
                        sge(0x2100_0000 + at as u64, 30_000, rdst),
                        sge(0x2100_0000 + at as u64 + 30_000, 36_000, rdst),
                    ]),
                });
                self.at_b.push((rdst, at, bytes));
                self.cq_b.push(ok(id, WcOpcode::Recv, len));
                (send_op(), WcOpcode::Send)
            };
            let mut w = wr(id, op, &list);
            w.signaled = signaled;
            p.na.sq.push_back(w);
            if signaled {
                self.cq_a.push(ok(id, opcode, len));
            } else {
                self.gathers.push((list, len));
            }
        }
    }

    /// Posts on a three Reads of b's memory (ids `first..first + 3`): 65537
    /// bytes, 3 bytes, and 30004 bytes into three SGEs (one empty).
    fn reads(&mut self, p: &mut Pair, first: u64) {
        let source = p.nb.mr(200_000, 0x10_0000, REMOTE_READ);
        noise(&mut p.nb, source, first ^ 0x55);
        let sink = p.na.mr(200_000, 0x5000_0000, LOCAL_WRITE);
        let reads: [(u64, &[(usize, u32)]); 3] = [
            (777, &[(5, 65_537)]),
            (70_001, &[(70_000, 3)]),
            (
                100_000,
                &[(100_000, 10_001), (110_000, 0), (120_000, 20_003)],
            ),
        ];
        for (k, (from, parts)) in reads.into_iter().enumerate() {
            let id = first + k as u64;
            let list: Vec<Sge> = parts
                .iter()
                .map(|&(at, len)| sge(0x5000_0000 + at as u64, len, sink))
                .collect();
            p.na.sq.push_back(wr(
                id,
                SendOp::Read {
                    remote_addr: 0x10_0000 + from,
                    rkey: source,
                },
                &list,
            ));
            let mut offset = from;
            for &(at, len) in parts {
                let bytes = p.nb.tagged(source, offset, len as usize).unwrap().to_vec();
                if len > 0 {
                    self.tagged.push((source, offset, len));
                }
                self.at_a.push((sink, at, bytes));
                offset += u64::from(len);
            }
            let total = parts.iter().map(|&(_, len)| len).sum();
            self.cq_a.push(ok(id, WcOpcode::RdmaRead, total));
        }
    }

    /// Posts on a work requests around the by-reference threshold (ids
    /// `first..first + 8`): only the unsignalled ones of at least
    /// [`BY_REFERENCE_FROM`] bytes may be offered.
    fn threshold(&mut self, p: &mut Pair, first: u64) {
        const SLOT: usize = 70_000;
        let src = p.na.mr(100_000, 0x3000_0000, 0);
        noise(&mut p.na, src, first ^ 0xaa);
        let wdst = p.nb.mr(2 * SLOT, 0x3100_0000, REMOTE_WRITE);
        let rdst = p.nb.mr(8 * 10_000, 0x3200_0000, LOCAL_WRITE);
        let from = BY_REFERENCE_FROM;
        let half = from / 2;
        let write = |at: usize| SendOp::Write {
            remote_addr: 0x3100_0000 + at as u64,
            rkey: wdst,
        };
        // (op, SGE lengths, signalled, offered).
        let posts: [(SendOp, &[u32], bool, bool); 8] = [
            (write(0), &[65_536], true, false),
            (write(SLOT), &[from - 1], false, false),
            (send_op(), &[half, half], false, true),
            (send_op(), &[10], true, false),
            (
                SendOp::WriteImm {
                    remote_addr: 0x3100_0000 + SLOT as u64 + 5000,
                    rkey: wdst,
                    imm: 0x1234_5678,
                },
                &[3000, 2001],
                false,
                true,
            ),
            (
                SendOp::SendImm {
                    imm: 77,
                    solicited: false,
                },
                &[8191],
                false,
                true,
            ),
            (send_op(), &[], false, false),
            (send_op(), &[from - 1], false, false),
        ];
        let mut cursor = 0x3000_0000 + 1;
        // Receive requests 200, 201, ..., 10000 bytes each.
        let mut recv: u64 = 0;
        let mut post_recv = |p: &mut Pair| {
            let at = recv as usize * 10_000;
            p.nb.rq.push_back(RecvRequest {
                wr_id: 200 + recv,
                sges: sges(&[sge(0x3200_0000 + at as u64, 10_000, rdst)]),
            });
            recv += 1;
            (199 + recv, at)
        };
        for (k, (op, lengths, signaled, offered)) in posts.into_iter().enumerate() {
            let list: Vec<Sge> = lengths
                .iter()
                .map(|&len| {
                    let s = sge(cursor, len, src);
                    cursor += u64::from(len) + 3;
                    s
                })
                .collect();
            let len: u32 = lengths.iter().sum();
            let bytes = gathered(&mut p.na, &list);
            let id = first + k as u64;
            match op {
                SendOp::Write { remote_addr, .. } | SendOp::WriteImm { remote_addr, .. } => {
                    self.at_b
                        .push((wdst, (remote_addr - 0x3100_0000) as usize, bytes));
                }
                _ => {
                    let (rid, at) = post_recv(p);
                    self.at_b.push((rdst, at, bytes));
                    self.cq_b.push(ok(rid, WcOpcode::Recv, len));
                }
            }
            match op {
                SendOp::WriteImm { imm, .. } => {
                    let (rid, _) = post_recv(p);
                    let mut c = ok(rid, WcOpcode::RecvRdmaWithImm, 0);
                    c.imm = Some(imm);
                    self.cq_b.push(c);
                }
                SendOp::SendImm { imm, .. } => {
                    let (rid, _) = post_recv(p);
                    let mut c = ok(rid, WcOpcode::Recv, 0);
                    c.imm = Some(imm);
                    self.cq_b.push(c);
                }
                _ => {}
            }
            let mut w = wr(id, op, &list);
            w.signaled = signaled;
            p.na.sq.push_back(w);
            if signaled {
                self.cq_a.push(ok(id, op.wc_opcode(), len));
            }
            if offered {
                self.gathers.push((list, len));
            }
        }
    }

    /// Checks what arrived, and the offers: only of the payloads that may be
    /// offered, within them, and if `whole`, each of them offered exactly
    /// once, in order.
    fn check(&self, p: &mut Pair, whole: bool, ctx: &str) {
        assert!(!p.a.is_terminated() && !p.b.is_terminated(), "{ctx}");
        let mut cq_a = p.na.cq.clone();
        cq_a.sort_by_key(|c| c.wr_id);
        let mut expected_a = self.cq_a.clone();
        expected_a.sort_by_key(|c| c.wr_id);
        assert_eq!(cq_a, expected_a, "{ctx}");
        assert_eq!(p.nb.cq, self.cq_b, "{ctx}");
        for (node, places) in [(&p.na, &self.at_a), (&p.nb, &self.at_b)] {
            for (stag, at, bytes) in places {
                let data = &node.region(*stag).data[*at..*at + bytes.len()];
                assert!(data == &bytes[..], "{ctx}: {stag:#x} at {at}");
            }
        }
        // (gather list or tagged range, offset, len) of every offer.
        let mut gather_runs: Vec<Vec<(u32, u32)>> = vec![Vec::new(); self.gathers.len()];
        let mut tagged_runs: Vec<Vec<(u64, u32)>> = vec![Vec::new(); self.tagged.len()];
        for offer in &p.na.offers {
            let Source::Gather { sges, offset, len } = &offer.source else {
                panic!("{ctx}: a offered {offer:?}");
            };
            let index = self
                .gathers
                .iter()
                .position(|(list, _)| list == sges)
                .unwrap_or_else(|| panic!("{ctx}: a offered {offer:?}"));
            assert!(offset + len <= self.gathers[index].1, "{ctx}: {offer:?}");
            gather_runs[index].push((*offset, *len));
        }
        for offer in &p.nb.offers {
            let Source::Tagged { stag, offset, len } = offer.source else {
                panic!("{ctx}: b offered {offer:?}");
            };
            let index = self
                .tagged
                .iter()
                .position(|&(s, from, n)| {
                    s == stag && from <= offset && offset + u64::from(len) <= from + u64::from(n)
                })
                .unwrap_or_else(|| panic!("{ctx}: b offered {offer:?}"));
            tagged_runs[index].push((offset, len));
        }
        if whole {
            for ((_, total), runs) in self.gathers.iter().zip(&gather_runs) {
                let mut next = 0;
                for &(offset, len) in runs {
                    assert_eq!(offset, next, "{ctx}: {runs:?}");
                    next += len;
                }
                assert_eq!(next, *total, "{ctx}: {runs:?}");
            }
            for (&(_, from, total), runs) in self.tagged.iter().zip(&tagged_runs) {
                let mut next = from;
                for &(offset, len) in runs {
                    assert_eq!(offset, next, "{ctx}: {runs:?}");
                    next += u64::from(len);
                }
                assert_eq!(next, from + u64::from(total), "{ctx}: {runs:?}");
            }
        }
    }
}

/// A pair whose sides transmit by reference into `out_len` bytes with
/// `budget`, taking the offers `accept` says, recording the wire.
fn by_ref_pair(setup: Setup, accept: Accept, out_len: usize, budget: usize) -> Pair {
    let mut p = Pair::new(setup);
    p.by_ref = Some(ByRef { out_len, budget });
    p.na.accept = accept;
    p.nb.accept = accept;
    p.record = true;
    p
}

/// Runs `post` over a pair transmitting by reference and over one that
/// copies with FPDUs of the same size (a buffer of `budget` bytes); the
/// wire bytes of both directions must be identical (whatever `post` does
/// must not depend on how the transmissions interleave: a only posts, b only
/// responds). Returns the pair transmitting by reference, and what arrived.
fn against_transmit(
    setup: Setup,
    accept: Accept,
    out_len: usize,
    budget: usize,
    post: impl Fn(&mut Traffic, &mut Pair),
) -> (Pair, Traffic) {
    let ctx = format!("{setup:?} {accept:?} out {out_len} budget {budget}");
    let mut copy = Pair::new(setup);
    copy.out_len = budget;
    copy.record = true;
    let mut traffic = Traffic::default();
    post(&mut traffic, &mut copy);
    copy.pump();
    traffic.check(&mut copy, false, &ctx);
    assert!(copy.na.offers.is_empty() && copy.nb.offers.is_empty());
    let mut p = by_ref_pair(setup, accept, out_len, budget);
    let mut traffic = Traffic::default();
    post(&mut traffic, &mut p);
    p.pump();
    traffic.check(&mut p, accept == Accept::Always && !setup.crc, &ctx);
    if setup.crc {
        assert!(p.na.offers.is_empty() && p.nb.offers.is_empty(), "{ctx}");
    }
    let [a, b] = p.stats;
    assert_eq!(
        a.referenced,
        p.na.taken().map(|o| o.source.len() as usize).sum(),
        "{ctx}"
    );
    assert_eq!(
        b.referenced,
        p.nb.taken().map(|o| o.source.len() as usize).sum(),
        "{ctx}"
    );
    for side in 0..2 {
        assert!(
            p.wire[side] == copy.wire[side],
            "{ctx}: side {side} sent {} bytes, transmit {}",
            p.wire[side].len(),
            copy.wire[side].len()
        );
    }
    (p, traffic)
}

fn no_crc(fpdu_size: usize) -> Setup {
    Setup {
        crc: false,
        fpdu_size,
        seed: fpdu_size as u64 * 7 + 1,
        ..Setup::default()
    }
}

#[test]
fn large_unsignalled_writes_and_sends_go_by_reference() {
    for (fpdu_size, out_len) in [(1000, 4096), (4096, 1024), (9000, 4096), (65536, 65536)] {
        let (p, traffic) =
            against_transmit(no_crc(fpdu_size), Accept::Always, out_len, 65536, |t, p| {
                t.bulk(p, 1, false)
            });
        let ctx = format!("fpdu {fpdu_size} out {out_len}");
        let total: u32 = traffic.gathers.iter().map(|(_, len)| len).sum();
        let [a, b] = p.stats;
        // Every payload byte went by reference; the buffers held only
        // headers and trailers.
        assert_eq!(a.referenced, total as usize, "{ctx}");
        assert!(a.buffered * 16 < a.referenced, "{ctx}: {a:?}");
        assert_eq!(b.referenced, 0, "{ctx}");
        assert!(p.na.offers.iter().all(|o| o.taken));
        // Pads: some FPDUs' payload is not a multiple of 4.
        assert!(p.na.offers.iter().any(|o| o.source.len() % 4 != 0), "{ctx}");
    }
}

/// All the traffic of the tests below: a posts bulk unsignalled Writes and
/// Sends, Reads, and work requests around the threshold.
fn everything(t: &mut Traffic, p: &mut Pair) {
    t.bulk(p, 1, false);
    t.reads(p, 10);
    t.threshold(p, 20);
}

#[test]
fn only_unsignalled_work_requests_from_the_threshold_are_offered() {
    for fpdu_size in [1000, 65536] {
        let (p, traffic) =
            against_transmit(no_crc(fpdu_size), Accept::Always, 4096, 65536, |t, p| {
                // Signalled bulk traffic is copied, as are the small ones.
                t.bulk(p, 1, true);
                t.threshold(p, 20);
            });
        // The check saw each of the three offerable ones (4096 bytes, 5001
        // with Immediate, 8191 with Immediate) offered whole, and nothing
        // else.
        assert_eq!(traffic.gathers.len(), 3);
        let lens: Vec<u32> = traffic.gathers.iter().map(|(_, len)| *len).collect();
        assert_eq!(lens, [BY_REFERENCE_FROM, 5001, 8191]);
        assert_eq!(
            p.stats[0].referenced,
            (BY_REFERENCE_FROM + 5001 + 8191) as usize
        );
        assert!(p.na.offers.iter().all(|o| o.taken));
    }
}

#[test]
fn read_responses_are_offered_by_stag() {
    for (fpdu_size, out_len) in [(1000, 4096), (4096, 4096), (65536, 300)] {
        let (p, traffic) =
            against_transmit(no_crc(fpdu_size), Accept::Always, out_len, 65536, |t, p| {
                t.reads(p, 1)
            });
        let ctx = format!("fpdu {fpdu_size} out {out_len}");
        // a sent only Read Requests: nothing to offer.
        assert!(p.na.offers.is_empty(), "{ctx}");
        assert_eq!(p.stats[0].referenced, 0, "{ctx}");
        // b offered every Read Response payload byte, even the 3-byte one
        // (the check saw each offered whole, in order, by source STag and
        // byte offset in the region).
        let total: u32 = traffic.tagged.iter().map(|&(_, _, len)| len).sum();
        assert_eq!(p.stats[1].referenced, total as usize, "{ctx}");
        assert!(p.nb.offers.iter().any(|o| o.source.len() == 3), "{ctx}");
        assert!(p.stats[1].buffered * 16 < p.stats[1].referenced, "{ctx}");
    }
}

#[test]
fn with_crc_nothing_is_offered() {
    for fpdu_size in [1000, 4096, 65536] {
        let setup = Setup {
            crc: true,
            ..no_crc(fpdu_size)
        };
        let (p, _) = against_transmit(setup, Accept::Always, 65536, 65536, everything);
        assert!(p.na.offers.is_empty() && p.nb.offers.is_empty());
        assert_eq!(p.stats[0].referenced + p.stats[1].referenced, 0);
    }
}

#[test]
fn refused_offers_send_what_transmit_sends() {
    for fpdu_size in [128, 1000, 4096, 65536] {
        for budget in [4096, 65536] {
            // against_transmit compares the wire bytes.
            let (p, _) =
                against_transmit(no_crc(fpdu_size), Accept::Never, budget, budget, everything);
            let ctx = format!("fpdu {fpdu_size} budget {budget}");
            assert!(!p.na.offers.is_empty() && !p.nb.offers.is_empty(), "{ctx}");
            assert_eq!(p.na.taken().count() + p.nb.taken().count(), 0, "{ctx}");
            assert_eq!(p.stats[0].referenced + p.stats[1].referenced, 0, "{ctx}");
        }
    }
}

#[test]
fn taking_every_other_offer_mixes_copy_and_reference() {
    for (fpdu_size, out_len) in [(128, 4096), (1000, 1000), (4096, 65536), (65536, 65536)] {
        let (p, _) = against_transmit(
            no_crc(fpdu_size),
            Accept::EveryOther,
            out_len,
            65536,
            everything,
        );
        let ctx = format!("fpdu {fpdu_size} out {out_len}");
        for (node, stats) in [(&p.na, p.stats[0]), (&p.nb, p.stats[1])] {
            assert!(node.offers.iter().any(|o| o.taken), "{ctx}");
            assert!(node.offers.iter().any(|o| !o.taken), "{ctx}");
            // The copied half is in the buffers (unless there was no room
            // to copy: a refused offer is made again in the next call, and
            // then taken).
            if out_len > fpdu_size {
                assert!(stats.buffered * 3 > stats.referenced, "{ctx}: {stats:?}");
            }
        }
    }
}

#[test]
fn a_bad_gather_list_is_refused_and_fails_as_before() {
    for accept in [Accept::Never, Accept::Always] {
        let mut p = by_ref_pair(no_crc(4096), accept, 65536, 65536);
        let src = p.na.mr(10_000, VA, 0);
        let dst = p.nb.mr(10_000, VA, LOCAL_WRITE);
        p.nb.rq.push_back(RecvRequest {
            wr_id: 9,
            sges: sges(&[sge(VA, 10_000, dst)]),
        });
        // The second SGE names no region.
        let mut w = wr(1, send_op(), &[sge(VA, 5000, src), sge(VA, 5000, 0x7700)]);
        w.signaled = false;
        p.na.sq.push_back(w);
        p.pump();
        assert_eq!(p.na.cq, vec![err(1, WcOpcode::Send, WcStatus::LocProtErr)]);
        // Only payload from the first SGE was taken.
        assert!(
            p.na.offers.iter().all(|o| match &o.source {
                Source::Gather { offset, len, .. } => !o.taken || offset + len <= 5000,
                Source::Tagged { .. } => false,
            }),
            "{accept:?}"
        );
        assert!(p.na.offers.iter().any(|o| !o.taken), "{accept:?}");
        assert_eq!(p.a.termination(), Some(TermError::RdmapLocalCatastrophic));
        assert!(p.b.peer_terminated(), "{accept:?}");
    }
}

#[test]
fn budget_bounds_every_call_and_short_buffers_lose_nothing() {
    const BUDGET: usize = 8192;
    let mut p = Pair::new(no_crc(4096));
    let src = p.na.mr(40_006, VA, 0);
    noise(&mut p.na, src, 3);
    let dst = p.nb.mr(40_006, 0x1000, REMOTE_WRITE);
    let write = |at: u64| SendOp::Write {
        remote_addr: 0x1000 + at,
        rkey: dst,
    };
    // A signalled Write (copied), then an unsignalled one (by reference);
    // FPDUs of 4096 bytes carry 4076 payload bytes.
    p.na.sq.push_back(wr(1, write(0), &[sge(VA, 20_001, src)]));
    let mut w = wr(2, write(20_001), &[sge(VA + 20_001, 20_005, src)]);
    w.signaled = false;
    p.na.sq.push_back(w);
    let mut wire = Vec::new();
    let mut step = |p: &mut Pair, out_len: usize, accept: Accept| {
        p.na.accept = accept;
        let (t, bytes) = transmit_by_reference(&mut p.a, &mut p.na, out_len, BUDGET);
        wire.extend_from_slice(&bytes);
        t
    };
    // None of these calls runs out of work: each stops on room or budget.
    let t = |buffered, referenced, short| Transmitted {
        buffered,
        referenced,
        short,
        idle: false,
    };
    // No room for a copied FPDU: short, and nothing lost (again).
    assert_eq!(step(&mut p, 64, Accept::Always), t(0, 0, true));
    assert_eq!(step(&mut p, 64, Accept::Always), t(0, 0, true));
    assert!(p.a.wants_transmit());
    // Room for one: short after it.
    assert_eq!(step(&mut p, 5000, Accept::Always), t(4096, 0, true));
    // The budget ends the call (not short), however large the buffer.
    assert_eq!(step(&mut p, 1 << 17, Accept::Always), t(8192, 0, false));
    // The last two FPDUs (the last: 3697 payload bytes, 3 pad); the next
    // Write's first FPDU is over the budget left.
    assert_eq!(
        step(&mut p, 1 << 17, Accept::Always),
        t(4096 + 3720, 0, false)
    );
    // The signalled Write completes on the next call, once the driver had
    // its FPDUs.
    assert!(p.na.cq.is_empty());
    // By reference: each FPDU takes its header and CRC (20 bytes) in the
    // buffer; the budget stops it after two.
    assert_eq!(step(&mut p, 200, Accept::Always), t(40, 8152, false));
    assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaWrite, 20_001)]);
    // Room for the headers of only one: short.
    assert_eq!(step(&mut p, 150, Accept::Always), t(20, 4076, true));
    // Refused, and then no room to copy it: short, nothing produced.
    let offers = p.na.offers.len();
    assert_eq!(step(&mut p, 1000, Accept::Never), t(0, 0, true));
    assert_eq!(p.na.offers.len(), offers + 1);
    assert!(!p.na.offers[offers].taken);
    // The rest in one call: 4076 bytes, and 3701 (3 pad), one of them
    // copied.
    let last = step(&mut p, 1 << 17, Accept::EveryOther);
    assert_eq!(last.buffered + last.referenced, 4096 + 3724);
    assert!(
        [(20 + 3724, 4076), (4096 + 24, 3701)].contains(&(last.buffered, last.referenced)),
        "{last:?}"
    );
    assert!(!last.short);
    // It sent the last FPDU and found the SQ empty.
    assert!(last.idle);
    let after = step(&mut p, 1 << 17, Accept::Always);
    assert!(after.is_empty() && after.idle);
    assert!(!p.a.wants_transmit());
    // Every byte arrived, once.
    assert_eq!(p.b.receive(&wire, &mut p.nb), Ok(wire.len()));
    assert_eq!(&p.nb.region(dst).data, &p.na.region(src).data[..40_006]);
    assert!(p.nb.cq.is_empty() && !p.b.is_terminated());
    assert_eq!(p.na.cq.len(), 1);
}

#[test]
fn a_pending_terminate_waits_for_room() {
    let mut p = Pair::new(no_crc(4096));
    // A Read into a sink that does not exist fails before it is sent.
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: 0x100,
        },
        &[sge(VA, 10, 0x7700)],
    ));
    let (t, _) = transmit_by_reference(&mut p.a, &mut p.na, 64, 4096);
    assert_eq!((t.buffered, t.referenced, t.short), (0, 0, true));
    assert_eq!(
        p.na.cq,
        vec![err(1, WcOpcode::RdmaRead, WcStatus::LocProtErr)]
    );
    assert!(p.a.wants_transmit());
    let (t, wire) = transmit_by_reference(&mut p.a, &mut p.na, 4096, 4096);
    assert!(t.buffered > 0 && !t.short && t.referenced == 0, "{t:?}");
    assert!(!p.a.wants_transmit());
    assert!(p.b.receive(&wire, &mut p.nb).is_err());
    assert!(p.b.peer_terminated());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn by_reference_sends_what_transmit_sends(
        seed: u64,
        fpdu_size in 200usize..70_000,
        out_len in 0usize..70_000,
        budget in 4096usize..70_000,
        accept in 0u8..3,
        crc in proptest::bool::weighted(0.2),
    ) {
        let accept = [Accept::Never, Accept::Always, Accept::EveryOther][usize::from(accept)];
        let setup = Setup { crc, fpdu_size, seed, ..Setup::default() };
        // The FPDU size is the smaller of the configured one and the
        // budget, on both sides.
        let (p, _) = against_transmit(setup, accept, out_len, budget, everything);
        for stats in p.stats {
            prop_assert!(stats.buffered + stats.referenced <= stats.calls * budget);
        }
    }
}

#[test]
fn a_signalled_message_completes_on_the_call_after_its_fpdus() {
    let mut p = Pair::new(Setup::default());
    p.na.sq.push_back(wr(1, send_op(), &[]));
    // The call that produces the Send does not complete it: the driver
    // hands the FPDUs to TCP first. The engine asks for no kick meanwhile
    // (the transmitter calls again, as its call was not idle).
    assert!(p.tx(true) > 0);
    assert!(p.na.cq.is_empty());
    assert!(!p.a.wants_transmit());
    assert_eq!(p.tx(true), 0);
    assert_eq!(p.na.cq, vec![ok(1, WcOpcode::Send, 0)]);
    p.na.cq.clear();

    // An unsignalled one leaves nothing behind.
    let mut quiet = wr(2, send_op(), &[]);
    quiet.signaled = false;
    p.na.sq.push_back(quiet);
    assert!(p.tx(true) > 0);
    assert_eq!(p.tx(true), 0);
    assert!(p.na.cq.is_empty());

    // A flush before the next call completes it as sent, once; the SQ
    // entries behind it flush.
    p.na.sq.push_back(wr(3, send_op(), &[]));
    p.na.sq.push_back(wr(4, send_op(), &[]));
    let produced = p.tx(true);
    assert!(produced > 0);
    p.a.flush(&mut p.na);
    assert_eq!(
        p.na.cq,
        vec![
            ok(3, WcOpcode::Send, 0),
            err(4, WcOpcode::Send, WcStatus::WrFlushErr)
        ]
    );
    p.a.flush(&mut p.na);
    assert_eq!(p.tx(true), 0);
    assert_eq!(p.na.cq.len(), 2);
}

/// A Send or Write work request of `len` bytes out of region `lkey` (at `VA`), cut into
/// `pieces` SGEs; `kind` picks the operation.
fn sq_message(
    wr_id: u64,
    kind: u8,
    len: u32,
    pieces: u32,
    signaled: bool,
    lkey: u32,
) -> SendRequest {
    let op = match kind {
        0 => send_op(),
        1 => SendOp::Send {
            solicited: true,
            invalidate: None,
        },
        2 => SendOp::Send {
            solicited: false,
            invalidate: Some(0x4321),
        },
        3 => SendOp::SendImm {
            imm: 0xabcd_0000 | wr_id as u32,
            solicited: wr_id % 2 == 0,
        },
        4 => SendOp::WriteImm {
            remote_addr: 0x9000 + u64::from(len),
            rkey: 0x777,
            imm: wr_id as u32,
        },
        _ => SendOp::Write {
            remote_addr: 0x10_0000 + wr_id,
            rkey: 0x777,
        },
    };
    let pieces = pieces.clamp(1, MAX_SGE as u32);
    let mut list = Vec::new();
    let mut left = len;
    let mut at = wr_id * 7 % 300;
    for i in 0..pieces {
        let piece = if i + 1 == pieces { left } else { left / 2 };
        list.push(sge(VA + at, piece, lkey));
        at += u64::from(piece) + 3;
        left -= piece;
    }
    let mut wr = wr(wr_id, op, &list);
    wr.signaled = signaled;
    wr
}

/// The messages `wr` is on the wire, as [`QpEngine`] documents it.
fn as_work_requests(wr: &SendRequest) -> Vec<WorkRequest<'static>> {
    let len = wr.sges.total_len().unwrap() as u32;
    match wr.op {
        SendOp::Send {
            solicited,
            invalidate,
        } => vec![WorkRequest::Send {
            len,
            solicited,
            invalidate,
        }],
        SendOp::SendImm { imm, solicited } if len == 0 => vec![WorkRequest::Immediate {
            data: ImmediateData::from_be32(imm),
            solicited,
        }],
        SendOp::SendImm { imm, solicited } => vec![
            WorkRequest::Send {
                len,
                solicited: false,
                invalidate: None,
            },
            WorkRequest::Immediate {
                data: ImmediateData::from_be32(imm),
                solicited,
            },
        ],
        SendOp::Write { remote_addr, rkey } => vec![WorkRequest::Write {
            stag: rkey,
            tagged_offset: remote_addr,
            len,
        }],
        SendOp::WriteImm {
            remote_addr,
            rkey,
            imm,
        } => vec![WorkRequest::WriteImmediate {
            stag: rkey,
            tagged_offset: remote_addr,
            len,
            data: ImmediateData::from_be32(imm),
            solicited: false,
        }],
        _ => unreachable!("not a Send or Write"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whether a message goes out as one FPDU straight from the SQ or through the message in
    /// flight, the stream is what one transmit engine frames for the same work requests, and
    /// the completions are those of the signalled ones, in order, each on the call after its
    /// last FPDU.
    #[test]
    fn sq_messages_go_out_as_the_transmit_engine_frames_them(
        msgs in proptest::collection::vec(
            (0u8..6, prop_oneof![3 => 0u32..1500, 1 => 4000u32..9000], 1u32..4, any::<bool>()),
            1..16,
        ),
        crc: bool,
        fpdu_size in 128usize..4096,
        out_len in 4096usize..9000,
        accept in proptest::option::of(0u8..3),
    ) {
        let config = EngineConfig {
            crc,
            fpdu_size,
            pd: PD,
            ird: 8,
            ord: 8,
            rtr: RtrState::None,
        };
        let mut engine = Engine::new(config, SoftCrc32c);
        // `None`: `transmit`; otherwise `transmit_by_reference`, the node taking these offers.
        let by_reference = accept.map(|a| [Accept::Never, Accept::Always, Accept::EveryOther][usize::from(a)]);
        let mut node = Node { accept: by_reference.unwrap_or_default(), ..Node::default() };
        let lkey = node.mr(32768, VA, ALL);
        node.fill(lkey, 0x3c);
        let wrs: Vec<SendRequest> = msgs
            .iter()
            .enumerate()
            .map(|(i, &(kind, len, pieces, signaled))| {
                sq_message(i as u64 + 1, kind, len, pieces, signaled, lkey)
            })
            .collect();
        node.sq.extend(wrs.iter().copied());

        let mut oracle = TxEngine::new(crc.then_some(SoftCrc32c), fpdu_size);
        let mut expected = Vec::new();
        // Where each work request's bytes end in the stream.
        let mut ends = Vec::new();
        for wr in &wrs {
            let payload = node.payload(&Source::Gather {
                sges: wr.sges.as_slice().to_vec(),
                offset: 0,
                len: wr.sges.total_len().unwrap() as u32,
            });
            for request in as_work_requests(wr) {
                frame_into(&mut oracle, request, &payload, &mut expected);
            }
            ends.push(expected.len());
        }

        let mut wire = Vec::new();
        let mut calls = 0;
        loop {
            let before = node.cq.len();
            let produced = if by_reference.is_some() {
                let (t, bytes) = transmit_by_reference(&mut engine, &mut node, out_len, out_len);
                if crc {
                    prop_assert_eq!(t.referenced, 0);
                }
                bytes
            } else {
                let mut out = vec![0u8; out_len];
                let n = engine.transmit(&mut node, &mut out);
                out.truncate(n);
                out
            };
            // A completion is written only for a message whose bytes a
            // previous call returned.
            for c in &node.cq[before..] {
                let index = wrs.iter().position(|w| w.wr_id == c.wr_id).unwrap();
                prop_assert!(ends[index] <= wire.len(), "{:?} before its bytes", c);
            }
            wire.extend_from_slice(&produced);
            calls += 1;
            prop_assert!(calls < 10_000, "no end");
            if produced.is_empty() {
                break;
            }
        }
        prop_assert!(node.sq.is_empty());
        prop_assert!(wire == expected, "{} bytes sent, {} framed", wire.len(), expected.len());
        let completions: Vec<Completion> = wrs
            .iter()
            .filter(|w| w.signaled)
            .map(|w| ok(w.wr_id, w.op.wc_opcode(), w.sges.total_len().unwrap() as u32))
            .collect();
        prop_assert_eq!(&node.cq, &completions);
        prop_assert!(!engine.is_terminated());
    }
}

/// An RDMA Write whose payload trickles in: its header is checked on
/// arrival, and each piece placed later is checked again. Invalidating the
/// region between two pieces (and, separately, registering it anew under
/// the very same STag) keeps every later byte out: the stream terminates
/// with DDP "invalid STag".
#[test]
fn write_trickled_past_an_invalidation_places_nothing_after_it() {
    for re_register in [false, true] {
        for crc in [false, true] {
            let mut p = Pair::new(Setup::default());
            let dst = p.nb.mr(512, 0, LOCAL_WRITE | REMOTE_WRITE);
            let payload = vec![0x5a; 512];
            let fpdu = forge(
                crc,
                4096,
                WorkRequest::Write {
                    stag: dst,
                    tagged_offset: 0,
                    len: 512,
                },
                &payload,
            );
            // The FPDU ends with 256 payload bytes and the 4-byte CRC field.
            let header_and_half = fpdu.len() - 256 - 4;
            let ctx = format!("crc {crc}, re-register {re_register}");
            assert_eq!(
                p.b.receive(&fpdu[..header_and_half], &mut p.nb),
                Ok(header_and_half),
                "{ctx}"
            );
            let placed = p.nb.region(dst).data.iter().filter(|&&b| b == 0x5a).count();
            assert!(placed > 0 && placed <= 256, "{ctx}: {placed} placed");
            assert_eq!(p.nb.invalidate_local(dst), Ok(()));
            if re_register {
                assert_eq!(
                    p.nb.register(dst, LOCAL_WRITE | REMOTE_WRITE, 0, 512),
                    Ok(())
                );
            }
            assert_eq!(
                p.b.receive(&fpdu[header_and_half..], &mut p.nb),
                Err(TermError::DdpInvalidStag),
                "{ctx}"
            );
            let after = p.nb.region(dst).data.iter().filter(|&&b| b == 0x5a).count();
            assert_eq!(after, placed, "{ctx}: bytes landed after the invalidation");
            assert_eq!(p.b.termination(), Some(TermError::DdpInvalidStag), "{ctx}");
        }
    }
}

/// A Read Response streams out from the source as the window allows: the
/// source is checked when the Read Request arrives and again for each
/// FPDU. Invalidated and registered anew under the same STag while the
/// response is stalled, the response stops: no byte of the new contents
/// goes on the wire, and the stream terminates with RDMAP "invalid STag".
#[test]
fn read_response_stalled_past_a_re_registration_sends_nothing_of_it() {
    let mut p = Pair::new(Setup {
        fpdu_size: 512,
        ..Setup::default()
    });
    let sink = p.na.mr(4000, VA, LOCAL_WRITE);
    let src = p.nb.mr(4000, 0, REMOTE_READ);
    p.nb.region_mut(src).data.fill(0x11);
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: src,
        },
        &[sge(VA, 4000, sink)],
    ));
    p.tx(true);
    p.rx(true);
    // Room for one FPDU only, as a closed window leaves.
    let mut out = vec![0u8; 600];
    let first = p.b.transmit(&mut p.nb, &mut out);
    assert!(first > 0 && first <= 600);
    assert!(out[..first].contains(&0x11));
    assert_eq!(p.nb.invalidate_local(src), Ok(()));
    p.nb.region_mut(src).data.fill(0xee);
    assert_eq!(p.nb.register(src, REMOTE_READ, 0, 4000), Ok(()));
    let mut rest = vec![0u8; 1 << 16];
    let n = p.b.transmit(&mut p.nb, &mut rest);
    assert!(
        !rest[..n].contains(&0xee),
        "the re-registered region's bytes went on the wire"
    );
    assert_eq!(p.b.termination(), Some(TermError::RdmapInvalidStag));
    // What went out is the TERMINATE, which A decodes.
    p.ba.clear();
    p.ba.extend_from_slice(&out[..first]);
    p.ba.extend_from_slice(&rest[..n]);
    p.rx(false);
    assert!(p.a.peer_terminated());
    assert_eq!(p.a.termination(), Some(TermError::RdmapInvalidStag));
    assert!(p.na.region(sink).data.iter().all(|&b| b != 0xee));
}
