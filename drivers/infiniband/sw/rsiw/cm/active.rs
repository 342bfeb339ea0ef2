// SPDX-License-Identifier: GPL-2.0

//! The active side of connection management: `iw_connect` sends the MPA Request, a
//! [`Connecting`] work item takes the MPA Reply as it arrives (or ends at the deadline), reports
//! it to iw_cm as CONNECT_REPLY and attaches the connection to the QP.

use super::*;

/// What an `iw_connect` carries to its MPA Reply.
struct Initiating {
    id: IwCmId,
    hs: InitiatorHandshake,
    qp: Arc<Qp>,
    ird: u32,
    ord: u32,
    /// Whether a TERMINATE for a failed setup carries a CRC: the reply may not say.
    crc_required: bool,
    /// The device's counters.
    counters: Arc<Counters>,
}

/// An `iw_connect` waiting for the MPA Reply.
#[pin_data]
struct Connecting {
    socket: Arc<TcpSocket>,
    /// `None` once the exchange is over.
    #[pin]
    state: Mutex<Option<Initiating>>,
    /// Steps the exchange when bytes arrive.
    #[pin]
    work: Work<Connecting, 0>,
    /// Ends it at its deadline.
    #[pin]
    deadline: DelayedWork<Connecting, 1>,
}

impl_has_work! {
    impl HasWork<Self, 0> for Connecting { self.work }
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self, 1> for Connecting { self.deadline }
}

impl Connecting {
    /// Takes the exchange, if it is not over, and stops stepping it.
    fn take(&self) -> Option<Initiating> {
        let state = self.state.lock().take()?;
        drop(self.socket.remove_callbacks());
        drop(self.deadline.cancel());
        Some(state)
    }
}

impl WorkItem<0> for Connecting {
    type Pointer = Arc<Connecting>;

    fn run(this: Arc<Connecting>) {
        let mut state = this.state.lock();
        let Some(hs) = state.as_mut().map(|s| &mut s.hs) else {
            return;
        };
        let feed = |bytes: &[u8]| match hs.on_bytes(bytes) {
            Ok((used, event)) => (used, event.map(Ok)),
            Err(_) => (0, Some(Err(EINVAL))),
        };
        let (result, event) = match step(&this.socket, feed) {
            Step::More => return,
            Step::Done(Ok(event)) => (Ok(()), Some(event)),
            Step::Done(Err(e)) | Step::Failed(e) => (Err(e), None),
        };
        drop(state);
        if let Some(initiating) = this.take() {
            connect_outcome(initiating, &this.socket, result, event);
        }
    }
}

impl WorkItem<1> for Connecting {
    type Pointer = Arc<Connecting>;

    fn run(this: Arc<Connecting>) {
        if let Some(initiating) = this.take() {
            connect_outcome(initiating, &this.socket, Err(ETIMEDOUT), None);
        }
    }
}

/// Reports the end of an `iw_connect`'s MPA exchange to iw_cm, and attaches the connection to
/// the QP if it is up.
fn connect_outcome(
    initiating: Initiating,
    socket: &Arc<TcpSocket>,
    result: Result,
    event: Option<InitiatorEvent>,
) {
    let Initiating {
        id,
        hs,
        qp,
        ird,
        ord,
        crc_required,
        counters,
    } = initiating;
    let outcome = |stat: CmStat, why: &str| {
        counters.cm(stat);
        if let Ok(peer) = socket.peer_addr() {
            pr_debug!("{peer}: MPA exchange as initiator: {why}\n");
        }
    };
    // iw_cm holds the QP until it hears CONNECT_REPLY, so every branch below delivers one.
    // A socket the peer already reset has no addresses: the id's are those it connected.
    let unspecified = SocketAddr::from(([0, 0, 0, 0], 0));
    let local = socket
        .local_addr()
        .or_else(|_| id.local_addr())
        .unwrap_or(unspecified);
    let remote = socket
        .peer_addr()
        .or_else(|_| id.remote_addr())
        .unwrap_or(unspecified);
    fn failed<'a>(
        (local, remote): (SocketAddr, SocketAddr),
        error: Error,
        private_data: &'a [u8],
        ird: u8,
        ord: u8,
    ) -> IwEvent<'a> {
        IwEvent::ConnectFailed {
            error,
            local,
            remote,
            private_data,
            ird,
            ord,
        }
    }
    let addrs = (local, remote);
    match (result, event) {
        (Ok(()), Some(InitiatorEvent::Connected(decision))) => {
            let ird = depth(decision.local_ird, ird);
            let ord = depth(decision.local_ord, ord);
            // The ULP hears the responder's own IRD and ORD (RFC 6581 section 9.1), which
            // rdma_cm reports as the initiator depth and responder resources; without
            // enhanced data (revision 1), our depths.
            let (ulp_ird, ulp_ord) = decision.peer.map_or((ird, ord), |p| (p.ird, p.ord));
            // Peer-to-peer: the RTR is the first FPDU, sent before anyone hears of the
            // connection.
            let mut rtr = [0u8; MAX_FRAME_LEN];
            let sent = hs
                .rtr_fpdu(&mut rtr, KernelCrc32c)
                .map_err(|_| EINVAL)
                .and_then(|n| match rtr.get(..n) {
                    Some([]) => Ok(()),
                    Some(bytes) => socket.send(bytes, MsgFlags::NOSIGNAL).map(|_| ()),
                    None => Err(EINVAL),
                });
            if let Err(e) = sent {
                outcome(CmStat::Failed, "the RTR could not be sent");
                let _ = id.deliver(failed(addrs, e, &[], 0, 0));
                let _ = socket.shutdown(Shutdown::Both);
                return;
            }
            let data = hs.peer_private_data();
            if data.len() > MAX_EVENT_PRIVATE_DATA {
                // More than iw_cm can hand the ULP: the connection fails, said so.
                outcome(CmStat::Failed, "private data too long");
                let _ = id.deliver(failed(addrs, EMSGSIZE, &[], 0, 0));
                let _ = socket.shutdown(Shutdown::Both);
                return;
            }
            let terms = Terms {
                revision: decision.revision,
                crc: decision.use_crc,
                ird,
                ord,
                rtr: RtrState::initiator(decision.rtr),
                large_fpdus: decision.large_fpdus,
            };
            let connected = &mut false;
            let attached = qp.attach(
                Established {
                    socket: socket.clone(),
                    cm_id: id,
                    terms,
                },
                |_, id, status| {
                    let (ird, ord) = (clamp_u8(ulp_ird), clamp_u8(ulp_ord));
                    if let Err(e) = status {
                        let _ = id.deliver(failed(addrs, e, data, ird, ord));
                        return Err(ECONNRESET);
                    }
                    let (local, remote) = addrs;
                    let up = id
                        .connected(Up::Accepted {
                            local,
                            remote,
                            private_data: data,
                            ird,
                            ord,
                        })
                        .map_err(|(_, e)| e)?;
                    *connected = true;
                    Ok(up)
                },
            );
            if attached.is_err() {
                let _ = socket.shutdown(Shutdown::Both);
            }
            if *connected {
                count_established(&qp, "initiator", socket, &terms);
            } else {
                outcome(CmStat::Failed, "the QP could not take the connection");
            }
        }
        (Ok(()), Some(InitiatorEvent::Rejected { peer })) => {
            // A reject carries the responder's IRD and ORD to the ULP too (section 9.1).
            let (ird, ord) = peer.map_or((0, 0), |p| (p.ird, p.ord));
            outcome(CmStat::RejectsReceived, "rejected by the peer");
            // Private data iw_cm cannot carry stays out of the refusal.
            let data = Some(hs.peer_private_data())
                .filter(|d| d.len() <= MAX_EVENT_PRIVATE_DATA)
                .unwrap_or(&[]);
            let _ = id.deliver(failed(
                addrs,
                ECONNREFUSED,
                data,
                clamp_u8(ird),
                clamp_u8(ord),
            ));
            let _ = socket.shutdown(Shutdown::Both);
        }
        (Ok(()), Some(InitiatorEvent::Failed(error))) => {
            // E.g. no RTR kind in common (RFC 6581 section 8: TERMINATE 2/0/7).
            send_terminate(socket, error, crc_required);
            if error.term().is_some() {
                counters.data(Stat::TerminateTxMpa, 1);
            }
            outcome(CmStat::Failed, "the reply was refused");
            let _ = id.deliver(failed(addrs, ECONNREFUSED, &[], 0, 0));
            let _ = socket.shutdown(Shutdown::Both);
        }
        (Err(e), _) => {
            outcome(CmStat::Failed, "no reply (error or deadline)");
            let _ = id.deliver(failed(addrs, e, &[], 0, 0));
            let _ = socket.shutdown(Shutdown::Both);
        }
        _ => {
            outcome(CmStat::Failed, "no reply");
            let _ = id.deliver(failed(addrs, ECONNRESET, &[], 0, 0));
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

/// `iw_connect`.
pub(crate) fn connect(cm: &Cm, qp: Arc<Qp>, id: IwCmId, param: &IwConnParam<'_>) -> Result {
    let remote = id.remote_addr()?;
    let local = id.local_addr()?;
    let socket = TcpSocket::new(&remote)?;
    socket.set_reuseaddr();
    if !local.ip().is_unspecified() || local.port() != 0 {
        socket.bind(&local)?;
    }
    socket.connect(&remote, false)?;
    let ird = param.ird.min(u32::from(cm.settings.max_ird()));
    let ord = param.ord.min(u32::from(cm.settings.max_ord()));
    let mut hs = InitiatorHandshake::new(InitiatorConfig {
        crc: cm.settings.crc(),
        enhanced: cm.settings.enhanced(),
        ird: ird as u16,
        ord: ord as u16,
        max_ird: cm.settings.max_ird(),
        peer_to_peer: cm.settings.peer_to_peer(),
        rtr: if cm.settings.peer_to_peer() {
            cm.settings.rtr_kinds()
        } else {
            RtrKinds::NONE
        },
        large_fpdus: cm.settings.large_fpdus(),
    });
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = hs
        .request(param.private_data, &mut frame)
        .map_err(|_| EINVAL)?;
    socket.send(frame.get(..len).ok_or(EINVAL)?, MsgFlags::NOSIGNAL)?;
    if let Ok(peer) = socket.peer_addr() {
        pr_debug!("{peer}: MPA Request sent ({len} bytes)\n");
    }
    let socket = Arc::new(socket, GFP_KERNEL)?;
    let shared = socket.clone();
    let connecting = Arc::pin_init(
        pin_init!(Connecting {
            socket: shared,
            state <- new_mutex!(
                Some(Initiating {
                    id,
                    hs,
                    qp,
                    ird,
                    ord,
                    crc_required: cm.settings.crc() == CrcPolicy::Required,
                    counters: cm.counters.clone(),
                }),
                "Connecting::state"
            ),
            work <- new_work!("rsiw::Connecting::work"),
            deadline <- new_delayed_work!(cm.queue.clone(), "rsiw::Connecting::deadline"),
        }),
        GFP_KERNEL,
    )?;
    // From here on, failures reach the ULP as a failed CONNECT_REPLY.
    let armed = DelayedWork::run_after(connecting.clone(), cm.settings.mpa_timeout_ms());
    if !armed || step_on_data(&connecting, &socket, &cm.queue).is_err() {
        if let Some(initiating) = connecting.take() {
            connect_outcome(initiating, &socket, Err(ENOMEM), None);
        }
    }
    Ok(())
}
