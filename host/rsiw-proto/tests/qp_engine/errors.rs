// SPDX-License-Identifier: GPL-2.0

//! Local and remote errors: bad keys, bad work requests, access rights, no
//! receive posted, messages too long, CRC errors; which work request fails
//! and what the TERMINATE says.

use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::terminate::TermError;

use crate::harness::*;

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
