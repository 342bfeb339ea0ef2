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
//! With `version=2` the probe speaks RPC-over-RDMA Version 2
//! (draft-ietf-nfsv4-rpcrdma-version-two-01) instead and runs [`V2_CASES`]: transport
//! properties (an unknown property is ignored, a bad value earns `RDMA2_ERR_BAD_PROPVAL`, a
//! second `RDMA2_CONNPROP` after a complete one `RDMA2_ERR_INVAL_HTYPE`), malformed chunk lists
//! (`RDMA2_ERR_BAD_XDR`, `RDMA2_ERR_WRITE_CHUNKS`, `RDMA2_ERR_SEGMENTS` with the server's
//! limits, per chunk and, its `RCSIZ`, in the header), Message Continuation broken three ways
//! (`RDMA2_ERR_INVAL_CONT`: `RDMA2_F_MORE` with chunks or on `RDMA2_NOMSG`, a sequence whose
//! XID changes, a sequence longer than the server reassembles), `RDMA2_F_TPMORE` on a call (`RDMA2_ERR_INVAL_HTYPE`), and a first
//! message longer than the 1024 bytes the draft allows (section 4.2.3: the server drops the
//! connection, as a Version 1 server's smaller receive would). The server's own
//! `RDMA2_CONNPROP` messages are counted and skipped wherever they come. Then the credit
//! overrun: [`FLOOD`] NULL calls sent back to back, more than the server grants (draft section
//! 4.2.1: "the RDMA provider might signal an error, possibly terminating the connection"):
//! either every call is answered or the connection ends, and the server serves a new one:
//!
//! ```text
//! rust_rpcrdma_probe: credit-overrun: ok (N of M calls answered, the server granted G; <...>)
//! ```
//!
//! Only the safe consumer API of `kernel::rdma` is used; the module holds nothing once loaded,
//! so unloading it is immediate.

use core::{cell::Cell, fmt, net::SocketAddr};
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
kernel::module_param_str!(VERSION, "version");

/// Size of every message buffer, and of the Sends and Receives advertised to the server.
const BUF: usize = 4096;
/// Receives kept posted: more than the answers to [`FLOOD`] calls.
const RECVS: usize = 112;
/// Calls of the credit overrun: more than any server here grants (64) and posts.
const FLOOD: u32 = 96;
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

const RDMA2_MSG: u32 = 0;
const RDMA2_NOMSG: u32 = 1;
const RDMA2_ERROR: u32 = 4;
const RDMA2_CONNPROP: u32 = 5;
const RDMA2_F_RESPONSE: u32 = 1;
const RDMA2_F_MORE: u32 = 2;
const RDMA2_F_TPMORE: u32 = 4;
const RDMA2_ERR_BAD_XDR: u32 = 2;
const RDMA2_ERR_BAD_PROPVAL: u32 = 3;
const RDMA2_ERR_INVAL_HTYPE: u32 = 4;
const RDMA2_ERR_INVAL_CONT: u32 = 5;
const RDMA2_ERR_WRITE_CHUNKS: u32 = 7;
const RDMA2_ERR_SEGMENTS: u32 = 8;
const RDMA2_PROPID_RBSIZ: u32 = 2;
/// The most a Version 2 connection's first message may be (draft section 4.2.3).
const FIRST_MESSAGE_MAX: usize = 1024;
/// Payload bytes of each fragment of the too-long sequence: nine of them exceed the 32 KiB
/// the rpcrdma2 server reassembles.
const FRAGMENT: usize = 4000;

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

    /// The five words of a Version 2 header's prefix.
    fn v2_header(self, xid: u32, htype: u32, flags: u32) -> Result<Self> {
        self.put(&[xid, 2, CREDITS << 16 | CREDITS, htype, flags])
    }

    /// A Version 2 `RDMA2_MSG` header with `flags`, no chunks and no invalidation handle.
    fn v2_msg(self, xid: u32, flags: u32) -> Result<Self> {
        self.v2_header(xid, RDMA2_MSG, flags)?.put(&[0, 0, 0, 0])
    }

    /// `count` zero bytes (a multiple of four).
    fn zeroes(mut self, count: usize) -> Result<Self> {
        for _ in 0..count / 4 {
            self = self.put(&[0])?;
        }
        Ok(self)
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

/// What a Version 2 case expects.
#[derive(Clone, Copy, PartialEq, Eq)]
enum V2Expect {
    /// An `RDMA2_MSG` reply carrying the NULL call's accepted reply.
    Reply,
    /// `RDMA2_ERROR` with this `rdma_err`, for the case's XID.
    Error(u32, &'static str),
    /// No answer, and the connection kept.
    Silence,
    /// No answer: the server closed the connection.
    Closed,
}

impl fmt::Display for V2Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Reply => f.write_str("RDMA2_MSG with the NULL reply"),
            Self::Error(_, name) => write!(f, "RDMA2_ERROR {name}, same xid"),
            Self::Silence => f.write_str("no answer, connection kept"),
            Self::Closed => f.write_str("the connection closed without an answer"),
        }
    }
}

impl Seen {
    /// Whether this is what `expect` wants for the Version 2 message `xid`.
    fn matches_v2(&self, expect: V2Expect, xid: u32) -> bool {
        let (len, w) = match (expect, self) {
            (V2Expect::Silence, Seen::Nothing) | (V2Expect::Closed, Seen::Closed(_)) => {
                return true
            }
            (_, Seen::Message { len, words }) if *len >= 24 && words[0] == xid => (*len, words),
            _ => return false,
        };
        let response = w[1] == 2 && w[4] & RDMA2_F_RESPONSE != 0;
        match expect {
            // No chunks, then an accepted RPC reply to `xid` with an empty verifier and SUCCESS.
            V2Expect::Reply => {
                response
                    && len >= 60
                    && w[3] == RDMA2_MSG
                    && w[5..=8] == [0, 0, 0, 0]
                    && w[9..=14] == [xid, 1, 0, 0, 0, 0]
            }
            V2Expect::Error(code, _) => response && w[3] == RDMA2_ERROR && w[5] == code,
            V2Expect::Silence | V2Expect::Closed => false,
        }
    }
}

/// A [`Seen`] read as Version 2.
struct V2Seen<'a>(&'a Seen);

impl fmt::Display for V2Seen<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (len, w) = match self.0 {
            Seen::Message { len, words } if *len >= 20 && words[1] == 2 => (*len, words),
            other => return write!(f, "{other}"),
        };
        let xid = w[0];
        match w[3] {
            RDMA2_ERROR if len >= 24 => {
                let name = match w[5] {
                    1 => "ERR_VERS",
                    RDMA2_ERR_BAD_XDR => "ERR_BAD_XDR",
                    RDMA2_ERR_BAD_PROPVAL => "ERR_BAD_PROPVAL",
                    RDMA2_ERR_INVAL_HTYPE => "ERR_INVAL_HTYPE",
                    RDMA2_ERR_INVAL_CONT => "ERR_INVAL_CONT",
                    6 => "ERR_READ_CHUNKS",
                    RDMA2_ERR_WRITE_CHUNKS => "ERR_WRITE_CHUNKS",
                    RDMA2_ERR_SEGMENTS => "ERR_SEGMENTS",
                    100 => "ERR_SYSTEM",
                    _ => "an unknown error",
                };
                // The chunk limits' errors name the server's limit.
                match w[5] {
                    6..=8 if len >= 28 => {
                        write!(f, "RDMA2_ERROR {name} (max {}) xid={xid:#x}", w[6])
                    }
                    _ => write!(f, "RDMA2_ERROR {name} xid={xid:#x}"),
                }
            }
            RDMA2_MSG if len >= 60 && w[9] == xid && w[10] == 1 => write!(
                f,
                "RDMA2_MSG xid={xid:#x} flags={:#x}, RPC reply stat={} accept={}",
                w[4], w[11], w[14]
            ),
            htype => write!(
                f,
                "Version 2 htype {htype} flags={:#x} of {len} bytes xid={xid:#x}",
                w[4]
            ),
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
    /// Whether the connection speaks Version 2 (its NULL calls, what it skips).
    v2: bool,
    /// The server's `RDMA2_CONNPROP` messages received.
    props: Cell<u32>,
    /// The credits the server's last message granted.
    granted: Cell<u32>,
    /// Our Sends completed.
    sent: Cell<u32>,
}

impl Conn {
    fn connect(addr: SocketAddr) -> Result<Self> {
        Self::connect_from(None, addr)
    }

    /// Connects to `addr` to speak Version 2.
    fn connect_v2(addr: SocketAddr) -> Result<Self> {
        let mut conn = Self::connect_from(None, addr)?;
        conn.v2 = true;
        Ok(conn)
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
        let conn = Self {
            id,
            bufs,
            v2: false,
            props: Cell::new(0),
            granted: Cell::new(0),
            sent: Cell::new(0),
        };
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
                self.sent.set(self.sent.get() + 1);
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
            if let Seen::Message { len: l, words } = &mut seen {
                *l = len;
                if self.v2 && len >= 20 && words[1] == 2 {
                    self.granted.set(words[2] & 0xffff);
                    // The server's properties come first on a connection, whatever we sent.
                    if words[3] == RDMA2_CONNPROP {
                        self.props.set(self.props.get() + 1);
                        continue;
                    }
                }
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

    /// The NULL call `xid` in the connection's version.
    fn null_call(&self, xid: u32) -> Result<KVec<u8>> {
        if self.v2 {
            Xdr::new().v2_msg(xid, 0)?.null_call(xid)
        } else {
            Xdr::new().msg(xid)?.null_call(xid)
        }
    }

    /// Whether a NULL call with `xid` gets its reply here; what was seen otherwise.
    fn null_answered(&self, xid: u32) -> core::result::Result<(), Seen> {
        let message = self
            .null_call(xid)
            .map_err(|_| Seen::Closed("out of memory"))?;
        let seen = self.exchange(&message, REPLY_MS);
        let answered = if self.v2 {
            seen.matches_v2(V2Expect::Reply, xid)
        } else {
            seen.matches(Expect::Reply, xid)
        };
        if answered {
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

/// Connects (in Version 2 if `v2`) and checks a NULL call on the new connection.
fn reconnect(addr: SocketAddr, conn: &mut Option<Conn>, xid: u32, v2: bool) -> Result {
    *conn = None;
    let fresh = if v2 {
        Conn::connect_v2(addr)?
    } else {
        Conn::connect(addr)?
    };
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
            match reconnect(addr, conn, xid | 2, false) {
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

/// One Version 2 case: its name, what it sends for an XID (returning what came back), what
/// must come back, and whether it needs a connection of its own (its message is the first).
struct V2Case {
    name: &'static str,
    run: fn(&Conn, u32) -> Result<Seen>,
    expect: V2Expect,
    fresh: bool,
}

/// Sends `message` and waits for an answer, or for silence if `expect` wants none.
fn v2_exchange(c: &Conn, message: &[u8], expect: V2Expect) -> Seen {
    let window = match expect {
        V2Expect::Silence | V2Expect::Closed => QUIET_MS,
        V2Expect::Reply | V2Expect::Error(..) => REPLY_MS,
    };
    c.exchange(message, window)
}

/// A case of one message, `build`'s.
macro_rules! v2_one {
    ($build:expr, $expect:expr) => {
        |c, x| {
            let build: fn(u32) -> Result<KVec<u8>> = $build;
            Ok(v2_exchange(c, &build(x)?, $expect))
        }
    };
}

const V2_INVAL_CONT: V2Expect = V2Expect::Error(RDMA2_ERR_INVAL_CONT, "ERR_INVAL_CONT");
const V2_INVAL_HTYPE: V2Expect = V2Expect::Error(RDMA2_ERR_INVAL_HTYPE, "ERR_INVAL_HTYPE");

/// The Version 2 cases, in the order they run.
const V2_CASES: &[V2Case] = &[
    // An unknown property is not processed and earns no error (draft section 5.1); the
    // server's own properties come back.
    V2Case {
        name: "v2-connprop-unknown",
        run: v2_one!(
            |x| Ok(Xdr::new()
                .v2_header(x, RDMA2_CONNPROP, 0)?
                .put(&[2, 0x7777, 8, 0xdead_beef, 0x0bad_f00d])?
                .put(&[RDMA2_PROPID_RBSIZ, 4, 4096])?
                .done()),
            V2Expect::Silence
        ),
        expect: V2Expect::Silence,
        fresh: true,
    },
    V2Case {
        name: "v2-connprop-twice",
        run: v2_one!(
            |x| Ok(Xdr::new()
                .v2_header(x, RDMA2_CONNPROP, 0)?
                .put(&[1, RDMA2_PROPID_RBSIZ, 4, 4096])?
                .done()),
            V2_INVAL_HTYPE
        ),
        expect: V2_INVAL_HTYPE,
        fresh: false,
    },
    V2Case {
        name: "v2-null",
        run: v2_one!(|x| Xdr::new().v2_msg(x, 0)?.null_call(x), V2Expect::Reply),
        expect: V2Expect::Reply,
        fresh: false,
    },
    // RBSIZ's value is an unsigned int: two bytes cannot be parsed.
    V2Case {
        name: "v2-connprop-bad-value",
        run: v2_one!(
            |x| Ok(Xdr::new()
                .v2_header(x, RDMA2_CONNPROP, 0)?
                .put(&[1, RDMA2_PROPID_RBSIZ, 2, 0x1000_0000])?
                .done()),
            V2Expect::Error(RDMA2_ERR_BAD_PROPVAL, "ERR_BAD_PROPVAL")
        ),
        expect: V2Expect::Error(RDMA2_ERR_BAD_PROPVAL, "ERR_BAD_PROPVAL"),
        fresh: true,
    },
    V2Case {
        name: "v2-list-discriminator-2",
        run: v2_one!(
            |x| Xdr::new()
                .v2_header(x, RDMA2_MSG, 0)?
                .put(&[0, 2, 0, 0])?
                .null_call(x),
            V2Expect::Error(RDMA2_ERR_BAD_XDR, "ERR_BAD_XDR")
        ),
        expect: V2Expect::Error(RDMA2_ERR_BAD_XDR, "ERR_BAD_XDR"),
        fresh: false,
    },
    V2Case {
        name: "v2-write-chunks-9",
        run: v2_one!(
            |x| {
                let mut m = Xdr::new().v2_header(x, RDMA2_MSG, 0)?.put(&[0, 0])?;
                for i in 0..9 {
                    m = m.put(&[1, 1])?.put(&segment(0x1234 + i, 64))?;
                }
                m.put(&[0, 0])?.null_call(x)
            },
            V2Expect::Error(RDMA2_ERR_WRITE_CHUNKS, "ERR_WRITE_CHUNKS")
        ),
        expect: V2Expect::Error(RDMA2_ERR_WRITE_CHUNKS, "ERR_WRITE_CHUNKS"),
        fresh: false,
    },
    V2Case {
        name: "v2-write-segments-17",
        run: v2_one!(
            |x| {
                let mut m = Xdr::new().v2_header(x, RDMA2_MSG, 0)?.put(&[0, 0, 1, 17])?;
                for i in 0..17 {
                    m = m.put(&segment(0x1234 + i, 64))?;
                }
                m.put(&[0, 0])?.null_call(x)
            },
            V2Expect::Error(RDMA2_ERR_SEGMENTS, "ERR_SEGMENTS")
        ),
        expect: V2Expect::Error(RDMA2_ERR_SEGMENTS, "ERR_SEGMENTS"),
        fresh: false,
    },
    // Within the per-chunk limit, over the server's RCSIZ (16) in the header together.
    V2Case {
        name: "v2-header-segments-17",
        run: v2_one!(
            |x| {
                let mut m = Xdr::new().v2_header(x, RDMA2_MSG, 0)?.put(&[0, 0, 1, 9])?;
                for i in 0..9 {
                    m = m.put(&segment(0x1234 + i, 64))?;
                }
                m = m.put(&[0, 1, 8])?;
                for i in 9..17 {
                    m = m.put(&segment(0x1234 + i, 64))?;
                }
                m.null_call(x)
            },
            V2Expect::Error(RDMA2_ERR_SEGMENTS, "ERR_SEGMENTS")
        ),
        expect: V2Expect::Error(RDMA2_ERR_SEGMENTS, "ERR_SEGMENTS"),
        fresh: false,
    },
    // Chunks only on the final message of a sequence (section 6.2.2.2).
    V2Case {
        name: "v2-more-with-chunks",
        run: v2_one!(
            |x| Xdr::new()
                .v2_header(x, RDMA2_MSG, RDMA2_F_MORE)?
                .put(&[0, 0, 1, 1])?
                .put(&segment(0x1234, 64))?
                .put(&[0, 0])?
                .null_call(x),
            V2_INVAL_CONT
        ),
        expect: V2_INVAL_CONT,
        fresh: false,
    },
    V2Case {
        name: "v2-more-on-nomsg",
        run: v2_one!(
            |x| Ok(Xdr::new()
                .v2_header(x, RDMA2_NOMSG, RDMA2_F_MORE)?
                .put(&[0, 1, 0])?
                .put(&segment(0x1234, 64))?
                .put(&[0, 0, 0])?
                .done()),
            V2_INVAL_CONT
        ),
        expect: V2_INVAL_CONT,
        fresh: false,
    },
    V2Case {
        name: "v2-tpmore-on-msg",
        run: v2_one!(
            |x| Xdr::new().v2_msg(x, RDMA2_F_TPMORE)?.null_call(x),
            V2_INVAL_HTYPE
        ),
        expect: V2_INVAL_HTYPE,
        fresh: false,
    },
    V2Case {
        name: "v2-continuation-xid-changes",
        run: continuation_xid_changes,
        expect: V2_INVAL_CONT,
        fresh: false,
    },
    V2Case {
        name: "v2-continuation-too-long",
        run: continuation_too_long,
        expect: V2_INVAL_CONT,
        fresh: false,
    },
    V2Case {
        name: "v2-first-message-too-long",
        run: v2_one!(
            |x| {
                let call = Xdr::new().v2_msg(x, 0)?.null_call(x)?;
                Ok(Xdr(call).zeroes(FIRST_MESSAGE_MAX)?.done())
            },
            V2Expect::Closed
        ),
        expect: V2Expect::Closed,
        fresh: true,
    },
    V2Case {
        name: "v2-null-last",
        run: v2_one!(|x| Xdr::new().v2_msg(x, 0)?.null_call(x), V2Expect::Reply),
        expect: V2Expect::Reply,
        fresh: false,
    },
];

/// A sequence whose second message has another XID: the server drops both and answers the
/// second with `RDMA2_ERR_INVAL_CONT` (an error for the first as well is skipped).
fn continuation_xid_changes(c: &Conn, x: u32) -> Result<Seen> {
    let first = x ^ 0x0100;
    let call = Xdr::new().null_call(x)?;
    let (head, tail) = call.split_at(20);
    let fragment = Xdr::new().v2_msg(first, RDMA2_F_MORE)?.done();
    let mut fragment = Xdr(fragment);
    fragment.0.extend_from_slice(head, GFP_KERNEL)?;
    let seen = c.exchange(&fragment.0, QUIET_MS / 3);
    if !matches!(seen, Seen::Nothing) {
        return Ok(seen);
    }
    let mut last = Xdr::new().v2_msg(x, 0)?.done();
    last.extend_from_slice(tail, GFP_KERNEL)?;
    let seen = c.exchange(&last, REPLY_MS);
    if seen.matches_v2(V2_INVAL_CONT, first) {
        return Ok(c.receive(REPLY_MS));
    }
    Ok(seen)
}

/// A sequence longer than the server reassembles: nine fragments of [`FRAGMENT`] bytes, the
/// ninth answered with `RDMA2_ERR_INVAL_CONT`.
fn continuation_too_long(c: &Conn, x: u32) -> Result<Seen> {
    let fragment = Xdr::new().v2_msg(x, RDMA2_F_MORE)?.zeroes(FRAGMENT)?.done();
    for _ in 0..8 {
        let seen = c.exchange(&fragment, 200);
        if !matches!(seen, Seen::Nothing) {
            return Ok(seen);
        }
    }
    Ok(c.exchange(&fragment, REPLY_MS))
}

/// Runs Version 2 case `index`; whether it passed.
fn run_v2_case(addr: SocketAddr, conn: &mut Option<Conn>, index: usize, case: &V2Case) -> bool {
    let xid = 0x7632_0000 | ((index as u32) << 4);
    if case.fresh {
        *conn = None;
    }
    if conn.is_none() {
        match Conn::connect_v2(addr) {
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
    let seen = match (case.run)(c, xid) {
        Ok(seen) => seen,
        Err(e) => {
            pr_info!("{}: FAIL (a message / {:?})\n", case.name, e);
            return false;
        }
    };
    let props = c.props.get();
    let mut ok = seen.matches_v2(case.expect, xid);
    let closed = match seen {
        Seen::Closed(_) => Some(seen),
        _ => match c.null_answered(xid | 1) {
            Ok(()) => None,
            Err(closed @ Seen::Closed(_)) => Some(closed),
            Err(other) => {
                pr_info!(
                    "{}: FAIL ({} / {}; NULL call then got: {})\n",
                    case.name,
                    case.expect,
                    V2Seen(&seen),
                    V2Seen(&other)
                );
                *conn = None;
                return false;
            }
        },
    };
    let after = match closed {
        None => After::Alive,
        Some(why) => {
            let why = (!matches!(seen, Seen::Closed(_))).then_some(why);
            match reconnect(addr, conn, xid | 2, true) {
                Ok(()) => After::Reconnected(why),
                Err(e) => After::Lost(why, e),
            }
        }
    };
    // Only the case that wants the connection's end may cost it.
    ok &= match after {
        After::Alive => case.expect != V2Expect::Closed,
        After::Reconnected(_) => case.expect == V2Expect::Closed,
        After::Lost(..) | After::Broken(_) => false,
    };
    // The server's properties precede its first answer on a connection it keeps.
    ok &= props > 0 || case.expect == V2Expect::Closed;
    let verdict = if ok { "ok" } else { "FAIL" };
    pr_info!(
        "{}: {} ({}{}{}; {} server RDMA2_CONNPROP; {})\n",
        case.name,
        verdict,
        if ok { "" } else { "expected " },
        Wanted(ok, case.expect),
        V2Seen(&seen),
        props,
        after
    );
    ok
}

/// "EXPECTED / " before what was seen, for a failed case.
struct Wanted(bool, V2Expect);

impl fmt::Display for Wanted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 {
            Ok(())
        } else {
            write!(f, "{} / ", self.1)
        }
    }
}

/// Counts `seen` in `answered` if it is the reply to a flood call (XIDs above `base`); why
/// the connection ended, if it did.
fn flood_answer(seen: Seen, base: u32, answered: &mut u32) -> Option<&'static str> {
    match seen {
        Seen::Closed(why) => Some(why),
        Seen::Message { words, .. } => {
            if words[0] > base && seen.matches_v2(V2Expect::Reply, words[0]) {
                *answered += 1;
            }
            None
        }
        Seen::Nothing => None,
    }
}

/// The credit overrun (see the module documentation); whether it passed.
fn credit_overrun(addr: SocketAddr) -> bool {
    let base = 0x6366_0000;
    let conn = match Conn::connect_v2(addr) {
        Ok(conn) => conn,
        Err(e) => {
            pr_info!("credit-overrun: FAIL (a connection / {:?})\n", e);
            return false;
        }
    };
    if let Err(seen) = conn.null_answered(base) {
        pr_info!("credit-overrun: FAIL (a NULL reply / {})\n", V2Seen(&seen));
        return false;
    }
    let granted = conn.granted.get();
    let mut answered = 0u32;
    let mut closed = None;
    'flood: for i in 1..=FLOOD {
        let Ok(call) = conn.null_call(base + i) else {
            return false;
        };
        // The send slot is reused once its Send completed.
        let target = conn.sent.get() + 1;
        if conn.send(&call).is_err() {
            closed = Some("a Send could not be posted");
            break;
        }
        let mut idle = 0;
        while conn.sent.get() < target {
            match conn.receive(100) {
                Seen::Nothing if idle < 50 => idle += 1,
                Seen::Nothing => {
                    closed = Some("our Send did not complete");
                    break 'flood;
                }
                seen => {
                    closed = flood_answer(seen, base, &mut answered);
                    if closed.is_some() {
                        break 'flood;
                    }
                }
            }
        }
    }
    while closed.is_none() && answered < FLOOD {
        match conn.receive(REPLY_MS) {
            Seen::Nothing => break,
            seen => closed = flood_answer(seen, base, &mut answered),
        }
    }
    let ok = match closed {
        // Every call answered, and the connection still serves.
        None => answered == FLOOD && conn.null_answered(base | 0xfff0).is_ok(),
        // The connection ended: a new one must be served.
        Some(_) => {
            drop(conn);
            let mut fresh = None;
            reconnect(addr, &mut fresh, base | 0xfff1, true).is_ok()
        }
    };
    pr_info!(
        "credit-overrun: {} ({} of {} calls answered, the server granted {}; {})\n",
        if ok { "ok" } else { "FAIL" },
        answered,
        FLOOD,
        granted,
        match closed {
            None => "the connection kept",
            Some(why) => why,
        }
    );
    ok
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
        let v2 = match VERSION.get().map(|v| v.as_bytes()) {
            None | Some(b"1") => false,
            Some(b"2") => true,
            Some(_) => {
                pr_err!("give version=1 or version=2\n");
                return Err(EINVAL);
            }
        };
        let cases = if v2 { V2_CASES.len() } else { CASES.len() };
        pr_info!("{} cases against {}\n", cases + 1, addr);
        let mut conn = None;
        let mut passed = 0;
        if v2 {
            for (index, case) in V2_CASES.iter().enumerate() {
                if run_v2_case(addr, &mut conn, index, case) {
                    passed += 1;
                }
            }
        } else {
            for (index, case) in CASES.iter().enumerate() {
                if run_case(addr, &mut conn, index, case) {
                    passed += 1;
                }
            }
        }
        drop(conn);
        let last = if v2 {
            credit_overrun(addr)
        } else {
            replay(addr)
        };
        if last {
            passed += 1;
        }
        pr_info!("done: {} ok, {} failed\n", passed, cases + 1 - passed);
        Ok(RpcrdmaProbe)
    }
}
