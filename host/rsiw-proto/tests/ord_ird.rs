// SPDX-License-Identifier: GPL-2.0

//! ORD/IRD credit accounting: limits, FIFO order across reads and atomics,
//! slots, the RFC 6581 RTR read, and a model check.

use std::collections::VecDeque;

use proptest::prelude::*;
use rsiw_proto::proto::ord_ird::*;
use rsiw_proto::proto::terminate::TermError;

use RequestKind::{Atomic, Read};

#[test]
fn requester_respects_ord() {
    let mut r = Requester::new(2);
    assert_eq!(r.ord(), 2);
    assert_eq!(r.try_issue(Read), Ok(0));
    assert_eq!(r.try_issue(Atomic), Ok(1));
    assert_eq!(r.try_issue(Read), Err(IssueError::WouldExceed));
    assert_eq!(r.outstanding(), 2);
    assert_eq!(r.front(), Some((0, Read)));
    assert_eq!(r.complete(Read), Ok(0));
    assert_eq!(r.try_issue(Read), Ok(2));
    assert_eq!(r.complete(Atomic), Ok(1));
    assert_eq!(r.complete(Read), Ok(2));
    assert_eq!(r.outstanding(), 0);
    assert_eq!(r.front(), None);
}

#[test]
fn atomics_share_the_read_credits() {
    let mut r = Requester::new(3);
    for _ in 0..3 {
        r.try_issue(Atomic).unwrap();
    }
    assert_eq!(r.try_issue(Read), Err(IssueError::WouldExceed));
    let mut s = Responder::new(1);
    s.accept(Read).unwrap();
    assert_eq!(s.accept(Atomic), Err(Responder::OVERRUN));
}

#[test]
fn unexpected_responses() {
    let mut r = Requester::new(4);
    assert_eq!(r.complete(Read), Err(TermError::RdmapUnexpectedOpcode));
    assert_eq!(r.complete(Atomic), Err(TermError::RdmapUnexpectedOpcode));
    r.try_issue(Read).unwrap();
    r.try_issue(Atomic).unwrap();
    let before = r;
    // The atomic's response cannot overtake the read's.
    assert_eq!(r.complete(Atomic), Err(TermError::RdmapUnexpectedOpcode));
    assert_eq!(r, before);
    let (layer, etype, code) = TermError::RdmapUnexpectedOpcode.triple();
    assert_eq!((layer as u8, etype, code), (0, 2, 0x06));
}

#[test]
fn zero_ord() {
    let mut r = Requester::new(0);
    assert_eq!(r.try_issue(Read), Err(IssueError::NoCredits));
    assert_eq!(r.try_issue(Atomic), Err(IssueError::NoCredits));
    // RFC 6581: the zero-length RTR Read goes out even so, once.
    assert_eq!(r.issue_rtr_read(), Ok(0));
    assert_eq!(r.issue_rtr_read(), Err(IssueError::WouldExceed));
    assert_eq!(r.complete(Read), Ok(0));
    assert_eq!(r.try_issue(Read), Err(IssueError::NoCredits));
}

#[test]
fn rtr_read_needs_an_idle_requester() {
    let mut r = Requester::new(4);
    r.try_issue(Atomic).unwrap();
    assert_eq!(r.issue_rtr_read(), Err(IssueError::WouldExceed));
    r.complete(Atomic).unwrap();
    assert_eq!(r.issue_rtr_read(), Ok(1));
    assert_eq!(r.front(), Some((1, Read)));
}

#[test]
fn responder_overrun() {
    let mut s = Responder::new(2);
    assert_eq!(s.ird(), 2);
    assert_eq!(s.accept(Read), Ok(0));
    assert_eq!(s.accept(Atomic), Ok(1));
    let before = s;
    assert_eq!(s.accept(Read), Err(TermError::RdmapCatastrophicStream));
    assert_eq!(s, before);
    assert_eq!(s.pending(), 2);
    assert_eq!(s.front(), Some((0, Read)));
    assert_eq!(s.finish(), Some((0, Read)));
    assert_eq!(s.accept(Read), Ok(2));
    assert_eq!(s.finish(), Some((1, Atomic)));
    assert_eq!(s.finish(), Some((2, Read)));
    assert_eq!(s.finish(), None);
    let (layer, etype, code) = Responder::OVERRUN.triple();
    assert_eq!((layer as u8, etype, code), (0, 2, 0x07));
}

#[test]
fn zero_ird_refuses_everything() {
    let mut s = Responder::new(0);
    assert_eq!(s.accept(Read), Err(Responder::OVERRUN));
    assert_eq!(s.accept(Atomic), Err(Responder::OVERRUN));
}

#[test]
fn depth_is_clamped() {
    assert_eq!(Requester::new(0x3FFF).ord(), MAX_DEPTH);
    assert_eq!(Responder::new(u16::MAX).ird(), MAX_DEPTH);
    let mut s = Responder::new(u16::MAX);
    for i in 0..MAX_DEPTH {
        assert_eq!(
            s.accept(if i % 3 == 0 { Atomic } else { Read }),
            Ok(usize::from(i))
        );
    }
    assert_eq!(s.accept(Read), Err(Responder::OVERRUN));
    // Slots wrap around the ring.
    s.finish().unwrap();
    assert_eq!(s.accept(Atomic), Ok(0));
    for i in 1..MAX_DEPTH {
        let kind = if i % 3 == 0 { Atomic } else { Read };
        assert_eq!(s.finish(), Some((usize::from(i), kind)));
    }
    assert_eq!(s.finish(), Some((0, Atomic)));
    assert_eq!(s.pending(), 0);
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Issue(RequestKind),
    Rtr,
    Complete(RequestKind),
    Accept(RequestKind),
    Finish,
}

fn arb_kind() -> impl Strategy<Value = RequestKind> {
    prop_oneof![Just(Read), Just(Atomic)]
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        arb_kind().prop_map(Op::Issue),
        Just(Op::Rtr),
        arb_kind().prop_map(Op::Complete),
        arb_kind().prop_map(Op::Accept),
        Just(Op::Finish),
    ]
}

proptest! {
    /// Both sides behave like a bounded FIFO of (slot, kind) with slots
    /// handed out round-robin.
    #[test]
    fn matches_a_fifo_model(ord in 0u16..140, ird in 0u16..140,
                            ops in proptest::collection::vec(arb_op(), 0..600)) {
        let mut req = Requester::new(ord);
        let mut rsp = Responder::new(ird);
        let ord_eff = ord.min(MAX_DEPTH) as usize;
        let ird_eff = ird.min(MAX_DEPTH) as usize;
        let (mut mreq, mut mrsp) = (VecDeque::new(), VecDeque::new());
        let (mut next_req, mut next_rsp) = (0usize, 0usize);
        for op in ops {
            match op {
                Op::Issue(k) => {
                    let want = if ord_eff == 0 {
                        Err(IssueError::NoCredits)
                    } else if mreq.len() >= ord_eff {
                        Err(IssueError::WouldExceed)
                    } else {
                        let s = next_req;
                        next_req = (next_req + 1) % 128;
                        mreq.push_back((s, k));
                        Ok(s)
                    };
                    prop_assert_eq!(req.try_issue(k), want);
                }
                Op::Rtr => {
                    let want = if mreq.is_empty() {
                        let s = next_req;
                        next_req = (next_req + 1) % 128;
                        mreq.push_back((s, Read));
                        Ok(s)
                    } else {
                        Err(IssueError::WouldExceed)
                    };
                    prop_assert_eq!(req.issue_rtr_read(), want);
                }
                Op::Complete(k) => {
                    let want = match mreq.front() {
                        Some(&(s, fk)) if fk == k => {
                            mreq.pop_front();
                            Ok(s)
                        }
                        _ => Err(TermError::RdmapUnexpectedOpcode),
                    };
                    prop_assert_eq!(req.complete(k), want);
                }
                Op::Accept(k) => {
                    let want = if mrsp.len() >= ird_eff {
                        Err(Responder::OVERRUN)
                    } else {
                        let s = next_rsp;
                        next_rsp = (next_rsp + 1) % 128;
                        mrsp.push_back((s, k));
                        Ok(s)
                    };
                    prop_assert_eq!(rsp.accept(k), want);
                }
                Op::Finish => prop_assert_eq!(rsp.finish(), mrsp.pop_front()),
            }
            prop_assert_eq!(usize::from(req.outstanding()), mreq.len());
            prop_assert_eq!(usize::from(rsp.pending()), mrsp.len());
            prop_assert_eq!(req.front(), mreq.front().copied());
            prop_assert_eq!(rsp.front(), mrsp.front().copied());
        }
    }
}
