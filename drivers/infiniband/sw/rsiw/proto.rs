// SPDX-License-Identifier: GPL-2.0

//! The iWARP wire protocols, as pure functions over byte slices.
//!
//! Everything rsiw puts on or takes off a TCP stream is defined here: the MPA
//! connection setup frames, their negotiation and the handshake that
//! sequences them (RFC 5044, RFC 6581), MPA
//! framing with its CRC32c trailer (RFC 5044), the DDP headers (RFC 5041), the
//! RDMAP messages including TERMINATE (RFC 5040), and the atomic and immediate
//! data extensions (RFC 7306). On top of them, [`rx_engine`] and
//! [`tx_engine`] run the data path of one stream: received bytes to placed
//! payload and completions, work requests to FPDUs; [`qp_engine`] ties them
//! to the credit queues and the driver's queues and memory as the sans-IO
//! data path of one RC queue pair. [`siw_abi_entries`] decodes the work queue
//! entries the siw user ABI shares with user space, input as untrusted as
//! the wire's.
//!
//! # Why this code is pure and shared
//!
//! Parsing bytes a remote peer controls is where a kernel RDMA driver is most
//! exposed. These modules therefore depend on `core` only: no allocation, no
//! locks, no kernel bindings, no `unsafe`. Decoders borrow from the input and
//! return typed views; encoders write into a buffer the caller owns and return
//! the number of bytes written. Every arithmetic step is checked and every
//! slice access is bounds-checked by construction, so no input can make them
//! panic.
//!
//! Because nothing here needs the kernel, the very same files are compiled
//! into `rsiw.ko` and into the host crate `host/rsiw-proto`, where `cargo test`
//! and `cargo fuzz` exercise them in seconds. The only outside service the
//! code needs, a CRC32c engine, is abstracted by [`crc32c::Crc32c`], which the
//! kernel implements with its own accelerated `crc32c()`.
//!
//! # Errors
//!
//! Every decode failure is a typed error with a `term()` method that names the
//! TERMINATE layer, error type and error code ([`term_error::TermError`]) the
//! RFCs prescribe for it, so the driver can report the failure to the peer
//! without re-deriving the mapping.

pub mod atomic;
pub mod crc32c;
pub mod ddp;
pub mod fpdu;
pub mod immediate;
pub mod mpa;
pub mod mpa_handshake;
pub mod mpa_negotiation;
pub mod ord_ird;
pub mod pieces;
pub mod placement;
pub mod qp_engine;
pub mod qp_event;
pub mod rdmap;
pub mod rdmap_control;
pub mod rx_engine;
pub mod segmenter;
pub mod siw_abi_entries;
pub mod stats;
pub mod term_error;
pub mod terminate;
pub mod tx_engine;
pub mod wire;
pub mod work_request;
