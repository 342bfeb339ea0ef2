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
//! ([`super::user_map`]), shared receive queues, memory regions, the iWARP connection
//! manager's verbs, a port's hardware counters ([`super::hw_stats`]) and counters of chosen QPs
//! ([`super::qp_counter`]), and the provider's detail of its QPs in resource tracking
//! ([`super::restrack`]). Everything else in `ib_device_ops`, and whatever a driver does not
//! implement, is left unset: user space gets `EOPNOTSUPP` for those verbs, and the core counts
//! the device as a kernel-verbs provider only if it has the mandatory ones (see
//! [`crate::rdma::consumer::client`]).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    async_event::{QpEvents, SrqEvents},
    completion_queue::{poll_cq_callback, req_notify_cq_callback, CqNotifier},
    device_settings::{SettingOutput, SettingsGroup},
    hw_stats::{alloc_hw_port_stats_callback, get_hw_stats_callback, HwCounter},
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
    qp_counter::{
        counter_alloc_stats_callback, counter_bind_qp_callback, counter_dealloc_callback,
        counter_unbind_qp_callback, counter_update_stats_callback, QpCounterId,
    },
    restrack::{
        fill_res_cm_id_entry_callback, fill_res_mr_entry_callback, fill_res_qp_entry_callback,
        RestrackAttrs,
    },
    shared_receive_queue::{
        create_srq_callback, destroy_srq_callback, modify_srq_callback, post_srq_recv_callback,
        query_srq_callback, SharedReceiveQueue, SrqAttributes, SrqContainer,
    },
    user::{
        alloc_ucontext_callback, dealloc_ucontext_callback, disassociate_ucontext_callback,
        UcontextContainer, UserData, UserVerb,
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
use core::mem::ManuallyDrop;

mod adapter;
mod attributes;

pub use adapter::Adapter;
pub use attributes::{
    AtomicCap, DeviceAttributes, PortAttributes, PortImmutable, PortState,
    DEVICE_MEM_MGT_EXTENSIONS, KERNEL_ALLOW_USER_UNREG, PORT_CM_SUP, PORT_DEVICE_MGMT_SUP,
};

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

    /// iWARP: adds the driver's detail of the connection of the iw_cm id whose
    /// [`IwCmId::key`](super::iw_provider::IwCmId::key) is `id` to `rdma resource show cm_id`
    /// ([`super::restrack`]); nothing for an id it has no connection of.
    fn fill_restrack_cm_id(
        &self,
        _dev: &Device,
        _id: usize,
        _attrs: &mut RestrackAttrs<'_>,
    ) -> Result {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// The names of the port's hardware counters ([`super::hw_stats`]), in the order
    /// [`Driver::port_counters`] fills them in; a driver with that verb names at least one.
    const PORT_COUNTERS: &'static [HwCounter] = &[];

    /// Fills in the values of `port`'s hardware counters, `values[i]` for
    /// `PORT_COUNTERS[i]`: `rdma statistic show link` and the port's `hw_counters` in sysfs.
    fn port_counters(&self, _dev: &Device, _port: u32, _values: &mut [u64]) -> Result {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Binds `qp` to the QP counter `counter` of `port` ([`super::qp_counter`]), or, when
    /// `None`, to a counter whose counts the driver makes for the call. From then on the QP
    /// counts there and not in the port's values. Returns the counter's id: `counter` when
    /// given, otherwise one no live counter of the device has. On an error nothing is bound
    /// and nothing is made.
    fn bind_qp_counter(
        &self,
        _dev: &Device,
        _counter: Option<QpCounterId>,
        _port: u32,
        _qp: &Self::Qp,
    ) -> Result<QpCounterId> {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Unbinds `qp` from its QP counter: it counts in the port's values again (called only for
    /// a driver with `bind_qp_counter`, for a bound QP).
    fn unbind_qp_counter(&self, _dev: &Device, _qp: &Self::Qp) {}

    /// QP counter `counter` has no QP left and is read no more: the driver frees its counts
    /// (called only for a driver with `bind_qp_counter`).
    fn dealloc_qp_counter(&self, _dev: &Device, _counter: QpCounterId) {}

    /// Fills in the values of QP counter `counter` of `port`, `values[i]` for
    /// `PORT_COUNTERS[i]` (called only for a driver with `bind_qp_counter`).
    fn qp_counter_values(
        &self,
        _dev: &Device,
        _counter: QpCounterId,
        _port: u32,
        _values: &mut [u64],
    ) -> Result {
        Err(EINVAL)
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
