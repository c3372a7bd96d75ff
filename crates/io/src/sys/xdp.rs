//! AF_XDP sockets for sending (copy mode): a UMEM of frame chunks, a TX
//! ring and a completion ring (plus the fill ring the kernel insists on), all
//! mapped into this process. No XDP program is needed to send.

use std::io;
use std::mem;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::syscall;

/// `AF_XDP` (linux/socket.h).
const AF_XDP: libc::c_int = 44;

/// One mapping (UMEM or a ring), unmapped on drop.
#[derive(Debug)]
struct Map {
    base: NonNull<u8>,
    len: usize,
}

impl Map {
    fn new(len: usize, fd: Option<(libc::c_int, libc::off_t)>) -> io::Result<Self> {
        let (flags, fd, off) = match fd {
            Some((fd, off)) => (libc::MAP_SHARED | libc::MAP_POPULATE, fd, off),
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0),
        };
        // SAFETY: a fresh mapping of `len` bytes (anonymous, or of the
        // socket's ring at the kernel-defined page offset); the result is
        // checked against MAP_FAILED (mmap does not return -1, so it does not
        // go through `syscall!`).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Self { base, len })
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(
            off + 4 <= self.len && off.is_multiple_of(4),
            "ring word out of range"
        );
        // SAFETY: `off` is inside the live mapping and 4-byte aligned (checked
        // above); AtomicU32 has u32's layout, and the kernel updates producer
        // and consumer words concurrently, so they are only touched atomically.
        unsafe { &*self.base.as_ptr().add(off).cast::<AtomicU32>() }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly one mapping made in `Map::new`,
        // unmapped once, here.
        let _ = syscall!(munmap(self.base.as_ptr().cast(), self.len));
    }
}

/// A single-producer ring of the socket (TX or fill) or a single-consumer one
/// (completion): producer and consumer words and an array of entries.
#[derive(Debug)]
struct Ring {
    map: Map,
    producer: usize,
    consumer: usize,
    desc: usize,
    size: u32,
}

impl Ring {
    fn producer(&self) -> &AtomicU32 {
        self.map.u32_at(self.producer)
    }
    fn consumer(&self) -> &AtomicU32 {
        self.map.u32_at(self.consumer)
    }
}

/// An AF_XDP socket that sends frames from its UMEM (copy mode, queue 0).
#[derive(Debug)]
pub(crate) struct XdpTx {
    // Field order matters for drop: rings and UMEM are unmapped before the
    // socket closes.
    tx: Ring,
    cr: Ring,
    _fr: Ring,
    umem: Map,
    fd: OwnedFd,
    chunk: usize,
    chunks: u32,
    /// Chunks free for writing (addresses), refilled from completions.
    free: Vec<u64>,
    /// Producer index we have written up to (TX ring).
    tx_prod: u32,
}

// SAFETY: every mapping is owned by this value alone; ring words shared with
// the kernel are accessed atomically; UMEM chunks are written only while they
// are not in the TX ring. Moving it to another thread is sound.
unsafe impl Send for XdpTx {}

fn set<T>(fd: &OwnedFd, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` points at a live value of the size passed.
    syscall!(setsockopt(
        fd.as_raw_fd(),
        libc::SOL_XDP,
        opt,
        (v as *const T).cast(),
        size_of::<T>() as libc::socklen_t
    ))?;
    Ok(())
}

impl XdpTx {
    /// An AF_XDP socket bound to queue 0 of `ifindex` in copy mode, with
    /// `chunks` UMEM chunks of `chunk` bytes (powers of two) and a TX ring of
    /// `chunks` entries.
    pub(crate) fn open(ifindex: u32, chunk: usize, chunks: u32) -> io::Result<Self> {
        // SAFETY: socket(2) with constant arguments; owned right below.
        let fd = syscall!(socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0))?;
        // SAFETY: `fd` was just returned by socket(2) and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let umem = Map::new(chunk * chunks as usize, None)?;
        let reg = libc::xdp_umem_reg_v1 {
            addr: umem.base.as_ptr() as u64,
            len: umem.len as u64,
            chunk_size: chunk as u32,
            headroom: 0,
        };
        set(&fd, libc::XDP_UMEM_REG, &reg)?;
        let small: u32 = 64;
        set(&fd, libc::XDP_UMEM_FILL_RING, &small)?;
        set(&fd, libc::XDP_UMEM_COMPLETION_RING, &chunks)?;
        set(&fd, libc::XDP_TX_RING, &chunks)?;
        // SAFETY: xdp_mmap_offsets is plain integers; all-zero is valid.
        let mut off: libc::xdp_mmap_offsets = unsafe { mem::zeroed() };
        let mut len = size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: `off` has room for the struct and `len` says so.
        syscall!(getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            (&mut off as *mut libc::xdp_mmap_offsets).cast(),
            &mut len
        ))?;
        let ring =
            |o: &libc::xdp_ring_offset, entry: usize, n: u32, pgoff: u64| -> io::Result<Ring> {
                let map = Map::new(
                    o.desc as usize + entry * n as usize,
                    Some((fd.as_raw_fd(), pgoff as libc::off_t)),
                )?;
                Ok(Ring {
                    map,
                    producer: o.producer as usize,
                    consumer: o.consumer as usize,
                    desc: o.desc as usize,
                    size: n,
                })
            };
        let tx = ring(
            &off.tx,
            size_of::<libc::xdp_desc>(),
            chunks,
            libc::XDP_PGOFF_TX_RING as u64,
        )?;
        let cr = ring(&off.cr, 8, chunks, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?;
        let fr = ring(&off.fr, 8, small, libc::XDP_UMEM_PGOFF_FILL_RING)?;
        let sxdp = libc::sockaddr_xdp {
            sxdp_family: AF_XDP as u16,
            sxdp_flags: libc::XDP_COPY,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: 0,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: `sxdp` is a valid sockaddr_xdp and the length says so.
        syscall!(bind(
            fd.as_raw_fd(),
            (&sxdp as *const libc::sockaddr_xdp).cast(),
            size_of::<libc::sockaddr_xdp>() as libc::socklen_t
        ))?;
        let tx_prod = tx.producer().load(Ordering::Relaxed);
        Ok(Self {
            tx,
            cr,
            _fr: fr,
            umem,
            fd,
            chunk,
            chunks,
            free: (0..u64::from(chunks)).map(|i| i * chunk as u64).collect(),
            tx_prod,
        })
    }

    /// Largest frame a chunk holds.
    pub(crate) fn max_frame(&self) -> usize {
        self.chunk
    }

    /// Chunks free for new frames.
    pub(crate) fn free_chunks(&self) -> usize {
        self.free.len()
    }

    /// Number of UMEM chunks.
    pub(crate) fn chunks(&self) -> u32 {
        self.chunks
    }

    /// Writes a frame of `len` bytes with `write` into a free chunk and puts
    /// it on the TX ring (not yet published: see [`Self::publish`]). False
    /// when no chunk is free or the frame does not fit.
    pub(crate) fn push(&mut self, len: usize, write: impl FnOnce(&mut [u8])) -> bool {
        if len > self.chunk {
            return false;
        }
        let cons = self.tx.consumer().load(Ordering::Acquire);
        if self.tx_prod.wrapping_sub(cons) >= self.tx.size {
            return false;
        }
        let Some(addr) = self.free.pop() else {
            return false;
        };
        // SAFETY: `addr` is a chunk offset < umem.len - chunk + 1 that is not
        // on the TX ring (it came from `free`), so neither the kernel nor any
        // other borrow touches it; `len` ≤ chunk.
        let data = unsafe {
            std::slice::from_raw_parts_mut(self.umem.base.as_ptr().add(addr as usize), len)
        };
        write(data);
        let idx = (self.tx_prod & (self.tx.size - 1)) as usize;
        let at = self.tx.desc + idx * size_of::<libc::xdp_desc>();
        // SAFETY: entry `idx` < size lies inside the TX ring mapping; it is
        // ours until the producer index moves past it (publish), and
        // xdp_desc is 8-byte aligned there (desc offset and size are).
        unsafe {
            std::ptr::write(
                self.tx.map.base.as_ptr().add(at).cast::<libc::xdp_desc>(),
                libc::xdp_desc {
                    addr,
                    len: len as u32,
                    options: 0,
                },
            );
        }
        self.tx_prod = self.tx_prod.wrapping_add(1);
        true
    }

    /// Publishes pushed descriptors and kicks the kernel
    /// (`sendto(fd, NULL, 0, MSG_DONTWAIT)`).
    pub(crate) fn publish(&mut self) -> io::Result<()> {
        self.tx.producer().store(self.tx_prod, Ordering::Release);
        // SAFETY: a zero-length sendto with null buffer and address is the
        // documented AF_XDP TX wake-up; the kernel reads only the rings.
        match syscall!(sendto(
            self.fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0
        )) {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Takes completed frames off the completion ring (their chunks become
    /// free again); returns how many completed.
    pub(crate) fn reap(&mut self) -> u32 {
        let prod = self.cr.producer().load(Ordering::Acquire);
        let mut cons = self.cr.consumer().load(Ordering::Relaxed);
        let n = prod.wrapping_sub(cons);
        for _ in 0..n {
            let idx = (cons & (self.cr.size - 1)) as usize;
            // SAFETY: entry `idx` < size lies inside the completion ring
            // mapping and was published by the kernel (before `prod`);
            // u64 entries are 8-byte aligned there.
            let addr = unsafe {
                std::ptr::read(
                    self.cr
                        .map
                        .base
                        .as_ptr()
                        .add(self.cr.desc + idx * 8)
                        .cast::<u64>(),
                )
            };
            self.free.push(addr);
            cons = cons.wrapping_add(1);
        }
        self.cr.consumer().store(cons, Ordering::Release);
        n
    }
}
