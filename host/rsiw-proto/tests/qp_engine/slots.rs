// SPDX-License-Identifier: GPL-2.0

//! Slot storage for outstanding and pending requests: on the heap as in
//! line, and too short for the requests posted.

use rsiw_proto::proto::ord_ird::MAX_DEPTH;
use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::terminate::TermError;

use crate::harness::*;

/// Slot storage in two vectors, as a driver keeps it on the heap.
struct VecSlots {
    outstanding: Vec<Outstanding>,
    pending: Vec<Pending>,
}

impl VecSlots {
    fn new(len: usize) -> Self {
        Self {
            outstanding: vec![Outstanding::EMPTY; len],
            pending: vec![Pending::EMPTY; len],
        }
    }
}

impl SlotStorage for VecSlots {
    fn outstanding(&self) -> &[Outstanding] {
        &self.outstanding
    }
    fn outstanding_mut(&mut self) -> &mut [Outstanding] {
        &mut self.outstanding
    }
    fn pending(&self) -> &[Pending] {
        &self.pending
    }
    fn pending_mut(&mut self) -> &mut [Pending] {
        &mut self.pending
    }
}

/// What a run left behind: both CQs, both memories, the bytes sent.
type Outcome = (
    Vec<Completion>,
    Vec<Completion>,
    Vec<u8>,
    Vec<u8>,
    [usize; 2],
);

/// Both sides Read from and Fetch-and-Add into each other, more requests
/// than there are slots, so that the slot ring wraps.
fn read_atomic_exchange<S: SlotStorage>(mut p: Pair<S>) -> Outcome {
    const REQUESTS: u64 = MAX_DEPTH as u64 + 30;
    let ma = p.na.mr(4096, VA, ALL);
    let mb = p.nb.mr(4096, VA, ALL);
    p.na.fill(ma, 1);
    p.nb.fill(mb, 2);
    p.na.region_mut(ma).data[..8].fill(0);
    p.nb.region_mut(mb).data[..8].fill(0);
    for (node, mem, peer) in [(&mut p.na, ma, mb), (&mut p.nb, mb, ma)] {
        for i in 0..REQUESTS {
            let slot = i % 32;
            let w = if i % 2 == 0 {
                wr(
                    i,
                    SendOp::Read {
                        remote_addr: VA + 64 + 16 * slot,
                        rkey: peer,
                    },
                    &[sge(VA + 2048 + 16 * slot, 16, mem)],
                )
            } else {
                wr(
                    i,
                    SendOp::FetchAdd {
                        remote_addr: VA,
                        rkey: peer,
                        add: 1,
                        add_mask: 0,
                    },
                    &[sge(VA + 8, 8, mem)],
                )
            };
            node.sq.push_back(w);
        }
    }
    p.pump();
    for cq in [&p.na.cq, &p.nb.cq] {
        let got: Vec<_> = cq.iter().map(|c| (c.wr_id, c.status)).collect();
        let want: Vec<_> = (0..REQUESTS).map(|i| (i, WcStatus::Success)).collect();
        assert_eq!(got, want);
    }
    let word = |d: &[u8], at: usize| u64::from_ne_bytes(d[at..at + 8].try_into().unwrap());
    for (mem, node) in [(ma, &p.na), (mb, &p.nb)] {
        let d = &node.region(mem).data;
        // Every Fetch-and-Add of the peer landed; ours saw the last value.
        assert_eq!(word(d, 0), REQUESTS / 2);
        assert_eq!(word(d, 8), REQUESTS / 2 - 1);
    }
    assert!(!p.a.is_terminated() && !p.b.is_terminated());
    (
        p.na.cq,
        p.nb.cq,
        p.na.mrs[(ma >> 8) as usize].data.clone(),
        p.nb.mrs[(mb >> 8) as usize].data.clone(),
        p.sent,
    )
}

#[test]
fn heap_slot_storage_behaves_like_inline() {
    for setup in setups() {
        let inline = read_atomic_exchange(Pair::new(setup));
        let depth = usize::from(MAX_DEPTH);
        let heap = read_atomic_exchange(Pair::with_slots(
            setup,
            VecSlots::new(depth),
            VecSlots::new(depth),
        ));
        assert_eq!(inline, heap, "{setup:?}");
    }
}

/// Every work request in `ids` completed exactly once, none successfully.
fn all_failed_once(cq: &[Completion], ids: &[u64]) {
    let mut got: Vec<u64> = cq.iter().map(|c| c.wr_id).collect();
    got.sort_unstable();
    assert_eq!(got, ids, "{cq:?}");
    assert!(cq.iter().all(|c| c.status != WcStatus::Success), "{cq:?}");
}

fn requests(node: &mut Node, rkey: u32, sink: u32) {
    for (i, op) in [
        SendOp::Read {
            remote_addr: 0,
            rkey,
        },
        SendOp::FetchAdd {
            remote_addr: 0,
            rkey,
            add: 1,
            add_mask: 0,
        },
        SendOp::Read {
            remote_addr: 8,
            rkey,
        },
        SendOp::FetchAdd {
            remote_addr: 8,
            rkey,
            add: 1,
            add_mask: 0,
        },
    ]
    .into_iter()
    .enumerate()
    {
        node.sq
            .push_back(wr(i as u64 + 1, op, &[sge(VA + 8 * i as u64, 8, sink)]));
    }
}

#[test]
fn short_slot_storage_fails_requests_cleanly() {
    let setup = Setup {
        ord: 4,
        ird: 4,
        ..Setup::default()
    };
    // The requester has one slot: the second request cannot be tracked, so
    // it fails locally before it is sent, and the rest flush.
    let mut p = Pair::with_slots(
        setup,
        VecSlots::new(1),
        VecSlots::new(usize::from(MAX_DEPTH)),
    );
    let remote = p.nb.mr(64, 0, ALL);
    let sink = p.na.mr(64, VA, LOCAL_WRITE);
    requests(&mut p.na, remote, sink);
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![err(2, WcOpcode::FetchAdd, WcStatus::LocQpOpErr)]
    );
    assert_eq!(p.a.termination(), Some(TermError::RdmapLocalCatastrophic));
    assert!(p.b.peer_terminated());
    // The Fetch-and-Add never reached the peer.
    assert!(p.nb.region(remote).data.iter().all(|&b| b == 0));
    p.a.flush(&mut p.na);
    p.b.flush(&mut p.nb);
    all_failed_once(&p.na.cq, &[1, 2, 3, 4]);
    p.a.flush(&mut p.na);
    assert_eq!(p.na.cq.len(), 4);

    // The responder has one slot: the second request terminates the stream
    // before it is executed.
    let mut p = Pair::with_slots(
        setup,
        VecSlots::new(usize::from(MAX_DEPTH)),
        VecSlots::new(1),
    );
    let remote = p.nb.mr(64, 0, ALL);
    let sink = p.na.mr(64, VA, LOCAL_WRITE);
    requests(&mut p.na, remote, sink);
    p.pump();
    assert_eq!(p.b.termination(), Some(TermError::RdmapCatastrophicStream));
    assert!(p.a.peer_terminated());
    assert!(p.nb.region(remote).data.iter().all(|&b| b == 0));
    p.a.flush(&mut p.na);
    p.b.flush(&mut p.nb);
    all_failed_once(&p.na.cq, &[1, 2, 3, 4]);

    // No storage at all.
    let mut p = Pair::with_slots(setup, VecSlots::new(0), VecSlots::new(0));
    let remote = p.nb.mr(64, 0, ALL);
    let sink = p.na.mr(64, VA, LOCAL_WRITE);
    requests(&mut p.na, remote, sink);
    p.pump();
    p.a.flush(&mut p.na);
    all_failed_once(&p.na.cq, &[1, 2, 3, 4]);
    assert_eq!(p.na.cq[0], err(1, WcOpcode::RdmaRead, WcStatus::LocQpOpErr));

    // Slots rotate through all MAX_DEPTH entries whatever the ORD: with ORD 1
    // and one slot, the first Read works, the second (slot 1) cannot.
    let mut p = Pair::with_slots(
        Setup {
            ord: 1,
            ..Setup::default()
        },
        VecSlots::new(1),
        VecSlots::new(1),
    );
    let remote = p.nb.mr(64, 0, ALL);
    p.nb.fill(remote, 3);
    let sink = p.na.mr(64, VA, LOCAL_WRITE);
    for i in 0..2 {
        p.na.sq.push_back(wr(
            i,
            SendOp::Read {
                remote_addr: 0,
                rkey: remote,
            },
            &[sge(VA, 8, sink)],
        ));
    }
    p.pump();
    assert_eq!(
        p.na.cq,
        vec![
            ok(0, WcOpcode::RdmaRead, 8),
            err(1, WcOpcode::RdmaRead, WcStatus::LocQpOpErr)
        ]
    );
    assert_eq!(&p.na.region(sink).data[..8], &p.nb.region(remote).data[..8]);
}
