// SPDX-License-Identifier: GPL-2.0

//! Invalidation and registration: Send with Invalidate, Read with
//! Invalidate, local invalidation and fast registration in SQ order, and
//! tagged accesses re-checked after a region changed under them.

use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::terminate::TermError;
use rsiw_proto::proto::tx_engine::WorkRequest;

use crate::harness::*;

#[test]
fn send_with_invalidate() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let dst = p.nb.mr(64, VA, LOCAL_WRITE);
        let target = p.nb.mr(64, VA, REMOTE_WRITE);
        p.na.sq.push_back(wr(
            1,
            SendOp::Send {
                solicited: true,
                invalidate: Some(target),
            },
            &[],
        ));
        p.nb.rq.push_back(RecvRequest {
            wr_id: 5,
            sges: sges(&[sge(VA, 64, dst)]),
        });
        p.pump();
        let mut c = ok(5, WcOpcode::Recv, 0);
        c.invalidated = Some(target);
        c.solicited = true;
        assert_eq!(p.nb.cq, vec![c]);
        assert!(!p.nb.region(target).valid);
        assert_eq!(p.na.cq, vec![ok(1, WcOpcode::Send, 0)]);
    }
}

#[test]
fn send_with_bad_invalidate_terminates() {
    let mut p = Pair::new(Setup::default());
    let dst = p.nb.mr(64, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(
        1,
        SendOp::Send {
            solicited: false,
            invalidate: Some(0x7700),
        },
        &[],
    ));
    p.nb.rq.push_back(RecvRequest {
        wr_id: 5,
        sges: sges(&[sge(VA, 64, dst)]),
    });
    p.pump();
    let c = p.nb.cq[0];
    assert_eq!(
        (c.wr_id, c.status, c.invalidated),
        (5, WcStatus::RemInvReqErr, None)
    );
    assert_eq!(
        p.b.termination(),
        Some(TermError::RdmapProtectionCannotInvalidate)
    );
    assert!(p.a.peer_terminated());
    assert_eq!(
        p.a.termination(),
        Some(TermError::RdmapProtectionCannotInvalidate)
    );
}

#[test]
fn rdma_read_with_invalidate_invalidates_the_sink_on_completion() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let source = p.nb.mr(3000, 0x10_0000, REMOTE_READ);
        p.nb.fill(source, 9);
        let sink = p.na.mr(3000, VA, LOCAL_WRITE);
        p.na.sq.push_back(wr(
            1,
            SendOp::ReadInv {
                remote_addr: 0x10_0000,
                rkey: source,
            },
            &[sge(VA, 3000, sink)],
        ));
        p.pump();
        assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, 3000)], "{setup:?}");
        assert_eq!(
            &p.na.region(sink).data[..3000],
            &p.nb.region(source).data[..3000]
        );
        // The sink's STag is invalid now: a Send from it fails locally.
        assert!(!p.na.region(sink).valid, "{setup:?}");
        p.na.sq.push_back(wr(2, send_op(), &[sge(VA, 16, sink)]));
        p.pump();
        assert_ne!(p.na.cq.last().map(|c| c.status), Some(WcStatus::Success));
    }
}

#[test]
fn local_ops_run_in_sq_order() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let local = p.na.mr(64, VA, LOCAL_WRITE);
        let dst = p.nb.mr(256, VA, LOCAL_WRITE);
        p.na.fill(local, 4);
        let fresh = local & !0xff | 0x77;
        p.na.sq.push_back(wr(1, send_op(), &[sge(VA, 8, local)]));
        p.na.sq
            .push_back(wr(2, SendOp::LocalInv { stag: local }, &[]));
        p.na.sq.push_back(wr(
            3,
            SendOp::RegMr {
                stag: fresh,
                access: LOCAL_WRITE,
                iova: 0,
                length: 0,
            },
            &[],
        ));
        p.na.sq.push_back(wr(4, send_op(), &[sge(VA, 16, fresh)]));
        for id in 0..2 {
            p.nb.rq.push_back(RecvRequest {
                wr_id: 10 + id,
                sges: sges(&[sge(VA + 128 * id, 128, dst)]),
            });
        }
        p.pump();
        assert_eq!(
            p.na.cq,
            vec![
                ok(1, WcOpcode::Send, 8),
                ok(2, WcOpcode::LocalInv, 0),
                ok(3, WcOpcode::RegMr, 0),
                ok(4, WcOpcode::Send, 16)
            ]
        );
        assert_eq!(
            p.na.log,
            vec![format!("local-inv {local:#x}"), format!("reg {fresh:#x}")]
        );
        assert_eq!(p.nb.recv_completions().len(), 2);

        // Invalidated and then used: the Send fails locally.
        p.na.sq
            .push_back(wr(5, SendOp::LocalInv { stag: fresh }, &[]));
        p.na.sq.push_back(wr(6, send_op(), &[sge(VA, 16, fresh)]));
        p.pump();
        assert_eq!(p.na.cq[4], ok(5, WcOpcode::LocalInv, 0));
        assert_eq!(p.na.cq[5], err(6, WcOpcode::Send, WcStatus::LocProtErr));
        assert!(p.a.is_terminated());
        assert!(p.b.peer_terminated());
    }
}

/// An RDMA Write whose payload trickles in: its header is checked on
/// arrival, and each piece placed later is checked again. Invalidating the
/// region between two pieces (and, separately, registering it anew under
/// the very same STag) keeps every later byte out: the stream terminates
/// with DDP "invalid STag".
#[test]
fn write_trickled_past_an_invalidation_places_nothing_after_it() {
    for re_register in [false, true] {
        for crc in [false, true] {
            let mut p = Pair::new(Setup::default());
            let dst = p.nb.mr(512, 0, LOCAL_WRITE | REMOTE_WRITE);
            let payload = vec![0x5a; 512];
            let fpdu = forge(
                crc,
                4096,
                WorkRequest::Write {
                    stag: dst,
                    tagged_offset: 0,
                    len: 512,
                },
                &payload,
            );
            // The FPDU ends with 256 payload bytes and the 4-byte CRC field.
            let header_and_half = fpdu.len() - 256 - 4;
            let ctx = format!("crc {crc}, re-register {re_register}");
            assert_eq!(
                p.b.receive(&fpdu[..header_and_half], &mut p.nb),
                Ok(header_and_half),
                "{ctx}"
            );
            let placed = p.nb.region(dst).data.iter().filter(|&&b| b == 0x5a).count();
            assert!(placed > 0 && placed <= 256, "{ctx}: {placed} placed");
            assert_eq!(p.nb.invalidate_local(dst), Ok(()));
            if re_register {
                assert_eq!(
                    p.nb.register(dst, LOCAL_WRITE | REMOTE_WRITE, 0, 512),
                    Ok(())
                );
            }
            assert_eq!(
                p.b.receive(&fpdu[header_and_half..], &mut p.nb),
                Err(TermError::DdpInvalidStag),
                "{ctx}"
            );
            let after = p.nb.region(dst).data.iter().filter(|&&b| b == 0x5a).count();
            assert_eq!(after, placed, "{ctx}: bytes landed after the invalidation");
            assert_eq!(p.b.termination(), Some(TermError::DdpInvalidStag), "{ctx}");
        }
    }
}

/// A Read Response streams out from the source as the window allows: the
/// source is checked when the Read Request arrives and again for each
/// FPDU. Invalidated and registered anew under the same STag while the
/// response is stalled, the response stops: no byte of the new contents
/// goes on the wire, and the stream terminates with RDMAP "invalid STag".
#[test]
fn read_response_stalled_past_a_re_registration_sends_nothing_of_it() {
    let mut p = Pair::new(Setup {
        fpdu_size: 512,
        ..Setup::default()
    });
    let sink = p.na.mr(4000, VA, LOCAL_WRITE);
    let src = p.nb.mr(4000, 0, REMOTE_READ);
    p.nb.region_mut(src).data.fill(0x11);
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: src,
        },
        &[sge(VA, 4000, sink)],
    ));
    p.tx(true);
    p.rx(true);
    // Room for one FPDU only, as a closed window leaves.
    let mut out = vec![0u8; 600];
    let first = p.b.transmit(&mut p.nb, &mut out);
    assert!(first > 0 && first <= 600);
    assert!(out[..first].contains(&0x11));
    assert_eq!(p.nb.invalidate_local(src), Ok(()));
    p.nb.region_mut(src).data.fill(0xee);
    assert_eq!(p.nb.register(src, REMOTE_READ, 0, 4000), Ok(()));
    let mut rest = vec![0u8; 1 << 16];
    let n = p.b.transmit(&mut p.nb, &mut rest);
    assert!(
        !rest[..n].contains(&0xee),
        "the re-registered region's bytes went on the wire"
    );
    assert_eq!(p.b.termination(), Some(TermError::RdmapInvalidStag));
    // What went out is the TERMINATE, which A decodes.
    p.ba.clear();
    p.ba.extend_from_slice(&out[..first]);
    p.ba.extend_from_slice(&rest[..n]);
    p.rx(false);
    assert!(p.a.peer_terminated());
    assert_eq!(p.a.termination(), Some(TermError::RdmapInvalidStag));
    assert!(p.na.region(sink).data.iter().all(|&b| b != 0xee));
}
