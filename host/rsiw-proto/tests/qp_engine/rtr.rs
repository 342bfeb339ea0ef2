// SPDX-License-Identifier: GPL-2.0

//! Peer-to-peer connections (RFC 6581): the engines start past the RTR
//! message that a real MPA setup exchanged.

use rsiw_proto::proto::crc32c::SoftCrc32c;
use rsiw_proto::proto::mpa::{RtrKind, RtrKinds};
use rsiw_proto::proto::mpa_handshake::{
    self, InitiatorEvent, InitiatorHandshake, ReceivedRtr, ResponderEvent, ResponderHandshake,
    MAX_FRAME_LEN,
};
use rsiw_proto::proto::mpa_negotiation::{CrcPolicy, InitiatorConfig, QueueDepth, ResponderConfig};
use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::rdmap::Opcode;
use rsiw_proto::proto::terminate::{TermError, TerminateMessage};
use rsiw_proto::proto::tx_engine::WorkRequest;

use crate::harness::*;

/// The engine configurations of both sides of a peer-to-peer setup, and the
/// bytes the responder sent for the RTR (its Read Response to a Read RTR).
#[derive(Debug, Clone)]
struct P2p {
    initiator: EngineConfig,
    responder: EngineConfig,
    rtr: Vec<u8>,
    rtr_response: Vec<u8>,
}

/// Depths of a peer-to-peer setup: what the initiator asks for (its IRD,
/// ORD) and what the responder's ULP accepts with (IRD, ORD).
#[derive(Debug, Clone, Copy)]
struct Depths {
    initiator_ird: u16,
    initiator_ord: u16,
    responder_ird: u16,
    responder_ord: u16,
}

const DEPTHS: Depths = Depths {
    initiator_ird: 3,
    initiator_ord: 2,
    responder_ird: 4,
    responder_ord: 3,
};

fn set(depth: QueueDepth) -> u16 {
    match depth {
        QueueDepth::Set(d) => d,
        QueueDepth::Unchanged => panic!("enhanced setups negotiate the depths"),
    }
}

/// Runs the pure MPA handshakes end to end, the initiator offering only
/// `kind`, the responder every kind, and returns the engine configurations
/// they give.
fn p2p_setup(kind: RtrKind, crc: bool, fpdu_size: usize, depths: Depths) -> P2p {
    let policy = if crc {
        CrcPolicy::Required
    } else {
        CrcPolicy::Disabled
    };
    let offered = RtrKinds {
        send: kind == RtrKind::Send,
        write: kind == RtrKind::Write,
        read: kind == RtrKind::Read,
    };
    let mut ini = InitiatorHandshake::new(InitiatorConfig {
        crc: policy,
        enhanced: true,
        ird: depths.initiator_ird,
        ord: depths.initiator_ord,
        max_ird: 16,
        peer_to_peer: true,
        rtr: offered,
        large_fpdus: false,
    });
    let mut res = ResponderHandshake::new(
        ResponderConfig {
            crc: policy,
            enhanced: true,
            max_ird: 16,
            ord: depths.responder_ord,
            min_ord: 0,
            rtr: RtrKinds {
                send: true,
                write: true,
                read: true,
            },
            large_fpdus: false,
        },
        SoftCrc32c,
    );
    let mut buf = [0u8; MAX_FRAME_LEN];
    let n = ini.request(b"p2p", &mut buf).unwrap();
    let (used, event) = res.on_bytes(&buf[..n]);
    assert_eq!(used, n);
    assert!(matches!(event, Some(ResponderEvent::ConnectRequest(_))));
    let accepted = res
        .accept(b"ok", depths.responder_ird, depths.responder_ord, &mut buf)
        .unwrap();
    assert!(!accepted.established);
    let (used, event) = ini.on_bytes(&buf[..accepted.len]).unwrap();
    assert_eq!(used, accepted.len);
    let Some(InitiatorEvent::Connected(decision)) = event else {
        panic!("{event:?}");
    };
    assert_eq!(decision.rtr, Some(kind));
    assert_eq!(decision.use_crc, crc);
    let n = ini.rtr_fpdu(&mut buf, SoftCrc32c).unwrap();
    let rtr = buf[..n].to_vec();
    let (used, event) = res.on_bytes(&rtr);
    assert_eq!(used, n);
    let Some(ResponderEvent::Established(received)) = event else {
        panic!("{event:?}");
    };
    assert_eq!(received.kind(), kind);
    assert!(res.is_established());
    let n = res.rtr_response(&mut buf).unwrap();
    let rtr_response = buf[..n].to_vec();
    assert_eq!(rtr_response.is_empty(), kind != RtrKind::Read);
    let d = accepted.decision;
    P2p {
        initiator: EngineConfig {
            crc: decision.use_crc,
            fpdu_size,
            pd: PD,
            ird: set(decision.local_ird),
            ord: set(decision.local_ord),
            rtr: RtrState::initiator(decision.rtr),
        },
        responder: EngineConfig {
            crc: d.use_crc,
            fpdu_size,
            pd: PD,
            ird: set(d.local_ird),
            ord: set(d.local_ord),
            rtr: RtrState::responder(Some(received)),
        },
        rtr,
        rtr_response,
    }
}

/// The pair of a peer-to-peer setup: a the initiator, b the responder,
/// recording what they send.
fn p2p_pair(setup: &P2p, seed: u64) -> Pair {
    let mut p = Pair::configured(
        setup.initiator,
        setup.responder,
        seed,
        InlineSlots::new(),
        InlineSlots::new(),
    );
    p.record = true;
    p
}

/// Hands the responder's Read Response to a Read RTR to the initiator's
/// engine, the first bytes of its stream.
fn deliver_rtr_response(p: &mut Pair, setup: &P2p) {
    p.ba.extend_from_slice(&setup.rtr_response);
    p.rx(false);
}

const ALL_KINDS: [RtrKind; 3] = [RtrKind::Send, RtrKind::Write, RtrKind::Read];

#[test]
fn rtr_state_defaults_to_client_server() {
    assert_eq!(RtrState::default(), RtrState::None);
    assert_eq!(RtrState::initiator(None), RtrState::None);
    assert_eq!(RtrState::responder(None), RtrState::None);
    for kind in ALL_KINDS {
        assert_eq!(RtrState::initiator(Some(kind)), RtrState::Sent(kind));
    }
    assert_eq!(
        RtrState::responder(Some(ReceivedRtr::Send)),
        RtrState::Received(RtrKind::Send)
    );
    assert_eq!(
        RtrState::responder(Some(ReceivedRtr::Write)),
        RtrState::Received(RtrKind::Write)
    );
}

/// Each RTR kind after a real MPA setup: the responder sends first, then
/// Sends (and Immediate Data) both ways into posted receives, RDMA Reads
/// both ways up to the ORD limit, Writes both ways and an atomic, with the
/// MSNs each side uses checked on the wire.
#[test]
fn p2p_traffic_after_each_rtr_kind() {
    for kind in ALL_KINDS {
        for (crc, fpdu_size, seed) in [(true, 1024, 1), (false, 128, 0x9e37_79b9_7f4a_7c15)] {
            let setup = p2p_setup(kind, crc, fpdu_size, DEPTHS);
            let ctx = format!("{kind:?} crc {crc} fpdu {fpdu_size}");
            // Negotiated: the responder's IRD is the initiator's ORD 2 (its
            // ULP allows up to 4), its ORD 3 fits the initiator's IRD 3.
            assert_eq!((setup.initiator.ord, setup.initiator.ird), (2, 3), "{ctx}");
            assert_eq!((setup.responder.ord, setup.responder.ird), (3, 2), "{ctx}");
            let mut p = p2p_pair(&setup, seed);
            if kind == RtrKind::Read {
                assert_eq!(p.a.requester().outstanding(), 1, "{ctx}");
                deliver_rtr_response(&mut p, &setup);
                assert_eq!(p.a.requester().outstanding(), 0, "{ctx}");
            } else {
                assert_eq!(p.a.requester().outstanding(), 0, "{ctx}");
            }
            assert!(p.na.cq.is_empty(), "{ctx}");
            assert_eq!(p.b.responder().pending(), 0, "{ctx}");
            assert!(!p.a.wants_transmit() && !p.b.wants_transmit(), "{ctx}");
            p2p_exchange(&mut p, &ctx);

            let to_b = segments(&p.wire[0]);
            let to_a = segments(&p.wire[1]);
            let send_first = if kind == RtrKind::Send { 2 } else { 1 };
            let read_first = if kind == RtrKind::Read { 2 } else { 1 };
            // Initiator to responder: 2 Sends, 1 Immediate Data, 3 Reads
            // and an atomic, each queue counting on past the RTR.
            assert_eq!(
                msns(&to_b, 0),
                (send_first..send_first + 3).collect::<Vec<_>>(),
                "{ctx}"
            );
            assert_eq!(
                msns(&to_b, 1),
                (read_first..read_first + 4).collect::<Vec<_>>(),
                "{ctx}"
            );
            // Responder to initiator: its own counts start at 1.
            assert_eq!(msns(&to_a, 0), vec![1, 2], "{ctx}");
            assert_eq!(msns(&to_a, 1), vec![1, 2, 3, 4], "{ctx}");
            for (op, _) in to_a.iter().chain(&to_b) {
                assert_ne!(*op, Opcode::Terminate, "{ctx}");
            }
            assert!(!p.a.is_terminated() && !p.b.is_terminated(), "{ctx}");
        }
    }
}

/// The traffic of [`p2p_traffic_after_each_rtr_kind`]; a initiator, b
/// responder, ORD 2 at a, 3 at b.
fn p2p_exchange(p: &mut Pair, ctx: &str) {
    let a_src = p.na.mr(4096, VA, LOCAL_WRITE | REMOTE_READ | REMOTE_WRITE);
    p.na.fill(a_src, 1);
    let a_dst =
        p.na.mr(4096, VA, LOCAL_WRITE | REMOTE_WRITE | REMOTE_ATOMIC);
    let b_src = p.nb.mr(4096, VA, LOCAL_WRITE | REMOTE_READ | REMOTE_WRITE);
    p.nb.fill(b_src, 2);
    let b_dst =
        p.nb.mr(4096, VA, LOCAL_WRITE | REMOTE_WRITE | REMOTE_ATOMIC);

    // The responder talks first: what the RTR is for.
    p.na.rq.push_back(RecvRequest {
        wr_id: 100,
        sges: sges(&[sge(VA, 1000, a_dst)]),
    });
    p.nb.sq
        .push_back(wr(200, send_op(), &[sge(VA, 700, b_src)]));
    p.pump();
    assert_eq!(p.nb.cq, vec![ok(200, WcOpcode::Send, 700)], "{ctx}");
    assert_eq!(p.na.cq, vec![ok(100, WcOpcode::Recv, 700)], "{ctx}");
    assert_eq!(
        p.na.region(a_dst).data[..700],
        p.nb.region(b_src).data[..700]
    );
    p.na.cq.clear();
    p.nb.cq.clear();

    // Sends both ways, with Immediate Data from the initiator.
    for id in 0..3 {
        p.nb.rq.push_back(RecvRequest {
            wr_id: 300 + id,
            sges: sges(&[sge(VA + 1000 * id, 1000, b_dst)]),
        });
    }
    p.na.sq.push_back(wr(1, send_op(), &[sge(VA, 900, a_src)]));
    p.na.sq.push_back(wr(
        2,
        SendOp::SendImm {
            imm: 77,
            solicited: false,
        },
        &[],
    ));
    p.na.sq
        .push_back(wr(3, send_op(), &[sge(VA + 1000, 10, a_src)]));
    p.na.rq.push_back(RecvRequest {
        wr_id: 101,
        sges: sges(&[sge(VA + 1000, 100, a_dst)]),
    });
    p.nb.sq.push_back(wr(201, send_op(), &[sge(VA, 50, b_src)]));
    p.pump();
    // Send and receive completions go to CQs of their own: how the two
    // interleave here is the pump's, so each is compared on its own.
    assert_eq!(
        by_queue(&p.na.cq),
        (
            vec![
                ok(1, WcOpcode::Send, 900),
                ok(2, WcOpcode::Send, 0),
                ok(3, WcOpcode::Send, 10),
            ],
            vec![ok(101, WcOpcode::Recv, 50)],
        ),
        "{ctx}"
    );
    let mut imm = ok(301, WcOpcode::Recv, 0);
    imm.imm = Some(77);
    assert_eq!(
        by_queue(&p.nb.cq),
        (
            vec![ok(201, WcOpcode::Send, 50)],
            vec![
                ok(300, WcOpcode::Recv, 900),
                imm,
                ok(302, WcOpcode::Recv, 10)
            ],
        ),
        "{ctx}"
    );
    assert_eq!(
        p.nb.region(b_dst).data[..900],
        p.na.region(a_src).data[..900]
    );
    p.na.cq.clear();
    p.nb.cq.clear();

    // RDMA Reads both ways, one more than the ORD: the ORD go out at once,
    // the last waits for a credit.
    for (i, id) in (10..13u64).enumerate() {
        let at = 100 * i as u64;
        p.na.sq.push_back(wr(
            id,
            SendOp::Read {
                remote_addr: VA + at,
                rkey: b_src,
            },
            &[sge(VA + 2000 + at, 100, a_dst)],
        ));
    }
    for (i, id) in (210..214u64).enumerate() {
        let at = 100 * i as u64;
        p.nb.sq.push_back(wr(
            id,
            SendOp::Read {
                remote_addr: VA + at,
                rkey: a_src,
            },
            &[sge(VA + 3000 + at, 100, b_dst)],
        ));
    }
    p.tx(true);
    p.tx(false);
    assert_eq!(p.a.requester().outstanding(), 2, "{ctx}");
    assert_eq!(p.na.sq.len(), 1, "{ctx}");
    assert_eq!(p.b.requester().outstanding(), 3, "{ctx}");
    assert_eq!(p.nb.sq.len(), 1, "{ctx}");
    p.pump();
    let reads = |ids: std::ops::Range<u64>| -> Vec<Completion> {
        ids.map(|id| ok(id, WcOpcode::RdmaRead, 100)).collect()
    };
    assert_eq!(p.na.cq, reads(10..13), "{ctx}");
    assert_eq!(p.nb.cq, reads(210..214), "{ctx}");
    assert_eq!(
        p.na.region(a_dst).data[2000..2300],
        p.nb.region(b_src).data[..300]
    );
    assert_eq!(
        p.nb.region(b_dst).data[3000..3400],
        p.na.region(a_src).data[..400]
    );
    assert_eq!(p.a.requester().outstanding(), 0, "{ctx}");
    assert_eq!(p.b.requester().outstanding(), 0, "{ctx}");
    p.na.cq.clear();
    p.nb.cq.clear();

    // Writes both ways, and an atomic on queue 1 from the initiator.
    p.na.sq.push_back(wr(
        20,
        SendOp::Write {
            remote_addr: VA + 3500,
            rkey: b_dst,
        },
        &[sge(VA, 500, a_src)],
    ));
    p.na.sq.push_back(wr(
        21,
        SendOp::FetchAdd {
            remote_addr: VA + 4088,
            rkey: b_dst,
            add: 5,
            add_mask: 0,
        },
        &[sge(VA + 4088, 8, a_dst)],
    ));
    p.nb.sq.push_back(wr(
        220,
        SendOp::Write {
            remote_addr: VA + 3500,
            rkey: a_dst,
        },
        &[sge(VA, 500, b_src)],
    ));
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![
            ok(20, WcOpcode::RdmaWrite, 500),
            ok(21, WcOpcode::FetchAdd, 8)
        ],
        "{ctx}"
    );
    assert_eq!(p.nb.cq, vec![ok(220, WcOpcode::RdmaWrite, 500)], "{ctx}");
    assert_eq!(
        p.nb.region(b_dst).data[3500..4000],
        p.na.region(a_src).data[..500]
    );
    assert_eq!(
        p.na.region(a_dst).data[3500..4000],
        p.nb.region(b_src).data[..500]
    );
    assert_eq!(p.nb.region(b_dst).data[4088..4096], 5u64.to_ne_bytes());
}

#[test]
fn received_send_rtr_refuses_a_first_send_with_msn_1() {
    let setup = p2p_setup(RtrKind::Send, true, 1024, DEPTHS);
    // The peer behaves as if there had been no RTR.
    let client_server = EngineConfig {
        rtr: RtrState::None,
        ..setup.initiator
    };
    let mut p = Pair::configured(
        client_server,
        setup.responder,
        1,
        InlineSlots::new(),
        InlineSlots::new(),
    );
    let dst = p.nb.mr(64, VA, LOCAL_WRITE);
    p.nb.rq.push_back(RecvRequest {
        wr_id: 5,
        sges: sges(&[sge(VA, 64, dst)]),
    });
    p.na.sq.push_back(wr(1, send_op(), &[]));
    p.pump();
    assert_eq!(p.b.termination(), Some(TermError::DdpMsnRange));
    assert!(p.a.peer_terminated());
    // The receive was not consumed by the refused Send.
    assert!(p.nb.cq.is_empty());
    assert_eq!(p.nb.rq.len(), 1);
}

#[test]
fn received_read_rtr_refuses_a_first_read_with_msn_1() {
    let setup = p2p_setup(RtrKind::Read, true, 1024, DEPTHS);
    let client_server = EngineConfig {
        rtr: RtrState::None,
        ..setup.initiator
    };
    let mut p = Pair::configured(
        client_server,
        setup.responder,
        1,
        InlineSlots::new(),
        InlineSlots::new(),
    );
    let source = p.nb.mr(64, VA, REMOTE_READ);
    let sink = p.na.mr(64, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: VA,
            rkey: source,
        },
        &[sge(VA, 64, sink)],
    ));
    p.pump();
    assert_eq!(p.b.termination(), Some(TermError::DdpMsnRange));
    assert_eq!(p.b.responder().pending(), 0);
    assert!(p.a.peer_terminated());
    // The TERMINATE echoes the Read Request: it fails at once, as an
    // invalid request (a DDP untagged buffer error).
    assert_eq!(
        p.na.cq,
        vec![err(1, WcOpcode::RdmaRead, WcStatus::RemInvReqErr)]
    );
}

#[test]
fn second_rtr_read_response_terminates() {
    for crc in [true, false] {
        let setup = p2p_setup(RtrKind::Read, crc, 1024, DEPTHS);
        let mut p = p2p_pair(&setup, 3);
        deliver_rtr_response(&mut p, &setup);
        assert!(!p.a.is_terminated());
        assert_eq!(p.a.requester().outstanding(), 0);
        deliver_rtr_response(&mut p, &setup);
        assert_eq!(p.a.termination(), Some(TermError::RdmapUnexpectedOpcode));
        assert!(p.na.cq.is_empty());
        p.pump();
        assert!(p.b.peer_terminated());
    }
}

/// With a Read RTR outstanding, a Read Response other than its zero-length
/// one at STag 1 is refused.
#[test]
fn read_rtr_accepts_only_its_own_response() {
    let setup = p2p_setup(RtrKind::Read, true, 1024, DEPTHS);
    let sink = Node::default().mr(64, VA, ALL);
    let forged = [
        // Aimed at another STag.
        (sink, 0, 0),
        // At STag 1, with payload.
        (mpa_handshake::RTR_STAG, 0, 8),
        // At STag 1, another offset.
        (mpa_handshake::RTR_STAG, 4, 0),
    ];
    for (stag, to, len) in forged {
        let mut p = p2p_pair(&setup, 5);
        p.na.mr(64, VA, ALL);
        let response = forge(
            true,
            1024,
            WorkRequest::ReadResponse {
                sink_stag: stag,
                sink_tagged_offset: to,
                len,
            },
            &[0xa5; 8],
        );
        p.ba.extend_from_slice(&response);
        p.rx(false);
        assert_eq!(p.a.termination(), Some(TermError::DdpBaseBounds));
        assert!(p.na.cq.is_empty());
    }
}

/// ORD 1 with a Read RTR: the RTR holds the only credit, so the first real
/// Read waits for the RTR's response.
#[test]
fn read_rtr_holds_an_ord_credit_until_its_response() {
    let depths = Depths {
        initiator_ord: 1,
        ..DEPTHS
    };
    for crc in [true, false] {
        let setup = p2p_setup(RtrKind::Read, crc, 1024, depths);
        assert_eq!(setup.initiator.ord, 1);
        let mut p = p2p_pair(&setup, 9);
        let source = p.nb.mr(256, VA, REMOTE_READ);
        p.nb.fill(source, 4);
        let sink = p.na.mr(256, VA, LOCAL_WRITE);
        p.na.sq.push_back(wr(
            1,
            SendOp::Read {
                remote_addr: VA,
                rkey: source,
            },
            &[sge(VA, 256, sink)],
        ));
        assert_eq!(p.tx(true), 0);
        assert_eq!(p.na.sq.len(), 1);
        assert_eq!(p.a.requester().outstanding(), 1);
        assert!(!p.a.wants_transmit());
        deliver_rtr_response(&mut p, &setup);
        assert!(p.na.cq.is_empty());
        assert_eq!(p.a.requester().outstanding(), 0);
        // The response unblocked the SQ.
        assert!(p.a.wants_transmit());
        assert!(p.tx(true) > 0);
        assert!(p.na.sq.is_empty());
        assert_eq!(
            segments(&p.wire[0]),
            vec![(Opcode::ReadRequest, Some((1, 2)))]
        );
        p.pump();
        assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, 256)]);
        assert_eq!(p.na.region(sink).data, p.nb.region(source).data);
        assert!(!p.a.is_terminated() && !p.b.is_terminated());
    }
}

/// The RTR's credit completes nothing when the QP is flushed or the peer
/// terminates over it before its response arrives.
#[test]
fn read_rtr_never_completes() {
    let setup = p2p_setup(RtrKind::Read, true, 1024, DEPTHS);
    let mut p = p2p_pair(&setup, 1);
    p.a.flush(&mut p.na);
    assert!(p.na.cq.is_empty());
    assert_eq!(p.a.requester().outstanding(), 0);

    // A TERMINATE echoing the RTR (queue 1, MSN 1), as a responder that
    // refused it would send.
    let mut p = p2p_pair(&setup, 1);
    let rtr_ulpdu =
        &setup.rtr[2..2 + usize::from(u16::from_be_bytes([setup.rtr[0], setup.rtr[1]]))];
    let terminate = forge(
        true,
        1024,
        WorkRequest::Terminate(TerminateMessage::reporting(
            TermError::RdmapCatastrophicStream,
            Some(rtr_ulpdu),
        )),
        &[],
    );
    p.ba.extend_from_slice(&terminate);
    p.rx(false);
    assert!(p.a.peer_terminated());
    assert!(p.na.cq.is_empty());
    p.a.flush(&mut p.na);
    assert!(p.na.cq.is_empty());
}
