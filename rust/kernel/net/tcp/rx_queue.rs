// SPDX-License-Identifier: GPL-2.0

//! Reading a socket's receive queue in place from its `sk_data_ready` ([`RxQueue`]): the
//! socket buffers' bytes are offered as [`SkbSlice`]s, read without a copy into a buffer of
//! our own, and what the reader consumed leaves the queue.

use crate::{
    bindings,
    error::{code::*, to_result, Result},
    ffi::{c_int, c_uint},
};
use core::marker::PhantomData;

/// The receive queue of a socket, inside
/// [`TcpCallbacks::data_ready`](super::TcpCallbacks::data_ready).
///
/// # Invariants
///
/// `sk` is a valid TCP socket whose `sk_data_ready` is running (so TCP allows
/// `tcp_read_sock` on it) for the whole lifetime `'a`.
pub struct RxQueue<'a> {
    pub(super) sk: *mut bindings::sock,
    pub(super) _p: PhantomData<&'a mut ()>,
}

impl RxQueue<'_> {
    /// Offers the queued bytes to `f`, in order, one contiguous piece of a socket buffer at a
    /// time; `f` returns how many bytes of the piece it consumed. Consuming fewer than offered
    /// stops the walk (the rest stays queued for a later call). Returns the bytes consumed.
    pub fn read<F: FnMut(&SkbSlice<'_>) -> usize>(&mut self, f: &mut F) -> usize {
        let mut desc = bindings::read_descriptor_t {
            count: 1,
            ..Default::default()
        };
        desc.arg.data = (f as *mut F).cast();
        // SAFETY: `sk` is a TCP socket in its `sk_data_ready` (type invariant). `desc.arg.data`
        // points to `f`, alive for the call, as `read_actor::<F>` expects.
        let ret = unsafe { bindings::tcp_read_sock(self.sk, &mut desc, Some(read_actor::<F>)) };
        ret.max(0) as usize
    }
}

/// The `sk_read_actor_t` behind [`RxQueue::read`].
///
/// # Safety
///
/// `desc.arg.data` must point to a live `F`, and `skb` hold `len` bytes from `offset`, as
/// `tcp_read_sock` guarantees for its actor.
unsafe extern "C" fn read_actor<F: FnMut(&SkbSlice<'_>) -> usize>(
    desc: *mut bindings::read_descriptor_t,
    skb: *mut bindings::sk_buff,
    offset: c_uint,
    len: usize,
) -> c_int {
    // SAFETY: `desc` is the descriptor `RxQueue::read` built, pointing at its closure.
    let f = unsafe { &mut *(*desc).arg.data.cast::<F>() };
    // INVARIANT: `tcp_read_sock` guarantees the range for this call.
    let slice = SkbSlice {
        skb,
        offset,
        len,
        _p: PhantomData,
    };
    let used = f(&slice).min(len).min(c_int::MAX as usize);
    if used < len {
        // SAFETY: As above; a zero count makes `tcp_read_sock` stop.
        unsafe { (*desc).count = 0 };
    }
    used as c_int
}

/// The most pieces [`SkbSlice::for_each_batch`] hands over at once: a socket buffer's head and
/// every page fragment it can have (`MAX_SKB_FRAGS`, which `CONFIG_MAX_SKB_FRAGS` sets, 17 by
/// default; a buffer with more is handed over in several batches).
pub const PIECES_PER_BATCH: usize = 18;

/// Pieces of a socket buffer collected for [`SkbSlice::for_each_batch`], with the mappings
/// (from `kmap_local_page`) they lie in.
///
/// # Invariants
///
/// The first `len` entries of `pieces` are readable for as long as the batch holds them: the
/// non-null entries of `maps` with the same index are live local mappings they lie in, made in
/// index order, and nothing else maps or unmaps in between.
struct Batch<'a> {
    pieces: [&'a [u8]; PIECES_PER_BATCH],
    maps: [*mut u8; PIECES_PER_BATCH],
    len: usize,
}

impl<'a> Batch<'a> {
    fn new() -> Self {
        let empty: &[u8] = &[];
        // INVARIANT: No entry is in use.
        Self {
            pieces: [empty; PIECES_PER_BATCH],
            maps: [core::ptr::null_mut(); PIECES_PER_BATCH],
            len: 0,
        }
    }

    fn is_full(&self) -> bool {
        self.len >= PIECES_PER_BATCH
    }

    /// Adds `piece`, which lies in the local mapping `map` (or in memory that needs none if
    /// null); a full batch drops it.
    ///
    /// # Safety
    ///
    /// `piece` must stay readable until the batch unmaps `map` (if non-null, a mapping made
    /// by `kmap_local_page` after every mapping the batch holds, which it then owns), or
    /// until the batch is dropped.
    unsafe fn push(&mut self, piece: &'a [u8], map: *mut u8) {
        if let (Some(p), Some(m)) = (self.pieces.get_mut(self.len), self.maps.get_mut(self.len)) {
            *p = piece;
            *m = map;
            // INVARIANT: Entry `len` is in use now, with the caller's promises.
            self.len += 1;
        } else if !map.is_null() {
            // SAFETY: The latest mapping, owned by the batch now (the caller's promise).
            unsafe { bindings::kunmap_local(map.cast()) };
        }
    }

    /// Hands the pieces to `f` (if any) and empties the batch, unmapping them. Returns what
    /// `f` did (`true` for an empty batch).
    fn hand_over(&mut self, f: &mut impl FnMut(&[&[u8]]) -> bool) -> bool {
        let pieces = self.pieces.get(..self.len).unwrap_or(&[]);
        let go_on = pieces.is_empty() || f(pieces);
        self.unmap();
        go_on
    }

    /// Unmaps the batch's mappings, latest first, and empties it.
    fn unmap(&mut self) {
        let maps = self.maps.get(..self.len).unwrap_or(&[]);
        for &map in maps.iter().rev() {
            if !map.is_null() {
                // SAFETY: A live local mapping the batch owns (type invariant); the ones made
                // after it are already unmapped, as `kunmap_local` requires.
                unsafe { bindings::kunmap_local(map.cast()) };
            }
        }
        // INVARIANT: No entry is in use any more.
        self.len = 0;
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        self.unmap();
    }
}

/// A contiguous range of received bytes inside a socket buffer, offered by [`RxQueue::read`].
///
/// # Invariants
///
/// `skb` holds at least `len` bytes from `offset`, and stays valid for `'a`.
pub struct SkbSlice<'a> {
    skb: *mut bindings::sk_buff,
    offset: c_uint,
    len: usize,
    _p: PhantomData<&'a ()>,
}

impl SkbSlice<'_> {
    /// The number of bytes in this slice.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `dst.len()` bytes starting `at` bytes into the slice into `dst`; `EINVAL` if that
    /// reaches past the slice.
    pub fn copy_to(&self, at: usize, dst: &mut [u8]) -> Result {
        let end = at.checked_add(dst.len()).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        let start = c_int::try_from(at)
            .ok()
            .and_then(|at| at.checked_add(self.offset as c_int))
            .ok_or(EINVAL)?;
        let n = c_int::try_from(dst.len()).map_err(|_| EINVAL)?;
        // SAFETY: `skb` holds `len` bytes from `offset` (type invariant) and the range
        // `start..start + n` is inside them; `dst` is writable for `n` bytes.
        to_result(unsafe { bindings::skb_copy_bits(self.skb, start, dst.as_mut_ptr().cast(), n) })
    }

    /// Hands the bytes of the slice to `f` in place, as the contiguous pieces the socket
    /// buffer holds them in (its head, then each page fragment, mapped for the call), in
    /// order, without copying them: in batches of up to [`PIECES_PER_BATCH`] pieces, which for
    /// a common socket buffer means all of them at once. `f` returns `false` to stop early.
    #[inline]
    pub fn for_each_batch(&self, mut f: impl FnMut(&[&[u8]]) -> bool) {
        let Some(to) = u32::try_from(self.len)
            .ok()
            .and_then(|len| self.offset.checked_add(len))
        else {
            return;
        };
        if self.for_each_direct_batch(to, &mut f) {
            return;
        }
        self.for_each_seq_piece(to, |piece| f(&[piece]));
    }

    /// [`Self::for_each_batch`] for the socket buffers TCP builds, a head and page fragments
    /// without a fragment list: all their pieces are mapped at once and handed over together,
    /// which `skb_seq_read` cannot do (it maps one fragment at a time and unmaps it before the
    /// next). The receiver then takes a run of bytes over many fragments in one call: an RDMA
    /// payload is placed with one lookup, lock and bounds check of its memory region instead
    /// of one per fragment. Returns `false`, having handed nothing to `f`, when the buffer is
    /// of another kind.
    fn for_each_direct_batch(&self, to: u32, f: &mut impl FnMut(&[&[u8]]) -> bool) -> bool {
        // A fragment may span several pages of a compound page: only without highmem are
        // they mapped contiguously (in the direct map) by mapping the first.
        if cfg!(CONFIG_HIGHMEM) {
            return false;
        }
        let skb = self.skb;
        // SAFETY: `skb` is valid for `'a` (type invariant), and so is its shared info, which
        // `skb_shinfo` finds; these are plain fields.
        let (data, headlen, shinfo) = unsafe {
            let headlen = (*skb).len.saturating_sub((*skb).data_len);
            ((*skb).data, headlen, &*bindings::skb_shinfo(skb))
        };
        if !shinfo.frag_list.is_null() {
            return false;
        }
        let Some(frags) = shinfo.frags.get(..usize::from(shinfo.nr_frags)) else {
            return false;
        };
        // Fragments backed by something other than a page (a `net_iov`) are left to
        // `skb_seq_read`, which knows them.
        if frags.iter().any(|frag| frag_page(frag).is_null()) {
            return false;
        }
        let mut batch = Batch::new();
        let mut at = self.offset;
        // The head: bytes `0..headlen` after `data`.
        if at < headlen {
            let end = to.min(headlen);
            let (ptr, n) = (data.wrapping_add(at as usize), (end - at) as usize);
            // SAFETY: The head holds `headlen` bytes from `data`, and `at..end` is inside both
            // them and the slice (type invariant); it is not unmapped.
            unsafe { batch.push(core::slice::from_raw_parts(ptr, n), core::ptr::null_mut()) };
            at = end;
        }
        let mut start = headlen;
        for frag in frags {
            if at >= to {
                break;
            }
            let end = start.saturating_add(frag.len);
            if at < end {
                let last = to.min(end);
                if batch.is_full() && !batch.hand_over(f) {
                    return true;
                }
                // SAFETY: The fragment is a page (checked above) the buffer holds a reference
                // to; the mapping is valid until the batch unmaps it and, without highmem,
                // covers the whole (compound) page the fragment lies in.
                let base = unsafe { bindings::kmap_local_page(frag_page(frag)) }.cast::<u8>();
                let from = frag.offset as usize + (at - start) as usize;
                let (ptr, n) = (base.wrapping_add(from), (last - at) as usize);
                // SAFETY: The fragment's bytes `offset..offset + len` are in the mapped page
                // range, and `at..last` lies within the fragment and the slice; `base` is the
                // mapping just made, which the batch unmaps after its last use of the piece.
                unsafe { batch.push(core::slice::from_raw_parts(ptr, n), base) };
                at = last;
            }
            start = end;
        }
        let _ = batch.hand_over(f);
        true
    }

    /// The pieces of [`Self::for_each_batch`] one at a time through `skb_seq_read`, for any
    /// socket buffer.
    fn for_each_seq_piece(&self, to: u32, mut f: impl FnMut(&[u8]) -> bool) {
        // Set up by `skb_prepare_seq_read`.
        let mut st = bindings::skb_seq_state::default();
        // SAFETY: `skb` holds the bytes `offset..to` and is valid for `'a` (type invariant).
        unsafe { bindings::skb_prepare_seq_read(self.skb, self.offset, to, &mut st) };
        let mut consumed = 0;
        loop {
            let mut data: *const u8 = core::ptr::null();
            // SAFETY: `st` was prepared on our skb; `consumed` is what we were given so far.
            let n = unsafe { bindings::skb_seq_read(consumed, &mut data, &mut st) };
            if n == 0 || data.is_null() {
                // The walk is over; `skb_seq_read` released its state.
                return;
            }
            // A block may run past `to` (`skb_seq_read` does not clamp it): only ours is used.
            let n = n.min(to - self.offset - consumed);
            // SAFETY: `skb_seq_read` made at least `n` bytes at `data` readable (mapping a
            // fragment if need be) until the next call on `st`; the slice does not outlive this
            // iteration.
            let piece = unsafe { core::slice::from_raw_parts(data, n as usize) };
            if !f(piece) {
                // SAFETY: A walk in progress on `st`: unmaps what it mapped.
                unsafe { bindings::skb_abort_seq_read(&mut st) };
                return;
            }
            consumed += n;
        }
    }
}

/// The page of `frag`, or null if it is not a page (a `net_iov`).
fn frag_page(frag: &bindings::skb_frag_t) -> *mut bindings::page {
    // SAFETY: `frag` is a valid fragment, which `skb_frag_page` only reads.
    unsafe { bindings::skb_frag_page(frag) }
}
