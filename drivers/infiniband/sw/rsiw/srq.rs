// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues.
//!
//! The QPs created with an SRQ take their receive work requests from it, in the receive path
//! (softirq), when a message needs one. A kernel consumer's SRQ is a ring here, filled by
//! `post_srq_recv`; a process's is a ring of `struct siw_rqe` it maps and fills itself, taken
//! as a QP's receive ring is (`user_rings.rs`).
//!
//! When a take leaves fewer posted receives than the armed limit, the SRQ raises
//! `IB_EVENT_SRQ_LIMIT_REACHED` and the limit disarms. In a process's ring the posted entries
//! are the valid ones from the next to take on, so "fewer than the limit" is "the entry
//! `limit - 1` after the next is not valid".

use kernel::{
    new_spinlock_bh,
    prelude::*,
    rdma::{
        fixed_ring::FixedRing,
        provider::{
            async_event::SrqEvents,
            shared_receive_queue::{SharedReceiveQueue, SrqAttributes, SrqModify},
            user_map::UserMapping,
            work_request::RecvWr,
        },
    },
    sync::{Arc, SpinLockBh},
};

use crate::{
    proto::qp_engine::{Completion, RecvRequest},
    quota::Place,
    sge::QpSge,
    user_rings::{rqe_posted, take_rqe},
};

/// Where the receive work requests wait.
enum Pool {
    /// A kernel consumer's ring.
    Kernel(FixedRing<RecvRequest<QpSge>>),
    /// A process's ring of `num` entries; `get` counts the entries taken.
    User {
        ring: UserMapping,
        num: u32,
        get: u32,
    },
    /// Destroyed: a process's ring went back to it.
    Released,
}

struct Inner {
    pool: Pool,
    /// The armed limit, 0 for none.
    limit: u32,
}

/// A shared receive queue.
#[pin_data]
pub(crate) struct Srq {
    #[pin]
    inner: SpinLockBh<Inner>,
    max_wr: u32,
    max_sge: u32,
    events: SrqEvents,
    place: Place,
}

impl Srq {
    /// A kernel consumer's SRQ of `max_wr` receives of up to `max_sge` SGEs.
    pub(crate) fn new(
        max_wr: u32,
        max_sge: u32,
        limit: u32,
        events: SrqEvents,
        place: Place,
    ) -> Result<Arc<Self>> {
        Self::with_pool(
            Pool::Kernel(FixedRing::new(max_wr as usize, GFP_KERNEL)?),
            max_wr,
            max_sge,
            limit,
            events,
            place,
        )
    }

    /// A process's SRQ of `num` entries in `ring`.
    pub(crate) fn new_user(
        ring: UserMapping,
        num: u32,
        max_sge: u32,
        limit: u32,
        events: SrqEvents,
        place: Place,
    ) -> Result<Arc<Self>> {
        let needed = (num as usize)
            .checked_mul(crate::siw_abi_responses::RQE_SIZE)
            .ok_or(EINVAL)?;
        if !num.is_power_of_two() || ring.len() < needed {
            return Err(EINVAL);
        }
        let pool = Pool::User { ring, num, get: 0 };
        Self::with_pool(pool, num, max_sge, limit, events, place)
    }

    fn with_pool(
        pool: Pool,
        max_wr: u32,
        max_sge: u32,
        limit: u32,
        events: SrqEvents,
        place: Place,
    ) -> Result<Arc<Self>> {
        if limit > max_wr {
            return Err(EINVAL);
        }
        Arc::pin_init(
            pin_init!(Self {
                inner <- new_spinlock_bh!(Inner { pool, limit }, "Srq::inner"),
                max_wr,
                max_sge,
                events,
                place,
            }),
            GFP_KERNEL,
        )
    }

    /// Takes the next receive work request for a QP, if one is posted. A process's malformed
    /// entry is taken and its error completion returned.
    pub(crate) fn take(&self) -> core::result::Result<Option<RecvRequest<QpSge>>, Completion> {
        let (taken, below_limit) = {
            let mut guard = self.inner.lock();
            let Inner { pool, limit } = &mut *guard;
            let (taken, below) = match pool {
                Pool::Kernel(ring) => {
                    let taken = ring.pop();
                    (Ok(taken), ring.len() < *limit as usize)
                }
                Pool::User { ring, num, get } => {
                    let mut request = RecvRequest::<QpSge>::EMPTY;
                    let taken = take_rqe(ring, *num, get, &mut request)
                        .map(|taken| taken.then_some(request));
                    let below = *limit > 0 && !rqe_posted(ring, *num, get.wrapping_add(*limit - 1));
                    (taken, below)
                }
                Pool::Released => (Ok(None), false),
            };
            let fire = *limit > 0 && below;
            if fire {
                *limit = 0;
            }
            (taken, fire)
        };
        if below_limit {
            self.events.limit_reached();
        }
        taken
    }
}

impl SharedReceiveQueue for Srq {
    fn modify(&self, req: &SrqModify) -> Result {
        if req.max_wr.is_some() {
            // Resizing is not supported (nor by the C siw).
            return Err(EOPNOTSUPP);
        }
        if let Some(limit) = req.limit {
            if limit > self.max_wr {
                return Err(EINVAL);
            }
            self.inner.lock().limit = limit;
        }
        Ok(())
    }

    fn query(&self) -> Result<SrqAttributes> {
        Ok(SrqAttributes {
            max_wr: self.max_wr,
            max_sge: self.max_sge,
            limit: self.inner.lock().limit,
        })
    }

    fn post_recv(&self, wr: &RecvWr<'_>) -> Result {
        if wr.sges.len() > self.max_sge as usize {
            return Err(EINVAL);
        }
        let request = crate::verbs_wr::recv_request(wr)?;
        match &mut self.inner.lock().pool {
            Pool::Kernel(ring) => ring.push(request).map_err(|_| ENOMEM),
            // A process posts through its shared ring.
            _ => Err(EINVAL),
        }
    }

    fn destroy(&self) {
        // A process's ring leaves with the SRQ; dropped outside the lock, as removing a
        // mapping may sleep.
        let pool = core::mem::replace(&mut self.inner.lock().pool, Pool::Released);
        drop(pool);
        self.place.leave();
    }
}
