// SPDX-License-Identifier: GPL-2.0

//! The transport property exchange of a connection (draft sections 5 and
//! 6.3.4).
//!
//! Right after the connection is up each peer sends `RDMA2_CONNPROP`,
//! setting `RDMA2_F_TPMORE` on all but its last one; RPC traffic starts once
//! both sides are done. A `RDMA2_CONNPROP` after the peer's last one earns
//! `RDMA2_ERR_INVAL_HTYPE`. The decoder has already validated each set, so
//! applying one here cannot fail half-way.
//!
//! The draft also says peers without an exchange use the defaults (section
//! 4.2.2), so a peer whose first message is not `RDMA2_CONNPROP` is taken to
//! have finished with no properties.

use super::error::{V2Error, Violation};
use super::properties::{PeerProperties, PropSet};

/// What happened after a received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExchangeEvent {
    /// Properties applied; more `RDMA2_CONNPROP` from the peer will follow.
    MoreExpected,
    /// The peer has finished; RPC traffic may flow once we have too.
    PeerDone,
}

/// Property exchange state for one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PropertyExchange {
    peer: PeerProperties,
    peer_done: bool,
    local_done: bool,
}

impl Default for PropertyExchange {
    fn default() -> Self {
        Self::new()
    }
}

impl PropertyExchange {
    /// A new connection: nothing exchanged yet, defaults in effect.
    pub const fn new() -> Self {
        Self {
            peer: PeerProperties::DEFAULT,
            peer_done: false,
            local_done: false,
        }
    }

    /// The peer's properties in effect.
    pub const fn peer(&self) -> &PeerProperties {
        &self.peer
    }

    /// Whether both sides have finished and RPC traffic may flow.
    pub const fn complete(&self) -> bool {
        self.peer_done && self.local_done
    }

    /// Whether the peer has finished.
    pub const fn peer_done(&self) -> bool {
        self.peer_done
    }

    /// Records that we sent a `RDMA2_CONNPROP` with `tpmore` as given.
    pub fn on_local_sent(&mut self, tpmore: bool) {
        if !tpmore {
            self.local_done = true;
        }
    }

    /// Applies a received `RDMA2_CONNPROP`.
    pub fn on_connprop(
        &mut self,
        set: &PropSet<'_>,
        tpmore: bool,
    ) -> Result<ExchangeEvent, (V2Error, Violation)> {
        if self.peer_done {
            return Err((V2Error::InvalHtype, Violation::PropertiesAlreadyComplete));
        }
        self.peer.apply(set);
        if tpmore {
            Ok(ExchangeEvent::MoreExpected)
        } else {
            self.peer_done = true;
            Ok(ExchangeEvent::PeerDone)
        }
    }

    /// Records any other message from the peer: if it had not sent
    /// properties, it never will and the defaults stand.
    pub fn on_other_message(&mut self) {
        self.peer_done = true;
    }
}
