// SPDX-License-Identifier: GPL-2.0

//! TERMINATE body decoding; whatever decodes re-encodes to the same bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::terminate::{TermError, TerminateMessage};

fuzz_target!(|data: &[u8]| {
    match TerminateMessage::decode(data) {
        Ok(m) => {
            if let Some(e) = m.control.error() {
                assert_eq!(
                    TermError::from_triple(
                        m.control.layer,
                        m.control.error_type,
                        m.control.error_code
                    ),
                    Some(e)
                );
                let _ = e.echo_flags();
            }
            let mut out = vec![0u8; data.len()];
            assert_eq!(m.encode(&mut out), Ok(data.len()));
            assert_eq!(&out[..], data);
        }
        Err(e) => {
            let _ = e.term();
        }
    }
});
