// SPDX-License-Identifier: GPL-2.0

//! Any bytes through the version dispatcher; faults must encode.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma2_proto::proto::dispatch::{self, DecodeConfig, Message};

fuzz_target!(|data: &[u8]| {
    match dispatch::decode(data, &DecodeConfig::default()) {
        Ok(Message::V1(h)) => assert!(h.header_len <= data.len()),
        Ok(Message::V2(m)) => assert!(m.header_len <= data.len()),
        Err(f) => {
            if let Some(r) = f.reply() {
                let mut buf = [0u8; 64];
                dispatch::encode_error_reply(&mut buf, &r, 1).unwrap();
            }
        }
    }
});
