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

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::crc32c::SoftCrc32c;
use rsiw_proto::proto::mpa::RtrKind;
use rsiw_proto::proto::qp_engine::*;

// The in-memory RNIC of the QP engine tests.
#[path = "../../tests/engine_common/qp.rs"]
mod mock;

use mock::*;

const REGION_LEN: usize = 256;

/// The target's mock RNIC, on the trait's own provided methods: STag index
/// i, key 0; region 0 zero-based, the others at 0x1000 * i; varied rights.
/// Only work requests in [`Node::offerable`] may be offered.
fn rnic() -> TraitDefaults {
    let mut node = Node {
        rng: 1,
        offerable: Some(Vec::new()),
        ..Node::default()
    };
    let access = [0xF, 0x2, 0x4, 0x8, 0x1];
    node.mrs = access
        .iter()
        .enumerate()
        .map(|(i, &access)| Mr {
            stag: (i as u32) << 8,
            pd: PD,
            access,
            base: 0x1000 * i as u64,
            zero_based: i == 0,
            valid: true,
            epoch: 0,
            data: vec![0; REGION_LEN],
        })
        .collect();
    TraitDefaults(node)
}

/// The ids of the work requests completed, in order.
fn completed(node: &Node) -> Vec<u64> {
    node.cq.iter().map(|c| c.wr_id).collect()
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
    node: &mut TraitDefaults,
    buf: &mut [u8],
    out_len: usize,
    budget: usize,
) -> (Transmitted, Vec<u8>) {
    // The room for the SQ head holds a request from before: here the queue's
    // last, which the engine must not take for its head.
    let mut sq_head = node.sq.back().copied().unwrap_or(SendRequest::EMPTY);
    checked_transmit_by_reference(engine, node, &mut buf[..out_len], &mut sq_head, budget)
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
        node: &mut TraitDefaults,
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
fn drain_copy(
    engine: &mut QpEngine<SoftCrc32c>,
    node: &mut TraitDefaults,
    out: &mut [u8],
) -> Vec<u8> {
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
            node.offerable.get_or_insert_with(Vec::new).push(list);
        }
    }
    must
}

/// Size of region 5, the source of large Sends and Writes.
const LARGE_LEN: usize = 12_000;

/// Checks that after the flush every work request that must complete did,
/// and none twice.
fn check_completions(node: &Node, must: &[u64]) {
    let mut ids = completed(node);
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
    let mut node = rnic();
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
        let mut node = rnic();
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
                pd: PD,
                access: 0x1,
                base: 0x5000,
                zero_based: false,
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
         node: &mut TraitDefaults,
         copy: &mut Option<(QpEngine<SoftCrc32c>, TraitDefaults, Vec<u8>, Vec<u8>)>| {
            match copy {
                Some((c, cnode, wire, copied)) => {
                    wire.extend_from_slice(&mode.drain(engine, node, &mut buf));
                    copied.extend_from_slice(&drain_copy(c, cnode, &mut out));
                    assert!(wire == copied, "the wire bytes differ from transmit's");
                    assert_eq!(completed(node), completed(cnode));
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
        assert_eq!(completed(&node), completed(&cnode));
    }
}
