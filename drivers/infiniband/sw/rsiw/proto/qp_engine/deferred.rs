// SPDX-License-Identifier: GPL-2.0

//! Send queue completions held back until the driver has handed a call's FPDUs to TCP.
//!
//! A signalled Send or Write completes once its FPDUs are with TCP, as the C siw completes
//! after `sendmsg`: the consumer may reuse its buffer at once. The FPDUs of one transmit call
//! go to TCP after the call, so their completions wait for the next call, which writes them
//! first. Holding several lets one call (one `sendmsg`) carry several signalled messages: a
//! consumer that signals every Send (a kernel ULP freeing each send buffer on its completion)
//! then gets its queued Sends sent together, as one that signals rarely does.
//!
//! Completions of one queue come in the order of its work requests. While completions wait, a
//! local operation that runs and a work request that fails complete behind them, and a call
//! starts no Read or Atomic (its response may arrive, and complete it, before the next call)
//! but ends instead.

use super::Completion;

/// Completions one call holds back at most. The last entry is kept for a work request that
/// fails after signalled messages in the same call.
pub(super) const DEFERRED_MAX: usize = 8;

/// The completions held back for the next call, in order.
pub(super) struct Deferred {
    entries: [Option<Completion>; DEFERRED_MAX],
    len: usize,
}

impl Deferred {
    pub(super) const fn new() -> Self {
        Self {
            entries: [None; DEFERRED_MAX],
            len: 0,
        }
    }

    /// Whether no completion waits.
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the call must end before it produces another signalled message: only the entry
    /// kept for a failure is left.
    pub(super) fn is_full(&self) -> bool {
        self.len + 1 >= DEFERRED_MAX
    }

    /// Holds `c` back behind those already waiting; gives it back if there is no room.
    pub(super) fn push(&mut self, c: Completion) -> Result<(), Completion> {
        match self.entries.get_mut(self.len) {
            Some(entry) => {
                *entry = Some(c);
                self.len += 1;
                Ok(())
            }
            None => Err(c),
        }
    }

    /// Takes the waiting completions out, in order, to `write`.
    pub(super) fn drain(&mut self, mut write: impl FnMut(Completion)) {
        let len = core::mem::take(&mut self.len);
        for entry in self.entries.iter_mut().take(len) {
            if let Some(c) = entry.take() {
                write(c);
            }
        }
    }
}
