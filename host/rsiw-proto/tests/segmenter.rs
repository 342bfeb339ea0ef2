// SPDX-License-Identifier: GPL-2.0

//! Transmit segmentation: FPDU sizing against `fpdu_len`, siw's numbers, and
//! segments that tile the message exactly.

use core::num::NonZeroU32;

use proptest::prelude::*;
use rsiw_proto::proto::ddp::{TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN};
use rsiw_proto::proto::fpdu::fpdu_len;
use rsiw_proto::proto::rdmap::Opcode;
use rsiw_proto::proto::segmenter::*;

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

fn collect(len: u32, max: u32) -> Vec<(u32, u32, bool)> {
    segments(len, nz(max))
        .map(|s| (s.offset, s.len, s.last))
        .collect()
}

#[test]
fn fpdu_size_rounds_like_siw() {
    assert_eq!(fpdu_size(1460, 0), 1456);
    assert_eq!(fpdu_size(1460, 1), 1456);
    assert_eq!(fpdu_size(65483, 1), 65480);
    assert_eq!(fpdu_size(1448, 4), 5792);
    assert_eq!(fpdu_size(0, 3), 0);
    assert_eq!(fpdu_size(u32::MAX, u32::MAX) % 8, 0);
}

#[test]
fn ethernet_mss() {
    // MSS 1460 -> FPDU 1456: length field 2, CRC 4, no pad.
    let size = fpdu_size(1460, 1);
    assert_eq!(max_ulpdu_len(size), 1450);
    assert_eq!(fpdu_len(1450), size);
    // siw's numbers: tcp_seglen - (MPA header + DDP/RDMAP header + CRC).
    assert_eq!(
        max_payload(size, TAGGED_HEADER_LEN),
        Some(nz(1456 - 2 - 14 - 4))
    );
    assert_eq!(
        max_payload_for(size, Opcode::Send),
        Some(nz(1456 - 2 - 18 - 4))
    );
    assert_eq!(
        max_payload_for(size, Opcode::RdmaWrite),
        max_payload(size, TAGGED_HEADER_LEN)
    );
    assert_eq!(
        max_payload_for(size, Opcode::ReadResponse),
        max_payload(size, TAGGED_HEADER_LEN)
    );
    assert_eq!(
        max_payload_for(size, Opcode::SendInvalidate),
        max_payload(size, UNTAGGED_HEADER_LEN)
    );
}

#[test]
fn ulpdu_is_capped_by_the_length_field() {
    assert_eq!(max_ulpdu_len(1 << 20), MAX_ULPDU_LEN);
    assert_eq!(max_ulpdu_len(usize::MAX), MAX_ULPDU_LEN);
    assert_eq!(
        max_payload(fpdu_size(1448, 64), TAGGED_HEADER_LEN),
        Some(nz(65535 - 14))
    );
}

#[test]
fn tiny_fpdus() {
    for size in 0..6 {
        assert_eq!(max_ulpdu_len(size), 0, "{size}");
    }
    assert_eq!(max_ulpdu_len(8), 2);
    assert_eq!(max_payload(20, TAGGED_HEADER_LEN), None);
    assert_eq!(max_payload(24, TAGGED_HEADER_LEN), Some(nz(4)));
    assert_eq!(max_payload(24, UNTAGGED_HEADER_LEN), None);
}

#[test]
fn zero_length_message_is_one_segment() {
    assert_eq!(collect(0, 1), [(0, 0, true)]);
    assert_eq!(collect(0, u32::MAX), [(0, 0, true)]);
    assert_eq!(segments(0, nz(7)).len(), 1);
}

#[test]
fn vectors() {
    assert_eq!(collect(10, 4), [(0, 4, false), (4, 4, false), (8, 2, true)]);
    assert_eq!(collect(8, 4), [(0, 4, false), (4, 4, true)]);
    assert_eq!(collect(3, 4), [(0, 3, true)]);
    // 2048 bytes, MULPDU 1500, 18-byte untagged header.
    assert_eq!(
        collect(2048, 1500 - 18),
        [(0, 1482, false), (1482, 566, true)]
    );
}

#[test]
fn largest_message() {
    let mut it = segments(u32::MAX, nz(u32::MAX));
    assert_eq!(it.len(), 1);
    assert_eq!(
        it.next(),
        Some(TxSegment {
            offset: 0,
            len: u32::MAX,
            last: true
        })
    );
    assert_eq!(it.next(), None);
    assert_eq!(it.len(), 0);
    let it = segments(u32::MAX, nz(1));
    assert_eq!(it.len(), u32::MAX as usize);
    let mut it = segments(u32::MAX, nz(0x8000_0000));
    assert_eq!(it.next().map(|s| s.len), Some(0x8000_0000));
    let last = it.next().unwrap();
    assert_eq!(
        (last.offset, last.len, last.last),
        (0x8000_0000, 0x7FFF_FFFF, true)
    );
    assert_eq!(it.next(), None);
}

#[test]
fn iterator_is_resumable() {
    let mut it = segments(100, nz(30));
    it.next();
    let saved = it;
    let a: Vec<_> = it.collect();
    let b: Vec<_> = saved.collect();
    assert_eq!(a, b);
    assert_eq!(a.len(), 3);
}

proptest! {
    /// `max_ulpdu_len` is the largest ULPDU whose FPDU fits.
    #[test]
    fn ulpdu_fits_exactly(size in 0usize..70_000) {
        let u = max_ulpdu_len(size);
        prop_assert!(u <= MAX_ULPDU_LEN);
        if u > 0 {
            prop_assert!(fpdu_len(u) <= size);
        }
        if u < MAX_ULPDU_LEN {
            prop_assert!(fpdu_len(u + 1) > size);
        }
    }

    /// Segments tile the message in order; all but the last are full; the
    /// count is what `len()` announced.
    #[test]
    fn segments_tile_the_message(len in prop_oneof![0u32..10_000, any::<u32>()],
                                 max in prop_oneof![1u32..2_000, any::<u32>().prop_map(|m| m.max(1))]) {
        let it = segments(len, nz(max));
        let announced = it.len();
        let mut next = 0u64;
        let mut count = 0usize;
        let mut seen_last = false;
        for s in it.take(20_000) {
            prop_assert!(!seen_last);
            prop_assert_eq!(u64::from(s.offset), next);
            prop_assert!(s.len <= max);
            next += u64::from(s.len);
            seen_last = s.last;
            prop_assert_eq!(s.last, next == u64::from(len));
            if !s.last {
                prop_assert_eq!(s.len, max);
            }
            count += 1;
        }
        if announced <= 20_000 {
            prop_assert!(seen_last);
            prop_assert_eq!(count, announced);
            prop_assert_eq!(next, u64::from(len));
        }
    }
}
