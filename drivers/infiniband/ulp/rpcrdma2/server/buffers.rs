// SPDX-License-Identifier: GPL-2.0

//! The buffers of one connection: those the device sends replies from and receives calls
//! into, the queue of received calls waiting for a server thread, and the credits they grant.
//!
//! Buffers belong to the connection, not to calls: [`INLINE_SIZE`] bytes each, mapped once. A
//! received call stays in its receive buffer until a thread copies it into its request, which
//! posts the buffer again; a reply is copied into a free send buffer, which its Send
//! completion frees again.
//!
//! A continued reply (Version 2, draft section 4.4.2) takes several Sends, which must reach the
//! client back to back (it concatenates the payloads of consecutive messages): every Send is
//! posted under one lock ([`Buffers::posting`]), which a continued reply holds while it posts
//! all of its Sends. Its Sends use more of the client's receives than its one call granted: a
//! connection has at most [`MAX_SENT_FRAGMENTS`] Sends of continued replies in flight
//! ([`Buffers::begin_continued`]: one reply of that many, or two of two, ...), so at most
//! [`MAX_SENT_FRAGMENTS`] - 1 more than their calls granted, and the client posts that many
//! receives more than the calls it has in flight to take them (see the client's endpoint).

use super::backchannel::BC_REQUESTS;
use crate::{
    client::INLINE_SIZE,
    proto::{
        continuation::{MAX_REVERSE_FRAGMENTS, MAX_SENT_FRAGMENTS},
        credits::ReceiveCredits,
    },
};
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    rdma::{
        consumer::{client::ProtectionDomain, dma_buffer::DmaBuffer},
        fixed_ring::FixedRing,
    },
    sync::{Arc, CondVar, Mutex},
    time::msecs_to_jiffies,
};

/// Calls a client may have in flight: the credits we grant (the C server's default).
pub(crate) const CREDITS: u16 = 64;
/// Receives for backchannel replies, on top of the credits: one callback's continued reply
/// of the most Sends we let the client send for each callback in flight.
const BACKCHANNEL_RECVS: usize = BC_REQUESTS as usize * MAX_REVERSE_FRAGMENTS;
/// Receives to spare, so that the grant holds while threads repost in batches.
const BATCH_RECVS: usize = 8;
/// Receives kept posted.
pub(crate) const RECVS: usize = CREDITS as usize + BACKCHANNEL_RECVS + BATCH_RECVS;
/// Send buffers: a reply's buffer is free again only once its Send completed, which may be
/// after the client sent its next call.
pub(crate) const SENDS: usize = 2 * CREDITS as usize;

/// The tag bit of the Sends of a continued reply: the send buffer's index is below it, and
/// the ops' tag bit ([`OP_TAG`](super::rdma::OP_TAG)) is clear.
pub(crate) const CONTINUED_TAG: u64 = 1 << 33;
/// How long a continued reply waits for the one before it to be sent, in seconds.
const CONTINUED_TIMEOUT_S: u32 = 60;

/// A message in receive buffer `index`, `len` bytes long.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Received {
    pub(crate) index: usize,
    pub(crate) len: usize,
}

/// The buffers of one connection, shared with its [`Receiver`](super::Receiver).
#[pin_data]
pub(crate) struct Buffers {
    pub(crate) sends: KVec<Arc<DmaBuffer>>,
    pub(crate) recvs: KVec<Arc<DmaBuffer>>,
    /// Indices of send buffers no Send uses.
    #[pin]
    free_sends: Mutex<FixedRing<usize>>,
    /// How many there are, read without the lock ([`Buffers::has_send`]).
    free_count: AtomicUsize,
    /// Received messages no thread took yet, in arrival order.
    #[pin]
    inbox: Mutex<FixedRing<Received>>,
    /// The receives posted and the grant advertised.
    #[pin]
    credits: Mutex<ReceiveCredits>,
    /// Held while a Send, or all the Sends of a continued reply, are posted.
    #[pin]
    pub(crate) posting: Mutex<()>,
    /// Sends of continued replies in flight that did not complete yet.
    #[pin]
    continued: Mutex<usize>,
    /// Signalled when Sends of continued replies in flight completed.
    #[pin]
    continued_done: CondVar,
}

impl Buffers {
    /// The buffers of a new connection in `pd`; no receive is posted yet.
    pub(crate) fn new(pd: &Arc<ProtectionDomain>) -> Result<Arc<Self>> {
        let mut sends = KVec::with_capacity(SENDS, GFP_KERNEL)?;
        let mut free = FixedRing::new(SENDS, GFP_KERNEL)?;
        for index in 0..SENDS {
            sends.push(DmaBuffer::new(pd, INLINE_SIZE as usize)?, GFP_KERNEL)?;
            // Cannot be full: it holds `SENDS` indices.
            let _ = free.push(index);
        }
        let mut recvs = KVec::with_capacity(RECVS, GFP_KERNEL)?;
        for _ in 0..RECVS {
            recvs.push(DmaBuffer::new(pd, INLINE_SIZE as usize)?, GFP_KERNEL)?;
        }
        let inbox = FixedRing::new(RECVS, GFP_KERNEL)?;
        Arc::pin_init(
            try_pin_init!(Self {
                sends,
                recvs,
                free_sends <- new_mutex!(free),
                free_count: AtomicUsize::new(SENDS),
                inbox <- new_mutex!(inbox),
                credits <- new_mutex!(ReceiveCredits::new(CREDITS)),
                posting <- new_mutex!(()),
                continued <- new_mutex!(0),
                continued_done <- new_condvar!(),
            }? Error),
            GFP_KERNEL,
        )
    }

    /// A free send buffer's index, if there is one.
    pub(crate) fn take_send(&self) -> Option<usize> {
        let mut free = self.free_sends.lock();
        let index = free.pop();
        self.free_count.store(free.len(), Ordering::Relaxed);
        index
    }

    /// Whether a send buffer is free; takes no lock (the RPC server asks with its own held).
    pub(crate) fn has_send(&self) -> bool {
        self.free_count.load(Ordering::Relaxed) > 0
    }

    /// The Send that used send buffer `index` completed (or was never posted).
    pub(crate) fn send_done(&self, index: usize) {
        if index < self.sends.len() {
            let mut free = self.free_sends.lock();
            // Cannot be full: each index is in the ring or in use, never both.
            let _ = free.push(index);
            self.free_count.store(free.len(), Ordering::Relaxed);
        }
    }

    /// The Send tagged `tag` completed (or failed, or was flushed): its buffer is free, and if
    /// it was one of a continued reply, that is one Send nearer done.
    pub(crate) fn send_completed(&self, tag: u64) {
        self.send_done((tag & u64::from(u32::MAX)) as usize);
        if tag & CONTINUED_TAG != 0 {
            self.continued_sent(1);
        }
    }

    /// Counts a continued reply of `sends` Sends (at most [`MAX_SENT_FRAGMENTS`]) in flight,
    /// waiting until those in flight, if any, leave room for it: the client has receives for
    /// [`MAX_SENT_FRAGMENTS`] - 1 Sends more than their calls. `ETIMEDOUT` if none came in
    /// time (their Sends neither complete nor flush: the connection is stuck).
    pub(crate) fn begin_continued(&self, sends: usize) -> Result {
        if sends > MAX_SENT_FRAGMENTS {
            return Err(EMSGSIZE);
        }
        let mut in_flight = self.continued.lock();
        let mut waits = 0;
        while *in_flight + sends > MAX_SENT_FRAGMENTS {
            if waits >= CONTINUED_TIMEOUT_S {
                return Err(ETIMEDOUT);
            }
            waits += 1;
            let _ = self
                .continued_done
                .wait_interruptible_timeout(&mut in_flight, msecs_to_jiffies(1000));
        }
        *in_flight += sends;
        Ok(())
    }

    /// `n` Sends of continued replies in flight completed, or will never be posted.
    pub(crate) fn continued_sent(&self, n: usize) {
        let mut in_flight = self.continued.lock();
        *in_flight = in_flight.saturating_sub(n);
        if n > 0 {
            self.continued_done.notify_all();
        }
    }

    /// Queues a received message; `mark` runs under the queue's lock, so that a thread that
    /// finds the queue empty ([`Buffers::next`]) cannot miss it.
    pub(crate) fn arrived(&self, message: Received, mark: impl FnOnce()) {
        let _ = self.credits.lock().on_received();
        let mut inbox = self.inbox.lock();
        // Cannot be full: it has room for every receive.
        if inbox.push(message).is_ok() {
            mark();
        }
    }

    /// The oldest received message; `empty` runs under the queue's lock if there is none.
    pub(crate) fn next(&self, empty: impl FnOnce()) -> Option<Received> {
        let mut inbox = self.inbox.lock();
        let next = inbox.pop();
        if next.is_none() {
            empty();
        }
        next
    }

    /// `n` receives were posted.
    pub(crate) fn posted(&self, n: u32) {
        self.credits.lock().on_posted(n);
    }

    /// The credits to grant in a header going out now.
    pub(crate) fn grant(&self) -> u32 {
        u32::from(self.credits.lock().advertise())
    }
}
