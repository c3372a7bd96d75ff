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
