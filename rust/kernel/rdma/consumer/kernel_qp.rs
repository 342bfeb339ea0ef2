// SPDX-License-Identifier: GPL-2.0

//! Queue pairs of kernel consumers: posting work requests and collecting their completions.
//!
//! A [`KernelQp`] is the RC queue pair of one rdma_cm connection (created by
//! [`super::cm::CmId::create_qp`]) together with its own completion queue.
//!
//! # Why completions go through slots
//!
//! The device accesses a work request's buffers until the request completes, and a flushed
//! request completes only when the queue pair is drained. Memory safety therefore needs the
//! buffers to outlive their requests whatever the consumer does. Every posted request takes a
//! *slot*: the slot holds references to the buffers, pages and memory region the request uses, and its
//! `ib_cqe` is the request's completion entry. The CQ is polled by the RDMA core in a workqueue
//! (`IB_POLL_WORKQUEUE`); the core calls the slot's `done`, which drops the references and queues
//! a [`WorkCompletion`] for the consumer. Teardown drains the queue pair (`ib_drain_qp`), so all
//! requests have completed before the CQ, the slots and the buffers go.
//!
//! Every request is signaled but one kind: a registration added to a [`SendChain`] with
//! [`SendChain::add_unsignaled`] *rides* on the next signaled request of its chain (the last one
//! of a chain is always signaled). A send queue completes in order, so that request's
//! completion says the registration is done too, and releases the registration's slot with its
//! own: one completion less for a call that registers memory and then sends. A rider still
//! completes on its own when it fails or is flushed (every provider reports those, signaled or
//! not); it then leaves the request it rode on. A rider posted ahead of a request the device
//! refused holds its slot until its own completion or the queue pair's end.
//!
//! # Posting
//!
//! A send request is checked and filled into the C structure its opcode needs, with its slot
//! claimed (`send_wr`); then it is posted alone ([`KernelQp::post_send`]) or with others in
//! one call ([`SendChain`]), which lets the device start on them together.
//!
//! # Who takes completions
//!
//! A queue pair created without a handler queues its completions for [`KernelQp::poll`] and
//! [`KernelQp::wait`]: a consumer that runs its protocol in its own thread (a test, a ping).
//! One created with a [`CompletionHandler`] hands each completion to it as the core reports it,
//! from the CQ's work: a transport that reacts to every receive (a reply to deliver, a credit
//! grant) without a thread of its own. The slot is given back before the handler runs, so the
//! handler may post again at once.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    client::ProtectionDomain,
    dma_buffer::DmaBuffer,
    fast_reg::{FastRegMr, Registered},
    mapped_pages::MappedPages,
};
use crate::{
    bindings,
    error::{from_err_ptr, to_result},
    ffi::{c_int, c_void},
    new_spinlock,
    prelude::*,
    rdma::fixed_ring::FixedRing,
    sync::{Arc, Completion, SpinLock},
    time::Jiffies,
    types::Opaque,
};

mod send_chain;
mod send_wr;

use core::{
    ptr::NonNull,
    sync::atomic::{AtomicU32, Ordering},
};
pub use send_chain::{SendChain, CHAIN_LEN};
pub use send_wr::{PagesSge, RegionSge, Remote, SendWr, Sge};

/// Queue depths of a kernel queue pair.
#[derive(Debug, Clone, Copy)]
pub struct QpCaps {
    /// Send work requests outstanding at once.
    pub max_send_wr: u32,
    /// Receive work requests outstanding at once.
    pub max_recv_wr: u32,
}

/// Status of a work completion (`enum ib_wc_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WcStatus(u32);

impl WcStatus {
    /// Success.
    pub const SUCCESS: Self = Self(bindings::ib_wc_status_IB_WC_SUCCESS);

    /// Whether the request succeeded.
    pub fn is_success(self) -> bool {
        self == Self::SUCCESS
    }

    /// Whether the request was flushed: the queue pair had gone to the error state before the
    /// device executed it (the failure is another request's, or the connection's).
    pub fn is_flush(self) -> bool {
        self.0 == bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR
    }

    /// The C value.
    pub fn raw(self) -> u32 {
        self.0
    }
}

/// What completed (`enum ib_wc_opcode`); only meaningful on success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcOpcode {
    /// A send of any kind.
    Send,
    /// An RDMA Write.
    RdmaWrite,
    /// An RDMA Read.
    RdmaRead,
    /// A compare and swap.
    CmpSwap,
    /// A fetch and add.
    FetchAdd,
    /// A masked compare and swap.
    MaskedCmpSwap,
    /// A masked fetch and add.
    MaskedFetchAdd,
    /// A local invalidation.
    LocalInv,
    /// A memory registration.
    RegMr,
    /// A received message.
    Recv,
    /// An RDMA Write with immediate data, received.
    RecvRdmaWithImm,
    /// Anything else (the C value).
    Other(u32),
}

impl WcOpcode {
    fn from_raw(raw: u32) -> Self {
        match raw {
            bindings::ib_wc_opcode_IB_WC_SEND => Self::Send,
            bindings::ib_wc_opcode_IB_WC_RDMA_WRITE => Self::RdmaWrite,
            bindings::ib_wc_opcode_IB_WC_RDMA_READ => Self::RdmaRead,
            bindings::ib_wc_opcode_IB_WC_COMP_SWAP => Self::CmpSwap,
            bindings::ib_wc_opcode_IB_WC_FETCH_ADD => Self::FetchAdd,
            bindings::ib_wc_opcode_IB_WC_MASKED_COMP_SWAP => Self::MaskedCmpSwap,
            bindings::ib_wc_opcode_IB_WC_MASKED_FETCH_ADD => Self::MaskedFetchAdd,
            bindings::ib_wc_opcode_IB_WC_LOCAL_INV => Self::LocalInv,
            bindings::ib_wc_opcode_IB_WC_REG_MR => Self::RegMr,
            bindings::ib_wc_opcode_IB_WC_RECV => Self::Recv,
            bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM => Self::RecvRdmaWithImm,
            other => Self::Other(other),
        }
    }
}

/// A received Send With Invalidate's proof that the peer invalidated the registration under
/// [`Self::rkey`] (`IB_WC_WITH_INVALIDATE`). Only the queue pair makes one, from a successful
/// receive completion, and it cannot be copied: it lives as long as its [`WorkCompletion`].
/// [`FastRegMr::remotely_invalidated`](super::fast_reg::FastRegMr::remotely_invalidated)
/// takes it to let that registration's memory go, as a completed `LOCAL_INV` does.
#[derive(Debug, PartialEq, Eq)]
pub struct RemoteInvalidation {
    rkey: u32,
}

impl RemoteInvalidation {
    /// The key the peer invalidated.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
}

/// A completed work request.
#[derive(Debug, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The tag given when the request was posted.
    pub tag: u64,
    /// Whether it was a receive request.
    pub is_recv: bool,
    /// Outcome.
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// Bytes received (receives, RDMA Reads).
    pub byte_len: u32,
    /// Immediate data that came with a receive.
    pub imm: Option<u32>,
    /// The local key a received Send with Invalidate invalidated.
    pub invalidated_rkey: Option<u32>,
    /// The same, as a proof, for a successful receive.
    remote_invalidation: Option<RemoteInvalidation>,
}

impl WorkCompletion {
    /// The proof that the peer invalidated one of our registrations with the Send this
    /// successful receive took.
    pub fn remote_invalidation(&self) -> Option<&RemoteInvalidation> {
        self.remote_invalidation.as_ref()
    }
}

/// Takes the completions of a queue pair created with it
/// ([`CmId::create_qp_with_handler`](super::cm::CmId::create_qp_with_handler)).
///
/// `completed` runs from the CQ's work (`IB_POLL_WORKQUEUE`): process context, one completion
/// at a time for the CQ, in the order the device completed them. It may sleep, but every
/// other completion of the CQ waits for it. The buffers and region the request used are no
/// longer held for it (the slot is released first), so a receive buffer may be reposted from
/// `completed`.
///
/// Dropping the queue pair flushes what is still posted: `completed` sees each such request
/// with a flush status before the queue pair's last reference to the handler goes.
pub trait CompletionHandler: Send + Sync {
    /// One request completed.
    fn completed(&self, wc: &WorkCompletion);
}

/// A posted request's claim on the memory it uses.
struct Slot {
    tag: u64,
    is_recv: bool,
    buffer: Option<Arc<DmaBuffer>>,
    mr: Option<Arc<FastRegMr>>,
    /// The registered memory a request into a region uses (its registration may end before
    /// the request completes).
    held: Option<Registered>,
    /// The pages a request reads or writes with the local DMA key.
    pages: Option<Arc<MappedPages>>,
    /// The key a `LOCAL_INV` invalidates: once it succeeded, `mr` lets that registration's
    /// memory go.
    invalidates: Option<u32>,
}

/// How the request of a slot rides on another or carries riders (see the module
/// documentation); beside the slots, so that the common case, no riders, costs a look.
#[derive(Default)]
struct Link {
    /// The slot of the signaled request an unsignaled one rides on.
    rides_on: Option<usize>,
    /// The unsignaled requests riding on this one.
    riders: Riders,
}

impl Link {
    fn is_empty(&self) -> bool {
        self.rides_on.is_none() && self.riders.len == 0
    }
}

/// The slots of the unsignaled requests that ride on one signaled request: at most the rest
/// of its chain.
#[derive(Default)]
struct Riders {
    slots: [u32; CHAIN_LEN - 1],
    len: usize,
}

impl Riders {
    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.slots.iter().take(self.len).map(|&s| s as usize)
    }

    fn push(&mut self, slot: usize) -> Result {
        let entry = self.slots.get_mut(self.len).ok_or(E2BIG)?;
        *entry = u32::try_from(slot)?;
        self.len += 1;
        Ok(())
    }

    fn remove(&mut self, slot: usize) {
        let live = self.slots.get_mut(..self.len).unwrap_or_default();
        if let Some(at) = live.iter().position(|&s| s as usize == slot) {
            live.copy_within(at + 1.., at);
            self.len -= 1;
        }
    }
}

/// Slot bookkeeping. A slot is in use from posting until its completion is taken by the
/// consumer, so completions never outnumber slots and `done` never overflows.
struct Slots {
    posted: KVec<Option<Slot>>,
    /// One per slot.
    links: KVec<Link>,
    free: FixedRing<usize>,
    done: FixedRing<(usize, WorkCompletion)>,
    sends: u32,
    recvs: u32,
}

impl Slots {
    /// Ends slot `index`'s links: if it rode on a request, it leaves it; its own riders, if
    /// any, are returned. `None` (one look) for a slot without links, the common case.
    fn unlink(&mut self, index: usize) -> Option<Riders> {
        let link = self.links.get_mut(index).filter(|l| !l.is_empty())?;
        let Link { rides_on, riders } = core::mem::take(link);
        if let Some(signaled) = rides_on.and_then(|s| self.links.get_mut(s)) {
            signaled.riders.remove(index);
        }
        Some(riders)
    }
}

/// The part of a queue pair the completion callbacks use.
#[pin_data]
struct QpShared {
    cqes: KVec<Opaque<bindings::ib_cqe>>,
    /// Taken for a moment at every post and completion, never across a call into the device
    /// or while a slot's memory is let go (which may unmap it).
    #[pin]
    slots: SpinLock<Slots>,
    #[pin]
    doorbell: Completion,
    caps: QpCaps,
    /// Takes completions as they come; without it they are queued in `slots.done`.
    handler: Option<Arc<dyn CompletionHandler>>,
    /// Error events (`IB_EVENT_QP_FATAL`, `_REQ_ERR`, `_ACCESS_ERR`) the device raised.
    error_events: AtomicU32,
}

impl QpShared {
    fn slot_of(&self, cqe: *mut bindings::ib_cqe) -> Option<usize> {
        let base = self.cqes.as_ptr() as usize;
        let size = core::mem::size_of::<Opaque<bindings::ib_cqe>>();
        let index = (cqe as usize).checked_sub(base)? / size;
        (index < self.cqes.len()).then_some(index)
    }

    /// Records the completion `wc` of one of our requests.
    fn complete(&self, wc: &bindings::ib_wc) {
        // SAFETY: Every request posted through this queue pair uses a `wr_cqe`; the drain
        // requests of the core have their own `done`.
        let cqe = unsafe { wc.__bindgen_anon_1.wr_cqe };
        let Some(index) = self.slot_of(cqe) else {
            return;
        };
        let released;
        let invalidated;
        // Filled only for a request with riders.
        let mut riders_released: Option<[Option<Slot>; CHAIN_LEN - 1]> = None;
        let mut for_handler = None;
        {
            let mut slots = self.slots.lock();
            let Some(Some(slot)) = slots.posted.get_mut(index) else {
                return;
            };
            let flags = wc.wc_flags as u32;
            // SAFETY: Plain integers in a union; the flags say which one the device wrote.
            let (imm, inv) = unsafe { (wc.ex.imm_data, wc.ex.invalidate_rkey) };
            let done = WorkCompletion {
                tag: slot.tag,
                is_recv: slot.is_recv,
                status: WcStatus(wc.status),
                opcode: WcOpcode::from_raw(wc.opcode),
                byte_len: wc.byte_len,
                imm: (flags & bindings::ib_wc_flags_IB_WC_WITH_IMM != 0).then(|| u32::from_be(imm)),
                invalidated_rkey: (flags & bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE != 0)
                    .then_some(inv),
                remote_invalidation: (slot.is_recv
                    && wc.status == bindings::ib_wc_status_IB_WC_SUCCESS
                    && flags & bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE != 0)
                    .then_some(RemoteInvalidation { rkey: inv }),
            };
            released = (
                slot.buffer.take(),
                slot.mr.take(),
                slot.held.take(),
                slot.pages.take(),
            );
            invalidated = slot
                .invalidates
                .filter(|_| wc.status == bindings::ib_wc_status_IB_WC_SUCCESS);
            // A rider that completes on its own (it failed, or was flushed) leaves the request
            // it rode on now: its slot goes with its own completion, whenever that is taken.
            // The requests riding on this one completed before it: their slots go too.
            if let Some(riders) = slots.unlink(index) {
                let out = riders_released.insert(Default::default());
                for (rider, entry) in riders.iter().zip(out.iter_mut()) {
                    *entry = Self::release(&mut slots, rider);
                }
            }
            if self.handler.is_some() {
                // Holds nothing any more (taken above).
                let _ = Self::release(&mut slots, index);
                for_handler = Some(done);
            } else {
                // Cannot fail: a slot in use has no completion queued yet (see `Slots`).
                let _ = slots.done.push((index, done));
            }
        }
        // Outside the slots' lock: ending a registration may unmap its pages.
        if let (Some(key), Some(mr)) = (invalidated, &released.1) {
            mr.registration_ended(key);
        }
        drop(released);
        drop(riders_released);
        match (&self.handler, &for_handler) {
            (Some(handler), Some(done)) => handler.completed(done),
            _ => self.doorbell.complete(),
        }
    }

    /// Claims a slot for a request; `EAGAIN` when that queue is full.
    fn claim(&self, slot: Slot) -> Result<usize> {
        let mut slots = self.slots.lock();
        let (count, max) = if slot.is_recv {
            (slots.recvs, self.caps.max_recv_wr)
        } else {
            (slots.sends, self.caps.max_send_wr)
        };
        let index = if count < max { slots.free.pop() } else { None };
        let Some(index) = index.filter(|&i| i < slots.posted.len()) else {
            drop(slots);
            // What the request would have used goes outside the lock.
            drop(slot);
            return Err(EAGAIN);
        };
        if slot.is_recv {
            slots.recvs += 1;
        } else {
            slots.sends += 1;
        }
        if let Some(entry) = slots.posted.get_mut(index) {
            *entry = Some(slot);
        }
        Ok(index)
    }

    /// Gives back a slot (its request completed and was taken, or was never posted). The slot
    /// is returned to be dropped once the lock is let go: what it holds may unmap memory.
    fn release(slots: &mut Slots, index: usize) -> Option<Slot> {
        let slot = slots.posted.get_mut(index)?.take()?;
        // A rider that was not posted leaves the request it was to ride on; the riders of a
        // request that was not posted ride on nothing any more.
        if let Some(riders) = slots.unlink(index) {
            for rider in riders.iter() {
                if let Some(link) = slots.links.get_mut(rider) {
                    link.rides_on = None;
                }
            }
        }
        if slot.is_recv {
            slots.recvs -= 1;
        } else {
            slots.sends -= 1;
        }
        let _ = slots.free.push(index);
        Some(slot)
    }

    /// Lets the unsignaled request of slot `rider` ride on the signaled one of slot `signaled`,
    /// both claimed and about to be posted in this order in one chain.
    fn ride(&self, rider: usize, signaled: usize) -> Result {
        let mut slots = self.slots.lock();
        let claimed = |slots: &Slots, i: usize| matches!(slots.posted.get(i), Some(Some(_)));
        if rider == signaled || !claimed(&slots, rider) || !claimed(&slots, signaled) {
            return Err(EINVAL);
        }
        slots
            .links
            .get_mut(signaled)
            .ok_or(EINVAL)?
            .riders
            .push(rider)?;
        slots.links.get_mut(rider).ok_or(EINVAL)?.rides_on = Some(signaled);
        Ok(())
    }

    /// Gives back the slot of a request that was not posted.
    fn unclaim(&self, index: usize) {
        let slot = Self::release(&mut self.slots.lock(), index);
        drop(slot);
    }

    fn cqe(&self, index: usize) -> Result<*mut bindings::ib_cqe> {
        Ok(self.cqes.get(index).ok_or(EINVAL)?.get())
    }
}

/// Completion entry callback of every request posted through a [`KernelQp`].
///
/// # Safety
///
/// Called by the RDMA core with a CQ allocated in [`KernelQp::create`] and one of its
/// completions.
unsafe extern "C" fn wc_done(cq: *mut bindings::ib_cq, wc: *mut bindings::ib_wc) {
    // SAFETY: The CQ was allocated with a `QpShared` as its context, which outlives the CQ
    // (see `KernelQp`); the core passes a valid completion.
    let (shared, wc) = unsafe { (&*((*cq).cq_context as *const QpShared), &*wc) };
    shared.complete(wc);
}

/// Owns a CQ allocated by `__ib_alloc_cq` and frees it on drop.
///
/// # Invariants
///
/// The CQ was allocated by `__ib_alloc_cq` and is owned by this value.
struct CqGuard(NonNull<bindings::ib_cq>);

impl Drop for CqGuard {
    fn drop(&mut self) {
        // SAFETY: We own the CQ (type invariant); no QP uses it any more.
        unsafe { bindings::ib_free_cq(self.0.as_ptr()) };
    }
}

/// The RC queue pair of a connection, with its completion queue.
///
/// # Invariants
///
/// `qp` is the queue pair `rdma_create_qp` created on `id` with `cq` as its send and receive CQ;
/// `_cq`'s context is `shared`. Fields are dropped in order: the CQ (after `Drop` drained and
/// destroyed the QP), then the shared part its callbacks used, then the PD.
pub struct KernelQp {
    id: NonNull<bindings::rdma_cm_id>,
    qp: NonNull<bindings::ib_qp>,
    _cq: CqGuard,
    shared: Pin<KBox<QpShared>>,
    pd: Arc<ProtectionDomain>,
}

// SAFETY: Posting and completion handling are thread-safe; the pointers are owned.
unsafe impl Send for KernelQp {}
// SAFETY: As above.
unsafe impl Sync for KernelQp {}

impl KernelQp {
    /// Creates the queue pair of `id` in `pd`; `handler`, if any, takes its completions.
    ///
    /// # Safety
    ///
    /// `id` is a valid rdma_cm id bound to `pd`'s device, with no QP, that outlives the returned
    /// value.
    pub(crate) unsafe fn create(
        id: NonNull<bindings::rdma_cm_id>,
        pd: &Arc<ProtectionDomain>,
        caps: QpCaps,
        handler: Option<Arc<dyn CompletionHandler>>,
    ) -> Result<Self> {
        if caps.max_send_wr == 0 || caps.max_recv_wr == 0 {
            return Err(EINVAL);
        }
        let nslots = caps.max_send_wr as usize + caps.max_recv_wr as usize;
        let mut cqes = KVec::with_capacity(nslots, GFP_KERNEL)?;
        let mut posted = KVec::with_capacity(nslots, GFP_KERNEL)?;
        let mut links = KVec::with_capacity(nslots, GFP_KERNEL)?;
        let mut free = FixedRing::new(nslots, GFP_KERNEL)?;
        for index in 0..nslots {
            cqes.push(
                Opaque::new(bindings::ib_cqe {
                    done: Some(wc_done),
                }),
                GFP_KERNEL,
            )?;
            posted.push(None, GFP_KERNEL)?;
            links.push(Link::default(), GFP_KERNEL)?;
            let _ = free.push(index);
        }
        let done = FixedRing::new(nslots, GFP_KERNEL)?;
        let shared = KBox::pin_init(
            pin_init!(QpShared {
                cqes,
                slots <- new_spinlock!(Slots {
                    posted,
                    links,
                    free,
                    done,
                    sends: 0,
                    recvs: 0,
                }),
                doorbell <- Completion::new(),
                caps,
                handler,
                error_events: AtomicU32::new(0),
            }),
            GFP_KERNEL,
        )?;
        // The core's drain adds one request to each queue.
        let entries = i32::try_from(nslots + 2)?;
        let context: *const QpShared = &*shared;
        // SAFETY: The device is registered (the PD holds a reference); `context` outlives the CQ
        // (type invariant); the caller string is static.
        let cq = unsafe {
            bindings::__ib_alloc_cq(
                pd.device().as_raw(),
                context as *mut _,
                entries,
                0,
                bindings::ib_poll_context_IB_POLL_WORKQUEUE,
                crate::c_str!("rust").as_char_ptr(),
            )
        };
        let cq = CqGuard(NonNull::new(from_err_ptr(cq)?).ok_or(ENOMEM)?);
        let mut attr = bindings::ib_qp_init_attr {
            send_cq: cq.0.as_ptr(),
            recv_cq: cq.0.as_ptr(),
            cap: bindings::ib_qp_cap {
                max_send_wr: caps.max_send_wr + 1,
                max_recv_wr: caps.max_recv_wr + 1,
                max_send_sge: 1,
                max_recv_sge: 1,
                ..Default::default()
            },
            sq_sig_type: bindings::ib_sig_type_IB_SIGNAL_REQ_WR,
            qp_type: bindings::ib_qp_type_IB_QPT_RC,
            event_handler: Some(qp_event),
            qp_context: context as *mut _,
            ..Default::default()
        };
        // SAFETY: `id` is valid without a QP (safety requirement); `pd` and `cq` are valid.
        to_result(unsafe { bindings::rdma_create_qp(id.as_ptr(), pd.as_raw(), &mut attr) })?;
        // SAFETY: `rdma_create_qp` succeeded, so `id->qp` is the new QP.
        let qp = NonNull::new(unsafe { (*id.as_ptr()).qp }).ok_or(EINVAL)?;
        // INVARIANT: Created above with `cq`, whose context is `shared`.
        Ok(Self {
            id,
            qp,
            _cq: cq,
            shared,
            pd: pd.clone(),
        })
    }

    /// How many times the device reported that the queue pair failed (`IB_EVENT_QP_FATAL`,
    /// `IB_EVENT_QP_REQ_ERR` or `IB_EVENT_QP_ACCESS_ERR`).
    pub fn error_events(&self) -> u32 {
        self.shared.error_events.load(Ordering::Relaxed)
    }

    /// The queue pair's current state (`IB_QPS_*`: 0 reset, 1 init, 2 RTR, 3 RTS, 4 SQD,
    /// 5 SQE, 6 error), as the device reports it.
    pub fn state(&self) -> Result<u32> {
        let mut attr = bindings::ib_qp_attr::default();
        let mut init = bindings::ib_qp_init_attr::default();
        // SAFETY: `qp` is valid (type invariant); the attribute structures are ours.
        to_result(unsafe {
            bindings::ib_query_qp(
                self.qp.as_ptr(),
                &mut attr,
                bindings::ib_qp_attr_mask_IB_QP_STATE as c_int,
                &mut init,
            )
        })?;
        Ok(attr.qp_state)
    }

    fn check_pd(&self, buffer: &Arc<DmaBuffer>) -> Result {
        if Arc::ptr_eq(buffer.pd(), &self.pd) {
            Ok(())
        } else {
            Err(EINVAL)
        }
    }

    /// Posts a receive request for `local`; its completion carries `tag`.
    pub fn post_recv(&self, local: Sge<'_>, tag: u64) -> Result {
        self.check_pd(local.buffer)?;
        let mut sge = local.buffer.sge(local.offset, local.len)?;
        let index = self.shared.claim(Slot {
            tag,
            is_recv: true,
            buffer: Some(local.buffer.clone()),
            mr: None,
            held: None,
            pages: None,
            invalidates: None,
        })?;
        let mut wr = bindings::ib_recv_wr {
            sg_list: &mut sge,
            num_sge: 1,
            ..Default::default()
        };
        wr.__bindgen_anon_1.wr_cqe = self.shared.cqe(index)?;
        let mut bad = core::ptr::null();
        // SAFETY: `qp` is valid; `wr` and `sge` live across the call; the buffer stays mapped
        // until the request completes (its slot holds it).
        let ret = unsafe { bindings::ib_post_recv(self.qp.as_ptr(), &wr, &mut bad) };
        self.unclaim_on_error(index, ret)
    }

    fn unclaim_on_error(&self, index: usize, ret: i32) -> Result {
        if ret != 0 {
            self.shared.unclaim(index);
        }
        to_result(ret)
    }

    /// Takes the oldest completion, if any (never one of a queue pair with a handler).
    pub fn poll(&self) -> Option<WorkCompletion> {
        let mut slots = self.shared.slots.lock();
        let (index, wc) = slots.done.pop()?;
        let slot = QpShared::release(&mut slots, index);
        drop(slots);
        drop(slot);
        Some(wc)
    }

    /// Waits up to `timeout` for the next completion; `ETIMEDOUT` if none came.
    pub fn wait(&self, timeout: Jiffies) -> Result<WorkCompletion> {
        loop {
            if let Some(wc) = self.poll() {
                return Ok(wc);
            }
            if !self.shared.doorbell.wait_timeout(timeout) {
                return self.poll().ok_or(ETIMEDOUT);
            }
        }
    }
}

/// The QP's asynchronous event handler: counts the error events.
///
/// # Safety
///
/// Called by the RDMA core with a valid event of a QP `KernelQp::create` made, whose context is
/// its `QpShared` (alive until the QP is destroyed).
unsafe extern "C" fn qp_event(event: *mut bindings::ib_event, context: *mut c_void) {
    // SAFETY: Valid for the call (the caller's guarantee).
    let kind = unsafe { (*event).event };
    if matches!(
        kind,
        bindings::ib_event_type_IB_EVENT_QP_FATAL
            | bindings::ib_event_type_IB_EVENT_QP_REQ_ERR
            | bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR
    ) {
        // SAFETY: The context is the QP's `QpShared` (the caller's guarantee).
        let shared = unsafe { &*context.cast::<QpShared>() };
        shared.error_events.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for KernelQp {
    fn drop(&mut self) {
        // SAFETY: `qp` is valid and its CQ is polled by the core, so the drain completes: every
        // outstanding request is flushed and its `done` has run when this returns. Then the QP
        // is destroyed through its id (valid: type invariant); the CQ goes with the fields.
        unsafe {
            bindings::ib_drain_qp(self.qp.as_ptr());
            bindings::rdma_destroy_qp(self.id.as_ptr());
        }
    }
}
