// SPDX-License-Identifier: GPL-2.0

//! One connection of a client transport: the rdma_cm id with its queue pair, the buffers the
//! device sends from and receives into, and what the server said about its own buffers.
//!
//! Buffers belong to the endpoint, not to calls: [`INLINE_SIZE`] bytes each, mapped once.
//! A call is copied into a free send buffer, which its Send completion frees again; a
//! received message is copied out of its receive buffer by the [`Receiver`], and the buffer is
//! posted again before the next call is sent (so a server's replies always find one: every
//! call in flight had one posted before it went out).
//!
//! A new connection is a new endpoint: nothing of an old one, its buffers included, is used
//! again, and its completions are told apart by its generation.

use super::{ClientTransport, Counters, Receiver, INLINE_SIZE, MAX_REQUESTS};
use crate::proto::{
    chunk::ChunkListsRef,
    cm_private::CmPrivateData,
    v1::{self, V1BodyRef, V1_DEFAULT_INLINE},
    version::RPCRDMA_VERSION_1,
};
use core::{
    net::SocketAddr,
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{
    new_mutex,
    prelude::*,
    rdma::{
        consumer::{
            client::ProtectionDomain,
            cm::{CmEvent, CmId, ConnParam},
            dma_buffer::DmaBuffer,
            kernel_qp::{QpCaps, SendWr, Sge},
        },
        fixed_ring::FixedRing,
    },
    sunrpc::xprt::{Rqst, XdrBuf, Xprt},
    sync::{Arc, Mutex},
    time::msecs_to_jiffies,
};

/// Whether a call too large to send inline was reported (once per module load).
static TOO_LARGE_REPORTED: AtomicBool = AtomicBool::new(false);

/// Receives kept posted: one per call in flight, two to spare, and those for callbacks.
const RECVS: usize = MAX_REQUESTS as usize + 2 + super::backchannel::RECEIVES;
/// Send buffers: a call's buffer is free again only once its Send completed, which may be
/// after its reply arrived.
const SENDS: usize = 2 * MAX_REQUESTS as usize;
/// How long address and route resolution may take, in milliseconds.
const RESOLVE_MS: u32 = 5000;
/// How long the connection may take to be established, in milliseconds.
const ESTABLISH_MS: u32 = 30_000;

/// The buffers of an endpoint, shared with its [`Receiver`].
#[pin_data]
pub(crate) struct Buffers {
    /// The endpoint's generation (see [`ClientTransport`]).
    pub(crate) generation: u32,
    sends: KVec<Arc<DmaBuffer>>,
    pub(crate) recvs: KVec<Arc<DmaBuffer>>,
    /// Indices of send buffers no Send uses.
    #[pin]
    free_sends: Mutex<FixedRing<usize>>,
    /// Indices of receive buffers whose message was taken, to post again.
    #[pin]
    to_repost: Mutex<FixedRing<usize>>,
}

impl Buffers {
    fn new(pd: &Arc<ProtectionDomain>, generation: u32) -> Result<Arc<Self>> {
        let mut sends = KVec::with_capacity(SENDS, GFP_KERNEL)?;
        let mut free = FixedRing::new(SENDS, GFP_KERNEL)?;
        for index in 0..SENDS {
            sends.push(DmaBuffer::new(pd, INLINE_SIZE as usize)?, GFP_KERNEL)?;
            let _ = free.push(index);
        }
        let mut recvs = KVec::with_capacity(RECVS, GFP_KERNEL)?;
        for _ in 0..RECVS {
            recvs.push(DmaBuffer::new(pd, INLINE_SIZE as usize)?, GFP_KERNEL)?;
        }
        let to_repost = FixedRing::new(RECVS, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                generation,
                sends,
                recvs,
                free_sends <- new_mutex!(free),
                to_repost <- new_mutex!(to_repost),
            }),
            GFP_KERNEL,
        )
    }

    /// The Send that used send buffer `index` completed.
    pub(crate) fn send_done(&self, index: usize) {
        if index < self.sends.len() {
            // Cannot be full: each index is in the ring or in use, never both.
            let _ = self.free_sends.lock().push(index);
        }
    }

    /// The message of receive buffer `index` was taken: post the buffer again.
    pub(crate) fn repost_later(&self, index: usize) {
        if index < self.recvs.len() {
            // Cannot be full, as for `send_done`.
            let _ = self.to_repost.lock().push(index);
        }
    }
}

/// A connection to the server; dropping it drains and destroys the queue pair, then the id.
pub(crate) struct Endpoint {
    id: CmId,
    buffers: Arc<Buffers>,
    /// The largest message the server receives inline (RFC 8797; 1024 bytes without its
    /// private data), and at most what our send buffers hold.
    send_limit: usize,
}

/// Waits for the next event of `id`, which must be `wanted` (a resolution step).
fn expect_event(id: &CmId, wanted: &str) -> Result {
    let event = id.next_event(msecs_to_jiffies(RESOLVE_MS))?;
    if event.name() == wanted {
        return Ok(());
    }
    pr_info!("connecting: {} instead of {}\n", event.name(), wanted);
    Err(match event {
        CmEvent::AddrError(_) | CmEvent::RouteError(_) => EHOSTUNREACH,
        _ => ECONNABORTED,
    })
}

impl Endpoint {
    /// Connects to `server` in the transport's namespace; the endpoint's completions go to a
    /// [`Receiver`] of generation `generation`.
    pub(crate) fn connect(
        xprt: &Xprt<ClientTransport>,
        server: SocketAddr,
        generation: u32,
    ) -> Result<Arc<Self>> {
        let mut id = CmId::new_in(xprt.net())?;
        id.resolve_addr(None, &server, RESOLVE_MS)?;
        expect_event(&id, "ADDR_RESOLVED")?;
        id.resolve_route(RESOLVE_MS)?;
        expect_event(&id, "ROUTE_RESOLVED")?;
        let device = id.device()?;
        let depth = device.caps().max_qp_rd_atom.min(16) as u8;
        let pd = device.alloc_pd()?;
        let buffers = Buffers::new(&pd, generation)?;
        let receiver = Receiver::new(xprt.handle(), buffers.clone())?;
        let caps = QpCaps {
            max_send_wr: SENDS as u32,
            max_recv_wr: RECVS as u32,
        };
        let qp = id.create_qp_with_handler(&pd, caps, receiver.clone())?;
        for (index, buffer) in buffers.recvs.iter().enumerate() {
            qp.post_recv(
                Sge {
                    buffer,
                    offset: 0,
                    len: INLINE_SIZE as usize,
                },
                index as u64,
            )?;
        }
        let private = CmPrivateData::new(INLINE_SIZE, INLINE_SIZE, false).encode();
        id.connect(&ConnParam {
            private_data: &private,
            responder_resources: depth,
            initiator_depth: depth,
            retry_count: 6,
            rnr_retry_count: 0,
        })?;
        let peer = match id.next_event(msecs_to_jiffies(ESTABLISH_MS))? {
            CmEvent::Established(param) => CmPrivateData::decode(&param.private_data),
            CmEvent::Rejected(status, _) => {
                pr_info!("connection to {} rejected ({})\n", server, status);
                return Err(ECONNREFUSED);
            }
            event => {
                pr_info!("connecting to {}: {}\n", server, event.name());
                return Err(ECONNREFUSED);
            }
        };
        // From now on a disconnect or the device going away ends the connection at once.
        id.watch(receiver);
        let server_receives = peer.map_or(V1_DEFAULT_INLINE, |p| p.recv_size);
        let send_limit = server_receives.min(INLINE_SIZE) as usize;
        pr_info!(
            "connected to {} (the server receives {} bytes inline{})\n",
            server,
            server_receives,
            if peer.is_some() {
                ""
            } else {
                ", no RFC 8797 private data"
            }
        );
        Ok(Arc::new(
            Self {
                id,
                buffers,
                send_limit,
            },
            GFP_KERNEL,
        )?)
    }

    /// The largest message the server receives inline (and we send).
    pub(crate) fn send_limit(&self) -> usize {
        self.send_limit
    }

    /// Asks the server to end the connection; the queue pair flushes what is posted.
    pub(crate) fn disconnect(&self) {
        let _ = self.id.disconnect();
    }

    /// Posts the receive buffers whose messages were taken.
    fn repost(&self) -> Result {
        let qp = self.id.qp()?;
        loop {
            let Some(index) = self.buffers.to_repost.lock().pop() else {
                return Ok(());
            };
            let buffer = self.buffers.recvs.get(index).ok_or(EINVAL)?;
            let sge = Sge {
                buffer,
                offset: 0,
                len: INLINE_SIZE as usize,
            };
            if let Err(e) = qp.post_recv(sge, index as u64) {
                self.buffers.repost_later(index);
                return Err(e);
            }
        }
    }

    /// Sends the call of `rqst` inline: a Version 1 `RDMA_MSG` header without chunks, then
    /// the whole call.
    ///
    /// `EMSGSIZE` if it does not fit the server's inline threshold, `ENOBUFS` if every send
    /// buffer is in use, `ENOTCONN` if the queue pair refuses work.
    pub(crate) fn send_call(&self, rqst: &Rqst<'_>, counters: &Counters) -> Result {
        self.repost().map_err(|_| ENOTCONN)?;
        let Some(index) = self.buffers.free_sends.lock().pop() else {
            Counters::add(&counters.no_send_buffer, 1);
            return Err(ENOBUFS);
        };
        let result = self.marshal_and_post(rqst, index, counters);
        if result.is_err() {
            self.buffers.send_done(index);
        }
        result
    }

    fn marshal_and_post(&self, rqst: &Rqst<'_>, index: usize, counters: &Counters) -> Result {
        let buffer = self.buffers.sends.get(index).ok_or(EINVAL)?;
        let mut header = [0u8; 28];
        let body = V1BodyRef::Msg(ChunkListsRef::EMPTY);
        let header_len = v1::encode(
            &mut header,
            rqst.xid(),
            RPCRDMA_VERSION_1,
            MAX_REQUESTS,
            &body,
        )
        .map_err(|_| EINVAL)?;
        let call = rqst.snd_buf();
        let total = header_len + call.layout().len() as usize;
        if total > self.send_limit {
            Counters::add(&counters.failed_marshal, 1);
            if !TOO_LARGE_REPORTED.swap(true, Ordering::Relaxed) {
                pr_warn!(
                    "a call of {} bytes does not fit the server's {} inline: it fails \
                     (Read chunks are not implemented)\n",
                    total,
                    self.send_limit
                );
            }
            return Err(EMSGSIZE);
        }
        buffer.write(0, header.get(..header_len).ok_or(EINVAL)?)?;
        let mut offset = header_len;
        call.for_each_segment(|segment| {
            buffer.write(offset, segment)?;
            offset += segment.len();
            Ok(())
        })?;
        Counters::add(&counters.pullup_copy, offset - header_len);
        let send = SendWr::Send {
            local: Sge {
                buffer,
                offset: 0,
                len: offset,
            },
            solicited: false,
        };
        self.id
            .qp()?
            .post_send(&send, index as u64)
            .map_err(|_| ENOTCONN)
    }

    /// Sends a message of our own, not a call: `header`, then `body`, inline in one Send (a
    /// reply on the backchannel).
    ///
    /// `EMSGSIZE` if it does not fit the server's inline threshold, `ENOBUFS` if every send
    /// buffer is in use, `ENOTCONN` if the queue pair refuses work.
    pub(crate) fn send_message(
        &self,
        header: &[u8],
        body: &XdrBuf<'_>,
        counters: &Counters,
    ) -> Result {
        self.repost().map_err(|_| ENOTCONN)?;
        if header.len() + body.layout().len() as usize > self.send_limit {
            Counters::add(&counters.failed_marshal, 1);
            return Err(EMSGSIZE);
        }
        let Some(index) = self.buffers.free_sends.lock().pop() else {
            Counters::add(&counters.no_send_buffer, 1);
            return Err(ENOBUFS);
        };
        let result = self
            .buffers
            .sends
            .get(index)
            .ok_or(EINVAL)
            .and_then(|buffer| {
                buffer.write(0, header)?;
                let mut offset = header.len();
                body.for_each_segment(|segment| {
                    buffer.write(offset, segment)?;
                    offset += segment.len();
                    Ok(())
                })?;
                Counters::add(&counters.pullup_copy, offset - header.len());
                let send = SendWr::Send {
                    local: Sge {
                        buffer,
                        offset: 0,
                        len: offset,
                    },
                    solicited: false,
                };
                self.id
                    .qp()?
                    .post_send(&send, index as u64)
                    .map_err(|_| ENOTCONN)
            });
        if result.is_err() {
            self.buffers.send_done(index);
        }
        result
    }
}
