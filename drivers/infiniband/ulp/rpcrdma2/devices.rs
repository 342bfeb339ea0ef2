// SPDX-License-Identifier: GPL-2.0

//! The module's users of RDMA devices: one per client endpoint and one per server connection.
//!
//! rdma_cm tells an id of its device's removal, then waits until the id is destroyed; it does
//! not wait for the protection domain, the queue pair's completion queue or the mapped buffers
//! that go with it. The module's own client of RDMA devices (an `ib_client`, registered after
//! rdma_cm's, so told first) waits for everything: each endpoint or connection holds a
//! [`DeviceUse`](kernel::rdma::consumer::device_removal::DeviceUse) that it drops last, and
//! the removal closes each and waits until all are dropped.

use kernel::{
    c_str,
    rdma::consumer::device_removal::{DeviceUsers, RemovalClient},
    str::CStr,
};

/// The module's client of RDMA devices.
pub(crate) struct Devices;

static DEVICES: DeviceUsers = DeviceUsers::new();

impl RemovalClient for Devices {
    const NAME: &'static CStr = c_str!("rpcrdma2");
    const USERS: &'static DeviceUsers = &DEVICES;
}
