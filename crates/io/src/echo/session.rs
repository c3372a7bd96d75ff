//! One latency measurement: the client against a responder (in this process
//! or elsewhere), and its exchanges turned into per-stage statistics.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use linerate_core::latency::{dissect, LatencyRun, ProbeCounts, ResponderStamps, StageStats};

use super::{
    run_icmp_client, run_tcp_client, run_udp_client, ClientConfig, ClientRun, EchoIoError,
    ReflectorConfig, ReflectorReport, TcpReflector, UdpReflector,
};

/// The probe protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// UDP echo.
    Udp,
    /// TCP echo (1 byte by default).
    Tcp,
    /// ICMP echo.
    Icmp,
}

impl Proto {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Tcp => "tcp",
            Self::Icmp => "icmp",
        }
    }
}

/// Runs the client against an existing responder.
pub fn run_client(proto: Proto, cfg: &ClientConfig) -> Result<ClientRun, EchoIoError> {
    match proto {
        Proto::Udp => run_udp_client(cfg),
        Proto::Tcp => run_tcp_client(cfg),
        Proto::Icmp => run_icmp_client(cfg),
    }
}

/// Runs a linerate reflector on `bind` (port 0: any) in this process and the
/// client against it; both ends stamp with this host's clock.
pub fn run_with_local_reflector(
    proto: Proto,
    bind: SocketAddr,
    reflector: ReflectorConfig,
    client: &ClientConfig,
) -> Result<(ClientRun, ReflectorReport), EchoIoError> {
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, handle) = match proto {
        Proto::Udp => {
            let r = UdpReflector::bind(bind, reflector)?;
            let addr = r.local_addr().map_err(super::sock_err("getsockname"))?;
            let s = stop.clone();
            (addr, std::thread::spawn(move || r.run(&s)))
        }
        Proto::Tcp => {
            let r = TcpReflector::bind(bind, reflector)?;
            let addr = r.local_addr().map_err(super::sock_err("getsockname"))?;
            let s = stop.clone();
            (addr, std::thread::spawn(move || r.run(&s)))
        }
        Proto::Icmp => {
            return Err(EchoIoError::Protocol(
                "ICMP is answered by the kernel, not by a reflector".into(),
            ))
        }
    };
    let mut cfg = *client;
    cfg.target = addr;
    let run = run_client(proto, &cfg);
    stop.store(true, Ordering::Relaxed);
    let report = handle
        .join()
        .map_err(|_| EchoIoError::Protocol("the reflector thread panicked".into()))??;
    Ok((run?, report))
}

/// Turns a client run and the responder's records into one result row.
pub fn summarize(
    settings: Vec<(String, String)>,
    size_bytes: u64,
    run: &ClientRun,
    reflector: Option<&ReflectorReport>,
    same_clock: bool,
) -> LatencyRun {
    let records: HashMap<u64, ResponderStamps> = reflector
        .map(|r| r.records.iter().map(|x| (x.seq, x.stamps)).collect())
        .unwrap_or_default();
    let mut stats = StageStats::default();
    for x in &run.exchanges {
        // Prefer the complete record from the end of the run; fall back to
        // the stamps that came inside the reply.
        let responder = records.get(&x.seq).copied().or_else(|| {
            x.inline
                .map(|s| ResponderStamps::from_reply(&s, None))
                .filter(|_| reflector.is_some())
        });
        stats.record(&dissect(&x.client, responder.as_ref(), same_clock));
    }
    LatencyRun {
        settings,
        size_bytes,
        counts: ProbeCounts {
            sent: run.counts.sent,
            received: run.counts.received,
            lost: run.counts.lost,
            unexpected: run.counts.unexpected,
        },
        missing_tx_stamps: run.missing_tx_stamps,
        missing_rx_stamps: run.missing_rx_stamps,
        negative_intervals: stats.negative,
        stages: stats.summaries(),
        duration_ns: u64::try_from(run.duration.as_nanos()).unwrap_or(u64::MAX),
    }
}
