//! Small socket syscalls std does not offer: poll for readability, raw ICMP
//! sockets, sendto on a raw descriptor.

use std::io;
use std::mem::size_of;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd as _, OwnedFd, RawFd};
use std::time::Duration;

use super::syscall;

/// Waits until `fd` is readable or `timeout` passes; `true` if readable.
pub(crate) fn poll_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // Round a sub-millisecond wait up so a short timeout does not spin.
    let ms = if ms == 0 && !timeout.is_zero() { 1 } else { ms };
    loop {
        // SAFETY: `p` is one live pollfd and nfds is 1.
        match syscall!(poll(&mut p, 1, ms)) {
            Ok(n) => return Ok(n > 0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A raw ICMP (v4) or ICMPv6 socket; needs CAP_NET_RAW.
pub(crate) fn icmp_raw_socket(v6: bool) -> io::Result<OwnedFd> {
    let (domain, proto) = if v6 {
        (libc::AF_INET6, libc::IPPROTO_ICMPV6)
    } else {
        (libc::AF_INET, libc::IPPROTO_ICMP)
    };
    // SAFETY: plain socket(2); on success we own the new descriptor.
    let fd = syscall!(socket(domain, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto))?;
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// sendto(2) of `buf` to `to` on any datagram or raw socket.
pub(crate) fn send_to(fd: RawFd, buf: &[u8], to: SocketAddr) -> io::Result<usize> {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match to {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
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
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    loop {
        // SAFETY: buf and ss are live for the call and their lengths are given.
        match syscall!(sendto(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            0,
            (&ss as *const libc::sockaddr_storage).cast(),
            len as libc::socklen_t,
        )) {
            Ok(n) => return Ok(n as usize),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}
