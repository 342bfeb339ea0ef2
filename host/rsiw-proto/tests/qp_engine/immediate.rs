// SPDX-License-Identifier: GPL-2.0

//! Immediate Data (RFC 7306): RDMA Write with Immediate, and Send with
//! Immediate taking one receive per message.

use rsiw_proto::proto::qp_engine::*;

use crate::harness::*;

#[test]
fn rdma_write_with_immediate() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let src = p.na.mr(2000, VA, 0);
        p.na.fill(src, 9);
        let dst = p.nb.mr(2000, 0, REMOTE_WRITE);
        let rbuf = p.nb.mr(16, VA, LOCAL_WRITE);
        p.na.sq.push_back(wr(
            1,
            SendOp::WriteImm {
                remote_addr: 0,
                rkey: dst,
                imm: 0xdead_beef,
            },
            &[sge(VA, 2000, src)],
        ));
        p.nb.rq.push_back(RecvRequest {
            wr_id: 8,
            sges: sges(&[sge(VA, 16, rbuf)]),
        });
        p.pump();
        assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaWrite, 2000)]);
        let mut c = ok(8, WcOpcode::RecvRdmaWithImm, 0);
        c.imm = Some(0xdead_beef);
        assert_eq!(p.nb.cq, vec![c]);
        assert_eq!(p.nb.region(dst).data, p.na.region(src).data);
    }
}

#[test]
fn send_with_immediate_takes_one_receive_per_message() {
    for setup in setups() {
        for len in [0u32, 300] {
            let mut p = Pair::new(setup);
            let src = p.na.mr(300, VA, 0);
            p.na.fill(src, 1);
            let dst = p.nb.mr(1000, VA, LOCAL_WRITE);
            p.na.sq.push_back(wr(
                1,
                SendOp::SendImm {
                    imm: 42,
                    solicited: true,
                },
                &[sge(VA, len, src)],
            ));
            // A Write in between and a Write with Immediate after it: each
            // Immediate Data message is classified by what preceded it.
            let wdst = p.nb.mr(16, 0, REMOTE_WRITE);
            p.na.sq.push_back(wr(
                2,
                SendOp::Write {
                    remote_addr: 0,
                    rkey: wdst,
                },
                &[sge(VA, 4, src)],
            ));
            p.na.sq.push_back(wr(
                3,
                SendOp::SendImm {
                    imm: 43,
                    solicited: false,
                },
                &[],
            ));
            for id in 0..4 {
                p.nb.rq.push_back(RecvRequest {
                    wr_id: 100 + id,
                    sges: sges(&[sge(VA + 500 * (id % 2), 500, dst)]),
                });
            }
            p.pump();
            assert_eq!(
                p.na.cq,
                vec![
                    ok(1, WcOpcode::Send, len),
                    ok(2, WcOpcode::RdmaWrite, 4),
                    ok(3, WcOpcode::Send, 0)
                ]
            );
            // A zero-length Send with Immediate is the Immediate Data message
            // alone (one receive); with data it is a Send, then Immediate Data.
            let mut expected = Vec::new();
            let mut next = 100;
            if len > 0 {
                expected.push(ok(next, WcOpcode::Recv, len));
                next += 1;
            }
            let mut imm = ok(next, WcOpcode::Recv, 0);
            imm.imm = Some(42);
            imm.solicited = true;
            expected.push(imm);
            // RFC 7306 has one Immediate Data message: right after an RDMA
            // Write it completes an RDMA Write with Immediate, whatever the
            // sender's verb was.
            let mut imm2 = ok(next + 1, WcOpcode::RecvRdmaWithImm, 0);
            imm2.imm = Some(43);
            expected.push(imm2);
            assert_eq!(p.nb.cq, expected, "{setup:?}");
            let n = len as usize;
            assert_eq!(&p.nb.region(dst).data[..n], &p.na.region(src).data[..n]);
        }
    }
}
