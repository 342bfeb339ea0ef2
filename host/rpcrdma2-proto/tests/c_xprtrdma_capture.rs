// SPDX-License-Identifier: GPL-2.0

//! Real RPC-over-RDMA Version 1 traffic from peers nobody here wrote: the kernel's C xprtrdma
//! client and svcrdma server, NFSv4.1 and NFSv3 over the C siw, captured in the test VM by
//! `scripts/capture-fixtures.sh` and cut into one file per Send by
//! `scripts/extract-rpcrdma-fixtures.py`.
//!
//! Every message must decode, calls must carry NFS calls whose RPC XID is the transport XID,
//! replies must answer a call seen on the wire (or be backchannel calls, RFC 8167), and the
//! connection private data must be RFC 8797's.

mod common;
use common::*;
use proto::cm_private::CmPrivateData;
use proto::v1::{self, V1Body, V1DecodeConfig};
use std::collections::HashSet;

const NFS_PROGRAM: u32 = 100003;
/// NFSv3's side protocol for POSIX ACLs; the v3 mount probes it.
const NFS_ACL_PROGRAM: u32 = 100227;
const NFS4_CALLBACK_PROGRAM: u32 = 0x4000_0000;
const RPC_CALL: u32 = 0;
const RPC_REPLY: u32 = 1;

fn captured(suffix: &str) -> Vec<(String, Vec<u8>)> {
    let dir = fixtures_dir().join("c-xprtrdma-siw");
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .expect("capture fixtures")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).expect("read fixture"))
        })
        .collect();
    out.sort();
    out
}

fn word(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes(b[i * 4..i * 4 + 4].try_into().unwrap())
}

/// What one captured Send carried: (transport XID, RPC message type, program) where the RPC
/// message is inline (RDMA_MSG); None for RDMA_NOMSG.
fn decode(name: &str, bytes: &[u8]) -> (u32, Option<(u32, u32)>) {
    let h = v1::decode(bytes, &V1DecodeConfig::default())
        .unwrap_or_else(|f| panic!("{name}: does not decode: {f:?}"));
    assert_eq!(h.vers, 1, "{name}");
    assert!(h.credit > 0, "{name}: no credits granted");
    match h.body {
        V1Body::Msg { payload, .. } => {
            assert!(payload.len() >= 12, "{name}: RPC message too short");
            assert_eq!(
                word(payload, 0),
                h.xid,
                "{name}: RPC XID differs from rdma_xid"
            );
            let mtype = word(payload, 1);
            let prog = if mtype == RPC_CALL {
                assert_eq!(word(payload, 2), 2, "{name}: RPC version");
                word(payload, 3)
            } else {
                0
            };
            (h.xid, Some((mtype, prog)))
        }
        V1Body::NoMsg { chunks } => {
            assert!(!chunks.is_empty(), "{name}: RDMA_NOMSG without chunks");
            (h.xid, None)
        }
        other => panic!("{name}: unexpected {other:?}"),
    }
}

#[test]
fn client_calls_decode_to_nfs_calls() {
    let calls = captured("-call.bin");
    assert!(calls.len() >= 50, "only {} calls captured", calls.len());
    let mut inline = 0;
    for (name, bytes) in &calls {
        if let (_, Some((mtype, prog))) = decode(name, bytes) {
            // The client sends NFS calls and replies to backchannel calls.
            assert!(
                (mtype == RPC_CALL && [NFS_PROGRAM, NFS_ACL_PROGRAM].contains(&prog))
                    || mtype == RPC_REPLY,
                "{name}: message type {mtype}, program {prog}"
            );
            inline += 1;
        }
    }
    assert!(inline > calls.len() / 2, "most calls are inline");
}

#[test]
fn server_replies_answer_calls_on_the_wire() {
    let call_xids: HashSet<u32> = captured("-call.bin")
        .iter()
        .map(|(name, bytes)| decode(name, bytes).0)
        .collect();
    let replies = captured("-reply.bin");
    assert!(
        replies.len() >= 50,
        "only {} replies captured",
        replies.len()
    );
    for (name, bytes) in &replies {
        match decode(name, bytes) {
            (xid, Some((RPC_REPLY, _))) | (xid, None) => {
                assert!(
                    call_xids.contains(&xid),
                    "{name}: reply to XID {xid:#x} never called"
                )
            }
            (_, Some((RPC_CALL, prog))) => {
                assert_eq!(prog, NFS4_CALLBACK_PROGRAM, "{name}: server-side call")
            }
            (_, Some((t, _))) => panic!("{name}: RPC message type {t}"),
        }
    }
}

#[test]
fn connection_private_data_is_rfc8797() {
    let pds: Vec<_> = captured("-private-data.bin");
    assert!(pds.len() >= 2);
    for (name, pd) in &pds {
        // The C siw speaks MPA revision 2: the RFC 6581 IRD/ORD word comes first.
        assert_eq!(pd.len(), 4 + 8, "{name}");
        let cm = CmPrivateData::decode(&pd[4..])
            .unwrap_or_else(|| panic!("{name}: not RPC-over-RDMA private data"));
        assert_eq!((cm.send_size, cm.recv_size), (4096, 4096), "{name}");
    }
}

#[test]
fn every_prefix_of_a_captured_message_is_handled() {
    for (_, bytes) in captured("-call.bin")
        .iter()
        .chain(&captured("-reply.bin"))
        .take(40)
    {
        for cut in 0..bytes.len() {
            let _ = v1::decode(&bytes[..cut], &V1DecodeConfig::default());
        }
    }
}
