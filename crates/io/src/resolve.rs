//! Host names (or address literals, IPv6 ones optionally in brackets) to a
//! socket address.

use std::net::{SocketAddr, ToSocketAddrs as _};

/// Why a host has no usable address.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The lookup failed.
    #[error("cannot resolve '{host}'")]
    Lookup {
        /// The host as given.
        host: String,
        /// The resolver's error.
        source: std::io::Error,
    },
    /// The lookup found no address.
    #[error("'{host}' has no address")]
    NoAddress {
        /// The host as given.
        host: String,
    },
    /// IPv6 asked for, none found.
    #[error("'{host}' has no IPv6 address")]
    NoIpv6 {
        /// The host as given.
        host: String,
    },
}

/// `host` at `port`: its first address, or with `ipv6` its first IPv6 one.
pub fn resolve(host: &str, port: u16, ipv6: bool) -> Result<SocketAddr, ResolveError> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let mut addrs = (host, port)
        .to_socket_addrs()
        .map_err(|source| ResolveError::Lookup {
            host: host.to_string(),
            source,
        })?;
    let found = if ipv6 {
        addrs.find(SocketAddr::is_ipv6)
    } else {
        addrs.next()
    };
    found.ok_or_else(|| match ipv6 {
        true => ResolveError::NoIpv6 { host: host.into() },
        false => ResolveError::NoAddress { host: host.into() },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_resolve_and_ipv6_is_not_ignored() {
        let a = resolve("127.0.0.1", 5, false).unwrap();
        assert_eq!(a, SocketAddr::from(([127, 0, 0, 1], 5)));
        assert_eq!(resolve("[::1]", 5, true).unwrap().port(), 5);
        assert!(matches!(
            resolve("127.0.0.1", 5, true),
            Err(ResolveError::NoIpv6 { .. })
        ));
    }
}
