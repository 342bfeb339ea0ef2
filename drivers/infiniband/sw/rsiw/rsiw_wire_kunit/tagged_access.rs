// SPDX-License-Identifier: GPL-2.0

//! Tagged access is checked when it happens: RDMA Writes whose payload trickles across a change
//! of their region, and Read Responses that do not answer the Read they claim to.

use super::*;

/// Registers `target` on `qp` for remote writes, through the fast-registration MR `mr`.
fn register_for_writes(
    test: &mut Test,
    qp: &kernel::rdma::consumer::kernel_qp::KernelQp,
    mr: &Arc<FastRegMr>,
    target: &Arc<DmaBuffer>,
) -> Result {
    qp.post_send(
        &SendWr::RegMr {
            mr,
            buffer: target,
            access: Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        },
        1,
    )?;
    let wc = qp.wait(msecs_to_jiffies(5000))?;
    kunit_expect!(test, wc.status.is_success() && wc.opcode == WcOpcode::RegMr);
    Ok(())
}

/// Invalidates `mr` with a LOCAL_INV work request on `qp`.
fn local_invalidate(
    test: &mut Test,
    qp: &kernel::rdma::consumer::kernel_qp::KernelQp,
    mr: &Arc<FastRegMr>,
) -> Result {
    qp.post_send(&SendWr::LocalInv { mr }, 2)?;
    let wc = qp.wait(msecs_to_jiffies(5000))?;
    kunit_expect!(test, wc.status.is_success());
    Ok(())
}

/// Bytes of the Write payload (`WRITTEN`) in `buf`.
fn written(buf: &DmaBuffer) -> Result<usize> {
    let mut bytes = [0u8; WRITE_LEN];
    buf.read(0, &mut bytes)?;
    Ok(bytes.iter().filter(|&&b| b == WRITTEN).count())
}

const WRITE_LEN: usize = 256;
const WRITTEN: u8 = 0xa5;

/// An RDMA Write into a region of rsiw's side, in one FPDU of which we send the header and half
/// the payload; then `meanwhile` runs on the QP, the region (which it may take, to deregister
/// it) and its buffer, and returns a region and buffer no byte of the rest may reach either
/// (or `None`); then the rest of the FPDU. Returns the TERMINATE rsiw answers with; checks
/// that no byte arrived after `meanwhile`.
fn write_across(
    test: &mut Test,
    port: u16,
    meanwhile: impl FnOnce(
        &mut Test,
        &CmId,
        &mut Option<Arc<FastRegMr>>,
        &Arc<DmaBuffer>,
    ) -> Result<Option<(Arc<FastRegMr>, Arc<DmaBuffer>)>>,
) -> Result<Option<TermError>> {
    let (_l, server, sock, pd) = established(test, port)?;
    let target = DmaBuffer::new(&pd, WRITE_LEN)?;
    let mr = FastRegMr::new(&pd, 2)?;
    register_for_writes(test, server.qp()?, &mr, &target)?;
    let wire = fpdus(
        WorkRequest::Write {
            stag: mr.rkey(),
            tagged_offset: mr.iova(),
            len: WRITE_LEN as u32,
        },
        &[WRITTEN; WRITE_LEN],
    )?;
    // The FPDU ends with the payload's second half and the 4-byte CRC field.
    let split = wire.len().checked_sub(WRITE_LEN / 2 + 4).ok_or(EINVAL)?;
    sock.send(wire.get(..split).ok_or(EINVAL)?, MsgFlags::NONE)?;
    // rsiw places what arrived; wait until it has.
    for _ in 0..100 {
        if written(&target)? == WRITE_LEN / 2 {
            break;
        }
        sleep_ms(10);
    }
    let before = written(&target)?;
    kunit_expect_eq!(test, before, WRITE_LEN / 2);
    let mut mr = Some(mr);
    let other = meanwhile(test, &server, &mut mr, &target)?;
    sock.send(wire.get(split..).ok_or(EINVAL)?, MsgFlags::NONE)?;
    let term = terminate_after(test, &server, &sock)?;
    kunit_expect_eq!(test, written(&target)?, before);
    if let Some((_other_mr, other_buf)) = other {
        kunit_expect_eq!(test, written(&other_buf)?, 0);
    }
    Ok(term)
}

pub(super) fn write_after_local_invalidate_terminates(test: &mut Test) -> Result {
    let term = write_across(test, 7811, |test, server, mr, _| {
        local_invalidate(test, server.qp()?, mr.as_ref().ok_or(EINVAL)?)?;
        Ok(None)
    })?;
    kunit_expect_eq!(test, term, Some(TermError::DdpInvalidStag));
    Ok(())
}

pub(super) fn write_after_invalidate_and_register_again_terminates(test: &mut Test) -> Result {
    // The region is valid again under the very same STag, over the same buffer: the rest of the
    // segment belongs to the registration it was checked against, which is gone.
    let term = write_across(test, 7812, |test, server, mr, target| {
        let mr = mr.as_ref().ok_or(EINVAL)?;
        let qp = server.qp()?;
        local_invalidate(test, qp, mr)?;
        register_for_writes(test, qp, mr, target)?;
        Ok(None)
    })?;
    kunit_expect_eq!(test, term, Some(TermError::DdpInvalidStag));
    Ok(())
}

pub(super) fn write_after_send_with_invalidate_on_another_qp_terminates(test: &mut Test) -> Result {
    // A second connection, its QP in the PD of the first one's, carries a Send with Invalidate
    // of the region the first one's Write is trickling into.
    let term = write_across(test, 7815, |test, _server, mr, target| {
        let rkey = mr.as_ref().ok_or(EINVAL)?.rkey();
        let l = listener(7816)?;
        let sock = connect(7816)?;
        let config = client_server_config(4, 4);
        let other =
            client_server_accept_on(test, l, sock, config, None, Some(target.pd().clone()))?;
        let buffer = DmaBuffer::new(target.pd(), 16)?;
        let qp = other.server.qp()?;
        qp.post_recv(
            Sge {
                buffer: &buffer,
                offset: 0,
                len: 16,
            },
            3,
        )?;
        let wire = fpdus(
            WorkRequest::Send {
                len: 0,
                solicited: false,
                invalidate: Some(rkey),
            },
            &[],
        )?;
        other.sock.send(&wire, MsgFlags::NONE)?;
        let wc = qp.wait(msecs_to_jiffies(5000))?;
        kunit_expect!(test, wc.status.is_success());
        kunit_expect_eq!(test, wc.invalidated_rkey, Some(rkey));
        Ok(None)
    })?;
    kunit_expect_eq!(test, term, Some(TermError::DdpInvalidStag));
    Ok(())
}

pub(super) fn write_after_deregister_reaches_no_region_at_its_index(test: &mut Test) -> Result {
    // The region is deregistered and another one registered for remote writes, under an index
    // and key the peer cannot predict (had it the old index, its grants hold another epoch).
    let term = write_across(test, 7813, |test, server, mr, target| {
        let mr = mr.take().ok_or(EINVAL)?;
        let qp = server.qp()?;
        local_invalidate(test, qp, &mr)?;
        drop(mr);
        let buf = DmaBuffer::new(target.pd(), WRITE_LEN)?;
        let other = FastRegMr::new(target.pd(), 2)?;
        register_for_writes(test, qp, &other, &buf)?;
        Ok(Some((other, buf)))
    })?;
    kunit_expect_eq!(test, term, Some(TermError::DdpInvalidStag));
    Ok(())
}

// ---- Read Responses that do not answer the Read ----

/// Bytes of the Read the malformed responses answer.
const READ_LEN: u32 = 64;

/// One Read Response segment for the sink `sink_stag`, at tagged offset `to`, `len` bytes, with
/// the DDP Last flag `last` (without CRC).
fn response_segment(sink_stag: u32, to: u64, len: u32, last: bool) -> Result<KVec<u8>> {
    let payload = [0x3cu8; READ_LEN as usize];
    let mut wire = fpdus(
        WorkRequest::ReadResponse {
            sink_stag,
            sink_tagged_offset: to,
            len,
        },
        payload.get(..len as usize).ok_or(EINVAL)?,
    )?;
    if !last {
        // Byte 2, after the MPA length, is DDP's control field: L is its 0x40 bit. One FPDU,
        // no CRC to fix.
        let ctrl = wire.get_mut(LENGTH_FIELD_LEN).ok_or(EINVAL)?;
        *ctrl &= !0x40;
    }
    Ok(wire)
}

/// rsiw posts an RDMA Read of [`READ_LEN`] bytes; we answer its Read Request with the
/// segments `answer` makes from the sink's STag and tagged offset. Returns the TERMINATE rsiw
/// answers with; checks that the Read completes in error, never successfully.
fn read_answered_by(
    test: &mut Test,
    port: u16,
    answer: impl FnOnce(u32, u64) -> Result<KVec<u8>>,
) -> Result<Option<TermError>> {
    let (_l, server, sock, pd) = established(test, port)?;
    let sink = DmaBuffer::new(&pd, READ_LEN as usize)?;
    let qp = server.qp()?;
    qp.post_send(
        &SendWr::Read {
            local: Sge {
                buffer: &sink,
                offset: 0,
                len: READ_LEN as usize,
            },
            remote: Remote {
                addr: 0x1000,
                rkey: 0x4200,
            },
        },
        9,
    )?;
    let mut inbox = Inbox::new(&[])?;
    let request = match segment(inbox.next_fpdu(&sock)?)?.header {
        OpcodeHeader::ReadRequest(h) => h,
        _ => return Err(EPROTO),
    };
    kunit_expect_eq!(test, request.read_size, READ_LEN);
    let wire = answer(request.sink_stag, request.sink_tagged_offset)?;
    sock.send(&wire, MsgFlags::NONE)?;
    let term = terminate_after(test, &server, &sock)?;
    let wc = qp.wait(msecs_to_jiffies(5000))?;
    kunit_expect_eq!(test, wc.tag, 9);
    kunit_expect!(
        test,
        !wc.status.is_success(),
        "a malformed response completed the Read"
    );
    Ok(term)
}

pub(super) fn read_answered_by_one_empty_last_segment_fails(test: &mut Test) -> Result {
    let term = read_answered_by(test, 7817, |stag, to| response_segment(stag, to, 0, true))?;
    kunit_expect_eq!(test, term, Some(TermError::DdpBaseBounds));
    Ok(())
}

pub(super) fn read_answered_out_of_order_fails(test: &mut Test) -> Result {
    let half = READ_LEN / 2;
    let term = read_answered_by(test, 7818, |stag, to| {
        let mut wire = response_segment(stag, to + u64::from(half), half, false)?;
        wire.extend_from_slice(&response_segment(stag, to, half, true)?, GFP_KERNEL)?;
        Ok(wire)
    })?;
    kunit_expect_eq!(test, term, Some(TermError::DdpBaseBounds));
    Ok(())
}

pub(super) fn read_answered_by_overlapping_segments_fails(test: &mut Test) -> Result {
    // Three quarters, then three quarters from the middle: as many bytes as the Read, some
    // placed twice, some never.
    let part = READ_LEN / 4 * 3;
    let term = read_answered_by(test, 7819, |stag, to| {
        let mut wire = response_segment(stag, to, part, false)?;
        let again = response_segment(stag, to + u64::from(READ_LEN / 4), part, true)?;
        wire.extend_from_slice(&again, GFP_KERNEL)?;
        Ok(wire)
    })?;
    kunit_expect_eq!(test, term, Some(TermError::DdpBaseBounds));
    Ok(())
}

pub(super) fn read_answered_short_fails(test: &mut Test) -> Result {
    let term = read_answered_by(test, 7820, |stag, to| {
        response_segment(stag, to, READ_LEN / 2, true)
    })?;
    kunit_expect_eq!(test, term, Some(TermError::DdpBaseBounds));
    Ok(())
}

/// A Read Request of ours to a region of rsiw's side with remote read access, `adjust`ed;
/// returns the TERMINATE rsiw answers with, on the request's arrival.
fn read_request_terminate(
    test: &mut Test,
    port: u16,
    adjust: impl FnOnce(&mut ReadRequestHeader),
) -> Result<Option<TermError>> {
    let (_l, server, sock, pd) = established(test, port)?;
    let source = DmaBuffer::new(&pd, 64)?;
    let mr = FastRegMr::new(&pd, 2)?;
    let qp = server.qp()?;
    qp.post_send(
        &SendWr::RegMr {
            mr: &mr,
            buffer: &source,
            access: Access::REMOTE_READ,
        },
        1,
    )?;
    let wc = qp.wait(msecs_to_jiffies(5000))?;
    kunit_expect!(test, wc.status.is_success() && wc.opcode == WcOpcode::RegMr);
    let mut header = ReadRequestHeader {
        sink_stag: 0x4200,
        sink_tagged_offset: 0x1000,
        read_size: 64,
        source_stag: mr.rkey(),
        source_tagged_offset: mr.iova(),
    };
    adjust(&mut header);
    let wire = fpdus(WorkRequest::ReadRequest(header), &[])?;
    sock.send(&wire, MsgFlags::NONE)?;
    terminate_after(test, &server, &sock)
}

pub(super) fn read_request_with_wrapping_sink_terminates(test: &mut Test) -> Result {
    let term = read_request_terminate(test, 7821, |h| h.sink_tagged_offset = u64::MAX - 8)?;
    kunit_expect_eq!(test, term, Some(TermError::RdmapToWrap));
    Ok(())
}

pub(super) fn read_request_with_wrapping_source_terminates(test: &mut Test) -> Result {
    let term = read_request_terminate(test, 7822, |h| h.source_tagged_offset = u64::MAX - 8)?;
    kunit_expect_eq!(test, term, Some(TermError::RdmapToWrap));
    Ok(())
}

pub(super) fn stag_indices_do_not_follow_each_other(test: &mut Test) -> Result {
    // Regions registered one after another get STag indices a peer cannot derive from each
    // other (RFC 5040 section 8): not consecutive, as a lowest-free or counting allocator
    // would give. Eight in a row consecutive by chance has odds of 2^-168.
    let (_l, _server, _sock, pd) = established(test, 7829)?;
    let mut mrs = KVec::new();
    for _ in 0..8 {
        mrs.push(FastRegMr::new(&pd, 2)?, GFP_KERNEL)?;
    }
    let indices = mrs.iter().map(|m| m.rkey() >> 8);
    let consecutive = indices
        .clone()
        .zip(indices.skip(1))
        .all(|(a, b)| b == a.wrapping_add(1));
    kunit_expect!(
        test,
        !consecutive,
        "eight regions got consecutive STag indices"
    );
    Ok(())
}
