// SPDX-License-Identifier: GPL-2.0

//! Send requests posted together: one `ib_post_send` for a chain of them.
//!
//! A device sees a chain whole: the C siw and rsiw queue every request of it and then start
//! their transmitter once, which sends the lot back to back (an RPC reply's RDMA Writes and its
//! Send in as few TCP segments as they fit). Posted one by one, the transmitter may already
//! run for the first request when the next is queued, and each goes out on its own.
//!
//! A [`SendChain`] collects [`Prepared`] requests (each checked and holding its slot as it is
//! added) in an array of its own, links them only when it posts them (the links and `sg_list`
//! point into that array, which does not move meanwhile), and posts when it is full, when asked
//! ([`SendChain::post`]) and when dropped. The device may refuse a request of a chain; the
//! requests before it are posted and those from it on are not. Each request not posted is
//! handed back: its slot is released and the chain's `unposted` callback gets its tag, so that
//! the consumer treats it as it treats a failed completion.
//!
//! A registration added with [`SendChain::add_unsignaled`] rides on the next signaled request
//! of the chain, whose completion releases its slot (see [`super`]); the last request of each
//! post is signaled whatever it was added as.

use super::{
    send_wr::{Prepared, SendWr},
    KernelQp,
};
use crate::{bindings, error::to_result, prelude::*};
use core::ptr;

/// Requests a chain holds before it posts them.
pub const CHAIN_LEN: usize = 8;

/// Send requests of one [`KernelQp`] posted together (see the module documentation).
///
/// `unposted` is told the tag of each request that was added and then not posted.
pub struct SendChain<'q> {
    qp: &'q KernelQp,
    entries: [Option<Prepared>; CHAIN_LEN],
    len: usize,
    unposted: &'q dyn Fn(u64),
    /// What the device answered when it refused part of a chain: nothing more is posted.
    refused: Option<Error>,
    /// Whether a request added since the last post is unsignaled.
    unsignaled: bool,
}

impl KernelQp {
    /// A chain of send requests on this queue pair; `unposted` is told the tag of each request
    /// added to it and not posted.
    pub fn send_chain<'q>(&'q self, unposted: &'q dyn Fn(u64)) -> SendChain<'q> {
        SendChain {
            qp: self,
            entries: [const { None }; CHAIN_LEN],
            len: 0,
            unposted,
            refused: None,
            unsignaled: false,
        }
    }

    /// Posts `wr` on the send queue on its own; its completion carries `tag`.
    pub fn post_send(&self, wr: &SendWr<'_>, tag: u64) -> Result {
        let ignore = |_| {};
        let mut chain = self.send_chain(&ignore);
        chain.add(wr, tag)?;
        chain.post()
    }
}

impl SendChain<'_> {
    /// Adds `wr`, its completion carrying `tag`, posting the requests before it first if the
    /// chain is full. An error means `wr` was not added (and `unposted` is not told of it):
    /// the request's own (`EAGAIN` for a full send queue, `EINVAL` for memory it may not use),
    /// or the device's refusal of the requests posted before it or of an earlier part of the
    /// chain.
    pub fn add(&mut self, wr: &SendWr<'_>, tag: u64) -> Result {
        if let Some(e) = self.refused {
            return Err(e);
        }
        if self.len == CHAIN_LEN {
            self.post()?;
        }
        let prepared = self.qp.prepare(wr, tag)?;
        match self.entries.get_mut(self.len) {
            Some(entry) => {
                *entry = Some(prepared);
                self.len += 1;
                Ok(())
            }
            None => {
                // Cannot be: the chain was posted above when full.
                self.qp.unpost(prepared);
                Err(EINVAL)
            }
        }
    }

    /// Adds the registration `wr` (`RegMr` or `RegPages`) unsignaled: it completes, with
    /// `tag`, only if it fails or is flushed, and its slot is released with the completion of
    /// the next signaled request of the chain. `EINVAL` for any other request. Otherwise as
    /// [`Self::add`].
    pub fn add_unsignaled(&mut self, wr: &SendWr<'_>, tag: u64) -> Result {
        if !matches!(wr, SendWr::RegMr { .. } | SendWr::RegPages { .. }) {
            return Err(EINVAL);
        }
        self.add(wr, tag)?;
        let last = self
            .len
            .checked_sub(1)
            .and_then(|i| self.entries.get_mut(i));
        if let Some(Some(prepared)) = last {
            prepared.set_signaled(false);
            self.unsignaled = true;
        }
        Ok(())
    }

    /// Lets each unsignaled request of `entries` ride on the next signaled one; the last one
    /// is signaled. A request that cannot ride is signaled instead.
    fn link_riders(qp: &KernelQp, entries: &mut [Option<Prepared>]) {
        if let Some(Some(last)) = entries.last_mut() {
            last.set_signaled(true);
        }
        let mut signaled = None;
        for entry in entries.iter_mut().rev().flatten() {
            if entry.is_signaled() {
                signaled = Some(entry.slot);
                continue;
            }
            let rides = match signaled {
                Some(s) => qp.shared.ride(entry.slot, s).is_ok(),
                None => false,
            };
            if !rides {
                entry.set_signaled(true);
            }
        }
    }

    /// Posts the requests added since the last post. An error is the device's: the requests
    /// it did not take were handed back (each tag to `unposted`), and nothing more is posted
    /// through this chain.
    pub fn post(&mut self) -> Result {
        let len = core::mem::take(&mut self.len);
        let Some(entries) = self.entries.get_mut(..len) else {
            return Err(EINVAL);
        };
        if entries.is_empty() {
            return self.refused.map_or(Ok(()), Err);
        }
        if self.unsignaled {
            self.unsignaled = false;
            Self::link_riders(self.qp, entries);
        }
        // Linked last to first: each request points at the next, and its scatter list at its
        // own entry.
        let mut next: *const bindings::ib_send_wr = ptr::null();
        for prepared in entries.iter_mut().rev().flatten() {
            let Prepared { storage, sge, .. } = prepared;
            let head = storage.head();
            head.next = next.cast_mut();
            if head.num_sge > 0 {
                head.sg_list = sge;
            }
            next = head;
        }
        let mut bad = ptr::null();
        // SAFETY: `qp` is valid (`KernelQp`'s invariant). Every request of the chain is an
        // `ib_send_wr` at the start of the structure its opcode needs, with a completion entry
        // of its slot, linked to the next one in `entries`, which neither moves nor changes
        // during the call, as the scatter lists it points to; what the requests use is held
        // by their slots until they complete.
        let ret = unsafe { bindings::ib_post_send(self.qp.qp.as_ptr(), next, &mut bad) };
        // The device took the requests before `bad`, and none from it on. A refusal naming no
        // request of the chain leaves every slot claimed: posted or not, nothing is released
        // that the device might use.
        let refused_at = if ret == 0 {
            None
        } else {
            entries.iter_mut().position(|entry| {
                entry
                    .as_mut()
                    .is_some_and(|p| ptr::eq(p.storage.head(), bad))
            })
        };
        for (index, entry) in entries.iter_mut().enumerate() {
            let Some(prepared) = entry.take() else {
                continue;
            };
            if refused_at.is_some_and(|at| index >= at) {
                let tag = prepared.tag;
                self.qp.unpost(prepared);
                (self.unposted)(tag);
            }
        }
        let result = to_result(ret);
        if let Err(e) = result {
            self.refused = Some(e);
        }
        result
    }
}

impl Drop for SendChain<'_> {
    fn drop(&mut self) {
        // What was added is posted: its tags were handed over, and the consumer waits for
        // their completions.
        let _ = self.post();
    }
}
