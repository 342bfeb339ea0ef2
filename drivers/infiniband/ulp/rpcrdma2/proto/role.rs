// SPDX-License-Identifier: GPL-2.0

//! The two roles of an RPC-over-RDMA endpoint.
//!
//! Thresholds, credits and message classification are all stated in terms
//! of Requester and Responder (draft section 3.1.2). In the forward
//! direction the client is the Requester; a connection can carry both
//! directions, so code that depends on the role takes it explicitly.

/// Which side of a transaction an endpoint plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sends Calls, receives Replies; exposes memory through chunks.
    Requester,
    /// Receives Calls, sends Replies; performs RDMA Read and Write.
    Responder,
}

/// Which end of the connection an endpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// The RPC client, which establishes the connection.
    Client,
    /// The RPC server, which accepts it.
    Server,
}

impl Endpoint {
    /// The role this endpoint plays in the forward direction.
    pub const fn forward_role(self) -> Role {
        match self {
            Self::Client => Role::Requester,
            Self::Server => Role::Responder,
        }
    }
}
