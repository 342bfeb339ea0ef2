// SPDX-License-Identifier: GPL-2.0

//! Version 1 reverse-direction Calls (RFC 8167) as a client receives them: NFSv4.1 callbacks
//! from the C svcrdma server, told apart from Replies to the client's own Calls.

mod common;
use common::*;
use proptest::prelude::*;
use proto::reverse::v1_inline_reverse_call;
use proto::role::Endpoint;
use proto::v1::{self, V1DecodeConfig, RDMA_MSG, RDMA_NOMSG};

const NFS4_CALLBACK_PROGRAM: u32 = 0x4000_0000;

/// A CB_NULL Call as svcrdma sends it: an RDMA_MSG header without chunks (its credit field
/// is the server's backchannel credits), then the RPC Call with AUTH_NONE.
fn cb_null(xid: u32) -> Vec<u8> {
    cat(&[
        &words(&[xid, 1, 2, RDMA_MSG, 0, 0, 0]),
        &words(&[xid, 0, 2, NFS4_CALLBACK_PROGRAM, 1, 0, 0, 0, 0, 0]),
    ])
}

fn reverse_call(local: Endpoint, message: &[u8]) -> Option<Vec<u8>> {
    let header = v1::decode(message, &V1DecodeConfig::default()).ok()?;
    v1_inline_reverse_call(local, &header).map(<[u8]>::to_vec)
}

#[test]
fn a_callback_is_the_rpc_call_after_the_header() {
    let message = cb_null(0x1234_5678);
    let call = reverse_call(Endpoint::Client, &message).expect("a reverse-direction Call");
    assert_eq!(call, message[28..].to_vec());
}

#[test]
fn a_reply_goes_the_forward_way() {
    let reply = cat(&[
        &words(&[7, 1, 32, RDMA_MSG, 0, 0, 0]),
        &words(&[7, 1, 0, 0, 0, 0]),
    ]);
    assert_eq!(reverse_call(Endpoint::Client, &reply), None);
}

#[test]
fn a_call_reaching_a_server_is_forward() {
    assert_eq!(reverse_call(Endpoint::Server, &cb_null(9)), None);
}

#[test]
fn a_call_with_chunks_is_not_taken() {
    // One Write chunk of one segment.
    let message = cat(&[
        &words(&[5, 1, 2, RDMA_MSG, 0, 1, 1, 0x11, 64, 0, 0x1000, 0, 0]),
        &words(&[5, 0, 2, NFS4_CALLBACK_PROGRAM, 1, 0, 0, 0, 0, 0]),
    ]);
    assert!(v1::decode(&message, &V1DecodeConfig::default()).is_ok());
    assert_eq!(reverse_call(Endpoint::Client, &message), None);
}

#[test]
fn nomsg_is_not_a_callback() {
    // A Reply chunk of one segment and no inline message.
    let message = words(&[6, 1, 2, RDMA_NOMSG, 0, 0, 1, 1, 0x22, 4096, 0, 0x2000]);
    assert!(v1::decode(&message, &V1DecodeConfig::default()).is_ok());
    assert_eq!(reverse_call(Endpoint::Client, &message), None);
}

#[test]
fn a_call_whose_xid_differs_is_not_taken() {
    let mut message = cb_null(3);
    message[28..32].copy_from_slice(&4u32.to_be_bytes());
    assert_eq!(reverse_call(Endpoint::Client, &message), None);
}

#[test]
fn a_cut_rpc_header_is_not_taken() {
    let message = cb_null(3);
    assert_eq!(reverse_call(Endpoint::Client, &message[..28 + 4]), None);
    assert_eq!(
        reverse_call(Endpoint::Client, &message[..28 + 8]),
        Some(message[28..36].to_vec())
    );
}

proptest! {
    #[test]
    fn any_message_is_classified_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        if let Some(call) = reverse_call(Endpoint::Client, &bytes) {
            // The Call is the tail of the message: XID as rdma_xid, then CALL.
            prop_assert!(bytes.ends_with(&call));
            prop_assert_eq!(&call[..4], &bytes[..4]);
            prop_assert_eq!(&call[4..8], &[0, 0, 0, 0]);
        }
    }

    #[test]
    fn every_callback_xid_is_taken(xid in any::<u32>(), tail in proptest::collection::vec(any::<u8>(), 0..64)) {
        let message = cat(&[&cb_null(xid), &tail]);
        let call = reverse_call(Endpoint::Client, &message);
        prop_assert_eq!(call, Some(message[28..].to_vec()));
    }
}
