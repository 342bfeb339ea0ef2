// SPDX-License-Identifier: GPL-2.0

//! The engine's state besides the stream engines: the message in flight and what finishing it
//! does ([`InFlight`], [`Job`]), where the stream is ([`Stage`]), and [`State`], what the
//! transmit and the receive side both work on.
//!
//! [`State`] is a struct of its own so that the receive side ([`RxAdapter`]) can borrow it
//! while the receive engine, a sibling field of [`QpEngine`], is being fed.

use super::*;

/// What the message in flight is, and what to do when it is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Job<E: SgeEntry> {
    /// A Send or Write work request, taken from the SQ; `then` is the
    /// Immediate Data to send after it (Send with Immediate).
    Sq {
        wr: SendRequest<E>,
        len: u32,
        then: Option<(ImmediateData, bool)>,
    },
    /// A Read or Atomic Request; it completes on its response.
    Request,
    /// A Read Response to the request in IRD `slot`.
    ReadResponse { slot: usize, source: Grant },
    /// An Atomic Response to the request in IRD `slot`.
    AtomicResponse { slot: usize },
}

/// The message in flight: its FPDUs still to produce, and its [`Job`].
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
pub(super) struct InFlight<C: Crc32c + Copy, E: SgeEntry> {
    pub(super) msg: TxMessage<'static, C>,
    pub(super) job: Job<E>,
}

impl<C: Crc32c + Copy, E: SgeEntry> InFlight<C, E> {
    /// The completion finishing it writes, if that is all finishing it does.
    pub(super) fn completion(&self) -> Option<Completion> {
        match &self.job {
            Job::Sq {
                wr,
                len,
                then: None,
            } if wr.signaled => Some(Completion::send(wr, WcStatus::Success, *len)),
            _ => None,
        }
    }
}

/// The last message received, to tell what Immediate Data completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LastRx {
    Other,
    Send { len: u32 },
    Write,
}

/// The stream's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    Running,
    /// A TERMINATE reporting `error` is to be sent; it describes the receive
    /// engine's failure if `from_rx`.
    Pending {
        error: TermError,
        from_rx: bool,
    },
    /// Our TERMINATE is out (or could not be encoded).
    Sent(TermError),
    /// The peer terminated the stream.
    Peer(TermError),
    /// Flushed without a TERMINATE.
    Flushed,
}

/// Everything but the stream engines, so that borrows stay disjoint. The fields the
/// receiving side writes with every message come last, on cache lines of their own (see
/// [`CacheLine`]).
#[derive(Debug, Clone)]
#[repr(C)]
pub(super) struct State<S: SlotStorage<E>, E: SgeEntry> {
    pub(super) pd: u32,
    pub(super) requester: Requester,
    pub(super) responder: Responder,
    pub(super) slots: S,
    pub(super) stage: Stage,
    /// The SQ head waits for an ORD credit or a fence.
    pub(super) sq_stalled: bool,
    /// A response arrived since the SQ stalled.
    pub(super) sq_unblocked: bool,
    pub(super) next_request_id: u32,
    /// What the transmitting side counted.
    pub(super) tx_stats: Stats,
    /// The Read taken from the SQ whose later parts are still to be issued;
    /// it stands for the SQ head until its last part is out.
    pub(super) split: Option<SplitRead<E>>,
    /// Starts the receiving side's fields on a cache line.
    pub(super) rx_line: [CacheLine; 0],
    /// The receive request bound to the Send in progress.
    pub(super) recv: BoundRecv<E>,
    /// Why placing into it failed, if it did.
    pub(super) recv_status: Option<WcStatus>,
    pub(super) last_rx: LastRx,
    /// What the receiving side counted.
    pub(super) rx_stats: Stats,
}

/// Aligns what follows it in a `#[repr(C)]` struct to a cache line. A QP receives on another
/// CPU than it sends (in a ping-pong, in the peer's send): state written by both sides on
/// shared lines would move between the CPUs with every message.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
pub(super) struct CacheLine;

/// A Read into several SGEs, some of whose parts (one Read Request per
/// non-empty SGE) are out and the others not yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SplitRead<E: SgeEntry> {
    /// The work request, taken from the SQ.
    pub(super) wr: SendRequest<E>,
    /// Index of the first SGE not issued yet.
    pub(super) next: u8,
    /// Parts issued.
    pub(super) parts: u8,
}

/// The receive request bound to the Send in progress, kept in place: the
/// driver takes the next one straight into it
/// ([`QpContext::pop_recv_into`]), which spares copying it around.
#[derive(Debug, Clone)]
pub(super) struct BoundRecv<E: SgeEntry> {
    pub(super) wr: RecvRequest<E>,
    pub(super) bound: bool,
}

impl<E: SgeEntry> BoundRecv<E> {
    /// The request, if one is bound.
    pub(super) fn get(&self) -> Option<&RecvRequest<E>> {
        self.bound.then_some(&self.wr)
    }

    /// Releases the request; its identifier, if one was bound.
    pub(super) fn take_id(&mut self) -> Option<u64> {
        let id = self.get().map(|wr| wr.wr_id);
        self.bound = false;
        id
    }
}
