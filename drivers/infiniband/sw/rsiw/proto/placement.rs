// SPDX-License-Identifier: GPL-2.0

//! Receive-side placement checks: may this segment's payload be written, and
//! where?
//!
//! Every payload byte a peer sends is written straight into memory it named,
//! either a tagged buffer (STag + tagged offset, RDMA Write and Read Response;
//! also the source of a Read Request and the target word of an RFC 7306
//! atomic) or the next untagged buffer of a queue (QN + MSN + MO, the Send
//! family on queue 0, Read and Atomic Requests on queue 1, Terminate on
//! queue 2, Atomic Responses on queue 3). These checks are the whole of the
//! RNIC's memory protection, so they are kept here as pure functions over a
//! description of the local state, tested on the host against every error
//! arm, instead of being spread over the driver's receive path.
//!
//! Each check returns the offset to place at, or the [`TermError`] to report.
//! The layer follows who owns the check: DDP validates the STag and range of
//! a segment it places (RDMA Write, Read Response: DDP tagged buffer errors),
//! RDMAP validates the buffers it reads or modifies itself (Read Request
//! source, atomic target: RDMAP remote protection errors). Access rights are
//! an RDMAP notion with no DDP error code, so a missing right is always
//! RDMAP "access rights violation" (the C siw reports DDP "invalid STag"
//! for a write without remote write access instead).
//!
//! Zero-length tagged segments are not validated: they place nothing, and a
//! zero-length RDMA Write or Read is what RFC 6581 uses as a ready-to-receive
//! indication, typically with an STag that names no buffer at all.

use core::ops::BitOr;

use super::atomic::{self, AtomicRequestHeader};
use super::ddp::{QueueNumber, TaggedHeader, UntaggedHeader};
use super::rdmap::ReadRequestHeader;
use super::term_error::TermError;

/// Access rights of a memory region, with the bit values of the kernel's
/// `enum ib_access_flags` so that an MR's flags pass through unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AccessFlags(u32);

impl AccessFlags {
    /// No access.
    pub const NONE: Self = Self(0);
    /// `IB_ACCESS_LOCAL_WRITE`.
    pub const LOCAL_WRITE: Self = Self(1);
    /// `IB_ACCESS_REMOTE_WRITE`.
    pub const REMOTE_WRITE: Self = Self(2);
    /// `IB_ACCESS_REMOTE_READ`.
    pub const REMOTE_READ: Self = Self(4);
    /// `IB_ACCESS_REMOTE_ATOMIC`.
    pub const REMOTE_ATOMIC: Self = Self(8);

    const MASK: u32 = 0xF;

    /// The rights among `bits` (an `ib_access_flags` value) that placement
    /// cares about; other flags are dropped.
    pub const fn from_ib(bits: u32) -> Self {
        Self(bits & Self::MASK)
    }

    /// The flags as an `ib_access_flags` value.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Both sets of rights.
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Whether every right in `other` is granted.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for AccessFlags {
    type Output = Self;

    fn bitor(self, other: Self) -> Self {
        self.union(other)
    }
}

/// Whether an STag may currently be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StagState {
    /// Registered (or fast-registered) and not invalidated.
    Valid,
    /// Invalidated, locally or by a Send with Invalidate, or not yet
    /// registered.
    Invalid,
}

/// What placement needs to know about the memory region an STag names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryRegion {
    /// The region's full STag (index and key); a lookup by index that finds
    /// a region with another key means the peer used a stale STag.
    pub stag: u32,
    /// Whether the STag is valid.
    pub state: StagState,
    /// The protection domain the region belongs to.
    pub pd: u32,
    /// The rights the region grants.
    pub access: AccessFlags,
    /// The I/O virtual address of the region's first byte.
    pub base: u64,
    /// Length of the region in bytes.
    pub len: u64,
    /// Whether tagged offsets count from the region's start (zero-based)
    /// rather than being virtual addresses.
    pub zero_based: bool,
    /// The region's registration: it changes whenever the region is
    /// registered, invalidated or deregistered, so that an access allowed
    /// against one registration is refused against the next, even under the
    /// same STag with the same bounds ([`Grant::recheck`]).
    pub epoch: u64,
}

/// Why a tagged buffer is accessed, which fixes the right it needs and the
/// layer that reports a violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaggedUse {
    /// Placing an RDMA Write segment (needs remote write; DDP errors).
    RdmaWrite,
    /// Placing a Read Response segment into the requester's own buffer
    /// (needs local write, as the sink is a local SGE whose lkey travelled as
    /// the sink STag; DDP errors).
    ReadResponse,
    /// Reading the source of an RDMA Read Request (needs remote read;
    /// RDMAP errors).
    ReadSource,
    /// Modifying the target word of an Atomic Request (needs remote atomic;
    /// RDMAP errors, and the word must be 64-bit aligned).
    AtomicTarget,
}

impl TaggedUse {
    /// The right the region must grant.
    pub const fn required_access(self) -> AccessFlags {
        match self {
            Self::RdmaWrite => AccessFlags::REMOTE_WRITE,
            Self::ReadResponse => AccessFlags::LOCAL_WRITE,
            Self::ReadSource => AccessFlags::REMOTE_READ,
            Self::AtomicTarget => AccessFlags::REMOTE_ATOMIC,
        }
    }

    /// Whether RDMAP rather than DDP validates the buffer.
    pub const fn checked_by_rdmap(self) -> bool {
        matches!(self, Self::ReadSource | Self::AtomicTarget)
    }

    const fn invalid_stag(self) -> TermError {
        if self.checked_by_rdmap() {
            TermError::RdmapInvalidStag
        } else {
            TermError::DdpInvalidStag
        }
    }

    const fn not_associated(self) -> TermError {
        if self.checked_by_rdmap() {
            TermError::RdmapStagNotAssociated
        } else {
            TermError::DdpStagNotAssociated
        }
    }

    const fn base_bounds(self) -> TermError {
        if self.checked_by_rdmap() {
            TermError::RdmapBaseBounds
        } else {
            TermError::DdpBaseBounds
        }
    }

    const fn to_wrap(self) -> TermError {
        if self.checked_by_rdmap() {
            TermError::RdmapToWrap
        } else {
            TermError::DdpToWrap
        }
    }
}

/// One access to a tagged buffer, as named on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaggedAccess {
    /// What the access is for.
    pub usage: TaggedUse,
    /// The STag from the wire.
    pub stag: u32,
    /// The tagged offset from the wire.
    pub tagged_offset: u64,
    /// Bytes accessed.
    pub len: u64,
}

/// Bytes an atomic operation reads and writes.
const ATOMIC_OPERAND_LEN: u64 = 8;

impl TaggedAccess {
    /// Placing `payload_len` bytes of a tagged segment: an RDMA Write, or a
    /// Read Response when `usage` says so.
    pub fn segment(usage: TaggedUse, header: &TaggedHeader, payload_len: usize) -> Self {
        Self {
            usage,
            stag: header.stag,
            tagged_offset: header.tagged_offset,
            len: u64::try_from(payload_len).unwrap_or(u64::MAX),
        }
    }

    /// Reading the source buffer of an RDMA Read Request.
    pub fn read_source(header: &ReadRequestHeader) -> Self {
        Self {
            usage: TaggedUse::ReadSource,
            stag: header.source_stag,
            tagged_offset: header.source_tagged_offset,
            len: u64::from(header.read_size),
        }
    }

    /// Modifying the target word of an Atomic Request.
    pub fn atomic_target(header: &AtomicRequestHeader) -> Self {
        Self {
            usage: TaggedUse::AtomicTarget,
            stag: header.remote_stag,
            tagged_offset: header.remote_tagged_offset,
            len: ATOMIC_OPERAND_LEN,
        }
    }
}

/// Validates `access` against `region`, the region its STag's index names
/// (`None` if no region has that index), for a QP in protection domain
/// `qp_pd`. Returns the byte offset of the access from the region's start.
///
/// The checks run in the order of siw's `siw_check_mem()`: STag (known,
/// same key, valid), protection domain, access rights, then the range, where
/// a TO + length that wraps 2^64 is reported as such before the bounds; for
/// atomics then the 64-bit alignment of the target (RFC 7306 section 8.2).
pub fn check_tagged(
    region: Option<&MemoryRegion>,
    qp_pd: u32,
    access: &TaggedAccess,
) -> Result<u64, TermError> {
    let usage = access.usage;
    if access.len == 0 {
        return Ok(0);
    }
    let region = match region {
        Some(r) if r.stag == access.stag && r.state == StagState::Valid => r,
        _ => return Err(usage.invalid_stag()),
    };
    if region.pd != qp_pd {
        return Err(usage.not_associated());
    }
    if !region.access.contains(usage.required_access()) {
        return Err(TermError::RdmapAccessRights);
    }
    if access.tagged_offset.checked_add(access.len).is_none() {
        return Err(usage.to_wrap());
    }
    let offset = if region.zero_based {
        access.tagged_offset
    } else {
        access
            .tagged_offset
            .checked_sub(region.base)
            .ok_or(usage.base_bounds())?
    };
    match offset.checked_add(access.len) {
        Some(end) if end <= region.len => {}
        _ => return Err(usage.base_bounds()),
    }
    if usage == TaggedUse::AtomicTarget {
        let address = region.base.checked_add(offset).ok_or(usage.base_bounds())?;
        atomic::check_alignment(address).map_err(|e| e.term())?;
    }
    Ok(offset)
}

/// A tagged access the checks allowed, as the engine hands it to the driver
/// to perform: the access (its bytes may be fewer than those checked, see
/// [`Self::narrow`]) and the registration of the region it was allowed
/// against.
///
/// Payload that arrives in pieces, a Read Response that streams out while the
/// peer's window opens and closes, and a queued atomic are performed later
/// than their header was checked, and the consumer may invalidate, re-map or
/// deregister the region in between. The driver therefore re-checks every
/// access with [`Self::recheck`] under the region's lock, the lock that also
/// covers the memory access itself: what is checked is what is accessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The access: use (and so the right), STag, tagged offset and length.
    pub access: TaggedAccess,
    /// [`MemoryRegion::epoch`] of the region when the access was allowed.
    pub epoch: u64,
}

impl Grant {
    /// The grant of bytes `at..at + len` of this one (`None` if they are
    /// not all inside it).
    pub fn narrow(&self, at: u64, len: u64) -> Option<Self> {
        let end = at.checked_add(len)?;
        if end > self.access.len {
            return None;
        }
        Some(Self {
            access: TaggedAccess {
                tagged_offset: self.access.tagged_offset.checked_add(at)?,
                len,
                ..self.access
            },
            epoch: self.epoch,
        })
    }

    /// Checks the access again against `region` as it is now (`None` if its
    /// STag's index names no region): every check of [`check_tagged`], and
    /// the same registration as when it was allowed. Returns the byte offset
    /// from the region's start; a region registered anew since reports the
    /// access's "invalid STag" error.
    pub fn recheck(&self, region: Option<&MemoryRegion>, qp_pd: u32) -> Result<u64, TermError> {
        let usage = self.access.usage;
        if self.access.len == 0 {
            return Ok(0);
        }
        match region {
            Some(r) if r.epoch == self.epoch => check_tagged(Some(r), qp_pd, &self.access),
            _ => Err(usage.invalid_stag()),
        }
    }
}

/// [`check_tagged`], and on success the [`Grant`] to perform the access with.
pub fn grant_tagged(
    region: Option<&MemoryRegion>,
    qp_pd: u32,
    access: &TaggedAccess,
) -> Result<Grant, TermError> {
    check_tagged(region, qp_pd, access)?;
    Ok(Grant {
        access: *access,
        epoch: region.map_or(0, |r| r.epoch),
    })
}

/// The placement-relevant fields of one untagged segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UntaggedSegment {
    /// Queue number from the wire.
    pub queue_number: u32,
    /// Message sequence number from the wire.
    pub msn: u32,
    /// Message offset from the wire.
    pub message_offset: u32,
    /// The L flag: last segment of the message.
    pub last: bool,
    /// Payload bytes after all headers.
    pub payload_len: usize,
}

impl UntaggedSegment {
    /// The segment described by `header` carrying `payload_len` bytes.
    pub const fn new(header: &UntaggedHeader, payload_len: usize) -> Self {
        Self {
            queue_number: header.queue_number,
            msn: header.msn,
            message_offset: header.message_offset,
            last: header.control.last,
            payload_len,
        }
    }
}

/// Where an accepted untagged segment goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UntaggedPlacement {
    /// The message the segment belongs to.
    pub msn: u32,
    /// Offset into the bound buffer to place the payload at.
    pub offset: u32,
    /// Set on the last segment: the message is complete and this long. The
    /// buffer has been consumed and the queue expects the next MSN.
    pub message_len: Option<u32>,
}

/// Receive state of one untagged queue of one DDP stream.
///
/// MSNs start at 1 and count messages modulo 2^32; within a message the
/// segments arrive in order over TCP, so each one must continue exactly where
/// the previous one ended. A buffer is bound to the message in progress: for
/// queue 0 the driver binds the next receive WQE (its total SGE length) when
/// [`UntaggedQueue::needs_buffer`] says so; the RDMAP queues 1 to 3 carry
/// header-only messages whose credits are accounted elsewhere (IRD/ORD, one
/// TERMINATE) and always have an empty buffer bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UntaggedQueue {
    queue: QueueNumber,
    expected_msn: u32,
    message_offset: u32,
    buffer: Option<u64>,
    header_only: bool,
}

impl UntaggedQueue {
    /// The MSN of the first message on every queue.
    pub const FIRST_MSN: u32 = 1;

    /// A queue whose buffers the consumer posts (queue 0).
    pub const fn with_posted_buffers(queue: QueueNumber) -> Self {
        Self {
            queue,
            expected_msn: Self::FIRST_MSN,
            message_offset: 0,
            buffer: None,
            header_only: false,
        }
    }

    /// A queue of header-only messages consumed by RDMAP itself (queues 1
    /// to 3).
    pub const fn header_only(queue: QueueNumber) -> Self {
        Self {
            queue,
            expected_msn: Self::FIRST_MSN,
            message_offset: 0,
            buffer: Some(0),
            header_only: true,
        }
    }

    /// The queue number.
    pub const fn queue(&self) -> QueueNumber {
        self.queue
    }

    /// The MSN of the message in progress or of the next one.
    pub const fn expected_msn(&self) -> u32 {
        self.expected_msn
    }

    /// Bytes of the message in progress placed so far: the MO the next
    /// segment must carry.
    pub const fn message_offset(&self) -> u32 {
        self.message_offset
    }

    /// Length of the bound buffer, if one is bound.
    pub const fn buffer_len(&self) -> Option<u64> {
        self.buffer
    }

    /// Whether a buffer must be bound before the next segment can be placed.
    pub const fn needs_buffer(&self) -> bool {
        self.buffer.is_none()
    }

    /// Binds a receive buffer of `len` bytes to the next message. Returns
    /// `false`, changing nothing, if a buffer is already bound.
    pub fn bind_buffer(&mut self, len: u64) -> bool {
        if self.buffer.is_some() {
            return false;
        }
        self.buffer = Some(len);
        true
    }

    /// Counts one whole message as received without placing anything: the
    /// RFC 6581 ready-to-receive message that connection setup consumed
    /// before the stream was handed over (a zero-length Send takes MSN 1 of
    /// queue 0 and no receive buffer, a zero-length Read Request MSN 1 of
    /// queue 1). The next message must carry the following MSN. Returns
    /// `false`, changing nothing, while a message is in progress (a segment
    /// of it placed, or a receive buffer bound to it).
    pub fn skip_message(&mut self) -> bool {
        let idle = self.message_offset == 0 && (self.header_only || self.buffer.is_none());
        if idle {
            self.expected_msn = self.expected_msn.wrapping_add(1);
        }
        idle
    }

    /// Validates `segment` and, if it may be placed, advances the queue past
    /// it. On error the queue is unchanged; the stream is then terminated.
    ///
    /// The checks, in order, and their DDP untagged buffer errors: the queue
    /// number (invalid QN), the MSN, which over an in-order stream must be
    /// the expected one (MSN range not valid), a bound buffer (invalid MSN,
    /// no buffer available), the MO (invalid MO), and the end of the
    /// segment against the buffer (message too long).
    #[inline]
    pub fn place(&mut self, segment: &UntaggedSegment) -> Result<UntaggedPlacement, TermError> {
        if segment.queue_number != self.queue as u32 {
            return Err(TermError::DdpInvalidQn);
        }
        if segment.msn != self.expected_msn {
            return Err(TermError::DdpMsnRange);
        }
        let buffer = self.buffer.ok_or(TermError::DdpMsnNoBuffer)?;
        if segment.message_offset != self.message_offset {
            return Err(TermError::DdpInvalidMo);
        }
        let end = u32::try_from(segment.payload_len)
            .ok()
            .and_then(|len| segment.message_offset.checked_add(len))
            .filter(|&end| u64::from(end) <= buffer)
            .ok_or(TermError::DdpMessageTooLong)?;
        let placement = UntaggedPlacement {
            msn: segment.msn,
            offset: segment.message_offset,
            message_len: segment.last.then_some(end),
        };
        if segment.last {
            self.expected_msn = self.expected_msn.wrapping_add(1);
            self.message_offset = 0;
            self.buffer = if self.header_only { Some(0) } else { None };
        } else {
            self.message_offset = end;
        }
        Ok(placement)
    }
}

/// The four untagged queues of one DDP stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UntaggedQueues {
    /// Queue 0: Send family and Immediate Data, into posted receive buffers.
    pub send: UntaggedQueue,
    /// Queue 1: RDMA Read and Atomic Requests.
    pub read_request: UntaggedQueue,
    /// Queue 2: Terminate.
    pub terminate: UntaggedQueue,
    /// Queue 3: Atomic Responses.
    pub atomic_response: UntaggedQueue,
}

impl Default for UntaggedQueues {
    fn default() -> Self {
        Self::new()
    }
}

impl UntaggedQueues {
    /// The queues of a new stream.
    pub const fn new() -> Self {
        Self {
            send: UntaggedQueue::with_posted_buffers(QueueNumber::Send),
            read_request: UntaggedQueue::header_only(QueueNumber::ReadRequest),
            terminate: UntaggedQueue::header_only(QueueNumber::Terminate),
            atomic_response: UntaggedQueue::header_only(QueueNumber::AtomicResponse),
        }
    }

    /// The queue a wire QN names, or the invalid-QN error.
    pub fn get_mut(&mut self, queue_number: u32) -> Result<&mut UntaggedQueue, TermError> {
        match QueueNumber::from_u32(queue_number) {
            Some(QueueNumber::Send) => Ok(&mut self.send),
            Some(QueueNumber::ReadRequest) => Ok(&mut self.read_request),
            Some(QueueNumber::Terminate) => Ok(&mut self.terminate),
            Some(QueueNumber::AtomicResponse) => Ok(&mut self.atomic_response),
            None => Err(TermError::DdpInvalidQn),
        }
    }

    /// Places `segment` on the queue it names.
    pub fn place(&mut self, segment: &UntaggedSegment) -> Result<UntaggedPlacement, TermError> {
        self.get_mut(segment.queue_number)?.place(segment)
    }
}
