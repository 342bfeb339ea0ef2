// SPDX-License-Identifier: GPL-2.0

//! Telling forward-direction from reverse-direction traffic.
//!
//! One connection can carry Calls both ways (draft section 4.5, RFC 8167).
//! A receiver must route each incoming RPC message either to its own
//! pending Calls (a Reply) or to its service side (a Call). Version 2 says
//! which with `RDMA2_F_RESPONSE`, which must agree with the RPC message's
//! `msg_type`; version 1 has no flag, so the receiver peeks at the RPC
//! header that follows the transport header (RFC 8167 section 4). In both
//! cases the RPC XID must equal `rdma_xid` (draft section 7.2).
//!
//! [`check_reverse_support`] applies the peer's advertised reverse-direction
//! level (`RDMA2_PROPID_BRS`) to a reverse-direction message, and
//! [`reverse_sends`] tells what an endpoint may send in the reverse direction
//! from both sides' levels.

use super::continuation::MAX_REVERSE_FRAGMENTS;
use super::error::{V2Error, Violation};
use super::payload_format::PayloadFormat;
use super::properties::ReverseSupport;
use super::role::Endpoint;
use super::v1::{V1Body, V1Header};
use super::v2::EMPTY_MSG_HEADER_LEN;
use super::xdr::XdrReader;

/// RPC `msg_type` CALL.
pub const RPC_CALL: u32 = 0;
/// RPC `msg_type` REPLY.
pub const RPC_REPLY: u32 = 1;

/// The RPC message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcMsgType {
    /// A Call.
    Call,
    /// A Reply.
    Reply,
}

/// Where an incoming RPC message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A Call in the usual direction: to the server's service.
    ForwardCall,
    /// A Reply to one of the client's Calls.
    ForwardReply,
    /// A Call from the server to the client's callback service.
    ReverseCall,
    /// A Reply to one of the server's callback Calls.
    ReverseReply,
}

/// Reads the XID and `msg_type` at the start of an RPC message.
pub fn rpc_header(payload: &[u8]) -> Result<(u32, RpcMsgType), Violation> {
    let mut r = XdrReader::new(payload);
    let xid = r.u32().map_err(|_| Violation::BadRpcHeader)?;
    match r.u32().map_err(|_| Violation::BadRpcHeader)? {
        RPC_CALL => Ok((xid, RpcMsgType::Call)),
        RPC_REPLY => Ok((xid, RpcMsgType::Reply)),
        _ => Err(Violation::BadRpcHeader),
    }
}

/// The direction of a message of type `mtype` received by `local`.
pub const fn direction(local: Endpoint, mtype: RpcMsgType) -> Direction {
    match (local, mtype) {
        (Endpoint::Server, RpcMsgType::Call) => Direction::ForwardCall,
        (Endpoint::Client, RpcMsgType::Reply) => Direction::ForwardReply,
        (Endpoint::Client, RpcMsgType::Call) => Direction::ReverseCall,
        (Endpoint::Server, RpcMsgType::Reply) => Direction::ReverseReply,
    }
}

/// Classifies a v1 `RDMA_MSG` by peeking at its RPC header.
pub fn classify_v1(local: Endpoint, rdma_xid: u32, payload: &[u8]) -> Result<Direction, Violation> {
    let (xid, mtype) = rpc_header(payload)?;
    if xid != rdma_xid {
        return Err(Violation::XidMismatch);
    }
    Ok(direction(local, mtype))
}

/// The RPC Call of a received Version 1 message, if the message is a reverse-direction Call
/// in the form the Linux implementations use for NFSv4.1 callbacks (RFC 8167 section 4): an
/// `RDMA_MSG` with no chunks, so the whole Call inline, whose RPC XID is `rdma_xid` and whose
/// `msg_type` is CALL, as seen by a `local` that receives Calls in reverse (a client).
///
/// `None` for anything else (a Reply, a message with chunks, `RDMA_NOMSG`, a Call whose XID
/// differs or whose RPC header is cut short): that goes the forward way, where a Reply is
/// matched to its Call and anything else is dropped.
pub fn v1_inline_reverse_call<'a>(local: Endpoint, header: &V1Header<'a>) -> Option<&'a [u8]> {
    let V1Body::Msg { chunks, payload } = header.body else {
        return None;
    };
    if !chunks.is_empty() {
        return None;
    }
    match classify_v1(local, header.xid, payload) {
        Ok(Direction::ReverseCall) => Some(payload),
        _ => None,
    }
}

/// Classifies a v2 message by `RDMA2_F_RESPONSE`, cross-checking the RPC
/// header when the start of the payload is inline (`payload` is `None` for
/// Special Format or a later fragment). A mismatch is `RDMA2_ERR_BAD_XDR`.
pub fn classify_v2(
    local: Endpoint,
    rdma_xid: u32,
    response: bool,
    payload: Option<&[u8]>,
) -> Result<Direction, Violation> {
    let mtype = if response {
        RpcMsgType::Reply
    } else {
        RpcMsgType::Call
    };
    if let Some(p) = payload {
        let (xid, inner) = rpc_header(p)?;
        if xid != rdma_xid {
            return Err(Violation::XidMismatch);
        }
        if inner != mtype {
            return Err(Violation::DirectionMismatch);
        }
    }
    Ok(direction(local, mtype))
}

/// Checks a reverse-direction message against the receiver's advertised
/// support level. Chunks need `General`; Continued Format needs at least
/// `Continued`; anything needs at least `Simple`.
pub fn check_reverse_support(
    support: ReverseSupport,
    format: PayloadFormat,
    has_reads: bool,
    has_writes: bool,
    has_reply: bool,
) -> Result<(), V2Error> {
    if support == ReverseSupport::None {
        return Err(V2Error::System);
    }
    if support < ReverseSupport::General {
        if has_reads || matches!(format, PayloadFormat::Special) {
            return Err(V2Error::ReadChunks { max_chunks: 0 });
        }
        if has_writes {
            return Err(V2Error::WriteChunks { max_chunks: 0 });
        }
        if has_reply {
            return Err(V2Error::ReplyResource { length_needed: 0 });
        }
    }
    if support < ReverseSupport::Continued && matches!(format, PayloadFormat::Continued { .. }) {
        return Err(V2Error::InvalCont);
    }
    Ok(())
}

/// What an endpoint may send in the reverse direction on a connection: callbacks for a
/// server, the replies to them for a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReverseSends {
    /// Nothing: a side does not take reverse-direction messages.
    Nothing,
    /// Simple Format messages without chunks, each within the peer's receive buffer.
    Simple,
    /// Simple Format, or Continued Format (draft section 4.4.2), without chunks.
    Continued,
}

impl ReverseSends {
    /// Version 1 has no transport properties: reverse-direction messages go whole inline,
    /// without chunks (RFC 8167 section 4), as the Linux implementations send them.
    pub const VERSION_1: Self = Self::Simple;

    /// Whether anything may be sent.
    pub const fn any(self) -> bool {
        !matches!(self, Self::Nothing)
    }

    /// The largest reverse-direction message (a callback, or the reply to one) that goes in
    /// these forms to a peer that receives `receive_limit` bytes inline, after a header without
    /// chunks of `header_len` bytes, and at most `cap`: what one Send carries, or, continued,
    /// [`MAX_REVERSE_FRAGMENTS`] Sends ([`plan_fragments`] splits any message up to it); 0 when
    /// nothing goes.
    ///
    /// [`plan_fragments`]: super::continuation::plan_fragments
    pub fn max_payload(self, receive_limit: usize, header_len: usize, cap: usize) -> usize {
        let last = receive_limit.saturating_sub(header_len);
        let most = match self {
            Self::Nothing => 0,
            Self::Simple => last,
            Self::Continued if last == 0 => 0,
            Self::Continued => {
                let per = receive_limit.saturating_sub(EMPTY_MSG_HEADER_LEN);
                per.saturating_mul(MAX_REVERSE_FRAGMENTS - 1)
                    .saturating_add(last)
            }
        };
        most.min(cap)
    }
}

/// What an endpoint that advertised `local` (`RDMA2_PROPID_BRS`) may send in the reverse
/// direction to a peer that advertised `peer` on a Version 2 connection (draft section
/// 5.2.5; a peer that sent no BRS property advertised `RDMA2_RVRSDIR_NONE`, the default).
///
/// Both sides take part in each reverse-direction exchange, a Call one way and its Reply the
/// other, so it goes in the forms both take: nothing if either side said NONE, and never
/// chunks (`RDMA2_RVRSDIR_GENL` allows them, but this implementation sends none in the
/// reverse direction).
pub fn reverse_sends(local: ReverseSupport, peer: ReverseSupport) -> ReverseSends {
    match local.min(peer) {
        ReverseSupport::None => ReverseSends::Nothing,
        ReverseSupport::Simple => ReverseSends::Simple,
        ReverseSupport::Continued | ReverseSupport::General => ReverseSends::Continued,
    }
}
