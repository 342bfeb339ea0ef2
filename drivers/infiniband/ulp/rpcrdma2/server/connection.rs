// SPDX-License-Identifier: GPL-2.0

//! A connection: one client's queue pair, and the calls and replies it carries.
//!
//! A server thread takes one received message at a time ([`SvcTransport::recvfrom`]): the
//! protocol core decodes its Version 1 header, and an inline call is copied into the thread's
//! request. The reply goes back inline ([`SvcTransport::sendto`]) after a header that grants
//! the client credits. What cannot be served earns an `RDMA_ERROR` in its place: the client's
//! call then fails instead of waiting for a reply.

use super::{
    buffers::{Buffers, Received, RECVS, SENDS},
    listener::Listener,
    Receiver,
};
use crate::{
    client::INLINE_SIZE,
    devices::Devices,
    proto::{
        chunk::ChunkListsRef,
        cm_private::CmPrivateData,
        dispatch::encode_error_reply,
        error::{ErrorBody, ErrorReply, V1Error},
        v1::{self, V1Body, V1BodyRef, V1DecodeConfig, V1_DEFAULT_INLINE},
        version::RPCRDMA_VERSION_1,
    },
};
use core::{
    fmt,
    marker::PhantomData,
    net::SocketAddr,
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{
    prelude::*,
    rdma::consumer::{
        client::ProtectionDomain,
        cm::{CmId, ConnParam, ReceivedParam},
        device_removal::DeviceUse,
        dma_buffer::DmaBuffer,
        kernel_qp::{QpCaps, SendWr, Sge},
    },
    sunrpc::{
        svc_xprt::{Kind, SvcRqst, SvcTransport, SvcXprt},
        svc_xprt_class::{ServerClass, SvcXprtPtr},
    },
    sync::Arc,
};

/// Whether a call with chunks was reported (once per module load).
static CHUNKS_REPORTED: AtomicBool = AtomicBool::new(false);
/// Whether a reply too large to send inline was reported (once per module load).
static TOO_LARGE_REPORTED: AtomicBool = AtomicBool::new(false);

/// Room for the header of a reply: sixteen bytes, three empty chunk lists, and spare.
const HEADER_ROOM: usize = 64;

/// One client's connection, of class `C`.
pub(crate) struct Connection<C: ServerClass> {
    /// Dropped first: drains and destroys the queue pair, then the id.
    id: CmId,
    buffers: Arc<Buffers>,
    _pd: Arc<ProtectionDomain>,
    /// The largest message the client receives inline (RFC 8797; 1024 bytes without its
    /// private data), at most our buffers' size.
    send_limit: usize,
    _class: PhantomData<C>,
    /// Dropped last, once nothing of the device is used any more (see [`Devices`]).
    _device_use: DeviceUse,
}

/// Accepts the connection request `id` with the client's parameters `param`, for `listener`:
/// a queue pair with every receive posted, then the acceptance with our RFC 8797 private data.
pub(crate) fn accept<C: ServerClass>(
    listener: &SvcXprt<Listener<C>>,
    mut id: CmId,
    param: &ReceivedParam,
) -> Result<SvcXprtPtr> {
    let peer = CmPrivateData::decode(&param.private_data);
    let client_receives = peer.map_or(V1_DEFAULT_INLINE, |p| p.recv_size);
    let send_limit = client_receives.min(INLINE_SIZE) as usize;
    let device = id.device()?;
    let caps = device.caps();
    let pd = device.alloc_pd()?;
    let buffers = Buffers::new(&pd)?;
    let local = id.local_address().ok();
    let remote = id.peer_address().ok();
    let xprt = SvcXprt::<Connection<C>>::create(
        listener.server(),
        listener.net(),
        Kind::Connection,
        local.as_ref(),
        remote.as_ref(),
        |handle| {
            let receiver = Arc::new(
                Receiver {
                    handle,
                    buffers: buffers.clone(),
                    failure_reported: AtomicBool::new(false),
                },
                GFP_KERNEL,
            )?;
            // Refused while the device is being removed; a removal that starts later closes
            // the connection through the receiver.
            let device_use = DeviceUse::new::<Devices>(&device, receiver.clone())?;
            let qp_caps = QpCaps {
                max_send_wr: (SENDS as u32).min(caps.max_qp_wr),
                max_recv_wr: RECVS as u32,
            };
            let qp = id.create_qp_with_handler(&pd, qp_caps, receiver.clone())?;
            for (index, buffer) in buffers.recvs.iter().enumerate() {
                let sge = Sge {
                    buffer,
                    offset: 0,
                    len: INLINE_SIZE as usize,
                };
                qp.post_recv(sge, index as u64)?;
                buffers.posted(1);
            }
            id.watch(receiver);
            let private = CmPrivateData::new(INLINE_SIZE, INLINE_SIZE, false).encode();
            let depth = caps.max_qp_rd_atom.min(16) as u8;
            id.accept(&ConnParam {
                private_data: &private,
                responder_resources: param.responder_resources.min(depth),
                initiator_depth: param.initiator_depth.min(depth),
                retry_count: 6,
                rnr_retry_count: 0,
            })?;
            Ok(Connection {
                id,
                buffers,
                _pd: pd,
                send_limit,
                _class: PhantomData,
                _device_use: device_use,
            })
        },
    )?;
    pr_info!(
        "accepted {} (it receives {} bytes inline{})\n",
        Peer(remote),
        client_receives,
        if peer.is_some() {
            ""
        } else {
            ", no RFC 8797 private data"
        }
    );
    Ok(xprt)
}

/// A client's address for messages, if it is known.
struct Peer(Option<SocketAddr>);

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(address) => write!(f, "{address}"),
            None => f.write_str("a client"),
        }
    }
}

impl<C: ServerClass> Connection<C> {
    /// Posts receive buffer `index` again; the connection goes if that fails.
    fn repost(xprt: &SvcXprt<Self>, index: usize) {
        let posted = xprt.id.qp().and_then(|qp| {
            let buffer = xprt.buffers.recvs.get(index).ok_or(EINVAL)?;
            let sge = Sge {
                buffer,
                offset: 0,
                len: INLINE_SIZE as usize,
            };
            qp.post_recv(sge, index as u64)
        });
        match posted {
            Ok(()) => xprt.buffers.posted(1),
            Err(_) => xprt.deferred_close(),
        }
    }

    /// Decodes the message `received` and places its call in `rqst`; returns the call's
    /// length, or 0 for a message that carries none (it was answered with an error, or
    /// dropped).
    fn take_call(&self, received: Received, rqst: &mut SvcRqst<'_>) -> Result<usize> {
        let buffer = self.buffers.recvs.get(received.index).ok_or(EINVAL)?;
        let len = received.len.min(INLINE_SIZE as usize);
        let mut message = KVec::from_elem(0u8, len, GFP_KERNEL)?;
        buffer.read(0, &mut message)?;
        let decoded = v1::decode(&message, &V1DecodeConfig::default());
        let header = match decoded.and_then(|h| v1::check_call(&h).map(|()| h)) {
            Ok(header) => header,
            Err(fault) => {
                pr_debug!("a malformed message: {:?}\n", fault);
                if let Some(reply) = fault.reply() {
                    self.send_error(&reply);
                }
                return Ok(0);
            }
        };
        match header.body {
            V1Body::Msg { chunks, payload }
                if chunks.reads.is_empty() && chunks.writes.is_empty() =>
            {
                rqst.set_arg(payload)?;
                Ok(payload.len())
            }
            V1Body::Msg { .. } | V1Body::NoMsg { .. } => {
                if !CHUNKS_REPORTED.swap(true, Ordering::Relaxed) {
                    pr_info!(
                        "calls with Read or Write chunks are not served yet: ERR_CHUNK for \
                         call {:#x}\n",
                        header.xid
                    );
                }
                self.send_error(&ErrorReply {
                    xid: header.xid,
                    vers: header.vers,
                    body: ErrorBody::V1(V1Error::Chunk),
                });
                Ok(0)
            }
            // Neither is a call: dropped.
            V1Body::Done | V1Body::Error(_) => Ok(0),
        }
    }

    /// Answers with the error header `reply` (best effort: without a send buffer, the client's
    /// call times out instead).
    fn send_error(&self, reply: &ErrorReply) {
        let mut header = [0u8; HEADER_ROOM];
        let Ok(len) = encode_error_reply(&mut header, reply, self.buffers.grant()) else {
            return;
        };
        let _ = self.send(&header[..len], |_, _| Ok(0));
    }

    /// Sends `header` and then what `body` writes into the send buffer after it (given the
    /// buffer and the offset; it returns the bytes written), as one Send.
    fn send(
        &self,
        header: &[u8],
        body: impl FnOnce(&Arc<DmaBuffer>, usize) -> Result<usize>,
    ) -> Result<usize> {
        let index = self.buffers.take_send().ok_or(ENOBUFS)?;
        let posted = (|| -> Result<usize> {
            let buffer = self.buffers.sends.get(index).ok_or(EINVAL)?;
            buffer.write(0, header)?;
            let len = header.len() + body(buffer, header.len())?;
            let send = SendWr::Send {
                local: Sge {
                    buffer,
                    offset: 0,
                    len,
                },
                solicited: false,
            };
            self.id.qp()?.post_send(&send, index as u64)?;
            Ok(len)
        })();
        if posted.is_err() {
            self.buffers.send_done(index);
        }
        posted
    }
}

#[vtable]
impl<C: ServerClass> SvcTransport for Connection<C> {
    type Class = C;

    fn has_wspace(xprt: &SvcXprt<Self>) -> bool {
        xprt.buffers.has_send()
    }

    fn recvfrom(xprt: &SvcXprt<Self>, rqst: &mut SvcRqst<'_>) -> Result<usize> {
        let next = xprt.buffers.next(|| xprt.clear_data_pending());
        // Another thread may take the next message now.
        xprt.received();
        let Some(received) = next else {
            return Ok(0);
        };
        let call = xprt.take_call(received, rqst);
        Self::repost(xprt, received.index);
        call
    }

    fn sendto(xprt: &SvcXprt<Self>, rqst: &mut SvcRqst<'_>) -> Result<usize> {
        let xid = rqst.xid();
        let res = rqst.res();
        let len = res.layout().len() as usize;
        let mut header = [0u8; HEADER_ROOM];
        let body = V1BodyRef::Msg(ChunkListsRef::EMPTY);
        let grant = xprt.buffers.grant();
        let header_len =
            v1::encode(&mut header, xid, RPCRDMA_VERSION_1, grant, &body).map_err(|_| EMSGSIZE)?;
        if header_len + len > xprt.send_limit {
            if !TOO_LARGE_REPORTED.swap(true, Ordering::Relaxed) {
                pr_info!(
                    "a reply of {} bytes does not fit the client's {} inline, and Reply chunks \
                     are not served yet: ERR_CHUNK for call {:#x}\n",
                    header_len + len,
                    xprt.send_limit,
                    xid
                );
            }
            xprt.send_error(&ErrorReply {
                xid,
                vers: RPCRDMA_VERSION_1,
                body: ErrorBody::V1(V1Error::Chunk),
            });
            return Ok(0);
        }
        let sent = xprt.send(&header[..header_len], |buffer, mut offset| {
            res.for_each_segment(|segment| {
                buffer.write(offset, segment)?;
                offset += segment.len();
                Ok(())
            })?;
            Ok(offset - header_len)
        });
        if let Err(e) = sent {
            pr_info!(
                "a reply could not be sent ({:?}): closing the connection\n",
                e
            );
            xprt.deferred_close();
        }
        sent
    }

    fn detach(xprt: &SvcXprt<Self>) {
        let _ = xprt.id.disconnect();
    }
}
