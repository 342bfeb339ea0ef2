// SPDX-License-Identifier: GPL-2.0

//! SQ messages on the wire: framed as the transmit engine frames them, and
//! completed on the call after the one that produced their last FPDU.

use proptest::prelude::*;
use rsiw_proto::proto::crc32c::SoftCrc32c;
use rsiw_proto::proto::immediate::ImmediateData;
use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::tx_engine::{TxEngine, WorkRequest};

use crate::harness::*;

#[test]
fn a_signalled_message_completes_on_the_call_after_its_fpdus() {
    let mut p = Pair::new(Setup::default());
    p.na.sq.push_back(wr(1, send_op(), &[]));
    // The call that produces the Send does not complete it: the driver
    // hands the FPDUs to TCP first. The engine asks for no kick meanwhile
    // (the transmitter calls again, as its call was not idle).
    assert!(p.tx(true) > 0);
    assert!(p.na.cq.is_empty());
    assert!(!p.a.wants_transmit());
    assert_eq!(p.tx(true), 0);
    assert_eq!(p.na.cq, vec![ok(1, WcOpcode::Send, 0)]);
    p.na.cq.clear();

    // An unsignalled one leaves nothing behind.
    let mut quiet = wr(2, send_op(), &[]);
    quiet.signaled = false;
    p.na.sq.push_back(quiet);
    assert!(p.tx(true) > 0);
    assert_eq!(p.tx(true), 0);
    assert!(p.na.cq.is_empty());

    // A flush before the next call completes what it produced as sent,
    // once; what is still queued flushes.
    p.na.sq.push_back(wr(3, send_op(), &[]));
    p.na.sq.push_back(wr(4, send_op(), &[]));
    let produced = p.tx(true);
    assert!(produced > 0);
    p.na.sq.push_back(wr(5, send_op(), &[]));
    p.a.flush(&mut p.na);
    assert_eq!(
        p.na.cq,
        vec![
            ok(3, WcOpcode::Send, 0),
            ok(4, WcOpcode::Send, 0),
            err(5, WcOpcode::Send, WcStatus::WrFlushErr)
        ]
    );
    p.a.flush(&mut p.na);
    assert_eq!(p.tx(true), 0);
    assert_eq!(p.na.cq.len(), 3);
}

/// A's source region of 64 bytes at `VA`, and `receives` receives of 64 bytes posted at B
/// (work request IDs from 100).
fn source_and_receives(p: &mut Pair, receives: u64) -> u32 {
    let src = p.na.mr(64, VA, LOCAL_WRITE);
    let dst = p.nb.mr(64 * receives as usize, VA, LOCAL_WRITE);
    for id in 0..receives {
        p.nb.rq.push_back(RecvRequest {
            wr_id: 100 + id,
            sges: sges(&[sge(VA + 64 * id, 64, dst)]),
        });
    }
    src
}

/// Signalled Sends of `len` bytes each from region `lkey`, `count` of them from `first`.
fn signalled_sends(p: &mut Pair, first: u64, count: u64, len: u32, lkey: u32) {
    for id in first..first + count {
        p.na.sq.push_back(wr(id, send_op(), &[sge(VA, len, lkey)]));
    }
}

#[test]
fn signalled_messages_queued_together_go_in_one_call() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let src = source_and_receives(&mut p, 16);
        // Ten small signalled Sends: one call takes seven of them (the
        // completions it may hold back, one kept for a failure), the
        // next completes those and takes the other three, the third
        // completes them.
        signalled_sends(&mut p, 1, 10, 32, src);
        let first = p.tx(true);
        assert!(first > 0);
        assert!(p.na.cq.is_empty());
        let second = p.tx(true);
        assert!(second > 0 && second < first);
        let ids: Vec<u64> = p.na.cq.iter().map(|c| c.wr_id).collect();
        assert_eq!(ids, (1..=7).collect::<Vec<_>>());
        assert_eq!(p.tx(true), 0);
        let ids: Vec<u64> = p.na.cq.iter().map(|c| c.wr_id).collect();
        assert_eq!(ids, (1..=10).collect::<Vec<_>>());
        assert!(p
            .na
            .cq
            .iter()
            .all(|c| *c == ok(c.wr_id, WcOpcode::Send, 32)));
        // All ten arrive, in order.
        p.rx(true);
        let ids: Vec<u64> = p.nb.cq.iter().map(|c| c.wr_id).collect();
        assert_eq!(ids, (100..110).collect::<Vec<_>>());
    }
}

#[test]
fn a_local_operation_completes_after_the_completions_held_back() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let src = source_and_receives(&mut p, 3);
        let other = p.na.mr(64, VA + 0x1000, LOCAL_WRITE);
        signalled_sends(&mut p, 1, 2, 16, src);
        p.na.sq
            .push_back(wr(3, SendOp::LocalInv { stag: other }, &[]));
        p.na.sq.push_back(wr(4, send_op(), &[sge(VA, 16, src)]));
        // The invalidation runs in the same call as the Sends around it
        // (the region is invalid at once), and completes in its place.
        assert!(p.tx(true) > 0);
        assert!(p.na.cq.is_empty());
        assert!(p.na.sq.is_empty());
        assert_eq!(p.tx(true), 0);
        assert_eq!(
            p.na.cq,
            vec![
                ok(1, WcOpcode::Send, 16),
                ok(2, WcOpcode::Send, 16),
                ok(3, WcOpcode::LocalInv, 0),
                ok(4, WcOpcode::Send, 16)
            ]
        );
        p.rx(true);
        assert_eq!(p.nb.cq.len(), 3);
    }
}

#[test]
fn a_failure_completes_after_the_completions_held_back() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let src = source_and_receives(&mut p, 2);
        signalled_sends(&mut p, 1, 2, 16, src);
        // A bad key, not even signalled: errors always complete.
        let mut bad = wr(3, send_op(), &[sge(VA, 16, 0x4242)]);
        bad.signaled = false;
        p.na.sq.push_back(bad);
        p.na.sq.push_back(wr(4, send_op(), &[]));
        p.pump();
        p.a.flush(&mut p.na);
        assert_eq!(
            p.na.cq,
            vec![
                ok(1, WcOpcode::Send, 16),
                ok(2, WcOpcode::Send, 16),
                err(3, WcOpcode::Send, WcStatus::LocProtErr),
                err(4, WcOpcode::Send, WcStatus::WrFlushErr)
            ]
        );
        assert!(p.b.peer_terminated());
    }
}

/// A Send or Write work request of `len` bytes out of region `lkey` (at `VA`), cut into
/// `pieces` SGEs; `kind` picks the operation.
fn sq_message(
    wr_id: u64,
    kind: u8,
    len: u32,
    pieces: u32,
    signaled: bool,
    lkey: u32,
) -> SendRequest {
    let op = match kind {
        0 => send_op(),
        1 => SendOp::Send {
            solicited: true,
            invalidate: None,
        },
        2 => SendOp::Send {
            solicited: false,
            invalidate: Some(0x4321),
        },
        3 => SendOp::SendImm {
            imm: 0xabcd_0000 | wr_id as u32,
            solicited: wr_id % 2 == 0,
        },
        4 => SendOp::WriteImm {
            remote_addr: 0x9000 + u64::from(len),
            rkey: 0x777,
            imm: wr_id as u32,
        },
        _ => SendOp::Write {
            remote_addr: 0x10_0000 + wr_id,
            rkey: 0x777,
        },
    };
    let pieces = pieces.clamp(1, MAX_SGE as u32);
    let mut list = Vec::new();
    let mut left = len;
    let mut at = wr_id * 7 % 300;
    for i in 0..pieces {
        let piece = if i + 1 == pieces { left } else { left / 2 };
        list.push(sge(VA + at, piece, lkey));
        at += u64::from(piece) + 3;
        left -= piece;
    }
    let mut wr = wr(wr_id, op, &list);
    wr.signaled = signaled;
    wr
}

/// The messages `wr` is on the wire, as [`QpEngine`] documents it.
fn as_work_requests(wr: &SendRequest) -> Vec<WorkRequest<'static>> {
    let len = wr.sges.total_len().unwrap() as u32;
    match wr.op {
        SendOp::Send {
            solicited,
            invalidate,
        } => vec![WorkRequest::Send {
            len,
            solicited,
            invalidate,
        }],
        SendOp::SendImm { imm, solicited } if len == 0 => vec![WorkRequest::Immediate {
            data: ImmediateData::from_be32(imm),
            solicited,
        }],
        SendOp::SendImm { imm, solicited } => vec![
            WorkRequest::Send {
                len,
                solicited: false,
                invalidate: None,
            },
            WorkRequest::Immediate {
                data: ImmediateData::from_be32(imm),
                solicited,
            },
        ],
        SendOp::Write { remote_addr, rkey } => vec![WorkRequest::Write {
            stag: rkey,
            tagged_offset: remote_addr,
            len,
        }],
        SendOp::WriteImm {
            remote_addr,
            rkey,
            imm,
        } => vec![WorkRequest::WriteImmediate {
            stag: rkey,
            tagged_offset: remote_addr,
            len,
            data: ImmediateData::from_be32(imm),
            solicited: false,
        }],
        _ => unreachable!("not a Send or Write"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whether a message goes out as one FPDU straight from the SQ or through the message in
    /// flight, the stream is what one transmit engine frames for the same work requests, and
    /// the completions are those of the signalled ones, in order, each on the call after its
    /// last FPDU.
    #[test]
    fn sq_messages_go_out_as_the_transmit_engine_frames_them(
        msgs in proptest::collection::vec(
            (0u8..6, prop_oneof![3 => 0u32..1500, 1 => 4000u32..9000], 1u32..4, any::<bool>()),
            1..16,
        ),
        crc: bool,
        fpdu_size in 128usize..4096,
        out_len in 4096usize..9000,
        accept in proptest::option::of(0u8..3),
    ) {
        let config = EngineConfig {
            crc,
            fpdu_size,
            pd: PD,
            ird: 8,
            ord: 8,
            rtr: RtrState::None,
        };
        let mut engine = Engine::new(config, SoftCrc32c);
        // `None`: `transmit`; otherwise `transmit_by_reference`, the node taking these offers.
        let by_reference = accept.map(|a| [Accept::Never, Accept::Always, Accept::EveryOther][usize::from(a)]);
        let mut node = Node { accept: by_reference.unwrap_or_default(), ..Node::default() };
        let lkey = node.mr(32768, VA, ALL);
        node.fill(lkey, 0x3c);
        let wrs: Vec<SendRequest> = msgs
            .iter()
            .enumerate()
            .map(|(i, &(kind, len, pieces, signaled))| {
                sq_message(i as u64 + 1, kind, len, pieces, signaled, lkey)
            })
            .collect();
        node.sq.extend(wrs.iter().copied());

        let mut oracle = TxEngine::new(crc.then_some(SoftCrc32c), fpdu_size);
        let mut expected = Vec::new();
        // Where each work request's bytes end in the stream.
        let mut ends = Vec::new();
        for wr in &wrs {
            let payload = node.payload(&Source::Gather {
                sges: wr.sges.as_slice().to_vec(),
                offset: 0,
                len: wr.sges.total_len().unwrap() as u32,
            });
            for request in as_work_requests(wr) {
                frame_into(&mut oracle, request, &payload, &mut expected);
            }
            ends.push(expected.len());
        }

        let mut wire = Vec::new();
        let mut calls = 0;
        loop {
            let before = node.cq.len();
            let produced = if by_reference.is_some() {
                let (t, bytes) = transmit_by_reference(&mut engine, &mut node, out_len, out_len);
                if crc {
                    prop_assert_eq!(t.referenced, 0);
                }
                bytes
            } else {
                let mut out = vec![0u8; out_len];
                let n = engine.transmit(&mut node, &mut out);
                out.truncate(n);
                out
            };
            // A completion is written only for a message whose bytes a
            // previous call returned.
            for c in &node.cq[before..] {
                let index = wrs.iter().position(|w| w.wr_id == c.wr_id).unwrap();
                prop_assert!(ends[index] <= wire.len(), "{:?} before its bytes", c);
            }
            wire.extend_from_slice(&produced);
            calls += 1;
            prop_assert!(calls < 10_000, "no end");
            if produced.is_empty() {
                break;
            }
        }
        prop_assert!(node.sq.is_empty());
        prop_assert!(wire == expected, "{} bytes sent, {} framed", wire.len(), expected.len());
        let completions: Vec<Completion> = wrs
            .iter()
            .filter(|w| w.signaled)
            .map(|w| ok(w.wr_id, w.op.wc_opcode(), w.sges.total_len().unwrap() as u32))
            .collect();
        prop_assert_eq!(&node.cq, &completions);
        prop_assert!(!engine.is_terminated());
    }
}

#[test]
fn a_read_starts_after_the_completions_held_back() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let src = source_and_receives(&mut p, 1);
        let source = p.nb.mr(64, 0x10_0000, REMOTE_READ);
        let sink = p.na.mr(64, VA + 0x1000, LOCAL_WRITE);
        signalled_sends(&mut p, 1, 1, 16, src);
        p.na.sq.push_back(wr(
            2,
            SendOp::Read {
                remote_addr: 0x10_0000,
                rkey: source,
            },
            &[sge(VA + 0x1000, 64, sink)],
        ));
        // Its response could complete it before the Send completes: the
        // Read Request goes on the next call.
        assert!(p.tx(true) > 0);
        assert_eq!(p.na.sq.len(), 1);
        assert_eq!(p.a.requester().outstanding(), 0);
        p.pump();
        assert_eq!(
            p.na.cq,
            vec![ok(1, WcOpcode::Send, 16), ok(2, WcOpcode::RdmaRead, 64)]
        );
    }
}
