//! A bed's settings changed for one point of a sweep (`--sweep mtu=1500,9000
//! --sweep gro=on,off`) and restored after it: each change is a plan
//! [`Step`] with its read-back, its restoring step registered before the
//! change (so the signal thread of [`crate::guard::install_signal_teardown`]
//! restores it too) and run again when the [`PointSettings`] drop, also
//! while a panic unwinds. Offloads go through [`OffloadGuard`].
//!
//! [`check`] says before anything runs whether the bed's interfaces can
//! take every setting of a sweep: an offload the driver fixes (or lacks), or
//! interrupt coalescing on a driver without it (veth), is an error naming
//! the interface.

use std::sync::atomic::Ordering;

use linerate_core::sweep::BedSetting;

use crate::ethtool::parse_features;
use crate::iface::{restores, OffloadGuard, NEXT_ID};
use crate::plan::Step;
use crate::spec::Feature;
use crate::{Bed, BedError};

/// Reads a command's output in a namespace.
fn read(argv: &[&str]) -> Result<String, BedError> {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    crate::apply::run_command(&argv)
}

/// The MTU of `dev` in `netns` now.
fn mtu_of(netns: &str, dev: &str) -> Result<u32, BedError> {
    let out = read(&["ip", "-n", netns, "-j", "link", "show", "dev", dev])?;
    let v: serde_json::Value = serde_json::from_str(&out)
        .map_err(|e| BedError::Invalid(format!("ip -j link show {dev}: {e}")))?;
    v.get(0)
        .and_then(|l| l.get("mtu"))
        .and_then(serde_json::Value::as_u64)
        .and_then(|m| u32::try_from(m).ok())
        .ok_or_else(|| BedError::Invalid(format!("no MTU for {dev} in {netns}")))
}

/// The offload `name` (`gro`, `tx-checksum` …) and whether every veth end
/// of `bed` can be set to `on`.
fn check_offload(bed: &Bed, name: &str, on: bool) -> Result<(), BedError> {
    let f: Feature = name.parse()?;
    for i in bed.layout().ifaces.iter().filter(|i| i.veth) {
        let shown = read(&["ip", "netns", "exec", &i.netns, "ethtool", "-k", &i.name])?;
        let state = parse_features(&shown);
        match state.get(f.ethtool_show_name()) {
            None => {
                return Err(BedError::Invalid(format!(
                    "{name}: the driver of {} in {} has no such offload",
                    i.name, i.netns
                )))
            }
            Some(s) if s.fixed && s.on != on => {
                return Err(BedError::Invalid(format!(
                    "{name}={}: the driver of {} in {} fixes it {}",
                    if on { "on" } else { "off" },
                    i.name,
                    i.netns,
                    s.word()
                )))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// The receive coalescing (`ethtool -c` rx-usecs) of `dev` in `netns`, or
/// why it cannot be changed (veth has no interrupts to coalesce).
fn rx_usecs_now(netns: &str, dev: &str) -> Result<u32, BedError> {
    let no = |why: String| {
        BedError::Invalid(format!(
            "rx-usecs: the driver of {dev} in {netns} has no interrupt coalescing ({why})"
        ))
    };
    let shown = read(&["ip", "netns", "exec", netns, "ethtool", "-c", dev])
        .map_err(|e| no(linerate_core::error::chain(&e)))?;
    crate::plan::rx_usecs_of(&shown).ok_or_else(|| no("ethtool -c shows no rx-usecs".into()))
}

/// Whether the driver of every veth end of `bed` supports interrupt
/// coalescing (`ethtool -c` lists rx-usecs; veth does not).
fn check_coalescing(bed: &Bed) -> Result<(), BedError> {
    for i in bed.layout().ifaces.iter().filter(|i| i.veth) {
        rx_usecs_now(&i.netns, &i.name)?;
    }
    Ok(())
}

/// Whether every interface of `bed` can take every setting in `points`
/// (offloads the driver fixes or lacks are refused), before anything runs.
pub fn check<'a>(
    bed: &Bed,
    points: impl IntoIterator<Item = &'a BedSetting>,
) -> Result<(), BedError> {
    for s in points {
        match s {
            BedSetting::Mtu(m) => {
                if !(crate::MIN_MTU..=crate::MAX_MTU).contains(m) {
                    return Err(BedError::Invalid(format!(
                        "mtu {m} is outside {}..={}",
                        crate::MIN_MTU,
                        crate::MAX_MTU
                    )));
                }
            }
            BedSetting::Offload(name, on) => check_offload(bed, name, *on)?,
            BedSetting::Rps(_) | BedSetting::TcpMem(..) => {}
            BedSetting::RxUsecs(_) => check_coalescing(bed)?,
        }
    }
    Ok(())
}

/// One step applied with its restore registered first.
#[derive(Debug)]
struct StepGuard {
    id: u64,
    restore: Option<Step>,
}

impl StepGuard {
    /// Applies `set` (read back) after registering `restore`.
    fn apply(set: &Step, restore: Step) -> Result<Self, BedError> {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        restores().push((id, restore.clone()));
        let guard = Self {
            id,
            restore: Some(restore),
        };
        // On error the guard drops and puts the previous value back.
        crate::guard::run_step(set)?;
        Ok(guard)
    }

    fn restore_now(&mut self) -> Result<(), BedError> {
        let Some(step) = self.restore.take() else {
            return Ok(());
        };
        let mut reg = restores();
        match reg.iter().position(|(id, _)| *id == self.id) {
            // Restored already (by the signal thread).
            None => Ok(()),
            Some(i) => {
                reg.remove(i);
                crate::apply::apply_step(&step)
            }
        }
    }
}

impl Drop for StepGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore_now() {
            eprintln!("linerate: {e}");
        }
    }
}

/// One change of a point, as its guard.
#[derive(Debug)]
enum Change {
    Step(StepGuard),
    Offload(OffloadGuard),
}

/// The settings of one point applied to a bed; dropping it (or
/// [`PointSettings::restore`]) puts every previous value back, last change
/// first.
#[derive(Debug)]
pub struct PointSettings {
    changes: Vec<Change>,
    applied: Vec<String>,
}

impl PointSettings {
    /// Applies `settings` to every interface of `bed` they concern (MTU:
    /// all, veth ends first; offloads, RPS and rx-usecs: the veth ends; TCP buffer
    /// sysctls: every host), each read back.
    pub fn apply(bed: &Bed, settings: &[BedSetting]) -> Result<Self, BedError> {
        let mut me = Self {
            changes: Vec::new(),
            applied: Vec::new(),
        };
        let layout = bed.layout();
        let mut ifaces: Vec<_> = layout.ifaces.iter().filter(|i| i.veth).collect();
        ifaces.extend(layout.ifaces.iter().filter(|i| !i.veth));
        for s in settings {
            match s {
                BedSetting::Mtu(mtu) => {
                    for i in &ifaces {
                        let now = mtu_of(&i.netns, &i.name)?;
                        if now == *mtu {
                            continue;
                        }
                        let step = |mtu| Step::SetMtu {
                            netns: i.netns.clone(),
                            dev: i.name.clone(),
                            mtu,
                        };
                        me.changes
                            .push(Change::Step(StepGuard::apply(&step(*mtu), step(now))?));
                    }
                    me.applied.push(format!("mtu {mtu}"));
                }
                BedSetting::Offload(name, on) => {
                    for i in ifaces.iter().filter(|i| i.veth) {
                        let g = OffloadGuard::set(&i.netns, &i.name, name, *on)?;
                        me.changes.push(Change::Offload(g));
                    }
                    me.applied
                        .push(format!("{name} {}", if *on { "on" } else { "off" }));
                }
                BedSetting::Rps(on) => {
                    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
                    let mask = if *on {
                        crate::plan::cpu_mask(cpus)
                    } else {
                        "0".into()
                    };
                    for i in ifaces.iter().filter(|i| i.veth) {
                        let now = read(&[
                            "ip",
                            "netns",
                            "exec",
                            &i.netns,
                            "sh",
                            "-c",
                            &format!("cat /sys/class/net/{}/queues/rx-0/rps_cpus", i.name),
                        ])?;
                        let step = |mask: String| Step::Rps {
                            netns: i.netns.clone(),
                            dev: i.name.clone(),
                            mask,
                        };
                        let (set, back) = (step(mask.clone()), step(now.trim().to_string()));
                        me.changes.push(Change::Step(StepGuard::apply(&set, back)?));
                    }
                    me.applied
                        .push(format!("rps {}", if *on { "on" } else { "off" }));
                }
                BedSetting::RxUsecs(usecs) => {
                    for i in ifaces.iter().filter(|i| i.veth) {
                        let now = rx_usecs_now(&i.netns, &i.name)?;
                        let step = |rx_usecs| Step::Coalesce {
                            netns: i.netns.clone(),
                            dev: i.name.clone(),
                            rx_usecs,
                        };
                        me.changes
                            .push(Change::Step(StepGuard::apply(&step(*usecs), step(now))?));
                    }
                    me.applied.push(format!("rx-usecs {usecs}"));
                }
                BedSetting::TcpMem(key, [min, def, max]) => {
                    for h in &layout.hosts {
                        let now = read(&["ip", "netns", "exec", &h.netns, "sysctl", "-n", key])?;
                        let step = |value: String| Step::Sysctl {
                            netns: h.netns.clone(),
                            key: (*key).to_string(),
                            value,
                        };
                        let now = now.split_whitespace().collect::<Vec<_>>().join(" ");
                        let set = step(format!("{min} {def} {max}"));
                        me.changes
                            .push(Change::Step(StepGuard::apply(&set, step(now))?));
                    }
                    me.applied.push(format!("{key} {min} {def} {max}"));
                }
            }
        }
        Ok(me)
    }

    /// What was set, for progress lines (`mtu 9000, gro off`).
    pub fn describe(&self) -> String {
        self.applied.join(", ")
    }

    /// Puts every previous value back now, last change first; the error
    /// says what failed.
    pub fn restore(mut self) -> Result<(), BedError> {
        let mut errors = Vec::new();
        while let Some(c) = self.changes.pop() {
            let r = match c {
                Change::Step(mut g) => g.restore_now(),
                Change::Offload(g) => g.restore(),
            };
            if let Err(e) = r {
                errors.push(e.to_string());
            }
        }
        match errors.is_empty() {
            true => Ok(()),
            false => Err(BedError::Invalid(errors.join("; "))),
        }
    }
}

impl Drop for PointSettings {
    fn drop(&mut self) {
        // Last change first (the Vec would drop first to last).
        while let Some(c) = self.changes.pop() {
            drop(c);
        }
    }
}

/// One interface's settings as read now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfaceNow {
    /// Its namespace.
    pub netns: String,
    /// Its name.
    pub iface: String,
    /// Its MTU.
    pub mtu: u32,
    /// The offload asked about (veth ends only; `None` elsewhere or when
    /// the driver lacks it).
    pub offload_on: Option<bool>,
}

/// The MTU of every interface of `bed` and the state of `offload` on every
/// veth end, read now (what a point set, or what was restored).
pub fn read_back(bed: &Bed, offload: &str) -> Result<Vec<IfaceNow>, BedError> {
    let f: Feature = offload.parse()?;
    bed.layout()
        .ifaces
        .iter()
        .map(|i| {
            let offload_on = match i.veth {
                true => {
                    let shown = read(&["ip", "netns", "exec", &i.netns, "ethtool", "-k", &i.name])?;
                    parse_features(&shown)
                        .get(f.ethtool_show_name())
                        .map(|s| s.on)
                }
                false => None,
            };
            Ok(IfaceNow {
                netns: i.netns.clone(),
                iface: i.name.clone(),
                mtu: mtu_of(&i.netns, &i.name)?,
                offload_on,
            })
        })
        .collect()
}
