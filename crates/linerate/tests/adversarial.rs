//! The adversarial suite (issue 16): a real `linerate server` process on
//! loopback against hostile peers, hostile servers against the clients,
//! closed and full outputs, and signals at random points of commands that
//! build a bed. Each case is bounded in time and count, and asserts that
//! nothing panicked, that the server still serves a legitimate client
//! within [`SERVE_WITHIN`], that its memory (VmRSS) and descriptors stay
//! under the bounds stated here, and that nothing is left behind.
//!
//! The longer run (10⁶ fuzzed messages, minutes of floods) is
//! `bench/adversarial.sh`, which runs this file's cases with larger counts
//! (`LINERATE_ADVERSARIAL_SCALE`) and a longer flood
//! (`LINERATE_ADVERSARIAL_FLOOD_S`), and collects the `adversarial: …`
//! lines the cases print (server RSS and descriptors before, peak, after).
#![allow(clippy::unwrap_used)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use linerate_core::latency::LatencyParams;
use linerate_core::throughput::model::{Direction, Protocol, ThroughputParams};
use linerate_core::wire::control::{encode, Message, SessionKind};
use linerate_core::wire::control_auth::{hex, parse_nonce, Key};
use linerate_core::wire::echo::{Packet, HEADER_LEN};
use linerate_io::throughput::control::{Control, CtrlError};

/// A legitimate client must be served (Welcome received) within this.
const SERVE_WITHIN: Duration = Duration::from_secs(2);
/// The server's resident memory stays under this, KiB.
const RSS_BOUND_KIB: u64 = 96 * 1024;
/// Descriptors the server may hold beyond its idle count once a case ended.
const FD_SLACK_AFTER: usize = 4;

/// Multiplies the counts of the cases (`LINERATE_ADVERSARIAL_SCALE`, for
/// `bench/adversarial.sh`; 1 in CI).
fn scale() -> u64 {
    std::env::var("LINERATE_ADVERSARIAL_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1)
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_linerate")
}

// ---------------------------------------------------------------- the server

/// A `linerate server` process on 127.0.0.1, killed on drop.
struct Srv {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl Srv {
    /// Starts a server with `extra` flags and `env`; learns its port from
    /// its first log line. `keep_stderr`: false closes the read end after
    /// that line (the server's stderr becomes a closed pipe).
    fn start(extra: &[&str], env: &[(&str, &str)], keep_stderr: bool) -> Self {
        let mut cmd = Command::new(bin());
        cmd.args(["server", "--bind", "127.0.0.1", "--port", "0"])
            .args(extra)
            .env_remove("LINERATE_AUTH_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        Self::spawn(cmd, keep_stderr)
    }

    /// Spawns `cmd` (a server on 127.0.0.1 port 0, its stderr piped).
    fn spawn(mut cmd: Command, keep_stderr: bool) -> Self {
        let mut child = cmd.spawn().unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        err.read_line(&mut first).unwrap();
        let addr: SocketAddr = first
            .split("listening on ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .parse()
            .unwrap();
        let log = Arc::new(Mutex::new(vec![first.trim_end().to_string()]));
        if keep_stderr {
            let l = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in err.lines().map_while(Result::ok) {
                    l.lock().unwrap().push(line);
                }
            });
        } else {
            drop(err);
        }
        Self { child, addr, log }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server is alive, its log has no panic, its memory and
    /// descriptors are under their bounds.
    fn healthy(&mut self, fd_bound: usize) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the server exited: {:?}",
            self.log.lock().unwrap()
        );
        let log = self.log.lock().unwrap();
        assert!(
            !log.iter().any(|l| l.contains("panicked")),
            "a panic in the server's log: {log:?}"
        );
        let rss = rss_kib(self.pid());
        assert!(rss < RSS_BOUND_KIB, "server RSS {rss} KiB");
        let fds = fd_count(self.pid());
        assert!(
            fds <= fd_bound,
            "server holds {fds} descriptors (bound {fd_bound})"
        );
    }
}

impl Drop for Srv {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// VmRSS of `pid`, KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Open descriptors of `pid`.
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// Samples a process's RSS and descriptors every 50 ms while a case runs,
/// and prints before, peak and after (the figures `bench/adversarial.sh`
/// collects).
struct Monitor {
    pid: u32,
    case: &'static str,
    before: (u64, usize),
    stop: Arc<AtomicBool>,
    peak: std::thread::JoinHandle<(u64, usize)>,
}

impl Monitor {
    fn start(pid: u32, case: &'static str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let before = (rss_kib(pid), fd_count(pid));
        let peak = std::thread::spawn(move || {
            let mut peak = (0, 0);
            while !s.load(Ordering::Relaxed) {
                peak.0 = peak.0.max(rss_kib(pid));
                peak.1 = peak.1.max(fd_count(pid));
                std::thread::sleep(Duration::from_millis(50));
            }
            peak
        });
        Self {
            pid,
            case,
            before,
            stop,
            peak,
        }
    }

    /// Stops sampling, prints the figures and returns the peaks.
    fn finish(self) -> (u64, usize) {
        self.stop.store(true, Ordering::Relaxed);
        let peak = self.peak.join().unwrap();
        let after = (rss_kib(self.pid), fd_count(self.pid));
        eprintln!(
            "adversarial: {}: server RSS KiB before {} peak {} after {}; fds before {} peak {} after {}",
            self.case, self.before.0, peak.0, after.0, self.before.1, peak.1, after.1
        );
        peak
    }
}

/// Seconds the pending flood lasts at least (`LINERATE_ADVERSARIAL_FLOOD_S`,
/// for `bench/adversarial.sh`; 0 in CI: as long as its checks take).
fn flood_seconds() -> u64 {
    std::env::var("LINERATE_ADVERSARIAL_FLOOD_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Waits (bounded) until `pid` holds at most `bound` descriptors; the count
/// at the end.
fn settle_fds(pid: u32, bound: usize, within: Duration) -> usize {
    let end = Instant::now() + within;
    loop {
        let n = fd_count(pid);
        if n <= bound || Instant::now() >= end {
            return n;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ------------------------------------------------------------ the protocol

fn nonce() -> [u8; 32] {
    let mut b = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut b)
        .unwrap();
    b
}

/// Hello (and authentication with `key`) on a connected stream; the Welcome's
/// (session id, cookie), or why not.
fn handshake(ctrl: &mut Control, key: Option<&Key>) -> Result<(u32, u64), String> {
    let n = nonce();
    ctrl.send(&Message::hello("adversarial", &hex(&n)))
        .map_err(|e| e.to_string())?;
    loop {
        match ctrl
            .recv(Duration::from_secs(5))
            .map_err(|e| e.to_string())?
        {
            Message::Challenge { nonce: sn, proof } => {
                let key = key.ok_or("challenged without a key")?;
                let sn = parse_nonce(&sn).ok_or("bad server nonce")?;
                if !key.check_server_proof(&n, &sn, &proof) {
                    return Err("the server's proof is wrong".into());
                }
                ctrl.send(&Message::Auth {
                    proof: key.client_proof(&sn, &n),
                })
                .map_err(|e| e.to_string())?;
            }
            Message::Welcome {
                session_id, cookie, ..
            } => return Ok((session_id, cookie)),
            Message::Refused { reason } => return Err(format!("refused: {reason}")),
            other => return Err(format!("unexpected {}", other.name())),
        }
    }
}

/// A legitimate client connects and is welcomed within [`SERVE_WITHIN`];
/// the time it took. The sessions of earlier calls end when the server's
/// session thread sees their connection closed, which on a loaded host can
/// lag behind back-to-back calls: a "server busy" refusal (`--max-clients`)
/// is retried within the same deadline; any other refusal fails.
fn served(addr: SocketAddr, key: Option<&Key>) -> Duration {
    let t0 = Instant::now();
    loop {
        let (tx, rx) = std::sync::mpsc::channel();
        let key = key.cloned();
        let left = SERVE_WITHIN.saturating_sub(t0.elapsed());
        std::thread::spawn(move || {
            let r = TcpStream::connect_timeout(&addr, left.max(Duration::from_millis(1)))
                .map_err(|e| e.to_string())
                .and_then(|s| handshake(&mut Control::new(s), key.as_ref()));
            let _ = tx.send(r);
        });
        match rx.recv_timeout(left) {
            Ok(Ok(_)) => return t0.elapsed(),
            Ok(Err(e)) if e.contains("server busy") && t0.elapsed() < SERVE_WITHIN => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(Err(e)) => panic!("the legitimate client was not served: {e}"),
            Err(_) => panic!("the legitimate client was not served within {SERVE_WITHIN:?}"),
        }
    }
}

/// Whether the server has closed `s` (peeked without blocking).
fn closed_by_peer(s: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    let _ = s.set_nonblocking(true);
    match s.peek(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

fn throughput(protocol: Protocol, direction: Direction, duration_ms: u64) -> ThroughputParams {
    ThroughputParams {
        protocol,
        direction,
        streams: 1,
        duration_ns: duration_ms * 1_000_000,
        size_bytes: if protocol == Protocol::Udp {
            1200
        } else {
            16 * 1024
        },
        rate_bits_per_s: Some(10_000_000),
        interval_ns: 100_000_000,
        ..ThroughputParams::default()
    }
}

fn latency(tcp: bool) -> LatencyParams {
    serde_json::from_value(serde_json::json!({
        "protocol": if tcp { "tcp" } else { "udp" },
        "size_bytes": if tcp { 1 } else { 64 },
        "mode": "blocking",
        "copy": false,
        "no_udp_checksum": false,
        "duration_ns": 3_000_000_000u64,
    }))
    .unwrap()
}

/// Tiny deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A valid frame of some message, mutated (bit flips, truncation, extreme
/// length prefixes, appended garbage) or not.
fn fuzzed_frame(rng: &mut Rng) -> Vec<u8> {
    let msgs = [
        Message::hello("fuzz", &hex(&[7; 32])),
        Message::Auth {
            proof: "00".repeat(32),
        },
        Message::Start {
            session: SessionKind::Throughput(throughput(Protocol::Tcp, Direction::Bidir, 100)),
            udp_ports: vec![],
        },
        Message::Start {
            session: SessionKind::Latency(latency(false)),
            udp_ports: vec![],
        },
        Message::DataHello {
            session_id: 1,
            cookie: 2,
            flow: 0,
        },
        Message::Go,
        Message::SendDone { flows: vec![] },
    ];
    let mut f = encode(&msgs[rng.below(msgs.len() as u64) as usize]).unwrap();
    for _ in 0..rng.below(4) {
        if f.is_empty() {
            break;
        }
        let len = f.len() as u64;
        match rng.below(5) {
            0 => {
                let i = rng.below(len) as usize;
                f[i] ^= 1 << rng.below(8);
            }
            1 => f.truncate(rng.below(len + 1) as usize),
            2 if f.len() >= 4 => {
                let v =
                    [0u32, 1, 0x00FF_FFFF, u32::MAX, 1 << 20, (1 << 20) + 1][rng.below(6) as usize];
                f[..4].copy_from_slice(&v.to_be_bytes());
            }
            3 => f.extend((0..rng.below(64)).map(|_| rng.next() as u8)),
            _ => {
                let i = rng.below(len) as usize;
                f[i] = rng.next() as u8;
            }
        }
    }
    f
}

// ------------------------------------------------------------------ cases

/// Issue 16 item 1: 256 silent connections held open (reopened as they
/// close) made every legitimate handshake fail. Pending connections are
/// now bounded per source and in total, oldest closed first.
#[test]
fn pending_flood_does_not_lock_out_a_legitimate_client() {
    let mut srv = Srv::start(&[], &[], true);
    let base_fds = fd_count(srv.pid());
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicU64::new(0));
    let flooders: Vec<_> = (0..4)
        .map(|_| {
            let (stop, opened, addr) = (Arc::clone(&stop), Arc::clone(&opened), srv.addr);
            std::thread::spawn(move || {
                // 64 at once each (256 in all), then each one the server
                // closes reopened, at most 50 a second in all.
                let mut held: Vec<TcpStream> = (0..64)
                    .filter_map(|_| TcpStream::connect(addr).ok())
                    .collect();
                opened.fetch_add(held.len() as u64, Ordering::Relaxed);
                while !stop.load(Ordering::Relaxed) {
                    held.retain(|s| !closed_by_peer(s));
                    if held.len() < 64 {
                        if let Ok(s) = TcpStream::connect(addr) {
                            held.push(s);
                            opened.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(80));
                }
            })
        })
        .collect();
    let monitor = Monitor::start(srv.pid(), "pending flood");
    std::thread::sleep(Duration::from_millis(500));
    let until = Instant::now() + Duration::from_secs(flood_seconds());
    let mut checks = 0;
    while checks < 20 * scale() || Instant::now() < until {
        served(srv.addr, None);
        checks += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    for f in flooders {
        f.join().unwrap();
    }
    assert!(
        opened.load(Ordering::Relaxed) >= 256,
        "the flood did not happen"
    );
    let (peak_rss, _) = monitor.finish();
    assert!(peak_rss < RSS_BOUND_KIB, "peak RSS {peak_rss} KiB");
    // During the flood at most 64 pending + sessions; after, back to idle.
    let fds = settle_fds(srv.pid(), base_fds + FD_SLACK_AFTER, Duration::from_secs(8));
    assert!(
        fds <= base_fds + FD_SLACK_AFTER,
        "{fds} fds, idle {base_fds}"
    );
    srv.healthy(base_fds + FD_SLACK_AFTER);
}

/// Issue 16 item 2, the other half: out of descriptors, accept failed
/// ("Too many open files") and every client was refused. Now the oldest
/// pending connection makes room: with 40 descriptors and 200 silent
/// connections, a legitimate client is still served.
#[test]
fn out_of_descriptors_the_oldest_pending_connection_makes_room() {
    let mut cmd = Command::new("prlimit");
    cmd.args([
        "--nofile=40:40",
        "--",
        bin(),
        "server",
        "--bind",
        "127.0.0.1",
        "--port",
        "0",
        // Pending limits above what 40 descriptors hold: they run out first.
        "--max-pending",
        "64",
        "--max-pending-per-source",
        "64",
    ])
    .env_remove("LINERATE_AUTH_KEY")
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    let mut srv = Srv::spawn(cmd, true);
    let silent: Vec<TcpStream> = (0..200)
        .filter_map(|_| TcpStream::connect(srv.addr).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..5 {
        served(srv.addr, None);
    }
    drop(silent);
    assert!(fd_count(srv.pid()) <= 40);
    srv.healthy(40);
}

/// Slowloris: connections that dribble a byte now and then never hold the
/// server beyond the first-frame timeout and never delay a real client.
#[test]
fn slowloris_connections_do_not_delay_a_legitimate_client() {
    let mut srv = Srv::start(&[], &[], true);
    let base_fds = fd_count(srv.pid());
    let mut slow: Vec<TcpStream> = (0..40)
        .filter_map(|_| TcpStream::connect(srv.addr).ok())
        .collect();
    let frame = encode(&Message::hello("slow", &hex(&[1; 32]))).unwrap();
    for i in 0..10 {
        for s in &mut slow {
            let _ = s.write_all(&frame[i..=i]);
        }
        served(srv.addr, None);
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(slow);
    let fds = settle_fds(srv.pid(), base_fds + FD_SLACK_AFTER, Duration::from_secs(8));
    assert!(
        fds <= base_fds + FD_SLACK_AFTER,
        "{fds} fds, idle {base_fds}"
    );
    srv.healthy(base_fds + FD_SLACK_AFTER);
}

/// Issue 16 item 2: a client that owns a session could open any number of
/// data connections with its real cookie, each kept until the session
/// ended. Extras are now refused and closed at once.
#[test]
fn extra_data_connections_are_closed_at_once() {
    let mut srv = Srv::start(&[], &[], true);
    let base_fds = fd_count(srv.pid());
    let mut ctrl = Control::new(TcpStream::connect(srv.addr).unwrap());
    let (session_id, cookie) = handshake(&mut ctrl, None).unwrap();
    ctrl.send(&Message::Start {
        session: SessionKind::Throughput(throughput(Protocol::Tcp, Direction::Forward, 3000)),
        udp_ports: vec![],
    })
    .unwrap();
    assert!(matches!(
        ctrl.recv(Duration::from_secs(5)).unwrap(),
        Message::Accepted { .. }
    ));
    let data_hello = |flow| {
        let mut s = TcpStream::connect(srv.addr).unwrap();
        s.write_all(
            &encode(&Message::DataHello {
                session_id,
                cookie,
                flow,
            })
            .unwrap(),
        )
        .unwrap();
        s
    };
    let data = data_hello(0);
    let monitor = Monitor::start(srv.pid(), "descriptor bomb");
    ctrl.send(&Message::Go).unwrap();
    assert!(matches!(
        ctrl.recv(Duration::from_secs(5)).unwrap(),
        Message::Running
    ));
    let mut peak = 0;
    for i in 0..(300 * scale()) {
        let mut extra = data_hello((i % 3) as u16);
        extra.set_read_timeout(Some(SERVE_WITHIN)).unwrap();
        let mut b = [0u8; 16];
        // Closed by the server: end of stream (or a reset), not a timeout.
        match extra.read(&mut b) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("extra data connection {i} not closed: {other:?}"),
        }
        if i % 50 == 0 {
            peak = peak.max(fd_count(srv.pid()));
        }
    }
    assert!(
        peak <= base_fds + 16,
        "{peak} descriptors during the bomb (idle {base_fds})"
    );
    served(srv.addr, None);
    monitor.finish();
    drop((data, ctrl));
    let fds = settle_fds(srv.pid(), base_fds + FD_SLACK_AFTER, Duration::from_secs(8));
    assert!(
        fds <= base_fds + FD_SLACK_AFTER,
        "{fds} fds, idle {base_fds}"
    );
    srv.healthy(base_fds + FD_SLACK_AFTER);
}

/// Control-protocol fuzzing: ≥ 10⁴ mutated messages, as the first frame of
/// a connection and after a Hello, a Welcome and an Accepted.
#[test]
fn fuzzed_control_messages_at_every_step() {
    let mut srv = Srv::start(&[], &[], true);
    let base_fds = fd_count(srv.pid());
    let target = 10_000 * scale();
    let sent = Arc::new(AtomicU64::new(0));
    let monitor = Monitor::start(srv.pid(), "control fuzzing");
    let workers: Vec<_> = (0..4u64)
        .map(|t| {
            let (addr, sent) = (srv.addr, Arc::clone(&sent));
            std::thread::spawn(move || {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (t + 1));
                let mut i = 0u64;
                while sent.load(Ordering::Relaxed) < target {
                    i += 1;
                    let Ok(s) = TcpStream::connect(addr) else {
                        continue;
                    };
                    let mut ctrl = Control::new(s);
                    // The step before the fuzzed message.
                    let step = i % 4;
                    if step >= 1 && handshake(&mut ctrl, None).is_err() {
                        continue;
                    }
                    if step >= 2 {
                        let _ = ctrl.send(&Message::Start {
                            session: SessionKind::Throughput(throughput(
                                Protocol::Tcp,
                                Direction::Forward,
                                100,
                            )),
                            udp_ports: vec![],
                        });
                        let _ = ctrl.recv(Duration::from_secs(2));
                    }
                    let mut s = ctrl.into_stream();
                    for _ in 0..3 {
                        if s.write_all(&fuzzed_frame(&mut rng)).is_err() {
                            break;
                        }
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                    // Read whatever comes back (bounded), then close.
                    let _ = s.set_read_timeout(Some(Duration::from_millis(20)));
                    let mut b = [0u8; 4096];
                    let _ = s.read(&mut b);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert!(sent.load(Ordering::Relaxed) >= target, "{sent:?} messages");
    // Sessions the fuzzers opened (loopback peers, trusted without a key)
    // end as their connections close; then a client is served at once.
    let end = Instant::now() + Duration::from_secs(15);
    while Instant::now() < end {
        let mut c = Control::new(TcpStream::connect(srv.addr).unwrap());
        match handshake(&mut c, None) {
            Err(e) if e.contains("busy") => std::thread::sleep(Duration::from_millis(100)),
            _ => break,
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    served(srv.addr, None);
    let (peak_rss, _) = monitor.finish();
    eprintln!("adversarial: control fuzzing: {sent:?} messages");
    assert!(peak_rss < RSS_BOUND_KIB, "peak RSS {peak_rss} KiB");
    let fds = settle_fds(
        srv.pid(),
        base_fds + FD_SLACK_AFTER,
        Duration::from_secs(15),
    );
    assert!(
        fds <= base_fds + FD_SLACK_AFTER,
        "{fds} fds, idle {base_fds}"
    );
    srv.healthy(base_fds + FD_SLACK_AFTER);
}

/// Oversized and malformed messages at each step end only that connection.
#[test]
fn oversized_and_malformed_messages_at_each_step() {
    // Sessions refused one after the other may overlap while each ends.
    let mut srv = Srv::start(&["--max-clients", "32"], &[], true);
    let base_fds = fd_count(srv.pid());
    let bad: [&[u8]; 5] = [
        &[0x00, 0x10, 0x00, 0x01, b'{'],
        &[0xFF, 0xFF, 0xFF, 0xFF],
        &[0, 0, 0, 4, b'n', b'u', b'l', b'l'],
        &[0, 0, 0, 2, b'{', b'}'],
        b"\x00\x00\x00\x1a{\"type\":\"x\\n\\u001b[2J\"}",
    ];
    for step in 0..3 {
        for b in bad {
            let mut ctrl = Control::new(TcpStream::connect(srv.addr).unwrap());
            if step >= 1 {
                handshake(&mut ctrl, None).unwrap();
            }
            if step >= 2 {
                ctrl.send(&Message::Start {
                    session: SessionKind::Latency(latency(false)),
                    udp_ports: vec![],
                })
                .unwrap();
                let _ = ctrl.recv(Duration::from_secs(2));
            }
            let mut s = ctrl.into_stream();
            let _ = s.write_all(b);
            let _ = s.write_all(&[0u8; 64 << 10]);
        }
    }
    served(srv.addr, None);
    let fds = settle_fds(
        srv.pid(),
        base_fds + FD_SLACK_AFTER,
        Duration::from_secs(15),
    );
    assert!(
        fds <= base_fds + FD_SLACK_AFTER,
        "{fds} fds, idle {base_fds}"
    );
    srv.healthy(base_fds + FD_SLACK_AFTER);
    // Issue 16 item 6: nothing the peers sent reached the log raw.
    let log = srv.log.lock().unwrap();
    assert!(
        !log.iter().any(|l| l.chars().any(|c| c.is_control())),
        "raw control characters in the log: {log:?}"
    );
    assert!(log.iter().any(|l| l.contains("\\u{1b}")), "{log:?}");
}

/// Issue 16 item 9: reverse UDP went to any port the client named, port 0
/// and ports it never sent from included. Now the client's own datagrams
/// open each path, and port 0 is refused.
#[test]
fn udp_goes_only_to_ports_the_peer_sent_from() {
    let srv = Srv::start(&[], &[], true);
    // A victim socket on the client's address that never sends.
    let victim = UdpSocket::bind("127.0.0.1:0").unwrap();
    victim.set_nonblocking(true).unwrap();
    for ports in [vec![0u16], vec![victim.local_addr().unwrap().port()]] {
        let mut ctrl = Control::new(TcpStream::connect(srv.addr).unwrap());
        handshake(&mut ctrl, None).unwrap();
        ctrl.send(&Message::Start {
            session: SessionKind::Throughput(throughput(Protocol::Udp, Direction::Reverse, 1000)),
            udp_ports: ports.clone(),
        })
        .unwrap();
        let mut got = Vec::new();
        let end = Instant::now() + Duration::from_secs(12);
        while Instant::now() < end {
            match ctrl.recv(Duration::from_millis(200)) {
                Ok(Message::Accepted { .. }) => {
                    got.push("accepted");
                    // Say Go without opening the path.
                    let _ = ctrl.send(&Message::Go);
                }
                Ok(Message::Error { reason }) => {
                    got.push("error");
                    assert!(
                        reason.contains("port 0") || reason.contains("UDP paths"),
                        "{reason}"
                    );
                    break;
                }
                Ok(other) => panic!("{ports:?}: unexpected {}", other.name()),
                Err(CtrlError::Timeout(_)) => {}
                Err(e) => panic!("{ports:?}: {e}"),
            }
        }
        assert_eq!(got.last(), Some(&"error"), "{ports:?}: {got:?}");
    }
    let mut b = [0u8; 2048];
    assert!(
        victim.recv(&mut b).is_err(),
        "the server sent to a port the client never sent from"
    );
}

/// Latency reflectors answer only their session's token, and only the
/// address that opened the session (item 9, no reflection); the TCP
/// reflector serves the real client while silent connections wait
/// (item 8: each made it wait 2 s, one at a time).
#[test]
fn reflectors_answer_only_their_peer_and_silent_connections_do_not_delay() {
    let srv = Srv::start(&[], &[], true);
    // UDP: a request with the right token from another address.
    let mut ctrl = Control::new(TcpStream::connect(srv.addr).unwrap());
    let (session, _) = handshake(&mut ctrl, None).unwrap();
    ctrl.send(&Message::Start {
        session: SessionKind::Latency(latency(false)),
        udp_ports: vec![],
    })
    .unwrap();
    let Message::ReflectorReady { port, .. } = ctrl.recv(Duration::from_secs(5)).unwrap() else {
        panic!("no reflector")
    };
    ctrl.send(&Message::Go).unwrap();
    assert!(matches!(
        ctrl.recv(Duration::from_secs(5)).unwrap(),
        Message::Running
    ));
    let mut req = vec![0u8; 64];
    Packet::new_unchecked(&mut req[..]).emit_request(session, 1);
    let to = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
    let other = UdpSocket::bind("127.0.0.2:0").unwrap();
    other
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    other.send_to(&req, to).unwrap();
    let mut b = [0u8; 256];
    assert!(other.recv(&mut b).is_err(), "answered another address");
    let mine = UdpSocket::bind("127.0.0.1:0").unwrap();
    mine.set_read_timeout(Some(SERVE_WITHIN)).unwrap();
    mine.send_to(&req, to).unwrap();
    assert!(mine.recv(&mut b).is_ok(), "its own peer was not answered");
    drop(ctrl);

    // TCP: six silent connections, then the real client.
    let mut ctrl = Control::new(TcpStream::connect(srv.addr).unwrap());
    let (session, _) = handshake(&mut ctrl, None).unwrap();
    ctrl.send(&Message::Start {
        session: SessionKind::Latency(latency(true)),
        udp_ports: vec![],
    })
    .unwrap();
    let Message::ReflectorReady { port, .. } = ctrl.recv(Duration::from_secs(5)).unwrap() else {
        panic!("no reflector")
    };
    ctrl.send(&Message::Go).unwrap();
    assert!(matches!(
        ctrl.recv(Duration::from_secs(5)).unwrap(),
        Message::Running
    ));
    let to = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
    let silent: Vec<TcpStream> = (0..6).map(|_| TcpStream::connect(to).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    let mut real = TcpStream::connect(to).unwrap();
    let mut hello = [0u8; HEADER_LEN];
    Packet::new_unchecked(&mut hello[..]).emit_request(session, 1);
    real.write_all(&hello).unwrap();
    real.write_all(b"x").unwrap();
    real.set_read_timeout(Some(SERVE_WITHIN)).unwrap();
    let mut one = [0u8; 1];
    real.read_exact(&mut one).unwrap_or_else(|e| {
        panic!("the real client was not answered within {SERVE_WITHIN:?}: {e}")
    });
    assert_eq!(&one, b"x");
    assert!(t0.elapsed() < SERVE_WITHIN);
    drop(silent);
}

/// Issue 16 item 3: with its stderr a closed pipe every connection thread
/// panicked on its first log line; with stderr full the server exited.
#[test]
fn the_server_serves_with_a_closed_or_full_stderr() {
    let mut srv = Srv::start(&[], &[], false);
    let base_fds = fd_count(srv.pid());
    for _ in 0..7 {
        served(srv.addr, None);
    }
    // A whole session, logged at its end.
    let o = Command::new(bin())
        .args([
            "throughput",
            "127.0.0.1",
            "--port",
            &srv.addr.port().to_string(),
        ])
        .args(["--time", "0.3", "--rate", "10M"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let fds = settle_fds(srv.pid(), base_fds + FD_SLACK_AFTER, Duration::from_secs(8));
    assert!(fds <= base_fds + FD_SLACK_AFTER);
    assert!(srv.child.try_wait().unwrap().is_none(), "the server died");

    // stderr is /dev/full: the port is chosen here.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let mut child = Command::new(bin())
        .args(["server", "--bind", "127.0.0.1", "--port", &port.to_string()])
        .stderr(full)
        .spawn()
        .unwrap();
    let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
    let end = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(addr).is_err() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    served(addr, None);
    assert!(
        child.try_wait().unwrap().is_none(),
        "exited with stderr full"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// Issue 16 item 3: `calc … 2>/dev/full` exited 101 (a panic) instead of 2;
/// a full stdout is a clear error, a closed one a quiet end.
#[test]
fn commands_with_full_or_closed_outputs_exit_cleanly() {
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let o = Command::new(bin())
        .args(["calc", "--link", "1G", "--frame", "10"])
        .stderr(full())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = Command::new(bin())
        .args(["calc", "--link", "1G"])
        .stdout(full())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("writing to stdout"));
    // Both full.
    let o = Command::new(bin())
        .args(["calc", "--link", "1G"])
        .stdout(full())
        .stderr(full())
        .status()
        .unwrap();
    assert_eq!(o.code(), Some(2));
    // A closed stdout pipe: a quiet end.
    let mut c = Command::new(bin())
        .args([
            "calc",
            "--link",
            "1G",
            "--frame",
            "64,128,256,512,1024,1280,1518",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(c.stdout.take());
    let o = c.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Issue 16 item 7: values that measure nothing are usage errors.
#[test]
fn zero_and_meaningless_values_are_usage_errors() {
    for (args, what) in [
        (
            &[
                "rfc2544", "--tx", "lo", "--rx", "lo", "--link", "1G", "--trial", "0",
            ][..],
            "--trial",
        ),
        (
            &[
                "rfc2544",
                "--tx",
                "lo",
                "--rx",
                "lo",
                "--link",
                "1G",
                "--resolution",
                "0",
            ],
            "--resolution",
        ),
        (
            &[
                "rfc2544",
                "--tx",
                "lo",
                "--rx",
                "lo",
                "--link",
                "1G",
                "--loss-step",
                "0",
            ],
            "--loss-step",
        ),
        (
            &["latency", "127.0.0.1", "--in-process", "--timeout", "0"],
            "--timeout",
        ),
        (&["server", "--max-duration", "0"], "--max-duration"),
        (&["server", "--bind", "224.0.0.1"], "multicast"),
        (&["server", "--bind", "255.255.255.255"], "broadcast"),
        (&["testbed", "sweep", "--prefix", "lr-"], "every bed"),
        (&["testbed", "sweep", "--prefix", ""], "every bed"),
    ] {
        let o = Command::new(bin()).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(what), "{args:?}: {err}");
    }
}

/// Issue 16 item 4: a namespace that does not exist made rfc2544 hang.
#[test]
fn rfc2544_with_a_missing_namespace_fails_instead_of_hanging() {
    for ns in ["NO-SUCH-NS", "lr-misspelled-ns"] {
        let mut c = Command::new(bin())
            .args(["rfc2544", "--tx", "lr-a", "--rx", "lr-b", "--tx-netns", ns])
            .args(["--rx-netns", ns, "--link", "1G", "--trial", "1s"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let end = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = c.try_wait().unwrap() {
                break Some(s);
            }
            if Instant::now() >= end {
                let _ = c.kill();
                let _ = c.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(2),
            "{ns}: hung or wrong exit"
        );
    }
}

/// Authentication: with a key, peers without it are refused clearly, a
/// wrong key is refused, the right one served; the client refuses a
/// server that cannot prove the key.
#[test]
fn authentication_refuses_peers_without_the_key() {
    let key = "adversarial test key of enough length";
    let mut srv = Srv::start(&[], &[("LINERATE_AUTH_KEY", key)], true);
    let base_fds = fd_count(srv.pid());
    let k = Key::from_text(key).unwrap();
    served(srv.addr, Some(&k));
    let mut ctrl = Control::new(TcpStream::connect(srv.addr).unwrap());
    let e = handshake(&mut ctrl, None).unwrap_err();
    assert!(e.contains("challenged without a key"), "{e}");
    let wrong = Key::from_text("a wrong key, also long enough").unwrap();
    let mut ctrl = Control::new(TcpStream::connect(srv.addr).unwrap());
    let e = handshake(&mut ctrl, Some(&wrong)).unwrap_err();
    assert!(e.contains("proof is wrong"), "{e}");
    // A client that skips the challenge is refused.
    let mut ctrl = Control::new(TcpStream::connect(srv.addr).unwrap());
    ctrl.send(&Message::hello("x", &hex(&[3; 32]))).unwrap();
    let _ = ctrl.recv(Duration::from_secs(2)).unwrap();
    ctrl.send(&Message::Auth {
        proof: "00".repeat(32),
    })
    .unwrap();
    match ctrl.recv(Duration::from_secs(2)).unwrap() {
        Message::Refused { reason } => assert!(reason.contains("wrong key"), "{reason}"),
        other => panic!("{}", other.name()),
    }
    // The real clients: without the key refused with exit 2, with it served.
    let port = srv.addr.port().to_string();
    let client = |env: Option<&str>| {
        let mut c = Command::new(bin());
        c.args([
            "throughput",
            "127.0.0.1",
            "--port",
            &port,
            "--time",
            "0.3",
            "--rate",
            "10M",
        ]);
        c.env_remove("LINERATE_AUTH_KEY");
        if let Some(k) = env {
            c.env("LINERATE_AUTH_KEY", k);
        }
        c.output().unwrap()
    };
    let o = client(None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("requires a key"));
    let o = client(Some(key));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A client with a key refuses a server without one.
    let open = Srv::start(&[], &[], true);
    let o = Command::new(bin())
        .args([
            "latency",
            "127.0.0.1",
            "--port",
            &open.addr.port().to_string(),
            "--count",
            "5",
        ])
        .env("LINERATE_AUTH_KEY", key)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("did not authenticate"));
    settle_fds(srv.pid(), base_fds + FD_SLACK_AFTER, Duration::from_secs(8));
    srv.healthy(base_fds + FD_SLACK_AFTER);
}

/// Limits: streams, memory per session and total rate are refused before
/// any resource is given, with the flag to change.
#[test]
fn sessions_beyond_the_limits_are_refused_before_they_start() {
    let srv = Srv::start(
        &[
            "--max-streams",
            "2",
            "--max-rate",
            "50M",
            "--max-session-memory",
            "16",
        ],
        &[],
        true,
    );
    let start = |p: ThroughputParams| {
        let mut ctrl = Control::new(TcpStream::connect(srv.addr).unwrap());
        handshake(&mut ctrl, None).unwrap();
        ctrl.send(&Message::Start {
            session: SessionKind::Throughput(p),
            udp_ports: vec![],
        })
        .unwrap();
        (ctrl.recv(Duration::from_secs(5)).unwrap(), ctrl)
    };
    let p = |streams, size_bytes, rate| ThroughputParams {
        streams,
        size_bytes,
        rate_bits_per_s: rate,
        ..throughput(Protocol::Tcp, Direction::Bidir, 1000)
    };
    for (params, flag) in [
        (p(3, 16 << 10, Some(1_000_000)), "--max-streams"),
        (p(2, 4 << 20, Some(1_000_000)), "--max-session-memory"),
        (p(1, 16 << 10, None), "--max-rate"),
        (p(1, 16 << 10, Some(60_000_000)), "--max-rate"),
    ] {
        match start(params).0 {
            Message::Error { reason } => assert!(reason.contains(flag), "{reason}"),
            other => panic!("{flag}: accepted ({})", other.name()),
        }
    }
    // Within the rate budget, twice; the third is refused while both hold it.
    let (a, _ca) = start(p(1, 16 << 10, Some(20_000_000)));
    let (b, _cb) = start(p(1, 16 << 10, Some(20_000_000)));
    assert!(matches!(
        (&a, &b),
        (Message::Accepted { .. }, Message::Accepted { .. })
    ));
    match start(p(1, 16 << 10, Some(20_000_000))).0 {
        Message::Error { reason } => assert!(reason.contains("--max-rate"), "{reason}"),
        other => panic!("accepted beyond the total rate ({})", other.name()),
    }
}

/// Vanished and frozen clients: a client stopped (SIGSTOP) mid-session does
/// not keep the server from serving others, and its resources go when it
/// is killed.
#[test]
fn frozen_and_vanished_clients_release_what_they_held() {
    let mut srv = Srv::start(&[], &[], true);
    let base_fds = fd_count(srv.pid());
    let port = srv.addr.port().to_string();
    let mut c = Command::new(bin())
        .args([
            "throughput",
            "127.0.0.1",
            "--port",
            &port,
            "--time",
            "1",
            "--rate",
            "10M",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let pid = c.id().to_string();
    Command::new("kill").args(["-STOP", &pid]).status().unwrap();
    served(srv.addr, None);
    // The frozen client's session holds its control and data sockets.
    let during = fd_count(srv.pid());
    assert!(
        during > base_fds,
        "{during} fds while frozen, idle {base_fds}"
    );
    Command::new("kill").args(["-KILL", &pid]).status().unwrap();
    let _ = c.wait();
    // Its session ends (its sockets closed with the process), at the
    // latest at its limit (1 s + grace): every descriptor comes back.
    let fds = settle_fds(srv.pid(), base_fds, Duration::from_secs(25));
    assert!(fds <= base_fds, "{fds} fds, idle {base_fds}");
    served(srv.addr, None);
    srv.healthy(base_fds + FD_SLACK_AFTER);
}

/// A hostile server against the throughput client: one that never answers,
/// one that floods maximal frames, one that claims an enormous frame. The
/// client ends with exit 2, bounded in time and memory.
#[test]
fn hostile_servers_cannot_hang_or_bloat_the_clients() {
    for behaviour in 0..3 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port().to_string();
        let server = std::thread::spawn(move || {
            let Ok((mut s, _)) = l.accept() else { return };
            let _ = s.set_write_timeout(Some(Duration::from_secs(20)));
            match behaviour {
                0 => std::thread::sleep(Duration::from_secs(14)),
                1 => {
                    let body = vec![b' '; (1 << 20) - 2];
                    let mut f = ((1u32 << 20).to_be_bytes()).to_vec();
                    f.push(b'[');
                    f.extend_from_slice(&body);
                    f.push(b']');
                    for _ in 0..200 {
                        if s.write_all(&f).is_err() {
                            break;
                        }
                    }
                }
                _ => {
                    let _ = s.write_all(&u32::MAX.to_be_bytes());
                    std::thread::sleep(Duration::from_secs(3));
                }
            }
        });
        let (code, peak) = run_bounded(&["throughput", "127.0.0.1", "--port", &port]);
        assert_eq!(code, Some(2), "behaviour {behaviour}");
        assert!(
            peak < 64 * 1024,
            "held {peak} KiB against behaviour {behaviour}"
        );
        server.join().unwrap();
    }
}

/// Runs the binary with `args` (at most 30 s, killed after); its exit code
/// and peak RSS, KiB.
fn run_bounded(args: &[&str]) -> (Option<i32>, u64) {
    let mut c = Command::new(bin())
        .args(args)
        .env_remove("LINERATE_AUTH_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    let mut peak = 0;
    loop {
        peak = peak.max(rss_kib(c.id()));
        if let Some(s) = c.try_wait().unwrap() {
            return (s.code(), peak);
        }
        if Instant::now() >= end {
            let _ = c.kill();
            let _ = c.wait();
            return (None, peak);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Issue 16 item 9: a hostile server made the latency client hold 1.17 GB
/// (records it sent after the run, up to 16 M). The client now takes no
/// more records than requests it made, and the rest of a hostile server's
/// replies (never answering, endless maximal frames, a 4 GiB length
/// prefix) end it with a clear error, bounded in time and memory.
#[test]
fn a_hostile_server_cannot_bloat_the_latency_client() {
    use linerate_core::latency::{ReflectorRecord, ResponderStamps};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let sink_port = sink.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let Ok((s, _)) = l.accept() else { return };
        let mut c = Control::new(s);
        let t = Duration::from_secs(10);
        let _ = c.recv(t);
        let _ = c.send(&Message::Welcome {
            version: 2,
            session_id: 7,
            cookie: 1,
        });
        let _ = c.recv(t);
        let _ = c.send(&Message::ReflectorReady {
            port: sink_port,
            boot_id: String::new(),
        });
        let _ = c.recv(t);
        let _ = c.send(&Message::Running);
        let _ = c.recv(Duration::from_secs(20));
        let chunk: Vec<ReflectorRecord> = (0..2000)
            .map(|seq| ReflectorRecord {
                seq,
                stamps: ResponderStamps {
                    rx_kernel_ns: Some(1),
                    rx_app_ns: 2,
                    tx_app_ns: 3,
                    tx_sched_ns: Some(4),
                    tx_soft_ns: Some(5),
                },
            })
            .collect();
        // 1 M records, unless the client hangs up first.
        for _ in 0..500 {
            if c.send(&Message::ReflectorRecords {
                records: chunk.clone(),
            })
            .is_err()
            {
                break;
            }
        }
    });
    let (code, peak) = run_bounded(&[
        "latency",
        "127.0.0.1",
        "--port",
        &port,
        "--count",
        "5",
        "--timeout",
        "0.1",
    ]);
    server.join().unwrap();
    drop(sink);
    // Its own side is reported (the server's stamps refused): exit 1.
    assert!(matches!(code, Some(1 | 2)), "{code:?}");
    assert!(peak < 64 * 1024, "the latency client held {peak} KiB");
    // The other hostile servers.
    for behaviour in [1u8, 2] {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port().to_string();
        let server = std::thread::spawn(move || {
            let Ok((mut s, _)) = l.accept() else { return };
            let _ = s.set_write_timeout(Some(Duration::from_secs(20)));
            if behaviour == 1 {
                let mut f = (1u32 << 20).to_be_bytes().to_vec();
                f.push(b'[');
                f.resize((1 << 20) + 3, b' ');
                f.push(b']');
                for _ in 0..200 {
                    if s.write_all(&f).is_err() {
                        break;
                    }
                }
            } else {
                let _ = s.write_all(&u32::MAX.to_be_bytes());
                std::thread::sleep(Duration::from_secs(3));
            }
        });
        let (code, peak) = run_bounded(&["latency", "127.0.0.1", "--port", &port]);
        server.join().unwrap();
        assert_eq!(code, Some(2), "behaviour {behaviour}");
        assert!(
            peak < 64 * 1024,
            "held {peak} KiB against behaviour {behaviour}"
        );
    }
}

/// SIGINT and SIGKILL at random points of `testbed up`: afterwards
/// `testbed sweep --prefix` leaves nothing of the bed.
#[test]
fn signals_at_random_points_of_testbed_up_leave_nothing_after_sweep() {
    if !linerate_bed::privileges::require(
        "signals_at_random_points_of_testbed_up_leave_nothing_after_sweep",
    ) {
        return;
    }
    let mut rng = Rng(u64::from(std::process::id()) | 1);
    for round in 0..(4 * scale()) {
        let name = format!("adv{}r{round}", std::process::id());
        let mut c = Command::new(bin())
            .args(["testbed", "up", &name, "--topo", "bridge", "--link", "100M"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.below(1500)));
        let sig = if round % 2 == 0 { "-INT" } else { "-KILL" };
        Command::new("kill")
            .args([sig, &c.id().to_string()])
            .status()
            .unwrap();
        let _ = c.wait();
        let o = Command::new(bin())
            .args(["testbed", "sweep", "--prefix", &name])
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let ns = String::from_utf8_lossy(
            &Command::new("ip")
                .args(["netns", "list"])
                .output()
                .unwrap()
                .stdout,
        )
        .into_owned();
        assert!(!ns.contains(&name), "namespaces left: {ns}");
        let links = String::from_utf8_lossy(
            &Command::new("ip")
                .args(["-br", "link"])
                .output()
                .unwrap()
                .stdout,
        )
        .into_owned();
        assert!(!links.contains(&name), "links left: {links}");
        assert!(
            !std::path::Path::new(&format!("/run/linerate/beds/{name}.json")).exists(),
            "state file left"
        );
    }
}

/// GRO of host b's interface (`ethtool -k` in its namespace).
fn gro(ns: &str, iface: &str) -> bool {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "ethtool", "-k", iface])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).contains("generic-receive-offload: on")
}

/// Issue 16 item 5: SIGINT during rfc2544 left GRO changed on host b's
/// interface and printed nothing. Now the first SIGINT stops at the next
/// trial, restores, and prints what was measured, flagged incomplete; after
/// SIGKILL, `testbed sweep` puts the setting back from its record.
#[test]
fn rfc2544_interrupted_restores_and_prints_what_it_measured() {
    if !linerate_bed::privileges::require(
        "rfc2544_interrupted_restores_and_prints_what_it_measured",
    ) {
        return;
    }
    use linerate_bed::{Bed, BedSpec, Topology};
    let name = format!("adv{}g", std::process::id());
    let bed = Bed::up(&BedSpec::new(name.clone(), Topology::Pair)).unwrap();
    let (ns_b, if_b) = (
        bed.netns("b").unwrap().to_string(),
        bed.iface("b").unwrap().to_string(),
    );
    let before = gro(&ns_b, &if_b);
    let run = || {
        Command::new(bin())
            .args(["rfc2544", "--bed", &name, "--link", "10G", "--json"])
            .args(["--frames", "64,128,256,512,1024", "--tests", "throughput"])
            .args([
                "--trial",
                "500ms",
                "--drain",
                "100ms",
                "--ceiling-time",
                "300ms",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // SIGINT.
    let c = run();
    std::thread::sleep(Duration::from_millis(2500));
    Command::new("kill")
        .args(["-INT", &c.id().to_string()])
        .status()
        .unwrap();
    let o = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON after SIGINT ({e}): {}",
            String::from_utf8_lossy(&o.stdout)
        )
    });
    assert!(j["flags"].to_string().contains("\"incomplete\""), "{j}");
    assert_eq!(gro(&ns_b, &if_b), before, "GRO not restored after SIGINT");
    // SIGKILL: nothing of the process runs; the sweep repairs.
    let mut c = run();
    std::thread::sleep(Duration::from_millis(2500));
    let pid = c.id();
    Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    let _ = c.wait();
    let changed = gro(&ns_b, &if_b) != before;
    eprintln!("GRO left changed by the killed run: {changed}");
    let o = Command::new(bin())
        .args(["testbed", "sweep", "--prefix", &name, "--json"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    if changed {
        assert!(
            s["files"].to_string().contains(&format!("restore/{pid}-")),
            "the changed setting was not repaired: {s}"
        );
    }
    let left = std::fs::read_dir("/run/linerate/restore")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(&format!("{pid}-"))
                })
                .count()
        })
        .unwrap_or(0);
    assert_eq!(left, 0, "restore records of the killed run left");
    drop(bed);
}

/// The default policy across a network (a bed's two namespaces): without a
/// key the server refuses a non-loopback peer, saying how to fix it; with
/// `--no-auth` or with the same key on both ends the peer is served.
#[test]
fn without_a_key_only_loopback_peers_are_served() {
    if !linerate_bed::privileges::require("without_a_key_only_loopback_peers_are_served") {
        return;
    }
    use linerate_bed::{Bed, BedSpec, Topology};
    let name = format!("adv{}k", std::process::id());
    let bed = Bed::up(&BedSpec::new(name.clone(), Topology::Pair)).unwrap();
    let (ns_a, ns_b) = (
        bed.netns("a").unwrap().to_string(),
        bed.netns("b").unwrap().to_string(),
    );
    let ip_b = bed.ipv4("b").unwrap().to_string();
    let key_file = std::env::temp_dir().join(format!("lr-adv-key-{}", std::process::id()));
    std::fs::write(&key_file, "a key for the namespace test\n").unwrap();
    let key = key_file.to_string_lossy().into_owned();
    let server = |extra: &[&str]| {
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            &ns_b,
            bin(),
            "server",
            "--bind",
            &ip_b,
            "--port",
            "15399",
        ])
        .args(extra)
        .env_remove("LINERATE_AUTH_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        let child = c.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(400));
        child
    };
    let client = |extra: &[&str]| {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns_a,
                bin(),
                "throughput",
                &ip_b,
                "--port",
                "15399",
            ])
            .args(["--time", "0.3", "--rate", "10M"])
            .args(extra)
            .env_remove("LINERATE_AUTH_KEY")
            .output()
            .unwrap()
    };
    for (server_flags, client_flags, code, says) in [
        (&[][..], &[][..], 2, "loopback peers only"),
        (&["--no-auth"], &[], 0, ""),
        (
            &["--auth-file", key.as_str()],
            &["--auth-file", key.as_str()],
            0,
            "",
        ),
        (&["--auth-file", key.as_str()], &[], 2, "requires a key"),
    ] {
        let mut s = server(server_flags);
        let o = client(client_flags);
        let _ = s.kill();
        let _ = s.wait();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(code),
            "{server_flags:?} {client_flags:?}: {err}"
        );
        assert!(
            err.contains(says),
            "{server_flags:?} {client_flags:?}: {err}"
        );
    }
    let _ = std::fs::remove_file(&key_file);
    drop(bed);
}
