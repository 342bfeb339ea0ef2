// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of `kernel::net::tcp`, the kernel TCP socket abstraction.
//!
//! It is a module rather than a built-in suite because it needs the loopback device up, which
//! happens in user space after boot. Each case talks to itself over 127.0.0.1 or ::1, and reads
//! through the same callback path a protocol driver uses: data arrives in `data_ready` (softirq
//! context) and is consumed from the socket's receive queue with `RxQueue::read`.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use kernel::{
    kunit::suite::Test,
    kunit_expect, kunit_expect_eq,
    net::tcp::{MsgFlags, RxQueue, Shutdown, TcpCallbacks, TcpSocket, TcpState},
    prelude::*,
    sync::{new_condvar, new_spinlock_bh, Arc, CondVar, CondVarTimeoutResult, SpinLockBh},
    time::msecs_to_jiffies,
};

module! {
    type: TcpKunit,
    name: "rust_net_tcp_kunit",
    author: "rsiw project",
    description: "KUnit suite of the Rust kernel TCP socket abstraction",
    license: "GPL",
}

struct TcpKunit;

impl kernel::Module for TcpKunit {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(TcpKunit)
    }
}

const CAPACITY: usize = 64 * 1024;

/// What the receiving callbacks collected.
struct Received {
    /// `CAPACITY` bytes, allocated up front (a softirq must not allocate much).
    data: KVec<u8>,
    len: usize,
    /// `data_ready` calls seen.
    calls: usize,
    /// The last state `state_change` reported.
    state: Option<TcpState>,
    /// A read ran past the buffer: the case fails.
    overflow: bool,
    /// The in-place pieces of a slice differed from its copy (or did not cover it).
    pieces_differ: bool,
}

/// A `TcpCallbacks` that copies everything received into a buffer and wakes the test.
#[pin_data]
struct Collector {
    #[pin]
    rx: SpinLockBh<Received>,
    #[pin]
    changed: CondVar,
}

impl Collector {
    fn new() -> Result<Arc<Self>> {
        let data = KVec::from_elem(0u8, CAPACITY, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                rx <- new_spinlock_bh!(Received {
                    data,
                    len: 0,
                    calls: 0,
                    state: None,
                    overflow: false,
                    pieces_differ: false,
                }),
                changed <- new_condvar!(),
            }),
            GFP_KERNEL,
        )
    }

    /// Waits until `done` holds for what was received (or 5 s pass); returns whether it did.
    fn wait_for(&self, done: impl Fn(&Received) -> bool) -> bool {
        let mut guard = self.rx.lock();
        while !done(&guard) {
            if let CondVarTimeoutResult::Timeout = self
                .changed
                .wait_interruptible_timeout(&mut guard, msecs_to_jiffies(5000))
            {
                return done(&guard);
            }
        }
        true
    }
}

impl TcpCallbacks for Collector {
    fn data_ready(&self, rx: &mut RxQueue<'_>) {
        let mut guard = self.rx.lock();
        guard.calls += 1;
        rx.read(&mut |slice| {
            let start = guard.len;
            let Some(dst) = guard.data.get_mut(start..start + slice.len()) else {
                guard.overflow = true;
                return 0;
            };
            if slice.copy_to(0, dst).is_err() {
                guard.overflow = true;
                return 0;
            }
            // The pieces handed over in place are the same bytes as the copy (made by
            // `skb_copy_bits`), in order, and all of them.
            let mut seen = 0;
            let mut same = true;
            slice.for_each_batch(|pieces| {
                for &piece in pieces {
                    same &= dst.get(seen..seen + piece.len()) == Some(piece);
                    seen += piece.len();
                }
                same
            });
            guard.pieces_differ |= !same || seen != slice.len();
            guard.len += slice.len();
            slice.len()
        });
        drop(guard);
        self.changed.notify_all();
    }

    fn state_change(&self, state: TcpState) {
        self.rx.lock().state = Some(state);
        self.changed.notify_all();
    }
}

/// A connected pair over `ip`: (client, accepted server side).
fn connected_pair(ip: IpAddr) -> Result<(TcpSocket, TcpSocket)> {
    let any = SocketAddr::new(ip, 0);
    let listener = TcpSocket::new(&any)?;
    listener.set_reuseaddr();
    listener.bind(&any)?;
    listener.listen(4)?;
    let addr = listener.local_addr()?;
    let client = TcpSocket::new(&addr)?;
    client.connect(&addr, false)?;
    let server = listener.accept(false)?;
    Ok((client, server))
}

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 8)) as u8
}

fn stream_reaches_callbacks(test: &mut Test, ip: IpAddr) -> Result {
    let (client, server) = connected_pair(ip)?;
    kunit_expect_eq!(test, client.state(), TcpState::Established);
    kunit_expect_eq!(test, client.peer_addr()?, server.local_addr()?);
    kunit_expect_eq!(test, server.peer_addr()?, client.local_addr()?);
    client.set_nodelay();
    let collector = Collector::new()?;
    server.install_callbacks(collector.clone())?;
    kunit_expect_eq!(
        test,
        server.install_callbacks(collector.clone()),
        Err(EBUSY)
    );

    // 40000 bytes in uneven pieces, some sent together with MSG_MORE.
    let mut msg = KVec::with_capacity(40000, GFP_KERNEL)?;
    for i in 0..40000 {
        msg.push(pattern(i), GFP_KERNEL)?;
    }
    let (a, rest) = msg.split_at(1);
    let (b, rest) = rest.split_at(4095);
    let (c, d) = rest.split_at(20000);
    kunit_expect_eq!(test, client.send(a, MsgFlags::MORE)?, 1);
    kunit_expect_eq!(test, client.send_vectored(&[b, c], MsgFlags::NONE)?, 24095);
    kunit_expect_eq!(test, client.send(d, MsgFlags::NONE)?, d.len());

    let total = msg.len();
    let arrived = collector.wait_for(|r| r.len >= total || r.overflow);
    kunit_expect!(test, arrived, "timed out waiting for {} bytes", total);
    // Read out under the lock, checked after it: a failed check allocates its message.
    let (overflow, pieces_differ, len, same, calls) = {
        let r = collector.rx.lock();
        let same = r.data.get(..total) == Some(&msg[..]);
        (r.overflow, r.pieces_differ, r.len, same, r.calls)
    };
    kunit_expect!(test, !overflow);
    kunit_expect!(test, !pieces_differ, "in-place pieces differ from the copy");
    kunit_expect_eq!(test, len, total);
    kunit_expect!(test, same, "received bytes differ");
    kunit_expect!(test, calls >= 1);

    // The peer closing shows up as a state change.
    client.shutdown(Shutdown::Write)?;
    kunit_expect!(
        test,
        collector.wait_for(|r| r.state == Some(TcpState::CloseWait)),
        "no CLOSE_WAIT after the peer's FIN"
    );

    // Removing hands the handler back, once.
    kunit_expect!(test, server.remove_callbacks().is_some());
    kunit_expect!(test, server.remove_callbacks().is_none());
    Ok(())
}

fn ipv4_stream_reaches_callbacks(test: &mut Test) -> Result {
    stream_reaches_callbacks(test, IpAddr::V4(Ipv4Addr::LOCALHOST))
}

fn ipv6_stream_reaches_callbacks(test: &mut Test) -> Result {
    stream_reaches_callbacks(test, IpAddr::V6(Ipv6Addr::LOCALHOST))
}

fn blocking_recv_without_callbacks(test: &mut Test) -> Result {
    let (client, server) = connected_pair(IpAddr::V4(Ipv4Addr::LOCALHOST))?;
    client.send(b"hello, rsiw", MsgFlags::NONE)?;
    let mut buf = [0u8; 11];
    kunit_expect_eq!(test, server.recv(&mut buf, MsgFlags::WAITALL)?, 11);
    kunit_expect_eq!(test, &buf, b"hello, rsiw");
    // Nothing more queued: a non-blocking receive says so.
    kunit_expect_eq!(test, server.recv(&mut buf, MsgFlags::DONTWAIT), Err(EAGAIN));
    client.shutdown(Shutdown::Both)?;
    kunit_expect_eq!(test, server.recv(&mut buf, MsgFlags::NONE)?, 0);
    Ok(())
}

fn connection_errors(test: &mut Test) -> Result {
    let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
    let listener = TcpSocket::new(&any)?;
    listener.bind(&any)?;
    listener.listen(1)?;
    let addr = listener.local_addr()?;
    // Nothing pending yet.
    kunit_expect_eq!(test, listener.accept(true).err(), Some(EAGAIN));
    // The port is taken.
    let second = TcpSocket::new(&addr)?;
    kunit_expect_eq!(test, second.bind(&addr), Err(EADDRINUSE));
    // Nobody listens once the listener is gone.
    drop(listener);
    let client = TcpSocket::new(&addr)?;
    kunit_expect_eq!(test, client.connect(&addr, false), Err(ECONNREFUSED));
    kunit_expect_eq!(test, client.peer_addr().err(), Some(ENOTCONN));
    // Too many buffers for one call.
    let bufs = [&b"x"[..]; kernel::net::tcp::MAX_SEND_BUFFERS + 1];
    kunit_expect_eq!(
        test,
        client.send_vectored(&bufs, MsgFlags::NONE),
        Err(EINVAL)
    );
    Ok(())
}

fn listener_callbacks_see_connections(test: &mut Test) -> Result {
    let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
    let listener = TcpSocket::new(&any)?;
    listener.bind(&any)?;
    listener.listen(4)?;
    let addr = listener.local_addr()?;
    let collector = Collector::new()?;
    listener.install_callbacks(collector.clone())?;
    let client = TcpSocket::new(&addr)?;
    client.connect(&addr, false)?;
    kunit_expect!(
        test,
        collector.wait_for(|r| r.calls >= 1),
        "the listener's data_ready did not run for a new connection"
    );
    // The accepted socket does not inherit the listener's handler: it can get its own.
    let server = listener.accept(true)?;
    kunit_expect!(test, server.remove_callbacks().is_none());
    let own = Collector::new()?;
    server.install_callbacks(own.clone())?;
    client.send(b"ping", MsgFlags::NONE)?;
    kunit_expect!(
        test,
        own.wait_for(|r| r.len == 4),
        "accepted socket got no data"
    );
    kunit_expect_eq!(test, collector.rx.lock().len, 0);
    Ok(())
}

fn nonblocking_connect_reports_established(test: &mut Test) -> Result {
    let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
    let listener = TcpSocket::new(&any)?;
    listener.bind(&any)?;
    listener.listen(1)?;
    let addr = listener.local_addr()?;
    let client = TcpSocket::new(&addr)?;
    let collector = Collector::new()?;
    client.install_callbacks(collector.clone())?;
    // Loopback may finish the handshake before connect returns; both are fine.
    let started = client.connect(&addr, true);
    kunit_expect!(
        test,
        started.is_ok() || started == Err(EINPROGRESS),
        "non-blocking connect: {:?}",
        started
    );
    let up = collector.wait_for(|r| r.state == Some(TcpState::Established))
        || client.state() == TcpState::Established;
    kunit_expect!(test, up, "no ESTABLISHED state change");
    let server = listener.accept(false)?;
    kunit_expect_eq!(test, server.peer_addr()?, client.local_addr()?);
    Ok(())
}

kernel::kunit_suite!(
    rust_net_tcp,
    [
        ipv4_stream_reaches_callbacks,
        ipv6_stream_reaches_callbacks,
        blocking_recv_without_callbacks,
        connection_errors,
        listener_callbacks_see_connections,
        nonblocking_connect_reports_established
    ]
);
