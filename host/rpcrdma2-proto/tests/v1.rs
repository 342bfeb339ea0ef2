// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA Version 1 vectors, hand-derived from the RFC 8166 XDR
//! (section 5.4) and the RFC 8797 private message.

mod common;
use common::*;
use proto::chunk::{ChunkLimits, ChunkListsRef, ReadSegment, Segment};
use proto::cm_private::{self, CmPrivateData};
use proto::error::{ErrorBody, Fault, V1Error, Violation};
use proto::v1::{self, V1Body, V1BodyRef, V1DecodeConfig};
use proto::version::VersionRange;

const XID: u32 = 0x1234_5678;

fn cfg() -> V1DecodeConfig {
    V1DecodeConfig::default()
}

fn reply_of(f: Fault) -> (u32, u32, V1Error) {
    let r = f.reply().expect("a reply");
    match r.body {
        ErrorBody::V1(e) => (r.xid, r.vers, e),
        other => panic!("not a v1 error: {other:?}"),
    }
}

#[test]
fn msg_without_chunks() {
    // xid, vers 1, credit 32, RDMA_MSG, no reads, no writes, no reply, then
    // the RPC call header.
    let rpc = words(&[XID, 0, 2, 100003]);
    let buf = cat(&[&words(&[XID, 1, 32, 0, 0, 0, 0]), &rpc]);
    let h = v1::decode(&buf, &cfg()).unwrap();
    assert_eq!((h.xid, h.vers, h.credit, h.header_len), (XID, 1, 32, 28));
    match h.body {
        V1Body::Msg { chunks, payload } => {
            assert!(chunks.is_empty());
            assert_eq!(payload, &rpc[..]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn msg_with_read_list_two_chunks() {
    // Two read segments at position 16 (one chunk of 120 bytes), one at
    // 136, right after that chunk's data item (another).
    let buf = words(&[
        XID, 1, 8, 0, //
        1, 16, 0xaa, 100, 0, 0x1000, //
        1, 16, 0xab, 20, 0, 0x2000, //
        1, 136, 0xac, 4, 0, 0x3000, //
        0,      // end of read list
        0,      // write list
        0,      // reply chunk
    ]);
    let h = v1::decode(&buf, &cfg()).unwrap();
    let V1Body::Msg { chunks, payload } = h.body else {
        panic!()
    };
    assert!(payload.is_empty());
    assert_eq!(chunks.reads.segment_count(), 3);
    assert_eq!(chunks.reads.chunk_count(), 2);
    let cs: Vec<_> = chunks.reads.chunks().collect();
    assert_eq!(cs.len(), 2);
    assert_eq!(cs[0].position, 16);
    assert_eq!(cs[0].segment_count(), 2);
    assert_eq!(cs[0].length(), 120);
    assert_eq!(cs[1].position, 136);
    let segs: Vec<_> = chunks.reads.segments().collect();
    assert_eq!(
        segs[1],
        ReadSegment {
            position: 16,
            target: Segment {
                handle: 0xab,
                length: 20,
                offset: 0x2000
            }
        }
    );
    assert!(!chunks.reads.has_position_zero());
}

#[test]
fn msg_with_write_list_and_reply_chunk() {
    let buf = words(&[
        XID, 1, 8, 0, //
        0, // read list
        1, 2, 0x10, 4096, 0, 0x8000, 0x11, 4096, 0, 0x9000, // chunk 1: 2 segs
        1, 0, // chunk 2: empty Write chunk
        0, // end of write list
        1, 1, 0x20, 0, 0, 0, // reply chunk with one empty segment
    ]);
    let h = v1::decode(&buf, &cfg()).unwrap();
    let V1Body::Msg { chunks, .. } = h.body else {
        panic!()
    };
    assert_eq!(chunks.writes.chunk_count(), 2);
    let wc: Vec<_> = chunks.writes.chunks().collect();
    assert_eq!(wc[0].segment_count(), 2);
    assert_eq!(wc[0].length(), 8192);
    assert_eq!(wc[1].segment_count(), 0);
    assert!(!wc[1].is_unused());
    let reply = chunks.reply.unwrap();
    assert!(reply.is_unused());
    assert!(chunks.contains_handle(0x11));
    assert!(chunks.contains_handle(0x20));
    assert!(!chunks.contains_handle(0x30));
}

#[test]
fn nomsg_with_position_zero_read_chunk() {
    let buf = words(&[XID, 1, 8, 1, 1, 0, 7, 2048, 0, 0x100, 0, 0, 0]);
    let h = v1::decode(&buf, &cfg()).unwrap();
    let V1Body::NoMsg { chunks } = h.body else {
        panic!()
    };
    assert!(chunks.reads.has_position_zero());
    assert_eq!(h.header_len, buf.len());
}

#[test]
fn nomsg_without_chunks_is_err_chunk() {
    let buf = words(&[XID, 1, 8, 1, 0, 0, 0]);
    let f = v1::decode(&buf, &cfg()).unwrap_err();
    assert_eq!(f.violation(), Violation::NoMsgWithoutChunks);
    assert_eq!(reply_of(f), (XID, 1, V1Error::Chunk));
}

#[test]
fn msgp_is_rejected_with_err_chunk() {
    // RDMA_MSGP: rdma_align, rdma_thresh, then the lists.
    let buf = words(&[XID, 1, 8, 2, 4, 1024, 0, 0, 0]);
    let f = v1::decode(&buf, &cfg()).unwrap_err();
    assert_eq!(f.violation(), Violation::DeprecatedMsgp);
    assert_eq!(reply_of(f), (XID, 1, V1Error::Chunk));
}

#[test]
fn done_is_decoded_for_dropping() {
    let buf = words(&[XID, 1, 8, 3]);
    assert_eq!(v1::decode(&buf, &cfg()).unwrap().body, V1Body::Done);
}

#[test]
fn error_vers_and_chunk() {
    let buf = words(&[XID, 1, 8, 4, 1, 1, 1]);
    let h = v1::decode(&buf, &cfg()).unwrap();
    assert_eq!(h.body, V1Body::Error(V1Error::Vers { low: 1, high: 1 }));
    let buf = words(&[XID, 1, 8, 4, 2]);
    let h = v1::decode(&buf, &cfg()).unwrap();
    assert_eq!(h.body, V1Body::Error(V1Error::Chunk));
    // Unknown error codes and truncated arms are dropped silently.
    for bad in [words(&[XID, 1, 8, 4, 3]), words(&[XID, 1, 8, 4, 1, 1])] {
        let f = v1::decode(&bad, &cfg()).unwrap_err();
        assert!(
            matches!(f, Fault::Discard(Violation::ErrorBody(_))),
            "{f:?}"
        );
    }
}

#[test]
fn wrong_version_gets_err_vers() {
    let buf = words(&[XID, 7, 8, 0, 0, 0, 0]);
    let f = v1::decode(&buf, &cfg()).unwrap_err();
    assert_eq!(reply_of(f), (XID, 7, V1Error::Vers { low: 1, high: 1 }));
    let c = V1DecodeConfig {
        versions: VersionRange::V1_AND_V2,
        ..cfg()
    };
    let f = v1::decode(&buf, &c).unwrap_err();
    assert_eq!(reply_of(f).2, V1Error::Vers { low: 1, high: 2 });
}

#[test]
fn short_header_is_discarded() {
    for n in 0..16 {
        let buf = vec![0u8; n];
        assert_eq!(
            v1::decode(&buf, &cfg()).unwrap_err(),
            Fault::Discard(Violation::ShortHeader)
        );
    }
}

#[test]
fn unknown_proc_is_err_chunk() {
    let f = v1::decode(&words(&[XID, 1, 8, 9]), &cfg()).unwrap_err();
    assert_eq!(f.violation(), Violation::UnknownHeaderType(9));
    assert_eq!(reply_of(f).2, V1Error::Chunk);
}

#[test]
fn malformed_lists_are_err_chunk() {
    let cases = [
        words(&[XID, 1, 8, 0]),                            // lists missing
        words(&[XID, 1, 8, 0, 2, 0, 0]),                   // bad discriminant
        words(&[XID, 1, 8, 0, 1, 6, 1, 1, 0, 0, 0, 0, 0]), // misaligned position
        words(&[XID, 1, 8, 0, 0, 1, 1000, 0]),             // count beyond buffer
        words(&[XID, 1, 8, 0, 0, 1, 0xffff_ffff]),         // huge count
    ];
    for buf in cases {
        let f = v1::decode(&buf, &cfg()).unwrap_err();
        assert_eq!(reply_of(f).2, V1Error::Chunk, "{buf:?}");
    }
}

#[test]
fn limits_are_enforced() {
    let limits = ChunkLimits {
        max_read_chunks: 1,
        max_write_chunks: 1,
        max_segments: 1,
        max_header_segments: u32::MAX,
    };
    let c = V1DecodeConfig { limits, ..cfg() };
    let two_read_chunks = words(&[XID, 1, 8, 0, 1, 0, 1, 1, 0, 0, 1, 4, 1, 1, 0, 0, 0, 0, 0]);
    let two_segs = words(&[XID, 1, 8, 0, 0, 1, 2, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0]);
    let two_write_chunks = words(&[XID, 1, 8, 0, 0, 1, 0, 1, 0, 0, 0]);
    for buf in [two_read_chunks, two_segs, two_write_chunks] {
        assert!(v1::decode(&buf, &c).is_err());
        assert!(v1::decode(&buf, &cfg()).is_ok());
    }
}

#[test]
fn encode_matches_vectors() {
    let mut buf = [0u8; 256];
    let reads = [ReadSegment {
        position: 0,
        target: Segment {
            handle: 7,
            length: 2048,
            offset: 0x100,
        },
    }];
    let lists = ChunkListsRef {
        reads: &reads,
        ..ChunkListsRef::EMPTY
    };
    let n = v1::encode(&mut buf, XID, 1, 8, &V1BodyRef::NoMsg(lists)).unwrap();
    assert_eq!(
        &buf[..n],
        &words(&[XID, 1, 8, 1, 1, 0, 7, 2048, 0, 0x100, 0, 0, 0])[..]
    );
    let n = v1::encode(
        &mut buf,
        XID,
        1,
        8,
        &V1BodyRef::Error(V1Error::Vers { low: 1, high: 1 }),
    )
    .unwrap();
    assert_eq!(&buf[..n], &words(&[XID, 1, 8, 4, 1, 1, 1])[..]);
    // Too small a buffer fails instead of panicking.
    for len in 0..n {
        assert!(v1::encode(
            &mut buf[..len],
            XID,
            1,
            8,
            &V1BodyRef::Error(V1Error::Vers { low: 1, high: 1 })
        )
        .is_err());
    }
}

#[test]
fn cm_private_data_rfc8797() {
    // magic, version 1, flags (remote invalidation), send 4 KiB, recv 32 KiB.
    let raw = [0xf6, 0xab, 0x0e, 0x18, 1, 1, 3, 31];
    let p = CmPrivateData::decode(&raw).unwrap();
    assert!(p.remote_invalidation());
    assert_eq!((p.send_size, p.recv_size), (4096, 32768));
    assert_eq!(p.encode(), raw);
    // CM padding after the message is ignored.
    let mut padded = raw.to_vec();
    padded.resize(56, 0);
    assert_eq!(CmPrivateData::decode(&padded), Some(p));
    // Wrong magic, unknown version, short: not ours.
    assert_eq!(CmPrivateData::decode(&[0, 0, 0, 0, 1, 0, 0, 0]), None);
    assert_eq!(
        CmPrivateData::decode(&[0xf6, 0xab, 0x0e, 0x18, 2, 0, 0, 0]),
        None
    );
    assert_eq!(CmPrivateData::decode(&raw[..7]), None);
    // Size encoding: (value + 1) * 1024, clamped.
    assert_eq!(cm_private::decode_size(0), 1024);
    assert_eq!(cm_private::decode_size(255), 256 * 1024);
    assert_eq!(cm_private::encode_size(1024), 0);
    assert_eq!(cm_private::encode_size(1500), 0);
    assert_eq!(cm_private::encode_size(100), 0);
    assert_eq!(cm_private::encode_size(1 << 30), 255);
    let q = CmPrivateData::new(8192, 1 << 20, false);
    assert_eq!((q.send_size, q.recv_size, q.flags), (8192, 256 * 1024, 0));
}

/// One Read list entry: discriminant, position, handle, length, offset.
fn read_entry(position: u32, handle: u32, length: u32) -> [u32; 6] {
    [1, position, handle, length, 0, 0x1000]
}

fn msg_with_reads(entries: &[[u32; 6]]) -> Vec<u8> {
    let mut ws = vec![XID, 1, 8, 0];
    for e in entries {
        ws.extend_from_slice(e);
    }
    ws.extend_from_slice(&[0, 0, 0]);
    words(&ws)
}

#[test]
fn read_list_position_order_is_enforced() {
    use proto::chunk::ChunkError;
    // Chunks out of XDR position order.
    let f = v1::decode(
        &msg_with_reads(&[read_entry(64, 1, 8), read_entry(16, 2, 8)]),
        &cfg(),
    )
    .unwrap_err();
    assert_eq!(
        f.violation(),
        Violation::Chunk(ChunkError::PositionOutOfOrder {
            position: 16,
            previous: 64
        })
    );
    assert_eq!(reply_of(f).2, V1Error::Chunk);
    // Segments of the chunk at 16 not contiguous in the list.
    let f = v1::decode(
        &msg_with_reads(&[
            read_entry(16, 1, 8),
            read_entry(64, 2, 8),
            read_entry(16, 3, 8),
        ]),
        &cfg(),
    )
    .unwrap_err();
    assert!(matches!(
        f.violation(),
        Violation::Chunk(ChunkError::PositionOutOfOrder { .. })
    ));
    assert_eq!(reply_of(f).2, V1Error::Chunk);
    // The chunk at 32 starts inside the 10 (XDR: 12) bytes at 24.
    let f = v1::decode(
        &msg_with_reads(&[
            read_entry(24, 1, 6),
            read_entry(24, 2, 4),
            read_entry(32, 3, 4),
        ]),
        &cfg(),
    )
    .unwrap_err();
    assert_eq!(
        f.violation(),
        Violation::Chunk(ChunkError::OverlappingChunks {
            position: 32,
            previous_end: 36
        })
    );
    assert_eq!(reply_of(f).2, V1Error::Chunk);
    // Right at the rounded-up end is fine; so is a zero-length chunk.
    let ok = msg_with_reads(&[
        read_entry(24, 1, 6),
        read_entry(24, 2, 4),
        read_entry(36, 3, 0),
        read_entry(36, 4, 0),
        read_entry(36, 5, 5),
        read_entry(44, 6, 1),
    ]);
    let h = v1::decode(&ok, &cfg()).unwrap();
    let V1Body::Msg { chunks, .. } = h.body else {
        panic!()
    };
    let cs: Vec<_> = chunks.reads.chunks().collect();
    assert_eq!(
        cs.iter()
            .map(|c| (c.position, c.segment_count()))
            .collect::<Vec<_>>(),
        [(24, 2), (36, 3), (44, 1)]
    );
    // A huge chunk cannot wrap the end computation around.
    let f = v1::decode(
        &msg_with_reads(&[
            read_entry(0xffff_fff0, 1, 0x7fff_ffff),
            read_entry(0xffff_fff0, 2, 0x7fff_ffff),
            read_entry(0xffff_fffc, 3, 4),
        ]),
        &cfg(),
    )
    .unwrap_err();
    assert!(matches!(
        f.violation(),
        Violation::Chunk(ChunkError::OverlappingChunks {
            position: 0xffff_fffc,
            ..
        })
    ));
}

#[test]
fn chunk_lengths_that_overflow_are_refused() {
    use proto::chunk::ChunkError;
    // Two segments of one Read chunk adding up to more than u32::MAX bytes.
    let f = v1::decode(
        &msg_with_reads(&[read_entry(40, 1, u32::MAX), read_entry(40, 2, 1)]),
        &cfg(),
    )
    .unwrap_err();
    assert_eq!(f.violation(), Violation::Chunk(ChunkError::LengthOverflow));
    assert_eq!(reply_of(f).2, V1Error::Chunk);
    // One segment of u32::MAX bytes is a (large) data item.
    v1::decode(&msg_with_reads(&[read_entry(40, 1, u32::MAX)]), &cfg()).unwrap();
    // A Write chunk and a Reply chunk of two 0xffff_fff0-byte segments.
    let seg = |h| [h, 0xffff_fff0, 0, 0x1000];
    let mut write = vec![XID, 1, 8, 0, 0, 1, 2];
    write.extend_from_slice(&seg(1));
    write.extend_from_slice(&seg(2));
    write.extend_from_slice(&[0, 0]);
    let mut reply = vec![XID, 1, 8, 0, 0, 0, 1, 2];
    reply.extend_from_slice(&seg(1));
    reply.extend_from_slice(&seg(2));
    for ws in [write, reply] {
        let f = v1::decode(&words(&ws), &cfg()).unwrap_err();
        assert_eq!(f.violation(), Violation::Chunk(ChunkError::LengthOverflow));
        assert_eq!(reply_of(f).2, V1Error::Chunk);
    }
}

/// An RDMA_MSG call with `reads`, then an RPC call with `rpc_xid` of `len` bytes.
fn call_with_reads(entries: &[[u32; 6]], rpc_xid: u32, len: usize) -> Vec<u8> {
    let mut buf = msg_with_reads(entries);
    buf.extend_from_slice(&rpc_xid.to_be_bytes());
    buf.resize(buf.len() + len - 4, 0);
    buf
}

#[test]
fn calls_are_checked_against_their_payload() {
    let check = |buf: &[u8]| v1::check_call(&v1::decode(buf, &cfg()).unwrap());
    // The RPC message must carry the transport XID.
    check(&call_with_reads(&[], XID, 40)).unwrap();
    let f = check(&call_with_reads(&[], XID ^ 0xff00, 40)).unwrap_err();
    assert_eq!(f.violation(), Violation::XidMismatch);
    assert_eq!(reply_of(f), (XID, 1, V1Error::Chunk));
    // An RDMA_MSG without an RPC message.
    let f = check(&msg_with_reads(&[])).unwrap_err();
    assert_eq!(f.violation(), Violation::XidMismatch);
    // A Read chunk at the end of the 40 inline bytes, and one after it, counting its data.
    check(&call_with_reads(&[read_entry(40, 1, 6)], XID, 40)).unwrap();
    check(&call_with_reads(
        &[read_entry(16, 1, 6), read_entry(48, 2, 4)],
        XID,
        40,
    ))
    .unwrap();
    // Past the inline bytes, or past the chunks before it.
    let f = check(&call_with_reads(&[read_entry(0x10_0000, 1, 8)], XID, 40)).unwrap_err();
    assert_eq!(f.violation(), Violation::ReadPositionOutside(0x10_0000));
    assert_eq!(reply_of(f), (XID, 1, V1Error::Chunk));
    let f = check(&call_with_reads(
        &[read_entry(16, 1, 6), read_entry(52, 2, 4)],
        XID,
        40,
    ))
    .unwrap_err();
    assert_eq!(f.violation(), Violation::ReadPositionOutside(52));
    // RDMA_NOMSG has no inline message to check.
    let mut ws = vec![XID, 1, 8, 1];
    ws.extend_from_slice(&read_entry(0, 1, 4096));
    ws.extend_from_slice(&[0, 0, 0]);
    check(&words(&ws)).unwrap();
}

#[test]
fn position_zero_chunk_may_enclose_other_chunks() {
    // RDMA_NOMSG Long Call: the whole message at position zero, plus a
    // data item chunk inside it.
    let mut ws = vec![XID, 1, 8, 1];
    ws.extend_from_slice(&read_entry(0, 1, 4096));
    ws.extend_from_slice(&read_entry(0, 2, 100));
    ws.extend_from_slice(&read_entry(128, 3, 8192));
    ws.extend_from_slice(&[0, 0, 0]);
    let buf = words(&ws);
    let h = v1::decode(&buf, &cfg()).unwrap();
    let V1Body::NoMsg { chunks } = h.body else {
        panic!()
    };
    assert!(chunks.reads.has_position_zero());
    assert_eq!(chunks.reads.chunk_count(), 2);
    // But a position-zero entry after a later chunk is out of order.
    let mut ws = vec![XID, 1, 8, 1];
    ws.extend_from_slice(&read_entry(128, 3, 8192));
    ws.extend_from_slice(&read_entry(0, 1, 4096));
    ws.extend_from_slice(&[0, 0, 0]);
    let f = v1::decode(&words(&ws), &cfg()).unwrap_err();
    assert_eq!(reply_of(f).2, V1Error::Chunk);
}

#[test]
fn sole_handle_of_chunk_lists() {
    // A Read chunk and a Write chunk in one region: its handle.
    let buf = words(&[
        XID, 1, 8, 0, // RDMA_MSG
        1, 0, 0x40, 4096, 0, 0x1000, 0, // read list: one segment of handle 0x40
        1, 1, 0x40, 8192, 0, 0x2000, 0, // write list: one chunk of handle 0x40
        0, // no reply chunk
    ]);
    let h = v1::decode(&buf, &cfg()).unwrap();
    let V1Body::Msg { chunks, .. } = h.body else {
        panic!()
    };
    assert_eq!(chunks.sole_handle(), Some(0x40));

    // Two regions: none.
    let buf = words(&[
        XID, 1, 8, 0, // RDMA_MSG
        0, // read list
        1, 1, 0x40, 8192, 0, 0x2000, 0, // write list
        1, 1, 0x41, 4096, 0, 0x3000, // reply chunk of another region
    ]);
    let h = v1::decode(&buf, &cfg()).unwrap();
    let V1Body::Msg { chunks, .. } = h.body else {
        panic!()
    };
    assert_eq!(chunks.sole_handle(), None);

    // No chunks: none.
    let buf = words(&[XID, 1, 8, 0, 0, 0, 0]);
    let h = v1::decode(&buf, &cfg()).unwrap();
    let V1Body::Msg { chunks, .. } = h.body else {
        panic!()
    };
    assert_eq!(chunks.sole_handle(), None);
}
