// SPDX-License-Identifier: GPL-2.0

//! Per-device protocol settings, files in the device's sysfs directory
//! (`/sys/class/infiniband/rsiw0/`): they apply to connections set up after the change.
//!
//! - `mpa_crc`: `required` (ask for CRC, refuse a peer that will not use it), `optional` (use
//!   CRC when the peer asks; RFC 5044's default; the default here) or `disabled` (never; a
//!   peer that insists is refused — the C siw's "strict" mode).
//! - `mpa_revision`: the MPA revision rsiw initiates with: `2` (RFC 6581 enhanced, with
//!   IRD/ORD negotiation; the default) or `1`.
//! - `max_ird`, `max_ord`: caps on the inbound and outbound RDMA Read/Atomic queue depths a
//!   connection negotiates, 1 to 128 (the default, the C siw's limit).
//! - `peer_to_peer`: `1` to initiate connections in the peer-to-peer model (RFC 6581: the
//!   initiator sends a ready-to-receive message, so either side may send first); `0`, the
//!   default, for the client-server model. As a responder rsiw accepts both.
//! - `rtr_kinds`: the RTR messages rsiw offers as an initiator and accepts as a responder, a
//!   comma-separated subset of `send`, `write` and `read` (zero-length Send, RDMA Write, RDMA
//!   Read); all three by default.
//! - `large_fpdus`: `1`, the default, to offer FPDUs larger than one TCP segment (one GSO
//!   packet, up to MPA's 64 KiB) in the MPA exchange, and to send them when the peer offers
//!   too; `0` to keep every FPDU within one segment. Only software peers offer it (the C siw
//!   in its `try_gso` build); RFC 5044 peers ignore the offer and get one segment per FPDU.
//! - `mpa_timeout_ms`: how long a connection's whole MPA exchange may take, and in the
//!   peer-to-peer model the wait for the RTR after the ULP accepted, 100 to 600000 ms, 10000
//!   by default: a peer that trickles its request, reply or RTR a byte at a time is closed
//!   then.

use core::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU8, Ordering};
use kernel::{c_str, prelude::*, rdma::provider::device_settings::SettingOutput, str::CStr};

use crate::proto::{
    mpa::{RtrKind, RtrKinds},
    mpa_negotiation::CrcPolicy,
    ord_ird::MAX_DEPTH,
};

/// The names, in the order of [`Settings::show`] and [`Settings::store`]'s index.
pub(crate) const NAMES: &[&CStr] = &[
    c_str!("mpa_crc"),
    c_str!("mpa_revision"),
    c_str!("max_ird"),
    c_str!("max_ord"),
    c_str!("peer_to_peer"),
    c_str!("rtr_kinds"),
    c_str!("large_fpdus"),
    c_str!("mpa_timeout_ms"),
];

/// The settings of one device.
pub(crate) struct Settings {
    crc: AtomicU8,
    revision: AtomicU8,
    max_ird: AtomicU16,
    max_ord: AtomicU16,
    peer_to_peer: AtomicBool,
    /// Bit 0 Send, bit 1 Write, bit 2 Read.
    rtr: AtomicU8,
    large_fpdus: AtomicBool,
    mpa_timeout_ms: AtomicU32,
}

/// The bounds of `mpa_timeout_ms`.
const MPA_TIMEOUT_MS: core::ops::RangeInclusive<u32> = 100..=600_000;

/// The RTR kinds by name, in the order of their bits in `Settings::rtr`.
const RTR_NAMES: [(&str, RtrKind); 3] = [
    ("send", RtrKind::Send),
    ("write", RtrKind::Write),
    ("read", RtrKind::Read),
];

fn crc_name(p: CrcPolicy) -> &'static str {
    match p {
        CrcPolicy::Required => "required",
        CrcPolicy::Optional => "optional",
        CrcPolicy::Disabled => "disabled",
    }
}

const CRC_POLICIES: [CrcPolicy; 3] = [
    CrcPolicy::Required,
    CrcPolicy::Optional,
    CrcPolicy::Disabled,
];

impl Settings {
    pub(crate) const fn new() -> Self {
        Self {
            crc: AtomicU8::new(1),
            revision: AtomicU8::new(2),
            max_ird: AtomicU16::new(MAX_DEPTH),
            max_ord: AtomicU16::new(MAX_DEPTH),
            peer_to_peer: AtomicBool::new(false),
            rtr: AtomicU8::new(0b111),
            large_fpdus: AtomicBool::new(true),
            mpa_timeout_ms: AtomicU32::new(10_000),
        }
    }

    /// How long an MPA exchange may take, in milliseconds.
    pub(crate) fn mpa_timeout_ms(&self) -> u32 {
        self.mpa_timeout_ms.load(Ordering::Relaxed)
    }

    /// Whether to initiate in the peer-to-peer model.
    pub(crate) fn peer_to_peer(&self) -> bool {
        self.peer_to_peer.load(Ordering::Relaxed)
    }

    /// Whether to offer and use FPDUs larger than one TCP segment.
    pub(crate) fn large_fpdus(&self) -> bool {
        self.large_fpdus.load(Ordering::Relaxed)
    }

    /// The RTR kinds offered and accepted.
    pub(crate) fn rtr_kinds(&self) -> RtrKinds {
        let bits = self.rtr.load(Ordering::Relaxed);
        RtrKinds {
            send: bits & 1 != 0,
            write: bits & 2 != 0,
            read: bits & 4 != 0,
        }
    }

    /// The CRC policy.
    pub(crate) fn crc(&self) -> CrcPolicy {
        let i = self.crc.load(Ordering::Relaxed) as usize;
        CRC_POLICIES.get(i).copied().unwrap_or(CrcPolicy::Optional)
    }

    /// Whether to initiate with MPA revision 2 (enhanced) rather than 1.
    pub(crate) fn enhanced(&self) -> bool {
        self.revision.load(Ordering::Relaxed) == 2
    }

    /// The cap on a connection's IRD.
    pub(crate) fn max_ird(&self) -> u16 {
        self.max_ird.load(Ordering::Relaxed)
    }

    /// The cap on a connection's ORD.
    pub(crate) fn max_ord(&self) -> u16 {
        self.max_ord.load(Ordering::Relaxed)
    }

    pub(crate) fn show(&self, index: usize, out: &mut SettingOutput<'_>) -> Result {
        use core::fmt::Write;
        let r = match index {
            0 => write!(out, "{}", crc_name(self.crc())),
            1 => write!(out, "{}", self.revision.load(Ordering::Relaxed)),
            2 => write!(out, "{}", self.max_ird()),
            3 => write!(out, "{}", self.max_ord()),
            4 => write!(out, "{}", u8::from(self.peer_to_peer())),
            5 => {
                let kinds = self.rtr_kinds();
                let mut sep = "";
                for (name, kind) in RTR_NAMES {
                    if kinds.contains(kind) {
                        write!(out, "{sep}{name}").map_err(|_| EINVAL)?;
                        sep = ",";
                    }
                }
                Ok(())
            }
            6 => write!(out, "{}", u8::from(self.large_fpdus())),
            7 => write!(out, "{}", self.mpa_timeout_ms()),
            _ => return Err(EINVAL),
        };
        r.map_err(|_| EINVAL)
    }

    pub(crate) fn store(&self, index: usize, value: &str) -> Result {
        let depth = |v: &str| -> Result<u16> {
            let d: u16 = v.parse().map_err(|_| EINVAL)?;
            if d == 0 || d > MAX_DEPTH {
                return Err(EINVAL);
            }
            Ok(d)
        };
        match index {
            0 => {
                let i = CRC_POLICIES
                    .iter()
                    .position(|p| crc_name(*p) == value)
                    .ok_or(EINVAL)?;
                self.crc.store(i as u8, Ordering::Relaxed);
            }
            1 => match value {
                "1" | "2" => self
                    .revision
                    .store(value.as_bytes()[0] - b'0', Ordering::Relaxed),
                _ => return Err(EINVAL),
            },
            2 => self.max_ird.store(depth(value)?, Ordering::Relaxed),
            3 => self.max_ord.store(depth(value)?, Ordering::Relaxed),
            4 => match value {
                "0" | "1" => self.peer_to_peer.store(value == "1", Ordering::Relaxed),
                _ => return Err(EINVAL),
            },
            5 => {
                let mut bits = 0u8;
                for name in value.split(',') {
                    let bit = RTR_NAMES
                        .iter()
                        .position(|(n, _)| *n == name.trim())
                        .ok_or(EINVAL)?;
                    bits |= 1 << bit;
                }
                // RFC 6581 section 9.2: a responder supports at least one.
                if bits == 0 {
                    return Err(EINVAL);
                }
                self.rtr.store(bits, Ordering::Relaxed);
            }
            6 => match value {
                "0" | "1" => self.large_fpdus.store(value == "1", Ordering::Relaxed),
                _ => return Err(EINVAL),
            },
            7 => {
                let ms: u32 = value.trim().parse().map_err(|_| EINVAL)?;
                if !MPA_TIMEOUT_MS.contains(&ms) {
                    return Err(EINVAL);
                }
                self.mpa_timeout_ms.store(ms, Ordering::Relaxed);
            }
            _ => return Err(EINVAL),
        }
        Ok(())
    }
}
