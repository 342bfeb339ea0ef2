// SPDX-License-Identifier: GPL-2.0

//! Work requests and completions as the QP engine ([`super::qp_engine`]) takes and gives
//! them: scatter/gather lists, send and receive requests, atomic operations, completions
//! with their status and opcode. Plain data, shared by the engine, the driver's queues
//! (kernel rings and the siw user ABI's) and the tests.

use super::atomic::{self, AtomicOpcode, AtomicRequestHeader};
use super::term_error::TermError;

/// Most scatter/gather entries of one work request.
pub const MAX_SGE: usize = 6;

/// A scatter/gather entry as the engine reads it. A driver may use a type of its own that
/// carries more than the three values (e.g. a proof of where the entry came from); the engine
/// never builds one except [`Self::EMPTY`], it only copies the entries work requests hold.
pub trait SgeEntry: Copy + PartialEq + Eq + core::fmt::Debug {
    /// The entry of no bytes, at address 0 under key 0.
    const EMPTY: Self;
    /// Virtual address (or I/O virtual address) of the first byte.
    fn addr(&self) -> u64;
    /// Length in bytes.
    fn length(&self) -> u32;
    /// The local key of the region the bytes lie in.
    fn lkey(&self) -> u32;
}

/// A local buffer: (address, length, lkey), as `struct ib_sge`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    /// Virtual address of the first byte.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// The local key of the region the bytes lie in.
    pub lkey: u32,
}

impl SgeEntry for Sge {
    const EMPTY: Self = Self {
        addr: 0,
        length: 0,
        lkey: 0,
    };

    #[inline]
    fn addr(&self) -> u64 {
        self.addr
    }

    #[inline]
    fn length(&self) -> u32 {
        self.length
    }

    #[inline]
    fn lkey(&self) -> u32 {
        self.lkey
    }
}

/// Up to [`MAX_SGE`] scatter/gather entries.
///
/// Only the first `count` slots mean anything: a refill writes just the entries it has, so
/// what lies beyond them is left over from before (and two lists are equal when their
/// entries are).
#[derive(Debug, Clone, Copy)]
pub struct SgeList<S: SgeEntry = Sge> {
    sges: [S; MAX_SGE],
    count: u8,
}

impl<S: SgeEntry> PartialEq for SgeList<S> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<S: SgeEntry> Eq for SgeList<S> {}

impl<S: SgeEntry> Default for SgeList<S> {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl<S: SgeEntry> SgeList<S> {
    /// No entries.
    pub const EMPTY: Self = Self {
        sges: [S::EMPTY; MAX_SGE],
        count: 0,
    };

    /// The list holding `sges`, or `None` if there are more than
    /// [`MAX_SGE`].
    pub fn new(sges: &[S]) -> Option<Self> {
        let mut list = Self::EMPTY;
        list.sges.get_mut(..sges.len())?.copy_from_slice(sges);
        list.count = u8::try_from(sges.len()).ok()?;
        Some(list)
    }

    /// Refills the list in place with `count` entries, the `i`th being
    /// `sge(i)`. `None`, and the list left empty, if `count` exceeds
    /// [`MAX_SGE`] or `sge` fails. (Decoding into place spares the copies of
    /// a list built on the stack and moved through return values; the slots
    /// past `count` are not touched.)
    #[inline]
    pub fn fill_with(
        &mut self,
        count: usize,
        mut sge: impl FnMut(usize) -> Option<S>,
    ) -> Option<()> {
        self.count = 0;
        let slots = self.sges.get_mut(..count)?;
        for (i, slot) in slots.iter_mut().enumerate() {
            *slot = sge(i)?;
        }
        self.count = u8::try_from(count).ok()?;
        Some(())
    }

    /// The list of one entry.
    pub const fn single(sge: S) -> Self {
        let mut list = Self::EMPTY;
        // A constant index into an array of MAX_SGE >= 1 entries: checked at
        // compile time, it cannot panic.
        list.sges[0] = sge;
        list.count = 1;
        list
    }

    /// Empties the list.
    pub fn clear(&mut self) {
        self.count = 0;
    }

    /// The entries.
    pub fn as_slice(&self) -> &[S] {
        self.sges.get(..usize::from(self.count)).unwrap_or(&[])
    }

    /// The total length of the entries (`None` only if it overflowed, which
    /// six 32-bit lengths cannot).
    #[inline]
    pub fn total_len(&self) -> Option<u64> {
        self.as_slice()
            .iter()
            .try_fold(0u64, |sum, sge| sum.checked_add(u64::from(sge.length())))
    }
}

/// What a send queue work request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// Send, with optional solicited event and remote invalidation.
    Send {
        /// Send with Solicited Event.
        solicited: bool,
        /// Send with Invalidate of this STag at the peer.
        invalidate: Option<u32>,
    },
    /// Send followed by Immediate Data (see the module documentation: two
    /// receive requests at the peer).
    SendImm {
        /// The 32-bit immediate value.
        imm: u32,
        /// The Immediate Data carries a solicited event.
        solicited: bool,
    },
    /// RDMA Write of the SGEs to the peer's buffer.
    Write {
        /// Tagged offset (address) of the remote buffer.
        remote_addr: u64,
        /// STag of the remote buffer.
        rkey: u32,
    },
    /// RDMA Write followed by Immediate Data (RFC 7306 section 6).
    WriteImm {
        /// Tagged offset (address) of the remote buffer.
        remote_addr: u64,
        /// STag of the remote buffer.
        rkey: u32,
        /// The 32-bit immediate value.
        imm: u32,
    },
    /// RDMA Read into the local SGE: its lkey is the sink STag, its address
    /// the sink tagged offset, its length the read size. No SGE is a
    /// zero-length Read (sink STag and offset 0). Several SGEs (empty ones
    /// skipped) are read one after the other from consecutive source ranges,
    /// one Read Request each (see the module documentation).
    Read {
        /// Tagged offset (address) of the remote source.
        remote_addr: u64,
        /// STag of the remote source.
        rkey: u32,
    },
    /// RDMA Read whose sink region is invalidated when the read completes
    /// (`IB_WR_RDMA_READ_WITH_INV`): the sink is its single SGE, as for
    /// [`SendOp::Read`], and its lkey is the STag invalidated. Several SGEs
    /// are an error ([`WcStatus::LocQpOpErr`]).
    ReadInv {
        /// Tagged offset (address) of the remote source.
        remote_addr: u64,
        /// STag of the remote source.
        rkey: u32,
    },
    /// Fetch-and-add on the remote 64-bit word; the original value goes to
    /// the single local SGE (at least 8 bytes).
    FetchAdd {
        /// Tagged offset (address) of the remote word, 8-byte aligned.
        remote_addr: u64,
        /// STag of the remote word.
        rkey: u32,
        /// The addend.
        add: u64,
        /// Field boundaries (RFC 7306 section 5.1): each set bit is the most
        /// significant bit of a field whose carry-out is discarded. 0 is the
        /// plain 64-bit addition.
        add_mask: u64,
    },
    /// Compare-and-swap on the remote 64-bit word; the original value goes
    /// to the single local SGE (at least 8 bytes).
    CmpSwap {
        /// Tagged offset (address) of the remote word, 8-byte aligned.
        remote_addr: u64,
        /// STag of the remote word.
        rkey: u32,
        /// The value to compare with.
        compare: u64,
        /// The bits compared; all ones for the plain operation.
        compare_mask: u64,
        /// The value swapped in on a match.
        swap: u64,
        /// The bits replaced; all ones for the plain operation.
        swap_mask: u64,
    },
    /// Local: register `stag` with `access` (`ib_access_flags`), in SQ order.
    RegMr {
        /// The STag to make valid.
        stag: u32,
        /// The rights to grant.
        access: u32,
        /// The I/O virtual address of the region's first byte, as the consumer
        /// set it for this registration (it may differ from the mapping's).
        iova: u64,
        /// The region's length.
        length: u64,
    },
    /// Local: invalidate `stag`, in SQ order.
    LocalInv {
        /// The STag to invalidate.
        stag: u32,
    },
}

impl SendOp {
    /// The opcode its completion carries.
    pub const fn wc_opcode(&self) -> WcOpcode {
        match self {
            Self::Send { .. } | Self::SendImm { .. } => WcOpcode::Send,
            Self::Write { .. } | Self::WriteImm { .. } => WcOpcode::RdmaWrite,
            Self::Read { .. } | Self::ReadInv { .. } => WcOpcode::RdmaRead,
            // The masked forms are told by their masks: a plain operation is the masked one
            // with no field boundary, or with every bit compared and swapped.
            Self::FetchAdd { add_mask: 0, .. } => WcOpcode::FetchAdd,
            Self::FetchAdd { .. } => WcOpcode::MaskedFetchAdd,
            Self::CmpSwap {
                compare_mask: u64::MAX,
                swap_mask: u64::MAX,
                ..
            } => WcOpcode::CompSwap,
            Self::CmpSwap { .. } => WcOpcode::MaskedCompSwap,
            Self::RegMr { .. } => WcOpcode::RegMr,
            Self::LocalInv { .. } => WcOpcode::LocalInv,
        }
    }
}

/// A send queue work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendRequest<S: SgeEntry = Sge> {
    /// The consumer's identifier, returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// The local buffers (payload, Read sink, atomic result).
    pub sges: SgeList<S>,
    /// Complete it also on success.
    pub signaled: bool,
    /// Start it only once every earlier Read and Atomic has completed.
    pub fence: bool,
}

impl<S: SgeEntry> SendRequest<S> {
    /// A request of nothing: room before a request is decoded into it.
    pub const EMPTY: Self = Self {
        wr_id: 0,
        op: SendOp::Send {
            solicited: false,
            invalidate: None,
        },
        sges: SgeList::EMPTY,
        signaled: false,
        fence: false,
    };
}

/// A receive queue work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvRequest<S: SgeEntry = Sge> {
    /// The consumer's identifier, returned in the completion.
    pub wr_id: u64,
    /// The buffers a Send is placed into, in order.
    pub sges: SgeList<S>,
}

impl<S: SgeEntry> RecvRequest<S> {
    /// A request of nothing: room before a request is decoded into it.
    pub const EMPTY: Self = Self {
        wr_id: 0,
        sges: SgeList::EMPTY,
    };
}

/// The status of a completion, as `enum ib_wc_status` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcStatus {
    /// Done.
    Success,
    /// A length was wrong (e.g. a message or Read longer than 4 GiB, an
    /// atomic result buffer under 8 bytes, a Read whose source range would
    /// pass the end of the address space).
    LocLenErr,
    /// The request cannot be executed on this QP (e.g. a Read with
    /// Invalidate with several SGEs, or a Read with no ORD).
    LocQpOpErr,
    /// A local key or its bounds or rights were wrong.
    LocProtErr,
    /// Flushed: the QP went to the error state before it completed.
    WrFlushErr,
    /// Memory window bind failure.
    MwBindErr,
    /// The peer's response was malformed.
    BadRespErr,
    /// Local access violation.
    LocAccessErr,
    /// The peer found the request invalid.
    RemInvReqErr,
    /// The peer found a protection error (STag, bounds, rights).
    RemAccessErr,
    /// The peer could not execute the request.
    RemOpErr,
    /// Fatal error.
    FatalErr,
    /// Anything else.
    GeneralErr,
}

/// The opcode of a completion, as `enum ib_wc_opcode` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcOpcode {
    /// Send (incl. with Immediate or Invalidate).
    Send,
    /// RDMA Write (incl. with Immediate).
    RdmaWrite,
    /// RDMA Read.
    RdmaRead,
    /// Compare-and-swap.
    CompSwap,
    /// Fetch-and-add.
    FetchAdd,
    /// Masked compare-and-swap.
    MaskedCompSwap,
    /// Masked fetch-and-add.
    MaskedFetchAdd,
    /// Local invalidation.
    LocalInv,
    /// Memory registration.
    RegMr,
    /// A received Send or Immediate Data.
    Recv,
    /// Immediate Data received after an RDMA Write.
    RecvRdmaWithImm,
}

/// An entry for the completion queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The work request's identifier.
    pub wr_id: u64,
    /// How it ended.
    pub status: WcStatus,
    /// What it was.
    pub opcode: WcOpcode,
    /// Bytes transferred (see the module documentation for Immediate Data).
    pub byte_len: u32,
    /// The immediate value received.
    pub imm: Option<u32>,
    /// The STag a received Send with Invalidate invalidated.
    pub invalidated: Option<u32>,
    /// The received message asked for a solicited event.
    pub solicited: bool,
}

impl Completion {
    #[inline]
    pub(super) fn send<S: SgeEntry>(wr: &SendRequest<S>, status: WcStatus, byte_len: u32) -> Self {
        Self {
            wr_id: wr.wr_id,
            status,
            opcode: wr.op.wc_opcode(),
            byte_len,
            imm: None,
            invalidated: None,
            solicited: false,
        }
    }

    pub(super) fn recv(wr_id: u64, status: WcStatus, opcode: WcOpcode, byte_len: u32) -> Self {
        Self {
            wr_id,
            status,
            opcode,
            byte_len,
            imm: None,
            invalidated: None,
            solicited: false,
        }
    }
}

/// The atomic operation a responder executes on one aligned 64-bit word
/// (RFC 7306 section 5.1, masked forms included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOp {
    /// Masked fetch-and-add; a zero mask is the plain 64-bit addition.
    FetchAdd {
        /// The addend.
        add: u64,
        /// Each set bit is the most significant bit of a field whose
        /// carry-out is discarded.
        mask: u64,
    },
    /// Masked compare-and-swap; all-ones masks are the plain operation.
    CmpSwap {
        /// The value to compare with.
        compare: u64,
        /// The bits compared.
        compare_mask: u64,
        /// The value swapped in on a match.
        swap: u64,
        /// The bits replaced on a match.
        swap_mask: u64,
    },
}

impl AtomicOp {
    /// The new value of a word that held `old` (the reference semantics the
    /// driver's atomic execution must match).
    pub fn apply(&self, old: u64) -> u64 {
        match *self {
            Self::FetchAdd { add, mask } => atomic::masked_fetch_add(old, add, mask),
            Self::CmpSwap {
                compare,
                compare_mask,
                swap,
                swap_mask,
            } => atomic::masked_cmp_swap(old, compare, compare_mask, swap, swap_mask),
        }
    }

    /// The operation an Atomic Request asks for, or the error to terminate
    /// with if its AOpCode is not supported.
    pub fn from_request(header: &AtomicRequestHeader) -> Result<Self, TermError> {
        match header.opcode().map_err(|e| e.term())? {
            AtomicOpcode::FetchAdd => Ok(Self::FetchAdd {
                add: header.add_swap_data,
                mask: header.add_swap_mask,
            }),
            AtomicOpcode::CmpSwap => Ok(Self::CmpSwap {
                compare: header.compare_data,
                compare_mask: header.compare_mask,
                swap: header.add_swap_data,
                swap_mask: header.add_swap_mask,
            }),
        }
    }

    /// The Atomic Request asking for this operation on the word at
    /// `remote_tagged_offset` of `remote_stag`.
    pub const fn request(
        &self,
        request_id: u32,
        remote_stag: u32,
        remote_tagged_offset: u64,
    ) -> AtomicRequestHeader {
        match *self {
            Self::FetchAdd { add, mask } => AtomicRequestHeader::fetch_add(
                request_id,
                remote_stag,
                remote_tagged_offset,
                add,
                mask,
            ),
            Self::CmpSwap {
                compare,
                compare_mask,
                swap,
                swap_mask,
            } => AtomicRequestHeader::cmp_swap(
                request_id,
                remote_stag,
                remote_tagged_offset,
                compare,
                compare_mask,
                swap,
                swap_mask,
            ),
        }
    }
}
