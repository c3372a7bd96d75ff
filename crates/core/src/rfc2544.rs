//! `linerate rfc2544`: the typed configuration, the versioned result
//! (schema `linerate.rfc2544`, version 2) and its assessment.
//!
//! The procedures themselves (throughput search, latency, frame loss,
//! back-to-back) are the sans-IO state machines of
//! [`crate::procedure::rfc2544`]; the driver that runs them on real
//! interfaces is `linerate_io::rfc2544`. This module holds what a run is
//! asked to do ([`Config`]), what it found ([`Rfc2544Result`], with the
//! derived figures — L2 bits/s of the throughput, percent of line rate,
//! single-frame bits/s — computed here once) and what the result may not be
//! trusted for ([`assess`]: [`Flag`]s with stable codes).
//!
//! Test-equipment limits are never device loss: a trial in which the
//! generator fell short of the asked rate, or in which the receiver dropped
//! frames itself, is invalid; a figure bounded by such trials is a lower
//! bound of the device's, flagged [`Severity::Invalid`](crate::result::Severity::Invalid) (`generator_limited`,
//! `receiver_limited`).
//!
//! Version 1 documents (written before the result moved here) read into
//! [`Rfc2544Result`]: every field added in version 2 has a default.

use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::calc::SizeList;
use crate::linerate::{Encap, Row, MAX_UNTAGGED_FRAME_BYTES};
use crate::procedure::rfc2544::b2b::BackToBackResult;
use crate::procedure::rfc2544::latency::{single_frame_bits_per_s, LatencyResult};
use crate::procedure::rfc2544::loss::LossResult;
use crate::procedure::rfc2544::throughput::ThroughputResult;
use crate::procedure::rfc2544::{Limit, TraceStep, Verdict};
use crate::result::{Envelope, Flag};
use crate::units::{group_thousands, BitRate};

/// The schema name of the result.
pub const SCHEMA: &str = "linerate.rfc2544";
/// The schema version this code writes. Version 3: sweeps and repeats
/// (each size report's `settings` and `repeat`, the result's `spread`),
/// `host_load` (version-2 documents read back without them).
/// Version 4: the receive path (`receiver`, `receiver_fallback`,
/// `receiver_notes`; version-3 documents read back as AF_PACKET).
/// Version 5: `sender_threads` (version-4 documents read back as one).
pub const VERSION: u32 = 5;

/// The whole JSON document: the envelope around [`Rfc2544Result`].
pub type Rfc2544Json = Envelope<Rfc2544Result>;

/// Smallest test frame (RFC 2544 section 9: 64 bytes).
pub const MIN_FRAME_BYTES: u32 = 64;

/// Which RFC 2544 test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TestKind {
    /// Section 26.1: highest rate with no loss (binary search).
    Throughput,
    /// Section 26.2: latency at the throughput rate.
    Latency,
    /// Section 26.3: loss at 100 %, 90 %, … of line rate.
    Loss,
    /// Section 26.4: longest loss-free burst at line rate.
    B2b,
    /// Seed 003's view: latency of frames sent one at a time, and the
    /// single-frame throughput it implies (frame bits / latency).
    Single,
}

impl TestKind {
    /// The name progress lines use.
    pub fn label(self) -> &'static str {
        match self {
            Self::Throughput => "throughput",
            Self::Latency => "latency",
            Self::Loss => "loss",
            Self::B2b => "back-to-back",
            Self::Single => "single-frame",
        }
    }
}

/// How the frame generator hands frames to the kernel (one of the frame
/// generators; not to be confused with a throughput flow's send path).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum Generator {
    /// AF_PACKET `sendmmsg`, batches of 64 (through the qdisc unless bypassed).
    #[default]
    #[serde(rename = "af_packet_sendmmsg")]
    Sendmmsg,
    /// AF_PACKET PACKET_TX_RING, TPACKET_V2 (through the qdisc unless bypassed).
    #[serde(rename = "af_packet_tx_ring_v2")]
    TxRing,
    /// AF_XDP in copy mode, queue 0: bypasses the qdisc, so it is refused on
    /// a shaped interface.
    #[serde(rename = "af_xdp_copy")]
    AfXdp,
    /// XDP live frames: `BPF_PROG_TEST_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES`
    /// running `bpf_redirect(ifindex)`; every frame of one call is the same
    /// bytes. Bypasses the qdisc, so it is refused on a shaped interface.
    #[serde(rename = "xdp_live_frames")]
    XdpLive,
}

impl Generator {
    /// The name results carry.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sendmmsg => "af_packet_sendmmsg",
            Self::TxRing => "af_packet_tx_ring_v2",
            Self::AfXdp => "af_xdp_copy",
            Self::XdpLive => "xdp_live_frames",
        }
    }

    /// What the generator is, for people (with PACKET_QDISC_BYPASS or not).
    pub fn describe(self, qdisc_bypass: bool) -> &'static str {
        match (self, qdisc_bypass) {
            (Self::XdpLive, _) => "XDP live frames, no qdisc",
            (Self::AfXdp, _) => "AF_XDP copy mode, no qdisc",
            (Self::TxRing, false) => "AF_PACKET TX ring, through the egress qdisc",
            (Self::TxRing, true) => "AF_PACKET TX ring, qdisc bypassed",
            (Self::Sendmmsg, false) => "AF_PACKET sendmmsg, through the egress qdisc",
            (Self::Sendmmsg, true) => "AF_PACKET sendmmsg, qdisc bypassed",
        }
    }

    /// What the clock of every latency figure is with this generator.
    pub fn latency_clock(self) -> &'static str {
        if self == Self::XdpLive {
            LATENCY_CLOCK_LIVE
        } else {
            LATENCY_CLOCK
        }
    }
}

/// The clock of latency figures (AF_PACKET and AF_XDP generators).
pub const LATENCY_CLOCK: &str = "CLOCK_REALTIME on one host: tx stamped in user space as the frame is handed to the kernel (sendmmsg or TX-ring slot), rx = kernel software receive timestamp (SO_TIMESTAMPNS)";
/// The clock of latency figures with XDP live frames.
pub const LATENCY_CLOCK_LIVE: &str = "CLOCK_REALTIME on one host: tx stamped in user space just before the BPF_PROG_TEST_RUN call (one stamp per call: per frame up to 10,000 fps, else the first frame of each call to arrive), rx = kernel software receive timestamp (SO_TIMESTAMPNS)";

/// Which generators to try: one, or the fastest that works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GeneratorChoice {
    /// XDP live frames, else AF_XDP, else AF_PACKET sendmmsg; why a faster
    /// one was not used is reported.
    Auto,
    /// This one only.
    Only(Generator),
}

impl GeneratorChoice {
    /// The generators to try, in order.
    pub fn candidates(self) -> Vec<Generator> {
        match self {
            Self::Auto => vec![Generator::XdpLive, Generator::AfXdp, Generator::Sendmmsg],
            Self::Only(g) => vec![g],
        }
    }
}

/// How the receiver counts the frames that arrive.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum RxPath {
    /// AF_PACKET `recvmmsg` batches: every frame copied to user space,
    /// parsed and checked (sequence, checksum, latency); its socket queue
    /// overflows above some hundred thousand frames/s on a small host (its
    /// drops make a trial invalid, never device loss).
    #[default]
    #[serde(rename = "af_packet_recvmmsg")]
    AfPacket,
    /// An XDP program on the receiving interface counts test frames per
    /// stream in the driver's receive path and drops them, passing a sample
    /// (every frame up to [`SAMPLE_MAX_FPS`], else one in 2^k) up to an
    /// AF_PACKET socket for the per-frame checks.
    #[serde(rename = "xdp_count")]
    XdpCount,
}

impl RxPath {
    /// The name results carry.
    pub fn name(self) -> &'static str {
        match self {
            Self::AfPacket => "af_packet_recvmmsg",
            Self::XdpCount => "xdp_count",
        }
    }
}

/// Which receive paths to try: one, or the fastest that works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RxChoice {
    /// The XDP counter, else AF_PACKET (said in the result and flagged).
    Auto,
    /// This one only.
    Only(RxPath),
}

impl RxChoice {
    /// The receive paths to try, in order.
    pub fn candidates(self) -> Vec<RxPath> {
        match self {
            Self::Auto => vec![RxPath::XdpCount, RxPath::AfPacket],
            Self::Only(p) => vec![p],
        }
    }
}

/// Highest rate at which the XDP counter passes every frame to the sampling
/// AF_PACKET socket (well below where that socket starts dropping).
pub const SAMPLE_MAX_FPS: f64 = 50_000.0;

/// The XDP counter's sample mask for a trial at `fps`: a frame goes up for
/// the per-frame checks when `count & mask == 0`, so one in `mask + 1`
/// (a power of two keeping the sample at or below [`SAMPLE_MAX_FPS`]).
pub fn sample_mask(fps: f64) -> u64 {
    if fps.is_nan() || fps <= SAMPLE_MAX_FPS {
        return 0;
    }
    let every = (fps / SAMPLE_MAX_FPS).ceil().min(1e18) as u64;
    every.next_power_of_two() - 1
}

/// The received frames and duplicates of a trial, from the receiver's
/// per-frame sequence counts (of every frame, or of a sample) and, with the
/// XDP counter, its count of every test frame of the stream.
///
/// Without a count, received = distinct sequence numbers. With a count,
/// received = count − the duplicates the sample saw (with every frame
/// sampled, exactly the distinct frames; with a sample, duplicates that the
/// sample missed count as received). With `identical` frames (XDP live
/// frames: one sequence number per call) duplicates cannot be told apart:
/// every frame counts as received, none as a duplicate.
pub fn received_frames(
    seq: &crate::stats::sequence::SeqCounts,
    count: Option<u64>,
    identical: bool,
) -> (u64, u64) {
    match (count, identical) {
        (None, true) => (seq.received_unique + seq.duplicates, 0),
        (None, false) => (seq.received_unique, seq.duplicates),
        (Some(n), true) => (n, 0),
        (Some(n), false) => (n.saturating_sub(seq.duplicates), seq.duplicates),
    }
}

/// What the XDP counter can and cannot verify (notes of the result).
pub fn xdp_count_notes() -> Vec<String> {
    vec![
        "receiver: an XDP program on the receiving interface counts every test frame (Ethernet, IPv4 without options or IPv6, UDP, magic \"LRT1\", per stream id) in the driver's receive path and drops it; received frames = that count".to_string(),
        format!("per-frame checks (IP/UDP checksum, sequence: duplicates and reordering, latency) on a sample passed up to an AF_PACKET socket: every frame up to {} fps, else one in 2^k frames; duplicates and reordering outside the sample are not seen, latency is the sample's", group_thousands(SAMPLE_MAX_FPS as u64)),
    ]
}

/// One end: an interface, in a namespace or in the caller's.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Endpoint {
    /// Namespace name (`/run/netns/NAME`) or `None` for the caller's.
    pub netns: Option<String>,
    /// Interface name.
    pub iface: String,
}

impl Endpoint {
    /// Interface `iface` in namespace `netns` (`None`: the caller's).
    pub fn new(netns: Option<&str>, iface: &str) -> Self {
        Self {
            netns: netns.map(str::to_string),
            iface: iface.to_string(),
        }
    }

    /// The namespace for people ("this namespace" for the caller's).
    pub fn netns_label(&self) -> &str {
        self.netns.as_deref().unwrap_or("this namespace")
    }
}

/// A flag value that does not parse; the message says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

/// A MAC address such as `02:00:00:00:00:01`.
pub fn parse_mac(s: &str) -> Result<[u8; 6], ParseError> {
    let bad = || {
        ParseError(format!(
            "'{s}' is not a MAC address (like 02:00:00:00:00:01)"
        ))
    };
    let parts: Vec<&str> = s.trim().split(':').collect();
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(parts) {
        if p.len() != 2 {
            return Err(bad());
        }
        *m = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(mac)
}

/// A frame rate of at least 1 frame/s.
pub fn parse_fps(s: &str) -> Result<f64, ParseError> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 1.0 => Ok(v),
        _ => Err(ParseError(format!(
            "'{s}' is not a rate of at least 1 frame/s"
        ))),
    }
}

/// A percentage from 0 to 100, with or without `%`.
pub fn parse_pct(s: &str) -> Result<f64, ParseError> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| ParseError(format!("'{s}' is not a percentage")))?;
    if !(0.0..=100.0).contains(&v) || !v.is_finite() {
        return Err(ParseError(format!("'{s}' is not between 0 and 100")));
    }
    Ok(v)
}

/// The frame sizes of `list`, and whether IPv6 changed them: with IPv6 the
/// RFC 2544 list starts at 84 bytes instead of 64 (RFC 5180 section 5:
/// 64-byte frames cannot carry IPv6 + UDP + a test header).
pub fn frame_sizes(list: &SizeList, ipv6: bool) -> (Vec<u32>, bool) {
    let mut sizes = list.sizes();
    let replace = ipv6 && *list == SizeList::Rfc2544;
    if replace {
        sizes.retain(|&s| s != 64);
        sizes.insert(0, 84);
    }
    (sizes, replace)
}

/// What a run is asked to do, validated ([`Config::validate`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Sending end.
    pub tx: Endpoint,
    /// Receiving end.
    pub rx: Endpoint,
    /// The other end of the sending veth, when known (a bed's cable): XDP
    /// live frames need NAPI (GRO) there, which the driver has the caller
    /// turn on for the run.
    pub tx_peer: Option<Endpoint>,
    /// Source address of the frames.
    pub src_ip: IpAddr,
    /// Destination address of the frames (same family).
    pub dst_ip: IpAddr,
    /// Destination MAC (a router's port), `None`: the receiver's own.
    pub dst_mac: Option<[u8; 6]>,
    /// Line speed of the line-rate model.
    pub link: BitRate,
    /// Tests, in order.
    pub tests: Vec<TestKind>,
    /// Frame sizes, header to FCS.
    pub sizes: Vec<u32>,
    /// Trial time of rate trials.
    pub trial: Duration,
    /// Throughput search resolution, percent of line rate.
    pub resolution_pct: f64,
    /// Loss that still passes the throughput test, percent.
    pub loss_tolerance_pct: f64,
    /// Complete throughput searches.
    pub repeats: u32,
    /// Latency trials.
    pub latency_trials: u32,
    /// Back-to-back searches.
    pub b2b_repeats: u32,
    /// Longest back-to-back burst, as time at line rate.
    pub b2b_max: Duration,
    /// Rate of the single-frame test, frames/s.
    pub single_rate_fps: f64,
    /// Step of the frame-loss curve, percent of line rate.
    pub loss_step_pct: f64,
    /// Wait for residual frames after each trial.
    pub drain: Duration,
    /// Extra pause between trials.
    pub settle: Duration,
    /// Repeats of an invalid trial before it counts as an equipment limit.
    pub retries: u32,
    /// How long the generator ceiling is measured before each size.
    pub ceiling_time: Duration,
    /// Which generator(s).
    pub generator: GeneratorChoice,
    /// PACKET_QDISC_BYPASS.
    pub qdisc_bypass: bool,
    /// Which receive path(s).
    pub rx_path: RxChoice,
    /// Sender threads of the `sendmmsg` and TX-ring generators, each with
    /// its own socket; `None`: one per CPU the process may run on
    /// ([`sender_threads`]).
    pub sender_threads: Option<u32>,
}

/// The sender threads `generator` runs with: the AF_PACKET generators
/// (`sendmmsg`, TX ring) `asked` or else one per CPU (`cpus`, as trafgen
/// starts one process per CPU), at least one; AF_XDP and XDP live frames
/// send from one.
pub fn sender_threads(generator: Generator, asked: Option<u32>, cpus: u32) -> u32 {
    match generator {
        Generator::Sendmmsg | Generator::TxRing => asked.unwrap_or(cpus).max(1),
        Generator::AfXdp | Generator::XdpLive => 1,
    }
}

/// What several sender threads mean for the per-frame checks (a note of
/// the result; none for one thread).
pub fn sender_notes(threads: u32) -> Vec<String> {
    if threads <= 1 {
        return Vec::new();
    }
    vec![format!(
        "{threads} sender threads, each with its own socket, take the next due frames of one schedule (a batch of up to 64 consecutive sequence numbers at a time): the rate is the sum's, every frame has its own number, but two threads' batches can reach the link interleaved, so reordering counts include the generator's own; the ceiling uses every thread, a trial as many as its rate needs at 70 % of the ceiling's rate per thread"
    )]
}

/// Why a [`Config`] cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The line speed is zero.
    #[error("the line speed must be above zero")]
    ZeroLink,
    /// A frame below 64 bytes.
    #[error("{0}: test frames are at least 64 bytes")]
    FrameTooSmall(u32),
    /// A frame size the line-rate model refuses.
    #[error("{0}: {1}")]
    Frame(u32, String),
    /// No frame size or no test.
    #[error("nothing to run: no {0}")]
    Empty(&'static str),
    /// A percentage outside 0..=100.
    #[error("{0} {1} is not between 0 and 100")]
    Pct(&'static str, f64),
    /// The addresses are of two families.
    #[error("source {0} and destination {1} are of different families")]
    Family(IpAddr, IpAddr),
    /// A time or step that must be above zero (a zero trial measures
    /// nothing; a zero resolution narrows forever).
    #[error("must be above 0")]
    Zero(&'static str),
}

impl ConfigError {
    /// The setting at fault (`frames`, `link`), for the caller to name its
    /// own flag or field.
    pub fn setting(&self) -> Option<&'static str> {
        match self {
            Self::FrameTooSmall(_) | Self::Frame(..) => Some("frames"),
            Self::ZeroLink => Some("link"),
            Self::Zero(setting) => Some(setting),
            _ => None,
        }
    }
}

impl Config {
    /// Checks every setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.link.bps() == 0 {
            return Err(ConfigError::ZeroLink);
        }
        if self.sizes.is_empty() {
            return Err(ConfigError::Empty("frame size"));
        }
        if self.tests.is_empty() {
            return Err(ConfigError::Empty("test"));
        }
        for &s in &self.sizes {
            Encap::ETHERNET
                .frame_of_length(s, s > MAX_UNTAGGED_FRAME_BYTES)
                .map_err(|e| ConfigError::Frame(s, e.to_string()))?;
            if s < MIN_FRAME_BYTES {
                return Err(ConfigError::FrameTooSmall(s));
            }
        }
        if self.trial.is_zero() {
            return Err(ConfigError::Zero("trial"));
        }
        if self.resolution_pct <= 0.0 {
            return Err(ConfigError::Zero("resolution"));
        }
        if self.loss_step_pct <= 0.0 {
            return Err(ConfigError::Zero("loss-step"));
        }
        for (name, v) in [
            ("resolution", self.resolution_pct),
            ("loss tolerance", self.loss_tolerance_pct),
            ("loss step", self.loss_step_pct),
        ] {
            if !(0.0..=100.0).contains(&v) {
                return Err(ConfigError::Pct(name, v));
            }
        }
        if self.src_ip.is_ipv4() != self.dst_ip.is_ipv4() {
            return Err(ConfigError::Family(self.src_ip, self.dst_ip));
        }
        if self.sender_threads == Some(0) {
            return Err(ConfigError::Zero("threads"));
        }
        Ok(())
    }

    /// 4 or 6.
    pub fn ip_version(&self) -> u8 {
        if self.src_ip.is_ipv4() {
            4
        } else {
            6
        }
    }

    /// The line rate of `frame_bytes` frames on this link, frames/s.
    pub fn line_rate_fps(&self, frame_bytes: u32) -> Result<f64, ConfigError> {
        let frame = Encap::ETHERNET
            .frame_of_length(frame_bytes, frame_bytes > MAX_UNTAGGED_FRAME_BYTES)
            .map_err(|e| ConfigError::Frame(frame_bytes, e.to_string()))?;
        let row = Row::new(self.link, frame)
            .map_err(|e| ConfigError::Frame(frame_bytes, e.to_string()))?;
        Ok(row.frame_rate.per_s())
    }
}

/// Which piece of test equipment made trials invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Equipment {
    /// The generator fell short of the asked rate.
    Generator,
    /// The receiver dropped frames itself (its queue overflowed).
    Receiver,
    /// Both, in different trials.
    GeneratorAndReceiver,
}

impl Equipment {
    /// Upper-case, for tables (`GENERATOR-LIMITED` …).
    pub fn limited_label(self) -> &'static str {
        match self {
            Self::Generator => "GENERATOR-LIMITED",
            Self::Receiver => "RECEIVER-LIMITED",
            Self::GeneratorAndReceiver => "GENERATOR- AND RECEIVER-LIMITED",
        }
    }

    /// The equipment that fell short (`None`: neither).
    fn of(generator: bool, receiver: bool) -> Option<Self> {
        match (generator, receiver) {
            (false, false) => None,
            (true, false) => Some(Self::Generator),
            (false, true) => Some(Self::Receiver),
            (true, true) => Some(Self::GeneratorAndReceiver),
        }
    }

    fn generator(self) -> bool {
        matches!(self, Self::Generator | Self::GeneratorAndReceiver)
    }

    fn receiver(self) -> bool {
        matches!(self, Self::Receiver | Self::GeneratorAndReceiver)
    }
}

/// Whether a trial was invalid (the test equipment, not the device).
pub fn is_invalid(step: &TraceStep) -> bool {
    matches!(
        step.verdict,
        Verdict::InvalidRetry | Verdict::GeneratorLimit
    )
}

/// The equipment behind the invalid trials of `steps` (`None`: none was).
/// A trial in which the receiver dropped frames is the receiver's; one in
/// which it did not, the generator's (it fell short of the rate).
pub fn equipment(steps: &[TraceStep]) -> Option<Equipment> {
    let invalid = || steps.iter().filter(|s| is_invalid(s));
    let receiver = invalid().any(|s| s.receiver_drops > 0);
    let generator = invalid().any(|s| s.receiver_drops == 0);
    Equipment::of(generator, receiver)
}

/// The trial log of one test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestTrace {
    /// The test.
    pub test: TestKind,
    /// Every trial.
    pub steps: Vec<TraceStep>,
    /// Trials judged invalid (generator short or receiver drops; absent in
    /// version 1).
    #[serde(default)]
    pub invalid_trials: u64,
    /// The equipment behind those invalid trials (absent in version 1).
    #[serde(default)]
    pub invalid_by: Option<Equipment>,
}

impl TestTrace {
    /// The log of `test`, with its invalid trials counted.
    pub fn new(test: TestKind, steps: Vec<TraceStep>) -> Self {
        Self {
            test,
            invalid_trials: steps.iter().filter(|s| is_invalid(s)).count() as u64,
            invalid_by: equipment(&steps),
            steps,
        }
    }

    /// The equipment behind the trials that set a limit: each
    /// [`Verdict::GeneratorLimit`] trial with the retries just before it
    /// (`None`: no trial did). Unlike [`TestTrace::invalid_by`], a retry
    /// that was then valid does not count: the receiver dropping frames
    /// once at one rate does not make a generator limit at another rate
    /// receiver-limited.
    pub fn limited_by(&self) -> Option<Equipment> {
        // (generator, receiver) of the limits so far, and of the pending
        // retries.
        let (mut limit, mut pending) = ((false, false), (false, false));
        for s in &self.steps {
            let by = (s.receiver_drops == 0, s.receiver_drops > 0);
            match s.verdict {
                Verdict::InvalidRetry => pending = (pending.0 || by.0, pending.1 || by.1),
                Verdict::GeneratorLimit => {
                    limit.0 |= pending.0 || by.0;
                    limit.1 |= pending.1 || by.1;
                    pending = (false, false);
                }
                Verdict::Pass | Verdict::Loss => pending = (false, false),
            }
        }
        Equipment::of(limit.0, limit.1)
    }
}

/// Seed 003's single-frame view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SingleFrame {
    /// Latency of frames sent far apart.
    pub latency: LatencyResult,
    /// Frame bits over the median one-way latency.
    pub single_frame_bits_per_s: Option<f64>,
    /// Streaming throughput (L2 bits/s), when the throughput test ran.
    pub streaming_bits_per_s: Option<f64>,
}

impl SingleFrame {
    /// The view of `latency` for `frame_bytes` frames, beside the streaming
    /// throughput `throughput_fps` (if the throughput test ran before).
    pub fn new(frame_bytes: u32, latency: LatencyResult, throughput_fps: Option<f64>) -> Self {
        Self {
            single_frame_bits_per_s: latency
                .merged
                .and_then(|m| single_frame_bits_per_s(frame_bytes, m.p50_ns)),
            streaming_bits_per_s: throughput_fps.map(|f| l2_bits_per_s(frame_bytes, f)),
            latency,
        }
    }
}

/// Frames per second of `frame_bytes` frames as L2 bits per second
/// (destination MAC to FCS, no preamble or gap).
pub fn l2_bits_per_s(frame_bytes: u32, fps: f64) -> f64 {
    fps * f64::from(frame_bytes) * 8.0
}

/// Everything measured for one frame size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SizeReport {
    /// Frame size, destination MAC to FCS.
    pub frame_bytes: u32,
    /// Line rate at that size (20 B preamble + gap per frame).
    pub line_rate_frames_per_s: f64,
    /// Generator ceiling: frames the kernel accepted per second when offered
    /// as fast as possible (through the egress qdisc, so on a shaped link it
    /// is the shaper's rate).
    pub generator_ceiling_frames_per_s: Option<f64>,
    /// The ceiling, percent of line rate (absent in version 1).
    #[serde(default)]
    pub generator_ceiling_line_rate_pct: Option<f64>,
    /// Section 26.1.
    pub throughput: Option<ThroughputResult>,
    /// The throughput as L2 bits/s (absent in version 1).
    #[serde(default)]
    pub throughput_bits_per_s: Option<f64>,
    /// The throughput, percent of line rate (absent in version 1).
    #[serde(default)]
    pub throughput_line_rate_pct: Option<f64>,
    /// Section 26.2.
    pub latency: Option<LatencyResult>,
    /// The latency test ran at line rate because no throughput was known
    /// before it (section 26.2 asks for the throughput rate; absent in
    /// version 1).
    #[serde(default)]
    pub latency_at_line_rate: bool,
    /// Section 26.3.
    pub loss: Option<LossResult>,
    /// Section 26.4.
    pub back_to_back: Option<BackToBackResult>,
    /// Seed 003's view.
    pub single_frame: Option<SingleFrame>,
    /// Every trial, per test.
    pub trace: Vec<TestTrace>,
    /// Invalid trials of every test together (absent in version 1).
    #[serde(default)]
    pub invalid_trials: u64,
    /// The swept bed settings this report was measured with (empty
    /// without sweeps).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<(String, String)>,
    /// Which run of the suite (1-based; absent without `repeat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
}

impl SizeReport {
    /// A report of `frame_bytes` frames, before any test.
    pub fn new(frame_bytes: u32, line_rate_fps: f64, ceiling_fps: Option<f64>) -> Self {
        Self {
            frame_bytes,
            line_rate_frames_per_s: line_rate_fps,
            generator_ceiling_frames_per_s: ceiling_fps,
            generator_ceiling_line_rate_pct: None,
            throughput: None,
            throughput_bits_per_s: None,
            throughput_line_rate_pct: None,
            latency: None,
            latency_at_line_rate: false,
            loss: None,
            back_to_back: None,
            single_frame: None,
            trace: Vec::new(),
            invalid_trials: 0,
            settings: Vec::new(),
            repeat: None,
        }
    }

    /// The point and frame size it belongs to (`mtu=9000, 1518 B`).
    pub fn point_label(&self) -> String {
        match self.settings.is_empty() {
            true => format!("{} B", self.frame_bytes),
            false => format!(
                "{}, {} B",
                crate::sweep::label(&self.settings),
                self.frame_bytes
            ),
        }
    }

    /// The throughput found, frames/s.
    pub fn throughput_fps(&self) -> Option<f64> {
        self.throughput.as_ref().and_then(|t| t.throughput_fps)
    }

    /// Computes the derived figures from the measured ones (call after the
    /// last test).
    pub fn derive(&mut self) {
        let pct = |fps: f64| {
            (self.line_rate_frames_per_s > 0.0).then(|| 100.0 * fps / self.line_rate_frames_per_s)
        };
        self.generator_ceiling_line_rate_pct = self.generator_ceiling_frames_per_s.and_then(pct);
        let tp = self.throughput_fps();
        self.throughput_bits_per_s = tp.map(|f| l2_bits_per_s(self.frame_bytes, f));
        self.throughput_line_rate_pct = tp.and_then(pct);
        self.invalid_trials = self.trace.iter().map(|t| t.invalid_trials).sum();
    }

    /// The trace of `test`, if it ran.
    pub fn trace_of(&self, test: TestKind) -> Option<&TestTrace> {
        self.trace.iter().find(|t| t.test == test)
    }
}

/// A change the run made to an interface (restored after it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IfaceChange {
    /// Where.
    pub end: Endpoint,
    /// The `ethtool -K` feature (`gro`).
    pub feature: String,
    /// The value set for the run.
    pub on: bool,
    /// Why.
    pub why: String,
}

/// The result of `linerate rfc2544` (version 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rfc2544Result {
    /// Line speed of the line-rate model.
    pub link_bits_per_s: u64,
    /// The generator that ran.
    pub generator: Generator,
    /// Threads the generator sends from, each with its own socket: the
    /// ceiling uses all, a trial as many as its rate needs (absent before
    /// version 5: one).
    #[serde(default = "one_thread")]
    pub sender_threads: u32,
    /// PACKET_QDISC_BYPASS was set.
    pub qdisc_bypass: bool,
    /// Trial time of rate trials, s.
    pub trial_s: f64,
    /// Throughput search resolution, percent of line rate.
    pub resolution_pct: f64,
    /// Loss that passes the throughput test, percent.
    pub loss_tolerance_pct: f64,
    /// What the clock of every latency figure is.
    pub latency_clock: String,
    /// 4 or 6.
    pub ip_version: u8,
    /// With `auto`: why faster generators were not used.
    pub generator_fallback: Option<String>,
    /// What this generator can and cannot verify, and what it changed.
    pub generator_notes: Vec<String>,
    /// Frames whose receive time fell back to a user-space stamp.
    pub rx_user_space_stamps: u64,
    /// How the receiver counted (absent before version 4: AF_PACKET).
    #[serde(default)]
    pub receiver: RxPath,
    /// With `auto`: why the XDP counter was not used (absent when it was,
    /// or when a receive path was asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_fallback: Option<String>,
    /// What this receiver can and cannot verify.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub receiver_notes: Vec<String>,
    /// XDP live frames: whether sent frames are the device's own counter
    /// (absent in version 1).
    #[serde(default)]
    pub sent_from_device_counter: Option<bool>,
    /// Interface settings changed for the run, restored after it (absent in
    /// version 1).
    #[serde(default)]
    pub iface_changes: Vec<IfaceChange>,
    /// The bed's link emulation during the test: which shaper, and what
    /// linerate's emulator counted (absent when not measured on a bed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_emulation: Option<crate::emu::LinkAccount>,
    /// One report per frame size.
    pub sizes: Vec<SizeReport>,
    /// Load from elsewhere during the run (absent in version 2, or when
    /// `/proc` could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_load: Option<crate::hostload::HostLoad>,
    /// With sweeps or repeats: per point and frame size, the median with
    /// min–max of its runs (absent in version 2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spread: Vec<SizeSpread>,
}

fn one_thread() -> u32 {
    1
}

/// One point and frame size run several times (or beside other points).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SizeSpread {
    /// [`SizeReport::point_label`].
    pub label: String,
    /// Runs of it.
    pub runs: u32,
    /// Throughput (26.1), frames/s.
    pub throughput_fps: Option<crate::sweep::Spread>,
    /// Latency (26.2) median, ns.
    pub latency_p50_ns: Option<crate::sweep::Spread>,
    /// Single-frame throughput, L2 bit/s.
    pub single_frame_bits_per_s: Option<crate::sweep::Spread>,
}

/// One run of the suite: its point's settings, its repeat and its document.
pub type SuiteRun = (Vec<(String, String)>, Option<u32>, Rfc2544Json);

/// Runs of the suite (per point of a sweep, per repeat) as one document:
/// the first run's envelope and settings, every run's size reports (each
/// saying its point and repeat), every run's flags (each saying which run
/// raised it) and the spread per point and frame size. `None` without runs.
pub fn combine(runs: Vec<SuiteRun>) -> Option<Rfc2544Json> {
    let mut out: Option<Rfc2544Json> = None;
    for (i, (settings, repeat, mut doc)) in runs.into_iter().enumerate() {
        for s in &mut doc.result.sizes {
            s.settings.clone_from(&settings);
            s.repeat = repeat;
        }
        let mut name = crate::sweep::label(&settings);
        if let Some(r) = repeat {
            name = format!("{name}, run {r}");
        }
        let flags = doc.flags.iter().map(|f| {
            let mut f = f.clone();
            f.message = format!("{name}: {}", f.message);
            f.with("run", i + 1)
        });
        match &mut out {
            None => {
                let flags: Vec<Flag> = flags.collect();
                doc.flags = flags;
                out = Some(doc);
            }
            Some(o) => {
                o.flags.extend(flags);
                o.result.sizes.extend(doc.result.sizes);
            }
        }
    }
    let mut out = out?;
    out.result.spread = spread(&out.result.sizes);
    out.flags.sort_by_key(|f| std::cmp::Reverse(f.severity));
    Some(out)
}

/// The spread per point and frame size, in the order they first appear.
fn spread(sizes: &[SizeReport]) -> Vec<SizeSpread> {
    let mut labels: Vec<String> = Vec::new();
    for s in sizes {
        let l = s.point_label();
        if !labels.contains(&l) {
            labels.push(l);
        }
    }
    labels
        .into_iter()
        .map(|label| {
            let of: Vec<&SizeReport> = sizes.iter().filter(|s| s.point_label() == label).collect();
            SizeSpread {
                runs: u32::try_from(of.len()).unwrap_or(u32::MAX),
                throughput_fps: crate::sweep::Spread::of(
                    of.iter().filter_map(|s| s.throughput_fps()),
                ),
                latency_p50_ns: crate::sweep::Spread::of(
                    of.iter()
                        .filter_map(|s| s.latency.as_ref()?.merged.map(|m| m.p50_ns as f64)),
                ),
                single_frame_bits_per_s: crate::sweep::Spread::of(
                    of.iter()
                        .filter_map(|s| s.single_frame.as_ref()?.single_frame_bits_per_s),
                ),
                label,
            }
        })
        .collect()
}

/// The bed settings `sweeps` make (only bed keys: [`crate::sweep::BED_KEYS`]),
/// one list per point (one empty list without sweeps).
pub fn sweep_points(
    sweeps: &[String],
) -> Result<Vec<crate::sweep::Point<Vec<crate::sweep::BedSetting>>>, crate::sweep::SweepError> {
    crate::sweep::expand(
        Vec::new(),
        sweeps,
        &crate::sweep::BED_KEYS,
        crate::throughput::config::MAX_POINTS,
        |c: &mut Vec<crate::sweep::BedSetting>, k, v| {
            c.push(crate::sweep::BedSetting::parse(k, v)?);
            Ok(())
        },
    )
}

/// The notes of XDP live frames: what they can and cannot verify, and what
/// was changed for them.
pub fn live_notes(counted_by_device: Option<bool>, changes: &[IfaceChange]) -> Vec<String> {
    let mut n = vec![
        "XDP live frames: BPF_PROG_TEST_RUN + BPF_F_TEST_XDP_LIVE_FRAMES running bpf_redirect(tx ifindex); frames skip the egress qdisc".to_string(),
        "up to 10,000 fps one frame per call: sequence numbers, loss, duplicates, reordering and latency per frame".to_string(),
        format!("above 10,000 fps one call per 100 ms carrying that slice's frames as one back-to-back burst at the kernel's speed (largest burst = catch-up burst); {LIVE_IDENTICAL}"),
    ];
    match counted_by_device {
        Some(true) => n.push("sent frames = the sending veth's tx_queue_*_xdp_xmit counter (frames put on the peer's ring); frames it refused (ring full) are not counted as sent".to_string()),
        Some(false) => n.push("sent frames = frames handed to BPF_PROG_TEST_RUN (the device has no xdp_xmit counter, so frames it dropped would count as DUT loss)".to_string()),
        None => {}
    }
    for c in changes {
        n.push(gro_note(c));
    }
    n
}

const LIVE_IDENTICAL: &str = "a call's frames are identical (one sequence number and tx stamp): the receiver counts them, duplicates and reordering within a call cannot be detected, latency is one sample per call (its first frame to arrive)";

fn gro_note(c: &IfaceChange) -> String {
    format!(
        "{} turned {} at the veth peer {} ({}) for the run, {} again after: {}",
        c.feature.to_uppercase(),
        if c.on { "on" } else { "off" },
        c.end.iface,
        c.end.netns_label(),
        if c.on { "off" } else { "on" },
        c.why
    )
}

/// Why GRO is turned on at the veth peer for XDP live frames.
pub const GRO_FOR_LIVE_FRAMES: &str = "veth ndo_xdp_xmit needs NAPI on the peer, or frames vanish";

/// What `result` may not be trusted for, and facts worth knowing.
///
/// Codes: `generator_limited`, `receiver_limited` (invalid: a throughput,
/// burst, loss point or latency the test equipment bounded; the figure is a
/// lower bound, not the device's), `invalid_trials` (warning: trials
/// repeated because the equipment fell short, then valid),
/// `latency_at_line_rate` (warning: latency without a throughput test
/// before it), `rx_user_space_stamps` (warning: latency of some frames from
/// a user-space receive stamp), `generator_fallback` (info: faster
/// generators not used), `live_frames_caveats` (info: what XDP live frames
/// cannot verify), `iface_setting_changed` (info: an interface setting
/// changed for the run and restored), `single_frame_above_line_rate`
/// (invalid: physically impossible), `noisy_host` (warning: other work
/// competed for the CPUs).
pub fn assess(r: &Rfc2544Result) -> Vec<Flag> {
    let mut flags = Vec::new();
    for s in &r.sizes {
        size_flags(s, &mut flags);
    }
    if r.rx_user_space_stamps > 0 {
        flags.push(
            Flag::warning(
                "rx_user_space_stamps",
                format!(
                    "{} frame(s) had no kernel receive timestamp; their latency uses a user-space stamp after recvmmsg (later than the kernel's)",
                    r.rx_user_space_stamps
                ),
            )
            .with("frames", r.rx_user_space_stamps),
        );
    }
    if let Some(why) = &r.generator_fallback {
        flags.push(Flag::info(
            "generator_fallback",
            format!(
                "generator {}: faster generators not used: {why}",
                r.generator.name()
            ),
        ));
    }
    if let Some(why) = &r.receiver_fallback {
        flags.push(Flag::warning(
            "receiver_fallback",
            format!(
                "receiver {}: the XDP counter was not used ({why}); the AF_PACKET receiver drops frames itself at high rates, and trials where it did are invalid (receiver-limited), not device loss",
                r.receiver.name()
            ),
        ));
    }
    if r.generator == Generator::XdpLive {
        let f = Flag::info(
            "live_frames_caveats",
            format!("XDP live frames above 10,000 fps: {LIVE_IDENTICAL}"),
        );
        flags.push(match r.sent_from_device_counter {
            Some(by) => f.with("sent_from_device_counter", by),
            None => f,
        });
    }
    flags.extend(r.host_load.as_ref().and_then(crate::hostload::assess));
    for c in &r.iface_changes {
        flags.push(
            Flag::info("iface_setting_changed", gro_note(c))
                .with("iface", c.end.iface.clone())
                .with("netns", c.end.netns.clone())
                .with("feature", c.feature.clone())
                .with("on", c.on),
        );
    }
    flags
}

fn size_flags(s: &SizeReport, flags: &mut Vec<Flag>) {
    let b = s.frame_bytes;
    if let Some(f) = single_frame_above_line_rate(s) {
        flags.push(f);
    }
    if s.latency.is_some() && s.latency_at_line_rate {
        flags.push(
            Flag::warning(
                "latency_at_line_rate",
                format!("{b}-byte frames: latency measured at line rate, no throughput test ran before it (RFC 2544 section 26.2 asks for the throughput rate)"),
            )
            .with("frame_bytes", b),
        );
    }
    for t in &s.trace {
        let (limited, what): (bool, String) = match t.test {
            TestKind::Throughput => {
                let tp = s.throughput.as_ref();
                (
                    tp.and_then(|t| t.limited_by) == Some(Limit::Generator),
                    format!(
                        "the throughput of {b}-byte frames ({} fps) is a lower bound, the device may do more",
                        s.throughput_fps()
                            .map_or("-".into(), |f| group_thousands(f.round() as u64))
                    ),
                )
            }
            TestKind::B2b => (
                s.back_to_back.as_ref().is_some_and(|b| b.generator_limited),
                format!("back-to-back bursts of {b}-byte frames at line rate could not be sent or received whole"),
            ),
            TestKind::Loss => {
                let rates: Vec<String> = s
                    .loss
                    .iter()
                    .flat_map(|l| &l.points)
                    .filter(|p| p.generator_limited)
                    .map(|p| format!("{:.0} %", p.rate_pct))
                    .collect();
                (
                    !rates.is_empty(),
                    format!(
                        "the frame loss of {b}-byte frames at {} of line rate was not measured",
                        rates.join(", ")
                    ),
                )
            }
            TestKind::Latency | TestKind::Single => {
                let l = if t.test == TestKind::Latency {
                    s.latency.as_ref()
                } else {
                    s.single_frame.as_ref().map(|f| &f.latency)
                };
                (
                    l.is_some_and(|l| l.merged.is_none() && l.invalid_trials > 0),
                    format!("no {} of {b}-byte frames was measured", t.test.label()),
                )
            }
        };
        if limited {
            let by = t.limited_by().unwrap_or(Equipment::Generator);
            let evidence = |f: Flag| {
                f.with("frame_bytes", b)
                    .with("test", t.test.label())
                    .with("invalid_trials", t.invalid_trials)
                    .with(
                        "generator_ceiling_frames_per_s",
                        s.generator_ceiling_frames_per_s,
                    )
                    .with("line_rate_frames_per_s", s.line_rate_frames_per_s)
            };
            if by.generator() {
                flags.push(evidence(Flag::invalid(
                    "generator_limited",
                    format!("generator-limited: {what} (the generator fell short of the asked rate; not device loss)"),
                )));
            }
            if by.receiver() {
                flags.push(evidence(Flag::invalid(
                    "receiver_limited",
                    format!("receiver-limited: {what} (the receiver dropped frames itself; not device loss)"),
                )));
            }
        } else if t.invalid_trials > 0 {
            flags.push(
                Flag::warning(
                    "invalid_trials",
                    format!(
                        "{} {} trial(s) of {b}-byte frames were invalid ({}) and repeated; not counted as device loss",
                        t.invalid_trials,
                        t.test.label(),
                        match t.invalid_by.unwrap_or(Equipment::Generator) {
                            Equipment::Generator => "the generator fell short of the asked rate",
                            Equipment::Receiver => "the receiver dropped frames",
                            Equipment::GeneratorAndReceiver =>
                                "the generator fell short or the receiver dropped frames",
                        }
                    ),
                )
                .with("frame_bytes", b)
                .with("test", t.test.label())
                .with("invalid_trials", t.invalid_trials),
            );
        }
    }
}

/// `single_frame_above_line_rate` (invalid): frames sent one at a time
/// crossed faster than the link can serialise them (frame bits over the
/// median one-way latency above the line rate's L2 bit rate): physically
/// impossible, so the link does not delay frames as a cable would (a
/// rate-only shaper) or is faster than the model's.
fn single_frame_above_line_rate(s: &SizeReport) -> Option<Flag> {
    let single = s.single_frame.as_ref()?.single_frame_bits_per_s?;
    let line = l2_bits_per_s(s.frame_bytes, s.line_rate_frames_per_s);
    (line > 0.0 && single > line).then(|| {
        Flag::invalid(
            "single_frame_above_line_rate",
            format!(
                "{}-byte frames sent one at a time imply {} against a line rate of {} at L2: physically impossible, so the link does not delay frames as a cable would (a rate-only shaper such as tbf) or is faster than the model's",
                s.frame_bytes,
                crate::units::format_bits_per_s(single),
                crate::units::format_bits_per_s(line)
            ),
        )
        .with("frame_bytes", s.frame_bytes)
        .with("single_frame_bits_per_s", single)
        .with("line_rate_l2_bits_per_s", line)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values_parse() {
        assert_eq!(parse_mac("02:00:00:00:00:0a"), Ok([2, 0, 0, 0, 0, 10]));
        assert!(parse_mac("02:00:00:00:00").is_err() && parse_mac("2:0:0:0:0:1").is_err());
        assert_eq!(parse_pct("0.5%"), Ok(0.5));
        assert!(parse_pct("101").is_err() && parse_pct("x").is_err());
        assert_eq!(parse_fps("100"), Ok(100.0));
        assert!(parse_fps("0.5").is_err());
        assert_eq!(frame_sizes(&SizeList::Rfc2544, true).0[..2], [84, 128]);
        assert_eq!(
            frame_sizes(&SizeList::Sizes(vec![64]), true),
            (vec![64], false)
        );
    }
    use crate::procedure::rfc2544::throughput::ThroughputRun;
    use crate::result::exit_code;

    fn step(verdict: Verdict, receiver_drops: u64) -> TraceStep {
        TraceStep {
            trial: 1,
            asked_fps: 1000.0,
            offered_fps: 900.0,
            asked_frames: 1000,
            sent_frames: 900,
            received_frames: 900 - receiver_drops,
            loss_pct: 0.0,
            receiver_drops,
            verdict,
            next: String::new(),
        }
    }

    fn result(limit: Limit, steps: Vec<TraceStep>) -> Rfc2544Result {
        let mut s = SizeReport::new(64, 148_809.5, Some(100_000.0));
        s.throughput = Some(ThroughputResult {
            runs: vec![ThroughputRun {
                throughput_fps: 99_000.0,
                limited_by: limit,
                lowest_fail_fps: None,
                trials: 3,
            }],
            throughput_fps: Some(99_000.0),
            limited_by: Some(limit),
            resolution_fps: 744.0,
            line_rate_fps: 148_809.5,
        });
        s.trace.push(TestTrace::new(TestKind::Throughput, steps));
        s.derive();
        Rfc2544Result {
            link_bits_per_s: 100_000_000,
            link_emulation: None,
            generator: Generator::Sendmmsg,
            sender_threads: 1,
            qdisc_bypass: false,
            trial_s: 1.0,
            resolution_pct: 0.5,
            loss_tolerance_pct: 0.0,
            latency_clock: LATENCY_CLOCK.into(),
            ip_version: 4,
            generator_fallback: None,
            generator_notes: vec![],
            rx_user_space_stamps: 0,
            receiver: RxPath::AfPacket,
            receiver_fallback: None,
            receiver_notes: Vec::new(),
            sent_from_device_counter: None,
            iface_changes: vec![],
            sizes: vec![s],
            host_load: None,
            spread: vec![],
        }
    }

    fn codes(f: &[Flag]) -> Vec<&str> {
        f.iter().map(|f| f.code.as_str()).collect()
    }

    #[test]
    fn sample_mask_keeps_the_sample_at_or_below_its_rate() {
        assert_eq!(sample_mask(0.0), 0);
        assert_eq!(sample_mask(f64::NAN), 0);
        assert_eq!(sample_mask(SAMPLE_MAX_FPS), 0);
        // Just above: every second frame.
        assert_eq!(sample_mask(SAMPLE_MAX_FPS + 1.0), 1);
        for fps in [60_000.0, 148_809.5, 1_000_000.0, 1_488_095.2, 14_880_952.0] {
            let m = sample_mask(fps);
            assert!((m + 1).is_power_of_two(), "{fps}: {m}");
            let sampled = fps / (m + 1) as f64;
            assert!(sampled <= SAMPLE_MAX_FPS, "{fps}: {sampled}");
            // The next smaller power of two would be above it.
            let half = (m + 1) >> 1;
            assert!(fps / half as f64 > SAMPLE_MAX_FPS, "{fps}: {m}");
        }
        assert_eq!(sample_mask(f64::INFINITY), (1u64 << 60) - 1);
    }

    #[test]
    fn received_frames_from_the_count_or_the_sequence_numbers() {
        use crate::stats::sequence::SeqCounts;
        let seq = SeqCounts {
            received_unique: 90,
            expected: 100,
            lost: 10,
            reordered: 1,
            duplicates: 2,
            late: 0,
        };
        // AF_PACKET: distinct sequence numbers; live frames: every frame.
        assert_eq!(received_frames(&seq, None, false), (90, 2));
        assert_eq!(received_frames(&seq, None, true), (92, 0));
        // The XDP count includes the duplicates the sample saw.
        assert_eq!(received_frames(&seq, Some(1_000), false), (998, 2));
        assert_eq!(received_frames(&seq, Some(1_000), true), (1_000, 0));
        // A count below the sample's duplicates does not wrap.
        assert_eq!(received_frames(&seq, Some(1), false), (0, 2));
    }

    #[test]
    fn receiver_fallback_is_flagged_and_old_documents_read_as_af_packet() {
        let mut r = result(Limit::Device, vec![step(Verdict::Pass, 0)]);
        assert!(!codes(&assess(&r)).contains(&"receiver_fallback"));
        r.receiver_fallback = Some("xdp_count: bpf(BPF_LINK_CREATE): busy".into());
        let f = assess(&r);
        let fb = f.iter().find(|f| f.code == "receiver_fallback").unwrap();
        assert_eq!(fb.severity, crate::result::Severity::Warning);
        assert!(fb.message.contains("BPF_LINK_CREATE"), "{}", fb.message);
        // A version-3 document has no receiver fields.
        let mut v = serde_json::to_value(&r).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("receiver");
        o.remove("receiver_fallback");
        o.remove("receiver_notes");
        let back: Rfc2544Result = serde_json::from_value(v).unwrap();
        assert_eq!(back.receiver, RxPath::AfPacket);
        assert_eq!(back.receiver_fallback, None);
        assert_eq!(
            RxChoice::Auto.candidates(),
            [RxPath::XdpCount, RxPath::AfPacket]
        );
    }

    #[test]
    fn derived_figures() {
        let r = result(Limit::Device, vec![step(Verdict::Pass, 0)]);
        let s = &r.sizes[0];
        assert_eq!(s.throughput_bits_per_s, Some(99_000.0 * 64.0 * 8.0));
        let pct = s.throughput_line_rate_pct.unwrap();
        assert!((pct - 66.528).abs() < 0.01, "{pct}");
        assert!((s.generator_ceiling_line_rate_pct.unwrap() - 67.2).abs() < 0.01);
        let sf = SingleFrame::new(
            1518,
            LatencyResult {
                rate_fps: 100.0,
                trials: vec![],
                invalid_trials: 0,
                merged: None,
                mean_of_trials_ns: None,
            },
            Some(8127.0),
        );
        assert_eq!(sf.streaming_bits_per_s, Some(8127.0 * 1518.0 * 8.0));
        assert_eq!(sf.single_frame_bits_per_s, None);
    }

    #[test]
    fn single_frames_above_line_rate_are_impossible() {
        // 1518-byte frames one at a time on 100 Mbit/s: 368.5 Mbit/s (the
        // bug report's figure: 33 µs one way) cannot be.
        let mut r = result(Limit::Device, vec![step(Verdict::Pass, 0)]);
        let s = &mut r.sizes[0];
        s.frame_bytes = 1518;
        s.line_rate_frames_per_s = 8_127.4;
        let at = |p50_ns: u64| {
            let mut h = crate::stats::Histogram::new();
            h.record(p50_ns);
            let merged = h.summary();
            let l = LatencyResult {
                rate_fps: 100.0,
                trials: vec![],
                invalid_trials: 0,
                merged,
                mean_of_trials_ns: None,
            };
            SingleFrame::new(1518, l, None)
        };
        s.single_frame = Some(at(32_954));
        let f = assess(&r);
        assert_eq!(codes(&f), ["single_frame_above_line_rate"]);
        assert_eq!(f[0].severity, crate::result::Severity::Invalid);
        assert!(f[0].message.contains("368.5 Mbit/s"), "{}", f[0].message);
        // 130 µs: 93.4 Mbit/s, below the 98.7 Mbit/s of L2 line rate.
        r.sizes[0].single_frame = Some(at(130_000));
        assert!(assess(&r).is_empty());
    }

    #[test]
    fn runs_combine_into_one_document_with_their_spread() {
        let doc = |fps: f64| {
            let mut r = result(Limit::Device, vec![step(Verdict::Pass, 0)]);
            r.sizes[0].throughput.as_mut().unwrap().throughput_fps = Some(fps);
            let flags = vec![Flag::info("x", "a note")];
            Envelope::new(SCHEMA, VERSION, r).flagged(flags)
        };
        let mtu = |m: &str| vec![("mtu".to_string(), m.to_string())];
        let c = combine(vec![
            (mtu("1500"), Some(1), doc(90_000.0)),
            (mtu("1500"), Some(2), doc(99_000.0)),
            (mtu("1500"), Some(3), doc(95_000.0)),
            (mtu("9000"), Some(1), doc(148_000.0)),
        ])
        .unwrap();
        assert_eq!(c.result.sizes.len(), 4);
        assert_eq!(c.result.sizes[1].repeat, Some(2));
        assert_eq!(c.result.spread.len(), 2);
        let s = &c.result.spread[0];
        assert_eq!(s.label, "mtu=1500, 64 B");
        let t = s.throughput_fps.unwrap();
        assert_eq!(
            (t.runs, t.median, t.min, t.max),
            (3, 95_000.0, 90_000.0, 99_000.0)
        );
        assert_eq!(c.flags.len(), 4);
        assert!(
            c.flags[3].message.starts_with("mtu=9000, run 1: "),
            "{:?}",
            c.flags[3]
        );
        assert_eq!(c.flags[3].evidence["run"], 4);
        assert!(combine(vec![]).is_none());
        let p = sweep_points(&["mtu=1500,9000".into(), "gro=off".into()]).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(
            p[1].config,
            [
                crate::sweep::BedSetting::Mtu(9000),
                crate::sweep::BedSetting::Offload("gro".into(), false)
            ]
        );
        assert!(sweep_points(&["size=64".into()]).is_err(), "bed keys only");
    }

    #[test]
    fn device_limit_is_clean_equipment_limit_is_invalid() {
        let clean = assess(&result(Limit::Device, vec![step(Verdict::Loss, 0)]));
        assert!(clean.is_empty(), "{clean:?}");

        let gen = assess(&result(
            Limit::Generator,
            vec![
                step(Verdict::InvalidRetry, 0),
                step(Verdict::GeneratorLimit, 0),
            ],
        ));
        assert_eq!(codes(&gen), ["generator_limited"]);
        assert_eq!(exit_code(&gen), 1);
        assert_eq!(gen[0].evidence["invalid_trials"], 2);

        let rx = assess(&result(
            Limit::Generator,
            vec![step(Verdict::GeneratorLimit, 7)],
        ));
        assert_eq!(codes(&rx), ["receiver_limited"]);
        let both = assess(&result(
            Limit::Generator,
            vec![
                step(Verdict::InvalidRetry, 7),
                step(Verdict::GeneratorLimit, 0),
            ],
        ));
        assert_eq!(codes(&both), ["generator_limited", "receiver_limited"]);
        // The receiver dropped frames once at another rate, retried and
        // passed: the limit is the generator's alone.
        let other_rate = assess(&result(
            Limit::Generator,
            vec![
                step(Verdict::InvalidRetry, 7),
                step(Verdict::Pass, 0),
                step(Verdict::InvalidRetry, 0),
                step(Verdict::GeneratorLimit, 0),
            ],
        ));
        assert_eq!(codes(&other_rate), ["generator_limited"]);
        assert_eq!(other_rate[0].evidence["invalid_trials"], 3);
        // A generator ceiling below line rate with no limiting trial is the
        // generator's, whatever retries passed before.
        let ceiling = assess(&result(
            Limit::Generator,
            vec![step(Verdict::InvalidRetry, 7), step(Verdict::Pass, 0)],
        ));
        assert_eq!(codes(&ceiling), ["generator_limited"]);

        // Retried and then valid: a warning, the result stands.
        let retried = assess(&result(
            Limit::LineRate,
            vec![step(Verdict::InvalidRetry, 0), step(Verdict::Pass, 0)],
        ));
        assert_eq!(codes(&retried), ["invalid_trials"]);
        assert_eq!(exit_code(&retried), 0);
    }

    #[test]
    fn facts_are_info_and_warnings() {
        let mut r = result(Limit::LineRate, vec![step(Verdict::Pass, 0)]);
        r.generator = Generator::XdpLive;
        r.generator_fallback = Some("x: y".into());
        r.rx_user_space_stamps = 3;
        r.iface_changes.push(IfaceChange {
            end: Endpoint {
                netns: Some("lr-x-b".into()),
                iface: "lr-b".into(),
            },
            feature: "gro".into(),
            on: true,
            why: GRO_FOR_LIVE_FRAMES.into(),
        });
        r.sizes[0].latency = Some(LatencyResult {
            rate_fps: 1.0,
            trials: vec![],
            invalid_trials: 0,
            merged: None,
            mean_of_trials_ns: None,
        });
        r.sizes[0].latency_at_line_rate = true;
        let f = assess(&r);
        assert_eq!(
            codes(&f),
            [
                "latency_at_line_rate",
                "rx_user_space_stamps",
                "generator_fallback",
                "live_frames_caveats",
                "iface_setting_changed"
            ]
        );
        assert_eq!(exit_code(&f), 0);
        assert!(f[4]
            .message
            .starts_with("GRO turned on at the veth peer lr-b (lr-x-b)"));
    }

    #[test]
    fn config_is_checked() {
        let mut c = Config {
            tx: Endpoint::default(),
            rx: Endpoint::default(),
            tx_peer: None,
            src_ip: [198, 18, 0, 1].into(),
            dst_ip: [198, 18, 0, 2].into(),
            dst_mac: None,
            link: BitRate::from_bps(1_000_000_000),
            tests: vec![TestKind::Throughput],
            sizes: vec![64, 1518],
            trial: Duration::from_secs(1),
            resolution_pct: 0.5,
            loss_tolerance_pct: 0.0,
            repeats: 1,
            latency_trials: 1,
            b2b_repeats: 1,
            b2b_max: Duration::from_secs(2),
            single_rate_fps: 100.0,
            loss_step_pct: 10.0,
            drain: Duration::from_secs(2),
            settle: Duration::ZERO,
            retries: 2,
            ceiling_time: Duration::from_secs(1),
            generator: GeneratorChoice::Auto,
            qdisc_bypass: false,
            rx_path: RxChoice::Auto,
            sender_threads: None,
        };
        assert_eq!(c.validate(), Ok(()));
        assert!((c.line_rate_fps(64).unwrap() - 1_488_095.2).abs() < 1.0);
        c.sizes = vec![40];
        assert!(c.validate().is_err());
        c.sizes = vec![64];
        c.link = BitRate::from_bps(0);
        assert_eq!(c.validate(), Err(ConfigError::ZeroLink));
        assert!(!ConfigError::FrameTooSmall(40).to_string().contains("--"));
        c.link = BitRate::from_bps(1_000_000_000);
        c.sender_threads = Some(0);
        assert_eq!(c.validate(), Err(ConfigError::Zero("threads")));
    }

    #[test]
    fn sender_threads_per_cpu_for_the_af_packet_generators_only() {
        assert_eq!(sender_threads(Generator::Sendmmsg, None, 2), 2);
        assert_eq!(sender_threads(Generator::TxRing, Some(3), 2), 3);
        assert_eq!(sender_threads(Generator::TxRing, None, 0), 1);
        assert_eq!(sender_threads(Generator::AfXdp, Some(4), 2), 1);
        assert_eq!(sender_threads(Generator::XdpLive, None, 8), 1);
        assert!(sender_notes(1).is_empty());
        assert!(sender_notes(2)[0].starts_with("2 sender threads"));
        // Version-4 documents have no sender_threads: one thread.
        let r = result(Limit::Device, vec![step(Verdict::Pass, 0)]);
        let mut v = serde_json::to_value(r).unwrap();
        v.as_object_mut().unwrap().remove("sender_threads");
        let r: Rfc2544Result = serde_json::from_value(v).unwrap();
        assert_eq!(r.sender_threads, 1);
    }
}
