// SPDX-License-Identifier: GPL-2.0

//! A device's counters, as `rdma statistic show link rsiw0/1` shows them.
//!
//! The data path of each connection counts into its engine ([`crate::proto::stats`]), under
//! the QP's lock it holds anyway; the QP moves the counts here after each receive and each
//! transmission. Connection setup counts here directly. Both add to per-CPU counters
//! ([`PerCpuCounters`]): no lock, no atomic read-modify-write, no cache line shared between
//! CPUs; a read (the RDMA core asks at most every 10 ms) sums the CPUs' copies. The counts
//! live as long as the device: they start at 0 when it is added.

use kernel::{
    c_str,
    prelude::*,
    rdma::provider::hw_stats::{HwCounter, PerCpuCounters},
    sync::Arc,
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
