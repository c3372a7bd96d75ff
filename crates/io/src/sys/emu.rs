//! Syscalls of the link emulator beyond its sockets: a wait on several
//! descriptors with a nanosecond timeout (`ppoll`), and signals to a
//! process (`kill`).

use std::io;
use std::os::fd::RawFd;

use super::syscall;

/// Waits until one of `fds` (at most 8) is readable or `timeout_ns` passes
/// (`ppoll`, an hrtimer: no rounding to milliseconds); true if one is.
pub(crate) fn ppoll_readable(fds: &[RawFd], timeout_ns: u64) -> io::Result<bool> {
    let mut p = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; 8];
    let n = fds.len().min(p.len());
    for (slot, &fd) in p.iter_mut().zip(fds) {
        slot.fd = fd;
    }
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `p` is a live pollfd array of at least `n` entries and `ts` a
    // live timespec; the signal-mask pointer may be null.
    match syscall!(ppoll(
        p.as_mut_ptr(),
        n as libc::nfds_t,
        &ts,
        std::ptr::null()
    )) {
        Ok(k) => Ok(k > 0),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
        Err(e) => Err(e),
    }
}

/// Sends signal `sig` to process `pid` (`kill(2)`); `Ok(false)` when no
/// such process exists.
pub(crate) fn kill(pid: u32, sig: libc::c_int) -> io::Result<bool> {
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    if pid <= 0 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: kill(2) with a positive pid touches no memory of this process.
    match syscall!(kill(pid, sig)) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `SOL_PACKET` (linux/socket.h).
const SOL_PACKET: libc::c_int = 263;
/// `PACKET_RX_RING` (linux/if_packet.h).
const PACKET_RX_RING: libc::c_int = 5;
/// `PACKET_VERSION`.
const PACKET_VERSION: libc::c_int = 10;
/// `TPACKET_V2`: one frame per slot, its header `struct tpacket2_hdr`.
const TPACKET_V2: libc::c_int = 1;
/// `TP_STATUS_USER`: the slot holds a frame for user space.
const TP_STATUS_USER: u32 = 1;
/// `TP_STATUS_KERNEL`: the slot is the kernel's to fill.
const TP_STATUS_KERNEL: u32 = 0;
/// Offset of `struct sockaddr_ll` in a V2 slot: TPACKET_ALIGN(sizeof
/// `struct tpacket2_hdr`) = 32; `sll_pkttype` is at +10 in it.
const SLL_PKTTYPE_AT: usize = 32 + 10;
/// Room a slot needs before the frame (the V2 header, the sockaddr_ll and
/// the kernel's alignment of the network header), generously.
const SLOT_HEADROOM: usize = 128;

/// A PACKET_RX_RING (TPACKET_V2) of an AF_PACKET socket, mapped into this
/// process: the kernel writes each received frame into the next slot and
/// hands it over by its status word, so taking a frame is a read of
/// shared memory, not a system call.
#[derive(Debug)]
pub(crate) struct RxRing {
    fd: RawFd,
    base: std::ptr::NonNull<u8>,
    len: usize,
    frame_size: usize,
    frames: usize,
    next: usize,
}

// SAFETY: the mapping is owned by this value alone, and the slot status
// words the kernel shares are only touched atomically.
unsafe impl Send for RxRing {}

impl RxRing {
    /// Sets up and maps a V2 receive ring on socket `fd` (bound, nothing
    /// received yet) with slots for frames of up to `max_frame` bytes.
    pub(crate) fn new(fd: RawFd, max_frame: usize) -> io::Result<Self> {
        let set = |opt, val: *const libc::c_void, len: usize| {
            // SAFETY: `val` points at `len` readable bytes that live across
            // the call (the callers' locals below).
            syscall!(setsockopt(fd, SOL_PACKET, opt, val, len as libc::socklen_t)).map(drop)
        };
        let version = TPACKET_V2;
        set(
            PACKET_VERSION,
            std::ptr::from_ref(&version).cast(),
            size_of::<libc::c_int>(),
        )?;
        let frame_size = (max_frame + SLOT_HEADROOM).next_power_of_two().max(2048);
        let block_size = frame_size.max(1 << 16);
        let block_nr = 64usize;
        // struct tpacket_req { block_size, block_nr, frame_size, frame_nr }
        let req: [u32; 4] = [
            block_size as u32,
            block_nr as u32,
            frame_size as u32,
            (block_nr * (block_size / frame_size)) as u32,
        ];
        set(PACKET_RX_RING, req.as_ptr().cast(), size_of::<[u32; 4]>())?;
        let len = block_size * block_nr;
        // SAFETY: maps the ring the kernel just allocated for this socket,
        // shared, at offset 0; the result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = std::ptr::NonNull::new(p.cast::<u8>())
            .ok_or_else(|| io::Error::from(io::ErrorKind::Other))?;
        Ok(Self {
            fd,
            base,
            len,
            frame_size,
            frames: len / frame_size,
            next: 0,
        })
    }

    fn status(&self, i: usize) -> &std::sync::atomic::AtomicU32 {
        assert!(i < self.frames, "RX ring slot out of range");
        // SAFETY: slot `i` starts at i × frame_size < len inside the live
        // mapping (blocks hold whole slots: block_size is a multiple of
        // frame_size), page-aligned plus a multiple of 2048, so the u32
        // tp_status at its start is aligned; the kernel updates it
        // concurrently, hence atomic access only.
        unsafe {
            &*(self
                .base
                .as_ptr()
                .add(i * self.frame_size)
                .cast::<std::sync::atomic::AtomicU32>())
        }
    }

    /// Replaces this ring by one with slots for frames of up to `max_frame`
    /// bytes on the same socket (its interface's MTU grew while the
    /// emulator runs): unmaps it, has the kernel free it and sets up the
    /// new one. Frames the old ring still held are lost.
    pub(crate) fn resized(self, max_frame: usize) -> io::Result<Self> {
        let fd = self.fd;
        // Unmapped first: the kernel frees no ring that is still mapped.
        drop(self);
        let free = [0u32; 4];
        // SAFETY: `free` (a struct tpacket_req of zeros: no blocks, which
        // frees the ring) is read by the call and outlives it.
        syscall!(setsockopt(
            fd,
            SOL_PACKET,
            PACKET_RX_RING,
            free.as_ptr().cast(),
            size_of::<[u32; 4]>() as libc::socklen_t
        ))?;
        Self::new(fd, max_frame)
    }

    /// Takes the next frame if the kernel handed one over: calls `f` with
    /// its bytes (destination MAC onwards, as captured), the kernel's
    /// receive stamp (CLOCK_REALTIME ns), its `sll_pkttype` and whether it
    /// is whole (not cut to the slot: `tp_len` within `tp_snaplen`), then
    /// gives the slot back. False when no frame waits.
    pub(crate) fn take(&mut self, f: impl FnOnce(&[u8], u64, u8, bool)) -> bool {
        let i = self.next;
        if self.status(i).load(std::sync::atomic::Ordering::Acquire) & TP_STATUS_USER == 0 {
            return false;
        }
        let slot = i * self.frame_size;
        // SAFETY: the slot is user-owned (TP_STATUS_USER, read with acquire
        // ordering: the kernel wrote it before setting the status), and
        // `&mut self` means no other borrow of it; every read below is of
        // the slot's header words (struct tpacket2_hdr: tp_len at +4,
        // tp_snaplen at +8, tp_mac at +12, tp_sec at +16, tp_nsec at +20)
        // or of its data, bounded to the slot.
        let (data, stamp, pkttype, whole) = unsafe {
            let h = self.base.as_ptr().add(slot);
            let wire_len = std::ptr::read_volatile(h.add(4).cast::<u32>()) as usize;
            let snaplen = std::ptr::read_volatile(h.add(8).cast::<u32>()) as usize;
            let mac = usize::from(std::ptr::read_volatile(h.add(12).cast::<u16>()));
            let sec = u64::from(std::ptr::read_volatile(h.add(16).cast::<u32>()));
            let nsec = u64::from(std::ptr::read_volatile(h.add(20).cast::<u32>()));
            let pkttype = std::ptr::read_volatile(h.add(SLL_PKTTYPE_AT));
            let mac = mac.min(self.frame_size);
            let n = snaplen.min(self.frame_size - mac);
            (
                std::slice::from_raw_parts(h.add(mac), n),
                sec * 1_000_000_000 + nsec,
                pkttype,
                wire_len <= n,
            )
        };
        f(data, stamp, pkttype, whole);
        self.status(i)
            .store(TP_STATUS_KERNEL, std::sync::atomic::Ordering::Release);
        self.next = (i + 1) % self.frames;
        true
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly the mapping made in `new`, unmapped
        // once, here.
        let _ = syscall!(munmap(self.base.as_ptr().cast(), self.len));
    }
}

/// The pending error of socket `fd` (`SO_ERROR`, which reading clears):
/// an AF_PACKET socket gets ENETDOWN when its interface goes away.
pub(crate) fn socket_error(fd: RawFd) -> io::Result<i32> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` live across the call and `len` is v's size.
    syscall!(getsockopt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_ERROR,
        std::ptr::from_mut(&mut v).cast(),
        &mut len
    ))?;
    Ok(v)
}

/// Sets the calling thread's timer slack to `ns` (`PR_SET_TIMERSLACK`):
/// a timed wait then ends within `ns` of its deadline instead of the
/// default 50 µs later.
pub(crate) fn set_timer_slack(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and touches no
    // memory of this process.
    syscall!(prctl(
        libc::PR_SET_TIMERSLACK,
        ns as libc::c_ulong,
        0 as libc::c_ulong,
        0 as libc::c_ulong,
        0 as libc::c_ulong
    ))
    .map(|_| ())
}

/// The kernel's CPU latency QoS device: while a process holds it open with
/// a value written, idle CPUs use no state whose exit takes longer.
pub(crate) const CPU_LATENCY_QOS: &str = "/dev/cpu_dma_latency";

/// Asks for idle CPUs that wake within `us` microseconds (0: idle CPUs
/// poll instead of halting) for as long as the returned file stays open;
/// the kernel drops the request when it is closed, also when the process
/// dies (so no exit path can leave it behind).
pub(crate) fn hold_cpu_latency(us: i32) -> io::Result<std::fs::File> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(CPU_LATENCY_QOS)?;
    f.write_all(&us.to_ne_bytes())?;
    Ok(f)
}

/// Makes the calling thread real-time (`SCHED_FIFO` at `priority`): it
/// runs as soon as it wakes, ahead of every normal thread.
pub(crate) fn set_fifo(priority: i32) -> io::Result<()> {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `p` is a live sched_param; pid 0 is the calling thread.
    syscall!(sched_setscheduler(0, libc::SCHED_FIFO, &p)).map(|_| ())
}

/// Returns the calling thread to the normal scheduler (`SCHED_OTHER`).
pub(crate) fn set_normal() -> io::Result<()> {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: `p` is a live sched_param; pid 0 is the calling thread.
    syscall!(sched_setscheduler(0, libc::SCHED_OTHER, &p)).map(|_| ())
}
