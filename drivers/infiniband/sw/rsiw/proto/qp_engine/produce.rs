// SPDX-License-Identifier: GPL-2.0

//! FPDU production: the message in flight (a work request, a Read Response or an Atomic
//! Response) written as FPDUs into the room of one transmit call, its payload copied or offered
//! by reference.

use super::*;

/// Room that always suffices for an FPDU without payload: the length field
/// and headers, at most 3 pad bytes and the CRC.
pub(super) const HEADER_ONLY_FPDU_ROOM: usize = MAX_FPDU_HEADER_LEN + 3 + CRC_LEN;

/// Where one [`QpEngine::transmit_by_reference`] call puts FPDUs.
pub(super) struct Room<'o> {
    pub(super) out: &'o mut [u8],
    /// Bytes written into `out`.
    pub(super) pos: usize,
    /// Wire bytes the call may still produce.
    pub(super) wire_left: usize,
    /// Payload bytes the driver took by reference.
    pub(super) referenced: usize,
    /// Stopped for lack of room in `out`.
    pub(super) short: bool,
    /// Payload may go by reference (CRCs are off).
    pub(super) by_reference: bool,
    /// FPDUs written into it.
    pub(super) fpdus: usize,
}

impl Room<'_> {
    /// Whether nothing was produced into it.
    pub(super) fn is_empty(&self) -> bool {
        self.pos == 0 && self.referenced == 0
    }

    /// What was produced into it, the engine having nothing more if `idle`.
    pub(super) fn transmitted(&self, idle: bool) -> Transmitted {
        Transmitted {
            buffered: self.pos,
            referenced: self.referenced,
            fpdus: self.fpdus,
            short: self.short,
            idle,
        }
    }
}

/// The engine's request for a Send or Write work request, and the Immediate Data (with its
/// Solicited Event flag) to send after it (RFC 7306 section 6) if it has one.
pub(super) type SqMessage = (WorkRequest<'static>, Option<(ImmediateData, bool)>);

/// The [`SqMessage`] of the Send or Write work request `wr` of `len` payload bytes.
pub(super) fn sq_message_request<E: SgeEntry>(
    wr: &SendRequest<E>,
    len: u32,
) -> Result<SqMessage, WcStatus> {
    Ok(match wr.op {
        SendOp::Send {
            solicited,
            invalidate,
        } => (
            WorkRequest::Send {
                len,
                solicited,
                invalidate,
            },
            None,
        ),
        SendOp::SendImm { imm, solicited } if len == 0 => (
            WorkRequest::Immediate {
                data: ImmediateData::from_be32(imm),
                solicited,
            },
            None,
        ),
        SendOp::SendImm { imm, solicited } => (
            WorkRequest::Send {
                len,
                solicited: false,
                invalidate: None,
            },
            Some((ImmediateData::from_be32(imm), solicited)),
        ),
        SendOp::Write { remote_addr, rkey } => (
            WorkRequest::Write {
                stag: rkey,
                tagged_offset: remote_addr,
                len,
            },
            None,
        ),
        SendOp::WriteImm {
            remote_addr,
            rkey,
            imm,
        } => (
            WorkRequest::WriteImmediate {
                stag: rkey,
                tagged_offset: remote_addr,
                len,
                data: ImmediateData::from_be32(imm),
                solicited: false,
            },
            None,
        ),
        _ => return Err(WcStatus::LocQpOpErr),
    })
}

/// The payload of `job`'s next FPDU, if it may go by reference (see
/// [`qp_engine`](super)).
fn reference_source<E: SgeEntry>(
    job: &Job<E>,
    payload_offset: u32,
    len: u32,
) -> Option<PayloadSource<'_, E>> {
    match job {
        Job::Sq { wr, len: total, .. } if !wr.signaled && *total >= BY_REFERENCE_FROM => {
            Some(PayloadSource::Gather {
                sges: wr.sges.as_slice(),
                offset: payload_offset,
                len,
            })
        }
        Job::ReadResponse { source, .. } => Some(PayloadSource::Tagged(
            source.narrow(u64::from(payload_offset), u64::from(len))?,
        )),
        _ => None,
    }
}

/// How producing the FPDUs of the message in flight ended.
pub(super) enum Produced {
    /// The message is done.
    Done,
    /// The buffer is full.
    Full,
    /// A local failure: complete the work request with the status (if it is
    /// one) and terminate with the error.
    Failed(WcStatus, TermError),
}

/// Produces the FPDUs of `job` into `room` until the message is done or
/// there is no room for the next one.
pub(super) fn produce<C: Crc32c + Copy, X: QpContext>(
    job: &mut InFlight<C, X::Sge>,
    ctx: &mut X,
    room: &mut Room<'_>,
) -> Produced {
    loop {
        if job.msg.is_done() {
            return Produced::Done;
        }
        let Some(rest) = room.out.get_mut(room.pos..) else {
            room.short = true;
            return Produced::Full;
        };
        if rest.len() < HEADER_ONLY_FPDU_ROOM {
            room.short = true;
            return Produced::Full;
        }
        let mut fpdu = match job.msg.peek_fpdu(rest) {
            Ok(Some(fpdu)) => fpdu,
            Ok(None) => return Produced::Done,
            Err(_) => return Produced::Failed(WcStatus::LocQpOpErr, LOCAL_FAILURE),
        };
        let wire_len = fpdu.wire_len();
        if wire_len > room.wire_left {
            return Produced::Full;
        }
        let Ok(payload_len) = usize::try_from(fpdu.payload_len) else {
            return Produced::Failed(WcStatus::LocLenErr, LOCAL_FAILURE);
        };
        let headers_and_trailer = fpdu.header_len.saturating_add(fpdu.trailer_len());
        if headers_and_trailer > rest.len() {
            room.short = true;
            return Produced::Full;
        }
        let referenced = payload_len > 0
            && room.by_reference
            && reference_source(&job.job, fpdu.payload_offset, fpdu.payload_len).is_some_and(
                |source| ctx.send_by_reference(source, room.pos.saturating_add(fpdu.header_len)),
            );
        let (payload_end, buffered) = if referenced {
            (fpdu.header_len, headers_and_trailer)
        } else {
            if wire_len > rest.len() {
                room.short = true;
                return Produced::Full;
            }
            let payload_end = fpdu.header_len.saturating_add(payload_len);
            let Some(payload) = rest.get_mut(fpdu.header_len..payload_end) else {
                return Produced::Full;
            };
            if !payload.is_empty() {
                let filled = match &job.job {
                    Job::Sq { wr, .. } => {
                        sg_read(ctx, wr.sges.as_slice(), fpdu.payload_offset, payload)
                            .map_err(|status| (status, LOCAL_FAILURE))
                    }
                    Job::ReadResponse { source, .. } => source
                        .narrow(u64::from(fpdu.payload_offset), payload.len() as u64)
                        .ok_or(TermError::RdmapLocalCatastrophic)
                        .and_then(|here| ctx.tagged_read(&here, payload))
                        .map_err(|e| (WcStatus::LocQpOpErr, e)),
                    _ => Err((WcStatus::LocQpOpErr, LOCAL_FAILURE)),
                };
                if let Err((status, error)) = filled {
                    return Produced::Failed(status, error);
                }
                fpdu.hash_payload(payload);
            }
            (payload_end, wire_len)
        };
        let written = rest
            .get_mut(payload_end..buffered)
            .is_some_and(|dst| fpdu.write_trailer(dst));
        if !written {
            return Produced::Failed(WcStatus::LocQpOpErr, LOCAL_FAILURE);
        }
        job.msg.advance();
        room.pos = room.pos.saturating_add(buffered);
        room.wire_left = room.wire_left.saturating_sub(wire_len);
        room.fpdus = room.fpdus.saturating_add(1);
        if referenced {
            room.referenced = room.referenced.saturating_add(payload_len);
        }
        if fpdu.last {
            return Produced::Done;
        }
    }
}
