// SPDX-License-Identifier: GPL-2.0

//! The receive engine: loopback from the transmit engine for every message
//! kind in every chunking, and every TERMINATE the receive path raises.

mod engine_common;

use engine_common::*;
use proptest::prelude::*;
use rsiw_proto::proto::atomic::{AtomicRequestHeader, AtomicResponseHeader};
use rsiw_proto::proto::crc32c::SoftCrc32c;
use rsiw_proto::proto::ddp::{DdpControl, DdpHeader, UntaggedHeader};
use rsiw_proto::proto::fpdu::encode_fpdu;
use rsiw_proto::proto::immediate::ImmediateData;
use rsiw_proto::proto::ord_ird::RequestKind;
use rsiw_proto::proto::placement::AccessFlags;
use rsiw_proto::proto::rdmap::{self, Opcode, OpcodeHeader, ReadRequestHeader};
use rsiw_proto::proto::rx_engine::RxEngine;
use rsiw_proto::proto::terminate::{TermError, TerminateMessage};
use rsiw_proto::proto::tx_engine::{TxEngine, WorkRequest};

const W: u32 = 0x0000_0101; // remote write
const R: u32 = 0x0000_0202; // remote read
const A: u32 = 0x0000_0303; // remote atomic
const S: u32 = 0x0000_0404; // local write: a Read Response sink

fn payload(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

fn receiver() -> Mem {
    let mut mem = Mem::new();
    mem.add_region(W, 4096, AccessFlags::REMOTE_WRITE);
    mem.add_region(R, 4096, AccessFlags::REMOTE_READ);
    mem.add_region(A, 64, AccessFlags::REMOTE_ATOMIC);
    mem.add_region(S, 4096, AccessFlags::LOCAL_WRITE);
    for _ in 0..8 {
        mem.posted.push_back(4096);
    }
    // This side has a Read and then an Atomic outstanding.
    mem.requester.try_issue(RequestKind::Read).unwrap();
    mem.requester.try_issue(RequestKind::Atomic).unwrap();
    mem
}

const TERM_ECHO: [u8; 18] = [0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0];

/// Every message kind, with a small FPDU size so that payload messages
/// take several segments. Returns the stream and the expected events.
fn scenario(crc: bool) -> (Vec<u8>, Vec<Ev>, Vec<u8>, Vec<u8>) {
    let mut tx = TxEngine::new(crc.then_some(SoftCrc32c), 128);
    let mut s = Vec::new();
    let send1 = payload(300, 1);
    let write = payload(500, 2);
    let write_imm = payload(200, 3);
    let read_resp = payload(300, 4);
    let imm = ImmediateData::from_be32(0xDEAD_BEEF);
    let read = ReadRequestHeader {
        sink_stag: 0x5000,
        sink_tagged_offset: 0,
        read_size: 100,
        source_stag: R,
        source_tagged_offset: 50,
    };
    let atomic = AtomicRequestHeader::fetch_add(77, A, 8, 5, 0);
    let atomic_resp = AtomicResponseHeader {
        request_id: 9,
        original_value: 0x1234,
    };
    let send = |len, solicited, invalidate| WorkRequest::Send {
        len,
        solicited,
        invalidate,
    };
    s.extend(serialize(&mut tx, send(300, false, None), &send1));
    s.extend(serialize(&mut tx, send(0, true, Some(0x999)), &[]));
    let wr = WorkRequest::Write {
        stag: W,
        tagged_offset: 10,
        len: 500,
    };
    s.extend(serialize(&mut tx, wr, &write));
    let wr = WorkRequest::WriteImmediate {
        stag: W,
        tagged_offset: 1000,
        len: 200,
        data: imm,
        solicited: false,
    };
    s.extend(serialize(&mut tx, wr, &write_imm));
    let wr = WorkRequest::Immediate {
        data: imm,
        solicited: true,
    };
    s.extend(serialize(&mut tx, wr, &[]));
    s.extend(serialize(&mut tx, WorkRequest::ReadRequest(read), &[]));
    let wr = WorkRequest::ReadResponse {
        sink_stag: S,
        sink_tagged_offset: 100,
        len: 300,
    };
    s.extend(serialize(&mut tx, wr, &read_resp));
    s.extend(serialize(&mut tx, WorkRequest::AtomicRequest(atomic), &[]));
    s.extend(serialize(
        &mut tx,
        WorkRequest::AtomicResponse(atomic_resp),
        &[],
    ));
    s.extend(serialize(&mut tx, send(1, true, None), &[0xAB]));
    let term = TerminateMessage::reporting(TermError::DdpMsnRange, Some(&TERM_ECHO));
    s.extend(serialize(&mut tx, WorkRequest::Terminate(term), &[]));
    let events = vec![
        Ev::Send {
            msn: 1,
            data: send1,
            solicited: false,
            invalidate: None,
        },
        Ev::Send {
            msn: 2,
            data: vec![],
            solicited: true,
            invalidate: Some(0x999),
        },
        Ev::Immediate {
            msn: 3,
            data: imm,
            solicited: false,
        },
        Ev::Immediate {
            msn: 4,
            data: imm,
            solicited: true,
        },
        Ev::ReadRequest {
            slot: 0,
            header: read,
            source_offset: 50,
        },
        Ev::ReadResponse { slot: 0 },
        Ev::AtomicRequest {
            slot: 1,
            header: atomic,
            target_offset: 8,
        },
        Ev::AtomicResponse {
            slot: 1,
            header: atomic_resp,
        },
        Ev::Send {
            msn: 5,
            data: vec![0xAB],
            solicited: true,
            invalidate: None,
        },
        Ev::Terminate {
            control: term.control,
            ddp_header: Some(TERM_ECHO.to_vec()),
        },
    ];
    let mut w = vec![0u8; 4096];
    w[10..510].copy_from_slice(&write);
    w[1000..1200].copy_from_slice(&write_imm);
    let mut sink = vec![0u8; 4096];
    sink[100..400].copy_from_slice(&read_resp);
    (s, events, w, sink)
}

fn check_loopback(crc: bool, sizes: &[usize]) {
    let (mut stream, events, w, sink) = scenario(crc);
    // Bytes after the TERMINATE are never looked at.
    stream.extend_from_slice(&[0xFF; 9]);
    let mut mem = receiver();
    let mut rx = RxEngine::new(SoftCrc32c, crc, PD);
    feed_chunked(&mut rx, &mut mem, &stream, sizes).unwrap();
    assert_eq!(mem.events, events);
    assert_eq!(mem.bytes(W), &w[..]);
    assert_eq!(mem.bytes(S), &sink[..]);
    assert!(!rx.is_running());
    assert!(rx.termination().is_none());
    assert_eq!(rx.feed(&[0; 4], &mut mem), Ok(0));
    assert_eq!(mem.requester.outstanding(), 0);
    assert_eq!(mem.responder.pending(), 2);
    assert_eq!(rx.queues().send.expected_msn(), 6);
    assert_eq!(mem.taken.len(), 5);
}

#[test]
fn loopback_every_kind_whole() {
    check_loopback(true, &[]);
    check_loopback(false, &[]);
}

#[test]
fn loopback_every_kind_byte_by_byte() {
    check_loopback(true, &[1]);
    check_loopback(false, &[1]);
}

proptest! {
    #[test]
    fn loopback_random_chunks(crc: bool, sizes in prop::collection::vec(1usize..300, 1..20)) {
        check_loopback(crc, &sizes);
    }
}

/// Everything a stream fed in `sizes` left behind: the result, the
/// context's record and memory, and the engine's state.
fn outcome(stream: &[u8], crc: bool, sizes: &[usize]) -> impl PartialEq + core::fmt::Debug {
    outcome_in_buffers(stream, crc, sizes, 0)
}

/// [`outcome`] of feeding the pieces `per_buffer` at a time with
/// [`RxEngine::feed_pieces`] (0: one at a time with [`RxEngine::feed`]).
fn outcome_in_buffers(
    stream: &[u8],
    crc: bool,
    sizes: &[usize],
    per_buffer: usize,
) -> impl PartialEq + core::fmt::Debug {
    let mut mem = receiver();
    let mut rx = RxEngine::new(SoftCrc32c, crc, PD);
    let result = if per_buffer == 0 {
        feed_chunked(&mut rx, &mut mem, stream, sizes)
    } else {
        feed_in_buffers(&mut rx, &mut mem, stream, sizes, per_buffer)
    };
    let regions: Vec<Vec<u8>> = [W, R, A, S]
        .iter()
        .map(|&s| mem.bytes(s).to_vec())
        .collect();
    (
        result,
        mem.events,
        mem.taken,
        regions,
        mem.requester,
        mem.responder,
        *rx.queues(),
        rx.is_running(),
        rx.termination().copied(),
    )
}

proptest! {
    /// Feeding FPDUs whole (taken in one go) and byte by byte (stepped
    /// through part by part) does the same, for damaged streams too.
    #[test]
    fn whole_fpdus_and_bytes_agree(crc: bool,
                                   damage in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..3),
                                   sizes in prop::collection::vec(1usize..300, 1..20)) {
        let (mut stream, _, _, _) = scenario(crc);
        for (at, flip) in &damage {
            let i = at.index(stream.len());
            stream[i] ^= flip;
        }
        let bytes = outcome(&stream, crc, &[1]);
        prop_assert_eq!(&outcome(&stream, crc, &[]), &bytes);
        prop_assert_eq!(&outcome(&stream, crc, &sizes), &bytes);
    }
}

proptest! {
    /// Feeding a socket buffer's pieces at once does what feeding them one
    /// by one does, for damaged streams too.
    #[test]
    fn pieces_at_once_and_one_by_one_agree(crc: bool,
                                           damage in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..3),
                                           sizes in prop::collection::vec(1usize..300, 1..20),
                                           per_buffer in 1usize..20) {
        let (mut stream, _, _, _) = scenario(crc);
        for (at, flip) in &damage {
            let i = at.index(stream.len());
            stream[i] ^= flip;
        }
        let one_by_one = outcome_in_buffers(&stream, crc, &sizes, 0);
        prop_assert_eq!(&outcome_in_buffers(&stream, crc, &sizes, per_buffer), &one_by_one);
    }
}

/// A payload over many pieces of one socket buffer is placed with one call.
#[test]
fn payload_over_pieces_is_placed_at_once() {
    let data = payload(4000, 3);
    let stream = fpdu(&write(W, 0, &data), true);
    for per_buffer in [1, 4, 100] {
        let mut mem = receiver();
        let mut rx = RxEngine::new(SoftCrc32c, true, PD);
        feed_in_buffers(&mut rx, &mut mem, &stream, &[100], per_buffer).unwrap();
        assert_eq!(&mem.bytes(W)[..4000], &data[..]);
        // 40 pieces of 100 bytes, the first holding the headers.
        let buffers = stream.len().div_ceil(100).div_ceil(per_buffer);
        assert_eq!(mem.runs, buffers, "{per_buffer} pieces per buffer");
    }
}

#[test]
fn crc_mismatch_in_stream_terminates() {
    let (stream, _, _, _) = scenario(true);
    for flip in [3, 40, 200, 300] {
        let mut bad = stream.clone();
        bad[flip] ^= 0x10;
        let mut mem = receiver();
        let mut rx = RxEngine::new(SoftCrc32c, true, PD);
        let err = feed_chunked(&mut rx, &mut mem, &bad, &[7]).unwrap_err();
        // A damaged length field makes the FPDU boundary wrong: the CRC of
        // the misframed FPDU fails, or its header is reported.
        if flip != 3 {
            assert_eq!(err.error(), TermError::MpaCrc, "flip {flip}");
        }
        assert_eq!(rx.termination(), Some(&*err));
        assert_eq!(rx.feed(&[0], &mut mem), Err(err.error()));
        // No message completes from the damaged FPDU.
        assert!(mem.events.is_empty(), "flip {flip}");
    }
}

// ---- hand-built malformed segments ----

fn fpdu(ulpdu: &[u8], crc: bool) -> Vec<u8> {
    let mut out = vec![0u8; ulpdu.len() + 16];
    let n = if crc {
        encode_fpdu(&mut out, ulpdu, Some(SoftCrc32c)).unwrap()
    } else {
        encode_fpdu::<SoftCrc32c>(&mut out, ulpdu, None).unwrap()
    };
    out.truncate(n);
    out
}

fn ulpdu(ddp: DdpHeader, header: OpcodeHeader<'_>, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; 128];
    let n = rdmap::encode_headers(&ddp, &header, &mut v).unwrap();
    v.truncate(n);
    v.extend_from_slice(payload);
    v
}

fn write(stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    ulpdu(
        rdmap::tagged_header(Opcode::RdmaWrite, true, stag, to),
        OpcodeHeader::None,
        payload,
    )
}

fn send(msn: u32, mo: u32, last: bool, payload: &[u8]) -> Vec<u8> {
    ulpdu(
        rdmap::untagged_header(Opcode::Send, last, 0, msn, mo),
        OpcodeHeader::None,
        payload,
    )
}

fn read_request(size: u32, stag: u32, to: u64, msn: u32) -> Vec<u8> {
    let h = ReadRequestHeader {
        sink_stag: 1,
        sink_tagged_offset: 0,
        read_size: size,
        source_stag: stag,
        source_tagged_offset: to,
    };
    ulpdu(
        rdmap::untagged_header(Opcode::ReadRequest, true, 0, msn, 0),
        OpcodeHeader::ReadRequest(h),
        &[],
    )
}

/// Runs `ulpdus` (framed with CRC on and off, whole and byte by byte) and
/// checks that the stream fails with `error`, echoing the headers of the
/// last ULPDU when the error asks for it.
fn expect_term(mem: impl Fn() -> Mem, ulpdus: &[Vec<u8>], error: TermError) {
    for crc in [true, false] {
        for sizes in [&[][..], &[1][..], &[5, 3][..]] {
            let stream: Vec<u8> = ulpdus.iter().flat_map(|u| fpdu(u, crc)).collect();
            let mut m = mem();
            let mut rx = RxEngine::new(SoftCrc32c, crc, PD);
            let term = feed_chunked(&mut rx, &mut m, &stream, sizes).unwrap_err();
            assert_eq!(term.error(), error, "crc {crc} sizes {sizes:?}");
            let last = ulpdus.last().unwrap();
            let msg = term.message();
            assert_eq!(msg.control.error(), Some(error));
            if error.echo_flags().ddp_header {
                let ddp_len = DdpControl::from_byte(last[0]).header_len();
                assert_eq!(msg.ddp_header, Some(&last[..ddp_len]));
                assert_eq!(msg.segment_length, Some(last.len() as u16));
                let mut out = [0u8; 128];
                msg.encode(&mut out).unwrap();
            }
            if error.echo_flags().rdmap_header {
                assert!(msg.rdmap_header.is_some());
            }
        }
    }
}

#[test]
fn term_invalid_stag() {
    expect_term(
        receiver,
        &[write(0x0999_0101, 0, &[1, 2])],
        TermError::DdpInvalidStag,
    );
    // Right index, wrong key.
    expect_term(
        receiver,
        &[write(W ^ 0x1, 0, &[1, 2])],
        TermError::DdpInvalidStag,
    );
    expect_term(
        receiver,
        &[read_request(8, 0x7777_0000, 0, 1)],
        TermError::RdmapInvalidStag,
    );
}

#[test]
fn term_bounds() {
    expect_term(
        receiver,
        &[write(W, 4095, &[1, 2])],
        TermError::DdpBaseBounds,
    );
    expect_term(
        receiver,
        &[write(W, u64::MAX, &[1, 2])],
        TermError::DdpToWrap,
    );
    expect_term(
        receiver,
        &[read_request(4097, R, 0, 1)],
        TermError::RdmapBaseBounds,
    );
}

#[test]
fn term_access_rights() {
    expect_term(receiver, &[write(R, 0, &[1])], TermError::RdmapAccessRights);
    expect_term(
        receiver,
        &[read_request(8, W, 0, 1)],
        TermError::RdmapAccessRights,
    );
    // An atomic on a region without remote atomic access.
    let h = AtomicRequestHeader::fetch_add(1, W, 0, 1, 0);
    let u = ulpdu(
        rdmap::untagged_header(Opcode::AtomicRequest, true, 0, 1, 0),
        OpcodeHeader::AtomicRequest(h),
        &[],
    );
    expect_term(receiver, &[u], TermError::RdmapAccessRights);
}

#[test]
fn term_misaligned_atomic() {
    let h = AtomicRequestHeader::cmp_swap(1, A, 4, 0, !0, 1, !0);
    let u = ulpdu(
        rdmap::untagged_header(Opcode::AtomicRequest, true, 0, 1, 0),
        OpcodeHeader::AtomicRequest(h),
        &[],
    );
    expect_term(receiver, &[u], TermError::RdmapCatastrophicStream);
}

#[test]
fn term_msn_and_mo() {
    expect_term(receiver, &[send(2, 0, true, &[1])], TermError::DdpMsnRange);
    expect_term(
        receiver,
        &[send(1, 0, true, &[1]), send(1, 0, true, &[1])],
        TermError::DdpMsnRange,
    );
    expect_term(
        receiver,
        &[send(1, 0, false, &[1, 2]), send(1, 3, true, &[1])],
        TermError::DdpInvalidMo,
    );
    expect_term(
        receiver,
        &[read_request(0, 0, 0, 2)],
        TermError::DdpMsnRange,
    );
}

#[test]
fn term_no_receive_buffer_and_too_long() {
    let empty = || {
        let mut m = receiver();
        m.posted.clear();
        m
    };
    expect_term(empty, &[send(1, 0, true, &[])], TermError::DdpMsnNoBuffer);
    let small = || {
        let mut m = receiver();
        m.posted.clear();
        m.posted.push_back(2);
        m
    };
    expect_term(
        small,
        &[send(1, 0, true, &[1, 2, 3])],
        TermError::DdpMessageTooLong,
    );
}

#[test]
fn term_bad_versions() {
    let mut u = send(1, 0, true, &[1]);
    u[0] = (u[0] & !3) | 2;
    expect_term(receiver, &[u], TermError::DdpUntaggedInvalidVersion);
    let mut u = write(W, 0, &[1]);
    u[0] &= !3;
    expect_term(receiver, &[u], TermError::DdpTaggedInvalidVersion);
    let mut u = send(1, 0, true, &[1]);
    u[1] = (u[1] & 0x3F) | 0x80;
    expect_term(receiver, &[u], TermError::RdmapInvalidVersion);
}

#[test]
fn term_unexpected_opcode() {
    let mut u = send(1, 0, true, &[1]);
    u[1] = (u[1] & 0xF0) | 0xC;
    expect_term(receiver, &[u], TermError::RdmapUnexpectedOpcode);
    // A Read Response nobody asked for.
    let fresh = || {
        let mut m = receiver();
        m.requester = rsiw_proto::proto::ord_ird::Requester::new(4);
        m
    };
    let rr = ulpdu(
        rdmap::tagged_header(Opcode::ReadResponse, true, S, 0),
        OpcodeHeader::None,
        &[1],
    );
    expect_term(
        fresh,
        std::slice::from_ref(&rr),
        TermError::RdmapUnexpectedOpcode,
    );
    // An Atomic Response while the oldest request is a Read.
    let ar = ulpdu(
        rdmap::untagged_header(Opcode::AtomicResponse, true, 0, 1, 0),
        OpcodeHeader::AtomicResponse(AtomicResponseHeader {
            request_id: 1,
            original_value: 0,
        }),
        &[],
    );
    expect_term(receiver, &[ar], TermError::RdmapUnexpectedOpcode);
    // Tagged Send.
    let mut u = write(W, 0, &[1]);
    u[1] = (u[1] & 0xF0) | Opcode::Send as u8;
    expect_term(receiver, &[u], TermError::RdmapUnexpectedOpcode);
}

/// A Read Request (MSN 1) of `size` bytes from `source_to` of R into
/// `sink_to` of the requester's STag 1.
fn read_request_into(size: u32, source_to: u64, sink_to: u64) -> Vec<u8> {
    let h = ReadRequestHeader {
        sink_stag: 1,
        sink_tagged_offset: sink_to,
        read_size: size,
        source_stag: R,
        source_tagged_offset: source_to,
    };
    ulpdu(
        rdmap::untagged_header(Opcode::ReadRequest, true, 0, 1, 0),
        OpcodeHeader::ReadRequest(h),
        &[],
    )
}

#[test]
fn term_read_request_wraps() {
    let requests = [
        // The source's range wraps; R grants remote read.
        read_request_into(16, u64::MAX - 7, 0),
        // The sink's does, by one byte or more; the source is good.
        read_request_into(2, 0, u64::MAX),
        read_request_into(17, 100, u64::MAX - 15),
        read_request_into(4096, 0, u64::MAX - 4000),
    ];
    for request in &requests {
        expect_term(
            receiver,
            std::slice::from_ref(request),
            TermError::RdmapToWrap,
        );
        // Refused on arrival: nothing queued to answer.
        for crc in [true, false] {
            let mut mem = receiver();
            let mut rx = RxEngine::new(SoftCrc32c, crc, PD);
            let term = feed_chunked(&mut rx, &mut mem, &fpdu(request, crc), &[]).unwrap_err();
            assert_eq!(term.error(), TermError::RdmapToWrap);
            assert_eq!(mem.responder.pending(), 0);
            assert!(mem.events.is_empty());
        }
    }
}

#[test]
fn zero_length_read_request_never_wraps() {
    // Nothing to read or place: any offsets will do, up to the last one.
    for crc in [true, false] {
        let request = read_request_into(0, u64::MAX, u64::MAX);
        let mut mem = receiver();
        let mut rx = RxEngine::new(SoftCrc32c, crc, PD);
        feed_chunked(&mut rx, &mut mem, &fpdu(&request, crc), &[]).unwrap();
        assert_eq!(mem.responder.pending(), 1);
        assert!(matches!(mem.events[..], [Ev::ReadRequest { .. }]));
    }
}

#[test]
fn term_read_beyond_ird() {
    let ird2 = || {
        let mut m = receiver();
        m.responder = rsiw_proto::proto::ord_ird::Responder::new(2);
        m
    };
    expect_term(
        ird2,
        &[
            read_request(8, R, 0, 1),
            read_request(8, R, 0, 2),
            read_request(8, R, 0, 3),
        ],
        TermError::RdmapCatastrophicStream,
    );
}

#[test]
fn term_header_only_message_with_payload() {
    let mut u = read_request(8, R, 0, 1);
    u.extend_from_slice(&[0; 4]);
    expect_term(receiver, &[u], TermError::RdmapCatastrophicStream);
}

#[test]
fn term_wrong_queue() {
    let ddp = DdpHeader::Untagged(UntaggedHeader {
        control: DdpControl {
            tagged: false,
            last: true,
            reserved: 0,
            version: 1,
        },
        rdmap_control: 0x43,
        ulp_reserved: 0,
        queue_number: 1,
        msn: 1,
        message_offset: 0,
    });
    expect_term(
        receiver,
        &[ulpdu(ddp, OpcodeHeader::None, &[])],
        TermError::DdpInvalidQn,
    );
}

#[test]
fn bad_header_with_bad_crc_is_a_crc_error() {
    let u = write(0x0999_0101, 0, &[1, 2, 3, 4]);
    let mut stream = fpdu(&u, true);
    let n = stream.len();
    stream[n - 1] ^= 1;
    let mut mem = receiver();
    let mut rx = RxEngine::new(SoftCrc32c, true, PD);
    let term = feed_chunked(&mut rx, &mut mem, &stream, &[3]).unwrap_err();
    assert_eq!(term.error(), TermError::MpaCrc);
    let msg = term.message();
    assert!(msg.ddp_header.is_none());
    // Without CRC the header error is reported as soon as it is seen.
    let stream = fpdu(&u, false);
    let mut rx = RxEngine::new(SoftCrc32c, false, PD);
    let err = rx.feed(&stream[..20], &mut mem).unwrap_err();
    assert_eq!(err, TermError::DdpInvalidStag);
    assert_eq!(rx.termination().unwrap().error(), err);
}

#[test]
fn placed_data_of_bad_crc_fpdu_never_completes() {
    let mut stream = fpdu(&send(1, 0, true, &[9; 40]), true);
    let n = stream.len();
    stream[n - 2] ^= 0x80;
    let mut mem = receiver();
    let mut rx = RxEngine::new(SoftCrc32c, true, PD);
    let term = feed_chunked(&mut rx, &mut mem, &stream, &[1]).unwrap_err();
    assert_eq!(term.error(), TermError::MpaCrc);
    // The payload went straight to the buffer, but no completion says so.
    assert_eq!(&mem.taken[0][..40], &[9; 40]);
    assert!(mem.events.is_empty());
}

#[test]
fn zero_length_messages() {
    let mut mem = receiver();
    mem.requester = rsiw_proto::proto::ord_ird::Requester::new(1);
    mem.requester.issue_rtr_read().unwrap();
    let mut tx = TxEngine::new(Some(SoftCrc32c), 1024);
    let mut s = Vec::new();
    // Zero-length Write and Read (RFC 6581 RTR), with STags naming nothing.
    let wr = WorkRequest::Write {
        stag: 0,
        tagged_offset: 0,
        len: 0,
    };
    s.extend(serialize(&mut tx, wr, &[]));
    let h = ReadRequestHeader {
        sink_stag: 0,
        sink_tagged_offset: 0,
        read_size: 0,
        source_stag: 0,
        source_tagged_offset: 0,
    };
    s.extend(serialize(&mut tx, WorkRequest::ReadRequest(h), &[]));
    let wr = WorkRequest::ReadResponse {
        sink_stag: 0,
        sink_tagged_offset: 0,
        len: 0,
    };
    s.extend(serialize(&mut tx, wr, &[]));
    let wr = WorkRequest::Send {
        len: 0,
        solicited: false,
        invalidate: None,
    };
    s.extend(serialize(&mut tx, wr, &[]));
    let mut rx = RxEngine::new(SoftCrc32c, true, PD);
    feed_chunked(&mut rx, &mut mem, &s, &[1]).unwrap();
    assert_eq!(
        mem.events,
        vec![
            Ev::ReadRequest {
                slot: 0,
                header: h,
                source_offset: 0
            },
            Ev::ReadResponse { slot: 0 },
            Ev::Send {
                msn: 1,
                data: vec![],
                solicited: false,
                invalidate: None
            },
        ]
    );
    assert!(rx.is_running());
}

#[test]
fn deliver_error_terminates() {
    struct Refuse(Mem);
    impl rsiw_proto::proto::rx_engine::RxContext for Refuse {
        fn accept_read_response(
            &mut self,
            slot: usize,
            stag: u32,
            to: u64,
            len: usize,
            last: bool,
        ) -> Result<(), TermError> {
            self.0.accept_read_response(slot, stag, to, len, last)
        }
        fn lookup_stag(&mut self, s: u32) -> Option<rsiw_proto::proto::placement::MemoryRegion> {
            self.0.lookup_stag(s)
        }
        fn place_tagged(
            &mut self,
            g: &rsiw_proto::proto::placement::Grant,
            d: &[u8],
        ) -> Result<(), TermError> {
            self.0.place_tagged(g, d)
        }
        fn recv_buffer(&mut self) -> Option<u64> {
            self.0.recv_buffer()
        }
        fn place_untagged(&mut self, o: u32, d: &[u8]) -> Result<(), TermError> {
            self.0.place_untagged(o, d)
        }
        fn requester(&mut self) -> &mut rsiw_proto::proto::ord_ird::Requester {
            &mut self.0.requester
        }
        fn responder(&mut self) -> &mut rsiw_proto::proto::ord_ird::Responder {
            &mut self.0.responder
        }
        fn deliver(
            &mut self,
            _: rsiw_proto::proto::rx_engine::RxEvent<'_>,
        ) -> Result<(), TermError> {
            Err(TermError::RdmapOperationCannotInvalidate)
        }
    }
    let u = ulpdu(
        rdmap::untagged_header(Opcode::SendInvalidate, true, 0x55, 1, 0),
        OpcodeHeader::None,
        &[],
    );
    let mut ctx = Refuse(receiver());
    let mut rx = RxEngine::new(SoftCrc32c, false, PD);
    let err = rx.feed(&fpdu(&u, false), &mut ctx).unwrap_err();
    assert_eq!(err, TermError::RdmapOperationCannotInvalidate);
    let term = rx.termination().unwrap();
    assert_eq!(term.offending_header(), Some(&u[..]));
}

#[test]
fn garbage_never_panics() {
    let mut seed = 0x1234_5678u32;
    for round in 0..2000 {
        let len = (round % 97) + 1;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                seed as u8
            })
            .collect();
        let mut mem = receiver();
        let mut rx = RxEngine::new(SoftCrc32c, round % 2 == 0, PD);
        let _ = feed_chunked(&mut rx, &mut mem, &bytes, &[3, 1, 8]);
    }
}

#[test]
fn skip_message_expects_the_next_msn() {
    use rsiw_proto::proto::ddp::QueueNumber;
    for crc in [true, false] {
        let mut m = receiver();
        let mut rx = RxEngine::new(SoftCrc32c, crc, PD);
        assert!(rx.skip_message(QueueNumber::Send));
        assert!(rx.skip_message(QueueNumber::ReadRequest));
        assert_eq!(rx.queues().send.expected_msn(), 2);
        assert_eq!(rx.queues().read_request.expected_msn(), 2);
        let stream: Vec<u8> = [send(2, 0, true, b"hi"), read_request(4, R, 0, 2)]
            .iter()
            .flat_map(|u| fpdu(u, crc))
            .collect();
        feed_chunked(&mut rx, &mut m, &stream, &[]).unwrap();
        // No receive was taken for the skipped Send, one for MSN 2.
        assert_eq!(m.taken.len(), 1);
        assert!(matches!(m.events[0], Ev::Send { msn: 2, .. }));
        assert!(matches!(m.events[1], Ev::ReadRequest { .. }));
    }
    // MSN 1 after the skip is out of range.
    let mem = || {
        let mut m = receiver();
        m.posted.clear();
        m.posted.push_back(16);
        m
    };
    for crc in [true, false] {
        let mut m = mem();
        let mut rx = RxEngine::new(SoftCrc32c, crc, PD);
        rx.skip_message(QueueNumber::Send);
        let stream = fpdu(&send(1, 0, true, b""), crc);
        let term = feed_chunked(&mut rx, &mut m, &stream, &[]).unwrap_err();
        assert_eq!(term.error(), TermError::DdpMsnRange);
        assert!(m.taken.is_empty());
    }
}
