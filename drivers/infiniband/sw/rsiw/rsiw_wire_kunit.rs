// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of rsiw's driver against a crafted peer on a real socket.
//!
//! Scenario `12-rsiw-wire` creates `rsiw0` (198.18.0.1, dummy0) and loads this module. Each
//! case listens through rdma_cm on rsiw0 and plays the remote peer itself with a kernel TCP
//! socket and the pure protocol code (`proto/`): bad MPA requests must be refused without a
//! connection request reaching the ULP, and bad FPDUs on an established connection must be
//! answered with the TERMINATE RFC 5040/5041 prescribe while the ULP sees the connection end.

use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use kernel::{
    kunit::suite::Test,
    kunit_expect, kunit_expect_eq,
    net::tcp::{MsgFlags, TcpSocket},
    prelude::*,
    rdma::{
        client::ProtectionDomain,
        cm::{CmEvent, CmId, ConnParam},
        dma_buffer::DmaBuffer,
        fast_reg::{Access, FastRegMr},
        kernel_qp::{QpCaps, SendWr, WcOpcode},
    },
    sync::Arc,
    time::msecs_to_jiffies,
};

pub mod proto;

mod kernel_crc32c;
use kernel_crc32c::KernelCrc32c;
mod kunit_socket;
use kunit_socket::recv_some;

use proto::{
    atomic::{AtomicOpcode, AtomicRequestHeader},
    mpa::{encode_frame, EnhancedData, FrameKind, MpaFlags, MpaFrame, RtrKinds},
    mpa_handshake::{InitiatorEvent, InitiatorHandshake, MAX_FRAME_LEN},
    mpa_negotiation::{CrcPolicy, InitiatorConfig},
    ord_ird::{Requester, Responder},
    placement::MemoryRegion,
    rx_engine::{RxContext, RxEngine, RxEvent},
    segmenter::fpdu_size,
    terminate::TermError,
    tx_engine::{TxEngine, WorkRequest},
};

module! {
    type: RsiwWireKunit,
    name: "rsiw_wire_kunit",
    author: "rsiw project",
    description: "rsiw's driver against a crafted peer on a real socket",
    license: "GPL",
}

struct RsiwWireKunit;

impl kernel::Module for RsiwWireKunit {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(RsiwWireKunit)
    }
}

fn at(port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 1), port))
}

fn listener(port: u16) -> Result<CmId> {
    let l = CmId::new()?;
    l.bind(&at(port))?;
    l.listen(1)?;
    Ok(l)
}

fn connect(port: u16) -> Result<TcpSocket> {
    let sock = TcpSocket::new(&at(port))?;
    sock.connect(&at(port), false)?;
    Ok(sock)
}

/// Waits until `sock` is closed by the peer (reading and dropping what comes), or 5 s.
fn closed_by_peer(sock: &TcpSocket) -> bool {
    let mut buf = [0u8; 256];
    for _ in 0..50 {
        match recv_some(sock, &mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e == ETIMEDOUT => return false,
            Err(_) => return true,
        }
    }
    false
}

fn garbage_instead_of_mpa_request_is_dropped(test: &mut Test) -> Result {
    let l = listener(7801)?;
    let sock = connect(7801)?;
    sock.send(&[0x5au8; 64], MsgFlags::NONE)?;
    kunit_expect!(
        test,
        closed_by_peer(&sock),
        "rsiw kept a connection with a bad key"
    );
    kunit_expect!(
        test,
        !l.has_events(),
        "the ULP heard of a garbage connection"
    );
    Ok(())
}

fn markers_are_rejected(test: &mut Test) -> Result {
    let l = listener(7802)?;
    let sock = connect(7802)?;
    let mut frame = [0u8; MAX_FRAME_LEN];
    let flags = MpaFlags {
        markers: true,
        ..Default::default()
    };
    let enhanced = EnhancedData {
        ird: 4,
        ord: 4,
        peer_to_peer: false,
        rtr: RtrKinds::NONE,
    };
    let len = encode_frame(
        &mut frame,
        FrameKind::Request,
        flags,
        2,
        Some(&enhanced),
        b"m",
    )
    .map_err(|_| EINVAL)?;
    sock.send(&frame[..len], MsgFlags::NONE)?;
    let mut reply = [0u8; MAX_FRAME_LEN];
    let n = recv_some(&sock, &mut reply)?;
    match MpaFrame::decode(&reply[..n], FrameKind::Reply) {
        Ok((f, _)) => {
            kunit_expect!(test, f.header.flags.reject, "markers not rejected");
        }
        Err(e) => {
            kunit_expect!(test, false, "no MPA reply to a markers request: {e:?}");
        }
    }
    kunit_expect!(test, !l.has_events());
    Ok(())
}

/// An established connection: rsiw's side (accepted by the ULP, with a QP and no receive
/// posted) and ours (the socket past the MPA exchange).
fn established(
    test: &mut Test,
    port: u16,
) -> Result<(CmId, CmId, TcpSocket, Arc<ProtectionDomain>)> {
    let l = listener(port)?;
    let sock = connect(port)?;
    let mut hs = InitiatorHandshake::new(InitiatorConfig {
        crc: CrcPolicy::Disabled,
        enhanced: true,
        ird: 4,
        ord: 4,
        max_ird: 16,
        peer_to_peer: false,
        rtr: RtrKinds::NONE,
    });
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = hs.request(b"crafted", &mut frame).map_err(|_| EINVAL)?;
    sock.send(&frame[..len], MsgFlags::NONE)?;
    let CmEvent::ConnectRequest(mut server, param) = l.next_event(msecs_to_jiffies(5000))? else {
        return Err(EPROTO);
    };
    kunit_expect!(test, param.private_data.starts_with(b"crafted"));
    let pd = server.device()?.alloc_pd()?;
    server.create_qp(
        &pd,
        QpCaps {
            max_send_wr: 4,
            max_recv_wr: 4,
        },
    )?;
    server.accept(&ConnParam {
        responder_resources: param.responder_resources,
        initiator_depth: param.initiator_depth,
        ..Default::default()
    })?;
    let mut buf = [0u8; MAX_FRAME_LEN];
    loop {
        let n = recv_some(&sock, &mut buf)?;
        if n == 0 {
            return Err(ECONNRESET);
        }
        let (_, event) = hs.on_bytes(&buf[..n]).map_err(|_| EINVAL)?;
        match event {
            None => continue,
            Some(InitiatorEvent::Connected(_)) => break,
            Some(_) => return Err(ECONNREFUSED),
        }
    }
    let e = server.next_event(msecs_to_jiffies(5000))?;
    kunit_expect_eq!(test, e.name(), "ESTABLISHED");
    Ok((l, server, sock, pd))
}

/// The FPDUs of `wr` (payload `payload`), without CRC.
fn fpdus(wr: WorkRequest<'_>, payload: &[u8]) -> Result<KVec<u8>> {
    let mut tx = TxEngine::<KernelCrc32c>::new(None, fpdu_size(1460, 1));
    let mut msg = tx.start(wr).map_err(|_| EINVAL)?;
    let mut wire = KVec::new();
    let mut header = [0u8; proto::tx_engine::MAX_FPDU_HEADER_LEN];
    while let Some(mut fpdu) = msg.next_fpdu(&mut header).map_err(|_| EINVAL)? {
        let start = fpdu.payload_offset as usize;
        let data = payload
            .get(start..start + fpdu.payload_len as usize)
            .ok_or(EINVAL)?;
        fpdu.hash_payload(data);
        wire.extend_from_slice(&header[..fpdu.header_len], GFP_KERNEL)?;
        wire.extend_from_slice(data, GFP_KERNEL)?;
        wire.extend_from_slice(fpdu.trailer().as_bytes(), GFP_KERNEL)?;
    }
    Ok(wire)
}

/// What a crafted peer understands of rsiw's stream: only a TERMINATE.
struct Listen {
    requester: Requester,
    responder: Responder,
    term: Option<TermError>,
}

impl RxContext for Listen {
    fn lookup_stag(&mut self, _stag: u32) -> Option<MemoryRegion> {
        None
    }
    fn place_tagged(&mut self, _stag: u32, _offset: u64, _data: &[u8]) -> Result<(), TermError> {
        Err(TermError::DdpInvalidStag)
    }
    fn recv_buffer(&mut self) -> Option<u64> {
        None
    }
    fn place_untagged(&mut self, _offset: u32, _data: &[u8]) -> Result<(), TermError> {
        Err(TermError::DdpMsnNoBuffer)
    }
    fn requester(&mut self) -> &mut Requester {
        &mut self.requester
    }
    fn responder(&mut self) -> &mut Responder {
        &mut self.responder
    }
    fn deliver(&mut self, event: RxEvent<'_>) -> Result<(), TermError> {
        if let RxEvent::Terminate(m) = event {
            let c = m.control;
            self.term = TermError::from_triple(c.layer, c.error_type, c.error_code);
        }
        Ok(())
    }
    fn read_sink_allows(&mut self, _slot: usize, _stag: u32, _to: u64, _len: usize) -> bool {
        false
    }
}

/// Sends `bytes` on an established connection and returns the TERMINATE rsiw answers with;
/// checks the ULP sees the connection end.
fn terminate_for(test: &mut Test, port: u16, bytes: &[u8]) -> Result<Option<TermError>> {
    let (_l, server, sock, _pd) = established(test, port)?;
    sock.send(bytes, MsgFlags::NONE)?;
    terminate_after(test, &server, &sock)
}

/// Reads rsiw's answer on `sock` up to its TERMINATE; checks the ULP sees the connection end.
fn terminate_after(test: &mut Test, server: &CmId, sock: &TcpSocket) -> Result<Option<TermError>> {
    let mut rx = RxEngine::new(KernelCrc32c, false, 1);
    let mut ctx = Listen {
        requester: Requester::new(4),
        responder: Responder::new(4),
        term: None,
    };
    let mut buf = [0u8; 512];
    while ctx.term.is_none() {
        let n = recv_some(sock, &mut buf)?;
        if n == 0 {
            break;
        }
        let _ = rx.feed(&buf[..n], &mut ctx);
    }
    let e = server.next_event(msecs_to_jiffies(5000))?;
    kunit_expect_eq!(test, e.name(), "DISCONNECTED");
    Ok(ctx.term)
}

fn send_without_receive_terminates(test: &mut Test) -> Result {
    let wire = fpdus(
        WorkRequest::Send {
            len: 16,
            solicited: false,
            invalidate: None,
        },
        &[7u8; 16],
    )?;
    // Posted receives: none (the QP of `established` has none).
    let term = terminate_for(test, 7803, &wire)?;
    kunit_expect_eq!(test, term, Some(TermError::DdpMsnNoBuffer));
    Ok(())
}

fn write_to_unknown_stag_terminates(test: &mut Test) -> Result {
    let wire = fpdus(
        WorkRequest::Write {
            stag: 0x00ab_cd00,
            tagged_offset: 0x1000,
            len: 32,
        },
        &[1u8; 32],
    )?;
    let term = terminate_for(test, 7804, &wire)?;
    kunit_expect_eq!(test, term, Some(TermError::DdpInvalidStag));
    Ok(())
}

fn bad_ddp_version_terminates(test: &mut Test) -> Result {
    let mut wire = fpdus(
        WorkRequest::Send {
            len: 8,
            solicited: false,
            invalidate: None,
        },
        &[2u8; 8],
    )?;
    // Byte 2 is the DDP control field (after the MPA length): its low two bits are the DDP
    // version, 1. Make it 3.
    if let Some(ctrl) = wire.get_mut(2) {
        *ctrl |= 0x03;
    }
    let term = terminate_for(test, 7805, &wire)?;
    kunit_expect_eq!(test, term, Some(TermError::DdpUntaggedInvalidVersion));
    Ok(())
}

/// An Atomic Request against a 64-byte region of rsiw's side registered with `access`:
/// `adjust` shapes the request; returns the TERMINATE rsiw answers with.
fn atomic_terminate(
    test: &mut Test,
    port: u16,
    access: Access,
    adjust: impl FnOnce(&mut AtomicRequestHeader),
) -> Result<Option<TermError>> {
    let (_l, server, sock, pd) = established(test, port)?;
    let target = DmaBuffer::new(&pd, 64)?;
    let mr = FastRegMr::new(&pd, 2)?;
    let qp = server.qp()?;
    qp.post_send(
        &SendWr::RegMr {
            mr: &mr,
            buffer: &target,
            access,
        },
        1,
    )?;
    let wc = qp.wait(msecs_to_jiffies(5000))?;
    kunit_expect!(test, wc.status.is_success() && wc.opcode == WcOpcode::RegMr);
    let mut header = AtomicRequestHeader {
        reserved: 0,
        aopcode: AtomicOpcode::FetchAdd as u8,
        request_id: 1,
        remote_stag: mr.rkey(),
        remote_tagged_offset: mr.iova(),
        add_swap_data: 1,
        add_swap_mask: 0,
        compare_data: 0,
        compare_mask: 0,
    };
    adjust(&mut header);
    let wire = fpdus(WorkRequest::AtomicRequest(header), &[])?;
    sock.send(&wire, MsgFlags::NONE)?;
    terminate_after(test, &server, &sock)
}

const ATOMIC_RIGHTS: Access = Access::REMOTE_ATOMIC;

fn atomic_unsupported_opcode_terminates(test: &mut Test) -> Result {
    let term = atomic_terminate(test, 7806, ATOMIC_RIGHTS, |h| h.aopcode = 0x1)?;
    kunit_expect_eq!(test, term, Some(TermError::RdmapUnexpectedOpcode));
    Ok(())
}

fn atomic_misaligned_terminates(test: &mut Test) -> Result {
    // RFC 7306 section 8.2: RDMAP remote operation error, catastrophic for the stream.
    let term = atomic_terminate(test, 7807, ATOMIC_RIGHTS, |h| h.remote_tagged_offset += 4)?;
    kunit_expect_eq!(test, term, Some(TermError::RdmapCatastrophicStream));
    Ok(())
}

fn atomic_without_atomic_access_terminates(test: &mut Test) -> Result {
    let term = atomic_terminate(
        test,
        7808,
        Access::REMOTE_READ | Access::REMOTE_WRITE,
        |_| {},
    )?;
    kunit_expect_eq!(test, term, Some(TermError::RdmapAccessRights));
    Ok(())
}

fn atomic_out_of_bounds_terminates(test: &mut Test) -> Result {
    let term = atomic_terminate(test, 7809, ATOMIC_RIGHTS, |h| h.remote_tagged_offset += 64)?;
    kunit_expect_eq!(test, term, Some(TermError::RdmapBaseBounds));
    Ok(())
}

fn atomic_to_unknown_stag_terminates(test: &mut Test) -> Result {
    let term = atomic_terminate(test, 7810, ATOMIC_RIGHTS, |h| h.remote_stag = 0x00ab_cd00)?;
    kunit_expect_eq!(test, term, Some(TermError::RdmapInvalidStag));
    Ok(())
}

kernel::kunit_suite!(
    rsiw_wire,
    [
        garbage_instead_of_mpa_request_is_dropped,
        markers_are_rejected,
        send_without_receive_terminates,
        write_to_unknown_stag_terminates,
        bad_ddp_version_terminates,
        atomic_unsupported_opcode_terminates,
        atomic_misaligned_terminates,
        atomic_without_atomic_access_terminates,
        atomic_out_of_bounds_terminates,
        atomic_to_unknown_stag_terminates
    ]
);
