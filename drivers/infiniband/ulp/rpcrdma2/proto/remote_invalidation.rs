// SPDX-License-Identifier: GPL-2.0

//! Remote Invalidation: which of a Requester's memory regions the Send of a reply invalidates
//! (Send With Invalidate), so that the Requester need not post a `LOCAL_INV` for it.
//!
//! The two versions solicit it differently:
//!
//! - Version 1 has no header field for it: a Requester that can take Send With Invalidate
//!   says so once, in its RFC 8797 private data, and the Responder picks the region. It may
//!   only pick one the Requester then no longer needs; a call whose segments all carry one
//!   handle ([`ChunkLists::sole_handle`]) registered one region, and its reply ends its use.
//! - Version 2 names the region per call (draft-01 section 6.2.4): `rdma_inv_handle` is zero
//!   or one of the call's own `rdma_handle` values, and a Responder that uses Remote
//!   Invalidation MUST invalidate exactly that one. The private data flag plays no part.
//!
//! A handle is the peer's input: the Responder invalidates only a handle that is one of the
//! call's segments (anything else could be another call's region, or none), and the Requester
//! accepts an invalidation only of a region of the call the reply answers.

use super::chunk::ChunkLists;
use super::wire::Revision;

/// What a Responder does with the reply to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyInvalidation {
    /// A plain Send.
    None,
    /// A Send With Invalidate of this handle.
    Invalidate(u32),
    /// A plain Send: the call's `rdma_inv_handle` names none of its segments.
    Unmatched(u32),
}

impl ReplyInvalidation {
    /// The handle the reply's Send invalidates, if any.
    pub const fn handle(self) -> Option<u32> {
        match self {
            Self::Invalidate(handle) => Some(handle),
            Self::None | Self::Unmatched(_) => None,
        }
    }
}

/// How a Responder answers a call with `lists` received on a `revision` connection: `inv_handle`
/// is the call's `rdma_inv_handle` (Version 2; ignored in Version 1), `v1_peer_takes_it` whether
/// the Requester's RFC 8797 private data allows Send With Invalidate (Version 1; ignored in
/// Version 2).
pub fn reply_invalidation(
    revision: Revision,
    v1_peer_takes_it: bool,
    inv_handle: u32,
    lists: &ChunkLists<'_>,
) -> ReplyInvalidation {
    match revision {
        Revision::V1 => match lists.sole_handle() {
            Some(handle) if v1_peer_takes_it => ReplyInvalidation::Invalidate(handle),
            _ => ReplyInvalidation::None,
        },
        Revision::V2Draft01 => match inv_handle {
            0 => ReplyInvalidation::None,
            handle if lists.contains_handle(handle) => ReplyInvalidation::Invalidate(handle),
            handle => ReplyInvalidation::Unmatched(handle),
        },
    }
}

/// The `rdma_inv_handle` a Requester puts in a call whose regions have the handles `handles`
/// (in the order they go on the wire): the first, which the reply may invalidate; 0 without
/// any. Version 1 headers have no such field: 0.
pub fn solicited_handle(revision: Revision, handles: impl IntoIterator<Item = u32>) -> u32 {
    match revision {
        Revision::V1 => 0,
        Revision::V2Draft01 => handles.into_iter().next().unwrap_or(0),
    }
}

/// The region, among a call's regions with handles `handles`, that a received Send With
/// Invalidate of `rkey` (answering that call) invalidated: its index. `None`: the peer
/// invalidated something that is not the call's, which the Requester treats as a broken
/// connection.
pub fn invalidated_region(rkey: u32, handles: impl IntoIterator<Item = u32>) -> Option<usize> {
    handles.into_iter().position(|handle| handle == rkey)
}
