// SPDX-License-Identifier: GPL-2.0

//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::path::PathBuf;

pub use rpcrdma2_proto::proto;

/// Encodes big-endian XDR words, the way the RFC figures write headers.
pub fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// Concatenates byte strings.
pub fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Directory holding raw captured or hand-made messages.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Reads one fixture: raw bytes (`*.bin`) or whitespace-separated hex
/// (`*.hex`, `#` starts a comment) — whichever exists for `name`.
pub fn fixture(name: &str) -> Vec<u8> {
    let dir = fixtures_dir();
    let bin = dir.join(format!("{name}.bin"));
    if bin.exists() {
        return std::fs::read(bin).expect("read fixture");
    }
    let text = std::fs::read_to_string(dir.join(format!("{name}.hex"))).expect("read fixture");
    parse_hex(&text)
}

/// Parses whitespace-separated hex with `#` comments.
pub fn parse_hex(text: &str) -> Vec<u8> {
    let digits: String = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(|l| l.chars())
        .filter(|c| c.is_ascii_hexdigit())
        .collect();
    assert!(digits.len() % 2 == 0, "odd number of hex digits");
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap())
        .collect()
}

/// All fixture names (without extension) in the fixture directory.
pub fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("bin" | "hex")))
                .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names.dedup();
    names
}
