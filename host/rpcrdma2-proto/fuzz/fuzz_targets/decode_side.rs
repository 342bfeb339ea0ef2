// SPDX-License-Identifier: GPL-2.0

//! The smaller parsers: CM private data, ERR_VERS in either layout, RPC
//! header peeking and a bare property set.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma2_proto::proto::cm_private::CmPrivateData;
use rpcrdma2_proto::proto::negotiation::parse_version_error;
use rpcrdma2_proto::proto::properties::PropSet;
use rpcrdma2_proto::proto::reverse::{classify_v1, classify_v2};
use rpcrdma2_proto::proto::role::Endpoint;
use rpcrdma2_proto::proto::xdr::XdrReader;

fuzz_target!(|data: &[u8]| {
    if let Some(p) = CmPrivateData::decode(data) {
        assert_eq!(CmPrivateData::decode(&p.encode()), Some(p));
    }
    if let Some((_, r)) = parse_version_error(data) {
        assert!(r.low <= r.high);
    }
    let _ = classify_v1(Endpoint::Client, 1, data);
    let _ = classify_v2(Endpoint::Server, 1, true, Some(data));
    if let Ok(set) = PropSet::decode(&mut XdrReader::new(data)) {
        assert_eq!(set.iter().count() as u32, set.len());
    }
});
