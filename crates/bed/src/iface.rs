//! Interface settings made for one test (not for a bed's life): changed as a
//! plan [`Step`] with its read-back, and restored on every exit path.
//!
//! [`OffloadGuard::set`] reads the feature's current value (`ethtool -k`);
//! when it differs, it registers the restoring step first (so a termination
//! signal that arrives at any point restores it: the signal thread of
//! [`crate::guard::install_signal_teardown`] runs every registered restore
//! before removing beds), then applies `ethtool -K IFACE FEATURE on|off` and
//! reads it back. Dropping the guard (also while a panic unwinds) restores
//! the previous value the same way, read-back included.
//!
//! While a restore is due it is also recorded in a file under
//! [`RESTORE_DIR`] (owner pid and the restoring step): after a SIGKILL,
//! when no code of the owner can run, `testbed sweep` and the next
//! [`OffloadGuard::set`] put back what a dead process left changed.
//!
//! [`BedIfaceSettings`] offers this to drivers in `linerate-io` through
//! their [`IfaceSettings`] trait (XDP live frames need GRO at the sending
//! veth's peer).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use linerate_io::rfc2544::IfaceSettings;

use crate::plan::Step;
use crate::spec::Feature;
use crate::BedError;

/// Where due restores are recorded for `testbed sweep` (one JSON file per
/// changed setting, `<pid>-<id>.json`).
pub const RESTORE_DIR: &str = "/run/linerate/restore";

/// A due restore as recorded on disk.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct RestoreRecord {
    /// The process that made the change.
    pid: u32,
    /// The step that puts the previous value back.
    step: Step,
}

fn record_path(dir: &std::path::Path, id: u64) -> std::path::PathBuf {
    dir.join(format!("{}-{id}.json", std::process::id()))
}

/// Records a due restore (written whole: temporary file + rename).
fn record(dir: &std::path::Path, id: u64, step: &Step) -> Result<(), BedError> {
    let err = |source| BedError::State {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(err)?;
    let rec = RestoreRecord {
        pid: std::process::id(),
        step: step.clone(),
    };
    let text = serde_json::to_string(&rec).map_err(|e| BedError::Invalid(e.to_string()))?;
    let p = record_path(dir, id);
    let tmp = p.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, &p))
        .map_err(err)
}

fn unrecord(id: u64) {
    let _ = std::fs::remove_file(record_path(std::path::Path::new(RESTORE_DIR), id));
}

/// Puts back the settings that dead processes left changed (their records
/// in `dir`), for namespaces whose name starts with `netns_prefix`; returns
/// the records handled and what failed. A record whose namespace is gone
/// is only removed; one whose owner is alive is left alone.
pub(crate) fn repair_leftovers(
    dir: &std::path::Path,
    netns_prefix: &str,
) -> (Vec<std::path::PathBuf>, Vec<String>) {
    let (mut done, mut errors) = (Vec::new(), Vec::new());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (done, errors);
    };
    let mut paths: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    for p in paths {
        let Some(rec) = std::fs::read_to_string(&p)
            .ok()
            .and_then(|t| serde_json::from_str::<RestoreRecord>(&t).ok())
        else {
            // Not ours to interpret: a half-written file cannot exist (rename).
            continue;
        };
        let alive = std::path::Path::new(&format!("/proc/{}", rec.pid)).exists();
        if alive || !rec.step.netns().starts_with(netns_prefix) {
            continue;
        }
        if crate::guard::netns_exists(rec.step.netns()) {
            if let Err(e) = crate::apply::apply_step(&rec.step) {
                errors.push(format!("{}: {e}", p.display()));
                continue;
            }
        }
        match std::fs::remove_file(&p) {
            Ok(()) => done.push(p),
            Err(e) => errors.push(format!("{}: {e}", p.display())),
        }
    }
    (done, errors)
}

/// Restores that are due, by guard id.
static RESTORES: Mutex<Vec<(u64, Step)>> = Mutex::new(Vec::new());
pub(crate) static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) fn restores() -> MutexGuard<'static, Vec<(u64, Step)>> {
    RESTORES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs every registered restore (the signal thread, before the process
/// exits); returns what failed.
pub(crate) fn restore_all() -> Vec<String> {
    let mut reg = restores();
    let mut errors = Vec::new();
    for (id, step) in reg.drain(..) {
        match crate::apply::apply_step(&step) {
            Ok(()) => unrecord(id),
            Err(e) => errors.push(e.to_string()),
        }
    }
    errors
}

/// The `ethtool -K` step that sets `feature` of `iface` in `netns`.
pub fn offload_step(netns: &str, iface: &str, feature: Feature, on: bool) -> Step {
    Step::Ethtool {
        netns: netns.to_string(),
        dev: iface.to_string(),
        features: BTreeMap::from([(feature, on)]),
    }
}

/// One offload setting changed for a test; the previous value comes back
/// when the guard is dropped (or [`OffloadGuard::restore`]d).
#[derive(Debug)]
pub struct OffloadGuard {
    id: u64,
    /// The step that puts the previous value back (`None`: nothing changed).
    restore: Option<Step>,
}

impl OffloadGuard {
    /// Sets `feature` (an `ethtool -K` name: `gro`, `gso` …) of `iface` in
    /// namespace `netns` to `on`, read back; a no-op guard when it is so
    /// already.
    pub fn set(netns: &str, iface: &str, feature: &str, on: bool) -> Result<Self, BedError> {
        let f: Feature = feature.parse()?;
        // What a killed run left changed here comes back first, so the
        // value read below is the interface's own.
        let _ = repair_leftovers(std::path::Path::new(RESTORE_DIR), netns);
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let set = offload_step(netns, iface, f, on);
        let rb = set
            .readback()
            .ok_or_else(|| BedError::Invalid("an ethtool step has a read-back".into()))?;
        let now = crate::apply::run_command(&rb.argv)?;
        if rb.check.verify(&now).is_ok() {
            return Ok(Self { id, restore: None });
        }
        let restore = offload_step(netns, iface, f, !on);
        // Recorded and registered before the change: a signal from here on
        // restores it, and after a SIGKILL `testbed sweep` does.
        record(std::path::Path::new(RESTORE_DIR), id, &restore)?;
        restores().push((id, restore.clone()));
        let guard = Self {
            id,
            restore: Some(restore),
        };
        // On error the guard drops and puts the previous value back.
        crate::guard::run_step(&set)?;
        Ok(guard)
    }

    /// Whether the guard changed the setting (false: it was so already).
    pub fn changed(&self) -> bool {
        self.restore.is_some()
    }

    /// Puts the previous value back now (read back); the error says what
    /// failed.
    pub fn restore(mut self) -> Result<(), BedError> {
        self.restore_now()
    }

    fn restore_now(&mut self) -> Result<(), BedError> {
        let Some(step) = self.restore.take() else {
            return Ok(());
        };
        let mut reg = restores();
        let due = reg.iter().position(|(id, _)| *id == self.id);
        match due {
            // Restored already (by the signal thread).
            None => Ok(()),
            Some(i) => {
                reg.remove(i);
                crate::apply::apply_step(&step)?;
                unrecord(self.id);
                Ok(())
            }
        }
    }
}

impl Drop for OffloadGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore_now() {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "linerate: {e}");
        }
    }
}

/// The bed's interface settings for a driver: each change an
/// [`OffloadGuard`], restored by [`IfaceSettings::restore`] or on drop.
#[derive(Debug, Default)]
pub struct BedIfaceSettings {
    guards: Vec<OffloadGuard>,
}

impl BedIfaceSettings {
    /// No change made yet.
    pub fn new() -> Self {
        Self::default()
    }
}

impl IfaceSettings for BedIfaceSettings {
    fn set_offload(
        &mut self,
        netns: Option<&str>,
        iface: &str,
        feature: &str,
        on: bool,
    ) -> Result<bool, String> {
        let ns = netns.ok_or_else(|| {
            format!("{iface} is not in a namespace: the bed changes only interfaces inside one")
        })?;
        let g = OffloadGuard::set(ns, iface, feature, on).map_err(|e| format!("{e:#}"))?;
        let changed = g.changed();
        self.guards.push(g);
        Ok(changed)
    }

    fn restore(&mut self) -> Result<(), String> {
        let errors: Vec<String> = self
            .guards
            .drain(..)
            .rev()
            .filter_map(|g| g.restore().err().map(|e| e.to_string()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_is_one_ethtool_line_with_its_read_back() {
        let s = offload_step("lr-x-b", "lr-b", Feature::Gro, true);
        assert_eq!(
            crate::plan::render_argv(&s.argv()),
            "ip netns exec lr-x-b ethtool -K lr-b gro on"
        );
        assert_eq!(
            crate::plan::render_argv(&s.readback().unwrap().argv),
            "ip netns exec lr-x-b ethtool -k lr-b"
        );
        assert!(OffloadGuard::set("lr-x-b", "lr-b", "warp", true).is_err());
    }

    /// Two namespaces `lr-ig<pid><tag>a|b` joined by a veth; removed on drop.
    struct Veth(String, String);

    impl Veth {
        fn new(tag: &str) -> Self {
            let pid = std::process::id();
            let v = Self(format!("lr-ig{pid}{tag}a"), format!("lr-ig{pid}{tag}b"));
            let run = |a: &[&str]| {
                let argv: Vec<String> = a.iter().map(|x| x.to_string()).collect();
                crate::apply::run_command(&argv).unwrap();
            };
            run(&["ip", "netns", "add", &v.0]);
            run(&["ip", "netns", "add", &v.1]);
            run(&[
                "ip", "link", "add", "lr-iga", "netns", &v.0, "type", "veth", "peer", "name",
                "lr-igb", "netns", &v.1,
            ]);
            v
        }

        fn gro(&self) -> bool {
            let argv: Vec<String> = ["ip", "netns", "exec", &self.1, "ethtool", "-k", "lr-igb"]
                .iter()
                .map(|x| x.to_string())
                .collect();
            let out = crate::apply::run_command(&argv).unwrap();
            out.contains("generic-receive-offload: on")
        }
    }

    impl Drop for Veth {
        fn drop(&mut self) {
            for ns in [&self.0, &self.1] {
                let _ = std::process::Command::new("ip")
                    .args(["netns", "del", ns])
                    .status();
            }
        }
    }

    #[test]
    fn a_setting_is_restored_after_use_and_after_a_panic() {
        if !crate::privileges::require("a_setting_is_restored_after_use_and_after_a_panic") {
            return;
        }
        let v = Veth::new("r");
        let before = v.gro();
        {
            let g = OffloadGuard::set(&v.1, "lr-igb", "gro", !before).unwrap();
            assert!(g.changed());
            assert_eq!(v.gro(), !before);
            // Set again while changed: nothing to do, nothing to restore.
            let again = OffloadGuard::set(&v.1, "lr-igb", "gro", !before).unwrap();
            assert!(!again.changed());
        }
        assert_eq!(v.gro(), before, "restored on drop");

        let ns = v.1.clone();
        let r = std::panic::catch_unwind(move || {
            let _g = OffloadGuard::set(&ns, "lr-igb", "gro", !before).unwrap();
            panic!("a test that fails half-way");
        });
        assert!(r.is_err());
        assert_eq!(v.gro(), before, "restored while the panic unwound");

        // Through the driver's trait: restore() puts every change back.
        let mut s = BedIfaceSettings::new();
        assert_eq!(
            s.set_offload(Some(&v.1), "lr-igb", "gro", !before),
            Ok(true)
        );
        assert_eq!(v.gro(), !before);
        s.restore().unwrap();
        assert_eq!(v.gro(), before);
        assert!(s.set_offload(None, "lr-igb", "gro", true).is_err());
        assert!(restores().iter().all(|(_, st)| st.netns() != v.1));
    }

    /// Issue 16 item 5: a run killed with SIGKILL left GRO changed; its
    /// recorded restore is put back by the sweep's repair (and by the
    /// next guard on that namespace), and a live owner's is left alone.
    #[test]
    fn a_killed_owners_setting_is_put_back_from_its_record() {
        if !crate::privileges::require("a_killed_owners_setting_is_put_back_from_its_record") {
            return;
        }
        let v = Veth::new("k");
        let before = v.gro();
        let dir = std::env::temp_dir().join(format!("lr-restore-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The change a killed process made, and its record.
        crate::apply::apply_step(&offload_step(&v.1, "lr-igb", Feature::Gro, !before)).unwrap();
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = dead.id();
        dead.wait().unwrap();
        let rec = RestoreRecord {
            pid: dead_pid,
            step: offload_step(&v.1, "lr-igb", Feature::Gro, before),
        };
        let p = dir.join(format!("{dead_pid}-1.json"));
        std::fs::write(&p, serde_json::to_string(&rec).unwrap()).unwrap();
        // A live owner's record (this process) is not touched.
        let live = dir.join(format!("{}-2.json", std::process::id()));
        let mine = RestoreRecord {
            pid: std::process::id(),
            step: offload_step(&v.1, "lr-igb", Feature::Gro, before),
        };
        std::fs::write(&live, serde_json::to_string(&mine).unwrap()).unwrap();
        assert_eq!(v.gro(), !before);
        let (done, errors) = repair_leftovers(&dir, "lr-no-match");
        assert!(done.is_empty() && errors.is_empty());
        let (done, errors) = repair_leftovers(&dir, &v.1);
        assert_eq!((done, errors), (vec![p], vec![]));
        assert_eq!(v.gro(), before, "put back");
        assert!(live.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
