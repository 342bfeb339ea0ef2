// SPDX-License-Identifier: GPL-2.0

//! Version 2's transport property exchange on the client's side (draft sections 5 and 6.3.4):
//! our `RDMA2_CONNPROP` as the probe, the wait for the server's, the server's properties
//! applied to the connection's thresholds, and the errors of the exchange.

use super::*;

impl ClientTransport {
    /// Version 2's property exchange at the start of a connection (draft section 6.3.4): our
    /// first `RDMA2_CONNPROP` is the probe; the connect waits until the server finished its
    /// own, or refused the probe (the connection then speaks Version 1), and then sends the
    /// rest of ours. Calls go out after that. A server silent for [`PROPERTIES_MS`] fails the
    /// connect, and the probe counts as lost: the next connection speaks Version 1.
    pub(super) fn exchange_properties(xprt: &Xprt<Self>, endpoint: &Endpoint) -> Result {
        let mut exchange = xprt.exchange.lock();
        Self::send_properties(xprt, endpoint, &mut exchange)?;
        let mut left = msecs_to_jiffies(PROPERTIES_MS);
        while !exchange.over {
            // The connect worker takes no signals: a wait ends by a wake-up or the timeout.
            match xprt
                .exchanged
                .wait_interruptible_timeout(&mut exchange, left)
            {
                CondVarTimeoutResult::Woken { jiffies }
                | CondVarTimeoutResult::Signal { jiffies } => left = jiffies,
                CondVarTimeoutResult::Timeout => break,
            }
        }
        let settled = xprt.negotiation.lock().is_established();
        if !exchange.over || !settled {
            pr_info!(
                "{} gave no usable answer to our transport properties: connecting again\n",
                ServerName(xprt)
            );
            return Err(ETIMEDOUT);
        }
        Self::send_properties(xprt, endpoint, &mut exchange)
    }

    /// Sends those of our transport properties (`RDMA2_CONNPROP`, split as the protocol core
    /// does) not sent yet on this connection: only the first message while the version is
    /// unsettled (the probe), the rest once the server answered in Version 2.
    pub(super) fn send_properties(
        xprt: &Xprt<Self>,
        endpoint: &Endpoint,
        exchange: &mut Exchange,
    ) -> Result {
        let threshold = inline_threshold();
        let local = LocalProperties {
            send_size: threshold,
            recv_buffer_size: threshold,
            // What the client takes is a server's callbacks: never any chunk.
            max_segment_size: DEFAULT_MAX_SEGMENT_SIZE,
            max_segment_count: DEFAULT_MAX_SEGMENT_COUNT,
            reverse: super::backchannel::REVERSE,
        };
        let props = local.properties();
        let batches = split_properties(&props, FIRST_MESSAGE_MAX).map_err(|_| EINVAL)?;
        let credit = Credit {
            granted: MAX_REQUESTS as u16,
            max_outstanding: MAX_REQUESTS as u16,
        };
        for batch in batches.skip(exchange.sent as usize) {
            let sending = xprt.sending();
            let probing = sending.probe_limit.is_some();
            if sending.revision != Revision::V2Draft01 || (probing && exchange.sent != 0) {
                break;
            }
            let mut buf = KVec::from_elem(0u8, FIRST_MESSAGE_MAX, GFP_KERNEL)?;
            let len = batch
                .encode(&mut buf, CONNPROP_XID, credit, Flags::NONE)
                .map_err(|_| EMSGSIZE)?;
            let message = buf.get(..len).ok_or(EINVAL)?;
            xprt.send_as(sending, len, || {
                endpoint.send_control(message, &xprt.report.counters)
            })?;
            exchange.sent = exchange.sent.saturating_add(1);
            exchange.state.on_local_sent(batch.tpmore);
            xprt.report.properties_sent(local);
            Counters::add(&xprt.report.counters.connprop_sent, 1);
        }
        Ok(())
    }

    /// Runs the property exchange on `header`, a message of a Version 2 connection of
    /// `generation`; returns whether the message was the exchange's (an `RDMA2_CONNPROP`) or
    /// refused, and so is done with. The server's properties apply as each of its
    /// `RDMA2_CONNPROP` arrives; an `RDMA2_CONNPROP` after its last one, or another message
    /// in the middle of its `RDMA2_F_TPMORE` sequence, earns the error the protocol core
    /// names (`RDMA2_ERR_INVAL_HTYPE`). A server whose first message is not an
    /// `RDMA2_CONNPROP` keeps the draft's defaults.
    pub(super) fn take_properties(xprt: &Xprt<Self>, generation: u32, header: &Header<'_>) -> bool {
        let mut exchange = xprt.exchange.lock();
        let (set, more) = match header.body {
            Body::Properties { set, more } => (set, more),
            _ => {
                let first = !exchange.state.peer_done();
                let htype = match header.body {
                    Body::NoMsg { .. } | Body::Control => v2::RDMA2_NOMSG,
                    Body::Error(_) => v2::RDMA2_ERROR,
                    _ => v2::RDMA2_MSG,
                };
                let checked = exchange.state.on_other_message_checked(htype);
                if first {
                    Self::apply_properties(xprt, generation, exchange.state.peer());
                    Self::exchange_over(xprt, &mut exchange);
                }
                return match checked {
                    Ok(()) => false,
                    Err((error, _)) => {
                        Self::refuse(xprt, generation, header.xid, error);
                        true
                    }
                };
            }
        };
        Self::take_grant(xprt, Revision::V2Draft01, header.credits.granted);
        let event = match exchange.state.on_connprop(&set, more) {
            Ok(event) => event,
            Err((error, _)) => {
                Self::refuse(xprt, generation, header.xid, error);
                return true;
            }
        };
        Counters::add(&xprt.report.counters.connprop_received, 1);
        let peer = *exchange.state.peer();
        let (send, recv) = Self::apply_properties(xprt, generation, &peer);
        if event == ExchangeEvent::PeerDone {
            let segments = xprt
                .with_endpoint(generation, |endpoint| endpoint.region_bytes())
                .and_then(|region| segment_limits_of(region, &peer));
            let (span, count) = segments.map_or((0, 0), |l| (l.span, l.count));
            pr_info!(
                "{}: RPC-over-RDMA v2 transport properties: the server receives {} bytes \
                 (RBSIZ), sends {} (SBSIZ), takes segments of {} bytes (RSSIZ), {} per call \
                 (RCSIZ), reverse direction {:?}; we send up to {} inline, take up to {}, \
                 offer segments of up to {} bytes, {} per call; RDMA2_CONNPROP {} sent, {} \
                 received\n",
                ServerName(xprt),
                peer.recv_buffer_size,
                peer.send_size,
                peer.max_segment_size,
                peer.max_segment_count,
                peer.reverse,
                send,
                recv,
                span,
                count,
                exchange.sent,
                exchange.state.peer_messages()
            );
            Self::exchange_over(xprt, &mut exchange);
        }
        true
    }

    /// Makes what we send inline on the connection of `generation` follow the server's
    /// receive buffer size in `peer`, and what we expect inline (the replies' chunks are
    /// planned around it) its send size; returns the two limits.
    pub(super) fn apply_properties(
        xprt: &Xprt<Self>,
        generation: u32,
        peer: &PeerProperties,
    ) -> (usize, usize) {
        let threshold = inline_threshold();
        let send = send_threshold(threshold, peer) as usize;
        let recv = receive_threshold(threshold, peer) as usize;
        xprt.with_endpoint(generation, |endpoint| {
            endpoint.set_limits(send, recv);
            let limits = segment_limits_of(endpoint.region_bytes(), peer);
            let (span, count) = limits.map_or((0, 0), |l| (l.span as usize, l.count as usize));
            endpoint.set_segment_limits(span, count);
        });
        xprt.backchannel.connected(send, Revision::V2Draft01);
        xprt.backchannel.peer_reverse(peer.reverse);
        xprt.report.properties_received(*peer, (send, recv));
        xprt.report
            .counters
            .peer_rbsiz
            .store(peer.recv_buffer_size, Ordering::Relaxed);
        (send, recv)
    }

    /// The exchange is over: the connect stops waiting.
    pub(super) fn exchange_over(xprt: &Xprt<Self>, exchange: &mut Exchange) {
        exchange.over = true;
        xprt.exchanged.notify_all();
    }

    /// Answers the server's message `xid` with `RDMA2_ERROR` `error` (best effort) on the
    /// connection of `generation`, and counts it as a bad reply.
    pub(super) fn refuse(xprt: &Xprt<Self>, generation: u32, xid: u32, error: V2Error) {
        let reply = ErrorReply {
            xid,
            vers: Version::V2.as_u32(),
            body: ErrorBody::V2(error),
        };
        pr_info!(
            "{}: {} for a message in the transport property exchange\n",
            ServerName(xprt),
            reply.body.name()
        );
        Counters::add(&xprt.report.counters.bad_reply, 1);
        let credits = Credits {
            granted: MAX_REQUESTS as u16,
            max: MAX_REQUESTS as u16,
        };
        let mut buf = [0u8; 64];
        if let Ok(len) = wire::encode_error(&mut buf, &reply, credits) {
            if let Some(message) = buf.get(..len) {
                let _ = xprt.with_endpoint(generation, |endpoint| {
                    endpoint.send_control(message, &xprt.report.counters)
                });
            }
        }
    }
}

/// What our chunks may use toward the server of `peer`, for regions of `region` bytes (see
/// [`segment_limits`]).
fn segment_limits_of(region: usize, peer: &PeerProperties) -> Option<SegmentLimits> {
    segment_limits(
        u32::try_from(region).unwrap_or(u32::MAX),
        PAGE_SIZE as u32,
        MAX_REGIONS as u32,
        peer,
    )
}
