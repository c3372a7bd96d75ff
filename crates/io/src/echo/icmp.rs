//! ICMP echo (ping) with kernel timestamps: the responder is the peer's
//! kernel, so only client-side stages exist, and reports say so.
//!
//! Uses a raw socket (CAP_NET_RAW): ping sockets are off by default
//! (`net.ipv4.ping_group_range = 1 0`). Each request carries linerate's
//! 16-byte echo header after the ICMP header so replies are matched by a
//! 64-bit sequence number, not ICMP's 16-bit one.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::time::{Duration, Instant};

use linerate_core::latency::ClientStamps;
use linerate_core::procedure::pingpong::{Action, PingPong, ReplyVerdict};
use linerate_core::wire::echo::{self, Packet};
use linerate_core::wire::testframe::internet_checksum as checksum;

use super::udp::warm_up_stamps;
use super::{sock_err, ClientConfig, ClientRun, EchoIoError, Exchange};
use crate::stamps::{self, realtime_ns, TxStamp, Want};
use crate::sys::{sock, timestamping};

const ICMP_HEADER: usize = 8;
const ECHO_REQUEST_V4: u8 = 8;
const ECHO_REPLY_V4: u8 = 0;
const ECHO_REQUEST_V6: u8 = 128;
const ECHO_REPLY_V6: u8 = 129;

/// The ICMP message inside what a raw socket returned (IPv4 raw sockets
/// deliver the IP header too; IPv6 ones do not).
fn icmp_part(buf: &[u8], v6: bool) -> Option<&[u8]> {
    if v6 {
        return Some(buf);
    }
    let ihl = usize::from(buf.first()? & 0x0f) * 4;
    if ihl < 20 {
        return None;
    }
    buf.get(ihl..)
}

/// Runs ICMP echo requests against `cfg.target` (its port is ignored).
pub fn run_icmp_client(cfg: &ClientConfig) -> Result<ClientRun, EchoIoError> {
    let v6 = cfg.target.is_ipv6();
    let payload = cfg.size.max(echo::HEADER_LEN);
    if payload > 65_000 {
        return Err(EchoIoError::Protocol(format!(
            "ICMP payload {payload} too large"
        )));
    }
    let fd: OwnedFd = sock::icmp_raw_socket(v6)
        .map_err(sock_err("raw ICMP socket (needs root or CAP_NET_RAW)"))?;
    let raw = fd.as_raw_fd();
    let want = if cfg.kernel_stamps {
        Want::RxTx
    } else {
        Want::Nothing
    };
    stamps::enable(raw, want).map_err(sock_err("setsockopt SO_TIMESTAMPING"))?;
    warm_up_stamps();
    let ident = (std::process::id() as u16) ^ 0x4c52;
    let target = SocketAddr::new(cfg.target.ip(), 0);
    let mut req = vec![0u8; ICMP_HEADER + payload];
    let mut buf = vec![0u8; 65_536];
    let mut pp = PingPong::new(cfg.schedule);
    let mono0 = Instant::now();
    let now = || u64::try_from(mono0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let mut sent: HashMap<u64, u64> = HashMap::new();
    let mut id_to_seq: HashMap<u32, u64> = HashMap::new();
    let mut next_id = 0u32;
    let mut tx: Vec<TxStamp> = Vec::new();
    let mut run = ClientRun::default();
    loop {
        match pp.poll(now()) {
            Action::Send { seq } => {
                // The previous request's stamps, collected before this send
                // so the syscall falls in no measured interval.
                run.collect_tx_stamps(raw, &mut tx)?;
                req[0] = if v6 { ECHO_REQUEST_V6 } else { ECHO_REQUEST_V4 };
                req[1] = 0;
                req[2..4].copy_from_slice(&[0, 0]);
                req[4..6].copy_from_slice(&ident.to_be_bytes());
                req[6..8].copy_from_slice(&(seq as u16).to_be_bytes());
                Packet::new_unchecked(&mut req[ICMP_HEADER..]).emit_request(0, seq);
                if !v6 {
                    // The kernel computes ICMPv6 checksums (RFC 3542 §3.1).
                    let c = checksum(&req);
                    req[2..4].copy_from_slice(&c.to_be_bytes());
                }
                let app_send = realtime_ns();
                match sock::send_to(raw, &req, target) {
                    Ok(_) => {
                        if run.recording() {
                            sent.insert(seq, app_send);
                            id_to_seq.insert(next_id, seq);
                        }
                        next_id = next_id.wrapping_add(1);
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
                if !cfg.spin && !sock::poll_readable(raw, wait).map_err(sock_err("poll"))? {
                    continue;
                }
                loop {
                    let meta = match timestamping::recv(raw, &mut buf, libc::MSG_DONTWAIT) {
                        Ok(m) => m,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(sock_err("recvmsg")(e)),
                    };
                    let app_recv = realtime_ns();
                    let len = meta.len.min(buf.len());
                    let Some(icmp) = icmp_part(&buf[..len], v6) else {
                        continue;
                    };
                    let reply_type = if v6 { ECHO_REPLY_V6 } else { ECHO_REPLY_V4 };
                    if icmp.len() < ICMP_HEADER + echo::HEADER_LEN
                        || icmp[0] != reply_type
                        || icmp[4..6] != ident.to_be_bytes()
                    {
                        continue;
                    }
                    let Ok(p) = Packet::new_checked(&icmp[ICMP_HEADER..]) else {
                        continue;
                    };
                    let seq = p.seq();
                    if pp.on_reply(now(), seq) != ReplyVerdict::Fresh {
                        continue;
                    }
                    let Some(app_send) = sent.remove(&seq) else {
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
                        dissected: true,
                    });
                }
            }
        }
    }
    run.finish(raw, mono0, pp.counts(), tx, |id| {
        id_to_seq.get(&id).copied()
    })
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn echo_request_checksum_verifies() {
        let mut m = vec![8, 0, 0, 0, 1, 2, 0, 1, 9, 9, 9];
        let c = checksum(&m);
        m[2..4].copy_from_slice(&c.to_be_bytes());
        assert_eq!(checksum(&m), 0, "a message with its checksum sums to zero");
    }

    #[test]
    fn ipv4_header_is_skipped() {
        let mut b = vec![0x45u8; 20];
        b.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(icmp_part(&b, false).map(<[u8]>::len), Some(4));
        assert_eq!(icmp_part(&[0x41], false), None);
        assert_eq!(icmp_part(&[], false), None);
        assert_eq!(icmp_part(&[1, 2], true), Some(&[1u8, 2][..]));
    }
}
