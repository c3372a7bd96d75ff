//! Parameters and results of a throughput session (serialised: unit-suffixed
//! field names; the result document is schema [`SCHEMA`] version
//! [`VERSION`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::sweep::Spread;

use crate::linerate::{Encap, Row};
use crate::stats::interval::{rate, Interval};
use crate::stats::sequence::SeqCounts;
use crate::units::BitRate;
use crate::wire::probe::HEADER_LEN;

/// Schema name of the JSON result.
pub const SCHEMA: &str = "linerate.throughput";
/// Version of the JSON result. Version 3: `host_load`, a run's point
/// (`settings`, `repeat`) and `omit_ns` with intervals marked `omitted`
/// (version-2 documents read back without them).
pub const VERSION: u32 = 3;
/// Largest UDP datagram payload (IPv4: 65 535 − 20 − 8).
pub const MAX_UDP_PAYLOAD: u32 = 65_507;
/// Largest TCP block (bounds a session's memory on the server).
pub const MAX_TCP_BLOCK: u32 = 4 << 20;
/// TCP receivers' SO_RCVLOWAT when none is asked, whatever the block size:
/// one full receive of the receivers' 256 KiB buffer per wake-up. The
/// kernel then wakes a sleeping receiver once this much is queued instead
/// of for every arriving segment (the sender pays each wake-up inside its
/// own send: docs/METHODOLOGY.md §5). Measured on a 2-vCPU VM under load
/// (veth, 3 s runs, two A/B series of 3–4 interleaved rounds, medians)
/// against the earlier 128 KiB (the block): CPU time of client and server
/// per GB −17 % and −7 % with 1 stream, −12 % and 0 % with 2, −5 % and +6 %
/// with 4, −2 % with 8; context switches per GB lower in every series (−5 to
/// −30 %). 512 KiB was no better than 256 KiB with 2 and 4 streams.
pub const AUTO_RECV_LOWAT: u32 = 256 << 10;
/// UDP receivers' nap when none is asked, µs: after a receive finds the
/// socket empty, the receiver sleeps this long instead of waiting in the
/// kernel, so the datagrams that arrive meanwhile queue without waking it
/// (a wake-up the sender would pay per datagram: docs/METHODOLOGY.md §5).
pub const AUTO_RECV_NAP_US: u32 = 100;
/// The longest nap a receiver may take, µs (a longer one would need a
/// receive buffer beyond what the kernel grants to hold a fast flow).
pub const MAX_RECV_NAP_US: u32 = 10_000;
/// Most streams per direction one session may open (bounds a session's
/// threads and memory on the server).
pub const MAX_STREAMS: u16 = 64;

/// TCP or UDP.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// TCP: blocks of `size_bytes` on a byte stream.
    #[default]
    Tcp,
    /// UDP: datagrams of `size_bytes` payload.
    Udp,
}

/// Which way data flows, seen from the client.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client sends, server receives.
    #[default]
    Forward,
    /// Server sends, client receives.
    Reverse,
    /// Both at once (each flow one way).
    Bidir,
}

/// Direction of one flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FlowDir {
    /// Client → server.
    Forward,
    /// Server → client.
    Reverse,
}

macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "lowercase")]
        pub enum $name { $($(#[$vm])* $v),* }
        impl $name {
            /// Every value.
            pub const ALL: &'static [Self] = &[$(Self::$v),*];
            /// The name on the command line and in JSON.
            pub fn name(self) -> &'static str { match self { $(Self::$v => $s),* } }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.name()) }
        }
        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                Self::ALL.iter().copied().find(|v| v.name() == s.trim()).ok_or_else(|| {
                    let names: Vec<&str> = Self::ALL.iter().map(|v| v.name()).collect();
                    format!("unknown value '{}' (expected one of: {})", s, names.join(", "))
                })
            }
        }
    };
}

named_enum!(
    /// How the sender hands data to the kernel.
    SendPath {
        /// Pre-filled buffers; per send only the 18-byte header is written.
        Ideal = "ideal",
        /// Before each send, copy the payload from a 64 MiB application buffer
        /// (larger than the caches) into the send buffer with the CPU.
        Typical = "typical",
        /// MSG_ZEROCOPY with completions from the error queue.
        Zerocopy = "zerocopy",
        /// sendfile(2) of the payload from a memfd (TCP).
        Sendfile = "sendfile",
        /// sendmmsg(2) batches of 64 datagrams (UDP).
        Mmsg = "mmsg",
        /// UDP_SEGMENT: up to 64 datagrams per send, split by the kernel (UDP).
        Gso = "gso",
    }
);

named_enum!(
    /// How the receiver takes data from the kernel.
    RecvPath {
        /// recv(2) into a buffer; every payload byte verified.
        Copy = "copy",
        /// MSG_TRUNC: only headers reach user space; payload not verified.
        Trunc = "trunc",
        /// recvmmsg(2) batches of 64 (UDP).
        Mmsg = "mmsg",
        /// UDP_GRO: coalesced datagrams, split in user space (UDP).
        Gro = "gro",
    }
);

/// The largest `verify_one_in`: sampling sparser than one payload in a
/// million would verify next to nothing in a test of seconds.
pub const MAX_VERIFY_ONE_IN: u32 = 1_000_000;

/// What a client asks the server to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThroughputParams {
    /// TCP or UDP.
    pub protocol: Protocol,
    /// Which way.
    pub direction: Direction,
    /// Flows per direction.
    pub streams: u16,
    /// Sending time, ns.
    pub duration_ns: u64,
    /// UDP datagram payload or TCP block, bytes (probe header included).
    pub size_bytes: u32,
    /// Paced rate per direction, bit/s of payload, split evenly over the
    /// flows (None: as fast as possible).
    pub rate_bits_per_s: Option<u64>,
    /// Send path of both ends' senders.
    pub send_path: SendPath,
    /// Receive path of both ends' receivers.
    pub recv_path: RecvPath,
    /// Receivers spin on non-blocking receives instead of sleeping in the
    /// kernel: no wake-up per datagram, at the cost of a whole CPU.
    #[serde(default)]
    pub recv_spin: bool,
    /// TCP receivers' SO_RCVLOWAT, bytes (None: [`AUTO_RECV_LOWAT`]; 1 is
    /// the kernel's default). UDP ignores it.
    #[serde(default)]
    pub recv_lowat_bytes: Option<u32>,
    /// UDP receivers' nap after finding the socket empty, µs (None:
    /// [`AUTO_RECV_NAP_US`]; 0: wait in the kernel, woken per datagram).
    /// TCP ignores it; spinning receivers never nap.
    #[serde(default)]
    pub recv_nap_us: Option<u32>,
    /// SO_SNDBUF / SO_RCVBUF, bytes.
    pub window_bytes: Option<u32>,
    /// TCP_NODELAY.
    pub nodelay: bool,
    /// TCP_CONGESTION.
    pub congestion: Option<String>,
    /// TCP_MAXSEG, bytes.
    pub mss_bytes: Option<u32>,
    /// Reporting interval, ns.
    pub interval_ns: u64,
    /// SO_NO_CHECK on UDP data sockets: the senders compute no UDP
    /// checksum (IPv4; seed 004's checksum row). Absent before: off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_udp_checksum: bool,
    /// Receivers compare the payload of one block or datagram in N with the
    /// pattern, chosen pseudo-randomly per flow, and check every header (None or 1: every
    /// payload, the default). Receiving still copies every byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_one_in: Option<u32>,
}

impl Default for ThroughputParams {
    fn default() -> Self {
        Self {
            protocol: Protocol::Tcp,
            direction: Direction::Forward,
            streams: 1,
            duration_ns: 10_000_000_000,
            size_bytes: 128 * 1024,
            rate_bits_per_s: None,
            send_path: SendPath::Ideal,
            recv_path: RecvPath::Copy,
            recv_spin: false,
            recv_lowat_bytes: None,
            recv_nap_us: None,
            window_bytes: None,
            nodelay: false,
            congestion: None,
            mss_bytes: None,
            interval_ns: 1_000_000_000,
            no_udp_checksum: false,
            verify_one_in: None,
        }
    }
}

/// Why parameters cannot run: the parameter at fault (its field name in
/// [`ThroughputParams`], e.g. `recv_lowat_bytes`) and why. Command-line
/// flag names are the binary's business: it maps the parameter to its flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{param}: {reason}")]
pub struct ParamError {
    /// The field of [`ThroughputParams`] at fault.
    pub param: &'static str,
    /// Why, in words that name no command-line flag.
    pub reason: String,
}

impl ThroughputParams {
    /// Checks the combination (both ends run this: a server never trusts a
    /// client's parameters).
    pub fn validate(&self, max_duration_ns: Option<u64>) -> Result<(), ParamError> {
        let bad = |param: &'static str, reason: String| Err(ParamError { param, reason });
        if self.streams == 0 || self.streams > MAX_STREAMS {
            return bad("streams", format!("must be 1..={MAX_STREAMS}"));
        }
        if self.duration_ns == 0 {
            return bad("duration_ns", "the test time must be above zero".into());
        }
        if let Some(max) = max_duration_ns {
            if self.duration_ns > max {
                return bad(
                    "duration_ns",
                    format!(
                        "test time {} s exceeds this server's limit of {} s",
                        self.duration_ns as f64 / 1e9,
                        max as f64 / 1e9
                    ),
                );
            }
        }
        let min = HEADER_LEN as u32;
        let max = match self.protocol {
            Protocol::Udp => MAX_UDP_PAYLOAD,
            Protocol::Tcp => MAX_TCP_BLOCK,
        };
        if self.size_bytes < min || self.size_bytes > max {
            return bad(
                "size_bytes",
                format!(
                    "size must be {min}..={max} bytes for {} (the probe header is {min} bytes)",
                    self.protocol_name()
                ),
            );
        }
        if self.interval_ns < 100_000_000 {
            return bad("interval_ns", "the interval must be at least 0.1 s".into());
        }
        if self.rate_bits_per_s == Some(0) {
            return bad("rate_bits_per_s", "a rate of 0 sends nothing".into());
        }
        match (self.protocol, self.send_path) {
            (Protocol::Tcp, SendPath::Mmsg | SendPath::Gso) => {
                return bad(
                    "send_path",
                    format!(
                        "send path '{}' is UDP-only (sendmmsg/UDP_SEGMENT)",
                        self.send_path
                    ),
                )
            }
            (Protocol::Udp, SendPath::Sendfile) => {
                return bad("send_path", "send path 'sendfile' is TCP-only here".into())
            }
            _ => {}
        }
        if self.protocol == Protocol::Tcp && self.no_udp_checksum {
            return bad("no_udp_checksum", "applies to UDP only".into());
        }
        match self.verify_one_in {
            Some(n) if !(1..=MAX_VERIFY_ONE_IN).contains(&n) => {
                return bad(
                    "verify_one_in",
                    format!("verify one payload in N, N from 1 to {MAX_VERIFY_ONE_IN}"),
                )
            }
            Some(2..) if self.recv_path == RecvPath::Trunc => {
                return bad(
                    "verify_one_in",
                    "receive path 'trunc' takes no payload to sample: headers only".into(),
                )
            }
            _ => {}
        }
        if self.protocol == Protocol::Tcp
            && matches!(self.recv_path, RecvPath::Mmsg | RecvPath::Gro)
        {
            return bad(
                "recv_path",
                format!(
                    "receive path '{}' is UDP-only (recvmmsg/UDP_GRO)",
                    self.recv_path
                ),
            );
        }
        if self.protocol == Protocol::Udp && self.send_path == SendPath::Gso {
            let segs = 65_000 / self.size_bytes.max(1);
            if segs < 2 {
                return bad(
                    "send_path",
                    "send path 'gso' needs datagrams of at most 32 500 bytes".into(),
                );
            }
        }
        if let Some(cc) = &self.congestion {
            if cc.is_empty()
                || cc.len() > 15
                || !cc.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return bad(
                    "congestion",
                    format!("congestion control name '{cc}' is not valid"),
                );
            }
        }
        if let Some(mss) = self.mss_bytes {
            if !(88..=65_535).contains(&mss) {
                return bad("mss_bytes", "the MSS must be 88..=65535 bytes".into());
            }
        }
        if let Some(lowat) = self.recv_lowat_bytes {
            if self.protocol == Protocol::Udp {
                return bad(
                    "recv_lowat_bytes",
                    "the receive low-water mark (SO_RCVLOWAT) is TCP-only: UDP receives ignore it"
                        .into(),
                );
            }
            if lowat == 0 || lowat > MAX_TCP_BLOCK {
                return bad("recv_lowat_bytes", format!(
                    "receive low-water mark must be 1..={MAX_TCP_BLOCK} bytes (1: wake on every arrival, the kernel's default)"
                ));
            }
        }
        if let Some(nap) = self.recv_nap_us {
            if self.protocol == Protocol::Tcp {
                return bad(
                    "recv_nap_us",
                    "the receivers' nap is UDP-only: TCP receivers are woken per block (recv_lowat_bytes)"
                        .into(),
                );
            }
            if self.recv_spin && nap > 0 {
                return bad(
                    "recv_nap_us",
                    "a spinning receiver (recv_spin) never naps: give one of the two".into(),
                );
            }
            if nap > MAX_RECV_NAP_US {
                return bad(
                    "recv_nap_us",
                    format!(
                    "the receivers' nap must be 0..={MAX_RECV_NAP_US} µs (0: wait in the kernel)"
                ),
                );
            }
        }
        Ok(())
    }

    /// How long UDP receivers nap when their socket is empty, µs (None:
    /// they wait in the kernel, or spin, or the flows are TCP).
    pub fn recv_nap(&self) -> Option<u32> {
        if self.protocol != Protocol::Udp || self.recv_spin {
            return None;
        }
        match self.recv_nap_us.unwrap_or(AUTO_RECV_NAP_US) {
            0 => None,
            us => Some(us),
        }
    }

    /// The SO_RCVLOWAT that TCP receivers ask for (None for UDP).
    pub fn recv_lowat(&self) -> Option<u32> {
        match self.protocol {
            Protocol::Udp => None,
            Protocol::Tcp => Some(self.recv_lowat_bytes.unwrap_or(AUTO_RECV_LOWAT)),
        }
    }

    fn protocol_name(&self) -> &'static str {
        match self.protocol {
            Protocol::Tcp => "TCP blocks",
            Protocol::Udp => "UDP datagrams",
        }
    }

    /// The flows of the session, in id order: forward flows first.
    pub fn flows(&self) -> Vec<FlowDir> {
        let n = usize::from(self.streams);
        match self.direction {
            Direction::Forward => vec![FlowDir::Forward; n],
            Direction::Reverse => vec![FlowDir::Reverse; n],
            Direction::Bidir => {
                let mut v = vec![FlowDir::Forward; n];
                v.extend(vec![FlowDir::Reverse; n]);
                v
            }
        }
    }

    /// Paced rate of one flow, bit/s.
    pub fn rate_per_flow_bits_per_s(&self) -> Option<u64> {
        self.rate_bits_per_s
            .map(|r| (r / u64::from(self.streams.max(1))).max(1))
    }
}

/// Which end measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum End {
    /// `linerate throughput`.
    Client,
    /// `linerate server`.
    Server,
}

/// What one end did with one flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FlowRole {
    /// It sent.
    Sender,
    /// It received.
    Receiver,
}

/// How much of each received payload was compared with the pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verification {
    /// Every payload byte.
    Full,
    /// Every header; the payload of one block or datagram in
    /// `verify_one_in`, chosen pseudo-randomly per flow (every byte still received).
    Sampled,
    /// Headers only (MSG_TRUNC: payload never reached user space).
    HeadersOnly,
    /// Nothing (sender side).
    None,
}

/// Zero-copy completions of a MSG_ZEROCOPY sender.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ZeroCopyReport {
    /// Sends made with MSG_ZEROCOPY.
    pub zerocopy_sends: u64,
    /// Sends whose completion arrived.
    pub completed_sends: u64,
    /// Completed sends the kernel reported as copied (SO_EE_CODE_ZEROCOPY_COPIED).
    pub copied_sends: u64,
}

/// How well a paced sender kept its rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PacingReport {
    /// Asked, bit/s of payload.
    pub asked_bits_per_s: f64,
    /// Achieved over the whole flow, bit/s of payload.
    pub achieved_bits_per_s: f64,
    /// Achieved below 99 % of asked: the sender could not keep the rate.
    pub fell_behind: bool,
}

/// Receive-side accounting of one flow.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct RecvCounts {
    /// Sequence accounting.
    pub seq: SeqCounts,
    /// Datagrams or blocks whose payload did not match the pattern, or
    /// whose header was damaged.
    pub corrupt: u64,
    /// Datagrams of another session or flow (not counted elsewhere).
    pub foreign: u64,
    /// Datagrams shorter or longer than the session's size.
    pub bad_length: u64,
    /// Datagrams or blocks of this flow whose payload was compared with the
    /// pattern and matched: all the good ones but under sampling or MSG_TRUNC.
    /// Absent before (0 from peers of older builds).
    #[serde(default)]
    pub payloads_verified: u64,
}

/// One end's view of one flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FlowReport {
    /// Flow id.
    pub flow: u16,
    /// Its direction.
    pub direction: FlowDir,
    /// This end sent or received it.
    pub role: FlowRole,
    /// The path that really ran (`ideal`, `gso`, …, `copy`, `gro`).
    pub path: String,
    /// Bytes sent or received (UDP payload or TCP stream bytes).
    pub bytes: u64,
    /// Datagrams or blocks sent or received.
    pub packets: u64,
    /// From the flow's first send/receive start to its end, ns (CLOCK_MONOTONIC).
    pub elapsed_ns: u64,
    /// CPU time of the flow's thread in user mode, ns (getrusage RUSAGE_THREAD).
    pub cpu_user_ns: u64,
    /// CPU time of the flow's thread in the kernel, ns.
    pub cpu_sys_ns: u64,
    /// Per interval.
    pub intervals: Vec<Interval>,
    /// Receivers: accounting.
    pub recv: Option<RecvCounts>,
    /// Receivers: how much was verified.
    pub verification: Verification,
    /// Zero-copy senders.
    pub zerocopy: Option<ZeroCopyReport>,
    /// Paced senders.
    pub pacing: Option<PacingReport>,
    /// TCP: the MSS in use (TCP_MAXSEG read back), bytes.
    pub mss_bytes: Option<u32>,
    /// TCP senders: retransmitted segments (TCP_INFO tcpi_total_retrans).
    pub retransmits: Option<u64>,
    /// TCP receivers: the SO_RCVLOWAT in force (read back: the kernel caps
    /// it at half the receive buffer's limit), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_lowat_bytes: Option<u32>,
    /// UDP receivers: the nap taken whenever the socket was found empty, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_nap_us: Option<u32>,
    /// Receivers: packets the kernel dropped on this flow's own socket
    /// during the flow (`sk_drops` via SO_MEMINFO; for UDP mostly a full
    /// receive buffer), so loss can be told apart: the receiver's, or the
    /// path's. None where the kernel does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_drops: Option<u64>,
    /// TCP: data segments this end sent (retransmissions included) or
    /// received (duplicates included) during the flow, as the kernel counts
    /// them (TCP_INFO tcpi_data_segs_out / tcpi_data_segs_in: MSS-sized
    /// segments, a TSO/GSO super-packet counted as the segments it carries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_segments: Option<u64>,
    /// TCP senders: from the flow's start until every byte written had
    /// been sent and acknowledged (TCP_INFO: nothing unsent or unacked), ns.
    /// `elapsed_ns` ends at the last write, when data may still be queued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_ns: Option<u64>,
    /// What went wrong, if the flow ended early.
    pub error: Option<String>,
}

impl FlowReport {
    /// A report of flow `flow` with nothing measured yet: no bytes, no
    /// time, no counts (the flow thread fills in what it measured).
    pub fn new(flow: u16, direction: FlowDir, role: FlowRole, path: String) -> Self {
        Self {
            flow,
            direction,
            role,
            path,
            bytes: 0,
            packets: 0,
            elapsed_ns: 0,
            cpu_user_ns: 0,
            cpu_sys_ns: 0,
            intervals: Vec::new(),
            recv: None,
            verification: Verification::None,
            zerocopy: None,
            pacing: None,
            mss_bytes: None,
            retransmits: None,
            recv_lowat_bytes: None,
            recv_nap_us: None,
            socket_drops: None,
            tcp_segments: None,
            acked_ns: None,
            error: None,
        }
    }

    /// Bytes per second over the flow.
    pub fn bytes_per_s(&self) -> f64 {
        rate(self.bytes, self.elapsed_ns)
    }

    /// Packets per second over the flow.
    pub fn packets_per_s(&self) -> f64 {
        rate(self.packets, self.elapsed_ns)
    }

    /// CPU ns per byte (user + system).
    pub fn cpu_ns_per_byte(&self) -> Option<f64> {
        (self.bytes > 0)
            .then(|| self.cpu_user_ns.saturating_add(self.cpu_sys_ns) as f64 / self.bytes as f64)
    }

    /// CPU ns per packet (user + system).
    pub fn cpu_ns_per_packet(&self) -> Option<f64> {
        (self.packets > 0)
            .then(|| self.cpu_user_ns.saturating_add(self.cpu_sys_ns) as f64 / self.packets as f64)
    }
}

/// One end's measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SideReport {
    /// Which end.
    pub end: End,
    /// False when the test ended early (peer gone, error, interrupted).
    pub complete: bool,
    /// Why it is incomplete, or other remarks.
    pub notes: Vec<String>,
    /// Per flow.
    pub flows: Vec<FlowReport>,
    /// What the interface carrying this end's sending flows counted while
    /// they ran (absent: nothing sent, or the interface unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Egress>,
}

/// Packets an interface sent, from its own counter: frames on a real link;
/// on veth and loopback, skbs, where a GSO or TSO super-packet counts once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Egress {
    /// Interface name (in this end's network namespace).
    pub interface: String,
    /// Its tx_packets counter's increase while the flows ran (all traffic
    /// of the interface, the control connection's included).
    pub packets: u64,
}

impl Egress {
    /// How many datagrams or blocks each packet on the interface carried,
    /// on average, for `sent` of them (1.0: one frame each).
    pub fn per_packet(&self, sent: u64) -> Option<f64> {
        (self.packets > 0).then(|| sent as f64 / self.packets as f64)
    }
}

/// The MSS of a TCP test as its senders read it back (a receiving
/// socket's TCP_MAXSEG need not be the MSS the data was sent with); a
/// receiver's only when no sender said.
pub fn sender_mss<'a>(sides: impl IntoIterator<Item = &'a SideReport> + Clone) -> Option<u32> {
    let of = |role: Option<FlowRole>| {
        sides
            .clone()
            .into_iter()
            .flat_map(|s| s.flows.iter())
            .filter(|f| role.is_none_or(|r| f.role == r))
            .find_map(|f| f.mss_bytes)
    };
    of(Some(FlowRole::Sender)).or_else(|| of(None))
}

/// Sum of several flows of one direction, as one end saw them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirectionSum {
    /// Bytes.
    pub bytes: u64,
    /// Datagrams or blocks.
    pub packets: u64,
    /// The longest flow's elapsed time, ns.
    pub elapsed_ns: u64,
    /// Payload throughput, bytes/s.
    pub bytes_per_s: f64,
    /// Datagrams or blocks per second.
    pub packets_per_s: f64,
    /// CPU time of the flows' threads, ns.
    pub cpu_ns: u64,
    /// Lost (receivers).
    pub lost: u64,
    /// Reordered (receivers).
    pub reordered: u64,
    /// Duplicates (receivers).
    pub duplicates: u64,
    /// Corrupt (receivers).
    pub corrupt: u64,
    /// TCP data segments counted by the kernel, when every flow has them.
    pub tcp_segments: Option<u64>,
    /// TCP senders: the latest flow's time to its last acknowledgement, ns,
    /// when every flow has one.
    pub acked_ns: Option<u64>,
}

impl SideReport {
    /// Datagrams or blocks this end sent, all flows and directions.
    pub fn sent_packets(&self) -> u64 {
        self.flows
            .iter()
            .filter(|f| f.role == FlowRole::Sender)
            .map(|f| f.packets)
            .fold(0, u64::saturating_add)
    }

    /// Sum of the flows of `dir` this end had in `role`.
    pub fn sum(&self, dir: FlowDir, role: FlowRole) -> Option<DirectionSum> {
        let flows: Vec<&FlowReport> = self
            .flows
            .iter()
            .filter(|f| f.direction == dir && f.role == role)
            .collect();
        if flows.is_empty() {
            return None;
        }
        let mut s = DirectionSum {
            tcp_segments: flows
                .iter()
                .try_fold(0u64, |a, f| f.tcp_segments.map(|n| a.saturating_add(n))),
            acked_ns: flows
                .iter()
                .map(|f| f.acked_ns)
                .collect::<Option<Vec<u64>>>()
                .and_then(|v| v.into_iter().max()),
            ..DirectionSum::default()
        };
        for f in &flows {
            // Saturating: a peer's report is network input.
            s.bytes = s.bytes.saturating_add(f.bytes);
            s.packets = s.packets.saturating_add(f.packets);
            s.elapsed_ns = s.elapsed_ns.max(f.elapsed_ns);
            s.cpu_ns = s
                .cpu_ns
                .saturating_add(f.cpu_user_ns.saturating_add(f.cpu_sys_ns));
            if let Some(r) = &f.recv {
                s.lost = s.lost.saturating_add(r.seq.lost);
                s.reordered = s.reordered.saturating_add(r.seq.reordered);
                s.duplicates = s.duplicates.saturating_add(r.seq.duplicates);
                s.corrupt = s.corrupt.saturating_add(r.corrupt);
            }
        }
        s.bytes_per_s = rate(s.bytes, s.elapsed_ns);
        s.packets_per_s = rate(s.packets, s.elapsed_ns);
        Some(s)
    }
}

/// The maximum the declared link allows for this test's packets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LineMax {
    /// The declared link speed, bit/s.
    pub link_bits_per_s: u64,
    /// The encapsulation the model used (udp4, tcp6 …).
    pub encap: Encap,
    /// Payload bytes per frame the model used (UDP: datagram payload; TCP: MSS).
    pub payload_bytes: u32,
    /// Frame length, header to FCS, bytes.
    pub frame_bytes: u32,
    /// Frames per second at line rate.
    pub frames_per_s: f64,
    /// Payload throughput at line rate, bytes/s.
    pub payload_bytes_per_s: f64,
    /// Payload throughput at line rate, bit/s (absent in version 1).
    #[serde(default)]
    pub payload_bits_per_s: f64,
    /// Whether the frame is a jumbo frame (above 1518 bytes untagged),
    /// allowed because the path's MTU is above 1500 (absent in version 1).
    #[serde(default)]
    pub jumbo: bool,
}

/// The standard Ethernet MTU, assumed when the path's is not known.
pub const STANDARD_MTU: u32 = 1500;

/// Why no line-rate maximum was computed.
#[derive(
    Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, thiserror::Error,
)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum NoLineMax {
    /// No link speed is known (none given, no bed, loopback and veth have none).
    #[error("no line rate known: loopback and veth have none (give the link speed)")]
    NoLink,
    /// A TCP test whose MSS could not be read.
    #[error("the MSS in use could not be read, so no frame size is known")]
    NoMss,
    /// One payload needs an IP packet larger than the path's MTU: it is
    /// fragmented (UDP), so no single frame carries it.
    #[error(
        "a {payload_bytes}-byte payload needs a {packet_bytes}-byte IP packet, above the path's MTU of {mtu_bytes} B: it crosses the link fragmented, not as one frame"
    )]
    AboveMtu {
        /// Payload per packet, bytes.
        payload_bytes: u32,
        /// The IP packet carrying it, bytes.
        packet_bytes: u32,
        /// The path's MTU, bytes.
        mtu_bytes: u32,
    },
    /// The path's MTU allows packets no Ethernet frame carries (loopback's
    /// 65 536 B): the model has no frame for them.
    #[error(
        "the path's MTU of {mtu_bytes} B{on} allows frames of {frame_bytes} B, beyond the largest Ethernet (jumbo) frame of {max_frame_bytes} B: the path is not Ethernet, so no line rate applies"
    )]
    NotEthernet {
        /// The path's MTU, bytes.
        mtu_bytes: u32,
        /// " on lo" or "".
        on: String,
        /// The frame the payload would need, bytes.
        frame_bytes: u32,
        /// The largest frame the model allows, bytes.
        max_frame_bytes: u32,
    },
    /// The model refused the frame for another reason.
    #[error("{message}")]
    Model {
        /// The model's words.
        message: String,
    },
}

impl LineMax {
    /// The model's maximum for `payload` bytes per frame with `encap` on
    /// `link`, through a path whose MTU is `mtu` bytes (None: the standard
    /// 1500). Frames above 1518 bytes (jumbo) are allowed when the MTU is
    /// above 1500; a payload the MTU cannot carry in one packet has none.
    pub fn new(
        link: BitRate,
        encap: Encap,
        payload: u32,
        mtu: Option<u32>,
    ) -> Result<Self, NoLineMax> {
        let mtu_bytes = mtu.unwrap_or(STANDARD_MTU);
        let packet_bytes = payload + encap.l3l4_header_bytes();
        if packet_bytes > mtu_bytes {
            return Err(NoLineMax::AboveMtu {
                payload_bytes: payload,
                packet_bytes,
                mtu_bytes,
            });
        }
        let jumbo = mtu_bytes > STANDARD_MTU;
        let max_frame_bytes = encap.max_frame_bytes(jumbo);
        let frame_bytes = packet_bytes + encap.l2_overhead_bytes();
        if frame_bytes > max_frame_bytes {
            return Err(NoLineMax::NotEthernet {
                mtu_bytes,
                on: String::new(),
                frame_bytes,
                max_frame_bytes,
            });
        }
        let model = |e: crate::linerate::ModelError| NoLineMax::Model {
            message: e.to_string(),
        };
        let frame = encap.frame_for_payload(payload, jumbo).map_err(model)?;
        let row = Row::new(link, frame).map_err(model)?;
        Ok(Self {
            link_bits_per_s: link.bps(),
            encap,
            payload_bytes: payload,
            frame_bytes: frame.frame_bytes,
            frames_per_s: row.frame_rate.per_s(),
            payload_bytes_per_s: row.payload_bytes_per_s(),
            payload_bits_per_s: row.payload_bytes_per_s() * 8.0,
            jumbo: frame.frame_bytes > encap.max_frame_bytes(false),
        })
    }

    /// Share of the maximum, in percent.
    pub fn percent_of(&self, measured_bytes_per_s: f64) -> f64 {
        if self.payload_bytes_per_s > 0.0 {
            measured_bytes_per_s / self.payload_bytes_per_s * 100.0
        } else {
            0.0
        }
    }
}

/// Where the link speed came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LinkSource {
    /// Given for the test (the `link` setting).
    Given,
    /// The testbed's emulated link.
    Bed,
}

/// What is known of the path the test crossed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PathFacts {
    /// The link speed used for the maximum possible, bit/s.
    #[serde(default)]
    pub link_bits_per_s: Option<u64>,
    /// Where it came from.
    #[serde(default)]
    pub link_source: Option<LinkSource>,
    /// The interface the client's packets left by (in its namespace).
    #[serde(default)]
    pub interface: Option<String>,
    /// That interface's MTU (or the bed's), bytes.
    #[serde(default)]
    pub mtu_bytes: Option<u32>,
    /// The bucket of a token-bucket (tbf) link, bytes: an idle link passes
    /// this much at once above its rate, so a window of T seconds may carry
    /// rate × T + bucket (None: no bucket known, or none, as on linerate's
    /// emulator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_bytes: Option<u64>,
}

/// Derived figures of one flow at one end (computed once, here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FlowFigures {
    /// Flow id.
    pub flow: u16,
    /// Its direction.
    pub direction: FlowDir,
    /// The end that measured.
    pub end: End,
    /// Sent or received there.
    pub role: FlowRole,
    /// Payload throughput, bit/s.
    pub bits_per_s: f64,
    /// Datagrams or blocks per second.
    pub packets_per_s: f64,
    /// Share of the line-rate maximum, percent (None: no line rate known).
    pub pct_of_max: Option<f64>,
    /// CPU ns per byte (user + system; None: no bytes).
    pub cpu_ns_per_byte: Option<f64>,
    /// CPU ns per datagram or block (None: none).
    pub cpu_ns_per_packet: Option<f64>,
}

/// One direction's flows summed at one end, with the seed-000 table's
/// figures (a row of its Table 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirectionFigures {
    /// Which way.
    pub direction: FlowDir,
    /// The end that measured.
    pub end: End,
    /// Sent or received there.
    pub role: FlowRole,
    /// The send or receive path.
    pub path: String,
    /// Packets: UDP datagrams; TCP data segments as the kernel counted them,
    /// else bytes / MSS (`packets_estimated`). None: no MSS known.
    pub packets: Option<u64>,
    /// `packets` is an estimate (TCP without the kernel's count).
    pub packets_estimated: bool,
    /// Mean payload per packet, bytes (TCP: bytes / segments, else the MSS).
    pub payload_per_packet_bytes: Option<u64>,
    /// Payload bytes.
    pub bytes: u64,
    /// The time the rate is over, ns: the longest flow's, or for TCP
    /// senders until the last byte was acknowledged (`time_to_ack`).
    pub time_ns: u64,
    /// `time_ns` runs to the last acknowledgement (TCP senders).
    pub time_to_ack: bool,
    /// Payload throughput, bytes/s.
    pub bytes_per_s: f64,
    /// Payload throughput, bit/s.
    pub bits_per_s: f64,
    /// Packets per second (None: packets unknown).
    pub packets_per_s: Option<f64>,
    /// Share of the line-rate maximum, percent (None: no line rate known).
    pub pct_of_max: Option<f64>,
    /// CPU ns per byte of the flows' threads (None: no bytes).
    pub cpu_ns_per_byte: Option<f64>,
    /// The plain sums.
    pub sum: DirectionSum,
}

/// Every derived figure of a result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Figures {
    /// Per flow and end, in flow order (senders first).
    pub flows: Vec<FlowFigures>,
    /// Per direction, role and end: forward first, senders first, client first.
    pub directions: Vec<DirectionFigures>,
    /// The interval table of each direction (absent before linerate 0.1's
    /// interval figures: an empty list).
    #[serde(default)]
    pub intervals: Vec<DirectionIntervals>,
}

/// One direction's intervals, all its streams summed, as measured by its
/// receivers (by its senders when the receivers' figures are missing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirectionIntervals {
    /// Which way.
    pub direction: FlowDir,
    /// The end that measured.
    pub end: End,
    /// Whether it measured as receiver or sender.
    pub role: FlowRole,
    /// The intervals, in order.
    pub rows: Vec<IntervalFigures>,
}

/// One interval summed over streams.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IntervalFigures {
    /// Start, ns since the flows' start.
    pub start_ns: u64,
    /// End, ns since the flows' start.
    pub end_ns: u64,
    /// Payload bytes.
    pub bytes: u64,
    /// Datagrams or blocks.
    pub packets: u64,
    /// Payload bit/s over the interval.
    pub bits_per_s: f64,
    /// Datagrams or blocks per second over the interval.
    pub packets_per_s: f64,
    /// The interval starts within the omitted first seconds (`omit_ns`):
    /// shown, not counted in the figures.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub omitted: bool,
}

impl Figures {
    /// The row of `dir` at the first end that had it in `role`.
    pub fn direction(&self, dir: FlowDir, role: FlowRole) -> Option<&DirectionFigures> {
        self.directions
            .iter()
            .find(|d| d.direction == dir && d.role == role)
    }
}

/// The whole result of `linerate throughput` (JSON: schema
/// `linerate.throughput`, version 2, inside the common envelope).
///
/// Version 2 dropped `complete` and `notes` (the envelope's flags say both)
/// and added `path`, `no_line_max`, `one_sided` and `figures`; a version-1
/// document still reads into this type (its extra fields are ignored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThroughputResult {
    /// The server as given.
    pub server: String,
    /// What ran.
    pub params: ThroughputParams,
    /// The clock of every interval and elapsed time.
    pub clock: String,
    /// The client's measurements.
    pub client: SideReport,
    /// The server's measurements (None: it never sent them, or one-sided).
    pub server_side: Option<SideReport>,
    /// The line-rate model (None: see `no_line_max`).
    pub line_max: Option<LineMax>,
    /// Why there is no `line_max` (absent in version 1).
    #[serde(default)]
    pub no_line_max: Option<NoLineMax>,
    /// The link and MTU of the path (absent in version 1).
    #[serde(default)]
    pub path: PathFacts,
    /// Share of the client host's CPU time stolen by a hypervisor during
    /// the test, percent (`/proc/stat`; None when unreadable).
    pub steal_pct: Option<f64>,
    /// Sent to a discard sink: sender-side figures only (absent in version 1).
    #[serde(default)]
    pub one_sided: bool,
    /// Derived figures: bits/s, packets/s, % of the maximum possible
    /// (absent in version 1).
    #[serde(default)]
    pub figures: Figures,
    /// The bed's link emulation during the test: which shaper, and what
    /// linerate's emulator counted (absent when not measured on a bed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_emulation: Option<crate::emu::LinkAccount>,
    /// Load from elsewhere on the client's host during the test (absent in
    /// version 2, or when `/proc` could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_load: Option<crate::hostload::HostLoad>,
    /// The swept settings of this run's point (`[("mtu", "9000")]`; empty
    /// without sweeps).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<(String, String)>,
    /// Which repeat of its point this run is (1-based; absent without
    /// `repeat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    /// The first ns of the test left out of the figures (iperf3's `-O`):
    /// each direction's bytes, packets and time count from the first
    /// interval starting at or after it; the test ran this much longer
    /// than its `duration_ns` asked. 0: nothing omitted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omit_ns: u64,
    /// An iperf3 server's own account of the test (`--iperf3`: the text it
    /// returns for `--get-server-output`), as it sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output: Option<String>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl ThroughputResult {
    /// The run's point: its settings and, when several send paths ran, its
    /// path (`mtu=9000 path=typical`), or its path alone.
    pub fn point_label(&self) -> String {
        let mut l = crate::sweep::label(&self.settings);
        if !self.settings.iter().any(|(k, _)| k == "path") {
            l = match self.settings.is_empty() {
                true => format!("path={}", self.params.send_path),
                false => format!("{l} path={}", self.params.send_path),
            };
        }
        l
    }

    /// The direction the test measures (forward, or reverse with
    /// `--reverse`; forward of a bidirectional test) as received, else as
    /// sent.
    pub fn main_direction(&self) -> Option<&DirectionFigures> {
        let dir = if self.params.direction == Direction::Reverse {
            FlowDir::Reverse
        } else {
            FlowDir::Forward
        };
        self.figures
            .direction(dir, FlowRole::Receiver)
            .or_else(|| self.figures.direction(dir, FlowRole::Sender))
    }
}

/// One point of a matrix run several times (or once beside other points):
/// the median with min–max of its runs' main-direction figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PointSpread {
    /// The point ([`ThroughputResult::point_label`]).
    pub label: String,
    /// Its runs' indices in `runs`.
    pub runs: Vec<usize>,
    /// Payload bit/s (as received, else as sent).
    pub bits_per_s: Option<Spread>,
    /// Packets per second.
    pub packets_per_s: Option<Spread>,
    /// Percent of the line-rate maximum.
    pub pct_of_max: Option<Spread>,
}

impl PointSpread {
    /// The points of `runs`, in the order they first appear (named by
    /// their settings alone when every run took the same send path).
    pub fn of(runs: &[crate::result::Envelope<ThroughputResult>]) -> Vec<Self> {
        let mut out: Vec<Self> = Vec::new();
        let one_path = runs
            .windows(2)
            .all(|w| w[0].result.params.send_path == w[1].result.params.send_path);
        for (i, r) in runs.iter().enumerate() {
            let label = match one_path && !r.result.settings.is_empty() {
                true => crate::sweep::label(&r.result.settings),
                false => r.result.point_label(),
            };
            match out.iter_mut().find(|p| p.label == label) {
                Some(p) => p.runs.push(i),
                None => out.push(Self {
                    label,
                    runs: vec![i],
                    bits_per_s: None,
                    packets_per_s: None,
                    pct_of_max: None,
                }),
            }
        }
        for p in &mut out {
            let dirs: Vec<&DirectionFigures> = p
                .runs
                .iter()
                .filter_map(|&i| runs[i].result.main_direction())
                .collect();
            p.bits_per_s = Spread::of(dirs.iter().map(|d| d.bits_per_s));
            p.packets_per_s = Spread::of(dirs.iter().filter_map(|d| d.packets_per_s));
            p.pct_of_max = Spread::of(dirs.iter().filter_map(|d| d.pct_of_max));
        }
        out
    }
}

/// Several runs that differ only in the send path (`linerate throughput
/// --path A,B,…`; schema [`SCENARIOS_SCHEMA`], version [`SCENARIOS_VERSION`]).
/// Each run is a whole `linerate.throughput` document; the envelope around
/// this carries every run's flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Scenarios {
    /// One per send path, in the order given (with sweeps and repeats: per
    /// point, per repeat, per path).
    pub runs: Vec<crate::result::Envelope<ThroughputResult>>,
    /// Per point (settings and path), the median with min–max of its runs
    /// (absent in version 2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub points: Vec<PointSpread>,
}

/// Schema name of the scenarios document.
pub const SCENARIOS_SCHEMA: &str = "linerate.throughput.scenarios";
/// Version of the scenarios document. Version 3: sweeps and repeats (each
/// run's `settings` and `repeat`, and `points`; version-2 documents read
/// back without them).
pub const SCENARIOS_VERSION: u32 = 3;

impl Scenarios {
    /// Several runs in one document on `host`, started when the first run
    /// did; its flags are every run's, each saying which scenario raised it.
    pub fn document(
        runs: Vec<crate::result::Envelope<ThroughputResult>>,
        host: crate::result::HostFacts,
    ) -> crate::result::Envelope<Self> {
        let mut flags = Vec::new();
        for (i, r) in runs.iter().enumerate() {
            for f in &r.flags {
                let mut f = f.clone();
                let mut point = r.result.point_label();
                if let Some(n) = r.result.repeat {
                    point = format!("{point}, run {n}");
                }
                f.message = format!("scenario {} ({point}): {}", i + 1, f.message);
                flags.push(f.with("scenario", i + 1));
            }
        }
        let started_at = runs.first().and_then(|r| r.started_at.clone());
        let points = PointSpread::of(&runs);
        let mut doc = crate::result::Envelope::new(
            SCENARIOS_SCHEMA,
            SCENARIOS_VERSION,
            Self { runs, points },
        )
        .on(host)
        .flagged(flags);
        doc.started_at = started_at;
        doc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `p` is refused, and the reason says `why`.
    fn refused(p: &ThroughputParams, why: &str) -> bool {
        p.validate(None).is_err_and(|e| e.to_string().contains(why))
    }

    #[test]
    fn params_validate() {
        let mut p = ThroughputParams::default();
        assert!(p.validate(None).is_ok());
        p.send_path = SendPath::Gso;
        assert!(refused(&p, "UDP-only"));
        p.protocol = Protocol::Udp;
        p.size_bytes = 1472;
        assert!(p.validate(None).is_ok());
        p.size_bytes = 10;
        assert!(p.validate(None).is_err());
        p.size_bytes = 18;
        assert!(p.validate(Some(1_000_000_000)).is_err());
        p.streams = 0;
        assert!(p.validate(None).is_err());
    }

    #[test]
    fn verify_one_in_bounds() {
        let mut p = ThroughputParams::default();
        for (n, ok) in [
            (0, false),
            (1, true),
            (2, true),
            (MAX_VERIFY_ONE_IN, true),
            (MAX_VERIFY_ONE_IN + 1, false),
            (u32::MAX, false),
        ] {
            p.verify_one_in = Some(n);
            assert_eq!(p.validate(None).is_ok(), ok, "{n}");
            if !ok {
                assert!(refused(&p, "from 1 to 1000000"), "{n}");
            }
        }
        // Headers only: nothing to sample, yet one in 1 (every payload
        // that reaches user space: none) is no contradiction.
        p.recv_path = RecvPath::Trunc;
        p.verify_one_in = Some(2);
        assert!(refused(&p, "trunc"));
        p.verify_one_in = Some(1);
        assert!(p.validate(None).is_ok());
    }

    #[test]
    fn recv_lowat_defaults_and_limits() {
        let mut p = ThroughputParams::default();
        // TCP: 256 KiB whatever the block.
        assert_eq!(p.recv_lowat(), Some(256 * 1024));
        p.size_bytes = 1000;
        assert_eq!(p.recv_lowat(), Some(AUTO_RECV_LOWAT));
        p.size_bytes = 1 << 20;
        assert_eq!(p.recv_lowat(), Some(AUTO_RECV_LOWAT));
        p.recv_lowat_bytes = Some(1);
        assert!(p.validate(None).is_ok());
        assert_eq!(p.recv_lowat(), Some(1));
        p.recv_lowat_bytes = Some(0);
        assert!(refused(&p, "1..="));
        p.recv_lowat_bytes = Some(MAX_TCP_BLOCK + 1);
        assert!(p.validate(None).is_err());
        // UDP: never set, and asking for it is an error.
        p.protocol = Protocol::Udp;
        p.size_bytes = 1472;
        p.recv_lowat_bytes = None;
        assert_eq!(p.recv_lowat(), None);
        p.recv_lowat_bytes = Some(4096);
        assert!(refused(&p, "TCP-only"));
        // Parameters from a client that predates the field.
        let mut v = serde_json::to_value(ThroughputParams::default()).unwrap();
        v.as_object_mut().unwrap().remove("recv_lowat_bytes");
        let back: ThroughputParams = serde_json::from_value(v).unwrap();
        assert_eq!(back.recv_lowat_bytes, None);
    }

    #[test]
    fn recv_nap_defaults_and_limits() {
        let mut p = ThroughputParams {
            protocol: Protocol::Udp,
            size_bytes: 18,
            ..ThroughputParams::default()
        };
        assert_eq!(p.recv_nap(), Some(AUTO_RECV_NAP_US));
        p.recv_nap_us = Some(250);
        assert!(p.validate(None).is_ok());
        assert_eq!(p.recv_nap(), Some(250));
        p.recv_nap_us = Some(0);
        assert!(p.validate(None).is_ok());
        assert_eq!(p.recv_nap(), None, "0: wait in the kernel");
        p.recv_nap_us = Some(MAX_RECV_NAP_US + 1);
        assert!(refused(&p, "0..="));
        // Spinning receivers never nap; asking for both is an error.
        p.recv_nap_us = None;
        p.recv_spin = true;
        assert_eq!(p.recv_nap(), None);
        assert!(p.validate(None).is_ok());
        p.recv_nap_us = Some(100);
        assert!(refused(&p, "never naps"));
        // TCP: never, and asking is an error.
        let mut t = ThroughputParams::default();
        assert_eq!(t.recv_nap(), None);
        t.recv_nap_us = Some(100);
        assert!(refused(&t, "UDP-only"));
    }

    #[test]
    fn the_mss_is_the_senders() {
        let flow = |role, mss| FlowReport {
            mss_bytes: mss,
            ..FlowReport::new(0, FlowDir::Reverse, role, String::new())
        };
        let side = |end, flows| SideReport {
            end,
            complete: true,
            notes: Vec::new(),
            flows,
            egress: None,
        };
        // Reverse: the client receives (its socket says 32768), the server sends.
        let client = side(End::Client, vec![flow(FlowRole::Receiver, Some(32_768))]);
        let server = side(End::Server, vec![flow(FlowRole::Sender, Some(65_483))]);
        assert_eq!(sender_mss([&client, &server]), Some(65_483));
        assert_eq!(
            sender_mss([&client]),
            Some(32_768),
            "no sender: a receiver's"
        );
        let none = side(End::Client, vec![flow(FlowRole::Sender, None)]);
        assert_eq!(sender_mss([&none]), None);
    }

    #[test]
    fn flows_and_names() {
        let p = ThroughputParams {
            direction: Direction::Bidir,
            streams: 2,
            ..ThroughputParams::default()
        };
        assert_eq!(
            p.flows(),
            vec![
                FlowDir::Forward,
                FlowDir::Forward,
                FlowDir::Reverse,
                FlowDir::Reverse
            ]
        );
        assert_eq!("gso".parse::<SendPath>().unwrap(), SendPath::Gso);
        assert!("fast".parse::<SendPath>().unwrap_err().contains("ideal"));
    }

    #[test]
    fn line_max_matches_seed_000() {
        // 1500-byte payloads of plain Ethernet at 100 Mbit/s: 12.19 MB/s.
        let m = LineMax::new(BitRate::from_mbps(100), Encap::ETHERNET, 1500, None).unwrap();
        assert!((m.payload_bytes_per_s - 12_190_000.0).abs() < 10_000.0);
        assert!((m.percent_of(12.0e6) - 98.44).abs() < 0.05);
        // 18-byte UDP payload = 64-byte frame.
        let m = LineMax::new(BitRate::from_gbps(1), Encap::UDP4, 18, None).unwrap();
        assert_eq!(m.frame_bytes, 64);
        // 1472 fits IPv4 in 1518 bytes; over IPv6 it would not.
        assert_eq!(
            LineMax::new(BitRate::from_gbps(1), Encap::UDP4, 1472, None)
                .unwrap()
                .frame_bytes,
            1518
        );
        let udp6: Encap = "udp6".parse().unwrap();
        assert!(LineMax::new(BitRate::from_gbps(1), udp6, 1472, None).is_err());
    }
}
