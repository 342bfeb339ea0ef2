// SPDX-License-Identifier: GPL-2.0

//! Kernel TCP sockets.
//!
//! An in-kernel protocol over TCP — iWARP's MPA, NBD, iSCSI — needs three things from a socket:
//! the usual connection calls (bind, listen, accept, connect, send, receive, shutdown), a way to
//! be told when something happens without a thread blocking on it, and a way to consume
//! received data right where TCP queues it. [`TcpSocket`] gives the first, owning the
//! `struct socket` and releasing it on drop. [`TcpSocket::install_callbacks`] gives the second:
//! the socket's `sk_data_ready`, `sk_write_space` and `sk_state_change` are pointed at
//! trampolines that call a [`TcpCallbacks`] object, and the previous callbacks are called after
//! it and restored on removal. In `data_ready`, an [`RxQueue`] gives the third: it walks the
//! receive queue with `tcp_read_sock`, offering the bytes as [`SkbSlice`]s that can be copied
//! out, and frees what was consumed. [`splice`] sends memory by page reference.
//!
//! # Context
//!
//! The callbacks run in softirq context, with the socket's `sk_callback_lock` held for reading:
//! they must not sleep, and data they share with process context needs a lock that disables
//! bottom halves ([`SpinLockBh`](crate::sync::SpinLockBh)) or atomics.
//!
//! C headers: [`include/linux/net.h`](srctree/include/linux/net.h),
//! [`include/net/sock.h`](srctree/include/net/sock.h),
//! [`include/net/tcp.h`](srctree/include/net/tcp.h)

use crate::{
    alloc::{flags::GFP_KERNEL, KBox},
    bindings,
    error::{code::*, to_result, Error, Result},
    ffi::{c_int, c_void},
    sync::Arc,
};
use core::{
    marker::PhantomData,
    net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6},
    ptr::NonNull,
};

mod rx_queue;
pub mod splice;

pub use rx_queue::{RxQueue, SkbSlice, PIECES_PER_BATCH};

/// The most buffers [`TcpSocket::send_vectored`] takes in one call.
pub const MAX_SEND_BUFFERS: usize = 16;

/// Flags of a send or receive call (`MSG_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MsgFlags(u32);

impl MsgFlags {
    /// No flags: block until done.
    pub const NONE: Self = Self(0);
    /// `MSG_DONTWAIT`: return `EAGAIN` rather than block.
    pub const DONTWAIT: Self = Self(bindings::MSG_DONTWAIT);
    /// `MSG_MORE`: more data follows; TCP may hold this back to fill a segment.
    pub const MORE: Self = Self(bindings::MSG_MORE);
    /// `MSG_WAITALL`: a receive waits for the whole buffer.
    pub const WAITALL: Self = Self(bindings::MSG_WAITALL);
    /// `MSG_NOSIGNAL`: no `SIGPIPE` on a closed connection.
    pub const NOSIGNAL: Self = Self(bindings::MSG_NOSIGNAL);
    /// `MSG_PEEK`: a receive leaves the bytes queued.
    pub const PEEK: Self = Self(bindings::MSG_PEEK);

    /// Both sets of flags (`|` in constants).
    pub const fn or(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

impl core::ops::BitOr for MsgFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// Which directions [`TcpSocket::shutdown`] closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shutdown {
    /// No more receives.
    Read,
    /// No more sends (sends a FIN).
    Write,
    /// Both.
    Both,
}

/// The TCP state of a socket (`TCP_*` of `include/net/tcp_states.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpState {
    /// `TCP_ESTABLISHED`.
    Established,
    /// `TCP_SYN_SENT`.
    SynSent,
    /// `TCP_SYN_RECV`.
    SynRecv,
    /// `TCP_FIN_WAIT1`.
    FinWait1,
    /// `TCP_FIN_WAIT2`.
    FinWait2,
    /// `TCP_TIME_WAIT`.
    TimeWait,
    /// `TCP_CLOSE`.
    Close,
    /// `TCP_CLOSE_WAIT`: the peer closed its side.
    CloseWait,
    /// `TCP_LAST_ACK`.
    LastAck,
    /// `TCP_LISTEN`.
    Listen,
    /// `TCP_CLOSING`.
    Closing,
    /// `TCP_NEW_SYN_RECV`.
    NewSynRecv,
    /// A value this enum does not know.
    Other(u8),
}

impl From<u8> for TcpState {
    fn from(v: u8) -> Self {
        match u32::from(v) {
            bindings::TCP_ESTABLISHED => Self::Established,
            bindings::TCP_SYN_SENT => Self::SynSent,
            bindings::TCP_SYN_RECV => Self::SynRecv,
            bindings::TCP_FIN_WAIT1 => Self::FinWait1,
            bindings::TCP_FIN_WAIT2 => Self::FinWait2,
            bindings::TCP_TIME_WAIT => Self::TimeWait,
            bindings::TCP_CLOSE => Self::Close,
            bindings::TCP_CLOSE_WAIT => Self::CloseWait,
            bindings::TCP_LAST_ACK => Self::LastAck,
            bindings::TCP_LISTEN => Self::Listen,
            bindings::TCP_CLOSING => Self::Closing,
            bindings::TCP_NEW_SYN_RECV => Self::NewSynRecv,
            _ => Self::Other(v),
        }
    }
}

/// A `struct sockaddr` big enough for IPv4 and IPv6, as the socket calls take it.
#[repr(C)]
pub(crate) union RawSockAddr {
    v4: bindings::sockaddr_in,
    v6: bindings::sockaddr_in6,
    storage: [u8; 128],
}

impl RawSockAddr {
    pub(crate) fn new(addr: &SocketAddr) -> (Self, c_int) {
        match addr {
            SocketAddr::V4(a) => {
                let v4 = bindings::sockaddr_in {
                    sin_family: bindings::AF_INET as _,
                    sin_port: a.port().to_be(),
                    sin_addr: bindings::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    ..Default::default()
                };
                (
                    Self { v4 },
                    core::mem::size_of::<bindings::sockaddr_in>() as c_int,
                )
            }
            SocketAddr::V6(a) => {
                let v6 = bindings::sockaddr_in6 {
                    sin6_family: bindings::AF_INET6 as _,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo().to_be(),
                    sin6_addr: bindings::in6_addr {
                        in6_u: bindings::in6_addr__bindgen_ty_1 {
                            u6_addr8: a.ip().octets(),
                        },
                    },
                    sin6_scope_id: a.scope_id(),
                };
                (
                    Self { v6 },
                    core::mem::size_of::<bindings::sockaddr_in6>() as c_int,
                )
            }
        }
    }

    /// The address as the C calls take it.
    pub(crate) fn as_sockaddr(&mut self) -> *mut bindings::sockaddr {
        (self as *mut Self).cast()
    }

    pub(crate) fn empty() -> Self {
        Self { storage: [0; 128] }
    }

    /// A copy of the first `len` bytes (at most 128) of the address at `sap`; an empty one if
    /// `sap` is null.
    ///
    /// # Safety
    ///
    /// `sap` is null or points to `len` readable bytes.
    pub(crate) unsafe fn from_raw(sap: *const bindings::sockaddr, len: usize) -> Self {
        let mut this = Self::empty();
        if !sap.is_null() {
            let dst = (&mut this as *mut Self).cast::<u8>();
            // SAFETY: `len` bytes are readable at `sap` (the caller's guarantee); at most the
            // 128 bytes of `this` are written.
            unsafe { core::ptr::copy_nonoverlapping(sap.cast::<u8>(), dst, len.min(128)) };
        }
        this
    }

    pub(crate) fn to_socket_addr(&self) -> Result<SocketAddr> {
        // SAFETY: Every bit pattern is a valid `sockaddr_in`; the family field is at the same
        // place in all the variants.
        let family = u32::from(unsafe { self.v4.sin_family });
        match family {
            bindings::AF_INET => {
                // SAFETY: The family says the socket layer wrote a `sockaddr_in`; any bit pattern
                // of it is valid.
                let v4 = unsafe { self.v4 };
                Ok(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(v4.sin_addr.s_addr.to_ne_bytes()),
                    u16::from_be(v4.sin_port),
                )))
            }
            bindings::AF_INET6 => {
                // SAFETY: As above, for `sockaddr_in6`; the address union is plain bytes.
                let (v6, octets) = unsafe { (self.v6, self.v6.sin6_addr.in6_u.u6_addr8) };
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(octets),
                    u16::from_be(v6.sin6_port),
                    u32::from_be(v6.sin6_flowinfo),
                    v6.sin6_scope_id,
                )))
            }
            _ => Err(EAFNOSUPPORT),
        }
    }

    fn as_mut_ptr(&mut self) -> *mut bindings::sockaddr {
        (self as *mut Self).cast()
    }
}

/// Turns the return value of a socket call that gives a length or `-errno` into a `Result`.
#[inline]
fn to_len(ret: c_int) -> Result<usize> {
    if ret < 0 {
        Err(Error::from_errno(ret))
    } else {
        Ok(ret as usize)
    }
}

/// An empty `msghdr` with `flags`, as C's `struct msghdr msg = { .msg_flags = flags }` (the
/// derived `Default` is all zeroes).
fn message(flags: u32) -> bindings::msghdr {
    bindings::msghdr {
        msg_flags: flags,
        ..Default::default()
    }
}

/// A kernel TCP socket in the initial network namespace.
///
/// # Invariants
///
/// `sock` points to a `struct socket` created by `sock_create_kern` or `kernel_accept`, owned
/// by this value (released on drop), and its `sk` is non-null.
/// The `sk_user_data` of that `sk` is null, or a pointer from `KBox::into_raw` of an
/// `Installed` (with flag bits of `USER_DATA_FLAGS` possibly set), written only with
/// `sk_callback_lock` held for writing, and then the socket's three callbacks are the
/// trampolines of this module.
pub struct TcpSocket {
    sock: NonNull<bindings::socket>,
}

// SAFETY: The socket layer serialises calls on a socket itself (the socket lock); a kernel
// socket may be used and released from any thread.
unsafe impl Send for TcpSocket {}

// SAFETY: As above: every method takes `&self` and the socket layer does its own locking.
unsafe impl Sync for TcpSocket {}

impl TcpSocket {
    /// Creates a TCP socket for `addr`'s family (IPv4 or IPv6).
    pub fn new(family_of: &SocketAddr) -> Result<Self> {
        let family = match family_of {
            SocketAddr::V4(_) => bindings::AF_INET,
            SocketAddr::V6(_) => bindings::AF_INET6,
        };
        let mut sock = core::ptr::null_mut();
        // SAFETY: `init_net` lives forever; `sock` is a valid place for the result.
        to_result(unsafe {
            bindings::sock_create_kern(
                core::ptr::addr_of_mut!(bindings::init_net),
                family as c_int,
                bindings::sock_type_SOCK_STREAM as c_int,
                bindings::IPPROTO_TCP as c_int,
                &mut sock,
            )
        })?;
        // SAFETY: `sock_create_kern` succeeded, so `sock` is a new socket we own.
        unsafe { Self::from_raw(sock) }
    }

    /// Takes ownership of a socket.
    ///
    /// # Safety
    ///
    /// `sock` must be null or a valid socket nobody else will release, whose `sk_user_data` is
    /// null or was set by this module.
    unsafe fn from_raw(sock: *mut bindings::socket) -> Result<Self> {
        let sock = NonNull::new(sock).ok_or(EINVAL)?;
        // SAFETY: `sock` is valid (the caller's guarantee).
        if unsafe { (*sock.as_ptr()).sk }.is_null() {
            // SAFETY: We own `sock`; without `sk` it is of no use.
            unsafe { bindings::sock_release(sock.as_ptr()) };
            return Err(EINVAL);
        }
        // INVARIANT: Owned and valid with a non-null `sk`, by the above and the caller.
        Ok(Self { sock })
    }

    #[inline]
    fn sk(&self) -> *mut bindings::sock {
        // SAFETY: `sock` is valid and its `sk` set (type invariant); `sk` does not change for
        // the life of a kernel socket.
        unsafe { (*self.sock.as_ptr()).sk }
    }

    /// Binds to `addr` (port 0: any free port).
    pub fn bind(&self, addr: &SocketAddr) -> Result {
        let (mut raw, len) = RawSockAddr::new(addr);
        // SAFETY: `sock` is valid; `raw` holds a `sockaddr` of `len` bytes.
        to_result(unsafe { bindings::kernel_bind(self.sock.as_ptr(), raw.as_mut_ptr(), len) })
    }

    /// Starts listening with a queue of `backlog` pending connections.
    pub fn listen(&self, backlog: u32) -> Result {
        let backlog = c_int::try_from(backlog).map_err(|_| EINVAL)?;
        // SAFETY: `sock` is valid.
        to_result(unsafe { bindings::kernel_listen(self.sock.as_ptr(), backlog) })
    }

    /// Accepts a connection; with `nonblocking`, returns `EAGAIN` when none is pending.
    ///
    /// A connection accepted from a listener with callbacks installed starts without any (it
    /// runs the socket layer's default behaviour until it gets callbacks of its own).
    pub fn accept(&self, nonblocking: bool) -> Result<TcpSocket> {
        let mut new = core::ptr::null_mut();
        let flags = if nonblocking { bindings::O_NONBLOCK } else { 0 };
        // SAFETY: `sock` is valid; `new` is a valid place for the result.
        to_result(unsafe {
            bindings::kernel_accept(self.sock.as_ptr(), &mut new, flags as c_int)
        })?;
        // SAFETY: `kernel_accept` succeeded: `new` is a socket we own. Its `sk` was cloned from
        // ours, with `sk_user_data` cleared because we install it with the no-copy flag, and
        // callbacks that are this module's trampolines or the listener's originals.
        unsafe { Self::from_raw(new) }
    }

    /// Connects to `addr`; with `nonblocking`, returns `EINPROGRESS` while the handshake runs
    /// (watch [`TcpCallbacks::state_change`] for the outcome).
    pub fn connect(&self, addr: &SocketAddr, nonblocking: bool) -> Result {
        let (mut raw, len) = RawSockAddr::new(addr);
        let flags = if nonblocking { bindings::O_NONBLOCK } else { 0 };
        // SAFETY: `sock` is valid; `raw` holds a `sockaddr` of `len` bytes.
        to_result(unsafe {
            bindings::kernel_connect(self.sock.as_ptr(), raw.as_mut_ptr(), len, flags as c_int)
        })
    }

    /// Sends `data`; returns how many bytes were queued (fewer than asked only with
    /// [`MsgFlags::DONTWAIT`]).
    #[inline]
    pub fn send(&self, data: &[u8], flags: MsgFlags) -> Result<usize> {
        // One kvec, not `send_vectored`'s array of them: small messages take this path, and
        // setting up the array costs more than their copy.
        let mut kvec = bindings::kvec {
            iov_base: data.as_ptr().cast_mut().cast(),
            iov_len: data.len(),
        };
        let mut msg = message(flags.0);
        // SAFETY: `sock` is valid; `kvec` describes `data`, which stays borrowed (and is only
        // read) for the call.
        to_len(unsafe {
            bindings::kernel_sendmsg(self.sock.as_ptr(), &mut msg, &mut kvec, 1, data.len())
        })
    }

    /// Sends the concatenation of `bufs` (at most [`MAX_SEND_BUFFERS`]) in one call.
    pub fn send_vectored(&self, bufs: &[&[u8]], flags: MsgFlags) -> Result<usize> {
        if bufs.len() > MAX_SEND_BUFFERS {
            return Err(EINVAL);
        }
        let mut kvecs = [bindings::kvec::default(); MAX_SEND_BUFFERS];
        let mut total = 0usize;
        for (kvec, buf) in kvecs.iter_mut().zip(bufs) {
            kvec.iov_base = buf.as_ptr().cast_mut().cast();
            kvec.iov_len = buf.len();
            total = total.checked_add(buf.len()).ok_or(EMSGSIZE)?;
        }
        let mut msg = message(flags.0);
        // SAFETY: `sock` is valid; the first `bufs.len()` kvecs describe the `bufs` slices,
        // which stay borrowed (and are only read) for the call; `total` is their length.
        to_len(unsafe {
            bindings::kernel_sendmsg(
                self.sock.as_ptr(),
                &mut msg,
                kvecs.as_mut_ptr(),
                bufs.len(),
                total,
            )
        })
    }

    /// Whether the socket has room for more to send: a send with [`MsgFlags::DONTWAIT`] that
    /// found none is followed by [`TcpCallbacks::write_space`] once this becomes true.
    pub fn is_writeable(&self) -> bool {
        // SAFETY: `sk` is valid while `self` is.
        unsafe { bindings::sk_stream_is_writeable(self.sk()) }
    }

    /// Receives into `buf`; returns the number of bytes, 0 when the peer has closed.
    pub fn recv(&self, buf: &mut [u8], flags: MsgFlags) -> Result<usize> {
        let mut kvec = bindings::kvec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut msg = bindings::msghdr::default();
        // SAFETY: `sock` is valid; `kvec` describes `buf`, writable and borrowed for the call.
        to_len(unsafe {
            bindings::kernel_recvmsg(
                self.sock.as_ptr(),
                &mut msg,
                &mut kvec,
                1,
                buf.len(),
                flags.0 as c_int,
            )
        })
    }

    /// Shuts down one or both directions.
    pub fn shutdown(&self, how: Shutdown) -> Result {
        let how = match how {
            Shutdown::Read => bindings::sock_shutdown_cmd_SHUT_RD,
            Shutdown::Write => bindings::sock_shutdown_cmd_SHUT_WR,
            Shutdown::Both => bindings::sock_shutdown_cmd_SHUT_RDWR,
        };
        // SAFETY: `sock` is valid.
        to_result(unsafe { bindings::kernel_sock_shutdown(self.sock.as_ptr(), how) })
    }

    /// Sends segments as soon as possible (`TCP_NODELAY`): no Nagle delay.
    pub fn set_nodelay(&self) {
        // SAFETY: `sk` is a valid TCP socket.
        unsafe { bindings::tcp_sock_set_nodelay(self.sk()) }
    }

    /// Caps the segments of this socket at `mss` bytes (`TCP_MAXSEG`). Before `connect`, the
    /// SYN advertises it, so the peer sends segments no larger either.
    pub fn set_max_segment(&self, mss: u16) -> Result {
        let mut value = crate::ffi::c_int::from(mss);
        // SAFETY: `KERNEL_SOCKPTR` only wraps the pointer; `value` is a live `int`.
        let optval = unsafe { bindings::KERNEL_SOCKPTR((&raw mut value).cast()) };
        // SAFETY: `sk` is a valid TCP socket; `optval` points at `value`, which outlives the
        // call, and `optlen` is its size; `tcp_setsockopt` takes the socket lock itself.
        to_result(unsafe {
            bindings::tcp_setsockopt(
                self.sk(),
                bindings::SOL_TCP as crate::ffi::c_int,
                bindings::TCP_MAXSEG as crate::ffi::c_int,
                optval,
                core::mem::size_of::<crate::ffi::c_int>() as crate::ffi::c_uint,
            )
        })
    }

    /// Allows binding to an address still in `TIME_WAIT` (`SO_REUSEADDR`).
    pub fn set_reuseaddr(&self) {
        // SAFETY: `sk` is valid.
        unsafe { bindings::sock_set_reuseaddr(self.sk()) }
    }

    /// Limits the socket to the interface numbered `ifindex` (`SO_BINDTODEVICE`): a wildcard
    /// listener then only sees connections arriving there, and several such listeners may
    /// share a port on different interfaces.
    pub fn bind_to_device(&self, ifindex: i32) -> Result {
        // SAFETY: `sk` is valid; the function takes the socket lock itself when asked to.
        to_result(unsafe { bindings::sock_bindtoindex(self.sk(), ifindex, true) })
    }

    /// Makes an IPv6 socket IPv6 only (`IPV6_V6ONLY`), before it is bound.
    pub fn set_v6only(&self) -> Result {
        // SAFETY: `sk` is valid.
        to_result(unsafe { bindings::ip6_sock_set_v6only(self.sk()) })
    }

    /// The current maximum segment size of a connected socket (`mss_cache`): the payload of
    /// one TCP segment on this path (large on loopback, about MTU - 52 on Ethernet).
    #[inline]
    pub fn mss(&self) -> u32 {
        // SAFETY: `sk` is a TCP socket (type invariant), so it is the `sock` inside a
        // `tcp_sock`; the field is a plain integer TCP updates as the path changes.
        unsafe { core::ptr::read_volatile(&(*self.sk().cast::<bindings::tcp_sock>()).mss_cache) }
    }

    /// How many segments of [`Self::mss`] TCP currently puts in one GSO packet (`gso_segs`;
    /// 0 before the connection sent anything): TCP sizes it from the device's GSO limit and
    /// the pacing rate.
    #[inline]
    pub fn gso_segments(&self) -> u16 {
        // SAFETY: as in `mss`: the field is a plain integer of the `tcp_sock` TCP updates
        // while sending.
        unsafe { core::ptr::read_volatile(&(*self.sk().cast::<bindings::tcp_sock>()).gso_segs) }
    }

    /// Makes blocking receives give up with `EAGAIN` after `timeout` (`SO_RCVTIMEO`).
    pub fn set_receive_timeout(&self, timeout: crate::time::Jiffies) {
        let timeout = crate::ffi::c_long::try_from(timeout).unwrap_or(crate::ffi::c_long::MAX);
        // SAFETY: `sk` is valid; the socket lock serialises the write with the socket's own
        // users, as `sock_setsockopt` does.
        unsafe {
            bindings::lock_sock_nested(self.sk(), 0);
            (*self.sk()).sk_rcvtimeo = timeout;
            bindings::release_sock(self.sk());
        }
    }

    /// Runs the socket's `sk_data_ready` once, from process context, under the socket lock:
    /// installed callbacks then see bytes that were queued before they were installed.
    pub fn poke_data_ready(&self) {
        // SAFETY: `sk` is valid; its `sk_data_ready` is always set and may be called with the
        // socket locked, which is what `tcp_read_sock` inside it needs.
        unsafe {
            bindings::lock_sock_nested(self.sk(), 0);
            if let Some(ready) = (*self.sk()).sk_data_ready {
                ready(self.sk());
            }
            bindings::release_sock(self.sk());
        }
    }

    /// Turns on TCP keepalive probes (`SO_KEEPALIVE`).
    pub fn set_keepalive(&self) {
        // SAFETY: `sk` is valid.
        unsafe { bindings::sock_set_keepalive(self.sk()) }
    }

    /// The local address.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        let mut raw = RawSockAddr::empty();
        // SAFETY: `sock` is valid; `raw` has room for any inet address.
        to_len(unsafe { bindings::kernel_getsockname(self.sock.as_ptr(), raw.as_mut_ptr()) })?;
        raw.to_socket_addr()
    }

    /// The peer's address (`ENOTCONN` when not connected).
    pub fn peer_addr(&self) -> Result<SocketAddr> {
        let mut raw = RawSockAddr::empty();
        // SAFETY: `sock` is valid; `raw` has room for any inet address.
        to_len(unsafe { bindings::kernel_getpeername(self.sock.as_ptr(), raw.as_mut_ptr()) })?;
        raw.to_socket_addr()
    }

    /// The TCP state, as of now.
    pub fn state(&self) -> TcpState {
        // SAFETY: `sk` is valid; the helper does a `READ_ONCE`.
        TcpState::from(unsafe { bindings::sk_state_read(self.sk()) } as u8)
    }

    /// Directs the socket's `data_ready`, `write_space` and `state_change` notifications to
    /// `handler` (the socket's previous callbacks still run after it). `EBUSY` if callbacks
    /// are installed already.
    ///
    /// Connections accepted from a listener with callbacks do not inherit them.
    pub fn install_callbacks(&self, handler: Arc<dyn TcpCallbacks>) -> Result {
        let mut installed = KBox::new(
            Installed {
                handler,
                data_ready: None,
                write_space: None,
                state_change: None,
            },
            GFP_KERNEL,
        )?;
        let sk = self.sk();
        // SAFETY: `sk` is valid.
        unsafe { bindings::sk_callback_write_lock_bh(sk) };
        // SAFETY: `sk` is valid and we hold `sk_callback_lock` for writing, which guards these
        // fields against the callbacks and other installers.
        let busy = unsafe {
            if (*sk).sk_user_data.is_null() {
                installed.data_ready = (*sk).sk_data_ready;
                installed.write_space = (*sk).sk_write_space;
                installed.state_change = (*sk).sk_state_change;
                // INVARIANT: A pointer from `KBox::into_raw` of an `Installed`, written under
                // the write lock, together with the trampolines. With the no-copy flag a
                // connection cloned from this socket starts with null user data.
                (*sk).sk_user_data = KBox::into_raw(installed)
                    .cast::<c_void>()
                    .wrapping_byte_add(bindings::SK_USER_DATA_NOCOPY as usize);
                (*sk).sk_data_ready = Some(data_ready_trampoline);
                (*sk).sk_write_space = Some(write_space_trampoline);
                (*sk).sk_state_change = Some(state_change_trampoline);
                false
            } else {
                true
            }
        };
        // SAFETY: Locked above.
        unsafe { bindings::sk_callback_write_unlock_bh(sk) };
        if busy {
            Err(EBUSY)
        } else {
            Ok(())
        }
    }

    /// Restores the callbacks the socket had before [`TcpSocket::install_callbacks`] and returns
    /// the handler, or `None` if none was installed. When this returns, no callback is running
    /// the handler any more, and none will.
    pub fn remove_callbacks(&self) -> Option<Arc<dyn TcpCallbacks>> {
        let sk = self.sk();
        // SAFETY: `sk` is valid.
        unsafe { bindings::sk_callback_write_lock_bh(sk) };
        // SAFETY: `sk` is valid and we hold `sk_callback_lock` for writing. A non-null user data
        // pointer is an `Installed` we leaked (type invariant); the trampolines only use it under
        // the read lock, so once we clear it here no one else can reach it.
        let installed = unsafe {
            let p = installed_ptr(sk);
            if p.is_null() {
                None
            } else {
                (*sk).sk_data_ready = (*p).data_ready;
                (*sk).sk_write_space = (*p).write_space;
                (*sk).sk_state_change = (*p).state_change;
                // INVARIANT: Null, together with the restored callbacks.
                (*sk).sk_user_data = core::ptr::null_mut();
                Some(KBox::from_raw(p))
            }
        };
        // SAFETY: Locked above.
        unsafe { bindings::sk_callback_write_unlock_bh(sk) };
        installed.map(|i| KBox::into_inner(i).handler)
    }
}

impl Drop for TcpSocket {
    fn drop(&mut self) {
        drop(self.remove_callbacks());
        // SAFETY: We own the socket (type invariant) and nothing uses it after this.
        unsafe { bindings::sock_release(self.sock.as_ptr()) };
    }
}

/// Notifications of a socket, delivered by [`TcpSocket::install_callbacks`].
///
/// Each runs in softirq context with the socket's callback lock held for reading: it must not
/// sleep, and must not install or remove callbacks (that takes the same lock for writing);
/// defer such work to process context. The socket's previous callback runs after it.
pub trait TcpCallbacks: Send + Sync {
    /// Data arrived (or, on a listener, a connection is ready to accept). `rx` reads it.
    fn data_ready(&self, _rx: &mut RxQueue<'_>) {}
    /// The socket has room to send again (`sk_stream_is_writeable`), after a send found it
    /// full. Only called when it has room: TCP also calls `sk_write_space` on acknowledgements
    /// that free too little.
    fn write_space(&self) {}
    /// The TCP state changed (connected, peer closed, reset...).
    fn state_change(&self, _state: TcpState) {}
}

/// Flag bits the socket layer keeps in the low bits of `sk_user_data`.
const USER_DATA_FLAGS: usize = (bindings::SK_USER_DATA_NOCOPY
    | bindings::SK_USER_DATA_BPF
    | bindings::SK_USER_DATA_PSOCK) as usize;

type SockCallback = Option<unsafe extern "C" fn(*mut bindings::sock)>;

/// What [`TcpSocket::install_callbacks`] hangs off `sk_user_data`.
struct Installed {
    handler: Arc<dyn TcpCallbacks>,
    data_ready: SockCallback,
    write_space: SockCallback,
    state_change: SockCallback,
}

/// The `Installed` of `sk`, or null.
///
/// # Safety
///
/// `sk` must be valid and its `sk_callback_lock` held.
unsafe fn installed_ptr(sk: *mut bindings::sock) -> *mut Installed {
    // SAFETY: `sk` is valid and the lock is held (the caller's guarantee).
    let data = unsafe { (*sk).sk_user_data };
    data.cast::<u8>()
        .wrapping_sub(data as usize & USER_DATA_FLAGS)
        .cast()
}

/// Calls `previous`, unless it is one of our trampolines (a connection accepted from a
/// listener with callbacks has those, with null user data), in which case `default` runs.
///
/// # Safety
///
/// `sk` must be valid, the callback lock held for reading.
unsafe fn chain(
    sk: *mut bindings::sock,
    previous: SockCallback,
    ours: unsafe extern "C" fn(*mut bindings::sock),
    default: unsafe extern "C" fn(*mut bindings::sock),
) {
    let f = match previous {
        Some(f) if f as usize != ours as usize => f,
        _ => default,
    };
    // SAFETY: `f` is the socket's own callback or the socket layer's default for it, called as
    // the socket layer would.
    unsafe { f(sk) }
}

/// Runs `f` with the socket's `Installed` under the callback read lock, or `default` when
/// the socket has none.
///
/// # Safety
///
/// `sk` must be a valid socket, as the socket layer passes to its callbacks.
unsafe fn with_installed(
    sk: *mut bindings::sock,
    f: impl FnOnce(&Installed),
    default: unsafe extern "C" fn(*mut bindings::sock),
) {
    // SAFETY: `sk` is valid.
    unsafe { bindings::sk_callback_read_lock(sk) };
    // SAFETY: `sk` is valid and the lock is held.
    let p = unsafe { installed_ptr(sk) };
    if p.is_null() {
        // SAFETY: `sk` is valid; the default callback of a TCP socket for this event.
        unsafe { default(sk) };
    } else {
        // SAFETY: Non-null user data is an `Installed` that stays alive while we hold the read
        // lock (it is only freed under the write lock).
        f(unsafe { &*p });
    }
    // SAFETY: Locked above.
    unsafe { bindings::sk_callback_read_unlock(sk) };
}

/// `sk_data_ready` of a socket with callbacks.
///
/// # Safety
///
/// Called by the socket layer only, with a valid socket.
unsafe extern "C" fn data_ready_trampoline(sk: *mut bindings::sock) {
    let run = |i: &Installed| {
        // INVARIANT: `sk` is in its `sk_data_ready` while `rx` exists.
        let mut rx = RxQueue {
            sk,
            _p: PhantomData,
        };
        i.handler.data_ready(&mut rx);
        // SAFETY: `sk` is valid and the read lock is held (we run inside `with_installed`).
        unsafe {
            chain(
                sk,
                i.data_ready,
                data_ready_trampoline,
                bindings::sock_def_readable,
            )
        };
    };
    // SAFETY: The socket layer passes a valid socket.
    unsafe { with_installed(sk, run, bindings::sock_def_readable) };
}

/// `sk_write_space` of a socket with callbacks.
///
/// # Safety
///
/// Called by the socket layer only, with a valid socket.
unsafe extern "C" fn write_space_trampoline(sk: *mut bindings::sock) {
    let run = |i: &Installed| {
        // SAFETY: `sk` is valid.
        if unsafe { bindings::sk_stream_is_writeable(sk) } {
            i.handler.write_space();
        }
        // SAFETY: `sk` is valid and the read lock is held (we run inside `with_installed`).
        unsafe {
            chain(
                sk,
                i.write_space,
                write_space_trampoline,
                bindings::sk_stream_write_space,
            )
        };
    };
    // SAFETY: The socket layer passes a valid socket.
    unsafe { with_installed(sk, run, bindings::sk_stream_write_space) };
}

/// `sk_state_change` of a socket with callbacks.
///
/// # Safety
///
/// Called by the socket layer only, with a valid socket.
unsafe extern "C" fn state_change_trampoline(sk: *mut bindings::sock) {
    let run = |i: &Installed| {
        // SAFETY: `sk` is valid.
        let state = TcpState::from(unsafe { bindings::sk_state_read(sk) } as u8);
        i.handler.state_change(state);
        // SAFETY: `sk` is valid and the read lock is held (we run inside `with_installed`).
        unsafe {
            chain(
                sk,
                i.state_change,
                state_change_trampoline,
                bindings::sk_wake_all,
            )
        };
    };
    // SAFETY: The socket layer passes a valid socket.
    unsafe { with_installed(sk, run, bindings::sk_wake_all) };
}
