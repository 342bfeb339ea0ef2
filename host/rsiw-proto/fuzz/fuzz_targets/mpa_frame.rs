// SPDX-License-Identifier: GPL-2.0

//! MPA Request/Reply decoding; whatever decodes must re-encode identically.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::mpa::{encode_frame, FrameKind, MpaFrame};

fuzz_target!(|data: &[u8]| {
    for kind in [FrameKind::Request, FrameKind::Reply] {
        if let Ok((frame, len)) = MpaFrame::decode(data, kind) {
            let _ = frame.header.flags.reject;
            let mut out = [0u8; 600];
            // Revision 1 frames with S set carry no enhanced data, and encode
            // would clear S: compare only what is canonical.
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
            if frame.header.has_enhanced_data() || !frame.header.flags.enhanced {
                assert_eq!(&out[..n], &data[..n]);
            }
        }
    }
});
