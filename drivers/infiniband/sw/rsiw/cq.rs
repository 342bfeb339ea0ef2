// SPDX-License-Identifier: GPL-2.0

//! Completion queues of kernel consumers.
//!
//! Completions arrive from the receive path (softirq) and the transmit work (process context),
//! so the ring is under a bottom-half-disabling lock. The consumer's handler runs after the
//! lock is dropped, once per arming: `IB_CQ_NEXT_COMP` fires on any completion,
//! `IB_CQ_SOLICITED` on a solicited receive or any error. A full ring drops the completion and
//! counts it (`overflows`), as there is no room to report it; the consumer sized the CQ.

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::{
    new_spinlock_bh,
    prelude::*,
    rdma::{
        completion_queue::{Arm, CqNotifier, Wc, WcStatus},
        objects::CompletionQueue,
    },
    sync::{Arc, SpinLockBh},
};

struct Ring {
    entries: KVec<Option<Wc>>,
    head: usize,
    len: usize,
    armed: Option<Arm>,
}

/// A kernel CQ.
#[pin_data]
pub(crate) struct Cq {
    #[pin]
    ring: SpinLockBh<Ring>,
    notifier: CqNotifier,
    /// Completions lost to a full ring.
    overflows: AtomicU32,
    /// Destroyed by the consumer.
    destroyed: AtomicBool,
    /// Keeps the device's CQ count.
    _place: crate::device::CountedPlace,
}

impl Cq {
    pub(crate) fn new(
        entries: u32,
        notifier: CqNotifier,
        place: crate::device::CountedPlace,
    ) -> Result<Arc<Self>> {
        let mut v = KVec::with_capacity(entries as usize, GFP_KERNEL)?;
        for _ in 0..entries {
            v.push(None, GFP_KERNEL)?;
        }
        Arc::pin_init(
            pin_init!(Self {
                ring <- new_spinlock_bh!(
                    Ring { entries: v, head: 0, len: 0, armed: None },
                    "Cq::ring"
                ),
                notifier,
                overflows: AtomicU32::new(0),
                destroyed: AtomicBool::new(false),
                _place: place,
            }),
            GFP_KERNEL,
        )
    }

    /// Whether the consumer destroyed it.
    pub(crate) fn is_destroyed(&self) -> bool {
        self.destroyed.load(Ordering::Relaxed)
    }

    /// Adds a completion; `solicited` marks a receive the sender asked an event for.
    pub(crate) fn push(&self, wc: Wc, solicited: bool) {
        let fire = {
            let mut r = self.ring.lock();
            let cap = r.entries.len();
            if r.len == cap {
                self.overflows.fetch_add(1, Ordering::Relaxed);
                return;
            }
            let at = (r.head + r.len) % cap;
            if let Some(slot) = r.entries.get_mut(at) {
                *slot = Some(wc);
            }
            r.len += 1;
            let fire = match r.armed {
                Some(Arm::NextCompletion) => true,
                Some(Arm::Solicited) => solicited || wc.status != WcStatus::Success,
                None => false,
            };
            if fire {
                r.armed = None;
            }
            fire
        };
        if fire {
            self.notifier.notify();
        }
    }
}

impl CompletionQueue for Cq {
    fn poll(&self) -> Option<Wc> {
        let mut r = self.ring.lock();
        if r.len == 0 {
            return None;
        }
        let cap = r.entries.len();
        let head = r.head;
        let wc = r.entries.get_mut(head).and_then(Option::take);
        r.head = (head + 1) % cap;
        r.len -= 1;
        wc
    }

    fn arm(&self, arm: Arm) -> bool {
        let mut r = self.ring.lock();
        // A solicited arming does not weaken a pending next-completion one.
        if r.armed != Some(Arm::NextCompletion) {
            r.armed = Some(arm);
        }
        r.len > 0
    }

    fn destroy(&self) {
        self.destroyed.store(true, Ordering::Relaxed);
    }
}
