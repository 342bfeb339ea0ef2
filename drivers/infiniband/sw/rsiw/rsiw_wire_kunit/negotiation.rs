// SPDX-License-Identifier: GPL-2.0

//! IRD and ORD negotiation (RFC 6581 section 9.1), as responder and as initiator.

use super::*;

/// Our client-server request asks for no automatic negotiation (IRD = ORD = 0x3FFF): rsiw
/// accepts, leaves its QP's depths to what the ULP's accept gives (capped by `max_ird` and
/// `max_ord`) and answers 0x3FFF in both fields of its reply, as section 9.1 has the responder
/// do. The ULP's CONNECT_REQUEST carries the request's values saturated to the 8 bits of
/// `iw_cm_event` (255), and the connection carries a Send.
pub(super) fn responder_answers_no_negotiation(test: &mut Test) -> Result {
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
pub(super) fn initiator_keeps_depths_on_no_negotiation(test: &mut Test) -> Result {
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
pub(super) fn initiator_reports_responder_depths(test: &mut Test) -> Result {
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
pub(super) fn initiator_terminates_on_insufficient_ird(test: &mut Test) -> Result {
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
pub(super) fn responder_negotiates(
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
pub(super) fn responder_raises_ird_and_caps_ord(test: &mut Test) -> Result {
    responder_negotiates(test, 7822, (2, 5), Some((16, 8)), (5, 2))
}

/// Our ORD 200 with IRD 2, the ULP echoing them: rsiw's IRD stops at `max_ird` (128), below
/// our ORD (it accepts anyway: the initiator decides), and its ORD is our IRD, 2.
pub(super) fn responder_caps_ird_at_max_ird(test: &mut Test) -> Result {
    responder_negotiates(test, 7823, (2, 200), None, (MAX_DEPTH, 2))
}
