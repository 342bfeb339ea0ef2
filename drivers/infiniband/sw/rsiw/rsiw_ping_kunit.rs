// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of rsiw as a kernel-verbs iWARP device, driven by the kernel RDMA ping
//! (`samples/rust/rdma_ping/ping.rs`) through rdma_cm and iw_cm: rsiw with itself, and rsiw
//! with the C siw on the wire in both directions.
//!
//! Scenario `08-rsiw-ping` creates `rsiw0` on 198.18.0.1 (dummy0) and the C `siw1` on
//! 198.18.0.2 (dummy1), then loads this module.

use core::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
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

#[allow(dead_code)]
#[path = "../../../../samples/rust/rdma_ping/ping.rs"]
mod ping;

module! {
    type: RsiwPingKunit,
    name: "rsiw_ping_kunit",
    author: "rsiw project",
    description: "KUnit suite of rsiw's verbs and data path, with itself and with the C siw",
    license: "GPL",
}

struct RsiwPingKunit;

impl kernel::Module for RsiwPingKunit {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(RsiwPingKunit)
    }
}

const RSIW: [u8; 4] = [198, 18, 0, 1];
const SIW: [u8; 4] = [198, 18, 0, 2];

fn at(ip: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port))
}

/// Four rounds (REG_MR, Send, Read, Write, Send with Invalidate) and an orderly disconnect.
fn rounds_and_disconnect(test: &mut Test, mut pair: ping::Pair) -> Result {
    for _ in 0..4 {
        pair.round()?;
    }
    kunit_expect_eq!(test, pair.rounds, 4);
    pair.client.id.disconnect()?;
    let t = msecs_to_jiffies(5000);
    kunit_expect_eq!(test, pair.client.id.next_event(t)?.name(), "DISCONNECTED");
    kunit_expect_eq!(test, pair.server.id.next_event(t)?.name(), "DISCONNECTED");
    Ok(())
}

fn rsiw_with_itself(test: &mut Test) -> Result {
    let pair = ping::Pair::connect(at(RSIW, 7601))?;
    rounds_and_disconnect(test, pair)
}

fn rsiw_with_itself_over_ipv6(test: &mut Test) -> Result {
    // Scenario 08 gives dummy0 the address fd00::1.
    let addr = SocketAddr::V6(SocketAddrV6::new(
        Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
        7607,
        0,
        0,
    ));
    let pair = ping::Pair::connect(addr)?;
    rounds_and_disconnect(test, pair)
}

fn rsiw_client_siw_server(test: &mut Test) -> Result {
    let pair = ping::Pair::connect_from(Some(at(RSIW, 0)), at(SIW, 7602))?;
    rounds_and_disconnect(test, pair)
}

fn siw_client_rsiw_server(test: &mut Test) -> Result {
    let pair = ping::Pair::connect_from(Some(at(SIW, 0)), at(RSIW, 7603))?;
    rounds_and_disconnect(test, pair)
}

fn rsiw_immediate_and_atomics(test: &mut Test) -> Result {
    let dev = DeviceRef::by_name(c_str!("rsiw0")).ok_or(ENODEV)?;
    kunit_expect_eq!(test, dev.caps().atomic, AtomicCap::Device);
    let mut pair = ping::Pair::connect(at(RSIW, 7604))?;
    pair.round()?;
    pair.immediate()?;
    kunit_expect_eq!(test, pair.atomics()?, true);
    pair.round()?;
    kunit_expect_eq!(test, pair.rounds, 2);
    Ok(())
}

fn rsiw_stale_key_fails_cleanly(test: &mut Test) -> Result {
    let mut pair = ping::Pair::connect(at(RSIW, 7605))?;
    let status = pair.stale_key_write()?;
    kunit_expect!(test, status != WcStatus::SUCCESS);
    Ok(())
}

fn rsiw_reject_carries_private_data(test: &mut Test) -> Result {
    let data = ping::rejected(at(RSIW, 7606), b"busy")?;
    kunit_expect!(test, data.starts_with(b"busy"));
    Ok(())
}

/// A peer's RDMA Write lands in pages registered from a byte offset, on rsiw as the device
/// of both ends, and of either end with the C siw.
fn rsiw_writes_land_in_registered_pages(test: &mut Test) -> Result {
    let pair = ping::Pair::connect(at(RSIW, 7607))?;
    kunit_expect_eq!(test, pair.write_into_pages(1)?, 0);
    let pair = ping::Pair::connect_from(Some(at(RSIW, 0)), at(SIW, 7608))?;
    kunit_expect_eq!(test, pair.write_into_pages(2)?, 0);
    let pair = ping::Pair::connect_from(Some(at(SIW, 0)), at(RSIW, 7609))?;
    kunit_expect_eq!(test, pair.write_into_pages(3)?, 0);
    Ok(())
}

/// RDMA Writes from pages mapped with the local DMA key (no registration), on rsiw as the
/// device of both ends, and of either end with the C siw.
fn rsiw_writes_from_mapped_pages(test: &mut Test) -> Result {
    let pair = ping::Pair::connect(at(RSIW, 7610))?;
    kunit_expect_eq!(test, pair.write_from_pages(4)?, 0);
    let pair = ping::Pair::connect_from(Some(at(RSIW, 0)), at(SIW, 7611))?;
    kunit_expect_eq!(test, pair.write_from_pages(5)?, 0);
    let pair = ping::Pair::connect_from(Some(at(SIW, 0)), at(RSIW, 7612))?;
    kunit_expect_eq!(test, pair.write_from_pages(6)?, 0);
    Ok(())
}

/// Unsignaled registrations ride on the next signaled request of their chain, on rsiw as the
/// device of both ends, and of either end with the C siw.
fn rsiw_registrations_ride(test: &mut Test) -> Result {
    let pair = ping::Pair::connect(at(RSIW, 7613))?;
    kunit_expect!(test, pair.registrations_ride(7).is_ok());
    let pair = ping::Pair::connect_from(Some(at(RSIW, 0)), at(SIW, 7614))?;
    kunit_expect!(test, pair.registrations_ride(8).is_ok());
    let pair = ping::Pair::connect_from(Some(at(SIW, 0)), at(RSIW, 7615))?;
    kunit_expect!(test, pair.registrations_ride(9).is_ok());
    Ok(())
}

kernel::kunit_suite!(
    rsiw_ping,
    [
        rsiw_with_itself,
        rsiw_with_itself_over_ipv6,
        rsiw_client_siw_server,
        siw_client_rsiw_server,
        rsiw_immediate_and_atomics,
        rsiw_stale_key_fails_cleanly,
        rsiw_reject_carries_private_data,
        rsiw_writes_land_in_registered_pages,
        rsiw_writes_from_mapped_pages,
        rsiw_registrations_ride
    ]
);
