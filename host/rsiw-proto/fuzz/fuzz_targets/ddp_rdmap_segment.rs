// SPDX-License-Identifier: GPL-2.0

//! DDP/RDMAP segment decoding; decoded headers re-encode to the same bytes,
//! and the data segment fast path agrees with the general decoder.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::ddp::DdpHeader;
use rsiw_proto::proto::rdmap::{encode_headers, DataSegment, OpcodeHeader, Segment};

fuzz_target!(|data: &[u8]| {
    if let Ok((ddp, len)) = DdpHeader::decode(data) {
        let mut out = [0u8; 18];
        assert_eq!(ddp.encode(&mut out), Ok(len));
        assert_eq!(&out[..len], &data[..len]);
    }
    let decoded = Segment::decode(data);
    match (DataSegment::decode(data), decoded) {
        (Some(fast), Ok(seg)) => {
            assert_eq!((fast.ddp(), fast.opcode()), (seg.ddp, seg.opcode));
            assert_eq!(seg.header, OpcodeHeader::None);
            assert_eq!(seg.payload, &data[seg.ddp.header_len()..]);
            assert_eq!(fast.invalidate_stag(), seg.invalidate_stag());
        }
        (Some(fast), Err(e)) => panic!("fast path accepted {fast:?}, decode failed with {e:?}"),
        (None, Ok(seg)) => assert!(!seg.opcode.carries_payload(), "fast path missed {seg:?}"),
        (None, Err(_)) => {}
    }
    match decoded {
        Ok(seg) => {
            let _ = seg.invalidate_stag();
            let mut out = vec![0u8; data.len()];
            let n = encode_headers(&seg.ddp, &seg.header, &mut out).expect("headers re-encode");
            assert_eq!(n + seg.payload.len(), data.len());
            assert_eq!(&out[..n], &data[..n]);
        }
        Err(e) => {
            let _ = e.term().triple();
        }
    }
});
