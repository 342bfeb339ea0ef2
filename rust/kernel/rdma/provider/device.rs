// SPDX-License-Identifier: GPL-2.0

//! RDMA devices: a provider's `struct ib_device`, registered with the RDMA core.
//!
//! # Lifetime
//!
//! The RDMA core owns a registered device. It allocates the memory (`_ib_alloc_device`, here a
//! container holding the `ib_device` followed by the driver's data), and any of several paths
//! may unregister it: `rdma link del`, the driver itself (its netdev went away, its module is
//! unloading), or another driver with the same driver id (`ib_unregister_driver`). At the end
//! of each path the core calls the device's `dealloc_driver`, then frees the memory. So a
//! driver never holds an owning pointer to its devices; it holds a [`DeviceSet`], which
//! knows which devices are still alive:
//!
//! - [`DeviceSet::register`] allocates, fills in and registers a device and records it;
//! - `dealloc_driver` drops the driver's data and removes the device from the set;
//! - [`DeviceSet::unregister_all`] (also run on drop) unregisters the devices still recorded
//!   and waits until every `dealloc_driver` has finished. A module keeps its set until it
//!   unloads, so no callback can run module code after the module is gone.
//!
//! Each driver has its own ops table ([`Adapter::OPS`], a constant built from its [`Driver`]
//! implementation), whose callbacks are generic over the driver and find its data in the
//! device's container with its own types. `dealloc_driver`, after which a module may unload,
//! is the exception: it is not generic, so it runs in vmlinux.
//!
//! Wrapped so far: the device-level verbs here (device and port attributes, the GID, the
//! port's immutable data, port events), user contexts ([`super::user`]), protection domains,
//! completion queues and queue pairs (create/destroy, [`super::objects`]) and user mappings
//! ([`super::user_map`]), shared receive queues, memory regions and the iWARP connection
//! manager's verbs. Everything else in `ib_device_ops`, and whatever a driver does not
//! implement, is left unset: user space gets `EOPNOTSUPP` for those verbs, and the core counts
//! the device as a kernel-verbs provider only if it has the mandatory ones (see
//! [`crate::rdma::consumer::client`]).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    async_event::{QpEvents, SrqEvents},
    completion_queue::{poll_cq_callback, req_notify_cq_callback, CqNotifier},
    device_settings::{SettingOutput, SettingsGroup},
    iw_provider::{
        iw_accept_callback, iw_connect_callback, iw_create_listen_callback,
        iw_destroy_listen_callback, iw_get_qp_callback, iw_reject_callback, IwCmId, IwConnParam,
    },
    memory_region::{
        alloc_mr_callback, dereg_mr_callback, get_dma_mr_callback, map_mr_sg_callback,
        reg_user_mr_callback, DmaMemory, NewMr, UserPages,
    },
    objects::{
        alloc_pd_callback, create_cq_callback, create_qp_callback, dealloc_pd_callback,
        destroy_cq_callback, destroy_qp_callback, iw_add_ref_callback, iw_rem_ref_callback,
        modify_qp_callback, query_qp_callback, CompletionQueue, CqAttributes, CqContainer,
        PdContainer, PdId, QpContainer, QpHandle, QpInitAttributes, QpQueues, QueuePair,
    },
    shared_receive_queue::{
        create_srq_callback, destroy_srq_callback, modify_srq_callback, post_srq_recv_callback,
        query_srq_callback, SharedReceiveQueue, SrqAttributes, SrqContainer,
    },
    user::{
        alloc_ucontext_callback, dealloc_ucontext_callback, disassociate_ucontext_callback,
        UserData, UserVerb,
    },
    user_map::{mmap_callback, mmap_free_callback},
    work_request::{post_recv_callback, post_send_callback},
};
use crate::{
    bindings,
    error::{from_result, to_result, Result, VTABLE_DEFAULT_ERROR},
    ffi::c_int,
    net::device::NetDevice,
    new_condvar, new_mutex,
    prelude::*,
    str::CStr,
    sync::{Arc, CondVar, Mutex},
    types::ARef,
};
use core::{marker::PhantomData, mem::ManuallyDrop};

/// The transport of a device's node (`enum rdma_node_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeType {
    /// An iWARP RNIC (`RDMA_NODE_RNIC`).
    Rnic,
}

/// The driver a device claims to be, which user space uses to pick its provider library
/// (`enum rdma_driver_id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverId {
    /// `RDMA_DRIVER_SIW`: the software iWARP user ABI (rdma-core's `siw` provider).
    Siw,
}

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

/// The device a callback is about.
///
/// # Invariants
///
/// `ptr` is a registered (or registering) device of a [`DeviceSet`] for the duration of the
/// borrow.
pub struct Device {
    ptr: *mut bindings::ib_device,
}

impl Device {
    /// The netdev bound to `port`, if any.
    pub fn netdev(&self, port: u32) -> Option<ARef<NetDevice>> {
        // SAFETY: `ptr` is valid (type invariant); the function returns a held reference or
        // null.
        let nd = unsafe { bindings::ib_device_get_netdev(self.ptr, port) };
        if nd.is_null() {
            return None;
        }
        // SAFETY: `nd` is valid and we own the reference `ib_device_get_netdev` took.
        Some(unsafe { ARef::from_raw(core::ptr::NonNull::from(NetDevice::from_raw(nd))) })
    }
}

/// A provider's verbs.
///
/// The four device queries are required; every other verb is optional, and one the driver does
/// not implement stays NULL in its ops table ([`Adapter`]), with the verbs that belong to it
/// (`create_cq` brings `destroy_cq`, `poll_cq` and `req_notify_cq`, and so on). So the RDMA
/// core sees what the driver has: user space gets `EOPNOTSUPP` for the rest and no command bit
/// for it, and only a driver with the core's mandatory verbs counts as a kernel-verbs provider
/// (see [`crate::rdma::consumer::client`]).
///
/// The objects the driver creates are of its own types, and the core's objects hand them back
/// as such: a new QP gets its CQs and SRQ, not names to look them up by.
#[vtable]
pub trait Driver: Send + Sync + Sized + 'static {
    /// The driver's completion queue.
    type Cq: CompletionQueue;
    /// The driver's queue pair.
    type Qp: QueuePair;
    /// The driver's shared receive queue.
    type Srq: SharedReceiveQueue;

    /// The device attributes.
    fn query_device(&self, dev: &Device) -> Result<DeviceAttributes>;
    /// The attributes of `port`.
    fn query_port(&self, dev: &Device, port: u32) -> Result<PortAttributes>;
    /// What never changes about `port`.
    fn port_immutable(&self, dev: &Device, port: u32) -> Result<PortImmutable>;
    /// GID `index` of `port`.
    fn query_gid(&self, dev: &Device, port: u32, index: u32) -> Result<[u8; 16]>;

    /// A user-space process opens the device (a user context); `udata` carries the provider
    /// library's request and takes the response. With this verb the device is offered to user
    /// space (`/dev/infiniband/uverbsN`, `ibv_devices`), and memory can be mapped into it
    /// ([`super::user_map`]).
    fn alloc_ucontext(&self, _dev: &Device, _udata: &mut UserData<'_>) -> Result {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// A user context that `alloc_ucontext` accepted is closed (called only for a driver with
    /// `alloc_ucontext`).
    fn dealloc_ucontext(&self, _dev: &Device) {}

    /// A protection domain `pd` is being created, for user space if `user`. An error fails
    /// the creation.
    fn alloc_pd(&self, _dev: &Device, _pd: PdId, _user: bool) -> Result {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// `pd`, which `alloc_pd` accepted, is being destroyed; the RDMA core guarantees nothing
    /// uses it any more (called only for a driver with `alloc_pd`).
    fn dealloc_pd(&self, _dev: &Device, _pd: PdId) {}

    /// Creates a completion queue, for user space if `user` (whose context it may map memory
    /// into); `notifier` runs the consumer's handler. Returns the queue, which lives until the
    /// CQ is destroyed, and its actual number of entries.
    fn create_cq(
        &self,
        _dev: &Device,
        _attr: &CqAttributes,
        _user: Option<&mut UserVerb<'_>>,
        _notifier: CqNotifier,
    ) -> Result<(Arc<Self::Cq>, u32)> {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a queue pair on `queues` (its CQs and SRQ, created by this driver), for user
    /// space if `user`; may lower or raise the capacities in `attr` to what it provides.
    /// `handle` is the core's object for completions and iw_cm, `events` raises its
    /// asynchronous events. Returns the queue pair and its number.
    fn create_qp(
        &self,
        _dev: &Device,
        _attr: &mut QpInitAttributes,
        _queues: QpQueues<'_, Self>,
        _user: Option<&mut UserVerb<'_>>,
        _handle: QpHandle,
        _events: QpEvents,
    ) -> Result<(Arc<Self::Qp>, u32)> {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a shared receive queue of `pd`, for user space if `user`; may raise the sizes
    /// in `attr` to what it provides. `events` raises its limit event. Returns the queue,
    /// which lives until the SRQ is destroyed.
    fn create_srq(
        &self,
        _dev: &Device,
        _pd: PdId,
        _attr: &mut SrqAttributes,
        _user: Option<&mut UserVerb<'_>>,
        _events: SrqEvents,
    ) -> Result<Arc<Self::Srq>> {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a DMA MR of `pd` with `IB_ACCESS_*` rights `access` (kernel consumers only).
    fn get_dma_mr(&self, _dev: &Device, _pd: PdId, _access: u32, _mem: DmaMemory) -> Result<NewMr> {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Registers the user memory `pages` (pinned by the core) as an MR of `pd` with
    /// `IB_ACCESS_*` rights `access`; `udata` carries the provider library's request and room
    /// for its response. The driver must drop `pages` in process context (it may sleep).
    fn reg_user_mr(
        &self,
        _dev: &Device,
        _pd: PdId,
        _access: u32,
        _pages: UserPages,
        _udata: &mut UserData<'_>,
    ) -> Result<NewMr> {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a fast-registration MR of `pd` for up to `max_pages` pages, invalid until a
    /// REG_MR work request registers it.
    fn alloc_mr(&self, _dev: &Device, _pd: PdId, _max_pages: u32) -> Result<NewMr> {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// iWARP: connects the QP `param.qpn` to the peer of `id`; the answer comes as
    /// [`IwCmId::connected`](super::iw_provider::IwCmId::connected) or an
    /// [`IwEvent::ConnectFailed`](super::iw_provider::IwEvent::ConnectFailed).
    fn iw_connect(&self, _dev: &Device, _id: IwCmId, _param: &IwConnParam<'_>) -> Result {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// iWARP: accepts the connection request `id.provider_data()` on QP `param.qpn`.
    fn iw_accept(&self, _dev: &Device, _id: IwCmId, _param: &IwConnParam<'_>) -> Result {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// iWARP: rejects the connection request `id.provider_data()` with `private_data`.
    fn iw_reject(&self, _dev: &Device, _id: IwCmId, _private_data: &[u8]) -> Result {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// iWARP: listens on the local address of `id`.
    fn iw_create_listen(&self, _dev: &Device, _id: IwCmId, _backlog: u32) -> Result {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// iWARP: stops the listener whose id has [`IwCmId::key`] `key`.
    fn iw_destroy_listen(&self, _dev: &Device, _key: usize) -> Result {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// iWARP: the QP numbered `qpn`, if it exists.
    fn iw_get_qp(&self, _dev: &Device, _qpn: u32) -> Option<QpHandle> {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// The names of the device's settings, files in its sysfs directory
    /// ([`super::device_settings`]); none by default.
    fn settings(&self) -> &'static [&'static CStr] {
        &[]
    }

    /// Shows setting `index` (of [`Driver::settings`]).
    fn show_setting(&self, _dev: &Device, _index: usize, _out: &mut SettingOutput<'_>) -> Result {
        Err(EINVAL)
    }

    /// Changes setting `index` to `value` (trimmed of surrounding white space).
    fn store_setting(&self, _dev: &Device, _index: usize, _value: &str) -> Result {
        Err(EINVAL)
    }
}

/// What a new device looks like.
pub struct DeviceInfo<'a> {
    /// Its name (`%d` gets a unique number).
    pub name: &'a CStr,
    /// Its node type.
    pub node_type: NodeType,
    /// Its driver id.
    pub driver_id: DriverId,
    /// The user verbs ABI version of its provider library.
    pub uverbs_abi_ver: u32,
    /// Node GUID (network byte order).
    pub node_guid: [u8; 8],
    /// Node description (at most 63 bytes are used).
    pub node_desc: &'a [u8],
    /// The netdev its only port is bound to.
    pub netdev: &'a NetDevice,
    /// Completion vectors.
    pub num_comp_vectors: u32,
    /// The module providing the driver, which the RDMA core pins while user space uses it.
    pub owner: &'static ThisModule,
    /// The provider library rings a doorbell with an empty `post_send` (as siw's does, whose
    /// send queues live in memory shared with the process): lets that command through to
    /// [`QueuePair::doorbell`].
    pub user_doorbell: bool,
}

/// What every device of ours starts with, whatever its driver: the core's device, then what
/// [`dealloc_driver_callback`] needs, which is not generic so that it runs in vmlinux.
#[repr(C)]
struct Header {
    ibdev: bindings::ib_device,
    set: ManuallyDrop<Arc<DeviceSet>>,
    /// The sysfs files of the driver's settings, if it has any.
    settings: ManuallyDrop<Option<KBox<SettingsGroup>>>,
    /// Drops the driver part of the container (`drop_driver::<T>`, module code).
    drop_driver: unsafe fn(*mut bindings::ib_device),
}

/// The memory `_ib_alloc_device` gives us for a device of driver `T`: the header (the device
/// first), then the driver.
#[repr(C)]
struct Container<T: Driver> {
    header: Header,
    driver: ManuallyDrop<Arc<T>>,
}

/// The header of `ibdev`.
///
/// # Safety
///
/// `ibdev` must be a device allocated by [`DeviceSet::register`] whose `dealloc_driver` has not
/// finished.
unsafe fn header<'a>(ibdev: *mut bindings::ib_device) -> &'a Header {
    // SAFETY: The device is the first field of the header, the header the first field of its
    // container (the caller's guarantee).
    unsafe { &*ibdev.cast::<Header>() }
}

/// The settings group of `ibdev`.
///
/// # Safety
///
/// `ibdev` must be a live device of ours.
pub(crate) unsafe fn settings_group<'a>(
    ibdev: *mut bindings::ib_device,
) -> Option<&'a SettingsGroup> {
    // SAFETY: The caller's guarantee; `register` wrote the field before registering.
    unsafe { header(ibdev) }.settings.as_deref()
}

/// Drops the driver part of `ibdev`'s container.
///
/// # Safety
///
/// `ibdev` must be a device that [`DeviceSet::register`] set up for `T`, in its
/// `dealloc_driver`, and this is called once.
unsafe fn drop_driver<T: Driver>(ibdev: *mut bindings::ib_device) {
    let container = ibdev.cast::<Container<T>>();
    // SAFETY: Written by `register` for this `T` (the caller's guarantee); nothing uses it
    // after the last callback, and it is taken once.
    drop(unsafe { ManuallyDrop::take(&mut (*container).driver) });
}

/// The live devices of one driver; see the module documentation.
#[pin_data]
pub struct DeviceSet {
    /// Addresses of the devices whose `dealloc_driver` has not run yet; 0 is a free slot.
    #[pin]
    devices: Mutex<KVec<usize>>,
    /// Signalled whenever a device leaves `devices`.
    #[pin]
    left: CondVar,
}

impl DeviceSet {
    /// An empty set.
    pub fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                devices <- new_mutex!(KVec::new()),
                left <- new_condvar!(),
            }),
            GFP_KERNEL,
        )
    }

    /// Creates, registers and records a device served by `driver`, with `T`'s ops table
    /// ([`Adapter`]).
    pub fn register<T: Driver>(self: &Arc<Self>, info: &DeviceInfo<'_>, driver: Arc<T>) -> Result {
        // Room in the set first, so that recording the device cannot fail after it is live.
        self.devices.lock().reserve(1, GFP_KERNEL)?;
        let names = driver.settings();
        let settings = if names.is_empty() {
            None
        } else {
            Some(SettingsGroup::new::<T>(names)?)
        };

        // SAFETY: The size covers a `Container<T>`, whose first field is the `ib_device`, as
        // `_ib_alloc_device` requires. It returns zeroed memory or null.
        let ibdev = unsafe { bindings::_ib_alloc_device(core::mem::size_of::<Container<T>>()) };
        if ibdev.is_null() {
            return Err(ENOMEM);
        }
        let container = ibdev.cast::<Container<T>>();
        // SAFETY: `container` is the fresh, suitably aligned allocation (kzalloc) of a
        // `Container<T>`; we initialise the driver part before any callback can run, and the
        // device fields before registering. The ops are `T`'s, whose callbacks find this
        // container's `T`.
        unsafe {
            core::ptr::addr_of_mut!((*container).driver).write(ManuallyDrop::new(driver));
            let header = core::ptr::addr_of_mut!((*container).header);
            core::ptr::addr_of_mut!((*header).set).write(ManuallyDrop::new(self.clone()));
            core::ptr::addr_of_mut!((*header).settings).write(ManuallyDrop::new(settings));
            core::ptr::addr_of_mut!((*header).drop_driver).write(drop_driver::<T>);
            bindings::ib_set_device_ops(ibdev, &Adapter::<T>::OPS);
            if let Some(group) = (*header).settings.as_deref() {
                (*ibdev).ops.device_group = group.as_raw();
            }
            (*ibdev).ops.owner = info.owner.as_ptr();
            (*ibdev).ops.driver_id = match info.driver_id {
                DriverId::Siw => bindings::rdma_driver_id_RDMA_DRIVER_SIW,
            };
            (*ibdev).ops.uverbs_abi_ver = info.uverbs_abi_ver;
            (*ibdev).node_type = match info.node_type {
                NodeType::Rnic => bindings::RDMA_NODE_RNIC as u8,
            };
            (*ibdev).node_guid = u64::from_ne_bytes(info.node_guid);
            let desc = &mut (*ibdev).node_desc;
            let room = desc.len() - 1;
            for (d, s) in desc.iter_mut().zip(info.node_desc.iter().take(room)) {
                *d = *s as _;
            }
            (*ibdev).phys_port_cnt = 1;
            (*ibdev).num_comp_vectors = info.num_comp_vectors.max(1) as c_int;
            let ifname = info.netdev.name();
            for (d, s) in (*ibdev).iw_ifname.iter_mut().zip(ifname) {
                *d = s as _;
            }
            (*ibdev).iw_driver_flags = bindings::iw_flags_IW_F_NO_PORT_MAP;
            if info.user_doorbell {
                (*ibdev).uverbs_cmd_mask |=
                    1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND;
            }
        }

        // SAFETY: `ibdev` is allocated and not registered; the netdev is valid. On failure we
        // still own the device and free it with `ib_dealloc_device`, which runs
        // `dealloc_driver` and so drops the driver part.
        let ret = unsafe {
            let mut ret = bindings::ib_device_set_netdev(ibdev, info.netdev.as_raw(), 1);
            if ret == 0 {
                ret = bindings::ib_register_device(
                    ibdev,
                    info.name.as_char_ptr(),
                    core::ptr::null_mut(),
                );
            }
            ret
        };
        if ret != 0 {
            // `dealloc_driver` expects to find the device in the set.
            self.record(ibdev);
            // SAFETY: Registration failed, so the device is still ours to free.
            unsafe { bindings::ib_dealloc_device(ibdev) };
            return to_result(ret);
        }
        // From here the core owns the device; it may even be gone already (a concurrent
        // unregistration), in which case `dealloc_driver` removed it — or finds it absent.
        self.record(ibdev);
        Ok(())
    }

    fn record(&self, ibdev: *mut bindings::ib_device) {
        let mut devices = self.devices.lock();
        if let Some(slot) = devices.iter_mut().find(|d| **d == 0) {
            *slot = ibdev as usize;
        } else if devices.push(ibdev as usize, GFP_ATOMIC).is_err() {
            // Cannot happen: `register` reserved the room.
            pr_warn!("rdma: could not record a device\n");
        }
    }

    fn forget(&self, ibdev: *mut bindings::ib_device) {
        let mut devices = self.devices.lock();
        if let Some(slot) = devices.iter_mut().find(|d| **d == ibdev as usize) {
            *slot = 0;
        }
        drop(devices);
        self.left.notify_all();
    }

    /// Unregisters every live device of the set and waits until all of them are gone.
    pub fn unregister_all(&self) {
        loop {
            let mut devices = self.devices.lock();
            // Pick a device we can take a registration reference on; the others are being
            // unregistered by someone else already.
            let mut picked = None;
            for &d in devices.iter().filter(|&&d| d != 0) {
                // SAFETY: A recorded device has not run `dealloc_driver` yet, so its memory is
                // alive while we hold the set's lock (`dealloc_driver` takes it to leave).
                if unsafe { bindings::ib_device_try_get(d as *mut bindings::ib_device) } {
                    picked = Some(d);
                    break;
                }
            }
            match picked {
                Some(d) => {
                    drop(devices);
                    // SAFETY: We hold the registration reference taken above, which this
                    // consumes; the function copes with concurrent unregistration.
                    unsafe {
                        bindings::ib_unregister_device_and_put(d as *mut bindings::ib_device)
                    };
                }
                None if devices.iter().all(|&d| d == 0) => return,
                None => {
                    // Wait for the unregistrations in flight.
                    let _ = self.left.wait_interruptible_timeout(&mut devices, 100);
                }
            }
        }
    }
}

/// A port event for the consumers of a device (`IB_EVENT_PORT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortEvent {
    /// The port became active.
    Active,
    /// The port went down.
    Error,
}

impl DeviceSet {
    /// Runs `f` with the registered device of this set bound to `netdev`, if there is one,
    /// holding a registration reference. `id` is the devices' driver id.
    fn with_netdev_device(
        &self,
        netdev: &NetDevice,
        id: DriverId,
        f: impl FnOnce(*mut bindings::ib_device),
    ) {
        let id = match id {
            DriverId::Siw => bindings::rdma_driver_id_RDMA_DRIVER_SIW,
        };
        // SAFETY: `netdev` is valid; this returns a device with a registration reference, or
        // null. It finds the device even while the netdev is unregistering.
        let dev = unsafe { bindings::ib_device_get_by_netdev(netdev.as_raw(), id) };
        if dev.is_null() {
            return;
        }
        // Another driver with the same id (the C siw) may own it.
        if self.devices.lock().contains(&(dev as usize)) {
            f(dev);
        }
        // SAFETY: Drops the reference taken above.
        unsafe { bindings::ib_device_put(dev) };
    }

    /// Starts unregistering the device of this set bound to `netdev`, if there is one, without
    /// waiting: safe under RTNL, from a netdev notifier. `id` is the devices' driver id.
    pub fn unregister_netdev_queued(&self, netdev: &NetDevice, id: DriverId) {
        self.with_netdev_device(netdev, id, |dev| {
            // SAFETY: `dev` is registered and `with_netdev_device` holds a registration
            // reference.
            unsafe { bindings::ib_unregister_device_queued(dev) };
        });
    }

    /// Tells the consumers of the device of this set bound to `netdev` (if any) that its port
    /// changed state.
    pub fn port_event(&self, netdev: &NetDevice, id: DriverId, event: PortEvent) {
        self.with_netdev_device(netdev, id, |dev| {
            let ev = bindings::ib_event {
                device: dev,
                element: bindings::ib_event__bindgen_ty_1 { port_num: 1 },
                event: match event {
                    PortEvent::Active => bindings::ib_event_type_IB_EVENT_PORT_ACTIVE,
                    PortEvent::Error => bindings::ib_event_type_IB_EVENT_PORT_ERR,
                },
            };
            // SAFETY: `dev` is registered and referenced for the call; `ev` is a valid event
            // for its only port. Event handlers run under a spinlock and do not sleep.
            unsafe { bindings::ib_dispatch_event(&ev) };
        });
    }
}

/// Makes sure no device outlives the set's owner (a module, typically).
pub struct DeviceSetOwner(Arc<DeviceSet>);

impl DeviceSetOwner {
    /// A new, empty set owned by the caller.
    pub fn new() -> Result<Self> {
        Ok(Self(DeviceSet::new()?))
    }

    /// The set, to register devices in.
    pub fn set(&self) -> &Arc<DeviceSet> {
        &self.0
    }
}

impl Drop for DeviceSetOwner {
    fn drop(&mut self) {
        self.0.unregister_all();
    }
}

/// Runs `f` with the driver and a `Device` for `ibdev`.
///
/// # Safety
///
/// `ibdev` must be a device that [`DeviceSet::register`] set up for `T` (a callback of
/// `T`'s ops table gets only those) whose `dealloc_driver` has not started.
pub(crate) unsafe fn with_driver<T: Driver, R>(
    ibdev: *mut bindings::ib_device,
    f: impl FnOnce(&T, &Device) -> R,
) -> R {
    // SAFETY: The device is the first field of a `Container<T>` (the caller's guarantee).
    let c = unsafe { &*ibdev.cast::<Container<T>>() };
    // INVARIANT: The device is alive for the call.
    f(&c.driver, &Device { ptr: ibdev })
}

pub(crate) fn c_int_of(v: u32) -> c_int {
    v.min(c_int::MAX as u32) as c_int
}

fn mtu_enum(bytes: u32) -> bindings::ib_mtu {
    match bytes {
        4096.. => bindings::ib_mtu_IB_MTU_4096,
        2048.. => bindings::ib_mtu_IB_MTU_2048,
        1024.. => bindings::ib_mtu_IB_MTU_1024,
        512.. => bindings::ib_mtu_IB_MTU_512,
        _ => bindings::ib_mtu_IB_MTU_256,
    }
}

fn atomic_cap(cap: AtomicCap) -> bindings::ib_atomic_cap {
    match cap {
        AtomicCap::None => bindings::ib_atomic_cap_IB_ATOMIC_NONE,
        AtomicCap::Hca => bindings::ib_atomic_cap_IB_ATOMIC_HCA,
        AtomicCap::Global => bindings::ib_atomic_cap_IB_ATOMIC_GLOB,
    }
}

/// `dealloc_driver`: the last callback of a device, before the core frees it. Not generic, so
/// that it runs in vmlinux: once the set hears of it, the driver's module may go.
///
/// # Safety
///
/// Called once by the RDMA core with a device of ours, after every other callback.
unsafe extern "C" fn dealloc_driver_callback(ibdev: *mut bindings::ib_device) {
    let header = ibdev.cast::<Header>();
    // SAFETY: The header was initialised by `register` and nothing uses it after this last
    // callback; `ManuallyDrop::take` moves each out exactly once.
    let (set, settings, drop_driver) = unsafe {
        (
            ManuallyDrop::take(&mut (*header).set),
            ManuallyDrop::take(&mut (*header).settings),
            (*header).drop_driver,
        )
    };
    // The core removed the settings' files when it unregistered the device.
    drop(settings);
    // The driver's data (module code runs here) goes before the set hears of it, so a module
    // waiting in `unregister_all` cannot unload under it.
    // SAFETY: `register` stored the function for the container's driver type; called once.
    unsafe { drop_driver(ibdev) };
    set.forget(ibdev);
}

/// The trampolines of driver `T`'s device verbs, and its ops table: the callbacks the RDMA core
/// calls for a device of `T`, each finding `T`'s data in the device's container. Those of the
/// objects (CQs, QPs, SRQs, MRs, user contexts, iw_cm) are generic functions of the modules
/// that wrap them, over the same `T`.
pub struct Adapter<T: Driver>(PhantomData<T>);

impl<T: Driver> Adapter<T> {
    /// `query_device`.
    ///
    /// # Safety
    ///
    /// Called by the RDMA core with a device of ours, a writable `attr` and a valid or null
    /// `udata`.
    pub(crate) unsafe extern "C" fn query_device(
        ibdev: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // The siw ABI passes no driver data with this verb.
            // SAFETY: `udata` is valid or null.
            if let Some(u) = unsafe { udata.as_ref() } {
                if u.inlen != 0 || u.outlen != 0 {
                    return Err(EINVAL);
                }
            }
            // SAFETY: A device of ours, alive for the call.
            let a = unsafe { with_driver::<T, _>(ibdev, |d, dev| d.query_device(dev)) }?;
            let c = bindings::ib_device_attr {
                sys_image_guid: u64::from_ne_bytes(a.sys_image_guid),
                max_mr_size: a.max_mr_size,
                page_size_cap: a.page_size_cap,
                vendor_id: a.vendor_id,
                vendor_part_id: a.vendor_part_id,
                device_cap_flags: a.device_cap_flags,
                kernel_cap_flags: a.kernel_cap_flags,
                max_qp: c_int_of(a.max_qp),
                max_qp_wr: c_int_of(a.max_qp_wr),
                max_send_sge: c_int_of(a.max_send_sge),
                max_recv_sge: c_int_of(a.max_recv_sge),
                max_sge_rd: c_int_of(a.max_sge_rd),
                max_cq: c_int_of(a.max_cq),
                max_cqe: c_int_of(a.max_cqe),
                max_mr: c_int_of(a.max_mr),
                max_pd: c_int_of(a.max_pd),
                max_mw: c_int_of(a.max_mw),
                max_qp_rd_atom: c_int_of(a.max_qp_rd_atom),
                max_qp_init_rd_atom: c_int_of(a.max_qp_init_rd_atom),
                max_res_rd_atom: c_int_of(a.max_res_rd_atom),
                max_srq: c_int_of(a.max_srq),
                max_srq_wr: c_int_of(a.max_srq_wr),
                max_srq_sge: c_int_of(a.max_srq_sge),
                max_fast_reg_page_list_len: a.max_fast_reg_page_list_len,
                atomic_cap: atomic_cap(a.atomic_cap),
                masked_atomic_cap: atomic_cap(a.masked_atomic_cap),
                ..Default::default()
            };
            // SAFETY: `attr` is writable (the caller's guarantee).
            unsafe { attr.write(c) };
            Ok(0)
        })
    }

    /// `query_port`.
    ///
    /// # Safety
    ///
    /// Called by the RDMA core with a device of ours and a writable `attr`.
    pub(crate) unsafe extern "C" fn query_port(
        ibdev: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: A device of ours, alive for the call.
            let a = unsafe { with_driver::<T, _>(ibdev, |d, dev| d.query_port(dev, port)) }?;
            let mut c = bindings::ib_port_attr {
                state: match a.state {
                    PortState::Down => bindings::ib_port_state_IB_PORT_DOWN,
                    PortState::Active => bindings::ib_port_state_IB_PORT_ACTIVE,
                },
                phys_state: if a.link_up {
                    bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8
                } else {
                    bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8
                },
                max_mtu: mtu_enum(a.max_mtu),
                active_mtu: mtu_enum(a.active_mtu),
                gid_tbl_len: c_int_of(a.gid_tbl_len),
                port_cap_flags: a.port_cap_flags,
                max_msg_sz: a.max_msg_sz,
                ..Default::default()
            };
            // SAFETY: A device of ours; the out pointers are fields of `c`.
            to_result(unsafe {
                bindings::ib_get_eth_speed(ibdev, port, &mut c.active_speed, &mut c.active_width)
            })?;
            // SAFETY: `attr` is writable (the caller's guarantee).
            unsafe { attr.write(c) };
            Ok(0)
        })
    }

    /// `get_port_immutable`.
    ///
    /// # Safety
    ///
    /// Called by the RDMA core with a device of ours and a writable `imm`.
    pub(crate) unsafe extern "C" fn port_immutable(
        ibdev: *mut bindings::ib_device,
        port: u32,
        imm: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: A device of ours, alive for the call.
            let p = unsafe { with_driver::<T, _>(ibdev, |d, dev| d.port_immutable(dev, port)) }?;
            // SAFETY: `imm` is writable (the caller's guarantee).
            unsafe {
                (*imm).gid_tbl_len = c_int_of(p.gid_tbl_len);
                (*imm).pkey_tbl_len = c_int_of(p.pkey_tbl_len);
                (*imm).core_cap_flags = p.core_cap_flags;
            }
            Ok(0)
        })
    }

    /// `query_gid`.
    ///
    /// # Safety
    ///
    /// Called by the RDMA core with a device of ours and a writable `gid`.
    pub(crate) unsafe extern "C" fn query_gid(
        ibdev: *mut bindings::ib_device,
        port: u32,
        index: c_int,
        gid: *mut bindings::ib_gid,
    ) -> c_int {
        from_result(|| {
            let index = u32::try_from(index).map_err(|_| EINVAL)?;
            // SAFETY: A device of ours, alive for the call.
            let raw =
                unsafe { with_driver::<T, _>(ibdev, |d, dev| d.query_gid(dev, port, index)) }?;
            // SAFETY: `gid` is writable (the caller's guarantee); the union is plain bytes.
            unsafe { (*gid).raw = raw };
            Ok(0)
        })
    }

    /// `T`'s ops table: the verbs it implements, the others NULL ([`Driver`]). The core copies
    /// it into each device (`ib_set_device_ops`).
    pub const OPS: bindings::ib_device_ops = {
        // SAFETY: `ib_device_ops` is plain data (function pointers and integers), for which
        // all zeroes is valid: no callback, no values.
        let mut ops: bindings::ib_device_ops = unsafe { core::mem::zeroed() };
        ops.query_device = Some(Self::query_device);
        ops.query_port = Some(Self::query_port);
        ops.get_port_immutable = Some(Self::port_immutable);
        ops.query_gid = Some(Self::query_gid);
        ops.dealloc_driver = Some(dealloc_driver_callback);
        if T::HAS_ALLOC_UCONTEXT {
            ops.alloc_ucontext = Some(alloc_ucontext_callback::<T>);
            ops.dealloc_ucontext = Some(dealloc_ucontext_callback::<T>);
            ops.disassociate_ucontext = Some(disassociate_ucontext_callback);
            ops.mmap = Some(mmap_callback);
            ops.mmap_free = Some(mmap_free_callback);
            // No driver data is embedded: the bare core object.
            ops.size_ib_ucontext = core::mem::size_of::<bindings::ib_ucontext>();
        }
        if T::HAS_ALLOC_PD {
            ops.alloc_pd = Some(alloc_pd_callback::<T>);
            ops.dealloc_pd = Some(dealloc_pd_callback::<T>);
            ops.size_ib_pd = core::mem::size_of::<PdContainer>();
        }
        if T::HAS_CREATE_CQ {
            ops.create_cq = Some(create_cq_callback::<T>);
            ops.destroy_cq = Some(destroy_cq_callback::<T>);
            ops.poll_cq = Some(poll_cq_callback::<T>);
            ops.req_notify_cq = Some(req_notify_cq_callback::<T>);
            ops.size_ib_cq = core::mem::size_of::<CqContainer<T::Cq>>();
        }
        if T::HAS_CREATE_QP {
            ops.create_qp = Some(create_qp_callback::<T>);
            ops.destroy_qp = Some(destroy_qp_callback::<T>);
            ops.modify_qp = Some(modify_qp_callback::<T>);
            ops.query_qp = Some(query_qp_callback::<T>);
            ops.post_send = Some(post_send_callback::<T>);
            ops.post_recv = Some(post_recv_callback::<T>);
            ops.iw_add_ref = Some(iw_add_ref_callback::<T>);
            ops.iw_rem_ref = Some(iw_rem_ref_callback::<T>);
            ops.size_ib_qp = core::mem::size_of::<QpContainer<T::Qp>>();
        }
        if T::HAS_CREATE_SRQ {
            ops.create_srq = Some(create_srq_callback::<T>);
            ops.modify_srq = Some(modify_srq_callback::<T>);
            ops.query_srq = Some(query_srq_callback::<T>);
            ops.destroy_srq = Some(destroy_srq_callback::<T>);
            ops.post_srq_recv = Some(post_srq_recv_callback::<T>);
            ops.size_ib_srq = core::mem::size_of::<SrqContainer<T::Srq>>();
        }
        if T::HAS_GET_DMA_MR {
            ops.get_dma_mr = Some(get_dma_mr_callback::<T>);
        }
        if T::HAS_ALLOC_MR {
            ops.alloc_mr = Some(alloc_mr_callback::<T>);
            ops.map_mr_sg = Some(map_mr_sg_callback);
        }
        if T::HAS_REG_USER_MR {
            ops.reg_user_mr = Some(reg_user_mr_callback::<T>);
        }
        if T::HAS_GET_DMA_MR || T::HAS_ALLOC_MR || T::HAS_REG_USER_MR {
            ops.dereg_mr = Some(dereg_mr_callback);
        }
        if T::HAS_IW_CONNECT {
            ops.iw_connect = Some(iw_connect_callback::<T>);
        }
        if T::HAS_IW_ACCEPT {
            ops.iw_accept = Some(iw_accept_callback::<T>);
        }
        if T::HAS_IW_REJECT {
            ops.iw_reject = Some(iw_reject_callback::<T>);
        }
        if T::HAS_IW_CREATE_LISTEN {
            ops.iw_create_listen = Some(iw_create_listen_callback::<T>);
        }
        if T::HAS_IW_DESTROY_LISTEN {
            ops.iw_destroy_listen = Some(iw_destroy_listen_callback::<T>);
        }
        if T::HAS_IW_GET_QP {
            ops.iw_get_qp = Some(iw_get_qp_callback::<T>);
        }
        ops
    };
}

/// The ops tables of two drivers, checked when the crate is built: the verbs a driver does not
/// implement are NULL, those it does are set with what belongs to them.
mod ops_checks {
    use super::*;
    use crate::rdma::provider::objects::Unsupported;

    /// Only the required device queries.
    struct Queries;

    #[vtable]
    impl Driver for Queries {
        type Cq = Unsupported;
        type Qp = Unsupported;
        type Srq = Unsupported;

        fn query_device(&self, _dev: &Device) -> Result<DeviceAttributes> {
            Err(EINVAL)
        }
        fn query_port(&self, _dev: &Device, _port: u32) -> Result<PortAttributes> {
            Err(EINVAL)
        }
        fn port_immutable(&self, _dev: &Device, _port: u32) -> Result<PortImmutable> {
            Err(EINVAL)
        }
        fn query_gid(&self, _dev: &Device, _port: u32, _index: u32) -> Result<[u8; 16]> {
            Err(EINVAL)
        }
    }

    /// The queries, PDs and CQs.
    struct WithCqs;

    #[vtable]
    impl Driver for WithCqs {
        type Cq = Unsupported;
        type Qp = Unsupported;
        type Srq = Unsupported;

        fn query_device(&self, _dev: &Device) -> Result<DeviceAttributes> {
            Err(EINVAL)
        }
        fn query_port(&self, _dev: &Device, _port: u32) -> Result<PortAttributes> {
            Err(EINVAL)
        }
        fn port_immutable(&self, _dev: &Device, _port: u32) -> Result<PortImmutable> {
            Err(EINVAL)
        }
        fn query_gid(&self, _dev: &Device, _port: u32, _index: u32) -> Result<[u8; 16]> {
            Err(EINVAL)
        }
        fn alloc_pd(&self, _dev: &Device, _pd: PdId, _user: bool) -> Result {
            Ok(())
        }
        fn create_cq(
            &self,
            _dev: &Device,
            _attr: &CqAttributes,
            _user: Option<&mut UserVerb<'_>>,
            _notifier: CqNotifier,
        ) -> Result<(Arc<Unsupported>, u32)> {
            Err(EINVAL)
        }
    }

    const QUERIES: bindings::ib_device_ops = Adapter::<Queries>::OPS;
    const WITH_CQS: bindings::ib_device_ops = Adapter::<WithCqs>::OPS;

    const _: () = {
        assert!(QUERIES.query_device.is_some() && QUERIES.query_port.is_some());
        assert!(QUERIES.get_port_immutable.is_some() && QUERIES.query_gid.is_some());
        assert!(QUERIES.dealloc_driver.is_some());
        assert!(QUERIES.alloc_ucontext.is_none() && QUERIES.mmap.is_none());
        assert!(QUERIES.alloc_pd.is_none() && QUERIES.dealloc_pd.is_none());
        assert!(QUERIES.create_cq.is_none() && QUERIES.poll_cq.is_none());
        assert!(QUERIES.create_qp.is_none() && QUERIES.post_send.is_none());
        assert!(QUERIES.create_srq.is_none() && QUERIES.post_srq_recv.is_none());
        assert!(QUERIES.get_dma_mr.is_none() && QUERIES.dereg_mr.is_none());
        assert!(QUERIES.reg_user_mr.is_none() && QUERIES.alloc_mr.is_none());
        assert!(QUERIES.iw_connect.is_none() && QUERIES.iw_get_qp.is_none());
        assert!(QUERIES.iw_add_ref.is_none());
        assert!(QUERIES.size_ib_pd == 0 && QUERIES.size_ib_cq == 0 && QUERIES.size_ib_qp == 0);

        assert!(WITH_CQS.alloc_pd.is_some() && WITH_CQS.dealloc_pd.is_some());
        assert!(WITH_CQS.size_ib_pd == core::mem::size_of::<PdContainer>());
        assert!(WITH_CQS.create_cq.is_some() && WITH_CQS.destroy_cq.is_some());
        assert!(WITH_CQS.poll_cq.is_some() && WITH_CQS.req_notify_cq.is_some());
        assert!(WITH_CQS.size_ib_cq == core::mem::size_of::<CqContainer<Unsupported>>());
        assert!(WITH_CQS.create_qp.is_none() && WITH_CQS.size_ib_qp == 0);
        assert!(WITH_CQS.alloc_ucontext.is_none() && WITH_CQS.get_dma_mr.is_none());
    };
}

/// Whether `netdev` already has a device of driver `id` bound to it.
pub fn netdev_has_device(netdev: &NetDevice, id: DriverId) -> bool {
    let id = match id {
        DriverId::Siw => bindings::rdma_driver_id_RDMA_DRIVER_SIW,
    };
    // SAFETY: `netdev` is valid; the function returns a device with a reference, or null.
    let dev = unsafe { bindings::ib_device_get_by_netdev(netdev.as_raw(), id) };
    if dev.is_null() {
        return false;
    }
    // SAFETY: Drops the reference `ib_device_get_by_netdev` took.
    unsafe { bindings::ib_device_put(dev) };
    true
}
