// SPDX-License-Identifier: GPL-2.0

//! A driver's ops table and the trampolines of its device verbs ([`Adapter`]), and the
//! callback that ends every device of ours (`dealloc_driver`).

use super::attributes::{atomic_cap, mtu_enum};
use super::*;
use core::marker::PhantomData;

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
            let query = |d: &T, dev: &Device| d.query_gid(dev, port, index);
            // SAFETY: A device of ours, alive for the call.
            let raw = unsafe { with_driver::<T, _>(ibdev, query) }?;
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
            ops.size_ib_ucontext = core::mem::size_of::<UcontextContainer>();
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
            ops.fill_res_qp_entry = Some(fill_res_qp_entry_callback::<T>);
            ops.size_ib_qp = core::mem::size_of::<QpContainer<T::Qp>>();
        }
        crate::rdma::provider::hw_stats::check::<T>();
        if T::HAS_PORT_COUNTERS {
            ops.alloc_hw_port_stats = Some(alloc_hw_port_stats_callback::<T>);
            ops.get_hw_stats = Some(get_hw_stats_callback::<T>);
        }
        crate::rdma::provider::qp_counter::check::<T>();
        if T::HAS_BIND_QP_COUNTER {
            ops.counter_bind_qp = Some(counter_bind_qp_callback::<T>);
            ops.counter_unbind_qp = Some(counter_unbind_qp_callback::<T>);
            ops.counter_dealloc = Some(counter_dealloc_callback::<T>);
            ops.counter_alloc_stats = Some(counter_alloc_stats_callback::<T>);
            ops.counter_update_stats = Some(counter_update_stats_callback::<T>);
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
            ops.fill_res_mr_entry = Some(fill_res_mr_entry_callback);
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
        if T::HAS_FILL_RESTRACK_CM_ID {
            ops.fill_res_cm_id_entry = Some(fill_res_cm_id_entry_callback::<T>);
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
        assert!(QUERIES.iw_add_ref.is_none() && QUERIES.fill_res_qp_entry.is_none());
        assert!(QUERIES.alloc_hw_port_stats.is_none() && QUERIES.get_hw_stats.is_none());
        assert!(QUERIES.counter_bind_qp.is_none() && QUERIES.counter_update_stats.is_none());
        assert!(QUERIES.fill_res_cm_id_entry.is_none());
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
