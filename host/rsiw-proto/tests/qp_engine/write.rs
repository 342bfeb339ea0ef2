// SPDX-License-Identifier: GPL-2.0

//! RDMA Writes, alone and against Reads in the other direction.

use rsiw_proto::proto::qp_engine::*;

use crate::harness::*;

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
