// SPDX-License-Identifier: GPL-2.0

//! `rdma link add NAME type TYPE netdev NETDEV`: creating software RDMA devices from user space.
//!
//! A software provider (siw, rxe, rsiw) registers a link type; the RDMA netlink code calls its
//! `newlink` with the requested device name and the netdev, and the provider creates and
//! registers a device bound to it. `rdma link del` unregisters the device through the RDMA
//! core, which frees it with the device's `dealloc_driver`. The module should also carry the
//! alias `rdma-link-TYPE` so that `rdma link add` loads it.
//!
//! C header: [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h)

use crate::{
    bindings,
    error::{from_result, Result},
    ffi::{c_char, c_int},
    net::device::NetDevice,
    prelude::*,
    str::CStr,
    sync::Arc,
    types::Opaque,
};
use core::{
    marker::PhantomData,
    sync::atomic::{AtomicPtr, Ordering},
};

/// A link type, e.g. `rsiw`.
pub trait LinkType: 'static {
    /// What `newlink` works with, e.g. the driver's set of devices.
    type Data: Send + Sync;

    /// The type name users pass to `rdma link add ... type NAME`.
    const TYPE: &'static CStr;

    /// Where the registration keeps [`Self::Data`] for `newlink`, which C calls without any
    /// context pointer: a `static` of the driver's.
    fn context() -> &'static LinkContext<Self::Data>;

    /// Creates a device called `name` bound to `netdev`. Runs in process context with the
    /// RTNL lock *not* held.
    fn newlink(data: &Self::Data, name: &CStr, netdev: &NetDevice) -> Result;
}

/// The slot for a link type's data, declared as a `static` by the driver.
///
/// # Invariants
///
/// `ptr` is null, or comes from `Arc::into_raw` and is owned by the one live
/// [`LinkRegistration`] of the type, which clears it only after unregistering.
pub struct LinkContext<D> {
    ptr: AtomicPtr<D>,
}

impl<D> LinkContext<D> {
    /// An empty slot.
    pub const fn new() -> Self {
        Self {
            ptr: AtomicPtr::new(core::ptr::null_mut()),
        }
    }
}

impl<D> Default for LinkContext<D> {
    fn default() -> Self {
        Self::new()
    }
}

/// The registration of a link type; unregistered on drop.
///
/// # Invariants
///
/// `ops` is registered with the RDMA netlink code from construction until drop, and
/// `T::context()` holds the data passed to [`LinkRegistration::new`] for all that time.
#[pin_data(PinnedDrop)]
pub struct LinkRegistration<T: LinkType> {
    #[pin]
    ops: Opaque<bindings::rdma_link_ops>,
    _p: PhantomData<T>,
}

// SAFETY: The registration is only touched at construction and drop; the RDMA core serialises
// its use of `ops` with its own lock.
unsafe impl<T: LinkType> Sync for LinkRegistration<T> {}

// SAFETY: As above; nothing ties it to a thread.
unsafe impl<T: LinkType> Send for LinkRegistration<T> {}

impl<T: LinkType> LinkRegistration<T> {
    /// Registers link type `T`, whose `newlink` gets `data`. `EBUSY` if `T` is registered
    /// already.
    pub fn new(data: Arc<T::Data>) -> impl PinInit<Self, Error> {
        let init_ops = move |slot: *mut Opaque<bindings::rdma_link_ops>| -> Result {
            let raw = Arc::into_raw(data).cast_mut();
            if T::context()
                .ptr
                .compare_exchange(
                    core::ptr::null_mut(),
                    raw,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_err()
            {
                // SAFETY: `raw` came from `Arc::into_raw` above and was not stored.
                drop(unsafe { Arc::from_raw(raw) });
                return Err(EBUSY);
            }
            let ops = Opaque::raw_get(slot);
            // SAFETY: `ops` is valid for writes and pinned: it stays where it is until drop,
            // which unregisters it first. `T::TYPE` is a static string.
            unsafe {
                ops.write(bindings::rdma_link_ops {
                    list: bindings::list_head {
                        next: core::ptr::null_mut(),
                        prev: core::ptr::null_mut(),
                    },
                    type_: T::TYPE.as_char_ptr(),
                    newlink: Some(newlink_callback::<T>),
                });
                bindings::rdma_link_register(ops);
            }
            Ok(())
        };
        try_pin_init!(Self {
            // SAFETY: On success the closure initialised and registered the ops; on failure it
            // touched nothing.
            ops <- unsafe { crate::init::pin_init_from_closure(init_ops) },
            _p: PhantomData,
        }? Error)
    }
}

#[pinned_drop]
impl<T: LinkType> PinnedDrop for LinkRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: Registered since construction (type invariant). Unregistering waits for a
        // `newlink` that is running.
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
        let raw = T::context()
            .ptr
            .swap(core::ptr::null_mut(), Ordering::AcqRel);
        if !raw.is_null() {
            // SAFETY: Set by `new` from `Arc::into_raw` (type invariant); no `newlink` can run
            // any more, so this was the last user of the pointer.
            drop(unsafe { Arc::from_raw(raw) });
        }
    }
}

/// The `newlink` callback of link type `T`.
///
/// # Safety
///
/// Called by the RDMA netlink code with a valid NUL-terminated name and a netdev it holds a
/// reference on for the call.
unsafe extern "C" fn newlink_callback<T: LinkType>(
    name: *const c_char,
    netdev: *mut bindings::net_device,
) -> c_int {
    from_result(|| {
        // SAFETY: A valid C string for the call (the caller's guarantee).
        let name = unsafe { CStr::from_char_ptr(name) };
        // SAFETY: Valid and referenced for the call (the caller's guarantee).
        let netdev = unsafe { NetDevice::from_raw(netdev) };
        let data = T::context().ptr.load(Ordering::Acquire);
        // SAFETY: `newlink` only runs while the registration is live, and the registration
        // keeps its `Arc` in the context for all that time (type invariant of
        // `LinkRegistration`).
        let data = unsafe { data.as_ref() }.ok_or(ENODEV)?;
        T::newlink(data, name, netdev)?;
        Ok(0)
    })
}

#[cfg(CONFIG_KUNIT)]
mod tests {
    use super::{LinkContext, LinkRegistration, LinkType};
    use crate::{
        kunit::suite::Test, kunit_expect, kunit_expect_eq, net::device::NetDevice, prelude::*,
        str::CStr, sync::Arc,
    };

    /// A link type that creates nothing.
    struct NoDevices;

    static CONTEXT: LinkContext<u32> = LinkContext::new();

    impl LinkType for NoDevices {
        type Data = u32;
        const TYPE: &'static CStr = crate::c_str!("rust_kunit_link");

        fn context() -> &'static LinkContext<u32> {
            &CONTEXT
        }

        fn newlink(_data: &u32, _name: &CStr, _netdev: &NetDevice) -> Result {
            Err(EOPNOTSUPP)
        }
    }

    fn one_registration_per_type(test: &mut Test) -> Result {
        let first = KBox::pin_init(
            LinkRegistration::<NoDevices>::new(Arc::new(1, GFP_KERNEL)?),
            GFP_KERNEL,
        )?;
        let second = KBox::pin_init(
            LinkRegistration::<NoDevices>::new(Arc::new(2, GFP_KERNEL)?),
            GFP_KERNEL,
        );
        kunit_expect_eq!(test, second.err(), Some(EBUSY));
        drop(first);
        // Once unregistered, the type can be registered again.
        let again = KBox::pin_init(
            LinkRegistration::<NoDevices>::new(Arc::new(3, GFP_KERNEL)?),
            GFP_KERNEL,
        );
        kunit_expect!(test, again.is_ok());
        Ok(())
    }

    crate::kunit_suite!(rust_rdma_link, [one_registration_per_type]);
}
