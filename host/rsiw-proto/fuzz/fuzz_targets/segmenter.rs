// SPDX-License-Identifier: GPL-2.0

//! Transmit segmentation for any MSS, GSO count, opcode and message length:
//! every FPDU fits the size it was cut for, and the segments tile the
//! message exactly, with L on the last one only.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::fpdu::fpdu_len;
use rsiw_proto::proto::rdmap::Opcode;
use rsiw_proto::proto::segmenter::*;

fuzz_target!(|data: &[u8]| {
    let Some(b) = data.get(..13) else {
        return;
    };
    let mss = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let gso = u32::from(b[4]);
    let opcode = Opcode::from_u8(b[5] & 0xF).unwrap_or(Opcode::Send);
    let header_len = if b[6] & 1 == 0 {
        opcode.header_len()
    } else {
        usize::from(b[7])
    };
    let len = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
    // Long messages in small segments would take too long; scale them down.
    let len = if b[12] & 1 == 0 { len % 100_000 } else { len };

    let size = fpdu_size(mss, gso);
    assert_eq!(size % 8, 0);
    let ulpdu = max_ulpdu_len(size);
    assert!(ulpdu <= MAX_ULPDU_LEN);
    if ulpdu > 0 {
        assert!(fpdu_len(ulpdu) <= size);
    }
    let Some(max) = max_payload(size, header_len) else {
        assert!(ulpdu <= header_len);
        return;
    };
    assert!(fpdu_len(header_len + max.get() as usize) <= size);
    let it = segments(len, max);
    let count = it.len();
    if count > 10_000 {
        return;
    }
    let mut next = 0u64;
    let mut n = 0usize;
    for s in it {
        assert_eq!(u64::from(s.offset), next);
        assert!(s.len <= max.get());
        next += u64::from(s.len);
        assert_eq!(s.last, next == u64::from(len));
        n += 1;
    }
    assert_eq!(n, count);
    assert_eq!(next, u64::from(len));
});
