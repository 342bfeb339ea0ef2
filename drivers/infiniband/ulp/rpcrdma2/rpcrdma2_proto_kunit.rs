// SPDX-License-Identifier: GPL-2.0

//! In-kernel KUnit suite of the RPC-over-RDMA protocol core.
//!
//! The files under `proto/` are shared with the host crate `host/rpcrdma2-proto`, where they are
//! tested exhaustively and fuzzed. This module builds the same files with the kernel's flags
//! (`-Dwarnings`, overflow checks, the kernel's clippy lints) and checks that they behave the
//! same inside the kernel: a few vectors, and every truncation of a valid header rejected
//! without a panic. The transports (`rpcrdma2.ko`) are tested by the scenarios against real
//! peers.

use kernel::{kunit::suite::Test, kunit_expect, kunit_expect_eq, prelude::*};

pub mod proto;

use proto::{
    error::{ErrorBody, V1Error},
    v1::{self, V1Body, V1DecodeConfig},
};

module! {
    type: Rpcrdma2ProtoKunit,
    name: "rpcrdma2_proto_kunit",
    author: "rsiw project",
    description: "KUnit suite of the RPC-over-RDMA v1/v2 protocol core, built in the kernel",
    license: "GPL",
}

struct Rpcrdma2ProtoKunit;

impl kernel::Module for Rpcrdma2ProtoKunit {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(Rpcrdma2ProtoKunit)
    }
}

/// Big-endian XDR words as bytes.
fn words<const N: usize, const B: usize>(w: [u32; N]) -> [u8; B] {
    let mut out = [0u8; B];
    for (chunk, word) in out.chunks_exact_mut(4).zip(w) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

const XID: u32 = 0x1234_5678;

fn v1_msg_without_chunks(test: &mut Test) -> Result {
    // xid, vers 1, credit 32, RDMA_MSG, empty read list, write list and reply chunk, then the
    // start of an RPC call.
    let buf: [u8; 44] = words([XID, 1, 32, 0, 0, 0, 0, XID, 0, 2, 100003]);
    let Ok(h) = v1::decode(&buf, &V1DecodeConfig::default()) else {
        kunit_expect!(test, false, "a valid RDMA_MSG did not decode");
        return Ok(());
    };
    kunit_expect_eq!(
        test,
        (h.xid, h.vers, h.credit, h.header_len),
        (XID, 1, 32, 28)
    );
    match h.body {
        V1Body::Msg { chunks, payload } => {
            kunit_expect!(test, chunks.is_empty());
            kunit_expect_eq!(test, payload, &buf[28..]);
        }
        _ => {
            kunit_expect!(test, false, "not decoded as RDMA_MSG");
        }
    }
    Ok(())
}

fn v1_wrong_version_gets_err_vers(test: &mut Test) -> Result {
    let buf: [u8; 28] = words([XID, 7, 32, 0, 0, 0, 0]);
    let fault = v1::decode(&buf, &V1DecodeConfig::default()).err();
    let reply = fault.as_ref().and_then(|f| f.reply());
    kunit_expect!(test, reply.is_some(), "version 7 was not answered");
    if let Some(r) = reply {
        kunit_expect_eq!(test, r.xid, XID);
        kunit_expect!(
            test,
            matches!(r.body, ErrorBody::V1(V1Error::Vers { low: 1, high: 1 })),
            "expected ERR_VERS 1..1, got {:?}",
            r.body
        );
    }
    Ok(())
}

fn truncated_headers_are_rejected(test: &mut Test) -> Result {
    let buf: [u8; 48] = words([XID, 1, 8, 0, 1, 16, 0xaa, 100, 0, 0x1000, 0, 0]);
    for len in 0..buf.len() {
        kunit_expect!(
            test,
            v1::decode(&buf[..len], &V1DecodeConfig::default()).is_err(),
            "a {}-byte prefix decoded",
            len
        );
    }
    Ok(())
}

kernel::kunit_suite!(
    rpcrdma2_proto,
    [
        v1_msg_without_chunks,
        v1_wrong_version_gets_err_vers,
        truncated_headers_are_rejected
    ]
);
