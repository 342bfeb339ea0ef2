// SPDX-License-Identifier: GPL-2.0

//! Transport error codes and what a receiver must do about a bad message.
//!
//! Both protocol versions answer a malformed or unsupported message with an
//! error header (`RDMA_ERROR` in RFC 8166, `RDMA2_ERROR` in the v2 draft,
//! section 7), or drop it silently when the header cannot be trusted. Every
//! decoder in this crate therefore fails with a [`Fault`] that already says
//! which of the two applies and, for a reply, carries the complete error arm
//! ([`V1Error`] or [`V2Error`]) so the transport only has to encode it.
//! [`Violation`] records *why*, for tracing.

use super::chunk::ChunkError;
use super::properties::PropError;
use super::xdr::{EncodeError, XdrError, XdrReader, XdrWriter};

/// RFC 8166 `ERR_VERS`.
pub const ERR_VERS: u32 = 1;
/// RFC 8166 `ERR_CHUNK`.
pub const ERR_CHUNK: u32 = 2;

/// `RDMA2_ERR_VERS`.
pub const RDMA2_ERR_VERS: u32 = 1;
/// `RDMA2_ERR_BAD_XDR`.
pub const RDMA2_ERR_BAD_XDR: u32 = 2;
/// `RDMA2_ERR_BAD_PROPVAL`.
pub const RDMA2_ERR_BAD_PROPVAL: u32 = 3;
/// `RDMA2_ERR_INVAL_HTYPE`.
pub const RDMA2_ERR_INVAL_HTYPE: u32 = 4;
/// `RDMA2_ERR_INVAL_CONT`.
pub const RDMA2_ERR_INVAL_CONT: u32 = 5;
/// `RDMA2_ERR_READ_CHUNKS`.
pub const RDMA2_ERR_READ_CHUNKS: u32 = 6;
/// `RDMA2_ERR_WRITE_CHUNKS`.
pub const RDMA2_ERR_WRITE_CHUNKS: u32 = 7;
/// `RDMA2_ERR_SEGMENTS`.
pub const RDMA2_ERR_SEGMENTS: u32 = 8;
/// `RDMA2_ERR_WRITE_RESOURCE`.
pub const RDMA2_ERR_WRITE_RESOURCE: u32 = 9;
/// `RDMA2_ERR_REPLY_RESOURCE`.
pub const RDMA2_ERR_REPLY_RESOURCE: u32 = 10;
/// `RDMA2_ERR_SYSTEM`.
pub const RDMA2_ERR_SYSTEM: u32 = 100;

/// The body of an RFC 8166 `RDMA_ERROR` (union `rpc_rdma_error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V1Error {
    /// `ERR_VERS`: the inclusive range of versions the sender supports.
    Vers {
        /// Lowest supported version.
        low: u32,
        /// Highest supported version.
        high: u32,
    },
    /// `ERR_CHUNK`: the header or its chunks could not be processed.
    Chunk,
}

impl V1Error {
    /// The `rdma_err` discriminant.
    pub const fn code(&self) -> u32 {
        match self {
            Self::Vers { .. } => ERR_VERS,
            Self::Chunk => ERR_CHUNK,
        }
    }

    /// Decodes the union; unknown codes fail with [`ErrorBodyFault::UnknownCode`].
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Self, ErrorBodyFault> {
        match r.u32()? {
            ERR_VERS => Ok(Self::Vers {
                low: r.u32()?,
                high: r.u32()?,
            }),
            ERR_CHUNK => Ok(Self::Chunk),
            other => Err(ErrorBodyFault::UnknownCode(other)),
        }
    }

    /// Encodes the union.
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), EncodeError> {
        w.put_u32(self.code())?;
        if let Self::Vers { low, high } = *self {
            w.put_u32(low)?;
            w.put_u32(high)?;
        }
        Ok(())
    }
}

/// The body of an `RDMA2_ERROR` (union `rpcrdma2_error`), one variant per
/// error code of draft section 7 with the arm the XDR gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V2Error {
    /// `RDMA2_ERR_VERS` with `rdma_vrange`.
    Vers {
        /// `rdma_vers_low`.
        low: u32,
        /// `rdma_vers_high`.
        high: u32,
    },
    /// `RDMA2_ERR_BAD_XDR` (void arm).
    BadXdr,
    /// `RDMA2_ERR_BAD_PROPVAL` (void arm).
    BadPropval,
    /// `RDMA2_ERR_INVAL_HTYPE` (void arm).
    InvalHtype,
    /// `RDMA2_ERR_INVAL_CONT` (void arm).
    InvalCont,
    /// `RDMA2_ERR_READ_CHUNKS` with `rdma_max_chunks`.
    ReadChunks {
        /// Most Read chunks the responder can process (0: none).
        max_chunks: u32,
    },
    /// `RDMA2_ERR_WRITE_CHUNKS` with `rdma_max_chunks`.
    WriteChunks {
        /// Most Write chunks the responder can return.
        max_chunks: u32,
    },
    /// `RDMA2_ERR_SEGMENTS` with `rdma_max_segments`.
    Segments {
        /// Most segments per chunk the responder can process.
        max_segments: u32,
    },
    /// `RDMA2_ERR_WRITE_RESOURCE` with `rdma_writeres`.
    WriteResource {
        /// One-based index of the first short Write chunk (0: unknown).
        chunk_index: u32,
        /// Bytes that chunk needs.
        length_needed: u32,
    },
    /// `RDMA2_ERR_REPLY_RESOURCE` with `rdma_length_needed`.
    ReplyResource {
        /// Reply chunk bytes needed.
        length_needed: u32,
    },
    /// `RDMA2_ERR_SYSTEM` (void arm).
    System,
}

impl V2Error {
    /// The `rdma_err` discriminant.
    pub const fn code(&self) -> u32 {
        match self {
            Self::Vers { .. } => RDMA2_ERR_VERS,
            Self::BadXdr => RDMA2_ERR_BAD_XDR,
            Self::BadPropval => RDMA2_ERR_BAD_PROPVAL,
            Self::InvalHtype => RDMA2_ERR_INVAL_HTYPE,
            Self::InvalCont => RDMA2_ERR_INVAL_CONT,
            Self::ReadChunks { .. } => RDMA2_ERR_READ_CHUNKS,
            Self::WriteChunks { .. } => RDMA2_ERR_WRITE_CHUNKS,
            Self::Segments { .. } => RDMA2_ERR_SEGMENTS,
            Self::WriteResource { .. } => RDMA2_ERR_WRITE_RESOURCE,
            Self::ReplyResource { .. } => RDMA2_ERR_REPLY_RESOURCE,
            Self::System => RDMA2_ERR_SYSTEM,
        }
    }

    /// Whether the draft calls this error permanent for the transaction
    /// named by the header's XID (every code but the operational resource
    /// errors, after which the requester may retry with more resources).
    pub const fn is_permanent(&self) -> bool {
        !matches!(
            self,
            Self::ReadChunks { .. }
                | Self::WriteChunks { .. }
                | Self::Segments { .. }
                | Self::WriteResource { .. }
                | Self::ReplyResource { .. }
        )
    }

    /// Decodes the union; unknown codes fail with
    /// [`ErrorBodyFault::UnknownCode`], which a receiver silently discards.
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Self, ErrorBodyFault> {
        Ok(match r.u32()? {
            RDMA2_ERR_VERS => Self::Vers {
                low: r.u32()?,
                high: r.u32()?,
            },
            RDMA2_ERR_BAD_XDR => Self::BadXdr,
            RDMA2_ERR_BAD_PROPVAL => Self::BadPropval,
            RDMA2_ERR_INVAL_HTYPE => Self::InvalHtype,
            RDMA2_ERR_INVAL_CONT => Self::InvalCont,
            RDMA2_ERR_READ_CHUNKS => Self::ReadChunks {
                max_chunks: r.u32()?,
            },
            RDMA2_ERR_WRITE_CHUNKS => Self::WriteChunks {
                max_chunks: r.u32()?,
            },
            RDMA2_ERR_SEGMENTS => Self::Segments {
                max_segments: r.u32()?,
            },
            RDMA2_ERR_WRITE_RESOURCE => Self::WriteResource {
                chunk_index: r.u32()?,
                length_needed: r.u32()?,
            },
            RDMA2_ERR_REPLY_RESOURCE => Self::ReplyResource {
                length_needed: r.u32()?,
            },
            RDMA2_ERR_SYSTEM => Self::System,
            other => return Err(ErrorBodyFault::UnknownCode(other)),
        })
    }

    /// Encodes the union.
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), EncodeError> {
        w.put_u32(self.code())?;
        match *self {
            Self::Vers { low, high } => {
                w.put_u32(low)?;
                w.put_u32(high)
            }
            Self::ReadChunks { max_chunks } | Self::WriteChunks { max_chunks } => {
                w.put_u32(max_chunks)
            }
            Self::Segments { max_segments } => w.put_u32(max_segments),
            Self::WriteResource {
                chunk_index,
                length_needed,
            } => {
                w.put_u32(chunk_index)?;
                w.put_u32(length_needed)
            }
            Self::ReplyResource { length_needed } => w.put_u32(length_needed),
            Self::BadXdr | Self::BadPropval | Self::InvalHtype | Self::InvalCont | Self::System => {
                Ok(())
            }
        }
    }
}

/// Why a received error body was not understood (it is then discarded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorBodyFault {
    /// The arm was cut short.
    Xdr(XdrError),
    /// The `rdma_err` value is not one this implementation knows.
    UnknownCode(u32),
}

impl From<XdrError> for ErrorBodyFault {
    fn from(e: XdrError) -> Self {
        Self::Xdr(e)
    }
}

/// What was wrong with a received message (diagnostics; the protocol
/// consequence is in [`Fault`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violation {
    /// Shorter than the fixed header, so not even the XID can be trusted.
    ShortHeader,
    /// `rdma_vers` names a version this endpoint does not speak (or not on
    /// this connection).
    UnsupportedVersion(u32),
    /// Unknown or unsupported header type.
    UnknownHeaderType(u32),
    /// RFC 8166 `RDMA_MSGP`, which receivers must reject.
    DeprecatedMsgp,
    /// The fixed part of the header body is malformed.
    Xdr(XdrError),
    /// A chunk list is malformed or exceeds local limits.
    Chunk(ChunkError),
    /// `RDMA_NOMSG` without any chunk (v1 only: v2 uses it for grants).
    NoMsgWithoutChunks,
    /// `rdma_inv_handle` is non-zero and matches no handle in the header.
    InvalidateHandleUnknown(u32),
    /// A received error header could not be understood.
    ErrorBody(ErrorBodyFault),
    /// `RDMA2_F_TPMORE` on a header type other than `RDMA2_CONNPROP`.
    TpMoreOnWrongType(u32),
    /// `RDMA2_F_MORE` on a header type other than `RDMA2_MSG`/`RDMA2_CONNPROP`.
    MoreOnWrongType(u32),
    /// Chunks in a message that has `RDMA2_F_MORE` set.
    ChunksInContinuation,
    /// A transport property value is invalid.
    Property(PropError),
    /// The transport XID differs from the XID of the RPC message it carries.
    XidMismatch,
    /// A Read chunk's Position lies past the end of the Payload stream it is reinserted into.
    ReadPositionOutside(u32),
    /// `RDMA2_F_RESPONSE` disagrees with the RPC message's `msg_type`.
    DirectionMismatch,
    /// The RPC payload is too short to carry an XID and a `msg_type`, or its
    /// `msg_type` is neither CALL nor REPLY.
    BadRpcHeader,
    /// A continuation sequence was interleaved with another XID or type.
    ContinuationMismatch,
    /// A continuation sequence exceeded the configured length or count.
    ContinuationTooLong,
    /// Reassembly storage could not take more data.
    StorageExhausted,
    /// `RDMA2_CONNPROP` after the peer declared its properties complete.
    PropertiesAlreadyComplete,
    /// Another header type arrived while the peer's `RDMA2_CONNPROP`
    /// sequence was still open (`RDMA2_F_TPMORE` set on its last one).
    PropertiesIncomplete(u32),
    /// A message form the peer does not support for reverse direction.
    ReverseDirectionUnsupported,
}

/// The error header to send back and where it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorReply {
    /// XID of the offending message, echoed in the reply.
    pub xid: u32,
    /// `rdma_vers` of the offending message, echoed in the reply.
    pub vers: u32,
    /// Which error header layout and arm to send.
    pub body: ErrorBody,
}

/// An error arm in the layout of the version that answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorBody {
    /// An RFC 8166 `RDMA_ERROR` (no flags word).
    V1(V1Error),
    /// An `RDMA2_ERROR` (with the flags word, `RDMA2_F_RESPONSE` set).
    V2(V2Error),
}

impl ErrorBody {
    /// The error code's name, for messages.
    pub const fn name(&self) -> &'static str {
        match self {
            Self::V1(V1Error::Vers { .. }) => "ERR_VERS",
            Self::V1(V1Error::Chunk) => "ERR_CHUNK",
            Self::V2(e) => match e {
                V2Error::Vers { .. } => "RDMA2_ERR_VERS",
                V2Error::BadXdr => "RDMA2_ERR_BAD_XDR",
                V2Error::BadPropval => "RDMA2_ERR_BAD_PROPVAL",
                V2Error::InvalHtype => "RDMA2_ERR_INVAL_HTYPE",
                V2Error::InvalCont => "RDMA2_ERR_INVAL_CONT",
                V2Error::ReadChunks { .. } => "RDMA2_ERR_READ_CHUNKS",
                V2Error::WriteChunks { .. } => "RDMA2_ERR_WRITE_CHUNKS",
                V2Error::Segments { .. } => "RDMA2_ERR_SEGMENTS",
                V2Error::WriteResource { .. } => "RDMA2_ERR_WRITE_RESOURCE",
                V2Error::ReplyResource { .. } => "RDMA2_ERR_REPLY_RESOURCE",
                V2Error::System => "RDMA2_ERR_SYSTEM",
            },
        }
    }
}

/// How a receiver must treat a message it could not accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Drop the message without any reply.
    Discard(Violation),
    /// Drop the message and (as a responder) send `reply` to the peer.
    Reply {
        /// The error header to send.
        reply: ErrorReply,
        /// What was wrong.
        violation: Violation,
    },
}

impl Fault {
    /// The violation behind this fault.
    pub const fn violation(&self) -> Violation {
        match self {
            Self::Discard(v) | Self::Reply { violation: v, .. } => *v,
        }
    }

    /// The error reply to send, if any.
    pub const fn reply(&self) -> Option<ErrorReply> {
        match self {
            Self::Discard(_) => None,
            Self::Reply { reply, .. } => Some(*reply),
        }
    }

    /// Shorthand for a v2 reply fault.
    pub const fn v2(xid: u32, vers: u32, error: V2Error, violation: Violation) -> Self {
        Self::Reply {
            reply: ErrorReply {
                xid,
                vers,
                body: ErrorBody::V2(error),
            },
            violation,
        }
    }

    /// Shorthand for a v1 reply fault.
    pub const fn v1(xid: u32, vers: u32, error: V1Error, violation: Violation) -> Self {
        Self::Reply {
            reply: ErrorReply {
                xid,
                vers,
                body: ErrorBody::V1(error),
            },
            violation,
        }
    }
}
