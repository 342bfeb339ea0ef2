// SPDX-License-Identifier: GPL-2.0

//! The connect worker: rdma_cm's address and route resolution and the connection itself wait
//! for events, so they run in a work item of their own rather than in the RPC client's
//! `connect` call, which only queues it.
//!
//! The worker owns the connect (and so the transport's write lock) until it completes it. A
//! reconnect first waits the delay the RPC client computes for the transport, and backs the
//! next one off: none after a connection that carried replies, then 5 s, doubling up to a
//! minute while connects fail (a close does not clear the delay; a reply does).

use super::ClientTransport;
use kernel::{
    new_mutex,
    prelude::*,
    sunrpc::xprt::Connect,
    sync::{Arc, Mutex},
    time::msecs_to_jiffies,
    workqueue::{self, impl_has_work, new_work, Work, WorkItem},
};

/// One connect of a transport, queued on the system's queue for long work.
#[pin_data]
pub(crate) struct ConnectWork {
    /// The connect, taken by the worker.
    #[pin]
    connect: Mutex<Option<Connect<ClientTransport>>>,
    /// Whether the transport was connected before: then the worker backs off first.
    reconnect: bool,
    #[pin]
    work: Work<ConnectWork>,
}

impl_has_work! {
    impl HasWork<Self> for ConnectWork { self.work }
}

impl ConnectWork {
    /// Queues `connect`; if that fails, `connect` is dropped, which fails it with `ENOTCONN`.
    pub(crate) fn queue(connect: Connect<ClientTransport>, reconnect: bool) {
        let work = Arc::pin_init(
            pin_init!(Self {
                connect <- new_mutex!(Some(connect), "rpcrdma2::ConnectWork::connect"),
                reconnect,
                work <- new_work!("rpcrdma2::ConnectWork::work"),
            }),
            GFP_KERNEL,
        );
        if let Ok(work) = work {
            // A new item is never queued already.
            let _ = workqueue::system_long().enqueue(work);
        }
    }
}

impl WorkItem for ConnectWork {
    type Pointer = Arc<ConnectWork>;

    fn run(this: Arc<ConnectWork>) {
        let Some(connect) = this.connect.lock().take() else {
            return;
        };
        if this.reconnect {
            // The C transport's first reestablish timeout: 5 s.
            connect.back_off(msecs_to_jiffies(5000));
        }
        let result = ClientTransport::connect_now(connect.xprt());
        if let Err(e) = result {
            pr_info!("connecting failed: {:?}\n", e);
        }
        connect.complete(result);
    }
}
