//! Latency sessions over the control protocol: the server side (a reflector
//! run for one session of `linerate server`) and the client side
//! (`linerate latency HOST`).
//!
//! ```text
//! client                                  server
//!  Hello ─────────────────────────────────▶
//!        ◀───────────── Welcome {session_id}
//!  Start {Latency(params)} ───────────────▶   binds a reflector answering
//!        ◀─── ReflectorReady {port, boot_id}   only this session's token
//!  Go ────────────────────────────────────▶
//!        ◀────────────────────────── Running
//!  … probes to port, replies …
//!  SendDone ──────────────────────────────▶   stops the reflector
//!        ◀──────── ReflectorRecords {…} × n   its per-exchange stamps
//!        ◀───────── ReflectorDone {counters}
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use linerate_core::error::chain;
use linerate_core::latency::{LatencyParams, ReflectorReport};
use linerate_core::wire::control::{Message, SessionKind, MAX_RECORDS_PER_FRAME};

use super::{ClientConfig, ClientRun, EchoIoError, Reflector, ReflectorConfig};
use crate::stamps;
use crate::throughput::control::{client_handshake, Control, CtrlError, HandshakeError};
use crate::throughput::net;
use crate::throughput::server::{GRACE, STEP_TIMEOUT};
use linerate_core::untrusted::escape;

/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A session ends when no request came for this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves one latency session on an accepted control connection (the
/// server has sent Welcome with `session_id`). Returns the reflector's
/// counters for the server's log.
pub fn serve(
    ctrl: &mut Control,
    session_id: u32,
    params: &LatencyParams,
    max_duration: Option<Duration>,
    peer: std::net::IpAddr,
    server_stop: &AtomicBool,
) -> Result<ReflectorReport, String> {
    let max_ns = max_duration.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    params.validate(max_ns).map_err(|e| e.to_string())?;
    let local = ctrl.stream().local_addr().map_err(|e| e.to_string())?.ip();
    let mut rc = ReflectorConfig::new(session_id);
    rc.mode = params.mode;
    rc.copy = params.copy;
    rc.no_udp_checksum = params.no_udp_checksum;
    rc.idle_timeout = IDLE_TIMEOUT;
    rc.kernel_stamps = params.kernel_stamps;
    rc.max_duration = Duration::from_nanos(params.duration_ns) + GRACE;
    // No reflection: only the address that opened the session is answered.
    rc.peer = Some(peer);
    let stop = Arc::new(AtomicBool::new(false));
    let bind = SocketAddr::new(local, 0);
    let reflector = Reflector::bind(params.protocol, bind, rc).map_err(|e| chain(&e))?;
    let port = reflector.local_addr().map_err(|e| chain(&e))?.port();
    let s = Arc::clone(&stop);
    let handle = std::thread::Builder::new()
        .name("lr-reflector".into())
        .spawn(move || reflector.run(&s));
    let handle = handle.map_err(|e| format!("cannot spawn the reflector thread: {e}"))?;
    let stop_and_join = |handle: std::thread::JoinHandle<Result<ReflectorReport, EchoIoError>>| {
        stop.store(true, Ordering::Relaxed);
        handle
            .join()
            .map_err(|_| "the reflector thread panicked".to_string())?
            .map_err(|e| chain(&e))
    };
    let ready = ctrl
        .send(&Message::ReflectorReady {
            port,
            boot_id: stamps::boot_id().unwrap_or_default(),
        })
        .and_then(|()| match ctrl.recv(STEP_TIMEOUT)? {
            Message::Go => ctrl.send(&Message::Running),
            other => Err(CtrlError::Unexpected {
                got: other.name(),
                want: "go",
            }),
        });
    if let Err(e) = ready {
        let _ = stop_and_join(handle);
        return Err(e.to_string());
    }
    // The client runs its probes, then says SendDone; wait for that within
    // its announced duration, in slices so a stopping server is noticed.
    let limit = Duration::from_nanos(params.duration_ns) + GRACE;
    let started = std::time::Instant::now();
    let done = loop {
        if server_stop.load(Ordering::Relaxed) {
            break Err("the server is stopping".to_string());
        }
        match ctrl.recv(Duration::from_millis(500)) {
            Ok(Message::SendDone { .. }) => break Ok(()),
            Ok(other) => {
                break Err(format!(
                    "unexpected '{}' during a latency session",
                    other.name()
                ))
            }
            Err(CtrlError::Timeout(_)) if started.elapsed() < limit => {}
            Err(e) => break Err(e.to_string()),
        }
    };
    let mut report = stop_and_join(handle)?;
    done?;
    let records = std::mem::take(&mut report.records);
    for chunk in records.chunks(MAX_RECORDS_PER_FRAME) {
        ctrl.send(&Message::ReflectorRecords {
            records: chunk.to_vec(),
        })
        .map_err(|e| e.to_string())?;
    }
    ctrl.send(&Message::ReflectorDone {
        report: report.clone(),
    })
    .map_err(|e| e.to_string())?;
    // Wait (bounded) for the client to close, so it reads everything.
    let _ = ctrl.recv(Duration::from_secs(2));
    report.records = records;
    Ok(report)
}

/// What a remote latency session gave.
#[derive(Debug)]
pub struct RemoteRun {
    /// The client's side.
    pub client: ClientRun,
    /// The server's reflector, with its per-exchange records (`None` if the
    /// server did not deliver them).
    pub reflector: Option<ReflectorReport>,
    /// Both ends booted the same kernel: one CLOCK_REALTIME, one-way delays valid.
    pub same_clock: bool,
    /// Why the result is incomplete, if it is.
    pub incomplete: Option<String>,
}

/// Runs one latency session against `linerate server` at `server`.
pub fn run_remote(
    server: SocketAddr,
    params: &LatencyParams,
    client: &ClientConfig,
) -> Result<RemoteRun, EchoIoError> {
    let proto_err =
        |e: CtrlError| EchoIoError::Protocol(format!("control connection to {server}: {e}"));
    let stream = net::tcp_connect(server, None, CONNECT_TIMEOUT).map_err(|e| {
        EchoIoError::Protocol(format!("cannot reach linerate server at {server}: {e}"))
    })?;
    let mut ctrl = Control::new(stream);
    let session_id =
        match client_handshake(&mut ctrl, concat!("linerate ", env!("CARGO_PKG_VERSION"))) {
            Ok(w) => w.session_id,
            Err(HandshakeError::Ctrl(e)) => return Err(proto_err(e)),
            Err(e) => return Err(EchoIoError::Protocol(e.to_string())),
        };
    ctrl.send(&Message::Start {
        session: SessionKind::Latency(*params),
        udp_ports: Vec::new(),
    })
    .map_err(proto_err)?;
    let (port, boot_id) = match ctrl.recv(STEP_TIMEOUT).map_err(proto_err)? {
        Message::ReflectorReady { port, boot_id } => (port, boot_id),
        Message::Error { reason } => {
            return Err(EchoIoError::Protocol(format!(
                "the server reported: {}",
                escape(&reason)
            )))
        }
        other => {
            return Err(EchoIoError::Protocol(format!(
            "unexpected '{}' instead of reflector_ready (is the server older than this client?)",
            other.name()
        )))
        }
    };
    ctrl.send(&Message::Go).map_err(proto_err)?;
    match ctrl.recv(STEP_TIMEOUT).map_err(proto_err)? {
        Message::Running => {}
        other => {
            return Err(EchoIoError::Protocol(format!(
                "unexpected '{}' instead of running",
                other.name()
            )))
        }
    }
    let mut cfg = *client;
    cfg.session = session_id;
    cfg.target = SocketAddr::new(server.ip(), port);
    let run = super::run_client(params.protocol, &cfg)?;
    // A reflector answers each request at most once: more records than
    // requests are a hostile or broken server, refused before they are held.
    let most = usize::try_from(run.counts.sent).unwrap_or(usize::MAX);
    // Whatever happened to the probes, end the session so the server stops
    // its reflector, and collect its records. A server that died keeps the
    // client's side: the run is reported, marked incomplete.
    let reflector = ctrl
        .send(&Message::SendDone { flows: Vec::new() })
        .map_err(|e| e.to_string())
        .and_then(|()| collect_records(&mut ctrl, most));
    let (reflector, incomplete) = match reflector {
        Ok(r) => (Some(r), None),
        Err(e) => (
            None,
            Some(format!(
                "the server's stamps are missing ({e}): client-side stages only"
            )),
        ),
    };
    let same_clock = stamps::boot_id().is_some_and(|b| !boot_id.is_empty() && b == boot_id);
    Ok(RemoteRun {
        client: run,
        reflector,
        same_clock,
        incomplete,
    })
}

/// Reads the reflector's records (at most `most`) and counters after SendDone.
fn collect_records(ctrl: &mut Control, most: usize) -> Result<ReflectorReport, String> {
    let mut records = Vec::new();
    loop {
        match ctrl.recv(STEP_TIMEOUT).map_err(|e| e.to_string())? {
            Message::ReflectorRecords { records: chunk } => {
                if records.len() + chunk.len() > most {
                    return Err(format!(
                        "the server sent more records than the {most} requests made"
                    ));
                }
                records.extend(chunk);
            }
            Message::ReflectorDone { mut report } => {
                report.records = records;
                return Ok(report);
            }
            Message::Error { reason } => {
                return Err(format!("the server reported: {}", escape(&reason)))
            }
            other => return Err(format!("unexpected '{}' after the run", other.name())),
        }
    }
}
