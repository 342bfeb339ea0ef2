// SPDX-License-Identifier: GPL-2.0

//! TERMINATE: the error catalogue, the control field and the header echo.

use proptest::prelude::*;
use rsiw_proto::proto::rdmap::{OpcodeHeader, Segment};
use rsiw_proto::proto::terminate::*;

#[test]
fn catalogue_matches_the_rfcs() {
    use TermError::*;
    let table: &[(TermError, u8, u8, u8)] = &[
        (RdmapLocalCatastrophic, 0, 0, 0x00),
        (RdmapInvalidStag, 0, 1, 0x00),
        (RdmapBaseBounds, 0, 1, 0x01),
        (RdmapAccessRights, 0, 1, 0x02),
        (RdmapStagNotAssociated, 0, 1, 0x03),
        (RdmapToWrap, 0, 1, 0x04),
        (RdmapProtectionCannotInvalidate, 0, 1, 0x09),
        (RdmapProtectionUnspecified, 0, 1, 0xFF),
        (RdmapInvalidVersion, 0, 2, 0x05),
        (RdmapUnexpectedOpcode, 0, 2, 0x06),
        (RdmapCatastrophicStream, 0, 2, 0x07),
        (RdmapCatastrophicGlobal, 0, 2, 0x08),
        (RdmapOperationCannotInvalidate, 0, 2, 0x09),
        (RdmapOperationUnspecified, 0, 2, 0xFF),
        (DdpLocalCatastrophic, 1, 0, 0x00),
        (DdpInvalidStag, 1, 1, 0x00),
        (DdpBaseBounds, 1, 1, 0x01),
        (DdpStagNotAssociated, 1, 1, 0x02),
        (DdpToWrap, 1, 1, 0x03),
        (DdpTaggedInvalidVersion, 1, 1, 0x04),
        (DdpInvalidQn, 1, 2, 0x01),
        (DdpMsnNoBuffer, 1, 2, 0x02),
        (DdpMsnRange, 1, 2, 0x03),
        (DdpInvalidMo, 1, 2, 0x04),
        (DdpMessageTooLong, 1, 2, 0x05),
        (DdpUntaggedInvalidVersion, 1, 2, 0x06),
        (MpaTcpLost, 2, 0, 0x01),
        (MpaCrc, 2, 0, 0x02),
        (MpaMarker, 2, 0, 0x03),
        (MpaInvalidRequestReply, 2, 0, 0x04),
        (MpaLocalCatastrophic, 2, 0, 0x05),
        (MpaInsufficientIrd, 2, 0, 0x06),
        (MpaNoMatchingRtr, 2, 0, 0x07),
    ];
    assert_eq!(table.len(), ALL_TERM_ERRORS.len());
    for &(e, l, t, c) in table {
        assert_eq!(
            (e.layer() as u8, e.error_type(), e.error_code()),
            (l, t, c),
            "{e:?}"
        );
        assert_eq!(TermError::from_triple(l, t, c), Some(e));
    }
    assert_eq!(TermError::from_triple(3, 0, 0), None);
    assert_eq!(TermError::from_triple(0, 1, 0x05), None);
}

/// A TERMINATE reporting a base/bounds violation of an RDMA Read Request,
/// echoing its DDP and RDMA headers (RFC 5040 section 4.8), as a full ULPDU.
fn read_request_terminate() -> Vec<u8> {
    let mut v = vec![
        0x41, 0x47, // DDP: T=0 L=1 DV=1; RDMAP: RV=1 opcode 7 (Terminate)
        0, 0, 0, 0, // reserved
        0, 0, 0, 2, // QN 2
        0, 0, 0, 1, // MSN 1
        0, 0, 0, 0, // MO 0
        0x01, 0x01, 0xE0, 0x00, // layer 0, type 1, code 1, M D R
        0x00, 0x2E, // DDP segment length 46
    ];
    // Echoed Read Request DDP header.
    v.extend_from_slice(&[0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0]);
    // Echoed Read Request header.
    v.extend_from_slice(&[
        0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 4, 0, 0xAA, 0xBB, 0xCC, 0xDD, 0,
        0, 0x7F, 0, 0, 0, 0x20, 0,
    ]);
    v
}

#[test]
fn decodes_hand_built_terminate() {
    let ulpdu = read_request_terminate();
    let seg = Segment::decode(&ulpdu).unwrap();
    let OpcodeHeader::Terminate(m) = seg.header else {
        panic!("not a terminate")
    };
    assert_eq!(m.control.error(), Some(TermError::RdmapBaseBounds));
    assert_eq!(m.control.flags, TermError::RdmapBaseBounds.echo_flags());
    assert_eq!(m.segment_length, Some(46));
    assert_eq!(m.ddp_header.unwrap().len(), 18);
    assert_eq!(m.rdmap_header.unwrap().len(), 28);
    let mut out = [0u8; 128];
    let n = m.encode(&mut out).unwrap();
    assert_eq!(&out[..n], &ulpdu[18..]);
}

#[test]
fn control_word_layout() {
    let c = TerminateControl::new(TermError::MpaInsufficientIrd, EchoFlags::default());
    assert_eq!(c.to_word().unwrap(), 0x2006_0000);
    let c = TerminateControl::new(
        TermError::DdpInvalidQn,
        EchoFlags {
            segment_length: true,
            ddp_header: true,
            rdmap_header: false,
        },
    );
    assert_eq!(c.to_word().unwrap(), 0x1201_C000);
    assert_eq!(TerminateControl::from_word(0x1201_C000), c);
}

#[test]
fn decode_errors() {
    // Too short for the control field.
    assert_eq!(
        TerminateMessage::decode(&[0, 0, 0]),
        Err(TerminateError::Truncated)
    );
    // M set but no length.
    assert_eq!(
        TerminateMessage::decode(&[0x01, 0x01, 0x80, 0]),
        Err(TerminateError::Truncated)
    );
    // D set, untagged header announced but short.
    assert_eq!(
        TerminateMessage::decode(&[0x01, 0x01, 0xC0, 0, 0, 10, 0x41, 0x40, 0]),
        Err(TerminateError::Truncated)
    );
    // No flags but trailing bytes.
    assert_eq!(
        TerminateMessage::decode(&[0, 0, 0, 0, 1]),
        Err(TerminateError::TrailingBytes)
    );
    assert_eq!(
        TerminateError::Truncated.term(),
        TermError::RdmapCatastrophicStream
    );
    // Flags without fields do not encode.
    let m = TerminateMessage {
        control: TerminateControl::new(
            TermError::RdmapBaseBounds,
            TermError::RdmapBaseBounds.echo_flags(),
        ),
        segment_length: None,
        ddp_header: None,
        rdmap_header: None,
    };
    assert!(m.encode(&mut [0u8; 64]).is_err());
}

proptest! {
    #[test]
    fn control_round_trip(word in any::<u32>()) {
        let c = TerminateControl::from_word(word);
        prop_assert_eq!(c.to_word().unwrap(), word);
    }

    #[test]
    fn message_round_trip(word in any::<u32>(), len in any::<u16>(), tagged in any::<bool>(),
                          ddp in proptest::collection::vec(any::<u8>(), 18),
                          rdma in proptest::collection::vec(any::<u8>(), 0..40)) {
        let mut control = TerminateControl::from_word(word);
        let mut ddp = ddp;
        ddp[0] = if tagged { ddp[0] | 0x80 } else { ddp[0] & 0x7F };
        ddp.truncate(if tagged { 14 } else { 18 });
        let f = control.flags;
        if !f.rdmap_header && !rdma.is_empty() { control.flags.rdmap_header = true; }
        let f2 = control.flags;
        let m = TerminateMessage {
            control,
            segment_length: (f.segment_length || f.ddp_header).then_some(len),
            ddp_header: f.ddp_header.then_some(&ddp[..]),
            rdmap_header: f2.rdmap_header.then_some(&rdma[..]),
        };
        let mut out = [0u8; 128];
        let n = m.encode(&mut out).unwrap();
        prop_assert_eq!(TerminateMessage::decode(&out[..n]).unwrap(), m);
    }

    #[test]
    fn decode_never_panics(body in proptest::collection::vec(any::<u8>(), 0..80)) {
        let _ = TerminateMessage::decode(&body);
    }
}

#[test]
fn reporting_builds_the_rfc_echo() {
    use rsiw_proto::proto::rdmap::{encode_headers, untagged_header, Opcode};
    let expected = read_request_terminate();
    let offending = &expected[24..];
    assert_eq!(offending.len(), 46);
    let m = TerminateMessage::reporting(TermError::RdmapBaseBounds, Some(offending));
    let mut out = [0u8; 128];
    let n = encode_headers(
        &untagged_header(Opcode::Terminate, true, 0, 1, 0),
        &OpcodeHeader::Terminate(m),
        &mut out,
    )
    .unwrap();
    assert_eq!(&out[..n], &expected[..]);

    // DDP errors echo the DDP header only.
    let m = TerminateMessage::reporting(TermError::DdpInvalidQn, Some(offending));
    assert_eq!(
        m.control.flags,
        EchoFlags {
            segment_length: true,
            ddp_header: true,
            rdmap_header: false
        }
    );
    assert_eq!(m.ddp_header, Some(&offending[..18]));
    assert_eq!(m.rdmap_header, None);
    // Version errors and MPA errors echo nothing.
    for e in [
        TermError::RdmapInvalidVersion,
        TermError::DdpUntaggedInvalidVersion,
        TermError::MpaCrc,
    ] {
        let m = TerminateMessage::reporting(e, Some(offending));
        assert_eq!(m.control.flags, EchoFlags::default());
        assert_eq!(m.encode(&mut out), Ok(4));
    }
    // A segment too short for its DDP header is not echoed.
    let m = TerminateMessage::reporting(TermError::RdmapBaseBounds, Some(&offending[..10]));
    assert_eq!(m.control.flags, EchoFlags::default());
    // A Send's protection error sets R with an empty RDMA header.
    let send = [
        0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 9, 9,
    ];
    let m = TerminateMessage::reporting(TermError::RdmapInvalidStag, Some(&send));
    assert_eq!(m.rdmap_header, Some(&[][..]));
    assert_eq!(m.segment_length, Some(20));
    let n = m.encode(&mut out).unwrap();
    assert_eq!(TerminateMessage::decode(&out[..n]).unwrap(), m);
}

proptest! {
    #[test]
    fn reporting_always_encodes(i in 0usize..33, seg in proptest::collection::vec(any::<u8>(), 0..80)) {
        let m = TerminateMessage::reporting(ALL_TERM_ERRORS[i], Some(&seg));
        let mut out = [0u8; 128];
        let n = m.encode(&mut out).unwrap();
        prop_assert_eq!(TerminateMessage::decode(&out[..n]).unwrap(), m);
    }
}
