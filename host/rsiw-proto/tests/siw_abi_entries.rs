// SPDX-License-Identifier: GPL-2.0

//! The siw user ABI queue entries: SQEs and RQEs laid out as rdma-core's siw
//! provider writes them, decoded; CQEs encoded and checked byte by byte; the
//! CQ arming rule; and arbitrary entries, which must never panic.

use proptest::prelude::*;
use rsiw_proto::proto::qp_engine::{
    Completion, RecvRequest, SendOp, SendRequest, Sge, SgeList, WcOpcode, WcStatus, MAX_SGE,
};
use rsiw_proto::proto::siw_abi_entries::*;

/// The provider's `push_send_wqe` for a work request with SGEs: every field
/// but the flags, then the flags with [`VALID`] last. `num_sge` is stored as
/// given (the provider refuses more than six; a hostile process does not).
fn sqe(
    id: u64,
    opcode: u8,
    flags: u16,
    rkey: u32,
    raddr: u64,
    num_sge: u8,
    sges: &[Sge],
) -> [u8; SQE_SIZE] {
    let mut e = [0u8; SQE_SIZE];
    e[0..8].copy_from_slice(&id.to_ne_bytes());
    e[10] = num_sge;
    e[11] = opcode;
    e[12..16].copy_from_slice(&rkey.to_ne_bytes());
    e[16..24].copy_from_slice(&raddr.to_ne_bytes());
    for (i, s) in sges.iter().enumerate() {
        let at = 24 + 16 * i;
        e[at..at + 8].copy_from_slice(&s.addr.to_ne_bytes());
        e[at + 8..at + 12].copy_from_slice(&s.length.to_ne_bytes());
        e[at + 12..at + 16].copy_from_slice(&s.lkey.to_ne_bytes());
    }
    e[8..10].copy_from_slice(&(flags | VALID).to_ne_bytes());
    e
}

/// The provider's `push_send_wqe` with `IBV_SEND_INLINE`: the gathered bytes
/// copied to `sge[1]` on, their length in `sge[0].length`, `num_sge` the
/// work request's count of gathered buffers.
fn sqe_inline(
    id: u64,
    opcode: u8,
    flags: u16,
    rkey: u32,
    raddr: u64,
    num_sge: u8,
    data: &[u8],
) -> [u8; SQE_SIZE] {
    let mut e = sqe(id, opcode, flags | INLINE, rkey, raddr, num_sge, &[]);
    e[40..40 + data.len()].copy_from_slice(data);
    e[32..36].copy_from_slice(&(data.len() as u32).to_ne_bytes());
    e
}

/// The provider's `push_recv_wqe`.
fn rqe(id: u64, num_sge: u8, sges: &[Sge]) -> [u8; RQE_SIZE] {
    let mut e = [0u8; RQE_SIZE];
    e[0..8].copy_from_slice(&id.to_ne_bytes());
    e[10] = num_sge;
    for (i, s) in sges.iter().enumerate() {
        let at = 16 + 16 * i;
        e[at..at + 8].copy_from_slice(&s.addr.to_ne_bytes());
        e[at + 8..at + 12].copy_from_slice(&s.length.to_ne_bytes());
        e[at + 12..at + 16].copy_from_slice(&s.lkey.to_ne_bytes());
    }
    e[8..10].copy_from_slice(&VALID.to_ne_bytes());
    e
}

fn sge(i: u32) -> Sge {
    Sge {
        addr: 0x1000_0000_0000 + u64::from(i) * 0x1_0001,
        length: 100 + i,
        lkey: 0x0100_0000 | i,
    }
}

fn sges(n: u32) -> Vec<Sge> {
    (0..n).map(sge).collect()
}

const RADDR: u64 = 0xfedc_ba98_7654_3210;
const RKEY: u32 = 0x1234_5678;

fn send(opcode: u8, flags: u16) -> Result<UserSend, SqeError> {
    decode_sqe(&sqe(77, opcode, flags, RKEY, RADDR, 2, &sges(2)), false)
}

#[test]
fn abi_sizes() {
    assert_eq!(
        (SQE_SIZE, RQE_SIZE, CQE_SIZE, CQ_CTRL_SIZE),
        (120, 112, 32, 8)
    );
    assert_eq!(SQE_SIZE, 24 + 16 * MAX_SGE);
    assert_eq!(RQE_SIZE, 16 + 16 * MAX_SGE);
    assert_eq!((MAX_INLINE, INLINE_OFFSET, FLAGS_OFFSET), (80, 40, 8));
    assert_eq!(INLINE_OFFSET + MAX_INLINE, SQE_SIZE);
    assert_eq!(
        [VALID, INLINE, SIGNALLED, SOLICITED, READ_FENCE, REM_INVAL, COMPLETED],
        [1, 2, 4, 8, 16, 32, 64]
    );
    assert_eq!(
        [
            NOTIFY_SOLICITED,
            NOTIFY_NEXT_COMPLETION,
            NOTIFY_MISSED_EVENTS
        ],
        [1, 2, 4]
    );
}

#[test]
fn every_opcode() {
    let list = SgeList::new(&sges(2)).unwrap();
    for opcode in 0..=u8::MAX {
        let want = match opcode {
            0 => Ok(SendOp::Write {
                remote_addr: RADDR,
                rkey: RKEY,
            }),
            1 => Ok(SendOp::Read {
                remote_addr: RADDR,
                rkey: RKEY,
            }),
            2 => Ok(SendOp::ReadInv {
                remote_addr: RADDR,
                rkey: RKEY,
            }),
            3 => Ok(SendOp::Send {
                solicited: false,
                invalidate: None,
            }),
            5 => Ok(SendOp::Send {
                solicited: false,
                invalidate: Some(RKEY),
            }),
            4 | 6 | 7 => Err(SqeError::Unsupported),
            _ => Err(SqeError::BadOpcode),
        };
        let got = send(opcode, 0);
        match want {
            Ok(op) => assert_eq!(
                got,
                Ok(UserSend {
                    request: SendRequest {
                        wr_id: 77,
                        op,
                        sges: list,
                        signaled: false,
                        fence: false,
                    },
                    inline: None,
                }),
                "opcode {opcode}"
            ),
            Err(e) => assert_eq!(got, Err(e), "opcode {opcode}"),
        }
    }
    assert_eq!(
        [
            OP_WRITE,
            OP_READ,
            OP_READ_LOCAL_INV,
            OP_SEND,
            OP_SEND_WITH_IMM,
            OP_SEND_REMOTE_INV,
            OP_FETCH_AND_ADD,
            OP_COMP_AND_SWAP,
            OP_RECEIVE,
            OP_READ_RESPONSE,
            OP_INVAL_STAG,
            OP_REG_MR
        ],
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    );
}

/// How much of an entry counts: its SGEs, or its inline data; the head at
/// least, the whole entry at most.
#[test]
fn counted_entry_lengths() {
    let head = |e: &[u8; SQE_SIZE]| -> [u8; SQE_HEAD] { e[..SQE_HEAD].try_into().unwrap() };
    assert_eq!(SQE_HEAD, 40);
    let one = sqe(1, OP_SEND, 0, 0, 0, 1, &sges(1));
    assert_eq!(sqe_len(&head(&one)), SQE_HEAD);
    let none = sqe(1, OP_SEND, 0, 0, 0, 0, &[]);
    assert_eq!(sqe_len(&head(&none)), SQE_HEAD);
    let three = sqe(1, OP_WRITE, 0, 7, 8, 3, &sges(3));
    assert_eq!(sqe_len(&head(&three)), 24 + 3 * 16);
    let six = sqe(1, OP_WRITE, 0, 7, 8, 6, &sges(6));
    assert_eq!(sqe_len(&head(&six)), SQE_SIZE);
    let too_many = sqe(1, OP_WRITE, 0, 7, 8, 200, &[]);
    assert_eq!(sqe_len(&head(&too_many)), SQE_SIZE);
    let small = sqe_inline(1, OP_SEND, 0, 0, 0, 1, &[5; 8]);
    assert_eq!(sqe_len(&head(&small)), SQE_HEAD + 8);
    let full = sqe_inline(1, OP_SEND, 0, 0, 0, 1, &[5; MAX_INLINE]);
    assert_eq!(sqe_len(&head(&full)), SQE_SIZE);
    let mut too_long = small;
    too_long[32..36].copy_from_slice(&u32::MAX.to_ne_bytes());
    assert_eq!(sqe_len(&head(&too_long)), SQE_SIZE);

    let rhead = |e: &[u8; RQE_SIZE]| -> [u8; RQE_HEAD] { e[..RQE_HEAD].try_into().unwrap() };
    assert_eq!(RQE_HEAD, 32);
    assert_eq!(rqe_len(&rhead(&rqe(1, 0, &[]))), RQE_HEAD);
    assert_eq!(rqe_len(&rhead(&rqe(1, 1, &sges(1)))), RQE_HEAD);
    assert_eq!(rqe_len(&rhead(&rqe(1, 2, &sges(2)))), 16 + 2 * 16);
    assert_eq!(rqe_len(&rhead(&rqe(1, 6, &sges(6)))), RQE_SIZE);
    assert_eq!(rqe_len(&rhead(&rqe(1, 200, &[]))), RQE_SIZE);
}

#[test]
fn flags() {
    for bits in 0..128u16 {
        let flags = bits & !INLINE;
        for signal_all in [false, true] {
            let e = sqe(1, OP_SEND, flags, 9, 0, 1, &sges(1));
            let r = decode_sqe(&e, signal_all).unwrap().request;
            assert_eq!(r.signaled, flags & SIGNALLED != 0 || signal_all);
            assert_eq!(r.fence, flags & READ_FENCE != 0);
            assert_eq!(
                r.op,
                SendOp::Send {
                    solicited: flags & SOLICITED != 0,
                    invalidate: None
                }
            );
        }
    }
    // The solicited flag is a Send's; a Write ignores it.
    let r = send(OP_WRITE, SOLICITED | SIGNALLED | READ_FENCE)
        .unwrap()
        .request;
    assert!(r.signaled && r.fence);
    assert_eq!(
        r.op,
        SendOp::Write {
            remote_addr: RADDR,
            rkey: RKEY
        }
    );
    // Flags the kernel sets or that mean nothing in an SQE change nothing.
    assert_eq!(
        send(OP_READ, COMPLETED | REM_INVAL | 0xff80),
        send(OP_READ, 0)
    );
}

#[test]
fn send_with_invalidate() {
    let r = send(OP_SEND_REMOTE_INV, SOLICITED).unwrap();
    assert_eq!(
        r.request.op,
        SendOp::Send {
            solicited: true,
            invalidate: Some(RKEY)
        }
    );
    assert_eq!(r.request.sges.as_slice(), &sges(2)[..]);
    assert_eq!(r.inline, None);
}

#[test]
fn not_valid() {
    let mut e = sqe(1, OP_SEND, SIGNALLED, 0, 0, 1, &sges(1));
    assert!(decode_sqe(&e, true).is_ok());
    e[8] &= !1;
    assert_eq!(decode_sqe(&e, true), Err(SqeError::NotValid));
    // Not valid wins over every other fault.
    let mut e = sqe(1, 200, 0, 0, 0, 200, &[]);
    e[8..10].copy_from_slice(&(0xfffe_u16).to_ne_bytes());
    assert_eq!(decode_sqe(&e, false), Err(SqeError::NotValid));
    assert_eq!(decode_sqe(&[0; SQE_SIZE], false), Err(SqeError::NotValid));

    let mut r = rqe(1, 1, &sges(1));
    r[8] = 0;
    assert_eq!(decode_rqe(&r), Err(RqeError::NotValid));
    r[10] = 7;
    assert_eq!(decode_rqe(&r), Err(RqeError::NotValid));
    assert_eq!(decode_rqe(&[0; RQE_SIZE]), Err(RqeError::NotValid));
}

#[test]
fn sge_counts() {
    for opcode in [OP_SEND, OP_WRITE, OP_READ, OP_SEND_REMOTE_INV] {
        for n in 0..=6u8 {
            let list = sges(u32::from(n));
            let r = decode_sqe(&sqe(5, opcode, 0, 1, 2, n, &list), false).unwrap();
            assert_eq!(r.request.sges.as_slice(), &list[..]);
            assert_eq!(r.inline, None);
        }
        for n in [7u8, 8, 100, 255] {
            assert_eq!(
                decode_sqe(&sqe(5, opcode, 0, 1, 2, n, &sges(6)), false),
                Err(SqeError::TooManySges)
            );
        }
    }
    // A bad opcode is reported before a bad count.
    assert_eq!(
        decode_sqe(&sqe(5, OP_RECEIVE, 0, 1, 2, 9, &[]), false),
        Err(SqeError::BadOpcode)
    );
}

#[test]
fn inline_data() {
    let data: Vec<u8> = (1..=80).collect();
    for opcode in [OP_SEND, OP_SEND_REMOTE_INV, OP_WRITE] {
        for len in [0usize, 1, 15, 16, 17, 79, 80] {
            // num_sge is the work request's count of gathered buffers,
            // which may well exceed six: it is ignored.
            for num_sge in [0u8, 1, 3, 6, 7, 255] {
                let e = sqe_inline(9, opcode, SIGNALLED, RKEY, RADDR, num_sge, &data[..len]);
                let r = decode_sqe(&e, false).unwrap();
                assert_eq!(r.request.sges, SgeList::EMPTY);
                assert!(r.request.signaled);
                assert_eq!(r.request.wr_id, 9);
                assert_eq!(r.inline, Some(40..40 + len));
                assert_eq!(&e[r.inline.unwrap()], &data[..len]);
            }
        }
    }
    let e = sqe_inline(9, OP_WRITE, 0, RKEY, RADDR, 1, b"hello");
    assert_eq!(
        decode_sqe(&e, false).unwrap().request.op,
        SendOp::Write {
            remote_addr: RADDR,
            rkey: RKEY
        }
    );
}

#[test]
fn inline_too_long() {
    for len in [81u32, 96, 0x8000_0050, u32::MAX] {
        let mut e = sqe_inline(9, OP_SEND, 0, 0, 0, 1, &[]);
        e[32..36].copy_from_slice(&len.to_ne_bytes());
        assert_eq!(decode_sqe(&e, false), Err(SqeError::InlineTooLong));
    }
    assert_eq!(SqeError::InlineTooLong.status(), WcStatus::LocLenErr);
}

#[test]
fn inline_needs_send_or_write() {
    for opcode in [OP_READ, OP_READ_LOCAL_INV] {
        let e = sqe_inline(9, opcode, 0, RKEY, RADDR, 1, b"abc");
        assert_eq!(decode_sqe(&e, false), Err(SqeError::InlineNotAllowed));
    }
    // Unsupported and unknown opcodes stay what they are.
    let e = sqe_inline(9, OP_SEND_WITH_IMM, 0, 0, 0, 1, b"abc");
    assert_eq!(decode_sqe(&e, false), Err(SqeError::Unsupported));
    let e = sqe_inline(9, OP_REG_MR, 0, 0, 0, 1, b"abc");
    assert_eq!(decode_sqe(&e, false), Err(SqeError::BadOpcode));
}

#[test]
fn error_statuses() {
    assert_eq!(SqeError::BadOpcode.status(), WcStatus::LocQpOpErr);
    assert_eq!(SqeError::Unsupported.status(), WcStatus::LocQpOpErr);
    assert_eq!(SqeError::InlineNotAllowed.status(), WcStatus::LocQpOpErr);
    assert_eq!(SqeError::TooManySges.status(), WcStatus::LocLenErr);
    assert_eq!(SqeError::InlineTooLong.status(), WcStatus::LocLenErr);
    assert_eq!(RqeError::TooManySges.status(), WcStatus::LocLenErr);
}

#[test]
fn receive_entries() {
    for n in 0..=6u8 {
        let list = sges(u32::from(n));
        let mut e = rqe(0xdead_beef_0000_0001, n, &list);
        // The opcode and the unused word are ignored.
        e[11] = 0xff;
        e[12..16].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(
            decode_rqe(&e),
            Ok(RecvRequest {
                wr_id: 0xdead_beef_0000_0001,
                sges: SgeList::new(&list).unwrap(),
            })
        );
    }
    for n in [7u8, 128, 255] {
        assert_eq!(decode_rqe(&rqe(1, n, &sges(6))), Err(RqeError::TooManySges));
    }
}

#[test]
fn entry_header_accessors() {
    let e = sqe(0x0102_0304_0506_0708, OP_SEND, SIGNALLED, 0, 0, 0, &[]);
    assert_eq!(entry_id(&e), 0x0102_0304_0506_0708);
    assert_eq!(entry_flags(&e), VALID | SIGNALLED);
    let r = rqe(42, 0, &[]);
    assert_eq!((entry_id(&r), entry_flags(&r)), (42, VALID));
    assert_eq!(entry_flags(&e[..9]), 0);
    assert_eq!(entry_flags(&e[..10]), VALID | SIGNALLED);
    assert_eq!(entry_id(&e[..7]), 0);
    assert_eq!((entry_id(&[]), entry_flags(&[])), (0, 0));
}

fn completion(opcode: WcOpcode) -> Completion {
    Completion {
        wr_id: 0x1122_3344_5566_7788,
        status: WcStatus::Success,
        opcode,
        byte_len: 4096,
        imm: None,
        invalidated: None,
        solicited: false,
    }
}

/// The CQE the provider's `siw_poll_cq` reads, built field by field.
fn cqe(id: u64, opcode: u8, status: u16, bytes: u32, word: [u8; 8], qp: u64) -> [u8; CQE_SIZE] {
    let mut e = [0u8; CQE_SIZE];
    e[0..8].copy_from_slice(&id.to_ne_bytes());
    e[9] = opcode;
    e[10..12].copy_from_slice(&status.to_ne_bytes());
    e[12..16].copy_from_slice(&bytes.to_ne_bytes());
    e[16..24].copy_from_slice(&word);
    e[24..32].copy_from_slice(&qp.to_ne_bytes());
    e
}

#[test]
fn send_completion_layout() {
    let c = completion(WcOpcode::Send);
    let e = encode_cqe(&c, 0x8000_0017);
    assert_eq!(
        e,
        cqe(0x1122_3344_5566_7788, 3, 0, 4096, [0; 8], 0x8000_0017)
    );
    // The flags byte is left for the kernel to store last.
    assert_eq!(e[8], 0);
    assert_eq!(cqe_flags(&c), 1);
    assert_eq!(entry_id(&e), c.wr_id);
}

#[test]
fn recv_with_imm_layout() {
    let c = Completion {
        imm: Some(0xcafe_f00d),
        solicited: true,
        byte_len: 0,
        ..completion(WcOpcode::RecvRdmaWithImm)
    };
    let e = encode_cqe(&c, 5);
    let want = cqe(c.wr_id, 8, 0, 0, 0xcafe_f00d_u64.to_ne_bytes(), 5);
    assert_eq!(e, want);
    assert_eq!(e[8], 0);
    assert_eq!(cqe_flags(&c), (VALID | SOLICITED) as u8);
}

#[test]
fn recv_with_invalidate_layout() {
    let c = Completion {
        invalidated: Some(0xabcd_0102),
        byte_len: 17,
        ..completion(WcOpcode::Recv)
    };
    let e = encode_cqe(&c, 1);
    let mut word = [0u8; 8];
    word[..4].copy_from_slice(&0xabcd_0102_u32.to_ne_bytes());
    assert_eq!(e, cqe(c.wr_id, 8, 0, 17, word, 1));
    assert_eq!(cqe_flags(&c), (VALID | REM_INVAL) as u8);
    // The invalidated STag takes the union's place over an immediate value.
    let both = Completion {
        imm: Some(7),
        solicited: true,
        ..c
    };
    assert_eq!(encode_cqe(&both, 1), e);
    assert_eq!(cqe_flags(&both), (VALID | SOLICITED | REM_INVAL) as u8);
}

#[test]
fn every_status() {
    let table = [
        (WcStatus::Success, 0u16),
        (WcStatus::LocLenErr, 1),
        (WcStatus::LocProtErr, 2),
        (WcStatus::LocQpOpErr, 3),
        (WcStatus::WrFlushErr, 4),
        (WcStatus::BadRespErr, 5),
        (WcStatus::LocAccessErr, 6),
        (WcStatus::RemAccessErr, 7),
        (WcStatus::RemInvReqErr, 8),
        (WcStatus::MwBindErr, 9),
        (WcStatus::RemOpErr, 9),
        (WcStatus::FatalErr, 9),
        (WcStatus::GeneralErr, 9),
    ];
    for (status, code) in table {
        assert_eq!(siw_status(status), code, "{status:?}");
        let c = Completion {
            status,
            ..completion(WcOpcode::RdmaWrite)
        };
        let e = encode_cqe(&c, 3);
        assert_eq!(e, cqe(c.wr_id, 0, code, 4096, [0; 8], 3), "{status:?}");
    }
}

#[test]
fn every_completion_opcode() {
    let table = [
        (WcOpcode::Send, 3u8),
        (WcOpcode::RdmaWrite, 0),
        (WcOpcode::RdmaRead, 1),
        (WcOpcode::FetchAdd, 6),
        (WcOpcode::MaskedFetchAdd, 6),
        (WcOpcode::CompSwap, 7),
        (WcOpcode::MaskedCompSwap, 7),
        (WcOpcode::Recv, 8),
        (WcOpcode::RecvRdmaWithImm, 8),
        (WcOpcode::LocalInv, 10),
        (WcOpcode::RegMr, 11),
    ];
    for (opcode, code) in table {
        assert_eq!(siw_opcode(opcode), code, "{opcode:?}");
        assert_eq!(encode_cqe(&completion(opcode), 0)[9], code, "{opcode:?}");
    }
}

#[test]
fn notify_truth_table() {
    for flags in 0..8u32 {
        for solicited in [false, true] {
            let want = flags & 2 != 0 || (flags & 1 != 0 && solicited);
            assert_eq!(should_notify(flags, solicited), want, "{flags} {solicited}");
        }
    }
    assert!(!should_notify(NOTIFY_MISSED_EVENTS, true));
    assert!(!should_notify(0, true));
    assert!(should_notify(NOTIFY_SOLICITED, true));
    assert!(!should_notify(NOTIFY_SOLICITED, false));
    assert!(should_notify(NOTIFY_NEXT_COMPLETION, false));
    // What the provider's ibv_req_notify_cq(cq, 0) stores.
    assert!(should_notify(
        NOTIFY_SOLICITED | NOTIFY_NEXT_COMPLETION,
        false
    ));
    assert!(should_notify(u32::MAX, false));
}

fn arb_sge() -> impl Strategy<Value = Sge> {
    (any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(addr, length, lkey)| Sge {
        addr,
        length,
        lkey,
    })
}

proptest! {
    /// Any SGE list the provider can post comes back unchanged, whatever
    /// the rest of the entry holds.
    #[test]
    fn sge_lists_round_trip(list in proptest::collection::vec(arb_sge(), 0..=MAX_SGE),
                            id in any::<u64>(), rkey in any::<u32>(), raddr in any::<u64>(),
                            junk in any::<u64>(), signal_all in any::<bool>()) {
        let n = list.len() as u8;
        let mut e = sqe(id, OP_WRITE, 0, rkey, raddr, n, &list);
        // Slots past num_sge are not read.
        for b in e.iter_mut().skip(24 + 16 * list.len()) {
            *b = junk as u8;
        }
        let r = decode_sqe(&e, signal_all).unwrap();
        prop_assert_eq!(r.request.sges.as_slice(), &list[..]);
        prop_assert_eq!(r.request.wr_id, id);
        prop_assert_eq!(r.request.op, SendOp::Write { remote_addr: raddr, rkey });
        prop_assert_eq!(r.request.signaled, signal_all);

        let mut e = rqe(id, n, &list);
        for b in e.iter_mut().skip(16 + 16 * list.len()) {
            *b = junk as u8;
        }
        let r = decode_rqe(&e).unwrap();
        prop_assert_eq!(r.sges.as_slice(), &list[..]);
        prop_assert_eq!(r.wr_id, id);
    }

    /// Arbitrary entries decode or fail without panicking, and what decodes
    /// is consistent with the raw fields.
    #[test]
    fn arbitrary_entries(sq in proptest::collection::vec(any::<u8>(), SQE_SIZE),
                         rq in proptest::collection::vec(any::<u8>(), RQE_SIZE),
                         signal_all in any::<bool>(), valid in any::<bool>()) {
        let mut sq: [u8; SQE_SIZE] = sq.try_into().unwrap();
        let mut rq: [u8; RQE_SIZE] = rq.try_into().unwrap();
        if valid {
            sq[8] |= 1;
            rq[8] |= 1;
        }
        match decode_sqe(&sq, signal_all) {
            Ok(r) => {
                prop_assert_eq!(r.request.wr_id, entry_id(&sq));
                prop_assert!(r.request.sges.as_slice().len() <= MAX_SGE);
                if let Some(range) = r.inline {
                    prop_assert!(range.start == INLINE_OFFSET && range.end <= SQE_SIZE);
                    prop_assert!(r.request.sges.as_slice().is_empty());
                } else {
                    prop_assert_eq!(r.request.sges.as_slice().len(), usize::from(sq[10]));
                }
            }
            Err(e) => {
                let _ = e.status();
            }
        }
        match decode_rqe(&rq) {
            Ok(r) => {
                prop_assert_eq!(r.wr_id, entry_id(&rq));
                prop_assert_eq!(r.sges.as_slice().len(), usize::from(rq[10]));
            }
            Err(e) => {
                prop_assert!(e == RqeError::NotValid || rq[10] > 6);
            }
        }
        // The bytes `rqe_len` counts, alone, decode as the whole entry: the kernel copies no
        // more.
        let len = rqe_len(rq[..RQE_HEAD].try_into().unwrap());
        prop_assert!((RQE_HEAD..=RQE_SIZE).contains(&len));
        let mut counted = EMPTY_RECV;
        let prefix = decode_rqe_into(&rq[..len], &mut counted).map(|()| counted);
        prop_assert_eq!(prefix, decode_rqe(&rq));
    }

    /// An entry copied as the kernel copies it, its head then the
    /// [`sqe_len`] bytes that count with the rest zeros, decodes as the
    /// whole entry does: the bytes left out are never read.
    #[test]
    fn the_counted_bytes_decode_as_the_whole_entry(
            raw in proptest::collection::vec(any::<u8>(), SQE_SIZE),
            opcode in 0u8..12, num_sge in 0u8..9, inline_len in 0u32..100,
            inline in any::<bool>(), signal_all in any::<bool>()) {
        let mut raw: [u8; SQE_SIZE] = raw.try_into().unwrap();
        // Mostly well-formed, so that most cases decode.
        raw[8] |= 1;
        raw[8] = if inline { raw[8] | 2 } else { raw[8] & !2 };
        raw[10] = num_sge;
        raw[11] = opcode;
        raw[32..36].copy_from_slice(&inline_len.to_ne_bytes());
        let head: &[u8; SQE_HEAD] = raw[..SQE_HEAD].try_into().unwrap();
        let len = sqe_len(head);
        prop_assert!((SQE_HEAD..=SQE_SIZE).contains(&len));
        let mut copy = [0u8; SQE_SIZE];
        copy[..len].copy_from_slice(&raw[..len]);
        let whole = decode_sqe(&raw, signal_all);
        let counted = decode_sqe(&copy, signal_all);
        match (&whole, &counted) {
            (Ok(w), Ok(c)) => {
                prop_assert_eq!(&w.request, &c.request);
                prop_assert_eq!(&w.inline, &c.inline);
                if let Some(range) = &w.inline {
                    prop_assert!(range.end <= len);
                    prop_assert_eq!(&raw[range.clone()], &copy[range.clone()]);
                }
            }
            (Err(w), Err(c)) => prop_assert_eq!(w, c),
            _ => prop_assert!(false, "{:?} against {:?}", whole, counted),
        }
        // The counted bytes alone (what the kernel decodes when they are just the head)
        // decode as the whole entry too.
        let mut request = SendRequest::EMPTY;
        let prefix = decode_sqe_into(&raw[..len], signal_all, &mut request);
        match (&whole, &prefix) {
            (Ok(w), Ok(inline)) => {
                prop_assert_eq!(&w.request, &request);
                prop_assert_eq!(&w.inline, inline);
            }
            (Err(w), Err(p)) => prop_assert_eq!(w, p),
            _ => prop_assert!(false, "{:?} against {:?}", whole, prefix),
        }
    }

    /// Decoding in place, over whatever request the slot held before, gives
    /// what decoding afresh gives: the kernel reuses one slot per queue.
    #[test]
    fn decode_in_place_ignores_the_old_content(
            first in proptest::collection::vec(any::<u8>(), SQE_SIZE),
            second in proptest::collection::vec(any::<u8>(), SQE_SIZE),
            signal_all in any::<bool>()) {
        let mut first: [u8; SQE_SIZE] = first.try_into().unwrap();
        let mut second: [u8; SQE_SIZE] = second.try_into().unwrap();
        first[8] |= 1;
        second[8] |= 1;
        // Mostly well-formed: a Write with at most six SGEs, inline or not.
        first[11] = OP_WRITE;
        first[10] %= 7;
        if let Ok(old) = decode_sqe(&first, signal_all) {
            let mut slot = old.request;
            let fresh = decode_sqe(&second, signal_all);
            let in_place = decode_sqe_into(&second, signal_all, &mut slot);
            match fresh {
                Ok(r) => {
                    prop_assert_eq!(in_place, Ok(r.inline));
                    prop_assert_eq!(slot, r.request);
                }
                Err(e) => prop_assert_eq!(in_place, Err(e)),
            }
        }
        let rq: [u8; RQE_SIZE] = first[..RQE_SIZE].try_into().unwrap();
        let rq2: [u8; RQE_SIZE] = second[..RQE_SIZE].try_into().unwrap();
        if let Ok(mut slot) = decode_rqe(&rq) {
            let fresh = decode_rqe(&rq2);
            let in_place = decode_rqe_into(&rq2, &mut slot);
            match fresh {
                Ok(r) => {
                    prop_assert_eq!(in_place, Ok(()));
                    prop_assert_eq!(slot, r);
                }
                Err(e) => prop_assert_eq!(in_place, Err(e)),
            }
        }
    }
}
