// SPDX-License-Identifier: GPL-2.0

//! The wire revision: the one place where the transports meet a header layout.
//!
//! The client and server transports encode and decode every transport header through this
//! module, in terms that do not depend on the layout: an XID, credits, a call or a reply, a
//! message inline (`Msg`), a message in chunks (`NoMsg`), an error. A [`Revision`] says which
//! layout a connection speaks:
//!
//! - [`Revision::V1`]: RFC 8166 (`rdma_xid`, `rdma_vers`, `rdma_credit`, `rdma_proc`, the
//!   chunk lists);
//! - [`Revision::V2Draft01`]: draft-ietf-nfsv4-rpcrdma-version-two-01 (the 20-byte
//!   `rpcrdma2_hdr_prefix` with `rdma_flags`, `rdma_inv_handle` before the chunk lists, two
//!   16-bit credit values in `rdma_credit`, `RDMA2_ERROR` with its own error codes).
//!
//! A later revision of the draft (-07 laid the header out anew) is one more variant here and
//! one more pair of codecs beside [`super::v2`]; the transports keep what they ask of a
//! header. This module also holds the rules that choose a layout for an answer: which
//! version a server accepts on a connection ([`admit`]) and what it says about a call it will
//! not serve ([`refusal`]), in the layout of the connection's revision.

use super::chunk::{ChunkLimits, ChunkLists, ChunkListsRef};
use super::continuation::Part;
use super::dispatch::CommonHeader;
use super::error::{ErrorBody, ErrorReply, Fault, V1Error, V2Error, Violation};
use super::negotiation::parse_version_error;
use super::properties::PropSet;
use super::reverse::{classify_v1, classify_v2, Direction as Flow};
use super::role::Endpoint;
use super::v1::{self, V1Body, V1BodyRef, V1DecodeConfig};
use super::v2::{
    self, Credit, Flags, Prefix, V2Body, V2BodyRef, V2ChunkListsRef, V2DecodeConfig, RDMA2_F_MORE,
    RDMA2_F_RESPONSE, RDMA2_MSG, RDMA2_NOMSG,
};
use super::version::{Version, VersionRange, RPCRDMA_VERSION_1, RPCRDMA_VERSION_2};
use super::xdr::{EncodeError, XdrReader};

/// A header layout a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revision {
    /// RPC-over-RDMA Version 1, RFC 8166.
    V1,
    /// RPC-over-RDMA Version 2 as draft-ietf-nfsv4-rpcrdma-version-two-01 lays it out.
    V2Draft01,
}

impl Revision {
    /// The revision spoken for `version`.
    pub const fn of(version: Version) -> Self {
        match version {
            Version::V1 => Self::V1,
            Version::V2 => Self::V2Draft01,
        }
    }

    /// The protocol version (`rdma_vers`) of this revision.
    pub const fn version(self) -> Version {
        match self {
            Self::V1 => Version::V1,
            Self::V2Draft01 => Version::V2,
        }
    }

    /// `rdma_vers` of this revision's headers.
    pub const fn vers(self) -> u32 {
        self.version().as_u32()
    }

    /// Bytes of a `Msg`/`NoMsg` header besides its chunk lists.
    pub const fn fixed_len(self) -> usize {
        match self {
            Self::V1 => v1::V1_FIXED_LEN,
            // The prefix and `rdma_inv_handle`.
            Self::V2Draft01 => v2::PREFIX_LEN + 4,
        }
    }

    /// A short name for messages and statistics.
    pub const fn name(self) -> &'static str {
        match self {
            Self::V1 => "v1",
            Self::V2Draft01 => "v2 (draft-01)",
        }
    }
}

/// The credit word of a header. Version 1 carries one value (RFC 8166 section 3.3.1: the
/// requests the sender grants or asks for); version 2 two 16-bit ones (draft section
/// 4.2.1.1): the credits granted, which must not be zero, and the most that can be
/// outstanding at the sender. A received Version 1 value above 65535 reads as 65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Credits {
    /// Credits granted (the whole of a Version 1 credit word).
    pub granted: u16,
    /// Most credits outstanding at the sender (Version 2 only; 0 from a Version 1 header).
    pub max: u16,
}

impl Credits {
    /// The wire word in `revision`'s layout. Version 2 never grants zero credits.
    pub const fn raw(self, revision: Revision) -> u32 {
        match revision {
            Revision::V1 => self.granted as u32,
            Revision::V2Draft01 => {
                let granted = if self.granted == 0 { 1 } else { self.granted };
                Credit {
                    granted,
                    max_outstanding: self.max,
                }
                .to_raw()
            }
        }
    }

    /// Reads the wire word `raw` of a header of `revision`.
    pub const fn from_raw(raw: u32, revision: Revision) -> Self {
        match revision {
            Revision::V1 => Self {
                granted: if raw > u16::MAX as u32 {
                    u16::MAX
                } else {
                    raw as u16
                },
                max: 0,
            },
            Revision::V2Draft01 => {
                let c = Credit::from_raw(raw);
                Self {
                    granted: c.granted,
                    max: c.max_outstanding,
                }
            }
        }
    }
}

/// Which way an RPC message goes; Version 2 says so in `RDMA2_F_RESPONSE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// An RPC Call (forward or reverse direction).
    Call,
    /// An RPC Reply.
    Reply,
}

/// The body of a header to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyRef<'s> {
    /// The RPC message follows the header (`RDMA_MSG`, `RDMA2_MSG`).
    Msg(ChunkListsRef<'s>),
    /// The RPC message is in a Position Zero Read chunk or the Reply chunk (`RDMA_NOMSG`,
    /// `RDMA2_NOMSG`).
    NoMsg(ChunkListsRef<'s>),
    /// A part of the RPC message that continues in the next Send: `RDMA2_MSG` with
    /// `RDMA2_F_MORE` and no chunks (draft section 4.4.2). Version 2 only.
    Fragment,
}

/// A header to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outgoing<'s> {
    /// `rdma_xid`: the RPC message's XID.
    pub xid: u32,
    /// The credit word.
    pub credits: Credits,
    /// Whether the RPC message is a call or a reply.
    pub direction: Direction,
    /// What follows the fixed words.
    pub body: BodyRef<'s>,
}

/// The length of a `Msg` or `NoMsg` header with `lists` in `revision`'s layout, `None` on
/// overflow.
pub fn header_len(revision: Revision, lists: &ChunkListsRef<'_>) -> Option<usize> {
    lists.encoded_len()?.checked_add(revision.fixed_len())
}

/// Encodes `header` into `buf` in `revision`'s layout, returning its length. Version 2
/// headers solicit no remote invalidation (`rdma_inv_handle` 0). A [`BodyRef::Fragment`] in
/// Version 1 is [`EncodeError::NotInRevision`].
pub fn encode(
    revision: Revision,
    buf: &mut [u8],
    header: &Outgoing<'_>,
) -> Result<usize, EncodeError> {
    encode_soliciting(revision, buf, header, 0)
}

/// Encodes `header` as [`encode`] does, a Version 2 `Msg` or `NoMsg` with `inv_handle` as its
/// `rdma_inv_handle` (see [`super::remote_invalidation::solicited_handle`]); Version 1 headers
/// and fragments carry none.
pub fn encode_soliciting(
    revision: Revision,
    buf: &mut [u8],
    header: &Outgoing<'_>,
    inv_handle: u32,
) -> Result<usize, EncodeError> {
    let credit = header.credits.raw(revision);
    match revision {
        Revision::V1 => {
            let body = match header.body {
                BodyRef::Msg(lists) => V1BodyRef::Msg(lists),
                BodyRef::NoMsg(lists) => V1BodyRef::NoMsg(lists),
                BodyRef::Fragment => return Err(EncodeError::NotInRevision),
            };
            v1::encode(buf, header.xid, RPCRDMA_VERSION_1, credit, &body)
        }
        Revision::V2Draft01 => {
            let response = match header.direction {
                Direction::Call => 0,
                Direction::Reply => RDMA2_F_RESPONSE,
            };
            let more = match header.body {
                BodyRef::Fragment => RDMA2_F_MORE,
                BodyRef::Msg(_) | BodyRef::NoMsg(_) => 0,
            };
            let flags = Flags(response | more);
            let prefix = Prefix {
                xid: header.xid,
                vers: RPCRDMA_VERSION_2,
                credit: Credit::from_raw(credit),
                htype: 0,
                flags,
            };
            let body = match header.body {
                BodyRef::Msg(lists) => V2BodyRef::Msg(V2ChunkListsRef { inv_handle, lists }),
                BodyRef::NoMsg(lists) => V2BodyRef::NoMsg(V2ChunkListsRef { inv_handle, lists }),
                BodyRef::Fragment => V2BodyRef::Msg(V2ChunkListsRef {
                    inv_handle: 0,
                    lists: ChunkListsRef::EMPTY,
                }),
            };
            v2::encode(buf, &prefix, &body)
        }
    }
}

/// Encodes the error header `reply` in the layout its body names, with `credits`; returns
/// its length. Version 1: `rdma_xid`, `rdma_vers` (both echoed), the credit word,
/// `RDMA_ERROR`, the error. Version 2: the prefix with `RDMA2_F_RESPONSE`, then the error.
pub fn encode_error(
    buf: &mut [u8],
    reply: &ErrorReply,
    credits: Credits,
) -> Result<usize, EncodeError> {
    let revision = match reply.body {
        ErrorBody::V1(_) => Revision::V1,
        ErrorBody::V2(_) => Revision::V2Draft01,
    };
    super::dispatch::encode_error_reply(buf, reply, credits.raw(revision))
}

/// What a received header carries besides its fixed words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// The RPC message (or with `more`, a part of it) follows the header.
    Msg {
        /// The chunk lists.
        chunks: ChunkLists<'a>,
        /// The bytes after the header.
        payload: &'a [u8],
        /// `RDMA2_F_MORE`: the payload continues in the next message (never in Version 1).
        more: bool,
    },
    /// The RPC message is in chunks.
    NoMsg {
        /// The chunk lists (never all empty).
        chunks: ChunkLists<'a>,
    },
    /// A transport error about the message `rdma_xid` names.
    Error(ErrorBody),
    /// Version 2's `RDMA2_CONNPROP`: the peer's transport properties, already validated
    /// (draft section 6.3.4). Its credits count.
    Properties {
        /// The property set this message carries.
        set: PropSet<'a>,
        /// `RDMA2_F_TPMORE`: more `RDMA2_CONNPROP` messages follow.
        more: bool,
    },
    /// Nothing an RPC message comes of: Version 1's deprecated `RDMA_DONE` and Version 2's
    /// credit grant (`RDMA2_NOMSG` without chunks). Its credits count.
    Control,
}

/// A received header of either revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    /// The layout it was decoded in.
    pub revision: Revision,
    /// `rdma_xid`.
    pub xid: u32,
    /// The credit word.
    pub credits: Credits,
    /// `RDMA2_F_RESPONSE` (`None` in Version 1, which has no flags).
    pub response: Option<bool>,
    /// What follows the fixed words.
    pub body: Body<'a>,
    /// Version 2's `rdma_inv_handle` of a `Msg` or `NoMsg`: a handle of its chunk lists, or 0
    /// (always 0 in Version 1).
    pub inv_handle: u32,
    /// Bytes of the header.
    pub header_len: usize,
}

impl<'a> Header<'a> {
    /// What the continuation [`Reassembler`](super::continuation::Reassembler) makes of this
    /// message. A Version 1 message is never a fragment.
    pub const fn part(&self) -> Part<'a> {
        match self.body {
            Body::Msg { payload, more, .. } => Part::Rpc {
                xid: self.xid,
                htype: RDMA2_MSG,
                more,
                payload: Some(payload),
            },
            Body::NoMsg { .. } => Part::Rpc {
                xid: self.xid,
                htype: RDMA2_NOMSG,
                more: false,
                payload: None,
            },
            Body::Error(_) | Body::Properties { .. } | Body::Control => Part::Control,
        }
    }

    /// The chunk lists of a `Msg` or `NoMsg`.
    pub const fn chunks(&self) -> Option<&ChunkLists<'a>> {
        match &self.body {
            Body::Msg { chunks, .. } | Body::NoMsg { chunks } => Some(chunks),
            _ => None,
        }
    }
}

/// Decodes `buf` as a header of `revision` (its `rdma_vers` must be that revision's), with
/// the local chunk `limits`. A fault answers in `revision`'s layout; an `ERR_VERS` in it
/// names `versions`.
pub fn decode_as<'a>(
    revision: Revision,
    buf: &'a [u8],
    limits: &ChunkLimits,
    versions: VersionRange,
) -> Result<Header<'a>, Fault> {
    match revision {
        Revision::V1 => {
            let cfg = V1DecodeConfig {
                limits: *limits,
                versions,
            };
            let h = v1::decode(buf, &cfg)?;
            let body = match h.body {
                V1Body::Msg { chunks, payload } => Body::Msg {
                    chunks,
                    payload,
                    more: false,
                },
                V1Body::NoMsg { chunks } => Body::NoMsg { chunks },
                V1Body::Done => Body::Control,
                V1Body::Error(e) => Body::Error(ErrorBody::V1(e)),
            };
            Ok(Header {
                revision,
                xid: h.xid,
                credits: Credits::from_raw(h.credit, revision),
                response: None,
                body,
                inv_handle: 0,
                header_len: h.header_len,
            })
        }
        Revision::V2Draft01 => {
            let cfg = V2DecodeConfig {
                limits: *limits,
                versions,
            };
            let m = v2::decode(buf, &cfg)?;
            let grant = m.is_credit_grant();
            let inv_handle = m.chunks().map_or(0, |c| c.inv_handle);
            let body = match m.body {
                _ if grant => Body::Control,
                V2Body::Msg { chunks, payload } => Body::Msg {
                    chunks: chunks.lists,
                    payload,
                    more: m.prefix.flags.more(),
                },
                V2Body::NoMsg { chunks } => Body::NoMsg {
                    chunks: chunks.lists,
                },
                V2Body::Error(e) => Body::Error(ErrorBody::V2(e)),
                V2Body::ConnProp(set) => Body::Properties {
                    set,
                    more: m.prefix.flags.tpmore(),
                },
            };
            Ok(Header {
                revision,
                xid: m.prefix.xid,
                credits: Credits::from_raw(m.prefix.credit.to_raw(), revision),
                response: Some(m.prefix.flags.response()),
                body,
                inv_handle,
                header_len: m.header_len,
            })
        }
    }
}

/// The `rdma_xid` of a message of a `revision` connection that could not be decoded, and
/// whether it says `RDMA2_F_MORE` (never in Version 1), read from its first words; `None` if it
/// is too short to say. A receiver drops the rest of a continued message it refused.
pub fn peek_continued(revision: Revision, buf: &[u8]) -> Option<(u32, bool)> {
    let mut r = XdrReader::new(buf);
    let xid = r.u32().ok()?;
    let more = match revision {
        Revision::V1 => false,
        Revision::V2Draft01 => {
            // `rdma_vers`, `rdma_credit`, `rdma_htype`, then `rdma_flags`.
            for _ in 0..3 {
                r.u32().ok()?;
            }
            Flags(r.u32().ok()?).more()
        }
    };
    Some((xid, more))
}

/// Decodes `buf` in the layout its `rdma_vers` names. A message of neither version, or too
/// short for the four common words, is discarded: a Requester answers nothing.
pub fn decode<'a>(buf: &'a [u8], limits: &ChunkLimits) -> Result<Header<'a>, Fault> {
    let common = CommonHeader::peek(buf).ok_or(Fault::Discard(Violation::ShortHeader))?;
    let version = Version::from_u32(common.vers)
        .ok_or(Fault::Discard(Violation::UnsupportedVersion(common.vers)))?;
    decode_as(Revision::of(version), buf, limits, VersionRange::V1_AND_V2)
}

/// What a client makes of a message from the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received<'a> {
    /// A header in the layout its `rdma_vers` names.
    Header(Header<'a>),
    /// An `ERR_VERS` answering a Version 2 probe: the server speaks `range`. The C svcrdma
    /// sends it in the Version 1 layout with `rdma_vers` 2 echoed, which no Version 2 decoder
    /// can read; a Version 2 server sends `RDMA2_ERROR`.
    VersionError {
        /// The probe's XID.
        xid: u32,
        /// The versions the server speaks.
        range: VersionRange,
    },
}

/// Decodes a message a client received while its connection speaks `revision`; `probing`
/// while the first Version 2 message is unanswered, when an `ERR_VERS` of either layout is
/// expected.
///
/// The two layouts of a short error overlap: the C svcrdma's `ERR_VERS` (`xid`, 2, credit,
/// `RDMA_ERROR`, `ERR_VERS`, 1, 1) reads in the Version 2 layout as `RDMA2_F_RESPONSE` and an
/// `RDMA2_ERR_VERS` cut short, and a Version 2 `RDMA2_ERR_SEGMENTS` (`xid`, 2, credit,
/// `RDMA2_ERROR`, `RDMA2_F_RESPONSE`, 8, max) reads in the Version 1 layout as an `ERR_VERS`.
/// So the message is read in the layout its `rdma_vers` names first, and only a message that
/// layout cannot read is taken for an `ERR_VERS` in the Version 1 layout.
pub fn decode_at_client<'a>(
    buf: &'a [u8],
    revision: Revision,
    probing: bool,
    limits: &ChunkLimits,
) -> Result<Received<'a>, Fault> {
    let decoded = decode(buf, limits);
    if !probing || revision == Revision::V1 {
        return decoded.map(Received::Header);
    }
    match decoded {
        Ok(header) => match header.body {
            Body::Error(
                ErrorBody::V1(V1Error::Vers { low, high })
                | ErrorBody::V2(V2Error::Vers { low, high }),
            ) if low <= high => Ok(Received::VersionError {
                xid: header.xid,
                range: VersionRange { low, high },
            }),
            _ => Ok(Received::Header(header)),
        },
        Err(fault) => match parse_version_error(buf) {
            Some((xid, range)) => Ok(Received::VersionError { xid, range }),
            None => Err(fault),
        },
    }
}

/// The RPC Call of a message a client received, if the message is a reverse-direction Call
/// sent whole inline, the form the Linux implementations use for NFSv4.1 callbacks (RFC 8167
/// section 4, draft section 4.5): a `Msg` without chunks nor continuation whose RPC XID is
/// `rdma_xid` and whose `msg_type` is CALL, with `RDMA2_F_RESPONSE` clear in Version 2.
/// `None` for anything else, which goes the forward way.
pub fn inline_reverse_call<'a>(header: &Header<'a>) -> Option<&'a [u8]> {
    inline_reverse(header, Endpoint::Client, Flow::ReverseCall)
}

/// The RPC Reply of a message a server received, if the message is the reply to one of its
/// reverse-direction Calls in the form [`inline_reverse_call`] takes: a `Msg` without chunks
/// nor continuation whose RPC XID is `rdma_xid` and whose `msg_type` is REPLY, with
/// `RDMA2_F_RESPONSE` set in Version 2. `None` for anything else, which goes the forward way
/// (where a Reply is no call).
pub fn inline_reverse_reply<'a>(header: &Header<'a>) -> Option<&'a [u8]> {
    inline_reverse(header, Endpoint::Server, Flow::ReverseReply)
}

/// Whether `header`, received by `local`, is (part of) a reverse-direction message in
/// Version 2: an `RDMA2_MSG` whose `RDMA2_F_RESPONSE` says a Call for a client (a callback)
/// or a Reply for a server (the reply to one), whole or a fragment of a Continued one (draft
/// section 4.4.2). Its payload is classified once whole ([`reverse_payload`]).
pub fn is_reverse_v2(header: &Header<'_>, local: Endpoint) -> bool {
    let reverse_response = match local {
        Endpoint::Client => false,
        Endpoint::Server => true,
    };
    matches!(header.body, Body::Msg { .. }) && header.response == Some(reverse_response)
}

/// The RPC message `payload` (a reverse-direction message reassembled from a Continued
/// sequence of `rdma_xid` `xid`) if `local` receives it as one: a Call for a client, a Reply
/// for a server, whose RPC XID is `xid`. `None` for anything else.
pub fn reverse_payload(local: Endpoint, xid: u32, payload: &[u8]) -> Option<&[u8]> {
    let (response, want) = match local {
        Endpoint::Client => (false, Flow::ReverseCall),
        Endpoint::Server => (true, Flow::ReverseReply),
    };
    (classify_v2(local, xid, response, Some(payload)) == Ok(want)).then_some(payload)
}

/// The RPC message of `header` if `local` receives it as a `want` sent whole inline.
fn inline_reverse<'a>(header: &Header<'a>, local: Endpoint, want: Flow) -> Option<&'a [u8]> {
    let Body::Msg {
        chunks,
        payload,
        more: false,
    } = header.body
    else {
        return None;
    };
    if !chunks.is_empty() {
        return None;
    }
    let flow = match header.response {
        None => classify_v1(local, header.xid, payload),
        Some(response) => classify_v2(local, header.xid, response, Some(payload)),
    };
    (flow == Ok(want)).then_some(payload)
}

/// The version a server accepts for a message with `rdma_vers` `vers` and XID `xid` on a
/// connection whose version is `settled` (by its first message of a supported version), or
/// the `ERR_VERS` to answer:
///
/// - a version outside `supported` (the server's) is told the whole of `supported`, in the
///   connection's layout once settled, before that in the Version 2 layout for versions
///   from 2 up (which share its prefix) and in RFC 8166's below;
/// - a supported version other than the settled one is told the settled one alone, in its
///   layout: the client must not change versions on a connection (draft section 4.2.3.3).
///
/// The reply echoes `xid` and `vers` (RFC 8166 section 5.3.2, draft section 7).
pub fn admit(
    xid: u32,
    vers: u32,
    settled: Option<Version>,
    supported: VersionRange,
) -> Result<Version, ErrorReply> {
    let known = Version::from_u32(vers).filter(|_| supported.contains(vers));
    let (range, layout) = match (known, settled) {
        (Some(v), None) => return Ok(v),
        (Some(v), Some(s)) if v == s => return Ok(v),
        (Some(_), Some(s)) => (VersionRange::only(s), s),
        (None, Some(s)) => (supported, s),
        (None, None) if vers >= RPCRDMA_VERSION_2 => (supported, Version::V2),
        (None, None) => (supported, Version::V1),
    };
    let (low, high) = (range.low, range.high);
    let body = match layout {
        Version::V1 => ErrorBody::V1(V1Error::Vers { low, high }),
        Version::V2 => ErrorBody::V2(V2Error::Vers { low, high }),
    };
    Err(ErrorReply { xid, vers, body })
}

/// The fault a server answers a header with whose first words say `xid` and `vers`: the
/// [`admit`] rules, or a discard for a message too short to trust.
pub fn admit_message(
    buf: &[u8],
    settled: Option<Version>,
    supported: VersionRange,
) -> Result<Version, Fault> {
    let common = CommonHeader::peek(buf).ok_or(Fault::Discard(Violation::ShortHeader))?;
    admit(common.xid, common.vers, settled, supported).map_err(|reply| Fault::Reply {
        reply,
        violation: Violation::UnsupportedVersion(common.vers),
    })
}

/// Checks what a Responder checks of a decoded call beyond the structure of its header:
///
/// - the RPC message of a `Msg` starts with the header's `rdma_xid`;
/// - in Version 2, `RDMA2_F_RESPONSE` is clear, as the message is a call (draft section
///   6.2.2.1);
/// - each Read chunk of a `Msg` other than a Position Zero one lies within the Payload
///   stream it is reinserted into.
///
/// The fault is `ERR_CHUNK` in Version 1, `RDMA2_ERR_BAD_XDR` in Version 2.
pub fn check_call(header: &Header<'_>) -> Result<(), Fault> {
    match header.body {
        Body::Msg { payload, .. } => check_call_payload(header, payload),
        _ => Ok(()),
    }
}

/// [`check_call`] for a `Msg` whose RPC message is `payload` rather than the bytes after the
/// header: the final message of a continued call (draft section 4.4.2), checked with the whole
/// reassembled message and its own chunk lists (the only ones of the sequence).
pub fn check_call_payload(header: &Header<'_>, payload: &[u8]) -> Result<(), Fault> {
    let Body::Msg { chunks, .. } = header.body else {
        return Ok(());
    };
    let fault = |v| Fault::Reply {
        reply: refusal(header.revision, header.xid, Refusal::Malformed),
        violation: v,
    };
    let mut r = XdrReader::new(payload);
    if r.u32() != Ok(header.xid) {
        return Err(fault(Violation::XidMismatch));
    }
    if header.response == Some(true) || (header.response.is_some() && r.u32() != Ok(0)) {
        return Err(fault(Violation::DirectionMismatch));
    }
    chunks
        .check_read_positions(payload.len())
        .map_err(|position| fault(Violation::ReadPositionOutside(position)))
}

/// Why a server does not serve a call or cannot send its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The header or its chunks are inconsistent (e.g. a `NoMsg` call without a Position
    /// Zero Read chunk, a Read chunk beyond the inline part).
    Malformed,
    /// More Read chunks than the server takes, `max` of them.
    ReadChunks {
        /// The most Read chunks the server takes per call.
        max: u32,
    },
    /// The call needs more than the server's own resources allow (a Read chunk longer
    /// than it reads, more pages than a request has).
    System,
    /// A continued message (`RDMA2_F_MORE`), which the server does not reassemble.
    Continuation,
    /// The reply's bulk data does not fit the first Write chunk.
    WriteResource {
        /// The bytes it needs.
        needed: u32,
    },
    /// The reply fits neither inline nor the Reply chunk.
    ReplyResource {
        /// The bytes it needs.
        needed: u32,
    },
}

/// The error answering call `xid` for `why`, in `revision`'s layout: Version 1 has only
/// `ERR_CHUNK` for all of them; Version 2 has a code for each (draft section 7).
pub fn refusal(revision: Revision, xid: u32, why: Refusal) -> ErrorReply {
    let body = match revision {
        Revision::V1 => ErrorBody::V1(V1Error::Chunk),
        Revision::V2Draft01 => ErrorBody::V2(match why {
            Refusal::Malformed => V2Error::BadXdr,
            Refusal::ReadChunks { max } => V2Error::ReadChunks { max_chunks: max },
            Refusal::System => V2Error::System,
            Refusal::Continuation => V2Error::InvalCont,
            Refusal::WriteResource { needed } => V2Error::WriteResource {
                chunk_index: 1,
                length_needed: needed,
            },
            Refusal::ReplyResource { needed } => V2Error::ReplyResource {
                length_needed: needed,
            },
        }),
    };
    ErrorReply {
        xid,
        vers: revision.vers(),
        body,
    }
}
