//! Facts about this host, recorded in every result's envelope
//! ([`linerate_core::result::HostFacts`]).

use std::fs;

use linerate_core::result::HostFacts;

/// Reads what `/proc` and `/sys` say about this host; a fact that cannot be
/// read is left out, never guessed.
pub fn facts() -> HostFacts {
    let read = |p: &str| {
        fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let (cpu_model, hypervisor_flag) = parse_cpuinfo(&cpuinfo);
    HostFacts {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        cpu_model,
        cpus: std::thread::available_parallelism()
            .ok()
            .and_then(|n| u32::try_from(n.get()).ok()),
        virtualized: match read("/sys/hypervisor/type") {
            Some(_) => Some(true),
            None if cpuinfo.is_empty() => None,
            None => Some(hypervisor_flag),
        },
    }
}

/// The first `model name` and whether the `hypervisor` CPU flag is set.
fn parse_cpuinfo(text: &str) -> (Option<String>, bool) {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    let model = field("model name")
        .or_else(|| field("Model"))
        .filter(|m| !m.is_empty());
    let hyper = field("flags").is_some_and(|f| f.split_whitespace().any(|x| x == "hypervisor"));
    (model, hyper)
}

/// Now, as Unix time in nanoseconds (CLOCK_REALTIME), for a result's
/// `started_at`.
pub fn unix_now_ns() -> u64 {
    crate::stamps::realtime_ns()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo() {
        let (m, h) = parse_cpuinfo(
            "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu vme hypervisor\n",
        );
        assert_eq!(m.as_deref(), Some("AMD EPYC 7B13"));
        assert!(h);
        assert_eq!(parse_cpuinfo("flags: fpu"), (None, false));
        let f = facts();
        assert!(f.kernel.is_some() && f.cpus.unwrap_or(0) >= 1, "{f:?}");
        assert!(unix_now_ns() > 1_600_000_000_000_000_000);
    }
}
