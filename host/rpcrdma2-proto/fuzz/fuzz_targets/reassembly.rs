// SPDX-License-Identifier: GPL-2.0

//! Reassembly driven by a stream of fuzzer-made v2 messages: each input is
//! cut into messages by a length byte; whatever is decoded is fed in.
//! Invariants: stored bytes never exceed the limit, and a completed message
//! has at most `max_fragments` fragments.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma2_proto::proto::continuation::*;
use rpcrdma2_proto::proto::v2::{self, V2DecodeConfig};

fuzz_target!(|data: &[u8]| {
    let limits = ReassemblyLimits {
        max_len: 256,
        max_fragments: 8,
    };
    let mut storage = [0u8; 200];
    let mut r = Reassembler::new(SliceStorage::new(&mut storage[..]), limits);
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let len = usize::from(len).min(tail.len());
        let (msg, tail) = tail.split_at(len);
        rest = tail;
        let Ok(m) = v2::decode(msg, &V2DecodeConfig::default()) else {
            continue;
        };
        match r.accept(&m) {
            Ok(Reassembled::Complete { fragments, .. }) => {
                assert!(fragments <= limits.max_fragments);
                assert!(r.storage().data().len() <= limits.max_len);
            }
            Ok(_) => {}
            Err(e) => {
                let _ = e.error();
                assert!(!r.in_progress());
            }
        }
    }
});
