//! `ethtool -k` output: the one parser of the offload features an interface
//! shows (the plan's read-backs and `inspect` use it).

use std::collections::BTreeMap;

/// One feature as `ethtool -k` shows it: `name: on|off [fixed]`, possibly
/// followed by `[requested on|off]` when the driver did not do what was
/// asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature {
    /// On or off now.
    pub on: bool,
    /// The driver does not let it change (`[fixed]`).
    pub fixed: bool,
}

impl Feature {
    /// `on` or `off`, as ethtool writes it.
    pub fn word(self) -> &'static str {
        if self.on {
            "on"
        } else {
            "off"
        }
    }
}

/// Parses `ethtool -k IF`: every `name: on|off …` line (indented
/// sub-features too) by name. The `Features for IF:` heading and lines whose
/// value is not `on` or `off` are skipped.
pub fn parse_features(text: &str) -> BTreeMap<String, Feature> {
    text.lines()
        .filter_map(|l| l.trim().split_once(':'))
        .filter_map(|(k, v)| {
            let on = match v.split_whitespace().next()? {
                "on" => true,
                "off" => false,
                _ => return None,
            };
            let name = k.trim();
            (!name.is_empty()).then(|| {
                (
                    name.to_string(),
                    Feature {
                        on,
                        fixed: v.contains("[fixed]"),
                    },
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ethtool -k lo`, ethtool 6.1, captured on the development VM.
    const LO: &str = include_str!("../tests/data/ethtool-k-lo.txt");
    /// `ethtool -k` of a veth after `ethtool -K … gro on tso off`.
    const VETH: &str = include_str!("../tests/data/ethtool-k-veth.txt");

    fn f(on: bool, fixed: bool) -> Feature {
        Feature { on, fixed }
    }

    #[test]
    fn loopback() {
        let m = parse_features(LO);
        let lines = LO.lines().filter(|l| l.contains(": o")).count();
        assert_eq!(m.len(), lines, "every feature line is read");
        assert!(!m.keys().any(|k| k.starts_with("Features for")));
        assert_eq!(m["rx-checksumming"], f(true, true));
        assert_eq!(m["tx-checksum-ipv4"], f(false, true));
        assert_eq!(m["generic-segmentation-offload"], f(true, false));
        assert_eq!(m["large-receive-offload"], f(false, true));
    }

    #[test]
    fn veth_with_changed_features() {
        let m = parse_features(VETH);
        let lines = VETH.lines().filter(|l| l.contains(": o")).count();
        assert_eq!(m.len(), lines);
        assert_eq!(m["generic-receive-offload"], f(true, false));
        assert_eq!(m["tcp-segmentation-offload"], f(false, false));
        assert_eq!(m["tx-tcp-segmentation"], f(false, false));
        assert_eq!(m["tx-checksum-ip-generic"], f(true, false));
        assert_eq!(m["tx-checksum-ipv4"], f(false, true));
        assert_eq!(m["generic-receive-offload"].word(), "on");
    }

    #[test]
    fn requested_and_odd_lines() {
        let m = parse_features(
            "Features for x:\n\
             generic-receive-offload: off [requested on]\n\
             \trx-gro-hw: off [fixed] [requested on]\n\
             weird-line without colon\n\
             : on\n\
             something: maybe\n",
        );
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m["generic-receive-offload"], f(false, false));
        assert_eq!(m["rx-gro-hw"], f(false, true));
        assert!(parse_features("").is_empty());
    }
}
