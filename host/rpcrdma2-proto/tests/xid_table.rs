// SPDX-License-Identifier: GPL-2.0

//! The Requester's table of calls by XID: entries found, refused and freed as a plain list of
//! (index, XID) pairs says they should be, whatever the order of inserts and removals.

mod common;
use common::*;
use proptest::prelude::*;
use proto::xid_table::*;

#[test]
fn finds_what_it_holds_and_refuses_a_second_entry() {
    let mut t = XidTable::<4>::new();
    assert!(t.is_empty());
    let a = t.insert(7).unwrap();
    let b = t.insert(11).unwrap(); // the same chain as 7 (4 chains)
    assert_ne!(a, b);
    assert_eq!(t.insert(7), Err(InsertError::Present));
    assert_eq!((t.find(7), t.find(11), t.find(3)), (Some(a), Some(b), None));
    assert_eq!((t.xid(a), t.xid(b), t.len()), (Some(7), Some(11), 2));
}

#[test]
fn full_then_room_again_after_a_removal() {
    let mut t = XidTable::<3>::new();
    let entries: Vec<usize> = [1, 4, 7].iter().map(|&x| t.insert(x).unwrap()).collect();
    assert_eq!(t.insert(10), Err(InsertError::Full));
    // The middle of a chain of three (1, 4, 7 all fall in chain 1).
    assert_eq!(t.remove(entries[1]), Some(4));
    assert_eq!(t.remove(entries[1]), None);
    assert_eq!(
        (t.find(1), t.find(4), t.find(7)),
        (Some(entries[0]), None, Some(entries[2]))
    );
    assert_eq!(t.insert(10), Ok(entries[1]));
    assert_eq!(t.find(10), Some(entries[1]));
}

#[test]
fn removing_what_is_not_there_changes_nothing() {
    let mut t = XidTable::<2>::new();
    assert_eq!(t.remove(0), None);
    assert_eq!(t.remove(5), None);
    let a = t.insert(u32::MAX).unwrap();
    assert_eq!(t.remove(a + 1), None);
    assert_eq!((t.find(u32::MAX), t.len()), (Some(a), 1));
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u32),
    Remove(usize),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    // XIDs from a small range, so that chains grow long and XIDs repeat.
    let op = prop_oneof![
        (0u32..40).prop_map(Op::Insert),
        (0usize..20).prop_map(Op::Remove)
    ];
    proptest::collection::vec(op, 0..300)
}

proptest! {
    /// Against a list of (index, XID): every insert gets the answer the list says (a free
    /// index, `Present` or `Full`), every removal frees what the list has at that index, and
    /// every XID is found at its index or not at all.
    #[test]
    fn behaves_as_a_list_of_entries(ops in ops()) {
        const N: usize = 16;
        let mut t = XidTable::<N>::new();
        let mut model: Vec<Option<u32>> = vec![None; N];
        for op in ops {
            match op {
                Op::Insert(xid) => match t.insert(xid) {
                    Ok(i) => {
                        prop_assert!(!model.contains(&Some(xid)));
                        prop_assert_eq!(model[i], None);
                        model[i] = Some(xid);
                    }
                    Err(InsertError::Present) => prop_assert!(model.contains(&Some(xid))),
                    Err(InsertError::Full) => prop_assert!(model.iter().all(Option::is_some)),
                },
                Op::Remove(i) => {
                    let want = model.get(i).copied().flatten();
                    prop_assert_eq!(t.remove(i), want);
                    if want.is_some() {
                        model[i] = None;
                    }
                }
            }
            prop_assert_eq!(t.len(), model.iter().flatten().count());
            for xid in 0..40 {
                prop_assert_eq!(t.find(xid), model.iter().position(|&e| e == Some(xid)));
            }
            for (i, e) in model.iter().enumerate() {
                prop_assert_eq!(t.xid(i), *e);
            }
        }
    }
}
