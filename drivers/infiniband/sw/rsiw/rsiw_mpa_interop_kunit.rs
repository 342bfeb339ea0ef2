// SPDX-License-Identifier: GPL-2.0

//! rsiw's MPA connection setup (`proto/mpa_handshake.rs`, RFC 5044 + RFC 6581) against the C
//! siw, on the wire.
//!
//! The C siw is the peer nobody here wrote. It is driven through rdma_cm with the kernel's
//! consumer API (`kernel::rdma::consumer::cm`); our side is a plain kernel TCP socket
//! (`kernel::net::tcp`) running the pure handshake code, as rsiw's connection manager will.
//! Scenario `07-mpa-interop` creates `siw1` on 198.18.0.2 and loads this module.
//!
//! - As initiator: our MPA Request to a C siw listener (client-server model), with and without
//!   CRC, revision 2 and 1; the C siw's ULP sees our private data and IRD/ORD, we see its reply
//!   and private data, its side reaches ESTABLISHED.
//!
//! Peer-to-peer setups against the C siw are not in the suite: they pass, but take the C siw
//! into code with a lock-order bug lockdep reports, and into an iw_cm `BUG()` when the
//! connection is torn down before the RTR (see `Documentation/rsiw.rst`).
//! - As responder: a C siw client connects to our socket; we accept (it reaches ESTABLISHED
//!   with our private data and IRD/ORD) or reject (it sees REJECTED with our private data).

use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use kernel::{
    kunit::suite::Test,
    kunit_expect, kunit_expect_eq,
    net::tcp::{MsgFlags, TcpSocket},
    prelude::*,
    rdma::consumer::{
        cm::{CmEvent, CmId, ConnParam},
        kernel_qp::QpCaps,
    },
    time::msecs_to_jiffies,
};

pub mod proto;

mod kernel_crc32c;
use kernel_crc32c::KernelCrc32c;
mod kunit_socket;
use kunit_socket::sleep_ms;

use proto::{
    mpa::RtrKinds,
    mpa_handshake::{
        Accepted, InitiatorEvent, InitiatorHandshake, ResponderEvent, ResponderHandshake,
        MAX_FRAME_LEN,
    },
    mpa_negotiation::{CrcPolicy, InitiatorConfig, ResponderConfig},
};

module! {
    type: MpaInteropKunit,
    name: "rsiw_mpa_interop_kunit",
    author: "rsiw project",
    description: "rsiw's MPA connection setup against the C siw",
    license: "GPL",
}

struct MpaInteropKunit;

impl kernel::Module for MpaInteropKunit {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(MpaInteropKunit)
    }
}

const SIW: [u8; 4] = [198, 18, 0, 2];
const OUR_DATA: &[u8] = b"rsiw mpa interop";
const SIW_DATA: &[u8] = b"c siw ulp";

fn at(port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(SIW), port))
}

/// Receives what is there (up to `buf.len()`), waiting up to 5 s for the first byte; a closed
/// connection is `ECONNRESET` here.
fn recv_some(sock: &TcpSocket, buf: &mut [u8]) -> Result<usize> {
    match kunit_socket::recv_some(sock, buf)? {
        0 => Err(ECONNRESET),
        n => Ok(n),
    }
}

/// A C siw id with a QP, as iWARP needs one to connect or accept.
fn with_qp(mut id: CmId) -> Result<CmId> {
    let pd = id.device()?.alloc_pd()?;
    id.create_qp(
        &pd,
        QpCaps {
            max_send_wr: 4,
            max_recv_wr: 4,
        },
    )?;
    Ok(id)
}

fn expect_event(test: &mut Test, id: &CmId, name: &str) -> Result<CmEvent> {
    let event = id.next_event(msecs_to_jiffies(5000))?;
    kunit_expect_eq!(test, event.name(), name);
    if event.name() != name {
        return Err(EPROTO);
    }
    Ok(event)
}

fn initiator_config(peer_to_peer: bool, crc: CrcPolicy) -> InitiatorConfig {
    InitiatorConfig {
        crc,
        enhanced: true,
        ird: 8,
        ord: 4,
        max_ird: 16,
        peer_to_peer,
        rtr: RtrKinds {
            send: false,
            write: true,
            read: true,
        },
        // Offered; see `initiator_client_server` for what the C siw makes of it.
        large_fpdus: true,
    }
}

/// Our MPA Request to a C siw listener on `port`; returns the handshake once connected, the
/// socket, and the C siw's id (ESTABLISHED).
fn initiate(
    test: &mut Test,
    port: u16,
    config: InitiatorConfig,
) -> Result<(InitiatorHandshake, TcpSocket, CmId)> {
    let (hs, sock, siw, event) = initiate_until_reply(test, port, config)?;
    match event {
        InitiatorEvent::Connected(decision) => {
            kunit_expect_eq!(test, decision.revision, config.revision());
            kunit_expect!(test, hs.peer_private_data().starts_with(SIW_DATA));
            Ok((hs, sock, siw))
        }
        other => {
            kunit_expect!(test, false, "handshake ended with {:?}", other);
            Err(EPROTO)
        }
    }
}

/// As [`initiate`], up to the handshake's verdict on the C siw's reply, whatever it is.
fn initiate_until_reply(
    test: &mut Test,
    port: u16,
    config: InitiatorConfig,
) -> Result<(InitiatorHandshake, TcpSocket, CmId, InitiatorEvent)> {
    let listener = CmId::new()?;
    listener.bind(&at(port))?;
    listener.listen(1)?;
    let sock = TcpSocket::new(&at(port))?;
    sock.connect(&at(port), false)?;
    let mut hs = InitiatorHandshake::new(config);
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = hs.request(OUR_DATA, &mut frame).map_err(|_| EINVAL)?;
    sock.send(&frame[..len], MsgFlags::NONE)?;

    let CmEvent::ConnectRequest(siw, param) = expect_event(test, &listener, "CONNECT_REQUEST")?
    else {
        return Err(EPROTO);
    };
    // The C siw's ULP gets our private data without the enhanced data, and (revision 2) our
    // IRD/ORD as the limits of its own: its ORD at most our IRD (8), its IRD what our ORD
    // needs (4).
    kunit_expect!(test, param.private_data.starts_with(OUR_DATA));
    if config.enhanced {
        kunit_expect_eq!(test, param.initiator_depth, 8);
        kunit_expect_eq!(test, param.responder_resources, 4);
    }
    let siw = with_qp(siw)?;
    // The request's values are already from the accepting side's point of view.
    siw.accept(&ConnParam {
        private_data: SIW_DATA,
        responder_resources: param.responder_resources,
        initiator_depth: param.initiator_depth,
        ..Default::default()
    })?;

    let mut buf = [0u8; MAX_FRAME_LEN];
    loop {
        let n = recv_some(&sock, &mut buf)?;
        let (used, event) = hs.on_bytes(&buf[..n]).map_err(|_| EINVAL)?;
        // The C siw sends nothing after its reply until it hears from us.
        kunit_expect_eq!(test, used, n);
        if let Some(event) = event {
            return Ok((hs, sock, siw, event));
        }
    }
}

fn initiator_client_server(test: &mut Test) -> Result {
    let (hs, _sock, siw) = initiate(test, 7601, initiator_config(false, CrcPolicy::Optional))?;
    let decision = hs.decision().ok_or(EINVAL)?;
    kunit_expect!(test, !decision.use_crc);
    kunit_expect!(test, decision.rtr.is_none());
    // Our offer of large FPDUs (a reserved bit) does not disturb it. It builds its reply on
    // our request's header and so echoes the bit back, which reads as its offer: its receive
    // path follows MPA lengths across segments, as RFC 5044 receivers must.
    kunit_expect!(test, decision.large_fpdus);
    // The C siw's IRD/ORD in its reply are what its ULP accepted with, and they satisfy
    // RFC 6581: our ORD (4) <= its IRD, its ORD <= our IRD (8).
    let peer = decision.peer.ok_or(EINVAL)?;
    kunit_expect_eq!(test, peer.ird, 4);
    kunit_expect_eq!(test, peer.ord, 8);
    kunit_expect!(test, 4 <= peer.ird && peer.ord <= 8);
    expect_event(test, &siw, "ESTABLISHED")?;
    Ok(())
}

fn initiator_crc_required(test: &mut Test) -> Result {
    let (hs, _sock, siw) = initiate(test, 7603, initiator_config(false, CrcPolicy::Required))?;
    kunit_expect!(test, hs.decision().ok_or(EINVAL)?.use_crc);
    expect_event(test, &siw, "ESTABLISHED")?;
    Ok(())
}

fn initiator_revision_1(test: &mut Test) -> Result {
    let config = InitiatorConfig {
        enhanced: false,
        ..initiator_config(false, CrcPolicy::Optional)
    };
    let (hs, _sock, siw) = initiate(test, 7606, config)?;
    // A revision 1 request gets a revision 1 reply, without RFC 6581 data.
    kunit_expect!(test, hs.decision().ok_or(EINVAL)?.peer.is_none());
    expect_event(test, &siw, "ESTABLISHED")?;
    Ok(())
}

fn responder_config() -> ResponderConfig {
    ResponderConfig {
        crc: CrcPolicy::Optional,
        enhanced: true,
        max_ird: 16,
        ord: 4,
        min_ord: 0,
        rtr: RtrKinds {
            send: true,
            write: true,
            read: true,
        },
        large_fpdus: true,
    }
}

/// A C siw client connecting to our socket on `port`: returns its id, our accepted socket and
/// the handshake at its connection request.
fn respond(
    test: &mut Test,
    port: u16,
) -> Result<(CmId, TcpSocket, ResponderHandshake<KernelCrc32c>)> {
    let listener = TcpSocket::new(&at(port))?;
    listener.set_reuseaddr();
    listener.bind(&at(port))?;
    listener.listen(1)?;
    let client = CmId::new()?;
    client.resolve_addr(None, &at(port), 2000)?;
    expect_event(test, &client, "ADDR_RESOLVED")?;
    client.resolve_route(2000)?;
    expect_event(test, &client, "ROUTE_RESOLVED")?;
    let client = with_qp(client)?;
    client.connect(&ConnParam {
        private_data: SIW_DATA,
        responder_resources: 2,
        initiator_depth: 3,
        ..Default::default()
    })?;
    let mut sock = None;
    for _ in 0..500 {
        match listener.accept(true) {
            Err(e) if e == EAGAIN => sleep_ms(10),
            other => {
                sock = Some(other?);
                break;
            }
        }
    }
    let sock = sock.ok_or(ETIMEDOUT)?;
    let mut hs = ResponderHandshake::new(responder_config(), KernelCrc32c);
    let mut buf = [0u8; MAX_FRAME_LEN];
    loop {
        let n = recv_some(&sock, &mut buf)?;
        let (used, event) = hs.on_bytes(&buf[..n]);
        kunit_expect_eq!(test, used, n);
        match event {
            None => continue,
            Some(ResponderEvent::ConnectRequest(request)) => {
                // The C siw speaks revision 2 with RFC 6581 data, client-server model.
                kunit_expect_eq!(test, request.revision, 2);
                let peer = request.peer.ok_or(EINVAL)?;
                kunit_expect_eq!(test, peer.ird, 2);
                kunit_expect_eq!(test, peer.ord, 3);
                kunit_expect!(test, !peer.peer_to_peer);
                kunit_expect!(test, hs.peer_private_data().starts_with(SIW_DATA));
                break;
            }
            Some(other) => {
                kunit_expect!(test, false, "handshake ended with {:?}", other);
                return Err(EPROTO);
            }
        }
    }
    Ok((client, sock, hs))
}

fn responder_accepts_c_siw_client(test: &mut Test) -> Result {
    let (client, sock, mut hs) = respond(test, 7604)?;
    let mut frame = [0u8; MAX_FRAME_LEN];
    let Accepted {
        len, established, ..
    } = hs.accept(OUR_DATA, 3, 2, &mut frame).map_err(|_| EINVAL)?;
    kunit_expect!(test, established);
    sock.send(&frame[..len], MsgFlags::NONE)?;
    let CmEvent::Established(param) = expect_event(test, &client, "ESTABLISHED")? else {
        return Err(EPROTO);
    };
    kunit_expect!(test, param.private_data.starts_with(OUR_DATA));
    Ok(())
}

fn responder_rejects_c_siw_client(test: &mut Test) -> Result {
    let (client, sock, mut hs) = respond(test, 7605)?;
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = hs.reject(b"no thanks", &mut frame).map_err(|_| EINVAL)?;
    sock.send(&frame[..len], MsgFlags::NONE)?;
    match client.next_event(msecs_to_jiffies(5000))? {
        CmEvent::Rejected(_, data) => {
            kunit_expect!(test, data.starts_with(b"no thanks"));
        }
        other => {
            kunit_expect!(test, false, "got {} instead of REJECTED", other.name());
        }
    }
    Ok(())
}

kernel::kunit_suite!(
    rsiw_mpa_interop,
    [
        initiator_client_server,
        initiator_crc_required,
        initiator_revision_1,
        responder_accepts_c_siw_client,
        responder_rejects_c_siw_client
    ]
);
