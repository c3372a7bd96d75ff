//! AF_PACKET raw sockets (packet(7)): open, bind, options, `sendmmsg` and
//! `recvmmsg` batches, interface index and MAC, and the monotonic clock.

use std::ffi::CString;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

use super::syscall;

/// `SOL_PACKET` (linux/socket.h).
const SOL_PACKET: libc::c_int = 263;
/// `PACKET_QDISC_BYPASS` (linux/if_packet.h): frames skip the qdisc layer.
pub(crate) const PACKET_QDISC_BYPASS: libc::c_int = 20;
/// `PACKET_IGNORE_OUTGOING` (linux/if_packet.h, Linux 4.20).
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// `PACKET_STATISTICS` (linux/if_packet.h).
const PACKET_STATISTICS: libc::c_int = 6;
/// `PACKET_OUTGOING`: `sll_pkttype` of a frame this host sent.
pub(crate) const PACKET_OUTGOING: u8 = 4;
/// `ETH_P_IP`.
pub(crate) const ETH_P_IP: u16 = 0x0800;
/// `SIOCGIFHWADDR` (linux/sockios.h).
const SIOCGIFHWADDR: libc::c_ulong = 0x8927;
/// `SIOCGIFMTU` (linux/sockios.h).
const SIOCGIFMTU: libc::c_ulong = 0x8921;
/// Largest batch of one `sendmmsg`/`recvmmsg` call.
pub(crate) const MAX_BATCH: usize = 64;

/// An AF_PACKET SOCK_RAW socket.
#[derive(Debug)]
pub(crate) struct PacketSocket {
    fd: OwnedFd,
    addr: libc::sockaddr_ll,
}

fn sockaddr_ll(ifindex: u32, protocol: u16) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is a plain C struct of integers and a byte array;
    // all-zero is a valid value.
    let mut a: libc::sockaddr_ll = unsafe { mem::zeroed() };
    a.sll_family = libc::AF_PACKET as u16;
    a.sll_protocol = protocol.to_be();
    a.sll_ifindex = ifindex as i32;
    a.sll_halen = 6;
    a
}

impl PacketSocket {
    /// A socket on `ifindex` that receives frames of EtherType `protocol`
    /// (0: receives nothing, for a pure sender).
    pub(crate) fn open(ifindex: u32, protocol: u16) -> io::Result<Self> {
        // SAFETY: socket(2) with constant arguments; the returned descriptor is
        // owned by the OwnedFd right below.
        let fd = syscall!(socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            i32::from(protocol.to_be())
        ))?;
        // SAFETY: `fd` was just returned by socket(2) and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let addr = sockaddr_ll(ifindex, protocol);
        // SAFETY: `addr` is a valid sockaddr_ll and the length says so.
        syscall!(bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t
        ))?;
        let mut send_addr = addr;
        send_addr.sll_protocol = ETH_P_IP.to_be();
        Ok(Self {
            fd,
            addr: send_addr,
        })
    }

    fn set_int(&self, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
        // SAFETY: the option value is a c_int that lives across the call, and
        // its size is passed.
        syscall!(setsockopt(
            self.fd.as_raw_fd(),
            level,
            opt,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t
        ))?;
        Ok(())
    }

    /// PACKET_QDISC_BYPASS: frames go straight to the driver, past tc.
    pub(crate) fn set_qdisc_bypass(&self, on: bool) -> io::Result<()> {
        self.set_int(SOL_PACKET, PACKET_QDISC_BYPASS, i32::from(on))
    }

    /// PACKET_IGNORE_OUTGOING: do not see frames this host sends.
    pub(crate) fn set_ignore_outgoing(&self) -> io::Result<()> {
        self.set_int(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    }

    /// Receive buffer: SO_RCVBUFFORCE (root) or else SO_RCVBUF.
    pub(crate) fn set_rcvbuf(&self, bytes: i32) -> io::Result<()> {
        self.set_int(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, bytes)
            .or_else(|_| self.set_int(libc::SOL_SOCKET, libc::SO_RCVBUF, bytes))
    }

    /// Send buffer: SO_SNDBUFFORCE (root) or else SO_SNDBUF.
    pub(crate) fn set_sndbuf(&self, bytes: i32) -> io::Result<()> {
        self.set_int(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, bytes)
            .or_else(|_| self.set_int(libc::SOL_SOCKET, libc::SO_SNDBUF, bytes))
    }

    /// SO_RCVTIMEO: a blocking receive returns EAGAIN after `usec`.
    pub(crate) fn set_rcvtimeo(&self, usec: i64) -> io::Result<()> {
        let tv = libc::timeval {
            tv_sec: usec / 1_000_000,
            tv_usec: usec % 1_000_000,
        };
        // SAFETY: `tv` lives across the call and its size is passed.
        syscall!(setsockopt(
            self.fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            size_of::<libc::timeval>() as libc::socklen_t
        ))?;
        Ok(())
    }

    /// PACKET_STATISTICS: (frames, drops) since the last call (reading
    /// resets the kernel's counters). Drops are frames the socket's receive
    /// queue had no room for.
    pub(crate) fn stats(&self) -> io::Result<(u32, u32)> {
        let mut st = [0u32; 2]; // struct tpacket_stats { tp_packets, tp_drops }
        let mut len = size_of::<[u32; 2]>() as libc::socklen_t;
        // SAFETY: `st` has room for struct tpacket_stats (two u32) and `len`
        // says so; both live across the call.
        syscall!(getsockopt(
            self.fd.as_raw_fd(),
            SOL_PACKET,
            PACKET_STATISTICS,
            st.as_mut_ptr().cast(),
            &mut len
        ))?;
        Ok((st[0], st[1]))
    }

    /// Sends up to [`MAX_BATCH`] frames with one `sendmmsg`; returns how many
    /// the kernel accepted (a short count or an error such as ENOBUFS means
    /// the rest were not sent).
    pub(crate) fn send_batch(&self, frames: &[&[u8]]) -> io::Result<usize> {
        let n = frames.len().min(MAX_BATCH);
        // SAFETY: iovec and mmsghdr are plain C structs; all-zero is valid.
        let mut iov: [libc::iovec; MAX_BATCH] = unsafe { mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; MAX_BATCH] = unsafe { mem::zeroed() };
        let mut addr = self.addr;
        for i in 0..n {
            iov[i].iov_base = frames[i].as_ptr() as *mut libc::c_void;
            iov[i].iov_len = frames[i].len();
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_name = (&mut addr as *mut libc::sockaddr_ll).cast();
            msgs[i].msg_hdr.msg_namelen = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        }
        // SAFETY: `msgs[..n]` point at `iov[..n]`, which point at the frames
        // borrowed for the whole call (the kernel only reads them), and at
        // `addr`, alive for the call; `n` ≤ the arrays' length.
        let sent = syscall!(sendmmsg(
            self.fd.as_raw_fd(),
            msgs.as_mut_ptr(),
            n as u32,
            0
        ))?;
        Ok(sent as usize)
    }

    /// SO_TIMESTAMPNS: every received frame carries the kernel's software
    /// receive time (CLOCK_REALTIME) in a control message.
    pub(crate) fn set_timestampns(&self) -> io::Result<()> {
        self.set_int(libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
    }

    /// Receives up to `bufs.len()` (≤ [`MAX_BATCH`]) frames, waiting for the
    /// first at most the SO_RCVTIMEO time (then `Ok(0)`). Frame `i` is
    /// `bufs[i][..lens[i]]` (truncated to the buffer), `pkttypes[i]` its
    /// `sll_pkttype`, `stamps[i]` its SO_TIMESTAMPNS receive time in ns
    /// (CLOCK_REALTIME) when the kernel attached one.
    pub(crate) fn recv_batch(
        &self,
        bufs: &mut [Vec<u8>],
        lens: &mut [usize],
        pkttypes: &mut [u8],
        stamps: &mut [Option<u64>],
    ) -> io::Result<usize> {
        let n = bufs
            .len()
            .min(lens.len())
            .min(pkttypes.len())
            .min(stamps.len())
            .min(MAX_BATCH);
        // Control buffers, 8-byte aligned, room for one timespec cmsg
        // (CMSG_SPACE(16) = 32 on 64-bit) and some slack.
        let mut ctrl = [[0u64; 8]; MAX_BATCH];
        // SAFETY: plain C structs; all-zero is valid.
        let mut iov: [libc::iovec; MAX_BATCH] = unsafe { mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; MAX_BATCH] = unsafe { mem::zeroed() };
        // SAFETY: as above.
        let mut names: [libc::sockaddr_ll; MAX_BATCH] = unsafe { mem::zeroed() };
        for i in 0..n {
            iov[i].iov_base = bufs[i].as_mut_ptr().cast();
            iov[i].iov_len = bufs[i].len();
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_name = (&mut names[i] as *mut libc::sockaddr_ll).cast();
            msgs[i].msg_hdr.msg_namelen = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            msgs[i].msg_hdr.msg_control = ctrl[i].as_mut_ptr().cast();
            msgs[i].msg_hdr.msg_controllen = size_of::<[u64; 8]>() as _;
        }
        // SAFETY: every iovec points at a distinct, exclusively borrowed Vec
        // buffer of the stated length; names and msgs live across the call;
        // a null timeout means "use SO_RCVTIMEO".
        let got = syscall!(recvmmsg(
            self.fd.as_raw_fd(),
            msgs.as_mut_ptr(),
            n as u32,
            libc::MSG_WAITFORONE,
            std::ptr::null_mut()
        ));
        let got = match got {
            Ok(g) => g as usize,
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::Interrupted =>
            {
                return Ok(0)
            }
            Err(e) => return Err(e),
        };
        for i in 0..got.min(n) {
            lens[i] = (msgs[i].msg_len as usize).min(bufs[i].len());
            pkttypes[i] = names[i].sll_pkttype;
            stamps[i] = rx_timestamp(&msgs[i].msg_hdr);
        }
        Ok(got.min(n))
    }
}

/// The SCM_TIMESTAMPNS time of a received message, in ns.
fn rx_timestamp(hdr: &libc::msghdr) -> Option<u64> {
    // SAFETY: `hdr` was filled by recvmmsg: msg_control points at a live
    // control buffer of msg_controllen bytes, which CMSG_FIRSTHDR/NXTHDR walk
    // within; a timespec is read unaligned from the data of a cmsg whose
    // level/type say it holds one.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                return Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    None
}

/// The index of interface `name` in the calling thread's namespace.
pub(crate) fn ifindex(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string alive across the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(i)
    }
}

/// An `ifreq` naming `name`, and a datagram socket to ask about it.
fn ifreq(name: &str) -> io::Result<(libc::ifreq, OwnedFd)> {
    let bytes = name.as_bytes();
    // SAFETY: ifreq is a plain C struct/union; all-zero is valid.
    let mut req: libc::ifreq = unsafe { mem::zeroed() };
    if bytes.len() >= req.ifr_name.len() || bytes.contains(&0) {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: socket(2) with constant arguments; owned right below.
    let fd = syscall!(socket(
        libc::AF_INET,
        libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
        0
    ))?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok((req, fd))
}

/// The MTU of interface `name` (SIOCGIFMTU): the largest L3 packet.
pub(crate) fn mtu(name: &str) -> io::Result<u32> {
    let (mut req, fd) = ifreq(name)?;
    // SAFETY: SIOCGIFMTU reads ifr_name and writes ifr_mtu inside `req`,
    // which lives across the call.
    syscall!(ioctl(
        fd.as_raw_fd(),
        SIOCGIFMTU as _,
        &mut req as *mut libc::ifreq
    ))?;
    // SAFETY: after a successful SIOCGIFMTU the union holds ifru_mtu.
    let m = unsafe { req.ifr_ifru.ifru_mtu };
    Ok(u32::try_from(m).unwrap_or(0))
}

/// The MAC address of interface `name` (SIOCGIFHWADDR).
pub(crate) fn hwaddr(name: &str) -> io::Result<[u8; 6]> {
    let (mut req, fd) = ifreq(name)?;
    // SAFETY: SIOCGIFHWADDR reads ifr_name and writes ifr_hwaddr inside `req`,
    // which lives across the call.
    syscall!(ioctl(
        fd.as_raw_fd(),
        SIOCGIFHWADDR as _,
        &mut req as *mut libc::ifreq
    ))?;
    // SAFETY: after a successful SIOCGIFHWADDR the union holds ifru_hwaddr.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(mac)
}

/// CLOCK_REALTIME in nanoseconds: the clock of the kernel's software
/// receive timestamps (SO_TIMESTAMPNS).
pub(crate) fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec the call writes; the clocks used
    // always exist on Linux, so the call cannot fail.
    let _ = syscall!(clock_gettime(clock, &mut ts));
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}
