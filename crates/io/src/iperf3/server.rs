//! Serving iperf3 clients: a [`Hub`] shared by every port that speaks
//! iperf3 (the dedicated `--iperf3-port` [`Listener`], and `linerate
//! server`'s own port through [`serve`]), each client's session on a thread
//! of its own, driven by `linerate_core::wire::iperf3::session`.
//!
//! TCP data connections arrive on the same port as control connections and
//! start with their session's cookie; the hub routes them. UDP streams are
//! "connected" with a 4-byte datagram to the same port number: one UDP
//! listener per port hands each to the session waiting for streams from
//! that client's address, on a fresh socket bound to the same port and
//! connected to the client (the kernel then delivers the stream's datagrams
//! to it, not to the listener).

use std::collections::HashMap;
use std::io::{self, Read as _, Write as _};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linerate_core::wire::iperf3::params::{Params, Refusal, Transport};
use linerate_core::wire::iperf3::results::{Results, StreamResult};
use linerate_core::wire::iperf3::session::{
    ServerAction, ServerEnding, ServerEvent, ServerSession, Timeouts,
};
use linerate_core::wire::iperf3::{errno, stream_id, Cookie, State, COOKIE_LEN, UDP_CONNECT_REPLY};

use super::auth::ServerAuth;
use super::streams::{self, StreamCfg, StreamOutcome};
use crate::sys::sock;
use crate::throughput::net::{DataSock, NetError, UDP_RCVBUF_BYTES};

/// Where the hub's log lines go.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// How long a new connection may take to send its 37-byte cookie.
pub const COOKIE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take between protocol steps (and a silent
/// control connection during a test is noticed by its close, or by the
/// test's end plus [`GRACE`]).
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a test may run beyond `time + omit` before the server ends it.
pub const GRACE: Duration = Duration::from_secs(10);
/// Connections waiting for their cookie at once; more are closed.
pub const MAX_PENDING: usize = 256;

/// How the hub serves.
#[derive(Clone)]
pub struct HubConfig {
    /// Most iperf3 sessions at once; more get ACCESS_DENIED.
    pub max_clients: usize,
    /// Longest `time + omit` a client may ask for (and the bound of tests
    /// by bytes or blocks).
    pub max_duration: Option<Duration>,
    /// Largest total rate a client may ask for, bit/s.
    pub max_rate_bits_per_s: Option<u64>,
    /// RSA authentication (`--rsa-private-key-path`, `--authorized-users-path`).
    pub auth: Option<Arc<ServerAuth>>,
    /// Without `auth`, serve loopback peers only (others get ACCESS_DENIED).
    pub loopback_only: bool,
    /// Log sink.
    pub log: Log,
}

impl std::fmt::Debug for HubConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubConfig")
            .field("max_clients", &self.max_clients)
            .field("max_duration", &self.max_duration)
            .field("max_rate_bits_per_s", &self.max_rate_bits_per_s)
            .field("auth", &self.auth.is_some())
            .finish_non_exhaustive()
    }
}

/// A data connection with the order it was accepted in.
type Arrival = (u64, TcpStream);

/// A session waiting for UDP streams from `peer` on local port `port`.
struct UdpWaiter {
    id: u64,
    peer: IpAddr,
    port: u16,
    tx: Sender<UdpSocket>,
}

/// State shared by every iperf3 port of a server.
pub struct Hub {
    cfg: HubConfig,
    active: AtomicUsize,
    pending: AtomicUsize,
    accepted: AtomicU64,
    tcp_waiters: Mutex<HashMap<Cookie, Sender<Arrival>>>,
    udp_waiters: Mutex<Vec<UdpWaiter>>,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("cfg", &self.cfg)
            .field("active", &self.active.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// The IP an address stands for (v4-mapped IPv6 as IPv4).
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl Hub {
    /// A hub; `stop` ends its listeners and sessions.
    pub fn new(cfg: HubConfig, stop: Arc<AtomicBool>) -> Arc<Self> {
        Arc::new(Self {
            cfg,
            active: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
            accepted: AtomicU64::new(0),
            tcp_waiters: Mutex::default(),
            udp_waiters: Mutex::default(),
            stop,
        })
    }

    fn log(&self, s: &str) {
        (self.cfg.log)(s);
    }

    /// Starts the UDP listener of `port` (bound like the TCP listener at
    /// `bind`): it answers UDP stream "connects" for the sessions waiting.
    pub fn listen_udp(self: &Arc<Self>, bind: SocketAddr) -> Result<JoinHandle<()>, NetError> {
        let s = reuse_udp(bind)?;
        let _ = sock::set_timeout(&s, libc::SO_RCVTIMEO, Some(Duration::from_millis(200)));
        let hub = Arc::clone(self);
        std::thread::Builder::new()
            .name("lr-i3-udp".into())
            .spawn(move || hub.udp_loop(&s, bind))
            .map_err(|e| NetError::call("spawn the iperf3 UDP listener", e))
    }

    fn udp_loop(&self, s: &UdpSocket, bind: SocketAddr) {
        let mut buf = [0u8; 64];
        while !self.stop.load(Ordering::Relaxed) {
            let Ok((n, from)) = s.recv_from(&mut buf) else {
                continue;
            };
            if n != 4 {
                continue;
            }
            let waiter = self.udp_waiters.lock().ok().and_then(|w| {
                w.iter()
                    .find(|w| w.peer == canonical(from.ip()) && w.port == bind.port())
                    .map(|w| w.tx.clone())
            });
            let Some(tx) = waiter else {
                self.log(&format!(
                    "{from}: a UDP stream connect for no waiting iperf3 session, ignored"
                ));
                continue;
            };
            match stream_socket(bind, from) {
                Ok(d) => {
                    let _ = tx.send(d);
                }
                Err(e) => self.log(&format!("{from}: UDP stream socket: {e}")),
            }
        }
    }

    /// A number that orders connections as they were accepted: take it on
    /// the accepting thread, before the connection is handed to a thread of
    /// its own (the streams of a session are numbered, and with `--bidir`
    /// given their direction, in the order the client connected them; the
    /// order in which per-connection threads read the cookies is not it).
    pub fn next_order(&self) -> u64 {
        self.accepted.fetch_add(1, Ordering::SeqCst)
    }

    /// Serves one connection whose first byte is an iperf3 cookie's (a
    /// control connection or a TCP data connection), accepted as number
    /// `order` ([`Hub::next_order`]), on the calling thread.
    pub fn serve(self: &Arc<Self>, stream: TcpStream, peer: SocketAddr, order: u64) {
        if self.pending.fetch_add(1, Ordering::SeqCst) >= MAX_PENDING {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        if self.cfg.auth.is_none()
            && self.cfg.loopback_only
            && !crate::throughput::server::is_loopback(peer.ip())
        {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            let mut s = &stream;
            let _ = s.write_all(&[State::AccessDenied.byte()]);
            self.log(&format!(
                "an iperf3 client from {peer}; refused: only loopback peers are served without authentication (--rsa-private-key-path with --authorized-users-path, or --no-auth)"
            ));
            return;
        }
        let cookie = read_cookie(&stream);
        self.pending.fetch_sub(1, Ordering::SeqCst);
        let cookie = match cookie {
            Ok(c) => c,
            Err(e) => {
                self.log(&format!(
                    "{peer}: no iperf3 cookie within {COOKIE_TIMEOUT:?}: {e}"
                ));
                return;
            }
        };
        // A data connection of a session waiting for its streams?
        let waiting = self
            .tcp_waiters
            .lock()
            .ok()
            .and_then(|w| w.get(&cookie).cloned());
        if let Some(tx) = waiting {
            let _ = tx.send((order, stream));
            return;
        }
        let max = self.cfg.max_clients;
        let taken = self
            .active
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            });
        let mut ctrl = stream;
        if taken.is_err() {
            // What iperf3 shows as "the server is busy running a test".
            let _ = ctrl.write_all(&[State::AccessDenied.byte()]);
            self.log(&format!(
                "an iperf3 client from {peer}; refused: {max} session(s) running (--max-clients)"
            ));
            return;
        }
        let slot = Slot(self);
        self.log(&format!("an iperf3 client from {peer}; serving it"));
        Session::new(self, peer).run(&mut ctrl, cookie, slot);
    }
}

/// Hands a connection whose first byte is an iperf3 cookie's to `hub`: the
/// hook `linerate server`'s own port calls when the first byte it peeked is
/// one (`classify_first_bytes` in the throughput server); `order` is the
/// number [`Hub::next_order`] gave it when it was accepted. Without a
/// hub (iperf3 serving turned off) the client is refused with
/// ACCESS_DENIED and the log says why.
pub fn serve(
    hub: Option<&Arc<Hub>>,
    mut stream: TcpStream,
    peer: SocketAddr,
    order: u64,
    log: &dyn Fn(&str),
) {
    match hub {
        Some(h) => h.serve(stream, peer, order),
        None => {
            let _ = stream.write_all(&[State::AccessDenied.byte()]);
            log(&format!(
                "an iperf3 client from {peer}; refused: iperf3 serving is off (--no-iperf3)"
            ));
        }
    }
}

/// Gives a session slot back however the session ends.
struct Slot<'a>(&'a Hub);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Reads the 37-byte cookie within [`COOKIE_TIMEOUT`] in all (a client
/// dribbling bytes cannot hold the connection longer).
fn read_cookie(mut s: &TcpStream) -> io::Result<Cookie> {
    let _ = s.set_nodelay(true);
    let until = Instant::now() + COOKIE_TIMEOUT;
    let mut b = [0u8; COOKIE_LEN];
    let mut got = 0;
    while got < COOKIE_LEN {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::from(io::ErrorKind::TimedOut));
        }
        s.set_read_timeout(Some(left))?;
        match s.read(&mut b[got..]) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Cookie::parse(&b).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidData))
}

/// A UDP socket bound to `bind` with SO_REUSEADDR (several share the port).
fn reuse_udp(bind: SocketAddr) -> Result<UdpSocket, NetError> {
    let domain = if bind.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let fd = sock::socket(domain, libc::SOCK_DGRAM)
        .map_err(|e| NetError::call("socket(SOCK_DGRAM)", e))?;
    sock::set_int(&fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)
        .map_err(|e| NetError::call("SO_REUSEADDR", e))?;
    sock::bind(&fd, &bind).map_err(|e| NetError::call(format!("bind UDP {bind}"), e))?;
    Ok(UdpSocket::from(fd))
}

/// A stream's UDP socket: bound to the listener's address, connected to
/// the client, the connect answered.
fn stream_socket(bind: SocketAddr, peer: SocketAddr) -> Result<UdpSocket, NetError> {
    let s = reuse_udp(bind)?;
    s.connect(peer)
        .map_err(|e| NetError::call(format!("connect UDP to {peer}"), e))?;
    s.send(&UDP_CONNECT_REPLY)
        .map_err(|e| NetError::call("send the UDP connect answer", e))?;
    Ok(s)
}

/// The receive buffers of one session's UDP streams together ask for at
/// most this (the kernel's default of ~208 KiB holds only a millisecond of
/// a fast stream; 128 streams × 16 MiB would pin gigabytes).
const SESSION_UDP_RCVBUF: usize = 64 << 20;

/// Asks for a UDP stream's share of [`SESSION_UDP_RCVBUF`] (between 1 MiB
/// and linerate's usual 16 MiB): SO_RCVBUFFORCE when privileged, else
/// SO_RCVBUF capped by rmem_max.
fn udp_rcvbuf(s: &UdpSocket, streams: usize) {
    let per = (SESSION_UDP_RCVBUF / streams.max(1)).clamp(1 << 20, UDP_RCVBUF_BYTES as usize);
    let v = i32::try_from(per).unwrap_or(i32::MAX);
    if sock::set_int(s, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, v).is_err() {
        let _ = sock::set_int(s, libc::SOL_SOCKET, libc::SO_RCVBUF, v);
    }
}

/// Removes a session's waiters however it ends.
struct Waiting<'a> {
    hub: &'a Hub,
    cookie: Option<Cookie>,
    udp: bool,
    id: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let (Some(c), Ok(mut w)) = (self.cookie, self.hub.tcp_waiters.lock()) {
            w.remove(&c);
        }
        if self.udp {
            if let Ok(mut w) = self.hub.udp_waiters.lock() {
                w.retain(|x| x.id != self.id);
            }
        }
    }
}

/// One iperf3 client's session on the server.
struct Session<'a> {
    hub: &'a Arc<Hub>,
    peer: SocketAddr,
    clock: Instant,
    notes: Vec<String>,
}

/// Where a session's streams come from while it waits for them.
enum Incoming {
    Tcp(Receiver<Arrival>),
    Udp(Receiver<UdpSocket>),
}

impl<'a> Session<'a> {
    fn new(hub: &'a Arc<Hub>, peer: SocketAddr) -> Self {
        Self {
            hub,
            peer,
            clock: Instant::now(),
            notes: Vec::new(),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.clock.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn log(&self, s: &str) {
        self.hub.log(&format!("{}: {s}", self.peer));
    }

    /// Keeps a note for the log and the server output, once.
    fn note(&mut self, n: String) {
        if !self.notes.contains(&n) {
            self.notes.push(n);
        }
    }

    /// Runs the session; `slot` is given back once the streams are joined
    /// and the results are about to be exchanged (before DISPLAY_RESULTS,
    /// so a client that starts its next test as soon as it has printed its
    /// results is not refused as busy), or when the session ends otherwise.
    fn run(mut self, ctrl: &mut TcpStream, cookie: Cookie, slot: Slot<'_>) {
        let mut slot = Some(slot);
        let max_ns = self
            .hub
            .cfg
            .max_duration
            .map_or(86_400 * 1_000_000_000, |d| {
                u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
            });
        let timeouts = Timeouts {
            step_ns: STEP_TIMEOUT.as_nanos() as u64,
            grace_ns: GRACE.as_nanos() as u64,
            max_test_ns: max_ns,
        };
        let _ = ctrl.set_write_timeout(Some(STEP_TIMEOUT));
        let _ = ctrl.set_read_timeout(Some(Duration::from_millis(50)));
        let mut m = ServerSession::new(self.now(), timeouts);
        let mut waiting = Waiting {
            hub: self.hub,
            cookie: None,
            udp: false,
            id: 0,
        };
        let mut incoming: Option<Incoming> = None;
        let mut arrived: Vec<(u64, DataSock)> = Vec::new();
        let mut running: Option<(streams::Running, Instant)> = None;
        let mut queue = m.handle(self.now(), ServerEvent::Bytes(cookie.as_bytes()));
        let mut buf = vec![0u8; 16 * 1024];
        let mut peer_results: Option<Box<Results>> = None;
        // Accepted, but another session of this client's address still
        // waits for its UDP streams.
        let mut deferred = false;
        loop {
            for a in std::mem::take(&mut queue) {
                match a {
                    ServerAction::Send(b) => {
                        if let Err(e) = ctrl.write_all(&b) {
                            queue.extend(m.handle(self.now(), ServerEvent::Closed));
                            self.note(format!("control write failed: {e}"));
                        }
                    }
                    ServerAction::Cookie(_) => {}
                    ServerAction::Check(p) => match self.check(&p) {
                        Ok(()) => match self.register(&p, cookie, ctrl, &mut waiting) {
                            Some(inc) => {
                                incoming = Some(inc);
                                queue.extend(m.handle(self.now(), ServerEvent::Accepted));
                            }
                            None => deferred = true,
                        },
                        Err(r) => queue.extend(m.handle(self.now(), ServerEvent::Refused(r))),
                    },
                    ServerAction::StartFlows => {
                        let Some(p) = m.params() else { continue };
                        let senders = p.stream_senders();
                        arrived.sort_by_key(|(o, _)| *o);
                        let socks = std::mem::take(&mut arrived)
                            .into_iter()
                            .zip(senders)
                            .enumerate()
                            .map(|(i, ((_, s), client_sends))| (stream_id(i), !client_sends, s))
                            .collect();
                        match streams::start(socks, StreamCfg::of(p)) {
                            Ok(r) => running = Some((r, Instant::now())),
                            Err(e) => {
                                self.note(format!("cannot start the streams: {e}"));
                                queue.extend(m.handle(self.now(), ServerEvent::Closed));
                            }
                        }
                    }
                    ServerAction::StopFlows => {
                        let ours = match running.take() {
                            Some((r, t0)) => {
                                let wall = t0.elapsed();
                                let out = r.join();
                                self.results(m.params(), &out, wall)
                            }
                            None => Results::default(),
                        };
                        queue.extend(
                            m.handle(self.now(), ServerEvent::FlowsStopped(Box::new(ours))),
                        );
                    }
                    ServerAction::ClientResults(r) => {
                        peer_results = Some(r);
                        // The streams were stopped and joined (FlowsStopped).
                        drop(slot.take());
                    }
                    ServerAction::Finish(e) => {
                        if let Some((r, _)) = running.take() {
                            drop(r.join());
                        }
                        self.finished(&e, m.params(), peer_results.as_deref());
                        return;
                    }
                }
            }
            if m.is_done() && queue.is_empty() {
                return;
            }
            // UDP streams carry no cookie: one session at a time per client
            // address may wait for them, so each connect is its own.
            if let (true, Some(p)) = (deferred, m.params()) {
                if let Some(inc) = self.register(p, cookie, ctrl, &mut waiting) {
                    incoming = Some(inc);
                    deferred = false;
                    queue.extend(m.handle(self.now(), ServerEvent::Accepted));
                    continue;
                }
            }
            if self.hub.stop.load(Ordering::Relaxed) {
                // The machine sends SERVER_TERMINATE to a running test.
                queue.extend(m.handle(u64::MAX, ServerEvent::Tick));
                continue;
            }
            // Streams arriving.
            if let (Some(inc), Some(p)) = (&incoming, m.params()) {
                let want = p.stream_senders().len();
                match inc {
                    Incoming::Tcp(rx) => {
                        while let Ok((o, s)) = rx.try_recv() {
                            let _ = s.set_nodelay(p.nodelay);
                            let _ = s.set_read_timeout(None);
                            match streams::apply_options(&s, p, true) {
                                Ok(n) => n.into_iter().for_each(|n| self.note(n)),
                                Err((_, e)) => self.note(e),
                            }
                            arrived.push((o, DataSock::Tcp(s)));
                        }
                    }
                    Incoming::Udp(rx) => {
                        while let Ok(s) = rx.try_recv() {
                            if p.window == 0 {
                                udp_rcvbuf(&s, want);
                            }
                            match streams::apply_options(&s, p, false) {
                                Ok(n) => n.into_iter().for_each(|n| self.note(n)),
                                Err((_, e)) => self.note(e),
                            }
                            let o = arrived.len() as u64;
                            arrived.push((o, DataSock::Udp(s)));
                        }
                    }
                }
                if arrived.len() >= want {
                    incoming = None;
                    drop(std::mem::replace(
                        &mut waiting,
                        Waiting {
                            hub: self.hub,
                            cookie: None,
                            udp: false,
                            id: 0,
                        },
                    ));
                    queue.extend(m.handle(self.now(), ServerEvent::StreamsReady));
                    continue;
                }
            }
            let read_wait = if incoming.is_some() { 5 } else { 50 };
            let _ = ctrl.set_read_timeout(Some(Duration::from_millis(read_wait)));
            match ctrl.read(&mut buf) {
                Ok(0) => queue.extend(m.handle(self.now(), ServerEvent::Closed)),
                Ok(n) => queue.extend(m.handle(self.now(), ServerEvent::Bytes(&buf[..n]))),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => queue.extend(m.handle(self.now(), ServerEvent::Closed)),
            }
            queue.extend(m.handle(self.now(), ServerEvent::Tick));
        }
    }

    /// Authentication and the server's limits.
    fn check(&mut self, p: &Params) -> Result<(), Refusal> {
        if let Some(a) = &self.hub.cfg.auth {
            match a.check(p.authtoken.as_deref()) {
                Ok(user) => self.log(&format!("authenticated user {user}")),
                Err(e) => {
                    return Err(Refusal {
                        code: errno::AUTH,
                        reason: e.to_string(),
                    })
                }
            }
        }
        let max_s = self.hub.cfg.max_duration.map(|d| d.as_secs());
        p.check_limits(max_s, self.hub.cfg.max_rate_bits_per_s)?;
        if let Some(cc) = &p.congestion {
            // Refused now, as iperf3 does, rather than on every stream.
            let avail =
                std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                    .unwrap_or_default();
            if p.transport == Transport::Tcp && !avail.split_whitespace().any(|a| a == cc) {
                let allowed =
                    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
                        .unwrap_or_default();
                if !allowed.split_whitespace().any(|a| a == cc) {
                    return Err(Refusal {
                        code: errno::SET_CONGESTION,
                        reason: format!("congestion control {cc} is not available here"),
                    });
                }
            }
        }
        Ok(())
    }

    /// Registers the session as waiting for its streams; None while
    /// another session of the same client address waits for UDP streams on
    /// this port.
    fn register(
        &mut self,
        p: &Params,
        cookie: Cookie,
        ctrl: &TcpStream,
        w: &mut Waiting<'_>,
    ) -> Option<Incoming> {
        if p.transport == Transport::Udp {
            let (tx, rx) = mpsc::channel();
            let port = ctrl.local_addr().map_or(0, |a| a.port());
            let peer = canonical(self.peer.ip());
            if let Ok(mut ws) = self.hub.udp_waiters.lock() {
                if ws.iter().any(|x| x.peer == peer && x.port == port) {
                    return None;
                }
                w.id = self.hub.accepted.fetch_add(1, Ordering::SeqCst);
                ws.push(UdpWaiter {
                    id: w.id,
                    peer,
                    port,
                    tx,
                });
            }
            w.udp = true;
            Some(Incoming::Udp(rx))
        } else {
            let (tx, rx) = mpsc::channel();
            if let Ok(mut ws) = self.hub.tcp_waiters.lock() {
                ws.insert(cookie, tx);
            }
            w.cookie = Some(cookie);
            Some(Incoming::Tcp(rx))
        }
    }

    /// This end's results message.
    fn results(&mut self, p: Option<&Params>, out: &[StreamOutcome], wall: Duration) -> Results {
        let wall_ns = wall.as_nanos().max(1) as f64;
        let user: u64 = out.iter().map(|o| o.cpu_ns.0).sum();
        let sys: u64 = out.iter().map(|o| o.cpu_ns.1).sum();
        let tcp = p.is_some_and(|p| p.transport == Transport::Tcp);
        let sends = out.iter().any(|o| o.sender);
        for o in out {
            if let Some(e) = &o.error {
                self.note(format!("stream {}: {e}", o.id));
            }
        }
        Results {
            cpu_util_total: (user + sys) as f64 / wall_ns * 100.0,
            cpu_util_user: user as f64 / wall_ns * 100.0,
            cpu_util_system: sys as f64 / wall_ns * 100.0,
            sender_has_retransmits: match (sends, tcp) {
                (false, _) => -1,
                (true, true) => 1,
                (true, false) => 0,
            },
            congestion_used: tcp.then(|| congestion_used(p)),
            server_output_text: p
                .filter(|p| p.get_server_output)
                .map(|_| self.output_text(out)),
            server_output_json: None,
            streams: out.iter().map(stream_result).collect(),
        }
    }

    /// The server's own account for `--get-server-output`.
    fn output_text(&self, out: &[StreamOutcome]) -> String {
        let mut t = format!(
            "linerate {} serving {} (iperf3 protocol)\n",
            env!("CARGO_PKG_VERSION"),
            self.peer
        );
        for o in out {
            let secs = o.elapsed_ns as f64 / 1e9;
            let bits = if secs > 0.0 {
                o.bytes as f64 * 8.0 / secs
            } else {
                0.0
            };
            let role = if o.sender { "sender" } else { "receiver" };
            t.push_str(&format!(
                "[{:>3}] 0.00-{secs:.2} sec  {} bytes  {:.2} Mbits/sec  {role}",
                o.id,
                o.bytes,
                bits / 1e6
            ));
            if let Some((u, at_omit)) = &o.udp {
                let lost = u.errors.saturating_sub(at_omit.errors);
                let total = u.packets.saturating_sub(at_omit.packets);
                t.push_str(&format!(
                    "  jitter {:.3} ms  lost {lost}/{total}",
                    u.jitter_ns / 1e6
                ));
            }
            t.push('\n');
        }
        for n in &self.notes {
            t.push_str(&format!("note: {n}\n"));
        }
        t
    }

    fn finished(&self, e: &ServerEnding, p: Option<&Params>, peer: Option<&Results>) {
        let what = p.map_or(String::new(), |p| {
            format!(
                "{:?} {:?}, {} stream(s) each way asked, ",
                p.transport, p.mode, p.parallel
            )
        });
        let version = p
            .and_then(|p| p.client_version.clone())
            .unwrap_or_else(|| "<3.1".into());
        match e {
            ServerEnding::Complete => {
                let client_bytes: u64 = peer.map_or(0, |r| r.streams.iter().map(|s| s.bytes).sum());
                self.log(&format!(
                    "iperf3 {version} session done: {what}client counted {client_bytes} bytes"
                ));
            }
            ServerEnding::Refused(r) => self.log(&format!("iperf3 {version} session refused: {r}")),
            ServerEnding::Aborted(why) => {
                self.log(&format!("iperf3 {version} session ended early: {why}"))
            }
        }
        for n in &self.notes {
            self.log(&format!("note: {n}"));
        }
    }
}

fn congestion_used(p: Option<&Params>) -> String {
    p.and_then(|p| p.congestion.clone()).unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    })
}

fn stream_result(o: &StreamOutcome) -> StreamResult {
    let to_i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let (errors, omitted_errors, packets, omitted_packets, jitter_s) = match &o.udp {
        Some((u, at)) => (
            to_i(u.errors),
            to_i(at.errors),
            to_i(u.packets),
            to_i(at.packets),
            u.jitter_ns / 1e9,
        ),
        None => (0, 0, to_i(o.packets), 0, 0.0),
    };
    StreamResult {
        id: o.id,
        bytes: o.bytes,
        retransmits: match (o.sender, o.retransmits) {
            (true, Some(r)) => to_i(r),
            _ => -1,
        },
        jitter_s,
        errors,
        omitted_errors: Some(omitted_errors),
        packets,
        omitted_packets: Some(omitted_packets),
        start_time_s: Some(0.0),
        end_time_s: Some(o.elapsed_ns as f64 / 1e9),
    }
}

/// A dedicated iperf3 port (`--iperf3-port`, default 5201): TCP listener
/// and UDP listener, every connection served by the hub on its own thread.
#[derive(Debug)]
pub struct Listener {
    listener: TcpListener,
    hub: Arc<Hub>,
}

impl Listener {
    /// Binds the TCP listener and starts the UDP listener on `addr`.
    pub fn bind(hub: &Arc<Hub>, addr: SocketAddr) -> Result<Self, NetError> {
        let listener =
            TcpListener::bind(addr).map_err(|e| NetError::call(format!("listen on {addr}"), e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| NetError::call("O_NONBLOCK on the listener", e))?;
        let bound = listener
            .local_addr()
            .map_err(|e| NetError::call("getsockname", e))?;
        hub.listen_udp(bound)?;
        Ok(Self {
            listener,
            hub: Arc::clone(hub),
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> Result<SocketAddr, NetError> {
        self.listener
            .local_addr()
            .map_err(|e| NetError::call("getsockname", e))
    }

    /// Accepts until the hub's stop flag is set.
    pub fn run(self) {
        if let Ok(a) = self.local_addr() {
            self.hub
                .log(&format!("iperf3 clients served on {a} (TCP and UDP)"));
        }
        while !self.hub.stop.load(Ordering::Relaxed) {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    let _ = stream.set_nonblocking(false);
                    let hub = Arc::clone(&self.hub);
                    let order = hub.next_order();
                    let spawned = std::thread::Builder::new()
                        .name("lr-i3-conn".into())
                        .spawn(move || hub.serve(stream, peer, order));
                    if let Err(e) = spawned {
                        self.hub
                            .log(&format!("cannot spawn a thread for {peer}: {e}"));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.hub.log(&format!("accept failed: {e}"));
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }
}
