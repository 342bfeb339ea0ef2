// SPDX-License-Identifier: GPL-2.0

//! Decoding a received message of either version, and sending error replies.
//!
//! The first four words have the same meaning in every RPC-over-RDMA
//! version, so a receiver can look at `rdma_vers` before it knows how to
//! parse the rest. [`decode`] does that and hands the buffer to the v1 or
//! v2 decoder; [`encode_error_reply`] turns a [`Fault`]'s [`ErrorReply`]
//! into the matching `RDMA_ERROR` or `RDMA2_ERROR` header.
//!
//! A client still probing with version 2 must first offer each reply to
//! [`super::negotiation::parse_version_error`]: a v1-only server answers in
//! the v1 layout while echoing `rdma_vers` 2, which the v2 decoder (rightly)
//! cannot parse and drops.

use super::chunk::ChunkLimits;
use super::error::{ErrorBody, ErrorReply, Fault, V1Error, V2Error, Violation};
use super::v1::{self, V1BodyRef, V1DecodeConfig, V1Header};
use super::v2::{self, Credit, Flags, Prefix, V2BodyRef, V2DecodeConfig, V2Message};
use super::version::{VersionRange, RPCRDMA_VERSION_1, RPCRDMA_VERSION_2};
use super::xdr::{EncodeError, XdrReader};

/// The four words every version starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommonHeader {
    /// `rdma_xid`.
    pub xid: u32,
    /// `rdma_vers`.
    pub vers: u32,
    /// `rdma_credit` (raw).
    pub credit: u32,
    /// `rdma_proc` / `rdma_htype`.
    pub htype: u32,
}

impl CommonHeader {
    /// Reads the common words, `None` if the buffer is shorter than 16 bytes.
    pub fn peek(buf: &[u8]) -> Option<Self> {
        let mut r = XdrReader::new(buf);
        Some(Self {
            xid: r.u32().ok()?,
            vers: r.u32().ok()?,
            credit: r.u32().ok()?,
            htype: r.u32().ok()?,
        })
    }
}

/// A decoded message of either version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message<'a> {
    /// A version 1 header.
    V1(V1Header<'a>),
    /// A version 2 message.
    V2(V2Message<'a>),
}

/// Settings for decoding messages of any supported version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeConfig {
    /// Local chunk limits.
    pub limits: ChunkLimits,
    /// Versions this endpoint accepts and advertises.
    pub versions: VersionRange,
}

impl Default for DecodeConfig {
    fn default() -> Self {
        Self {
            limits: ChunkLimits::DEFAULT,
            versions: VersionRange::V1_AND_V2,
        }
    }
}

/// Decodes a message, dispatching on `rdma_vers`.
///
/// A version outside `cfg.versions` earns `ERR_VERS`: in the v2 layout
/// (`RDMA2_ERROR`) when this endpoint speaks v2, since that is the
/// extensible format later versions are built on, else in the v1 layout.
pub fn decode<'a>(buf: &'a [u8], cfg: &DecodeConfig) -> Result<Message<'a>, Fault> {
    let common = CommonHeader::peek(buf).ok_or(Fault::Discard(Violation::ShortHeader))?;
    let vers = common.vers;
    if !cfg.versions.contains(vers) || !matches!(vers, RPCRDMA_VERSION_1 | RPCRDMA_VERSION_2) {
        return Err(version_fault(common.xid, vers, &cfg.versions));
    }
    if vers == RPCRDMA_VERSION_1 {
        let c = V1DecodeConfig {
            limits: cfg.limits,
            versions: cfg.versions,
        };
        v1::decode(buf, &c).map(Message::V1)
    } else {
        let c = V2DecodeConfig {
            limits: cfg.limits,
            versions: cfg.versions,
        };
        v2::decode(buf, &c).map(Message::V2)
    }
}

/// The fault for a message whose version is not accepted.
pub fn version_fault(xid: u32, vers: u32, supported: &VersionRange) -> Fault {
    let violation = Violation::UnsupportedVersion(vers);
    if supported.high >= RPCRDMA_VERSION_2 {
        let e = V2Error::Vers {
            low: supported.low,
            high: supported.high,
        };
        Fault::v2(xid, vers, e, violation)
    } else {
        let e = V1Error::Vers {
            low: supported.low,
            high: supported.high,
        };
        Fault::v1(xid, vers, e, violation)
    }
}

/// Encodes the error header for `reply` with the given raw credit word,
/// returning its length.
pub fn encode_error_reply(
    buf: &mut [u8],
    reply: &ErrorReply,
    credit: u32,
) -> Result<usize, EncodeError> {
    match reply.body {
        ErrorBody::V1(e) => v1::encode(buf, reply.xid, reply.vers, credit, &V1BodyRef::Error(e)),
        ErrorBody::V2(e) => {
            let prefix = Prefix {
                xid: reply.xid,
                vers: reply.vers,
                credit: Credit::from_raw(credit),
                htype: v2::RDMA2_ERROR,
                flags: Flags(v2::RDMA2_F_RESPONSE),
            };
            v2::encode(buf, &prefix, &V2BodyRef::Error(e))
        }
    }
}
