//! The stored description of a bed: `/run/linerate/beds/<bed>.json`, so
//! `down`, `list`, `sweep` and other processes (`--bed NAME`) find it.
//!
//! The file is claimed with `O_EXCL` before anything is created (two
//! processes cannot bring up the same bed), and rewritten atomically
//! (temporary file + rename) once the bed is complete.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use linerate_core::testbed::{BedStatus, BedSummary, ListedBed, TestbedList};

use crate::layout::Layout;
use crate::spec::BedSpec;
use crate::BedError;

/// Where bed descriptions live.
pub const STATE_DIR: &str = "/run/linerate/beds";
/// The `schema` of a bed description.
pub const SCHEMA: &str = "linerate.bed";
/// Its version.
pub const VERSION: u32 = 1;

/// A bed as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BedRecord {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// [`VERSION`].
    pub version: u32,
    /// The bed's name without prefix.
    pub name: String,
    /// What was asked for.
    pub spec: BedSpec,
    /// Namespaces, interfaces, addresses.
    pub layout: Layout,
    /// False while the bed is being built (or if building it failed and the
    /// creator was killed before it could roll back: `sweep` removes it).
    pub complete: bool,
    /// Seconds since the Unix epoch at creation.
    pub created_unix_s: u64,
    /// The process that created it.
    pub creator_pid: u32,
    /// Fidelity notes (what the link emulation does and does not cover).
    pub notes: Vec<String>,
    /// Every command that built it, in order.
    pub commands: Vec<String>,
    /// Its link emulator, once started (beds with `--shaper emu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<crate::emulator::EmulatorState>,
}

impl BedRecord {
    /// A record for a bed about to be built.
    pub fn new(spec: &BedSpec, layout: Layout, notes: Vec<String>, commands: Vec<String>) -> Self {
        Self {
            schema: SCHEMA.into(),
            version: VERSION,
            name: spec.name.clone(),
            spec: spec.clone(),
            layout,
            complete: false,
            created_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            creator_pid: std::process::id(),
            notes,
            commands,
            emulator: None,
        }
    }
}

impl BedRecord {
    /// The settings asked for, each as `name value` (`link 100 Mbit/s`),
    /// and the emulator's process and measured limit.
    pub fn settings(&self) -> Vec<String> {
        let mut v = settings(&self.spec);
        if let Some(e) = &self.emulator {
            v.push(format!("emulator pid {}", e.pid));
            if let Some(c) = e.capacity {
                v.push(format!(
                    "emulator limit {}{:.0} frames/s ({}-byte frames, measured {} s at start)",
                    if c.source_limited { "≥ " } else { "" },
                    c.frames_per_s,
                    c.frame_bytes + 4,
                    c.seconds
                ));
            }
            if let Some(t) = e.timing {
                v.push(format!(
                    "emulator timing: {}, {}, timer overshoot p50 {:.1} µs p99 {:.1} µs, \
                     wakes {:.1} µs before each departure",
                    if t.realtime {
                        "real-time thread"
                    } else {
                        "normal thread (no real-time priority here)"
                    },
                    if t.cpu_latency_held {
                        "idle CPUs polling"
                    } else {
                        "idle CPUs may halt (no CPU latency request here)"
                    },
                    t.timer_overshoot_p50_ns as f64 / 1e3,
                    t.timer_overshoot_p99_ns as f64 / 1e3,
                    t.wake_margin_ns as f64 / 1e3
                ));
                if let Some(d) = t.delivery {
                    v.push(format!(
                        "emulator sends {:.2} µs ahead of each due time: its fastest delivery \
                         to the far end's receive stamp at start (60-byte frames min {:.2} µs \
                         p50 {:.2} µs, 1514-byte min {:.2} µs p50 {:.2} µs, {} each)",
                        d.lead_ns() as f64 / 1e3,
                        d.small_min_ns as f64 / 1e3,
                        d.small_p50_ns as f64 / 1e3,
                        d.large_min_ns as f64 / 1e3,
                        d.large_p50_ns as f64 / 1e3,
                        d.samples
                    ));
                }
            }
        }
        v
    }

    /// The plain summary the human renderers read.
    pub fn summary(&self) -> BedSummary {
        use linerate_core::testbed::HostSummary;
        BedSummary {
            name: self.name.clone(),
            topology: self.spec.topology.to_string(),
            settings: self.settings(),
            hosts: self
                .layout
                .hosts
                .iter()
                .map(|h| HostSummary {
                    role: h.role.clone(),
                    netns: h.netns.clone(),
                    iface: h.iface.clone(),
                    ipv4: self.layout.ipv4(&h.role).map(|a| a.to_string()),
                    ipv6: self.layout.ipv6(&h.role).map(|a| a.to_string()),
                    gateways: h.gateways.iter().map(ToString::to_string).collect(),
                })
                .collect(),
            notes: self.notes.clone(),
        }
    }
}

/// A spec's settings, each as `name value` (`link 100 Mbit/s`, `rps`).
pub fn settings(s: &BedSpec) -> Vec<String> {
    let mut parts = Vec::new();
    if let Some(l) = s.link {
        parts.push(format!("link {l}"));
    }
    if let Some(p) = s.loss_pct {
        parts.push(format!("loss {p}%"));
    }
    if let Some(m) = s.mtu {
        parts.push(format!("mtu {m}"));
    }
    if !s.offloads.is_empty() {
        parts.push(format!("offload {}", s.offloads));
    }
    if s.emu_poll {
        parts.push("emu-poll (the emulator polls between frames)".into());
    }
    if s.rps {
        parts.push("rps".into());
    }
    if let Some(m) = s.tcp_rmem {
        parts.push(format!("tcp_rmem {m}"));
    }
    if let Some(m) = s.tcp_wmem {
        parts.push(format!("tcp_wmem {m}"));
    }
    if s.link.is_some() || s.uses_emulator() {
        parts.push(format!("shaper {}", s.effective_shaper().as_str()));
    }
    parts.extend(s.impair.settings());
    parts
}

/// The file of bed `name` in `dir`.
pub fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

fn state_err(path: &Path) -> impl FnOnce(std::io::Error) -> BedError + '_ {
    move |source| BedError::State {
        path: path.to_path_buf(),
        source,
    }
}

fn to_json(record: &BedRecord) -> String {
    let mut s = serde_json::to_string_pretty(record).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

/// Creates the file of a new bed; fails with [`BedError::Exists`] if it is
/// there already. Atomic: the record is written to a temporary file and
/// linked to its name (link(2) fails if the name exists), so a reader never
/// sees an empty or half-written file, and two processes cannot both claim it.
pub fn claim(dir: &Path, record: &BedRecord) -> Result<PathBuf, BedError> {
    fs::create_dir_all(dir).map_err(state_err(dir))?;
    let p = path(dir, &record.name);
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{}.json.tmp{}-claim{}",
        record.name,
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    // create_new: never truncate a file someone else (linked) holds.
    let written = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(to_json(record).as_bytes())?;
            f.sync_all()
        })
        .map_err(state_err(&tmp));
    let linked = written.and_then(|()| match fs::hard_link(&tmp, &p) {
        Ok(()) => Ok(p.clone()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(BedError::Exists {
            name: record.name.clone(),
            what: format!("{} exists", p.display()),
        }),
        Err(e) => Err(state_err(&p)(e)),
    });
    let _ = fs::remove_file(&tmp);
    linked
}

/// Rewrites a bed's file atomically.
pub fn write(dir: &Path, record: &BedRecord) -> Result<(), BedError> {
    let p = path(dir, &record.name);
    let tmp = dir.join(format!(".{}.json.tmp{}", record.name, std::process::id()));
    fs::write(&tmp, to_json(record)).map_err(state_err(&tmp))?;
    fs::rename(&tmp, &p).map_err(state_err(&p))
}

/// Reads bed `name`.
pub fn read(dir: &Path, name: &str) -> Result<BedRecord, BedError> {
    let p = path(dir, name);
    let text = match fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(BedError::NotFound {
                name: name.to_string(),
                path: p,
            })
        }
        Err(e) => return Err(state_err(&p)(e)),
    };
    let record: BedRecord = serde_json::from_str(&text).map_err(|e| BedError::Corrupt {
        path: p.clone(),
        why: e.to_string(),
    })?;
    if record.schema != SCHEMA || record.version != VERSION || record.name != name {
        return Err(BedError::Corrupt {
            path: p,
            why: format!(
                "schema {} version {} name {} (expected {SCHEMA} {VERSION} {name})",
                record.schema, record.version, record.name
            ),
        });
    }
    Ok(record)
}

/// Removes bed `name`'s file (absent is fine).
pub fn remove(dir: &Path, name: &str) -> Result<(), BedError> {
    let p = path(dir, name);
    match fs::remove_file(&p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(state_err(&p)(e)),
    }
}

/// Every stored bed in `dir`, by name; unreadable files as errors.
pub fn list(dir: &Path) -> Vec<Result<BedRecord, BedError>> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_suffix(".json")
                .filter(|s| !s.starts_with('.'))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names.iter().map(|n| read(dir, n)).collect()
}

/// Whether every namespace of a stored bed exists.
pub fn status(r: &BedRecord) -> BedStatus {
    let ns = r.layout.namespaces();
    let present = ns.iter().filter(|n| crate::guard::netns_exists(n)).count();
    BedStatus::of(r.complete, present, ns.len())
}

/// The document of `testbed list`: every bed stored in `dir` with its
/// status, and the files that could not be read.
pub fn listing(dir: &Path) -> TestbedList<BedRecord> {
    let mut l = TestbedList {
        beds: Vec::new(),
        errors: Vec::new(),
    };
    for r in list(dir) {
        match r {
            Ok(record) => l.beds.push(ListedBed {
                name: record.name.clone(),
                status: status(&record),
                bed: record,
            }),
            Err(e) => l.errors.push(linerate_core::error::chain(&e)),
        }
    }
    l
}

/// The listed beds as people read them: summary and status.
pub fn summaries(l: &TestbedList<BedRecord>) -> Vec<(BedSummary, BedStatus)> {
    l.beds.iter().map(|b| (b.bed.summary(), b.status)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Topology;

    #[test]
    fn claim_write_read_remove() {
        let dir = std::env::temp_dir().join(format!("lr-state-test-{}", std::process::id()));
        let spec = BedSpec::new("s1", Topology::Router);
        let mut rec = BedRecord::new(&spec, Layout::new("s1", Topology::Router), vec![], vec![]);
        claim(&dir, &rec).unwrap();
        assert!(matches!(
            claim(&dir, &rec).unwrap_err(),
            BedError::Exists { .. }
        ));
        rec.complete = true;
        write(&dir, &rec).unwrap();
        let back = read(&dir, "s1").unwrap();
        assert_eq!(back, rec);
        assert_eq!(list(&dir).len(), 1);
        fs::write(path(&dir, "bad"), "{").unwrap();
        assert!(matches!(
            read(&dir, "bad").unwrap_err(),
            BedError::Corrupt { .. }
        ));
        remove(&dir, "s1").unwrap();
        remove(&dir, "s1").unwrap();
        assert!(matches!(
            read(&dir, "s1").unwrap_err(),
            BedError::NotFound { .. }
        ));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 16 item 9: the claimed file was created empty and then
    /// written, so a reader could find it empty. Claimers race here with
    /// a reader; exactly one claim wins and every read is a whole record.
    #[test]
    fn regression_claim_is_atomic_and_exclusive() {
        let dir = std::env::temp_dir().join(format!("lr-state-race-{}", std::process::id()));
        let spec = BedSpec::new("race", Topology::Pair);
        let rec = BedRecord::new(&spec, Layout::new("race", Topology::Pair), vec![], vec![]);
        for _ in 0..200 {
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let reader = {
                let (dir, stop) = (dir.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut seen = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        if let Ok(t) = fs::read_to_string(path(&dir, "race")) {
                            assert!(serde_json::from_str::<BedRecord>(&t).is_ok(), "{t:?}");
                            seen += 1;
                        }
                    }
                    seen
                })
            };
            let wins: usize = (0..4)
                .map(|_| {
                    let (dir, rec) = (dir.clone(), rec.clone());
                    std::thread::spawn(move || claim(&dir, &rec).is_ok())
                })
                .collect::<Vec<_>>()
                .into_iter()
                .map(|t| usize::from(t.join().unwrap()))
                .sum();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            reader.join().unwrap();
            assert_eq!(wins, 1);
            let left: Vec<_> = fs::read_dir(&dir).unwrap().flatten().collect();
            assert_eq!(left.len(), 1, "temporary files left: {left:?}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
