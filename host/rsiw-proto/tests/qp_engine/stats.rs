// SPDX-License-Identifier: GPL-2.0

//! What the engines count ([`rsiw_proto::proto::stats`]): between two engines back to back,
//! every FPDU and byte one sends the other receives, and each Read and Atomic is one request
//! and one response each way.

use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::stats::{Stat, Stats};

use crate::harness::*;

fn take(e: &mut Engine) -> Stats {
    let mut s = Stats::ZERO;
    e.take_stats(|stat, n| s.add(stat, n));
    s
}

#[test]
fn reads_atomics_and_fpdus_are_counted_on_both_sides() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let source = p.nb.mr(6000, 0x10_0000, REMOTE_READ);
        let target = p.nb.mr(64, 0x8000, REMOTE_ATOMIC);
        let sink = p.na.mr(6000, VA, LOCAL_WRITE);
        let result = p.na.mr(64, VA + 0x10_000, LOCAL_WRITE);
        p.na.sq.push_back(wr(
            1,
            SendOp::Read {
                remote_addr: 0x10_0000,
                rkey: source,
            },
            &[sge(VA, 5000, sink)],
        ));
        p.na.sq.push_back(wr(
            2,
            SendOp::FetchAdd {
                remote_addr: 0x8008,
                rkey: target,
                add: 1,
                add_mask: 0,
            },
            &[sge(VA + 0x10_000, 8, result)],
        ));
        p.pump();
        assert_eq!(p.na.cq.len(), 2, "{setup:?}");
        let (a, b) = (take(&mut p.a), take(&mut p.b));
        for (from, to) in [(&a, &b), (&b, &a)] {
            assert_eq!(from.get(Stat::FpdusTx), to.get(Stat::FpdusRx), "{setup:?}");
            assert_eq!(from.get(Stat::BytesTx), to.get(Stat::BytesRx), "{setup:?}");
        }
        assert_eq!(a.get(Stat::BytesTx) as usize, p.sent[0], "{setup:?}");
        assert_eq!(b.get(Stat::BytesTx) as usize, p.sent[1], "{setup:?}");
        assert!(b.get(Stat::BytesTx) >= 5000);
        assert_eq!(a.get(Stat::ReadRequestsTx), 1);
        assert_eq!(b.get(Stat::ReadRequestsRx), 1);
        assert_eq!(b.get(Stat::ReadResponsesTx), 1);
        assert_eq!(a.get(Stat::ReadResponsesRx), 1);
        assert_eq!(a.get(Stat::AtomicRequestsTx), 1);
        assert_eq!(b.get(Stat::AtomicRequestsRx), 1);
        assert_eq!(b.get(Stat::AtomicResponsesTx), 1);
        assert_eq!(a.get(Stat::AtomicResponsesRx), 1);
        assert_eq!(a.get(Stat::CrcErrors) + b.get(Stat::CrcErrors), 0);
        // Taken: nothing is left.
        assert_eq!(take(&mut p.a), Stats::ZERO);
    }
}
