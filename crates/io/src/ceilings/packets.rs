//! One UDP datagram through each socket send and receive path on loopback
//! (127.0.0.1): `send`, `sendmmsg`, UDP GSO; `recv`, `recvmmsg`, UDP GRO.
//!
//! Send: datagrams go to a bound socket nobody reads, so once its queue is
//! full the kernel drops them there; the time per datagram is the sending
//! syscall plus loopback's receive processing up to that socket (loopback
//! delivers in the sender's context). Receive: each round queues a batch
//! first (untimed) and then times draining it, so only the receiving calls
//! are timed; no energy per operation is given for them (the meter would
//! count the untimed sends too).

use std::io;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use linerate_core::ceilings::{udp_payload_bytes, Config, Part, Sample, Skipped};

use super::time_repeats;
use crate::sys::clock::monotonic_ns;
use crate::sys::sock;

/// Datagrams per `sendmmsg`/`recvmmsg` call and per receive round; at most
/// as many segments per GSO call (UDP_MAX_SEGMENTS is 64 on older kernels).
const BATCH: usize = 64;
/// Largest GSO buffer: a UDP datagram's 65,507-byte limit, rounded down.
const GSO_MAX_BYTES: usize = 65_000;
/// A receive round that waits longer than this lost a datagram.
const RECV_TIMEOUT: Duration = Duration::from_secs(1);

/// Why a packet path could not be timed.
#[derive(Debug, thiserror::Error)]
pub enum PacketError {
    /// A socket call failed.
    #[error("{what} on loopback")]
    Socket {
        /// Which call.
        what: &'static str,
        /// The error.
        source: io::Error,
    },
}

fn err(what: &'static str) -> impl FnOnce(io::Error) -> PacketError {
    move |source| PacketError::Socket { what, source }
}

/// A connected sender and its receiver on 127.0.0.1.
fn pair(gro: bool) -> Result<(UdpSocket, UdpSocket), PacketError> {
    let rx = UdpSocket::bind("127.0.0.1:0").map_err(err("bind"))?;
    let tx = UdpSocket::bind("127.0.0.1:0").map_err(err("bind"))?;
    tx.connect(rx.local_addr().map_err(err("getsockname"))?)
        .map_err(err("connect"))?;
    let big = 4 << 20;
    if sock::set_int(&rx, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, big).is_err() {
        sock::set_int(&rx, libc::SOL_SOCKET, libc::SO_RCVBUF, big).map_err(err("SO_RCVBUF"))?;
    }
    sock::set_timeout(&rx, libc::SO_RCVTIMEO, Some(RECV_TIMEOUT)).map_err(err("SO_RCVTIMEO"))?;
    if gro {
        sock::set_int(&rx, libc::SOL_UDP, libc::UDP_GRO, 1).map_err(err("UDP_GRO"))?;
    }
    Ok((tx, rx))
}

/// The send or receive samples at every packet frame size, and what could
/// not run.
pub(super) fn run(cfg: &Config, part: Part) -> Result<(Vec<Sample>, Vec<Skipped>), PacketError> {
    let mut out = Vec::new();
    for &frame in &cfg.packet_frames {
        let payload = udp_payload_bytes(frame) as usize;
        let segs = BATCH.min(GSO_MAX_BYTES / payload.max(1));
        let datagrams = cfg.packets_per_repeat.div_ceil(BATCH as u64) * BATCH as u64;
        let sample = |method: &str, ops: u64, (repeat_ns, energy)| Sample {
            part,
            method: method.to_string(),
            cache: None,
            bytes_per_op: payload as u64,
            frame_bytes: Some(frame),
            ops_per_repeat: ops,
            repeat_ns,
            energy,
        };
        match part {
            Part::Send => {
                let (tx, _rx) = pair(false)?;
                let fd = tx.as_raw_fd();
                let buf = vec![0x5au8; payload * BATCH];
                let one = &buf[..payload];
                let mut failed = None;
                let t = time_repeats(cfg, datagrams, |_| {
                    if let Err(e) = sock::send(fd, one, 0) {
                        failed.get_or_insert(e);
                    }
                });
                failed.take().map_or(Ok(()), |e| Err(err("send")(e)))?;
                out.push(sample("send", datagrams, t));
                let batch: Vec<&[u8]> = buf.chunks(payload).take(BATCH).collect();
                let t = time_repeats(cfg, datagrams / BATCH as u64, |_| {
                    if let Err(e) = sock::sendmmsg(fd, &batch) {
                        failed.get_or_insert(e);
                    }
                });
                failed.take().map_or(Ok(()), |e| Err(err("sendmmsg")(e)))?;
                out.push(sample("sendmmsg", datagrams, t));
                let calls = datagrams.div_ceil(segs as u64);
                let gso = &buf[..payload * segs];
                let t = time_repeats(cfg, calls, |_| {
                    if let Err(e) = sock::send_gso(fd, gso, payload as u16) {
                        failed.get_or_insert(e);
                    }
                });
                failed
                    .take()
                    .map_or(Ok(()), |e| Err(err("sendmsg UDP_SEGMENT")(e)))?;
                out.push(sample("UDP GSO", calls * segs as u64, t));
            }
            Part::Receive => {
                let rounds = datagrams / BATCH as u64;
                let (tx, rx) = pair(false)?;
                let (txfd, rxfd) = (tx.as_raw_fd(), rx.as_raw_fd());
                let buf = vec![0x5au8; payload];
                let batch: Vec<&[u8]> = vec![&buf[..]; BATCH];
                let fill = || send_all(txfd, &batch);
                let mut one = vec![0u8; payload.max(1)];
                let t = drain_repeats(cfg, rounds, fill, || {
                    for _ in 0..BATCH {
                        sock::recv(rxfd, &mut one, 0).map_err(err("recv"))?;
                    }
                    Ok(())
                })?;
                out.push(sample("recv", datagrams, t));
                let mut bufs = vec![vec![0u8; payload.max(1)]; BATCH];
                let mut lens = [0usize; BATCH];
                let t = drain_repeats(cfg, rounds, fill, || {
                    let mut got = 0;
                    while got < BATCH {
                        got += sock::recvmmsg(rxfd, &mut bufs[got..], &mut lens[got..], 0)
                            .map_err(err("recvmmsg"))?;
                    }
                    Ok(())
                })?;
                out.push(sample("recvmmsg", datagrams, t));
                let (gtx, grx) = pair(true)?;
                let (gtxfd, grxfd) = (gtx.as_raw_fd(), grx.as_raw_fd());
                let gbuf = vec![0x5au8; payload * segs];
                let mut big = vec![0u8; 1 << 16];
                let grounds = datagrams.div_ceil(segs as u64);
                let gfill = || {
                    sock::send_gso(gtxfd, &gbuf, payload as u16)
                        .map(drop)
                        .map_err(err("sendmsg UDP_SEGMENT"))
                };
                let t = drain_repeats(cfg, grounds, gfill, || {
                    let mut bytes = 0;
                    while bytes < gbuf.len() {
                        bytes += sock::recv_gro(grxfd, &mut big, 0)
                            .map_err(err("recvmsg UDP_GRO"))?
                            .0;
                    }
                    Ok(())
                })?;
                out.push(sample("UDP GRO", grounds * segs as u64, t));
            }
            Part::Copy | Part::Checksum => {}
        }
    }
    // linerate's XDP receive path (the RFC 2544 receiver's counter) is
    // timed with the raw-frame paths.
    Ok((out, Vec::new()))
}

/// Sends every datagram of `batch` (sendmmsg may take fewer at once).
fn send_all(fd: RawFd, batch: &[&[u8]]) -> Result<(), PacketError> {
    let mut sent = 0;
    while sent < batch.len() {
        sent += sock::sendmmsg(fd, &batch[sent..]).map_err(err("sendmmsg"))?;
    }
    Ok(())
}

/// `rounds` rounds of `fill` (untimed) then `drain` (timed,
/// CLOCK_MONOTONIC), warm-ups first: each repeat's time is the sum of its
/// drains.
fn drain_repeats(
    cfg: &Config,
    rounds: u64,
    mut fill: impl FnMut() -> Result<(), PacketError>,
    mut drain: impl FnMut() -> Result<(), PacketError>,
) -> Result<(Vec<u64>, Option<linerate_core::energy::Energy>), PacketError> {
    let mut repeat = || -> Result<u64, PacketError> {
        let mut total = 0;
        for _ in 0..rounds {
            fill()?;
            let t0 = monotonic_ns();
            drain()?;
            total += monotonic_ns().saturating_sub(t0);
        }
        Ok(total)
    };
    for _ in 0..cfg.warmups {
        repeat()?;
    }
    let repeat_ns = (0..cfg.repeats)
        .map(|_| repeat())
        .collect::<Result<_, _>>()?;
    Ok((repeat_ns, None))
}
