//! `linerate server`: flags and running the server.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use clap::Args;
use linerate_core::units::parse_duration;
use linerate_core::wire::control::DEFAULT_PORT;
use linerate_io::throughput::server::{Server, ServerConfig};

use crate::Failure;

/// Flags of `linerate server`.
#[derive(Debug, Args)]
pub(crate) struct ServerArgs {
    /// Address to listen on [default: all addresses, IPv6 and IPv4].
    #[arg(long, value_name = "ADDR")]
    pub(crate) bind: Option<IpAddr>,
    /// Port to listen on (control and TCP data connections).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub(crate) port: u16,
    /// Serve one session, then exit.
    #[arg(long)]
    pub(crate) once: bool,
    /// Most clients served at once; more are refused with a message.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) max_clients: u16,
    /// Longest test time a client may ask for.
    #[arg(long, value_name = "S", default_value = "300", value_parser = parse_duration)]
    pub(crate) max_duration: Duration,
}

/// Runs `linerate server` until killed (or after one session with --once).
pub(crate) fn run(args: &ServerArgs, ctx: &crate::Ctx) -> Result<(), Failure> {
    let log = ctx.server_log();
    let mk = |ip: IpAddr| ServerConfig {
        bind: SocketAddr::new(ip, args.port),
        once: args.once,
        max_clients: usize::from(args.max_clients),
        max_duration: Some(args.max_duration),
        log: log.clone(),
    };
    let server = match args.bind {
        Some(ip) => Server::bind(mk(ip)),
        None => Server::bind(mk(IpAddr::V6(Ipv6Addr::UNSPECIFIED)))
            .or_else(|_| Server::bind(mk(IpAddr::from([0u8; 4])))),
    }?;
    Ok(server.run()?)
}
