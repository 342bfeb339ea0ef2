// SPDX-License-Identifier: GPL-2.0

//! The transmit loop: [`QpEngine::transmit`] and [`QpEngine::transmit_by_reference`].
//!
//! Each call produces FPDUs in the order [`qp_engine`](super) describes: a pending TERMINATE
//! (and nothing after it), then the responder's Read and Atomic Responses in arrival order,
//! then the send queue, one message at a time. This module decides what comes next, starts
//! the responses and finishes each message; starting a send queue work request is
//! `send_queue`'s, writing a message's FPDUs `produce`'s.

use super::*;

/// What starting the next piece of work did.
pub(super) enum Started {
    /// A message is in flight.
    Message,
    /// Completions wait for the next call (a message went out whole, and no
    /// other may join it, or the next work request must complete after them):
    /// the call ends.
    Completing,
    /// A local operation ran, or a work request failed; look again.
    Again,
    /// Nothing to do now.
    Idle,
}

impl<C: Crc32c + Copy, S: SlotStorage<E>, E: SgeEntry> QpEngine<C, S, E> {
    /// Writes whole FPDUs into `out` (at most `out.len()` bytes; at least
    /// 4 KiB, and the same size on every call, or FPDUs are sized down to
    /// it) for, in order: a pending TERMINATE, responder work (Read and
    /// Atomic Responses in arrival order), then the SQ. Returns the bytes
    /// written; 0 means nothing to send now. Payload is always copied.
    pub fn transmit<X: QpContext<Sge = E>>(&mut self, ctx: &mut X, out: &mut [u8]) -> usize {
        let budget = out.len();
        let mut sq_head = SendRequest::EMPTY;
        self.produce_fpdus(ctx, &mut sq_head, out, budget, false)
            .buffered
    }

    /// As [`Self::transmit`], with FPDUs of up to `budget` bytes on the wire
    /// in all (at least 4 KiB, the same on every call), whose payload `ctx`
    /// may take by reference ([`QpContext::send_by_reference`]); `out` then
    /// holds the rest of the FPDUs, and needs room only for them. `sq_head`
    /// is room for the SQ head while the engine looks at it
    /// ([`QpContext::peek_send_into`]); what it holds before and after does
    /// not matter.
    pub fn transmit_by_reference<X: QpContext<Sge = E>>(
        &mut self,
        ctx: &mut X,
        sq_head: &mut SendRequest<E>,
        out: &mut [u8],
        budget: usize,
    ) -> Transmitted {
        let by_reference = !self.tx.has_crc();
        self.produce_fpdus(ctx, sq_head, out, budget, by_reference)
    }

    /// The FPDUs of [`Self::transmit_by_reference`], offering payload only if `by_reference`.
    #[inline]
    fn produce_fpdus<X: QpContext<Sge = E>>(
        &mut self,
        ctx: &mut X,
        sq_head: &mut SendRequest<E>,
        out: &mut [u8],
        budget: usize,
        by_reference: bool,
    ) -> Transmitted {
        let t = self.produce_fpdus_counted(ctx, sq_head, out, budget, by_reference);
        if t.fpdus > 0 {
            self.st.tx_stats.add(Stat::FpdusTx, t.fpdus as u64);
            let bytes = t.buffered.saturating_add(t.referenced);
            self.st.tx_stats.add(Stat::BytesTx, bytes as u64);
        }
        t
    }

    /// [`Self::produce_fpdus`] before the FPDUs are counted.
    #[inline]
    fn produce_fpdus_counted<X: QpContext<Sge = E>>(
        &mut self,
        ctx: &mut X,
        sq_head: &mut SendRequest<E>,
        out: &mut [u8],
        budget: usize,
        by_reference: bool,
    ) -> Transmitted {
        self.tx.set_fpdu_size(self.fpdu_size.min(budget));
        self.st.sq_unblocked = false;
        self.finish_if_deferred(ctx);
        let mut room = Room {
            out,
            pos: 0,
            wire_left: budget,
            referenced: 0,
            short: false,
            by_reference,
            fpdus: 0,
        };
        // Most calls find nothing to send, or only the SQ head: tell so
        // before setting up to produce FPDUs, with the SQ head's one peek.
        let head_next = self.st.stage == Stage::Running
            && self.inflight.is_none()
            && self.st.split.is_none()
            && self.responder_ready().is_none();
        if !head_next {
            return self.produce_fpdus_from(ctx, sq_head, false, room);
        }
        if !ctx.peek_send_into(sq_head) {
            return Transmitted {
                idle: true,
                ..Transmitted::default()
            };
        }
        // The head starts here, without the loop's set-up: a small Send or
        // Write (what a latency-bound application sends) is then already
        // produced, and one to complete, or a head that must wait, ends the
        // call as it would in the loop.
        match self.start_sq_head(ctx, sq_head, &mut room) {
            Started::Completing => room.transmitted(false),
            Started::Idle => room.transmitted(true),
            Started::Message | Started::Again => self.produce_fpdus_from(ctx, sq_head, false, room),
        }
    }

    /// [`Self::produce_fpdus`] into `room`, starting with the SQ head in
    /// `sq_head` if it was `peeked` already (and is next).
    fn produce_fpdus_from<X: QpContext<Sge = E>>(
        &mut self,
        ctx: &mut X,
        sq_head: &mut SendRequest<E>,
        mut peeked: bool,
        mut room: Room<'_>,
    ) -> Transmitted {
        let mut idle = false;
        loop {
            match self.st.stage {
                Stage::Running => {}
                Stage::Pending { error, from_rx } => {
                    self.send_terminate(&mut room, error, from_rx);
                    break;
                }
                _ => {
                    idle = true;
                    break;
                }
            }
            if self.inflight.is_none() {
                let head_peeked = core::mem::take(&mut peeked);
                match self.start_next(ctx, sq_head, head_peeked, &mut room) {
                    Started::Message | Started::Again => {}
                    Started::Completing => break,
                    Started::Idle => {
                        idle = true;
                        break;
                    }
                }
            }
            // Worked on in place: the job is large, and copying it out and
            // back costs more than producing a small message's FPDU.
            let Some(inflight) = self.inflight.as_mut() else {
                continue;
            };
            match produce(inflight, ctx, &mut room) {
                Produced::Full => break,
                Produced::Done => match inflight.completion() {
                    // As the C siw does, a work request completes once its
                    // FPDUs are with TCP, not before: a peer waiting for
                    // them (a ping-pong) does not wait for the completion.
                    Some(completion) if !room.is_empty() => {
                        self.inflight = None;
                        self.hold_back(ctx, completion);
                        if self.deferred.is_full() {
                            break;
                        }
                    }
                    _ => self.finish(ctx),
                },
                Produced::Failed(status, error) => {
                    if let Job::Sq { wr, .. } = &inflight.job {
                        let failed = Completion::send(wr, status, 0);
                        self.complete_in_order(ctx, failed);
                    }
                    self.fail_local(error);
                }
            }
        }
        // Completions held back need the next call, which an idle call
        // would not get.
        room.transmitted(idle && self.deferred.is_empty())
    }

    /// Emits the pending TERMINATE into `room` if it fits.
    fn send_terminate(&mut self, room: &mut Room<'_>, error: TermError, rx: bool) {
        let Some(rest) = room.out.get_mut(room.pos..) else {
            room.short = true;
            return;
        };
        if rest.len() < HEADER_ONLY_FPDU_ROOM {
            room.short = true;
            return;
        }
        if room.wire_left < HEADER_ONLY_FPDU_ROOM {
            return;
        }
        let message = match self.rx.termination() {
            Some(t) if rx => t.message(),
            _ => TerminateMessage::reporting(error, None),
        };
        self.st.stage = Stage::Sent(error);
        let Ok(mut msg) = self.tx.start(WorkRequest::Terminate(message)) else {
            return;
        };
        let Ok(Some(fpdu)) = msg.next_fpdu(rest) else {
            return;
        };
        let trailer = fpdu.trailer();
        let end = fpdu.header_len.checked_add(trailer.as_bytes().len());
        if end == Some(fpdu.wire_len())
            && wire::write_bytes(rest, fpdu.header_len, trailer.as_bytes()).is_ok()
        {
            room.pos = room.pos.saturating_add(fpdu.wire_len());
            room.wire_left = room.wire_left.saturating_sub(fpdu.wire_len());
            room.fpdus = room.fpdus.saturating_add(1);
            self.st.tx_stats.add(Stat::terminate_tx(error), 1);
            if error == TermError::MpaCrc {
                self.st.tx_stats.add(Stat::CrcErrors, 1);
            }
        }
    }

    /// The IRD slot whose response can be sent next.
    pub(super) fn responder_ready(&self) -> Option<usize> {
        let (slot, _) = self.st.responder.front()?;
        match self.st.slots.pending().get(slot) {
            Some(Pending::Read { .. } | Pending::Atomic(_)) => Some(slot),
            _ => None,
        }
    }

    /// Starts the next response or SQ work request; `sq_head` holds the SQ
    /// head if the caller `peeked` it already (and nothing comes before it),
    /// else is room to peek it into.
    fn start_next<X: QpContext<Sge = E>>(
        &mut self,
        ctx: &mut X,
        sq_head: &mut SendRequest<E>,
        peeked: bool,
        room: &mut Room<'_>,
    ) -> Started {
        if let Some(slot) = self.responder_ready() {
            return self.start_response(slot);
        }
        if let Some(split) = self.st.split {
            // The rest of a Read into several SGEs: it is the SQ head (no
            // fence to wait for, it waited before its first part).
            return match self.start_read(ctx, &split.wr, split.next, split.parts) {
                Ok(started) => {
                    if !matches!(started, Started::Idle) {
                        self.st.sq_stalled = false;
                    }
                    started
                }
                Err(status) => {
                    // Its parts out complete nothing: it completes here.
                    self.st.split = None;
                    self.complete_in_order(ctx, Completion::send(&split.wr, status, 0));
                    self.fail_local(LOCAL_FAILURE);
                    Started::Again
                }
            };
        }
        // The SQ head stays in the caller's room, borrowed: it is large.
        if !peeked && !ctx.peek_send_into(sq_head) {
            return Started::Idle;
        }
        self.start_sq_head(ctx, sq_head, room)
    }

    /// Starts the response to the request in IRD `slot`.
    fn start_response(&mut self, slot: usize) -> Started {
        let (request, job) = match self.st.slots.pending().get(slot).copied() {
            Some(Pending::Read { header, source }) => (
                WorkRequest::ReadResponse {
                    sink_stag: header.sink_stag,
                    sink_tagged_offset: header.sink_tagged_offset,
                    len: header.read_size,
                },
                Job::ReadResponse { slot, source },
            ),
            Some(Pending::Atomic(header)) => (
                WorkRequest::AtomicResponse(header),
                Job::AtomicResponse { slot },
            ),
            _ => return Started::Idle,
        };
        match self.tx.start(request) {
            Ok(msg) => {
                let stat = match job {
                    Job::AtomicResponse { .. } => Stat::AtomicResponsesTx,
                    _ => Stat::ReadResponsesTx,
                };
                self.st.tx_stats.add(stat, 1);
                self.inflight = Some(InFlight { msg, job });
                Started::Message
            }
            Err(_) => {
                self.fail_local(LOCAL_FAILURE);
                Started::Again
            }
        }
    }

    /// Finishes the messages produced whole on the call before, whose
    /// completions waited for the driver to hand their FPDUs to TCP.
    pub(super) fn finish_if_deferred<X: QpContext<Sge = E>>(&mut self, ctx: &mut X) {
        self.deferred.drain(|completion| ctx.complete(completion));
    }

    /// Holds back the completion `c` of a message this call produced, for
    /// the next call.
    pub(super) fn hold_back<X: QpContext<Sge = E>>(&mut self, ctx: &mut X, c: Completion) {
        if let Err(c) = self.deferred.push(c) {
            // Not reached: a call stops producing signalled messages with one
            // entry left.
            ctx.complete(c);
        }
    }

    /// Writes send queue completion `c` now, or behind the completions held
    /// back for the next call if any wait: a queue's completions keep the
    /// order of its work requests.
    pub(super) fn complete_in_order<X: QpContext<Sge = E>>(&mut self, ctx: &mut X, c: Completion) {
        if self.deferred.is_empty() {
            ctx.complete(c);
        } else if let Err(c) = self.deferred.push(c) {
            // Not reached: a call stops holding back successes with one entry
            // left, and after its first failure it produces nothing more.
            ctx.complete(c);
        }
    }

    /// Wraps up the message in flight, whose last FPDU was produced: it ends, or the Immediate
    /// Data that follows it takes its place.
    fn finish<X: QpContext<Sge = E>>(&mut self, ctx: &mut X) {
        let Some(inflight) = self.inflight.as_mut() else {
            return;
        };
        match &mut inflight.job {
            Job::Sq { wr, len, then } => match then.take() {
                Some((data, solicited)) => {
                    match self.tx.start(WorkRequest::Immediate { data, solicited }) {
                        Ok(msg) => inflight.msg = msg,
                        Err(_) => {
                            let failed = Completion::send(wr, WcStatus::LocQpOpErr, 0);
                            self.complete_in_order(ctx, failed);
                            self.fail_local(LOCAL_FAILURE);
                        }
                    }
                }
                None => {
                    let done = wr
                        .signaled
                        .then(|| Completion::send(wr, WcStatus::Success, *len));
                    self.inflight = None;
                    if let Some(done) = done {
                        self.complete_in_order(ctx, done);
                    }
                }
            },
            Job::Request => self.inflight = None,
            Job::ReadResponse { slot, .. } | Job::AtomicResponse { slot } => {
                let slot = *slot;
                self.inflight = None;
                self.st.responder.finish();
                if let Some(p) = self.st.slots.pending_mut().get_mut(slot) {
                    *p = Pending::Empty;
                }
            }
        }
    }
}
