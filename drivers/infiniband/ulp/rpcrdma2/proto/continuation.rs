// SPDX-License-Identifier: GPL-2.0

//! Message Continuation (draft sections 4.4.2 and 6.2.2.2).
//!
//! A sender may split one RPC message over several `RDMA2_MSG` Sends, each
//! but the last marked `RDMA2_F_MORE`; chunks ride only on the last one.
//! [`plan_fragments`] computes that split for a given inline threshold.
//!
//! The receiver concatenates the payloads. [`Reassembler`] enforces the
//! receiver rules (same XID and type throughout, a length and count limit
//! of our choosing) and copies into storage reached through the small
//! [`ReassemblyStorage`] trait, so the kernel backs it with its own fallible
//! allocation while tests use a fixed slice ([`SliceStorage`]). On any
//! violation the sequence is abandoned, its XID is remembered so that its
//! remaining fragments are dropped silently (section 7.1.3), and the caller
//! gets `RDMA2_ERR_INVAL_CONT` to send.

use core::ops::DerefMut;

use super::error::{V2Error, Violation};
use super::v2::{V2Body, V2Message, EMPTY_MSG_HEADER_LEN};

/// Most Sends one continued message of ours takes. A peer's credit grant counts its posted
/// receives, so a sender holds back this many less one for the one continued message it has in
/// flight at a time (draft section 6.2.2.2: a sender must not run past the grant mid-sequence).
pub const MAX_SENT_FRAGMENTS: usize = 4;

/// Most Sends one continued reverse-direction message of ours takes (a callback, or the reply
/// to one). Each side posts receives for them apart from its calls' credits: a client its
/// callback receives, a server its backchannel receives ([`MAX_REVERSE_FRAGMENTS`] for each
/// callback it has in flight); one chain of work requests carries them.
pub const MAX_REVERSE_FRAGMENTS: usize = 8;

/// What we reassemble: more than any sender of ours produces, little enough to hold per
/// connection.
pub const RECEIVE_LIMITS: ReassemblyLimits = ReassemblyLimits {
    max_len: 32 * 1024,
    max_fragments: 16,
};

/// One fragment of a planned split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fragment {
    /// Offset of this fragment in the Payload stream.
    pub offset: usize,
    /// Bytes of payload in this fragment.
    pub len: usize,
    /// Whether `RDMA2_F_MORE` is set (every fragment but the last).
    pub more: bool,
}

/// Why a split is impossible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitError {
    /// The threshold leaves no room for payload after a header.
    ThresholdTooSmall,
    /// More fragments would be needed than allowed.
    TooManyFragments,
}

/// A planned split of a Payload stream over several Sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragmentPlan {
    /// Bytes carried by the non-final fragments.
    body: usize,
    /// Bytes carried by the final fragment.
    last: usize,
    per_fragment: usize,
    count: usize,
}

impl FragmentPlan {
    /// Number of Sends needed.
    pub const fn count(&self) -> usize {
        self.count
    }

    /// Iterates over the fragments in send order.
    pub fn fragments(&self) -> Fragments {
        Fragments {
            plan: *self,
            index: 0,
        }
    }
}

/// Iterator over a [`FragmentPlan`].
#[derive(Debug, Clone)]
pub struct Fragments {
    plan: FragmentPlan,
    index: usize,
}

impl Iterator for Fragments {
    type Item = Fragment;

    fn next(&mut self) -> Option<Fragment> {
        if self.index >= self.plan.count {
            return None;
        }
        let i = self.index;
        self.index = self.index.saturating_add(1);
        if self.index == self.plan.count {
            return Some(Fragment {
                offset: self.plan.body,
                len: self.plan.last,
                more: false,
            });
        }
        let offset = i.checked_mul(self.plan.per_fragment)?;
        let len = self
            .plan
            .per_fragment
            .min(self.plan.body.saturating_sub(offset));
        Some(Fragment {
            offset,
            len,
            more: true,
        })
    }
}

/// Plans how to send `payload_len` bytes under `threshold`, when the last
/// Send's header (with its chunks) is `final_header_len` bytes and the
/// others carry the empty-lists header of [`EMPTY_MSG_HEADER_LEN`] bytes.
/// A result of one fragment means the Simple Format suffices.
pub fn plan_fragments(
    payload_len: usize,
    threshold: usize,
    final_header_len: usize,
    max_fragments: usize,
) -> Result<FragmentPlan, SplitError> {
    let final_room = threshold
        .checked_sub(final_header_len)
        .ok_or(SplitError::ThresholdTooSmall)?;
    if payload_len <= final_room {
        return Ok(FragmentPlan {
            body: 0,
            last: payload_len,
            per_fragment: 0,
            count: 1,
        });
    }
    let per = threshold
        .checked_sub(EMPTY_MSG_HEADER_LEN)
        .filter(|p| *p > 0)
        .ok_or(SplitError::ThresholdTooSmall)?;
    // The last Send is filled first (it must carry the chunks anyway); the
    // rest goes, in order, into full-sized non-final Sends.
    let body = payload_len.saturating_sub(final_room);
    let count = body
        .div_ceil(per)
        .checked_add(1)
        .ok_or(SplitError::TooManyFragments)?;
    if count > max_fragments {
        return Err(SplitError::TooManyFragments);
    }
    Ok(FragmentPlan {
        body,
        last: final_room,
        per_fragment: per,
        count,
    })
}

/// Backing store for a message being reassembled.
pub trait ReassemblyStorage {
    /// Bytes held.
    fn len(&self) -> usize;
    /// Whether nothing is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Appends `data`, or fails without side effects if it cannot be held.
    fn append(&mut self, data: &[u8]) -> Result<(), StorageFull>;
    /// Drops everything held.
    fn clear(&mut self);
}

/// The storage could not take more bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageFull;

/// [`ReassemblyStorage`] over a fixed buffer: a borrowed slice, or one the caller owns (the
/// kernel's `KVec`, allocated once per connection, so nothing allocates while reassembling).
#[derive(Debug)]
pub struct SliceStorage<B> {
    buf: B,
    len: usize,
}

impl<B: DerefMut<Target = [u8]>> SliceStorage<B> {
    /// Wraps `buf`; its length is the capacity.
    pub fn new(buf: B) -> Self {
        Self { buf, len: 0 }
    }

    /// The bytes held.
    pub fn data(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
}

impl<B: DerefMut<Target = [u8]>> ReassemblyStorage for SliceStorage<B> {
    fn len(&self) -> usize {
        self.len
    }

    fn append(&mut self, data: &[u8]) -> Result<(), StorageFull> {
        let end = self.len.checked_add(data.len()).ok_or(StorageFull)?;
        let dst = self.buf.get_mut(self.len..end).ok_or(StorageFull)?;
        dst.copy_from_slice(data);
        self.len = end;
        Ok(())
    }

    fn clear(&mut self) {
        self.len = 0;
    }
}

/// Limits on one reassembled message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReassemblyLimits {
    /// Largest reassembled payload in bytes.
    pub max_len: usize,
    /// Most fragments in one sequence.
    pub max_fragments: u32,
}

/// What became of a message fed to the [`Reassembler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reassembled<'a> {
    /// A whole RPC message in one Send: use the payload in place.
    Whole(&'a [u8]),
    /// A Special Format message: the payload travels in chunks.
    External,
    /// A fragment was stored; more are expected.
    Pending,
    /// The last fragment arrived; the storage holds the whole payload.
    Complete {
        /// XID of the message.
        xid: u32,
        /// Fragments in the sequence.
        fragments: u32,
    },
    /// A message that carries no payload (credit grant, error, properties);
    /// it does not disturb a sequence in progress.
    Control,
    /// A fragment of an abandoned sequence, dropped silently.
    Dropped,
}

/// A continuation violation; the caller sends `RDMA2_ERROR` with
/// [`ContinuationError::error`] for [`ContinuationError::xid`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContinuationError {
    /// XID of the offending message.
    pub xid: u32,
    /// XID of a sequence that was in progress and is now abandoned, if it
    /// differs from `xid`.
    pub aborted: Option<u32>,
    /// What went wrong.
    pub violation: Violation,
}

impl ContinuationError {
    /// The error to report: `RDMA2_ERR_INVAL_CONT`, or `RDMA2_ERR_SYSTEM`
    /// when only local storage ran out.
    pub const fn error(&self) -> V2Error {
        match self.violation {
            Violation::StorageExhausted => V2Error::System,
            _ => V2Error::InvalCont,
        }
    }
}

/// What the [`Reassembler`] needs of a received message, whatever layout it came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part<'a> {
    /// A message that carries (part of) an RPC message.
    Rpc {
        /// `rdma_xid`.
        xid: u32,
        /// `rdma_htype`.
        htype: u32,
        /// `RDMA2_F_MORE`.
        more: bool,
        /// The inline payload; `None` for a Special Format message (`RDMA2_NOMSG` with chunks).
        payload: Option<&'a [u8]>,
    },
    /// Anything else: a credit grant, an error, properties.
    Control,
}

impl<'a> Part<'a> {
    /// The part a decoded v2 message is.
    pub fn of(msg: &V2Message<'a>) -> Self {
        let payload = match msg.body {
            V2Body::Msg { payload, .. } => Some(payload),
            V2Body::NoMsg { chunks } if !chunks.lists.is_empty() => None,
            _ => return Part::Control,
        };
        Part::Rpc {
            xid: msg.prefix.xid,
            htype: msg.prefix.htype,
            more: msg.prefix.flags.more(),
            payload,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sequence {
    xid: u32,
    htype: u32,
    fragments: u32,
}

/// Receiver state for Message Continuation.
#[derive(Debug)]
pub struct Reassembler<S> {
    storage: S,
    limits: ReassemblyLimits,
    current: Option<Sequence>,
    /// XIDs whose remaining fragments are dropped (two slots: the
    /// offending message and the sequence it broke).
    poisoned: [Option<u32>; 2],
}

impl<S: ReassemblyStorage> Reassembler<S> {
    /// A reassembler writing into `storage`.
    pub fn new(storage: S, limits: ReassemblyLimits) -> Self {
        Self {
            storage,
            limits,
            current: None,
            poisoned: [None, None],
        }
    }

    /// The storage (holding the payload after [`Reassembled::Complete`]).
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// Whether a sequence is in progress.
    pub fn in_progress(&self) -> bool {
        self.current.is_some()
    }

    fn poison(&mut self, xid: u32) {
        if self.poisoned.contains(&Some(xid)) {
            return;
        }
        if let Some(slot) = self.poisoned.iter_mut().find(|s| s.is_none()) {
            *slot = Some(xid);
        } else {
            let [_, newer] = self.poisoned;
            self.poisoned = [newer, Some(xid)];
        }
    }

    fn unpoison(&mut self, xid: u32) {
        for slot in self.poisoned.iter_mut() {
            if *slot == Some(xid) {
                *slot = None;
            }
        }
    }

    fn abandon(&mut self, xid: u32, more: bool, violation: Violation) -> ContinuationError {
        let current = self.current.take().map(|s| s.xid);
        self.storage.clear();
        // Whatever else the broken sequence's sender still has in flight is
        // dropped up to and including its final fragment.
        if let Some(c) = current.filter(|c| *c != xid || more) {
            self.poison(c);
        }
        let aborted = current.filter(|c| *c != xid);
        if more {
            self.poison(xid);
        }
        ContinuationError {
            xid,
            aborted,
            violation,
        }
    }

    /// A message of `xid` was refused before it reached the reassembler (its header could
    /// not be decoded): a sequence of `xid` in progress is abandoned, and if the message said
    /// `RDMA2_F_MORE`, the rest of `xid`'s messages up to its final one are dropped (draft
    /// section 6.3.3: the Responder discards all messages with the failing XID).
    pub fn refused(&mut self, xid: u32, more: bool) {
        if self.current.is_some_and(|s| s.xid == xid) {
            self.current = None;
            self.storage.clear();
        }
        if more {
            self.poison(xid);
        }
    }

    /// Feeds one decoded message.
    pub fn accept<'a>(
        &mut self,
        msg: &V2Message<'a>,
    ) -> Result<Reassembled<'a>, ContinuationError> {
        self.accept_part(Part::of(msg))
    }

    /// Feeds one received message, seen as a [`Part`].
    pub fn accept_part<'a>(
        &mut self,
        part: Part<'a>,
    ) -> Result<Reassembled<'a>, ContinuationError> {
        let Part::Rpc {
            xid,
            htype,
            more,
            payload,
        } = part
        else {
            return Ok(Reassembled::Control);
        };
        if self.poisoned.contains(&Some(xid)) {
            if !more {
                self.unpoison(xid);
            }
            return Ok(Reassembled::Dropped);
        }
        let Some(seq) = self.current else {
            return match payload {
                None => Ok(Reassembled::External),
                Some(p) if !more => Ok(Reassembled::Whole(p)),
                Some(p) => {
                    self.storage.clear();
                    self.current = Some(Sequence {
                        xid,
                        htype,
                        fragments: 0,
                    });
                    self.append(xid, more, p)
                }
            };
        };
        if seq.xid != xid || seq.htype != htype {
            return Err(self.abandon(xid, more, Violation::ContinuationMismatch));
        }
        match payload {
            Some(p) => self.append(xid, more, p),
            None => Err(self.abandon(xid, more, Violation::ContinuationMismatch)),
        }
    }

    fn append<'a>(
        &mut self,
        xid: u32,
        more: bool,
        p: &[u8],
    ) -> Result<Reassembled<'a>, ContinuationError> {
        let Some(mut seq) = self.current else {
            return Err(self.abandon(xid, more, Violation::ContinuationMismatch));
        };
        seq.fragments = seq.fragments.saturating_add(1);
        let new_len = self.storage.len().checked_add(p.len());
        if seq.fragments > self.limits.max_fragments
            || new_len.map_or(true, |l| l > self.limits.max_len)
        {
            return Err(self.abandon(xid, more, Violation::ContinuationTooLong));
        }
        if self.storage.append(p).is_err() {
            return Err(self.abandon(xid, more, Violation::StorageExhausted));
        }
        if more {
            self.current = Some(seq);
            Ok(Reassembled::Pending)
        } else {
            self.current = None;
            Ok(Reassembled::Complete {
                xid,
                fragments: seq.fragments,
            })
        }
    }
}
