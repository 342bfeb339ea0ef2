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
//!
//! A property set too large for one message is spread over several
//! `RDMA2_CONNPROP` messages with `RDMA2_F_TPMORE` (section 6.3.4: "If a
//! peer has more or larger Transport Properties than can fit in the
//! initial RDMA2_CONNPROP message type, it sets the RDMA2_F_TPMORE flag";
//! `RDMA2_F_MORE`, the Message Continuation flag of section 6.2.2.2, is not
//! used for this). Each message carries a complete `rpcrdma2_propset`.
//!
//! - Sending: [`split_properties`] cuts a set into [`PropBatch`]es that
//!   each fit a given message size, `RDMA2_F_TPMORE` on all but the last.
//! - Receiving: [`PropertyExchange::on_connprop`] stages each message's set
//!   over the properties in effect and puts the result in effect when the
//!   message without `RDMA2_F_TPMORE` arrives, so a sequence that does not
//!   finish applies nothing: the draft discards only a message with a bad
//!   value (section 7.2.2, which the decoder refuses whole), and a
//!   connection whose thresholds moved half-way would be harder to reason
//!   about than one on the defaults. Faults: `RDMA2_CONNPROP` after the
//!   peer's last one, `RDMA2_ERR_INVAL_HTYPE` (section 6.2.2.3); a bad
//!   value, `RDMA2_ERR_BAD_PROPVAL` (already raised by the decoder);
//!   another header type while the sequence is open,
//!   `RDMA2_ERR_INVAL_HTYPE`, dropping the staged set.

use super::error::{V2Error, Violation};
use super::properties::{
    PeerProperties, PropSet, Property, ReverseSupport, MAX_PROPS_PER_SET, MIN_BUFFER_SIZE,
};
use super::v2::{self, Flags, Prefix, V2BodyRef, PREFIX_LEN, RDMA2_F_TPMORE};
use super::version::RPCRDMA_VERSION_2;
use super::xdr::EncodeError;

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
    /// The peer's open `RDMA2_F_TPMORE` sequence applied over `peer`.
    staged: PeerProperties,
    peer_done: bool,
    local_done: bool,
    /// `RDMA2_CONNPROP` messages of the peer applied or stored.
    peer_messages: u32,
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
            staged: PeerProperties::DEFAULT,
            peer_done: false,
            local_done: false,
            peer_messages: 0,
        }
    }

    /// How many `RDMA2_CONNPROP` messages of the peer were taken.
    pub const fn peer_messages(&self) -> u32 {
        self.peer_messages
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

    /// Takes a received `RDMA2_CONNPROP`: its set is staged, and the
    /// sequence's sets are in effect once the one without `RDMA2_F_TPMORE`
    /// arrived.
    pub fn on_connprop(
        &mut self,
        set: &PropSet<'_>,
        tpmore: bool,
    ) -> Result<ExchangeEvent, (V2Error, Violation)> {
        if self.peer_done {
            return Err((V2Error::InvalHtype, Violation::PropertiesAlreadyComplete));
        }
        self.staged.apply(set);
        self.peer_messages = self.peer_messages.saturating_add(1);
        if tpmore {
            Ok(ExchangeEvent::MoreExpected)
        } else {
            self.peer = self.staged;
            self.peer_done = true;
            Ok(ExchangeEvent::PeerDone)
        }
    }

    /// Records any other message from the peer: if it had not sent
    /// properties, it never will and the defaults stand.
    pub fn on_other_message(&mut self) {
        self.peer_done = true;
    }

    /// Records another header type `htype` from the peer. As
    /// [`PropertyExchange::on_other_message`], but in the middle of a
    /// `RDMA2_F_TPMORE` sequence the message earns `RDMA2_ERR_INVAL_HTYPE`
    /// (the staged sets are dropped: the defaults stay; the peer is taken
    /// to be done).
    pub fn on_other_message_checked(&mut self, htype: u32) -> Result<(), (V2Error, Violation)> {
        let open = self.peer_messages != 0 && !self.peer_done;
        self.peer_done = true;
        if open {
            Err((V2Error::InvalHtype, Violation::PropertiesIncomplete(htype)))
        } else {
            Ok(())
        }
    }
}

/// What an endpoint tells its peer about itself: the sizes of its Sends and
/// of its receive buffers, and the reverse-direction messages it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalProperties {
    /// `SBSIZ`: the largest message this endpoint sends inline.
    pub send_size: u32,
    /// `RBSIZ`: the largest message this endpoint receives inline.
    pub recv_buffer_size: u32,
    /// `RSSIZ`: the largest RDMA segment this endpoint sends or receives.
    pub max_segment_size: u32,
    /// `RCSIZ`: the most segments this endpoint takes in a Requester's
    /// header.
    pub max_segment_count: u32,
    /// `BRS`: the reverse-direction messages this endpoint takes.
    pub reverse: ReverseSupport,
}

impl LocalProperties {
    /// The set to send, for [`split_properties`]. Sizes below the draft's
    /// minimum are sent as the minimum, which every peer receives anyway.
    pub fn properties(&self) -> [Property<'static>; 5] {
        [
            Property::RecvBufferSize(self.recv_buffer_size.max(MIN_BUFFER_SIZE)),
            Property::SendSize(self.send_size.max(MIN_BUFFER_SIZE)),
            Property::MaxSegmentSize(self.max_segment_size),
            Property::MaxSegmentCount(self.max_segment_count),
            Property::Reverse(self.reverse),
        ]
    }
}

/// What a Requester's chunks may use toward a peer (draft sections 5.2.3
/// and 5.2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentLimits {
    /// Bytes one segment covers at most.
    pub span: u32,
    /// Segments one message carries at most.
    pub count: u32,
}

/// The segments a Requester whose regions each map at most `region_bytes`
/// (whole pages of `page` bytes) and whose messages carry at most
/// `local_count` segments offers `peer`: segments no longer than the peer's
/// `RSSIZ` in whole pages, no more than its `RCSIZ`. `None` if the peer
/// takes no segment a region can make (an `RSSIZ` below one page, or an
/// `RCSIZ` of zero): such a peer gets no chunks.
pub fn segment_limits(
    region_bytes: u32,
    page: u32,
    local_count: u32,
    peer: &PeerProperties,
) -> Option<SegmentLimits> {
    let whole_pages = peer.max_segment_size.checked_div(page)?.checked_mul(page)?;
    let limits = SegmentLimits {
        span: region_bytes.min(whole_pages),
        count: local_count.min(peer.max_segment_count),
    };
    (limits.span != 0 && limits.count != 0).then_some(limits)
}

/// The most an endpoint that sends at most `local_send` bytes inline sends
/// to `peer` (draft section 5.2.2: what fits the peer's receive buffers):
/// never above `local_send`, never below the draft's minimum buffer size
/// (the decoder already refuses a smaller `RBSIZ`).
pub fn send_threshold(local_send: u32, peer: &PeerProperties) -> u32 {
    local_send.min(peer.recv_buffer_size).max(MIN_BUFFER_SIZE)
}

/// The most an endpoint that receives at most `local_recv` bytes inline
/// expects from `peer` inline, and so plans its replies' chunks around
/// (draft section 5.2.1: what the peer's Sends may carry): never above
/// `local_recv`, never below the draft's minimum.
pub fn receive_threshold(local_recv: u32, peer: &PeerProperties) -> u32 {
    local_recv.min(peer.send_size).max(MIN_BUFFER_SIZE)
}

/// Why [`split_properties`] cannot split a set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropSplitError {
    /// The property at this index does not fit in a message of the given
    /// size even alone.
    PropertyTooLarge(usize),
}

/// One `RDMA2_CONNPROP` message's share of a split property set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PropBatch<'p, 'a> {
    /// The properties carried.
    pub props: &'p [Property<'a>],
    /// Whether `RDMA2_F_TPMORE` is set (every batch but the last).
    pub tpmore: bool,
}

impl PropBatch<'_, '_> {
    /// Encodes this batch as a `RDMA2_CONNPROP` message into `buf`,
    /// returning its length. `flags` are the other flags to send (usually
    /// none); `RDMA2_F_TPMORE` is set from the batch.
    pub fn encode(
        &self,
        buf: &mut [u8],
        xid: u32,
        credit: v2::Credit,
        flags: Flags,
    ) -> Result<usize, EncodeError> {
        let prefix = Prefix {
            xid,
            vers: RPCRDMA_VERSION_2,
            credit,
            htype: v2::RDMA2_CONNPROP,
            flags: flags.with(RDMA2_F_TPMORE, self.tpmore),
        };
        v2::encode(buf, &prefix, &V2BodyRef::ConnProp(self.props))
    }
}

/// Iterator over the batches of a split property set.
#[derive(Debug, Clone)]
pub struct PropBatches<'p, 'a> {
    rest: &'p [Property<'a>],
    max_message: usize,
    started: bool,
}

/// Encoded size of a `RDMA2_CONNPROP` message with an empty set.
pub const EMPTY_CONNPROP_LEN: usize = PREFIX_LEN + 4;

/// Splits `props` over as few `RDMA2_CONNPROP` messages of at most
/// `max_message` bytes each as keeps their order (section 6.3.4; the first
/// message of a connection is limited to the default inline threshold).
/// Each batch holds at most [`MAX_PROPS_PER_SET`] properties, what a
/// receiver built from this code accepts per message. An empty set gives
/// one empty batch: a peer always sends at least one `RDMA2_CONNPROP`.
pub fn split_properties<'p, 'a>(
    props: &'p [Property<'a>],
    max_message: usize,
) -> Result<PropBatches<'p, 'a>, PropSplitError> {
    for (i, p) in props.iter().enumerate() {
        let fits = p
            .encoded_len()
            .and_then(|l| l.checked_add(EMPTY_CONNPROP_LEN))
            .is_some_and(|l| l <= max_message);
        if !fits {
            return Err(PropSplitError::PropertyTooLarge(i));
        }
    }
    if max_message < EMPTY_CONNPROP_LEN {
        return Err(PropSplitError::PropertyTooLarge(0));
    }
    Ok(PropBatches {
        rest: props,
        max_message,
        started: false,
    })
}

impl<'p, 'a> Iterator for PropBatches<'p, 'a> {
    type Item = PropBatch<'p, 'a>;

    fn next(&mut self) -> Option<PropBatch<'p, 'a>> {
        if self.started && self.rest.is_empty() {
            return None;
        }
        self.started = true;
        let mut size = EMPTY_CONNPROP_LEN;
        let mut n: usize = 0;
        for p in self.rest {
            let next = p.encoded_len().and_then(|l| l.checked_add(size));
            match next {
                Some(s) if s <= self.max_message && n < MAX_PROPS_PER_SET as usize => {
                    size = s;
                    n = n.saturating_add(1);
                }
                _ => break,
            }
        }
        let head = self.rest.get(..n)?;
        let tail = self.rest.get(n..)?;
        if head.is_empty() && !tail.is_empty() {
            // Cannot happen after the check in `split_properties`.
            self.rest = &[];
            return None;
        }
        self.rest = tail;
        Some(PropBatch {
            props: head,
            tpmore: !tail.is_empty(),
        })
    }
}
