//! `linerate server`: flags and running the server.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use linerate_core::units::parse_duration;
use linerate_core::wire::control::DEFAULT_PORT;
use linerate_core::wire::iperf3::{self, auth};
use linerate_io::iperf3::auth::ServerAuth;
use linerate_io::iperf3::{Hub, HubConfig, Listener};
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
    /// Port on which iperf3 clients are served too (TCP and UDP), besides
    /// --port, where they are recognised by their cookie.
    #[arg(long, value_name = "PORT", default_value_t = iperf3::DEFAULT_PORT, conflicts_with = "no_iperf3")]
    pub(crate) iperf3_port: u16,
    /// Serve no iperf3 clients (they are refused on --port, and no
    /// --iperf3-port is opened).
    #[arg(long)]
    pub(crate) no_iperf3: bool,
    /// iperf3 authentication: the server's RSA private key (PEM).
    #[arg(long, value_name = "FILE", requires = "authorized_users_path")]
    pub(crate) rsa_private_key_path: Option<PathBuf>,
    /// iperf3 authentication: the users file (`user,sha256("{user}password")` lines).
    #[arg(long, value_name = "FILE", requires = "rsa_private_key_path")]
    pub(crate) authorized_users_path: Option<PathBuf>,
    /// iperf3 authentication: largest accepted clock difference to a client, s.
    #[arg(long, value_name = "S", default_value_t = auth::DEFAULT_SKEW_S)]
    pub(crate) time_skew_threshold: i64,
}

/// Runs `linerate server` until killed (or after one session with --once).
pub(crate) fn run(args: &ServerArgs, ctx: &crate::Ctx) -> Result<(), Failure> {
    let log = ctx.server_log();
    // The process ends the iperf3 sessions when it ends.
    let stop = Arc::new(AtomicBool::new(false));
    let hub = match args.no_iperf3 {
        true => None,
        false => Some(Hub::new(
            HubConfig {
                max_clients: usize::from(args.max_clients),
                max_duration: Some(args.max_duration),
                max_rate_bits_per_s: None,
                auth: iperf3_auth(args)?,
                log: log.clone(),
            },
            Arc::clone(&stop),
        )),
    };
    let mk = |ip: IpAddr| ServerConfig {
        bind: SocketAddr::new(ip, args.port),
        once: args.once,
        max_clients: usize::from(args.max_clients),
        max_duration: Some(args.max_duration),
        log: log.clone(),
        iperf3: hub.clone(),
    };
    let server = match args.bind {
        Some(ip) => Server::bind(mk(ip)),
        None => Server::bind(mk(IpAddr::V6(Ipv6Addr::UNSPECIFIED)))
            .or_else(|_| Server::bind(mk(IpAddr::from([0u8; 4])))),
    }?;
    if let Some(hub) = &hub {
        // UDP streams of iperf3 clients on linerate's own port.
        hub.listen_udp(server.local_addr()?)?;
        let mut said = Vec::new();
        let mut listener = None;
        if args.iperf3_port != args.port {
            let bind = |ip: IpAddr| Listener::bind(hub, SocketAddr::new(ip, args.iperf3_port));
            let bound = match args.bind {
                Some(ip) => bind(ip),
                None => bind(IpAddr::V6(Ipv6Addr::UNSPECIFIED))
                    .or_else(|_| bind(IpAddr::from([0u8; 4]))),
            };
            match bound {
                Ok(l) => {
                    if let Ok(a) = l.local_addr() {
                        said.push(format!("iperf3 clients served on {a} (TCP and UDP) and on port {}", args.port));
                    }
                    listener = Some(l);
                }
                Err(e) => said.push(format!(
                    "warning: iperf3 clients are served on port {} only: {e} (--iperf3-port to choose another port, --no-iperf3 to turn this off)",
                    args.port
                )),
            }
        }
        let log = log.clone();
        std::thread::Builder::new()
            .name("lr-i3-listen".into())
            .spawn(move || {
                // After the server's own first line ("listening on …"),
                // which scripts wait for.
                std::thread::sleep(Duration::from_millis(200));
                for l in said {
                    log(&l);
                }
                if let Some(l) = listener {
                    l.run();
                }
            })?;
    }
    Ok(server.run()?)
}

/// The iperf3 authentication setting, when both files are given.
fn iperf3_auth(args: &ServerArgs) -> Result<Option<Arc<ServerAuth>>, Failure> {
    match (&args.rsa_private_key_path, &args.authorized_users_path) {
        (Some(key), Some(users)) => Ok(Some(Arc::new(ServerAuth::load(
            key,
            users,
            args.time_skew_threshold,
        )?))),
        _ => Ok(None),
    }
}
