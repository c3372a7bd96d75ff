//! `linerate server`: accepts control connections, runs each client's
//! session on threads of its own, refuses clients beyond its limits with a
//! message saying so, and survives any client.
//!
//! Every accepted connection is *pending* until it is authenticated (or,
//! for a data connection, attached to its session): pending connections are
//! bounded per source address and in total, and when a bound is reached the
//! oldest pending connection is closed to make room, so a flood of silent
//! connections cannot lock a legitimate client out (it sends its Hello at
//! once and is never the oldest for long). The first bytes of a connection
//! decide its dialect ([`classify_first_bytes`]); a linerate control
//! connection's first frame decides what it is: a Hello opens a session
//! (after authentication, see `linerate_core::wire::control_auth`), a
//! DataHello attaches a TCP data connection to its session (cookie and
//! address checked, at most one per flow: extras are closed at once).
//! Anything else, or nothing within [`FIRST_FRAME_TIMEOUT`], closes it.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd as _;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use linerate_core::throughput::model::{
    End, FlowDir, FlowRole, Protocol, SendPath, SideReport, ThroughputParams,
};
use linerate_core::untrusted::{escape, neutralize};
use linerate_core::wire::control::{check_hello, Message, SessionKind, CONTROL_VERSION};
use linerate_core::wire::control_auth::{hex, parse_nonce, Key};

use super::control::{Control, CtrlError};
use super::flow::{self, FlowJob, FlowShared};
use super::net::{self, DataSock, NetError};
use super::session;

/// How long a new connection may take to send its first frame.
pub const FIRST_FRAME_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take between handshake steps.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a session may run beyond its test time before it is stopped.
pub const GRACE: Duration = Duration::from_secs(15);
/// How often the accept loop looks at the stop flag when nothing wakes it
/// ([`StopHandle::stop`] wakes it at once).
const STOP_CHECK: Duration = Duration::from_millis(500);

/// Where the server's log lines go.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// The server's limits; every one has a safe default ([`Limits::default`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Connections pending authentication (or attachment) at once; the
    /// oldest is closed to make room for a new one.
    pub pending_total: usize,
    /// Pending connections from one source address; the oldest of that
    /// source is closed to make room.
    pub pending_per_source: usize,
    /// Most streams (flows per direction) a session may ask for.
    pub streams: u16,
    /// Most memory one session's buffers may take, bytes, as computed from
    /// its parameters before it is accepted ([`session_memory_bytes`]).
    pub session_memory_bytes: u64,
    /// Most total rate across all sessions, bit/s: a session asking for
    /// more than what is left, or for no rate limit at all, is refused.
    /// `None`: no limit.
    pub max_rate_bits_per_s: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            pending_total: 64,
            pending_per_source: 8,
            streams: 16,
            session_memory_bytes: 512 << 20,
            max_rate_bits_per_s: None,
        }
    }
}

/// Who may open a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Peers that prove they know this key (HMAC-SHA256 challenge and
    /// response, the server proving it too).
    Key(Key),
    /// Peers on a loopback address only, without authentication (the
    /// default without a key: only local users, who could run anything
    /// anyway, reach it).
    LoopbackOnly,
    /// Anyone who reaches the port (`--no-auth`: a closed lab network).
    Anyone,
}

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
    /// The other limits.
    pub limits: Limits,
    /// Who may open a session.
    pub access: Access,
    /// Log sink. Peer-controlled text reaches it escapped
    /// ([`linerate_core::untrusted::escape`]); it must not fail.
    pub log: Log,
    /// Serves iperf3 clients that connect to this port (None: refuses them).
    pub iperf3: Option<Arc<crate::iperf3::Hub>>,
}

impl ServerConfig {
    /// A server on `bind` with the default limits, at most 4 clients, 300 s
    /// sessions, loopback peers only, and no log.
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            bind,
            once: false,
            max_clients: 4,
            max_duration: Some(Duration::from_secs(300)),
            limits: Limits::default(),
            access: Access::LoopbackOnly,
            log: Arc::new(|_: &str| {}),
            iperf3: None,
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("bind", &self.bind)
            .field("once", &self.once)
            .field("max_clients", &self.max_clients)
            .field("max_duration", &self.max_duration)
            .field("limits", &self.limits)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

/// What a connection's first bytes say it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// linerate's control protocol: a 4-byte big-endian frame length, whose
    /// first byte is 0 for every frame up to 16 MiB.
    Linerate,
    /// An iperf3 client: its 37-byte cookie starts with one of the cookie's
    /// characters.
    Iperf3,
    /// Something else.
    Unknown,
}

/// The dialect of a connection from its first bytes (at least one).
pub fn classify_first_bytes(first: &[u8]) -> Dialect {
    match first.first() {
        Some(0) => Dialect::Linerate,
        Some(&b) if linerate_core::wire::iperf3::starts_cookie(b) => Dialect::Iperf3,
        _ => Dialect::Unknown,
    }
}

/// One session's entry for its data connections.
struct Entry {
    cookie: u64,
    peer: IpAddr,
    tx: Sender<(u16, TcpStream)>,
    /// Data connections it takes (0 until its Start was accepted).
    wanted: usize,
    attached: usize,
}

type Registry = Mutex<HashMap<u32, Entry>>;

/// A connection waiting for its first frame, authentication or attachment.
struct PendingConn {
    id: u64,
    src: IpAddr,
    /// A handle on the socket, to close it when it is evicted.
    stream: TcpStream,
    /// It sent a well-formed first frame: silent ones are evicted first.
    spoke: bool,
}

impl PendingConn {
    /// Whether bytes wait unread on it: a client whose Hello arrived but
    /// whose handshake thread has not read it yet (a loaded host) is not
    /// silent. Peeked without blocking, the descriptor's flags untouched.
    fn has_unread_bytes(&self) -> bool {
        let mut b = [0u8; 1];
        matches!(
            crate::sys::sock::recv(
                self.stream.as_raw_fd(),
                &mut b,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            ),
            Ok(1)
        )
    }

    /// Which of the connections that `among` selects to evict: the oldest
    /// silent one (no well-formed frame read and nothing unread), then the
    /// oldest that has not spoken, then the oldest.
    fn to_evict(list: &VecDeque<Self>, among: impl Fn(&Self) -> bool) -> Option<usize> {
        list.iter()
            .position(|p| among(p) && !p.spoke && !p.has_unread_bytes())
            .or_else(|| list.iter().position(|p| among(p) && !p.spoke))
            .or_else(|| list.iter().position(&among))
    }
}

/// The pending connections, oldest first.
#[derive(Default)]
struct PendingSet {
    list: Mutex<VecDeque<PendingConn>>,
    next: AtomicU64,
    evicted: AtomicU64,
}

impl PendingSet {
    /// Adds a connection, evicting (shutting down) the oldest of its source
    /// and then the oldest overall as needed — the oldest silent one first,
    /// so a flood of silent connections from a client's own address cannot
    /// evict it while it authenticates; returns its id. `expected`: data
    /// connections the source's accepted sessions still wait for, allowed
    /// beyond the per-source limit (a session of 8 streams each way opens
    /// 16 at once, and they wait here until a thread reads their hello).
    fn admit(
        &self,
        stream: &TcpStream,
        src: IpAddr,
        limits: &Limits,
        expected: usize,
    ) -> Option<u64> {
        // Out of descriptors for the handle: the oldest pending connection
        // makes room.
        let handle = match stream.try_clone() {
            Ok(h) => h,
            Err(_) if self.evict_oldest() => stream.try_clone().ok()?,
            Err(_) => return None,
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        let per_source = limits.pending_per_source.max(1) + expected;
        while list.iter().filter(|p| p.src == src).count() >= per_source {
            let Some(i) = PendingConn::to_evict(&list, |p| p.src == src) else {
                break;
            };
            self.evict(&mut list, i);
        }
        while list.len() >= limits.pending_total.max(1) {
            let i = PendingConn::to_evict(&list, |_| true).unwrap_or(0);
            self.evict(&mut list, i);
        }
        list.push_back(PendingConn {
            id,
            src,
            stream: handle,
            spoke: false,
        });
        Some(id)
    }

    fn evict(&self, list: &mut VecDeque<PendingConn>, i: usize) {
        if let Some(p) = list.remove(i) {
            // Its thread's read returns at once and the thread ends.
            let _ = p.stream.shutdown(std::net::Shutdown::Both);
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Closes the oldest pending connection; false if there is none.
    fn evict_oldest(&self) -> bool {
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        if list.is_empty() {
            return false;
        }
        self.evict(&mut list, 0);
        true
    }

    /// The connection sent a well-formed first frame.
    fn spoke(&self, id: u64) {
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = list.iter_mut().find(|p| p.id == id) {
            p.spoke = true;
        }
    }

    /// The connection is no longer pending.
    fn done(&self, id: u64) {
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|p| p.id != id);
    }

    fn len(&self) -> usize {
        self.list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Removes a connection from the pending set when its handshake ends, however.
struct PendingGuard(Arc<PendingSet>, u64);

impl Drop for PendingGuard {
    fn drop(&mut self) {
        self.0.done(self.1);
    }
}

/// Stops a running server from another thread, waking its accept loop.
#[derive(Debug, Clone)]
pub struct StopHandle {
    flag: Arc<AtomicBool>,
    wake: Arc<UnixStream>,
}

impl StopHandle {
    /// Makes [`Server::run`] return (sessions under way end early).
    pub fn stop(&self) {
        self.flag.store(true, Ordering::SeqCst);
        let _ = (&*self.wake).write(&[1]);
    }
}

use std::io::Write as _;

/// A bound server.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    cfg: ServerConfig,
    registry: Arc<Registry>,
    active: Arc<AtomicUsize>,
    rate_in_use: Arc<Mutex<u64>>,
    pending: Arc<PendingSet>,
    stop: Arc<AtomicBool>,
    wake: (Arc<UnixStream>, UnixStream),
}

impl std::fmt::Debug for PendingSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingSet")
            .field("pending", &self.len())
            .field("evicted", &self.evicted.load(Ordering::Relaxed))
            .finish()
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("peer", &self.peer)
            .field("wanted", &self.wanted)
            .field("attached", &self.attached)
            .finish_non_exhaustive()
    }
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
        let (w, r) = UnixStream::pair().map_err(|e| NetError::call("socketpair", e))?;
        r.set_nonblocking(true)
            .map_err(|e| NetError::call("O_NONBLOCK on the wake-up socket", e))?;
        Ok(Self {
            listener,
            cfg,
            registry: Arc::default(),
            active: Arc::default(),
            rate_in_use: Arc::default(),
            pending: Arc::default(),
            stop: Arc::default(),
            wake: (Arc::new(w), r),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> Result<SocketAddr, NetError> {
        self.listener
            .local_addr()
            .map_err(|e| NetError::call("getsockname", e))
    }

    /// Set to true to make [`Server::run`] return (noticed within half a
    /// second; [`Server::stop_handle`] wakes it at once).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// A handle that stops the server and wakes its accept loop.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            flag: Arc::clone(&self.stop),
            wake: Arc::clone(&self.wake.0),
        }
    }

    /// Accepts connections until the stop flag is set (or, with `once`,
    /// until the first session ended). The loop sleeps in poll(2) on the
    /// listener and the wake-up socket: a connection is accepted as soon
    /// as it is ready.
    pub fn run(self) -> Result<(), NetError> {
        let log = Arc::clone(&self.cfg.log);
        // Large buffers are unmapped when their session frees them (see
        // sys::alloc); what the arenas keep is released at each session's end.
        crate::sys::alloc::fix_mmap_threshold();
        if let Ok(a) = self.local_addr() {
            let access = match &self.cfg.access {
                Access::Key(_) => "pre-shared key required",
                Access::LoopbackOnly => "no key: loopback peers only",
                Access::Anyone => "NO AUTHENTICATION: anyone who reaches the port",
            };
            log(&format!(
                "listening on {a} (control protocol v{CONTROL_VERSION}, at most {} clients, {access})",
                self.cfg.max_clients
            ));
        }
        let fds = [self.listener.as_raw_fd(), self.wake.1.as_raw_fd()];
        let stop_self = self.stop_handle();
        while !self.stop.load(Ordering::SeqCst) {
            match crate::sys::sock::poll_readable_any(&fds, STOP_CHECK) {
                Ok(_) => {}
                Err(e) => {
                    log(&format!("poll on the listener failed: {e}"));
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            let mut drain = [0u8; 64];
            while matches!(std::io::Read::read(&mut &self.wake.1, &mut drain), Ok(n) if n > 0) {}
            // Accept everything that is ready, then sleep again.
            loop {
                if self.stop.load(Ordering::SeqCst) {
                    break;
                }
                match self.listener.accept() {
                    Ok((stream, peer)) => self.admit(stream, peer, &stop_self),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e)
                        if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
                            && self.pending.evict_oldest() =>
                    {
                        // Out of descriptors: the oldest pending connection
                        // makes room, so a flood cannot starve accept.
                    }
                    Err(e) => {
                        // Nothing to evict, or another error: wait, do not die.
                        log(&format!("accept failed: {e}"));
                        std::thread::sleep(Duration::from_millis(100));
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn admit(&self, stream: TcpStream, peer: SocketAddr, stop: &StopHandle) {
        // An iperf3 connection whose first byte is already here goes to the
        // hub at once, which bounds its own connections awaiting a cookie:
        // the burst of data connections of one `-P 128` client must not
        // evict each other as pending connections of one source.
        if let Some(hub) = &self.cfg.iperf3 {
            let mut first = [0u8; 1];
            let peeked = crate::sys::sock::recv(
                stream.as_raw_fd(),
                &mut first,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            );
            if matches!(peeked, Ok(1)) && classify_first_bytes(&first) == Dialect::Iperf3 {
                let (hub, order) = (Arc::clone(hub), hub.next_order());
                let spawned = std::thread::Builder::new()
                    .name("lr-i3-conn".into())
                    .spawn(move || hub.serve(stream, peer, order));
                if let Err(e) = spawned {
                    (self.cfg.log)(&format!("cannot spawn a thread for {peer}: {e}"));
                }
                return;
            }
        }
        let expected = self
            .registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|e| e.peer == peer.ip())
            .map(|e| e.wanted.saturating_sub(e.attached))
            .sum();
        let Some(id) = self
            .pending
            .admit(&stream, peer.ip(), &self.cfg.limits, expected)
        else {
            return;
        };
        let guard = PendingGuard(Arc::clone(&self.pending), id);
        // Numbered here, in accept order, should it speak iperf3.
        let order = self.cfg.iperf3.as_ref().map_or(0, |h| h.next_order());
        let _ = stream.set_nonblocking(false);
        let ctx = ConnCtx {
            cfg: self.cfg.clone(),
            registry: Arc::clone(&self.registry),
            active: Arc::clone(&self.active),
            rate_in_use: Arc::clone(&self.rate_in_use),
            stop: stop.clone(),
        };
        let spawned = std::thread::Builder::new()
            .name("lr-conn".into())
            .spawn(move || ctx.handle(stream, peer, order, guard));
        if let Err(e) = spawned {
            (self.cfg.log)(&format!("cannot spawn a thread for {peer}: {e}"));
        }
    }
}

struct ConnCtx {
    cfg: ServerConfig,
    registry: Arc<Registry>,
    active: Arc<AtomicUsize>,
    rate_in_use: Arc<Mutex<u64>>,
    stop: StopHandle,
}

/// Decrements the active-session count when a session ends, however.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Gives a session's share of the total rate back when it ends, however.
struct RateShare(Arc<Mutex<u64>>, u64);

impl Drop for RateShare {
    fn drop(&mut self) {
        let mut used = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *used = used.saturating_sub(self.1);
    }
}

/// Removes a session from the registry when it ends, however.
struct Registered(Arc<Registry>, u32);

impl Drop for Registered {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.1);
    }
}

/// Whether `ip` is a loopback address (IPv4-mapped IPv6 included).
pub(crate) fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_loopback(),
        IpAddr::V6(a) => a.is_loopback() || a.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

/// An estimate of the memory one session's buffers take at the server,
/// bytes, computed before the session is accepted: per flow a 256 KiB
/// receive buffer plus its block or datagram size times the buffers its
/// path keeps (a batch of [`flow::BATCH`] datagrams for UDP's mmsg and GSO
/// paths, two blocks for TCP, the buffers in flight for zero-copy senders),
/// and the `typical` path's application buffers of the server's senders.
pub fn session_memory_bytes(p: &ThroughputParams) -> u64 {
    const RECV_BUF: u64 = 256 << 10;
    const ZC_BUFFERS: u64 = 32;
    let size = u64::from(p.size_bytes);
    let dirs = p.flows();
    let senders = dirs.iter().filter(|d| **d == FlowDir::Reverse).count() as u64;
    let per_flow = RECV_BUF
        + if p.protocol == Protocol::Udp {
            size.saturating_mul(flow::BATCH as u64)
        } else {
            size.saturating_mul(2)
        };
    let mut total = per_flow.saturating_mul(dirs.len() as u64);
    match p.send_path {
        SendPath::Zerocopy => {
            total = total.saturating_add(size.saturating_mul(ZC_BUFFERS).saturating_mul(senders));
        }
        SendPath::Typical if senders > 0 => {
            let each = flow::typical_buffer_bytes(senders as usize) as u64;
            total = total.saturating_add(each.saturating_mul(senders));
        }
        _ => {}
    }
    total
}

impl ConnCtx {
    fn log(&self, s: &str) {
        (self.cfg.log)(s);
    }

    fn refuse(&self, ctrl: &mut Control, peer: SocketAddr, reason: &str) {
        let _ = ctrl.send(&Message::Refused {
            reason: reason.to_string(),
        });
        self.log(&format!("{peer}: refused: {reason}"));
    }

    fn handle(self, stream: TcpStream, peer: SocketAddr, order: u64, pending: PendingGuard) {
        // The first bytes decide the dialect: the one place another
        // protocol on this port would be dispatched.
        let _ = stream.set_read_timeout(Some(FIRST_FRAME_TIMEOUT));
        let mut first = [0u8; 1];
        match stream.peek(&mut first) {
            Ok(1) => {}
            _ => return,
        }
        match classify_first_bytes(&first) {
            Dialect::Linerate => self.linerate(stream, peer, pending),
            Dialect::Iperf3 => {
                // The iperf3 hub bounds its own connections awaiting a cookie.
                drop(pending);
                crate::iperf3::serve(
                    self.cfg.iperf3.as_ref(),
                    stream,
                    peer,
                    order,
                    &*self.cfg.log,
                );
                crate::sys::alloc::release_free_memory();
            }
            Dialect::Unknown => self.log(&format!(
                "{peer}: not the linerate control protocol (first byte {:#04x}), closed",
                first[0]
            )),
        }
    }

    fn linerate(self, stream: TcpStream, peer: SocketAddr, pending: PendingGuard) {
        let mut ctrl = Control::new(stream);
        let first = ctrl.recv(FIRST_FRAME_TIMEOUT);
        match first {
            Ok(Message::Hello {
                magic,
                version,
                software,
                nonce,
            }) => {
                pending.0.spoke(pending.1);
                if let Err(e) = check_hello(&magic, version) {
                    self.refuse(&mut ctrl, peer, &e.to_string());
                    return;
                }
                if let Err(reason) = self.authenticate(&mut ctrl, peer.ip(), &nonce) {
                    self.refuse(&mut ctrl, peer, &reason);
                    return;
                }
                drop(pending);
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
                    self.refuse(&mut ctrl, peer, &reason);
                    return;
                }
                // Freed right before the server's report is sent (see
                // `session::BeforeReport`), or when the session ends otherwise.
                let mut slot = Some(Slot(Arc::clone(&self.active)));
                self.log(&format!(
                    "{peer}: session opened by \"{}\"",
                    escape(&software)
                ));
                match self.session(&mut ctrl, peer, &mut slot) {
                    Ok(Some(side)) => self.log(&format!("{peer}: {}", summary(&side))),
                    Ok(None) => {}
                    Err(e) => {
                        let _ = ctrl.send(&Message::Error { reason: e.clone() });
                        self.log(&format!("{peer}: session failed: {}", neutralize(&e)));
                    }
                }
                drop(slot);
                // The session's buffers are freed (its flow threads have
                // been joined): give the pages back, so an idle server
                // returns to its idle size.
                crate::sys::alloc::release_free_memory();
                if self.cfg.once {
                    self.stop.stop();
                }
            }
            Ok(Message::DataHello {
                session_id,
                cookie,
                flow,
            }) => {
                let tx = {
                    let mut r = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
                    r.get_mut(&session_id)
                        .filter(|e| e.cookie == cookie && e.peer == peer.ip())
                        .filter(|e| e.attached < e.wanted)
                        .map(|e| {
                            e.attached += 1;
                            e.tx.clone()
                        })
                };
                drop(pending);
                match tx {
                    Some(tx) => {
                        let _ = tx.send((flow, ctrl.into_stream()));
                    }
                    // Dropped here: the connection closes at once.
                    None => self.log(&format!(
                        "{peer}: data connection for an unknown session, with a wrong cookie or address, or beyond its flows: closed"
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

    /// Authenticates the peer of a Hello per the server's [`Access`];
    /// `Err` is the refusal's reason.
    fn authenticate(&self, ctrl: &mut Control, ip: IpAddr, nonce: &str) -> Result<(), String> {
        let key = match &self.cfg.access {
            Access::Anyone => return Ok(()),
            Access::LoopbackOnly if is_loopback(ip) => return Ok(()),
            Access::LoopbackOnly => {
                return Err(
                    "this server has no key and serves loopback peers only: give both ends the same --auth-file"
                        .into(),
                )
            }
            Access::Key(k) => k,
        };
        let client_nonce =
            parse_nonce(nonce).ok_or("authentication required: the hello has no valid nonce")?;
        let server_nonce =
            crate::token::nonce().map_err(|e| format!("internal: no random nonce: {e}"))?;
        ctrl.send(&Message::Challenge {
            nonce: hex(&server_nonce),
            proof: key.server_proof(&client_nonce, &server_nonce),
        })
        .map_err(|e| e.to_string())?;
        match ctrl.recv(STEP_TIMEOUT) {
            Ok(Message::Auth { proof })
                if key.check_client_proof(&server_nonce, &client_nonce, &proof) =>
            {
                Ok(())
            }
            Ok(Message::Auth { .. }) => Err("authentication failed: wrong key".into()),
            Ok(other) => Err(format!(
                "authentication required: expected 'auth', got '{}'",
                other.name()
            )),
            Err(e) => Err(format!("authentication: {e}")),
        }
    }

    /// Checks a throughput session against the limits and takes its share
    /// of the total rate.
    fn admit_session(&self, params: &ThroughputParams) -> Result<Option<RateShare>, String> {
        let l = &self.cfg.limits;
        if params.streams > l.streams {
            return Err(format!(
                "{} streams asked; this server allows at most {} (--max-streams)",
                params.streams, l.streams
            ));
        }
        let mem = session_memory_bytes(params);
        if mem > l.session_memory_bytes {
            return Err(format!(
                "the session's buffers would take about {} MiB; this server allows {} MiB per session (--max-session-memory)",
                mem >> 20,
                l.session_memory_bytes >> 20
            ));
        }
        let Some(total) = l.max_rate_bits_per_s else {
            return Ok(None);
        };
        let Some(want) = params.rate_bits_per_s else {
            return Err(format!(
                "this server limits the total rate to {total} bit/s (--max-rate): ask for a rate (--rate)"
            ));
        };
        let mut used = self
            .rate_in_use
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if want > total.saturating_sub(*used) {
            return Err(format!(
                "{want} bit/s asked; {} bit/s of this server's {total} bit/s total (--max-rate) are free",
                total.saturating_sub(*used)
            ));
        }
        *used += want;
        Ok(Some(RateShare(Arc::clone(&self.rate_in_use), want)))
    }

    /// Runs one session; `None` for sessions that are not throughput tests
    /// (they log for themselves).
    fn session(
        &self,
        ctrl: &mut Control,
        peer: SocketAddr,
        slot: &mut Option<Slot>,
    ) -> Result<Option<SideReport>, String> {
        let session_id = crate::token::session_token();
        let cookie =
            crate::token::secret_u64().map_err(|e| format!("internal: no random cookie: {e}"))?;
        let (tx, rx) = mpsc::channel();
        self.registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                session_id,
                Entry {
                    cookie,
                    peer: peer.ip(),
                    tx,
                    wanted: 0,
                    attached: 0,
                },
            );
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
                let r = crate::echo::serve(
                    ctrl,
                    session_id,
                    &p,
                    self.cfg.max_duration,
                    peer.ip(),
                    &self.stop.flag,
                )?;
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
        let _rate = self.admit_session(&params)?;
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
                if udp_ports.contains(&0) {
                    return Err("UDP port 0 named for a flow".into());
                }
                let local = ctrl.stream().local_addr().map_err(|e| e.to_string())?.ip();
                let mut unconnected = Vec::new();
                let mut ports = Vec::new();
                for _ in &udp_ports {
                    let s = net::udp_bind(local, &params).map_err(|e| e.to_string())?;
                    ports.push(s.local_addr().map_err(|e| e.to_string())?.port());
                    unconnected.push(s);
                }
                ctrl.send(&Message::Accepted { udp_ports: ports })
                    .map_err(|e| e.to_string())?;
                // No reflection: a flow's path opens only when the control
                // peer itself sent from the port it named.
                let from: Vec<SocketAddr> = udp_ports
                    .iter()
                    .map(|&p| SocketAddr::new(peer.ip(), p))
                    .collect();
                open_udp_paths(&unconnected, &from, STEP_TIMEOUT)?;
                ctrl.send(&Message::Opened).map_err(|e| e.to_string())?;
                expect_go(ctrl)?;
                let mut socks = Vec::new();
                for (s, to) in unconnected.into_iter().zip(from) {
                    s.connect(to)
                        .map_err(|e| format!("connect UDP to {to}: {e}"))?;
                    drain_udp(&s);
                    socks.push(DataSock::Udp(s));
                }
                socks
            }
            Protocol::Tcp => {
                if let Some(e) = self
                    .registry
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_mut(&session_id)
                {
                    e.wanted = dirs.len();
                }
                ctrl.send(&Message::Accepted { udp_ports: vec![] })
                    .map_err(|e| e.to_string())?;
                expect_go(ctrl)?;
                let socks = collect_tcp(&rx, dirs.len(), &params, ctrl.stream())?;
                // Every flow has its connection: later ones find no session
                // and are closed at once.
                self.registry
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&session_id);
                drop(rx);
                socks
            }
        };
        ctrl.send(&Message::Running).map_err(|e| e.to_string())?;
        let jobs = jobs(session_id, &params, socks, End::Server);
        let flows = session::spawn(jobs).map_err(|e| format!("cannot spawn flow threads: {e}"))?;
        let limit = Duration::from_nanos(params.duration_ns) + GRACE;
        let mut free_slot = || drop(slot.take());
        let outcome = session::drive(
            ctrl,
            flows,
            End::Server,
            limit,
            None,
            Some(&mut free_slot),
            &self.stop.flag,
        );
        // Wait (bounded) for the client to close, so it reads the report.
        let _ = ctrl.recv(Duration::from_secs(2));
        Ok(Some(outcome.side))
    }
}

/// Waits until each socket received a datagram from its expected source
/// (others are dropped), or `within` passes.
fn open_udp_paths(
    socks: &[std::net::UdpSocket],
    from: &[SocketAddr],
    within: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + within;
    let mut open = vec![false; socks.len()];
    let mut buf = [0u8; 64];
    for s in socks {
        s.set_nonblocking(true)
            .map_err(|e| format!("O_NONBLOCK (UDP): {e}"))?;
    }
    while open.iter().any(|o| !o) {
        if Instant::now() >= deadline {
            let n = open.iter().filter(|o| **o).count();
            return Err(format!(
                "only {n} of {} UDP paths were opened by the client within {within:?}",
                socks.len()
            ));
        }
        let fds: Vec<i32> = socks
            .iter()
            .zip(&open)
            .filter(|(_, o)| !**o)
            .map(|(s, _)| s.as_raw_fd())
            .take(4)
            .collect();
        let _ = crate::sys::sock::poll_readable_any(&fds, Duration::from_millis(100));
        for ((s, want), o) in socks.iter().zip(from).zip(open.iter_mut()) {
            while let Ok((_, src)) = s.recv_from(&mut buf) {
                if same_endpoint(src, *want) {
                    *o = true;
                }
            }
        }
    }
    for s in socks {
        s.set_nonblocking(false)
            .map_err(|e| format!("O_NONBLOCK off (UDP): {e}"))?;
    }
    Ok(())
}

/// Whether `a` and `b` are the same address and port (an IPv4 address and
/// its IPv4-mapped IPv6 form are the same).
fn same_endpoint(a: SocketAddr, b: SocketAddr) -> bool {
    let canon = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    a.port() == b.port() && canon(a.ip()) == canon(b.ip())
}

/// Discards datagrams queued on `s` (the client's path openers), so the
/// flow's receiver counts only its probes.
fn drain_udp(s: &std::net::UdpSocket) {
    let mut buf = [0u8; 64];
    let _ = s.set_nonblocking(true);
    while s.recv(&mut buf).is_ok() {}
    let _ = s.set_nonblocking(false);
}

fn expect_go(ctrl: &mut Control) -> Result<(), String> {
    match ctrl.recv(STEP_TIMEOUT) {
        Ok(Message::Go) => Ok(()),
        Ok(other) => Err(format!("expected 'go', got '{}'", other.name())),
        Err(e @ CtrlError::Timeout(_)) => Err(e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether the peer closed `ctrl` (or it broke), looked at without
/// blocking or consuming anything.
fn peer_gone(ctrl: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    if ctrl.set_nonblocking(true).is_err() {
        return true;
    }
    let gone = match ctrl.peek(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    let _ = ctrl.set_nonblocking(false);
    gone
}

fn collect_tcp(
    rx: &Receiver<(u16, TcpStream)>,
    n: usize,
    params: &ThroughputParams,
    ctrl: &TcpStream,
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
        // A client that vanished frees its slot now, not at the timeout.
        if peer_gone(ctrl) {
            return Err("the client closed the control connection".into());
        }
        if let Ok((flow, s)) = rx.recv_timeout(left.min(Duration::from_millis(200))) {
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
                verify_one_in: p.verify_one_in.unwrap_or(1),
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
        // Notes quote the peer (its congestion-control name, …).
        line.push_str(&format!(" [{}]", escape(&side.notes.join("; "))));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_core::throughput::model::Direction;

    fn params(streams: u16, size_bytes: u32, direction: Direction) -> ThroughputParams {
        ThroughputParams {
            streams,
            size_bytes,
            direction,
            ..ThroughputParams::default()
        }
    }

    /// Issue 16 item 9: one bidirectional 64-stream session with 4 MiB
    /// blocks peaked at 964 MB; the estimate refuses it under the default
    /// budget, while ordinary sessions fit.
    #[test]
    fn the_memory_estimate_refuses_the_964_mb_session_and_fits_ordinary_ones() {
        let budget = Limits::default().session_memory_bytes;
        let huge = params(64, 4 << 20, Direction::Bidir);
        assert!(session_memory_bytes(&huge) > budget);
        for p in [
            ThroughputParams::default(),
            params(16, 128 << 10, Direction::Bidir),
            ThroughputParams {
                send_path: SendPath::Typical,
                ..params(16, 128 << 10, Direction::Bidir)
            },
            ThroughputParams {
                protocol: Protocol::Udp,
                size_bytes: 1472,
                ..params(16, 1472, Direction::Bidir)
            },
        ] {
            assert!(session_memory_bytes(&p) <= budget, "{p:?}");
        }
    }

    #[test]
    fn first_bytes_classify_linerate_frames_only() {
        assert_eq!(classify_first_bytes(&[0, 0, 0, 9]), Dialect::Linerate);
        assert_eq!(classify_first_bytes(b"GET /"), Dialect::Unknown);
        assert_eq!(classify_first_bytes(&[0xff]), Dialect::Unknown);
        assert_eq!(classify_first_bytes(&[]), Dialect::Unknown);
    }

    #[test]
    fn pending_connections_evict_the_oldest_of_a_source_then_overall() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let set = PendingSet::default();
        let limits = Limits {
            pending_total: 3,
            pending_per_source: 2,
            ..Limits::default()
        };
        let a: IpAddr = "198.18.0.1".parse().unwrap();
        let b: IpAddr = "198.18.0.2".parse().unwrap();
        let mut held = Vec::new();
        for src in [a, a, a, b, b] {
            let c = TcpStream::connect(addr).unwrap();
            let (s, _) = l.accept().unwrap();
            set.admit(&s, src, &limits, 0).unwrap();
            held.push((c, s));
        }
        // a, a, a → the first a evicted (per source); b → 3 in all; b →
        // total reached: the oldest overall (the second a) evicted.
        assert_eq!(set.len(), 3);
        assert_eq!(set.evicted.load(Ordering::Relaxed), 2);
        let srcs: Vec<IpAddr> = set.list.lock().unwrap().iter().map(|p| p.src).collect();
        assert_eq!(srcs, [a, b, b]);
        // The evicted connections were shut down: their peers see the end.
        let mut buf = [0u8; 1];
        for (c, _) in &held[..2] {
            use std::io::Read as _;
            c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            assert_eq!((&*c).read(&mut buf).unwrap(), 0);
        }
    }

    #[test]
    fn a_connection_whose_bytes_wait_unread_is_evicted_after_the_silent_ones() {
        use std::io::Write as _;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let set = PendingSet::default();
        let limits = Limits {
            pending_per_source: 3,
            ..Limits::default()
        };
        let src: IpAddr = "198.18.0.1".parse().unwrap();
        let mut held = Vec::new();
        // The oldest has sent its first bytes, not yet read by its thread
        // (a loaded host); four silent ones follow it.
        for i in 0..5 {
            let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            if i == 0 {
                c.write_all(&[0, 0, 0, 9]).unwrap();
            }
            let (s, _) = l.accept().unwrap();
            if i == 0 {
                // The bytes are in its receive queue before it is admitted.
                assert!(
                    crate::sys::sock::poll_readable(s.as_raw_fd(), Duration::from_secs(2)).unwrap()
                );
            }
            set.admit(&s, src, &limits, 0).unwrap();
            held.push((c, s));
        }
        assert_eq!(set.evicted.load(Ordering::Relaxed), 2);
        let ids: Vec<u64> = set.list.lock().unwrap().iter().map(|p| p.id).collect();
        assert_eq!(ids, [0, 3, 4], "the one with unread bytes kept");
    }

    #[test]
    fn data_connections_a_session_expects_are_allowed_beyond_the_per_source_limit() {
        let limits = Limits {
            pending_per_source: 2,
            ..Limits::default()
        };
        let (l, set) = (
            TcpListener::bind("127.0.0.1:0").unwrap(),
            PendingSet::default(),
        );
        let src: IpAddr = "198.18.0.1".parse().unwrap();
        let mut held = Vec::new();
        // A session of 3 streams each way opens 6 data connections at once
        // (4 still expected beyond the limit of 2), then nothing is expected.
        for expected in [4, 4, 4, 4, 4, 4, 0] {
            held.push(TcpStream::connect(l.local_addr().unwrap()).unwrap());
            let (s, _) = l.accept().unwrap();
            set.admit(&s, src, &limits, expected).unwrap();
            held.push(s);
            if expected > 0 {
                assert_eq!(set.evicted.load(Ordering::Relaxed), 0);
            }
        }
        // Once nothing is expected, the per-source limit holds again.
        assert_eq!(set.len(), 2);
        assert_eq!(set.evicted.load(Ordering::Relaxed), 5);
    }
}
