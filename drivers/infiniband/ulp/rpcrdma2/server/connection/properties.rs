// SPDX-License-Identifier: GPL-2.0

//! Version 2's transport property exchange on a server connection (draft sections 5 and
//! 6.3.4): our `RDMA2_CONNPROP` first, the client's applied as they come, and the errors of
//! the exchange.

use super::*;
use crate::proto::reverse::{reverse_sends, ReverseSends};

/// The transport property exchange of a Version 2 connection (draft sections 5 and 6.3.4).
pub(super) struct Exchange {
    pub(super) state: PropertyExchange,
    /// Our `RDMA2_CONNPROP` messages sent.
    pub(super) sent: u32,
}

impl Exchange {
    pub(super) fn new() -> Self {
        Self {
            state: PropertyExchange::new(),
            sent: 0,
        }
    }
}

/// The reverse direction of a connection, as its version and properties have it.
pub(in crate::server) struct ReverseDirection {
    /// The connection's revision.
    pub(in crate::server) revision: Revision,
    /// The client's `RDMA2_PROPID_BRS` (Version 2 only).
    pub(in crate::server) peer: Option<ReverseSupport>,
    /// What we may send.
    pub(in crate::server) sends: ReverseSends,
}

/// What the property exchange makes of a message of a Version 2 connection.
pub(super) enum Exchanged {
    /// The message goes on to be served.
    Serve,
    /// The message was the exchange's (an `RDMA2_CONNPROP`) or was refused: nothing to serve.
    Consumed,
}

impl<C: WithBackchannel> Connection<C> {
    /// Sends our transport properties (`RDMA2_CONNPROP`, split as the protocol core does), once
    /// per connection: the first messages we send on a Version 2 connection. The connection
    /// goes if they cannot be sent.
    pub(super) fn send_properties(xprt: &SvcXprt<Self>, exchange: &mut Exchange) {
        if exchange.sent != 0 {
            return;
        }
        let local = LocalProperties {
            send_size: xprt.threshold,
            recv_buffer_size: xprt.threshold,
            max_segment_size: crate::server::max_segment_size(),
            max_segment_count: crate::server::MAX_SEGMENT_COUNT,
            reverse: super::super::backchannel::REVERSE,
        };
        let props = local.properties();
        let Ok(batches) = split_properties(&props, FIRST_MESSAGE_MAX) else {
            return;
        };
        // Version 2 starts from the draft's defaults, not from Version 1's private data.
        xprt.settle_v2_limit(exchange.state.peer());
        for batch in batches {
            let credits = xprt.credits();
            let credit = Credit {
                granted: credits.granted.max(1),
                max_outstanding: credits.max,
            };
            // `RDMA2_CONNPROP` carries no RPC message: its XID is 0.
            let sent = KVec::from_elem(0u8, FIRST_MESSAGE_MAX, GFP_KERNEL)
                .map_err(Error::from)
                .and_then(|mut buf| {
                    let len = batch
                        .encode(&mut buf, 0, credit, Flags::NONE)
                        .map_err(|_| EMSGSIZE)?;
                    xprt.send(buf.get(..len).ok_or(EINVAL)?, None, |_, _| Ok(0))
                });
            if let Err(e) = sent {
                pr_info!(
                    "{}: our transport properties could not be sent ({:?}): closing the \
                     connection\n",
                    Peer(xprt.remote),
                    e
                );
                Self::give_up(xprt);
                return;
            }
            exchange.sent = exchange.sent.saturating_add(1);
            exchange.state.on_local_sent(batch.tpmore);
        }
        xprt.report.properties_sent(local, exchange.sent);
    }

    /// What we may send the client in the reverse direction (nfsd's callbacks): in Version 1
    /// whole messages inline; in Version 2 what both sides' `RDMA2_PROPID_BRS` allow (draft
    /// section 5.2.5), nothing if the client's properties did not include it. nfsd sets a
    /// connection's backchannel up once a call came on it, and the property exchange is over
    /// by then: the client's first call ends it.
    pub(in crate::server) fn reverse_direction(&self) -> ReverseDirection {
        match self.revision() {
            Revision::V1 => ReverseDirection {
                revision: Revision::V1,
                peer: None,
                sends: ReverseSends::VERSION_1,
            },
            Revision::V2Draft01 => {
                let peer = self.exchange.lock().state.peer().reverse;
                ReverseDirection {
                    revision: Revision::V2Draft01,
                    peer: Some(peer),
                    sends: reverse_sends(super::super::backchannel::REVERSE, peer),
                }
            }
        }
    }

    /// What we send inline on a Version 2 connection whose client's properties are `peer`.
    pub(super) fn settle_v2_limit(&self, peer: &PeerProperties) -> usize {
        let limit = send_threshold(self.threshold, peer) as usize;
        self.report
            .values
            .send_limit
            .store(limit, Ordering::Relaxed);
        limit
    }

    /// Runs the property exchange on `header`, a message of a Version 2 connection: an
    /// `RDMA2_CONNPROP` is applied, or refused as the protocol core decides (after the
    /// client's last one, `RDMA2_ERR_INVAL_HTYPE`); another message in the middle of the
    /// client's `RDMA2_F_TPMORE` sequence is refused (`RDMA2_ERR_INVAL_HTYPE`), else served.
    pub(super) fn take_properties(&self, header: &Header<'_>) -> Exchanged {
        let refuse = |error| {
            let reply = ErrorReply {
                xid: header.xid,
                vers: header.revision.vers(),
                body: ErrorBody::V2(error),
            };
            pr_debug!(
                "{}: {} in the property exchange\n",
                Peer(self.remote),
                reply.body.name()
            );
            self.send_error(&reply);
            Exchanged::Consumed
        };
        let mut exchange = self.exchange.lock();
        let (set, more) = match header.body {
            Body::Properties { set, more } => (set, more),
            _ => {
                let htype = match header.body {
                    Body::NoMsg { .. } | Body::Control => v2::RDMA2_NOMSG,
                    Body::Error(_) => v2::RDMA2_ERROR,
                    _ => v2::RDMA2_MSG,
                };
                return match exchange.state.on_other_message_checked(htype) {
                    Ok(()) => Exchanged::Serve,
                    Err((error, _)) => refuse(error),
                };
            }
        };
        let event = match exchange.state.on_connprop(&set, more) {
            Ok(event) => event,
            Err((error, _)) => return refuse(error),
        };
        let peer = *exchange.state.peer();
        let limit = self.settle_v2_limit(&peer);
        self.report
            .properties_received(peer, exchange.state.peer_messages());
        if event == ExchangeEvent::PeerDone {
            pr_info!(
                "{}: RPC-over-RDMA v2 transport properties: the client receives {} bytes \
                 (RBSIZ), sends {} (SBSIZ), reverse direction {:?}; we send up to {} inline; \
                 RDMA2_CONNPROP {} sent, {} received\n",
                Peer(self.remote),
                peer.recv_buffer_size,
                peer.send_size,
                peer.reverse,
                limit,
                exchange.sent,
                exchange.state.peer_messages()
            );
        }
        Exchanged::Consumed
    }
}
