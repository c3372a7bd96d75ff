//! Settings matrices and repeats, shared by every measuring command.
//!
//! A sweep is given as `KEY=V1,V2,…` (repeatable); [`expand`] parses the
//! sweeps, checks each key against the command's list and each value with
//! the command's own `apply`, and returns the cartesian product (the first
//! sweep varies slowest), every point naming the settings it took.
//! [`Spread`] summarises repeated runs of one point: the median with the
//! minimum and maximum.

use serde::{Deserialize, Serialize};

use crate::units::BitRate;

/// Why sweeps make no matrix. Messages name keys and values, never
/// command-line flags.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SweepError {
    /// Not `KEY=V1,V2`.
    #[error("'{0}': expected KEY=V1,V2")]
    Syntax(String),
    /// `KEY=` with no value.
    #[error("'{0}': no values")]
    NoValues(String),
    /// A key the command does not sweep.
    #[error("unknown key '{key}' (expected {expected})")]
    UnknownKey {
        /// The key given.
        key: String,
        /// The keys the command sweeps, comma-separated.
        expected: String,
    },
    /// The same key in two sweeps.
    #[error("'{0}' is swept twice")]
    Twice(String),
    /// A value the command refuses for its key.
    #[error("{key}: {reason}")]
    Value {
        /// The key.
        key: String,
        /// What is wrong with the value (it names the value).
        reason: String,
    },
    /// More points than allowed.
    #[error("makes {points} configurations or more; {max} at most")]
    TooMany {
        /// Points made so far.
        points: usize,
        /// The limit.
        max: usize,
    },
}

/// One point of a matrix: the settings that name it (`[("mtu", "9000")]`;
/// empty without sweeps) and the configuration they make.
#[derive(Debug, Clone, PartialEq)]
pub struct Point<T> {
    /// `(key, value)` as given, in the order of the sweeps.
    pub settings: Vec<(String, String)>,
    /// The configuration.
    pub config: T,
}

/// One sweep, parsed: its key and values.
fn parse(sweep: &str) -> Result<(&str, Vec<&str>), SweepError> {
    let Some((key, values)) = sweep.split_once('=') else {
        return Err(SweepError::Syntax(sweep.to_string()));
    };
    let values: Vec<&str> = values
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    if values.is_empty() {
        return Err(SweepError::NoValues(sweep.to_string()));
    }
    Ok((key.trim(), values))
}

/// The matrix `sweeps` make from `base`: every key checked against `keys`,
/// every value applied to a copy of its point by `apply` (which returns why
/// it refuses a value), at most `max` points. Without sweeps: `base` alone.
pub fn expand<T: Clone>(
    base: T,
    sweeps: &[String],
    keys: &[&str],
    max: usize,
    mut apply: impl FnMut(&mut T, &str, &str) -> Result<(), String>,
) -> Result<Vec<Point<T>>, SweepError> {
    let mut out = vec![Point {
        settings: Vec::new(),
        config: base,
    }];
    let mut seen: Vec<&str> = Vec::new();
    for sweep in sweeps {
        let (key, values) = parse(sweep)?;
        if !keys.contains(&key) {
            return Err(SweepError::UnknownKey {
                key: key.to_string(),
                expected: keys.join(", "),
            });
        }
        if seen.contains(&key) {
            return Err(SweepError::Twice(key.to_string()));
        }
        seen.push(key);
        let points = out.len().saturating_mul(values.len());
        if points > max {
            return Err(SweepError::TooMany { points, max });
        }
        let mut next = Vec::with_capacity(points);
        for p in &out {
            for &v in &values {
                let mut c = p.clone();
                apply(&mut c.config, key, v).map_err(|reason| SweepError::Value {
                    key: key.to_string(),
                    reason,
                })?;
                c.settings.push((key.to_string(), v.to_string()));
                next.push(c);
            }
        }
        out = next;
    }
    Ok(out)
}

/// `on`/`off` (also `true`/`false`, `yes`/`no`, `1`/`0`) as a bool, or why
/// not (naming the value).
pub fn on_off(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(format!("'{v}' is not on or off")),
    }
}

/// A point's label: its settings as `k=v k=v`, or `default`.
pub fn label(settings: &[(String, String)]) -> String {
    if settings.is_empty() {
        return "default".into();
    }
    settings
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The bed settings a sweep may vary on a testbed: the MTU of every
/// interface, offloads and RPS of every veth end, and each host's TCP
/// buffer sysctls (`tcp-rmem=4096:131072:6291456`, colons between the three
/// values since commas separate a sweep's values), and the rate of the
/// bed's shaped link (`link=100M,1G`, the rates of `testbed up --link`).
pub const BED_KEYS: [&str; 11] = [
    "mtu",
    "gro",
    "gso",
    "tso",
    "tx-checksum",
    "rx-checksum",
    "rps",
    "tcp-rmem",
    "tcp-wmem",
    "rx-usecs",
    "link",
];

/// One bed setting of a point, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BedSetting {
    /// The MTU of every interface of the bed, bytes.
    Mtu(u32),
    /// An offload of every veth end (`ethtool -K` name: `gro`, `gso`, `tso`,
    /// `tx-checksum`, `rx-checksum`), on or off.
    Offload(String, bool),
    /// Receive packet steering on every veth end: over all CPUs, or off.
    Rps(bool),
    /// A TCP buffer sysctl of every host (`net.ipv4.tcp_rmem` or
    /// `net.ipv4.tcp_wmem`): min, default and max bytes.
    TcpMem(&'static str, [u64; 3]),
    /// Interrupt coalescing on receive (`ethtool -C rx-usecs`), µs, where
    /// the driver supports it (veth does not).
    RxUsecs(u32),
    /// The rate of the bed's shaped link (tbf or the link emulator),
    /// changed in place.
    Link(BitRate),
}

/// The slowest link a point may set (as `testbed up --link`).
pub const MIN_LINK_BPS: u64 = 1_000;
/// The fastest.
pub const MAX_LINK_BPS: u64 = 1_000_000_000_000;

/// Smallest MTU a bed takes (IPv4's minimum datagram).
pub const MIN_BED_MTU: u32 = 68;
/// Largest (a 16,384-byte jumbo frame less its Ethernet header and FCS).
pub const MAX_BED_MTU: u32 = crate::linerate::MAX_JUMBO_FRAME_BYTES - 18;

impl BedSetting {
    /// The setting `key=v` (a key of [`BED_KEYS`]), or why not.
    pub fn parse(key: &str, v: &str) -> Result<Self, String> {
        match key {
            "mtu" => {
                let mtu: u32 = v.parse().map_err(|_| format!("'{v}' is not a number"))?;
                if !(MIN_BED_MTU..=MAX_BED_MTU).contains(&mtu) {
                    return Err(format!("{mtu} is outside {MIN_BED_MTU}..={MAX_BED_MTU}"));
                }
                Ok(Self::Mtu(mtu))
            }
            "rps" => Ok(Self::Rps(on_off(v)?)),
            "link" => {
                let rate: BitRate = v
                    .parse()
                    .map_err(|e: crate::units::ParseUnitError| e.to_string())?;
                if !(MIN_LINK_BPS..=MAX_LINK_BPS).contains(&rate.bps()) {
                    return Err(format!("{rate} is outside 1 kbit/s to 1 Tbit/s"));
                }
                Ok(Self::Link(rate))
            }
            "rx-usecs" => Ok(Self::RxUsecs(
                v.parse()
                    .map_err(|_| format!("'{v}' is not a number of µs"))?,
            )),
            "tcp-rmem" | "tcp-wmem" => {
                let n: Vec<u64> = v
                    .split([':', '/'])
                    .map(|x| {
                        x.trim()
                            .parse()
                            .map_err(|_| format!("'{v}' is not MIN:DEFAULT:MAX bytes"))
                    })
                    .collect::<Result<_, _>>()?;
                let [min, def, max] = n[..] else {
                    return Err(format!("'{v}' is not MIN:DEFAULT:MAX bytes"));
                };
                if !(min <= def && def <= max && min > 0) {
                    return Err(format!("'{v}': needs 0 < MIN <= DEFAULT <= MAX"));
                }
                let sysctl = match key {
                    "tcp-rmem" => "net.ipv4.tcp_rmem",
                    _ => "net.ipv4.tcp_wmem",
                };
                Ok(Self::TcpMem(sysctl, [min, def, max]))
            }
            _ => Ok(Self::Offload(key.to_string(), on_off(v)?)),
        }
    }
}

/// The link rate a point's bed settings set, if one does.
pub fn link_of(settings: &[BedSetting]) -> Option<BitRate> {
    settings.iter().rev().find_map(|s| match s {
        BedSetting::Link(r) => Some(*r),
        _ => None,
    })
}

/// Repeats a command may make of one point, at most.
pub const MAX_REPEATS: u32 = 100;

/// Checks a `repeat` count: 1 ..= [`MAX_REPEATS`].
pub fn check_repeat(n: u32) -> Result<u32, String> {
    if (1..=MAX_REPEATS).contains(&n) {
        Ok(n)
    } else {
        Err(format!("{n}: must be between 1 and {MAX_REPEATS}"))
    }
}

/// Repeated runs of one figure: how many, the median, the smallest and the
/// largest.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spread {
    /// Runs that gave the figure.
    pub runs: u32,
    /// The median (the mean of the two middle values of an even count).
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
}

impl Spread {
    /// The spread of `values` (non-finite values left out); `None` when
    /// none is left.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Self {
            runs: u32::try_from(n).unwrap_or(u32::MAX),
            median,
            min: v[0],
            max: v[n - 1],
        })
    }

    /// Max minus min, percent of the median (`None` when the median is 0).
    pub fn range_pct(&self) -> Option<f64> {
        (self.median != 0.0).then(|| 100.0 * (self.max - self.min) / self.median.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Default, PartialEq)]
    struct Cfg {
        mtu: u32,
        copy: bool,
    }

    fn apply(c: &mut Cfg, key: &str, v: &str) -> Result<(), String> {
        match key {
            "mtu" => c.mtu = v.parse().map_err(|_| format!("'{v}' is not a number"))?,
            "copy" => c.copy = on_off(v)?,
            _ => unreachable!("keys are checked first"),
        }
        Ok(())
    }

    fn run(sweeps: &[&str], max: usize) -> Result<Vec<Point<Cfg>>, SweepError> {
        let s: Vec<String> = sweeps.iter().map(|s| s.to_string()).collect();
        expand(Cfg::default(), &s, &["mtu", "copy"], max, apply)
    }

    #[test]
    fn the_cartesian_product_first_sweep_slowest() {
        let p = run(&["mtu=1500,9000", "copy=off,on"], 64).unwrap();
        let got: Vec<(u32, bool)> = p.iter().map(|p| (p.config.mtu, p.config.copy)).collect();
        assert_eq!(
            got,
            vec![(1500, false), (1500, true), (9000, false), (9000, true)]
        );
        assert_eq!(label(&p[3].settings), "mtu=9000 copy=on");
        let none = run(&[], 64).unwrap();
        assert_eq!(none.len(), 1);
        assert_eq!(label(&none[0].settings), "default");
    }

    #[test]
    fn bad_sweeps_say_what_is_wrong() {
        let e = |s: &[&str]| run(s, 4).unwrap_err().to_string();
        assert_eq!(e(&["mtu"]), "'mtu': expected KEY=V1,V2");
        assert_eq!(e(&["mtu= ,"]), "'mtu= ,': no values");
        assert_eq!(
            e(&["colour=red"]),
            "unknown key 'colour' (expected mtu, copy)"
        );
        assert_eq!(e(&["mtu=1500", "mtu=9000"]), "'mtu' is swept twice");
        assert_eq!(e(&["mtu=big"]), "mtu: 'big' is not a number");
        assert_eq!(e(&["copy=maybe"]), "copy: 'maybe' is not on or off");
        assert_eq!(
            e(&["mtu=1,2,3", "copy=on,off"]),
            "makes 6 configurations or more; 4 at most"
        );
    }

    #[test]
    fn spread_is_the_median_with_min_and_max() {
        let s = Spread::of([3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.runs, s.median, s.min, s.max), (3, 2.0, 1.0, 3.0));
        let s = Spread::of([4.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((s.runs, s.median, s.min, s.max), (4, 3.0, 1.0, 10.0));
        assert_eq!(s.range_pct(), Some(300.0));
        let s = Spread::of([f64::NAN, 5.0]).unwrap();
        assert_eq!((s.runs, s.median), (1, 5.0));
        assert_eq!(Spread::of([]), None);
        assert_eq!(Spread::of([0.0]).unwrap().range_pct(), None);
    }

    #[test]
    fn bed_settings_parse() {
        assert_eq!(BedSetting::parse("mtu", "9000"), Ok(BedSetting::Mtu(9000)));
        assert!(BedSetting::parse("mtu", "20")
            .unwrap_err()
            .contains("outside"));
        assert!(BedSetting::parse("mtu", "big").is_err());
        assert_eq!(
            BedSetting::parse("gro", "off"),
            Ok(BedSetting::Offload("gro".into(), false))
        );
        assert!(BedSetting::parse("tso", "sometimes").is_err());
        assert_eq!(BedSetting::parse("rps", "on"), Ok(BedSetting::Rps(true)));
        assert_eq!(
            BedSetting::parse("tcp-rmem", "4096:131072:6291456"),
            Ok(BedSetting::TcpMem(
                "net.ipv4.tcp_rmem",
                [4096, 131_072, 6_291_456]
            ))
        );
        assert!(BedSetting::parse("tcp-wmem", "1:2")
            .unwrap_err()
            .contains("MIN:DEFAULT:MAX"));
        assert!(BedSetting::parse("tcp-wmem", "9:2:3")
            .unwrap_err()
            .contains("<="));
    }

    #[test]
    fn link_settings_parse_as_testbed_rates() {
        assert_eq!(
            BedSetting::parse("link", "100M"),
            Ok(BedSetting::Link(BitRate::from_mbps(100)))
        );
        assert_eq!(
            BedSetting::parse("link", "1Gbit"),
            Ok(BedSetting::Link(BitRate::from_gbps(1)))
        );
        let e = BedSetting::parse("link", "fast").unwrap_err();
        assert_eq!(e, "'fast' is not a number");
        let e = BedSetting::parse("link", "10Q").unwrap_err();
        assert!(e.starts_with("unknown unit 'Q' in '10Q'"), "{e}");
        assert!(BedSetting::parse("link", "10")
            .unwrap_err()
            .contains("outside 1 kbit/s to 1 Tbit/s"));
        assert!(BedSetting::parse("link", "2T").is_err());
        // Through a sweep: one point per rate, the last link set wins.
        let bed_points = |sweep: &str| {
            let s = vec![sweep.to_string()];
            let apply = |c: &mut Vec<BedSetting>, k: &str, v: &str| {
                c.push(BedSetting::parse(k, v)?);
                Ok(())
            };
            expand(Vec::new(), &s, &BED_KEYS, 8, apply)
        };
        let p = bed_points("link=100M,1G").unwrap();
        let links: Vec<_> = p.iter().map(|p| link_of(&p.config)).collect();
        assert_eq!(
            links,
            [Some(BitRate::from_mbps(100)), Some(BitRate::from_gbps(1))]
        );
        assert_eq!(label(&p[1].settings), "link=1G");
        assert_eq!(link_of(&[BedSetting::Rps(true)]), None);
        let e = bed_points("link=100M,x").unwrap_err().to_string();
        assert_eq!(e, "link: 'x' is not a number");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn repeats_are_bounded() {
        assert_eq!(check_repeat(1), Ok(1));
        assert!(check_repeat(0).is_err());
        assert!(check_repeat(MAX_REPEATS + 1).is_err());
    }
}
