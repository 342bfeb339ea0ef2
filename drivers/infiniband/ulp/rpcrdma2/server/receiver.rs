// SPDX-License-Identifier: GPL-2.0

//! The completions and connection events of a connection: calls in, send buffers back,
//! connection loss.
//!
//! A [`Receiver`] runs from the queue pair's CQ work and from rdma_cm's event handler. It
//! reaches its connection through the connection's handle, which holds no reference: the
//! connection's last reference frees it, which drains the queue pair and so waits for this
//! work. After that the handle reaches nothing, and completions flushed then do nothing.

use super::{
    buffers::{Buffers, Received},
    Connection,
};
use kernel::{
    rdma::consumer::{
        cm::{CmEvent, CmEventWatcher},
        kernel_qp::{CompletionHandler, WorkCompletion},
    },
    sunrpc::{svc_xprt::SvcHandle, svc_xprt_class::ServerClass},
    sync::Arc,
};

/// Takes the completions and connection events of one connection of class `C`.
pub(crate) struct Receiver<C: ServerClass> {
    pub(crate) handle: Arc<SvcHandle<Connection<C>>>,
    pub(crate) buffers: Arc<Buffers>,
}

impl<C: ServerClass> Receiver<C> {
    /// The connection failed or is going: a server thread closes it.
    fn lost(&self) {
        self.handle.with(|xprt| xprt.deferred_close());
    }
}

impl<C: ServerClass> CompletionHandler for Receiver<C> {
    fn completed(&self, wc: &WorkCompletion) {
        let ok = wc.status.is_success();
        if wc.is_recv {
            if !ok {
                self.lost();
                return;
            }
            let message = Received {
                index: wc.tag as usize,
                len: wc.byte_len as usize,
            };
            self.handle.with(|xprt| {
                self.buffers.arrived(message, || xprt.set_data_pending());
                xprt.enqueue();
            });
            return;
        }
        self.buffers.send_done(wc.tag as usize);
        if ok {
            // A thread may have been held back for want of a send buffer.
            self.handle.with(|xprt| xprt.enqueue());
        } else {
            self.lost();
        }
    }
}

impl<C: ServerClass> CmEventWatcher for Receiver<C> {
    fn event(&self, event: &CmEvent) {
        if matches!(event, CmEvent::Disconnected | CmEvent::DeviceRemoval) {
            self.lost();
        }
    }
}
