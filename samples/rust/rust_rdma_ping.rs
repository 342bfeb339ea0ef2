// SPDX-License-Identifier: GPL-2.0

//! A kernel RDMA ping: `modprobe rust_rdma_ping addr=198.18.0.1[:port]` connects a client to a
//! listener on that address (an address of an RDMA device's netdev) and runs ping rounds
//! (Send/Recv, fast registration, RDMA Read, RDMA Write, Send with Invalidate, each verified
//! byte for byte; see `rdma_ping/ping.rs`) until the module is removed. On a device with
//! atomics (the C rxe), each connection first checks Write and Send with Immediate, FetchAdd
//! and CmpSwap by value. When the device goes away
//! (`rdma link del`) the connection is torn down and the ping retries every 200 ms.
//!
//! Progress goes to the kernel log: one line per connection with the rounds it ran.

use core::{
    net::{Ipv4Addr, SocketAddr, SocketAddrV4},
    sync::atomic::{AtomicBool, AtomicU32, Ordering},
};
use kernel::{
    prelude::*,
    rdma::consumer::client::AtomicCap,
    sync::{Arc, Completion},
    time::msecs_to_jiffies,
    workqueue::{self, impl_has_work, new_work, Work, WorkItem},
};

// Shared with the KUnit suite, which runs the parts this module does not.
#[allow(dead_code)]
#[path = "rdma_ping/ping.rs"]
mod ping;

module! {
    type: RdmaPing,
    name: "rust_rdma_ping",
    author: "rsiw project",
    description: "In-kernel RDMA ping over rdma_cm, written in Rust",
    license: "GPL",
}

kernel::module_param_str!(ADDR, "addr");

/// The port used when `addr` names none.
const DEFAULT_PORT: u16 = 7471;

#[pin_data]
struct Worker {
    stop: AtomicBool,
    rounds: AtomicU32,
    #[pin]
    wake: Completion,
    #[pin]
    exited: Completion,
    addr: SocketAddr,
    #[pin]
    work: Work<Worker>,
}

impl_has_work! {
    impl HasWork<Self> for Worker { self.work }
}

impl WorkItem for Worker {
    type Pointer = Arc<Worker>;

    fn run(this: Arc<Worker>) {
        run(&this, this.addr);
    }
}

struct RdmaPing {
    worker: Arc<Worker>,
}

fn parse_addr() -> Result<SocketAddr> {
    let text = ADDR.get().ok_or(EINVAL)?.to_str().map_err(|_| EINVAL)?;
    if let Ok(sa) = text.parse::<SocketAddr>() {
        return Ok(sa);
    }
    let ip = text.parse::<Ipv4Addr>().map_err(|_| EINVAL)?;
    Ok(SocketAddr::V4(SocketAddrV4::new(ip, DEFAULT_PORT)))
}

/// Once per connection, on a device with atomics: Write and Send with Immediate, FetchAdd and
/// CmpSwap, each verified (see `ping.rs`).
fn extended_operations(pair: &mut ping::Pair) -> Result {
    if pair.server.id.device()?.caps().atomic == AtomicCap::None {
        return Ok(());
    }
    pair.immediate()?;
    if !pair.atomics()? {
        return Err(EPROTO);
    }
    pr_info!("immediate data and atomics verified\n");
    Ok(())
}

fn run(worker: &Worker, sa: SocketAddr) {
    while !worker.stop.load(Ordering::Relaxed) {
        match ping::Pair::connect(sa) {
            Ok(mut pair) => {
                pr_info!("connected on {}\n", sa);
                let mut result = extended_operations(&mut pair);
                while result.is_ok() && !worker.stop.load(Ordering::Relaxed) {
                    result = pair.round();
                    if result.is_ok() {
                        worker.rounds.fetch_add(1, Ordering::Relaxed);
                    }
                }
                pr_info!(
                    "connection ended after {} rounds ({:?})\n",
                    pair.rounds,
                    result.err()
                );
            }
            Err(e) => pr_info!("cannot connect on {}: {:?}\n", sa, e),
        }
        worker.wake.wait_timeout(msecs_to_jiffies(200));
    }
    worker.exited.complete_all();
}

impl kernel::Module for RdmaPing {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let sa = parse_addr().inspect_err(|_| {
            pr_err!("give addr=IPv4[:port] or addr=[IPv6]:port\n");
        })?;
        let worker = Arc::pin_init(
            pin_init!(Worker {
                stop: AtomicBool::new(false),
                rounds: AtomicU32::new(0),
                wake <- Completion::new(),
                exited <- Completion::new(),
                addr: sa,
                work <- new_work!("rust_rdma_ping"),
            }),
            GFP_KERNEL,
        )?;
        // A fresh work item is never queued already.
        let _ = workqueue::system_long().enqueue(worker.clone());
        Ok(RdmaPing { worker })
    }
}

impl Drop for RdmaPing {
    fn drop(&mut self) {
        self.worker.stop.store(true, Ordering::Relaxed);
        self.worker.wake.complete_all();
        self.worker.exited.wait();
        pr_info!(
            "stopped, {} rounds in all\n",
            self.worker.rounds.load(Ordering::Relaxed)
        );
    }
}
