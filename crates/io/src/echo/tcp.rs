//! TCP echo (seed 001's 1-byte TCP echo): linerate's reflector and the client.
//!
//! The connection opens with a 16-byte hello (an echo request header whose
//! sequence field carries the request size in its low 32 bits and, in its
//! high 32, N of the client's stamped sample: exchange *k* is kernel-stamped
//! when *k* mod N = 0; 0 or 1, every exchange), so the reflector answers
//! only sessions opened over the control connection, and stamps the replies
//! of the sample alone. After it, requests and replies are `size` raw bytes
//! each (1 byte by default), sent with TCP_NODELAY; the reflector's stamps
//! come back at the end of the run, since a 1-byte reply has no room for
//! them.
//!
//! Both ends count exchanges (the stream keeps them in order), so neither
//! needs a flag on the wire to know which exchange is stamped. A stamped
//! exchange is written with a per-write `SO_TIMESTAMPING` control message
//! and read with `recvmsg` and its control buffer; the others are plain
//! `write` and `recv`, with no skb clone and no error-queue read on either
//! end.

use std::io::{self, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use linerate_core::latency::{ClientStamps, ResponderStamps};
use linerate_core::procedure::pingpong::{Action, PingPong, ReplyVerdict};
use linerate_core::wire::echo::{self, Kind, Packet};

use super::udp::warm_up_stamps;
use super::{
    sock_err, ClientConfig, ClientRun, EchoIoError, Exchange, ReflectorConfig, ReflectorMode,
    ReflectorRecord, ReflectorReport,
};
use crate::stamps::{self, realtime_ns, TxKind, TxStamp, Want};
use crate::sys::{sock, timestamping};

/// Largest request a TCP session may use.
const MAX_TCP_REQUEST: usize = 1 << 20;
/// Connections waiting for their hello at once.
const MAX_PENDING_HELLOS: usize = 16;
/// How long a connection may take to send its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(2);

/// The hello's sequence field: the request size, and the stamped sample.
fn hello_seq(size: usize, stamp_every: u32) -> u64 {
    size as u64 | (u64::from(stamp_every) << 32)
}

/// The request size and stamped sample (at least 1) a hello announces.
fn parse_hello_seq(seq: u64) -> (usize, u32) {
    let size = usize::try_from(seq & 0xffff_ffff).unwrap_or(0);
    (size, ((seq >> 32) as u32).max(1))
}

/// Whether exchange `seq` is in the stamped sample of one in `every`.
fn is_stamped(seq: u64, every: u32) -> bool {
    seq.is_multiple_of(u64::from(every.max(1)))
}

/// Writes all of `buf`. `stamp`: `None`, plainly; `Some(all)`, as one write
/// asking for its transmit stamps ([`stamps::write_stamped`]), the rest (a
/// partial write of a large request) plainly: its stamps then key another
/// byte and count as missing.
fn write_all(stream: &TcpStream, buf: &[u8], stamp: Option<bool>) -> io::Result<()> {
    let done = match stamp {
        Some(all) => stamps::write_stamped(stream.as_raw_fd(), buf, all)?,
        None => 0,
    };
    let mut s = stream;
    s.write_all(&buf[done..])
}

/// Reads into `buf` with `flags`: with the receive stamp (recvmsg and its
/// control buffer) when `stamped`, else plain recv. (bytes, stamp ns or 0).
fn read_some(
    fd: std::os::fd::RawFd,
    buf: &mut [u8],
    flags: libc::c_int,
    stamped: bool,
) -> io::Result<(usize, u64)> {
    loop {
        let r = if stamped {
            timestamping::recv(fd, buf, flags).map(|m| (m.len, m.software_ns))
        } else {
            sock::recv(fd, buf, flags).map(|n| (n, 0))
        };
        match r {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}

/// Empty non-blocking reads between two looks at the clock while spinning.
const SPINS_PER_CLOCK_READ: u32 = 64;

/// Spins on non-blocking reads into `buf` until one returns data (or the
/// peer's end), an error, or `over()` says the wait is over (checked once
/// every [`SPINS_PER_CLOCK_READ`] empty reads: `WouldBlock` then). The loop
/// holds a read and nothing else, so a reply is seen within one system
/// call, as in a peer's spinning loop.
fn spin_read(
    fd: std::os::fd::RawFd,
    buf: &mut [u8],
    stamped: bool,
    mut over: impl FnMut() -> bool,
) -> io::Result<(usize, u64)> {
    let mut empty = 0u32;
    loop {
        match read_some(fd, buf, libc::MSG_DONTWAIT, stamped) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                empty += 1;
                if empty.is_multiple_of(SPINS_PER_CLOCK_READ) && over() {
                    return Err(e);
                }
            }
            r => return r,
        }
    }
}

/// linerate's TCP reflector for one session.
#[derive(Debug)]
pub struct TcpReflector {
    listener: TcpListener,
    cfg: ReflectorConfig,
}

impl TcpReflector {
    /// Binds the reflector's listening socket.
    pub fn bind(addr: SocketAddr, cfg: ReflectorConfig) -> Result<Self, EchoIoError> {
        let listener = TcpListener::bind(addr).map_err(sock_err(format!("bind TCP {addr}")))?;
        Ok(Self { listener, cfg })
    }

    /// Where the client connects.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts connections, many at once, until one opens this session with
    /// its hello (`None`: stopped or idle first). Connections from other
    /// addresses than the session's peer are closed at once; at most
    /// [`MAX_PENDING_HELLOS`] wait for their hello (the oldest is closed to
    /// make room), each at most [`HELLO_TIMEOUT`]: silent connections
    /// cannot delay the real client.
    fn accept_session(
        &self,
        stop: &AtomicBool,
        start: Instant,
        report: &mut ReflectorReport,
    ) -> Result<Option<(TcpStream, usize, u32)>, EchoIoError> {
        let cfg = &self.cfg;
        self.listener
            .set_nonblocking(true)
            .map_err(sock_err("O_NONBLOCK"))?;
        let lfd = self.listener.as_raw_fd();
        let mut pending: std::collections::VecDeque<(TcpStream, Instant, Vec<u8>)> =
            std::collections::VecDeque::new();
        loop {
            if stop.load(Ordering::Relaxed) || start.elapsed() >= cfg.idle_timeout {
                return Ok(None);
            }
            let wait = if pending.is_empty() { 50 } else { 5 };
            let _ =
                sock::poll_readable(lfd, Duration::from_millis(wait)).map_err(sock_err("poll"))?;
            loop {
                match self.listener.accept() {
                    Ok((s, from)) if super::allowed(cfg.peer, from) => {
                        if s.set_nonblocking(true).is_ok() {
                            if pending.len() >= MAX_PENDING_HELLOS {
                                pending.pop_front();
                                report.malformed += 1;
                            }
                            pending.push_back((s, Instant::now(), Vec::new()));
                        }
                    }
                    Ok(_) => report.unknown_session += 1,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // EMFILE and friends: try again on the next turn.
                    Err(_) => break,
                }
            }
            let mut i = 0;
            while i < pending.len() {
                let (s, since, got) = &mut pending[i];
                let mut b = [0u8; echo::HEADER_LEN];
                let want = echo::HEADER_LEN - got.len();
                let verdict = match (&*s).read(&mut b[..want]) {
                    Ok(0) => Some(None),
                    Ok(n) => {
                        got.extend_from_slice(&b[..n]);
                        (got.len() == echo::HEADER_LEN).then(|| Some(got.clone()))
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        (since.elapsed() >= HELLO_TIMEOUT).then_some(None)
                    }
                    Err(_) => Some(None),
                };
                let Some(hello) = verdict else {
                    i += 1;
                    continue;
                };
                let Some((s, _, _)) = pending.remove(i) else {
                    continue;
                };
                let Some(hello) = hello else {
                    report.malformed += 1;
                    continue;
                };
                match Packet::new_checked(&hello[..]) {
                    Ok(p) if p.kind() == Ok(Kind::Request) && p.session() == cfg.session => {
                        let (size, every) = parse_hello_seq(p.seq());
                        if (1..=MAX_TCP_REQUEST).contains(&size) {
                            s.set_nonblocking(false).map_err(sock_err("O_NONBLOCK"))?;
                            return Ok(Some((s, size, every)));
                        }
                        report.malformed += 1;
                    }
                    Ok(_) => report.unknown_session += 1,
                    Err(_) => report.malformed += 1,
                }
            }
        }
    }

    /// Accepts connections until one opens this session, then echoes on it
    /// until the client closes, `stop` is set, or a time limit passes.
    /// Blocking (and batch) mode sleeps in `recv` itself, so a request
    /// wakes the thread straight into its read (a receive timeout of 50 ms
    /// bounds how late `stop` is seen); busy mode spins on non-blocking
    /// reads. Only the client's stamped sample is read with its receive
    /// stamp and answered with a transmit stamp.
    pub fn run(self, stop: &AtomicBool) -> Result<ReflectorReport, EchoIoError> {
        let cfg = self.cfg;
        let start = Instant::now();
        let mut report = ReflectorReport::default();
        let Some((stream, size, every)) = self.accept_session(stop, start, &mut report)? else {
            return Ok(report);
        };
        stream.set_nodelay(true).map_err(sock_err("TCP_NODELAY"))?;
        stream
            .set_read_timeout(Some(Duration::from_millis(50)))
            .map_err(sock_err("SO_RCVTIMEO"))?;
        let fd = stream.as_raw_fd();
        let want = match (cfg.kernel_stamps, every) {
            (false, _) => Want::Nothing,
            (true, 1) => Want::RxSnd,
            (true, _) => Want::RxTxOnRequest,
        };
        stamps::enable(fd, want).map_err(sock_err("setsockopt SO_TIMESTAMPING"))?;
        let busy = cfg.mode == ReflectorMode::Busy;
        let mut buf = vec![0u8; size];
        let mut copy_buf = if cfg.copy {
            vec![0u8; size]
        } else {
            Vec::new()
        };
        let mut tx: Vec<TxStamp> = Vec::new();
        let mut seq = 0u64;
        let mut last = Instant::now();
        // The limits are checked once per request, and while waiting at
        // each receive timeout (blocking) or every few empty reads (busy).
        let waited_enough =
            |last: Instant| stop.load(Ordering::Relaxed) || last.elapsed() >= cfg.idle_timeout;
        'session: while !stop.load(Ordering::Relaxed)
            && start.elapsed() < cfg.max_duration
            && last.elapsed() < cfg.idle_timeout
        {
            let stamped = cfg.kernel_stamps && is_stamped(seq, every);
            // Read one whole request; the receive stamp of its last segment
            // is the one that matters.
            let mut got = 0;
            let mut rx_kernel = 0;
            while got < size {
                let read = if busy {
                    spin_read(fd, &mut buf[got..], stamped, || waited_enough(last))
                } else {
                    read_some(fd, &mut buf[got..], 0, stamped)
                };
                match read {
                    Ok((0, _)) => break 'session,
                    Ok((n, sw)) => {
                        got += n;
                        if sw != 0 {
                            rx_kernel = sw;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if waited_enough(last) {
                            break 'session;
                        }
                    }
                    Err(_) => break 'session,
                }
            }
            let rx_app = realtime_ns();
            last = Instant::now();
            report.bytes_in += size as u64;
            let out: &[u8] = if cfg.copy {
                copy_buf.copy_from_slice(&buf);
                &copy_buf
            } else {
                &buf
            };
            let tx_app = realtime_ns();
            // Every reply of a session stamping every exchange has its
            // stamps from the socket; a sample's, from the write.
            let stamp = (stamped && every > 1).then_some(false);
            if write_all(&stream, out, stamp).is_err() {
                report.send_errors += 1;
                break;
            }
            report.replies += 1;
            report.bytes_out += size as u64;
            if report.records.len() < cfg.max_records {
                report.records.push(ReflectorRecord {
                    seq,
                    stamps: ResponderStamps {
                        rx_kernel_ns: (rx_kernel != 0).then_some(rx_kernel),
                        rx_app_ns: rx_app,
                        tx_app_ns: tx_app,
                        tx_sched_ns: None,
                        tx_soft_ns: None,
                    },
                });
            } else {
                report.records_dropped += 1;
            }
            seq += 1;
            if stamped {
                timestamping::read_tx_stamps(fd, &mut tx).map_err(sock_err("read error queue"))?;
            }
        }
        std::thread::sleep(Duration::from_millis(2));
        timestamping::read_tx_stamps(fd, &mut tx).map_err(sock_err("read error queue"))?;
        apply_reflector_tx(&mut report.records, &tx, size);
        Ok(report)
    }
}

/// The exchange a TCP OPT_ID (byte offset of the last byte of a write,
/// counted from when stamping was enabled) belongs to.
fn exchange_of_byte(id: u32, size: usize) -> Option<u64> {
    let end = u64::from(id) + 1;
    let size = size as u64;
    (end % size == 0).then(|| end / size - 1)
}

fn apply_reflector_tx(records: &mut [ReflectorRecord], tx: &[TxStamp], size: usize) {
    for s in tx {
        let Some(seq) = exchange_of_byte(s.id, size) else {
            continue;
        };
        let Some(r) = usize::try_from(seq).ok().and_then(|i| records.get_mut(i)) else {
            continue;
        };
        let v = (s.software_ns != 0).then_some(s.software_ns);
        match s.kind {
            TxKind::Sched => r.stamps.tx_sched_ns = v,
            TxKind::Snd => r.stamps.tx_soft_ns = v,
            TxKind::Ack => {}
        }
    }
}

/// Runs the client side of a TCP echo test (linerate reflector, or with
/// `plain_echo` any RFC 862 TCP echo server).
///
/// With kernel stamps, exchange *k* is stamped when *k* mod
/// `cfg.stamp_every` = 0: its request is written asking for every transmit
/// stamp (scheduler, driver, acknowledgement) and its reply read with its
/// receive stamp; the others are written and read plainly, so their RTT
/// carries no stamping cost and stands beside the stamped sample's. Without
/// `spin` the client sleeps in `recv` itself (its receive timeout bounds the
/// wait for a late reply), so a reply wakes it straight into the read.
pub fn run_tcp_client(cfg: &ClientConfig) -> Result<ClientRun, EchoIoError> {
    if cfg.size == 0 || cfg.size > MAX_TCP_REQUEST {
        return Err(EchoIoError::Protocol(format!(
            "TCP request size {} is outside 1..={MAX_TCP_REQUEST}",
            cfg.size
        )));
    }
    let stream = TcpStream::connect_timeout(&cfg.target, Duration::from_secs(3))
        .map_err(sock_err(format!("connect TCP {}", cfg.target)))?;
    stream.set_nodelay(true).map_err(sock_err("TCP_NODELAY"))?;
    let every = if cfg.kernel_stamps {
        cfg.stamp_every.max(1)
    } else {
        1
    };
    // Stamping goes on before the first byte is written: a TCP OPT_ID key
    // counts from snd_una at that moment (without Linux 6.2's OPT_ID_TCP),
    // so with an unacknowledged hello in flight every key would be off by
    // its length. Keys then count the hello's bytes first.
    let fd = stream.as_raw_fd();
    let want = match (cfg.kernel_stamps, every) {
        (false, _) => Want::Nothing,
        (true, 1) => Want::RxTxAck,
        (true, _) => Want::RxTxOnRequest,
    };
    stamps::enable(fd, want).map_err(sock_err("setsockopt SO_TIMESTAMPING"))?;
    let mut key_base = 0u32;
    if !cfg.plain_echo {
        let mut hello = [0u8; echo::HEADER_LEN];
        Packet::new_unchecked(&mut hello[..]).emit_request(cfg.session, hello_seq(cfg.size, every));
        (&stream)
            .write_all(&hello)
            .map_err(sock_err("send hello"))?;
        key_base = echo::HEADER_LEN as u32;
    }
    if cfg.kernel_stamps {
        warm_up_stamps();
    }
    let req: Vec<u8> = (0..cfg.size).map(|i| b'a' + (i % 26) as u8).collect();
    let mut reply = vec![0u8; cfg.size];
    let mut pp = PingPong::new(cfg.schedule);
    let mono0 = Instant::now();
    let now = || u64::try_from(mono0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    // (seq, application send stamp, stamped), oldest first: replies come in
    // order.
    let mut app_sends: std::collections::VecDeque<(u64, u64, bool)> = Default::default();
    let mut tx: Vec<TxStamp> = Vec::new();
    let mut run = ClientRun {
        stamp_every: every,
        ..ClientRun::default()
    };
    // Transmit stamps of a stamped request wait on the error queue.
    let mut owed = false;
    let mut timeout_ms = 0u128;
    let mut got = 0usize;
    let mut rx_kernel = 0u64;
    loop {
        match pp.poll(now()) {
            Action::Send { seq } => {
                // The previous stamped request's stamps, collected before
                // this send so the syscall falls in no measured interval.
                if owed {
                    run.collect_tx_stamps(fd, &mut tx)?;
                }
                let stamped = cfg.kernel_stamps && is_stamped(seq, every);
                let stamp = (stamped && every > 1).then_some(true);
                let app_send = realtime_ns();
                write_all(&stream, &req, stamp).map_err(sock_err("send"))?;
                pp.on_sent(now(), seq);
                app_sends.push_back((seq, app_send, stamped));
                owed = stamped;
            }
            Action::Done => break,
            Action::Wait => {
                let t = now();
                let wait = Duration::from_nanos(pp.next_wakeup(t).unwrap_or(t).saturating_sub(t));
                // The reply being read belongs to the oldest request.
                let Some(&(_, _, stamped)) = app_sends.front() else {
                    // Nothing to wait for but the next send slot.
                    std::thread::sleep(wait);
                    continue;
                };
                let read = if cfg.spin {
                    let deadline =
                        t.saturating_add(u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX));
                    spin_read(fd, &mut reply[got..], stamped, || now() >= deadline)
                } else {
                    let ms = wait.as_millis().max(1);
                    if ms != timeout_ms {
                        stream
                            .set_read_timeout(Some(Duration::from_millis(
                                u64::try_from(ms).unwrap_or(u64::MAX),
                            )))
                            .map_err(sock_err("setsockopt SO_RCVTIMEO"))?;
                        timeout_ms = ms;
                    }
                    read_some(fd, &mut reply[got..], 0, stamped)
                };
                match read {
                    Ok((0, _)) => {
                        return Err(EchoIoError::Protocol(
                            "the responder closed the connection".into(),
                        ))
                    }
                    Ok((n, sw)) => {
                        got += n;
                        if sw != 0 {
                            rx_kernel = sw;
                        }
                        if got == cfg.size {
                            let app_recv = realtime_ns();
                            got = 0;
                            if let Some((seq, app_send, stamped)) = app_sends.pop_front() {
                                if pp.on_reply(now(), seq) == ReplyVerdict::Fresh {
                                    if run.recording() {
                                        run.exchanges.push(Exchange {
                                            seq,
                                            client: ClientStamps {
                                                app_send_ns: app_send,
                                                rx_kernel_ns: (rx_kernel != 0).then_some(rx_kernel),
                                                app_recv_ns: app_recv,
                                                ..ClientStamps::default()
                                            },
                                            inline: None,
                                            dissected: stamped || !cfg.kernel_stamps,
                                        });
                                    } else {
                                        run.unrecorded += 1;
                                    }
                                }
                            }
                            rx_kernel = 0;
                        }
                    }
                    // The wait is over (spinning) or the receive timeout
                    // passed (blocking): the schedule then declares the
                    // reply late or the run over.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(sock_err("recvmsg")(e)),
                }
            }
        }
    }
    let size = cfg.size;
    run.finish(fd, mono0, pp.counts(), tx, move |id| {
        exchange_of_byte(id.checked_sub(key_base)?, size)
    })
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn tcp_opt_id_maps_to_exchanges() {
        assert_eq!(exchange_of_byte(0, 1), Some(0));
        assert_eq!(exchange_of_byte(9, 1), Some(9));
        assert_eq!(exchange_of_byte(63, 64), Some(0));
        assert_eq!(exchange_of_byte(127, 64), Some(1));
        assert_eq!(exchange_of_byte(100, 64), None);
    }

    #[test]
    fn spin_read_returns_data_or_gives_up_when_told() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let mut buf = [0u8; 4];
        // Nothing to read: the clock is asked once per 64 empty reads, and
        // the first "over" ends the wait.
        let mut asked = 0;
        let r = spin_read(b.as_raw_fd(), &mut buf, false, || {
            asked += 1;
            asked == 3
        });
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert_eq!(asked, 3);
        a.write_all(b"ping").unwrap();
        let (n, stamp) = spin_read(b.as_raw_fd(), &mut buf, false, || false).unwrap();
        assert_eq!((&buf[..n], stamp), (&b"ping"[..n], 0));
        assert!(n >= 1);
    }

    #[test]
    fn the_hello_carries_size_and_sample() {
        assert_eq!(parse_hello_seq(hello_seq(64, 4)), (64, 4));
        // A hello from a client that stamps every exchange (or predates
        // sampling) carries the size alone.
        assert_eq!(parse_hello_seq(1), (1, 1));
        assert_eq!(parse_hello_seq(hello_seq(1 << 20, 1)), (1 << 20, 1));
        assert!(is_stamped(0, 4) && is_stamped(8, 4) && !is_stamped(3, 4));
        assert!((0..5).all(|k| is_stamped(k, 1) && is_stamped(k, 0)));
    }
}
