//! `setns(2)` for network namespaces.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd as _;

use super::syscall;

/// Moves the calling thread into the network namespace `ns` (an open
/// `/run/netns/NAME` or `/proc/PID/ns/net`). Sockets created afterwards by
/// this thread belong to that namespace, and keep it wherever they are used.
pub(crate) fn setns_net(ns: &File) -> io::Result<()> {
    // SAFETY: `ns` is an open file descriptor owned by `ns` for the duration
    // of the call; setns only reads it and changes the calling thread's
    // namespace, which affects no memory of this process.
    syscall!(setns(ns.as_raw_fd(), libc::CLONE_NEWNET))?;
    Ok(())
}
