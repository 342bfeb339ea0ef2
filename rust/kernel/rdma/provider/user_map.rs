// SPDX-License-Identifier: GPL-2.0

//! Memory a provider shares with a user-space process through `mmap`.
//!
//! Software providers (siw, rsiw) keep their queues — completion queue rings, send and receive
//! queues — in memory the provider library maps into the process and reads and writes
//! directly. The kernel side allocates it with `vmalloc_user` ([`UserMemory`]), registers it
//! with the user context as an mmap entry ([`UserMemory::map`]), and tells the library the
//! entry's key, the offset to pass to `mmap`. The RDMA core routes that `mmap` to the
//! device's `mmap` op, here `mmap_callback`, which finds the entry and maps it.
//!
//! # Ownership
//!
//! Once mapped, the memory is shared by the mmap entry and the provider's [`UserMapping`]: it
//! is freed when both are gone. The RDMA core frees the entry (in `mmap_free_callback`) once
//! it is removed and no `mmap` is looking at it. The provider keeps its mapping for as long as
//! its object (a CQ, a QP) lives; dropping it removes the entry, so no new `mmap` can find it.
//! Pages already mapped stay with the process until it unmaps them (the mapping holds page
//! references).
//!
//! An entry belongs to its user context, which the core frees right after the context's
//! `dealloc_ucontext` (and which must have no entry left then). So each context keeps the set
//! of its entries (`ContextMappings`): closing the context removes those still there, and a
//! mapping dropped later finds its entry gone and leaves it alone. A provider may thus keep a
//! mapping past its context; its memory stays valid, only `mmap` no longer finds it.

use super::user::UserVerb;
use crate::{
    alloc::{flags::GFP_KERNEL, KBox, KVec},
    bindings,
    error::{to_result, Result},
    ffi::{c_int, c_ulong},
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};
use core::ptr::NonNull;

/// Zeroed, page-rounded kernel memory that may be mapped into a user process.
///
/// # Invariants
///
/// `ptr` is a `vmalloc_user` allocation of at least `len` bytes, owned by this value.
pub struct UserMemory {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: The allocation is plain memory owned by this value; it may be freed anywhere.
unsafe impl Send for UserMemory {}
// SAFETY: `&UserMemory` gives no access to the bytes.
unsafe impl Sync for UserMemory {}

impl UserMemory {
    /// Allocates `len` bytes (rounded up to pages), zeroed.
    pub fn new(len: usize) -> Result<Self> {
        if len == 0 {
            return Err(EINVAL);
        }
        let size = c_ulong::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: Any size may be asked for; null means failure.
        let ptr = unsafe { bindings::vmalloc_user_noprof(size) };
        // INVARIANT: A fresh allocation of `len` bytes or more.
        Ok(Self {
            ptr: NonNull::new(ptr.cast()).ok_or(ENOMEM)?,
            len,
        })
    }

    /// Registers the memory with the user context of `verb` for `mmap`; returns the mapping,
    /// whose [`UserMapping::key`] the provider library passes to `mmap` as the offset.
    pub fn map(self, verb: &UserVerb<'_>) -> Result<UserMapping> {
        let len = self.len;
        let ptr = self.ptr;
        let mem = Arc::new(self, GFP_KERNEL)?;
        let mut boxed = KBox::new(
            MappedMemory {
                entry: bindings::rdma_user_mmap_entry::default(),
                mem: mem.clone(),
            },
            GFP_KERNEL,
        )?;
        let context = verb.mappings().clone();
        let mut entries = context.entries.lock();
        if entries.closed {
            return Err(EIO);
        }
        // Room to record the entry first, so that recording cannot fail once it is inserted.
        if !entries.live.contains(&0) {
            entries.live.reserve(1, GFP_KERNEL)?;
        }
        // SAFETY: `ucontext` is the live context of the verb being executed; `entry` is zeroed
        // and stays at this address (boxed). On success the core holds the entry until
        // `mmap_free_callback`, which frees the box.
        to_result(unsafe {
            bindings::rdma_user_mmap_entry_insert(verb.ucontext, &mut boxed.entry, len)
        })?;
        let raw = KBox::into_raw(boxed);
        // SAFETY: `raw` is valid: the core owns it now, and frees it only after it is removed,
        // which the mapping or the context's closing does, once (they share `context`).
        let entry = unsafe { core::ptr::addr_of_mut!((*raw).entry) };
        entries.record(entry);
        drop(entries);
        // SAFETY: As above; `start_pgoff` was set by the insert.
        let key = (unsafe { (*entry).start_pgoff } as u64) << bindings::PAGE_SHIFT;
        // INVARIANT: Inserted and recorded in `context`; `mem` is the entry's memory.
        Ok(UserMapping {
            entry,
            key,
            mem: ptr,
            len,
            _memory: mem,
            context,
        })
    }
}

impl Drop for UserMemory {
    fn drop(&mut self) {
        // SAFETY: Ours to free (type invariant).
        unsafe { bindings::vfree(self.ptr.as_ptr().cast()) };
    }
}

/// An mmap entry and the memory it maps; owned by the RDMA core once inserted.
#[repr(C)]
struct MappedMemory {
    entry: bindings::rdma_user_mmap_entry,
    mem: Arc<UserMemory>,
}

/// The mmap entries of one user context that are inserted and not removed yet.
#[pin_data]
pub(crate) struct ContextMappings {
    #[pin]
    entries: Mutex<Entries>,
}

/// What [`ContextMappings`] guards.
struct Entries {
    /// Addresses of the live entries; 0 is a free slot.
    live: KVec<usize>,
    /// The context is closed: its entries are removed, and none is inserted any more.
    closed: bool,
}

impl Entries {
    /// Records `entry` in a free slot (`map` made sure there is one).
    fn record(&mut self, entry: *mut bindings::rdma_user_mmap_entry) {
        if let Some(slot) = self.live.iter_mut().find(|e| **e == 0) {
            *slot = entry as usize;
        } else if self.live.push(entry as usize, GFP_ATOMIC).is_err() {
            // Cannot happen: `map` reserved the room.
            pr_warn!("rdma: could not record an mmap entry\n");
        }
    }

    /// Forgets `entry`; whether it was recorded (not yet removed by the context's closing).
    fn forget(&mut self, entry: *mut bindings::rdma_user_mmap_entry) -> bool {
        match self.live.iter_mut().find(|e| **e == entry as usize) {
            Some(slot) => {
                *slot = 0;
                true
            }
            None => false,
        }
    }
}

impl ContextMappings {
    /// The set of a new user context.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                entries <- new_mutex!(Entries {
                    live: KVec::new(),
                    closed: false,
                }),
            }),
            GFP_KERNEL,
        )
    }

    /// The context is being freed: removes every entry still there (mappings dropped later
    /// leave theirs alone) and refuses new ones.
    pub(crate) fn close(&self) {
        let mut entries = self.entries.lock();
        entries.closed = true;
        let live = core::mem::take(&mut entries.live);
        drop(entries);
        for &e in live.iter().filter(|&&e| e != 0) {
            // SAFETY: A recorded entry is inserted and not removed (it leaves the set when it
            // is removed, under the set's lock); the context is alive during its closing.
            unsafe {
                bindings::rdma_user_mmap_entry_remove(e as *mut bindings::rdma_user_mmap_entry)
            };
        }
    }
}

/// Memory registered for `mmap` with a user context; dropping it unregisters it.
///
/// The kernel keeps access to the memory for as long as it holds the mapping: the queues in
/// it are shared with the process, which reads and writes them concurrently, so the accessors
/// copy bytes or access single aligned words ([`UserMapping::load_u16`] and friends, like
/// `READ_ONCE`/`WRITE_ONCE`) and never hand out references. Ordering between such accesses is
/// the caller's, with `core::sync::atomic::fence`.
///
/// # Invariants
///
/// `entry` is the entry of a `MappedMemory`, inserted; while `context` records it, it is not
/// removed and its context is alive. `mem` is the start of `_memory`'s allocation of at least
/// `len` bytes, which lives as long as this value.
pub struct UserMapping {
    entry: *mut bindings::rdma_user_mmap_entry,
    key: u64,
    mem: NonNull<u8>,
    len: usize,
    _memory: Arc<UserMemory>,
    context: Arc<ContextMappings>,
}

// SAFETY: The entry is only removed (once, on drop), which the core allows from any thread.
unsafe impl Send for UserMapping {}
// SAFETY: Through `&UserMapping` the memory is only copied or accessed one aligned word at a
// time, never referenced, which is sound from several threads (the process accesses it the
// same way).
unsafe impl Sync for UserMapping {}

impl UserMapping {
    /// The offset the provider library passes to `mmap`.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The size of the memory in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no bytes (never: [`UserMemory::new`] refuses 0).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of `size` bytes at `offset`, if they lie inside and are aligned to `align`.
    #[inline]
    fn at(&self, offset: usize, size: usize, align: usize) -> Result<*mut u8> {
        let end = offset.checked_add(size).ok_or(EINVAL)?;
        if end > self.len || offset % align != 0 {
            return Err(EINVAL);
        }
        // SAFETY: `offset + size <= len`, inside the allocation (type invariant).
        Ok(unsafe { self.mem.as_ptr().add(offset) })
    }

    /// Copies `out.len()` bytes at `offset` into `out`.
    #[inline]
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result {
        let from = self.at(offset, out.len(), 1)?;
        // SAFETY: `from` is valid for `out.len()` bytes while we hold the mapping (type
        // invariant); the process may write them concurrently, so bytes are copied, never
        // referenced; `out` is a distinct Rust buffer.
        unsafe { core::ptr::copy_nonoverlapping(from, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Copies `data` into the memory at `offset`.
    #[inline]
    pub fn write(&self, offset: usize, data: &[u8]) -> Result {
        let to = self.at(offset, data.len(), 1)?;
        // SAFETY: As in `read`; the memory is ours to write (it is the kernel's side of a
        // shared queue).
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), to, data.len()) };
        Ok(())
    }

    /// Reads the naturally aligned `u16` at `offset` once (`READ_ONCE`).
    #[inline]
    pub fn load_u16(&self, offset: usize) -> Result<u16> {
        let at = self.at(offset, 2, 2)?;
        // SAFETY: Inside the allocation and aligned (checked by `at`); a volatile access of an
        // aligned word is a single load, whatever the process does meanwhile.
        Ok(unsafe { core::ptr::read_volatile(at.cast::<u16>()) })
    }

    /// Writes the naturally aligned `u16` at `offset` once (`WRITE_ONCE`).
    #[inline]
    pub fn store_u16(&self, offset: usize, value: u16) -> Result {
        let at = self.at(offset, 2, 2)?;
        // SAFETY: As in `load_u16`.
        unsafe { core::ptr::write_volatile(at.cast::<u16>(), value) };
        Ok(())
    }

    /// Reads the naturally aligned `u32` at `offset` once (`READ_ONCE`).
    #[inline]
    pub fn load_u32(&self, offset: usize) -> Result<u32> {
        let at = self.at(offset, 4, 4)?;
        // SAFETY: As in `load_u16`.
        Ok(unsafe { core::ptr::read_volatile(at.cast::<u32>()) })
    }

    /// Writes the naturally aligned `u32` at `offset` once (`WRITE_ONCE`).
    #[inline]
    pub fn store_u32(&self, offset: usize, value: u32) -> Result {
        let at = self.at(offset, 4, 4)?;
        // SAFETY: As in `load_u16`.
        unsafe { core::ptr::write_volatile(at.cast::<u32>(), value) };
        Ok(())
    }

    /// Writes the byte at `offset` once (`WRITE_ONCE`).
    #[inline]
    pub fn store_u8(&self, offset: usize, value: u8) -> Result {
        let at = self.at(offset, 1, 1)?;
        // SAFETY: As in `load_u16`.
        unsafe { core::ptr::write_volatile(at, value) };
        Ok(())
    }

    /// Reads the byte at `offset` once (`READ_ONCE`).
    #[inline]
    pub fn load_u8(&self, offset: usize) -> Result<u8> {
        let at = self.at(offset, 1, 1)?;
        // SAFETY: As in `load_u16`.
        Ok(unsafe { core::ptr::read_volatile(at) })
    }
}

impl Drop for UserMapping {
    fn drop(&mut self) {
        let mut entries = self.context.entries.lock();
        if entries.forget(self.entry) {
            // SAFETY: It was recorded, so inserted and not removed, and its context is alive
            // while we hold the set's lock (closing takes it). After this the core frees the
            // entry when unused, through `mmap_free_callback`.
            unsafe { bindings::rdma_user_mmap_entry_remove(self.entry) };
        }
    }
}

/// The device's `mmap` op: maps the entry the offset names.
///
/// # Safety
///
/// Called by the RDMA core with a user context of one of our devices and the `mmap`'s VMA.
pub(crate) unsafe extern "C" fn mmap_callback(
    uctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> c_int {
    // SAFETY: Valid for the call (the caller's guarantee); the core checks the VMA's size
    // against the entry's and takes a reference on it.
    let entry = unsafe { bindings::rdma_user_mmap_entry_get(uctx, vma) };
    if entry.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: Every entry of our devices is the first field of a `MappedMemory`, alive while we
    // hold the reference.
    let mem = unsafe { &(*entry.cast::<MappedMemory>()).mem };
    // SAFETY: `mem` is a `vmalloc_user` allocation covering the entry's pages, which the core
    // checked the VMA against.
    let ret = unsafe { bindings::remap_vmalloc_range(vma, mem.ptr.as_ptr().cast(), 0) };
    // SAFETY: Drops the reference taken above.
    unsafe { bindings::rdma_user_mmap_entry_put(entry) };
    ret
}

/// The device's `mmap_free` op: the core is done with an entry.
///
/// # Safety
///
/// Called once by the RDMA core per entry, after its removal, with no user left.
pub(crate) unsafe extern "C" fn mmap_free_callback(entry: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: The entry is the first field of a `MappedMemory` leaked by `UserMemory::map`.
    drop(unsafe { KBox::from_raw(entry.cast::<MappedMemory>()) });
}
