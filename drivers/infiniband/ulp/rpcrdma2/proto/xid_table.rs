// SPDX-License-Identifier: GPL-2.0

//! The calls a Requester keeps state for, found by XID.
//!
//! A reply names its call only by XID, and a Requester looks up the call's state for every
//! reply and again when the call ends; it also refuses a second record for an XID it still
//! has. With many calls in flight a scan of every entry on each of these costs in proportion
//! to the table's size, so [`XidTable`] keeps its entries in hash chains: each lookup, insert
//! and removal touches the entries of one chain, which hold one or two XIDs (XIDs of one
//! client are consecutive, and there are as many chains as entries).
//!
//! The table hands out entry indices, which stay put while the entry is in use: the caller
//! keeps its own state in an array of the same size, and may name the entry by index in a
//! request's tag. It holds no more than `N` XIDs, and `N` is at most 65,535.

/// No entry: the end of a chain or of the free list.
const NONE: u16 = u16::MAX;

/// Why [`XidTable::insert`] refused an XID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertError {
    /// The XID has an entry already.
    Present,
    /// Every entry is in use.
    Full,
}

/// Up to `N` XIDs, each in an entry of its own (`0..N`), found in constant time on average.
///
/// # Invariants
///
/// Every index in `0..N` is either in exactly one chain (`heads`, then `next`), under the
/// bucket of its XID, or on the free list (`free`, then `next`); `used` counts the former.
/// `in_use` says which.
#[derive(Debug)]
pub struct XidTable<const N: usize> {
    xids: [u32; N],
    next: [u16; N],
    in_use: [bool; N],
    heads: [u16; N],
    free: u16,
    used: usize,
}

impl<const N: usize> Default for XidTable<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> XidTable<N> {
    /// An empty table. `N` must lie in `1..=65_535` (checked at compile time).
    pub const fn new() -> Self {
        const { assert!(N > 0 && N < NONE as usize) };
        // The free list runs through every entry in order.
        let mut next = [NONE; N];
        let mut i = 0;
        while i + 1 < N {
            next[i] = (i + 1) as u16;
            i += 1;
        }
        Self {
            xids: [0; N],
            next,
            in_use: [false; N],
            heads: [NONE; N],
            free: 0,
            used: 0,
        }
    }

    fn bucket(xid: u32) -> usize {
        xid as usize % N
    }

    /// The entry of `xid`, if it has one.
    pub fn find(&self, xid: u32) -> Option<usize> {
        let mut at = *self.heads.get(Self::bucket(xid))?;
        while at != NONE {
            let i = at as usize;
            if *self.xids.get(i)? == xid {
                return Some(i);
            }
            at = *self.next.get(i)?;
        }
        None
    }

    /// Gives `xid` an entry and returns its index.
    pub fn insert(&mut self, xid: u32) -> Result<usize, InsertError> {
        if self.find(xid).is_some() {
            return Err(InsertError::Present);
        }
        let i = self.free as usize;
        let bucket = Self::bucket(xid);
        let head = *self.heads.get(bucket).ok_or(InsertError::Full)?;
        let (Some(x), Some(next), Some(in_use)) = (
            self.xids.get_mut(i),
            self.next.get_mut(i),
            self.in_use.get_mut(i),
        ) else {
            // `free` is `NONE`: the free list is empty.
            return Err(InsertError::Full);
        };
        self.free = *next;
        *x = xid;
        *next = head;
        *in_use = true;
        if let Some(h) = self.heads.get_mut(bucket) {
            *h = i as u16;
        }
        self.used += 1;
        Ok(i)
    }

    /// The XID of entry `index`, if it is in use.
    pub fn xid(&self, index: usize) -> Option<u32> {
        self.in_use
            .get(index)
            .filter(|&&u| u)
            .and_then(|_| self.xids.get(index).copied())
    }

    /// Frees entry `index`; returns its XID, or `None` if it was not in use.
    pub fn remove(&mut self, index: usize) -> Option<u32> {
        let xid = self.xid(index)?;
        let after = *self.next.get(index)?;
        // Unlink it: whatever points at it, the chain's head or an entry of the chain, now
        // points past it.
        let head = self.heads.get_mut(Self::bucket(xid))?;
        if *head as usize == index {
            *head = after;
        } else {
            let mut at = *head;
            while at != NONE {
                let link = self.next.get_mut(at as usize)?;
                if *link as usize == index {
                    *link = after;
                    break;
                }
                at = *link;
            }
        }
        *self.in_use.get_mut(index)? = false;
        *self.next.get_mut(index)? = self.free;
        self.free = index as u16;
        self.used -= 1;
        Some(xid)
    }

    /// How many entries are in use.
    pub fn len(&self) -> usize {
        self.used
    }

    /// Whether no entry is in use.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }
}
