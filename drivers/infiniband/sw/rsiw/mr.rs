// SPDX-License-Identifier: GPL-2.0

//! Memory regions and the STag table.
//!
//! An STag (RFC 5040) is 32 bits: a 24-bit index naming the region and an 8-bit key the
//! consumer may change on each fast registration (`ib_update_fast_reg_key`), so that a peer
//! holding an old STag is refused. The table maps the index to the region; every access, local
//! (an SGE's lkey) or remote (a tagged DDP segment's STag), looks the region up, compares the
//! whole STag, and then checks state, protection domain, rights and bounds.
//!
//! A remote access is checked when its request or segment arrives, and performed later: payload
//! trickles in, a Read Response waits for the peer's window, meanwhile the consumer may
//! invalidate, re-map or deregister the region. Each region therefore carries an epoch, a
//! number that changes with every registration, invalidation and deregistration, drawn from a
//! counter of the whole table so that no two registrations of any region share one. The engine
//! hands the driver a [`Grant`] holding the epoch it checked against, and [`MrTable::tagged`]
//! checks the grant again, epoch included, under the region's lock, the lock the memory is
//! then accessed under.
//!
//! Three kinds of region exist: the DMA MR of kernel consumers (all of memory, reached only
//! through a scatter/gather entry a kernel consumer posted under its key, see [`QpSge`]; local
//! access only, as the 6.12 core never asks for more), fast-registration MRs (a page list from
//! `map_mr_sg`, made valid by a REG_MR work request and invalid by LOCAL_INV or a received
//! Send with Invalidate), and user MRs (a process's pages, pinned by `reg_user_mr` until the
//! region is deregistered).

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::{
    c_str, new_spinlock_bh,
    prelude::*,
    random::random_u32,
    rdma::provider::{
        memory_region::{
            DmaMemory, DmaRange, MemoryRegion, PageList, UserPages, ACCESS_LOCAL_WRITE,
            ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
        },
        objects::PdId,
        restrack::RestrackAttrs,
    },
    sync::{lock::spinlock_bh::BhDisabled, Arc, SpinLockBh},
    xarray::XArray,
};

use crate::proto::placement::{self, AccessFlags, Grant, StagState};
use crate::proto::terminate::TermError;
use crate::proto::work_request::SgeEntry;
use crate::sge::QpSge;

/// What memory a region stands for.
enum Backing {
    /// All of memory (a DMA MR).
    Dma(DmaMemory),
    /// The pages `map_mr_sg` set.
    Pages(PageList),
    /// A process's pages, pinned by `reg_user_mr`.
    User(UserPages),
    /// Deregistered: nothing (a user MR's pages went back to the process).
    Gone,
}

impl Backing {
    /// The I/O virtual address range of a region with bounds.
    fn bounds(&self) -> Option<(u64, u64)> {
        match self {
            Self::Pages(p) => Some((p.iova(), p.length())),
            Self::User(p) => Some((p.iova(), p.length())),
            Self::Dma(_) | Self::Gone => None,
        }
    }
}

/// The mutable part of a region.
struct MrState {
    /// The full STag (index and current key).
    stag: u32,
    /// Valid for access.
    valid: bool,
    /// `IB_ACCESS_*` rights.
    access: u32,
    /// The registration, see the module documentation.
    epoch: u64,
    backing: Backing,
}

/// One memory region.
#[pin_data]
pub(crate) struct Mr {
    /// The protection domain.
    pd: PdId,
    /// The table it is in, to leave on deregistration.
    table: Arc<MrTable>,
    #[pin]
    state: SpinLockBh<MrState>,
}

impl Mr {
    /// Whether it belongs to `pd`.
    fn in_pd(&self, pd: PdId) -> bool {
        self.pd == pd
    }

    /// Makes a user MR valid once its registration succeeded; a deregistered one stays invalid.
    pub(crate) fn validate(&self) {
        let mut s = self.state.lock();
        if matches!(s.backing, Backing::User(_)) {
            s.valid = true;
            s.epoch = self.table.next_epoch();
        }
    }

    /// What the placement checks need to know about the region.
    fn describe(&self, pd_number: u32) -> placement::MemoryRegion {
        Self::describe_locked(&self.state.lock(), pd_number)
    }

    /// [`Self::describe`] of the state `s` the caller has locked.
    fn describe_locked(s: &MrState, pd_number: u32) -> placement::MemoryRegion {
        let (base, len, zero_based) = match &s.backing {
            Backing::Dma(_) => (0, u64::MAX, false),
            other => {
                let (base, len) = other.bounds().unwrap_or((0, 0));
                (base, len, false)
            }
        };
        let access = AccessFlags::from_ib(s.access);
        placement::MemoryRegion {
            stag: s.stag,
            state: if s.valid {
                StagState::Valid
            } else {
                StagState::Invalid
            },
            pd: pd_number,
            access,
            base,
            len,
            zero_based,
            epoch: s.epoch,
        }
    }

    /// Checks `grant` against the region as it is (`s`, locked by the caller) for a QP of `pd`;
    /// returns the offset from the region's start.
    fn recheck(&self, s: &MrState, pd: PdId, grant: &Grant) -> Result<u64, TermError> {
        // The placement checks compare PD numbers: the QP's is 0, a region of another PD has 1.
        let number = u32::from(!self.in_pd(pd));
        grant.recheck(Some(&Self::describe_locked(s, number)), 0)
    }
}

impl MrState {
    /// Calls `f` with the memory of `len` bytes at I/O virtual address `addr`, in pieces.
    /// The caller has checked the region's key, state, rights and bounds under the same lock.
    /// `entry` is the scatter/gather entry the bytes lie in, if the access is to a local
    /// buffer: a DMA MR is reached only through an entry a kernel consumer posted.
    #[inline]
    fn with_memory(
        &self,
        addr: u64,
        entry: Option<&QpSge>,
        len: u64,
        mut f: impl FnMut(DmaRange<'_>) -> Result,
    ) -> Result {
        match &self.backing {
            Backing::Dma(mem) => {
                let posted = entry.and_then(QpSge::posted).ok_or(EINVAL)?;
                let offset = addr.checked_sub(posted.addr()).ok_or(EINVAL)?;
                f(mem.range(posted, offset, len).ok_or(EINVAL)?)
            }
            Backing::Pages(pages) => {
                let offset = addr.checked_sub(pages.iova()).ok_or(EINVAL)?;
                pages.for_each_range(offset, len, f)
            }
            Backing::User(pages) => {
                let offset = addr.checked_sub(pages.iova()).ok_or(EINVAL)?;
                pages.for_each_range(offset, len, f)
            }
            Backing::Gone => Err(EINVAL),
        }
    }
}

impl MemoryRegion for Mr {
    fn fill_restrack(&self, attrs: &mut RestrackAttrs<'_>) -> Result {
        let (kind, valid, access, bounds) = {
            let s = self.state.lock();
            let kind = match &s.backing {
                Backing::Dma(_) => c_str!("dma"),
                Backing::Pages(_) => c_str!("fast_reg"),
                Backing::User(_) => c_str!("user"),
                Backing::Gone => c_str!("deregistered"),
            };
            (kind, s.valid, s.access, s.backing.bounds())
        };
        attrs.put_str(c_str!("kind"), kind)?;
        attrs.put_u32(c_str!("valid"), u32::from(valid))?;
        attrs.put_u32_hex(c_str!("access"), access)?;
        if let Some((iova, len)) = bounds {
            attrs.put_u64(c_str!("iova"), iova)?;
            attrs.put_u64(c_str!("length"), len)?;
        }
        Ok(())
    }

    fn map_pages(&self, fill: &mut dyn FnMut(&mut PageList) -> Result<u32>) -> Result<u32> {
        let mut s = self.state.lock();
        if s.valid {
            // The consumer must invalidate before mapping anew.
            return Err(EINVAL);
        }
        match &mut s.backing {
            Backing::Pages(pages) => fill(pages),
            _ => Err(EINVAL),
        }
    }

    fn deregister(&self) {
        let (index, backing) = {
            let mut s = self.state.lock();
            if matches!(s.backing, Backing::Gone) {
                // Once only: its index may name another region by now.
                return;
            }
            s.valid = false;
            s.epoch = self.table.next_epoch();
            (
                s.stag >> 8,
                core::mem::replace(&mut s.backing, Backing::Gone),
            )
        };
        self.table.remove(index);
        // Here, in the verb's process context: unpinning user pages may sleep.
        drop(backing);
    }
}

/// A local access to a region: `len` bytes at `offset` within the scatter/gather entry `sge`
/// (naming the region by its lkey) of a QP of PD `pd`, writing or reading.
pub(crate) struct LocalAccess<'a> {
    pub(crate) pd: PdId,
    pub(crate) sge: &'a QpSge,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) write: bool,
}

/// Why a local access is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LocalError {
    /// No such key, a stale key, an invalid region or another PD.
    Protection,
    /// Outside the region or not allowed.
    Access,
}

/// The largest STag index: STags are a 24-bit index and an 8-bit key.
const MAX_INDEX: u32 = (1 << 24) - 1;

/// The STag table of a device.
#[pin_data]
pub(crate) struct MrTable {
    /// The regions by STag index (the STag's upper 24 bits).
    #[pin]
    mrs: XArray<Mr>,
    /// Held by every atomic operation executed for a peer: they are atomic with respect to
    /// each other on this device (`IB_ATOMIC_HCA`).
    #[pin]
    atomics: SpinLockBh<()>,
    /// The epoch the next registration, invalidation or deregistration of any region takes.
    epochs: AtomicU64,
    /// Regions in the table, at most `max`.
    count: AtomicU32,
    max: u32,
}

impl MrTable {
    /// A table of at most `max` regions.
    pub(crate) fn new(max: u32) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                mrs <- XArray::new(),
                atomics <- new_spinlock_bh!((), "MrTable::atomics"),
                epochs: AtomicU64::new(1),
                count: AtomicU32::new(0),
                max,
            }),
            GFP_KERNEL,
        )
    }

    /// A fresh epoch (64 bits do not wrap).
    fn next_epoch(&self) -> u64 {
        self.epochs.fetch_add(1, Ordering::Relaxed)
    }

    /// Creates a region of `pd` and enters it, under the next key.
    fn add(self: &Arc<Self>, pd: PdId, access: u32, backing: Backing) -> Result<(Arc<Mr>, u32)> {
        // Index 0 is never used, so that STag 0 names nothing.
        let mr = Arc::pin_init(
            pin_init!(Mr {
                pd,
                table: self.clone(),
                state <- new_spinlock_bh!(
                    MrState {
                        stag: 0,
                        valid: false,
                        access,
                        epoch: self.next_epoch(),
                        backing
                    },
                    "Mr::state"
                ),
            }),
            GFP_KERNEL,
        )?;
        if self.count.fetch_add(1, Ordering::Relaxed) >= self.max {
            self.count.fetch_sub(1, Ordering::Relaxed);
            return Err(ENOMEM);
        }
        // The index search starts at a random place and the key is random, as with the C
        // siw: a peer cannot derive a region's STag from another's (RFC 5040 section 8), and
        // the STag of a region deregistered from an index rarely names a later one there (whose
        // grants it could not reach anyway: they hold another epoch). The region is entered
        // with STag 0 and named right after, so that no lookup in between finds it.
        let start = random_u32() & MAX_INDEX;
        let index = match self.mrs.alloc(mr.clone(), 1..=MAX_INDEX, start, GFP_KERNEL) {
            Ok(index) => index,
            Err(e) => {
                self.count.fetch_sub(1, Ordering::Relaxed);
                return Err(if e == EBUSY { ENOMEM } else { e });
            }
        };
        let key = random_u32() & 0xff;
        let stag = index << 8 | key;
        mr.state.lock().stag = stag;
        Ok((mr, stag))
    }

    /// A DMA MR of `pd`.
    pub(crate) fn add_dma(
        self: &Arc<Self>,
        pd: PdId,
        access: u32,
        mem: DmaMemory,
    ) -> Result<(Arc<Mr>, u32)> {
        // Remote access to all of memory is never granted.
        if access & (ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC) != 0 {
            return Err(EOPNOTSUPP);
        }
        let (mr, stag) = self.add(pd, access | ACCESS_LOCAL_WRITE, Backing::Dma(mem))?;
        mr.state.lock().valid = true;
        Ok((mr, stag))
    }

    /// A fast-registration MR of `pd` for up to `max_pages` pages, invalid until registered.
    pub(crate) fn add_fast_reg(
        self: &Arc<Self>,
        pd: PdId,
        max_pages: u32,
    ) -> Result<(Arc<Mr>, u32)> {
        self.add(pd, 0, Backing::Pages(PageList::new(max_pages)?))
    }

    /// A user MR of `pd` over `pages`, invalid until [`Mr::validate`].
    pub(crate) fn add_user(
        self: &Arc<Self>,
        pd: PdId,
        access: u32,
        pages: UserPages,
    ) -> Result<(Arc<Mr>, u32)> {
        self.add(pd, access, Backing::User(pages))
    }

    /// Runs `f` with the device's atomic operations serialised.
    pub(crate) fn with_atomics_serialised<R>(&self, f: impl FnOnce() -> R) -> R {
        let _guard = self.atomics.lock();
        f()
    }

    fn remove(&self, index: u32) {
        if self.mrs.remove(index).is_some() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn get(&self, stag: u32) -> Option<Arc<Mr>> {
        self.mrs.get(stag >> 8)
    }

    /// The region of `stag` as placement checks see it (`pd_number` stands for `pd`; a region
    /// of another PD is reported with another number so that the check fails).
    pub(crate) fn describe(
        &self,
        stag: u32,
        pd: PdId,
        pd_number: u32,
    ) -> Option<placement::MemoryRegion> {
        let mr = self.get(stag)?;
        let number = if mr.in_pd(pd) {
            pd_number
        } else {
            pd_number.wrapping_add(1)
        };
        Some(mr.describe(number))
    }

    /// Performs the tagged access `grant` for a QP of `pd`: checks it again under the region's
    /// lock ([`Grant::recheck`]) and, if it passes, runs `f` over its memory in pieces under the
    /// same lock. `cache` holds the region this kind of access used last ([`Self::checked`]).
    /// A Read Response's payload names its Read's `sink`, the local entry it lands in.
    pub(crate) fn tagged(
        &self,
        bh: BhDisabled<'_>,
        cache: &mut Option<Arc<Mr>>,
        pd: PdId,
        grant: &Grant,
        sink: Option<&QpSge>,
        f: impl FnMut(DmaRange<'_>) -> Result,
    ) -> core::result::Result<(), TermError> {
        // Nothing to access passes; otherwise this is what an STag naming nothing gets.
        let no_region = match grant.recheck(None, 0) {
            Ok(_) => return Ok(()),
            Err(e) => e,
        };
        // Memory that fails after the checks passed is the RNIC's own failure.
        let local_failure = if grant.access.usage.checked_by_rdmap() {
            TermError::RdmapLocalCatastrophic
        } else {
            TermError::DdpLocalCatastrophic
        };
        self.checked(
            bh,
            cache,
            grant.access.stag,
            no_region,
            |mr, s| mr.recheck(s, pd, grant),
            |s, offset| {
                Self::access_tagged(s, offset, sink, grant.access.len, f).map_err(|_| local_failure)
            },
        )?
    }

    /// Runs `access` under the lock of a region `check` accepts, with what `check` returned: the
    /// region in `cache` if it passes, else the one the table holds for `stag`, which then goes
    /// into `cache`. The error is what `check` says of the table's region, or `no_region` if
    /// the table has none. Checks and access take one lock: the region cannot change in
    /// between. The caller runs with bottom halves disabled (`bh`, the QP's lock): the region's
    /// lock need not disable them again.
    fn checked<C, E, R>(
        &self,
        bh: BhDisabled<'_>,
        cache: &mut Option<Arc<Mr>>,
        stag: u32,
        no_region: E,
        check: impl Fn(&Mr, &MrState) -> core::result::Result<C, E>,
        access: impl FnOnce(&MrState, C) -> R,
    ) -> core::result::Result<R, E> {
        if let Some(mr) = cache.as_ref() {
            let s = mr.state.lock_in_bh(bh);
            if let Ok(checked) = check(mr, &s) {
                return Ok(access(&s, checked));
            }
        }
        let mr = self.get(stag).ok_or(no_region)?;
        let s = mr.state.lock_in_bh(bh);
        let checked = check(&mr, &s)?;
        let done = access(&s, checked);
        drop(s);
        *cache = Some(mr);
        Ok(done)
    }

    /// The access of [`Self::tagged`] to region `s`.
    #[inline]
    fn access_tagged(
        s: &MrState,
        offset: u64,
        sink: Option<&QpSge>,
        len: u64,
        f: impl FnMut(DmaRange<'_>) -> Result,
    ) -> Result {
        let base = s.backing.bounds().map_or(0, |(base, _)| base);
        s.with_memory(base.checked_add(offset).ok_or(EINVAL)?, sink, len, f)
    }

    /// Runs `f` over the memory of a local SGE after checking the key, PD, state, bounds and,
    /// for `write`, local write access. `cache` holds the region the caller used last: if the
    /// key still names it, the table is not looked up (its lock and a reference count are
    /// shared by every CPU that places data); otherwise the region found is cached
    /// ([`Self::checked`]).
    pub(crate) fn local(
        &self,
        bh: BhDisabled<'_>,
        cache: &mut Option<Arc<Mr>>,
        access: LocalAccess<'_>,
        f: impl FnMut(DmaRange<'_>) -> Result,
    ) -> core::result::Result<(), LocalError> {
        let LocalAccess {
            pd,
            sge,
            offset,
            len,
            write,
        } = access;
        let lkey = sge.lkey();
        // The region's own lock decides: a region deregistered since is invalid for good, and
        // one registered anew under another key has another key.
        let usable = |mr: &Mr, s: &MrState| {
            if mr.in_pd(pd) && s.stag == lkey && s.valid {
                Ok(())
            } else {
                Err(LocalError::Protection)
            }
        };
        self.checked(bh, cache, lkey, LocalError::Protection, usable, |s, ()| {
            Self::access_local(s, sge, offset, len, write, f)
        })?
    }

    /// The access of [`Self::local`] to a valid region `s` the key of `sge` names.
    #[inline]
    fn access_local(
        s: &MrState,
        sge: &QpSge,
        offset: u64,
        len: u64,
        write: bool,
        f: impl FnMut(DmaRange<'_>) -> Result,
    ) -> core::result::Result<(), LocalError> {
        if write && s.access & ACCESS_LOCAL_WRITE == 0 {
            return Err(LocalError::Access);
        }
        let addr = sge.addr().checked_add(offset).ok_or(LocalError::Access)?;
        if let Some((base, length)) = s.backing.bounds() {
            let end = addr.checked_add(len).ok_or(LocalError::Access)?;
            if addr < base || end > base.saturating_add(length) {
                return Err(LocalError::Access);
            }
        }
        s.with_memory(addr, Some(sge), len, f)
            .map_err(|_| LocalError::Access)
    }

    /// REG_MR: makes the region `stag` names valid under that full STag with `access`, its
    /// first byte at `iova`, `length` bytes long.
    pub(crate) fn register(
        &self,
        pd: PdId,
        stag: u32,
        access: u32,
        iova: u64,
        length: u64,
    ) -> core::result::Result<(), LocalError> {
        let mr = self.get(stag).ok_or(LocalError::Protection)?;
        if !mr.in_pd(pd) {
            return Err(LocalError::Protection);
        }
        let mut s = mr.state.lock();
        if s.valid {
            return Err(LocalError::Access);
        }
        match &mut s.backing {
            Backing::Pages(p) => p
                .register_at(iova, length)
                .map_err(|_| LocalError::Access)?,
            _ => return Err(LocalError::Access),
        }
        s.stag = stag;
        s.access = access;
        s.valid = true;
        s.epoch = self.next_epoch();
        Ok(())
    }

    /// LOCAL_INV or a received Send with Invalidate: makes the region invalid, ending every
    /// grant of its registration. It must be a fast-registration region of `pd` (RFC 5040
    /// section 6.10.4).
    pub(crate) fn invalidate(&self, pd: PdId, stag: u32) -> core::result::Result<(), LocalError> {
        let mr = self.get(stag).ok_or(LocalError::Protection)?;
        if !mr.in_pd(pd) {
            return Err(LocalError::Protection);
        }
        let mut s = mr.state.lock();
        if s.stag != stag || !matches!(s.backing, Backing::Pages(_)) {
            return Err(LocalError::Protection);
        }
        s.valid = false;
        s.epoch = self.next_epoch();
        Ok(())
    }
}
