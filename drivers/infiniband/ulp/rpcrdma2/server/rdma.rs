// SPDX-License-Identifier: GPL-2.0

//! The RDMA operations of a connection's chunks, and the waiters of the threads that post them.
//!
//! A server thread that moves a chunk posts a batch of work requests (registrations, RDMA
//! Reads or Writes, invalidations) as one [`Op`], in chains ([`SendChain`]: the device starts
//! on them together). For Reads and invalidations it sleeps until every one of them completed:
//! the call's pages are then the thread's again. A reply's Writes it does not wait for
//! ([`OpGuard::finish_later`]): their last completion puts their bounce buffers and MRs back
//! in the pools. The completions arrive in the connection's [`Receiver`](super::Receiver), which
//! routes them by tag ([`OP_TAG`] and the op's slot) to the op; the last one wakes the thread
//! or ends the op. A failed or
//! flushed completion fails the op (and the connection is closed); the connection's teardown
//! drains its queue pair, so every op posted completes one way or the other.
//!
//! A connection runs at most [`OPS`] ops at once, each of at most [`OP_WRS`] work requests:
//! the send queue is sized for them beside the Sends of replies, so a post never finds it
//! full. A thread that finds every slot taken waits for one.
//!
//! The memory the ops use is the connection's: fast-registration MRs for the sinks of RDMA
//! Reads (on iWARP the sink of a Read must be registered with remote write access, the Read
//! Response being tagged with its key) and for the pages of a reply's bulk data, which RDMA
//! Writes read in place, and bounce buffers the rest of a reply's chunk data is copied into
//! (their source needs no registration: the local DMA key reaches them). Both are kept in small
//! pools and allocated when the pool is empty.

use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    rdma::{
        consumer::{
            client::ProtectionDomain,
            dma_buffer::DmaBuffer,
            fast_reg::{Access, FastRegMr},
            kernel_qp::{SendChain, SendWr},
            mapped_pages::MappedPages,
        },
        fixed_ring::FixedRing,
    },
    sync::{Arc, Completion, CondVar, Mutex},
    time::{msecs_to_jiffies, Jiffies},
};

/// The tag bit of an op's work requests (send buffer indices are below it).
pub(crate) const OP_TAG: u64 = 1 << 32;
/// Ops a connection runs at once.
pub(crate) const OPS: usize = 8;
/// Work requests one op posts at most.
pub(crate) const OP_WRS: usize = 96;
/// Bytes of one bounce buffer (an order-4 allocation).
pub(crate) const BOUNCE_SIZE: usize = 64 * 1024;
/// Bounce buffers a connection keeps: four 1 MiB replies' worth.
const BOUNCES_KEPT: usize = 64;
/// MRs a connection keeps.
const MRS_KEPT: usize = 2 * OPS;
/// How long a thread waits for its op before it gives the connection up.
const OP_TIMEOUT_MS: u32 = 60_000;
/// How long a thread waits for an op of a connection it gave up to be flushed.
const FLUSH_TIMEOUT_MS: u32 = 10_000;
/// How long a thread waits for a free op slot.
const SLOT_TIMEOUT_MS: u32 = 60_000;

/// One batch of work requests a thread waits for.
#[pin_data]
pub(crate) struct Op {
    /// Work requests posted and not completed, plus one while the thread still posts.
    pending: AtomicUsize,
    /// Whether one of them failed (or could not be posted).
    failed: AtomicBool,
    /// Whether its thread stopped waiting: the last completion frees the slot.
    abandoned: AtomicBool,
    /// What the op's requests use, for the last completion to put back in the pools (an op
    /// its thread does not wait for: [`OpGuard::finish_later`]).
    #[pin]
    returns: Mutex<Returns>,
    #[pin]
    done: Completion,
}

/// What an op its thread does not wait for hands back to the connection's pools with its last
/// completion.
#[derive(Default)]
pub(crate) struct Returns {
    /// Bounce buffers its Writes read.
    pub(crate) bounces: KVec<Arc<DmaBuffer>>,
    /// MRs its Writes read through, their registrations invalidated by its last requests.
    pub(crate) mrs: KVec<Arc<FastRegMr>>,
}

/// A slot of the connection's op table and the op in it, for one thread.
pub(crate) struct OpGuard<'a> {
    ops: &'a Ops,
    slot: usize,
    op: Arc<Op>,
    posted: usize,
    /// Whether the posting reference (`pending`'s extra one) was dropped.
    posting_done: bool,
    /// Whether the slot was freed or left to the last completion.
    released: bool,
}

/// The op table of one connection, shared with its receiver (which holds nothing of the
/// device: the receiver may outlive the connection's use of it).
#[pin_data]
pub(crate) struct Ops {
    #[pin]
    slots: Mutex<KVec<Option<Arc<Op>>>>,
    #[pin]
    slot_freed: CondVar,
    /// The bounce buffer pool: here, for the last completion of an op to give its buffers
    /// back to.
    #[pin]
    bounces: Mutex<FixedRing<Arc<DmaBuffer>>>,
    /// The MR pool, for the same reason.
    #[pin]
    mrs: Mutex<FixedRing<Arc<FastRegMr>>>,
}

/// The ops, MRs and bounce buffers of one connection.
#[pin_data]
pub(crate) struct Rdma {
    pd: Arc<ProtectionDomain>,
    /// Pages one MR maps: the device's fast-registration limit.
    region_pages: u32,
    /// The device ends a Read sink's registration with the Read (iWARP).
    read_invalidates: bool,
    ops: Arc<Ops>,
}

impl Rdma {
    /// The ops of a new connection in `pd`, whose MRs map at most `region_pages` pages.
    pub(crate) fn new(pd: &Arc<ProtectionDomain>, region_pages: u32) -> Result<Arc<Self>> {
        let mut slots = KVec::with_capacity(OPS, GFP_KERNEL)?;
        for _ in 0..OPS {
            slots.push(None, GFP_KERNEL)?;
        }
        let mrs = FixedRing::new(MRS_KEPT, GFP_KERNEL)?;
        let bounces = FixedRing::new(BOUNCES_KEPT, GFP_KERNEL)?;
        let ops = Arc::pin_init(
            try_pin_init!(Ops {
                slots <- new_mutex!(slots),
                slot_freed <- new_condvar!(),
                bounces <- new_mutex!(bounces),
                mrs <- new_mutex!(mrs),
            }? Error),
            GFP_KERNEL,
        )?;
        Arc::pin_init(
            try_pin_init!(Self {
                pd: pd.clone(),
                region_pages,
                read_invalidates: pd.device().caps().iwarp,
                ops,
            }? Error),
            GFP_KERNEL,
        )
    }

    /// The op table, for the connection's receiver.
    pub(crate) fn ops(&self) -> &Arc<Ops> {
        &self.ops
    }

    /// The protection domain of the connection.
    pub(crate) fn pd(&self) -> &Arc<ProtectionDomain> {
        &self.pd
    }

    /// Whether the last RDMA Read into an MR ends its registration
    /// ([`SendWr::ReadIntoRegion`]'s `invalidate`): on iWARP devices.
    pub(crate) fn read_invalidates(&self) -> bool {
        self.read_invalidates
    }

    /// Bytes one MR maps.
    pub(crate) fn region_bytes(&self) -> usize {
        self.region_pages as usize * kernel::page::PAGE_SIZE
    }

    /// An MR from the pool, or a new one.
    pub(crate) fn take_mr(&self) -> Result<Arc<FastRegMr>> {
        if let Some(mr) = self.ops.mrs.lock().pop() {
            return Ok(mr);
        }
        FastRegMr::new(&self.pd, self.region_pages)
    }

    /// Gives back an MR whose registration was invalidated.
    pub(crate) fn put_mr(&self, mr: Arc<FastRegMr>) {
        // A full pool drops it.
        let _ = self.ops.mrs.lock().push(mr);
    }

    /// A bounce buffer from the pool, or a new one.
    pub(crate) fn take_bounce(&self) -> Result<Arc<DmaBuffer>> {
        if let Some(buffer) = self.ops.bounces.lock().pop() {
            return Ok(buffer);
        }
        DmaBuffer::new(&self.pd, BOUNCE_SIZE)
    }

    /// Starts an op: takes a free slot, waiting for one if need be. `ETIMEDOUT` if none came
    /// free in time.
    pub(crate) fn begin(&self) -> Result<OpGuard<'_>> {
        let op = Arc::pin_init(
            pin_init!(Op {
                pending: AtomicUsize::new(1),
                failed: AtomicBool::new(false),
                abandoned: AtomicBool::new(false),
                returns <- new_mutex!(Returns::default()),
                done <- Completion::new(),
            }),
            GFP_KERNEL,
        )?;
        let mut slots = self.ops.slots.lock();
        let mut waits = 0;
        loop {
            if let Some(slot) = slots.iter().position(Option::is_none) {
                if let Some(entry) = slots.get_mut(slot) {
                    *entry = Some(op.clone());
                }
                return Ok(OpGuard {
                    ops: &self.ops,
                    slot,
                    op,
                    posted: 0,
                    posting_done: false,
                    released: false,
                });
            }
            if waits * 1000 >= SLOT_TIMEOUT_MS {
                return Err(ETIMEDOUT);
            }
            waits += 1;
            let _ = self
                .ops
                .slot_freed
                .wait_interruptible_timeout(&mut slots, msecs_to_jiffies(1000));
        }
    }
}

impl Ops {
    /// Work request of op slot `tag` completed; `ok` if it succeeded. Runs from the CQ work,
    /// and from the posting thread for a request the device did not take.
    pub(crate) fn completed(&self, tag: u64, ok: bool) {
        let slot = (tag & !OP_TAG) as usize;
        let mut slots = self.slots.lock();
        let Some(Some(op)) = slots.get(slot) else {
            return;
        };
        let op = op.clone();
        if !ok {
            op.failed.store(true, Ordering::Relaxed);
        }
        if op.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            op.done.complete_all();
            if op.abandoned.load(Ordering::Relaxed) {
                if let Some(entry) = slots.get_mut(slot) {
                    *entry = None;
                }
                self.slot_freed.notify_all();
                self.put_back(&op);
            }
        }
    }

    /// Puts what `op` used back in the pools: none of its requests runs any more. A full pool
    /// lets them go, and so does a failed op its MRs: their invalidation may not have run.
    fn put_back(&self, op: &Op) {
        let returned = core::mem::take(&mut *op.returns.lock());
        let mut pool = self.bounces.lock();
        for buffer in returned.bounces {
            let _ = pool.push(buffer);
        }
        drop(pool);
        if !op.failed.load(Ordering::Relaxed) {
            let mut pool = self.mrs.lock();
            for mr in returned.mrs {
                let _ = pool.push(mr);
            }
        }
    }
}

impl OpGuard<'_> {
    /// Adds `wr` to `chain` as part of the op. On failure the op has failed and nothing more
    /// should be posted; what was added still has to be posted and waited for
    /// ([`OpGuard::wait`]). The chain's `unposted` must hand each tag of the op's requests it
    /// does not post to [`Ops::completed`] as a failure.
    pub(crate) fn post(&mut self, chain: &mut SendChain<'_>, wr: &SendWr<'_>) -> Result {
        if self.posted >= OP_WRS {
            self.op.failed.store(true, Ordering::Relaxed);
            return Err(E2BIG);
        }
        self.op.pending.fetch_add(1, Ordering::AcqRel);
        match chain.add(wr, OP_TAG | self.slot as u64) {
            Ok(()) => {
                self.posted += 1;
                Ok(())
            }
            Err(e) => {
                self.op.failed.store(true, Ordering::Relaxed);
                // Ours was not the last: the posting reference is still held.
                self.op.pending.fetch_sub(1, Ordering::AcqRel);
                Err(e)
            }
        }
    }

    /// Registers `pages` with `access` in an MR from `rdma`'s pool, added to `chain` as part
    /// of the op; the MR goes into `kept` first, so that it is accounted for whatever
    /// happens, and is returned for the requests that use it.
    pub(crate) fn register(
        &mut self,
        chain: &mut SendChain<'_>,
        rdma: &Rdma,
        pages: &Arc<MappedPages>,
        access: Access,
        kept: &mut KVec<Arc<FastRegMr>>,
    ) -> Result<Arc<FastRegMr>> {
        let mr = rdma.take_mr()?;
        kept.push(mr.clone(), GFP_KERNEL)?;
        self.post(
            chain,
            &SendWr::RegPages {
                mr: &mr,
                pages,
                access,
            },
        )?;
        Ok(mr)
    }

    /// Drops the posting reference: the last completion now wakes the thread.
    fn posting_done(&mut self) {
        if !self.posting_done {
            self.posting_done = true;
            if self.op.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                self.op.done.complete_all();
            }
        }
    }

    /// Frees the slot if every work request completed, or leaves that to the last completion.
    /// Returns whether they all completed.
    fn release(&mut self) -> bool {
        self.released = true;
        let mut slots = self.ops.slots.lock();
        if self.op.pending.load(Ordering::Acquire) == 0 {
            if let Some(entry) = slots.get_mut(self.slot) {
                *entry = None;
            }
            self.ops.slot_freed.notify_all();
            true
        } else {
            // The last completion frees the slot (it runs under the lock we hold).
            self.op.abandoned.store(true, Ordering::Relaxed);
            false
        }
    }

    /// Lets the op finish without its thread: the bounce buffers and MRs `returns` its
    /// requests used go back to the pools with its last completion, which frees the slot. A
    /// failed request has the connection closed by the receiver, as for any failed completion.
    pub(crate) fn finish_later(mut self, returns: Returns) {
        *self.op.returns.lock() = returns;
        self.posting_done();
        if self.release() {
            // Every request completed already.
            self.ops.put_back(&self.op);
        }
    }

    /// Waits until every work request posted completed. `EIO` if one failed; `ETIMEDOUT` if
    /// they did not complete in time, even after `give_up` (which should break the
    /// connection, so that the device flushes them) ran: the device may then still use what
    /// they name.
    pub(crate) fn wait(mut self, give_up: impl FnOnce()) -> Result {
        self.posting_done();
        if !self.op.done.wait_timeout(jiffies(OP_TIMEOUT_MS)) {
            pr_info!(
                "RDMA operations took over {} ms: giving the connection up\n",
                OP_TIMEOUT_MS
            );
            give_up();
            let _ = self.op.done.wait_timeout(jiffies(FLUSH_TIMEOUT_MS));
        }
        if !self.release() {
            Err(ETIMEDOUT)
        } else if self.op.failed.load(Ordering::Relaxed) {
            Err(EIO)
        } else {
            Ok(())
        }
    }
}

impl Drop for OpGuard<'_> {
    fn drop(&mut self) {
        // An op not waited for: its slot goes with its last completion.
        if !self.released {
            self.posting_done();
            let _ = self.release();
        }
    }
}

fn jiffies(ms: u32) -> Jiffies {
    msecs_to_jiffies(ms)
}
