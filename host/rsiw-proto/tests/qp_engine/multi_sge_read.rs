// SPDX-License-Identifier: GPL-2.0

//! Reads into several SGEs: one Read Request per non-empty SGE, in order,
//! each with its own ORD credit; the work request completes once, on the
//! last.

use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::rdmap::{Opcode, ReadRequestHeader};
use rsiw_proto::proto::terminate::TermError;
use rsiw_proto::proto::tx_engine::WorkRequest;

use crate::harness::*;

/// Where the three sinks of [`multi_read`] lie in their regions of A:
/// (offset in the region, length).
const PARTS: [(u64, u32); 3] = [(100, 1500), (7, 700), (1000, 2300)];
/// The offset in B's source region the multi-SGE Read starts at.
const PART_SOURCE: u64 = 200;
/// The total length of the three parts.
const PARTS_LEN: u32 = 1500 + 700 + 2300;
/// B's source region's address.
const SOURCE_VA: u64 = 0x10_0000;

/// A Pair whose A has three sink regions and whose B has a filled source
/// region of `source_len` bytes; returns the sinks' STags, the source's and
/// the 3-SGE Read (`wr_id` 1).
fn multi_read(p: &mut Pair, source_len: usize) -> ([u32; 3], u32, SendRequest) {
    let sinks = [0; 3].map(|_| p.na.mr(4000, VA, LOCAL_WRITE));
    let source = p.nb.mr(source_len, SOURCE_VA, REMOTE_READ);
    p.nb.fill(source, 7);
    let list: Vec<Sge> = sinks
        .iter()
        .zip(PARTS)
        .map(|(&sink, (at, len))| sge(VA + at, len, sink))
        .collect();
    let read = wr(
        1,
        SendOp::Read {
            remote_addr: SOURCE_VA + PART_SOURCE,
            rkey: source,
        },
        &list,
    );
    (sinks, source, read)
}

/// The three sinks hold the source's bytes in order, and nothing else.
fn check_parts(p: &Pair, sinks: [u32; 3], source: u32, ctx: &str) {
    let src = &p.nb.region(source).data;
    let mut from = PART_SOURCE as usize;
    for (&sink, (at, len)) in sinks.iter().zip(PARTS) {
        let (at, len) = (at as usize, len as usize);
        let data = &p.na.region(sink).data;
        assert_eq!(&data[at..at + len], &src[from..from + len], "{ctx}");
        assert!(data[..at].iter().all(|&b| b == 0), "{ctx}");
        assert!(data[at + len..].iter().all(|&b| b == 0), "{ctx}");
        from += len;
    }
}

/// The opcodes of the segments A sent.
fn sent_opcodes(p: &Pair) -> Vec<Opcode> {
    segments(&p.wire[0]).into_iter().map(|(op, _)| op).collect()
}

#[test]
fn multi_sge_read_fills_the_sinks_in_order() {
    for ord in [8, 2, 1] {
        for setup in setups() {
            let setup = Setup { ord, ..setup };
            let ctx = format!("{setup:?}");
            let mut p = Pair::new(setup);
            p.record = true;
            let (sinks, source, read) = multi_read(&mut p, 6000);
            p.na.sq.push_back(read);
            p.pump();
            assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, PARTS_LEN)], "{ctx}");
            check_parts(&p, sinks, source, &ctx);
            // One Read Request per SGE, MSNs 1 to 3 of queue 1.
            let segs = segments(&p.wire[0]);
            assert_eq!(msns(&segs, 1), vec![1, 2, 3], "{ctx}");
            assert_eq!(sent_opcodes(&p), vec![Opcode::ReadRequest; 3], "{ctx}");
            assert_eq!(p.a.requester().outstanding(), 0);
            assert_eq!(p.b.responder().pending(), 0);
            assert!(!p.a.wants_transmit() && !p.b.wants_transmit());
            assert!(!p.a.is_terminated() && !p.b.is_terminated());
        }
    }
}

#[test]
fn multi_sge_read_parts_take_one_credit_each() {
    // ORD 8: all three parts go at once.
    let mut p = Pair::new(Setup::default());
    let (sinks, source, read) = multi_read(&mut p, 6000);
    p.na.sq.push_back(read);
    p.tx(true);
    assert_eq!(p.a.requester().outstanding(), 3);
    assert!(p.na.sq.is_empty());
    assert!(!p.a.wants_transmit());
    p.pump();
    assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, PARTS_LEN)]);
    check_parts(&p, sinks, source, "ord 8");

    // ORD 1: one part at a time, the next as the response to the previous
    // one frees its credit; the work request completes on the last.
    let mut p = Pair::new(Setup {
        ord: 1,
        ..Setup::default()
    });
    p.record = true;
    let (sinks, source, read) = multi_read(&mut p, 6000);
    p.na.sq.push_back(read);
    for part in 0..3 {
        assert!(p.tx(true) > 0, "part {part}");
        assert_eq!(p.a.requester().outstanding(), 1, "part {part}");
        // Taken from the SQ with its first part.
        assert!(p.na.sq.is_empty());
        // The next part waits for the credit.
        assert_eq!(p.tx(true), 0, "part {part}");
        assert!(!p.a.wants_transmit(), "part {part}");
        p.rx(true);
        assert!(p.b.wants_transmit());
        p.tx(false);
        p.rx(false);
        assert_eq!(p.a.requester().outstanding(), 0, "part {part}");
        if part < 2 {
            assert!(p.na.cq.is_empty(), "part {part}");
            assert!(p.a.wants_transmit(), "part {part}");
        }
    }
    assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, PARTS_LEN)]);
    assert!(!p.a.wants_transmit());
    assert_eq!(p.tx(true), 0);
    check_parts(&p, sinks, source, "ord 1");
    assert_eq!(msns(&segments(&p.wire[0]), 1), vec![1, 2, 3]);

    // ORD 2: two parts, then the third.
    let mut p = Pair::new(Setup {
        ord: 2,
        ..Setup::default()
    });
    let (sinks, source, read) = multi_read(&mut p, 6000);
    p.na.sq.push_back(read);
    p.tx(true);
    assert_eq!(p.a.requester().outstanding(), 2);
    p.pump();
    assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, PARTS_LEN)]);
    check_parts(&p, sinks, source, "ord 2");
}

#[test]
fn work_requests_after_a_multi_sge_read_wait_for_it() {
    for ord in [1, 8] {
        for setup in setups() {
            let setup = Setup { ord, ..setup };
            let ctx = format!("{setup:?}");
            let mut p = Pair::new(setup);
            p.record = true;
            let (sinks, source, read) = multi_read(&mut p, 6000);
            let dst = p.nb.mr(64, VA, LOCAL_WRITE);
            let word = p.nb.mr(8, 0, REMOTE_ATOMIC);
            let result = p.na.mr(16, VA, LOCAL_WRITE);
            p.nb.rq.push_back(RecvRequest {
                wr_id: 10,
                sges: sges(&[sge(VA, 64, dst)]),
            });
            p.nb.rq.push_back(RecvRequest {
                wr_id: 11,
                sges: sges(&[sge(VA, 64, dst)]),
            });
            p.na.sq.push_back(read);
            p.na.sq.push_back(wr(2, send_op(), &[]));
            p.na.sq.push_back(wr(
                3,
                SendOp::Read {
                    remote_addr: SOURCE_VA,
                    rkey: source,
                },
                &[sge(VA, 8, result)],
            ));
            p.na.sq.push_back(wr(
                4,
                SendOp::FetchAdd {
                    remote_addr: 0,
                    rkey: word,
                    add: 5,
                    add_mask: 0,
                },
                &[sge(VA + 8, 8, result)],
            ));
            let mut fenced = wr(5, send_op(), &[]);
            fenced.fence = true;
            p.na.sq.push_back(fenced);
            p.pump();
            // Requests complete in order. The unfenced Send completes when it
            // is sent, right after the Read's last part (before its
            // response); the fenced Send waits for all the parts' responses.
            let ids: Vec<u64> = p.na.cq.iter().map(|c| c.wr_id).collect();
            assert_eq!(ids, vec![2, 1, 3, 4, 5], "{ctx}");
            assert!(
                p.na.cq.iter().all(|c| c.status == WcStatus::Success),
                "{ctx}"
            );
            assert_eq!(p.na.cq[1].byte_len, PARTS_LEN);
            check_parts(&p, sinks, source, &ctx);
            // On the wire, nothing overtook a part: the three Read Requests,
            // then the Send, then the later requests, then the fenced Send.
            use Opcode::*;
            assert_eq!(
                sent_opcodes(&p),
                vec![
                    ReadRequest,
                    ReadRequest,
                    ReadRequest,
                    Send,
                    ReadRequest,
                    AtomicRequest,
                    Send
                ],
                "{ctx}"
            );
        }
    }
}

#[test]
fn multi_sge_read_failing_at_the_peer_completes_once() {
    // The source region ends inside part 1, 2 or 3: the peer terminates on
    // that part's Read Request, which completes the work request in error;
    // the flush then completes it no more.
    for (failing, source_len) in [(1, 1000), (2, 2000), (3, 4000)] {
        for ord in [1, 2, 8] {
            for setup in setups() {
                let setup = Setup { ord, ..setup };
                let ctx = format!("part {failing} {setup:?}");
                let mut p = Pair::new(setup);
                let (_, _, read) = multi_read(&mut p, source_len);
                p.na.sq.push_back(read);
                p.na.sq.push_back(wr(
                    2,
                    SendOp::Read {
                        remote_addr: SOURCE_VA,
                        rkey: p.nb.mrs[1].stag,
                    },
                    &[sge(VA, 8, p.na.mrs[1].stag)],
                ));
                p.pump();
                assert!(p.a.peer_terminated(), "{ctx}");
                assert_eq!(p.b.termination(), Some(TermError::RdmapBaseBounds));
                assert_eq!(
                    p.na.cq,
                    vec![err(1, WcOpcode::RdmaRead, WcStatus::RemAccessErr)],
                    "{ctx}"
                );
                p.a.flush(&mut p.na);
                p.a.flush(&mut p.na);
                assert_eq!(
                    p.na.cq,
                    vec![
                        err(1, WcOpcode::RdmaRead, WcStatus::RemAccessErr),
                        err(2, WcOpcode::RdmaRead, WcStatus::WrFlushErr)
                    ],
                    "{ctx}"
                );
                assert!(!p.a.wants_transmit());
            }
        }
    }
}

#[test]
fn flush_in_the_middle_of_a_multi_sge_read_completes_it_once() {
    // After `responses` of its parts' responses arrived.
    for (ord, responses) in [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (8, 0), (8, 2)] {
        let ctx = format!("ord {ord}, {responses} responses");
        let mut p = Pair::new(Setup {
            ord,
            ..Setup::default()
        });
        let (_, _, read) = multi_read(&mut p, 6000);
        p.na.sq.push_back(read);
        p.na.sq.push_back(wr(2, send_op(), &[]));
        p.nb.rq.push_back(RecvRequest {
            wr_id: 9,
            sges: sges(&[]),
        });
        p.tx(true);
        // B answers the parts A sent; A gets `responses` of the answers, byte
        // by byte, and sends the parts the freed credits allow.
        let mut stream = Vec::new();
        let mut from = 0;
        for _ in 0..responses {
            let before = p.a.requester().outstanding();
            while p.a.requester().outstanding() == before {
                if from == stream.len() {
                    p.rx(true);
                    p.tx(false);
                    stream = std::mem::take(&mut p.ba);
                    from = 0;
                }
                p.a.receive(&stream[from..from + 1], &mut p.na).unwrap();
                from += 1;
            }
            p.tx(true);
        }
        // Once the last part is out, the Send behind the Read goes and
        // completes; before, it waits on the SQ.
        let all_out = ord + responses >= 3;
        assert_eq!(p.a.requester().outstanding(), ord.min(3 - responses));
        // A signalled message completes on the call after the one that
        // produced it.
        p.tx(true);
        let sent = vec![ok(2, WcOpcode::Send, 0)];
        assert_eq!(p.na.cq, if all_out { sent } else { vec![] }, "{ctx}");
        p.a.flush(&mut p.na);
        let mut want = vec![err(1, WcOpcode::RdmaRead, WcStatus::WrFlushErr)];
        if all_out {
            want.insert(0, ok(2, WcOpcode::Send, 0));
        } else {
            want.push(err(2, WcOpcode::Send, WcStatus::WrFlushErr));
        }
        assert_eq!(p.na.cq, want, "{ctx}");
        p.a.flush(&mut p.na);
        assert_eq!(p.na.cq.len(), 2, "{ctx}");
        // The rest of the responses finds the stream gone.
        if from < stream.len() {
            assert!(p.a.receive(&stream[from..], &mut p.na).is_err());
        }
        assert_eq!(p.na.cq.len(), 2, "{ctx}");
        assert_eq!(p.tx(true), 0);
    }
}

/// Where a forged Read Response to part 2 goes, given the three sinks: (STag,
/// tagged offset, length).
type PartAim<'a> = &'a dyn Fn([u32; 3]) -> (u32, u64, u32);

#[test]
fn read_response_outside_its_parts_sink_is_refused() {
    // A Read into the three sinks; the peer answers part 1 correctly, then
    // aims part 2's response elsewhere.
    let aims: [PartAim<'_>; 5] = [
        // Part 1's sink.
        &|s| (s[0], VA + PARTS[0].0, PARTS[1].1),
        // Part 3's sink, which a later request names.
        &|s| (s[2], VA + PARTS[2].0, PARTS[1].1),
        // Part 2's region, one byte before its sink.
        &|s| (s[1], VA + PARTS[1].0 - 1, PARTS[1].1),
        // Part 2's sink, one byte longer.
        &|s| (s[1], VA + PARTS[1].0, PARTS[1].1 + 1),
        // Part 2's sink's length at part 1's address.
        &|s| (s[1], VA + PARTS[0].0, PARTS[1].1),
    ];
    for setup in setups() {
        for (i, aim) in aims.iter().enumerate() {
            let ctx = format!("aim {i} {setup:?}");
            let mut p = Pair::new(setup);
            let (sinks, _, read) = multi_read(&mut p, 6000);
            p.na.sq.push_back(read);
            p.tx(true);
            assert_eq!(p.a.requester().outstanding(), 3);
            p.ab.clear();
            let first = vec![FORGED; PARTS[0].1 as usize];
            let mut stream = forge(
                setup.crc,
                4096,
                WorkRequest::ReadResponse {
                    sink_stag: sinks[0],
                    sink_tagged_offset: VA + PARTS[0].0,
                    len: PARTS[0].1,
                },
                &first,
            );
            let (stag, to, len) = aim(sinks);
            stream.extend(forge(
                setup.crc,
                4096,
                WorkRequest::ReadResponse {
                    sink_stag: stag,
                    sink_tagged_offset: to,
                    len,
                },
                &vec![FORGED; len as usize],
            ));
            p.ba = stream;
            p.rx(false);
            assert_eq!(p.a.termination(), Some(TermError::DdpBaseBounds), "{ctx}");
            assert!(!p.a.peer_terminated());
            // Part 1 landed in its sink, nothing else anywhere.
            let (at, len) = (PARTS[0].0 as usize, PARTS[0].1 as usize);
            let data = &p.na.region(sinks[0]).data;
            assert!(data[at..at + len].iter().all(|&b| b == FORGED), "{ctx}");
            assert!(data[..at].iter().all(|&b| b == 0), "{ctx}");
            assert!(data[at + len..].iter().all(|&b| b == 0), "{ctx}");
            for sink in &sinks[1..] {
                assert!(p.na.region(*sink).data.iter().all(|&b| b == 0), "{ctx}");
            }
            // The work request completes once, as a bad response; the flush
            // completes it no more.
            let refused = vec![err(1, WcOpcode::RdmaRead, WcStatus::BadRespErr)];
            assert_eq!(p.na.cq, refused, "{ctx}");
            assert!(p.tx(true) > 0);
            p.a.flush(&mut p.na);
            p.a.flush(&mut p.na);
            assert_eq!(p.na.cq, refused, "{ctx}");
        }
    }
}

#[test]
fn multi_sge_read_completes_only_once_every_part_is_filled() {
    // The peer answers each of the three parts in two segments, except that
    // part `short`'s response is one zero-length last segment.
    for short in [None, Some(0), Some(1), Some(2)] {
        for setup in setups() {
            let ctx = format!("short {short:?} {setup:?}");
            let mut p = Pair::new(setup);
            let (sinks, _, read) = multi_read(&mut p, 6000);
            p.na.sq.push_back(read);
            p.tx(true);
            assert_eq!(p.a.requester().outstanding(), 3, "{ctx}");
            p.ab.clear();
            for (part, (&sink, (at, len))) in sinks.iter().zip(PARTS).enumerate() {
                let segments = if short == Some(part) {
                    vec![(0, 0, true)]
                } else {
                    vec![(0, len / 2, false), (len / 2, len - len / 2, true)]
                };
                for seg in segments {
                    p.ba.extend(response_segment(setup.crc, sink, VA + at, seg));
                }
            }
            p.rx(false);
            // The parts before the short one were placed, the others not.
            for (part, (&sink, (at, len))) in sinks.iter().zip(PARTS).enumerate() {
                let (at, len) = (at as usize, len as usize);
                let data = &p.na.region(sink).data;
                let placed = short.map_or(true, |short| part < short);
                for (k, &b) in data[at..at + len].iter().enumerate() {
                    assert_eq!(b, if placed { sink_byte(k) } else { 0 }, "{ctx}");
                }
            }
            if short.is_none() {
                assert!(!p.a.is_terminated(), "{ctx}");
                assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, PARTS_LEN)], "{ctx}");
                continue;
            }
            assert_eq!(p.a.termination(), Some(TermError::DdpBaseBounds), "{ctx}");
            // The work request completes once, as a bad response.
            let refused = vec![err(1, WcOpcode::RdmaRead, WcStatus::BadRespErr)];
            assert_eq!(p.na.cq, refused, "{ctx}");
            p.a.flush(&mut p.na);
            p.a.flush(&mut p.na);
            assert_eq!(p.na.cq, refused, "{ctx}");
        }
    }
}

#[test]
fn read_request_whose_source_or_sink_wraps_is_refused_on_arrival() {
    // (source TO, sink TO, length): sinks that end past 2^64 by one byte or
    // many, the source valid; a source that does.
    let cases = [
        (SOURCE_VA, u64::MAX, 2),
        (SOURCE_VA, u64::MAX - 99, 101),
        (SOURCE_VA, u64::MAX - 4000, 5000),
        (u64::MAX - 10, 0, 100),
    ];
    for (source_to, sink_to, len) in cases {
        for setup in setups() {
            let ctx = format!("{source_to:#x} {sink_to:#x} {len} {setup:?}");
            let mut p = Pair::new(setup);
            let source = p.nb.mr(6000, SOURCE_VA, REMOTE_READ);
            let request = ReadRequestHeader {
                sink_stag: 0x1234,
                sink_tagged_offset: sink_to,
                read_size: len,
                source_stag: source,
                source_tagged_offset: source_to,
            };
            p.ab = forge(setup.crc, 4096, WorkRequest::ReadRequest(request), &[]);
            p.rx(true);
            assert_eq!(p.b.termination(), Some(TermError::RdmapToWrap), "{ctx}");
            // Nothing was queued to answer: the TERMINATE is all B sends.
            assert_eq!(p.b.responder().pending(), 0, "{ctx}");
            p.record = true;
            p.tx(false);
            let sent: Vec<Opcode> = segments(&p.wire[1]).iter().map(|s| s.0).collect();
            assert_eq!(sent, vec![Opcode::Terminate], "{ctx}");
            p.rx(false);
            assert!(p.a.peer_terminated(), "{ctx}");
            assert_eq!(p.a.termination(), Some(TermError::RdmapToWrap), "{ctx}");
            assert_eq!(p.tx(false), 0, "{ctx}");
        }
    }
}

#[test]
fn zero_length_sges_of_a_read_are_skipped() {
    for ord in [1, 8] {
        let setup = Setup {
            ord,
            ..Setup::default()
        };
        let mut p = Pair::new(setup);
        p.record = true;
        let source = p.nb.mr(1000, SOURCE_VA, REMOTE_READ);
        p.nb.fill(source, 4);
        let sink = p.na.mr(1000, VA, LOCAL_WRITE);
        // Zero-length SGEs are not looked at: not even their keys.
        p.na.sq.push_back(wr(
            1,
            SendOp::Read {
                remote_addr: SOURCE_VA + 10,
                rkey: source,
            },
            &[
                sge(0, 0, 0xdead_beef),
                sge(VA + 500, 100, sink),
                sge(VA, 0, 0x1234),
                sge(VA, 200, sink),
                sge(1, 0, 0),
            ],
        ));
        // Only zero-length SGEs: one zero-length Read, as with a single one.
        p.na.sq.push_back(wr(
            2,
            SendOp::Read {
                remote_addr: 0,
                rkey: source,
            },
            &[sge(VA, 0, sink), sge(VA + 8, 0, 0x77)],
        ));
        p.pump();
        assert_eq!(
            p.na.cq,
            vec![ok(1, WcOpcode::RdmaRead, 300), ok(2, WcOpcode::RdmaRead, 0)],
            "ord {ord}"
        );
        let src = &p.nb.region(source).data;
        let data = &p.na.region(sink).data;
        assert_eq!(&data[500..600], &src[10..110]);
        assert_eq!(&data[..200], &src[110..310]);
        assert!(data[200..500].iter().all(|&b| b == 0));
        assert!(data[600..].iter().all(|&b| b == 0));
        assert_eq!(msns(&segments(&p.wire[0]), 1), vec![1, 2, 3], "ord {ord}");
    }
}

#[test]
fn multi_sge_read_local_errors() {
    // A bad sink anywhere fails the Read before any part is sent.
    for bad in 0..3 {
        let mut p = Pair::new(Setup::default());
        let (mut sinks, _, mut read) = multi_read(&mut p, 6000);
        sinks[bad] = 0x7700;
        let list: Vec<Sge> = sinks
            .iter()
            .zip(PARTS)
            .map(|(&sink, (at, len))| sge(VA + at, len, sink))
            .collect();
        read.sges = sges(&list);
        p.na.sq.push_back(read);
        p.na.sq.push_back(wr(2, send_op(), &[]));
        p.pump();
        assert_eq!(
            p.na.cq,
            vec![err(1, WcOpcode::RdmaRead, WcStatus::LocProtErr)],
            "sink {bad}"
        );
        assert_eq!(p.b.responder().pending(), 0);
        assert!(p.b.peer_terminated());
        p.a.flush(&mut p.na);
        assert_eq!(p.na.cq.len(), 2);
    }

    // A source range past the end of the address space.
    let mut p = Pair::new(Setup::default());
    let sink = p.na.mr(64, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: u64::MAX - 4,
            rkey: 0x100,
        },
        &[sge(VA, 8, sink), sge(VA + 8, 8, sink)],
    ));
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![err(1, WcOpcode::RdmaRead, WcStatus::LocLenErr)]
    );

    // More than 4 GiB in all.
    let mut p = Pair::new(Setup::default());
    let sink = p.na.mr(64, VA, LOCAL_WRITE);
    p.na.sq.push_back(wr(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: 0x100,
        },
        &[sge(VA, u32::MAX, sink), sge(VA, 1, sink)],
    ));
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![err(1, WcOpcode::RdmaRead, WcStatus::LocLenErr)]
    );
}

#[test]
fn read_into_max_sge_sinks() {
    // No more than MAX_SGE SGEs can be posted.
    let one = sge(VA, 10, 0x100);
    assert!(SgeList::new(&[one; MAX_SGE + 1]).is_none());
    for ord in [1, 3, 8] {
        let mut p = Pair::new(Setup {
            ord,
            ..Setup::default()
        });
        let source = p.nb.mr(4096, 0, REMOTE_READ);
        p.nb.fill(source, 9);
        let sink = p.na.mr(4096, VA, LOCAL_WRITE);
        // Six sinks in reverse order within the region.
        let list: Vec<Sge> = (0..MAX_SGE as u64)
            .map(|i| sge(VA + 3000 - 500 * i, 300 + i as u32, sink))
            .collect();
        p.na.sq.push_back(wr(
            1,
            SendOp::Read {
                remote_addr: 0,
                rkey: source,
            },
            &list,
        ));
        p.pump();
        let total: u32 = list.iter().map(|s| s.length).sum();
        assert_eq!(p.na.cq, vec![ok(1, WcOpcode::RdmaRead, total)]);
        let src = &p.nb.region(source).data;
        let data = &p.na.region(sink).data;
        let mut from = 0;
        for s in &list {
            let at = (s.addr - VA) as usize;
            let len = s.length as usize;
            assert_eq!(&data[at..at + len], &src[from..from + len], "ord {ord}");
            from += len;
        }
    }
}
