// SPDX-License-Identifier: GPL-2.0

//! The asynchronous events a failing QP raises, and which one a protocol error calls for.
//!
//! When the data path finds an error it must report to the peer (a TERMINATE), the consumer
//! hears of it too, as an `ib_event` on the QP. The verbs distinguish a protection or access
//! violation from a fatal failure; RFC 5040 and RFC 5041 make the same split in their
//! TERMINATE error types (type 1 of RDMAP and of DDP tagged buffers: a protection error), so
//! the event follows from the TERMINATE the driver sends.

use super::term_error::{Layer, TermError};

/// The asynchronous QP events the driver raises (`enum ib_event_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum EventKind {
    /// `IB_EVENT_QP_FATAL`: the QP failed and cannot continue.
    Fatal = 1,
    /// `IB_EVENT_QP_REQ_ERR`: an invalid request (work request or message).
    RequestError = 2,
    /// `IB_EVENT_QP_ACCESS_ERR`: a protection or access violation.
    AccessError = 3,
}

impl EventKind {
    /// The kernel `enum ib_event_type` value.
    pub const fn raw(self) -> u32 {
        self as u32
    }

    /// The event for a locally detected protocol error: remote protection
    /// (RDMAP) and tagged buffer (DDP) errors are access errors, anything
    /// else is fatal.
    pub const fn for_term_error(error: TermError) -> Self {
        match (error.layer(), error.error_type()) {
            (Layer::Rdmap, 1) | (Layer::Ddp, 1) => EventKind::AccessError,
            _ => EventKind::Fatal,
        }
    }
}
