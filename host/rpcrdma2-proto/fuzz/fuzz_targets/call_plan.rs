// SPDX-License-Identifier: GPL-2.0

//! The Requester's chunk plan over fuzzer-made layouts, thresholds and
//! Reply arrivals. Invariants: nothing panics; an inline Call or Reply
//! really fits; a Read chunk plan's inline part fits the send threshold and
//! the inline ranges cover the Call exactly once except the data and its
//! padding; a chunk's length is what the layout said; a rebuilt Reply never
//! exceeds the receive buffer; and an error names a real defect.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rpcrdma2_proto::proto::call_plan::*;

/// Reads sizes from the input, biased towards the edges that matter: zero,
/// small values, the 32-bit limit, and anything.
struct Sizes<'a>(&'a [u8]);

impl Sizes<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }

    fn raw(&mut self) -> u64 {
        let mut v = [0u8; 8];
        for b in &mut v {
            *b = self.byte();
        }
        u64::from_le_bytes(v)
    }

    fn size(&mut self) -> usize {
        let sel = self.byte();
        let raw = self.raw();
        let v = match sel % 8 {
            0 => 0,
            1 | 2 => raw % 64,
            3 | 4 => raw % 16384,
            5 => (u64::from(u32::MAX) - 8).saturating_add(raw % 16),
            6 => raw % (1 << 33),
            _ => raw,
        };
        usize::try_from(v).unwrap_or(usize::MAX)
    }

    fn item(&mut self) -> Option<DdpItem> {
        if self.byte().is_multiple_of(3) {
            return None;
        }
        let position = match self.byte() % 4 {
            // Aligned, the common case.
            0 | 1 => self.size() & !3,
            _ => self.size(),
        };
        Some(DdpItem {
            position,
            len: self.size(),
        })
    }
}

fn pad(len: usize) -> usize {
    (4 - len % 4) % 4
}

fn fits_u32(v: usize) -> bool {
    u32::try_from(v).is_ok()
}

/// Why `layout` must be refused, if it must.
fn defect(l: &CallLayout) -> Option<PlanError> {
    if !fits_u32(l.call_len) || !fits_u32(l.reply_max) {
        return Some(PlanError::TooLarge);
    }
    for (d, total) in [(l.call_ddp, l.call_len), (l.reply_ddp, l.reply_max)] {
        let Some(d) = d else { continue };
        if !fits_u32(d.position) || !fits_u32(d.len) {
            return Some(PlanError::TooLarge);
        }
        if d.position == 0 {
            return Some(PlanError::ZeroPosition);
        }
        if !d.position.is_multiple_of(4) {
            return Some(PlanError::Misaligned);
        }
        // Both fit 32 bits: no overflow in 64.
        let end = d.position as u64 + d.len as u64 + pad(d.len) as u64;
        if end > total as u64 {
            return Some(PlanError::OutOfBounds);
        }
    }
    None
}

fuzz_target!(|data: &[u8]| {
    let mut s = Sizes(data);
    let l = CallLayout {
        call_len: s.size(),
        call_ddp: s.item(),
        reply_max: s.size(),
        reply_ddp: s.item(),
    };
    let t = PlanThresholds {
        send: s.size(),
        recv: s.size(),
    };
    let inline_len = s.size();
    let written = s.raw() >> (s.byte() % 64);

    let plan = match plan_v1(&l, &t) {
        Ok(plan) => plan,
        Err(e) => {
            assert_eq!(Some(e), defect(&l));
            return;
        }
    };
    assert_eq!(defect(&l), None);

    let ranges = inline_ranges(&l, &plan);
    let [a, b] = &ranges;
    assert!(a.start <= a.end && a.end <= b.start.max(a.end) && b.start <= b.end);
    assert!(a.end <= l.call_len && b.end <= l.call_len);
    let inline: usize = ranges.iter().map(|r| r.len()).sum();
    match plan.call {
        CallChunks::Inline => {
            assert!(l.call_len <= t.send);
            assert_eq!((a.clone(), b.is_empty()), (0..l.call_len, true));
        }
        CallChunks::ReadChunk { position, len } => {
            let d = l.call_ddp.unwrap();
            assert_eq!((position as usize, len as usize), (d.position, d.len));
            assert!(l.call_len > t.send && inline <= t.send && len > 0);
            // Every byte once, except the data and its padding.
            assert_eq!(*a, 0..d.position);
            assert_eq!(*b, d.position + d.len + pad(d.len)..l.call_len);
            assert_eq!(inline + d.len + pad(d.len), l.call_len);
        }
        CallChunks::PositionZero { len } => {
            assert!(l.call_len > t.send);
            assert_eq!(len as usize, l.call_len);
            assert_eq!(inline, 0);
            if let Some(d) = l.call_ddp {
                assert!(l.call_len - d.len - pad(d.len) > t.send);
            }
        }
    }
    match plan.reply {
        ReplyChunks::Inline => assert!(l.reply_max <= t.recv),
        ReplyChunks::WriteChunk { len } => {
            let d = l.reply_ddp.unwrap();
            assert_eq!(len as usize, d.len);
            assert!(l.reply_max > t.recv && l.reply_max - d.len < t.recv && len > 0);
        }
        ReplyChunks::ReplyChunk { len } => {
            assert!(l.reply_max > t.recv);
            assert_eq!(len as usize, l.reply_max);
            if let Some(d) = l.reply_ddp {
                assert!(l.reply_max - d.len >= t.recv);
            }
        }
    }

    match place_reply(&l, &plan, inline_len, written) {
        Ok(ReplyPlacement::Inline { len }) => {
            assert_eq!((len, written), (inline_len, 0));
            assert!(len <= l.reply_max);
        }
        Ok(
            r @ ReplyPlacement::Placed {
                head,
                data,
                pad: p,
                tail,
            },
        ) => {
            let d = l.reply_ddp.unwrap();
            assert!(matches!(plan.reply, ReplyChunks::WriteChunk { .. }));
            assert_eq!(data as u64, written);
            assert!(data > 0 && data <= d.len && p == pad(data));
            assert!(head <= d.position && head + tail == inline_len);
            assert!(tail == 0 || head == d.position);
            assert!(tail == 0 || p + tail <= l.reply_max - d.position - d.len);
            assert_eq!(r.reply_len(), inline_len + data + p);
            assert!(r.reply_len() <= l.reply_max);
        }
        Err(ReplyError::NoWriteChunk) => {
            assert!(written > 0 && !matches!(plan.reply, ReplyChunks::WriteChunk { .. }));
        }
        Err(ReplyError::Overrun) => {
            let d = l.reply_ddp.unwrap();
            assert!(written > d.len as u64);
        }
        Err(ReplyError::TooLong) => {}
    }
});
