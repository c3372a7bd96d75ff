//! [`Bed`]: a bed that is up, owned (removed on drop) or merely opened.

use std::io::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use linerate_core::testbed::TestbedDown;
use linerate_core::units::BitRate;

use crate::guard::{self, Registered};
use crate::layout::Layout;
use crate::plan::{HostFacts, Plan, Step};
use crate::spec::{validate_name, BedSpec, Topology};
use crate::state::{self, BedRecord};
use crate::{emulator, privileges, BedError};

/// A bed that is up.
///
/// From [`Bed::up`] it is *owning*: dropping it (or [`Bed::down`]) removes
/// every namespace and link it created, also while a panic unwinds. From
/// [`Bed::open`] it is a view of a stored bed: dropping it removes nothing.
#[derive(Debug)]
pub struct Bed {
    record: BedRecord,
    state_dir: PathBuf,
    owning: bool,
}

impl Bed {
    /// Builds the bed `spec` describes. On any error (a failed command, a
    /// setting that did not read back, a signal) everything it created is
    /// removed again before the error is returned.
    pub fn up(spec: &BedSpec) -> Result<Self, BedError> {
        Self::up_in(spec, Path::new(state::STATE_DIR), HostFacts::detect())
    }

    /// [`Bed::up`] with the state directory and host facts given.
    pub fn up_in(spec: &BedSpec, state_dir: &Path, facts: HostFacts) -> Result<Self, BedError> {
        spec.validate()?;
        privileges::check().map_err(BedError::Privileges)?;
        let plan = Plan::build(spec, facts);
        let layout = match spec.uses_emulator() {
            true => Layout::emulated(&spec.name, spec.topology),
            false => Layout::new(&spec.name, spec.topology),
        };
        if let Some(ns) = layout
            .namespaces()
            .iter()
            .find(|ns| guard::netns_exists(ns))
        {
            return Err(BedError::Exists {
                name: spec.name.clone(),
                what: format!("namespace {ns} exists"),
            });
        }
        let commands = plan.up.iter().map(ToString::to_string).collect();
        let mut record = BedRecord::new(spec, layout.clone(), plan.notes.clone(), commands);
        let state_file = state::claim(state_dir, &record)?;
        let reg = Registered {
            name: spec.name.clone(),
            namespaces: layout.namespaces(),
            state_file,
        };
        guard::register(reg.clone());
        let built = plan
            .up
            .iter()
            .try_for_each(|step| match step {
                Step::Emulate { .. } => {
                    let started = guard::run_locked(|| emulator::start(&record, state_dir))?;
                    record.emulator = Some(started);
                    Ok(())
                }
                _ => guard::run_step(step),
            })
            .and_then(|()| {
                // Under the lock, so a signal that arrived during the last
                // step rolls the bed back rather than racing `keep`.
                guard::run_locked(|| {
                    record.complete = true;
                    state::write(state_dir, &record)
                })
            });
        match built {
            Ok(()) => Ok(Self {
                record,
                state_dir: state_dir.to_path_buf(),
                owning: true,
            }),
            Err(e) => {
                if let Err(t) = guard::teardown(&reg) {
                    use std::io::Write as _;
                    let _ = writeln!(
                        std::io::stderr(),
                        "linerate: rolling back bed '{}': {t}",
                        spec.name
                    );
                }
                Err(e)
            }
        }
    }

    /// A non-owning view of the stored bed `name` (for `--bed NAME`):
    /// dropping it removes nothing.
    pub fn open(name: &str) -> Result<Self, BedError> {
        Self::open_in(name, Path::new(state::STATE_DIR))
    }

    /// [`Bed::open`] with the state directory given.
    pub fn open_in(name: &str, state_dir: &Path) -> Result<Self, BedError> {
        let name = name.strip_prefix(crate::PREFIX).unwrap_or(name);
        validate_name(name)?;
        let record = state::read(state_dir, name)?;
        Ok(Self {
            record,
            state_dir: state_dir.to_path_buf(),
            owning: false,
        })
    }

    /// Removes the bed (owning or not), reporting what could not be removed.
    pub fn down(mut self) -> Result<(), BedError> {
        self.owning = false;
        self.teardown()
    }

    /// [`Bed::down`], returning what `testbed down` reports.
    pub fn remove(self) -> Result<TestbedDown, BedError> {
        let d = TestbedDown {
            removed: self.name().to_string(),
            namespaces: self.layout().namespaces(),
        };
        self.down()?;
        Ok(d)
    }

    /// The namespace of host `role`, which must exist.
    pub fn live_netns(&self, role: &str) -> Result<&str, BedError> {
        let ns = self.netns(role).ok_or_else(|| {
            let hosts: Vec<&str> = self
                .layout()
                .hosts
                .iter()
                .map(|h| h.role.as_str())
                .collect();
            let hosts = hosts.join(", ");
            BedError::Invalid(format!(
                "bed {} has no host '{role}' (hosts: {hosts})",
                self.name()
            ))
        })?;
        if !guard::netns_exists(ns) {
            let name = self.name();
            return Err(BedError::Invalid(format!(
                "namespace {ns} of bed {name} is gone"
            )));
        }
        Ok(ns)
    }

    fn teardown(&self) -> Result<(), BedError> {
        guard::teardown(&Registered {
            name: self.record.name.clone(),
            namespaces: self.record.layout.namespaces(),
            state_file: state::path(&self.state_dir, &self.record.name),
        })?;
        if let Some(ns) = self
            .record
            .layout
            .namespaces()
            .iter()
            .find(|ns| guard::netns_exists(ns))
        {
            return Err(BedError::Teardown {
                name: self.record.name.clone(),
                why: format!("namespace {ns} is still there"),
            });
        }
        Ok(())
    }

    /// Leaves the bed up after this value is gone (`linerate testbed up`);
    /// returns its description.
    pub fn keep(mut self) -> BedRecord {
        self.owning = false;
        guard::deregister(&self.record.name);
        self.record.clone()
    }

    /// The bed's name (without prefix).
    pub fn name(&self) -> &str {
        &self.record.name
    }

    /// Its topology.
    pub fn topology(&self) -> Topology {
        self.record.spec.topology
    }

    /// What it was built from.
    pub fn spec(&self) -> &BedSpec {
        &self.record.spec
    }

    /// The directory its record is stored in.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// Its stored description.
    pub fn record(&self) -> &BedRecord {
        &self.record
    }

    /// Its namespaces, interfaces and addresses.
    pub fn layout(&self) -> &Layout {
        &self.record.layout
    }

    /// Fidelity notes (what the link emulation covers and what it does not).
    pub fn notes(&self) -> &[String] {
        &self.record.notes
    }

    /// The namespace of host `role` (`a`, `b`, `dut`): `lr-<bed>-<role>`.
    pub fn netns(&self, role: &str) -> Option<&str> {
        self.record.layout.host(role).map(|h| h.netns.as_str())
    }

    /// Host `role`'s IPv4 test address.
    pub fn ipv4(&self, role: &str) -> Option<Ipv4Addr> {
        self.record.layout.ipv4(role)
    }

    /// Host `role`'s IPv6 test address.
    pub fn ipv6(&self, role: &str) -> Option<Ipv6Addr> {
        self.record.layout.ipv6(role)
    }

    /// Host `role`'s test interface (inside its namespace).
    pub fn iface(&self, role: &str) -> Option<&str> {
        self.record.layout.host(role).map(|h| h.iface.as_str())
    }

    /// The emulated link speed, if any.
    pub fn link(&self) -> Option<BitRate> {
        self.record.spec.link
    }

    /// Whether dropping this value removes the bed.
    pub fn is_owning(&self) -> bool {
        self.owning
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        if self.owning {
            self.owning = false;
            if let Err(e) = self.teardown() {
                // Never panic in drop, not even on a closed stderr.
                let _ = writeln!(
                    std::io::stderr(),
                    "linerate: {}",
                    linerate_core::error::chain(&e)
                );
            }
        }
    }
}
