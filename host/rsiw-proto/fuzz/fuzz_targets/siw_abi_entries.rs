// SPDX-License-Identifier: GPL-2.0

//! The siw user ABI decoders on arbitrary send and receive queue entries, as
//! a hostile process may write them: they never panic, what they accept
//! is consistent with the entry, and a send queue entry copied as the kernel
//! copies it (its head, then the bytes `sqe_len` or `rqe_len` counts), or
//! those counted bytes alone, decodes as the whole entry does.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::qp_engine::{SendRequest, MAX_SGE};
use rsiw_proto::proto::siw_abi_entries::*;

fuzz_target!(|data: &[u8]| {
    let Some((sq, rest)) = data.split_first_chunk::<SQE_SIZE>() else {
        return;
    };
    let Some((rq, rest)) = rest.split_first_chunk::<RQE_SIZE>() else {
        return;
    };
    let signal_all = rest.first().is_some_and(|b| b & 1 != 0);

    match decode_sqe(sq, signal_all) {
        Ok(send) => {
            let flags = entry_flags(sq);
            assert!(flags & VALID != 0);
            assert_eq!(send.request.wr_id, entry_id(sq));
            assert!(send.request.signaled == (signal_all || flags & SIGNALLED != 0));
            assert!(send.request.sges.as_slice().len() <= MAX_SGE);
            match send.inline {
                Some(range) => {
                    assert!(flags & INLINE != 0);
                    assert!(send.request.sges.as_slice().is_empty());
                    assert_eq!(range.start, INLINE_OFFSET);
                    assert!(range.end >= range.start && range.end <= SQE_SIZE);
                    assert!(range.len() <= MAX_INLINE);
                    assert!(sq.get(range).is_some());
                }
                None => {
                    assert!(flags & INLINE == 0);
                    assert_eq!(send.request.sges.as_slice().len(), usize::from(sq[10]));
                }
            }
        }
        Err(e) => {
            let _ = e.status();
        }
    }

    let head = sq
        .first_chunk::<SQE_HEAD>()
        .expect("an entry is longer than its head");
    let len = sqe_len(head);
    assert!((SQE_HEAD..=SQE_SIZE).contains(&len));
    let mut counted = [0u8; SQE_SIZE];
    counted[..len].copy_from_slice(&sq[..len]);
    assert_eq!(decode_sqe(&counted, signal_all), decode_sqe(sq, signal_all));
    // The counted bytes alone decode as the whole entry too.
    let mut request = SendRequest::EMPTY;
    let prefix = decode_sqe_into(&sq[..len], signal_all, &mut request);
    let whole = decode_sqe(sq, signal_all).map(|w| (w.request, w.inline));
    assert_eq!(prefix.map(|inline| (request, inline)), whole);
    if let Ok(UserSend {
        inline: Some(range),
        ..
    }) = decode_sqe(sq, signal_all)
    {
        // The inline bytes are among those copied.
        assert!(range.end <= len);
    }

    // The bytes `rqe_len` counts, alone, decode as the whole receive entry.
    let rhead = rq
        .first_chunk::<RQE_HEAD>()
        .expect("an entry is longer than its head");
    let rlen = rqe_len(rhead);
    assert!((RQE_HEAD..=RQE_SIZE).contains(&rlen));
    let mut counted = EMPTY_RECV;
    let prefix = decode_rqe_into(&rq[..rlen], &mut counted).map(|()| counted);
    assert_eq!(prefix, decode_rqe(rq));

    match decode_rqe(rq) {
        Ok(recv) => {
            assert!(entry_flags(rq) & VALID != 0);
            assert_eq!(recv.wr_id, entry_id(rq));
            assert_eq!(recv.sges.as_slice().len(), usize::from(rq[10]));
        }
        Err(e) => {
            let _ = e.status();
        }
    }
});
