//! Sweep: removes leftovers of killed processes — interface settings a
//! killed run left changed (put back from their restore records), every
//! `lr-` namespace, every `lr-` link in the root namespace and the stale
//! bed files, or only those of one name prefix (tests sweep only their own).

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::apply::run_command;
use crate::spec::PREFIX;
use crate::{state, BedError};

/// What a sweep removed and what it could not.
#[derive(Debug, Default, Clone, Serialize)]
pub struct SweepReport {
    /// Namespaces deleted.
    pub netns: Vec<String>,
    /// Root-namespace links deleted.
    pub links: Vec<String>,
    /// Bed files removed.
    pub files: Vec<PathBuf>,
    /// Link emulator processes stopped (pids).
    pub emulators: Vec<u32>,
    /// What failed.
    pub errors: Vec<String>,
}

impl From<SweepReport> for linerate_core::testbed::TestbedSweep {
    fn from(r: SweepReport) -> Self {
        Self {
            netns: r.netns,
            links: r.links,
            files: r.files.iter().map(|f| f.display().to_string()).collect(),
            emulators: r.emulators,
            errors: r.errors,
        }
    }
}

/// An error naming what a sweep could not remove, if anything.
pub fn complete(s: &linerate_core::testbed::TestbedSweep) -> Result<(), BedError> {
    match s.errors.is_empty() {
        true => Ok(()),
        false => Err(BedError::Invalid(format!(
            "sweep incomplete: {}",
            s.errors.join("; ")
        ))),
    }
}

/// Removes every namespace and root link named `lr-<prefix>…` and every bed
/// file whose bed name starts with `prefix` (all of them when `prefix` is
/// `None`).
pub fn sweep(prefix: Option<&str>) -> Result<SweepReport, BedError> {
    sweep_in(prefix, Path::new(state::STATE_DIR))
}

/// [`sweep`] with the state directory given.
pub fn sweep_in(prefix: Option<&str>, state_dir: &Path) -> Result<SweepReport, BedError> {
    let bed_prefix = prefix.map_or("", |p| p.strip_prefix(PREFIX).unwrap_or(p));
    if prefix.is_some() && bed_prefix.is_empty() {
        // `--prefix ''` or `--prefix lr-` would match every bed: a prefix
        // must name some.
        return Err(BedError::Invalid(format!(
            "--prefix '{}' would match every bed; give the start of a bed's name (without a prefix, sweep removes every {PREFIX} leftover)",
            prefix.unwrap_or_default()
        )));
    }
    if !bed_prefix
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
    {
        return Err(BedError::Invalid(format!(
            "--prefix '{bed_prefix}' has characters a bed name cannot have"
        )));
    }
    let full = format!("{PREFIX}{bed_prefix}");
    let mut report = SweepReport::default();

    // Emulators first: each holds its link namespace alive.
    let (pids, errors) = crate::emulator::stop(|bed| bed.starts_with(bed_prefix));
    report.emulators = pids;
    report.errors.extend(errors);
    // Interface settings that killed runs left changed (their restore
    // records), put back before namespaces go; every record without a
    // prefix, since a run may have changed a namespace of any name.
    let (done, errors) = crate::iface::repair_leftovers(
        Path::new(crate::iface::RESTORE_DIR),
        if prefix.is_some() { &full } else { "" },
    );
    report.files.extend(done);
    report.errors.extend(errors);

    let mut names: Vec<String> = fs::read_dir(linerate_io::netns::NETNS_RUN_DIR)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&full))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    for ns in names {
        match run_command(&["ip", "netns", "del", &ns].map(String::from)) {
            Ok(_) => report.netns.push(ns),
            // Removed meanwhile by its owner (a bed going down): not an error.
            Err(_)
                if !Path::new(linerate_io::netns::NETNS_RUN_DIR)
                    .join(&ns)
                    .exists() => {}
            Err(e) => report.errors.push(linerate_core::error::chain(&e)),
        }
    }

    let links = crate::apply::run_dump(&["ip", "-j", "link", "show"].map(String::from))?;
    let links: serde_json::Value = serde_json::from_str(&links)
        .map_err(|e| BedError::Invalid(format!("cannot read `ip -j link show`: {e}")))?;
    for l in links.as_array().map(Vec::as_slice).unwrap_or_default() {
        let Some(name) = l.get("ifname").and_then(|n| n.as_str()) else {
            continue;
        };
        if !name.starts_with(&full) {
            continue;
        }
        match run_command(&["ip", "link", "del", "dev", name].map(String::from)) {
            Ok(_) => report.links.push(name.to_string()),
            // A veth's peer goes with it: already gone is fine.
            Err(_) if !link_exists(name) => report.links.push(name.to_string()),
            Err(e) => report.errors.push(linerate_core::error::chain(&e)),
        }
    }

    if let Ok(entries) = fs::read_dir(state_dir) {
        for e in entries.filter_map(Result::ok) {
            let n = e.file_name().to_string_lossy().into_owned();
            let bed = n.trim_start_matches('.');
            let emu = n.ends_with(".emu.stats")
                || n.ends_with(".emu.log")
                || n.contains(".emu.stats.tmp")
                || n.ends_with(".emu.ctl")
                || n.contains(".emu.ctl.tmp");
            if bed.starts_with(bed_prefix)
                && (n.ends_with(".json") || n.contains(".json.tmp") || emu)
            {
                match fs::remove_file(e.path()) {
                    Ok(()) => report.files.push(e.path()),
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                    Err(err) => report.errors.push(format!("{}: {err}", e.path().display())),
                }
            }
        }
    }
    report.files.sort();
    Ok(report)
}

fn link_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 16 item 9: `--prefix lr-` and `--prefix ''` meant every bed.
    #[test]
    fn regression_a_prefix_that_matches_everything_is_refused() {
        let dir = std::env::temp_dir().join(format!("lr-sweep-test-{}", std::process::id()));
        for p in ["", "lr-", "LR-x", "a/b", "x y"] {
            let e = sweep_in(Some(p), &dir).unwrap_err();
            assert!(matches!(e, BedError::Invalid(_)), "{p:?}: {e}");
        }
    }
}
