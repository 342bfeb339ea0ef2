// SPDX-License-Identifier: GPL-2.0

//! Receive: the socket's callbacks of a connected QP. `data_ready` hands the socket buffers'
//! bytes to the engine in place, a batch of pieces at a time; `write_space` resumes a
//! transmission that waited for room; `state_change` ends the connection when the peer closed.

use super::*;

impl TcpCallbacks for Qp {
    fn data_ready(&self, rx: &mut RxQueue<'_>) {
        let mut wants_tx = false;
        let mut failed = false;
        rx.read(&mut |slice| {
            // The QP is locked for one socket buffer at a time, not for the whole walk: TCP's
            // work after the last one (freeing it, acknowledging) then does not hold up a
            // transmission that the completion just delivered set off.
            self.with_engine(None, |engine, ctx, _| {
                // The engine takes the socket buffer's bytes in place: payload is copied
                // once, straight into the consumer's memory.
                if !failed {
                    slice.for_each_batch(|pieces| {
                        failed = engine.receive_pieces(Pieces::new(pieces), ctx).is_err();
                        !failed
                    });
                }
                wants_tx |= engine.wants_transmit();
                let sink = self.sink(ctx.queues);
                engine.take_rx_stats(|s, n| sink.data(s, n));
                // Bytes after a failure are dropped: the stream is over.
                slice.len()
            })
            // Without an engine (the QP left RTS) the bytes stay queued.
            .unwrap_or(0)
        });
        if failed {
            self.flags.fetch_or(flag::TERMINATED, Ordering::Relaxed);
        }
        if wants_tx || failed {
            self.kick();
        }
    }

    fn write_space(&self) {
        if self.tx_wake.blocked.swap(false, Ordering::SeqCst) {
            self.kick();
        }
    }

    fn state_change(&self, state: TcpState) {
        if matches!(
            state,
            TcpState::Close | TcpState::CloseWait | TcpState::LastAck | TcpState::TimeWait
        ) {
            self.flags.fetch_or(flag::PEER_CLOSED, Ordering::Relaxed);
            self.kick();
        }
    }
}
