// SPDX-License-Identifier: GPL-2.0

//! Inline thresholds: the largest message that may be sent with one Send.
//!
//! Each connection has a *call* threshold (Requester to Responder) and a
//! *reply* threshold (Responder to Requester). Version 1 defaults both to
//! 1024 bytes and may raise them with RFC 8797 private data; version 2
//! defaults to 4096 (draft section 4.2.2) and may change them with the
//! `SBSIZ`/`RBSIZ` transport properties. In every case what one side may
//! send is bounded by both its own Send size and the peer's Receive size.

use super::cm_private::CmPrivateData;
use super::properties::PeerProperties;
use super::role::Role;
use super::v1::V1_DEFAULT_INLINE;

/// Version 2 default inline threshold.
pub const V2_DEFAULT_INLINE: u32 = 4096;

/// The two inline thresholds of a connection, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineThresholds {
    /// Requester to Responder.
    pub call: u32,
    /// Responder to Requester.
    pub reply: u32,
}

impl InlineThresholds {
    /// Version 1 defaults.
    pub const V1_DEFAULT: Self = Self {
        call: V1_DEFAULT_INLINE,
        reply: V1_DEFAULT_INLINE,
    };
    /// Version 2 defaults.
    pub const V2_DEFAULT: Self = Self {
        call: V2_DEFAULT_INLINE,
        reply: V2_DEFAULT_INLINE,
    };

    /// The threshold for what an endpoint of `role` sends.
    pub const fn send(&self, role: Role) -> u32 {
        match role {
            Role::Requester => self.call,
            Role::Responder => self.reply,
        }
    }

    /// The threshold for what an endpoint of `role` receives.
    pub const fn receive(&self, role: Role) -> u32 {
        match role {
            Role::Requester => self.reply,
            Role::Responder => self.call,
        }
    }

    fn from_directions(role: Role, send: u32, receive: u32) -> Self {
        match role {
            Role::Requester => Self {
                call: send,
                reply: receive,
            },
            Role::Responder => Self {
                call: receive,
                reply: send,
            },
        }
    }

    /// Version 1 thresholds for an endpoint of `role` with local Send and
    /// Receive capacities `local_send`/`local_recv`, given the peer's RFC 8797
    /// private data if it sent any (otherwise the peer is assumed to handle
    /// exactly the 1024-byte default).
    pub fn v1(role: Role, local_send: u32, local_recv: u32, peer: Option<&CmPrivateData>) -> Self {
        let (peer_send, peer_recv) = match peer {
            Some(p) => (p.send_size, p.recv_size),
            None => (V1_DEFAULT_INLINE, V1_DEFAULT_INLINE),
        };
        Self::from_directions(role, local_send.min(peer_recv), local_recv.min(peer_send))
    }

    /// Version 2 thresholds for an endpoint of `role`, from the local and
    /// peer transport properties (defaults stand in for absent ones).
    pub fn v2(role: Role, local: &PeerProperties, peer: &PeerProperties) -> Self {
        Self::from_directions(
            role,
            local.send_size.min(peer.recv_buffer_size),
            local.recv_buffer_size.min(peer.send_size),
        )
    }
}
