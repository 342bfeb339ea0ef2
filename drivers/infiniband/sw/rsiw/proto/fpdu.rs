// SPDX-License-Identifier: GPL-2.0

//! MPA framing of ULPDUs into FPDUs (RFC 5044 section 4), sending and
//! receiving.
//!
//! After connection setup every DDP segment travels in an FPDU:
//!
//! ```text
//! | ULPDU_Length (16) | ULPDU (DDP/RDMAP headers + payload) | pad 0..3 | CRC32c |
//! ```
//!
//! The pad brings the FPDU to a multiple of four bytes; the CRC32c covers
//! the length field, the ULPDU and the pad, and is sent as zeros when CRC was
//! not negotiated (it is then not checked). Markers are not supported, so
//! no marker is ever inserted or expected.
//!
//! TCP delivers the stream in arbitrary pieces, and the kernel's receive path
//! consumes whatever the socket holds in one go without copying payload
//! twice. [`FpduReceiver`] is therefore an incremental parser: it can be fed
//! chunks of any size, down to single bytes, buffers only the few bytes that
//! must be seen whole (length, DDP/RDMAP header, trailer) and hands payload
//! back as slices of the caller's chunk, ready to be placed.

use core::ops::ControlFlow;

use super::crc32c::{Crc32c, Crc32cDigest};
use super::ddp::DdpControl;
use super::rdmap::{Opcode, RdmapControl};
use super::term_error::TermError;
use super::wire::{self, EncodeError};

/// Length of the ULPDU_Length field.
pub const LENGTH_FIELD_LEN: usize = 2;

/// Length of the CRC field.
pub const CRC_LEN: usize = 4;

/// Most header bytes [`FpduReceiver`] collects before handing out payload.
/// Large enough for every fixed header (the 70-byte Atomic Request is the
/// largest) and for a TERMINATE with both headers echoed.
pub const MAX_HEADER_LEN: usize = 128;

/// Pad bytes that follow a ULPDU of `ulpdu_len` bytes.
pub const fn pad_len(ulpdu_len: usize) -> usize {
    (4 - (ulpdu_len % 4 + LENGTH_FIELD_LEN) % 4) % 4
}

/// Length of the trailer (pad and CRC) after a ULPDU of `ulpdu_len` bytes.
pub const fn trailer_len(ulpdu_len: usize) -> usize {
    pad_len(ulpdu_len) + CRC_LEN
}

/// Total FPDU length for a ULPDU of `ulpdu_len` bytes (saturating; only
/// lengths up to `u16::MAX` can be framed).
pub const fn fpdu_len(ulpdu_len: usize) -> usize {
    ulpdu_len.saturating_add(LENGTH_FIELD_LEN + trailer_len(ulpdu_len))
}

/// The pad and CRC that close an FPDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FpduTrailer {
    bytes: [u8; 3 + CRC_LEN],
    len: usize,
}

impl FpduTrailer {
    /// Computes the trailer of a ULPDU of `ulpdu_len` bytes. `digest` has been
    /// fed the length field and the whole ULPDU, or is `None` when CRC is off.
    pub fn new<C: Crc32c>(ulpdu_len: usize, digest: Option<Crc32cDigest<C>>) -> Self {
        let len = trailer_len(ulpdu_len);
        let mut bytes = [0u8; 3 + CRC_LEN];
        if let Some(out) = bytes.get_mut(..len) {
            write_trailer(out, ulpdu_len, digest);
        }
        Self { bytes, len }
    }

    /// The trailer bytes to send.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }
}

/// Writes the trailer of a ULPDU of `ulpdu_len` bytes ([`FpduTrailer::new`])
/// into `out`, which must be exactly as long; returns `false`, writing
/// nothing, if it is not. Two fixed-size moves, zeros over the pad and then
/// the CRC, cover the 4 to 7 bytes, where a copy of a variable length would
/// call `memcpy`.
pub fn write_trailer<C: Crc32c>(
    out: &mut [u8],
    ulpdu_len: usize,
    digest: Option<Crc32cDigest<C>>,
) -> bool {
    let pad = pad_len(ulpdu_len);
    if out.len() != trailer_len(ulpdu_len) {
        return false;
    }
    let crc = match digest {
        Some(mut digest) => {
            digest.update([0u8; 3].get(..pad).unwrap_or(&[]));
            digest.wire_bytes()
        }
        None => [0; CRC_LEN],
    };
    // Arrays, not slices: a slice's length LLVM may not see as constant.
    if let Some(dst) = out.first_chunk_mut::<CRC_LEN>() {
        *dst = [0; CRC_LEN];
    }
    if let Some(dst) = out
        .get_mut(pad..)
        .and_then(|d| d.first_chunk_mut::<CRC_LEN>())
    {
        *dst = crc;
    }
    true
}

/// The ULPDU_Length field for a ULPDU of `ulpdu_len` bytes.
pub fn length_field(ulpdu_len: usize) -> Result<[u8; LENGTH_FIELD_LEN], EncodeError> {
    u16::try_from(ulpdu_len)
        .map(u16::to_be_bytes)
        .map_err(|_| EncodeError::ValueOutOfRange)
}

/// Frames a contiguous `ulpdu` into `out` and returns the FPDU length.
pub fn encode_fpdu<C: Crc32c>(
    out: &mut [u8],
    ulpdu: &[u8],
    crc: Option<C>,
) -> Result<usize, EncodeError> {
    let len_field = length_field(ulpdu.len())?;
    let total = fpdu_len(ulpdu.len());
    wire::ensure_room(out, total)?;
    wire::write_bytes(out, 0, &len_field)?;
    wire::write_bytes(out, LENGTH_FIELD_LEN, ulpdu)?;
    let digest = crc.map(|engine| {
        let mut digest = Crc32cDigest::new(engine);
        digest.update(&len_field);
        digest.update(ulpdu);
        digest
    });
    let trailer = FpduTrailer::new(ulpdu.len(), digest);
    wire::write_bytes(out, LENGTH_FIELD_LEN + ulpdu.len(), trailer.as_bytes())?;
    Ok(total)
}

/// How many header bytes to collect for a ULPDU starting with `control`
/// (the DDP and RDMAP control bytes): the DDP header plus the opcode's own
/// header for messages with payload, the whole ULPDU (capped) for messages
/// without, so that [`super::rdmap::Segment::decode`] sees every byte it
/// must check. Unknown opcodes get the DDP header only; decoding them fails.
fn wanted_header_len(control: [u8; 2], ulpdu_len: usize) -> usize {
    let [ddp, rdmap] = control;
    let ddp = DdpControl::from_byte(ddp);
    let wanted = match Opcode::from_u8(RdmapControl::from_byte(rdmap).opcode) {
        Some(op) if op.is_tagged() == ddp.tagged && op.carries_payload() => op.header_len(),
        Some(op) if op.is_tagged() == ddp.tagged => MAX_HEADER_LEN,
        _ => ddp.header_len(),
    };
    wanted.min(ulpdu_len).min(MAX_HEADER_LEN)
}

/// Why the received stream can no longer be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FpduError {
    /// The received CRC does not match the computed one.
    CrcMismatch {
        /// CRC computed over the received FPDU.
        computed: u32,
        /// CRC found in the trailer.
        received: u32,
    },
}

impl FpduError {
    /// The TERMINATE error to report (MPA CRC error, RFC 5044 section 7.2).
    pub const fn term(self) -> TermError {
        match self {
            Self::CrcMismatch { .. } => TermError::MpaCrc,
        }
    }
}

/// What the receiver found in the bytes it was fed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxEvent<'h, 'i> {
    /// The DDP/RDMAP header of a new ULPDU is complete. It is shorter than
    /// expected only if the ULPDU itself is.
    Header {
        /// The header bytes (at most [`MAX_HEADER_LEN`]).
        header: &'h [u8],
        /// Length of the whole ULPDU.
        ulpdu_len: usize,
    },
    /// Payload bytes of the current ULPDU, in order, borrowed from the input.
    Payload {
        /// The bytes.
        data: &'i [u8],
        /// Offset of `data` from the end of the header.
        offset: usize,
    },
    /// The FPDU ended and its CRC (if enabled) matched.
    Complete {
        /// Length of the ULPDU just finished.
        ulpdu_len: usize,
    },
}

/// A whole FPDU at the start of the input, as [`FpduReceiver::take_whole`]
/// takes it: what the events of the [`FpduReceiver::step`] calls consuming it
/// would carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WholeFpdu<'i> {
    /// The DDP/RDMAP header ([`RxEvent::Header`]).
    pub header: &'i [u8],
    /// Length of the whole ULPDU.
    pub ulpdu_len: usize,
    /// The payload after the header, empty if there is none
    /// ([`RxEvent::Payload`] at offset 0).
    pub payload: &'i [u8],
    /// Bytes of the input the FPDU takes.
    pub len: usize,
    /// The CRC check at the FPDU's end: the error [`FpduReceiver::step`]
    /// would return there instead of [`RxEvent::Complete`]. The stream is
    /// then dead, as after that error.
    pub crc: Result<(), FpduError>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RxState {
    Length,
    Header,
    Payload,
    Trailer,
    Failed(FpduError),
}

/// Incremental FPDU parser for one receive stream.
#[derive(Debug, Clone)]
pub struct FpduReceiver<C: Crc32c + Copy> {
    engine: C,
    crc_enabled: bool,
    state: RxState,
    digest: Crc32cDigest<C>,
    length_bytes: [u8; LENGTH_FIELD_LEN],
    ulpdu_len: usize,
    header: [u8; MAX_HEADER_LEN],
    header_wanted: usize,
    /// Bytes of the current part (length, header, payload, trailer) seen.
    part_seen: usize,
    trailer: [u8; 3 + CRC_LEN],
}

impl<C: Crc32c + Copy> FpduReceiver<C> {
    /// A receiver at the start of an FPDU stream; `crc_enabled` is the
    /// negotiated CRC setting.
    pub fn new(engine: C, crc_enabled: bool) -> Self {
        Self {
            engine,
            crc_enabled,
            state: RxState::Length,
            digest: Crc32cDigest::new(engine),
            length_bytes: [0; LENGTH_FIELD_LEN],
            ulpdu_len: 0,
            header: [0; MAX_HEADER_LEN],
            header_wanted: 0,
            part_seen: 0,
            trailer: [0; 3 + CRC_LEN],
        }
    }

    /// Whether the receiver sits between two FPDUs.
    pub fn at_fpdu_boundary(&self) -> bool {
        self.state == RxState::Length && self.part_seen == 0
    }

    /// The payload bytes of the current FPDU still to come, if the
    /// receiver is inside its payload; 0 otherwise.
    pub fn payload_left(&self) -> usize {
        if self.state != RxState::Payload {
            return 0;
        }
        self.ulpdu_len
            .saturating_sub(self.header_wanted)
            .saturating_sub(self.part_seen)
    }

    /// The payload bytes of the current FPDU taken so far.
    pub fn payload_taken(&self) -> usize {
        if self.state == RxState::Payload {
            self.part_seen
        } else {
            0
        }
    }

    /// Takes `data`, the next payload bytes of the current FPDU (at most
    /// [`Self::payload_left`]), as [`Self::step`] would, without handing
    /// them back: the caller places them itself, for instance together with
    /// the following pieces of a socket buffer. Bytes beyond the payload are
    /// not taken. Returns the bytes taken.
    pub fn take_payload(&mut self, data: &[u8]) -> usize {
        if self.state != RxState::Payload {
            return 0;
        }
        let left = self.payload_left();
        let data = data.get(..left.min(data.len())).unwrap_or(&[]);
        self.hash(data);
        self.part_seen += data.len();
        if data.len() == left {
            self.part_seen = 0;
            self.state = RxState::Trailer;
        }
        data.len()
    }

    fn hash(&mut self, data: &[u8]) {
        if self.crc_enabled {
            self.digest.update(data);
        }
    }

    /// Copies as much of `input` as fits into `dst[seen..]`.
    fn fill(dst: &mut [u8], seen: &mut usize, input: &[u8]) -> usize {
        let space = dst.get_mut(*seen..).unwrap_or(&mut []);
        let n = space.len().min(input.len());
        if let (Some(d), Some(s)) = (space.get_mut(..n), input.get(..n)) {
            d.copy_from_slice(s);
        }
        *seen += n;
        n
    }

    /// Collects the length field from the start of `input`; once it is
    /// complete, starts the FPDU and moves on to its header. Returns the
    /// number of bytes consumed.
    fn take_length(&mut self, input: &[u8]) -> usize {
        let mut seen = self.part_seen;
        let mut bytes = self.length_bytes;
        let n = match wire::read_array(input, 0) {
            // The whole field at once, as nearly always: a fixed-size move.
            Some(field) if seen == 0 => {
                bytes = field;
                seen = LENGTH_FIELD_LEN;
                LENGTH_FIELD_LEN
            }
            _ => Self::fill(&mut bytes, &mut seen, input),
        };
        self.length_bytes = bytes;
        self.part_seen = seen;
        if seen < LENGTH_FIELD_LEN {
            return n;
        }
        self.digest = Crc32cDigest::new(self.engine);
        self.hash(&bytes);
        self.ulpdu_len = usize::from(u16::from_be_bytes(bytes));
        self.part_seen = 0;
        self.header_wanted = self.ulpdu_len.min(2);
        self.state = RxState::Header;
        n
    }

    /// Collects header bytes from the start of `input` into the header
    /// buffer; returns the number of bytes consumed.
    fn take_header(&mut self, input: &[u8]) -> usize {
        let mut seen = self.part_seen;
        let n = match self.header.get_mut(..self.header_wanted) {
            Some(dst) => Self::fill(dst, &mut seen, input),
            None => 0,
        };
        self.part_seen = seen;
        n
    }

    /// Takes the FPDU at the start of `input` in one go if the receiver is
    /// between FPDUs and `input` holds all of it, as nearly always; `None`,
    /// consuming nothing, otherwise. The result is that of the [`Self::step`]
    /// calls that would consume the FPDU, without a round trip per part;
    /// act on its parts in their order (header, payload, CRC check).
    pub fn take_whole<'i>(&mut self, input: &'i [u8]) -> Option<WholeFpdu<'i>> {
        if self.state != RxState::Length || self.part_seen != 0 {
            return None;
        }
        let length = wire::read_array(input, 0)?;
        let ulpdu_len = usize::from(u16::from_be_bytes(length));
        let len = fpdu_len(ulpdu_len);
        let fpdu = input.get(..len)?;
        let ulpdu_end = LENGTH_FIELD_LEN.saturating_add(ulpdu_len);
        let ulpdu = fpdu.get(LENGTH_FIELD_LEN..ulpdu_end)?;
        // As `step` finds it: the control bytes tell the header's length.
        let header_len = match wire::read_array(ulpdu, 0) {
            Some(control) if ulpdu_len > 2 => wanted_header_len(control, ulpdu_len),
            _ => ulpdu_len.min(2),
        };
        let header = ulpdu.get(..header_len)?;
        let payload = ulpdu.get(header_len..)?;
        let mut crc = Ok(());
        if self.crc_enabled {
            // Length field, ULPDU and pad lie back to back before the CRC.
            let pad = pad_len(ulpdu_len);
            let framed = fpdu.get(..len.saturating_sub(CRC_LEN))?;
            let received = wire::read_array(fpdu, ulpdu_end.saturating_add(pad))
                .map(u32::from_le_bytes)
                .unwrap_or(0);
            let mut digest = Crc32cDigest::new(self.engine);
            digest.update(framed);
            let computed = digest.finish();
            if computed != received {
                let e = FpduError::CrcMismatch { computed, received };
                self.state = RxState::Failed(e);
                crc = Err(e);
            }
        }
        Some(WholeFpdu {
            header,
            ulpdu_len,
            payload,
            len,
            crc,
        })
    }

    /// Parses from the start of `input` until the next event or the end of
    /// `input`. Returns the number of bytes consumed and the event, if any.
    /// Feed the unconsumed rest again; after an error the stream is dead and
    /// every call returns the same error.
    pub fn step<'s, 'i: 's>(
        &'s mut self,
        input: &'i [u8],
    ) -> Result<(usize, Option<RxEvent<'s, 'i>>), FpduError> {
        // The length field and the header yield no event of their own: go
        // on to the header in the same call, without a round trip through
        // the caller per part.
        let mut skip = 0;
        if self.state == RxState::Length {
            skip = self.take_length(input);
            if self.state == RxState::Length || skip >= input.len() {
                return Ok((skip, None));
            }
        }
        let input = input.get(skip..).unwrap_or(&[]);
        let (n, event) = self.step_part(input)?;
        Ok((n.saturating_add(skip), event))
    }

    /// [`Self::step`] in the part after the length field.
    fn step_part<'s, 'i: 's>(
        &'s mut self,
        input: &'i [u8],
    ) -> Result<(usize, Option<RxEvent<'s, 'i>>), FpduError> {
        match self.state {
            RxState::Failed(e) => Err(e),
            // Handled by `step`.
            RxState::Length => Ok((0, None)),
            RxState::Header => {
                if self.part_seen == 0 && self.header_wanted == 2 && self.ulpdu_len > 2 {
                    if let Some(control) = wire::read_array(input, 0) {
                        // The control bytes are at hand: the header's length
                        // is known at once.
                        self.header_wanted = wanted_header_len(control, self.ulpdu_len);
                    }
                }
                // Whole in the input, as nearly always: handed out from
                // there, not collected.
                let in_input = self.part_seen == 0 && input.len() >= self.header_wanted;
                let mut n = self.header_wanted;
                if !in_input {
                    n = self.take_header(input);
                    let wanted = self.header_wanted;
                    if self.part_seen < wanted {
                        return Ok((n, None));
                    }
                    if self.part_seen == 2 && wanted == 2 && self.ulpdu_len > 2 {
                        // The control bytes tell how long the header is.
                        let control = wire::read_array(&self.header, 0).unwrap_or([0; 2]);
                        self.header_wanted = wanted_header_len(control, self.ulpdu_len);
                        if self.header_wanted > self.part_seen {
                            let rest = input.get(n..).unwrap_or(&[]);
                            n = n.saturating_add(self.take_header(rest));
                            if self.part_seen < self.header_wanted {
                                return Ok((n, None));
                            }
                        }
                    }
                }
                let header_len = self.header_wanted;
                let header = if in_input {
                    input.get(..header_len)
                } else {
                    self.header.get(..header_len)
                };
                let header = header.unwrap_or(&[]);
                if self.crc_enabled {
                    self.digest.update(header);
                }
                self.part_seen = 0;
                self.state = if header_len < self.ulpdu_len {
                    RxState::Payload
                } else {
                    RxState::Trailer
                };
                let event = RxEvent::Header {
                    header,
                    ulpdu_len: self.ulpdu_len,
                };
                Ok((n, Some(event)))
            }
            RxState::Payload => {
                let n = self.payload_left().min(input.len());
                let data = input.get(..n).unwrap_or(&[]);
                let offset = self.part_seen;
                self.take_payload(data);
                if n == 0 {
                    return Ok((0, None));
                }
                Ok((n, Some(RxEvent::Payload { data, offset })))
            }
            RxState::Trailer => {
                let pad = pad_len(self.ulpdu_len);
                let wanted = pad + CRC_LEN;
                let (n, received) = match input.get(..wanted) {
                    // The whole trailer at once, as nearly always: read it
                    // where it is.
                    Some(trailer) if self.part_seen == 0 => {
                        self.hash(trailer.get(..pad).unwrap_or(&[]));
                        (wanted, wire::read_array(trailer, pad))
                    }
                    _ => {
                        let mut seen = self.part_seen;
                        let mut trailer = self.trailer;
                        let n = match trailer.get_mut(..wanted) {
                            Some(dst) => Self::fill(dst, &mut seen, input),
                            None => 0,
                        };
                        self.trailer = trailer;
                        self.part_seen = seen;
                        if seen < wanted {
                            return Ok((n, None));
                        }
                        self.hash(trailer.get(..pad).unwrap_or(&[]));
                        (n, wire::read_array(&trailer, pad))
                    }
                };
                let received = received.map(u32::from_le_bytes).unwrap_or(0);
                let computed = self.digest.finish();
                if self.crc_enabled && computed != received {
                    let e = FpduError::CrcMismatch { computed, received };
                    self.state = RxState::Failed(e);
                    return Err(e);
                }
                let ulpdu_len = self.ulpdu_len;
                self.part_seen = 0;
                self.state = RxState::Length;
                Ok((n, Some(RxEvent::Complete { ulpdu_len })))
            }
        }
    }

    /// Feeds a whole chunk, calling `on_event` for every event, until the
    /// chunk is consumed or `on_event` breaks. Returns the bytes consumed.
    pub fn feed<F>(&mut self, chunk: &[u8], mut on_event: F) -> Result<usize, FpduError>
    where
        F: FnMut(RxEvent<'_, '_>) -> ControlFlow<()>,
    {
        let mut consumed = 0;
        while let Some(rest) = chunk.get(consumed..) {
            if rest.is_empty() {
                break;
            }
            let (n, event) = self.step(rest)?;
            consumed += n;
            if let Some(event) = event {
                if on_event(event).is_break() {
                    break;
                }
            } else if n == 0 {
                break;
            }
        }
        Ok(consumed)
    }
}
