// SPDX-License-Identifier: GPL-2.0

//! The buffers of one connection: those the device sends replies from and receives calls
//! into, the queue of received calls waiting for a server thread, and the credits they grant.
//!
//! Buffers belong to the connection, not to calls: [`INLINE_SIZE`] bytes each, mapped once. A
//! received call stays in its receive buffer until a thread copies it into its request, which
//! posts the buffer again; a reply is copied into a free send buffer, which its Send
//! completion frees again.

use crate::{client::INLINE_SIZE, proto::credits::ReceiveCredits};
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::{
    new_mutex,
    prelude::*,
    rdma::{
        consumer::{client::ProtectionDomain, dma_buffer::DmaBuffer},
        fixed_ring::FixedRing,
    },
    sync::{Arc, Mutex},
};

/// Calls a client may have in flight: the credits we grant (the C server's default).
pub(crate) const CREDITS: u16 = 64;
/// Receives for backchannel replies, on top of the credits.
const BACKCHANNEL_RECVS: usize = 2;
/// Receives to spare, so that the grant holds while threads repost in batches.
const BATCH_RECVS: usize = 8;
/// Receives kept posted.
pub(crate) const RECVS: usize = CREDITS as usize + BACKCHANNEL_RECVS + BATCH_RECVS;
/// Send buffers: a reply's buffer is free again only once its Send completed, which may be
/// after the client sent its next call.
pub(crate) const SENDS: usize = 2 * CREDITS as usize;

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
