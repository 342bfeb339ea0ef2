// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the kernel RDMA ping and, through it, of the consumer API of `kernel::rdma`
//! (rdma_cm, kernel QPs, DMA buffers, fast registration) against providers nobody here wrote.
//!
//! Scenario `06-rdma-ping` creates `siw1` (the C siw) on 198.18.0.2 and `rxe0` (the C rxe,
//! which does atomics and immediate data) on 198.18.0.1, then loads this module. Immediate data
//! is not tried on the C siw: it refuses the opcode at posting but leaves the refused entry
//! marked in its send queue, so every later post fails with `ENOMEM`.

use core::{
    net::{Ipv4Addr, SocketAddr, SocketAddrV4},
    sync::atomic::{AtomicU32, Ordering},
};
use kernel::{
    c_str,
    kunit::suite::Test,
    kunit_expect, kunit_expect_eq,
    prelude::*,
    rdma::consumer::{
        client::{AtomicCap, DeviceRef},
        kernel_qp::{CompletionHandler, SendWr, WcOpcode, WcStatus, WorkCompletion},
    },
    sync::{Arc, Completion},
    time::msecs_to_jiffies,
};

// Shared with the sample module, which runs the parts this suite does not.
#[allow(dead_code)]
#[path = "rdma_ping/ping.rs"]
mod ping;

module! {
    type: RdmaPingKunit,
    name: "rust_rdma_ping_kunit",
    author: "rsiw project",
    description: "KUnit suite of the Rust kernel RDMA ping",
    license: "GPL",
}

struct RdmaPingKunit;

impl kernel::Module for RdmaPingKunit {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(RdmaPingKunit)
    }
}

const SIW: [u8; 4] = [198, 18, 0, 2];
const RXE: [u8; 4] = [198, 18, 0, 1];

fn at(ip: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port))
}

fn siw_send_read_write(test: &mut Test) -> Result {
    let mut pair = ping::Pair::connect(at(SIW, 7501))?;
    for _ in 0..4 {
        pair.round()?;
    }
    kunit_expect_eq!(test, pair.rounds, 4);
    // An orderly disconnect reaches both ends.
    pair.client.id.disconnect()?;
    let t = msecs_to_jiffies(5000);
    kunit_expect_eq!(test, pair.client.id.next_event(t)?.name(), "DISCONNECTED");
    kunit_expect_eq!(test, pair.server.id.next_event(t)?.name(), "DISCONNECTED");
    Ok(())
}

fn siw_refuses_atomics_cleanly(test: &mut Test) -> Result {
    let dev = DeviceRef::by_name(c_str!("siw1")).ok_or(ENODEV)?;
    kunit_expect_eq!(test, dev.caps().atomic, AtomicCap::None);
    let mut pair = ping::Pair::connect(at(SIW, 7502))?;
    // Refused before reaching the device, and the connection still runs a round afterwards.
    kunit_expect_eq!(test, pair.atomics()?, false);
    kunit_expect_eq!(test, pair.rounds, 1);
    Ok(())
}

fn siw_stale_key_fails_cleanly(test: &mut Test) -> Result {
    let mut pair = ping::Pair::connect(at(SIW, 7503))?;
    let status = pair.stale_key_write()?;
    kunit_expect!(test, status != WcStatus::SUCCESS);
    Ok(())
}

fn siw_reject_carries_private_data(test: &mut Test) -> Result {
    let data = ping::rejected(at(SIW, 7504), b"busy")?;
    kunit_expect!(test, data.starts_with(b"busy"));
    Ok(())
}

/// What a completion handler was given.
#[pin_data]
struct Seen {
    recvs: AtomicU32,
    recv_bytes: AtomicU32,
    sends: AtomicU32,
    flushed: AtomicU32,
    #[pin]
    doorbell: Completion,
}

impl CompletionHandler for Seen {
    fn completed(&self, wc: &WorkCompletion) {
        let counter = match (wc.status.is_success(), wc.opcode) {
            (false, _) => &self.flushed,
            (true, WcOpcode::Recv) => {
                self.recv_bytes.fetch_add(wc.byte_len, Ordering::Relaxed);
                &self.recvs
            }
            (true, WcOpcode::Send) => &self.sends,
            (true, _) => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.doorbell.complete();
    }
}

impl Seen {
    /// Waits until `counter` reaches `n` (up to about five seconds).
    fn wait_for(&self, counter: &AtomicU32, n: u32) -> Result {
        for _ in 0..50 {
            if counter.load(Ordering::Relaxed) >= n {
                return Ok(());
            }
            self.doorbell.wait_timeout(msecs_to_jiffies(100));
        }
        Err(ETIMEDOUT)
    }
}

fn siw_completions_reach_a_handler(test: &mut Test) -> Result {
    let seen = Arc::pin_init(
        pin_init!(Seen {
            recvs: AtomicU32::new(0),
            recv_bytes: AtomicU32::new(0),
            sends: AtomicU32::new(0),
            flushed: AtomicU32::new(0),
            doorbell <- Completion::new(),
        }),
        GFP_KERNEL,
    )?;
    let pair = ping::Pair::connect_with_handler(at(SIW, 7506), seen.clone())?;
    // A message to the client arrives at its handler, not at its queue.
    let server = &pair.server;
    let message = server.send_slot();
    let len = message.len as u32;
    let send = SendWr::Send {
        local: message,
        solicited: false,
    };
    server.qp()?.post_send(&send, 100)?;
    server.expect_wc(WcOpcode::Send)?;
    seen.wait_for(&seen.recvs, 1)?;
    kunit_expect_eq!(test, seen.recv_bytes.load(Ordering::Relaxed), len);
    kunit_expect!(test, pair.client.qp()?.poll().is_none());
    // The handler's slot was given back first: all receives can be posted again.
    pair.client.post_recv(0)?;
    // The client's own send completes at its handler too.
    let client = &pair.client;
    let send = SendWr::Send {
        local: client.send_slot(),
        solicited: false,
    };
    client.qp()?.post_send(&send, 101)?;
    seen.wait_for(&seen.sends, 1)?;
    kunit_expect_eq!(test, server.wait()?.opcode, WcOpcode::Recv);
    // Teardown flushes the posted receives through the handler.
    drop(pair);
    kunit_expect_eq!(test, seen.flushed.load(Ordering::Relaxed), ping::RECVS);
    kunit_expect_eq!(test, seen.recvs.load(Ordering::Relaxed), 1);
    kunit_expect_eq!(test, seen.sends.load(Ordering::Relaxed), 1);
    Ok(())
}

/// A peer's RDMA Write lands in pages registered from a byte offset: in order across the page
/// boundaries, and nowhere outside the range.
fn siw_writes_land_in_registered_pages(test: &mut Test) -> Result {
    let pair = ping::Pair::connect(at(SIW, 7507))?;
    kunit_expect_eq!(test, pair.write_into_pages(7)?, 0);
    Ok(())
}

fn rxe_writes_land_in_registered_pages(test: &mut Test) -> Result {
    let pair = ping::Pair::connect(at(RXE, 7508))?;
    kunit_expect_eq!(test, pair.write_into_pages(8)?, 0);
    Ok(())
}

/// RDMA Writes read a page's bytes at a time from pages mapped with the local DMA key (no
/// registration) land in order; requests outside the mapping are refused before posting.
fn siw_writes_from_mapped_pages(test: &mut Test) -> Result {
    let pair = ping::Pair::connect(at(SIW, 7509))?;
    kunit_expect_eq!(test, pair.write_from_pages(9)?, 0);
    Ok(())
}

fn rxe_writes_from_mapped_pages(test: &mut Test) -> Result {
    let pair = ping::Pair::connect(at(RXE, 7510))?;
    kunit_expect_eq!(test, pair.write_from_pages(10)?, 0);
    Ok(())
}

/// Unsignaled registrations ride on the next signaled request of their chain: only that one
/// completes, and it releases their slots.
fn siw_registrations_ride(test: &mut Test) -> Result {
    let pair = ping::Pair::connect(at(SIW, 7511))?;
    kunit_expect!(test, pair.registrations_ride(11).is_ok());
    Ok(())
}

fn rxe_registrations_ride(test: &mut Test) -> Result {
    let pair = ping::Pair::connect(at(RXE, 7512))?;
    kunit_expect!(test, pair.registrations_ride(12).is_ok());
    Ok(())
}

fn rxe_all_operations(test: &mut Test) -> Result {
    let dev = DeviceRef::by_name(c_str!("rxe0")).ok_or(ENODEV)?;
    kunit_expect!(test, dev.caps().atomic != AtomicCap::None);
    let mut pair = ping::Pair::connect(at(RXE, 7505))?;
    pair.round()?;
    pair.immediate()?;
    kunit_expect_eq!(test, pair.atomics()?, true);
    pair.round()?;
    kunit_expect_eq!(test, pair.rounds, 2);
    Ok(())
}

kernel::kunit_suite!(
    rust_rdma_ping,
    [
        siw_send_read_write,
        siw_refuses_atomics_cleanly,
        siw_stale_key_fails_cleanly,
        siw_reject_carries_private_data,
        siw_completions_reach_a_handler,
        siw_writes_land_in_registered_pages,
        rxe_writes_land_in_registered_pages,
        siw_writes_from_mapped_pages,
        rxe_writes_from_mapped_pages,
        siw_registrations_ride,
        rxe_registrations_ride,
        rxe_all_operations
    ]
);
