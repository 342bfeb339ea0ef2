// SPDX-License-Identifier: GPL-2.0

//! Network device events (`register_netdevice_notifier`).
//!
//! A driver bound to a netdev must let go of it when it is unregistered — the netdev's
//! unregistration waits until every reference is dropped — and may follow its link state and
//! address. A [`NetdevNotifier`] gets these events; the registration replays `REGISTER`/`UP` for
//! the devices that exist already, as the C API does.
//!
//! Events arrive in process context with the RTNL lock held: a handler must not take RTNL or
//! wait for something that does (unregistering an RDMA device synchronously, for one).
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h)

use crate::{
    bindings,
    error::to_result,
    ffi::{c_int, c_ulong, c_void},
    net::device::NetDevice,
    prelude::*,
    sync::Arc,
    types::Opaque,
};

/// A netdev event (`enum netdev_cmd`), the ones drivers usually care about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetdevEvent {
    /// The device was brought up.
    Up,
    /// The device went down.
    Down,
    /// Its state changed (carrier, for one).
    Change,
    /// Its hardware address changed.
    ChangeAddr,
    /// It is being unregistered: drop every reference to it.
    Unregister,
    /// Another event (`NETDEV_*` value).
    Other(u32),
}

impl From<c_ulong> for NetdevEvent {
    fn from(v: c_ulong) -> Self {
        let v = v as u32;
        match v {
            bindings::netdev_cmd_NETDEV_UP => Self::Up,
            bindings::netdev_cmd_NETDEV_DOWN => Self::Down,
            bindings::netdev_cmd_NETDEV_CHANGE => Self::Change,
            bindings::netdev_cmd_NETDEV_CHANGEADDR => Self::ChangeAddr,
            bindings::netdev_cmd_NETDEV_UNREGISTER => Self::Unregister,
            _ => Self::Other(v),
        }
    }
}

/// A handler of netdev events.
pub trait NetdevNotifier: Send + Sync {
    /// `event` happened to `dev` (RTNL held; see the module documentation).
    fn event(&self, event: NetdevEvent, dev: &NetDevice);
}

/// A registered [`NetdevNotifier`]; unregistered on drop.
///
/// # Invariants
///
/// `nb` is registered with the netdev notifier chain from construction until drop.
#[pin_data(PinnedDrop)]
pub struct NetdevNotifierRegistration {
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    handler: Arc<dyn NetdevNotifier>,
}

// SAFETY: Only touched at construction and drop; the notifier chain has its own locking.
unsafe impl Send for NetdevNotifierRegistration {}

// SAFETY: As above.
unsafe impl Sync for NetdevNotifierRegistration {}

impl NetdevNotifierRegistration {
    /// Registers `handler` for the events of every netdev.
    pub fn new(handler: Arc<dyn NetdevNotifier>) -> impl PinInit<Self, Error> {
        let init_nb = |slot: *mut Opaque<bindings::notifier_block>| {
            let nb = Opaque::raw_get(slot);
            // SAFETY: `nb` is valid for writes and pinned until drop, which unregisters it.
            // `handler` is initialised before `nb` (field order below), so the callback can
            // find it as soon as the block is registered.
            unsafe {
                nb.write(bindings::notifier_block {
                    notifier_call: Some(notifier_callback),
                    next: core::ptr::null_mut(),
                    priority: 0,
                });
                to_result(bindings::register_netdevice_notifier(nb))
            }
        };
        try_pin_init!(Self {
            handler,
            // SAFETY: On success the closure initialised and registered the block; on failure
            // the block is not registered.
            nb <- unsafe { crate::init::pin_init_from_closure(init_nb) },
        }? Error)
    }
}

#[pinned_drop]
impl PinnedDrop for NetdevNotifierRegistration {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: Registered since construction (type invariant); unregistering waits for
        // callbacks in flight (they run under RTNL, which it takes).
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }
}

/// The `notifier_call` of every registration.
///
/// # Safety
///
/// Called by the netdev notifier chain with a block of a live registration and the chain's
/// `netdev_notifier_info`.
unsafe extern "C" fn notifier_callback(
    nb: *mut bindings::notifier_block,
    event: c_ulong,
    info: *mut c_void,
) -> c_int {
    // SAFETY: `nb` is the `nb` field of a live `NetdevNotifierRegistration` (the caller's
    // guarantee); `Opaque` is transparent, so the cast finds the registration. Registration
    // replays events for existing netdevs from inside `new`, when both fields are written
    // already (`handler` first).
    let reg = unsafe {
        &*crate::container_of!(
            nb.cast::<Opaque<bindings::notifier_block>>(),
            NetdevNotifierRegistration,
            nb
        )
    };
    // SAFETY: For netdev events, `info` is a `netdev_notifier_info` with a live device, held
    // by the notifier chain for the call.
    let dev = unsafe { NetDevice::from_raw(bindings::netdev_notifier_info_to_dev(info.cast())) };
    reg.handler.event(NetdevEvent::from(event), dev);
    bindings::NOTIFY_DONE as c_int
}
