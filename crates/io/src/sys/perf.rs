//! perf_event_open(2) on kernel tracepoints, their per-CPU ring buffers,
//! and mounting tracefs.
//!
//! Each tracepoint is opened once per CPU (`pid = -1`: every task on that
//! CPU, in every namespace) as a `PERF_TYPE_TRACEPOINT` event that samples
//! every hit with `PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_RAW`, its
//! time on CLOCK_MONOTONIC (`use_clockid`). The first event of a CPU owns
//! the ring (mmap); the others write into it (`PERF_EVENT_IOC_SET_OUTPUT`),
//! so there is one ring per CPU. No wake-up is asked for per sample
//! (`wakeup_events = 0`: only when a ring is half full); the reader polls.
//! Closing the file descriptors detaches everything; the kernel does it
//! also when the process dies, however it dies.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use super::syscall;

/// `PERF_TYPE_TRACEPOINT`.
const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_RAW`.
const SAMPLE_TYPE: u64 = (1 << 2) | (1 << 7) | (1 << 10);
/// `perf_event_attr` flag bits: `disabled` (bit 0) and `use_clockid` (bit 25).
const ATTR_FLAGS: u64 = 1 | (1 << 25);
/// `PERF_FLAG_FD_CLOEXEC`.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `PERF_EVENT_IOC_ENABLE` = `_IO('$', 0)`.
const IOC_ENABLE: libc::c_ulong = 0x2400;
/// `PERF_EVENT_IOC_DISABLE` = `_IO('$', 1)`.
const IOC_DISABLE: libc::c_ulong = 0x2401;
/// `PERF_EVENT_IOC_SET_OUTPUT` = `_IO('$', 5)`.
const IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
/// `PERF_EVENT_IOC_SET_FILTER` = `_IOW('$', 6, char *)`.
const IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;

/// `struct perf_event_attr` up to `sig_data` (`PERF_ATTR_SIZE_VER8`, 136
/// bytes); the bit fields are one u64 (`flags`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
    aux_sample_size: u32,
    reserved_3: u32,
    sig_data: u64,
    config3: u64,
}

/// Opens tracepoint `id` on `cpu`, disabled, sampling every hit with its
/// raw record, time (CLOCK_MONOTONIC) and CPU.
pub(crate) fn open_tracepoint(id: u64, cpu: u32) -> io::Result<OwnedFd> {
    let attr = PerfEventAttr {
        type_: PERF_TYPE_TRACEPOINT,
        size: size_of::<PerfEventAttr>() as u32,
        config: id,
        sample_period: 1,
        sample_type: SAMPLE_TYPE,
        flags: ATTR_FLAGS,
        clockid: libc::CLOCK_MONOTONIC,
        ..PerfEventAttr::default()
    };
    // SAFETY: perf_event_open reads `attr.size` bytes from a valid, fully
    // initialised struct; pid -1 with a cpu is "every task on that CPU";
    // group -1: no group. The returned fd is new and owned by us alone.
    let fd = syscall!(syscall(
        libc::SYS_perf_event_open,
        std::ptr::from_ref(&attr),
        -1 as libc::pid_t,
        cpu as libc::c_int,
        -1 as libc::c_int,
        PERF_FLAG_FD_CLOEXEC,
    ))?;
    let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::other("fd out of range"))?;
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens a counting (not sampling) event of PMU `pmu_type` with `config`
/// on `cpu`, every task (`pid = -1`), enabled at once: e.g. the `power`
/// PMU's `energy-pkg`, which only counts system-wide on one CPU of each
/// package.
pub(crate) fn open_counter(pmu_type: u32, config: u64, cpu: u32) -> io::Result<OwnedFd> {
    let attr = PerfEventAttr {
        type_: pmu_type,
        size: size_of::<PerfEventAttr>() as u32,
        config,
        ..PerfEventAttr::default()
    };
    // SAFETY: perf_event_open reads `attr.size` bytes from a valid, fully
    // initialised struct; pid -1 with a cpu is "every task on that CPU";
    // group -1: no group. The returned fd is new and owned by us alone.
    let fd = syscall!(syscall(
        libc::SYS_perf_event_open,
        std::ptr::from_ref(&attr),
        -1 as libc::pid_t,
        cpu as libc::c_int,
        -1 as libc::c_int,
        PERF_FLAG_FD_CLOEXEC,
    ))?;
    let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::other("fd out of range"))?;
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The count of a counting event (`read_format` 0: one u64).
pub(crate) fn read_count(fd: &OwnedFd) -> io::Result<u64> {
    let mut v = 0u64;
    // SAFETY: reads at most 8 bytes into `v`, which lives across the call.
    let n = syscall!(read(
        fd.as_raw_fd(),
        std::ptr::from_mut(&mut v).cast(),
        size_of::<u64>()
    ))?;
    if n as usize != size_of::<u64>() {
        return Err(io::Error::other(format!("read {n} bytes of a perf count")));
    }
    Ok(v)
}

/// Sets an in-kernel filter (`len >= 100 && len <= 217`) on an event.
pub(crate) fn set_filter(fd: &OwnedFd, filter: &CStr) -> io::Result<()> {
    // SAFETY: SET_FILTER reads a NUL-terminated string that outlives the call.
    syscall!(ioctl(fd.as_raw_fd(), IOC_SET_FILTER, filter.as_ptr())).map(drop)
}

/// Sends `fd`'s samples into `target`'s ring (same CPU).
pub(crate) fn set_output(fd: &OwnedFd, target: &OwnedFd) -> io::Result<()> {
    // SAFETY: SET_OUTPUT takes another perf event's descriptor as its argument.
    syscall!(ioctl(fd.as_raw_fd(), IOC_SET_OUTPUT, target.as_raw_fd())).map(drop)
}

/// Starts (true) or stops (false) an event.
pub(crate) fn enable(fd: &OwnedFd, on: bool) -> io::Result<()> {
    let req = if on { IOC_ENABLE } else { IOC_DISABLE };
    // SAFETY: ENABLE/DISABLE take no argument (0).
    syscall!(ioctl(fd.as_raw_fd(), req, 0)).map(drop)
}

/// Offsets in `struct perf_event_mmap_page`.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const DATA_OFFSET: usize = 1040;
const DATA_SIZE: usize = 1048;

/// A perf ring buffer mapped into this process, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Ring {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; the control words are only
// touched atomically and the data only read between tail and head, which
// the kernel does not write until the tail moves past it.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps the ring of `fd`: one control page and `data_pages` (a power of
    /// two) pages of data.
    pub(crate) fn map(fd: &OwnedFd, data_pages: usize) -> io::Result<Self> {
        let page = page_size();
        let len = page * (1 + data_pages);
        // SAFETY: a fresh shared mapping of the event's ring (offset 0, the
        // size perf requires: 1 + 2^n pages); checked against MAP_FAILED
        // (mmap does not return -1, so it does not go through `syscall!`).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Self { base, len })
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        assert!(
            off + 8 <= self.len && off.is_multiple_of(8),
            "ring word out of range"
        );
        // SAFETY: `off` is inside the live mapping and 8-byte aligned
        // (checked above; the mapping is page aligned); AtomicU64 has u64's
        // layout, and the kernel updates these words concurrently.
        unsafe { &*self.base.as_ptr().add(off).cast::<AtomicU64>() }
    }

    /// Appends every byte written since the last call to `out` (unwrapped),
    /// then frees that space for the kernel. Returns the bytes appended.
    pub(crate) fn drain(&self, out: &mut Vec<u8>) -> usize {
        let head = self.word(DATA_HEAD).load(Ordering::Acquire);
        let tail = self.word(DATA_TAIL).load(Ordering::Relaxed);
        let mut offset = self.word(DATA_OFFSET).load(Ordering::Relaxed) as usize;
        let mut size = self.word(DATA_SIZE).load(Ordering::Relaxed) as usize;
        if size == 0 {
            // Kernels before 4.1 leave these zero: data follows the first page.
            offset = page_size();
            size = self.len - offset;
        }
        let avail = usize::try_from(head.wrapping_sub(tail))
            .unwrap_or(0)
            .min(size);
        let start = (tail as usize) % size;
        let first = avail.min(size - start);
        assert!(offset + size <= self.len, "ring data out of range");
        // SAFETY: [offset, offset + size) is the data area inside the
        // mapping (checked above); bytes between tail and head are complete
        // records the kernel will not touch until the tail is advanced below
        // (the Acquire load of head orders these reads after its writes).
        let data = unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(offset), size) };
        out.extend_from_slice(&data[start..start + first]);
        out.extend_from_slice(&data[..avail - first]);
        self.word(DATA_TAIL)
            .store(tail.wrapping_add(avail as u64), Ordering::Release);
        avail
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly one mapping made in `Ring::map`,
        // unmapped once, here.
        let _ = syscall!(munmap(self.base.as_ptr().cast(), self.len));
    }
}

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// The CPUs that can run code (`_SC_NPROCESSORS_CONF`).
pub(crate) fn cpu_count() -> u32 {
    // SAFETY: sysconf has no memory-safety preconditions.
    u32::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) })
        .unwrap_or(1)
        .max(1)
}

/// Mounts tracefs at `target` (`mount -t tracefs nodev TARGET`).
pub(crate) fn mount_tracefs(target: &CStr) -> io::Result<()> {
    // SAFETY: all strings are NUL-terminated and outlive the call; no data.
    syscall!(mount(
        c"nodev".as_ptr(),
        target.as_ptr(),
        c"tracefs".as_ptr(),
        0,
        std::ptr::null()
    ))
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attr_has_the_kernels_layout() {
        // PERF_ATTR_SIZE_VER8.
        assert_eq!(size_of::<PerfEventAttr>(), 136);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, flags), 40);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, clockid), 92);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, sig_data), 120);
    }
}
