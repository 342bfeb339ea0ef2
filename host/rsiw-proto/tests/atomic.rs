// SPDX-License-Identifier: GPL-2.0

//! RFC 7306 atomics: headers and the masked arithmetic, checked against a
//! transcription of the RFC's own pseudocode.

use proptest::prelude::*;
use rsiw_proto::proto::atomic::*;
use rsiw_proto::proto::terminate::TermError;

/// RFC 7306 section 5.1.1 pseudocode, bit by bit.
fn reference_fetch_add(original: u64, add: u64, mask: u64) -> u64 {
    let mut bit_location: u64 = 1;
    let mut carry: u64 = 0;
    let mut result: u64 = 0;
    for bit in 0..64 {
        if bit != 0 {
            bit_location <<= 1;
        }
        let val1 = (original & bit_location) >> bit;
        let val2 = (add & bit_location) >> bit;
        let mut sum = carry + val1 + val2;
        carry = (sum & 2) >> 1;
        sum &= 1;
        if sum != 0 {
            result |= bit_location;
        }
        carry = u64::from(carry != 0 && (mask & bit_location) == 0);
    }
    result
}

/// RFC 7306 section 5.1.2, evaluated bit by bit.
fn reference_cmp_swap(original: u64, compare: u64, cmask: u64, swap: u64, smask: u64) -> u64 {
    let equal =
        (0..64).all(|b| (cmask >> b) & 1 == 0 || ((compare >> b) & 1) == ((original >> b) & 1));
    if !equal {
        return original;
    }
    (0..64).fold(0u64, |acc, b| {
        let src = if (smask >> b) & 1 == 1 {
            swap
        } else {
            original
        };
        acc | (src & (1 << b))
    })
}

const BOUNDARY_MASKS: [u64; 10] = [
    0,
    u64::MAX,
    0xAAAA_AAAA_AAAA_AAAA,
    0x5555_5555_5555_5555,
    1,
    1 << 63,
    1 << 31,
    0x8000_0000_8000_0000, // two 32-bit fields
    0x8080_8080_8080_8080, // eight bytes
    0x0000_0000_0000_0080,
];

const VALUES: [u64; 8] = [
    0,
    1,
    u64::MAX,
    0x7FFF_FFFF_FFFF_FFFF,
    0x8000_0000_0000_0000,
    0x0000_0000_FFFF_FFFF,
    0xFFFF_FFFF_0000_0000,
    0x0123_4567_89AB_CDEF,
];

#[test]
fn fetch_add_on_boundary_masks() {
    for &mask in &BOUNDARY_MASKS {
        for &a in &VALUES {
            for &b in &VALUES {
                assert_eq!(
                    masked_fetch_add(a, b, mask),
                    reference_fetch_add(a, b, mask),
                    "{a:#x}+{b:#x} mask {mask:#x}"
                );
            }
        }
    }
}

#[test]
fn fetch_add_hand_vectors() {
    // Zero mask: plain 64-bit add, wrapping.
    assert_eq!(masked_fetch_add(u64::MAX, 1, 0), 0);
    assert_eq!(fetch_add(u64::MAX, 2), 1);
    // Two 32-bit counters: the low one wraps without disturbing the high one.
    assert_eq!(
        masked_fetch_add(
            0x0000_0005_FFFF_FFFF,
            0x0000_0001_0000_0001,
            0x8000_0000_8000_0000
        ),
        0x0000_0006_0000_0000
    );
    // Eight byte counters.
    assert_eq!(
        masked_fetch_add(
            0x01FF_01FF_01FF_01FF,
            0x0101_0101_0101_0101,
            0x8080_8080_8080_8080
        ),
        0x0200_0200_0200_0200
    );
    // All ones: every bit is its own field, addition degenerates to XOR.
    assert_eq!(masked_fetch_add(0xF0F0, 0xFF00, u64::MAX), 0xF0F0 ^ 0xFF00);
    // Single bit at position 3: carry out of bit 3 is discarded, bits 4+ are a separate field.
    assert_eq!(masked_fetch_add(0x0F, 0x01, 0x08), 0x00);
    assert_eq!(masked_fetch_add(0x1F, 0x11, 0x08), 0x20);
}

#[test]
fn cmp_swap_on_boundary_masks() {
    for &cmask in &BOUNDARY_MASKS {
        for &smask in &BOUNDARY_MASKS {
            for &orig in &VALUES {
                for &cmp in &[orig, !orig, orig ^ 1, 0] {
                    let swap = 0xDEAD_BEEF_CAFE_F00D;
                    assert_eq!(
                        masked_cmp_swap(orig, cmp, cmask, swap, smask),
                        reference_cmp_swap(orig, cmp, cmask, swap, smask)
                    );
                }
            }
        }
    }
}

#[test]
fn cmp_swap_hand_vectors() {
    assert_eq!(cmp_swap(5, 5, 9), 9);
    assert_eq!(cmp_swap(5, 6, 9), 5);
    // Zero compare mask always matches; zero swap mask never changes anything.
    assert_eq!(masked_cmp_swap(5, 6, 0, 9, u64::MAX), 9);
    assert_eq!(masked_cmp_swap(5, 5, u64::MAX, 9, 0), 5);
    // Compare only the low byte, swap only the high byte.
    assert_eq!(
        masked_cmp_swap(
            0x1122_3344_5566_7788,
            0x88,
            0xFF,
            0xAA00_0000_0000_0000,
            0xFF00_0000_0000_0000
        ),
        0xAA22_3344_5566_7788
    );
}

#[test]
fn apply_and_errors() {
    let fa = AtomicRequestHeader::fetch_add(1, 2, 0x10, 3, 0);
    assert_eq!(fa.opcode(), Ok(AtomicOpcode::FetchAdd));
    assert_eq!(fa.apply(4), Ok(7));
    let cs = AtomicRequestHeader::cmp_swap(1, 2, 0x10, 4, u64::MAX, 9, u64::MAX);
    assert_eq!(cs.apply(4), Ok(9));
    assert_eq!(cs.apply(5), Ok(5));
    let bad = AtomicRequestHeader { aopcode: 1, ..fa };
    assert_eq!(bad.apply(0), Err(AtomicError::UnsupportedOpcode(1)));
    assert_eq!(
        AtomicError::UnsupportedOpcode(1).term(),
        TermError::RdmapUnexpectedOpcode
    );
    assert_eq!(check_alignment(0x1000), Ok(()));
    assert_eq!(
        check_alignment(0x1004),
        Err(AtomicError::Misaligned(0x1004))
    );
    // RFC 7306 section 8.2: catastrophic error, localized to RDMAP stream.
    assert_eq!(
        AtomicError::Misaligned(4).term(),
        TermError::RdmapCatastrophicStream
    );
    assert_eq!(
        AtomicError::Truncated.term(),
        TermError::RdmapCatastrophicStream
    );
    assert_eq!(
        AtomicRequestHeader::decode(&[0; 51]),
        Err(AtomicError::Truncated)
    );
    assert_eq!(
        AtomicResponseHeader::decode(&[0; 11]),
        Err(AtomicError::Truncated)
    );
    assert!(AtomicRequestHeader {
        reserved: 1 << 28,
        ..fa
    }
    .encode(&mut [0; 52])
    .is_err());
    assert!(fa.encode(&mut [0; 51]).is_err());
    assert!(AtomicResponseHeader {
        request_id: 0,
        original_value: 0
    }
    .encode(&mut [0; 11])
    .is_err());
}

#[test]
fn request_wire_vector() {
    let cs =
        AtomicRequestHeader::cmp_swap(0x0102_0304, 0x0A0B_0C0D, 0x1000, 0x11, 0xFF, 0x22, 0xF0);
    let mut out = [0u8; 52];
    cs.encode(&mut out).unwrap();
    let mut want = vec![
        0, 0, 0, 2, 1, 2, 3, 4, 0x0A, 0x0B, 0x0C, 0x0D, 0, 0, 0, 0, 0, 0, 0x10, 0,
    ];
    want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x22]);
    want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0xF0]);
    want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x11]);
    want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0xFF]);
    assert_eq!(&out[..], &want[..]);
}

proptest! {
    #[test]
    fn fetch_add_matches_rfc_pseudocode(a in any::<u64>(), b in any::<u64>(), m in any::<u64>()) {
        prop_assert_eq!(masked_fetch_add(a, b, m), reference_fetch_add(a, b, m));
    }

    #[test]
    fn fetch_add_single_bit_masks(a in any::<u64>(), b in any::<u64>(), bit in 0u32..64) {
        prop_assert_eq!(masked_fetch_add(a, b, 1 << bit), reference_fetch_add(a, b, 1 << bit));
    }

    #[test]
    fn cmp_swap_matches_reference(o in any::<u64>(), c in any::<u64>(), cm in any::<u64>(), s in any::<u64>(), sm in any::<u64>(), hit in any::<bool>()) {
        let c = if hit { o } else { c };
        prop_assert_eq!(masked_cmp_swap(o, c, cm, s, sm), reference_cmp_swap(o, c, cm, s, sm));
    }

    #[test]
    fn request_round_trip(r in 0u32..(1 << 28), op in prop_oneof![Just(0u8), Just(2u8)], id in any::<u32>(), st in any::<u32>(),
                          to in any::<u64>(), d in any::<u64>(), m in any::<u64>(), cd in any::<u64>(), cm in any::<u64>()) {
        let h = AtomicRequestHeader { reserved: r, aopcode: op, request_id: id, remote_stag: st, remote_tagged_offset: to,
                                      add_swap_data: d, add_swap_mask: m, compare_data: cd, compare_mask: cm };
        let mut out = [0u8; 52];
        prop_assert_eq!(h.encode(&mut out).unwrap(), 52);
        prop_assert_eq!(AtomicRequestHeader::decode(&out).unwrap(), h);
    }

    #[test]
    fn response_round_trip(id in any::<u32>(), v in any::<u64>()) {
        let h = AtomicResponseHeader { request_id: id, original_value: v };
        let mut out = [0u8; 12];
        h.encode(&mut out).unwrap();
        prop_assert_eq!(AtomicResponseHeader::decode(&out).unwrap(), h);
    }
}
