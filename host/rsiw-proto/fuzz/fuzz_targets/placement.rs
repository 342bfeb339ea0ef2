// SPDX-License-Identifier: GPL-2.0

//! Placement of decoded segments: a region description and a stream of
//! ULPDUs, each routed to the tagged or untagged check the driver would use.
//! Accepted tagged accesses lie inside the region; errors name the layer of
//! their use; a refused untagged segment leaves its queue unchanged and an
//! accepted one continues the message where the previous one ended.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::ddp::DdpHeader;
use rsiw_proto::proto::placement::*;
use rsiw_proto::proto::rdmap::{OpcodeHeader, Segment};
use rsiw_proto::proto::terminate::{Layer, TermError};

const REGION_BYTES: usize = 30;

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

fn region(b: &[u8]) -> MemoryRegion {
    MemoryRegion {
        stag: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        state: if b[4] & 1 == 0 {
            StagState::Valid
        } else {
            StagState::Invalid
        },
        pd: u32::from(b[4] >> 1 & 1),
        access: AccessFlags::from_ib(u32::from(b[5])),
        base: be64(&b[6..]),
        len: be64(&b[14..]),
        zero_based: b[22] & 1 != 0,
        epoch: 0,
    }
}

fn check(r: &MemoryRegion, pd: u32, access: &TaggedAccess) {
    match check_tagged(Some(r), pd, access) {
        Ok(offset) => {
            if access.len != 0 {
                let end = offset.checked_add(access.len).expect("no wrap");
                assert!(end <= r.len);
                assert!(r.access.contains(access.usage.required_access()));
                assert_eq!(r.pd, pd);
            }
        }
        Err(e) => {
            let rdmap = access.usage.checked_by_rdmap()
                || e == TermError::RdmapAccessRights
                || e == TermError::RdmapCatastrophicStream;
            let layer = if rdmap { Layer::Rdmap } else { Layer::Ddp };
            assert_eq!(e.layer(), layer, "{e:?} for {access:?}");
        }
    }
    // An unknown STag is refused unless nothing is accessed.
    assert_eq!(check_tagged(None, pd, access).is_ok(), access.len == 0);
}

fuzz_target!(|data: &[u8]| {
    if data.len() < REGION_BYTES {
        return;
    }
    let (head, mut rest) = data.split_at(REGION_BYTES);
    let r = region(head);
    let pd = u32::from(head[23] & 1);
    let buffer_len = u64::from(u16::from_be_bytes([head[24], head[25]]));
    let mut queues = UntaggedQueues::new();
    while let Some((&len, tail)) = rest.split_first() {
        let len = usize::from(len).min(tail.len());
        let (ulpdu, tail) = tail.split_at(len);
        rest = tail;
        let Ok(seg) = Segment::decode(ulpdu) else {
            continue;
        };
        match (seg.ddp, seg.header) {
            (DdpHeader::Tagged(h), _) => {
                for usage in [TaggedUse::RdmaWrite, TaggedUse::ReadResponse] {
                    check(&r, pd, &TaggedAccess::segment(usage, &h, seg.payload.len()));
                }
            }
            (DdpHeader::Untagged(h), header) => {
                match header {
                    OpcodeHeader::ReadRequest(rr) => check(&r, pd, &TaggedAccess::read_source(&rr)),
                    OpcodeHeader::AtomicRequest(a) => {
                        check(&r, pd, &TaggedAccess::atomic_target(&a))
                    }
                    _ => {}
                }
                let s = UntaggedSegment::new(&h, seg.payload.len());
                let q = queues
                    .get_mut(s.queue_number)
                    .expect("decode checked the QN");
                if q.needs_buffer() {
                    assert!(q.bind_buffer(buffer_len));
                }
                let before = *q;
                match q.place(&s) {
                    Ok(p) => {
                        assert_eq!(p.offset, before.message_offset());
                        assert_eq!(p.msn, before.expected_msn());
                        if s.last {
                            assert_eq!(q.message_offset(), 0);
                            assert_eq!(q.expected_msn(), before.expected_msn().wrapping_add(1));
                        } else {
                            assert_eq!(q.expected_msn(), before.expected_msn());
                        }
                    }
                    Err(e) => {
                        assert_eq!(*q, before);
                        assert_eq!((e.layer(), e.error_type()), (Layer::Ddp, 2));
                    }
                }
            }
        }
    }
});
