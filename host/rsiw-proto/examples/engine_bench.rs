// SPDX-License-Identifier: GPL-2.0

//! Throughput of the pure data path, natively: how fast [`QpEngine::receive`]
//! places a realistic FPDU stream and [`QpEngine::transmit`] produces one,
//! and how often each [`QpContext`] callback runs per MiB of payload.
//!
//! A peer engine produces the FPDUs of 64 KiB RDMA Writes, of 64 KiB Sends
//! into posted receives and of the Read Responses to 64 KiB RDMA Reads, with
//! the FPDU size the kernel uses on loopback (MSS 65483, FPDUs of 65480
//! bytes) and with Ethernet-sized 1448-byte FPDUs. The receiving engine is
//! fed the stream in 16 KiB pieces, as the kernel's `data_ready` does. CRC
//! is off, as in the slow case measured in the VM; a counting CRC engine
//! checks that no byte is hashed then. Two references bound the result: a
//! plain `memcpy` of the payload in the same pieces, and the kernel's
//! pattern of copying each piece into a bounce buffer before handing it to
//! the engine.
//!
//! Run with `cargo run --release --example engine_bench [-- seconds [filter]]`;
//! `filter` picks the cases whose name (such as `Write/1448`) contains it.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rsiw_proto::proto::crc32c::{Crc32c, SoftCrc32c};
use rsiw_proto::proto::placement::{AccessFlags, Grant, MemoryRegion, StagState};
use rsiw_proto::proto::qp_engine::*;
use rsiw_proto::proto::segmenter::fpdu_size;
use rsiw_proto::proto::terminate::TermError;

const PD: u32 = 3;
const LOCAL_WRITE: u32 = 1;
const REMOTE_WRITE: u32 = 2;
const REMOTE_READ: u32 = 4;
const ALL: u32 = LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ;

/// Payload of every message.
const MSG: usize = 64 * 1024;
/// Messages per stream (4 MiB of payload).
const MSGS: usize = 64;
/// The pieces `receive` is fed in.
const PIECE: usize = 16 * 1024;
/// The transmit buffer.
const TX_BUF: usize = 64 * 1024;
const MIB: f64 = 1024.0 * 1024.0;

/// Bytes hashed by [`CountingCrc`], to show that CRC work is skipped when
/// CRC is off.
static CRC_BYTES: AtomicU64 = AtomicU64::new(0);

/// [`SoftCrc32c`] that counts the bytes it hashes.
#[derive(Debug, Clone, Copy, Default)]
struct CountingCrc;

impl Crc32c for CountingCrc {
    fn crc32c_update(&self, state: u32, data: &[u8]) -> u32 {
        CRC_BYTES.fetch_add(data.len() as u64, Ordering::Relaxed);
        SoftCrc32c.crc32c_update(state, data)
    }
}

/// Calls of each callback, with the bytes of the data-moving ones.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    lookup_stag: u64,
    tagged_write: u64,
    tagged_write_bytes: u64,
    tagged_write_max: u64,
    tagged_read: u64,
    tagged_read_bytes: u64,
    local_write: u64,
    local_write_bytes: u64,
    local_write_max: u64,
    local_read: u64,
    local_read_bytes: u64,
    pop_recv: u64,
    complete: u64,
    peek_send: u64,
}

#[derive(Debug, Clone)]
struct Mr {
    stag: u32,
    access: u32,
    base: u64,
    data: Vec<u8>,
}

/// An in-memory RNIC that counts the engine's callbacks.
#[derive(Debug, Default)]
struct Node {
    mrs: Vec<Mr>,
    sq: VecDeque<SendRequest>,
    rq: VecDeque<RecvRequest>,
    n: Counts,
}

impl Node {
    /// Adds a region and returns its STag (index << 8 | key).
    fn mr(&mut self, len: usize, base: u64, access: u32) -> u32 {
        let stag = (u32::try_from(self.mrs.len()).unwrap() + 1) << 8 | 0x5a;
        if self.mrs.is_empty() {
            self.mrs.push(Mr {
                stag: 0,
                access: 0,
                base: 0,
                data: Vec::new(),
            });
        }
        let data = (0..len).map(|i| (i as u8).wrapping_mul(13)).collect();
        self.mrs.push(Mr {
            stag,
            access,
            base,
            data,
        });
        stag
    }

    fn local(&mut self, sge: &Sge, offset: u32, len: usize) -> Result<(&mut Mr, usize), WcStatus> {
        let mr = self
            .mrs
            .get_mut((sge.lkey >> 8) as usize)
            .filter(|mr| mr.stag == sge.lkey)
            .ok_or(WcStatus::LocProtErr)?;
        if u64::from(offset) + len as u64 > u64::from(sge.length) {
            return Err(WcStatus::LocLenErr);
        }
        let start = sge.addr - mr.base + u64::from(offset);
        Ok((mr, start as usize))
    }

    /// Re-checks `grant` as a driver does on every access: the region's lookup is part of
    /// what a tagged access costs.
    fn recheck(&mut self, grant: &Grant) -> Result<u64, TermError> {
        let region = self.lookup_stag(grant.access.stag);
        grant.recheck(region.as_ref(), PD)
    }

    fn tagged(&mut self, stag: u32, offset: u64, len: usize) -> Result<&mut [u8], TermError> {
        let mr = self
            .mrs
            .get_mut((stag >> 8) as usize)
            .ok_or(TermError::DdpInvalidStag)?;
        let start = offset as usize;
        mr.data
            .get_mut(start..start + len)
            .ok_or(TermError::DdpBaseBounds)
    }
}

impl QpContext for Node {
    type Sge = Sge;

    fn peek_send(&mut self) -> Option<SendRequest> {
        self.n.peek_send += 1;
        self.sq.front().copied()
    }

    fn pop_send(&mut self) {
        self.sq.pop_front();
    }

    fn pop_recv(&mut self) -> Option<RecvRequest> {
        self.n.pop_recv += 1;
        self.rq.pop_front()
    }

    fn complete(&mut self, c: Completion) {
        assert_eq!(c.status, WcStatus::Success, "{c:?}");
        self.n.complete += 1;
    }

    fn local_read(&mut self, sge: &Sge, offset: u32, out: &mut [u8]) -> Result<(), WcStatus> {
        self.n.local_read += 1;
        self.n.local_read_bytes += out.len() as u64;
        let (mr, start) = self.local(sge, offset, out.len())?;
        out.copy_from_slice(&mr.data[start..start + out.len()]);
        Ok(())
    }

    fn local_write(&mut self, sge: &Sge, offset: u32, data: &[u8]) -> Result<(), WcStatus> {
        self.n.local_write += 1;
        self.n.local_write_bytes += data.len() as u64;
        self.n.local_write_max = self.n.local_write_max.max(data.len() as u64);
        let (mr, start) = self.local(sge, offset, data.len())?;
        mr.data[start..start + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn lookup_stag(&mut self, stag: u32) -> Option<MemoryRegion> {
        self.n.lookup_stag += 1;
        let mr = self.mrs.get((stag >> 8) as usize)?;
        Some(MemoryRegion {
            stag: mr.stag,
            state: StagState::Valid,
            pd: PD,
            access: AccessFlags::from_ib(mr.access),
            base: mr.base,
            len: mr.data.len() as u64,
            zero_based: false,
            epoch: 0,
        })
    }

    fn tagged_read(&mut self, grant: &Grant, out: &mut [u8]) -> Result<(), TermError> {
        self.n.tagged_read += 1;
        self.n.tagged_read_bytes += out.len() as u64;
        let offset = self.recheck(grant)?;
        let len = out.len();
        out.copy_from_slice(self.tagged(grant.access.stag, offset, len)?);
        Ok(())
    }

    fn tagged_write(&mut self, grant: &Grant, data: &[u8]) -> Result<(), TermError> {
        self.n.tagged_write += 1;
        self.n.tagged_write_bytes += data.len() as u64;
        self.n.tagged_write_max = self.n.tagged_write_max.max(data.len() as u64);
        let offset = self.recheck(grant)?;
        self.tagged(grant.access.stag, offset, data.len())?
            .copy_from_slice(data);
        Ok(())
    }

    fn tagged_atomic(&mut self, _: &Grant, _: AtomicOp) -> Result<u64, TermError> {
        Err(TermError::RdmapLocalCatastrophic)
    }

    fn invalidate_remote(&mut self, _: u32) -> Result<(), TermError> {
        Err(TermError::RdmapLocalCatastrophic)
    }

    fn invalidate_local(&mut self, _: u32) -> Result<(), WcStatus> {
        Ok(())
    }

    fn register(&mut self, _: u32, _: u32, _: u64, _: u64) -> Result<(), WcStatus> {
        Ok(())
    }
}

type Engine = QpEngine<CountingCrc>;

fn engine(fpdu: usize) -> Engine {
    QpEngine::new(
        EngineConfig {
            crc: false,
            fpdu_size: fpdu,
            pd: PD,
            ird: 128,
            ord: 128,
            rtr: RtrState::None,
        },
        CountingCrc,
    )
}

/// Everything `transmit` produces, in 64 KiB calls, and the time it took.
fn drain(e: &mut Engine, node: &mut Node) -> (Vec<u8>, Duration) {
    let mut stream = Vec::new();
    let mut out = vec![0u8; TX_BUF];
    let mut spent = Duration::ZERO;
    loop {
        let t = Instant::now();
        let n = e.transmit(node, &mut out);
        spent += t.elapsed();
        if n == 0 {
            return (stream, spent);
        }
        stream.extend_from_slice(&out[..n]);
    }
}

/// Feeds `stream` in [`PIECE`]-byte pieces, copying each into a bounce
/// buffer first if `bounce` (as the kernel does).
#[inline(never)]
fn feed(e: &mut Engine, node: &mut Node, stream: &[u8], bounce: Option<&mut [u8]>) {
    match bounce {
        None => {
            for piece in stream.chunks(PIECE) {
                assert_eq!(e.receive(piece, node), Ok(piece.len()));
            }
        }
        Some(buf) => {
            for piece in stream.chunks(PIECE) {
                let b = &mut buf[..piece.len()];
                b.copy_from_slice(piece);
                assert_eq!(e.receive(b, node), Ok(piece.len()));
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Write,
    Send,
    ReadResponse,
}

/// A receiver ready for `stream`, the data sink's STag for the caller's
/// check, and the peer's transmit time for it.
struct Round {
    rx: Engine,
    node: Node,
    stream: Vec<u8>,
    tx_time: Duration,
    sink: u32,
}

/// Sets up one round of [`MSGS`] messages of `kind`: the receiver's memory
/// and queues, and the peer's FPDU stream towards it.
fn round(kind: Kind, fpdu: usize) -> Round {
    let mut rx = engine(fpdu);
    let mut node = Node::default();
    let mut peer = engine(fpdu);
    let mut pnode = Node::default();
    let src = pnode.mr(MSG, 0x10_0000, ALL);
    let sink = node.mr(MSG, 0x20_0000, ALL);
    let wr = |op, sge| SendRequest {
        wr_id: 1,
        op,
        sges: SgeList::single(sge),
        signaled: false,
        fence: false,
    };
    let len = MSG as u32;
    match kind {
        Kind::Write => {
            for _ in 0..MSGS {
                let op = SendOp::Write {
                    remote_addr: 0x20_0000,
                    rkey: sink,
                };
                pnode.sq.push_back(wr(
                    op,
                    Sge {
                        addr: 0x10_0000,
                        length: len,
                        lkey: src,
                    },
                ));
            }
        }
        Kind::Send => {
            for _ in 0..MSGS {
                let op = SendOp::Send {
                    solicited: false,
                    invalidate: None,
                };
                pnode.sq.push_back(wr(
                    op,
                    Sge {
                        addr: 0x10_0000,
                        length: len,
                        lkey: src,
                    },
                ));
                node.rq.push_back(RecvRequest {
                    wr_id: 2,
                    sges: SgeList::single(Sge {
                        addr: 0x20_0000,
                        length: len,
                        lkey: sink,
                    }),
                });
            }
        }
        Kind::ReadResponse => {
            for _ in 0..MSGS {
                let op = SendOp::Read {
                    remote_addr: 0x10_0000,
                    rkey: src,
                };
                node.sq.push_back(wr(
                    op,
                    Sge {
                        addr: 0x20_0000,
                        length: len,
                        lkey: sink,
                    },
                ));
            }
            let (requests, _) = drain(&mut rx, &mut node);
            assert_eq!(peer.receive(&requests, &mut pnode), Ok(requests.len()));
            assert_eq!(node.sq.len(), 0);
        }
    }
    let (stream, tx_time) = drain(&mut peer, &mut pnode);
    assert!(!peer.is_terminated());
    node.n = Counts::default();
    Round {
        rx,
        node,
        stream,
        tx_time,
        sink,
    }
}

fn mbps(bytes: u64, t: Duration) -> f64 {
    bytes as f64 / 1e6 / t.as_secs_f64()
}

/// Receives rounds of `kind` for about `budget`; prints MB/s of payload and
/// the callback counts per MiB.
fn bench(kind: Kind, fpdu: usize, budget: Duration) {
    let mut rx_time = [Duration::ZERO; 2];
    let mut tx_time = Duration::ZERO;
    let mut rounds = [0u64; 2];
    let mut counts = Counts::default();
    let mut stream_len = 0;
    let mut bounce = vec![0u8; PIECE];
    let crc_before = CRC_BYTES.load(Ordering::Relaxed);
    let started = Instant::now();
    let mut i = 0;
    while started.elapsed() < budget || i < 4 {
        let with_bounce = i % 2 == 1;
        let mut r = round(kind, fpdu);
        stream_len = r.stream.len();
        let t = Instant::now();
        feed(
            &mut r.rx,
            &mut r.node,
            &r.stream,
            with_bounce.then_some(&mut bounce[..]),
        );
        rx_time[usize::from(with_bounce)] += t.elapsed();
        rounds[usize::from(with_bounce)] += 1;
        tx_time += r.tx_time;
        assert!(!r.rx.is_terminated());
        let data = &r.node.mrs[(r.sink >> 8) as usize].data;
        assert_eq!(data[MSG - 1], ((MSG - 1) as u8).wrapping_mul(13));
        if i == 0 {
            counts = r.node.n;
        }
        black_box(&r.node);
        i += 1;
    }
    let payload = (MSG * MSGS) as u64;
    let crc = CRC_BYTES.load(Ordering::Relaxed) - crc_before;
    println!(
        "{kind:?}, FPDU {fpdu}: stream {stream_len} B for {payload} B payload ({} FPDUs/msg)",
        (MSG as f64 / (fpdu as f64 - 40.0)).ceil()
    );
    println!(
        "  receive:            {:8.0} MB/s   (+bounce copy: {:8.0} MB/s)   transmit: {:8.0} MB/s",
        mbps(payload * rounds[0], rx_time[0]),
        mbps(payload * rounds[1], rx_time[1]),
        mbps(payload * (rounds[0] + rounds[1]), tx_time),
    );
    let per_mib = |n: u64| n as f64 / (payload as f64 / MIB);
    let c = counts;
    println!(
        "  per MiB: lookup_stag {:.1}, tagged_write {:.1} (avg {:.0} B, max {}), \
         local_write {:.1} (avg {:.0} B, max {}), pop_recv {:.1}, complete {:.1}, \
         CRC bytes hashed {crc}",
        per_mib(c.lookup_stag),
        per_mib(c.tagged_write),
        c.tagged_write_bytes as f64 / c.tagged_write.max(1) as f64,
        c.tagged_write_max,
        per_mib(c.local_write),
        c.local_write_bytes as f64 / c.local_write.max(1) as f64,
        c.local_write_max,
        per_mib(c.pop_recv),
        per_mib(c.complete),
    );
}

/// `memcpy` of the payload in [`PIECE`]-byte pieces into a 64 KiB buffer.
fn memcpy_reference(budget: Duration) {
    let src = vec![7u8; MSG * MSGS];
    let mut dst = vec![0u8; MSG];
    let started = Instant::now();
    let mut rounds = 0u64;
    while started.elapsed() < budget {
        for (i, piece) in src.chunks(PIECE).enumerate() {
            let at = (i * PIECE) % MSG;
            dst[at..at + piece.len()].copy_from_slice(piece);
            black_box(&mut dst);
        }
        rounds += 1;
    }
    println!(
        "memcpy reference: {:8.0} MB/s",
        mbps((MSG * MSGS) as u64 * rounds, started.elapsed())
    );
}

/// One 8-byte Send at a time, as a latency test makes them: the sender's
/// `transmit` of it (and the empty call after), the receiver's `receive`
/// and its empty `transmit`. Prints nanoseconds per message.
fn small_sends(budget: Duration) {
    let fpdu = fpdu_size(65483, 1);
    let mut tx = engine(fpdu);
    let mut rx = engine(fpdu);
    let mut tnode = Node::default();
    let mut rnode = Node::default();
    let src = tnode.mr(64, 0x10_0000, ALL);
    let sink = rnode.mr(64, 0x20_0000, ALL);
    let mut out = vec![0u8; TX_BUF];
    let mut n = 0u64;
    let mut spent = [Duration::ZERO; 2];
    let started = Instant::now();
    while started.elapsed() < budget {
        tnode.sq.push_back(SendRequest {
            wr_id: n,
            op: SendOp::Send {
                solicited: false,
                invalidate: None,
            },
            sges: SgeList::single(Sge {
                addr: 0x10_0000,
                length: 8,
                lkey: src,
            }),
            signaled: true,
            fence: false,
        });
        rnode.rq.push_back(RecvRequest {
            wr_id: n,
            sges: SgeList::single(Sge {
                addr: 0x20_0000,
                length: 64,
                lkey: sink,
            }),
        });
        let t = Instant::now();
        let len = tx.transmit(&mut tnode, &mut out);
        assert_eq!(tx.transmit(&mut tnode, &mut out[len..]), 0);
        let t2 = Instant::now();
        assert_eq!(rx.receive(&out[..len], &mut rnode), Ok(len));
        assert_eq!(rx.transmit(&mut rnode, &mut out[len..]), 0);
        spent[0] += t2 - t;
        spent[1] += t2.elapsed();
        n += 1;
    }
    black_box(&rnode);
    println!(
        "8-byte Sends: {n} messages; transmit {:.0} ns, receive {:.0} ns per message",
        spent[0].as_nanos() as f64 / n as f64,
        spent[1].as_nanos() as f64 / n as f64
    );
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let budget = Duration::from_secs_f64(secs);
    let filter = std::env::args().nth(2).unwrap_or_default();
    if filter.is_empty() {
        memcpy_reference(budget);
    }
    if filter.is_empty() || filter == "small" {
        small_sends(budget);
    }
    let loopback = fpdu_size(65483, 1);
    for fpdu in [loopback, 1448] {
        for kind in [Kind::Write, Kind::Send, Kind::ReadResponse] {
            if format!("{kind:?}/{fpdu}").contains(&filter) {
                bench(kind, fpdu, budget);
            }
        }
    }
}
