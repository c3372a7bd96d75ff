//! Quantities with units: bit rates, byte counts, frame rates and time spans.
//!
//! Every quantity linerate measures or models has a type here, so a bit rate can
//! never be passed where a byte rate was meant. Each type parses what users type
//! on a command line and displays itself in the unit a person would choose.
//!
//! Conventions (also in the README and `--help`):
//!
//! * **Bit rates** use decimal SI prefixes (k = 10³, M = 10⁶, G = 10⁹, T = 10¹²),
//!   as IEEE 802.3 names link speeds: `100M`, `1G`, `2.5G`, `10Gbit`, `100mbit`
//!   (tc style), `25Gbit/s`, `1Gbps`. A `B/s` suffix means bytes per second and is
//!   converted (`12.5MB/s` = 100 Mbit/s).
//! * **Byte counts** follow iperf3: `K`, `M`, `G` and `KiB`, `MiB`, `GiB` are
//!   binary (1024-based), `kB`, `MB`, `GB` are decimal. A bare number or a `B`
//!   suffix is bytes: `1500`, `1500B`, `64K` (= 65 536), `1MB` (= 1 000 000).
//! * **Durations** take `ns`, `us`, `ms`, `s`, `m`, `h`; a bare number is seconds.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Why a quantity could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseUnitError {
    /// Nothing was given.
    #[error("empty value")]
    Empty,
    /// The number part is not a number.
    #[error("'{0}' is not a number")]
    BadNumber(String),
    /// The unit or prefix is not one this quantity understands.
    #[error("unknown unit '{unit}' in '{input}' (expected {expected})")]
    UnknownUnit {
        /// The whole input.
        input: String,
        /// The part that was not understood.
        unit: String,
        /// What would have been accepted.
        expected: &'static str,
    },
    /// The value is negative, zero where zero is meaningless, or too large.
    #[error("'{0}' is out of range")]
    OutOfRange(String),
    /// A fractional number of bytes.
    #[error("'{0}' is not a whole number of bytes")]
    Fractional(String),
}

/// Splits `"2.5Gbit/s"` into `(2.5, "Gbit/s")`.
fn split_number(input: &str) -> Result<(f64, &str), ParseUnitError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(ParseUnitError::Empty);
    }
    let end = s
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .map_or(s.len(), |(i, _)| i);
    let (num, unit) = s.split_at(end);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    if num.is_empty() {
        return Err(ParseUnitError::BadNumber(input.to_string()));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| ParseUnitError::BadNumber(input.to_string()))?;
    if !value.is_finite() {
        return Err(ParseUnitError::OutOfRange(input.to_string()));
    }
    Ok((value, unit.trim()))
}

/// Formats `v` with at most `decimals` decimals, dropping trailing zeros.
fn trim_float(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Formats `v` with four significant digits (`12.19`, `761.9`, `6.845`),
/// the precision of the seeds' tables, keeping trailing zeros so columns of
/// figures stay aligned.
pub fn sig4(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let magnitude = v.abs().log10().floor() as i32;
    let decimals = (3 - magnitude).clamp(0, 6) as usize;
    format!("{v:.decimals$}")
}

/// Formats an integer with thousands separators: `148809` → `148,809`.
pub fn group_thousands(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A data rate in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BitRate(u64);

impl BitRate {
    /// A rate of `bps` bits per second.
    pub const fn from_bps(bps: u64) -> Self {
        Self(bps)
    }

    /// A rate of `mbps` megabits per second.
    pub const fn from_mbps(mbps: u64) -> Self {
        Self(mbps * 1_000_000)
    }

    /// A rate of `gbps` gigabits per second.
    pub const fn from_gbps(gbps: u64) -> Self {
        Self(gbps * 1_000_000_000)
    }

    /// Bits per second.
    pub const fn bps(self) -> u64 {
        self.0
    }

    /// Bits per second as a float, for rate arithmetic.
    pub fn bps_f64(self) -> f64 {
        self.0 as f64
    }
}

impl FromStr for BitRate {
    type Err = ParseUnitError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        const EXPECTED: &str = "a rate such as 100M, 2.5G, 10Gbit, 1Gbps or 12.5MB/s";
        let (value, unit) = split_number(input)?;
        let mut rest = unit;
        let mut mult = 1.0;
        if let Some(c) = rest.chars().next() {
            let prefix = match c {
                'k' | 'K' => Some(1e3),
                'm' | 'M' => Some(1e6),
                'g' | 'G' => Some(1e9),
                't' | 'T' => Some(1e12),
                _ => None,
            };
            if let Some(p) = prefix {
                mult = p;
                rest = &rest[1..];
            }
        }
        let per_byte = match rest {
            "" | "b" | "bit" | "bits" | "bit/s" | "bits/s" | "bps" | "b/s" | "bitps" => 1.0,
            "B/s" | "Bps" | "byte/s" | "bytes/s" => 8.0,
            _ => {
                return Err(ParseUnitError::UnknownUnit {
                    input: input.to_string(),
                    unit: unit.to_string(),
                    expected: EXPECTED,
                })
            }
        };
        let bps = value * mult * per_byte;
        if bps < 1.0 || bps >= u64::MAX as f64 / 2.0 {
            return Err(ParseUnitError::OutOfRange(input.to_string()));
        }
        Ok(Self(bps.round() as u64))
    }
}

impl fmt::Display for BitRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (v, unit) = scale_si(self.0 as f64);
        write!(f, "{} {unit}bit/s", trim_float(v, 3))
    }
}

/// Formats a computed or measured bit rate with an SI prefix and four
/// significant digits: `761.9 Mbit/s`, `1.250 Gbit/s`.
pub fn format_bits_per_s(bps: f64) -> String {
    let (v, unit) = scale_si(bps);
    format!("{} {unit}bit/s", sig4(v))
}

/// Formats a byte rate with an SI prefix and four significant digits:
/// `12.19 MB/s`.
pub fn format_bytes_per_s(bytes_per_s: f64) -> String {
    let (v, unit) = scale_si(bytes_per_s);
    format!("{} {unit}B/s", sig4(v))
}

/// Picks the SI prefix that puts `v` in [1, 1000).
fn scale_si(v: f64) -> (f64, &'static str) {
    const PREFIXES: [(f64, &str); 4] = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (p, name) in PREFIXES {
        if v.abs() >= p {
            return (v / p, name);
        }
    }
    (v, "")
}

/// Standard IEEE 802.3 Ethernet speeds, named in `--help`.
pub const ETHERNET_SPEEDS: [(&str, BitRate); 13] = [
    ("10M", BitRate::from_mbps(10)),
    ("100M", BitRate::from_mbps(100)),
    ("1G", BitRate::from_gbps(1)),
    ("2.5G", BitRate::from_mbps(2_500)),
    ("5G", BitRate::from_gbps(5)),
    ("10G", BitRate::from_gbps(10)),
    ("25G", BitRate::from_gbps(25)),
    ("40G", BitRate::from_gbps(40)),
    ("50G", BitRate::from_gbps(50)),
    ("100G", BitRate::from_gbps(100)),
    ("200G", BitRate::from_gbps(200)),
    ("400G", BitRate::from_gbps(400)),
    ("800G", BitRate::from_gbps(800)),
];

/// A number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ByteCount(u64);

impl ByteCount {
    /// `n` bytes.
    pub const fn new(n: u64) -> Self {
        Self(n)
    }

    /// The number of bytes.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl FromStr for ByteCount {
    type Err = ParseUnitError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        const EXPECTED: &str = "a size such as 1500, 1500B, 64K, 4MiB or 1MB";
        let (value, unit) = split_number(input)?;
        let mult: f64 = match unit {
            "" | "B" | "b" | "byte" | "bytes" => 1.0,
            "K" | "k" | "KiB" | "Ki" => 1024.0,
            "M" | "MiB" | "Mi" => 1024.0 * 1024.0,
            "G" | "GiB" | "Gi" => 1024.0 * 1024.0 * 1024.0,
            "kB" | "KB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            _ => {
                return Err(ParseUnitError::UnknownUnit {
                    input: input.to_string(),
                    unit: unit.to_string(),
                    expected: EXPECTED,
                })
            }
        };
        let bytes = value * mult;
        if bytes.fract() != 0.0 {
            return Err(ParseUnitError::Fractional(input.to_string()));
        }
        if bytes >= u64::MAX as f64 / 2.0 {
            return Err(ParseUnitError::OutOfRange(input.to_string()));
        }
        Ok(Self(bytes as u64))
    }
}

impl fmt::Display for ByteCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const BINARY: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
        for (p, name) in BINARY {
            if self.0 >= p && self.0.is_multiple_of(p) {
                return write!(f, "{} {name}", self.0 / p);
            }
        }
        write!(f, "{} B", self.0)
    }
}

/// A rate of frames (or packets) per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FrameRate(f64);

impl FrameRate {
    /// `fps` frames per second.
    pub const fn new(fps: f64) -> Self {
        Self(fps)
    }

    /// Frames per second.
    pub const fn per_s(self) -> f64 {
        self.0
    }

    /// Whole frames per second, rounded down: the most frames a link can carry
    /// in one second is a whole number (148,809 at 64 B and 100 Mbit/s).
    pub fn whole(self) -> u64 {
        self.0.floor() as u64
    }
}

impl fmt::Display for FrameRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= 1000.0 {
            write!(f, "{} fps", group_thousands(self.whole()))
        } else {
            write!(f, "{} fps", trim_float(self.0, 2))
        }
    }
}

/// A span of time, in seconds, with sub-nanosecond precision: the wire time of
/// a 64-byte frame at 800 Gbit/s is 0.84 ns.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TimeSpan(f64);

impl TimeSpan {
    /// A span of `s` seconds.
    pub const fn from_secs(s: f64) -> Self {
        Self(s)
    }

    /// Seconds.
    pub const fn secs(self) -> f64 {
        self.0
    }

    /// Nanoseconds.
    pub fn nanos(self) -> f64 {
        self.0 * 1e9
    }
}

impl fmt::Display for TimeSpan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        let (v, unit) = if s >= 1.0 {
            (s, "s")
        } else if s >= 1e-3 {
            (s * 1e3, "ms")
        } else if s >= 1e-6 {
            (s * 1e6, "µs")
        } else {
            (s * 1e9, "ns")
        };
        write!(f, "{} {unit}", sig4(v))
    }
}

/// Parses a duration: `10`, `10s`, `1.5s`, `500ms`, `100us`, `2m`, `1h`.
pub fn parse_duration(input: &str) -> Result<Duration, ParseUnitError> {
    let (value, unit) = split_number(input)?;
    let secs = match unit {
        "" | "s" | "sec" | "secs" => value,
        "ms" => value * 1e-3,
        "us" | "µs" => value * 1e-6,
        "ns" => value * 1e-9,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(ParseUnitError::UnknownUnit {
                input: input.to_string(),
                unit: unit.to_string(),
                expected: "a duration such as 10, 10s, 500ms, 100us or 2m",
            })
        }
    };
    if secs > 1e9 {
        return Err(ParseUnitError::OutOfRange(input.to_string()));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_rates_parse_as_users_type_them() {
        let cases = [
            ("100M", 100_000_000),
            ("1G", 1_000_000_000),
            ("2.5G", 2_500_000_000),
            ("10Gbit", 10_000_000_000),
            ("100mbit", 100_000_000),
            ("25Gbit/s", 25_000_000_000),
            ("1Gbps", 1_000_000_000),
            ("800G", 800_000_000_000),
            ("9600", 9_600),
            ("64k", 64_000),
            ("12.5MB/s", 100_000_000),
            ("1_000_000", 1_000_000),
            ("1T", 1_000_000_000_000),
        ];
        for (text, bps) in cases {
            assert_eq!(text.parse::<BitRate>().map(BitRate::bps), Ok(bps), "{text}");
        }
    }

    #[test]
    fn bad_bit_rates_are_refused() {
        for text in ["", "fast", "100X", "1Gbyte", "-5M", "0", "0.1", "M", "1e3"] {
            assert!(text.parse::<BitRate>().is_err(), "{text} should not parse");
        }
    }

    #[test]
    fn byte_counts_follow_iperf_conventions() {
        let cases = [
            ("1500", 1500),
            ("1500B", 1500),
            ("64K", 65_536),
            ("64KiB", 65_536),
            ("4M", 4 << 20),
            ("1MB", 1_000_000),
            ("9kB", 9_000),
            ("1G", 1 << 30),
            ("0", 0),
        ];
        for (text, n) in cases {
            assert_eq!(
                text.parse::<ByteCount>().map(ByteCount::get),
                Ok(n),
                "{text}"
            );
        }
        assert!(matches!(
            "1.5".parse::<ByteCount>(),
            Err(ParseUnitError::Fractional(_))
        ));
        assert!(matches!(
            "10Mbit".parse::<ByteCount>(),
            Err(ParseUnitError::UnknownUnit { .. })
        ));
    }

    #[test]
    fn display_uses_the_users_units() {
        assert_eq!(BitRate::from_mbps(100).to_string(), "100 Mbit/s");
        assert_eq!(BitRate::from_mbps(2_500).to_string(), "2.5 Gbit/s");
        assert_eq!(BitRate::from_bps(672).to_string(), "672 bit/s");
        assert_eq!(ByteCount::new(65_536).to_string(), "64 KiB");
        assert_eq!(ByteCount::new(1500).to_string(), "1500 B");
        assert_eq!(FrameRate::new(148_809.52).to_string(), "148,809 fps");
        assert_eq!(TimeSpan::from_secs(6.72e-6).to_string(), "6.720 µs");
        assert_eq!(TimeSpan::from_secs(0.84e-9).to_string(), "0.8400 ns");
        assert_eq!(format_bits_per_s(761_904_761.9), "761.9 Mbit/s");
        assert_eq!(format_bytes_per_s(12_191_157.0), "12.19 MB/s");
        assert_eq!(sig4(100.0), "100.0");
        assert_eq!(format_bytes_per_s(6_845_238.0), "6.845 MB/s");
        assert_eq!(group_thousands(1_488_095), "1,488,095");
        assert_eq!(group_thousands(999), "999");
    }

    /// Found by tests/fuzz_units.rs: 2^63 (`9223372036854776000B`, the
    /// f64 of `u64::MAX / 2` rounds up to it) passed the "at most half of
    /// u64" check, for byte counts and bit rates alike.
    #[test]
    fn regression_two_to_the_63_is_out_of_range() {
        for s in [
            "9223372036854776000B",
            "9223372036854775808",
            "9223372036854775807",
        ] {
            assert!(
                matches!(s.parse::<ByteCount>(), Err(ParseUnitError::OutOfRange(_))),
                "{s}"
            );
        }
        for s in [
            "9223372036854776000",
            "9223372036.854776G",
            "1152921504606846976B/s",
        ] {
            assert!(
                matches!(s.parse::<BitRate>(), Err(ParseUnitError::OutOfRange(_))),
                "{s}"
            );
        }
        let below = (1u64 << 62).to_string();
        assert_eq!(below.parse::<ByteCount>().map(ByteCount::get), Ok(1 << 62));
        assert_eq!(below.parse::<BitRate>().map(BitRate::bps), Ok(1 << 62));
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("100us"), Ok(Duration::from_micros(100)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("10 parsecs").is_err());
    }
}
