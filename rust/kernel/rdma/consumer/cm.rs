// SPDX-License-Identifier: GPL-2.0

//! The RDMA connection manager (rdma_cm) for kernel consumers: addresses, routes, connections.
//!
//! A [`CmId`] is an `rdma_cm_id` of the TCP port space (reliable connections) in the initial
//! network namespace. It resolves an address and a route to a device and connects, or binds and
//! listens; a listener's connection requests arrive as new ids, which the consumer accepts or
//! rejects.
//!
//! # Why events are queued
//!
//! rdma_cm calls its event handler with the id's handler mutex held, and many calls on the id
//! (destroying it above all) take that mutex: consumer code running in the handler could
//! deadlock or free the id under the core. So the handler here runs no consumer code: it copies
//! the event into the id's queue and rings a doorbell; the consumer takes events with
//! [`CmId::next_event`] in its own context, where every call is allowed. A connection request
//! becomes a new [`CmId`] inside [`CmEvent::ConnectRequest`], owned from the start: if the
//! handler cannot queue it, it returns non-zero and the core destroys the new id, as its
//! contract allows. After `rdma_destroy_id` returns, the core calls the handler no more, so the
//! queue is freed only then.
//!
//! An id owns at most one [`KernelQp`], destroyed (after draining) before the id.
//!
//! C header: [`include/rdma/rdma_cm.h`](srctree/include/rdma/rdma_cm.h)

use super::{
    client::{DeviceRef, ProtectionDomain},
    kernel_qp::{CompletionHandler, KernelQp, QpCaps},
};
use crate::{
    bindings,
    error::{from_err_ptr, to_result},
    ffi::c_int,
    net::{namespace::Namespace, tcp::RawSockAddr},
    new_mutex,
    prelude::*,
    rdma::fixed_ring::FixedRing,
    sync::{Arc, Completion, Mutex},
    time::Jiffies,
    types::ForeignOwnable,
};
use core::{
    net::SocketAddr,
    ptr::NonNull,
    sync::atomic::{AtomicBool, Ordering},
};

/// Events a single id can have pending; more are not expected before the consumer looks.
const EVENT_QUEUE_LEN: usize = 16;

/// Connection parameters a peer sent (`struct rdma_conn_param`).
#[derive(Debug)]
pub struct ReceivedParam {
    /// The peer's private data (may be padded by the transport).
    pub private_data: KVec<u8>,
    /// RDMA Reads and atomics the peer may have outstanding towards us, which we answer (its
    /// ORD; rdma_cm reports the values from the receiver's side).
    pub responder_resources: u8,
    /// RDMA Reads and atomics we may have outstanding towards the peer (its IRD).
    pub initiator_depth: u8,
}

/// Connection parameters to send.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnParam<'a> {
    /// Private data for the peer's ULP.
    pub private_data: &'a [u8],
    /// RDMA Reads and atomics we accept from the peer (IRD).
    pub responder_resources: u8,
    /// RDMA Reads and atomics we may issue (ORD).
    pub initiator_depth: u8,
    /// Transport retries (InfiniBand; ignored by iWARP).
    pub retry_count: u8,
    /// Receiver-not-ready retries (InfiniBand; ignored by iWARP).
    pub rnr_retry_count: u8,
}

impl ConnParam<'_> {
    fn to_raw(self) -> Result<bindings::rdma_conn_param> {
        Ok(bindings::rdma_conn_param {
            private_data: self.private_data.as_ptr().cast(),
            private_data_len: u8::try_from(self.private_data.len()).map_err(|_| EMSGSIZE)?,
            responder_resources: self.responder_resources,
            initiator_depth: self.initiator_depth,
            flow_control: 1,
            retry_count: self.retry_count,
            rnr_retry_count: self.rnr_retry_count,
            ..Default::default()
        })
    }
}

/// A connection manager event (`struct rdma_cm_event`).
pub enum CmEvent {
    /// `resolve_addr` found a device.
    AddrResolved,
    /// `resolve_addr` failed (status).
    AddrError(i32),
    /// `resolve_route` succeeded.
    RouteResolved,
    /// `resolve_route` failed (status).
    RouteError(i32),
    /// A peer asks a listener for a connection: the new id and the peer's parameters.
    ConnectRequest(CmId, ReceivedParam),
    /// Connect response (only without a QP on the id).
    ConnectResponse,
    /// The connection could not be established (status).
    ConnectError(i32),
    /// The peer is unreachable (status).
    Unreachable(i32),
    /// The peer rejected the connection: status and its private data.
    Rejected(i32, KVec<u8>),
    /// The connection is up, with the peer's parameters.
    Established(ReceivedParam),
    /// The connection is down.
    Disconnected,
    /// The device is going away: every object on it must be dropped, this id included.
    DeviceRemoval,
    /// The address of the id changed.
    AddrChange,
    /// The id left time-wait.
    TimewaitExit,
    /// Any other event (the C value).
    Other(u32),
}

impl CmEvent {
    /// The event's name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Self::AddrResolved => "ADDR_RESOLVED",
            Self::AddrError(_) => "ADDR_ERROR",
            Self::RouteResolved => "ROUTE_RESOLVED",
            Self::RouteError(_) => "ROUTE_ERROR",
            Self::ConnectRequest(..) => "CONNECT_REQUEST",
            Self::ConnectResponse => "CONNECT_RESPONSE",
            Self::ConnectError(_) => "CONNECT_ERROR",
            Self::Unreachable(_) => "UNREACHABLE",
            Self::Rejected(..) => "REJECTED",
            Self::Established(_) => "ESTABLISHED",
            Self::Disconnected => "DISCONNECTED",
            Self::DeviceRemoval => "DEVICE_REMOVAL",
            Self::AddrChange => "ADDR_CHANGE",
            Self::TimewaitExit => "TIMEWAIT_EXIT",
            Self::Other(_) => "other",
        }
    }
}

/// Told of each event of an id as it happens ([`CmId::watch`]), before the event is queued for
/// [`CmId::next_event`]: for a consumer that must react without waiting for events, e.g. drop
/// its connection when the peer disconnects or the device goes away.
///
/// `event` runs from rdma_cm's event handler, which holds the id's handler mutex: it may sleep
/// briefly, but must not drop the id or wait for anything that does (schedule that instead).
/// Connection requests of a listener are not shown to `event`: each is told to
/// `connect_request` once it is queued.
pub trait CmEventWatcher: Send + Sync {
    /// An event of the watched id.
    fn event(&self, event: &CmEvent);

    /// A connection request was queued on the watched listener ([`CmEvent::ConnectRequest`]).
    fn connect_request(&self) {}
}

/// The events of one id, filled by the handler and emptied by the consumer.
#[pin_data]
struct EventQueue {
    #[pin]
    watcher: Mutex<Option<Arc<dyn CmEventWatcher>>>,
    #[pin]
    events: Mutex<FixedRing<CmEvent>>,
    lost: AtomicBool,
    #[pin]
    doorbell: Completion,
}

impl EventQueue {
    fn new() -> Result<Arc<Self>> {
        let ring = FixedRing::new(EVENT_QUEUE_LEN, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                watcher <- new_mutex!(None),
                events <- new_mutex!(ring),
                lost: AtomicBool::new(false),
                doorbell <- Completion::new(),
            }),
            GFP_KERNEL,
        )
    }

    fn push(&self, event: CmEvent) -> core::result::Result<(), CmEvent> {
        self.events.lock().push(event)?;
        self.doorbell.complete();
        Ok(())
    }
}

fn copy_param(param: &bindings::rdma_conn_param) -> Result<ReceivedParam> {
    let mut private_data = KVec::new();
    if !param.private_data.is_null() {
        // SAFETY: The core passes `private_data_len` readable bytes at `private_data`.
        let data = unsafe {
            core::slice::from_raw_parts(
                param.private_data.cast::<u8>(),
                usize::from(param.private_data_len),
            )
        };
        private_data.extend_from_slice(data, GFP_KERNEL)?;
    }
    Ok(ReceivedParam {
        private_data,
        responder_resources: param.responder_resources,
        initiator_depth: param.initiator_depth,
    })
}

/// Builds the queued form of a connection request: a new id with its own queue.
///
/// # Safety
///
/// `id` is the new id the core passes with a connection request, not yet known to anyone else.
unsafe fn connect_request(
    id: *mut bindings::rdma_cm_id,
    param: &bindings::rdma_conn_param,
) -> Result<CmEvent> {
    let param = copy_param(param)?;
    let queue = EventQueue::new()?;
    let id = NonNull::new(id).ok_or(EINVAL)?;
    // SAFETY: The new id inherited the listener's context; from now on its events go to its own
    // queue, which the returned `CmId` keeps alive (no event can arrive for it before this
    // handler returns: the core holds its handler mutex).
    unsafe { (*id.as_ptr()).context = queue.clone().into_foreign() as *mut _ };
    // INVARIANT: The id is ours, its context is `queue`'s foreign reference.
    Ok(CmEvent::ConnectRequest(
        CmId {
            qp: None,
            id,
            queue,
        },
        param,
    ))
}

/// Event handler of every id made here.
///
/// # Safety
///
/// Called by rdma_cm with an id whose context is a foreign `Arc<EventQueue>` and a valid event.
unsafe extern "C" fn cm_handler(
    id: *mut bindings::rdma_cm_id,
    event: *mut bindings::rdma_cm_event,
) -> c_int {
    // SAFETY: The id's context is a foreign `Arc<EventQueue>` owned by its `CmId` (for a new
    // connection, the listener's), alive until `rdma_destroy_id` returns; `event` is valid.
    let (queue, event) = unsafe { (Arc::<EventQueue>::borrow((*id).context), &*event) };
    // SAFETY: Reading the union arm for connected QPs, which the core fills for these events.
    let conn = unsafe { &event.param.conn };
    let status = event.status;
    let queued = match event.event {
        bindings::rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_REQUEST => {
            // SAFETY: `id` is the new id of this request.
            match unsafe { connect_request(id, conn) } {
                Ok(request) => match queue.push(request) {
                    Ok(()) => {
                        let watcher = queue.watcher.lock().clone();
                        if let Some(watcher) = watcher {
                            watcher.connect_request();
                        }
                        return 0;
                    }
                    Err(CmEvent::ConnectRequest(new, _)) => {
                        // The core destroys the new id when we return non-zero; ours must not.
                        new.forget_for_core();
                        return -(ENOMEM.to_errno());
                    }
                    Err(_) => return -(ENOMEM.to_errno()),
                },
                // The new id still has the listener's context: the core destroys it.
                Err(e) => return e.to_errno(),
            }
        }
        bindings::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_RESOLVED => CmEvent::AddrResolved,
        bindings::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_ERROR => CmEvent::AddrError(status),
        bindings::rdma_cm_event_type_RDMA_CM_EVENT_ROUTE_RESOLVED => CmEvent::RouteResolved,
        bindings::rdma_cm_event_type_RDMA_CM_EVENT_ROUTE_ERROR => CmEvent::RouteError(status),
        bindings::rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_RESPONSE => CmEvent::ConnectResponse,
        bindings::rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_ERROR => CmEvent::ConnectError(status),
        bindings::rdma_cm_event_type_RDMA_CM_EVENT_UNREACHABLE => CmEvent::Unreachable(status),
        bindings::rdma_cm_event_type_RDMA_CM_EVENT_REJECTED => match copy_param(conn) {
            Ok(param) => CmEvent::Rejected(status, param.private_data),
            Err(_) => CmEvent::Rejected(status, KVec::new()),
        },
        bindings::rdma_cm_event_type_RDMA_CM_EVENT_ESTABLISHED => match copy_param(conn) {
            Ok(param) => CmEvent::Established(param),
            Err(_) => {
                queue.lost.store(true, Ordering::Relaxed);
                queue.doorbell.complete();
                return 0;
            }
        },
        bindings::rdma_cm_event_type_RDMA_CM_EVENT_DISCONNECTED => CmEvent::Disconnected,
        bindings::rdma_cm_event_type_RDMA_CM_EVENT_DEVICE_REMOVAL => CmEvent::DeviceRemoval,
        bindings::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_CHANGE => CmEvent::AddrChange,
        bindings::rdma_cm_event_type_RDMA_CM_EVENT_TIMEWAIT_EXIT => CmEvent::TimewaitExit,
        other => CmEvent::Other(other),
    };
    let watcher = queue.watcher.lock().clone();
    if let Some(watcher) = watcher {
        watcher.event(&queued);
    }
    if queue.push(queued).is_err() {
        // Never destroy an id we own from here: record the loss; `next_event` reports it.
        queue.lost.store(true, Ordering::Relaxed);
        queue.doorbell.complete();
    }
    0
}

/// An rdma_cm id, destroyed on drop (after its queue pair).
///
/// # Invariants
///
/// `id` was created by `__rdma_create_kernel_id` (or handed over by a connection request) and
/// is owned by this value; its context is a foreign reference to `queue`, released after the
/// id is destroyed. `qp`, if any, was created on `id`.
pub struct CmId {
    qp: Option<KernelQp>,
    id: NonNull<bindings::rdma_cm_id>,
    queue: Arc<EventQueue>,
}

// SAFETY: rdma_cm calls are thread-safe; the queue is locked.
unsafe impl Send for CmId {}
// SAFETY: As above.
unsafe impl Sync for CmId {}

impl CmId {
    /// Creates an id for reliable connections in the initial network namespace.
    pub fn new() -> Result<Self> {
        Self::new_in(Namespace::initial())
    }

    /// Creates an id for reliable connections in the network namespace `net` (rdma_cm keeps
    /// its own reference to it).
    pub fn new_in(net: &Namespace) -> Result<Self> {
        let queue = EventQueue::new()?;
        let context = queue.clone().into_foreign();
        // SAFETY: `net` is live for the call and rdma_cm takes its own reference; the handler
        // and its context are valid until the id is destroyed; the caller string is static.
        let id = unsafe {
            bindings::__rdma_create_kernel_id(
                net.as_raw(),
                Some(cm_handler),
                context as *mut _,
                bindings::rdma_ucm_port_space_RDMA_PS_TCP,
                bindings::ib_qp_type_IB_QPT_RC,
                crate::c_str!("rust").as_char_ptr(),
            )
        };
        match from_err_ptr(id).map(NonNull::new) {
            // INVARIANT: Created above with `queue` as context.
            Ok(Some(id)) => Ok(Self {
                qp: None,
                id,
                queue,
            }),
            Ok(None) | Err(_) => {
                // SAFETY: The id was not created; take back the reference given to it.
                drop(unsafe { Arc::<EventQueue>::from_foreign(context) });
                Err(from_err_ptr(id).err().unwrap_or(ENOMEM))
            }
        }
    }

    /// Lets the core destroy the id (a connection request it will refuse): nothing is freed
    /// here but the queue reference the id's context held.
    fn forget_for_core(self) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: The id's context was set to a foreign reference of `queue`; the core destroys
        // the id without calling the handler again.
        unsafe {
            drop(Arc::<EventQueue>::from_foreign((*this.id.as_ptr()).context));
            drop(core::ptr::read(&this.queue));
        }
    }

    /// Waits up to `timeout` for the next event; `ETIMEDOUT` if none came, `ENOMEM` if the core
    /// reported an event that could not be queued (the connection is then unusable).
    pub fn next_event(&self, timeout: Jiffies) -> Result<CmEvent> {
        loop {
            if let Some(event) = self.try_event()? {
                return Ok(event);
            }
            if !self.queue.doorbell.wait_timeout(timeout) {
                return self.try_event()?.ok_or(ETIMEDOUT);
            }
        }
    }

    /// The next event if one is queued.
    pub fn try_event(&self) -> Result<Option<CmEvent>> {
        if let Some(event) = self.queue.events.lock().pop() {
            return Ok(Some(event));
        }
        if self.queue.lost.load(Ordering::Relaxed) {
            return Err(ENOMEM);
        }
        Ok(None)
    }

    /// Shows every later event of the id to `watcher` as it happens (replacing any earlier
    /// watcher); the events are queued as before.
    pub fn watch(&self, watcher: Arc<dyn CmEventWatcher>) {
        *self.queue.watcher.lock() = Some(watcher);
    }

    /// Whether events are queued.
    pub fn has_events(&self) -> bool {
        !self.queue.events.lock().is_empty()
    }

    /// Resolves `dst` (from `src`, if given) to a device; completes with
    /// [`CmEvent::AddrResolved`] or [`CmEvent::AddrError`].
    pub fn resolve_addr(
        &self,
        src: Option<&SocketAddr>,
        dst: &SocketAddr,
        timeout_ms: u32,
    ) -> Result {
        let mut src = src.map(|a| RawSockAddr::new(a).0);
        let (mut dst, _) = RawSockAddr::new(dst);
        let src_ptr = src
            .as_mut()
            .map_or(core::ptr::null_mut(), |s| s.as_sockaddr());
        // SAFETY: The id is valid (type invariant); the addresses live across the call (the core
        // copies them).
        to_result(unsafe {
            bindings::rdma_resolve_addr(
                self.id.as_ptr(),
                src_ptr,
                dst.as_sockaddr(),
                timeout_ms as _,
            )
        })
    }

    /// Resolves the route to the resolved address; completes with [`CmEvent::RouteResolved`] or
    /// [`CmEvent::RouteError`].
    pub fn resolve_route(&self, timeout_ms: u32) -> Result {
        // SAFETY: The id is valid (type invariant).
        to_result(unsafe { bindings::rdma_resolve_route(self.id.as_ptr(), timeout_ms as _) })
    }

    /// Binds the id to a local address (port 0 picks one).
    pub fn bind(&self, addr: &SocketAddr) -> Result {
        let (mut raw, _) = RawSockAddr::new(addr);
        // SAFETY: The id is valid (type invariant); the core copies the address.
        to_result(unsafe { bindings::rdma_bind_addr(self.id.as_ptr(), raw.as_sockaddr()) })
    }

    /// Whether an id bound to an IPv6 address takes IPv6 connections only (`rdma_set_afonly`),
    /// so that an IPv4 listener on the same port may exist beside it. Before [`CmId::bind`].
    pub fn set_afonly(&self, afonly: bool) -> Result {
        // SAFETY: The id is valid (type invariant).
        to_result(unsafe { bindings::rdma_set_afonly(self.id.as_ptr(), afonly.into()) })
    }

    /// The local address of the id: the bound one, or that of the connection.
    pub fn local_address(&self) -> Result<SocketAddr> {
        // SAFETY: The id is valid (type invariant); its addresses are set by `bind`, address
        // resolution or the connection request, and only read here.
        let sap = unsafe { core::ptr::addr_of!((*self.id.as_ptr()).route.addr.src_addr) };
        let len = core::mem::size_of::<bindings::__kernel_sockaddr_storage>();
        // SAFETY: `sap` points to a whole `sockaddr_storage`.
        unsafe { RawSockAddr::from_raw(sap.cast(), len) }.to_socket_addr()
    }

    /// The peer's address of a connection.
    pub fn peer_address(&self) -> Result<SocketAddr> {
        // SAFETY: As for `local_address`.
        let sap = unsafe { core::ptr::addr_of!((*self.id.as_ptr()).route.addr.dst_addr) };
        let len = core::mem::size_of::<bindings::__kernel_sockaddr_storage>();
        // SAFETY: `sap` points to a whole `sockaddr_storage`.
        unsafe { RawSockAddr::from_raw(sap.cast(), len) }.to_socket_addr()
    }

    /// Listens for connection requests on the bound address.
    pub fn listen(&self, backlog: i32) -> Result {
        // SAFETY: The id is valid (type invariant).
        to_result(unsafe { bindings::rdma_listen(self.id.as_ptr(), backlog) })
    }

    /// Connects to the resolved route; completes with [`CmEvent::Established`] or an error
    /// event. Create the queue pair first.
    pub fn connect(&self, param: &ConnParam<'_>) -> Result {
        let mut raw = param.to_raw()?;
        // SAFETY: The id is valid (type invariant); the parameters and private data live across
        // the call (the core copies them).
        to_result(unsafe { bindings::rdma_connect(self.id.as_ptr(), &mut raw) })
    }

    /// Accepts the connection request this id came with; completes with
    /// [`CmEvent::Established`]. Create the queue pair first.
    pub fn accept(&self, param: &ConnParam<'_>) -> Result {
        let mut raw = param.to_raw()?;
        // SAFETY: The id is valid (type invariant); `rdma_accept` must run under the handler
        // lock, taken around it; the parameters live across the call.
        to_result(unsafe {
            bindings::rdma_lock_handler(self.id.as_ptr());
            let ret = bindings::rdma_accept(self.id.as_ptr(), &mut raw);
            bindings::rdma_unlock_handler(self.id.as_ptr());
            ret
        })
    }

    /// Rejects the connection request this id came with, sending `private_data`.
    pub fn reject(&self, private_data: &[u8]) -> Result {
        let len = u8::try_from(private_data.len()).map_err(|_| EMSGSIZE)?;
        // SAFETY: The id is valid (type invariant); the data lives across the call.
        to_result(unsafe {
            bindings::rdma_reject(
                self.id.as_ptr(),
                private_data.as_ptr().cast(),
                len,
                bindings::ib_cm_rej_reason_IB_CM_REJ_CONSUMER_DEFINED as u8,
            )
        })
    }

    /// Disconnects; completes with [`CmEvent::Disconnected`].
    pub fn disconnect(&self) -> Result {
        // SAFETY: The id is valid (type invariant).
        to_result(unsafe { bindings::rdma_disconnect(self.id.as_ptr()) })
    }

    /// The device the id is bound to (after address resolution, or for a connection request).
    pub fn device(&self) -> Result<DeviceRef> {
        // SAFETY: The id is valid; its device, once set, stays allocated while the id exists.
        unsafe { DeviceRef::try_get((*self.id.as_ptr()).device) }
    }

    /// Creates the id's queue pair in `pd`, which must be on the id's device; its completions
    /// are collected with [`KernelQp::poll`] and [`KernelQp::wait`].
    pub fn create_qp(&mut self, pd: &Arc<ProtectionDomain>, caps: QpCaps) -> Result<&KernelQp> {
        self.create_qp_inner(pd, caps, None)
    }

    /// Creates the id's queue pair in `pd`, which must be on the id's device, with `handler`
    /// taking its completions as they come.
    pub fn create_qp_with_handler(
        &mut self,
        pd: &Arc<ProtectionDomain>,
        caps: QpCaps,
        handler: Arc<dyn CompletionHandler>,
    ) -> Result<&KernelQp> {
        self.create_qp_inner(pd, caps, Some(handler))
    }

    fn create_qp_inner(
        &mut self,
        pd: &Arc<ProtectionDomain>,
        caps: QpCaps,
        handler: Option<Arc<dyn CompletionHandler>>,
    ) -> Result<&KernelQp> {
        if self.qp.is_some() {
            return Err(EBUSY);
        }
        // SAFETY: The id is valid (type invariant).
        if unsafe { (*self.id.as_ptr()).device } != pd.device().as_raw() {
            return Err(EINVAL);
        }
        // SAFETY: The id is valid, bound to the PD's device, has no QP, and outlives the QP
        // (`drop` destroys the QP first).
        let qp = unsafe { KernelQp::create(self.id, pd, caps, handler)? };
        Ok(self.qp.insert(qp))
    }

    /// The id's queue pair; `ENOTCONN` if none was created.
    pub fn qp(&self) -> Result<&KernelQp> {
        self.qp.as_ref().ok_or(ENOTCONN)
    }

    /// Drains and destroys the queue pair, if any (also done on drop).
    pub fn destroy_qp(&mut self) {
        self.qp = None;
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        self.qp = None;
        // SAFETY: We own the id (type invariant); not called from its handler, which runs no
        // consumer code. After this the handler is never called again, so the context can go.
        unsafe {
            let context = (*self.id.as_ptr()).context;
            bindings::rdma_destroy_id(self.id.as_ptr());
            drop(Arc::<EventQueue>::from_foreign(context));
        }
    }
}
