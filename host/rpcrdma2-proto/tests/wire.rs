// SPDX-License-Identifier: GPL-2.0

//! The wire revision seam: headers as the transports send and take them, in both layouts,
//! hand-derived from RFC 8166 section 4 and draft-01 sections 6 and 7; the server's version
//! rules; the client's reading of a probe's `ERR_VERS`.

mod common;
use common::*;
use proto::chunk::{ChunkLimits, ChunkListsRef, ReadSegment, Segment};
use proto::error::{ErrorBody, ErrorReply, Fault, V1Error, V2Error, Violation};
use proto::version::{Version, VersionRange};
use proto::wire::*;

const SEG: Segment = Segment {
    handle: 0x11,
    length: 0x200,
    offset: 0x0000_0001_0000_0000,
};

fn encode_vec(revision: Revision, h: &Outgoing<'_>) -> Vec<u8> {
    let mut buf = [0u8; 256];
    let n = encode(revision, &mut buf, h).unwrap();
    buf[..n].to_vec()
}

fn call(body: BodyRef<'_>) -> Outgoing<'_> {
    Outgoing {
        xid: 0xabcd,
        credits: Credits {
            granted: 64,
            max: 64,
        },
        direction: Direction::Call,
        body,
    }
}

#[test]
fn v1_msg_call_layout() {
    let b = encode_vec(Revision::V1, &call(BodyRef::Msg(ChunkListsRef::EMPTY)));
    assert_eq!(b, words(&[0xabcd, 1, 64, 0, 0, 0, 0]));
    assert_eq!(header_len(Revision::V1, &ChunkListsRef::EMPTY), Some(28));
}

#[test]
fn v2_msg_call_layout() {
    // Prefix (xid, vers, credit: max << 16 | granted, htype, flags), inv_handle, three
    // empty lists.
    let b = encode_vec(
        Revision::V2Draft01,
        &call(BodyRef::Msg(ChunkListsRef::EMPTY)),
    );
    assert_eq!(b, words(&[0xabcd, 2, 0x0040_0040, 0, 0, 0, 0, 0, 0]));
    assert_eq!(
        header_len(Revision::V2Draft01, &ChunkListsRef::EMPTY),
        Some(36)
    );
}

#[test]
fn v2_reply_sets_response_and_nomsg_carries_reply_chunk() {
    let reply = [SEG];
    let lists = ChunkListsRef {
        reads: &[],
        writes: &[],
        reply: Some(&reply),
    };
    let mut h = call(BodyRef::NoMsg(lists));
    h.direction = Direction::Reply;
    let b = encode_vec(Revision::V2Draft01, &h);
    assert_eq!(
        b,
        words(&[
            0xabcd,
            2,
            0x0040_0040,
            1,
            1,
            0,
            0,
            0,
            1,
            1,
            0x11,
            0x200,
            1,
            0
        ])
    );
    assert_eq!(header_len(Revision::V2Draft01, &lists), Some(b.len()));
    let d = decode(&b, &ChunkLimits::DEFAULT).unwrap();
    assert_eq!(d.revision, Revision::V2Draft01);
    assert_eq!(d.response, Some(true));
    assert_eq!(
        d.credits,
        Credits {
            granted: 64,
            max: 64
        }
    );
    let Body::NoMsg { chunks } = d.body else {
        panic!("{:?}", d.body)
    };
    assert_eq!(chunks.reply.unwrap().segments().collect::<Vec<_>>(), [SEG]);
    // Version 1 has neither `rdma_flags` nor `rdma_inv_handle`: two words shorter.
    let b1 = encode_vec(Revision::V1, &h);
    assert_eq!(b1.len() + 8, b.len());
    assert_eq!(decode(&b1, &ChunkLimits::DEFAULT).unwrap().response, None);
}

#[test]
fn round_trip_with_read_and_write_chunks_both_revisions() {
    // The data item goes after the 8 inline bytes.
    let reads = [ReadSegment {
        position: 8,
        target: SEG,
    }];
    let w = [SEG, SEG];
    let writes: [&[Segment]; 1] = [&w];
    let lists = ChunkListsRef {
        reads: &reads,
        writes: &writes,
        reply: None,
    };
    for revision in [Revision::V1, Revision::V2Draft01] {
        let mut b = encode_vec(revision, &call(BodyRef::Msg(lists)));
        assert_eq!(Some(b.len()), header_len(revision, &lists));
        b.extend_from_slice(&words(&[0xabcd, 0]));
        let d = decode(&b, &ChunkLimits::DEFAULT).unwrap();
        assert_eq!((d.revision, d.xid), (revision, 0xabcd));
        let Body::Msg {
            chunks,
            payload,
            more,
        } = d.body
        else {
            panic!()
        };
        assert!(!more);
        assert_eq!(payload, &words(&[0xabcd, 0])[..]);
        assert_eq!(chunks.reads.segments().collect::<Vec<_>>(), reads);
        assert_eq!(chunks.writes.chunk_count(), 1);
        assert_eq!(d.header_len, b.len() - 8);
        assert_eq!(check_call(&d), Ok(()));
    }
}

#[test]
fn credits_per_revision() {
    let c = Credits {
        granted: 0,
        max: 64,
    };
    // Version 2 never grants zero.
    assert_eq!(c.raw(Revision::V2Draft01), 0x0040_0001);
    assert_eq!(c.raw(Revision::V1), 0);
    assert_eq!(
        Credits::from_raw(0x0001_0000, Revision::V1),
        Credits {
            granted: u16::MAX,
            max: 0
        }
    );
    assert_eq!(
        Credits::from_raw(0x0080_0020, Revision::V2Draft01),
        Credits {
            granted: 0x20,
            max: 0x80
        }
    );
}

#[test]
fn v2_grant_and_v1_done_are_control_connprop_carries_its_set() {
    let grant = words(&[0, 2, 0x0040_0010, 1, 0, 0, 0, 0, 0]);
    let d = decode(&grant, &ChunkLimits::DEFAULT).unwrap();
    assert_eq!(d.body, Body::Control);
    assert_eq!(d.credits.granted, 0x10);
    let done = words(&[7, 1, 5, 3]);
    assert_eq!(
        decode(&done, &ChunkLimits::DEFAULT).unwrap().body,
        Body::Control
    );
    let connprop = fixture("v2-connprop");
    match decode(&connprop, &ChunkLimits::DEFAULT).unwrap().body {
        Body::Properties { set, more } => {
            assert!(!set.is_empty());
            assert!(!more);
        }
        other => panic!("CONNPROP decoded as {other:?}"),
    }
}

#[test]
fn unknown_version_is_discarded_by_a_requester() {
    let b = words(&[1, 3, 1, 0, 0, 0, 0]);
    assert_eq!(
        decode(&b, &ChunkLimits::DEFAULT),
        Err(Fault::Discard(Violation::UnsupportedVersion(3)))
    );
    assert_eq!(
        decode(&b[..12], &ChunkLimits::DEFAULT),
        Err(Fault::Discard(Violation::ShortHeader))
    );
}

#[test]
fn client_reads_err_vers_of_both_layouts_only_while_probing() {
    let c_server = fixture("v1-err-vers-from-v1-server");
    let l = ChunkLimits::DEFAULT;
    assert_eq!(
        decode_at_client(&c_server, Revision::V2Draft01, true, &l),
        Ok(Received::VersionError {
            xid: 0xabcd,
            range: VersionRange::V1_ONLY
        })
    );
    // Not probing: the generic v2 decoder cannot read it and drops it.
    assert!(matches!(
        decode_at_client(&c_server, Revision::V2Draft01, false, &l),
        Err(Fault::Discard(_))
    ));
    let mut buf = [0u8; 64];
    let v2_reply = ErrorReply {
        xid: 9,
        vers: 2,
        body: ErrorBody::V2(V2Error::Vers { low: 1, high: 1 }),
    };
    let n = encode_error(&mut buf, &v2_reply, Credits::default()).unwrap();
    assert_eq!(
        &buf[..n],
        &words(&[9, 2, 1, 4, 1, 1, 1, 1])[..],
        "RDMA2_ERROR, F_RESPONSE, RDMA2_ERR_VERS 1..1, one credit at least"
    );
    assert_eq!(
        decode_at_client(&buf[..n], Revision::V2Draft01, true, &l),
        Ok(Received::VersionError {
            xid: 9,
            range: VersionRange::V1_ONLY
        })
    );
    // A v1 connection takes an ERR_VERS as any error.
    let v1_err = words(&[5, 1, 1, 4, 1, 1, 1]);
    let h = decode_at_client(&v1_err, Revision::V1, false, &l).unwrap();
    let Received::Header(h) = h else { panic!() };
    assert_eq!(
        h.body,
        Body::Error(ErrorBody::V1(V1Error::Vers { low: 1, high: 1 }))
    );
}

#[test]
fn server_admits_the_first_supported_version_and_keeps_it() {
    let all = VersionRange::V1_AND_V2;
    assert_eq!(admit(1, 1, None, all), Ok(Version::V1));
    assert_eq!(admit(1, 2, None, all), Ok(Version::V2));
    assert_eq!(admit(1, 2, Some(Version::V2), all), Ok(Version::V2));
    // Another supported version after the first: only the settled one, in its layout.
    assert_eq!(
        admit(4, 2, Some(Version::V1), all),
        Err(ErrorReply {
            xid: 4,
            vers: 2,
            body: ErrorBody::V1(V1Error::Vers { low: 1, high: 1 })
        })
    );
    assert_eq!(
        admit(4, 1, Some(Version::V2), all).unwrap_err().body,
        ErrorBody::V2(V2Error::Vers { low: 2, high: 2 })
    );
    // An unknown version: the whole range; in the settled layout, else by its number.
    assert_eq!(
        admit(5, 0, Some(Version::V1), all).unwrap_err().body,
        ErrorBody::V1(V1Error::Vers { low: 1, high: 2 })
    );
    assert_eq!(
        admit(5, 7, Some(Version::V1), all).unwrap_err().body,
        ErrorBody::V1(V1Error::Vers { low: 1, high: 2 })
    );
    assert_eq!(
        admit(5, 0, None, all).unwrap_err().body,
        ErrorBody::V1(V1Error::Vers { low: 1, high: 2 })
    );
    let e = admit(5, 3, None, all).unwrap_err();
    assert_eq!((e.xid, e.vers), (5, 3));
    assert_eq!(e.body, ErrorBody::V2(V2Error::Vers { low: 1, high: 2 }));
    // A server speaking only version 1 tells a v2 client 1..1 in the v2 layout, as the draft
    // asks of a Responder that sees a version 2 prefix (section 4.2.3.2).
    assert_eq!(
        admit(6, 2, None, VersionRange::V1_ONLY).unwrap_err().body,
        ErrorBody::V2(V2Error::Vers { low: 1, high: 1 })
    );
}

#[test]
fn admit_message_encodes_err_vers_wire_images() {
    let mut buf = [0u8; 64];
    let probe = words(&[0x77, 0, 3, 0, 0, 0, 0]);
    let f = admit_message(&probe, Some(Version::V1), VersionRange::V1_AND_V2).unwrap_err();
    let n = encode_error(
        &mut buf,
        &f.reply().unwrap(),
        Credits {
            granted: 64,
            max: 64,
        },
    )
    .unwrap();
    assert_eq!(&buf[..n], &words(&[0x77, 0, 64, 4, 1, 1, 2])[..]);
    let probe = words(&[0x78, 3, 3, 0, 0, 0, 0, 0, 0]);
    let f = admit_message(&probe, None, VersionRange::V1_AND_V2).unwrap_err();
    let n = encode_error(
        &mut buf,
        &f.reply().unwrap(),
        Credits {
            granted: 64,
            max: 64,
        },
    )
    .unwrap();
    assert_eq!(
        &buf[..n],
        &words(&[0x78, 3, 0x0040_0040, 4, 1, 1, 1, 2])[..]
    );
    assert_eq!(
        admit_message(&probe[..8], None, VersionRange::V1_AND_V2),
        Err(Fault::Discard(Violation::ShortHeader))
    );
}

#[test]
fn check_call_in_both_layouts() {
    let l = ChunkLimits::DEFAULT;
    // XID mismatch.
    let v1 = words(&[5, 1, 1, 0, 0, 0, 0, 6, 0]);
    let f = check_call(&decode(&v1, &l).unwrap()).unwrap_err();
    assert_eq!(f.reply().unwrap().body, ErrorBody::V1(V1Error::Chunk));
    let v2 = words(&[5, 2, 1, 0, 0, 0, 0, 0, 0, 6, 0]);
    let f = check_call(&decode(&v2, &l).unwrap()).unwrap_err();
    assert_eq!(f.reply().unwrap().body, ErrorBody::V2(V2Error::BadXdr));
    assert_eq!(f.violation(), Violation::XidMismatch);
    // A Version 2 call must not say RDMA2_F_RESPONSE, and must be a CALL.
    let v2 = words(&[5, 2, 1, 0, 1, 0, 0, 0, 0, 5, 0]);
    let f = check_call(&decode(&v2, &l).unwrap()).unwrap_err();
    assert_eq!(f.violation(), Violation::DirectionMismatch);
    let v2 = words(&[5, 2, 1, 0, 0, 0, 0, 0, 0, 5, 1]);
    let f = check_call(&decode(&v2, &l).unwrap()).unwrap_err();
    assert_eq!(f.violation(), Violation::DirectionMismatch);
    let v2 = words(&[5, 2, 1, 0, 0, 0, 0, 0, 0, 5, 0]);
    assert_eq!(check_call(&decode(&v2, &l).unwrap()), Ok(()));
    // Version 1 carries no direction: a REPLY passes the header checks.
    let v1 = words(&[5, 1, 1, 0, 0, 0, 0, 5, 1]);
    assert_eq!(check_call(&decode(&v1, &l).unwrap()), Ok(()));
}

#[test]
fn refusals_per_revision() {
    for why in [
        Refusal::Malformed,
        Refusal::ReadChunks { max: 1 },
        Refusal::System,
        Refusal::Continuation,
        Refusal::WriteResource { needed: 9 },
        Refusal::ReplyResource { needed: 9 },
    ] {
        let r = refusal(Revision::V1, 3, why);
        assert_eq!(
            (r.xid, r.vers, r.body),
            (3, 1, ErrorBody::V1(V1Error::Chunk))
        );
        assert_eq!(refusal(Revision::V2Draft01, 3, why).vers, 2);
    }
    assert_eq!(
        refusal(Revision::V1, 3, Refusal::System).body.name(),
        "ERR_CHUNK"
    );
    let body = |why| refusal(Revision::V2Draft01, 3, why).body;
    assert_eq!(body(Refusal::System).name(), "RDMA2_ERR_SYSTEM");
    assert_eq!(body(Refusal::Malformed), ErrorBody::V2(V2Error::BadXdr));
    assert_eq!(
        body(Refusal::ReadChunks { max: 1 }),
        ErrorBody::V2(V2Error::ReadChunks { max_chunks: 1 })
    );
    assert_eq!(body(Refusal::System), ErrorBody::V2(V2Error::System));
    assert_eq!(
        body(Refusal::Continuation),
        ErrorBody::V2(V2Error::InvalCont)
    );
    assert_eq!(
        body(Refusal::WriteResource { needed: 9 }),
        ErrorBody::V2(V2Error::WriteResource {
            chunk_index: 1,
            length_needed: 9
        })
    );
    assert_eq!(
        body(Refusal::ReplyResource { needed: 9 }),
        ErrorBody::V2(V2Error::ReplyResource { length_needed: 9 })
    );
    // The v2 error header encodes with the prefix and F_RESPONSE.
    let mut buf = [0u8; 64];
    let n = encode_error(
        &mut buf,
        &refusal(Revision::V2Draft01, 3, Refusal::ReplyResource { needed: 9 }),
        Credits {
            granted: 8,
            max: 64,
        },
    )
    .unwrap();
    assert_eq!(&buf[..n], &words(&[3, 2, 0x0040_0008, 4, 1, 10, 9])[..]);
}

#[test]
fn every_truncation_of_a_v2_header_faults_without_panic() {
    let reply = [SEG];
    let lists = ChunkListsRef {
        reads: &[],
        writes: &[],
        reply: Some(&reply),
    };
    let b = encode_vec(Revision::V2Draft01, &call(BodyRef::NoMsg(lists)));
    for n in 0..b.len() {
        assert!(decode(&b[..n], &ChunkLimits::DEFAULT).is_err(), "{n}");
        let _ = admit_message(&b[..n], None, VersionRange::V1_AND_V2);
    }
}

#[test]
fn reverse_replies_of_both_revisions() {
    let l = ChunkLimits::DEFAULT;
    // Version 1: an RDMA_MSG without chunks whose RPC message is a REPLY to its XID.
    let reply = words(&[8, 1, 16, 0, 0, 0, 0, 8, 1, 0]);
    let h = decode(&reply, &l).unwrap();
    assert_eq!(inline_reverse_reply(&h), Some(&reply[28..]));
    // A call is no reply, nor is a reply to another XID, nor one with a chunk.
    let call = words(&[8, 1, 16, 0, 0, 0, 0, 8, 0, 2]);
    assert_eq!(inline_reverse_reply(&decode(&call, &l).unwrap()), None);
    let other = words(&[8, 1, 16, 0, 0, 0, 0, 9, 1, 0]);
    assert_eq!(inline_reverse_reply(&decode(&other, &l).unwrap()), None);
    let chunked = words(&[8, 1, 16, 0, 0, 0, 1, 1, 7, 64, 0, 0, 0, 0, 8, 1, 0]);
    if let Ok(h) = decode(&chunked, &l) {
        assert_eq!(inline_reverse_reply(&h), None);
    }
    // A reply cut short after the XID is no reply.
    let short = words(&[8, 1, 16, 0, 0, 0, 0, 8]);
    assert_eq!(inline_reverse_reply(&decode(&short, &l).unwrap()), None);
    // Version 2: RDMA2_F_RESPONSE set and a REPLY; a flag that disagrees is no reply.
    let reply = words(&[8, 2, 16, 0, 1, 0, 0, 0, 0, 8, 1, 0]);
    let h = decode(&reply, &l).unwrap();
    assert_eq!(inline_reverse_reply(&h), Some(&reply[36..]));
    let liar = words(&[8, 2, 16, 0, 0, 0, 0, 0, 0, 8, 1, 0]);
    assert_eq!(inline_reverse_reply(&decode(&liar, &l).unwrap()), None);
    // The callback the server sends, as the client reads it, is no reply.
    let call = words(&[8, 2, 16, 0, 0, 0, 0, 0, 0, 8, 0, 2]);
    assert_eq!(inline_reverse_reply(&decode(&call, &l).unwrap()), None);
}

#[test]
fn reverse_calls_of_both_revisions() {
    let l = ChunkLimits::DEFAULT;
    // Version 1: told by the RPC header alone.
    let call = words(&[8, 1, 16, 0, 0, 0, 0, 8, 0, 2]);
    let h = decode(&call, &l).unwrap();
    assert_eq!(inline_reverse_call(&h), Some(&call[28..]));
    let reply = words(&[8, 1, 16, 0, 0, 0, 0, 8, 1, 0]);
    assert_eq!(inline_reverse_call(&decode(&reply, &l).unwrap()), None);
    // Version 2: RDMA2_F_RESPONSE clear and a CALL; a flag that disagrees is no call.
    let call = words(&[8, 2, 16, 0, 0, 0, 0, 0, 0, 8, 0, 2]);
    let h = decode(&call, &l).unwrap();
    assert_eq!(inline_reverse_call(&h), Some(&call[36..]));
    let liar = words(&[8, 2, 16, 0, 1, 0, 0, 0, 0, 8, 0, 2]);
    assert_eq!(inline_reverse_call(&decode(&liar, &l).unwrap()), None);
    let reply = words(&[8, 2, 16, 0, 1, 0, 0, 0, 0, 8, 1, 0]);
    assert_eq!(inline_reverse_call(&decode(&reply, &l).unwrap()), None);
    // Another XID in the RPC message: not a callback.
    let other = words(&[8, 2, 16, 0, 0, 0, 0, 0, 0, 9, 0, 2]);
    assert_eq!(inline_reverse_call(&decode(&other, &l).unwrap()), None);
}

#[test]
fn a_probe_tells_a_v2_segments_error_from_a_v1_err_vers() {
    let l = ChunkLimits::DEFAULT;
    // RDMA2_ERR_SEGMENTS with a limit of 16: as long as the C server's ERR_VERS, and its
    // words after RDMA_ERROR are 1, 8, 16.
    let segments = words(&[0x31, 2, 0x0040_0040, 4, 1, 8, 16]);
    let Received::Header(h) = decode_at_client(&segments, Revision::V2Draft01, true, &l).unwrap()
    else {
        panic!("taken for an ERR_VERS")
    };
    assert_eq!(
        h.body,
        Body::Error(ErrorBody::V2(V2Error::Segments { max_segments: 16 }))
    );
    // An ERR_VERS that echoes version 1 in the Version 1 layout is one too.
    let v1_echo = words(&[0x32, 1, 1, 4, 1, 1, 1]);
    assert_eq!(
        decode_at_client(&v1_echo, Revision::V2Draft01, true, &l),
        Ok(Received::VersionError {
            xid: 0x32,
            range: VersionRange::V1_ONLY
        })
    );
}

#[test]
fn v2_fragment_layout_and_v1_refusal() {
    // RDMA2_MSG with RDMA2_F_MORE (2), and RDMA2_F_RESPONSE (1) on a reply's fragment.
    let b = encode_vec(Revision::V2Draft01, &call(BodyRef::Fragment));
    assert_eq!(b, words(&[0xabcd, 2, 0x0040_0040, 0, 2, 0, 0, 0, 0]));
    let mut reply = call(BodyRef::Fragment);
    reply.direction = Direction::Reply;
    let b = encode_vec(Revision::V2Draft01, &reply);
    assert_eq!(b, words(&[0xabcd, 2, 0x0040_0040, 0, 3, 0, 0, 0, 0]));
    let mut buf = [0u8; 64];
    assert_eq!(
        encode(Revision::V1, &mut buf, &call(BodyRef::Fragment)),
        Err(proto::xdr::EncodeError::NotInRevision)
    );
}

#[test]
fn fragments_on_the_wire_reassemble() {
    use proto::continuation::{Part, Reassembled, Reassembler, SliceStorage, RECEIVE_LIMITS};
    let message: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
    let sends: Vec<Vec<u8>> = message
        .chunks(128)
        .enumerate()
        .map(|(i, part)| {
            let last = (i + 1) * 128 >= message.len();
            let body = if last {
                BodyRef::Msg(ChunkListsRef::EMPTY)
            } else {
                BodyRef::Fragment
            };
            let mut send = encode_vec(Revision::V2Draft01, &call(body));
            send.extend_from_slice(part);
            send
        })
        .collect();
    let mut store = [0u8; 512];
    let mut reassembler = Reassembler::new(SliceStorage::new(&mut store[..]), RECEIVE_LIMITS);
    let mut outcome = Vec::new();
    for send in &sends {
        let header = decode(send, &ChunkLimits::DEFAULT).unwrap();
        outcome.push(reassembler.accept_part(header.part()).unwrap());
    }
    assert_eq!(
        outcome,
        [
            Reassembled::Pending,
            Reassembled::Pending,
            Reassembled::Complete {
                xid: 0xabcd,
                fragments: 3
            }
        ]
    );
    assert_eq!(reassembler.storage().data(), &message[..]);
    // A Version 1 message is whole, never a fragment.
    let v1 = encode_vec(Revision::V1, &call(BodyRef::Msg(ChunkListsRef::EMPTY)));
    let header = decode(&v1, &ChunkLimits::DEFAULT).unwrap();
    assert!(matches!(
        header.part(),
        Part::Rpc {
            more: false,
            payload: Some(&[]),
            ..
        }
    ));
}

#[test]
fn a_continued_call_is_checked_whole() {
    let l = ChunkLimits::DEFAULT;
    // The last message of a continued call 5: a Read chunk at position 16, and 8 bytes of
    // payload that are not the start of the RPC message.
    let last = words(&[5, 2, 1, 0, 0, 0, 1, 16, 0x11, 8, 0, 0x1000, 0, 0, 0, 7, 7]);
    let header = decode(&last, &l).unwrap();
    assert_eq!(
        check_call(&header).unwrap_err().violation(),
        Violation::XidMismatch
    );
    // The whole message: the XID, CALL, and room for the position.
    let whole = words(&[5, 0, 1, 2, 7, 7]);
    assert_eq!(check_call_payload(&header, &whole), Ok(()));
    let f = check_call_payload(&header, &whole[..12]).unwrap_err();
    assert_eq!(f.reply().unwrap().body, ErrorBody::V2(V2Error::BadXdr));
    assert_eq!(f.violation(), Violation::ReadPositionOutside(16));
    let f = check_call_payload(&header, &words(&[6, 0, 1, 2])).unwrap_err();
    assert_eq!(f.violation(), Violation::XidMismatch);
}

#[test]
fn the_rest_of_a_refused_fragment_is_dropped() {
    use proto::continuation::{Reassembled, Reassembler, SliceStorage, RECEIVE_LIMITS};
    let l = ChunkLimits::DEFAULT;
    let first = encode_vec(Revision::V2Draft01, &call(BodyRef::Fragment));
    // A fragment with chunks, which no decoder takes: RDMA2_ERR_INVAL_CONT.
    let mut bad = first.clone();
    let reads = [ReadSegment {
        position: 0,
        target: SEG,
    }];
    let with_chunks = ChunkListsRef {
        reads: &reads,
        writes: &[],
        reply: None,
    };
    let chunked = encode_vec(Revision::V2Draft01, &call(BodyRef::Msg(with_chunks)));
    bad.truncate(16);
    bad.extend_from_slice(&chunked[16..]);
    bad[19] |= 2; // RDMA2_F_MORE
    let f = decode(&bad, &l).unwrap_err();
    assert_eq!(f.reply().unwrap().body, ErrorBody::V2(V2Error::InvalCont));
    assert_eq!(
        peek_continued(Revision::V2Draft01, &bad),
        Some((0xabcd, true))
    );
    assert_eq!(peek_continued(Revision::V1, &bad), Some((0xabcd, false)));
    assert_eq!(peek_continued(Revision::V2Draft01, &bad[..16]), None);
    let last = encode_vec(
        Revision::V2Draft01,
        &call(BodyRef::Msg(ChunkListsRef::EMPTY)),
    );
    let mut store = [0u8; 512];
    let mut r = Reassembler::new(SliceStorage::new(&mut store[..]), RECEIVE_LIMITS);
    let feed = |r: &mut Reassembler<SliceStorage<&mut [u8]>>, m: &[u8]| match r
        .accept_part(decode(m, &l).unwrap().part())
    {
        Ok(Reassembled::Pending) => "pending",
        Ok(Reassembled::Dropped) => "dropped",
        Ok(Reassembled::Whole(_)) => "whole",
        _ => "other",
    };
    assert_eq!(feed(&mut r, &first), "pending");
    r.refused(0xabcd, true);
    assert!(!r.in_progress());
    // The rest of 0xabcd, up to its final message, goes nowhere.
    assert_eq!(feed(&mut r, &first), "dropped");
    assert_eq!(feed(&mut r, &last), "dropped");
    // The next call of that XID is taken again.
    assert_eq!(feed(&mut r, &last), "whole");
    // A refused final message ends its sequence, and drops nothing after it.
    assert_eq!(feed(&mut r, &first), "pending");
    r.refused(0xabcd, false);
    assert!(!r.in_progress());
    assert_eq!(feed(&mut r, &last), "whole");
}

#[test]
fn reverse_messages_whole_or_continued_in_version_2() {
    use proto::role::Endpoint;
    let l = ChunkLimits::DEFAULT;
    // A callback's first fragment (RDMA2_F_MORE, RESPONSE clear) is a reverse-direction
    // message for a client, though alone it is no whole call.
    let first = words(&[8, 2, 16, 0, 2, 0, 0, 0, 0, 8, 0]);
    let h = decode(&first, &l).unwrap();
    assert!(is_reverse_v2(&h, Endpoint::Client));
    assert!(!is_reverse_v2(&h, Endpoint::Server));
    assert_eq!(inline_reverse_call(&h), None);
    // A reply's fragment (RESPONSE set) is one for a server, not a client.
    let reply = words(&[8, 2, 16, 0, 3, 0, 0, 0, 0, 8, 1]);
    let h = decode(&reply, &l).unwrap();
    assert!(is_reverse_v2(&h, Endpoint::Server));
    assert!(!is_reverse_v2(&h, Endpoint::Client));
    // A forward reply (RESPONSE set) is none for a client; a credit grant none for anyone.
    let forward = words(&[8, 2, 16, 0, 1, 0, 0, 0, 0, 8, 1, 0]);
    assert!(!is_reverse_v2(
        &decode(&forward, &l).unwrap(),
        Endpoint::Client
    ));
    let grant = words(&[0, 2, 16, 1, 0, 0, 0, 0, 0]);
    if let Ok(h) = decode(&grant, &l) {
        assert!(!is_reverse_v2(&h, Endpoint::Client));
        assert!(!is_reverse_v2(&h, Endpoint::Server));
    }
    // Version 1 has no continuation: never.
    let v1 = words(&[8, 1, 16, 0, 0, 0, 0, 8, 0, 2]);
    assert!(!is_reverse_v2(&decode(&v1, &l).unwrap(), Endpoint::Client));
    // A reassembled payload is classified whole: its XID and message type.
    let call = words(&[8, 0, 2, 0x4000_0000]);
    assert_eq!(reverse_payload(Endpoint::Client, 8, &call), Some(&call[..]));
    assert_eq!(reverse_payload(Endpoint::Client, 9, &call), None);
    assert_eq!(reverse_payload(Endpoint::Server, 8, &call), None);
    let reply = words(&[8, 1, 0]);
    assert_eq!(
        reverse_payload(Endpoint::Server, 8, &reply),
        Some(&reply[..])
    );
    assert_eq!(reverse_payload(Endpoint::Client, 8, &reply), None);
    assert_eq!(reverse_payload(Endpoint::Server, 8, &reply[..4]), None);
}
