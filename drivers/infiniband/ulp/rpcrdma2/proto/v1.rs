// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA Version 1 transport headers (RFC 8166 section 5).
//!
//! A v1 header is one XDR object: `rdma_xid`, `rdma_vers`, `rdma_credit`,
//! then the `rdma_proc` discriminated union. `RDMA_MSG` is followed by the
//! RPC message itself; `RDMA_NOMSG` conveys it through chunks only.
//! `RDMA_MSGP` is deprecated and answered with `ERR_CHUNK`; `RDMA_DONE` is
//! deprecated and decoded only so that the caller can drop it.
//!
//! Version 1 is what the installed base (the kernel's C xprtrdma/svcrdma)
//! speaks, and what a v2 endpoint falls back to after `ERR_VERS`.

use super::chunk::{ChunkLimits, ChunkLists, ChunkListsRef};
use super::error::{Fault, V1Error, Violation};
use super::version::{VersionRange, RPCRDMA_VERSION_1};
use super::xdr::{EncodeError, XdrReader, XdrWriter};

/// `RDMA_MSG`: an RPC message follows the header.
pub const RDMA_MSG: u32 = 0;
/// `RDMA_NOMSG`: the RPC message travels in chunks.
pub const RDMA_NOMSG: u32 = 1;
/// `RDMA_MSGP`: deprecated padded message; receivers reject it.
pub const RDMA_MSGP: u32 = 2;
/// `RDMA_DONE`: deprecated; receivers drop it.
pub const RDMA_DONE: u32 = 3;
/// `RDMA_ERROR`: reports a transport error.
pub const RDMA_ERROR: u32 = 4;

/// Size of the fixed header words (xid, vers, credit, proc).
pub const V1_FIXED_LEN: usize = 16;
/// Version 1 default inline threshold in bytes.
pub const V1_DEFAULT_INLINE: u32 = 1024;

/// Settings a v1 decoder needs to judge and answer a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V1DecodeConfig {
    /// Local chunk limits.
    pub limits: ChunkLimits,
    /// Versions to advertise in `ERR_VERS`.
    pub versions: VersionRange,
}

impl Default for V1DecodeConfig {
    fn default() -> Self {
        Self {
            limits: ChunkLimits::DEFAULT,
            versions: VersionRange::V1_ONLY,
        }
    }
}

/// The body of a decoded v1 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V1Body<'a> {
    /// `RDMA_MSG` with the RPC message (or its reduced form) following.
    Msg {
        /// The chunk lists.
        chunks: ChunkLists<'a>,
        /// Bytes after the header: the Payload stream.
        payload: &'a [u8],
    },
    /// `RDMA_NOMSG`: the RPC message is in a Position Zero Read chunk or
    /// the Reply chunk.
    NoMsg {
        /// The chunk lists.
        chunks: ChunkLists<'a>,
    },
    /// `RDMA_DONE` (deprecated): the caller drops it.
    Done,
    /// `RDMA_ERROR` with its arm.
    Error(V1Error),
}

/// A decoded v1 transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V1Header<'a> {
    /// `rdma_xid`.
    pub xid: u32,
    /// `rdma_vers` (always 1 after a successful decode).
    pub vers: u32,
    /// `rdma_credit`: credits granted by the sender.
    pub credit: u32,
    /// The `rdma_proc` union.
    pub body: V1Body<'a>,
    /// Length of the transport header in bytes.
    pub header_len: usize,
}

/// Decodes a received v1 message.
///
/// Faults: shorter than 16 bytes, or an `RDMA_ERROR` that cannot be
/// understood, are silently discarded; a version other than 1 earns
/// `ERR_VERS` with `cfg.versions`; everything else that is malformed or
/// unsupported earns `ERR_CHUNK`.
pub fn decode<'a>(buf: &'a [u8], cfg: &V1DecodeConfig) -> Result<V1Header<'a>, Fault> {
    let mut r = XdrReader::new(buf);
    let (xid, vers, credit, proc) = match (r.u32(), r.u32(), r.u32(), r.u32()) {
        (Ok(a), Ok(b), Ok(c), Ok(d)) => (a, b, c, d),
        _ => return Err(Fault::Discard(Violation::ShortHeader)),
    };
    if vers != RPCRDMA_VERSION_1 {
        let e = V1Error::Vers {
            low: cfg.versions.low,
            high: cfg.versions.high,
        };
        return Err(Fault::v1(xid, vers, e, Violation::UnsupportedVersion(vers)));
    }
    let chunk_fault = |v| Fault::v1(xid, vers, V1Error::Chunk, v);
    let body = match proc {
        RDMA_MSG | RDMA_NOMSG => {
            let chunks = ChunkLists::decode(&mut r, &cfg.limits)
                .map_err(|e| chunk_fault(Violation::Chunk(e)))?;
            if proc == RDMA_MSG {
                V1Body::Msg {
                    chunks,
                    payload: r.rest(),
                }
            } else {
                if chunks.is_empty() {
                    return Err(chunk_fault(Violation::NoMsgWithoutChunks));
                }
                V1Body::NoMsg { chunks }
            }
        }
        RDMA_MSGP => return Err(chunk_fault(Violation::DeprecatedMsgp)),
        RDMA_DONE => V1Body::Done,
        RDMA_ERROR => V1Body::Error(
            V1Error::decode(&mut r).map_err(|e| Fault::Discard(Violation::ErrorBody(e)))?,
        ),
        other => return Err(chunk_fault(Violation::UnknownHeaderType(other))),
    };
    let header_len = match body {
        V1Body::Msg { payload, .. } => buf.len().saturating_sub(payload.len()),
        _ => r.position(),
    };
    Ok(V1Header {
        xid,
        vers,
        credit,
        body,
        header_len,
    })
}

/// What a Responder checks of a decoded call beyond the structure of its header, answered with
/// `ERR_CHUNK` (RFC 8166 section 5.3.2, XDR errors):
///
/// - the RPC message of an `RDMA_MSG` starts with the header's `rdma_xid`;
/// - each Read chunk of an `RDMA_MSG` other than a Position Zero one is reinserted within the
///   Payload stream: its Position is at most the inline bytes plus the (XDR-rounded) lengths of
///   the chunks before it.
///
/// An `RDMA_NOMSG` call is whole in its chunks, which only the Responder's transfers can check.
pub fn check_call(header: &V1Header<'_>) -> Result<(), Fault> {
    let V1Body::Msg { chunks, payload } = header.body else {
        return Ok(());
    };
    let fault = |v| Fault::v1(header.xid, header.vers, V1Error::Chunk, v);
    let rpc_xid = XdrReader::new(payload).u32();
    if rpc_xid != Ok(header.xid) {
        return Err(fault(Violation::XidMismatch));
    }
    chunks
        .check_read_positions(payload.len())
        .map_err(|position| fault(Violation::ReadPositionOutside(position)))
}

/// A v1 header body to encode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V1BodyRef<'s> {
    /// `RDMA_MSG`; the caller appends the Payload stream.
    Msg(ChunkListsRef<'s>),
    /// `RDMA_NOMSG`.
    NoMsg(ChunkListsRef<'s>),
    /// `RDMA_ERROR`.
    Error(V1Error),
}

/// Encodes a v1 transport header into `buf`, returning its length.
pub fn encode(
    buf: &mut [u8],
    xid: u32,
    vers: u32,
    credit: u32,
    body: &V1BodyRef<'_>,
) -> Result<usize, EncodeError> {
    let mut w = XdrWriter::new(buf);
    w.put_u32(xid)?;
    w.put_u32(vers)?;
    w.put_u32(credit)?;
    match body {
        V1BodyRef::Msg(c) => {
            w.put_u32(RDMA_MSG)?;
            c.encode(&mut w)?;
        }
        V1BodyRef::NoMsg(c) => {
            w.put_u32(RDMA_NOMSG)?;
            c.encode(&mut w)?;
        }
        V1BodyRef::Error(e) => {
            w.put_u32(RDMA_ERROR)?;
            e.encode(&mut w)?;
        }
    }
    Ok(w.len())
}
