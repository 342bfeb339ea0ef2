// SPDX-License-Identifier: GPL-2.0

//! MPA Request/Reply decoding; whatever decodes must re-encode identically.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::mpa::{encode_frame, FrameKind, MpaFrame, MpaHeader};

fn check(data: &[u8], kind: FrameKind) {
    let Ok((frame, len)) = MpaFrame::decode(data, kind) else {
        return;
    };
    assert_eq!(MpaHeader::decode(data, kind), Ok(frame.header));
    let mut out = [0u8; 600];
    let n = encode_frame(
        &mut out,
        kind,
        frame.header.flags,
        frame.header.revision,
        frame.enhanced.as_ref(),
        frame.ulp_private_data,
    )
    .expect("a decoded frame re-encodes");
    assert_eq!(n, len);
    let (again, _) = MpaFrame::decode(&out[..n], kind).expect("re-decodes");
    assert_eq!(again.enhanced, frame.enhanced);
    assert_eq!(again.ulp_private_data, frame.ulp_private_data);
    // Only a revision 1 frame with S set is not canonical: encoding clears S.
    if frame.header.has_enhanced_data() || !frame.header.flags.enhanced {
        assert_eq!(&out[..n], &data[..n]);
    }
}

fuzz_target!(|data: &[u8]| {
    // Raw input exercises the key check; prefixed input spends the fuzzer's
    // effort on flags, revision, lengths and enhanced data.
    for kind in [FrameKind::Request, FrameKind::Reply] {
        check(data, kind);
        check(&[&kind.key()[..], data].concat(), kind);
    }
});
