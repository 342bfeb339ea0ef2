// SPDX-License-Identifier: GPL-2.0

//! [`QpEngine::flush`]: the QP going to the error state.
//!
//! A flush completes everything the engine and the driver's queues hold with
//! [`WcStatus::WrFlushErr`]: the message in flight, the requests in the ORD slots, the rest of
//! a Read into several SGEs, the bound receive request and every queued SQ and RQ entry. It
//! reaches into every part of the engine, as nothing else does, so it is kept on its own.

use super::*;

/// Upper bound on the entries one [`QpEngine::flush`] takes from each of the
/// driver's queues, so that a context whose pop does not pop cannot hang it.
const FLUSH_LIMIT: u32 = 1 << 20;

impl<C: Crc32c + Copy, S: SlotStorage<E>, E: SgeEntry> QpEngine<C, S, E> {
    /// QP to error: completes every outstanding request (ORD slots, the
    /// partially sent work request) and every queued SQ and RQ entry with
    /// [`WcStatus::WrFlushErr`], signaled or not (a message already produced
    /// whole completes as sent). A pending TERMINATE stays pending; otherwise
    /// nothing is sent any more.
    pub fn flush<X: QpContext<Sge = E>>(&mut self, ctx: &mut X) {
        if self.st.stage == Stage::Running {
            self.st.stage = Stage::Flushed;
        }
        // A message produced whole, whose completion waited for the next
        // call, went to TCP before the flush: it completes as it would have.
        self.finish_if_deferred(ctx);
        if let Some(InFlight {
            job: Job::Sq { wr, .. },
            ..
        }) = self.inflight.take()
        {
            ctx.complete(Completion::send(&wr, WcStatus::WrFlushErr, 0));
        }
        while let Some((slot, kind)) = self.st.requester.front() {
            if self.st.requester.complete(kind).is_err() {
                break;
            }
            if let Some(o) = self.st.slots.outstanding_mut().get_mut(slot) {
                if o.live {
                    o.live = false;
                    // A Read into several SGEs completes once, on its last
                    // part (or below, if that was not sent yet).
                    if o.last && !o.rtr {
                        ctx.complete(Completion::recv(o.wr_id, WcStatus::WrFlushErr, o.opcode, 0));
                    }
                }
            }
        }
        for o in self.st.slots.outstanding_mut().iter_mut() {
            o.live = false;
        }
        if let Some(split) = self.st.split.take() {
            ctx.complete(Completion::send(&split.wr, WcStatus::WrFlushErr, 0));
        }
        while self.st.responder.finish().is_some() {}
        for p in self.st.slots.pending_mut().iter_mut() {
            *p = Pending::Empty;
        }
        let mut budget = FLUSH_LIMIT;
        while let Some(wr) = ctx.peek_send() {
            ctx.pop_send();
            ctx.complete(Completion::send(&wr, WcStatus::WrFlushErr, 0));
            budget = budget.saturating_sub(1);
            if budget == 0 {
                break;
            }
        }
        if let Some(wr_id) = self.st.recv.take_id() {
            let status = self.st.recv_status.take().unwrap_or(WcStatus::WrFlushErr);
            ctx.complete(Completion::recv(wr_id, status, WcOpcode::Recv, 0));
        }
        let mut budget = FLUSH_LIMIT;
        while let Some(wr) = ctx.pop_recv() {
            ctx.complete(Completion::recv(
                wr.wr_id,
                WcStatus::WrFlushErr,
                WcOpcode::Recv,
                0,
            ));
            budget = budget.saturating_sub(1);
            if budget == 0 {
                break;
            }
        }
    }
}
