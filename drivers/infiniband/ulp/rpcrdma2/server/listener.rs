// SPDX-License-Identifier: GPL-2.0

//! A listener: an rdma_cm id listening for a service, whose connection requests server threads
//! accept.
//!
//! rdma_cm queues a connection request on the listener's id as a new id; the listener's
//! [`ListenWatcher`] then marks the listener as having connections pending, and a server thread
//! calls `accept`, which makes a [`Connection`](super::Connection) of the request.

use super::{connection, WithBackchannel};
use core::marker::PhantomData;
use kernel::{
    prelude::*,
    rdma::consumer::cm::{CmEvent, CmEventWatcher, CmId},
    sunrpc::{
        svc_xprt::{Kind, Signal, SvcHandle, SvcTransport, SvcXprt},
        svc_xprt_class::{ListenArgs, SvcXprtPtr},
    },
    sync::Arc,
};

/// Connection requests rdma_cm keeps for the listener before it refuses more.
const BACKLOG: i32 = 32;

/// A listener of class `C`.
pub(crate) struct Listener<C: WithBackchannel> {
    id: CmId,
    _class: PhantomData<C>,
}

impl<C: WithBackchannel> Listener<C> {
    /// Listens where the service asks (`xpo_create`): an IPv6 listener takes IPv6 only, so that
    /// the service's IPv4 listener on the same port exists beside it.
    pub(crate) fn create(args: &ListenArgs<'_>) -> Result<SvcXprtPtr> {
        let address = args.address()?;
        let id = CmId::new_in(args.net())?;
        if address.is_ipv6() {
            id.set_afonly(true)?;
        }
        id.bind(&address)?;
        let local = id.local_address().ok();
        let xprt = SvcXprt::<Self>::create(
            args.server(),
            args.net(),
            Kind::Listener,
            local.as_ref(),
            None,
            move |handle| {
                id.watch(Arc::new(ListenWatcher { handle }, GFP_KERNEL)?);
                id.listen(BACKLOG)?;
                Ok(Self {
                    id,
                    _class: PhantomData,
                })
            },
        )?;
        pr_info!(
            "listening on {} (class \"{}\")\n",
            address,
            C::NAME.to_str().unwrap_or("?")
        );
        Ok(xprt)
    }
}

#[vtable]
impl<C: WithBackchannel> SvcTransport for Listener<C> {
    type Class = C;
    type Context = ();

    fn accept(xprt: &SvcXprt<Self>) -> Option<SvcXprtPtr> {
        loop {
            // Other events of a listener (none is expected) are dropped.
            let Ok(Some(event)) = xprt.id.try_event() else {
                return None;
            };
            let CmEvent::ConnectRequest(id, param) = event else {
                continue;
            };
            if xprt.id.has_events() {
                xprt.set_conn_pending();
            }
            return match connection::accept::<C>(xprt, id, &param) {
                Ok(new) => Some(new),
                Err(e) => {
                    pr_info!("refused a connection: {:?}\n", e);
                    None
                }
            };
        }
    }

    fn detach(_xprt: &SvcXprt<Self>) {}
}

/// Marks the listener as having connections pending when a request arrives.
struct ListenWatcher<C: WithBackchannel> {
    handle: Arc<SvcHandle<Listener<C>>>,
}

impl<C: WithBackchannel> CmEventWatcher for ListenWatcher<C> {
    fn event(&self, _event: &CmEvent) {}

    fn connect_request(&self) {
        self.handle.signal(Signal::ConnPending);
    }
}
