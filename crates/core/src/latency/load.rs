//! Latency under load: the response time's stages while linerate's own
//! throughput flows load the same path, against the same exchanges on an
//! idle path.
//!
//! The load is given as a SPEC (`--load tcp,4,reverse`), comma-separated
//! items in any order, each at most once:
//!
//! | item | meaning | default |
//! | --- | --- | --- |
//! | `tcp`, `udp` | protocol of the load flows | `tcp` |
//! | `N` (1–64) | streams per direction | 1 |
//! | `forward`, `reverse`, `bidir` | who sends, seen from the client | `forward` |
//! | `rate=R` | payload rate per direction, bit/s (`50M`, `1G`) | unpaced |
//! | `size=B` | UDP payload or TCP block, bytes | throughput's |
//!
//! A run measures the exchanges once with no load (the idle phase), then,
//! for each load level (one without `--sweep`; `load-streams`, `load-rate`,
//! `load-direction` sweep it), starts the load, lets it settle, and
//! measures the same exchanges again while it runs. [`LoadLevel`] sets the
//! two side by side: per stage the mean, median and 99th percentile, idle
//! and loaded, and how much each grew. Means are what add up: per exchange
//! the stages add up to the RTT exactly, so the mean RTT's growth is the sum
//! of the stages' mean growths, and [`StageGrowth::share_pct`] says where it
//! went.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{LatencyReport, LatencyRun, Stage, StageSummary};
use crate::result::{Flag, Severity};
use crate::throughput::model::{
    Direction, FlowDir, FlowRole, Protocol, ThroughputResult, MAX_STREAMS,
};
use crate::units::{BitRate, ByteCount};

/// How long the load runs before the loaded exchanges start, unless asked
/// otherwise: long enough for TCP's slow start to fill a queue on any LAN
/// path and for a paced load to reach its rate.
pub const DEFAULT_SETTLE: Duration = Duration::from_secs(2);

/// The longest settle time allowed.
pub const MAX_SETTLE: Duration = Duration::from_secs(60);

/// How long each phase's exchanges run with a load unless a time is given.
pub const DEFAULT_PHASE_TIME: Duration = Duration::from_secs(5);

/// How far the load runs past the end of the loaded exchanges: their
/// last replies (up to the reply timeout) and stamps are collected under
/// load too.
pub const LOAD_TAIL: Duration = Duration::from_millis(1500);

/// A load reaching less than this share of its asked rate is flagged
/// ([`codes::LOAD_RATE_NOT_REACHED`]).
pub const RATE_REACHED_SHARE: f64 = 0.95;

/// The host's CPUs busier than this share of their time during the loaded
/// phase are flagged ([`codes::CPU_SATURATED_UNDER_LOAD`]).
pub const CPU_SATURATED_PCT: f64 = 90.0;

/// Load levels a sweep may make, at most.
pub const MAX_LEVELS: usize = 16;

/// The keys `--sweep` takes with a load: the load's streams, rate and
/// direction.
pub const LOAD_SWEEP_KEYS: [&str; 3] = ["load-streams", "load-rate", "load-direction"];

/// The stages a round trip is made of (each exchange's add up to its RTT):
/// the ones a table of growth shows, in table order.
pub const PARTS: [Stage; 6] = [
    Stage::ClientTx,
    Stage::ResponderRx,
    Stage::ResponderApp,
    Stage::ResponderTx,
    Stage::Network,
    Stage::ClientRx,
];

/// Flag codes of a run under load.
pub mod codes {
    /// The load's measured rate stayed under [`super::RATE_REACHED_SHARE`]
    /// of the rate asked (warning).
    pub const LOAD_RATE_NOT_REACHED: &str = "load_rate_not_reached";
    /// Echo replies were lost while the load ran (warning; counted in the
    /// loaded run, never left out).
    pub const REPLIES_LOST_UNDER_LOAD: &str = "replies_lost_under_load";
    /// The host's CPUs were saturated during the loaded phase: the growth
    /// may be the host's, not the path's (warning).
    pub const CPU_SATURATED_UNDER_LOAD: &str = "cpu_saturated_under_load";
    /// The load did not run through the whole loaded phase, or gave no
    /// result: the loaded figures are not under load (invalid).
    pub const LOAD_NOT_SUSTAINED: &str = "load_not_sustained";
    /// The load's own throughput result carries invalid flags (warning:
    /// the figures beside the latency are not trustworthy).
    pub const LOAD_FLAGGED: &str = "load_flagged";
    /// Every code.
    pub const ALL: [&str; 5] = [
        LOAD_RATE_NOT_REACHED,
        REPLIES_LOST_UNDER_LOAD,
        CPU_SATURATED_UNDER_LOAD,
        LOAD_NOT_SUSTAINED,
        LOAD_FLAGGED,
    ];
}

/// One load: linerate's throughput flows, as a SPEC names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadSpec {
    /// TCP or UDP flows.
    pub protocol: Protocol,
    /// Streams per direction.
    pub streams: u16,
    /// Who sends, seen from the client.
    pub direction: Direction,
    /// Payload rate per direction, bit/s (None: unpaced).
    pub rate_bits_per_s: Option<u64>,
    /// UDP payload or TCP block, bytes (None: throughput's default).
    pub size_bytes: Option<u64>,
}

impl Default for LoadSpec {
    fn default() -> Self {
        Self {
            protocol: Protocol::Tcp,
            streams: 1,
            direction: Direction::Forward,
            rate_bits_per_s: None,
            size_bytes: None,
        }
    }
}

/// Why a load SPEC or its sweep is refused. Messages name the item at
/// fault, never a command-line flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// Nothing given.
    #[error("empty: expected e.g. tcp,4,reverse or udp,1,forward,rate=50M")]
    Empty,
    /// An item that is none of the known forms.
    #[error(
        "'{0}' is not tcp, udp, a stream count, forward, reverse, bidir, rate=RATE or size=BYTES"
    )]
    Unknown(String),
    /// The same kind of item twice.
    #[error("'{item}': the {what} is given twice")]
    Twice {
        /// The second item.
        item: String,
        /// What it sets.
        what: &'static str,
    },
    /// A value out of range or unreadable.
    #[error("'{item}': {reason}")]
    Value {
        /// The item.
        item: String,
        /// What is wrong.
        reason: String,
    },
    /// The sweeps of the load make no levels.
    #[error(transparent)]
    Sweep(crate::sweep::SweepError),
    /// The echo phase is a count, not a time.
    #[error("a run under load is bounded by time (the load runs for a planned time): give a time, not a count")]
    Count,
    /// The exchanges make several configurations or repeats.
    #[error("a run under load measures one configuration once per phase: its sweeps vary the load (load-streams, load-rate, load-direction), and it does not repeat")]
    OneConfiguration,
    /// A settle time out of range.
    #[error("settle time {0:?} is outside 0..=60 s")]
    Settle(Duration),
}

/// `bps` as a SPEC writes it: `50M`, `1G`, `2500k`, or plain bits.
fn rate_text(bps: u64) -> String {
    match bps {
        0 => "0".into(),
        b if b % 1_000_000_000 == 0 => format!("{}G", b / 1_000_000_000),
        b if b % 1_000_000 == 0 => format!("{}M", b / 1_000_000),
        b if b % 1_000 == 0 => format!("{}k", b / 1_000),
        b => b.to_string(),
    }
}

impl fmt::Display for LoadSpec {
    /// The canonical SPEC (`tcp,4,reverse`, `udp,1,forward,rate=50M`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let proto = match self.protocol {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        };
        let dir = match self.direction {
            Direction::Forward => "forward",
            Direction::Reverse => "reverse",
            Direction::Bidir => "bidir",
        };
        write!(f, "{proto},{},{dir}", self.streams)?;
        if let Some(r) = self.rate_bits_per_s {
            write!(f, ",rate={}", rate_text(r))?;
        }
        if let Some(s) = self.size_bytes {
            write!(f, ",size={s}")?;
        }
        Ok(())
    }
}

fn parse_direction(v: &str) -> Option<Direction> {
    match v {
        "forward" => Some(Direction::Forward),
        "reverse" => Some(Direction::Reverse),
        "bidir" => Some(Direction::Bidir),
        _ => None,
    }
}

fn parse_streams(item: &str) -> Result<u16, LoadError> {
    let bad = |reason: String| LoadError::Value {
        item: item.to_string(),
        reason,
    };
    let n: u64 = item.parse().map_err(|_| bad("not a stream count".into()))?;
    match u16::try_from(n) {
        Ok(n) if (1..=MAX_STREAMS).contains(&n) => Ok(n),
        _ => Err(bad(format!("streams must be 1..={MAX_STREAMS}"))),
    }
}

fn parse_rate(item: &str, v: &str) -> Result<u64, LoadError> {
    let r: BitRate = v.parse().map_err(|e| LoadError::Value {
        item: item.to_string(),
        reason: format!("{e}"),
    })?;
    Ok(r.bps())
}

impl FromStr for LoadSpec {
    type Err = LoadError;

    /// Parses a SPEC (see the module's grammar).
    fn from_str(s: &str) -> Result<Self, LoadError> {
        let items: Vec<&str> = s
            .split(',')
            .map(str::trim)
            .filter(|i| !i.is_empty())
            .collect();
        if items.is_empty() {
            return Err(LoadError::Empty);
        }
        let mut spec = Self::default();
        let mut seen: Vec<&'static str> = Vec::new();
        for item in items {
            let lower = item.to_ascii_lowercase();
            let what = if let Some(v) = lower.strip_prefix("rate=") {
                spec.rate_bits_per_s = Some(parse_rate(item, v)?);
                "rate"
            } else if let Some(v) = lower.strip_prefix("size=") {
                let b: ByteCount = v.parse().map_err(|e| LoadError::Value {
                    item: item.to_string(),
                    reason: format!("{e}"),
                })?;
                spec.size_bytes = Some(b.get());
                "size"
            } else if let Some(d) = parse_direction(&lower) {
                spec.direction = d;
                "direction"
            } else if lower == "tcp" || lower == "udp" {
                spec.protocol = if lower == "tcp" {
                    Protocol::Tcp
                } else {
                    Protocol::Udp
                };
                "protocol"
            } else if lower.bytes().all(|b| b.is_ascii_digit()) {
                spec.streams = parse_streams(item)?;
                "stream count"
            } else {
                return Err(LoadError::Unknown(item.to_string()));
            };
            if seen.contains(&what) {
                return Err(LoadError::Twice {
                    item: item.to_string(),
                    what,
                });
            }
            seen.push(what);
        }
        Ok(spec)
    }
}

/// One swept load value applied to a level.
fn apply(spec: &mut LoadSpec, key: &str, v: &str) -> Result<(), String> {
    match key {
        "load-streams" => spec.streams = parse_streams(v).map_err(|e| e.to_string())?,
        "load-rate" => spec.rate_bits_per_s = Some(parse_rate(v, v).map_err(|e| e.to_string())?),
        "load-direction" => {
            spec.direction = parse_direction(&v.to_ascii_lowercase())
                .ok_or_else(|| format!("'{v}' is not forward, reverse or bidir"))?;
        }
        _ => return Err(format!("unknown key '{key}'")),
    }
    Ok(())
}

/// What a run under load does, checked before anything runs.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadPlan {
    /// The load levels, in order: the sweep's points (one without sweeps),
    /// each naming its settings.
    pub levels: Vec<crate::sweep::Point<LoadSpec>>,
    /// How long the load runs before the loaded exchanges start.
    pub settle: Duration,
    /// How long each phase's exchanges run (the echo run's time).
    pub phase: Duration,
}

impl LoadPlan {
    /// The plan for `spec` with `sweeps` (keys [`LOAD_SWEEP_KEYS`]), the
    /// load settling for `settle` (None: [`DEFAULT_SETTLE`]), around an echo
    /// run of `echo` (which must be bounded by time).
    pub fn new(
        spec: LoadSpec,
        sweeps: &[String],
        settle: Option<Duration>,
        echo: &super::Config,
    ) -> Result<Self, LoadError> {
        let settle = settle.unwrap_or(DEFAULT_SETTLE);
        if settle > MAX_SETTLE {
            return Err(LoadError::Settle(settle));
        }
        if echo.variants.len() != 1 || echo.repeat != 1 {
            return Err(LoadError::OneConfiguration);
        }
        let phase = match echo.schedule.until {
            crate::procedure::pingpong::Until::Time(t) => t,
            crate::procedure::pingpong::Until::Count(_) => return Err(LoadError::Count),
        };
        let levels = crate::sweep::expand(spec, sweeps, &LOAD_SWEEP_KEYS, MAX_LEVELS, apply)
            .map_err(LoadError::Sweep)?;
        Ok(Self {
            levels,
            settle,
            phase,
        })
    }

    /// How long the load sends, counted after its settle time: the loaded
    /// phase, its reply timeout, and [`LOAD_TAIL`].
    pub fn load_time(&self, reply_timeout: Duration) -> Duration {
        self.phase
            .saturating_add(reply_timeout)
            .saturating_add(LOAD_TAIL)
    }

    /// The throughput request of one level: its flows sending for
    /// [`Self::load_time`] after an omitted settle time (so the figures
    /// cover the loaded phase, not the ramp), reporting every 0.2 s.
    pub fn request(
        &self,
        spec: &LoadSpec,
        reply_timeout: Duration,
    ) -> crate::throughput::config::Request {
        crate::throughput::config::Request {
            protocol: spec.protocol,
            direction: spec.direction,
            streams: spec.streams,
            duration: self.load_time(reply_timeout),
            size: spec.size_bytes.map(ByteCount::new),
            rate: spec.rate_bits_per_s.map(BitRate::from_bps),
            interval: Duration::from_millis(200),
            omit: self.settle,
            ..crate::throughput::config::Request::default()
        }
    }
}

impl LoadPlan {
    /// The throughput configuration of every level against `target`,
    /// checked before anything runs (the loaded exchanges wait up to
    /// `reply_timeout` for a reply, and the load outlasts them).
    pub fn configs(
        &self,
        target: &crate::throughput::config::Target,
        reply_timeout: Duration,
    ) -> Result<Vec<crate::throughput::config::Config>, crate::throughput::config::ConfigError>
    {
        self.levels
            .iter()
            .map(|l| {
                crate::throughput::config::Config::from_request(
                    target.clone(),
                    &self.request(&l.config, reply_timeout),
                )
            })
            .collect()
    }
}

/// One stage, idle against loaded: the statistics of each phase's stamped
/// exchanges and how much the stage grew (loaded minus idle; negative when
/// it shrank).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StageGrowth {
    /// The stage.
    pub stage: Stage,
    /// Idle mean, ns.
    pub idle_mean_ns: f64,
    /// Loaded mean, ns.
    pub loaded_mean_ns: f64,
    /// Growth of the mean, ns (the means add up, so these add up to the
    /// RTT's).
    pub growth_mean_ns: f64,
    /// Idle median, ns.
    pub idle_p50_ns: u64,
    /// Loaded median, ns.
    pub loaded_p50_ns: u64,
    /// Growth of the median, ns (medians do not add up).
    pub growth_p50_ns: i64,
    /// Idle 99th percentile, ns.
    pub idle_p99_ns: u64,
    /// Loaded 99th percentile, ns.
    pub loaded_p99_ns: u64,
    /// Growth of the 99th percentile, ns.
    pub growth_p99_ns: i64,
    /// This stage's share of the mean RTT's growth, percent (None: the RTT
    /// did not grow; the parts' shares add up to 100 when the stages do).
    pub share_pct: Option<f64>,
}

fn signed(a: u64, b: u64) -> i64 {
    i64::try_from(i128::from(a) - i128::from(b)).unwrap_or(i64::MAX)
}

impl StageGrowth {
    /// `stage` from its idle and loaded summaries; the share of `rtt_growth_ns`.
    fn of(
        stage: Stage,
        idle: &crate::stats::Summary,
        loaded: &crate::stats::Summary,
        rtt_growth_ns: f64,
    ) -> Self {
        let growth = loaded.mean_ns - idle.mean_ns;
        Self {
            stage,
            idle_mean_ns: idle.mean_ns,
            loaded_mean_ns: loaded.mean_ns,
            growth_mean_ns: growth,
            idle_p50_ns: idle.p50_ns,
            loaded_p50_ns: loaded.p50_ns,
            growth_p50_ns: signed(loaded.p50_ns, idle.p50_ns),
            idle_p99_ns: idle.p99_ns,
            loaded_p99_ns: loaded.p99_ns,
            growth_p99_ns: signed(loaded.p99_ns, idle.p99_ns),
            share_pct: (rtt_growth_ns > 0.0).then(|| 100.0 * growth / rtt_growth_ns),
        }
    }
}

/// How well a phase's stages account for its RTT: the mean RTT of the
/// stamped exchanges against the sum of its parts' means.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StageSum {
    /// Mean RTT of the stamped exchanges, ns.
    pub rtt_mean_ns: f64,
    /// Sum of the parts' means ([`PARTS`] present), ns.
    pub parts_mean_ns: f64,
    /// Every part has a sample for every stamped exchange (no stamp missing,
    /// no negative interval): the parts then add up to the RTT exactly,
    /// up to rounding.
    pub complete: bool,
}

impl StageSum {
    /// The sum of `stages`' parts against their RTT (None: no RTT sample).
    pub fn of(stages: &[StageSummary]) -> Option<Self> {
        let get = |s: Stage| stages.iter().find(|x| x.stage == s).map(|x| &x.summary);
        let rtt = get(Stage::Rtt)?;
        let parts: Vec<_> = PARTS.iter().filter_map(|&p| get(p)).collect();
        Some(Self {
            rtt_mean_ns: rtt.mean_ns,
            parts_mean_ns: parts.iter().map(|s| s.mean_ns).sum(),
            complete: !parts.is_empty() && parts.iter().all(|s| s.count == rtt.count),
        })
    }

    /// The RTT left unexplained by the parts, ns.
    pub fn unexplained_ns(&self) -> f64 {
        self.rtt_mean_ns - self.parts_mean_ns
    }
}

/// One direction of the load as measured (by its receiver when it
/// reported, else its sender).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadDirection {
    /// Which way.
    pub direction: FlowDir,
    /// Whether the figures are its receiver's or its sender's.
    pub role: FlowRole,
    /// Payload throughput, bit/s.
    pub bits_per_s: f64,
    /// Share of the line-rate maximum, percent (None: no line rate known).
    pub pct_of_max: Option<f64>,
    /// The time the rate is over, ns.
    pub time_ns: u64,
}

/// The load of one level as its throughput run measured it, over its
/// sending time after the settle time (CLOCK_MONOTONIC of the end that
/// measured; the settle time is left out as throughput's `omit`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadThroughput {
    /// The rate asked per direction, bit/s (None: unpaced).
    pub asked_bits_per_s: Option<u64>,
    /// Each direction that ran.
    pub directions: Vec<LoadDirection>,
    /// The load's own flags (throughput's assessment of its run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<Flag>,
}

impl LoadThroughput {
    /// The figures of a finished load run and its flags.
    pub fn of(result: &ThroughputResult, flags: &[Flag]) -> Self {
        let directions = [FlowDir::Forward, FlowDir::Reverse]
            .into_iter()
            .filter_map(|dir| {
                let f = &result.figures;
                let d = f
                    .direction(dir, FlowRole::Receiver)
                    .or_else(|| f.direction(dir, FlowRole::Sender))?;
                Some(LoadDirection {
                    direction: dir,
                    role: d.role,
                    bits_per_s: d.bits_per_s,
                    pct_of_max: d.pct_of_max,
                    time_ns: d.time_ns,
                })
            })
            .collect();
        Self {
            asked_bits_per_s: result.params.rate_bits_per_s,
            directions,
            flags: flags.to_vec(),
        }
    }
}

/// CPU time of the whole host, from the `cpu` line of `/proc/stat`
/// (jiffies, all CPUs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    /// Every jiffy counted (user … steal).
    pub total: u64,
    /// Idle and waiting for I/O.
    pub idle: u64,
}

impl CpuTimes {
    /// Reads the aggregate `cpu` line of `/proc/stat`'s text.
    pub fn parse(stat: &str) -> Option<Self> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        // user nice system idle iowait irq softirq steal (guest and
        // guest_nice are inside user and nice).
        if v.len() < 8 {
            return None;
        }
        Some(Self {
            total: v[..8].iter().sum(),
            idle: v[3] + v[4],
        })
    }

    /// The share of the CPUs' time that was busy from `self` to `later`,
    /// percent (None: no time passed).
    pub fn busy_pct_until(&self, later: &Self) -> Option<f64> {
        let total = later.total.checked_sub(self.total)?;
        let idle = later.idle.checked_sub(self.idle)?;
        (total > 0).then(|| 100.0 * total.saturating_sub(idle) as f64 / total as f64)
    }
}

/// One load level: its loaded run against the idle one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadLevel {
    /// The swept settings that make this level (empty without sweeps).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<(String, String)>,
    /// The load.
    pub load: LoadSpec,
    /// Its index in the result's `runs` (the loaded exchanges).
    pub run: usize,
    /// The loaded phase's stages (the same as its run's).
    pub loaded: Vec<StageSummary>,
    /// Per stage present in both phases, idle against loaded: the RTT of
    /// the stamped exchanges, then the parts in table order.
    pub growth: Vec<StageGrowth>,
    /// The part whose mean grew most (None: none grew).
    pub grew_most: Option<Stage>,
    /// The idle phase's parts against its RTT.
    pub idle_sum: Option<StageSum>,
    /// The loaded phase's parts against its RTT.
    pub loaded_sum: Option<StageSum>,
    /// The load as measured (None: its run gave no result).
    pub throughput: Option<LoadThroughput>,
    /// Why the load gave no result, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_error: Option<String>,
    /// The load ran through the whole loaded phase (it ended after the
    /// loaded exchanges did).
    pub sustained: bool,
    /// The host's CPUs' busy share during the loaded phase, percent
    /// (`/proc/stat`, every CPU; None when unreadable).
    pub host_cpu_busy_pct: Option<f64>,
}

impl LoadLevel {
    /// The growth row of `stage`, if both phases have it.
    pub fn growth_of(&self, stage: Stage) -> Option<&StageGrowth> {
        self.growth.iter().find(|g| g.stage == stage)
    }

    /// The label of its row: `load=SPEC`.
    pub fn label(&self) -> String {
        format!("load={}", self.load)
    }
}

/// The `load` section of a latency result: the idle phase and each level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadReport {
    /// How long each load ran before its loaded exchanges started, ns.
    pub settle_ns: u64,
    /// Index in the result's `runs` of the idle phase.
    pub idle_run: usize,
    /// The idle phase's stages (the same as its run's).
    pub idle: Vec<StageSummary>,
    /// The clocks: stages on each end's CLOCK_REALTIME stamps (as every
    /// latency run), the load's figures on CLOCK_MONOTONIC of the end that
    /// measured them, CPU busy share from `/proc/stat` jiffies.
    pub clocks: String,
    /// Each load level, in order.
    pub levels: Vec<LoadLevel>,
}

/// What [`LoadReport::clocks`] says.
pub const LOAD_CLOCKS: &str = "stages: CLOCK_REALTIME stamps of each end (kernel SO_TIMESTAMPING and application), every interval on one clock; load throughput: CLOCK_MONOTONIC of the end that measured; host CPU: /proc/stat jiffies";

/// What one level measured, before its derived figures: the loaded run's
/// index and stages, the load's outcome, whether it outlasted the loaded
/// exchanges, and the host's CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelMeasured {
    /// Swept settings of the level.
    pub settings: Vec<(String, String)>,
    /// The load.
    pub load: LoadSpec,
    /// Index of the loaded run.
    pub run: usize,
    /// The load's figures, or why there are none.
    pub throughput: Result<LoadThroughput, String>,
    /// The load outlasted the loaded exchanges.
    pub sustained: bool,
    /// Busy share of the host's CPUs during the loaded phase, percent.
    pub host_cpu_busy_pct: Option<f64>,
}

/// Idle against loaded, per stage: the RTT of the stamped exchanges first,
/// then the parts, each present in both; the part that grew most.
pub fn growth(idle: &LatencyRun, loaded: &LatencyRun) -> (Vec<StageGrowth>, Option<Stage>) {
    let rtt_growth = match (idle.stage(Stage::Rtt), loaded.stage(Stage::Rtt)) {
        (Some(i), Some(l)) => l.mean_ns - i.mean_ns,
        _ => 0.0,
    };
    let rows: Vec<StageGrowth> = std::iter::once(Stage::Rtt)
        .chain(PARTS)
        .filter_map(|s| {
            Some(StageGrowth::of(
                s,
                idle.stage(s)?,
                loaded.stage(s)?,
                rtt_growth,
            ))
        })
        .collect();
    let most = rows
        .iter()
        .filter(|g| g.stage != Stage::Rtt && g.growth_mean_ns > 0.0)
        .max_by(|a, b| a.growth_mean_ns.total_cmp(&b.growth_mean_ns))
        .map(|g| g.stage);
    (rows, most)
}

impl LoadReport {
    /// The section for a result whose `runs[idle_run]` is the idle phase
    /// and whose levels' runs are the loaded phases: every derived figure
    /// computed here, once.
    pub fn build(
        runs: &[LatencyRun],
        idle_run: usize,
        settle: Duration,
        measured: Vec<LevelMeasured>,
    ) -> Option<Self> {
        let idle = runs.get(idle_run)?;
        let levels = measured
            .into_iter()
            .filter_map(|m| {
                let loaded = runs.get(m.run)?;
                let (growth, grew_most) = growth(idle, loaded);
                let (throughput, load_error) = match m.throughput {
                    Ok(t) => (Some(t), None),
                    Err(e) => (None, Some(e)),
                };
                Some(LoadLevel {
                    settings: m.settings,
                    load: m.load,
                    run: m.run,
                    loaded: loaded.stages.clone(),
                    growth,
                    grew_most,
                    idle_sum: StageSum::of(&idle.stages),
                    loaded_sum: StageSum::of(&loaded.stages),
                    throughput,
                    load_error,
                    sustained: m.sustained,
                    host_cpu_busy_pct: m.host_cpu_busy_pct,
                })
            })
            .collect();
        Some(Self {
            settle_ns: u64::try_from(settle.as_nanos()).unwrap_or(u64::MAX),
            idle_run,
            idle: idle.stages.clone(),
            clocks: LOAD_CLOCKS.into(),
            levels,
        })
    }
}

/// The flags of a result's `load` section (none without one): the load
/// not sustained or without a result (invalid), its rate not reached, its
/// own invalid flags, replies lost under load, the host's CPUs saturated
/// (warnings). Each names its level.
pub fn assess(report: &LatencyReport) -> Vec<Flag> {
    let Some(load) = &report.load else {
        return Vec::new();
    };
    let mut flags = Vec::new();
    for level in &load.levels {
        let label = level.label();
        let flag = |f: Flag| f.with("load", level.load.to_string());
        if !level.sustained || level.throughput.is_none() {
            let why = level
                .load_error
                .as_deref()
                .unwrap_or("it ended before the loaded exchanges did");
            flags.push(flag(Flag::invalid(
                codes::LOAD_NOT_SUSTAINED,
                format!("{label}: the load did not run through the loaded phase ({why}): its figures are not under load"),
            )));
        }
        if let Some(t) = &level.throughput {
            if let Some(asked) = t.asked_bits_per_s {
                for d in &t.directions {
                    if d.bits_per_s < RATE_REACHED_SHARE * asked as f64 {
                        flags.push(flag(
                            Flag::warning(
                                codes::LOAD_RATE_NOT_REACHED,
                                format!(
                                    "{label}: the {} load reached {:.1} % of the {} asked",
                                    dir_name(d.direction),
                                    100.0 * d.bits_per_s / asked as f64,
                                    BitRate::from_bps(asked)
                                ),
                            )
                            .with("asked_bits_per_s", asked)
                            .with("measured_bits_per_s", d.bits_per_s),
                        ));
                    }
                }
            }
            let invalid: Vec<&str> = t
                .flags
                .iter()
                .filter(|f| f.severity == Severity::Invalid)
                .map(|f| f.code.as_str())
                .collect();
            if !invalid.is_empty() {
                flags.push(flag(
                    Flag::warning(
                        codes::LOAD_FLAGGED,
                        format!(
                            "{label}: the load's own result is flagged invalid ({}): its figures beside the latency are not trustworthy",
                            invalid.join(", ")
                        ),
                    )
                    .with("load_flags", invalid.join(",")),
                ));
            }
        }
        if let Some(run) = report.runs.get(level.run) {
            if run.counts.lost > 0 {
                let idle_lost = report.runs.get(load.idle_run).map_or(0, |r| r.counts.lost);
                flags.push(flag(
                    Flag::warning(
                        codes::REPLIES_LOST_UNDER_LOAD,
                        format!(
                            "{label}: {} of {} echo replies were lost under load ({idle_lost} idle); the loaded stages are those of the replies that came back",
                            run.counts.lost, run.counts.sent
                        ),
                    )
                    .with("lost_requests", run.counts.lost)
                    .with("sent_requests", run.counts.sent)
                    .with("idle_lost_requests", idle_lost),
                ));
            }
        }
        let cpu_bound = level
            .throughput
            .as_ref()
            .is_some_and(|t| t.flags.iter().any(|f| f.code == THROUGHPUT_CPU_BOUND));
        let busy = level.host_cpu_busy_pct;
        if cpu_bound || busy.is_some_and(|b| b >= CPU_SATURATED_PCT) {
            let mut f = Flag::warning(
                codes::CPU_SATURATED_UNDER_LOAD,
                format!(
                    "{label}: the host's CPUs were saturated during the loaded phase ({}): the host, not the path, may explain the growth",
                    match busy {
                        Some(b) => format!("{b:.0} % busy"),
                        None => "the load was CPU-bound".into(),
                    }
                ),
            )
            .with("load_cpu_bound", cpu_bound);
            if let Some(b) = busy {
                f = f.with("host_cpu_busy_pct", b);
            }
            flags.push(flag(f));
        }
    }
    flags
}

/// Throughput's flag for a flow whose thread was busy all the time.
const THROUGHPUT_CPU_BOUND: &str = "cpu_bound";

fn dir_name(d: FlowDir) -> &'static str {
    match d {
        FlowDir::Forward => "forward",
        FlowDir::Reverse => "reverse",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::{dissect, ClientStamps, ProbeCounts, ResponderStamps, StageStats};

    fn spec(s: &str) -> Result<LoadSpec, LoadError> {
        s.parse()
    }

    #[test]
    fn the_spec_grammar() {
        let s = spec("tcp,4,reverse").unwrap();
        assert_eq!(
            (s.protocol, s.streams, s.direction, s.rate_bits_per_s),
            (Protocol::Tcp, 4, Direction::Reverse, None)
        );
        let s = spec("udp,1,forward,rate=50M").unwrap();
        assert_eq!(s.protocol, Protocol::Udp);
        assert_eq!(s.rate_bits_per_s, Some(50_000_000));
        assert_eq!(s.to_string(), "udp,1,forward,rate=50M");
        // Any order, any case, defaults for what is left out.
        let s = spec(" BIDIR , size=64K ,2").unwrap();
        assert_eq!(s.direction, Direction::Bidir);
        assert_eq!((s.protocol, s.streams), (Protocol::Tcp, 2));
        assert_eq!(s.size_bytes, Some(64 * 1024));
        assert_eq!(spec("tcp").unwrap(), LoadSpec::default());
        assert_eq!(spec("tcp").unwrap().to_string(), "tcp,1,forward");
        // The canonical text reads back.
        let s = spec("udp,8,bidir,rate=2500k,size=100").unwrap();
        assert_eq!(spec(&s.to_string()).unwrap(), s);
        assert_eq!(s.to_string(), "udp,8,bidir,rate=2500k,size=100");
    }

    #[test]
    fn bad_specs_say_which_item_is_wrong() {
        let e = |s: &str| spec(s).unwrap_err().to_string();
        assert!(e("").contains("empty"));
        assert!(e(" , ").contains("empty"));
        assert!(e("tcp,sideways").contains("'sideways' is not tcp, udp"));
        assert!(e("tcp,0").contains("'0': streams must be 1..=64"));
        assert!(e("tcp,65").contains("streams must be 1..=64"));
        assert!(e("tcp,99999999999999999999").contains("not a stream count"));
        assert!(e("tcp,udp").contains("'udp': the protocol is given twice"));
        assert!(e("tcp,2,3").contains("'3': the stream count is given twice"));
        assert!(e("forward,reverse").contains("direction is given twice"));
        assert!(e("udp,rate=fast").contains("'rate=fast'"));
        assert!(e("udp,rate=0").contains("'rate=0'"));
        assert!(e("udp,size=lots").contains("'size=lots'"));
    }

    fn echo(time: Option<Duration>) -> super::super::Config {
        let mut req = super::super::Request::new(
            super::super::Peer::InProcess([127, 0, 0, 1].into()),
            super::super::EchoProtocol::Udp,
        );
        req.time = time;
        super::super::Config::new(&req).unwrap()
    }

    #[test]
    fn a_plan_sweeps_load_levels_and_needs_a_time() {
        let t = Some(Duration::from_secs(3));
        let sweeps = vec!["load-streams=1,4".into(), "load-rate=10M,50M".into()];
        let p = LoadPlan::new(spec("udp").unwrap(), &sweeps, None, &echo(t)).unwrap();
        assert_eq!(p.levels.len(), 4);
        assert_eq!(p.settle, DEFAULT_SETTLE);
        assert_eq!(p.phase, Duration::from_secs(3));
        let last = &p.levels[3];
        assert_eq!(last.config.to_string(), "udp,4,forward,rate=50M");
        assert_eq!(
            crate::sweep::label(&last.settings),
            "load-streams=4 load-rate=50M"
        );
        let r = p.request(&last.config, Duration::from_secs(1));
        assert_eq!(r.omit, DEFAULT_SETTLE);
        assert_eq!(r.duration, Duration::from_millis(5500));
        assert_eq!(r.streams, 4);
        assert_eq!(r.rate, Some(BitRate::from_mbps(50)));
        let e = |sweeps: &[&str], settle: Option<Duration>, time| {
            let sweeps: Vec<String> = sweeps.iter().map(|s| s.to_string()).collect();
            LoadPlan::new(LoadSpec::default(), &sweeps, settle, &echo(time))
                .unwrap_err()
                .to_string()
        };
        assert!(e(&[], None, None).contains("bounded by time"));
        assert!(e(&["spin=on,off"], None, t).contains("unknown key 'spin'"));
        assert!(e(&["load-direction=up"], None, t).contains("'up' is not forward"));
        assert!(e(&["load-streams=0"], None, t).contains("streams must be"));
        assert!(e(&[], Some(Duration::from_secs(61)), t).contains("settle time"));
        let mut two = echo(t);
        two.repeat = 2;
        let e = LoadPlan::new(LoadSpec::default(), &[], None, &two).unwrap_err();
        assert_eq!(e, LoadError::OneConfiguration);
    }

    /// Stamps of one exchange whose network part took `network_ns` and
    /// whose client tx took `tx_ns` (everything else fixed).
    fn exchange(tx_ns: u64, network_ns: u64) -> (ClientStamps, ResponderStamps) {
        // Responder residence: rx 10 µs, app 1 µs, tx 4 µs.
        let send = 1_000;
        let snd = send + tx_ns;
        let r_rx = snd + network_ns / 2;
        let r = ResponderStamps {
            rx_kernel_ns: Some(r_rx),
            rx_app_ns: r_rx + 10_000,
            tx_app_ns: r_rx + 11_000,
            tx_sched_ns: Some(r_rx + 14_000),
            tx_soft_ns: Some(r_rx + 15_000),
        };
        let c_rx = r_rx + 15_000 + (network_ns - network_ns / 2);
        let c = ClientStamps {
            app_send_ns: send,
            tx_sched_ns: Some(snd),
            tx_soft_ns: Some(snd),
            tx_ack_ns: None,
            rx_kernel_ns: Some(c_rx),
            app_recv_ns: c_rx + 5_000,
        };
        (c, r)
    }

    fn run(exchanges: &[(u64, u64)]) -> LatencyRun {
        let mut stats = StageStats::default();
        for &(tx, net) in exchanges {
            let (c, r) = exchange(tx, net);
            stats.record(&dissect(&c, Some(&r), true));
        }
        let n = exchanges.len() as u64;
        let counts = ProbeCounts {
            sent: n,
            received: n,
            lost: 0,
            unexpected: 0,
        };
        LatencyRun::new(64, counts, &stats)
    }

    #[test]
    fn growth_per_stage_from_known_figures() {
        // Idle: 4 µs client tx, 20 µs network. Loaded: the queue adds 1 ms
        // to the network on average, client tx grows by 2 µs.
        let idle = run(&[(4_000, 20_000), (4_000, 20_000)]);
        let loaded = run(&[(6_000, 520_000), (6_000, 1_520_000)]);
        let (rows, most) = growth(&idle, &loaded);
        assert_eq!(most, Some(Stage::Network));
        let g = |s: Stage| *rows.iter().find(|r| r.stage == s).unwrap();
        assert_eq!(rows[0].stage, Stage::Rtt);
        let rtt = g(Stage::Rtt);
        assert!((rtt.growth_mean_ns - 1_002_000.0).abs() < 1e-6, "{rtt:?}");
        let net = g(Stage::Network);
        assert!((net.growth_mean_ns - 1_000_000.0).abs() < 1e-6);
        assert!((net.idle_mean_ns - 20_000.0).abs() < 1e-6);
        let share = net.share_pct.unwrap();
        assert!((share - 100.0 * 1_000_000.0 / 1_002_000.0).abs() < 1e-9);
        let tx = g(Stage::ClientTx);
        assert!((tx.growth_mean_ns - 2_000.0).abs() < 1e-6);
        // Stages that did not change grew by nothing.
        for s in [
            Stage::ResponderRx,
            Stage::ResponderApp,
            Stage::ResponderTx,
            Stage::ClientRx,
        ] {
            assert_eq!(g(s).growth_mean_ns, 0.0, "{s:?}");
            assert_eq!(g(s).growth_p50_ns, 0, "{s:?}");
        }
        // The parts' shares add up to 100 %; their growths to the RTT's.
        let parts: Vec<_> = rows.iter().filter(|r| r.stage != Stage::Rtt).collect();
        let sum: f64 = parts.iter().map(|r| r.share_pct.unwrap()).sum();
        assert!((sum - 100.0).abs() < 1e-9, "{sum}");
        let grown: f64 = parts.iter().map(|r| r.growth_mean_ns).sum();
        assert!((grown - rtt.growth_mean_ns).abs() < 1e-6);
        // Each phase's parts add up to its RTT.
        for r in [&idle, &loaded] {
            let s = StageSum::of(&r.stages).unwrap();
            assert!(s.complete);
            assert!(s.unexplained_ns().abs() < 1e-6, "{s:?}");
        }
        // Nothing grew: no stage grew most, no shares.
        let (rows, most) = growth(&idle, &idle);
        assert_eq!(most, None);
        assert!(rows.iter().all(|r| r.share_pct.is_none()));
    }

    #[test]
    fn host_cpu_busy_share_from_proc_stat() {
        let a = CpuTimes::parse("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8\n").unwrap();
        assert_eq!(
            a,
            CpuTimes {
                total: 1000,
                idle: 850
            }
        );
        let b = CpuTimes::parse("cpu  190 0 50 800 60 0 0 0 0 0").unwrap();
        assert!((a.busy_pct_until(&b).unwrap() - 90.0).abs() < 1e-9);
        assert_eq!(a.busy_pct_until(&a), None);
        assert_eq!(CpuTimes::parse("cpu 1 2 3"), None);
        assert_eq!(CpuTimes::parse("intr 5"), None);
    }

    fn report(lost: u64, t: Result<LoadThroughput, String>, busy: f64) -> LatencyReport {
        let idle = run(&[(4_000, 20_000)]);
        let mut loaded = run(&[(4_000, 90_000)]);
        loaded.counts.lost = lost;
        loaded.counts.sent += lost;
        let runs = vec![idle, loaded];
        let m = LevelMeasured {
            settings: Vec::new(),
            load: spec("udp,rate=100M").unwrap(),
            run: 1,
            throughput: t,
            sustained: true,
            host_cpu_busy_pct: Some(busy),
        };
        let load = LoadReport::build(&runs, 0, DEFAULT_SETTLE, vec![m]);
        LatencyReport {
            target: "x".into(),
            protocol: crate::latency::EchoProtocol::Udp,
            responder: crate::latency::Responder::Reflector,
            clock: "CLOCK_REALTIME".into(),
            timestamp_source: "software".into(),
            hardware_timestamps: "none".into(),
            same_clock: true,
            kernel_stamps: true,
            ipv6: false,
            link_bits_per_s: None,
            link_emulation: None,
            runs,
            host_load: None,
            spread: Vec::new(),
            load,
        }
    }

    fn forward(bps: f64, flags: Vec<Flag>) -> LoadThroughput {
        LoadThroughput {
            asked_bits_per_s: Some(100_000_000),
            directions: vec![LoadDirection {
                direction: FlowDir::Forward,
                role: FlowRole::Receiver,
                bits_per_s: bps,
                pct_of_max: None,
                time_ns: 1,
            }],
            flags,
        }
    }

    fn codes_of(r: &LatencyReport) -> Vec<String> {
        assess(r).into_iter().map(|f| f.code).collect()
    }

    #[test]
    fn flags_of_a_load() {
        let ok = report(0, Ok(forward(99e6, Vec::new())), 50.0);
        assert!(codes_of(&ok).is_empty());
        let l = &ok.load.as_ref().unwrap().levels[0];
        assert_eq!(l.grew_most, Some(Stage::Network));
        assert_eq!(l.label(), "load=udp,1,forward,rate=100M");
        let slow = report(0, Ok(forward(90e6, Vec::new())), 50.0);
        assert_eq!(codes_of(&slow), [codes::LOAD_RATE_NOT_REACHED]);
        let lost = report(3, Ok(forward(99e6, Vec::new())), 50.0);
        let f = assess(&lost);
        assert_eq!(f[0].code, codes::REPLIES_LOST_UNDER_LOAD);
        assert_eq!(f[0].evidence["lost_requests"], 3);
        let busy = report(0, Ok(forward(99e6, Vec::new())), 97.0);
        assert_eq!(codes_of(&busy), [codes::CPU_SATURATED_UNDER_LOAD]);
        let bound = Flag::warning(THROUGHPUT_CPU_BOUND, "sender busy");
        let bound = report(0, Ok(forward(99e6, vec![bound])), 10.0);
        assert_eq!(codes_of(&bound), [codes::CPU_SATURATED_UNDER_LOAD]);
        let bad = Flag::invalid("incomplete", "cut short");
        let flagged = report(0, Ok(forward(99e6, vec![bad])), 10.0);
        assert_eq!(codes_of(&flagged), [codes::LOAD_FLAGGED]);
        let gone = report(0, Err("connection refused".into()), 10.0);
        let f = assess(&gone);
        assert_eq!(f[0].code, codes::LOAD_NOT_SUSTAINED);
        assert_eq!(crate::result::exit_code(&f), 1);
        assert!(f[0].message.contains("connection refused"));
        for code in codes::ALL {
            assert!(crate::result::is_snake_case(code), "{code}");
        }
    }
}
