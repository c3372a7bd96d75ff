//! `linerate server`: flags and running the server.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use clap::Args;
use linerate_core::units::{parse_duration, BitRate};
use linerate_core::wire::control::DEFAULT_PORT;
use linerate_core::wire::control_auth::Key;
use linerate_core::wire::iperf3::{self, auth};
use linerate_io::iperf3::auth::ServerAuth;
use linerate_io::iperf3::{Hub, HubConfig, Listener};
use linerate_io::throughput::server::{Access, Limits, Server, ServerConfig};

use crate::Failure;

/// The environment variable that may hold the pre-shared key itself.
pub(crate) const KEY_ENV: &str = "LINERATE_AUTH_KEY";

// Flags of `linerate server`.
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
    /// Serve anyone who reaches the port without a key. Without a key and
    /// without this flag only loopback peers are served (docs/SECURITY.md).
    #[arg(long, conflicts_with = "auth_file")]
    pub(crate) no_auth: bool,
    /// Connections waiting for authentication at once; the oldest is
    /// closed to make room for a new one.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub(crate) max_pending: u16,
    /// Connections waiting for authentication from one address at once.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub(crate) max_pending_per_source: u16,
    /// Most streams a session may ask for.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(crate) max_streams: u16,
    /// Most memory one session's buffers may take, MiB (computed from its
    /// parameters before it is accepted).
    #[arg(long, value_name = "MIB", default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub(crate) max_session_memory: u64,
    /// Most total rate across all clients (e.g. 10G); a session asking for
    /// more than what is left, or for no rate (no --rate), is refused.
    #[arg(long, value_name = "RATE")]
    pub(crate) max_rate: Option<BitRate>,
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

/// The pre-shared key from `--auth-file`, else
/// from LINERATE_AUTH_KEY; `None` when neither is given.
pub(crate) fn key(auth_file: Option<&std::path::Path>) -> Result<Option<Key>, Failure> {
    let text = match auth_file {
        Some(p) => std::fs::read_to_string(p)
            .with_context(|| format!("--auth-file {}: cannot read it", p.display()))?,
        None => match std::env::var(KEY_ENV) {
            Ok(k) => k,
            Err(std::env::VarError::NotPresent) => return Ok(None),
            Err(e) => return Err(anyhow!("{KEY_ENV}: {e}").into()),
        },
    };
    let what = auth_file.map_or_else(|| KEY_ENV.to_string(), |p| p.display().to_string());
    Ok(Some(Key::from_text(&text).with_context(|| what)?))
}

/// The flags as a validated configuration (without the bind address).
fn limits(args: &ServerArgs) -> Result<Limits, Failure> {
    let rate = match args.max_rate {
        None => None,
        Some(r) if r.bps() >= 1 => Some(r.bps()),
        Some(_) => return Err(anyhow!("--max-rate: must be at least 1 bit/s").into()),
    };
    Ok(Limits {
        pending_total: usize::from(args.max_pending),
        pending_per_source: usize::from(args.max_pending_per_source),
        streams: args.max_streams,
        session_memory_bytes: args.max_session_memory << 20,
        max_rate_bits_per_s: rate,
    })
}

/// Runs `linerate server` until killed (or after one session with --once).
pub(crate) fn run(
    args: &ServerArgs,
    auth_file: Option<&std::path::Path>,
    ctx: &crate::Ctx,
) -> Result<(), Failure> {
    if args.max_duration.is_zero() {
        return Err(
            anyhow!("--max-duration: must be above 0 (a server that refuses every test)").into(),
        );
    }
    if let Some(ip) = args.bind {
        if ip.is_multicast() || ip == IpAddr::from([255u8; 4]) {
            return Err(anyhow!(
                "--bind {ip}: a multicast or broadcast address cannot accept connections"
            )
            .into());
        }
    }
    let limits = limits(args)?;
    let access = match (key(auth_file)?, args.no_auth) {
        (Some(k), false) => Access::Key(k),
        (Some(_), true) => {
            return Err(anyhow!("--no-auth with a key ({KEY_ENV}): give one or the other").into())
        }
        (None, true) => Access::Anyone,
        (None, false) => Access::LoopbackOnly,
    };
    // The log never fails a session: write errors are ignored, and every
    // line is escaped once more (peer text is escaped where it is quoted).
    let log = ctx.server_log();
    // The process ends the iperf3 sessions when it ends.
    let stop = Arc::new(AtomicBool::new(false));
    let hub = match args.no_iperf3 {
        true => None,
        false => Some(Hub::new(
            HubConfig {
                max_clients: usize::from(args.max_clients),
                max_duration: Some(args.max_duration),
                max_rate_bits_per_s: limits.max_rate_bits_per_s,
                auth: iperf3_auth(args)?,
                // Without RSA authentication, iperf3 clients are served as
                // linerate's own: loopback only unless --no-auth.
                loopback_only: matches!(access, Access::LoopbackOnly | Access::Key(_)),
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
        limits,
        access: access.clone(),
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
