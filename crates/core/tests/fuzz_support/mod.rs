//! Shared settings and strategies of the fuzz harnesses (`tests/fuzz_*.rs`).
//!
//! Every harness runs [`cases`] cases per property: 10,000 by default (the
//! normal `cargo test` run), or `LINERATE_FUZZ_CASES` when set (the long run,
//! see docs/FUZZING.md).

#![allow(dead_code)]

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

/// Cases per property in a normal `cargo test` run.
pub(crate) const DEFAULT_CASES: u32 = 10_000;

/// Cases per property: `LINERATE_FUZZ_CASES`, or [`DEFAULT_CASES`].
pub(crate) fn cases() -> u32 {
    std::env::var("LINERATE_FUZZ_CASES")
        .ok()
        .and_then(|s| s.trim().replace('_', "").parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

/// The proptest configuration of every fuzz property.
pub(crate) fn config() -> Config {
    Config {
        cases: cases(),
        // Failures are kept as named regression tests, not as seed files.
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        max_shrink_iters: 10_000,
        ..Config::default()
    }
}

/// Arbitrary bytes, up to `max` long (short lengths are as likely as long).
pub(crate) fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..=max)
}

/// One structured mutation of a valid input.
#[derive(Debug, Clone)]
pub(crate) enum Mutation {
    /// Keep only the first `n` bytes (n taken modulo the length + 1).
    Truncate(usize),
    /// Flip bit `bit` of byte `at` (`at` modulo the length).
    FlipBit { at: usize, bit: u8 },
    /// Set byte `at` to `value`.
    SetByte { at: usize, value: u8 },
    /// Write an extreme big-endian 16-bit value at `at` (length fields).
    Extreme16 { at: usize, value: u16 },
    /// Write an extreme big-endian 32-bit value at `at`.
    Extreme32 { at: usize, value: u32 },
    /// Append bytes.
    Append(Vec<u8>),
}

fn extreme16() -> impl Strategy<Value = u16> {
    prop_oneof![
        Just(0u16),
        Just(1),
        Just(7),
        Just(8),
        Just(0x7fff),
        Just(0x8000),
        Just(u16::MAX - 1),
        Just(u16::MAX),
        any::<u16>(),
    ]
}

fn extreme32() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1),
        Just(0x7fff_ffff),
        Just(0x8000_0000),
        Just(u32::MAX),
        any::<u32>(),
    ]
}

/// Any one mutation.
pub(crate) fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::FlipBit { at, bit }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, value)| Mutation::SetByte { at, value }),
        (any::<usize>(), extreme16()).prop_map(|(at, value)| Mutation::Extreme16 { at, value }),
        (any::<usize>(), extreme32()).prop_map(|(at, value)| Mutation::Extreme32 { at, value }),
        bytes(16).prop_map(Mutation::Append),
    ]
}

/// Up to `max` mutations in a row.
pub(crate) fn mutations(max: usize) -> impl Strategy<Value = Vec<Mutation>> {
    proptest::collection::vec(mutation(), 1..=max)
}

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    if buf.len() >= bytes.len() {
        let at = at % (buf.len() - bytes.len() + 1);
        buf[at..at + bytes.len()].copy_from_slice(bytes);
    }
}

/// Applies `muts` to `buf` in order.
pub(crate) fn apply(buf: &mut Vec<u8>, muts: &[Mutation]) {
    for m in muts {
        match m {
            Mutation::Truncate(n) => {
                let n = n % (buf.len() + 1);
                buf.truncate(n);
            }
            Mutation::FlipBit { at, bit } => {
                if !buf.is_empty() {
                    let at = at % buf.len();
                    buf[at] ^= 1 << bit;
                }
            }
            Mutation::SetByte { at, value } => put(buf, *at, &[*value]),
            Mutation::Extreme16 { at, value } => put(buf, *at, &value.to_be_bytes()),
            Mutation::Extreme32 { at, value } => put(buf, *at, &value.to_be_bytes()),
            Mutation::Append(more) => buf.extend_from_slice(more),
        }
    }
}

/// Arbitrary strings for parsers of user input: any Unicode, or text made
/// of the characters those parsers look at.
pub(crate) fn user_text() -> impl Strategy<Value = String> {
    // Character vectors, not regex strategies: much cheaper in debug builds.
    let from = |set: &'static str, max: usize| {
        let chars: Vec<char> = set.chars().collect();
        proptest::collection::vec(proptest::sample::select(chars), 0..=max)
            .prop_map(|v| v.into_iter().collect::<String>())
    };
    prop_oneof![
        any::<String>(),
        (
            from("0123456789._ +xXeE-", 12),
            from("kKmMgGtTiBbsyteitpx/µ+ ", 10)
        )
            .prop_map(|(a, b)| a + &b),
        (
            from("0123456789", 400),
            from("0123456789", 400),
            any::<bool>(),
            from("kKmMgGtTiBbs/µpx", 6)
        )
            .prop_map(|(a, b, dot, u)| if dot { format!("{a}.{b}{u}") } else { a + &u }),
    ]
}
