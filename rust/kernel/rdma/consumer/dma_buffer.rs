// SPDX-License-Identifier: GPL-2.0

//! Kernel memory mapped for DMA by an RDMA device: the buffers that work requests name in their
//! scatter/gather entries.
//!
//! A [`DmaBuffer`] is physically contiguous kernel memory (`kmalloc`), mapped bidirectionally
//! for the device of a protection domain with `ib_dma_map_single`, and addressed by the domain's
//! local DMA key. The device reads and writes it while work requests are outstanding and, once
//! it is registered in a memory region, whenever a remote peer chooses; the CPU therefore never
//! gets a reference into it, only copies in and out ([`DmaBuffer::read`], [`DmaBuffer::write`]),
//! as with any DMA memory shared with hardware.
//!
//! Buffers are reference counted: a posted work request or a registration keeps its buffer
//! alive until the device is done with it.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::client::ProtectionDomain;
use crate::{bindings, prelude::*, sync::Arc};

const BIDIRECTIONAL: bindings::dma_data_direction = bindings::dma_data_direction_DMA_BIDIRECTIONAL;

/// Physically contiguous kernel memory, DMA-mapped for one device.
///
/// # Invariants
///
/// `cpu` points to `len` bytes owned by `_memory` (never reallocated or referenced while this
/// value lives), mapped at `dma` for `pd`'s device until drop.
pub struct DmaBuffer {
    _memory: KVec<u8>,
    cpu: *mut u8,
    len: usize,
    dma: u64,
    pd: Arc<ProtectionDomain>,
}

// SAFETY: The memory is owned by the buffer; all CPU access copies through raw pointers.
unsafe impl Send for DmaBuffer {}
// SAFETY: Concurrent copies race only with each other and with the device, as for any DMA
// memory; no reference into the memory is ever created.
unsafe impl Sync for DmaBuffer {}

impl DmaBuffer {
    /// Allocates `len` zeroed bytes and maps them for `pd`'s device.
    pub fn new(pd: &Arc<ProtectionDomain>, len: usize) -> Result<Arc<Self>> {
        if len == 0 || u32::try_from(len).is_err() {
            return Err(EINVAL);
        }
        let mut memory = KVec::from_elem(0u8, len, GFP_KERNEL)?;
        let cpu = memory.as_mut_ptr();
        let dev = pd.device().as_raw();
        // SAFETY: `cpu` is `len` bytes of kmalloc'ed memory that stay allocated until the
        // mapping is undone in `drop`.
        let dma = unsafe { bindings::ib_dma_map_single(dev, cpu.cast(), len, BIDIRECTIONAL) };
        // SAFETY: `dma` was just returned by the mapping call on `dev`.
        if unsafe { bindings::ib_dma_mapping_error(dev, dma) } != 0 {
            return Err(ENOMEM);
        }
        // INVARIANT: Mapped above; `memory` is moved in and only accessed through `cpu`.
        Ok(Arc::new(
            Self {
                _memory: memory,
                cpu,
                len,
                dma,
                pd: pd.clone(),
            },
            GFP_KERNEL,
        )?)
    }

    /// The buffer's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (never: buffers have at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address the device uses for the first byte.
    pub fn dma_addr(&self) -> u64 {
        self.dma
    }

    /// The protection domain the buffer is mapped for.
    pub fn pd(&self) -> &Arc<ProtectionDomain> {
        &self.pd
    }

    pub(crate) fn cpu_addr(&self) -> *mut u8 {
        self.cpu
    }

    fn check(&self, offset: usize, len: usize) -> Result {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(EINVAL),
        }
    }

    /// Copies `out.len()` bytes at `offset` out of the buffer.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result {
        self.check(offset, out.len())?;
        let dev = self.pd.device().as_raw();
        // SAFETY: The range is mapped at `dma` (type invariant).
        unsafe {
            bindings::ib_dma_sync_single_for_cpu(dev, self.dma, self.len, BIDIRECTIONAL);
        }
        // SAFETY: `offset + out.len() <= len` (checked); `cpu` is valid for `len` bytes and no
        // reference into it exists (type invariant).
        unsafe {
            core::ptr::copy_nonoverlapping(self.cpu.add(offset), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    /// Copies `data` into the buffer at `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result {
        self.check(offset, data.len())?;
        // SAFETY: As in `read`.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), self.cpu.add(offset), data.len()) };
        let dev = self.pd.device().as_raw();
        // SAFETY: The range is mapped at `dma` (type invariant).
        unsafe {
            bindings::ib_dma_sync_single_for_device(dev, self.dma, self.len, BIDIRECTIONAL);
        }
        Ok(())
    }

    /// The local scatter/gather entry for `len` bytes at `offset`.
    pub(crate) fn sge(&self, offset: usize, len: usize) -> Result<bindings::ib_sge> {
        self.check(offset, len)?;
        Ok(bindings::ib_sge {
            addr: self.dma + offset as u64,
            length: u32::try_from(len)?,
            lkey: self.pd.local_dma_lkey(),
        })
    }
}

impl Drop for DmaBuffer {
    fn drop(&mut self) {
        // SAFETY: Undoes the mapping made in `new` (type invariant); no work request uses the
        // buffer any more, they hold references to it.
        unsafe {
            bindings::ib_dma_unmap_single(
                self.pd.device().as_raw(),
                self.dma,
                self.len,
                BIDIRECTIONAL,
            )
        };
    }
}
