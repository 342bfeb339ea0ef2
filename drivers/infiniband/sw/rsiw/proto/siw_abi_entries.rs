// SPDX-License-Identifier: GPL-2.0

//! The work and completion queue entries the siw user ABI
//! (`include/uapi/rdma/siw-abi.h`) shares with user space.
//!
//! rdma-core's siw provider does not pass work requests through system
//! calls. The kernel allocates the send, receive and completion queues as
//! rings that user space maps: the provider writes send queue entries
//! (`struct siw_sqe`, [`SQE_SIZE`] bytes) and receive queue entries
//! (`struct siw_rqe`, [`RQE_SIZE`] bytes) into their rings and sets
//! [`VALID`] in the entry's flags last; the kernel takes the entries, clears
//! their flags to hand the slots back, and writes completion queue entries
//! (`struct siw_cqe`, [`CQE_SIZE`] bytes) into the CQ ring, which is followed
//! by `struct siw_cq_ctrl` ([`CQ_CTRL_SIZE`] bytes) through which user space
//! arms the CQ. Speaking this ABI lets rsiw serve the unchanged provider.
//!
//! # Why decoding is done on a copy
//!
//! The entries are written by an untrusted process, which may change them at
//! any time, also while the kernel reads them. The kernel therefore reads the
//! flags once, and if they say [`VALID`], copies the entry into a local byte
//! array; [`decode_sqe`] and [`decode_rqe`] work on that copy only, so every
//! field is read once and the checks made on it still hold when the request
//! is used. An entry is copied in two steps: its first [`SQE_HEAD`] or
//! [`RQE_HEAD`] bytes, which say how much more of it counts ([`sqe_len`],
//! [`rqe_len`]), then only that; the decoder never reads past it. A small
//! Send or Write, or a receive (one SGE), is all in its head: the kernel
//! copies 40 bytes rather than 120 (32 rather than 112), and decodes the head
//! alone. No byte pattern makes them panic: any entry decodes
//! into a request or a typed error whose [`status`](SqeError::status) is the
//! completion status to report.
//!
//! All fields are in the host's byte order, as the structures are shared
//! memory between two programs on the same machine.
//!
//! # Inline data
//!
//! With [`INLINE`] set, a Send or RDMA Write carries its payload, at most
//! [`MAX_INLINE`] bytes, in the entry itself: the length in `sge[0].length`
//! and the bytes from `sge[1]` on ([`INLINE_OFFSET`]). The entry's `num_sge`
//! is then meaningless (the provider stores the work request's count of
//! gathered buffers). [`decode_sqe`] returns the request without SGEs and the
//! byte range of the data in the entry; the kernel copies those bytes into a
//! buffer of its own and substitutes an SGE for it. A Send with Invalidate
//! counts as a Send here: the provider posts it inline when asked to, and
//! unlike the C siw, which refuses it, rsiw carries it out.
//!
//! # Completions
//!
//! [`encode_cqe`] lays out everything but the flags byte, which stays 0: the
//! kernel writes the entry, then after a write barrier stores
//! [`cqe_flags`] at [`FLAGS_OFFSET`], so that user space, which polls the
//! flags, never sees a valid entry whose other fields are still being
//! written.

use core::ops::Range;

use super::qp_engine::{
    Completion, RecvRequest, SendOp, SendRequest, Sge, SgeEntry, SgeList, WcOpcode, WcStatus,
    MAX_SGE,
};
use super::wire;

/// Size of a send queue entry (`struct siw_sqe`).
pub const SQE_SIZE: usize = 120;

/// Size of a receive queue entry (`struct siw_rqe`).
pub const RQE_SIZE: usize = 112;

/// Size of a completion queue entry (`struct siw_cqe`).
pub const CQE_SIZE: usize = 32;

/// Size of the CQ control word after the CQ ring (`struct siw_cq_ctrl`:
/// `u32` flags, `u32` pad).
pub const CQ_CTRL_SIZE: usize = 8;

/// Offset of the flags field in all three entry kinds: a `u16` in SQEs and
/// RQEs, a `u8` in CQEs.
pub const FLAGS_OFFSET: usize = 8;

/// Entry flag: the entry holds a request or completion (`SIW_WQE_VALID`).
pub const VALID: u16 = 1;
/// Entry flag: the payload is inline in the entry (`SIW_WQE_INLINE`).
pub const INLINE: u16 = 2;
/// Entry flag: complete the request also on success (`SIW_WQE_SIGNALLED`).
pub const SIGNALLED: u16 = 4;
/// Entry flag: Send with Solicited Event; in a CQE, the received message
/// asked for one (`SIW_WQE_SOLICITED`).
pub const SOLICITED: u16 = 8;
/// Entry flag: wait for earlier Reads to complete (`SIW_WQE_READ_FENCE`).
pub const READ_FENCE: u16 = 16;
/// CQE flag: the received Send invalidated an STag (`SIW_WQE_REM_INVAL`).
pub const REM_INVAL: u16 = 32;
/// Entry flag: the request has completed (`SIW_WQE_COMPLETED`).
pub const COMPLETED: u16 = 64;

/// CQ control flag: signal the next solicited completion
/// (`SIW_NOTIFY_SOLICITED`).
pub const NOTIFY_SOLICITED: u32 = 1;
/// CQ control flag: signal the next completion
/// (`SIW_NOTIFY_NEXT_COMPLETION`).
pub const NOTIFY_NEXT_COMPLETION: u32 = 2;
/// CQ control flag: report completions missed while arming
/// (`SIW_NOTIFY_MISSED_EVENTS`).
pub const NOTIFY_MISSED_EVENTS: u32 = 4;

/// Most inline bytes of one SQE: the room of `sge[1..]` (`SIW_MAX_INLINE`).
pub const MAX_INLINE: usize = SGE_SIZE * (MAX_SGE - 1);

/// Offset of the inline data in an SQE: `sge[1]`.
pub const INLINE_OFFSET: usize = SQE_SGE_OFFSET + SGE_SIZE;

/// SQE opcode: RDMA Write (`SIW_OP_WRITE`).
pub const OP_WRITE: u8 = 0;
/// SQE opcode: RDMA Read (`SIW_OP_READ`).
pub const OP_READ: u8 = 1;
/// SQE opcode: RDMA Read invalidating its sink (`SIW_OP_READ_LOCAL_INV`).
pub const OP_READ_LOCAL_INV: u8 = 2;
/// SQE opcode: Send (`SIW_OP_SEND`).
pub const OP_SEND: u8 = 3;
/// SQE opcode: Send with Immediate (`SIW_OP_SEND_WITH_IMM`); the ABI has no
/// field for the value.
pub const OP_SEND_WITH_IMM: u8 = 4;
/// SQE opcode: Send with Invalidate of the STag in `rkey`
/// (`SIW_OP_SEND_REMOTE_INV`).
pub const OP_SEND_REMOTE_INV: u8 = 5;
/// SQE opcode: fetch-and-add (`SIW_OP_FETCH_AND_ADD`); the ABI has no field
/// for the operand.
pub const OP_FETCH_AND_ADD: u8 = 6;
/// SQE opcode: compare-and-swap (`SIW_OP_COMP_AND_SWAP`); the ABI has no
/// field for the operands.
pub const OP_COMP_AND_SWAP: u8 = 7;
/// CQE opcode of a receive completion (`SIW_OP_RECEIVE`).
pub const OP_RECEIVE: u8 = 8;
/// Kernel-internal SQE opcode of a Read Response (`SIW_OP_READ_RESPONSE`).
pub const OP_READ_RESPONSE: u8 = 9;
/// Kernel-internal opcode of a local invalidation (`SIW_OP_INVAL_STAG`).
pub const OP_INVAL_STAG: u8 = 10;
/// Kernel-internal opcode of a memory registration (`SIW_OP_REG_MR`).
pub const OP_REG_MR: u8 = 11;

/// The first bytes of a send queue entry: the header and `sge[0]`, which
/// hold everything [`sqe_len`] needs.
pub const SQE_HEAD: usize = SQE_SGE_OFFSET + SGE_SIZE;

/// Size of one `struct siw_sge`: `u64` address, `u32` length, `u32` lkey.
const SGE_SIZE: usize = 16;
const SGE_LENGTH_OFFSET: usize = 8;
const SGE_LKEY_OFFSET: usize = 12;

// SQE field offsets.
const ID_OFFSET: usize = 0;
const NUM_SGE_OFFSET: usize = 10;
const OPCODE_OFFSET: usize = 11;
const SQE_RKEY_OFFSET: usize = 12;
const SQE_RADDR_OFFSET: usize = 16;
const SQE_SGE_OFFSET: usize = 24;

// RQE field offsets (id, flags and num_sge as in the SQE).
const RQE_SGE_OFFSET: usize = 16;

/// The first bytes of a receive queue entry: the header and `sge[0]`, which
/// hold everything [`rqe_len`] needs.
pub const RQE_HEAD: usize = RQE_SGE_OFFSET + SGE_SIZE;

// CQE field offsets (id and flags as in the SQE).
const CQE_OPCODE_OFFSET: usize = 9;
const CQE_STATUS_OFFSET: usize = 10;
const CQE_BYTES_OFFSET: usize = 12;
const CQE_IMM_OFFSET: usize = 16;
const CQE_QP_ID_OFFSET: usize = 24;

/// A send queue entry decoded, its SGEs of type `S`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSend<S: SgeEntry = Sge> {
    /// The request; without SGEs if the payload is inline.
    pub request: SendRequest<S>,
    /// Where in the entry the inline payload lies, if it is inline; always
    /// within `INLINE_OFFSET..SQE_SIZE`.
    pub inline: Option<Range<usize>>,
}

/// Why a send queue entry was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqeError {
    /// [`VALID`] is not set: the slot holds no request (nothing to
    /// complete).
    NotValid,
    /// An opcode unknown, or one user space may not post (Receive, Read
    /// Response, local invalidation and registration).
    BadOpcode,
    /// Send with Immediate or an atomic: the ABI has no field for the
    /// operands.
    Unsupported,
    /// More than [`MAX_SGE`] SGEs.
    TooManySges,
    /// Inline data longer than [`MAX_INLINE`].
    InlineTooLong,
    /// Inline data for an opcode other than Send or RDMA Write.
    InlineNotAllowed,
}

impl SqeError {
    /// The status of the completion reporting the error.
    pub const fn status(&self) -> WcStatus {
        match self {
            Self::NotValid => WcStatus::GeneralErr,
            Self::BadOpcode | Self::Unsupported | Self::InlineNotAllowed => WcStatus::LocQpOpErr,
            Self::TooManySges | Self::InlineTooLong => WcStatus::LocLenErr,
        }
    }
}

/// Why a receive queue entry was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RqeError {
    /// [`VALID`] is not set: the slot holds no request (nothing to
    /// complete).
    NotValid,
    /// More than [`MAX_SGE`] SGEs.
    TooManySges,
}

impl RqeError {
    /// The status of the completion reporting the error.
    pub const fn status(&self) -> WcStatus {
        match self {
            Self::NotValid => WcStatus::GeneralErr,
            Self::TooManySges => WcStatus::LocLenErr,
        }
    }
}

/// The flags of an SQE or RQE, or 0 if `raw` is too short to hold them.
pub fn entry_flags(raw: &[u8]) -> u16 {
    wire::read_array(raw, FLAGS_OFFSET).map_or(0, u16::from_ne_bytes)
}

/// The work request identifier of an SQE or RQE (also of a CQE), or 0 if
/// `raw` is too short to hold it.
pub fn entry_id(raw: &[u8]) -> u64 {
    read_u64(raw, ID_OFFSET).unwrap_or(0)
}

/// A receive request slot before anything is decoded into it ([`RecvRequest::EMPTY`] of
/// plain [`Sge`]s).
pub const EMPTY_RECV: RecvRequest = RecvRequest::EMPTY;

/// How many bytes of the send queue entry whose first [`SQE_HEAD`] bytes
/// `head` holds [`decode_sqe`] reads: up to its last SGE, or with
/// [`INLINE`] up to the end of its inline data; never less than
/// [`SQE_HEAD`] nor more than [`SQE_SIZE`]. A count or length too large for
/// the entry gives the whole entry (the decoder then rejects it).
pub fn sqe_len(head: &[u8; SQE_HEAD]) -> usize {
    let end = if entry_flags(head) & INLINE != 0 {
        let len = read_u32(head, SQE_SGE_OFFSET + SGE_LENGTH_OFFSET).unwrap_or(u32::MAX);
        INLINE_OFFSET.saturating_add(usize::try_from(len).unwrap_or(usize::MAX))
    } else {
        let count = wire::read_u8(head, NUM_SGE_OFFSET).unwrap_or(u8::MAX);
        SQE_SGE_OFFSET + usize::from(count) * SGE_SIZE
    };
    end.clamp(SQE_HEAD, SQE_SIZE)
}

/// How many bytes of the receive queue entry whose first [`RQE_HEAD`] bytes
/// `head` holds [`decode_rqe`] reads: up to its last SGE, never less than
/// [`RQE_HEAD`] nor more than [`RQE_SIZE`] (a count too large for the entry
/// gives the whole entry, which the decoder then rejects).
pub fn rqe_len(head: &[u8; RQE_HEAD]) -> usize {
    let count = wire::read_u8(head, NUM_SGE_OFFSET).unwrap_or(u8::MAX);
    (RQE_SGE_OFFSET + usize::from(count) * SGE_SIZE).clamp(RQE_HEAD, RQE_SIZE)
}

/// Decodes the copy `raw` of a send queue entry; `signal_all` is the QP's
/// "signal all work requests" setting. Its SGEs are plain [`Sge`]s; decode into a request
/// of SGEs of another type with [`decode_sqe_into`].
pub fn decode_sqe(raw: &[u8; SQE_SIZE], signal_all: bool) -> Result<UserSend, SqeError> {
    let mut request = SendRequest::EMPTY;
    let inline = decode_sqe_into(raw, signal_all, &mut request)?;
    Ok(UserSend { request, inline })
}

/// [`decode_sqe`] into `out` (whose content is undefined on error): returns
/// where in `raw` the inline payload lies, if it is inline (the request then
/// has no SGEs). `raw` may be just the entry's first [`sqe_len`] bytes (at
/// least [`SQE_HEAD`]): SGEs or inline data past its end are refused as too
/// long. Each SGE is decoded as an [`Sge`] and stored as `S::from` it.
#[inline(always)]
pub fn decode_sqe_into<S: SgeEntry + From<Sge>>(
    raw: &[u8],
    signal_all: bool,
    out: &mut SendRequest<S>,
) -> Result<Option<Range<usize>>, SqeError> {
    let flags = entry_flags(raw);
    if flags & VALID == 0 {
        return Err(SqeError::NotValid);
    }
    let rkey = read_u32(raw, SQE_RKEY_OFFSET).unwrap_or(0);
    let remote_addr = read_u64(raw, SQE_RADDR_OFFSET).unwrap_or(0);
    out.op = match wire::read_u8(raw, OPCODE_OFFSET).unwrap_or(u8::MAX) {
        OP_WRITE => SendOp::Write { remote_addr, rkey },
        OP_READ => SendOp::Read { remote_addr, rkey },
        OP_READ_LOCAL_INV => SendOp::ReadInv { remote_addr, rkey },
        OP_SEND => SendOp::Send {
            solicited: flags & SOLICITED != 0,
            invalidate: None,
        },
        OP_SEND_REMOTE_INV => SendOp::Send {
            solicited: flags & SOLICITED != 0,
            invalidate: Some(rkey),
        },
        OP_SEND_WITH_IMM | OP_FETCH_AND_ADD | OP_COMP_AND_SWAP => {
            return Err(SqeError::Unsupported)
        }
        _ => return Err(SqeError::BadOpcode),
    };
    let inline = if flags & INLINE != 0 {
        if !matches!(out.op, SendOp::Send { .. } | SendOp::Write { .. }) {
            return Err(SqeError::InlineNotAllowed);
        }
        let len = read_u32(raw, SQE_SGE_OFFSET + SGE_LENGTH_OFFSET).unwrap_or(u32::MAX);
        let len = usize::try_from(len)
            .ok()
            .filter(|&len| len <= MAX_INLINE)
            .ok_or(SqeError::InlineTooLong)?;
        let end = INLINE_OFFSET
            .checked_add(len)
            .filter(|&end| end <= raw.len())
            .ok_or(SqeError::InlineTooLong)?;
        out.sges.clear();
        Some(INLINE_OFFSET..end)
    } else {
        let num_sge = wire::read_u8(raw, NUM_SGE_OFFSET).unwrap_or(u8::MAX);
        read_sges(raw, SQE_SGE_OFFSET, num_sge, &mut out.sges).ok_or(SqeError::TooManySges)?;
        None
    };
    out.wr_id = entry_id(raw);
    out.signaled = flags & SIGNALLED != 0 || signal_all;
    out.fence = flags & READ_FENCE != 0;
    Ok(inline)
}

/// Decodes the copy `raw` of a receive queue entry. Its opcode field is
/// ignored, as in the C siw. Its SGEs are plain [`Sge`]s; decode into a request of SGEs of
/// another type with [`decode_rqe_into`].
pub fn decode_rqe(raw: &[u8; RQE_SIZE]) -> Result<RecvRequest, RqeError> {
    let mut request = EMPTY_RECV;
    decode_rqe_into(raw, &mut request)?;
    Ok(request)
}

/// [`decode_rqe`] into `out` (whose content is undefined on error). `raw`
/// may be just the entry's first [`rqe_len`] bytes (at least [`RQE_HEAD`]):
/// SGEs past its end are refused as too many. Each SGE is decoded as an [`Sge`] and stored
/// as `S::from` it.
#[inline(always)]
pub fn decode_rqe_into<S: SgeEntry + From<Sge>>(
    raw: &[u8],
    out: &mut RecvRequest<S>,
) -> Result<(), RqeError> {
    if entry_flags(raw) & VALID == 0 {
        return Err(RqeError::NotValid);
    }
    let num_sge = wire::read_u8(raw, NUM_SGE_OFFSET).unwrap_or(u8::MAX);
    read_sges(raw, RQE_SGE_OFFSET, num_sge, &mut out.sges).ok_or(RqeError::TooManySges)?;
    out.wr_id = entry_id(raw);
    Ok(())
}

/// The CQE of `c` for the QP `qp_id`, with its flags byte 0: store
/// [`cqe_flags`] there last (see the module documentation).
pub fn encode_cqe(c: &Completion, qp_id: u32) -> [u8; CQE_SIZE] {
    let mut out = [0u8; CQE_SIZE];
    put(&mut out, ID_OFFSET, &c.wr_id.to_ne_bytes());
    put(&mut out, CQE_OPCODE_OFFSET, &[siw_opcode(c.opcode)]);
    put(
        &mut out,
        CQE_STATUS_OFFSET,
        &siw_status(c.status).to_ne_bytes(),
    );
    put(&mut out, CQE_BYTES_OFFSET, &c.byte_len.to_ne_bytes());
    match (c.invalidated, c.imm) {
        // The union's `inval_stag` member: its first four bytes.
        (Some(stag), _) => put(&mut out, CQE_IMM_OFFSET, &stag.to_ne_bytes()),
        (None, Some(imm)) => put(&mut out, CQE_IMM_OFFSET, &u64::from(imm).to_ne_bytes()),
        (None, None) => {}
    }
    put(&mut out, CQE_QP_ID_OFFSET, &u64::from(qp_id).to_ne_bytes());
    out
}

/// The flags byte of the CQE of `c`: [`VALID`], and [`SOLICITED`] and
/// [`REM_INVAL`] as the completion says.
pub const fn cqe_flags(c: &Completion) -> u8 {
    let mut flags = VALID;
    if c.solicited {
        flags |= SOLICITED;
    }
    if c.invalidated.is_some() {
        flags |= REM_INVAL;
    }
    // All three flags lie in the low byte.
    flags as u8
}

/// The `enum siw_opcode` value a CQE carries for `opcode`.
pub const fn siw_opcode(opcode: WcOpcode) -> u8 {
    match opcode {
        WcOpcode::Send => OP_SEND,
        WcOpcode::RdmaWrite => OP_WRITE,
        WcOpcode::RdmaRead => OP_READ,
        WcOpcode::FetchAdd | WcOpcode::MaskedFetchAdd => OP_FETCH_AND_ADD,
        WcOpcode::CompSwap | WcOpcode::MaskedCompSwap => OP_COMP_AND_SWAP,
        WcOpcode::Recv | WcOpcode::RecvRdmaWithImm => OP_RECEIVE,
        WcOpcode::LocalInv => OP_INVAL_STAG,
        WcOpcode::RegMr => OP_REG_MR,
    }
}

/// The `enum siw_wc_status` value a CQE carries for `status`; statuses the
/// ABI does not name become `SIW_WC_GENERAL_ERR`.
pub const fn siw_status(status: WcStatus) -> u16 {
    match status {
        WcStatus::Success => 0,
        WcStatus::LocLenErr => 1,
        WcStatus::LocProtErr => 2,
        WcStatus::LocQpOpErr => 3,
        WcStatus::WrFlushErr => 4,
        WcStatus::BadRespErr => 5,
        WcStatus::LocAccessErr => 6,
        WcStatus::RemAccessErr => 7,
        WcStatus::RemInvReqErr => 8,
        WcStatus::MwBindErr | WcStatus::RemOpErr | WcStatus::FatalErr | WcStatus::GeneralErr => 9,
    }
}

/// Whether a completion, `solicited` or not, is to be signalled to a CQ
/// whose control word holds `ctrl_flags`; if so, the kernel disarms the CQ by
/// resetting the word to 0.
pub const fn should_notify(ctrl_flags: u32, solicited: bool) -> bool {
    ctrl_flags & NOTIFY_NEXT_COMPLETION != 0 || (solicited && ctrl_flags & NOTIFY_SOLICITED != 0)
}

/// Reads a native-endian `u32` at `offset`.
fn read_u32(buf: &[u8], offset: usize) -> Option<u32> {
    wire::read_array(buf, offset).map(u32::from_ne_bytes)
}

/// Reads a native-endian `u64` at `offset`.
fn read_u64(buf: &[u8], offset: usize) -> Option<u64> {
    wire::read_array(buf, offset).map(u64::from_ne_bytes)
}

/// Copies `bytes` into `out` at `offset`. The callers' fields all lie
/// within `out`; one that did not would be left out rather than panic.
fn put(out: &mut [u8], offset: usize, bytes: &[u8]) {
    let _ = wire::write_bytes(out, offset, bytes);
}

/// Reads the `count` SGEs from `offset` on into `out`, each converted from the [`Sge`]
/// decoded, or `None` if `count` exceeds [`MAX_SGE`] (or `buf` is too short).
fn read_sges<S: SgeEntry + From<Sge>>(
    buf: &[u8],
    offset: usize,
    count: u8,
    out: &mut SgeList<S>,
) -> Option<()> {
    out.fill_with(usize::from(count), |i| {
        let at = offset.checked_add(i.checked_mul(SGE_SIZE)?)?;
        Some(S::from(Sge {
            addr: read_u64(buf, at)?,
            length: read_u32(buf, at.checked_add(SGE_LENGTH_OFFSET)?)?,
            lkey: read_u32(buf, at.checked_add(SGE_LKEY_OFFSET)?)?,
        }))
    })
}
