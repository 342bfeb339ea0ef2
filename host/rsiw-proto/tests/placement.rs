// SPDX-License-Identifier: GPL-2.0

//! Placement checks: every tagged and untagged error arm with its layer,
//! offsets for VA-based and zero-based regions, MSN/MO tracking, and
//! properties against a reference model.

use proptest::prelude::*;
use rsiw_proto::proto::atomic::AtomicRequestHeader;
use rsiw_proto::proto::ddp::{DdpHeader, QueueNumber};
use rsiw_proto::proto::placement::*;
use rsiw_proto::proto::rdmap::{tagged_header, untagged_header, Opcode, ReadRequestHeader};
use rsiw_proto::proto::terminate::{Layer, TermError};

const PD: u32 = 7;
const STAG: u32 = 0x0000_1234;

fn region() -> MemoryRegion {
    MemoryRegion {
        stag: STAG,
        state: StagState::Valid,
        pd: PD,
        access: AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC,
        base: 0x1000,
        len: 0x100,
        zero_based: false,
        epoch: 7,
    }
}

fn access(usage: TaggedUse, tagged_offset: u64, len: u64) -> TaggedAccess {
    TaggedAccess {
        usage,
        stag: STAG,
        tagged_offset,
        len,
    }
}

const USES: [TaggedUse; 4] = [
    TaggedUse::RdmaWrite,
    TaggedUse::ReadResponse,
    TaggedUse::ReadSource,
    TaggedUse::AtomicTarget,
];

#[test]
fn access_flags_match_ib_values() {
    assert_eq!(AccessFlags::LOCAL_WRITE.bits(), 1);
    assert_eq!(AccessFlags::REMOTE_WRITE.bits(), 2);
    assert_eq!(AccessFlags::REMOTE_READ.bits(), 4);
    assert_eq!(AccessFlags::REMOTE_ATOMIC.bits(), 8);
    // IB_ACCESS_MW_BIND (0x10) and above are not placement rights.
    assert_eq!(AccessFlags::from_ib(0x1F), AccessFlags::from_ib(0xF));
    let rw = AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE;
    assert!(rw.contains(AccessFlags::REMOTE_READ));
    assert!(!rw.contains(AccessFlags::REMOTE_ATOMIC));
    assert!(rw.contains(AccessFlags::NONE));
}

#[test]
fn va_based_offsets() {
    let r = region();
    for usage in USES {
        assert_eq!(check_tagged(Some(&r), PD, &access(usage, 0x1000, 8)), Ok(0));
        assert_eq!(
            check_tagged(Some(&r), PD, &access(usage, 0x10F8, 8)),
            Ok(0xF8)
        );
    }
    // The whole region in one access.
    assert_eq!(
        check_tagged(Some(&r), PD, &access(TaggedUse::RdmaWrite, 0x1000, 0x100)),
        Ok(0)
    );
}

#[test]
fn zero_based_offsets() {
    let r = MemoryRegion {
        zero_based: true,
        ..region()
    };
    assert_eq!(
        check_tagged(Some(&r), PD, &access(TaggedUse::RdmaWrite, 0x10, 0xF0)),
        Ok(0x10)
    );
    assert_eq!(
        check_tagged(Some(&r), PD, &access(TaggedUse::RdmaWrite, 0x10, 0xF1)),
        Err(TermError::DdpBaseBounds)
    );
    // A VA that would be valid for a VA-based region is out of bounds here.
    assert_eq!(
        check_tagged(Some(&r), PD, &access(TaggedUse::ReadSource, 0x1000, 1)),
        Err(TermError::RdmapBaseBounds)
    );
}

/// (DDP users, RDMAP users) error for each failure.
fn expect(usage: TaggedUse, ddp: TermError, rdmap: TermError) -> TermError {
    if usage.checked_by_rdmap() {
        rdmap
    } else {
        ddp
    }
}

#[test]
fn error_arms_and_layers() {
    let r = region();
    for usage in USES {
        let a = access(usage, 0x1000, 8);
        let invalid = expect(
            usage,
            TermError::DdpInvalidStag,
            TermError::RdmapInvalidStag,
        );
        // Unknown STag index.
        assert_eq!(check_tagged(None, PD, &a), Err(invalid));
        // Same index, other key.
        let rekeyed = MemoryRegion {
            stag: STAG ^ 0xFF,
            ..r
        };
        assert_eq!(check_tagged(Some(&rekeyed), PD, &a), Err(invalid));
        // Invalidated.
        let invalidated = MemoryRegion {
            state: StagState::Invalid,
            ..r
        };
        assert_eq!(check_tagged(Some(&invalidated), PD, &a), Err(invalid));
        // Other protection domain.
        assert_eq!(
            check_tagged(Some(&r), PD + 1, &a),
            Err(expect(
                usage,
                TermError::DdpStagNotAssociated,
                TermError::RdmapStagNotAssociated
            ))
        );
        // Missing right: always the RDMAP code.
        let lacking = MemoryRegion {
            access: AccessFlags::from_ib(0xF & !usage.required_access().bits()),
            ..r
        };
        assert_eq!(
            check_tagged(Some(&lacking), PD, &a),
            Err(TermError::RdmapAccessRights)
        );
        // Below the base, past the end.
        let bounds = expect(usage, TermError::DdpBaseBounds, TermError::RdmapBaseBounds);
        assert_eq!(
            check_tagged(Some(&r), PD, &access(usage, 0xFF8, 8)),
            Err(bounds)
        );
        assert_eq!(
            check_tagged(Some(&r), PD, &access(usage, 0x10F9, 8)),
            Err(bounds)
        );
        // TO + length wraps 2^64.
        assert_eq!(
            check_tagged(Some(&r), PD, &access(usage, u64::MAX - 3, 8)),
            Err(expect(usage, TermError::DdpToWrap, TermError::RdmapToWrap))
        );
    }
}

#[test]
fn layers_are_as_documented() {
    for usage in USES {
        let e = check_tagged(None, PD, &access(usage, 0, 1)).unwrap_err();
        let layer = if usage.checked_by_rdmap() {
            Layer::Rdmap
        } else {
            Layer::Ddp
        };
        assert_eq!(e.layer(), layer);
        assert_eq!(e.error_type(), 1);
    }
}

#[test]
fn check_order_follows_siw_check_mem() {
    // Everything wrong at once: the STag is reported.
    let bad = MemoryRegion {
        state: StagState::Invalid,
        pd: PD + 1,
        access: AccessFlags::NONE,
        ..region()
    };
    let a = access(TaggedUse::RdmaWrite, u64::MAX, 2);
    assert_eq!(
        check_tagged(Some(&bad), PD, &a),
        Err(TermError::DdpInvalidStag)
    );
    let bad = MemoryRegion {
        state: StagState::Valid,
        ..bad
    };
    assert_eq!(
        check_tagged(Some(&bad), PD, &a),
        Err(TermError::DdpStagNotAssociated)
    );
    let bad = MemoryRegion { pd: PD, ..bad };
    assert_eq!(
        check_tagged(Some(&bad), PD, &a),
        Err(TermError::RdmapAccessRights)
    );
    let bad = MemoryRegion {
        access: AccessFlags::REMOTE_WRITE,
        ..bad
    };
    assert_eq!(check_tagged(Some(&bad), PD, &a), Err(TermError::DdpToWrap));
}

#[test]
fn zero_length_is_not_validated() {
    for usage in USES {
        assert_eq!(check_tagged(None, PD, &access(usage, u64::MAX, 0)), Ok(0));
    }
}

#[test]
fn atomic_target_must_be_aligned() {
    let r = region();
    assert_eq!(
        check_tagged(Some(&r), PD, &access(TaggedUse::AtomicTarget, 0x1004, 8)),
        Err(TermError::RdmapCatastrophicStream)
    );
    // Zero-based: the resolved address counts, not the TO.
    let z = MemoryRegion {
        base: 0x1004,
        zero_based: true,
        ..r
    };
    assert_eq!(
        check_tagged(Some(&z), PD, &access(TaggedUse::AtomicTarget, 4, 8)),
        Ok(4)
    );
    assert_eq!(
        check_tagged(Some(&z), PD, &access(TaggedUse::AtomicTarget, 0, 8)),
        Err(TermError::RdmapCatastrophicStream)
    );
    // Protection errors come first.
    assert_eq!(
        check_tagged(Some(&r), PD, &access(TaggedUse::AtomicTarget, 0x10FC, 8)),
        Err(TermError::RdmapBaseBounds)
    );
}

#[test]
fn accesses_from_headers() {
    let DdpHeader::Tagged(h) = tagged_header(Opcode::RdmaWrite, false, STAG, 0x1010) else {
        panic!()
    };
    let a = TaggedAccess::segment(TaggedUse::RdmaWrite, &h, 16);
    assert_eq!(a, access(TaggedUse::RdmaWrite, 0x1010, 16));
    assert_eq!(check_tagged(Some(&region()), PD, &a), Ok(0x10));

    let rr = ReadRequestHeader {
        sink_stag: 1,
        sink_tagged_offset: 2,
        read_size: 0x20,
        source_stag: STAG,
        source_tagged_offset: 0x1020,
    };
    assert_eq!(
        TaggedAccess::read_source(&rr),
        access(TaggedUse::ReadSource, 0x1020, 0x20)
    );

    let at = AtomicRequestHeader::fetch_add(9, STAG, 0x1040, 1, 0);
    let a = TaggedAccess::atomic_target(&at);
    assert_eq!(a, access(TaggedUse::AtomicTarget, 0x1040, 8));
    assert_eq!(check_tagged(Some(&region()), PD, &a), Ok(0x40));
}

fn seg(qn: u32, msn: u32, mo: u32, last: bool, len: usize) -> UntaggedSegment {
    UntaggedSegment {
        queue_number: qn,
        msn,
        message_offset: mo,
        last,
        payload_len: len,
    }
}

#[test]
fn send_queue_places_a_multi_segment_message() {
    let mut q = UntaggedQueue::with_posted_buffers(QueueNumber::Send);
    assert!(q.needs_buffer());
    assert!(q.bind_buffer(100));
    assert!(!q.bind_buffer(5));
    assert_eq!(q.buffer_len(), Some(100));
    let p = q.place(&seg(0, 1, 0, false, 40)).unwrap();
    assert_eq!((p.msn, p.offset, p.message_len), (1, 0, None));
    assert_eq!(q.message_offset(), 40);
    let p = q.place(&seg(0, 1, 40, true, 60)).unwrap();
    assert_eq!((p.msn, p.offset, p.message_len), (1, 40, Some(100)));
    assert_eq!((q.expected_msn(), q.message_offset()), (2, 0));
    assert!(q.needs_buffer());
}

#[test]
fn zero_length_send_consumes_a_buffer() {
    let mut q = UntaggedQueue::with_posted_buffers(QueueNumber::Send);
    assert_eq!(
        q.place(&seg(0, 1, 0, true, 0)),
        Err(TermError::DdpMsnNoBuffer)
    );
    q.bind_buffer(0);
    let p = q.place(&seg(0, 1, 0, true, 0)).unwrap();
    assert_eq!(p.message_len, Some(0));
    assert!(q.needs_buffer());
}

#[test]
fn untagged_error_arms() {
    let mut q = UntaggedQueue::with_posted_buffers(QueueNumber::Send);
    q.bind_buffer(50);
    let before = q;
    let cases = [
        (seg(1, 1, 0, true, 1), TermError::DdpInvalidQn),
        (seg(0, 2, 0, true, 1), TermError::DdpMsnRange),
        (seg(0, 0, 0, true, 1), TermError::DdpMsnRange),
        (seg(0, 1, 4, true, 1), TermError::DdpInvalidMo),
        (seg(0, 1, 0, true, 51), TermError::DdpMessageTooLong),
        (
            seg(0, 1, 0, true, u32::MAX as usize + 1),
            TermError::DdpMessageTooLong,
        ),
    ];
    for (s, e) in cases {
        assert_eq!(q.place(&s), Err(e), "{s:?}");
        assert_eq!(q, before, "state changed by {s:?}");
        assert_eq!((e.layer(), e.error_type()), (Layer::Ddp, 2));
    }
    q.place(&seg(0, 1, 0, false, 50)).unwrap();
    // Exactly full; one more byte is too long, even a zero-length last
    // segment still fits.
    assert_eq!(
        q.place(&seg(0, 1, 50, true, 1)),
        Err(TermError::DdpMessageTooLong)
    );
    assert_eq!(
        q.place(&seg(0, 1, 50, true, 0)).unwrap().message_len,
        Some(50)
    );
    // Next message, no buffer yet.
    assert_eq!(
        q.place(&seg(0, 2, 0, true, 1)),
        Err(TermError::DdpMsnNoBuffer)
    );
}

#[test]
fn mo_overflow_is_too_long() {
    let mut q = UntaggedQueue::with_posted_buffers(QueueNumber::Send);
    q.bind_buffer(u64::MAX);
    q.place(&seg(0, 1, 0, false, u32::MAX as usize)).unwrap();
    assert_eq!(
        q.place(&seg(0, 1, u32::MAX, true, 1)),
        Err(TermError::DdpMessageTooLong)
    );
}

#[test]
fn msn_counts_messages_per_queue() {
    let mut q = UntaggedQueue::header_only(QueueNumber::ReadRequest);
    assert_eq!(q.expected_msn(), UntaggedQueue::FIRST_MSN);
    for msn in 1..=3 {
        q.place(&seg(1, msn, 0, true, 0)).unwrap();
    }
    assert_eq!(q.expected_msn(), 4);
    // A repeated MSN is out of range.
    assert_eq!(q.place(&seg(1, 3, 0, true, 0)), Err(TermError::DdpMsnRange));
}

#[test]
fn header_only_queues_always_have_a_buffer() {
    let mut q = UntaggedQueue::header_only(QueueNumber::AtomicResponse);
    assert!(!q.needs_buffer());
    assert_eq!(q.buffer_len(), Some(0));
    for msn in 1..10 {
        q.place(&seg(3, msn, 0, true, 0)).unwrap();
        assert!(!q.needs_buffer());
    }
    assert_eq!(
        q.place(&seg(3, 10, 0, true, 1)),
        Err(TermError::DdpMessageTooLong)
    );
}

#[test]
fn queues_dispatch_by_qn() {
    let mut qs = UntaggedQueues::new();
    assert_eq!(qs, UntaggedQueues::default());
    assert_eq!(
        qs.place(&seg(4, 1, 0, true, 0)),
        Err(TermError::DdpInvalidQn)
    );
    assert_eq!(qs.get_mut(u32::MAX).unwrap_err(), TermError::DdpInvalidQn);
    for qn in 1..=3 {
        assert_eq!(qs.place(&seg(qn, 1, 0, true, 0)).unwrap().msn, 1);
    }
    assert_eq!(
        qs.place(&seg(0, 1, 0, true, 0)),
        Err(TermError::DdpMsnNoBuffer)
    );
    qs.get_mut(0).unwrap().bind_buffer(8);
    qs.place(&seg(0, 1, 0, true, 8)).unwrap();
    assert_eq!(qs.send.expected_msn(), 2);
    assert_eq!(qs.read_request.expected_msn(), 2);
    assert_eq!(qs.get_mut(2).unwrap().queue(), QueueNumber::Terminate);
}

#[test]
fn segment_from_header() {
    let DdpHeader::Untagged(h) = untagged_header(Opcode::Send, true, 0, 5, 77) else {
        panic!()
    };
    assert_eq!(UntaggedSegment::new(&h, 3), seg(0, 5, 77, true, 3));
}

/// Reference: the region as a set of byte addresses.
fn model(r: &MemoryRegion, pd: u32, a: &TaggedAccess) -> Result<u64, ()> {
    if a.len == 0 {
        return Ok(0);
    }
    let ok = r.stag == a.stag
        && r.state == StagState::Valid
        && r.pd == pd
        && r.access.contains(a.usage.required_access());
    let to = i128::from(a.tagged_offset);
    let start = if r.zero_based {
        to
    } else {
        to - i128::from(r.base)
    };
    let end = start + i128::from(a.len);
    let in_range =
        start >= 0 && end <= i128::from(r.len) && to + i128::from(a.len) <= i128::from(u64::MAX);
    let address = i128::from(r.base) + start;
    let aligned =
        a.usage != TaggedUse::AtomicTarget || (address <= i128::from(u64::MAX) && address % 8 == 0);
    if ok && in_range && aligned {
        Ok(start as u64)
    } else {
        Err(())
    }
}

fn arb_usage() -> impl Strategy<Value = TaggedUse> {
    prop::sample::select(USES.to_vec())
}

proptest! {
    /// `check_tagged` accepts exactly what the byte-set model accepts, and
    /// an accepted access lies inside the region.
    #[test]
    fn tagged_matches_model(base in prop_oneof![Just(0u64), any::<u64>(), 0u64..0x10000],
                            len in prop_oneof![any::<u64>(), 0u64..0x10000],
                            zero_based in any::<bool>(),
                            access_bits in 0u32..16,
                            usage in arb_usage(),
                            to_delta in prop_oneof![any::<u64>(), 0u64..0x20000],
                            alen in prop_oneof![0u64..0x100, any::<u64>()],
                            pd in 0u32..2, valid in any::<bool>()) {
        let r = MemoryRegion {
            stag: STAG,
            state: if valid { StagState::Valid } else { StagState::Invalid },
            pd: 0,
            access: AccessFlags::from_ib(access_bits),
            base,
            len,
            zero_based,
            epoch: 0,
        };
        let to = if zero_based { to_delta } else { base.wrapping_add(to_delta) };
        let a = access(usage, to, alen);
        let got = check_tagged(Some(&r), pd, &a);
        prop_assert_eq!(got.map_err(|_| ()), model(&r, pd, &a));
        if let Ok(off) = got {
            prop_assert!(alen == 0 || off.checked_add(alen).is_some_and(|e| e <= len));
        }
    }

    /// Any segmentation of a message into in-order segments is accepted
    /// and reassembles at consecutive offsets; the buffer bound is exact.
    #[test]
    fn untagged_segmentation(sizes in proptest::collection::vec(0usize..300, 1..10),
                             slack in 0u64..3, messages in 1usize..4) {
        let mut q = UntaggedQueue::with_posted_buffers(QueueNumber::Send);
        let total: usize = sizes.iter().sum();
        for m in 0..messages {
            let msn = m as u32 + 1;
            q.bind_buffer(total as u64 + slack);
            let mut mo = 0u32;
            for (i, &n) in sizes.iter().enumerate() {
                let last = i + 1 == sizes.len();
                let p = q.place(&seg(0, msn, mo, last, n)).unwrap();
                prop_assert_eq!(p.offset, mo);
                mo += n as u32;
                prop_assert_eq!(p.message_len, last.then_some(total as u32));
            }
        }
        prop_assert_eq!(q.expected_msn(), messages as u32 + 1);
        // One byte more than the buffer is refused.
        q.bind_buffer(total as u64);
        let r = q.place(&seg(0, messages as u32 + 1, 0, true, total + 1));
        prop_assert_eq!(r, Err(TermError::DdpMessageTooLong));
    }
}

#[test]
fn skip_message_counts_an_rtr_without_a_buffer() {
    // A zero-length Send RTR consumed by connection setup: MSN 1 is gone,
    // no buffer was bound.
    let mut q = UntaggedQueue::with_posted_buffers(QueueNumber::Send);
    assert!(q.skip_message());
    assert_eq!((q.expected_msn(), q.message_offset()), (2, 0));
    assert!(q.needs_buffer());
    assert_eq!(q.place(&seg(0, 1, 0, true, 0)), Err(TermError::DdpMsnRange));
    q.bind_buffer(10);
    // A message in progress (a buffer bound, then a segment placed) cannot
    // be skipped.
    assert!(!q.skip_message());
    q.place(&seg(0, 2, 0, false, 4)).unwrap();
    assert!(!q.skip_message());
    assert_eq!((q.expected_msn(), q.message_offset()), (2, 4));
    q.place(&seg(0, 2, 4, true, 6)).unwrap();
    assert_eq!(q.expected_msn(), 3);

    // A Read Request RTR on the header-only queue 1.
    let mut q = UntaggedQueue::header_only(QueueNumber::ReadRequest);
    assert!(q.skip_message());
    assert_eq!(q.expected_msn(), 2);
    assert_eq!(q.buffer_len(), Some(0));
    let p = q.place(&seg(1, 2, 0, true, 0)).unwrap();
    assert_eq!(p.msn, 2);
}

/// A grant passes its re-check while the region is what it was, and each change the consumer
/// can make in between (invalidation, registration anew under the same STag, deregistration,
/// another region at the index, rights or bounds that no longer cover it) refuses it.
#[test]
fn grant_recheck_refuses_every_change_since() {
    let r = region();
    let write = access(TaggedUse::RdmaWrite, 0x1010, 0x20);
    let grant = grant_tagged(Some(&r), PD, &write).unwrap();
    assert_eq!(grant.epoch, 7);
    assert_eq!(grant.recheck(Some(&r), PD), Ok(0x10));
    // Narrowed to the bytes at hand: the offset follows.
    let tail = grant.narrow(0x18, 8).unwrap();
    assert_eq!(tail.access.tagged_offset, 0x1028);
    assert_eq!(tail.recheck(Some(&r), PD), Ok(0x28));
    assert_eq!(grant.narrow(0x18, 9), None);
    assert_eq!(grant.narrow(u64::MAX, 2), None);

    let invalidated = MemoryRegion {
        state: StagState::Invalid,
        epoch: 8,
        ..r
    };
    assert_eq!(
        grant.recheck(Some(&invalidated), PD),
        Err(TermError::DdpInvalidStag)
    );
    // Registered anew under the very same STag, rights and bounds: another registration.
    let re_registered = MemoryRegion { epoch: 9, ..r };
    assert_eq!(
        grant.recheck(Some(&re_registered), PD),
        Err(TermError::DdpInvalidStag)
    );
    assert_eq!(grant.recheck(None, PD), Err(TermError::DdpInvalidStag));
    let other_pd = MemoryRegion { pd: PD + 1, ..r };
    assert_eq!(
        grant.recheck(Some(&other_pd), PD),
        Err(TermError::DdpStagNotAssociated)
    );
    let rekeyed = MemoryRegion {
        stag: STAG ^ 0xff,
        ..r
    };
    assert_eq!(
        grant.recheck(Some(&rekeyed), PD),
        Err(TermError::DdpInvalidStag)
    );
    let read_only = MemoryRegion {
        access: AccessFlags::REMOTE_READ,
        ..r
    };
    assert_eq!(
        grant.recheck(Some(&read_only), PD),
        Err(TermError::RdmapAccessRights)
    );
    let shorter = MemoryRegion { len: 0x20, ..r };
    assert_eq!(
        grant.recheck(Some(&shorter), PD),
        Err(TermError::DdpBaseBounds)
    );

    // A Read Response's source reports through RDMAP.
    let source = grant_tagged(Some(&r), PD, &access(TaggedUse::ReadSource, 0x1000, 0x100)).unwrap();
    assert_eq!(
        source.recheck(Some(&invalidated), PD),
        Err(TermError::RdmapInvalidStag)
    );
    // Nothing to access, nothing to check (an RTR's zero-length Read).
    let empty = grant_tagged(None, PD, &access(TaggedUse::ReadSource, 0, 0)).unwrap();
    assert_eq!(empty.recheck(None, PD), Ok(0));
}
