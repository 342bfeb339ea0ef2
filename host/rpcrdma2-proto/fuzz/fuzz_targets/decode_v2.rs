// SPDX-License-Identifier: GPL-2.0

//! Version 2 decoder; a successful MSG/NOMSG decode re-encodes to the same
//! header, and property sets interpret without failure.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma2_proto::proto::chunk::{ChunkListsRef, ReadSegment, Segment};
use rpcrdma2_proto::proto::properties::PeerProperties;
use rpcrdma2_proto::proto::v2::{self, V2Body, V2BodyRef, V2ChunkListsRef, V2DecodeConfig};

fuzz_target!(|data: &[u8]| {
    let Ok(m) = v2::decode(data, &V2DecodeConfig::default()) else {
        return;
    };
    let (chunks, nomsg) = match m.body {
        V2Body::Msg { chunks, .. } => (chunks, false),
        V2Body::NoMsg { chunks } => (chunks, true),
        V2Body::ConnProp(set) => {
            assert_eq!(set.iter().count(), set.properties().count());
            PeerProperties::default().apply(&set);
            return;
        }
        V2Body::Error(_) => return,
    };
    let reads: Vec<ReadSegment> = chunks.lists.reads.segments().collect();
    let writes: Vec<Vec<Segment>> = chunks
        .lists
        .writes
        .chunks()
        .map(|c| c.segments().collect())
        .collect();
    let wrefs: Vec<&[Segment]> = writes.iter().map(|c| c.as_slice()).collect();
    let reply: Option<Vec<Segment>> = chunks.lists.reply.map(|c| c.segments().collect());
    let c = V2ChunkListsRef {
        inv_handle: chunks.inv_handle,
        lists: ChunkListsRef {
            reads: &reads,
            writes: &wrefs,
            reply: reply.as_deref(),
        },
    };
    let body = if nomsg {
        V2BodyRef::NoMsg(c)
    } else {
        V2BodyRef::Msg(c)
    };
    let mut out = vec![0u8; m.header_len];
    let n = v2::encode(&mut out, &m.prefix, &body).unwrap();
    assert_eq!(&out[..n], &data[..m.header_len]);
});
