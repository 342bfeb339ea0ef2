// SPDX-License-Identifier: GPL-2.0

//! The responses of the verbs in the user ABI rsiw shares with the C siw
//! (`include/uapi/rdma/siw-abi.h`), so that rdma-core's stock siw provider drives rsiw
//! unmodified.
//!
//! The ABI has three parts in rsiw: these responses; the entries of the queues shared with a
//! process, decoded and encoded by pure code in `proto/siw_abi_entries.rs`; and the send and
//! receive rings of a process's QP, in [`crate::user_rings`].

pub(crate) use crate::proto::siw_abi_entries::{CQE_SIZE, CQ_CTRL_SIZE, RQE_SIZE, SQE_SIZE};

/// The siw user ABI version (`SIW_ABI_VERSION`).
pub(crate) const ABI_VERSION: u32 = 1;

/// The response to opening a user context (`struct siw_uresp_alloc_ctx`): `dev_id`, then 4
/// bytes of padding, in the host's byte order.
pub(crate) fn alloc_ctx_response(dev_id: u32) -> [u8; 8] {
    let mut r = [0u8; 8];
    r[..4].copy_from_slice(&dev_id.to_ne_bytes());
    r
}

/// The response to creating a completion queue (`struct siw_uresp_create_cq`): its id, its
/// number of entries and the `mmap` offset of its ring.
pub(crate) fn create_cq_response(cq_id: u32, num_cqe: u32, cq_key: u64) -> [u8; 16] {
    let mut r = [0u8; 16];
    r[..4].copy_from_slice(&cq_id.to_ne_bytes());
    r[4..8].copy_from_slice(&num_cqe.to_ne_bytes());
    r[8..].copy_from_slice(&cq_key.to_ne_bytes());
    r
}

/// The response to creating a queue pair (`struct siw_uresp_create_qp`): its number, the sizes
/// of its send and receive queues, and the `mmap` offsets of their rings (0 for none).
pub(crate) fn create_qp_response(
    qp_id: u32,
    num_sqe: u32,
    num_rqe: u32,
    sq_key: u64,
    rq_key: u64,
) -> [u8; 32] {
    let mut r = [0u8; 32];
    r[..4].copy_from_slice(&qp_id.to_ne_bytes());
    r[4..8].copy_from_slice(&num_sqe.to_ne_bytes());
    r[8..12].copy_from_slice(&num_rqe.to_ne_bytes());
    r[16..24].copy_from_slice(&sq_key.to_ne_bytes());
    r[24..].copy_from_slice(&rq_key.to_ne_bytes());
    r
}

/// The response to registering a user memory region (`struct siw_uresp_reg_mr`): its STag,
/// then 4 bytes of padding.
pub(crate) fn reg_mr_response(stag: u32) -> [u8; 8] {
    let mut r = [0u8; 8];
    r[..4].copy_from_slice(&stag.to_ne_bytes());
    r
}

/// The response to creating a shared receive queue (`struct siw_uresp_create_srq`): its
/// number of entries, padding, and the `mmap` offset of its ring.
pub(crate) fn create_srq_response(num_rqe: u32, srq_key: u64) -> [u8; 16] {
    let mut r = [0u8; 16];
    r[..4].copy_from_slice(&num_rqe.to_ne_bytes());
    r[8..].copy_from_slice(&srq_key.to_ne_bytes());
    r
}
