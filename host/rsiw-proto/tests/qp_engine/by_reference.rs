// SPDX-License-Identifier: GPL-2.0

//! Payload by reference: the driver sends the payload of some FPDUs
//! straight from memory, between the header and trailer the engine writes.

use proptest::prelude::*;
use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::terminate::TermError;

use crate::harness::*;

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
    let t = |buffered, referenced, short, fpdus| Transmitted {
        buffered,
        referenced,
        short,
        idle: false,
        fpdus,
    };
    // No room for a copied FPDU: short, and nothing lost (again).
    assert_eq!(step(&mut p, 64, Accept::Always), t(0, 0, true, 0));
    assert_eq!(step(&mut p, 64, Accept::Always), t(0, 0, true, 0));
    assert!(p.a.wants_transmit());
    // Room for one: short after it.
    assert_eq!(step(&mut p, 5000, Accept::Always), t(4096, 0, true, 1));
    // The budget ends the call (not short), however large the buffer.
    assert_eq!(step(&mut p, 1 << 17, Accept::Always), t(8192, 0, false, 2));
    // The last two FPDUs (the last: 3697 payload bytes, 3 pad); the next
    // Write's first FPDU is over the budget left.
    assert_eq!(
        step(&mut p, 1 << 17, Accept::Always),
        t(4096 + 3720, 0, false, 2)
    );
    // The signalled Write completes on the next call, once the driver had
    // its FPDUs.
    assert!(p.na.cq.is_empty());
    // By reference: each FPDU takes its header and CRC (20 bytes) in the
    // buffer; the budget stops it after two.
    assert_eq!(step(&mut p, 200, Accept::Always), t(40, 8152, false, 2));
    assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaWrite, 20_001)]);
    // Room for the headers of only one: short.
    assert_eq!(step(&mut p, 150, Accept::Always), t(20, 4076, true, 1));
    // Refused, and then no room to copy it: short, nothing produced.
    let offers = p.na.offers.len();
    assert_eq!(step(&mut p, 1000, Accept::Never), t(0, 0, true, 0));
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
