// SPDX-License-Identifier: GPL-2.0

//! Negotiation over arbitrary configurations and frames: never panics,
//! accepted outcomes respect the RFC 6581 section 9.1 bounds, and large FPDUs
//! are agreed exactly when both sides offer them (the reserved flag bit
//! 0x08, sent by each side iff it offers, never in a reject, and the only
//! reserved bit ever sent).

#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::mpa::{
    FrameKind, MpaFrame, RtrKinds, KEY_LEN, REPLY_KEY, REQUEST_KEY, RESERVED_LARGE_FPDUS,
};
use rsiw_proto::proto::mpa_negotiation::{
    CrcPolicy, InitiatorConfig, InitiatorOutcome, QueueDepth, ResponderConfig,
};

fn policy(b: u8) -> CrcPolicy {
    match b % 3 {
        0 => CrcPolicy::Required,
        1 => CrcPolicy::Optional,
        _ => CrcPolicy::Disabled,
    }
}

fn rtr(b: u8) -> RtrKinds {
    RtrKinds {
        send: b & 1 != 0,
        write: b & 2 != 0,
        read: b & 4 != 0,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((cfg, frame)) = data.split_at_checked(12) else {
        return;
    };
    let word = |i: usize| u16::from_be_bytes([cfg[i], cfg[i + 1]]) & 0x3FFF;
    let initiator = InitiatorConfig {
        crc: policy(cfg[0]),
        enhanced: cfg[1] & 1 != 0,
        ird: word(2),
        ord: word(4),
        max_ird: word(6),
        peer_to_peer: cfg[1] & 2 != 0,
        rtr: rtr(cfg[1] >> 2),
        large_fpdus: cfg[1] & 0x80 != 0,
    };
    let responder = ResponderConfig {
        crc: policy(cfg[8]),
        enhanced: cfg[9] & 1 != 0,
        max_ird: word(6),
        ord: word(10),
        min_ord: word(2) & 0xFF,
        rtr: rtr(cfg[9] >> 1),
        large_fpdus: cfg[9] & 0x80 != 0,
    };
    // The fuzzer supplies everything after the key, so that it spends its
    // time on flags, revisions and enhanced data rather than on the key.
    let request = [&REQUEST_KEY[..], frame].concat();
    // The flags byte of a frame: the bit of large FPDUs alone, iff offered.
    let offers =
        |frame: &[u8], on: bool| frame[KEY_LEN] & 0x0F == if on { RESERVED_LARGE_FPDUS } else { 0 };
    let mut out = [0u8; 600];
    let n = initiator
        .encode_request(&mut out, &frame[..frame.len().min(256)])
        .expect("request fits");
    assert!(offers(&out[..n], initiator.large_fpdus));
    let reply = [&REPLY_KEY[..], frame].concat();
    if let Ok((req, _)) = MpaFrame::decode(&request, FrameKind::Request) {
        match responder.process_request(&req) {
            Ok(d) => {
                if let QueueDepth::Set(ird) = d.local_ird {
                    assert!(ird <= responder.max_ird.max(1));
                }
                if let (QueueDepth::Set(ord), Some(peer)) = (d.local_ord, req.enhanced) {
                    assert!(ord <= peer.ird);
                }
                assert_eq!(
                    d.large_fpdus,
                    responder.large_fpdus && req.header.flags.large_fpdus()
                );
                let n = d
                    .encode_reply(&mut out, req.ulp_private_data)
                    .expect("reply fits");
                assert!(offers(&out[..n], responder.large_fpdus));
            }
            Err(e) => {
                let _ = e.term();
                let n = responder
                    .encode_reject(&req, e, &mut out, &[])
                    .expect("reject fits");
                assert!(offers(&out[..n], false));
            }
        }
    }
    if let Ok((rep, _)) = MpaFrame::decode(&reply, FrameKind::Reply) {
        match initiator.process_reply(&rep) {
            Ok(InitiatorOutcome::Accepted(d)) => {
                assert_eq!(
                    d.large_fpdus,
                    initiator.large_fpdus && rep.header.flags.large_fpdus()
                );
                if let QueueDepth::Set(ird) = d.local_ird {
                    assert!(ird <= initiator.max_ird.max(initiator.ird));
                }
                if let QueueDepth::Set(ord) = d.local_ord {
                    assert!(ord <= initiator.ord);
                }
                if let Some(kind) = d.rtr {
                    assert!(initiator.rtr.contains(kind));
                }
            }
            Ok(InitiatorOutcome::Rejected { .. }) => {}
            Err(e) => {
                let _ = e.term();
            }
        }
    }
});
