// SPDX-License-Identifier: GPL-2.0

//! Send queue work requests: what a consumer asks for ([`SendWr`] and the memory it names),
//! checked and filled into the C request structure the opcode needs, with the slot that keeps
//! its memory alive until it completes ([`Prepared`]).
//!
//! Every check that can refuse a request (the memory's protection domain and range, the
//! device's atomics, the queue's depth) runs here, before anything is posted: a request that
//! was prepared only fails to post if the device refuses it.

use super::{KernelQp, Slot};
use crate::{
    bindings,
    ffi::c_int,
    prelude::*,
    rdma::consumer::{
        client::AtomicCap,
        dma_buffer::DmaBuffer,
        fast_reg::{Access, FastRegMr, Mapped},
        mapped_pages::MappedPages,
    },
    sync::Arc,
};

/// Local memory of a work request: `len` bytes at `offset` in `buffer`.
pub struct Sge<'a> {
    /// The buffer.
    pub buffer: &'a Arc<DmaBuffer>,
    /// Offset of the first byte.
    pub offset: usize,
    /// Length in bytes (zero for a zero-length message).
    pub len: usize,
}

/// Local memory of a work request reached through a fast-registration region: `len` bytes at
/// `offset` of the region's current registration (counted from its first byte, `iova`).
///
/// The range is checked against the registration when the request is posted, and the request
/// keeps the registered memory until it completes, whatever happens to the region meanwhile.
pub struct RegionSge<'a> {
    /// The region, registered (`SendWr::RegPages` or `SendWr::RegMr` posted before).
    pub mr: &'a Arc<FastRegMr>,
    /// Offset of the first byte in the registration.
    pub offset: usize,
    /// Length in bytes (at least one).
    pub len: usize,
}

/// Local memory of a work request in pages mapped for the device, reached with the local DMA
/// key: `len` bytes at `offset` of the mapped range, within one of its mapped segments (one
/// page's bytes always are).
///
/// The range is checked against the mapping when the request is posted, and the request keeps
/// the pages mapped until it completes.
pub struct PagesSge<'a> {
    /// The pages.
    pub pages: &'a Arc<MappedPages>,
    /// Offset of the first byte in the mapped range.
    pub offset: usize,
    /// Length in bytes (at least one).
    pub len: usize,
}

/// Remote memory of an RDMA or atomic operation, as advertised by the peer.
#[derive(Debug, Clone, Copy)]
pub struct Remote {
    /// Address (the peer's tagged offset).
    pub addr: u64,
    /// Key of the peer's memory region.
    pub rkey: u32,
}

/// A send queue work request (`struct ib_send_wr` and its extensions).
pub enum SendWr<'a> {
    /// Send, optionally solicited.
    Send {
        /// The message.
        local: Sge<'a>,
        /// Ask for a solicited event at the receiver.
        solicited: bool,
    },
    /// Send with immediate data.
    SendWithImm {
        /// The message.
        local: Sge<'a>,
        /// The immediate value.
        imm: u32,
    },
    /// Send that invalidates the peer's `rkey`.
    SendWithInv {
        /// The message.
        local: Sge<'a>,
        /// The key to invalidate at the receiver.
        rkey: u32,
    },
    /// RDMA Write.
    Write {
        /// Source.
        local: Sge<'a>,
        /// Sink.
        remote: Remote,
    },
    /// RDMA Write followed by immediate data.
    WriteWithImm {
        /// Source.
        local: Sge<'a>,
        /// Sink.
        remote: Remote,
        /// The immediate value.
        imm: u32,
    },
    /// RDMA Read.
    Read {
        /// Sink.
        local: Sge<'a>,
        /// Source.
        remote: Remote,
    },
    /// RDMA Read into a registered region: on iWARP the sink of a Read must be registered with
    /// remote write access (the Read Response is tagged with the sink's key), so the local
    /// DMA key of an [`Sge`] does not do.
    ReadIntoRegion {
        /// Sink.
        local: RegionSge<'a>,
        /// Source.
        remote: Remote,
        /// End the region's registration once the Read completed (`IB_WR_RDMA_READ_WITH_INV`,
        /// iWARP devices only: [`DeviceCaps::iwarp`]): the last Read into a region needs no
        /// `LOCAL_INV` after it, which would have to wait for the Read's data.
        ///
        /// [`DeviceCaps::iwarp`]: super::super::client::DeviceCaps::iwarp
        invalidate: bool,
    },
    /// RDMA Write from a registered region: memory the caller does not own (a reply's pages)
    /// is reached through a registration of it, which the request keeps until it completes.
    WriteFromRegion {
        /// Source.
        local: RegionSge<'a>,
        /// Sink.
        remote: Remote,
    },
    /// RDMA Write from pages mapped for the device (a reply's pages), without a registration:
    /// the peer only reads what the Write carries, so the local DMA key does, and the request
    /// keeps the pages until it completes.
    WriteFromPages {
        /// Source.
        local: PagesSge<'a>,
        /// Sink.
        remote: Remote,
    },
    /// Compare and swap of the 64-bit word at `remote`; the original lands in `local` (8 bytes).
    CmpSwap {
        /// Where the original value lands.
        local: Sge<'a>,
        /// The word.
        remote: Remote,
        /// Compared with the word.
        compare: u64,
        /// Stored when equal.
        swap: u64,
    },
    /// Fetch and add on the 64-bit word at `remote`; the original lands in `local` (8 bytes).
    FetchAdd {
        /// Where the original value lands.
        local: Sge<'a>,
        /// The word.
        remote: Remote,
        /// Added to the word.
        add: u64,
    },
    /// Compare and swap under masks.
    MaskedCmpSwap {
        /// Where the original value lands.
        local: Sge<'a>,
        /// The word.
        remote: Remote,
        /// Compared with the word under `compare_mask`.
        compare: u64,
        /// Bits taking part in the comparison.
        compare_mask: u64,
        /// Stored under `swap_mask` when equal.
        swap: u64,
        /// Bits that are swapped.
        swap_mask: u64,
    },
    /// Fetch and add of independent fields: a set bit in `field_boundary` ends a field.
    MaskedFetchAdd {
        /// Where the original value lands.
        local: Sge<'a>,
        /// The word.
        remote: Remote,
        /// Added to the word.
        add: u64,
        /// Field boundaries (carries stop there).
        field_boundary: u64,
    },
    /// Registers `buffer` in `mr` with `access`; the new key is `mr.rkey()` afterwards.
    RegMr {
        /// The region.
        mr: &'a Arc<FastRegMr>,
        /// The memory.
        buffer: &'a Arc<DmaBuffer>,
        /// Rights granted.
        access: Access,
    },
    /// Registers `pages` in `mr` with `access`; the new key is `mr.rkey()` afterwards and the
    /// first byte is at `mr.iova()`.
    RegPages {
        /// The region.
        mr: &'a Arc<FastRegMr>,
        /// The memory.
        pages: &'a Arc<MappedPages>,
        /// Rights granted.
        access: Access,
    },
    /// Invalidates the current registration of `mr`.
    LocalInv {
        /// The region.
        mr: &'a Arc<FastRegMr>,
    },
}

/// The C structure a send request is posted in: `ib_send_wr` extended as its opcode requires.
pub(super) enum WrStorage {
    Rdma(bindings::ib_rdma_wr),
    Atomic(bindings::ib_atomic_wr),
    Reg(bindings::ib_reg_wr),
}

impl WrStorage {
    /// The `ib_send_wr` the structure starts with.
    pub(super) fn head(&mut self) -> &mut bindings::ib_send_wr {
        match self {
            Self::Rdma(wr) => &mut wr.wr,
            Self::Atomic(wr) => &mut wr.wr,
            Self::Reg(wr) => &mut wr.wr,
        }
    }
}

/// A send request filled in, signaled, with its completion entry and its claimed slot; not
/// linked to another request yet and without its `sg_list` (both are pointers into where it
/// will be when posted: [`super::send_chain`] sets them).
///
/// Either posted (the slot is released by its completion) or given back with
/// [`KernelQp::unpost`].
pub(super) struct Prepared {
    pub(super) storage: WrStorage,
    pub(super) sge: bindings::ib_sge,
    pub(super) slot: usize,
    pub(super) tag: u64,
    /// The region a registration request maps and its new key.
    registers: Option<(Arc<FastRegMr>, u32)>,
}

impl Prepared {
    /// Whether it asks for a completion (`IB_SEND_SIGNALED`).
    pub(super) fn is_signaled(&mut self) -> bool {
        self.storage.head().send_flags & bindings::ib_send_flags_IB_SEND_SIGNALED as c_int != 0
    }

    /// Sets whether it asks for a completion.
    pub(super) fn set_signaled(&mut self, signaled: bool) {
        let flag = bindings::ib_send_flags_IB_SEND_SIGNALED as c_int;
        let head = self.storage.head();
        if signaled {
            head.send_flags |= flag;
        } else {
            head.send_flags &= !flag;
        }
    }
}

impl KernelQp {
    /// Fills in the send request `wr`, its completion carrying `tag`, and claims its slot
    /// (which holds what it uses from here on): `EAGAIN` when the send queue is full, and the
    /// errors of a request that cannot be posted as it is.
    pub(super) fn prepare(&self, wr: &SendWr<'_>, tag: u64) -> Result<Prepared> {
        use bindings::*;
        let mut rdma = ib_rdma_wr::default();
        let mut atomic = ib_atomic_wr::default();
        let mut reg = ib_reg_wr::default();
        let mut sge = ib_sge::default();
        let mut buffer = None;
        let mut mr = None;
        let mut held = None;
        let mut pages = None;
        let mut invalidates = None;
        let mut local = |l: &Sge<'_>| -> Result<c_int> {
            self.check_pd(l.buffer)?;
            sge = l.buffer.sge(l.offset, l.len)?;
            buffer = Some(l.buffer.clone());
            Ok(if l.len == 0 { 0 } else { 1 })
        };
        // Atomics the device cannot do are refused here: a provider without them may not
        // recover from a request it refuses (the C siw's send queue stays blocked).
        let masked = matches!(
            wr,
            SendWr::MaskedCmpSwap { .. } | SendWr::MaskedFetchAdd { .. }
        );
        let atomic_local = |l: &Sge<'_>| -> Result {
            let caps = self.pd.device().caps();
            let cap = if masked {
                caps.masked_atomic
            } else {
                caps.atomic
            };
            if cap == AtomicCap::None {
                Err(crate::error::code::EOPNOTSUPP)
            } else if l.len != 8 {
                Err(crate::error::code::EINVAL)
            } else {
                Ok(())
            }
        };
        // Fills a `REG_MR` request for `region`, which must be in our PD, mapped by `map`.
        let reg_mr = |reg: &mut ib_reg_wr,
                      region: &Arc<FastRegMr>,
                      access: Access,
                      map: &dyn Fn(&FastRegMr) -> Result<Mapped>|
         -> Result {
            if !Arc::ptr_eq(region.pd(), &self.pd) {
                return Err(crate::error::code::EINVAL);
            }
            let mapped = map(region)?;
            reg.wr.opcode = ib_wr_opcode_IB_WR_REG_MR;
            (reg.mr, reg.key, reg.access) = (mapped.mr, mapped.key, access.bits() as c_int);
            Ok(())
        };
        // Which of the request structures is posted.
        #[derive(Clone, Copy)]
        enum Kind {
            Rdma,
            Atomic,
            Reg,
        }
        let kind = match wr {
            SendWr::Send {
                local: l,
                solicited,
            } => {
                rdma.wr.num_sge = local(l)?;
                rdma.wr.opcode = ib_wr_opcode_IB_WR_SEND;
                if *solicited {
                    rdma.wr.send_flags |= ib_send_flags_IB_SEND_SOLICITED as c_int;
                }
                Kind::Rdma
            }
            SendWr::SendWithImm { local: l, imm } => {
                rdma.wr.num_sge = local(l)?;
                rdma.wr.opcode = ib_wr_opcode_IB_WR_SEND_WITH_IMM;
                rdma.wr.ex.imm_data = imm.to_be();
                Kind::Rdma
            }
            SendWr::SendWithInv { local: l, rkey } => {
                rdma.wr.num_sge = local(l)?;
                rdma.wr.opcode = ib_wr_opcode_IB_WR_SEND_WITH_INV;
                rdma.wr.ex.invalidate_rkey = *rkey;
                Kind::Rdma
            }
            SendWr::Write { local: l, remote } => {
                rdma.wr.num_sge = local(l)?;
                rdma.wr.opcode = ib_wr_opcode_IB_WR_RDMA_WRITE;
                (rdma.remote_addr, rdma.rkey) = (remote.addr, remote.rkey);
                Kind::Rdma
            }
            SendWr::WriteWithImm {
                local: l,
                remote,
                imm,
            } => {
                rdma.wr.num_sge = local(l)?;
                rdma.wr.opcode = ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM;
                rdma.wr.ex.imm_data = imm.to_be();
                (rdma.remote_addr, rdma.rkey) = (remote.addr, remote.rkey);
                Kind::Rdma
            }
            SendWr::Read { local: l, remote } => {
                rdma.wr.num_sge = local(l)?;
                rdma.wr.opcode = ib_wr_opcode_IB_WR_RDMA_READ;
                (rdma.remote_addr, rdma.rkey) = (remote.addr, remote.rkey);
                Kind::Rdma
            }
            SendWr::ReadIntoRegion {
                local: l, remote, ..
            }
            | SendWr::WriteFromRegion { local: l, remote } => {
                if !Arc::ptr_eq(l.mr.pd(), &self.pd) || l.len == 0 {
                    return Err(crate::error::code::EINVAL);
                }
                let (s, keep) = l.mr.local_sge(l.offset, l.len)?;
                sge = s;
                held = Some(keep);
                mr = Some(l.mr.clone());
                rdma.wr.num_sge = 1;
                rdma.wr.opcode = match wr {
                    SendWr::ReadIntoRegion {
                        invalidate: true, ..
                    } => {
                        if !self.pd.device().caps().iwarp {
                            return Err(crate::error::code::EOPNOTSUPP);
                        }
                        // The sink's key, ended with the registration once the Read succeeded.
                        let key = l.mr.rkey();
                        rdma.wr.ex.invalidate_rkey = key;
                        invalidates = Some(key);
                        ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV
                    }
                    SendWr::ReadIntoRegion { .. } => ib_wr_opcode_IB_WR_RDMA_READ,
                    _ => ib_wr_opcode_IB_WR_RDMA_WRITE,
                };
                (rdma.remote_addr, rdma.rkey) = (remote.addr, remote.rkey);
                Kind::Rdma
            }
            SendWr::WriteFromPages { local: l, remote } => {
                if !Arc::ptr_eq(l.pages.pd(), &self.pd) {
                    return Err(crate::error::code::EINVAL);
                }
                sge = l.pages.sge(l.offset, l.len)?;
                pages = Some(l.pages.clone());
                rdma.wr.num_sge = 1;
                rdma.wr.opcode = ib_wr_opcode_IB_WR_RDMA_WRITE;
                (rdma.remote_addr, rdma.rkey) = (remote.addr, remote.rkey);
                Kind::Rdma
            }
            SendWr::CmpSwap {
                local: l,
                remote,
                compare,
                swap,
            } => {
                atomic_local(l)?;
                atomic.wr.num_sge = local(l)?;
                atomic.wr.opcode = ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP;
                (atomic.remote_addr, atomic.rkey) = (remote.addr, remote.rkey);
                (atomic.compare_add, atomic.swap) = (*compare, *swap);
                Kind::Atomic
            }
            SendWr::FetchAdd {
                local: l,
                remote,
                add,
            } => {
                atomic_local(l)?;
                atomic.wr.num_sge = local(l)?;
                atomic.wr.opcode = ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD;
                (atomic.remote_addr, atomic.rkey) = (remote.addr, remote.rkey);
                atomic.compare_add = *add;
                Kind::Atomic
            }
            SendWr::MaskedCmpSwap {
                local: l,
                remote,
                compare,
                compare_mask,
                swap,
                swap_mask,
            } => {
                atomic_local(l)?;
                atomic.wr.num_sge = local(l)?;
                atomic.wr.opcode = ib_wr_opcode_IB_WR_MASKED_ATOMIC_CMP_AND_SWP;
                (atomic.remote_addr, atomic.rkey) = (remote.addr, remote.rkey);
                (atomic.compare_add, atomic.compare_add_mask) = (*compare, *compare_mask);
                (atomic.swap, atomic.swap_mask) = (*swap, *swap_mask);
                Kind::Atomic
            }
            SendWr::MaskedFetchAdd {
                local: l,
                remote,
                add,
                field_boundary,
            } => {
                atomic_local(l)?;
                atomic.wr.num_sge = local(l)?;
                atomic.wr.opcode = ib_wr_opcode_IB_WR_MASKED_ATOMIC_FETCH_AND_ADD;
                (atomic.remote_addr, atomic.rkey) = (remote.addr, remote.rkey);
                (atomic.compare_add, atomic.compare_add_mask) = (*add, *field_boundary);
                Kind::Atomic
            }
            SendWr::RegMr {
                mr: region,
                buffer: b,
                access,
            } => {
                reg_mr(&mut reg, region, *access, &|r| r.map(b))?;
                mr = Some((*region).clone());
                Kind::Reg
            }
            SendWr::RegPages {
                mr: region,
                pages,
                access,
            } => {
                reg_mr(&mut reg, region, *access, &|r| r.map_pages(pages))?;
                mr = Some((*region).clone());
                Kind::Reg
            }
            SendWr::LocalInv { mr: region } => {
                if !Arc::ptr_eq(region.pd(), &self.pd) {
                    return Err(crate::error::code::EINVAL);
                }
                rdma.wr.opcode = ib_wr_opcode_IB_WR_LOCAL_INV;
                let key = region.rkey();
                rdma.wr.ex.invalidate_rkey = key;
                invalidates = Some(key);
                mr = Some((*region).clone());
                Kind::Rdma
            }
        };
        // The region a registration maps, with its new key: ended if the request is not
        // posted (it never reached the device).
        let registers = match (kind, &mr) {
            (Kind::Reg, Some(region)) => Some((region.clone(), reg.key)),
            _ => None,
        };
        let slot = match self.shared.claim(Slot {
            tag,
            is_recv: false,
            buffer,
            mr,
            held,
            pages,
            invalidates,
        }) {
            Ok(slot) => slot,
            Err(e) => {
                if let Some((region, key)) = registers {
                    region.registration_ended(key);
                }
                return Err(e);
            }
        };
        let storage = match kind {
            Kind::Rdma => WrStorage::Rdma(rdma),
            Kind::Atomic => WrStorage::Atomic(atomic),
            Kind::Reg => WrStorage::Reg(reg),
        };
        let mut prepared = Prepared {
            storage,
            sge,
            slot,
            tag,
            registers,
        };
        match self.shared.cqe(slot) {
            Ok(cqe) => {
                let head = prepared.storage.head();
                head.__bindgen_anon_1.wr_cqe = cqe;
                head.send_flags |= ib_send_flags_IB_SEND_SIGNALED as c_int;
                Ok(prepared)
            }
            Err(e) => {
                self.unpost(prepared);
                Err(e)
            }
        }
    }

    /// Gives back the slot of a request that was prepared and not posted (it never reached the
    /// device), ending the registration it would have made.
    pub(super) fn unpost(&self, prepared: Prepared) {
        if let Some((region, key)) = prepared.registers {
            region.registration_ended(key);
        }
        self.shared.unclaim(prepared.slot);
    }
}
