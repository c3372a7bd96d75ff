//! `linerate throughput HOST`: one session against a `linerate server`, or
//! a one-sided send to a discard sink (`--discard`).

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use linerate_core::throughput::model::{End, FlowDir, Protocol, SideReport, ThroughputParams};
use linerate_core::wire::control::{Message, SessionKind};

use super::control::{client_handshake, Control, CtrlError, HandshakeError, Welcome};
use super::host;
use super::net::{self, DataSock, NetError};
use super::server::{jobs, GRACE, STEP_TIMEOUT};
use super::session::{self, Progress};

/// How long connecting may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a session could not run.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A socket could not be set up.
    #[error(transparent)]
    Net(#[from] NetError),
    /// The server said no.
    #[error("the server refused: {0}")]
    Refused(String),
    /// Authentication failed on the client's side.
    #[error("authentication: {0}")]
    Auth(String),
    /// The server reported an error before the test ran.
    #[error("the server reported: {0}")]
    Server(String),
    /// The control exchange failed before the test ran.
    #[error("control connection to {addr}: {error}")]
    Control {
        /// The server.
        addr: SocketAddr,
        /// What failed.
        error: CtrlError,
    },
    /// Parameters that cannot run.
    #[error("{0}")]
    Params(String),
    /// Threads could not be spawned.
    #[error("cannot spawn flow threads: {0}")]
    Spawn(std::io::Error),
    /// The server answered as an iperf3 server.
    #[error("{0} speaks iperf3; add --iperf3")]
    Iperf3(SocketAddr),
}

/// Both ends' measurements.
#[derive(Debug)]
pub struct Outcome {
    /// Session id (in every probe).
    pub session_id: u32,
    /// The client's side.
    pub client: SideReport,
    /// The server's side (None with `--discard`, or if the server never sent it).
    pub server: Option<SideReport>,
    /// Share of this host's CPU time the hypervisor stole during the test
    /// (`/proc/stat`), 0‥1, when readable.
    pub steal_share: Option<f64>,
}

/// Runs one session against the server at `addr`.
pub fn run(
    addr: SocketAddr,
    params: &ThroughputParams,
    progress: Option<Progress<'_>>,
) -> Result<Outcome, ClientError> {
    run_until(addr, params, progress, &AtomicBool::new(false))
}

/// [`run`], ending the test early (result marked incomplete) when
/// `interrupt` becomes true (e.g. on SIGINT).
pub fn run_until(
    addr: SocketAddr,
    params: &ThroughputParams,
    progress: Option<Progress<'_>>,
    interrupt: &AtomicBool,
) -> Result<Outcome, ClientError> {
    params
        .validate(None)
        .map_err(|e| ClientError::Params(e.to_string()))?;
    let cerr = |error| ClientError::Control { addr, error };
    let stream = net::tcp_connect(addr, None, CONNECT_TIMEOUT)?;
    let mut ctrl = Control::new(stream);
    let Welcome { session_id, cookie } =
        match client_handshake(&mut ctrl, concat!("linerate ", env!("CARGO_PKG_VERSION"))) {
            Ok(w) => w,
            Err(HandshakeError::Ctrl(e)) => return Err(cerr(e)),
            Err(HandshakeError::Refused(reason)) => return Err(ClientError::Refused(reason)),
            Err(HandshakeError::Auth(why)) => return Err(ClientError::Auth(why)),
            Err(HandshakeError::Iperf3) => return Err(ClientError::Iperf3(addr)),
        };
    let n = params.flows().len();
    let local_ip = ctrl
        .stream()
        .local_addr()
        .map_err(|e| NetError::call("getsockname", e))?
        .ip();
    let mut udp = Vec::new();
    if params.protocol == Protocol::Udp {
        for _ in 0..n {
            udp.push(net::udp_bind(local_ip, params)?);
        }
    }
    let ports = udp
        .iter()
        .map(|s| s.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<u16>, _>>()
        .map_err(|e| NetError::call("getsockname (UDP)", e))?;
    ctrl.send(&Message::Start {
        session: SessionKind::Throughput(params.clone()),
        udp_ports: ports,
    })
    .map_err(cerr)?;
    let server_ports = match ctrl.recv(STEP_TIMEOUT).map_err(cerr)? {
        Message::Accepted { udp_ports } => udp_ports,
        Message::Error { reason } => {
            return Err(ClientError::Server(linerate_core::untrusted::escape(
                &reason,
            )))
        }
        other => {
            return Err(cerr(CtrlError::Unexpected {
                got: other.name(),
                want: "accepted",
            }))
        }
    };
    let mut socks = Vec::new();
    match params.protocol {
        Protocol::Udp => {
            if server_ports.len() != n {
                return Err(ClientError::Server(format!(
                    "{} UDP ports for {n} flows",
                    server_ports.len()
                )));
            }
            for (s, p) in udp.into_iter().zip(server_ports) {
                let to = SocketAddr::new(addr.ip(), p);
                s.connect(to)
                    .map_err(|e| NetError::call(format!("connect UDP to {to}"), e))?;
                socks.push(DataSock::Udp(s));
            }
            open_udp_paths(&mut ctrl, &socks).map_err(cerr)?;
        }
        Protocol::Tcp => {
            for flow in 0..n {
                let s = net::tcp_connect(addr, Some(params), CONNECT_TIMEOUT)?;
                let mut c = Control::new(s);
                c.send(&Message::DataHello {
                    session_id,
                    cookie,
                    flow: u16::try_from(flow).unwrap_or(u16::MAX),
                })
                .map_err(cerr)?;
                let s = c.into_stream();
                // Control::new turned TCP_NODELAY on for the hello frame.
                s.set_nodelay(params.nodelay)
                    .map_err(|e| NetError::call("TCP_NODELAY", e))?;
                socks.push(DataSock::Tcp(s));
            }
        }
    }
    ctrl.send(&Message::Go).map_err(cerr)?;
    match ctrl.recv(STEP_TIMEOUT).map_err(cerr)? {
        Message::Running => {}
        Message::Error { reason } => {
            return Err(ClientError::Server(linerate_core::untrusted::escape(
                &reason,
            )))
        }
        other => {
            return Err(cerr(CtrlError::Unexpected {
                got: other.name(),
                want: "running",
            }))
        }
    }
    let cpu0 = host::cpu_jiffies();
    let flows =
        session::spawn(jobs(session_id, params, socks, End::Client)).map_err(ClientError::Spawn)?;
    let limit = Duration::from_nanos(params.duration_ns) + GRACE;
    let outcome = session::drive(
        &mut ctrl,
        flows,
        End::Client,
        limit,
        progress,
        None,
        interrupt,
    );
    Ok(Outcome {
        session_id,
        client: outcome.side,
        server: outcome.peer,
        steal_share: cpu0
            .zip(host::cpu_jiffies())
            .and_then(|(a, b)| host::steal_share(a, b)),
    })
}

/// Sends an empty datagram from each UDP socket every 100 ms until the
/// server says the paths are open (it sends only to ports the client sent
/// from).
fn open_udp_paths(ctrl: &mut Control, socks: &[DataSock]) -> Result<(), CtrlError> {
    let deadline = std::time::Instant::now() + STEP_TIMEOUT;
    loop {
        for s in socks {
            if let DataSock::Udp(u) = s {
                let _ = u.send(&[]);
            }
        }
        match ctrl.recv(Duration::from_millis(100)) {
            Ok(Message::Opened) => return Ok(()),
            Ok(other) => {
                return Err(CtrlError::Unexpected {
                    got: other.name(),
                    want: "opened",
                })
            }
            Err(CtrlError::Timeout(_)) if std::time::Instant::now() < deadline => {}
            Err(e) => return Err(e),
        }
    }
}

/// Sends to a discard sink (RFC 863, or a board's receive sink) at `addr`:
/// forward flows only, no control connection, sender-side figures only.
pub fn run_discard(
    addr: SocketAddr,
    params: &ThroughputParams,
    mut progress: Option<Progress<'_>>,
    interrupt: &AtomicBool,
) -> Result<Outcome, ClientError> {
    params
        .validate(None)
        .map_err(|e| ClientError::Params(e.to_string()))?;
    if params.flows().iter().any(|d| *d != FlowDir::Forward) {
        return Err(ClientError::Params(
            "--discard sends only: --reverse and --bidir need a linerate server".into(),
        ));
    }
    let session_id = crate::token::session_token();
    let mut socks = Vec::new();
    for _ in params.flows() {
        match params.protocol {
            Protocol::Tcp => socks.push(DataSock::Tcp(net::tcp_connect(
                addr,
                Some(params),
                CONNECT_TIMEOUT,
            )?)),
            Protocol::Udp => {
                let any = if addr.is_ipv4() {
                    std::net::IpAddr::from([0u8; 4])
                } else {
                    std::net::IpAddr::from([0u16; 8])
                };
                let s = net::udp_bind(any, params)?;
                s.connect(addr)
                    .map_err(|e| NetError::call(format!("connect UDP to {addr}"), e))?;
                socks.push(DataSock::Udp(s));
            }
        }
    }
    let cpu0 = host::cpu_jiffies();
    let flows =
        session::spawn(jobs(session_id, params, socks, End::Client)).map_err(ClientError::Spawn)?;
    let mut side = session::join_all(flows, progress.take(), interrupt);
    side.notes
        .push("one-sided: sent to a discard sink; nothing confirms what arrived".to_string());
    Ok(Outcome {
        session_id,
        client: side,
        server: None,
        steal_share: cpu0
            .zip(host::cpu_jiffies())
            .and_then(|(a, b)| host::steal_share(a, b)),
    })
}
