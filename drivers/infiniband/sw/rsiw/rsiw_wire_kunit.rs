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
    rdma::{
        client::ProtectionDomain,
        cm::{CmEvent, CmId, ConnParam, ReceivedParam},
        dma_buffer::DmaBuffer,
        fast_reg::{Access, FastRegMr},
        kernel_qp::{KernelQp, QpCaps, Remote, SendWr, Sge, WcOpcode, WorkCompletion},
    },
    sync::Arc,
    time::msecs_to_jiffies,
};

pub mod proto;

mod kernel_crc32c;
use kernel_crc32c::KernelCrc32c;
mod kunit_socket;
use kunit_socket::{recv_some, sleep_ms};

// The cases of a hostile peer, in files of their own under `rsiw_wire_kunit/`.
#[path = "rsiw_wire_kunit/slow_peer.rs"]
mod slow_peer;
#[path = "rsiw_wire_kunit/tagged_access.rs"]
mod tagged_access;
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

// ---- The peer-to-peer model (RFC 6581) ----

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

/// The RTR message of `kind` as one FPDU without CRC, built by hand from RFC 6581 section 5
/// (zero-length, L set; STag 1 and offset 0, as rsiw and the C siw use): a Send (MSN 1 of
/// queue 0), an RDMA Write, or an RDMA Read Request (MSN 1 of queue 1, read size 0).
fn rtr_message(kind: RtrKind) -> Result<KVec<u8>> {
    let (ddp, header) = match kind {
        RtrKind::Send => (
            untagged_header(Opcode::Send, true, 0, 1, 0),
            OpcodeHeader::None,
        ),
        RtrKind::Write => (
            tagged_header(Opcode::RdmaWrite, true, RTR_STAG, 0),
            OpcodeHeader::None,
        ),
        RtrKind::Read => (
            untagged_header(Opcode::ReadRequest, true, 0, 1, 0),
            OpcodeHeader::ReadRequest(ReadRequestHeader {
                sink_stag: RTR_STAG,
                sink_tagged_offset: 0,
                read_size: 0,
                source_stag: RTR_STAG,
                source_tagged_offset: 0,
            }),
        ),
    };
    let mut ulpdu = [0u8; 64];
    let len = encode_headers(&ddp, &header, &mut ulpdu).map_err(|_| EINVAL)?;
    let mut fpdu = [0u8; 96];
    let n = encode_fpdu::<KernelCrc32c>(&mut fpdu, &ulpdu[..len], None).map_err(|_| EINVAL)?;
    let mut wire = KVec::new();
    wire.extend_from_slice(&fpdu[..n], GFP_KERNEL)?;
    Ok(wire)
}

/// rsiw as the responder of a peer-to-peer connection on `port`, accepted by the ULP.
struct P2pAccept {
    sock: TcpSocket,
    server: CmId,
    _listener: CmId,
    pd: Arc<ProtectionDomain>,
    /// What the ULP's accept (rsiw's `iw_accept`) returned.
    accepted: Result,
    /// Our side: what the MPA Reply told it.
    hs: InitiatorHandshake,
    reply: InitiatorEvent,
    /// What came after the reply.
    inbox: Inbox,
}

/// Requests a peer-to-peer connection offering the RTR kinds `offered`, with `rtr` sent right
/// behind the request: `iw_accept` waits for the RTR in the ULP's context, this very thread,
/// so it has to be on the socket before the ULP accepts (rsiw takes the request off the stream
/// and nothing more). Then the ULP accepts and we read the MPA Reply.
fn p2p_accept(test: &mut Test, port: u16, offered: RtrKinds, rtr: &[u8]) -> Result<P2pAccept> {
    let l = listener(port)?;
    let sock = connect(port)?;
    let mut hs = InitiatorHandshake::new(InitiatorConfig {
        crc: CrcPolicy::Disabled,
        enhanced: true,
        ird: 4,
        ord: 4,
        max_ird: 16,
        peer_to_peer: true,
        rtr: offered,
        large_fpdus: false,
    });
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = hs.request(b"crafted p2p", &mut frame).map_err(|_| EINVAL)?;
    sock.send_vectored(&[&frame[..len], rtr], MsgFlags::NONE)?;
    let (server, param, pd) = connect_request(test, &l, b"crafted p2p")?;
    let accepted = server.accept(&ConnParam {
        responder_resources: param.responder_resources,
        initiator_depth: param.initiator_depth,
        ..Default::default()
    });
    let mut buf = [0u8; MAX_FRAME_LEN];
    let (reply, inbox) = loop {
        let n = recv_some(&sock, &mut buf)?;
        if n == 0 {
            return Err(ECONNRESET);
        }
        let (used, event) = hs.on_bytes(&buf[..n]).map_err(|_| EINVAL)?;
        if let Some(event) = event {
            break (event, Inbox::new(&buf[used..n])?);
        }
    };
    Ok(P2pAccept {
        sock,
        server,
        _listener: l,
        pd,
        accepted,
        hs,
        reply,
        inbox,
    })
}

/// What our Send carries once the RTR has gone by.
const P2P_PAYLOAD: [u8; 16] = *b"sent past an RTR";

/// Shows that rsiw's QP on `id` counts the RTR right: a Send of ours, numbered as the one after
/// a Send RTR (MSN 2) if `after_send_rtr` and as the first message of queue 0 (MSN 1) if not,
/// completes a receive posted there with its payload.
fn send_arrives(
    test: &mut Test,
    id: &CmId,
    pd: &Arc<ProtectionDomain>,
    sock: &TcpSocket,
    after_send_rtr: bool,
) -> Result {
    let buffer = DmaBuffer::new(pd, 64)?;
    let qp = id.qp()?;
    qp.post_recv(
        Sge {
            buffer: &buffer,
            offset: 0,
            len: 64,
        },
        7,
    )?;
    let mut tx = TxEngine::<KernelCrc32c>::new(None, fpdu_size(1460, 1));
    if after_send_rtr {
        tx.skip_msn(QueueNumber::Send);
    }
    let wire = fpdus_from(
        &mut tx,
        WorkRequest::Send {
            len: P2P_PAYLOAD.len() as u32,
            solicited: false,
            invalidate: None,
        },
        &P2P_PAYLOAD,
    )?;
    sock.send(&wire, MsgFlags::NONE)?;
    let wc = qp.wait(msecs_to_jiffies(5000))?;
    kunit_expect!(
        test,
        wc.is_recv && wc.tag == 7 && wc.status.is_success() && wc.opcode == WcOpcode::Recv,
        "{:?}",
        wc
    );
    kunit_expect_eq!(test, wc.byte_len as usize, P2P_PAYLOAD.len());
    let mut got = [0u8; P2P_PAYLOAD.len()];
    buffer.read(0, &mut got)?;
    kunit_expect_eq!(test, got, P2P_PAYLOAD);
    Ok(())
}

/// rsiw responding with the RTR kind `kind` alone on offer: it offers the kind back in a
/// peer-to-peer reply, takes our RTR (answering a Read RTR with a zero-length Read Response
/// first), reports ESTABLISHED and counts the RTR in its QP's message numbers.
fn responder_takes_rtr(test: &mut Test, port: u16, kind: RtrKind) -> Result {
    let rtr = rtr_message(kind)?;
    let mut c = p2p_accept(test, port, RtrKinds::only(kind), &rtr)?;
    kunit_expect_eq!(test, c.accepted, Ok(()));
    let InitiatorEvent::Connected(decision) = c.reply else {
        kunit_expect!(test, false, "rsiw's reply: {:?}", c.reply);
        return Err(EPROTO);
    };
    let peer = decision.peer.ok_or(EPROTO)?;
    kunit_expect!(test, peer.peer_to_peer, "the reply's A flag is clear");
    kunit_expect!(
        test,
        peer.rtr.contains(kind),
        "{:?} not offered back: {:?}",
        kind,
        peer.rtr
    );
    kunit_expect_eq!(test, decision.rtr, Some(kind));
    // What went ahead of the reply is the RTR the pure initiator sends now.
    let mut expected = [0u8; MAX_FRAME_LEN];
    let n =
        c.hs.rtr_fpdu(&mut expected, KernelCrc32c)
            .map_err(|_| EINVAL)?;
    kunit_expect!(test, expected[..n] == rtr[..]);
    if kind == RtrKind::Read {
        let response = segment(c.inbox.next_fpdu(&c.sock)?)?;
        kunit_expect_eq!(test, response.opcode, Opcode::ReadResponse);
        kunit_expect!(test, response.payload.is_empty());
        match response.ddp {
            DdpHeader::Tagged(h) => {
                kunit_expect_eq!(test, h.stag, RTR_STAG);
                kunit_expect_eq!(test, h.tagged_offset, 0);
                kunit_expect!(test, h.control.last);
            }
            DdpHeader::Untagged(h) => {
                kunit_expect!(test, false, "an untagged Read Response: {:?}", h);
            }
        }
    }
    expect_event(test, &c.server, "ESTABLISHED")?;
    send_arrives(test, &c.server, &c.pd, &c.sock, kind == RtrKind::Send)?;
    c.sock.shutdown(Shutdown::Both)?;
    expect_event(test, &c.server, "DISCONNECTED")?;
    Ok(())
}

fn responder_takes_send_rtr(test: &mut Test) -> Result {
    responder_takes_rtr(test, 7811, RtrKind::Send)
}

fn responder_takes_write_rtr(test: &mut Test) -> Result {
    responder_takes_rtr(test, 7812, RtrKind::Write)
}

fn responder_takes_read_rtr(test: &mut Test) -> Result {
    responder_takes_rtr(test, 7813, RtrKind::Read)
}

/// rsiw responding to a request for a Write RTR that gets `rtr` instead: the ULP's accept
/// fails, rsiw sends TERMINATE 2/0/7 (RFC 6581 section 8, no matching RTR option) after its
/// reply and closes, and the ULP never sees the connection established.
fn responder_refuses_rtr(test: &mut Test, port: u16, rtr: &[u8]) -> Result {
    let mut c = p2p_accept(test, port, RtrKinds::only(RtrKind::Write), rtr)?;
    kunit_expect!(
        test,
        matches!(c.reply, InitiatorEvent::Connected(_)),
        "rsiw's reply: {:?}",
        c.reply
    );
    kunit_expect_eq!(test, c.accepted, Err(ECONNREFUSED));
    let term = terminate_error(c.inbox.next_fpdu(&c.sock)?);
    kunit_expect_eq!(test, term, Some(TermError::MpaNoMatchingRtr));
    kunit_expect!(
        test,
        closed_by_peer(&c.sock),
        "rsiw kept a connection with a bad RTR"
    );
    kunit_expect!(
        test,
        !c.server.has_events(),
        "the ULP heard of a connection with a bad RTR"
    );
    Ok(())
}

fn responder_refuses_rtr_of_wrong_kind(test: &mut Test) -> Result {
    // A zero-length Send where only a Write was negotiated.
    let rtr = rtr_message(RtrKind::Send)?;
    responder_refuses_rtr(test, 7814, &rtr)
}

fn responder_refuses_rtr_with_payload(test: &mut Test) -> Result {
    // The negotiated kind, but not zero-length.
    let rtr = fpdus(
        WorkRequest::Write {
            stag: RTR_STAG,
            tagged_offset: 0,
            len: 4,
        },
        &[3u8; 4],
    )?;
    responder_refuses_rtr(test, 7815, &rtr)
}

/// rsiw initiating through rdma_cm to our socket listening on `port`.
struct P2pConnect {
    sock: TcpSocket,
    client: CmId,
    _listener: TcpSocket,
    pd: Arc<ProtectionDomain>,
    /// The enhanced data of rsiw's MPA Request.
    request: EnhancedData,
    /// Our side, at rsiw's MPA Request.
    hs: ResponderHandshake<KernelCrc32c>,
}

/// Has rsiw0 connect to `port` (the ULP with a QP) and reads its MPA Request, which must ask
/// for the peer-to-peer model; our handshake would accept the RTR kinds `accepted`.
fn p2p_connect(test: &mut Test, port: u16, accepted: RtrKinds) -> Result<P2pConnect> {
    let listener = TcpSocket::new(&at(port))?;
    listener.set_reuseaddr();
    listener.bind(&at(port))?;
    listener.listen(1)?;
    let mut client = CmId::new()?;
    client.resolve_addr(None, &at(port), 2000)?;
    expect_event(test, &client, "ADDR_RESOLVED")?;
    client.resolve_route(2000)?;
    expect_event(test, &client, "ROUTE_RESOLVED")?;
    let pd = client.device()?.alloc_pd()?;
    client.create_qp(
        &pd,
        QpCaps {
            max_send_wr: 4,
            max_recv_wr: 4,
        },
    )?;
    client.connect(&ConnParam {
        private_data: b"rsiw p2p",
        responder_resources: 4,
        initiator_depth: 4,
        ..Default::default()
    })?;
    let sock = accept_within(&listener)?;
    let mut hs = ResponderHandshake::new(
        ResponderConfig {
            crc: CrcPolicy::Disabled,
            enhanced: true,
            max_ird: 16,
            ord: 4,
            min_ord: 0,
            rtr: accepted,
            large_fpdus: false,
        },
        KernelCrc32c,
    );
    let mut buf = [0u8; MAX_FRAME_LEN];
    let request = loop {
        let n = recv_some(&sock, &mut buf)?;
        if n == 0 {
            return Err(ECONNRESET);
        }
        // rsiw sends nothing behind its request before our reply.
        let (used, event) = hs.on_bytes(&buf[..n]);
        kunit_expect_eq!(test, used, n);
        match event {
            None => {}
            Some(ResponderEvent::ConnectRequest(request)) => break request,
            Some(other) => {
                kunit_expect!(test, false, "rsiw's request: {:?}", other);
                return Err(EPROTO);
            }
        }
    };
    let peer = request.peer.ok_or(EPROTO)?;
    if !kunit_expect!(
        test,
        peer.peer_to_peer,
        "rsiw0 initiates in the client-server model: scenario 12 sets its peer_to_peer to 1"
    ) {
        return Err(EPROTO);
    }
    kunit_expect!(test, hs.peer_private_data().starts_with(b"rsiw p2p"));
    Ok(P2pConnect {
        sock,
        client,
        _listener: listener,
        pd,
        request: peer,
        hs,
    })
}

fn initiator_sends_write_rtr(test: &mut Test) -> Result {
    let mut c = p2p_connect(test, 7816, RtrKinds::only(RtrKind::Write))?;
    let mut frame = [0u8; MAX_FRAME_LEN];
    let Accepted {
        len,
        decision,
        established,
    } =
        c.hs.accept(b"crafted p2p", 4, 4, &mut frame)
            .map_err(|_| EINVAL)?;
    kunit_expect!(test, !established);
    kunit_expect_eq!(test, decision.rtr_accepted, RtrKinds::only(RtrKind::Write));
    c.sock.send(&frame[..len], MsgFlags::NONE)?;
    // rsiw's first FPDU is the zero-length Write RTR, exactly as the RFC has it.
    let mut inbox = Inbox::new(&[])?;
    let fpdu = inbox.next_fpdu(&c.sock)?;
    let expected = rtr_message(RtrKind::Write)?;
    kunit_expect!(test, *fpdu == *expected);
    let (used, event) = c.hs.on_bytes(fpdu);
    kunit_expect_eq!(test, used, fpdu.len());
    kunit_expect_eq!(
        test,
        event,
        Some(ResponderEvent::Established(ReceivedRtr::Write))
    );
    let CmEvent::Established(param) = expect_event(test, &c.client, "ESTABLISHED")? else {
        return Err(EPROTO);
    };
    kunit_expect!(test, param.private_data.starts_with(b"crafted p2p"));
    send_arrives(test, &c.client, &c.pd, &c.sock, false)?;
    c.sock.shutdown(Shutdown::Both)?;
    expect_event(test, &c.client, "DISCONNECTED")?;
    Ok(())
}

/// Sends an accepting peer-to-peer MPA Reply with `enhanced` on `sock`, built by hand: our
/// handshake would never answer some of these.
fn send_reply(sock: &TcpSocket, enhanced: &EnhancedData) -> Result {
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = encode_frame(
        &mut frame,
        FrameKind::Reply,
        MpaFlags::default(),
        REVISION_2,
        Some(enhanced),
        b"crafted p2p",
    )
    .map_err(|_| EINVAL)?;
    sock.send(&frame[..len], MsgFlags::NONE)?;
    Ok(())
}

/// rsiw initiating gets the accepting peer-to-peer reply `reply`, which it cannot take: it
/// must send TERMINATE `term` (layer 2, type 0) as its only FPDU and close, and the ULP's
/// connect is rejected.
fn initiator_terminates(
    test: &mut Test,
    port: u16,
    reply: EnhancedData,
    term: TermError,
) -> Result {
    let c = p2p_connect(
        test,
        port,
        RtrKinds {
            send: true,
            write: true,
            read: true,
        },
    )?;
    send_reply(&c.sock, &reply)?;
    let mut inbox = Inbox::new(&[])?;
    let got = terminate_error(inbox.next_fpdu(&c.sock)?);
    kunit_expect_eq!(test, got, Some(term));
    kunit_expect!(
        test,
        closed_by_peer(&c.sock),
        "rsiw kept a connection it terminated"
    );
    match c.client.next_event(msecs_to_jiffies(5000))? {
        CmEvent::Rejected(status, _) => {
            kunit_expect_eq!(test, status, ECONNREFUSED.to_errno());
        }
        other => {
            kunit_expect!(test, false, "got {} instead of REJECTED", other.name());
        }
    }
    Ok(())
}

/// rsiw initiating gets an accepting peer-to-peer reply offering the RTR kinds `rtr` with a
/// responder IRD of `ird`, none of which it can send: it must send TERMINATE 2/0/7 (RFC 6581
/// section 9.2) and close, and the ULP's connect is rejected.
fn initiator_terminates_without_rtr(test: &mut Test, port: u16, rtr: RtrKinds, ird: u16) -> Result {
    let reply = EnhancedData {
        ird,
        ord: 4,
        peer_to_peer: true,
        rtr,
    };
    initiator_terminates(test, port, reply, TermError::MpaNoMatchingRtr)
}

fn initiator_terminates_on_reply_without_rtr_kinds(test: &mut Test) -> Result {
    // RFC 6581 section 9.2 has the responder set at least one kind; this one sets none.
    initiator_terminates_without_rtr(test, 7817, RtrKinds::NONE, 4)
}

fn initiator_terminates_on_read_rtr_without_ird(test: &mut Test) -> Result {
    // A Read RTR needs a slot in the responder's IRRQ: with IRD 0, Read alone is no option.
    initiator_terminates_without_rtr(test, 7818, RtrKinds::only(RtrKind::Read), 0)
}

// ---- IRD and ORD negotiation (RFC 6581 section 9.1) ----

/// Our client-server request asks for no automatic negotiation (IRD = ORD = 0x3FFF): rsiw
/// accepts, leaves its QP's depths to what the ULP's accept gives (capped by `max_ird` and
/// `max_ord`) and answers 0x3FFF in both fields of its reply, as section 9.1 has the responder
/// do. The ULP's CONNECT_REQUEST carries the request's values saturated to the 8 bits of
/// `iw_cm_event` (255), and the connection carries a Send.
fn responder_answers_no_negotiation(test: &mut Test) -> Result {
    let c = client_server_accept(test, 7819, NO_NEGOTIATION, NO_NEGOTIATION, None)?;
    // rdma_cm reports iw_cm's `ird` (our IRD) as `initiator_depth`, `ord` as
    // `responder_resources`.
    kunit_expect_eq!(test, c.request.initiator_depth, u8::MAX);
    kunit_expect_eq!(test, c.request.responder_resources, u8::MAX);
    let peer = c.reply.peer.ok_or(EPROTO)?;
    kunit_expect_eq!(test, peer.ird, NO_NEGOTIATION);
    kunit_expect_eq!(test, peer.ord, NO_NEGOTIATION);
    kunit_expect!(test, !peer.peer_to_peer, "a peer-to-peer reply");
    kunit_expect_eq!(test, peer.rtr, RtrKinds::NONE);
    send_arrives(test, &c.server, &c.pd, &c.sock, false)?;
    c.sock.shutdown(Shutdown::Both)?;
    expect_event(test, &c.server, "DISCONNECTED")?;
    Ok(())
}

/// rsiw initiating (offering IRD = ORD = 4, what the ULP connects with) gets a peer-to-peer
/// reply with IRD = ORD = 0x3FFF: section 9.1 has it keep its local depths, so it connects,
/// sends the Write RTR first, and the ULP's ESTABLISHED reports IRD and ORD 4; the connection
/// carries a Send. Taking 0x3FFF as a number would have failed the connection (an IRD over
/// `max_ird`).
fn initiator_keeps_depths_on_no_negotiation(test: &mut Test) -> Result {
    let c = p2p_connect(test, 7820, RtrKinds::only(RtrKind::Write))?;
    kunit_expect_eq!(test, c.request.ird, 4);
    kunit_expect_eq!(test, c.request.ord, 4);
    let reply = EnhancedData {
        ird: NO_NEGOTIATION,
        ord: NO_NEGOTIATION,
        peer_to_peer: true,
        rtr: RtrKinds::only(RtrKind::Write),
    };
    send_reply(&c.sock, &reply)?;
    let mut inbox = Inbox::new(&[])?;
    let fpdu = inbox.next_fpdu(&c.sock)?;
    let expected = rtr_message(RtrKind::Write)?;
    kunit_expect!(
        test,
        *fpdu == *expected,
        "rsiw's first FPDU is no Write RTR"
    );
    let CmEvent::Established(param) = expect_event(test, &c.client, "ESTABLISHED")? else {
        return Err(EPROTO);
    };
    kunit_expect!(test, param.private_data.starts_with(b"crafted p2p"));
    // The ULP hears the responder's values (0x3FFF, as far as the 8-bit fields go): rdma_cm
    // reports iw_cm's `ird` as `initiator_depth`, `ord` as `responder_resources`.
    kunit_expect_eq!(test, param.initiator_depth, u8::MAX);
    kunit_expect_eq!(test, param.responder_resources, u8::MAX);
    send_arrives(test, &c.client, &c.pd, &c.sock, false)?;
    c.sock.shutdown(Shutdown::Both)?;
    expect_event(test, &c.client, "DISCONNECTED")?;
    Ok(())
}

/// rsiw initiating (IRD 4, ORD 4) gets a reply with responder IRD 9 and ORD 3: both within
/// section 9.1's relations, so rsiw keeps its IRD (4 >= 3) and its ORD (4 <= 9), and the ULP
/// hears the responder's values, 9 and 3, not rsiw's own.
fn initiator_reports_responder_depths(test: &mut Test) -> Result {
    let c = p2p_connect(test, 7824, RtrKinds::only(RtrKind::Write))?;
    let reply = EnhancedData {
        ird: 9,
        ord: 3,
        peer_to_peer: true,
        rtr: RtrKinds::only(RtrKind::Write),
    };
    send_reply(&c.sock, &reply)?;
    let mut inbox = Inbox::new(&[])?;
    let fpdu = inbox.next_fpdu(&c.sock)?;
    kunit_expect!(test, *fpdu == *rtr_message(RtrKind::Write)?);
    let CmEvent::Established(param) = expect_event(test, &c.client, "ESTABLISHED")? else {
        return Err(EPROTO);
    };
    kunit_expect_eq!(test, param.initiator_depth, 9);
    kunit_expect_eq!(test, param.responder_resources, 3);
    send_arrives(test, &c.client, &c.pd, &c.sock, false)?;
    c.sock.shutdown(Shutdown::Both)?;
    expect_event(test, &c.client, "DISCONNECTED")?;
    Ok(())
}

/// rsiw initiating gets a reply whose responder ORD (129) exceeds the largest IRD rsiw0 can
/// give a connection (`max_ird`, 128): section 9.1 has the initiator send TERMINATE 2/0/6
/// (insufficient IRD resources) and end the connection; the ULP's connect is rejected. (A
/// responder ORD up to 128 would only raise rsiw's IRD above the 4 it offered.) rsiw's
/// responder never needs this: it asks for no minimum ORD.
fn initiator_terminates_on_insufficient_ird(test: &mut Test) -> Result {
    let reply = EnhancedData {
        ird: 4,
        ord: MAX_DEPTH + 1,
        peer_to_peer: true,
        rtr: RtrKinds::only(RtrKind::Write),
    };
    initiator_terminates(test, 7821, reply, TermError::MpaInsufficientIrd)
}

/// rsiw responding to our client-server request for ORD `ord` with IRD `ird`, its ULP
/// accepting with `ulp` (see [`client_server_accept`]): the ULP's CONNECT_REQUEST carries our
/// values; rsiw's reply carries IRD `reply_ird` and ORD `reply_ord`, within section 9.1's
/// bounds (responder IRD at least our ORD as far as `max_ird` allows, responder ORD at most
/// our IRD), and the connection carries a Send.
fn responder_negotiates(
    test: &mut Test,
    port: u16,
    (ird, ord): (u16, u16),
    ulp: Option<(u8, u8)>,
    (reply_ird, reply_ord): (u16, u16),
) -> Result {
    let c = client_server_accept(test, port, ird, ord, ulp)?;
    kunit_expect_eq!(test, u16::from(c.request.initiator_depth), ird);
    kunit_expect_eq!(test, u16::from(c.request.responder_resources), ord);
    let peer = c.reply.peer.ok_or(EPROTO)?;
    kunit_expect!(
        test,
        peer.ird >= ord.min(MAX_DEPTH) && peer.ird <= MAX_DEPTH,
        "responder IRD {} for our ORD {}",
        peer.ird,
        ord
    );
    kunit_expect!(
        test,
        peer.ord <= ird,
        "responder ORD {} over our IRD {}",
        peer.ord,
        ird
    );
    kunit_expect_eq!(test, peer.ird, reply_ird);
    kunit_expect_eq!(test, peer.ord, reply_ord);
    send_arrives(test, &c.server, &c.pd, &c.sock, false)?;
    c.sock.shutdown(Shutdown::Both)?;
    expect_event(test, &c.server, "DISCONNECTED")?;
    Ok(())
}

/// Our ORD 5 with IRD 2, the ULP accepting with IRD 16 and ORD 8: rsiw's IRD is our ORD, 5
/// (its policy: the initiator's ORD, capped by resources, not all the ULP would give), and its
/// ORD is capped to our IRD, 2.
fn responder_raises_ird_and_caps_ord(test: &mut Test) -> Result {
    responder_negotiates(test, 7822, (2, 5), Some((16, 8)), (5, 2))
}

/// Our ORD 200 with IRD 2, the ULP echoing them: rsiw's IRD stops at `max_ird` (128), below
/// our ORD (it accepts anyway: the initiator decides), and its ORD is our IRD, 2.
fn responder_caps_ird_at_max_ird(test: &mut Test) -> Result {
    responder_negotiates(test, 7823, (2, 200), None, (MAX_DEPTH, 2))
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
/// (Copies of up to 16 bytes take a path of their own in `DmaRange`.)
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
