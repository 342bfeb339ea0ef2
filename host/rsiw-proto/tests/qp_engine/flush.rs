// SPDX-License-Identifier: GPL-2.0

//! The flush: every posted work request completes once, in error, whatever
//! state it was in.

use rsiw_proto::proto::qp_engine::*;

use crate::harness::*;

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
