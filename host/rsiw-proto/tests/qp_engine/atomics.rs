// SPDX-License-Identifier: GPL-2.0

//! Atomics (RFC 7306): Fetch-and-Add and Compare-and-Swap, masked and not,
//! end to end and against a bit-by-bit reference.

use proptest::prelude::*;
use rsiw_proto::proto::qp_engine::*;

use crate::harness::*;

#[test]
fn atomics() {
    for setup in setups() {
        let mut p = Pair::new(setup);
        let target = p.nb.mr(64, 0x8000, REMOTE_ATOMIC);
        p.nb.region_mut(target).data[8..16].copy_from_slice(&100u64.to_ne_bytes());
        p.nb.region_mut(target).data[16..24]
            .copy_from_slice(&0x00ff_00ff_00ff_00ffu64.to_ne_bytes());
        let result = p.na.mr(64, VA, LOCAL_WRITE);
        let ops = [
            SendOp::FetchAdd {
                remote_addr: 0x8008,
                rkey: target,
                add: 5,
                add_mask: 0,
            },
            SendOp::CmpSwap {
                remote_addr: 0x8008,
                rkey: target,
                compare: 105,
                compare_mask: u64::MAX,
                swap: 7,
                swap_mask: u64::MAX,
            },
            // A failing compare.
            SendOp::CmpSwap {
                remote_addr: 0x8008,
                rkey: target,
                compare: 105,
                compare_mask: u64::MAX,
                swap: 9,
                swap_mask: u64::MAX,
            },
            // Two 32-bit fields: the low field's carry is dropped.
            SendOp::FetchAdd {
                remote_addr: 0x8010,
                rkey: target,
                add: 0x0000_0001_ff01_0000,
                add_mask: 0x8000_0000_8000_0000,
            },
            // Masked compare on the low byte, swap of the high byte only.
            SendOp::CmpSwap {
                remote_addr: 0x8010,
                rkey: target,
                compare: 0xff,
                compare_mask: 0xff,
                swap: 0xab00_0000_0000_0000,
                swap_mask: 0xff00_0000_0000_0000,
            },
        ];
        for (i, op) in ops.iter().enumerate() {
            p.na.sq
                .push_back(wr(i as u64, *op, &[sge(VA + 8 * i as u64, 8, result)]));
        }
        p.pump();
        let opcodes: Vec<_> =
            p.na.cq
                .iter()
                .map(|c| (c.wr_id, c.status, c.byte_len))
                .collect();
        assert_eq!(
            opcodes,
            (0..5)
                .map(|i| (i, WcStatus::Success, 8))
                .collect::<Vec<_>>(),
            "{setup:?}"
        );
        assert_eq!(p.na.cq[1].opcode, WcOpcode::CompSwap);
        // The masked forms complete as such.
        assert_eq!(p.na.cq[3].opcode, WcOpcode::MaskedFetchAdd);
        assert_eq!(p.na.cq[4].opcode, WcOpcode::MaskedCompSwap);
        let word = |d: &[u8], i: usize| u64::from_ne_bytes(d[8 * i..8 * i + 8].try_into().unwrap());
        let r = &p.na.region(result).data;
        let originals: Vec<u64> = (0..5).map(|i| word(r, i)).collect();
        let second = 0x00ff_00ff_00ff_00ffu64;
        let added = AtomicOp::FetchAdd {
            add: 0x0000_0001_ff01_0000,
            mask: 0x8000_0000_8000_0000,
        }
        .apply(second);
        assert_eq!(originals, vec![100, 105, 7, second, added]);
        let t = &p.nb.region(target).data;
        assert_eq!(word(t, 1), 7);
        assert_eq!(
            word(t, 2),
            (added & !0xff00_0000_0000_0000) | 0xab00_0000_0000_0000
        );
    }
}

/// The reference semantics of RFC 7306 section 5.1, bit by bit.
fn reference(op: &AtomicOp, old: u64) -> u64 {
    match *op {
        AtomicOp::FetchAdd { add, mask } => {
            // Ripple-carry addition whose carry stops at every mask bit.
            let mut result = 0u64;
            let mut carry = 0u64;
            for bit in 0..64 {
                let a = old >> bit & 1;
                let b = add >> bit & 1;
                let sum = a + b + carry;
                result |= (sum & 1) << bit;
                carry = if mask >> bit & 1 == 1 { 0 } else { sum >> 1 };
            }
            result
        }
        AtomicOp::CmpSwap {
            compare,
            compare_mask,
            swap,
            swap_mask,
        } => {
            let matches = (0..64).all(|bit| {
                compare_mask >> bit & 1 == 0 || (old >> bit & 1) == (compare >> bit & 1)
            });
            if !matches {
                return old;
            }
            (0..64).fold(0u64, |acc, bit| {
                let from = if swap_mask >> bit & 1 == 1 { swap } else { old };
                acc | (from >> bit & 1) << bit
            })
        }
    }
}

fn boundary_masks() -> Vec<u64> {
    let mut v = vec![0, u64::MAX, 0x8000_0000_8000_0000, 0x8080_8080_8080_8080];
    v.extend((0..64).map(|b| 1u64 << b));
    v.extend((0..64).map(|b| !(1u64 << b)));
    v
}

#[test]
fn atomic_op_boundary_masks() {
    let values = [
        0,
        1,
        u64::MAX,
        0x8000_0000_0000_0000,
        0x7fff_ffff_ffff_ffff,
        0x0123_4567_89ab_cdef,
    ];
    for mask in boundary_masks() {
        for &old in &values {
            for &x in &values {
                let add = AtomicOp::FetchAdd { add: x, mask };
                assert_eq!(add.apply(old), reference(&add, old), "{add:?} on {old:#x}");
                for &y in &values {
                    for other in [0, u64::MAX] {
                        for (cm, sm) in [(mask, other), (other, mask)] {
                            let cas = AtomicOp::CmpSwap {
                                compare: x,
                                compare_mask: cm,
                                swap: y,
                                swap_mask: sm,
                            };
                            assert_eq!(cas.apply(old), reference(&cas, old), "{cas:?} on {old:#x}");
                        }
                    }
                }
            }
        }
    }
    // The unmasked forms.
    assert_eq!(AtomicOp::FetchAdd { add: 1, mask: 0 }.apply(u64::MAX), 0);
    let cas = AtomicOp::CmpSwap {
        compare: 3,
        compare_mask: u64::MAX,
        swap: 4,
        swap_mask: u64::MAX,
    };
    assert_eq!((cas.apply(3), cas.apply(5)), (4, 5));
}

proptest! {
    #[test]
    fn atomic_op_matches_reference(old: u64, a: u64, b: u64, m1: u64, m2: u64, fetch: bool) {
        let op = if fetch {
            AtomicOp::FetchAdd { add: a, mask: m1 }
        } else {
            AtomicOp::CmpSwap { compare: a, compare_mask: m1, swap: b, swap_mask: m2 }
        };
        prop_assert_eq!(op.apply(old), reference(&op, old));
    }
}
