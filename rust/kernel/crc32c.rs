// SPDX-License-Identifier: GPL-2.0

//! CRC32c (Castagnoli), the checksum of iWARP's MPA framing (RFC 5044) and of iSCSI.
//!
//! This calls the kernel's `crc32c()`, which uses the fastest implementation the CPU offers
//! (SSE4.2 `crc32` on x86). Like the C function it is a raw update: the caller chooses the
//! seed and the final inversion. MPA, for one, seeds with `!0` and inverts the result.
//!
//! C header: [`include/linux/crc32c.h`](srctree/include/linux/crc32c.h)

use crate::bindings;

/// Continues a CRC32c over `data`, starting from `crc`, without pre- or post-inversion.
///
/// # Examples
///
/// ```
/// // The check value of CRC-32C: "123456789", seeded and finished with an inversion.
/// let crc = !kernel::crc32c::update(!0, b"123456789");
/// assert_eq!(crc, 0xe306_9283);
/// ```
pub fn update(mut crc: u32, data: &[u8]) -> u32 {
    // The C function takes an `unsigned int` length; feed longer slices in pieces.
    for chunk in data.chunks(u32::MAX as usize) {
        // SAFETY: `chunk` is valid for reads of `chunk.len()` bytes, which fits in a `u32`,
        // for the duration of the call; `crc32c` only reads it.
        crc = unsafe { bindings::crc32c(crc, chunk.as_ptr().cast(), chunk.len() as u32) };
    }
    crc
}

#[cfg(CONFIG_KUNIT)]
mod tests {
    use crate::{kunit::suite::Test, kunit_expect_eq, prelude::*};

    fn check_value(test: &mut Test) -> Result {
        kunit_expect_eq!(test, !super::update(!0, b"123456789"), 0xe306_9283u32);
        Ok(())
    }

    fn empty_input_is_identity(test: &mut Test) -> Result {
        kunit_expect_eq!(test, super::update(0x1234_5678, &[]), 0x1234_5678u32);
        Ok(())
    }

    fn split_updates_match_one_update(test: &mut Test) -> Result {
        let data: [u8; 64] = core::array::from_fn(|i| (i * 7 + 3) as u8);
        let whole = super::update(!0, &data);
        for cut in [0, 1, 3, 17, 63, 64] {
            let (a, b) = data.split_at(cut);
            kunit_expect_eq!(test, super::update(super::update(!0, a), b), whole);
        }
        Ok(())
    }

    // RFC 3720 B.4: 32 bytes of zeros and of 0xff.
    fn iscsi_vectors(test: &mut Test) -> Result {
        kunit_expect_eq!(test, !super::update(!0, &[0u8; 32]), 0x8a91_36aau32);
        kunit_expect_eq!(test, !super::update(!0, &[0xffu8; 32]), 0x62a8_ab43u32);
        Ok(())
    }

    crate::kunit_suite!(
        rust_crc32c,
        [
            check_value,
            empty_input_is_identity,
            split_updates_match_one_update,
            iscsi_vectors
        ]
    );
}
