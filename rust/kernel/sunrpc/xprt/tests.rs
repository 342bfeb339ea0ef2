// SPDX-License-Identifier: GPL-2.0

//! KUnit tests of client transports: an RPC client created with `rpc_create` pings a
//! transport that answers its calls itself from a work item, through the transport's handle,
//! which reaches nothing once the transport is destroyed; a client fails over a transport
//! whose connects are refused; and a call a transport sends again (`Xprt::retry_call`) and
//! then fails (`Xprt::fail_call`) ends with the failure's error, never decoding a reply.

use super::{Config, Connect, Rqst, Timeout, Transport, Xprt};
use crate::{
    bindings, c_str,
    kunit::suite::Test,
    kunit_expect, kunit_expect_eq,
    net::namespace::Namespace,
    prelude::*,
    str::CStr,
    sunrpc::xprt_class::{ClassSlot, CreateArgs, Registration, TransportClass, TransportPtr},
    workqueue,
};
use core::{
    cell::UnsafeCell,
    ptr::{addr_of_mut, null},
    sync::atomic::{AtomicBool, AtomicUsize, Ordering},
};

// SAFETY: These tests are built into vmlinux, whose `THIS_MODULE` is null.
static VMLINUX: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };

/// Calls the loopback transports answered.
static ANSWERED: AtomicUsize = AtomicUsize::new(0);
/// Whether the last loopback transport was set up in its client's namespace.
static IN_CLIENT_NET: AtomicBool = AtomicBool::new(false);
/// Test transports dropped (destroyed).
static DESTROYED: AtomicUsize = AtomicUsize::new(0);
/// Whether the late context of a loopback transport was started (one per test).
static LATE_STARTED: AtomicBool = AtomicBool::new(false);
/// Lets the late context try its handle.
static LATE_GO: AtomicBool = AtomicBool::new(false);
/// What the late context found: 0 not yet, 1 nothing, 2 the transport.
static LATE_FOUND: AtomicUsize = AtomicUsize::new(0);
/// Calls sent over the retrying transports.
static RETRY_SENDS: AtomicUsize = AtomicUsize::new(0);

/// A C struct the RPC client reads and updates (statistics, call counts), in a static.
#[repr(transparent)]
struct CStatic<T>(UnsafeCell<T>);

// SAFETY: Only the RPC client uses these, under its own rules (counters it updates racily
// by design); Rust code only takes their addresses.
unsafe impl<T> Sync for CStatic<T> {}

impl<T> CStatic<T> {
    const fn get(&self) -> *mut T {
        self.0.get()
    }
}

static COUNTS: CStatic<[u32; 1]> = CStatic(UnsafeCell::new([0]));

static PROCS: CStatic<[bindings::rpc_procinfo; 1]> = CStatic(UnsafeCell::new({
    // SAFETY: All zeroes is a valid `rpc_procinfo` (integers, null functions and name).
    let mut p: bindings::rpc_procinfo = unsafe { core::mem::zeroed() };
    p.p_name = c_str!("NULL").as_char_ptr();
    [p]
}));

static VERSION1: CStatic<bindings::rpc_version> = CStatic(UnsafeCell::new(bindings::rpc_version {
    number: 1,
    nrprocs: 1,
    procs: PROCS.get().cast_const().cast(),
    counts: COUNTS.get().cast(),
}));

static VERSIONS: CStatic<[*const bindings::rpc_version; 2]> =
    CStatic(UnsafeCell::new([null(), VERSION1.get().cast_const()]));

static STATS: CStatic<bindings::rpc_stat> = CStatic(UnsafeCell::new({
    // SAFETY: All zeroes is a valid `rpc_stat` (counters and a pointer).
    let mut s: bindings::rpc_stat = unsafe { core::mem::zeroed() };
    s.program = PROGRAM.get().cast_const();
    s
}));

static PROGRAM: CStatic<bindings::rpc_program> = CStatic(UnsafeCell::new(bindings::rpc_program {
    name: c_str!("rust-kunit").as_char_ptr(),
    number: 0x7352_0000,
    nrvers: 2,
    version: VERSIONS.get().cast(),
    stats: STATS.get(),
    pipe_dir_name: null(),
}));

fn config() -> Config {
    // `HZ` fits any `unsigned long`.
    let hz = bindings::HZ as crate::ffi::c_ulong;
    Config {
        timeout: Timeout {
            initval: 5 * hz,
            maxval: 5 * hz,
            increment: 0,
            retries: 0,
            exponential: false,
        },
        connect_timeout: 5 * hz,
        max_reconnect_timeout: 5 * hz,
        bind_timeout: 5 * hz,
        reestablish_timeout: hz,
        idle_timeout: 0,
        max_payload: 4096,
        prealloc_slots: 2,
        max_slots: 4,
        prot: bindings::IPPROTO_TCP as i32,
        proto_name: c_str!("rust-kunit"),
    }
}

/// The reply to every call: XID, REPLY, MSG_ACCEPTED, an AUTH_NONE verifier, SUCCESS.
fn answer(xprt: &Xprt<Loopback>, xid: u32) {
    let mut reply = [0u8; 24];
    for (w, v) in reply.chunks_exact_mut(4).zip([xid, 1, 0, 0, 0, 0]) {
        w.copy_from_slice(&v.to_be_bytes());
    }
    let _ = xprt.complete_reply(xid, |buf| {
        if buf.write(&reply) != reply.len() {
            return Err(EMSGSIZE);
        }
        ANSWERED.fetch_add(1, Ordering::SeqCst);
        Ok(())
    });
}

/// A transport that connects at once and answers every call itself.
struct Loopback;

static LOOPBACK: ClassSlot = ClassSlot::new();

impl TransportClass for Loopback {
    const NAME: &'static CStr = c_str!("rust kunit loopback");
    const IDENT: i32 = 0x7352_0002;
    const NETIDS: &'static [&'static CStr] = &[c_str!("rust-kunit-lo")];
    const SLOT: &'static ClassSlot = &LOOPBACK;

    fn setup(args: &CreateArgs<'_>) -> Result<TransportPtr> {
        // The clients of the tests are created in the initial namespace.
        let initial = Namespace::initial().as_raw();
        IN_CLIENT_NET.store(args.net().as_raw() == initial, Ordering::SeqCst);
        Xprt::<Loopback>::create(args, &config(), Loopback)
    }
}

#[vtable]
impl Transport for Loopback {
    type Class = Loopback;

    fn connect(_xprt: &Xprt<Self>, connect: Connect<Self>) {
        connect.complete(Ok(()));
    }

    fn close(_xprt: &Xprt<Self>) {}

    fn send_request(xprt: &Xprt<Self>, rqst: &Rqst<'_>) -> Result {
        let xid = rqst.xid();
        let handle = xprt.handle();
        workqueue::system()
            .try_spawn(GFP_NOWAIT, move || {
                handle.with(|xprt| answer(xprt, xid));
            })
            .map_err(|_| ENOBUFS)?;
        // A context that outlives the transport: it tries its handle once the test says so.
        if !LATE_STARTED.swap(true, Ordering::SeqCst) {
            let late = xprt.handle();
            let started = workqueue::system().try_spawn(GFP_NOWAIT, move || {
                for _ in 0..500 {
                    if LATE_GO.load(Ordering::SeqCst) {
                        break;
                    }
                    // SAFETY: Sleeping is allowed in a work item.
                    unsafe { bindings::msleep(10) };
                }
                let found = late.with(|_| ()).is_some();
                LATE_FOUND.store(if found { 2 } else { 1 }, Ordering::SeqCst);
            });
            if started.is_err() {
                LATE_FOUND.store(3, Ordering::SeqCst);
            }
        }
        Ok(())
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        DESTROYED.fetch_add(1, Ordering::SeqCst);
    }
}

/// A transport whose server refuses every connection.
struct Refused;

static REFUSED: ClassSlot = ClassSlot::new();

impl TransportClass for Refused {
    const NAME: &'static CStr = c_str!("rust kunit refused");
    const IDENT: i32 = 0x7352_0003;
    const NETIDS: &'static [&'static CStr] = &[c_str!("rust-kunit-refused")];
    const SLOT: &'static ClassSlot = &REFUSED;

    fn setup(args: &CreateArgs<'_>) -> Result<TransportPtr> {
        Xprt::<Refused>::create(args, &config(), Refused)
    }
}

#[vtable]
impl Transport for Refused {
    type Class = Refused;

    fn connect(_xprt: &Xprt<Self>, connect: Connect<Self>) {
        connect.complete(Err(ECONNREFUSED));
    }

    fn close(_xprt: &Xprt<Self>) {}

    fn send_request(_xprt: &Xprt<Self>, _rqst: &Rqst<'_>) -> Result {
        Err(ENOTCONN)
    }
}

impl Drop for Refused {
    fn drop(&mut self) {
        DESTROYED.fetch_add(1, Ordering::SeqCst);
    }
}

/// A transport whose server turns every first transmission of a call away in a way another
/// attempt cures (the RPC client sends it again at once) and fails the second with `EIO`, as
/// RPC-over-RDMA's `ERR_VERS` and `ERR_CHUNK` do.
struct Retrying;

static RETRYING: ClassSlot = ClassSlot::new();

impl TransportClass for Retrying {
    const NAME: &'static CStr = c_str!("rust kunit retrying");
    const IDENT: i32 = 0x7352_0004;
    const NETIDS: &'static [&'static CStr] = &[c_str!("rust-kunit-retry")];
    const SLOT: &'static ClassSlot = &RETRYING;

    fn setup(args: &CreateArgs<'_>) -> Result<TransportPtr> {
        Xprt::<Retrying>::create(args, &config(), Retrying)
    }
}

#[vtable]
impl Transport for Retrying {
    type Class = Retrying;

    fn connect(_xprt: &Xprt<Self>, connect: Connect<Self>) {
        connect.complete(Ok(()));
    }

    fn close(_xprt: &Xprt<Self>) {}

    fn send_request(xprt: &Xprt<Self>, rqst: &Rqst<'_>) -> Result {
        let xid = rqst.xid();
        let first = RETRY_SENDS.fetch_add(1, Ordering::SeqCst) & 1 == 0;
        let handle = xprt.handle();
        workqueue::system()
            .try_spawn(GFP_NOWAIT, move || {
                // The call waits for its reply by then, as after a real round trip.
                // SAFETY: Sleeping is allowed in a work item.
                unsafe { bindings::msleep(50) };
                handle.with(|xprt| {
                    let _ = if first {
                        xprt.retry_call(xid)
                    } else {
                        xprt.fail_call(xid, EIO)
                    };
                });
            })
            .map_err(|_| ENOBUFS)?;
        Ok(())
    }
}

impl Drop for Retrying {
    fn drop(&mut self) {
        DESTROYED.fetch_add(1, Ordering::SeqCst);
    }
}

/// Creates an RPC client of the test program over the transport `ident`, to 127.0.0.1
/// port 2049 (bound, so no rpcbind), which pings the server.
fn create_client(ident: i32) -> Result<*mut bindings::rpc_clnt> {
    // SAFETY: All zeroes is a valid `sockaddr_in` (integers).
    let mut sin: bindings::sockaddr_in = unsafe { core::mem::zeroed() };
    // SAFETY: All zeroes is a valid `rpc_create_args` (integers, null pointers).
    let mut args: bindings::rpc_create_args = unsafe { core::mem::zeroed() };
    sin.sin_family = bindings::AF_INET as _;
    sin.sin_port = 2049u16.to_be();
    sin.sin_addr.s_addr = 0x7f00_0001u32.to_be();
    args.net = Namespace::initial().as_raw();
    args.protocol = ident;
    args.address = addr_of_mut!(sin).cast();
    args.addrsize = core::mem::size_of::<bindings::sockaddr_in>();
    args.servername = c_str!("rust-kunit").as_char_ptr();
    args.program = PROGRAM.get().cast_const();
    args.stats = STATS.get();
    args.version = 1;
    args.authflavor = bindings::rpc_auth_flavors_RPC_AUTH_NULL;
    // SAFETY: `args` and the address live across the call; the program, its version and
    // statistics are statics; `init_net` lives for ever.
    let clnt = unsafe { bindings::rpc_create(&mut args) };
    crate::error::from_err_ptr(clnt)
}

/// Waits up to five seconds until `DESTROYED` reaches `n` (destruction runs from a work
/// item once the last reference goes).
fn destroyed(n: usize) -> bool {
    for _ in 0..500 {
        if DESTROYED.load(Ordering::SeqCst) >= n {
            return true;
        }
        // SAFETY: Sleeping is allowed in a KUnit case.
        unsafe { bindings::msleep(10) };
    }
    false
}

/// Waits up to five seconds until `LATE_FOUND` is set.
fn late_found() -> usize {
    for _ in 0..500 {
        let found = LATE_FOUND.load(Ordering::SeqCst);
        if found != 0 {
            return found;
        }
        // SAFETY: Sleeping is allowed in a KUnit case.
        unsafe { bindings::msleep(10) };
    }
    0
}

fn a_client_pings_over_a_loopback_transport(test: &mut Test) -> Result {
    let reg = KBox::pin_init(Registration::<Loopback>::new(&VMLINUX), GFP_KERNEL)?;
    let answered = ANSWERED.load(Ordering::SeqCst);
    let gone = DESTROYED.load(Ordering::SeqCst);
    LATE_STARTED.store(false, Ordering::SeqCst);
    LATE_GO.store(false, Ordering::SeqCst);
    LATE_FOUND.store(0, Ordering::SeqCst);
    let clnt = create_client(Loopback::IDENT);
    kunit_expect!(test, clnt.is_ok());
    if let Ok(clnt) = clnt {
        kunit_expect_eq!(test, ANSWERED.load(Ordering::SeqCst) - answered, 1);
        kunit_expect!(test, IN_CLIENT_NET.load(Ordering::SeqCst));
        // SAFETY: A client `rpc_create` returned, shut down once.
        unsafe { bindings::rpc_shutdown_client(clnt) };
    }
    // The late context held a handle all along, which did not keep the transport alive, and
    // reaches nothing once it is destroyed.
    kunit_expect!(test, destroyed(gone + 1));
    LATE_GO.store(true, Ordering::SeqCst);
    kunit_expect_eq!(test, late_found(), 1);
    drop(reg);
    Ok(())
}

fn a_failed_call_ends_with_its_error_after_a_retry(test: &mut Test) -> Result {
    let reg = KBox::pin_init(Registration::<Retrying>::new(&VMLINUX), GFP_KERNEL)?;
    let gone = DESTROYED.load(Ordering::SeqCst);
    let sends = RETRY_SENDS.load(Ordering::SeqCst);
    // `rpc_create` pings: sent, sent again, failed.
    let clnt = create_client(Retrying::IDENT);
    kunit_expect!(test, clnt.err() == Some(EIO));
    if let Ok(clnt) = clnt {
        // SAFETY: A client `rpc_create` returned, shut down once.
        unsafe { bindings::rpc_shutdown_client(clnt) };
    }
    kunit_expect_eq!(test, RETRY_SENDS.load(Ordering::SeqCst) - sends, 2);
    kunit_expect!(test, destroyed(gone + 1));
    drop(reg);
    Ok(())
}

fn a_refused_connect_fails_the_client(test: &mut Test) -> Result {
    let reg = KBox::pin_init(Registration::<Refused>::new(&VMLINUX), GFP_KERNEL)?;
    let gone = DESTROYED.load(Ordering::SeqCst);
    let clnt = create_client(Refused::IDENT);
    kunit_expect!(test, clnt.is_err());
    if let Ok(clnt) = clnt {
        // SAFETY: A client `rpc_create` returned, shut down once.
        unsafe { bindings::rpc_shutdown_client(clnt) };
    }
    kunit_expect!(test, destroyed(gone + 1));
    drop(reg);
    Ok(())
}

crate::kunit_suite!(
    rust_sunrpc_xprt,
    [
        a_client_pings_over_a_loopback_transport,
        a_refused_connect_fails_the_client,
        a_failed_call_ends_with_its_error_after_a_retry
    ]
);
