// SPDX-License-Identifier: GPL-2.0

//! The seed corpus of the `qp_engine` fuzz target, written by an ignored
//! test.

use rsiw_proto::proto::crc32c::SoftCrc32c;
use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::tx_engine::WorkRequest;

use crate::harness::*;

/// Writes the seed corpus of the `qp_engine` fuzz target
/// (`fuzz/seeds/qp_engine/`): streams a peer sends to the fuzzed engine (its
/// own work requests, and the responses to Reads the target posts),
/// addressed to the regions of its mock RNIC (STag index i, key 0; region 0
/// zero-based, the others at 0x1000 * i), behind the target's three
/// configuration bytes. Run with `cargo test --test qp_engine -- --ignored`.
#[test]
#[ignore = "regenerates the fuzz seeds"]
fn write_fuzz_seeds() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/qp_engine");
    std::fs::create_dir_all(dir).unwrap();
    let all = vec![
        wr(1, send_op(), &[sge(VA, 40, 0)]),
        wr(
            2,
            SendOp::Send {
                solicited: true,
                invalidate: Some(0x100),
            },
            &[sge(VA, 8, 0)],
        ),
        wr(
            3,
            SendOp::Write {
                remote_addr: 16,
                rkey: 0,
            },
            &[sge(VA, 64, 0)],
        ),
        wr(
            4,
            SendOp::WriteImm {
                remote_addr: 0x80,
                rkey: 0,
                imm: 9,
            },
            &[sge(VA, 32, 0)],
        ),
        wr(
            5,
            SendOp::Read {
                remote_addr: 0x2000,
                rkey: 0x200,
            },
            &[sge(VA, 100, 0)],
        ),
        wr(
            6,
            SendOp::FetchAdd {
                remote_addr: 0x3008,
                rkey: 0x300,
                add: 3,
                add_mask: 0x8000_0000,
            },
            &[sge(VA, 8, 0)],
        ),
        wr(
            7,
            SendOp::CmpSwap {
                remote_addr: 8,
                rkey: 0,
                compare: 0,
                compare_mask: u64::MAX,
                swap: 5,
                swap_mask: 0xffff,
            },
            &[sge(VA, 8, 0)],
        ),
        wr(
            8,
            SendOp::SendImm {
                imm: 7,
                solicited: false,
            },
            &[sge(VA, 10, 0)],
        ),
    ];
    let mut scenarios: Vec<(String, Vec<SendRequest>)> = vec![("all".into(), all.clone())];
    for w in &all {
        scenarios.push((format!("wr{}", w.wr_id), vec![*w]));
    }
    for crc in [false, true] {
        for (name, ops) in &scenarios {
            let config = EngineConfig {
                crc,
                fpdu_size: 200,
                pd: PD,
                ird: 8,
                ord: 8,
                rtr: RtrState::None,
            };
            let mut b = Engine::new(config, SoftCrc32c);
            let mut nb = Node::default();
            // The peer's own memory: index 0, key 0, with every right.
            nb.mrs.push(Mr {
                stag: 0,
                pd: PD,
                access: ALL,
                base: VA,
                zero_based: false,
                valid: true,
                epoch: 0,
                data: (0..=255).collect(),
            });
            nb.sq.extend(ops.iter().copied());
            let mut stream = Vec::new();
            let mut out = vec![0u8; 4096];
            loop {
                let n = b.transmit(&mut nb, &mut out);
                if n == 0 {
                    break;
                }
                stream.extend_from_slice(&out[..n]);
            }
            assert!(nb.sq.is_empty() && !b.is_terminated());
            // The target's bytes: CRC, IRD 7, ORD 1, FPDU size 200; a split
            // seed (7: no RTR); 7 receives and no send requests posted.
            let mut seed = vec![u8::from(crc) | 7 << 1 | 1 << 6, 7, 7];
            seed.extend_from_slice(&stream);
            let crc_name = if crc { "crc" } else { "nocrc" };
            std::fs::write(format!("{dir}/{name}-{crc_name}"), seed).unwrap();
        }
    }
    // The target's own Reads, answered. With the posts byte 8 | 7 it posts
    // one Read (and 7 receives): with the split byte 7 into 8 bytes at 0x4000
    // of its region 4 (STag 0x400), with 14 into three SGEs, the second
    // empty, so two parts: 8 bytes each at 0x4000 and 0x4050. ORD 2, so that
    // both parts go out before their responses come.
    for crc in [false, true] {
        for (name, split, sinks) in [("read", 7, &[0x4000][..]), ("read2", 14, &[0x4000, 0x4050])] {
            let mut seed = vec![u8::from(crc) | 7 << 1 | 1 << 4 | 1 << 6, split, 8 | 7];
            for &sink in sinks {
                let response = WorkRequest::ReadResponse {
                    sink_stag: 4 << 8,
                    sink_tagged_offset: sink,
                    len: 8,
                };
                seed.extend(forge(crc, 200, response, &[0x5a; 8]));
            }
            let crc_name = if crc { "crc" } else { "nocrc" };
            std::fs::write(format!("{dir}/{name}-{crc_name}"), seed).unwrap();
        }
    }
}
