// SPDX-License-Identifier: GPL-2.0

//! DDP/RDMAP segment decoding; decoded headers re-encode to the same bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::ddp::DdpHeader;
use rsiw_proto::proto::rdmap::{encode_headers, Segment};

fuzz_target!(|data: &[u8]| {
    if let Ok((ddp, len)) = DdpHeader::decode(data) {
        let mut out = [0u8; 18];
        assert_eq!(ddp.encode(&mut out), Ok(len));
        assert_eq!(&out[..len], &data[..len]);
    }
    match Segment::decode(data) {
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
