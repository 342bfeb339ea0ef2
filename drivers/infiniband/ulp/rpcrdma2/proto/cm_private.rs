// SPDX-License-Identifier: GPL-2.0

//! RDMA-CM private data for RPC-over-RDMA Version 1 (RFC 8797).
//!
//! RFC 8797 lets each side advertise, in the connection request and reply,
//! its inline sizes and whether it can take Send With Invalidate. The
//! message is eight bytes: a magic word, a version byte, a flags byte and
//! the Send and Receive sizes, each encoded as `size / 1024 - 1` so one byte
//! covers 1 KiB .. 256 KiB. Anything that does not carry the magic and a
//! known version is someone else's private data (the CM may also pad it), so
//! the decoder answers `None` and the defaults apply.

/// The RFC 8797 magic word.
pub const CM_PRIVATE_MAGIC: u32 = 0xf6ab_0e18;
/// The only defined format version.
pub const CM_PRIVATE_VERSION: u8 = 1;
/// Flag: the sender can receive Send With Invalidate.
pub const CM_FLAG_REMOTE_INVALIDATION: u8 = 0x01;
/// Encoded length.
pub const CM_PRIVATE_LEN: usize = 8;
/// Smallest encodable buffer size.
pub const CM_MIN_SIZE: u32 = 1024;
/// Largest encodable buffer size.
pub const CM_MAX_SIZE: u32 = 256 * 1024;

/// Encodes a buffer size as `size / 1024 - 1`, clamped to 1 KiB .. 256 KiB
/// (a size that cannot be represented is rounded down, never up).
pub const fn encode_size(size: u32) -> u8 {
    let kib = size / 1024;
    if kib == 0 {
        0
    } else if kib > 256 {
        255
    } else {
        (kib - 1) as u8
    }
}

/// Decodes a buffer size: `(value + 1) * 1024`.
pub const fn decode_size(value: u8) -> u32 {
    (value as u32 + 1) * 1024
}

/// The RFC 8797 private message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmPrivateData {
    /// All flag bits as received (unknown bits are ignored).
    pub flags: u8,
    /// Largest Send the sender will post, in bytes.
    pub send_size: u32,
    /// Size of the sender's Receive buffers, in bytes.
    pub recv_size: u32,
}

impl CmPrivateData {
    /// A message advertising the given sizes and invalidation support.
    pub const fn new(send_size: u32, recv_size: u32, remote_invalidation: bool) -> Self {
        Self {
            flags: if remote_invalidation {
                CM_FLAG_REMOTE_INVALIDATION
            } else {
                0
            },
            send_size: decode_size(encode_size(send_size)),
            recv_size: decode_size(encode_size(recv_size)),
        }
    }

    /// Whether the sender accepts Send With Invalidate.
    pub const fn remote_invalidation(&self) -> bool {
        self.flags & CM_FLAG_REMOTE_INVALIDATION != 0
    }

    /// Parses private data; `None` if it is absent, short, or not ours.
    pub fn decode(data: &[u8]) -> Option<Self> {
        let (magic, rest) = data.split_first_chunk::<4>()?;
        let [version, flags, send, recv] = *rest.first_chunk::<4>()?;
        if u32::from_be_bytes(*magic) != CM_PRIVATE_MAGIC || version != CM_PRIVATE_VERSION {
            return None;
        }
        Some(Self {
            flags,
            send_size: decode_size(send),
            recv_size: decode_size(recv),
        })
    }

    /// Encodes the eight-byte message.
    pub fn encode(&self) -> [u8; CM_PRIVATE_LEN] {
        let [m0, m1, m2, m3] = CM_PRIVATE_MAGIC.to_be_bytes();
        [
            m0,
            m1,
            m2,
            m3,
            CM_PRIVATE_VERSION,
            self.flags,
            encode_size(self.send_size),
            encode_size(self.recv_size),
        ]
    }
}
