// SPDX-License-Identifier: GPL-2.0

//! The client transport: what carries an NFS client's calls over an RDMA connection.
//!
//! The RPC client creates one [`ClientTransport`] per server (class "rdma", ident 256) and
//! drives it through the sunrpc abstraction (`kernel::sunrpc::xprt`):
//!
//! - **connect** sets up an [`Endpoint`] from a worker ([`ConnectWork`]): rdma_cm address and route resolution in
//!   the client's network namespace, a queue pair whose completions go to the endpoint's
//!   [`Receiver`], every receive posted, then the connection with RFC 8797 private data.
//! - **send_request** asks the protocol core for the call's chunk plan, registers the memory
//!   behind its chunks ([`registration`]), and copies the inline part of the call after a
//!   header of the connection's version into one of the endpoint's send buffers, posted as one
//!   Send.
//! - each **receive** is decoded by the protocol core and its credit grant becomes the
//!   congestion window. A reply to a call with chunks waits until the call's regions are
//!   invalidated; then its inline part is copied into the call's receive buffer around what
//!   the server wrote there directly. On a Version 2 connection a reply may come continued
//!   over several Sends (draft section 4.4.2): their payloads are concatenated
//!   ([`receive::Reassembly`]) and the whole is delivered as an inline reply. A call from the
//!   server (an NFSv4.1 callback) goes to the [`backchannel`], whose replies go out through
//!   **send_request** too.
//! - **close** disconnects and drops the endpoint; the next connect builds a fresh one.
//! - **device removal** ([`Devices`](crate::devices::Devices)) closes every endpoint on the device and waits
//!   until they are dropped; connects to it fail meanwhile.
//!
//! **Versions** (draft section 4.2.3) with `version=2`: the first message on a new connection
//! is our first `RDMA2_CONNPROP` (draft section 6.3.4: each peer's first message), which is
//! the Version 2 probe, well under 1024 bytes. The connect waits for the server's answer
//! before any call goes out. A server that answers in Version 2 (with its own
//! `RDMA2_CONNPROP`) is spoken to in Version 2, and what we send inline follows its receive
//! buffer size (`RBSIZ`). One that answers `ERR_VERS` (the C svcrdma does, in the Version 1
//! layout) is spoken to in Version 1 for the life of the transport, from the same connection
//! on, and no later connection probes again. Nor does one after a connection lost, or a
//! server silent, before the probe was answered. With `version=1`, the default, the
//! transport speaks Version 1 from the start. The header layouts are the protocol core's
//! [`wire`](crate::proto::wire) revisions.
//!
//! What this transport carries: calls and replies of up to 1 MiB of payload, inline,
//! with a Read chunk (the bulk data of a call, or the whole call at position zero), a Write
//! chunk (the bulk data of a reply) or a Reply chunk (a whole long reply), and the NFSv4.1
//! backchannel's calls and replies, inline. In Version 2 a call that does not fit one Send
//! goes over up to [`MAX_SENT_FRAGMENTS`] Sends when it fits them (Message Continuation, draft
//! section 4.4.2), which the draft prefers to a Position Zero Read chunk (section 6.3.2), its
//! bulk data included (fewer registrations and RDMA Reads for a few KiB), one such call at a
//! time; see [`ClientTransport::take_grant`] for how that stays within the server's credits.
//! Replies also come continued, in up to [`MAX_SENT_FRAGMENTS`] Sends: a call whose largest
//! reply fits that many of our receives provisions no Reply chunk (the draft's section 4.4.2
//! advice for moderately sized replies; [`rely_on_continuation`]). A continuation that breaks
//! the draft's rules (another XID or type mid-sequence, too long) is dropped, as a Requester
//! sends no `RDMA2_ERROR`: the calls whose replies it held fail with `EIO`, and the connection
//! stays.
//!
//! [`rely_on_continuation`]: crate::proto::call_plan::rely_on_continuation
//!
//! A call is never sent twice on one connection (RFC 8166, section 3.3.2): the server would
//! count it against its credits again. A retransmission closes the connection instead, and
//! the call goes out on the next one.

use crate::proto::{
    chunk::ChunkLists,
    continuation::{Reassembled, MAX_SENT_FRAGMENTS},
    error::{ErrorBody, ErrorReply, V2Error},
    negotiation::{ClientNegotiation, ClientOutcome, ServerVersionMemory, FIRST_MESSAGE_MAX},
    properties::{PeerProperties, DEFAULT_MAX_SEGMENT_COUNT, DEFAULT_MAX_SEGMENT_SIZE},
    property_exchange::{
        receive_threshold, segment_limits, send_threshold, split_properties, ExchangeEvent,
        LocalProperties, PropertyExchange, SegmentLimits,
    },
    v2::{self, Credit, Flags},
    version::{Version, VersionRange},
    wire::{self, Body, Credits, Header, Revision},
};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use kernel::{
    c_str, debugfs, new_condvar, new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    rdma::consumer::kernel_qp::RemoteInvalidation,
    str::CStr,
    sunrpc::{
        xprt::{Config, Connect, Rqst, Stats, Timeout, Transport, Xprt, IPPROTO_TCP},
        xprt_class::{ClassSlot, CreateArgs, TransportClass, TransportPtr, XPRT_TRANSPORT_RDMA},
    },
    sync::{Arc, CondVar, CondVarTimeoutResult, Mutex},
    time::msecs_to_jiffies,
};

mod backchannel;
mod connect;
mod endpoint;
mod properties;
mod receive;
mod registration;
pub(crate) mod report;

use backchannel::Backchannel;
use connect::ConnectWork;
use endpoint::Endpoint;
use receive::{Reassembly, Receiver};
use registration::{Finished, HeldReply, ReplyKind, MAX_REGIONS};
use report::{Counters, Report};

/// Bytes of our send and receive buffers: the largest inline threshold, and the default (the C
/// implementations').
pub(crate) const INLINE_SIZE: u32 = 4096;

/// The inline threshold of new connections, both ways: what we tell the server we receive, and
/// the most we send inline whatever the server receives (the `inline_threshold` parameter).
static INLINE_THRESHOLD: AtomicU32 = AtomicU32::new(INLINE_SIZE);

/// Sets the inline threshold (the module's init, before the class is registered): from 1024 to
/// [`INLINE_SIZE`] bytes.
pub(crate) fn set_inline_threshold(bytes: u32) {
    INLINE_THRESHOLD.store(bytes.clamp(1024, INLINE_SIZE), Ordering::Relaxed);
}

/// The inline threshold of new connections.
pub(crate) fn inline_threshold() -> u32 {
    INLINE_THRESHOLD.load(Ordering::Relaxed)
}

/// Whether new transports probe for Version 2 (`version=2`) or speak Version 1 from the start
/// (`version=1`, the module's default, which its init sets).
static PROBE_V2: AtomicBool = AtomicBool::new(false);

/// Sets the highest version new transports speak (the module's init, before the class is
/// registered).
pub(crate) fn set_version(version: Version) {
    PROBE_V2.store(version == Version::V2, Ordering::Relaxed);
}

/// The versions new transports speak.
pub(crate) fn versions() -> VersionRange {
    if PROBE_V2.load(Ordering::Relaxed) {
        VersionRange::V1_AND_V2
    } else {
        VersionRange::V1_ONLY
    }
}

/// Calls in flight we ask the server for (`rdma_credit` of our calls), and the receives posted
/// for their replies.
pub(crate) const MAX_REQUESTS: u32 = 64;

/// The largest RPC payload offered to the RPC client (NFS sizes its reads and writes by it):
/// 1 MiB, the C transport's, which one call's chunks cover in at most two regions.
const MAX_PAYLOAD: usize = 1 << 20;

/// The client transport class: ident `XPRT_TRANSPORT_RDMA`, netids "rdma" and "rdma6".
pub(crate) struct ClientClass;

static CLIENT_CLASS: ClassSlot = ClassSlot::new();

impl TransportClass for ClientClass {
    const NAME: &'static CStr = c_str!("rdma");
    const IDENT: i32 = XPRT_TRANSPORT_RDMA;
    const NETIDS: &'static [&'static CStr] = &[c_str!("rdma"), c_str!("rdma6")];
    const SLOT: &'static ClassSlot = &CLIENT_CLASS;

    fn setup(args: &CreateArgs<'_>) -> Result<TransportPtr> {
        Xprt::<ClientTransport>::create(args, &config(), ClientTransport::new(Report::new()?))
    }
}

/// The transport's timeouts and sizes, those of the C transport: a minute per call with
/// two retries, a five-second first reconnect delay, disconnect after five idle minutes.
fn config() -> Config {
    let hz = msecs_to_jiffies(1000);
    Config {
        timeout: Timeout {
            initval: 60 * hz,
            maxval: 60 * hz,
            increment: 0,
            retries: 2,
            exponential: false,
        },
        connect_timeout: 60 * hz,
        max_reconnect_timeout: 60 * hz,
        bind_timeout: 60 * hz,
        reestablish_timeout: 5 * hz,
        idle_timeout: 5 * 60 * hz,
        max_payload: MAX_PAYLOAD,
        prealloc_slots: MAX_REQUESTS,
        max_slots: MAX_REQUESTS,
        prot: IPPROTO_TCP,
        proto_name: c_str!("rdma"),
    }
}

/// How long a connect waits for the server's answer to our first `RDMA2_CONNPROP`, in
/// milliseconds; a server silent that long is taken not to speak Version 2.
const PROPERTIES_MS: u32 = 10_000;

/// The XID of our `RDMA2_CONNPROP` messages, which carry no RPC message.
const CONNPROP_XID: u32 = 0;

/// The transport property exchange of the current connection (draft sections 5 and 6.3.4).
struct Exchange {
    state: PropertyExchange,
    /// Our `RDMA2_CONNPROP` messages sent on this connection.
    sent: u32,
    /// The connect waits no longer: the server finished its properties (or sent something
    /// else first) or refused the probe, or the connection went.
    over: bool,
}

impl Exchange {
    const fn new() -> Self {
        Self {
            state: PropertyExchange::new(),
            sent: 0,
            over: false,
        }
    }
}

/// The revision of the next message, and the most bytes it may have while the connection's
/// version is unsettled (the Version 2 probe's).
#[derive(Clone, Copy)]
pub(crate) struct Sending {
    pub(crate) revision: Revision,
    pub(crate) probe_limit: Option<usize>,
}

/// Where a received reply goes.
enum Route {
    /// Delivered now, from the message.
    Inline,
    /// Held in its receive buffer until its call's regions are invalidated.
    Held,
    /// Dropped: its call ended early.
    Dropped,
    /// Delivered now: its call's regions are invalid already (the reply's Send invalidated
    /// the only one).
    Ready(Finished),
    /// The invalidations could not be posted, or the reply's Send invalidated none of its
    /// call's regions: the connection is broken.
    Broken,
}

/// The proof that a received message's Send invalidated one of our regions (Send With
/// Invalidate), until a call's record takes it; one left over breaks the connection.
type RemoteProof<'a> = core::cell::Cell<Option<&'a RemoteInvalidation>>;

/// One RPC client's transport to one server.
///
/// # Invariants
///
/// `generation` is odd while `endpoint` holds an endpoint, and that endpoint's generation.
#[pin_data]
pub(crate) struct ClientTransport {
    /// The connection, while there is one.
    #[pin]
    endpoint: Mutex<Option<Arc<Endpoint>>>,
    /// Counts endpoints in and out, so that a completion of an old one is told apart.
    generation: AtomicU32,
    /// The version of the current connection, and what is known of the server's.
    #[pin]
    negotiation: Mutex<ClientNegotiation>,
    /// The transport property exchange of the current connection.
    #[pin]
    exchange: Mutex<Exchange>,
    /// Signalled when the exchange is over (`Exchange::over`).
    #[pin]
    exchanged: CondVar,
    /// The values shown in `/proc/self/mountstats` and the debugfs file: the counters, the
    /// server's credit grant (1 until its first), the connection's addresses, properties and
    /// thresholds.
    report: Arc<Report>,
    /// The backchannel's sizes and counts.
    backchannel: Backchannel,
    /// `/sys/kernel/debug/rpcrdma2/client-N`, showing `report`.
    _debugfs: Option<debugfs::File<Report>>,
}

/// The server's address, for messages.
struct ServerName<'a>(&'a Xprt<ClientTransport>);

impl core::fmt::Display for ServerName<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0.server_address() {
            Ok(address) => write!(f, "server {address}"),
            Err(_) => f.write_str("the server"),
        }
    }
}

impl ClientTransport {
    fn new(report: Arc<Report>) -> impl PinInit<Self, Error> {
        let debugfs = crate::debugfs::file("client", report.clone());
        try_pin_init!(Self {
            endpoint <- new_mutex!(None),
            generation: AtomicU32::new(0),
            negotiation <- new_mutex!(ClientNegotiation::new(
                versions(),
                ServerVersionMemory::default()
            )),
            exchange <- new_mutex!(Exchange::new()),
            exchanged <- new_condvar!(),
            report,
            backchannel: Backchannel::new(),
            _debugfs: debugfs,
        }? Error)
    }

    /// The current endpoint, if connected.
    fn endpoint(&self) -> Option<Arc<Endpoint>> {
        self.endpoint.lock().clone()
    }

    /// Runs `f` on the current endpoint if it is of `generation`, under the endpoint's lock
    /// (so that no reference to it is left to drop by the caller).
    fn with_endpoint<R>(&self, generation: u32, f: impl FnOnce(&Endpoint) -> R) -> Option<R> {
        let slot = self.endpoint.lock();
        slot.as_deref()
            .filter(|endpoint| endpoint.generation() == generation)
            .map(f)
    }

    /// Whether `generation` is the current endpoint's.
    fn is_current(&self, generation: u32) -> bool {
        self.generation.load(Ordering::SeqCst) == generation
    }

    /// Takes the endpoint out (the generation moves on first, so that its completions are
    /// stale from now on), for the caller to drop outside the lock.
    fn take_endpoint(&self) -> Option<Arc<Endpoint>> {
        let mut slot = self.endpoint.lock();
        let old = slot.take();
        if old.is_some() {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        old
    }

    /// Sets up a new endpoint and makes it current.
    fn connect_now(xprt: &Xprt<Self>) -> Result {
        drop(xprt.take_endpoint());
        let server = xprt.server_address()?;
        let generation = xprt.generation.load(Ordering::Acquire).wrapping_add(1);
        let endpoint = Endpoint::connect(xprt, server, generation)?;
        // A new connection probes again unless the server is known not to speak Version 2
        // (it refused a probe, or lost the connection before answering one).
        let revision = {
            let mut negotiation = xprt.negotiation.lock();
            let memory = negotiation.on_disconnect();
            *negotiation = ClientNegotiation::new(versions(), memory);
            Revision::of(negotiation.version())
        };
        xprt.report.counters.version.store(0, Ordering::Relaxed);
        xprt.report.counters.peer_rbsiz.store(0, Ordering::Relaxed);
        xprt.report.connected(
            server,
            endpoint.local_address(),
            versions(),
            (endpoint.send_limit(), endpoint.recv_limit()),
        );
        *xprt.exchange.lock() = Exchange::new();
        xprt.backchannel.connected(endpoint.send_limit(), revision);
        xprt.backchannel.reset_reverse();
        // Until the server's first grant: one call at a time.
        xprt.report.granted.store(1, Ordering::Relaxed);
        xprt.report.window.store(1, Ordering::Relaxed);
        xprt.set_credits(1);
        let mut slot = xprt.endpoint.lock();
        xprt.generation.store(generation, Ordering::SeqCst);
        // A removal of the device that began while connecting told an endpoint that was not
        // current yet: it is closed now (the removal waits for it). One that begins from now
        // on finds it current.
        let removed = endpoint.is_device_removed();
        *slot = Some(endpoint.clone());
        drop(slot);
        if removed {
            xprt.force_disconnect();
        }
        if revision == Revision::V2Draft01 {
            if let Err(e) = Self::exchange_properties(xprt, &endpoint) {
                drop(endpoint);
                if let Some(endpoint) = xprt.take_endpoint() {
                    endpoint.disconnect();
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Takes the server's credit grant `granted`, in a message of a `revision` connection, as
    /// the congestion window: the calls sunrpc lets us have in flight.
    ///
    /// Each Send consumes one of the server's receives, which is what a credit is; a call
    /// takes one Send, but a continued call up to [`MAX_SENT_FRAGMENTS`] (draft section
    /// 6.2.2.2: the sender must not run past the grant in the middle of a sequence). So on a
    /// Version 2 connection the window is the grant less `MAX_SENT_FRAGMENTS - 1`, at least one,
    /// and at most one continued call is in flight, of at most
    /// [`continuation_sends`](Self::continuation_sends) Sends: the others in flight take at
    /// most window - 1 Sends, the continued call the rest of the grant.
    fn take_grant(xprt: &Xprt<Self>, revision: Revision, granted: u16) {
        let granted = u32::from(granted).clamp(1, MAX_REQUESTS);
        xprt.report.granted.store(granted, Ordering::Relaxed);
        let window = Self::window(revision, granted);
        xprt.report.window.store(window, Ordering::Relaxed);
        xprt.set_credits(window);
    }

    /// The congestion window for a grant of `granted` credits on a `revision` connection.
    fn window(revision: Revision, granted: u32) -> u32 {
        match revision {
            Revision::V1 => granted,
            Revision::V2Draft01 => granted.saturating_sub(MAX_SENT_FRAGMENTS as u32 - 1).max(1),
        }
    }

    /// The most Sends the one continued call in flight may take within the server's last
    /// grant ([`take_grant`](Self::take_grant)): those the window leaves out and its own.
    pub(crate) fn continuation_sends(&self) -> usize {
        let granted = self.report.granted.load(Ordering::Relaxed);
        let window = Self::window(Revision::V2Draft01, granted);
        let sends = granted.saturating_sub(window).saturating_add(1);
        (sends as usize).min(MAX_SENT_FRAGMENTS)
    }

    /// What the next message is sent as: the current connection's revision, and the probe's
    /// limit while the version is unsettled.
    pub(crate) fn sending(&self) -> Sending {
        Self::sending_of(&self.negotiation.lock())
    }

    fn sending_of(negotiation: &ClientNegotiation) -> Sending {
        let version = negotiation.version();
        Sending {
            revision: Revision::of(version),
            probe_limit: (version == Version::V2 && !negotiation.is_established())
                .then_some(FIRST_MESSAGE_MAX),
        }
    }

    /// Sends a message of `len` bytes as `sending` said through `post`, unless the connection's
    /// version changed meanwhile (`EAGAIN`: marshal it again) or the probe is out and
    /// unanswered (`ENOBUFS`: a single message until the server answered, draft section
    /// 4.2.3). A failed `post` sent nothing: the probe is still to be sent.
    pub(crate) fn send_as(
        &self,
        sending: Sending,
        len: usize,
        post: impl FnOnce() -> Result,
    ) -> Result {
        let mut negotiation = self.negotiation.lock();
        let now = Self::sending_of(&negotiation);
        if now.revision != sending.revision || now.probe_limit != sending.probe_limit {
            return Err(EAGAIN);
        }
        if now.probe_limit.is_none() {
            return post();
        }
        let before = *negotiation;
        negotiation.on_send(len).map_err(|_| ENOBUFS)?;
        post().inspect_err(|_| *negotiation = before)
    }

    /// A message arrived on the endpoint of `generation`, in receive buffer `recv_index`;
    /// fragments of a continued reply go to `reassembly`; `remote` holds the proof that its
    /// Send invalidated one of our regions, taken if that is a region of the call the message
    /// answers. Returns whether the buffer is held (the reply waits there until its call's
    /// regions are invalidated) or posted again already: then the caller leaves it.
    fn received(
        xprt: &Xprt<Self>,
        generation: u32,
        message: &[u8],
        recv_index: usize,
        reassembly: &Mutex<Reassembly>,
        remote: &RemoteProof<'_>,
    ) -> bool {
        use crate::proto::{call_plan::ReplyPlacement, chunk::ChunkLimits, wire::Received};
        let sending = xprt.sending();
        let probing = sending.probe_limit.is_some();
        let limits = ChunkLimits::DEFAULT;
        let header = match wire::decode_at_client(message, sending.revision, probing, &limits) {
            Ok(Received::Header(header)) if header.revision == sending.revision => header,
            Ok(Received::VersionError { xid, range }) => {
                xprt.connection_proven();
                return Self::version_refused(xprt, xid, range);
            }
            Ok(Received::Header(header)) => {
                pr_debug!(
                    "dropped a {} message on a {} connection\n",
                    header.revision.name(),
                    sending.revision.name()
                );
                Counters::add(&xprt.report.counters.bad_reply, 1);
                return false;
            }
            Err(fault) => {
                pr_debug!("dropped a malformed message from the server: {:?}\n", fault);
                if let Some(ErrorReply {
                    xid,
                    body: ErrorBody::V2(error @ V2Error::BadPropval),
                    ..
                }) = fault.reply()
                {
                    // The server's properties are refused whole, and the exchange is over:
                    // a connection still probing fails, and the next speaks Version 1.
                    Self::refuse(xprt, generation, xid, error);
                    Self::exchange_over(xprt, &mut xprt.exchange.lock());
                } else {
                    Counters::add(&xprt.report.counters.bad_reply, 1);
                }
                return false;
            }
        };
        xprt.connection_proven();
        Self::settled(xprt, header.revision);
        if header.revision == Revision::V2Draft01
            && Self::take_properties(xprt, generation, &header)
        {
            return false;
        }
        if header.revision == Revision::V2Draft01
            && wire::is_reverse_v2(&header, crate::proto::role::Endpoint::Client)
        {
            // A callback, whole or continued: never a grant for our calls.
            return backchannel::received_v2(xprt, generation, &header, recv_index, reassembly);
        }
        if backchannel::received(xprt, &header) {
            // The callback was copied out of the receive buffer.
            return false;
        }
        Self::take_grant(xprt, sending.revision, header.credits.granted);
        let xid = header.xid;
        if matches!(header.body, Body::Control | Body::Properties { .. }) {
            return false;
        }
        // The server is done with the call's Sends: another call may go over several.
        xprt.with_endpoint(generation, |endpoint| endpoint.continued_done(xid));
        if header.revision == Revision::V2Draft01 {
            let mut reassembly = reassembly.lock();
            match reassembly.accept_part(header.part()) {
                Ok(Reassembled::Whole(_) | Reassembled::External | Reassembled::Control) => {}
                Ok(Reassembled::Pending) => {
                    // Copied out: the receive goes back at once, for the server's next Send.
                    xprt.with_endpoint(generation, |endpoint| endpoint.repost_now(recv_index));
                    return true;
                }
                Ok(Reassembled::Dropped) => return false,
                Ok(Reassembled::Complete { xid, fragments }) => {
                    Counters::add(&xprt.report.counters.continued_replies, 1);
                    Counters::add(
                        &xprt.report.counters.continued_fragments,
                        fragments as usize,
                    );
                    if let Some(chunks) = header.chunks() {
                        let payload = reassembly.storage().data();
                        Self::continued(xprt, generation, xid, chunks, payload, remote);
                    }
                    return false;
                }
                Err(e) => {
                    // A Requester sends no error (draft section 6.2.2.2): the message is
                    // dropped, and the calls whose replies the sequence held fail.
                    pr_debug!(
                        "continuation from the server broken ({:?}): call {:#x} fails\n",
                        e.violation,
                        e.xid
                    );
                    Counters::add(&xprt.report.counters.bad_reply, 1);
                    for xid in [Some(e.xid), e.aborted].into_iter().flatten() {
                        let _ = xprt.fail_call(xid, EIO);
                    }
                    return false;
                }
            }
        }
        let kind_of =
            |layout: &_, plan: &_| receive::reply_kind(&header.body, layout, plan, message.len());
        match Self::route(
            xprt,
            generation,
            xid,
            message.len(),
            Some(recv_index),
            remote,
            kind_of,
        ) {
            Some(Route::Inline) => {}
            Some(Route::Held) => return true,
            Some(Route::Ready(finished)) => {
                if let Some(reply) = &finished.reply {
                    Self::deliver(xprt, &finished, reply, message);
                }
                return false;
            }
            Some(Route::Broken) => {
                xprt.force_disconnect();
                return false;
            }
            Some(Route::Dropped) | None => return false,
        }
        let delivered = match header.body {
            Body::Msg {
                chunks,
                payload,
                more: false,
            } if chunks.is_empty() => {
                let placement = ReplyPlacement::Inline { len: payload.len() };
                xprt.complete_reply(xid, |buf| {
                    receive::place(buf, payload, &placement, &xprt.report.counters)
                })
            }
            // Chunks this call never offered, or a continuation.
            Body::Msg { .. } | Body::NoMsg { .. } => Err(EPROTO),
            Body::Error(error) => {
                pr_debug!("server answered call {:#x} with {:?}\n", xid, error);
                Counters::add(&xprt.report.counters.bad_reply, 1);
                xprt.fail_call(xid, EIO)
            }
            Body::Control | Body::Properties { .. } => return false,
        };
        Self::settle(xprt, xid, delivered);
        false
    }

    /// Delivers the continued reply to call `xid`: its whole inline `payload`, and the chunk
    /// lists of its last message. A call with registered memory gets a copy of the payload
    /// once that is invalidated: no receive buffer is held.
    fn continued(
        xprt: &Xprt<Self>,
        generation: u32,
        xid: u32,
        chunks: &ChunkLists<'_>,
        payload: &[u8],
        remote: &RemoteProof<'_>,
    ) {
        let kind_of = |layout: &_, plan: &_| {
            let Some(placement) = receive::msg_placement(chunks, layout, plan, payload.len())
            else {
                return ReplyKind::Failed;
            };
            let mut copy = KVec::new();
            match copy.extend_from_slice(payload, GFP_KERNEL) {
                Ok(()) => ReplyKind::Continued {
                    payload: copy,
                    placement,
                },
                Err(_) => ReplyKind::Failed,
            }
        };
        match Self::route(xprt, generation, xid, payload.len(), None, remote, kind_of) {
            Some(Route::Inline) => {
                // A call without registered memory offered no chunks.
                let delivered = if chunks.is_empty() {
                    let placement =
                        crate::proto::call_plan::ReplyPlacement::Inline { len: payload.len() };
                    xprt.complete_reply(xid, |buf| {
                        receive::place(buf, payload, &placement, &xprt.report.counters)
                    })
                } else {
                    Err(EPROTO)
                };
                Self::settle(xprt, xid, delivered);
            }
            Some(Route::Ready(finished)) => {
                if let Some(reply) = &finished.reply {
                    Self::deliver(xprt, &finished, reply, &[]);
                }
            }
            Some(Route::Broken) => xprt.force_disconnect(),
            // A held continued reply holds a copy, not the receive buffer.
            Some(Route::Held | Route::Dropped) | None => {}
        }
    }

    /// Where the reply to call `xid` (a message of `len` bytes in receive buffer
    /// `recv_index`, or none for a continued reply) goes: a call with registered memory gets
    /// it once that is invalidated, as `kind_of` its layout and plan makes of it; the region
    /// the message's Send invalidated (`remote`, taken if it is one of the call's) needs no
    /// `LOCAL_INV`. `None` if the endpoint of `generation` is gone.
    fn route(
        xprt: &Xprt<Self>,
        generation: u32,
        xid: u32,
        len: usize,
        recv_index: Option<usize>,
        remote: &RemoteProof<'_>,
        kind_of: impl FnOnce(
            &crate::proto::call_plan::CallLayout,
            &crate::proto::call_plan::CallPlan,
        ) -> ReplyKind,
    ) -> Option<Route> {
        // Under the endpoint's lock: this runs in the endpoint's own CQ work, which must never
        // hold the last reference to it (dropping it drains the queue pair, which waits for
        // this very work).
        xprt.with_endpoint(generation, |endpoint| {
            let regs = endpoint.registrations();
            match regs.lookup(xid) {
                None => Route::Inline,
                // A reply to a call that ended early, whose memory is being invalidated (a
                // region its Send invalidated is found invalid by its `LOCAL_INV`).
                Some((record, None)) => {
                    if remote
                        .get()
                        .is_some_and(|p| regs.has_region(record, p.rkey()))
                    {
                        remote.set(None);
                    }
                    Route::Dropped
                }
                Some((record, Some((layout, plan)))) => {
                    let reply = HeldReply {
                        recv_index,
                        len,
                        kind: kind_of(&layout, &plan),
                    };
                    match endpoint.invalidate_for_reply(record, reply, remote.get()) {
                        Ok(finished) => {
                            if remote.take().is_some() {
                                Counters::add(&xprt.report.counters.remote_invs, 1);
                            }
                            finished.map_or(Route::Held, Route::Ready)
                        }
                        // Not the call's region (`EPROTO`: the proof stays, for the caller to
                        // report), or the connection is gone.
                        Err(_) => Route::Broken,
                    }
                }
            }
        })
    }

    /// The server answered in `revision`: the first such message settles the connection's
    /// version, which is logged.
    fn settled(xprt: &Xprt<Self>, revision: Revision) {
        let outcome = {
            let mut negotiation = xprt.negotiation.lock();
            if negotiation.is_established() {
                return;
            }
            negotiation.on_message(revision.vers())
        };
        if let Ok(ClientOutcome::Established(version)) = outcome {
            xprt.report
                .counters
                .version
                .store(version.as_u32(), Ordering::Relaxed);
            pr_info!(
                "{}: RPC-over-RDMA {}\n",
                ServerName(xprt),
                Revision::of(version).name()
            );
        }
    }

    /// The server refused the probe `xid` with `ERR_VERS`, naming `range`: the transport falls
    /// back for its life. The probe is always our first `RDMA2_CONNPROP` (no call goes out
    /// before the property exchange is over), so no call is sent again. Returns whether the
    /// receive buffer is held, as [`Self::received`]: never.
    fn version_refused(xprt: &Xprt<Self>, xid: u32, range: VersionRange) -> bool {
        let outcome = xprt.negotiation.lock().on_version_error(range);
        let version = match outcome {
            Ok(ClientOutcome::FallBack(version) | ClientOutcome::Established(version)) => version,
            Err(_) => {
                pr_info!(
                    "{} speaks RPC-over-RDMA versions {} to {} only (refused {:#x}): no \
                     version in common\n",
                    ServerName(xprt),
                    range.low,
                    range.high,
                    xid
                );
                // The connect finds the version unsettled and fails.
                Self::exchange_over(xprt, &mut xprt.exchange.lock());
                return false;
            }
        };
        let revision = Revision::of(version);
        xprt.report
            .counters
            .version
            .store(version.as_u32(), Ordering::Relaxed);
        Counters::add(&xprt.report.counters.version_fallbacks, 1);
        xprt.backchannel.fell_back(revision);
        pr_info!(
            "{} refused the Version 2 probe (ERR_VERS, versions {} to {}): RPC-over-RDMA {} \
             from now on\n",
            ServerName(xprt),
            range.low,
            range.high,
            revision.name()
        );
        Self::exchange_over(xprt, &mut xprt.exchange.lock());
        false
    }

    /// Delivers a reply held while its call's regions were invalidated: `message` is the
    /// whole received message.
    fn deliver(xprt: &Xprt<Self>, finished: &Finished, reply: &HeldReply, message: &[u8]) {
        let xid = finished.xid;
        let c = &xprt.report.counters;
        let delivered = match &reply.kind {
            ReplyKind::Failed => {
                Counters::add(&c.bad_reply, 1);
                xprt.fail_call(xid, EIO)
            }
            ReplyKind::NoMsg { len } => xprt.complete_reply(xid, |buf| {
                Counters::add(&c.rdma_reply, *len);
                (buf.skip(*len) == *len).then_some(()).ok_or(EMSGSIZE)
            }),
            ReplyKind::Continued { payload, placement } => {
                xprt.complete_reply(xid, |buf| receive::place(buf, payload, placement, c))
            }
            ReplyKind::Msg { payload, placement } => match message.get(payload.clone()) {
                Some(payload) => {
                    xprt.complete_reply(xid, |buf| receive::place(buf, payload, placement, c))
                }
                None => Err(EPROTO),
            },
        };
        Self::settle(xprt, xid, delivered);
    }

    /// What follows an attempt to deliver the reply to call `xid`.
    fn settle(xprt: &Xprt<Self>, xid: u32, delivered: Result) {
        match delivered {
            Ok(()) => {}
            // A reply to a call that is gone (it timed out, or was interrupted).
            Err(e) if e == ENOENT => {}
            // Unusable for its call: the call fails rather than waits for ever.
            Err(e) => {
                pr_debug!("reply to call {:#x} unusable ({:?})\n", xid, e);
                Counters::add(&xprt.report.counters.bad_reply, 1);
                let _ = xprt.fail_call(xid, EIO);
            }
        }
    }

    /// The endpoint of `generation` lost its connection (a flushed or failed completion).
    fn connection_lost(xprt: &Xprt<Self>, generation: u32) {
        if xprt.is_current(generation) {
            Self::exchange_over(xprt, &mut xprt.exchange.lock());
            xprt.force_disconnect();
        }
    }
}

#[vtable]
impl Transport for ClientTransport {
    type Class = ClientClass;

    const BACKCHANNEL: bool = true;

    fn bc_maxpayload(xprt: &Xprt<Self>) -> usize {
        let max = xprt.backchannel.max_payload();
        xprt.report.bc_max_payload.store(max, Ordering::Relaxed);
        max
    }

    fn bc_num_slots(_xprt: &Xprt<Self>) -> u32 {
        backchannel::BC_SLOTS
    }

    fn connect(xprt: &Xprt<Self>, connect: Connect<Self>) {
        let reconnect = xprt.generation.load(Ordering::Acquire) != 0;
        ConnectWork::queue(connect, reconnect);
    }

    fn close(xprt: &Xprt<Self>) {
        if let Some(endpoint) = xprt.take_endpoint() {
            endpoint.disconnect();
        }
    }

    fn send_request(xprt: &Xprt<Self>, rqst: &Rqst<'_>) -> Result {
        if rqst.is_backchannel_reply() {
            return backchannel::send_reply(xprt, rqst);
        }
        let endpoint = xprt.endpoint().ok_or(ENOTCONN)?;
        // A retransmission on the connection the call went out on: the server may still hold
        // the call's credit, so the connection goes and the call waits for the next one.
        if rqst.connect_cookie() == xprt.connect_cookie() {
            xprt.force_disconnect();
            return Err(ENOTCONN);
        }
        endpoint
            .send_call(xprt, rqst, &xprt.report.counters)
            .inspect_err(|e| {
                if *e == ENOTCONN {
                    xprt.force_disconnect();
                }
            })
    }

    fn release_buffers(xprt: &Xprt<Self>, rqst: &Rqst<'_>) {
        if let Some(endpoint) = xprt.endpoint() {
            endpoint.continued_done(rqst.xid());
            endpoint.release_call(rqst.xid());
        }
    }

    fn print_stats(xprt: &Xprt<Self>, stats: &Stats<'_>) {
        let c = &xprt.report.counters;
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        // The C transport's columns: chunks (read, write, reply), bytes moved by RDMA (call,
        // reply), copies, registrations the hard way, marshal failures, bad replies, NOMSG
        // calls, MRs (recycled, orphaned, allocated), local invalidations, empty send queue,
        // and a column kept at 0; then ours: the RPC-over-RDMA version of the current
        // connection (0 until it is settled), the Version 2 probes the server refused, the
        // `RDMA2_CONNPROP` messages sent and received, the current server's receive buffer
        // size (`RBSIZ`, 0 until its properties arrived); then the calls sent over several
        // Sends (Message Continuation) and their Sends, and the continued replies received and
        // the Sends they came in; then the regions the server invalidated (Send With
        // Invalidate), which needed no local invalidation; then the longest segment a call
        // offered.
        stats.print(format_args!(
            " {} {} {} {} {} {} {} 0 {} {} {} 0 0 {} {} {} 0 {} {} {} {} {} {} {} {} {} {} {}",
            get(&c.read_chunks),
            get(&c.write_chunks),
            get(&c.reply_chunks),
            get(&c.rdma_request),
            get(&c.rdma_reply),
            get(&c.pullup_copy),
            get(&c.fixup_copy),
            get(&c.failed_marshal),
            get(&c.bad_reply),
            get(&c.nomsg_calls),
            get(&c.mrs_allocated),
            get(&c.local_invs),
            get(&c.no_send_buffer),
            c.version.load(Ordering::Relaxed),
            get(&c.version_fallbacks),
            get(&c.connprop_sent),
            get(&c.connprop_received),
            c.peer_rbsiz.load(Ordering::Relaxed),
            get(&c.continued_calls),
            get(&c.continued_sends),
            get(&c.continued_replies),
            get(&c.continued_fragments),
            get(&c.remote_invs),
            c.largest_segment.load(Ordering::Relaxed)
        ));
    }
}
