// SPDX-License-Identifier: GPL-2.0

//! A kernel consumer's work requests in the engine's form.
//!
//! The verbs hand rsiw `ib_send_wr`s and `ib_recv_wr`s (as the provider API's [`SendWr`] and
//! [`RecvWr`]); the engine takes [`SendRequest`]s and [`RecvRequest`]s, whose operations and
//! scatter/gather lists it checks again when it runs them. A QP's send and receive queues and
//! an SRQ's pool hold the engine's form. Each entry stays the consumer's own
//! ([`QpSge::Posted`]): the proof of a posted entry that a DMA MR's memory asks for.

use kernel::{
    prelude::*,
    rdma::provider::work_request::{RecvWr, SendOp as IbSendOp, SendWr, Sge as IbSge},
};

use crate::proto::qp_engine::{RecvRequest, SendOp, SendRequest, SgeList};
use crate::sge::QpSge;

/// The engine's form of a send work request; `signal_all` signals it whatever its flags say
/// (the QP was created with `IB_SIGNAL_ALL_WR`).
pub(crate) fn send_request(wr: &SendWr<'_>, signal_all: bool) -> Result<SendRequest<QpSge>> {
    let op = match wr.op {
        IbSendOp::Send => SendOp::Send {
            solicited: wr.solicited,
            invalidate: None,
        },
        IbSendOp::SendWithInvalidate(key) => SendOp::Send {
            solicited: wr.solicited,
            invalidate: Some(key),
        },
        IbSendOp::SendWithImmediate(imm) => SendOp::SendImm {
            imm: u32::from_be(imm),
            solicited: wr.solicited,
        },
        IbSendOp::Write { remote_addr, rkey } => SendOp::Write { remote_addr, rkey },
        IbSendOp::WriteWithImmediate {
            remote_addr,
            rkey,
            imm,
        } => SendOp::WriteImm {
            remote_addr,
            rkey,
            imm: u32::from_be(imm),
        },
        IbSendOp::Read { remote_addr, rkey } => SendOp::Read { remote_addr, rkey },
        IbSendOp::ReadWithInvalidate {
            remote_addr, rkey, ..
        } => {
            // The sink's key is invalidated, as the C siw does: the RDMA core's rw API
            // names the key from before its re-registration in `invalidate_rkey`.
            if wr.sges.len() != 1 {
                return Err(EINVAL);
            }
            SendOp::ReadInv { remote_addr, rkey }
        }
        IbSendOp::CompareSwap {
            remote_addr,
            rkey,
            compare,
            compare_mask,
            swap,
            swap_mask,
        } => SendOp::CmpSwap {
            remote_addr,
            rkey,
            compare,
            compare_mask,
            swap,
            swap_mask,
        },
        IbSendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
            field_boundaries,
        } => SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
            add_mask: field_boundaries,
        },
        IbSendOp::RegisterMr {
            key,
            access,
            iova,
            length,
        } => SendOp::RegMr {
            stag: key,
            access,
            iova,
            length,
        },
        IbSendOp::LocalInvalidate(stag) => SendOp::LocalInv { stag },
        IbSendOp::Other(_) => return Err(EOPNOTSUPP),
    };
    if wr.inline {
        // Inline data would be copied when posted, as the C siw does; not supported yet.
        return Err(EOPNOTSUPP);
    }
    Ok(SendRequest {
        wr_id: wr.wr_id,
        op,
        sges: sge_list(wr.sges)?,
        signaled: wr.signaled || signal_all,
        fence: wr.fence,
    })
}

/// The engine's form of a receive work request.
pub(crate) fn recv_request(wr: &RecvWr<'_>) -> Result<RecvRequest<QpSge>> {
    Ok(RecvRequest {
        wr_id: wr.wr_id,
        sges: sge_list(wr.sges)?,
    })
}

/// The engine's form of a verbs scatter/gather list.
fn sge_list(sges: &[IbSge]) -> Result<SgeList<QpSge>> {
    let mut list = SgeList::EMPTY;
    list.fill_with(sges.len(), |i| sges.get(i).copied().map(QpSge::Posted))
        .ok_or(EINVAL)?;
    Ok(list)
}
