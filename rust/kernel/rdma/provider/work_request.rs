// SPDX-License-Identifier: GPL-2.0

//! Work requests as a provider receives them: typed views of `ib_send_wr` (and the structs
//! that extend it: `ib_rdma_wr`, `ib_atomic_wr`, `ib_reg_wr`) and `ib_recv_wr`, and the
//! `post_send`/`post_recv` verbs that hand them to a [`QueuePair`].
//!
//! The opcode decides which extension a send request really is; the view reads the extension
//! only for its opcodes, so a provider never sees fields the consumer did not write. Scatter/
//! gather entries are borrowed from the consumer's list for the duration of the call.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    device::Driver,
    objects::{queue_pair, QueuePair},
};
use crate::{bindings, error::Result, ffi::c_int, prelude::*};

/// A scatter/gather entry (`struct ib_sge`): `length` bytes at `addr` under key `lkey`, as a
/// kernel consumer posted it.
///
/// Only the views of posted work requests in this module hand entries out, so an entry is proof that a consumer posted it: a DMA MR's
/// memory is reached only through one ([`DmaMemory::range`]). The consumer keeps its bytes
/// mapped until the work request completes, which is as long as a provider may use them.
///
/// [`DmaMemory::range`]: super::memory_region::DmaMemory::range
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct Sge(bindings::ib_sge);

impl Sge {
    /// The address (for a software device, a kernel virtual address or an MR's I/O virtual
    /// address).
    pub fn addr(&self) -> u64 {
        self.0.addr
    }

    /// The length in bytes.
    pub fn length(&self) -> u32 {
        self.0.length
    }

    /// The local key of the MR it lies in.
    pub fn lkey(&self) -> u32 {
        self.0.lkey
    }
}

#[cfg(CONFIG_KUNIT)]
impl Sge {
    /// An entry as if a consumer had posted it, for the tests of what an entry grants.
    pub(super) fn posted_for_test(addr: u64, length: u32, lkey: u32) -> Self {
        Self(bindings::ib_sge { addr, length, lkey })
    }
}

impl PartialEq for Sge {
    fn eq(&self, other: &Self) -> bool {
        (self.addr(), self.length(), self.lkey()) == (other.addr(), other.length(), other.lkey())
    }
}

impl Eq for Sge {}

impl core::fmt::Debug for Sge {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Sge")
            .field("addr", &self.addr())
            .field("length", &self.length())
            .field("lkey", &self.lkey())
            .finish()
    }
}

/// What a send work request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// Send.
    Send,
    /// Send with Invalidate of the remote key.
    SendWithInvalidate(u32),
    /// Send with Immediate Data (the 32 bits as the consumer wrote them, big endian).
    SendWithImmediate(u32),
    /// RDMA Write.
    Write {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// RDMA Write with Immediate Data.
    WriteWithImmediate {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data, big endian as written.
        imm: u32,
    },
    /// RDMA Read.
    Read {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// RDMA Read, then invalidation of the local key `invalidate` (the sink's).
    ReadWithInvalidate {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// The local key to invalidate when the Read completes.
        invalidate: u32,
    },
    /// Atomic Compare and Swap; the masks are all ones unless the request is a masked one.
    CompareSwap {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Value to compare.
        compare: u64,
        /// Bits that take part in the comparison.
        compare_mask: u64,
        /// Value to swap in.
        swap: u64,
        /// Bits that are swapped.
        swap_mask: u64,
    },
    /// Atomic Fetch and Add; `field_boundaries` is zero unless the request is a masked one.
    FetchAdd {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Value to add.
        add: u64,
        /// Masked Fetch and Add: bits where carries stop.
        field_boundaries: u64,
    },
    /// Register the fast-registration MR whose key's index part is `key >> 8` under `key`.
    RegisterMr {
        /// The new key.
        key: u32,
        /// `IB_ACCESS_*` rights.
        access: u32,
        /// The MR's I/O virtual address now: consumers may change it after mapping (the NFS
        /// client puts the RPC's XID in its upper half), and this is the one peers use.
        iova: u64,
        /// The MR's length.
        length: u64,
    },
    /// Invalidate the local key.
    LocalInvalidate(u32),
    /// An opcode this view does not know.
    Other(u32),
}

/// A send work request.
pub struct SendWr<'a> {
    /// The consumer's id (or `ib_cqe` pointer), returned in the completion.
    pub wr_id: u64,
    /// What it asks for.
    pub op: SendOp,
    /// The local buffers.
    pub sges: &'a [Sge],
    /// `IB_SEND_SIGNALED`.
    pub signaled: bool,
    /// `IB_SEND_SOLICITED`.
    pub solicited: bool,
    /// `IB_SEND_FENCE`.
    pub fence: bool,
    /// `IB_SEND_INLINE`.
    pub inline: bool,
}

/// A receive work request.
pub struct RecvWr<'a> {
    /// The consumer's id, returned in the completion.
    pub wr_id: u64,
    /// The buffers.
    pub sges: &'a [Sge],
}

/// The scatter/gather list of a work request.
///
/// # Safety
///
/// `list` must point to `n` valid entries (or `n` be zero) that stay valid for `'a`.
unsafe fn sges<'a>(list: *const bindings::ib_sge, n: c_int) -> Result<&'a [Sge]> {
    let n = usize::try_from(n).map_err(|_| EINVAL)?;
    if n == 0 || list.is_null() {
        return Ok(&[]);
    }
    // SAFETY: `Sge` is a transparent `ib_sge`; the caller guarantees `n` entries for `'a`.
    Ok(unsafe { core::slice::from_raw_parts(list.cast::<Sge>(), n) })
}

/// The typed view of the receive work request `wr`.
///
/// # Safety
///
/// `wr` must be a valid receive work request, valid for `'a`.
unsafe fn recv_wr<'a>(wr: *const bindings::ib_recv_wr) -> Result<RecvWr<'a>> {
    // SAFETY: Valid (the caller's guarantee).
    let w = unsafe { &*wr };
    Ok(RecvWr {
        // SAFETY: Both members of the id union are 64 bits the consumer wrote.
        wr_id: unsafe { w.__bindgen_anon_1.wr_id },
        // SAFETY: The request's list, valid as the request is.
        sges: unsafe { sges(w.sg_list, w.num_sge) }?,
    })
}

/// The typed view of `wr`.
///
/// # Safety
///
/// `wr` must be a valid send work request whose extension matches its opcode, valid for `'a`.
unsafe fn send_wr<'a>(wr: *const bindings::ib_send_wr) -> Result<SendWr<'a>> {
    // SAFETY: `wr` is valid (the caller's guarantee).
    let w = unsafe { &*wr };
    let flags = w.send_flags;
    let has = |bit: bindings::ib_send_flags| flags & bit != 0;
    // SAFETY: Each extension is read only for the opcodes the consumer uses it with (the
    // caller's guarantee); `wr` is its first field.
    let op = unsafe {
        let rdma = || &*wr.cast::<bindings::ib_rdma_wr>();
        let atomic = || &*wr.cast::<bindings::ib_atomic_wr>();
        match w.opcode {
            bindings::ib_wr_opcode_IB_WR_SEND => SendOp::Send,
            bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV => {
                SendOp::SendWithInvalidate(w.ex.invalidate_rkey)
            }
            bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM => SendOp::SendWithImmediate(w.ex.imm_data),
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE => SendOp::Write {
                remote_addr: rdma().remote_addr,
                rkey: rdma().rkey,
            },
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM => SendOp::WriteWithImmediate {
                remote_addr: rdma().remote_addr,
                rkey: rdma().rkey,
                imm: w.ex.imm_data,
            },
            bindings::ib_wr_opcode_IB_WR_RDMA_READ => SendOp::Read {
                remote_addr: rdma().remote_addr,
                rkey: rdma().rkey,
            },
            bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV => SendOp::ReadWithInvalidate {
                remote_addr: rdma().remote_addr,
                rkey: rdma().rkey,
                invalidate: w.ex.invalidate_rkey,
            },
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP => SendOp::CompareSwap {
                remote_addr: atomic().remote_addr,
                rkey: atomic().rkey,
                compare: atomic().compare_add,
                compare_mask: !0,
                swap: atomic().swap,
                swap_mask: !0,
            },
            bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_CMP_AND_SWP => SendOp::CompareSwap {
                remote_addr: atomic().remote_addr,
                rkey: atomic().rkey,
                compare: atomic().compare_add,
                compare_mask: atomic().compare_add_mask,
                swap: atomic().swap,
                swap_mask: atomic().swap_mask,
            },
            bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => SendOp::FetchAdd {
                remote_addr: atomic().remote_addr,
                rkey: atomic().rkey,
                add: atomic().compare_add,
                field_boundaries: 0,
            },
            bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_FETCH_AND_ADD => SendOp::FetchAdd {
                remote_addr: atomic().remote_addr,
                rkey: atomic().rkey,
                add: atomic().compare_add,
                field_boundaries: atomic().compare_add_mask,
            },
            bindings::ib_wr_opcode_IB_WR_REG_MR => {
                let reg = &*wr.cast::<bindings::ib_reg_wr>();
                // The consumer's MR, valid while the request is posted.
                let (iova, length) = if reg.mr.is_null() {
                    (0, 0)
                } else {
                    ((*reg.mr).iova, (*reg.mr).length)
                };
                SendOp::RegisterMr {
                    key: reg.key,
                    access: reg.access as u32,
                    iova,
                    length,
                }
            }
            bindings::ib_wr_opcode_IB_WR_LOCAL_INV => SendOp::LocalInvalidate(w.ex.invalidate_rkey),
            other => SendOp::Other(other),
        }
    };
    Ok(SendWr {
        // SAFETY: Both members of the union are 64 bits the consumer wrote.
        wr_id: unsafe { w.__bindgen_anon_1.wr_id },
        op,
        // SAFETY: The consumer's list, valid for the call (the caller's guarantee).
        sges: unsafe { sges(w.sg_list, w.num_sge) }?,
        signaled: has(bindings::ib_send_flags_IB_SEND_SIGNALED),
        solicited: has(bindings::ib_send_flags_IB_SEND_SOLICITED),
        fence: has(bindings::ib_send_flags_IB_SEND_FENCE),
        inline: has(bindings::ib_send_flags_IB_SEND_INLINE),
    })
}

/// `post_send`: hands the chain to the QP one request at a time, then tells it the chain
/// ended; the first refused one is reported in `bad`.
///
/// # Safety
///
/// Called by the RDMA core with a live QP of ours, a valid chain (null for a doorbell) and a
/// valid `bad`.
pub(crate) unsafe extern "C" fn post_send_callback<T: Driver>(
    qp: *mut bindings::ib_qp,
    mut wr: *const bindings::ib_send_wr,
    bad: *mut *const bindings::ib_send_wr,
) -> c_int {
    // SAFETY: A live QP of ours (the caller's guarantee).
    let queue = unsafe { queue_pair::<T>(qp) };
    if wr.is_null() {
        // An empty post from user space (`wr_count` 0): the doorbell of a send queue that
        // lives in memory shared with the process.
        return match queue.doorbell() {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        };
    }
    while !wr.is_null() {
        // SAFETY: Each element of the chain is a valid request for the call.
        let posted = unsafe { send_wr(wr) }.and_then(|view| queue.post_send(&view));
        if let Err(e) = posted {
            // SAFETY: `bad` is valid for writes.
            unsafe { *bad = wr };
            queue.send_chain_end();
            return e.to_errno();
        }
        // SAFETY: As above.
        wr = unsafe { (*wr).next };
    }
    queue.send_chain_end();
    0
}

/// `post_recv`, like [`post_send_callback`].
///
/// # Safety
///
/// Called by the RDMA core with a live QP of ours, a valid chain (null for a doorbell) and a
/// valid `bad`.
pub(crate) unsafe extern "C" fn post_recv_callback<T: Driver>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_recv_wr,
    bad: *mut *const bindings::ib_recv_wr,
) -> c_int {
    // SAFETY: A live QP of ours (the caller's guarantee).
    let queue = unsafe { queue_pair::<T>(qp) };
    // SAFETY: A valid chain and `bad` (the caller's guarantee).
    unsafe { post_recv_chain(wr, bad, |view| queue.post_recv(view)) }
}

/// Hands the receive requests of the chain `wr` to `post` one at a time; the first refused one
/// is reported in `bad` and its error returned.
///
/// # Safety
///
/// `wr` is a valid chain of receive requests (or null), valid for the call, and `bad` is valid
/// for writes.
pub(crate) unsafe fn post_recv_chain(
    mut wr: *const bindings::ib_recv_wr,
    bad: *mut *const bindings::ib_recv_wr,
    mut post: impl FnMut(&RecvWr<'_>) -> Result,
) -> c_int {
    while !wr.is_null() {
        // SAFETY: Each element of the chain is a valid request for the call.
        let posted = unsafe { recv_wr(wr) }.and_then(|view| post(&view));
        if let Err(e) = posted {
            // SAFETY: `bad` is valid for writes.
            unsafe { *bad = wr };
            return e.to_errno();
        }
        // SAFETY: As above.
        wr = unsafe { (*wr).next };
    }
    0
}
