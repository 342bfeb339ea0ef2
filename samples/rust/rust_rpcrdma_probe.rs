// SPDX-License-Identifier: GPL-2.0

//! A raw RPC-over-RDMA Version 1 peer that sends malformed transport headers to a server:
//! `modprobe rust_rpcrdma_probe addr=198.18.0.2:20050` connects to the server's listener with
//! RFC 8797 private data (4 KiB Sends and Receives), runs every case of [`CASES`] while the
//! module loads, and prints one line per case:
//!
//! ```text
//! rust_rpcrdma_probe: N cases against ADDR
//! rust_rpcrdma_probe: <case>: ok (<what was seen>; <what became of the connection>)
//! rust_rpcrdma_probe: <case>: FAIL (<expected> / <what was seen>; <...>)
//! rust_rpcrdma_probe: done: N ok, M failed
//! ```
//!
//! Each case sends one hand-encoded Version 1 message (`rdma_xid`, `rdma_vers`, `rdma_credit`,
//! `rdma_proc`, Read list, Write list, Reply chunk, then an NFS NULL call: program 100003,
//! version 3, procedure 0, `AUTH_NONE`) and checks the answer against RFC 8166: `ERR_VERS` in
//! its layout for another version, naming Version 1 alone for Version 2 on a connection that
//! speaks Version 1 (a server that speaks both keeps to the version of a connection's first
//! message, draft-ietf-nfsv4-rpcrdma-version-two-01 section 4.2.3.3) and every version the
//! server speaks for an unknown one (1 to 1, or 1 to 2 for a server that speaks Version 2),
//! `ERR_CHUNK` for a malformed header (section 5.3.2), no answer for a message too short to
//! hold a header. After an error, a well-formed NULL call
//! must get its `RDMA_MSG` reply on the same connection; a case after which the server closed
//! the connection says so, and the next case connects again. Every wait is bounded (3 s for an
//! answer, 1.5 s of silence for no answer).
//!
//! Then the replay check: a client that reconnects must get the server's duplicate reply
//! cache. The probe connects from a fixed source port ([`REPLAY_PORT`]), sends an NFSv3 MKDIR
//! (a non-idempotent call, whose whole reply nfsd caches) into a directory handle that does not
//! exist, disconnects, connects again from the same port and sends the same call with the same
//! XID: nfsd's cache is keyed by XID, procedure, the client's address and port and a checksum
//! of the call, so the second reply must be the first one, byte for byte, and come from the
//! cache (the scenario reads nfsd's `rc` hit counter):
//!
//! ```text
//! rust_rpcrdma_probe: replay: ok (the same N-byte reply to MKDIR xid=X across a reconnect from port P)
//! ```
//!
//! Only the safe consumer API of `kernel::rdma` is used; the module holds nothing once loaded,
//! so unloading it is immediate.

use core::{fmt, net::SocketAddr};
use kernel::{
    error::code::*,
    prelude::*,
    rdma::consumer::{
        cm::{CmId, ConnParam},
        dma_buffer::DmaBuffer,
        kernel_qp::{QpCaps, SendWr, Sge, WcOpcode},
    },
    sync::{Arc, Completion},
    time::msecs_to_jiffies,
};

module! {
    type: RpcrdmaProbe,
    name: "rust_rpcrdma_probe",
    author: "rsiw project",
    description: "Sends malformed RPC-over-RDMA Version 1 headers to a server and checks the answers",
    license: "GPL",
}

kernel::module_param_str!(ADDR, "addr");

/// Size of every message buffer, and of the Sends and Receives advertised to the server.
const BUF: usize = 4096;
/// Receives kept posted.
const RECVS: usize = 8;
/// Tag of the Send (receives are tagged with their slot).
const SEND_TAG: u64 = 1000;
/// How long an answer may take.
const REPLY_MS: u32 = 3000;
/// How long a case that expects no answer listens.
const QUIET_MS: u32 = 1500;
/// Credits every message asks for.
const CREDITS: u32 = 32;
/// Words of a message kept for checking: 64 bytes, which hold the whole of every answer the
/// cases and the replay check expect.
const WORDS: usize = 16;
/// The source port of the replay check's two connections.
const REPLAY_PORT: u16 = 40999;

/// RFC 8797 private data: magic, version 1, no flags, Send and Receive sizes of 4 KiB (each
/// encoded as `size / 1024 - 1`).
const PRIVATE: [u8; 8] = [0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3];

const RDMA_MSG: u32 = 0;
const RDMA_NOMSG: u32 = 1;
const RDMA_MSGP: u32 = 2;
const RDMA_ERROR: u32 = 4;
const ERR_VERS: u32 = 1;
const ERR_CHUNK: u32 = 2;

/// An XDR stream under construction.
struct Xdr(KVec<u8>);

impl Xdr {
    fn new() -> Self {
        Self(KVec::new())
    }

    fn put(mut self, words: &[u32]) -> Result<Self> {
        for word in words {
            self.0.extend_from_slice(&word.to_be_bytes(), GFP_KERNEL)?;
        }
        Ok(self)
    }

    /// The four fixed words of a transport header.
    fn header(self, xid: u32, vers: u32, proc: u32) -> Result<Self> {
        self.put(&[xid, vers, CREDITS, proc])
    }

    /// A well-formed `RDMA_MSG` header without chunks.
    fn msg(self, xid: u32) -> Result<Self> {
        self.header(xid, 1, RDMA_MSG)?.put(&[0, 0, 0])
    }

    /// An NFS NULL call (40 bytes): CALL, RPC version 2, NFS version 3, procedure 0,
    /// `AUTH_NONE` credential and verifier.
    fn null_call(self, xid: u32) -> Result<KVec<u8>> {
        Ok(self.put(&[xid, 0, 2, 100003, 3, 0, 0, 0, 0, 0])?.0)
    }

    /// An NFSv3 MKDIR call (`AUTH_NONE`) of "replay" in a directory whose 8-byte handle no
    /// export has, with no attribute set.
    fn mkdir_call(self, xid: u32) -> Result<KVec<u8>> {
        let m = self.put(&[xid, 0, 2, 100003, 3, 9, 0, 0, 0, 0])?;
        let m = m.put(&[8, 0xdead_beef, 0x0bad_f00d])?;
        let m = m.put(&[
            6,
            u32::from_be_bytes(*b"repl"),
            u32::from_be_bytes(*b"ay\0\0"),
        ])?;
        Ok(m.put(&[0, 0, 0, 0, 0, 0])?.0)
    }

    fn done(self) -> KVec<u8> {
        self.0
    }
}

/// A segment (handle, length, 64-bit offset).
fn segment(handle: u32, length: u32) -> [u32; 4] {
    [handle, length, 0, 0x1000]
}

/// What a case expects.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// An `RDMA_MSG` carrying the NULL call's accepted reply.
    Reply,
    /// `RDMA_ERROR` `ERR_VERS` with versions 1 to 1.
    ErrVers,
    /// `RDMA_ERROR` `ERR_VERS` with versions from 1 to 1 or 2.
    ErrVersAny,
    /// `RDMA_ERROR` `ERR_CHUNK`.
    ErrChunk,
    /// No answer; the server may keep the connection or close it.
    Silence,
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Reply => "RDMA_MSG with the NULL reply",
            Self::ErrVers => "RDMA_ERROR ERR_VERS low=1 high=1, same xid",
            Self::ErrVersAny => "RDMA_ERROR ERR_VERS low=1 high=1 or 2, same xid",
            Self::ErrChunk => "RDMA_ERROR ERR_CHUNK, same xid",
            Self::Silence => "no answer",
        })
    }
}

/// One case: its name, the message for an XID, and what must come back.
struct Case {
    name: &'static str,
    build: fn(u32) -> Result<KVec<u8>>,
    expect: Expect,
}

/// The cases, in the order they run.
const CASES: &[Case] = &[
    Case {
        name: "null",
        build: |x| Xdr::new().msg(x)?.null_call(x),
        expect: Expect::Reply,
    },
    Case {
        name: "vers-2",
        build: |x| {
            Xdr::new()
                .header(x, 2, RDMA_MSG)?
                .put(&[0, 0, 0])?
                .null_call(x)
        },
        expect: Expect::ErrVers,
    },
    Case {
        name: "vers-0",
        build: |x| {
            Xdr::new()
                .header(x, 0, RDMA_MSG)?
                .put(&[0, 0, 0])?
                .null_call(x)
        },
        expect: Expect::ErrVersAny,
    },
    Case {
        name: "short-4",
        build: |x| Ok(Xdr::new().put(&[x])?.done()),
        expect: Expect::Silence,
    },
    Case {
        name: "short-12",
        build: |x| Ok(Xdr::new().put(&[x, 1, CREDITS])?.done()),
        expect: Expect::Silence,
    },
    Case {
        name: "proc-unknown",
        build: |x| Xdr::new().header(x, 1, 7)?.put(&[0, 0, 0])?.null_call(x),
        expect: Expect::ErrChunk,
    },
    Case {
        name: "msgp",
        build: |x| {
            Xdr::new()
                .header(x, 1, RDMA_MSGP)?
                .put(&[256, 1024, 0, 0, 0])?
                .null_call(x)
        },
        expect: Expect::ErrChunk,
    },
    Case {
        name: "nomsg-no-chunks",
        build: |x| Ok(Xdr::new().header(x, 1, RDMA_NOMSG)?.put(&[0, 0, 0])?.done()),
        expect: Expect::ErrChunk,
    },
    Case {
        name: "list-discriminator-2",
        build: |x| {
            Xdr::new()
                .header(x, 1, RDMA_MSG)?
                .put(&[2, 0, 0, 0])?
                .null_call(x)
        },
        expect: Expect::ErrChunk,
    },
    Case {
        name: "read-length-huge",
        build: |x| {
            Xdr::new()
                .header(x, 1, RDMA_MSG)?
                .put(&[1, 40])?
                .put(&segment(0x1234, 0xffff_ffff))?
                .put(&[0, 0, 0])?
                .null_call(x)
        },
        expect: Expect::ErrChunk,
    },
    Case {
        name: "read-segments-64",
        build: |x| {
            let mut m = Xdr::new().header(x, 1, RDMA_MSG)?;
            for i in 0..64 {
                m = m.put(&[1, 40])?.put(&segment(0x1234 + i, 8))?;
            }
            m.put(&[0, 0, 0])?.null_call(x)
        },
        expect: Expect::ErrChunk,
    },
    Case {
        name: "read-position-outside",
        build: |x| {
            Xdr::new()
                .header(x, 1, RDMA_MSG)?
                .put(&[1, 0x0010_0000])?
                .put(&segment(0x1234, 8))?
                .put(&[0, 0, 0])?
                .null_call(x)
        },
        expect: Expect::ErrChunk,
    },
    Case {
        name: "read-list-truncated",
        build: |x| {
            Ok(Xdr::new()
                .header(x, 1, RDMA_MSG)?
                .put(&[1, 40, 0x1234])?
                .done())
        },
        expect: Expect::ErrChunk,
    },
    Case {
        name: "write-count-overrun",
        build: |x| {
            let m = Xdr::new().header(x, 1, RDMA_MSG)?.put(&[0, 1, 12])?;
            Ok(m.put(&segment(0x1234, 64))?.done())
        },
        expect: Expect::ErrChunk,
    },
    Case {
        name: "write-count-wraps",
        build: |x| {
            // 0x1000_0001 segments of 16 bytes are 16 bytes in 32-bit arithmetic.
            Xdr::new()
                .header(x, 1, RDMA_MSG)?
                .put(&[0, 1, 0x1000_0001])?
                .put(&segment(0x1234, 64))?
                .put(&[0, 0])?
                .null_call(x)
        },
        expect: Expect::ErrChunk,
    },
    Case {
        name: "write-length-overflow",
        build: |x| {
            Xdr::new()
                .header(x, 1, RDMA_MSG)?
                .put(&[0, 1, 2])?
                .put(&segment(0x1234, 0xffff_fff0))?
                .put(&segment(0x1235, 0xffff_fff0))?
                .put(&[0, 0])?
                .null_call(x)
        },
        expect: Expect::ErrChunk,
    },
    Case {
        name: "reply-count-overrun",
        build: |x| {
            let m = Xdr::new().header(x, 1, RDMA_MSG)?.put(&[0, 0, 1, 12])?;
            Ok(m.put(&segment(0x1234, 64))?.done())
        },
        expect: Expect::ErrChunk,
    },
    Case {
        name: "reply-count-huge",
        build: |x| {
            Xdr::new()
                .header(x, 1, RDMA_MSG)?
                .put(&[0, 0, 1, 0xffff_ffff])?
                .put(&segment(0x1234, 64))?
                .null_call(x)
        },
        expect: Expect::ErrChunk,
    },
    Case {
        name: "reply-length-overflow",
        build: |x| {
            Xdr::new()
                .header(x, 1, RDMA_MSG)?
                .put(&[0, 0, 1, 2])?
                .put(&segment(0x1234, 0xffff_fff0))?
                .put(&segment(0x1235, 0xffff_fff0))?
                .null_call(x)
        },
        expect: Expect::ErrChunk,
    },
    Case {
        name: "xid-mismatch",
        build: |x| Xdr::new().msg(x)?.null_call(x ^ 0x00ff_ff00),
        expect: Expect::ErrChunk,
    },
    Case {
        name: "null-last",
        build: |x| Xdr::new().msg(x)?.null_call(x),
        expect: Expect::Reply,
    },
];

/// What came back.
#[derive(Clone, Copy)]
enum Seen {
    /// Nothing within the window.
    Nothing,
    /// The connection went (why).
    Closed(&'static str),
    /// A message: its length and first words (zero past its end).
    Message { len: usize, words: [u32; WORDS] },
}

impl Seen {
    fn message(bytes: &[u8]) -> Self {
        let mut words = [0u32; WORDS];
        for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(4)) {
            *word = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }
        Seen::Message {
            len: bytes.len(),
            words,
        }
    }

    /// Whether this is what `expect` wants for the message `xid`.
    fn matches(&self, expect: Expect, xid: u32) -> bool {
        match (expect, self) {
            (Expect::Silence, Seen::Nothing | Seen::Closed(_)) => true,
            (_, Seen::Message { len, words: w }) if *len >= 20 && w[0] == xid => match expect {
                // The three chunk lists empty, then an accepted RPC reply to `xid` with an
                // empty verifier and SUCCESS.
                Expect::Reply => {
                    *len >= 52
                        && w[1..=6] == [1, w[2], RDMA_MSG, 0, 0, 0]
                        && w[7..=12] == [xid, 1, 0, 0, 0, 0]
                }
                Expect::ErrVers => w[3] == RDMA_ERROR && *len >= 28 && w[4..=6] == [ERR_VERS, 1, 1],
                Expect::ErrVersAny => {
                    w[3] == RDMA_ERROR
                        && *len >= 28
                        && w[4..=5] == [ERR_VERS, 1]
                        && matches!(w[6], 1 | 2)
                }
                Expect::ErrChunk => w[3] == RDMA_ERROR && w[4] == ERR_CHUNK,
                Expect::Silence => false,
            },
            _ => false,
        }
    }
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (len, w) = match self {
            Seen::Nothing => return f.write_str("no answer"),
            Seen::Closed(why) => return write!(f, "connection closed: {why}"),
            Seen::Message { len, words } => (*len, words),
        };
        if len < 16 {
            return write!(f, "a message of {len} bytes");
        }
        let (xid, vers) = (w[0], w[1]);
        match w[3] {
            RDMA_ERROR if len >= 28 && w[4] == ERR_VERS => write!(
                f,
                "RDMA_ERROR ERR_VERS low={} high={} xid={xid:#x} vers={vers}",
                w[5], w[6]
            ),
            RDMA_ERROR if len >= 20 && w[4] == ERR_CHUNK => {
                write!(f, "RDMA_ERROR ERR_CHUNK xid={xid:#x} vers={vers}")
            }
            RDMA_ERROR => write!(f, "RDMA_ERROR of {len} bytes xid={xid:#x} err={}", w[4]),
            RDMA_MSG if len >= 52 && w[4..=6] == [0, 0, 0] && w[8] == 1 => write!(
                f,
                "RDMA_MSG xid={xid:#x} vers={vers}, RPC reply xid={:#x} stat={} accept={}",
                w[7], w[9], w[12]
            ),
            proc => write!(f, "proc {proc} of {len} bytes xid={xid:#x} vers={vers}"),
        }
    }
}

/// A connection to the server: the id (with its QP, dropped first) and the message buffers
/// (RECVS receive slots, then the send slot).
struct Conn {
    id: CmId,
    bufs: Arc<DmaBuffer>,
}

impl Conn {
    fn connect(addr: SocketAddr) -> Result<Self> {
        Self::connect_from(None, addr)
    }

    /// Connects to `addr` from `src` (any address and port if `None`).
    fn connect_from(src: Option<SocketAddr>, addr: SocketAddr) -> Result<Self> {
        let mut id = CmId::new()?;
        id.resolve_addr(src.as_ref(), &addr, 2000)?;
        expect_event(&id, "ADDR_RESOLVED")?;
        id.resolve_route(2000)?;
        expect_event(&id, "ROUTE_RESOLVED")?;
        let device = id.device()?;
        let pd = device.alloc_pd()?;
        let bufs = DmaBuffer::new(&pd, BUF * (RECVS + 1))?;
        id.create_qp(
            &pd,
            QpCaps {
                max_send_wr: 4,
                max_recv_wr: RECVS as u32,
            },
        )?;
        let conn = Self { id, bufs };
        for slot in 0..RECVS {
            conn.post_recv(slot as u64)?;
        }
        let depth = device.caps().max_qp_rd_atom.min(16) as u8;
        conn.id.connect(&ConnParam {
            private_data: &PRIVATE,
            responder_resources: depth,
            initiator_depth: depth,
            retry_count: 7,
            rnr_retry_count: 7,
        })?;
        expect_event(&conn.id, "ESTABLISHED")?;
        Ok(conn)
    }

    fn post_recv(&self, slot: u64) -> Result {
        let sge = Sge {
            buffer: &self.bufs,
            offset: slot as usize * BUF,
            len: BUF,
        };
        self.id.qp()?.post_recv(sge, slot)
    }

    fn send(&self, message: &[u8]) -> Result {
        self.bufs.write(RECVS * BUF, message)?;
        let local = Sge {
            buffer: &self.bufs,
            offset: RECVS * BUF,
            len: message.len(),
        };
        let send = SendWr::Send {
            local,
            solicited: false,
        };
        self.id.qp()?.post_send(&send, SEND_TAG)
    }

    /// The next message within `window_ms`, nothing, or the connection's end.
    fn receive(&self, window_ms: u32) -> Seen {
        let Ok(qp) = self.id.qp() else {
            return Seen::Closed("no queue pair");
        };
        for _ in 0..window_ms.div_ceil(100) {
            let wc = match qp.wait(msecs_to_jiffies(100)) {
                Ok(wc) => wc,
                Err(e) if e == ETIMEDOUT => {
                    if let Ok(Some(event)) = self.id.try_event() {
                        return Seen::Closed(event.name());
                    }
                    continue;
                }
                Err(_) => return Seen::Closed("completion queue failed"),
            };
            if !wc.is_recv {
                if !wc.status.is_success() {
                    return Seen::Closed("our Send failed");
                }
                continue;
            }
            if !wc.status.is_success() {
                return Seen::Closed(if wc.status.is_flush() {
                    "receives flushed"
                } else {
                    "a receive failed"
                });
            }
            if wc.opcode != WcOpcode::Recv || wc.tag >= RECVS as u64 {
                return Seen::Closed("unexpected completion");
            }
            let len = (wc.byte_len as usize).min(BUF);
            let mut bytes = [0u8; 4 * WORDS];
            let head = len.min(bytes.len());
            let read = self.bufs.read(wc.tag as usize * BUF, &mut bytes[..head]);
            if read.is_err() || self.post_recv(wc.tag).is_err() {
                return Seen::Closed("receive buffer unusable");
            }
            let mut seen = Seen::message(&bytes[..head]);
            if let Seen::Message { len: l, .. } = &mut seen {
                *l = len;
            }
            return seen;
        }
        Seen::Nothing
    }

    /// Sends `message` and waits for what comes back.
    fn exchange(&self, message: &[u8], window_ms: u32) -> Seen {
        match self.send(message) {
            Ok(()) => self.receive(window_ms),
            Err(_) => Seen::Closed("the Send could not be posted"),
        }
    }

    /// Whether a NULL call with `xid` gets its reply here; what was seen otherwise.
    fn null_answered(&self, xid: u32) -> core::result::Result<(), Seen> {
        let message = Xdr::new()
            .msg(xid)
            .and_then(|m| m.null_call(xid))
            .map_err(|_| Seen::Closed("out of memory"))?;
        let seen = self.exchange(&message, REPLY_MS);
        if seen.matches(Expect::Reply, xid) {
            Ok(())
        } else {
            Err(seen)
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if self.id.disconnect().is_ok() {
            let _ = self.id.next_event(msecs_to_jiffies(1000));
        }
    }
}

fn expect_event(id: &CmId, wanted: &str) -> Result {
    let event = id.next_event(msecs_to_jiffies(5000))?;
    if event.name() != wanted {
        pr_info!("expected {}, got {}\n", wanted, event.name());
        return Err(ECONNREFUSED);
    }
    Ok(())
}

/// What followed a case's answer.
enum After {
    /// A NULL call on the same connection was answered.
    Alive,
    /// The connection was gone (how, unless the answer said so); a new one answered a NULL
    /// call.
    Reconnected(Option<Seen>),
    /// The connection was gone (how, unless the answer said so) and a new one could not be
    /// made or used.
    Lost(Option<Seen>, Error),
    /// The connection stayed but the NULL call was not answered properly.
    Broken(Seen),
}

impl fmt::Display for After {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            After::Alive => f.write_str("connection kept, NULL answered"),
            After::Reconnected(why) => {
                write_closure(f, why.as_ref())?;
                f.write_str("reconnected, NULL answered")
            }
            After::Lost(why, e) => {
                write_closure(f, why.as_ref())?;
                write!(f, "reconnecting failed: {e:?}")
            }
            After::Broken(seen) => write!(f, "NULL call then got: {seen}"),
        }
    }
}

fn write_closure(f: &mut fmt::Formatter<'_>, why: Option<&Seen>) -> fmt::Result {
    match why {
        Some(why) => write!(f, "{why}; "),
        None => Ok(()),
    }
}

/// Connects and checks a NULL call on the new connection.
fn reconnect(addr: SocketAddr, conn: &mut Option<Conn>, xid: u32) -> Result {
    *conn = None;
    let fresh = Conn::connect(addr)?;
    fresh.null_answered(xid).map_err(|_| EPROTO)?;
    *conn = Some(fresh);
    Ok(())
}

/// Runs case `index`; whether it passed.
fn run_case(addr: SocketAddr, conn: &mut Option<Conn>, index: usize, case: &Case) -> bool {
    let xid = 0x7072_0000 | ((index as u32) << 4);
    if conn.is_none() {
        match Conn::connect(addr) {
            Ok(fresh) => *conn = Some(fresh),
            Err(e) => {
                pr_info!("{}: FAIL (a connection / {:?})\n", case.name, e);
                return false;
            }
        }
    }
    let Some(c) = conn.as_ref() else {
        return false;
    };
    let message = match (case.build)(xid) {
        Ok(message) => message,
        Err(e) => {
            pr_info!("{}: FAIL (a message / {:?})\n", case.name, e);
            return false;
        }
    };
    let window = if case.expect == Expect::Silence {
        QUIET_MS
    } else {
        REPLY_MS
    };
    let seen = c.exchange(&message, window);
    let mut ok = seen.matches(case.expect, xid);
    // Did the connection survive?
    let closed = match seen {
        Seen::Closed(_) => Some(seen),
        _ => match c.null_answered(xid | 1) {
            Ok(()) => None,
            Err(closed @ Seen::Closed(_)) => Some(closed),
            Err(other) => {
                let after = After::Broken(other);
                report(case, false, seen, &after);
                *conn = None;
                return false;
            }
        },
    };
    let after = match closed {
        None => After::Alive,
        Some(why) => {
            // An answer that was the connection's end already says so.
            let why = (!matches!(seen, Seen::Closed(_))).then_some(why);
            match reconnect(addr, conn, xid | 2) {
                Ok(()) => After::Reconnected(why),
                Err(e) => After::Lost(why, e),
            }
        }
    };
    // Only a message too short to be answered may cost the connection.
    ok &= match after {
        After::Alive => true,
        After::Reconnected(_) => case.expect == Expect::Silence,
        After::Lost(..) | After::Broken(_) => false,
    };
    report(case, ok, seen, &after);
    ok
}

fn report(case: &Case, ok: bool, seen: Seen, after: &After) {
    if ok {
        pr_info!("{}: ok ({}; {})\n", case.name, seen, after);
    } else {
        pr_info!(
            "{}: FAIL ({} / {}; {})\n",
            case.name,
            case.expect,
            seen,
            after
        );
    }
}

/// The words of an `RDMA_MSG` answer to `xid` after its transport header (the RPC reply), if
/// it is one.
fn rpc_reply(seen: &Seen, xid: u32) -> Option<(usize, [u32; WORDS])> {
    match seen {
        Seen::Message { len, words } if *len >= 28 + 24 && words[0] == xid => {
            (words[3] == RDMA_MSG && words[4..=6] == [0, 0, 0] && words[7] == xid)
                .then_some((*len, *words))
        }
        _ => None,
    }
}

/// The replay check (see the module documentation); whether it passed.
fn replay(addr: SocketAddr) -> bool {
    let xid = 0x7270_6c79;
    let src = SocketAddr::new(
        match addr {
            SocketAddr::V4(_) => core::net::Ipv4Addr::UNSPECIFIED.into(),
            SocketAddr::V6(_) => core::net::Ipv6Addr::UNSPECIFIED.into(),
        },
        REPLAY_PORT,
    );
    let Ok(message) = Xdr::new().msg(xid).and_then(|m| m.mkdir_call(xid)) else {
        pr_info!("replay: FAIL (a message / out of memory)\n");
        return false;
    };
    // Never completed: a bounded pause between connection attempts.
    let Ok(pause) = KBox::pin_init(Completion::new(), GFP_KERNEL) else {
        return false;
    };
    let mut answers = KVec::new();
    for attempt in 0..2 {
        // The first connection's port is free again once its id is gone; its TCP connection
        // may linger a moment.
        let mut conn = Err(EADDRINUSE);
        for _ in 0..10 {
            conn = Conn::connect_from(Some(src), addr);
            if conn.is_ok() {
                break;
            }
            pause.wait_timeout(msecs_to_jiffies(200));
        }
        let conn = match conn {
            Ok(conn) => conn,
            Err(e) => {
                pr_info!(
                    "replay: FAIL (connection {} from port {} / {:?})\n",
                    attempt + 1,
                    REPLAY_PORT,
                    e
                );
                return false;
            }
        };
        let seen = conn.exchange(&message, REPLY_MS);
        let Some(reply) = rpc_reply(&seen, xid) else {
            pr_info!("replay: FAIL (an RPC reply to MKDIR / {})\n", seen);
            return false;
        };
        if answers.push(reply, GFP_KERNEL).is_err() {
            return false;
        }
        drop(conn);
    }
    let [(len1, w1), (len2, w2)] = answers[..] else {
        return false;
    };
    // The transport headers may differ (credits); the RPC replies must not, and are compared
    // whole: a failed MKDIR's reply (status and two empty attributes) ends within the words
    // kept.
    if len1 > 4 * WORDS {
        pr_info!(
            "replay: FAIL (a reply of at most {} bytes / {} bytes)\n",
            4 * WORDS,
            len1
        );
        return false;
    }
    if len1 != len2 || w1[7..] != w2[7..] {
        pr_info!(
            "replay: FAIL (the same reply twice / {} bytes, then {} bytes; NFS status {} then {})\n",
            len1,
            len2,
            w1[13],
            w2[13]
        );
        return false;
    }
    pr_info!(
        "replay: ok (the same {}-byte reply to MKDIR xid={:#x}, NFS status {}, across a reconnect from port {})\n",
        len1,
        xid,
        w1[13],
        REPLAY_PORT
    );
    true
}

struct RpcrdmaProbe;

impl kernel::Module for RpcrdmaProbe {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let addr = ADDR
            .get()
            .ok_or(EINVAL)
            .and_then(|text| text.to_str().map_err(|_| EINVAL))
            .and_then(|text| text.parse::<SocketAddr>().map_err(|_| EINVAL))
            .inspect_err(|_| pr_err!("give addr=IPv4:port or addr=[IPv6]:port\n"))?;
        pr_info!("{} cases against {}\n", CASES.len() + 1, addr);
        let mut conn = None;
        let mut passed = 0;
        for (index, case) in CASES.iter().enumerate() {
            if run_case(addr, &mut conn, index, case) {
                passed += 1;
            }
        }
        drop(conn);
        if replay(addr) {
            passed += 1;
        }
        pr_info!("done: {} ok, {} failed\n", passed, CASES.len() + 1 - passed);
        Ok(RpcrdmaProbe)
    }
}
