// SPDX-License-Identifier: GPL-2.0

//! Decodes a captured RPC-over-RDMA conversation with the protocol core and checks what it
//! must show: `make test` captures rpcrdma2's client and server talking Version 2
//! (scenario 19), `scripts/extract-rpcrdma-fixtures.py` cuts the capture into one file per
//! Send, and this program reads them back in wire order.
//!
//! ```text
//! decode_capture DIR [--version 2] [--connprop] [--continued-calls N] [--continued-replies N]
//! ```
//!
//! Every message must decode (`wire::decode`, either layout) and none may be an error. Each
//! connection's messages of one direction go through a [`Reassembler`], as a receiver's would:
//! fragments (`RDMA2_F_MORE`) must make whole RPC messages whose XID is the transport XID.
//! `--version V`: every message is of version V. `--connprop`: each side's first message is an
//! `RDMA2_CONNPROP`, the client's no longer than the draft's 1024 bytes. `--continued-calls N`
//! and `--continued-replies N`: at least N calls (replies) came in more than one Send. It prints
//! one line per direction with what it saw, and exits 1 when a check fails.

use rpcrdma2_proto::proto::{
    chunk::ChunkLimits,
    continuation::{Reassembled, Reassembler, SliceStorage, RECEIVE_LIMITS},
    negotiation::FIRST_MESSAGE_MAX,
    wire::{self, Body, Revision},
};
use std::{collections::BTreeMap, fs, path::PathBuf, process::ExitCode};

/// What one direction (calls, or replies) of the capture carried.
#[derive(Default)]
struct Seen {
    messages: usize,
    by_kind: BTreeMap<&'static str, usize>,
    versions: BTreeMap<u32, usize>,
    connprop_first: usize,
    connections: usize,
    continued: usize,
    fragments: usize,
    whole_checked: usize,
}

impl Seen {
    fn line(&self, what: &str) -> String {
        let kinds: Vec<String> = self
            .by_kind
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        let versions: Vec<String> = self
            .versions
            .iter()
            .map(|(v, n)| format!("{n} in version {v}"))
            .collect();
        format!(
            "{what}: {} messages on {} connections ({}): {}; {} RPC messages in {} Sends \
             reassembled from continuation, {} RPC messages checked",
            self.messages,
            self.connections,
            versions.join(", "),
            kinds.join(", "),
            self.continued,
            self.fragments,
            self.whole_checked
        )
    }
}

struct Checks {
    version: Option<u32>,
    connprop: bool,
    continued_calls: usize,
    continued_replies: usize,
}

fn parse_args() -> Result<(PathBuf, Checks), String> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: decode_capture DIR [checks]")?;
    let mut checks = Checks {
        version: None,
        connprop: false,
        continued_calls: 0,
        continued_replies: 0,
    };
    while let Some(arg) = args.next() {
        let mut number = || -> Result<usize, String> {
            args.next()
                .and_then(|n| n.parse().ok())
                .ok_or(format!("{arg} wants a number"))
        };
        match arg.as_str() {
            "--version" => checks.version = Some(number()? as u32),
            "--connprop" => checks.connprop = true,
            "--continued-calls" => checks.continued_calls = number()?,
            "--continued-replies" => checks.continued_replies = number()?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok((PathBuf::from(dir), checks))
}

fn main() -> ExitCode {
    let (dir, checks) = match parse_args() {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("decode_capture: {e}");
            return ExitCode::from(2);
        }
    };
    let mut names: Vec<String> = match fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".bin"))
            .collect(),
        Err(e) => {
            eprintln!("decode_capture: {}: {e}", dir.display());
            return ExitCode::from(2);
        }
    };
    names.sort();
    let mut problems = Vec::new();
    let mut calls = Seen::default();
    let mut replies = Seen::default();
    let receiver = || {
        Reassembler::new(
            SliceStorage::new(vec![0u8; RECEIVE_LIMITS.max_len]),
            RECEIVE_LIMITS,
        )
    };
    let mut reassembler = receiver();
    // The direction of the current stream, and whether its first message was seen.
    let mut call_direction = true;
    let mut first = true;
    for name in &names {
        if name.contains("-mpa-") {
            // A new connection's stream: its own receiver state.
            call_direction = name.contains("-mpa-call-");
            reassembler = receiver();
            first = true;
            let seen = if call_direction {
                &mut calls
            } else {
                &mut replies
            };
            seen.connections += 1;
            continue;
        }
        let Ok(buf) = fs::read(dir.join(name)) else {
            problems.push(format!("{name}: unreadable"));
            continue;
        };
        let seen = if call_direction {
            &mut calls
        } else {
            &mut replies
        };
        seen.messages += 1;
        let header = match wire::decode(&buf, &ChunkLimits::DEFAULT) {
            Ok(header) => header,
            Err(fault) => {
                problems.push(format!("{name}: does not decode: {fault:?}"));
                continue;
            }
        };
        let version = match header.revision {
            Revision::V1 => 1,
            Revision::V2Draft01 => 2,
        };
        *seen.versions.entry(version).or_default() += 1;
        if checks.version.is_some_and(|v| v != version) {
            problems.push(format!("{name}: version {version}"));
        }
        let kind = match header.body {
            Body::Msg { more: true, .. } => "fragments",
            Body::Msg { .. } => "MSG",
            Body::NoMsg { .. } => "NOMSG",
            Body::Error(_) => "ERROR",
            Body::Properties { .. } => "CONNPROP",
            Body::Control => "credit grants",
        };
        *seen.by_kind.entry(kind).or_default() += 1;
        if let Body::Error(e) = header.body {
            problems.push(format!("{name}: an error: {}", e.name()));
        }
        if first {
            first = false;
            if matches!(header.body, Body::Properties { .. }) {
                seen.connprop_first += 1;
            }
            if checks.connprop && call_direction && buf.len() > FIRST_MESSAGE_MAX {
                problems.push(format!(
                    "{name}: the client's first message has {} bytes",
                    buf.len()
                ));
            }
        }
        let payload = match reassembler.accept_part(header.part()) {
            Ok(Reassembled::Whole(payload)) => Some(payload.to_vec()),
            Ok(Reassembled::Complete { fragments, .. }) => {
                seen.continued += 1;
                seen.fragments += fragments as usize;
                Some(reassembler.storage().data().to_vec())
            }
            Ok(_) => None,
            Err(e) => {
                problems.push(format!("{name}: continuation broken: {:?}", e.violation));
                None
            }
        };
        // An RPC message starts with its XID, which the transport header repeats.
        if let Some(payload) = payload {
            if payload.get(..4) != Some(&header.xid.to_be_bytes()[..]) {
                problems.push(format!("{name}: RPC XID differs from {:#x}", header.xid));
            } else {
                seen.whole_checked += 1;
            }
        }
    }
    println!("{}", calls.line("client to server"));
    println!("{}", replies.line("server to client"));
    if calls.messages == 0 || replies.messages == 0 {
        problems.push("no message in one direction".into());
    }
    if checks.connprop {
        for (seen, side) in [(&calls, "client"), (&replies, "server")] {
            if seen.connprop_first != seen.connections {
                problems.push(format!(
                    "{side}: RDMA2_CONNPROP first on {} of {} connections",
                    seen.connprop_first, seen.connections
                ));
            }
        }
    }
    if calls.continued < checks.continued_calls {
        problems.push(format!("{} continued calls", calls.continued));
    }
    if replies.continued < checks.continued_replies {
        problems.push(format!("{} continued replies", replies.continued));
    }
    for problem in &problems {
        println!("decode_capture: {problem}");
    }
    if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
