//! Facts about this host, recorded in every result's envelope
//! ([`linerate_core::result::HostFacts`]), and its load while a test runs
//! ([`LoadSampler`]: CPU pressure, other runnable tasks, steal).

use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linerate_core::hostload::{
    parse_pressure, parse_procs_running, parse_task_state, HostLoad, LoadSample,
};
use linerate_core::result::HostFacts;

/// Reads what `/proc` and `/sys` say about this host; a fact that cannot be
/// read is left out, never guessed.
pub fn facts() -> HostFacts {
    let read = |p: &str| {
        fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let (cpu_model, hypervisor_flag) = parse_cpuinfo(&cpuinfo);
    HostFacts {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        cpu_model,
        cpus: std::thread::available_parallelism()
            .ok()
            .and_then(|n| u32::try_from(n.get()).ok()),
        virtualized: match read("/sys/hypervisor/type") {
            Some(_) => Some(true),
            None if cpuinfo.is_empty() => None,
            None => Some(hypervisor_flag),
        },
    }
}

/// The first `model name` and whether the `hypervisor` CPU flag is set.
fn parse_cpuinfo(text: &str) -> (Option<String>, bool) {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    let model = field("model name")
        .or_else(|| field("Model"))
        .filter(|m| !m.is_empty());
    let hyper = field("flags").is_some_and(|f| f.split_whitespace().any(|x| x == "hypervisor"));
    (model, hyper)
}

/// How often [`LoadSampler`] reads `/proc` while a test runs.
pub const LOAD_SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// Samples a [`LoadSampler`] keeps at most (an hour at
/// [`LOAD_SAMPLE_EVERY`]); later ones are not taken, the last one is.
pub const MAX_LOAD_SAMPLES: usize = 18_000;

/// One reading of the host's load: CPU pressure, runnable tasks on the host
/// and of this process, CPU jiffies (all, steal).
pub fn load_sample(t0: Instant) -> LoadSample {
    let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
    LoadSample {
        at_ns: u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX),
        pressure: fs::read_to_string("/proc/pressure/cpu")
            .ok()
            .and_then(|t| parse_pressure(&t)),
        procs_running: parse_procs_running(&stat),
        own_running: own_running(),
        cpu: crate::throughput::host::cpu_jiffies(),
    }
}

/// This process's threads that are running or runnable now (state R).
fn own_running() -> u32 {
    let Ok(dir) = fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let running = dir
        .filter_map(Result::ok)
        .filter_map(|e| fs::read_to_string(e.path().join("stat")).ok())
        .filter(|s| parse_task_state(s) == Some('R'))
        .count();
    u32::try_from(running).unwrap_or(u32::MAX)
}

/// Reads the host's load on a thread of its own every
/// [`LOAD_SAMPLE_EVERY`] while a test runs (its wake-ups are rare; it is
/// one of this process's threads, so it is not counted as load from
/// elsewhere), and summarises it when [`LoadSampler::finish`]ed.
#[derive(Debug)]
pub struct LoadSampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<LoadSample>>>,
}

impl LoadSampler {
    /// Takes the first sample now and starts the thread.
    pub fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("lr-load".into())
            .spawn(move || {
                let t0 = Instant::now();
                let mut samples = vec![load_sample(t0)];
                while !s.load(Ordering::Relaxed) {
                    std::thread::park_timeout(LOAD_SAMPLE_EVERY);
                    if s.load(Ordering::Relaxed) {
                        break;
                    }
                    if samples.len() < MAX_LOAD_SAMPLES {
                        samples.push(load_sample(t0));
                    }
                }
                samples.push(load_sample(t0));
                samples
            })
            .ok();
        Self { stop, thread }
    }

    /// Takes the last sample and summarises them; `None` when the thread
    /// could not run or `/proc` gave too little.
    pub fn finish(mut self) -> Option<HostLoad> {
        self.stop.store(true, Ordering::Relaxed);
        let t = self.thread.take()?;
        t.thread().unpark();
        HostLoad::from_samples(&t.join().ok()?)
    }
}

impl Drop for LoadSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Now, as Unix time in nanoseconds (CLOCK_REALTIME), for a result's
/// `started_at`.
pub fn unix_now_ns() -> u64 {
    crate::stamps::realtime_ns()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo() {
        let (m, h) = parse_cpuinfo(
            "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu vme hypervisor\n",
        );
        assert_eq!(m.as_deref(), Some("AMD EPYC 7B13"));
        assert!(h);
        assert_eq!(parse_cpuinfo("flags: fpu"), (None, false));
        let f = facts();
        assert!(f.kernel.is_some() && f.cpus.unwrap_or(0) >= 1, "{f:?}");
        assert!(unix_now_ns() > 1_600_000_000_000_000_000);
    }

    #[test]
    fn a_busy_thread_of_ours_is_not_load_from_elsewhere() {
        // This process's threads are counted as its own: a spinning thread
        // of ours shows as running in our tasks, and the host's
        // procs_running counts it too.
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let spin = std::thread::spawn(move || {
            let t0 = Instant::now();
            while !s.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(5) {
                std::hint::spin_loop();
            }
        });
        let sampler = LoadSampler::start();
        std::thread::sleep(Duration::from_millis(450));
        let load = sampler.finish();
        stop.store(true, Ordering::Relaxed);
        spin.join().unwrap();
        let load = load.expect("/proc/stat is readable here");
        assert!(load.samples >= 3, "{load:?}");
        assert!(load.duration_ns >= 400_000_000, "{load:?}");
        assert!(load.other_runnable_mean.is_some(), "{load:?}");
        let own = load_sample(Instant::now()).own_running;
        assert!(own >= 1, "the reading thread itself runs");
    }
}
