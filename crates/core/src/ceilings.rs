//! `linerate ceilings`: how fast this host's data-path primitives are (copy,
//! the Internet checksum, a packet through each send and receive path), each
//! set against the Ethernet line rates it can sustain.
//!
//! The procedure is here, pure: which block and frame sizes, how much work
//! per repeat, how many repeats and warm-ups ([`Config`]); and what follows
//! from the timed repeats `linerate-io` hands back ([`Sample`]): time per
//! operation (median, min–max), bytes and frames per second, the line rate
//! those frames fill, and the verdict "enough for X, not for Y" against the
//! standard speeds 10M … 400G ([`Ceiling`]). A copy or a checksum of `N`
//! bytes stands for one `N`-byte frame (blocks above a jumbo frame: bulk
//! copying of 1518-byte frames); a packet path's operation is one frame.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::energy::Energy;
use crate::linerate::{Encap, Row, MAX_JUMBO_FRAME_BYTES, MAX_UNTAGGED_FRAME_BYTES};
use crate::result::Flag;
use crate::units::{BitRate, ETHERNET_SPEEDS};

/// The result's schema name.
pub const SCHEMA: &str = "linerate.ceilings";
/// The result's schema version.
pub const VERSION: u32 = 1;
/// The clock every repeat is timed with.
pub const CLOCK: &str = "CLOCK_MONOTONIC (read before and after each repeat)";
/// The fastest standard speed a verdict names.
pub const FASTEST_VERDICT: BitRate = BitRate::from_gbps(400);
/// Repeats the spread of which (max over min) exceeds this are flagged.
pub const NOISY_SPREAD: f64 = 1.5;
/// Most repeats `--repeats` takes.
pub const MAX_REPEATS: u32 = 100;

/// A group of benchmarks.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// Memory copy by block size, method and cache state.
    Copy,
    /// The RFC 1071 Internet checksum by frame size and method.
    Checksum,
    /// One packet through each send path.
    Send,
    /// One packet through each receive path.
    Receive,
}

impl Part {
    /// Every part, in report order.
    pub const ALL: [Self; 4] = [Self::Copy, Self::Checksum, Self::Send, Self::Receive];

    /// `copy`, `checksum`, `send`, `receive`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Copy => "copy",
            Self::Checksum => "checksum",
            Self::Send => "send",
            Self::Receive => "receive",
        }
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Part {
    type Err = CeilingsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| CeilingsError::UnknownPart(s.to_string()))
    }
}

/// Whether a copy's data was in cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Cache {
    /// The same source and destination every time: in cache when they fit.
    Hot,
    /// Each copy on memory not touched since [`Config::cold_arena_bytes`]
    /// were: from DRAM.
    Cold,
}

/// What `linerate ceilings` was asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// A few-second version: fewer sizes, less work per repeat.
    pub quick: bool,
    /// Timed repeats per benchmark (None: 3 quick, 7 otherwise).
    pub repeats: Option<u32>,
    /// Parts to run (empty: all).
    pub parts: Vec<Part>,
    /// Copy block and checksum sizes, bytes, instead of the default lists
    /// (empty: the defaults); the packet paths keep their frame sizes.
    pub sizes: Vec<u64>,
}

/// The largest copy block or checksum length `sizes` may ask (the default
/// copy list's largest block).
pub const MAX_SIZE_BYTES: u64 = 64 << 20;

/// A request that cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CeilingsError {
    /// `--repeats` out of range.
    #[error("--repeats must be 1 to {MAX_REPEATS}, got {0}")]
    Repeats(u32),
    /// An unknown part name.
    #[error("unknown part '{0}' (copy, checksum, send, receive)")]
    UnknownPart(String),
    /// A size out of range.
    #[error("--sizes: {0} B is outside 1 B to {MAX_SIZE_BYTES} B")]
    Size(u64),
}

/// The validated procedure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The few-second version.
    pub quick: bool,
    /// Parts to run, in report order.
    pub parts: Vec<Part>,
    /// Timed repeats per benchmark.
    pub repeats: u32,
    /// Untimed repeats before them (page faults, caches, frequency).
    pub warmups: u32,
    /// Copy block sizes, bytes.
    pub copy_blocks: Vec<u64>,
    /// Checksum lengths, bytes.
    pub checksum_frames: Vec<u32>,
    /// Frame sizes of the packet paths, bytes.
    pub packet_frames: Vec<u32>,
    /// Bytes one repeat of a copy or checksum moves (at least one block).
    pub bytes_per_repeat: u64,
    /// Packets one repeat of a packet path sends or receives.
    pub packets_per_repeat: u64,
}

/// Most operations in one repeat (a 64-byte operation repeated this often
/// takes a few milliseconds).
const MAX_OPS_PER_REPEAT: u64 = 1 << 22;

impl Config {
    /// The procedure for `req`.
    pub fn new(req: &Request) -> Result<Self, CeilingsError> {
        let repeats = req.repeats.unwrap_or(if req.quick { 3 } else { 7 });
        if repeats == 0 || repeats > MAX_REPEATS {
            return Err(CeilingsError::Repeats(repeats));
        }
        let mut parts = if req.parts.is_empty() {
            Part::ALL.to_vec()
        } else {
            req.parts.clone()
        };
        parts.sort();
        parts.dedup();
        const KIB: u64 = 1024;
        const MIB: u64 = 1024 * KIB;
        let (mut copy_blocks, mut checksum_frames, packet_frames) = if req.quick {
            (
                vec![64, 1518, 64 * KIB, MIB, 64 * MIB],
                vec![64, 1518, 9000],
                vec![64],
            )
        } else {
            (
                vec![
                    64,
                    256,
                    1518,
                    4 * KIB,
                    16 * KIB,
                    64 * KIB,
                    256 * KIB,
                    MIB,
                    4 * MIB,
                    16 * MIB,
                    64 * MIB,
                ],
                vec![64, 128, 256, 512, 1024, 1518, 4096, 9000],
                vec![64, 1518],
            )
        };
        if !req.sizes.is_empty() {
            if let Some(&bad) = (req.sizes.iter()).find(|&&b| b == 0 || b > MAX_SIZE_BYTES) {
                return Err(CeilingsError::Size(bad));
            }
            let mut sizes = req.sizes.clone();
            sizes.sort_unstable();
            sizes.dedup();
            // Checked above: at most MAX_SIZE_BYTES, which fits a u32.
            checksum_frames = (sizes.iter())
                .map(|&b| u32::try_from(b).unwrap_or(u32::MAX))
                .collect();
            copy_blocks = sizes;
        }
        Ok(Self {
            quick: req.quick,
            parts,
            repeats,
            warmups: 1,
            copy_blocks,
            checksum_frames,
            packet_frames,
            bytes_per_repeat: if req.quick { 2 * MIB } else { 64 * MIB },
            packets_per_repeat: if req.quick { 4096 } else { 100_000 },
        })
    }

    /// Whether `part` runs.
    pub fn runs(&self, part: Part) -> bool {
        self.parts.contains(&part)
    }

    /// Operations in one repeat of an operation on `bytes_per_op` bytes.
    pub fn ops_per_repeat(&self, bytes_per_op: u64) -> u64 {
        (self.bytes_per_repeat / bytes_per_op.max(1)).clamp(1, MAX_OPS_PER_REPEAT)
    }

    /// The size of each of the source and destination arenas that cold
    /// copies walk through: four times the last-level cache (assumed 32 MiB
    /// when unknown) and four times the largest block, at least 64 MiB.
    pub fn cold_arena_bytes(&self, llc_bytes: Option<u64>) -> u64 {
        let largest = self.copy_blocks.iter().copied().max().unwrap_or(0);
        (4 * llc_bytes.unwrap_or(32 << 20))
            .max(4 * largest)
            .max(64 << 20)
    }
}

/// One benchmark's timed repeats, as `linerate-io` measured them.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Which part.
    pub part: Part,
    /// The method (`copy_from_slice`, `rep movsb`, `avx2`, `sendmmsg` …).
    pub method: String,
    /// Cache state (copies).
    pub cache: Option<Cache>,
    /// Bytes each operation handles.
    pub bytes_per_op: u64,
    /// The frame size a packet path's operation sends or receives (None:
    /// derived from `bytes_per_op`).
    pub frame_bytes: Option<u32>,
    /// Operations per repeat.
    pub ops_per_repeat: u64,
    /// Elapsed time of each timed repeat, ns.
    pub repeat_ns: Vec<u64>,
    /// Energy over the timed repeats (where RAPL is).
    pub energy: Option<Energy>,
}

/// Median, least and greatest of the repeats.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spread {
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Least.
    pub min: f64,
    /// Greatest.
    pub max: f64,
}

impl Spread {
    /// The spread of `values` (all zero when empty).
    pub fn of(values: &[f64]) -> Self {
        let mut v: Vec<f64> = values.to_vec();
        v.sort_by(f64::total_cmp);
        let Some((&min, &max)) = v.first().zip(v.last()) else {
            return Self {
                median: 0.0,
                min: 0.0,
                max: 0.0,
            };
        };
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Self { median, min, max }
    }
}

/// One benchmark's figures and verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Ceiling {
    /// Which part.
    pub part: Part,
    /// The method that ran.
    pub method: String,
    /// Cache state (copies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<Cache>,
    /// Bytes per operation.
    pub bytes_per_op: u64,
    /// The frame size one operation stands for.
    pub frame_bytes: u32,
    /// Operations per repeat.
    pub ops_per_repeat: u64,
    /// Each timed repeat's elapsed time, ns.
    pub repeat_ns: Vec<u64>,
    /// Time per operation over the repeats, ns.
    pub ns_per_op: Spread,
    /// Bytes per second at the median.
    pub bytes_per_s: f64,
    /// Frames of `frame_bytes` per second at the median.
    pub frames_per_s: f64,
    /// The Ethernet line rate whose maximum frame rate at `frame_bytes`
    /// equals `frames_per_s` (wire bits: preamble, SFD and IFG included).
    pub line_rate_bits_per_s: f64,
    /// The fastest standard speed (10M … 400G) this sustains at line rate.
    #[serde(default)]
    pub enough_for: Option<String>,
    /// The slowest standard speed it does not (None: all of them sustained).
    #[serde(default)]
    pub not_for: Option<String>,
    /// Energy per operation, µJ (where RAPL is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_uj_per_op: Option<f64>,
}

/// The frame an operation on `bytes` stands for: itself from 64 bytes to a
/// jumbo frame, else a 1518-byte frame (a bulk copy of full frames).
pub fn frame_for(bytes: u64) -> u32 {
    match u32::try_from(bytes) {
        Ok(b) if (64..=MAX_JUMBO_FRAME_BYTES).contains(&b) => b,
        _ => MAX_UNTAGGED_FRAME_BYTES,
    }
}

/// The standard speeds a verdict names, slowest first.
pub fn standard_speeds() -> impl Iterator<Item = (&'static str, BitRate)> {
    ETHERNET_SPEEDS
        .into_iter()
        .filter(|(_, r)| r.bps() <= FASTEST_VERDICT.bps())
}

/// The fastest standard speed whose line-rate frame rate at `frame_bytes`
/// `frames_per_s` reaches, and the slowest it does not (line-rate model).
pub fn verdict(frame_bytes: u32, frames_per_s: f64) -> (Option<String>, Option<String>) {
    let Ok(frame) = Encap::ETHERNET.frame_of_length(frame_bytes, true) else {
        return (None, None);
    };
    let mut enough = None;
    for (name, rate) in standard_speeds() {
        match Row::new(rate, frame) {
            Ok(row) if row.frame_rate.per_s() <= frames_per_s => enough = Some(name.to_string()),
            Ok(_) => return (enough, Some(name.to_string())),
            Err(_) => break,
        }
    }
    (enough, None)
}

/// The UDP payload of an IPv4 datagram in an Ethernet frame of
/// `frame_bytes` (64 → 18, 1518 → 1472): what a socket path's operation
/// sends.
pub fn udp_payload_bytes(frame_bytes: u32) -> u32 {
    Encap::UDP4
        .frame_of_length(frame_bytes, true)
        .map_or(0, |f| f.payload_bytes)
}

impl Ceiling {
    /// The figures of `s`.
    pub fn from_sample(s: &Sample) -> Self {
        let ops = s.ops_per_repeat.max(1) as f64;
        let per_op: Vec<f64> = s.repeat_ns.iter().map(|&ns| ns as f64 / ops).collect();
        let ns_per_op = Spread::of(&per_op);
        let ops_per_s = if ns_per_op.median > 0.0 {
            1e9 / ns_per_op.median
        } else {
            0.0
        };
        let frame_bytes = s.frame_bytes.unwrap_or_else(|| frame_for(s.bytes_per_op));
        let bytes_per_s = ops_per_s * s.bytes_per_op as f64;
        let frames_per_s = match s.frame_bytes {
            Some(_) => ops_per_s,
            None => bytes_per_s / f64::from(frame_bytes),
        };
        let wire_bits = f64::from(frame_bytes + crate::linerate::WIRE_OVERHEAD_BYTES) * 8.0;
        let (enough_for, not_for) = verdict(frame_bytes, frames_per_s);
        let timed_ops = ops * s.repeat_ns.len() as f64;
        let energy_uj_per_op = s
            .energy
            .as_ref()
            .and_then(Energy::joules)
            .filter(|_| timed_ops > 0.0)
            .map(|j| j * 1e6 / timed_ops);
        Self {
            part: s.part,
            method: s.method.clone(),
            cache: s.cache,
            bytes_per_op: s.bytes_per_op,
            frame_bytes,
            ops_per_repeat: s.ops_per_repeat,
            repeat_ns: s.repeat_ns.clone(),
            ns_per_op,
            bytes_per_s,
            frames_per_s,
            line_rate_bits_per_s: frames_per_s * wire_bits,
            enough_for,
            not_for,
            energy_uj_per_op,
        }
    }

    /// Greatest over least time per operation (1 for one repeat).
    pub fn spread_ratio(&self) -> f64 {
        if self.ns_per_op.min > 0.0 {
            self.ns_per_op.max / self.ns_per_op.min
        } else {
            1.0
        }
    }
}

/// A check run before timing: the methods of a part must agree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Check {
    /// Which part.
    pub part: Part,
    /// What was compared.
    pub what: String,
    /// Whether they agreed.
    pub passed: bool,
}

/// A benchmark that did not run, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Skipped {
    /// Which part.
    pub part: Part,
    /// The method.
    pub method: String,
    /// Why it did not run.
    pub reason: String,
}

/// What the host offers the benchmarks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Machine {
    /// The CPU architecture (`x86_64`, `aarch64` …).
    pub arch: String,
    /// The CPU features the methods may use, as detected at run time
    /// (`sse2`, `avx2`, `erms`, `fsrm` …; those present only).
    pub cpu_features: Vec<String>,
    /// Last-level cache size, bytes (sysfs).
    #[serde(default)]
    pub llc_bytes: Option<u64>,
}

/// `linerate ceilings`' result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CeilingsResult {
    /// The few-second version ran.
    pub quick: bool,
    /// The clock of every repeat.
    pub clock: String,
    /// Timed repeats per benchmark.
    pub repeats: u32,
    /// Untimed repeats before them.
    pub warmups: u32,
    /// The CPU and its features.
    pub machine: Machine,
    /// Bytes of each cold-copy arena.
    pub cold_arena_bytes: u64,
    /// Checks run before timing.
    pub checks: Vec<Check>,
    /// Every benchmark's figures.
    pub ceilings: Vec<Ceiling>,
    /// What did not run, and why.
    pub skipped: Vec<Skipped>,
}

impl CeilingsResult {
    /// The result of `samples` measured under `cfg` on `machine`.
    pub fn new(
        cfg: &Config,
        machine: Machine,
        checks: Vec<Check>,
        samples: &[Sample],
        skipped: Vec<Skipped>,
    ) -> Self {
        Self {
            quick: cfg.quick,
            clock: CLOCK.to_string(),
            repeats: cfg.repeats,
            warmups: cfg.warmups,
            cold_arena_bytes: cfg.cold_arena_bytes(machine.llc_bytes),
            machine,
            checks,
            ceilings: samples.iter().map(Ceiling::from_sample).collect(),
            skipped,
        }
    }
}

/// What the result may not be trusted for: a failed check (invalid: the
/// methods compute different things), noisy repeats (warning), skipped
/// benchmarks (info).
pub fn assess(r: &CeilingsResult) -> Vec<Flag> {
    let mut flags = Vec::new();
    for c in r.checks.iter().filter(|c| !c.passed) {
        flags.push(
            Flag::invalid(
                "check_failed",
                format!(
                    "{}: {} disagree; its figures compare unlike things",
                    c.part, c.what
                ),
            )
            .with("part", c.part.name()),
        );
    }
    let noisy: Vec<&Ceiling> = r
        .ceilings
        .iter()
        .filter(|c| c.spread_ratio() > NOISY_SPREAD)
        .collect();
    if let Some(worst) = noisy
        .iter()
        .max_by(|a, b| a.spread_ratio().total_cmp(&b.spread_ratio()))
    {
        flags.push(
            Flag::warning(
                "noisy",
                format!(
                    "{} of {} benchmarks' repeats differ by more than {NOISY_SPREAD}× (worst: {} {} at {} B, {:.1}×): the host was busy; the medians are quoted",
                    noisy.len(),
                    r.ceilings.len(),
                    worst.part,
                    worst.method,
                    worst.bytes_per_op,
                    worst.spread_ratio()
                ),
            )
            .with("noisy_benchmarks", noisy.len())
            .with("worst_spread_ratio", worst.spread_ratio()),
        );
    }
    if !r.skipped.is_empty() {
        let list: Vec<String> = r
            .skipped
            .iter()
            .map(|s| format!("{} {}", s.part, s.method))
            .collect();
        flags.push(
            Flag::info(
                "skipped",
                format!(
                    "not measured here: {} (reasons in the result)",
                    list.join(", ")
                ),
            )
            .with("skipped_benchmarks", r.skipped.len()),
        );
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(part: Part, bytes: u64, frame: Option<u32>, repeat_ns: Vec<u64>) -> Sample {
        Sample {
            part,
            method: "m".into(),
            cache: None,
            bytes_per_op: bytes,
            frame_bytes: frame,
            ops_per_repeat: 1000,
            repeat_ns,
            energy: None,
        }
    }

    #[test]
    fn config() {
        let quick = Config::new(&Request {
            quick: true,
            ..Request::default()
        })
        .unwrap();
        assert_eq!((quick.repeats, quick.parts.len()), (3, 4));
        assert_eq!(quick.ops_per_repeat(64), (2 << 20) / 64);
        assert_eq!(quick.ops_per_repeat(64 << 20), 1);
        assert_eq!(quick.cold_arena_bytes(Some(32 << 20)), 256 << 20);
        assert_eq!(quick.cold_arena_bytes(None), 256 << 20);
        let full = Config::new(&Request {
            repeats: Some(5),
            parts: vec![Part::Receive, Part::Copy, Part::Copy],
            ..Request::default()
        })
        .unwrap();
        assert_eq!(full.parts, vec![Part::Copy, Part::Receive]);
        assert!(full.runs(Part::Copy) && !full.runs(Part::Checksum));
        assert_eq!(full.copy_blocks.first(), Some(&64));
        assert_eq!(full.copy_blocks.last(), Some(&(64 << 20)));
        for bad in [0, 101] {
            let e = Config::new(&Request {
                repeats: Some(bad),
                ..Request::default()
            });
            assert_eq!(e, Err(CeilingsError::Repeats(bad)));
        }
        let sized = Config::new(&Request {
            sizes: vec![1024, 512, 1024],
            ..Request::default()
        })
        .unwrap();
        assert_eq!(sized.copy_blocks, [512, 1024]);
        assert_eq!(sized.checksum_frames, [512, 1024]);
        assert_eq!(sized.packet_frames, full.packet_frames);
        for bad in [0, MAX_SIZE_BYTES + 1] {
            let e = Config::new(&Request {
                sizes: vec![64, bad],
                ..Request::default()
            });
            assert_eq!(e, Err(CeilingsError::Size(bad)));
        }
        assert_eq!("copy".parse::<Part>(), Ok(Part::Copy));
        assert!("memcpy".parse::<Part>().is_err());
        assert_eq!((udp_payload_bytes(64), udp_payload_bytes(1518)), (18, 1472));
    }

    #[test]
    fn spread() {
        let s = Spread::of(&[3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(Spread::of(&[4.0, 1.0, 2.0, 3.0]).median, 2.5);
        assert_eq!(Spread::of(&[]).median, 0.0);
    }

    #[test]
    fn verdicts_follow_the_line_rate_model() {
        // 1518-byte frames: 81,274 frames/s at 1G, 812,744 at 10G.
        assert_eq!(
            verdict(1518, 100_000.0),
            (Some("1G".into()), Some("2.5G".into()))
        );
        assert_eq!(
            verdict(1518, 81_000.0),
            (Some("100M".into()), Some("1G".into()))
        );
        assert_eq!(verdict(64, 1.0), (None, Some("10M".into())));
        assert_eq!(verdict(64, 1e12), (Some("400G".into()), None));
    }

    #[test]
    fn ceiling_from_repeats() {
        // 1000 checksums of 1518 B in 10 µs, 12 µs and 11 µs: 11 ns each.
        let c = Ceiling::from_sample(&sample(
            Part::Checksum,
            1518,
            None,
            vec![10_000, 12_000, 11_000],
        ));
        assert_eq!(c.frame_bytes, 1518);
        assert!((c.ns_per_op.median - 11.0).abs() < 1e-9);
        assert!((c.ns_per_op.min - 10.0).abs() < 1e-9);
        let fps = 1e9 / 11.0;
        assert!((c.frames_per_s - fps).abs() < 1.0);
        assert!((c.bytes_per_s - fps * 1518.0).abs() < 1.0);
        // 90.9 M frames/s of 1538 wire bytes: 1.118 Tbit/s.
        assert!((c.line_rate_bits_per_s - fps * 1538.0 * 8.0).abs() < 1e3);
        assert_eq!(c.enough_for.as_deref(), Some("400G"));
        assert!((c.spread_ratio() - 1.2).abs() < 1e-9);
        // A 64 MiB copy counts 1518-byte frames; a packet path one frame
        // per operation whatever its payload.
        let big = Ceiling::from_sample(&sample(Part::Copy, 64 << 20, None, vec![1_000_000]));
        assert_eq!(big.frame_bytes, 1518);
        assert!((big.frames_per_s - big.bytes_per_s / 1518.0).abs() < 1e-6);
        let pkt = Ceiling::from_sample(&sample(Part::Send, 22, Some(64), vec![1_000_000]));
        assert_eq!(pkt.frame_bytes, 64);
        assert!((pkt.frames_per_s - 1e6).abs() < 1e-6);
        // 1 M frames/s of 64 B: 672 Mbit/s, enough for 100M, not for 1G.
        assert_eq!(pkt.enough_for.as_deref(), Some("100M"));
        assert_eq!(pkt.not_for.as_deref(), Some("1G"));
    }

    #[test]
    fn energy_per_operation() {
        let mut s = sample(Part::Copy, 64, None, vec![1000, 1000]);
        s.energy = Some(Energy::Measured {
            joules: 0.002,
            seconds: 1.0,
            source: "powercap: package-0".into(),
        });
        // 2 mJ over 2000 copies: 1 µJ each.
        let c = Ceiling::from_sample(&s);
        assert!((c.energy_uj_per_op.unwrap() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn assessment() {
        let cfg = Config::new(&Request::default()).unwrap();
        let mut r = CeilingsResult::new(
            &cfg,
            Machine::default(),
            vec![Check {
                part: Part::Checksum,
                what: "scalar and avx2".into(),
                passed: true,
            }],
            &[sample(Part::Copy, 64, None, vec![1000, 1100])],
            Vec::new(),
        );
        assert!(assess(&r).is_empty());
        r.ceilings.push(Ceiling::from_sample(&sample(
            Part::Copy,
            64,
            None,
            vec![1000, 3000],
        )));
        r.checks[0].passed = false;
        r.skipped.push(Skipped {
            part: Part::Send,
            method: "AF_XDP".into(),
            reason: "not root".into(),
        });
        let flags = assess(&r);
        let codes: Vec<&str> = flags.iter().map(|f| f.code.as_str()).collect();
        assert_eq!(codes, ["check_failed", "noisy", "skipped"]);
        assert_eq!(crate::result::exit_code(&flags), 1);
    }
}
