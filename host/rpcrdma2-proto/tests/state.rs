// SPDX-License-Identifier: GPL-2.0

//! State machines: credits, negotiation, continuation, reply choice,
//! thresholds, property exchange, direction classification.

mod common;
use common::*;
use proto::cm_private::CmPrivateData;
use proto::continuation::*;
use proto::credits::*;
use proto::error::*;
use proto::inline_threshold::InlineThresholds;
use proto::negotiation::*;
use proto::payload_format::*;
use proto::properties::{
    PeerProperties, PropSet, Property, ReverseSupport, DEFAULT_MAX_SEGMENT_COUNT,
    DEFAULT_MAX_SEGMENT_SIZE,
};
use proto::property_exchange::*;
use proto::reply_choice::*;
use proto::reverse::*;
use proto::role::{Endpoint, Role};
use proto::v2::{self, V2DecodeConfig, RDMA2_F_MORE, RDMA2_MSG, RDMA2_NOMSG};
use proto::version::{Version, VersionRange};
use proto::xdr::XdrReader;

// ---- credits ----

#[test]
fn one_message_until_granted() {
    let mut c = SendCredits::new();
    assert!(!c.has_grant());
    assert_eq!(c.acquire(), Ok(()));
    assert_eq!(c.acquire(), Err(CreditError::Exhausted));
    c.on_grant(32);
    assert!(c.has_grant());
    assert_eq!(c.available(), 31);
}

#[test]
fn credit_exhaustion_and_release() {
    let mut c = SendCredits::new();
    c.on_grant(3);
    for _ in 0..3 {
        c.acquire().unwrap();
    }
    assert_eq!(c.acquire(), Err(CreditError::Exhausted));
    assert_eq!(c.acquire_many(1), Err(CreditError::Exhausted));
    c.release(2).unwrap();
    assert_eq!(c.acquire_many(3), Err(CreditError::Exhausted));
    c.acquire_many(2).unwrap();
    assert_eq!(c.in_flight(), 3);
    assert_eq!(c.release(4), Err(CreditError::ReleaseUnderflow));
    assert_eq!(c.in_flight(), 3);
}

#[test]
fn grant_while_outstanding() {
    let mut c = SendCredits::new();
    c.on_grant(8);
    for _ in 0..6 {
        c.acquire().unwrap();
    }
    // Shrinking below what is in flight blocks, but loses nothing.
    c.on_grant(4);
    assert_eq!(c.available(), 0);
    assert_eq!(c.acquire(), Err(CreditError::Exhausted));
    c.release(3).unwrap();
    assert_eq!(c.available(), 1);
    // An asynchronous grant raises the window without a release.
    c.on_grant(10);
    assert_eq!(c.available(), 7);
    // A zero grant is illegal; it is treated as one.
    c.on_grant(0);
    assert_eq!(c.limit(), 1);
}

#[test]
fn receive_credits_reserve_one_for_async_grant() {
    let mut r = ReceiveCredits::new(32);
    assert_eq!(r.on_received(), Err(CreditError::Overrun));
    r.on_posted(9);
    assert_eq!(r.grantable(), 8);
    assert_eq!(r.advertise(), 8);
    r.on_posted(100);
    assert_eq!(r.grantable(), 32);
    let mut r = ReceiveCredits::new(4);
    r.on_posted(1);
    assert_eq!(r.advertise(), 1); // never zero
    r.on_posted(4);
    assert_eq!(r.advertise(), 4);
    for _ in 0..3 {
        r.on_received().unwrap();
    }
    assert!(!r.needs_async_grant());
    r.on_received().unwrap();
    // The peer used the whole window; one Receive is left (the reserve).
    assert!(!r.needs_async_grant());
    r.on_posted(4);
    assert!(r.needs_async_grant());
    let g = r.advertise();
    assert_eq!(g, 4);
    assert!(!r.needs_async_grant());
}

// ---- negotiation ----

#[test]
fn v2_probe_accepted() {
    let mut n = ClientNegotiation::new(VersionRange::V1_AND_V2, ServerVersionMemory::default());
    assert_eq!(n.version(), Version::V2);
    assert_eq!(n.on_send(1025), Err(NegotiationError::FirstMessageTooLarge));
    assert_eq!(n.on_send(1024), Ok(Version::V2));
    assert_eq!(n.on_send(100), Err(NegotiationError::AwaitingFirstReply));
    assert_eq!(n.on_message(2), Ok(ClientOutcome::Established(Version::V2)));
    assert_eq!(n.on_send(4000), Ok(Version::V2));
    assert!(!n.on_disconnect().v2_unsupported);
}

#[test]
fn err_vers_falls_back_to_v1_without_loop() {
    let mut n = ClientNegotiation::new(VersionRange::V1_AND_V2, ServerVersionMemory::default());
    n.on_send(200).unwrap();
    // The kernel's v1 server answers in the v1 layout, echoing vers 2.
    let reply = words(&[0xabcd, 2, 32, 4, 1, 1, 1]);
    let (xid, range) = parse_version_error(&reply).unwrap();
    assert_eq!(xid, 0xabcd);
    assert_eq!(
        n.on_version_error(range),
        Ok(ClientOutcome::FallBack(Version::V1))
    );
    assert_eq!(n.version(), Version::V1);
    assert_eq!(n.on_message(1), Ok(ClientOutcome::Established(Version::V1)));
    assert_eq!(n.on_message(2), Err(NegotiationError::UnexpectedVersion(2)));
    // Reconnect: start straight in v1, no new probe.
    let mem = n.on_disconnect();
    let n2 = ClientNegotiation::new(VersionRange::V1_AND_V2, mem);
    assert_eq!(n2.version(), Version::V1);
}

#[test]
fn lost_probe_means_v1_next_time() {
    let mut n = ClientNegotiation::new(VersionRange::V1_AND_V2, ServerVersionMemory::default());
    n.on_send(100).unwrap();
    let mem = n.on_disconnect();
    assert!(mem.v2_unsupported);
    assert_eq!(
        ClientNegotiation::new(VersionRange::V1_AND_V2, mem).version(),
        Version::V1
    );
}

#[test]
fn version_error_layouts_and_no_common_version() {
    let v2_layout = words(&[7, 2, 32, 4, 1, 1, 3, 5]);
    assert_eq!(
        parse_version_error(&v2_layout),
        Some((7, VersionRange { low: 3, high: 5 }))
    );
    let mut n = ClientNegotiation::new(VersionRange::V1_AND_V2, ServerVersionMemory::default());
    n.on_send(10).unwrap();
    assert_eq!(
        n.on_version_error(VersionRange { low: 3, high: 5 }),
        Err(NegotiationError::NoCommonVersion)
    );
    assert_eq!(parse_version_error(&words(&[7, 2, 32, 4, 2])), None);
    assert_eq!(parse_version_error(&words(&[7, 2, 32, 0, 1, 1, 1])), None);
    assert_eq!(parse_version_error(&words(&[7, 2, 32, 4, 1, 2, 1])), None);
    assert_eq!(parse_version_error(&[]), None);
}

#[test]
fn server_keeps_first_version() {
    let mut s = ServerNegotiation::new(VersionRange::V1_AND_V2);
    let e = s.on_message(1, 5).unwrap_err();
    assert_eq!(e.body, ErrorBody::V2(V2Error::Vers { low: 1, high: 2 }));
    assert_eq!(s.version(), None);
    assert_eq!(s.on_message(2, 2), Ok(Version::V2));
    assert_eq!(s.on_message(3, 2), Ok(Version::V2));
    let e = s.on_message(4, 1).unwrap_err();
    assert_eq!((e.xid, e.vers), (4, 1));
    assert_eq!(e.body, ErrorBody::V2(V2Error::Vers { low: 2, high: 2 }));
    let mut s1 = ServerNegotiation::new(VersionRange::V1_AND_V2);
    assert_eq!(s1.on_message(1, 1), Ok(Version::V1));
    assert_eq!(
        s1.on_message(2, 2).unwrap_err().body,
        ErrorBody::V1(V1Error::Vers { low: 1, high: 1 })
    );
}

// ---- continuation ----

fn v2msg(xid: u32, htype: u32, flags: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = words(&[xid, 2, 1, htype, flags, 0, 0, 0, 0]);
    b.extend_from_slice(payload);
    b
}

fn limits() -> ReassemblyLimits {
    ReassemblyLimits {
        max_len: 64,
        max_fragments: 4,
    }
}

#[test]
fn plan_fragments_splits_and_fits() {
    let p = plan_fragments(100, 200, 36, 8).unwrap();
    assert_eq!(p.count(), 1);
    // 36-byte non-final headers leave 64 bytes each; the final header of
    // 60 bytes leaves 40.
    let p = plan_fragments(300, 100, 60, 8).unwrap();
    let f: Vec<_> = p.fragments().collect();
    let total: usize = f.iter().map(|f| f.len).sum();
    assert_eq!(total, 300);
    assert!(f[..f.len() - 1].iter().all(|f| f.more && f.len + 36 <= 100));
    let last = f.last().unwrap();
    assert!(!last.more && last.len + 60 <= 100);
    assert_eq!(p.count(), 6);
    assert_eq!(
        plan_fragments(300, 100, 60, 4),
        Err(SplitError::TooManyFragments)
    );
    assert_eq!(
        plan_fragments(300, 30, 20, 99),
        Err(SplitError::ThresholdTooSmall)
    );
    assert_eq!(
        plan_fragments(10, 30, 40, 99),
        Err(SplitError::ThresholdTooSmall)
    );
    assert_eq!(plan_fragments(0, 36, 36, 1).unwrap().count(), 1);
}

#[test]
fn reassembly_concatenates() {
    let mut buf = [0u8; 64];
    let mut r = Reassembler::new(SliceStorage::new(&mut buf[..]), limits());
    let cfg = V2DecodeConfig::default();
    let a = v2msg(9, RDMA2_MSG, RDMA2_F_MORE, b"hello ");
    let grant = v2msg(0, RDMA2_NOMSG, 0, b"");
    let b = v2msg(9, RDMA2_MSG, 0, b"world");
    assert_eq!(
        r.accept(&v2::decode(&a, &cfg).unwrap()),
        Ok(Reassembled::Pending)
    );
    // A credit grant between fragments does not disturb the sequence.
    assert_eq!(
        r.accept(&v2::decode(&grant, &cfg).unwrap()),
        Ok(Reassembled::Control)
    );
    assert_eq!(
        r.accept(&v2::decode(&b, &cfg).unwrap()),
        Ok(Reassembled::Complete {
            xid: 9,
            fragments: 2
        })
    );
    assert_eq!(r.storage().data(), b"hello world");
    let whole = v2msg(10, RDMA2_MSG, 0, b"single");
    assert_eq!(
        r.accept(&v2::decode(&whole, &cfg).unwrap()),
        Ok(Reassembled::Whole(b"single"))
    );
}

#[test]
fn interleaved_xid_is_inval_cont_and_poisons() {
    let mut buf = [0u8; 64];
    let mut r = Reassembler::new(SliceStorage::new(&mut buf[..]), limits());
    let cfg = V2DecodeConfig::default();
    let feed = |r: &mut Reassembler<SliceStorage<&mut [u8]>>, m: Vec<u8>| {
        let owned = m;
        let d = v2::decode(&owned, &cfg).unwrap();
        r.accept(&d).map(|x| format!("{x:?}"))
    };
    assert!(feed(&mut r, v2msg(1, RDMA2_MSG, RDMA2_F_MORE, b"aaaa")).is_ok());
    let e = feed(&mut r, v2msg(2, RDMA2_MSG, RDMA2_F_MORE, b"bbbb")).unwrap_err();
    assert_eq!(e.xid, 2);
    assert_eq!(e.aborted, Some(1));
    assert_eq!(e.error(), V2Error::InvalCont);
    assert_eq!(e.violation, Violation::ContinuationMismatch);
    // The rest of both sequences is dropped silently, ending with their
    // final fragments.
    assert_eq!(
        feed(&mut r, v2msg(1, RDMA2_MSG, 0, b"a")),
        Ok("Dropped".into())
    );
    assert_eq!(
        feed(&mut r, v2msg(2, RDMA2_MSG, RDMA2_F_MORE, b"b")),
        Ok("Dropped".into())
    );
    assert_eq!(
        feed(&mut r, v2msg(2, RDMA2_MSG, 0, b"b")),
        Ok("Dropped".into())
    );
    // Afterwards the XIDs are usable again.
    assert_eq!(
        feed(&mut r, v2msg(1, RDMA2_MSG, 0, b"ok")),
        Ok("Whole([111, 107])".into())
    );
    assert!(!r.in_progress());
}

#[test]
fn continuation_limits() {
    let cfg = V2DecodeConfig::default();
    // Too many fragments.
    let mut buf = [0u8; 64];
    let mut r = Reassembler::new(SliceStorage::new(&mut buf[..]), limits());
    for _ in 0..4 {
        let m = v2msg(5, RDMA2_MSG, RDMA2_F_MORE, b"x");
        assert_eq!(
            r.accept(&v2::decode(&m, &cfg).unwrap()),
            Ok(Reassembled::Pending)
        );
    }
    let m = v2msg(5, RDMA2_MSG, RDMA2_F_MORE, b"x");
    let e = r.accept(&v2::decode(&m, &cfg).unwrap()).unwrap_err();
    assert_eq!(e.violation, Violation::ContinuationTooLong);
    assert_eq!(e.aborted, None);
    let m = v2msg(5, RDMA2_MSG, 0, b"x");
    assert_eq!(
        r.accept(&v2::decode(&m, &cfg).unwrap()),
        Ok(Reassembled::Dropped)
    );
    // Too long.
    let mut r = Reassembler::new(SliceStorage::new(&mut buf[..]), limits());
    let big = [7u8; 40];
    let m = v2msg(6, RDMA2_MSG, RDMA2_F_MORE, &big);
    assert_eq!(
        r.accept(&v2::decode(&m, &cfg).unwrap()),
        Ok(Reassembled::Pending)
    );
    let e = r.accept(&v2::decode(&m, &cfg).unwrap()).unwrap_err();
    assert_eq!(e.violation, Violation::ContinuationTooLong);
    // Storage smaller than the limit: SYSTEM rather than INVAL_CONT.
    let mut small = [0u8; 8];
    let mut r = Reassembler::new(SliceStorage::new(&mut small[..]), limits());
    let m = v2msg(7, RDMA2_MSG, RDMA2_F_MORE, &[1u8; 12]);
    let e = r.accept(&v2::decode(&m, &cfg).unwrap()).unwrap_err();
    assert_eq!(e.error(), V2Error::System);
}

#[test]
fn special_format_mid_sequence_is_violation() {
    let cfg = V2DecodeConfig::default();
    let mut buf = [0u8; 64];
    let mut r = Reassembler::new(SliceStorage::new(&mut buf[..]), limits());
    let a = v2msg(3, RDMA2_MSG, RDMA2_F_MORE, b"abcd");
    r.accept(&v2::decode(&a, &cfg).unwrap()).unwrap();
    let nomsg = words(&[3, 2, 1, RDMA2_NOMSG, 0, 0, 0, 0, 1, 1, 1, 100, 0, 0]);
    let e = r.accept(&v2::decode(&nomsg, &cfg).unwrap()).unwrap_err();
    assert_eq!(e.xid, 3);
    assert_eq!(e.aborted, None);
    // It ended XID 3's sequence, so nothing stays poisoned; without a
    // sequence, Special Format is simply external.
    assert_eq!(
        r.accept(&v2::decode(&nomsg, &cfg).unwrap()),
        Ok(Reassembled::External)
    );
}

// ---- reply choice and formats ----

fn shape<'s>(w: &'s [u64], c: &'s [u64]) -> ReplyShape<'s> {
    ReplyShape {
        ddp_results: w,
        write_chunk_capacity: c,
        reply_chunk_capacity: None,
        payload_len: 100,
        header_len: 40,
        threshold: 4096,
        max_sends: 8,
    }
}

#[test]
fn reply_mechanism_choice() {
    let s = shape(&[], &[]);
    assert_eq!(choose_reply_v2(&s), Ok(PayloadFormat::Simple));
    assert_eq!(choose_reply_v1(&s), Ok(PayloadFormat::Simple));
    // Write chunk too small: WRITE_RESOURCE names the 1-based index.
    let s = shape(&[100, 5000], &[200, 4096]);
    assert_eq!(
        choose_reply_v2(&s),
        Err(V2Error::WriteResource {
            chunk_index: 2,
            length_needed: 5000
        })
    );
    assert_eq!(choose_reply_v1(&s), Err(V1Error::Chunk));
    // Too large inline, Reply chunk provided and big enough: MUST use it.
    let s = ReplyShape {
        payload_len: 10000,
        reply_chunk_capacity: Some(10000),
        ..shape(&[], &[])
    };
    assert_eq!(choose_reply_v2(&s), Ok(PayloadFormat::Special));
    assert_eq!(choose_reply_v1(&s), Ok(PayloadFormat::Special));
    // Reply chunk too small: continuation instead (v2), ERR_CHUNK (v1).
    let s = ReplyShape {
        reply_chunk_capacity: Some(9999),
        ..s
    };
    assert_eq!(
        choose_reply_v2(&s),
        Ok(PayloadFormat::Continued { sends: 3 })
    );
    assert_eq!(choose_reply_v1(&s), Err(V1Error::Chunk));
    // No continuation possible: REPLY_RESOURCE with the length needed.
    let s = ReplyShape { max_sends: 2, ..s };
    assert_eq!(
        choose_reply_v2(&s),
        Err(V2Error::ReplyResource {
            length_needed: 10000
        })
    );
}

#[test]
fn call_format_choice() {
    let mut c = CallShape {
        payload_len: 1000,
        header_len: 36,
        threshold: 1024,
        continuation: true,
        max_sends: 4,
    };
    assert_eq!(
        choose_call_format(&c),
        PayloadFormat::Continued { sends: 2 }
    );
    c.payload_len = 988;
    assert_eq!(choose_call_format(&c), PayloadFormat::Simple);
    c.payload_len = 100_000;
    assert_eq!(choose_call_format(&c), PayloadFormat::Special);
    c.payload_len = 2000;
    c.continuation = false;
    assert_eq!(choose_call_format(&c), PayloadFormat::Special);
}

// ---- thresholds ----

#[test]
fn inline_thresholds() {
    assert_eq!(InlineThresholds::V1_DEFAULT.call, 1024);
    assert_eq!(InlineThresholds::V2_DEFAULT.reply, 4096);
    // v1 client with 4 KiB buffers; server advertises send 8 KiB recv 2 KiB.
    let peer = CmPrivateData::new(8192, 2048, true);
    let t = InlineThresholds::v1(Role::Requester, 4096, 4096, Some(&peer));
    assert_eq!((t.call, t.reply), (2048, 4096));
    assert_eq!(t.send(Role::Requester), 2048);
    assert_eq!(t.receive(Role::Requester), 4096);
    let t = InlineThresholds::v1(Role::Requester, 4096, 4096, None);
    assert_eq!((t.call, t.reply), (1024, 1024));
    let t = InlineThresholds::v1(Role::Responder, 4096, 4096, Some(&peer));
    assert_eq!((t.call, t.reply), (4096, 2048));
    // v2 from properties.
    let local = PeerProperties {
        send_size: 16384,
        recv_buffer_size: 8192,
        ..PeerProperties::DEFAULT
    };
    let peer = PeerProperties {
        send_size: 65536,
        recv_buffer_size: 4096,
        ..PeerProperties::DEFAULT
    };
    let t = InlineThresholds::v2(Role::Responder, &local, &peer);
    assert_eq!((t.call, t.reply), (8192, 4096));
    let t = InlineThresholds::v2(
        Role::Requester,
        &PeerProperties::DEFAULT,
        &PeerProperties::DEFAULT,
    );
    assert_eq!(t, InlineThresholds::V2_DEFAULT);
}

// ---- property exchange ----

#[test]
fn property_exchange_model() {
    let set_bytes = words(&[1, 1, 4, 8192]);
    let set = PropSet::decode(&mut XdrReader::new(&set_bytes)).unwrap();
    let mut x = PropertyExchange::new();
    assert_eq!(x.on_connprop(&set, true), Ok(ExchangeEvent::MoreExpected));
    assert!(!x.complete());
    x.on_local_sent(true);
    x.on_local_sent(false);
    assert_eq!(x.on_connprop(&set, false), Ok(ExchangeEvent::PeerDone));
    assert!(x.complete());
    assert_eq!(x.peer().send_size, 8192);
    let e = x.on_connprop(&set, false).unwrap_err();
    assert_eq!(e.0, V2Error::InvalHtype);
    // A peer that starts with RPC traffic keeps the defaults.
    let mut y = PropertyExchange::new();
    y.on_other_message();
    assert!(y.peer_done());
    assert_eq!(*y.peer(), PeerProperties::DEFAULT);
    assert!(y.on_connprop(&set, false).is_err());
}

#[test]
fn other_message_in_an_open_sequence_is_inval_htype() {
    let set_bytes = words(&[1, 2, 4, 2048]);
    let set = PropSet::decode(&mut XdrReader::new(&set_bytes)).unwrap();
    // A call in the middle of a TPMORE sequence: INVAL_HTYPE; the staged set
    // is dropped and the defaults stay.
    let mut x = PropertyExchange::new();
    assert_eq!(x.on_connprop(&set, true), Ok(ExchangeEvent::MoreExpected));
    assert_eq!(x.peer_messages(), 1);
    assert_eq!(
        x.on_other_message_checked(RDMA2_MSG),
        Err((
            V2Error::InvalHtype,
            Violation::PropertiesIncomplete(RDMA2_MSG)
        ))
    );
    assert!(x.peer_done());
    assert_eq!(*x.peer(), PeerProperties::DEFAULT);
    assert_eq!(
        x.on_connprop(&set, false).unwrap_err().0,
        V2Error::InvalHtype
    );
    assert_eq!(x.peer_messages(), 1);
    // After the last CONNPROP, or without any, other messages are fine.
    let mut y = PropertyExchange::new();
    assert_eq!(y.on_connprop(&set, false), Ok(ExchangeEvent::PeerDone));
    assert_eq!(y.on_other_message_checked(RDMA2_MSG), Ok(()));
    let mut z = PropertyExchange::new();
    assert_eq!(z.on_other_message_checked(RDMA2_NOMSG), Ok(()));
    assert_eq!(*z.peer(), PeerProperties::DEFAULT);
}

#[test]
fn local_properties_go_in_one_first_message_and_read_back() {
    let local = LocalProperties {
        send_size: 4096,
        recv_buffer_size: 1024,
        max_segment_size: 65536,
        max_segment_count: 12,
        reverse: ReverseSupport::Simple,
    };
    let props = local.properties();
    let batches: Vec<_> = split_properties(&props, FIRST_MESSAGE_MAX)
        .unwrap()
        .collect();
    assert_eq!(batches.len(), 1);
    assert!(!batches[0].tpmore);
    let mut buf = [0u8; FIRST_MESSAGE_MAX];
    let credit = v2::Credit {
        granted: 64,
        max_outstanding: 64,
    };
    let len = batches[0]
        .encode(&mut buf, 7, credit, v2::Flags::NONE)
        .unwrap();
    assert!(len <= FIRST_MESSAGE_MAX);
    let m = v2::decode(&buf[..len], &V2DecodeConfig::default()).unwrap();
    let v2::V2Body::ConnProp(set) = m.body else {
        panic!("not a CONNPROP: {:?}", m.body);
    };
    let mut x = PropertyExchange::new();
    assert_eq!(
        x.on_connprop(&set, m.prefix.flags.tpmore()),
        Ok(ExchangeEvent::PeerDone)
    );
    assert_eq!(x.peer().recv_buffer_size, 1024);
    assert_eq!(x.peer().send_size, 4096);
    assert_eq!(x.peer().reverse, ReverseSupport::Simple);
    assert_eq!(x.peer().max_segment_size, 65536);
    assert_eq!(x.peer().max_segment_count, 12);
    // Sizes below the draft's minimum go out as the minimum.
    let small = LocalProperties {
        send_size: 0,
        recv_buffer_size: 512,
        max_segment_size: DEFAULT_MAX_SEGMENT_SIZE,
        max_segment_count: DEFAULT_MAX_SEGMENT_COUNT,
        reverse: ReverseSupport::None,
    };
    assert_eq!(
        small.properties()[..2],
        [Property::RecvBufferSize(1024), Property::SendSize(1024)]
    );
}

#[test]
fn send_threshold_follows_the_peers_receive_buffers() {
    let mut peer = PeerProperties::DEFAULT;
    // Defaults: 4096 each way.
    assert_eq!(send_threshold(4096, &peer), 4096);
    peer.recv_buffer_size = 1024;
    assert_eq!(send_threshold(4096, &peer), 1024);
    peer.recv_buffer_size = 2000;
    assert_eq!(send_threshold(4096, &peer), 2000);
    // Never above what we send, never below the minimum.
    peer.recv_buffer_size = 1 << 20;
    assert_eq!(send_threshold(4096, &peer), 4096);
    peer.recv_buffer_size = 100;
    assert_eq!(send_threshold(4096, &peer), 1024);
    assert_eq!(send_threshold(512, &PeerProperties::DEFAULT), 1024);
}

#[test]
fn receive_threshold_follows_the_peers_send_size() {
    let mut peer = PeerProperties::DEFAULT;
    assert_eq!(receive_threshold(4096, &peer), 4096);
    // A peer that sends at most 1024 bytes: replies larger than that need chunks.
    peer.send_size = 1024;
    assert_eq!(receive_threshold(4096, &peer), 1024);
    // Its receive buffer size plays no part.
    peer.recv_buffer_size = 1 << 20;
    assert_eq!(receive_threshold(4096, &peer), 1024);
    peer.send_size = 8192;
    assert_eq!(receive_threshold(2048, &peer), 2048);
    assert_eq!(receive_threshold(0, &peer), 1024);
}

// ---- direction ----

#[test]
fn reverse_direction_classification() {
    let call = words(&[42, 0, 2]);
    let reply = words(&[42, 1, 0]);
    assert_eq!(
        classify_v1(Endpoint::Client, 42, &reply),
        Ok(Direction::ForwardReply)
    );
    assert_eq!(
        classify_v1(Endpoint::Client, 42, &call),
        Ok(Direction::ReverseCall)
    );
    assert_eq!(
        classify_v1(Endpoint::Server, 42, &call),
        Ok(Direction::ForwardCall)
    );
    assert_eq!(
        classify_v1(Endpoint::Server, 42, &reply),
        Ok(Direction::ReverseReply)
    );
    assert_eq!(
        classify_v1(Endpoint::Server, 43, &call),
        Err(Violation::XidMismatch)
    );
    assert_eq!(
        classify_v1(Endpoint::Server, 42, &call[..7]),
        Err(Violation::BadRpcHeader)
    );
    assert_eq!(
        classify_v1(Endpoint::Server, 42, &words(&[42, 2])),
        Err(Violation::BadRpcHeader)
    );
    assert_eq!(
        classify_v2(Endpoint::Client, 42, false, Some(&call)),
        Ok(Direction::ReverseCall)
    );
    assert_eq!(
        classify_v2(Endpoint::Client, 42, true, Some(&call)),
        Err(Violation::DirectionMismatch)
    );
    assert_eq!(
        classify_v2(Endpoint::Server, 42, true, None),
        Ok(Direction::ReverseReply)
    );
}

#[test]
fn reverse_support_levels() {
    use ReverseSupport::*;
    let simple = PayloadFormat::Simple;
    let cont = PayloadFormat::Continued { sends: 2 };
    assert_eq!(
        check_reverse_support(None, simple, false, false, false),
        Err(V2Error::System)
    );
    assert_eq!(
        check_reverse_support(Simple, simple, false, false, false),
        Ok(())
    );
    assert_eq!(
        check_reverse_support(Simple, cont, false, false, false),
        Err(V2Error::InvalCont)
    );
    assert_eq!(
        check_reverse_support(Continued, cont, false, false, false),
        Ok(())
    );
    assert_eq!(
        check_reverse_support(Continued, simple, true, false, false),
        Err(V2Error::ReadChunks { max_chunks: 0 })
    );
    assert_eq!(
        check_reverse_support(Continued, simple, false, true, false),
        Err(V2Error::WriteChunks { max_chunks: 0 })
    );
    assert_eq!(
        check_reverse_support(Simple, simple, false, false, true),
        Err(V2Error::ReplyResource { length_needed: 0 })
    );
    assert_eq!(
        check_reverse_support(General, PayloadFormat::Special, true, true, true),
        Ok(())
    );
}

#[test]
fn reverse_sends_from_both_levels() {
    use ReverseSupport::*;
    let levels = [None, Simple, Continued, General];
    for local in levels {
        for peer in levels {
            let sends = reverse_sends(local, peer);
            // Symmetric: the Call goes one way, its Reply the other.
            assert_eq!(sends, reverse_sends(peer, local));
            let expected = match (local, peer) {
                (None, _) | (_, None) => ReverseSends::Nothing,
                (Simple, _) | (_, Simple) => ReverseSends::Simple,
                _ => ReverseSends::Continued,
            };
            assert_eq!(sends, expected, "local {local:?}, peer {peer:?}");
            assert_eq!(sends.any(), local != None && peer != None);
        }
    }
    // A peer that sent no BRS property keeps the default, NONE (draft section 5.2.5).
    let mut peer = PeerProperties::DEFAULT;
    assert_eq!(reverse_sends(Simple, peer.reverse), ReverseSends::Nothing);
    // SBSIZ and RBSIZ, no BRS.
    let set = words(&[2, 1, 4, 4096, 2, 4, 4096]);
    peer.apply(&PropSet::decode(&mut XdrReader::new(&set)).unwrap());
    assert_eq!(
        reverse_sends(Continued, peer.reverse),
        ReverseSends::Nothing
    );
    // BRS SIMPLE, then BRS CONT (the value 2 of section 5.2.5).
    let set = words(&[1, 5, 4, 1]);
    peer.apply(&PropSet::decode(&mut XdrReader::new(&set)).unwrap());
    assert_eq!(reverse_sends(Continued, peer.reverse), ReverseSends::Simple);
    let set = words(&[1, 5, 4, 2]);
    peer.apply(&PropSet::decode(&mut XdrReader::new(&set)).unwrap());
    assert_eq!(
        reverse_sends(Continued, peer.reverse),
        ReverseSends::Continued
    );
    assert_eq!(reverse_sends(Simple, peer.reverse), ReverseSends::Simple);
    // An empty BRS value is the default.
    let set = words(&[1, 5, 0]);
    peer.apply(&PropSet::decode(&mut XdrReader::new(&set)).unwrap());
    assert_eq!(
        reverse_sends(Continued, peer.reverse),
        ReverseSends::Nothing
    );
    // A peer whose first message is not RDMA2_CONNPROP keeps every default.
    let mut x = PropertyExchange::new();
    x.on_other_message();
    assert_eq!(
        reverse_sends(Simple, x.peer().reverse),
        ReverseSends::Nothing
    );
    // Version 1 has no properties: whole messages inline.
    assert_eq!(ReverseSends::VERSION_1, ReverseSends::Simple);
}

#[test]
fn reverse_max_payload_is_what_the_sends_carry() {
    const PAGE: usize = 4096;
    for header_len in [28, 36] {
        for limit in [0, 20, 36, 37, 80, 1024, 1100, 4096, 8192] {
            let simple = ReverseSends::Simple.max_payload(limit, header_len, PAGE);
            assert_eq!(simple, limit.saturating_sub(header_len).min(PAGE));
            let continued = ReverseSends::Continued.max_payload(limit, header_len, PAGE);
            assert!(continued >= simple && continued <= PAGE);
            assert_eq!(
                ReverseSends::Nothing.max_payload(limit, header_len, PAGE),
                0
            );
            if continued == 0 {
                continue;
            }
            // Whatever fits is split into the fragments allowed...
            let plan = plan_fragments(continued, limit, header_len, MAX_REVERSE_FRAGMENTS)
                .expect("the largest payload splits");
            assert!(plan.count() <= MAX_REVERSE_FRAGMENTS);
            // ...and, uncapped, one byte more is not.
            let uncapped = ReverseSends::Continued.max_payload(limit, header_len, usize::MAX);
            assert!(
                plan_fragments(uncapped + 1, limit, header_len, MAX_REVERSE_FRAGMENTS).is_err()
            );
        }
    }
    // A page goes continued to a peer receiving 1 KiB (eight Sends), not in one Send.
    assert_eq!(ReverseSends::Continued.max_payload(1024, 36, PAGE), PAGE);
    assert_eq!(ReverseSends::Simple.max_payload(1024, 36, PAGE), 988);
}

// ---- property sets over several RDMA2_CONNPROP (RDMA2_F_TPMORE) ----

mod tpmore {
    use super::*;
    use proto::properties::Property;
    use proto::v2::{Credit, Flags, V2Body};

    fn big_set(auth: &[u8]) -> Vec<Property<'_>> {
        vec![
            Property::SendSize(8192),
            Property::HostAuth(auth),
            Property::RecvBufferSize(16384),
            Property::Reverse(ReverseSupport::Continued),
            Property::MaxSegmentCount(32),
            Property::HostAuth(auth),
            Property::MaxSegmentSize(65536),
        ]
    }

    /// Splits `props` under `max`, encodes every batch and decodes it again;
    /// returns the wire messages.
    fn split_and_encode(props: &[Property<'_>], max: usize) -> Vec<Vec<u8>> {
        let batches: Vec<_> = split_properties(props, max).unwrap().collect();
        let mut out = Vec::new();
        for (i, b) in batches.iter().enumerate() {
            assert_eq!(b.tpmore, i + 1 < batches.len());
            let mut buf = vec![0u8; max];
            let n = b
                .encode(&mut buf, 0x77, Credit::from_raw(0x0020_0020), Flags::NONE)
                .unwrap();
            assert!(n <= max);
            buf.truncate(n);
            out.push(buf);
        }
        // Order and content survive the split.
        let joined: Vec<Property<'_>> = batches.iter().flat_map(|b| b.props.to_vec()).collect();
        assert_eq!(joined, props);
        out
    }

    fn feed(x: &mut PropertyExchange, wire: &[u8]) -> Result<ExchangeEvent, (V2Error, Violation)> {
        let m = v2::decode(wire, &V2DecodeConfig::default()).unwrap();
        let V2Body::ConnProp(set) = m.body else {
            panic!("{m:?}")
        };
        x.on_connprop(&set, m.prefix.flags.tpmore())
    }

    #[test]
    fn split_respects_message_size_and_applies_at_the_end() {
        let auth = [0x5a_u8; 700];
        let props = big_set(&auth);
        let msgs = split_and_encode(&props, 1024);
        assert_eq!(msgs.len(), 2);
        let mut x = PropertyExchange::new();
        assert_eq!(feed(&mut x, &msgs[0]), Ok(ExchangeEvent::MoreExpected));
        // Nothing is in effect before the sequence is complete.
        assert_eq!(*x.peer(), PeerProperties::DEFAULT);
        assert_eq!(feed(&mut x, &msgs[1]), Ok(ExchangeEvent::PeerDone));
        let p = x.peer();
        assert_eq!(
            (p.send_size, p.recv_buffer_size, p.max_segment_count),
            (8192, 16384, 32)
        );
        assert_eq!(
            (p.max_segment_size, p.reverse, p.host_auth_seen),
            (65536, ReverseSupport::Continued, true)
        );
        assert_eq!(x.peer_messages(), 2);
        // The peer is done: one more earns RDMA2_ERR_INVAL_HTYPE.
        assert_eq!(
            feed(&mut x, &msgs[1]),
            Err((V2Error::InvalHtype, Violation::PropertiesAlreadyComplete))
        );
    }

    #[test]
    fn small_messages_and_empty_set() {
        // Only one 12-byte property fits per 36-byte message.
        let props = [
            Property::SendSize(2048),
            Property::RecvBufferSize(2048),
            Property::MaxSegmentCount(4),
        ];
        let msgs = split_and_encode(&props, 36);
        assert_eq!(msgs.len(), 3);
        let mut x = PropertyExchange::new();
        for m in &msgs[..2] {
            assert_eq!(feed(&mut x, m), Ok(ExchangeEvent::MoreExpected));
        }
        assert_eq!(
            x.peer().max_segment_count,
            PeerProperties::DEFAULT.max_segment_count
        );
        assert_eq!(feed(&mut x, &msgs[2]), Ok(ExchangeEvent::PeerDone));
        assert_eq!(x.peer().max_segment_count, 4);
        assert_eq!(
            (x.peer().send_size, x.peer().recv_buffer_size),
            (2048, 2048)
        );
        // An empty set is one message with RDMA2_F_TPMORE clear.
        let b: Vec<_> = split_properties(&[], 1024).unwrap().collect();
        assert_eq!(b.len(), 1);
        assert!(b[0].props.is_empty() && !b[0].tpmore);
    }

    #[test]
    fn oversized_property_cannot_be_split() {
        let auth = [0u8; 2000];
        let props = big_set(&auth);
        assert_eq!(
            split_properties(&props, 1024).unwrap_err(),
            PropSplitError::PropertyTooLarge(1)
        );
        assert!(split_properties(&[], 8).is_err());
    }

    #[test]
    fn other_header_type_mid_sequence_drops_the_staged_set() {
        let props = [Property::SendSize(2048), Property::RecvBufferSize(2048)];
        let msgs = split_and_encode(&props, 36);
        let mut x = PropertyExchange::new();
        assert_eq!(feed(&mut x, &msgs[0]), Ok(ExchangeEvent::MoreExpected));
        assert_eq!(
            x.on_other_message_checked(RDMA2_MSG),
            Err((
                V2Error::InvalHtype,
                Violation::PropertiesIncomplete(RDMA2_MSG)
            ))
        );
        assert!(x.peer_done());
        assert_eq!(*x.peer(), PeerProperties::DEFAULT);
        // The rest of the sequence comes too late.
        assert_eq!(
            feed(&mut x, &msgs[1]),
            Err((V2Error::InvalHtype, Violation::PropertiesAlreadyComplete))
        );
        assert_eq!(*x.peer(), PeerProperties::DEFAULT);
    }

    #[test]
    fn connprop_decoder_still_rejects_bad_values() {
        // A bad value in one message of the sequence is BAD_PROPVAL from the
        // decoder, before the exchange ever sees it.
        let wire = words(&[0x77, 2, 0x0020_0020, 5, 4, 1, 1, 4, 16]);
        let f = v2::decode(&wire, &V2DecodeConfig::default()).unwrap_err();
        let Some(ErrorReply {
            body: ErrorBody::V2(e),
            ..
        }) = f.reply()
        else {
            panic!()
        };
        assert_eq!(e, V2Error::BadPropval);
    }
}

#[test]
fn segment_limits_follow_the_peers_rssiz_and_rcsiz() {
    let page = 4096;
    let mut peer = PeerProperties::DEFAULT;
    // Defaults: 1 MiB segments, 16 of them; our regions and count bound them.
    assert_eq!(
        segment_limits(256 * 1024, page, 8, &peer),
        Some(SegmentLimits {
            span: 256 * 1024,
            count: 8
        })
    );
    // A peer taking 64 KiB segments, at most 4: so are ours.
    peer.max_segment_size = 65536;
    peer.max_segment_count = 4;
    assert_eq!(
        segment_limits(256 * 1024, page, 8, &peer),
        Some(SegmentLimits {
            span: 65536,
            count: 4
        })
    );
    // An RSSIZ that is not whole pages is rounded down to them.
    peer.max_segment_size = 3 * page + 100;
    assert_eq!(
        segment_limits(256 * 1024, page, 8, &peer).map(|l| l.span),
        Some(3 * page)
    );
    // Below one page, or no segment at all: no chunks.
    peer.max_segment_size = page - 1;
    assert_eq!(segment_limits(256 * 1024, page, 8, &peer), None);
    peer.max_segment_size = 65536;
    peer.max_segment_count = 0;
    assert_eq!(segment_limits(256 * 1024, page, 8, &peer), None);
    assert_eq!(
        segment_limits(256 * 1024, 0, 8, &PeerProperties::DEFAULT),
        None
    );
}
