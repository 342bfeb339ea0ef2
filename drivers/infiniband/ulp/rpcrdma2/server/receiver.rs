// SPDX-License-Identifier: GPL-2.0

//! The completions and connection events of a connection: calls in, send buffers back, the
//! RDMA operations of chunks to the threads that wait for them, connection loss, device
//! removal.
//!
//! A [`Receiver`] runs from the queue pair's CQ work, from rdma_cm's event handler and from
//! the removal of the device. It reaches its connection through the connection's handle,
//! which holds no reference: the connection's last reference frees it, which drains the queue
//! pair and so waits for this work. After that the handle reaches nothing, and completions
//! flushed then do nothing. What it signals before the connection is set up (the client's
//! first call may arrive while `accept` still runs) takes effect once it is.

use super::{
    buffers::{Buffers, Received},
    rdma::{Ops, OP_TAG},
    Connection, WithBackchannel,
};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    prelude::*,
    rdma::consumer::{
        cm::{CmEvent, CmEventWatcher},
        device_removal::RemovalHandler,
        kernel_qp::{CompletionHandler, WorkCompletion},
    },
    sunrpc::svc_xprt::{Signal, SvcHandle},
    sync::Arc,
};

/// Takes the completions and connection events of one connection of class `C`.
pub(crate) struct Receiver<C: WithBackchannel> {
    pub(crate) handle: Arc<SvcHandle<Connection<C>>>,
    pub(crate) buffers: Arc<Buffers>,
    /// Whether why the connection goes was logged.
    pub(crate) failure_reported: AtomicBool,
    pub(crate) ops: Arc<Ops>,
}

impl<C: WithBackchannel> Receiver<C> {
    /// The connection failed or is going: a server thread closes it.
    fn lost(&self) {
        self.handle.signal(Signal::Close);
    }

    /// Logs why the connection goes, once.
    fn report(&self, what: core::fmt::Arguments<'_>) {
        if !self.failure_reported.swap(true, Ordering::Relaxed) {
            pr_info!("closing a connection: {}\n", what);
        }
    }
}

impl<C: WithBackchannel> CompletionHandler for Receiver<C> {
    fn completed(&self, wc: &WorkCompletion) {
        let ok = wc.status.is_success();
        let op = !wc.is_recv && wc.tag & OP_TAG != 0;
        if op {
            // A chunk's registration, RDMA Read or Write, or invalidation: its thread waits.
            self.ops.completed(wc.tag, ok);
        }
        if !ok {
            if !wc.status.is_flush() {
                self.report(format_args!(
                    "{} failed (work completion status {})",
                    if wc.is_recv {
                        "a receive"
                    } else if op {
                        "an RDMA operation of a chunk"
                    } else {
                        "a Send"
                    },
                    wc.status.raw()
                ));
            }
            if !wc.is_recv && !op {
                self.buffers.send_completed(wc.tag);
            }
            self.lost();
            return;
        }
        if op {
            return;
        }
        if wc.is_recv {
            let message = Received {
                index: wc.tag as usize,
                len: wc.byte_len as usize,
            };
            self.buffers
                .arrived(message, || self.handle.signal(Signal::DataPending));
            return;
        }
        self.buffers.send_completed(wc.tag);
        // A thread may have been held back for want of a send buffer.
        self.handle.signal(Signal::Ready);
    }
}

impl<C: WithBackchannel> CmEventWatcher for Receiver<C> {
    fn event(&self, event: &CmEvent) {
        if matches!(event, CmEvent::Disconnected | CmEvent::DeviceRemoval) {
            self.report(format_args!("{}", event.name()));
            self.lost();
        }
    }
}

impl<C: WithBackchannel> RemovalHandler for Receiver<C> {
    fn device_removed(&self) {
        self.report(format_args!("the device is being removed"));
        self.lost();
    }
}
