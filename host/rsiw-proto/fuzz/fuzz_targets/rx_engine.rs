// SPDX-License-Identifier: GPL-2.0

//! The receive engine fed arbitrary bytes, at once, in fuzzer-chosen chunks
//! and in socket buffers of such chunks, over a small in-memory RNIC: it
//! never panics, every placement lies inside the checked region or receive
//! buffer, and all feedings give the same completions, memory contents and
//! termination.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_proto::proto::crc32c::SoftCrc32c;
use rsiw_proto::proto::ord_ird::{RequestKind, Requester, Responder};
use rsiw_proto::proto::pieces::Pieces;
use rsiw_proto::proto::placement::{AccessFlags, Grant, MemoryRegion, StagState};
use rsiw_proto::proto::rx_engine::{RxContext, RxEngine, RxEvent, RxTermination};
use rsiw_proto::proto::terminate::TermError;

const PD: u32 = 1;

#[derive(Debug, PartialEq)]
struct Mem {
    regions: Vec<(MemoryRegion, Vec<u8>)>,
    posted: Vec<u64>,
    taken: Vec<Vec<u8>>,
    requester: Requester,
    responder: Responder,
    events: Vec<String>,
}

impl Mem {
    fn new(config: u8) -> Self {
        // Small regions at STag indexes 0 to 3 (keys 0), with varied rights
        // and addressing; the STag of a zero-length RTR (0) names region 0.
        let region = |index: u32, access: AccessFlags, base: u64, zero_based| MemoryRegion {
            stag: index << 8,
            state: StagState::Valid,
            pd: PD,
            access,
            base,
            len: 64,
            zero_based,
            epoch: 0,
        };
        let regions = vec![
            (region(0, AccessFlags::REMOTE_WRITE, 0, true), vec![0; 64]),
            (
                region(1, AccessFlags::REMOTE_READ, 0x1000, false),
                vec![0; 64],
            ),
            (
                region(2, AccessFlags::REMOTE_ATOMIC, 0x2000, false),
                vec![0; 64],
            ),
            (region(3, AccessFlags::LOCAL_WRITE, 0, true), vec![0; 64]),
        ];
        let mut requester = Requester::new(u16::from(config & 7));
        for i in 0..(config >> 3 & 7) {
            let kind = if i % 2 == 0 {
                RequestKind::Read
            } else {
                RequestKind::Atomic
            };
            let _ = requester.try_issue(kind);
        }
        Self {
            regions,
            posted: vec![16, 0, 128, 64],
            taken: Vec::new(),
            requester,
            responder: Responder::new(u16::from(config >> 6)),
            events: Vec::new(),
        }
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
        self.regions.get((stag >> 8) as usize).map(|(r, _)| *r)
    }

    fn place_tagged(&mut self, grant: &Grant, data: &[u8]) -> Result<(), TermError> {
        assert_eq!(grant.access.len, data.len() as u64);
        let region = self.lookup_stag(grant.access.stag);
        // A grant the engine made passes the re-check while nothing changed.
        let at = grant
            .recheck(region.as_ref(), PD)
            .expect("an unchanged region");
        let (_, bytes) = &mut self.regions[(grant.access.stag >> 8) as usize];
        let at = usize::try_from(at).unwrap();
        bytes[at..at + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn recv_buffer(&mut self) -> Option<u64> {
        let len = self.posted.pop()?;
        self.taken.push(vec![0; len as usize]);
        Some(len)
    }

    fn place_untagged(&mut self, offset: u32, data: &[u8]) -> Result<(), TermError> {
        let buf = self.taken.last_mut().unwrap();
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
        if let RxEvent::Terminate(m) = event {
            let mut out = [0u8; 256];
            m.encode(&mut out).unwrap();
        }
        self.events.push(format!("{event:?}"));
        Ok(())
    }
}

/// Feeds `stream` in chunks of `sizes` (cycled; all at once if empty), one
/// chunk per `feed` call, or with `per_buffer` > 0 that many chunks per
/// `feed_pieces` call, as a socket buffer's pieces.
fn run(
    stream: &[u8],
    crc: bool,
    config: u8,
    sizes: &[u8],
    per_buffer: usize,
) -> (Mem, Option<RxTermination>) {
    let mut mem = Mem::new(config);
    let mut rx = RxEngine::new(SoftCrc32c, crc, PD);
    let mut chunks = Vec::new();
    let mut pos = 0;
    let mut k = 0;
    while pos < stream.len() {
        let size = if sizes.is_empty() {
            stream.len()
        } else {
            usize::from(sizes[k % sizes.len()]).max(1)
        };
        k += 1;
        let end = (pos + size).min(stream.len());
        chunks.push(&stream[pos..end]);
        pos = end;
    }
    for buffer in chunks.chunks(per_buffer.max(1)) {
        let offered: usize = buffer.iter().map(|c| c.len()).sum();
        let fed = if per_buffer == 0 {
            rx.feed(buffer[0], &mut mem)
        } else {
            rx.feed_pieces(Pieces::new(buffer), &mut mem)
        };
        match fed {
            Ok(n) if n == offered => {}
            Ok(_) => {
                assert!(!rx.is_running());
                break;
            }
            Err(e) => {
                let term = *rx.termination().unwrap();
                assert_eq!(term.error(), e);
                let mut out = [0u8; 256];
                term.message().encode(&mut out).unwrap();
                return (mem, Some(term));
            }
        }
    }
    (mem, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let Some((&config, rest)) = rest.split_first() else {
        return;
    };
    let nsizes = usize::from(ctl >> 1) % 16;
    let Some((sizes, stream)) = rest.split_at_checked(nsizes.min(rest.len())) else {
        return;
    };
    let crc = ctl & 1 != 0;
    let whole = run(stream, crc, config, &[], 0);
    let chunks = run(stream, crc, config, sizes, 0);
    assert_eq!(whole, chunks);
    // The same chunks as the pieces of socket buffers.
    let per_buffer = usize::from(config % 5) + 1;
    let buffers = run(stream, crc, config, sizes, per_buffer);
    assert_eq!(whole, buffers);
});
