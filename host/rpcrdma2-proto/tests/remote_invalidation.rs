// SPDX-License-Identifier: GPL-2.0

//! Remote Invalidation: what a Responder invalidates with a reply's Send in each version
//! (RFC 8797 for Version 1, draft-01 section 6.2.4 for Version 2), the `rdma_inv_handle` a
//! Requester sends and reads back, and how a Requester matches a received invalidation.

mod common;
use common::*;
use proto::chunk::{ChunkLimits, ChunkLists, ChunkListsRef, ReadSegment, Segment};
use proto::remote_invalidation::*;
use proto::wire::*;

fn seg(handle: u32) -> Segment {
    Segment {
        handle,
        length: 0x1000,
        offset: 0x1_0000_0000,
    }
}

fn call(body: BodyRef<'_>) -> Outgoing<'_> {
    Outgoing {
        xid: 0x1234,
        credits: Credits { granted: 8, max: 8 },
        direction: Direction::Call,
        body,
    }
}

/// Encodes a call with `lists` soliciting `inv_handle`, decodes it, and passes the result to
/// `f`.
fn through_wire<R>(
    revision: Revision,
    lists: ChunkListsRef<'_>,
    inv_handle: u32,
    f: impl FnOnce(&Header<'_>) -> R,
) -> R {
    let mut buf = [0u8; 512];
    let n = encode_soliciting(revision, &mut buf, &call(BodyRef::Msg(lists)), inv_handle).unwrap();
    let h = decode(&buf[..n], &ChunkLimits::DEFAULT).unwrap();
    f(&h)
}

fn lists_of<'h>(h: &'h Header<'_>) -> ChunkLists<'h> {
    *h.chunks().unwrap()
}

#[test]
fn v1_invalidates_the_sole_region_of_a_peer_that_takes_it() {
    let write = [seg(7), seg(7)];
    let writes = [&write[..]];
    let lists = ChunkListsRef {
        writes: &writes,
        ..ChunkListsRef::EMPTY
    };
    through_wire(Revision::V1, lists, 0, |h| {
        assert_eq!(h.inv_handle, 0);
        let l = lists_of(h);
        assert_eq!(
            reply_invalidation(Revision::V1, true, 0, &l),
            ReplyInvalidation::Invalidate(7)
        );
        // Without the RFC 8797 flag, nothing.
        assert_eq!(
            reply_invalidation(Revision::V1, false, 0, &l),
            ReplyInvalidation::None
        );
        // A Version 1 header has no `rdma_inv_handle`: a value passed in plays no part.
        assert_eq!(
            reply_invalidation(Revision::V1, false, 7, &l),
            ReplyInvalidation::None
        );
    });
}

#[test]
fn v1_leaves_a_call_of_several_regions_to_the_requester() {
    let reads = [ReadSegment {
        position: 0,
        target: seg(3),
    }];
    let reply = [seg(4)];
    let lists = ChunkListsRef {
        reads: &reads,
        reply: Some(&reply),
        ..ChunkListsRef::EMPTY
    };
    through_wire(Revision::V1, lists, 0, |h| {
        assert_eq!(
            reply_invalidation(Revision::V1, true, 0, &lists_of(h)),
            ReplyInvalidation::None
        );
    });
}

#[test]
fn v2_invalidates_the_handle_the_call_names_and_only_that() {
    let reads = [ReadSegment {
        position: 0,
        target: seg(3),
    }];
    let reply = [seg(4), seg(5)];
    let lists = ChunkListsRef {
        reads: &reads,
        reply: Some(&reply),
        ..ChunkListsRef::EMPTY
    };
    for handle in [3, 4, 5] {
        through_wire(Revision::V2Draft01, lists, handle, |h| {
            assert_eq!(h.inv_handle, handle);
            let l = lists_of(h);
            // The RFC 8797 flag plays no part in Version 2.
            for flag in [false, true] {
                assert_eq!(
                    reply_invalidation(Revision::V2Draft01, flag, h.inv_handle, &l),
                    ReplyInvalidation::Invalidate(handle)
                );
            }
        });
    }
}

#[test]
fn v2_without_a_handle_is_a_plain_send_even_for_one_region() {
    let write = [seg(9)];
    let writes = [&write[..]];
    let lists = ChunkListsRef {
        writes: &writes,
        ..ChunkListsRef::EMPTY
    };
    through_wire(Revision::V2Draft01, lists, 0, |h| {
        assert_eq!(h.inv_handle, 0);
        let r = reply_invalidation(Revision::V2Draft01, true, h.inv_handle, &lists_of(h));
        assert_eq!(r, ReplyInvalidation::None);
        assert_eq!(r.handle(), None);
    });
}

#[test]
fn v2_a_handle_that_names_no_segment_is_never_invalidated() {
    let write = [seg(9)];
    let writes = [&write[..]];
    let lists = ChunkListsRef {
        writes: &writes,
        ..ChunkListsRef::EMPTY
    };
    // The decoder refuses such a header (BAD_XDR); the decision holds on its own too.
    through_wire(Revision::V2Draft01, lists, 9, |h| {
        let l = lists_of(h);
        let r = reply_invalidation(Revision::V2Draft01, true, 10, &l);
        assert_eq!(r, ReplyInvalidation::Unmatched(10));
        assert_eq!(r.handle(), None);
        assert_eq!(
            reply_invalidation(Revision::V2Draft01, true, 10, &ChunkLists::default()),
            ReplyInvalidation::Unmatched(10)
        );
    });
    let mut buf = [0u8; 512];
    let n = encode_soliciting(
        Revision::V2Draft01,
        &mut buf,
        &call(BodyRef::Msg(lists)),
        10,
    )
    .unwrap();
    assert!(decode(&buf[..n], &ChunkLimits::DEFAULT).is_err());
}

#[test]
fn requester_solicits_its_first_region_in_v2_only() {
    assert_eq!(solicited_handle(Revision::V2Draft01, [6, 7, 8]), 6);
    assert_eq!(solicited_handle(Revision::V2Draft01, []), 0);
    assert_eq!(solicited_handle(Revision::V1, [6, 7]), 0);
}

#[test]
fn v1_and_fragments_carry_no_handle() {
    let write = [seg(9)];
    let writes = [&write[..]];
    let lists = ChunkListsRef {
        writes: &writes,
        ..ChunkListsRef::EMPTY
    };
    let mut v1 = [0u8; 256];
    let mut plain = [0u8; 256];
    let n = encode_soliciting(Revision::V1, &mut v1, &call(BodyRef::Msg(lists)), 9).unwrap();
    let m = encode(Revision::V1, &mut plain, &call(BodyRef::Msg(lists))).unwrap();
    assert_eq!(v1[..n], plain[..m]);
    let n = encode_soliciting(Revision::V2Draft01, &mut v1, &call(BodyRef::Fragment), 9).unwrap();
    let h = decode(&v1[..n], &ChunkLimits::DEFAULT).unwrap();
    assert_eq!(h.inv_handle, 0);
}

#[test]
fn requester_matches_an_invalidation_to_the_calls_regions() {
    assert_eq!(invalidated_region(5, [4, 5, 6]), Some(1));
    assert_eq!(invalidated_region(7, [4, 5, 6]), None);
    assert_eq!(invalidated_region(7, []), None);
}
