// SPDX-License-Identifier: GPL-2.0

//! The completions and connection events of an endpoint: replies in, send buffers back,
//! connection loss.
//!
//! A [`Receiver`] runs from the queue pair's CQ work. It reaches its transport through the
//! transport's handle (which holds no reference: the transport owns the endpoint that owns
//! the receiver) and acts only while its endpoint is the current one: completions flushed while
//! an old endpoint drains reach nothing.

use super::{endpoint::Buffers, ClientTransport, INLINE_SIZE};
use kernel::{
    new_mutex,
    prelude::*,
    rdma::consumer::{
        cm::{CmEvent, CmEventWatcher},
        kernel_qp::{CompletionHandler, WorkCompletion},
    },
    sunrpc::xprt::Handle,
    sync::{Arc, Mutex},
};

/// Takes the completions and connection events of one endpoint.
#[pin_data]
pub(crate) struct Receiver {
    xprt: Arc<Handle<ClientTransport>>,
    buffers: Arc<Buffers>,
    /// A received message, copied out of its receive buffer before that is posted again.
    #[pin]
    message: Mutex<KVec<u8>>,
}

impl Receiver {
    pub(crate) fn new(
        xprt: Arc<Handle<ClientTransport>>,
        buffers: Arc<Buffers>,
    ) -> Result<Arc<Self>> {
        let message = KVec::from_elem(0u8, INLINE_SIZE as usize, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                xprt,
                buffers,
                message <- new_mutex!(message),
            }),
            GFP_KERNEL,
        )
    }

    /// The connection failed or is being torn down: if it is the current one, the RPC client
    /// closes it and connects again.
    fn lost(&self) {
        let generation = self.buffers.generation;
        self.xprt
            .with(|xprt| ClientTransport::connection_lost(xprt, generation));
    }
}

impl CompletionHandler for Receiver {
    fn completed(&self, wc: &WorkCompletion) {
        let index = wc.tag as usize;
        if !wc.is_recv {
            self.buffers.send_done(index);
            if !wc.status.is_success() {
                self.lost();
            }
            return;
        }
        if !wc.status.is_success() {
            self.lost();
            return;
        }
        let mut message = self.message.lock();
        let len = (wc.byte_len as usize).min(message.len());
        let Some(message) = message.get_mut(..len) else {
            return;
        };
        let copied = match self.buffers.recvs.get(index) {
            Some(buffer) => buffer.read(0, message),
            None => return,
        };
        self.buffers.repost_later(index);
        if copied.is_err() {
            return;
        }
        let generation = self.buffers.generation;
        self.xprt.with(|xprt| {
            if xprt.is_current(generation) {
                ClientTransport::received(xprt, message);
            }
        });
    }
}

impl CmEventWatcher for Receiver {
    fn event(&self, event: &CmEvent) {
        // The server went away, or the device did: rdma_cm then waits until the id is
        // destroyed, which closing the connection does (from the RPC client's worker).
        if matches!(event, CmEvent::Disconnected | CmEvent::DeviceRemoval) {
            self.lost();
        }
    }
}
