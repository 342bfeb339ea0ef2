// SPDX-License-Identifier: GPL-2.0

//! The send queue's completions in the pattern of a kernel ULP such as NFS/RDMA's client:
//! unsignaled registrations chained before a Send, most Sends unsignaled, signaled local
//! invalidations, and the QP flushed at any point. Such a consumer releases the resources of
//! every unsignaled Send up to a signaled one when that one completes, so completions must come
//! in posting order and each at most once, whatever the transmit calls' sizes and whether the
//! payload goes by reference.

use proptest::prelude::*;
use rsiw_proto::proto::qp_engine::*;

use crate::harness::*;

/// One request of the ULP: `regs` registrations, a Send of `len` bytes, signaled or not, and
/// the invalidation of the registrations if `invalidate`.
#[derive(Debug, Clone, Copy)]
struct Call {
    regs: u8,
    len: u32,
    signaled: bool,
    invalidate: bool,
}

fn call() -> impl Strategy<Value = Call> {
    (
        0u8..3,
        prop_oneof![3 => 0u32..1024, 1 => 1024u32..20_000],
        prop::bool::weighted(0.3),
        any::<bool>(),
    )
        .prop_map(|(regs, len, signaled, invalidate)| Call {
            regs,
            len,
            signaled,
            invalidate,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn sq_completions_come_in_posting_order_once(
        calls in proptest::collection::vec(call(), 1..24),
        crc: bool,
        by_reference: bool,
        budget in 4096usize..70_000,
        flush_after in proptest::option::of(0usize..40),
        seed: u64,
    ) {
        let mut p = Pair::new(Setup { crc, fpdu_size: 4096, ord: 8, ird: 8, seed });
        if by_reference {
            p.by_ref = Some(ByRef { out_len: 8192, budget });
            p.na.accept = Accept::Always;
        }
        let src = p.na.mr(20_000, VA, ALL);
        p.na.fill(src, 0x5c);
        // Regions the registrations take, re-registered call after call.
        let regions: Vec<u32> = (0..2).map(|_| p.na.mr(4096, VA, LOCAL_WRITE)).collect();
        let dst = p.nb.mr(20_000, VA, LOCAL_WRITE);
        let mut posted = Vec::new();
        let mut next_id = 1u64;
        let mut post = |p: &mut Pair, mut request: SendRequest, signaled: bool| {
            request.wr_id = next_id;
            request.signaled = signaled;
            next_id += 1;
            posted.push((request.wr_id, signaled));
            p.na.sq.push_back(request);
        };
        for c in &calls {
            for (i, region) in regions.iter().take(usize::from(c.regs)).enumerate() {
                let stag = region & !0xff | (0x10 + i as u32);
                let reg = SendOp::RegMr { stag, access: LOCAL_WRITE, iova: VA, length: 4096 };
                post(&mut p, wr(0, reg, &[]), false);
            }
            post(&mut p, wr(0, send_op(), &[sge(VA, c.len, src)]), c.signaled);
            if c.invalidate {
                for (i, region) in regions.iter().take(usize::from(c.regs)).enumerate() {
                    let stag = region & !0xff | (0x10 + i as u32);
                    post(&mut p, wr(0, SendOp::LocalInv { stag }, &[]), true);
                }
            }
            p.nb.rq.push_back(RecvRequest { wr_id: 1000 + p.nb.rq.len() as u64, sges: sges(&[sge(VA, 20_000, dst)]) });
        }
        let mut flushed = false;
        for step in 0..100_000 {
            if flush_after == Some(step) {
                p.a.flush(&mut p.na);
                flushed = true;
            }
            let n = p.tx(true) + p.tx(false);
            let moved = !p.ab.is_empty() || !p.ba.is_empty();
            p.rx(true);
            p.rx(false);
            if n == 0 && !moved && (flushed || flush_after.is_none() || p.na.sq.is_empty()) {
                break;
            }
        }
        if !flushed {
            p.a.flush(&mut p.na);
        }
        let (sq, _) = by_queue(&p.na.cq);
        // Posting order, each once.
        let ids: Vec<u64> = sq.iter().map(|c| c.wr_id).collect();
        prop_assert!(ids.windows(2).all(|w| w[0] < w[1]), "out of order or repeated: {:?}", ids);
        // Every signaled work request completed; an unsignaled one only as flushed or failed.
        for (id, signaled) in &posted {
            let c = sq.iter().find(|c| c.wr_id == *id);
            if *signaled {
                prop_assert!(c.is_some(), "signaled {} never completed: {:?}", id, ids);
            } else if let Some(c) = c {
                prop_assert!(c.status != WcStatus::Success, "unsignaled {} completed: {:?}", id, c);
            }
        }
    }
}
