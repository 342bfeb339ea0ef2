// SPDX-License-Identifier: GPL-2.0

//! Atomic request/response decoding and execution: headers round-trip, the
//! masked FetchAdd agrees with the RFC 7306 pseudocode, CmpSwap with its
//! definition.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::atomic::{
    check_alignment, masked_cmp_swap, masked_fetch_add, AtomicRequestHeader, AtomicResponseHeader,
};

fn reference_fetch_add(original: u64, add: u64, mask: u64) -> u64 {
    let (mut carry, mut result) = (0u64, 0u64);
    for bit in 0..64 {
        let loc = 1u64 << bit;
        let sum = carry + ((original & loc) >> bit) + ((add & loc) >> bit);
        if sum & 1 != 0 {
            result |= loc;
        }
        carry = u64::from((sum & 2) != 0 && mask & loc == 0);
    }
    result
}

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = AtomicRequestHeader::decode(data) {
        let mut out = [0u8; AtomicRequestHeader::LEN];
        assert_eq!(req.encode(&mut out), Ok(AtomicRequestHeader::LEN));
        assert_eq!(&out[..], &data[..AtomicRequestHeader::LEN]);
        let _ = check_alignment(req.remote_tagged_offset);
        let original = req.compare_data.rotate_left(7) ^ req.remote_tagged_offset;
        let new = req.apply(original).expect("decode checked the AOpCode");
        if req.aopcode == 0 {
            assert_eq!(
                new,
                reference_fetch_add(original, req.add_swap_data, req.add_swap_mask)
            );
        } else {
            let expect = masked_cmp_swap(
                original,
                req.compare_data,
                req.compare_mask,
                req.add_swap_data,
                req.add_swap_mask,
            );
            assert_eq!(new, expect);
            // Bits outside the swap mask never change.
            assert_eq!((new ^ original) & !req.add_swap_mask, 0);
        }
        let _ = masked_fetch_add(original, req.add_swap_data, req.add_swap_mask);
    }
    if let Ok(rsp) = AtomicResponseHeader::decode(data) {
        let mut out = [0u8; AtomicResponseHeader::LEN];
        assert_eq!(rsp.encode(&mut out), Ok(AtomicResponseHeader::LEN));
        assert_eq!(&out[..], &data[..AtomicResponseHeader::LEN]);
    }
});
