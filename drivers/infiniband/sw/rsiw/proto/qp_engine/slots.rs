// SPDX-License-Identifier: GPL-2.0

//! The engine's per-slot state: for each ORD slot the request of ours it tracks
//! ([`Outstanding`]), for each IRD slot the request of the peer it answers ([`Pending`]), and
//! the storage that holds both ([`SlotStorage`]).
//!
//! The credit queues ([`Requester`], [`Responder`]) hand out slot indices and know nothing of
//! the requests; what the engine needs per slot lives here. All slots together take about
//! 12 KiB, more than a kernel stack holds, so their storage is the driver's to provide.

use super::*;

/// Entries of the per-slot ORD and IRD state.
pub(super) const DEPTH: usize = MAX_DEPTH as usize;

/// A Read or Atomic request of ours in an ORD slot; `E` is the type of its work request's
/// scatter/gather entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outstanding<E: SgeEntry = Sge> {
    pub(super) wr_id: u64,
    pub(super) signaled: bool,
    pub(super) opcode: WcOpcode,
    /// Bytes the completion reports.
    pub(super) len: u32,
    /// A Read's sink, or where an atomic's original value goes, as the work
    /// request held it ([`SgeEntry::EMPTY`] for the RTR's Read, whose sink is
    /// STag [`RTR_STAG`] at offset 0, and for an empty entry).
    pub(super) sge: E,
    /// Bytes of the sink a Read's response placed so far: the next segment
    /// starts at the sink's address plus these.
    pub(super) placed: u32,
    /// The MSN of the request on queue 1.
    pub(super) msn: u32,
    pub(super) request_id: u32,
    /// Invalidate the sink's STag on completion (Read with Invalidate).
    pub(super) invalidate: bool,
    /// Not completed yet.
    pub(super) live: bool,
    /// The RFC 6581 Read RTR, sent by connection setup: no work request,
    /// so it completes nothing.
    pub(super) rtr: bool,
    /// Earlier Read Requests of the same work request (a Read into several
    /// SGEs goes as one Read Request per SGE, see [`qp_engine`](super)): 0
    /// for its first part and for every other request.
    /// Part `n` > 0 sits in the ORD slot after part `n` - 1.
    pub(super) part: u8,
    /// This request completes its work request: the last part of a Read,
    /// and every other request. The parts before it complete nothing.
    pub(super) last: bool,
}

/// A request of the peer in an IRD slot, ready to be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pending {
    /// Not (yet) ready: its header may have arrived, its FPDU not.
    Empty,
    /// An RDMA Read Request to answer with a Read Response.
    Read {
        /// The request.
        header: ReadRequestHeader,
        /// The source (checked).
        source: Grant,
    },
    /// An executed Atomic Request, to answer with this response.
    Atomic(AtomicResponseHeader),
}

/// Where an engine keeps its per-slot state: an ORD entry and an IRD entry for each of the
/// [`MAX_DEPTH`] slots, about 12 KiB in all. A kernel stack cannot hold that, so the driver
/// provides heap storage of its own ([`SlotStorage`]); [`InlineSlots`] keeps it inside the
/// engine. The engine hands out slots round-robin over all [`MAX_DEPTH`] of them whatever
/// the ORD and IRD, so storage should hold [`MAX_DEPTH`] entries of each kind; slots beyond
/// the storage's length are treated as missing: a request of ours that would use one fails
/// locally ([`WcStatus::LocQpOpErr`]) before it is sent, and a request of the peer that would
/// use one terminates the stream before it is executed.
///
/// `E` is the type of the scatter/gather entries of the engine's work requests.
pub trait SlotStorage<E: SgeEntry = Sge> {
    /// The ORD entries.
    fn outstanding(&self) -> &[Outstanding<E>];
    /// The ORD entries, to change.
    fn outstanding_mut(&mut self) -> &mut [Outstanding<E>];
    /// The IRD entries.
    fn pending(&self) -> &[Pending];
    /// The IRD entries, to change.
    fn pending_mut(&mut self) -> &mut [Pending];
}

/// Slot storage inside the engine.
pub struct InlineSlots<E: SgeEntry = Sge> {
    outstanding: [Outstanding<E>; DEPTH],
    pending: [Pending; DEPTH],
}

impl<E: SgeEntry> InlineSlots<E> {
    /// Empty slots.
    pub const fn new() -> Self {
        Self {
            outstanding: [Outstanding::EMPTY; DEPTH],
            pending: [Pending::Empty; DEPTH],
        }
    }
}

impl<E: SgeEntry> Default for InlineSlots<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: SgeEntry> SlotStorage<E> for InlineSlots<E> {
    fn outstanding(&self) -> &[Outstanding<E>] {
        &self.outstanding
    }
    fn outstanding_mut(&mut self) -> &mut [Outstanding<E>] {
        &mut self.outstanding
    }
    fn pending(&self) -> &[Pending] {
        &self.pending
    }
    fn pending_mut(&mut self) -> &mut [Pending] {
        &mut self.pending
    }
}

impl<E: SgeEntry> Outstanding<E> {
    /// An empty ORD entry, to fill slot storage with.
    pub const EMPTY: Self = Self {
        wr_id: 0,
        signaled: false,
        opcode: WcOpcode::RdmaRead,
        len: 0,
        sge: E::EMPTY,
        placed: 0,
        msn: 0,
        request_id: 0,
        invalidate: false,
        live: false,
        rtr: false,
        part: 0,
        last: true,
    };

    /// The STag of the sink: the RTR's ([`RTR_STAG`]) for the RTR's Read, else
    /// the entry's key.
    pub(super) fn sink_stag(&self) -> u32 {
        if self.rtr {
            RTR_STAG
        } else {
            self.sge.lkey()
        }
    }

    /// The sink entry of a live Read (not the RTR's, which has none) whose
    /// response may place `grant`: in the sink's STag, within its bytes.
    pub(super) fn read_sink(&self, grant: &Grant) -> Option<&E> {
        let access = &grant.access;
        let start = self.sge.addr();
        let end = start.checked_add(u64::from(self.sge.length()))?;
        let inside = self.live
            && !self.rtr
            && self.opcode == WcOpcode::RdmaRead
            && access.stag == self.sge.lkey()
            && access.tagged_offset >= start
            && access
                .tagged_offset
                .checked_add(access.len)
                .is_some_and(|grant_end| grant_end <= end);
        inside.then_some(&self.sge)
    }

    /// Counts the Read Response segment of `len` bytes at tagged offset `to`
    /// of `stag`, its response's last if `last`, as placed in this Read's
    /// sink if it is the segment due next (see [`qp_engine`](super)):
    /// in the sink's STag, where the segments before it ended, not past the
    /// sink's end, and if `last` ending there. `false`, and nothing counted,
    /// for any other segment.
    pub(super) fn take_response_segment(
        &mut self,
        stag: u32,
        to: u64,
        len: usize,
        last: bool,
    ) -> bool {
        let sink_len = self.sge.length();
        let next_to = self.sge.addr().checked_add(u64::from(self.placed));
        let placed = u32::try_from(len)
            .ok()
            .and_then(|len| self.placed.checked_add(len))
            .filter(|&placed| placed <= sink_len);
        let Some(placed) = placed else {
            return false;
        };
        let due = self.live
            && stag == self.sink_stag()
            && next_to == Some(to)
            && (!last || placed == sink_len);
        if due {
            self.placed = placed;
        }
        due
    }
}

impl Pending {
    /// An empty IRD entry, to fill slot storage with.
    pub const EMPTY: Self = Pending::Empty;
}
