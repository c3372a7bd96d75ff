//! One latency measurement: the client against a responder (in this process
//! or elsewhere), and its exchanges turned into per-stage statistics.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use linerate_core::latency::{
    dissect, send_to_kernel_rx, EchoProtocol, LatencyRun, ProbeCounts, ResponderStamps, StageStats,
};
use linerate_core::stats::{Histogram, Summary};

use crate::netns;

use super::{
    run_icmp_client, run_tcp_client, run_udp_client, ClientConfig, ClientRun, EchoIoError,
    Reflector, ReflectorConfig, ReflectorReport,
};

/// Runs the client against an existing responder.
pub fn run_client(proto: EchoProtocol, cfg: &ClientConfig) -> Result<ClientRun, EchoIoError> {
    match proto {
        EchoProtocol::Udp => run_udp_client(cfg),
        EchoProtocol::Tcp => run_tcp_client(cfg),
        EchoProtocol::Icmp => run_icmp_client(cfg),
    }
}

/// Where the two ends of an in-process run live: network namespaces by
/// name (`None`: the caller's namespace).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// Namespace of the reflector's thread.
    pub reflector_ns: Option<String>,
    /// Namespace of the client's thread.
    pub client_ns: Option<String>,
}

/// Runs a linerate reflector on `bind` (port 0: any) and the client against
/// it, both in this process, each on a thread in its namespace; both ends
/// stamp with this host's clock.
pub fn run_with_local_reflector(
    proto: EchoProtocol,
    bind: SocketAddr,
    reflector: ReflectorConfig,
    client: &ClientConfig,
    place: &Placement,
) -> Result<(ClientRun, ReflectorReport), EchoIoError> {
    let stop = Arc::new(AtomicBool::new(false));
    let (addr_tx, addr_rx) = mpsc::channel::<Result<SocketAddr, EchoIoError>>();
    let s = stop.clone();
    let reflector_thread =
        netns::spawn_in(place.reflector_ns.as_deref(), "lr-reflector", move || {
            let started =
                Reflector::bind(proto, bind, reflector).and_then(|r| Ok((r.local_addr()?, r)));
            match started {
                Ok((a, r)) => {
                    let _ = addr_tx.send(Ok(a));
                    r.run(&s)
                }
                Err(e) => {
                    let _ = addr_tx.send(Err(EchoIoError::Protocol(
                        "the reflector did not start".into(),
                    )));
                    Err(e)
                }
            }
        })?;
    let join_reflector = |h: std::thread::JoinHandle<
        Result<Result<ReflectorReport, EchoIoError>, netns::NetnsError>,
    >| {
        h.join()
            .map_err(|_| EchoIoError::Protocol("the reflector thread panicked".into()))??
    };
    let addr = match addr_rx.recv() {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => {
            // The thread's own error says why (its bind failed).
            join_reflector(reflector_thread)?;
            return Err(e);
        }
        Err(_) => {
            // The thread ended before binding: entering the namespace failed.
            join_reflector(reflector_thread)?;
            return Err(EchoIoError::Protocol("the reflector did not start".into()));
        }
    };
    let mut cfg = *client;
    cfg.target = addr;
    let client_thread = netns::spawn_in(place.client_ns.as_deref(), "lr-echo-client", move || {
        run_client(proto, &cfg)
    });
    let run = client_thread.map_err(EchoIoError::from).and_then(|h| {
        h.join()
            .map_err(|_| EchoIoError::Protocol("the client thread panicked".into()))??
    });
    stop.store(true, Ordering::Relaxed);
    let report = join_reflector(reflector_thread)?;
    Ok((run?, report))
}

/// Runs the client alone (ICMP, plain echo, a remote reflector) on a thread
/// in namespace `ns`.
pub fn run_client_in(
    proto: EchoProtocol,
    cfg: &ClientConfig,
    ns: Option<&str>,
) -> Result<ClientRun, EchoIoError> {
    let cfg = *cfg;
    netns::spawn_in(ns, "lr-echo-client", move || run_client(proto, &cfg))?
        .join()
        .map_err(|_| EchoIoError::Protocol("the client thread panicked".into()))??
}

/// Turns a client run and the responder's records into one result row (its
/// derived figures filled in).
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
    let mut unstamped = Histogram::default();
    for x in &run.exchanges {
        if !x.dissected {
            let rtt = x.client.app_recv_ns.saturating_sub(x.client.app_send_ns);
            unstamped.record(rtt);
            continue;
        }
        // Prefer the complete record from the end of the run; fall back to
        // the stamps that came inside the reply.
        let responder = records
            .get(&x.seq)
            .copied()
            .or_else(|| x.inline.map(|s| ResponderStamps::from_reply(&s, None)));
        stats.record(&dissect(&x.client, responder.as_ref(), same_clock));
    }
    let counts = ProbeCounts {
        sent: run.counts.sent,
        received: run.counts.received,
        lost: run.counts.lost,
        unexpected: run.counts.unexpected,
    };
    LatencyRun {
        settings,
        missing_tx_stamps: run.missing_tx_stamps,
        missing_rx_stamps: run.missing_rx_stamps,
        duration_ns: u64::try_from(run.duration.as_nanos()).unwrap_or(u64::MAX),
        unrecorded: run.unrecorded,
        stamp_every: u64::from(run.stamp_every.max(1)),
        timeout_ns: Some(run.counts.timeout_ns),
        ..LatencyRun::new(size_bytes, counts, &stats)
    }
    .with_unstamped(&unstamped)
    .with_derived()
}

/// The client's send call → the kernel's receive stamp of each reply: the
/// span `ping` reports (see `LatencyRun::rtt_send_to_kernel_rx`), over the
/// exchanges outside the stamped sample that have the stamp (no transmit
/// stamp asked, as ping asks none), or when there are none, over every
/// exchange that has it. `None` when no exchange has it.
pub fn send_to_kernel_rx_summary(run: &ClientRun) -> Option<Summary> {
    let span = |outside_sample: bool| {
        let mut h = Histogram::default();
        for x in &run.exchanges {
            if outside_sample && x.dissected {
                continue;
            }
            if let Some(span) = send_to_kernel_rx(&x.client) {
                h.record(span);
            }
        }
        h.summary()
    };
    span(true).or_else(|| span(false))
}
