//! `linerate server`: accepts control connections, runs each client's
//! session on threads of its own, refuses clients beyond `max_clients`
//! with a message saying so, and survives any client.
//!
//! A connection's first frame decides what it is: a Hello opens a session,
//! a DataHello attaches a TCP data connection to its session (cookie
//! checked). Anything else, or nothing within [`FIRST_FRAME_TIMEOUT`],
//! closes it.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use linerate_core::throughput::model::{
    End, FlowDir, FlowRole, Protocol, SideReport, ThroughputParams,
};
use linerate_core::wire::control::{check_hello, Message, SessionKind, CONTROL_VERSION};

use super::control::{Control, CtrlError};
use super::flow::{self, FlowJob, FlowShared};
use super::net::{self, DataSock, NetError};
use super::session;

/// How long a new connection may take to send its first frame.
pub const FIRST_FRAME_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take between handshake steps.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections allowed to be waiting for their first frame at once; more
/// are closed at once (a flood of silent connections cannot pile up threads).
pub const MAX_PENDING: usize = 256;
/// Time a session may run beyond its test time before it is stopped.
pub const GRACE: Duration = Duration::from_secs(15);

/// Where the server's log lines go.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// How the server runs.
#[derive(Clone)]
pub struct ServerConfig {
    /// Address to listen on.
    pub bind: SocketAddr,
    /// Serve one session, then exit.
    pub once: bool,
    /// Most sessions at once.
    pub max_clients: usize,
    /// Longest test time a client may ask for.
    pub max_duration: Option<Duration>,
    /// Log sink.
    pub log: Log,
    /// Serves iperf3 clients that connect to this port (None: refuses them).
    pub iperf3: Option<Arc<crate::iperf3::Hub>>,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("bind", &self.bind)
            .field("once", &self.once)
            .field("max_clients", &self.max_clients)
            .field("max_duration", &self.max_duration)
            .finish_non_exhaustive()
    }
}

type Registry = Mutex<HashMap<u32, (u64, Sender<(u16, TcpStream)>)>>;

/// A bound server.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    cfg: ServerConfig,
    registry: Arc<Registry>,
    active: Arc<AtomicUsize>,
    pending: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

/// What a finished session looked like, for the server's log and tests.
pub type SessionLog = SideReport;

impl Server {
    /// Binds the listening socket.
    pub fn bind(cfg: ServerConfig) -> Result<Self, NetError> {
        let listener = TcpListener::bind(cfg.bind)
            .map_err(|e| NetError::call(format!("listen on {}", cfg.bind), e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| NetError::call("O_NONBLOCK on the listener", e))?;
        Ok(Self {
            listener,
            cfg,
            registry: Arc::default(),
            active: Arc::default(),
            pending: Arc::default(),
            stop: Arc::default(),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> Result<SocketAddr, NetError> {
        self.listener
            .local_addr()
            .map_err(|e| NetError::call("getsockname", e))
    }

    /// Set to true to make [`Server::run`] return.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// Accepts connections until the stop flag is set (or, with `once`,
    /// until the first session ended).
    pub fn run(self) -> Result<(), NetError> {
        let log = Arc::clone(&self.cfg.log);
        if let Ok(a) = self.local_addr() {
            log(&format!(
                "listening on {a} (control protocol v{CONTROL_VERSION}, at most {} clients)",
                self.cfg.max_clients
            ));
        }
        while !self.stop.load(Ordering::Relaxed) {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    if self.pending.load(Ordering::SeqCst) >= MAX_PENDING {
                        drop(stream);
                        continue;
                    }
                    self.pending.fetch_add(1, Ordering::SeqCst);
                    let _ = stream.set_nonblocking(false);
                    let ctx = ConnCtx {
                        cfg: self.cfg.clone(),
                        registry: Arc::clone(&self.registry),
                        active: Arc::clone(&self.active),
                        pending: Arc::clone(&self.pending),
                        stop: Arc::clone(&self.stop),
                    };
                    let spawned = std::thread::Builder::new()
                        .name("lr-conn".into())
                        .spawn(move || ctx.handle(stream, peer));
                    if let Err(e) = spawned {
                        self.pending.fetch_sub(1, Ordering::SeqCst);
                        log(&format!("cannot spawn a thread for {peer}: {e}"));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // EMFILE and friends: wait, do not die.
                    log(&format!("accept failed: {e}"));
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        Ok(())
    }
}

struct ConnCtx {
    cfg: ServerConfig,
    registry: Arc<Registry>,
    active: Arc<AtomicUsize>,
    pending: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

/// Decrements the active-session count when a session ends, however.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Removes a session from the registry when it ends, however.
struct Registered(Arc<Registry>, u32);

impl Drop for Registered {
    fn drop(&mut self) {
        if let Ok(mut r) = self.0.lock() {
            r.remove(&self.1);
        }
    }
}

impl ConnCtx {
    fn log(&self, s: &str) {
        (self.cfg.log)(s);
    }

    fn handle(self, stream: TcpStream, peer: SocketAddr) {
        // An iperf3 client: its cookie's first byte tells it from a Hello.
        if crate::iperf3::server::is_iperf3(&stream, FIRST_FRAME_TIMEOUT) {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            crate::iperf3::serve(self.cfg.iperf3.as_ref(), stream, peer, &*self.cfg.log);
            return;
        }
        let mut ctrl = Control::new(stream);
        let first = ctrl.recv(FIRST_FRAME_TIMEOUT);
        self.pending.fetch_sub(1, Ordering::SeqCst);
        match first {
            Ok(Message::Hello {
                magic,
                version,
                software,
            }) => {
                if let Err(e) = check_hello(&magic, version) {
                    let _ = ctrl.send(&Message::Refused {
                        reason: e.to_string(),
                    });
                    self.log(&format!("{peer}: refused: {e}"));
                    return;
                }
                let max = self.cfg.max_clients;
                let taken = self
                    .active
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                        (n < max).then_some(n + 1)
                    });
                if taken.is_err() {
                    let reason = format!(
                        "server busy: it serves at most {max} client(s) at once (--max-clients); try again later"
                    );
                    let _ = ctrl.send(&Message::Refused {
                        reason: reason.clone(),
                    });
                    self.log(&format!("{peer}: refused: {reason}"));
                    return;
                }
                let slot = Slot(Arc::clone(&self.active));
                let software: String = software.chars().take(80).collect();
                self.log(&format!("{peer}: session opened by {software:?}"));
                match self.session(&mut ctrl, peer) {
                    Ok(Some(side)) => self.log(&format!("{peer}: {}", summary(&side))),
                    Ok(None) => {}
                    Err(e) => {
                        let _ = ctrl.send(&Message::Error { reason: e.clone() });
                        self.log(&format!("{peer}: session failed: {e}"));
                    }
                }
                drop(slot);
                if self.cfg.once {
                    self.stop.store(true, Ordering::Relaxed);
                }
            }
            Ok(Message::DataHello {
                session_id,
                cookie,
                flow,
            }) => {
                let tx = self.registry.lock().ok().and_then(|r| {
                    r.get(&session_id)
                        .filter(|(c, _)| *c == cookie)
                        .map(|(_, tx)| tx.clone())
                });
                match tx {
                    Some(tx) => {
                        let _ = tx.send((flow, ctrl.into_stream()));
                    }
                    None => self.log(&format!(
                        "{peer}: data connection for an unknown session or wrong cookie, closed"
                    )),
                }
            }
            Ok(other) => self.log(&format!(
                "{peer}: first message '{}' is not a hello, closed",
                other.name()
            )),
            Err(e) => self.log(&format!("{peer}: closed: {e}")),
        }
    }

    /// Runs one session; `None` for sessions that are not throughput tests
    /// (they log for themselves).
    fn session(&self, ctrl: &mut Control, peer: SocketAddr) -> Result<Option<SideReport>, String> {
        let session_id = crate::token::session_token();
        let cookie = crate::token::random_u64();
        let (tx, rx) = mpsc::channel();
        self.registry
            .lock()
            .map_err(|_| "internal: registry poisoned".to_string())?
            .insert(session_id, (cookie, tx));
        let _registered = Registered(Arc::clone(&self.registry), session_id);
        ctrl.send(&Message::Welcome {
            version: CONTROL_VERSION,
            session_id,
            cookie,
        })
        .map_err(|e| e.to_string())?;
        let (params, udp_ports) = match ctrl.recv(STEP_TIMEOUT) {
            Ok(Message::Start {
                session: SessionKind::Throughput(p),
                udp_ports,
            }) => (p, udp_ports),
            Ok(Message::Start {
                session: SessionKind::Latency(p),
                ..
            }) => {
                let r =
                    crate::echo::serve(ctrl, session_id, &p, self.cfg.max_duration, &self.stop)?;
                self.log(&format!(
                    "{peer}: latency session: {} replies, {} requests of other sessions dropped, {} malformed",
                    r.replies, r.unknown_session, r.malformed
                ));
                return Ok(None);
            }
            Ok(other) => return Err(format!("expected 'start', got '{}'", other.name())),
            Err(e) => return Err(e.to_string()),
        };
        let max_ns = self
            .cfg
            .max_duration
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        params.validate(max_ns).map_err(|e| e.to_string())?;
        let dirs = params.flows();
        let socks = match params.protocol {
            Protocol::Udp => {
                if udp_ports.len() != dirs.len() {
                    return Err(format!(
                        "{} UDP ports for {} flows",
                        udp_ports.len(),
                        dirs.len()
                    ));
                }
                let local = ctrl.stream().local_addr().map_err(|e| e.to_string())?.ip();
                let mut socks = Vec::new();
                let mut ports = Vec::new();
                for &p in &udp_ports {
                    let s = net::udp_bind(local, &params).map_err(|e| e.to_string())?;
                    s.connect(SocketAddr::new(peer.ip(), p))
                        .map_err(|e| format!("connect UDP to {}:{p}: {e}", peer.ip()))?;
                    ports.push(s.local_addr().map_err(|e| e.to_string())?.port());
                    socks.push(DataSock::Udp(s));
                }
                ctrl.send(&Message::Accepted { udp_ports: ports })
                    .map_err(|e| e.to_string())?;
                expect_go(ctrl)?;
                socks
            }
            Protocol::Tcp => {
                ctrl.send(&Message::Accepted { udp_ports: vec![] })
                    .map_err(|e| e.to_string())?;
                expect_go(ctrl)?;
                collect_tcp(&rx, dirs.len(), &params)?
            }
        };
        ctrl.send(&Message::Running).map_err(|e| e.to_string())?;
        let jobs = jobs(session_id, &params, socks, End::Server);
        let flows = session::spawn(jobs).map_err(|e| format!("cannot spawn flow threads: {e}"))?;
        let limit = Duration::from_nanos(params.duration_ns) + GRACE;
        let outcome = session::drive(ctrl, flows, End::Server, limit, None, &self.stop);
        // Wait (bounded) for the client to close, so it reads the report.
        let _ = ctrl.recv(Duration::from_secs(2));
        Ok(Some(outcome.side))
    }
}

fn expect_go(ctrl: &mut Control) -> Result<(), String> {
    match ctrl.recv(STEP_TIMEOUT) {
        Ok(Message::Go) => Ok(()),
        Ok(other) => Err(format!("expected 'go', got '{}'", other.name())),
        Err(e @ CtrlError::Timeout(_)) => Err(e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

fn collect_tcp(
    rx: &Receiver<(u16, TcpStream)>,
    n: usize,
    params: &ThroughputParams,
) -> Result<Vec<DataSock>, String> {
    let mut got: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    let deadline = Instant::now() + STEP_TIMEOUT;
    while got.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let have = got.iter().filter(|g| g.is_some()).count();
            return Err(format!(
                "only {have} of {n} data connections arrived within {STEP_TIMEOUT:?}"
            ));
        }
        if let Ok((flow, s)) = rx.recv_timeout(left) {
            match got.get_mut(usize::from(flow)) {
                Some(slot @ None) => {
                    // The first frame was read as control (TCP_NODELAY on):
                    // back to what the test asked for.
                    s.set_nodelay(params.nodelay)
                        .map_err(|e| format!("TCP_NODELAY: {e}"))?;
                    net::apply_tcp(&s, params, false).map_err(|e| e.to_string())?;
                    *slot = Some(s);
                }
                _ => return Err(format!("data connection for flow {flow} unexpected")),
            }
        }
    }
    Ok(got.into_iter().flatten().map(DataSock::Tcp).collect())
}

/// The flow jobs of one end, in flow order.
pub(crate) fn jobs(
    session: u32,
    p: &ThroughputParams,
    socks: Vec<DataSock>,
    end: End,
) -> Vec<FlowJob> {
    let senders = p
        .flows()
        .iter()
        .filter(|d| {
            matches!(
                (end, d),
                (End::Client, FlowDir::Forward) | (End::Server, FlowDir::Reverse)
            )
        })
        .count();
    p.flows()
        .into_iter()
        .zip(socks)
        .enumerate()
        .map(|(i, (dir, sock))| {
            let sends = matches!(
                (end, dir),
                (End::Client, FlowDir::Forward) | (End::Server, FlowDir::Reverse)
            );
            FlowJob {
                sock,
                session,
                flow: u16::try_from(i).unwrap_or(u16::MAX),
                direction: dir,
                size: p.size_bytes as usize,
                role: if sends {
                    FlowRole::Sender
                } else {
                    FlowRole::Receiver
                },
                send_path: p.send_path,
                recv_path: p.recv_path,
                recv_spin: p.recv_spin,
                recv_lowat: p.recv_lowat(),
                recv_nap: p.recv_nap().map(|us| Duration::from_micros(u64::from(us))),
                rate_bits_per_s: p.rate_per_flow_bits_per_s(),
                duration_ns: p.duration_ns,
                interval_ns: p.interval_ns,
                typical_bytes: flow::typical_buffer_bytes(senders),
                shared: FlowShared::new(),
            }
        })
        .collect()
}

/// One log line about a finished session.
pub fn summary(side: &SideReport) -> String {
    let mut parts = Vec::new();
    for (dir, name) in [(FlowDir::Forward, "received"), (FlowDir::Reverse, "sent")] {
        let role = if dir == FlowDir::Forward {
            FlowRole::Receiver
        } else {
            FlowRole::Sender
        };
        if let Some(s) = side.sum(dir, role) {
            parts.push(format!(
                "{name} {} bytes in {:.2} s ({:.1} Mbit/s, {} lost)",
                s.bytes,
                s.elapsed_ns as f64 / 1e9,
                s.bytes_per_s * 8.0 / 1e6,
                s.lost
            ));
        }
    }
    let state = if side.complete {
        "complete"
    } else {
        "INCOMPLETE"
    };
    let mut line = format!("session {state}: {}", parts.join("; "));
    if !side.notes.is_empty() {
        line.push_str(&format!(" [{}]", side.notes.join("; ")));
    }
    line
}
