// SPDX-License-Identifier: GPL-2.0

//! The XID table driven by fuzzer-made inserts and removals (two bytes each: an operation
//! and its argument), checked against a list of (index, XID) after every step.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma2_proto::proto::xid_table::*;

const N: usize = 8;

fuzz_target!(|data: &[u8]| {
    let mut t = XidTable::<N>::new();
    let mut model = [None::<u32>; N];
    for pair in data.chunks_exact(2) {
        let (op, arg) = (pair[0], pair[1]);
        if op & 1 == 0 {
            let xid = u32::from(arg) << (op >> 5);
            match t.insert(xid) {
                Ok(i) => {
                    assert!(!model.contains(&Some(xid)) && model[i].is_none());
                    model[i] = Some(xid);
                }
                Err(InsertError::Present) => assert!(model.contains(&Some(xid))),
                Err(InsertError::Full) => assert!(model.iter().all(Option::is_some)),
            }
        } else {
            let i = usize::from(arg % 12);
            let want = model.get(i).copied().flatten();
            assert_eq!(t.remove(i), want);
            if want.is_some() {
                model[i] = None;
            }
        }
        assert_eq!(t.len(), model.iter().flatten().count());
        for (i, e) in model.iter().enumerate() {
            assert_eq!(t.xid(i), *e);
            if let Some(xid) = e {
                assert_eq!(t.find(*xid), Some(i));
            }
        }
    }
});
