// SPDX-License-Identifier: GPL-2.0

//! Sends into posted receives: gather and scatter lists, the solicited
//! event and unsignalled flags, and a Send split anywhere on the way.

use proptest::prelude::*;
use rsiw_proto::proto::qp_engine::*;

use crate::harness::*;

#[test]
fn sge_list_limits() {
    let one = sge(1, 2, 3);
    assert!(SgeList::new(&[one; MAX_SGE]).is_some());
    assert!(SgeList::new(&[one; MAX_SGE + 1]).is_none());
    let full = SgeList::new(&[sge(0, u32::MAX, 0); MAX_SGE]).unwrap();
    assert_eq!(full.total_len(), Some(u64::from(u32::MAX) * MAX_SGE as u64));
    assert_eq!(SgeList::<Sge>::new(&[]).unwrap().as_slice(), &[]);
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

proptest! {
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
