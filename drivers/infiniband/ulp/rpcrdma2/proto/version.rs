// SPDX-License-Identifier: GPL-2.0

//! Protocol version numbers and ranges.
//!
//! The second word of every transport header, in both versions, is
//! `rdma_vers`. Keeping the numbers and the supported range in one place
//! lets the decoders, the error replies (`ERR_VERS`/`RDMA2_ERR_VERS` carry a
//! range) and the negotiation logic agree.

/// `rdma_vers` of RPC-over-RDMA Version 1 (RFC 8166).
pub const RPCRDMA_VERSION_1: u32 = 1;
/// `rdma_vers` of RPC-over-RDMA Version 2 (the draft).
pub const RPCRDMA_VERSION_2: u32 = 2;

/// A protocol version this implementation speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    /// RPC-over-RDMA Version 1.
    V1,
    /// RPC-over-RDMA Version 2.
    V2,
}

impl Version {
    /// The `rdma_vers` value.
    pub const fn as_u32(self) -> u32 {
        match self {
            Self::V1 => RPCRDMA_VERSION_1,
            Self::V2 => RPCRDMA_VERSION_2,
        }
    }

    /// Maps an `rdma_vers` value to a known version.
    pub const fn from_u32(v: u32) -> Option<Self> {
        match v {
            RPCRDMA_VERSION_1 => Some(Self::V1),
            RPCRDMA_VERSION_2 => Some(Self::V2),
            _ => None,
        }
    }
}

/// An inclusive range of protocol versions, as carried by `ERR_VERS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRange {
    /// Lowest version.
    pub low: u32,
    /// Highest version.
    pub high: u32,
}

impl VersionRange {
    /// Both versions this implementation speaks.
    pub const V1_AND_V2: Self = Self {
        low: RPCRDMA_VERSION_1,
        high: RPCRDMA_VERSION_2,
    };
    /// Version 1 only.
    pub const V1_ONLY: Self = Self {
        low: RPCRDMA_VERSION_1,
        high: RPCRDMA_VERSION_1,
    };

    /// A range holding exactly `v`.
    pub const fn only(v: Version) -> Self {
        Self {
            low: v.as_u32(),
            high: v.as_u32(),
        }
    }

    /// Whether `v` lies within the range.
    pub const fn contains(&self, v: u32) -> bool {
        self.low <= v && v <= self.high
    }

    /// The highest known [`Version`] inside both this range and `local`.
    pub fn best_common(&self, local: &Self) -> Option<Version> {
        [Version::V2, Version::V1]
            .into_iter()
            .find(|v| self.contains(v.as_u32()) && local.contains(v.as_u32()))
    }
}
