// SPDX-License-Identifier: GPL-2.0

//! Server transports: what carries calls to an RPC service (nfsd) and its replies back.
//!
//! The RPC server (`net/sunrpc/svc_xprt.c`) runs a pool of threads that take transports off a
//! queue and call their ops (`struct svc_xprt` with its `svc_xprt_ops`): a listener's `accept`
//! makes a transport for a new connection, a connection's `recvfrom` hands one call to the
//! thread in its `svc_rqst`, and `sendto` sends the thread's reply. A transport asks to be
//! queued when it has work ([`SvcXprt::set_data_pending`] and [`SvcXprt::enqueue`],
//! [`SvcXprt::set_conn_pending`] for a listener) and, once a thread took a call from it, lets
//! the next thread in ([`SvcXprt::received`]).
//!
//! A transport is a [`SvcTransport`]: its state lives in the same allocation as the `svc_xprt`
//! ([`SvcXprt`]), which [`SvcXprt::create`] creates from a class's `create` (a listener) or a
//! listener's `accept` (a connection).
//!
//! # Lifetime
//!
//! The RPC server counts references to a transport (`svc_xprt_get`/`svc_xprt_put`,
//! [`SvcXprtRef`]); closing it (`svc_xprt_deferred_close`, or the service stopping) calls
//! [`SvcTransport::detach`] from a server thread, and the last reference frees it: `T` is
//! dropped inside that `svc_xprt_put` (`xpo_free`). Dropping `T` may sleep (it drains a queue
//! pair, say), so the last reference must never be dropped from a context `T`'s drop waits
//! for: the transport's own completion work reaches it through a [`SvcHandle`], which holds no
//! reference and is revoked before `T` is dropped.
//!
//! # Requests
//!
//! A thread's request ([`SvcRqst`]) comes with pages (`rq_pages`): `recvfrom` places the call
//! in them ([`SvcRqst::set_arg`], or [`SvcRqst::place_arg`] for a call a device wrote into
//! them), the service encodes its reply from `rq_respages` on, and `sendto` reads it from
//! `rq_res` ([`SvcRqst::res`]). A device reaches the request's pages through an owned mapping
//! ([`SvcRqst::map_pages`]) that holds a reference on each page; should the device still be
//! able to write them when the call ends, the request lets them go
//! ([`SvcRqst::give_up_pages`]) and the RPC server allocates new ones for its next call, so
//! that no later call's data is ever placed by the device.
//!
//! A transport may keep a context per call ([`SvcTransport::Context`], `rq_xprt_ctxt`): what
//! `recvfrom` learnt of the call that `sendto` needs (say, where the client wants the reply's
//! bulk data). It is boxed by `recvfrom`, lent to `result_payload` and `sendto`, and dropped by
//! `xpo_release_ctxt`, which the RPC server calls once the call is done with (or when it
//! drops a deferred call).
//!
//! C header: [`include/linux/sunrpc/svc_xprt.h`](srctree/include/linux/sunrpc/svc_xprt.h)

use super::svc_xprt_class::{ServerClass, SvcXprtPtr};
use crate::{
    bindings,
    error::VTABLE_DEFAULT_ERROR,
    net::{namespace::Namespace, tcp::RawSockAddr},
    prelude::*,
    sync::Arc,
    types::Opaque,
};
use core::{
    any::TypeId,
    marker::PhantomData,
    mem::MaybeUninit,
    net::SocketAddr,
    ops::Deref,
    ptr::{addr_of_mut, NonNull},
};

mod adapter;
mod handle;
mod rqst;

pub use adapter::Adapter;
pub use handle::{Signal, SvcHandle};
pub use rqst::{ArgPlacement, SvcRqst};

/// A server transport's own state and operations. Every method runs in a server thread
/// (process context, may sleep) unless it says otherwise.
#[vtable]
pub trait SvcTransport: Send + Sync + Sized + 'static {
    /// The class the transport belongs to.
    type Class: ServerClass;

    /// What the transport keeps per call, from `recvfrom` to `sendto` (`rq_xprt_ctxt`).
    type Context: Send + 'static;

    /// A listener makes the transport of one pending connection (`xpo_accept`); `None` if
    /// there is none (or it failed). [`SvcXprt::set_conn_pending`] was cleared before: a
    /// listener with more pending connections sets it again.
    fn accept(_xprt: &SvcXprt<Self>) -> Option<SvcXprtPtr> {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Whether the transport has room to send a reply (`xpo_has_wspace`); a thread takes a
    /// call from it only then. Must not sleep.
    fn has_wspace(_xprt: &SvcXprt<Self>) -> bool {
        true
    }

    /// Hands one call to `rqst` (`xpo_recvfrom`): returns its length, 0 if there is none. The
    /// transport calls [`SvcXprt::received`] once it took the call (or found none), so that
    /// another thread may take the next. A context put in `ctxt` goes with the call (it is
    /// dropped at once if no call is handed over).
    fn recvfrom(
        _xprt: &SvcXprt<Self>,
        _rqst: &mut SvcRqst<'_>,
        _ctxt: &mut Option<KBox<Self::Context>>,
    ) -> Result<usize> {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Sends the reply `rqst` holds (`xpo_sendto`), with the call's context if `recvfrom` gave
    /// it one; returns the bytes sent.
    fn sendto(
        _xprt: &SvcXprt<Self>,
        _rqst: &mut SvcRqst<'_>,
        _ctxt: Option<&mut Self::Context>,
    ) -> Result<usize> {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// The service encoded its reply's bulk data (`xpo_result_payload`): `len` bytes from byte
    /// `offset` of `rq_res` (a READ's data). Only called for a call with a context.
    fn result_payload(_ctxt: &mut Self::Context, _offset: u32, _len: u32) -> Result {
        Ok(())
    }

    /// The transport is being closed (`xpo_detach`): it stops taking work. Its last reference
    /// goes later, which drops `T`.
    fn detach(xprt: &SvcXprt<Self>);
}

/// A transport's flags (`enum XPT_*`) this abstraction sets and clears.
#[derive(Clone, Copy)]
#[repr(u32)]
enum Flag {
    Conn = bindings::XPT_CONN,
    Data = bindings::XPT_DATA,
    Listener = bindings::XPT_LISTENER,
    CongCtrl = bindings::XPT_CONG_CTRL,
}

/// What a new transport is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A listener, which accepts connections (`XPT_LISTENER`).
    Listener,
    /// A connection, with credit-based flow control (`XPT_CONG_CTRL`: nfsd serves NFSv4 only
    /// over such transports).
    Connection,
}

/// The RPC service a transport belongs to (`struct svc_serv`), for `'a`.
///
/// # Invariants
///
/// `ptr` is a live service for `'a`.
#[derive(Clone, Copy)]
pub struct Serv<'a> {
    ptr: NonNull<bindings::svc_serv>,
    _serv: PhantomData<&'a bindings::svc_serv>,
}

impl Serv<'_> {
    /// # Safety
    ///
    /// `ptr` is a live service for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: NonNull<bindings::svc_serv>) -> Serv<'a> {
        // INVARIANT: The caller's guarantee.
        Serv {
            ptr,
            _serv: PhantomData,
        }
    }
}

/// A server transport of `T`: the `svc_xprt` the RPC server knows, and `T`.
///
/// # Invariants
///
/// Allocated by [`SvcXprt::create`] as a `KBox<Self>`, with `xprt` at offset 0 initialised by
/// `svc_xprt_init` for `T::Class`'s class and `T`'s ops table, and freed only by `xpo_free`
/// (the last `svc_xprt_put`); `handle` reaches this transport until `xpo_free` revokes it. `T`
/// is the class's `Listener`, with `XPT_LISTENER` set, or its `Connection`, without.
#[repr(C)]
pub struct SvcXprt<T: SvcTransport> {
    xprt: Opaque<bindings::svc_xprt>,
    handle: Arc<SvcHandle<T>>,
    transport: T,
}

// SAFETY: The C fields are used under the RPC server's locking rules from any thread; `T` is
// `Send + Sync`.
unsafe impl<T: SvcTransport> Send for SvcXprt<T> {}
// SAFETY: As for `Send`; shared access only offers `&T` and the C functions' own locking.
unsafe impl<T: SvcTransport> Sync for SvcXprt<T> {}

impl<T: SvcTransport> Deref for SvcXprt<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.transport
    }
}

impl<T: SvcTransport> SvcXprt<T> {
    /// Creates a transport of `T` for `serv` in namespace `net`: a listener from its class's
    /// `create`, or a connection from its listener's `accept`. `init` gets the transport's
    /// handle, whose signals take effect once `T` is initialised (see [`SvcHandle`]), and returns
    /// what initialises `T` in place; the transport's addresses are `local` and, for a
    /// connection, `remote`.
    ///
    /// `EINVAL` if the class was never registered, or if `T` is not the class's
    /// [`ServerClass::Listener`] (for a listener) or [`ServerClass::Connection`] (for a
    /// connection).
    pub fn create<I: PinInit<T, Error>>(
        serv: Serv<'_>,
        net: &Namespace,
        kind: Kind,
        local: Option<&SocketAddr>,
        remote: Option<&SocketAddr>,
        init: impl FnOnce(Arc<SvcHandle<T>>) -> Result<I>,
    ) -> Result<SvcXprtPtr> {
        let slot = <T::Class as ServerClass>::SLOT;
        if !slot.is_written() {
            return Err(EINVAL);
        }
        let expected = match kind {
            Kind::Listener => TypeId::of::<<T::Class as ServerClass>::Listener>(),
            Kind::Connection => TypeId::of::<<T::Class as ServerClass>::Connection>(),
        };
        if TypeId::of::<T>() != expected {
            return Err(EINVAL);
        }
        let boxed = KBox::<Self>::new_uninit(GFP_KERNEL)?;
        let c = KBox::into_raw(boxed).cast::<Self>();
        // SAFETY: `c` is a fresh allocation for `Self` that no one else knows.
        let x = unsafe { addr_of_mut!((*c).xprt) }.cast::<bindings::svc_xprt>();
        // SAFETY: `x` is memory for a `svc_xprt`, which `svc_xprt_init` fills in whole; the
        // class is written (checked above) and lives for ever; `serv` is live.
        unsafe { bindings::svc_xprt_init(net.as_raw(), slot.as_ptr(), x, serv.ptr.as_ptr()) };
        // SAFETY: Initialised just now and ours alone; the ops table is static.
        unsafe { (*x).xpt_ops = Adapter::<T>::OPS_REF };
        let flag = match kind {
            Kind::Listener => Flag::Listener,
            Kind::Connection => Flag::CongCtrl,
        };
        // SAFETY: As above.
        unsafe { set_flag(x, flag) };
        for (addr, remote) in [(local, false), (remote, true)] {
            let Some(addr) = addr else { continue };
            let (mut raw, len) = RawSockAddr::new(addr);
            let len = len as usize;
            let sap = raw.as_sockaddr();
            // SAFETY: `x` is initialised and ours; `sap` holds `len` bytes of address, which
            // fit `sockaddr_storage`.
            unsafe {
                if remote {
                    bindings::svc_xprt_set_remote(x, sap, len);
                } else {
                    bindings::svc_xprt_set_local(x, sap, len);
                }
            }
        }
        let undo = move || {
            // SAFETY: `x` was initialised by `svc_xprt_init`, which took a reference on the
            // namespace; nothing else was taken. `c` came from `KBox::into_raw` of an
            // uninitialised box, freed here without dropping anything.
            unsafe {
                bindings::svc_xprt_put_net(x);
                drop(KBox::<MaybeUninit<Self>>::from_raw(c.cast()));
            }
        };
        let handle = match SvcHandle::new() {
            Ok(handle) => handle,
            Err(e) => {
                undo();
                return Err(e);
            }
        };
        // SAFETY: The field is in the allocation, which does not move until `xpo_free`.
        unsafe { addr_of_mut!((*c).handle).write(handle.clone()) };
        let ret = init(handle.clone()).and_then(|init| {
            // SAFETY: As above; `init` initialises `T` in place or fails without a trace.
            unsafe { init.__pinned_init(addr_of_mut!((*c).transport)) }
        });
        if let Err(e) = ret {
            // SAFETY: Written above. The handle is revoked before it goes: contexts `init`
            // started with a clone of it never reach the transport.
            unsafe {
                (*c).handle.revoke();
                core::ptr::drop_in_place(addr_of_mut!((*c).handle));
            }
            undo();
            return Err(e);
        }
        // SAFETY: `T` is initialised now; the container lives until `xpo_free`, which revokes
        // the handle first. `c` is not null (it came from a box).
        unsafe { handle.attach(NonNull::new_unchecked(c)) };
        // SAFETY: Fully set up (the type invariants hold now); the reference `svc_xprt_init`
        // made passes to the RPC server. `x` is not null.
        Ok(unsafe { SvcXprtPtr::from_raw(NonNull::new_unchecked(x)) })
    }

    /// The `svc_xprt`.
    pub fn as_raw(&self) -> *mut bindings::svc_xprt {
        self.xprt.get()
    }

    /// # Safety
    ///
    /// `xprt` is the `svc_xprt` of a live `SvcXprt<T>` and stays so for `'a`.
    pub(crate) unsafe fn from_raw<'a>(xprt: *mut bindings::svc_xprt) -> &'a Self {
        // SAFETY: `xprt` is at offset 0 of the container (type invariant; the caller's
        // guarantee for its liveness).
        unsafe { &*xprt.cast::<Self>() }
    }

    /// The transport's state, pinned.
    pub fn transport(&self) -> Pin<&T> {
        // SAFETY: `transport` never moves until it is dropped in place (type invariant).
        unsafe { Pin::new_unchecked(&self.transport) }
    }

    /// A handle on the transport for its own asynchronous contexts.
    pub fn handle(&self) -> Arc<SvcHandle<T>> {
        self.handle.clone()
    }

    /// The transport's network namespace.
    pub fn net(&self) -> &Namespace {
        // SAFETY: `svc_xprt_init` took a reference on the namespace, which the transport keeps
        // until it is freed (type invariant: live).
        unsafe { Namespace::from_raw((*self.as_raw()).xpt_net) }
    }

    /// The service the transport belongs to.
    pub fn server(&self) -> Serv<'_> {
        // SAFETY: A transport's service outlives it; `xpt_server` is set by `svc_xprt_init`.
        let serv = unsafe { (*self.as_raw()).xpt_server };
        // INVARIANT: The service, live while the transport is.
        Serv {
            // SAFETY: `svc_xprt_init` was given a non-null service.
            ptr: unsafe { NonNull::new_unchecked(serv) },
            _serv: PhantomData,
        }
    }

    /// Another reference to the transport (`svc_xprt_get`).
    pub fn get(&self) -> SvcXprtRef<T> {
        // SAFETY: A live transport (type invariant).
        unsafe { bindings::svc_xprt_get(self.as_raw()) };
        // INVARIANT: Taken just now.
        SvcXprtRef {
            ptr: NonNull::from(self),
        }
    }

    /// A listener has connections pending (`XPT_CONN`): a thread will call
    /// [`SvcTransport::accept`]. Must not sleep.
    pub fn set_conn_pending(&self) {
        // SAFETY: A live transport (type invariant).
        unsafe { set_flag(self.as_raw(), Flag::Conn) };
        self.enqueue();
    }

    /// The transport has calls pending (`XPT_DATA`); [`Self::enqueue`] then gets a thread to
    /// take one. Set it under the same lock as the transport's queue of calls, which
    /// [`Self::clear_data_pending`] is cleared under. Must not sleep.
    pub fn set_data_pending(&self) {
        // SAFETY: A live transport (type invariant).
        unsafe { set_flag(self.as_raw(), Flag::Data) };
    }

    /// The transport has no call pending any more (see [`Self::set_data_pending`]).
    pub fn clear_data_pending(&self) {
        // SAFETY: A live transport (type invariant).
        unsafe { clear_flag(self.as_raw(), Flag::Data) };
    }

    /// Gets a thread to look at the transport, if it has work and no thread has it
    /// (`svc_xprt_enqueue`). Must not sleep.
    pub fn enqueue(&self) {
        // SAFETY: A live transport (type invariant).
        unsafe { bindings::svc_xprt_enqueue(self.as_raw()) }
    }

    /// The thread in [`SvcTransport::recvfrom`] took its call: another thread may take the
    /// next (`svc_xprt_received`).
    pub fn received(&self) {
        // SAFETY: A live transport (type invariant); `svc_xprt_received` checks that a thread
        // has it.
        unsafe { bindings::svc_xprt_received(self.as_raw()) }
    }

    /// Closes the transport from a server thread, soon (`svc_xprt_deferred_close`). Must not
    /// sleep: for completion handlers and connection events.
    pub fn deferred_close(&self) {
        // SAFETY: A live transport (type invariant).
        unsafe { bindings::svc_xprt_deferred_close(self.as_raw()) }
    }
}

/// # Safety
///
/// `x` is an initialised `svc_xprt`.
unsafe fn set_flag(x: *mut bindings::svc_xprt, flag: Flag) {
    // SAFETY: The caller's guarantee; the flags word is changed atomically.
    unsafe { bindings::svc_xprt_set_flag(x, flag as u32) }
}

/// # Safety
///
/// `x` is an initialised `svc_xprt`.
unsafe fn clear_flag(x: *mut bindings::svc_xprt, flag: Flag) {
    // SAFETY: The caller's guarantee; the flags word is changed atomically.
    unsafe { bindings::svc_xprt_clear_flag(x, flag as u32) }
}

/// A reference to a transport of `T` (`svc_xprt_get`). Dropping the last one frees the
/// transport, which drops `T` and may sleep: never drop one from a context `T`'s drop waits
/// for (its queue pair's completion work, say).
///
/// # Invariants
///
/// `ptr` is a live `SvcXprt<T>` on which this holds a reference.
pub struct SvcXprtRef<T: SvcTransport> {
    ptr: NonNull<SvcXprt<T>>,
}

// SAFETY: A reference may be dropped on any thread that may sleep; `SvcXprt<T>` is `Sync`.
unsafe impl<T: SvcTransport> Send for SvcXprtRef<T> {}
// SAFETY: Shared access only gives `&SvcXprt<T>`, which is `Sync`.
unsafe impl<T: SvcTransport> Sync for SvcXprtRef<T> {}

impl<T: SvcTransport> Deref for SvcXprtRef<T> {
    type Target = SvcXprt<T>;

    fn deref(&self) -> &SvcXprt<T> {
        // SAFETY: Live while the reference is held (type invariant).
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: SvcTransport> Drop for SvcXprtRef<T> {
    fn drop(&mut self) {
        let x = self.as_raw();
        // SAFETY: Drops the reference this holds (type invariant); the last one frees the
        // transport, after which `self` is not touched.
        unsafe { bindings::svc_xprt_put(x) }
    }
}
