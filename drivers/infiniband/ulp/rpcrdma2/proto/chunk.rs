// SPDX-License-Identifier: GPL-2.0

//! RDMA segments, Read/Write chunks and the three chunk lists.
//!
//! Version 1 (RFC 8166 section 4.3) and version 2 (draft section 4.3 and the
//! `rpcrdma2_chunk_lists` XDR) share the same wire layout for segments and
//! lists: a Read list is an XDR linked list of read segments (position +
//! segment), the Write list a linked list of Write chunks (counted arrays of
//! segments), and the Reply chunk an optional Write chunk.
//!
//! Decoding validates the whole list once, against [`ChunkLimits`] and the
//! Read list position rules (see [`ReadList::decode`]), and then hands out
//! *views* ([`ReadList`], [`WriteList`], [`WriteChunk`]) that
//! borrow the received bytes and iterate over them. Nothing is allocated and
//! no attacker-supplied count sizes anything: a count is accepted only if the
//! bytes it describes are really present and it is within the limit.

use super::xdr::{split_at_checked, EncodeError, XdrError, XdrReader, XdrWriter};

/// Encoded size of a [`Segment`].
pub const SEGMENT_XDR_LEN: usize = 16;
/// Encoded size of a [`ReadSegment`].
pub const READ_SEGMENT_XDR_LEN: usize = 20;
/// Encoded size of one Read list entry (discriminant + read segment).
const READ_ENTRY_XDR_LEN: usize = 4 + READ_SEGMENT_XDR_LEN;

/// An RDMA segment: the coordinates of one registered memory region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Segment {
    /// Steering tag / R_key of the registration.
    pub handle: u32,
    /// Length of the region in bytes (0: an empty segment).
    pub length: u32,
    /// Offset or address of the region.
    pub offset: u64,
}

impl Segment {
    /// Decodes one segment.
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Self, XdrError> {
        Ok(Self {
            handle: r.u32()?,
            length: r.u32()?,
            offset: r.u64()?,
        })
    }

    /// Encodes one segment.
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), EncodeError> {
        w.put_u32(self.handle)?;
        w.put_u32(self.length)?;
        w.put_u64(self.offset)
    }
}

/// A read segment: a [`Segment`] plus the XDR position it belongs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadSegment {
    /// Byte offset in the unreduced Payload stream (multiple of four).
    pub position: u32,
    /// The memory region.
    pub target: Segment,
}

impl ReadSegment {
    /// Decodes one read segment.
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Self, XdrError> {
        Ok(Self {
            position: r.u32()?,
            target: Segment::decode(r)?,
        })
    }

    /// Encodes one read segment.
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), EncodeError> {
        w.put_u32(self.position)?;
        self.target.encode(w)
    }
}

/// Local limits a decoder enforces on chunk lists. Each maps onto the error
/// the draft reports when a peer exceeds it (section 7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkLimits {
    /// Most Read chunks per message (`RDMA2_ERR_READ_CHUNKS`).
    pub max_read_chunks: u32,
    /// Most Write chunks per message (`RDMA2_ERR_WRITE_CHUNKS`).
    pub max_write_chunks: u32,
    /// Most segments in any one chunk (`RDMA2_ERR_SEGMENTS`).
    pub max_segments: u32,
    /// Most segments in the three lists together: the `RCSIZ` an endpoint
    /// advertises (`RDMA2_ERR_SEGMENTS`).
    pub max_header_segments: u32,
}

impl ChunkLimits {
    /// Generous defaults: 16 segments per chunk (the draft's default
    /// `RCSIZ`), 8 Read chunks, 8 Write chunks, no limit on the header's
    /// total.
    pub const DEFAULT: Self = Self {
        max_read_chunks: 8,
        max_write_chunks: 8,
        max_segments: 16,
        max_header_segments: u32::MAX,
    };

    /// The defaults, with at most `rcsiz` segments in a header (the `RCSIZ`
    /// advertised).
    pub const fn with_header_segments(rcsiz: u32) -> Self {
        Self {
            max_header_segments: rcsiz,
            ..Self::DEFAULT
        }
    }

    /// The most segments a message may carry, as `RDMA2_ERR_SEGMENTS`
    /// reports it.
    pub const fn segment_limit(&self) -> u32 {
        if self.max_segments < self.max_header_segments {
            self.max_segments
        } else {
            self.max_header_segments
        }
    }
}

impl Default for ChunkLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Why a chunk list was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkError {
    /// Malformed or truncated XDR.
    Xdr(XdrError),
    /// A read segment's position is not a multiple of four.
    MisalignedPosition(u32),
    /// A read segment's position is below the one before it: the Read list
    /// is not in XDR position order, or a chunk's segments are not
    /// contiguous in the list.
    PositionOutOfOrder {
        /// Position of the offending segment.
        position: u32,
        /// Position of the chunk before it.
        previous: u32,
    },
    /// A Read chunk starts inside the data item of the chunk before it.
    OverlappingChunks {
        /// Position of the offending chunk.
        position: u32,
        /// First position past the previous chunk's (rounded-up) data.
        previous_end: u64,
    },
    /// More Read chunks than [`ChunkLimits::max_read_chunks`].
    TooManyReadChunks,
    /// More Write chunks than [`ChunkLimits::max_write_chunks`].
    TooManyWriteChunks,
    /// A chunk with more segments than [`ChunkLimits::max_segments`].
    TooManySegments,
    /// A chunk whose segments add up to more than an XDR data item can hold (`u32::MAX`
    /// bytes): its length overflows.
    LengthOverflow,
}

impl From<XdrError> for ChunkError {
    fn from(e: XdrError) -> Self {
        Self::Xdr(e)
    }
}

/// A validated Read list, borrowed from the received header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadList<'a> {
    /// The encoded entries, without the terminating discriminant.
    entries: &'a [u8],
    segments: u32,
    chunks: u32,
}

impl<'a> ReadList<'a> {
    /// Decodes and validates a Read list.
    ///
    /// Besides the limits, the positions must follow the XDR stream. Draft
    /// section 4.3.5 (carrying over RFC 8166's Read chunk rules for
    /// version 1) makes the Position the offset in the
    /// unreduced Payload stream where the chunk's data item is reinserted,
    /// gives all segments of one Read chunk the same Position, and has the
    /// Responder concatenate the segments "whose Position field value
    /// matches this offset until there are no more RDMA segments at that
    /// Position value"; section 4.3.5.1 pulls each chunk when the XDR
    /// offset of the Payload stream reaches it. A list a Responder can
    /// process that way therefore has:
    ///
    /// - positions that are multiples of four and never decrease, so the
    ///   segments of one chunk are contiguous and chunks come in XDR
    ///   position order ([`ChunkError::PositionOutOfOrder`] otherwise);
    /// - no chunk starting inside the previous chunk's data item, i.e.
    ///   before its position plus its XDR-rounded-up length
    ///   ([`ChunkError::OverlappingChunks`] otherwise). A Position Zero
    ///   Read chunk (the whole Payload stream, Special Format / `RDMA_NOMSG`
    ///   Long Call) is exempt: the other chunks lie inside it by design.
    ///
    /// Both violations map to `ERR_CHUNK` (v1) and `RDMA2_ERR_BAD_XDR` (v2).
    pub fn decode(r: &mut XdrReader<'a>, limits: &ChunkLimits) -> Result<Self, ChunkError> {
        let start = r.rest();
        let mut segments: u32 = 0;
        let mut chunks: u32 = 0;
        let mut in_chunk: u32 = 0;
        // Position and accumulated length of the current chunk.
        let mut current: Option<(u32, u64)> = None;
        while r.bool()? {
            let seg = ReadSegment::decode(r)?;
            let position = seg.position;
            if position % 4 != 0 {
                return Err(ChunkError::MisalignedPosition(position));
            }
            let length = u64::from(seg.target.length);
            match current {
                Some((prev, len)) if prev == position => {
                    in_chunk = in_chunk.saturating_add(1);
                    current = Some((prev, len.saturating_add(length)));
                }
                Some((prev, _)) if position < prev => {
                    return Err(ChunkError::PositionOutOfOrder {
                        position,
                        previous: prev,
                    });
                }
                _ => {
                    if let Some((prev, len)) = current.filter(|(p, _)| *p != 0) {
                        // The data item rounded up to its XDR size.
                        let end = u64::from(prev).saturating_add(len).saturating_add(3) & !3u64;
                        if u64::from(position) < end {
                            return Err(ChunkError::OverlappingChunks {
                                position,
                                previous_end: end,
                            });
                        }
                    }
                    chunks = chunks.saturating_add(1);
                    in_chunk = 1;
                    if chunks > limits.max_read_chunks {
                        return Err(ChunkError::TooManyReadChunks);
                    }
                    current = Some((position, length));
                }
            }
            if in_chunk > limits.max_segments {
                return Err(ChunkError::TooManySegments);
            }
            if current.is_some_and(|(_, len)| len > u64::from(u32::MAX)) {
                return Err(ChunkError::LengthOverflow);
            }
            segments = segments.saturating_add(1);
        }
        let used = start.len().saturating_sub(r.remaining()).saturating_sub(4);
        let entries = start
            .get(..used)
            .ok_or(ChunkError::Xdr(XdrError::Truncated))?;
        Ok(Self {
            entries,
            segments,
            chunks,
        })
    }

    /// Whether the list has no segments.
    pub const fn is_empty(&self) -> bool {
        self.segments == 0
    }

    /// Number of read segments.
    pub const fn segment_count(&self) -> u32 {
        self.segments
    }

    /// Number of Read chunks (runs of segments sharing a position).
    pub const fn chunk_count(&self) -> u32 {
        self.chunks
    }

    /// Iterates over the read segments in wire order.
    pub fn segments(&self) -> ReadSegments<'a> {
        ReadSegments { rest: self.entries }
    }

    /// Iterates over the Read chunks in wire order.
    pub fn chunks(&self) -> ReadChunks<'a> {
        ReadChunks { rest: self.entries }
    }

    /// Whether the list holds a Position Zero Read chunk (Special Format).
    pub fn has_position_zero(&self) -> bool {
        self.segments().any(|s| s.position == 0)
    }
}

/// Iterator over the segments of a [`ReadList`] or [`ReadChunk`].
#[derive(Debug, Clone)]
pub struct ReadSegments<'a> {
    rest: &'a [u8],
}

impl Iterator for ReadSegments<'_> {
    type Item = ReadSegment;

    fn next(&mut self) -> Option<ReadSegment> {
        let (entry, tail) = split_at_checked(self.rest, READ_ENTRY_XDR_LEN)?;
        self.rest = tail;
        let mut r = XdrReader::new(entry.get(4..)?);
        ReadSegment::decode(&mut r).ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.rest.len() / READ_ENTRY_XDR_LEN;
        (n, Some(n))
    }
}

/// One Read chunk: the consecutive read segments sharing a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadChunk<'a> {
    /// The shared position.
    pub position: u32,
    entries: &'a [u8],
}

impl<'a> ReadChunk<'a> {
    /// Iterates over this chunk's segments.
    pub fn segments(&self) -> ReadSegments<'a> {
        ReadSegments { rest: self.entries }
    }

    /// Number of segments.
    pub const fn segment_count(&self) -> usize {
        self.entries.len() / READ_ENTRY_XDR_LEN
    }

    /// Total length of the chunk in bytes.
    pub fn length(&self) -> u64 {
        self.segments().map(|s| u64::from(s.target.length)).sum()
    }
}

/// Iterator over the chunks of a [`ReadList`].
#[derive(Debug, Clone)]
pub struct ReadChunks<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for ReadChunks<'a> {
    type Item = ReadChunk<'a>;

    fn next(&mut self) -> Option<ReadChunk<'a>> {
        let first = ReadSegments { rest: self.rest }.next()?;
        let run = ReadSegments { rest: self.rest }
            .take_while(|s| s.position == first.position)
            .count();
        let len = run.checked_mul(READ_ENTRY_XDR_LEN)?;
        let (entries, tail) = split_at_checked(self.rest, len)?;
        self.rest = tail;
        Some(ReadChunk {
            position: first.position,
            entries,
        })
    }
}

/// A validated Write chunk (also the shape of a Reply chunk).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteChunk<'a> {
    /// The encoded segments (count already consumed).
    segments: &'a [u8],
}

impl<'a> WriteChunk<'a> {
    /// Decodes the counted segment array of one Write chunk.
    pub fn decode(r: &mut XdrReader<'a>, limits: &ChunkLimits) -> Result<Self, ChunkError> {
        let count = r.u32()?;
        if count > limits.max_segments {
            return Err(ChunkError::TooManySegments);
        }
        let len = usize::try_from(count)
            .ok()
            .and_then(|c| c.checked_mul(SEGMENT_XDR_LEN))
            .ok_or(ChunkError::TooManySegments)?;
        let chunk = Self {
            segments: r.take(len)?,
        };
        if chunk.length() > u64::from(u32::MAX) {
            return Err(ChunkError::LengthOverflow);
        }
        Ok(chunk)
    }

    /// Number of segments (0: an empty Write chunk).
    pub const fn segment_count(&self) -> usize {
        self.segments.len() / SEGMENT_XDR_LEN
    }

    /// Iterates over the segments in array order.
    pub fn segments(&self) -> Segments<'a> {
        Segments {
            rest: self.segments,
        }
    }

    /// Total capacity of the chunk in bytes.
    pub fn length(&self) -> u64 {
        self.segments().map(|s| u64::from(s.length)).sum()
    }

    /// An unused chunk: non-zero segment count, every segment empty.
    pub fn is_unused(&self) -> bool {
        self.segment_count() != 0 && self.segments().all(|s| s.length == 0)
    }
}

/// Iterator over the segments of a [`WriteChunk`].
#[derive(Debug, Clone)]
pub struct Segments<'a> {
    rest: &'a [u8],
}

impl Iterator for Segments<'_> {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        let (seg, tail) = split_at_checked(self.rest, SEGMENT_XDR_LEN)?;
        self.rest = tail;
        Segment::decode(&mut XdrReader::new(seg)).ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.rest.len() / SEGMENT_XDR_LEN;
        (n, Some(n))
    }
}

/// A validated Write list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteList<'a> {
    entries: &'a [u8],
    chunks: u32,
}

impl<'a> WriteList<'a> {
    /// Decodes and validates a Write list.
    pub fn decode(r: &mut XdrReader<'a>, limits: &ChunkLimits) -> Result<Self, ChunkError> {
        let start = r.rest();
        let mut chunks: u32 = 0;
        while r.bool()? {
            chunks = chunks.saturating_add(1);
            if chunks > limits.max_write_chunks {
                return Err(ChunkError::TooManyWriteChunks);
            }
            WriteChunk::decode(r, limits)?;
        }
        let used = start.len().saturating_sub(r.remaining()).saturating_sub(4);
        let entries = start
            .get(..used)
            .ok_or(ChunkError::Xdr(XdrError::Truncated))?;
        Ok(Self { entries, chunks })
    }

    /// Whether the list has no Write chunks.
    pub const fn is_empty(&self) -> bool {
        self.chunks == 0
    }

    /// Number of Write chunks.
    pub const fn chunk_count(&self) -> u32 {
        self.chunks
    }

    /// Iterates over the Write chunks in list order.
    pub fn chunks(&self) -> WriteChunks<'a> {
        WriteChunks {
            r: XdrReader::new(self.entries),
        }
    }
}

/// Iterator over the chunks of a [`WriteList`].
#[derive(Debug, Clone)]
pub struct WriteChunks<'a> {
    r: XdrReader<'a>,
}

impl<'a> Iterator for WriteChunks<'a> {
    type Item = WriteChunk<'a>;

    fn next(&mut self) -> Option<WriteChunk<'a>> {
        if !self.r.bool().ok()? {
            return None;
        }
        let limits = ChunkLimits {
            max_segments: u32::MAX,
            ..ChunkLimits::DEFAULT
        };
        WriteChunk::decode(&mut self.r, &limits).ok()
    }
}

/// The three chunk lists common to v1 `RDMA_MSG`/`RDMA_NOMSG` and (after
/// `rdma_inv_handle`) v2 `RDMA2_MSG`/`RDMA2_NOMSG`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkLists<'a> {
    /// The Read list.
    pub reads: ReadList<'a>,
    /// The Write list.
    pub writes: WriteList<'a>,
    /// The Reply chunk, if provided.
    pub reply: Option<WriteChunk<'a>>,
}

impl<'a> ChunkLists<'a> {
    /// Decodes and validates the three lists.
    pub fn decode(r: &mut XdrReader<'a>, limits: &ChunkLimits) -> Result<Self, ChunkError> {
        let reads = ReadList::decode(r, limits)?;
        let writes = WriteList::decode(r, limits)?;
        let reply = if r.bool()? {
            Some(WriteChunk::decode(r, limits)?)
        } else {
            None
        };
        let lists = Self {
            reads,
            writes,
            reply,
        };
        if lists.segment_count() > u64::from(limits.max_header_segments) {
            return Err(ChunkError::TooManySegments);
        }
        Ok(lists)
    }

    /// Segments in the three lists together.
    pub fn segment_count(&self) -> u64 {
        let reads = self.reads.segments().count() as u64;
        let writes: u64 = self
            .writes
            .chunks()
            .map(|c| c.segments().count() as u64)
            .sum();
        let reply = self.reply.map_or(0, |c| c.segments().count() as u64);
        reads + writes + reply
    }

    /// Whether all three lists are empty (absent Reply chunk).
    pub fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.writes.is_empty() && self.reply.is_none()
    }

    /// The handle every segment of the three lists carries, if there is at least one segment
    /// and they all carry the same: the only memory region the requester registered for the
    /// call, which a responder the requester allows to (RFC 8797, the Remote Invalidation
    /// flag) may invalidate with the reply's Send, a Send With Invalidate. `None` when the
    /// call offered no region, or more than one: the requester invalidates those itself.
    pub fn sole_handle(&self) -> Option<u32> {
        let mut handles = self
            .reads
            .segments()
            .map(|s| s.target.handle)
            .chain(
                self.writes
                    .chunks()
                    .flat_map(|c| c.segments().map(|s| s.handle)),
            )
            .chain(
                self.reply
                    .into_iter()
                    .flat_map(|c| c.segments().map(|s| s.handle)),
            );
        let first = handles.next()?;
        handles.all(|h| h == first).then_some(first)
    }

    /// Checks that each Read chunk of a data item is placed within the message it is inserted
    /// into: its position at most the `inline_len` bytes sent inline plus the (XDR-rounded)
    /// chunks placed before it. Returns the first position outside.
    pub fn check_read_positions(&self, inline_len: usize) -> Result<(), u32> {
        let mut end = inline_len as u64;
        for chunk in self.reads.chunks().filter(|c| c.position != 0) {
            if u64::from(chunk.position) > end {
                return Err(chunk.position);
            }
            end = end.saturating_add(chunk.length().saturating_add(3) & !3);
        }
        Ok(())
    }

    /// Whether `handle` appears in any segment of any list.
    pub fn contains_handle(&self, handle: u32) -> bool {
        self.reads.segments().any(|s| s.target.handle == handle)
            || self
                .writes
                .chunks()
                .any(|c| c.segments().any(|s| s.handle == handle))
            || self
                .reply
                .is_some_and(|c| c.segments().any(|s| s.handle == handle))
    }
}

/// Chunk lists to encode, as plain slices owned by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkListsRef<'s> {
    /// Read segments in wire order (chunks are runs of equal position).
    pub reads: &'s [ReadSegment],
    /// Write chunks, each an array of segments.
    pub writes: &'s [&'s [Segment]],
    /// The Reply chunk, if provided.
    pub reply: Option<&'s [Segment]>,
}

impl ChunkListsRef<'_> {
    /// No chunks at all.
    pub const EMPTY: ChunkListsRef<'static> = ChunkListsRef {
        reads: &[],
        writes: &[],
        reply: None,
    };

    /// Whether all lists are empty.
    pub fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.writes.is_empty() && self.reply.is_none()
    }

    /// Encodes the three lists.
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), EncodeError> {
        for seg in self.reads {
            w.put_bool(true)?;
            seg.encode(w)?;
        }
        w.put_bool(false)?;
        for chunk in self.writes {
            w.put_bool(true)?;
            encode_segment_array(w, chunk)?;
        }
        w.put_bool(false)?;
        match self.reply {
            Some(chunk) => {
                w.put_bool(true)?;
                encode_segment_array(w, chunk)
            }
            None => w.put_bool(false),
        }
    }

    /// Encoded size in bytes, `None` on overflow.
    pub fn encoded_len(&self) -> Option<usize> {
        let reads = self.reads.len().checked_mul(READ_ENTRY_XDR_LEN)?;
        let mut total = reads.checked_add(12)?;
        for chunk in self.writes {
            total = total.checked_add(8)?;
            total = total.checked_add(chunk.len().checked_mul(SEGMENT_XDR_LEN)?)?;
        }
        if let Some(chunk) = self.reply {
            total = total.checked_add(4)?;
            total = total.checked_add(chunk.len().checked_mul(SEGMENT_XDR_LEN)?)?;
        }
        Some(total)
    }
}

/// Encodes a counted array of segments (a Write or Reply chunk body).
pub fn encode_segment_array(w: &mut XdrWriter<'_>, segs: &[Segment]) -> Result<(), EncodeError> {
    w.put_u32(u32::try_from(segs.len()).map_err(|_| EncodeError::TooLong)?)?;
    for seg in segs {
        seg.encode(w)?;
    }
    Ok(())
}
