//! AF_PACKET raw sockets (packet(7)): open, bind, options, `sendmmsg` and
//! `recvmmsg` batches, interface index and MAC.

use std::ffi::CString;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

use super::{cmsg, syscall};

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
/// `ETH_P_ALL`: every protocol.
pub(crate) const ETH_P_ALL: u16 = 0x0003;
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

    /// The EtherType `sendmmsg` declares for the frames (skb->protocol).
    pub(crate) fn set_tx_protocol(&mut self, ethertype: u16) {
        self.addr.sll_protocol = ethertype.to_be();
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
    pub(crate) fn send_batch<B: AsRef<[u8]>>(&self, frames: &[B]) -> io::Result<usize> {
        let n = frames.len().min(MAX_BATCH);
        // SAFETY: iovec and mmsghdr are plain C structs; all-zero is valid.
        let mut iov: [libc::iovec; MAX_BATCH] = unsafe { mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; MAX_BATCH] = unsafe { mem::zeroed() };
        let mut addr = self.addr;
        for i in 0..n {
            let f = frames[i].as_ref();
            iov[i].iov_base = f.as_ptr() as *mut libc::c_void;
            iov[i].iov_len = f.len();
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
    /// `lens[i]` bytes long (MSG_TRUNC: its length on the wire), of which
    /// `bufs[i][..lens[i].min(bufs[i].len())]` was received: `lens[i]`
    /// above the buffer's length means the frame was cut. `pkttypes[i]` its
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
        let mut ctrl: [cmsg::Buf<64>; MAX_BATCH] = std::array::from_fn(|_| cmsg::Buf::new());
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
            msgs[i].msg_hdr.msg_control = ctrl[i].as_mut_ptr();
            msgs[i].msg_hdr.msg_controllen = ctrl[i].0.len() as _;
        }
        // SAFETY: every iovec points at a distinct, exclusively borrowed Vec
        // buffer of the stated length; names and msgs live across the call;
        // a null timeout means "use SO_RCVTIMEO".
        let got = syscall!(recvmmsg(
            self.fd.as_raw_fd(),
            msgs.as_mut_ptr(),
            n as u32,
            libc::MSG_WAITFORONE | libc::MSG_TRUNC,
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
            lens[i] = msgs[i].msg_len as usize;
            pkttypes[i] = names[i].sll_pkttype;
            // SAFETY: recvmmsg filled msgs[i], whose control buffer is ctrl[i].
            stamps[i] = unsafe { rx_timestamp(&msgs[i].msg_hdr) };
        }
        Ok(got.min(n))
    }
}

/// The SCM_TIMESTAMPNS time of a received message, in ns.
///
/// # Safety
/// `hdr` must have been filled by recvmsg/recvmmsg, its `msg_control`
/// pointing at a live control buffer of (at least) `msg_controllen` bytes.
unsafe fn rx_timestamp(hdr: &libc::msghdr) -> Option<u64> {
    // SAFETY: the caller's contract is `cmsg::control`'s.
    let control = unsafe { cmsg::control(hdr) };
    let ts = cmsg::iter(control)
        .find(|c| c.is(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS))
        .and_then(|c| cmsg::read::<libc::timespec>(c.data))?;
    Some(super::clock::timespec_ns(&ts))
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

pub(crate) use super::clock::realtime_ns;

/// `PACKET_VERSION` (linux/if_packet.h).
const PACKET_VERSION: libc::c_int = 10;
/// `TPACKET_V2`.
const TPACKET_V2: libc::c_int = 1;
/// `PACKET_TX_RING`.
const PACKET_TX_RING: libc::c_int = 13;
/// `TP_STATUS_AVAILABLE`: the slot belongs to user space.
const TP_STATUS_AVAILABLE: u32 = 0;
/// `TP_STATUS_SEND_REQUEST`: user space handed the slot to the kernel.
const TP_STATUS_SEND_REQUEST: u32 = 1;
/// `TP_STATUS_WRONG_FORMAT`: the kernel refused the frame.
const TP_STATUS_WRONG_FORMAT: u32 = 4;
/// Offset of the frame data in a TPACKET_V2 TX slot:
/// `TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)` = TPACKET_ALIGN(32).
const TPACKET2_DATA: usize = 32;

/// The state of one TX ring slot, as user space sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Free: sent (or never used).
    Free,
    /// The kernel refused the frame it held.
    Refused,
    /// Still queued or being sent.
    Busy,
}

/// A PACKET_TX_RING (TPACKET_V2) mapped into this process.
#[derive(Debug)]
pub(crate) struct TxRing {
    base: std::ptr::NonNull<u8>,
    len: usize,
    frame_size: usize,
    frames: usize,
}

// SAFETY: the mapping is owned by this value alone (no aliasing handle is
// given out), and every access to shared slot words is atomic, so moving it
// to another thread is sound.
unsafe impl Send for TxRing {}

impl TxRing {
    /// Number of slots.
    pub(crate) fn frames(&self) -> usize {
        self.frames
    }

    /// Largest frame a slot holds.
    pub(crate) fn max_frame(&self) -> usize {
        self.frame_size - TPACKET2_DATA
    }

    fn status(&self, i: usize) -> &std::sync::atomic::AtomicU32 {
        assert!(i < self.frames, "TX ring slot out of range");
        // SAFETY: slot `i` starts at i × frame_size < len inside the live
        // mapping; slots are 16-byte aligned (page-aligned mapping, frame_size
        // a multiple of 16), so the u32 tp_status at its start is aligned.
        // AtomicU32 has the layout of u32, and the kernel updates this word
        // concurrently, which is why it is only touched atomically.
        unsafe {
            &*(self
                .base
                .as_ptr()
                .add(i * self.frame_size)
                .cast::<std::sync::atomic::AtomicU32>())
        }
    }

    /// What slot `i` holds now.
    pub(crate) fn state(&self, i: usize) -> SlotState {
        let s = self.status(i).load(std::sync::atomic::Ordering::Acquire);
        if s == TP_STATUS_AVAILABLE {
            SlotState::Free
        } else if s & TP_STATUS_WRONG_FORMAT != 0 {
            SlotState::Refused
        } else {
            SlotState::Busy
        }
    }

    /// Writes a frame of `len` bytes into free slot `i` with `write`, then
    /// hands the slot to the kernel. Returns false (and does nothing) when
    /// the slot is busy or `len` does not fit.
    pub(crate) fn fill(&mut self, i: usize, len: usize, write: impl FnOnce(&mut [u8])) -> bool {
        if len > self.max_frame() || self.state(i) == SlotState::Busy {
            return false;
        }
        let slot = i * self.frame_size;
        // SAFETY: the slot is user-owned (status AVAILABLE or WRONG_FORMAT:
        // the kernel does not touch it until we set SEND_REQUEST below), the
        // data area [slot + 32, slot + 32 + len) lies inside the slot and the
        // mapping, and `&mut self` guarantees no other borrow of it.
        let data = unsafe {
            std::slice::from_raw_parts_mut(self.base.as_ptr().add(slot + TPACKET2_DATA), len)
        };
        write(data);
        // SAFETY: tp_len is the u32 at offset 4 of the user-owned slot header
        // (aligned, inside the mapping).
        unsafe {
            std::ptr::write_volatile(self.base.as_ptr().add(slot + 4).cast::<u32>(), len as u32);
        }
        self.status(i)
            .store(TP_STATUS_SEND_REQUEST, std::sync::atomic::Ordering::Release);
        true
    }
}

impl Drop for TxRing {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly the mapping made in `tx_ring`, unmapped
        // once, here.
        let _ = syscall!(munmap(self.base.as_ptr().cast(), self.len));
    }
}

impl PacketSocket {
    /// Sets up a TPACKET_V2 TX ring with slots for frames of up to
    /// `max_frame` bytes and maps it.
    pub(crate) fn tx_ring(&self, max_frame: usize) -> io::Result<TxRing> {
        self.set_int(SOL_PACKET, PACKET_VERSION, TPACKET_V2)?;
        let frame_size = (max_frame + TPACKET2_DATA).next_power_of_two().max(2048);
        let block_size = frame_size.max(1 << 16);
        let block_nr = 64usize;
        let req: [u32; 4] = [
            block_size as u32,
            block_nr as u32,
            frame_size as u32,
            (block_nr * (block_size / frame_size)) as u32,
        ]; // struct tpacket_req { block_size, block_nr, frame_size, frame_nr }
           // SAFETY: `req` is a struct tpacket_req (four u32) alive across the
           // call, and its size is passed.
        syscall!(setsockopt(
            self.fd.as_raw_fd(),
            SOL_PACKET,
            PACKET_TX_RING,
            req.as_ptr().cast(),
            size_of::<[u32; 4]>() as libc::socklen_t
        ))?;
        let len = block_size * block_nr;
        // SAFETY: mmap of the ring the kernel just allocated for this socket,
        // shared, at offset 0; the result is checked against MAP_FAILED
        // (mmap does not return -1, so it does not go through `syscall!`).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = std::ptr::NonNull::new(p.cast::<u8>())
            .ok_or_else(|| io::Error::from(io::ErrorKind::Other))?;
        Ok(TxRing {
            base,
            len,
            frame_size,
            frames: len / frame_size,
        })
    }

    /// Asks the kernel to send every slot marked SEND_REQUEST, without
    /// waiting (`send(fd, NULL, 0, MSG_DONTWAIT)`).
    pub(crate) fn kick(&self) -> io::Result<usize> {
        // SAFETY: a zero-length send with a null buffer is the documented
        // TX-ring kick (packet(7)); the kernel reads only the ring.
        let n = syscall!(send(
            self.fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT
        ))?;
        Ok(n as usize)
    }
}

impl PacketSocket {
    /// O_NONBLOCK: a receive with nothing queued returns at once
    /// ([`PacketSocket::recv_batch`] then gives `Ok(0)`).
    pub(crate) fn set_nonblocking(&self) -> io::Result<()> {
        // SAFETY: F_GETFL/F_SETFL on a descriptor this value owns; no memory
        // is passed.
        let flags = syscall!(fcntl(self.fd.as_raw_fd(), libc::F_GETFL))?;
        // SAFETY: as above.
        syscall!(fcntl(
            self.fd.as_raw_fd(),
            libc::F_SETFL,
            flags | libc::O_NONBLOCK
        ))?;
        Ok(())
    }

    /// The descriptor, to wait on with poll.
    pub(crate) fn raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}
