//! Timestamping as the rest of linerate sees it: which source and clock a
//! stamp came from, and what a socket or device can do.

use std::io;
use std::os::fd::RawFd;

use crate::sys::timestamping as ts;

pub(crate) use crate::sys::timestamping::{RxMeta, TxKind, TxStamp};

/// The clock of application stamps and of Linux software timestamps.
pub const CLOCK_NAME: &str = "CLOCK_REALTIME";

/// Now, in ns of CLOCK_REALTIME: the clock the kernel's software stamps use,
/// so application and kernel stamps of one host can be subtracted.
pub use crate::sys::clock::realtime_ns;

/// The stamps a socket asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// No kernel stamps at all (application stamps only).
    Nothing,
    /// Receive and driver transmit stamps (a reflector: its stages need no
    /// scheduler stamp, and every stamp costs a clone on the reply's path).
    RxSnd,
    /// Receive stamps; transmit stamps only for the datagrams sent with
    /// [`send_stamped`] or [`send_stamped_all`] or the writes made with
    /// [`write_stamped`] (an end that stamps a sample of its exchanges).
    RxTxOnRequest,
    /// Receive, scheduler and driver transmit stamps (datagrams).
    RxTx,
    /// As `RxTx`, plus TCP acknowledgement stamps.
    RxTxAck,
}

/// Enables software timestamping on `fd`.
pub(crate) fn enable(fd: RawFd, want: Want) -> io::Result<()> {
    let rx = ts::SOF_TIMESTAMPING_SOFTWARE | ts::SOF_TIMESTAMPING_RX_SOFTWARE;
    let tx = ts::SOF_TIMESTAMPING_TX_SOFTWARE
        | ts::SOF_TIMESTAMPING_TX_SCHED
        | ts::SOF_TIMESTAMPING_OPT_ID
        | ts::SOF_TIMESTAMPING_OPT_TSONLY;
    let flags = match want {
        Want::Nothing => 0,
        Want::RxSnd => rx | (tx & !ts::SOF_TIMESTAMPING_TX_SCHED),
        Want::RxTxOnRequest => rx | ts::SOF_TIMESTAMPING_OPT_ID | ts::SOF_TIMESTAMPING_OPT_TSONLY,
        Want::RxTx => rx | tx,
        Want::RxTxAck => rx | tx | ts::SOF_TIMESTAMPING_TX_ACK,
    };
    ts::enable(fd, flags)
}

/// Sends one datagram asking for its driver transmit stamp (SCM_TSTAMP_SND)
/// alone, on a socket enabled with [`Want::RxTxOnRequest`]: the stamp comes
/// back on the error queue with the next OPT_ID key of the stamped sends.
pub(crate) fn send_stamped(fd: RawFd, buf: &[u8], to: std::net::SocketAddr) -> io::Result<usize> {
    ts::send_stamped(fd, buf, Some(to), ts::SOF_TIMESTAMPING_TX_SOFTWARE)
}

/// Sends one datagram (or raw ICMP message) to `to` asking for its
/// scheduler and driver transmit stamps (SCM_TSTAMP_SCHED and _SND), on a
/// socket enabled with [`Want::RxTxOnRequest`]: a client's stamped exchange.
pub(crate) fn send_stamped_all(
    fd: RawFd,
    buf: &[u8],
    to: std::net::SocketAddr,
) -> io::Result<usize> {
    ts::send_stamped(
        fd,
        buf,
        Some(to),
        ts::SOF_TIMESTAMPING_TX_SCHED | ts::SOF_TIMESTAMPING_TX_SOFTWARE,
    )
}

/// Turns on kernel software receive stamps for `sock`, for
/// [`recv_stamped`].
pub fn enable_rx_stamps(sock: &std::net::UdpSocket) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    ts::enable(
        sock.as_raw_fd(),
        ts::SOF_TIMESTAMPING_SOFTWARE | ts::SOF_TIMESTAMPING_RX_SOFTWARE,
    )
}

/// Receives one datagram on `sock` (blocking, within its read timeout) with
/// the kernel's software receive stamp, ns of [`CLOCK_NAME`]: when the
/// datagram reached the socket, whatever the receiving thread's scheduling
/// (None: no stamp came; see [`enable_rx_stamps`]). Returns its length.
pub fn recv_stamped(
    sock: &std::net::UdpSocket,
    buf: &mut [u8],
) -> io::Result<(usize, Option<u64>)> {
    use std::os::fd::AsRawFd;
    let m = ts::recv(sock.as_raw_fd(), buf, 0)?;
    Ok((m.len, (m.software_ns != 0).then_some(m.software_ns)))
}

/// Writes `buf` on a TCP stream socket enabled with [`Want::RxTxOnRequest`],
/// asking for the transmit stamps of this write alone: the driver's
/// (SCM_TSTAMP_SND), and with `all` the scheduler's and the peer's
/// acknowledgement too (a client's stamped exchange; a reflector wants the
/// driver stamp only). The OPT_ID key of each stamp is the offset of the
/// write's last byte, as with per-socket stamping. Returns the bytes written.
pub(crate) fn write_stamped(fd: RawFd, buf: &[u8], all: bool) -> io::Result<usize> {
    let mut flags = ts::SOF_TIMESTAMPING_TX_SOFTWARE;
    if all {
        flags |= ts::SOF_TIMESTAMPING_TX_SCHED | ts::SOF_TIMESTAMPING_TX_ACK;
    }
    ts::send_stamped(fd, buf, None, flags)
}

/// What a network device can timestamp, from ETHTOOL_GET_TS_INFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceStamping {
    /// Software receive stamps.
    pub software_rx: bool,
    /// Software transmit stamps.
    pub software_tx: bool,
    /// Hardware receive and transmit stamps with a raw hardware clock.
    pub hardware: bool,
    /// PTP hardware clock index, if the device has one.
    pub phc_index: Option<u32>,
}

/// Asks the driver of `iface` (in the calling thread's namespace) what it can
/// stamp. Never assume hardware stamps without this: the kernel accepts the
/// hardware flags silently on devices that have none.
pub fn device_stamping(iface: &str) -> io::Result<DeviceStamping> {
    let info = ts::ts_info(iface)?;
    let has = |f: u32| info.so_timestamping & f != 0;
    Ok(DeviceStamping {
        software_rx: has(ts::SOF_TIMESTAMPING_RX_SOFTWARE),
        software_tx: has(ts::SOF_TIMESTAMPING_TX_SOFTWARE),
        hardware: has(ts::SOF_TIMESTAMPING_RAW_HARDWARE)
            && has(ts::SOF_TIMESTAMPING_TX_HARDWARE)
            && has(ts::SOF_TIMESTAMPING_RX_HARDWARE),
        phc_index: u32::try_from(info.phc_index).ok(),
    })
}

/// The interface that would carry traffic to `target` from this thread's
/// namespace (the one owning the local address the kernel picks), if known.
pub fn egress_interface(target: std::net::IpAddr) -> Option<String> {
    let bind: std::net::SocketAddr = if target.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let s = std::net::UdpSocket::bind(bind).ok()?;
    s.connect((target, 9)).ok()?;
    let local = s.local_addr().ok()?.ip();
    crate::sys::ifaddrs::interface_with_addr(local)
        .ok()
        .flatten()
}

/// This host's boot id: two ends with the same boot id share CLOCK_REALTIME,
/// so one-way delays between them are meaningful.
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_stamps_in_software_only() {
        let d = device_stamping("lo").expect("lo answers ETHTOOL_GET_TS_INFO");
        assert!(!d.hardware);
        assert_eq!(d.phc_index, None);
        assert!(device_stamping("lr-no-such-if0").is_err());
    }

    #[test]
    fn clock_and_boot_id() {
        assert!(realtime_ns() > 1_600_000_000_000_000_000);
        assert_eq!(boot_id().map(|b| b.len()), Some(36));
    }
}
