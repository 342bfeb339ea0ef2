// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of rsiw's driver against a crafted peer on a real socket.
//!
//! Scenario `12-rsiw-wire` creates `rsiw0` (198.18.0.1, dummy0) and loads this module. Each
//! case uses rsiw0 through rdma_cm (mostly listening) and plays the remote peer itself with a
//! kernel TCP socket and the pure protocol code (`proto/`): bad MPA requests must be refused
//! without a connection request reaching the ULP, and bad FPDUs on an established connection
//! must be answered with the TERMINATE RFC 5040/5041 prescribe while the ULP sees the
//! connection end.
//!
//! The peer-to-peer model (RFC 6581 sections 8 and 9) is played from both ends. As the
//! responder rsiw takes each RTR kind our request offers alone, answers a Read RTR with a
//! zero-length Read Response as its first FPDU, reports ESTABLISHED and then counts the RTR's
//! message number (a Send of ours completes a receive posted on its QP); an RTR of a kind not
//! negotiated, or one with payload, fails the ULP's accept and is answered with TERMINATE
//! layer 2, type 0, code 7. As the initiator, rdma_cm connects rsiw0 to a plain listening
//! socket of ours: scenario 12 sets rsiw0's `peer_to_peer` to 1 before loading this module and
//! leaves `rtr_kinds` at its default (`send,write,read`: the kinds rsiw accepts as the
//! responder too, so all three are needed above). rsiw sends the Write RTR our reply chooses
//! as its first FPDU before the ULP hears CONNECT_REPLY, and answers a reply offering no RTR it
//! can send with TERMINATE 2/0/7 and a rejected connect. No other case has rsiw initiate, so
//! the setting changes nothing else.
//!
//! IRD and ORD negotiation (RFC 6581 section 9.1, `proto/mpa_negotiation.rs`): as the
//! responder rsiw answers a request with IRD = ORD = 0x3FFF (no automatic negotiation) with
//! 0x3FFF in both fields, sets its IRD to the initiator's ORD capped by `max_ird` and its ORD
//! to what the ULP accepts with capped by the initiator's IRD; the ULP's CONNECT_REQUEST
//! carries the request's values (saturated to 8 bits; rdma_cm reports the peer's IRD as
//! `initiator_depth` and its ORD as `responder_resources`). As the initiator rsiw keeps its
//! depths on a 0x3FFF reply and answers a responder ORD beyond its `max_ird` with TERMINATE
//! 2/0/6 and a rejected connect. rsiw's responder never refuses for insufficient IRD: it asks
//! for no minimum ORD.

use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use kernel::{
    kunit::suite::Test,
    kunit_expect, kunit_expect_eq,
    net::tcp::{MsgFlags, Shutdown, TcpSocket},
    prelude::*,
    rdma::consumer::{
        client::ProtectionDomain,
        cm::{CmEvent, CmId, ConnParam, ReceivedParam},
        dma_buffer::DmaBuffer,
        fast_reg::{Access, FastRegMr},
        kernel_qp::{KernelQp, QpCaps, Remote, SendWr, Sge, WcOpcode, WorkCompletion},
    },
    sync::Arc,
    time::{ktime_ms_delta, msecs_to_jiffies, Ktime},
};

pub mod proto;

mod kernel_crc32c;
use kernel_crc32c::KernelCrc32c;
mod kunit_socket;
use kunit_socket::{recv_some, sleep_ms};

// The cases of a hostile peer, in files of their own under `rsiw_wire_kunit/`.
#[path = "rsiw_wire_kunit/negotiation.rs"]
mod negotiation;
#[path = "rsiw_wire_kunit/peer_to_peer.rs"]
mod peer_to_peer;
#[path = "rsiw_wire_kunit/slow_peer.rs"]
mod slow_peer;
#[path = "rsiw_wire_kunit/tagged_access.rs"]
mod tagged_access;
use negotiation::*;
use peer_to_peer::*;
use slow_peer::{
    slow_handshakes_keep_out_no_connect_and_stall_no_qp,
    trickled_mpa_request_is_closed_by_the_deadline,
    zero_window_then_malformed_fpdu_flushes_and_closes,
    zero_window_then_reading_resumes_transmission,
};
use tagged_access::{
    read_answered_by_one_empty_last_segment_fails, read_answered_by_overlapping_segments_fails,
    read_answered_out_of_order_fails, read_answered_short_fails,
    read_request_with_wrapping_sink_terminates, read_request_with_wrapping_source_terminates,
    stag_indices_do_not_follow_each_other, write_after_deregister_reaches_no_region_at_its_index,
    write_after_invalidate_and_register_again_terminates, write_after_local_invalidate_terminates,
    write_after_send_with_invalidate_on_another_qp_terminates,
};

use proto::{
    atomic::{AtomicOpcode, AtomicRequestHeader},
    ddp::{DdpHeader, QueueNumber},
    fpdu::{encode_fpdu, fpdu_len, LENGTH_FIELD_LEN},
    mpa::{
        encode_frame, EnhancedData, FrameKind, MpaFlags, MpaFrame, RtrKind, RtrKinds,
        NO_NEGOTIATION, REVISION_2,
    },
    mpa_handshake::{
        Accepted, InitiatorEvent, InitiatorHandshake, ReceivedRtr, ResponderEvent,
        ResponderHandshake, MAX_FRAME_LEN, RTR_STAG,
    },
    mpa_negotiation::{CrcPolicy, InitiatorConfig, InitiatorDecision, ResponderConfig},
    ord_ird::{Requester, Responder, MAX_DEPTH},
    placement::{Grant, MemoryRegion},
    rdmap::{
        encode_headers, tagged_header, untagged_header, Opcode, OpcodeHeader, ReadRequestHeader,
        Segment,
    },
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
    let c = client_server_accept(test, port, 4, 4, None)?;
    Ok((c.listener, c.server, c.sock, c.pd))
}

/// A connection rsiw accepted in the client-server model, established.
struct ClientServer {
    sock: TcpSocket,
    server: CmId,
    listener: CmId,
    pd: Arc<ProtectionDomain>,
    /// The CONNECT_REQUEST's parameters, as the ULP saw them.
    request: ReceivedParam,
    /// rsiw's MPA Reply, as our handshake took it.
    reply: InitiatorDecision,
}

/// The ULP's side of a connection request on the listener `l`: the CONNECT_REQUEST, whose
/// private data starts with `private_data`, and a QP for it in a new PD.
fn connect_request(
    test: &mut Test,
    l: &CmId,
    private_data: &[u8],
) -> Result<(CmId, ReceivedParam, Arc<ProtectionDomain>)> {
    connect_request_in(test, l, private_data, None)
}

/// [`connect_request`] with the QP in `pd`, if given.
fn connect_request_in(
    test: &mut Test,
    l: &CmId,
    private_data: &[u8],
    pd: Option<Arc<ProtectionDomain>>,
) -> Result<(CmId, ReceivedParam, Arc<ProtectionDomain>)> {
    let CmEvent::ConnectRequest(mut server, param) = l.next_event(msecs_to_jiffies(5000))? else {
        return Err(EPROTO);
    };
    kunit_expect!(test, param.private_data.starts_with(private_data));
    let pd = match pd {
        Some(pd) => pd,
        None => server.device()?.alloc_pd()?,
    };
    server.create_qp(
        &pd,
        QpCaps {
            max_send_wr: 4,
            max_recv_wr: 4,
        },
    )?;
    Ok((server, param, pd))
}

/// Requests a client-server connection with IRD `ird` and ORD `ord` in the enhanced data; the
/// ULP accepts with `ulp` (`responder_resources`, `initiator_depth`), or echoes the request's
/// parameters if `None`, and a QP with no receive posted. Returns once both sides have it
/// established.
fn client_server_accept(
    test: &mut Test,
    port: u16,
    ird: u16,
    ord: u16,
    ulp: Option<(u8, u8)>,
) -> Result<ClientServer> {
    let l = listener(port)?;
    let sock = connect(port)?;
    client_server_accept_on(test, l, sock, client_server_config(ird, ord), ulp, None)
}

/// What our initiator requests in the client-server model: IRD `ird`, ORD `ord`, no CRC.
fn client_server_config(ird: u16, ord: u16) -> InitiatorConfig {
    InitiatorConfig {
        crc: CrcPolicy::Disabled,
        enhanced: true,
        ird,
        ord,
        max_ird: 16,
        peer_to_peer: false,
        rtr: RtrKinds::NONE,
        large_fpdus: false,
    }
}

/// [`client_server_accept`] on the listener `l` of the connected `sock`, requesting `config`.
/// The QP goes into `pd` if given, else into a new PD.
fn client_server_accept_on(
    test: &mut Test,
    l: CmId,
    sock: TcpSocket,
    config: InitiatorConfig,
    ulp: Option<(u8, u8)>,
    pd: Option<Arc<ProtectionDomain>>,
) -> Result<ClientServer> {
    let mut hs = InitiatorHandshake::new(config);
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = hs.request(b"crafted", &mut frame).map_err(|_| EINVAL)?;
    sock.send(&frame[..len], MsgFlags::NONE)?;
    let (server, param, pd) = connect_request_in(test, &l, b"crafted", pd)?;
    let (responder_resources, initiator_depth) =
        ulp.unwrap_or((param.responder_resources, param.initiator_depth));
    server.accept(&ConnParam {
        responder_resources,
        initiator_depth,
        ..Default::default()
    })?;
    let mut buf = [0u8; MAX_FRAME_LEN];
    let reply = loop {
        let n = recv_some(&sock, &mut buf)?;
        if n == 0 {
            return Err(ECONNRESET);
        }
        let (_, event) = hs.on_bytes(&buf[..n]).map_err(|_| EINVAL)?;
        match event {
            None => continue,
            Some(InitiatorEvent::Connected(decision)) => break decision,
            Some(_) => return Err(ECONNREFUSED),
        }
    };
    let e = server.next_event(msecs_to_jiffies(5000))?;
    kunit_expect_eq!(test, e.name(), "ESTABLISHED");
    Ok(ClientServer {
        sock,
        server,
        listener: l,
        pd,
        request: param,
        reply,
    })
}

/// The FPDUs of `wr` (payload `payload`), without CRC.
fn fpdus(wr: WorkRequest<'_>, payload: &[u8]) -> Result<KVec<u8>> {
    fpdus_from(&mut TxEngine::new(None, fpdu_size(1460, 1)), wr, payload)
}

/// The FPDUs of `wr` (payload `payload`) from `tx`, which numbers the message.
fn fpdus_from(
    tx: &mut TxEngine<KernelCrc32c>,
    wr: WorkRequest<'_>,
    payload: &[u8],
) -> Result<KVec<u8>> {
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
    fn place_tagged(&mut self, _grant: &Grant, _data: &[u8]) -> Result<(), TermError> {
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
    fn accept_read_response(
        &mut self,
        _slot: usize,
        _stag: u32,
        _to: u64,
        _len: usize,
        _last: bool,
    ) -> Result<(), TermError> {
        Err(TermError::DdpBaseBounds)
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
    // The stream failed: the ULP also heard it as one asynchronous error event.
    kunit_expect_eq!(test, server.qp()?.error_events(), 1);
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

// ---- Reading what rsiw sends ----

/// The next event of `id`, which must be `name`.
fn expect_event(test: &mut Test, id: &CmId, name: &str) -> Result<CmEvent> {
    let event = id.next_event(msecs_to_jiffies(5000))?;
    if !kunit_expect_eq!(test, event.name(), name) {
        return Err(EPROTO);
    }
    Ok(event)
}

/// The connection `listener` accepts within 5 s.
fn accept_within(listener: &TcpSocket) -> Result<TcpSocket> {
    for _ in 0..500 {
        match listener.accept(true) {
            Err(e) if e == EAGAIN => sleep_ms(10),
            other => return other,
        }
    }
    Err(ETIMEDOUT)
}

/// The ULPDU_Length field at the start of `fpdu`.
fn ulpdu_len(fpdu: &[u8]) -> Result<usize> {
    match fpdu {
        [high, low, ..] => Ok(usize::from(u16::from_be_bytes([*high, *low]))),
        _ => Err(EINVAL),
    }
}

/// The DDP segment `fpdu` carries (its CRC is not checked: none of these connections use one).
fn segment(fpdu: &[u8]) -> Result<Segment<'_>> {
    let len = ulpdu_len(fpdu)?;
    let ulpdu = fpdu
        .get(LENGTH_FIELD_LEN..LENGTH_FIELD_LEN + len)
        .ok_or(EINVAL)?;
    Segment::decode(ulpdu).map_err(|_| EPROTO)
}

/// The error `fpdu` reports if it is a TERMINATE.
fn terminate_error(fpdu: &[u8]) -> Option<TermError> {
    match segment(fpdu).ok()?.header {
        OpcodeHeader::Terminate(m) => m.control.error(),
        _ => None,
    }
}

/// What rsiw sent after the MPA frame we waited for, taken one FPDU at a time. Bytes taken
/// make room for more, so any amount of data goes through a window of two FPDUs' room.
struct Inbox {
    bytes: KVec<u8>,
    /// The bytes received and not taken yet are `bytes[read..end]`.
    read: usize,
    end: usize,
}

impl Inbox {
    /// Room for the largest FPDU MPA allows and what follows it in the same receive.
    const ROOM: usize = 2 * 65536 + LENGTH_FIELD_LEN + 8;

    /// Starts with `leftover`, what came in behind the MPA frame.
    fn new(leftover: &[u8]) -> Result<Self> {
        let mut bytes = KVec::from_elem(0u8, Self::ROOM, GFP_KERNEL)?;
        bytes
            .get_mut(..leftover.len())
            .ok_or(EMSGSIZE)?
            .copy_from_slice(leftover);
        Ok(Self {
            bytes,
            read: 0,
            end: leftover.len(),
        })
    }

    /// Receives from `sock` until `len` bytes are there past what was taken.
    fn fill(&mut self, sock: &TcpSocket, len: usize) -> Result {
        if self.read + len > Self::ROOM {
            self.bytes.copy_within(self.read..self.end, 0);
            self.end -= self.read;
            self.read = 0;
        }
        while self.end < self.read + len {
            let room = self.bytes.get_mut(self.end..).ok_or(EMSGSIZE)?;
            let n = recv_some(sock, room)?;
            if n == 0 {
                return Err(ECONNRESET);
            }
            self.end += n;
        }
        Ok(())
    }

    /// The next FPDU, receiving from `sock` as needed.
    fn next_fpdu(&mut self, sock: &TcpSocket) -> Result<&[u8]> {
        self.fill(sock, LENGTH_FIELD_LEN)?;
        let len = fpdu_len(ulpdu_len(
            self.bytes.get(self.read..self.end).ok_or(EINVAL)?,
        )?);
        self.fill(sock, len)?;
        let start = self.read;
        self.read += len;
        self.bytes.get(start..start + len).ok_or(EINVAL)
    }
}

/// The segment size our socket asks rsiw's to keep to, well below loopback's.
const PEER_MSS: u16 = 1000;

/// Length of the Send of [`send_fpdu_lengths`].
const LARGE_SEND: usize = 16384;

/// Connects with segments capped at [`PEER_MSS`], offering FPDUs larger than a segment if
/// `offer`; rsiw's ULP sends [`LARGE_SEND`] bytes. Returns the lengths of the FPDUs that carry
/// them, having checked the payload.
fn send_fpdu_lengths(test: &mut Test, port: u16, offer: bool) -> Result<KVec<usize>> {
    let l = listener(port)?;
    let sock = TcpSocket::new(&at(port))?;
    sock.set_max_segment(PEER_MSS)?;
    sock.connect(&at(port), false)?;
    let config = InitiatorConfig {
        crc: CrcPolicy::Disabled,
        enhanced: true,
        ird: 4,
        ord: 4,
        max_ird: 16,
        peer_to_peer: false,
        rtr: RtrKinds::NONE,
        large_fpdus: offer,
    };
    let c = client_server_accept_on(test, l, sock, config, None, None)?;
    // rsiw's reply offers large FPDUs (its `large_fpdus` setting is on by default).
    kunit_expect_eq!(test, c.reply.large_fpdus, offer);
    let buffer = DmaBuffer::new(&c.pd, LARGE_SEND)?;
    let mut pattern = KVec::new();
    for i in 0..LARGE_SEND {
        pattern.push((i % 251) as u8, GFP_KERNEL)?;
    }
    buffer.write(0, &pattern)?;
    c.server.qp()?.post_send(
        &SendWr::Send {
            local: Sge {
                buffer: &buffer,
                offset: 0,
                len: LARGE_SEND,
            },
            solicited: false,
        },
        1,
    )?;
    let mut inbox = Inbox::new(&[])?;
    let mut lengths = KVec::new();
    let mut received = 0;
    while received < LARGE_SEND {
        let fpdu = inbox.next_fpdu(&c.sock)?;
        let len = fpdu.len();
        let seg = segment(fpdu)?;
        let mo = match (seg.opcode, seg.ddp) {
            (Opcode::Send, DdpHeader::Untagged(h)) => h.message_offset as usize,
            _ => return Err(EPROTO),
        };
        let ok = mo == received && pattern.get(mo..mo + seg.payload.len()) == Some(seg.payload);
        kunit_expect!(test, ok, "payload at {} wrong", mo);
        if !ok {
            return Err(EPROTO);
        }
        received += seg.payload.len();
        lengths.push(len, GFP_KERNEL)?;
    }
    Ok(lengths)
}

/// Without our offer, every FPDU fits one of the segments our SYN asked for (RFC 5044's
/// alignment, which receivers without reassembly rely on).
fn fpdus_fit_one_segment_without_offer(test: &mut Test) -> Result {
    let lengths = send_fpdu_lengths(test, 7825, false)?;
    let largest = lengths.iter().copied().max().unwrap_or(0);
    kunit_expect!(
        test,
        largest <= usize::from(PEER_MSS),
        "FPDU of {}",
        largest
    );
    Ok(())
}

/// When both sides offer large FPDUs (the reserved MPA bit the C siw calls GSO_EXP), rsiw
/// sizes FPDUs to TCP's GSO packets: larger than one segment, as MPA allows.
fn fpdus_span_segments_when_offered(test: &mut Test) -> Result {
    let lengths = send_fpdu_lengths(test, 7826, true)?;
    let largest = lengths.iter().copied().max().unwrap_or(0);
    kunit_expect!(
        test,
        largest > usize::from(PEER_MSS),
        "largest FPDU {}",
        largest
    );
    kunit_expect!(test, lengths.len() < LARGE_SEND / usize::from(PEER_MSS));
    Ok(())
}

/// The longest payload of [`small_sends_arrive_whole`].
const SMALL_SEND_MAX: usize = 20;

/// Sends of 0 to [`SMALL_SEND_MAX`] bytes (rsiw's from 1 on), both ways: each lands whole at
/// the start of its receive buffer, nothing past it is written, and each of rsiw's arrives at
/// our end whole.
fn small_sends_arrive_whole(test: &mut Test) -> Result {
    let (_l, server, sock, pd) = established(test, 7827)?;
    let qp = server.qp()?;
    let inbound = DmaBuffer::new(&pd, 2 * SMALL_SEND_MAX)?;
    let outbound = DmaBuffer::new(&pd, SMALL_SEND_MAX)?;
    let mut tx = TxEngine::<KernelCrc32c>::new(None, fpdu_size(1460, 1));
    let mut inbox = Inbox::new(&[])?;
    for len in 0..=SMALL_SEND_MAX {
        let payload: [u8; SMALL_SEND_MAX] =
            core::array::from_fn(|i| (i as u8).wrapping_mul(29) ^ (len as u8) | 0x80);
        let data = &payload[..len];
        // Ours to rsiw.
        inbound.write(0, &[0x5a; 2 * SMALL_SEND_MAX])?;
        let sge = Sge {
            buffer: &inbound,
            offset: 0,
            len: 2 * SMALL_SEND_MAX,
        };
        qp.post_recv(sge, len as u64)?;
        let send = WorkRequest::Send {
            len: len as u32,
            solicited: false,
            invalidate: None,
        };
        sock.send(&fpdus_from(&mut tx, send, data)?, MsgFlags::NONE)?;
        let wc = qp.wait(msecs_to_jiffies(5000))?;
        let ok = wc.is_recv && wc.tag == len as u64 && wc.status.is_success();
        kunit_expect!(test, ok, "{:?}", wc);
        kunit_expect_eq!(test, wc.byte_len as usize, len);
        let mut got = [0u8; 2 * SMALL_SEND_MAX];
        inbound.read(0, &mut got)?;
        let placed = got[..len] == *data && got[len..].iter().all(|&b| b == 0x5a);
        kunit_expect!(test, placed, "{} bytes placed as {:?}", len, got);
        if len == 0 {
            continue;
        }
        // rsiw's to ours.
        outbound.write(0, &payload)?;
        let local = Sge {
            buffer: &outbound,
            offset: 0,
            len,
        };
        let wr = SendWr::Send {
            local,
            solicited: false,
        };
        qp.post_send(&wr, 100 + len as u64)?;
        let fpdu = inbox.next_fpdu(&sock)?;
        let seg = segment(fpdu)?;
        let sent = seg.opcode == Opcode::Send && seg.payload == data;
        kunit_expect!(test, sent, "{} bytes sent as {:?}", len, seg.payload);
        let wc = qp.wait(msecs_to_jiffies(5000))?;
        let done = !wc.is_recv && wc.tag == 100 + len as u64 && wc.status.is_success();
        kunit_expect!(test, done, "{:?}", wc);
        if !(ok && placed && sent && done) {
            return Err(EPROTO);
        }
    }
    Ok(())
}

kernel::kunit_suite!(
    rsiw_wire,
    [
        garbage_instead_of_mpa_request_is_dropped,
        trickled_mpa_request_is_closed_by_the_deadline,
        slow_handshakes_keep_out_no_connect_and_stall_no_qp,
        markers_are_rejected,
        send_without_receive_terminates,
        write_to_unknown_stag_terminates,
        bad_ddp_version_terminates,
        atomic_unsupported_opcode_terminates,
        atomic_misaligned_terminates,
        atomic_without_atomic_access_terminates,
        atomic_out_of_bounds_terminates,
        atomic_to_unknown_stag_terminates,
        write_after_local_invalidate_terminates,
        write_after_invalidate_and_register_again_terminates,
        write_after_send_with_invalidate_on_another_qp_terminates,
        write_after_deregister_reaches_no_region_at_its_index,
        stag_indices_do_not_follow_each_other,
        read_answered_by_one_empty_last_segment_fails,
        read_answered_out_of_order_fails,
        read_answered_by_overlapping_segments_fails,
        read_answered_short_fails,
        read_request_with_wrapping_sink_terminates,
        read_request_with_wrapping_source_terminates,
        zero_window_then_malformed_fpdu_flushes_and_closes,
        zero_window_then_reading_resumes_transmission,
        responder_takes_send_rtr,
        responder_takes_write_rtr,
        responder_takes_read_rtr,
        responder_refuses_rtr_of_wrong_kind,
        responder_refuses_rtr_with_payload,
        trickled_rtr_is_closed_by_the_deadline,
        initiator_sends_write_rtr,
        initiator_terminates_on_reply_without_rtr_kinds,
        initiator_terminates_on_read_rtr_without_ird,
        responder_answers_no_negotiation,
        initiator_keeps_depths_on_no_negotiation,
        initiator_reports_responder_depths,
        initiator_terminates_on_insufficient_ird,
        responder_raises_ird_and_caps_ord,
        responder_caps_ird_at_max_ird,
        fpdus_fit_one_segment_without_offer,
        fpdus_span_segments_when_offered,
        small_sends_arrive_whole
    ]
);
