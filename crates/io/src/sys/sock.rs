//! Socket syscalls the throughput engine needs beyond `std::net`: options,
//! flagged send/recv, sendmmsg/recvmmsg, UDP GSO/GRO control messages, the
//! MSG_ZEROCOPY error queue, sendfile, memfd and per-thread rusage (the
//! monotonic clock is in `clock`).

use std::io;
use std::mem::{size_of, zeroed};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd as _, OwnedFd, RawFd};
use std::time::Duration;

use super::{cmsg, syscall};

/// SO_ZEROCOPY (include/uapi/asm-generic/socket.h).
pub(crate) const SO_ZEROCOPY: libc::c_int = 60;
/// SO_EE_ORIGIN_ZEROCOPY (include/uapi/linux/errqueue.h).
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
/// SO_EE_CODE_ZEROCOPY_COPIED: the kernel fell back to copying.
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

fn socklen<T>() -> libc::socklen_t {
    size_of::<T>() as libc::socklen_t
}

/// A new socket of `domain` (AF_INET/AF_INET6) and `ty` (SOCK_STREAM/DGRAM),
/// close-on-exec.
pub(crate) fn socket(domain: libc::c_int, ty: libc::c_int) -> io::Result<OwnedFd> {
    socket_proto(domain, ty, 0)
}

/// A new socket with an explicit protocol (raw ICMP sockets), close-on-exec.
pub(crate) fn socket_proto(
    domain: libc::c_int,
    ty: libc::c_int,
    proto: libc::c_int,
) -> io::Result<OwnedFd> {
    // SAFETY: socket() takes plain integers and returns a new descriptor we
    // own (checked for -1 by syscall!).
    let fd = syscall!(socket(domain, ty | libc::SOCK_CLOEXEC, proto))?;
    // SAFETY: `fd` was just returned by socket() and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// setsockopt with an int value.
pub(crate) fn set_int(
    fd: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value points to a live c_int of the given length.
    syscall!(setsockopt(
        fd.as_raw_fd(),
        level,
        name,
        (std::ptr::addr_of!(value)).cast(),
        socklen::<libc::c_int>()
    ))?;
    Ok(())
}

/// getsockopt of an int value.
pub(crate) fn get_int(fd: &impl AsRawFd, level: libc::c_int, name: libc::c_int) -> io::Result<i32> {
    let mut value: libc::c_int = 0;
    let mut len = socklen::<libc::c_int>();
    // SAFETY: value and len are live locals; the kernel writes at most len bytes.
    syscall!(getsockopt(
        fd.as_raw_fd(),
        level,
        name,
        (std::ptr::addr_of_mut!(value)).cast(),
        std::ptr::addr_of_mut!(len)
    ))?;
    Ok(value)
}

/// setsockopt with a byte string (TCP_CONGESTION).
pub(crate) fn set_bytes(
    fd: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &[u8],
) -> io::Result<()> {
    // SAFETY: value is a live slice of the given length.
    syscall!(setsockopt(
        fd.as_raw_fd(),
        level,
        name,
        value.as_ptr().cast(),
        value.len() as libc::socklen_t
    ))?;
    Ok(())
}

/// SO_MEMINFO (Linux 4.6+; the asm-generic value, as on x86 and arm).
const SO_MEMINFO: libc::c_int = 55;
/// Entries of the SO_MEMINFO array (SK_MEMINFO_VARS).
const SK_MEMINFO_VARS: usize = 9;

/// Packets the kernel dropped on this socket (`sk_drops`, read with
/// SO_MEMINFO): for UDP mostly a full receive buffer.
pub(crate) fn socket_drops(fd: &impl AsRawFd) -> io::Result<u32> {
    let mut info = [0u32; SK_MEMINFO_VARS];
    let mut len = (size_of::<u32>() * SK_MEMINFO_VARS) as libc::socklen_t;
    // SAFETY: info and len are live locals; the kernel writes at most len bytes.
    syscall!(getsockopt(
        fd.as_raw_fd(),
        libc::SOL_SOCKET,
        SO_MEMINFO,
        info.as_mut_ptr().cast(),
        std::ptr::addr_of_mut!(len)
    ))?;
    let at = libc::SK_MEMINFO_DROPS as usize;
    if (len as usize) < (at + 1) * size_of::<u32>() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "SO_MEMINFO without a drop count",
        ));
    }
    Ok(info[at])
}

/// Bytes queued in a socket's receive buffer and not yet read (SIOCINQ,
/// the same request as FIONREAD).
pub(crate) fn queued_in(fd: &impl AsRawFd) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: n is a live local c_int, which SIOCINQ writes.
    syscall!(ioctl(
        fd.as_raw_fd(),
        libc::FIONREAD,
        std::ptr::addr_of_mut!(n)
    ))?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// The head of the kernel's `struct tcp_info` (include/uapi/linux/tcp.h)
/// up to `tcpi_data_segs_out` (Linux 4.6+); glibc's copy in the libc crate
/// ends before the segment counters.
#[repr(C)]
#[derive(Default)]
struct TcpInfoHead {
    /// state, ca_state, retransmits, probes, backoff, options, wscales, flags.
    bytes: [u8; 8],
    /// rto, ato, snd_mss, rcv_mss, unacked, sacked, lost, retrans, fackets,
    /// last_data_sent, last_ack_sent, last_data_recv, last_ack_recv, pmtu,
    /// rcv_ssthresh, rtt, rttvar, snd_ssthresh, snd_cwnd, advmss,
    /// reordering, rcv_rtt, rcv_space, total_retrans.
    words: [u32; 24],
    /// pacing_rate, max_pacing_rate, bytes_acked, bytes_received.
    longs: [u64; 4],
    /// segs_out, segs_in, notsent_bytes, min_rtt, data_segs_in,
    /// data_segs_out.
    segs: [u32; 6],
}

/// What linerate reads from TCP_INFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TcpInfo {
    /// tcpi_snd_mss.
    pub snd_mss: u32,
    /// tcpi_total_retrans: segments retransmitted.
    pub total_retrans: u32,
    /// tcpi_data_segs_out: data segments sent, retransmissions included
    /// (None before Linux 4.6).
    pub data_segs_out: Option<u32>,
    /// tcpi_data_segs_in: data segments received, duplicates included.
    pub data_segs_in: Option<u32>,
    /// tcpi_state (TCP_ESTABLISHED = 1 … TCP_CLOSE = 7).
    pub state: u8,
    /// tcpi_unacked: segments sent and not yet acknowledged.
    pub unacked: u32,
    /// tcpi_notsent_bytes: bytes queued and not yet sent.
    pub notsent_bytes: Option<u32>,
}

/// Reads TCP_INFO.
pub(crate) fn tcp_info(fd: &impl AsRawFd) -> io::Result<TcpInfo> {
    let mut info = TcpInfoHead::default();
    let mut len = socklen::<TcpInfoHead>();
    // SAFETY: info is a live repr(C) struct of plain integers and len its
    // size; the kernel writes at most len bytes and says how many in len.
    syscall!(getsockopt(
        fd.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_INFO,
        (std::ptr::addr_of_mut!(info)).cast(),
        std::ptr::addr_of_mut!(len)
    ))?;
    let filled = len as usize >= size_of::<TcpInfoHead>();
    Ok(TcpInfo {
        snd_mss: info.words[2],
        total_retrans: info.words[23],
        data_segs_out: filled.then_some(info.segs[5]),
        data_segs_in: filled.then_some(info.segs[4]),
        state: info.bytes[0],
        unacked: info.words[4],
        notsent_bytes: filled.then_some(info.segs[2]),
    })
}

pub(super) fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((std::ptr::addr_of_mut!(ss)).cast(), sin) };
            socklen::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((std::ptr::addr_of_mut!(ss)).cast(), sin6) };
            socklen::<libc::sockaddr_in6>()
        }
    };
    (ss, len)
}

/// bind(2) to `addr` (for sockets that need options set before binding,
/// such as SO_REUSEADDR).
pub(crate) fn bind(fd: &impl AsRawFd, addr: &SocketAddr) -> io::Result<()> {
    let (ss, len) = sockaddr(addr);
    // SAFETY: ss is a live sockaddr_storage holding a valid address of len bytes.
    syscall!(bind(fd.as_raw_fd(), (std::ptr::addr_of!(ss)).cast(), len))?;
    Ok(())
}

/// connect(2), bounded by `timeout` (through SO_SNDTIMEO, which Linux
/// applies to a blocking connect and reports, when it runs out, as
/// EINPROGRESS; it is cleared afterwards).
pub(crate) fn connect(fd: &OwnedFd, addr: &SocketAddr, timeout: Duration) -> io::Result<()> {
    set_timeout(fd, libc::SO_SNDTIMEO, Some(timeout))?;
    let (ss, len) = sockaddr(addr);
    // SAFETY: ss is a live sockaddr_storage holding a valid address of len bytes.
    let r = syscall!(connect(
        fd.as_raw_fd(),
        (std::ptr::addr_of!(ss)).cast(),
        len
    ));
    set_timeout(fd, libc::SO_SNDTIMEO, None)?;
    match r {
        Err(e)
            if e.kind() == io::ErrorKind::WouldBlock
                || e.raw_os_error() == Some(libc::EINPROGRESS) =>
        {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connect timed out after {timeout:?}"),
            ))
        }
        r => r.map(|_| ()),
    }
}

/// SO_RCVTIMEO / SO_SNDTIMEO (`None`: block forever).
pub(crate) fn set_timeout(
    fd: &impl AsRawFd,
    name: libc::c_int,
    t: Option<Duration>,
) -> io::Result<()> {
    let t = t.unwrap_or_default();
    let tv = libc::timeval {
        tv_sec: t.as_secs() as libc::time_t,
        tv_usec: libc::suseconds_t::from(t.subsec_micros() as i32),
    };
    // SAFETY: tv is a live timeval of the given length.
    syscall!(setsockopt(
        fd.as_raw_fd(),
        libc::SOL_SOCKET,
        name,
        (std::ptr::addr_of!(tv)).cast(),
        socklen::<libc::timeval>()
    ))?;
    Ok(())
}

/// send(2) with flags.
pub(crate) fn send(fd: RawFd, buf: &[u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: buf is a live slice; the kernel only reads len bytes.
    let n = syscall!(send(
        fd,
        buf.as_ptr().cast(),
        buf.len(),
        flags | libc::MSG_NOSIGNAL
    ))?;
    Ok(n as usize)
}

/// recv(2) into `buf` with flags; with MSG_TRUNC on UDP returns the
/// datagram's real length (only `buf.len()` bytes are written).
pub(crate) fn recv(fd: RawFd, buf: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: buf is live and writable for buf.len() bytes; the kernel
    // writes at most that many.
    let n = syscall!(recv(fd, buf.as_mut_ptr().cast(), buf.len(), flags))?;
    Ok(n as usize)
}

/// Discards up to `len` bytes of a TCP stream without copying them
/// (recv with MSG_TRUNC and no buffer); returns how many were discarded.
pub(crate) fn tcp_discard(fd: RawFd, len: usize, flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: no user memory is passed: on TCP, MSG_TRUNC discards the data;
    // on any other socket the kernel rejects the NULL buffer with EFAULT
    // (it validates user addresses), so no memory of ours is ever written.
    let n = syscall!(recv(fd, std::ptr::null_mut(), len, libc::MSG_TRUNC | flags))?;
    Ok(n as usize)
}

/// sendmmsg(2): sends `bufs` as datagrams on a connected socket; returns how
/// many went.
pub(crate) fn sendmmsg(fd: RawFd, bufs: &[&[u8]]) -> io::Result<usize> {
    let mut iov: Vec<libc::iovec> = bufs
        .iter()
        .map(|b| libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: mmsghdr is plain old data; all-zero is valid.
    let mut msgs: Vec<libc::mmsghdr> = (0..bufs.len()).map(|_| unsafe { zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: msgs and the iovecs they point to live until the call returns;
    // the kernel only reads the buffers.
    let n = syscall!(sendmmsg(
        fd,
        msgs.as_mut_ptr(),
        msgs.len() as libc::c_uint,
        libc::MSG_NOSIGNAL
    ))?;
    Ok(n as usize)
}

/// recvmmsg(2): fills `bufs`, writes each datagram's length (real length
/// with MSG_TRUNC) to `lens`; returns how many arrived.
pub(crate) fn recvmmsg(
    fd: RawFd,
    bufs: &mut [Vec<u8>],
    lens: &mut [usize],
    flags: libc::c_int,
) -> io::Result<usize> {
    let mut iov: Vec<libc::iovec> = bufs
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: mmsghdr is plain old data; all-zero is valid.
    let mut msgs: Vec<libc::mmsghdr> = (0..bufs.len()).map(|_| unsafe { zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: msgs, iovecs and buffers live until the call returns; the
    // kernel writes at most each iovec's length; no timeout pointer.
    let n = syscall!(recvmmsg(
        fd,
        msgs.as_mut_ptr(),
        msgs.len() as libc::c_uint,
        flags,
        std::ptr::null_mut()
    ))? as usize;
    for (l, m) in lens.iter_mut().zip(msgs.iter()).take(n) {
        *l = m.msg_len as usize;
    }
    Ok(n)
}

/// Control-message room for one u16/int option.
const CMSG_ROOM: usize = 64;

/// sendmsg(2) of one buffer with a UDP_SEGMENT control message: the kernel
/// cuts `buf` into datagrams of `segment` bytes.
pub(crate) fn send_gso(fd: RawFd, buf: &[u8], segment: u16) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut control = cmsg::Buf::<CMSG_ROOM>::new();
    let mut enc = cmsg::Encoder::new(&mut control.0);
    enc.push(libc::SOL_UDP, libc::UDP_SEGMENT, &segment.to_ne_bytes())?;
    let controllen = enc.len();
    // SAFETY: msghdr is plain old data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = std::ptr::addr_of_mut!(iov);
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr();
    msg.msg_controllen = controllen;
    // SAFETY: msg and everything it points to (iov, buf, control) live
    // until the call returns; the kernel only reads them.
    let n = syscall!(sendmsg(fd, std::ptr::addr_of!(msg), libc::MSG_NOSIGNAL))?;
    Ok(n as usize)
}

/// recvmsg(2) of one (possibly GRO-coalesced) buffer: (bytes, segment size
/// from the UDP_GRO control message if the kernel coalesced).
pub(crate) fn recv_gro(
    fd: RawFd,
    buf: &mut [u8],
    flags: libc::c_int,
) -> io::Result<(usize, Option<usize>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = cmsg::Buf::<CMSG_ROOM>::new();
    // SAFETY: msghdr is plain old data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_iov = std::ptr::addr_of_mut!(iov);
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr();
    msg.msg_controllen = CMSG_ROOM;
    // SAFETY: msg, the buffer and the control area live until the call returns.
    let n = syscall!(recvmsg(fd, std::ptr::addr_of_mut!(msg), flags))? as usize;
    // SAFETY: recvmsg filled `control` (alive, not written while the slice
    // lives) and set msg_controllen to the bytes it wrote.
    let seg = cmsg::iter(unsafe { cmsg::control(&msg) })
        .filter(|c| c.is(libc::SOL_UDP, libc::UDP_GRO))
        .filter_map(|c| cmsg::read::<libc::c_int>(c.data))
        .last()
        .and_then(|v| usize::try_from(v).ok().filter(|&s| s > 0));
    Ok((n, seg))
}

/// One MSG_ZEROCOPY completion: sends `lo..=hi` done; `copied` if the
/// kernel fell back to copying.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ZcCompletion {
    pub(crate) lo: u32,
    pub(crate) hi: u32,
    pub(crate) copied: bool,
}

/// Drains the error queue without blocking, returning zero-copy completions.
pub(crate) fn zerocopy_completions(fd: RawFd, out: &mut Vec<ZcCompletion>) -> io::Result<()> {
    loop {
        let mut control = cmsg::Buf::<128>::new();
        // SAFETY: msghdr is plain old data; all-zero is valid.
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_control = control.as_mut_ptr();
        msg.msg_controllen = control.0.len();
        // SAFETY: msg and its control area live until the call returns; no data buffer.
        match syscall!(recvmsg(
            fd,
            std::ptr::addr_of_mut!(msg),
            libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT
        )) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
        // SAFETY: as in recv_gro: recvmsg filled `control`.
        for c in cmsg::iter(unsafe { cmsg::control(&msg) }) {
            if !(c.is(libc::SOL_IP, libc::IP_RECVERR) || c.is(libc::SOL_IPV6, libc::IPV6_RECVERR)) {
                continue;
            }
            let Some(ee) = cmsg::read::<libc::sock_extended_err>(c.data) else {
                continue;
            };
            if ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY && ee.ee_errno == 0 {
                out.push(ZcCompletion {
                    lo: ee.ee_info,
                    hi: ee.ee_data,
                    copied: ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0,
                });
            }
        }
    }
}

/// poll(2) one descriptor for `events`; returns the revents (0 on timeout).
pub(crate) fn poll_one(
    fd: RawFd,
    events: libc::c_short,
    timeout_ms: i32,
) -> io::Result<libc::c_short> {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: p is a live pollfd array of length 1.
    let n = syscall!(poll(std::ptr::addr_of_mut!(p), 1, timeout_ms))?;
    Ok(if n == 0 { 0 } else { p.revents })
}

/// sendfile(2): `count` bytes of `file` from `offset` to socket `sock`.
pub(crate) fn sendfile(
    sock: RawFd,
    file: &OwnedFd,
    offset: u64,
    count: usize,
) -> io::Result<usize> {
    let mut off = offset as libc::off_t;
    // SAFETY: off is a live local the kernel updates; both are open descriptors.
    let n = syscall!(sendfile(
        sock,
        file.as_raw_fd(),
        std::ptr::addr_of_mut!(off),
        count
    ))?;
    Ok(n as usize)
}

/// A memfd holding `bytes` (close-on-exec).
pub(crate) fn memfd_with(name: &str, bytes: &[u8]) -> io::Result<OwnedFd> {
    let cname =
        std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: cname is a valid NUL-terminated string for the call's duration.
    let fd = syscall!(memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC))?;
    // SAFETY: fd was just created and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut written = 0;
    while written < bytes.len() {
        let rest = &bytes[written..];
        // SAFETY: rest is a live slice; write only reads it.
        let n = syscall!(write(fd.as_raw_fd(), rest.as_ptr().cast(), rest.len()))?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        written += n as usize;
    }
    Ok(fd)
}

/// CPU time of the calling thread: (user, system), ns (getrusage RUSAGE_THREAD).
pub(crate) fn thread_cpu_ns() -> io::Result<(u64, u64)> {
    // SAFETY: rusage is plain old data; all-zero is valid.
    let mut ru: libc::rusage = unsafe { zeroed() };
    // SAFETY: ru is a live rusage the kernel fills.
    syscall!(getrusage(libc::RUSAGE_THREAD, std::ptr::addr_of_mut!(ru)))?;
    let ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1000;
    Ok((ns(ru.ru_utime), ns(ru.ru_stime)))
}

pub(crate) use super::clock::monotonic_ns;

/// Waits until `fd` is readable or `timeout` passes; `true` if readable.
pub(crate) fn poll_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // Round a sub-millisecond wait up so a short timeout does not spin.
    let ms = if ms == 0 && !timeout.is_zero() { 1 } else { ms };
    loop {
        match poll_one(fd, libc::POLLIN, ms) {
            Ok(revents) => return Ok(revents != 0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Waits until one of `fds` (at most 4) is readable or `timeout` passes;
/// true if one is.
pub(crate) fn poll_readable_any(fds: &[RawFd], timeout: Duration) -> io::Result<bool> {
    let mut p = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; 4];
    let n = fds.len().min(p.len());
    for (slot, &fd) in p.iter_mut().zip(fds) {
        slot.fd = fd;
    }
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    let ms = if ms == 0 && !timeout.is_zero() { 1 } else { ms };
    loop {
        // SAFETY: p is a live pollfd array and n ≤ its length.
        match syscall!(poll(p.as_mut_ptr(), n as libc::nfds_t, ms)) {
            Ok(k) => return Ok(k > 0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A raw ICMP (v4) or ICMPv6 socket; needs CAP_NET_RAW.
pub(crate) fn icmp_raw_socket(v6: bool) -> io::Result<OwnedFd> {
    if v6 {
        socket_proto(libc::AF_INET6, libc::SOCK_RAW, libc::IPPROTO_ICMPV6)
    } else {
        socket_proto(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP)
    }
}

/// sendto(2) of `buf` to `to` on any datagram or raw socket.
pub(crate) fn send_to(fd: RawFd, buf: &[u8], to: SocketAddr) -> io::Result<usize> {
    let (ss, len) = sockaddr(&to);
    loop {
        // SAFETY: buf and ss are live for the call and their lengths are given.
        match syscall!(sendto(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            0,
            std::ptr::addr_of!(ss).cast(),
            len,
        )) {
            Ok(n) => return Ok(n as usize),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// True when a socket call gave up at its timeout or would block
/// (`EAGAIN`/`EWOULDBLOCK`, or `SO_RCVTIMEO`/`SO_SNDTIMEO` expiring): try
/// again later.
pub(crate) fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}
