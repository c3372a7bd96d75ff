//! What `linerate throughput` is asked to run, typed and validated before
//! anything runs.

use std::net::{IpAddr, SocketAddr};

use crate::units::BitRate;

use super::model::{FlowDir, LinkSource, ParamError, ThroughputParams};

/// A testbed resolved to plain data: where each end runs and what the link is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BedTarget {
    /// The bed's name.
    pub name: String,
    /// Network namespace of the client (host a).
    pub client_netns: String,
    /// Network namespace of the server (host b).
    pub server_netns: String,
    /// The server's address in host b.
    pub server_ip: IpAddr,
    /// The server's port (None: any free port).
    pub port: Option<u16>,
    /// The bed's emulated link, if it has one.
    pub link: Option<BitRate>,
    /// The bed's MTU, if it set one.
    pub mtu_bytes: Option<u32>,
}

/// Against what the test runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A `linerate server` at this address.
    Server(SocketAddr),
    /// A discard sink at this address (one-sided: sender figures only).
    Discard(SocketAddr),
    /// A testbed: a server on a thread in host b, the client in host a.
    Bed(BedTarget),
}

/// Why a configuration cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// No run asked for.
    #[error("no send path given")]
    NoRuns,
    /// A run's parameters are refused.
    #[error(transparent)]
    Params(#[from] ParamError),
    /// One-sided tests only send.
    #[error("a discard sink only receives: the reverse and bidirectional directions need a linerate server")]
    DiscardReceives,
}

/// A validated `linerate throughput` configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Against what.
    pub target: Target,
    /// One run per send path, in order (the same parameters otherwise).
    pub runs: Vec<ThroughputParams>,
    /// The link speed given for the test (it overrides a bed's).
    pub link: Option<BitRate>,
}

impl Config {
    /// Checks every run before any runs.
    pub fn new(
        target: Target,
        runs: Vec<ThroughputParams>,
        link: Option<BitRate>,
    ) -> Result<Self, ConfigError> {
        if runs.is_empty() {
            return Err(ConfigError::NoRuns);
        }
        for p in &runs {
            p.validate(None)?;
            if matches!(target, Target::Discard(_))
                && p.flows().iter().any(|d| *d != FlowDir::Forward)
            {
                return Err(ConfigError::DiscardReceives);
            }
        }
        Ok(Self { target, runs, link })
    }

    /// The link speed for the maximum possible: the given one, else the bed's.
    pub fn line(&self) -> Option<(BitRate, LinkSource)> {
        match (&self.link, &self.target) {
            (Some(l), _) => Some((*l, LinkSource::Given)),
            (None, Target::Bed(b)) => b.link.map(|l| (l, LinkSource::Bed)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::throughput::model::Direction;

    #[test]
    fn validated_before_running() {
        let addr = SocketAddr::from(([127, 0, 0, 1], crate::wire::control::DEFAULT_PORT));
        assert_eq!(
            Config::new(Target::Server(addr), vec![], None),
            Err(ConfigError::NoRuns)
        );
        let reverse = ThroughputParams {
            direction: Direction::Reverse,
            ..ThroughputParams::default()
        };
        assert_eq!(
            Config::new(Target::Discard(addr), vec![reverse.clone()], None),
            Err(ConfigError::DiscardReceives)
        );
        let bed = BedTarget {
            name: "x".into(),
            client_netns: "lr-x-a".into(),
            server_netns: "lr-x-b".into(),
            server_ip: "198.18.0.2".parse().unwrap(),
            port: None,
            link: Some(BitRate::from_mbps(100)),
            mtu_bytes: None,
        };
        let c = Config::new(Target::Bed(bed.clone()), vec![reverse.clone()], None).unwrap();
        assert_eq!(c.line(), Some((BitRate::from_mbps(100), LinkSource::Bed)));
        let c = Config::new(Target::Bed(bed), vec![reverse], Some(BitRate::from_gbps(1))).unwrap();
        assert_eq!(c.line(), Some((BitRate::from_gbps(1), LinkSource::Given)));
    }
}
