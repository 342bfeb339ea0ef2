// SPDX-License-Identifier: GPL-2.0

//! RDMA Reads into one SGE: data, ORD credits, fences; and Read Responses a
//! hostile peer forges, refused unless they fill the sink in order.

use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::terminate::TermError;
use rsiw_proto::proto::tx_engine::WorkRequest;

use crate::harness::*;

#[test]
fn rdma_read() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let source = p.nb.mr(6000, 0x10_0000, REMOTE_READ);
        p.nb.fill(source, 5);
        let sink = p.na.mr(6000, VA, LOCAL_WRITE);
        p.na.sq.push_back(wr(
            1,
            SendOp::Read {
                remote_addr: 0x10_0000 + 500,
                rkey: source,
            },
            &[sge(VA + 10, 5000, sink)],
        ));
        // A zero-length Read (the RTR form) needs no SGE.
        p.na.sq.push_back(wr(
            2,
            SendOp::Read {
                remote_addr: 0,
                rkey: 0,
            },
            &[],
        ));
        p.pump();
        assert_eq!(
            p.na.cq,
            vec![
                ok(1, WcOpcode::RdmaRead, 5000),
                ok(2, WcOpcode::RdmaRead, 0)
            ],
            "{setup:?}"
        );
        assert_eq!(
            &p.na.region(sink).data[10..5010],
            &p.nb.region(source).data[500..5500]
        );
        assert_eq!(p.a.requester().outstanding(), 0);
        assert_eq!(p.b.responder().pending(), 0);
        assert!(!p.a.wants_transmit() && !p.b.wants_transmit());
    }
}

#[test]
fn read_waits_for_ord_credits() {
    let mut p = Pair::new(Setup {
        ord: 2,
        ird: 2,
        ..Setup::default()
    });
    let source = p.nb.mr(1000, 0, REMOTE_READ);
    p.nb.fill(source, 2);
    let sink = p.na.mr(1000, VA, LOCAL_WRITE);
    for i in 0..5u64 {
        p.na.sq.push_back(wr(
            i,
            SendOp::Read {
                remote_addr: 100 * i,
                rkey: source,
            },
            &[sge(VA + 100 * i, 100, sink)],
        ));
    }
    p.tx(true);
    // Two requests out, the third waits on the SQ.
    assert_eq!(p.a.requester().outstanding(), 2);
    assert_eq!(p.na.sq.len(), 3);
    assert_eq!(p.tx(true), 0);
    assert!(!p.a.wants_transmit());
    p.rx(true);
    assert!(p.b.wants_transmit());
    p.tx(false);
    p.rx(false);
    // The responses freed the credits: the SQ may go on.
    assert!(p.a.wants_transmit());
    assert_eq!(p.na.cq.len(), 2);
    p.pump();
    let ids: Vec<u64> = p.na.cq.iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, vec![0, 1, 2, 3, 4]);
    assert!(p.na.cq.iter().all(|c| c.status == WcStatus::Success));
    assert_eq!(
        &p.na.region(sink).data[..500],
        &p.nb.region(source).data[..500]
    );
}

#[test]
fn fence_waits_for_reads() {
    let mut p = Pair::new(Setup::default());
    let source = p.nb.mr(100, 0, REMOTE_READ);
    let sink = p.na.mr(100, VA, LOCAL_WRITE);
    let dst = p.nb.mr(100, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: source,
        },
        &[sge(VA, 100, sink)],
    ));
    let mut fenced = wr(2, send_op(), &[]);
    fenced.fence = true;
    p.na.sq.push_back(fenced);
    p.nb.rq.push_back(RecvRequest {
        wr_id: 9,
        sges: sges(&[sge(VA, 100, dst)]),
    });
    p.tx(true);
    assert_eq!(p.na.sq.len(), 1);
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![ok(1, WcOpcode::RdmaRead, 100), ok(2, WcOpcode::Send, 0)]
    );
}

/// The sink of the Read the hostile peer answers: 1000 bytes in the middle
/// of a 6000-byte region at `VA`.
const SINK_OFFSET: usize = 1000;
const SINK_LEN: u32 = 1000;
const SINK_END: usize = SINK_OFFSET + SINK_LEN as usize;

/// A's regions in the forged Read Response tests.
#[derive(Debug, Clone, Copy)]
struct Regions {
    /// The region of the first Read's sink.
    sink: u32,
    /// A region with every right that no Read names.
    other: u32,
    /// The region of the second Read's sink (all of it).
    next: u32,
}

/// Where a forged Read Response goes: (STag, tagged offset, length).
type Aim<'a> = &'a dyn Fn(Regions) -> (u32, u64, u32);

/// A posts a Read into [`SINK_OFFSET`, `SINK_END`) of its region `sink`,
/// and a second one into the region `next`; the peer ignores them and
/// answers the first with a Read Response aimed by `aim`, in FPDUs of
/// `forged_fpdu` bytes. A must refuse it: terminate with a DDP base/bounds
/// error, place nothing outside the sink, and complete the Read as a bad
/// response. Returns the sink region's bytes.
fn refuse_forged_read_response(setup: Setup, forged_fpdu: usize, aim: Aim<'_>) -> Vec<u8> {
    let mut p = Pair::new(setup);
    // Every region is locally writable, a Read Response's requirement: the
    // only thing that keeps the response out of them is the sink the Read
    // named.
    let sink = p.na.mr(6000, VA, LOCAL_WRITE | REMOTE_WRITE);
    let other = p.na.mr(6000, VA, ALL);
    let next = p.na.mr(6000, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: 0x100,
        },
        &[sge(VA + SINK_OFFSET as u64, SINK_LEN, sink)],
    ));
    p.na.sq.push_back(wr(
        2,
        SendOp::Read {
            remote_addr: 0,
            rkey: 0x100,
        },
        &[sge(VA, 6000, next)],
    ));
    p.tx(true);
    assert_eq!(p.a.requester().outstanding(), 2);
    // The peer reads the requests but does not run a real responder.
    p.ab.clear();
    let (stag, to, len) = aim(Regions { sink, other, next });
    let payload = vec![FORGED; len as usize];
    let response = WorkRequest::ReadResponse {
        sink_stag: stag,
        sink_tagged_offset: to,
        len,
    };
    p.ba = forge(setup.crc, forged_fpdu, response, &payload);
    p.rx(false);
    assert!(p.a.is_terminated() && !p.a.peer_terminated(), "{setup:?}");
    assert_eq!(
        p.a.termination(),
        Some(TermError::DdpBaseBounds),
        "{setup:?}"
    );
    assert_eq!(
        p.a.receive(&[0; 4], &mut p.na),
        Err(TermError::DdpBaseBounds)
    );
    // Nothing landed outside the sink.
    for region in [other, next] {
        assert!(
            p.na.region(region).data.iter().all(|&b| b == 0),
            "{setup:?}"
        );
    }
    let data = p.na.region(sink).data.clone();
    assert!(data[..SINK_OFFSET].iter().all(|&b| b == 0), "{setup:?}");
    assert!(data[SINK_END..].iter().all(|&b| b == 0), "{setup:?}");
    let refused = err(1, WcOpcode::RdmaRead, WcStatus::BadRespErr);
    assert_eq!(p.na.cq, vec![refused], "{setup:?}");
    // The TERMINATE is pending and says so: the peer decodes it.
    assert!(p.a.wants_transmit());
    assert!(p.tx(true) > 0);
    assert!(!p.a.wants_transmit());
    p.rx(true);
    assert!(p.b.peer_terminated(), "{setup:?}");
    assert_eq!(
        p.b.termination(),
        Some(TermError::DdpBaseBounds),
        "{setup:?}"
    );
    assert_eq!(p.tx(true), 0);
    // The second Read is flushed; neither ever completes successfully.
    p.a.flush(&mut p.na);
    assert_eq!(
        p.na.cq,
        vec![refused, err(2, WcOpcode::RdmaRead, WcStatus::WrFlushErr)],
        "{setup:?}"
    );
    data
}

#[test]
fn read_response_into_another_region_is_refused() {
    let aims: [Aim<'_>; 3] = [
        // Another valid region with every right, at the sink's address.
        &|r| (r.other, VA + SINK_OFFSET as u64, 100),
        // The same, all of it.
        &|r| (r.other, VA, 6000),
        // The sink of the second Read, still outstanding behind the first.
        &|r| (r.next, VA, SINK_LEN),
    ];
    for setup in setups() {
        for aim in aims {
            let sink = refuse_forged_read_response(setup, 1024, aim);
            assert!(sink.iter().all(|&b| b == 0), "{setup:?}");
        }
    }
}

#[test]
fn read_response_outside_the_sink_is_refused() {
    let aims: [Aim<'_>; 5] = [
        // Right after the sink, in the same region.
        &|r| (r.sink, VA + SINK_END as u64, 100),
        // Right before it.
        &|r| (r.sink, VA, 100),
        // Overlapping its start by one byte.
        &|r| (r.sink, VA + SINK_OFFSET as u64 - 1, 100),
        // Overlapping its end by one byte.
        &|r| (r.sink, VA + SINK_END as u64 - 99, 100),
        // Far away, where the tagged offset would wrap with the length.
        &|r| (r.sink, u64::MAX - 50, 50),
    ];
    for setup in setups() {
        for aim in aims {
            let sink = refuse_forged_read_response(setup, 1024, aim);
            assert!(sink.iter().all(|&b| b == 0), "{setup:?}");
        }
    }
}

#[test]
fn read_response_overflowing_the_sink_later_is_refused() {
    // The response starts at the sink and is longer than it: the first
    // FPDUs fit (and are placed), a later one does not.
    for setup in setups() {
        for (fpdu, len) in [(300, SINK_LEN + 1), (300, 3000), (700, SINK_LEN + 200)] {
            let sink = refuse_forged_read_response(setup, fpdu, &|r| {
                (r.sink, VA + SINK_OFFSET as u64, len)
            });
            let placed = sink[SINK_OFFSET..SINK_END]
                .iter()
                .take_while(|&&b| b == FORGED)
                .count();
            assert!(placed > 0, "{setup:?} {fpdu} {len}");
            assert!(
                sink[SINK_OFFSET + placed..SINK_END].iter().all(|&b| b == 0),
                "{setup:?} {fpdu} {len}"
            );
        }
    }
}

/// A posts a Read of `len` bytes into its region at [`SINK_OFFSET`], and a
/// second Read behind it; the peer answers the first with `segments` and
/// nothing else. Returns the pair once A received them, and the sink's
/// STag.
fn answer_read(setup: Setup, len: u32, segments: &[Seg]) -> (Pair, u32) {
    let mut p = Pair::new(setup);
    let sink = p.na.mr(6000, VA, LOCAL_WRITE);
    let next = p.na.mr(6000, VA, LOCAL_WRITE);
    let base = VA + SINK_OFFSET as u64;
    for (wr_id, sge) in [(1, sge(base, len, sink)), (2, sge(VA, 100, next))] {
        let read = SendOp::Read {
            remote_addr: 0,
            rkey: 0x100,
        };
        p.na.sq.push_back(wr(wr_id, read, &[sge]));
    }
    p.tx(true);
    assert_eq!(p.a.requester().outstanding(), 2);
    // The peer reads the requests but does not run a real responder.
    p.ab.clear();
    for &seg in segments {
        p.ba.extend(response_segment(setup.crc, sink, base, seg));
    }
    p.rx(false);
    (p, sink)
}

/// `segments` fill a Read of `len` bytes: it completes, its sink holds them.
fn read_is_filled(len: u32, segments: &[Seg]) {
    for setup in setups() {
        let ctx = format!("{segments:?} {setup:?}");
        let (p, sink) = answer_read(setup, len, segments);
        assert!(!p.a.is_terminated(), "{ctx}");
        assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, len)], "{ctx}");
        let data = &p.na.region(sink).data;
        let end = SINK_OFFSET + len as usize;
        for (k, &b) in data[SINK_OFFSET..end].iter().enumerate() {
            assert_eq!(b, sink_byte(k), "{ctx}");
        }
        assert!(data[..SINK_OFFSET].iter().all(|&b| b == 0), "{ctx}");
        assert!(data[end..].iter().all(|&b| b == 0), "{ctx}");
        assert_eq!(p.a.requester().outstanding(), 1, "{ctx}");
    }
}

/// `segments` do not fill a Read of `len` bytes in order: A terminates with a
/// DDP base or bounds violation at the first wrong one, the Read completes
/// as a bad response (never successfully), and nothing lands outside its
/// sink.
fn read_is_refused(len: u32, segments: &[Seg]) {
    for setup in setups() {
        let ctx = format!("{segments:?} {setup:?}");
        let (mut p, sink) = answer_read(setup, len, segments);
        assert_eq!(p.a.termination(), Some(TermError::DdpBaseBounds), "{ctx}");
        assert!(!p.a.peer_terminated(), "{ctx}");
        let refused = err(1, WcOpcode::RdmaRead, WcStatus::BadRespErr);
        assert_eq!(p.na.cq, vec![refused], "{ctx}");
        let data = &p.na.region(sink).data;
        let end = SINK_OFFSET + len as usize;
        assert!(data[..SINK_OFFSET].iter().all(|&b| b == 0), "{ctx}");
        assert!(data[end..].iter().all(|&b| b == 0), "{ctx}");
        for mr in p.na.mrs.iter().filter(|mr| mr.stag != sink) {
            assert!(mr.data.iter().all(|&b| b == 0), "{ctx}");
        }
        // The TERMINATE goes out and says so.
        assert!(p.tx(true) > 0, "{ctx}");
        p.rx(true);
        assert!(p.b.peer_terminated(), "{ctx}");
        assert_eq!(p.b.termination(), Some(TermError::DdpBaseBounds), "{ctx}");
        // The flush completes the Read behind it, and this one no more.
        p.a.flush(&mut p.na);
        p.a.flush(&mut p.na);
        let flushed = err(2, WcOpcode::RdmaRead, WcStatus::WrFlushErr);
        assert_eq!(p.na.cq, vec![refused, flushed], "{ctx}");
    }
}

#[test]
fn read_completes_once_its_responses_placed_every_sink_byte_in_order() {
    // One segment.
    read_is_filled(SINK_LEN, &[(0, SINK_LEN, true)]);
    // Several, in order.
    read_is_filled(
        SINK_LEN,
        &[
            (0, 1, false),
            (1, 299, false),
            (300, 600, false),
            (900, 100, true),
        ],
    );
    // The last one empty, at the sink's end.
    read_is_filled(SINK_LEN, &[(0, SINK_LEN, false), (SINK_LEN, 0, true)]);
    // A zero-length Read: one zero-length last segment at the sink's address.
    read_is_filled(0, &[(0, 0, true)]);
}

#[test]
fn read_answered_by_one_zero_length_last_segment_fails() {
    read_is_refused(SINK_LEN, &[(0, 0, true)]);
    read_is_refused(1, &[(0, 0, true)]);
    // Also after some of the bytes.
    read_is_refused(SINK_LEN, &[(0, 500, false), (500, 0, true)]);
}

#[test]
fn read_response_segments_out_of_order_fail() {
    let half = SINK_LEN / 2;
    // The second half first.
    read_is_refused(SINK_LEN, &[(half, half, false), (0, half, true)]);
    read_is_refused(SINK_LEN, &[(half, half, true)]);
    // A gap: bytes 500..600 never sent, the total still the sink's length.
    read_is_refused(SINK_LEN, &[(0, 500, false), (600, 500, true)]);
    // A zero-length Read answered anywhere but at its sink's address.
    read_is_refused(0, &[(1, 0, true)]);
}

#[test]
fn overlapping_read_response_segments_fail() {
    // 600 + 400 bytes, the sink's length, the second over the first.
    read_is_refused(SINK_LEN, &[(0, 600, false), (200, 400, true)]);
    // The same segment twice.
    read_is_refused(SINK_LEN, &[(0, 500, false), (0, 500, true)]);
    read_is_refused(
        SINK_LEN,
        &[(0, 500, false), (0, 500, false), (500, 500, true)],
    );
}

#[test]
fn read_response_short_of_the_sink_fails() {
    read_is_refused(SINK_LEN, &[(0, SINK_LEN - 1, true)]);
    read_is_refused(SINK_LEN, &[(0, 400, false), (400, 300, true)]);
}

#[test]
fn read_response_longer_than_the_sink_fails() {
    read_is_refused(SINK_LEN, &[(0, SINK_LEN + 1, true)]);
    read_is_refused(SINK_LEN, &[(0, 600, false), (600, 500, true)]);
    // The sink filled, and then more, with the last flag only after.
    read_is_refused(SINK_LEN, &[(0, SINK_LEN, false), (SINK_LEN, 1, true)]);
    read_is_refused(0, &[(0, 1, true)]);
}
