// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the kernel RDMA ping and, through it, of the consumer API of `kernel::rdma`
//! (rdma_cm, kernel QPs, DMA buffers, fast registration) against providers nobody here wrote.
//!
//! Scenario `06-rdma-ping` creates `siw1` (the C siw) on 198.18.0.2 and `rxe0` (the C rxe,
//! which does atomics and immediate data) on 198.18.0.1, then loads this module. Immediate data
//! is not tried on the C siw: it refuses the opcode at posting but leaves the refused entry
//! marked in its send queue, so every later post fails with `ENOMEM`.

use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use kernel::{
    c_str,
    kunit::suite::Test,
    kunit_expect, kunit_expect_eq,
    prelude::*,
    rdma::consumer::{
        client::{AtomicCap, DeviceRef},
        kernel_qp::WcStatus,
    },
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
        rxe_all_operations
    ]
);
