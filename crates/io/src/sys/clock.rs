//! The clocks linerate reads: CLOCK_REALTIME (the clock of the kernel's
//! software timestamps, so application and kernel stamps of one host can be
//! subtracted) and CLOCK_MONOTONIC (durations).

use super::syscall;

/// Now, in ns of CLOCK_REALTIME: the clock the kernel's software receive
/// and transmit stamps (SO_TIMESTAMPNS, SO_TIMESTAMPING) use. 0 before 1970.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// Now, in ns of CLOCK_MONOTONIC.
pub(crate) fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live timespec the call writes; the clocks used here
    // always exist on Linux, so the call cannot fail (a failure would leave
    // ts at zero).
    let _ = syscall!(clock_gettime(clock, &mut ts));
    timespec_ns(&ts)
}

/// A `timespec` (a clock reading or a kernel timestamp) in ns; 0 before
/// the clock's epoch.
pub(crate) fn timespec_ns(ts: &libc::timespec) -> u64 {
    u64::try_from(ts.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    #[test]
    fn realtime_is_the_system_clock() {
        let sys = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let ours = realtime_ns();
        assert!(ours.abs_diff(sys) < 1_000_000_000, "{ours} vs {sys}");
    }

    #[test]
    fn monotonic_never_goes_back() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a && a > 0);
    }
}
