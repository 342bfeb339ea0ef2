// SPDX-License-Identifier: GPL-2.0

//! The module's debugfs directory, `/sys/kernel/debug/rpcrdma2/`: one file per client
//! transport (`client-N`) and one per server connection (`server-N`), numbered in the order
//! they were created since the module was loaded.
//!
//! `/proc/self/mountstats` shows a client transport's counters as one line of numbers, and
//! nothing of a server connection; a file per transport names each value (`key: value`
//! lines) and adds what a line of counters cannot: the addresses, the transport properties
//! each side sent, the inline thresholds and the credits. What each file shows is the
//! transport's report ([`crate::client::report`], [`crate::server::report`]), which the
//! transport updates as it goes and the file owns with it.
//!
//! debugfs is a debugging aid: a transport works the same without its file. When the
//! directory or a file cannot be created (debugfs disabled, or out of memory) the first
//! failure is logged and the transport goes on without.

use crate::proto::{
    properties::{PeerProperties, ReverseSupport, MIN_BUFFER_SIZE},
    property_exchange::LocalProperties,
};
use core::{
    fmt::{self, Write},
    net::SocketAddr,
    sync::atomic::{AtomicBool, AtomicU32, Ordering},
};
use kernel::{
    c_str,
    debugfs::{Dir, DirSlot, File, SeqFile, Show},
    prelude::*,
    str::CString,
    sync::Arc,
};

/// The module's directory, while it is loaded.
static ROOT: DirSlot = DirSlot::new();

/// The number of the next transport's file.
static NEXT: AtomicU32 = AtomicU32::new(1);

/// Whether a failure was logged already.
static FAILURE_LOGGED: AtomicBool = AtomicBool::new(false);

/// Logs the first failure to create the directory or a file.
fn failed(what: fmt::Arguments<'_>, e: Error) {
    if !FAILURE_LOGGED.swap(true, Ordering::Relaxed) {
        pr_info!("no debugfs {what} ({e:?}): transports go on without their files\n");
    }
}

/// The module's directory, from load to unload: dropping it removes the directory (once the
/// transports' files in it are gone too).
pub(crate) struct Root;

impl Root {
    /// Creates `/sys/kernel/debug/rpcrdma2/`; without it, transports have no files.
    pub(crate) fn create() -> Self {
        match Dir::new(c_str!("rpcrdma2")).and_then(|dir| ROOT.set(dir)) {
            Ok(()) => {}
            Err(e) => failed(format_args!("directory rpcrdma2"), e),
        }
        Root
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        drop(ROOT.take());
    }
}

/// A file `<kind>-N` in the module's directory showing `report`, if debugfs allows.
pub(crate) fn file<T: Show>(kind: &str, report: Arc<T>) -> Option<File<T>> {
    let dir = ROOT.get()?;
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let made =
        CString::try_from_fmt(format_args!("{kind}-{n}")).and_then(|name| dir.file(&name, report));
    match made {
        Ok(file) => Some(file),
        Err(e) => {
            failed(format_args!("file {kind}-{n}"), e);
            None
        }
    }
}

/// A set of transport properties as the files show them (ours as sent, or the peer's as
/// received): the same five both ways.
#[derive(Clone, Copy)]
pub(crate) struct Properties {
    rbsiz: u32,
    sbsiz: u32,
    rssiz: u32,
    rcsiz: u32,
    brs: ReverseSupport,
}

impl From<LocalProperties> for Properties {
    fn from(p: LocalProperties) -> Self {
        // As `LocalProperties::properties` sends them: sizes at least the draft's minimum.
        Self {
            rbsiz: p.recv_buffer_size.max(MIN_BUFFER_SIZE),
            sbsiz: p.send_size.max(MIN_BUFFER_SIZE),
            rssiz: p.max_segment_size,
            rcsiz: p.max_segment_count,
            brs: p.reverse,
        }
    }
}

impl From<PeerProperties> for Properties {
    fn from(p: PeerProperties) -> Self {
        Self {
            rbsiz: p.recv_buffer_size,
            sbsiz: p.send_size,
            rssiz: p.max_segment_size,
            rcsiz: p.max_segment_count,
            brs: p.reverse,
        }
    }
}

/// Writes `props` as `<prefix>_rbsiz: N` lines, `none` for each when there are none (a
/// Version 1 connection, or a Version 2 one before the exchange).
pub(crate) fn write_properties(
    m: &mut SeqFile<'_>,
    prefix: &str,
    props: Option<Properties>,
) -> fmt::Result {
    match props {
        Some(p) => {
            writeln!(m, "{prefix}_rbsiz: {}", p.rbsiz)?;
            writeln!(m, "{prefix}_sbsiz: {}", p.sbsiz)?;
            writeln!(m, "{prefix}_rssiz: {}", p.rssiz)?;
            writeln!(m, "{prefix}_rcsiz: {}", p.rcsiz)?;
            writeln!(m, "{prefix}_brs: {:?}", p.brs)
        }
        None => {
            for key in ["rbsiz", "sbsiz", "rssiz", "rcsiz", "brs"] {
                writeln!(m, "{prefix}_{key}: none")?;
            }
            Ok(())
        }
    }
}

/// An address, or `none` while it is not known.
pub(crate) struct Address(pub(crate) Option<SocketAddr>);

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(address) => write!(f, "{address}"),
            None => f.write_str("none"),
        }
    }
}
