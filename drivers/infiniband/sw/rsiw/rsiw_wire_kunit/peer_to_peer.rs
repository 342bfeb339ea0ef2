// SPDX-License-Identifier: GPL-2.0

//! The peer-to-peer model (RFC 6581 sections 8 and 9), played from both ends: rsiw as the
//! responder taking (or refusing) our RTR, and as the initiator sending its own.

use super::*;

/// The RTR message of `kind` as one FPDU without CRC, built by hand from RFC 6581 section 5
/// (zero-length, L set; STag 1 and offset 0, as rsiw and the C siw use): a Send (MSN 1 of
/// queue 0), an RDMA Write, or an RDMA Read Request (MSN 1 of queue 1, read size 0).
pub(super) fn rtr_message(kind: RtrKind) -> Result<KVec<u8>> {
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
pub(super) struct P2pAccept {
    pub(super) sock: TcpSocket,
    pub(super) server: CmId,
    pub(super) _listener: CmId,
    pub(super) pd: Arc<ProtectionDomain>,
    /// What the ULP's accept (rsiw's `iw_accept`) returned.
    pub(super) accepted: Result,
    /// Our side: what the MPA Reply told it.
    pub(super) hs: InitiatorHandshake,
    pub(super) reply: InitiatorEvent,
    /// What came after the reply.
    pub(super) inbox: Inbox,
}

/// Requests a peer-to-peer connection offering the RTR kinds `offered`, with `rtr` sent right
/// behind the request (rsiw takes the request off the stream and nothing more; the RTR waits
/// for the accept). Then the ULP accepts and we read the MPA Reply.
pub(super) fn p2p_accept(
    test: &mut Test,
    port: u16,
    offered: RtrKinds,
    rtr: &[u8],
) -> Result<P2pAccept> {
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
pub(super) const P2P_PAYLOAD: [u8; 16] = *b"sent past an RTR";

/// Shows that rsiw's QP on `id` counts the RTR right: a Send of ours, numbered as the one after
/// a Send RTR (MSN 2) if `after_send_rtr` and as the first message of queue 0 (MSN 1) if not,
/// completes a receive posted there with its payload.
pub(super) fn send_arrives(
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
pub(super) fn responder_takes_rtr(test: &mut Test, port: u16, kind: RtrKind) -> Result {
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

pub(super) fn responder_takes_send_rtr(test: &mut Test) -> Result {
    responder_takes_rtr(test, 7811, RtrKind::Send)
}

pub(super) fn responder_takes_write_rtr(test: &mut Test) -> Result {
    responder_takes_rtr(test, 7812, RtrKind::Write)
}

pub(super) fn responder_takes_read_rtr(test: &mut Test) -> Result {
    responder_takes_rtr(test, 7813, RtrKind::Read)
}

/// rsiw responding to a request for a Write RTR that gets `rtr` instead: the ULP's accept
/// returns (the RTR is awaited after it), rsiw sends TERMINATE 2/0/7 (RFC 6581 section 8, no
/// matching RTR option) after its reply and closes, and the ULP hears the connection come up
/// and go at once: iw_cm has no other way to hear of an accepted connection failing.
pub(super) fn responder_refuses_rtr(test: &mut Test, port: u16, rtr: &[u8]) -> Result {
    let mut c = p2p_accept(test, port, RtrKinds::only(RtrKind::Write), rtr)?;
    kunit_expect!(
        test,
        matches!(c.reply, InitiatorEvent::Connected(_)),
        "rsiw's reply: {:?}",
        c.reply
    );
    kunit_expect_eq!(test, c.accepted, Ok(()));
    let term = terminate_error(c.inbox.next_fpdu(&c.sock)?);
    kunit_expect_eq!(test, term, Some(TermError::MpaNoMatchingRtr));
    kunit_expect!(
        test,
        closed_by_peer(&c.sock),
        "rsiw kept a connection with a bad RTR"
    );
    expect_event(test, &c.server, "ESTABLISHED")?;
    expect_event(test, &c.server, "DISCONNECTED")?;
    Ok(())
}

pub(super) fn responder_refuses_rtr_of_wrong_kind(test: &mut Test) -> Result {
    // A zero-length Send where only a Write was negotiated.
    let rtr = rtr_message(RtrKind::Send)?;
    responder_refuses_rtr(test, 7814, &rtr)
}

pub(super) fn responder_refuses_rtr_with_payload(test: &mut Test) -> Result {
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
pub(super) struct P2pConnect {
    pub(super) sock: TcpSocket,
    pub(super) client: CmId,
    pub(super) _listener: TcpSocket,
    pub(super) pd: Arc<ProtectionDomain>,
    /// The enhanced data of rsiw's MPA Request.
    pub(super) request: EnhancedData,
    /// Our side, at rsiw's MPA Request.
    pub(super) hs: ResponderHandshake<KernelCrc32c>,
}

/// Has rsiw0 connect to `port` (the ULP with a QP) and reads its MPA Request, which must ask
/// for the peer-to-peer model; our handshake would accept the RTR kinds `accepted`.
pub(super) fn p2p_connect(test: &mut Test, port: u16, accepted: RtrKinds) -> Result<P2pConnect> {
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

pub(super) fn initiator_sends_write_rtr(test: &mut Test) -> Result {
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
pub(super) fn send_reply(sock: &TcpSocket, enhanced: &EnhancedData) -> Result {
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
pub(super) fn initiator_terminates(
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
pub(super) fn initiator_terminates_without_rtr(
    test: &mut Test,
    port: u16,
    rtr: RtrKinds,
    ird: u16,
) -> Result {
    let reply = EnhancedData {
        ird,
        ord: 4,
        peer_to_peer: true,
        rtr,
    };
    initiator_terminates(test, port, reply, TermError::MpaNoMatchingRtr)
}

pub(super) fn initiator_terminates_on_reply_without_rtr_kinds(test: &mut Test) -> Result {
    // RFC 6581 section 9.2 has the responder set at least one kind; this one sets none.
    initiator_terminates_without_rtr(test, 7817, RtrKinds::NONE, 4)
}

pub(super) fn initiator_terminates_on_read_rtr_without_ird(test: &mut Test) -> Result {
    // A Read RTR needs a slot in the responder's IRRQ: with IRD 0, Read alone is no option.
    initiator_terminates_without_rtr(test, 7818, RtrKinds::only(RtrKind::Read), 0)
}

/// An RTR dribbled a byte a second (issue test: the RTR's deadline). The ULP's accept returns
/// at once, without the RTR; while the RTR trickles in, another connection to the device is
/// accepted and carries data; the RTR's deadline (`mpa_timeout_ms` from the accept, 10 s by
/// default) closes the connection before the RTR is whole, and the ULP hears it come up and
/// go.
pub(super) fn trickled_rtr_is_closed_by_the_deadline(test: &mut Test) -> Result {
    let rtr = rtr_message(RtrKind::Write)?;
    let start = Ktime::ktime_get();
    let first = rtr.get(..1).ok_or(EINVAL)?;
    let c = p2p_accept(test, 7830, RtrKinds::only(RtrKind::Write), first)?;
    let accept_ms = ktime_ms_delta(Ktime::ktime_get(), start);
    kunit_expect_eq!(test, c.accepted, Ok(()));
    kunit_expect!(
        test,
        accept_ms < 2000,
        "the connection and its accept took {} ms",
        accept_ms
    );
    // Meanwhile, the device serves others.
    let other = client_server_accept(test, 7831, 4, 4, None)?;
    send_arrives(test, &other.server, &other.pd, &other.sock, false)?;
    let mut closed = false;
    let mut sent = 1;
    for byte in rtr.get(1..).ok_or(EINVAL)?.chunks(1) {
        sleep_ms(1000);
        if closed_by_peer_now(&c.sock) || c.sock.send(byte, MsgFlags::NOSIGNAL).is_err() {
            closed = true;
            break;
        }
        sent += 1;
    }
    // The last byte may have gone just before the deadline: the peer closes then.
    closed = closed || closed_by_peer(&c.sock);
    kunit_expect!(
        test,
        closed && sent < rtr.len(),
        "an RTR trickled over {} s was taken ({} of {} bytes sent)",
        rtr.len(),
        sent,
        rtr.len()
    );
    expect_event(test, &c.server, "ESTABLISHED")?;
    expect_event(test, &c.server, "DISCONNECTED")?;
    Ok(())
}

/// Whether the peer has closed `sock` by now (without waiting).
fn closed_by_peer_now(sock: &TcpSocket) -> bool {
    let mut buf = [0u8; 64];
    loop {
        match sock.recv(&mut buf, MsgFlags::DONTWAIT) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return e != EAGAIN,
        }
    }
}
