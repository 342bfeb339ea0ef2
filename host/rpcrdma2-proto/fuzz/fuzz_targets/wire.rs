// SPDX-License-Identifier: GPL-2.0

//! Any bytes through the wire revision seam, as the client and the server take them.
//! Invariants: nothing panics; a decoded header lies within the message; a `Msg` or `NoMsg`
//! encodes again, in its revision, to a header that decodes to the same chunk lists and XID;
//! every fault's reply encodes; the server admits only the settled version once there is
//! one, and what it admits decodes in that version's revision or faults in its layout.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma2_proto::proto::chunk::{ChunkLimits, ChunkLists, ChunkListsRef, ReadSegment, Segment};
use rpcrdma2_proto::proto::error::{ErrorBody, Fault};
use rpcrdma2_proto::proto::version::{Version, VersionRange};
use rpcrdma2_proto::proto::wire::{
    self, Body, BodyRef, Credits, Direction, Outgoing, Received, Revision,
};

fn reply_encodes(fault: &Fault) {
    if let Some(r) = fault.reply() {
        let mut buf = [0u8; 64];
        wire::encode_error(&mut buf, &r, Credits { granted: 1, max: 1 }).unwrap();
    }
}

/// The lists of a decoded header as owned arrays, for the encoder.
struct Owned {
    reads: Vec<ReadSegment>,
    writes: Vec<Vec<Segment>>,
    reply: Option<Vec<Segment>>,
}

impl Owned {
    fn of(lists: &ChunkLists<'_>) -> Self {
        Self {
            reads: lists.reads.segments().collect(),
            writes: lists
                .writes
                .chunks()
                .map(|c| c.segments().collect())
                .collect(),
            reply: lists.reply.map(|c| c.segments().collect()),
        }
    }
}

fn round_trip(h: &wire::Header<'_>) {
    let (lists, nomsg) = match h.body {
        Body::Msg { chunks, .. } => (chunks, false),
        Body::NoMsg { chunks } => (chunks, true),
        _ => return,
    };
    let owned = Owned::of(&lists);
    let writes: Vec<&[Segment]> = owned.writes.iter().map(|w| &w[..]).collect();
    let lists_ref = ChunkListsRef {
        reads: &owned.reads,
        writes: &writes,
        reply: owned.reply.as_deref(),
    };
    let out = Outgoing {
        xid: h.xid,
        credits: h.credits,
        direction: if h.response == Some(true) {
            Direction::Reply
        } else {
            Direction::Call
        },
        body: if nomsg {
            BodyRef::NoMsg(lists_ref)
        } else {
            BodyRef::Msg(lists_ref)
        },
    };
    let len = wire::header_len(h.revision, &lists_ref).unwrap();
    let mut buf = vec![0u8; len];
    assert_eq!(wire::encode(h.revision, &mut buf, &out), Ok(len));
    let limits = ChunkLimits {
        max_read_chunks: u32::MAX,
        max_write_chunks: u32::MAX,
        max_segments: u32::MAX,
        max_header_segments: u32::MAX,
    };
    let again = wire::decode(&buf, &limits).unwrap();
    assert_eq!((again.revision, again.xid), (h.revision, h.xid));
    assert_eq!(
        again
            .chunks()
            .map(Owned::of)
            .map(|o| (o.reads, o.writes, o.reply)),
        Some((owned.reads, owned.writes, owned.reply))
    );
}

fuzz_target!(|data: &[u8]| {
    let limits = ChunkLimits::DEFAULT;
    match wire::decode(data, &limits) {
        Ok(h) => {
            assert!(h.header_len <= data.len());
            if let Some(call) = wire::inline_reverse_call(&h) {
                assert!(h.header_len + call.len() == data.len());
            }
            round_trip(&h);
        }
        Err(f) => reply_encodes(&f),
    }
    for revision in [Revision::V1, Revision::V2Draft01] {
        match wire::decode_at_client(data, revision, true, &limits) {
            Ok(Received::VersionError { range, .. }) => assert!(range.low <= range.high),
            Ok(Received::Header(h)) => assert!(h.header_len <= data.len()),
            Err(f) => reply_encodes(&f),
        }
    }
    for settled in [None, Some(Version::V1), Some(Version::V2)] {
        match wire::admit_message(data, settled, VersionRange::V1_AND_V2) {
            Ok(v) => {
                assert!(settled.is_none() || settled == Some(v));
                let revision = Revision::of(v);
                match wire::decode_as(revision, data, &limits, VersionRange::V1_AND_V2)
                    .and_then(|h| wire::check_call(&h).map(|()| h))
                {
                    Ok(h) => assert_eq!(h.revision, revision),
                    Err(f) => {
                        if let Some(r) = f.reply() {
                            let v1 = matches!(r.body, ErrorBody::V1(_));
                            assert_eq!(v1, revision == Revision::V1);
                        }
                        reply_encodes(&f);
                    }
                }
            }
            Err(f) => {
                if let (Some(s), Some(r)) = (settled, f.reply()) {
                    assert_eq!(matches!(r.body, ErrorBody::V1(_)), s == Version::V1);
                }
                reply_encodes(&f);
            }
        }
    }
});
