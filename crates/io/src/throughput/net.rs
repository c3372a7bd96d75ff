//! Sockets of a throughput session, with their options, and the typed
//! errors of everything the kernel may refuse.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use linerate_core::throughput::model::ThroughputParams;

use crate::sys::sock;

/// A kernel facility or option that failed, named.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// A socket option the kernel refused.
    #[error("the kernel refused {option}: {error}")]
    Option {
        /// The option, e.g. `TCP_CONGESTION=bbr`.
        option: String,
        /// errno.
        error: io::Error,
    },
    /// A syscall that failed.
    #[error("{call} failed: {error}")]
    Call {
        /// What was called, with context.
        call: String,
        /// errno.
        error: io::Error,
    },
}

impl NetError {
    pub(crate) fn call(call: impl Into<String>, source: io::Error) -> Self {
        Self::Call {
            call: call.into(),
            error: source,
        }
    }
}

fn opt(fd: &impl AsRawFd, level: i32, name: i32, v: i32, what: &str) -> Result<(), NetError> {
    sock::set_int(fd, level, name, v).map_err(|error| NetError::Option {
        option: what.to_string(),
        error,
    })
}

/// Applies the options of `p` that belong on every data socket.
pub(crate) fn apply_common(fd: &impl AsRawFd, p: &ThroughputParams) -> Result<(), NetError> {
    if let Some(w) = p.window_bytes {
        let w = i32::try_from(w).unwrap_or(i32::MAX);
        opt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            w,
            &format!("SO_SNDBUF={w}"),
        )?;
        opt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            w,
            &format!("SO_RCVBUF={w}"),
        )?;
    }
    Ok(())
}

/// Applies the TCP options of `p` (before connect where they must be).
pub(crate) fn apply_tcp(
    fd: &impl AsRawFd,
    p: &ThroughputParams,
    pre_connect: bool,
) -> Result<(), NetError> {
    apply_common(fd, p)?;
    if p.nodelay {
        opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1, "TCP_NODELAY")?;
    }
    if let Some(cc) = &p.congestion {
        sock::set_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, cc.as_bytes()).map_err(
            |error| NetError::Option {
                option: format!(
                    "TCP_CONGESTION={cc} (see /proc/sys/net/ipv4/tcp_available_congestion_control)"
                ),
                error,
            },
        )?;
    }
    if pre_connect {
        if let Some(mss) = p.mss_bytes {
            let mss = i32::try_from(mss).unwrap_or(i32::MAX);
            opt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_MAXSEG,
                mss,
                &format!("TCP_MAXSEG={mss}"),
            )?;
        }
    }
    Ok(())
}

/// The MSS in use (TCP_MAXSEG read back) and the retransmitted segments
/// (TCP_INFO tcpi_total_retrans).
pub(crate) fn tcp_facts(fd: &impl AsRawFd) -> (Option<u32>, Option<u64>) {
    let mss = sock::get_int(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG)
        .ok()
        .and_then(|v| u32::try_from(v).ok());
    let retrans = sock::tcp_info(fd).ok().map(|i| u64::from(i.total_retrans));
    (mss, retrans)
}

/// Waits until everything written on a TCP socket has been sent and
/// acknowledged (TCP_INFO: nothing unsent, nothing unacknowledged), at most
/// `limit`, looking every millisecond; false on timeout, on an error, when
/// the connection is gone (reset: TCP_CLOSE), or when `stop` is set.
pub(crate) fn wait_all_acked(fd: &impl AsRawFd, limit: Duration, stop: &AtomicBool) -> bool {
    /// TCP_CLOSE in include/net/tcp_states.h.
    const TCP_CLOSE: u8 = 7;
    let until = sock::monotonic_ns() + u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX);
    loop {
        match sock::tcp_info(fd) {
            Ok(i) if i.unacked == 0 && i.notsent_bytes == Some(0) => return true,
            Ok(i) if i.notsent_bytes.is_none() || i.state == TCP_CLOSE => return false,
            Ok(_) => {}
            Err(_) => return false,
        }
        if stop.load(Ordering::Relaxed) || sock::monotonic_ns() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Data segments this socket has sent (`out`) or received so far, as the
/// kernel counts them (TCP_INFO tcpi_data_segs_out / _in: one per MSS-sized
/// segment, a TSO/GSO super-packet counted as the segments it stands for).
pub(crate) fn tcp_data_segs(fd: &impl AsRawFd, out: bool) -> Option<u32> {
    let i = sock::tcp_info(fd).ok()?;
    if out {
        i.data_segs_out
    } else {
        i.data_segs_in
    }
}

fn domain(ip: &IpAddr) -> i32 {
    match ip {
        IpAddr::V4(_) => libc::AF_INET,
        IpAddr::V6(_) => libc::AF_INET6,
    }
}

/// A TCP connection to `addr` with the options of `p` set before connect.
pub fn tcp_connect(
    addr: SocketAddr,
    p: Option<&ThroughputParams>,
    timeout: Duration,
) -> Result<TcpStream, NetError> {
    let fd = sock::socket(domain(&addr.ip()), libc::SOCK_STREAM)
        .map_err(|e| NetError::call("socket(SOCK_STREAM)", e))?;
    if let Some(p) = p {
        apply_tcp(&fd, p, true)?;
    }
    sock::connect(&fd, &addr, timeout)
        .map_err(|e| NetError::call(format!("connect to {addr}"), e))?;
    Ok(TcpStream::from(fd))
}

/// Receive buffer a UDP socket asks for when `--window` is not given:
/// with the default 208 KiB only ~270 small datagrams fit (each costs a
/// whole skb), about 1 ms at 250 k packets/s, less than one cross-CPU
/// wake-up of the receiver on a busy VM (a busy 2-vCPU VM: scheduling delays of milliseconds are common), so the
/// measurement would be of the scheduler, not the stack.
pub const UDP_RCVBUF_BYTES: i32 = 16 << 20;

/// A UDP socket bound to `ip`, ephemeral port, with the options of `p`.
/// Without `--window`, asks for a [`UDP_RCVBUF_BYTES`] receive buffer
/// (SO_RCVBUFFORCE when privileged, else SO_RCVBUF capped by rmem_max).
pub fn udp_bind(ip: IpAddr, p: &ThroughputParams) -> Result<UdpSocket, NetError> {
    let s = UdpSocket::bind(SocketAddr::new(ip, 0))
        .map_err(|e| NetError::call(format!("bind UDP on {ip}"), e))?;
    if p.window_bytes.is_none() {
        let v = UDP_RCVBUF_BYTES;
        if sock::set_int(&s, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, v).is_err() {
            let _ = sock::set_int(&s, libc::SOL_SOCKET, libc::SO_RCVBUF, v);
        }
    }
    apply_common(&s, p)?;
    if p.no_udp_checksum {
        crate::sys::timestamping::set_no_check(s.as_raw_fd(), true).map_err(|error| {
            NetError::Option {
                option: "SO_NO_CHECK".into(),
                error,
            }
        })?;
    }
    Ok(s)
}

/// The receive buffer the kernel granted, bytes (SO_RCVBUF read back: the
/// kernel doubles the asked value for its bookkeeping).
pub(crate) fn rcvbuf(fd: &impl AsRawFd) -> Option<u32> {
    sock::get_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF)
        .ok()
        .and_then(|v| u32::try_from(v).ok())
}

/// Sets a TCP receiver's low-water mark (SO_RCVLOWAT) and reads back what
/// the kernel keeps (at most half of `tcp_rmem[2]`, or of a fixed receive
/// buffer). A sleeping receiver is then woken once that much is queued (or
/// at the end of the stream, or under memory pressure) rather than for every
/// arriving segment.
pub(crate) fn set_recv_lowat(fd: &impl AsRawFd, bytes: u32) -> Result<u32, NetError> {
    let v = i32::try_from(bytes).unwrap_or(i32::MAX);
    sock::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, v)
        .map_err(|e| NetError::call(format!("SO_RCVLOWAT={bytes}"), e))?;
    let got = sock::get_int(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT)
        .map_err(|e| NetError::call("SO_RCVLOWAT (read back)", e))?;
    Ok(u32::try_from(got).unwrap_or(0))
}

/// Sets receive and send timeouts on a data or control socket.
pub(crate) fn set_timeouts(fd: &impl AsRawFd, t: Duration) -> Result<(), NetError> {
    sock::set_timeout(fd, libc::SO_RCVTIMEO, Some(t))
        .map_err(|e| NetError::call("SO_RCVTIMEO", e))?;
    sock::set_timeout(fd, libc::SO_SNDTIMEO, Some(t)).map_err(|e| NetError::call("SO_SNDTIMEO", e))
}

/// A data socket of either protocol.
#[derive(Debug)]
pub enum DataSock {
    /// A TCP connection.
    Tcp(TcpStream),
    /// A connected UDP socket.
    Udp(UdpSocket),
}

impl DataSock {
    pub(crate) fn fd(&self) -> RawFd {
        match self {
            Self::Tcp(s) => s.as_raw_fd(),
            Self::Udp(s) => s.as_raw_fd(),
        }
    }

    pub(crate) fn is_tcp(&self) -> bool {
        matches!(self, Self::Tcp(_))
    }

    /// The local address the socket is bound to.
    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Self::Tcp(s) => s.local_addr(),
            Self::Udp(s) => s.local_addr(),
        }
    }

    /// The interface that owns the socket's local address (the one its
    /// packets leave by, for a connected socket), if known.
    pub(crate) fn egress_interface(&self) -> Option<String> {
        let ip = self.local_addr().ok()?.ip();
        crate::sys::ifaddrs::interface_with_addr(ip).ok().flatten()
    }
}

/// An interface's tx_packets counter, in the calling thread's network
/// namespace (/proc/thread-self/net/dev: a thread that entered another
/// namespace with setns sees that one's devices, unlike /sys).
pub(crate) fn tx_packets(interface: &str) -> io::Result<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev")?;
    parse_tx_packets(&text, interface).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{interface} is not in /proc/thread-self/net/dev"),
        )
    })
}

/// The transmit packet count of `interface` in /proc/net/dev text: after
/// "name:", 8 receive fields, then transmit bytes and packets.
fn parse_tx_packets(text: &str, interface: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, counters) = line.split_once(':')?;
        if name.trim() != interface {
            return None;
        }
        counters.split_whitespace().nth(9)?.parse().ok()
    })
}

impl AsRawFd for DataSock {
    fn as_raw_fd(&self) -> RawFd {
        self.fd()
    }
}

/// A memfd with `bytes` (for the sendfile path).
pub(crate) fn memfd(bytes: &[u8]) -> Result<OwnedFd, NetError> {
    sock::memfd_with("linerate-payload", bytes).map_err(|e| NetError::call("memfd_create", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_packets_of_proc_net_dev() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n \
    lo:   12345      67    0    0    0     0          0         0    12345      67    0    0    0     0       0          0\n\
lr-x-a: 9876543  111111    0    0    0     0          0         0 55555555  222222    0    0    0     0       0          0\n";
        assert_eq!(parse_tx_packets(text, "lr-x-a"), Some(222_222));
        assert_eq!(parse_tx_packets(text, "lo"), Some(67));
        assert_eq!(parse_tx_packets(text, "lr-x"), None);
        assert_eq!(parse_tx_packets("lo: 1 2 3", "lo"), None);
        // The live file has at least the loopback device.
        assert!(tx_packets("lo").is_ok());
    }
}
