// SPDX-License-Identifier: GPL-2.0

//! The server's backchannel (RFC 8167): nfsd's NFSv4.1 callbacks (CB_SEQUENCE, CB_RECALL, ...)
//! to a client, on the client's own connection, and the client's replies.
//!
//! nfsd makes a connection's callback client with the ident of the connection's server class
//! ored with `XPRT_TRANSPORT_BC`. Each server class therefore comes with a client transport
//! class of that ident, [`BackchannelClass`], registered before it and unregistered after it.
//! Without one, nfsd finds no transport, keeps the callback path down and says so in every
//! SEQUENCE reply, and a client answers each with BIND_CONN_TO_SESSION; and with the ident
//! of the C module's backchannel class (256 with `XPRT_TRANSPORT_BC`), the C class would be
//! handed our connection and take it for one of its own.
//!
//! - **Set-up.** The class's `setup` is given the connection; it checks that the connection is
//!   one of its server class ([`CreateArgs::server_connection`]) and creates a [`Backchannel`]
//!   transport linked to it ([`Xprt::create_backchannel`]). The RPC server holds the
//!   transport's reference for the connection, closes the transport with the connection and
//!   reuses it for later callback clients of the connection; the connection keeps one more
//!   ([`Callbacks`]) to hand replies to it. The transport reaches the connection through the
//!   connection's handle, never by a reference: it may outlive the connection, whose freeing
//!   revokes the handle, and its calls then fail with `ENOTCONN`.
//! - **Calls out.** A callback goes as an `RDMA_MSG` without chunks in the connection's
//!   version (XID of the call, credits [`BC_REQUESTS`]), the RPC call inline after it, in one
//!   Send from the connection's send buffers. In Version 2, when both sides take continued
//!   reverse-direction messages (`RDMA2_RVRSDIR_CONT`), one longer than the client receives
//!   goes continued, over up to [`MAX_REVERSE_FRAGMENTS`] Sends back to back; otherwise one
//!   that does not fit fails with `EMSGSIZE`: the backchannel carries no chunks, as with the C
//!   server.
//! - **Replies in.** A received message whose RPC message is a Reply
//!   ([`wire::inline_reverse_reply`](crate::proto::wire::inline_reverse_reply)) is taken by the
//!   connection's `recvfrom` before anything looks at it as a call: it is copied into its
//!   call's receive buffer and completes the call ([`Callbacks::reply`]); one for no call is
//!   dropped and counted. In Version 2 `RDMA2_F_RESPONSE` tells a reply (whole, or a fragment
//!   of a continued one, which the connection's reassembler puts together as it does calls).
//!   Its credit field is the client's backchannel credits, which become the transport's
//!   congestion window (at most [`BC_REQUESTS`]; until the first reply, one call at a time).
//! - **Reverse-direction support.** Version 2 says what each side takes in the reverse
//!   direction in its transport properties (`RDMA2_PROPID_BRS`, draft section 5.2.5; no
//!   property means none). We advertise [`REVERSE`]. nfsd sets a connection's backchannel up
//!   after the client's first call, when the property exchange is over; on a Version 2
//!   connection whose client advertised no reverse-direction support `setup` refuses with
//!   `EOPNOTSUPP` (said once per connection), so nfsd marks the callback path down and sends
//!   no callback there, as the draft has it (section 4.5.3: a client not prepared for a
//!   reverse-direction message may lose its connection to it).
//! - **Going away.** Closing the connection closes the transport (`svc_delete_xprt`), which
//!   fails the callbacks waiting for a reply; later sends find the connection closed.

use super::{
    connection::{Connection, Peer},
    WithBackchannel,
};
use crate::proto::{
    continuation::{plan_fragments, MAX_REVERSE_FRAGMENTS},
    properties::ReverseSupport,
    reverse::ReverseSends,
    wire::Revision,
};
use core::{
    marker::PhantomData,
    sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
};
use kernel::{
    c_str, new_mutex,
    prelude::*,
    str::CStr,
    sunrpc::{
        svc_xprt::{SvcHandle, SvcXprt},
        xprt::{Config, Connect, Rqst, Timeout, Transport, Xprt, XprtRef, IPPROTO_TCP},
        xprt_class::{ClassSlot, CreateArgs, TransportClass, TransportPtr, XPRT_TRANSPORT_BC},
    },
    sync::{Arc, Mutex},
    time::msecs_to_jiffies,
};

/// Callbacks in flight at most, and the credits each asks for: the C server's two
/// (`RPCRDMA_MAX_BC_REQUESTS`). The client's replies may grant fewer.
pub(crate) const BC_REQUESTS: u32 = 2;

/// What we take in the reverse direction, the `RDMA2_PROPID_BRS` of our transport properties:
/// replies to our callbacks without chunks, whole in one Send or continued over several
/// (`RDMA2_RVRSDIR_CONT`; the connection keeps [`MAX_REVERSE_FRAGMENTS`] receives for each
/// callback in flight).
pub(crate) const REVERSE: ReverseSupport = ReverseSupport::Continued;

/// Whether a callback too large for the client's inline threshold was reported (once per
/// module load).
static TOO_LARGE_REPORTED: AtomicBool = AtomicBool::new(false);

/// The client transport class of server class `C`'s backchannel: ident `C::IDENT |
/// XPRT_TRANSPORT_BC`, no netid (nfsd asks for it by ident).
pub(crate) struct BackchannelClass<C>(PhantomData<C>);

impl<C: WithBackchannel> TransportClass for BackchannelClass<C> {
    const NAME: &'static CStr = C::BC_NAME;
    const IDENT: i32 = C::IDENT | XPRT_TRANSPORT_BC;
    const NETIDS: &'static [&'static CStr] = &[];
    const SLOT: &'static ClassSlot = C::BC_SLOT;

    fn setup(args: &CreateArgs<'_>) -> Result<TransportPtr> {
        let conn = args.server_connection::<Connection<C>>().inspect_err(|e| {
            pr_warn!(
                "a callback client for a transport that is no connection of \"{}\": refused \
                 ({:?})\n",
                C::NAME.to_str().unwrap_or("?"),
                e
            );
        })?;
        let reverse = conn.reverse_direction();
        if !reverse.sends.any() {
            conn.callbacks().refused(|| {
                pr_info!(
                    "{}: the client's transport properties offer no reverse direction (BRS \
                     {:?}): nfsd's callbacks are refused (EOPNOTSUPP), its callback path \
                     stays down\n",
                    Peer(conn.remote()),
                    reverse.peer.unwrap_or_default()
                );
            });
            return Err(EOPNOTSUPP);
        }
        let config = config(conn.callback_limit());
        let init = Backchannel::<C> {
            conn: conn.handle(),
        };
        let (ptr, xprt) = Xprt::create_backchannel(args, conn, &config, init)?;
        conn.callbacks().attach(xprt, reverse.revision);
        pr_debug!("backchannel to {} set up\n", Peer(conn.remote()));
        Ok(ptr)
    }
}

/// The backchannel transport's timeouts and sizes, those of the C server's: a minute per
/// callback (nfsd sets its own), never connecting nor idle, [`BC_REQUESTS`] slots, callbacks
/// of up to `max_payload` bytes.
fn config(max_payload: usize) -> Config {
    let hz = msecs_to_jiffies(1000);
    Config {
        timeout: Timeout {
            initval: 60 * hz,
            maxval: 60 * hz,
            increment: 0,
            retries: 0,
            exponential: false,
        },
        connect_timeout: 0,
        max_reconnect_timeout: 0,
        bind_timeout: 0,
        reestablish_timeout: 0,
        idle_timeout: 0,
        max_payload,
        prealloc_slots: BC_REQUESTS,
        max_slots: BC_REQUESTS,
        prot: IPPROTO_TCP,
        proto_name: c_str!("rdma"),
    }
}

/// A backchannel transport (the `rpc_xprt` of nfsd's callback client) on a connection of `C`.
pub(crate) struct Backchannel<C: WithBackchannel> {
    /// The connection; reaches nothing once it is freed.
    conn: Arc<SvcHandle<Connection<C>>>,
}

#[vtable]
impl<C: WithBackchannel> Transport for Backchannel<C> {
    type Class = BackchannelClass<C>;

    /// A backchannel never connects: the client's connection is the only one.
    fn connect(_xprt: &Xprt<Self>, connect: Connect<Self>) {
        connect.complete(Err(ENOTCONN));
    }

    /// The connection is going: one callback at a time again, should the transport be used.
    fn close(xprt: &Xprt<Self>) {
        xprt.set_credits(1);
    }

    fn send_request(xprt: &Xprt<Self>, rqst: &Rqst<'_>) -> Result {
        xprt.conn
            .with(|svc| Connection::send_callback(svc, rqst))
            .unwrap_or(Err(ENOTCONN))
    }
}

/// The backchannel transport of a connection of `C`, once nfsd made it.
type Attached<C> = Mutex<Option<XprtRef<Backchannel<C>>>>;

/// A connection's side of its backchannel: the transport replies go to, and counts.
pub(crate) struct Callbacks<C: WithBackchannel> {
    /// The backchannel transport, once nfsd made it.
    xprt: Pin<KBox<Attached<C>>>,
    /// The connection is being closed: no callback goes out any more.
    closed: AtomicBool,
    /// The version (`rdma_vers`) the callbacks go in, once nfsd made the transport.
    version: AtomicU32,
    /// A refused backchannel was reported.
    refusal_reported: AtomicBool,
    /// Callbacks sent.
    sent: AtomicU64,
    /// Replies delivered to their callbacks.
    replies: AtomicU64,
    /// Replies dropped: for no callback waiting, or unusable.
    dropped: AtomicU64,
    /// Callbacks sent continued (Version 2), and their Sends.
    continued_sent: AtomicU64,
    continued_sent_sends: AtomicU64,
    /// Replies received continued, and the Sends they came in.
    continued_replies: AtomicU64,
    continued_reply_sends: AtomicU64,
}

impl<C: WithBackchannel> Callbacks<C> {
    /// The state of a new connection: no backchannel yet.
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            xprt: KBox::pin_init(new_mutex!(None), GFP_KERNEL)?,
            closed: AtomicBool::new(false),
            version: AtomicU32::new(0),
            refusal_reported: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            replies: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            continued_sent: AtomicU64::new(0),
            continued_sent_sends: AtomicU64::new(0),
            continued_replies: AtomicU64::new(0),
            continued_reply_sends: AtomicU64::new(0),
        })
    }

    /// nfsd made the connection's backchannel transport, whose callbacks go in `revision`.
    fn attach(&self, xprt: XprtRef<Backchannel<C>>, revision: Revision) {
        self.version.store(revision.vers(), Ordering::Relaxed);
        // Set once: the RPC server keeps the transport for every later callback client.
        let old = self.xprt.lock().replace(xprt);
        drop(old);
    }

    /// A backchannel was refused: `report` runs on the connection's first refusal only.
    fn refused(&self, report: impl FnOnce()) {
        if !self.refusal_reported.swap(true, Ordering::Relaxed) {
            report();
        }
    }

    /// The connection is being closed.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// A reverse-direction message for callback `xid` that is no usable reply was dropped.
    pub(crate) fn unusable(&self, xid: u32) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        pr_debug!("backchannel message {:#x} dropped: no usable reply\n", xid);
    }

    /// Hands the reply `reply` (the RPC message, from its XID on), which came in `sends`
    /// Sends, to the callback `xid`, with the client's backchannel credits `credits`. A server
    /// thread's `recvfrom`.
    pub(crate) fn reply(&self, xid: u32, credits: u32, reply: &[u8], sends: u32) {
        if sends > 1 {
            self.continued_replies.fetch_add(1, Ordering::Relaxed);
            self.continued_reply_sends
                .fetch_add(u64::from(sends), Ordering::Relaxed);
        }
        let xprt = self.xprt.lock();
        let delivered = match xprt.as_ref() {
            Some(x) => {
                x.set_credits(credits.clamp(1, BC_REQUESTS));
                x.complete_reply(xid, |buf| {
                    if buf.write(reply) < reply.len() {
                        return Err(EMSGSIZE);
                    }
                    Ok(())
                })
                .inspect_err(|e| {
                    // Too large for its call's buffer: the call fails rather than waits.
                    if *e != ENOENT {
                        let _ = x.fail_call(xid, EIO);
                    }
                })
            }
            None => Err(ENOENT),
        };
        drop(xprt);
        match delivered {
            Ok(()) => {
                self.replies.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                pr_debug!("backchannel reply {:#x} dropped ({:?})\n", xid, e);
            }
        }
    }
}

impl<C: WithBackchannel> Drop for Callbacks<C> {
    fn drop(&mut self) {
        let sent = *self.sent.get_mut();
        let dropped = *self.dropped.get_mut();
        if sent > 0 || dropped > 0 {
            pr_info!(
                "backchannel: {} callbacks sent in RPC-over-RDMA v{}, {} replies received, {} \
                 replies dropped; continued: {} callbacks sent in {} Sends, {} replies received \
                 in {} Sends\n",
                sent,
                *self.version.get_mut(),
                *self.replies.get_mut(),
                dropped,
                *self.continued_sent.get_mut(),
                *self.continued_sent_sends.get_mut(),
                *self.continued_replies.get_mut(),
                *self.continued_reply_sends.get_mut()
            );
        }
    }
}

impl<C: WithBackchannel> Connection<C> {
    /// Sends the callback `rqst` on the connection `svc`: header and call inline, in one Send,
    /// or continued over several when both sides take continued reverse-direction messages
    /// and it is longer than the client receives (or than `reverse_inline_threshold`).
    ///
    /// `ENOTCONN` if the connection is closed or the Send cannot be posted (the connection is
    /// closed then), `EMSGSIZE` if the callback does not fit what the client receives,
    /// `ENOBUFS` if no send buffer is free (the RPC client tries again after a delay).
    fn send_callback(svc: &SvcXprt<Self>, rqst: &Rqst<'_>) -> Result {
        let callbacks = svc.callbacks();
        if callbacks.closed.load(Ordering::Acquire) {
            return Err(ENOTCONN);
        }
        let mut header = [0u8; super::connection::HEADER_ROOM];
        let len = svc.encode_callback_header(&mut header, rqst.xid(), BC_REQUESTS, false)?;
        let header = header.get(..len).ok_or(EINVAL)?;
        let call = rqst.snd_buf();
        let call_len = call.layout().len() as usize;
        let total = len + call_len;
        let limit = svc.send_limit();
        let continued = svc.reverse_direction().sends == ReverseSends::Continued;
        let reverse_limit = crate::reverse_send_limit(limit);
        let split = if continued && total > reverse_limit {
            plan_fragments(call_len, reverse_limit, len, MAX_REVERSE_FRAGMENTS).ok()
        } else {
            None
        };
        if total > limit && split.is_none() {
            if !TOO_LARGE_REPORTED.swap(true, Ordering::Relaxed) {
                pr_warn!(
                    "a callback of {} bytes does not fit the inline threshold of {} ({} \
                     bytes): it fails (the backchannel carries no chunks)\n",
                    total,
                    Peer(svc.remote()),
                    limit
                );
            }
            return Err(EMSGSIZE);
        }
        let sent = match &split {
            Some(split) => {
                let mut fragment = [0u8; super::connection::HEADER_ROOM];
                let fragment_len =
                    svc.encode_callback_header(&mut fragment, rqst.xid(), BC_REQUESTS, true)?;
                let fragment = fragment.get(..fragment_len).ok_or(EINVAL)?;
                svc.send_fragments(fragment, header, &call, split)
                    .inspect(|_| {
                        if split.count() > 1 {
                            callbacks.continued_sent.fetch_add(1, Ordering::Relaxed);
                            callbacks
                                .continued_sent_sends
                                .fetch_add(split.count() as u64, Ordering::Relaxed);
                        }
                    })
            }
            None => svc.send(header, None, |buffer, mut offset| {
                call.for_each_segment(|segment| {
                    buffer.write(offset, segment)?;
                    offset += segment.len();
                    Ok(())
                })?;
                Ok(offset - len)
            }),
        };
        match sent {
            Ok(_) => {
                callbacks.sent.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) if e == ENOBUFS => Err(e),
            Err(e) => {
                pr_info!(
                    "a callback could not be sent ({:?}): closing the connection\n",
                    e
                );
                svc.deferred_close();
                Err(ENOTCONN)
            }
        }
    }
}
