// SPDX-License-Identifier: GPL-2.0

//! The user ABI rsiw shares with the C siw (`include/uapi/rdma/siw-abi.h`), so that
//! rdma-core's stock siw provider drives rsiw unmodified. Only what rsiw answers so far.

/// The siw user ABI version (`SIW_ABI_VERSION`).
pub(crate) const ABI_VERSION: u32 = 1;

/// The response to opening a user context (`struct siw_uresp_alloc_ctx`): `dev_id`, then 4
/// bytes of padding, in the host's byte order.
pub(crate) fn alloc_ctx_response(dev_id: u32) -> [u8; 8] {
    let mut r = [0u8; 8];
    r[..4].copy_from_slice(&dev_id.to_ne_bytes());
    r
}
