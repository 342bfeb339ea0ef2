// SPDX-License-Identifier: GPL-2.0

//! The endpoint's Sends that carry no call of ours: a reply on the backchannel, whole or
//! continued over several Sends, and transport headers alone (`RDMA2_CONNPROP`,
//! `RDMA2_ERROR`).

use super::*;

impl Endpoint {
    /// Sends a message of our own, not a call: `header`, then `body`, inline in one Send (a
    /// reply on the backchannel).
    ///
    /// `EMSGSIZE` if it does not fit the server's inline threshold, `ENOBUFS` if every send
    /// buffer is in use, `ENOTCONN` if the queue pair refuses work.
    pub(crate) fn send_message(
        &self,
        header: &[u8],
        body: &XdrBuf<'_>,
        counters: &Counters,
    ) -> Result {
        if header.len() + body.layout().len() as usize > self.send_limit() {
            Counters::add(&counters.failed_marshal, 1);
            return Err(EMSGSIZE);
        }
        let whole = 0..body.layout().len() as usize;
        self.with_send_buffer(counters, |buffer, index| {
            let len = write_message(buffer, header, body, whole, counters)?;
            self.post_buffer(buffer, index, len)
        })
    }

    /// Sends `header` and `body` over the Sends of `split`, back to back (Message
    /// Continuation): all but the last after `fragment` (a header with `RDMA2_F_MORE` and no
    /// chunks), the last after `header`. The caller holds the transport's send lock, so no
    /// other message comes between them. `ENOTCONN` if a Send was refused after others went
    /// (the server holds part of the message: the connection goes), else as
    /// [`Self::send_message`].
    pub(crate) fn send_message_continued(
        &self,
        fragment: &[u8],
        header: &[u8],
        body: &XdrBuf<'_>,
        split: &FragmentPlan,
        counters: &Counters,
    ) -> Result {
        let mut posted = 0;
        for piece in split.fragments() {
            let head = if piece.more { fragment } else { header };
            let range = piece.offset..piece.offset + piece.len;
            let sent = self.with_send_buffer(counters, |buffer, index| {
                let len = write_message(buffer, head, body, range, counters)?;
                self.post_buffer(buffer, index, len)
            });
            match sent {
                Ok(()) => posted += 1,
                Err(_) if posted > 0 => return Err(ENOTCONN),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Sends `message`, a transport header that carries no RPC message (`RDMA2_CONNPROP`,
    /// `RDMA2_ERROR`), in one Send.
    ///
    /// `EMSGSIZE` if it does not fit the server's inline threshold, `ENOBUFS` if every send
    /// buffer is in use, `ENOTCONN` if the queue pair refuses work.
    pub(crate) fn send_control(&self, message: &[u8], counters: &Counters) -> Result {
        if message.len() > self.send_limit() {
            return Err(EMSGSIZE);
        }
        self.with_send_buffer(counters, |buffer, index| {
            buffer.write(0, message)?;
            self.post_buffer(buffer, index, message.len())
        })
    }
}

/// Writes `head` and then the bytes `range` of `body` into `buffer` (counted as pulled up);
/// returns the length of the message.
fn write_message(
    buffer: &DmaBuffer,
    head: &[u8],
    body: &XdrBuf<'_>,
    range: Range<usize>,
    counters: &Counters,
) -> Result<usize> {
    buffer.write(0, head)?;
    let mut offset = head.len();
    body.for_each_segment_in(range, |segment| {
        buffer.write(offset, segment)?;
        offset += segment.len();
        Ok(())
    })?;
    Counters::add(&counters.pullup_copy, offset - head.len());
    Ok(offset)
}
