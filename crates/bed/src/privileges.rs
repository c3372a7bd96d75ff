//! Can this process build beds? (root with CAP_SYS_ADMIN and CAP_NET_ADMIN,
//! and `ip` installed.) Read from `/proc/self/status`, no syscalls.

use std::path::PathBuf;

const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;

/// Where a tool is, searching `PATH` and the sbin directories.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `Ok` when this process may build beds; otherwise why not.
pub fn check() -> Result<(), String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::trim)
    };
    let euid = field("Uid:")
        .and_then(|v| v.split_whitespace().nth(1))
        .unwrap_or("?");
    if euid != "0" {
        return Err(format!("not root (effective uid {euid}); beds need root"));
    }
    let caps = field("CapEff:")
        .and_then(|v| u64::from_str_radix(v, 16).ok())
        .unwrap_or(0);
    for (bit, name) in [
        (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
        (CAP_NET_ADMIN, "CAP_NET_ADMIN"),
    ] {
        if caps & (1 << bit) == 0 {
            return Err(format!("root but without {name}"));
        }
    }
    if find_tool("ip").is_none() {
        return Err("`ip` (iproute2) is not installed".into());
    }
    Ok(())
}

/// Tools the end-to-end tests use beside `ip`: tc (link emulation), nft
/// (loss), ethtool (offloads), sysctl (per-namespace settings).
pub const TEST_TOOLS: [&str; 4] = ["tc", "nft", "ethtool", "sysctl"];

/// For privileged tests: `true` when the test can run (root, `ip` and
/// [`TEST_TOOLS`]). Otherwise prints a loud `SKIPPED: <test>: <why>` to
/// stderr and returns `false` — or panics when the environment variable
/// `LINERATE_REQUIRE_PRIV=1` is set (CI).
pub fn require(test_name: &str) -> bool {
    let tools = || match TEST_TOOLS.iter().find(|t| find_tool(t).is_none()) {
        Some(t) => Err(format!(
            "`{t}` is not installed (apt-get install iproute2 nftables ethtool procps)"
        )),
        None => Ok(()),
    };
    match check().and_then(|()| tools()) {
        Ok(()) => true,
        Err(why) => {
            if std::env::var("LINERATE_REQUIRE_PRIV").as_deref() == Ok("1") {
                panic!("{test_name}: LINERATE_REQUIRE_PRIV=1 but {why}");
            }
            eprintln!("SKIPPED: {test_name}: {why}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_sh() {
        assert!(find_tool("sh").is_some());
        assert!(find_tool("lr-no-such-tool").is_none());
    }
}
