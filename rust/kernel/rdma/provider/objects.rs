// SPDX-License-Identifier: GPL-2.0

//! A provider's verbs objects: protection domains, completion queues and queue pairs.
//!
//! The RDMA core allocates each object (the object-size model: `size_ib_pd`, `size_ib_cq`,
//! `size_ib_qp`) and hands it to the provider to set up; here the object is the core's struct
//! followed by the provider's queue, an `Arc` of its [`Driver::Cq`] or [`Driver::Qp`], written
//! on creation and dropped on destruction. The core guarantees nothing uses an object
//! when it destroys it, and destroys every object before its device's `dealloc_driver`.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    async_event::QpEvents,
    completion_queue::{Arm, CqNotifier, Wc},
    device::{c_int_of, with_driver, Driver},
    restrack::RestrackAttrs,
    shared_receive_queue::{shared_queue, SharedReceiveQueue, SrqAttributes},
    user::user_verb,
    work_request::{RecvWr, SendWr},
};
use crate::{bindings, error::from_result, ffi::c_int, prelude::*, sync::Arc};
use core::{
    mem::ManuallyDrop,
    sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
};

/// A protection domain, as a provider sees it: an identity no other PD of the system has or
/// had since boot. (The `ib_pd`'s address would not do: a PD allocated after one is freed may
/// get the same one, and inherit whatever the provider still holds for the old PD.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PdId(u64);

/// A PD as the core allocates it (`size_ib_pd`): the core object, then its identity.
#[repr(C)]
pub(crate) struct PdContainer {
    ibpd: bindings::ib_pd,
    id: u64,
}

/// The identity the next PD gets; 64 bits do not wrap.
static NEXT_PD_ID: AtomicU64 = AtomicU64::new(1);

impl PdId {
    /// The identity of `pd`.
    ///
    /// # Safety
    ///
    /// `pd` is a live PD of one of our devices that [`alloc_pd_callback`] accepted.
    pub(crate) unsafe fn of(pd: *const bindings::ib_pd) -> Self {
        // SAFETY: The core allocated `pd` as a `PdContainer` (`size_ib_pd`), whose first field
        // it is, and `alloc_pd_callback` wrote `id` (the caller's guarantee).
        Self(unsafe { (*pd.cast::<PdContainer>()).id })
    }
}

/// What a queue pair is asked to be (`struct ib_qp_init_attr`). The provider updates the
/// capacities to what it provides.
#[derive(Clone, Copy, Debug)]
pub struct QpInitAttributes {
    /// Reliable connected (`IB_QPT_RC`); the only type iWARP has.
    pub reliable_connected: bool,
    /// Send work requests.
    pub max_send_wr: u32,
    /// Receive work requests.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Inline data bytes per send.
    pub max_inline_data: u32,
    /// Every send completes (`IB_SIGNAL_ALL_WR`), not only the signalled ones.
    pub signal_all: bool,
    /// The protection domain.
    pub pd: PdId,
    /// `IB_QP_CREATE_*` flags.
    pub create_flags: u32,
}

/// The queues a new queue pair is created on, the driver's own objects: its completion queues
/// (the core may leave either out) and the shared receive queue its receives come from.
pub struct QpQueues<'a, T: Driver> {
    /// The send CQ.
    pub send_cq: Option<&'a Arc<T::Cq>>,
    /// The receive CQ.
    pub recv_cq: Option<&'a Arc<T::Cq>>,
    /// The shared receive queue, if any.
    pub srq: Option<&'a Arc<T::Srq>>,
}

/// A verbs request to change a queue pair (`struct ib_qp_attr` and its mask), as far as
/// providers use it so far: each field is `None` when the mask leaves it out.
#[derive(Clone, Copy, Debug, Default)]
pub struct QpModify {
    /// The state to move to (`IB_QPS_*`).
    pub state: Option<u32>,
    /// The state the caller believes the QP is in (`IB_QPS_*`).
    pub current_state: Option<u32>,
    /// `IB_ACCESS_*` flags for remote access.
    pub access_flags: Option<u32>,
}

/// What `query_qp` reports about a queue pair.
#[derive(Clone, Copy, Debug, Default)]
pub struct QpQuery {
    /// The current state (`IB_QPS_*`).
    pub state: u32,
    /// `IB_ACCESS_*` flags for remote access.
    pub access_flags: u32,
    /// Send work requests.
    pub max_send_wr: u32,
    /// Receive work requests.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Inline data bytes per send.
    pub max_inline_data: u32,
}

/// A provider's queue pair; dropped when the QP is destroyed (the RDMA core guarantees nothing
/// uses it any more).
pub trait QueuePair: Send + Sync {
    /// Applies a verbs modify request (`ibv_modify_qp`, `ib_modify_qp`).
    fn modify(&self, _req: &QpModify) -> Result {
        Err(EOPNOTSUPP)
    }

    /// Reports the QP's state and capacities.
    fn query(&self) -> Result<QpQuery> {
        Err(EOPNOTSUPP)
    }

    /// Queues a send work request (`ib_post_send`); an error refuses it.
    fn post_send(&self, _wr: &SendWr<'_>) -> Result {
        Err(EOPNOTSUPP)
    }

    /// A chain of send work requests was handed over: `post_send` took each of them, or all
    /// of them up to the one it refused. A provider that starts its transmitter here rather
    /// than per request sends the chain together.
    fn send_chain_end(&self) {}

    /// The doorbell: an empty `post_send` from user space, whose provider library wrote its
    /// work requests into a send queue shared with the kernel and asks the provider to look.
    fn doorbell(&self) -> Result {
        Ok(())
    }

    /// Queues a receive work request (`ib_post_recv`); an error refuses it.
    fn post_recv(&self, _wr: &RecvWr<'_>) -> Result {
        Err(EOPNOTSUPP)
    }

    /// The QP is being destroyed (`destroy_qp`): stop using it; the object is dropped once
    /// the provider lets go of it.
    fn destroy(&self) {}

    /// Adds the provider's detail of the QP to `rdma resource show qp`
    /// ([`super::restrack`]); nothing by default.
    fn fill_restrack(&self, _attrs: &mut RestrackAttrs<'_>) -> Result {
        Ok(())
    }
}

/// The core's object of a queue pair, as a live identity: what the iWARP connection manager
/// gets when it looks a QP up by number (`iw_get_qp`), and what the QP's completions name
/// ([`QpHandle::completion_tag`]). The driver gets it when the QP is created and may keep
/// clones of it for as long as it likes; the handle is live from the QP's creation until the
/// core destroys it, and a handle that is not live is never handed to the core.
#[derive(Clone)]
pub struct QpHandle(Arc<QpIdentity>);

/// What a [`QpHandle`] shares.
///
/// # Invariants
///
/// `qp` is the `ib_qp` `create_qp_callback` set up; while `live` is true, the core has not
/// begun to destroy it. Rust code never dereferences `qp`.
struct QpIdentity {
    qp: *mut bindings::ib_qp,
    live: AtomicBool,
}

// SAFETY: An identity and a flag, usable from any thread; the pointer is only handed to C.
unsafe impl Send for QpIdentity {}
// SAFETY: As above.
unsafe impl Sync for QpIdentity {}

impl QpHandle {
    /// What a completion of the QP names it by (`ib_wc.qp`).
    #[inline]
    pub fn completion_tag(&self) -> WcQp {
        WcQp(self.0.qp)
    }

    /// The core's QP, if it is not being destroyed.
    pub(crate) fn live(&self) -> Option<*mut bindings::ib_qp> {
        self.0.live.load(Ordering::Acquire).then_some(self.0.qp)
    }
}

/// The QP a completion names (`ib_wc.qp`): a value for the consumer, which cannot be turned
/// back into a [`QpHandle`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WcQp(*mut bindings::ib_qp);

// SAFETY: A value copied into completions; Rust code never dereferences it.
unsafe impl Send for WcQp {}
// SAFETY: As above.
unsafe impl Sync for WcQp {}

impl WcQp {
    pub(crate) fn as_raw(self) -> *mut bindings::ib_qp {
        self.0
    }
}

/// What a completion queue is asked to be (`struct ib_cq_init_attr`).
#[derive(Clone, Copy, Debug)]
pub struct CqAttributes {
    /// Entries asked for.
    pub entries: u32,
    /// Completion vector.
    pub comp_vector: u32,
    /// `IB_UVERBS_CQ_FLAGS_*`.
    pub flags: u32,
}

/// A provider's completion queue; dropped when the CQ is destroyed (the RDMA core guarantees
/// nothing uses it any more).
pub trait CompletionQueue: Send + Sync {
    /// Takes the oldest completion (`ib_poll_cq`).
    fn poll(&self) -> Option<Wc> {
        None
    }

    /// Arms the queue (`ib_req_notify_cq`): the next completion of the kind `arm` names runs
    /// the consumer's handler once. Returns whether completions are waiting already.
    fn arm(&self, _arm: Arm) -> bool {
        false
    }

    /// The CQ is being destroyed (`destroy_cq`); the object is dropped once the provider lets
    /// go of it.
    fn destroy(&self) {}
}

/// The object type of a kind of verbs object a driver does not create (its [`Driver::Srq`]
/// when it has no `create_srq`, say). It has no values, so no such object ever exists.
pub enum Unsupported {}

impl CompletionQueue for Unsupported {}

impl QueuePair for Unsupported {}

impl SharedReceiveQueue for Unsupported {
    fn query(&self) -> Result<SrqAttributes> {
        match *self {}
    }
}

/// `alloc_pd`: the core allocated `pd` (object-size model, the bare `ib_pd`) and asks the
/// driver to accept it.
///
/// # Safety
///
/// Called by the RDMA core with a PD of one of our devices and a valid or null `udata`.
pub(crate) unsafe extern "C" fn alloc_pd_callback<T: Driver>(
    pd: *mut bindings::ib_pd,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `pd` is valid and its `device` set by the core.
        let ibdev = unsafe { (*pd).device };
        let id = NEXT_PD_ID.fetch_add(1, Ordering::Relaxed);
        // SAFETY: The core allocated `size_ib_pd` bytes, a `PdContainer` that `pd` starts.
        unsafe { (*pd.cast::<PdContainer>()).id = id };
        // SAFETY: A device of ours, alive while it has PDs.
        unsafe {
            with_driver::<T, _>(ibdev, |d, dev| d.alloc_pd(dev, PdId(id), !udata.is_null()))
        }?;
        Ok(0)
    })
}

/// `dealloc_pd`.
///
/// # Safety
///
/// Called by the RDMA core with a PD that `alloc_pd_callback` accepted.
pub(crate) unsafe extern "C" fn dealloc_pd_callback<T: Driver>(
    pd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: `pd` is valid and its `device` set by the core.
    let ibdev = unsafe { (*pd).device };
    // SAFETY: A PD `alloc_pd_callback` accepted (the caller's guarantee).
    let id = unsafe { PdId::of(pd) };
    // SAFETY: A device of ours, alive while it has PDs.
    unsafe { with_driver::<T, _>(ibdev, |d, dev| d.dealloc_pd(dev, id)) };
    0
}

/// A CQ as the core allocates it (`size_ib_cq`): the core object, then the provider's queue.
#[repr(C)]
pub(crate) struct CqContainer<Q> {
    ibcq: bindings::ib_cq,
    queue: ManuallyDrop<Arc<Q>>,
    notifier: ManuallyDrop<CqNotifier>,
}

/// The provider's completion queue of `cq`.
///
/// # Safety
///
/// `cq` must be a CQ that `create_cq_callback::<T>` created and that is not destroyed yet,
/// for the lifetime `'a`.
pub(crate) unsafe fn completion_queue<'a, T: Driver>(cq: *mut bindings::ib_cq) -> &'a Arc<T::Cq> {
    // SAFETY: Written by `create_cq_callback::<T>` (the caller's guarantee), alive until
    // destroy.
    unsafe { &(*cq.cast::<CqContainer<T::Cq>>()).queue }
}

/// `create_cq`.
///
/// # Safety
///
/// Called by the RDMA core with a zeroed CQ container of one of our devices, valid `attr`, and
/// the user verb's attribute bundle or null for a kernel CQ.
pub(crate) unsafe extern "C" fn create_cq_callback<T: Driver>(
    cq: *mut bindings::ib_cq,
    attr: *const bindings::ib_cq_init_attr,
    attrs: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    from_result(|| {
        // SAFETY: `cq` and `attr` are valid; the core set `device`.
        let (ibdev, a) = unsafe {
            (
                (*cq).device,
                CqAttributes {
                    entries: (*attr).cqe,
                    comp_vector: (*attr).comp_vector,
                    flags: (*attr).flags,
                },
            )
        };
        // SAFETY: A non-null bundle is the user verb's, valid for the call.
        let mut user = unsafe {
            user_verb(if attrs.is_null() {
                core::ptr::null_mut()
            } else {
                bindings::uverbs_attr_bundle_udata(attrs)
            })
        };
        let notifier = CqNotifier::new(cq)?;
        let given = notifier.clone();
        let create = |d: &T, dev: &_| d.create_cq(dev, &a, user.as_mut(), given);
        // SAFETY: A device of `T`'s, alive while it has CQs.
        let (queue, entries) = unsafe { with_driver::<T, _>(ibdev, create) }?;
        let container = cq.cast::<CqContainer<T::Cq>>();
        // SAFETY: The core allocated `size_ib_cq` bytes, a `CqContainer`; `queue` and
        // `notifier` are written once here and taken once in `destroy_cq_callback`.
        unsafe {
            core::ptr::addr_of_mut!((*container).queue).write(ManuallyDrop::new(queue));
            core::ptr::addr_of_mut!((*container).notifier).write(ManuallyDrop::new(notifier));
            (*cq).cqe = c_int_of(entries);
        }
        Ok(0)
    })
}

/// `destroy_cq`.
///
/// # Safety
///
/// Called by the RDMA core with a CQ that `create_cq_callback` created, once, with no user
/// left.
pub(crate) unsafe extern "C" fn destroy_cq_callback<T: Driver>(
    cq: *mut bindings::ib_cq,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    let container = cq.cast::<CqContainer<T::Cq>>();
    // SAFETY: Written by `create_cq_callback`; nothing uses them after this.
    let (queue, notifier) = unsafe {
        (
            ManuallyDrop::take(&mut (*container).queue),
            ManuallyDrop::take(&mut (*container).notifier),
        )
    };
    notifier.shut();
    queue.destroy();
    drop(queue);
    0
}

/// A QP as the core allocates it (`size_ib_qp`): the core object, then the provider's queues.
#[repr(C)]
///
/// # Invariants
///
/// `refs` counts the creation's reference and those the iWARP connection manager holds
/// (`iw_add_ref`); `released` is completed when it drops to zero.
pub(crate) struct QpContainer<Q> {
    ibqp: bindings::ib_qp,
    qp: ManuallyDrop<Arc<Q>>,
    events: ManuallyDrop<QpEvents>,
    handle: ManuallyDrop<QpHandle>,
    refs: AtomicUsize,
    released: bindings::completion,
}

/// `create_qp`.
///
/// # Safety
///
/// Called by the RDMA core with a zeroed QP container of one of our devices, valid `init`, and
/// the user verb's udata (inside its attribute bundle) or null for a kernel QP.
pub(crate) unsafe extern "C" fn create_qp_callback<T: Driver>(
    qp: *mut bindings::ib_qp,
    init: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `qp` and `init` are valid; the core set `device` and `pd`.
        let (ibdev, pd, i) = unsafe { ((*qp).device, (*qp).pd, &mut *init) };
        let mut a = QpInitAttributes {
            reliable_connected: i.qp_type == bindings::ib_qp_type_IB_QPT_RC,
            max_send_wr: i.cap.max_send_wr,
            max_recv_wr: i.cap.max_recv_wr,
            max_send_sge: i.cap.max_send_sge,
            max_recv_sge: i.cap.max_recv_sge,
            max_inline_data: i.cap.max_inline_data,
            signal_all: i.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
            // SAFETY: The core hands a QP of a live PD of this device.
            pd: unsafe { PdId::of(pd) },
            create_flags: i.create_flags,
        };
        // The queues are live objects the core holds for the call. Those of this device are
        // `T`'s, created by its callbacks; another device's are refused.
        // SAFETY: Each non-null queue is a live object of the core's, its device set.
        let foreign = unsafe {
            (!i.send_cq.is_null() && (*i.send_cq).device != ibdev)
                || (!i.recv_cq.is_null() && (*i.recv_cq).device != ibdev)
                || (!i.srq.is_null() && (*i.srq).device != ibdev)
        };
        if foreign {
            return Err(EINVAL);
        }
        // SAFETY: Live CQs and SRQ of this device, which `T`'s callbacks created; the core
        // keeps them (their use counts) while the call runs.
        let queues = unsafe {
            QpQueues::<T> {
                send_cq: (!i.send_cq.is_null()).then(|| completion_queue::<T>(i.send_cq)),
                recv_cq: (!i.recv_cq.is_null()).then(|| completion_queue::<T>(i.recv_cq)),
                srq: (!i.srq.is_null()).then(|| shared_queue::<T>(i.srq)),
            }
        };
        // SAFETY: A non-null udata is the user verb's, valid for the call.
        let mut user = unsafe { user_verb(udata) };
        // INVARIANT: `qp` is the core's object being set up; live once it is.
        let identity = QpIdentity {
            qp,
            live: AtomicBool::new(false),
        };
        let handle = QpHandle(Arc::new(identity, GFP_KERNEL)?);
        let own = handle.clone();
        let events = QpEvents::new(qp)?;
        let given = events.clone();
        let create =
            |d: &T, dev: &_| d.create_qp(dev, &mut a, queues, user.as_mut(), handle, given);
        // SAFETY: A device of `T`'s, alive while it has QPs.
        let (queue, qpn) = unsafe { with_driver::<T, _>(ibdev, create) }?;
        i.cap.max_send_wr = a.max_send_wr;
        i.cap.max_recv_wr = a.max_recv_wr;
        i.cap.max_send_sge = a.max_send_sge;
        i.cap.max_recv_sge = a.max_recv_sge;
        i.cap.max_inline_data = a.max_inline_data;
        let container = qp.cast::<QpContainer<T::Qp>>();
        // SAFETY: The core allocated `size_ib_qp` bytes, a `QpContainer`; `qp` is written once
        // here and taken once in `destroy_qp_callback`.
        unsafe {
            core::ptr::addr_of_mut!((*container).qp).write(ManuallyDrop::new(queue));
            core::ptr::addr_of_mut!((*container).events).write(ManuallyDrop::new(events));
            core::ptr::addr_of_mut!((*container).handle).write(ManuallyDrop::new(own.clone()));
            core::ptr::addr_of_mut!((*container).refs).write(AtomicUsize::new(1));
            bindings::init_completion(core::ptr::addr_of_mut!((*container).released));
            (*qp).qp_num = qpn;
        }
        own.0.live.store(true, Ordering::Release);
        Ok(0)
    })
}

/// The provider's queue pair of `qp`.
///
/// # Safety
///
/// `qp` must be a QP that `create_qp_callback::<T>` created and that is not destroyed yet,
/// for the lifetime `'a`.
pub(crate) unsafe fn queue_pair<'a, T: Driver>(qp: *mut bindings::ib_qp) -> &'a T::Qp {
    // SAFETY: Written by `create_qp_callback::<T>` (the caller's guarantee) and alive until
    // destroy.
    unsafe { &(*qp.cast::<QpContainer<T::Qp>>()).qp }
}

/// `modify_qp`.
///
/// # Safety
///
/// Called by the RDMA core with a live QP of ours and a valid `attr`.
pub(crate) unsafe extern "C" fn modify_qp_callback<T: Driver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: c_int,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        let mask = mask as u32;
        let has = |bit: u32| mask & bit != 0;
        // SAFETY: `attr` is valid for the call (the caller's guarantee).
        let a = unsafe { &*attr };
        let req = QpModify {
            state: has(bindings::ib_qp_attr_mask_IB_QP_STATE).then_some(a.qp_state),
            current_state: has(bindings::ib_qp_attr_mask_IB_QP_CUR_STATE).then_some(a.cur_qp_state),
            access_flags: has(bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS)
                .then_some(a.qp_access_flags as u32),
        };
        // SAFETY: A live QP of ours (the caller's guarantee).
        unsafe { queue_pair::<T>(qp) }.modify(&req)?;
        Ok(0)
    })
}

/// `query_qp`.
///
/// # Safety
///
/// Called by the RDMA core with a live QP of ours and valid `attr` and `init`.
pub(crate) unsafe extern "C" fn query_qp_callback<T: Driver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    _mask: c_int,
    init: *mut bindings::ib_qp_init_attr,
) -> c_int {
    from_result(|| {
        // SAFETY: A live QP of ours (the caller's guarantee).
        let q = unsafe { queue_pair::<T>(qp) }.query()?;
        let cap = bindings::ib_qp_cap {
            max_send_wr: q.max_send_wr,
            max_recv_wr: q.max_recv_wr,
            max_send_sge: q.max_send_sge,
            max_recv_sge: q.max_recv_sge,
            max_inline_data: q.max_inline_data,
            max_rdma_ctxs: 0,
        };
        // SAFETY: `attr` and `init` are valid for writes (the caller's guarantee); the core
        // zeroed them, and we fill in what we know.
        unsafe {
            (*attr).qp_state = q.state;
            (*attr).cur_qp_state = q.state;
            (*attr).qp_access_flags = q.access_flags as c_int;
            (*attr).cap = cap;
            (*init).cap = cap;
            (*init).qp_type = bindings::ib_qp_type_IB_QPT_RC;
        }
        Ok(0)
    })
}

/// `destroy_qp`.
///
/// # Safety
///
/// Called by the RDMA core with a QP that `create_qp_callback` created, once, with no user
/// left.
pub(crate) unsafe extern "C" fn destroy_qp_callback<T: Driver>(
    qp: *mut bindings::ib_qp,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    let container = qp.cast::<QpContainer<T::Qp>>();
    // SAFETY: Written by `create_qp_callback`; no verb uses them after this.
    let (queue, events, handle) = unsafe {
        (
            ManuallyDrop::take(&mut (*container).qp),
            ManuallyDrop::take(&mut (*container).events),
            ManuallyDrop::take(&mut (*container).handle),
        )
    };
    // From here iw_cm cannot find the QP, whatever the driver returns for its number.
    handle.0.live.store(false, Ordering::Release);
    drop(handle);
    events.shut();
    queue.destroy();
    drop(queue);
    // The iWARP connection manager may still hold the QP: the core frees it on return, so
    // wait until the last reference is gone, as the C siw does.
    // SAFETY: `create_qp_callback` initialised both.
    unsafe {
        iw_rem_ref_callback::<T>(qp);
        bindings::wait_for_completion(core::ptr::addr_of_mut!((*container).released));
    }
    0
}

/// `iw_add_ref`: the iWARP connection manager holds the QP.
///
/// # Safety
///
/// Called with a QP that `create_qp_callback` set up and whose last reference is not gone.
pub(crate) unsafe extern "C" fn iw_add_ref_callback<T: Driver>(qp: *mut bindings::ib_qp) {
    // SAFETY: Set up by `create_qp_callback::<T>`, alive (the caller's guarantee).
    unsafe {
        (*qp.cast::<QpContainer<T::Qp>>())
            .refs
            .fetch_add(1, Ordering::Relaxed)
    };
}

/// `iw_rem_ref`: a reference taken by creation or `iw_add_ref` is dropped.
///
/// # Safety
///
/// Called with a QP that `create_qp_callback` set up, by the holder of a reference.
pub(crate) unsafe extern "C" fn iw_rem_ref_callback<T: Driver>(qp: *mut bindings::ib_qp) {
    let container = qp.cast::<QpContainer<T::Qp>>();
    // SAFETY: Alive while the caller holds its reference; after the last one only
    // `destroy_qp_callback`, which waits for `released`, still uses it.
    unsafe {
        if (*container).refs.fetch_sub(1, Ordering::AcqRel) == 1 {
            bindings::complete(core::ptr::addr_of_mut!((*container).released));
        }
    }
}
