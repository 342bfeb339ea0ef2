// SPDX-License-Identifier: GPL-2.0

//! The receive side of the QP engine: what [`RxEngine`] asks of the QP as segments arrive
//! (receive buffers, tagged placement under grants, Read and Atomic responders, the requests of
//! ours that responses answer), carried out on the engine's state and the driver's context.

use super::*;

/// The receive engine's view of the QP.
pub(super) struct RxAdapter<'a, X: QpContext, S: SlotStorage<X::Sge>> {
    pub(super) st: &'a mut State<S, X::Sge>,
    pub(super) ctx: &'a mut X,
}

impl<X: QpContext, S: SlotStorage<X::Sge>> RxContext for RxAdapter<'_, X, S> {
    fn lookup_stag(&mut self, stag: u32) -> Option<MemoryRegion> {
        self.ctx.lookup_stag(stag)
    }

    fn place_tagged(&mut self, grant: &Grant, data: &[u8]) -> Result<(), TermError> {
        if grant.access.usage == TaggedUse::ReadResponse {
            let data = [data];
            return self.place_read_response(grant, Pieces::one(&data));
        }
        self.ctx.tagged_write(grant, data)
    }

    fn place_tagged_pieces(&mut self, grant: &Grant, data: Pieces<'_>) -> Result<(), TermError> {
        if grant.access.usage == TaggedUse::ReadResponse {
            return self.place_read_response(grant, data);
        }
        self.ctx.tagged_write_pieces(grant, data)
    }

    fn recv_buffer(&mut self) -> Option<u64> {
        if let Some(old) = self.st.recv.take_id() {
            // Cannot happen: every message that binds a buffer releases it
            // when it completes. Do not lose the request if it does.
            let status = self.st.recv_status.take().unwrap_or(WcStatus::WrFlushErr);
            self.ctx
                .complete(Completion::recv(old, status, WcOpcode::Recv, 0));
        }
        if !self.ctx.pop_recv_into(&mut self.st.recv.wr) {
            return None;
        }
        self.st.recv.bound = true;
        self.st.recv_status = None;
        Some(self.st.recv.wr.sges.total_len().unwrap_or(0))
    }

    fn place_untagged(&mut self, offset: u32, data: &[u8]) -> Result<(), TermError> {
        let Some(wr) = self.st.recv.get() else {
            return Err(TermError::DdpLocalCatastrophic);
        };
        let placed = sg_write(self.ctx, wr.sges.as_slice(), offset, data);
        placed.map_err(|status| {
            self.st.recv_status = Some(status);
            TermError::DdpLocalCatastrophic
        })
    }

    fn requester(&mut self) -> &mut Requester {
        &mut self.st.requester
    }

    fn responder(&mut self) -> &mut Responder {
        &mut self.st.responder
    }

    fn deliver(&mut self, event: RxEvent<'_>) -> Result<(), TermError> {
        let last = core::mem::replace(&mut self.st.last_rx, LastRx::Other);
        match event {
            RxEvent::Send {
                len,
                solicited,
                invalidate,
                ..
            } => {
                let Some(wr_id) = self.st.recv.take_id() else {
                    return Err(TermError::DdpLocalCatastrophic);
                };
                self.st.recv_status = None;
                let mut c = Completion::recv(wr_id, WcStatus::Success, WcOpcode::Recv, len);
                c.solicited = solicited;
                let mut result = Ok(());
                if let Some(stag) = invalidate {
                    match self.ctx.invalidate_remote(stag) {
                        Ok(()) => c.invalidated = Some(stag),
                        Err(e) => {
                            c.status = WcStatus::RemInvReqErr;
                            result = Err(e);
                        }
                    }
                }
                self.ctx.complete(c);
                if result.is_ok() {
                    self.st.last_rx = LastRx::Send { len };
                }
                result
            }
            RxEvent::Immediate {
                data, solicited, ..
            } => {
                let Some(wr_id) = self.st.recv.take_id() else {
                    return Err(TermError::DdpLocalCatastrophic);
                };
                self.st.recv_status = None;
                let (opcode, len) = match last {
                    LastRx::Write => (WcOpcode::RecvRdmaWithImm, 0),
                    LastRx::Send { .. } | LastRx::Other => (WcOpcode::Recv, 0),
                };
                let mut c = Completion::recv(wr_id, WcStatus::Success, opcode, len);
                c.imm = Some(data.as_be32());
                c.solicited = solicited;
                self.ctx.complete(c);
                Ok(())
            }
            RxEvent::ReadRequest {
                slot,
                header,
                source,
            } => {
                self.st.rx_stats.add(Stat::ReadRequestsRx, 1);
                let entry = self
                    .st
                    .slots
                    .pending_mut()
                    .get_mut(slot)
                    .ok_or(TermError::RdmapCatastrophicStream)?;
                *entry = Pending::Read { header, source };
                Ok(())
            }
            RxEvent::AtomicRequest {
                slot,
                header,
                target,
            } => {
                self.st.rx_stats.add(Stat::AtomicRequestsRx, 1);
                let op = AtomicOp::from_request(&header)?;
                // Without an entry to answer from, do not execute it.
                if self.st.slots.pending().get(slot).is_none() {
                    return Err(TermError::RdmapCatastrophicStream);
                }
                let original = self.ctx.tagged_atomic(&target, op)?;
                let entry = self
                    .st
                    .slots
                    .pending_mut()
                    .get_mut(slot)
                    .ok_or(TermError::RdmapCatastrophicStream)?;
                *entry = Pending::Atomic(AtomicResponseHeader {
                    request_id: header.request_id,
                    original_value: original,
                });
                Ok(())
            }
            RxEvent::ReadResponse { slot } => {
                self.st.rx_stats.add(Stat::ReadResponsesRx, 1);
                self.unblock_sq();
                let o = self.take_outstanding(slot)?;
                if !o.last {
                    // A part of a Read into several SGEs: the last one
                    // completes the work request.
                    return Ok(());
                }
                let step = if o.invalidate && o.sge.length() > 0 {
                    self.ctx.invalidate_local(o.sge.lkey())
                } else {
                    Ok(())
                };
                self.finish_request(&o, step)
            }
            RxEvent::AtomicResponse { slot, header } => {
                self.st.rx_stats.add(Stat::AtomicResponsesRx, 1);
                self.unblock_sq();
                let o = self.take_outstanding(slot)?;
                if header.request_id != o.request_id {
                    self.ctx
                        .complete(Completion::recv(o.wr_id, WcStatus::BadRespErr, o.opcode, 0));
                    return Err(TermError::RdmapCatastrophicStream);
                }
                let value = header.original_value.to_ne_bytes();
                let step = self.ctx.local_write(&o.sge, 0, &value);
                self.finish_request(&o, step)
            }
            RxEvent::Terminate(message) => {
                let error = message
                    .control
                    .error()
                    .unwrap_or(TermError::RdmapCatastrophicStream);
                self.st.rx_stats.add(Stat::terminate_rx(error), 1);
                self.fail_echoed_request(&message, error);
                self.st.stage = Stage::Peer(error);
                Ok(())
            }
        }
    }

    #[inline]
    fn fpdu_received(&mut self, wire_len: usize) {
        self.st.rx_stats.add(Stat::FpdusRx, 1);
        self.st.rx_stats.add(Stat::BytesRx, wire_len as u64);
    }

    fn rdma_write_done(&mut self) {
        self.st.last_rx = LastRx::Write;
    }

    fn accept_read_response(
        &mut self,
        slot: usize,
        stag: u32,
        to: u64,
        len: usize,
        last: bool,
    ) -> Result<(), TermError> {
        let taken = self
            .st
            .slots
            .outstanding_mut()
            .get_mut(slot)
            .is_some_and(|o| o.take_response_segment(stag, to, len, last));
        if taken {
            return Ok(());
        }
        // The response is malformed (see "Read Responses" in the `qp_engine`
        // documentation): its Read fails with it.
        self.fail_request(slot, WcStatus::BadRespErr);
        Err(TermError::DdpBaseBounds)
    }
}

impl<X: QpContext, S: SlotStorage<X::Sge>> RxAdapter<'_, X, S> {
    /// Places a segment of the Read Response answering the oldest request of ours, which
    /// [`RxContext::accept_read_response`] took as the one due in its sink, through
    /// [`QpContext::sink_write_pieces`] with that sink. The receive engine places only
    /// segments it so accepted, in the request at the front of the ORD queue; any other would
    /// be refused as [`RxEngine`] refuses a response nobody asked for, or one outside the
    /// sink.
    fn place_read_response(&mut self, grant: &Grant, data: Pieces<'_>) -> Result<(), TermError> {
        let slot = match self.st.requester.front() {
            Some((slot, RequestKind::Read)) => slot,
            _ => return Err(TermError::RdmapUnexpectedOpcode),
        };
        let sink = self
            .st
            .slots
            .outstanding()
            .get(slot)
            .and_then(|o| o.read_sink(grant).copied())
            .ok_or(TermError::DdpBaseBounds)?;
        self.ctx.sink_write_pieces(&sink, grant, data)
    }

    fn unblock_sq(&mut self) {
        if self.st.sq_stalled {
            self.st.sq_unblocked = true;
        }
    }

    /// Completes a Read or Atomic request of ours whose response arrived, after the last local
    /// `step` (writing the original value, invalidating the sink): an error there completes
    /// it with that status (signaled or not) and terminates the stream.
    fn finish_request(
        &mut self,
        o: &Outstanding<X::Sge>,
        step: Result<(), WcStatus>,
    ) -> Result<(), TermError> {
        if let Err(status) = step {
            self.ctx
                .complete(Completion::recv(o.wr_id, status, o.opcode, 0));
            return Err(LOCAL_FAILURE);
        }
        if o.signaled && !o.rtr {
            self.ctx.complete(Completion::recv(
                o.wr_id,
                WcStatus::Success,
                o.opcode,
                o.len,
            ));
        }
        Ok(())
    }

    /// The live request of ORD `slot`, now completed.
    fn take_outstanding(&mut self, slot: usize) -> Result<Outstanding<X::Sge>, TermError> {
        let o = self
            .st
            .slots
            .outstanding_mut()
            .get_mut(slot)
            .filter(|o| o.live)
            .ok_or(TermError::RdmapUnexpectedOpcode)?;
        o.live = false;
        Ok(*o)
    }

    /// Completes the request of ours whose header a TERMINATE echoes.
    fn fail_echoed_request(&mut self, message: &TerminateMessage<'_>, error: TermError) {
        let Some(Ok((DdpHeader::Untagged(h), _))) = message.ddp_header.map(DdpHeader::decode)
        else {
            return;
        };
        if h.queue_number != QueueNumber::ReadRequest as u32 {
            return;
        }
        let slots = self.st.slots.outstanding();
        if let Some(slot) = slots.iter().position(|o| o.live && o.msn == h.msn) {
            self.fail_request(slot, remote_status(error));
        }
    }

    /// Completes the live request of ORD `slot` with `status`; if it is a part
    /// of a Read into several SGEs, that is its work request's only
    /// completion.
    fn fail_request(&mut self, mut slot: usize, status: WcStatus) {
        let slots = self.st.slots.outstanding_mut();
        let Some(o) = slots.get_mut(slot).filter(|o| o.live) else {
            return;
        };
        o.live = false;
        let failed = *o;
        // The later parts of its work request, if it is a part of a Read
        // into several SGEs, sit in the slots after it: they complete
        // nothing now.
        let mut previous = failed;
        while !previous.last {
            slot = slot.saturating_add(1) % DEPTH;
            match slots.get_mut(slot) {
                Some(o) if o.live && o.part == previous.part.wrapping_add(1) => {
                    o.live = false;
                    previous = *o;
                }
                _ => break,
            }
        }
        if !previous.last {
            // Its last part was not sent yet: the parts still to send are
            // the split work request's.
            self.st.split = None;
        }
        if !failed.rtr {
            let c = Completion::recv(failed.wr_id, status, failed.opcode, 0);
            self.ctx.complete(c);
        }
    }
}

/// The completion status for a request the peer terminated the stream over.
fn remote_status(error: TermError) -> WcStatus {
    use TermError::*;
    match (error.layer(), error.error_type()) {
        (Layer::Rdmap, 1) | (Layer::Ddp, 1) => WcStatus::RemAccessErr,
        (Layer::Ddp, 2) => WcStatus::RemInvReqErr,
        _ => match error {
            RdmapInvalidVersion | RdmapUnexpectedOpcode => WcStatus::RemInvReqErr,
            _ => WcStatus::RemOpErr,
        },
    }
}
