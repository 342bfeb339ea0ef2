// SPDX-License-Identifier: GPL-2.0

//! Starting the work request at the head of the send queue.
//!
//! Work requests start in order, each when it reaches the head: a fenced one waits until no
//! Read or Atomic is outstanding; local operations (memory registration, local invalidation)
//! run there; a Read or Atomic waits for an ORD credit and takes an ORD slot; a Send or Write
//! becomes the message in flight, or goes out whole at once if it is one FPDU that fits. A
//! Read into several SGEs goes as one Read Request per SGE (see [`qp_engine`](super)). A work
//! request that cannot start completes with its error and ends the stream.

use super::*;

/// Bytes an atomic operation returns.
const ATOMIC_LEN: u32 = 8;

impl<C: Crc32c + Copy, S: SlotStorage<E>, E: SgeEntry> QpEngine<C, S, E> {
    /// Starts the SQ head `wr`, if it need not wait.
    pub(super) fn start_sq_head<X: QpContext<Sge = E>>(
        &mut self,
        ctx: &mut X,
        wr: &SendRequest<E>,
        room: &mut Room<'_>,
    ) -> Started {
        let is_request = matches!(
            wr.op,
            SendOp::Read { .. }
                | SendOp::ReadInv { .. }
                | SendOp::FetchAdd { .. }
                | SendOp::CmpSwap { .. }
        );
        if wr.fence && self.st.requester.outstanding() > 0 {
            self.st.sq_stalled = true;
            return Started::Idle;
        }
        if is_request && !self.deferred.is_empty() {
            // Its response could complete it before the completions held
            // back: it starts on the next call, after them.
            return Started::Completing;
        }
        let result = match wr.op {
            SendOp::RegMr {
                stag,
                access,
                iova,
                length,
            } => {
                let r = ctx.register(stag, access, iova, length);
                self.local_op_done(ctx, wr, r)
            }
            SendOp::LocalInv { stag } => {
                let r = ctx.invalidate_local(stag);
                self.local_op_done(ctx, wr, r)
            }
            _ if is_request => self.start_request(ctx, wr),
            _ => self.start_sq_message(ctx, wr, room),
        };
        self.sq_head_started(ctx, wr, result)
    }

    /// What starting the SQ head `wr` came to: a work request that failed to
    /// start completes with its error and fails the stream.
    fn sq_head_started<X: QpContext<Sge = E>>(
        &mut self,
        ctx: &mut X,
        wr: &SendRequest<E>,
        result: Result<Started, WcStatus>,
    ) -> Started {
        match result {
            Ok(started) => {
                if !matches!(started, Started::Idle) {
                    self.st.sq_stalled = false;
                }
                started
            }
            Err(status) => {
                ctx.pop_send();
                self.complete_in_order(ctx, Completion::send(wr, status, 0));
                self.fail_local(LOCAL_FAILURE);
                Started::Again
            }
        }
    }

    fn local_op_done<X: QpContext<Sge = E>>(
        &mut self,
        ctx: &mut X,
        wr: &SendRequest<E>,
        result: Result<(), WcStatus>,
    ) -> Result<Started, WcStatus> {
        result?;
        ctx.pop_send();
        if wr.signaled {
            self.complete_in_order(ctx, Completion::send(wr, WcStatus::Success, 0));
            if self.deferred.is_full() {
                return Ok(Started::Completing);
            }
        }
        Ok(Started::Again)
    }

    /// Starts a Send or Write work request; one of a single FPDU goes into `room` right away.
    fn start_sq_message<X: QpContext<Sge = E>>(
        &mut self,
        ctx: &mut X,
        wr: &SendRequest<E>,
        room: &mut Room<'_>,
    ) -> Result<Started, WcStatus> {
        let len = wr
            .sges
            .total_len()
            .and_then(|l| u32::try_from(l).ok())
            .ok_or(WcStatus::LocLenErr)?;
        let (request, then) = sq_message_request(wr, len)?;
        if then.is_none() && len < BY_REFERENCE_FROM {
            if let Some(started) = self.send_whole(ctx, wr, request, len, room)? {
                return Ok(started);
            }
        }
        let msg = self.tx.start(request).map_err(|_| WcStatus::LocQpOpErr)?;
        self.inflight = Some(InFlight {
            msg,
            job: Job::Sq { wr: *wr, len, then },
        });
        // The engine holds the request now; its SGEs stay the driver's to
        // keep valid until it completes.
        ctx.pop_send();
        Ok(Started::Message)
    }

    /// Produces the message of `wr` (`request`, `len` payload bytes) into `room` if it is one
    /// FPDU that fits there, and takes `wr` from the SQ. Returns `None`, having done nothing, if
    /// it is not. Such a message (what a latency-bound application sends) is never the one in
    /// flight: that would copy the work request and the message state in and out for nothing.
    fn send_whole<X: QpContext<Sge = E>>(
        &mut self,
        ctx: &mut X,
        wr: &SendRequest<E>,
        request: WorkRequest<'_>,
        len: u32,
        room: &mut Room<'_>,
    ) -> Result<Option<Started>, WcStatus> {
        let Some(rest) = room.out.get_mut(room.pos..) else {
            return Ok(None);
        };
        let end = rest.len().min(room.wire_left);
        let Some(rest) = rest.get_mut(..end) else {
            return Ok(None);
        };
        let Some(mut fpdu) = self.tx.start_whole(request, rest) else {
            return Ok(None);
        };
        let wire_len = fpdu.wire_len();
        let payload_end = usize::try_from(len)
            .ok()
            .and_then(|len| fpdu.header_len.checked_add(len))
            .ok_or(WcStatus::LocLenErr)?;
        let payload = rest
            .get_mut(fpdu.header_len..payload_end)
            .ok_or(WcStatus::LocLenErr)?;
        if !payload.is_empty() {
            sg_read(ctx, wr.sges.as_slice(), 0, payload)?;
            fpdu.hash_payload(payload);
        }
        let written = rest
            .get_mut(payload_end..wire_len)
            .is_some_and(|dst| fpdu.write_trailer(dst));
        if !written {
            return Err(WcStatus::LocQpOpErr);
        }
        room.pos = room.pos.saturating_add(wire_len);
        room.wire_left = room.wire_left.saturating_sub(wire_len);
        room.fpdus = room.fpdus.saturating_add(1);
        ctx.pop_send();
        if !wr.signaled {
            return Ok(Some(Started::Again));
        }
        self.hold_back(ctx, Completion::send(wr, WcStatus::Success, len));
        if self.deferred.is_full() {
            return Ok(Some(Started::Completing));
        }
        Ok(Some(Started::Again))
    }

    /// Checks a Read sink: it is placed as a tagged buffer, so check it before the Read goes
    /// out, and a bad sink is a local error, not the peer's.
    fn check_sink<X: QpContext<Sge = E>>(&self, ctx: &mut X, sge: &E) -> Result<(), WcStatus> {
        let region = ctx.lookup_stag(sge.lkey());
        let access = TaggedAccess {
            usage: TaggedUse::ReadResponse,
            stag: sge.lkey(),
            tagged_offset: sge.addr(),
            len: u64::from(sge.length()),
        };
        check_tagged(region.as_ref(), self.st.pd, &access)
            .map(|_| ())
            .map_err(|_| WcStatus::LocProtErr)
    }

    /// Starts part `part` of a Read work request: the Read Request for the first non-empty
    /// SGE from index `next` on, if an ORD credit is free. The first part takes the work
    /// request off the SQ; while parts remain, [`State::split`] holds it.
    pub(super) fn start_read<X: QpContext<Sge = E>>(
        &mut self,
        ctx: &mut X,
        wr: &SendRequest<E>,
        next: u8,
        part: u8,
    ) -> Result<Started, WcStatus> {
        let (remote_addr, rkey, invalidate) = match wr.op {
            SendOp::Read { remote_addr, rkey } => (remote_addr, rkey, false),
            SendOp::ReadInv { remote_addr, rkey } => (remote_addr, rkey, true),
            _ => return Err(WcStatus::LocQpOpErr),
        };
        let sges = wr.sges.as_slice();
        if invalidate && sges.len() > 1 {
            return Err(WcStatus::LocQpOpErr);
        }
        let total = wr
            .sges
            .total_len()
            .and_then(|l| u32::try_from(l).ok())
            .ok_or(WcStatus::LocLenErr)?;
        // Part i reads from the source where the SGEs before it end.
        let source = |index: usize| {
            let before = sges
                .iter()
                .take(index)
                .fold(0u64, |sum, sge| sum.saturating_add(u64::from(sge.length())));
            remote_addr.checked_add(before).ok_or(WcStatus::LocLenErr)
        };
        if part == 0 {
            // Every part is checked before the first goes out, so that a bad
            // one fails the work request before anything is sent.
            for (index, sge) in sges.iter().enumerate() {
                if sge.length() > 0 {
                    self.check_sink(ctx, sge)?;
                    source(index)?;
                }
            }
        }
        let found = sges
            .iter()
            .enumerate()
            .skip(usize::from(next))
            .find(|(_, sge)| sge.length() > 0);
        let (index, sge) = match found {
            Some((index, sge)) => (index, *sge),
            // No data to read at all: a zero-length Read, into the first SGE
            // if there is one.
            None if part == 0 => (sges.len(), sges.first().copied().unwrap_or(E::EMPTY)),
            None => return Err(WcStatus::LocQpOpErr),
        };
        if part > 0 {
            // Checked before the first part; still the same region?
            self.check_sink(ctx, &sge)?;
        }
        let last = sges
            .iter()
            .skip(index.saturating_add(1))
            .all(|sge| sge.length() == 0);
        let header = ReadRequestHeader {
            sink_stag: sge.lkey(),
            sink_tagged_offset: sge.addr(),
            read_size: sge.length(),
            source_stag: rkey,
            source_tagged_offset: source(index)?,
        };
        let next = u8::try_from(index.saturating_add(1)).map_err(|_| WcStatus::LocQpOpErr)?;
        let issued = Outstanding {
            wr_id: wr.wr_id,
            signaled: wr.signaled,
            opcode: wr.op.wc_opcode(),
            len: if last { total } else { sge.length() },
            sge,
            placed: 0,
            msn: 0,
            request_id: 0,
            invalidate,
            live: true,
            rtr: false,
            part,
            last,
        };
        let started = self.issue(RequestKind::Read, WorkRequest::ReadRequest(header), issued)?;
        if matches!(started, Started::Message) {
            if part == 0 {
                // The engine holds the request now; its SGEs stay the
                // driver's to keep valid until it completes.
                ctx.pop_send();
            }
            self.st.split = (!last).then_some(SplitRead {
                wr: *wr,
                next,
                parts: part.saturating_add(1),
            });
        }
        Ok(started)
    }

    /// Starts a Read or Atomic Request, if an ORD credit is free.
    fn start_request<X: QpContext<Sge = E>>(
        &mut self,
        ctx: &mut X,
        wr: &SendRequest<E>,
    ) -> Result<Started, WcStatus> {
        let sges = wr.sges.as_slice();
        let (request, sge, request_id) = match wr.op {
            SendOp::Read { .. } | SendOp::ReadInv { .. } => return self.start_read(ctx, wr, 0, 0),
            SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
                add_mask,
            } => {
                let op = AtomicOp::FetchAdd {
                    add,
                    mask: add_mask,
                };
                let id = self.st.next_request_id;
                (op.request(id, rkey, remote_addr), atomic_sge(sges)?, id)
            }
            SendOp::CmpSwap {
                remote_addr,
                rkey,
                compare,
                compare_mask,
                swap,
                swap_mask,
            } => {
                let op = AtomicOp::CmpSwap {
                    compare,
                    compare_mask,
                    swap,
                    swap_mask,
                };
                let id = self.st.next_request_id;
                (op.request(id, rkey, remote_addr), atomic_sge(sges)?, id)
            }
            _ => return Err(WcStatus::LocQpOpErr),
        };
        let issued = Outstanding {
            wr_id: wr.wr_id,
            signaled: wr.signaled,
            opcode: wr.op.wc_opcode(),
            len: ATOMIC_LEN,
            sge,
            request_id,
            live: true,
            ..Outstanding::EMPTY
        };
        let started = self.issue(
            RequestKind::Atomic,
            WorkRequest::AtomicRequest(request),
            issued,
        )?;
        if matches!(started, Started::Message) {
            self.st.next_request_id = self.st.next_request_id.wrapping_add(1);
            ctx.pop_send();
        }
        Ok(started)
    }

    /// Sends `request` if an ORD credit is free, recording `issued` (its MSN
    /// filled in) in the slot it takes; the SQ stalls if none is.
    fn issue(
        &mut self,
        kind: RequestKind,
        request: WorkRequest<'static>,
        issued: Outstanding<E>,
    ) -> Result<Started, WcStatus> {
        let slot = match self.st.requester.try_issue(kind) {
            Ok(slot) => slot,
            Err(IssueError::WouldExceed) => {
                self.st.sq_stalled = true;
                return Ok(Started::Idle);
            }
            Err(IssueError::NoCredits) => return Err(WcStatus::LocQpOpErr),
        };
        if self.st.slots.outstanding().get(slot).is_none() {
            // Slot storage shorter than the ring: a request that could not
            // be tracked must not be sent. (Its credit stays taken; the
            // stream ends here anyway.)
            return Err(WcStatus::LocQpOpErr);
        }
        let msg = self.tx.start(request).map_err(|_| WcStatus::LocQpOpErr)?;
        if let Some(o) = self.st.slots.outstanding_mut().get_mut(slot) {
            *o = Outstanding {
                msn: msg.msn(),
                ..issued
            };
        }
        self.inflight = Some(InFlight {
            msg,
            job: Job::Request,
        });
        self.st.tx_stats.add(
            match kind {
                RequestKind::Read => Stat::ReadRequestsTx,
                RequestKind::Atomic => Stat::AtomicRequestsTx,
            },
            1,
        );
        Ok(Started::Message)
    }
}

/// The result buffer of an atomic: exactly one SGE of at least 8 bytes.
fn atomic_sge<E: SgeEntry>(sges: &[E]) -> Result<E, WcStatus> {
    match sges {
        [sge] if sge.length() >= ATOMIC_LEN => Ok(*sge),
        [_] => Err(WcStatus::LocLenErr),
        _ => Err(WcStatus::LocQpOpErr),
    }
}
