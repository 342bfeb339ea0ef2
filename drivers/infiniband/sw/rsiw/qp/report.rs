// SPDX-License-Identifier: GPL-2.0

//! What the standard tools see of a QP: its detail in `rdma resource show qp` and, for its
//! connection, `rdma resource show cm_id`; the QP counter (`rdma statistic qp`) it counts in
//! when bound to one; the connections it counts by their MPA terms.

use super::*;

impl Qp {
    /// Binds the QP to the QP counter `counter`, or unbinds it with `None`: its counts go
    /// there from this call on; what the engine counted before goes where it counted before.
    pub(crate) fn set_counter(&self, counter: Option<Arc<Counters>>) {
        let mut inner = self.inner.lock();
        let Inner { engine, queues, .. } = &mut *inner;
        if let Some(e) = engine.as_mut() {
            let sink = self.sink(queues);
            e.take_stats(|s, n| sink.data(s, n));
        }
        queues.counter = counter;
    }

    /// Whether its connection is the one of the iw_cm id whose identity is `key`.
    pub(crate) fn has_cm_id(&self, key: usize) -> bool {
        self.connection
            .lock()
            .as_ref()
            .and_then(|c| c.cm_id.as_ref())
            .is_some_and(|id| id.key() == key)
    }

    /// The detail of its connection for `rdma resource show cm_id`: the QP's number and the
    /// terms the MPA exchange set up.
    pub(crate) fn fill_restrack_connection(&self, attrs: &mut RestrackAttrs<'_>) -> Result {
        let terms = self.inner.lock().queues.terms;
        attrs.put_u32(c_str!("qpn"), self.qpn)?;
        match terms {
            Some(t) => put_terms(&t, attrs),
            None => Ok(()),
        }
    }

    /// Counts a connection the QP was set up with on `terms`.
    pub(crate) fn count_established(&self, terms: &Terms) {
        let inner = self.inner.lock();
        self.sink(&inner.queues)
            .established(terms.revision, terms.crc, terms.rtr);
    }

    /// The QP's detail for `rdma resource show qp`: queue depths and use, and the terms of
    /// its connection.
    pub(super) fn restrack(&self, attrs: &mut RestrackAttrs<'_>) -> Result {
        let (used, terms) = {
            let inner = self.inner.lock();
            let used = match &inner.queues.work {
                WorkQueues::Kernel { sq, rq } => Some((sq.len(), rq.len())),
                // A process's rings are in its memory: their use is the process's to know.
                WorkQueues::User(_) | WorkQueues::Released => None,
            };
            (used, inner.queues.terms)
        };
        attrs.put_u32(c_str!("sq_depth"), self.caps.max_send_wr)?;
        attrs.put_u32(c_str!("rq_depth"), self.caps.max_recv_wr)?;
        if let Some((sq, rq)) = used {
            attrs.put_u32(c_str!("sq_used"), u32::try_from(sq).unwrap_or(u32::MAX))?;
            attrs.put_u32(c_str!("rq_used"), u32::try_from(rq).unwrap_or(u32::MAX))?;
        }
        attrs.put_u32(c_str!("srq"), u32::from(self.srq.is_some()))?;
        match terms {
            Some(t) => put_terms(&t, attrs),
            None => Ok(()),
        }
    }
}

/// Adds the terms a connection was set up on to the driver's detail of a resource.
fn put_terms(t: &Terms, attrs: &mut RestrackAttrs<'_>) -> Result {
    attrs.put_u32(c_str!("mpa_rev"), t.revision.into())?;
    attrs.put_u32(c_str!("mpa_crc"), u32::from(t.crc))?;
    attrs.put_u32(c_str!("ird"), t.ird.into())?;
    attrs.put_u32(c_str!("ord"), t.ord.into())?;
    attrs.put_u32(c_str!("large_fpdus"), u32::from(t.large_fpdus))?;
    let (p2p, rtr) = match t.rtr {
        RtrState::None => (0, c_str!("none")),
        RtrState::Sent(kind) | RtrState::Received(kind) => (
            1,
            match kind {
                RtrKind::Send => c_str!("send"),
                RtrKind::Write => c_str!("write"),
                RtrKind::Read => c_str!("read"),
            },
        ),
    };
    attrs.put_u32(c_str!("p2p"), p2p)?;
    attrs.put_str(c_str!("rtr"), rtr)
}
