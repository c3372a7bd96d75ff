//! `linerate latency --load`: the echo exchanges on an idle path, then
//! under each load level while linerate's own throughput flows run.
//!
//! Only public entry points are used: [`crate::echo::run`] measures each
//! phase (the same exchange settings every time) and
//! [`crate::throughput::run::run`] runs each load on a thread of its own,
//! against the same server or bed. Per level: the load starts; once its
//! first live totals show bytes moving (its flows run), it settles for the
//! plan's settle time (left out of its figures as throughput's `omit`);
//! the loaded exchanges run; the load sends on past them (the reply
//! timeout and `LOAD_TAIL`) and ends on its own, unflagged.
//!
//! Clocks: the phases are scheduled on CLOCK_MONOTONIC (`Instant`); the
//! stages are CLOCK_REALTIME stamps as in every latency run; the host's CPU
//! busy share comes from `/proc/stat` jiffies read around the loaded phase.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use linerate_core::latency::load::{CpuTimes, LevelMeasured, LoadPlan, LoadReport, LoadThroughput};
use linerate_core::latency::{assess, Config, LatencyReport, LatencyRun, SCHEMA, SCHEMA_VERSION};
use linerate_core::progress::Progress;
use linerate_core::result::Envelope;
use linerate_core::throughput::config::{Config as LoadConfig, ConfigError, Target};

use crate::echo::EchoIoError;
use crate::throughput::run::{LocalServer, RunError};

/// How long a load may take to get its flows moving before the run gives up.
pub const START_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a run under load could not go on (a load that failed once started
/// is a flagged result, not an error).
#[derive(Debug, thiserror::Error)]
pub enum LoadRunError {
    /// An echo phase failed.
    #[error("echo exchanges")]
    Echo(#[source] EchoIoError),
    /// The server for the load could not start in this process.
    #[error("load server")]
    Server(#[source] RunError),
    /// A load's parameters were refused.
    #[error("load parameters")]
    Config(#[source] ConfigError),
    /// A load never got its flows moving.
    #[error("load {spec} did not start: {reason}")]
    Start {
        /// The load.
        spec: String,
        /// What happened.
        reason: String,
    },
}

/// Against what the load runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadAgainst {
    /// A throughput target (a `linerate server`, a bed): the same the
    /// exchanges go to.
    Target(Target),
    /// A server started in this process on the echo target's address (the
    /// exchanges' reflector is in this process too).
    InProcess,
}

/// Progress of a load on its thread: tells the waiting phase once bytes
/// move.
struct Started(Option<mpsc::Sender<()>>);

impl Progress for Started {
    fn totals(&mut self, _elapsed_s: f64, sent: u64, received: u64) {
        if sent + received > 0 {
            if let Some(tx) = self.0.take() {
                let _ = tx.send(());
            }
        }
    }
}

type LoadOutcome =
    Result<Vec<Envelope<linerate_core::throughput::model::ThroughputResult>>, RunError>;

/// The host's CPU times now, if `/proc/stat` reads.
fn cpu_now() -> Option<CpuTimes> {
    CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Runs the idle phase, then each level of `plan` under its load against
/// `against`, and returns one latency document: `runs` holds the idle
/// run then each loaded run, the `load` section sets them side by side,
/// and the flags include the load's ([`linerate_core::latency::load::assess`]).
/// `echo` must run one configuration, bounded by time (as
/// [`LoadPlan::new`] checks).
pub fn run(
    echo: &Config,
    plan: &LoadPlan,
    against: &LoadAgainst,
    progress: &mut dyn Progress,
) -> Result<Envelope<LatencyReport>, LoadRunError> {
    let t0 = crate::host::unix_now_ns();
    let timeout = echo.schedule.timeout;
    let (target, _server) = match against {
        LoadAgainst::Target(t) => (t.clone(), None),
        LoadAgainst::InProcess => {
            let s = LocalServer::start(None, SocketAddr::new(echo.target.ip(), 0))
                .map_err(LoadRunError::Server)?;
            (Target::Server(s.addr()), Some(s))
        }
    };
    let configs = plan
        .configs(&target, timeout)
        .map_err(LoadRunError::Config)?;
    let sampler = crate::host::LoadSampler::start();
    progress.step("idle phase: no load");
    let idle = crate::echo::run(echo, progress).map_err(LoadRunError::Echo)?;
    let mut report = idle.result;
    let mut runs: Vec<LatencyRun> = std::mem::take(&mut report.runs);
    for r in &mut runs {
        r.settings = vec![("load".into(), "none".into())];
    }
    let mut measured = Vec::with_capacity(configs.len());
    for (level, tcfg) in plan.levels.iter().zip(configs) {
        let spec = level.config;
        progress.step(&format!(
            "load {spec}: starting, {:?} to settle",
            plan.settle
        ));
        let (loaded, m) = one_level(echo, plan, &spec.to_string(), tcfg, progress)?;
        measured.push(LevelMeasured {
            settings: level.settings.clone(),
            load: spec,
            run: runs.len(),
            throughput: m.throughput,
            sustained: m.sustained,
            host_cpu_busy_pct: m.busy,
        });
        report.same_clock &= loaded.same_clock;
        runs.extend(loaded.runs.into_iter().map(|mut r| {
            r.settings = vec![("load".into(), spec.to_string())];
            r
        }));
    }
    report.load = LoadReport::build(&runs, 0, plan.settle, measured);
    report.runs = runs;
    report.host_load = sampler.finish();
    report.derive();
    let flags = assess(&report);
    Ok(Envelope::new(SCHEMA, SCHEMA_VERSION, report)
        .started(t0)
        .on(crate::host::facts())
        .flagged(flags))
}

/// The loaded phase's runs and what its report said of the clock.
struct Loaded {
    runs: Vec<LatencyRun>,
    same_clock: bool,
}

/// What one level's load did.
struct LevelOutcome {
    throughput: Result<LoadThroughput, String>,
    sustained: bool,
    busy: Option<f64>,
}

/// One level: the load started and settled, the loaded exchanges, the load
/// joined.
fn one_level(
    echo: &Config,
    plan: &LoadPlan,
    spec: &str,
    tcfg: LoadConfig,
    progress: &mut dyn Progress,
) -> Result<(Loaded, LevelOutcome), LoadRunError> {
    let spec = spec.to_string();
    let load_time = plan.load_time(echo.schedule.timeout);
    let interrupt = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let spawned = Instant::now();
    let flag = Arc::clone(&interrupt);
    let thread = std::thread::Builder::new()
        .name("lr-load".into())
        .spawn(move || -> LoadOutcome {
            crate::throughput::run::run(&tcfg, &mut Started(Some(tx)), &flag)
        })
        .map_err(|e| LoadRunError::Start {
            spec: spec.clone(),
            reason: format!("cannot spawn its thread: {e}"),
        })?;
    // Either bytes move, or the thread ends (the channel closes) with why.
    if rx.recv_timeout(START_TIMEOUT).is_err() {
        interrupt.store(true, std::sync::atomic::Ordering::Relaxed);
        let reason = match thread.join() {
            Ok(Err(e)) => linerate_core::error::chain(&e),
            Ok(Ok(_)) => "it ended without moving a byte".into(),
            Err(_) => "its thread panicked".into(),
        };
        return Err(LoadRunError::Start { spec, reason });
    }
    std::thread::sleep(plan.settle);
    progress.step(&format!("loaded phase: load {spec}"));
    let before = cpu_now();
    let phase = crate::echo::run(echo, progress);
    let after = cpu_now();
    let echo_end = Instant::now();
    // The load's sending ends no earlier than its planned time counted from
    // the spawn (its flows start after it).
    let planned_end = spawned + plan.settle + load_time;
    let still_running = !thread.is_finished();
    let phase = match phase {
        Ok(p) => p,
        Err(e) => {
            interrupt.store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = thread.join();
            return Err(LoadRunError::Echo(e));
        }
    };
    let throughput = match thread.join() {
        Ok(Ok(docs)) => docs
            .first()
            .map(|d| LoadThroughput::of(&d.result, &d.flags))
            .ok_or_else(|| "the load produced no result".to_string()),
        Ok(Err(e)) => Err(linerate_core::error::chain(&e)),
        Err(_) => Err("its thread panicked".into()),
    };
    let busy = before.zip(after).and_then(|(b, a)| b.busy_pct_until(&a));
    Ok((
        Loaded {
            same_clock: phase.result.same_clock,
            runs: phase.result.runs,
        },
        LevelOutcome {
            throughput,
            sustained: still_running && echo_end <= planned_end,
            busy,
        },
    ))
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use linerate_core::latency::load::{LoadSpec, StageSum, PARTS};
    use linerate_core::latency::{EchoProtocol, Peer, Request, Stage};
    use linerate_core::progress::Lines;

    use super::*;

    /// On loopback, without root: UDP exchanges against a reflector in this
    /// process, idle and under a paced TCP load from a server in this
    /// process. Both phases are dissected, their parts add up to their
    /// RTT, and the load's figures stand beside them.
    #[test]
    fn idle_and_loaded_phases_on_loopback() {
        let mut req = Request::new(
            Peer::InProcess(IpAddr::from([127, 0, 0, 1])),
            EchoProtocol::Udp,
        );
        req.time = Some(Duration::from_millis(600));
        req.stamp_every = Some(1);
        let echo = Config::new(&req).unwrap();
        let spec: LoadSpec = "tcp,1,forward,rate=20M".parse().unwrap();
        let plan = LoadPlan::new(spec, &[], Some(Duration::from_millis(300)), &echo).unwrap();
        let mut p = Lines::default();
        let doc = run(&echo, &plan, &LoadAgainst::InProcess, &mut p).unwrap();
        assert_eq!(p.0[0], "idle phase: no load");
        assert!(p
            .0
            .iter()
            .any(|l| l == "loaded phase: load tcp,1,forward,rate=20M"));
        let r = &doc.result;
        assert_eq!(r.runs.len(), 2);
        assert_eq!(r.runs[0].label(), "load=none");
        assert_eq!(r.runs[1].label(), "load=tcp,1,forward,rate=20M");
        let load = r.load.as_ref().expect("a load section");
        assert_eq!((load.idle_run, load.levels.len()), (0, 1));
        assert_eq!(load.settle_ns, 300_000_000);
        let level = &load.levels[0];
        assert_eq!(level.run, 1);
        assert_eq!(level.growth[0].stage, Stage::Rtt);
        assert!(level.growth.iter().any(|g| g.stage == Stage::Network));
        for sum in [level.idle_sum, level.loaded_sum] {
            let sum: StageSum = sum.expect("an RTT sample");
            if sum.complete {
                assert!(sum.unexplained_ns().abs() < 1.0, "{sum:?}");
            }
        }
        for stages in [&load.idle, &level.loaded] {
            assert!(PARTS.iter().all(|&s| stages.iter().any(|x| x.stage == s)));
        }
        let t = level.throughput.as_ref().expect("the load's figures");
        assert_eq!(t.asked_bits_per_s, Some(20_000_000));
        assert_eq!(t.directions.len(), 1);
        assert!(t.directions[0].bits_per_s > 0.0);
        assert!(level.sustained, "the load outlasts the loaded phase");
        assert!(doc
            .flags
            .iter()
            .all(|f| f.code != linerate_core::latency::load::codes::LOAD_NOT_SUSTAINED));
    }
}
