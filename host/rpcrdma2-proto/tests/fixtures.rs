// SPDX-License-Identifier: GPL-2.0

//! Decodes every message in `tests/fixtures/`.
//!
//! A fixture is one received transport message: raw bytes in `NAME.bin`
//! (e.g. a capture of the kernel's C xprtrdma) or commented hex in
//! `NAME.hex`. `NAME.expect` holds one line saying what decoding must give:
//! `v1 <proc>`, `v2 <htype>`, `discard`, `reply v1 <err>` or
//! `reply v2 <err>`. Dropping in a new capture plus its `.expect` file is all
//! it takes to add a case.

mod common;
use common::*;
use proto::dispatch::{self, DecodeConfig, Message};
use proto::error::{ErrorBody, Fault};
use proto::v1::V1Body;

fn outcome(bytes: &[u8]) -> String {
    match dispatch::decode(bytes, &DecodeConfig::default()) {
        Ok(Message::V1(h)) => {
            let proc = match h.body {
                V1Body::Msg { .. } => 0,
                V1Body::NoMsg { .. } => 1,
                V1Body::Done => 3,
                V1Body::Error(_) => 4,
            };
            format!("v1 {proc}")
        }
        Ok(Message::V2(m)) => format!("v2 {}", m.prefix.htype),
        Err(Fault::Discard(_)) => "discard".into(),
        Err(Fault::Reply { reply, .. }) => match reply.body {
            ErrorBody::V1(e) => format!("reply v1 {}", e.code()),
            ErrorBody::V2(e) => format!("reply v2 {}", e.code()),
        },
    }
}

#[test]
fn all_fixtures_decode_as_expected() {
    let names = fixture_names();
    assert!(!names.is_empty(), "no fixtures found");
    for name in names {
        let bytes = fixture(&name);
        let expect_path = fixtures_dir().join(format!("{name}.expect"));
        let expected = std::fs::read_to_string(&expect_path)
            .unwrap_or_else(|_| panic!("missing {}", expect_path.display()));
        assert_eq!(outcome(&bytes), expected.trim(), "fixture {name}");
        // Every prefix of a fixture must decode without panicking.
        for cut in 0..bytes.len() {
            let _ = outcome(&bytes[..cut]);
        }
    }
}

#[test]
fn probing_client_reads_v1_layout_err_vers() {
    let bytes = fixture("v1-err-vers-from-v1-server");
    let (xid, range) = proto::negotiation::parse_version_error(&bytes).unwrap();
    assert_eq!(xid, 0xabcd);
    assert_eq!((range.low, range.high), (1, 1));
}
