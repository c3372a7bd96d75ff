//! `linerate throughput --iperf3 HOST`: one test against an iperf3 server,
//! driven by `linerate_core::wire::iperf3::session::ClientSession`, measured
//! by this end's own streams and reported as linerate's two sides: the
//! client's from its stream threads, the server's from the results iperf3
//! sends back (its output text attached when it gives one).

use std::io::{self, Read as _, Write as _};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use linerate_core::result::{Envelope, Flag};
use linerate_core::stats::sequence::SeqCounts;
use linerate_core::throughput::assess::{self, Measured, Setting};
use linerate_core::throughput::model::{
    End, FlowDir, FlowReport, FlowRole, RecvCounts, SideReport,
};
use linerate_core::throughput::model::{
    LinkSource, ThroughputParams, ThroughputResult, SCHEMA, VERSION,
};
use linerate_core::units::BitRate;
use linerate_core::wire::iperf3::params::{Params, Transport};
use linerate_core::wire::iperf3::results::{Results, StreamResult};
use linerate_core::wire::iperf3::session::{
    ClientAction, ClientEnding, ClientEvent, ClientSession, Timeouts,
};
use linerate_core::wire::iperf3::{
    errno, is_udp_connect_reply, stream_id, Cookie, State, UDP_CONNECT_MSG,
};

use super::auth::{AuthError, ClientAuth};
use super::streams::{self, StreamCfg, StreamOutcome};
use crate::sys::sock;
use crate::throughput::net::{self, DataSock, NetError};

/// How long connecting (and each UDP stream's connect answer) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the server may take between protocol steps.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// Added when a server given credentials ends the session after the
/// parameters without a word: iperf3 3.21's server does so when
/// authentication fails (earlier ones send SERVER_ERROR 142).
const AUTH_HINT: &str = " (an iperf3 3.21 server closes so when authentication fails: check the user, the password, the public key and the clocks; --use-pkcs1-padding only against servers before 3.17 or started with it)";

/// Why a test against an iperf3 server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A socket could not be set up.
    #[error(transparent)]
    Net(#[from] NetError),
    /// The control connection failed.
    #[error("control connection to {addr}")]
    Control {
        /// The server.
        addr: SocketAddr,
        /// What failed.
        #[source]
        source: io::Error,
    },
    /// ACCESS_DENIED.
    #[error("the iperf3 server at {0} is busy running a test (ACCESS_DENIED); try again later")]
    Denied(SocketAddr),
    /// SERVER_ERROR.
    #[error("the iperf3 server at {addr} refused the test: {text} (iperf error {code}, errno {os_errno})")]
    Refused {
        /// The server.
        addr: SocketAddr,
        /// iperf error number.
        code: i32,
        /// Its description.
        text: String,
        /// errno on the server.
        os_errno: i32,
    },
    /// The session broke off.
    #[error("iperf3 session with {addr}: {reason}")]
    Protocol {
        /// The server.
        addr: SocketAddr,
        /// What happened.
        reason: String,
    },
    /// A peer that answered with linerate's own protocol.
    #[error("{0} speaks linerate's protocol, not iperf3's; drop --iperf3")]
    Linerate(SocketAddr),
    /// The credentials could not be encrypted.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// Stream threads could not be spawned.
    #[error("cannot spawn stream threads")]
    Spawn(#[source] io::Error),
}

/// One test's setting.
#[derive(Debug)]
pub struct ClientConfig {
    /// The server.
    pub addr: SocketAddr,
    /// The parameters sent (`get_server_output` is forced on).
    pub params: Params,
    /// RSA authentication.
    pub auth: Option<ClientAuth>,
    /// Reporting interval of this end's streams.
    pub interval: Duration,
    /// TCP receivers' SO_RCVLOWAT, bytes (None: the kernel's default).
    pub recv_lowat: Option<u32>,
}

/// What a test measured.
#[derive(Debug)]
pub struct Outcome {
    /// This end's side (its stream threads).
    pub client: SideReport,
    /// The server's side, from its results message.
    pub server: Option<SideReport>,
    /// The server's results as sent.
    pub server_results: Option<Results>,
    /// The server's own output (`--get-server-output`).
    pub server_output: Option<String>,
}

/// Live totals for a progress display: (seconds, bytes sent, bytes received).
pub type Progress<'a> = &'a mut dyn FnMut(f64, u64, u64);

/// Whether a peer that was sent linerate's Hello answered as an iperf3
/// server does (PARAM_EXCHANGE, or ACCESS_DENIED when busy) within `wait`:
/// iperf3 takes the Hello's first 37 bytes as a cookie. linerate's own
/// answer starts with a length prefix, whose first byte is 0.
pub fn answered_as_iperf3(stream: &TcpStream, wait: Duration) -> bool {
    let _ = stream.set_read_timeout(Some(wait));
    let mut b = [0u8; 1];
    let got = matches!(stream.peek(&mut b), Ok(1))
        && (b[0] == State::ParamExchange.byte() || b[0] == State::AccessDenied.byte());
    let _ = stream.set_read_timeout(None);
    got
}

fn random_cookie() -> Cookie {
    let mut b = [0u8; 36];
    for c in b.chunks_mut(8) {
        let r = crate::token::random_u64().to_le_bytes();
        let n = c.len();
        c.copy_from_slice(&r[..n]);
    }
    Cookie::from_random(b)
}

/// Runs one test; `interrupt` ends it early (CLIENT_TERMINATE).
pub fn run(
    cfg: &ClientConfig,
    mut progress: Option<Progress<'_>>,
    interrupt: &AtomicBool,
) -> Result<Outcome, ClientError> {
    let addr = cfg.addr;
    let cerr = |source| ClientError::Control { addr, source };
    let mut params = cfg.params.clone();
    params.get_server_output = true;
    if let Some(a) = &cfg.auth {
        params.authtoken = Some(a.token(None)?);
    }
    let mut ctrl = net::tcp_connect(addr, None, CONNECT_TIMEOUT)?;
    let _ = ctrl.set_nodelay(true);
    let _ = ctrl.set_write_timeout(Some(STEP_TIMEOUT));
    let clock = Instant::now();
    let now = || u64::try_from(clock.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let cookie = random_cookie();
    let timeouts = Timeouts {
        step_ns: STEP_TIMEOUT.as_nanos() as u64,
        ..Timeouts::default()
    };
    let (mut m, mut queue) = ClientSession::new(now(), cookie, &params, timeouts);
    let senders = params.stream_senders();
    let client_sends = senders.iter().any(|&s| s);
    let mut socks: Vec<DataSock> = Vec::new();
    let mut running: Option<(streams::Running, Instant)> = None;
    let mut outcomes: Vec<StreamOutcome> = Vec::new();
    let mut server_results: Option<Results> = None;
    let mut ending: Option<ClientEnding> = None;
    let mut buf = vec![0u8; 64 * 1024];
    let mut first_byte = true;
    // The server accepted the parameters (and the credentials).
    let mut asked_for_streams = false;
    let mut last_progress = Instant::now();
    while ending.is_none() {
        for a in std::mem::take(&mut queue) {
            match a {
                ClientAction::Send(b) => ctrl.write_all(&b).map_err(cerr)?,
                ClientAction::CreateStreams => {
                    asked_for_streams = true;
                    for &sends in &senders {
                        socks.push(connect_stream(addr, &params, &cookie, sends)?);
                    }
                }
                ClientAction::StartFlows => {
                    let list = std::mem::take(&mut socks)
                        .into_iter()
                        .zip(&senders)
                        .enumerate()
                        .map(|(i, (s, &sends))| (stream_id(i), sends, s))
                        .collect();
                    let c = StreamCfg {
                        recv_lowat: cfg.recv_lowat,
                        ..StreamCfg::of(&params)
                    };
                    let r = streams::start(list, c).map_err(ClientError::Spawn)?;
                    running = Some((r, Instant::now()));
                }
                ClientAction::StopFlows => {
                    if let Some((r, _)) = &running {
                        r.stop_senders();
                    }
                }
                ClientAction::CollectResults => {
                    let own = match running.take() {
                        Some((r, t0)) => {
                            let wall = t0.elapsed();
                            outcomes = r.join();
                            own_results(&params, &outcomes, wall)
                        }
                        None => Results::default(),
                    };
                    queue.extend(m.handle(now(), ClientEvent::OwnResults(Box::new(own))));
                }
                ClientAction::ServerResults(r) => server_results = Some(*r),
                ClientAction::Finish(e) => ending = Some(e),
            }
        }
        if ending.is_some() || !queue.is_empty() {
            continue;
        }
        if interrupt.load(Ordering::Relaxed) {
            queue.extend(m.handle(now(), ClientEvent::Interrupt));
            continue;
        }
        if let Some((r, t0)) = &running {
            if m.running() && r.target_reached(client_sends) {
                queue.extend(m.handle(now(), ClientEvent::TargetReached));
            }
            if let Some(p) = progress.as_mut() {
                if last_progress.elapsed() >= Duration::from_millis(200) {
                    last_progress = Instant::now();
                    let (tx, rx) = r.totals();
                    p(t0.elapsed().as_secs_f64(), tx, rx);
                }
            }
        }
        let _ = ctrl.set_read_timeout(Some(Duration::from_millis(20)));
        match ctrl.read(&mut buf) {
            Ok(0) => queue.extend(m.handle(now(), ClientEvent::Closed)),
            Ok(n) => {
                // linerate's own server answers a cookie with a length
                // prefix (first byte 0) or closes: say so.
                if first_byte && buf[0] == 0 {
                    return Err(ClientError::Linerate(addr));
                }
                first_byte = false;
                queue.extend(m.handle(now(), ClientEvent::Bytes(&buf[..n])));
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => queue.extend(m.handle(now(), ClientEvent::Closed)),
        }
        queue.extend(m.handle(now(), ClientEvent::Tick));
    }
    if let Some((r, _)) = running.take() {
        outcomes = r.join();
    }
    match ending {
        Some(ClientEnding::Complete) => {}
        Some(ClientEnding::Denied) => return Err(ClientError::Denied(addr)),
        Some(ClientEnding::ServerError { code, os_errno }) => {
            return Err(ClientError::Refused {
                addr,
                code,
                text: errno::describe(code),
                os_errno,
            })
        }
        Some(ClientEnding::ServerTerminated) => {
            return Err(ClientError::Protocol {
                addr,
                reason: "the server terminated the test".into(),
            })
        }
        Some(ClientEnding::Aborted(mut reason)) if reason != "interrupted" => {
            if cfg.auth.is_some() && !first_byte && !asked_for_streams {
                reason.push_str(AUTH_HINT);
            }
            return Err(ClientError::Protocol { addr, reason });
        }
        _ => {}
    }
    let complete = matches!(ending, Some(ClientEnding::Complete));
    let client = client_side(&outcomes, complete);
    let server = server_results
        .as_ref()
        .map(|r| server_side(r, &senders, params.transport == Transport::Udp));
    Ok(Outcome {
        client,
        server_output: server_results.as_ref().and_then(|r| {
            r.server_output_text.clone().or_else(|| {
                r.server_output_json
                    .as_ref()
                    .map(|j| serde_json::to_string_pretty(j).unwrap_or_default())
            })
        }),
        server,
        server_results,
    })
}

/// A data stream: TCP connect and the cookie; UDP connect and the
/// "9876"/"6789" handshake (the legacy answer accepted too; in reverse mode
/// up to two data datagrams may come first).
fn connect_stream(
    addr: SocketAddr,
    p: &Params,
    cookie: &Cookie,
    sends: bool,
) -> Result<DataSock, ClientError> {
    let opt = |e: (i32, String)| NetError::Option {
        option: e.1,
        error: io::Error::other(errno::describe(e.0)),
    };
    match p.transport {
        Transport::Udp => {
            let any: IpAddr = if addr.is_ipv4() {
                [0u8; 4].into()
            } else {
                [0u16; 8].into()
            };
            let s = UdpSocket::bind(SocketAddr::new(any, 0))
                .map_err(|e| NetError::call("bind UDP", e))?;
            if sock::set_int(
                &s,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                net::UDP_RCVBUF_BYTES,
            )
            .is_err()
            {
                let _ = sock::set_int(&s, libc::SOL_SOCKET, libc::SO_RCVBUF, net::UDP_RCVBUF_BYTES);
            }
            streams::apply_options(&s, p, false).map_err(opt)?;
            s.connect(addr)
                .map_err(|e| NetError::call(format!("connect UDP to {addr}"), e))?;
            s.send(&UDP_CONNECT_MSG)
                .map_err(|e| NetError::call("send the UDP connect", e))?;
            let _ = s.set_read_timeout(Some(CONNECT_TIMEOUT));
            let mut b = [0u8; 65_536];
            for _ in 0..3 {
                match s.recv(&mut b) {
                    Ok(4) if is_udp_connect_reply(&b[..4]) => return Ok(DataSock::Udp(s)),
                    Ok(_) if !sends => continue,
                    Ok(n) => {
                        return Err(ClientError::Protocol {
                            addr,
                            reason: format!(
                                "UDP connect answered with {n} bytes that are not \"6789\""
                            ),
                        })
                    }
                    Err(e) => {
                        return Err(ClientError::Protocol {
                            addr,
                            reason: format!(
                            "no answer to the UDP stream connect within {CONNECT_TIMEOUT:?}: {e}"
                        ),
                        })
                    }
                }
            }
            Err(ClientError::Protocol {
                addr,
                reason: "no UDP connect answer among the first datagrams".into(),
            })
        }
        _ => {
            let domain = if addr.is_ipv4() {
                libc::AF_INET
            } else {
                libc::AF_INET6
            };
            let fd =
                sock::socket(domain, libc::SOCK_STREAM).map_err(|e| NetError::call("socket", e))?;
            streams::apply_options(&fd, p, true).map_err(opt)?;
            sock::connect(&fd, &addr, CONNECT_TIMEOUT)
                .map_err(|e| NetError::call(format!("connect to {addr}"), e))?;
            let mut s = TcpStream::from(fd);
            s.write_all(cookie.as_bytes())
                .map_err(|e| NetError::call("send the cookie on a data connection", e))?;
            Ok(DataSock::Tcp(s))
        }
    }
}

/// This end's results message, as iperf3's client sends it.
fn own_results(p: &Params, out: &[StreamOutcome], wall: Duration) -> Results {
    let wall_ns = wall.as_nanos().max(1) as f64;
    let user: u64 = out.iter().map(|o| o.cpu_ns.0).sum();
    let sys: u64 = out.iter().map(|o| o.cpu_ns.1).sum();
    let tcp = p.transport == Transport::Tcp;
    let to_i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    Results {
        cpu_util_total: (user + sys) as f64 / wall_ns * 100.0,
        cpu_util_user: user as f64 / wall_ns * 100.0,
        cpu_util_system: sys as f64 / wall_ns * 100.0,
        sender_has_retransmits: match (out.iter().any(|o| o.sender), tcp) {
            (false, _) => -1,
            (true, true) => 1,
            (true, false) => 0,
        },
        congestion_used: p.congestion.clone(),
        server_output_text: None,
        server_output_json: None,
        streams: out
            .iter()
            .map(|o| {
                let (errors, oe, packets, op, jitter) = match &o.udp {
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
                    retransmits: if o.sender {
                        o.retransmits.map_or(-1, to_i)
                    } else {
                        -1
                    },
                    jitter_s: jitter,
                    errors,
                    omitted_errors: Some(oe),
                    packets,
                    omitted_packets: Some(op),
                    start_time_s: Some(0.0),
                    end_time_s: Some(o.elapsed_ns as f64 / 1e9),
                }
            })
            .collect(),
    }
}

fn dir_of(client_sends: bool) -> FlowDir {
    if client_sends {
        FlowDir::Forward
    } else {
        FlowDir::Reverse
    }
}

fn flow_of(id: i64) -> u16 {
    u16::try_from(id).unwrap_or(u16::MAX)
}

/// The client's side from its streams.
fn client_side(out: &[StreamOutcome], complete: bool) -> SideReport {
    let mut notes = Vec::new();
    let mut ok = complete;
    if !complete {
        notes.push("interrupted: the test was stopped before its end".into());
    }
    let flows = out
        .iter()
        .map(|o| {
            let role = if o.sender {
                FlowRole::Sender
            } else {
                FlowRole::Receiver
            };
            let mut f = FlowReport::new(
                flow_of(o.id),
                dir_of(o.sender),
                role,
                "iperf3 stream".into(),
            );
            f.bytes = o.bytes;
            f.packets = o.packets;
            f.elapsed_ns = o.elapsed_ns;
            f.cpu_user_ns = o.cpu_ns.0;
            f.cpu_sys_ns = o.cpu_ns.1;
            f.mss_bytes = o.mss;
            f.recv_lowat_bytes = o.recv_lowat;
            f.intervals.clone_from(&o.intervals);
            f.retransmits = if o.sender { o.retransmits } else { None };
            if let Some((u, at)) = &o.udp {
                let expected = u.packets.saturating_sub(at.packets);
                let lost = u.errors.saturating_sub(at.errors);
                f.recv = Some(RecvCounts {
                    seq: SeqCounts {
                        received_unique: expected.saturating_sub(lost),
                        expected,
                        lost,
                        reordered: u.out_of_order,
                        ..SeqCounts::default()
                    },
                    ..RecvCounts::default()
                });
            }
            if let Some(e) = &o.error {
                ok = false;
                notes.push(format!("stream {}: {e}", o.id));
            }
            f.error.clone_from(&o.error);
            f
        })
        .collect();
    SideReport {
        end: End::Client,
        complete: ok,
        notes,
        flows,
        egress: None,
    }
}

/// The server's side from its results message: per stream its bytes, time,
/// retransmissions and UDP counts; its CPU is the process share iperf3
/// reports, spread evenly over its streams (said in a note).
fn server_side(r: &Results, senders: &[bool], udp: bool) -> SideReport {
    let n = r.streams.len().max(1) as f64;
    let mut notes = vec![format!(
        "iperf3 server figures: CPU is its whole process ({:.1} % user, {:.1} % system) spread over its streams",
        r.cpu_util_user, r.cpu_util_system
    )];
    let flows = r
        .streams
        .iter()
        .map(|s| {
            let index = match s.id {
                1 => 0,
                id => usize::try_from(id - 2).unwrap_or(usize::MAX),
            };
            let client_sends = senders.get(index).copied().unwrap_or(true);
            let role = if client_sends {
                FlowRole::Receiver
            } else {
                FlowRole::Sender
            };
            let mut f = FlowReport::new(
                flow_of(s.id),
                dir_of(client_sends),
                role,
                "iperf3 server".into(),
            );
            let secs = match (s.start_time_s, s.end_time_s) {
                (Some(a), Some(b)) if b > a => b - a,
                _ => 0.0,
            };
            f.bytes = s.bytes;
            f.elapsed_ns = (secs * 1e9) as u64;
            let cpu = |pct: f64| (pct / 100.0 * secs * 1e9 / n).max(0.0) as u64;
            f.cpu_user_ns = cpu(r.cpu_util_user);
            f.cpu_sys_ns = cpu(r.cpu_util_system);
            f.retransmits = u64::try_from(s.retransmits).ok().filter(|_| !client_sends);
            let packets = u64::try_from(s.packets.saturating_sub(s.omitted_packets.unwrap_or(0)))
                .unwrap_or(0);
            f.packets = packets;
            if udp && client_sends {
                let lost = u64::try_from(s.errors.saturating_sub(s.omitted_errors.unwrap_or(0)))
                    .unwrap_or(0);
                f.recv = Some(RecvCounts {
                    seq: SeqCounts {
                        received_unique: packets.saturating_sub(lost),
                        expected: packets,
                        lost,
                        ..SeqCounts::default()
                    },
                    ..RecvCounts::default()
                });
            }
            f
        })
        .collect();
    if let Some(c) = &r.congestion_used {
        notes.push(format!("congestion control used by the server: {c}"));
    }
    SideReport {
        end: End::Server,
        complete: true,
        notes,
        flows,
        egress: None,
    }
}

/// The clock note of a result measured against an iperf3 server.
pub const CLOCK: &str = "CLOCK_MONOTONIC of each end for elapsed times; UDP send stamps and jitter: CLOCK_REALTIME of each end (iperf3's datagram header)";

/// Everything `linerate throughput --iperf3` does below the command line:
/// the test against the iperf3 server at `cfg.addr`, with `params` the
/// same test as linerate's own parameters (for the result and its
/// assessment), as one finished `linerate.throughput` document.
pub fn document(
    cfg: &ClientConfig,
    params: ThroughputParams,
    link: Option<(BitRate, LinkSource)>,
    progress: &mut dyn linerate_core::progress::Progress,
    interrupt: &AtomicBool,
) -> Result<Envelope<ThroughputResult>, ClientError> {
    let t0 = crate::host::unix_now_ns();
    let interface = crate::stamps::egress_interface(cfg.addr.ip());
    let mtu_bytes = interface
        .as_deref()
        .and_then(|i| crate::sys::packet::mtu(i).ok());
    let cpu0 = crate::throughput::host::cpu_jiffies();
    let mut show = |t: f64, a: u64, b: u64| progress.totals(t, a, b);
    let o = run(cfg, Some(&mut show), interrupt);
    progress.done();
    let o = o?;
    let steal_share = cpu0
        .zip(crate::throughput::host::cpu_jiffies())
        .and_then(|(a, b)| crate::throughput::host::steal_share(a, b));
    let setting = Setting {
        server: format!("{} (iperf3)", cfg.addr),
        ipv6: cfg.addr.is_ipv6(),
        link,
        interface,
        mtu_bytes,
        burst_bytes: None,
        one_sided: false,
        // iperf3's own counters already leave its omitted seconds out.
        omit_ns: 0,
    };
    let measured = Measured {
        client: o.client,
        server: o.server,
        steal_share,
    };
    let mut result = assess::result(&setting, params, measured);
    result.clock = CLOCK.into();
    result.server_output = o.server_output;
    // linerate's TCP verification does not apply: iperf3's payload is
    // random bytes with nothing to check them against.
    let mut flags: Vec<Flag> = assess::assess(&result)
        .into_iter()
        .filter(|f| f.code != "tcp_verified")
        .collect();
    flags.push(Flag::info(
        "iperf3_peer",
        "measured against an iperf3 server: payload not verified (iperf3 sends bytes with nothing to check them against); the server side is iperf3's own figures",
    ));
    Ok(Envelope::new(SCHEMA, VERSION, result)
        .started(t0)
        .on(crate::host::facts())
        .flagged(flags))
}
