// SPDX-License-Identifier: GPL-2.0

//! The Requester's chunk plan: how a Version 1 Call travels, and which
//! chunks it provisions for its Reply (RFC 8166 sections 3.4 and 3.5).
//!
//! A Requester decides everything before it sends the Call: the Responder
//! can only use the chunks the Call carries, and the Requester must have
//! registered the memory behind them. What it knows at that point is a
//! [`CallLayout`]: the length of the encoded Call and the largest Reply it
//! may get, and where each carries bulk data that may move by RDMA instead
//! of inline (the page part of an NFS WRITE call or READ reply). The rules
//! are those of the kernel's C client (`rpcrdma_marshal_req` in
//! `net/sunrpc/xprtrdma/rpc_rdma.c`), so that both clients put the same
//! chunks on the wire for the same Call:
//!
//! - **Reply.** No chunk when the largest Reply fits the receive threshold.
//!   Otherwise a Write chunk for the Reply's bulk data when there is some and
//!   the rest of the Reply is *below* the threshold (the C compares with
//!   `<`, one byte conservative; the strict test is kept so the choices are
//!   identical); otherwise a Reply chunk for the whole largest Reply.
//! - **Call.** Inline (`RDMA_MSG`) when the whole Call fits the send
//!   threshold. Otherwise `RDMA_MSG` with a Read chunk for the bulk data at
//!   its XDR position when there is some and the Call without that data
//!   fits; otherwise `RDMA_NOMSG` with a Position Zero Read chunk carrying
//!   the whole Call (RFC 8166 section 3.5.3, a Long Call).
//!
//! A Read chunk never holds the bulk data's XDR roundup padding, and the
//! padding is not sent inline either: the Responder restores it when it
//! reinserts the chunk (RFC 8166 sections 3.4.4 and 3.4.5; draft sections
//! 4.3.4.4 and 4.3.5.2).
//! [`inline_ranges`] says which bytes of the Call follow the header.
//!
//! A Write chunk is provisioned for the data only: RFC 8166 section 3.4.6
//! (draft section 4.3.6.2) forbids the Requester to add room for the
//! roundup, and the Responder to write it. The C client of 6.12 departs
//! from that when the page length is not a multiple of four: it appends a
//! four-byte segment over a per-connection scratch buffer, for Responders
//! that write the padding anyway. This plan does not: Linux svcrdma writes
//! exactly the data item's length. [`place_reply`] says how a Reply that
//! used the Write chunk is rebuilt, with the padding the Responder did not
//! send.
//!
//! Two more departures from the C, both towards a plan that always works:
//!
//! - The C takes a Read chunk whenever the Call has bulk data, trusting the
//!   upper layer that the rest of the Call fits; this plan checks it and
//!   falls back to Position Zero.
//! - The C also avoids inline Calls whose pages need more Send SGEs than
//!   the device has. That is a property of a transport that maps pages for
//!   Send, not of the protocol; a transport that copies the inline payload
//!   into one Send buffer has no such limit, and one that maps must apply
//!   it itself.
//!
//! Version 2 adds Message Continuation: a Responder may send a Reply over
//! several Sends. [`rely_on_continuation`] then drops a Reply chunk that
//! the Version 1 rules would provision for a Reply that fits those Sends.
//!
//! Data items are not placed directly when the RPC credential protects
//! integrity or privacy, which covers the unreduced message (draft section
//! 11.2.2.3; the C's `RPCAUTH_AUTH_DATATOUCH`): the caller then leaves
//! [`CallLayout::call_ddp`] and [`CallLayout::reply_ddp`] empty.
//!
//! **Version 2** adds Message Continuation (draft sections 4.4.2 and 6.3.2:
//! a sender should prefer it to a Special Format message). [`plan_sends`]
//! keeps the Version 1 plan when the whole Call fits one Send. Otherwise the
//! whole Call goes over several Sends when it fits them ([`ContinuationRoom`]),
//! its bulk data included: for the few KiB that fit, Sends cost less than
//! registering the data's pages, an RDMA Read and the invalidation, and
//! reducing is the sender's choice (section 4.4.2.1). A Call too long for
//! that keeps the Version 1 plan if it is a Read chunk (the rest fits one
//! Send); one that Version 1 would send at Position Zero goes reduced by its
//! Read chunk over several Sends if that fits, else at Position Zero.
//! [`fragment_ranges`] says which bytes of the Call each Send carries.
//!
//! Everything here is total: lengths that do not fit the 32-bit wire
//! fields, a bulk data item that is misaligned or lies outside its message,
//! or a Reply that disagrees with what was provisioned, are errors, never
//! panics or wrapped arithmetic.

use core::ops::Range;

use super::continuation::{plan_fragments, Fragment, FragmentPlan};
use super::payload_format::{choose_call_format, CallShape, PayloadFormat};
use super::v1::{RDMA_MSG, RDMA_NOMSG};
use super::xdr::{roundup, XDR_UNIT};

/// A bulk data item of an RPC message that may move by RDMA instead of
/// inline: an opaque's bytes, after the count that stays inline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DdpItem {
    /// Byte offset of the data in the message (the length of the
    /// `xdr_buf`'s head): a non-zero multiple of four.
    pub position: usize,
    /// Length of the data, without its XDR roundup padding; for a Reply,
    /// the largest length.
    pub len: usize,
}

impl DdpItem {
    /// Bytes of XDR roundup padding after the data (0 to 3).
    pub const fn pad(&self) -> usize {
        xdr_pad(self.len)
    }
}

/// What a Requester knows about a Call before it sends it (from the RPC
/// client's `xdr_buf`s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLayout {
    /// Bytes of the whole encoded Call (`rq_snd_buf.len`), with the bulk
    /// data's padding.
    pub call_len: usize,
    /// The Call's bulk data that may be pulled by RDMA Read (the page part
    /// of an NFS WRITE, flagged `XDRBUF_WRITE`), if any.
    pub call_ddp: Option<DdpItem>,
    /// The largest Reply the Call may get (`rq_rcv_buf.buflen`).
    pub reply_max: usize,
    /// The Reply's bulk data that may be pushed by RDMA Write (the page part
    /// of an NFS READ reply, flagged `XDRBUF_READ`), if any: its position is
    /// the head's length, its length the page part's.
    pub reply_ddp: Option<DdpItem>,
}

/// Inline thresholds, already net of the transport header the sender
/// reserves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanThresholds {
    /// The largest Call payload the peer receives inline.
    pub send: usize,
    /// The largest Reply payload we receive inline.
    pub recv: usize,
}

/// How the Call itself travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallChunks {
    /// The whole Call inline after an `RDMA_MSG` header.
    Inline,
    /// `RDMA_MSG` with one Read chunk for the bulk data; the inline payload
    /// is the Call without the data and its padding ([`inline_ranges`]).
    ReadChunk {
        /// XDR position of the data: its byte offset in the Call, a
        /// non-zero multiple of four.
        position: u32,
        /// Length of the data, without padding (never zero).
        len: u32,
    },
    /// `RDMA_NOMSG` with a Position Zero Read chunk carrying the whole Call.
    PositionZero {
        /// Length of the Call.
        len: u32,
    },
}

impl CallChunks {
    /// The Version 1 header type the Call goes with: `RDMA_NOMSG` for a
    /// Position Zero Read chunk, `RDMA_MSG` otherwise.
    pub const fn v1_proc(&self) -> u32 {
        match self {
            Self::PositionZero { .. } => RDMA_NOMSG,
            Self::Inline | Self::ReadChunk { .. } => RDMA_MSG,
        }
    }
}

/// Which chunk the Call provisions for the Reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyChunks {
    /// The largest Reply fits inline: no chunk.
    Inline,
    /// One Write chunk (the Write list's only one) for the Reply's bulk
    /// data; the rest of the Reply comes inline.
    WriteChunk {
        /// Bytes of the chunk: the data's largest length, no padding (never
        /// zero).
        len: u32,
    },
    /// A Reply chunk for the whole Reply.
    ReplyChunk {
        /// Bytes of the chunk: the largest Reply.
        len: u32,
    },
}

/// The chunks of one Call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallPlan {
    /// How the Call travels.
    pub call: CallChunks,
    /// What it provisions for the Reply.
    pub reply: ReplyChunks,
}

/// Why a [`CallLayout`] cannot be planned. These are the caller's mistakes
/// (or limits), never the peer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanError {
    /// A length or position does not fit its 32-bit wire field.
    TooLarge,
    /// A bulk data item at position zero: an RPC message starts with its
    /// header, and a Read chunk at position zero means the whole Call.
    ZeroPosition,
    /// A bulk data item whose position is not a multiple of four.
    Misaligned,
    /// A bulk data item that, with its padding, ends past its message.
    OutOfBounds,
}

/// Bytes of XDR roundup padding after `len` bytes of data.
const fn xdr_pad(len: usize) -> usize {
    (XDR_UNIT - len % XDR_UNIT) % XDR_UNIT
}

fn wire_len(v: usize) -> Result<u32, PlanError> {
    u32::try_from(v).map_err(|_| PlanError::TooLarge)
}

/// Checks `item` against a message of `total` bytes; returns its wire
/// position and length and the bytes the data and its padding take.
fn check_item(item: &DdpItem, total: usize) -> Result<(u32, u32, usize), PlanError> {
    let position = wire_len(item.position)?;
    let len = wire_len(item.len)?;
    if position == 0 {
        return Err(PlanError::ZeroPosition);
    }
    if item.position % XDR_UNIT != 0 {
        return Err(PlanError::Misaligned);
    }
    let padded = roundup(item.len).ok_or(PlanError::TooLarge)?;
    let end = item
        .position
        .checked_add(padded)
        .ok_or(PlanError::OutOfBounds)?;
    if end > total {
        return Err(PlanError::OutOfBounds);
    }
    Ok((position, len, padded))
}

/// Plans a Version 1 Call: see the module documentation for the rules.
///
/// The layout is checked whole before anything is decided, so a bad one
/// fails whatever the thresholds: first both lengths, then the Call's bulk
/// data item, then the Reply's.
pub fn plan_v1(layout: &CallLayout, t: &PlanThresholds) -> Result<CallPlan, PlanError> {
    let call_len = wire_len(layout.call_len)?;
    let reply_max = wire_len(layout.reply_max)?;
    let call_ddp = match &layout.call_ddp {
        Some(item) => Some(check_item(item, layout.call_len)?),
        None => None,
    };
    let reply_ddp = match &layout.reply_ddp {
        Some(item) => Some(check_item(item, layout.reply_max)?),
        None => None,
    };

    let reply = if layout.reply_max <= t.recv {
        ReplyChunks::Inline
    } else {
        match reply_ddp {
            // The non-bulk part (head and tail, with room for the padding).
            Some((_, len, _)) if layout.reply_max.saturating_sub(data_len(len)) < t.recv => {
                ReplyChunks::WriteChunk { len }
            }
            _ => ReplyChunks::ReplyChunk { len: reply_max },
        }
    };

    let call = if layout.call_len <= t.send {
        CallChunks::Inline
    } else {
        match call_ddp {
            Some((position, len, padded)) if layout.call_len.saturating_sub(padded) <= t.send => {
                CallChunks::ReadChunk { position, len }
            }
            _ => CallChunks::PositionZero { len: call_len },
        }
    };

    Ok(CallPlan { call, reply })
}

/// Room for a Version 2 Call over several Sends (Message Continuation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContinuationRoom {
    /// The largest message the peer receives inline (its `RBSIZ`), header included.
    pub limit: usize,
    /// Bytes kept for the header of the last Send, which carries the chunk lists; the others
    /// carry the header without chunks.
    pub final_header: usize,
    /// Most Sends one Call may take.
    pub max_sends: usize,
}

/// A Call's chunks and how its inline part goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendPlan {
    /// The chunks. With [`Self::fragments`], [`CallChunks::Inline`] (the whole Call is sent)
    /// or [`CallChunks::ReadChunk`] (the Call without its bulk data is sent).
    pub plan: CallPlan,
    /// The split of the inline part ([`inline_ranges`]) over several Sends, each but the last
    /// with `RDMA2_F_MORE` (Continued Format); `None` when one Send carries it.
    pub fragments: Option<FragmentPlan>,
}

/// Plans a Call as [`plan_v1`] does, then, when `room` allows Message Continuation (a
/// Version 2 connection) and the whole Call does not fit one Send: the whole Call over
/// several Sends if it fits them; else [`plan_v1`]'s Read chunk if it made one; else the Call
/// reduced by its Read chunk over several Sends if it has bulk data and that fits; else
/// [`plan_v1`]'s Position Zero. A Call that fits one Send whole never changes.
pub fn plan_sends(
    layout: &CallLayout,
    t: &PlanThresholds,
    room: Option<&ContinuationRoom>,
) -> Result<SendPlan, PlanError> {
    let single = plan_v1(layout, t)?;
    let one_send = SendPlan {
        plan: single,
        fragments: None,
    };
    let (CallChunks::ReadChunk { .. } | CallChunks::PositionZero { .. }, Some(room)) =
        (single.call, room)
    else {
        return Ok(one_send);
    };
    let reduced = match (&layout.call_ddp, single.call) {
        (Some(item), CallChunks::PositionZero { .. }) => {
            let (position, len, _) = check_item(item, layout.call_len)?;
            Some(CallChunks::ReadChunk { position, len })
        }
        // A Read chunk that fits one Send is kept; without data, nothing to reduce.
        _ => None,
    };
    for call in [Some(CallChunks::Inline), reduced].into_iter().flatten() {
        let plan = CallPlan {
            call,
            reply: single.reply,
        };
        let payload_len = inline_ranges(layout, &plan).iter().map(|r| r.len()).sum();
        let shape = CallShape {
            payload_len,
            header_len: room.final_header,
            threshold: room.limit,
            continuation: true,
            max_sends: room.max_sends,
        };
        if let PayloadFormat::Continued { .. } = choose_call_format(&shape) {
            if let Ok(fragments) =
                plan_fragments(payload_len, room.limit, room.final_header, room.max_sends)
            {
                return Ok(SendPlan {
                    plan,
                    fragments: Some(fragments),
                });
            }
        }
    }
    Ok(one_send)
}

/// The bytes of the Call that `fragment` of its inline part carries: `fragment` counts
/// offsets in the concatenation of `inline` (what [`inline_ranges`] gave), the result the
/// same ranges cut to it. Empty ranges are to be skipped; the result lies within `inline`
/// whatever the arguments.
pub fn fragment_ranges(inline: &[Range<usize>; 2], fragment: &Fragment) -> [Range<usize>; 2] {
    let start = fragment.offset;
    let end = start.saturating_add(fragment.len);
    let mut base = 0usize;
    let mut out = [0..0, 0..0];
    for (range, slot) in inline.iter().zip(out.iter_mut()) {
        let len = range.len();
        let top = base.saturating_add(len);
        let from = start.max(base).min(top).saturating_sub(base);
        let to = end.max(base).min(top).saturating_sub(base);
        *slot = range.start.saturating_add(from)..range.start.saturating_add(to);
        base = top;
    }
    out
}

fn data_len(len: u32) -> usize {
    usize::try_from(len).unwrap_or(usize::MAX)
}

/// The byte ranges of the Call that follow the transport header, in order:
/// the whole Call for [`CallChunks::Inline`]; for a Read chunk, the bytes
/// before the data (the `xdr_buf`'s head) and those after the data and its
/// padding (the tail without its leading pad); nothing for Position Zero.
///
/// Empty ranges are to be skipped. The ranges never overlap, come in
/// order, and lie within `0..layout.call_len` whatever the arguments (a
/// plan that was not made from `layout` is clamped to it); for a plan that
/// [`plan_v1`] made from `layout`, their total length fits the send
/// threshold it was given.
pub fn inline_ranges(layout: &CallLayout, plan: &CallPlan) -> [Range<usize>; 2] {
    let call_len = layout.call_len;
    match plan.call {
        CallChunks::Inline => [0..call_len, call_len..call_len],
        CallChunks::ReadChunk { position, len } => {
            let head = data_len(position).min(call_len);
            let skip = roundup(data_len(len)).unwrap_or(usize::MAX);
            let rest = head.saturating_add(skip).min(call_len);
            [0..head, rest..call_len]
        }
        CallChunks::PositionZero { .. } => [0..0, 0..0],
    }
}

/// How an `RDMA_MSG` Reply fills the Call's receive buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyPlacement {
    /// Nothing came by RDMA Write: the inline payload is the whole Reply,
    /// `len` bytes, to be spread over the receive buffer as any inline
    /// Reply (head, then pages, then tail).
    Inline {
        /// Length of the Reply.
        len: usize,
    },
    /// The Responder wrote the bulk data through the Write chunk: the Reply
    /// is the first `head` inline bytes (the receive buffer's head, trimmed
    /// to them), then the `data` bytes already in the pages, then `pad`
    /// bytes of XDR padding that neither the Send nor the Write carried,
    /// then the remaining `tail` inline bytes.
    ///
    /// When `tail` is not zero, the tail of the receive buffer gets `pad`
    /// bytes (their value does not matter; zeros) and then the `tail`
    /// inline bytes, so that these stay XDR aligned; [`place_reply`] made
    /// sure the tail has room for both. When it is zero, nothing needs
    /// writing: the Reply's length counts the padding and its decoder skips
    /// it (it lies in the pages after the data, or, when the data fills
    /// them, at the start of the tail, which the layout has room for).
    ///
    /// Version 1 does not say where in the Reply the data was: like the C
    /// client, this takes it to start where the head ends, or where the
    /// inline payload does if that is shorter (a Reply whose fields before
    /// the data are shorter than their largest size has nothing after it).
    Placed {
        /// Inline bytes before the data: `inline[..head]`.
        head: usize,
        /// Bytes written through the Write chunk.
        data: usize,
        /// Padding owed after the data (0 to 3).
        pad: usize,
        /// Inline bytes after the data: `inline[head..head + tail]`.
        tail: usize,
    },
}

impl ReplyPlacement {
    /// Length of the rebuilt Reply (what the RPC client decodes).
    pub const fn reply_len(&self) -> usize {
        match *self {
            Self::Inline { len } => len,
            Self::Placed {
                head,
                data,
                pad,
                tail,
            } => head
                .saturating_add(data)
                .saturating_add(pad)
                .saturating_add(tail),
        }
    }
}

/// Why a received Reply does not fit what its Call provisioned. These are
/// the peer's doing: the Reply is to be dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyError {
    /// Data came through a Write chunk the Call did not provision.
    NoWriteChunk,
    /// More data came through the Write chunk than it holds.
    Overrun,
    /// The rebuilt Reply does not fit the receive buffer.
    TooLong,
}

/// Says how an `RDMA_MSG` Reply to a Call planned as `plan` for `layout`
/// fills the receive buffer, given the length of its inline payload and
/// the total length of the Write chunk it returned (`written`, the sum of
/// the returned segment lengths; 0 if it returned none, or an unused one).
///
/// An `RDMA_NOMSG` Reply is not for this function: it came whole through
/// the Reply chunk, into the receive buffer itself.
pub fn place_reply(
    layout: &CallLayout,
    plan: &CallPlan,
    inline_len: usize,
    written: u64,
) -> Result<ReplyPlacement, ReplyError> {
    if written == 0 {
        if inline_len > layout.reply_max {
            return Err(ReplyError::TooLong);
        }
        return Ok(ReplyPlacement::Inline { len: inline_len });
    }
    let (ReplyChunks::WriteChunk { len }, Some(item)) = (plan.reply, layout.reply_ddp) else {
        return Err(ReplyError::NoWriteChunk);
    };
    let capacity = data_len(len).min(item.len);
    let data = usize::try_from(written).map_err(|_| ReplyError::Overrun)?;
    if data > capacity {
        return Err(ReplyError::Overrun);
    }
    let pad = xdr_pad(data);
    let head = inline_len.min(item.position);
    let tail = inline_len.saturating_sub(head);
    // What the receive buffer holds after its head and pages.
    let tail_room = layout
        .reply_max
        .saturating_sub(item.position)
        .saturating_sub(item.len);
    if tail > 0 && pad.saturating_add(tail) > tail_room {
        return Err(ReplyError::TooLong);
    }
    let placed = ReplyPlacement::Placed {
        head,
        data,
        pad,
        tail,
    };
    if placed.reply_len() > layout.reply_max {
        return Err(ReplyError::TooLong);
    }
    Ok(placed)
}

/// What a Version 2 Requester knows of the Sends a Continued Reply may take
/// (draft sections 4.4.2 and 6.2.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyContinuation {
    /// Our receive threshold: the largest message, header included, each of
    /// the Responder's Sends may be.
    pub threshold: usize,
    /// The transport header of the final Send. A Reply to a Call that
    /// provisioned no chunk for it returns none: an `RDMA2_MSG` with empty
    /// lists.
    pub final_header_len: usize,
    /// Most Sends one Continued Reply of the Responder takes.
    pub max_sends: usize,
}

/// Whether a Reply of `reply_max` bytes fits a Continued Reply under
/// `continuation`: the same split the Responder computes
/// ([`plan_fragments`]), so a Reply that fits here fits there when both
/// apply the same threshold.
pub fn continuation_holds(reply_max: usize, continuation: &ReplyContinuation) -> bool {
    plan_fragments(
        reply_max,
        continuation.threshold,
        continuation.final_header_len,
        continuation.max_sends,
    )
    .is_ok()
}

/// Drops the Reply chunk of `plan` when the largest Reply of `layout` fits
/// a Continued Reply: "When expecting small and moderately-sized Replies, a
/// Requester should rely on Message Continuation rather than provision a
/// Reply chunk" (draft section 4.4.2). This saves the registration and its
/// invalidation; the Responder sends such a Reply in at most
/// [`ReplyContinuation::max_sends`] Sends.
///
/// A Write chunk stays, even for a Reply that would fit two Sends (a READ of
/// a page): a Responder that bounds the continued Sends it has in flight by
/// the Requester's spare receives (ours does) then sends such Replies one or
/// two at a time, which measured slower at queue depth 16 than the Write
/// chunk's registration, Write and invalidation.
pub fn rely_on_continuation(
    layout: &CallLayout,
    plan: CallPlan,
    continuation: &ReplyContinuation,
) -> CallPlan {
    match plan.reply {
        ReplyChunks::ReplyChunk { .. } if continuation_holds(layout.reply_max, continuation) => {
            CallPlan {
                reply: ReplyChunks::Inline,
                ..plan
            }
        }
        _ => plan,
    }
}
