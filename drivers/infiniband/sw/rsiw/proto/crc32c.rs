// SPDX-License-Identifier: GPL-2.0

//! CRC32c (Castagnoli), the MPA frame check sequence.
//!
//! MPA protects every FPDU with the CRC32c of RFC 3385, the same checksum
//! iSCSI uses. The kernel has a fast, often hardware assisted `crc32c()`;
//! the host has none. The [`Crc32c`] trait is the seam between the two: the
//! driver implements it on top of the kernel function, while [`SoftCrc32c`]
//! is a portable table-driven implementation used by host tests, the fuzzers
//! and as a fallback.
//!
//! The trait works on the raw CRC register: a computation starts from
//! [`CRC32C_INIT`], feeds any number of chunks through
//! [`Crc32c::crc32c_update`] and ends by inverting the register
//! ([`Crc32cDigest::finish`]). This is exactly the contract of the kernel's
//! `crc32c(crc, buf, len)`, which lets an FPDU be checksummed incrementally as
//! TCP delivers it. On the wire the final value is sent least significant byte
//! first ([`Crc32cDigest::wire_bytes`]).

/// Initial value of the CRC32c register.
pub const CRC32C_INIT: u32 = 0xFFFF_FFFF;

/// The reflected CRC32c polynomial (0x1EDC6F41 bit-reversed).
const POLY_REFLECTED: u32 = 0x82F6_3B78;

/// A CRC32c engine.
pub trait Crc32c {
    /// Feeds `data` into the raw CRC register `state` and returns the new
    /// register value. No pre- or post-inversion is applied.
    fn crc32c_update(&self, state: u32, data: &[u8]) -> u32;
}

const fn build_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut n = 0;
    while n < 256 {
        let mut crc = n as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[n] = crc;
        n += 1;
    }
    table
}

/// Byte-at-a-time lookup table, computed at compile time.
static TABLE: [u32; 256] = build_table();

/// Portable table-driven CRC32c.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SoftCrc32c;

impl Crc32c for SoftCrc32c {
    fn crc32c_update(&self, state: u32, data: &[u8]) -> u32 {
        let mut crc = state;
        for &byte in data {
            // The index is masked to 0..=255, so it is always in bounds.
            let index = ((crc ^ u32::from(byte)) & 0xFF) as usize;
            let entry = TABLE.get(index).copied().unwrap_or(0);
            crc = (crc >> 8) ^ entry;
        }
        crc
    }
}

/// An in-progress CRC32c computation over one or more chunks.
#[derive(Debug, Clone, Copy)]
pub struct Crc32cDigest<C: Crc32c> {
    engine: C,
    state: u32,
}

impl<C: Crc32c> Crc32cDigest<C> {
    /// Starts a new computation with `engine`.
    pub fn new(engine: C) -> Self {
        Self {
            engine,
            state: CRC32C_INIT,
        }
    }

    /// Feeds the next chunk.
    pub fn update(&mut self, data: &[u8]) {
        self.state = self.engine.crc32c_update(self.state, data);
    }

    /// Returns the CRC32c of everything fed so far.
    pub fn finish(&self) -> u32 {
        !self.state
    }

    /// Returns the CRC as the four bytes MPA transmits (least significant
    /// byte first).
    pub fn wire_bytes(&self) -> [u8; 4] {
        self.finish().to_le_bytes()
    }
}

/// Computes the CRC32c of `data` in one go.
pub fn checksum<C: Crc32c>(engine: C, data: &[u8]) -> u32 {
    let mut digest = Crc32cDigest::new(engine);
    digest.update(data);
    digest.finish()
}
