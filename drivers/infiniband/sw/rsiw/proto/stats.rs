// SPDX-License-Identifier: GPL-2.0

//! What the data path of one connection counts: FPDUs and their bytes each way, the RDMA
//! Read and Atomic messages, TERMINATEs by layer and MPA CRC errors.
//!
//! The [`QpEngine`](super::qp_engine::QpEngine) counts into plain integers as it works (it
//! runs under its QP's lock, so counting costs an add); the driver takes the counts out now
//! and then ([`QpEngine::take_stats`](super::qp_engine::QpEngine::take_stats)) and adds them
//! to the device's counters.

use super::term_error::{Layer, TermError};

/// One count of [`Stats`]; its value is its index there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Stat {
    /// FPDUs sent.
    FpdusTx,
    /// Bytes of the FPDUs sent (MPA length field, ULPDU, pad and CRC field, which is there
    /// with CRCs off too; not TCP's).
    BytesTx,
    /// FPDUs received (counted at their header).
    FpdusRx,
    /// Bytes of the FPDUs received, counted as for [`Stat::BytesTx`].
    BytesRx,
    /// FPDUs whose MPA CRC did not match (each ends its stream).
    CrcErrors,
    /// TERMINATEs sent reporting an RDMAP error.
    TerminateTxRdmap,
    /// TERMINATEs sent reporting a DDP error.
    TerminateTxDdp,
    /// TERMINATEs sent reporting an MPA (lower layer) error.
    TerminateTxMpa,
    /// TERMINATEs received reporting an RDMAP error.
    TerminateRxRdmap,
    /// TERMINATEs received reporting a DDP error.
    TerminateRxDdp,
    /// TERMINATEs received reporting an MPA (lower layer) error.
    TerminateRxMpa,
    /// RDMA Read Requests sent (one per part of a Read into several SGEs).
    ReadRequestsTx,
    /// RDMA Read Requests received.
    ReadRequestsRx,
    /// RDMA Read Responses sent (messages, not segments).
    ReadResponsesTx,
    /// RDMA Read Responses received (messages, not segments).
    ReadResponsesRx,
    /// Atomic Requests sent (RFC 7306).
    AtomicRequestsTx,
    /// Atomic Requests received.
    AtomicRequestsRx,
    /// Atomic Responses sent.
    AtomicResponsesTx,
    /// Atomic Responses received.
    AtomicResponsesRx,
}

impl Stat {
    /// How many there are.
    pub const COUNT: usize = Stat::AtomicResponsesRx as usize + 1;

    /// Every count, in index order.
    pub const ALL: [Stat; Stat::COUNT] = [
        Stat::FpdusTx,
        Stat::BytesTx,
        Stat::FpdusRx,
        Stat::BytesRx,
        Stat::CrcErrors,
        Stat::TerminateTxRdmap,
        Stat::TerminateTxDdp,
        Stat::TerminateTxMpa,
        Stat::TerminateRxRdmap,
        Stat::TerminateRxDdp,
        Stat::TerminateRxMpa,
        Stat::ReadRequestsTx,
        Stat::ReadRequestsRx,
        Stat::ReadResponsesTx,
        Stat::ReadResponsesRx,
        Stat::AtomicRequestsTx,
        Stat::AtomicRequestsRx,
        Stat::AtomicResponsesTx,
        Stat::AtomicResponsesRx,
    ];

    /// The count of TERMINATEs sent reporting `error`.
    pub const fn terminate_tx(error: TermError) -> Self {
        match error.layer() {
            Layer::Rdmap => Stat::TerminateTxRdmap,
            Layer::Ddp => Stat::TerminateTxDdp,
            Layer::Llp => Stat::TerminateTxMpa,
        }
    }

    /// The count of TERMINATEs received reporting `error`.
    pub const fn terminate_rx(error: TermError) -> Self {
        match error.layer() {
            Layer::Rdmap => Stat::TerminateRxRdmap,
            Layer::Ddp => Stat::TerminateRxDdp,
            Layer::Llp => Stat::TerminateRxMpa,
        }
    }
}

/// Counts of the data path of one connection, by [`Stat`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    values: [u64; Stat::COUNT],
}

impl Stats {
    /// All zero.
    pub const ZERO: Self = Self {
        values: [0; Stat::COUNT],
    };

    /// Adds `n` to `stat`.
    #[inline]
    pub fn add(&mut self, stat: Stat, n: u64) {
        if let Some(v) = self.values.get_mut(stat as usize) {
            *v = v.wrapping_add(n);
        }
    }

    /// The count of `stat`.
    pub fn get(&self, stat: Stat) -> u64 {
        self.values.get(stat as usize).copied().unwrap_or(0)
    }

    /// Adds every count of `other`.
    pub fn merge(&mut self, other: &Stats) {
        for (v, o) in self.values.iter_mut().zip(other.values.iter()) {
            *v = v.wrapping_add(*o);
        }
    }

    /// Calls `f` with each count that is not zero, and zeroes it.
    #[inline]
    pub fn drain(&mut self, mut f: impl FnMut(Stat, u64)) {
        for (stat, v) in Stat::ALL.iter().zip(self.values.iter_mut()) {
            if *v != 0 {
                f(*stat, core::mem::take(v));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_follow_the_list() {
        for (i, s) in Stat::ALL.iter().enumerate() {
            assert_eq!(*s as usize, i);
        }
    }

    #[test]
    fn drain_takes_and_zeroes() {
        let mut s = Stats::ZERO;
        s.add(Stat::FpdusTx, 2);
        s.add(Stat::BytesRx, 100);
        let mut seen = [0u64; Stat::COUNT];
        s.drain(|stat, n| seen[stat as usize] += n);
        assert_eq!(seen[Stat::FpdusTx as usize], 2);
        assert_eq!(seen[Stat::BytesRx as usize], 100);
        assert_eq!(s, Stats::ZERO);
    }

    #[test]
    fn terminates_by_layer() {
        assert_eq!(Stat::terminate_tx(TermError::MpaCrc), Stat::TerminateTxMpa);
        assert_eq!(
            Stat::terminate_rx(TermError::RdmapCatastrophicStream),
            Stat::TerminateRxRdmap
        );
    }
}
