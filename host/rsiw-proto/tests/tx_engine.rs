// SPDX-License-Identifier: GPL-2.0

//! The transmit engine: byte-exact FPDUs, segmentation, MSNs per queue.

mod engine_common;

use engine_common::*;
use rsiw_proto::proto::atomic::{AtomicRequestHeader, AtomicResponseHeader};
use rsiw_proto::proto::crc32c::{checksum, SoftCrc32c};
use rsiw_proto::proto::ddp::QueueNumber;
use rsiw_proto::proto::fpdu::fpdu_len;
use rsiw_proto::proto::immediate::ImmediateData;
use rsiw_proto::proto::rdmap::{Opcode, ReadRequestHeader, Segment};
use rsiw_proto::proto::terminate::{TermError, TerminateMessage};
use rsiw_proto::proto::tx_engine::{TxEngine, TxError, WorkRequest, MAX_FPDU_HEADER_LEN};
use rsiw_proto::proto::wire::EncodeError;

fn with_crc(mut fpdu: Vec<u8>) -> Vec<u8> {
    let crc = checksum(SoftCrc32c, &fpdu);
    fpdu.extend_from_slice(&crc.to_le_bytes());
    fpdu
}

fn send_vectors() -> Vec<u8> {
    let payload: Vec<u8> = (0..50).collect();
    // FPDU 1: 58-byte ULPDU, no pad.
    let mut a = vec![
        0x00, 0x3A, 0x01, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0,
    ];
    a.extend_from_slice(&payload[..40]);
    // FPDU 2: 28-byte ULPDU, L set, MO 40, two pad bytes.
    let mut b = vec![
        0x00, 0x1C, 0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 40,
    ];
    b.extend_from_slice(&payload[40..]);
    b.extend_from_slice(&[0, 0]);
    let mut v = with_crc(a);
    v.extend(with_crc(b));
    v
}

#[test]
fn send_is_byte_exact() {
    let payload: Vec<u8> = (0..50).collect();
    let mut tx = TxEngine::new(Some(SoftCrc32c), 64);
    let wr = WorkRequest::Send {
        len: 50,
        solicited: false,
        invalidate: None,
    };
    assert_eq!(serialize(&mut tx, wr, &payload), send_vectors());
    assert_eq!(tx.next_msn(QueueNumber::Send), 2);
    // Without CRC the field is zero.
    let mut tx = TxEngine::<SoftCrc32c>::new(None, 64);
    let got = serialize(&mut tx, wr, &payload);
    let mut want = send_vectors();
    want[60..64].fill(0);
    let n = want.len();
    want[n - 4..].fill(0);
    assert_eq!(got, want);
}

#[test]
fn write_is_byte_exact() {
    let payload: Vec<u8> = (100..120).collect();
    let mut tx = TxEngine::new(Some(SoftCrc32c), 64);
    let wr = WorkRequest::Write {
        stag: 0x1122_3344,
        tagged_offset: 0x1000,
        len: 20,
    };
    let mut want = vec![0x00, 0x22, 0xC1, 0x40, 0x11, 0x22, 0x33, 0x44];
    want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x10, 0x00]);
    want.extend_from_slice(&payload);
    assert_eq!(serialize(&mut tx, wr, &payload), with_crc(want));
    // Tagged messages take no MSN.
    assert_eq!(tx.next_msn(QueueNumber::Send), 1);
}

#[test]
fn write_segments_advance_the_tagged_offset() {
    let mut tx = TxEngine::new(Some(SoftCrc32c), 64);
    let wr = WorkRequest::Write {
        stag: 5,
        tagged_offset: 1000,
        len: 100,
    };
    let mut msg = tx.start(wr).unwrap();
    let mut buf = [0u8; MAX_FPDU_HEADER_LEN];
    let mut tos = Vec::new();
    while let Some(f) = msg.next_fpdu(&mut buf).unwrap() {
        let seg = Segment::decode(&buf[2..f.header_len]).unwrap();
        match seg.ddp {
            rsiw_proto::proto::ddp::DdpHeader::Tagged(h) => tos.push((
                h.tagged_offset,
                f.payload_offset,
                f.payload_len,
                h.control.last,
            )),
            _ => panic!("untagged write"),
        }
        assert!(f.wire_len() <= 64);
    }
    assert_eq!(
        tos,
        vec![
            (1000, 0, 44, false),
            (1044, 44, 44, false),
            (1088, 88, 12, true)
        ]
    );
    assert!(msg.is_done());
    assert!(msg.next_fpdu(&mut buf).unwrap().is_none());
}

#[test]
fn peek_then_advance_matches_next_fpdu() {
    let mut tx = TxEngine::new(Some(SoftCrc32c), 64);
    let wr = WorkRequest::WriteImmediate {
        stag: 5,
        tagged_offset: 1000,
        len: 60,
        data: ImmediateData::from_be32(7),
        solicited: false,
    };
    let mut peeked = tx.start(wr).unwrap();
    let mut stepped = peeked;
    let (mut a, mut b) = ([0u8; MAX_FPDU_HEADER_LEN], [0u8; MAX_FPDU_HEADER_LEN]);
    let mut lasts = Vec::new();
    while let Some(f) = peeked.peek_fpdu(&mut a).unwrap() {
        // Peeking again describes the same FPDU.
        let again = peeked.peek_fpdu(&mut a).unwrap().unwrap();
        assert_eq!(
            (again.header_len, again.payload_offset),
            (f.header_len, f.payload_offset)
        );
        let g = stepped.next_fpdu(&mut b).unwrap().unwrap();
        assert_eq!(a[..f.header_len], b[..g.header_len]);
        assert_eq!(
            (f.payload_offset, f.payload_len),
            (g.payload_offset, g.payload_len)
        );
        assert_eq!(
            (f.last, f.trailer_len()),
            (g.last, g.trailer().as_bytes().len())
        );
        lasts.push(f.last);
        peeked.advance();
    }
    // Two Write segments, then the Immediate Data message.
    assert_eq!(lasts, vec![false, false, true]);
    assert!(peeked.is_done() && stepped.next_fpdu(&mut b).unwrap().is_none());
}

#[test]
fn msns_per_queue() {
    let mut tx = TxEngine::new(Some(SoftCrc32c), 256);
    let imm = ImmediateData::from_be32(1);
    let send = WorkRequest::Send {
        len: 0,
        solicited: false,
        invalidate: None,
    };
    let rr = ReadRequestHeader {
        sink_stag: 1,
        sink_tagged_offset: 0,
        read_size: 8,
        source_stag: 2,
        source_tagged_offset: 0,
    };
    assert_eq!(tx.start(send).unwrap().msn(), 1);
    let m = tx
        .start(WorkRequest::WriteImmediate {
            stag: 1,
            tagged_offset: 0,
            len: 4,
            data: imm,
            solicited: false,
        })
        .unwrap();
    assert_eq!(m.opcode(), Opcode::RdmaWrite);
    assert_eq!(tx.start(send).unwrap().msn(), 3);
    assert_eq!(tx.start(WorkRequest::ReadRequest(rr)).unwrap().msn(), 1);
    let atomic = AtomicRequestHeader::fetch_add(1, 2, 0, 1, 0);
    assert_eq!(
        tx.start(WorkRequest::AtomicRequest(atomic)).unwrap().msn(),
        2
    );
    let resp = AtomicResponseHeader {
        request_id: 1,
        original_value: 2,
    };
    assert_eq!(
        tx.start(WorkRequest::AtomicResponse(resp)).unwrap().msn(),
        1
    );
    let term = TerminateMessage::reporting(TermError::MpaCrc, None);
    assert_eq!(tx.start(WorkRequest::Terminate(term)).unwrap().msn(), 1);
    assert_eq!(tx.next_msn(QueueNumber::Send), 4);
    assert_eq!(tx.next_msn(QueueNumber::ReadRequest), 3);
    assert_eq!(tx.next_msn(QueueNumber::Terminate), 2);
    assert_eq!(tx.next_msn(QueueNumber::AtomicResponse), 2);
}

#[test]
fn write_with_immediate_is_write_then_immediate() {
    let mut tx = TxEngine::new(Some(SoftCrc32c), 64);
    let imm = ImmediateData::from_be32(0xCAFE);
    let wr = WorkRequest::WriteImmediate {
        stag: 9,
        tagged_offset: 0,
        len: 50,
        data: imm,
        solicited: true,
    };
    let mut msg = tx.start(wr).unwrap();
    let mut buf = [0u8; MAX_FPDU_HEADER_LEN];
    let mut ops = Vec::new();
    while let Some(f) = msg.next_fpdu(&mut buf).unwrap() {
        let seg = Segment::decode(&buf[2..f.header_len]).unwrap();
        ops.push((seg.opcode, f.payload_len, f.last));
    }
    assert_eq!(
        ops,
        vec![
            (Opcode::RdmaWrite, 44, false),
            (Opcode::RdmaWrite, 6, false),
            (Opcode::ImmediateDataSe, 0, true)
        ]
    );
}

#[test]
fn fpdu_too_small() {
    let mut tx = TxEngine::new(Some(SoftCrc32c), 24);
    let send = WorkRequest::Send {
        len: 1,
        solicited: false,
        invalidate: None,
    };
    assert_eq!(tx.start(send).err(), Some(TxError::FpduTooSmall));
    let atomic = AtomicRequestHeader::fetch_add(1, 2, 0, 1, 0);
    assert_eq!(
        tx.start(WorkRequest::AtomicRequest(atomic)).err(),
        Some(TxError::FpduTooSmall)
    );
    // Nothing was numbered.
    assert_eq!(tx.next_msn(QueueNumber::Send), 1);
    assert_eq!(tx.next_msn(QueueNumber::ReadRequest), 1);
    assert_eq!(tx.fpdu_size(), 24);
}

#[test]
fn header_buffer_too_small_does_not_advance() {
    let mut tx = TxEngine::new(Some(SoftCrc32c), 256);
    let send = WorkRequest::Send {
        len: 4,
        solicited: false,
        invalidate: Some(3),
    };
    let mut msg = tx.start(send).unwrap();
    let mut small = [0u8; 10];
    assert!(matches!(
        msg.next_fpdu(&mut small),
        Err(TxError::Encode(EncodeError::BufferTooSmall { .. }))
    ));
    let mut buf = [0u8; MAX_FPDU_HEADER_LEN];
    let f = msg.next_fpdu(&mut buf).unwrap().unwrap();
    assert_eq!(f.header_len, 20);
    assert_eq!(f.wire_len(), fpdu_len(22));
    let seg = Segment::decode(&buf[2..20]).unwrap();
    assert_eq!(seg.opcode, Opcode::SendInvalidate);
    assert_eq!(seg.invalidate_stag(), Some(3));
}

#[test]
fn tagged_offset_wrap() {
    let mut tx = TxEngine::new(Some(SoftCrc32c), 64);
    let wr = WorkRequest::Write {
        stag: 1,
        tagged_offset: u64::MAX - 10,
        len: 100,
    };
    let mut msg = tx.start(wr).unwrap();
    let mut buf = [0u8; MAX_FPDU_HEADER_LEN];
    assert!(msg.next_fpdu(&mut buf).unwrap().is_some());
    assert_eq!(msg.next_fpdu(&mut buf).err(), Some(TxError::ToWrap));
}

#[test]
fn terminate_echo_round_trips() {
    let echo = [
        0x41u8, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0xAA,
    ];
    let mut tx = TxEngine::new(Some(SoftCrc32c), 256);
    let term = TerminateMessage::reporting(TermError::DdpInvalidMo, Some(&echo));
    let s = serialize(&mut tx, WorkRequest::Terminate(term), &[]);
    let seg = Segment::decode(&s[2..2 + 18 + 4 + 2 + 18]).unwrap();
    assert_eq!(seg.opcode, Opcode::Terminate);
    match seg.header {
        rsiw_proto::proto::rdmap::OpcodeHeader::Terminate(m) => {
            assert_eq!(m.control.error(), Some(TermError::DdpInvalidMo));
            assert_eq!(m.ddp_header, Some(&echo[..18]));
            assert_eq!(m.segment_length, Some(19));
        }
        _ => panic!("not a terminate"),
    }
}

#[test]
fn skip_msn_counts_a_message_sent_outside() {
    let mut tx = TxEngine::<SoftCrc32c>::new(None, 1024);
    // The RFC 6581 Send RTR took MSN 1 of queue 0, a Read RTR MSN 1 of
    // queue 1.
    assert_eq!(tx.skip_msn(QueueNumber::Send), 1);
    assert_eq!(tx.skip_msn(QueueNumber::ReadRequest), 1);
    assert_eq!(tx.next_msn(QueueNumber::Send), 2);
    assert_eq!(tx.next_msn(QueueNumber::ReadRequest), 2);
    assert_eq!(tx.next_msn(QueueNumber::Terminate), 1);
    let send = tx
        .start(WorkRequest::Send {
            len: 0,
            solicited: false,
            invalidate: None,
        })
        .unwrap();
    assert_eq!(send.msn(), 2);
    let imm = tx
        .start(WorkRequest::Immediate {
            data: ImmediateData::from_be32(1),
            solicited: false,
        })
        .unwrap();
    assert_eq!(imm.msn(), 3);
    let atomic = tx
        .start(WorkRequest::AtomicRequest(AtomicRequestHeader::fetch_add(
            0, 0x100, 0, 1, 0,
        )))
        .unwrap();
    assert_eq!(atomic.msn(), 2);
}

/// `start_whole` frames what `start` frames for a Send or Write of one FPDU that fits, and
/// otherwise assigns nothing: the next message gets the MSN it would have had.
#[test]
fn start_whole_frames_one_fpdu_as_start_does() {
    let requests = |len| {
        [
            WorkRequest::Send {
                len,
                solicited: false,
                invalidate: None,
            },
            WorkRequest::Send {
                len,
                solicited: true,
                invalidate: Some(0x1234_5678),
            },
            WorkRequest::Write {
                stag: 0xabcd,
                tagged_offset: 0x1_0000_0000 - 3,
                len,
            },
            WorkRequest::WriteImmediate {
                stag: 7,
                tagged_offset: 0,
                len,
                data: ImmediateData::from_be32(9),
                solicited: false,
            },
            WorkRequest::Immediate {
                data: ImmediateData::from_be32(9),
                solicited: true,
            },
        ]
    };
    for crc in [false, true] {
        for fpdu_size in [64, 100, 1024] {
            for len in [0, 1, 7, 50, 57, 58, 59, 200, 1000, 1003, 5000] {
                for out_len in [8, 40, 80, 1100, 8192] {
                    for wr in requests(len) {
                        let mut whole = TxEngine::new(crc.then_some(SoftCrc32c), fpdu_size);
                        let mut reference = whole;
                        whole.skip_msn(QueueNumber::Send);
                        reference.skip_msn(QueueNumber::Send);
                        let mut out = vec![0u8; out_len];
                        let got = whole.start_whole(wr, &mut out);
                        let mut header = [0u8; MAX_FPDU_HEADER_LEN];
                        let mut msg = reference.start(wr).unwrap_or_else(|_| {
                            // Nothing fits: neither frames anything.
                            assert!(got.is_none());
                            reference
                                .start(WorkRequest::Send {
                                    len: 0,
                                    solicited: false,
                                    invalidate: None,
                                })
                                .unwrap()
                        });
                        let first = msg.next_fpdu(&mut header);
                        let case = format!("{wr:?} crc {crc} fpdu {fpdu_size} out {out_len}");
                        match got {
                            Some(fpdu) => {
                                let first = first.unwrap().unwrap();
                                assert!(
                                    first.last && msg.next_fpdu(&mut header).unwrap().is_none(),
                                    "{case}"
                                );
                                assert!(fpdu.wire_len() <= out_len, "{case}");
                                assert_eq!(
                                    &out[..fpdu.header_len],
                                    &header[..first.header_len],
                                    "{case}"
                                );
                                assert_eq!(
                                    (fpdu.payload_offset, fpdu.payload_len, fpdu.last),
                                    (0, len, true),
                                    "{case}"
                                );
                                assert_eq!(fpdu.wire_len(), first.wire_len(), "{case}");
                                assert_eq!(
                                    fpdu.trailer().as_bytes(),
                                    first.trailer().as_bytes(),
                                    "{case}"
                                );
                            }
                            None => {
                                let whole_fits = matches!(
                                    wr,
                                    WorkRequest::Send { .. } | WorkRequest::Write { .. }
                                ) && matches!(first, Ok(Some(f)) if f.last && f.wire_len() <= out_len);
                                assert!(!whole_fits, "{case}: not framed");
                                // Nothing assigned: the next Send gets the MSN after the skipped one.
                                assert_eq!(whole.next_msn(QueueNumber::Send), 2, "{case}");
                            }
                        }
                    }
                }
            }
        }
    }
}
