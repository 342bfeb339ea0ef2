// SPDX-License-Identifier: GPL-2.0

//! The MPA connection setup of one TCP connection, as a pure state machine
//! (RFC 5044 section 7.1, RFC 6581).
//!
//! The kernel owns the socket; these types own the protocol. Each side is fed
//! the bytes TCP delivers, in chunks of any size, and tells the kernel what
//! to send and what to report to the ULP:
//!
//! ```text
//! initiator                                   responder
//! request() -------- MPA Request ----------->  on_bytes() -> ConnectRequest
//!                                              (the ULP decides)
//! on_bytes() <------ MPA Reply -------------- accept() (or reject())
//!   -> Connected
//! rtr_fpdu() ------- RTR FPDU (P2P only) ---->  on_bytes() -> Established
//!                                              rtr_response() (Read RTR)
//! ```
//!
//! What the frames say and what to do about it is decided by
//! [`super::mpa_negotiation`]; this module only sequences it: it gathers
//! frames with [`MpaFrameReader`], runs the negotiation at the right moment,
//! builds the ready-to-receive (RTR) FPDU of the peer-to-peer model and
//! checks it on arrival.
//!
//! Neither side ever consumes a byte past the end of what it waits for: the
//! rest of the chunk is the start of the FPDU stream and belongs to the QP.
//!
//! # The peer-to-peer model
//!
//! The responder may send FPDUs only once it knows that its MPA Reply has
//! arrived, which the first FPDU of the initiator tells it: without RTR the
//! initiator has to send first (RFC 6581 section 4.3). With flag A
//! negotiated, the initiator sends a zero-length Send, RDMA Write or RDMA
//! Read Request as that first FPDU, and no other FPDU before it (section 5
//! and 9.3); the responder reports the connection established when it
//! arrives. The RTR message is a real RDMAP message, so the QP has to
//! account for it:
//!
//! - a zero-length Send takes MSN 1 of queue 0 in both directions' count, a
//!   Read Request MSN 1 of queue 1, so the next one of each is MSN 2;
//! - a Read Request takes an ORD credit at the initiator
//!   ([`super::ord_ird::Requester::issue_rtr_read`]) and is answered by a
//!   zero-length Read Response ([`ResponderHandshake::rtr_response`]),
//!   which the initiator's QP then receives like any other.
//!
//! [`super::qp_engine::EngineConfig::rtr`] tells the QP engine which RTR
//! was sent or received ([`super::qp_engine::RtrState::initiator`] and
//! [`super::qp_engine::RtrState::responder`] build it from the outcomes
//! here), so that it starts past it.
//!
//! The RTR segments use STag 1 and offset 0: a zero-length tagged segment is
//! not validated (see [`super::placement`]), and some RNICs treat STag 0
//! specially, which is why the C siw does the same.
//!
//! # Failures
//!
//! A protocol failure is reported once, as a `Failed` event carrying a
//! [`HandshakeError`]; its [`HandshakeError::term`] names the TERMINATE
//! error RFC 6581 section 8 prescribes (layer 2, type 0, code 4 to 7), if
//! one is to be sent. A misuse of the API (a call in the wrong state, an
//! output buffer too small) is a [`CallError`] and changes nothing.

use super::crc32c::Crc32c;
use super::ddp::DdpHeader;
use super::fpdu::{self, FpduError, FpduReceiver, RxEvent};
use super::mpa::{
    EnhancedData, FrameKind, MpaError, MpaFrame, MpaHeader, RtrKind, RtrKinds, FRAME_HEADER_LEN,
    KEY_LEN, MAX_PRIVATE_DATA_LEN,
};
use super::mpa_negotiation::{
    InitiatorConfig, InitiatorDecision, InitiatorOutcome, NegotiationError, ResponderConfig,
    ResponderDecision,
};
use super::placement::UntaggedQueue;
use super::rdmap::{
    self, Opcode, OpcodeHeader, RdmapError, ReadRequestHeader, Segment, READ_REQUEST_HEADER_LEN,
};
use super::term_error::TermError;
use super::terminate::TerminateControl;
use super::wire::{self, EncodeError};

/// Longest MPA Request or Reply frame: header plus the largest private data.
pub const MAX_FRAME_LEN: usize = FRAME_HEADER_LEN + MAX_PRIVATE_DATA_LEN;

/// The STag the RTR segments carry (never validated: they are zero-length).
pub const RTR_STAG: u32 = 1;

/// The MSN of the first untagged message on each queue.
const FIRST_MSN: u32 = UntaggedQueue::FIRST_MSN;

/// Longest ULPDU an RTR message needs: an untagged Read Request.
const MAX_RTR_ULPDU_LEN: usize = super::ddp::UNTAGGED_HEADER_LEN + READ_REQUEST_HEADER_LEN;

/// Offset of the Terminate Control field in a TERMINATE ULPDU.
const TERMINATE_CONTROL_OFFSET: usize = super::ddp::UNTAGGED_HEADER_LEN;

/// Incremental reader of one MPA Request or Reply frame.
///
/// The frame is collected into a fixed internal buffer from chunks of any
/// size. The header is checked as early as its bytes arrive: a wrong key byte
/// or an invalid PD_Length fails at once, so a peer cannot make the reader
/// wait for bytes that would be refused anyway.
#[derive(Debug, Clone)]
pub struct MpaFrameReader {
    kind: FrameKind,
    buf: [u8; MAX_FRAME_LEN],
    len: usize,
    header: Option<MpaHeader>,
    error: Option<MpaError>,
}

impl MpaFrameReader {
    /// A reader waiting for a frame of `kind`.
    pub const fn new(kind: FrameKind) -> Self {
        Self {
            kind,
            buf: [0; MAX_FRAME_LEN],
            len: 0,
            header: None,
            error: None,
        }
    }

    /// Total length of the frame, once its header is known.
    fn wanted(&self) -> usize {
        self.header.map_or(FRAME_HEADER_LEN, |h| h.frame_len())
    }

    /// Whether the whole frame has been received.
    pub fn is_complete(&self) -> bool {
        self.header.is_some() && self.len >= self.wanted()
    }

    /// Takes bytes from the start of `bytes` up to the end of the frame and
    /// returns how many it took and whether the frame is now complete. Bytes
    /// after the frame are never taken. After an error every call returns
    /// the same error.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(usize, bool), MpaError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let mut consumed = 0;
        while !self.is_complete() {
            let input = bytes.get(consumed..).unwrap_or(&[]);
            let wanted = self.wanted();
            let space = self.buf.get_mut(self.len..wanted).unwrap_or(&mut []);
            let n = space.len().min(input.len());
            if n == 0 {
                break;
            }
            if let (Some(dst), Some(src)) = (space.get_mut(..n), input.get(..n)) {
                dst.copy_from_slice(src);
            }
            self.len += n;
            consumed += n;
            if self.header.is_none() {
                if let Err(e) = self.check_header() {
                    self.error = Some(e);
                    return Err(e);
                }
            }
        }
        Ok((consumed, self.is_complete()))
    }

    /// Checks the header bytes received so far, and decodes the header once
    /// all of it is there.
    fn check_header(&mut self) -> Result<(), MpaError> {
        let seen = self.len.min(KEY_LEN);
        if self.buf.get(..seen) != self.kind.key().get(..seen) {
            return Err(MpaError::BadKey);
        }
        if self.len >= FRAME_HEADER_LEN {
            let header = self.buf.get(..FRAME_HEADER_LEN).unwrap_or(&[]);
            self.header = Some(MpaHeader::decode(header, self.kind)?);
        }
        Ok(())
    }

    /// The decoded frame, once complete.
    pub fn frame(&self) -> Option<MpaFrame<'_>> {
        if !self.is_complete() {
            return None;
        }
        let bytes = self.buf.get(..self.len)?;
        MpaFrame::decode(bytes, self.kind)
            .ok()
            .map(|(frame, _)| frame)
    }

    /// The ULP private data of the complete frame (after the enhanced data,
    /// if any); empty before.
    pub fn ulp_private_data(&self) -> &[u8] {
        self.frame().map_or(&[], |frame| frame.ulp_private_data)
    }
}

/// Why a connection setup failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeError {
    /// The peer's MPA Request or Reply is malformed.
    Frame(MpaError),
    /// The frames cannot be agreed on.
    Negotiation(NegotiationError),
    /// The first FPDU of a peer-to-peer connection is not a valid ULPDU.
    Segment(RdmapError),
    /// The first FPDU of a peer-to-peer connection failed its CRC.
    Fpdu(FpduError),
    /// The first FPDU of a peer-to-peer connection is not a negotiated RTR.
    WrongRtr(RtrError),
    /// The initiator sent a TERMINATE instead of an RTR; the error it
    /// reports, if it names a known one.
    PeerTerminated(Option<TermError>),
    /// The peer did not complete its part in time.
    Timeout,
}

impl HandshakeError {
    /// The TERMINATE error to send to the peer, or `None` when none is sent:
    /// after the peer's own TERMINATE (its stream is already dead) and after
    /// a timeout, where the connection is just closed (the C siw
    /// reports `-ETIMEDOUT` to the ULP and sends nothing).
    ///
    /// An RTR of a kind not negotiated is reported as "no matching RTR
    /// option" (layer 2, type 0, code 7, RFC 6581 section 8).
    pub const fn term(self) -> Option<TermError> {
        match self {
            Self::Frame(e) => Some(e.term()),
            Self::Negotiation(e) => Some(e.term()),
            Self::Segment(e) => Some(e.term()),
            Self::Fpdu(e) => Some(e.term()),
            Self::WrongRtr(_) => Some(TermError::MpaNoMatchingRtr),
            Self::PeerTerminated(_) | Self::Timeout => None,
        }
    }
}

/// How the first FPDU of a peer-to-peer connection missed being an RTR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtrError {
    /// A message that is none of the three RTR kinds.
    UnexpectedMessage(Opcode),
    /// An RTR kind the responder did not offer in its reply.
    NotNegotiated(RtrKind),
    /// The message has payload (or, for a Read Request, a read size).
    NotZeroLength,
    /// The message is not a whole first message: L clear, or MSN other
    /// than 1 or MO other than 0 for an untagged one.
    NotFirstMessage,
}

/// A misuse of the API. The handshake is left as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    /// The call is not valid in the current state.
    WrongState,
    /// The output could not be encoded (buffer too small, private data too
    /// long).
    Encode(EncodeError),
    /// The ULP's IRD/ORD cannot be negotiated with this request: nothing
    /// was written, and the handshake now waits for
    /// [`ResponderHandshake::reject`].
    Refused(NegotiationError),
}

impl From<EncodeError> for CallError {
    fn from(e: EncodeError) -> Self {
        Self::Encode(e)
    }
}

/// Frames a zero-length RTR message (or its Read Response) as one FPDU.
fn encode_segment<C: Crc32c>(
    out: &mut [u8],
    ddp: &DdpHeader,
    header: &OpcodeHeader<'_>,
    use_crc: bool,
    engine: C,
) -> Result<usize, CallError> {
    let mut ulpdu = [0u8; MAX_RTR_ULPDU_LEN];
    let len = rdmap::encode_headers(ddp, header, &mut ulpdu)?;
    let ulpdu = ulpdu.get(..len).unwrap_or(&[]);
    Ok(fpdu::encode_fpdu(out, ulpdu, use_crc.then_some(engine))?)
}

/// What the initiator learns from the MPA Reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitiatorEvent {
    /// The connection is accepted on these terms. If `rtr` is set, send
    /// [`InitiatorHandshake::rtr_fpdu`] before any other FPDU. The peer's
    /// private data is [`InitiatorHandshake::peer_private_data`].
    Connected(InitiatorDecision),
    /// The responder rejected the connection. Its enhanced data (IRD/ORD)
    /// and private data are for the ULP (RFC 6581 section 9.1).
    Rejected {
        /// The responder's enhanced data, if any.
        peer: Option<EnhancedData>,
    },
    /// The setup failed; see [`HandshakeError::term`].
    Failed(HandshakeError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InitiatorState {
    Idle,
    AwaitingReply,
    Connected(InitiatorDecision),
    Rejected,
    Failed(HandshakeError),
}

/// The active side of one MPA connection setup.
#[derive(Debug, Clone)]
pub struct InitiatorHandshake {
    config: InitiatorConfig,
    reader: MpaFrameReader,
    state: InitiatorState,
}

impl InitiatorHandshake {
    /// A handshake that will request a connection on `config`'s terms.
    pub const fn new(config: InitiatorConfig) -> Self {
        Self {
            config,
            reader: MpaFrameReader::new(FrameKind::Reply),
            state: InitiatorState::Idle,
        }
    }

    /// Encodes the MPA Request carrying `private_data` into `out` and
    /// returns its length; the handshake then waits for the reply.
    pub fn request(&mut self, private_data: &[u8], out: &mut [u8]) -> Result<usize, CallError> {
        if self.state != InitiatorState::Idle {
            return Err(CallError::WrongState);
        }
        let len = self.config.encode_request(out, private_data)?;
        self.state = InitiatorState::AwaitingReply;
        Ok(len)
    }

    /// Takes received bytes up to the end of the MPA Reply and returns how
    /// many it took, with the outcome once the reply is complete. Once the
    /// handshake is over nothing is taken: the bytes are FPDUs.
    pub fn on_bytes(&mut self, bytes: &[u8]) -> Result<(usize, Option<InitiatorEvent>), CallError> {
        match self.state {
            InitiatorState::Idle => return Err(CallError::WrongState),
            InitiatorState::AwaitingReply => {}
            _ => return Ok((0, None)),
        }
        let consumed = match self.reader.push(bytes) {
            Ok((n, false)) => return Ok((n, None)),
            Ok((n, true)) => n,
            Err(e) => return Ok((0, Some(self.fail(HandshakeError::Frame(e))))),
        };
        let outcome = match self.reader.frame() {
            Some(reply) => self.config.process_reply(&reply),
            None => return Ok((consumed, None)),
        };
        let event = match outcome {
            Ok(InitiatorOutcome::Accepted(decision)) => {
                self.state = InitiatorState::Connected(decision);
                InitiatorEvent::Connected(decision)
            }
            Ok(InitiatorOutcome::Rejected { peer }) => {
                self.state = InitiatorState::Rejected;
                InitiatorEvent::Rejected { peer }
            }
            Err(e) => self.fail(HandshakeError::Negotiation(e)),
        };
        Ok((consumed, Some(event)))
    }

    fn fail(&mut self, error: HandshakeError) -> InitiatorEvent {
        self.state = InitiatorState::Failed(error);
        InitiatorEvent::Failed(error)
    }

    /// The reply timer fired: fails the handshake unless it is over.
    pub fn on_timeout(&mut self) -> Option<InitiatorEvent> {
        match self.state {
            InitiatorState::Idle | InitiatorState::AwaitingReply => {
                Some(self.fail(HandshakeError::Timeout))
            }
            _ => None,
        }
    }

    /// Encodes the RTR message of a connected peer-to-peer connection into
    /// `out` as one FPDU and returns its length (0 in the client-server
    /// model, where there is none). It must be the first FPDU sent, and
    /// RFC 6581 section 5 suggests to report the connection established to
    /// the ULP only once it is.
    pub fn rtr_fpdu<C: Crc32c>(&self, out: &mut [u8], engine: C) -> Result<usize, CallError> {
        let InitiatorState::Connected(decision) = self.state else {
            return Err(CallError::WrongState);
        };
        let Some(kind) = decision.rtr else {
            return Ok(0);
        };
        let (ddp, header) = match kind {
            RtrKind::Write => (
                rdmap::tagged_header(Opcode::RdmaWrite, true, RTR_STAG, 0),
                OpcodeHeader::None,
            ),
            RtrKind::Send => (
                rdmap::untagged_header(Opcode::Send, true, 0, FIRST_MSN, 0),
                OpcodeHeader::None,
            ),
            RtrKind::Read => (
                rdmap::untagged_header(Opcode::ReadRequest, true, 0, FIRST_MSN, 0),
                OpcodeHeader::ReadRequest(ReadRequestHeader {
                    sink_stag: RTR_STAG,
                    sink_tagged_offset: 0,
                    read_size: 0,
                    source_stag: RTR_STAG,
                    source_tagged_offset: 0,
                }),
            ),
        };
        encode_segment(out, &ddp, &header, decision.use_crc, engine)
    }

    /// The ULP private data of the reply (accepting or rejecting), once
    /// received.
    pub fn peer_private_data(&self) -> &[u8] {
        self.reader.ulp_private_data()
    }

    /// The negotiated terms, once connected.
    pub fn decision(&self) -> Option<InitiatorDecision> {
        match self.state {
            InitiatorState::Connected(decision) => Some(decision),
            _ => None,
        }
    }
}

/// A received MPA Request, for the ULP to accept or reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectRequest {
    /// The MPA revision of the request.
    pub revision: u8,
    /// Whether the initiator asked for CRC.
    pub crc: bool,
    /// The initiator's enhanced data (its IRD and ORD, the connection
    /// model and RTR kinds), which RFC 6581 section 9.1 has the ULP see.
    pub peer: Option<EnhancedData>,
}

/// The RTR message the responder received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceivedRtr {
    /// A zero-length RDMA Write.
    Write,
    /// A zero-length Send (MSN 1 of queue 0). Whether it takes a posted
    /// receive is the QP's policy (the C siw does not offer this kind).
    Send,
    /// A zero-length RDMA Read Request (MSN 1 of queue 1), to be answered by
    /// [`ResponderHandshake::rtr_response`].
    Read(ReadRequestHeader),
}

impl ReceivedRtr {
    /// The kind of RTR.
    pub const fn kind(&self) -> RtrKind {
        match self {
            Self::Write => RtrKind::Write,
            Self::Send => RtrKind::Send,
            Self::Read(_) => RtrKind::Read,
        }
    }
}

/// What the responder learns from the bytes it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponderEvent {
    /// A valid, acceptable MPA Request arrived: hand it to the ULP, then
    /// call [`ResponderHandshake::accept`] or
    /// [`ResponderHandshake::reject`]. The private data is
    /// [`ResponderHandshake::peer_private_data`].
    ConnectRequest(ConnectRequest),
    /// The RTR of a peer-to-peer connection arrived: the connection is
    /// established.
    Established(ReceivedRtr),
    /// The setup failed; see [`HandshakeError::term`]. After a
    /// [`HandshakeError::Negotiation`] error of the request,
    /// [`ResponderHandshake::reject`] still encodes the MPA Reject.
    Failed(HandshakeError),
}

/// A reply the responder has written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// Length of the MPA Reply.
    pub len: usize,
    /// The negotiated terms.
    pub decision: ResponderDecision,
    /// Whether the connection is established once the reply is sent. If
    /// not (peer-to-peer model), send no FPDU and feed
    /// [`ResponderHandshake::on_bytes`] until the RTR arrives.
    pub established: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ResponderState {
    AwaitingRequest,
    RequestReceived,
    Refused(NegotiationError),
    AwaitingRtr(ResponderDecision),
    Established(ResponderDecision, Option<ReceivedRtr>),
    Rejected,
    Failed(HandshakeError),
}

/// What the header of the first FPDU says about it.
enum Verdict {
    /// Known now; the rest of the FPDU is not waited for.
    Final(HandshakeError),
    /// Known once the FPDU has passed its CRC check.
    Pending(Result<ReceivedRtr, HandshakeError>),
}

/// Judges the header of the first FPDU after the reply against the RTR
/// kinds the responder offered.
fn judge_rtr(header: &[u8], ulpdu_len: usize, accepted: RtrKinds) -> Verdict {
    if ulpdu_len > header.len() {
        // Payload follows: not an RTR, unless it is a long TERMINATE.
        let control = DdpHeader::decode(header).ok().and_then(|(ddp, _)| {
            let opcode = rdmap::RdmapControl::from_byte(ddp.rdmap_control()).opcode;
            let word = wire::read_be32(header, TERMINATE_CONTROL_OFFSET)?;
            (opcode == Opcode::Terminate as u8).then(|| TerminateControl::from_word(word))
        });
        return match control {
            Some(control) => Verdict::Pending(Err(HandshakeError::PeerTerminated(control.error()))),
            None => Verdict::Final(HandshakeError::WrongRtr(RtrError::NotZeroLength)),
        };
    }
    let segment = match Segment::decode(header) {
        Ok(segment) => segment,
        Err(e) => return Verdict::Pending(Err(HandshakeError::Segment(e))),
    };
    Verdict::Pending(classify_rtr(&segment, accepted))
}

fn classify_rtr(segment: &Segment<'_>, accepted: RtrKinds) -> Result<ReceivedRtr, HandshakeError> {
    let wrong = |e| Err(HandshakeError::WrongRtr(e));
    let first_untagged = match segment.ddp {
        DdpHeader::Untagged(h) => h.msn == FIRST_MSN && h.message_offset == 0,
        DdpHeader::Tagged(_) => true,
    };
    let rtr = match (segment.opcode, segment.header) {
        (Opcode::RdmaWrite, _) => ReceivedRtr::Write,
        (Opcode::Send, _) => ReceivedRtr::Send,
        (Opcode::ReadRequest, OpcodeHeader::ReadRequest(h)) => {
            if h.read_size != 0 {
                return wrong(RtrError::NotZeroLength);
            }
            ReceivedRtr::Read(h)
        }
        (Opcode::Terminate, OpcodeHeader::Terminate(m)) => {
            return Err(HandshakeError::PeerTerminated(m.control.error()))
        }
        (opcode, _) => return wrong(RtrError::UnexpectedMessage(opcode)),
    };
    if !segment.payload.is_empty() {
        return wrong(RtrError::NotZeroLength);
    }
    if !segment.ddp.control().last || !first_untagged {
        return wrong(RtrError::NotFirstMessage);
    }
    if !accepted.contains(rtr.kind()) {
        return wrong(RtrError::NotNegotiated(rtr.kind()));
    }
    Ok(rtr)
}

/// The passive side of one MPA connection setup.
///
/// `C` is the CRC32c engine, needed to check the RTR FPDU and to frame the
/// Read Response to a Read RTR.
#[derive(Debug, Clone)]
pub struct ResponderHandshake<C: Crc32c + Copy> {
    config: ResponderConfig,
    engine: C,
    reader: MpaFrameReader,
    state: ResponderState,
    rx: FpduReceiver<C>,
    pending: Option<Result<ReceivedRtr, HandshakeError>>,
}

impl<C: Crc32c + Copy> ResponderHandshake<C> {
    /// A handshake waiting for an MPA Request, to be answered on `config`'s
    /// terms.
    pub fn new(config: ResponderConfig, engine: C) -> Self {
        Self {
            config,
            engine,
            reader: MpaFrameReader::new(FrameKind::Request),
            state: ResponderState::AwaitingRequest,
            rx: FpduReceiver::new(engine, false),
            pending: None,
        }
    }

    /// Takes received bytes up to the end of the MPA Request, or, in the
    /// peer-to-peer model, of the RTR FPDU, and returns how many it took
    /// with what they completed. Nothing is taken while the ULP decides or
    /// once the handshake is over.
    pub fn on_bytes(&mut self, bytes: &[u8]) -> (usize, Option<ResponderEvent>) {
        match self.state {
            ResponderState::AwaitingRequest => self.request_bytes(bytes),
            ResponderState::AwaitingRtr(decision) => self.rtr_bytes(bytes, decision),
            _ => (0, None),
        }
    }

    fn fail(&mut self, error: HandshakeError) -> ResponderEvent {
        self.state = ResponderState::Failed(error);
        ResponderEvent::Failed(error)
    }

    fn request_bytes(&mut self, bytes: &[u8]) -> (usize, Option<ResponderEvent>) {
        let consumed = match self.reader.push(bytes) {
            Ok((n, false)) => return (n, None),
            Ok((n, true)) => n,
            Err(e) => return (0, Some(self.fail(HandshakeError::Frame(e)))),
        };
        let Some(request) = self.reader.frame() else {
            return (consumed, None);
        };
        let summary = ConnectRequest {
            revision: request.header.revision,
            crc: request.header.flags.crc,
            peer: request.enhanced,
        };
        // Refuse early what no ULP answer can fix (markers, CRC policy,
        // revision, no RTR kind at all), as the C siw does.
        let event = match self.config.process_request(&request) {
            Ok(_) => {
                self.state = ResponderState::RequestReceived;
                ResponderEvent::ConnectRequest(summary)
            }
            Err(e) => {
                self.state = ResponderState::Refused(e);
                ResponderEvent::Failed(HandshakeError::Negotiation(e))
            }
        };
        (consumed, Some(event))
    }

    fn rtr_bytes(
        &mut self,
        bytes: &[u8],
        decision: ResponderDecision,
    ) -> (usize, Option<ResponderEvent>) {
        let mut consumed = 0;
        while let Some(input) = bytes.get(consumed..).filter(|rest| !rest.is_empty()) {
            let (n, event, verdict, complete) = match self.rx.step(input) {
                Err(e) => return (consumed, Some(self.fail(HandshakeError::Fpdu(e)))),
                Ok((n, Some(RxEvent::Header { header, ulpdu_len }))) => (
                    n,
                    true,
                    Some(judge_rtr(header, ulpdu_len, decision.rtr_accepted)),
                    false,
                ),
                Ok((n, Some(RxEvent::Complete { .. }))) => (n, true, None, true),
                Ok((n, event)) => (n, event.is_some(), None, false),
            };
            consumed += n;
            match verdict {
                Some(Verdict::Final(e)) => return (consumed, Some(self.fail(e))),
                Some(Verdict::Pending(result)) => self.pending = Some(result),
                None => {}
            }
            if complete {
                let event = match self.pending.take() {
                    Some(Ok(rtr)) => {
                        self.state = ResponderState::Established(decision, Some(rtr));
                        ResponderEvent::Established(rtr)
                    }
                    Some(Err(e)) => self.fail(e),
                    // A Header event always precedes Complete.
                    None => self.fail(HandshakeError::WrongRtr(RtrError::NotZeroLength)),
                };
                return (consumed, Some(event));
            }
            if n == 0 && !event {
                break;
            }
        }
        (consumed, None)
    }

    /// Accepts the connection with the ULP's `ird` and `ord` and encodes the
    /// MPA Reply carrying `private_data` into `out`.
    ///
    /// `ird` caps the responder IRD (an IRD of 0 rules out a Read RTR) and
    /// `ord` is the ORD the ULP would like; both are negotiated by
    /// [`ResponderConfig::process_request`].
    pub fn accept(
        &mut self,
        private_data: &[u8],
        ird: u16,
        ord: u16,
        out: &mut [u8],
    ) -> Result<Accepted, CallError> {
        if self.state != ResponderState::RequestReceived {
            return Err(CallError::WrongState);
        }
        let config = ResponderConfig {
            max_ird: ird.min(self.config.max_ird),
            ord,
            ..self.config
        };
        let request = self.reader.frame().ok_or(CallError::WrongState)?;
        let decision = match config.process_request(&request) {
            Ok(decision) => decision,
            Err(e) => {
                self.state = ResponderState::Refused(e);
                return Err(CallError::Refused(e));
            }
        };
        let len = decision.encode_reply(out, private_data)?;
        let established = decision.rtr_accepted.is_empty();
        self.state = if established {
            ResponderState::Established(decision, None)
        } else {
            self.rx = FpduReceiver::new(self.engine, decision.use_crc);
            ResponderState::AwaitingRtr(decision)
        };
        Ok(Accepted {
            len,
            decision,
            established,
        })
    }

    /// Rejects the connection and encodes the MPA Reject carrying
    /// `private_data` into `out`. After a refused request the reject says
    /// why: for insufficient IRD its ORD field names the ORD required, and
    /// the TERMINATE to follow is code 6 (RFC 6581 section 9.1).
    pub fn reject(&mut self, private_data: &[u8], out: &mut [u8]) -> Result<usize, CallError> {
        let reason = match self.state {
            ResponderState::Refused(e) => e,
            // Only an insufficient IRD changes the frame; any other reason
            // gives the plain reject a ULP asks for.
            ResponderState::RequestReceived => NegotiationError::NoMatchingRtr,
            _ => return Err(CallError::WrongState),
        };
        let request = self.reader.frame().ok_or(CallError::WrongState)?;
        let len = self
            .config
            .encode_reject(&request, reason, out, private_data)?;
        self.state = ResponderState::Rejected;
        Ok(len)
    }

    /// The MPA timer fired: fails the handshake unless it is over.
    pub fn on_timeout(&mut self) -> Option<ResponderEvent> {
        match self.state {
            ResponderState::AwaitingRequest
            | ResponderState::RequestReceived
            | ResponderState::Refused(_)
            | ResponderState::AwaitingRtr(_) => Some(self.fail(HandshakeError::Timeout)),
            _ => None,
        }
    }

    /// Encodes the zero-length RDMA Read Response that answers a Read RTR
    /// into `out` and returns its length (0 for the other RTR kinds and
    /// without RTR). Send it before any other FPDU.
    pub fn rtr_response(&self, out: &mut [u8]) -> Result<usize, CallError> {
        let ResponderState::Established(decision, rtr) = self.state else {
            return Err(CallError::WrongState);
        };
        let Some(ReceivedRtr::Read(request)) = rtr else {
            return Ok(0);
        };
        let ddp = rdmap::tagged_header(
            Opcode::ReadResponse,
            true,
            request.sink_stag,
            request.sink_tagged_offset,
        );
        encode_segment(
            out,
            &ddp,
            &OpcodeHeader::None,
            decision.use_crc,
            self.engine,
        )
    }

    /// The ULP private data of the request, once received.
    pub fn peer_private_data(&self) -> &[u8] {
        self.reader.ulp_private_data()
    }

    /// The negotiated terms, once the reply is written.
    pub fn decision(&self) -> Option<ResponderDecision> {
        match self.state {
            ResponderState::AwaitingRtr(decision) | ResponderState::Established(decision, _) => {
                Some(decision)
            }
            _ => None,
        }
    }

    /// Whether the connection is established: FPDUs may flow.
    pub fn is_established(&self) -> bool {
        matches!(self.state, ResponderState::Established(..))
    }
}

/// Encodes the TERMINATE that reports a failed setup (RFC 6581 section 8: layer 2, type 0,
/// code 5 to 7, with no header echoed) as one FPDU into `out`, with CRC if `crc` is given;
/// returns its length. It is the only FPDU sent on such a connection: the first message of
/// queue 2.
pub fn terminate_fpdu<C: Crc32c + Copy>(
    error: TermError,
    crc: Option<C>,
    out: &mut [u8],
) -> Result<usize, CallError> {
    let mut tx = super::tx_engine::TxEngine::new(crc, out.len());
    let message = super::terminate::TerminateMessage::reporting(error, None);
    let mut msg = tx
        .start(super::tx_engine::WorkRequest::Terminate(message))
        .map_err(|_| CallError::Encode(EncodeError::ValueOutOfRange))?;
    let fpdu = msg
        .next_fpdu(out)
        .ok()
        .flatten()
        .ok_or(CallError::Encode(EncodeError::ValueOutOfRange))?;
    let trailer = fpdu.trailer();
    let end = fpdu
        .header_len
        .checked_add(trailer.as_bytes().len())
        .filter(|&end| end == fpdu.wire_len())
        .ok_or(CallError::Encode(EncodeError::ValueOutOfRange))?;
    wire::write_bytes(out, fpdu.header_len, trailer.as_bytes()).map_err(CallError::Encode)?;
    Ok(end)
}
