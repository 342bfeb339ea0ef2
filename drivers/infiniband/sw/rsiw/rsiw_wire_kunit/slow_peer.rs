// SPDX-License-Identifier: GPL-2.0

//! Peers that are slow on purpose: one that trickles its MPA Request, one that stops reading.

use super::*;

/// An MPA Request trickled a byte a second: the exchange's deadline (`mpa_timeout_ms`, 10 s by
/// default) closes the connection long before the last byte (the frame has over 30), however
/// regularly bytes come, and the ULP never hears of it.
pub(super) fn trickled_mpa_request_is_closed_by_the_deadline(test: &mut Test) -> Result {
    let l = listener(7814)?;
    let sock = connect(7814)?;
    let mut hs = InitiatorHandshake::new(client_server_config(4, 4));
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = hs
        .request(b"a slow peer's private data", &mut frame)
        .map_err(|_| EINVAL)?;
    let mut closed = false;
    let mut sent = 0;
    for byte in frame.get(..len).ok_or(EINVAL)?.chunks(1) {
        let mut buf = [0u8; 16];
        match sock.recv(&mut buf, MsgFlags::DONTWAIT) {
            Err(e) if e == EAGAIN => {}
            _ => {
                closed = true;
                break;
            }
        }
        if sock.send(byte, MsgFlags::NOSIGNAL).is_err() {
            closed = true;
            break;
        }
        sent += 1;
        sleep_ms(1000);
    }
    kunit_expect!(test, closed, "a request trickled over {} s was kept", len);
    kunit_expect!(test, sent < len);
    kunit_expect!(
        test,
        !l.has_events(),
        "the ULP heard of the trickled request"
    );
    Ok(())
}

/// Bytes of each RDMA Write that fills the peer's window.
const STALLED_WRITE_LEN: usize = 1 << 20;

/// RDMA Writes that fill the peer's window.
const WRITES: u64 = 4;

/// Posts [`WRITES`] RDMA Writes of `source` to consecutive ranges from `base` (tags from
/// `first_tag`) to a peer that reads nothing, and lets them fill its window: returns the
/// completions there are after, which must not be all of them.
fn fill_window(
    test: &mut Test,
    qp: &KernelQp,
    source: &Arc<DmaBuffer>,
    base: u64,
    first_tag: u64,
) -> Result<KVec<WorkCompletion>> {
    for k in 0..WRITES {
        qp.post_send(
            &SendWr::Write {
                local: Sge {
                    buffer: source,
                    offset: 0,
                    len: STALLED_WRITE_LEN,
                },
                remote: Remote {
                    addr: base + k * STALLED_WRITE_LEN as u64,
                    rkey: 0x4200,
                },
            },
            first_tag + k,
        )?;
    }
    sleep_ms(2000);
    let mut done = KVec::new();
    while let Some(wc) = qp.poll() {
        done.push(wc, GFP_KERNEL)?;
    }
    kunit_expect!(
        test,
        done.len() < WRITES as usize,
        "4 MiB went out to a peer reading nothing"
    );
    Ok(done)
}

pub(super) fn zero_window_then_malformed_fpdu_flushes_and_closes(test: &mut Test) -> Result {
    // rsiw writes more than TCP's buffers hold to a peer that reads nothing, so that its
    // transmission waits on a zero window; then the peer sends a malformed FPDU. The QP must
    // fail without waiting for the window: its work requests flush, the ULP hears the
    // connection end, and destroying the QP returns.
    let (_l, mut server, sock, pd) = established(test, 7823)?;
    let source = DmaBuffer::new(&pd, STALLED_WRITE_LEN)?;
    let qp = server.qp()?;
    let mut done = fill_window(test, qp, &source, 0, 11)?;
    let mut wire = fpdus(
        WorkRequest::Send {
            len: 8,
            solicited: false,
            invalidate: None,
        },
        &[2u8; 8],
    )?;
    // A DDP version of 3 (byte 2: DDP control, its low bits the version).
    let ctrl = wire.get_mut(LENGTH_FIELD_LEN).ok_or(EINVAL)?;
    *ctrl |= 0x03;
    sock.send(&wire, MsgFlags::NONE)?;
    let e = server.next_event(msecs_to_jiffies(5000))?;
    kunit_expect_eq!(test, e.name(), "DISCONNECTED");
    let qp = server.qp()?;
    while done.len() < WRITES as usize {
        done.push(qp.wait(msecs_to_jiffies(5000))?, GFP_KERNEL)?;
    }
    let last = done.last().ok_or(EINVAL)?;
    kunit_expect_eq!(test, last.tag, 10 + WRITES);
    kunit_expect!(
        test,
        !last.status.is_success(),
        "the stalled Write completed"
    );
    // Returns (the scenario's time limit catches it if not).
    server.destroy_qp();
    drop(sock);
    Ok(())
}

/// The byte of the written pattern at offset `i` of a source buffer.
fn pattern_byte(i: usize) -> u8 {
    (i % 251) as u8
}

pub(super) fn zero_window_then_reading_resumes_transmission(test: &mut Test) -> Result {
    // rsiw writes more than TCP's buffers hold to a peer that stops reading: what TCP has no
    // room for waits in the QP. Once the peer reads, the socket's room resumes it: every byte
    // arrives once, in order, and every Write completes.
    let (_l, mut server, sock, pd) = established(test, 7826)?;
    let source = DmaBuffer::new(&pd, STALLED_WRITE_LEN)?;
    let mut pattern = KVVec::with_capacity(STALLED_WRITE_LEN, GFP_KERNEL)?;
    for i in 0..STALLED_WRITE_LEN {
        pattern.push(pattern_byte(i), GFP_KERNEL)?;
    }
    source.write(0, &pattern)?;
    let qp = server.qp()?;
    let base: u64 = 0x7000_0000;
    let mut done = fill_window(test, qp, &source, base, 21)?;
    let total = WRITES as usize * STALLED_WRITE_LEN;
    let mut inbox = Inbox::new(&[])?;
    let mut next = base;
    while next < base + total as u64 {
        let fpdu = inbox.next_fpdu(&sock)?;
        let seg = segment(fpdu)?;
        let to = match (seg.opcode, seg.ddp) {
            (Opcode::RdmaWrite, DdpHeader::Tagged(h)) if h.stag == 0x4200 => h.tagged_offset,
            _ => {
                kunit_expect!(test, false, "not one of the Writes: {:?}", seg.opcode);
                return Err(EPROTO);
            }
        };
        let at = ((to - base) % STALLED_WRITE_LEN as u64) as usize;
        let ok = to == next && pattern.get(at..at + seg.payload.len()) == Some(seg.payload);
        if !ok {
            kunit_expect!(
                test,
                false,
                "Write bytes at {:#x} wrong (expected {:#x})",
                to,
                next
            );
            return Err(EPROTO);
        }
        next += seg.payload.len() as u64;
    }
    while done.len() < WRITES as usize {
        done.push(qp.wait(msecs_to_jiffies(5000))?, GFP_KERNEL)?;
    }
    for (k, wc) in done.iter().enumerate() {
        kunit_expect_eq!(test, wc.tag, 21 + k as u64);
        kunit_expect!(test, wc.status.is_success(), "Write {} failed", k);
    }
    server.destroy_qp();
    Ok(())
}

/// Connections a slow peer opens to one listener: more than a listener keeps in their MPA
/// exchange at once.
const SLOW_CONNECTIONS: usize = 300;

/// Whether the peer closes `sock` (or it fails) while `budget_ms` lasts; the time waited is
/// taken from the budget.
fn closed_within(sock: &TcpSocket, budget_ms: &mut u32) -> bool {
    let mut buf = [0u8; 64];
    loop {
        match sock.recv(&mut buf, MsgFlags::DONTWAIT) {
            Err(e) if e == EAGAIN => {}
            Ok(n) if n > 0 => {}
            _ => return true,
        }
        if *budget_ms == 0 {
            return false;
        }
        sleep_ms(50);
        *budget_ms = budget_ms.saturating_sub(50);
    }
}

pub(super) fn slow_handshakes_keep_out_no_connect_and_stall_no_qp(test: &mut Test) -> Result {
    // A peer opens 300 connections to a listener and sends one byte of an MPA Request on
    // each, then nothing. A QP connected before keeps transmitting, a legitimate connect to
    // the same listener completes, and every slow connection is closed by the MPA deadline.
    let (_la, mut a, a_sock, a_pd) = established(test, 7827)?;
    let l = CmId::new()?;
    l.bind(&at(7828))?;
    l.listen(512)?;
    let mut slow = KVec::with_capacity(SLOW_CONNECTIONS, GFP_KERNEL)?;
    for _ in 0..SLOW_CONNECTIONS {
        let sock = connect(7828)?;
        sock.send(b"M", MsgFlags::NOSIGNAL)?;
        slow.push(sock, GFP_KERNEL)?;
    }
    let buffer = DmaBuffer::new(&a_pd, 64)?;
    buffer.write(0, &[7u8; 64])?;
    a.qp()?.post_send(
        &SendWr::Send {
            local: Sge {
                buffer: &buffer,
                offset: 0,
                len: 64,
            },
            solicited: false,
        },
        1,
    )?;
    let mut inbox = Inbox::new(&[])?;
    let seg = segment(inbox.next_fpdu(&a_sock)?)?;
    kunit_expect!(
        test,
        seg.opcode == Opcode::Send && seg.payload == [7u8; 64],
        "the connected QP's Send did not arrive whole"
    );
    let sock = connect(7828)?;
    let legit = client_server_accept_on(test, l, sock, client_server_config(4, 4), None, None)?;
    // The last exchanges started a few seconds ago: the deadline (10 s) ends them well within
    // this budget, and the earlier ones were closed to make room.
    let mut budget_ms = 15000;
    let open = slow
        .iter()
        .filter(|s| !closed_within(s, &mut budget_ms))
        .count();
    kunit_expect_eq!(test, open, 0);
    drop(legit);
    a.destroy_qp();
    Ok(())
}
