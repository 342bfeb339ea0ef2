// SPDX-License-Identifier: GPL-2.0

//! CRC32c test vectors (RFC 3720 appendix B.4) and incremental use.

use proptest::prelude::*;
use rsiw_proto::proto::crc32c::{checksum, Crc32c, Crc32cDigest, SoftCrc32c, CRC32C_INIT};

/// Bit-at-a-time reference, independent of the table.
fn reference(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn check_value() {
    assert_eq!(checksum(SoftCrc32c, b"123456789"), 0xE306_9283);
}

#[test]
fn iscsi_vectors() {
    assert_eq!(checksum(SoftCrc32c, &[0u8; 32]), 0x8A91_36AA);
    assert_eq!(checksum(SoftCrc32c, &[0xFFu8; 32]), 0x62A8_AB43);
    let inc: Vec<u8> = (0u8..32).collect();
    assert_eq!(checksum(SoftCrc32c, &inc), 0x46DD_794E);
    let dec: Vec<u8> = (0u8..32).rev().collect();
    assert_eq!(checksum(SoftCrc32c, &dec), 0x113F_DB5C);
}

#[test]
fn wire_bytes_are_little_endian() {
    let mut d = Crc32cDigest::new(SoftCrc32c);
    d.update(&[0u8; 32]);
    assert_eq!(d.wire_bytes(), [0xAA, 0x36, 0x91, 0x8A]);
}

#[test]
fn empty_update_is_identity() {
    assert_eq!(SoftCrc32c.crc32c_update(0x1234_5678, &[]), 0x1234_5678);
    assert_eq!(checksum(SoftCrc32c, &[]), !CRC32C_INIT);
}

proptest! {
    #[test]
    fn matches_reference_and_splits(data in proptest::collection::vec(any::<u8>(), 0..300), cut in 0usize..300) {
        let cut = cut.min(data.len());
        let whole = checksum(SoftCrc32c, &data);
        prop_assert_eq!(whole, reference(&data));
        let mut d = Crc32cDigest::new(SoftCrc32c);
        d.update(&data[..cut]);
        d.update(&data[cut..]);
        prop_assert_eq!(d.finish(), whole);
    }
}
