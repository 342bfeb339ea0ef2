// SPDX-License-Identifier: GPL-2.0

//! Two QPs wired back to back ([`Pair`]) over the mock RNIC of
//! [`crate::engine_common::qp`], the work request and completion builders
//! the tests share, and the FPDUs a (possibly hostile) peer forges.

use rsiw_proto::proto::crc32c::SoftCrc32c;
use rsiw_proto::proto::ddp::DdpHeader;
use rsiw_proto::proto::fpdu::encode_fpdu;
use rsiw_proto::proto::pieces::Pieces;
use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::rdmap::{self, Opcode, OpcodeHeader, Segment};
use rsiw_proto::proto::tx_engine::{TxEngine, WorkRequest, MAX_FPDU_HEADER_LEN};

pub use crate::engine_common::qp::*;

/// [`checked_transmit_by_reference`] into a buffer of `out_len` bytes, the
/// room for the SQ head holding [`STALE_HEAD`].
pub fn transmit_by_reference<S: SlotStorage>(
    engine: &mut QpEngine<SoftCrc32c, S>,
    node: &mut Node,
    out_len: usize,
    budget: usize,
) -> (Transmitted, Vec<u8>) {
    let mut out = vec![0u8; out_len];
    let mut sq_head = STALE_HEAD;
    checked_transmit_by_reference(engine, node, &mut out, &mut sq_head, budget)
}

pub type Engine = QpEngine<SoftCrc32c>;

/// Two QPs connected by two byte pipes.
pub struct Pair<S: SlotStorage = InlineSlots> {
    pub a: QpEngine<SoftCrc32c, S>,
    pub b: QpEngine<SoftCrc32c, S>,
    pub na: Node,
    pub nb: Node,
    /// Bytes in flight from a to b and from b to a.
    pub ab: Vec<u8>,
    pub ba: Vec<u8>,
    pub rng: u64,
    /// Size of the transmit buffer.
    pub out_len: usize,
    /// Bytes each side transmitted in total.
    pub sent: [usize; 2],
    /// Everything each side transmitted, if `record`.
    pub wire: [Vec<u8>; 2],
    pub record: bool,
    /// Transmit with [`QpEngine::transmit_by_reference`] instead.
    pub by_ref: Option<ByRef>,
    /// What each side's `transmit_by_reference` calls reported.
    pub stats: [TxStats; 2],
}

/// How a [`Pair`] calls [`QpEngine::transmit_by_reference`].
#[derive(Debug, Clone, Copy)]
pub struct ByRef {
    /// Size of the buffer.
    pub out_len: usize,
    pub budget: usize,
}

/// Totals of one side's [`QpEngine::transmit_by_reference`] calls.
#[derive(Debug, Clone, Copy, Default)]
pub struct TxStats {
    pub calls: usize,
    pub buffered: usize,
    pub referenced: usize,
    /// Calls that were short.
    pub shorts: usize,
}

#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub crc: bool,
    pub fpdu_size: usize,
    pub ord: u16,
    pub ird: u16,
    pub seed: u64,
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
    pub fn new(setup: Setup) -> Self {
        Self::with_slots(setup, InlineSlots::new(), InlineSlots::new())
    }
}

impl<S: SlotStorage> Pair<S> {
    /// Two QPs keeping their per-slot state in `a_slots` and `b_slots`.
    pub fn with_slots(setup: Setup, a_slots: S, b_slots: S) -> Self {
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
    pub fn configured(a: EngineConfig, b: EngineConfig, seed: u64, a_slots: S, b_slots: S) -> Self {
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

    pub fn rand(&mut self) -> u64 {
        xorshift(&mut self.rng)
    }

    /// One transmit call of a side (true: a); with `by_ref` one
    /// `transmit_by_reference` call, and a second one into a large buffer if
    /// the first produced nothing for lack of room.
    pub fn tx(&mut self, from_a: bool) -> usize {
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
    pub fn sent_bytes(&mut self, from_a: bool, out: &[u8]) -> usize {
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
    pub fn rx(&mut self, to_b: bool) {
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
    pub fn pump(&mut self) {
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
pub fn by_queue(cq: &[Completion]) -> (Vec<Completion>, Vec<Completion>) {
    cq.iter()
        .partition(|c| !matches!(c.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm))
}

pub fn sges(list: &[Sge]) -> SgeList {
    SgeList::new(list).unwrap()
}

pub fn wr(wr_id: u64, op: SendOp, list: &[Sge]) -> SendRequest {
    SendRequest {
        wr_id,
        op,
        sges: sges(list),
        signaled: true,
        fence: false,
    }
}

pub fn send_op() -> SendOp {
    SendOp::Send {
        solicited: false,
        invalidate: None,
    }
}

pub fn ok(wr_id: u64, opcode: WcOpcode, byte_len: u32) -> Completion {
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

pub fn err(wr_id: u64, opcode: WcOpcode, status: WcStatus) -> Completion {
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
pub fn setups() -> Vec<Setup> {
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

pub const VA: u64 = 0x7f00_0000_1000;

/// The stream a (possibly hostile) peer sends for `wr`, its payload taken
/// from `payload`, encoded by a transmit engine of its own.
pub fn forge(crc: bool, fpdu_size: usize, wr: WorkRequest<'_>, payload: &[u8]) -> Vec<u8> {
    let mut tx = TxEngine::new(crc.then_some(SoftCrc32c), fpdu_size);
    let mut out = Vec::new();
    frame_into(&mut tx, wr, payload, &mut out);
    out
}

/// Appends to `out` the FPDUs `tx` makes of `wr`, its payload taken from
/// `payload`.
pub fn frame_into(
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

/// Bytes the forged Read Responses carry.
pub const FORGED: u8 = 0xa5;

/// A Read Response segment the peer sends: (offset in the sink, length, the
/// last of its response).
pub type Seg = (u32, u32, bool);

/// The byte forged responses carry for offset `at` of a sink: never 0, so
/// that what was placed shows.
pub fn sink_byte(at: usize) -> u8 {
    (at % 251) as u8 + 1
}

/// The FPDU of Read Response segment `seg` into the sink at tagged offset
/// `base` of `stag`, carrying the sink's bytes ([`sink_byte`]).
pub fn response_segment(crc: bool, stag: u32, base: u64, (at, len, last): Seg) -> Vec<u8> {
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

/// A segment on the wire: its opcode, and (QN, MSN) if it is untagged.
pub type WireSegment = (Opcode, Option<(u32, u32)>);

/// The segments of an FPDU stream (no markers).
pub fn segments(mut stream: &[u8]) -> Vec<WireSegment> {
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
pub fn msns(segments: &[WireSegment], qn: u32) -> Vec<u32> {
    let mut v: Vec<u32> = segments
        .iter()
        .filter_map(|(_, u)| u.filter(|(q, _)| *q == qn).map(|(_, msn)| msn))
        .collect();
    v.dedup();
    v
}
