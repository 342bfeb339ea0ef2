// SPDX-License-Identifier: GPL-2.0

//! MPA connection setup driven end to end: an initiator and a responder
//! exchange real bytes (revision 1 and 2, client-server and each RTR kind of
//! the peer-to-peer model), delivered whole, split at every point and in
//! random chunks, plus the failure paths of RFC 6581 section 8.

use proptest::prelude::*;
use rsiw_proto::proto::crc32c::SoftCrc32c;
use rsiw_proto::proto::fpdu::{self, FpduError};
use rsiw_proto::proto::mpa::*;
use rsiw_proto::proto::mpa_handshake::*;
use rsiw_proto::proto::mpa_negotiation::*;
use rsiw_proto::proto::rdmap::{self, Opcode, OpcodeHeader, ReadRequestHeader, Segment};
use rsiw_proto::proto::terminate::{TermError, TerminateMessage};

const ALL_RTR: RtrKinds = RtrKinds {
    send: true,
    write: true,
    read: true,
};

fn initiator(enhanced: bool, p2p: bool, rtr: RtrKinds) -> InitiatorConfig {
    InitiatorConfig {
        crc: CrcPolicy::Optional,
        enhanced,
        ird: 8,
        ord: 4,
        max_ird: 16,
        peer_to_peer: p2p,
        rtr,
        large_fpdus: false,
    }
}

fn responder(enhanced: bool, rtr: RtrKinds) -> ResponderConfig {
    ResponderConfig {
        crc: CrcPolicy::Optional,
        enhanced,
        max_ird: 16,
        ord: 2,
        min_ord: 0,
        rtr,
        large_fpdus: false,
    }
}

type Responder = ResponderHandshake<SoftCrc32c>;

/// Feeds `bytes` to a consumer in the given chunk sizes (the last chunk gets
/// the rest), re-offering unconsumed bytes with the next chunk like a socket
/// would, until the consumer reports an event. Returns the event and the
/// number of bytes consumed.
fn feed<E>(
    bytes: &[u8],
    chunks: &[usize],
    mut consume: impl FnMut(&[u8]) -> (usize, Option<E>),
) -> (Option<E>, usize) {
    let mut offered = 0;
    let mut consumed = 0;
    let mut sizes = chunks.iter().copied();
    loop {
        offered = (offered + sizes.next().unwrap_or(bytes.len())).min(bytes.len());
        let (n, event) = consume(&bytes[consumed..offered]);
        assert!(consumed + n <= offered);
        consumed += n;
        if event.is_some() || offered == bytes.len() {
            return (event, consumed);
        }
    }
}

/// The bytes of one complete setup.
#[derive(Debug, Default)]
struct Transcript {
    request: Vec<u8>,
    reply: Vec<u8>,
    rtr: Vec<u8>,
    rtr_response: Vec<u8>,
}

/// Runs a whole setup, delivering every message in `chunks`, and checks
/// that both sides agree.
fn run(i: InitiatorConfig, r: ResponderConfig, chunks: &[usize]) -> Transcript {
    let mut t = Transcript::default();
    let mut ini = InitiatorHandshake::new(i);
    let mut res = Responder::new(r, SoftCrc32c);
    let mut buf = [0u8; 600];

    let n = ini.request(b"hello", &mut buf).unwrap();
    t.request = buf[..n].to_vec();
    let (event, used) = feed(&t.request, chunks, |b| res.on_bytes(b));
    assert_eq!(used, n);
    let Some(ResponderEvent::ConnectRequest(req)) = event else {
        panic!("{event:?}");
    };
    assert_eq!(req.revision, i.revision());
    assert_eq!(req.peer, i.request_enhanced());
    assert_eq!(res.peer_private_data(), b"hello");

    let accepted = res.accept(b"world!", 16, 2, &mut buf).unwrap();
    t.reply = buf[..accepted.len].to_vec();
    let (event, used) = feed(&t.reply, chunks, |b| ini.on_bytes(b).unwrap());
    assert_eq!(used, accepted.len);
    let Some(InitiatorEvent::Connected(d)) = event else {
        panic!("{event:?}");
    };
    assert_eq!(ini.peer_private_data(), b"world!");
    assert_eq!(d.use_crc, accepted.decision.use_crc);
    assert_eq!(d.revision, accepted.decision.revision);
    assert_eq!(accepted.established, d.rtr.is_none());
    assert_eq!(res.is_established(), d.rtr.is_none());

    let n = ini.rtr_fpdu(&mut buf, SoftCrc32c).unwrap();
    t.rtr = buf[..n].to_vec();
    if let Some(kind) = d.rtr {
        let (event, used) = feed(&t.rtr, chunks, |b| res.on_bytes(b));
        assert_eq!(used, n);
        let Some(ResponderEvent::Established(rtr)) = event else {
            panic!("{event:?}");
        };
        assert_eq!(rtr.kind(), kind);
        assert!(res.is_established());
    } else {
        assert_eq!(n, 0);
    }
    let n = res.rtr_response(&mut buf).unwrap();
    t.rtr_response = buf[..n].to_vec();
    t
}

fn frame(key: &[u8; 16], flags: u8, rev: u8, pd: &[u8]) -> Vec<u8> {
    let mut v = key.to_vec();
    v.extend_from_slice(&[flags, rev]);
    v.extend_from_slice(&(pd.len() as u16).to_be_bytes());
    v.extend_from_slice(pd);
    v
}

fn with_crc(mut fpdu: Vec<u8>, crc: bool) -> Vec<u8> {
    let body = fpdu.len() - 4;
    if crc {
        let c = rsiw_proto::proto::crc32c::checksum(SoftCrc32c, &fpdu[..body]);
        fpdu[body..].copy_from_slice(&c.to_le_bytes());
    }
    fpdu
}

const WRITE_RTR: [u8; 20] = [
    0x00, 0x0E, // ULPDU_Length 14
    0xC1, 0x40, // T=1 L=1 DV=1, RV=1 RDMA Write
    0, 0, 0, 1, // STag 1
    0, 0, 0, 0, 0, 0, 0, 0, // TO 0
    0, 0, 0, 0, // CRC (off)
];

const SEND_RTR: [u8; 24] = [
    0x00, 0x12, // ULPDU_Length 18
    0x41, 0x43, // T=0 L=1 DV=1, RV=1 Send
    0, 0, 0, 0, // reserved
    0, 0, 0, 0, // QN 0
    0, 0, 0, 1, // MSN 1
    0, 0, 0, 0, // MO 0
    0, 0, 0, 0, // CRC (off)
];

const READ_RTR: [u8; 52] = [
    0x00, 0x2E, // ULPDU_Length 46
    0x41, 0x41, // T=0 L=1 DV=1, RV=1 Read Request
    0, 0, 0, 0, // reserved
    0, 0, 0, 1, // QN 1
    0, 0, 0, 1, // MSN 1
    0, 0, 0, 0, // MO 0
    0, 0, 0, 1, // sink STag 1
    0, 0, 0, 0, 0, 0, 0, 0, // sink TO 0
    0, 0, 0, 0, // read size 0
    0, 0, 0, 1, // source STag 1
    0, 0, 0, 0, 0, 0, 0, 0, // source TO 0
    0, 0, 0, 0, // CRC (off)
];

const READ_RESPONSE: [u8; 20] = [
    0x00, 0x0E, // ULPDU_Length 14
    0xC1, 0x42, // T=1 L=1 DV=1, RV=1 Read Response
    0, 0, 0, 1, // sink STag 1
    0, 0, 0, 0, 0, 0, 0, 0, // sink TO 0
    0, 0, 0, 0, // CRC (off)
];

#[test]
fn revision_1_client_server_is_byte_exact() {
    let t = run(
        initiator(false, false, RtrKinds::NONE),
        responder(true, ALL_RTR),
        &[],
    );
    assert_eq!(t.request, frame(&REQUEST_KEY, 0x00, 1, b"hello"));
    assert_eq!(t.reply, frame(&REPLY_KEY, 0x00, 1, b"world!"));
    assert!(t.rtr.is_empty() && t.rtr_response.is_empty());
}

#[test]
fn revision_1_responder_without_enhanced_support() {
    let t = run(
        initiator(false, false, RtrKinds::NONE),
        responder(false, RtrKinds::NONE),
        &[],
    );
    assert_eq!(t.reply, frame(&REPLY_KEY, 0x00, 1, b"world!"));
}

#[test]
fn revision_2_client_server_is_byte_exact() {
    let t = run(
        initiator(true, false, ALL_RTR),
        responder(true, ALL_RTR),
        &[],
    );
    // S set; IRD 8, ORD 4; no A/B/C/D in the client-server model.
    let pd = [&[0x00, 0x08, 0x00, 0x04][..], b"hello"].concat();
    assert_eq!(t.request, frame(&REQUEST_KEY, 0x10, 2, &pd));
    // Responder IRD = initiator ORD 4, ORD = min(ULP 2, initiator IRD 8).
    let pd = [&[0x00, 0x04, 0x00, 0x02][..], b"world!"].concat();
    assert_eq!(t.reply, frame(&REPLY_KEY, 0x10, 2, &pd));
    assert!(t.rtr.is_empty());
}

#[test]
fn peer_to_peer_write_rtr_is_byte_exact() {
    let write = RtrKinds::only(RtrKind::Write);
    let t = run(initiator(true, true, ALL_RTR), responder(true, write), &[]);
    let pd = [&[0xC0, 0x08, 0xC0, 0x04][..], b"hello"].concat();
    assert_eq!(t.request, frame(&REQUEST_KEY, 0x10, 2, &pd));
    let pd = [&[0x80, 0x04, 0x80, 0x02][..], b"world!"].concat();
    assert_eq!(t.reply, frame(&REPLY_KEY, 0x10, 2, &pd));
    assert_eq!(t.rtr, WRITE_RTR);
    assert!(t.rtr_response.is_empty());
}

#[test]
fn peer_to_peer_send_rtr_is_byte_exact() {
    let send = RtrKinds::only(RtrKind::Send);
    let t = run(initiator(true, true, send), responder(true, ALL_RTR), &[]);
    let pd = [&[0xC0, 0x08, 0x00, 0x04][..], b"hello"].concat();
    assert_eq!(t.request, frame(&REQUEST_KEY, 0x10, 2, &pd));
    let pd = [&[0xC0, 0x04, 0x00, 0x02][..], b"world!"].concat();
    assert_eq!(t.reply, frame(&REPLY_KEY, 0x10, 2, &pd));
    assert_eq!(t.rtr, SEND_RTR);
    assert!(t.rtr_response.is_empty());
}

#[test]
fn peer_to_peer_read_rtr_is_byte_exact_and_answered() {
    let read = RtrKinds::only(RtrKind::Read);
    let mut i = initiator(true, true, read);
    i.ord = 0;
    let t = run(i, responder(true, ALL_RTR), &[]);
    let pd = [&[0x80, 0x08, 0x40, 0x00][..], b"hello"].concat();
    assert_eq!(t.request, frame(&REQUEST_KEY, 0x10, 2, &pd));
    // Initiator ORD 0, yet the responder IRD is raised to 1 for the Read RTR
    // (RFC 6581 section 9.1).
    let pd = [&[0x80, 0x01, 0x40, 0x02][..], b"world!"].concat();
    assert_eq!(t.reply, frame(&REPLY_KEY, 0x10, 2, &pd));
    assert_eq!(t.rtr, READ_RTR);
    assert_eq!(t.rtr_response, READ_RESPONSE);
}

#[test]
fn crc_is_negotiated_and_used_for_the_rtr() {
    let mut i = initiator(true, true, ALL_RTR);
    i.crc = CrcPolicy::Required;
    let t = run(i, responder(true, RtrKinds::only(RtrKind::Read)), &[]);
    assert_eq!(t.request[16], 0x50);
    assert_eq!(t.reply[16], 0x50);
    assert_eq!(t.rtr, with_crc(READ_RTR.to_vec(), true));
    assert_eq!(t.rtr_response, with_crc(READ_RESPONSE.to_vec(), true));

    let mut r = responder(true, ALL_RTR);
    r.crc = CrcPolicy::Required;
    let t = run(initiator(true, true, ALL_RTR), r, &[]);
    assert_eq!(t.request[16], 0x10);
    assert_eq!(t.reply[16], 0x50);
    assert_eq!(t.rtr, with_crc(WRITE_RTR.to_vec(), true));
}

/// Every scenario the loopback tests cover.
fn scenarios() -> Vec<(InitiatorConfig, ResponderConfig)> {
    let mut v = vec![
        (
            initiator(false, false, RtrKinds::NONE),
            responder(true, ALL_RTR),
        ),
        (initiator(true, false, ALL_RTR), responder(true, ALL_RTR)),
    ];
    for kind in [RtrKind::Write, RtrKind::Read, RtrKind::Send] {
        for crc in [CrcPolicy::Optional, CrcPolicy::Required] {
            let mut i = initiator(true, true, RtrKinds::only(kind));
            i.crc = crc;
            v.push((i, responder(true, ALL_RTR)));
        }
    }
    v
}

#[test]
fn every_split_point_gives_the_same_bytes() {
    for (i, r) in scenarios() {
        let whole = run(i, r, &[]);
        let longest = [&whole.request, &whole.reply, &whole.rtr]
            .iter()
            .map(|m| m.len())
            .max()
            .unwrap();
        for split in 0..=longest {
            let t = run(i, r, &[split]);
            assert_eq!(t.request, whole.request);
            assert_eq!(t.reply, whole.reply);
            assert_eq!(t.rtr, whole.rtr);
            assert_eq!(t.rtr_response, whole.rtr_response);
        }
        // One byte at a time.
        let t = run(i, r, &[1; 600]);
        assert_eq!(t.rtr, whole.rtr);
    }
}

proptest! {
    #[test]
    fn random_chunks_and_configs(
        index in 0usize..8,
        chunks in proptest::collection::vec(0usize..40, 0..40),
    ) {
        let (i, r) = scenarios()[index];
        let whole = run(i, r, &[]);
        let t = run(i, r, &chunks);
        prop_assert_eq!(t.request, whole.request);
        prop_assert_eq!(t.reply, whole.reply);
        prop_assert_eq!(t.rtr, whole.rtr);
    }

    #[test]
    fn reader_takes_exactly_one_frame(
        pd_len in 0usize..=512,
        trailing in proptest::collection::vec(any::<u8>(), 0..16),
        chunks in proptest::collection::vec(1usize..64, 1..20),
    ) {
        let pd: Vec<u8> = (0..pd_len).map(|b| b as u8).collect();
        let mut bytes = frame(&REQUEST_KEY, 0x40, 1, &pd);
        let len = bytes.len();
        bytes.extend_from_slice(&trailing);
        let mut reader = MpaFrameReader::new(FrameKind::Request);
        let (done, used) = feed(&bytes, &chunks, |b| {
            let (n, complete) = reader.push(b).unwrap();
            (n, complete.then_some(()))
        });
        prop_assert!(done.is_some());
        prop_assert_eq!(used, len);
        prop_assert_eq!(reader.frame().unwrap().ulp_private_data, &pd[..]);
        prop_assert_eq!(reader.push(&trailing).unwrap(), (0, true));
    }
}

#[test]
fn trailing_fpdu_bytes_are_left_alone() {
    let mut ini = InitiatorHandshake::new(initiator(true, true, ALL_RTR));
    let mut res = Responder::new(responder(true, ALL_RTR), SoftCrc32c);
    let mut buf = [0u8; 600];
    let n = ini.request(b"", &mut buf).unwrap();
    let mut bytes = buf[..n].to_vec();
    bytes.extend_from_slice(&[0xAA; 7]);
    let (used, event) = res.on_bytes(&bytes);
    assert_eq!(used, n);
    assert!(matches!(event, Some(ResponderEvent::ConnectRequest(_))));
    assert_eq!(res.on_bytes(&bytes[n..]), (0, None));

    let n = res.accept(b"", 4, 4, &mut buf).unwrap().len;
    let mut bytes = buf[..n].to_vec();
    bytes.extend_from_slice(&READ_RESPONSE);
    let (used, event) = ini.on_bytes(&bytes).unwrap();
    assert_eq!(used, n);
    assert!(matches!(event, Some(InitiatorEvent::Connected(_))));
    assert_eq!(ini.on_bytes(&bytes[n..]).unwrap(), (0, None));

    let n = ini.rtr_fpdu(&mut buf, SoftCrc32c).unwrap();
    let mut bytes = buf[..n].to_vec();
    bytes.extend_from_slice(&SEND_RTR);
    let (used, event) = res.on_bytes(&bytes);
    assert_eq!(used, n);
    assert_eq!(event, Some(ResponderEvent::Established(ReceivedRtr::Write)));
    assert_eq!(res.on_bytes(&bytes[n..]), (0, None));
}

#[test]
fn large_fpdus_are_agreed_through_the_handshake() {
    for (i, r) in scenarios() {
        for (i_on, r_on) in [(false, false), (false, true), (true, false), (true, true)] {
            let i = InitiatorConfig {
                large_fpdus: i_on,
                ..i
            };
            let r = ResponderConfig {
                large_fpdus: r_on,
                ..r
            };
            let t = run(i, r, &[]);
            assert_eq!(t.request[16] & 0x0F, if i_on { 0x08 } else { 0 });
            assert_eq!(t.reply[16] & 0x0F, if r_on { 0x08 } else { 0 });
            let mut ini = InitiatorHandshake::new(i);
            let mut res = Responder::new(r, SoftCrc32c);
            let mut buf = [0u8; 600];
            let n = ini.request(b"", &mut buf).unwrap();
            assert!(matches!(
                res.on_bytes(&buf[..n]),
                (_, Some(ResponderEvent::ConnectRequest(_)))
            ));
            let accepted = res.accept(b"", 16, 2, &mut buf).unwrap();
            assert_eq!(accepted.decision.large_fpdus, i_on && r_on, "{i:?} {r:?}");
            assert_eq!(res.decision().unwrap().large_fpdus, i_on && r_on);
            let (_, event) = ini.on_bytes(&buf[..accepted.len]).unwrap();
            let Some(InitiatorEvent::Connected(d)) = event else {
                panic!("{event:?}");
            };
            assert_eq!(d.large_fpdus, i_on && r_on, "{i:?} {r:?}");
            assert_eq!(ini.decision().unwrap().large_fpdus, i_on && r_on);
        }
    }
    // The ULP's reject does not carry the bit either.
    let mut ini = InitiatorHandshake::new(InitiatorConfig {
        large_fpdus: true,
        ..initiator(true, false, ALL_RTR)
    });
    let mut res = Responder::new(
        ResponderConfig {
            large_fpdus: true,
            ..responder(true, ALL_RTR)
        },
        SoftCrc32c,
    );
    let mut buf = [0u8; 600];
    let n = ini.request(b"", &mut buf).unwrap();
    res.on_bytes(&buf[..n]);
    let n = res.reject(b"", &mut buf).unwrap();
    assert_eq!(buf[16] & 0x2F, 0x20);
    assert!(matches!(
        ini.on_bytes(&buf[..n]).unwrap(),
        (_, Some(InitiatorEvent::Rejected { .. }))
    ));
}

#[test]
fn reject_reaches_the_initiator_with_private_data() {
    let mut ini = InitiatorHandshake::new(initiator(true, true, ALL_RTR));
    let mut res = Responder::new(responder(true, ALL_RTR), SoftCrc32c);
    let mut buf = [0u8; 600];
    let n = ini.request(b"hi", &mut buf).unwrap();
    res.on_bytes(&buf[..n]);
    let n = res.reject(b"go away", &mut buf).unwrap();
    let pd = [&[0xC0, 0x10, 0xC0, 0x02][..], b"go away"].concat();
    assert_eq!(&buf[..n], frame(&REPLY_KEY, 0x30, 2, &pd));
    assert_eq!(
        res.accept(b"", 1, 1, &mut buf).unwrap_err(),
        CallError::WrongState
    );
    let (used, event) = ini.on_bytes(&frame(&REPLY_KEY, 0x30, 2, &pd)).unwrap();
    assert_eq!(used, n);
    let Some(InitiatorEvent::Rejected { peer: Some(peer) }) = event else {
        panic!("{event:?}");
    };
    assert_eq!((peer.ird, peer.ord), (16, 2));
    assert_eq!(ini.peer_private_data(), b"go away");
    assert_eq!(
        ini.rtr_fpdu(&mut buf, SoftCrc32c),
        Err(CallError::WrongState)
    );
}

#[test]
fn bad_key_fails_at_the_first_wrong_byte() {
    let mut res = Responder::new(responder(true, ALL_RTR), SoftCrc32c);
    // A reply key sent to a responder differs at byte 9 ('p' vs 'q').
    assert_eq!(res.on_bytes(&REPLY_KEY[..9]), (9, None));
    let (used, event) = res.on_bytes(&REPLY_KEY[9..]);
    assert_eq!(used, 0);
    let e = HandshakeError::Frame(MpaError::BadKey);
    assert_eq!(event, Some(ResponderEvent::Failed(e)));
    assert_eq!(e.term(), Some(TermError::MpaInvalidRequestReply));
    assert_eq!(res.on_bytes(b"more"), (0, None));

    let mut ini = InitiatorHandshake::new(initiator(false, false, RtrKinds::NONE));
    ini.request(b"", &mut [0u8; 64]).unwrap();
    assert_eq!(ini.on_bytes(b"MPA").unwrap(), (3, None));
    let (_, event) = ini.on_bytes(b"X").unwrap();
    assert_eq!(event, Some(InitiatorEvent::Failed(e)));
}

#[test]
fn too_long_private_data_fails_at_the_header() {
    let mut header = REQUEST_KEY.to_vec();
    header.extend_from_slice(&[0x00, 0x01, 0x02, 0x01]); // PD_Length 513
    let mut res = Responder::new(responder(true, ALL_RTR), SoftCrc32c);
    assert_eq!(res.on_bytes(&header[..19]), (19, None));
    let (_, event) = res.on_bytes(&header[19..]);
    assert_eq!(
        event,
        Some(ResponderEvent::Failed(HandshakeError::Frame(
            MpaError::PrivateDataTooLong(513)
        )))
    );

    let mut reader = MpaFrameReader::new(FrameKind::Request);
    assert_eq!(reader.push(&header), Err(MpaError::PrivateDataTooLong(513)));
    assert_eq!(reader.push(b""), Err(MpaError::PrivateDataTooLong(513)));
    assert!(reader.frame().is_none());
}

/// A responder that has accepted a peer-to-peer request offering `offered`
/// RTR kinds, with CRC as given.
fn awaiting_rtr(offered: RtrKinds, crc: bool) -> Responder {
    let mut i = initiator(true, true, ALL_RTR);
    if crc {
        i.crc = CrcPolicy::Required;
    }
    let mut res = Responder::new(responder(true, offered), SoftCrc32c);
    let mut buf = [0u8; 600];
    let n = i.encode_request(&mut buf, b"").unwrap();
    res.on_bytes(&buf[..n]);
    let accepted = res.accept(b"", 4, 4, &mut buf).unwrap();
    assert!(!accepted.established && !res.is_established());
    assert_eq!(accepted.decision.rtr_accepted, offered);
    res
}

fn rtr_failure(offered: RtrKinds, fpdu: &[u8]) -> (usize, Option<ResponderEvent>) {
    awaiting_rtr(offered, false).on_bytes(fpdu)
}

#[test]
fn wrong_rtr_kind_is_term_code_7() {
    let write = RtrKinds::only(RtrKind::Write);
    let e = HandshakeError::WrongRtr(RtrError::NotNegotiated(RtrKind::Send));
    assert_eq!(
        rtr_failure(write, &SEND_RTR),
        (24, Some(ResponderEvent::Failed(e)))
    );
    assert_eq!(e.term(), Some(TermError::MpaNoMatchingRtr));
    assert_eq!(e.term().unwrap().triple().2, 7);

    let read = RtrKinds::only(RtrKind::Read);
    let (_, event) = rtr_failure(read, &WRITE_RTR);
    assert_eq!(
        event,
        Some(ResponderEvent::Failed(HandshakeError::WrongRtr(
            RtrError::NotNegotiated(RtrKind::Write)
        )))
    );
}

#[test]
fn rtr_must_be_zero_length_and_first() {
    // A Write with 4 bytes of payload fails at its header.
    let mut write = WRITE_RTR[..16].to_vec();
    write[1] = 18;
    write.extend_from_slice(&[1, 2, 3, 4, 0, 0, 0, 0]);
    let (used, event) = rtr_failure(ALL_RTR, &write);
    assert_eq!(used, 16);
    let e = HandshakeError::WrongRtr(RtrError::NotZeroLength);
    assert_eq!(event, Some(ResponderEvent::Failed(e)));

    // A Read Request asking for data.
    let mut read = READ_RTR;
    read[35] = 8;
    assert_eq!(
        rtr_failure(ALL_RTR, &read).1,
        Some(ResponderEvent::Failed(e))
    );

    // MSN 2, L clear.
    let mut send = SEND_RTR;
    send[15] = 2;
    let e = HandshakeError::WrongRtr(RtrError::NotFirstMessage);
    assert_eq!(
        rtr_failure(ALL_RTR, &send).1,
        Some(ResponderEvent::Failed(e))
    );
    let mut write = WRITE_RTR;
    write[2] = 0x81;
    assert_eq!(
        rtr_failure(ALL_RTR, &write).1,
        Some(ResponderEvent::Failed(e))
    );

    // Any other message.
    let mut send = SEND_RTR;
    send[3] = 0x45; // Send with SE
    assert_eq!(
        rtr_failure(ALL_RTR, &send).1,
        Some(ResponderEvent::Failed(HandshakeError::WrongRtr(
            RtrError::UnexpectedMessage(Opcode::SendSe)
        )))
    );

    // Not even a valid DDP segment: its own error, not code 7.
    let mut send = SEND_RTR;
    send[2] = 0x42; // DDP version 2
    let (_, event) = rtr_failure(ALL_RTR, &send);
    let Some(ResponderEvent::Failed(e @ HandshakeError::Segment(_))) = event else {
        panic!("{event:?}");
    };
    assert_eq!(e.term(), Some(TermError::DdpUntaggedInvalidVersion));
}

#[test]
fn rtr_crc_is_checked() {
    let mut res = awaiting_rtr(ALL_RTR, true);
    let mut fpdu = with_crc(WRITE_RTR.to_vec(), true);
    fpdu[19] ^= 1;
    let (_, event) = res.on_bytes(&fpdu);
    let Some(ResponderEvent::Failed(e @ HandshakeError::Fpdu(FpduError::CrcMismatch { .. }))) =
        event
    else {
        panic!("{event:?}");
    };
    assert_eq!(e.term(), Some(TermError::MpaCrc));

    let mut res = awaiting_rtr(ALL_RTR, true);
    let fpdu = with_crc(WRITE_RTR.to_vec(), true);
    assert_eq!(
        res.on_bytes(&fpdu),
        (20, Some(ResponderEvent::Established(ReceivedRtr::Write)))
    );
}

#[test]
fn peer_terminate_instead_of_rtr() {
    let message = TerminateMessage::reporting(TermError::MpaNoMatchingRtr, None);
    let ddp = rdmap::untagged_header(Opcode::Terminate, true, 0, 1, 0);
    let mut ulpdu = [0u8; 64];
    let len = rdmap::encode_headers(&ddp, &OpcodeHeader::Terminate(message), &mut ulpdu).unwrap();
    let mut fpdu = [0u8; 80];
    let n = fpdu::encode_fpdu::<SoftCrc32c>(&mut fpdu, &ulpdu[..len], None).unwrap();
    let e = HandshakeError::PeerTerminated(Some(TermError::MpaNoMatchingRtr));
    assert_eq!(
        rtr_failure(ALL_RTR, &fpdu[..n]),
        (n, Some(ResponderEvent::Failed(e)))
    );
    assert_eq!(e.term(), None);
}

#[test]
fn received_read_rtr_echoes_the_sink() {
    let mut res = awaiting_rtr(ALL_RTR, false);
    let mut read = READ_RTR;
    read[23] = 0x77; // sink STag 0x77
    read[31] = 0x10; // sink TO 0x10
    let (_, event) = res.on_bytes(&read);
    let Some(ResponderEvent::Established(ReceivedRtr::Read(h))) = event else {
        panic!("{event:?}");
    };
    assert_eq!((h.sink_stag, h.sink_tagged_offset), (0x77, 0x10));
    let mut out = [0u8; 32];
    let n = res.rtr_response(&mut out).unwrap();
    let segment = Segment::decode(&out[2..16]).unwrap();
    assert_eq!(n, 20);
    assert_eq!(segment.opcode, Opcode::ReadResponse);
    assert_eq!(
        segment.ddp,
        rdmap::tagged_header(Opcode::ReadResponse, true, 0x77, 0x10)
    );
    assert!(segment.payload.is_empty());
}

#[test]
fn read_rtr_decodes_as_a_zero_length_read_request() {
    let segment = Segment::decode(&READ_RTR[2..48]).unwrap();
    assert_eq!(
        segment.header,
        OpcodeHeader::ReadRequest(ReadRequestHeader {
            sink_stag: RTR_STAG,
            sink_tagged_offset: 0,
            read_size: 0,
            source_stag: RTR_STAG,
            source_tagged_offset: 0,
        })
    );
}

#[test]
fn insufficient_ird_is_term_code_6_at_the_initiator() {
    // The responder wants ORD 16 and the initiator offered IRD 16, but it
    // can only have 4 (RFC 6581 section 9.1).
    let mut i = initiator(true, false, RtrKinds::NONE);
    i.ird = 16;
    i.max_ird = 4;
    let mut ini = InitiatorHandshake::new(i);
    ini.request(b"", &mut [0u8; 64]).unwrap();
    let reply = frame(&REPLY_KEY, 0x10, 2, &[0x00, 0x04, 0x00, 0x10]);
    let (used, event) = ini.on_bytes(&reply).unwrap();
    assert_eq!(used, reply.len());
    let e = HandshakeError::Negotiation(NegotiationError::InsufficientIrd { required: 16 });
    assert_eq!(event, Some(InitiatorEvent::Failed(e)));
    assert_eq!(e.term(), Some(TermError::MpaInsufficientIrd));
    assert_eq!(e.term().unwrap().triple().2, 6);
}

#[test]
fn insufficient_ird_at_the_responder_is_refused_with_the_ord_required() {
    let mut r = responder(true, ALL_RTR);
    r.min_ord = 12;
    let mut res = Responder::new(r, SoftCrc32c);
    let mut buf = [0u8; 600];
    let n = initiator(true, false, RtrKinds::NONE)
        .encode_request(&mut buf, b"")
        .unwrap();
    let e = HandshakeError::Negotiation(NegotiationError::InsufficientIrd { required: 12 });
    assert_eq!(
        res.on_bytes(&buf[..n]),
        (n, Some(ResponderEvent::Failed(e)))
    );
    assert_eq!(
        res.accept(b"", 1, 1, &mut buf).unwrap_err(),
        CallError::WrongState
    );
    let n = res.reject(b"", &mut buf).unwrap();
    assert_eq!(
        &buf[..n],
        frame(&REPLY_KEY, 0x20 | 0x10, 2, &[0x00, 0x10, 0x00, 0x0C])
    );
}

#[test]
fn accept_can_be_refused_by_the_ulp_ird() {
    // Only a Read RTR is possible, and the ULP allows no inbound reads.
    let read = RtrKinds::only(RtrKind::Read);
    let mut res = Responder::new(responder(true, read), SoftCrc32c);
    let mut buf = [0u8; 600];
    let n = initiator(true, true, read)
        .encode_request(&mut buf, b"")
        .unwrap();
    assert!(matches!(
        res.on_bytes(&buf[..n]).1,
        Some(ResponderEvent::ConnectRequest(_))
    ));
    assert_eq!(
        res.accept(b"", 0, 0, &mut buf),
        Err(CallError::Refused(NegotiationError::NoMatchingRtr))
    );
    assert!(res.reject(b"", &mut buf).unwrap() > 0);
}

#[test]
fn enhanced_initiator_against_a_revision_1_responder() {
    // RFC 6581 section 10 requires an enhanced reply to an enhanced
    // request; an unenhanced revision 1 reply is refused.
    let mut ini = InitiatorHandshake::new(initiator(true, true, ALL_RTR));
    ini.request(b"", &mut [0u8; 64]).unwrap();
    let (_, event) = ini.on_bytes(&frame(&REPLY_KEY, 0x00, 1, b"")).unwrap();
    let e = HandshakeError::Negotiation(NegotiationError::EnhancedMismatch);
    assert_eq!(event, Some(InitiatorEvent::Failed(e)));
    assert_eq!(e.term(), Some(TermError::MpaInvalidRequestReply));
}

#[test]
fn timeouts() {
    let mut ini = InitiatorHandshake::new(initiator(true, false, RtrKinds::NONE));
    let mut buf = [0u8; 600];
    let n = ini.request(b"", &mut buf).unwrap();
    let request = buf[..n].to_vec();
    assert_eq!(
        ini.on_timeout(),
        Some(InitiatorEvent::Failed(HandshakeError::Timeout))
    );
    assert_eq!(ini.on_timeout(), None);
    assert_eq!(HandshakeError::Timeout.term(), None);
    assert_eq!(ini.on_bytes(&request).unwrap(), (0, None));

    // A responder waiting for the RTR.
    let mut res = awaiting_rtr(ALL_RTR, false);
    res.on_bytes(&WRITE_RTR[..5]);
    assert_eq!(
        res.on_timeout(),
        Some(ResponderEvent::Failed(HandshakeError::Timeout))
    );
    assert_eq!(res.on_bytes(&WRITE_RTR[5..]), (0, None));
    assert!(!res.is_established());

    // Established connections do not time out.
    let mut res = awaiting_rtr(ALL_RTR, false);
    res.on_bytes(&WRITE_RTR);
    assert_eq!(res.on_timeout(), None);
    assert!(res.is_established());
}

#[test]
fn misuse_changes_nothing() {
    let mut ini = InitiatorHandshake::new(initiator(true, false, RtrKinds::NONE));
    assert_eq!(ini.on_bytes(b"MPA"), Err(CallError::WrongState));
    assert_eq!(
        ini.rtr_fpdu(&mut [0u8; 64], SoftCrc32c),
        Err(CallError::WrongState)
    );
    let mut small = [0u8; 10];
    assert!(matches!(
        ini.request(b"", &mut small),
        Err(CallError::Encode(_))
    ));
    assert!(matches!(
        ini.request(&[0; 509], &mut [0u8; 600]),
        Err(CallError::Encode(_))
    ));
    let mut buf = [0u8; 64];
    assert_eq!(ini.request(b"", &mut buf), Ok(24));
    assert_eq!(ini.request(b"", &mut buf), Err(CallError::WrongState));

    let mut res = Responder::new(responder(true, ALL_RTR), SoftCrc32c);
    assert_eq!(res.accept(b"", 1, 1, &mut buf), Err(CallError::WrongState));
    assert_eq!(res.reject(b"", &mut buf), Err(CallError::WrongState));
    assert_eq!(res.rtr_response(&mut buf), Err(CallError::WrongState));
    res.on_bytes(&buf[..24]);
    assert!(matches!(
        res.accept(b"", 1, 1, &mut small),
        Err(CallError::Encode(_))
    ));
    let accepted = res.accept(b"", 1, 1, &mut buf).unwrap();
    assert!(accepted.established);
    assert_eq!(res.decision(), Some(accepted.decision));
    assert_eq!(res.rtr_response(&mut buf), Ok(0));
}

#[test]
fn terminate_fpdu_reports_setup_failures_on_queue_2() {
    use rsiw_proto::proto::{
        crc32c::SoftCrc32c, mpa_handshake::terminate_fpdu, terminate::TermError,
    };
    for (error, code) in [
        (TermError::MpaNoMatchingRtr, 7u8),
        (TermError::MpaInsufficientIrd, 6u8),
    ] {
        for crc in [false, true] {
            let mut out = [0u8; 128];
            let n = if crc {
                terminate_fpdu(error, Some(SoftCrc32c), &mut out)
            } else {
                terminate_fpdu(error, None::<SoftCrc32c>, &mut out)
            }
            .unwrap();
            // MPA length, then the untagged DDP header of queue 2, MSN 1, last, RDMAP
            // opcode Terminate (7), then the TERMINATE control: layer 2, type 0, code.
            let ulpdu = u16::from_be_bytes([out[0], out[1]]) as usize;
            assert_eq!(n, (2 + ulpdu).div_ceil(4) * 4 + 4);
            assert_eq!(out[2] & 0x81, 0x01, "untagged, last");
            assert_eq!(out[3] & 0x0f, 7, "RDMAP Terminate");
            assert_eq!(
                u32::from_be_bytes(out[8..12].try_into().unwrap()),
                2,
                "queue 2"
            );
            assert_eq!(
                u32::from_be_bytes(out[12..16].try_into().unwrap()),
                1,
                "MSN 1"
            );
            assert_eq!(out[20] >> 4, 2, "layer 2 (LLP/MPA)");
            assert_eq!(out[20] & 0x0f, 0, "error type 0");
            assert_eq!(out[21], code);
            if crc {
                let c = u32::from_be_bytes(out[n - 4..n].try_into().unwrap());
                assert_ne!(c, 0);
            }
        }
    }
}
