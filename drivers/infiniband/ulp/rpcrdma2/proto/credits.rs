// SPDX-License-Identifier: GPL-2.0

//! Credit-based flow control (draft section 4.2.1, RFC 8166 section 3.3.1).
//!
//! A credit is the right to have one message in the peer's Receive queue.
//! Each direction is accounted separately, so every endpoint runs two
//! machines: [`SendCredits`] limits what it posts against the grant it last
//! received, and [`ReceiveCredits`] decides what grant to advertise from the
//! Receives it has posted. Both are plain counters driven by explicit
//! events; the transport calls them and acts on their answers.
//!
//! Conventions, stated here because the draft leaves them open:
//! - The granted value is absolute (the window size), as in version 1: a
//!   value of zero would deadlock, which is why the draft forbids it. A zero
//!   grant is treated as one, as the kernel's v1 client does.
//! - A message stays *in flight* until the transport releases it, which it
//!   does when it knows the peer consumed and replenished that Receive: for
//!   a Call, when its Reply (or an error for its XID) arrives.
//! - Until a first valid grant arrives the limit is one message (section
//!   4.2.3: "a client MUST send only a single RPC-over-RDMA message until it
//!   receives a valid RPC-over-RDMA message from the server that grants
//!   client credits").
//! - A receiver keeps one Receive in reserve for an asynchronous credit
//!   grant (section 4.2.1.2), so it grants at most `posted - 1`.

/// Why a credit operation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditError {
    /// No credit is available: wait for a release or a new grant.
    Exhausted,
    /// More messages released than were in flight.
    ReleaseUnderflow,
    /// A message arrived with no Receive posted for it: the peer overran
    /// its grant.
    Overrun,
}

/// Sender-side accounting against the peer's grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendCredits {
    limit: u16,
    in_flight: u32,
    granted: bool,
}

impl Default for SendCredits {
    fn default() -> Self {
        Self::new()
    }
}

impl SendCredits {
    /// A fresh connection: one message may be sent until a grant arrives.
    pub const fn new() -> Self {
        Self {
            limit: 1,
            in_flight: 0,
            granted: false,
        }
    }

    /// The current window.
    pub const fn limit(&self) -> u16 {
        self.limit
    }

    /// Messages sent and not yet released.
    pub const fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Whether any grant has been received.
    pub const fn has_grant(&self) -> bool {
        self.granted
    }

    /// Credits available right now.
    pub const fn available(&self) -> u32 {
        (self.limit as u32).saturating_sub(self.in_flight)
    }

    /// Takes one credit for a Send about to be posted.
    pub fn acquire(&mut self) -> Result<(), CreditError> {
        if self.available() == 0 {
            return Err(CreditError::Exhausted);
        }
        self.in_flight = self.in_flight.saturating_add(1);
        Ok(())
    }

    /// Takes `n` credits at once (a Continued sequence), or none.
    pub fn acquire_many(&mut self, n: u32) -> Result<(), CreditError> {
        if self.available() < n {
            return Err(CreditError::Exhausted);
        }
        self.in_flight = self.in_flight.saturating_add(n);
        Ok(())
    }

    /// Returns `n` credits, e.g. when the Reply to a Call arrives.
    pub fn release(&mut self, n: u32) -> Result<(), CreditError> {
        self.in_flight = self
            .in_flight
            .checked_sub(n)
            .ok_or(CreditError::ReleaseUnderflow)?;
        Ok(())
    }

    /// Records the grant carried by any valid message from the peer,
    /// including an asynchronous grant. A grant below the number in flight
    /// simply blocks new Sends until enough are released.
    pub fn on_grant(&mut self, granted: u16) {
        self.limit = granted.max(1);
        self.granted = true;
    }
}

/// Receiver-side accounting: posted Receives and the grant to advertise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiveCredits {
    target: u16,
    posted: u32,
    advertised: u16,
    consumed_since_advert: u32,
}

impl ReceiveCredits {
    /// A receiver that wants to grant up to `target` credits.
    pub const fn new(target: u16) -> Self {
        Self {
            target,
            posted: 0,
            advertised: 1,
            consumed_since_advert: 0,
        }
    }

    /// Receives currently posted.
    pub const fn posted(&self) -> u32 {
        self.posted
    }

    /// The grant last advertised.
    pub const fn advertised(&self) -> u16 {
        self.advertised
    }

    /// Records `n` newly posted Receives.
    pub fn on_posted(&mut self, n: u32) {
        self.posted = self.posted.saturating_add(n);
    }

    /// Records the arrival of one message, which consumes one Receive.
    pub fn on_received(&mut self) -> Result<(), CreditError> {
        self.posted = self.posted.checked_sub(1).ok_or(CreditError::Overrun)?;
        self.consumed_since_advert = self.consumed_since_advert.saturating_add(1);
        Ok(())
    }

    /// The grant the Receives now posted can honour: at most the target,
    /// one Receive held back for an asynchronous grant, never zero.
    pub fn grantable(&self) -> u16 {
        let spare = self.posted.saturating_sub(1);
        let v = u16::try_from(spare).unwrap_or(u16::MAX);
        v.min(self.target).max(1)
    }

    /// Produces the grant for an outgoing header and records it as
    /// advertised.
    pub fn advertise(&mut self) -> u16 {
        let g = self.grantable();
        self.advertised = g;
        self.consumed_since_advert = 0;
        g
    }

    /// Whether an asynchronous grant (`RDMA2_NOMSG`, empty lists) should be
    /// sent now: the peer has used up the whole window last advertised, so
    /// it may be blocked, and the Receives posted since allow a grant.
    pub fn needs_async_grant(&self) -> bool {
        self.consumed_since_advert >= u32::from(self.advertised) && self.posted >= 2
    }
}
