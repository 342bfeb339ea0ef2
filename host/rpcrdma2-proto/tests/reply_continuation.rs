// SPDX-License-Identifier: GPL-2.0

//! A Version 2 Requester relies on Message Continuation instead of a Reply
//! chunk for moderately sized Replies: `rely_on_continuation` at the edges
//! of what the Responder's split (`plan_fragments`) holds.

use rpcrdma2_proto::proto::{
    call_plan::{
        continuation_holds, plan_v1, rely_on_continuation, CallLayout, CallPlan, DdpItem,
        PlanThresholds, ReplyChunks, ReplyContinuation,
    },
    continuation::{plan_fragments, MAX_SENT_FRAGMENTS},
    v2::EMPTY_MSG_HEADER_LEN,
};

const RESERVE: usize = 256;

fn continuation(threshold: usize) -> ReplyContinuation {
    ReplyContinuation {
        threshold,
        final_header_len: EMPTY_MSG_HEADER_LEN,
        max_sends: MAX_SENT_FRAGMENTS,
    }
}

fn layout(reply_max: usize, reply_ddp: Option<DdpItem>) -> CallLayout {
    CallLayout {
        call_len: 200,
        call_ddp: None,
        reply_max,
        reply_ddp,
    }
}

/// The largest Reply `MAX_SENT_FRAGMENTS` Sends of `threshold` bytes carry.
fn largest(threshold: usize) -> usize {
    MAX_SENT_FRAGMENTS * (threshold - EMPTY_MSG_HEADER_LEN)
}

fn planned(reply_max: usize, threshold: usize) -> CallPlan {
    let t = PlanThresholds {
        send: threshold - RESERVE,
        recv: threshold - RESERVE,
    };
    plan_v1(&layout(reply_max, None), &t).unwrap()
}

#[test]
fn largest_continued_reply_needs_no_reply_chunk() {
    for threshold in [1024, 4096] {
        let max = largest(threshold);
        let c = continuation(threshold);
        assert!(continuation_holds(max, &c));
        assert!(!continuation_holds(max + 1, &c));
        // The Responder's split of exactly that length takes every Send.
        let plan = plan_fragments(max, threshold, EMPTY_MSG_HEADER_LEN, MAX_SENT_FRAGMENTS);
        assert_eq!(plan.map(|p| p.count()), Ok(MAX_SENT_FRAGMENTS));

        let v1 = planned(max, threshold);
        assert!(matches!(v1.reply, ReplyChunks::ReplyChunk { .. }));
        let v2 = rely_on_continuation(&layout(max, None), v1, &c);
        assert_eq!(v2.reply, ReplyChunks::Inline);
        assert_eq!(v2.call, v1.call);

        let v1 = planned(max + 1, threshold);
        let v2 = rely_on_continuation(&layout(max + 1, None), v1, &c);
        assert_eq!(v2, v1);
        assert!(matches!(v2.reply, ReplyChunks::ReplyChunk { .. }));
    }
}

#[test]
fn client_of_1024_bytes_continues_replies_up_to_3952() {
    // The second pass of scenario 19: a client whose receive threshold is 1024 bytes.
    assert_eq!(largest(1024), 3952);
    let c = continuation(1024);
    for reply_max in [769, 1024, 2048, 3952] {
        let v1 = planned(reply_max, 1024);
        assert_eq!(
            v1.reply,
            ReplyChunks::ReplyChunk {
                len: reply_max as u32
            }
        );
        assert_eq!(
            rely_on_continuation(&layout(reply_max, None), v1, &c).reply,
            ReplyChunks::Inline
        );
    }
    // A page of READLINK target after its header, and a READDIR buffer, keep theirs.
    for reply_max in [4096 + 120, 32768] {
        let v1 = planned(reply_max, 1024);
        assert_eq!(rely_on_continuation(&layout(reply_max, None), v1, &c), v1);
    }
}

#[test]
fn inline_plans_are_kept() {
    let c = continuation(1024);
    let small = planned(500, 1024);
    assert_eq!(small.reply, ReplyChunks::Inline);
    assert_eq!(rely_on_continuation(&layout(500, None), small, &c), small);
}

/// The plan of a READ of `data` bytes whose Reply has `head` bytes before the data and
/// `tail` after it, under `threshold`.
fn read_plan(head: usize, data: usize, tail: usize, threshold: usize) -> (CallLayout, CallPlan) {
    let item = DdpItem {
        position: head,
        len: data,
    };
    let l = layout(head + data + tail, Some(item));
    let t = PlanThresholds {
        send: threshold - RESERVE,
        recv: threshold - RESERVE,
    };
    (l, plan_v1(&l, &t).unwrap())
}

#[test]
fn write_chunks_stay() {
    // A 4 KiB READ over NFSv3 (116 bytes before the data, 4 after), which would fit two Sends
    // of 4096 bytes, a 2000-byte one under a threshold of 1024, and a 1 MiB one.
    for (data, threshold) in [(4096, 4096), (2000, 1024), (1 << 20, 4096)] {
        let (l, v1) = read_plan(116, data, 4, threshold);
        assert_eq!(v1.reply, ReplyChunks::WriteChunk { len: data as u32 });
        assert_eq!(rely_on_continuation(&l, v1, &continuation(threshold)), v1);
    }
}

#[test]
fn no_continuation_without_room() {
    // One Send only, or a threshold that leaves no payload room: the Reply chunk stays.
    let one = ReplyContinuation {
        max_sends: 1,
        ..continuation(1024)
    };
    let v1 = planned(2000, 1024);
    assert_eq!(rely_on_continuation(&layout(2000, None), v1, &one), v1);
    let tiny = ReplyContinuation {
        threshold: EMPTY_MSG_HEADER_LEN,
        ..continuation(1024)
    };
    assert_eq!(rely_on_continuation(&layout(2000, None), v1, &tiny), v1);
    assert!(!continuation_holds(usize::MAX, &continuation(4096)));
}
