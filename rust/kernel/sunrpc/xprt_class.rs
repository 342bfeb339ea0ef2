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
//! [`Registration`] registers a [`TransportClass`] for as long as it lives. The class itself lives
//! in a [`ClassSlot`], a `static` of its own, because every transport points to its class until
//! it is destroyed, which may be after the class is unregistered. A class's `setup` creates a
//! transport with [`Xprt::create`](super::xprt::Xprt::create), the only constructor of
//! [`TransportPtr`].
//!
//! C header: [`include/linux/sunrpc/xprt.h`](srctree/include/linux/sunrpc/xprt.h)

use crate::{
    bindings,
    error::{to_result, Result},
    ffi::c_char,
    net::namespace::Namespace,
    prelude::*,
    str::CStr,
    types::Opaque,
};
use core::{
    marker::PhantomData,
    sync::atomic::{AtomicBool, Ordering},
};

/// The ident of RPC-over-RDMA (`XPRT_TRANSPORT_RDMA`), which `mount -o proto=rdma` asks for.
pub const XPRT_TRANSPORT_RDMA: i32 = bindings::xprt_transports_XPRT_TRANSPORT_RDMA;

/// The bit of a backchannel class's ident (`XPRT_TRANSPORT_BC`): nfsd asks for the ident of
/// a connection's server class with it set when it makes the connection's callback client.
pub const XPRT_TRANSPORT_BC: i32 = bindings::XPRT_TRANSPORT_BC as i32;

/// The most netids a class has (the C classes have at most two).
pub const MAX_NETIDS: usize = 4;

/// A client transport class.
pub trait TransportClass: Send + Sync + 'static {
    /// The class's name, as the RPC client reports it (at most 31 bytes are used).
    const NAME: &'static CStr;
    /// Its ident (`XPRT_TRANSPORT_*`).
    const IDENT: i32;
    /// Its netids: what `proto=` and `rpcbind` name it by (at most [`MAX_NETIDS`]). A
    /// transport created by [`Xprt::create`](super::xprt::Xprt::create) shows the first as
    /// its netid for an IPv4 server and the second, if there is one, for an IPv6 server. A
    /// backchannel class (an ident with [`XPRT_TRANSPORT_BC`]) is found by its ident alone
    /// and may have none; its transports then show their protocol name.
    const NETIDS: &'static [&'static CStr];
    /// Its slot: a `static` of its own, where the class lives for as long as the kernel does.
    const SLOT: &'static ClassSlot;

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
    /// The `xprt_create` of the call.
    pub(crate) fn as_raw(&self) -> &bindings::xprt_create {
        self.inner
    }

    /// The network namespace of the client: its transport connects there.
    pub fn net(&self) -> &Namespace {
        // SAFETY: The client's namespace, which it holds while it creates a transport (type
        // invariant: valid for `'a`).
        unsafe { Namespace::from_raw(self.inner.net) }
    }

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
    /// Wraps a transport for the RPC client.
    ///
    /// # Safety
    ///
    /// `ptr` is a fully set up `rpc_xprt` whose one reference passes to the RPC client.
    pub(crate) unsafe fn from_raw(ptr: *mut bindings::rpc_xprt) -> Self {
        // INVARIANT: The caller's guarantee.
        Self(ptr)
    }

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

/// Where a class lives while it is registered and while any transport of it does: a `static`
/// of its own for each class, named by [`TransportClass::SLOT`].
///
/// A transport points to its class (`rpc_xprt::xprt_class`, which the RPC client's sysfs and
/// `rpc_clnt` code read for its name and ident) for as long as it lives, which may be after the
/// class is unregistered. A static outlives every transport, so that pointer never dangles: the
/// class is written once, at its first registration, and never changes afterwards (registering
/// again only links it into the client's list).
///
/// # Examples
///
/// ```ignore
/// static CLASS: ClassSlot = ClassSlot::new();
/// // impl TransportClass for MyClass { const SLOT: &'static ClassSlot = &CLASS; ... }
/// ```
///
/// # Invariants
///
/// Once `written` is true, `storage` holds the class of the one [`TransportClass`] that uses
/// this slot and is not written again. `registered` is true while a [`Registration`] of it
/// exists, and only that registration links or unlinks `storage.class.list`.
pub struct ClassSlot {
    storage: Opaque<ClassStorage>,
    written: AtomicBool,
    registered: AtomicBool,
}

// SAFETY: The class is written once, by the one registration that holds `registered`, before
// any reader can see it (readers are the RPC client, once it is registered, and transports
// created through it); after that only the client's list head changes, under the client's lock.
unsafe impl Sync for ClassSlot {}

impl ClassSlot {
    /// An empty slot, for a `static`.
    pub const fn new() -> Self {
        Self {
            storage: Opaque::uninit(),
            written: AtomicBool::new(false),
            registered: AtomicBool::new(false),
        }
    }

    /// The class, for `rpc_xprt::xprt_class`. Valid for ever; its contents are initialised once
    /// the class was first registered.
    pub(crate) fn as_ptr(&self) -> *const bindings::xprt_class {
        let storage = self.storage.get();
        // SAFETY: Only the address of a field is computed.
        unsafe { core::ptr::addr_of!((*storage).class) }
    }

    /// Whether the class was registered at least once, so that [`Self::as_ptr`] points to an
    /// initialised class.
    pub(crate) fn is_written(&self) -> bool {
        self.written.load(Ordering::Acquire)
    }

    /// Writes the class of `T` (the first time) and links it into the RPC client's list.
    fn register<T: TransportClass>(&self, module: &'static ThisModule) -> Result {
        let backchannel = T::IDENT & XPRT_TRANSPORT_BC != 0;
        if (T::NETIDS.is_empty() && !backchannel) || T::NETIDS.len() > MAX_NETIDS {
            return Err(EINVAL);
        }
        if self.registered.swap(true, Ordering::Acquire) {
            return Err(EEXIST);
        }
        let storage = self.storage.get();
        if self.written.load(Ordering::Acquire) {
            // SAFETY: Written (type invariant) and not written again; reading is race-free.
            if unsafe { (*storage).class.ident } != T::IDENT {
                self.registered.store(false, Ordering::Release);
                return Err(EINVAL);
            }
        } else {
            // SAFETY: `ClassStorage` is plain data (a list head, integers, pointers and bytes),
            // for which all zeroes is valid.
            let mut new: ClassStorage = unsafe { core::mem::zeroed() };
            new.class.ident = T::IDENT;
            new.class.setup = Some(setup_callback::<T>);
            new.class.owner = module.as_ptr();
            for (d, s) in new.class.name.iter_mut().take(31).zip(T::NAME.as_bytes()) {
                *d = *s as c_char;
            }
            for (d, s) in new.netids.iter_mut().zip(T::NETIDS) {
                *d = s.as_char_ptr();
            }
            if let Some(end) = new.netids.get_mut(T::NETIDS.len()) {
                *end = EMPTY.as_char_ptr();
            }
            // SAFETY: Never written before and no one reads it yet: the class was never
            // registered, so neither the RPC client nor a transport knows it; `registered`
            // keeps every other registration out.
            unsafe { storage.write(new) };
            // INVARIANT: Written once, by the holder of `registered`.
            self.written.store(true, Ordering::Release);
        }
        // SAFETY: The class is initialised and lives for ever (a static); the netid array (the
        // storage after the struct) ends with an empty string; the strings are static.
        let ret = to_result(unsafe {
            bindings::xprt_register_transport(core::ptr::addr_of_mut!((*storage).class))
        });
        if ret.is_err() {
            self.registered.store(false, Ordering::Release);
        }
        ret
    }

    /// Unlinks the class from the RPC client's list.
    fn unregister(&self) {
        let storage = self.storage.get();
        // SAFETY: Registered by the registration calling this; the RPC client holds the
        // class's module while a client looks it up, and transports keep their own reference.
        unsafe { bindings::xprt_unregister_transport(core::ptr::addr_of_mut!((*storage).class)) };
        self.registered.store(false, Ordering::Release);
    }
}

impl Default for ClassSlot {
    fn default() -> Self {
        Self::new()
    }
}

/// A registered client transport class of `T`; unregistered when dropped.
///
/// # Invariants
///
/// `T::SLOT` holds `T`'s class, registered with the RPC client until `drop`.
pub struct Registration<T: TransportClass> {
    _class: PhantomData<T>,
}

impl<T: TransportClass> Registration<T> {
    /// Registers `T` with the RPC client, for `module`; `EEXIST` if a class already holds its
    /// ident or `T::SLOT` is registered, `EINVAL` if it has no netid (and is no backchannel
    /// class) or too many, or if its slot held another class before.
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

/// The empty netid that ends a class's list.
const EMPTY: &CStr = crate::c_str!("");

impl<T: TransportClass> Drop for Registration<T> {
    fn drop(&mut self) {
        T::SLOT.unregister();
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
    use super::{
        ident_of, ClassSlot, CreateArgs, Registration, TransportClass, TransportPtr,
        XPRT_TRANSPORT_BC,
    };
    use crate::{c_str, kunit::suite::Test, kunit_expect, kunit_expect_eq, prelude::*, str::CStr};

    /// An ident no transport of the kernel has.
    const TEST_IDENT: i32 = 0x7352_0001;

    // SAFETY: These tests are built into vmlinux, whose `THIS_MODULE` is null.
    static VMLINUX: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };

    /// A class that refuses every client.
    struct Refusing;

    static REFUSING: ClassSlot = ClassSlot::new();

    impl TransportClass for Refusing {
        const NAME: &'static CStr = c_str!("rust kunit");
        const IDENT: i32 = TEST_IDENT;
        const NETIDS: &'static [&'static CStr] = &[c_str!("rust-kunit"), c_str!("rust-kunit6")];
        const SLOT: &'static ClassSlot = &REFUSING;

        fn setup(_args: &CreateArgs<'_>) -> Result<TransportPtr> {
            Err(EPROTONOSUPPORT)
        }
    }

    /// Another class with the same ident.
    struct SameIdent;

    static SAME_IDENT: ClassSlot = ClassSlot::new();

    impl TransportClass for SameIdent {
        const NAME: &'static CStr = c_str!("rust kunit too");
        const IDENT: i32 = TEST_IDENT;
        const NETIDS: &'static [&'static CStr] = &[c_str!("rust-kunit-too")];
        const SLOT: &'static ClassSlot = &SAME_IDENT;

        fn setup(_args: &CreateArgs<'_>) -> Result<TransportPtr> {
            Err(EPROTONOSUPPORT)
        }
    }

    /// A class without a netid.
    struct NoNetid;

    static NO_NETID: ClassSlot = ClassSlot::new();

    impl TransportClass for NoNetid {
        const NAME: &'static CStr = c_str!("rust kunit none");
        const IDENT: i32 = TEST_IDENT + 1;
        const NETIDS: &'static [&'static CStr] = &[];
        const SLOT: &'static ClassSlot = &NO_NETID;

        fn setup(_args: &CreateArgs<'_>) -> Result<TransportPtr> {
            Err(EPROTONOSUPPORT)
        }
    }

    /// A backchannel class without a netid.
    struct Backchannel;

    static BACKCHANNEL: ClassSlot = ClassSlot::new();

    impl TransportClass for Backchannel {
        const NAME: &'static CStr = c_str!("rust kunit backchannel");
        const IDENT: i32 = TEST_IDENT | XPRT_TRANSPORT_BC;
        const NETIDS: &'static [&'static CStr] = &[];
        const SLOT: &'static ClassSlot = &BACKCHANNEL;

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

    fn a_backchannel_class_needs_no_netid(test: &mut Test) -> Result {
        let reg = KBox::pin_init(Registration::<Backchannel>::new(&VMLINUX), GFP_KERNEL);
        kunit_expect!(test, reg.is_ok());
        Ok(())
    }

    crate::kunit_suite!(
        rust_sunrpc_xprt_class,
        [
            a_class_is_found_by_each_netid,
            an_ident_is_held_once,
            a_class_needs_a_netid,
            a_backchannel_class_needs_no_netid
        ]
    );
}
