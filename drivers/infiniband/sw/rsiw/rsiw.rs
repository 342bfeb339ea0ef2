// SPDX-License-Identifier: GPL-2.0

//! rsiw: a software iWARP RNIC.
//!
//! `modprobe rsiw && rdma link add rsiw0 type rsiw netdev eth0` creates an iWARP device bound
//! to `eth0`, registered with the RDMA core under the driver id of the C `siw` so that the siw
//! user ABI applies. `rdma link del rsiw0` removes it; unloading the module removes all.
//!
//! Devices register as kernel-verbs iWARP providers. Kernel consumers (rdma_cm, through
//! iw_cm) get PDs, CQs, DMA and fast-registration MRs, SRQs and RC QPs whose data path
//! ([`qp`], running `proto/qp_engine.rs`) carries Send (with SE, Invalidate, Immediate Data),
//! RDMA Write (with Immediate), RDMA Read, RFC 7306 atomics and TERMINATE over MPA connections
//! set up by [`cm`]. Processes use the siw user ABI: mapped send, receive and completion rings
//! taken by the doorbell, and user memory regions.
//!
//! Module parameters `max_qp`, `max_cq` and `max_srq` lower the number of each a device may
//! have (the design limits, 102400 each, by default).
//!
//! Layout: [`device`] (verbs of a device, and its limits in [`quota`]), [`cm`] (connections:
//! the MPA exchanges, listeners), [`qp`] (queue pairs and their state; receive in `qp/rx.rs`,
//! the per-access memory context in `qp/context.rs`), [`tx`] (FPDUs to TCP), [`verbs_wr`]
//! (kernel work requests in the engine's form), [`cq`] and [`srq`] (completion and shared
//! receive queues), [`mr`] (memory regions and STags), [`siw_abi_responses`] and
//! [`user_rings`] (the siw user ABI: verb responses, the rings shared with processes; the
//! entries in `proto/siw_abi_entries.rs`), [`settings`] (per-device sysfs settings), [`proto`]
//! (the wire protocols, pure code shared with the host tests).

use device::Limits;
use kernel::{
    module_param::StrParam,
    net::{
        device::NetDevice,
        notifier::{NetdevEvent, NetdevNotifier, NetdevNotifierRegistration},
    },
    owned_workqueue::OwnedQueue,
    prelude::*,
    rdma::provider::{
        device::{netdev_has_device, DeviceSetOwner, DriverId, PortEvent},
        link::{LinkContext, LinkRegistration, LinkType},
    },
    sync::Arc,
};

mod cm;
mod counters;
mod cq;
mod device;
mod kernel_crc32c;
mod mr;
pub mod proto;
mod qp;
mod quota;
mod settings;
mod sge;
mod siw_abi_responses;
mod slots;
mod srq;
mod tx;
mod user_rings;
mod verbs_wr;

kernel::module_param_str!(MAX_QP, "max_qp");
kernel::module_param_str!(MAX_CQ, "max_cq");
kernel::module_param_str!(MAX_SRQ, "max_srq");

/// A device limit given at load time (`modprobe rsiw max_qp=1000`): at least 1, at most the
/// design limit `design`, which is the default.
fn limit(param: &StrParam, design: u32) -> Result<u32> {
    let Some(text) = param.get() else {
        return Ok(design);
    };
    let n: u32 = text
        .to_str()
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .ok_or(EINVAL)?;
    if n == 0 || n > design {
        pr_err!("rsiw: a device limit is from 1 to {design}, not {n}\n");
        return Err(EINVAL);
    }
    Ok(n)
}

module! {
    type: RsiwModule,
    name: "rsiw",
    author: "rsiw project",
    description: "Software iWARP RNIC in Rust",
    license: "GPL",
    alias: ["rdma-link-rsiw"],
}

/// The module: the link type, and the netdev events that remove devices. Dropping it
/// unregisters both, then the last reference to [`Rsiw`] unregisters the devices, waits until
/// they are gone and shuts the workqueue down.
struct RsiwModule {
    _netdev_events: Pin<KBox<NetdevNotifierRegistration>>,
    _link: Pin<KBox<LinkRegistration<RsiwLink>>>,
}

impl kernel::Module for RsiwModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let design = Limits::DESIGN;
        let limits = Limits {
            qp: limit(&MAX_QP, design.qp)?,
            cq: limit(&MAX_CQ, design.cq)?,
            srq: limit(&MAX_SRQ, design.srq)?,
        };
        let devices = Arc::new(
            Rsiw {
                limits,
                devices: DeviceSetOwner::new()?,
                queue: Arc::new(OwnedQueue::new(kernel::c_str!("rsiw"))?, GFP_KERNEL)?,
            },
            GFP_KERNEL,
        )?;
        let events = Arc::new(NetdevEvents(devices.clone()), GFP_KERNEL)?;
        let netdev_events = KBox::pin_init(NetdevNotifierRegistration::new(events), GFP_KERNEL)?;
        let link = KBox::pin_init(LinkRegistration::<RsiwLink>::new(devices), GFP_KERNEL)?;
        Ok(RsiwModule {
            _netdev_events: netdev_events,
            _link: link,
        })
    }
}

/// Removes a device when its netdev goes away (the netdev's unregistration waits for it), and
/// reports the port going up and down.
struct NetdevEvents(Arc<Rsiw>);

/// The driver's state: its devices and the workqueue their connections and QPs use.
struct Rsiw {
    /// The limits of each device.
    limits: Limits,
    devices: DeviceSetOwner,
    queue: Arc<OwnedQueue>,
}

impl Drop for Rsiw {
    fn drop(&mut self) {
        // Devices first (their QPs and listeners stop queueing work), then the queue, which
        // runs what is left: no work item of ours runs after the module is gone.
        self.devices.set().unregister_all();
        self.queue.shut_down();
    }
}

impl NetdevNotifier for NetdevEvents {
    fn event(&self, event: NetdevEvent, dev: &NetDevice) {
        let set = self.0.devices.set();
        match event {
            NetdevEvent::Unregister => set.unregister_netdev_queued(dev, DriverId::Siw),
            // The port follows the link: tell the device's consumers.
            NetdevEvent::Up | NetdevEvent::Down | NetdevEvent::Change => {
                let port = if dev.is_up() {
                    PortEvent::Active
                } else {
                    PortEvent::Error
                };
                set.port_event(dev, DriverId::Siw, port);
            }
            _ => {}
        }
    }
}

/// The `rsiw` link type of `rdma link add`.
struct RsiwLink;

/// Where the link registration keeps the set of our devices for `newlink`.
static LINK_CONTEXT: LinkContext<Rsiw> = LinkContext::new();

impl LinkType for RsiwLink {
    type Data = Rsiw;
    const TYPE: &'static CStr = kernel::c_str!("rsiw");

    fn context() -> &'static LinkContext<Rsiw> {
        &LINK_CONTEXT
    }

    fn newlink(rsiw: &Rsiw, name: &CStr, netdev: &NetDevice) -> Result {
        if netdev.is_loopback() {
            return Err(EINVAL);
        }
        // One iWARP device per netdev, whether ours or the C siw's (we share its driver id).
        if netdev_has_device(netdev, DriverId::Siw) {
            return Err(EEXIST);
        }
        device::create(
            rsiw.devices.set(),
            name,
            netdev,
            &THIS_MODULE,
            &rsiw.queue,
            rsiw.limits,
        )
    }
}
