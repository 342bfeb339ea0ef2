// SPDX-License-Identifier: GPL-2.0

//! The catalogue of iWARP errors: every layer, error type and error code a
//! TERMINATE can report.
//!
//! [`TermError`] lists every layer/type/code triple defined by RFC 5040
//! (RDMAP), RFC 5041 (DDP), RFC 5044 (MPA) and RFC 6581 (enhanced MPA);
//! RFC 7306 reuses the RDMAP codes. Every decoder error in this crate maps to
//! one of them, and [`TermError::echo_flags`] tells which headers of the
//! offending segment a TERMINATE reporting it echoes (RFC 5040 section 4.8).
//!
//! The catalogue depends on nothing else in `proto`: the DDP, RDMAP and atomic
//! header decoders name their errors with it, while the TERMINATE message
//! ([`super::terminate`]), which echoes those headers, depends on them.

/// The protocol layer a TERMINATE blames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Layer {
    /// RDMAP (RFC 5040).
    Rdmap = 0,
    /// DDP (RFC 5041).
    Ddp = 1,
    /// The lower layer protocol, i.e. MPA over TCP (RFC 5044).
    Llp = 2,
}

/// Every error a TERMINATE can carry, as defined by RFC 5040, 5041, 5044 and
/// 6581.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermError {
    /// RDMAP local catastrophic error (0/0/0x00).
    RdmapLocalCatastrophic,
    /// RDMAP remote protection: invalid STag (0/1/0x00).
    RdmapInvalidStag,
    /// RDMAP remote protection: base or bounds violation (0/1/0x01).
    RdmapBaseBounds,
    /// RDMAP remote protection: access rights violation (0/1/0x02).
    RdmapAccessRights,
    /// RDMAP remote protection: STag not associated with RDMAP stream (0/1/0x03).
    RdmapStagNotAssociated,
    /// RDMAP remote protection: TO wrap (0/1/0x04).
    RdmapToWrap,
    /// RDMAP remote protection: STag cannot be invalidated (0/1/0x09).
    RdmapProtectionCannotInvalidate,
    /// RDMAP remote protection: unspecified error (0/1/0xFF).
    RdmapProtectionUnspecified,
    /// RDMAP remote operation: invalid RDMAP version (0/2/0x05).
    RdmapInvalidVersion,
    /// RDMAP remote operation: unexpected opcode (0/2/0x06).
    RdmapUnexpectedOpcode,
    /// RDMAP remote operation: catastrophic error, localized to the RDMAP
    /// stream (0/2/0x07).
    RdmapCatastrophicStream,
    /// RDMAP remote operation: catastrophic error, global (0/2/0x08).
    RdmapCatastrophicGlobal,
    /// RDMAP remote operation: STag cannot be invalidated (0/2/0x09).
    RdmapOperationCannotInvalidate,
    /// RDMAP remote operation: unspecified error (0/2/0xFF).
    RdmapOperationUnspecified,
    /// DDP local catastrophic error (1/0/0x00).
    DdpLocalCatastrophic,
    /// DDP tagged buffer: invalid STag (1/1/0x00).
    DdpInvalidStag,
    /// DDP tagged buffer: base or bounds violation (1/1/0x01).
    DdpBaseBounds,
    /// DDP tagged buffer: STag not associated with DDP stream (1/1/0x02).
    DdpStagNotAssociated,
    /// DDP tagged buffer: TO wrap (1/1/0x03).
    DdpToWrap,
    /// DDP tagged buffer: invalid DDP version (1/1/0x04).
    DdpTaggedInvalidVersion,
    /// DDP untagged buffer: invalid QN (1/2/0x01).
    DdpInvalidQn,
    /// DDP untagged buffer: invalid MSN, no buffer available (1/2/0x02).
    DdpMsnNoBuffer,
    /// DDP untagged buffer: invalid MSN, MSN range not valid (1/2/0x03).
    DdpMsnRange,
    /// DDP untagged buffer: invalid MO (1/2/0x04).
    DdpInvalidMo,
    /// DDP untagged buffer: message too long for available buffer (1/2/0x05).
    DdpMessageTooLong,
    /// DDP untagged buffer: invalid DDP version (1/2/0x06).
    DdpUntaggedInvalidVersion,
    /// MPA: TCP connection closed, terminated or lost (2/0/0x01).
    MpaTcpLost,
    /// MPA: received CRC does not match (2/0/0x02).
    MpaCrc,
    /// MPA: marker and FPDU start pointer mismatch (2/0/0x03).
    MpaMarker,
    /// MPA: invalid MPA Request or Reply frame (2/0/0x04).
    MpaInvalidRequestReply,
    /// Enhanced MPA: local catastrophic error (2/0/0x05, RFC 6581).
    MpaLocalCatastrophic,
    /// Enhanced MPA: insufficient IRD resources (2/0/0x06, RFC 6581).
    MpaInsufficientIrd,
    /// Enhanced MPA: no matching RTR option (2/0/0x07, RFC 6581).
    MpaNoMatchingRtr,
}

/// All variants of [`TermError`], for tables and tests.
pub const ALL_TERM_ERRORS: [TermError; 33] = [
    TermError::RdmapLocalCatastrophic,
    TermError::RdmapInvalidStag,
    TermError::RdmapBaseBounds,
    TermError::RdmapAccessRights,
    TermError::RdmapStagNotAssociated,
    TermError::RdmapToWrap,
    TermError::RdmapProtectionCannotInvalidate,
    TermError::RdmapProtectionUnspecified,
    TermError::RdmapInvalidVersion,
    TermError::RdmapUnexpectedOpcode,
    TermError::RdmapCatastrophicStream,
    TermError::RdmapCatastrophicGlobal,
    TermError::RdmapOperationCannotInvalidate,
    TermError::RdmapOperationUnspecified,
    TermError::DdpLocalCatastrophic,
    TermError::DdpInvalidStag,
    TermError::DdpBaseBounds,
    TermError::DdpStagNotAssociated,
    TermError::DdpToWrap,
    TermError::DdpTaggedInvalidVersion,
    TermError::DdpInvalidQn,
    TermError::DdpMsnNoBuffer,
    TermError::DdpMsnRange,
    TermError::DdpInvalidMo,
    TermError::DdpMessageTooLong,
    TermError::DdpUntaggedInvalidVersion,
    TermError::MpaTcpLost,
    TermError::MpaCrc,
    TermError::MpaMarker,
    TermError::MpaInvalidRequestReply,
    TermError::MpaLocalCatastrophic,
    TermError::MpaInsufficientIrd,
    TermError::MpaNoMatchingRtr,
];

impl TermError {
    /// Returns the (layer, error type, error code) triple.
    pub const fn triple(self) -> (Layer, u8, u8) {
        use TermError::*;
        match self {
            RdmapLocalCatastrophic => (Layer::Rdmap, 0, 0x00),
            RdmapInvalidStag => (Layer::Rdmap, 1, 0x00),
            RdmapBaseBounds => (Layer::Rdmap, 1, 0x01),
            RdmapAccessRights => (Layer::Rdmap, 1, 0x02),
            RdmapStagNotAssociated => (Layer::Rdmap, 1, 0x03),
            RdmapToWrap => (Layer::Rdmap, 1, 0x04),
            RdmapProtectionCannotInvalidate => (Layer::Rdmap, 1, 0x09),
            RdmapProtectionUnspecified => (Layer::Rdmap, 1, 0xFF),
            RdmapInvalidVersion => (Layer::Rdmap, 2, 0x05),
            RdmapUnexpectedOpcode => (Layer::Rdmap, 2, 0x06),
            RdmapCatastrophicStream => (Layer::Rdmap, 2, 0x07),
            RdmapCatastrophicGlobal => (Layer::Rdmap, 2, 0x08),
            RdmapOperationCannotInvalidate => (Layer::Rdmap, 2, 0x09),
            RdmapOperationUnspecified => (Layer::Rdmap, 2, 0xFF),
            DdpLocalCatastrophic => (Layer::Ddp, 0, 0x00),
            DdpInvalidStag => (Layer::Ddp, 1, 0x00),
            DdpBaseBounds => (Layer::Ddp, 1, 0x01),
            DdpStagNotAssociated => (Layer::Ddp, 1, 0x02),
            DdpToWrap => (Layer::Ddp, 1, 0x03),
            DdpTaggedInvalidVersion => (Layer::Ddp, 1, 0x04),
            DdpInvalidQn => (Layer::Ddp, 2, 0x01),
            DdpMsnNoBuffer => (Layer::Ddp, 2, 0x02),
            DdpMsnRange => (Layer::Ddp, 2, 0x03),
            DdpInvalidMo => (Layer::Ddp, 2, 0x04),
            DdpMessageTooLong => (Layer::Ddp, 2, 0x05),
            DdpUntaggedInvalidVersion => (Layer::Ddp, 2, 0x06),
            MpaTcpLost => (Layer::Llp, 0, 0x01),
            MpaCrc => (Layer::Llp, 0, 0x02),
            MpaMarker => (Layer::Llp, 0, 0x03),
            MpaInvalidRequestReply => (Layer::Llp, 0, 0x04),
            MpaLocalCatastrophic => (Layer::Llp, 0, 0x05),
            MpaInsufficientIrd => (Layer::Llp, 0, 0x06),
            MpaNoMatchingRtr => (Layer::Llp, 0, 0x07),
        }
    }

    /// The layer field.
    pub const fn layer(self) -> Layer {
        self.triple().0
    }

    /// The error type field.
    pub const fn error_type(self) -> u8 {
        self.triple().1
    }

    /// The error code field.
    pub const fn error_code(self) -> u8 {
        self.triple().2
    }

    /// Looks up the error a received triple names, if it is a defined one.
    pub fn from_triple(layer: u8, error_type: u8, error_code: u8) -> Option<Self> {
        ALL_TERM_ERRORS.iter().copied().find(|e| {
            let (l, t, c) = e.triple();
            l as u8 == layer && t == error_type && c == error_code
        })
    }

    /// The header-control flags (M, D, R) a TERMINATE for this error sets when
    /// it echoes the offending segment, per RFC 5040 section 4.8: protection
    /// errors echo both headers, other RDMAP and DDP errors echo the DDP
    /// header, catastrophic, version and MPA errors echo nothing because the
    /// segment layout is unknown or irrelevant.
    pub const fn echo_flags(self) -> EchoFlags {
        use TermError::*;
        match self {
            RdmapInvalidStag
            | RdmapBaseBounds
            | RdmapAccessRights
            | RdmapStagNotAssociated
            | RdmapToWrap
            | RdmapProtectionCannotInvalidate
            | RdmapProtectionUnspecified => EchoFlags {
                segment_length: true,
                ddp_header: true,
                rdmap_header: true,
            },
            RdmapCatastrophicStream
            | RdmapCatastrophicGlobal
            | RdmapOperationCannotInvalidate
            | RdmapOperationUnspecified
            | DdpInvalidStag
            | DdpBaseBounds
            | DdpStagNotAssociated
            | DdpToWrap
            | DdpInvalidQn
            | DdpMsnNoBuffer
            | DdpMsnRange
            | DdpInvalidMo
            | DdpMessageTooLong => EchoFlags {
                segment_length: true,
                ddp_header: true,
                rdmap_header: false,
            },
            _ => EchoFlags {
                segment_length: false,
                ddp_header: false,
                rdmap_header: false,
            },
        }
    }
}

/// The M, D and R header-control bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EchoFlags {
    /// M: the DDP Segment Length field is valid.
    pub segment_length: bool,
    /// D: the terminated DDP header is included.
    pub ddp_header: bool,
    /// R: the terminated RDMA header is included.
    pub rdmap_header: bool,
}
