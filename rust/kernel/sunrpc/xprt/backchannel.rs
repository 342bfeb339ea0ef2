// SPDX-License-Identifier: GPL-2.0

//! The backchannel: calls the server sends to the client over the client's own connection
//! (NFSv4.1 callbacks: CB_NULL, CB_SEQUENCE, CB_RECALL, ...), and the client's replies to them.
//!
//! An NFSv4.1 client offers the server a backchannel when it creates a session: it asks the
//! transport how large a callback may be ([`Transport::bc_maxpayload`]) and how many may be
//! outstanding ([`Transport::bc_num_slots`]), and has it preallocate requests for them
//! (`bc_setup`). The callback service (`bc_serv`, the NFS client's callback threads) takes a
//! received call in one of those requests and sends its reply through the transport's
//! `send_request`, with a request that has no call buffer
//! ([`Rqst::is_backchannel_reply`](super::Rqst::is_backchannel_reply));
//! once the reply went out, the RPC client gives the request back (`bc_free_rqst`).
//!
//! The requests come from the RPC client's own pool, the one the socket transports use
//! (`net/sunrpc/backchannel_rqst.c`): one page to receive a call into and one to encode its
//! reply into, per request. A transport opts in with [`Transport::BACKCHANNEL`]: its ops
//! table then preallocates into that pool (`xprt_setup_bc`), gives requests back to it
//! (`xprt_free_bc_rqst`) and empties it (`xprt_destroy_bc`). It hands each received call to
//! the service with [`Xprt::deliver_backchannel_call`], which takes a request from the pool
//! (`xprt_lookup_bc_request`), copies the call into it and queues it for the service
//! (`xprt_complete_bc_request`). That is the only way a backchannel request of a transport
//! made with this abstraction comes to be, so every one of them belongs to the pool.
//!
//! C header: [`include/linux/sunrpc/bc_xprt.h`](srctree/include/linux/sunrpc/bc_xprt.h)

use super::{Transport, Xprt};
use crate::{
    bindings,
    ffi::{c_int, c_uint},
    prelude::*,
};
use core::ptr::addr_of;

/// The bytes of an RPC call's header the pool looks at: the XID and the message type.
const RPC_CALL_HEADER: usize = 8;

impl<T: Transport> Xprt<T> {
    /// Hands a received backchannel call to the client's callback service: `call` is the
    /// whole RPC call, from its XID on.
    ///
    /// `EOPNOTSUPP` if `T` has no backchannel, `EPROTO` if `call` is shorter than an RPC call's
    /// XID and message type, `ESHUTDOWN` if no callback service runs on the transport (the
    /// client did not ask for a backchannel), `ENOMEM` if no request is free and none can be
    /// allocated (the server sent more calls than the client has slots), `EMSGSIZE` if the call
    /// does not fit a request's receive buffer (a page). The call is dropped then.
    ///
    /// Process context only: it may allocate a request and takes the transport's receive lock,
    /// which orders deliveries with each other and with the emptying of the pool.
    pub fn deliver_backchannel_call(&self, call: &[u8]) -> Result {
        if !T::BACKCHANNEL {
            return Err(EOPNOTSUPP);
        }
        let _receiving = self.receive.lock();
        // SAFETY: A live transport whose backchannel requests belong to the RPC client's pool
        // (`T::BACKCHANNEL`); the receive lock is held.
        unsafe { deliver(self.as_raw(), call) }
    }
}

/// Takes a request from the pool of `x`, copies `call` into it and queues it for the callback
/// service.
///
/// # Safety
///
/// `x` is a live transport whose backchannel requests all belong to the RPC client's pool, and
/// the caller holds the transport's receive lock, which every delivery and the `bc_destroy` of
/// the transport take.
#[inline(never)]
unsafe fn deliver(x: *mut bindings::rpc_xprt, call: &[u8]) -> Result {
    let header = call.get(..RPC_CALL_HEADER).ok_or(EPROTO)?;
    let mut xid = [0u8; 4];
    xid.copy_from_slice(header.get(..4).ok_or(EPROTO)?);
    // The pool compares XIDs as they are on the wire.
    let xid = u32::from_ne_bytes(xid);
    let len = u32::try_from(call.len()).map_err(|_| EMSGSIZE)?;
    // SAFETY: A live transport; the NFS client sets `bc_serv` once, before it creates the
    // session whose calls arrive here, as the C transports assume when they read it.
    let service = unsafe { core::ptr::read_volatile(addr_of!((*x).bc_serv)) };
    if service.is_null() {
        return Err(ESHUTDOWN);
    }
    // SAFETY: A live transport; may allocate (process context, the caller's guarantee).
    let rqst = unsafe { bindings::xprt_lookup_bc_request(x, xid) };
    if rqst.is_null() {
        return Err(ENOMEM);
    }
    // SAFETY: `rqst` is a pool request of `x`, set up for this call by the lookup: its private
    // buffer is a copy of its receive buffer, whose head is the page it owns. It stays in the
    // pool until completed below, and nothing else takes it until then: the receive lock keeps
    // other deliveries and `xprt_destroy_bc` out, and the service only sees completed requests.
    let head = unsafe { (*rqst).rq_private_buf.head[0] };
    if head.iov_base.is_null() || call.len() > head.iov_len {
        return Err(EMSGSIZE);
    }
    // SAFETY: `head` is `iov_len` bytes of the request's own page, no one else's to read or
    // write while it is being delivered (see above); `call` fits.
    unsafe {
        core::ptr::copy_nonoverlapping(call.as_ptr(), head.iov_base.cast::<u8>(), call.len())
    };
    // SAFETY: A request of `x` that the lookup gave, holding `len` bytes of call; the service
    // exists (checked above). This takes it out of the pool, takes a reference on the transport
    // for it and queues it for the service.
    unsafe { bindings::xprt_complete_bc_request(rqst, len) };
    Ok(())
}

/// `bc_setup` of a transport with a backchannel: preallocates `min_reqs` more requests into
/// the RPC client's pool (`xprt_setup_bc`).
///
/// # Safety
///
/// Called by the RPC client with a live transport made by this abstraction.
pub(super) unsafe extern "C" fn setup(xprt: *mut bindings::rpc_xprt, min_reqs: c_uint) -> c_int {
    // SAFETY: The caller's guarantee.
    unsafe { bindings::xprt_setup_bc(xprt, min_reqs) }
}

/// `bc_free_rqst` of a transport with a backchannel: gives a request back to the pool, or
/// frees it if the pool needs no more (`xprt_free_bc_rqst`), and drops the reference on the
/// transport its delivery took.
///
/// # Safety
///
/// Called by the RPC client with a backchannel request of a transport of this abstraction
/// (so one of the pool, see the module documentation) that the service is done with.
pub(super) unsafe extern "C" fn free_rqst(rqst: *mut bindings::rpc_rqst) {
    // SAFETY: The caller's guarantee.
    unsafe { bindings::xprt_free_bc_rqst(rqst) }
}

/// `bc_destroy` of a transport of `T` with a backchannel: frees up to `max_reqs` of the pool's
/// requests (`xprt_destroy_bc`), under the receive lock so that no delivery holds one of them.
///
/// # Safety
///
/// Called by the RPC client with a live transport of `T`.
pub(super) unsafe extern "C" fn destroy<T: Transport>(
    xprt: *mut bindings::rpc_xprt,
    max_reqs: c_uint,
) {
    // SAFETY: The caller's guarantee.
    let x = unsafe { Xprt::<T>::from_raw(xprt) };
    let _receiving = x.receive.lock();
    // SAFETY: A live transport; its deliveries, which hold pool requests that are still in the
    // pool, are kept out by the lock.
    unsafe { destroy_pool(xprt, max_reqs) }
}

/// # Safety
///
/// `xprt` is a live transport whose receive lock the caller holds.
#[inline(never)]
unsafe fn destroy_pool(xprt: *mut bindings::rpc_xprt, max_reqs: c_uint) {
    // SAFETY: The caller's guarantee.
    unsafe { bindings::xprt_destroy_bc(xprt, max_reqs) }
}
