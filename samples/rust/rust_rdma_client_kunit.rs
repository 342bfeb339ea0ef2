// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of `kernel::rdma::consumer::client` and `device_removal`, the consumer side of
//! the RDMA core.
//!
//! It needs devices: scenario `04-rdma-client` creates `siw1` (the C siw) and `rsiw0` (ours),
//! both kernel-verbs providers, and then loads this module. On each, PDs come and go, and a
//! device client's removal reaches each use of a device and waits for it.

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    c_str,
    kunit::suite::Test,
    kunit_expect, kunit_expect_eq, new_mutex,
    prelude::*,
    rdma::consumer::{
        client::DeviceRef,
        device_removal::{DeviceUse, DeviceUsers, Registration, RemovalClient, RemovalHandler},
    },
    str::CStr,
    sync::{Arc, Mutex},
    workqueue::{self, impl_has_work, new_work, Work, WorkItem},
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

/// The device client of the removal test.
struct TestClient;

static TEST_USERS: DeviceUsers = DeviceUsers::new();

impl RemovalClient for TestClient {
    const NAME: &'static CStr = c_str!("rust_rdma_client_kunit");
    const USERS: &'static DeviceUsers = &TEST_USERS;
}

/// A user of a device that lets go of it from a work item once told of its removal, as a ULP
/// closes a connection from its own context.
#[pin_data]
struct Holder {
    removals: AtomicU32,
    #[pin]
    held: Mutex<Option<DeviceUse>>,
    #[pin]
    work: Work<Holder>,
}

impl_has_work! {
    impl HasWork<Self> for Holder { self.work }
}

impl WorkItem for Holder {
    type Pointer = Arc<Holder>;

    fn run(this: Arc<Holder>) {
        let gone = this.held.lock().take();
        drop(gone);
    }
}

/// The removal handler of a [`Holder`]'s use.
struct Notice {
    holder: Arc<Holder>,
}

impl RemovalHandler for Notice {
    fn device_removed(&self) {
        self.holder.removals.fetch_add(1, Ordering::SeqCst);
        // Queued once: a use is told once.
        let _ = workqueue::system().enqueue(self.holder.clone());
    }
}

/// A holder of a use of `device` by [`TestClient`].
fn holder(device: &DeviceRef) -> Result<Arc<Holder>> {
    let holder = Arc::pin_init(
        pin_init!(Holder {
            removals: AtomicU32::new(0),
            held <- new_mutex!(None),
            work <- new_work!("rust_rdma_client_kunit::Holder::work"),
        }),
        GFP_KERNEL,
    )?;
    let notice = Arc::new(
        Notice {
            holder: holder.clone(),
        },
        GFP_KERNEL,
    )?;
    *holder.held.lock() = Some(DeviceUse::new::<TestClient>(device, notice)?);
    Ok(holder)
}

/// Unregistering the client removes it from every device: each use is told once, and the
/// unregistration returns only once each was dropped. Registering twice is refused, and so is
/// a use without a registered client.
fn removal_reaches_every_use(test: &mut Test) -> Result {
    let (Some(rsiw), Some(siw)) = (device(test, c_str!("rsiw0")), device(test, c_str!("siw1")))
    else {
        return Ok(());
    };
    let registration = Registration::<TestClient>::new()?;
    kunit_expect!(test, Registration::<TestClient>::new().err() == Some(EBUSY));
    let holders = [holder(&rsiw)?, holder(&rsiw)?, holder(&siw)?];
    drop(registration);
    for holder in &holders {
        kunit_expect_eq!(test, holder.removals.load(Ordering::SeqCst), 1);
        kunit_expect!(test, holder.held.lock().is_none());
    }
    kunit_expect!(test, holder(&rsiw).err() == Some(EINVAL));
    // Registered again, uses are taken again.
    let registration = Registration::<TestClient>::new()?;
    let again = holder(&siw)?;
    drop(registration);
    kunit_expect_eq!(test, again.removals.load(Ordering::SeqCst), 1);
    kunit_expect!(test, again.held.lock().is_none());
    Ok(())
}

kernel::kunit_suite!(
    rust_rdma_client,
    [
        c_siw_pds_and_cqs,
        rsiw_pds_come_and_go,
        unknown_device_is_not_found,
        removal_reaches_every_use
    ]
);
