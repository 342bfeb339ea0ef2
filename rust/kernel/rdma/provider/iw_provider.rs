// SPDX-License-Identifier: GPL-2.0

//! The iWARP connection manager's provider side: the `iw_*` verbs of an iWARP device and the
//! events it delivers back (`include/rdma/iw_cm.h`).
//!
//! rdma_cm runs iWARP connections through iw_cm, which calls the provider to connect, listen,
//! accept and reject, and expects events in return: a connection request on a listening id,
//! the reply to a connect, established, disconnect and close. An [`IwCmId`] is the provider's
//! reference to an `iw_cm_id`: it takes one of the id's references (`add_ref`) when made and
//! drops it (`rem_ref`) when dropped, so the id stays alive for as long as the provider may
//! deliver events to it — iw_cm's reference rule.
//!
//! iw_cm also holds the QP of a connection (`iw_add_ref`/`iw_rem_ref`, in
//! [`super::objects`]): destroying a QP waits until iw_cm let go of it, which it does when the
//! provider reports the connection closed. So CLOSE must reach iw_cm once for every connection
//! it heard was up (ESTABLISHED, or a successful CONNECT_REPLY), and never before (iw_cm
//! `BUG()`s on a close while it waits for the ULP to accept). The types say so: only
//! [`IwCmId::connected`] reports a connection up, and it turns the id into a [`ConnectedId`],
//! the only way to deliver DISCONNECT and CLOSE; CLOSE goes when that is dropped.
//!
//! C header: [`include/rdma/iw_cm.h`](srctree/include/rdma/iw_cm.h)

use super::device::{with_driver, Driver};
use crate::{
    bindings,
    error::{from_result, Result},
    ffi::{c_int, c_void},
    net::tcp::RawSockAddr,
    prelude::*,
};
use core::net::SocketAddr;

/// A reference to an `iw_cm_id`.
///
/// # Invariants
///
/// `id` points to a live `iw_cm_id` of which this value holds one reference (taken with its
/// `add_ref`, dropped with its `rem_ref`).
pub struct IwCmId {
    id: *mut bindings::iw_cm_id,
}

// SAFETY: iw_cm ids are used from any thread; iw_cm serialises its own state.
unsafe impl Send for IwCmId {}
// SAFETY: As above; the methods taking `&self` only read fields iw_cm set before handing the
// id over, or call iw_cm's event handler, which may be called concurrently.
unsafe impl Sync for IwCmId {}

/// Connection parameters of `iw_connect` and `iw_accept` (`struct iw_cm_conn_param`).
pub struct IwConnParam<'a> {
    /// The ULP's private data.
    pub private_data: &'a [u8],
    /// Outbound RDMA Read queue depth.
    pub ord: u32,
    /// Inbound RDMA Read queue depth.
    pub ird: u32,
    /// The QP to connect.
    pub qpn: u32,
}

/// The most private data an event can carry to iw_cm (`iw_cm_event.private_data_len` is a
/// byte), less than the 512 bytes MPA allows.
pub const MAX_EVENT_PRIVATE_DATA: usize = u8::MAX as usize;

/// An event for iw_cm.
pub enum IwEvent<'a> {
    /// A peer asks to connect, on a listening id. `provider_data` identifies the pending
    /// connection in the later `iw_accept`/`iw_reject` (as [`IwCmId::provider_data`]).
    ConnectRequest {
        /// The provider's handle of the connection.
        provider_data: usize,
        /// Local address.
        local: SocketAddr,
        /// Peer address.
        remote: SocketAddr,
        /// The peer's private data.
        private_data: &'a [u8],
        /// The peer's IRD.
        ird: u8,
        /// The peer's ORD.
        ord: u8,
    },
    /// The answer to `iw_connect` when it failed (a connect that succeeded is reported by
    /// [`IwCmId::connected`]).
    ConnectFailed {
        /// Why: `ECONNREFUSED` for a reject, others for failures.
        error: Error,
        /// Local address.
        local: SocketAddr,
        /// Peer address.
        remote: SocketAddr,
        /// The peer's private data.
        private_data: &'a [u8],
        /// The negotiated IRD.
        ird: u8,
        /// The negotiated ORD.
        ord: u8,
    },
}

/// How a connection came up, for [`IwCmId::connected`].
pub enum Up<'a> {
    /// An accepted connection is up (ESTABLISHED).
    Established,
    /// The peer accepted our connect (a successful CONNECT_REPLY).
    Accepted {
        /// Local address.
        local: SocketAddr,
        /// Peer address.
        remote: SocketAddr,
        /// The peer's private data.
        private_data: &'a [u8],
        /// The negotiated IRD.
        ird: u8,
        /// The negotiated ORD.
        ord: u8,
    },
}

/// An `iw_cm_id` whose connection iw_cm knows is up: it can hear DISCONNECT, and hears CLOSE
/// when this is dropped.
///
/// # Invariants
///
/// iw_cm was delivered ESTABLISHED or a successful CONNECT_REPLY on the id, and not CLOSE.
pub struct ConnectedId(IwCmId);

impl ConnectedId {
    /// The identity of the id ([`IwCmId::key`]), by which the RDMA core's resource tracking
    /// names its connection ([`Driver::fill_restrack_cm_id`](super::device::Driver)).
    pub fn key(&self) -> usize {
        self.0.key()
    }

    /// Tells iw_cm the peer or the ULP started to close (DISCONNECT).
    pub fn disconnect(&self, status: Result) -> Result {
        // SAFETY: `iw_cm_event` is plain data for which all zeroes is valid.
        let mut ev: bindings::iw_cm_event = unsafe { core::mem::zeroed() };
        ev.event = bindings::iw_cm_event_type_IW_CM_EVENT_DISCONNECT;
        ev.status = match status {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        };
        self.0.deliver_raw(&mut ev)
    }

    /// Tells iw_cm the connection is closed (CLOSE): it lets go of the QP. The same as
    /// dropping it.
    pub fn close(self) {}
}

impl Drop for ConnectedId {
    fn drop(&mut self) {
        // SAFETY: `iw_cm_event` is plain data for which all zeroes is valid.
        let mut ev: bindings::iw_cm_event = unsafe { core::mem::zeroed() };
        ev.event = bindings::iw_cm_event_type_IW_CM_EVENT_CLOSE;
        // INVARIANT: The one CLOSE of the connection; the id goes with it. (iw_cm queues
        // events on work items it allocated for the id ahead; were they all in use, nothing
        // more could be done here.)
        let _ = self.0.deliver_raw(&mut ev);
    }
}

/// Makes `ev` a CONNECT_REPLY with `status` (0: accepted) between `local` and `remote`.
fn connect_reply(
    ev: &mut bindings::iw_cm_event,
    status: c_int,
    local: &SocketAddr,
    remote: &SocketAddr,
) {
    ev.event = bindings::iw_cm_event_type_IW_CM_EVENT_CONNECT_REPLY;
    ev.status = status;
    write_addr(&mut ev.local_addr, local);
    write_addr(&mut ev.remote_addr, remote);
}

/// Gives `ev` the peer's private data (`EMSGSIZE` beyond [`MAX_EVENT_PRIVATE_DATA`]) and the
/// depths. iw_cm copies the data before its handler returns.
fn event_data(ev: &mut bindings::iw_cm_event, data: &[u8], ird: u8, ord: u8) -> Result {
    ev.private_data = data.as_ptr() as *mut c_void;
    ev.private_data_len = u8::try_from(data.len()).map_err(|_| EMSGSIZE)?;
    ev.ird = ird;
    ev.ord = ord;
    Ok(())
}

fn write_addr(to: &mut bindings::__kernel_sockaddr_storage, addr: &SocketAddr) {
    let (raw, _) = RawSockAddr::new(addr);
    // SAFETY: Both are 128-byte plain-data socket address buffers.
    unsafe {
        core::ptr::copy_nonoverlapping(
            (&raw as *const RawSockAddr).cast::<u8>(),
            (to as *mut bindings::__kernel_sockaddr_storage).cast::<u8>(),
            core::mem::size_of::<bindings::__kernel_sockaddr_storage>()
                .min(core::mem::size_of::<RawSockAddr>()),
        )
    };
}

fn read_addr(from: &bindings::__kernel_sockaddr_storage) -> Result<SocketAddr> {
    let mut raw = RawSockAddr::empty();
    // SAFETY: Both are 128-byte plain-data socket address buffers.
    unsafe {
        core::ptr::copy_nonoverlapping(
            (from as *const bindings::__kernel_sockaddr_storage).cast::<u8>(),
            (&mut raw as *mut RawSockAddr).cast::<u8>(),
            core::mem::size_of::<bindings::__kernel_sockaddr_storage>()
                .min(core::mem::size_of::<RawSockAddr>()),
        )
    };
    raw.to_socket_addr()
}

impl IwCmId {
    /// Takes a reference to `id`.
    ///
    /// # Safety
    ///
    /// `id` must be a live `iw_cm_id` handed to the provider by iw_cm.
    unsafe fn get(id: *mut bindings::iw_cm_id) -> Self {
        // SAFETY: iw_cm sets `add_ref` on every id before handing it over.
        unsafe {
            if let Some(add_ref) = (*id).add_ref {
                add_ref(id);
            }
        }
        // INVARIANT: We took a reference.
        Self { id }
    }

    /// An identity of the id, to find it again in `iw_destroy_listen`.
    pub fn key(&self) -> usize {
        self.id as usize
    }

    /// The local address (as mapped by the port mapper, which is what the provider binds).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        // SAFETY: The id is live (the invariant); iw_cm set the address before the call.
        read_addr(unsafe { &(*self.id).m_local_addr })
    }

    /// The peer address (mapped, as above).
    pub fn remote_addr(&self) -> Result<SocketAddr> {
        // SAFETY: As above.
        read_addr(unsafe { &(*self.id).m_remote_addr })
    }

    /// Whether an IPv6 listener takes IPv6 connections only (`afonly`).
    pub fn afonly(&self) -> bool {
        // SAFETY: The id is live (the invariant); iw_cm set the flag before the call.
        unsafe { (*self.id).afonly() }
    }

    /// The provider data of a connection-request id: what the provider gave in
    /// [`IwEvent::ConnectRequest`].
    pub fn provider_data(&self) -> usize {
        // SAFETY: The id is live; iw_cm copied the field from the request event.
        unsafe { (*self.id).provider_data as usize }
    }

    /// Delivers `event` to iw_cm. An error means iw_cm could not take it (no memory), or
    /// `EMSGSIZE` for private data longer than [`MAX_EVENT_PRIVATE_DATA`], which is not
    /// delivered.
    pub fn deliver(&self, event: IwEvent<'_>) -> Result {
        // SAFETY: `iw_cm_event` is plain data for which all zeroes is valid.
        let mut ev: bindings::iw_cm_event = unsafe { core::mem::zeroed() };
        match event {
            IwEvent::ConnectRequest {
                provider_data,
                local,
                remote,
                private_data,
                ird,
                ord,
            } => {
                ev.event = bindings::iw_cm_event_type_IW_CM_EVENT_CONNECT_REQUEST;
                ev.provider_data = provider_data as *mut c_void;
                write_addr(&mut ev.local_addr, &local);
                write_addr(&mut ev.remote_addr, &remote);
                event_data(&mut ev, private_data, ird, ord)?;
            }
            IwEvent::ConnectFailed {
                error,
                local,
                remote,
                private_data,
                ird,
                ord,
            } => {
                // A negative errno: never the 0 of a successful reply.
                connect_reply(&mut ev, error.to_errno(), &local, &remote);
                event_data(&mut ev, private_data, ird, ord)?;
            }
        }
        self.deliver_raw(&mut ev)
    }

    /// Reports the connection up, as `up` says: from now on iw_cm waits for CLOSE, which the
    /// returned [`ConnectedId`] delivers. If iw_cm cannot take the event, it has not seen the
    /// connection up: the id comes back with the error.
    pub fn connected(self, up: Up<'_>) -> core::result::Result<ConnectedId, (Self, Error)> {
        // SAFETY: `iw_cm_event` is plain data for which all zeroes is valid.
        let mut ev: bindings::iw_cm_event = unsafe { core::mem::zeroed() };
        match up {
            Up::Established => ev.event = bindings::iw_cm_event_type_IW_CM_EVENT_ESTABLISHED,
            Up::Accepted {
                local,
                remote,
                private_data,
                ird,
                ord,
            } => {
                connect_reply(&mut ev, 0, &local, &remote);
                if let Err(e) = event_data(&mut ev, private_data, ird, ord) {
                    return Err((self, e));
                }
            }
        }
        match self.deliver_raw(&mut ev) {
            // INVARIANT: iw_cm took ESTABLISHED or a successful CONNECT_REPLY.
            Ok(()) => Ok(ConnectedId(self)),
            Err(e) => Err((self, e)),
        }
    }

    /// Hands `ev` to the id's event handler.
    fn deliver_raw(&self, ev: &mut bindings::iw_cm_event) -> Result {
        // SAFETY: The id is live (the invariant) and iw_cm set its handler; the handler copies
        // the private data before it returns.
        let ret = unsafe {
            match (*self.id).event_handler {
                Some(handler) => handler(self.id, ev),
                None => return Err(EINVAL),
            }
        };
        if ret < 0 {
            Err(Error::from_errno(ret))
        } else {
            Ok(())
        }
    }
}

impl Drop for IwCmId {
    fn drop(&mut self) {
        // SAFETY: We hold a reference (the invariant) and give it back.
        unsafe {
            if let Some(rem_ref) = (*self.id).rem_ref {
                rem_ref(self.id);
            }
        }
    }
}

/// The connection parameters iw_cm passes.
///
/// # Safety
///
/// `p` must be valid, with private data of the given length, for `'a`.
unsafe fn conn_param<'a>(p: *const bindings::iw_cm_conn_param) -> IwConnParam<'a> {
    // SAFETY: Valid for `'a` (the caller's guarantee).
    let p = unsafe { &*p };
    let private_data = if p.private_data.is_null() || p.private_data_len == 0 {
        &[][..]
    } else {
        // SAFETY: `private_data_len` bytes at `private_data` (the caller's guarantee).
        unsafe {
            core::slice::from_raw_parts(p.private_data.cast::<u8>(), p.private_data_len.into())
        }
    };
    IwConnParam {
        private_data,
        ord: p.ord,
        ird: p.ird,
        qpn: p.qpn,
    }
}

/// `iw_connect`.
///
/// # Safety
///
/// Called by iw_cm with a live id of one of our devices and valid parameters.
pub(crate) unsafe extern "C" fn iw_connect_callback<T: Driver>(
    id: *mut bindings::iw_cm_id,
    param: *mut bindings::iw_cm_conn_param,
) -> c_int {
    from_result(|| {
        // SAFETY: Live for the call (the caller's guarantee).
        let (ibdev, param, id) = unsafe { ((*id).device, conn_param(param), IwCmId::get(id)) };
        // SAFETY: A device of ours with connections.
        unsafe { with_driver::<T, _>(ibdev, |d: &T, dev: &_| d.iw_connect(dev, id, &param)) }?;
        Ok(0)
    })
}

/// `iw_accept`.
///
/// # Safety
///
/// Called by iw_cm with a live connection-request id of one of our devices and valid
/// parameters.
pub(crate) unsafe extern "C" fn iw_accept_callback<T: Driver>(
    id: *mut bindings::iw_cm_id,
    param: *mut bindings::iw_cm_conn_param,
) -> c_int {
    from_result(|| {
        // SAFETY: Live for the call (the caller's guarantee).
        let (ibdev, param, id) = unsafe { ((*id).device, conn_param(param), IwCmId::get(id)) };
        // SAFETY: A device of ours with connections.
        unsafe { with_driver::<T, _>(ibdev, |d: &T, dev: &_| d.iw_accept(dev, id, &param)) }?;
        Ok(0)
    })
}

/// `iw_reject`.
///
/// # Safety
///
/// Called by iw_cm with a live connection-request id of one of our devices and `len` bytes of
/// private data (or null).
pub(crate) unsafe extern "C" fn iw_reject_callback<T: Driver>(
    id: *mut bindings::iw_cm_id,
    pdata: *const c_void,
    len: u8,
) -> c_int {
    from_result(|| {
        let data = if pdata.is_null() {
            &[][..]
        } else {
            // SAFETY: `len` bytes at `pdata` (the caller's guarantee).
            unsafe { core::slice::from_raw_parts(pdata.cast::<u8>(), len.into()) }
        };
        // SAFETY: Live for the call (the caller's guarantee).
        let (ibdev, id) = unsafe { ((*id).device, IwCmId::get(id)) };
        // SAFETY: A device of ours with connections.
        unsafe { with_driver::<T, _>(ibdev, |d: &T, dev: &_| d.iw_reject(dev, id, data)) }?;
        Ok(0)
    })
}

/// `iw_create_listen`.
///
/// # Safety
///
/// Called by iw_cm with a live id of one of our devices.
pub(crate) unsafe extern "C" fn iw_create_listen_callback<T: Driver>(
    id: *mut bindings::iw_cm_id,
    backlog: c_int,
) -> c_int {
    from_result(|| {
        // SAFETY: Live for the call (the caller's guarantee).
        let (ibdev, id) = unsafe { ((*id).device, IwCmId::get(id)) };
        let backlog = u32::try_from(backlog).unwrap_or(0);
        let listen = |d: &T, dev: &_| d.iw_create_listen(dev, id, backlog);
        // SAFETY: A device of ours.
        unsafe { with_driver::<T, _>(ibdev, listen) }?;
        Ok(0)
    })
}

/// `iw_destroy_listen`.
///
/// # Safety
///
/// Called by iw_cm with an id that `iw_create_listen_callback` accepted.
pub(crate) unsafe extern "C" fn iw_destroy_listen_callback<T: Driver>(
    id: *mut bindings::iw_cm_id,
) -> c_int {
    from_result(|| {
        // SAFETY: Live for the call (the caller's guarantee).
        let ibdev = unsafe { (*id).device };
        let key = id as usize;
        // SAFETY: A device of ours.
        unsafe { with_driver::<T, _>(ibdev, |d: &T, dev: &_| d.iw_destroy_listen(dev, key)) }?;
        Ok(0)
    })
}

/// `iw_get_qp`.
///
/// # Safety
///
/// Called by iw_cm with one of our devices.
pub(crate) unsafe extern "C" fn iw_get_qp_callback<T: Driver>(
    ibdev: *mut bindings::ib_device,
    qpn: c_int,
) -> *mut bindings::ib_qp {
    let Ok(qpn) = u32::try_from(qpn) else {
        return core::ptr::null_mut();
    };
    // SAFETY: A device of ours.
    let found = unsafe { with_driver::<T, _>(ibdev, |d: &T, dev: &_| d.iw_get_qp(dev, qpn)) };
    // A handle the core destroyed the QP of is not handed back.
    found
        .and_then(|h| h.live())
        .unwrap_or(core::ptr::null_mut())
}
