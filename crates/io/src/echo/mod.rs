//! Request/response probes for `linerate latency`: linerate's reflector (UDP
//! and TCP), and the clients for it, for plain RFC 862 echo servers, and for
//! ICMP echo.
//!
//! Clocks: the schedule runs on CLOCK_MONOTONIC (`Instant`); every stamp that
//! goes into a stage is CLOCK_REALTIME ns, because that is the clock of the
//! kernel's software timestamps and intervals are only ever taken between
//! stamps of one host's clock.

mod driver;
mod icmp;
mod remote;
mod session;
mod tcp;
mod udp;

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use linerate_core::latency::{ClientStamps, EchoProtocol};
pub use linerate_core::latency::{ReflectorMode, ReflectorRecord, ReflectorReport};
use linerate_core::procedure::pingpong::{Counts, Schedule};
use linerate_core::wire::echo::ReflectorStamps;

pub use driver::{hardware_stamps, run, run_each, APP_TIMESTAMP_SOURCE, TIMESTAMP_SOURCE};
pub use icmp::run_icmp_client;
pub use remote::{run_remote, serve, RemoteRun};
pub use session::{
    run_client, run_client_in, run_with_local_reflector, send_to_kernel_rx_summary, summarize,
    Placement,
};
pub use tcp::{run_tcp_client, TcpReflector};
pub use udp::{run_udp_client, UdpReflector};

/// Why an echo run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum EchoIoError {
    /// A socket call failed.
    #[error("{what}")]
    Socket {
        /// Which call, on what.
        what: String,
        /// The error.
        source: io::Error,
    },
    /// The peer broke the protocol.
    #[error("protocol: {0}")]
    Protocol(String),
    /// A thread could not enter its network namespace.
    #[error(transparent)]
    Netns(#[from] crate::netns::NetnsError),
    /// A configuration's settings (a bed's, set by the caller) could not
    /// be made.
    #[error("setting {point}")]
    Prepare {
        /// The configuration's label (`mtu=9000`).
        point: String,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

pub(crate) fn sock_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> EchoIoError {
    let what = what.into();
    move |source| EchoIoError::Socket { what, source }
}

/// How a reflector serves one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReflectorConfig {
    /// The session token the requests must carry.
    pub session: u32,
    /// How it waits.
    pub mode: ReflectorMode,
    /// Copy each request into a separate buffer before answering (seed 004's
    /// memcpy row).
    pub copy: bool,
    /// SO_NO_CHECK on the reflector's socket (UDP over IPv4).
    pub no_udp_checksum: bool,
    /// Per-exchange records kept at most (memory bound); beyond, counted only.
    pub max_records: usize,
    /// Longest the session may last.
    pub max_duration: Duration,
    /// The session ends after this long without a request.
    pub idle_timeout: Duration,
    /// Ask the kernel for receive and transmit stamps (off: application
    /// stamps only, no stamping cost on the reply's path).
    pub kernel_stamps: bool,
    /// Answer only this address (the control peer that opened the
    /// session); `None`: any address with the session's token.
    pub peer: Option<std::net::IpAddr>,
}

/// Whether a request from `from` may be answered under `peer` (port 0 never).
pub(crate) fn allowed(peer: Option<std::net::IpAddr>, from: SocketAddr) -> bool {
    let canon = |ip: std::net::IpAddr| match ip {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4),
        v4 => v4,
    };
    from.port() != 0 && peer.is_none_or(|p| canon(p) == canon(from.ip()))
}

impl ReflectorConfig {
    /// Defaults for a session `session`.
    pub fn new(session: u32) -> Self {
        Self {
            session,
            mode: ReflectorMode::Blocking,
            copy: false,
            no_udp_checksum: false,
            max_records: 1 << 20,
            max_duration: Duration::from_secs(3600),
            idle_timeout: Duration::from_secs(30),
            kernel_stamps: true,
            peer: None,
        }
    }
}

/// A bound reflector of either protocol.
#[derive(Debug)]
pub(crate) enum Reflector {
    /// UDP echo.
    Udp(UdpReflector),
    /// TCP echo.
    Tcp(TcpReflector),
}

impl Reflector {
    /// Binds a reflector for `proto` (not ICMP: the kernel answers that).
    pub(crate) fn bind(
        proto: EchoProtocol,
        addr: SocketAddr,
        cfg: ReflectorConfig,
    ) -> Result<Self, EchoIoError> {
        match proto {
            EchoProtocol::Udp => UdpReflector::bind(addr, cfg).map(Self::Udp),
            EchoProtocol::Tcp => TcpReflector::bind(addr, cfg).map(Self::Tcp),
            EchoProtocol::Icmp => Err(EchoIoError::Protocol(
                "ICMP is answered by the kernel, not by a reflector".into(),
            )),
        }
    }

    /// Where it listens.
    pub(crate) fn local_addr(&self) -> Result<SocketAddr, EchoIoError> {
        match self {
            Self::Udp(r) => r.local_addr(),
            Self::Tcp(r) => r.local_addr(),
        }
        .map_err(sock_err("getsockname"))
    }

    /// Serves until `stop` or its limits.
    pub(crate) fn run(
        self,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<ReflectorReport, EchoIoError> {
        match self {
            Self::Udp(r) => r.run(stop),
            Self::Tcp(r) => r.run(stop),
        }
    }
}

/// How the client reaches its responder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// The responder.
    pub target: SocketAddr,
    /// Session token (linerate reflector); ignored by plain echo servers.
    pub session: u32,
    /// Bytes per request (UDP ≥ 16 for linerate's header; TCP ≥ 1).
    pub size: usize,
    /// When to send.
    pub schedule: Schedule,
    /// Spin on non-blocking receives instead of sleeping.
    pub spin: bool,
    /// SO_NO_CHECK on the client's socket.
    pub no_udp_checksum: bool,
    /// The responder is a plain echo server (RFC 862) or the kernel (ICMP):
    /// replies come back unchanged and carry no responder stamps.
    pub plain_echo: bool,
    /// Ask the kernel for stamps (off: the RTT from application stamps
    /// only, for comparison with tools that stamp nothing).
    pub kernel_stamps: bool,
    /// With kernel stamps, one exchange in this many is stamped and
    /// dissected; the others measure the RTT free of stamping cost (UDP
    /// and TCP to a linerate reflector; ICMP, whose other exchanges keep
    /// the reply's receive stamp; 1: every exchange).
    pub stamp_every: u32,
}

/// One exchange seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    /// Sequence number.
    pub seq: u64,
    /// The client's stamps.
    pub client: ClientStamps,
    /// Responder stamps that came inside the reply.
    pub inline: Option<ReflectorStamps>,
    /// Part of the dissected sample: kernel-stamped (or kernel stamps are
    /// off and only application stamps exist). The others count for the
    /// RTT of unstamped exchanges only.
    pub dissected: bool,
}

/// Exchanges a client keeps for dissection (about 250 MB at most with their
/// stamps); later answers are counted, not dissected, and the result says so.
pub const MAX_RECORDED_EXCHANGES: usize = 1 << 21;

/// A finished client run.
#[derive(Debug, Clone, Default)]
pub struct ClientRun {
    /// Answered exchanges, in order of arrival.
    pub exchanges: Vec<Exchange>,
    /// Sent, received, lost, unexpected.
    pub counts: Counts,
    /// Exchanges whose request got no transmit stamp.
    pub missing_tx_stamps: u64,
    /// Exchanges whose reply got no receive stamp.
    pub missing_rx_stamps: u64,
    /// Wall time of the run.
    pub duration: Duration,
    /// Answers beyond [`MAX_RECORDED_EXCHANGES`]: counted, not dissected.
    pub unrecorded: u64,
    /// One exchange in this many was kernel-stamped (0 or 1: every one).
    pub stamp_every: u32,
}

impl ClientRun {
    /// Whether another exchange may be kept for dissection.
    fn recording(&self) -> bool {
        self.exchanges.len() < MAX_RECORDED_EXCHANGES
    }

    /// Drains `fd`'s error queue between exchanges (never inside a measured
    /// interval). While recording, the transmit stamps join `stamps`;
    /// past the recording limit they are dropped, but the queue is still
    /// drained: its stamps count against the socket's receive buffer.
    fn collect_tx_stamps(
        &self,
        fd: std::os::fd::RawFd,
        stamps: &mut Vec<crate::stamps::TxStamp>,
    ) -> Result<(), EchoIoError> {
        let mut dropped = Vec::new();
        let into = if self.recording() {
            stamps
        } else {
            &mut dropped
        };
        crate::sys::timestamping::read_tx_stamps(fd, into).map_err(sock_err("read error queue"))
    }

    /// Fills in transmit stamps that arrived after the exchange completed.
    fn apply_tx(&mut self, seq_of: impl Fn(u32) -> Option<u64>, stamps: &[crate::stamps::TxStamp]) {
        use crate::stamps::TxKind;
        let mut index = std::collections::HashMap::with_capacity(self.exchanges.len());
        for (i, x) in self.exchanges.iter().enumerate() {
            index.insert(x.seq, i);
        }
        for s in stamps {
            let Some(seq) = seq_of(s.id) else { continue };
            let Some(&i) = index.get(&seq) else { continue };
            let c = &mut self.exchanges[i].client;
            let v = (s.software_ns != 0).then_some(s.software_ns);
            match s.kind {
                TxKind::Sched => c.tx_sched_ns = c.tx_sched_ns.or(v),
                TxKind::Snd => c.tx_soft_ns = c.tx_soft_ns.or(v),
                TxKind::Ack => c.tx_ack_ns = c.tx_ack_ns.or(v),
            }
        }
    }

    /// Closes a run: collects the last transmit stamps from `fd`'s error
    /// queue, matches every stamp to its exchange and counts what is missing.
    fn finish(
        mut self,
        fd: std::os::fd::RawFd,
        started: std::time::Instant,
        counts: Counts,
        mut stamps: Vec<crate::stamps::TxStamp>,
        seq_of: impl Fn(u32) -> Option<u64>,
    ) -> Result<Self, EchoIoError> {
        self.duration = started.elapsed();
        // Stamps of the last sends may still be on their way.
        std::thread::sleep(Duration::from_millis(2));
        crate::sys::timestamping::read_tx_stamps(fd, &mut stamps)
            .map_err(sock_err("read error queue"))?;
        self.apply_tx(seq_of, &stamps);
        self.counts = counts;
        self.count_missing();
        Ok(self)
    }

    fn count_missing(&mut self) {
        self.missing_tx_stamps = self
            .exchanges
            .iter()
            .filter(|x| x.dissected && x.client.tx_soft_ns.is_none())
            .count() as u64;
        self.missing_rx_stamps = self
            .exchanges
            .iter()
            .filter(|x| x.dissected && x.client.rx_kernel_ns.is_none())
            .count() as u64;
    }
}

#[cfg(test)]
mod tests;
