//! iperf3, both ways: `linerate server` serves iperf3 clients ([`server`]),
//! and `linerate throughput --iperf3` runs against iperf3 servers
//! ([`client`]). The protocol is `linerate_core::wire::iperf3` (facts and
//! the sans-IO session machines); this module does the sockets: the
//! control connection, the data streams ([`streams`]), the UDP connect
//! handshake, and RSA authentication ([`auth`]). docs/IPERF3.md describes
//! the protocol and what linerate does with each option.

pub mod auth;
pub mod client;
pub mod server;
mod streams;

pub use server::{serve, Hub, HubConfig, Listener};
