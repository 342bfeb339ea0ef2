// SPDX-License-Identifier: GPL-2.0

//! rpcrdma2: RPC-over-RDMA for the kernel's RPC client and server, in Rust.
//!
//! Loading the module registers the client transport class "rdma": ident
//! `XPRT_TRANSPORT_RDMA` (256), netids "rdma" and "rdma6", which `mount -o proto=rdma`
//! asks for, and the server transport class "rdma" (ident 256), which `echo "rdma 20049" >
//! /proc/fs/nfsd/portlist` asks for, with the client class of its connections' NFSv4.1
//! backchannel (ident 256 ored with `XPRT_TRANSPORT_BC`, which nfsd's callback clients ask
//! for). The C `rpcrdma` module registers the same idents and
//! name: only one of the two can be loaded, and loading this one while the C one is fails
//! (`EBUSY`: modprobe takes `EEXIST` for "already loaded") with a message that says so.
//!
//! The client probes each server for RPC-over-RDMA Version 2 and falls back to Version 1 if
//! the server refuses it (`version=1`: Version 1 only); the server speaks to each client in
//! the version of its first message, 1 or 2.
//!
//! With `coexist=1` the module serves only, beside the C module: it registers the server
//! class "rdma2" with an ident of its own (`echo "rdma2 20050" > /proc/fs/nfsd/portlist`), its
//! backchannel class, and no client class for mounts.
//!
//! The wire formats and protocol rules are the pure protocol core in [`proto`], shared with the
//! host crate where they are tested and fuzzed; [`client`] and [`server`] are the transports
//! that drive them. Documentation: `Documentation/rpcrdma2.rst`.

use crate::proto::{properties::DEFAULT_MAX_SEGMENT_SIZE, version::Version};
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{
    error::code::{EBUSY, EEXIST},
    module_param::StrParam,
    page::PAGE_SIZE,
    prelude::*,
    rdma::consumer::device_removal,
    sunrpc::{
        svc_xprt_class,
        xprt_class::{Registration, TransportClass},
    },
};

pub mod proto;

mod client;
mod debugfs;
mod devices;
mod server;

kernel::module_param_str!(INLINE_THRESHOLD, "inline_threshold");
kernel::module_param_str!(SERVER_INLINE_THRESHOLD, "server_inline_threshold");
kernel::module_param_str!(SERVER_MAX_SEGMENT_SIZE, "server_max_segment_size");
kernel::module_param_str!(COEXIST, "coexist");
kernel::module_param_str!(VERSION, "version");
kernel::module_param_str!(REVERSE_INLINE_THRESHOLD, "reverse_inline_threshold");

/// The highest RPC-over-RDMA version the client speaks (`modprobe rpcrdma2 version=1`): with
/// 2, the default, it probes for Version 2 on each new transport; with 1 it never probes.
fn version(param: &StrParam) -> Result<Version> {
    let Some(text) = param.get() else {
        return Ok(Version::V2);
    };
    match text.to_str().map(str::trim) {
        Ok("1") => Ok(Version::V1),
        Ok("2" | "") => Ok(Version::V2),
        _ => {
            pr_err!("version is 1 or 2, not {text}\n");
            Err(EINVAL)
        }
    }
}

/// Whether the module serves beside the C `rpcrdma` (`modprobe rpcrdma2 coexist=1`).
fn coexist(param: &StrParam) -> Result<bool> {
    let Some(text) = param.get() else {
        return Ok(false);
    };
    match text.to_str().map(str::trim) {
        Ok("1" | "y" | "Y") => Ok(true),
        Ok("0" | "n" | "N" | "") => Ok(false),
        _ => {
            pr_err!("coexist is 0 or 1, not {text}\n");
            Err(EINVAL)
        }
    }
}

/// A size in bytes given at load time as `name`, from `min` to `max`; `default` when not given.
fn bytes_param(param: &StrParam, name: &str, (min, max): (u32, u32), default: u32) -> Result<u32> {
    let Some(text) = param.get() else {
        return Ok(default);
    };
    match text.to_str().ok().and_then(|t| t.trim().parse().ok()) {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => {
            pr_err!("{name} is from {min} to {max} bytes, not {text}\n");
            Err(EINVAL)
        }
    }
}

/// An inline threshold given at load time as `name` (`modprobe rpcrdma2 inline_threshold=1024`,
/// `server_inline_threshold=1024` for the server alone): from RFC 8166's minimum, 1024 bytes,
/// to the size of the transport's buffers; `default` when not given.
fn inline_threshold(param: &StrParam, name: &str, default: u32) -> Result<u32> {
    bytes_param(param, name, (1024, client::INLINE_SIZE), default)
}

/// The largest RDMA segment the server tells Version 2 clients it takes (`RSSIZ`,
/// `modprobe rpcrdma2 server_max_segment_size=262144`): from one page to the draft's default,
/// 1 MiB, which it is when not given.
fn max_segment_size(param: &StrParam) -> Result<u32> {
    let max = DEFAULT_MAX_SEGMENT_SIZE;
    bytes_param(
        param,
        "server_max_segment_size",
        (PAGE_SIZE as u32, max),
        max,
    )
}

/// The smallest `reverse_inline_threshold`: a header without chunks and some payload.
const REVERSE_THRESHOLD_MIN: u32 = 64;

/// The largest Send of a reverse-direction message (`modprobe rpcrdma2
/// reverse_inline_threshold=80`; 0, the default, when not given): when both sides take
/// continued reverse-direction messages (`RDMA2_RVRSDIR_CONT`), callbacks and their replies
/// longer than this go continued even where the peer's receive buffer would take them whole.
/// A test aid: NFSv4.1 callbacks are far smaller than any receive buffer.
static REVERSE_THRESHOLD: AtomicUsize = AtomicUsize::new(0);

fn set_reverse_threshold(bytes: u32) {
    REVERSE_THRESHOLD.store(bytes as usize, Ordering::Relaxed);
}

/// The largest Send of a reverse-direction message to a peer that receives `peer_limit` bytes
/// inline and takes continued ones: `peer_limit`, or less with `reverse_inline_threshold`.
pub(crate) fn reverse_send_limit(peer_limit: usize) -> usize {
    match REVERSE_THRESHOLD.load(Ordering::Relaxed) {
        0 => peer_limit,
        forced => forced.min(peer_limit),
    }
}

module! {
    type: Rpcrdma2,
    name: "rpcrdma2",
    author: "rsiw project",
    description: "RPC-over-RDMA transport (Version 2 draft-01, RFC 8166) for the kernel RPC client and server, in Rust",
    license: "GPL",
}

/// A server class and its backchannel class. The backchannel class is registered first and
/// unregistered last (the fields drop in order): it is there whenever a connection of the
/// server class may ask for it.
struct Server<T: server::WithBackchannel> {
    _class: Pin<KBox<svc_xprt_class::Registration<T>>>,
    _backchannel: Pin<KBox<Registration<server::BackchannelClass<T>>>>,
}

/// The server class the module registers.
enum ServerRegistration {
    /// "rdma", ident 256.
    Rdma { _server: Server<server::RdmaClass> },
    /// "rdma2", beside the C module (`coexist=1`).
    Rdma2 { _server: Server<server::Rdma2Class> },
}

/// Registers the server class `T` and its backchannel class for `module`; a name or ident
/// that is taken is reported as busy.
fn register_server<T: server::WithBackchannel>(module: &'static ThisModule) -> Result<Server<T>> {
    let backchannel = KBox::pin_init(Registration::new(module), GFP_KERNEL).map_err(|e| {
        if e != EEXIST {
            return e;
        }
        pr_err!(
            "the backchannel transport ident {:#x} is already registered\n",
            <server::BackchannelClass<T> as TransportClass>::IDENT
        );
        EBUSY
    })?;
    let class = KBox::pin_init(svc_xprt_class::Registration::<T>::new(module), GFP_KERNEL)
        .map_err(|e| {
            if e != EEXIST {
                return e;
            }
            pr_err!(
                "server transport class \"{}\" is already registered\n",
                T::NAME.to_str().unwrap_or("?")
            );
            EBUSY
        })?;
    Ok(Server {
        _class: class,
        _backchannel: backchannel,
    })
}

/// The module: the client transport class (unless `coexist=1`), a server transport class and
/// the client of RDMA devices (which hears of device removals), registered while it is loaded,
/// and the transports' debugfs directory. The classes go first: no transport can be created
/// once the device client is gone; the directory goes last, after the transports' files.
struct Rpcrdma2 {
    _server: ServerRegistration,
    _client: Option<Pin<KBox<Registration<client::ClientClass>>>>,
    _devices: device_removal::Registration<devices::Devices>,
    _debugfs: debugfs::Root,
}

impl kernel::Module for Rpcrdma2 {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let threshold =
            inline_threshold(&INLINE_THRESHOLD, "inline_threshold", client::INLINE_SIZE)?;
        client::set_inline_threshold(threshold);
        // The server's own threshold (`server_inline_threshold`), by default the client's.
        server::set_inline_threshold(inline_threshold(
            &SERVER_INLINE_THRESHOLD,
            "server_inline_threshold",
            threshold,
        )?);
        server::set_max_segment_size(max_segment_size(&SERVER_MAX_SEGMENT_SIZE)?);
        set_reverse_threshold(bytes_param(
            &REVERSE_INLINE_THRESHOLD,
            "reverse_inline_threshold",
            (REVERSE_THRESHOLD_MIN, client::INLINE_SIZE),
            0,
        )?);
        let client_version = version(&VERSION)?;
        client::set_version(client_version);
        let devices = device_removal::Registration::new()?;
        let debugfs = debugfs::Root::create();
        if coexist(&COEXIST)? {
            let server = register_server::<server::Rdma2Class>(module)?;
            pr_info!(
                "server transport \"rdma2\" registered (ident {:#x}, RPC-over-RDMA Versions 1 and \
                 2, with its backchannel); \
                 coexist=1: serving only, the client transport is not registered\n",
                server::RDMA2_IDENT
            );
            return Ok(Rpcrdma2 {
                _server: ServerRegistration::Rdma2 { _server: server },
                _client: None,
                _devices: devices,
                _debugfs: debugfs,
            });
        }
        let client = KBox::pin_init(Registration::new(module), GFP_KERNEL).map_err(|e| {
            if e != EEXIST {
                return e;
            }
            pr_err!(
                "transport ident 256 (netids rdma, rdma6) is already registered, by the C \
                 rpcrdma module: unload it first, or load rpcrdma2 with coexist=1 to serve \
                 beside it\n"
            );
            // modprobe takes `EEXIST` from a module's init for "already loaded" and reports
            // success: the class being taken is reported as busy instead.
            EBUSY
        })?;
        pr_info!(
            "client transport \"rdma\" registered (RPC-over-RDMA {}, inline threshold {} \
             bytes)\n",
            match client_version {
                Version::V2 => "Version 2 probed, Version 1 as a fallback",
                Version::V1 => "Version 1 only: version=1",
            },
            client::inline_threshold()
        );
        let server = register_server::<server::RdmaClass>(module)?;
        pr_info!(
            "server transport \"rdma\" registered (ident 256, RPC-over-RDMA Versions 1 and 2, with \
             its backchannel, inline threshold {} bytes, Version 2 segments of up to {} bytes, \
             {} per call)\n",
            server::inline_threshold(),
            server::max_segment_size(),
            server::MAX_SEGMENT_COUNT
        );
        Ok(Rpcrdma2 {
            _server: ServerRegistration::Rdma { _server: server },
            _client: Some(client),
            _devices: devices,
            _debugfs: debugfs,
        })
    }
}
