//! UDP echo: linerate's reflector and the client.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd as _, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use linerate_core::latency::{ClientStamps, ResponderStamps};
use linerate_core::procedure::pingpong::{Action, PingPong, ReplyVerdict};
use linerate_core::wire::echo::{self, Kind, Packet, ReflectorStamps, TxStamps};

use super::{
    sock_err, ClientConfig, ClientRun, EchoIoError, Exchange, ReflectorConfig, ReflectorMode,
    ReflectorRecord, ReflectorReport,
};
use crate::stamps::{self, realtime_ns, RxMeta, TxKind, TxStamp, Want};
use crate::sys::{sock, timestamping};

/// Largest UDP payload.
const MAX_DATAGRAM: usize = 65_536;
/// Requests taken in one pass in batch mode.
const BATCH: usize = 64;

/// linerate's UDP reflector for one session.
#[derive(Debug)]
pub struct UdpReflector {
    sock: UdpSocket,
    cfg: ReflectorConfig,
}

/// Transmit stamps of replies, matched to their records by OPT_ID.
#[derive(Debug, Default)]
struct TxTracker {
    next_id: u32,
    pending: VecDeque<(u32, Option<usize>, u64)>,
    last_complete: Option<TxStamps>,
    scratch: Vec<TxStamp>,
}

impl TxTracker {
    fn sent(&mut self, record: Option<usize>, seq: u64) {
        self.pending.push_back((self.next_id, record, seq));
        self.next_id = self.next_id.wrapping_add(1);
        // Bound memory if the kernel never stamps (e.g. stamping refused).
        while self.pending.len() > 4096 {
            self.pending.pop_front();
        }
    }

    /// Transmit stamps of sent replies are still to come.
    fn owed(&self) -> bool {
        !self.pending.is_empty()
    }

    fn drain(&mut self, fd: i32, records: &mut [ReflectorRecord]) -> io::Result<()> {
        self.scratch.clear();
        timestamping::read_tx_stamps(fd, &mut self.scratch)?;
        for s in &self.scratch {
            let Some(&(_, rec, seq)) = self.pending.iter().find(|(id, _, _)| *id == s.id) else {
                continue;
            };
            let v = (s.software_ns != 0).then_some(s.software_ns);
            if let Some(r) = rec.and_then(|i| records.get_mut(i)) {
                match s.kind {
                    TxKind::Sched => r.stamps.tx_sched_ns = v,
                    TxKind::Snd => r.stamps.tx_soft_ns = v,
                    TxKind::Ack => {}
                }
            }
            if s.kind == TxKind::Snd {
                let sched = rec
                    .and_then(|i| records.get(i))
                    .and_then(|r| r.stamps.tx_sched_ns)
                    .unwrap_or(0);
                self.last_complete = Some(TxStamps {
                    seq,
                    tx_sched_ns: sched,
                    tx_soft_ns: s.software_ns,
                });
                while self.pending.front().is_some_and(|&(id, _, _)| id != s.id) {
                    self.pending.pop_front();
                }
                self.pending.pop_front();
            }
        }
        Ok(())
    }
}

impl UdpReflector {
    /// Binds the reflector's socket.
    pub fn bind(addr: SocketAddr, cfg: ReflectorConfig) -> Result<Self, EchoIoError> {
        let sock = UdpSocket::bind(addr).map_err(sock_err(format!("bind UDP {addr}")))?;
        // Receive stamps on every request (they cost no measurable time on
        // the reply's path); a transmit stamp only for the replies whose
        // request asks for one (the client's stamped sample).
        let want = if cfg.kernel_stamps {
            Want::RxTxOnRequest
        } else {
            Want::Nothing
        };
        stamps::enable(sock.as_raw_fd(), want).map_err(sock_err("setsockopt SO_TIMESTAMPING"))?;
        if cfg.no_udp_checksum {
            timestamping::set_no_check(sock.as_raw_fd(), true)
                .map_err(sock_err("setsockopt SO_NO_CHECK"))?;
        }
        // Blocking receives wake up at least this often to notice `stop`.
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .map_err(sock_err("setsockopt SO_RCVTIMEO"))?;
        Ok(Self { sock, cfg })
    }

    /// Where clients send requests.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Serves until `stop` is set, the session is idle for its idle timeout,
    /// or its maximum duration passes.
    pub fn run(self, stop: &AtomicBool) -> Result<ReflectorReport, EchoIoError> {
        let fd = self.sock.as_raw_fd();
        let cfg = self.cfg;
        let start = Instant::now();
        let mut last_request = start;
        let mut report = ReflectorReport::default();
        let mut tx = TxTracker::default();
        let mut bufs: Vec<Vec<u8>> = vec![vec![0u8; MAX_DATAGRAM]];
        if cfg.mode == ReflectorMode::Batch {
            bufs.resize_with(BATCH, || vec![0u8; MAX_DATAGRAM]);
        }
        let mut copy_buf = if cfg.copy {
            vec![0u8; MAX_DATAGRAM]
        } else {
            Vec::new()
        };
        let mut batch: Vec<(usize, RxMeta, u64)> = Vec::with_capacity(BATCH);
        let mut last_drain = Instant::now();
        // Read the next request with its receive stamp (recvmsg and a
        // control buffer) only when the client said it will ask for stamps;
        // the others with plain recvfrom, as a reflector that stamps nothing.
        let mut expect_stamped = cfg.kernel_stamps;
        let recv = |buf: &mut [u8], flags: libc::c_int, stamped: bool| {
            if stamped {
                timestamping::recv(fd, buf, flags)
            } else {
                timestamping::recv_plain(fd, buf, flags, true)
            }
        };
        // The limits are checked every 64 turns of the loop: a busy reflector
        // turns it once per empty receive, and two clock reads per turn
        // would slow how fast it sees a request.
        let mut turn = 0u32;
        loop {
            turn = turn.wrapping_add(1);
            if turn.is_multiple_of(64)
                && (stop.load(Ordering::Relaxed)
                    || start.elapsed() >= cfg.max_duration
                    || last_request.elapsed() >= cfg.idle_timeout)
            {
                break;
            }
            batch.clear();
            let first = match cfg.mode {
                ReflectorMode::Busy => {
                    match recv(&mut bufs[0], libc::MSG_DONTWAIT, expect_stamped) {
                        Ok(m) => m,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            // Poll the error queue only while stamps are
                            // owed, and at most every 100 µs: a syscall per
                            // spin would halve how fast a request is seen.
                            if tx.owed()
                                && turn.is_multiple_of(64)
                                && last_drain.elapsed() >= Duration::from_micros(100)
                            {
                                tx.drain(fd, &mut report.records)
                                    .map_err(sock_err("read error queue"))?;
                                last_drain = Instant::now();
                            }
                            std::hint::spin_loop();
                            continue;
                        }
                        Err(e) => return Err(sock_err("recvmsg")(e)),
                    }
                }
                ReflectorMode::Blocking | ReflectorMode::Batch => {
                    // A blocking receive with a receive timeout (set at bind)
                    // wakes straight into the request; the error queue is
                    // drained after the reply, off the critical path.
                    match recv(&mut bufs[0], 0, expect_stamped) {
                        Ok(m) => m,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            if tx.owed() {
                                tx.drain(fd, &mut report.records)
                                    .map_err(sock_err("read error queue"))?;
                            }
                            // A receive timeout: check the limits now.
                            turn = 63;
                            continue;
                        }
                        Err(e) => return Err(sock_err("recvmsg")(e)),
                    }
                }
            };
            batch.push((0, first, realtime_ns()));
            if cfg.mode == ReflectorMode::Batch {
                while batch.len() < BATCH {
                    let i = batch.len();
                    match recv(&mut bufs[i], libc::MSG_DONTWAIT, cfg.kernel_stamps) {
                        Ok(m) => batch.push((i, m, realtime_ns())),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(sock_err("recvmsg")(e)),
                    }
                }
            }
            for &(i, meta, rx_app) in &batch {
                let len = meta.len.min(bufs[i].len());
                if meta.truncated {
                    report.malformed += 1;
                    continue;
                }
                let (seq, stamp) = match Packet::new_checked(&bufs[i][..len]) {
                    Ok(p) if p.kind() == Ok(Kind::Request) => {
                        if p.session() != cfg.session {
                            report.unknown_session += 1;
                            continue;
                        }
                        expect_stamped = cfg.kernel_stamps && p.next_stamp_requested();
                        (p.seq(), cfg.kernel_stamps && p.stamp_requested())
                    }
                    _ => {
                        report.malformed += 1;
                        continue;
                    }
                };
                let Some(from) = meta.from else {
                    report.malformed += 1;
                    continue;
                };
                if !super::allowed(cfg.peer, from) {
                    // The session's token from another address: no
                    // reflection towards a third party.
                    report.unknown_session += 1;
                    continue;
                }
                last_request = Instant::now();
                report.bytes_in += len as u64;
                let out: &mut [u8] = if cfg.copy {
                    copy_buf[..len].copy_from_slice(&bufs[i][..len]);
                    &mut copy_buf[..len]
                } else {
                    &mut bufs[i][..len]
                };
                let tx_app = realtime_ns();
                let inline = ReflectorStamps {
                    rx_kernel_ns: meta.software_ns,
                    rx_app_ns: rx_app,
                    tx_app_ns: tx_app,
                    prev: tx.last_complete,
                };
                Packet::new_unchecked(&mut *out).make_reply(&inline);
                // A reply is the request, same length: never more bytes out
                // than in.
                let sent = if stamp {
                    stamps::send_stamped(fd, out, from)
                } else {
                    sock::send_to(fd, out, from)
                };
                match sent {
                    Ok(n) => {
                        report.replies += 1;
                        report.bytes_out += n as u64;
                        let rec = if report.records.len() < cfg.max_records {
                            report.records.push(ReflectorRecord {
                                seq,
                                stamps: ResponderStamps {
                                    rx_kernel_ns: (meta.software_ns != 0)
                                        .then_some(meta.software_ns),
                                    rx_app_ns: rx_app,
                                    tx_app_ns: tx_app,
                                    tx_sched_ns: None,
                                    tx_soft_ns: None,
                                },
                            });
                            Some(report.records.len() - 1)
                        } else {
                            report.records_dropped += 1;
                            None
                        };
                        if stamp {
                            tx.sent(rec, seq);
                        }
                    }
                    // A client that went away (ICMP unreachable) or a full
                    // queue: the request counts as unanswered, the session
                    // goes on.
                    Err(_) => report.send_errors += 1,
                }
            }
            if tx.owed() {
                tx.drain(fd, &mut report.records)
                    .map_err(sock_err("read error queue"))?;
            }
        }
        // Last transmit stamps.
        std::thread::sleep(Duration::from_millis(2));
        tx.drain(fd, &mut report.records)
            .map_err(sock_err("read error queue"))?;
        Ok(report)
    }
}

/// The client's sockets: one that stamps nothing, for the exchanges outside
/// the stamped sample, and one with every kernel stamp, for the sample; a
/// run uses one or both. Each is connected to the target.
struct ClientSockets {
    plain: Option<UdpSocket>,
    stamped: Option<UdpSocket>,
    /// SO_RCVTIMEO last set on each (plain, stamped), ms.
    timeout_ms: [u128; 2],
}

impl ClientSockets {
    fn open(cfg: &ClientConfig) -> Result<Self, EchoIoError> {
        let open = |want: Want| -> Result<UdpSocket, EchoIoError> {
            let local: SocketAddr = match cfg.target {
                SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
                SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
            };
            let sock = UdpSocket::bind(local).map_err(sock_err("bind UDP client"))?;
            sock.connect(cfg.target)
                .map_err(sock_err(format!("connect UDP {}", cfg.target)))?;
            stamps::enable(sock.as_raw_fd(), want)
                .map_err(sock_err("setsockopt SO_TIMESTAMPING"))?;
            if cfg.no_udp_checksum {
                timestamping::set_no_check(sock.as_raw_fd(), true)
                    .map_err(sock_err("setsockopt SO_NO_CHECK"))?;
            }
            Ok(sock)
        };
        let every = cfg.stamp_every.max(1);
        Ok(Self {
            plain: (!cfg.kernel_stamps || every > 1)
                .then(|| open(Want::Nothing))
                .transpose()?,
            stamped: cfg.kernel_stamps.then(|| open(Want::RxTx)).transpose()?,
            timeout_ms: [0; 2],
        })
    }

    /// The socket of an exchange (stamped or not).
    fn get(&self, stamped: bool) -> &UdpSocket {
        let (first, other) = if stamped {
            (&self.stamped, &self.plain)
        } else {
            (&self.plain, &self.stamped)
        };
        first
            .as_ref()
            .or(other.as_ref())
            .expect("open() makes at least one socket")
    }

    fn fds(&self) -> Vec<RawFd> {
        [&self.plain, &self.stamped]
            .into_iter()
            .flatten()
            .map(|s| s.as_raw_fd())
            .collect()
    }

    /// Sets the receive timeout of one socket when it changes by a
    /// millisecond or more.
    fn set_timeout(&mut self, stamped: bool, ms: u128) -> Result<(), EchoIoError> {
        let i = usize::from(stamped && self.stamped.is_some());
        if self.timeout_ms[i] != ms {
            self.get(stamped)
                .set_read_timeout(Some(Duration::from_millis(ms as u64)))
                .map_err(sock_err("setsockopt SO_RCVTIMEO"))?;
            self.timeout_ms[i] = ms;
        }
        Ok(())
    }
}

/// Runs the client side of a UDP echo test against `cfg.target`.
///
/// With kernel stamps, one exchange in `cfg.stamp_every` goes out on a
/// socket with every stamp and asks the reflector to stamp its reply; the
/// others go out on a socket that stamps nothing, so their RTT carries no
/// stamping cost and stands beside the stamped sample's.
pub fn run_udp_client(cfg: &ClientConfig) -> Result<ClientRun, EchoIoError> {
    if cfg.size < echo::HEADER_LEN || cfg.size > MAX_DATAGRAM - 8 {
        return Err(EchoIoError::Protocol(format!(
            "UDP request size {} is outside {}..={}",
            cfg.size,
            echo::HEADER_LEN,
            MAX_DATAGRAM - 8
        )));
    }
    let mut socks = ClientSockets::open(cfg)?;
    let every = u64::from(cfg.stamp_every.max(1));
    let stamped_fd = socks.stamped.as_ref().map(|s| s.as_raw_fd());
    if stamped_fd.is_some() {
        warm_up_stamps();
    }
    let mut req = vec![0u8; cfg.size];
    for (i, b) in req.iter_mut().enumerate().skip(echo::HEADER_LEN) {
        *b = (i % 251) as u8;
    }
    let mut reply = vec![0u8; MAX_DATAGRAM];
    let mut pp = PingPong::new(cfg.schedule);
    let mono0 = Instant::now();
    let now = || u64::try_from(mono0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    // seq → (application send stamp, stamped).
    let mut sent_at: HashMap<u64, (u64, bool)> = HashMap::new();
    let mut id_to_seq: HashMap<u32, u64> = HashMap::new();
    let mut next_id: u32 = 0;
    let mut tx_stamps: Vec<TxStamp> = Vec::new();
    let mut run = ClientRun {
        stamp_every: if cfg.kernel_stamps {
            cfg.stamp_every.max(1)
        } else {
            1
        },
        ..ClientRun::default()
    };
    // Transmit stamps of a stamped request wait on the error queue.
    let mut owed = false;
    // Whether the request last sent was stamped: strict ping-pong waits on
    // its socket alone.
    let mut last_stamped = false;
    loop {
        match pp.poll(now()) {
            Action::Send { seq } => {
                // Collect the previous requests' transmit stamps now, between
                // exchanges, where the syscall delays no measured interval.
                if let (true, Some(fd)) = (owed, stamped_fd) {
                    run.collect_tx_stamps(fd, &mut tx_stamps)?;
                    owed = false;
                }
                let stamped = stamped_fd.is_some() && seq % every == 0;
                let next_stamped = stamped_fd.is_some() && (seq + 1) % every == 0;
                let mut p = Packet::new_unchecked(&mut req[..]);
                p.emit_request(cfg.session, seq);
                p.set_stamp_flags(stamped, next_stamped);
                let sock = socks.get(stamped);
                let app_send = realtime_ns();
                match sock.send(&req) {
                    Ok(_) => {
                        pp.on_sent(now(), seq);
                        if run.recording() {
                            sent_at.insert(seq, (app_send, stamped));
                        }
                        if stamped {
                            // OPT_ID keys count the stamped socket's sends.
                            if run.recording() {
                                id_to_seq.insert(next_id, seq);
                            }
                            next_id = next_id.wrapping_add(1);
                            owed = true;
                        }
                    }
                    // ECONNREFUSED from an earlier ICMP unreachable: the
                    // probe is lost, the run goes on.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        pp.on_sent(now(), seq);
                    }
                    Err(e) => return Err(sock_err("send")(e)),
                }
                last_stamped = stamped;
            }
            Action::Done => break,
            Action::Wait => {
                let t = now();
                let wake = pp.next_wakeup(t).unwrap_or(t);
                let wait = Duration::from_nanos(wake.saturating_sub(t));
                // Receive one datagram from `fd` with `flags`; false when
                // none was there.
                let mut take = |fd: RawFd,
                                flags: libc::c_int,
                                pp: &mut PingPong|
                 -> Result<bool, EchoIoError> {
                    // The plain socket has no stamps to read: recvfrom.
                    let got = if Some(fd) == stamped_fd {
                        timestamping::recv(fd, &mut reply, flags)
                    } else {
                        timestamping::recv_plain(fd, &mut reply, flags, false)
                    };
                    match got {
                        Ok(meta) => {
                            let app_recv = realtime_ns();
                            on_reply(
                                cfg,
                                &reply,
                                meta,
                                app_recv,
                                now(),
                                pp,
                                &mut sent_at,
                                &mut run,
                            );
                            Ok(true)
                        }
                        Err(e)
                            if matches!(
                                e.kind(),
                                io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused
                            ) =>
                        {
                            Ok(false)
                        }
                        Err(e) => Err(sock_err("recvmsg")(e)),
                    }
                };
                let strict = cfg.schedule.max_in_flight <= 1;
                if cfg.spin && strict {
                    // The reply comes on the socket the request left from.
                    let fd = socks.get(last_stamped).as_raw_fd();
                    let until = Instant::now() + wait;
                    while !take(fd, libc::MSG_DONTWAIT, &mut pp)? && Instant::now() < until {
                        std::hint::spin_loop();
                    }
                } else if cfg.spin {
                    let fds = socks.fds();
                    let until = Instant::now() + wait;
                    loop {
                        let mut got = false;
                        for &fd in &fds {
                            got |= take(fd, libc::MSG_DONTWAIT, &mut pp)?;
                        }
                        if got || Instant::now() >= until {
                            break;
                        }
                        std::hint::spin_loop();
                    }
                } else if pp.in_flight() == 0 {
                    // Nothing to wait for but the next send slot.
                    std::thread::sleep(wait);
                } else if strict {
                    // Strict ping-pong: sleep in the receive itself, so the
                    // reply wakes the thread straight into recvmsg (one
                    // syscall, as a plain blocking client would do). The
                    // timeout only bounds the wait for a lost reply.
                    socks.set_timeout(last_stamped, wait.as_millis().max(1))?;
                    take(socks.get(last_stamped).as_raw_fd(), 0, &mut pp)?;
                } else {
                    let fds = socks.fds();
                    if sock::poll_readable_any(&fds, wait).map_err(sock_err("poll"))? {
                        for &fd in &fds {
                            while take(fd, libc::MSG_DONTWAIT, &mut pp)? {}
                        }
                    }
                }
            }
        }
    }
    let fd = stamped_fd.unwrap_or_else(|| socks.get(false).as_raw_fd());
    run.finish(fd, mono0, pp.counts(), tx_stamps, |id| {
        id_to_seq.get(&id).copied()
    })
}

#[allow(clippy::too_many_arguments)]
fn on_reply(
    cfg: &ClientConfig,
    buf: &[u8],
    meta: RxMeta,
    app_recv: u64,
    now: u64,
    pp: &mut PingPong,
    sent_at: &mut HashMap<u64, (u64, bool)>,
    run: &mut ClientRun,
) {
    let len = meta.len.min(buf.len());
    let Ok(p) = Packet::new_checked(&buf[..len]) else {
        return;
    };
    let expected_kind = if cfg.plain_echo {
        Kind::Request
    } else {
        Kind::Reply
    };
    if p.kind() != Ok(expected_kind) || p.session() != cfg.session || len != cfg.size {
        return;
    }
    let seq = p.seq();
    if pp.on_reply(now, seq) != ReplyVerdict::Fresh {
        return;
    }
    let Some((app_send, stamped)) = sent_at.remove(&seq) else {
        // Sent after the recording limit: counted, not dissected.
        run.unrecorded += 1;
        return;
    };
    run.exchanges.push(Exchange {
        seq,
        client: ClientStamps {
            app_send_ns: app_send,
            tx_sched_ns: None,
            tx_soft_ns: None,
            tx_ack_ns: None,
            rx_kernel_ns: (meta.software_ns != 0).then_some(meta.software_ns),
            app_recv_ns: app_recv,
        },
        inline: if cfg.plain_echo { None } else { p.stamps() },
        dissected: stamped || !cfg.kernel_stamps,
    });
}

/// Receive stamping is switched on by the kernel through a deferred
/// static-key update (`net_enable_timestamp` schedules a work item when no
/// socket of the host wanted stamps yet): on a loaded host that work can
/// run tens of milliseconds late, and every datagram received before it
/// comes without a software stamp. Called once this run's sockets asked for
/// stamps: waits (at most [`STAMPS_ON_WITHIN`]) until a datagram sent to
/// itself over loopback comes back stamped; where loopback cannot be used
/// (a namespace whose `lo` is down), waits a fixed 20 ms instead.
pub(crate) fn warm_up_stamps() {
    if !rx_stamps_on(STAMPS_ON_WITHIN).unwrap_or(false) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How long [`warm_up_stamps`] waits for the kernel to stamp received
/// datagrams.
const STAMPS_ON_WITHIN: Duration = Duration::from_secs(2);

/// True once a datagram this thread sends to itself over loopback is
/// received with a software stamp, within `within`; false when none was.
pub(super) fn rx_stamps_on(within: Duration) -> io::Result<bool> {
    let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
    sock.connect(sock.local_addr()?)?;
    stamps::enable_rx_stamps(&sock)?;
    sock.set_read_timeout(Some(Duration::from_millis(5)))?;
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 1];
    while Instant::now() < deadline {
        sock.send(&[0])?;
        match stamps::recv_stamped(&sock, &mut buf) {
            Ok((_, Some(_))) => return Ok(true),
            Ok((_, None)) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) if sock::timed_out(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}
