// SPDX-License-Identifier: GPL-2.0

//! Client transport classes: how a transport module offers itself to the RPC client.
//!
//! An RPC client (a mount, say) names its transport by a netid (`proto=rdma` is the netid
//! "rdma") or by an ident (`XPRT_TRANSPORT_RDMA`, 256). A transport module registers a class
//! with its ident, its netids and the function that creates a transport for a client
//! (`xprt_register_transport`); the RPC client finds the class by either, pins its module while
//! it uses it, and calls `setup`. Only one class may hold an ident: registering a second one
//! fails with `EEXIST` (the C `rpcrdma` module holds 256 and the netids "rdma" and "rdma6" once
//! it is loaded).
//!
//! [`Registration`] registers a [`TransportClass`] for as long as it lives. Creating a transport
//! is not wrapped yet: [`TransportPtr`] has no constructor, so a class's `setup` can only refuse
//! the client with an error.
//!
//! C header: [`include/linux/sunrpc/xprt.h`](srctree/include/linux/sunrpc/xprt.h)

use crate::{
    bindings,
    error::{to_result, Result},
    ffi::c_char,
    prelude::*,
    str::CStr,
    types::Opaque,
};
use core::marker::PhantomData;

/// The most netids a class has (the C classes have at most two).
pub const MAX_NETIDS: usize = 4;

/// A client transport class.
pub trait TransportClass: Send + Sync + 'static {
    /// The class's name, as the RPC client reports it (at most 31 bytes are used).
    const NAME: &'static CStr;
    /// Its ident (`XPRT_TRANSPORT_*`).
    const IDENT: i32;
    /// Its netids: what `proto=` and `rpcbind` name it by (at most [`MAX_NETIDS`]).
    const NETIDS: &'static [&'static CStr];

    /// Creates a transport for an RPC client (`xprt_class::setup`). The error is the client's.
    fn setup(args: &CreateArgs<'_>) -> Result<TransportPtr>;
}

/// What an RPC client asks a transport class to create (`struct xprt_create`).
///
/// # Invariants
///
/// `inner` is the `xprt_create` of the `setup` call in progress, valid for `'a`.
pub struct CreateArgs<'a> {
    inner: &'a bindings::xprt_create,
}

impl CreateArgs<'_> {
    /// The ident the client asked for.
    pub fn ident(&self) -> i32 {
        self.inner.ident
    }

    /// The server's address, as the client gave it (`dstaddr`, `addrlen` bytes).
    pub fn server_address(&self) -> &[u8] {
        if self.inner.dstaddr.is_null() {
            return &[];
        }
        // SAFETY: The client passes `addrlen` bytes at `dstaddr`, valid for the call (type
        // invariant).
        unsafe { core::slice::from_raw_parts(self.inner.dstaddr.cast::<u8>(), self.inner.addrlen) }
    }
}

/// A transport a class created, handed to the RPC client (`struct rpc_xprt *`).
///
/// # Invariants
///
/// Points to an `rpc_xprt` that the client owns from the moment `setup` returns it.
pub struct TransportPtr(*mut bindings::rpc_xprt);

impl TransportPtr {
    pub(crate) fn as_raw(&self) -> *mut bindings::rpc_xprt {
        self.0
    }
}

/// The class as the RPC client links it: `xprt_class`, then the storage of its flexible array
/// of netids, ended by an empty string as the client expects.
#[repr(C)]
struct ClassStorage {
    class: bindings::xprt_class,
    netids: [*const c_char; MAX_NETIDS + 1],
}

/// A registered client transport class of `T`; unregistered when dropped.
///
/// # Invariants
///
/// `storage` is registered with the RPC client (`xprt_register_transport` succeeded) and is
/// not moved until it is unregistered in `drop`.
#[pin_data(PinnedDrop)]
pub struct Registration<T: TransportClass> {
    #[pin]
    storage: Opaque<ClassStorage>,
    _class: PhantomData<T>,
}

// SAFETY: The registration only unregisters the class on drop, which may happen on any thread.
unsafe impl<T: TransportClass> Send for Registration<T> {}
// SAFETY: A shared registration gives no access to the class.
unsafe impl<T: TransportClass> Sync for Registration<T> {}

impl<T: TransportClass> Registration<T> {
    /// Registers `T` with the RPC client, for `module`; `EEXIST` if a class already holds its
    /// ident, `EINVAL` if it has no netid or too many.
    pub fn new(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        let init = move |slot: *mut Opaque<ClassStorage>| -> Result {
            if T::NETIDS.is_empty() || T::NETIDS.len() > MAX_NETIDS {
                return Err(EINVAL);
            }
            // SAFETY: `ClassStorage` is plain data (a list head, integers, pointers and bytes),
            // for which all zeroes is valid.
            let mut storage: ClassStorage = unsafe { core::mem::zeroed() };
            storage.class.ident = T::IDENT;
            storage.class.setup = Some(setup_callback::<T>);
            storage.class.owner = module.as_ptr();
            for (d, s) in storage
                .class
                .name
                .iter_mut()
                .take(31)
                .zip(T::NAME.as_bytes())
            {
                *d = *s as c_char;
            }
            for (d, s) in storage.netids.iter_mut().zip(T::NETIDS) {
                *d = s.as_char_ptr();
            }
            if let Some(end) = storage.netids.get_mut(T::NETIDS.len()) {
                *end = EMPTY.as_char_ptr();
            }
            let slot = Opaque::raw_get(slot);
            // SAFETY: `slot` is valid for writes and pinned: it stays where it is until the
            // registration is dropped, which unregisters it first. The netid array (the
            // storage after the struct) ends with an empty string; the strings are static.
            to_result(unsafe {
                slot.write(storage);
                bindings::xprt_register_transport(core::ptr::addr_of_mut!((*slot).class))
            })
        };
        try_pin_init!(Self {
            // SAFETY: On success the closure initialised and registered the class; on failure
            // the class is not registered, and `ClassStorage` needs no drop.
            storage <- unsafe { crate::init::pin_init_from_closure(init) },
            _class: PhantomData,
        }? Error)
    }
}

/// The empty netid that ends a class's list.
const EMPTY: &CStr = crate::c_str!("");

#[pinned_drop]
impl<T: TransportClass> PinnedDrop for Registration<T> {
    fn drop(self: Pin<&mut Self>) {
        let storage = self.storage.get();
        // SAFETY: Registered (type invariant); the RPC client holds the class's module while a
        // client uses the class, so none does when its owner drops the registration.
        unsafe { bindings::xprt_unregister_transport(core::ptr::addr_of_mut!((*storage).class)) };
    }
}

/// `xprt_class::setup`.
///
/// # Safety
///
/// Called by the RPC client with a valid `args`, for the duration of the call.
unsafe extern "C" fn setup_callback<T: TransportClass>(
    args: *mut bindings::xprt_create,
) -> *mut bindings::rpc_xprt {
    // SAFETY: Valid for the call (the caller's guarantee).
    let inner = unsafe { &*args };
    // INVARIANT: The `xprt_create` of this call.
    let args = CreateArgs { inner };
    match T::setup(&args) {
        Ok(xprt) => xprt.as_raw(),
        Err(e) => e.to_ptr(),
    }
}

/// The ident of the class that has `netid`, if a registered class has it. The RPC client may
/// try to load the module `rpc<netid>` first, as it does for a mount.
pub fn ident_of(netid: &CStr) -> Result<i32> {
    // SAFETY: `netid` is a NUL-terminated string, valid for the call.
    let ret = unsafe { bindings::xprt_find_transport_ident(netid.as_char_ptr()) };
    to_result(ret)?;
    Ok(ret)
}

#[cfg(CONFIG_KUNIT)]
mod tests {
    use super::{ident_of, CreateArgs, Registration, TransportClass, TransportPtr};
    use crate::{c_str, kunit::suite::Test, kunit_expect, kunit_expect_eq, prelude::*, str::CStr};

    /// An ident no transport of the kernel has.
    const TEST_IDENT: i32 = 0x7352_0001;

    // SAFETY: These tests are built into vmlinux, whose `THIS_MODULE` is null.
    static VMLINUX: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };

    /// A class that refuses every client.
    struct Refusing;

    impl TransportClass for Refusing {
        const NAME: &'static CStr = c_str!("rust kunit");
        const IDENT: i32 = TEST_IDENT;
        const NETIDS: &'static [&'static CStr] = &[c_str!("rust-kunit"), c_str!("rust-kunit6")];

        fn setup(_args: &CreateArgs<'_>) -> Result<TransportPtr> {
            Err(EPROTONOSUPPORT)
        }
    }

    /// Another class with the same ident.
    struct SameIdent;

    impl TransportClass for SameIdent {
        const NAME: &'static CStr = c_str!("rust kunit too");
        const IDENT: i32 = TEST_IDENT;
        const NETIDS: &'static [&'static CStr] = &[c_str!("rust-kunit-too")];

        fn setup(_args: &CreateArgs<'_>) -> Result<TransportPtr> {
            Err(EPROTONOSUPPORT)
        }
    }

    /// A class without a netid.
    struct NoNetid;

    impl TransportClass for NoNetid {
        const NAME: &'static CStr = c_str!("rust kunit none");
        const IDENT: i32 = TEST_IDENT + 1;
        const NETIDS: &'static [&'static CStr] = &[];

        fn setup(_args: &CreateArgs<'_>) -> Result<TransportPtr> {
            Err(EPROTONOSUPPORT)
        }
    }

    fn a_class_is_found_by_each_netid(test: &mut Test) -> Result {
        let reg = KBox::pin_init(Registration::<Refusing>::new(&VMLINUX), GFP_KERNEL)?;
        kunit_expect_eq!(test, ident_of(c_str!("rust-kunit")), Ok(TEST_IDENT));
        kunit_expect_eq!(test, ident_of(c_str!("rust-kunit6")), Ok(TEST_IDENT));
        drop(reg);
        Ok(())
    }

    fn an_ident_is_held_once(test: &mut Test) -> Result {
        let first = KBox::pin_init(Registration::<Refusing>::new(&VMLINUX), GFP_KERNEL)?;
        let second = KBox::pin_init(Registration::<SameIdent>::new(&VMLINUX), GFP_KERNEL);
        kunit_expect!(test, matches!(second, Err(e) if e == EEXIST));
        drop(first);
        // Once the first is gone, the ident is free again.
        let again = KBox::pin_init(Registration::<SameIdent>::new(&VMLINUX), GFP_KERNEL);
        kunit_expect!(test, again.is_ok());
        Ok(())
    }

    fn a_class_needs_a_netid(test: &mut Test) -> Result {
        let reg = KBox::pin_init(Registration::<NoNetid>::new(&VMLINUX), GFP_KERNEL);
        kunit_expect!(test, matches!(reg, Err(e) if e == EINVAL));
        Ok(())
    }

    crate::kunit_suite!(
        rust_sunrpc_xprt_class,
        [
            a_class_is_found_by_each_netid,
            an_ident_is_held_once,
            a_class_needs_a_netid
        ]
    );
}
