// SPDX-License-Identifier: GPL-2.0

//! The Immediate Data header (RFC 7306 section 6).
//!
//! Immediate Data and Immediate Data with SE messages carry exactly eight
//! opaque bytes on the Send queue; following an RDMA Write they give iWARP
//! the "RDMA Write with Immediate" of InfiniBand. The data is opaque to
//! RDMAP, so it is kept as bytes; [`ImmediateData::as_be32`] gives the
//! 32-bit immediate value of the verbs API (`ib_wc.ex.imm_data`), which
//! travels in the first four bytes.

use super::wire::{self, EncodeError};

/// Length of the Immediate Data header.
pub const IMMEDIATE_DATA_LEN: usize = 8;

/// The eight bytes of Immediate Data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImmediateData(pub [u8; IMMEDIATE_DATA_LEN]);

impl ImmediateData {
    /// Immediate data holding a 32-bit verbs immediate value in its first
    /// four bytes (network order) and zeros after it.
    pub const fn from_be32(value: u32) -> Self {
        let [a, b, c, d] = value.to_be_bytes();
        Self([a, b, c, d, 0, 0, 0, 0])
    }

    /// The 32-bit verbs immediate value carried in the first four bytes.
    pub const fn as_be32(&self) -> u32 {
        let [a, b, c, d, ..] = self.0;
        u32::from_be_bytes([a, b, c, d])
    }

    /// Decodes the first eight bytes of `buf`.
    pub fn decode(buf: &[u8]) -> Option<Self> {
        wire::read_array(buf, 0).map(Self)
    }

    /// Encodes the data into `out` and returns its length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        wire::write_bytes(out, 0, &self.0)?;
        Ok(IMMEDIATE_DATA_LEN)
    }
}
