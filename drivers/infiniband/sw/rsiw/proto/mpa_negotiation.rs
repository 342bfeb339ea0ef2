// SPDX-License-Identifier: GPL-2.0

//! MPA connection setup decisions (RFC 5044 section 7.1, RFC 6581).
//!
//! The exchange of one MPA Request and one MPA Reply settles how the
//! connection will run: whether FPDUs carry a CRC, which MPA revision is
//! spoken, and, with enhanced connection establishment, the RDMA Read queue
//! depths (IRD/ORD) of both ends and the ready-to-receive (RTR) message of
//! the peer-to-peer model. The rules are intricate and entirely pure, so they
//! live here as two functions with explicit inputs and outputs instead of
//! being spread over the connection manager:
//!
//! - [`ResponderConfig::process_request`] turns a received request into a
//!   [`ResponderDecision`] (the reply to send and the local queue depths to
//!   configure) or a [`NegotiationError`] (reject, see
//!   [`ResponderConfig::encode_reject`]).
//! - [`InitiatorConfig::process_reply`] turns the reply to our request into
//!   an [`InitiatorOutcome`] or an error to report in a TERMINATE.
//!
//! Policies this implementation applies where the RFCs leave a choice:
//! markers are not supported (a peer asking for them is refused); the
//! responder sets its IRD to the initiator's ORD, capped by its resources,
//! and its ORD to what its ULP wants, capped by the initiator's IRD; the
//! initiator prefers a zero-length Write RTR, then Read, then Send.

use super::mpa::{
    encode_frame, EnhancedData, FrameKind, MpaFlags, MpaFrame, RtrKind, RtrKinds, NO_NEGOTIATION,
    REVISION_1, REVISION_2,
};
use super::term_error::TermError;
use super::wire::EncodeError;

/// How a side treats the MPA CRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrcPolicy {
    /// CRC must be used; a peer that refuses it is rejected.
    Required,
    /// CRC is used exactly when the peer asks for it (RFC 5044 default).
    Optional,
    /// CRC is never used; a peer that insists on it is rejected (the
    /// "strict" mode of the C siw driver; not RFC 5044 compliant).
    Disabled,
}

/// What to do with a local queue depth once negotiation is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueDepth {
    /// Keep the endpoint's current value (the peer sent 0x3FFF, or no
    /// enhanced negotiation took place: the ULP is in charge).
    Unchanged,
    /// Set the endpoint's value.
    Set(u16),
}

/// Why a connection setup failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NegotiationError {
    /// The peer speaks an MPA revision outside 1..=2 (or, in a reply, one
    /// higher than requested).
    UnsupportedRevision(u8),
    /// The peer requires markers, which are not supported.
    MarkersRequired,
    /// The peer insists on CRC while the local policy disables it.
    CrcRequiredByPeer,
    /// The reply turns CRC off although the request required it.
    CrcRefusedByPeer,
    /// An enhanced request reached a responder configured without RFC 6581.
    EnhancedNotSupported,
    /// The reply is enhanced iff the request was not (RFC 6581 section 10).
    EnhancedMismatch,
    /// The reply's connection model (flag A) differs from the request's.
    ConnectionModelMismatch,
    /// The peer's IRD cannot accommodate the ORD required, or the local
    /// resources cannot accommodate the peer's ORD.
    InsufficientIrd {
        /// The IRD (initiator) or ORD (responder) that would be required.
        required: u16,
    },
    /// No RTR indication is supported by both sides.
    NoMatchingRtr,
}

impl NegotiationError {
    /// The TERMINATE error (layer 2, type 0) RFC 5044 and RFC 6581 section 8
    /// prescribe: malformed or contradictory frames are code 4, insufficient
    /// IRD code 6, an RTR or connection model mismatch code 7 and purely
    /// local refusals code 5.
    pub const fn term(self) -> TermError {
        match self {
            Self::UnsupportedRevision(_)
            | Self::CrcRefusedByPeer
            | Self::EnhancedNotSupported
            | Self::EnhancedMismatch => TermError::MpaInvalidRequestReply,
            Self::MarkersRequired | Self::CrcRequiredByPeer => TermError::MpaLocalCatastrophic,
            Self::InsufficientIrd { .. } => TermError::MpaInsufficientIrd,
            Self::ConnectionModelMismatch | Self::NoMatchingRtr => TermError::MpaNoMatchingRtr,
        }
    }
}

/// The highest MPA revision a side speaks: 2 with enhanced connection
/// establishment, 1 without.
const fn highest_revision(enhanced: bool) -> u8 {
    if enhanced {
        REVISION_2
    } else {
        REVISION_1
    }
}

/// The RTR indications to put in enhanced data: only the peer-to-peer model
/// (flag A) carries them.
const fn rtr_for_model(peer_to_peer: bool, rtr: RtrKinds) -> RtrKinds {
    if peer_to_peer {
        rtr
    } else {
        RtrKinds::NONE
    }
}

fn check_revision(revision: u8, highest: u8) -> Result<(), NegotiationError> {
    if (REVISION_1..=highest).contains(&revision) {
        Ok(())
    } else {
        Err(NegotiationError::UnsupportedRevision(revision))
    }
}

/// The initiator's side of the negotiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitiatorConfig {
    /// CRC policy.
    pub crc: CrcPolicy,
    /// Use enhanced connection establishment (revision 2 with S set).
    pub enhanced: bool,
    /// IRD to offer (may be [`NO_NEGOTIATION`]).
    pub ird: u16,
    /// ORD to request (may be [`NO_NEGOTIATION`]).
    pub ord: u16,
    /// Largest IRD the local endpoint can be given.
    pub max_ird: u16,
    /// Request the peer-to-peer model (flag A).
    pub peer_to_peer: bool,
    /// RTR indications the initiator can send (B, C, D).
    pub rtr: RtrKinds,
    /// Take, and offer to send, FPDUs larger than one TCP segment
    /// ([`super::mpa::RESERVED_LARGE_FPDUS`]).
    pub large_fpdus: bool,
}

/// The initiator's result of a successful reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitiatorDecision {
    /// Whether FPDUs carry a CRC in both directions.
    pub use_crc: bool,
    /// The MPA revision in use.
    pub revision: u8,
    /// What to do with the local IRD.
    pub local_ird: QueueDepth,
    /// What to do with the local ORD.
    pub local_ord: QueueDepth,
    /// The responder's enhanced data, to pass to the ULP.
    pub peer: Option<EnhancedData>,
    /// The RTR message to send as the first FPDU (peer-to-peer model only).
    pub rtr: Option<RtrKind>,
    /// Both sides take FPDUs larger than one TCP segment, so they may be sent.
    pub large_fpdus: bool,
}

/// How the responder answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitiatorOutcome {
    /// The connection is accepted on these terms.
    Accepted(InitiatorDecision),
    /// The responder rejected the connection; its enhanced data, if any, is
    /// passed to the ULP (RFC 6581 section 9.1).
    Rejected {
        /// The responder's enhanced data.
        peer: Option<EnhancedData>,
    },
}

impl InitiatorConfig {
    /// The MPA revision the request carries.
    pub const fn revision(&self) -> u8 {
        highest_revision(self.enhanced)
    }

    /// The flags of the request.
    pub const fn request_flags(&self) -> MpaFlags {
        MpaFlags {
            markers: false,
            crc: matches!(self.crc, CrcPolicy::Required),
            reject: false,
            enhanced: self.enhanced,
            reserved: 0,
        }
        .with_large_fpdus(self.large_fpdus)
    }

    /// The enhanced data of the request, if enhanced.
    pub const fn request_enhanced(&self) -> Option<EnhancedData> {
        if !self.enhanced {
            return None;
        }
        Some(EnhancedData {
            ird: self.ird,
            ord: self.ord,
            peer_to_peer: self.peer_to_peer,
            rtr: rtr_for_model(self.peer_to_peer, self.rtr),
        })
    }

    /// Encodes the MPA Request frame into `out` and returns its length.
    pub fn encode_request(
        &self,
        out: &mut [u8],
        ulp_private_data: &[u8],
    ) -> Result<usize, EncodeError> {
        encode_frame(
            out,
            FrameKind::Request,
            self.request_flags(),
            self.revision(),
            self.request_enhanced().as_ref(),
            ulp_private_data,
        )
    }

    /// Decides on the reply to our request.
    pub fn process_reply(
        &self,
        reply: &MpaFrame<'_>,
    ) -> Result<InitiatorOutcome, NegotiationError> {
        let header = &reply.header;
        check_revision(header.revision, self.revision())?;
        if header.flags.reject {
            return Ok(InitiatorOutcome::Rejected {
                peer: reply.enhanced,
            });
        }
        if header.flags.markers {
            return Err(NegotiationError::MarkersRequired);
        }
        let use_crc = header.flags.crc;
        match self.crc {
            CrcPolicy::Disabled if use_crc => return Err(NegotiationError::CrcRequiredByPeer),
            CrcPolicy::Required if !use_crc => return Err(NegotiationError::CrcRefusedByPeer),
            _ => {}
        }
        let mut decision = InitiatorDecision {
            use_crc,
            revision: header.revision,
            local_ird: QueueDepth::Unchanged,
            local_ord: QueueDepth::Unchanged,
            peer: reply.enhanced,
            rtr: None,
            large_fpdus: self.large_fpdus && header.flags.large_fpdus(),
        };
        let (request, response) = match (self.request_enhanced(), reply.enhanced) {
            (None, None) => return Ok(InitiatorOutcome::Accepted(decision)),
            (Some(request), Some(response)) => (request, response),
            _ => return Err(NegotiationError::EnhancedMismatch),
        };

        // Our IRD must be at least the responder's ORD.
        if response.ord != NO_NEGOTIATION && request.ird != NO_NEGOTIATION {
            if response.ord > self.max_ird {
                return Err(NegotiationError::InsufficientIrd {
                    required: response.ord,
                });
            }
            decision.local_ird = QueueDepth::Set(request.ird.max(response.ord));
        }
        // Our ORD must be at most the responder's IRD.
        if response.ird != NO_NEGOTIATION && request.ord != NO_NEGOTIATION {
            decision.local_ord = QueueDepth::Set(request.ord.min(response.ird));
        }

        if request.peer_to_peer != response.peer_to_peer {
            return Err(NegotiationError::ConnectionModelMismatch);
        }
        if request.peer_to_peer {
            let mut common = request.rtr.intersection(&response.rtr);
            // A zero-length Read needs a slot in the responder's IRRQ.
            if response.ird == 0 {
                common.read = false;
            }
            decision.rtr = [RtrKind::Write, RtrKind::Read, RtrKind::Send]
                .into_iter()
                .find(|kind| common.contains(*kind));
            if decision.rtr.is_none() {
                return Err(NegotiationError::NoMatchingRtr);
            }
        }
        Ok(InitiatorOutcome::Accepted(decision))
    }
}

/// The responder's side of the negotiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponderConfig {
    /// CRC policy.
    pub crc: CrcPolicy,
    /// Support enhanced connection establishment (revision 2).
    pub enhanced: bool,
    /// Largest IRD the local endpoint can be given.
    pub max_ird: u16,
    /// ORD the local ULP would like.
    pub ord: u16,
    /// ORD the local ULP cannot do without (0 if none).
    pub min_ord: u16,
    /// RTR indications the responder can accept (B, C, D).
    pub rtr: RtrKinds,
    /// Take, and offer to send, FPDUs larger than one TCP segment
    /// ([`super::mpa::RESERVED_LARGE_FPDUS`]).
    pub large_fpdus: bool,
}

/// The responder's result of an acceptable request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponderDecision {
    /// Whether FPDUs carry a CRC in both directions.
    pub use_crc: bool,
    /// The MPA revision of the reply.
    pub revision: u8,
    /// The flags of the reply.
    pub reply_flags: MpaFlags,
    /// The enhanced data of the reply, if the request was enhanced.
    pub reply_enhanced: Option<EnhancedData>,
    /// What to do with the local IRD.
    pub local_ird: QueueDepth,
    /// What to do with the local ORD.
    pub local_ord: QueueDepth,
    /// The initiator's enhanced data, to pass to the ULP.
    pub peer: Option<EnhancedData>,
    /// The RTR indications the initiator may send as its first FPDU (empty
    /// in the client-server model).
    pub rtr_accepted: RtrKinds,
    /// Both sides take FPDUs larger than one TCP segment, so they may be sent.
    pub large_fpdus: bool,
}

impl ResponderDecision {
    /// Encodes the MPA Reply frame into `out` and returns its length.
    pub fn encode_reply(
        &self,
        out: &mut [u8],
        ulp_private_data: &[u8],
    ) -> Result<usize, EncodeError> {
        encode_frame(
            out,
            FrameKind::Reply,
            self.reply_flags,
            self.revision,
            self.reply_enhanced.as_ref(),
            ulp_private_data,
        )
    }
}

impl ResponderConfig {
    /// Decides on a received request.
    pub fn process_request(
        &self,
        request: &MpaFrame<'_>,
    ) -> Result<ResponderDecision, NegotiationError> {
        let header = &request.header;
        check_revision(header.revision, REVISION_2)?;
        if header.flags.markers {
            return Err(NegotiationError::MarkersRequired);
        }
        if header.flags.crc && self.crc == CrcPolicy::Disabled {
            return Err(NegotiationError::CrcRequiredByPeer);
        }
        let use_crc = header.flags.crc || self.crc == CrcPolicy::Required;
        let revision = header.revision.min(highest_revision(self.enhanced));
        let mut decision = ResponderDecision {
            use_crc,
            revision,
            reply_flags: MpaFlags {
                crc: use_crc,
                ..MpaFlags::default()
            }
            .with_large_fpdus(self.large_fpdus),
            reply_enhanced: None,
            local_ird: QueueDepth::Unchanged,
            local_ord: QueueDepth::Unchanged,
            peer: request.enhanced,
            rtr_accepted: RtrKinds::NONE,
            large_fpdus: self.large_fpdus && header.flags.large_fpdus(),
        };
        let Some(initiator) = request.enhanced else {
            return Ok(decision);
        };
        if !self.enhanced {
            return Err(NegotiationError::EnhancedNotSupported);
        }

        let mut reply = EnhancedData {
            ird: NO_NEGOTIATION,
            ord: NO_NEGOTIATION,
            peer_to_peer: initiator.peer_to_peer,
            rtr: RtrKinds::NONE,
        };
        if initiator.peer_to_peer {
            let mut supported = self.rtr;
            // A zero-length Read RTR needs at least one IRRQ slot here.
            if self.max_ird == 0 {
                supported.read = false;
            }
            let common = initiator.rtr.intersection(&supported);
            reply.rtr = if common.is_empty() { supported } else { common };
            if reply.rtr.is_empty() {
                return Err(NegotiationError::NoMatchingRtr);
            }
            decision.rtr_accepted = reply.rtr;
        }

        // Responder IRD: at least the initiator's ORD, within our resources.
        if initiator.ord != NO_NEGOTIATION {
            let mut ird = initiator.ord.min(self.max_ird);
            if reply.rtr.read && ird == 0 {
                ird = 1;
            }
            reply.ird = ird;
            decision.local_ird = QueueDepth::Set(ird);
        }
        // Responder ORD: what the ULP wants, at most the initiator's IRD.
        if initiator.ird != NO_NEGOTIATION {
            if self.min_ord > initiator.ird {
                return Err(NegotiationError::InsufficientIrd {
                    required: self.min_ord,
                });
            }
            let ord = self.ord.min(initiator.ird);
            reply.ord = ord;
            decision.local_ord = QueueDepth::Set(ord);
        }
        decision.revision = REVISION_2;
        decision.reply_flags.enhanced = true;
        decision.reply_enhanced = Some(reply);
        Ok(decision)
    }

    /// Encodes an MPA Reject frame for `request`, refused because of `error`,
    /// into `out` and returns its length. An enhanced request is answered
    /// with enhanced data carrying our IRD and ORD; for insufficient IRD the
    /// ORD field names the ORD we require (RFC 6581 section 9.1).
    pub fn encode_reject(
        &self,
        request: &MpaFrame<'_>,
        error: NegotiationError,
        out: &mut [u8],
        ulp_private_data: &[u8],
    ) -> Result<usize, EncodeError> {
        let revision = request
            .header
            .revision
            .clamp(REVISION_1, highest_revision(self.enhanced));
        let enhanced = match request.enhanced {
            Some(initiator) if self.enhanced && revision >= REVISION_2 => Some(EnhancedData {
                ird: self.max_ird.min(NO_NEGOTIATION),
                ord: match error {
                    NegotiationError::InsufficientIrd { required } => required,
                    _ => self.ord,
                }
                .min(NO_NEGOTIATION),
                peer_to_peer: initiator.peer_to_peer,
                rtr: rtr_for_model(initiator.peer_to_peer, self.rtr),
            }),
            _ => None,
        };
        let flags = MpaFlags {
            reject: true,
            crc: request.header.flags.crc && self.crc != CrcPolicy::Disabled,
            ..MpaFlags::default()
        };
        encode_frame(
            out,
            FrameKind::Reply,
            flags,
            revision,
            enhanced.as_ref(),
            ulp_private_data,
        )
    }
}
