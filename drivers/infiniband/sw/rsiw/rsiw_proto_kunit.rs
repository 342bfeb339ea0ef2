// SPDX-License-Identifier: GPL-2.0

//! In-kernel KUnit suite of rsiw's iWARP protocol code.
//!
//! The files under `proto/` are shared with the host crate `host/rsiw-proto`, where they are
//! tested exhaustively and fuzzed. This module builds the same files with the kernel's flags
//! (`-Dwarnings`, overflow checks, the kernel's clippy lints), plugs in the kernel's own
//! CRC32c, and checks the two agree: the software CRC and `crc32c()`, and an FPDU framed and
//! parsed with the kernel's CRC, fed in pieces of every size as TCP would deliver it; and the
//! transmit and receive engines looped back through the kernel's CRC.

use core::ops::ControlFlow;
use kernel::{kunit::suite::Test, kunit_expect, kunit_expect_eq, prelude::*};

pub mod proto;

mod kernel_crc32c;
use kernel_crc32c::KernelCrc32c;

use proto::{
    crc32c::{checksum, SoftCrc32c},
    fpdu::{encode_fpdu, FpduError, FpduReceiver, RxEvent},
    mpa::{encode_frame, EnhancedData, FrameKind, MpaFlags, MpaFrame, RtrKinds},
    ord_ird::{Requester, Responder},
    placement::{AccessFlags, Grant, MemoryRegion, StagState},
    rx_engine::{self, RxContext, RxEngine},
    segmenter::fpdu_size,
    terminate::TermError,
    tx_engine::{TxEngine, WorkRequest, MAX_FPDU_HEADER_LEN},
};

module! {
    type: RsiwProtoKunit,
    name: "rsiw_proto_kunit",
    author: "rsiw project",
    description: "KUnit suite of the rsiw iWARP protocol code, built in the kernel",
    license: "GPL",
}

struct RsiwProtoKunit;

impl kernel::Module for RsiwProtoKunit {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(RsiwProtoKunit)
    }
}

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(131) ^ (i >> 3)) as u8
}

fn kernel_crc_matches_software_crc(test: &mut Test) -> Result {
    let mut data = [0u8; 300];
    for (i, b) in data.iter_mut().enumerate() {
        *b = pattern(i);
    }
    for len in 0..data.len() {
        let (k, s) = (
            checksum(KernelCrc32c, &data[..len]),
            checksum(SoftCrc32c, &data[..len]),
        );
        if !kunit_expect_eq!(test, k, s) {
            break;
        }
    }
    kunit_expect_eq!(test, checksum(KernelCrc32c, b"123456789"), 0xe306_9283u32);
    Ok(())
}

/// An untagged Send ULPDU: DDP control (L, DV 1), RDMAP control (RV 1, Send), reserved, QN 0,
/// MSN 1, MO 0, then 37 bytes of payload.
fn send_ulpdu() -> [u8; 55] {
    let mut u = [0u8; 55];
    u[0] = 0x41;
    u[1] = 0x43;
    u[13] = 1;
    for (i, b) in u[18..].iter_mut().enumerate() {
        *b = pattern(i);
    }
    u
}

/// Feeds `fpdu` to a receiver in pieces of `step` bytes; returns the payload bytes seen, the
/// number of completed FPDUs and the error, if any.
fn parse_in_steps(fpdu: &[u8], step: usize) -> (usize, usize, Option<FpduError>) {
    let mut rx = FpduReceiver::new(KernelCrc32c, true);
    let (mut payload, mut complete) = (0, 0);
    for piece in fpdu.chunks(step) {
        let res = rx.feed(piece, |ev| {
            match ev {
                RxEvent::Payload { data, .. } => payload += data.len(),
                RxEvent::Complete { .. } => complete += 1,
                _ => {}
            }
            ControlFlow::Continue(())
        });
        if let Err(e) = res {
            return (payload, complete, Some(e));
        }
    }
    (payload, complete, None)
}

fn fpdu_with_kernel_crc_parses_in_any_pieces(test: &mut Test) -> Result {
    let ulpdu = send_ulpdu();
    let mut fpdu = [0u8; 64];
    let Ok(len) = encode_fpdu(&mut fpdu, &ulpdu, Some(KernelCrc32c)) else {
        kunit_expect!(test, false, "encode_fpdu failed");
        return Ok(());
    };
    // 2 length bytes + 55 + 3 pad + 4 CRC.
    kunit_expect_eq!(test, len, 64);
    for step in 1..=len {
        let (payload, complete, err) = parse_in_steps(&fpdu[..len], step);
        kunit_expect_eq!(test, err, None);
        kunit_expect_eq!(test, complete, 1);
        kunit_expect!(
            test,
            payload == 37,
            "{} payload bytes in steps of {}",
            payload,
            step
        );
    }
    Ok(())
}

fn fpdu_crc_error_is_detected(test: &mut Test) -> Result {
    let ulpdu = send_ulpdu();
    let mut fpdu = [0u8; 64];
    let len = encode_fpdu(&mut fpdu, &ulpdu, Some(KernelCrc32c)).map_err(|_| EINVAL)?;
    fpdu[30] ^= 0x10;
    let (_, complete, err) = parse_in_steps(&fpdu[..len], 7);
    kunit_expect_eq!(test, complete, 0);
    kunit_expect!(
        test,
        matches!(err, Some(FpduError::CrcMismatch { .. })),
        "got {:?}",
        err
    );
    Ok(())
}

fn mpa_request_round_trip(test: &mut Test) -> Result {
    let enhanced = EnhancedData {
        ird: 16,
        ord: 0x3fff,
        peer_to_peer: true,
        rtr: RtrKinds {
            send: false,
            write: true,
            read: true,
        },
    };
    let flags = MpaFlags {
        crc: true,
        ..Default::default()
    };
    let mut buf = [0u8; 64];
    let len = encode_frame(
        &mut buf,
        FrameKind::Request,
        flags,
        2,
        Some(&enhanced),
        b"ulp",
    )
    .map_err(|_| EINVAL)?;
    kunit_expect_eq!(test, len, 20 + 4 + 3);
    kunit_expect_eq!(test, &buf[..16], b"MPA ID Req Frame");
    match MpaFrame::decode(&buf[..len], FrameKind::Request) {
        Ok((frame, used)) => {
            kunit_expect_eq!(test, used, len);
            kunit_expect_eq!(test, frame.enhanced, Some(enhanced));
            kunit_expect_eq!(test, frame.ulp_private_data, b"ulp");
            kunit_expect!(test, frame.header.flags.crc);
        }
        Err(e) => {
            kunit_expect!(test, false, "decode failed: {:?}", e);
        }
    }
    // A reply key where a request is expected is refused.
    kunit_expect!(
        test,
        MpaFrame::decode(&buf[..len], FrameKind::Reply).is_err()
    );
    Ok(())
}

/// An RNIC in memory behind the receive engine: one 8 KiB region (STag 0x100, PD 1) and one
/// 4 KiB receive buffer.
struct Memory {
    region: KVec<u8>,
    recv: KVec<u8>,
    recv_posted: bool,
    requester: Requester,
    responder: Responder,
    sends: u32,
}

const STAG: u32 = 0x100;

impl RxContext for Memory {
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
        (stag >> 8 == STAG >> 8).then(|| MemoryRegion {
            stag: STAG,
            state: StagState::Valid,
            pd: 1,
            access: AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
            base: 0,
            len: self.region.len() as u64,
            zero_based: true,
            epoch: 0,
        })
    }

    fn place_tagged(&mut self, grant: &Grant, data: &[u8]) -> Result<(), TermError> {
        let region = self.lookup_stag(grant.access.stag);
        let offset = grant.recheck(region.as_ref(), 1)?;
        let start = usize::try_from(offset).map_err(|_| TermError::DdpBaseBounds)?;
        self.region
            .get_mut(start..start + data.len())
            .ok_or(TermError::DdpBaseBounds)?
            .copy_from_slice(data);
        Ok(())
    }

    fn recv_buffer(&mut self) -> Option<u64> {
        core::mem::take(&mut self.recv_posted).then(|| self.recv.len() as u64)
    }

    fn place_untagged(&mut self, offset: u32, data: &[u8]) -> Result<(), TermError> {
        let start = offset as usize;
        self.recv
            .get_mut(start..start + data.len())
            .ok_or(TermError::DdpMessageTooLong)?
            .copy_from_slice(data);
        Ok(())
    }

    fn requester(&mut self) -> &mut Requester {
        &mut self.requester
    }

    fn responder(&mut self) -> &mut Responder {
        &mut self.responder
    }

    fn deliver(&mut self, event: rx_engine::RxEvent<'_>) -> Result<(), TermError> {
        if let rx_engine::RxEvent::Send { .. } = event {
            self.sends += 1;
        }
        Ok(())
    }
}

/// Serializes `wr` with `tx` (headers, payload, trailer as the kernel will send them).
fn serialize(
    tx: &mut TxEngine<KernelCrc32c>,
    wr: WorkRequest<'_>,
    payload: &[u8],
    out: &mut KVec<u8>,
) -> Result {
    let mut msg = tx.start(wr).map_err(|_| EINVAL)?;
    let mut header = [0u8; MAX_FPDU_HEADER_LEN];
    while let Some(mut fpdu) = msg.next_fpdu(&mut header).map_err(|_| EINVAL)? {
        let start = fpdu.payload_offset as usize;
        let data = payload
            .get(start..start + fpdu.payload_len as usize)
            .ok_or(EINVAL)?;
        fpdu.hash_payload(data);
        out.extend_from_slice(&header[..fpdu.header_len], GFP_KERNEL)?;
        out.extend_from_slice(data, GFP_KERNEL)?;
        out.extend_from_slice(fpdu.trailer().as_bytes(), GFP_KERNEL)?;
    }
    Ok(())
}

fn engines_loop_back_with_kernel_crc(test: &mut Test) -> Result {
    let mut payload = KVec::new();
    for i in 0..6000 {
        payload.push(pattern(i), GFP_KERNEL)?;
    }
    for crc in [false, true] {
        // A 1460-byte MSS: a 3000-byte Send and a 6000-byte Write take several FPDUs each.
        let mut tx = TxEngine::new(crc.then_some(KernelCrc32c), fpdu_size(1460, 1));
        let mut wire = KVec::new();
        let send = WorkRequest::Send {
            len: 3000,
            solicited: false,
            invalidate: None,
        };
        serialize(&mut tx, send, &payload[..3000], &mut wire)?;
        let write = WorkRequest::Write {
            stag: STAG,
            tagged_offset: 1000,
            len: 6000,
        };
        serialize(&mut tx, write, &payload, &mut wire)?;
        let mut mem = Memory {
            region: KVec::from_elem(0u8, 8192, GFP_KERNEL)?,
            recv: KVec::from_elem(0u8, 4096, GFP_KERNEL)?,
            recv_posted: true,
            requester: Requester::new(4),
            responder: Responder::new(4),
            sends: 0,
        };
        let mut rx = RxEngine::new(KernelCrc32c, crc, 1);
        // In pieces of 700 bytes, as TCP might deliver them.
        for piece in wire.chunks(700) {
            let used = rx.feed(piece, &mut mem);
            kunit_expect_eq!(test, used, Ok(piece.len()));
        }
        kunit_expect_eq!(test, mem.sends, 1);
        kunit_expect!(test, mem.recv.get(..3000) == payload.get(..3000));
        kunit_expect!(test, mem.region.get(1000..7000) == payload.get(..6000));
    }
    Ok(())
}

kernel::kunit_suite!(
    rsiw_proto,
    [
        kernel_crc_matches_software_crc,
        fpdu_with_kernel_crc_parses_in_any_pieces,
        fpdu_crc_error_is_detected,
        mpa_request_round_trip,
        engines_loop_back_with_kernel_crc
    ]
);
