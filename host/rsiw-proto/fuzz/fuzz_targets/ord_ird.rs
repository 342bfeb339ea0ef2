// SPDX-License-Identifier: GPL-2.0

//! ORD/IRD accounting driven by arbitrary sequences of requests and
//! responses on both sides, checked against a bounded FIFO model.

#![no_main]

use std::collections::VecDeque;

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::ord_ird::*;
use rsiw_proto::proto::terminate::TermError;

fuzz_target!(|data: &[u8]| {
    let Some((&[o1, o2, i1, i2], ops)) = data.split_first_chunk::<4>() else {
        return;
    };
    let ord = u16::from_be_bytes([o1, o2]);
    let ird = u16::from_be_bytes([i1, i2]);
    let mut req = Requester::new(ord);
    let mut rsp = Responder::new(ird);
    assert_eq!(req.ord(), ord.min(MAX_DEPTH));
    assert_eq!(rsp.ird(), ird.min(MAX_DEPTH));
    let (mut mreq, mut mrsp) = (VecDeque::new(), VecDeque::new());
    let (mut next_req, mut next_rsp) = (0usize, 0usize);
    for &op in ops {
        let kind = if op & 0x10 == 0 {
            RequestKind::Read
        } else {
            RequestKind::Atomic
        };
        match op % 5 {
            0 => {
                let want = if req.ord() == 0 {
                    Err(IssueError::NoCredits)
                } else if mreq.len() >= usize::from(req.ord()) {
                    Err(IssueError::WouldExceed)
                } else {
                    mreq.push_back((next_req, kind));
                    next_req = (next_req + 1) % usize::from(MAX_DEPTH);
                    Ok(mreq.back().unwrap().0)
                };
                assert_eq!(req.try_issue(kind), want);
            }
            1 => {
                let want = if mreq.is_empty() {
                    mreq.push_back((next_req, RequestKind::Read));
                    next_req = (next_req + 1) % usize::from(MAX_DEPTH);
                    Ok(mreq.back().unwrap().0)
                } else {
                    Err(IssueError::WouldExceed)
                };
                assert_eq!(req.issue_rtr_read(), want);
            }
            2 => {
                let want = match mreq.front() {
                    Some(&(slot, k)) if k == kind => {
                        mreq.pop_front();
                        Ok(slot)
                    }
                    _ => Err(TermError::RdmapUnexpectedOpcode),
                };
                assert_eq!(req.complete(kind), want);
            }
            3 => {
                let want = if mrsp.len() >= usize::from(rsp.ird()) {
                    Err(Responder::OVERRUN)
                } else {
                    mrsp.push_back((next_rsp, kind));
                    next_rsp = (next_rsp + 1) % usize::from(MAX_DEPTH);
                    Ok(mrsp.back().unwrap().0)
                };
                assert_eq!(rsp.accept(kind), want);
            }
            _ => assert_eq!(rsp.finish(), mrsp.pop_front()),
        }
        assert_eq!(usize::from(req.outstanding()), mreq.len());
        assert_eq!(usize::from(rsp.pending()), mrsp.len());
        assert_eq!(req.front(), mreq.front().copied());
        assert_eq!(rsp.front(), mrsp.front().copied());
        assert!(req.outstanding() <= req.ord().max(1));
        assert!(rsp.pending() <= rsp.ird());
    }
});
