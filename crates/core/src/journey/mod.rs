//! The packet journey through the kernel (`linerate journey`): IDT AN-367's
//! Table 5 (a frame followed through a Linux bridge, step by step, with the
//! time of each step) redone with today's tracepoints on any bed.
//!
//! linerate sends its own probes (UDP, TCP or ICMP echo, [`Proto`]) from host
//! a to host b; each probe's
//! payload length is chosen so that no two probes in flight share a length
//! at any layer ([`Config::probe_payload`]). The tracer (in `linerate_io`)
//! records kernel tracepoints system-wide with their real skb addresses, and
//! [`follow`] assembles each probe's path: events whose length is one of the
//! probe's, then every event on the same skb addresses (qdisc, kfree), the NET_RX softirq that preceded each receive on its CPU, and the
//! two user-space stamps (sendto called, recvfrom returned with the probe's
//! sequence number). [`summarise`] turns the paths into the table: one row per
//! step in path order with the time from `sendto()` (median, p90, p99 over
//! the probes), the gaps between steps named in words, drops with their
//! kernel drop reasons, and rule-based hints.
//!
//! Clock: every time is CLOCK_MONOTONIC (`bpf_ktime_get_ns` in the `tp_btf`
//! programs' records, perf `use_clockid` for tracepoint samples, `clock_gettime` for the user stamps), so steps in different
//! namespaces and on different CPUs compare directly.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod assess;
pub mod btf;
mod event;
pub mod filter;
pub mod format;
pub mod iface;
mod path;
pub mod record;
mod responder;

pub use assess::{assess, codes, hints};
pub use event::{
    left_out, not_for, tracepoints, Decoder, Event, FilterKind, Headers, Kept, Point, Selection,
    Tracepoint, NET_RX_VEC, TRACEPOINTS,
};
pub use path::{attribute, follow, summarise, Device, ProbePath, ProbeSent, Summary, ATTRIBUTED};
pub use responder::{responder_stages, ResponderAt, ResponderKernel};

/// Schema name of the JSON document.
pub const SCHEMA: &str = "linerate.journey";
/// Schema version.
pub const VERSION: u32 = 2;

/// Payload lengths of consecutive probes differ by this many bytes. Lengths
/// are seen at three layers (UDP payload, +28 for IPv4 and UDP headers, +42
/// with Ethernet); 5 divides none of 14, 28 and 42, so no probe's length
/// at one layer equals another in-flight probe's length at another layer.
pub const LEN_STEP: u32 = 5;
/// Distinct lengths in one cycle; probe `i` and `i + LEN_SLOTS` share one, so
/// a probe is looked for only until the next probe of its length is sent.
pub const LEN_SLOTS: u32 = 16;
/// IPv4 + UDP header bytes.
pub const L3_OVERHEAD: u32 = 28;
/// Ethernet + IPv4 + UDP header bytes.
pub const L2_OVERHEAD: u32 = 42;
/// Bytes an IPv6 header has beyond an IPv4 one (40 − 20). Lengths at the
/// IP and Ethernet layers are then 48 and 62 bytes above the UDP payload,
/// which 5 does not divide either.
pub const IPV6_EXTRA: u32 = 20;
/// Smallest base payload: the 18-byte probe header.
pub const MIN_PAYLOAD: u32 = 18;
/// Largest base payload so that the longest probe still fits a 1500-byte MTU.
pub const MAX_PAYLOAD: u32 = 1472 - LEN_STEP * (LEN_SLOTS - 1);
/// The largest probe count.
pub const MAX_COUNT: u32 = 100_000;
/// The highest probe rate (probes per second).
pub const MAX_RATE: f64 = 100_000.0;

/// Which mechanism records the length-filtered tracepoints.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// `tp_btf` programs where the kernel allows them, perf otherwise.
    #[default]
    Auto,
    /// `tp_btf` programs, or an error.
    TpBtf,
    /// perf raw samples only (the in-kernel filter runs after the record
    /// is built).
    Perf,
}

/// What the probes are.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Proto {
    /// UDP datagrams from a to a socket in b.
    #[default]
    Udp,
    /// Data segments of one TCP connection from a to a listener in b (the
    /// handshake carries no data, so no probe length matches it: excluded).
    Tcp,
    /// ICMP echo requests from a, answered by b's kernel; followed there
    /// and back to a.
    Icmp,
}

impl Proto {
    /// `udp`, `tcp`, `icmp`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Tcp => "tcp",
            Self::Icmp => "icmp",
        }
    }

    /// Parses `--proto`.
    pub fn parse(s: &str) -> Result<Self, ConfigError> {
        match s {
            "udp" => Ok(Self::Udp),
            "tcp" => Ok(Self::Tcp),
            "icmp" => Ok(Self::Icmp),
            other => Err(ConfigError::Proto(other.to_string())),
        }
    }
}

/// TCP header bytes without options.
pub const TCP_HEADER: u32 = 20;
/// The TCP timestamp option as Linux sends it (NOP, NOP, TS: 12 bytes).
pub const TCP_TIMESTAMPS: u32 = 12;

/// What a journey does.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Payload of the first probe (UDP payload bytes, at least 18).
    pub payload_bytes: u32,
    /// Probes to send.
    pub count: u32,
    /// Probes per second.
    pub rate_pps: f64,
    /// The UDP port the receiver listens on in host b.
    pub port: u16,
    /// SO_RCVBUF of the receiver; with it the receiver reads only after the
    /// last probe was sent, so a small buffer fills as behind a slow
    /// application.
    pub rcvbuf_bytes: Option<u32>,
    /// How long each half of the tracer-cost measurement runs (0: skipped).
    pub cost_ns: u64,
    /// Also open the tracepoints that record every packet of the host
    /// (softirq NET_RX, sk_data_ready, qdisc): more steps, a costlier tracer.
    pub all_events: bool,
    /// How long after a probe's send its events are still looked for (at
    /// most until the next probe of the same length is sent).
    pub window_ns: u64,
    /// How the length-filtered tracepoints are recorded.
    pub backend: Backend,
    /// The probes' protocol.
    pub proto: Proto,
    /// TCP: the option bytes of a data segment (12 with timestamps, the
    /// Linux default; 0 without), read from the bed before sending.
    pub tcp_option_bytes: u32,
    /// IPv6 probes (the bed's 2001:2::/48 addresses) instead of IPv4.
    pub ipv6: bool,
}

/// Why a configuration cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// `--size` out of range.
    #[error("--size must be {MIN_PAYLOAD}..={MAX_PAYLOAD} bytes (each probe's length adds a multiple of {LEN_STEP}), got {0}")]
    Size(u32),
    /// `--size` out of range for IPv6 probes.
    #[error("--size must be {MIN_PAYLOAD}..={max} bytes with -6 (each probe's length adds a multiple of {LEN_STEP}), got {0}", max = MAX_PAYLOAD - IPV6_EXTRA)]
    Size6(u32),
    /// `--count` out of range.
    #[error("--count must be 1..={MAX_COUNT}, got {0}")]
    Count(u32),
    /// `--rate` out of range.
    #[error("--rate must be above 0 and at most {MAX_RATE} probes/s, got {0}")]
    Rate(f64),
    /// `--proto` unknown.
    #[error("--proto must be udp, tcp or icmp, got {0:?}")]
    Proto(String),
    /// A flag that only UDP probes take.
    #[error("--rcvbuf applies to UDP probes only (--proto udp)")]
    RcvbufNotUdp,
}

impl Config {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(MIN_PAYLOAD..=MAX_PAYLOAD).contains(&self.payload_bytes) {
            return Err(ConfigError::Size(self.payload_bytes));
        }
        if self.payload_bytes > self.max_payload() {
            return Err(ConfigError::Size6(self.payload_bytes));
        }
        if !(1..=MAX_COUNT).contains(&self.count) {
            return Err(ConfigError::Count(self.count));
        }
        if !(self.rate_pps > 0.0 && self.rate_pps <= MAX_RATE) {
            return Err(ConfigError::Rate(self.rate_pps));
        }
        if self.rcvbuf_bytes.is_some() && self.proto != Proto::Udp {
            return Err(ConfigError::RcvbufNotUdp);
        }
        Ok(())
    }

    /// Bytes a probe's IP packet adds to its payload: the IP header (IPv4
    /// 20, IPv6 40) and the transport header (UDP 8, ICMP echo 8, TCP 20 +
    /// options).
    pub fn l3_overhead(&self) -> u32 {
        let v6 = if self.ipv6 { IPV6_EXTRA } else { 0 };
        v6 + match self.proto {
            Proto::Udp | Proto::Icmp => L3_OVERHEAD,
            Proto::Tcp => 20 + TCP_HEADER + self.tcp_option_bytes,
        }
    }

    /// TCP header bytes of a probe's segment (0 for UDP and ICMP probes).
    pub fn tcp_header(&self) -> u32 {
        match self.proto {
            Proto::Tcp => TCP_HEADER + self.tcp_option_bytes,
            Proto::Udp | Proto::Icmp => 0,
        }
    }

    /// The largest base payload: the longest probe still fits a 1500-byte
    /// MTU over IPv4 or IPv6.
    pub fn max_payload(&self) -> u32 {
        if self.ipv6 {
            MAX_PAYLOAD - IPV6_EXTRA
        } else {
            MAX_PAYLOAD
        }
    }

    /// Bytes a probe's Ethernet frame adds to its payload.
    pub fn l2_overhead(&self) -> u32 {
        self.l3_overhead() + L2_OVERHEAD - L3_OVERHEAD
    }

    /// The UDP payload length of probe `seq`.
    pub fn probe_payload(&self, seq: u64) -> u32 {
        // `seq % LEN_SLOTS` < 16: the cast cannot truncate.
        self.payload_bytes + LEN_STEP * (seq % u64::from(LEN_SLOTS)) as u32
    }

    /// The range of `len` values any probe shows at any layer, for the
    /// in-kernel filters.
    pub fn len_range(&self) -> (u32, u32) {
        (
            self.payload_bytes,
            self.payload_bytes + LEN_STEP * (LEN_SLOTS - 1) + self.l2_overhead(),
        )
    }

    /// Nanoseconds between probes.
    pub fn interval_ns(&self) -> u64 {
        (1e9 / self.rate_pps).round() as u64
    }
}

/// Median, p90 and p99 of a set of durations (nearest rank), ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Quantiles {
    /// Median.
    pub median_ns: i64,
    /// 90th percentile.
    pub p90_ns: i64,
    /// 99th percentile.
    pub p99_ns: i64,
}

impl Quantiles {
    /// The quantiles of `values` (None when empty).
    pub fn of(values: &mut [i64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable();
        let at = |q: f64| {
            let rank = (q * values.len() as f64).ceil() as usize;
            values[rank.clamp(1, values.len()) - 1]
        };
        Some(Self {
            median_ns: at(0.5),
            p90_ns: at(0.9),
            p99_ns: at(0.99),
        })
    }
}

/// One row of the table: a tracepoint on a device, in path order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Step {
    /// `net:netif_receive_skb`, `user:sendto`…
    pub tracepoint: String,
    /// The same as a stable code.
    pub point: Point,
    /// The device (none for events without one, such as kfree_skb).
    pub dev: Option<String>,
    /// The namespace: the bed's namespace holding `dev` (for events without a
    /// device, that of the step before).
    pub netns: Option<String>,
    /// The bed role of that namespace (`a`, `dut`, `b`).
    pub role: Option<String>,
    /// The CPUs it ran on, over the probes.
    pub cpus: Vec<u32>,
    /// Probes in which it was seen.
    pub packets: u64,
    /// Time from the sender's sendto() call (`--iface`: from the packet's
    /// first event).
    pub from_send: Quantiles,
    /// True for an event without an skb (a FIB lookup, a NAPI poll, the
    /// NET_RX softirq), attributed to the probes by CPU and time, not by
    /// skb address.
    pub by_cpu_and_time: bool,
}

/// The time between two consecutive steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Gap {
    /// Index of the earlier step in `steps`.
    pub from: usize,
    /// Index of the later step.
    pub to: usize,
    /// What the kernel does in between, in words.
    pub what: String,
    /// Probes that showed both steps.
    pub packets: u64,
    /// The gap's duration over those probes.
    pub duration: Quantiles,
}

/// Drops of probes at one place, for one reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DropSite {
    /// The kernel's drop reason (`enum skb_drop_reason` name from the
    /// kfree_skb tracepoint's format).
    pub reason: String,
    /// The last step the dropped probes passed (`net:netif_receive_skb on lr-b`).
    pub after: String,
    /// The namespace of that step.
    pub netns: Option<String>,
    /// Address of the dropping code (kfree_skb's `location`), hex.
    pub location: Option<String>,
    /// Probes dropped there.
    pub count: u64,
}

/// Drops counted by (reason, step after, namespace, location).
pub(crate) type DropCounts = BTreeMap<(String, String, Option<String>, Option<String>), u64>;

impl DropSite {
    /// The sites of `counts`, most drops first.
    pub(crate) fn from_counts(counts: DropCounts) -> Vec<Self> {
        let mut v: Vec<Self> = counts
            .into_iter()
            .map(|((reason, after, netns, location), count)| Self {
                reason,
                after,
                netns,
                location,
                count,
            })
            .collect();
        v.sort_by_key(|d| std::cmp::Reverse(d.count));
        v
    }
}

/// A rule-based tuning hint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hint {
    /// Stable code (`gro`, `rps`, `sock_rcvqueue_full`…).
    pub code: String,
    /// The hint.
    pub message: String,
}

/// How many probes were followed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ProbeCounts {
    /// Probes sent.
    pub sent: u64,
    /// Probes seen from their first transmit in host a to their delivery to
    /// the socket in host b.
    pub followed_end_to_end: u64,
    /// Probes the receiver read.
    pub received: u64,
    /// Probes seen dropped (kfree_skb on their skb).
    pub dropped: u64,
    /// Probes neither followed end to end nor seen dropped.
    pub lost_from_view: u64,
    /// Probes whose skb address changed on the way (a copy or clone).
    pub address_changed: u64,
    /// Samples the kernel could not write because a ring was full.
    pub ring_lost_samples: u64,
}

/// How the events without an skb were attributed to probes (see
/// [`attribute`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Attribution {
    /// How, in words.
    pub method: String,
    /// Events attributed to a probe.
    pub attributed: u64,
    /// FIB lookups inside the brackets of several probes: attributed to none.
    pub ambiguous: u64,
    /// Events recorded inside no probe's bracket (other traffic on a CPU
    /// while a probe armed it, a lookup in another namespace, or a receive
    /// the tracer did not follow).
    pub unattributed: u64,
}

/// The tracer and what the kernel offered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TracerInfo {
    /// How events were recorded.
    pub method: String,
    /// What recorded the length-filtered tracepoints (`tp_btf` programs,
    /// or perf raw samples).
    pub backend: Backend,
    /// Tracepoints run as `tp_btf` programs.
    pub tp_btf_programs: Vec<String>,
    /// Why `tp_btf` programs were not used where they were wanted (the
    /// tracer fell back to perf).
    pub fallback: Option<String>,
    /// The clock of every time in the result.
    pub clock: String,
    /// Tracepoints opened (`net/netif_receive_skb`…).
    pub opened: Vec<String>,
    /// Optional tracepoints this kernel lacks.
    pub missing: Vec<String>,
    /// Tracepoints not opened, each with why (`SYSTEM/NAME: why`): those
    /// that record every packet of the host (`--all-events` opens them),
    /// and those not used at all.
    pub left_out: Vec<String>,
    /// In-kernel filters set (`net/net_dev_queue: len >= 100 && len <= 187`).
    pub filters: Vec<String>,
    /// Whether the kernel has kprobes (a `kprobe_events` file in tracefs).
    pub kprobes: bool,
    /// Why there are no function-level steps.
    pub function_level: String,
    /// True when linerate mounted tracefs itself (at /sys/kernel/tracing).
    pub mounted_tracefs: bool,
    /// Ring buffer bytes per CPU.
    pub ring_bytes_per_cpu: u64,
    /// CPUs traced (one ring each).
    pub cpus: u32,
    /// Runs of the journey's own `tp_btf` programs the kernel skipped
    /// because the program was already running on that CPU (a tracepoint
    /// hit inside its own run), per tracepoint with any: their events are
    /// missing. `bpf_prog_info.recursion_misses` (counted whether or not
    /// the BPF statistics are on), read when tracing ends.
    #[serde(default)]
    pub recursion_misses: BTreeMap<String, u64>,
}

/// The tracer's own cost, measured on the bed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cost {
    /// UDP payload bytes of the load datagrams.
    pub datagram_bytes: u32,
    /// One datagram in this many has a probe's length (the others are
    /// filtered out in the kernel, at the cost of running the filter).
    pub traced_one_in: u32,
    /// How long each half ran, ns.
    pub duration_ns: u64,
    /// Datagrams/s the sender pushed through without tracing (sends that
    /// succeeded: on veth the whole path, the receive side included, runs
    /// inside the sender's sendto(), so this is the path's rate).
    pub untraced_pps: f64,
    /// The same while tracing.
    pub traced_pps: f64,
    /// Datagrams/s the receiving application read in host b without tracing
    /// (lower when its socket queue overflowed).
    pub untraced_received_pps: f64,
    /// The same while tracing.
    pub traced_received_pps: f64,
    /// CPU time (user + system, getrusage RUSAGE_THREAD) the sender spent
    /// per datagram without tracing, ns: on veth it includes the receive
    /// path that runs inside its sendto().
    pub untraced_cpu_ns_per_datagram: f64,
    /// The same while tracing.
    pub traced_cpu_ns_per_datagram: f64,
    /// How much slower a CPU-bound sender is with tracing, percent: the
    /// growth of CPU time per datagram (negative: noise). Rates swing with
    /// the host's other load; CPU time per datagram much less.
    pub slower_pct: f64,
    /// What each `tp_btf` program cost during one more traced round, from
    /// the kernel's BPF run statistics (None: perf tracer, or the kernel
    /// would not count).
    #[serde(default)]
    pub programs: Option<ProgramCosts>,
}

/// The `tp_btf` programs' own cost under the cost measurement's load, from
/// the kernel's per-program run statistics (`BPF_ENABLE_STATS`, read with
/// `BPF_OBJ_GET_INFO_BY_FD`): every run counted and timed with
/// `sched_clock` around the program, during one extra traced round (the
/// statistics add two clock reads per run, so that round is not one of the
/// timed ones). The time per run hardly depends on the host's other load,
/// unlike the timed rounds; the runs count other traffic at those
/// tracepoints too. The time the kernel spends reaching the programs (the
/// tracepoint's dispatch) is not in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProgramCosts {
    /// How the figures were taken, in words.
    pub source: String,
    /// Datagrams sent in the round.
    pub datagrams: u64,
    /// One row per program, the costliest first.
    pub programs: Vec<ProgramCost>,
    /// Program runs per datagram sent, every program summed.
    pub runs_per_datagram: f64,
    /// Time in the programs per datagram sent, ns, every program summed.
    pub ns_per_datagram: f64,
    /// An empty program's measured time per run, ns (None: not measured):
    /// what the statistics' own clock reads add to every run's time.
    pub floor_ns_per_run: Option<f64>,
    /// [`ProgramCosts::ns_per_datagram`] less the floor on every run: the
    /// programs' own work per datagram, ns (None: no floor).
    pub ns_per_datagram_over_floor: Option<f64>,
    /// That time as a share of the untraced sender's CPU time per datagram,
    /// percent (0 when that is unknown).
    pub pct_of_untraced_cpu: f64,
}

/// One program's runs and time in [`ProgramCosts`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProgramCost {
    /// The tracepoint it runs on (`SYSTEM/NAME`).
    pub tracepoint: String,
    /// Runs counted (every packet or softirq of the host that reached the
    /// tracepoint, not only the load's).
    pub runs: u64,
    /// Time in those runs, ns.
    pub run_time_ns: u64,
    /// Runs per datagram sent.
    pub runs_per_datagram: f64,
    /// Mean time per run, ns (the floor included).
    pub ns_per_run: f64,
    /// Time per datagram sent, ns.
    pub ns_per_datagram: f64,
    /// Runs the kernel skipped because the program was already running on
    /// that CPU (`bpf_prog_info.recursion_misses`, counted with or without
    /// the statistics on): the events of those runs were not recorded.
    #[serde(default)]
    pub recursion_misses: u64,
}

impl ProgramCosts {
    /// The table from each program's `(tracepoint, runs, run_time_ns,
    /// recursion_misses)` over
    /// `datagrams` datagrams sent, with an empty program's `(runs,
    /// run_time_ns)` as the floor; `untraced_cpu_ns` is the untraced
    /// sender's CPU time per datagram.
    pub fn new(
        source: String,
        datagrams: u64,
        runs: &[(String, u64, u64, u64)],
        floor: Option<(u64, u64)>,
        untraced_cpu_ns: f64,
    ) -> Self {
        let per = |v: u64| {
            if datagrams == 0 {
                0.0
            } else {
                v as f64 / datagrams as f64
            }
        };
        let mut programs: Vec<ProgramCost> = runs
            .iter()
            .map(|(tp, n, t, missed)| ProgramCost {
                tracepoint: tp.clone(),
                runs: *n,
                run_time_ns: *t,
                runs_per_datagram: per(*n),
                ns_per_run: if *n == 0 { 0.0 } else { *t as f64 / *n as f64 },
                ns_per_datagram: per(*t),
                recursion_misses: *missed,
            })
            .collect();
        programs.sort_by(|a, b| b.ns_per_datagram.total_cmp(&a.ns_per_datagram));
        let ns_per_datagram = per(runs.iter().map(|r| r.2).sum());
        let runs_per_datagram = per(runs.iter().map(|r| r.1).sum());
        let floor_ns_per_run = floor
            .filter(|(n, _)| *n > 0)
            .map(|(n, t)| t as f64 / n as f64);
        Self {
            source,
            datagrams,
            runs_per_datagram,
            ns_per_datagram,
            floor_ns_per_run,
            ns_per_datagram_over_floor: floor_ns_per_run.map(|f| {
                programs
                    .iter()
                    .map(|p| (p.ns_per_run - f).max(0.0) * p.runs_per_datagram)
                    .sum()
            }),
            pct_of_untraced_cpu: if untraced_cpu_ns > 0.0 {
                ns_per_datagram / untraced_cpu_ns * 100.0
            } else {
                0.0
            },
            programs,
        }
    }
}

/// One half-round of the cost measurement: datagrams/s sent and received.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// Sends that succeeded, per second.
    pub sent_pps: f64,
    /// Datagrams read by the receiver, per second.
    pub received_pps: f64,
    /// The sender's CPU time per datagram sent, ns.
    pub cpu_ns_per_datagram: f64,
}

impl Cost {
    /// A cost from the two measurements.
    pub fn new(
        datagram_bytes: u32,
        traced_one_in: u32,
        duration_ns: u64,
        untraced: Rates,
        traced: Rates,
    ) -> Self {
        let slower_pct = if untraced.cpu_ns_per_datagram > 0.0 {
            (traced.cpu_ns_per_datagram / untraced.cpu_ns_per_datagram - 1.0) * 100.0
        } else {
            0.0
        };
        Self {
            datagram_bytes,
            traced_one_in,
            duration_ns,
            untraced_pps: untraced.sent_pps,
            traced_pps: traced.sent_pps,
            untraced_received_pps: untraced.received_pps,
            traced_received_pps: traced.received_pps,
            untraced_cpu_ns_per_datagram: untraced.cpu_ns_per_datagram,
            traced_cpu_ns_per_datagram: traced.cpu_ns_per_datagram,
            slower_pct,
            programs: None,
        }
    }
}

/// One event of an example probe's path, for the JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExampleEvent {
    /// The tracepoint.
    pub tracepoint: String,
    /// Time from sendto() (`--iface`: from the packet's first event), ns.
    pub t_ns: i64,
    /// Device.
    pub dev: Option<String>,
    /// CPU.
    pub cpu: Option<u32>,
    /// skb address, hex.
    pub skb: Option<String>,
    /// Length in the record.
    pub len: Option<u32>,
}

/// What `linerate journey` measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JourneyResult {
    /// The bed (`--bed`).
    pub bed: String,
    /// Its topology (`pair`, `bridge`, `router`).
    pub topology: String,
    /// Probe protocol (`udp`).
    pub proto: String,
    /// True for IPv6 probes (`-6`).
    #[serde(default)]
    pub ipv6: bool,
    /// Smallest and largest probe payload, bytes.
    pub payload_bytes: (u32, u32),
    /// Probes per second asked for.
    pub rate_pps: f64,
    /// The tracer.
    pub tracer: TracerInfo,
    /// Probe counts.
    pub probes: ProbeCounts,
    /// How the events without an skb were attributed to probes.
    pub attribution: Attribution,
    /// The table: one row per step, in path order.
    pub steps: Vec<Step>,
    /// Gaps between consecutive steps, largest median first.
    pub gaps: Vec<Gap>,
    /// Drops, most frequent first.
    pub drops: Vec<DropSite>,
    /// Tuning hints.
    pub hints: Vec<Hint>,
    /// The tracer's cost (None: not measured).
    pub cost: Option<Cost>,
    /// The path of the first probe followed end to end, event by event.
    pub example: Vec<ExampleEvent>,
    /// XDP programs on the bed's interfaces and the XDP events seen.
    #[serde(default)]
    pub xdp: XdpReport,
}

/// An XDP program attached to an interface of the bed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct XdpProgram {
    /// The interface.
    pub dev: String,
    /// Its namespace.
    pub netns: String,
    /// Its ifindex (in that namespace).
    pub ifindex: u32,
    /// The attached programs' ids.
    pub prog_ids: Vec<u32>,
    /// How it is attached: `native`, `generic`, `offload` or `multi`.
    pub mode: String,
}

/// XDP events of one kind on one interface during the journey.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct XdpEventCount {
    /// `xdp:xdp_exception`…
    pub tracepoint: String,
    /// The interface's ifindex the event names.
    pub ifindex: Option<i32>,
    /// The bed interfaces with an XDP program and that ifindex (empty:
    /// none; several: namespaces with the same ifindex).
    pub devs: Vec<String>,
    /// The program's action (`XDP_ABORTED`, `XDP_REDIRECT`…).
    pub action: Option<String>,
    /// Events seen (the whole host's, over the journey).
    pub count: u64,
}

/// The journey's XDP part: where programs are attached and what their
/// tracepoints showed. XDP events carry no skb: they are counted per
/// interface and action over the journey, not followed per probe.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct XdpReport {
    /// The bed's interfaces with an XDP program (read from each
    /// namespace's links at the start).
    pub attached: Vec<XdpProgram>,
    /// The events, the most frequent first (empty when none fired or none
    /// was opened).
    pub events: Vec<XdpEventCount>,
    /// Why the bed's links could not be read (then no XDP tracepoint is
    /// opened, and `attached` is empty for want of knowing).
    #[serde(default)]
    pub unread: Option<String>,
}

impl XdpReport {
    /// The report from the programs found and every event recorded (the
    /// non-XDP ones are skipped).
    pub fn new(attached: Vec<XdpProgram>, events: &[Event]) -> Self {
        let mut counts: BTreeMap<(Point, Option<i32>, Option<String>), u64> = BTreeMap::new();
        for e in events.iter().filter(|e| e.point.is_xdp()) {
            *counts
                .entry((e.point, e.ifindex, e.reason.clone()))
                .or_default() += 1;
        }
        let mut events: Vec<XdpEventCount> = counts
            .into_iter()
            .map(|((point, ifindex, action), count)| XdpEventCount {
                tracepoint: point.label().to_string(),
                ifindex,
                devs: attached
                    .iter()
                    .filter(|a| ifindex.and_then(|i| u32::try_from(i).ok()) == Some(a.ifindex))
                    .map(|a| a.dev.clone())
                    .collect(),
                action,
                count,
            })
            .collect();
        events.sort_by_key(|e| std::cmp::Reverse(e.count));
        Self {
            attached,
            events,
            unread: None,
        }
    }
}

/// A journey document as printed by `linerate journey --json`.
pub type JourneyJson = crate::result::Envelope<JourneyResult>;

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn config() -> Config {
        Config {
            payload_bytes: 100,
            count: 10,
            rate_pps: 100.0,
            port: 40000,
            rcvbuf_bytes: None,
            cost_ns: 0,
            all_events: true,
            window_ns: 100_000_000,
            backend: Backend::Auto,
            proto: Proto::Udp,
            tcp_option_bytes: 0,
            ipv6: false,
        }
    }

    #[test]
    fn probe_lengths_never_alias_across_layers() {
        for ipv6 in [true, false] {
            let c = Config { ipv6, ..config() };
            let mut seen = BTreeMap::new();
            for seq in 0..u64::from(LEN_SLOTS) {
                let p = c.probe_payload(seq);
                for len in [p, p + c.l3_overhead(), p + c.l2_overhead()] {
                    assert_eq!(
                        seen.insert(len, seq),
                        None,
                        "len {len} of probe {seq} aliases (ipv6 {ipv6})"
                    );
                }
            }
            let (lo, hi) = c.len_range();
            assert!(seen.keys().all(|l| (lo..=hi).contains(l)));
        }
    }

    #[test]
    fn the_filter_range_covers_every_layer() {
        let c = config();
        assert_eq!(c.probe_payload(u64::from(LEN_SLOTS)), c.probe_payload(0));
        assert_eq!(c.len_range(), (100, 100 + 75 + 42));
        let c6 = Config { ipv6: true, ..c };
        assert_eq!(c6.len_range(), (100, 100 + 75 + 62));
    }

    #[test]
    fn validation() {
        assert!(config().validate().is_ok());
        let bad = |f: fn(&mut Config)| {
            let mut c = config();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(|c| c.payload_bytes = 17).contains("--size"));
        assert!(bad(|c| c.payload_bytes = MAX_PAYLOAD + 1).contains("--size"));
        assert!(bad(|c| {
            c.ipv6 = true;
            c.payload_bytes = MAX_PAYLOAD;
        })
        .contains("with -6"));
        assert!(bad(|c| c.count = 0).contains("--count"));
        assert!(bad(|c| c.rate_pps = 0.0).contains("--rate"));
        assert!(bad(|c| c.rate_pps = f64::NAN).contains("--rate"));
    }

    #[test]
    fn each_protocol_has_its_header_lengths() {
        let mut c = config();
        assert_eq!((c.l3_overhead(), c.l2_overhead()), (28, 42));
        c.proto = Proto::Icmp;
        assert_eq!((c.l3_overhead(), c.l2_overhead()), (28, 42));
        c.proto = Proto::Tcp;
        c.tcp_option_bytes = TCP_TIMESTAMPS;
        assert_eq!((c.l3_overhead(), c.l2_overhead()), (52, 66));
        assert_eq!(c.tcp_header(), 32);
        assert_eq!(c.len_range(), (100, 100 + 75 + 66));
        c.tcp_option_bytes = 0;
        assert_eq!(c.l3_overhead(), 40);
        c.ipv6 = true;
        assert_eq!((c.l3_overhead(), c.l2_overhead()), (60, 74));
        c.proto = Proto::Udp;
        assert_eq!((c.l3_overhead(), c.l2_overhead()), (48, 62));
        assert_eq!(c.max_payload(), MAX_PAYLOAD - 20);
        c.ipv6 = false;
        c.proto = Proto::Tcp;
        for p in [Proto::Udp, Proto::Tcp, Proto::Icmp] {
            assert_eq!(Proto::parse(p.name()), Ok(p));
        }
        assert!(Proto::parse("sctp")
            .unwrap_err()
            .to_string()
            .contains("--proto"));
        c.rcvbuf_bytes = Some(1);
        assert_eq!(c.validate(), Err(ConfigError::RcvbufNotUdp));
        c.proto = Proto::Udp;
        assert!(c.validate().is_ok());
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let mut v: Vec<i64> = (1..=100).collect();
        let q = Quantiles::of(&mut v).unwrap();
        assert_eq!((q.median_ns, q.p90_ns, q.p99_ns), (50, 90, 99));
        assert_eq!(Quantiles::of(&mut []), None);
        let q = Quantiles::of(&mut [7]).unwrap();
        assert_eq!((q.median_ns, q.p99_ns), (7, 7));
    }

    #[test]
    fn cost_ratio() {
        let r = |sent_pps, received_pps, cpu_ns_per_datagram| Rates {
            sent_pps,
            received_pps,
            cpu_ns_per_datagram,
        };
        let c = Cost::new(1472, 100, 1, r(1.0, 1.0, 2000.0), r(3.0, 2.0, 2100.0));
        assert!((c.slower_pct - 5.0).abs() < 1e-9);
        assert_eq!(c.traced_received_pps, 2.0);
        assert_eq!(
            Cost::new(1472, 100, 1, r(0.0, 0.0, 0.0), r(1.0, 1.0, 1.0)).slower_pct,
            0.0
        );
    }

    #[test]
    fn xdp_events_are_counted_per_interface_and_action() {
        let prog = |dev: &str, netns: &str, ifindex| XdpProgram {
            dev: dev.into(),
            netns: netns.into(),
            ifindex,
            prog_ids: vec![7],
            mode: "native".into(),
        };
        let ev = |point, ifindex, act: &str| {
            let mut e = Event::user(point, 1, 0, 0);
            e.seq = None;
            e.len = None;
            e.ifindex = Some(ifindex);
            e.reason = Some(act.into());
            e
        };
        let events = [
            ev(Point::XdpException, 2, "XDP_ABORTED"),
            ev(Point::XdpRedirect, 3, "XDP_REDIRECT"),
            ev(Point::XdpException, 2, "XDP_ABORTED"),
            Event::user(Point::UserRecv, 2, 1, 100),
        ];
        let r = XdpReport::new(vec![prog("lr-b", "lr-t-b", 2)], &events);
        assert_eq!(r.events.len(), 2);
        let top = &r.events[0];
        assert_eq!(
            (top.tracepoint.as_str(), top.count, top.action.as_deref()),
            ("xdp:xdp_exception", 2, Some("XDP_ABORTED"))
        );
        assert_eq!(top.devs, ["lr-b"]);
        assert!(r.events[1].devs.is_empty());
        assert_eq!(
            XdpReport::new(Vec::new(), &events[3..]),
            XdpReport::default()
        );
    }

    #[test]
    fn program_costs_are_per_datagram_costliest_first() {
        let runs = [
            ("net/net_dev_queue".to_string(), 1000, 20_000, 0),
            ("irq/softirq_entry".to_string(), 3000, 90_000, 2),
            ("napi/napi_poll".to_string(), 0, 0, 0),
        ];
        let c = ProgramCosts::new("stats".into(), 1000, &runs, Some((500, 12_500)), 2200.0);
        let names: Vec<&str> = c.programs.iter().map(|p| p.tracepoint.as_str()).collect();
        assert_eq!(
            names,
            ["irq/softirq_entry", "net/net_dev_queue", "napi/napi_poll"]
        );
        assert_eq!(c.programs[0].runs_per_datagram, 3.0);
        assert_eq!(c.programs[0].ns_per_run, 30.0);
        assert_eq!(c.programs[0].ns_per_datagram, 90.0);
        assert_eq!(c.programs[2].ns_per_run, 0.0);
        assert_eq!(c.programs[0].recursion_misses, 2);
        assert_eq!((c.runs_per_datagram, c.ns_per_datagram), (4.0, 110.0));
        assert!((c.pct_of_untraced_cpu - 5.0).abs() < 1e-9);
        // Floor 25 ns: 5 ns over it on 3 runs, none on net_dev_queue's 20.
        assert_eq!(c.floor_ns_per_run, Some(25.0));
        assert_eq!(c.ns_per_datagram_over_floor, Some(15.0));
        let none = ProgramCosts::new("stats".into(), 0, &runs, Some((0, 0)), 0.0);
        assert_eq!((none.ns_per_datagram, none.pct_of_untraced_cpu), (0.0, 0.0));
        assert_eq!(none.ns_per_datagram_over_floor, None);
    }
}
