// SPDX-License-Identifier: GPL-2.0

//! rpcrdma2: RPC-over-RDMA for the kernel's RPC client (and, later, its server), in Rust.
//!
//! Loading the module registers the client transport class "rdma": ident
//! `XPRT_TRANSPORT_RDMA` (256), netids "rdma" and "rdma6", which `mount -o proto=rdma` asks
//! for. The C `rpcrdma` module registers the same ident: only one of the two can be loaded, and
//! loading this one while the C one is fails (`EBUSY`: modprobe takes `EEXIST` for "already
//! loaded") with a message that says so.
//!
//! The wire formats and protocol rules are the pure protocol core in [`proto`], shared with the
//! host crate where they are tested and fuzzed; [`client`] is the transport that drives them.
//! Documentation: `Documentation/rpcrdma2.rst`.

use kernel::{
    error::code::{EBUSY, EEXIST},
    module_param::StrParam,
    prelude::*,
    rdma::consumer::device_removal,
    sunrpc::xprt_class::Registration,
};

pub mod proto;

mod client;

kernel::module_param_str!(INLINE_THRESHOLD, "inline_threshold");

/// The inline threshold given at load time (`modprobe rpcrdma2 inline_threshold=1024`): from
/// RFC 8166's minimum, 1024 bytes, to the size of the transport's buffers, which is the default.
fn inline_threshold(param: &StrParam) -> Result<u32> {
    let (min, max) = (1024, client::INLINE_SIZE);
    let Some(text) = param.get() else {
        return Ok(max);
    };
    match text.to_str().ok().and_then(|t| t.trim().parse().ok()) {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => {
            pr_err!("inline_threshold is from {min} to {max} bytes, not {text}\n");
            Err(EINVAL)
        }
    }
}

module! {
    type: Rpcrdma2,
    name: "rpcrdma2",
    author: "rsiw project",
    description: "RPC-over-RDMA transport (RFC 8166) for the kernel RPC client, in Rust",
    license: "GPL",
}

/// The module: the client transport class, and its client of RDMA devices (which hears of
/// device removals), registered while it is loaded. The class goes first: no transport can be
/// created once the device client is gone.
struct Rpcrdma2 {
    _client: Pin<KBox<Registration<client::ClientClass>>>,
    _devices: device_removal::Registration<client::ClientDevices>,
}

impl kernel::Module for Rpcrdma2 {
    fn init(module: &'static ThisModule) -> Result<Self> {
        client::set_inline_threshold(inline_threshold(&INLINE_THRESHOLD)?);
        let devices = device_removal::Registration::new()?;
        let client = KBox::pin_init(Registration::new(module), GFP_KERNEL).map_err(|e| {
            if e != EEXIST {
                return e;
            }
            pr_err!(
                "transport ident 256 (netids rdma, rdma6) is already registered, by the C \
                 rpcrdma module: unload it first\n"
            );
            // modprobe takes `EEXIST` from a module's init for "already loaded" and reports
            // success: the class being taken is reported as busy instead.
            EBUSY
        })?;
        pr_info!(
            "client transport \"rdma\" registered (RPC-over-RDMA Version 1, inline threshold \
             {} bytes)\n",
            client::inline_threshold()
        );
        Ok(Rpcrdma2 {
            _client: client,
            _devices: devices,
        })
    }
}
