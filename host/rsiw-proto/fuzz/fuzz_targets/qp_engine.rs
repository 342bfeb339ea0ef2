// SPDX-License-Identifier: GPL-2.0

//! The QP engine fed arbitrary bytes in fuzzer-chosen chunks, transmitting
//! after every chunk, over a small in-memory RNIC with work requests posted
//! on both queues (some Reads and Atomics already outstanding, so that
//! responses can match them; Reads into several SGEs among them, whose parts
//! are Read Requests of their own), in the client-server model or past any
//! RFC 6581 RTR sent or received. It never panics, never writes a transmit
//! buffer past its end, and after the final flush every posted work request
//! has completed exactly once (the RTR, no work request, never completes).

#![no_main]

use std::collections::VecDeque;

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::crc32c::SoftCrc32c;
use rsiw_proto::proto::mpa::RtrKind;
use rsiw_proto::proto::placement::{AccessFlags, MemoryRegion, StagState};
use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::terminate::TermError;

const PD: u32 = 1;
const REGION_LEN: usize = 256;

struct Mr {
    stag: u32,
    access: u32,
    base: u64,
    valid: bool,
    data: Vec<u8>,
}

struct Node {
    mrs: Vec<Mr>,
    sq: VecDeque<SendRequest>,
    rq: VecDeque<RecvRequest>,
    completed: Vec<u64>,
}

impl Node {
    fn new() -> Self {
        // STag index i, key 0; region 0 is zero-based, the others at
        // 0x1000 * i. Varied rights.
        let access = [0xF, 0x2, 0x4, 0x8, 0x1];
        let mrs = access
            .iter()
            .enumerate()
            .map(|(i, &access)| Mr {
                stag: (i as u32) << 8,
                access,
                base: 0x1000 * i as u64,
                valid: true,
                data: vec![0; REGION_LEN],
            })
            .collect();
        Self {
            mrs,
            sq: VecDeque::new(),
            rq: VecDeque::new(),
            completed: Vec::new(),
        }
    }

    fn local(&mut self, sge: &Sge, offset: u32, len: usize) -> Result<&mut [u8], WcStatus> {
        let mr = self
            .mrs
            .get_mut((sge.lkey >> 8) as usize)
            .filter(|m| m.stag == sge.lkey && m.valid)
            .ok_or(WcStatus::LocProtErr)?;
        assert!(u64::from(offset) + len as u64 <= u64::from(sge.length));
        let start = sge
            .addr
            .checked_sub(mr.base)
            .and_then(|s| s.checked_add(u64::from(offset)))
            .and_then(|s| usize::try_from(s).ok())
            .ok_or(WcStatus::LocProtErr)?;
        let end = start.checked_add(len).ok_or(WcStatus::LocProtErr)?;
        mr.data.get_mut(start..end).ok_or(WcStatus::LocProtErr)
    }

    fn tagged(&mut self, stag: u32, offset: u64, len: usize) -> Result<&mut [u8], TermError> {
        let mr = self.mrs.get_mut((stag >> 8) as usize);
        let mr = mr.expect("placement checked the STag");
        let start = usize::try_from(offset).expect("checked offset");
        // The engine checked the range against the region.
        Ok(&mut mr.data[start..start + len])
    }
}

impl QpContext for Node {
    fn peek_send(&mut self) -> Option<SendRequest> {
        self.sq.front().copied()
    }

    fn pop_send(&mut self) {
        self.sq.pop_front();
    }

    fn pop_recv(&mut self) -> Option<RecvRequest> {
        self.rq.pop_front()
    }

    fn complete(&mut self, c: Completion) {
        self.completed.push(c.wr_id);
    }

    fn local_read(&mut self, sge: &Sge, offset: u32, out: &mut [u8]) -> Result<(), WcStatus> {
        let len = out.len();
        out.copy_from_slice(self.local(sge, offset, len)?);
        Ok(())
    }

    fn local_write(&mut self, sge: &Sge, offset: u32, data: &[u8]) -> Result<(), WcStatus> {
        self.local(sge, offset, data.len())?.copy_from_slice(data);
        Ok(())
    }

    fn lookup_stag(&mut self, stag: u32) -> Option<MemoryRegion> {
        let mr = self.mrs.get((stag >> 8) as usize)?;
        Some(MemoryRegion {
            stag: mr.stag,
            state: if mr.valid {
                StagState::Valid
            } else {
                StagState::Invalid
            },
            pd: PD,
            access: AccessFlags::from_ib(mr.access),
            base: mr.base,
            len: REGION_LEN as u64,
            zero_based: mr.base == 0,
        })
    }

    fn tagged_read(&mut self, stag: u32, offset: u64, out: &mut [u8]) -> Result<(), TermError> {
        let len = out.len();
        out.copy_from_slice(self.tagged(stag, offset, len)?);
        Ok(())
    }

    fn tagged_write(&mut self, stag: u32, offset: u64, data: &[u8]) -> Result<(), TermError> {
        self.tagged(stag, offset, data.len())?.copy_from_slice(data);
        Ok(())
    }

    fn tagged_atomic(&mut self, stag: u32, offset: u64, op: AtomicOp) -> Result<u64, TermError> {
        let word = self.tagged(stag, offset, 8)?;
        let old = u64::from_ne_bytes(word.try_into().expect("8 bytes"));
        word.copy_from_slice(&op.apply(old).to_ne_bytes());
        Ok(old)
    }

    fn invalidate_remote(&mut self, stag: u32) -> Result<(), TermError> {
        match self.mrs.get_mut((stag >> 8) as usize) {
            Some(mr) if mr.stag == stag && mr.valid => {
                mr.valid = false;
                Ok(())
            }
            _ => Err(TermError::RdmapProtectionCannotInvalidate),
        }
    }

    fn invalidate_local(&mut self, stag: u32) -> Result<(), WcStatus> {
        self.invalidate_remote(stag)
            .map_err(|_| WcStatus::LocProtErr)
    }

    fn register(
        &mut self,
        stag: u32,
        access: u32,
        _iova: u64,
        _length: u64,
    ) -> Result<(), WcStatus> {
        let mr = self
            .mrs
            .get_mut((stag >> 8) as usize)
            .ok_or(WcStatus::LocProtErr)?;
        mr.stag = stag;
        mr.access = access;
        mr.valid = true;
        Ok(())
    }
}

const KINDS: [RtrKind; 3] = [RtrKind::Send, RtrKind::Write, RtrKind::Read];

fn sge(addr: u64, length: u32, lkey: u32) -> Sge {
    Sge { addr, length, lkey }
}

fuzz_target!(|data: &[u8]| {
    let Some((&[config, split, posts], stream)) = data.split_first_chunk::<3>() else {
        return;
    };
    let fpdu_size = [64, 200, 1024, 4096][usize::from(config >> 6)];
    // The RFC 6581 RTR connection setup exchanged, from the split byte (its
    // other uses only need it to vary): 0 (the seeds' 7) is the
    // client-server model.
    let rtr = match split % 7 {
        0 => RtrState::None,
        n @ 1..=3 => RtrState::Sent(KINDS[usize::from(n - 1)]),
        n => RtrState::Received(KINDS[usize::from(n - 4)]),
    };
    let mut engine = QpEngine::new(
        EngineConfig {
            crc: config & 1 != 0,
            fpdu_size,
            pd: PD,
            ird: u16::from(config >> 1 & 7),
            ord: u16::from(config >> 4 & 3) + 1,
            rtr,
        },
        SoftCrc32c,
    );
    let mut node = Node::new();
    let local = 4 << 8; // region 4: local write, base 0x4000
    for i in 0..u64::from(posts & 7) {
        node.rq.push_back(RecvRequest {
            wr_id: 1000 + i,
            sges: SgeList::new(&[sge(0x4000 + 16 * i, 16, local), sge(0x4080, 64, local)])
                .expect("two SGEs"),
        });
    }
    let ops = [
        SendOp::Read {
            remote_addr: 0x100,
            rkey: 0x700,
        },
        SendOp::FetchAdd {
            remote_addr: 0x100,
            rkey: 0x700,
            add: 1,
            add_mask: 0,
        },
        SendOp::Send {
            solicited: false,
            invalidate: None,
        },
        SendOp::CmpSwap {
            remote_addr: 0x108,
            rkey: 0x700,
            compare: 0,
            compare_mask: !0,
            swap: 1,
            swap_mask: !0,
        },
        SendOp::Write {
            remote_addr: 0,
            rkey: 0x700,
        },
        SendOp::SendImm {
            imm: 5,
            solicited: true,
        },
        SendOp::LocalInv { stag: 3 << 8 },
        SendOp::RegMr {
            stag: 3 << 8 | 1,
            access: 0xF,
            iova: 0,
            length: 0,
        },
    ];
    for i in 0..u64::from(posts >> 3) {
        let op = ops[i as usize % ops.len()];
        // Reads go into 1, 3, 2 or 6 SGEs (one Read Request per non-empty
        // one), the second of them empty; the split byte picks where the
        // rotation starts (the seeds' 7: a single SGE first).
        let rotation = usize::from(split >> 3) + (i as usize / ops.len());
        let count = match op {
            SendOp::Read { .. } => [1, 3, 2, 6][rotation % 4],
            _ => 1,
        };
        let list: Vec<Sge> = (0..count as u64)
            .map(|j| {
                let len = if j == 1 { 0 } else { 8 };
                sge(0x4000 + 8 * ((i + 5 * j) % 31), len, local)
            })
            .collect();
        node.sq.push_back(SendRequest {
            wr_id: i,
            op,
            sges: SgeList::new(&list).expect("at most MAX_SGE"),
            signaled: true,
            fence: i % 5 == 4,
        });
    }
    let posted = node.rq.len() + node.sq.len();
    let mut out = vec![0u8; 4096];
    engine.transmit(&mut node, &mut out);
    let mut rng = u64::from(split) | 0x100;
    let mut pos = 0;
    while pos < stream.len() {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let piece = match rng % 3 {
            0 => 1,
            1 => (rng >> 8) as usize % 64 + 1,
            _ => stream.len() - pos,
        };
        let end = (pos + piece).min(stream.len());
        let result = engine.receive(&stream[pos..end], &mut node);
        let n = engine.transmit(&mut node, &mut out);
        assert!(n <= out.len());
        match result {
            Ok(consumed) => assert_eq!(consumed, end - pos),
            Err(_) => {
                assert!(engine.is_terminated());
                break;
            }
        }
        pos = end;
    }
    while engine.transmit(&mut node, &mut out) != 0 {}
    engine.flush(&mut node);
    assert!(!engine.wants_transmit() || engine.termination().is_some());
    let mut ids = node.completed.clone();
    ids.sort_unstable();
    let before = ids.len();
    ids.dedup();
    assert_eq!(before, ids.len(), "a work request completed twice");
    assert_eq!(ids.len(), posted, "a work request never completed");
});
