//! The only place with `unsafe`: thin wrappers over Linux syscalls.
//!
//! Every call goes through [`syscall!`], which turns the C convention (-1 and
//! `errno`) into `io::Result`. Each `unsafe` block says why it is sound.
#![allow(unsafe_code)]

pub(crate) mod alloc;
pub(crate) mod bpf;
pub(crate) mod clock;
pub(crate) mod cmsg;
pub(crate) mod copy;
pub(crate) mod csum;
pub(crate) mod emu;
pub(crate) mod ifaddrs;
pub(crate) mod netns;
pub(crate) mod packet;
pub(crate) mod perf;
pub(crate) mod signal;
pub(crate) mod sock;
pub(crate) mod timestamping;
pub(crate) mod tpbtf;
pub(crate) mod xdp;
pub(crate) mod xdp_count;

/// Calls a libc function and maps a -1 return to the thread's `errno`.
macro_rules! syscall {
    ($fn:ident ( $($arg:expr),* $(,)? )) => {{
        #[allow(unused_unsafe)]
        // SAFETY: the caller's enclosing `unsafe` block documents why the
        // arguments satisfy the function's contract.
        let res = unsafe { libc::$fn($($arg),*) };
        if res == -1 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(res)
        }
    }};
}
pub(crate) use syscall;
