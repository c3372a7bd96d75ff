//! `linerate throughput` as one call: starts a testbed's server when there
//! is one, runs the client once per send path (in the bed's host a when
//! there is a bed), and returns each run as a finished document: the result
//! built, its figures derived and its flags raised by
//! `linerate_core::throughput::assess`, in the common envelope.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use linerate_core::progress::Progress;
use linerate_core::result::Envelope;
use linerate_core::throughput::assess::{self, Measured, Setting};
use linerate_core::throughput::config::{Config, ConfigError, Target};
use linerate_core::throughput::model::{ThroughputParams, ThroughputResult, SCHEMA, VERSION};

use super::client::{self, ClientError};
use super::server::{Server, ServerConfig};
use crate::netns::{spawn_in, NetnsError};

/// Why a throughput test could not run (a result with flags is not an error).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The bed's server did not start.
    #[error("cannot start the server in {place}: {reason}")]
    Server {
        /// The namespace.
        place: String,
        /// Why.
        reason: String,
    },
    /// A thread could not enter its namespace or be spawned.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// The client thread panicked.
    #[error("the client thread panicked")]
    Panicked,
    /// The session could not run.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The parameters are refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No run was made.
    #[error("the test produced no result")]
    NoResult,
}

/// One `linerate.throughput` document per run, in the order of
/// `cfg.runs`; fewer when `interrupt` ended the series early (the run it
/// cut short is returned, flagged incomplete).
pub fn run(
    cfg: &Config,
    progress: &mut dyn Progress,
    interrupt: &Arc<AtomicBool>,
) -> Result<Vec<Envelope<ThroughputResult>>, RunError> {
    let bed_server = match &cfg.target {
        Target::Bed(b) => Some(LocalServer::start(
            Some(&b.server_netns),
            SocketAddr::new(b.server_ip, b.port.unwrap_or(0)),
        )?),
        _ => None,
    };
    let (addr, client_ns, one_sided, bed_mtu) = match &cfg.target {
        Target::Server(a) => (*a, None, false, None),
        Target::Discard(a) => (*a, None, true, None),
        Target::Bed(b) => (
            bed_server
                .as_ref()
                .map_or(SocketAddr::new(b.server_ip, 0), LocalServer::addr),
            Some(b.client_netns.clone()),
            false,
            b.mtu_bytes,
        ),
    };
    let mut out = Vec::new();
    for (i, params) in cfg.runs.iter().enumerate() {
        if i > 0 && interrupt.load(Ordering::Relaxed) {
            break;
        }
        let t0 = crate::host::unix_now_ns();
        let load = crate::host::LoadSampler::start();
        let (measured, path) = run_client(
            addr,
            client_ns.as_deref(),
            one_sided,
            params,
            progress,
            interrupt,
        )?;
        let setting = Setting {
            server: addr.to_string(),
            ipv6: addr.is_ipv6(),
            link: cfg.line(),
            interface: path.as_ref().map(|(i, _)| i.clone()),
            mtu_bytes: path.and_then(|(_, m)| m).or(bed_mtu),
            burst_bytes: match &cfg.target {
                Target::Bed(b) => b.burst_bytes,
                _ => None,
            },
            one_sided,
            omit_ns: cfg.omit_ns,
        };
        let mut result = assess::result(&setting, params.clone(), measured);
        result.host_load = load.finish();
        let flags = assess::assess(&result);
        out.push(
            Envelope::new(SCHEMA, VERSION, result)
                .started(t0)
                .on(crate::host::facts())
                .flagged(flags),
        );
    }
    drop(bed_server);
    Ok(out)
}

/// The interface toward `addr` and its MTU, in the calling thread's namespace.
fn path_to(addr: SocketAddr) -> PathSeen {
    let name = crate::stamps::egress_interface(addr.ip())?;
    let mtu = crate::sys::packet::mtu(&name).ok();
    Some((name, mtu))
}

/// The interface toward the server and its MTU, when found.
type PathSeen = Option<(String, Option<u32>)>;

type ClientOutcome = (Result<client::Outcome, ClientError>, PathSeen);

/// One session on a thread of its own (in `ns` when given: its sockets
/// belong to the thread's namespace); its live totals reach `progress` on
/// this thread.
fn run_client(
    addr: SocketAddr,
    ns: Option<&str>,
    one_sided: bool,
    params: &ThroughputParams,
    progress: &mut dyn Progress,
    interrupt: &Arc<AtomicBool>,
) -> Result<(Measured, PathSeen), RunError> {
    let p = params.clone();
    let flag = Arc::clone(interrupt);
    let (tx, rx) = mpsc::channel::<(f64, u64, u64)>();
    let handle = spawn_in(ns, "lr-client", move || -> ClientOutcome {
        let path = path_to(addr);
        let mut send = move |t: f64, a: u64, b: u64| {
            let _ = tx.send((t, a, b));
        };
        let outcome = if one_sided {
            client::run_discard(addr, &p, Some(&mut send), &flag)
        } else {
            client::run_until(addr, &p, Some(&mut send), &flag)
        };
        (outcome, path)
    })?;
    // The channel closes when the client thread ends.
    for (t, a, b) in rx {
        progress.totals(t, a, b);
    }
    progress.done();
    let (outcome, path) = handle.join().map_err(|_| RunError::Panicked)??;
    let o = outcome?;
    Ok((
        Measured {
            client: o.client,
            server: o.server,
            steal_share: o.steal_share,
        },
        path,
    ))
}

/// One test with `params` over loopback against a server on a thread of
/// this process, without progress (`linerate throughput --in-process`
/// starts the same server: [`LocalServer`]).
pub fn loopback(params: ThroughputParams) -> Result<Envelope<ThroughputResult>, RunError> {
    let server = LocalServer::start(None, SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let cfg = Config::new(Target::Server(server.addr()), vec![params], None)?;
    let mut silent = linerate_core::progress::Silent;
    let runs = run(&cfg, &mut silent, &Arc::new(AtomicBool::new(false)))?;
    drop(server);
    runs.into_iter().next().ok_or(RunError::NoResult)
}

/// A `linerate server` on a thread of this process (inside a bed's host b,
/// or in the caller's namespace), for as long as this value lives; it
/// requires the key this process's clients have ([`super::control::set_client_key`]),
/// if any.
#[derive(Debug)]
pub struct LocalServer {
    addr: SocketAddr,
    stop: super::server::StopHandle,
    thread: Option<std::thread::JoinHandle<Result<(), NetnsError>>>,
}

impl LocalServer {
    /// Starts a server on `bind` (port 0: any) in namespace `ns`.
    pub fn start(ns: Option<&str>, bind: SocketAddr) -> Result<Self, RunError> {
        let place = ns.unwrap_or("this namespace").to_string();
        let (tx, rx) = mpsc::channel();
        let thread = spawn_in(ns, "lr-server", move || {
            let server = Server::bind(ServerConfig {
                bind,
                once: false,
                max_clients: 1,
                max_duration: None,
                log: Arc::new(|_: &str| {}),
                limits: super::server::Limits::default(),
                // This process's clients refuse a server without their key.
                access: super::control::client_key()
                    .map_or(super::server::Access::Anyone, super::server::Access::Key),
                iperf3: None,
            });
            match server {
                Ok(server) => {
                    let addr = server.local_addr();
                    let stop = server.stop_handle();
                    let _ = tx.send(
                        addr.map(|a| (a, stop))
                            .map_err(|e| linerate_core::error::chain(&e)),
                    );
                    let _ = server.run();
                }
                Err(e) => {
                    let _ = tx.send(Err(linerate_core::error::chain(&e)));
                }
            }
        })?;
        match rx.recv() {
            Ok(Ok((addr, stop))) => Ok(Self {
                addr,
                stop,
                thread: Some(thread),
            }),
            Ok(Err(reason)) => Err(RunError::Server { place, reason }),
            Err(_) => {
                let reason = thread
                    .join()
                    .ok()
                    .and_then(Result::err)
                    .map_or("it ended early".to_string(), |e| {
                        linerate_core::error::chain(&e)
                    });
                Err(RunError::Server { place, reason })
            }
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
