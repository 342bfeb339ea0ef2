// SPDX-License-Identifier: GPL-2.0

//! FPDU framing and the incremental receiver, fed in every chunking.

use core::ops::ControlFlow;
use proptest::prelude::*;
use rsiw_proto::proto::crc32c::{checksum, SoftCrc32c};
use rsiw_proto::proto::fpdu::*;
use rsiw_proto::proto::rdmap::{self, Opcode, OpcodeHeader, Segment};
use rsiw_proto::proto::terminate::TermError;

/// An RDMA Read Request ULPDU (RFC 5040 section 4.4, figure in 6.1.2 of
/// RFC 7306's appendix style): untagged, L=1, QN 1, MSN 1, MO 0.
const READ_REQUEST: [u8; 46] = [
    0x41, 0x41, // DDP ctrl: L, DV=1; RDMAP ctrl: RV=1, opcode 1
    0, 0, 0, 0, // reserved
    0, 0, 0, 1, // QN 1
    0, 0, 0, 1, // MSN 1
    0, 0, 0, 0, // MO 0
    0x11, 0x22, 0x33, 0x44, // sink STag
    0, 0, 0, 0, 0, 0, 0x10, 0x00, // sink TO
    0, 0, 0x04, 0x00, // read size 1024
    0xAA, 0xBB, 0xCC, 0xDD, // source STag
    0, 0, 0x7F, 0, 0, 0, 0x20, 0x00, // source TO
];

#[test]
fn pad_and_length() {
    assert_eq!(pad_len(46), 0);
    assert_eq!(pad_len(0), 2);
    assert_eq!(pad_len(1), 1);
    assert_eq!(pad_len(3), 3);
    assert_eq!(fpdu_len(46), 52);
    assert_eq!(fpdu_len(0), 8);
}

#[test]
fn frames_read_request_with_crc() {
    let mut out = [0u8; 64];
    let n = encode_fpdu(&mut out, &READ_REQUEST, Some(SoftCrc32c)).unwrap();
    assert_eq!(n, 52);
    assert_eq!(&out[..2], &[0x00, 0x2E]);
    assert_eq!(&out[2..48], &READ_REQUEST);
    let crc = checksum(SoftCrc32c, &out[..48]);
    assert_eq!(&out[48..52], &crc.to_le_bytes());
    // Without CRC the field is zero.
    let n = encode_fpdu::<SoftCrc32c>(&mut out, &READ_REQUEST, None).unwrap();
    assert_eq!(&out[48..n], &[0, 0, 0, 0]);
}

#[test]
fn trailer_is_pad_then_crc() {
    for ulpdu_len in 0..4 {
        let pad = pad_len(ulpdu_len);
        let mut digest = rsiw_proto::proto::crc32c::Crc32cDigest::new(SoftCrc32c);
        digest.update(&[0x12, 0x34]);
        let mut hashed = vec![0x12, 0x34];
        hashed.resize(2 + pad, 0);
        let mut want = vec![0; pad];
        want.extend_from_slice(&checksum(SoftCrc32c, &hashed).to_le_bytes());
        assert_eq!(FpduTrailer::new(ulpdu_len, Some(digest)).as_bytes(), want);
        let mut out = [0xEEu8; 8];
        assert!(write_trailer(
            &mut out[..want.len()],
            ulpdu_len,
            Some(digest)
        ));
        assert_eq!(out[..want.len()], want);
        assert!(out[want.len()..].iter().all(|&b| b == 0xEE));
        // A buffer of another length is left alone.
        let mut wrong = [0xEEu8; 8];
        assert!(!write_trailer(
            &mut wrong[..want.len() + 1],
            ulpdu_len,
            Some(digest)
        ));
        assert!(!write_trailer(
            &mut wrong[..want.len() - 1],
            ulpdu_len,
            Some(digest)
        ));
        assert_eq!(wrong, [0xEE; 8]);
        // Without CRC the field is zero.
        assert!(write_trailer::<SoftCrc32c>(
            &mut out[..want.len()],
            ulpdu_len,
            None
        ));
        assert!(out[..want.len()].iter().all(|&b| b == 0));
    }
}

#[test]
fn pad_is_covered_by_crc() {
    let mut out = [0u8; 16];
    let n = encode_fpdu(&mut out, &[0xAB], Some(SoftCrc32c)).unwrap();
    assert_eq!(n, 8);
    assert_eq!(&out[..4], &[0, 1, 0xAB, 0]);
    assert_eq!(&out[4..8], &checksum(SoftCrc32c, &out[..4]).to_le_bytes());
}

#[test]
fn encode_errors() {
    let mut small = [0u8; 51];
    assert!(encode_fpdu(&mut small, &READ_REQUEST, Some(SoftCrc32c)).is_err());
    let big = vec![0u8; 70000];
    let mut out = vec![0u8; 70010];
    assert!(encode_fpdu(&mut out, &big, Some(SoftCrc32c)).is_err());
    assert!(length_field(65536).is_err());
}

#[derive(Debug, PartialEq, Eq, Clone)]
enum Ev {
    Header(Vec<u8>, usize),
    Payload(Vec<u8>),
    Complete(usize),
}

/// Records `ev`, merging adjacent payload.
fn record(events: &mut Vec<Ev>, expected_offset: &mut usize, ev: RxEvent<'_, '_>) {
    match ev {
        RxEvent::Header { header, ulpdu_len } => {
            *expected_offset = 0;
            events.push(Ev::Header(header.to_vec(), ulpdu_len))
        }
        RxEvent::Payload { data, offset } => {
            assert_eq!(offset, *expected_offset);
            *expected_offset += data.len();
            if let Some(Ev::Payload(p)) = events.last_mut() {
                p.extend_from_slice(data);
            } else {
                events.push(Ev::Payload(data.to_vec()));
            }
        }
        RxEvent::Complete { ulpdu_len } => events.push(Ev::Complete(ulpdu_len)),
    }
}

/// `stream` cut into consecutive chunks of the sizes `chunks` gives in turn (0 counts as 1;
/// no sizes means bytes one by one), the last one possibly shorter.
fn split<'s>(stream: &'s [u8], chunks: &[usize]) -> Vec<&'s [u8]> {
    let mut out = Vec::new();
    let mut pos = 0;
    for k in 0.. {
        if pos >= stream.len() {
            break;
        }
        let size = chunks
            .get(k % chunks.len().max(1))
            .copied()
            .unwrap_or(1)
            .max(1);
        let chunk = &stream[pos..(pos + size).min(stream.len())];
        out.push(chunk);
        pos += chunk.len();
    }
    out
}

/// Feeds `stream` in chunks of the given sizes, merging adjacent payload.
fn run(
    stream: &[u8],
    crc: bool,
    chunks: &[usize],
) -> (Vec<Ev>, Option<rsiw_proto::proto::fpdu::FpduError>) {
    let mut rx = FpduReceiver::new(SoftCrc32c, crc);
    let mut events = Vec::new();
    let mut expected_offset = 0;
    for chunk in split(stream, chunks) {
        let res = rx.feed(chunk, |ev| {
            record(&mut events, &mut expected_offset, ev);
            ControlFlow::Continue(())
        });
        match res {
            Ok(n) => assert_eq!(n, chunk.len()),
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}

/// As [`run`], taking every FPDU a chunk holds whole with
/// [`FpduReceiver::take_whole`] and stepping through the others.
fn run_whole(
    stream: &[u8],
    crc: bool,
    chunks: &[usize],
) -> (Vec<Ev>, Option<rsiw_proto::proto::fpdu::FpduError>) {
    let mut rx = FpduReceiver::new(SoftCrc32c, crc);
    let mut events = Vec::new();
    let mut expected_offset = 0;
    for chunk in split(stream, chunks) {
        let mut at = 0;
        while at < chunk.len() {
            let rest = &chunk[at..];
            let failed = |rx: &mut FpduReceiver<SoftCrc32c>, e| {
                // The error is sticky, and nothing is taken whole any more.
                assert_eq!(rx.step(&[0]), Err(e));
                assert_eq!(rx.take_whole(rest), None);
            };
            if let Some(whole) = rx.take_whole(rest) {
                assert!(whole.len <= rest.len());
                let (header, ulpdu_len) = (whole.header, whole.ulpdu_len);
                record(
                    &mut events,
                    &mut expected_offset,
                    RxEvent::Header { header, ulpdu_len },
                );
                if !whole.payload.is_empty() {
                    let data = whole.payload;
                    record(
                        &mut events,
                        &mut expected_offset,
                        RxEvent::Payload { data, offset: 0 },
                    );
                }
                if let Err(e) = whole.crc {
                    failed(&mut rx, e);
                    return (events, Some(e));
                }
                record(
                    &mut events,
                    &mut expected_offset,
                    RxEvent::Complete { ulpdu_len },
                );
                assert!(rx.at_fpdu_boundary());
                at += whole.len;
                continue;
            }
            match rx.step(rest) {
                Ok((n, event)) => {
                    at += n;
                    match event {
                        Some(ev) => record(&mut events, &mut expected_offset, ev),
                        None => assert!(n > 0),
                    }
                }
                Err(e) => {
                    failed(&mut rx, e);
                    return (events, Some(e));
                }
            }
        }
    }
    (events, None)
}

fn send_ulpdu(payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; 18];
    rdmap::encode_headers(
        &rdmap::untagged_header(Opcode::Send, true, 0, 1, 0),
        &OpcodeHeader::None,
        &mut v,
    )
    .unwrap();
    v.extend_from_slice(payload);
    v
}

#[test]
fn receives_read_request_byte_by_byte() {
    let mut out = [0u8; 64];
    let n = encode_fpdu(&mut out, &READ_REQUEST, Some(SoftCrc32c)).unwrap();
    let (events, err) = run(&out[..n], true, &[1]);
    assert_eq!(err, None);
    assert_eq!(
        events,
        vec![Ev::Header(READ_REQUEST.to_vec(), 46), Ev::Complete(46)]
    );
    let seg = Segment::decode(&READ_REQUEST).unwrap();
    assert_eq!(seg.opcode, Opcode::ReadRequest);
}

#[test]
fn header_then_payload() {
    let ulpdu = send_ulpdu(b"hello, world");
    let mut out = [0u8; 64];
    let n = encode_fpdu(&mut out, &ulpdu, Some(SoftCrc32c)).unwrap();
    let (events, err) = run(&out[..n], true, &[3, 7, 1]);
    assert_eq!(err, None);
    assert_eq!(
        events,
        vec![
            Ev::Header(ulpdu[..18].to_vec(), 30),
            Ev::Payload(b"hello, world".to_vec()),
            Ev::Complete(30)
        ]
    );
}

#[test]
fn tiny_ulpdus() {
    for len in 0..4usize {
        let ulpdu = vec![0x41u8; len];
        let mut out = [0u8; 16];
        let n = encode_fpdu(&mut out, &ulpdu, Some(SoftCrc32c)).unwrap();
        let (events, err) = run(&out[..n], true, &[1]);
        assert_eq!(err, None);
        assert_eq!(
            events,
            vec![Ev::Header(ulpdu.clone(), len), Ev::Complete(len)]
        );
    }
}

#[test]
fn crc_mismatch_is_mpa_error_and_sticky() {
    let mut out = [0u8; 64];
    let n = encode_fpdu(&mut out, &READ_REQUEST, Some(SoftCrc32c)).unwrap();
    out[10] ^= 1;
    let (_, err) = run(&out[..n], true, &[64]);
    let err = err.unwrap();
    assert_eq!(err.term(), TermError::MpaCrc);
    let mut rx = FpduReceiver::new(SoftCrc32c, true);
    assert!(rx.feed(&out[..n], |_| ControlFlow::Continue(())).is_err());
    assert_eq!(rx.step(&[0]), Err(err));
    // With CRC off the corruption goes unnoticed by MPA and the CRC field is ignored.
    let (_, err) = run(&out[..n], false, &[64]);
    assert_eq!(err, None);
}

#[test]
fn feed_stops_on_break() {
    let ulpdu = send_ulpdu(b"x");
    let mut out = [0u8; 64];
    let n = encode_fpdu(&mut out, &ulpdu, Some(SoftCrc32c)).unwrap();
    let mut rx = FpduReceiver::new(SoftCrc32c, true);
    let used = rx.feed(&out[..n], |_| ControlFlow::Break(())).unwrap();
    assert_eq!(used, 2 + 18);
    assert!(!rx.at_fpdu_boundary());
    let used2 = rx
        .feed(&out[used..n], |_| ControlFlow::Continue(()))
        .unwrap();
    assert_eq!(used + used2, n);
    assert!(rx.at_fpdu_boundary());
}

fn arb_ulpdu() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        proptest::collection::vec(any::<u8>(), 0..5),
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(|p| send_ulpdu(&p)),
        Just(READ_REQUEST.to_vec()),
    ]
}

proptest! {
    /// Any chunking yields the same events as feeding the stream at once,
    /// and the payload reassembles to the ULPDU.
    #[test]
    fn chunking_does_not_matter(ulpdus in proptest::collection::vec(arb_ulpdu(), 1..5),
                                chunks in proptest::collection::vec(1usize..40, 1..10),
                                crc in any::<bool>()) {
        let mut stream = Vec::new();
        for u in &ulpdus {
            let mut out = vec![0u8; fpdu_len(u.len())];
            let n = if crc { encode_fpdu(&mut out, u, Some(SoftCrc32c)) } else { encode_fpdu::<SoftCrc32c>(&mut out, u, None) }.unwrap();
            stream.extend_from_slice(&out[..n]);
        }
        let (whole, e1) = run(&stream, crc, &[stream.len()]);
        let (pieces, e2) = run(&stream, crc, &chunks);
        prop_assert_eq!(e1, None);
        prop_assert_eq!(e2, None);
        prop_assert_eq!(&whole, &pieces);
        let mut rebuilt = Vec::new();
        let mut current = Vec::new();
        for ev in whole {
            match ev {
                Ev::Header(h, _) => current = h,
                Ev::Payload(p) => current.extend_from_slice(&p),
                Ev::Complete(_) => rebuilt.push(core::mem::take(&mut current)),
            }
        }
        prop_assert_eq!(rebuilt, ulpdus);
    }

    /// Taking whole FPDUs yields the events and errors of stepping
    /// through them, for any stream (valid, damaged or garbage) and
    /// chunking.
    #[test]
    fn take_whole_agrees_with_step(ulpdus in proptest::collection::vec(arb_ulpdu(), 1..5),
                                   damage in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..3),
                                   garbage in proptest::collection::vec(any::<u8>(), 0..64),
                                   chunks in proptest::collection::vec(1usize..120, 1..10),
                                   crc in any::<bool>()) {
        let mut stream = Vec::new();
        for u in &ulpdus {
            let mut out = vec![0u8; fpdu_len(u.len())];
            let n = if crc { encode_fpdu(&mut out, u, Some(SoftCrc32c)) } else { encode_fpdu::<SoftCrc32c>(&mut out, u, None) }.unwrap();
            stream.extend_from_slice(&out[..n]);
        }
        for (at, flip) in &damage {
            let i = at.index(stream.len());
            stream[i] ^= flip;
        }
        stream.extend_from_slice(&garbage);
        for sizes in [&[stream.len()][..], &chunks[..]] {
            prop_assert_eq!(run_whole(&stream, crc, sizes), run(&stream, crc, sizes));
        }
    }

    #[test]
    fn garbage_never_panics(stream in proptest::collection::vec(any::<u8>(), 0..400),
                            chunks in proptest::collection::vec(1usize..40, 1..10),
                            crc in any::<bool>()) {
        let _ = run(&stream, crc, &chunks);
    }
}
