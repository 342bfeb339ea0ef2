// SPDX-License-Identifier: GPL-2.0

//! A server connection's Sends: error replies, a reply in one Send (with Send With Invalidate
//! when the call's region is to be invalidated), a continued reply over several Sends, and the
//! encoding of a reply's header.

use super::*;

impl<C: WithBackchannel> Connection<C> {
    /// Answers with the error header `reply` (best effort: without a send buffer, the client's
    /// call times out instead).
    pub(super) fn send_error(&self, reply: &ErrorReply) {
        let mut header = [0u8; HEADER_ROOM];
        let Ok(len) = wire::encode_error(&mut header, reply, self.credits()) else {
            return;
        };
        let _ = self.send(&header[..len], None, |_, _| Ok(0));
    }

    /// Sends `header` and then what `body` writes into the send buffer after it (given the
    /// buffer and the offset; it returns the bytes written), as one Send, which invalidates
    /// the client's region `invalidate` if there is one.
    pub(in crate::server) fn send(
        &self,
        header: &[u8],
        invalidate: Option<u32>,
        body: impl FnOnce(&Arc<DmaBuffer>, usize) -> Result<usize>,
    ) -> Result<usize> {
        let _posting = self.buffers.posting.lock();
        self.post_one(header, invalidate, 0, body)
    }

    /// Posts one Send as [`Self::send`] does, its completion tagged with `tag` besides the send
    /// buffer's index; the caller holds [`Buffers::posting`].
    fn post_one(
        &self,
        header: &[u8],
        invalidate: Option<u32>,
        tag: u64,
        body: impl FnOnce(&Arc<DmaBuffer>, usize) -> Result<usize>,
    ) -> Result<usize> {
        let index = self.buffers.take_send().ok_or(ENOBUFS)?;
        let posted = (|| -> Result<usize> {
            let buffer = self.buffers.sends.get(index).ok_or(EINVAL)?;
            buffer.write(0, header)?;
            let len = header.len() + body(buffer, header.len())?;
            let local = Sge {
                buffer,
                offset: 0,
                len,
            };
            let send = match invalidate {
                Some(rkey) => SendWr::SendWithInv { local, rkey },
                None => SendWr::Send {
                    local,
                    solicited: false,
                },
            };
            self.id.qp()?.post_send(&send, index as u64 | tag)?;
            if invalidate.is_some() {
                self.sends_with_invalidate.fetch_add(1, Ordering::Relaxed);
            }
            Ok(len)
        })();
        if posted.is_err() {
            self.buffers.send_done(index);
        }
        posted
    }

    /// Sends a reply as a continued reply: the rest of `res` that `plan` sends inline, split
    /// over Sends of at most what the client receives, all but the last after a fragment header
    /// (`RDMA2_MSG`, `RDMA2_F_MORE`, no chunks) for `xid` granting `credits`, the last after
    /// `last_header`, invalidating `invalidate`. The Sends go out back to back, once the
    /// continued reply before, if any, completed. Returns the bytes sent.
    pub(super) fn send_continued(
        &self,
        res: &XdrBuf<'_>,
        plan: &chunks::ReplyPlan,
        last_header: &[u8],
        invalidate: Option<u32>,
        xid: u32,
        credits: Credits,
    ) -> Result<usize> {
        let split = plan_fragments(
            plan.rest_len(),
            self.send_limit(),
            last_header.len(),
            MAX_SENT_FRAGMENTS,
        )
        .map_err(|_| EMSGSIZE)?;
        let mut fragment = [0u8; HEADER_ROOM];
        let outgoing = Outgoing {
            xid,
            credits,
            direction: Direction::Reply,
            body: BodyRef::Fragment,
        };
        let fragment_len =
            wire::encode(self.revision(), &mut fragment, &outgoing).map_err(|_| EINVAL)?;
        let fragment = fragment.get(..fragment_len).ok_or(EINVAL)?;
        let count = split.count();
        self.buffers.begin_continued(count)?;
        let mut posted = 0;
        let mut sent = 0;
        let result = {
            let _posting = self.buffers.posting.lock();
            split.fragments().try_for_each(|piece| {
                let (header, invalidate) = if piece.more {
                    (fragment, None)
                } else {
                    (last_header, invalidate)
                };
                let len = self.post_one(header, invalidate, CONTINUED_TAG, |buffer, start| {
                    let mut offset = start;
                    let ranges = plan.rest_piece(piece.offset, piece.len);
                    for range in ranges.iter().filter(|r| !r.is_empty()) {
                        res.for_each_segment_in(range.clone(), |segment| {
                            buffer.write(offset, segment)?;
                            offset += segment.len();
                            Ok(())
                        })?;
                    }
                    Ok(offset - start)
                })?;
                posted += 1;
                sent += len;
                Ok(())
            })
        };
        if let Err(e) = result {
            // The slot goes with the completions of what was posted.
            self.buffers.continued_sent(count - posted);
            return Err(e);
        }
        self.continued_replies.fetch_add(1, Ordering::Relaxed);
        self.continued_sends
            .fetch_add(count as u64, Ordering::Relaxed);
        Ok(sent)
    }
}

/// Encodes a reply's header in `revision`'s layout: `RDMA_NOMSG` with the Reply chunk `reply`
/// if `nomsg`, else `RDMA_MSG` (the reply follows it inline); the Write list `writes` either
/// way.
pub(super) fn encode_header(
    revision: Revision,
    xid: u32,
    credits: Credits,
    writes: &[KVec<Segment>],
    reply: Option<&[Segment]>,
    nomsg: bool,
) -> Result<KVec<u8>> {
    let mut refs = KVec::with_capacity(writes.len(), GFP_KERNEL)?;
    for chunk in writes {
        refs.push(&chunk[..], GFP_KERNEL)?;
    }
    let lists = ChunkListsRef {
        reads: &[],
        writes: &refs,
        reply,
    };
    let room = wire::header_len(revision, &lists).ok_or(EMSGSIZE)?;
    let mut header = KVec::from_elem(0u8, room, GFP_KERNEL)?;
    let outgoing = Outgoing {
        xid,
        credits,
        direction: Direction::Reply,
        body: if nomsg {
            BodyRef::NoMsg(lists)
        } else {
            BodyRef::Msg(lists)
        },
    };
    let len = wire::encode(revision, &mut header, &outgoing).map_err(|_| EMSGSIZE)?;
    let mut out = KVec::with_capacity(len, GFP_KERNEL)?;
    out.extend_from_slice(header.get(..len).ok_or(EMSGSIZE)?, GFP_KERNEL)?;
    Ok(out)
}
