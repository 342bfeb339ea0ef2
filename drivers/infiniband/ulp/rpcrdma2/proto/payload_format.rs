// SPDX-License-Identifier: GPL-2.0

//! Payload formats (draft section 4.4) and how a Requester picks one.
//!
//! *Simple*: the whole (possibly reduced) Payload stream follows the header
//! in one Send. *Continued*: it is split across several Sends with
//! `RDMA2_F_MORE`. *Special*: only the header is sent, the payload moves by
//! RDMA through a Position Zero Read chunk (Call) or the Reply chunk
//! (Reply). Version 1 has no Continued Format.

use super::continuation::{plan_fragments, SplitError};
use super::v2::{V2Body, V2Message};

/// How a message's Payload stream is conveyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadFormat {
    /// One Send carries header and payload.
    Simple,
    /// Several Sends carry the payload.
    Continued {
        /// Number of Sends.
        sends: usize,
    },
    /// The payload moves through a chunk; one Send carries the header.
    Special,
}

/// The format of a received v2 message, seen alone (a fragment with
/// `RDMA2_F_MORE` is part of a Continued message). `None` for messages that
/// carry no RPC payload.
pub fn received_format(msg: &V2Message<'_>) -> Option<PayloadFormat> {
    match msg.body {
        V2Body::Msg { .. } if msg.prefix.flags.more() => {
            Some(PayloadFormat::Continued { sends: 0 })
        }
        V2Body::Msg { .. } => Some(PayloadFormat::Simple),
        V2Body::NoMsg { chunks } if !chunks.lists.is_empty() => Some(PayloadFormat::Special),
        _ => None,
    }
}

/// What a Requester knows when it formats a Call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallShape {
    /// Length of the reduced Payload stream.
    pub payload_len: usize,
    /// Length of the header that carries the chunk lists.
    pub header_len: usize,
    /// The call inline threshold.
    pub threshold: usize,
    /// Whether Continued Format may be used (v2, and within the peer's
    /// reverse-direction support level for backchannel Calls).
    pub continuation: bool,
    /// Most Sends one Call may take (e.g. the credits available).
    pub max_sends: usize,
}

/// Picks the Call format: Simple if it fits, else Continued (which the
/// draft prefers to Special, section 6.3.2), else Special.
pub fn choose_call_format(shape: &CallShape) -> PayloadFormat {
    let fits = shape
        .header_len
        .checked_add(shape.payload_len)
        .is_some_and(|n| n <= shape.threshold);
    if fits {
        return PayloadFormat::Simple;
    }
    if shape.continuation {
        match plan_fragments(
            shape.payload_len,
            shape.threshold,
            shape.header_len,
            shape.max_sends,
        ) {
            Ok(plan) => {
                return PayloadFormat::Continued {
                    sends: plan.count(),
                }
            }
            Err(SplitError::ThresholdTooSmall | SplitError::TooManyFragments) => {}
        }
    }
    PayloadFormat::Special
}
