// SPDX-License-Identifier: GPL-2.0

//! The kernel's CRC32c behind the protocol code's [`Crc32c`] seam (shared by the modules that
//! build `proto/`).

use crate::proto::crc32c::Crc32c;

/// `crc32c()` of the kernel, which picks the CPU's instructions where it can.
#[derive(Clone, Copy)]
pub(crate) struct KernelCrc32c;

impl Crc32c for KernelCrc32c {
    fn crc32c_update(&self, state: u32, data: &[u8]) -> u32 {
        kernel::crc32c::update(state, data)
    }
}
