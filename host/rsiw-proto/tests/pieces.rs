// SPDX-License-Identifier: GPL-2.0

//! `Pieces` against a flat copy of its bytes.

use proptest::prelude::*;
use rsiw_proto::proto::pieces::Pieces;

/// The bytes of `p`, collected piece by piece; empty pieces are never handed out.
/// Also checks that `try_for_each_at` tells where each slice starts.
fn collect(p: Pieces<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    let r: Result<(), ()> = p.try_for_each(|chunk| {
        assert!(!chunk.is_empty());
        out.extend_from_slice(chunk);
        Ok(())
    });
    assert!(r.is_ok());
    assert_eq!(out.len(), p.len());
    let mut again = Vec::new();
    let r: Result<(), ()> = p.try_for_each_at(|at, chunk| {
        assert_eq!(at, again.len());
        again.extend_from_slice(chunk);
        Ok(())
    });
    assert!(r.is_ok());
    assert_eq!(again, out);
    out
}

proptest! {
    #[test]
    fn splits_agree_with_the_flat_bytes(
        slices in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 0..8),
        cuts in prop::collection::vec(0usize..40, 0..6),
    ) {
        let refs: Vec<&[u8]> = slices.iter().map(|s| s.as_slice()).collect();
        let flat: Vec<u8> = slices.concat();
        let mut rest = Pieces::new(&refs);
        let mut at = 0;
        for cut in cuts {
            prop_assert_eq!(collect(rest), &flat[at..]);
            let first = rest.first();
            prop_assert_eq!(first, &flat[at..at + first.len()]);
            prop_assert_eq!(first.is_empty(), rest.is_empty());
            let (head, tail) = rest.split_at(cut);
            let n = cut.min(flat.len() - at);
            prop_assert_eq!(collect(head), &flat[at..at + n]);
            let mut copy = vec![0; n];
            prop_assert!(head.copy_to(&mut copy));
            prop_assert_eq!(&copy, &flat[at..at + n]);
            let mut too_long = vec![0; n + 1];
            prop_assert!(!head.copy_to(&mut too_long));
            at += n;
            rest = tail;
        }
        prop_assert_eq!(collect(rest), &flat[at..]);
    }
}

#[test]
fn one_slice() {
    let bytes: &[u8] = b"abcdef";
    let one = [bytes];
    let p = Pieces::one(&one);
    assert_eq!(p.len(), 6);
    let (head, tail) = p.split_at(2);
    assert_eq!(collect(head), b"ab");
    assert_eq!(tail.first(), b"cdef");
}

#[test]
fn an_error_stops_the_walk() {
    let slices: [&[u8]; 3] = [b"ab", b"cd", b"ef"];
    let mut seen = 0;
    let r = Pieces::new(&slices).try_for_each(|_| {
        seen += 1;
        if seen == 2 {
            Err(())
        } else {
            Ok(())
        }
    });
    assert_eq!((r, seen), (Err(()), 2));
}
