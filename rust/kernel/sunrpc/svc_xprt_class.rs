// SPDX-License-Identifier: GPL-2.0

//! Server transport classes: how a transport module offers listeners to the RPC server.
//!
//! An RPC service (nfsd) opens a listener by class name and address: `echo "rdma 20049" >
//! /proc/fs/nfsd/portlist` asks the class "rdma" for listeners on port 20049, IPv4 and IPv6.
//! A transport module registers a class with its name, its ident and the function that creates
//! a listener (`svc_reg_xprt_class`); the RPC server pins the class's module while a transport
//! of it lives. Only one class may hold a name: registering a second one fails with `EEXIST`
//! (the C `rpcrdma` module holds "rdma" once it is loaded, and ignores that error itself).
//!
//! The ident matters beyond the class: nfsd builds the NFSv4.1 callback client of a connection
//! with the ident of the connection's class ored with `XPRT_TRANSPORT_BC`, so a class beside
//! the C module needs an ident of its own.
//!
//! [`Registration`] registers a [`ServerClass`] for as long as it lives. The class lives in a
//! [`ServerClassSlot`], a `static` of its own, because every transport of the class points to
//! it (`xpt_class`) until the transport is freed. A class's `create` makes a listener with
//! [`SvcXprt::create`], the only constructor of [`SvcXprtPtr`].
//!
//! C header: [`include/linux/sunrpc/svc_xprt.h`](srctree/include/linux/sunrpc/svc_xprt.h)

use super::svc_xprt::{Adapter, Serv, SvcTransport};
use crate::{
    bindings,
    error::{to_result, Result},
    ffi::c_int,
    net::{namespace::Namespace, tcp::RawSockAddr},
    prelude::*,
    str::CStr,
    types::Opaque,
};
use core::{
    marker::PhantomData,
    net::SocketAddr,
    ptr::NonNull,
    sync::atomic::{AtomicBool, Ordering},
};

#[cfg(doc)]
use super::svc_xprt::SvcXprt;

/// A server transport class.
pub trait ServerClass: Send + Sync + 'static {
    /// The class's name, as `/proc/fs/nfsd/portlist` names it.
    const NAME: &'static CStr;
    /// Its ident (`XPRT_TRANSPORT_*`); nfsd builds callback clients with `IDENT |
    /// XPRT_TRANSPORT_BC`.
    const IDENT: i32;
    /// The largest RPC payload its transports carry, in bytes (`xcl_max_payload`).
    const MAX_PAYLOAD: u32;
    /// Its slot: a `static` of its own, where the class lives for as long as the kernel does.
    const SLOT: &'static ServerClassSlot;
    /// The transports `create` makes: listeners.
    type Listener: SvcTransport<Class = Self>;
    /// The transports its listeners' `accept` makes: connections. Every transport of the class
    /// is one of these two ([`SvcXprt::create`] makes no other), which lets a backchannel
    /// class tell a connection of its own from the transport nfsd hands it.
    type Connection: SvcTransport<Class = Self>;

    /// Creates a listener for a service (`xpo_create`). The error is the service's.
    fn create(args: &ListenArgs<'_>) -> Result<SvcXprtPtr>;
}

/// What a service asks a class to listen on (the arguments of `xpo_create`).
///
/// # Invariants
///
/// `serv` and `net` are the service and namespace of the `xpo_create` call in progress;
/// `address` is the address it passed.
pub struct ListenArgs<'a> {
    serv: NonNull<bindings::svc_serv>,
    net: &'a Namespace,
    address: Result<SocketAddr>,
    flags: c_int,
}

impl<'a> ListenArgs<'a> {
    /// The service the listener is for.
    pub fn server(&self) -> Serv<'a> {
        // SAFETY: The service of the call, which outlives its listeners (type invariant).
        unsafe { Serv::from_raw(self.serv) }
    }

    /// The network namespace to listen in.
    pub fn net(&self) -> &'a Namespace {
        self.net
    }

    /// The address to listen on (port 0 for any); `EAFNOSUPPORT` for a family other than
    /// IPv4 and IPv6.
    pub fn address(&self) -> Result<SocketAddr> {
        self.address
    }

    /// The service's flags (`SVC_SOCK_*`).
    pub fn flags(&self) -> i32 {
        self.flags
    }
}

/// A transport made for the RPC server (`struct svc_xprt *`), which the server owns once a
/// class's `create` or a listener's `accept` returns it.
///
/// # Invariants
///
/// Points to the `svc_xprt` of a fully set up [`SvcXprt`] whose one reference passes to the RPC
/// server.
pub struct SvcXprtPtr(NonNull<bindings::svc_xprt>);

impl SvcXprtPtr {
    /// # Safety
    ///
    /// `ptr` is a fully set up transport whose one reference passes to the RPC server.
    pub(crate) unsafe fn from_raw(ptr: NonNull<bindings::svc_xprt>) -> Self {
        // INVARIANT: The caller's guarantee.
        Self(ptr)
    }

    pub(crate) fn into_raw(self) -> *mut bindings::svc_xprt {
        self.0.as_ptr()
    }
}

/// The class as the RPC server links it, and the ops table of its listeners (with `create`).
#[repr(C)]
struct ClassStorage {
    class: bindings::svc_xprt_class,
    ops: bindings::svc_xprt_ops,
}

/// Where a class lives while it is registered and while any transport of it does: a `static`
/// of its own for each class, named by [`ServerClass::SLOT`].
///
/// # Invariants
///
/// Once `written` is true, `storage` holds the class of the one [`ServerClass`] that uses this
/// slot and is not written again. `registered` is true while a [`Registration`] of it exists,
/// and only that registration links or unlinks `storage.class.xcl_list`.
pub struct ServerClassSlot {
    storage: Opaque<ClassStorage>,
    written: AtomicBool,
    registered: AtomicBool,
}

// SAFETY: The class is written once, by the one registration that holds `registered`, before
// any reader can see it; after that only the server's list head changes, under its lock.
unsafe impl Sync for ServerClassSlot {}

impl ServerClassSlot {
    /// An empty slot, for a `static`.
    pub const fn new() -> Self {
        Self {
            storage: Opaque::uninit(),
            written: AtomicBool::new(false),
            registered: AtomicBool::new(false),
        }
    }

    /// The class, for `svc_xprt_init`: valid for ever, initialised once [`Self::is_written`].
    pub(crate) fn as_ptr(&self) -> *mut bindings::svc_xprt_class {
        let storage = self.storage.get();
        // SAFETY: Only the address of a field is computed.
        unsafe { core::ptr::addr_of_mut!((*storage).class) }
    }

    /// Whether the class was registered at least once, so that [`Self::as_ptr`] points to an
    /// initialised class.
    pub(crate) fn is_written(&self) -> bool {
        self.written.load(Ordering::Acquire)
    }

    /// Writes the class of `T` (the first time) and links it into the RPC server's list.
    fn register<T: ServerClass>(&self, module: &'static ThisModule) -> Result {
        if self.registered.swap(true, Ordering::Acquire) {
            return Err(EEXIST);
        }
        let storage = self.storage.get();
        if !self.written.load(Ordering::Acquire) {
            let mut ops = Adapter::<T::Listener>::OPS;
            ops.xpo_create = Some(create_callback::<T>);
            // SAFETY: `svc_xprt_class` is plain data (pointers, a list head and integers), for
            // which all zeroes is valid.
            let mut class: bindings::svc_xprt_class = unsafe { core::mem::zeroed() };
            class.xcl_name = T::NAME.as_char_ptr();
            class.xcl_owner = module.as_ptr();
            class.xcl_max_payload = T::MAX_PAYLOAD;
            class.xcl_ident = T::IDENT;
            // SAFETY: `xcl_ops` points into the same static storage, valid for ever.
            class.xcl_ops = unsafe { core::ptr::addr_of!((*storage).ops) };
            // SAFETY: Never written before and no one reads it yet: the class was never
            // registered, so neither the RPC server nor a transport knows it; `registered`
            // keeps every other registration out.
            unsafe { storage.write(ClassStorage { class, ops }) };
            // INVARIANT: Written once, by the holder of `registered`.
            self.written.store(true, Ordering::Release);
        } else {
            // SAFETY: Written (type invariant) and not written again; reading is race-free.
            let ident = unsafe { (*storage).class.xcl_ident };
            if ident != T::IDENT {
                self.registered.store(false, Ordering::Release);
                return Err(EINVAL);
            }
        }
        let class = self.as_ptr();
        // SAFETY: The class is initialised and lives for ever (a static); its name is static.
        let ret = to_result(unsafe { bindings::svc_reg_xprt_class(class) });
        if ret.is_err() {
            self.registered.store(false, Ordering::Release);
        }
        ret
    }

    /// Unlinks the class from the RPC server's list.
    fn unregister(&self) {
        let class = self.as_ptr();
        // SAFETY: Registered by the registration calling this; transports of the class keep
        // its module, so its slot, alive.
        unsafe { bindings::svc_unreg_xprt_class(class) };
        self.registered.store(false, Ordering::Release);
    }
}

impl Default for ServerClassSlot {
    fn default() -> Self {
        Self::new()
    }
}

/// A registered server transport class of `T`; unregistered when dropped.
///
/// # Invariants
///
/// `T::SLOT` holds `T`'s class, registered with the RPC server until `drop`.
pub struct Registration<T: ServerClass> {
    _class: PhantomData<T>,
}

impl<T: ServerClass> Registration<T> {
    /// Registers `T` with the RPC server, for `module`; `EEXIST` if a class already has its
    /// name or `T::SLOT` is registered, `EINVAL` if its slot held another class before.
    pub fn new(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        let init = move |slot: *mut Self| -> Result {
            T::SLOT.register::<T>(module)?;
            // INVARIANT: Registered just now.
            // SAFETY: `slot` is valid for writes.
            unsafe {
                slot.write(Self {
                    _class: PhantomData,
                })
            };
            Ok(())
        };
        // SAFETY: On success the closure initialised `slot`; on failure nothing is registered
        // and `slot` needs no drop.
        unsafe { crate::init::pin_init_from_closure(init) }
    }
}

impl<T: ServerClass> Drop for Registration<T> {
    fn drop(&mut self) {
        T::SLOT.unregister();
    }
}

/// `xpo_create`.
///
/// # Safety
///
/// Called by the RPC server with its service, a namespace and `len` bytes of address at `sap`,
/// all valid for the call.
unsafe extern "C" fn create_callback<T: ServerClass>(
    serv: *mut bindings::svc_serv,
    net: *mut bindings::net,
    sap: *mut bindings::sockaddr,
    len: c_int,
    flags: c_int,
) -> *mut bindings::svc_xprt {
    let Some(serv) = NonNull::new(serv) else {
        return EINVAL.to_ptr();
    };
    let len = usize::try_from(len).unwrap_or(0);
    // SAFETY: `len` bytes of address at `sap`, valid for the call (the caller's guarantee).
    let address = unsafe { RawSockAddr::from_raw(sap, len) }.to_socket_addr();
    // INVARIANT: The service, namespace and address of this call.
    let args = ListenArgs {
        serv,
        // SAFETY: The service's namespace, live for the call.
        net: unsafe { Namespace::from_raw(net) },
        address,
        flags,
    };
    match T::create(&args) {
        Ok(xprt) => xprt.into_raw(),
        Err(e) => e.to_ptr(),
    }
}
