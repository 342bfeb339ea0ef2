// SPDX-License-Identifier: GPL-2.0

//! Completions as a provider reports them: [`Wc`] entries that `poll_cq` copies into the
//! consumer's `ib_wc` array, and the [`CqNotifier`] that runs the consumer's completion handler
//! when a CQ armed with `req_notify_cq` gets an entry.
//!
//! The handler pointer lives in the core's `ib_cq`, which is freed right after `destroy_cq`. A
//! provider may still hold its CQ object then (a queue pair's work item finishing late), so the
//! notifier is switched off by `destroy_cq` under its lock: a late `notify` does nothing.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    device::Driver,
    objects::{completion_queue, CompletionQueue, WcQp},
};
use crate::{
    alloc::flags::GFP_KERNEL,
    bindings,
    ffi::c_int,
    new_spinlock_bh,
    prelude::*,
    sync::{Arc, SpinLockBh},
};

/// The status of a completion (`enum ib_wc_status`), as far as providers report them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcStatus {
    /// `IB_WC_SUCCESS`.
    Success,
    /// `IB_WC_LOC_LEN_ERR`.
    LocalLength,
    /// `IB_WC_LOC_QP_OP_ERR`.
    LocalQpOperation,
    /// `IB_WC_LOC_PROT_ERR`.
    LocalProtection,
    /// `IB_WC_WR_FLUSH_ERR`.
    Flushed,
    /// `IB_WC_MW_BIND_ERR`.
    MwBind,
    /// `IB_WC_BAD_RESP_ERR`.
    BadResponse,
    /// `IB_WC_LOC_ACCESS_ERR`.
    LocalAccess,
    /// `IB_WC_REM_INV_REQ_ERR`.
    RemoteInvalidRequest,
    /// `IB_WC_REM_ACCESS_ERR`.
    RemoteAccess,
    /// `IB_WC_REM_OP_ERR`.
    RemoteOperation,
    /// `IB_WC_FATAL_ERR`.
    Fatal,
    /// `IB_WC_GENERAL_ERR`.
    General,
}

impl WcStatus {
    fn raw(self) -> bindings::ib_wc_status {
        match self {
            Self::Success => bindings::ib_wc_status_IB_WC_SUCCESS,
            Self::LocalLength => bindings::ib_wc_status_IB_WC_LOC_LEN_ERR,
            Self::LocalQpOperation => bindings::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
            Self::LocalProtection => bindings::ib_wc_status_IB_WC_LOC_PROT_ERR,
            Self::Flushed => bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR,
            Self::MwBind => bindings::ib_wc_status_IB_WC_MW_BIND_ERR,
            Self::BadResponse => bindings::ib_wc_status_IB_WC_BAD_RESP_ERR,
            Self::LocalAccess => bindings::ib_wc_status_IB_WC_LOC_ACCESS_ERR,
            Self::RemoteInvalidRequest => bindings::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
            Self::RemoteAccess => bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR,
            Self::RemoteOperation => bindings::ib_wc_status_IB_WC_REM_OP_ERR,
            Self::Fatal => bindings::ib_wc_status_IB_WC_FATAL_ERR,
            Self::General => bindings::ib_wc_status_IB_WC_GENERAL_ERR,
        }
    }
}

/// What a completed work request was (`enum ib_wc_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcOpcode {
    /// `IB_WC_SEND`.
    Send,
    /// `IB_WC_RDMA_WRITE`.
    RdmaWrite,
    /// `IB_WC_RDMA_READ`.
    RdmaRead,
    /// `IB_WC_COMP_SWAP`.
    CompareSwap,
    /// `IB_WC_FETCH_ADD`.
    FetchAdd,
    /// `IB_WC_MASKED_COMP_SWAP`.
    MaskedCompareSwap,
    /// `IB_WC_MASKED_FETCH_ADD`.
    MaskedFetchAdd,
    /// `IB_WC_LOCAL_INV`.
    LocalInvalidate,
    /// `IB_WC_REG_MR`.
    RegisterMr,
    /// `IB_WC_RECV`.
    Recv,
    /// `IB_WC_RECV_RDMA_WITH_IMM`.
    RecvRdmaWithImmediate,
}

impl WcOpcode {
    fn raw(self) -> bindings::ib_wc_opcode {
        match self {
            Self::Send => bindings::ib_wc_opcode_IB_WC_SEND,
            Self::RdmaWrite => bindings::ib_wc_opcode_IB_WC_RDMA_WRITE,
            Self::RdmaRead => bindings::ib_wc_opcode_IB_WC_RDMA_READ,
            Self::CompareSwap => bindings::ib_wc_opcode_IB_WC_COMP_SWAP,
            Self::FetchAdd => bindings::ib_wc_opcode_IB_WC_FETCH_ADD,
            Self::MaskedCompareSwap => bindings::ib_wc_opcode_IB_WC_MASKED_COMP_SWAP,
            Self::MaskedFetchAdd => bindings::ib_wc_opcode_IB_WC_MASKED_FETCH_ADD,
            Self::LocalInvalidate => bindings::ib_wc_opcode_IB_WC_LOCAL_INV,
            Self::RegisterMr => bindings::ib_wc_opcode_IB_WC_REG_MR,
            Self::Recv => bindings::ib_wc_opcode_IB_WC_RECV,
            Self::RecvRdmaWithImmediate => bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
        }
    }
}

/// One completion.
#[derive(Clone, Copy, Debug)]
pub struct Wc {
    /// The work request's id.
    pub wr_id: u64,
    /// How it ended.
    pub status: WcStatus,
    /// What it was.
    pub opcode: WcOpcode,
    /// Bytes transferred (received, for a receive).
    pub byte_len: u32,
    /// The queue pair it belongs to.
    pub qp: WcQp,
    /// Immediate data received, big endian as the sender's consumer wrote it.
    pub imm: Option<u32>,
    /// The local key a received Send with Invalidate invalidated.
    pub invalidated: Option<u32>,
}

impl Wc {
    fn fill(&self, wc: &mut bindings::ib_wc) {
        let mut flags = 0;
        wc.__bindgen_anon_1.wr_id = self.wr_id;
        wc.status = self.status.raw();
        wc.opcode = self.opcode.raw();
        wc.vendor_err = 0;
        wc.byte_len = self.byte_len;
        wc.qp = self.qp.as_raw();
        wc.ex.imm_data = 0;
        if let Some(imm) = self.imm {
            wc.ex.imm_data = imm;
            flags |= bindings::ib_wc_flags_IB_WC_WITH_IMM;
        } else if let Some(key) = self.invalidated {
            wc.ex.invalidate_rkey = key;
            flags |= bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE;
        }
        wc.src_qp = 0;
        wc.wc_flags = flags as c_int;
        wc.port_num = 1;
    }
}

/// How a consumer arms a CQ (`req_notify_cq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arm {
    /// Notify on the next completion (`IB_CQ_NEXT_COMP`).
    NextCompletion,
    /// Notify on the next solicited receive or error completion (`IB_CQ_SOLICITED`).
    Solicited,
}

/// The state a notifier shares with the container of its CQ.
#[pin_data]
struct NotifierState {
    /// The CQ, while it exists.
    #[pin]
    cq: SpinLockBh<Option<CqPtr>>,
}

/// The core's CQ, which its container's notifier may call the handler of.
///
/// # Invariants
///
/// Points to a live `ib_cq` while it is inside the notifier's lock.
struct CqPtr(*mut bindings::ib_cq);

// SAFETY: The pointer is only used under the notifier's lock, from any thread.
unsafe impl Send for CqPtr {}

/// Runs the consumer's completion handler of a CQ; see the module documentation.
#[derive(Clone)]
pub struct CqNotifier(Arc<NotifierState>);

impl CqNotifier {
    pub(crate) fn new(cq: *mut bindings::ib_cq) -> Result<Self> {
        // INVARIANT: `cq` is live until `destroy_cq_callback` calls `shut`.
        let state = Arc::pin_init(
            pin_init!(NotifierState {
                cq <- new_spinlock_bh!(Some(CqPtr(cq)), "CqNotifier::cq"),
            }),
            GFP_KERNEL,
        )?;
        Ok(Self(state))
    }

    /// Calls the CQ's completion handler, unless the CQ is gone.
    pub fn notify(&self) {
        let guard = self.0.cq.lock();
        if let Some(CqPtr(cq)) = *guard {
            // SAFETY: `cq` is live while inside the lock (the invariant); the core set the
            // handler and its context at creation and does not change them.
            unsafe {
                if let Some(handler) = (*cq).comp_handler {
                    handler(cq, (*cq).cq_context);
                }
            }
        }
    }

    /// Tells the consumer through its event handler that the CQ overflowed
    /// (`IB_EVENT_CQ_ERR`): a completion was lost. Nothing if the CQ is gone.
    pub fn overflowed(&self) {
        let guard = self.0.cq.lock();
        if let Some(CqPtr(cq)) = *guard {
            // SAFETY: `cq` is live while inside the lock (the invariant); the core set the
            // handler, its context and the device at creation and does not change them.
            unsafe {
                if let Some(handler) = (*cq).event_handler {
                    let mut event = bindings::ib_event {
                        device: (*cq).device,
                        element: bindings::ib_event__bindgen_ty_1 { cq },
                        event: bindings::ib_event_type_IB_EVENT_CQ_ERR,
                    };
                    handler(&mut event, (*cq).cq_context);
                }
            }
        }
    }

    /// The CQ is being destroyed: no handler calls any more.
    pub(crate) fn shut(&self) {
        *self.0.cq.lock() = None;
    }
}

/// `poll_cq`.
///
/// # Safety
///
/// Called by the RDMA core with a live CQ of ours and room for `num_entries` in `wc`.
pub(crate) unsafe extern "C" fn poll_cq_callback<T: Driver>(
    cq: *mut bindings::ib_cq,
    num_entries: c_int,
    wc: *mut bindings::ib_wc,
) -> c_int {
    // SAFETY: A live CQ of ours (the caller's guarantee).
    let queue = unsafe { completion_queue::<T>(cq) };
    let mut n = 0;
    while n < num_entries {
        let Some(entry) = queue.poll() else { break };
        // SAFETY: `wc` has room for `num_entries` entries (the caller's guarantee).
        entry.fill(unsafe { &mut *wc.add(n as usize) });
        n += 1;
    }
    n
}

/// `req_notify_cq`.
///
/// # Safety
///
/// Called by the RDMA core with a live CQ of ours.
pub(crate) unsafe extern "C" fn req_notify_cq_callback<T: Driver>(
    cq: *mut bindings::ib_cq,
    flags: bindings::ib_cq_notify_flags,
) -> c_int {
    // SAFETY: A live CQ of ours (the caller's guarantee).
    let queue = unsafe { completion_queue::<T>(cq) };
    let arm = if flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
        == bindings::ib_cq_notify_flags_IB_CQ_SOLICITED
    {
        Arm::Solicited
    } else {
        Arm::NextCompletion
    };
    let not_empty = queue.arm(arm);
    c_int::from(flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0 && not_empty)
}
