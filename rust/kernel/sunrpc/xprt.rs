// SPDX-License-Identifier: GPL-2.0

//! Client transports: what carries an RPC client's calls to its server and the replies back.
//!
//! The RPC client (`net/sunrpc/clnt.c`) drives every call through the same state machine and
//! leaves the wire to its transport (`struct rpc_xprt` with its `rpc_xprt_ops`): connecting,
//! sending an encoded call, receiving the reply for an XID into the call's receive buffer, and
//! closing. Everything else is generic and done by C functions the abstraction puts in the ops
//! table of every transport: request slots (`xprt_alloc_slot`), call buffers (`rpc_malloc`),
//! the congestion window (`xprt_reserve_xprt_cong` and friends, as RPC-over-RDMA uses), rpcbind
//! (`rpcb_getport_async`) and the wait for a reply (`xprt_wait_for_reply_request_def`).
//!
//! A transport is a [`Transport`]: its state lives in the same allocation as the `rpc_xprt`
//! ([`Xprt`]), which a class's `setup` creates with [`Xprt::create`]. The abstraction fills in
//! what `xprt_setup_rdma` does for the C transport (server address and its display strings,
//! timeouts, class, module reference) and undoes it when the RPC client destroys the transport.
//!
//! Connecting hands the transport a [`Connect`] that it completes, at once or later from its
//! own context; it holds the transport's write lock until then. A received reply is matched to
//! its call and copied into the call's receive buffer by [`Xprt::complete_reply`]. The
//! transport's own contexts (completion handlers, workers) reach it through a [`Handle`],
//! which holds no reference on it and is revoked when it is destroyed.
//!
//! C header: [`include/linux/sunrpc/xprt.h`](srctree/include/linux/sunrpc/xprt.h)

use super::xprt_class::{CreateArgs, TransportClass, TransportPtr};
use crate::{
    bindings,
    error::{Error, Result, VTABLE_DEFAULT_ERROR},
    ffi::{c_int, c_long, c_ulong},
    net::namespace::Namespace,
    prelude::*,
    str::CStr,
    sync::{Arc, LockClassKey, Mutex},
    types::Opaque,
};
use core::{
    mem::{align_of, size_of},
    net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6},
    ops::Deref,
    ptr::{addr_of, addr_of_mut, NonNull},
};

mod adapter;
mod addresses;
mod backchannel;
mod handle;
mod request;
mod server_backchannel;
#[cfg(CONFIG_KUNIT)]
mod tests;

pub use adapter::{Adapter, Stats};
use addresses::{address_family, format_addresses, free_addresses, Family};
pub use handle::Handle;
pub use request::{
    ReplyBuf, Rqst, Task, XdrBuf, XdrBufLayout, XdrPages, XdrPart, XDRBUF_READ,
    XDRBUF_SPARSE_PAGES, XDRBUF_WRITE,
};

/// The lock class of every transport's `receive` lock, made outside the generic code (see
/// [`Handle`]'s lock).
#[inline(never)]
fn receive_lock_class() -> (&'static CStr, &'static LockClassKey) {
    (
        crate::c_str!("sunrpc::xprt::Xprt::receive"),
        crate::static_lock_class!(),
    )
}

/// The alignment `kzalloc` (which `xprt_alloc` uses) guarantees on every architecture.
const KMALLOC_MIN_ALIGN: usize = 8;

/// A client transport's own state and operations.
///
/// Every method runs in process context unless it says otherwise; `bc_maxpayload` and
/// `bc_num_slots` run under `rcu_read_lock` and must not sleep.
#[vtable]
pub trait Transport: Send + Sync + Sized + 'static {
    /// The class whose `setup` creates transports of this type.
    type Class: TransportClass;

    /// Starts connecting to the server (`connect`). The RPC client calls it with the transport's
    /// write lock held by `connect`, which keeps it until completed or dropped.
    fn connect(xprt: &Xprt<Self>, connect: Connect<Self>);

    /// Closes the connection (`close`). The abstraction then marks the transport disconnected
    /// (`xprt_disconnect_done`), bumps its connect cookie and resets its reconnect delay.
    fn close(xprt: &Xprt<Self>);

    /// Sends the encoded call of `rqst` (`send_request`), under the transport's write lock. The
    /// abstraction has checked that the transport is connected and took a congestion slot.
    ///
    /// `ENOTCONN`: reconnect and call again; `EAGAIN`: call again; `ENOBUFS`: call again after a
    /// delay; `EMSGSIZE`, `EIO`: the call fails for good.
    fn send_request(xprt: &Xprt<Self>, rqst: &Rqst<'_>) -> Result;

    /// The buffers of `rqst` are about to be freed (`buf_free`), after its reply or because
    /// the call ended early. A transport that let the device, or its peer, reach them ends
    /// that first; may sleep.
    fn release_buffers(_xprt: &Xprt<Self>, _rqst: &Rqst<'_>) {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// A call timed out while the transport is connected (`timer`).
    fn timer(_xprt: &Xprt<Self>, _task: &Task<'_>) {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// rpcbind gave the server's port (`set_port`); the abstraction already updated the address
    /// and its display strings.
    fn set_port(_xprt: &Xprt<Self>, _port: u16) {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Adds columns to the transport's line in `/proc/self/mountstats`, after the generic ones
    /// (`print_stats`).
    fn print_stats(_xprt: &Xprt<Self>, _stats: &Stats<'_>) {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Injects a connection fault (`inject_disconnect`, with `CONFIG_FAIL_SUNRPC`). Without
    /// it the transport is force-disconnected.
    fn inject_disconnect(_xprt: &Xprt<Self>) {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// The client's mount options set connect timeouts, in jiffies (`set_connect_timeout`).
    fn set_connect_timeout(_xprt: &Xprt<Self>, _connect: c_ulong, _reconnect: c_ulong) {
        crate::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Whether the transport carries a backchannel: calls from the server, which it hands to
    /// the client's callback service with [`Xprt::deliver_backchannel_call`], and their
    /// replies, which reach [`Transport::send_request`] as requests for which
    /// [`Rqst::is_backchannel_reply`] holds. Its backchannel requests then come from the RPC
    /// client's pool (`bc_setup`, `bc_free_rqst` and `bc_destroy` are the pool's, see
    /// `backchannel.rs`). Such a transport says how large a call may be
    /// ([`Transport::bc_maxpayload`]).
    const BACKCHANNEL: bool = false;

    /// The largest backchannel call, in bytes (`bc_maxpayload`); must not sleep.
    ///
    /// NFSv4.1 and later offer it to the server in CREATE_SESSION whatever the transport. The
    /// default, 0, offers no backchannel: a Linux nfsd refuses such a session with
    /// `NFS4ERR_TOOSMALL`, so NFSv4.1 mounts need a transport with a backchannel; NFSv3 and
    /// NFSv4.0 do not ask.
    fn bc_maxpayload(_xprt: &Xprt<Self>) -> usize {
        0
    }

    /// How many backchannel calls may be outstanding (`bc_num_slots`); must not sleep. The
    /// default is 0, see [`Transport::bc_maxpayload`].
    fn bc_num_slots(_xprt: &Xprt<Self>) -> u32 {
        0
    }
}

/// TCP, as [`Config::prot`] (connection-oriented transports, RPC-over-RDMA included, say so to
/// rpcbind).
pub const IPPROTO_TCP: i32 = bindings::IPPROTO_TCP as i32;

/// An RPC timeout, in jiffies (`struct rpc_timeout`).
#[derive(Clone, Copy)]
pub struct Timeout {
    /// The first retransmit timeout.
    pub initval: c_ulong,
    /// The largest retransmit timeout.
    pub maxval: c_ulong,
    /// What each retransmit adds, when not exponential.
    pub increment: c_ulong,
    /// Retransmits before a major timeout.
    pub retries: u32,
    /// Whether each retransmit doubles the timeout.
    pub exponential: bool,
}

/// How [`Xprt::create`] sets up a transport (the fields `xprt_setup_rdma` fills in).
#[derive(Clone, Copy)]
pub struct Config {
    /// The default timeout of calls over the transport.
    pub timeout: Timeout,
    /// The first connect timeout, in jiffies (`connect_timeout`).
    pub connect_timeout: c_ulong,
    /// The longest delay before reconnecting, in jiffies (`max_reconnect_timeout`).
    pub max_reconnect_timeout: c_ulong,
    /// How long an rpcbind query may take, in jiffies (`bind_timeout`).
    pub bind_timeout: c_ulong,
    /// The first delay before reconnecting, in jiffies (`reestablish_timeout`).
    pub reestablish_timeout: c_ulong,
    /// Idle time before the transport disconnects, in jiffies; 0 for never (`idle_timeout`).
    pub idle_timeout: c_ulong,
    /// The largest RPC payload, in bytes (`max_payload`).
    pub max_payload: usize,
    /// Request slots allocated with the transport (`num_prealloc` of `xprt_alloc`).
    pub prealloc_slots: u32,
    /// The most request slots (`max_alloc` of `xprt_alloc`).
    pub max_slots: u32,
    /// The IP protocol that side protocols (rpcbind) see (`prot`), e.g. [`IPPROTO_TCP`].
    pub prot: i32,
    /// What `/proc/self/mountstats` and `rpc_peeraddr2str` show as the protocol.
    pub proto_name: &'static CStr,
}

/// A client transport of `T`: the `rpc_xprt` the RPC client knows, and `T`.
///
/// # Invariants
///
/// Allocated by `xprt_alloc` in [`Xprt::create`], with `xprt` at offset 0, initialised as that
/// function describes, and freed only by the `destroy` callback; `transport`, `receive` and
/// `handle` are pinned and initialised, and `handle` reaches this transport until `destroy`
/// revokes it. The `rpc_xprt` points to `T::Class`'s class, whose module it holds a
/// reference to, and to the strings `format_addresses` allocated.
#[repr(C)]
pub struct Xprt<T: Transport> {
    xprt: Opaque<bindings::rpc_xprt>,
    timeout: bindings::rpc_timeout,
    receive: Mutex<()>,
    handle: Arc<Handle<T>>,
    transport: T,
}

// SAFETY: The C fields are used under the RPC client's locking rules from any thread; `T` is
// `Send + Sync`.
unsafe impl<T: Transport> Send for Xprt<T> {}
// SAFETY: As for `Send`; shared access only offers `&T` and the C functions' own locking.
unsafe impl<T: Transport> Sync for Xprt<T> {}

impl<T: Transport> Deref for Xprt<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.transport
    }
}

impl<T: Transport> Xprt<T> {
    /// `xprt_alloc` zeroes with `kzalloc`, which aligns to [`KMALLOC_MIN_ALIGN`] at least.
    const ALIGN_OK: () = assert!(align_of::<Self>() <= KMALLOC_MIN_ALIGN);

    /// The `rpc_xprt`.
    pub fn as_raw(&self) -> *mut bindings::rpc_xprt {
        self.xprt.get()
    }

    /// The transport's state, pinned.
    pub fn transport(&self) -> Pin<&T> {
        // SAFETY: `transport` never moves until it is dropped in place (type invariant).
        unsafe { Pin::new_unchecked(&self.transport) }
    }

    /// # Safety
    ///
    /// `xprt` is the `rpc_xprt` of a live `Xprt<T>` and stays so for `'a`.
    unsafe fn from_raw<'a>(xprt: *mut bindings::rpc_xprt) -> &'a Self {
        // SAFETY: `xprt` is at offset 0 of the container (type invariant; the caller's
        // guarantee for its liveness).
        unsafe { &*xprt.cast::<Self>() }
    }

    /// Creates a transport of `T` for a client of `T::Class`, from that class's `setup`: the
    /// server's address (IPv4 or IPv6) is the client's, bound if its port is non-zero; `init`
    /// initialises `T` in place.
    ///
    /// `EBADF` if the address is too long, `EAFNOSUPPORT` for another family, `EIO` if the
    /// class's module is going away, `EINVAL` if the class was never registered.
    pub fn create(
        args: &CreateArgs<'_>,
        config: &Config,
        init: impl PinInit<T, Error>,
    ) -> Result<TransportPtr> {
        #[allow(clippy::let_unit_value)]
        let () = Self::ALIGN_OK;
        let a = args.as_raw();
        let slot = <T::Class as TransportClass>::SLOT;
        if !slot.is_written() {
            return Err(EINVAL);
        }
        let class = slot.as_ptr();
        if a.addrlen > size_of::<bindings::__kernel_sockaddr_storage>() {
            return Err(EBADF);
        }
        let family = address_family(a.dstaddr, a.addrlen)?;
        // A backchannel class has no netid: its transports show their protocol.
        let netid = match (family, <T::Class as TransportClass>::NETIDS) {
            (Family::V6, [_, v6, ..]) => *v6,
            (_, [first, ..]) => *first,
            (_, []) => config.proto_name,
        };
        // SAFETY: The class is written (checked above) and never changes again.
        let module = unsafe { (*class).owner };
        // SAFETY: `module` is the class's owner, alive while its class's `setup` runs.
        if !unsafe { bindings::try_module_get(module) } {
            return Err(EIO);
        }
        let size = size_of::<Self>();
        let (prealloc, max) = (config.prealloc_slots, config.max_slots);
        // SAFETY: `a.net` is the client's namespace; `size` covers the container, which starts
        // with the `rpc_xprt`.
        let x = unsafe { bindings::xprt_alloc(a.net, size, prealloc, max) };
        if x.is_null() {
            // SAFETY: Taken above.
            unsafe { bindings::module_put(module) };
            return Err(ENOMEM);
        }
        let c = x.cast::<Self>();
        // SAFETY: `x` is a fresh, zeroed and initialised `rpc_xprt` of `size` bytes, aligned for
        // `Self` (`ALIGN_OK`), that no one else knows yet; `a.dstaddr` has `a.addrlen` bytes,
        // which fit `addr` (checked above).
        unsafe {
            let timeout = addr_of_mut!((*c).timeout);
            timeout.write(bindings::rpc_timeout {
                to_initval: config.timeout.initval,
                to_maxval: config.timeout.maxval,
                to_increment: config.timeout.increment,
                to_retries: config.timeout.retries,
                to_exponential: config.timeout.exponential.into(),
            });
            (*x).timeout = timeout;
            (*x).connect_timeout = config.connect_timeout;
            (*x).max_reconnect_timeout = config.max_reconnect_timeout;
            (*x).bind_timeout = config.bind_timeout;
            (*x).reestablish_timeout = config.reestablish_timeout;
            (*x).idle_timeout = config.idle_timeout;
            (*x).max_payload = config.max_payload;
            (*x).ops = Adapter::<T>::OPS_REF;
            (*x).prot = config.prot;
            (*x).xprt_class = class;
            (*x).addrlen = a.addrlen;
            core::ptr::copy_nonoverlapping(
                a.dstaddr.cast::<u8>(),
                addr_of_mut!((*x).addr).cast::<u8>(),
                a.addrlen,
            );
            if bindings::rpc_get_port(addr_of!((*x).addr).cast()) != 0 {
                bindings::xprt_set_bound(x);
            }
        }
        let undo = || {
            // SAFETY: `x` is ours alone still; the strings are those `format_addresses` set or
            // null; `module` was taken above.
            unsafe {
                free_addresses(x);
                bindings::xprt_free(x);
                bindings::module_put(module);
            }
        };
        // SAFETY: `x` is ours alone and its address is set.
        if let Err(e) = unsafe { format_addresses(x, netid, config.proto_name) } {
            undo();
            return Err(e);
        }
        // SAFETY: `c` is the container being set up, whose `destroy` revokes the handle first.
        let handle = match unsafe { Handle::new(NonNull::new_unchecked(c)) } {
            Ok(handle) => handle,
            Err(e) => {
                undo();
                return Err(e);
            }
        };
        // SAFETY: The fields are in the allocation, pinned there until `destroy`.
        let ret = unsafe {
            let (name, key) = receive_lock_class();
            Mutex::new((), name, key).__pinned_init(addr_of_mut!((*c).receive))?;
            addr_of_mut!((*c).handle).write(handle);
            init.__pinned_init(addr_of_mut!((*c).transport))
        };
        if let Err(e) = ret {
            // SAFETY: Written above; nothing else has the handle yet.
            unsafe { core::ptr::drop_in_place(addr_of_mut!((*c).handle)) };
            undo();
            return Err(e);
        }
        // SAFETY: Fully set up (the type invariants hold now); the reference `xprt_alloc` made
        // passes to the RPC client.
        Ok(unsafe { TransportPtr::from_raw(x) })
    }

    /// A handle on the transport for its own asynchronous contexts.
    pub fn handle(&self) -> Arc<Handle<T>> {
        self.handle.clone()
    }

    /// The network namespace the transport connects in (the client's).
    pub fn net(&self) -> &Namespace {
        // SAFETY: `xprt_alloc` took a reference on the namespace, which the transport keeps
        // until `xprt_free` (type invariant: live).
        unsafe { Namespace::from_raw((*self.as_raw()).xprt_net) }
    }

    /// The server's address, with the port rpcbind found or the client gave.
    pub fn server_address(&self) -> Result<SocketAddr> {
        let x = self.as_raw();
        // SAFETY: A live transport whose address was set in `create`; rpcbind changes only
        // its port, before the transport connects.
        let (sap, len) = unsafe {
            (
                addr_of!((*x).addr).cast::<bindings::sockaddr>(),
                (*x).addrlen,
            )
        };
        match address_family(sap, len)? {
            Family::V4 => {
                // SAFETY: An IPv4 address of the size of `sockaddr_in` (checked).
                let sin = unsafe { &*sap.cast::<bindings::sockaddr_in>() };
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                Ok(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    u16::from_be(sin.sin_port),
                )))
            }
            Family::V6 => {
                // SAFETY: An IPv6 address of the size of `sockaddr_in6` (checked).
                let sin6 = unsafe { &*sap.cast::<bindings::sockaddr_in6>() };
                // SAFETY: Every view of the address union is plain bytes.
                let ip = Ipv6Addr::from(unsafe { sin6.sin6_addr.in6_u.u6_addr8 });
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    ip,
                    u16::from_be(sin6.sin6_port),
                    u32::from_be(sin6.sin6_flowinfo),
                    sin6.sin6_scope_id,
                )))
            }
        }
    }

    /// The cookie of the current connection: it changes with every connect.
    pub fn connect_cookie(&self) -> u32 {
        // SAFETY: A live transport; the cookie is a word that the connect path updates.
        unsafe { core::ptr::read_volatile(addr_of!((*self.as_raw()).connect_cookie)) }
    }

    /// Records that the connection is useful (a reply arrived on it): should it be lost, the
    /// next connect goes at once and the backoff starts again from the first delay
    /// (`reestablish_timeout` cleared, as the C transports do on receipt).
    pub fn connection_proven(&self) {
        // SAFETY: A live transport. The delay is a word that the receive paths of the C
        // transports clear without a lock too; the connect path reads and doubles it under
        // the write lock, and a clear that races with it only shortens one delay.
        unsafe {
            let delay = addr_of_mut!((*self.as_raw()).reestablish_timeout);
            if core::ptr::read_volatile(delay) != 0 {
                core::ptr::write_volatile(delay, 0);
            }
        }
    }

    /// Sets the congestion window to `credits` calls in flight (`cwnd`), as a server's credit
    /// grant says; at least one.
    pub fn set_credits(&self, credits: u32) {
        let x = self.as_raw();
        let cwnd = credits.clamp(1, u32::MAX >> bindings::RPC_CWNDSHIFT) << bindings::RPC_CWNDSHIFT;
        // SAFETY: A live transport; `cwnd` is changed under `transport_lock`, as the
        // congestion helpers read it.
        unsafe {
            let lock = addr_of_mut!((*x).transport_lock);
            bindings::spin_lock(lock);
            (*x).cwnd = c_ulong::try_from(cwnd).unwrap_or(c_ulong::MAX);
            bindings::spin_unlock(lock);
        }
    }

    /// Whether the transport is connected.
    pub fn is_connected(&self) -> bool {
        // SAFETY: A live transport (type invariant).
        unsafe { bindings::xprt_connected(self.as_raw()) != 0 }
    }

    /// Another reference to the transport, unless it is already being destroyed (`xprt_get`).
    pub fn get(&self) -> Option<XprtRef<T>> {
        // SAFETY: A live transport (type invariant).
        let x = unsafe { bindings::xprt_get(self.as_raw()) };
        // INVARIANT: `xprt_get` took a reference when it returned non-null.
        NonNull::new(x.cast::<Self>()).map(|ptr| XprtRef { ptr })
    }

    /// The connection is gone (`xprt_disconnect_done`): marks the transport disconnected and
    /// wakes the calls waiting for a reply with `ENOTCONN`.
    pub fn disconnect_done(&self) {
        // SAFETY: A live transport (type invariant).
        unsafe { bindings::xprt_disconnect_done(self.as_raw()) }
    }

    /// Asks the RPC client to close the connection soon (`xprt_force_disconnect`), which calls
    /// [`Transport::close`] from its worker.
    pub fn force_disconnect(&self) {
        // SAFETY: A live transport (type invariant).
        unsafe { bindings::xprt_force_disconnect(self.as_raw()) }
    }

    /// Wakes every call waiting on the transport (`xprt_wake_pending_tasks`), with `status`.
    pub fn wake_pending_tasks(&self, status: Result) {
        let status = match status {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        };
        // SAFETY: A live transport (type invariant).
        unsafe { bindings::xprt_wake_pending_tasks(self.as_raw(), status) }
    }

    /// The transport can send again (`xprt_write_space`); returns whether a call was waiting
    /// for it. May be called in softirq context.
    pub fn write_space(&self) -> bool {
        // SAFETY: A live transport (type invariant).
        unsafe { bindings::xprt_write_space(self.as_raw()) }
    }

    /// Delivers the reply to the call `xid` (in host byte order): finds the call, lets `copy`
    /// write the reply into its receive buffer and, if `copy` succeeded and wrote something,
    /// completes the call with that many bytes.
    ///
    /// `ENOENT` if no call waits for `xid`, `EPROTO` if `copy` wrote nothing, or `copy`'s error
    /// (the call then keeps waiting). Process context only: it takes the transport's
    /// `queue_lock` as the RPC client does, without disabling softirqs, and one reply at a time.
    pub fn complete_reply(
        &self,
        xid: u32,
        copy: impl FnOnce(&mut ReplyBuf<'_>) -> Result,
    ) -> Result {
        self.finish_call(xid, |buf| {
            copy(buf)?;
            match buf.written() {
                0 => Err(EPROTO),
                n => Ok(Finish::Bytes(c_int::try_from(n).unwrap_or(c_int::MAX))),
            }
        })
    }

    /// The part `part` of the reply buffer of `rqst`, a call of this transport being sent, as
    /// pages for a device to write the reply into (`None` if the part is empty). Missing pages
    /// of a sparse page array are allocated, under the lock replies are delivered with.
    pub fn reply_pages<'a>(
        &self,
        rqst: &'a Rqst<'_>,
        part: XdrPart,
    ) -> Result<Option<XdrPages<'a>>> {
        let _receiving = self.receive.lock();
        // SAFETY: `receive` keeps `complete_reply`, the only other writer of the page array
        // while the call is the transport's, out.
        unsafe { rqst.rcv_pages(part) }
    }

    /// Ends the call `xid` (in host byte order) with `error` instead of a reply, as for a
    /// transport error the server returned for it: the RPC client sees `error` as the call's
    /// status and decodes nothing. `ENOENT` if no call waits for `xid`. Process context only,
    /// as [`Xprt::complete_reply`].
    pub fn fail_call(&self, xid: u32, error: Error) -> Result {
        self.finish_call(xid, |_| Ok(Finish::Status(error.to_errno())))
    }

    /// Sends the call `xid` (in host byte order) again, as if it had timed out but without
    /// waiting (its status is `EAGAIN`: the RPC client encodes and transmits it anew, through
    /// [`Transport::send_request`]). For a call the server refused in a way that another
    /// attempt cures, such as a protocol version it does not speak. `ENOENT` if no call waits
    /// for `xid`. Process context only, as [`Xprt::complete_reply`].
    pub fn retry_call(&self, xid: u32) -> Result {
        self.finish_call(xid, |_| Ok(Finish::Status(EAGAIN.to_errno())))
    }

    /// Finds the call `xid` and completes it as `finish` says: with bytes of reply, or with no
    /// reply and a status. On `Err`, the call keeps waiting.
    fn finish_call(
        &self,
        xid: u32,
        finish: impl FnOnce(&mut ReplyBuf<'_>) -> Result<Finish>,
    ) -> Result {
        let _receiving = self.receive.lock();
        let x = self.as_raw();
        // SAFETY: A live transport (type invariant).
        let queue_lock = unsafe { addr_of_mut!((*x).queue_lock) };
        // SAFETY: `queue_lock` is initialised; `xprt_lookup_rqst` and `xprt_pin_rqst` want it
        // held.
        let rqst = unsafe {
            bindings::spin_lock(queue_lock);
            let rqst = bindings::xprt_lookup_rqst(x, xid.to_be());
            if !rqst.is_null() {
                bindings::xprt_pin_rqst(rqst);
            }
            bindings::spin_unlock(queue_lock);
            rqst
        };
        if rqst.is_null() {
            return Err(ENOENT);
        }
        // INVARIANT: The call is pinned: it stays on the receive queue, and its buffers valid,
        // until unpinned below; `receive` keeps every other reply of this transport out, and
        // the call does not read the buffer before it is completed.
        // SAFETY: `rqst` is pinned, so valid, and its reply buffer ours (see above).
        let mut buf = unsafe {
            ReplyBuf::new(
                addr_of_mut!((*rqst).rq_private_buf),
                addr_of_mut!((*rqst).rq_rcv_buf),
            )
        };
        let finish = finish(&mut buf);
        // SAFETY: `rqst` is pinned; `xprt_complete_rqst` and `xprt_unpin_rqst` want the lock
        // held, and the request's task is valid while it is on the queue. The task sleeps on
        // the transport's pending queue until `xprt_complete_rqst` wakes it, so nothing else
        // writes its status meanwhile. A status goes into the task with no reply bytes (the
        // RPC client takes any byte count as a reply to decode, and a negative one as a huge
        // length), as the C transport reports a bad reply.
        unsafe {
            bindings::spin_lock(queue_lock);
            let task = (*rqst).rq_task;
            match finish {
                Ok(Finish::Bytes(copied)) => bindings::xprt_complete_rqst(task, copied),
                Ok(Finish::Status(errno)) => {
                    (*task).tk_status = errno;
                    bindings::xprt_complete_rqst(task, 0);
                }
                Err(_) => {}
            }
            bindings::xprt_unpin_rqst(rqst);
            bindings::spin_unlock(queue_lock);
        }
        finish.map(|_| ())
    }
}

/// How [`Xprt::finish_call`] completes a call.
enum Finish {
    /// With this many bytes of reply in its receive buffer.
    Bytes(c_int),
    /// With no reply and this (negative) status.
    Status(c_int),
}

/// A reference to a transport of `T`; dropping it may destroy the transport and may sleep.
///
/// # Invariants
///
/// `ptr` is a live `Xprt<T>` on which this holds a reference (`xprt_get`).
pub struct XprtRef<T: Transport> {
    ptr: NonNull<Xprt<T>>,
}

// SAFETY: A reference may be dropped on any thread; `Xprt<T>` is `Sync`.
unsafe impl<T: Transport> Send for XprtRef<T> {}
// SAFETY: Shared access only gives `&Xprt<T>`, which is `Sync`.
unsafe impl<T: Transport> Sync for XprtRef<T> {}

impl<T: Transport> Deref for XprtRef<T> {
    type Target = Xprt<T>;

    fn deref(&self) -> &Xprt<T> {
        // SAFETY: Live while the reference is held (type invariant).
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: Transport> Drop for XprtRef<T> {
    fn drop(&mut self) {
        // SAFETY: Drops the reference this holds (type invariant).
        unsafe { bindings::xprt_put(self.ptr.as_ptr().cast()) }
    }
}

/// A connect in progress, handed to [`Transport::connect`]; it holds the transport's write lock
/// until completed. Dropping it completes it with `ENOTCONN`.
///
/// # Invariants
///
/// `ptr` is a live `Xprt<T>` whose write lock this holds, with the container as cookie
/// (`xprt_lock_connect`); the RPC client cannot destroy the transport until it is released.
pub struct Connect<T: Transport> {
    ptr: NonNull<Xprt<T>>,
}

// SAFETY: The lock may be released from any thread (the C transports do so from a worker).
unsafe impl<T: Transport> Send for Connect<T> {}
// SAFETY: Shared access only gives `&Xprt<T>`, which is `Sync`.
unsafe impl<T: Transport> Sync for Connect<T> {}

impl<T: Transport> Connect<T> {
    /// The transport being connected.
    pub fn xprt(&self) -> &Xprt<T> {
        // SAFETY: Live while the write lock is held (type invariant).
        unsafe { self.ptr.as_ref() }
    }

    /// Waits before connecting again, as long as the RPC client's reconnect delay for the
    /// transport says (`xprt_reconnect_delay`: from the last connect attempt, at most the
    /// current reestablish timeout), then doubles that timeout for the next time, from
    /// `initial` up to the transport's maximum (`xprt_reconnect_backoff`). Sleeps: for the
    /// transport's own worker, when it reconnects. The sleep is idle (`TASK_IDLE`): a worker
    /// waiting a minute between connects to a server that is gone is not a blocked task.
    pub fn back_off(&self, initial: c_ulong) {
        let x = self.xprt().as_raw();
        // SAFETY: The transport is live and its write lock ours (type invariant), which
        // serialises the reestablish timeout with the rest of the connect path.
        let delay = unsafe { bindings::xprt_reconnect_delay(x) };
        // SAFETY: As above.
        unsafe { bindings::xprt_reconnect_backoff(x, initial) };
        if delay > 0 {
            let delay = c_long::try_from(delay).unwrap_or(c_long::MAX);
            // SAFETY: Sleeping is allowed here (a worker, see above).
            unsafe { bindings::schedule_timeout_idle(delay) };
        }
    }

    /// Completes the connect as the C connect workers do: on success marks the transport
    /// connected, bumps its connect cookie and statistics, and lets the waiting calls retry;
    /// on failure wakes them with the error (`ECONNREFUSED`, `ETIMEDOUT`, ...).
    pub fn complete(self, result: Result) {
        let this = core::mem::ManuallyDrop::new(self);
        this.finish(result);
    }

    fn finish(&self, result: Result) {
        let x = self.xprt().as_raw();
        // SAFETY: The transport is live and its write lock ours (type invariant), which
        // serialises these fields with the rest of the connect and close paths; the lock is
        // released last, after which the transport is not touched.
        unsafe {
            bindings::xprt_clear_connecting(x);
            let status = match result {
                Ok(()) => {
                    (*x).connect_cookie = (*x).connect_cookie.wrapping_add(1);
                    (*x).stat.connect_count = (*x).stat.connect_count.wrapping_add(1);
                    let now = core::ptr::read_volatile(addr_of!(bindings::jiffies));
                    let start = (*x).stat.connect_start;
                    (*x).stat.connect_time =
                        (*x).stat.connect_time.wrapping_add(now.wrapping_sub(start));
                    bindings::xprt_set_connected(x);
                    EAGAIN.to_errno()
                }
                Err(e) => e.to_errno(),
            };
            bindings::xprt_wake_pending_tasks(x, status);
            bindings::xprt_unlock_connect(x, self.ptr.as_ptr().cast());
        }
    }
}

impl<T: Transport> Drop for Connect<T> {
    fn drop(&mut self) {
        self.finish(Err(ENOTCONN));
    }
}
