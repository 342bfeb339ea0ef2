// SPDX-License-Identifier: GPL-2.0

//! The Requester's chunk plan: every branch of `plan_v1` at its exact
//! thresholds, the layout checks, the inline ranges of a reduced Call, the
//! placement of a Reply that used its Write chunk, the C client's choices
//! on captured traffic, and properties against a reference model and a
//! Responder's reassembly.

mod common;
use common::*;
use proptest::prelude::*;
use proto::call_plan::*;
use proto::v1::{self, V1Body, V1DecodeConfig, RDMA_MSG, RDMA_NOMSG};

fn item(position: usize, len: usize) -> Option<DdpItem> {
    Some(DdpItem { position, len })
}

fn layout(
    call_len: usize,
    call_ddp: Option<DdpItem>,
    reply_max: usize,
    reply_ddp: Option<DdpItem>,
) -> CallLayout {
    CallLayout {
        call_len,
        call_ddp,
        reply_max,
        reply_ddp,
    }
}

fn th(send: usize, recv: usize) -> PlanThresholds {
    PlanThresholds { send, recv }
}

fn plan(l: &CallLayout, send: usize, recv: usize) -> CallPlan {
    plan_v1(l, &th(send, recv)).unwrap()
}

// ---- Reply side ----

#[test]
fn reply_inline_up_to_the_threshold() {
    let l = layout(100, None, 1000, item(100, 800));
    assert_eq!(plan(&l, 1000, 1000).reply, ReplyChunks::Inline);
    assert_eq!(plan(&l, 1000, 5000).reply, ReplyChunks::Inline);
    assert_ne!(plan(&l, 1000, 999).reply, ReplyChunks::Inline);
}

#[test]
fn write_chunk_when_the_rest_is_below_the_threshold() {
    // reply_max 4200: head 100, pages 4096, tail 4.
    let l = layout(100, None, 4200, item(100, 4096));
    assert_eq!(
        plan(&l, 1000, 1024).reply,
        ReplyChunks::WriteChunk { len: 4096 }
    );
    // The non-bulk part is 104: the C's strict comparison.
    assert_eq!(
        plan(&l, 1000, 105).reply,
        ReplyChunks::WriteChunk { len: 4096 }
    );
    assert_eq!(
        plan(&l, 1000, 104).reply,
        ReplyChunks::ReplyChunk { len: 4200 }
    );
    assert_eq!(
        plan(&l, 1000, 0).reply,
        ReplyChunks::ReplyChunk { len: 4200 }
    );
}

#[test]
fn write_chunk_holds_the_data_without_padding() {
    // 4095 bytes of data, one byte of padding, then a 4-byte tail.
    let l = layout(100, None, 100 + 4095 + 1 + 4, item(100, 4095));
    assert_eq!(
        plan(&l, 1000, 1024).reply,
        ReplyChunks::WriteChunk { len: 4095 }
    );
}

#[test]
fn reply_chunk_without_bulk_data() {
    let l = layout(100, None, 7184, None);
    assert_eq!(
        plan(&l, 1000, 1024).reply,
        ReplyChunks::ReplyChunk { len: 7184 }
    );
    assert_eq!(plan(&l, 1000, 7184).reply, ReplyChunks::Inline);
}

#[test]
fn zero_length_reply_data_gets_a_reply_chunk() {
    let l = layout(100, None, 2000, item(100, 0));
    assert_eq!(
        plan(&l, 1000, 1024).reply,
        ReplyChunks::ReplyChunk { len: 2000 }
    );
}

// ---- Call side ----

#[test]
fn call_inline_up_to_the_threshold() {
    let l = layout(1024, item(100, 900), 100, None);
    assert_eq!(plan(&l, 1024, 4096).call, CallChunks::Inline);
    assert_eq!(plan(&l, usize::MAX, 4096).call, CallChunks::Inline);
    assert_ne!(plan(&l, 1023, 4096).call, CallChunks::Inline);
}

#[test]
fn read_chunk_when_the_reduced_call_fits() {
    // Head 112, 8192 bytes of data, tail 16: 8320 bytes, 128 of them inline.
    let l = layout(8320, item(112, 8192), 100, None);
    let read = CallChunks::ReadChunk {
        position: 112,
        len: 8192,
    };
    assert_eq!(plan(&l, 1024, 4096).call, read);
    assert_eq!(plan(&l, 128, 4096).call, read);
    assert_eq!(
        plan(&l, 127, 4096).call,
        CallChunks::PositionZero { len: 8320 }
    );
    assert_eq!(
        plan(&l, 0, 4096).call,
        CallChunks::PositionZero { len: 8320 }
    );
}

#[test]
fn read_chunk_leaves_out_the_padding() {
    // Head 112, 4093 bytes of data and 3 of padding, tail 16.
    let l = layout(112 + 4096 + 16, item(112, 4093), 100, None);
    let p = plan(&l, 128, 4096);
    assert_eq!(
        p.call,
        CallChunks::ReadChunk {
            position: 112,
            len: 4093
        }
    );
    assert_eq!(inline_ranges(&l, &p), [0..112, 4208..4224]);
}

#[test]
fn position_zero_without_bulk_data() {
    let l = layout(5000, None, 100, None);
    let p = plan(&l, 4096, 4096);
    assert_eq!(p.call, CallChunks::PositionZero { len: 5000 });
    assert_eq!(p.call.v1_proc(), RDMA_NOMSG);
    assert_eq!(inline_ranges(&l, &p), [0..0, 0..0]);
}

#[test]
fn zero_length_call_data_goes_position_zero() {
    let l = layout(5000, item(200, 0), 100, None);
    assert_eq!(
        plan(&l, 4096, 4096).call,
        CallChunks::PositionZero { len: 5000 }
    );
    assert_eq!(plan(&l, 5000, 4096).call, CallChunks::Inline);
}

#[test]
fn header_types() {
    assert_eq!(CallChunks::Inline.v1_proc(), RDMA_MSG);
    let read = CallChunks::ReadChunk {
        position: 4,
        len: 1,
    };
    assert_eq!(read.v1_proc(), RDMA_MSG);
    assert_eq!(CallChunks::PositionZero { len: 8 }.v1_proc(), RDMA_NOMSG);
}

#[test]
fn call_and_reply_choices_are_independent() {
    // A WRITE-like call and a READ-like reply in one request (no NFS
    // procedure does that, the plan allows it as the C does).
    let l = layout(8320, item(112, 8192), 4200, item(100, 4096));
    assert_eq!(
        plan(&l, 1024, 1024),
        CallPlan {
            call: CallChunks::ReadChunk {
                position: 112,
                len: 8192
            },
            reply: ReplyChunks::WriteChunk { len: 4096 },
        }
    );
    let l = layout(8320, None, 4200, None);
    assert_eq!(
        plan(&l, 1024, 1024),
        CallPlan {
            call: CallChunks::PositionZero { len: 8320 },
            reply: ReplyChunks::ReplyChunk { len: 4200 },
        }
    );
}

// ---- Layout checks ----

#[test]
fn largest_wire_lengths_are_planned() {
    let max = u32::MAX as usize;
    let l = layout(max, item(4, max - 4 - 3), max, item(8, max - 8 - 3));
    let p = plan(&l, 1024, 1024);
    assert_eq!(
        p.call,
        CallChunks::ReadChunk {
            position: 4,
            len: u32::MAX - 7
        }
    );
    assert_eq!(p.reply, ReplyChunks::WriteChunk { len: u32::MAX - 11 });
    let l = layout(max, None, max, None);
    assert_eq!(
        plan(&l, 0, 0),
        CallPlan {
            call: CallChunks::PositionZero { len: u32::MAX },
            reply: ReplyChunks::ReplyChunk { len: u32::MAX },
        }
    );
}

#[test]
#[cfg(target_pointer_width = "64")]
fn lengths_beyond_32_bits_are_too_large() {
    let big = u32::MAX as usize + 1;
    let e = Err(PlanError::TooLarge);
    let t = th(usize::MAX, usize::MAX);
    assert_eq!(plan_v1(&layout(big, None, 100, None), &t), e);
    assert_eq!(plan_v1(&layout(100, None, big, None), &t), e);
    assert_eq!(plan_v1(&layout(100, item(big, 0), 100, None), &t), e);
    assert_eq!(plan_v1(&layout(100, item(4, big), 100, None), &t), e);
    assert_eq!(plan_v1(&layout(100, None, 100, item(big, 0)), &t), e);
    assert_eq!(plan_v1(&layout(100, None, 100, item(4, big)), &t), e);
    let huge = usize::MAX;
    assert_eq!(plan_v1(&layout(huge, item(huge, huge), 0, None), &t), e);
}

#[test]
fn bad_positions() {
    let t = th(1 << 20, 1 << 20);
    for (position, e) in [
        (0, PlanError::ZeroPosition),
        (2, PlanError::Misaligned),
        (5, PlanError::Misaligned),
        (103, PlanError::Misaligned),
    ] {
        assert_eq!(
            plan_v1(&layout(200, item(position, 8), 100, None), &t),
            Err(e)
        );
        assert_eq!(
            plan_v1(&layout(100, None, 200, item(position, 8)), &t),
            Err(e)
        );
    }
}

#[test]
fn data_must_lie_within_its_message() {
    let t = th(1 << 20, 1 << 20);
    let oob = Err(PlanError::OutOfBounds);
    // Exactly to the end, with padding: fine.
    assert!(plan_v1(&layout(108, item(100, 8), 100, None), &t).is_ok());
    assert!(plan_v1(&layout(108, item(100, 5), 100, None), &t).is_ok());
    // The data fits, its padding does not.
    assert_eq!(plan_v1(&layout(105, item(100, 5), 100, None), &t), oob);
    assert_eq!(plan_v1(&layout(107, item(100, 5), 100, None), &t), oob);
    assert_eq!(plan_v1(&layout(104, item(100, 8), 100, None), &t), oob);
    assert_eq!(plan_v1(&layout(96, item(100, 0), 100, None), &t), oob);
    assert_eq!(plan_v1(&layout(100, None, 105, item(100, 5)), &t), oob);
    assert!(plan_v1(&layout(100, None, 108, item(100, 5)), &t).is_ok());
}

#[test]
fn errors_do_not_depend_on_thresholds() {
    let bad = layout(100, item(2, 8), 100, None);
    for t in [th(0, 0), th(100, 100), th(usize::MAX, usize::MAX)] {
        assert_eq!(plan_v1(&bad, &t), Err(PlanError::Misaligned));
    }
}

#[test]
fn the_call_is_checked_before_the_reply() {
    let t = th(0, 0);
    let l = layout(100, item(2, 8), 100, item(0, 8));
    assert_eq!(plan_v1(&l, &t), Err(PlanError::Misaligned));
    let l = layout(100, item(0, 8), 100, item(2, 8));
    assert_eq!(plan_v1(&l, &t), Err(PlanError::ZeroPosition));
    let l = layout(100, item(4, 8), 100, item(4, 200));
    assert_eq!(plan_v1(&l, &t), Err(PlanError::OutOfBounds));
}

// ---- Inline ranges ----

#[test]
fn inline_ranges_of_each_plan() {
    let l = layout(1000, item(100, 800), 100, None);
    let inline = CallPlan {
        call: CallChunks::Inline,
        reply: ReplyChunks::Inline,
    };
    assert_eq!(inline_ranges(&l, &inline), [0..1000, 1000..1000]);
    let read = CallPlan {
        call: CallChunks::ReadChunk {
            position: 100,
            len: 800,
        },
        ..inline
    };
    assert_eq!(inline_ranges(&l, &read), [0..100, 900..1000]);
    // Data up to the end of the Call: nothing after it.
    let l = layout(900, item(100, 797), 100, None);
    let read = CallPlan {
        call: CallChunks::ReadChunk {
            position: 100,
            len: 797,
        },
        ..inline
    };
    assert_eq!(inline_ranges(&l, &read), [0..100, 900..900]);
}

#[test]
fn inline_ranges_stay_within_the_call() {
    let l = layout(50, None, 100, None);
    let read = |position, len| CallPlan {
        call: CallChunks::ReadChunk { position, len },
        reply: ReplyChunks::Inline,
    };
    assert_eq!(inline_ranges(&l, &read(100, 8)), [0..50, 50..50]);
    assert_eq!(inline_ranges(&l, &read(40, 8)), [0..40, 48..50]);
    assert_eq!(inline_ranges(&l, &read(40, 20)), [0..40, 50..50]);
    assert_eq!(
        inline_ranges(&l, &read(u32::MAX, u32::MAX)),
        [0..50, 50..50]
    );
}

// ---- Reply placement ----

/// A READ-like Call: head 120, up to 4096 bytes of data, a 4-byte tail.
fn read_call() -> (CallLayout, CallPlan) {
    let l = layout(100, None, 120 + 4096 + 4, item(120, 4096));
    let p = plan(&l, 1024, 1024);
    assert_eq!(p.reply, ReplyChunks::WriteChunk { len: 4096 });
    (l, p)
}

#[test]
fn reply_without_written_data_is_inline() {
    let (l, p) = read_call();
    assert_eq!(
        place_reply(&l, &p, 104, 0),
        Ok(ReplyPlacement::Inline { len: 104 })
    );
    // An unused Write chunk, the data inline instead.
    assert_eq!(
        place_reply(&l, &p, 4220, 0),
        Ok(ReplyPlacement::Inline { len: 4220 })
    );
    assert_eq!(place_reply(&l, &p, 4221, 0), Err(ReplyError::TooLong));
    let inline = CallPlan {
        call: CallChunks::Inline,
        reply: ReplyChunks::Inline,
    };
    let r = place_reply(&l, &inline, 0, 0).unwrap();
    assert_eq!((r, r.reply_len()), (ReplyPlacement::Inline { len: 0 }, 0));
}

#[test]
fn placed_data_with_its_padding() {
    let (l, p) = read_call();
    // A short head: everything inline comes before the data.
    let r = place_reply(&l, &p, 104, 15).unwrap();
    assert_eq!(
        r,
        ReplyPlacement::Placed {
            head: 104,
            data: 15,
            pad: 1,
            tail: 0
        }
    );
    assert_eq!(r.reply_len(), 120);
    for (written, pad) in [(1, 3), (2, 2), (3, 1), (4, 0), (4096, 0), (4093, 3)] {
        let r = place_reply(&l, &p, 120, written).unwrap();
        assert_eq!(
            r,
            ReplyPlacement::Placed {
                head: 120,
                data: written as usize,
                pad,
                tail: 0
            }
        );
        assert_eq!(r.reply_len(), 120 + written as usize + pad);
    }
}

#[test]
fn inline_bytes_after_a_full_head_follow_the_data() {
    let (l, p) = read_call();
    let r = place_reply(&l, &p, 124, 4096).unwrap();
    assert_eq!(
        r,
        ReplyPlacement::Placed {
            head: 120,
            data: 4096,
            pad: 0,
            tail: 4
        }
    );
    assert_eq!(r.reply_len(), 4220);
    // The tail has room for 4 bytes: padding and inline bytes together.
    assert!(place_reply(&l, &p, 121, 4093).is_ok());
    assert_eq!(place_reply(&l, &p, 122, 4093), Err(ReplyError::TooLong));
    assert_eq!(place_reply(&l, &p, 125, 4096), Err(ReplyError::TooLong));
    assert_eq!(
        place_reply(&l, &p, usize::MAX, 4096),
        Err(ReplyError::TooLong)
    );
}

#[test]
fn padding_without_a_tail_needs_no_room() {
    // Pages of 4096 bytes and no tail at all.
    let l = layout(100, None, 120 + 4096, item(120, 4096));
    let p = plan(&l, 1024, 1024);
    let r = place_reply(&l, &p, 120, 15).unwrap();
    assert_eq!(
        r,
        ReplyPlacement::Placed {
            head: 120,
            data: 15,
            pad: 1,
            tail: 0
        }
    );
    assert_eq!(r.reply_len(), 136);
    // Inline bytes after the data need the tail.
    assert_eq!(place_reply(&l, &p, 124, 4096), Err(ReplyError::TooLong));
    // Data that fills the pages (then its padding is in the layout's tail).
    let l = layout(100, None, 120 + 4096, item(120, 4093));
    let p = plan(&l, 1024, 1024);
    let r = place_reply(&l, &p, 120, 4093).unwrap();
    assert_eq!(r.reply_len(), 120 + 4096);
}

#[test]
fn write_chunk_overruns() {
    let (l, p) = read_call();
    assert_eq!(place_reply(&l, &p, 120, 4097), Err(ReplyError::Overrun));
    assert_eq!(place_reply(&l, &p, 120, u64::MAX), Err(ReplyError::Overrun));
    // A plan claiming more than the layout's page part is held to the pages.
    let bigger = CallPlan {
        reply: ReplyChunks::WriteChunk { len: 8192 },
        ..p
    };
    assert_eq!(
        place_reply(&l, &bigger, 120, 4097),
        Err(ReplyError::Overrun)
    );
}

#[test]
fn written_data_without_a_write_chunk() {
    let (l, p) = read_call();
    for reply in [ReplyChunks::Inline, ReplyChunks::ReplyChunk { len: 4220 }] {
        let p = CallPlan { reply, ..p };
        assert_eq!(place_reply(&l, &p, 120, 1), Err(ReplyError::NoWriteChunk));
    }
    let l = CallLayout {
        reply_ddp: None,
        ..l
    };
    assert_eq!(place_reply(&l, &p, 120, 1), Err(ReplyError::NoWriteChunk));
}

// ---- The C client on the wire ----

struct Captured {
    xid: u32,
    payload: Vec<u8>,
    /// (position, length) of each Read chunk.
    reads: Vec<(u32, u64)>,
    /// Total length of each Write chunk.
    writes: Vec<u64>,
    reply: Option<u64>,
}

fn captured(name: &str) -> Captured {
    let bytes = std::fs::read(fixtures_dir().join("c-xprtrdma-siw").join(name)).unwrap();
    let h = v1::decode(&bytes, &V1DecodeConfig::default()).unwrap();
    let V1Body::Msg { chunks, payload } = h.body else {
        panic!("{name}: not RDMA_MSG");
    };
    Captured {
        xid: h.xid,
        payload: payload.to_vec(),
        reads: chunks
            .reads
            .chunks()
            .map(|c| (c.position, c.length()))
            .collect(),
        writes: chunks.writes.chunks().map(|c| c.length()).collect(),
        reply: chunks.reply.map(|c| c.length()),
    }
}

fn word_at(b: &[u8], offset: usize) -> u32 {
    u32::from_be_bytes(b[offset..offset + 4].try_into().unwrap())
}

/// NFSv4.1 and NFSv3 WRITEs of 300 KiB: the C client's Read chunk sits right
/// after the opaque's count, and the inline payload is the Call without the
/// data, which is what `inline_ranges` selects.
#[test]
fn c_client_read_chunks() {
    for (name, tail) in [("152-call.bin", 16), ("233-call.bin", 0)] {
        let c = captured(name);
        let [(position, len)] = c.reads[..] else {
            panic!("{name}: {:?}", c.reads);
        };
        let (position, len) = (position as usize, len as usize);
        assert_eq!(word_at(&c.payload, position - 4) as usize, len, "{name}");
        assert_eq!(c.payload.len(), position + tail, "{name}");
        let l = layout(
            c.payload.len() + len.next_multiple_of(4),
            item(position, len),
            200,
            None,
        );
        let p = plan(&l, c.payload.len(), 4096);
        assert_eq!(
            p.call,
            CallChunks::ReadChunk {
                position: position as u32,
                len: len as u32
            },
            "{name}"
        );
        let [head, rest] = inline_ranges(&l, &p);
        assert_eq!(head, 0..position, "{name}");
        assert_eq!(rest.len(), tail, "{name}");
        assert_eq!(rest.end, l.call_len, "{name}");
    }
}

/// READs answered through the Write chunk: the Write chunk the C client
/// provisioned is the page length (no room for padding), the Reply's inline
/// payload ends with the opaque's count, and the rebuilt Reply is the
/// inline payload, the data and its padding.
#[test]
fn c_client_write_chunks() {
    for (call, reply) in [
        ("202-call.bin", "084-reply.bin"),
        ("195-call.bin", "077-reply.bin"),
        ("217-call.bin", "115-reply.bin"),
    ] {
        let c = captured(call);
        let r = captured(reply);
        assert_eq!(c.xid, r.xid);
        let ([provisioned], [written]) = (&c.writes[..], &r.writes[..]) else {
            panic!("{call}: {:?}, {reply}: {:?}", c.writes, r.writes);
        };
        let inline_len = r.payload.len();
        assert_eq!(u64::from(word_at(&r.payload, inline_len - 4)), *written);
        // The head as large as the inline payload, a one-word tail for the
        // padding (the NFS client reserves it).
        let pages = *provisioned as usize;
        let l = layout(
            c.payload.len(),
            None,
            inline_len + pages + 4,
            item(inline_len, pages),
        );
        let p = plan(&l, 4096, 1024);
        assert_eq!(
            p.reply,
            ReplyChunks::WriteChunk {
                len: *provisioned as u32
            }
        );
        let placed = place_reply(&l, &p, inline_len, *written).unwrap();
        let data = *written as usize;
        assert_eq!(
            placed,
            ReplyPlacement::Placed {
                head: inline_len,
                data,
                pad: data.next_multiple_of(4) - data,
                tail: 0
            },
            "{reply}"
        );
        assert_eq!(placed.reply_len(), inline_len + data.next_multiple_of(4));
    }
}

/// Calls whose Reply chunk the C client registered over head, pages and
/// tail: the chunk is the whole receive buffer, `reply_max`.
#[test]
fn c_client_reply_chunks() {
    for name in [
        "120-call.bin",
        "151-call.bin",
        "159-call.bin",
        "237-call.bin",
    ] {
        let c = captured(name);
        let reply_max = c.reply.unwrap() as usize;
        assert!(c.reads.is_empty() && c.writes.is_empty());
        let l = layout(c.payload.len(), None, reply_max, None);
        assert_eq!(
            plan(&l, 4096, 4096 - 28),
            CallPlan {
                call: CallChunks::Inline,
                reply: ReplyChunks::ReplyChunk {
                    len: reply_max as u32
                },
            },
            "{name}"
        );
    }
}

// ---- Properties ----

/// The rules written once more, plainly, in 128-bit arithmetic.
fn reference(l: &CallLayout, t: &PlanThresholds) -> Result<CallPlan, PlanError> {
    let wide = |v: usize| v as u128;
    let fits = |v: usize| wide(v) <= u128::from(u32::MAX);
    let check = |d: &DdpItem, total: usize| -> Result<(), PlanError> {
        if !fits(d.position) || !fits(d.len) {
            Err(PlanError::TooLarge)
        } else if d.position == 0 {
            Err(PlanError::ZeroPosition)
        } else if d.position % 4 != 0 {
            Err(PlanError::Misaligned)
        } else if wide(d.position) + wide(d.len).next_multiple_of(4) > wide(total) {
            Err(PlanError::OutOfBounds)
        } else {
            Ok(())
        }
    };
    if !fits(l.call_len) || !fits(l.reply_max) {
        return Err(PlanError::TooLarge);
    }
    if let Some(d) = &l.call_ddp {
        check(d, l.call_len)?;
    }
    if let Some(d) = &l.reply_ddp {
        check(d, l.reply_max)?;
    }
    let reply = match l.reply_ddp {
        _ if l.reply_max <= t.recv => ReplyChunks::Inline,
        Some(d) if wide(l.reply_max) - wide(d.len) < wide(t.recv) => {
            ReplyChunks::WriteChunk { len: d.len as u32 }
        }
        _ => ReplyChunks::ReplyChunk {
            len: l.reply_max as u32,
        },
    };
    let call = match l.call_ddp {
        _ if l.call_len <= t.send => CallChunks::Inline,
        Some(d) if wide(l.call_len) - wide(d.len).next_multiple_of(4) <= wide(t.send) => {
            CallChunks::ReadChunk {
                position: d.position as u32,
                len: d.len as u32,
            }
        }
        _ => CallChunks::PositionZero {
            len: l.call_len as u32,
        },
    };
    Ok(CallPlan { call, reply })
}

/// A size drawn to hit the edges: small values, values around the 32-bit
/// limit, anything.
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..64,
        4 => 0usize..20_000,
        1 => (u32::MAX as usize - 16)..=(u32::MAX as usize + 16),
        1 => any::<usize>(),
    ]
}

fn ddp() -> impl Strategy<Value = Option<DdpItem>> {
    prop::option::of((size(), size()).prop_map(|(position, len)| DdpItem { position, len }))
}

/// A well-formed layout: aligned, in-bounds bulk data.
fn valid_layout() -> impl Strategy<Value = CallLayout> {
    let side = || {
        (1usize..64, 0usize..9000, 0usize..64, any::<bool>()).prop_map(
            |(head_words, len, tail, has_ddp)| {
                let position = head_words * 4;
                let total = position + len.next_multiple_of(4) + tail;
                (total, has_ddp.then_some(DdpItem { position, len }))
            },
        )
    };
    (side(), side()).prop_map(
        |((call_len, call_ddp), (reply_max, reply_ddp))| CallLayout {
            call_len,
            call_ddp,
            reply_max,
            reply_ddp,
        },
    )
}

proptest! {
    #[test]
    fn plan_matches_the_reference(
        call_len in size(), call_ddp in ddp(), reply_max in size(), reply_ddp in ddp(),
        send in size(), recv in size(),
    ) {
        let l = layout(call_len, call_ddp, reply_max, reply_ddp);
        let t = th(send, recv);
        prop_assert_eq!(plan_v1(&l, &t), reference(&l, &t));
    }

    #[test]
    fn valid_layouts_plan_as_the_reference(l in valid_layout(), send in 0usize..10_000, recv in 0usize..10_000) {
        let t = th(send, recv);
        let p = plan_v1(&l, &t).unwrap();
        prop_assert_eq!(Ok(p), reference(&l, &t));
    }

    /// What goes inline fits, and a Responder that reinserts the Read
    /// chunk's data and its padding at the position gets the Call back.
    #[test]
    fn a_responder_rebuilds_the_call(l in valid_layout(), send in 0usize..10_000, seed: u8) {
        let p = plan_v1(&l, &th(send, 0)).unwrap();
        let mut call: Vec<u8> = (0..l.call_len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
        if let Some(d) = l.call_ddp {
            // XDR padding is zeros.
            call[d.position + d.len..d.position + d.len.next_multiple_of(4)].fill(0);
        }
        let ranges = inline_ranges(&l, &p);
        let inline: Vec<u8> = ranges.iter().flat_map(|r| call[r.clone()].to_vec()).collect();
        prop_assert!(ranges[0].end <= ranges[1].start || ranges[1].is_empty());
        match p.call {
            CallChunks::Inline => {
                prop_assert!(l.call_len <= send);
                prop_assert_eq!(&inline, &call);
            }
            CallChunks::ReadChunk { position, len } => {
                prop_assert!(l.call_len > send && inline.len() <= send);
                let (position, len) = (position as usize, len as usize);
                prop_assert!(len > 0 && position % 4 == 0);
                let chunk = &call[position..position + len];
                let mut rebuilt = inline[..position].to_vec();
                rebuilt.extend_from_slice(chunk);
                rebuilt.resize(position + len.next_multiple_of(4), 0);
                rebuilt.extend_from_slice(&inline[position..]);
                prop_assert_eq!(&rebuilt, &call);
            }
            CallChunks::PositionZero { len } => {
                prop_assert!(l.call_len > send);
                prop_assert_eq!(len as usize, l.call_len);
                prop_assert!(inline.is_empty());
            }
        }
    }

    /// A Responder that reduces the Reply (data through the Write chunk,
    /// padding dropped, the rest inline) and a Requester that places it as
    /// told get the same Reply.
    #[test]
    fn a_requester_rebuilds_the_reply(
        l in valid_layout(), recv in 0usize..10_000,
        data_cut in prop_oneof![Just(0usize), 0usize..9000, Just(usize::MAX)],
        head_cut in prop_oneof![0usize..256, Just(usize::MAX)],
        tail_cut in prop_oneof![2 => Just(0usize), 3 => 1usize..64],
        seed: u8,
    ) {
        let p = plan_v1(&l, &th(usize::MAX, recv)).unwrap();
        let ReplyChunks::WriteChunk { len } = p.reply else { return Ok(()) };
        let d = l.reply_ddp.unwrap();
        prop_assert_eq!(len as usize, d.len);
        prop_assert!(l.reply_max - d.len < recv);
        // The actual Reply: a head no longer than the largest one, data no
        // longer than provisioned, padding, and a tail only after a full head.
        let data = data_cut.min(d.len);
        let head = if tail_cut > 0 { d.position } else { head_cut.min(d.position) };
        let tail_room = l.reply_max - d.position - d.len;
        let pad = data.next_multiple_of(4) - data;
        let tail = if tail_room > pad { tail_cut.min(tail_room - pad) } else { 0 };
        let byte = |i: usize| (i as u8).wrapping_mul(7) ^ seed;
        let mut reply: Vec<u8> = (0..head).map(byte).collect();
        reply.extend((0..data).map(|i| byte(i + 1000)));
        reply.resize(head + data.next_multiple_of(4), 0);
        reply.extend((0..tail).map(|i| byte(i + 50_000)));
        let inline: Vec<u8> = reply[..head].iter().chain(&reply[head + data.next_multiple_of(4)..]).copied().collect();
        let placed = place_reply(&l, &p, inline.len(), data as u64).unwrap();
        prop_assert_eq!(placed.reply_len(), reply.len());
        let rebuilt = match placed {
            ReplyPlacement::Inline { len } => {
                prop_assert_eq!(data, 0);
                inline[..len].to_vec()
            }
            ReplyPlacement::Placed { head, data: n, pad, tail } => {
                prop_assert_eq!(n, data);
                prop_assert!(head <= d.position);
                prop_assert!(tail == 0 || pad + tail <= tail_room);
                let mut v = inline[..head].to_vec();
                v.extend_from_slice(&reply[head..head + n]);
                v.extend(std::iter::repeat(0).take(pad));
                v.extend_from_slice(&inline[head..head + tail]);
                v
            }
        };
        prop_assert_eq!(rebuilt, reply);
    }

    /// More room never makes a plan heavier: raising a threshold turns a
    /// chunk into inline or keeps it.
    #[test]
    fn larger_thresholds_never_add_chunks(l in valid_layout(), send in 0usize..10_000, recv in 0usize..10_000, more in 0usize..10_000) {
        let small = plan_v1(&l, &th(send, recv)).unwrap();
        let large = plan_v1(&l, &th(send + more, recv + more)).unwrap();
        let weight = |p: &CallPlan| {
            let c = match p.call {
                CallChunks::Inline => 0,
                CallChunks::ReadChunk { .. } => 1,
                CallChunks::PositionZero { .. } => 2,
            };
            let r = match p.reply {
                ReplyChunks::Inline => 0,
                ReplyChunks::WriteChunk { .. } => 1,
                ReplyChunks::ReplyChunk { .. } => 2,
            };
            (c, r)
        };
        let (a, b) = (weight(&small), weight(&large));
        prop_assert!(b.0 <= a.0 && b.1 <= a.1);
    }

    #[test]
    fn placement_never_panics_and_stays_in_the_buffer(
        call_len in size(), call_ddp in ddp(), reply_max in size(), reply_ddp in ddp(),
        recv in size(), inline_len in size(), written in prop_oneof![0u64..10_000, any::<u64>()],
    ) {
        let l = layout(call_len, call_ddp, reply_max, reply_ddp);
        let Ok(p) = plan_v1(&l, &th(0, recv)) else { return Ok(()) };
        match place_reply(&l, &p, inline_len, written) {
            Ok(r) => prop_assert!(r.reply_len() <= reply_max),
            Err(ReplyError::NoWriteChunk) => {
                let provisioned = matches!(p.reply, ReplyChunks::WriteChunk { .. });
                prop_assert!(written > 0 && !provisioned);
            }
            Err(ReplyError::Overrun) => prop_assert!(written > 0),
            Err(ReplyError::TooLong) => {}
        }
    }
}
