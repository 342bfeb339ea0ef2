// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA Version 2 transport headers (draft sections 6 and 8).
//!
//! Every v2 header starts with the 20-byte `rpcrdma2_hdr_prefix`: the four
//! words common to all versions (`rdma_xid`, `rdma_vers`, `rdma_credit`,
//! `rdma_htype`) plus `rdma_flags`. The header type selects the body:
//! `RDMA2_MSG` and `RDMA2_NOMSG` carry `rpcrdma2_chunk_lists` (the v1 lists
//! preceded by `rdma_inv_handle`), `RDMA2_ERROR` the `rpcrdma2_error` union,
//! `RDMA2_CONNPROP` a property set.
//!
//! [`decode`] applies every receiver rule of sections 6.2.2 and 7 that can
//! be judged from a single message, so a caller gets either a message that
//! is safe to act on or a [`Fault`] naming the `RDMA2_ERR_*` to send.

use super::chunk::{ChunkLimits, ChunkLists, ChunkListsRef};
use super::error::{Fault, V2Error, Violation};
use super::properties::{encode_propset, PropSet, Property};
use super::version::{VersionRange, RPCRDMA_VERSION_2};
use super::xdr::{EncodeError, XdrReader, XdrWriter};

/// `RDMA2_MSG`.
pub const RDMA2_MSG: u32 = 0;
/// `RDMA2_NOMSG`.
pub const RDMA2_NOMSG: u32 = 1;
/// `RDMA2_ERROR`.
pub const RDMA2_ERROR: u32 = 4;
/// `RDMA2_CONNPROP`.
pub const RDMA2_CONNPROP: u32 = 5;

/// `RDMA2_F_RESPONSE`: the XID names a Reply (or the message answers one).
pub const RDMA2_F_RESPONSE: u32 = 0x0000_0001;
/// `RDMA2_F_MORE`: the payload continues in the next message.
pub const RDMA2_F_MORE: u32 = 0x0000_0002;
/// `RDMA2_F_TPMORE`: more `RDMA2_CONNPROP` messages follow.
pub const RDMA2_F_TPMORE: u32 = 0x0000_0004;
/// Flags this implementation knows; receivers ignore the others.
pub const RDMA2_KNOWN_FLAGS: u32 = RDMA2_F_RESPONSE | RDMA2_F_MORE | RDMA2_F_TPMORE;

/// Size of `rpcrdma2_hdr_prefix`.
pub const PREFIX_LEN: usize = 20;
/// Size of an `RDMA2_MSG`/`RDMA2_NOMSG` header with empty chunk lists.
pub const EMPTY_MSG_HEADER_LEN: usize = PREFIX_LEN + 16;

/// `rdma_flags`. Reserved bits are kept as received but never acted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags(pub u32);

impl Flags {
    /// No flags.
    pub const NONE: Self = Self(0);

    /// `RDMA2_F_RESPONSE`.
    pub const fn response(self) -> bool {
        self.0 & RDMA2_F_RESPONSE != 0
    }

    /// `RDMA2_F_MORE`.
    pub const fn more(self) -> bool {
        self.0 & RDMA2_F_MORE != 0
    }

    /// `RDMA2_F_TPMORE`.
    pub const fn tpmore(self) -> bool {
        self.0 & RDMA2_F_TPMORE != 0
    }

    /// Returns these flags with `bit` set or cleared.
    pub const fn with(self, bit: u32, on: bool) -> Self {
        if on {
            Self(self.0 | bit)
        } else {
            Self(self.0 & !bit)
        }
    }
}

/// `rdma_credit` in v2: two independent 16-bit values (section 4.2.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Credit {
    /// Low half: credits the sender grants the receiver (must not be 0).
    pub granted: u16,
    /// High half: most credits that can be outstanding at the sender.
    pub max_outstanding: u16,
}

impl Credit {
    /// Splits the wire word.
    pub const fn from_raw(raw: u32) -> Self {
        Self {
            granted: (raw & 0xffff) as u16,
            max_outstanding: (raw >> 16) as u16,
        }
    }

    /// Builds the wire word.
    pub const fn to_raw(self) -> u32 {
        ((self.max_outstanding as u32) << 16) | self.granted as u32
    }
}

/// `rpcrdma2_hdr_prefix`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Prefix {
    /// `rdma_xid`.
    pub xid: u32,
    /// `rdma_vers`.
    pub vers: u32,
    /// `rdma_credit`.
    pub credit: Credit,
    /// `rdma_htype`.
    pub htype: u32,
    /// `rdma_flags`.
    pub flags: Flags,
}

impl Prefix {
    /// Decodes the prefix.
    pub fn decode(r: &mut XdrReader<'_>) -> Option<Self> {
        Some(Self {
            xid: r.u32().ok()?,
            vers: r.u32().ok()?,
            credit: Credit::from_raw(r.u32().ok()?),
            htype: r.u32().ok()?,
            flags: Flags(r.u32().ok()?),
        })
    }

    /// Encodes the prefix.
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), EncodeError> {
        w.put_u32(self.xid)?;
        w.put_u32(self.vers)?;
        w.put_u32(self.credit.to_raw())?;
        w.put_u32(self.htype)?;
        w.put_u32(self.flags.0)
    }
}

/// `rpcrdma2_chunk_lists`, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct V2ChunkLists<'a> {
    /// `rdma_inv_handle` (0: no remote invalidation solicited).
    pub inv_handle: u32,
    /// The three lists.
    pub lists: ChunkLists<'a>,
}

/// The body of a decoded v2 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V2Body<'a> {
    /// `RDMA2_MSG`: all or part of an RPC message follows.
    Msg {
        /// The chunk lists.
        chunks: V2ChunkLists<'a>,
        /// The Payload stream (or this message's part of it).
        payload: &'a [u8],
    },
    /// `RDMA2_NOMSG`: Special Format, or a credit grant when all lists are
    /// empty.
    NoMsg {
        /// The chunk lists.
        chunks: V2ChunkLists<'a>,
    },
    /// `RDMA2_ERROR` with its arm.
    Error(V2Error),
    /// `RDMA2_CONNPROP` with its validated property set.
    ConnProp(PropSet<'a>),
}

/// A decoded v2 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V2Message<'a> {
    /// The header prefix.
    pub prefix: Prefix,
    /// The header body.
    pub body: V2Body<'a>,
    /// Length of the transport header in bytes.
    pub header_len: usize,
}

impl<'a> V2Message<'a> {
    /// Whether this is an asynchronous credit grant (section 6.3.2):
    /// `RDMA2_NOMSG` with every chunk list empty.
    pub fn is_credit_grant(&self) -> bool {
        matches!(self.body, V2Body::NoMsg { chunks } if chunks.lists.is_empty())
    }

    /// The chunk lists, for `RDMA2_MSG` and `RDMA2_NOMSG`.
    pub const fn chunks(&self) -> Option<&V2ChunkLists<'a>> {
        match &self.body {
            V2Body::Msg { chunks, .. } | V2Body::NoMsg { chunks } => Some(chunks),
            _ => None,
        }
    }

    /// The inline payload, for `RDMA2_MSG`.
    pub const fn payload(&self) -> Option<&'a [u8]> {
        match self.body {
            V2Body::Msg { payload, .. } => Some(payload),
            _ => None,
        }
    }
}

/// Settings a v2 decoder needs to judge and answer a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V2DecodeConfig {
    /// Local chunk limits.
    pub limits: ChunkLimits,
    /// Versions to advertise in `RDMA2_ERR_VERS`.
    pub versions: VersionRange,
}

impl Default for V2DecodeConfig {
    fn default() -> Self {
        Self {
            limits: ChunkLimits::DEFAULT,
            versions: VersionRange::V1_AND_V2,
        }
    }
}

fn chunk_error_to_v2(e: super::chunk::ChunkError, limits: &ChunkLimits) -> V2Error {
    use super::chunk::ChunkError;
    match e {
        // Ordering and overlap are XDR errors of the header (section 7.2.1).
        ChunkError::Xdr(_)
        | ChunkError::MisalignedPosition(_)
        | ChunkError::PositionOutOfOrder { .. }
        | ChunkError::OverlappingChunks { .. }
        | ChunkError::LengthOverflow => V2Error::BadXdr,
        ChunkError::TooManyReadChunks => V2Error::ReadChunks {
            max_chunks: limits.max_read_chunks,
        },
        ChunkError::TooManyWriteChunks => V2Error::WriteChunks {
            max_chunks: limits.max_write_chunks,
        },
        ChunkError::TooManySegments => V2Error::Segments {
            max_segments: limits.segment_limit(),
        },
    }
}

/// Decodes a received v2 message, enforcing sections 6.2.2 and 7.
///
/// Fault mapping: fewer than 20 bytes, or an `RDMA2_ERROR` that cannot be
/// understood, are silently discarded; a version other than 2 earns
/// `RDMA2_ERR_VERS`; an unknown header type, or `RDMA2_F_TPMORE` on anything
/// but `RDMA2_CONNPROP`, `RDMA2_ERR_INVAL_HTYPE`; `RDMA2_F_MORE` on anything
/// but `RDMA2_MSG`/`RDMA2_CONNPROP` or together with chunks,
/// `RDMA2_ERR_INVAL_CONT`; malformed lists or an `rdma_inv_handle` naming
/// no segment, or a Read list out of position order or with overlapping
/// chunks (see [`ReadList::decode`](super::chunk::ReadList::decode)),
/// `RDMA2_ERR_BAD_XDR`; too many chunks or segments,
/// `RDMA2_ERR_READ_CHUNKS`/`WRITE_CHUNKS`/`SEGMENTS` with the local limit;
/// a bad property, `RDMA2_ERR_BAD_PROPVAL`.
pub fn decode<'a>(buf: &'a [u8], cfg: &V2DecodeConfig) -> Result<V2Message<'a>, Fault> {
    let mut r = XdrReader::new(buf);
    let prefix = Prefix::decode(&mut r).ok_or(Fault::Discard(Violation::ShortHeader))?;
    let (xid, vers, htype, flags) = (prefix.xid, prefix.vers, prefix.htype, prefix.flags);
    let fault = |e: V2Error, v: Violation| Fault::v2(xid, vers, e, v);
    if vers != RPCRDMA_VERSION_2 {
        let e = V2Error::Vers {
            low: cfg.versions.low,
            high: cfg.versions.high,
        };
        return Err(fault(e, Violation::UnsupportedVersion(vers)));
    }
    if !matches!(
        htype,
        RDMA2_MSG | RDMA2_NOMSG | RDMA2_ERROR | RDMA2_CONNPROP
    ) {
        return Err(fault(
            V2Error::InvalHtype,
            Violation::UnknownHeaderType(htype),
        ));
    }
    if flags.tpmore() && htype != RDMA2_CONNPROP {
        return Err(fault(
            V2Error::InvalHtype,
            Violation::TpMoreOnWrongType(htype),
        ));
    }
    if flags.more() && htype != RDMA2_MSG && htype != RDMA2_CONNPROP {
        return Err(fault(V2Error::InvalCont, Violation::MoreOnWrongType(htype)));
    }
    let body = match htype {
        RDMA2_MSG | RDMA2_NOMSG => {
            let inv_handle = r
                .u32()
                .map_err(|e| fault(V2Error::BadXdr, Violation::Xdr(e)))?;
            let lists = ChunkLists::decode(&mut r, &cfg.limits)
                .map_err(|e| fault(chunk_error_to_v2(e, &cfg.limits), Violation::Chunk(e)))?;
            if flags.more() && !lists.is_empty() {
                return Err(fault(V2Error::InvalCont, Violation::ChunksInContinuation));
            }
            if inv_handle != 0 && !lists.contains_handle(inv_handle) {
                return Err(fault(
                    V2Error::BadXdr,
                    Violation::InvalidateHandleUnknown(inv_handle),
                ));
            }
            let chunks = V2ChunkLists { inv_handle, lists };
            if htype == RDMA2_MSG {
                V2Body::Msg {
                    chunks,
                    payload: r.rest(),
                }
            } else {
                V2Body::NoMsg { chunks }
            }
        }
        RDMA2_ERROR => V2Body::Error(
            V2Error::decode(&mut r).map_err(|e| Fault::Discard(Violation::ErrorBody(e)))?,
        ),
        _ => V2Body::ConnProp(
            PropSet::decode(&mut r)
                .map_err(|e| fault(V2Error::BadPropval, Violation::Property(e)))?,
        ),
    };
    let header_len = match body {
        V2Body::Msg { payload, .. } => buf.len().saturating_sub(payload.len()),
        _ => r.position(),
    };
    Ok(V2Message {
        prefix,
        body,
        header_len,
    })
}

/// `rpcrdma2_chunk_lists` to encode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct V2ChunkListsRef<'s> {
    /// `rdma_inv_handle`.
    pub inv_handle: u32,
    /// The three lists.
    pub lists: ChunkListsRef<'s>,
}

impl V2ChunkListsRef<'_> {
    /// No chunks and no invalidation.
    pub const EMPTY: V2ChunkListsRef<'static> = V2ChunkListsRef {
        inv_handle: 0,
        lists: ChunkListsRef::EMPTY,
    };

    /// Encoded size, `None` on overflow.
    pub fn encoded_len(&self) -> Option<usize> {
        self.lists.encoded_len()?.checked_add(4)
    }
}

/// A v2 header body to encode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V2BodyRef<'s> {
    /// `RDMA2_MSG`; the caller appends the Payload stream.
    Msg(V2ChunkListsRef<'s>),
    /// `RDMA2_NOMSG`.
    NoMsg(V2ChunkListsRef<'s>),
    /// `RDMA2_ERROR`.
    Error(V2Error),
    /// `RDMA2_CONNPROP`.
    ConnProp(&'s [Property<'s>]),
}

impl V2BodyRef<'_> {
    /// The header type of this body.
    pub const fn htype(&self) -> u32 {
        match self {
            Self::Msg(_) => RDMA2_MSG,
            Self::NoMsg(_) => RDMA2_NOMSG,
            Self::Error(_) => RDMA2_ERROR,
            Self::ConnProp(_) => RDMA2_CONNPROP,
        }
    }
}

/// Encodes a v2 header into `buf`, returning its length. `prefix.htype` is
/// taken from `body`; for `RDMA2_ERROR` the `RDMA2_F_RESPONSE` flag is
/// forced on, as section 6.2.2.1 requires.
pub fn encode(buf: &mut [u8], prefix: &Prefix, body: &V2BodyRef<'_>) -> Result<usize, EncodeError> {
    let mut w = XdrWriter::new(buf);
    let mut p = *prefix;
    p.htype = body.htype();
    if let V2BodyRef::Error(_) = body {
        p.flags = p.flags.with(RDMA2_F_RESPONSE, true);
    }
    p.encode(&mut w)?;
    match body {
        V2BodyRef::Msg(c) | V2BodyRef::NoMsg(c) => {
            w.put_u32(c.inv_handle)?;
            c.lists.encode(&mut w)?;
        }
        V2BodyRef::Error(e) => e.encode(&mut w)?,
        V2BodyRef::ConnProp(props) => encode_propset(&mut w, props)?,
    }
    Ok(w.len())
}

/// Encodes an asynchronous credit grant (section 6.3.2): `RDMA2_NOMSG`
/// with XID zero and empty chunk lists.
pub fn encode_credit_grant(buf: &mut [u8], credit: Credit) -> Result<usize, EncodeError> {
    let prefix = Prefix {
        xid: 0,
        vers: RPCRDMA_VERSION_2,
        credit,
        htype: RDMA2_NOMSG,
        flags: Flags::NONE,
    };
    encode(buf, &prefix, &V2BodyRef::NoMsg(V2ChunkListsRef::EMPTY))
}
