// SPDX-License-Identifier: GPL-2.0

//! What a device reports about itself: its attributes (`query_device`), its port's attributes
//! (`query_port`) and immutable data (`get_port_immutable`), and their conversions to the
//! core's C values.

use crate::bindings;

/// How a device takes part in atomic operations (`enum ib_atomic_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AtomicCap {
    /// No atomics.
    #[default]
    None,
    /// Atomic with respect to other atomics arriving at this device.
    Hca,
    /// Atomic with respect to every access to the memory.
    Global,
}

/// Device attributes reported by `query_device` (a subset of `struct ib_device_attr`; the rest
/// is zero).
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceAttributes {
    /// System image GUID (network byte order).
    pub sys_image_guid: [u8; 8],
    /// Largest memory region.
    pub max_mr_size: u64,
    /// Supported page sizes (a bit per size).
    pub page_size_cap: u64,
    /// IEEE vendor id.
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// `IB_DEVICE_*` capability flags.
    pub device_cap_flags: u64,
    /// `IBK_*` kernel capability flags.
    pub kernel_cap_flags: u64,
    /// Queue pairs.
    pub max_qp: u32,
    /// Work requests per queue.
    pub max_qp_wr: u32,
    /// Scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Scatter/gather entries per RDMA Read.
    pub max_sge_rd: u32,
    /// Completion queues.
    pub max_cq: u32,
    /// Entries per completion queue.
    pub max_cqe: u32,
    /// Memory regions.
    pub max_mr: u32,
    /// Protection domains.
    pub max_pd: u32,
    /// Memory windows.
    pub max_mw: u32,
    /// Incoming RDMA Reads and atomics outstanding per QP (IRD).
    pub max_qp_rd_atom: u32,
    /// Outgoing RDMA Reads and atomics outstanding per QP (ORD).
    pub max_qp_init_rd_atom: u32,
    /// Incoming RDMA Reads and atomics outstanding per device.
    pub max_res_rd_atom: u32,
    /// Shared receive queues.
    pub max_srq: u32,
    /// Work requests per shared receive queue.
    pub max_srq_wr: u32,
    /// Scatter/gather entries per shared receive queue work request.
    pub max_srq_sge: u32,
    /// Pages in a fast-registration page list.
    pub max_fast_reg_page_list_len: u32,
    /// Atomics.
    pub atomic_cap: AtomicCap,
    /// Masked atomics.
    pub masked_atomic_cap: AtomicCap,
}

/// The state of a port (`enum ib_port_state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PortState {
    /// `IB_PORT_DOWN`.
    #[default]
    Down,
    /// `IB_PORT_ACTIVE`.
    Active,
}

/// Port attributes reported by `query_port` (a subset of `struct ib_port_attr`; the link
/// speed and width are filled in from the netdev by the RDMA core).
#[derive(Clone, Copy, Debug, Default)]
pub struct PortAttributes {
    /// Logical state.
    pub state: PortState,
    /// Physical link up (`IB_PORT_PHYS_STATE_LINK_UP`) or disabled.
    pub link_up: bool,
    /// Largest MTU in bytes (rounded down to an IB MTU).
    pub max_mtu: u32,
    /// Current MTU in bytes (rounded down to an IB MTU).
    pub active_mtu: u32,
    /// GID table entries.
    pub gid_tbl_len: u32,
    /// `IB_PORT_*` capability bits.
    pub port_cap_flags: u32,
    /// Largest message.
    pub max_msg_sz: u32,
}

/// What a port never changes (`struct ib_port_immutable`).
#[derive(Clone, Copy, Debug, Default)]
pub struct PortImmutable {
    /// GID table entries.
    pub gid_tbl_len: u32,
    /// P_Key table entries.
    pub pkey_tbl_len: u32,
    /// `RDMA_CORE_*` flags: the port's protocol.
    pub core_cap_flags: u32,
}

impl PortImmutable {
    /// An iWARP port with `gid_tbl_len` GIDs.
    pub const fn iwarp(gid_tbl_len: u32) -> Self {
        Self {
            gid_tbl_len,
            pkey_tbl_len: 0,
            core_cap_flags: bindings::RDMA_CORE_PORT_IWARP,
        }
    }
}

/// `IB_PORT_CM_SUP`: the port supports connection management.
pub const PORT_CM_SUP: u32 = bindings::ib_port_capability_mask_bits_IB_PORT_CM_SUP;
/// `IB_PORT_DEVICE_MGMT_SUP`.
pub const PORT_DEVICE_MGMT_SUP: u32 =
    bindings::ib_port_capability_mask_bits_IB_PORT_DEVICE_MGMT_SUP;
/// `IB_DEVICE_MEM_MGT_EXTENSIONS`: fast registration and local invalidation.
pub const DEVICE_MEM_MGT_EXTENSIONS: u64 =
    bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64;
/// `IBK_ALLOW_USER_UNREG`.
pub const KERNEL_ALLOW_USER_UNREG: u64 = bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG as u64;

pub(super) fn mtu_enum(bytes: u32) -> bindings::ib_mtu {
    match bytes {
        4096.. => bindings::ib_mtu_IB_MTU_4096,
        2048.. => bindings::ib_mtu_IB_MTU_2048,
        1024.. => bindings::ib_mtu_IB_MTU_1024,
        512.. => bindings::ib_mtu_IB_MTU_512,
        _ => bindings::ib_mtu_IB_MTU_256,
    }
}

pub(super) fn atomic_cap(cap: AtomicCap) -> bindings::ib_atomic_cap {
    match cap {
        AtomicCap::None => bindings::ib_atomic_cap_IB_ATOMIC_NONE,
        AtomicCap::Hca => bindings::ib_atomic_cap_IB_ATOMIC_HCA,
        AtomicCap::Global => bindings::ib_atomic_cap_IB_ATOMIC_GLOB,
    }
}
