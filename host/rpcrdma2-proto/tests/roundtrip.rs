// SPDX-License-Identifier: GPL-2.0

//! Property tests: encode/decode round trips, no panic on any input or any
//! truncation, split/reassemble identity.

mod common;
use common::*;
use proptest::prelude::*;
use proto::chunk::{ChunkLimits, ChunkListsRef, ReadSegment, Segment};
use proto::continuation::*;
use proto::dispatch::{self, DecodeConfig};
use proto::error::{V1Error, V2Error};
use proto::properties::{Property, ReverseSupport};
use proto::v1::{self, V1Body, V1BodyRef, V1DecodeConfig};
use proto::v2::{self, Credit, Flags, Prefix, V2Body, V2BodyRef, V2ChunkListsRef, V2DecodeConfig};

/// A segment of a chunk of at most four: their lengths add up to an XDR data item's.
fn seg() -> impl Strategy<Value = Segment> {
    (any::<u32>(), 0..=u32::MAX / 4, any::<u64>()).prop_map(|(handle, length, offset)| Segment {
        handle,
        length,
        offset,
    })
}

/// A valid Read list: chunks in XDR position order, segments of a chunk
/// contiguous, and no chunk inside the data of the one before it.
fn read_segs() -> impl Strategy<Value = Vec<ReadSegment>> {
    let short =
        (any::<u32>(), 0u32..8, any::<u64>()).prop_map(|(handle, length, offset)| Segment {
            handle,
            length,
            offset,
        });
    prop::collection::vec((0u32..4, short), 0..6).prop_map(|mut v| {
        v.sort_by_key(|(p, _)| *p);
        v.into_iter()
            .map(|(p, target)| ReadSegment {
                position: p * 64,
                target,
            })
            .collect()
    })
}

fn write_chunks() -> impl Strategy<Value = Vec<Vec<Segment>>> {
    prop::collection::vec(prop::collection::vec(seg(), 0..4), 0..4)
}

fn big_limits() -> ChunkLimits {
    ChunkLimits {
        max_read_chunks: 64,
        max_write_chunks: 64,
        max_segments: 64,
        max_header_segments: u32::MAX,
    }
}

fn v2_error() -> impl Strategy<Value = V2Error> {
    prop_oneof![
        (any::<u32>(), any::<u32>()).prop_map(|(low, high)| V2Error::Vers { low, high }),
        Just(V2Error::BadXdr),
        Just(V2Error::BadPropval),
        Just(V2Error::InvalHtype),
        Just(V2Error::InvalCont),
        any::<u32>().prop_map(|max_chunks| V2Error::ReadChunks { max_chunks }),
        any::<u32>().prop_map(|max_chunks| V2Error::WriteChunks { max_chunks }),
        any::<u32>().prop_map(|max_segments| V2Error::Segments { max_segments }),
        (any::<u32>(), any::<u32>()).prop_map(|(chunk_index, length_needed)| {
            V2Error::WriteResource {
                chunk_index,
                length_needed,
            }
        }),
        any::<u32>().prop_map(|length_needed| V2Error::ReplyResource { length_needed }),
        Just(V2Error::System),
    ]
}

proptest! {
    #[test]
    fn v1_msg_round_trip(
        xid: u32, credit: u32,
        reads in read_segs(), writes in write_chunks(),
        reply in prop::option::of(prop::collection::vec(seg(), 0..4)),
        payload in prop::collection::vec(any::<u8>(), 0..64),
        nomsg: bool,
    ) {
        let wrefs: Vec<&[Segment]> = writes.iter().map(|c| c.as_slice()).collect();
        let lists = ChunkListsRef { reads: &reads, writes: &wrefs, reply: reply.as_deref() };
        prop_assume!(!(nomsg && lists.is_empty()));
        let mut buf = vec![0u8; 2048];
        let body = if nomsg { V1BodyRef::NoMsg(lists) } else { V1BodyRef::Msg(lists) };
        let n = v1::encode(&mut buf, xid, 1, credit, &body).unwrap();
        prop_assert_eq!(n, 16 + lists.encoded_len().unwrap());
        let mut wire = buf[..n].to_vec();
        if !nomsg { wire.extend_from_slice(&payload); }
        let cfg = V1DecodeConfig { limits: big_limits(), ..Default::default() };
        let h = v1::decode(&wire, &cfg).unwrap();
        prop_assert_eq!((h.xid, h.credit, h.header_len), (xid, credit, n));
        let chunks = match h.body {
            V1Body::Msg { chunks, payload: p } => { prop_assert_eq!(p, &payload[..]); chunks }
            V1Body::NoMsg { chunks } => chunks,
            other => return Err(TestCaseError::fail(format!("{other:?}"))),
        };
        prop_assert_eq!(chunks.reads.segments().collect::<Vec<_>>(), reads);
        let got: Vec<Vec<Segment>> = chunks.writes.chunks().map(|c| c.segments().collect()).collect();
        prop_assert_eq!(got, writes);
        prop_assert_eq!(chunks.reply.map(|c| c.segments().collect::<Vec<_>>()), reply);
        // Every truncation of the header is rejected, never a panic.
        for cut in 0..n {
            prop_assert!(v1::decode(&wire[..cut], &cfg).is_err());
        }
    }

    #[test]
    fn v2_msg_round_trip(
        xid: u32, granted: u16, max_outstanding: u16, response: bool,
        reads in read_segs(), writes in write_chunks(),
        reply in prop::option::of(prop::collection::vec(seg(), 0..4)),
        payload in prop::collection::vec(any::<u8>(), 0..64),
        invalidate: bool,
    ) {
        let wrefs: Vec<&[Segment]> = writes.iter().map(|c| c.as_slice()).collect();
        let lists = ChunkListsRef { reads: &reads, writes: &wrefs, reply: reply.as_deref() };
        let inv_handle = if invalidate {
            reads.first().map(|s| s.target.handle).unwrap_or(0)
        } else { 0 };
        let c = V2ChunkListsRef { inv_handle, lists };
        let credit = Credit { granted, max_outstanding };
        let prefix = Prefix { xid, vers: 2, credit, htype: 0, flags: Flags(u32::from(response)) };
        let mut buf = vec![0u8; 2048];
        let n = v2::encode(&mut buf, &prefix, &V2BodyRef::Msg(c)).unwrap();
        let mut wire = buf[..n].to_vec();
        wire.extend_from_slice(&payload);
        let cfg = V2DecodeConfig { limits: big_limits(), ..Default::default() };
        let m = v2::decode(&wire, &cfg).unwrap();
        prop_assert_eq!(m.prefix.xid, xid);
        prop_assert_eq!(m.prefix.credit, credit);
        prop_assert_eq!(m.prefix.flags.response(), response);
        prop_assert_eq!(m.header_len, n);
        prop_assert_eq!(m.payload(), Some(&payload[..]));
        let ch = m.chunks().unwrap();
        prop_assert_eq!(ch.inv_handle, inv_handle);
        prop_assert_eq!(ch.lists.reads.segments().collect::<Vec<_>>(), reads);
        for cut in 0..n {
            prop_assert!(v2::decode(&wire[..cut], &cfg).is_err());
        }
    }

    #[test]
    fn v2_error_round_trip(xid: u32, e in v2_error()) {
        let mut buf = [0u8; 64];
        let p = Prefix { xid, vers: 2, ..Default::default() };
        let n = v2::encode(&mut buf, &p, &V2BodyRef::Error(e)).unwrap();
        let m = v2::decode(&buf[..n], &V2DecodeConfig::default()).unwrap();
        prop_assert_eq!(m.body, V2Body::Error(e));
        prop_assert!(m.prefix.flags.response());
    }

    #[test]
    fn v1_error_round_trip(xid: u32, low: u32, high: u32, vers_err: bool) {
        let e = if vers_err { V1Error::Vers { low, high } } else { V1Error::Chunk };
        let mut buf = [0u8; 64];
        let n = v1::encode(&mut buf, xid, 1, 0, &V1BodyRef::Error(e)).unwrap();
        let h = v1::decode(&buf[..n], &V1DecodeConfig::default()).unwrap();
        prop_assert_eq!(h.body, V1Body::Error(e));
    }

    #[test]
    fn connprop_round_trip(
        sb in 1024u32.., rb in 1024u32.., rs in 1u32.., rc: u32, brs in 0u32..4,
        auth in prop::collection::vec(any::<u8>(), 0..40),
    ) {
        let props = [
            Property::SendSize(sb),
            Property::RecvBufferSize(rb),
            Property::MaxSegmentSize(rs),
            Property::MaxSegmentCount(rc),
            Property::Reverse(ReverseSupport::from_u32(brs).unwrap()),
            Property::HostAuth(&auth),
        ];
        let mut buf = [0u8; 256];
        let n = v2::encode(&mut buf, &Prefix { vers: 2, ..Default::default() }, &V2BodyRef::ConnProp(&props)).unwrap();
        let m = v2::decode(&buf[..n], &V2DecodeConfig::default()).unwrap();
        let V2Body::ConnProp(set) = m.body else { return Err(TestCaseError::fail("not connprop")) };
        prop_assert_eq!(set.properties().collect::<Vec<_>>(), props.to_vec());
    }

    #[test]
    fn decoders_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = dispatch::decode(&bytes, &DecodeConfig::default());
        let _ = v1::decode(&bytes, &V1DecodeConfig::default());
        let _ = v2::decode(&bytes, &V2DecodeConfig::default());
        let _ = proto::negotiation::parse_version_error(&bytes);
        let _ = proto::cm_private::CmPrivateData::decode(&bytes);
    }

    #[test]
    fn structured_garbage_never_panics(ws in prop::collection::vec(prop_oneof![0u32..8, any::<u32>()], 0..40), vers in 1u32..3) {
        let mut w = vec![7, vers, 1];
        w.extend_from_slice(&ws);
        let bytes = words(&w);
        let _ = dispatch::decode(&bytes, &DecodeConfig::default());
    }

    #[test]
    fn split_then_reassemble_is_identity(
        payload in prop::collection::vec(any::<u8>(), 0..2000),
        threshold in 64usize..600,
        final_hdr in 36usize..60,
    ) {
        let plan = match plan_fragments(payload.len(), threshold, final_hdr, 1000) {
            Ok(p) => p,
            Err(_) => return Ok(()),
        };
        let frags: Vec<_> = plan.fragments().collect();
        prop_assert_eq!(frags.len(), plan.count());
        let mut storage = vec![0u8; 4096];
        let mut r = Reassembler::new(SliceStorage::new(&mut storage[..]), ReassemblyLimits { max_len: 4096, max_fragments: 1000 });
        let mut done = false;
        let mut whole = None;
        for (i, f) in frags.iter().enumerate() {
            let last = i + 1 == frags.len();
            prop_assert_eq!(f.more, !last);
            let hdr = if last { final_hdr } else { v2::EMPTY_MSG_HEADER_LEN };
            prop_assert!(hdr + f.len <= threshold);
            let flags = if f.more { v2::RDMA2_F_MORE } else { 0 };
            let mut wire = words(&[5, 2, 1, 0, flags, 0, 0, 0, 0]);
            wire.extend_from_slice(&payload[f.offset..f.offset + f.len]);
            let m = v2::decode(&wire, &V2DecodeConfig::default()).unwrap();
            match r.accept(&m).unwrap() {
                Reassembled::Pending => prop_assert!(!last),
                Reassembled::Complete { xid: 5, fragments } => {
                    prop_assert!(last);
                    prop_assert_eq!(fragments as usize, frags.len());
                    done = true;
                }
                Reassembled::Whole(p) => { whole = Some(p.to_vec()); done = true; }
                other => return Err(TestCaseError::fail(format!("{other:?}"))),
            }
        }
        prop_assert!(done);
        match whole {
            Some(p) => prop_assert_eq!(p, payload),
            None => prop_assert_eq!(r.storage().data(), &payload[..]),
        }
    }
}
