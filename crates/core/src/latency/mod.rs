//! Response time dissected into stages, as seeds 001 and 004 do with a scope
//! on GPIO pins, here from kernel software timestamps.
//!
//! ```text
//!  client app ──send──▶ [client tx stack] ──TX_SND──▶ … wire/network …
//!     ──▶ RX_SW ─[responder rx]─▶ app ─[responder app]─▶ send ─[responder tx]─▶ TX_SND
//!     … wire/network … ──▶ RX_SW ─[client rx]─▶ client app
//! ```
//!
//! Every stage is an interval between two stamps of **one** clock: client
//! stages on the client's, responder stages on the responder's. The
//! network/wire remainder is the client's kernel round trip (its TX_SND to its
//! RX_SW) minus the responder's kernel residence (its RX_SW to its TX_SND), a
//! difference of two single-clock intervals, so the stages add up to the RTT
//! exactly whatever the offset between the two clocks. Only when both ends
//! share a clock (one host, namespaces) are one-way delays computed.

use serde::{Deserialize, Serialize};

use crate::stats::{Histogram, Summary};
use crate::sweep::Spread;

mod assess;
mod config;
pub mod load;

use crate::wire::echo::{ReflectorStamps, TxStamps};
pub use assess::{assess, codes, MIN_STAMPED};
pub use config::{
    default_size, expand, size_range, BedPeer, Config, ConfigError, Parameter, Peer, Request,
    Setup, Variant, DEFAULT_COUNT, DEFAULT_STAMP_EVERY, ECHO_PORT, MAX_CONFIGURATIONS,
    MAX_ICMP_DATA_BYTES, MAX_IN_FLIGHT, MAX_RATE_PER_S, MAX_UDP_REQUEST_BYTES, SWEEP_KEYS,
};

/// What the client stamped for one exchange (ns of its clock; CLOCK_REALTIME
/// for software timestamps).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientStamps {
    /// Just before the send call.
    pub app_send_ns: u64,
    /// SCM_TSTAMP_SCHED of the request.
    pub tx_sched_ns: Option<u64>,
    /// SCM_TSTAMP_SND of the request.
    pub tx_soft_ns: Option<u64>,
    /// SCM_TSTAMP_ACK (TCP): all bytes of the request acknowledged.
    pub tx_ack_ns: Option<u64>,
    /// Kernel software receive stamp of the reply.
    pub rx_kernel_ns: Option<u64>,
    /// Just after the receive call returned the reply.
    pub app_recv_ns: u64,
}

/// Everything the responder stamped for one exchange (its clock).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponderStamps {
    /// Kernel software receive stamp of the request.
    pub rx_kernel_ns: Option<u64>,
    /// Application had the request.
    pub rx_app_ns: u64,
    /// Application called send for the reply.
    pub tx_app_ns: u64,
    /// SCM_TSTAMP_SCHED of the reply.
    pub tx_sched_ns: Option<u64>,
    /// SCM_TSTAMP_SND of the reply.
    pub tx_soft_ns: Option<u64>,
}

impl ResponderStamps {
    /// The responder stamps carried in a reply (0 = absent), completed by
    /// transmit stamps that arrived later.
    pub fn from_reply(s: &ReflectorStamps, tx: Option<&TxStamps>) -> Self {
        let nz = |v: u64| (v != 0).then_some(v);
        Self {
            rx_kernel_ns: nz(s.rx_kernel_ns),
            rx_app_ns: s.rx_app_ns,
            tx_app_ns: s.tx_app_ns,
            tx_sched_ns: tx.and_then(|t| nz(t.tx_sched_ns)),
            tx_soft_ns: tx.and_then(|t| nz(t.tx_soft_ns)),
        }
    }
}

/// The stages of a response, in the order a table shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Client send call → its TX_SND stamp (UDP/IP/driver on the way out).
    ClientTx,
    /// Responder RX_SW → responder application has the request.
    ResponderRx,
    /// Responder application: request in hand → send called.
    ResponderApp,
    /// Responder send call → its TX_SND stamp.
    ResponderTx,
    /// Client kernel RTT minus responder kernel residence: both wires and
    /// anything not stamped (switches, DUT, the peer's driver below RX_SW).
    Network,
    /// Client RX_SW → client application has the reply.
    ClientRx,
    /// Client send call → receive return.
    Rtt,
    /// Client TX_SND → responder RX_SW (one clock only).
    OneWayForward,
    /// Responder TX_SND → client RX_SW (one clock only).
    OneWayReturn,
    /// Client TX_SND → TX_ACK: until the request was acknowledged (TCP).
    TcpAck,
}

impl Stage {
    /// Every stage, in table order.
    pub const ALL: [Self; 10] = [
        Self::ClientTx,
        Self::ResponderRx,
        Self::ResponderApp,
        Self::ResponderTx,
        Self::Network,
        Self::ClientRx,
        Self::Rtt,
        Self::OneWayForward,
        Self::OneWayReturn,
        Self::TcpAck,
    ];

    /// The column title.
    pub fn title(self) -> &'static str {
        match self {
            Self::ClientTx => "client tx",
            Self::ResponderRx => "resp rx",
            Self::ResponderApp => "resp app",
            Self::ResponderTx => "resp tx",
            Self::Network => "network",
            Self::ClientRx => "client rx",
            Self::Rtt => "RTT",
            Self::OneWayForward => "one-way →",
            Self::OneWayReturn => "one-way ←",
            Self::TcpAck => "tcp ack",
        }
    }

    /// Which stamps bound it (for reports and METHODOLOGY).
    pub fn definition(self) -> &'static str {
        match self {
            Self::ClientTx => "client send() call to its SCM_TSTAMP_SND",
            Self::ResponderRx => "responder kernel RX_SOFTWARE stamp to its application",
            Self::ResponderApp => "responder application: request received to reply send()",
            Self::ResponderTx => "responder send() call to its SCM_TSTAMP_SND",
            Self::Network => {
                "client TX_SND→RX_SW minus responder RX_SW→TX_SND (wire, stack below the stamps)"
            }
            Self::ClientRx => "client kernel RX_SOFTWARE stamp to its application",
            Self::Rtt => "client send() call to receive return",
            Self::OneWayForward => "client TX_SND to responder RX_SW (shared clock only)",
            Self::OneWayReturn => "responder TX_SND to client RX_SW (shared clock only)",
            Self::TcpAck => "client TX_SND to SCM_TSTAMP_ACK: the request acknowledged (TCP)",
        }
    }
}

/// Stage durations of one exchange, ns; `None` where a stamp was missing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stages {
    values: [Option<i64>; 10],
}

impl Stages {
    /// The duration of `stage`, ns (may be negative only if stamps lie).
    pub fn get(&self, stage: Stage) -> Option<i64> {
        self.values[stage as usize]
    }

    fn set(&mut self, stage: Stage, v: Option<i64>) {
        self.values[stage as usize] = v;
    }
}

/// `later - earlier`, or `None` when a stamp is missing or the difference
/// does not fit (stamps from the network may be anything).
fn diff(later: Option<u64>, earlier: Option<u64>) -> Option<i64> {
    i64::try_from(i128::from(later?) - i128::from(earlier?)).ok()
}

/// Splits one exchange into stages. `same_clock` is true only when client
/// and responder stamped with the same clock (one host).
pub fn dissect(
    client: &ClientStamps,
    responder: Option<&ResponderStamps>,
    same_clock: bool,
) -> Stages {
    let mut s = Stages::default();
    let c = client;
    s.set(Stage::Rtt, diff(Some(c.app_recv_ns), Some(c.app_send_ns)));
    s.set(Stage::ClientTx, diff(c.tx_soft_ns, Some(c.app_send_ns)));
    s.set(Stage::ClientRx, diff(Some(c.app_recv_ns), c.rx_kernel_ns));
    s.set(Stage::TcpAck, diff(c.tx_ack_ns, c.tx_soft_ns));
    let client_kernel_rtt = diff(c.rx_kernel_ns, c.tx_soft_ns);
    match responder {
        Some(r) => {
            s.set(Stage::ResponderRx, diff(Some(r.rx_app_ns), r.rx_kernel_ns));
            s.set(
                Stage::ResponderApp,
                diff(Some(r.tx_app_ns), Some(r.rx_app_ns)),
            );
            s.set(Stage::ResponderTx, diff(r.tx_soft_ns, Some(r.tx_app_ns)));
            let residence = diff(r.tx_soft_ns, r.rx_kernel_ns);
            s.set(
                Stage::Network,
                client_kernel_rtt.and_then(|k| k.checked_sub(residence?)),
            );
            if same_clock {
                s.set(Stage::OneWayForward, diff(r.rx_kernel_ns, c.tx_soft_ns));
                s.set(Stage::OneWayReturn, diff(c.rx_kernel_ns, r.tx_soft_ns));
            }
        }
        // Without the responder's stamps its time is part of "network".
        None => s.set(Stage::Network, client_kernel_rtt),
    }
    s
}

/// The client's send call → the kernel's receive stamp of the reply, ns
/// (the span `ping` reports; see [`LatencyRun::rtt_send_to_kernel_rx`]);
/// `None` without a receive stamp or when the stamps are out of order.
pub fn send_to_kernel_rx(c: &ClientStamps) -> Option<u64> {
    c.rx_kernel_ns?.checked_sub(c.app_send_ns)
}

/// Checks the order of one side's stamps: send ≤ SCHED ≤ SND, RX_SW ≤ app.
pub fn client_stamps_monotonic(c: &ClientStamps) -> bool {
    let sched = c.tx_sched_ns.unwrap_or(c.app_send_ns);
    let snd = c.tx_soft_ns.unwrap_or(sched);
    let rx = c.rx_kernel_ns.unwrap_or(c.app_recv_ns);
    c.app_send_ns <= sched && sched <= snd && rx <= c.app_recv_ns && c.app_send_ns <= c.app_recv_ns
}

/// Per-stage histograms over many exchanges.
#[derive(Debug, Clone, Default)]
pub struct StageStats {
    hists: [Histogram; 10],
    /// Intervals that came out negative (stamps out of order): not recorded.
    pub negative: u64,
}

/// One stage's summary as reported.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StageSummary {
    /// The stage.
    pub stage: Stage,
    /// Its statistics.
    #[serde(flatten)]
    pub summary: Summary,
}

impl StageStats {
    /// Records the stages of one exchange.
    pub fn record(&mut self, stages: &Stages) {
        for stage in Stage::ALL {
            match stages.get(stage) {
                Some(v) if v >= 0 => self.hists[stage as usize].record(v as u64),
                Some(_) => self.negative += 1,
                None => {}
            }
        }
    }

    /// Adds another set of statistics.
    pub fn merge(&mut self, other: &Self) {
        for (a, b) in self.hists.iter_mut().zip(&other.hists) {
            a.merge(b);
        }
        self.negative += other.negative;
    }

    /// The histogram of one stage.
    pub fn histogram(&self, stage: Stage) -> &Histogram {
        &self.hists[stage as usize]
    }

    /// Summaries of the stages that have samples, in table order.
    pub fn summaries(&self) -> Vec<StageSummary> {
        Stage::ALL
            .iter()
            .filter_map(|&stage| {
                Some(StageSummary {
                    stage,
                    summary: self.hists[stage as usize].summary()?,
                })
            })
            .collect()
    }
}

/// How the reflector waits for requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReflectorMode {
    /// Sleeps in poll/recv until a request arrives (the default; pays the
    /// scheduler's wake-up).
    Blocking,
    /// Spins on non-blocking receives (burns a CPU; no wake-up cost).
    Busy,
    /// Sleeps until a request arrives, then takes every queued request
    /// before answering them in one pass.
    Batch,
}

impl std::str::FromStr for ReflectorMode {
    type Err = String;

    /// `blocking`, `busy` or `batch` (any case).
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "blocking" => Ok(Self::Blocking),
            "busy" => Ok(Self::Busy),
            "batch" => Ok(Self::Batch),
            _ => Err(format!("'{s}' is not blocking, busy or batch")),
        }
    }
}

/// The echo protocol of a latency run (and of a session with linerate's
/// reflector, which answers UDP and TCP; the peer's kernel answers ICMP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EchoProtocol {
    /// UDP echo.
    Udp,
    /// TCP echo (1 byte per request by default, TCP_NODELAY).
    Tcp,
    /// ICMP echo.
    Icmp,
}

impl EchoProtocol {
    /// Lower-case name: `udp`, `tcp`, `icmp`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Tcp => "tcp",
            Self::Icmp => "icmp",
        }
    }
}

impl std::fmt::Display for EchoProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a client asks of the server's reflector (control protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyParams {
    /// UDP or TCP.
    pub protocol: EchoProtocol,
    /// Request size in bytes.
    pub size_bytes: u64,
    /// How the reflector waits.
    pub mode: ReflectorMode,
    /// Copy each request before answering.
    pub copy: bool,
    /// SO_NO_CHECK on the reflector's socket.
    pub no_udp_checksum: bool,
    /// How long the client means to run, at most (the server may refuse more).
    pub duration_ns: u64,
    /// The reflector asks the kernel for stamps (absent in a message: yes).
    #[serde(default = "yes")]
    pub kernel_stamps: bool,
}

fn yes() -> bool {
    true
}

/// Largest request of a latency session (bytes).
pub const MAX_REQUEST_BYTES: u64 = 1 << 20;

/// Why a server refuses latency parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LatencyParamsError {
    /// A request size outside what the protocol carries.
    #[error("request size {size} B is outside {min}..={max} B for {protocol}")]
    Size {
        /// Asked.
        size: u64,
        /// Smallest.
        min: u64,
        /// Largest.
        max: u64,
        /// `udp` or `tcp`.
        protocol: &'static str,
    },
    /// ICMP is answered by the kernel, not by a reflector.
    #[error("ICMP is answered by the peer's kernel, not by a reflector")]
    Icmp,
    /// Longer than the server allows.
    #[error(
        "a {asked_s:.0} s session exceeds the server's limit of {limit_s:.0} s (its maximum session duration)"
    )]
    TooLong {
        /// Asked, s.
        asked_s: f64,
        /// Allowed, s.
        limit_s: f64,
    },
}

impl LatencyParams {
    /// Checks the parameters against the protocol and the server's limit.
    pub fn validate(&self, max_duration_ns: Option<u64>) -> Result<(), LatencyParamsError> {
        let protocol = self.protocol.name();
        if self.protocol == EchoProtocol::Icmp {
            return Err(LatencyParamsError::Icmp);
        }
        let (min, max) = size_range(self.protocol);
        if !(min..=max).contains(&self.size_bytes) {
            return Err(LatencyParamsError::Size {
                size: self.size_bytes,
                min,
                max,
                protocol,
            });
        }
        if let Some(limit) = max_duration_ns {
            if self.duration_ns > limit {
                return Err(LatencyParamsError::TooLong {
                    asked_s: self.duration_ns as f64 / 1e9,
                    limit_s: limit as f64 / 1e9,
                });
            }
        }
        Ok(())
    }
}

/// One answered request, on the reflector's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReflectorRecord {
    /// Sequence number of the request.
    pub seq: u64,
    /// Its stamps.
    pub stamps: ResponderStamps,
}

/// What a reflector did in a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReflectorReport {
    /// Replies sent.
    pub replies: u64,
    /// Requests dropped because their session was not this one.
    pub unknown_session: u64,
    /// Datagrams dropped because they were not valid requests.
    pub malformed: u64,
    /// Replies the kernel refused to send.
    pub send_errors: u64,
    /// Bytes received in valid requests.
    pub bytes_in: u64,
    /// Bytes sent in replies (never more than `bytes_in`).
    pub bytes_out: u64,
    /// Per-exchange stamps, up to the record limit.
    pub records: Vec<ReflectorRecord>,
    /// Exchanges beyond the record limit.
    pub records_dropped: u64,
}

/// Schema name of a latency result document.
pub const SCHEMA: &str = "linerate.latency";
/// Its version; bumped on any incompatible change. Version 2: the common
/// envelope, `warnings` replaced by the envelope's flags; `kernel_stamps`,
/// `ipv6`, and per run `no_udp_checksum`, `incomplete` and
/// `stamping_cost_ns` added (version-1 documents read back with their
/// defaults). Version 3: repeats (`runs` may hold several runs of one
/// configuration, each with its `repeat`, summarised in `spread`),
/// `link_bits_per_s` with each run's `wire_rtt_ns`, `host_load`, and each
/// run's `timeout_ns` (version-2 documents read back without them).
pub const SCHEMA_VERSION: u32 = 3;

/// Who answered the probes, which decides the stages that exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Responder {
    /// linerate's reflector: it returns its own stamps, every stage exists.
    Reflector,
    /// A plain echo server (RFC 862): client-side stages only.
    PlainEcho,
    /// The peer's kernel (ICMP echo): client-side stages only.
    Kernel,
}

/// Sent, answered and lost probes of one run.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ProbeCounts {
    /// Requests sent.
    pub sent: u64,
    /// Replies received in time.
    pub received: u64,
    /// Requests without a reply within the timeout.
    pub lost: u64,
    /// Replies that matched no request in flight (late, duplicate, foreign).
    pub unexpected: u64,
}

/// One configuration's result: a row of the seed-style table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyRun {
    /// The settings that make this row (`reflector-mode=busy`, …).
    pub settings: Vec<(String, String)>,
    /// Request size in bytes (UDP/TCP payload, ICMP data).
    pub size_bytes: u64,
    /// Probe counts.
    pub counts: ProbeCounts,
    /// Exchanges whose request got no transmit stamp.
    pub missing_tx_stamps: u64,
    /// Exchanges whose reply got no receive stamp.
    pub missing_rx_stamps: u64,
    /// Intervals that came out negative and were left out.
    pub negative_intervals: u64,
    /// Per-stage statistics, in table order.
    pub stages: Vec<StageSummary>,
    /// Wall time of the run.
    pub duration_ns: u64,
    /// Answers beyond the client's recording limit: counted in `counts`,
    /// not in the stages.
    #[serde(default)]
    pub unrecorded: u64,
    /// One exchange in this many carried kernel stamps and makes the stages
    /// (1: every exchange).
    #[serde(default = "one")]
    pub stamp_every: u64,
    /// RTT of the exchanges outside the stamped sample, which asked the
    /// kernel for no stamp on either end (ICMP: no transmit stamp; the
    /// reply's receive stamp stays on for the socket): the response time
    /// without the observer's cost. `None` when every exchange was stamped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_unstamped: Option<Summary>,
    /// What kernel stamping added to the median RTT, ns: the stamped
    /// sample's p50 minus the unstamped exchanges' (when both were
    /// measured; see [`LatencyRun::with_derived`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamping_cost_ns: Option<i64>,
    /// SO_NO_CHECK was set on both ends (UDP checksums off).
    #[serde(default)]
    pub no_udp_checksum: bool,
    /// Why this run's result is incomplete (e.g. the server's stamps never
    /// came), if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// The distribution of the RTT quoted ([`LatencyRun::rtt`]: the
    /// unstamped exchanges' when the stamps were sampled), in log-spaced
    /// bins: what histogram and CDF plots are drawn from (absent in
    /// documents written before plots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_distribution: Option<crate::plot::Distribution>,
    /// The least a round trip can take on the path's link: the model's
    /// wire time of the request's frame and of the reply's (preamble, SFD,
    /// frame, FCS, IFG at the link rate), ns; absent when no link rate is
    /// known (see [`LatencyReport::link_bits_per_s`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_rtt_ns: Option<f64>,
    /// Which repeat of its configuration this run is (1-based; absent
    /// without `repeat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    /// The reply timeout in force at the end of the run, ns (sized from the
    /// RTTs seen unless one was given; absent in version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ns: Option<u64>,
    /// The responder kernel's own stages (rx, processing, tx) when the
    /// kernel answered (ICMP echo on a bed), from tracepoints; otherwise
    /// they are inside "network".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responder_kernel: Option<crate::journey::ResponderKernel>,
    /// The link rate this run was measured at when a sweep point set it
    /// (`link=100M,1G`), bit/s: its `wire_rtt_ns` comes from it instead of
    /// the report's `link_bits_per_s` (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_bits_per_s: Option<u64>,
    /// The bed's link emulation during this run alone, when a sweep point
    /// set its link rate (the report's `link_emulation` spans every run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_emulation: Option<crate::emu::LinkAccount>,
    /// Per exchange, the client's send call → the kernel's receive stamp
    /// of the reply (CLOCK_REALTIME): the span `ping` reports (its time
    /// runs from a user-space stamp before the send to the reply's
    /// `SO_TIMESTAMP`), which leaves out the client's wake-up and receive
    /// call that the RTT includes. Over the exchanges outside the stamped
    /// sample (a receive stamp and no transmit stamp, as ping) when stamps
    /// are sampled, else over every exchange with a receive stamp; set
    /// for client-side-only runs (ICMP, plain echo), absent when no
    /// exchange had a receive stamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_send_to_kernel_rx: Option<Summary>,
}

fn one() -> u64 {
    1
}

impl LatencyRun {
    /// A run of `size_bytes` requests with `counts`, its stages (and
    /// negative intervals) from `stats`: every exchange stamped, no stamp
    /// missing, no settings; the caller fills in the rest.
    pub fn new(size_bytes: u64, counts: ProbeCounts, stats: &StageStats) -> Self {
        Self {
            settings: Vec::new(),
            size_bytes,
            counts,
            missing_tx_stamps: 0,
            missing_rx_stamps: 0,
            negative_intervals: stats.negative,
            stages: stats.summaries(),
            duration_ns: 0,
            unrecorded: 0,
            stamp_every: 1,
            rtt_unstamped: None,
            stamping_cost_ns: None,
            no_udp_checksum: false,
            incomplete: None,
            rtt_distribution: crate::plot::Distribution::from_histogram(
                stats.histogram(Stage::Rtt),
            ),
            wire_rtt_ns: None,
            repeat: None,
            timeout_ns: None,
            responder_kernel: None,
            link_bits_per_s: None,
            link_emulation: None,
            rtt_send_to_kernel_rx: None,
        }
    }

    /// The run with the RTT of the exchanges outside the stamped sample:
    /// its summary ([`Self::rtt_unstamped`]) and, when it has samples, its
    /// distribution in place of the stamped one.
    #[must_use]
    pub fn with_unstamped(mut self, unstamped: &Histogram) -> Self {
        self.rtt_unstamped = unstamped.summary();
        if let Some(d) = crate::plot::Distribution::from_histogram(unstamped) {
            self.rtt_distribution = Some(d);
        }
        self
    }

    /// The run with its derived figures filled in ([`Self::stamping_cost_ns`]).
    #[must_use]
    pub fn with_derived(mut self) -> Self {
        self.stamping_cost_ns = self.stamping_cost();
        self
    }

    /// The stamped exchanges: the RTT sample the stages come from.
    pub fn stamped_exchanges(&self) -> u64 {
        self.stage(Stage::Rtt).map_or(0, |s| s.count)
    }

    /// The summary of one stage, if it has samples.
    pub fn stage(&self, stage: Stage) -> Option<&Summary> {
        self.stages
            .iter()
            .find(|s| s.stage == stage)
            .map(|s| &s.summary)
    }

    /// The RTT to quote: that of the unstamped exchanges when the stamps
    /// were sampled (no stamping cost in it), else the stamped one.
    pub fn rtt(&self) -> Option<&Summary> {
        self.rtt_unstamped
            .as_ref()
            .or_else(|| self.stage(Stage::Rtt))
    }

    /// What kernel stamping added to the median RTT, ns (stamped sample's
    /// p50 minus the unstamped exchanges'), when both were measured.
    fn stamping_cost(&self) -> Option<i64> {
        let stamped = self.stage(Stage::Rtt)?;
        let plain = self.rtt_unstamped.as_ref()?;
        Some(stamped.p50_ns as i64 - plain.p50_ns as i64)
    }

    /// Label of the row: its settings, or "default", and which repeat.
    pub fn label(&self) -> String {
        let l = crate::sweep::label(&self.settings);
        match self.repeat {
            Some(r) => format!("{l} (run {r})"),
            None => l,
        }
    }
}

/// A whole `linerate latency` result: the body of its document, in
/// [`crate::result::Envelope`] under [`SCHEMA`] and [`SCHEMA_VERSION`]
/// (whose flags replace version 1's `warnings`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyReport {
    /// The responder's address.
    pub target: String,
    /// `udp`, `tcp` or `icmp`.
    pub protocol: EchoProtocol,
    /// Who answered.
    pub responder: Responder,
    /// Clock of every stamp (`CLOCK_REALTIME`).
    pub clock: String,
    /// Where stamps came from (software SO_TIMESTAMPING, …).
    pub timestamp_source: String,
    /// What the client's device can stamp in hardware, as probed.
    pub hardware_timestamps: String,
    /// Client and responder share a clock (one host): one-way delays valid.
    pub same_clock: bool,
    /// Both ends asked the kernel for timestamps (absent in version 1: yes).
    #[serde(default = "yes")]
    pub kernel_stamps: bool,
    /// The responder was reached over IPv6.
    #[serde(default)]
    pub ipv6: bool,
    /// The link rate of the path, bit/s (a bed's emulated link), when known:
    /// each run's `wire_rtt_ns` comes from it (absent in version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_bits_per_s: Option<u64>,
    /// The bed's link emulation during the test: which shaper, and what
    /// linerate's emulator counted (absent when not measured on a bed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_emulation: Option<crate::emu::LinkAccount>,
    /// One entry per configuration (per configuration and repeat with
    /// `repeat`, each run saying which).
    pub runs: Vec<LatencyRun>,
    /// Load from elsewhere during the runs (absent in version 2, or when
    /// `/proc` could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_load: Option<crate::hostload::HostLoad>,
    /// With repeats: per configuration, the median with min–max of its
    /// runs' RTT figures (absent in version 2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spread: Vec<RttSpread>,
    /// Latency under load (`--load`): the idle phase against each load
    /// level, stage by stage, with the load's throughput (absent without a
    /// load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<load::LoadReport>,
}

/// The RTT of one configuration's repeated runs: median, min and max of
/// each run's quoted RTT figures (ns).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RttSpread {
    /// The configuration's settings.
    pub settings: Vec<(String, String)>,
    /// The runs' minimum RTTs.
    pub min_ns: Option<Spread>,
    /// The runs' median RTTs.
    pub p50_ns: Option<Spread>,
    /// The runs' 99th percentiles.
    pub p99_ns: Option<Spread>,
}

impl RttSpread {
    /// Label of the row: its settings, or "default".
    pub fn label(&self) -> String {
        crate::sweep::label(&self.settings)
    }
}

impl LatencyReport {
    /// Computes the derived figures: each run's wire time (from its own
    /// `link_bits_per_s`, else the report's) and, when runs repeat, the spread per
    /// configuration (in the order configurations first appear).
    pub fn derive(&mut self) {
        let ipv6 = self.ipv6;
        let (protocol, link) = (self.protocol, self.link_bits_per_s);
        for r in &mut self.runs {
            r.wire_rtt_ns = (r.link_bits_per_s.or(link))
                .and_then(|l| wire_rtt_ns(protocol, ipv6, r.size_bytes, l));
        }
        self.spread.clear();
        if self.runs.iter().all(|r| r.repeat.is_none()) {
            return;
        }
        let mut seen: Vec<&Vec<(String, String)>> = Vec::new();
        for r in &self.runs {
            if !seen.contains(&&r.settings) {
                seen.push(&r.settings);
            }
        }
        self.spread = seen
            .into_iter()
            .map(|settings| {
                let rtts: Vec<&Summary> = self
                    .runs
                    .iter()
                    .filter(|r| &r.settings == settings)
                    .filter_map(LatencyRun::rtt)
                    .collect();
                let of = |f: fn(&Summary) -> u64| Spread::of(rtts.iter().map(|s| f(s) as f64));
                RttSpread {
                    settings: settings.clone(),
                    min_ns: of(|s| s.min_ns),
                    p50_ns: of(|s| s.p50_ns),
                    p99_ns: of(|s| s.p99_ns),
                }
            })
            .collect();
    }
}

/// The least a round trip of `size_bytes` requests can take on a link of
/// `link_bits_per_s`: the line-rate model's wire time (preamble and SFD,
/// frame, IFG) of the request's frame plus the reply's (same size), ns.
/// UDP: a datagram of that payload; TCP: a segment with the timestamp
/// option Linux sends; ICMP: an echo of that much data. `None` when the
/// frame does not fit the model (larger than a jumbo frame) or the link is 0.
pub fn wire_rtt_ns(
    protocol: EchoProtocol,
    ipv6: bool,
    size_bytes: u64,
    link_bits_per_s: u64,
) -> Option<f64> {
    use crate::linerate::{Encap, NetLayer, TransportLayer, DEFAULT_TCP_OPTIONS_BYTES};
    let net = if ipv6 { NetLayer::Ipv6 } else { NetLayer::Ipv4 };
    let size = u32::try_from(size_bytes).ok()?;
    let (transport, tcp_options_bytes, payload) = match protocol {
        EchoProtocol::Udp => (TransportLayer::Udp, 0, size),
        EchoProtocol::Tcp => (TransportLayer::Tcp, DEFAULT_TCP_OPTIONS_BYTES, size),
        // The 8-byte ICMP echo header rides above IP.
        EchoProtocol::Icmp => (TransportLayer::None, 0, size.checked_add(8)?),
    };
    let encap = Encap {
        net,
        transport,
        tcp_options_bytes,
        ..Encap::ETHERNET
    };
    let frame = encap.frame_for_payload(payload, true).ok()?;
    (link_bits_per_s > 0)
        .then(|| 2.0 * f64::from(frame.wire_bytes()) * 8.0 * 1e9 / link_bits_per_s as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> ClientStamps {
        ClientStamps {
            app_send_ns: 1_000,
            tx_sched_ns: Some(4_000),
            tx_soft_ns: Some(5_000),
            tx_ack_ns: None,
            rx_kernel_ns: Some(40_000),
            app_recv_ns: 50_000,
        }
    }

    /// Responder on a clock 1 s ahead of the client's.
    fn responder(offset: u64) -> ResponderStamps {
        ResponderStamps {
            rx_kernel_ns: Some(offset + 6_000),
            rx_app_ns: offset + 16_000,
            tx_app_ns: offset + 17_000,
            tx_sched_ns: Some(offset + 20_000),
            tx_soft_ns: Some(offset + 21_000),
        }
    }

    #[test]
    fn stages_add_up_to_the_rtt_whatever_the_clock_offset() {
        for offset in [0u64, 1_000_000_000, 7] {
            let s = dissect(&client(), Some(&responder(offset)), false);
            let parts = [
                Stage::ClientTx,
                Stage::ResponderRx,
                Stage::ResponderApp,
                Stage::ResponderTx,
                Stage::Network,
                Stage::ClientRx,
            ];
            let sum: i64 = parts.iter().map(|&p| s.get(p).unwrap()).sum();
            assert_eq!(sum, s.get(Stage::Rtt).unwrap(), "offset {offset}");
            assert_eq!(s.get(Stage::ClientTx), Some(4_000));
            assert_eq!(s.get(Stage::ResponderRx), Some(10_000));
            assert_eq!(s.get(Stage::ResponderApp), Some(1_000));
            assert_eq!(s.get(Stage::ResponderTx), Some(4_000));
            assert_eq!(s.get(Stage::Network), Some(35_000 - 15_000));
            assert_eq!(s.get(Stage::ClientRx), Some(10_000));
            assert_eq!(
                s.get(Stage::OneWayForward),
                None,
                "no one-way across clocks"
            );
        }
    }

    #[test]
    fn one_way_only_on_a_shared_clock() {
        let s = dissect(&client(), Some(&responder(0)), true);
        assert_eq!(s.get(Stage::OneWayForward), Some(1_000));
        assert_eq!(s.get(Stage::OneWayReturn), Some(19_000));
        // Forward + return + responder residence = client kernel RTT.
        let residence = 21_000 - 6_000;
        assert_eq!(1_000 + 19_000 + residence, 40_000 - 5_000);
    }

    #[test]
    fn without_responder_stamps_the_client_side_remains() {
        let s = dissect(&client(), None, true);
        assert_eq!(s.get(Stage::Network), Some(35_000));
        assert_eq!(s.get(Stage::ResponderApp), None);
        assert_eq!(s.get(Stage::OneWayForward), None);
        let sum = s.get(Stage::ClientTx).unwrap()
            + s.get(Stage::Network).unwrap()
            + s.get(Stage::ClientRx).unwrap();
        assert_eq!(sum, s.get(Stage::Rtt).unwrap());
    }

    #[test]
    fn the_span_ping_reports_is_send_to_kernel_rx() {
        let c = client();
        // Client tx + network of the same exchange, without the client rx.
        let s = dissect(&c, None, false);
        let span = s.get(Stage::ClientTx).unwrap() + s.get(Stage::Network).unwrap();
        assert_eq!(send_to_kernel_rx(&c), Some(span as u64));
        assert_eq!(send_to_kernel_rx(&c), Some(39_000));
        let none = ClientStamps {
            rx_kernel_ns: None,
            ..c
        };
        assert_eq!(send_to_kernel_rx(&none), None);
        let early = ClientStamps {
            rx_kernel_ns: Some(999),
            ..c
        };
        assert_eq!(send_to_kernel_rx(&early), None);
    }

    #[test]
    fn missing_stamps_leave_stages_empty() {
        let c = ClientStamps {
            app_send_ns: 10,
            app_recv_ns: 30,
            ..ClientStamps::default()
        };
        let s = dissect(&c, None, false);
        assert_eq!(s.get(Stage::Rtt), Some(20));
        assert_eq!(s.get(Stage::ClientTx), None);
        assert_eq!(s.get(Stage::Network), None);
        assert!(client_stamps_monotonic(&c));
        let bad = ClientStamps {
            tx_soft_ns: Some(5),
            ..c
        };
        assert!(!client_stamps_monotonic(&bad));
    }

    #[test]
    fn stats_record_and_merge() {
        let s = dissect(&client(), Some(&responder(0)), true);
        let mut a = StageStats::default();
        a.record(&s);
        let mut b = StageStats::default();
        b.record(&s);
        b.merge(&a);
        assert_eq!(b.histogram(Stage::Rtt).count(), 2);
        let sums = b.summaries();
        assert_eq!(sums.len(), 9, "no TCP ACK stamp, no ack stage");
        assert_eq!(sums[0].stage, Stage::ClientTx);
        let mut neg = Stages::default();
        neg.set(Stage::Rtt, Some(-1));
        b.record(&neg);
        assert_eq!(b.negative, 1);
    }

    #[test]
    fn the_wire_time_of_a_round_trip() {
        // 18-byte UDP payload: a 64-byte frame, 84 wire bytes, 6.72 µs at
        // 100 Mbit/s each way (`linerate calc --link 100M --frame 64`).
        let w = wire_rtt_ns(EchoProtocol::Udp, false, 18, 100_000_000).unwrap();
        assert!((w - 2.0 * 6_720.0).abs() < 1e-6, "{w}");
        // 1472 bytes: 1518-byte frames, 123.04 µs each way.
        let w = wire_rtt_ns(EchoProtocol::Udp, false, 1472, 100_000_000).unwrap();
        assert!((w - 2.0 * 123_040.0).abs() < 1e-6, "{w}");
        // ICMP with 56 bytes of data: 102-byte frames (FCS included).
        let w = wire_rtt_ns(EchoProtocol::Icmp, false, 56, 1_000_000_000).unwrap();
        assert!((w - 2.0 * 122.0 * 8.0).abs() < 1e-6, "{w}");
        // 1 TCP byte with timestamps: 14+20+32+1+4 = 71-byte frames.
        let w = wire_rtt_ns(EchoProtocol::Tcp, false, 1, 1_000_000_000).unwrap();
        assert!((w - 2.0 * 91.0 * 8.0).abs() < 1e-6, "{w}");
        assert_eq!(wire_rtt_ns(EchoProtocol::Udp, false, 65_000, 1), None);
        assert_eq!(wire_rtt_ns(EchoProtocol::Udp, false, 18, 0), None);
    }

    #[test]
    fn reply_stamps_convert() {
        let s = ReflectorStamps {
            rx_kernel_ns: 0,
            rx_app_ns: 5,
            tx_app_ns: 6,
            prev: None,
        };
        let r = ResponderStamps::from_reply(&s, None);
        assert_eq!(r.rx_kernel_ns, None);
        assert_eq!(r.tx_app_ns, 6);
    }
}
