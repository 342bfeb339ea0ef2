// SPDX-License-Identifier: GPL-2.0

//! The send and receive queues of a process's QP, shared with it through `mmap`.
//!
//! rdma-core's siw provider (which drives rsiw unmodified) posts work requests by writing
//! `struct siw_sqe`/`struct siw_rqe` entries into rings it mapped, setting each entry's VALID
//! flag last; it never hands them to the kernel. The kernel takes entries in ring order:
//!
//! - a send queue entry is looked at, decoded into the engine's room for it, when the engine wants
//!   the next request ([`UserRings::peek_send`]), and released, its flag cleared, when the engine
//!   takes it ([`UserRings::pop_send`]). The library rings the doorbell (an empty `post_send`)
//!   only if the entry before the ones it just wrote was already released, i.e. when it believes
//!   the kernel idle. So the release is a full barrier before the next entry is looked at, and
//!   after releasing an entry the transmit path always looks at the next one: between them nothing
//!   is missed (the library stores its entry, then loads the previous flag);
//! - a receive queue entry is taken, and released, when a message needs it.
//!
//! Entries are copied out of the shared memory before they are decoded
//! (`proto/siw_abi_entries.rs`), so the process cannot change a request under the kernel. Inline
//! data, which travels inside the send queue entry, is copied to a buffer of the kernel's,
//! one slot per entry; the engine reads it through an SGE with the [`INLINE_LKEY`], a key no
//! memory region has (STag index 0 is never used).

use core::sync::atomic::{fence, Ordering};
use kernel::{alloc::KVVec, prelude::*, rdma::provider::user_map::UserMapping};

use crate::proto::{
    qp_engine::{Completion, RecvRequest, SendRequest, Sge, SgeList, WcOpcode, WcStatus},
    siw_abi_entries::{self, RQE_HEAD, RQE_SIZE, SQE_HEAD, SQE_SIZE},
    work_request::SgeEntry,
};
use crate::sge::QpSge;

/// The local key of inline data: `addr` is the offset of the data in the QP's inline buffer.
pub(crate) const INLINE_LKEY: u32 = 0;

/// A process's send queue and, unless it uses none, receive queue.
pub(crate) struct UserRings {
    sq: UserMapping,
    num_sqe: u32,
    /// The count of send queue entries taken.
    sq_get: u32,
    recv: RecvSide,
    /// Every send queue entry is signalled.
    signal_all: bool,
    /// Inline data, [`siw_abi_entries::MAX_INLINE`] bytes per send queue entry (empty if the QP
    /// has no inline data).
    inline: KVVec<u8>,
}

/// The receive queue's side of [`UserRings`], on cache lines of its own: a QP's receiving and
/// sending run on different CPUs (in a ping-pong, receiving runs in the peer's send), and
/// lines written by both would move between the CPUs with every message.
#[repr(align(64))]
struct RecvSide {
    rq: Option<UserMapping>,
    num_rqe: u32,
    rq_get: u32,
}

impl UserRings {
    /// Queues in `sq` (`num_sqe` entries) and `rq` (`num_rqe` entries).
    pub(crate) fn new(
        sq: UserMapping,
        num_sqe: u32,
        rq: Option<UserMapping>,
        num_rqe: u32,
        signal_all: bool,
        with_inline: bool,
    ) -> Result<Self> {
        let sq_len = (num_sqe as usize).checked_mul(SQE_SIZE).ok_or(EINVAL)?;
        let rq_len = (num_rqe as usize).checked_mul(RQE_SIZE).ok_or(EINVAL)?;
        if !num_sqe.is_power_of_two()
            || (num_rqe != 0 && !num_rqe.is_power_of_two())
            || sq.len() < sq_len
            || rq.as_ref().map_or(0, |r| r.len()) < rq_len
        {
            return Err(EINVAL);
        }
        let inline_len = if with_inline {
            (num_sqe as usize)
                .checked_mul(siw_abi_entries::MAX_INLINE)
                .ok_or(EINVAL)?
        } else {
            0
        };
        Ok(Self {
            sq,
            num_sqe,
            sq_get: 0,
            recv: RecvSide {
                rq,
                num_rqe,
                rq_get: 0,
            },
            signal_all,
            inline: KVVec::from_elem(0u8, inline_len, GFP_KERNEL)?,
        })
    }

    /// Decodes the send queue entry the engine gets next into `out`, if the process posted
    /// one (`Ok(true)`). A malformed entry is taken and its error completion returned: the
    /// caller reports it and fails the QP, as the C siw does. The entry stays in the ring
    /// until [`Self::pop_send`]; the engine may look without taking, and is given a fresh
    /// decode when it looks again.
    pub(crate) fn peek_send(
        &mut self,
        out: &mut SendRequest<QpSge>,
    ) -> core::result::Result<bool, Completion> {
        let slot = ring_slot(self.sq_get, self.num_sqe);
        let at = slot as usize * SQE_SIZE;
        let valid = self
            .sq
            .load_u16(at + siw_abi_entries::FLAGS_OFFSET)
            .is_ok_and(|f| f & siw_abi_entries::VALID != 0);
        if !valid {
            return Ok(false);
        }
        // The entry's content is read after its flag (`smp_rmb`).
        fence(Ordering::Acquire);
        let mut head = [0u8; SQE_HEAD];
        let read = self.sq.read(at, &mut head);
        let len = siw_abi_entries::sqe_len(&head);
        let decoded = if len > SQE_HEAD && read.is_ok() {
            let (whole, read) = whole_entry::<SQE_HEAD, SQE_SIZE>(&self.sq, at, head, len);
            self.decode_send(slot, &whole, read, out)
        } else {
            self.decode_send(slot, &head, read, out)
        };
        match decoded {
            Ok(()) => Ok(true),
            Err((status, wr_id)) => {
                self.pop_send();
                Err(Completion {
                    wr_id,
                    status,
                    opcode: WcOpcode::Send,
                    byte_len: 0,
                    imm: None,
                    invalidated: None,
                    solicited: false,
                })
            }
        }
    }

    /// Decodes the copy `raw` of send queue entry `slot` (at least its first
    /// [`siw_abi_entries::sqe_len`] bytes; `read` says whether copying them worked) into `out`, its
    /// inline data into the slot's room in the inline buffer; the status and work request
    /// identifier of its error completion if it is malformed.
    #[inline(always)]
    fn decode_send(
        &mut self,
        slot: u32,
        raw: &[u8],
        read: Result,
        out: &mut SendRequest<QpSge>,
    ) -> core::result::Result<(), (WcStatus, u64)> {
        let bad = |status| (status, siw_abi_entries::entry_id(raw));
        read.map_err(|_| bad(WcStatus::GeneralErr))?;
        let data = siw_abi_entries::decode_sqe_into(raw, self.signal_all, out)
            .map_err(|e| bad(e.status()))?;
        match data {
            Some(range) => {
                let data = raw.get(range).unwrap_or(&[]);
                let base = slot as usize * siw_abi_entries::MAX_INLINE;
                let Some(room) = self.inline.get_mut(base..base + data.len()) else {
                    // The QP was created without inline data.
                    return Err(bad(WcStatus::LocQpOpErr));
                };
                room.copy_from_slice(data);
                out.sges = SgeList::single(QpSge::Decoded(Sge {
                    addr: base as u64,
                    length: data.len() as u32,
                    lkey: INLINE_LKEY,
                }));
            }
            None => {
                if out.sges.as_slice().iter().any(|s| s.lkey() == INLINE_LKEY) {
                    return Err(bad(WcStatus::LocProtErr));
                }
            }
        }
        Ok(())
    }

    /// The engine took the entry [`Self::peek_send`] returned: release it to the process.
    pub(crate) fn pop_send(&mut self) {
        let at = ring_slot(self.sq_get, self.num_sqe) as usize * SQE_SIZE;
        let _ = self.sq.store_u16(at + siw_abi_entries::FLAGS_OFFSET, 0);
        // `smp_store_mb`: the release is visible before the next entry's flag is read.
        fence(Ordering::SeqCst);
        self.sq_get = self.sq_get.wrapping_add(1);
    }

    /// Takes the next receive queue entry into `out` (decoded there, in place), if the process
    /// posted one. A malformed entry is taken and its error completion returned.
    pub(crate) fn pop_recv(
        &mut self,
        out: &mut RecvRequest<QpSge>,
    ) -> core::result::Result<bool, Completion> {
        let r = &mut self.recv;
        let Some(rq) = r.rq.as_ref() else {
            return Ok(false);
        };
        take_rqe(rq, r.num_rqe, &mut r.rq_get, out)
    }

    /// The inline data `sge` (with [`INLINE_LKEY`]) stands for, from `offset` on, `len` bytes.
    pub(crate) fn inline_data(&self, sge: &QpSge, offset: u32, len: usize) -> Option<&[u8]> {
        if offset as usize + len > sge.length() as usize {
            return None;
        }
        let start = usize::try_from(sge.addr())
            .ok()?
            .checked_add(offset as usize)?;
        self.inline.get(start..start.checked_add(len)?)
    }
}

/// Takes the receive queue entry `*get` of the ring `rq` of `num` entries into `out`, if the
/// process posted it (`Ok(true)`), releases it and advances `*get`. A malformed entry is taken
/// and its error completion returned.
#[inline]
pub(crate) fn take_rqe(
    rq: &UserMapping,
    num: u32,
    get: &mut u32,
    out: &mut RecvRequest<QpSge>,
) -> core::result::Result<bool, Completion> {
    let at = ring_slot(*get, num) as usize * RQE_SIZE;
    if !rqe_posted(rq, num, *get) {
        return Ok(false);
    }
    // The entry's content is read after its flag (`smp_rmb`).
    fence(Ordering::Acquire);
    let mut head = [0u8; RQE_HEAD];
    let read = rq.read(at, &mut head);
    let len = siw_abi_entries::rqe_len(&head);
    let decoded = if len > RQE_HEAD && read.is_ok() {
        let (whole, read) = whole_entry::<RQE_HEAD, RQE_SIZE>(rq, at, head, len);
        decode_recv(&whole, read, out)
    } else {
        decode_recv(&head, read, out)
    };
    let _ = rq.store_u16(at + siw_abi_entries::FLAGS_OFFSET, 0);
    *get = get.wrapping_add(1);
    match decoded {
        Ok(()) => Ok(true),
        Err((status, wr_id)) => Err(Completion {
            wr_id,
            status,
            opcode: WcOpcode::Recv,
            byte_len: 0,
            imm: None,
            invalidated: None,
            solicited: false,
        }),
    }
}

/// Decodes the copy `raw` of a receive queue entry (at least its first
/// [`siw_abi_entries::rqe_len`] bytes; `read` says whether copying them worked) into `out`; the
/// status and work request identifier of its error completion if it is malformed.
#[inline(always)]
fn decode_recv(
    raw: &[u8],
    read: Result,
    out: &mut RecvRequest<QpSge>,
) -> core::result::Result<(), (WcStatus, u64)> {
    read.map_err(|_| WcStatus::GeneralErr)
        .and_then(|()| siw_abi_entries::decode_rqe_into(raw, out).map_err(|e| e.status()))
        .map_err(|status| (status, siw_abi_entries::entry_id(raw)))
}

/// The whole queue entry at `at` of `ring` of `SIZE` bytes, whose first `HEAD` bytes `head`
/// holds already, with as much more as counts (`len` bytes; the rest zeros, see the module
/// documentation of `siw_abi_entries`); also whether copying worked. Entries all in their head (one
/// SGE) need not be copied again: their decoders take the head alone.
#[inline(always)]
fn whole_entry<const HEAD: usize, const SIZE: usize>(
    ring: &UserMapping,
    at: usize,
    head: [u8; HEAD],
    len: usize,
) -> ([u8; SIZE], Result) {
    let mut whole = [0u8; SIZE];
    let read = match whole.split_first_chunk_mut::<HEAD>() {
        Some((first, rest)) => {
            *first = head;
            let rest = rest.get_mut(..len.saturating_sub(HEAD)).unwrap_or(&mut []);
            ring.read(at + HEAD, rest)
        }
        None => Err(EINVAL),
    };
    (whole, read)
}

/// Whether the receive queue entry `index` of the ring `rq` of `num` entries is posted.
pub(crate) fn rqe_posted(rq: &UserMapping, num: u32, index: u32) -> bool {
    let at = ring_slot(index, num) as usize * RQE_SIZE;
    rq.load_u16(at + siw_abi_entries::FLAGS_OFFSET)
        .is_ok_and(|f| f & siw_abi_entries::VALID != 0)
}

/// The slot of entry `index` in a ring of `num` entries. Rings are created with a power of two
/// entries, as the C siw's are, so this is a mask. It stays below `num` whatever `num` is, and
/// an empty ring has no slot at all (the access fails).
pub(crate) fn ring_slot(index: u32, num: u32) -> u32 {
    index & num.wrapping_sub(1)
}
