// SPDX-License-Identifier: GPL-2.0

//! Choosing a reply mechanism (draft section 6.4; RFC 8166 section 3.5).
//!
//! The Requester provisioned Write chunks and perhaps a Reply chunk before
//! the Reply existed. The Responder first places DDP-eligible results in
//! the Write chunks, then sends the reduced Reply inline if it fits, else
//! through the Reply chunk if there is one large enough (which it MUST use
//! when provided and the reply exceeds the inline threshold), else with
//! Message Continuation, else it reports `RDMA2_ERR_WRITE_RESOURCE` or
//! `RDMA2_ERR_REPLY_RESOURCE`. Version 1 has no continuation and only one
//! error, `ERR_CHUNK`.

use super::continuation::plan_fragments;
use super::error::{V1Error, V2Error};
use super::payload_format::PayloadFormat;

/// What the Responder has to send and what the Requester provided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyShape<'s> {
    /// Length of each DDP-eligible result, paired in order with the Write
    /// chunks it goes into.
    pub ddp_results: &'s [u64],
    /// Capacity of each provided Write chunk, in list order.
    pub write_chunk_capacity: &'s [u64],
    /// Capacity of the Reply chunk, if one was provided.
    pub reply_chunk_capacity: Option<u64>,
    /// Length of the reduced Payload stream.
    pub payload_len: usize,
    /// Length of the transport header of the final (or only) Send.
    pub header_len: usize,
    /// The reply inline threshold.
    pub threshold: usize,
    /// Most Sends a Continued Reply may take; 0 or 1 disables continuation.
    pub max_sends: usize,
}

fn check_write_chunks(shape: &ReplyShape<'_>) -> Result<(), (u32, u64)> {
    for (i, (need, cap)) in shape
        .ddp_results
        .iter()
        .zip(shape.write_chunk_capacity)
        .enumerate()
    {
        if need > cap {
            let index = u32::try_from(i).map_or(0, |i| i.saturating_add(1));
            return Err((index, *need));
        }
    }
    Ok(())
}

fn fits_inline(shape: &ReplyShape<'_>) -> bool {
    shape
        .header_len
        .checked_add(shape.payload_len)
        .is_some_and(|n| n <= shape.threshold)
}

fn reply_chunk_fits(shape: &ReplyShape<'_>) -> bool {
    let len = u64::try_from(shape.payload_len).unwrap_or(u64::MAX);
    shape.reply_chunk_capacity.is_some_and(|cap| len <= cap)
}

fn clamp(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// Chooses how to send a v2 Reply, or the error to send instead.
pub fn choose_reply_v2(shape: &ReplyShape<'_>) -> Result<PayloadFormat, V2Error> {
    if let Err((chunk_index, need)) = check_write_chunks(shape) {
        return Err(V2Error::WriteResource {
            chunk_index,
            length_needed: clamp(need),
        });
    }
    if fits_inline(shape) {
        return Ok(PayloadFormat::Simple);
    }
    if reply_chunk_fits(shape) {
        return Ok(PayloadFormat::Special);
    }
    if shape.max_sends > 1 {
        if let Ok(plan) = plan_fragments(
            shape.payload_len,
            shape.threshold,
            shape.header_len,
            shape.max_sends,
        ) {
            return Ok(PayloadFormat::Continued {
                sends: plan.count(),
            });
        }
    }
    Err(V2Error::ReplyResource {
        length_needed: clamp(u64::try_from(shape.payload_len).unwrap_or(u64::MAX)),
    })
}

/// Chooses how to send a v1 Reply: inline, through the Reply chunk, or
/// `ERR_CHUNK`.
pub fn choose_reply_v1(shape: &ReplyShape<'_>) -> Result<PayloadFormat, V1Error> {
    if check_write_chunks(shape).is_err() {
        return Err(V1Error::Chunk);
    }
    if fits_inline(shape) {
        Ok(PayloadFormat::Simple)
    } else if reply_chunk_fits(shape) {
        Ok(PayloadFormat::Special)
    } else {
        Err(V1Error::Chunk)
    }
}
