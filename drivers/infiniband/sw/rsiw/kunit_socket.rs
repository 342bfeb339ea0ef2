// SPDX-License-Identifier: GPL-2.0

//! Socket helpers of the KUnit modules that play a peer on a real TCP socket
//! (`rsiw_mpa_interop`, `rsiw_wire`).

use kernel::{
    net::tcp::{MsgFlags, TcpSocket},
    prelude::*,
    sync::Completion,
    time::msecs_to_jiffies,
};

/// Sleeps `ms` milliseconds.
pub(crate) fn sleep_ms(ms: u32) {
    let never = Completion::new();
    kernel::stack_pin_init!(let never = never);
    never.wait_timeout(msecs_to_jiffies(ms));
}

/// Receives what is there (up to `buf.len()`), waiting up to 5 s for the first byte; `Ok(0)`
/// when the peer closed.
pub(crate) fn recv_some(sock: &TcpSocket, buf: &mut [u8]) -> Result<usize> {
    for _ in 0..500 {
        match sock.recv(buf, MsgFlags::DONTWAIT) {
            Err(e) if e == EAGAIN => sleep_ms(10),
            other => return other,
        }
    }
    Err(ETIMEDOUT)
}
