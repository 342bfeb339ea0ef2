// SPDX-License-Identifier: GPL-2.0

//! The RFC 6581 ready-to-receive (RTR) message of a peer-to-peer connection, as the engine
//! accounts for it: [`RtrState`], which the driver passes in [`EngineConfig::rtr`], and the
//! engine's start past the RTR that connection setup exchanged before it (see "Peer-to-peer
//! connections" in [`qp_engine`](super)).

use super::*;

/// The RFC 6581 ready-to-receive (RTR) message of a connection, as the
/// engine has to account for it (see [`qp_engine`](super)).
///
/// Connection setup ([`super::super::mpa_handshake`]) sends and checks the RTR,
/// and the responder answers a Read RTR, before the engine starts; the RTR
/// is nonetheless a message of the RDMAP stream, so the engine starts past
/// it. The default is the client-server model: no RTR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RtrState {
    /// No RTR: the client-server model, or a peer-to-peer connection whose
    /// RTR the engine has nothing to account for.
    #[default]
    None,
    /// This side is the initiator and sent an RTR of this kind.
    Sent(RtrKind),
    /// This side is the responder and received an RTR of this kind (and, for
    /// a Read RTR, has sent its zero-length Read Response).
    Received(RtrKind),
}

impl RtrState {
    /// The state of an initiator whose negotiation chose `rtr`
    /// ([`super::super::mpa_negotiation::InitiatorDecision::rtr`]), once it has sent
    /// [`super::super::mpa_handshake::InitiatorHandshake::rtr_fpdu`].
    pub const fn initiator(rtr: Option<RtrKind>) -> Self {
        match rtr {
            Some(kind) => Self::Sent(kind),
            None => Self::None,
        }
    }

    /// The state of a responder established with `rtr` (none in the
    /// client-server model), once it has sent
    /// [`super::super::mpa_handshake::ResponderHandshake::rtr_response`].
    pub const fn responder(rtr: Option<ReceivedRtr>) -> Self {
        match rtr {
            Some(rtr) => Self::Received(rtr.kind()),
            None => Self::None,
        }
    }
}

impl<C: Crc32c + Copy, S: SlotStorage<E>, E: SgeEntry> QpEngine<C, S, E> {
    /// Accounts for the RTR message connection setup exchanged (see
    /// [`qp_engine`](super)).
    pub(super) fn start_past_rtr(&mut self, rtr: RtrState) {
        match rtr {
            RtrState::None
            | RtrState::Sent(RtrKind::Write)
            | RtrState::Received(RtrKind::Write) => {}
            RtrState::Sent(RtrKind::Send) => {
                self.tx.skip_msn(QueueNumber::Send);
            }
            RtrState::Sent(RtrKind::Read) => {
                let msn = self.tx.skip_msn(QueueNumber::ReadRequest);
                // Nothing is outstanding yet, so the credit is free. Without
                // slot storage for it the RTR's response finds no sink and
                // terminates the stream, as any response to a request that
                // could not be tracked would.
                let Ok(slot) = self.st.requester.issue_rtr_read() else {
                    return;
                };
                if let Some(o) = self.st.slots.outstanding_mut().get_mut(slot) {
                    // Its sink, STag RTR_STAG at offset 0 and of no bytes,
                    // is no entry of a work request: the `rtr` flag stands
                    // for it (see `Outstanding::sink_stag`).
                    *o = Outstanding {
                        msn,
                        live: true,
                        rtr: true,
                        ..Outstanding::EMPTY
                    };
                }
            }
            RtrState::Received(RtrKind::Send) => {
                self.rx.skip_message(QueueNumber::Send);
            }
            RtrState::Received(RtrKind::Read) => {
                self.rx.skip_message(QueueNumber::ReadRequest);
            }
        }
    }
}
