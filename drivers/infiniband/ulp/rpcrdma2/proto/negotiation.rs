// SPDX-License-Identifier: GPL-2.0

//! Version negotiation at connection start (draft section 4.2.3).
//!
//! The client opens with a single version 2 message of at most 1024 bytes
//! (the v1 default inline threshold, so a v1-only server can receive it).
//! A v2 server answers in version 2; a v1-only server answers `ERR_VERS`
//! with the range it supports, and the client continues on that connection
//! in the highest common version. To avoid a negotiation loop the client
//! remembers, across reconnects, that the server lacks version 2 — also
//! when the probe was lost with the connection. The server keeps the
//! version of the first message it accepted for the life of the connection.
//!
//! A v1-only server (such as the kernel's C svcrdma) formats its `ERR_VERS`
//! in the v1 layout, without a flags word, and echoes the probe's
//! `rdma_vers`, so [`parse_version_error`] accepts both layouts.

use super::error::{ErrorBody, ErrorReply, V1Error, V2Error};
use super::v1::{RDMA_ERROR, V1_DEFAULT_INLINE};
use super::version::{Version, VersionRange};
use super::xdr::XdrReader;

/// Largest first message a client may send on a new connection.
pub const FIRST_MESSAGE_MAX: usize = V1_DEFAULT_INLINE as usize;

/// What the client remembers about a server between connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerVersionMemory {
    /// The server is known not to speak version 2.
    pub v2_unsupported: bool,
}

/// Why the client cannot proceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NegotiationError {
    /// The first message exceeds [`FIRST_MESSAGE_MAX`].
    FirstMessageTooLarge,
    /// Only one message may be outstanding until the server answers.
    AwaitingFirstReply,
    /// The server's range has no version in common with ours.
    NoCommonVersion,
    /// The server answered in a version other than the one negotiated.
    UnexpectedVersion(u32),
}

/// What the client learnt from a received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientOutcome {
    /// The version is settled (or already was).
    Established(Version),
    /// The server rejected the probe: continue in this older version. The
    /// probe's transaction is complete and must be retried by the caller.
    FallBack(Version),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientState {
    Idle(Version),
    Probing(Version),
    Established(Version),
}

/// The client side of version negotiation for one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientNegotiation {
    local: VersionRange,
    memory: ServerVersionMemory,
    state: ClientState,
}

impl ClientNegotiation {
    /// Starts a connection given the local range and what is remembered
    /// about the server.
    pub fn new(local: VersionRange, memory: ServerVersionMemory) -> Self {
        let start = if !memory.v2_unsupported && local.contains(Version::V2.as_u32()) {
            Version::V2
        } else {
            Version::V1
        };
        Self {
            local,
            memory,
            state: ClientState::Idle(start),
        }
    }

    /// The version to put in outgoing headers.
    pub const fn version(&self) -> Version {
        match self.state {
            ClientState::Idle(v) | ClientState::Probing(v) | ClientState::Established(v) => v,
        }
    }

    /// Whether the version is settled.
    pub const fn is_established(&self) -> bool {
        matches!(self.state, ClientState::Established(_))
    }

    /// What to remember for the next connection to this server.
    pub const fn memory(&self) -> ServerVersionMemory {
        self.memory
    }

    /// Checks and records a Send of `len` bytes.
    pub fn on_send(&mut self, len: usize) -> Result<Version, NegotiationError> {
        match self.state {
            ClientState::Idle(v) => {
                if len > FIRST_MESSAGE_MAX {
                    return Err(NegotiationError::FirstMessageTooLarge);
                }
                self.state = ClientState::Probing(v);
                Ok(v)
            }
            ClientState::Probing(_) => Err(NegotiationError::AwaitingFirstReply),
            ClientState::Established(v) => Ok(v),
        }
    }

    /// Records a valid, non-error message from the server in version `vers`.
    pub fn on_message(&mut self, vers: u32) -> Result<ClientOutcome, NegotiationError> {
        let current = self.version();
        if vers != current.as_u32() {
            return Err(NegotiationError::UnexpectedVersion(vers));
        }
        self.state = ClientState::Established(current);
        Ok(ClientOutcome::Established(current))
    }

    /// Records an `ERR_VERS` from the server with its supported range.
    pub fn on_version_error(
        &mut self,
        range: VersionRange,
    ) -> Result<ClientOutcome, NegotiationError> {
        let chosen = range
            .best_common(&self.local)
            .ok_or(NegotiationError::NoCommonVersion)?;
        if !range.contains(Version::V2.as_u32()) {
            self.memory.v2_unsupported = true;
        }
        self.state = ClientState::Established(chosen);
        Ok(ClientOutcome::FallBack(chosen))
    }

    /// Records loss of the connection. A probe that was never answered
    /// counts as "no version 2 support" for the next attempt.
    pub fn on_disconnect(&mut self) -> ServerVersionMemory {
        if self.state == ClientState::Probing(Version::V2) {
            self.memory.v2_unsupported = true;
        }
        self.memory
    }
}

/// The server side: accept the first supported version and keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerNegotiation {
    supported: VersionRange,
    locked: Option<Version>,
}

impl ServerNegotiation {
    /// A new connection accepting `supported`.
    pub const fn new(supported: VersionRange) -> Self {
        Self {
            supported,
            locked: None,
        }
    }

    /// The connection's version once the first message was accepted.
    pub const fn version(&self) -> Option<Version> {
        self.locked
    }

    /// Checks the version of a received message. The error, if any, is the
    /// `ERR_VERS` reply to send: the whole supported range before a version
    /// is settled, only the settled version afterwards.
    pub fn on_message(&mut self, xid: u32, vers: u32) -> Result<Version, ErrorReply> {
        let range = match self.locked {
            Some(v) if v.as_u32() == vers => return Ok(v),
            Some(v) => VersionRange::only(v),
            None => match Version::from_u32(vers).filter(|_| self.supported.contains(vers)) {
                Some(v) => {
                    self.locked = Some(v);
                    return Ok(v);
                }
                None => self.supported,
            },
        };
        let body = if self.locked == Some(Version::V1) || range.high < Version::V2.as_u32() {
            ErrorBody::V1(V1Error::Vers {
                low: range.low,
                high: range.high,
            })
        } else {
            ErrorBody::V2(V2Error::Vers {
                low: range.low,
                high: range.high,
            })
        };
        Err(ErrorReply { xid, vers, body })
    }
}

/// Extracts the range from an `ERR_VERS` reply in either layout:
/// v1 (`xid vers credit RDMA_ERROR ERR_VERS low high`, 28 bytes) or v2
/// (`xid vers credit RDMA2_ERROR flags RDMA2_ERR_VERS low high`, 32 bytes).
/// Returns the reply's XID and the range, or `None` if it is not one.
pub fn parse_version_error(buf: &[u8]) -> Option<(u32, VersionRange)> {
    let mut r = XdrReader::new(buf);
    let xid = r.u32().ok()?;
    let _vers = r.u32().ok()?;
    let _credit = r.u32().ok()?;
    if r.u32().ok()? != RDMA_ERROR {
        return None;
    }
    let words: usize = buf.len() / 4;
    if words >= 8 {
        let _flags = r.u32().ok()?;
    }
    if r.u32().ok()? != super::error::ERR_VERS {
        return None;
    }
    let low = r.u32().ok()?;
    let high = r.u32().ok()?;
    if low > high {
        return None;
    }
    Some((xid, VersionRange { low, high }))
}
