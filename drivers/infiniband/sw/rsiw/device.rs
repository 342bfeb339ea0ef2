// SPDX-License-Identifier: GPL-2.0

//! An rsiw device: one per netdev, with one iWARP port.
//!
//! Its identity comes from the netdev's MAC: the GID is the MAC (as the C siw does, since
//! iWARP connection management addresses by IP, the GID only has to be unique), the node and
//! system image GUIDs are the MAC's EUI-64. The port follows the netdev's link and MTU.

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    net::device::NetDevice,
    owned_workqueue::OwnedQueue,
    prelude::*,
    rdma::provider::{
        async_event::{QpEvents, SrqEvents},
        completion_queue::CqNotifier,
        device::{
            AtomicCap, Device, DeviceAttributes, DeviceInfo, DeviceSet, DriverId, NodeType,
            PortAttributes, PortImmutable, PortState, DEVICE_MEM_MGT_EXTENSIONS,
            KERNEL_ALLOW_USER_UNREG, PORT_CM_SUP, PORT_DEVICE_MGMT_SUP,
        },
        device_settings::SettingOutput,
        hw_stats::HwCounter,
        iw_provider::{IwCmId, IwConnParam},
        memory_region::{DmaMemory, MemoryRegion, NewMr, UserPages},
        objects::{CqAttributes, PdId, QpHandle, QpInitAttributes, QpQueues, QueuePair},
        qp_counter::QpCounterId,
        restrack::RestrackAttrs,
        shared_receive_queue::SrqAttributes,
        user::{UserData, UserVerb},
        user_map::{UserMapping, UserMemory},
    },
    sync::Arc,
    xarray::XArray,
};

use crate::{
    cm::{self, Cm},
    counters::{Counters, QpCounters},
    cq::Cq,
    mr::MrTable,
    qp::{Qp, QpTable},
    quota::Quota,
    siw_abi_responses,
    srq::Srq,
    user_rings::UserRings,
};

/// The siw vendor id; rdma-core's siw provider matches on the driver id, not on this.
const VENDOR_ID: u32 = 0x0062_6d74;
/// Our part id, so that `ibv_devinfo` tells rsiw from the C siw.
const VENDOR_PART_ID: u32 = 0x7273;
/// Node description.
const NODE_DESC: &[u8] = b"Software iWARP stack (rsiw)";

/// Design limits, at least the C siw's (its `siw.h`).
mod limits {
    pub(super) const MAX_QP: u32 = 1024 * 100;
    pub(super) const MAX_QP_WR: u32 = 1024 * 32;
    pub(super) const MAX_ORD_QP: u32 = 128;
    pub(super) const MAX_IRD_QP: u32 = 128;
    pub(super) const MAX_SGE: u32 = 6;
    pub(super) const MAX_SGE_RD: u32 = MAX_SGE;
    pub(super) const MAX_CQ: u32 = 1024 * 100;
    pub(super) const MAX_CQE: u32 = MAX_QP_WR * 100;
    pub(super) const MAX_MR: u32 = MAX_QP * 10;
    pub(super) const MAX_PD: u32 = MAX_QP;
    pub(super) const MAX_SRQ: u32 = MAX_QP;
    pub(super) const MAX_SRQ_WR: u32 = MAX_QP_WR * 64;
    pub(super) const MAX_SGE_PBL: u32 = 256;
    pub(super) const MAX_CONTEXT: u32 = MAX_PD;
    /// Inline data travels in the send queue entry, in the room of all SGEs but the first
    /// (`SIW_MAX_INLINE`).
    pub(super) const MAX_INLINE: u32 = (MAX_SGE - 1) * 16;
}

/// The numbers of QPs, CQs and SRQs a device may have at once: [`limits`] unless the module
/// was loaded with lower ones (`max_qp`, `max_cq`, `max_srq`).
#[derive(Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) qp: u32,
    pub(crate) cq: u32,
    pub(crate) srq: u32,
}

impl Limits {
    /// The design limits.
    pub(crate) const DESIGN: Self = Self {
        qp: limits::MAX_QP,
        cq: limits::MAX_CQ,
        srq: limits::MAX_SRQ,
    };
}

/// What the RDMA core calls us with for one device.
struct RsiwDevice {
    /// The netdev's MAC at creation.
    mac: [u8; 6],
    /// Open user contexts, at most [`limits::MAX_CONTEXT`].
    contexts: AtomicU32,
    /// Protection domains, at most [`limits::MAX_PD`].
    pds: AtomicU32,
    /// Completion queues, at most `limits.cq` (each holds its place).
    cqs: Arc<Quota>,
    /// The id of the next completion queue, which the provider library is told.
    next_cq_id: AtomicU32,
    /// Queue pairs, at most `limits.qp`.
    qps: Arc<Quota>,
    /// Shared receive queues, at most `limits.srq`.
    srqs: Arc<Quota>,
    /// The number of the next queue pair.
    next_qpn: AtomicU32,
    /// The QPs by number.
    qp_table: Arc<QpTable>,
    /// The STag table.
    mrs: Arc<MrTable>,
    /// Listeners and pending connections.
    cm: Arc<Cm>,
    /// The module's workqueue, for the QPs' work.
    queue: Arc<OwnedQueue>,
    /// What `rdma statistic` shows.
    counters: Arc<Counters>,
    /// The QP counters with QPs bound (`rdma statistic qp`).
    qp_counters: Arc<QpCounters>,
}

impl Drop for RsiwDevice {
    fn drop(&mut self) {
        self.cm.shut_down();
    }
}

impl RsiwDevice {
    fn kernel_qp(&self, qpn: u32) -> Result<Arc<Qp>> {
        self.qp_table
            .get(qpn)
            .filter(|q| !q.is_destroyed())
            .ok_or(EINVAL)
    }

    /// A QP number not in use: the next of the counter's that is free (at most `qps.max()`
    /// are taken, so one of as many plus one in a row is).
    fn free_qpn(&self) -> Result<u32> {
        for _ in 0..=self.qps.max() {
            let qpn = self.next_qpn.fetch_add(1, Ordering::Relaxed);
            if qpn != 0 && self.qp_table.get(qpn).is_none() {
                return Ok(qpn);
            }
        }
        Err(EBUSY)
    }

    /// Creates a QP; a process's (`user`) has its rings in memory it maps.
    fn create_rc_qp(
        &self,
        attr: &mut QpInitAttributes,
        cqs: (Arc<Cq>, Arc<Cq>),
        srq: Option<Arc<Srq>>,
        handle: QpHandle,
        events: QpEvents,
        user: Option<&mut UserVerb<'_>>,
    ) -> Result<(Arc<Qp>, u32)> {
        if srq.is_some() {
            // Its receives come from the SRQ: the QP has no receive queue of its own.
            attr.max_recv_wr = 0;
        }
        // Given back when `place` (or the QP holding it) drops, or the QP is destroyed.
        let place = self.qps.take()?;
        let qpn = self.free_qpn()?;
        let queues = match user {
            Some(user) => Some(Self::user_rings(attr, user, qpn)?),
            None => {
                attr.max_send_wr = attr.max_send_wr.max(1);
                attr.max_inline_data = 0;
                None
            }
        };
        let qp = Qp::new(
            qpn,
            handle,
            attr.pd,
            self.mrs.clone(),
            cqs.0,
            cqs.1,
            *attr,
            place,
            self.qp_table.clone(),
            self.queue.clone(),
            self.counters.clone(),
            queues,
            srq,
            events,
        )?;
        // A create at the same time may have taken the number: `EBUSY` then.
        if let Err(e) = qp.list() {
            // The QP and its work item hold each other until the QP is destroyed.
            qp.destroy();
            return Err(e);
        }
        Ok((qp, qpn))
    }

    /// Maps a process's send and receive rings for QP `qpn` and tells the provider library
    /// where they are; `attr` gets the ring sizes.
    fn user_rings(
        attr: &mut QpInitAttributes,
        user: &mut UserVerb<'_>,
        qpn: u32,
    ) -> Result<UserRings> {
        let num_sqe = attr.max_send_wr.checked_next_power_of_two().ok_or(EINVAL)?;
        let num_rqe = match attr.max_recv_wr {
            0 => 0,
            n => n.checked_next_power_of_two().ok_or(EINVAL)?,
        };
        let ring = |n: u32, size: usize| -> Result<UserMapping> {
            UserMemory::new((n as usize).checked_mul(size).ok_or(EINVAL)?)?.map(user)
        };
        let sq = ring(num_sqe, siw_abi_responses::SQE_SIZE)?;
        let rq = match num_rqe {
            0 => None,
            n => Some(ring(n, siw_abi_responses::RQE_SIZE)?),
        };
        let (sq_key, rq_key) = (sq.key(), rq.as_ref().map_or(0, |r| r.key()));
        let queues = UserRings::new(
            sq,
            num_sqe,
            rq,
            num_rqe,
            attr.signal_all,
            attr.max_inline_data > 0,
        )?;
        write_response(
            user.udata(),
            &siw_abi_responses::create_qp_response(qpn, num_sqe, num_rqe, sq_key, rq_key),
        )?;
        attr.max_send_wr = num_sqe;
        attr.max_recv_wr = num_rqe;
        if attr.max_inline_data > 0 {
            attr.max_inline_data = limits::MAX_INLINE;
        }
        Ok(queues)
    }
}

/// Takes one of at most `max` from `count`; `ENOMEM` when all are taken.
fn take_one(count: &AtomicU32, max: u32) -> Result {
    count
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < max).then_some(n + 1)
        })
        .map(|_| ())
        .map_err(|_| ENOMEM)
}

/// The EUI-64 of a MAC (RFC 4291 appendix A), as node and system image GUIDs use it.
fn eui64(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// Creates and registers device `name` bound to `netdev`.
pub(crate) fn create(
    devices: &Arc<DeviceSet>,
    name: &CStr,
    netdev: &NetDevice,
    owner: &'static ThisModule,
    queue: &Arc<OwnedQueue>,
    limits: Limits,
) -> Result {
    // The GID must be unique; a netdev without a MAC has nothing unique to offer.
    let mac = netdev.mac().ok_or(EINVAL)?;
    let counters = Counters::new()?;
    let driver = Arc::new(
        RsiwDevice {
            mac,
            contexts: AtomicU32::new(0),
            pds: AtomicU32::new(0),
            cqs: Quota::new(limits.cq)?,
            next_cq_id: AtomicU32::new(1),
            qps: Quota::new(limits.qp)?,
            srqs: Quota::new(limits.srq)?,
            next_qpn: AtomicU32::new(1),
            qp_table: Arc::pin_init(XArray::new(), GFP_KERNEL)?,
            mrs: MrTable::new(limits::MAX_MR)?,
            cm: Cm::new(queue.clone(), counters.clone())?,
            queue: queue.clone(),
            counters,
            qp_counters: QpCounters::new()?,
        },
        GFP_KERNEL,
    )?;
    let info = DeviceInfo {
        name,
        node_type: NodeType::Rnic,
        driver_id: DriverId::Siw,
        uverbs_abi_ver: siw_abi_responses::ABI_VERSION,
        node_guid: eui64(mac),
        node_desc: NODE_DESC,
        netdev,
        num_comp_vectors: 1,
        owner,
        user_doorbell: true,
    };
    devices.register(&info, driver)
}

#[vtable]
impl kernel::rdma::provider::device::Driver for RsiwDevice {
    type Cq = Cq;
    type Qp = Qp;
    type Srq = Srq;

    fn query_device(&self, _dev: &Device) -> Result<DeviceAttributes> {
        use limits::*;
        Ok(DeviceAttributes {
            sys_image_guid: eui64(self.mac),
            max_mr_size: u64::MAX,
            page_size_cap: kernel::page::PAGE_SIZE as u64,
            vendor_id: VENDOR_ID,
            vendor_part_id: VENDOR_PART_ID,
            device_cap_flags: DEVICE_MEM_MGT_EXTENSIONS,
            kernel_cap_flags: KERNEL_ALLOW_USER_UNREG,
            max_qp: self.qps.max(),
            max_qp_wr: MAX_QP_WR,
            max_send_sge: MAX_SGE,
            max_recv_sge: MAX_SGE,
            max_sge_rd: MAX_SGE_RD,
            max_cq: self.cqs.max(),
            max_cqe: MAX_CQE,
            max_mr: MAX_MR,
            max_pd: MAX_PD,
            max_mw: 0,
            max_qp_rd_atom: MAX_ORD_QP,
            max_qp_init_rd_atom: MAX_IRD_QP,
            max_res_rd_atom: self.qps.max().saturating_mul(MAX_IRD_QP),
            max_srq: self.srqs.max(),
            max_srq_wr: MAX_SRQ_WR,
            max_srq_sge: MAX_SGE,
            max_fast_reg_page_list_len: MAX_SGE_PBL,
            // RFC 7306 atomics, serialised per device (kernel consumers; the siw user ABI
            // has no atomics).
            atomic_cap: AtomicCap::Hca,
            masked_atomic_cap: AtomicCap::Hca,
        })
    }

    fn query_port(&self, dev: &Device, port: u32) -> Result<PortAttributes> {
        if port != 1 {
            return Err(EINVAL);
        }
        let netdev = dev.netdev(port).ok_or(ENODEV)?;
        let up = netdev.is_up();
        Ok(PortAttributes {
            state: if up {
                PortState::Active
            } else {
                PortState::Down
            },
            link_up: up,
            max_mtu: netdev.max_mtu(),
            active_mtu: netdev.mtu(),
            gid_tbl_len: 1,
            port_cap_flags: PORT_CM_SUP | PORT_DEVICE_MGMT_SUP,
            max_msg_sz: u32::MAX,
        })
    }

    fn port_immutable(&self, _dev: &Device, port: u32) -> Result<PortImmutable> {
        if port != 1 {
            return Err(EINVAL);
        }
        Ok(PortImmutable::iwarp(1))
    }

    fn query_gid(&self, _dev: &Device, port: u32, index: u32) -> Result<[u8; 16]> {
        if port != 1 || index != 0 {
            return Err(EINVAL);
        }
        let mut gid = [0u8; 16];
        gid[..6].copy_from_slice(&self.mac);
        Ok(gid)
    }

    fn alloc_ucontext(&self, _dev: &Device, udata: &mut UserData<'_>) -> Result {
        take_one(&self.contexts, limits::MAX_CONTEXT)?;
        let written = write_response(
            udata,
            &siw_abi_responses::alloc_ctx_response(VENDOR_PART_ID),
        );
        if written.is_err() {
            self.contexts.fetch_sub(1, Ordering::Relaxed);
        }
        written
    }

    fn dealloc_ucontext(&self, _dev: &Device) {
        self.contexts.fetch_sub(1, Ordering::Relaxed);
    }

    fn alloc_pd(&self, _dev: &Device, _pd: PdId, _user: bool) -> Result {
        // A PD needs nothing but the identity the core's object gives it; only the number of
        // them is limited.
        take_one(&self.pds, limits::MAX_PD)
    }

    fn dealloc_pd(&self, _dev: &Device, _pd: PdId) {
        self.pds.fetch_sub(1, Ordering::Relaxed);
    }

    fn create_cq(
        &self,
        _dev: &Device,
        attr: &CqAttributes,
        user: Option<&mut UserVerb<'_>>,
        notifier: CqNotifier,
    ) -> Result<(Arc<Cq>, u32)> {
        if attr.flags != 0 {
            return Err(EOPNOTSUPP);
        }
        if attr.entries < 1 || attr.entries > limits::MAX_CQE {
            return Err(EINVAL);
        }
        let entries = attr.entries.checked_next_power_of_two().ok_or(EINVAL)?;
        // Given back when the CQ is destroyed, or on the error paths.
        let place = self.cqs.take()?;
        let cq = match user {
            None => Cq::new(entries, notifier, place)?,
            Some(user) => {
                let ring_len = (entries as usize)
                    .checked_mul(siw_abi_responses::CQE_SIZE)
                    .and_then(|n| n.checked_add(siw_abi_responses::CQ_CTRL_SIZE))
                    .ok_or(EINVAL)?;
                let ring = UserMemory::new(ring_len)?.map(user)?;
                let user_id = self.next_cq_id.fetch_add(1, Ordering::Relaxed);
                let response = siw_abi_responses::create_cq_response(user_id, entries, ring.key());
                let cq = Cq::new_user(ring, entries, notifier, place)?;
                write_response(user.udata(), &response)?;
                cq
            }
        };
        Ok((cq, entries))
    }

    fn reg_user_mr(
        &self,
        _dev: &Device,
        pd: PdId,
        access: u32,
        pages: UserPages,
        udata: &mut UserData<'_>,
    ) -> Result<NewMr> {
        // Entered invalid: only once the process has its STag does the region become valid, and
        // a failure before then takes it out of the table and unpins its pages here.
        let (mr, key) = self.mrs.add_user(pd, access, pages)?;
        // `struct siw_uresp_reg_mr`: the STag, then padding.
        if let Err(e) = write_response(udata, &siw_abi_responses::reg_mr_response(key)) {
            mr.deregister();
            return Err(e);
        }
        mr.validate();
        Ok(NewMr { mr, key })
    }

    fn get_dma_mr(&self, _dev: &Device, pd: PdId, access: u32, mem: DmaMemory) -> Result<NewMr> {
        let (mr, key) = self.mrs.add_dma(pd, access, mem)?;
        Ok(NewMr { mr, key })
    }

    fn alloc_mr(&self, _dev: &Device, pd: PdId, max_pages: u32) -> Result<NewMr> {
        if max_pages == 0 || max_pages > limits::MAX_SGE_PBL {
            return Err(EINVAL);
        }
        let (mr, key) = self.mrs.add_fast_reg(pd, max_pages)?;
        Ok(NewMr { mr, key })
    }

    fn iw_connect(&self, _dev: &Device, id: IwCmId, param: &IwConnParam<'_>) -> Result {
        let qp = self.kernel_qp(param.qpn)?;
        cm::connect(&self.cm, qp, id, param)
    }

    fn iw_accept(&self, _dev: &Device, id: IwCmId, param: &IwConnParam<'_>) -> Result {
        let qp = self.kernel_qp(param.qpn)?;
        cm::accept(&self.cm, qp, id, param)
    }

    fn iw_reject(&self, _dev: &Device, id: IwCmId, private_data: &[u8]) -> Result {
        cm::reject(&self.cm, id, private_data)
    }

    fn iw_create_listen(&self, dev: &Device, id: IwCmId, backlog: u32) -> Result {
        let netdev = dev.netdev(1).ok_or(ENODEV)?;
        cm::listen(&self.cm, id, backlog, netdev.ifindex())
    }

    fn iw_destroy_listen(&self, _dev: &Device, key: usize) -> Result {
        cm::unlisten(&self.cm, key)
    }

    fn iw_get_qp(&self, _dev: &Device, qpn: u32) -> Option<QpHandle> {
        self.kernel_qp(qpn).ok().map(|q| q.handle.clone())
    }

    fn fill_restrack_cm_id(
        &self,
        _dev: &Device,
        id: usize,
        attrs: &mut RestrackAttrs<'_>,
    ) -> Result {
        // A diagnostic: looking through the QPs costs the data path nothing.
        let mut from = 0;
        while let Some((qpn, qp)) = self.qp_table.find(from) {
            if qp.has_cm_id(id) {
                return qp.fill_restrack_connection(attrs);
            }
            let Some(next) = qpn.checked_add(1) else {
                break;
            };
            from = next;
        }
        Ok(())
    }

    const PORT_COUNTERS: &'static [HwCounter] = crate::counters::NAMES;

    fn port_counters(&self, _dev: &Device, port: u32, values: &mut [u64]) -> Result {
        if port != 1 {
            return Err(EINVAL);
        }
        self.counters.fill(values);
        Ok(())
    }

    fn bind_qp_counter(
        &self,
        _dev: &Device,
        counter: Option<QpCounterId>,
        port: u32,
        qp: &Qp,
    ) -> Result<QpCounterId> {
        if port != 1 {
            return Err(EINVAL);
        }
        let (id, counts) = self.qp_counters.get_or_make(counter)?;
        qp.set_counter(Some(counts));
        Ok(id)
    }

    fn unbind_qp_counter(&self, _dev: &Device, qp: &Qp) {
        qp.set_counter(None);
    }

    fn dealloc_qp_counter(&self, _dev: &Device, counter: QpCounterId) {
        self.qp_counters.remove(counter);
    }

    fn qp_counter_values(
        &self,
        _dev: &Device,
        counter: QpCounterId,
        port: u32,
        values: &mut [u64],
    ) -> Result {
        if port != 1 {
            return Err(EINVAL);
        }
        self.qp_counters.get(counter).ok_or(ENOENT)?.fill(values);
        Ok(())
    }

    fn settings(&self) -> &'static [&'static CStr] {
        crate::settings::NAMES
    }

    fn show_setting(&self, _dev: &Device, index: usize, out: &mut SettingOutput<'_>) -> Result {
        self.cm.settings.show(index, out)
    }

    fn store_setting(&self, _dev: &Device, index: usize, value: &str) -> Result {
        self.cm.settings.store(index, value)
    }

    fn create_qp(
        &self,
        _dev: &Device,
        attr: &mut QpInitAttributes,
        queues: QpQueues<'_, Self>,
        user: Option<&mut UserVerb<'_>>,
        handle: QpHandle,
        events: QpEvents,
    ) -> Result<(Arc<Qp>, u32)> {
        use limits::*;
        if attr.create_flags != 0 || !attr.reliable_connected {
            return Err(EOPNOTSUPP);
        }
        if attr.max_send_wr == 0
            || attr.max_send_wr > MAX_QP_WR
            || attr.max_recv_wr > MAX_QP_WR
            || attr.max_send_sge > MAX_SGE
            || attr.max_recv_sge > MAX_SGE
            || attr.max_inline_data > MAX_INLINE
        {
            return Err(EINVAL);
        }
        let (Some(scq), Some(rcq)) = (queues.send_cq, queues.recv_cq) else {
            return Err(EINVAL);
        };
        let cqs = (scq.clone(), rcq.clone());
        self.create_rc_qp(attr, cqs, queues.srq.cloned(), handle, events, user)
    }

    fn create_srq(
        &self,
        _dev: &Device,
        _pd: PdId,
        attr: &mut SrqAttributes,
        user: Option<&mut UserVerb<'_>>,
        events: SrqEvents,
    ) -> Result<Arc<Srq>> {
        use limits::*;
        if attr.max_wr == 0
            || attr.max_wr > MAX_SRQ_WR
            || attr.max_sge > MAX_SGE
            || attr.limit > attr.max_wr
        {
            return Err(EINVAL);
        }
        // Given back when the SRQ is destroyed, or on the error paths.
        let place = self.srqs.take()?;
        attr.max_sge = attr.max_sge.max(1);
        let srq = match user {
            None => Srq::new(attr.max_wr, attr.max_sge, attr.limit, events, place)?,
            Some(user) => {
                let num = attr.max_wr.checked_next_power_of_two().ok_or(EINVAL)?;
                let len = (num as usize)
                    .checked_mul(siw_abi_responses::RQE_SIZE)
                    .ok_or(EINVAL)?;
                let ring = UserMemory::new(len)?.map(user)?;
                let response = siw_abi_responses::create_srq_response(num, ring.key());
                let srq = Srq::new_user(ring, num, attr.max_sge, attr.limit, events, place)?;
                write_response(user.udata(), &response)?;
                attr.max_wr = num;
                srq
            }
        };
        Ok(srq)
    }
}

/// Writes a verb's response; the provider library must leave room for all of it.
fn write_response(udata: &mut UserData<'_>, response: &[u8]) -> Result {
    if udata.out_len() < response.len() {
        return Err(EINVAL);
    }
    udata.write_response(response)
}
