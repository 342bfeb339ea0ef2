// SPDX-License-Identifier: GPL-2.0

//! DDP headers and RDMAP segments: vectors, every error arm, round trips.

use proptest::prelude::*;
use rsiw_proto::proto::atomic::{AtomicError, AtomicRequestHeader, AtomicResponseHeader};
use rsiw_proto::proto::ddp::*;
use rsiw_proto::proto::immediate::ImmediateData;
use rsiw_proto::proto::rdmap::*;
use rsiw_proto::proto::terminate::TermError;
use rsiw_proto::proto::wire;

const READ_REQUEST: [u8; 46] = [
    0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, // DDP untagged, QN1 MSN1 MO0
    0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0, 0, 0, 0x10, 0x00, 0, 0, 0x04, 0x00, 0xAA, 0xBB, 0xCC, 0xDD,
    0, 0, 0x7F, 0, 0, 0, 0x20, 0x00,
];

#[test]
fn decodes_read_request() {
    let s = Segment::decode(&READ_REQUEST).unwrap();
    assert_eq!(s.opcode, Opcode::ReadRequest);
    let DdpHeader::Untagged(h) = s.ddp else {
        panic!()
    };
    assert!(h.control.last && !h.control.tagged);
    assert_eq!((h.queue_number, h.msn, h.message_offset), (1, 1, 0));
    assert_eq!(
        s.header,
        OpcodeHeader::ReadRequest(ReadRequestHeader {
            sink_stag: 0x1122_3344,
            sink_tagged_offset: 0x1000,
            read_size: 1024,
            source_stag: 0xAABB_CCDD,
            source_tagged_offset: 0x7F00_0000_2000,
        })
    );
    assert!(s.payload.is_empty());
    let mut out = [0u8; 64];
    let n = encode_headers(&s.ddp, &s.header, &mut out).unwrap();
    assert_eq!(&out[..n], &READ_REQUEST);
}

#[test]
fn rdma_write_vector() {
    // Tagged, L=1, RDMA Write to STag 0x01020304 at TO 0x10, payload "data".
    let w = [
        0xC1, 0x40, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0x10, b'd', b'a', b't', b'a',
    ];
    let s = Segment::decode(&w).unwrap();
    assert_eq!(s.opcode, Opcode::RdmaWrite);
    assert_eq!(
        s.ddp,
        tagged_header(Opcode::RdmaWrite, true, 0x0102_0304, 0x10)
    );
    assert_eq!(s.payload, b"data");
}

#[test]
fn send_with_invalidate_vector() {
    let v = [
        0x41, 0x44, 0xDE, 0xAD, 0xBE, 0xEF, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 1, 2,
    ];
    let s = Segment::decode(&v).unwrap();
    assert_eq!(s.opcode, Opcode::SendInvalidate);
    assert_eq!(s.invalidate_stag(), Some(0xDEAD_BEEF));
    assert_eq!(s.payload, &[1, 2]);
    assert_eq!(
        s.ddp,
        untagged_header(Opcode::SendInvalidate, true, 0xDEAD_BEEF, 9, 0)
    );
    let plain = [0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0];
    assert_eq!(Segment::decode(&plain).unwrap().invalidate_stag(), None);
}

#[test]
fn immediate_data_vectors() {
    for (op, byte) in [
        (Opcode::ImmediateData, 0x48),
        (Opcode::ImmediateDataSe, 0x49),
    ] {
        let mut v = vec![0x41, byte, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0];
        v.extend_from_slice(&[0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0]);
        let s = Segment::decode(&v).unwrap();
        assert_eq!(s.opcode, op);
        let OpcodeHeader::Immediate(d) = s.header else {
            panic!()
        };
        assert_eq!(d, ImmediateData::from_be32(0x1234_5678));
        assert_eq!(d.as_be32(), 0x1234_5678);
        // Exactly eight bytes (RFC 7306 section 6.3).
        assert_eq!(Segment::decode(&v[..25]), Err(RdmapError::Truncated(op)));
        v.push(0);
        assert_eq!(Segment::decode(&v), Err(RdmapError::UnexpectedPayload(op)));
        assert_eq!(
            RdmapError::UnexpectedPayload(op).term(),
            TermError::RdmapCatastrophicStream
        );
    }
    assert!(Opcode::ImmediateDataSe.solicited_event());
}

#[test]
fn atomic_vectors() {
    // Atomic Request: QN 1, FetchAdd of 1 at TO 0x100 of STag 0x55.
    let mut v = vec![0x41, 0x4A, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0];
    v.extend_from_slice(&[
        0, 0, 0, 0, // reserved, AOpCode 0
        0, 0, 0, 0x2A, // request id 42
        0, 0, 0, 0x55, // remote STag
        0, 0, 0, 0, 0, 0, 1, 0, // remote TO
        0, 0, 0, 0, 0, 0, 0, 1, // add data
        0, 0, 0, 0, 0, 0, 0, 0, // add mask
        0, 0, 0, 0, 0, 0, 0, 0, // compare data
        0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, // compare mask
    ]);
    let s = Segment::decode(&v).unwrap();
    assert_eq!(
        s.header,
        OpcodeHeader::AtomicRequest(AtomicRequestHeader::fetch_add(42, 0x55, 0x100, 1, 0))
    );
    let mut out = [0u8; 80];
    let n = encode_headers(&s.ddp, &s.header, &mut out).unwrap();
    assert_eq!(&out[..n], &v[..]);
    // Unsupported AOpCode (1 is reserved).
    let mut bad = v.clone();
    bad[21] = 1;
    let e = Segment::decode(&bad).unwrap_err();
    assert_eq!(e, RdmapError::Atomic(AtomicError::UnsupportedOpcode(1)));
    assert_eq!(e.term(), TermError::RdmapUnexpectedOpcode);
    // Truncated.
    assert_eq!(
        Segment::decode(&v[..60]),
        Err(RdmapError::Truncated(Opcode::AtomicRequest))
    );

    // Atomic Response: QN 3.
    let mut r = vec![0x41, 0x4B, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 0];
    r.extend_from_slice(&[0, 0, 0, 0x2A, 0, 0, 0, 0, 0, 0, 0, 7]);
    let s = Segment::decode(&r).unwrap();
    assert_eq!(
        s.header,
        OpcodeHeader::AtomicResponse(AtomicResponseHeader {
            request_id: 42,
            original_value: 7
        })
    );
    // On the wrong queue.
    r[9] = 1;
    assert_eq!(
        Segment::decode(&r),
        Err(RdmapError::WrongQueue {
            opcode: Opcode::AtomicResponse,
            queue_number: 1
        })
    );
}

#[test]
fn ddp_errors() {
    assert_eq!(
        DdpHeader::decode(&[]),
        Err(DdpError::Truncated { tagged: false })
    );
    assert_eq!(
        DdpHeader::decode(&[0x81, 0x40, 0]),
        Err(DdpError::Truncated { tagged: true })
    );
    let mut v = READ_REQUEST;
    v[0] = 0x42; // DV 2
    assert_eq!(
        DdpHeader::decode(&v),
        Err(DdpError::InvalidVersion {
            tagged: false,
            version: 2
        })
    );
    let w = [0xC0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        DdpHeader::decode(&w),
        Err(DdpError::InvalidVersion {
            tagged: true,
            version: 0
        })
    );
    let mut q = READ_REQUEST;
    q[9] = 4;
    assert_eq!(DdpHeader::decode(&q), Err(DdpError::InvalidQueueNumber(4)));
    assert_eq!(
        DdpError::Truncated { tagged: true }.term(),
        TermError::DdpLocalCatastrophic
    );
    assert_eq!(
        DdpError::InvalidVersion {
            tagged: true,
            version: 0
        }
        .term(),
        TermError::DdpTaggedInvalidVersion
    );
    assert_eq!(
        DdpError::InvalidVersion {
            tagged: false,
            version: 0
        }
        .term(),
        TermError::DdpUntaggedInvalidVersion
    );
    assert_eq!(
        DdpError::InvalidQueueNumber(9).term(),
        TermError::DdpInvalidQn
    );
    // Segment::decode reports DDP errors first.
    assert_eq!(
        Segment::decode(&q).unwrap_err().term(),
        TermError::DdpInvalidQn
    );
}

#[test]
fn rdmap_errors() {
    let mut v = READ_REQUEST;
    v[1] = 0x81; // RV 2
    let e = Segment::decode(&v).unwrap_err();
    assert_eq!(e, RdmapError::InvalidVersion(2));
    assert_eq!(e.term(), TermError::RdmapInvalidVersion);
    for op in 0xC..=0xF {
        let mut v = READ_REQUEST;
        v[1] = 0x40 | op;
        let e = Segment::decode(&v).unwrap_err();
        assert_eq!(e, RdmapError::InvalidOpcode(op));
        assert_eq!(e.term(), TermError::RdmapUnexpectedOpcode);
    }
    // Read Request sent tagged.
    let t = [0xC1, 0x41, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let e = Segment::decode(&t).unwrap_err();
    assert_eq!(e, RdmapError::WrongBufferModel(Opcode::ReadRequest));
    assert_eq!(e.term(), TermError::RdmapUnexpectedOpcode);
    // Send on the Read queue.
    let mut s = READ_REQUEST;
    s[1] = 0x43;
    let e = Segment::decode(&s).unwrap_err();
    assert_eq!(e.term(), TermError::DdpInvalidQn);
    // Read Request not a single segment.
    let mut m = READ_REQUEST;
    m[0] = 0x01; // L clear
    assert_eq!(
        Segment::decode(&m),
        Err(RdmapError::NotSingleSegment(Opcode::ReadRequest))
    );
    let mut m = READ_REQUEST;
    m[17] = 4; // MO 4
    assert_eq!(
        Segment::decode(&m),
        Err(RdmapError::NotSingleSegment(Opcode::ReadRequest))
    );
    // Truncated Read Request header, and trailing payload.
    assert_eq!(
        Segment::decode(&READ_REQUEST[..45]),
        Err(RdmapError::Truncated(Opcode::ReadRequest))
    );
    let mut long = READ_REQUEST.to_vec();
    long.push(0);
    assert_eq!(
        Segment::decode(&long),
        Err(RdmapError::UnexpectedPayload(Opcode::ReadRequest))
    );
    // Malformed TERMINATE.
    let term = [
        0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x80, 0,
    ];
    let e = Segment::decode(&term).unwrap_err();
    assert!(matches!(e, RdmapError::Terminate(_)));
    assert_eq!(e.term(), TermError::RdmapCatastrophicStream);
}

#[test]
fn opcode_table() {
    use Opcode::*;
    let table = [
        (RdmaWrite, true, None),
        (ReadRequest, false, Some(QueueNumber::ReadRequest)),
        (ReadResponse, true, None),
        (Send, false, Some(QueueNumber::Send)),
        (SendInvalidate, false, Some(QueueNumber::Send)),
        (SendSe, false, Some(QueueNumber::Send)),
        (SendSeInvalidate, false, Some(QueueNumber::Send)),
        (Terminate, false, Some(QueueNumber::Terminate)),
        (ImmediateData, false, Some(QueueNumber::Send)),
        (ImmediateDataSe, false, Some(QueueNumber::Send)),
        (AtomicRequest, false, Some(QueueNumber::ReadRequest)),
        (AtomicResponse, false, Some(QueueNumber::AtomicResponse)),
    ];
    for (i, (op, tagged, qn)) in table.into_iter().enumerate() {
        assert_eq!(Opcode::from_u8(i as u8), Some(op));
        assert_eq!(op.is_tagged(), tagged);
        assert_eq!(op.queue_number(), qn);
    }
    assert_eq!(AtomicRequest.header_len(), 70);
    assert_eq!(AtomicResponse.header_len(), 30);
    assert_eq!(ReadRequest.header_len(), 46);
    assert_eq!(RdmaWrite.header_len(), 14);
}

fn arb_ddp() -> impl Strategy<Value = DdpHeader> {
    prop_oneof![
        (
            any::<bool>(),
            0u8..16,
            any::<u8>(),
            any::<u32>(),
            any::<u64>()
        )
            .prop_map(|(last, r, rc, stag, to)| {
                DdpHeader::Tagged(TaggedHeader {
                    control: DdpControl {
                        tagged: true,
                        last,
                        reserved: r,
                        version: 1,
                    },
                    rdmap_control: rc,
                    stag,
                    tagged_offset: to,
                })
            }),
        (
            any::<bool>(),
            0u8..16,
            any::<u8>(),
            any::<u32>(),
            0u32..4,
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(|(last, r, rc, ulp, qn, msn, mo)| {
                DdpHeader::Untagged(UntaggedHeader {
                    control: DdpControl {
                        tagged: false,
                        last,
                        reserved: r,
                        version: 1,
                    },
                    rdmap_control: rc,
                    ulp_reserved: ulp,
                    queue_number: qn,
                    msn,
                    message_offset: mo,
                })
            }),
    ]
}

proptest! {
    #[test]
    fn ddp_round_trip(h in arb_ddp()) {
        let mut out = [0u8; 18];
        let n = h.encode(&mut out).unwrap();
        prop_assert_eq!(n, h.header_len());
        prop_assert_eq!(DdpHeader::decode(&out[..n]).unwrap(), (h, n));
    }

    #[test]
    fn control_bytes_round_trip(b in any::<u8>()) {
        prop_assert_eq!(DdpControl::from_byte(b).to_byte().unwrap(), b);
        prop_assert_eq!(RdmapControl::from_byte(b).to_byte().unwrap(), b);
    }

    #[test]
    fn read_request_round_trip(a in any::<u32>(), b in any::<u64>(), c in any::<u32>(), d in any::<u32>(), e in any::<u64>(), msn in any::<u32>()) {
        let ddp = untagged_header(Opcode::ReadRequest, true, 0, msn, 0);
        let h = OpcodeHeader::ReadRequest(ReadRequestHeader { sink_stag: a, sink_tagged_offset: b, read_size: c, source_stag: d, source_tagged_offset: e });
        let mut out = [0u8; 46];
        let n = encode_headers(&ddp, &h, &mut out).unwrap();
        let s = Segment::decode(&out[..n]).unwrap();
        prop_assert_eq!(s.ddp, ddp);
        prop_assert_eq!(s.header, h);
    }

    #[test]
    fn payload_segments_round_trip(op in prop_oneof![Just(Opcode::RdmaWrite), Just(Opcode::ReadResponse), Just(Opcode::Send), Just(Opcode::SendSe), Just(Opcode::SendInvalidate), Just(Opcode::SendSeInvalidate)],
                                   last in any::<bool>(), x in any::<u32>(), y in any::<u32>(),
                                   payload in proptest::collection::vec(any::<u8>(), 0..64)) {
        let ddp = if op.is_tagged() { tagged_header(op, last, x, u64::from(y)) } else { untagged_header(op, last, x, y, x) };
        let mut out = vec![0u8; 18 + payload.len()];
        let n = encode_headers(&ddp, &OpcodeHeader::None, &mut out).unwrap();
        out[n..n + payload.len()].copy_from_slice(&payload);
        let s = Segment::decode(&out[..n + payload.len()]).unwrap();
        prop_assert_eq!(s.opcode, op);
        prop_assert_eq!(s.ddp, ddp);
        prop_assert_eq!(s.payload, &payload[..]);
    }

    /// The data segment fast path agrees with `Segment::decode`: it accepts
    /// exactly the data segments that decode, as the same segment, and
    /// leaves everything else (other messages, every error) to it.
    #[test]
    fn data_segment_agrees_with_segment_decode(
        ddp in prop_oneof![any::<u8>(), (0u8..2, any::<bool>(), 0u8..16, 0u8..4).prop_map(|(t, l, r, v)| t << 7 | u8::from(l) << 6 | r << 2 | v)],
        rdmap in prop_oneof![any::<u8>(), (0u8..4, 0u8..4, 0u8..16).prop_map(|(v, r, o)| v << 6 | r << 4 | o)],
        qn in prop_oneof![Just(0u32), 0u32..5, any::<u32>()],
        fields in proptest::collection::vec(any::<u8>(), 12),
        tail in proptest::collection::vec(any::<u8>(), 0..40),
        cut in 0usize..70,
    ) {
        let mut buf = vec![ddp, rdmap];
        buf.extend_from_slice(&fields[..4]);
        buf.extend_from_slice(&qn.to_be_bytes());
        buf.extend_from_slice(&fields[4..]);
        buf.extend_from_slice(&tail);
        buf.truncate(cut);
        check_data_segment(&buf)?;
    }
}

fn check_data_segment(buf: &[u8]) -> Result<(), TestCaseError> {
    let slow = Segment::decode(buf);
    match DataSegment::decode(buf) {
        Some(fast) => {
            let ddp_len = fast.ddp().header_len();
            let expected = Segment {
                ddp: fast.ddp(),
                control: RdmapControl::from_byte(buf[1]),
                opcode: fast.opcode(),
                header: OpcodeHeader::None,
                payload: &buf[ddp_len..],
            };
            prop_assert_eq!(slow, Ok(expected));
            prop_assert_eq!(fast.invalidate_stag(), expected.invalidate_stag());
        }
        None => {
            prop_assert!(
                !matches!(slow, Ok(s) if s.opcode.carries_payload()),
                "{:?}",
                slow
            );
        }
    }
    Ok(())
}

#[test]
fn data_segment_vectors() {
    // Every opcode with each buffer model and queue, whole and cut short.
    for opcode in 0..16u8 {
        for tagged in [false, true] {
            for qn in 0..5u32 {
                let ddp = if tagged { 0xC1 } else { 0x41 };
                let mut buf = vec![ddp, 0x40 | opcode, 0, 0, 0, 7];
                buf.extend_from_slice(&qn.to_be_bytes());
                buf.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0xAB]);
                for cut in 0..=buf.len() {
                    check_data_segment(&buf[..cut]).unwrap();
                }
            }
        }
    }
    let send_inv = [
        0x41, 0x44, 0, 0, 0x12, 0x34, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0,
    ];
    assert_eq!(
        DataSegment::decode(&send_inv).and_then(|s| s.invalidate_stag()),
        Some(0x1234)
    );
}

/// `DdpHeader::encode` as it was written field by field: the reference for
/// its fixed-size form, errors and their order included.
fn reference_encode(h: &DdpHeader, out: &mut [u8]) -> Result<usize, wire::EncodeError> {
    match h {
        DdpHeader::Tagged(h) => {
            if !h.control.tagged {
                return Err(wire::EncodeError::ValueOutOfRange);
            }
            wire::ensure_room(out, TAGGED_HEADER_LEN)?;
            wire::write_bytes(out, 0, &[h.control.to_byte()?, h.rdmap_control])?;
            wire::write_be32(out, 2, h.stag)?;
            wire::write_be64(out, 6, h.tagged_offset)?;
            Ok(TAGGED_HEADER_LEN)
        }
        DdpHeader::Untagged(h) => {
            if h.control.tagged {
                return Err(wire::EncodeError::ValueOutOfRange);
            }
            wire::ensure_room(out, UNTAGGED_HEADER_LEN)?;
            wire::write_bytes(out, 0, &[h.control.to_byte()?, h.rdmap_control])?;
            wire::write_be32(out, 2, h.ulp_reserved)?;
            wire::write_be32(out, 6, h.queue_number)?;
            wire::write_be32(out, 10, h.msn)?;
            wire::write_be32(out, 14, h.message_offset)?;
            Ok(UNTAGGED_HEADER_LEN)
        }
    }
}

proptest! {
    /// Any header, valid or not, into a buffer of any length: the same
    /// bytes or the same error, with nothing written on error.
    #[test]
    fn ddp_encode_matches_reference(h in arb_ddp(), tagged: bool, reserved in 0u8..20, version in 0u8..6,
                                    len in 0usize..24) {
        let mut h = h;
        match &mut h {
            DdpHeader::Tagged(t) => t.control = DdpControl { tagged, reserved, version, ..t.control },
            DdpHeader::Untagged(u) => u.control = DdpControl { tagged, reserved, version, ..u.control },
        }
        let mut out = vec![0xEEu8; len];
        let mut want = out.clone();
        let expected = reference_encode(&h, &mut want);
        prop_assert_eq!(h.encode(&mut out), expected);
        if expected.is_ok() {
            prop_assert_eq!(out, want);
        } else {
            prop_assert!(out.iter().all(|&b| b == 0xEE));
        }
    }

    #[test]
    fn segment_decode_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..100)) {
        let _ = Segment::decode(&buf);
    }
}
