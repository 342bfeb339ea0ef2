// SPDX-License-Identifier: GPL-2.0

//! Credits for outstanding RDMA Read and Atomic requests: ORD at the
//! requester, IRD at the responder.
//!
//! A responder holds every RDMA Read Request it received until its Read
//! Response has been sent, in a queue IRD entries deep (its Inbound RDMA Read
//! Queue Depth); the requester keeps at most ORD requests outstanding so that
//! it never overruns that queue (RFC 6581 section 9.1 negotiates ORD <= the
//! peer's IRD). RFC 7306 section 5.2 sends Atomic Requests on the same queue
//! 1 "to reuse the same infrastructure (e.g., ... ORD/IRD flow control)", and
//! its section 5.2.2 (item 4) has the responder provide queue 1 buffers for
//! the Atomic Requests in addition to the Read Requests. So one credit pool
//! counts both kinds: every Read or Atomic Request takes one ORD credit at
//! the requester and one IRD entry at the responder.
//!
//! The responder processes queue 1 in arrival order (RFC 7306 section 5.2.1,
//! item 7 for atomics) and rsiw answers it in that order, so both sides are
//! FIFOs. Each remembers the kind of every entry, so a response of the wrong
//! kind is caught, and hands out the slot (0 to [`MAX_DEPTH`] - 1) each
//! request occupies, which the driver uses to index its own per-request
//! state (the WQE to complete, the Read Response to generate).
//!
//! The kinds are kept as one bit per slot of a 128-slot ring (two `u64`
//! words: the kernel's `core` avoids 128-bit integers), which bounds both
//! depths at 128, the limit the C siw also advertises (`SIW_MAX_ORD_QP`,
//! `SIW_MAX_IRD_QP`).

use super::term_error::TermError;

/// Deepest ORD or IRD supported; larger negotiated values are clamped.
pub const MAX_DEPTH: u16 = 128;

/// Slots in the ring, as an index type.
const SLOTS: u8 = 128;

/// What an outstanding request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// An RDMA Read Request, answered by a Read Response.
    Read,
    /// An Atomic Request (RFC 7306), answered by an Atomic Response.
    Atomic,
}

/// A FIFO of up to [`MAX_DEPTH`] request kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KindRing {
    /// Bit `slot % 64` of word `slot / 64` is set if the request in `slot`
    /// is an atomic.
    atomic: [u64; 2],
    /// Slot of the oldest entry, below [`SLOTS`].
    head: u8,
    /// Number of entries, at most [`SLOTS`].
    len: u8,
}

impl KindRing {
    const fn new() -> Self {
        Self {
            atomic: [0; 2],
            head: 0,
            len: 0,
        }
    }

    #[inline]
    fn is_atomic(&self, slot: u8) -> bool {
        let word = self
            .atomic
            .get(usize::from(slot / 64))
            .copied()
            .unwrap_or(0);
        word & 1u64 << (slot % 64) != 0
    }

    fn set_atomic(&mut self, slot: u8, atomic: bool) {
        if let Some(word) = self.atomic.get_mut(usize::from(slot / 64)) {
            let bit = 1u64 << (slot % 64);
            if atomic {
                *word |= bit;
            } else {
                *word &= !bit;
            }
        }
    }

    fn slot(&self, index: u8) -> u8 {
        // Both are below SLOTS, so the sum fits a u16 and the result SLOTS.
        ((u16::from(self.head) + u16::from(index)) % u16::from(SLOTS)) as u8
    }

    fn push(&mut self, kind: RequestKind) -> Option<usize> {
        if self.len >= SLOTS {
            return None;
        }
        let slot = self.slot(self.len);
        self.set_atomic(slot, kind == RequestKind::Atomic);
        self.len = self.len.saturating_add(1);
        Some(usize::from(slot))
    }

    #[inline]
    fn front(&self) -> Option<(usize, RequestKind)> {
        if self.len == 0 {
            return None;
        }
        let kind = if self.is_atomic(self.head) {
            RequestKind::Atomic
        } else {
            RequestKind::Read
        };
        Some((usize::from(self.head), kind))
    }

    fn pop(&mut self) -> Option<(usize, RequestKind)> {
        let front = self.front()?;
        self.head = self.slot(1);
        self.len = self.len.saturating_sub(1);
        Some(front)
    }
}

const fn clamp(depth: u16) -> u16 {
    if depth < MAX_DEPTH {
        depth
    } else {
        MAX_DEPTH
    }
}

/// Why a request cannot be sent now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssueError {
    /// ORD requests are outstanding: wait for a response (the send queue
    /// stalls behind the request, as RDMA Reads are not reordered).
    WouldExceed,
    /// The ORD is zero: no request may ever be sent on this connection.
    NoCredits,
}

/// The requester's side: requests sent and not yet answered, against ORD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requester {
    ord: u16,
    outstanding: KindRing,
}

impl Requester {
    /// A requester allowed `ord` outstanding requests (clamped to
    /// [`MAX_DEPTH`]).
    pub const fn new(ord: u16) -> Self {
        Self {
            ord: clamp(ord),
            outstanding: KindRing::new(),
        }
    }

    /// The ORD in force.
    pub const fn ord(&self) -> u16 {
        self.ord
    }

    /// Requests sent and not yet answered.
    pub const fn outstanding(&self) -> u16 {
        self.outstanding.len as u16
    }

    /// Takes a credit for a request of `kind` and returns its slot, or says
    /// why the request must not be sent now.
    pub fn try_issue(&mut self, kind: RequestKind) -> Result<usize, IssueError> {
        if self.ord == 0 {
            return Err(IssueError::NoCredits);
        }
        if self.outstanding() >= self.ord {
            return Err(IssueError::WouldExceed);
        }
        self.outstanding.push(kind).ok_or(IssueError::WouldExceed)
    }

    /// Takes a credit for the zero-length RDMA Read an RFC 6581 initiator
    /// sends as its ready-to-receive indication. RFC 6581 section 9.1 lets
    /// the responder raise its IRD to 1 for it even when the initiator's ORD
    /// is 0, so it is allowed whenever nothing is outstanding.
    pub fn issue_rtr_read(&mut self) -> Result<usize, IssueError> {
        if self.outstanding() != 0 {
            return Err(IssueError::WouldExceed);
        }
        self.outstanding
            .push(RequestKind::Read)
            .ok_or(IssueError::WouldExceed)
    }

    /// The oldest outstanding request: the one the next response answers.
    #[inline]
    pub fn front(&self) -> Option<(usize, RequestKind)> {
        self.outstanding.front()
    }

    /// Records that the response of `kind` to the oldest request has been
    /// received in full (the last segment of a Read Response, or an Atomic
    /// Response) and returns the request's slot, whose credit is free again.
    ///
    /// A response nobody asked for, or of the wrong kind, is reported as an
    /// unexpected opcode (RDMAP remote operation error 0x06); the state is
    /// unchanged.
    pub fn complete(&mut self, kind: RequestKind) -> Result<usize, TermError> {
        match self.outstanding.front() {
            Some((_, k)) if k == kind => {}
            _ => return Err(TermError::RdmapUnexpectedOpcode),
        }
        self.outstanding
            .pop()
            .map(|(slot, _)| slot)
            .ok_or(TermError::RdmapUnexpectedOpcode)
    }
}

/// The responder's side: requests received and not yet answered, against
/// IRD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Responder {
    ird: u16,
    pending: KindRing,
}

impl Responder {
    /// The error reported for a request beyond IRD: the peer broke the
    /// negotiated limit, a catastrophic error localized to the RDMAP stream
    /// (RDMAP remote operation error 0x07), as the C siw reports it.
    pub const OVERRUN: TermError = TermError::RdmapCatastrophicStream;

    /// A responder with `ird` inbound queue entries (clamped to
    /// [`MAX_DEPTH`]).
    pub const fn new(ird: u16) -> Self {
        Self {
            ird: clamp(ird),
            pending: KindRing::new(),
        }
    }

    /// The IRD in force.
    pub const fn ird(&self) -> u16 {
        self.ird
    }

    /// Requests received and not yet answered.
    pub const fn pending(&self) -> u16 {
        self.pending.len as u16
    }

    /// Queues a received request of `kind` and returns its slot, or the
    /// error to terminate the stream with if it exceeds IRD. On error the
    /// state is unchanged.
    pub fn accept(&mut self, kind: RequestKind) -> Result<usize, TermError> {
        if self.pending() >= self.ird {
            return Err(Self::OVERRUN);
        }
        self.pending.push(kind).ok_or(Self::OVERRUN)
    }

    /// The oldest pending request: the next one to answer.
    #[inline]
    pub fn front(&self) -> Option<(usize, RequestKind)> {
        self.pending.front()
    }

    /// Records that the response to the oldest request has been sent in full
    /// and frees its entry; returns its slot and kind, or `None` if nothing
    /// was pending.
    pub fn finish(&mut self) -> Option<(usize, RequestKind)> {
        self.pending.pop()
    }
}
