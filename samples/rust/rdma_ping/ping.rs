// SPDX-License-Identifier: GPL-2.0

//! An in-kernel RDMA ping (in the spirit of rdma-core's `rping`), written against the safe
//! consumer API of `kernel::rdma`: the template for kernel ULPs in Rust.
//!
//! One [`Pair`] is a client and a server connected through rdma_cm on one address; both ends
//! run in the caller's thread, since every step is asynchronous (post, then wait). A round:
//!
//! 1. The client registers its data buffer in a fast-registration MR (`REG_MR`) and sends the
//!    region's address, key and length to the server (Send/Recv).
//! 2. The server RDMA Reads the client's data and checks it byte for byte, then RDMA Writes a
//!    new pattern over it and sends "done" with Send with Invalidate, which invalidates the
//!    client's key; the client checks the pattern once the Send has arrived.
//!
//! [`Pair::immediate`] (Write and Send with Immediate) and [`Pair::atomics`] (FetchAdd, CmpSwap)
//! are verified by value where the device does them; atomics are refused cleanly where it does
//! not (the C siw).

use core::net::SocketAddr;
use kernel::{
    error::code::*,
    page::{Page, PAGE_SIZE},
    prelude::*,
    rdma::consumer::{
        client::AtomicCap,
        cm::{CmEvent, CmId, ConnParam},
        dma_buffer::DmaBuffer,
        fast_reg::{Access, FastRegMr},
        kernel_qp::{
            CompletionHandler, KernelQp, PagesSge, QpCaps, Remote, SendWr, Sge, WcOpcode, WcStatus,
            WorkCompletion,
        },
        mapped_pages::MappedPages,
    },
    sync::Arc,
    time::{msecs_to_jiffies, Jiffies},
};

/// Private data the client sends with its connection request.
pub(crate) const HELLO: &[u8] = b"rust-rdma-ping v1";
/// Bytes of the data buffer moved in each round.
pub(crate) const DATA_LEN: usize = 64 * 1024;
/// Size of one message buffer (advertisement or "done").
const MSG_LEN: usize = 64;
/// Receives kept posted on each side.
pub(crate) const RECVS: u32 = 4;

fn timeout() -> Jiffies {
    msecs_to_jiffies(5000)
}

/// One end of the connection.
pub(crate) struct End {
    /// The connection (owns the QP).
    pub(crate) id: CmId,
    /// Data moved by RDMA.
    pub(crate) data: Arc<DmaBuffer>,
    /// Message buffers: RECVS receive slots, then one send slot.
    msgs: Arc<DmaBuffer>,
    /// The region the client exposes its data buffer through.
    mr: Arc<FastRegMr>,
}

impl End {
    /// Allocates PD, QP, buffers and MR on the id's device and posts the receives; `handler`,
    /// if any, takes the QP's completions (then [`End::wait`] sees none).
    fn new(mut id: CmId, handler: Option<Arc<dyn CompletionHandler>>) -> Result<Self> {
        let dev = id.device()?;
        let pd = dev.alloc_pd()?;
        let pages = (DATA_LEN / kernel::page::PAGE_SIZE + 1) as u32;
        let mr = FastRegMr::new(&pd, pages)?;
        let data = DmaBuffer::new(&pd, DATA_LEN)?;
        let msgs = DmaBuffer::new(&pd, MSG_LEN * (RECVS as usize + 1))?;
        let caps = QpCaps {
            max_send_wr: 8,
            max_recv_wr: RECVS,
        };
        match handler {
            Some(handler) => id.create_qp_with_handler(&pd, caps, handler)?,
            None => id.create_qp(&pd, caps)?,
        };
        let end = Self { id, data, msgs, mr };
        for slot in 0..RECVS {
            end.post_recv(slot)?;
        }
        Ok(end)
    }

    /// The end's queue pair.
    pub(crate) fn qp(&self) -> Result<&KernelQp> {
        self.id.qp()
    }

    /// Posts receive slot `slot` (below [`RECVS`]); its completion's tag is `slot`.
    pub(crate) fn post_recv(&self, slot: u32) -> Result {
        self.qp()?.post_recv(
            Sge {
                buffer: &self.msgs,
                offset: slot as usize * MSG_LEN,
                len: MSG_LEN,
            },
            u64::from(slot),
        )
    }

    /// Writes where the data buffer is registered (the MR's address and key, the buffer's
    /// length) into the send slot; returns it and the slot's bytes of it.
    fn advertisement(&self) -> Result<(Remote, Sge<'_>)> {
        let remote = Remote {
            addr: self.mr.iova(),
            rkey: self.mr.rkey(),
        };
        self.msgs.write(
            RECVS as usize * MSG_LEN,
            &encode_remote(remote, DATA_LEN as u32),
        )?;
        let local = Sge {
            len: 16,
            ..self.send_slot()
        };
        Ok((remote, local))
    }

    /// The message buffer sends use.
    pub(crate) fn send_slot(&self) -> Sge<'_> {
        Sge {
            buffer: &self.msgs,
            offset: RECVS as usize * MSG_LEN,
            len: MSG_LEN,
        }
    }

    /// Waits for the next completion, failing if the connection reports an event first
    /// (disconnect, device removal) or nothing comes in time.
    pub(crate) fn wait(&self) -> Result<WorkCompletion> {
        let qp = self.qp()?;
        // Completions first: a connection that failed still flushes what was posted, and a
        // provider may report the failure to the connection manager before they are polled.
        for _ in 0..50 {
            match qp.wait(msecs_to_jiffies(100)) {
                Err(e) if e == ETIMEDOUT => {
                    if self.id.has_events() {
                        return Err(ECONNRESET);
                    }
                }
                other => return other,
            }
        }
        Err(ETIMEDOUT)
    }

    /// Waits for a successful completion of `opcode`.
    pub(crate) fn expect_wc(&self, opcode: WcOpcode) -> Result<WorkCompletion> {
        let wc = self.wait()?;
        if !wc.status.is_success() || wc.opcode != opcode {
            pr_err!(
                "rdma ping: expected {:?}, got {:?} status {} (tag {}, {})\n",
                opcode,
                wc.opcode,
                wc.status.raw(),
                wc.tag,
                if wc.is_recv { "receive" } else { "send" }
            );
            while let Ok(Some(event)) = self.id.try_event() {
                pr_err!("rdma ping: connection event {}\n", event.name());
            }
            return Err(EIO);
        }
        Ok(wc)
    }

    /// Takes a receive completion and posts its slot again.
    fn expect_recv(&self, opcode: WcOpcode) -> Result<WorkCompletion> {
        let wc = self.expect_wc(opcode)?;
        if wc.tag >= u64::from(RECVS) {
            return Err(EIO);
        }
        self.post_recv(wc.tag as u32)?;
        Ok(wc)
    }

    fn read_msg(&self, wc: &WorkCompletion, out: &mut [u8]) -> Result {
        if wc.byte_len as usize != out.len() {
            pr_err!("rdma ping: message of {} bytes\n", wc.byte_len);
            return Err(EPROTO);
        }
        self.msgs.read(wc.tag as usize * MSG_LEN, out)
    }
}

/// Waits for `id`'s next event and checks it is the one wanted (by name).
fn expect_event(id: &CmId, wanted: &str) -> Result<CmEvent> {
    let event = id.next_event(timeout())?;
    if event.name() != wanted {
        pr_err!("rdma ping: expected {}, got {}\n", wanted, event.name());
        return Err(ECONNREFUSED);
    }
    Ok(event)
}

/// The byte at `i` of `round`'s pattern `which`.
pub(crate) fn pattern(which: u8, round: u32, i: usize) -> u8 {
    (i as u8).wrapping_mul(31) ^ which ^ (round as u8)
}

fn fill(buf: &DmaBuffer, which: u8, round: u32) -> Result {
    let mut chunk = [0u8; 256];
    for start in (0..buf.len()).step_by(chunk.len()) {
        for (k, b) in chunk.iter_mut().enumerate() {
            *b = pattern(which, round, start + k);
        }
        let n = chunk.len().min(buf.len() - start);
        buf.write(start, &chunk[..n])?;
    }
    Ok(())
}

fn verify(buf: &DmaBuffer, which: u8, round: u32) -> Result {
    let mut chunk = [0u8; 256];
    for start in (0..buf.len()).step_by(chunk.len()) {
        let n = chunk.len().min(buf.len() - start);
        buf.read(start, &mut chunk[..n])?;
        for (k, b) in chunk[..n].iter().enumerate() {
            if *b != pattern(which, round, start + k) {
                pr_err!("rdma ping: byte {} differs in round {}\n", start + k, round);
                return Err(EBADMSG);
            }
        }
    }
    Ok(())
}

/// What the client advertises: where its data is.
fn encode_remote(remote: Remote, len: u32) -> [u8; 16] {
    let mut msg = [0u8; 16];
    msg[..8].copy_from_slice(&remote.addr.to_be_bytes());
    msg[8..12].copy_from_slice(&remote.rkey.to_be_bytes());
    msg[12..].copy_from_slice(&len.to_be_bytes());
    msg
}

fn decode_remote(msg: &[u8; 16]) -> (Remote, u32) {
    let mut addr = [0u8; 8];
    let mut word = [0u8; 4];
    addr.copy_from_slice(&msg[..8]);
    word.copy_from_slice(&msg[8..12]);
    let rkey = u32::from_be_bytes(word);
    word.copy_from_slice(&msg[12..]);
    (
        Remote {
            addr: u64::from_be_bytes(addr),
            rkey,
        },
        u32::from_be_bytes(word),
    )
}

/// A listener on `addr`.
pub(crate) fn listen(addr: SocketAddr) -> Result<CmId> {
    let listener = CmId::new()?;
    listener.bind(&addr)?;
    listener.listen(4)?;
    Ok(listener)
}

/// A client end with its QP, connecting to `addr` (an iWARP connect needs the QP).
pub(crate) fn start_client(addr: SocketAddr) -> Result<End> {
    start_client_from(None, addr)
}

/// A client end on the device of `src` (if given), connecting to `addr`.
pub(crate) fn start_client_from(src: Option<SocketAddr>, addr: SocketAddr) -> Result<End> {
    start_client_with(src, addr, None)
}

/// A client end as [`start_client_from`] makes it, with `handler` taking its completions.
fn start_client_with(
    src: Option<SocketAddr>,
    addr: SocketAddr,
    handler: Option<Arc<dyn CompletionHandler>>,
) -> Result<End> {
    let client = CmId::new()?;
    client.resolve_addr(src.as_ref(), &addr, 2000)?;
    expect_event(&client, "ADDR_RESOLVED")?;
    client.resolve_route(2000)?;
    expect_event(&client, "ROUTE_RESOLVED")?;
    let client = End::new(client, handler)?;
    let ird_ord = client.id.device()?.caps().max_qp_rd_atom.min(16) as u8;
    client.id.connect(&ConnParam {
        private_data: HELLO,
        responder_resources: ird_ord,
        initiator_depth: ird_ord,
        retry_count: 7,
        rnr_retry_count: 7,
    })?;
    Ok(client)
}

/// Connects a client to a listener on `addr` whose ULP rejects the request with `data`;
/// returns the private data the client's REJECTED event carries.
pub(crate) fn rejected(addr: SocketAddr, data: &[u8]) -> Result<KVec<u8>> {
    let listener = listen(addr)?;
    let client = start_client(addr)?;
    let CmEvent::ConnectRequest(server, param) = expect_event(&listener, "CONNECT_REQUEST")? else {
        return Err(EPROTO);
    };
    if !param.private_data.starts_with(HELLO) {
        pr_err!("rdma ping: connection request without our private data\n");
        return Err(EPROTO);
    }
    server.reject(data)?;
    match client.id.next_event(timeout())? {
        CmEvent::Rejected(_, received) => Ok(received),
        other => {
            pr_err!("rdma ping: got {} instead of REJECTED\n", other.name());
            Err(EPROTO)
        }
    }
}

/// A connected client and server. Dropping it tears both down (drain, destroy).
pub(crate) struct Pair {
    /// The client end.
    pub(crate) client: End,
    /// The server end.
    pub(crate) server: End,
    /// The listener the server end came from.
    listener: CmId,
    /// Rounds completed.
    pub(crate) rounds: u32,
}

impl Pair {
    /// Connects a client to a listener on `addr`, both here.
    pub(crate) fn connect(addr: SocketAddr) -> Result<Self> {
        Self::connect_from(None, addr)
    }

    /// Connects a client on the device of `src` (if given) to a listener on `addr`.
    pub(crate) fn connect_from(src: Option<SocketAddr>, addr: SocketAddr) -> Result<Self> {
        Self::connect_with(src, addr, None)
    }

    /// Connects a client whose completions `handler` takes to a listener on `addr`.
    pub(crate) fn connect_with_handler(
        addr: SocketAddr,
        handler: Arc<dyn CompletionHandler>,
    ) -> Result<Self> {
        Self::connect_with(None, addr, Some(handler))
    }

    fn connect_with(
        src: Option<SocketAddr>,
        addr: SocketAddr,
        handler: Option<Arc<dyn CompletionHandler>>,
    ) -> Result<Self> {
        let listener = listen(addr)?;
        let client = start_client_with(src, addr, handler)?;
        let CmEvent::ConnectRequest(server, param) = expect_event(&listener, "CONNECT_REQUEST")?
        else {
            return Err(EPROTO);
        };
        // iWARP may pad private data; ours must come first.
        if !param.private_data.starts_with(HELLO) {
            pr_err!("rdma ping: connection request without our private data\n");
            return Err(EPROTO);
        }
        let server = End::new(server, None)?;
        server.id.accept(&ConnParam {
            private_data: HELLO,
            // The request's values are already from our side's point of view.
            responder_resources: param.responder_resources,
            initiator_depth: param.initiator_depth,
            ..Default::default()
        })?;
        expect_event(&server.id, "ESTABLISHED")?;
        expect_event(&client.id, "ESTABLISHED")?;
        // Both ends are ready to send (IB_QPS_RTS).
        if client.qp()?.state()? != 3 || server.qp()?.state()? != 3 {
            return Err(EPROTO);
        }
        Ok(Self {
            client,
            server,
            listener,
            rounds: 0,
        })
    }

    /// Client: registers its data buffer with `access` and sends where it is.
    fn advertise(&self, access: Access) -> Result<Remote> {
        let c = &self.client;
        c.qp()?.post_send(
            &SendWr::RegMr {
                mr: &c.mr,
                buffer: &c.data,
                access,
            },
            1,
        )?;
        c.expect_wc(WcOpcode::RegMr)?;
        let (remote, local) = c.advertisement()?;
        c.qp()?.post_send(
            &SendWr::Send {
                local,
                solicited: false,
            },
            2,
        )?;
        c.expect_wc(WcOpcode::Send)?;
        Ok(remote)
    }

    /// Server: receives the client's advertisement.
    fn receive_advertisement(&self) -> Result<Remote> {
        let s = &self.server;
        let wc = s.expect_recv(WcOpcode::Recv)?;
        let mut msg = [0u8; 16];
        s.read_msg(&wc, &mut msg)?;
        let (remote, len) = decode_remote(&msg);
        if len as usize != DATA_LEN {
            return Err(EPROTO);
        }
        Ok(remote)
    }

    /// `ECONNRESET` if the connection manager reported anything (a disconnect, the device
    /// going away) on one of the ids: connected ids have nothing else to say.
    pub(crate) fn check_events(&self) -> Result {
        if self.client.id.has_events() || self.server.id.has_events() || self.listener.has_events()
        {
            return Err(ECONNRESET);
        }
        Ok(())
    }

    /// The client registers three pages of its own from 100 bytes into the first to 50 bytes
    /// before the end of the last; the server RDMA Writes pattern 0x3c of `round` there; the
    /// client invalidates the region. Returns how many bytes of the pages differ from what the
    /// write should have left: the pattern, in order across the page boundaries, and zeroes
    /// outside the range.
    pub(crate) fn write_into_pages(&self, round: u32) -> Result<usize> {
        self.check_events()?;
        let (c, s) = (&self.client, &self.server);
        let pages = [
            Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?,
            Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?,
            Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?,
        ];
        let (offset, len) = (100, 3 * PAGE_SIZE - 150);
        let pd = c.mr.pd();
        let mapped = MappedPages::new(pd, &pages, offset, len)?;
        let mr = FastRegMr::new(pd, pages.len() as u32 + 1)?;
        let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        let reg = SendWr::RegPages {
            mr: &mr,
            pages: &mapped,
            access,
        };
        c.qp()?.post_send(&reg, 20)?;
        c.expect_wc(WcOpcode::RegMr)?;
        if mr.length() != len as u64 {
            pr_err!("rdma ping: {} bytes registered as {}\n", len, mr.length());
            return Err(EPROTO);
        }
        let remote = Remote {
            addr: mr.iova(),
            rkey: mr.rkey(),
        };
        fill(&s.data, 0x3c, round)?;
        let write = SendWr::Write {
            local: Sge {
                buffer: &s.data,
                offset: 0,
                len,
            },
            remote,
        };
        s.qp()?.post_send(&write, 21)?;
        s.expect_wc(WcOpcode::RdmaWrite)?;
        c.qp()?.post_send(&SendWr::LocalInv { mr: &mr }, 22)?;
        c.expect_wc(WcOpcode::LocalInv)?;
        mapped.sync_for_cpu();
        let mut wrong = 0;
        let mut bytes = KVec::from_elem(0u8, PAGE_SIZE, GFP_KERNEL)?;
        for (index, page) in pages.iter().enumerate() {
            // SAFETY: `bytes` has room for a page; nothing writes the page any more (the
            // region over it was invalidated).
            unsafe { page.read_raw(bytes.as_mut_ptr(), 0, PAGE_SIZE)? };
            for (at, byte) in bytes.iter().enumerate() {
                let i = (index * PAGE_SIZE + at).wrapping_sub(offset);
                let expected = if i < len { pattern(0x3c, round, i) } else { 0 };
                wrong += usize::from(*byte != expected);
            }
        }
        Ok(wrong)
    }

    /// The server RDMA Writes three pages of its own, from 100 bytes into the first to 50
    /// bytes before the end of the last, into the client's data buffer a page's bytes at a
    /// time, reading them with the local DMA key (no registration); a Send follows. Requests
    /// that name bytes outside the mapped range, across a page boundary or none at all, or
    /// pages mapped for another protection domain, are refused with `EINVAL` before they are
    /// posted. Returns how many bytes of the client's buffer differ from the pages' range
    /// written at its start (the rest left as it was).
    pub(crate) fn write_from_pages(&self, round: u32) -> Result<usize> {
        self.check_events()?;
        let (c, s) = (&self.client, &self.server);
        let (offset, len) = (100, 3 * PAGE_SIZE - 150);
        let pages = [
            Page::alloc_page(GFP_KERNEL)?,
            Page::alloc_page(GFP_KERNEL)?,
            Page::alloc_page(GFP_KERNEL)?,
        ];
        let mut bytes = KVec::from_elem(0u8, PAGE_SIZE, GFP_KERNEL)?;
        for (index, page) in pages.iter().enumerate() {
            for (at, byte) in bytes.iter_mut().enumerate() {
                *byte = pattern(0x77, round, (index * PAGE_SIZE + at).wrapping_sub(offset));
            }
            // SAFETY: `bytes` holds a page; nobody else uses the page yet.
            unsafe { page.write_raw(bytes.as_ptr(), 0, PAGE_SIZE)? };
        }
        fill(&c.data, 0x11, round)?;
        let remote = self.advertise_all()?;
        let mapped = MappedPages::new(s.mr.pd(), &pages, offset, len)?;
        let qp = s.qp()?;
        // `n` bytes from byte `at` of `pages` to the same offset of the client's buffer.
        fn write(pages: &Arc<MappedPages>, at: usize, n: usize, to: Remote) -> SendWr<'_> {
            SendWr::WriteFromPages {
                local: PagesSge {
                    pages,
                    offset: at,
                    len: n,
                },
                remote: Remote {
                    addr: to.addr + at as u64,
                    ..to
                },
            }
        }
        // Refused: past the range, across the first page's end, empty, another PD's pages.
        let first = PAGE_SIZE - offset;
        let foreign = MappedPages::new(c.mr.pd(), &pages, offset, len)?;
        for (wr, what) in [
            (write(&mapped, len - 10, 20, remote), "past the range"),
            (
                write(&mapped, first - 10, 20, remote),
                "across a page boundary",
            ),
            (write(&mapped, 0, 0, remote), "of no bytes"),
            (write(&foreign, 0, 10, remote), "of another PD"),
        ] {
            match qp.post_send(&wr, 30) {
                Err(e) if e == EINVAL => {}
                other => {
                    pr_err!(
                        "rdma ping: a Write from pages {} gave {:?}\n",
                        what,
                        other.err()
                    );
                    return Err(EPROTO);
                }
            }
        }
        drop(foreign);
        let mut at = 0;
        while at < len {
            let n = (len - at).min(PAGE_SIZE - (offset + at) % PAGE_SIZE);
            qp.post_send(&write(&mapped, at, n, remote), 31)?;
            s.expect_wc(WcOpcode::RdmaWrite)?;
            at += n;
        }
        // The Writes hold the pages until they completed; ours go now.
        drop(mapped);
        self.send_done(None, 32)?;
        self.invalidate()?;
        let mut wrong = 0;
        let mut chunk = [0u8; 256];
        for start in (0..DATA_LEN).step_by(chunk.len()) {
            let n = chunk.len().min(DATA_LEN - start);
            c.data.read(start, &mut chunk[..n])?;
            for (k, byte) in chunk[..n].iter().enumerate() {
                let i = start + k;
                let expected = if i < len {
                    pattern(0x77, round, i)
                } else {
                    pattern(0x11, round, i)
                };
                wrong += usize::from(*byte != expected);
            }
        }
        Ok(wrong)
    }

    /// The server sends "done" after what it posted before (a Send with Invalidate of
    /// `invalidate`, if given), its completion tagged `tag`; returns the client's receive
    /// completion of it, the message checked.
    fn send_done(&self, invalidate: Option<u32>, tag: u64) -> Result<WorkCompletion> {
        let (c, s) = (&self.client, &self.server);
        s.msgs.write(RECVS as usize * MSG_LEN, b"done")?;
        let local = Sge {
            len: 4,
            ..s.send_slot()
        };
        let send = match invalidate {
            Some(rkey) => SendWr::SendWithInv { local, rkey },
            None => SendWr::Send {
                local,
                solicited: false,
            },
        };
        s.qp()?.post_send(&send, tag)?;
        s.expect_wc(WcOpcode::Send)?;
        let wc = c.expect_recv(WcOpcode::Recv)?;
        let mut done = [0u8; 4];
        c.read_msg(&wc, &mut done)?;
        if &done != b"done" {
            return Err(EPROTO);
        }
        Ok(wc)
    }

    /// One round of Send/Recv, RDMA Read, RDMA Write and Send with Invalidate, verified.
    pub(crate) fn round(&mut self) -> Result {
        self.check_events()?;
        let round = self.rounds;
        let (c, s) = (&self.client, &self.server);
        fill(&c.data, 0xa5, round)?;
        let advertised =
            self.advertise(Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE)?;
        let remote = self.receive_advertisement()?;
        if remote.rkey != advertised.rkey {
            return Err(EPROTO);
        }
        let whole = Sge {
            buffer: &s.data,
            offset: 0,
            len: DATA_LEN,
        };
        s.qp()?.post_send(
            &SendWr::Read {
                local: whole,
                remote,
            },
            3,
        )?;
        let wc = s.expect_wc(WcOpcode::RdmaRead)?;
        let _ = wc;
        verify(&s.data, 0xa5, round)?;
        fill(&s.data, 0x5a, round)?;
        let whole = Sge {
            buffer: &s.data,
            offset: 0,
            len: DATA_LEN,
        };
        s.qp()?.post_send(
            &SendWr::Write {
                local: whole,
                remote,
            },
            4,
        )?;
        s.expect_wc(WcOpcode::RdmaWrite)?;
        let wc = self.send_done(Some(remote.rkey), 5)?;
        if wc.invalidated_rkey != Some(remote.rkey) {
            pr_err!(
                "rdma ping: Send with Invalidate did not report key {:#x}\n",
                remote.rkey
            );
            return Err(EPROTO);
        }
        // The Write was placed before the Send that followed it was delivered.
        verify(&c.data, 0x5a, round)?;
        self.rounds += 1;
        Ok(())
    }

    /// Client: registers its data buffer for every remote access and tells the server.
    fn advertise_all(&self) -> Result<Remote> {
        let advertised = self.advertise(
            Access::LOCAL_WRITE
                | Access::REMOTE_READ
                | Access::REMOTE_WRITE
                | Access::REMOTE_ATOMIC,
        )?;
        let remote = self.receive_advertisement()?;
        if remote.rkey != advertised.rkey {
            return Err(EPROTO);
        }
        Ok(remote)
    }

    /// Write with Immediate then Send with Immediate (zero-length) from the server: the
    /// immediate values arrive in the client's completions and the written data is there.
    pub(crate) fn immediate(&mut self) -> Result {
        fill(&self.client.data, 0x11, 0)?;
        let remote = self.advertise_all()?;
        let (c, s) = (&self.client, &self.server);
        let imm = 0x1234_5678u32;
        fill(&s.data, 0x77, 0)?;
        let head = Sge {
            buffer: &s.data,
            offset: 0,
            len: 4096,
        };
        s.qp()?.post_send(
            &SendWr::WriteWithImm {
                local: head,
                remote,
                imm,
            },
            6,
        )?;
        s.expect_wc(WcOpcode::RdmaWrite)?;
        let wc = c.expect_recv(WcOpcode::RecvRdmaWithImm)?;
        if wc.imm != Some(imm) {
            pr_err!("rdma ping: immediate {:?}\n", wc.imm);
            return Err(EPROTO);
        }
        let mut first = [0u8; 4096];
        c.data.read(0, &mut first)?;
        if first
            .iter()
            .enumerate()
            .any(|(i, b)| *b != pattern(0x77, 0, i))
        {
            return Err(EBADMSG);
        }
        let empty = Sge {
            len: 0,
            ..s.send_slot()
        };
        s.qp()?.post_send(
            &SendWr::SendWithImm {
                local: empty,
                imm: !imm,
            },
            8,
        )?;
        s.expect_wc(WcOpcode::Send)?;
        let wc = c.expect_recv(WcOpcode::Recv)?;
        if wc.imm != Some(!imm) || wc.byte_len != 0 {
            return Err(EPROTO);
        }
        self.invalidate()
    }

    /// Registrations ride on the next signaled request of their chain
    /// ([`SendChain::add_unsignaled`](kernel::rdma::consumer::kernel_qp::SendChain::add_unsignaled)):
    /// the client registers its data buffer unsignaled and invalidates it in the same chain,
    /// three times as often as its send queue holds requests; only the invalidations complete,
    /// and each takes its registration's slot with it (else the queue would fill up). Then a
    /// registration rides on the Send that advertises it, the server RDMA Writes pattern 0x5a
    /// of `round` through it and sends "done", and the client checks its data. An unsignaled
    /// request that is not a registration is refused with `EINVAL`.
    pub(crate) fn registrations_ride(&self, round: u32) -> Result {
        self.check_events()?;
        let (c, s) = (&self.client, &self.server);
        let qp = c.qp()?;
        let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        let reg = SendWr::RegMr {
            mr: &c.mr,
            buffer: &c.data,
            access,
        };
        let ignore = |_| {};
        let refused = qp
            .send_chain(&ignore)
            .add_unsignaled(&SendWr::LocalInv { mr: &c.mr }, 40);
        if refused != Err(EINVAL) {
            pr_err!("rdma ping: an unsignaled LOCAL_INV gave {:?}\n", refused);
            return Err(EPROTO);
        }
        for _ in 0..24 {
            let mut chain = qp.send_chain(&ignore);
            chain.add_unsignaled(&reg, 41)?;
            chain.add(&SendWr::LocalInv { mr: &c.mr }, 42)?;
            chain.post()?;
            drop(chain);
            let wc = c.expect_wc(WcOpcode::LocalInv)?;
            if wc.tag != 42 {
                pr_err!(
                    "rdma ping: completion of request {} for a LOCAL_INV\n",
                    wc.tag
                );
                return Err(EPROTO);
            }
        }
        if let Some(wc) = qp.poll() {
            pr_err!(
                "rdma ping: an unsignaled registration completed: {:?}\n",
                wc
            );
            return Err(EPROTO);
        }
        // A registration riding on the Send that advertises the region.
        fill(&c.data, 0x11, round)?;
        let mut chain = qp.send_chain(&ignore);
        chain.add_unsignaled(&reg, 43)?;
        let (_, local) = c.advertisement()?;
        chain.add(
            &SendWr::Send {
                local,
                solicited: false,
            },
            44,
        )?;
        chain.post()?;
        drop(chain);
        if c.expect_wc(WcOpcode::Send)?.tag != 44 {
            return Err(EPROTO);
        }
        let remote = self.receive_advertisement()?;
        fill(&s.data, 0x5a, round)?;
        let write = SendWr::Write {
            local: Sge {
                buffer: &s.data,
                offset: 0,
                len: DATA_LEN,
            },
            remote,
        };
        s.qp()?.post_send(&write, 45)?;
        s.expect_wc(WcOpcode::RdmaWrite)?;
        self.send_done(None, 46)?;
        verify(&c.data, 0x5a, round)?;
        self.invalidate()
    }

    /// Client: ends the registration of its buffer itself (`LOCAL_INV`): a region must be
    /// invalid before it is registered again (rxe enforces it).
    fn invalidate(&self) -> Result {
        let c = &self.client;
        c.qp()?.post_send(&SendWr::LocalInv { mr: &c.mr }, 13)?;
        c.expect_wc(WcOpcode::LocalInv)?;
        Ok(())
    }

    /// FetchAdd and CmpSwap from the server on the client's first word, checked by value.
    /// On a device without atomics they are refused with `EOPNOTSUPP` before reaching it and
    /// the connection runs a full round afterwards; returns whether atomics ran.
    pub(crate) fn atomics(&mut self) -> Result<bool> {
        let caps = self.server.id.device()?.caps();
        if caps.atomic == AtomicCap::None {
            let s = &self.server;
            let word = Sge {
                buffer: &s.data,
                offset: 0,
                len: 8,
            };
            let remote = Remote { addr: 0, rkey: 0 };
            let refused = s.qp()?.post_send(
                &SendWr::FetchAdd {
                    local: word,
                    remote,
                    add: 1,
                },
                7,
            );
            if refused != Err(EOPNOTSUPP) {
                pr_err!(
                    "rdma ping: atomic without device support: {:?}\n",
                    refused.err()
                );
                return Err(EPROTO);
            }
            self.round()?;
            return Ok(false);
        }
        let remote = self.advertise_all()?;
        let (c, s) = (&self.client, &self.server);
        c.data.write(0, &100u64.to_ne_bytes())?;
        let result = || Sge {
            buffer: &s.data,
            offset: 8,
            len: 8,
        };
        let mut word = [0u8; 8];
        s.qp()?.post_send(
            &SendWr::FetchAdd {
                local: result(),
                remote,
                add: 5,
            },
            9,
        )?;
        s.expect_wc(WcOpcode::FetchAdd)?;
        s.data.read(8, &mut word)?;
        if u64::from_ne_bytes(word) != 100 {
            return Err(EBADMSG);
        }
        let swap = SendWr::CmpSwap {
            local: result(),
            remote,
            compare: 105,
            swap: 7,
        };
        s.qp()?.post_send(&swap, 10)?;
        s.expect_wc(WcOpcode::CmpSwap)?;
        s.data.read(8, &mut word)?;
        if u64::from_ne_bytes(word) != 105 {
            return Err(EBADMSG);
        }
        c.data.read(0, &mut word)?;
        if u64::from_ne_bytes(word) != 7 {
            return Err(EBADMSG);
        }
        self.invalidate()?;
        Ok(true)
    }

    /// Writes to a key the client invalidated: the Write must fail with an error completion and
    /// the connection go down without anything hanging.
    pub(crate) fn stale_key_write(&mut self) -> Result<WcStatus> {
        self.round()?;
        // Round's Send with Invalidate invalidated the key the client advertised last.
        let stale = Remote {
            addr: self.client.mr.iova(),
            rkey: self.client.mr.rkey(),
        };
        let s = &self.server;
        s.qp()?.post_send(
            &SendWr::Write {
                local: Sge {
                    buffer: &s.data,
                    offset: 0,
                    len: 512,
                },
                remote: stale,
            },
            11,
        )?;
        // Depending on the transport the Write completes locally and the failure shows on the
        // next operation, or the Write itself fails: a Read after it must not succeed.
        let wc = s.wait()?;
        let status = if !wc.status.is_success() {
            wc.status
        } else {
            let _ = s.qp()?.post_send(
                &SendWr::Read {
                    local: Sge {
                        buffer: &s.data,
                        offset: 0,
                        len: 512,
                    },
                    remote: stale,
                },
                12,
            );
            s.wait()?.status
        };
        if status.is_success() {
            return Err(EPROTO);
        }
        Ok(status)
    }
}
