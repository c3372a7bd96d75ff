//! The bed's link emulator process: started detached with the bed
//! (`linerate testbed emulate BED`, in its own process group so a terminal's
//! Ctrl-C reaches only its owner), found again by its command line, and
//! stopped by every path that removes a bed (down, drop, panic, signal
//! guard, sweep).
//!
//! The process reads the bed's description, enters the link namespace,
//! measures the frames/s it forwards on this host ([`serve`]), then forwards
//! every cable until it is killed or the cables disappear. It writes its
//! counters to `<state dir>/<bed>.emu.stats` ([`stats_path`]); tests on the
//! bed read them before and after ([`Reading`]). A sweep point that changes
//! the link rate rewrites `<bed>.emu.ctl` ([`control_path`]) and waits for
//! the stats to show the new cables ([`reconfigure`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use linerate_core::emu::{Capacity, Impairments, LinkAccount, Shaper};
use linerate_io::emu::{self as io_emu, Cable, Stats};
use serde::{Deserialize, Serialize};

use crate::state::{self, BedRecord};
use crate::BedError;

/// How long the emulator measures its own limit at start, s.
pub const CALIBRATION_S: f64 = 0.5;
/// How long bring-up waits for the emulator to report ready.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a stop waits after SIGTERM before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(2);

/// The running emulator of a bed, as stored in its description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EmulatorState {
    /// Its process.
    pub pid: u32,
    /// Its measured limit.
    pub capacity: Option<Capacity>,
    /// Where it writes its counters.
    pub stats_file: PathBuf,
    /// How it keeps time on this host (absent in beds from before it said).
    #[serde(default)]
    pub timing: Option<linerate_core::emu::Timing>,
}

/// The emulator's counters file for bed `name`.
pub fn stats_path(state_dir: &Path, name: &str) -> PathBuf {
    state_dir.join(format!("{name}.emu.stats"))
}

/// The emulator's control file for bed `name` ([`io_emu::control_path`]).
pub fn control_path(state_dir: &Path, name: &str) -> PathBuf {
    io_emu::control_path(&stats_path(state_dir, name))
}

/// The emulator's log (its stderr) for bed `name`.
pub fn log_path(state_dir: &Path, name: &str) -> PathBuf {
    state_dir.join(format!("{name}.emu.log"))
}

/// Where the limit the last emulator measured on this host is kept.
fn last_capacity_path(state_dir: &Path) -> PathBuf {
    state_dir.join("emulator.capacity")
}

/// The frames/s the last emulator started on this host measured, if one
/// did (a bed that asks for no shaper gets tbf at a rate beyond it).
pub fn last_capacity(state_dir: &Path) -> Option<Capacity> {
    let text = fs::read_to_string(last_capacity_path(state_dir)).ok()?;
    serde_json::from_str(&text).ok()
}

static EXE: OnceLock<PathBuf> = OnceLock::new();
/// Emulators this process started, so stopping one also reaps it.
static CHILDREN: Mutex<Vec<Child>> = Mutex::new(Vec::new());

/// Which `linerate` binary runs the emulator (default: this process's own
/// executable). Tests that build beds from a test binary point it at the
/// `linerate` binary.
pub fn use_exe(path: impl Into<PathBuf>) {
    let _ = EXE.set(path.into());
}

fn exe() -> Result<PathBuf, BedError> {
    if let Some(p) = EXE.get() {
        return Ok(p.clone());
    }
    std::env::current_exe().map_err(|source| BedError::Spawn {
        command: "linerate testbed emulate".into(),
        source,
    })
}

/// Starts bed `record`'s emulator and waits until it measured its limit
/// and forwards.
pub(crate) fn start(record: &BedRecord, state_dir: &Path) -> Result<EmulatorState, BedError> {
    let exe = exe()?;
    let name = &record.name;
    let stats = stats_path(state_dir, name);
    let _ = fs::remove_file(&stats);
    let _ = fs::remove_file(control_path(state_dir, name));
    let log = log_path(state_dir, name);
    let log_file = fs::File::create(&log).map_err(|source| BedError::State {
        path: log.clone(),
        source,
    })?;
    let dir = state_dir.display().to_string();
    let command = format!("{} testbed emulate {name} --state-dir {dir}", exe.display());
    let mut cmd = Command::new(&exe);
    cmd.args(["testbed", "emulate", name, "--state-dir", &dir])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().map_err(|source| BedError::Spawn {
        command: command.clone(),
        source,
    })?;
    let pid = child.id();
    let begun = Instant::now();
    let outcome = loop {
        if let Ok(s) = io_emu::read_stats(&stats) {
            if s.ready {
                break Ok(s);
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            break Err(BedError::Command {
                command: command.clone(),
                status: status.to_string(),
                stderr: log_tail(&log),
            });
        }
        if begun.elapsed() > START_TIMEOUT {
            break Err(BedError::Command {
                command: command.clone(),
                status: format!("not ready after {} s", START_TIMEOUT.as_secs()),
                stderr: log_tail(&log),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    CHILDREN
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(child);
    let s = outcome?;
    if let Some(c) = &s.capacity {
        // Kept for the next bed's choice of shaper; not having it only
        // means that choice cannot be made.
        let _ = fs::write(
            last_capacity_path(state_dir),
            serde_json::to_string(c).unwrap_or_default(),
        );
    }
    Ok(EmulatorState {
        pid,
        capacity: s.capacity,
        stats_file: stats,
        timing: s.timing,
    })
}

fn log_tail(log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(3).collect();
    match lines.is_empty() {
        true => "(nothing on stderr)".into(),
        false => lines.into_iter().rev().collect::<Vec<_>>().join(" / "),
    }
}

/// Every running emulator whose bed satisfies `bed`: (pid, bed name), found
/// by the command line `… testbed emulate BED …` in /proc.
pub fn find(bed: impl Fn(&str) -> bool) -> Vec<(u32, String)> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for e in dir.filter_map(Result::ok) {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if let Some(w) = args
            .windows(3)
            .find(|w| w[0] == "testbed" && w[1] == "emulate")
        {
            if bed(&w[2]) && pid != std::process::id() {
                found.push((pid, w[2].clone()));
            }
        }
    }
    found
}

fn alive(pid: u32) -> bool {
    // A zombie (exited, not reaped) has state Z: it forwards nothing.
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z')
        })
        .unwrap_or(false)
}

fn reap() {
    let mut children = CHILDREN.lock().unwrap_or_else(PoisonError::into_inner);
    children.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
}

/// Stops every emulator whose bed satisfies `bed` (SIGTERM, then SIGKILL
/// after [`STOP_TIMEOUT`]); returns the pids stopped and what failed.
pub fn stop(bed: impl Fn(&str) -> bool) -> (Vec<u32>, Vec<String>) {
    let found = find(bed);
    let mut errors = Vec::new();
    for (pid, _) in &found {
        if let Err(e) = io_emu::signal(*pid, false) {
            errors.push(format!("SIGTERM to emulator {pid}: {e}"));
        }
    }
    let begun = Instant::now();
    let mut left: Vec<u32> = found.iter().map(|(p, _)| *p).collect();
    while !left.is_empty() {
        reap();
        left.retain(|p| alive(*p));
        if begun.elapsed() > STOP_TIMEOUT {
            for pid in &left {
                if let Err(e) = io_emu::signal(*pid, true) {
                    errors.push(format!("SIGKILL to emulator {pid}: {e}"));
                }
            }
            std::thread::sleep(Duration::from_millis(50));
            reap();
            left.retain(|p| alive(*p));
            for pid in &left {
                errors.push(format!("emulator {pid} still runs"));
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    (found.into_iter().map(|(p, _)| p).collect(), errors)
}

/// Removes bed `name`'s stats and log files (absent is fine).
pub(crate) fn remove_files(state_dir: &Path, name: &str) -> Vec<String> {
    let mut errors = Vec::new();
    for p in [
        stats_path(state_dir, name),
        control_path(state_dir, name),
        log_path(state_dir, name),
    ] {
        match fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => errors.push(format!("{}: {e}", p.display())),
        }
    }
    errors
}

/// The cables of a bed as the emulator forwards them: the rate (and limit)
/// on each, the delay and random impairments on the first.
pub fn cables(record: &BedRecord) -> Vec<Cable> {
    let spec = &record.spec;
    let Some(link) = &record.layout.link else {
        return Vec::new();
    };
    let ppm = |pct: f64| (pct / 100.0 * 1e6).round() as u32;
    let dir = |impaired: bool, a_to_b: bool| {
        let pick = |p: crate::PerDir<u64>| if a_to_b { p.a_to_b } else { p.b_to_a };
        let pickf = |p: crate::PerDir<f64>| if a_to_b { p.a_to_b } else { p.b_to_a };
        let mut imp = Impairments::rate(spec.link);
        if let Some(l) = spec.impair.limit {
            imp.limit = l;
        }
        if impaired {
            imp.delay_ns = pick(spec.impair.delay_ns);
            imp.jitter_ns = pick(spec.impair.jitter_ns);
            imp.loss_ppm = spec.loss_pct.map_or(0, ppm);
            imp.duplicate_ppm = ppm(pickf(spec.impair.duplicate_pct));
            imp.reorder_ppm = ppm(pickf(spec.impair.reorder_pct));
        }
        imp
    };
    link.cables
        .iter()
        .map(|c| Cable {
            name: c.name.clone(),
            west: c.west.clone(),
            east: c.east.clone(),
            west_to_east: dir(c.impaired, true),
            east_to_west: dir(c.impaired, false),
        })
        .collect()
}

/// How long a change of the cables waits for the emulator to confirm it
/// (it reads its control file every [`io_emu::STATS_EVERY_NS`]).
const RECONFIGURE_TIMEOUT: Duration = Duration::from_secs(3);

/// Makes bed `record`'s running emulator forward over the cables its
/// record describes now (a sweep point's link rate): writes its control
/// file and waits until its stats show those cables (the read-back), or
/// says why not.
pub(crate) fn reconfigure(record: &BedRecord, state_dir: &Path) -> Result<(), BedError> {
    let name = &record.name;
    let wanted = cables(record);
    let control = control_path(state_dir, name);
    let written = io_emu::now_mono_ns();
    io_emu::write_control(&control, &wanted).map_err(|e| {
        BedError::Invalid(format!(
            "bed '{name}': the link emulator did not take the link: {}",
            linerate_core::error::chain(&e)
        ))
    })?;
    // A refusal counts once a whole stats period after the write: an
    // earlier write may still show the error of an earlier file.
    let settled = written + io_emu::STATS_EVERY_NS;
    await_stats(state_dir, name, "the link", |s| {
        if s.links == wanted {
            return Some(Ok(()));
        }
        match (&s.control_error, s.updated_mono_ns > settled) {
            (Some(why), true) => Some(Err(why.clone())),
            _ => None,
        }
    })
}

/// Waits until bed `name`'s running emulator forwards frames of MTU `mtu`
/// whole (its receive slots follow the interfaces' MTU at every stats
/// write; the stats' `mtu` is the read-back), or says why not.
pub(crate) fn await_mtu(state_dir: &Path, name: &str, mtu: u32) -> Result<(), BedError> {
    await_stats(state_dir, name, &format!("MTU {mtu}"), |s| {
        (s.mtu >= mtu).then_some(Ok(()))
    })
}

/// Reads bed `name`'s emulator stats every 10 ms until `done` settles
/// (`Some(Ok)`: taken; `Some(Err(why))`: refused), the emulator stops, or
/// [`RECONFIGURE_TIMEOUT`] passes; errors say it "did not take `what`".
fn await_stats(
    state_dir: &Path,
    name: &str,
    what: &str,
    done: impl Fn(&Stats) -> Option<Result<(), String>>,
) -> Result<(), BedError> {
    let failed = |why: String| {
        BedError::Invalid(format!(
            "bed '{name}': the link emulator did not take {what}: {why}"
        ))
    };
    let stats = stats_path(state_dir, name);
    let begun = Instant::now();
    loop {
        let s = io_emu::read_stats(&stats).map_err(|e| failed(linerate_core::error::chain(&e)))?;
        if let Some(r) = done(&s) {
            return r.map_err(failed);
        }
        if let Some(why) = s.stopped {
            return Err(failed(why));
        }
        if begun.elapsed() > RECONFIGURE_TIMEOUT {
            return Err(failed(format!(
                "its stats show no change after {} s",
                RECONFIGURE_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The emulator process's body (`linerate testbed emulate BED`): reads the
/// bed, enters its link namespace, measures its limit from host a, then
/// forwards until killed or the cables go away.
pub fn serve(name: &str, state_dir: &Path) -> Result<(), BedError> {
    io_emu::default_termination_signals().map_err(|source| BedError::Spawn {
        command: "pthread_sigmask".into(),
        source,
    })?;
    let record = state::read(state_dir, name)?;
    let link = record
        .layout
        .link
        .clone()
        .ok_or_else(|| BedError::Invalid(format!("bed '{name}' has no emulated link")))?;
    linerate_io::netns::enter(&link.netns)
        .map_err(|e| BedError::Invalid(linerate_core::error::chain(&e)))?;
    let cables = cables(&record);
    let emu_err = |e: io_emu::EmuError| BedError::Invalid(linerate_core::error::chain(&e));
    let (Some(first), Some(a)) = (cables.first(), record.layout.host("a")) else {
        return Err(BedError::Invalid(format!("bed '{name}' has no cable")));
    };
    let capacity = io_emu::calibrate(first, &a.netns, &a.iface, CALIBRATION_S).map_err(emu_err)?;
    let delivery = io_emu::measure_delivery(first, &a.netns, &a.iface).map_err(emu_err)?;
    let stats = stats_path(state_dir, name);
    let stop = AtomicBool::new(false);
    let seed = linerate_io::host::unix_now_ns();
    let start = io_emu::Start {
        capacity: Some(capacity),
        delivery,
        poll: record.spec.emu_poll,
    };
    io_emu::run(&cables, &start, &stats, &stop, seed).map_err(emu_err)
}

/// A reading of a bed's emulator counters, to subtract from a later one.
#[derive(Debug, Clone)]
pub struct Reading {
    bed: String,
    shaper: Shaper,
    link: Option<linerate_core::units::BitRate>,
    capacity: Option<Capacity>,
    stats_file: Option<PathBuf>,
    before: Option<Stats>,
    shaper_note: Option<String>,
}

impl Reading {
    /// Reads bed `name`'s emulator counters now (nothing to read for a
    /// bed shaped by tbf or not at all). `None` when the bed cannot be
    /// opened.
    pub fn start(name: &str) -> Option<Self> {
        let bed = crate::Bed::open(name).ok()?;
        let spec = bed.spec();
        let emu = bed.record().emulator.clone();
        let stats_file = emu.as_ref().map(|e| e.stats_file.clone());
        let before = stats_file
            .as_deref()
            .and_then(|p| io_emu::read_stats(p).ok());
        Some(Self {
            bed: bed.name().to_string(),
            shaper: spec.effective_shaper(),
            link: spec.link,
            capacity: emu.and_then(|e| e.capacity),
            stats_file,
            before,
            shaper_note: spec.shaper_note.clone(),
        })
    }

    /// What the emulator counted since [`Reading::start`] (it waits for
    /// the emulator's next write, at most 0.5 s), with the frames/s the
    /// test offered if it knows.
    pub fn account(&self, offered_frames_per_s: Option<f64>) -> LinkAccount {
        let end = io_emu::now_mono_ns();
        let after = self
            .stats_file
            .as_deref()
            .and_then(|p| io_emu::read_stats_after(p, end, Duration::from_millis(500)).ok());
        let during = match (&self.before, after) {
            (Some(b), Some(a)) => Some(a.total().since(&b.total())),
            _ => None,
        };
        LinkAccount {
            bed: self.bed.clone(),
            shaper: self.shaper,
            link: self.link,
            capacity: self.capacity,
            shaper_note: self.shaper_note.clone(),
            mean_lag_ns: during.and_then(|c| c.mean_lag_ns()),
            timing: self.before.as_ref().and_then(|s| s.timing),
            during,
            offered_frames_per_s,
        }
    }
}
