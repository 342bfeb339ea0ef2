// SPDX-License-Identifier: GPL-2.0

//! Both roles of the MPA handshake fed arbitrary bytes in arbitrary chunks:
//! never panics, never takes more than offered, reports at most one final
//! event, takes nothing once over, and gives the same outcome whole and
//! chunked. A loopback with one corrupted wire byte exercises the paths in
//! between. Large FPDUs are agreed iff both sides offer them: each frame
//! carries the reserved bit 0x08 iff its sender offers (a reject never), and
//! no other reserved bit.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::crc32c::SoftCrc32c;
use rsiw_proto::proto::mpa::{RtrKinds, KEY_LEN, REPLY_KEY, REQUEST_KEY, RESERVED_LARGE_FPDUS};
use rsiw_proto::proto::mpa_handshake::{
    InitiatorEvent, InitiatorHandshake, ResponderEvent, ResponderHandshake,
};
use rsiw_proto::proto::mpa_negotiation::{CrcPolicy, InitiatorConfig, ResponderConfig};

type Responder = ResponderHandshake<SoftCrc32c>;

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

fn configs(cfg: &[u8; 12]) -> (InitiatorConfig, ResponderConfig) {
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
        min_ord: word(2) & 0xF,
        rtr: rtr(cfg[9] >> 1),
        large_fpdus: cfg[9] & 0x80 != 0,
    };
    (initiator, responder)
}

/// Whether `frame`'s flags byte has the bit of large FPDUs iff `on`, and no
/// other reserved bit.
fn offers(frame: &[u8], on: bool) -> bool {
    frame[KEY_LEN] & 0x0F == if on { RESERVED_LARGE_FPDUS } else { 0 }
}

/// Whether the frame at the start of `stream` (complete, as it was
/// accepted) offers large FPDUs.
fn peer_offers(stream: &[u8]) -> bool {
    stream[KEY_LEN] & RESERVED_LARGE_FPDUS != 0
}

/// The events as text, with the position of each but a failure (a failure
/// may be found before or after the bytes of the current chunk are counted).
fn describe<E: core::fmt::Debug>(events: &[(usize, E)]) -> Vec<(Option<usize>, String)> {
    events
        .iter()
        .map(|(pos, e)| {
            let text = format!("{e:?}");
            let pos = (!text.starts_with("Failed")).then_some(*pos);
            (pos, text)
        })
        .collect()
}

/// Offers `stream` in chunks of `chunk` bytes (all at once for 0) and
/// returns every event with the bytes consumed before it, and the total.
fn drive<E: Copy>(
    stream: &[u8],
    chunk: usize,
    mut step: impl FnMut(&[u8]) -> (usize, Option<E>),
) -> (Vec<(usize, E)>, usize) {
    let chunk = if chunk == 0 {
        stream.len().max(1)
    } else {
        chunk
    };
    let mut events = Vec::new();
    let mut pos = 0;
    let mut offered = 0;
    while offered < stream.len() {
        offered = (offered + chunk).min(stream.len());
        loop {
            let (n, event) = step(&stream[pos..offered]);
            assert!(n <= offered - pos);
            pos += n;
            match event {
                Some(event) => events.push((pos, event)),
                None => break,
            }
        }
    }
    (events, pos)
}

fn run_initiator(
    config: InitiatorConfig,
    stream: &[u8],
    chunk: usize,
) -> Vec<(Option<usize>, String)> {
    let mut ini = InitiatorHandshake::new(config);
    let mut out = [0u8; 600];
    let n = ini.request(b"pd", &mut out).expect("request fits");
    assert!(offers(&out[..n], config.large_fpdus));
    let (events, _) = drive(stream, chunk, |b| ini.on_bytes(b).expect("requested"));
    assert!(events.len() <= 1);
    if let Some((_, InitiatorEvent::Connected(d))) = events.first() {
        assert_eq!(d.large_fpdus, config.large_fpdus && peer_offers(stream));
        let n = ini.rtr_fpdu(&mut out, SoftCrc32c).expect("rtr fits");
        assert_eq!(n == 0, d.rtr.is_none());
    }
    if !events.is_empty() {
        assert_eq!(ini.on_bytes(stream).expect("requested"), (0, None));
    }
    let _ = ini.on_timeout();
    describe(&events)
}

fn run_responder(
    config: ResponderConfig,
    stream: &[u8],
    chunk: usize,
    ulp: u8,
) -> Vec<(Option<usize>, String)> {
    let mut res = Responder::new(config, SoftCrc32c);
    let mut out = [0u8; 600];
    let (events, _) = drive(stream, chunk, |b| {
        let (n, event) = res.on_bytes(b);
        if let Some(ResponderEvent::ConnectRequest(_)) = event {
            match ulp & 3 {
                0 => {
                    let n = res.reject(b"no", &mut out).expect("reject fits");
                    assert!(offers(&out[..n], false));
                }
                _ => {
                    let ird = u16::from(ulp >> 2);
                    if let Ok(accepted) = res.accept(b"yes", ird, ird / 2, &mut out) {
                        assert_eq!(accepted.established, res.is_established());
                        assert!(offers(&out[..accepted.len], config.large_fpdus));
                        assert_eq!(
                            accepted.decision.large_fpdus,
                            config.large_fpdus && peer_offers(stream)
                        );
                    }
                }
            }
        }
        if let Some(ResponderEvent::Established(_)) = event {
            res.rtr_response(&mut out).expect("response fits");
        }
        (n, event)
    });
    assert!(events.len() <= 2);
    let failed = matches!(events.last(), Some((_, ResponderEvent::Failed(_))));
    if failed || res.is_established() {
        assert_eq!(res.on_bytes(stream), (0, None));
    }
    let _ = res.on_timeout();
    describe(&events)
}

/// A full exchange over a wire whose byte `flip.0` is xored with `flip.1`.
fn loopback(i: InitiatorConfig, r: ResponderConfig, chunk: usize, flip: (usize, u8)) {
    let mut wire = Vec::new();
    let mut ini = InitiatorHandshake::new(i);
    let mut res = Responder::new(r, SoftCrc32c);
    let mut out = [0u8; 600];
    let corrupt = |bytes: &mut [u8], base: usize| {
        if let Some(b) = flip.0.checked_sub(base).and_then(|k| bytes.get_mut(k)) {
            *b ^= flip.1;
        }
    };
    let n = ini.request(b"abc", &mut out).expect("request fits");
    assert!(offers(&out[..n], i.large_fpdus));
    corrupt(&mut out[..n], wire.len());
    wire.extend_from_slice(&out[..n]);
    let (events, _) = drive(&out[..n], chunk, |b| res.on_bytes(b));
    let Some((_, ResponderEvent::ConnectRequest(_))) = events.first() else {
        return;
    };
    let Ok(accepted) = res.accept(b"defg", r.max_ird, r.ord, &mut out) else {
        return;
    };
    let n = accepted.len;
    assert!(offers(&out[..n], r.large_fpdus));
    corrupt(&mut out[..n], wire.len());
    wire.extend_from_slice(&out[..n]);
    let (events, _) = drive(&out[..n], chunk, |b| ini.on_bytes(b).expect("requested"));
    let Some((_, InitiatorEvent::Connected(d))) = events.first() else {
        return;
    };
    if flip.1 == 0 {
        assert_eq!(d.use_crc, accepted.decision.use_crc);
        assert_eq!(d.large_fpdus, i.large_fpdus && r.large_fpdus);
        assert_eq!(accepted.decision.large_fpdus, d.large_fpdus);
        assert_eq!(d.rtr.is_none(), accepted.established);
    }
    let n = ini.rtr_fpdu(&mut out, SoftCrc32c).expect("rtr fits");
    corrupt(&mut out[..n], wire.len());
    let (events, _) = drive(&out[..n], chunk, |b| res.on_bytes(b));
    if flip.1 == 0 && d.rtr.is_some() {
        assert!(matches!(
            events.first(),
            Some((_, ResponderEvent::Established(_)))
        ));
        assert!(res.is_established());
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 14 {
        return;
    }
    let (head, stream) = data.split_at(14);
    let cfg: [u8; 12] = head[..12].try_into().unwrap();
    let (mode, chunk) = (head[12], usize::from(head[13]));
    let (initiator, responder) = configs(&cfg);
    // With the top bit set the stream gets the right key in front, so that
    // the fuzzer spends its time on what follows it.
    let keyed = |key: &[u8; 16]| {
        let mut v = Vec::new();
        if mode & 0x80 != 0 {
            v.extend_from_slice(key);
        }
        v.extend_from_slice(stream);
        v
    };
    match mode % 3 {
        0 => {
            let stream = keyed(&REPLY_KEY);
            let whole = run_initiator(initiator, &stream, 0);
            assert_eq!(whole, run_initiator(initiator, &stream, chunk));
        }
        1 => {
            let stream = keyed(&REQUEST_KEY);
            let ulp = (mode >> 2) & 0x1F;
            let whole = run_responder(responder, &stream, 0, ulp);
            assert_eq!(whole, run_responder(responder, &stream, chunk, ulp));
        }
        _ => {
            let flip = stream.get(..3).map_or((0, 0), |f| {
                (usize::from(u16::from_be_bytes([f[0], f[1]])), f[2])
            });
            loopback(initiator, responder, chunk, flip);
        }
    }
});
