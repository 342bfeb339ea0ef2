// SPDX-License-Identifier: GPL-2.0

//! A device's counters, as `rdma statistic show link rsiw0/1` shows them.
//!
//! The data path of each connection counts into its engine ([`crate::proto::stats`]), under
//! the QP's lock it holds anyway; the QP moves the counts here after each receive and each
//! transmission. Connection setup counts here directly. Both add to per-CPU counters
//! ([`PerCpuCounters`]): no lock, no atomic read-modify-write, no cache line shared between
//! CPUs; a read (the RDMA core asks at most every 10 ms) sums the CPUs' copies. The counts
//! live as long as the device: they start at 0 when it is added.
//!
//! A QP bound to a QP counter (`rdma statistic qp`, [`kernel::rdma::provider::qp_counter`])
//! counts in that counter's [`Counters`] instead, which have the same names: the QP holds the
//! counter it counts in under the lock its data path takes anyway, so binding costs the data
//! path nothing, and each event is counted once, where the RDMA core expects it (the port's
//! values it shows are the device's plus every QP counter's, live or freed). The device's
//! [`QpCounters`] finds a counter by its id.

use kernel::{
    c_str, new_mutex,
    prelude::*,
    rdma::provider::{
        hw_stats::{HwCounter, PerCpuCounters},
        qp_counter::QpCounterId,
    },
    sync::{Arc, Mutex},
};

use crate::proto::{qp_engine::RtrState, stats::Stat};

/// The counts of connection setup, after the data path's ([`Stat`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum CmStat {
    /// Connections set up with MPA revision 1.
    EstablishedRev1 = Stat::COUNT,
    /// Connections set up with MPA revision 2 (RFC 6581).
    EstablishedRev2,
    /// Connections set up with MPA CRCs.
    EstablishedCrc,
    /// Connections set up in the peer-to-peer model (RFC 6581).
    EstablishedPeerToPeer,
    /// MPA Requests we answered with a Reject (the ULP's or ours).
    RejectsSent,
    /// MPA Requests of ours the peer rejected.
    RejectsReceived,
    /// Exchanges that failed: a malformed or unacceptable frame, a wrong or missing RTR, the
    /// deadline, or the stream's end.
    Failed,
    /// RTR messages sent (initiator, peer-to-peer).
    RtrsSent,
    /// RTR messages received (responder, peer-to-peer).
    RtrsReceived,
}

/// How many counters a device has.
const COUNT: usize = CmStat::RtrsReceived as usize + 1;

/// The counters' names, by index: [`Stat`]'s, then [`CmStat`]'s.
pub(crate) const NAMES: &[HwCounter] = &[
    HwCounter::new(c_str!("fpdus_sent")),
    HwCounter::new(c_str!("fpdu_bytes_sent")),
    HwCounter::new(c_str!("fpdus_received")),
    HwCounter::new(c_str!("fpdu_bytes_received")),
    HwCounter::new(c_str!("crc_errors")),
    HwCounter::new(c_str!("terminate_sent_rdmap")),
    HwCounter::new(c_str!("terminate_sent_ddp")),
    HwCounter::new(c_str!("terminate_sent_mpa")),
    HwCounter::new(c_str!("terminate_received_rdmap")),
    HwCounter::new(c_str!("terminate_received_ddp")),
    HwCounter::new(c_str!("terminate_received_mpa")),
    HwCounter::new(c_str!("read_requests_sent")),
    HwCounter::new(c_str!("read_requests_received")),
    HwCounter::new(c_str!("read_responses_sent")),
    HwCounter::new(c_str!("read_responses_received")),
    HwCounter::new(c_str!("atomic_requests_sent")),
    HwCounter::new(c_str!("atomic_requests_received")),
    HwCounter::new(c_str!("atomic_responses_sent")),
    HwCounter::new(c_str!("atomic_responses_received")),
    HwCounter::new(c_str!("mpa_established_rev1")),
    HwCounter::new(c_str!("mpa_established_rev2")),
    HwCounter::new(c_str!("mpa_established_crc")),
    HwCounter::new(c_str!("mpa_established_p2p")),
    HwCounter::new(c_str!("mpa_rejects_sent")),
    HwCounter::new(c_str!("mpa_rejects_received")),
    HwCounter::new(c_str!("mpa_failed")),
    HwCounter::new(c_str!("rtrs_sent")),
    HwCounter::new(c_str!("rtrs_received")),
];

const _: () = assert!(NAMES.len() == COUNT);

/// The counters of one device.
pub(crate) struct Counters(PerCpuCounters);

impl Counters {
    /// All at 0.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Ok(Arc::new(Self(PerCpuCounters::new(COUNT)?), GFP_KERNEL)?)
    }

    /// Adds `n` to a count of the data path.
    #[inline]
    pub(crate) fn data(&self, stat: Stat, n: u64) {
        self.0.add(stat as usize, n);
    }

    /// Counts one of `stat`.
    pub(crate) fn cm(&self, stat: CmStat) {
        self.0.add(stat as usize, 1);
    }

    /// Counts a connection set up with MPA `revision`, CRCs if `crc`, and the RTR `rtr`.
    pub(crate) fn established(&self, revision: u8, crc: bool, rtr: RtrState) {
        self.cm(if revision == 1 {
            CmStat::EstablishedRev1
        } else {
            CmStat::EstablishedRev2
        });
        if crc {
            self.cm(CmStat::EstablishedCrc);
        }
        match rtr {
            RtrState::None => {}
            RtrState::Sent(_) => {
                self.cm(CmStat::EstablishedPeerToPeer);
                self.cm(CmStat::RtrsSent);
            }
            RtrState::Received(_) => {
                self.cm(CmStat::EstablishedPeerToPeer);
                self.cm(CmStat::RtrsReceived);
            }
        }
    }

    /// Every count, `values[i]` for [`NAMES`]`[i]`.
    pub(crate) fn fill(&self, values: &mut [u64]) {
        for (i, v) in values.iter_mut().enumerate() {
            *v = self.0.sum(i);
        }
    }
}

/// The QP counters of a device that have QPs bound, by id.
#[pin_data]
pub(crate) struct QpCounters {
    /// The live counters; `None` is a free slot.
    #[pin]
    live: Mutex<KVec<Option<(QpCounterId, Arc<Counters>)>>>,
}

impl QpCounters {
    /// None yet.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                live <- new_mutex!(KVec::new(), "QpCounters::live"),
            }),
            GFP_KERNEL,
        )
    }

    /// The counts of counter `id`, or, when `None`, of a counter made for the call (with the
    /// smallest id no live counter has); `ENOENT` for an id that is not live.
    pub(crate) fn get_or_make(
        &self,
        id: Option<QpCounterId>,
    ) -> Result<(QpCounterId, Arc<Counters>)> {
        if let Some(id) = id {
            return Ok((id, self.get(id).ok_or(ENOENT)?));
        }
        let mut live = self.live.lock();
        let mut n = 1u32;
        while live.iter().flatten().any(|(i, _)| i.get() == n) {
            n = n.checked_add(1).ok_or(ENOSPC)?;
        }
        let id = QpCounterId::new(n).ok_or(ENOSPC)?;
        let counts = Counters::new()?;
        let entry = Some((id, counts.clone()));
        match live.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = entry,
            None => live.push(entry, GFP_KERNEL)?,
        }
        Ok((id, counts))
    }

    /// Counter `id` is gone: its counts go with its last QP.
    pub(crate) fn remove(&self, id: QpCounterId) {
        let mut live = self.live.lock();
        if let Some(slot) = live
            .iter_mut()
            .find(|slot| slot.as_ref().is_some_and(|(i, _)| *i == id))
        {
            *slot = None;
        }
    }

    /// The counts of counter `id`, if it is live.
    pub(crate) fn get(&self, id: QpCounterId) -> Option<Arc<Counters>> {
        self.live
            .lock()
            .iter()
            .flatten()
            .find(|(i, _)| *i == id)
            .map(|(_, c)| c.clone())
    }
}
