//! A bed's settings changed for one point of a sweep (`--sweep mtu=1500,9000
//! --sweep gro=on,off`) and restored after it: each change is a plan
//! [`Step`] with its read-back, its restoring step registered before the
//! change (so the signal thread of [`crate::guard::install_signal_teardown`]
//! restores it too) and run again when the [`PointSettings`] drop, also
//! while a panic unwinds. Offloads go through [`OffloadGuard`].
//!
//! A link rate (`--sweep link=100M,1G`) is changed in place: every tbf the
//! bed's plan puts at that rate (the link itself on a tbf bed, the hosts'
//! back-pressure on an emulated one: burst and latency derived as
//! `testbed up` derives them) is replaced (`tc qdisc replace`, read back
//! from `tc -j qdisc show`); the bed's record is rewritten with the point's
//! rate (so a test reads the point's link), and a running link emulator
//! takes the new cables through its control file and confirms them in its
//! stats ([`crate::emulator::reconfigure`]). Its restore (the record and
//! the emulator as they were) is registered like the steps', and run by
//! the signal thread too ([`restore_links`]).
//!
//! [`check`] says before anything runs whether the bed's interfaces can
//! take every setting of a sweep: an offload the driver fixes (or lacks), or
//! interrupt coalescing on a driver without it (veth), is an error naming
//! the interface.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard, PoisonError};

use linerate_core::emu::Shaper;
use linerate_core::sweep::BedSetting;
use linerate_core::units::BitRate;

use crate::ethtool::parse_features;
use crate::iface::{restores, OffloadGuard, NEXT_ID};
use crate::plan::{HostFacts, Plan, Step};
use crate::spec::{BedSpec, Feature};
use crate::state::{self, BedRecord};
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
    // The emulator forwards the frames a host's veth hands it as they are:
    // with these offloads on they would carry unfinished checksums or be
    // super-packets, which a NIC completes or cuts and the emulator does
    // not (the bed plan turns them off on its hosts).
    let frame_offload = matches!(
        f,
        Feature::TxChecksum | Feature::Tso | Feature::TxUdpSegmentation
    );
    if on && frame_offload && bed.spec().effective_shaper() == Shaper::Emu {
        return Err(BedError::Invalid(format!(
            "{name}=on: bed '{}' forwards its link through the link emulator, which passes \
             frames as a wire does and neither completes checksums nor cuts super-packets as a \
             NIC would, so its hosts keep checksum and segmentation offloads off (a bed made \
             with --shaper tbf can sweep them)",
            bed.name()
        )));
    }
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
            BedSetting::Link(rate) => check_link(bed, *rate)?,
        }
    }
    Ok(())
}

/// Whether `bed` has a shaped link whose rate a point can change.
fn check_link(bed: &Bed, rate: BitRate) -> Result<(), BedError> {
    let spec = bed.spec();
    match spec.effective_shaper() {
        Shaper::None => Err(BedError::Invalid(format!(
            "link {rate}: bed '{}' has no shaped link (make it with testbed up --link)",
            bed.name()
        ))),
        Shaper::Emu if spec.link.is_none() => Err(BedError::Invalid(format!(
            "link {rate}: bed '{}' emulates impairments without a rate (make it with --link)",
            bed.name()
        ))),
        Shaper::Emu | Shaper::Tbf => Ok(()),
    }
}

/// Every tbf the plan of `spec` with its link at `rate` puts on the bed,
/// as in-place replacements (the rate, burst and latency `testbed up`
/// would give them).
pub fn tbf_replacements(spec: &BedSpec, rate: BitRate) -> Vec<Step> {
    let spec = BedSpec {
        link: Some(rate),
        ..spec.clone()
    };
    Plan::build(&spec, HostFacts::detect())
        .up
        .into_iter()
        .filter_map(|mut s| match &mut s {
            Step::Tbf { replace, .. } => {
                *replace = true;
                Some(s)
            }
            _ => None,
        })
        .collect()
}

/// `record` with its link at `rate`: the spec and the notes of the plan
/// at that rate.
fn with_link(record: &BedRecord, rate: BitRate) -> BedRecord {
    let spec = BedSpec {
        link: Some(rate),
        ..record.spec.clone()
    };
    BedRecord {
        notes: Plan::build(&spec, HostFacts::detect()).notes,
        spec,
        ..record.clone()
    }
}

/// A bed's record (and its emulator's cables) to put back.
#[derive(Debug, Clone)]
struct LinkRestore {
    state_dir: PathBuf,
    record: BedRecord,
}

impl LinkRestore {
    /// Writes the record and, with an emulator, makes it forward at the
    /// record's rate again (read back from its stats).
    fn apply(&self) -> Result<(), BedError> {
        state::write(&self.state_dir, &self.record)?;
        if self.record.emulator.is_some() {
            crate::emulator::reconfigure(&self.record, &self.state_dir)?;
        }
        Ok(())
    }
}

/// Link restores that are due, by guard id.
static LINK_RESTORES: Mutex<Vec<(u64, LinkRestore)>> = Mutex::new(Vec::new());

fn link_restores() -> MutexGuard<'static, Vec<(u64, LinkRestore)>> {
    LINK_RESTORES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Puts back every bed record and emulator a point changed and has not
/// restored yet (the signal thread, before the process exits); returns
/// what failed.
pub(crate) fn restore_links() -> Vec<String> {
    link_restores()
        .drain(..)
        .rev()
        .filter_map(|(_, r)| r.apply().err().map(|e| e.to_string()))
        .collect()
}

/// A link rate set on a bed's record and emulator, its restore registered
/// before the change.
#[derive(Debug)]
struct LinkGuard {
    id: u64,
    restore: Option<LinkRestore>,
}

impl LinkGuard {
    /// Records `now` with its link at `rate` and makes its emulator (if
    /// any) forward at it, after registering the way back to `now`.
    fn apply(state_dir: PathBuf, now: BedRecord, rate: BitRate) -> Result<Self, BedError> {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let set = LinkRestore {
            state_dir: state_dir.clone(),
            record: with_link(&now, rate),
        };
        let back = LinkRestore {
            state_dir,
            record: now,
        };
        link_restores().push((id, back.clone()));
        let guard = Self {
            id,
            restore: Some(back),
        };
        // On error the guard drops and puts the record back.
        crate::guard::run_locked(|| set.apply())?;
        Ok(guard)
    }

    fn restore_now(&mut self) -> Result<(), BedError> {
        let Some(back) = self.restore.take() else {
            return Ok(());
        };
        let mut reg = link_restores();
        match reg.iter().position(|(id, _)| *id == self.id) {
            // Restored already (by the signal thread).
            None => Ok(()),
            Some(i) => {
                reg.remove(i);
                drop(reg);
                back.apply()
            }
        }
    }
}

impl Drop for LinkGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore_now() {
            eprintln!("linerate: {e}");
        }
    }
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
    Link(Box<LinkGuard>),
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
                    // A link emulator must make room for the longer frames
                    // before the point's test sends them.
                    if state::read(bed.state_dir(), bed.name())?.emulator.is_some() {
                        crate::emulator::await_mtu(bed.state_dir(), bed.name(), *mtu)?;
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
                BedSetting::Link(rate) => {
                    me.set_link(bed, *rate)?;
                    me.applied.push(format!("link {rate}"));
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

    /// Sets the link of `bed` to `rate`: every tbf of its plan replaced
    /// (read back), then its record and emulator ([`LinkGuard`]).
    fn set_link(&mut self, bed: &Bed, rate: BitRate) -> Result<(), BedError> {
        check_link(bed, rate)?;
        let now = state::read(bed.state_dir(), bed.name())?;
        let Some(was) = now.spec.link else {
            return Err(BedError::Invalid(format!(
                "link {rate}: bed '{}' has no link rate now",
                bed.name()
            )));
        };
        if was == rate {
            return Ok(());
        }
        let back = tbf_replacements(&now.spec, was);
        for (set, back) in tbf_replacements(&now.spec, rate).iter().zip(back) {
            self.changes
                .push(Change::Step(StepGuard::apply(set, back)?));
        }
        let g = LinkGuard::apply(bed.state_dir().to_path_buf(), now, rate)?;
        self.changes.push(Change::Link(Box::new(g)));
        Ok(())
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
                Change::Link(mut g) => g.restore_now(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Topology;

    fn spec(shaper: Shaper) -> BedSpec {
        let mut s = BedSpec::new("t1", Topology::Pair);
        s.link = Some(BitRate::from_mbps(100));
        s.shaper = shaper;
        s
    }

    #[test]
    fn a_link_point_replaces_every_tbf_of_the_plan_at_its_rate() {
        let lines = |shaper| -> Vec<String> {
            tbf_replacements(&spec(shaper), BitRate::from_gbps(10))
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        // tbf bed: the link on both hosts' egress; its bucket and latency
        // as testbed up derives them at 10G.
        let tbf = lines(Shaper::Tbf);
        assert_eq!(tbf.len(), 2, "{tbf:#?}");
        assert!(tbf.iter().all(|l| l.contains(" qdisc replace dev ")
            && l.ends_with("rate 10000000000bit burst 640000 latency 5ms overhead 24 mpu 84")));
        // Emulated bed: the back-pressure tbf on the hosts' ends, none in
        // the link namespace.
        let emu = lines(Shaper::Emu);
        assert_eq!(emu.len(), 2, "{emu:#?}");
        assert!(emu.iter().all(|l| !l.contains("-link ")), "{emu:#?}");
        // The read-back is tc's, of the new rate.
        let rb = tbf_replacements(&spec(Shaper::Tbf), BitRate::from_mbps(10))[0]
            .readback()
            .unwrap();
        assert_eq!(rb.check, crate::plan::Check::Tbf(BitRate::from_mbps(10)));
    }

    #[test]
    fn a_link_point_rewrites_the_records_rate_and_notes() {
        let s = spec(Shaper::Tbf);
        let plan = Plan::build(&s, HostFacts { cpus: 2 });
        let layout = crate::layout::Layout::new(&s.name, s.topology);
        let r = BedRecord::new(&s, layout, plan.notes, Vec::new());
        let at = with_link(&r, BitRate::from_gbps(1));
        assert_eq!(at.spec.link, Some(BitRate::from_gbps(1)));
        assert!(
            at.notes.iter().any(|n| n.contains("1 Gbit/s")),
            "{:#?}",
            at.notes
        );
        assert_eq!((at.layout, at.commands), (r.layout, r.commands));
    }
}
