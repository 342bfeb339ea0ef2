// SPDX-License-Identifier: GPL-2.0

//! The iWARP queue pair state machine, as a pure function.
//!
//! An iWARP QP lives in one of six states (RFC 5040 section 6 and the RDMA
//! Consortium verbs): IDLE, RTR, RTS, CLOSING, TERMINATE and ERROR. Three
//! parties move it between them: the verbs consumer (`modify_qp`), connection
//! management (which hands over an MPA-negotiated LLP stream) and the data
//! path (which sees the peer close, reset or terminate the stream, or hits an
//! error itself). They race with each other, and every one of their
//! decisions also implies side effects: work requests to flush, a TERMINATE
//! to send, a stream to close or abort, an asynchronous event to raise.
//!
//! # Why a pure function
//!
//! [`transition`] takes the current state and one [`Input`] and returns the
//! next state together with the [`Actions`] the driver must carry out, or a
//! [`TransitionError`] that leaves the state untouched. It does no I/O and
//! holds no locks, so the complete table (every state against every input)
//! is tested on the host, and the driver's only job is to serialise inputs
//! under its state lock and execute the actions it is given. Keeping the
//! decisions in one table, instead of spread over socket callbacks, the CM
//! and the verbs entry points, is what makes properties such as "ERROR is
//! only left by a modify to RESET" checkable at all.
//!
//! # The rules
//!
//! * IDLE and RTR have no connection. RTS is only entered with one, either
//!   from connection management ([`Input::ConnectionEstablished`]) or by a
//!   modify to RTS that carries the LLP handle.
//! * A graceful close (modify to SQD, or the peer closing its half of the
//!   stream) enters CLOSING when no send work is outstanding, and ends in
//!   IDLE once the stream is closed. With send work outstanding (a send WR
//!   being transmitted or RDMA Reads awaiting their responses, see
//!   [`SendWork`]) the close cannot be graceful, and the QP goes to ERROR.
//! * An error to report to the peer enters TERMINATE and sends a TERMINATE
//!   message; once it is sent, or the peer's own TERMINATE arrived and the
//!   stream is gone, the QP enters ERROR. At most one TERMINATE is sent per
//!   stream (RFC 5040 section 7.2).
//! * Entering ERROR always flushes both work queues, and aborts the stream if
//!   it may still be open. ERROR is left only by a modify to RESET.
//! * Events about a stream (peer close, reset, TERMINATE) that arrive in a
//!   state without one are stale races and are ignored: the result is `Ok`
//!   with the state unchanged and no actions.
//!
//! # IB verbs states
//!
//! The RDMA core speaks `enum ib_qp_state`. [`QpState::from_ib`] and
//! [`QpState::to_ib`] map between the two models: RESET and INIT are both
//! IDLE, SQD is CLOSING and SQE is TERMINATE. Query reports IDLE as INIT
//! (every attribute a consumer sets in INIT is valid in IDLE), so a QP that
//! was created or reset reads back as INIT.

use super::terminate::{Layer, TermError};

/// The IB verbs QP states (`enum ib_qp_state`), with their kernel values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum IbQpState {
    /// `IB_QPS_RESET`.
    Reset = 0,
    /// `IB_QPS_INIT`.
    Init = 1,
    /// `IB_QPS_RTR`.
    Rtr = 2,
    /// `IB_QPS_RTS`.
    Rts = 3,
    /// `IB_QPS_SQD`: on iWARP, a graceful close.
    Sqd = 4,
    /// `IB_QPS_SQE`: on iWARP, the TERMINATE state.
    Sqe = 5,
    /// `IB_QPS_ERR`.
    Err = 6,
}

impl IbQpState {
    /// Every IB state, in kernel order.
    pub const ALL: [IbQpState; 7] = [
        IbQpState::Reset,
        IbQpState::Init,
        IbQpState::Rtr,
        IbQpState::Rts,
        IbQpState::Sqd,
        IbQpState::Sqe,
        IbQpState::Err,
    ];

    /// Decodes a kernel `enum ib_qp_state` value; `None` if out of range
    /// (the verbs layer answers `EINVAL`).
    pub const fn from_raw(raw: u32) -> Option<Self> {
        match raw {
            0 => Some(IbQpState::Reset),
            1 => Some(IbQpState::Init),
            2 => Some(IbQpState::Rtr),
            3 => Some(IbQpState::Rts),
            4 => Some(IbQpState::Sqd),
            5 => Some(IbQpState::Sqe),
            6 => Some(IbQpState::Err),
            _ => None,
        }
    }

    /// The kernel `enum ib_qp_state` value.
    pub const fn raw(self) -> u32 {
        self as u32
    }
}

/// The iWARP QP states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpState {
    /// No connection; the QP may be configured and receive WRs posted.
    /// Reported as INIT.
    Idle,
    /// Armed for connection setup by a modify to RTR; otherwise like IDLE.
    Rtr,
    /// Connected: data moves in both directions.
    Rts,
    /// A graceful close is in progress: the local half of the stream is being
    /// shut down and no new work is started. Reported as SQD.
    Closing,
    /// A TERMINATE exchange is in progress; the stream is being torn down.
    /// Reported as SQE.
    Terminate,
    /// All work is flushed; only a modify to RESET leaves this state.
    Error,
}

impl QpState {
    /// Every iWARP state.
    pub const ALL: [QpState; 6] = [
        QpState::Idle,
        QpState::Rtr,
        QpState::Rts,
        QpState::Closing,
        QpState::Terminate,
        QpState::Error,
    ];

    /// The iWARP state an IB state names: RESET and INIT are both IDLE.
    pub const fn from_ib(state: IbQpState) -> Self {
        match state {
            IbQpState::Reset | IbQpState::Init => QpState::Idle,
            IbQpState::Rtr => QpState::Rtr,
            IbQpState::Rts => QpState::Rts,
            IbQpState::Sqd => QpState::Closing,
            IbQpState::Sqe => QpState::Terminate,
            IbQpState::Err => QpState::Error,
        }
    }

    /// The IB state `query_qp` reports for this state (IDLE reads as INIT).
    pub const fn to_ib(self) -> IbQpState {
        match self {
            QpState::Idle => IbQpState::Init,
            QpState::Rtr => IbQpState::Rtr,
            QpState::Rts => IbQpState::Rts,
            QpState::Closing => IbQpState::Sqd,
            QpState::Terminate => IbQpState::Sqe,
            QpState::Error => IbQpState::Err,
        }
    }
}

/// Whether the send side still has work in flight.
///
/// Only a graceful close asks: it can complete only if nothing is being
/// transmitted and no RDMA Read awaits its response (the SQ's current WR is
/// idle and the ORQ is empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendWork {
    /// Nothing in flight.
    Idle,
    /// A send WR is being transmitted or the ORQ is not empty.
    Busy,
}

/// The asynchronous QP events the driver raises (`enum ib_event_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum EventKind {
    /// `IB_EVENT_QP_FATAL`: the QP failed and cannot continue.
    Fatal = 1,
    /// `IB_EVENT_QP_REQ_ERR`: an invalid request (work request or message).
    RequestError = 2,
    /// `IB_EVENT_QP_ACCESS_ERR`: a protection or access violation.
    AccessError = 3,
}

impl EventKind {
    /// The kernel `enum ib_event_type` value.
    pub const fn raw(self) -> u32 {
        self as u32
    }

    /// The event for a locally detected protocol error: remote protection
    /// (RDMAP) and tagged buffer (DDP) errors are access errors, anything
    /// else is fatal.
    pub const fn for_term_error(error: TermError) -> Self {
        match (error.layer(), error.error_type()) {
            (Layer::Rdmap, 1) | (Layer::Ddp, 1) => EventKind::AccessError,
            _ => EventKind::Fatal,
        }
    }
}

/// Something that happened to the QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A verbs `modify_qp` with `IB_QP_STATE`.
    Modify {
        /// The requested IB state.
        target: IbQpState,
        /// Connection management hands over an established, MPA-negotiated
        /// LLP stream with this request (only valid with RTS).
        connection: bool,
    },
    /// Connection management finished MPA negotiation on a stream for this
    /// QP and hands it over.
    ConnectionEstablished,
    /// The peer closed its half of the stream gracefully.
    PeerClosed,
    /// The stream is closed (both halves), whoever started it. Connection
    /// management releases the socket itself.
    LlpClosed,
    /// The stream was reset or failed below MPA.
    LlpReset,
    /// The data path detected an error the peer must be told about.
    ProtocolError(TermError),
    /// The TERMINATE asked for by [`Action::SendTerminate`] was sent.
    TerminateSent,
    /// A TERMINATE arrived from the peer.
    TerminateReceived,
    /// A local error that ends the QP without telling the peer (e.g. an
    /// invalid send WR, a completion queue overrun).
    FatalError(EventKind),
}

/// Something the driver must do after a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Send a TERMINATE reporting this error, before the stream goes away;
    /// then feed [`Input::TerminateSent`].
    SendTerminate(TermError),
    /// Take over the LLP stream from connection management, reset the DDP
    /// MSNs and start transmitting and receiving.
    AttachConnection,
    /// Start a graceful close of the stream (orderly shutdown); connection
    /// management reports [`Input::LlpClosed`] when it is done.
    CloseConnection,
    /// Abort the stream, which may still be open, and hand it back to
    /// connection management.
    DropConnection,
    /// Complete every send queue WR (and the one in progress) with a flush
    /// error.
    FlushSendQueue,
    /// Complete every receive queue WR with a flush error.
    FlushReceiveQueue,
    /// Discard the (already flushed or never started) queue contents without
    /// completions and restart the queue indices (IB RESET semantics).
    ResetQueues,
    /// Raise this asynchronous event on the QP.
    ReportEvent(EventKind),
}

const ATTACH: u8 = 1 << 0;
const CLOSE: u8 = 1 << 1;
const DROP: u8 = 1 << 2;
const FLUSH_SQ: u8 = 1 << 3;
const FLUSH_RQ: u8 = 1 << 4;
const RESET_QUEUES: u8 = 1 << 5;

/// The actions of one transition, executed in a fixed order.
///
/// The order is that of [`Action`]: a TERMINATE goes out before the stream
/// is dropped, the stream stops before the queues are flushed (so no WR
/// completes normally after its flush), and the event comes last. Each
/// action appears at most once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Actions {
    flags: u8,
    terminate: Option<TermError>,
    event: Option<EventKind>,
}

impl Actions {
    /// No action.
    pub const NONE: Actions = Actions {
        flags: 0,
        terminate: None,
        event: None,
    };

    const fn from_flags(flags: u8) -> Self {
        Actions {
            flags,
            terminate: None,
            event: None,
        }
    }

    const fn flag(action: Action) -> u8 {
        match action {
            Action::AttachConnection => ATTACH,
            Action::CloseConnection => CLOSE,
            Action::DropConnection => DROP,
            Action::FlushSendQueue => FLUSH_SQ,
            Action::FlushReceiveQueue => FLUSH_RQ,
            Action::ResetQueues => RESET_QUEUES,
            Action::SendTerminate(_) | Action::ReportEvent(_) => 0,
        }
    }

    /// These actions plus `action` (which replaces an earlier TERMINATE or
    /// event).
    pub const fn with(self, action: Action) -> Self {
        match action {
            Action::SendTerminate(error) => Actions {
                terminate: Some(error),
                ..self
            },
            Action::ReportEvent(kind) => Actions {
                event: Some(kind),
                ..self
            },
            other => Actions {
                flags: self.flags | Self::flag(other),
                ..self
            },
        }
    }

    /// Whether `action` is among these actions (payloads included).
    pub fn contains(&self, action: Action) -> bool {
        match action {
            Action::SendTerminate(error) => self.terminate == Some(error),
            Action::ReportEvent(kind) => self.event == Some(kind),
            other => self.flags & Self::flag(other) != 0,
        }
    }

    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.flags == 0 && self.terminate.is_none() && self.event.is_none()
    }

    /// The actions in execution order.
    pub fn iter(&self) -> ActionIter {
        ActionIter {
            actions: *self,
            next: 0,
        }
    }
}

impl IntoIterator for Actions {
    type Item = Action;
    type IntoIter = ActionIter;

    fn into_iter(self) -> ActionIter {
        self.iter()
    }
}

/// Iterator over [`Actions`] in execution order.
#[derive(Debug, Clone)]
pub struct ActionIter {
    actions: Actions,
    next: u8,
}

impl Iterator for ActionIter {
    type Item = Action;

    fn next(&mut self) -> Option<Action> {
        loop {
            let step = self.next;
            self.next = step.saturating_add(1);
            let flagged = |flag: u8, action: Action| {
                if self.actions.flags & flag != 0 {
                    Some(action)
                } else {
                    None
                }
            };
            let found = match step {
                0 => self.actions.terminate.map(Action::SendTerminate),
                1 => flagged(ATTACH, Action::AttachConnection),
                2 => flagged(CLOSE, Action::CloseConnection),
                3 => flagged(DROP, Action::DropConnection),
                4 => flagged(FLUSH_SQ, Action::FlushSendQueue),
                5 => flagged(FLUSH_RQ, Action::FlushReceiveQueue),
                6 => flagged(RESET_QUEUES, Action::ResetQueues),
                7 => self.actions.event.map(Action::ReportEvent),
                _ => return None,
            };
            if found.is_some() {
                return found;
            }
        }
    }
}

/// The outcome of an accepted input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The state to store (possibly the old one).
    pub state: QpState,
    /// What the driver must do, in order, before releasing its state lock
    /// (or, for the connection actions, by scheduling CM work).
    pub actions: Actions,
}

/// Why an input was refused. The state does not change and no action is
/// due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransitionError {
    /// Neither the IB nor the iWARP model has this transition (e.g. RTS to
    /// RTR, ERROR to INIT, a connection handed over outside RTS or to a QP
    /// that is not IDLE/RTR). The verbs layer answers `EINVAL`; connection
    /// management aborts the offered connection.
    Invalid,
    /// A modify to RTS without an LLP stream: iWARP enters RTS only with a
    /// connection. `EINVAL`.
    NoConnection,
    /// A transition IB allows that iWARP cannot perform: resuming a drained
    /// (SQD) or failed (SQE) send queue to RTS, as a closing or terminated
    /// stream cannot be reopened. `EOPNOTSUPP`.
    Unsupported,
}

/// The errno a refusal maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Errno {
    /// `EINVAL`.
    Inval,
    /// `EOPNOTSUPP`.
    OpNotSupp,
}

impl TransitionError {
    /// The errno the verbs layer returns for this refusal. Given as a kind,
    /// not a number, because `EOPNOTSUPP` differs between architectures.
    pub const fn errno(self) -> Errno {
        match self {
            TransitionError::Invalid | TransitionError::NoConnection => Errno::Inval,
            TransitionError::Unsupported => Errno::OpNotSupp,
        }
    }
}

const fn go(state: QpState, actions: Actions) -> Result<Transition, TransitionError> {
    Ok(Transition { state, actions })
}

const fn stay(state: QpState) -> Result<Transition, TransitionError> {
    go(state, Actions::NONE)
}

/// Enters ERROR: both queues are flushed, plus `extra`.
const fn error(extra: Actions) -> Result<Transition, TransitionError> {
    go(
        QpState::Error,
        Actions {
            flags: extra.flags | FLUSH_SQ | FLUSH_RQ,
            ..extra
        },
    )
}

/// A graceful close from RTS: CLOSING if the send side is idle, else an
/// abortive close into ERROR.
const fn close(send: SendWork) -> Result<Transition, TransitionError> {
    match send {
        SendWork::Idle => go(QpState::Closing, Actions::from_flags(CLOSE | FLUSH_RQ)),
        SendWork::Busy => error(Actions::from_flags(DROP)),
    }
}

fn modify(
    state: QpState,
    target: IbQpState,
    connection: bool,
    send: SendWork,
) -> Result<Transition, TransitionError> {
    use QpState::*;
    if connection && !matches!(target, IbQpState::Rts) {
        return Err(TransitionError::Invalid);
    }
    match target {
        IbQpState::Reset => match state {
            Idle | Rtr | Error => go(Idle, Actions::from_flags(RESET_QUEUES)),
            Rts | Closing | Terminate => Err(TransitionError::Invalid),
        },
        IbQpState::Init => match state {
            Idle => stay(Idle),
            _ => Err(TransitionError::Invalid),
        },
        IbQpState::Rtr => match state {
            Idle | Rtr => stay(Rtr),
            _ => Err(TransitionError::Invalid),
        },
        IbQpState::Rts => match (state, connection) {
            (Idle | Rtr, true) => go(Rts, Actions::from_flags(ATTACH)),
            (Idle | Rtr, false) => Err(TransitionError::NoConnection),
            (Rts, false) => stay(Rts),
            (Closing | Terminate, false) => Err(TransitionError::Unsupported),
            (Rts | Closing | Terminate, true) | (Error, _) => Err(TransitionError::Invalid),
        },
        IbQpState::Sqd => match state {
            Rts => close(send),
            Closing => stay(Closing),
            _ => Err(TransitionError::Invalid),
        },
        IbQpState::Sqe => match state {
            Rts => go(
                Terminate,
                Actions::NONE.with(Action::SendTerminate(TermError::RdmapLocalCatastrophic)),
            ),
            Terminate => stay(Terminate),
            _ => Err(TransitionError::Invalid),
        },
        IbQpState::Err => match state {
            Idle | Rtr => error(Actions::NONE),
            Rts | Closing | Terminate => error(Actions::from_flags(DROP)),
            Error => stay(Error),
        },
    }
}

/// Applies `input` to a QP in `state`.
///
/// `send` says whether the send side has work in flight; only graceful
/// closes consult it. On `Ok`, store the returned state and execute its
/// actions in order; on `Err`, the state is unchanged and nothing is due.
pub fn transition(
    state: QpState,
    input: Input,
    send: SendWork,
) -> Result<Transition, TransitionError> {
    use QpState::*;
    match input {
        Input::Modify { target, connection } => modify(state, target, connection, send),
        Input::ConnectionEstablished => match state {
            Idle | Rtr => go(Rts, Actions::from_flags(ATTACH)),
            _ => Err(TransitionError::Invalid),
        },
        Input::PeerClosed => match state {
            Rts => close(send),
            _ => stay(state),
        },
        Input::LlpClosed => match (state, send) {
            (Closing, SendWork::Idle) => stay(Idle),
            (Closing, SendWork::Busy) | (Terminate, _) => error(Actions::NONE),
            (Rts, _) => error(Actions::NONE.with(Action::ReportEvent(EventKind::Fatal))),
            _ => stay(state),
        },
        Input::LlpReset => match state {
            Rts => error(Actions::NONE.with(Action::ReportEvent(EventKind::Fatal))),
            Closing | Terminate => error(Actions::NONE),
            _ => stay(state),
        },
        Input::ProtocolError(term) => match state {
            Rts | Closing => go(
                Terminate,
                Actions::NONE
                    .with(Action::SendTerminate(term))
                    .with(Action::ReportEvent(EventKind::for_term_error(term))),
            ),
            _ => stay(state),
        },
        Input::TerminateSent => match state {
            Terminate => error(Actions::from_flags(DROP)),
            _ => stay(state),
        },
        Input::TerminateReceived => match state {
            Rts | Closing => go(
                Terminate,
                Actions::from_flags(DROP).with(Action::ReportEvent(EventKind::Fatal)),
            ),
            Terminate => error(Actions::from_flags(DROP)),
            _ => stay(state),
        },
        Input::FatalError(kind) => match state {
            Idle | Rtr => error(Actions::NONE.with(Action::ReportEvent(kind))),
            Rts | Closing | Terminate => {
                error(Actions::from_flags(DROP).with(Action::ReportEvent(kind)))
            }
            Error => stay(Error),
        },
    }
}
