// SPDX-License-Identifier: GPL-2.0

//! Client transports on a server's connections: the backchannel of an NFSv4.1 server.
//!
//! An NFSv4.1 server calls its clients back (CB_RECALL, ...) over a connection the client
//! opened, in the reverse direction (RFC 8167 for RPC-over-RDMA). nfsd makes the callback
//! client with `rpc_create`, naming the connection (`bc_xprt`) and the ident of the
//! connection's server class with [`XPRT_TRANSPORT_BC`](super::super::xprt_class::XPRT_TRANSPORT_BC)
//! set; the client class of that ident creates a client transport whose calls go out on the
//! connection ([`Xprt::create_backchannel`]). The class must make sure the connection is one
//! of its own ([`CreateArgs::server_connection`]): the RPC server hands over any connection.
//!
//! References. The RPC client owns the new transport, as any other. The connection keeps one
//! more (`xpt_bc_xprt`): the RPC server closes the transport with the connection
//! (`svc_delete_xprt`), puts that reference when the connection is freed, and gives the
//! transport to every later callback client of the connection (`rpc_create` looks there
//! first). The transport holds none on the connection, and no pointer to it that C follows
//! (`rpc_xprt::bc_xprt` stays null): it reaches the connection through the connection's
//! [`SvcHandle`](super::super::svc_xprt::SvcHandle), which the connection's `xpo_free`
//! revokes. So the transport may outlive the connection; its calls then fail.

use super::{Config, Transport, Xprt, XprtRef};
use crate::{
    bindings,
    prelude::*,
    sunrpc::{
        svc_xprt::{SvcTransport, SvcXprt},
        svc_xprt_class::ServerClass,
        xprt_class::{CreateArgs, TransportPtr},
    },
};
use core::{
    any::TypeId,
    ptr::{addr_of_mut, NonNull},
    sync::atomic::{AtomicPtr, Ordering},
};

impl CreateArgs<'_> {
    /// The connection whose callback client is being created (`bc_xprt`), if it is a
    /// connection of transport type `S` (its class's [`ServerClass::Connection`]).
    ///
    /// `EINVAL` if the client is not for a connection; `EPROTONOSUPPORT` if the connection is
    /// of another class, or `S` is not its class's connection type.
    pub fn server_connection<S: SvcTransport>(&self) -> Result<&SvcXprt<S>> {
        let svc = self.as_raw().bc_xprt;
        if svc.is_null() {
            return Err(EINVAL);
        }
        let connection = TypeId::of::<<S::Class as ServerClass>::Connection>();
        if TypeId::of::<S>() != connection {
            return Err(EPROTONOSUPPORT);
        }
        // SAFETY: A service that creates a callback client passes a transport it holds a
        // reference on for the call (nfsd's `cb_xprt`); its class is set by `svc_xprt_init`
        // and never changes, and its flags are read atomically.
        let (class, listener) = unsafe {
            (
                (*svc).xpt_class,
                bindings::svc_xprt_test_flag(svc, bindings::XPT_LISTENER),
            )
        };
        if !core::ptr::eq(class, <S::Class as ServerClass>::SLOT.as_ptr()) || listener {
            return Err(EPROTONOSUPPORT);
        }
        // SAFETY: A transport of `S`'s class that is no listener is a `SvcXprt` of the class's
        // connection type (`SvcXprt::create` makes no other kind), which is `S` (checked
        // above); it is live for the call (see above).
        Ok(unsafe { SvcXprt::from_raw(svc) })
    }
}

impl<T: Transport> Xprt<T> {
    /// Creates a transport of `T` whose calls go out on the server connection `conn`, from
    /// the `setup` of a backchannel class (see the module documentation): connected from the
    /// start, linked to `conn` (`xpt_bc_xprt`, which takes a reference). Returns the
    /// transport for the RPC client and a reference for the caller, who keeps it with the
    /// connection to hand replies to the transport.
    ///
    /// `EEXIST` if `conn` has a backchannel transport already; as [`Xprt::create`] otherwise.
    pub fn create_backchannel<S: SvcTransport>(
        args: &CreateArgs<'_>,
        conn: &SvcXprt<S>,
        config: &Config,
        init: impl PinInit<T, Error>,
    ) -> Result<(TransportPtr, XprtRef<T>)> {
        let ptr = Self::create(args, config, init)?;
        let x = ptr.as_raw();
        // SAFETY: `create` set up `x` as a `Xprt<T>` on which `ptr` holds a reference; no one
        // else knows it yet.
        unsafe {
            bindings::xprt_set_bound(x);
            bindings::xprt_set_connected(x);
            // One reference for the connection, one for the caller (the count is not zero).
            bindings::xprt_get(x);
            bindings::xprt_get(x);
        }
        let svc = conn.as_raw();
        // SAFETY: `xpt_bc_xprt` is a pointer field of a live transport, aligned as an
        // `AtomicPtr`; the RPC server only reads it (and puts its reference when the
        // connection is freed), class `setup`s write it while null, and this write is atomic.
        let slot = unsafe { AtomicPtr::from_ptr(addr_of_mut!((*svc).xpt_bc_xprt)) };
        let linked = slot.compare_exchange(
            core::ptr::null_mut(),
            x,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        if linked.is_err() {
            // SAFETY: The three references on `x` (the client's and the two taken above); the
            // last put destroys the transport.
            unsafe {
                bindings::xprt_put(x);
                bindings::xprt_put(x);
                bindings::xprt_put(x);
            }
            return Err(EEXIST);
        }
        // INVARIANT: The second reference taken above, on a live `Xprt<T>`; `x` is not null
        // (it came from `create`).
        let caller = XprtRef {
            // SAFETY: As above.
            ptr: unsafe { NonNull::new_unchecked(x.cast::<Self>()) },
        };
        Ok((ptr, caller))
    }
}
