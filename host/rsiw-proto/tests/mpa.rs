// SPDX-License-Identifier: GPL-2.0

//! MPA Request/Reply frames: hand-built vectors, errors and round trips.

use proptest::prelude::*;
use rsiw_proto::proto::mpa::*;
use rsiw_proto::proto::terminate::TermError;

/// An enhanced MPA Request (RFC 5044 figure 9 + RFC 6581 section 6 and 9):
/// CRC wanted, revision 2, peer-to-peer with Write and Read RTR, IRD 16,
/// ORD 8, followed by the ULP private data "abc".
const ENHANCED_REQUEST: [u8; 27] = [
    b'M', b'P', b'A', b' ', b'I', b'D', b' ', b'R', b'e', b'q', b' ', b'F', b'r', b'a', b'm', b'e',
    0x50, // M=0 C=1 R=0 S=1
    0x02, // Rev 2
    0x00, 0x07, // PD_Length 7
    0x80, 0x10, // A=1 B=0 IRD=16
    0xC0, 0x08, // C=1 D=1 ORD=8
    b'a', b'b', b'c',
];

#[test]
fn decodes_enhanced_request() {
    let (frame, len) = MpaFrame::decode(&ENHANCED_REQUEST, FrameKind::Request).unwrap();
    assert_eq!(len, 27);
    assert_eq!(frame.header.kind, FrameKind::Request);
    assert!(frame.header.flags.crc && frame.header.flags.enhanced);
    assert!(!frame.header.flags.markers && !frame.header.flags.reject);
    assert_eq!(frame.header.revision, 2);
    assert_eq!(
        frame.enhanced,
        Some(EnhancedData {
            ird: 16,
            ord: 8,
            peer_to_peer: true,
            rtr: RtrKinds {
                send: false,
                write: true,
                read: true
            },
        })
    );
    assert_eq!(frame.ulp_private_data, b"abc");
}

#[test]
fn encodes_enhanced_request() {
    let mut out = [0u8; 64];
    let enhanced = EnhancedData {
        ird: 16,
        ord: 8,
        peer_to_peer: true,
        rtr: RtrKinds {
            send: false,
            write: true,
            read: true,
        },
    };
    let flags = MpaFlags {
        crc: true,
        ..Default::default()
    };
    let n = encode_frame(
        &mut out,
        FrameKind::Request,
        flags,
        2,
        Some(&enhanced),
        b"abc",
    )
    .unwrap();
    assert_eq!(&out[..n], &ENHANCED_REQUEST);
}

#[test]
fn plain_reject_reply() {
    let mut frame = Vec::from(*b"MPA ID Rep Frame");
    frame.extend_from_slice(&[0x20, 0x01, 0x00, 0x02, b'n', b'o']);
    let (f, _) = MpaFrame::decode(&frame, FrameKind::Reply).unwrap();
    assert!(f.header.flags.reject);
    assert_eq!(f.enhanced, None);
    assert_eq!(f.ulp_private_data, b"no");
}

#[test]
fn revision_1_ignores_s_bit() {
    let mut frame = ENHANCED_REQUEST;
    frame[17] = 1;
    let (f, _) = MpaFrame::decode(&frame, FrameKind::Request).unwrap();
    assert_eq!(f.enhanced, None);
    assert_eq!(f.ulp_private_data.len(), 7);
}

#[test]
fn no_negotiation_value() {
    let e = EnhancedData::from_bytes([0x3F, 0xFF, 0x3F, 0xFF]);
    assert_eq!((e.ird, e.ord), (NO_NEGOTIATION, NO_NEGOTIATION));
    assert!(!e.peer_to_peer && e.rtr.is_empty());
    let all = EnhancedData::from_bytes([0xFF; 4]);
    assert!(all.peer_to_peer && all.rtr.send && all.rtr.write && all.rtr.read);
}

#[test]
fn decode_errors() {
    assert_eq!(
        MpaFrame::decode(&ENHANCED_REQUEST[..10], FrameKind::Request),
        Err(MpaError::Truncated {
            needed: FRAME_HEADER_LEN
        })
    );
    assert_eq!(
        MpaFrame::decode(&ENHANCED_REQUEST[..19], FrameKind::Request),
        Err(MpaError::Truncated {
            needed: FRAME_HEADER_LEN
        })
    );
    assert_eq!(
        MpaFrame::decode(&ENHANCED_REQUEST[..26], FrameKind::Request),
        Err(MpaError::Truncated { needed: 27 })
    );
    assert_eq!(
        MpaFrame::decode(&ENHANCED_REQUEST, FrameKind::Reply),
        Err(MpaError::BadKey)
    );
    let mut long = ENHANCED_REQUEST;
    long[18] = 0x02;
    long[19] = 0x01; // 513
    assert_eq!(
        MpaFrame::decode(&long, FrameKind::Request),
        Err(MpaError::PrivateDataTooLong(513))
    );
    let mut short = ENHANCED_REQUEST;
    short[19] = 3;
    assert_eq!(
        MpaFrame::decode(&short, FrameKind::Request),
        Err(MpaError::EnhancedDataMissing)
    );
    for e in [
        MpaError::BadKey,
        MpaError::EnhancedDataMissing,
        MpaError::PrivateDataTooLong(600),
        MpaError::Truncated { needed: 1 },
    ] {
        assert_eq!(e.term(), TermError::MpaInvalidRequestReply);
    }
}

#[test]
fn encode_errors() {
    let mut out = [0u8; 600];
    let e = EnhancedData {
        ird: 1,
        ord: 1,
        peer_to_peer: false,
        rtr: RtrKinds::NONE,
    };
    // 14-bit fields.
    let big = EnhancedData { ird: 0x4000, ..e };
    // (revision, enhanced data, private data length) -> encodes?
    let cases = [
        // S needs revision 2.
        (1, &e, 0, false),
        (2, &big, 0, false),
        // Private data limit includes the enhanced data.
        (2, &e, 509, false),
        (2, &e, 508, true),
    ];
    for (rev, enhanced, pd_len, ok) in cases {
        let r = encode_frame(
            &mut out,
            FrameKind::Request,
            MpaFlags::default(),
            rev,
            Some(enhanced),
            &[0; 509][..pd_len],
        );
        assert_eq!(r.is_ok(), ok, "rev {rev}, {enhanced:?}, {pd_len} bytes");
    }
    // Output too small.
    assert_eq!(
        encode_frame(
            &mut out[..20],
            FrameKind::Request,
            MpaFlags::default(),
            1,
            None,
            b"x"
        ),
        Err(rsiw_proto::proto::wire::EncodeError::BufferTooSmall { needed: 21 })
    );
}

#[test]
fn large_fpdus_flag_bit() {
    assert_eq!(RESERVED_LARGE_FPDUS, 0x08);
    // Decoding: only bit 0x08 says so, whatever the other bits.
    for byte in [0x08, 0x0F, 0x48, 0xF8, 0x18] {
        assert!(MpaFlags::from_byte(byte).large_fpdus(), "{byte:#04x}");
    }
    for byte in [0x00, 0x01, 0x02, 0x04, 0x07, 0xF7, 0xF0] {
        assert!(!MpaFlags::from_byte(byte).large_fpdus(), "{byte:#04x}");
    }
    // Encoding: the bit and nothing else.
    let on = MpaFlags::default().with_large_fpdus(true);
    assert!(on.large_fpdus());
    assert_eq!(on.to_byte().unwrap(), 0x08);
    assert_eq!(on.with_large_fpdus(false), MpaFlags::default());
    let crc = MpaFlags {
        crc: true,
        ..Default::default()
    };
    assert_eq!(crc.with_large_fpdus(true).to_byte().unwrap(), 0x48);
    // Setting or clearing it leaves the other reserved bits and flags alone.
    let others = MpaFlags::from_byte(0xF7);
    assert_eq!(others.with_large_fpdus(true).to_byte().unwrap(), 0xFF);
    assert_eq!(MpaFlags::from_byte(0xFF).with_large_fpdus(false), others);
    assert_eq!(others.with_large_fpdus(false), others);
    // Through a frame: a revision 1 reply with C and the bit set.
    let mut frame = Vec::from(*b"MPA ID Rep Frame");
    frame.extend_from_slice(&[0x48, 0x01, 0x00, 0x00]);
    let (f, _) = MpaFrame::decode(&frame, FrameKind::Reply).unwrap();
    assert!(f.header.flags.crc && f.header.flags.large_fpdus());
    assert!(!f.header.flags.enhanced && !f.header.flags.reject);
    let mut out = [0u8; 32];
    let n = encode_frame(
        &mut out,
        FrameKind::Reply,
        crc.with_large_fpdus(true),
        1,
        None,
        &[],
    )
    .unwrap();
    assert_eq!(&out[..n], &frame[..]);
}

fn arb_enhanced() -> impl Strategy<Value = EnhancedData> {
    (
        0u16..=0x3FFF,
        0u16..=0x3FFF,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(ird, ord, p2p, send, write, read)| EnhancedData {
            ird,
            ord,
            peer_to_peer: p2p,
            rtr: RtrKinds { send, write, read },
        })
}

proptest! {
    #[test]
    fn frame_round_trip(kind in prop_oneof![Just(FrameKind::Request), Just(FrameKind::Reply)],
                        flags in any::<u8>(), revision in 2u8..=255,
                        enhanced in proptest::option::of(arb_enhanced()),
                        pd in proptest::collection::vec(any::<u8>(), 0..=508)) {
        let flags = MpaFlags::from_byte(flags);
        let mut out = [0u8; 600];
        let n = encode_frame(&mut out, kind, flags, revision, enhanced.as_ref(), &pd).unwrap();
        let (f, len) = MpaFrame::decode(&out[..n], kind).unwrap();
        prop_assert_eq!(len, n);
        prop_assert_eq!(f.enhanced, enhanced);
        prop_assert_eq!(f.ulp_private_data, &pd[..]);
        prop_assert_eq!(f.header.flags, MpaFlags { enhanced: enhanced.is_some(), ..flags });
        prop_assert_eq!(f.header.revision, revision);
    }

    #[test]
    fn large_fpdus_is_bit_3_alone(byte in any::<u8>(), on in any::<bool>()) {
        let flags = MpaFlags::from_byte(byte);
        prop_assert_eq!(flags.large_fpdus(), byte & 0x08 != 0);
        let set = flags.with_large_fpdus(on);
        prop_assert_eq!(set.large_fpdus(), on);
        prop_assert_eq!(set.to_byte().unwrap(), (byte & !0x08) | if on { 0x08 } else { 0 });
    }

    #[test]
    fn enhanced_bytes_round_trip(bytes in any::<[u8; 4]>()) {
        prop_assert_eq!(EnhancedData::from_bytes(bytes).to_bytes().unwrap(), bytes);
    }

    #[test]
    fn decode_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = MpaFrame::decode(&buf, FrameKind::Request);
        let _ = MpaFrame::decode(&buf, FrameKind::Reply);
    }
}
