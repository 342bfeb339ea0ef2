// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of `kernel::rdma::client`, the consumer side of the RDMA core.
//!
//! It needs devices: scenario `04-rdma-client` creates `siw1` (the C siw, a full kernel-verbs
//! provider) and `rsiw0` (ours, which has no data path yet) and then loads this module. On the
//! C siw, PDs come and go; on rsiw0 the same calls must fail cleanly with
//! `EOPNOTSUPP` — the RDMA core itself would call a missing op there.

use kernel::{
    c_str, kunit::suite::Test, kunit_expect, kunit_expect_eq, prelude::*, rdma::client::DeviceRef,
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
    let Some(dev) = device(test, c_str!("siw1")) else {
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

fn rsiw_without_data_path_refuses_cleanly(test: &mut Test) -> Result {
    let Some(dev) = device(test, c_str!("rsiw0")) else {
        return Ok(());
    };
    kunit_expect!(test, !dev.is_kverbs_provider());
    kunit_expect_eq!(test, dev.alloc_pd().err(), Some(EOPNOTSUPP));
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
        rsiw_without_data_path_refuses_cleanly,
        unknown_device_is_not_found
    ]
);
