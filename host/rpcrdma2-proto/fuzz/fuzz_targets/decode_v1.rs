// SPDX-License-Identifier: GPL-2.0

//! Version 1 decoder; a successful decode re-encodes to the same header.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma2_proto::proto::chunk::{ChunkLimits, ChunkListsRef, ReadSegment, Segment};
use rpcrdma2_proto::proto::v1::{self, V1Body, V1BodyRef, V1DecodeConfig};

fuzz_target!(|data: &[u8]| {
    let cfg = V1DecodeConfig {
        limits: ChunkLimits {
            max_read_chunks: 16,
            max_write_chunks: 16,
            max_segments: 16,
            max_header_segments: u32::MAX,
        },
        ..Default::default()
    };
    let Ok(h) = v1::decode(data, &cfg) else {
        return;
    };
    let (chunks, nomsg) = match h.body {
        V1Body::Msg { chunks, .. } => (chunks, false),
        V1Body::NoMsg { chunks } => (chunks, true),
        _ => return,
    };
    let reads: Vec<ReadSegment> = chunks.reads.segments().collect();
    let writes: Vec<Vec<Segment>> = chunks
        .writes
        .chunks()
        .map(|c| c.segments().collect())
        .collect();
    let wrefs: Vec<&[Segment]> = writes.iter().map(|c| c.as_slice()).collect();
    let reply: Option<Vec<Segment>> = chunks.reply.map(|c| c.segments().collect());
    let lists = ChunkListsRef {
        reads: &reads,
        writes: &wrefs,
        reply: reply.as_deref(),
    };
    let body = if nomsg {
        V1BodyRef::NoMsg(lists)
    } else {
        V1BodyRef::Msg(lists)
    };
    let mut out = vec![0u8; h.header_len];
    let n = v1::encode(&mut out, h.xid, h.vers, h.credit, &body).unwrap();
    assert_eq!(&out[..n], &data[..h.header_len]);
});
