// SPDX-License-Identifier: GPL-2.0

//! Shared by the engine tests: an in-memory RNIC behind [`RxContext`] and a
//! helper that serializes a work request with the transmit engine; in
//! [`qp`], the in-memory RNIC behind the QP engine's context, which the
//! `qp_engine` fuzz target uses as well.

#![allow(dead_code)]

pub mod qp;

use std::collections::{HashMap, VecDeque};

use rsiw_proto::proto::atomic::{AtomicRequestHeader, AtomicResponseHeader};
use rsiw_proto::proto::crc32c::SoftCrc32c;
use rsiw_proto::proto::immediate::ImmediateData;
use rsiw_proto::proto::ord_ird::{Requester, Responder};
use rsiw_proto::proto::pieces::Pieces;
use rsiw_proto::proto::placement::{AccessFlags, Grant, MemoryRegion, StagState};
use rsiw_proto::proto::rdmap::ReadRequestHeader;
use rsiw_proto::proto::rx_engine::{RxContext, RxEngine, RxEvent, RxTermination};
use rsiw_proto::proto::terminate::{TermError, TerminateControl};
use rsiw_proto::proto::tx_engine::{TxEngine, WorkRequest, MAX_FPDU_HEADER_LEN};

pub const PD: u32 = 7;

/// A completion as the tests record it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ev {
    Send {
        msn: u32,
        data: Vec<u8>,
        solicited: bool,
        invalidate: Option<u32>,
    },
    Immediate {
        msn: u32,
        data: ImmediateData,
        solicited: bool,
    },
    ReadRequest {
        slot: usize,
        header: ReadRequestHeader,
        source_offset: u64,
    },
    ReadResponse {
        slot: usize,
    },
    AtomicRequest {
        slot: usize,
        header: AtomicRequestHeader,
        target_offset: u64,
    },
    AtomicResponse {
        slot: usize,
        header: AtomicResponseHeader,
    },
    Terminate {
        control: TerminateControl,
        ddp_header: Option<Vec<u8>>,
    },
}

/// Memory regions, receive buffers and the credit queues of one QP.
pub struct Mem {
    /// Regions by STag index (STag >> 8), with their bytes.
    pub regions: HashMap<u32, (MemoryRegion, Vec<u8>)>,
    /// Lengths of the posted receive buffers.
    pub posted: VecDeque<u64>,
    /// Receive buffers taken, with what was placed in them.
    pub taken: Vec<Vec<u8>>,
    pub requester: Requester,
    pub responder: Responder,
    pub events: Vec<Ev>,
    /// Payload placements: runs of pieces placed with one call.
    pub runs: usize,
}

impl Mem {
    pub fn new() -> Self {
        Self {
            regions: HashMap::new(),
            posted: VecDeque::new(),
            taken: Vec::new(),
            requester: Requester::new(16),
            responder: Responder::new(16),
            events: Vec::new(),
            runs: 0,
        }
    }

    /// Adds a zero-based region of `len` bytes with `access`.
    pub fn add_region(&mut self, stag: u32, len: u64, access: AccessFlags) {
        let region = MemoryRegion {
            stag,
            state: StagState::Valid,
            pd: PD,
            access,
            base: 0,
            len,
            zero_based: true,
            epoch: 0,
        };
        self.regions
            .insert(stag >> 8, (region, vec![0; len as usize]));
    }

    /// The bytes `grant` names, re-checked against the region as it is now,
    /// as a driver must check every access.
    pub fn granted(&mut self, grant: &Grant) -> Result<&mut [u8], TermError> {
        let region = self.lookup_stag(grant.access.stag);
        let at = grant.recheck(region.as_ref(), PD)? as usize;
        let (_, bytes) = self
            .regions
            .get_mut(&(grant.access.stag >> 8))
            .ok_or(TermError::DdpInvalidStag)?;
        Ok(&mut bytes[at..at + grant.access.len as usize])
    }

    /// The offset from its region's start of what `grant` names (which passes its re-check).
    pub fn offset_of(&mut self, grant: &Grant) -> u64 {
        let region = self.lookup_stag(grant.access.stag);
        grant
            .recheck(region.as_ref(), PD)
            .expect("a grant of an unchanged region")
    }

    pub fn bytes(&self, stag: u32) -> &[u8] {
        &self.regions[&(stag >> 8)].1
    }
}

impl RxContext for Mem {
    fn accept_read_response(
        &mut self,
        _slot: usize,
        _stag: u32,
        _to: u64,
        _len: usize,
        _last: bool,
    ) -> Result<(), TermError> {
        // No per-request sinks here; qp_engine's adapter checks them.
        Ok(())
    }

    fn lookup_stag(&mut self, stag: u32) -> Option<MemoryRegion> {
        self.regions.get(&(stag >> 8)).map(|(r, _)| *r)
    }

    fn place_tagged(&mut self, grant: &Grant, data: &[u8]) -> Result<(), TermError> {
        assert_eq!(grant.access.len, data.len() as u64);
        let bytes = self.granted(grant)?;
        bytes.copy_from_slice(data);
        Ok(())
    }

    fn place_tagged_pieces(&mut self, grant: &Grant, data: Pieces<'_>) -> Result<(), TermError> {
        self.runs += 1;
        assert_eq!(grant.access.len, data.len() as u64);
        let bytes = self.granted(grant)?;
        assert!(data.copy_to(bytes));
        Ok(())
    }

    fn place_untagged_pieces(&mut self, offset: u32, data: Pieces<'_>) -> Result<(), TermError> {
        self.runs += 1;
        let buf = self.taken.last_mut().expect("bound buffer");
        let at = offset as usize;
        assert!(data.copy_to(&mut buf[at..at + data.len()]));
        Ok(())
    }

    fn recv_buffer(&mut self) -> Option<u64> {
        let len = self.posted.pop_front()?;
        self.taken.push(vec![0; len as usize]);
        Some(len)
    }

    fn place_untagged(&mut self, offset: u32, data: &[u8]) -> Result<(), TermError> {
        let buf = self.taken.last_mut().expect("bound buffer");
        let at = offset as usize;
        buf[at..at + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn requester(&mut self) -> &mut Requester {
        &mut self.requester
    }

    fn responder(&mut self) -> &mut Responder {
        &mut self.responder
    }

    fn deliver(&mut self, event: RxEvent<'_>) -> Result<(), TermError> {
        let ev = match event {
            RxEvent::Send {
                msn,
                len,
                solicited,
                invalidate,
            } => Ev::Send {
                msn,
                data: self.taken.last().expect("buffer")[..len as usize].to_vec(),
                solicited,
                invalidate,
            },
            RxEvent::Immediate {
                msn,
                data,
                solicited,
            } => Ev::Immediate {
                msn,
                data,
                solicited,
            },
            RxEvent::ReadRequest {
                slot,
                header,
                source,
            } => Ev::ReadRequest {
                slot,
                header,
                source_offset: self.offset_of(&source),
            },
            RxEvent::ReadResponse { slot } => Ev::ReadResponse { slot },
            RxEvent::AtomicRequest {
                slot,
                header,
                target,
            } => Ev::AtomicRequest {
                slot,
                header,
                target_offset: self.offset_of(&target),
            },
            RxEvent::AtomicResponse { slot, header } => Ev::AtomicResponse { slot, header },
            RxEvent::Terminate(m) => Ev::Terminate {
                control: m.control,
                ddp_header: m.ddp_header.map(<[u8]>::to_vec),
            },
        };
        self.events.push(ev);
        Ok(())
    }
}

/// Serializes `wr` with `tx`, taking payload from `payload`.
pub fn serialize(tx: &mut TxEngine<SoftCrc32c>, wr: WorkRequest<'_>, payload: &[u8]) -> Vec<u8> {
    let mut msg = tx.start(wr).expect("start");
    let mut out = Vec::new();
    let mut header = [0u8; MAX_FPDU_HEADER_LEN];
    while let Some(mut fpdu) = msg.next_fpdu(&mut header).expect("fpdu") {
        out.extend_from_slice(&header[..fpdu.header_len]);
        let start = fpdu.payload_offset as usize;
        let data = &payload[start..start + fpdu.payload_len as usize];
        // Hash in two pieces, as a kernel walking pages would.
        let (a, b) = data.split_at(data.len() / 2);
        fpdu.hash_payload(a);
        fpdu.hash_payload(b);
        out.extend_from_slice(data);
        out.extend_from_slice(fpdu.trailer().as_bytes());
        let expected = fpdu.wire_len();
        assert_eq!(expected % 4, 0);
    }
    assert!(msg.is_done());
    out
}

/// Feeds `stream` to `rx` in chunks of the sizes given (cycled; 0 counts
/// as 1), returning the first termination.
/// Feeds `stream` as socket buffers would hand it over: in pieces of `sizes`
/// (cycled), `per_buffer` pieces to a [`RxEngine::feed_pieces`] call.
pub fn feed_in_buffers(
    rx: &mut RxEngine<SoftCrc32c>,
    mem: &mut Mem,
    stream: &[u8],
    sizes: &[usize],
    per_buffer: usize,
) -> Result<(), Box<RxTermination>> {
    let mut pieces: Vec<&[u8]> = Vec::new();
    let mut pos = 0;
    for k in 0.. {
        if pos >= stream.len() {
            break;
        }
        let size = sizes
            .get(k % sizes.len().max(1))
            .copied()
            .unwrap_or(stream.len())
            .max(1);
        let end = (pos + size).min(stream.len());
        pieces.push(&stream[pos..end]);
        pos = end;
    }
    for buffer in pieces.chunks(per_buffer.max(1)) {
        let offered: usize = buffer.iter().map(|p| p.len()).sum();
        let n = match rx.feed_pieces(Pieces::new(buffer), mem) {
            Ok(n) => n,
            Err(e) => {
                let term = *rx.termination().expect("termination recorded");
                assert_eq!(term.error(), e);
                return Err(Box::new(term));
            }
        };
        if n < offered {
            assert!(!rx.is_running());
            return Ok(());
        }
    }
    Ok(())
}

pub fn feed_chunked(
    rx: &mut RxEngine<SoftCrc32c>,
    mem: &mut Mem,
    stream: &[u8],
    sizes: &[usize],
) -> Result<(), Box<RxTermination>> {
    let mut pos = 0;
    let mut k = 0;
    while pos < stream.len() {
        let size = if sizes.is_empty() {
            stream.len()
        } else {
            sizes[k % sizes.len()].max(1)
        };
        k += 1;
        let end = (pos + size).min(stream.len());
        let n = match rx.feed(&stream[pos..end], mem) {
            Ok(n) => n,
            Err(e) => {
                let term = *rx.termination().expect("termination recorded");
                assert_eq!(term.error(), e);
                return Err(Box::new(term));
            }
        };
        if n < end - pos {
            assert!(!rx.is_running());
            return Ok(());
        }
        pos = end;
    }
    Ok(())
}
