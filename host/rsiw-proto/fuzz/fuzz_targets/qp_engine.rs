// SPDX-License-Identifier: GPL-2.0

//! The QP engine fed arbitrary bytes in fuzzer-chosen chunks, transmitting
//! after every chunk, over a small in-memory RNIC with work requests posted
//! on both queues (some Reads and Atomics already outstanding, so that
//! responses can match them; Reads into several SGEs among them, whose parts
//! are Read Requests of their own), in the client-server model or past any
//! RFC 6581 RTR sent or received. It never panics, never writes a transmit
//! buffer past its end, and after the final flush every posted work request
//! has completed exactly once (the RTR, no work request, never completes;
//! unsignalled ones at most once). A Read completes successfully only if
//! Read Response placement wrote every byte of its sinks: the context
//! counts each tagged write into a sink of the oldest Read not completed
//! (the one whose responses arrive, as they come in request order) as that
//! Read's.
//!
//! The top bits of the split byte pick how it transmits (0, as in the seeds:
//! `transmit` into 4 KiB). Otherwise [`QpEngine::transmit_by_reference`],
//! with a fourth configuration byte before the stream for which offers the
//! context takes, the buffer and budget sizes and whether large unsignalled
//! Sends and Writes are posted (which are offered). Every call stays within
//! its buffer and budget and reports the payload it handed out; the payload
//! offered is where the work request's SGEs or the Read's source region
//! hold it. With odd modes the budget is at least 4 KiB and a second engine
//! that copies (`transmit`) gets the same input: after every chunk both send
//! all they have, and the wire bytes (the buffers with the payload taken by
//! reference put in their places), results and completions are identical.
//! With even ones any budget goes, one call per chunk as with `transmit`.

#![no_main]

use std::collections::VecDeque;

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::crc32c::SoftCrc32c;
use rsiw_proto::proto::mpa::RtrKind;
use rsiw_proto::proto::placement::{AccessFlags, Grant, MemoryRegion, StagState};
use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::terminate::TermError;

const PD: u32 = 1;
const REGION_LEN: usize = 256;

struct Mr {
    stag: u32,
    access: u32,
    base: u64,
    valid: bool,
    /// Changes on every registration and invalidation (`MemoryRegion::epoch`).
    epoch: u64,
    data: Vec<u8>,
}

/// Which offers to send payload by reference the context takes.
#[derive(Clone, Copy)]
enum Accept {
    Never,
    Always,
    EveryOther,
    Random,
}

struct Node {
    mrs: Vec<Mr>,
    sq: VecDeque<SendRequest>,
    rq: VecDeque<RecvRequest>,
    completed: Vec<u64>,
    accept: Accept,
    offers: u64,
    rng: u64,
    /// The payload taken by reference in the current transmit call: where it
    /// goes in the buffer, and its bytes.
    taken: Vec<(usize, Vec<u8>)>,
    /// The gather lists of the work requests that may be offered:
    /// unsignalled, of at least `BY_REFERENCE_FROM` bytes.
    offerable: Vec<Vec<Sge>>,
    /// The Reads posted, in SQ order.
    reads: Vec<PostedRead>,
}

/// A Read work request, and which bytes of its sinks Read Responses wrote.
struct PostedRead {
    wr_id: u64,
    sinks: Vec<Sge>,
    /// Per sink, per byte: written by a Read Response.
    placed: Vec<Vec<bool>>,
    completed: bool,
}

impl PostedRead {
    fn new(wr_id: u64, sinks: &[Sge]) -> Self {
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
    fn place(&mut self, stag: u32, va: u64, len: usize) {
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

    fn filled(&self) -> bool {
        self.placed.iter().flatten().all(|&b| b)
    }
}

impl Node {
    fn new() -> Self {
        // STag index i, key 0; region 0 is zero-based, the others at
        // 0x1000 * i. Varied rights.
        let access = [0xF, 0x2, 0x4, 0x8, 0x1];
        let mrs = access
            .iter()
            .enumerate()
            .map(|(i, &access)| Mr {
                stag: (i as u32) << 8,
                access,
                base: 0x1000 * i as u64,
                valid: true,
                epoch: 0,
                data: vec![0; REGION_LEN],
            })
            .collect();
        Self {
            mrs,
            sq: VecDeque::new(),
            rq: VecDeque::new(),
            completed: Vec::new(),
            accept: Accept::Never,
            offers: 0,
            rng: 1,
            taken: Vec::new(),
            offerable: Vec::new(),
            reads: Vec::new(),
        }
    }

    /// The bytes a driver sends for `source`, `None` if a local key is bad
    /// (the driver then refuses, and the engine's copy reports it).
    fn resolve(&mut self, source: PayloadSource<'_>) -> Option<Vec<u8>> {
        match source {
            PayloadSource::Gather { sges, offset, len } => {
                let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
                assert!(
                    u64::from(offset) + u64::from(len) <= total,
                    "outside the SGEs"
                );
                let mut bytes = Vec::new();
                let mut skip = u64::from(offset);
                let mut left = len as usize;
                for sge in sges {
                    let sge_len = u64::from(sge.length);
                    if left == 0 {
                        break;
                    }
                    if skip >= sge_len {
                        skip -= sge_len;
                        continue;
                    }
                    let n = ((sge_len - skip) as usize).min(left);
                    bytes.extend_from_slice(self.local(sge, skip as u32, n).ok()?);
                    left -= n;
                    skip = 0;
                }
                assert_eq!(left, 0);
                Some(bytes)
            }
            // Re-checked as every access is: the region may have been invalidated since the
            // Read Request came.
            PayloadSource::Tagged(grant) => self.granted(&grant).ok().map(|b| b.to_vec()),
        }
    }

    fn local(&mut self, sge: &Sge, offset: u32, len: usize) -> Result<&mut [u8], WcStatus> {
        let mr = self
            .mrs
            .get_mut((sge.lkey >> 8) as usize)
            .filter(|m| m.stag == sge.lkey && m.valid)
            .ok_or(WcStatus::LocProtErr)?;
        assert!(u64::from(offset) + len as u64 <= u64::from(sge.length));
        let start = sge
            .addr
            .checked_sub(mr.base)
            .and_then(|s| s.checked_add(u64::from(offset)))
            .and_then(|s| usize::try_from(s).ok())
            .ok_or(WcStatus::LocProtErr)?;
        let end = start.checked_add(len).ok_or(WcStatus::LocProtErr)?;
        mr.data.get_mut(start..end).ok_or(WcStatus::LocProtErr)
    }

    /// The bytes `grant` names, re-checked against the region as it is now, as a driver must
    /// check every access; a grant that passes lies inside the region.
    fn granted(&mut self, grant: &Grant) -> Result<&mut [u8], TermError> {
        let region = self.lookup_stag(grant.access.stag);
        let start = grant.recheck(region.as_ref(), PD)?;
        let mr = self.mrs.get_mut((grant.access.stag >> 8) as usize);
        let mr = mr.expect("a grant that passes names a region");
        let start = usize::try_from(start).expect("an offset inside the region");
        let len = usize::try_from(grant.access.len).expect("a length inside the region");
        Ok(&mut mr.data[start..start + len])
    }
}

impl QpContext for Node {
    fn peek_send(&mut self) -> Option<SendRequest> {
        self.sq.front().copied()
    }

    fn pop_send(&mut self) {
        self.sq.pop_front();
    }

    fn pop_recv(&mut self) -> Option<RecvRequest> {
        self.rq.pop_front()
    }

    fn complete(&mut self, c: Completion) {
        self.completed.push(c.wr_id);
        if c.opcode != WcOpcode::RdmaRead {
            return;
        }
        if let Some(read) = self.reads.iter_mut().find(|r| r.wr_id == c.wr_id) {
            assert!(
                c.status != WcStatus::Success || read.filled(),
                "a Read completed successfully with sink bytes no response placed"
            );
            read.completed = true;
        }
    }

    fn local_read(&mut self, sge: &Sge, offset: u32, out: &mut [u8]) -> Result<(), WcStatus> {
        let len = out.len();
        out.copy_from_slice(self.local(sge, offset, len)?);
        Ok(())
    }

    fn local_write(&mut self, sge: &Sge, offset: u32, data: &[u8]) -> Result<(), WcStatus> {
        self.local(sge, offset, data.len())?.copy_from_slice(data);
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
            pd: PD,
            access: AccessFlags::from_ib(mr.access),
            base: mr.base,
            len: mr.data.len() as u64,
            zero_based: mr.base == 0,
            epoch: mr.epoch,
        })
    }

    fn tagged_read(&mut self, grant: &Grant, out: &mut [u8]) -> Result<(), TermError> {
        out.copy_from_slice(self.granted(grant)?);
        Ok(())
    }

    fn tagged_write(&mut self, grant: &Grant, data: &[u8]) -> Result<(), TermError> {
        self.granted(grant)?.copy_from_slice(data);
        // Only Read Responses write into the sinks' region (it grants no
        // remote write).
        if let Some(read) = self.reads.iter_mut().find(|r| !r.completed) {
            read.place(grant.access.stag, grant.access.tagged_offset, data.len());
        }
        Ok(())
    }

    fn tagged_atomic(&mut self, grant: &Grant, op: AtomicOp) -> Result<u64, TermError> {
        let word = self.granted(grant)?;
        let old = u64::from_ne_bytes(word.try_into().expect("8 bytes"));
        word.copy_from_slice(&op.apply(old).to_ne_bytes());
        Ok(old)
    }

    fn invalidate_remote(&mut self, stag: u32) -> Result<(), TermError> {
        match self.mrs.get_mut((stag >> 8) as usize) {
            Some(mr) if mr.stag == stag && mr.valid => {
                mr.valid = false;
                mr.epoch = mr.epoch.wrapping_add(1);
                Ok(())
            }
            _ => Err(TermError::RdmapProtectionCannotInvalidate),
        }
    }

    fn invalidate_local(&mut self, stag: u32) -> Result<(), WcStatus> {
        self.invalidate_remote(stag)
            .map_err(|_| WcStatus::LocProtErr)
    }

    fn register(
        &mut self,
        stag: u32,
        access: u32,
        _iova: u64,
        _length: u64,
    ) -> Result<(), WcStatus> {
        let mr = self
            .mrs
            .get_mut((stag >> 8) as usize)
            .ok_or(WcStatus::LocProtErr)?;
        mr.stag = stag;
        mr.access = access;
        mr.valid = true;
        mr.epoch = mr.epoch.wrapping_add(1);
        Ok(())
    }

    fn send_by_reference(&mut self, source: PayloadSource<'_>, at: usize) -> bool {
        self.offers += 1;
        if let PayloadSource::Gather { sges, .. } = source {
            assert!(
                self.offerable.iter().any(|list| list == sges),
                "offered a signalled or small work request"
            );
        }
        let take = match self.accept {
            Accept::Never => false,
            Accept::Always => true,
            Accept::EveryOther => self.offers % 2 == 1,
            Accept::Random => xorshift(&mut self.rng) & 1 != 0,
        };
        if !take {
            return false;
        }
        match self.resolve(source) {
            Some(bytes) => {
                self.taken.push((at, bytes));
                true
            }
            None => false,
        }
    }
}

/// Where the next received chunk after `pos` ends: one byte, up to 64, or the rest of a
/// `len`-byte stream, as `rng` decides.
fn next_chunk_end(rng: &mut u64, pos: usize, len: usize) -> usize {
    xorshift(rng);
    let piece = match *rng % 3 {
        0 => 1,
        1 => (*rng >> 8) as usize % 64 + 1,
        _ => len - pos,
    };
    (pos + piece).min(len)
}

fn xorshift(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

/// Large enough for any FPDU and budget below.
const BIG: usize = 1 << 17;

/// One `transmit_by_reference` call into the first `out_len` bytes of
/// `buf`, checked; returns what it reports and the wire bytes.
fn transmit_by_reference(
    engine: &mut QpEngine<SoftCrc32c>,
    node: &mut Node,
    buf: &mut [u8],
    out_len: usize,
    budget: usize,
) -> (Transmitted, Vec<u8>) {
    node.taken.clear();
    let out = &mut buf[..out_len];
    // The room for the SQ head holds a request from before: here the queue's
    // last, which the engine must not take for its head.
    let mut sq_head = node.sq.back().copied().unwrap_or(SendRequest::EMPTY);
    let t = engine.transmit_by_reference(node, &mut sq_head, out, budget);
    assert!(t.buffered <= out_len, "past the buffer");
    assert!(t.buffered + t.referenced <= budget, "over the budget");
    let mut wire = Vec::with_capacity(t.buffered + t.referenced);
    let mut pos = 0;
    for (at, bytes) in node.taken.drain(..) {
        assert!(at > pos && at <= t.buffered, "payload out of place");
        wire.extend_from_slice(&out[pos..at]);
        wire.extend_from_slice(&bytes);
        pos = at;
    }
    wire.extend_from_slice(&out[pos..t.buffered]);
    assert_eq!(wire.len(), t.buffered + t.referenced, "payload miscounted");
    (t, wire)
}

/// How the engine transmits by reference.
#[derive(Clone, Copy)]
struct TxMode {
    /// Compare with an engine that copies (budgets of at least 4 KiB).
    differential: bool,
    /// Buffer size class (0: random each call).
    out: u8,
    /// Budget class.
    budget: u8,
    rng: u64,
}

impl TxMode {
    fn out_len(&mut self) -> usize {
        match self.out {
            0 => (xorshift(&mut self.rng) % 5000) as usize,
            n => [64, 136, 137, 150, 300, 1024, BIG][usize::from(n - 1)],
        }
    }

    fn budget(&mut self) -> usize {
        let r = xorshift(&mut self.rng) as usize;
        if self.differential {
            [4096, 5000, 65536, 4096 + r % 61441][usize::from(self.budget)]
        } else {
            r % [301, 9001, 70001, 4097][usize::from(self.budget)]
        }
    }

    /// Sends everything the engine has now; a short call with nothing out
    /// is retried with a large buffer, as the driver would.
    fn drain(
        &mut self,
        engine: &mut QpEngine<SoftCrc32c>,
        node: &mut Node,
        buf: &mut [u8],
    ) -> Vec<u8> {
        let mut wire = Vec::new();
        for _ in 0..100_000 {
            let mut out_len = self.out_len();
            let budget = self.budget();
            let (mut t, mut bytes) = transmit_by_reference(engine, node, buf, out_len, budget);
            if t.short && t.is_empty() {
                out_len = BIG;
                (t, bytes) = transmit_by_reference(engine, node, buf, out_len, budget);
                assert!(!t.short, "short with a large buffer");
            }
            if t.is_empty() {
                assert!(!engine.wants_transmit() || engine.is_terminated());
                return wire;
            }
            wire.extend_from_slice(&bytes);
        }
        panic!("transmission never ends");
    }
}

/// Sends everything a copying engine has now.
fn drain_copy(engine: &mut QpEngine<SoftCrc32c>, node: &mut Node, out: &mut [u8]) -> Vec<u8> {
    let mut wire = Vec::new();
    for _ in 0..100_000 {
        let n = engine.transmit(node, out);
        if n == 0 {
            return wire;
        }
        wire.extend_from_slice(&out[..n]);
    }
    panic!("transmission never ends");
}

const KINDS: [RtrKind; 3] = [RtrKind::Send, RtrKind::Write, RtrKind::Read];

fn sge(addr: u64, length: u32, lkey: u32) -> Sge {
    Sge { addr, length, lkey }
}

/// Posts the work requests the input asks for; returns the ids that must
/// complete (the others are unsignalled).
fn post(node: &mut Node, split: u8, posts: u8, large: bool) -> Vec<u64> {
    let local = 4 << 8; // region 4: local write, base 0x4000
    let mut must = Vec::new();
    for i in 0..u64::from(posts & 7) {
        node.rq.push_back(RecvRequest {
            wr_id: 1000 + i,
            sges: SgeList::new(&[sge(0x4000 + 16 * i, 16, local), sge(0x4080, 64, local)])
                .expect("two SGEs"),
        });
        must.push(1000 + i);
    }
    let ops = [
        SendOp::Read {
            remote_addr: 0x100,
            rkey: 0x700,
        },
        SendOp::FetchAdd {
            remote_addr: 0x100,
            rkey: 0x700,
            add: 1,
            add_mask: 0,
        },
        SendOp::Send {
            solicited: false,
            invalidate: None,
        },
        SendOp::CmpSwap {
            remote_addr: 0x108,
            rkey: 0x700,
            compare: 0,
            compare_mask: !0,
            swap: 1,
            swap_mask: !0,
        },
        SendOp::Write {
            remote_addr: 0,
            rkey: 0x700,
        },
        SendOp::SendImm {
            imm: 5,
            solicited: true,
        },
        SendOp::LocalInv { stag: 3 << 8 },
        SendOp::RegMr {
            stag: 3 << 8 | 1,
            access: 0xF,
            iova: 0,
            length: 0,
        },
    ];
    for i in 0..u64::from(posts >> 3) {
        // With large Sends and Writes, the rotation starts at the Send, so
        // that they go before a Read or Atomic waits.
        let op = ops[(i as usize + if large { 2 } else { 0 }) % ops.len()];
        // Reads go into 1, 3, 2 or 6 SGEs (one Read Request per non-empty
        // one), the second of them empty; the split byte picks where the
        // rotation starts (the seeds' 7: a single SGE first).
        let rotation = usize::from(split >> 3) + (i as usize / ops.len());
        let count = match op {
            SendOp::Read { .. } => [1, 3, 2, 6][rotation % 4],
            _ => 1,
        };
        let mut list: Vec<Sge> = (0..count as u64)
            .map(|j| {
                let len = if j == 1 { 0 } else { 8 };
                sge(0x4000 + 8 * ((i + 5 * j) % 31), len, local)
            })
            .collect();
        let mut signaled = true;
        if large
            && matches!(
                op,
                SendOp::Send { .. } | SendOp::Write { .. } | SendOp::SendImm { .. }
            )
        {
            // From region 5 (large), in two SGEs, 4091 + 2 * id bytes plus
            // 1 if the receive count is even (id 2, the first Write: 4095 or
            // 4096 bytes); unsignalled unless the id is a multiple of 3, so
            // offered from 4 KiB on. If bit 1 of the receive count is clear,
            // id 2 reaches past the region (a bad gather list).
            let first = 4089 + i as u32 + u32::from(posts & 1 == 0);
            let at = 0x5000 + 3 * i;
            list = vec![sge(at, first, 5 << 8), sge(at + 9000, 2 + i as u32, 5 << 8)];
            if i == 2 && posts & 2 == 0 {
                list[1].length = LARGE_LEN as u32;
            }
            signaled = i % 3 == 0;
        }
        node.sq.push_back(SendRequest {
            wr_id: i,
            op,
            sges: SgeList::new(&list).expect("at most MAX_SGE"),
            signaled,
            fence: i % 5 == 4,
        });
        if let SendOp::Read { .. } = op {
            // Signalled: a completion tells when the next Read's responses
            // begin.
            assert!(signaled);
            node.reads.push(PostedRead::new(i, &list));
        }
        if signaled {
            must.push(i);
        } else if list.iter().map(|s| s.length).sum::<u32>() >= BY_REFERENCE_FROM {
            node.offerable.push(list);
        }
    }
    must
}

/// Size of region 5, the source of large Sends and Writes.
const LARGE_LEN: usize = 12_000;

/// Checks that after the flush every work request that must complete did,
/// and none twice.
fn check_completions(node: &Node, must: &[u64]) {
    let mut ids = node.completed.clone();
    ids.sort_unstable();
    let before = ids.len();
    ids.dedup();
    assert_eq!(before, ids.len(), "a work request completed twice");
    for id in must {
        assert!(
            ids.binary_search(id).is_ok(),
            "a work request never completed"
        );
    }
    let posted = |id: &u64| *id < 32 || (1000..1008).contains(id);
    assert!(ids.iter().all(posted), "a completion of nothing posted");
}

fuzz_target!(|data: &[u8]| {
    let Some((&[config, split, posts], stream)) = data.split_first_chunk::<3>() else {
        return;
    };
    let fpdu_size = [64, 200, 1024, 4096][usize::from(config >> 6)];
    // The RFC 6581 RTR connection setup exchanged, from the split byte (its
    // other uses only need it to vary): 0 (the seeds' 7) is the
    // client-server model.
    let rtr = match split % 7 {
        0 => RtrState::None,
        n @ 1..=3 => RtrState::Sent(KINDS[usize::from(n - 1)]),
        n => RtrState::Received(KINDS[usize::from(n - 4)]),
    };
    let engine_config = EngineConfig {
        crc: config & 1 != 0,
        fpdu_size,
        pd: PD,
        ird: u16::from(config >> 1 & 7),
        ord: u16::from(config >> 4 & 3) + 1,
        rtr,
    };
    let mode = split >> 5;
    if mode != 0 {
        let Some((&tx, stream)) = stream.split_first() else {
            return;
        };
        by_reference(engine_config, split, posts, tx, mode % 2 == 1, stream);
        return;
    }
    let mut engine = QpEngine::new(engine_config, SoftCrc32c);
    let mut node = Node::new();
    let must = post(&mut node, split, posts, false);
    let mut out = vec![0u8; 4096];
    engine.transmit(&mut node, &mut out);
    let mut rng = u64::from(split) | 0x100;
    let mut pos = 0;
    while pos < stream.len() {
        let end = next_chunk_end(&mut rng, pos, stream.len());
        let result = engine.receive(&stream[pos..end], &mut node);
        let n = engine.transmit(&mut node, &mut out);
        assert!(n <= out.len());
        match result {
            Ok(consumed) => assert_eq!(consumed, end - pos),
            Err(_) => {
                assert!(engine.is_terminated());
                break;
            }
        }
        pos = end;
    }
    while engine.transmit(&mut node, &mut out) != 0 {}
    engine.flush(&mut node);
    assert!(!engine.wants_transmit() || engine.termination().is_some());
    check_completions(&node, &must);
});

/// The fuzz run transmitting by reference (see the module documentation).
fn by_reference(
    config: EngineConfig,
    split: u8,
    posts: u8,
    tx: u8,
    differential: bool,
    stream: &[u8],
) {
    let large = tx & 0x80 != 0;
    let mut mode = TxMode {
        differential,
        out: tx >> 2 & 7,
        budget: tx >> 5 & 3,
        rng: u64::from(tx) << 8 | u64::from(split) | 1 << 20,
    };
    let new_node = || {
        let mut node = Node::new();
        // Contents that tell offsets apart, for the payload by reference.
        for (r, mr) in node.mrs.iter_mut().enumerate() {
            for (i, b) in mr.data.iter_mut().enumerate() {
                *b = (i * 7 + r * 31) as u8;
            }
        }
        node.accept = [
            Accept::Never,
            Accept::Always,
            Accept::EveryOther,
            Accept::Random,
        ][usize::from(tx & 3)];
        node.rng = u64::from(posts) << 16 | u64::from(tx) | 1 << 40;
        if large {
            // Region 5: large, local access only, base 0x5000.
            node.mrs.push(Mr {
                stag: 5 << 8,
                access: 0x1,
                base: 0x5000,
                valid: true,
                epoch: 0,
                data: (0..LARGE_LEN).map(|i| (i * 7 + i / 251) as u8).collect(),
            });
        }
        node
    };
    let mut engine = QpEngine::new(config, SoftCrc32c);
    let mut node = new_node();
    let must = post(&mut node, split, posts, large);
    // The engine that copies, and what both sent.
    let mut copy = differential.then(|| {
        let mut node = new_node();
        post(&mut node, split, posts, large);
        (
            QpEngine::new(config, SoftCrc32c),
            node,
            Vec::new(),
            Vec::new(),
        )
    });
    let mut buf = vec![0u8; BIG];
    let mut out = vec![0u8; 4096];
    let mut step =
        |engine: &mut QpEngine<SoftCrc32c>,
         node: &mut Node,
         copy: &mut Option<(QpEngine<SoftCrc32c>, Node, Vec<u8>, Vec<u8>)>| {
            match copy {
                Some((c, cnode, wire, copied)) => {
                    wire.extend_from_slice(&mode.drain(engine, node, &mut buf));
                    copied.extend_from_slice(&drain_copy(c, cnode, &mut out));
                    assert!(wire == copied, "the wire bytes differ from transmit's");
                    assert_eq!(node.completed, cnode.completed);
                    assert_eq!(engine.termination(), c.termination());
                    assert_eq!(engine.wants_transmit(), c.wants_transmit());
                }
                None => {
                    let out_len = mode.out_len();
                    let budget = mode.budget();
                    transmit_by_reference(engine, node, &mut buf, out_len, budget);
                }
            }
        };
    step(&mut engine, &mut node, &mut copy);
    let mut rng = u64::from(split) | 0x100;
    let mut pos = 0;
    while pos < stream.len() {
        let end = next_chunk_end(&mut rng, pos, stream.len());
        let result = engine.receive(&stream[pos..end], &mut node);
        if let Some((c, cnode, _, _)) = copy.as_mut() {
            assert_eq!(result, c.receive(&stream[pos..end], cnode));
        }
        step(&mut engine, &mut node, &mut copy);
        match result {
            Ok(consumed) => assert_eq!(consumed, end - pos),
            Err(_) => {
                assert!(engine.is_terminated());
                break;
            }
        }
        pos = end;
    }
    // Whatever is left, with budgets that always make progress.
    mode.differential = true;
    mode.budget = 2;
    mode.drain(&mut engine, &mut node, &mut buf);
    engine.flush(&mut node);
    assert!(!engine.wants_transmit() || engine.termination().is_some());
    check_completions(&node, &must);
    if let Some((mut c, mut cnode, _, _)) = copy {
        drain_copy(&mut c, &mut cnode, &mut out);
        c.flush(&mut cnode);
        assert_eq!(node.completed, cnode.completed);
    }
}
