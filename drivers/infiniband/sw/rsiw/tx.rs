// SPDX-License-Identifier: GPL-2.0

//! How a QP's FPDUs reach TCP without being copied.
//!
//! The engine writes FPDUs into a [`SpliceBuffer`], which TCP takes by page reference, and
//! offers payload for sending by reference ([`crate::proto::qp_engine`], "Payload by
//! reference"): the pages of the consumer's memory become pieces of a [`SpliceList`] and the
//! engine writes only the FPDUs' headers and trailers. After the engine is done, [`TxBuffers`]
//! puts the buffer's bytes between those pieces in wire order and sends the whole round with
//! one `sendmsg`. So payload is copied once on transmit when it must be (small or signalled
//! work requests, CRCs on, memory that cannot be spliced) and not at all otherwise.
//!
//! A splice buffer is 64 KiB and serves many rounds: each round hands over what it wrote, the
//! next writes after it. Small rounds (a few FPDUs without referenced payload) are copied by
//! TCP instead, which costs less than page references for a few bytes. When it runs out of
//! room a fresh one is allocated; if that fails
//! (memory too fragmented), FPDUs are built in the QP's own buffer and TCP copies them.
//!
//! Nothing here waits for TCP: every send is `MSG_DONTWAIT`. What the socket has no room for
//! (a slow reader, a zero window) stays in the buffers as the round's *unsent* rest, and the
//! QP's work goes back to its queue; the socket's `write_space` resumes it, and [`TxBuffers::flush`]
//! sends the rest before the engine is asked for more. So a peer that stops reading holds up
//! only its own QP, never a worker of the module's queue, and the engine's rule that a
//! signalled work request completes on the transmit call after its FPDUs went to TCP holds.

use crate::proto::qp_engine::Transmitted;
use core::ops::Range;
use kernel::{
    net::tcp::{
        splice::{PagePiece, SpliceBuffer, SpliceList},
        MsgFlags, TcpSocket,
    },
    prelude::*,
    sync::Arc,
};

/// The most page pieces one round sends: the consumer's pages of 64 KiB of payload (17 when
/// it is not page-aligned, more across SGEs) plus the buffer's pieces between them.
const MAX_PIECES: usize = 64;

/// The most payload ranges one round takes by reference (one per FPDU).
const MAX_MARKS: usize = 16;

/// Room a splice buffer must have left to be used for a round: a few FPDUs without payload.
const MIN_ROOM: usize = 512;

/// Rounds of fewer bytes, all in the buffer, are copied by TCP instead (the buffer's bytes are
/// then reused): for a small message, taking page references costs more than the copy.
const COPY_BELOW: usize = 2048;

/// How every FPDU goes to TCP: never waiting for room, never raising `SIGPIPE`.
const SEND_FLAGS: MsgFlags = MsgFlags::NOSIGNAL.or(MsgFlags::DONTWAIT);

/// How far a round got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sent {
    /// All of it went to TCP, and the engine may have more.
    More,
    /// All of it went to TCP, and the engine has nothing more.
    Idle,
    /// TCP had no room for all of it: the rest waits in the buffers for [`TxBuffers::flush`].
    Blocked,
}

/// Where a payload range taken by reference goes: before byte `at` of the round's buffer, as
/// the pieces from `index` on.
#[derive(Clone, Copy, Default)]
struct Mark {
    at: usize,
    index: usize,
}

/// Where a QP's FPDUs go while it is connected.
pub(crate) struct TxTarget {
    pub(crate) socket: Arc<TcpSocket>,
    /// Whether FPDUs may span a GSO packet of several TCP segments.
    pub(crate) large_fpdus: bool,
}

/// The transmit side of a QP: its buffers and, while connected, where FPDUs go. One lock
/// covers both, so that a transmission takes no other lock to find its socket.
pub(crate) struct Transmitter {
    pub(crate) target: Option<TxTarget>,
    pub(crate) buffers: TxBuffers,
    /// A graceful close waits for the unsent rest: TCP's FIN goes after it.
    pub(crate) fin_after_unsent: bool,
}

/// The transmit buffers of a QP.
pub(crate) struct TxBuffers {
    splice: Option<SpliceBuffer>,
    /// FPDUs TCP copies, when no splice buffer can be had.
    own: KVec<u8>,
    list: SpliceList,
    marks: [Mark; MAX_MARKS],
    marked: usize,
    /// Bytes of `own` TCP has not taken yet. The unsent rest of a round in the splice
    /// buffer, or taken by reference, is `list`.
    own_unsent: Range<usize>,
}

/// What the engine may take payload by reference into during one round.
pub(crate) struct Refs<'a> {
    list: &'a mut SpliceList,
    marks: &'a mut [Mark; MAX_MARKS],
    marked: &'a mut usize,
}

impl Refs<'_> {
    /// Takes a payload range by reference to go before byte `at` of the buffer: `pieces` gives
    /// its page pieces in order to the callback and returns `Ok(true)` if all of them could be
    /// had. On `false` nothing is kept, and the engine copies the payload.
    pub(crate) fn take(
        &mut self,
        at: usize,
        pieces: impl FnOnce(&mut dyn FnMut(PagePiece) -> Result) -> Result<bool>,
    ) -> bool {
        if *self.marked == MAX_MARKS {
            return false;
        }
        let start = self.list.count();
        // Keep room for the buffer's pieces: one before each range and one at the end.
        let reserved = *self.marked + 2;
        let list = &mut *self.list;
        let mut push = |piece: PagePiece| {
            if list.count() + reserved >= list.capacity() {
                return Err(ENOSPC);
            }
            list.push(piece).map_err(|_| ENOSPC)
        };
        if matches!(pieces(&mut push), Ok(true)) {
            if let Some(mark) = self.marks.get_mut(*self.marked) {
                *mark = Mark { at, index: start };
                *self.marked += 1;
                return true;
            }
        }
        self.list.truncate(start);
        false
    }
}

impl TxBuffers {
    /// Buffers with `own` bytes of the QP's own.
    pub(crate) fn new(own: usize) -> Result<Self> {
        Ok(Self {
            splice: None,
            own: KVec::from_elem(0u8, own, GFP_KERNEL)?,
            list: SpliceList::with_capacity(MAX_PIECES)?,
            marks: [Mark::default(); MAX_MARKS],
            marked: 0,
            own_unsent: 0..0,
        })
    }

    /// Gives the memory back once the QP is destroyed: later rounds get no room.
    pub(crate) fn release(&mut self) {
        self.discard_unsent();
        self.splice = None;
        self.own = KVec::new();
        self.marked = 0;
    }

    /// Whether TCP has not taken all of the last round yet.
    pub(crate) fn has_unsent(&self) -> bool {
        !self.own_unsent.is_empty() || !self.list.is_empty()
    }

    /// Drops what TCP has not taken of the last round: the connection is over.
    pub(crate) fn discard_unsent(&mut self) {
        self.list.clear();
        self.own_unsent = 0..0;
    }

    /// Sends what TCP had no room for in the last round. Returns whether all of it went
    /// (`false`: still no room, and the socket's `write_space` will say when there is). Only
    /// then may a new round [`Self::begin`].
    pub(crate) fn flush(&mut self, socket: &TcpSocket) -> Result<bool> {
        if !self.own_unsent.is_empty() {
            let rest = self.own.get(self.own_unsent.clone()).unwrap_or(&[]);
            self.own_unsent.start += send_some(socket, rest)?;
            if !self.own_unsent.is_empty() {
                return Ok(false);
            }
        }
        if self.list.is_empty() {
            return Ok(true);
        }
        match socket.send_list(&mut self.list, SEND_FLAGS) {
            Ok(()) => Ok(true),
            Err(e) if e == EAGAIN => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Starts a round: the buffer the engine writes FPDUs into, the references it may take
    /// payload into (none when the QP's own buffer is used, which TCP copies) and its wire
    /// budget. [`Self::finish`] sends what the engine produced. The last round must have
    /// gone to TCP whole ([`Self::flush`]).
    pub(crate) fn begin(&mut self) -> (&mut [u8], Option<Refs<'_>>, usize) {
        let Self {
            splice,
            own,
            list,
            marks,
            marked,
            ..
        } = self;
        if splice.as_ref().map_or(true, |b| b.unsent_len() < MIN_ROOM) {
            *splice = SpliceBuffer::new().ok();
        }
        let Some(buf) = splice.as_mut() else {
            let budget = own.len();
            return (own, None, budget);
        };
        list.clear();
        *marked = 0;
        let refs = Refs {
            list,
            marks,
            marked,
        };
        (buf.unsent_mut(), Some(refs), SpliceBuffer::LEN)
    }

    /// Ends the round [`Self::begin`] started, in which the engine produced `t`: its FPDUs go
    /// to `socket`, as far as it has room. An engine that ran out of work says so, which
    /// spares a round per message that would find nothing.
    pub(crate) fn finish(&mut self, socket: &TcpSocket, t: Transmitted) -> Result<Sent> {
        let sent = if t.idle { Sent::Idle } else { Sent::More };
        let Some(buf) = self.splice.as_mut() else {
            if t.buffered == 0 {
                return Ok(Sent::Idle);
            }
            let k = send_some(socket, self.own.get(..t.buffered).unwrap_or(&[]))?;
            if k < t.buffered {
                self.own_unsent = k..t.buffered;
                return Ok(Sent::Blocked);
            }
            return Ok(sent);
        };
        if t.is_empty() {
            if t.short && buf.unsent_len() < SpliceBuffer::LEN {
                // The next FPDU needs more room than is left: go on with a fresh buffer.
                self.splice = None;
                return Ok(Sent::More);
            }
            return Ok(Sent::Idle);
        }
        if t.referenced == 0 && t.buffered < COPY_BELOW {
            let k = send_some(socket, buf.unsent_mut().get(..t.buffered).unwrap_or(&[]))?;
            if k < t.buffered {
                // TCP copied the first `k` bytes; the rest must stay as written until it
                // goes, so it is handed over as a piece (and the copied bytes with it, unused).
                drop(buf.hand_over(k));
                let piece = buf.hand_over(t.buffered - k).ok_or(EINVAL)?;
                self.list.push(piece).map_err(|_| ENOSPC)?;
                return Ok(Sent::Blocked);
            }
            return Ok(sent);
        }
        // The buffer's bytes go around the pieces taken by reference, in wire order.
        let mut prev = 0;
        let mut inserted = 0;
        for mark in self.marks.iter().take(self.marked) {
            if mark.at > prev {
                let piece = buf.hand_over(mark.at - prev).ok_or(EINVAL)?;
                self.list
                    .insert(mark.index + inserted, piece)
                    .map_err(|_| ENOSPC)?;
                inserted += 1;
            }
            prev = mark.at;
        }
        if t.buffered > prev {
            let piece = buf.hand_over(t.buffered - prev).ok_or(EINVAL)?;
            self.list.push(piece).map_err(|_| ENOSPC)?;
        }
        match socket.send_list(&mut self.list, SEND_FLAGS) {
            Ok(()) => Ok(sent),
            Err(e) if e == EAGAIN => Ok(Sent::Blocked),
            Err(e) => Err(e),
        }
    }
}

/// Writes as much of `bytes` to `socket` as it has room for (TCP copies them); returns how
/// many went.
fn send_some(socket: &TcpSocket, bytes: &[u8]) -> Result<usize> {
    let mut sent = 0;
    while let Some(rest) = bytes.get(sent..).filter(|r| !r.is_empty()) {
        match socket.send(rest, SEND_FLAGS) {
            Ok(0) => return Err(EPIPE),
            Ok(k) => sent += k,
            Err(e) if e == EAGAIN => break,
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}
