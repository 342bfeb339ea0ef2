// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of rsiw's RFC 7306 atomics, through the kernel consumer API.
//!
//! Scenario `10-rsiw-atomics` creates `rsiw0` (198.18.0.1, dummy0) and `rsiw1` (198.18.0.2,
//! dummy1), and the C `siw2` (198.18.0.3, dummy2), then loads this module:
//!
//! - K client QPs on rsiw0 connect to K server QPs on rsiw1 that share one PD and one memory
//!   region; every client keeps M Fetch-and-Adds on one 64-bit word in flight at once. The
//!   word ends at exactly K*M and the original values returned are 0..K*M, each once: rsiw
//!   executes the atomics of all QPs of a device one at a time (`IB_ATOMIC_HCA`).
//! - The same K QPs take a spin lock made of Compare-and-Swap, all contending at once, and
//!   under it increment a counter with RDMA Read and Write: no update is lost.
//! - Masked Fetch-and-Add and Compare-and-Swap on the wire give what RFC 7306 section 5.1
//!   says on a few boundary vectors.
//! - A Fetch-and-Add from rsiw to the C siw, which has no RFC 7306, fails with an error
//!   completion and nothing hangs.

use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use kernel::{
    c_str,
    kunit::suite::Test,
    kunit_expect, kunit_expect_eq,
    prelude::*,
    rdma::consumer::{
        client::{DeviceRef, ProtectionDomain},
        cm::{CmEvent, CmId, ConnParam},
        dma_buffer::DmaBuffer,
        fast_reg::{Access, FastRegMr},
        kernel_qp::{QpCaps, Remote, SendWr, Sge, WcOpcode, WorkCompletion},
    },
    sync::Arc,
    time::{msecs_to_jiffies, Ktime},
};

module! {
    type: RsiwAtomicsKunit,
    name: "rsiw_atomics_kunit",
    author: "rsiw project",
    description: "KUnit suite of rsiw's RFC 7306 atomics",
    license: "GPL",
}

struct RsiwAtomicsKunit;

impl kernel::Module for RsiwAtomicsKunit {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(RsiwAtomicsKunit)
    }
}

const CLIENT: [u8; 4] = [198, 18, 0, 1];
const SERVER: [u8; 4] = [198, 18, 0, 2];
const C_SIW: [u8; 4] = [198, 18, 0, 3];
/// Client QPs.
const K: usize = 4;
/// Fetch-and-Adds each client keeps in flight.
const M: usize = 64;
/// Lock-protected increments per client.
const L: usize = 8;

fn at(ip: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port))
}

fn event(id: &CmId, wanted: &str) -> Result<CmEvent> {
    let e = id.next_event(msecs_to_jiffies(5000))?;
    if e.name() != wanted {
        pr_err!("rsiw atomics: expected {wanted}, got {}\n", e.name());
        return Err(EPROTO);
    }
    Ok(e)
}

/// Waits for the next completion of `id`'s QP.
fn completion(id: &CmId) -> Result<WorkCompletion> {
    id.qp()?.wait(msecs_to_jiffies(5000))
}

/// Waits for a successful completion of `opcode`.
fn expect(id: &CmId, opcode: WcOpcode) -> Result<WorkCompletion> {
    let wc = completion(id)?;
    if !wc.status.is_success() || wc.opcode != opcode {
        pr_err!(
            "rsiw atomics: expected {opcode:?}, got {:?} status {}\n",
            wc.opcode,
            wc.status.raw()
        );
        return Err(EIO);
    }
    Ok(wc)
}

/// One client: its connection and a buffer of result words.
struct Client {
    id: CmId,
    results: Arc<DmaBuffer>,
}

/// K clients connected to K server QPs sharing one PD and a registered target region.
struct Setup {
    clients: KVec<Client>,
    servers: KVec<CmId>,
    _listener: CmId,
    target: Arc<DmaBuffer>,
    _mr: Arc<FastRegMr>,
    remote: Remote,
}

const TARGET_LEN: usize = 64;

fn connect_client(src: [u8; 4], dst: SocketAddr, sends: u32) -> Result<Client> {
    let id = CmId::new()?;
    id.resolve_addr(Some(&at(src, 0)), &dst, 2000)?;
    event(&id, "ADDR_RESOLVED")?;
    id.resolve_route(2000)?;
    event(&id, "ROUTE_RESOLVED")?;
    let pd = id.device()?.alloc_pd()?;
    let results = DmaBuffer::new(&pd, M * 8)?;
    let mut id = id;
    id.create_qp(
        &pd,
        QpCaps {
            max_send_wr: sends,
            max_recv_wr: 1,
        },
    )?;
    id.connect(&ConnParam {
        responder_resources: 16,
        initiator_depth: 16,
        ..Default::default()
    })?;
    Ok(Client { id, results })
}

fn setup(port: u16) -> Result<Setup> {
    let listener = CmId::new()?;
    listener.bind(&at(SERVER, port))?;
    listener.listen(K as i32)?;
    let dev = DeviceRef::by_name(c_str!("rsiw1")).ok_or(ENODEV)?;
    let pd: Arc<ProtectionDomain> = dev.alloc_pd()?;
    let target = DmaBuffer::new(&pd, TARGET_LEN)?;
    // A buffer may straddle a page boundary: two pages.
    let mr = FastRegMr::new(&pd, 2)?;
    let mut clients = KVec::new();
    let mut servers = KVec::new();
    for _ in 0..K {
        let client = connect_client(CLIENT, at(SERVER, port), M as u32)?;
        let CmEvent::ConnectRequest(mut server, param) = event(&listener, "CONNECT_REQUEST")?
        else {
            return Err(EPROTO);
        };
        server.create_qp(
            &pd,
            QpCaps {
                max_send_wr: 4,
                max_recv_wr: 1,
            },
        )?;
        server.accept(&ConnParam {
            responder_resources: param.responder_resources,
            initiator_depth: param.initiator_depth,
            ..Default::default()
        })?;
        event(&server, "ESTABLISHED")?;
        event(&client.id, "ESTABLISHED")?;
        clients.push(client, GFP_KERNEL)?;
        servers.push(server, GFP_KERNEL)?;
    }
    target.write(0, &[0u8; TARGET_LEN])?;
    let first = servers.first().ok_or(EINVAL)?;
    first.qp()?.post_send(
        &SendWr::RegMr {
            mr: &mr,
            buffer: &target,
            access: Access::LOCAL_WRITE
                | Access::REMOTE_READ
                | Access::REMOTE_WRITE
                | Access::REMOTE_ATOMIC,
        },
        1,
    )?;
    expect(first, WcOpcode::RegMr)?;
    let remote = Remote {
        addr: mr.iova(),
        rkey: mr.rkey(),
    };
    Ok(Setup {
        clients,
        servers,
        _listener: listener,
        target,
        _mr: mr,
        remote,
    })
}

fn word(buffer: &DmaBuffer, offset: usize) -> Result<u64> {
    let mut w = [0u8; 8];
    buffer.read(offset, &mut w)?;
    Ok(u64::from_ne_bytes(w))
}

fn fetch_add_from_k_qps_is_exact(test: &mut Test) -> Result {
    let s = setup(7701)?;
    let start = Ktime::ktime_get();
    // Every client posts all of its M Fetch-and-Adds, interleaved across the clients.
    for i in 0..M {
        for c in s.clients.iter() {
            c.id.qp()?.post_send(
                &SendWr::FetchAdd {
                    local: Sge {
                        buffer: &c.results,
                        offset: i * 8,
                        len: 8,
                    },
                    remote: s.remote,
                    add: 1,
                },
                i as u64,
            )?;
        }
    }
    for c in s.clients.iter() {
        for _ in 0..M {
            expect(&c.id, WcOpcode::FetchAdd)?;
        }
    }
    // A figure for `make bench` (kunit/bench/30-atomics.sh), not a check.
    let ns = (Ktime::ktime_get() - start).to_ns().max(1);
    pr_info!(
        "BENCH atomic_fetch_add_rate_4qp ops/s rsiw {}\n",
        (K * M) as i64 * 1_000_000_000 / ns
    );
    kunit_expect_eq!(test, word(&s.target, 0)?, (K * M) as u64);
    // The original values are 0..K*M, each exactly once.
    let mut seen = KVec::from_elem(false, K * M, GFP_KERNEL)?;
    let mut distinct = true;
    for c in s.clients.iter() {
        for i in 0..M {
            let v = word(&c.results, i * 8)? as usize;
            match seen.get_mut(v) {
                Some(slot) if !*slot => *slot = true,
                _ => distinct = false,
            }
        }
    }
    kunit_expect!(
        test,
        distinct,
        "an original value came back twice or out of range"
    );
    kunit_expect!(test, seen.iter().all(|s| *s));
    drop(s.servers);
    Ok(())
}

fn compare_swap_lock_loses_no_update(test: &mut Test) -> Result {
    let s = setup(7702)?;
    const UNLOCKED: u64 = 0;
    let lock = s.remote;
    let counter = Remote {
        addr: s.remote.addr + 8,
        rkey: s.remote.rkey,
    };
    let mut done = [0usize; K];
    let mut contended = 0u32;
    while done.iter().any(|d| *d < L) {
        // Every client that still has work tries to take the lock at once.
        for (k, c) in s.clients.iter().enumerate() {
            if done[k] < L {
                c.id.qp()?.post_send(
                    &SendWr::CmpSwap {
                        local: Sge {
                            buffer: &c.results,
                            offset: 0,
                            len: 8,
                        },
                        remote: lock,
                        compare: UNLOCKED,
                        swap: k as u64 + 1,
                    },
                    0,
                )?;
            }
        }
        for (k, c) in s.clients.iter().enumerate() {
            if done[k] >= L {
                continue;
            }
            expect(&c.id, WcOpcode::CmpSwap)?;
            if word(&c.results, 0)? != UNLOCKED {
                contended += 1;
                continue;
            }
            // Holding the lock: counter += 1 with a Read and a Write, then release.
            let local = |offset| Sge {
                buffer: &c.results,
                offset,
                len: 8,
            };
            let qp = c.id.qp()?;
            qp.post_send(
                &SendWr::Read {
                    local: local(8),
                    remote: counter,
                },
                1,
            )?;
            expect(&c.id, WcOpcode::RdmaRead)?;
            let value = word(&c.results, 8)? + 1;
            c.results.write(16, &value.to_ne_bytes())?;
            qp.post_send(
                &SendWr::Write {
                    local: local(16),
                    remote: counter,
                },
                2,
            )?;
            expect(&c.id, WcOpcode::RdmaWrite)?;
            qp.post_send(
                &SendWr::CmpSwap {
                    local: local(24),
                    remote: lock,
                    compare: k as u64 + 1,
                    swap: UNLOCKED,
                },
                3,
            )?;
            expect(&c.id, WcOpcode::CmpSwap)?;
            kunit_expect_eq!(test, word(&c.results, 24)?, k as u64 + 1);
            done[k] += 1;
        }
    }
    kunit_expect_eq!(test, word(&s.target, 8)?, (K * L) as u64);
    kunit_expect_eq!(test, word(&s.target, 0)?, UNLOCKED);
    kunit_expect!(test, contended > 0, "the lock was never contended");
    Ok(())
}

fn masked_atomics_match_rfc_7306(test: &mut Test) -> Result {
    let s = setup(7703)?;
    let c = s.clients.first().ok_or(EINVAL)?;
    let local = || Sge {
        buffer: &c.results,
        offset: 0,
        len: 8,
    };
    // A latency figure for `make bench`: one Fetch-and-Add at a time, round trip each.
    const ROUNDS: i64 = 200;
    let start = Ktime::ktime_get();
    for i in 0..ROUNDS {
        c.id.qp()?.post_send(
            &SendWr::FetchAdd {
                local: local(),
                remote: s.remote,
                add: 1,
            },
            i as u64,
        )?;
        expect(&c.id, WcOpcode::FetchAdd)?;
    }
    let ns = (Ktime::ktime_get() - start).to_ns();
    pr_info!(
        "BENCH atomic_fetch_add_lat us rsiw {}.{:03}\n",
        ns / ROUNDS / 1000,
        ns / ROUNDS % 1000
    );
    kunit_expect_eq!(test, word(&s.target, 0)?, ROUNDS as u64);
    // Masked Fetch-and-Add: two 32-bit fields; the low field's carry stops at bit 31.
    s.target.write(0, &0x0000_0001_ffff_ffffu64.to_ne_bytes())?;
    c.id.qp()?.post_send(
        &SendWr::MaskedFetchAdd {
            local: local(),
            remote: s.remote,
            add: 0x0000_0001_0000_0001,
            field_boundary: 0x8000_0000_8000_0000,
        },
        1,
    )?;
    expect(&c.id, WcOpcode::MaskedFetchAdd)?;
    kunit_expect_eq!(test, word(&c.results, 0)?, 0x0000_0001_ffff_ffff);
    kunit_expect_eq!(test, word(&s.target, 0)?, 0x0000_0002_0000_0000);
    // Masked Compare-and-Swap: compare the low byte only, swap the high byte only.
    s.target.write(0, &0x1122_3344_5566_7788u64.to_ne_bytes())?;
    c.id.qp()?.post_send(
        &SendWr::MaskedCmpSwap {
            local: local(),
            remote: s.remote,
            compare: 0xffff_ffff_ffff_ff88,
            compare_mask: 0xff,
            swap: 0xaa00_0000_0000_0000,
            swap_mask: 0xff00_0000_0000_0000,
        },
        2,
    )?;
    expect(&c.id, WcOpcode::MaskedCmpSwap)?;
    kunit_expect_eq!(test, word(&s.target, 0)?, 0xaa22_3344_5566_7788);
    // A compare that fails leaves the word alone.
    c.id.qp()?.post_send(
        &SendWr::MaskedCmpSwap {
            local: local(),
            remote: s.remote,
            compare: 0x00,
            compare_mask: 0xff,
            swap: 0,
            swap_mask: !0,
        },
        3,
    )?;
    expect(&c.id, WcOpcode::MaskedCmpSwap)?;
    kunit_expect_eq!(test, word(&c.results, 0)?, 0xaa22_3344_5566_7788);
    kunit_expect_eq!(test, word(&s.target, 0)?, 0xaa22_3344_5566_7788);
    Ok(())
}

fn atomic_to_c_siw_fails_cleanly(test: &mut Test) -> Result {
    let listener = CmId::new()?;
    listener.bind(&at(C_SIW, 7704))?;
    listener.listen(1)?;
    let client = connect_client(CLIENT, at(C_SIW, 7704), 4)?;
    let CmEvent::ConnectRequest(mut server, param) = event(&listener, "CONNECT_REQUEST")? else {
        return Err(EPROTO);
    };
    let pd = server.device()?.alloc_pd()?;
    server.create_qp(
        &pd,
        QpCaps {
            max_send_wr: 4,
            max_recv_wr: 1,
        },
    )?;
    server.accept(&ConnParam {
        responder_resources: param.responder_resources,
        initiator_depth: param.initiator_depth,
        ..Default::default()
    })?;
    event(&server, "ESTABLISHED")?;
    event(&client.id, "ESTABLISHED")?;
    client.id.qp()?.post_send(
        &SendWr::FetchAdd {
            local: Sge {
                buffer: &client.results,
                offset: 0,
                len: 8,
            },
            remote: Remote {
                addr: 0,
                rkey: 0x100,
            },
            add: 1,
        },
        1,
    )?;
    // The C siw does not know the opcode and terminates the stream: an error completion.
    let wc = completion(&client.id)?;
    kunit_expect!(test, !wc.status.is_success());
    Ok(())
}

kernel::kunit_suite!(
    rsiw_atomics,
    [
        fetch_add_from_k_qps_is_exact,
        compare_swap_lock_loses_no_update,
        masked_atomics_match_rfc_7306,
        atomic_to_c_siw_fails_cleanly
    ]
);
