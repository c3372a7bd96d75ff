//! Host facts recorded with a result: CPU steal time from `/proc/stat`
//! (a VM whose hypervisor takes CPU time measures less than the stack can do).

use std::fs;

/// Aggregate CPU jiffies from the first line of `/proc/stat`: (all, steal).
pub fn cpu_jiffies() -> Option<(u64, u64)> {
    let text = fs::read_to_string("/proc/stat").ok()?;
    parse_cpu_line(text.lines().next()?)
}

/// Parses `cpu  user nice system idle iowait irq softirq steal …`.
pub fn parse_cpu_line(line: &str) -> Option<(u64, u64)> {
    let mut it = line.split_whitespace();
    if it.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = it.filter_map(|f| f.parse().ok()).collect();
    // guest and guest_nice (fields 9, 10) are already inside user/nice.
    let all: u64 = v.iter().take(8).sum();
    Some((all, *v.get(7)?))
}

/// Steal share, 0‥1, between two samples.
pub fn steal_share(before: (u64, u64), after: (u64, u64)) -> Option<f64> {
    let all = after.0.checked_sub(before.0)?;
    let steal = after.1.checked_sub(before.1)?;
    (all > 0).then(|| steal as f64 / all as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat() {
        let a = parse_cpu_line("cpu  100 0 50 800 10 0 5 35 0 0").unwrap();
        assert_eq!(a, (1000, 35));
        let b = parse_cpu_line("cpu  200 0 100 1600 20 0 10 70 0 0").unwrap();
        assert!((steal_share(a, b).unwrap() - 0.035).abs() < 1e-9);
        assert!(parse_cpu_line("cpu0 1 2 3").is_none());
        assert!(parse_cpu_line("cpu 1 2").is_none());
        assert!(cpu_jiffies().is_some());
    }
}
