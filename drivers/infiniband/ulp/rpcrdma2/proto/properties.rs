// SPDX-License-Identifier: GPL-2.0

//! Version 2 transport properties (draft section 5).
//!
//! A property is a `rpcrdma2_propval`: a code point and a nominally opaque
//! `rdma_data` whose contents are the XDR encoding of the property's type.
//! An empty `rdma_data` means "the default value". Unknown code points are
//! skipped; a known one whose data does not decode as its type, or whose
//! value makes no sense, earns `RDMA2_ERR_BAD_PROPVAL` and the whole set is
//! rejected without applying any of it (section 7.2.2).
//!
//! [`PropSet`] is a validated view over the received set; [`PeerProperties`]
//! holds the values in effect.

use super::xdr::{EncodeError, XdrError, XdrReader, XdrWriter};

/// `RDMA2_PROPID_SBSIZ`: maximum Send size.
pub const RDMA2_PROPID_SBSIZ: u32 = 1;
/// `RDMA2_PROPID_RBSIZ`: receive buffer size.
pub const RDMA2_PROPID_RBSIZ: u32 = 2;
/// `RDMA2_PROPID_RSSIZ`: maximum RDMA segment size.
pub const RDMA2_PROPID_RSSIZ: u32 = 3;
/// `RDMA2_PROPID_RCSIZ`: maximum RDMA segment count.
pub const RDMA2_PROPID_RCSIZ: u32 = 4;
/// `RDMA2_PROPID_BRS`: reverse-direction support.
pub const RDMA2_PROPID_BRS: u32 = 5;
/// `RDMA2_PROPID_HOSTAUTH`: host authentication material.
pub const RDMA2_PROPID_HOSTAUTH: u32 = 6;

/// `RDMA2_RVRSDIR_NONE`.
pub const RDMA2_RVRSDIR_NONE: u32 = 0;
/// `RDMA2_RVRSDIR_SIMPLE`.
pub const RDMA2_RVRSDIR_SIMPLE: u32 = 1;
/// `RDMA2_RVRSDIR_CONT`.
///
/// Erratum: the XDR listing of draft -01 (section 8.3) gives 1, a duplicate
/// of `RDMA2_RVRSDIR_SIMPLE`; section 5.2.5 gives 2. We use 2.
pub const RDMA2_RVRSDIR_CONT: u32 = 2;
/// `RDMA2_RVRSDIR_GENL`.
pub const RDMA2_RVRSDIR_GENL: u32 = 3;

/// Default of `SBSIZ` and `RBSIZ` (and the v2 default inline threshold).
pub const DEFAULT_BUFFER_SIZE: u32 = 4096;
/// Default of `RSSIZ`.
pub const DEFAULT_MAX_SEGMENT_SIZE: u32 = 1_048_576;
/// Default of `RCSIZ`.
pub const DEFAULT_MAX_SEGMENT_COUNT: u32 = 16;
/// Smallest acceptable `SBSIZ`/`RBSIZ`: the v1 default inline threshold,
/// which bounds every first message on a connection anyway.
pub const MIN_BUFFER_SIZE: u32 = 1024;
/// Largest host-authentication blob accepted in one property.
pub const MAX_HOSTAUTH_LEN: usize = 65536;

/// Reverse-direction support levels (`rpcrdma2_prop_brs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum ReverseSupport {
    /// No reverse-direction operation.
    #[default]
    None,
    /// Simple Format without chunks only.
    Simple,
    /// Simple or Continued Format, without chunks.
    Continued,
    /// Same as the forward direction, chunks included.
    General,
}

impl ReverseSupport {
    /// The wire value.
    pub const fn as_u32(self) -> u32 {
        match self {
            Self::None => RDMA2_RVRSDIR_NONE,
            Self::Simple => RDMA2_RVRSDIR_SIMPLE,
            Self::Continued => RDMA2_RVRSDIR_CONT,
            Self::General => RDMA2_RVRSDIR_GENL,
        }
    }

    /// Maps a wire value; unknown levels are `None`.
    pub const fn from_u32(v: u32) -> Option<Self> {
        match v {
            RDMA2_RVRSDIR_NONE => Some(Self::None),
            RDMA2_RVRSDIR_SIMPLE => Some(Self::Simple),
            RDMA2_RVRSDIR_CONT => Some(Self::Continued),
            RDMA2_RVRSDIR_GENL => Some(Self::General),
            _ => None,
        }
    }
}

/// Why a property value was rejected (`RDMA2_ERR_BAD_PROPVAL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropError {
    /// The property set itself is malformed or truncated.
    Xdr(XdrError),
    /// A known property whose data is not exactly its XDR type.
    BadLength {
        /// The property code.
        which: u32,
    },
    /// A known property whose value is out of range.
    BadValue {
        /// The property code.
        which: u32,
        /// The offending value.
        value: u32,
    },
}

impl From<XdrError> for PropError {
    fn from(e: XdrError) -> Self {
        Self::Xdr(e)
    }
}

/// One raw `rpcrdma2_propval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PropVal<'a> {
    /// `rdma_which`.
    pub which: u32,
    /// `rdma_data` (without padding).
    pub data: &'a [u8],
}

/// A property interpreted by its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Property<'a> {
    /// `SBSIZ`.
    SendSize(u32),
    /// `RBSIZ`.
    RecvBufferSize(u32),
    /// `RSSIZ`.
    MaxSegmentSize(u32),
    /// `RCSIZ`.
    MaxSegmentCount(u32),
    /// `BRS`.
    Reverse(ReverseSupport),
    /// `HOSTAUTH`: the authentication material.
    HostAuth(&'a [u8]),
    /// A code point this implementation does not know; ignored.
    Unknown(PropVal<'a>),
}

fn u32_value(pv: &PropVal<'_>, default: u32) -> Result<u32, PropError> {
    match pv.data {
        [] => Ok(default),
        [a, b, c, d] => Ok(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => Err(PropError::BadLength { which: pv.which }),
    }
}

impl<'a> PropVal<'a> {
    /// Interprets and validates the value by its code point.
    pub fn interpret(&self) -> Result<Property<'a>, PropError> {
        let bad = |value| PropError::BadValue {
            which: self.which,
            value,
        };
        Ok(match self.which {
            RDMA2_PROPID_SBSIZ | RDMA2_PROPID_RBSIZ => {
                let v = u32_value(self, DEFAULT_BUFFER_SIZE)?;
                if v < MIN_BUFFER_SIZE {
                    return Err(bad(v));
                }
                if self.which == RDMA2_PROPID_SBSIZ {
                    Property::SendSize(v)
                } else {
                    Property::RecvBufferSize(v)
                }
            }
            RDMA2_PROPID_RSSIZ => {
                let v = u32_value(self, DEFAULT_MAX_SEGMENT_SIZE)?;
                if v == 0 {
                    return Err(bad(v));
                }
                Property::MaxSegmentSize(v)
            }
            RDMA2_PROPID_RCSIZ => {
                Property::MaxSegmentCount(u32_value(self, DEFAULT_MAX_SEGMENT_COUNT)?)
            }
            RDMA2_PROPID_BRS => {
                let v = u32_value(self, RDMA2_RVRSDIR_NONE)?;
                Property::Reverse(ReverseSupport::from_u32(v).ok_or_else(|| bad(v))?)
            }
            RDMA2_PROPID_HOSTAUTH => {
                if self.data.is_empty() {
                    return Ok(Property::HostAuth(&[]));
                }
                let mut r = XdrReader::new(self.data);
                let blob = r
                    .opaque(MAX_HOSTAUTH_LEN)
                    .map_err(|_| PropError::BadLength { which: self.which })?;
                if r.remaining() != 0 {
                    return Err(PropError::BadLength { which: self.which });
                }
                Property::HostAuth(blob)
            }
            _ => Property::Unknown(*self),
        })
    }
}

/// Most properties accepted in one `rpcrdma2_propset`.
pub const MAX_PROPS_PER_SET: u32 = 64;
/// Most bytes of `rdma_data` accepted in one property.
pub const MAX_PROP_DATA: usize = MAX_HOSTAUTH_LEN + 4;

/// A validated `rpcrdma2_propset`, borrowed from the received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PropSet<'a> {
    entries: &'a [u8],
    count: u32,
}

impl<'a> PropSet<'a> {
    /// Decodes the set and validates every known property in it.
    pub fn decode(r: &mut XdrReader<'a>) -> Result<Self, PropError> {
        Self::decode_limited(r, MAX_PROPS_PER_SET)
    }

    /// [`PropSet::decode`] with a caller-chosen limit on the number of
    /// properties (for a set reassembled from several messages).
    pub fn decode_limited(r: &mut XdrReader<'a>, max_props: u32) -> Result<Self, PropError> {
        let count = r.array_count(8, max_props)?;
        let start = r.rest();
        for _ in 0..count {
            let pv = decode_propval(r)?;
            pv.interpret()?;
        }
        let used = start.len().saturating_sub(r.remaining());
        Ok(Self {
            entries: start.get(..used).unwrap_or(&[]),
            count,
        })
    }

    /// Number of properties in the set.
    pub const fn len(&self) -> u32 {
        self.count
    }

    /// Whether the set is empty.
    pub const fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The encoded `rpcrdma2_propval` entries, without the count word.
    pub const fn entries(&self) -> &'a [u8] {
        self.entries
    }

    /// Iterates over the raw properties.
    pub fn iter(&self) -> PropIter<'a> {
        PropIter {
            r: XdrReader::new(self.entries),
        }
    }

    /// Iterates over the interpreted properties (already validated).
    pub fn properties(&self) -> impl Iterator<Item = Property<'a>> + 'a {
        self.iter().filter_map(|pv| pv.interpret().ok())
    }
}

fn decode_propval<'a>(r: &mut XdrReader<'a>) -> Result<PropVal<'a>, PropError> {
    let which = r.u32()?;
    let data = r.opaque(MAX_PROP_DATA)?;
    Ok(PropVal { which, data })
}

/// Iterator over a [`PropSet`].
#[derive(Debug, Clone)]
pub struct PropIter<'a> {
    r: XdrReader<'a>,
}

impl<'a> Iterator for PropIter<'a> {
    type Item = PropVal<'a>;

    fn next(&mut self) -> Option<PropVal<'a>> {
        if self.r.remaining() == 0 {
            return None;
        }
        decode_propval(&mut self.r).ok()
    }
}

impl Property<'_> {
    /// Encodes this property as a `rpcrdma2_propval`.
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), EncodeError> {
        let word = |w: &mut XdrWriter<'_>, which: u32, v: u32| -> Result<(), EncodeError> {
            w.put_u32(which)?;
            w.put_opaque(&v.to_be_bytes())
        };
        match *self {
            Self::SendSize(v) => word(w, RDMA2_PROPID_SBSIZ, v),
            Self::RecvBufferSize(v) => word(w, RDMA2_PROPID_RBSIZ, v),
            Self::MaxSegmentSize(v) => word(w, RDMA2_PROPID_RSSIZ, v),
            Self::MaxSegmentCount(v) => word(w, RDMA2_PROPID_RCSIZ, v),
            Self::Reverse(v) => word(w, RDMA2_PROPID_BRS, v.as_u32()),
            Self::HostAuth(blob) => {
                let padded = super::xdr::roundup(blob.len()).ok_or(EncodeError::TooLong)?;
                let inner = padded.checked_add(4).ok_or(EncodeError::TooLong)?;
                w.put_u32(RDMA2_PROPID_HOSTAUTH)?;
                w.put_u32(u32::try_from(inner).map_err(|_| EncodeError::TooLong)?)?;
                w.put_opaque(blob)
            }
            Self::Unknown(pv) => {
                w.put_u32(pv.which)?;
                w.put_opaque(pv.data)
            }
        }
    }

    /// Encoded size in bytes, `None` on overflow.
    pub fn encoded_len(&self) -> Option<usize> {
        match *self {
            Self::HostAuth(blob) => super::xdr::roundup(blob.len())?.checked_add(12),
            Self::Unknown(pv) => super::xdr::roundup(pv.data.len())?.checked_add(8),
            _ => Some(12),
        }
    }
}

/// Encodes a `rpcrdma2_propset`.
pub fn encode_propset(w: &mut XdrWriter<'_>, props: &[Property<'_>]) -> Result<(), EncodeError> {
    w.put_u32(u32::try_from(props.len()).map_err(|_| EncodeError::TooLong)?)?;
    for p in props {
        p.encode(w)?;
    }
    Ok(())
}

/// Transport property values in effect for one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerProperties {
    /// Maximum Send payload size (`SBSIZ`).
    pub send_size: u32,
    /// Minimum size of pre-posted receive buffers (`RBSIZ`).
    pub recv_buffer_size: u32,
    /// Maximum RDMA segment size (`RSSIZ`).
    pub max_segment_size: u32,
    /// Maximum RDMA segments in a Requester's header (`RCSIZ`).
    pub max_segment_count: u32,
    /// Reverse-direction support (`BRS`).
    pub reverse: ReverseSupport,
    /// Whether host-authentication material was received.
    pub host_auth_seen: bool,
}

impl PeerProperties {
    /// The defaults of draft table 1.
    pub const DEFAULT: Self = Self {
        send_size: DEFAULT_BUFFER_SIZE,
        recv_buffer_size: DEFAULT_BUFFER_SIZE,
        max_segment_size: DEFAULT_MAX_SEGMENT_SIZE,
        max_segment_count: DEFAULT_MAX_SEGMENT_COUNT,
        reverse: ReverseSupport::None,
        host_auth_seen: false,
    };

    /// Applies a validated set. Later values of the same property replace
    /// earlier ones; unknown properties are ignored.
    pub fn apply(&mut self, set: &PropSet<'_>) {
        for p in set.properties() {
            match p {
                Property::SendSize(v) => self.send_size = v,
                Property::RecvBufferSize(v) => self.recv_buffer_size = v,
                Property::MaxSegmentSize(v) => self.max_segment_size = v,
                Property::MaxSegmentCount(v) => self.max_segment_count = v,
                Property::Reverse(v) => self.reverse = v,
                Property::HostAuth(_) => self.host_auth_seen = true,
                Property::Unknown(_) => {}
            }
        }
    }
}

impl Default for PeerProperties {
    fn default() -> Self {
        Self::DEFAULT
    }
}
