//! Fuzz harness of the parsers of user input: bit rates, byte counts and
//! durations (`units`), encapsulation names (`Encap::from_str`) and PCIe
//! bus specs (`PcieLink::from_str`).
//!
//! Properties: no string panics a parser; what parses is in range; the
//! displayed form parses back (exactly for byte counts up to 2^53 and for
//! encapsulations, within display rounding for bit rates); mutated valid
//! inputs (characters inserted, removed, replaced, multi-byte ones
//! included) are refused or parse in range. See docs/FUZZING.md.

mod fuzz_support;

use std::str::FromStr;
use std::time::Duration;

use fuzz_support::{config, user_text};
use linerate_core::linerate::{Encap, PcieLink};
use linerate_core::units::{parse_duration, BitRate, ByteCount};
use proptest::prelude::*;

/// Parses `s` with every parser and checks what a success promises.
fn check(s: &str) {
    if let Ok(r) = BitRate::from_str(s) {
        assert!(r.bps() >= 1 && r.bps() <= u64::MAX / 2, "{s:?} → {r:?}");
        let shown = r.to_string();
        let back = BitRate::from_str(&shown).expect("a displayed rate parses");
        // Display keeps 3 decimals of the SI-scaled value (4 significant
        // digits at least): within 0.05 %.
        let (a, b) = (r.bps() as f64, back.bps() as f64);
        assert!(
            (a - b).abs() <= a * 5e-4 + 0.5,
            "{s:?}: {a} shown {shown:?} → {b}"
        );
    }
    if let Ok(n) = ByteCount::from_str(s) {
        assert!(n.get() <= u64::MAX / 2, "{s:?} → {n:?}");
        let back = ByteCount::from_str(&n.to_string()).expect("a displayed size parses");
        if n.get() <= 1 << 53 {
            assert_eq!(back, n, "{s:?}");
        }
    }
    if let Ok(d) = parse_duration(s) {
        assert!(d <= Duration::from_secs(1_000_000_000), "{s:?} → {d:?}");
    }
    if let Ok(e) = Encap::from_str(s) {
        assert!(e.vlan_tags <= 2);
        assert_eq!(Encap::from_str(&e.to_string()), Ok(e), "{s:?}");
    }
    if let Ok(p) = PcieLink::from_str(s) {
        assert!((1..=6).contains(&p.generation), "{s:?}");
        assert!([1, 2, 4, 8, 12, 16, 32].contains(&p.lanes), "{s:?}");
        let canonical = format!("pcie{}x{}", p.generation, p.lanes);
        assert_eq!(PcieLink::from_str(&canonical), Ok(p));
        let _ = p.to_string();
    }
}

/// Inputs people type, each parser's own.
const VALID: &[&str] = &[
    "100M",
    "1G",
    "2.5G",
    "10Gbit",
    "100mbit",
    "25Gbit/s",
    "1Gbps",
    "12.5MB/s",
    "1_000_000",
    "1T",
    "64k",
    "1500",
    "1500B",
    "64K",
    "64KiB",
    "4M",
    "1MB",
    "9kB",
    "1G",
    "0",
    "10",
    "10s",
    "1.5s",
    "500ms",
    "100us",
    "100µs",
    "2m",
    "1h",
    "5ns",
    "eth",
    "ipv4",
    "ipv6",
    "udp",
    "udp6",
    "tcp4",
    "tcp6",
    "vlan",
    "vlan+udp4",
    "qinq+tcp6",
    "dot1q+ip6",
    "dot1ad",
    "pcie3x16",
    "PCIe4x8",
    "gen5x4",
    "pciegen6x32",
    " pcie 2 x 1 ",
];

/// One character-level edit.
#[derive(Debug, Clone)]
enum Edit {
    Insert(usize, char),
    Remove(usize),
    Replace(usize, char),
    Repeat(usize, u16),
}

fn edit() -> impl Strategy<Value = Edit> {
    let ch = prop_oneof![
        4 => proptest::sample::select("0123456789._+-xX eEkKmMgGtTiBbs/µpcnuh".chars().collect::<Vec<_>>()),
        1 => any::<char>(),
    ];
    prop_oneof![
        (any::<usize>(), ch.clone()).prop_map(|(i, c)| Edit::Insert(i, c)),
        any::<usize>().prop_map(Edit::Remove),
        (any::<usize>(), ch).prop_map(|(i, c)| Edit::Replace(i, c)),
        (any::<usize>(), 0u16..400).prop_map(|(i, n)| Edit::Repeat(i, n)),
    ]
}

fn mutate(s: &str, edits: &[Edit]) -> String {
    let mut c: Vec<char> = s.chars().collect();
    for e in edits {
        match *e {
            Edit::Insert(i, ch) => c.insert(i % (c.len() + 1), ch),
            Edit::Remove(i) if !c.is_empty() => {
                c.remove(i % c.len());
            }
            Edit::Replace(i, ch) if !c.is_empty() => {
                let n = c.len();
                c[i % n] = ch;
            }
            Edit::Repeat(i, n) if !c.is_empty() => {
                let at = i % c.len();
                let ch = c[at];
                c.splice(at..at, std::iter::repeat_n(ch, usize::from(n)));
            }
            _ => {}
        }
    }
    c.into_iter().collect()
}

proptest! {
    #![proptest_config(config())]

    /// (a) Arbitrary strings: any Unicode, and text made of the characters
    /// the parsers look at (digits hundreds long included).
    #[test]
    fn any_text(s in user_text()) {
        check(&s);
    }

    /// (b) Valid inputs with characters inserted, removed, replaced or
    /// repeated.
    #[test]
    fn mutated_valid_inputs(base in proptest::sample::select(VALID), edits in proptest::collection::vec(edit(), 1..4)) {
        check(base);
        check(&mutate(base, &edits));
    }

    /// Numbers at the edges of every unit: huge, tiny, many digits.
    #[test]
    fn numbers_at_the_edges(
        mantissa in prop_oneof![Just(0.0f64), Just(1e-30), Just(0.5), Just(1.0), Just(9.223372036854776e18), Just(1.8446744073709552e19), Just(1e300), Just(f64::MAX), 0.0f64..1e20],
        unit in proptest::sample::select(vec!["", "k", "M", "G", "T", "B", "KiB", "GiB", "GB", "B/s", "TB/s", "Tbit", "ns", "us", "ms", "s", "m", "h"]),
    ) {
        check(&format!("{mantissa}{unit}"));
        check(&format!("{mantissa:.0}{unit}"));
        check(&format!("{mantissa:.20}{unit}"));
    }
}
