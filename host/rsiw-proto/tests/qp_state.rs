// SPDX-License-Identifier: GPL-2.0

//! The QP state machine against an explicit transition table, the IB state
//! mapping, the flush rules and the stickiness of ERROR.

use proptest::prelude::*;
use rsiw_proto::proto::qp_state::*;
use rsiw_proto::proto::terminate::{TermError, ALL_TERM_ERRORS};

use QpState::{Closing as C, Error as E, Idle as I, Rtr as R, Rts as S, Terminate as T};

const AC: Action = Action::AttachConnection;
const CC: Action = Action::CloseConnection;
const DC: Action = Action::DropConnection;
const FS: Action = Action::FlushSendQueue;
const FR: Action = Action::FlushReceiveQueue;
const RQ: Action = Action::ResetQueues;
const EV_FATAL: Action = Action::ReportEvent(EventKind::Fatal);
const EV_REQ: Action = Action::ReportEvent(EventKind::RequestError);
const EV_ACC: Action = Action::ReportEvent(EventKind::AccessError);

/// One expected outcome.
#[derive(Debug, Clone, Copy)]
enum Exp {
    Ok(QpState, &'static [Action]),
    Err(TransitionError),
}

const INV: Exp = Exp::Err(TransitionError::Invalid);
const NOC: Exp = Exp::Err(TransitionError::NoConnection);
const UNS: Exp = Exp::Err(TransitionError::Unsupported);

/// "Ignored": accepted, state unchanged, nothing to do.
const fn keep(state: QpState) -> Exp {
    Exp::Ok(state, &[])
}

const fn modify(target: IbQpState, connection: bool) -> Input {
    Input::Modify { target, connection }
}

/// Column order of the table.
const STATES: [QpState; 6] = [I, R, S, C, T, E];

const ST_LOCAL: Action = Action::SendTerminate(TermError::RdmapLocalCatastrophic);
const ST_STAG: Action = Action::SendTerminate(TermError::RdmapInvalidStag);
const ST_MSN: Action = Action::SendTerminate(TermError::DdpMsnNoBuffer);

/// Every input against every state, with no send work in flight.
/// Columns: IDLE, RTR, RTS, CLOSING, TERMINATE, ERROR.
const TABLE: &[(Input, [Exp; 6])] = {
    use IbQpState as Ib;
    &[
        (
            modify(Ib::Reset, false),
            [
                Exp::Ok(I, &[RQ]),
                Exp::Ok(I, &[RQ]),
                INV,
                INV,
                INV,
                Exp::Ok(I, &[RQ]),
            ],
        ),
        (modify(Ib::Init, false), [keep(I), INV, INV, INV, INV, INV]),
        (
            modify(Ib::Rtr, false),
            [Exp::Ok(R, &[]), keep(R), INV, INV, INV, INV],
        ),
        (modify(Ib::Rts, false), [NOC, NOC, keep(S), UNS, UNS, INV]),
        (
            modify(Ib::Sqd, false),
            [INV, INV, Exp::Ok(C, &[CC, FR]), keep(C), INV, INV],
        ),
        (
            modify(Ib::Sqe, false),
            [INV, INV, Exp::Ok(T, &[ST_LOCAL]), INV, keep(T), INV],
        ),
        (
            modify(Ib::Err, false),
            [
                Exp::Ok(E, &[FS, FR]),
                Exp::Ok(E, &[FS, FR]),
                Exp::Ok(E, &[DC, FS, FR]),
                Exp::Ok(E, &[DC, FS, FR]),
                Exp::Ok(E, &[DC, FS, FR]),
                keep(E),
            ],
        ),
        (modify(Ib::Reset, true), [INV; 6]),
        (modify(Ib::Init, true), [INV; 6]),
        (modify(Ib::Rtr, true), [INV; 6]),
        (
            modify(Ib::Rts, true),
            [Exp::Ok(S, &[AC]), Exp::Ok(S, &[AC]), INV, INV, INV, INV],
        ),
        (modify(Ib::Sqd, true), [INV; 6]),
        (modify(Ib::Sqe, true), [INV; 6]),
        (modify(Ib::Err, true), [INV; 6]),
        (
            Input::ConnectionEstablished,
            [Exp::Ok(S, &[AC]), Exp::Ok(S, &[AC]), INV, INV, INV, INV],
        ),
        (
            Input::PeerClosed,
            [
                keep(I),
                keep(R),
                Exp::Ok(C, &[CC, FR]),
                keep(C),
                keep(T),
                keep(E),
            ],
        ),
        (
            Input::LlpClosed,
            [
                keep(I),
                keep(R),
                Exp::Ok(E, &[FS, FR, EV_FATAL]),
                Exp::Ok(I, &[]),
                Exp::Ok(E, &[FS, FR]),
                keep(E),
            ],
        ),
        (
            Input::LlpReset,
            [
                keep(I),
                keep(R),
                Exp::Ok(E, &[FS, FR, EV_FATAL]),
                Exp::Ok(E, &[FS, FR]),
                Exp::Ok(E, &[FS, FR]),
                keep(E),
            ],
        ),
        (
            Input::ProtocolError(TermError::RdmapInvalidStag),
            [
                keep(I),
                keep(R),
                Exp::Ok(T, &[ST_STAG, EV_ACC]),
                Exp::Ok(T, &[ST_STAG, EV_ACC]),
                keep(T),
                keep(E),
            ],
        ),
        (
            Input::ProtocolError(TermError::DdpMsnNoBuffer),
            [
                keep(I),
                keep(R),
                Exp::Ok(T, &[ST_MSN, EV_FATAL]),
                Exp::Ok(T, &[ST_MSN, EV_FATAL]),
                keep(T),
                keep(E),
            ],
        ),
        (
            Input::TerminateSent,
            [
                keep(I),
                keep(R),
                keep(S),
                keep(C),
                Exp::Ok(E, &[DC, FS, FR]),
                keep(E),
            ],
        ),
        (
            Input::TerminateReceived,
            [
                keep(I),
                keep(R),
                Exp::Ok(T, &[DC, EV_FATAL]),
                Exp::Ok(T, &[DC, EV_FATAL]),
                Exp::Ok(E, &[DC, FS, FR]),
                keep(E),
            ],
        ),
        (
            Input::FatalError(EventKind::Fatal),
            [
                Exp::Ok(E, &[FS, FR, EV_FATAL]),
                Exp::Ok(E, &[FS, FR, EV_FATAL]),
                Exp::Ok(E, &[DC, FS, FR, EV_FATAL]),
                Exp::Ok(E, &[DC, FS, FR, EV_FATAL]),
                Exp::Ok(E, &[DC, FS, FR, EV_FATAL]),
                keep(E),
            ],
        ),
        (
            Input::FatalError(EventKind::RequestError),
            [
                Exp::Ok(E, &[FS, FR, EV_REQ]),
                Exp::Ok(E, &[FS, FR, EV_REQ]),
                Exp::Ok(E, &[DC, FS, FR, EV_REQ]),
                Exp::Ok(E, &[DC, FS, FR, EV_REQ]),
                Exp::Ok(E, &[DC, FS, FR, EV_REQ]),
                keep(E),
            ],
        ),
    ]
};

/// The cells that differ when send work is in flight: a graceful close is
/// impossible and becomes an abortive one.
const BUSY_OVERRIDES: &[(QpState, Input, Exp)] = &[
    (S, modify(IbQpState::Sqd, false), Exp::Ok(E, &[DC, FS, FR])),
    (S, Input::PeerClosed, Exp::Ok(E, &[DC, FS, FR])),
    (C, Input::LlpClosed, Exp::Ok(E, &[FS, FR])),
];

fn check(state: QpState, input: Input, send: SendWork, exp: Exp) {
    let got = transition(state, input, send);
    match (exp, got) {
        (Exp::Ok(next, actions), Ok(t)) => {
            assert_eq!(t.state, next, "{state:?} + {input:?} ({send:?})");
            let list: Vec<Action> = t.actions.iter().collect();
            assert_eq!(list, actions, "{state:?} + {input:?} ({send:?})");
        }
        (Exp::Err(want), Err(err)) => assert_eq!(err, want, "{state:?} + {input:?} ({send:?})"),
        (exp, got) => panic!("{state:?} + {input:?} ({send:?}): expected {exp:?}, got {got:?}"),
    }
}

#[test]
fn table_covers_every_modify_request() {
    for target in IbQpState::ALL {
        for connection in [false, true] {
            let input = modify(target, connection);
            assert_eq!(
                TABLE.iter().filter(|(i, _)| *i == input).count(),
                1,
                "{input:?}"
            );
        }
    }
    assert_eq!(STATES, QpState::ALL);
}

#[test]
fn every_transition_with_send_idle() {
    for (input, row) in TABLE {
        for (state, exp) in STATES.iter().zip(row) {
            check(*state, *input, SendWork::Idle, *exp);
        }
    }
}

#[test]
fn every_transition_with_send_busy() {
    for (input, row) in TABLE {
        for (state, exp) in STATES.iter().zip(row) {
            let exp = BUSY_OVERRIDES
                .iter()
                .find(|(s, i, _)| s == state && i == input)
                .map_or(*exp, |(_, _, e)| *e);
            check(*state, *input, SendWork::Busy, exp);
        }
    }
}

#[test]
fn refusals_are_counted_and_mapped_to_errno() {
    let mut refused = 0;
    for (input, row) in TABLE {
        for (state, exp) in STATES.iter().zip(row) {
            if let Exp::Err(want) = exp {
                refused += 1;
                let err = transition(*state, *input, SendWork::Idle).unwrap_err();
                assert_eq!(err, *want);
            }
        }
    }
    // Modifies without a connection, the six non-RTS targets with one, RTS
    // with one, and the CM hand-over outside IDLE/RTR.
    assert_eq!(refused, 25 + 36 + 4 + 4);
    assert_eq!(TransitionError::Invalid.errno(), Errno::Inval);
    assert_eq!(TransitionError::NoConnection.errno(), Errno::Inval);
    assert_eq!(TransitionError::Unsupported.errno(), Errno::OpNotSupp);
}

#[test]
fn entering_error_flushes_both_queues_and_drops_an_open_stream() {
    for (input, _) in TABLE {
        for state in QpState::ALL {
            for send in [SendWork::Idle, SendWork::Busy] {
                let Ok(t) = transition(state, *input, send) else {
                    continue;
                };
                if t.state != E || state == E {
                    continue;
                }
                assert!(t.actions.contains(FS), "{state:?} + {input:?}");
                assert!(t.actions.contains(FR), "{state:?} + {input:?}");
                // The stream is aborted by us unless the CM reported it gone.
                let open = matches!(state, S | C | T)
                    && !matches!(input, Input::LlpClosed | Input::LlpReset);
                assert_eq!(t.actions.contains(DC), open, "{state:?} + {input:?}");
                assert!(!t.actions.contains(CC) && !t.actions.contains(AC));
            }
        }
    }
}

#[test]
fn error_is_left_only_by_reset() {
    for (input, _) in TABLE {
        for send in [SendWork::Idle, SendWork::Busy] {
            match transition(E, *input, send) {
                Ok(t) if t.state != E => {
                    assert_eq!(*input, modify(IbQpState::Reset, false));
                    assert_eq!(t.state, I);
                    assert_eq!(t.actions.iter().collect::<Vec<_>>(), [RQ]);
                }
                Ok(t) => assert!(t.actions.is_empty(), "{input:?}"),
                Err(_) => {}
            }
        }
    }
}

#[test]
fn ib_state_raw_values() {
    for (raw, state) in IbQpState::ALL.iter().enumerate() {
        let raw = u32::try_from(raw).unwrap();
        assert_eq!(state.raw(), raw);
        assert_eq!(IbQpState::from_raw(raw), Some(*state));
    }
    assert_eq!(IbQpState::from_raw(7), None);
    assert_eq!(IbQpState::from_raw(u32::MAX), None);
}

#[test]
fn ib_to_iwarp_and_back() {
    use IbQpState as Ib;
    let map = [
        (Ib::Reset, I),
        (Ib::Init, I),
        (Ib::Rtr, R),
        (Ib::Rts, S),
        (Ib::Sqd, C),
        (Ib::Sqe, T),
        (Ib::Err, E),
    ];
    for (ib, iw) in map {
        assert_eq!(QpState::from_ib(ib), iw, "{ib:?}");
    }
    let query = [
        (I, Ib::Init),
        (R, Ib::Rtr),
        (S, Ib::Rts),
        (C, Ib::Sqd),
        (T, Ib::Sqe),
        (E, Ib::Err),
    ];
    for (iw, ib) in query {
        assert_eq!(iw.to_ib(), ib, "{iw:?}");
        assert_eq!(QpState::from_ib(iw.to_ib()), iw);
    }
}

#[test]
fn event_kinds() {
    assert_eq!(EventKind::Fatal.raw(), 1);
    assert_eq!(EventKind::RequestError.raw(), 2);
    assert_eq!(EventKind::AccessError.raw(), 3);
    for error in ALL_TERM_ERRORS {
        let protection = matches!(error.triple(), (_, 1, _))
            && !matches!(error.layer(), rsiw_proto::proto::terminate::Layer::Llp);
        let want = if protection {
            EventKind::AccessError
        } else {
            EventKind::Fatal
        };
        assert_eq!(EventKind::for_term_error(error), want, "{error:?}");
    }
}

#[test]
fn actions_run_in_fixed_order() {
    let all = Actions::NONE
        .with(Action::ReportEvent(EventKind::Fatal))
        .with(RQ)
        .with(FR)
        .with(FS)
        .with(DC)
        .with(CC)
        .with(AC)
        .with(ST_LOCAL);
    let list: Vec<Action> = all.into_iter().collect();
    assert_eq!(list, [ST_LOCAL, AC, CC, DC, FS, FR, RQ, EV_FATAL]);
    assert!(Actions::NONE.is_empty());
    assert_eq!(Actions::NONE.iter().next(), None);
    assert!(!all.contains(ST_STAG));
    assert!(!all.contains(EV_ACC));
    assert_eq!(all.with(FS), all);
}

#[test]
fn lifecycle_graceful_and_terminate() {
    use IbQpState as Ib;
    let idle = SendWork::Idle;
    let mut state = I;
    for (input, want) in [
        (modify(Ib::Init, false), I),
        (modify(Ib::Rtr, false), R),
        (Input::ConnectionEstablished, S),
        (modify(Ib::Sqd, false), C),
        (Input::PeerClosed, C),
        (Input::LlpClosed, I),
        (modify(Ib::Rts, true), S),
        (Input::ProtocolError(TermError::DdpInvalidStag), T),
        (Input::TerminateReceived, E),
        (Input::LlpClosed, E),
        (modify(Ib::Reset, false), I),
    ] {
        state = transition(state, input, idle).unwrap().state;
        assert_eq!(state, want, "{input:?}");
    }
}

fn any_input() -> impl Strategy<Value = Input> {
    let target = proptest::sample::select(IbQpState::ALL.to_vec());
    let kind = proptest::sample::select(vec![
        EventKind::Fatal,
        EventKind::RequestError,
        EventKind::AccessError,
    ]);
    prop_oneof![
        (target, any::<bool>())
            .prop_map(|(target, connection)| Input::Modify { target, connection }),
        Just(Input::ConnectionEstablished),
        Just(Input::PeerClosed),
        Just(Input::LlpClosed),
        Just(Input::LlpReset),
        proptest::sample::select(ALL_TERM_ERRORS.to_vec()).prop_map(Input::ProtocolError),
        Just(Input::TerminateSent),
        Just(Input::TerminateReceived),
        kind.prop_map(Input::FatalError),
    ]
}

fn any_send() -> impl Strategy<Value = SendWork> {
    prop_oneof![Just(SendWork::Idle), Just(SendWork::Busy)]
}

proptest! {
    #[test]
    fn error_is_sticky(
        start in proptest::sample::select(QpState::ALL.to_vec()),
        steps in proptest::collection::vec((any_input(), any_send()), 0..64),
    ) {
        let mut state = start;
        for (input, send) in steps {
            let before = state;
            match transition(state, input, send) {
                Ok(t) => {
                    if before == E && t.state != E {
                        prop_assert_eq!(input, modify(IbQpState::Reset, false));
                        prop_assert_eq!(t.state, I);
                    }
                    if before != E && t.state == E {
                        prop_assert!(t.actions.contains(FS) && t.actions.contains(FR));
                    }
                    let list: Vec<Action> = t.actions.iter().collect();
                    prop_assert!(list.len() <= 8);
                    for action in &list {
                        prop_assert!(t.actions.contains(*action));
                    }
                    state = t.state;
                }
                Err(err) => {
                    prop_assert!(before != E || err == TransitionError::Invalid);
                }
            }
        }
    }
}
