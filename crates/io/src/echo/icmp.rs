//! ICMP echo (ping) with kernel timestamps: the responder is the peer's
//! kernel, so only client-side stages exist, and reports say so.
//!
//! Uses a raw socket (CAP_NET_RAW): ping sockets are off by default
//! (`net.ipv4.ping_group_range = 1 0`). Each request carries linerate's
//! 16-byte echo header after the ICMP header so replies are matched by a
//! 64-bit sequence number, not ICMP's 16-bit one.
//!
//! With kernel stamps, one request in `stamp_every` is sent with a
//! per-message `SO_TIMESTAMPING` control message asking for its scheduler
//! and driver stamps (read from the error queue before the next send); the
//! others are plain `sendto`s with no skb clone and no error-queue read.
//! Every reply carries its receive stamp (the socket's RX_SOFTWARE, which
//! cannot be chosen per message), as ping's `SO_TIMESTAMP` does.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::time::{Duration, Instant};

use linerate_core::latency::ClientStamps;
use linerate_core::procedure::pingpong::{Action, PingPong, ReplyVerdict};
use linerate_core::wire::echo;
use linerate_core::wire::icmp::{self, Family};

use super::udp::warm_up_stamps;
use super::{sock_err, ClientConfig, ClientRun, EchoIoError, Exchange};
use crate::stamps::{self, realtime_ns, TxStamp, Want};
use crate::sys::{sock, timestamping};

/// Runs ICMP echo requests against `cfg.target` (its port is ignored).
pub fn run_icmp_client(cfg: &ClientConfig) -> Result<ClientRun, EchoIoError> {
    let v6 = cfg.target.is_ipv6();
    let family = Family::of(cfg.target.ip());
    let payload = cfg.size.max(echo::HEADER_LEN);
    if payload > 65_000 {
        return Err(EchoIoError::Protocol(format!(
            "ICMP payload {payload} too large"
        )));
    }
    let fd: OwnedFd = sock::icmp_raw_socket(v6)
        .map_err(sock_err("raw ICMP socket (needs root or CAP_NET_RAW)"))?;
    let raw = fd.as_raw_fd();
    let every = if cfg.kernel_stamps {
        cfg.stamp_every.max(1)
    } else {
        1
    };
    let want = match (cfg.kernel_stamps, every) {
        (false, _) => Want::Nothing,
        (true, 1) => Want::RxTx,
        (true, _) => Want::RxTxOnRequest,
    };
    stamps::enable(raw, want).map_err(sock_err("setsockopt SO_TIMESTAMPING"))?;
    warm_up_stamps();
    // One identifier per client, so that two clients of one process (its
    // tests run in parallel) never take each other's replies.
    static CLIENTS: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let nth = CLIENTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let ident = (std::process::id() as u16) ^ 0x4c52 ^ nth.wrapping_mul(0x9e37);
    let target = SocketAddr::new(cfg.target.ip(), 0);
    let mut req = vec![0u8; icmp::HEADER_LEN + payload];
    let mut buf = vec![0u8; 65_536];
    let mut pp = PingPong::new(cfg.schedule);
    let mono0 = Instant::now();
    let now = || u64::try_from(mono0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    // seq → (application send stamp, stamped).
    let mut sent: HashMap<u64, (u64, bool)> = HashMap::new();
    let mut id_to_seq: HashMap<u32, u64> = HashMap::new();
    let mut next_id = 0u32;
    let mut tx: Vec<TxStamp> = Vec::new();
    let mut run = ClientRun {
        stamp_every: every,
        ..ClientRun::default()
    };
    // Transmit stamps of a stamped request wait on the error queue.
    let mut owed = false;
    let strict = cfg.schedule.max_in_flight <= 1;
    let mut timeout_ms = 0u128;
    loop {
        match pp.poll(now()) {
            Action::Send { seq } => {
                // The previous stamped request's stamps, collected before
                // this send so the syscall falls in no measured interval.
                if owed {
                    run.collect_tx_stamps(raw, &mut tx)?;
                    owed = false;
                }
                let stamped = cfg.kernel_stamps && seq.is_multiple_of(u64::from(every));
                // The kernel computes ICMPv6 checksums (RFC 3542 §3.1).
                icmp::build_linerate_request(&mut req, family, ident, seq)
                    .map_err(|e| EchoIoError::Protocol(e.to_string()))?;
                let app_send = realtime_ns();
                let sent_now = if stamped && every > 1 {
                    stamps::send_stamped_all(raw, &req, target)
                } else {
                    sock::send_to(raw, &req, target)
                };
                match sent_now {
                    Ok(_) => {
                        if run.recording() {
                            sent.insert(seq, (app_send, stamped));
                        }
                        if stamped {
                            // OPT_ID keys count the stamped sends only.
                            if run.recording() {
                                id_to_seq.insert(next_id, seq);
                            }
                            next_id = next_id.wrapping_add(1);
                            owed = true;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(sock_err(format!("sendto {}", cfg.target.ip()))(e)),
                }
                pp.on_sent(now(), seq);
            }
            Action::Done => break,
            Action::Wait => {
                let t = now();
                let wait = Duration::from_nanos(pp.next_wakeup(t).unwrap_or(t).saturating_sub(t));
                if pp.in_flight() == 0 {
                    // Nothing to wait for but the next send slot.
                    std::thread::sleep(wait);
                    continue;
                }
                // Blocking: sleep in the first receive itself, so a reply
                // wakes the thread straight into recvmsg (its timeout bounds
                // the wait for a lost reply); then take what else is queued
                // without waiting. Strict ping-pong stops at its reply.
                let mut flags = if cfg.spin {
                    libc::MSG_DONTWAIT
                } else {
                    let ms = wait.as_millis().max(1);
                    if ms != timeout_ms {
                        sock::set_timeout(
                            &fd,
                            libc::SO_RCVTIMEO,
                            Some(Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))),
                        )
                        .map_err(sock_err("setsockopt SO_RCVTIMEO"))?;
                        timeout_ms = ms;
                    }
                    0
                };
                loop {
                    let meta = match timestamping::recv(raw, &mut buf, flags) {
                        Ok(m) => m,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(sock_err("recvmsg")(e)),
                    };
                    flags = libc::MSG_DONTWAIT;
                    let app_recv = realtime_ns();
                    let len = meta.len.min(buf.len());
                    let Ok(p) = icmp::linerate_reply(&buf[..len], family, ident) else {
                        continue;
                    };
                    let seq = p.seq();
                    if pp.on_reply(now(), seq) != ReplyVerdict::Fresh {
                        continue;
                    }
                    let Some((app_send, stamped)) = sent.remove(&seq) else {
                        // Sent after the recording limit: counted only.
                        run.unrecorded += 1;
                        continue;
                    };
                    run.exchanges.push(Exchange {
                        seq,
                        client: ClientStamps {
                            app_send_ns: app_send,
                            rx_kernel_ns: (meta.software_ns != 0).then_some(meta.software_ns),
                            app_recv_ns: app_recv,
                            ..ClientStamps::default()
                        },
                        inline: None,
                        dissected: stamped || !cfg.kernel_stamps,
                    });
                    if strict {
                        break;
                    }
                }
            }
        }
    }
    run.finish(raw, mono0, pp.counts(), tx, |id| {
        id_to_seq.get(&id).copied()
    })
}
