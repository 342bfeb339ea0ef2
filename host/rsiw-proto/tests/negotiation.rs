// SPDX-License-Identifier: GPL-2.0

//! MPA negotiation: RFC 5044 CRC/revision/markers rules and the RFC 6581
//! section 9 IRD/ORD and peer-to-peer tables, run end to end through real
//! frames.

use proptest::prelude::*;
use rsiw_proto::proto::mpa::*;
use rsiw_proto::proto::mpa_negotiation::*;
use rsiw_proto::proto::terminate::TermError;

const WRITE_READ: RtrKinds = RtrKinds {
    send: false,
    write: true,
    read: true,
};
const ALL_RTR: RtrKinds = RtrKinds {
    send: true,
    write: true,
    read: true,
};

fn initiator(ird: u16, ord: u16) -> InitiatorConfig {
    InitiatorConfig {
        crc: CrcPolicy::Optional,
        enhanced: true,
        ird,
        ord,
        max_ird: 64,
        peer_to_peer: false,
        rtr: RtrKinds::NONE,
        large_fpdus: false,
    }
}

fn responder(max_ird: u16, ord: u16) -> ResponderConfig {
    ResponderConfig {
        crc: CrcPolicy::Optional,
        enhanced: true,
        max_ird,
        ord,
        min_ord: 0,
        rtr: WRITE_READ,
        large_fpdus: false,
    }
}

/// Runs request -> responder -> reply -> initiator over encoded frames.
fn exchange(
    i: &InitiatorConfig,
    r: &ResponderConfig,
) -> (
    Result<ResponderDecision, NegotiationError>,
    Option<Result<InitiatorOutcome, NegotiationError>>,
) {
    let mut buf = [0u8; 600];
    let n = i.encode_request(&mut buf, b"ulp").unwrap();
    let (req, _) = MpaFrame::decode(&buf[..n], FrameKind::Request).unwrap();
    assert_eq!(req.ulp_private_data, b"ulp");
    let decision = r.process_request(&req);
    let mut reply = [0u8; 600];
    let m = match &decision {
        Ok(d) => d.encode_reply(&mut reply, b"rep").unwrap(),
        Err(e) => r.encode_reject(&req, *e, &mut reply, b"").unwrap(),
    };
    let (rep, _) = MpaFrame::decode(&reply[..m], FrameKind::Reply).unwrap();
    (decision, Some(i.process_reply(&rep)))
}

fn accepted(o: Option<Result<InitiatorOutcome, NegotiationError>>) -> InitiatorDecision {
    match o {
        Some(Ok(InitiatorOutcome::Accepted(d))) => d,
        other => panic!("not accepted: {other:?}"),
    }
}

/// Client-server enhanced data with the given IRD and ORD.
fn enhanced(ird: u16, ord: u16) -> EnhancedData {
    EnhancedData {
        ird,
        ord,
        peer_to_peer: false,
        rtr: RtrKinds::NONE,
    }
}

/// Hands `i` a reply frame built from the given header fields.
fn reply_to(
    i: &InitiatorConfig,
    flags: MpaFlags,
    rev: u8,
    e: Option<EnhancedData>,
) -> Result<InitiatorOutcome, NegotiationError> {
    let mut reply = [0u8; 64];
    let n = encode_frame(&mut reply, FrameKind::Reply, flags, rev, e.as_ref(), &[]).unwrap();
    let (rep, _) = MpaFrame::decode(&reply[..n], FrameKind::Reply).unwrap();
    i.process_reply(&rep)
}

/// An initiator without enhanced connection establishment (revision 1).
fn unenhanced_initiator() -> InitiatorConfig {
    InitiatorConfig {
        enhanced: false,
        ..initiator(1, 1)
    }
}

// --- RFC 6581 section 9.1: IRD and ORD ---

#[test]
fn ird_ord_plain_negotiation() {
    let (r, i) = exchange(&initiator(16, 8), &responder(32, 4));
    let r = r.unwrap();
    assert_eq!(r.local_ird, QueueDepth::Set(8)); // >= initiator ORD
    assert_eq!(r.local_ord, QueueDepth::Set(4)); // <= initiator IRD
    assert_eq!(r.peer.map(|p| (p.ird, p.ord)), Some((16, 8)));
    let i = accepted(i);
    assert_eq!(i.local_ird, QueueDepth::Set(16));
    assert_eq!(i.local_ord, QueueDepth::Set(8));
    assert_eq!(i.peer.map(|p| (p.ird, p.ord)), Some((8, 4)));
    assert_eq!(i.revision, 2);
}

#[test]
fn responder_ird_limited_by_resources_lowers_initiator_ord() {
    let (r, i) = exchange(&initiator(16, 16), &responder(4, 4));
    assert_eq!(r.unwrap().local_ird, QueueDepth::Set(4));
    assert_eq!(accepted(i).local_ord, QueueDepth::Set(4));
}

#[test]
fn responder_ord_capped_by_initiator_ird() {
    let (r, i) = exchange(&initiator(2, 1), &responder(8, 8));
    assert_eq!(r.unwrap().local_ord, QueueDepth::Set(2));
    assert_eq!(accepted(i).local_ird, QueueDepth::Set(2));
}

#[test]
fn responder_rejects_insufficient_initiator_ird() {
    let mut r = responder(8, 8);
    r.min_ord = 4;
    let (d, i) = exchange(&initiator(2, 1), &r);
    let e = d.unwrap_err();
    assert_eq!(e, NegotiationError::InsufficientIrd { required: 4 });
    assert_eq!(e.term(), TermError::MpaInsufficientIrd);
    assert_eq!(e.term().triple().0 as u8, 2);
    // The reject carries the required ORD, and the initiator passes it on.
    match i {
        Some(Ok(InitiatorOutcome::Rejected { peer: Some(p) })) => assert_eq!(p.ord, 4),
        other => panic!("{other:?}"),
    }
}

#[test]
fn initiator_raises_ird_to_responder_ord() {
    // A responder that answers with ORD 6 > initiator IRD 2, within max_ird.
    let o = reply_to(
        &initiator(2, 1),
        MpaFlags::default(),
        2,
        Some(enhanced(1, 6)),
    );
    let d = accepted(Some(o));
    assert_eq!(d.local_ird, QueueDepth::Set(6));
    assert_eq!(d.local_ord, QueueDepth::Set(1));
}

#[test]
fn initiator_terminates_on_responder_ord_beyond_resources() {
    let mut i = initiator(2, 1);
    i.max_ird = 4;
    let err = reply_to(&i, MpaFlags::default(), 2, Some(enhanced(1, 5))).unwrap_err();
    assert_eq!(err, NegotiationError::InsufficientIrd { required: 5 });
    assert_eq!(
        err.term().triple(),
        (rsiw_proto::proto::terminate::Layer::Llp, 0, 6)
    );
}

#[test]
fn initiator_ord_no_negotiation() {
    // Initiator ORD 0x3FFF: responder leaves its IRD alone and echoes 0x3FFF;
    // the initiator then leaves its ORD alone.
    let (r, i) = exchange(&initiator(4, NO_NEGOTIATION), &responder(8, 2));
    let r = r.unwrap();
    assert_eq!(r.local_ird, QueueDepth::Unchanged);
    assert_eq!(r.reply_enhanced.unwrap().ird, NO_NEGOTIATION);
    assert_eq!(r.local_ord, QueueDepth::Set(2));
    let i = accepted(i);
    assert_eq!(i.local_ord, QueueDepth::Unchanged);
    assert_eq!(i.local_ird, QueueDepth::Set(4));
}

#[test]
fn initiator_ird_no_negotiation() {
    let (r, i) = exchange(&initiator(NO_NEGOTIATION, 3), &responder(8, 2));
    let r = r.unwrap();
    assert_eq!(r.local_ord, QueueDepth::Unchanged);
    assert_eq!(r.reply_enhanced.unwrap().ord, NO_NEGOTIATION);
    assert_eq!(r.local_ird, QueueDepth::Set(3));
    let i = accepted(i);
    assert_eq!(i.local_ird, QueueDepth::Unchanged);
    assert_eq!(i.local_ord, QueueDepth::Set(3));
}

#[test]
fn both_no_negotiation() {
    let (r, i) = exchange(&initiator(NO_NEGOTIATION, NO_NEGOTIATION), &responder(8, 2));
    let r = r.unwrap();
    assert_eq!(
        (r.local_ird, r.local_ord),
        (QueueDepth::Unchanged, QueueDepth::Unchanged)
    );
    let e = r.reply_enhanced.unwrap();
    assert_eq!((e.ird, e.ord), (NO_NEGOTIATION, NO_NEGOTIATION));
    let i = accepted(i);
    assert_eq!(
        (i.local_ird, i.local_ord),
        (QueueDepth::Unchanged, QueueDepth::Unchanged)
    );
}

#[test]
fn responder_no_negotiation_reply_leaves_initiator_alone() {
    let e = enhanced(NO_NEGOTIATION, NO_NEGOTIATION);
    let d = accepted(Some(reply_to(
        &initiator(4, 4),
        MpaFlags::default(),
        2,
        Some(e),
    )));
    assert_eq!(
        (d.local_ird, d.local_ord),
        (QueueDepth::Unchanged, QueueDepth::Unchanged)
    );
}

// --- RFC 6581 section 9.2: peer-to-peer and RTR ---

fn p2p(rtr: RtrKinds) -> InitiatorConfig {
    InitiatorConfig {
        peer_to_peer: true,
        rtr,
        ..initiator(4, 4)
    }
}

#[test]
fn p2p_prefers_write() {
    let (r, i) = exchange(&p2p(ALL_RTR), &responder(8, 4));
    let r = r.unwrap();
    assert!(r.reply_enhanced.unwrap().peer_to_peer);
    assert_eq!(r.rtr_accepted, WRITE_READ);
    assert_eq!(accepted(i).rtr, Some(RtrKind::Write));
}

#[test]
fn p2p_read_only() {
    let (r, i) = exchange(&p2p(RtrKinds::only(RtrKind::Read)), &responder(8, 4));
    assert_eq!(r.unwrap().rtr_accepted, RtrKinds::only(RtrKind::Read));
    assert_eq!(accepted(i).rtr, Some(RtrKind::Read));
}

#[test]
fn p2p_read_rtr_bumps_zero_responder_ird() {
    let mut i = p2p(RtrKinds::only(RtrKind::Read));
    i.ord = 0;
    let (r, o) = exchange(&i, &responder(8, 4));
    assert_eq!(r.unwrap().local_ird, QueueDepth::Set(1));
    let d = accepted(o);
    assert_eq!(d.rtr, Some(RtrKind::Read));
    assert_eq!(d.local_ord, QueueDepth::Set(0));
}

#[test]
fn p2p_responder_without_ird_cannot_take_read_rtr() {
    let (r, i) = exchange(&p2p(RtrKinds::only(RtrKind::Read)), &responder(0, 0));
    // The responder offers what it supports instead (Write), which the
    // initiator cannot generate: TERM 2/0/7.
    assert_eq!(r.unwrap().rtr_accepted, RtrKinds::only(RtrKind::Write));
    let e = i.unwrap().unwrap_err();
    assert_eq!(e, NegotiationError::NoMatchingRtr);
    assert_eq!(e.term(), TermError::MpaNoMatchingRtr);
}

#[test]
fn p2p_no_common_rtr() {
    let (r, i) = exchange(&p2p(RtrKinds::only(RtrKind::Send)), &responder(8, 4));
    assert_eq!(r.unwrap().reply_enhanced.unwrap().rtr, WRITE_READ);
    assert_eq!(i.unwrap().unwrap_err().term(), TermError::MpaNoMatchingRtr);
}

#[test]
fn p2p_responder_supporting_nothing() {
    let mut r = responder(8, 4);
    r.rtr = RtrKinds::NONE;
    let (d, _) = exchange(&p2p(ALL_RTR), &r);
    assert_eq!(d.unwrap_err(), NegotiationError::NoMatchingRtr);
}

#[test]
fn client_server_ignores_rtr_flags() {
    // A=0 with B/C/D set in the request: they must be ignored.
    let e = EnhancedData {
        rtr: ALL_RTR,
        ..enhanced(1, 1)
    };
    let f = request_frame(MpaFlags::default(), 2, Some(e));
    let (req, _) = MpaFrame::decode(&f, FrameKind::Request).unwrap();
    let d = responder(8, 4).process_request(&req).unwrap();
    let rep = d.reply_enhanced.unwrap();
    assert!(!rep.peer_to_peer && rep.rtr.is_empty());
    assert!(d.rtr_accepted.is_empty());
}

#[test]
fn connection_model_mismatch() {
    let e = enhanced(4, 4);
    let err = reply_to(&p2p(ALL_RTR), MpaFlags::default(), 2, Some(e)).unwrap_err();
    assert_eq!(err, NegotiationError::ConnectionModelMismatch);
    assert_eq!(err.term(), TermError::MpaNoMatchingRtr);
    // And the other way round.
    let e = EnhancedData {
        peer_to_peer: true,
        rtr: WRITE_READ,
        ..e
    };
    assert_eq!(
        reply_to(&initiator(4, 4), MpaFlags::default(), 2, Some(e)).unwrap_err(),
        NegotiationError::ConnectionModelMismatch
    );
}

// --- RFC 5044: CRC, revision, markers, enhanced interoperability ---

#[test]
fn crc_policy_matrix() {
    use CrcPolicy::*;
    // (initiator, responder) -> Some(use_crc) or None for failure.
    let cases = [
        (Required, Required, Some(true)),
        (Required, Optional, Some(true)),
        (Required, Disabled, None),
        (Optional, Required, Some(true)),
        (Optional, Optional, Some(false)),
        (Optional, Disabled, Some(false)),
        (Disabled, Required, None),
        (Disabled, Optional, Some(false)),
        (Disabled, Disabled, Some(false)),
    ];
    for (ic, rc, want) in cases {
        let i = InitiatorConfig {
            crc: ic,
            ..initiator(1, 1)
        };
        let r = ResponderConfig {
            crc: rc,
            ..responder(1, 1)
        };
        let (d, o) = exchange(&i, &r);
        match want {
            Some(use_crc) => {
                assert_eq!(d.unwrap().use_crc, use_crc, "{ic:?}/{rc:?}");
                assert_eq!(accepted(o).use_crc, use_crc, "{ic:?}/{rc:?}");
            }
            None if ic == Required => {
                assert_eq!(d.unwrap_err(), NegotiationError::CrcRequiredByPeer);
                assert_eq!(
                    NegotiationError::CrcRequiredByPeer.term(),
                    TermError::MpaLocalCatastrophic
                );
            }
            None => {
                assert!(d.unwrap().use_crc);
                assert_eq!(o.unwrap().unwrap_err(), NegotiationError::CrcRequiredByPeer);
            }
        }
    }
}

#[test]
fn reply_dropping_required_crc_is_invalid() {
    let i = InitiatorConfig {
        crc: CrcPolicy::Required,
        ..initiator(1, 1)
    };
    let err = reply_to(&i, MpaFlags::default(), 2, Some(enhanced(1, 1))).unwrap_err();
    assert_eq!(err, NegotiationError::CrcRefusedByPeer);
    assert_eq!(err.term(), TermError::MpaInvalidRequestReply);
}

fn request_frame(flags: MpaFlags, rev: u8, enhanced: Option<EnhancedData>) -> Vec<u8> {
    let mut buf = [0u8; 64];
    let n = encode_frame(
        &mut buf,
        FrameKind::Request,
        flags,
        rev,
        enhanced.as_ref(),
        &[],
    )
    .unwrap();
    buf[..n].to_vec()
}

#[test]
fn revisions() {
    let r = responder(4, 4);
    for rev in [0u8, 3, 255] {
        let f = request_frame(MpaFlags::default(), rev, None);
        let (req, _) = MpaFrame::decode(&f, FrameKind::Request).unwrap();
        let e = r.process_request(&req).unwrap_err();
        assert_eq!(e, NegotiationError::UnsupportedRevision(rev));
        assert_eq!(e.term(), TermError::MpaInvalidRequestReply);
    }
    // A revision 1 request is answered with revision 1, unenhanced.
    let f = request_frame(MpaFlags::default(), 1, None);
    let (req, _) = MpaFrame::decode(&f, FrameKind::Request).unwrap();
    let d = r.process_request(&req).unwrap();
    assert_eq!((d.revision, d.reply_enhanced), (1, None));
    // An unenhanced initiator speaks revision 1 and accepts a plain reply.
    let i = unenhanced_initiator();
    let (d, o) = exchange(&i, &r);
    assert_eq!(d.unwrap().revision, 1);
    let o = accepted(o);
    assert_eq!((o.revision, o.local_ird), (1, QueueDepth::Unchanged));
    // A reply with a higher revision than requested is invalid.
    assert_eq!(
        reply_to(&i, MpaFlags::default(), 2, None).unwrap_err(),
        NegotiationError::UnsupportedRevision(2)
    );
}

#[test]
fn revision_2_unenhanced_request_gets_unenhanced_reply() {
    let f = request_frame(MpaFlags::default(), 2, None);
    let (req, _) = MpaFrame::decode(&f, FrameKind::Request).unwrap();
    let d = responder(4, 4).process_request(&req).unwrap();
    assert_eq!(
        (d.revision, d.reply_enhanced, d.reply_flags.enhanced),
        (2, None, false)
    );
}

#[test]
fn markers_are_refused() {
    let markers = MpaFlags {
        markers: true,
        ..Default::default()
    };
    let f = request_frame(markers, 1, None);
    let (req, _) = MpaFrame::decode(&f, FrameKind::Request).unwrap();
    let e = responder(4, 4).process_request(&req).unwrap_err();
    assert_eq!(e, NegotiationError::MarkersRequired);
    assert_eq!(e.term(), TermError::MpaLocalCatastrophic);
    let mut reply = [0u8; 64];
    let n = responder(4, 4)
        .encode_reject(&req, e, &mut reply, &[])
        .unwrap();
    let (rep, _) = MpaFrame::decode(&reply[..n], FrameKind::Reply).unwrap();
    assert!(rep.header.flags.reject && !rep.header.flags.markers);
    // A reply asking for markers is refused by the initiator.
    assert_eq!(
        reply_to(&unenhanced_initiator(), markers, 1, None).unwrap_err(),
        NegotiationError::MarkersRequired
    );
}

#[test]
fn enhanced_interoperability() {
    // Enhanced request to a responder without RFC 6581.
    let r = ResponderConfig {
        enhanced: false,
        ..responder(4, 4)
    };
    let (d, o) = exchange(&initiator(1, 1), &r);
    let e = d.unwrap_err();
    assert_eq!(e, NegotiationError::EnhancedNotSupported);
    assert_eq!(e.term(), TermError::MpaInvalidRequestReply);
    // Its reject is revision 1, unenhanced; the initiator sees a reject.
    assert_eq!(
        o.unwrap().unwrap(),
        InitiatorOutcome::Rejected { peer: None }
    );
    // Enhanced request, unenhanced accept: invalid.
    assert_eq!(
        reply_to(&initiator(1, 1), MpaFlags::default(), 2, None).unwrap_err(),
        NegotiationError::EnhancedMismatch
    );
    // Unenhanced request (revision 1 cannot carry S), enhanced reply: invalid.
    let e = Some(enhanced(1, 1));
    assert!(reply_to(&unenhanced_initiator(), MpaFlags::default(), 2, e).is_err());
}

#[test]
fn reject_passes_peer_values() {
    let mut reply = [0u8; 64];
    let e = enhanced(7, 9);
    let flags = MpaFlags {
        reject: true,
        ..Default::default()
    };
    let n = encode_frame(&mut reply, FrameKind::Reply, flags, 2, Some(&e), b"why").unwrap();
    let (rep, _) = MpaFrame::decode(&reply[..n], FrameKind::Reply).unwrap();
    assert_eq!(
        initiator(1, 1).process_reply(&rep).unwrap(),
        InitiatorOutcome::Rejected { peer: Some(e) }
    );
    assert_eq!(rep.ulp_private_data, b"why");
}

fn depth(v: u16) -> impl Strategy<Value = u16> {
    prop_oneof![Just(NO_NEGOTIATION), 0u16..=v]
}

proptest! {
    /// Whenever both sides accept, the section 9.1 relations hold between the
    /// values they configure.
    #[test]
    fn accepted_negotiations_satisfy_rfc6581_relations(
        ii in depth(40), io in depth(40), imax in 0u16..40,
        rmax in 0u16..40, rord in 0u16..40, rmin in 0u16..8,
        ip2p in any::<bool>(), irtr in any::<[bool; 3]>(), rrtr in any::<[bool; 3]>(),
    ) {
        let i = InitiatorConfig {
            crc: CrcPolicy::Optional, enhanced: true, ird: ii, ord: io, max_ird: imax.max(if ii == NO_NEGOTIATION { 0 } else { ii }),
            peer_to_peer: ip2p, rtr: RtrKinds { send: irtr[0], write: irtr[1], read: irtr[2] },
            large_fpdus: false,
        };
        let r = ResponderConfig {
            crc: CrcPolicy::Optional, enhanced: true, max_ird: rmax, ord: rord, min_ord: rmin,
            rtr: RtrKinds { send: rrtr[0], write: rrtr[1], read: rrtr[2] },
            large_fpdus: false,
        };
        let (d, o) = exchange(&i, &r);
        if let (Ok(d), Some(Ok(InitiatorOutcome::Accepted(o)))) = (d, o) {
            // initiator ORD <= responder IRD
            if let (QueueDepth::Set(iord), QueueDepth::Set(rird)) = (o.local_ord, d.local_ird) {
                prop_assert!(iord <= rird);
            }
            // responder ORD <= initiator IRD
            if let (QueueDepth::Set(rord), QueueDepth::Set(iird)) = (d.local_ord, o.local_ird) {
                prop_assert!(rord <= iird);
            }
            if let QueueDepth::Set(iird) = o.local_ird { prop_assert!(iird <= i.max_ird); }
            if let QueueDepth::Set(rird) = d.local_ird { prop_assert!(rird <= r.max_ird); }
            if ip2p {
                let k = o.rtr.unwrap();
                prop_assert!(i.rtr.contains(k) && d.rtr_accepted.contains(k));
                if k == RtrKind::Read { prop_assert!(d.local_ird != QueueDepth::Set(0)); }
            } else {
                prop_assert_eq!(o.rtr, None);
            }
        }
    }
}

// --- Large FPDUs (reserved flag bit 0x08, the C siw's MPA_RR_FLAG_GSO_EXP) ---

/// Offset of the flags byte in an MPA frame (right after the key).
const FLAGS: usize = KEY_LEN;
/// The reserved bits other than [`RESERVED_LARGE_FPDUS`].
const OTHER_RESERVED: u8 = 0x0F & !RESERVED_LARGE_FPDUS;

/// One exchange over the wire: the frames as sent (the reply may be a
/// reject) and both sides' results. `noise` is ORed into the flags byte of
/// both frames on their way, after they were recorded.
struct Wire {
    request: Vec<u8>,
    reply: Vec<u8>,
    responder: Result<ResponderDecision, NegotiationError>,
    initiator: Result<InitiatorOutcome, NegotiationError>,
}

fn exchange_on_wire(i: &InitiatorConfig, r: &ResponderConfig, noise: u8) -> Wire {
    let mut buf = [0u8; 600];
    let n = i.encode_request(&mut buf, b"ulp").unwrap();
    let request = buf[..n].to_vec();
    buf[FLAGS] |= noise;
    let (req, _) = MpaFrame::decode(&buf[..n], FrameKind::Request).unwrap();
    let responder = r.process_request(&req);
    let mut out = [0u8; 600];
    let m = match &responder {
        Ok(d) => d.encode_reply(&mut out, b"rep").unwrap(),
        Err(e) => r.encode_reject(&req, *e, &mut out, b"").unwrap(),
    };
    let reply = out[..m].to_vec();
    out[FLAGS] |= noise;
    let (rep, _) = MpaFrame::decode(&out[..m], FrameKind::Reply).unwrap();
    Wire {
        request,
        reply,
        responder,
        initiator: i.process_reply(&rep),
    }
}

fn large(i: InitiatorConfig, on: bool) -> InitiatorConfig {
    InitiatorConfig {
        large_fpdus: on,
        ..i
    }
}

fn large_r(r: ResponderConfig, on: bool) -> ResponderConfig {
    ResponderConfig {
        large_fpdus: on,
        ..r
    }
}

/// Initiators of every flavour the bit must be independent of: enhanced
/// client-server, enhanced peer-to-peer, revision 1, CRC required.
fn initiator_flavours() -> [InitiatorConfig; 4] {
    [
        initiator(4, 4),
        p2p(ALL_RTR),
        unenhanced_initiator(),
        InitiatorConfig {
            crc: CrcPolicy::Required,
            ..initiator(4, 4)
        },
    ]
}

#[test]
fn large_fpdus_bit_is_sent_exactly_when_offered() {
    for base in initiator_flavours() {
        for i_on in [false, true] {
            for r_on in [false, true] {
                let (i, r) = (large(base, i_on), large_r(responder(8, 4), r_on));
                let w = exchange_on_wire(&i, &r, 0);
                let ctx = format!("{base:?} initiator {i_on} responder {r_on}");
                assert!(w.responder.is_ok(), "{ctx}");
                // The request says what the initiator offers, the reply what
                // the responder offers, whatever the request said.
                assert_eq!(w.request[FLAGS] & RESERVED_LARGE_FPDUS != 0, i_on, "{ctx}");
                assert_eq!(w.reply[FLAGS] & RESERVED_LARGE_FPDUS != 0, r_on, "{ctx}");
                assert_eq!(i.request_flags().large_fpdus(), i_on, "{ctx}");
                assert_eq!(
                    w.responder.unwrap().reply_flags.large_fpdus(),
                    r_on,
                    "{ctx}"
                );
            }
        }
    }
}

#[test]
fn large_fpdus_need_both_offers_in_both_roles() {
    for base in initiator_flavours() {
        for i_on in [false, true] {
            for r_on in [false, true] {
                let w = exchange_on_wire(&large(base, i_on), &large_r(responder(8, 4), r_on), 0);
                let ctx = format!("{base:?} initiator {i_on} responder {r_on}");
                let both = i_on && r_on;
                assert_eq!(w.responder.unwrap().large_fpdus, both, "{ctx}");
                assert_eq!(accepted(Some(w.initiator)).large_fpdus, both, "{ctx}");
            }
        }
    }
}

#[test]
fn large_fpdus_in_a_revision_1_exchange() {
    // Large FPDUs are independent of enhanced connection establishment: a
    // revision 1 request, to a responder with and without RFC 6581 support.
    for r_enhanced in [false, true] {
        let r = ResponderConfig {
            enhanced: r_enhanced,
            ..large_r(responder(8, 4), true)
        };
        let w = exchange_on_wire(&large(unenhanced_initiator(), true), &r, 0);
        for frame in [&w.request, &w.reply] {
            assert_eq!(frame[FLAGS + 1], REVISION_1);
            assert_eq!(frame[FLAGS] & !RESERVED_LARGE_FPDUS, 0);
            assert_ne!(frame[FLAGS] & RESERVED_LARGE_FPDUS, 0);
        }
        let d = w.responder.unwrap();
        assert_eq!((d.revision, d.reply_enhanced), (REVISION_1, None));
        assert!(d.large_fpdus, "responder enhanced {r_enhanced}");
        let o = accepted(Some(w.initiator));
        assert_eq!((o.revision, o.peer), (REVISION_1, None));
        assert!(o.large_fpdus, "responder enhanced {r_enhanced}");
    }
    // And a hand-built revision 1 reply with the bit.
    let flags = MpaFlags::default().with_large_fpdus(true);
    let o = reply_to(&large(unenhanced_initiator(), true), flags, 1, None);
    assert!(accepted(Some(o)).large_fpdus);
    let o = reply_to(&large(unenhanced_initiator(), false), flags, 1, None);
    assert!(!accepted(Some(o)).large_fpdus);
}

#[test]
fn other_reserved_bits_are_sent_as_zero() {
    // Even when the peer's frame has every reserved bit set: the reply does
    // not echo the request's bits.
    for base in initiator_flavours() {
        for on in [false, true] {
            for noise in [0, OTHER_RESERVED, 0x0F] {
                let w = exchange_on_wire(&large(base, on), &large_r(responder(8, 4), on), noise);
                assert_eq!(w.request[FLAGS] & OTHER_RESERVED, 0, "{base:?} {on}");
                assert_eq!(w.reply[FLAGS] & OTHER_RESERVED, 0, "{base:?} {on}");
            }
        }
    }
}

#[test]
fn other_reserved_bits_are_ignored_on_receive() {
    for base in initiator_flavours() {
        for (i_on, r_on) in [(false, false), (false, true), (true, false), (true, true)] {
            let (i, r) = (large(base, i_on), large_r(responder(8, 4), r_on));
            let clean = exchange_on_wire(&i, &r, 0);
            // The other reserved bits in both frames change nothing: the
            // frames are accepted on the same terms, large FPDUs included.
            let noisy = exchange_on_wire(&i, &r, OTHER_RESERVED);
            assert_eq!(noisy.responder, clean.responder, "{base:?} {i_on} {r_on}");
            assert_eq!(noisy.initiator, clean.initiator, "{base:?} {i_on} {r_on}");
            assert_eq!(
                accepted(Some(noisy.initiator)).large_fpdus,
                i_on && r_on,
                "{base:?} {i_on} {r_on}"
            );
        }
    }
    // Hand-built frames with only the other reserved bits set do not turn
    // large FPDUs on for a side that offers them.
    let others = MpaFlags {
        reserved: OTHER_RESERVED,
        ..Default::default()
    };
    let f = request_frame(others, 1, None);
    let (req, _) = MpaFrame::decode(&f, FrameKind::Request).unwrap();
    assert!(!req.header.flags.large_fpdus());
    let d = large_r(responder(8, 4), true)
        .process_request(&req)
        .unwrap();
    assert!(!d.large_fpdus);
    assert_eq!(d.reply_flags.reserved, RESERVED_LARGE_FPDUS);
    let i = large(initiator(4, 4), true);
    let o = reply_to(&i, others, 2, Some(enhanced(4, 4)));
    assert!(!accepted(Some(o)).large_fpdus);
    // With all four reserved bits set, the large FPDU bit counts.
    let all = MpaFlags {
        reserved: 0x0F,
        ..Default::default()
    };
    let f = request_frame(all, 1, None);
    let (req, _) = MpaFrame::decode(&f, FrameKind::Request).unwrap();
    assert!(
        large_r(responder(8, 4), true)
            .process_request(&req)
            .unwrap()
            .large_fpdus
    );
    let o = reply_to(&i, all, 2, Some(enhanced(4, 4)));
    assert!(accepted(Some(o)).large_fpdus);
}

#[test]
fn reject_never_carries_large_fpdus() {
    let refusals: [(InitiatorConfig, ResponderConfig, NegotiationError); 4] = [
        // Enhanced request to a responder without RFC 6581 support.
        (
            initiator(1, 1),
            ResponderConfig {
                enhanced: false,
                ..responder(4, 4)
            },
            NegotiationError::EnhancedNotSupported,
        ),
        // The initiator's IRD is too small for the responder's minimum ORD.
        (
            initiator(2, 1),
            ResponderConfig {
                min_ord: 4,
                ..responder(8, 8)
            },
            NegotiationError::InsufficientIrd { required: 4 },
        ),
        // CRC required against CRC disabled.
        (
            InitiatorConfig {
                crc: CrcPolicy::Required,
                ..unenhanced_initiator()
            },
            ResponderConfig {
                crc: CrcPolicy::Disabled,
                ..responder(4, 4)
            },
            NegotiationError::CrcRequiredByPeer,
        ),
        // No RTR kind in common.
        (
            p2p(ALL_RTR),
            ResponderConfig {
                rtr: RtrKinds::NONE,
                ..responder(8, 4)
            },
            NegotiationError::NoMatchingRtr,
        ),
    ];
    for (i, r, error) in refusals {
        for noise in [0, 0x0F] {
            let w = exchange_on_wire(&large(i, true), &large_r(r, true), noise);
            assert_eq!(w.responder, Err(error));
            assert_ne!(w.request[FLAGS] & RESERVED_LARGE_FPDUS, 0);
            // The reject has the R bit and no reserved bit at all.
            assert_eq!(w.reply[FLAGS] & 0x2F, 0x20, "{error:?} noise {noise:#x}");
            assert!(
                matches!(w.initiator, Ok(InitiatorOutcome::Rejected { .. })),
                "{error:?}: {:?}",
                w.initiator
            );
        }
    }
    // A reject of a request with markers, encoded directly.
    let markers = MpaFlags {
        markers: true,
        ..MpaFlags::default().with_large_fpdus(true)
    };
    let f = request_frame(markers, 1, None);
    let (req, _) = MpaFrame::decode(&f, FrameKind::Request).unwrap();
    let r = large_r(responder(4, 4), true);
    let e = r.process_request(&req).unwrap_err();
    let mut out = [0u8; 64];
    let n = r.encode_reject(&req, e, &mut out, &[]).unwrap();
    let (rep, _) = MpaFrame::decode(&out[..n], FrameKind::Reply).unwrap();
    assert!(rep.header.flags.reject);
    assert!(!rep.header.flags.large_fpdus());
    assert_eq!(rep.header.flags.reserved, 0);
}

proptest! {
    /// Over arbitrary configurations and reserved noise on the wire: each
    /// frame carries the bit exactly when its sender offers (a reject never),
    /// no other reserved bit is sent, every acceptance agrees on large FPDUs
    /// iff both offer, and the noise changes no outcome.
    #[test]
    fn large_fpdus_iff_both_offer(
        i_on in any::<bool>(), r_on in any::<bool>(),
        i_enh in any::<bool>(), r_enh in any::<bool>(), ip2p in any::<bool>(),
        i_crc in 0u8..3, r_crc in 0u8..3,
        ii in depth(20), io in depth(20), rmax in 0u16..20, rord in 0u16..20, rmin in 0u16..4,
        irtr in any::<[bool; 3]>(), rrtr in any::<[bool; 3]>(),
        noise in 0u8..16,
    ) {
        let policy = |p: u8| [CrcPolicy::Required, CrcPolicy::Optional, CrcPolicy::Disabled][usize::from(p)];
        let i = InitiatorConfig {
            crc: policy(i_crc), enhanced: i_enh, ird: ii, ord: io, max_ird: 20,
            peer_to_peer: ip2p, rtr: RtrKinds { send: irtr[0], write: irtr[1], read: irtr[2] },
            large_fpdus: i_on,
        };
        let r = ResponderConfig {
            crc: policy(r_crc), enhanced: r_enh, max_ird: rmax, ord: rord, min_ord: rmin,
            rtr: RtrKinds { send: rrtr[0], write: rrtr[1], read: rrtr[2] },
            large_fpdus: r_on,
        };
        let w = exchange_on_wire(&i, &r, 0);
        prop_assert_eq!(w.request[FLAGS] & 0x0F, if i_on { RESERVED_LARGE_FPDUS } else { 0 });
        match &w.responder {
            Ok(d) => {
                prop_assert_eq!(w.reply[FLAGS] & 0x0F, if r_on { RESERVED_LARGE_FPDUS } else { 0 });
                prop_assert_eq!(d.large_fpdus, i_on && r_on);
            }
            Err(_) => prop_assert_eq!(w.reply[FLAGS] & 0x0F, 0),
        }
        if let Ok(InitiatorOutcome::Accepted(o)) = &w.initiator {
            prop_assert!(w.responder.is_ok());
            prop_assert_eq!(o.large_fpdus, i_on && r_on);
        }
        // Noise in the other reserved bits changes nothing; noise in the
        // large FPDU bit can only turn it on, and only for a side offering it.
        let n = exchange_on_wire(&i, &r, noise);
        if noise & RESERVED_LARGE_FPDUS == 0 {
            prop_assert_eq!(&n.responder, &w.responder);
            prop_assert_eq!(&n.initiator, &w.initiator);
        }
        if let Ok(d) = &n.responder {
            prop_assert_eq!(d.large_fpdus, r_on && (i_on || noise & RESERVED_LARGE_FPDUS != 0));
        }
        if let Ok(InitiatorOutcome::Accepted(o)) = &n.initiator {
            prop_assert_eq!(o.large_fpdus, i_on && (r_on || noise & RESERVED_LARGE_FPDUS != 0));
        }
    }
}
