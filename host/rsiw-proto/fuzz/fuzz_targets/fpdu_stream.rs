// SPDX-License-Identifier: GPL-2.0

//! The incremental FPDU receiver fed the same stream at once and in
//! fuzzer-chosen chunk sizes must report the same events and errors.

#![no_main]

use core::ops::ControlFlow;
use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::crc32c::SoftCrc32c;
use rsiw_proto::proto::fpdu::{FpduError, FpduReceiver, RxEvent};
use rsiw_proto::proto::rdmap::Segment;

#[derive(Debug, PartialEq)]
enum Ev {
    Header(Vec<u8>, usize),
    Payload(Vec<u8>),
    Complete(usize),
}

fn run(stream: &[u8], crc: bool, sizes: &[u8]) -> (Vec<Ev>, Option<FpduError>) {
    let mut rx = FpduReceiver::new(SoftCrc32c, crc);
    let mut events = Vec::new();
    let mut pos = 0;
    let mut k = 0;
    while pos < stream.len() {
        let size = if sizes.is_empty() {
            stream.len()
        } else {
            usize::from(sizes[k % sizes.len()]).max(1)
        };
        k += 1;
        let end = (pos + size).min(stream.len());
        let res = rx.feed(&stream[pos..end], |ev| {
            match ev {
                RxEvent::Header { header, ulpdu_len } => {
                    let _ = Segment::decode(header).map_err(|e| e.term());
                    events.push(Ev::Header(header.to_vec(), ulpdu_len));
                }
                RxEvent::Payload { data, .. } => match events.last_mut() {
                    Some(Ev::Payload(p)) => p.extend_from_slice(data),
                    _ => events.push(Ev::Payload(data.to_vec())),
                },
                RxEvent::Complete { ulpdu_len } => events.push(Ev::Complete(ulpdu_len)),
            }
            ControlFlow::Continue(())
        });
        match res {
            Ok(n) => assert_eq!(n, end - pos),
            Err(e) => return (events, Some(e)),
        }
        pos = end;
    }
    (events, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let nsizes = usize::from(ctl >> 1) % 16;
    let Some((sizes, stream)) = rest.split_at_checked(nsizes.min(rest.len())) else {
        return;
    };
    let crc = ctl & 1 != 0;
    let whole = run(stream, crc, &[]);
    let pieces = run(stream, crc, sizes);
    assert_eq!(whole, pieces);
});
