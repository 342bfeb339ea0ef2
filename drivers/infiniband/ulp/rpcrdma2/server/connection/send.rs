// SPDX-License-Identifier: GPL-2.0

//! A server connection's Sends: error replies, a reply in one Send (with Send With Invalidate
//! when the call's region is to be invalidated), a continued reply or callback over several
//! Sends, and the encoding of a reply's header.

use super::*;
use crate::proto::continuation::Fragment;
use core::ops::Range;

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
        let qp = self.id.qp()?;
        let unposted = |tag| self.unposted(tag);
        let mut chain = qp.send_chain(&unposted);
        self.send_in(&mut chain, header, invalidate, body)
    }

    /// Sends as [`Self::send`] does, the Send last in `chain` (whose `unposted` is
    /// [`Self::unposted`]), and posts the chain.
    pub(in crate::server) fn send_in(
        &self,
        chain: &mut SendChain<'_>,
        header: &[u8],
        invalidate: Option<u32>,
        body: impl FnOnce(&Arc<DmaBuffer>, usize) -> Result<usize>,
    ) -> Result<usize> {
        let _posting = self.buffers.posting.lock();
        let added = self.add_one(chain, header, invalidate, 0, body);
        let posted = chain.post();
        let len = added?;
        posted?;
        if invalidate.is_some() {
            self.report
                .values
                .sends_with_invalidate
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(len)
    }

    /// Sends `header` and `body` over the Sends of `split` back to back (Message Continuation
    /// of a callback): all but the last after `fragment` (a header with `RDMA2_F_MORE` and no
    /// chunks), the last after `header`, in one chain posted under [`Buffers::posting`], so
    /// that no other Send comes between them. Returns the bytes sent. `ENOBUFS` if a send
    /// buffer is lacking before any Send is added, `EIO` after (the client holds part of the
    /// message: the caller closes the connection).
    pub(in crate::server) fn send_fragments(
        &self,
        fragment: &[u8],
        header: &[u8],
        body: &XdrBuf<'_>,
        split: &FragmentPlan,
    ) -> Result<usize> {
        let qp = self.id.qp()?;
        let unposted = |tag| self.unposted(tag);
        let mut chain = qp.send_chain(&unposted);
        let _posting = self.buffers.posting.lock();
        let sends = Fragmented {
            fragment,
            last: header,
            invalidate: None,
            tag: 0,
        };
        let (added, result) = self.add_fragments(&mut chain, split, &sends, |piece, buffer, at| {
            write_range(buffer, at, body, piece.offset..piece.offset + piece.len)
        });
        // What was added is posted (or handed back to `unposted`) whatever happened.
        let posted = chain.post();
        match result {
            Err(e) if added == 0 => Err(e),
            Err(_) => Err(EIO),
            Ok(sent) => posted.map(|()| sent),
        }
    }

    /// A request of the connection's send queue that the device did not take: handled as its
    /// failed completion is (an op's fails the op, a Send's buffer goes back).
    pub(in crate::server) fn unposted(&self, tag: u64) {
        if tag & OP_TAG != 0 {
            self.rdma.ops().completed(tag, false);
        } else {
            self.buffers.send_completed(tag);
        }
    }

    /// Adds one Send as [`Self::send`] describes it to `chain`, its completion tagged with
    /// `tag` besides the send buffer's index; the caller holds [`Buffers::posting`] until the
    /// chain is posted.
    fn add_one(
        &self,
        chain: &mut SendChain<'_>,
        header: &[u8],
        invalidate: Option<u32>,
        tag: u64,
        body: impl FnOnce(&Arc<DmaBuffer>, usize) -> Result<usize>,
    ) -> Result<usize> {
        let index = self.buffers.take_send().ok_or(ENOBUFS)?;
        let added = (|| -> Result<usize> {
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
            chain.add(&send, index as u64 | tag)?;
            Ok(len)
        })();
        if added.is_err() {
            self.buffers.send_done(index);
        }
        added
    }

    /// Adds the Sends of `split` to `chain` as `sends` describes them, the payload of each
    /// written by `payload` (given the fragment, its send buffer and where its payload starts
    /// there; it returns the bytes written). The caller holds [`Buffers::posting`] until the
    /// chain is posted. Returns how many Sends were added and, unless one failed, their bytes.
    fn add_fragments(
        &self,
        chain: &mut SendChain<'_>,
        split: &FragmentPlan,
        sends: &Fragmented<'_>,
        payload: impl Fn(&Fragment, &Arc<DmaBuffer>, usize) -> Result<usize>,
    ) -> (usize, Result<usize>) {
        let mut added = 0;
        let mut sent = 0;
        let result = split.fragments().try_for_each(|piece| {
            let (header, invalidate) = if piece.more {
                (sends.fragment, None)
            } else {
                (sends.last, sends.invalidate)
            };
            sent += self.add_one(chain, header, invalidate, sends.tag, |buffer, start| {
                payload(&piece, buffer, start)
            })?;
            added += 1;
            Ok(())
        });
        (added, result.map(|()| sent))
    }

    /// Sends a reply as a continued reply: the rest of `res` that `plan` sends inline, split
    /// over Sends of at most what the client receives, all but the last after a fragment header
    /// (`RDMA2_MSG`, `RDMA2_F_MORE`, no chunks) for `xid` granting `credits`, the last after
    /// `last_header`, invalidating `invalidate`. The Sends go out back to back, once the
    /// continued reply before, if any, completed; they are the last of `chain` (whose
    /// `unposted` is [`Self::unposted`]), which is posted. Returns the bytes sent.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send_continued(
        &self,
        chain: &mut SendChain<'_>,
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
        let _posting = self.buffers.posting.lock();
        let sends = Fragmented {
            fragment,
            last: last_header,
            invalidate,
            tag: CONTINUED_TAG,
        };
        let (added, result) = self.add_fragments(chain, &split, &sends, |piece, buffer, at| {
            let mut written = 0;
            let ranges = plan.rest_piece(piece.offset, piece.len);
            for range in ranges.iter().filter(|r| !r.is_empty()) {
                written += write_range(buffer, at + written, res, range.clone())?;
            }
            Ok(written)
        });
        // What was added is posted (or handed back to `unposted`) whatever happened.
        let posted = chain.post();
        let sent = match result {
            Ok(sent) => sent,
            Err(e) => {
                // The slot goes with the completions of what was added.
                self.buffers.continued_sent(count - added);
                return Err(e);
            }
        };
        posted?;
        if invalidate.is_some() {
            self.report
                .values
                .sends_with_invalidate
                .fetch_add(1, Ordering::Relaxed);
        }
        self.report
            .values
            .continued_replies
            .fetch_add(1, Ordering::Relaxed);
        self.report
            .values
            .continued_sends
            .fetch_add(count as u64, Ordering::Relaxed);
        Ok(sent)
    }
}

/// The Sends of a continued message: all but the last after `fragment` (a header with
/// `RDMA2_F_MORE` and no chunks), the last after `last`, invalidating `invalidate`; each
/// tagged `tag` besides its send buffer's index.
struct Fragmented<'a> {
    fragment: &'a [u8],
    last: &'a [u8],
    invalidate: Option<u32>,
    tag: u64,
}

/// Writes the bytes `range` of `xdr` into `buffer` from offset `at`; returns how many.
fn write_range(
    buffer: &Arc<DmaBuffer>,
    at: usize,
    xdr: &XdrBuf<'_>,
    range: Range<usize>,
) -> Result<usize> {
    let mut offset = at;
    xdr.for_each_segment_in(range, |segment| {
        buffer.write(offset, segment)?;
        offset += segment.len();
        Ok(())
    })?;
    Ok(offset - at)
}

/// A reply's header as encoded: on the stack when it fits (a reply with the few segments the
/// Linux client offers), else allocated.
pub(super) struct ReplyHeader {
    inline: [u8; REPLY_HEADER_ROOM],
    allocated: KVec<u8>,
    len: usize,
}

/// Bytes of a reply header kept on the stack: a Write list and a Reply chunk of a dozen
/// segments between them.
const REPLY_HEADER_ROOM: usize = 256;

/// Write chunks handed to the encoder without an allocation.
const FEW_WRITE_CHUNKS: usize = 4;

impl core::ops::Deref for ReplyHeader {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        let buf = if self.allocated.is_empty() {
            &self.inline[..]
        } else {
            &self.allocated[..]
        };
        buf.get(..self.len).unwrap_or(&[])
    }
}

/// Runs `f` on the chunk lists of a reply: the Write list `writes` and the Reply chunk `reply`
/// (the encoder takes the Write list as slices: on the stack for a few chunks).
fn with_reply_lists<R>(
    writes: &[KVec<Segment>],
    reply: Option<&[Segment]>,
    f: impl FnOnce(ChunkListsRef<'_>) -> R,
) -> Result<R> {
    let lists = |writes| ChunkListsRef {
        reads: &[],
        writes,
        reply,
    };
    if writes.len() <= FEW_WRITE_CHUNKS {
        let mut refs: [&[Segment]; FEW_WRITE_CHUNKS] = [&[]; FEW_WRITE_CHUNKS];
        for (r, chunk) in refs.iter_mut().zip(writes) {
            *r = chunk;
        }
        let refs = refs.get(..writes.len()).ok_or(EINVAL)?;
        return Ok(f(lists(refs)));
    }
    let mut refs = KVec::with_capacity(writes.len(), GFP_KERNEL)?;
    for chunk in writes {
        refs.push(&chunk[..], GFP_KERNEL)?;
    }
    Ok(f(lists(&refs)))
}

/// The length of a reply's header in `revision`'s layout with the Write list `writes` and the
/// Reply chunk `reply`.
pub(super) fn reply_header_len(
    revision: Revision,
    writes: &[KVec<Segment>],
    reply: Option<&[Segment]>,
) -> Result<usize> {
    with_reply_lists(writes, reply, |lists| wire::header_len(revision, &lists))?.ok_or(EMSGSIZE)
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
) -> Result<ReplyHeader> {
    with_reply_lists(writes, reply, |lists| {
        let room = wire::header_len(revision, &lists).ok_or(EMSGSIZE)?;
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
        let mut header = ReplyHeader {
            inline: [0u8; REPLY_HEADER_ROOM],
            allocated: KVec::new(),
            len: 0,
        };
        let buf = if room <= REPLY_HEADER_ROOM {
            &mut header.inline[..]
        } else {
            header.allocated = KVec::from_elem(0u8, room, GFP_KERNEL)?;
            &mut header.allocated[..]
        };
        header.len = wire::encode(revision, buf, &outgoing).map_err(|_| EMSGSIZE)?;
        Ok(header)
    })?
}
