// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of `kernel::rdma::consumer::client`, the consumer side of the RDMA core.
//!
//! It needs devices: scenario `04-rdma-client` creates `siw1` (the C siw) and `rsiw0` (ours),
//! both kernel-verbs providers, and then loads this module. On each, PDs come and go.

use kernel::{
    c_str, kunit::suite::Test, kunit_expect, kunit_expect_eq, prelude::*,
    rdma::consumer::client::DeviceRef,
};

module! {
    type: RdmaClientKunit,
    name: "rust_rdma_client_kunit",
    author: "rsiw project",
    description: "KUnit suite of the Rust RDMA consumer abstractions",
    license: "GPL",
}

struct RdmaClientKunit;

impl kernel::Module for RdmaClientKunit {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(RdmaClientKunit)
    }
}

fn device(test: &mut Test, name: &CStr) -> Option<DeviceRef> {
    let dev = DeviceRef::by_name(name);
    kunit_expect!(
        test,
        dev.is_some(),
        "no device {} (made by scenario 04)",
        name
    );
    dev
}

fn c_siw_pds_and_cqs(test: &mut Test) -> Result {
    pds_come_and_go(test, c_str!("siw1"))
}

fn rsiw_pds_come_and_go(test: &mut Test) -> Result {
    pds_come_and_go(test, c_str!("rsiw0"))
}

fn pds_come_and_go(test: &mut Test, name: &CStr) -> Result {
    let Some(dev) = device(test, name) else {
        return Ok(());
    };
    kunit_expect!(test, dev.is_kverbs_provider());
    let mut pds = KVec::new();
    for _ in 0..64 {
        pds.push(dev.alloc_pd()?, GFP_KERNEL)?;
    }
    kunit_expect_eq!(test, pds.len(), 64);
    drop(pds);
    Ok(())
}

fn unknown_device_is_not_found(test: &mut Test) -> Result {
    kunit_expect!(
        test,
        DeviceRef::by_name(c_str!("rsiw-nonexistent")).is_none()
    );
    Ok(())
}

kernel::kunit_suite!(
    rust_rdma_client,
    [
        c_siw_pds_and_cqs,
        rsiw_pds_come_and_go,
        unknown_device_is_not_found
    ]
);
