// SPDX-License-Identifier: GPL-2.0

//! Completion queues, of kernel consumers and of processes.
//!
//! Completions arrive from the receive path (softirq) and the transmit work (process context),
//! so the ring is under a bottom-half-disabling lock. Where the ring lives depends on who
//! created the CQ:
//!
//! - a kernel consumer's is a ring of [`Wc`]s here, polled through `ib_poll_cq`; its handler
//!   runs after the lock is dropped, once per arming: `IB_CQ_NEXT_COMP` fires on any
//!   completion, `IB_CQ_SOLICITED` on a solicited receive or any error;
//! - a process's is the ring of `struct siw_cqe` it mapped (the siw user ABI,
//!   `proto/siw_abi_entries.rs`). The kernel fills an entry and sets its VALID flag last; the
//!   provider library polls the ring itself and clears the flag. The process arms the CQ by
//!   writing the control word after the entries, which the kernel reads, and resets, on each
//!   completion.
//!
//! A full ring drops the completion, counts it (`overflows`) and raises `IB_EVENT_CQ_ERR`, as
//! there is no room to report it; the consumer sized the CQ.

use core::sync::atomic::{fence, AtomicU32, Ordering};
use kernel::{
    new_spinlock_bh,
    prelude::*,
    rdma::{
        fixed_ring::FixedRing,
        provider::{
            completion_queue::{self as wc, Arm, CqNotifier, Wc},
            objects::{CompletionQueue, WcQp},
            user_map::UserMapping,
        },
    },
    sync::{lock::spinlock_bh::BhDisabled, Arc, SpinLockBh},
};

use crate::proto::{
    qp_engine::{Completion, WcOpcode, WcStatus},
    siw_abi_entries,
};
use crate::{quota::Place, user_rings::ring_slot};

/// Where the entries are.
enum Entries {
    /// A kernel consumer's ring.
    Kernel(FixedRing<Wc>),
    /// The ring a process mapped: `num` entries, then the control word; `tail` counts the
    /// entries written.
    User {
        ring: UserMapping,
        num: u32,
        tail: usize,
    },
    /// Destroyed: a process's ring went back to it.
    Released,
}

struct Ring {
    entries: Entries,
    armed: Option<Arm>,
}

/// A CQ.
#[pin_data]
pub(crate) struct Cq {
    #[pin]
    ring: SpinLockBh<Ring>,
    notifier: CqNotifier,
    /// Completions lost to a full ring.
    overflows: AtomicU32,
    /// Its place among the device's CQs, given back when destroyed.
    place: Place,
}

impl CompletionQueue for Cq {
    fn poll(&self) -> Option<Wc> {
        let mut r = self.ring.lock();
        match &mut r.entries {
            Entries::Kernel(wcs) => wcs.pop(),
            _ => None,
        }
    }

    fn arm(&self, arm: Arm) -> bool {
        let mut r = self.ring.lock();
        // A solicited arming does not weaken a pending next-completion one.
        if r.armed != Some(Arm::NextCompletion) {
            r.armed = Some(arm);
        }
        matches!(&r.entries, Entries::Kernel(wcs) if !wcs.is_empty())
    }

    fn destroy(&self) {
        // A process's ring leaves with the CQ (its user context checks that it did); dropped
        // outside the lock, as removing a mapping may sleep.
        let entries = core::mem::replace(&mut self.ring.lock().entries, Entries::Released);
        drop(entries);
        self.place.leave();
    }
}

impl Cq {
    /// A kernel consumer's CQ of `entries` entries.
    pub(crate) fn new(entries: u32, notifier: CqNotifier, place: Place) -> Result<Arc<Self>> {
        let wcs = FixedRing::new(entries as usize, GFP_KERNEL)?;
        Self::with_entries(Entries::Kernel(wcs), notifier, place)
    }

    /// A process's CQ of `num` entries in `ring`, which has room for the control word after
    /// them.
    pub(crate) fn new_user(
        ring: UserMapping,
        num: u32,
        notifier: CqNotifier,
        place: Place,
    ) -> Result<Arc<Self>> {
        let needed = (num as usize)
            .checked_mul(siw_abi_entries::CQE_SIZE)
            .and_then(|n| n.checked_add(siw_abi_entries::CQ_CTRL_SIZE))
            .ok_or(EINVAL)?;
        if !num.is_power_of_two() || ring.len() < needed {
            return Err(EINVAL);
        }
        Self::with_entries(Entries::User { ring, num, tail: 0 }, notifier, place)
    }

    fn with_entries(entries: Entries, notifier: CqNotifier, place: Place) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                ring <- new_spinlock_bh!(Ring { entries, armed: None }, "Cq::ring"),
                notifier,
                overflows: AtomicU32::new(0),
                place,
            }),
            GFP_KERNEL,
        )
    }

    /// Adds the completion `c` of a work request of QP `qpn` (`qp` to the RDMA core).
    pub(crate) fn push(&self, c: &Completion, qp: WcQp, qpn: u32) {
        let stored = Self::store(&mut self.ring.lock(), c, qp, qpn);
        self.stored(stored);
    }

    /// [`Self::push`] where bottom halves are disabled already (`bh`: the QP's lock is held),
    /// which spares disabling them again and the check for pending softirqs on release.
    pub(crate) fn push_in_bh(&self, bh: BhDisabled<'_>, c: &Completion, qp: WcQp, qpn: u32) {
        let stored = Self::store(&mut self.ring.lock_in_bh(bh), c, qp, qpn);
        self.stored(stored);
    }

    /// Writes `c` into the locked ring `r`; whether that fires the consumer's notification, or
    /// an error if it did not fit. Inlined into both callers: a completion's call chain is
    /// short enough already.
    #[inline(always)]
    fn store(r: &mut Ring, c: &Completion, qp: WcQp, qpn: u32) -> Result<bool> {
        let solicited = c.solicited || c.status != WcStatus::Success;
        let Ring { entries, armed } = r;
        match entries {
            Entries::Kernel(wcs) => Self::push_kernel(wcs, armed, to_wc(c, qp), solicited),
            Entries::User { ring, num, tail } => {
                let written = Self::push_user(ring, *num, *tail, c, qpn, solicited);
                if written.is_ok() {
                    *tail = tail.wrapping_add(1);
                }
                written
            }
            Entries::Released => Err(ENODEV),
        }
    }

    /// After [`Self::store`], with the ring unlocked: notifies the consumer, or tells it that a
    /// completion was lost.
    #[inline]
    fn stored(&self, stored: Result<bool>) {
        match stored {
            Ok(true) => self.notifier.notify(),
            Ok(false) => {}
            Err(_) => {
                self.overflows.fetch_add(1, Ordering::Relaxed);
                // The consumer learns that a completion was lost (`IB_EVENT_CQ_ERR`).
                self.notifier.overflowed();
            }
        }
    }

    /// Stores `wc` in a kernel ring; returns whether the consumer is to be notified.
    fn push_kernel(
        wcs: &mut FixedRing<Wc>,
        armed: &mut Option<Arm>,
        wc: Wc,
        solicited: bool,
    ) -> Result<bool> {
        wcs.push(wc).map_err(|_| ENOSPC)?;
        let fire = match *armed {
            Some(Arm::NextCompletion) => true,
            Some(Arm::Solicited) => solicited,
            None => false,
        };
        if fire {
            *armed = None;
        }
        Ok(fire)
    }

    /// Writes `c` into a process's ring at position `tail` (the count of entries written so
    /// far); returns whether the process is to be notified.
    fn push_user(
        ring: &UserMapping,
        num: u32,
        tail: usize,
        c: &Completion,
        qpn: u32,
        solicited: bool,
    ) -> Result<bool> {
        // `tail` counts on past `u32::MAX`; the slot is the same in its low bits.
        let at = ring_slot(tail as u32, num) as usize * siw_abi_entries::CQE_SIZE;
        let flags_at = at + siw_abi_entries::FLAGS_OFFSET;
        if ring.load_u8(flags_at)? & siw_abi_entries::VALID as u8 != 0 {
            // The process has not polled this entry yet.
            return Err(ENOSPC);
        }
        ring.write(at, &siw_abi_entries::encode_cqe(c, qpn))?;
        // The entry is complete before the process can see it valid (`smp_wmb`).
        fence(Ordering::Release);
        ring.store_u8(flags_at, siw_abi_entries::cqe_flags(c))?;
        // The entry is visible before the arming is read (the process arms, then polls).
        fence(Ordering::SeqCst);
        let ctrl = num as usize * siw_abi_entries::CQE_SIZE;
        let fire = siw_abi_entries::should_notify(ring.load_u32(ctrl)?, solicited);
        if fire {
            ring.store_u32(ctrl, 0)?;
        }
        Ok(fire)
    }
}

/// The kernel consumer's view of completion `c` of QP `qp`.
fn to_wc(c: &Completion, qp: WcQp) -> Wc {
    let status = match c.status {
        WcStatus::Success => wc::WcStatus::Success,
        WcStatus::LocLenErr => wc::WcStatus::LocalLength,
        WcStatus::LocQpOpErr => wc::WcStatus::LocalQpOperation,
        WcStatus::LocProtErr => wc::WcStatus::LocalProtection,
        WcStatus::WrFlushErr => wc::WcStatus::Flushed,
        WcStatus::MwBindErr => wc::WcStatus::MwBind,
        WcStatus::BadRespErr => wc::WcStatus::BadResponse,
        WcStatus::LocAccessErr => wc::WcStatus::LocalAccess,
        WcStatus::RemInvReqErr => wc::WcStatus::RemoteInvalidRequest,
        WcStatus::RemAccessErr => wc::WcStatus::RemoteAccess,
        WcStatus::RemOpErr => wc::WcStatus::RemoteOperation,
        WcStatus::FatalErr => wc::WcStatus::Fatal,
        WcStatus::GeneralErr => wc::WcStatus::General,
    };
    let opcode = match c.opcode {
        WcOpcode::Send => wc::WcOpcode::Send,
        WcOpcode::RdmaWrite => wc::WcOpcode::RdmaWrite,
        WcOpcode::RdmaRead => wc::WcOpcode::RdmaRead,
        WcOpcode::CompSwap => wc::WcOpcode::CompareSwap,
        WcOpcode::FetchAdd => wc::WcOpcode::FetchAdd,
        WcOpcode::MaskedCompSwap => wc::WcOpcode::MaskedCompareSwap,
        WcOpcode::MaskedFetchAdd => wc::WcOpcode::MaskedFetchAdd,
        WcOpcode::LocalInv => wc::WcOpcode::LocalInvalidate,
        WcOpcode::RegMr => wc::WcOpcode::RegisterMr,
        WcOpcode::Recv => wc::WcOpcode::Recv,
        WcOpcode::RecvRdmaWithImm => wc::WcOpcode::RecvRdmaWithImmediate,
    };
    Wc {
        wr_id: c.wr_id,
        status,
        opcode,
        byte_len: c.byte_len,
        qp,
        // The consumer's 32 bits travel as the big-endian value they are.
        imm: c.imm.map(u32::to_be),
        invalidated: c.invalidated,
    }
}
