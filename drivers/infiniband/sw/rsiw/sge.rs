// SPDX-License-Identifier: GPL-2.0

//! A QP's scatter/gather entries, in the form its engine holds them.
//!
//! An entry a kernel consumer posted keeps the kernel's own entry ([`PostedSge`]), the proof
//! the kernel crate asks for before it turns an address into the memory of a DMA MR (all of
//! memory: see [`DmaMemory::range`]). An entry decoded from a process's ring holds only the
//! values the process wrote; it reaches regions with bounds (user and fast-registration MRs)
//! and never a DMA MR.
//!
//! [`DmaMemory::range`]: kernel::rdma::provider::memory_region::DmaMemory::range

use kernel::rdma::provider::work_request::Sge as PostedSge;

use crate::proto::work_request::{Sge, SgeEntry};

/// A scatter/gather entry of a QP's work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpSge {
    /// Posted by a kernel consumer.
    Posted(PostedSge),
    /// Decoded from a process's ring.
    Decoded(Sge),
}

impl QpSge {
    /// The entry as a kernel consumer posted it, if one did.
    pub(crate) fn posted(&self) -> Option<&PostedSge> {
        match self {
            Self::Posted(sge) => Some(sge),
            Self::Decoded(_) => None,
        }
    }
}

impl SgeEntry for QpSge {
    const EMPTY: Self = Self::Decoded(Sge {
        addr: 0,
        length: 0,
        lkey: 0,
    });

    #[inline]
    fn addr(&self) -> u64 {
        match self {
            Self::Posted(sge) => sge.addr(),
            Self::Decoded(sge) => sge.addr,
        }
    }

    #[inline]
    fn length(&self) -> u32 {
        match self {
            Self::Posted(sge) => sge.length(),
            Self::Decoded(sge) => sge.length,
        }
    }

    #[inline]
    fn lkey(&self) -> u32 {
        match self {
            Self::Posted(sge) => sge.lkey(),
            Self::Decoded(sge) => sge.lkey,
        }
    }
}

impl From<Sge> for QpSge {
    fn from(sge: Sge) -> Self {
        Self::Decoded(sge)
    }
}
