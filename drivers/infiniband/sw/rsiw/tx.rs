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
//! TCP instead, which costs less than page references for a few bytes. When it runs out of room a fresh one is allocated; if that fails
//! (memory too fragmented), FPDUs are built in the QP's own buffer and TCP copies them.

use crate::proto::qp_engine::Transmitted;
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
}

/// The transmit buffers of a QP.
pub(crate) struct TxBuffers {
    splice: Option<SpliceBuffer>,
    /// FPDUs TCP copies, when no splice buffer can be had.
    own: KVec<u8>,
    list: SpliceList,
    marks: [Mark; MAX_MARKS],
    marked: usize,
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
        })
    }

    /// Gives the memory back once the QP is destroyed: later rounds get no room.
    pub(crate) fn release(&mut self) {
        self.splice = None;
        self.own = KVec::new();
        self.list.clear();
        self.marked = 0;
    }

    /// Starts a round: the buffer the engine writes FPDUs into, the references it may take
    /// payload into (none when the QP's own buffer is used, which TCP copies) and its wire
    /// budget. [`Self::finish`] sends what the engine produced.
    pub(crate) fn begin(&mut self) -> (&mut [u8], Option<Refs<'_>>, usize) {
        let Self {
            splice,
            own,
            list,
            marks,
            marked,
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
    /// to `socket`. Returns whether to go on: something was sent and the engine may have more,
    /// or a fresh buffer is needed. (An engine that ran out of work says so, which spares a
    /// round per message that would find nothing.)
    pub(crate) fn finish(&mut self, socket: &TcpSocket, t: Transmitted) -> Result<bool> {
        let Some(buf) = self.splice.as_mut() else {
            if t.buffered == 0 {
                return Ok(false);
            }
            send_all(socket, self.own.get(..t.buffered).unwrap_or(&[]))?;
            return Ok(!t.idle);
        };
        if t.is_empty() {
            if t.short && buf.unsent_len() < SpliceBuffer::LEN {
                // The next FPDU needs more room than is left: go on with a fresh buffer.
                self.splice = None;
                return Ok(true);
            }
            return Ok(false);
        }
        if t.referenced == 0 && t.buffered < COPY_BELOW {
            send_all(socket, buf.unsent_mut().get(..t.buffered).unwrap_or(&[]))?;
            return Ok(!t.idle);
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
        socket.send_list(&mut self.list, MsgFlags::NOSIGNAL)?;
        Ok(!t.idle)
    }
}

/// Writes all of `bytes` to `socket` (TCP copies them).
pub(crate) fn send_all(socket: &TcpSocket, bytes: &[u8]) -> Result {
    let mut sent = 0;
    while let Some(rest) = bytes.get(sent..).filter(|r| !r.is_empty()) {
        match socket.send(rest, MsgFlags::NOSIGNAL) {
            Ok(k) if k > 0 => sent += k,
            Ok(_) => return Err(EPIPE),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
