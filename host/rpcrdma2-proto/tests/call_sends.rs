// SPDX-License-Identifier: GPL-2.0

//! Version 2 Calls over several Sends (Message Continuation): `plan_sends`
//! keeps what fits one Send whole as `plan_v1` plans it, sends a Call whole
//! over the Sends allowed when it fits them (its bulk data included), else
//! keeps a Read chunk that fits one Send, else sends the Call reduced by its
//! Read chunk over several Sends, else at Position Zero; `fragment_ranges`
//! cuts the inline bytes so that a Responder concatenating the fragments
//! (the protocol core's `Reassembler` fed the encoded messages) gets the
//! inline part back.

use proptest::prelude::*;
use rpcrdma2_proto::proto::call_plan::*;
use rpcrdma2_proto::proto::chunk::{ChunkLimits, ChunkListsRef};
use rpcrdma2_proto::proto::continuation::{
    plan_fragments, Reassembled, Reassembler, SliceStorage, MAX_SENT_FRAGMENTS, RECEIVE_LIMITS,
};
use rpcrdma2_proto::proto::v2::EMPTY_MSG_HEADER_LEN;
use rpcrdma2_proto::proto::wire::{self, BodyRef, Credits, Direction, Outgoing, Revision};

/// The client's reserve for the header of the Send with the chunks.
const RESERVE: usize = 256;

fn layout(call_len: usize, call_ddp: Option<DdpItem>) -> CallLayout {
    CallLayout {
        call_len,
        call_ddp,
        reply_max: 512,
        reply_ddp: None,
    }
}

/// The thresholds and room of a peer receiving `limit` bytes inline.
fn peer(limit: usize, max_sends: usize) -> (PlanThresholds, ContinuationRoom) {
    (
        PlanThresholds {
            send: limit - RESERVE,
            recv: 4096 - RESERVE,
        },
        ContinuationRoom {
            limit,
            final_header: RESERVE,
            max_sends,
        },
    )
}

#[test]
fn a_long_call_goes_over_several_sends() {
    // The 3,000-byte symlink of scenario 19, to a server receiving 1024 bytes.
    let l = layout(3300, None);
    let (t, room) = peer(1024, MAX_SENT_FRAGMENTS);
    assert_eq!(
        plan_v1(&l, &t).unwrap().call,
        CallChunks::PositionZero { len: 3300 }
    );
    let s = plan_sends(&l, &t, Some(&room)).unwrap();
    assert_eq!(s.plan.call, CallChunks::Inline);
    assert_eq!(s.plan.reply, ReplyChunks::Inline);
    let f = s.fragments.unwrap();
    // The last Send carries 1024 - 256 bytes; the others 1024 - 36 each.
    assert_eq!(f.count(), 4);
    let all: Vec<_> = f.fragments().collect();
    assert!(all[..3]
        .iter()
        .all(|x| x.more && x.len <= 1024 - EMPTY_MSG_HEADER_LEN));
    assert!(!all[3].more && all[3].len == 1024 - RESERVE);
    assert_eq!(all.iter().map(|x| x.len).sum::<usize>(), 3300);
}

#[test]
fn small_bulk_data_goes_in_the_sends() {
    // A symlink's 3,000-byte target in pages flagged for a Read chunk, which Version 1 uses.
    let l = layout(
        3300,
        Some(DdpItem {
            position: 200,
            len: 3000,
        }),
    );
    let (t, room) = peer(1024, MAX_SENT_FRAGMENTS);
    assert!(matches!(
        plan_v1(&l, &t).unwrap().call,
        CallChunks::ReadChunk { .. }
    ));
    let s = plan_sends(&l, &t, Some(&room)).unwrap();
    assert_eq!(s.plan.call, CallChunks::Inline);
    assert_eq!(s.fragments.map(|f| f.count()), Some(4));
    // Two Sends hold less: the Read chunk stays.
    let two = ContinuationRoom {
        max_sends: 2,
        ..room
    };
    let s = plan_sends(&l, &t, Some(&two)).unwrap();
    assert_eq!((s.plan, s.fragments), (plan_v1(&l, &t).unwrap(), None));
}

#[test]
fn what_fits_one_send_is_planned_as_version_1() {
    let (t, room) = peer(1024, MAX_SENT_FRAGMENTS);
    for l in [
        layout(768, None),
        // The Call without its data fits: a Read chunk, one Send.
        layout(
            8192 + 100,
            Some(DdpItem {
                position: 100,
                len: 8192,
            }),
        ),
    ] {
        let s = plan_sends(&l, &t, Some(&room)).unwrap();
        assert_eq!(s.fragments, None);
        assert_eq!(s.plan, plan_v1(&l, &t).unwrap());
    }
}

#[test]
fn without_room_or_beyond_it_the_call_goes_at_position_zero() {
    let l = layout(3300, None);
    let (t, room) = peer(1024, MAX_SENT_FRAGMENTS);
    let v1 = plan_v1(&l, &t).unwrap();
    assert_eq!(plan_sends(&l, &t, None).unwrap().plan, v1);
    assert_eq!(plan_sends(&l, &t, None).unwrap().fragments, None);
    // Two Sends hold 768 + 988 bytes.
    let two = ContinuationRoom {
        max_sends: 2,
        ..room
    };
    let s = plan_sends(&l, &t, Some(&two)).unwrap();
    assert_eq!((s.plan, s.fragments), (v1, None));
    let one = ContinuationRoom {
        max_sends: 1,
        ..room
    };
    assert_eq!(plan_sends(&l, &t, Some(&one)).unwrap().fragments, None);
    // 768 + 3 * 988 = 3732 bytes fit four Sends, one more does not.
    let s = plan_sends(&layout(3732, None), &t, Some(&room)).unwrap();
    assert_eq!(s.fragments.map(|f| f.count()), Some(4));
    let s = plan_sends(&layout(3736, None), &t, Some(&room)).unwrap();
    assert!(matches!(s.plan.call, CallChunks::PositionZero { .. }));
    assert_eq!(s.fragments, None);
}

#[test]
fn a_call_too_long_whole_is_continued_reduced() {
    // 2,000 bytes besides 64 KiB of data: the rest does not fit one Send of 1024.
    let data = DdpItem {
        position: 1000,
        len: 65536,
    };
    let l = layout(2000 + 65536, Some(data));
    let (t, room) = peer(1024, MAX_SENT_FRAGMENTS);
    let s = plan_sends(&l, &t, Some(&room)).unwrap();
    assert_eq!(
        s.plan.call,
        CallChunks::ReadChunk {
            position: 1000,
            len: 65536
        }
    );
    assert_eq!(s.fragments.map(|f| f.count()), Some(3));
    // Too much besides the data for four Sends, and the whole far more: Position Zero.
    let l = layout(9000 + 65536, Some(data));
    let s = plan_sends(&l, &t, Some(&room)).unwrap();
    assert!(matches!(s.plan.call, CallChunks::PositionZero { .. }));
    assert_eq!(s.fragments, None);
}

#[test]
fn bad_layouts_fail_whatever_the_room() {
    let (t, room) = peer(1024, MAX_SENT_FRAGMENTS);
    let l = layout(
        3300,
        Some(DdpItem {
            position: 2,
            len: 8,
        }),
    );
    assert_eq!(plan_sends(&l, &t, Some(&room)), Err(PlanError::Misaligned));
}

fn valid_layout() -> impl Strategy<Value = CallLayout> {
    (1usize..1200, 0usize..20_000, 0usize..2000, any::<bool>()).prop_map(
        |(head_words, len, tail, has_ddp)| {
            let position = head_words * 4;
            let total = position + len.next_multiple_of(4) + tail;
            layout(total, has_ddp.then_some(DdpItem { position, len }))
        },
    )
}

proptest! {
    /// Without room, exactly `plan_v1`; with it, `plan_v1` unless the whole
    /// Call does not fit one Send: then it goes whole over several if it fits
    /// them, else Version 1's Read chunk stays, else reduced over several
    /// Sends, else at Position Zero.
    #[test]
    fn only_what_does_not_fit_whole_changes(l in valid_layout(), limit in 300usize..5000, sends in 0usize..6) {
        let (t, room) = peer(limit, sends);
        let v1 = plan_v1(&l, &t).unwrap();
        let none = plan_sends(&l, &t, None).unwrap();
        prop_assert_eq!((none.plan, none.fragments), (v1, None));
        let s = plan_sends(&l, &t, Some(&room)).unwrap();
        prop_assert_eq!(s.plan.reply, v1.reply);
        let whole_fits = plan_fragments(l.call_len, limit, RESERVE, sends).is_ok();
        match (v1.call, s.plan.call, s.fragments) {
            (CallChunks::Inline, _, _) => prop_assert_eq!((s.plan, s.fragments), (v1, None)),
            (_, CallChunks::Inline, Some(f)) => {
                prop_assert!(whole_fits && f.count() > 1 && f.count() <= sends);
            }
            (CallChunks::ReadChunk { .. }, _, f) => {
                prop_assert!(!whole_fits && f.is_none() && s.plan == v1);
            }
            (CallChunks::PositionZero { .. }, CallChunks::ReadChunk { .. }, Some(f)) => {
                prop_assert!(!whole_fits && f.count() > 1 && f.count() <= sends);
            }
            (CallChunks::PositionZero { .. }, _, f) => {
                prop_assert!(!whole_fits && f.is_none() && s.plan == v1);
            }
        }
    }

    /// Each Send fits the peer's limit, and a Responder that feeds the encoded
    /// messages to its reassembler gets the inline part of the Call back, with
    /// the chunks of the last message only.
    #[test]
    fn a_responder_reassembles_the_call(l in valid_layout(), limit in 300usize..5000, seed: u8) {
        let (t, room) = peer(limit, MAX_SENT_FRAGMENTS);
        let s = plan_sends(&l, &t, Some(&room)).unwrap();
        let Some(f) = s.fragments else { return Ok(()) };
        let xid = 0x1234_5678u32;
        let mut call: Vec<u8> = (0..l.call_len).map(|i| (i as u8).wrapping_mul(29) ^ seed).collect();
        call[..4].copy_from_slice(&xid.to_be_bytes());
        let ranges = inline_ranges(&l, &s.plan);
        let inline: Vec<u8> = ranges.iter().flat_map(|r| call[r.clone()].to_vec()).collect();
        let mut storage = vec![0u8; RECEIVE_LIMITS.max_len];
        let mut r = Reassembler::new(SliceStorage::new(&mut storage[..]), RECEIVE_LIMITS);
        let (mut fed, mut done) = (0, false);
        for fragment in f.fragments() {
            let body = if fragment.more { BodyRef::Fragment } else { BodyRef::Msg(ChunkListsRef::EMPTY) };
            let out = Outgoing { xid, credits: Credits { granted: 64, max: 64 }, direction: Direction::Call, body };
            let mut msg = vec![0u8; limit.max(RESERVE) + 4096];
            let n = wire::encode(Revision::V2Draft01, &mut msg, &out).unwrap();
            let room = if fragment.more { EMPTY_MSG_HEADER_LEN } else { RESERVE };
            prop_assert!(n <= room);
            msg.truncate(n);
            for range in fragment_ranges(&ranges, &fragment) {
                prop_assert!(range.start <= range.end && range.end <= l.call_len);
                msg.extend_from_slice(&call[range]);
            }
            let used = if fragment.more { n } else { RESERVE };
            prop_assert!(used + fragment.len <= limit);
            let header = wire::decode(&msg, &ChunkLimits::DEFAULT).unwrap();
            match r.accept_part(header.part()).unwrap() {
                Reassembled::Pending => prop_assert!(fragment.more),
                Reassembled::Complete { xid: x, fragments } => {
                    prop_assert!(!fragment.more);
                    prop_assert_eq!(x, xid);
                    prop_assert_eq!(fragments as usize, f.count());
                    done = true;
                }
                other => prop_assert!(false, "{:?}", other),
            }
            fed += 1;
        }
        prop_assert!(done && fed == f.count());
        prop_assert_eq!(r.storage().data(), &inline[..]);
    }

    /// The cut ranges lie within the inline ranges and, in order, cover
    /// each fragment's length, whatever the arguments.
    #[test]
    fn fragment_ranges_stay_within(a in 0usize..100, b in 0usize..100, c in 0usize..100, d in 0usize..100, offset in 0usize..400, len in 0usize..400) {
        let (r0, r1) = (a.min(b)..a.max(b), (a.max(b) + c)..(a.max(b) + c + d));
        let inline = [r0.clone(), r1.clone()];
        let f = rpcrdma2_proto::proto::continuation::Fragment { offset, len, more: true };
        let [x, y] = fragment_ranges(&inline, &f);
        prop_assert!(x.start >= r0.start && x.end <= r0.end && x.start <= x.end);
        prop_assert!(y.start >= r1.start && y.end <= r1.end && y.start <= y.end);
        let total = r0.len() + r1.len();
        let expect = offset.min(total).max(offset.saturating_add(len).min(total)) - offset.min(total);
        prop_assert_eq!(x.len() + y.len(), expect);
    }
}
