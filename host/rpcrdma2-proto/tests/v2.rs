// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA Version 2 vectors, hand-derived from the draft's XDR
//! (sections 6 and 8): every header type, every error arm, the flag rules
//! of section 6.2.2 and the property rules of section 5.

mod common;
use common::*;
use proto::chunk::{ChunkLimits, ChunkListsRef, ReadSegment, Segment};
use proto::dispatch::{self, DecodeConfig, Message};
use proto::error::*;
use proto::properties::*;
use proto::v2::*;
use proto::version::VersionRange;

const XID: u32 = 0xcafe_f00d;
/// rdma_credit: 32 granted, 64 outstanding max.
const CREDIT: u32 = (64 << 16) | 32;

fn cfg() -> V2DecodeConfig {
    V2DecodeConfig::default()
}

fn v2_reply(f: Fault) -> V2Error {
    match f.reply().expect("reply").body {
        ErrorBody::V2(e) => e,
        other => panic!("{other:?}"),
    }
}

fn prefix(htype: u32, flags: u32) -> Vec<u32> {
    vec![XID, 2, CREDIT, htype, flags]
}

fn msg(flags: u32, body: &[u32], payload: &[u8]) -> Vec<u8> {
    let mut w = prefix(RDMA2_MSG, flags);
    w.extend_from_slice(body);
    cat(&[&words(&w), payload])
}

#[test]
fn prefix_and_credit_field() {
    let rpc = words(&[XID, 0, 2]);
    let buf = msg(0, &[0, 0, 0, 0], &rpc);
    let m = decode(&buf, &cfg()).unwrap();
    assert_eq!(m.prefix.xid, XID);
    assert_eq!(m.prefix.vers, 2);
    assert_eq!(m.prefix.credit.granted, 32);
    assert_eq!(m.prefix.credit.max_outstanding, 64);
    assert_eq!(m.prefix.credit.to_raw(), CREDIT);
    assert_eq!(m.header_len, 36);
    assert_eq!(m.payload(), Some(&rpc[..]));
    assert!(!m.is_credit_grant());
}

#[test]
fn msg_with_chunks_and_inv_handle() {
    let body = [
        0x77, // rdma_inv_handle
        1, 0, 0x77, 512, 0, 0x4000, 0, // read list: one p0 segment
        1, 1, 0x78, 8192, 0, 0x5000, 0, // write list: one chunk
        1, 1, 0x79, 4096, 0, 0x6000, // reply chunk
    ];
    let buf = msg(0, &body, &[]);
    let m = decode(&buf, &cfg()).unwrap();
    let c = m.chunks().unwrap();
    assert_eq!(c.inv_handle, 0x77);
    assert!(c.lists.reads.has_position_zero());
    assert_eq!(c.lists.writes.chunk_count(), 1);
    assert_eq!(c.lists.reply.unwrap().length(), 4096);
    // Encoding the same lists reproduces the vector.
    let reads = [ReadSegment {
        position: 0,
        target: Segment {
            handle: 0x77,
            length: 512,
            offset: 0x4000,
        },
    }];
    let w0 = [Segment {
        handle: 0x78,
        length: 8192,
        offset: 0x5000,
    }];
    let writes: [&[Segment]; 1] = [&w0];
    let reply = [Segment {
        handle: 0x79,
        length: 4096,
        offset: 0x6000,
    }];
    let lists = V2ChunkListsRef {
        inv_handle: 0x77,
        lists: ChunkListsRef {
            reads: &reads,
            writes: &writes,
            reply: Some(&reply),
        },
    };
    let mut out = [0u8; 256];
    let p = Prefix {
        xid: XID,
        vers: 2,
        credit: Credit::from_raw(CREDIT),
        htype: 99, // overridden by the body
        flags: Flags::NONE,
    };
    let n = encode(&mut out, &p, &V2BodyRef::Msg(lists)).unwrap();
    assert_eq!(&out[..n], &buf[..]);
    assert_eq!(lists.encoded_len(), Some(n - PREFIX_LEN));
}

#[test]
fn inv_handle_must_name_a_segment() {
    let buf = msg(0, &[0x99, 0, 0, 0], &[]);
    let f = decode(&buf, &cfg()).unwrap_err();
    assert_eq!(f.violation(), Violation::InvalidateHandleUnknown(0x99));
    assert_eq!(v2_reply(f), V2Error::BadXdr);
}

#[test]
fn nomsg_special_and_credit_grant() {
    let mut w = prefix(RDMA2_NOMSG, 0);
    w.extend_from_slice(&[0, 0, 0, 1, 1, 0x42, 65536, 0, 0]);
    let buf = words(&w);
    let m = decode(&buf, &cfg()).unwrap();
    assert!(matches!(m.body, V2Body::NoMsg { .. }));
    assert!(!m.is_credit_grant());

    let mut out = [0u8; 64];
    let credit = Credit {
        granted: 16,
        max_outstanding: 16,
    };
    let n = encode_credit_grant(&mut out, credit).unwrap();
    assert_eq!(
        &out[..n],
        &words(&[0, 2, (16 << 16) | 16, RDMA2_NOMSG, 0, 0, 0, 0, 0])[..]
    );
    let g = decode(&out[..n], &cfg()).unwrap();
    assert!(g.is_credit_grant());
    assert_eq!(g.prefix.credit, credit);
}

/// Each error arm: the XDR vector and its decoded form.
fn error_vectors() -> Vec<(Vec<u32>, V2Error)> {
    vec![
        (vec![1, 1, 2], V2Error::Vers { low: 1, high: 2 }),
        (vec![2], V2Error::BadXdr),
        (vec![3], V2Error::BadPropval),
        (vec![4], V2Error::InvalHtype),
        (vec![5], V2Error::InvalCont),
        (vec![6, 3], V2Error::ReadChunks { max_chunks: 3 }),
        (vec![7, 0], V2Error::WriteChunks { max_chunks: 0 }),
        (vec![8, 16], V2Error::Segments { max_segments: 16 }),
        (
            vec![9, 2, 70000],
            V2Error::WriteResource {
                chunk_index: 2,
                length_needed: 70000,
            },
        ),
        (
            vec![10, 123456],
            V2Error::ReplyResource {
                length_needed: 123456,
            },
        ),
        (vec![100], V2Error::System),
    ]
}

#[test]
fn every_error_arm_decodes_and_encodes() {
    for (arm, expected) in error_vectors() {
        let mut w = prefix(RDMA2_ERROR, RDMA2_F_RESPONSE);
        w.extend_from_slice(&arm);
        let buf = words(&w);
        let m = decode(&buf, &cfg()).unwrap();
        assert_eq!(m.body, V2Body::Error(expected));
        assert_eq!(expected.code(), arm[0]);
        let mut out = [0u8; 64];
        let p = Prefix {
            xid: XID,
            vers: 2,
            credit: Credit::from_raw(CREDIT),
            htype: 0,
            flags: Flags::NONE, // RESPONSE is forced on for errors
        };
        let n = encode(&mut out, &p, &V2BodyRef::Error(expected)).unwrap();
        assert_eq!(&out[..n], &buf[..], "{expected:?}");
        // Truncating a multi-word arm makes the error undecodable: dropped.
        if arm.len() > 1 {
            let f = decode(&buf[..buf.len() - 4], &cfg()).unwrap_err();
            assert!(matches!(f, Fault::Discard(Violation::ErrorBody(_))));
        }
    }
    assert!(V2Error::InvalCont.is_permanent());
    assert!(!V2Error::ReplyResource { length_needed: 1 }.is_permanent());
}

#[test]
fn unknown_error_code_is_discarded() {
    let mut w = prefix(RDMA2_ERROR, RDMA2_F_RESPONSE);
    w.push(11);
    let f = decode(&words(&w), &cfg()).unwrap_err();
    assert_eq!(
        f,
        Fault::Discard(Violation::ErrorBody(ErrorBodyFault::UnknownCode(11)))
    );
}

#[test]
fn short_prefix_is_discarded() {
    for n in 0..PREFIX_LEN {
        let buf = vec![0u8; n];
        assert_eq!(
            decode(&buf, &cfg()).unwrap_err(),
            Fault::Discard(Violation::ShortHeader)
        );
    }
}

#[test]
fn version_and_htype_errors() {
    let buf = words(&[XID, 3, CREDIT, 0, 0, 0, 0, 0, 0]);
    let f = decode(&buf, &cfg()).unwrap_err();
    let r = f.reply().unwrap();
    assert_eq!((r.xid, r.vers), (XID, 3));
    assert_eq!(v2_reply(f), V2Error::Vers { low: 1, high: 2 });

    for htype in [2, 3, 6, 0xffff_ffff] {
        let f = decode(&words(&prefix(htype, 0)), &cfg()).unwrap_err();
        assert_eq!(v2_reply(f), V2Error::InvalHtype);
    }
}

#[test]
fn flag_rules_of_section_6_2_2() {
    // TPMORE on anything but CONNPROP: INVAL_HTYPE.
    let f = decode(&msg(RDMA2_F_TPMORE, &[0, 0, 0, 0], &[1, 2, 3, 4]), &cfg()).unwrap_err();
    assert_eq!(v2_reply(f), V2Error::InvalHtype);
    // MORE on NOMSG or ERROR: INVAL_CONT.
    let mut w = prefix(RDMA2_NOMSG, RDMA2_F_MORE);
    w.extend_from_slice(&[0, 0, 0, 0]);
    assert_eq!(
        v2_reply(decode(&words(&w), &cfg()).unwrap_err()),
        V2Error::InvalCont
    );
    let mut w = prefix(RDMA2_ERROR, RDMA2_F_MORE | RDMA2_F_RESPONSE);
    w.push(2);
    assert_eq!(
        v2_reply(decode(&words(&w), &cfg()).unwrap_err()),
        V2Error::InvalCont
    );
    // MORE with chunks: INVAL_CONT.
    let f = decode(
        &msg(RDMA2_F_MORE, &[0, 0, 1, 0, 0, 0], &[1, 2, 3, 4]),
        &cfg(),
    )
    .unwrap_err();
    assert_eq!(f.violation(), Violation::ChunksInContinuation);
    assert_eq!(v2_reply(f), V2Error::InvalCont);
    // MORE on MSG without chunks is fine; reserved flags are ignored.
    let buf = msg(RDMA2_F_MORE | 0x8000_0000, &[0, 0, 0, 0], b"abcd");
    let m = decode(&buf, &cfg()).unwrap();
    assert!(m.prefix.flags.more());
    assert!(!m.prefix.flags.response());
}

#[test]
fn chunk_limit_errors_carry_local_limits() {
    let limits = ChunkLimits {
        max_read_chunks: 1,
        max_write_chunks: 1,
        max_segments: 2,
        max_header_segments: u32::MAX,
    };
    let c = V2DecodeConfig { limits, ..cfg() };
    let reads = msg(0, &[0, 1, 0, 1, 1, 0, 0, 1, 4, 1, 1, 0, 0, 0, 0, 0], &[]);
    assert_eq!(
        v2_reply(decode(&reads, &c).unwrap_err()),
        V2Error::ReadChunks { max_chunks: 1 }
    );
    let writes = msg(0, &[0, 0, 1, 0, 1, 0, 0, 0], &[]);
    assert_eq!(
        v2_reply(decode(&writes, &c).unwrap_err()),
        V2Error::WriteChunks { max_chunks: 1 }
    );
    let segs = msg(0, &[0, 0, 0, 1, 3, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0], &[]);
    assert_eq!(
        v2_reply(decode(&segs, &c).unwrap_err()),
        V2Error::Segments { max_segments: 2 }
    );
    let bad = msg(0, &[0, 1, 2, 1, 1, 0, 0, 0, 0, 0], &[]);
    assert_eq!(v2_reply(decode(&bad, &c).unwrap_err()), V2Error::BadXdr);
}

#[test]
fn header_segment_limit_counts_every_list() {
    // A Write chunk of 2 segments and a Reply chunk of 2: 4 in the header.
    let seg = [1, 1, 0, 0];
    let mut body = vec![0, 0, 1, 2];
    body.extend_from_slice(&seg);
    body.extend_from_slice(&seg);
    body.extend_from_slice(&[0, 1, 2]);
    body.extend_from_slice(&seg);
    body.extend_from_slice(&seg);
    let buf = msg(0, &body, &[]);
    let three = V2DecodeConfig {
        limits: ChunkLimits::with_header_segments(3),
        ..cfg()
    };
    assert_eq!(
        v2_reply(decode(&buf, &three).unwrap_err()),
        V2Error::Segments { max_segments: 3 }
    );
    let four = V2DecodeConfig {
        limits: ChunkLimits::with_header_segments(4),
        ..cfg()
    };
    let m = decode(&buf, &four).unwrap();
    let V2Body::Msg { chunks, .. } = m.body else {
        panic!("not a MSG: {:?}", m.body);
    };
    assert_eq!(chunks.lists.segment_count(), 4);
}

fn connprop(flags: u32, props: &[u32]) -> Vec<u8> {
    let mut w = prefix(RDMA2_CONNPROP, flags);
    w.extend_from_slice(props);
    words(&w)
}

#[test]
fn connprop_every_property() {
    let buf = cat(&[
        &connprop(
            RDMA2_F_TPMORE,
            &[
                8, // count
                1, 4, 8192, // SBSIZ
                2, 4, 16384, // RBSIZ
                3, 4, 65536, // RSSIZ
                4, 4, 8, // RCSIZ
                5, 4, 2, // BRS = CONT (2, see erratum)
                6, 12, 5, // HOSTAUTH: opaque<> holding opaque<5>
            ],
        ),
        b"hello\0\0\0",
        &words(&[99, 3]), // unknown property with 3 data bytes
        b"xyz\0",
        &words(&[2, 0]), // RBSIZ with empty data: default
    ]);
    let m = decode(&buf, &cfg()).unwrap();
    assert!(m.prefix.flags.tpmore());
    let V2Body::ConnProp(set) = m.body else {
        panic!()
    };
    assert_eq!(set.len(), 8);
    let props: Vec<_> = set.properties().collect();
    assert_eq!(props[0], Property::SendSize(8192));
    assert_eq!(props[1], Property::RecvBufferSize(16384));
    assert_eq!(props[2], Property::MaxSegmentSize(65536));
    assert_eq!(props[3], Property::MaxSegmentCount(8));
    assert_eq!(props[4], Property::Reverse(ReverseSupport::Continued));
    assert_eq!(props[5], Property::HostAuth(b"hello"));
    assert!(matches!(
        props[6],
        Property::Unknown(PropVal {
            which: 99,
            data: b"xyz"
        })
    ));
    assert_eq!(props[7], Property::RecvBufferSize(DEFAULT_BUFFER_SIZE));
    let mut peer = PeerProperties::default();
    peer.apply(&set);
    assert_eq!(peer.send_size, 8192);
    assert_eq!(peer.recv_buffer_size, 4096); // later value wins
    assert_eq!(peer.reverse, ReverseSupport::Continued);
    assert!(peer.host_auth_seen);

    // Encoding the known properties reproduces their vector.
    let mut out = [0u8; 256];
    let enc = [
        Property::SendSize(8192),
        Property::RecvBufferSize(16384),
        Property::MaxSegmentSize(65536),
        Property::MaxSegmentCount(8),
        Property::Reverse(ReverseSupport::Continued),
        Property::HostAuth(b"hello"),
    ];
    let p = Prefix {
        xid: XID,
        vers: 2,
        credit: Credit::from_raw(CREDIT),
        htype: 0,
        flags: Flags(RDMA2_F_TPMORE),
    };
    let n = encode(&mut out, &p, &V2BodyRef::ConnProp(&enc)).unwrap();
    let expect = cat(&[
        &connprop(
            RDMA2_F_TPMORE,
            &[
                6, 1, 4, 8192, 2, 4, 16384, 3, 4, 65536, 4, 4, 8, 5, 4, 2, 6, 12, 5,
            ],
        ),
        b"hello\0\0\0",
    ]);
    assert_eq!(&out[..n], &expect[..]);
    let total: usize = enc.iter().map(|p| p.encoded_len().unwrap()).sum();
    assert_eq!(total + 4 + PREFIX_LEN, n);
}

#[test]
fn rvrsdir_cont_is_two() {
    // Erratum: section 8.3 lists RDMA2_RVRSDIR_CONT = 1; section 5.2.5 says 2.
    assert_eq!(RDMA2_RVRSDIR_CONT, 2);
    assert_eq!(ReverseSupport::from_u32(1), Some(ReverseSupport::Simple));
    assert_eq!(ReverseSupport::from_u32(2), Some(ReverseSupport::Continued));
    assert_eq!(ReverseSupport::from_u32(3), Some(ReverseSupport::General));
}

#[test]
fn bad_property_values_are_bad_propval() {
    let cases: Vec<Vec<u8>> = vec![
        connprop(0, &[1, 1, 4, 512]),        // SBSIZ below 1024
        connprop(0, &[1, 2, 4, 0]),          // RBSIZ zero
        connprop(0, &[1, 3, 4, 0]),          // RSSIZ zero
        connprop(0, &[1, 5, 4, 4]),          // BRS unknown level
        connprop(0, &[1, 1, 2, 0x10000000]), // data too short for uint32
        connprop(0, &[1, 4, 8, 1, 2]),       // data too long for uint32
        connprop(0, &[1, 6, 4, 100]),        // HOSTAUTH inner length overruns
        connprop(0, &[1, 6, 12, 1, 0, 0]),   // HOSTAUTH trailing bytes
        connprop(0, &[2, 1, 4, 4096]),       // second propval missing
        connprop(0, &[1, 99, 1000]),         // rdma_data longer than message
        connprop(0, &[1000]),                // count beyond limit
    ];
    for buf in cases {
        let f = decode(&buf, &cfg()).unwrap_err();
        assert_eq!(v2_reply(f), V2Error::BadPropval, "{buf:?}");
        assert!(matches!(f.violation(), Violation::Property(_)));
    }
    // Zero-length data means the default, even for a known property.
    assert!(decode(&connprop(0, &[2, 1, 0, 6, 0]), &cfg()).is_ok());
}

#[test]
fn dispatch_routes_by_version() {
    let c = DecodeConfig::default();
    let v1 = words(&[XID, 1, 8, 0, 0, 0, 0, 1, 2, 3, 4]);
    assert!(matches!(dispatch::decode(&v1, &c).unwrap(), Message::V1(_)));
    let v2 = msg(0, &[0, 0, 0, 0], b"rpc!");
    assert!(matches!(dispatch::decode(&v2, &c).unwrap(), Message::V2(_)));
    // Unknown version: RDMA2_ERR_VERS with our range, in the v2 layout.
    let v9 = words(&[XID, 9, 8, 0, 0, 0, 0, 0]);
    let f = dispatch::decode(&v9, &c).unwrap_err();
    let reply = f.reply().unwrap();
    let mut out = [0u8; 64];
    let n = dispatch::encode_error_reply(&mut out, &reply, CREDIT).unwrap();
    assert_eq!(
        &out[..n],
        &words(&[XID, 9, CREDIT, RDMA2_ERROR, RDMA2_F_RESPONSE, 1, 1, 2])[..]
    );
    // A v1-only endpoint answers v2 with a v1-layout ERR_VERS.
    let c1 = DecodeConfig {
        versions: VersionRange::V1_ONLY,
        ..c
    };
    let f = dispatch::decode(&v2, &c1).unwrap_err();
    let n = dispatch::encode_error_reply(&mut out, &f.reply().unwrap(), 8).unwrap();
    assert_eq!(&out[..n], &words(&[XID, 2, 8, 4, 1, 1, 1])[..]);
}

#[test]
fn read_list_out_of_order_or_overlapping_is_bad_xdr() {
    use proto::chunk::ChunkError;
    let msg = |p1: u32, len1: u32, p2: u32| {
        words(&[
            XID,
            2,
            0x0020_0020,
            RDMA2_MSG,
            0, // prefix
            0, // rdma_inv_handle
            1,
            p1,
            1,
            len1,
            0,
            0x1000, // read segment
            1,
            p2,
            2,
            4,
            0,
            0x2000, // read segment
            0,
            0,
            0, // end of lists
        ])
    };
    for (p1, len1, p2) in [(64, 4, 16), (16, 40, 52)] {
        let f = decode(&msg(p1, len1, p2), &cfg()).unwrap_err();
        assert!(
            matches!(
                f.violation(),
                Violation::Chunk(
                    ChunkError::PositionOutOfOrder { .. } | ChunkError::OverlappingChunks { .. }
                )
            ),
            "{f:?}"
        );
        let Some(ErrorReply {
            body: ErrorBody::V2(e),
            ..
        }) = f.reply()
        else {
            panic!("{f:?}")
        };
        assert_eq!(e, V2Error::BadXdr);
    }
    // In order and disjoint: accepted.
    let ok = msg(16, 36, 52);
    let m = decode(&ok, &cfg()).unwrap();
    assert_eq!(m.chunks().unwrap().lists.reads.chunk_count(), 2);
}
