//! `linerate testbed up|down|list|sweep|exec`: beds from network namespaces
//! (crate `linerate-bed`).

use std::path::Path;

use anyhow::{anyhow, Context as _};
use clap::{Args, Subcommand};
use linerate_bed::plan::{render_argv, HostFacts, Plan};
use linerate_bed::state::{self, BedRecord};
use linerate_bed::{guard, sweep, Bed, BedError, BedSpec, Offloads, TcpMem, Topology};
use linerate_core::units::BitRate;
use linerate_report::table::{Align, Table};
use serde::Serialize;

use crate::output::{print, print_json};
use crate::Failure;

/// Flags of `linerate testbed`.
#[derive(Debug, Args)]
pub(crate) struct TestbedArgs {
    #[command(subcommand)]
    pub(crate) action: Action,
}

/// What to do with beds.
#[derive(Debug, Subcommand)]
pub(crate) enum Action {
    /// Builds a bed: namespaces lr-NAME-a, lr-NAME-b (and lr-NAME-dut), veth links,
    /// addresses in 198.18.0.0/15 and 2001:2::/48, the settings given (each read back).
    ///
    /// Topologies: pair (a — b, 198.18.0.1/.2), bridge (a — dut with a Linux bridge — b,
    /// one subnet), router (a — dut forwarding — b; 198.18.0.0/24 and 198.19.0.0/24,
    /// 2001:2::/64 and 2001:2:0:1::/64). A failure midway, or SIGINT/SIGTERM, removes
    /// what was built.
    Up(UpArgs),
    /// Removes a bed: its namespaces (and everything in them) and its state file.
    Down(NameArgs),
    /// Lists the beds stored in /run/linerate/beds.
    List(ListArgs),
    /// Removes every leftover named lr-… (namespaces, root-namespace links, stale
    /// bed files), or only those of beds whose name starts with --prefix.
    Sweep(SweepArgs),
    /// Runs a command inside one host's namespace: `testbed exec NAME a -- ip addr`.
    Exec(ExecArgs),
}

/// Flags of `linerate testbed up`.
#[derive(Debug, Args)]
pub(crate) struct UpArgs {
    /// The bed's name: 1-20 characters of a-z, 0-9, '-', '_' (linerate adds "lr-").
    pub(crate) name: String,
    /// pair, bridge or router.
    #[arg(long, value_name = "TOPO")]
    pub(crate) topo: Topology,
    /// Emulated link speed (e.g. 10M, 100M, 1G): tbf with overhead 24 mpu 84 on every
    /// egress of the path, so preamble, SFD, IFG and FCS are counted; segmentation
    /// offloads (gso, tso, tx-udp-segmentation) and gro are turned off there.
    #[arg(long, value_name = "SPEED")]
    pub(crate) link: Option<BitRate>,
    /// Random loss in percent on the ingress of hosts a and b (nftables numgen).
    #[arg(long, value_name = "PCT")]
    pub(crate) loss: Option<f64>,
    /// MTU of every interface on the path (1280-65000).
    #[arg(long, value_name = "BYTES")]
    pub(crate) mtu: Option<u32>,
    /// Offloads on every veth of the path: gro, gso, tso, lro, sg, tx-checksum,
    /// rx-checksum, tx-udp-segmentation, rx-gro-list, rx-udp-gro-forwarding, rxvlan,
    /// txvlan; e.g. gro=off,tx-checksum=off.
    #[arg(long, value_name = "NAME=on|off,…")]
    pub(crate) offload: Option<Offloads>,
    /// Receive packet steering to every CPU on each veth of the path.
    #[arg(long)]
    pub(crate) rps: bool,
    /// net.ipv4.tcp_rmem in every host: MIN,DEFAULT,MAX bytes (per namespace).
    #[arg(long, value_name = "MIN,DEF,MAX")]
    pub(crate) tcp_rmem: Option<TcpMem>,
    /// net.ipv4.tcp_wmem in every host: MIN,DEFAULT,MAX bytes (per namespace).
    #[arg(long, value_name = "MIN,DEF,MAX")]
    pub(crate) tcp_wmem: Option<TcpMem>,
    /// Print the commands (and their read-backs) instead of running them.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// One JSON document: the bed's description (schema linerate.bed version 1), or with
    /// --dry-run the plan (schema linerate.testbed).
    #[arg(long)]
    pub(crate) json: bool,
}

/// A bed's name.
#[derive(Debug, Args)]
pub(crate) struct NameArgs {
    /// The bed's name (without "lr-").
    pub(crate) name: String,
    /// One JSON document.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Flags of `linerate testbed list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// One JSON document.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Flags of `linerate testbed sweep`.
#[derive(Debug, Args)]
pub(crate) struct SweepArgs {
    /// Only beds whose name starts with this (objects named lr-PREFIX…).
    #[arg(long, value_name = "P")]
    pub(crate) prefix: Option<String>,
    /// One JSON document.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Flags of `linerate testbed exec`.
#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    /// The bed's name.
    pub(crate) name: String,
    /// a, b or dut.
    pub(crate) host: String,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

/// JSON of `testbed up|down|list|sweep`.
#[derive(Debug, Serialize)]
struct TestbedJson<T: Serialize> {
    schema: &'static str,
    version: u32,
    #[serde(flatten)]
    body: T,
}

fn json<T: Serialize>(body: T) -> TestbedJson<T> {
    TestbedJson {
        schema: "linerate.testbed",
        version: 1,
        body,
    }
}

/// Runs `linerate testbed …`.
pub(crate) fn run(args: &TestbedArgs, ctx: &crate::Ctx) -> Result<(), Failure> {
    let _ = ctx.width;
    match &args.action {
        Action::Up(a) => up(a),
        Action::Down(a) => down(a),
        Action::List(a) => list(a),
        Action::Sweep(a) => sweep_cmd(a),
        Action::Exec(a) => exec(a),
    }
}

fn spec_of(a: &UpArgs) -> Result<BedSpec, Failure> {
    let mut spec = BedSpec::new(a.name.clone(), a.topo);
    spec.link = a.link;
    spec.loss_pct = a.loss;
    spec.mtu = a.mtu;
    spec.offloads = a.offload.clone().unwrap_or_default();
    spec.rps = a.rps;
    spec.tcp_rmem = a.tcp_rmem;
    spec.tcp_wmem = a.tcp_wmem;
    spec.validate()?;
    Ok(spec)
}

fn up(a: &UpArgs) -> Result<(), Failure> {
    let spec = spec_of(a)?;
    if a.dry_run {
        let plan = Plan::build(&spec, HostFacts::detect());
        if a.json {
            #[derive(Serialize)]
            struct DryRun<'a> {
                dry_run: bool,
                spec: &'a BedSpec,
                commands: Vec<String>,
                readbacks: Vec<String>,
                down_commands: Vec<String>,
                notes: &'a [String],
            }
            return print_json(&json(DryRun {
                dry_run: true,
                spec: &spec,
                commands: plan.up.iter().map(ToString::to_string).collect(),
                readbacks: plan
                    .up
                    .iter()
                    .filter_map(|s| s.readback())
                    .map(|r| render_argv(&r.argv))
                    .collect(),
                down_commands: plan.down.iter().map(ToString::to_string).collect(),
                notes: &plan.notes,
            }));
        }
        let mut out = format!(
            "# linerate testbed up {} --topo {} (dry run: nothing is created)\n",
            spec.name, spec.topology
        );
        out.push_str(&plan.render(true));
        out.push_str("# down:\n");
        for s in &plan.down {
            out.push_str(&format!("#   {s}\n"));
        }
        for n in &plan.notes {
            out.push_str(&format!("# note: {n}\n"));
        }
        return print(&out);
    }
    guard::install_signal_teardown().context("installing the signal guard")?;
    let bed = match Bed::up(&spec) {
        Ok(bed) => bed,
        // The bed was rolled back; end as the signal asked (130, 143).
        Err(BedError::Interrupted) => std::process::exit(guard::signal_exit_code().unwrap_or(130)),
        Err(e) => return Err(e.into()),
    };
    let record = bed.keep();
    if a.json {
        // The stored description itself (schema linerate.bed).
        print_json(&record)
    } else {
        print(&describe(&record))
    }
}

/// The human description of a bed.
fn describe(r: &BedRecord) -> String {
    let mut out = format!(
        "bed {} ({}) is up{}\n\n",
        r.name,
        r.spec.topology,
        settings_line(&r.spec)
    );
    let mut t = Table::new([
        ("host", Align::Left),
        ("namespace", Align::Left),
        ("interface", Align::Left),
        ("IPv4", Align::Left),
        ("IPv6", Align::Left),
        ("gateways", Align::Left),
    ]);
    for h in &r.layout.hosts {
        let opt = |x: Option<String>| x.unwrap_or_else(|| "-".into());
        let gws: Vec<String> = h.gateways.iter().map(ToString::to_string).collect();
        t.row(vec![
            h.role.clone(),
            h.netns.clone(),
            h.iface.clone(),
            opt(r.layout.ipv4(&h.role).map(|a| a.to_string())),
            opt(r.layout.ipv6(&h.role).map(|a| a.to_string())),
            if gws.is_empty() {
                "-".into()
            } else {
                gws.join(", ")
            },
        ]);
    }
    out.push_str(&t.render(2));
    for n in &r.notes {
        out.push_str(&format!("\nnote: {n}"));
    }
    if !r.notes.is_empty() {
        out.push('\n');
    }
    out.push_str(&format!(
        "\nrun inside a host: linerate testbed exec {0} a -- CMD…\nremove it:        linerate testbed down {0}\n",
        r.name
    ));
    out
}

fn settings_line(s: &BedSpec) -> String {
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
    if s.rps {
        parts.push("rps".into());
    }
    if let Some(m) = s.tcp_rmem {
        parts.push(format!("tcp_rmem {m}"));
    }
    if let Some(m) = s.tcp_wmem {
        parts.push(format!("tcp_wmem {m}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(": {}", parts.join(", "))
    }
}

fn down(a: &NameArgs) -> Result<(), Failure> {
    let bed = Bed::open(&a.name)?;
    let name = bed.name().to_string();
    let namespaces = bed.layout().namespaces();
    bed.down()?;
    if a.json {
        #[derive(Serialize)]
        struct Down {
            removed: String,
            namespaces: Vec<String>,
        }
        print_json(&json(Down {
            removed: name,
            namespaces,
        }))
    } else {
        print(&format!("bed {name} removed ({})\n", namespaces.join(", ")))
    }
}

/// Whether every namespace of a stored bed exists.
fn status(r: &BedRecord) -> &'static str {
    let ns = r.layout.namespaces();
    let present = ns.iter().filter(|n| guard::netns_exists(n)).count();
    match (r.complete, present) {
        (true, p) if p == ns.len() => "up",
        (false, _) => "incomplete (sweep it)",
        (_, 0) => "gone (sweep it)",
        _ => "partial (sweep it)",
    }
}

fn list(a: &ListArgs) -> Result<(), Failure> {
    let records = state::list(Path::new(state::STATE_DIR));
    if a.json {
        #[derive(Serialize)]
        struct Item {
            name: String,
            status: &'static str,
            bed: BedRecord,
        }
        #[derive(Serialize)]
        struct List {
            beds: Vec<Item>,
            errors: Vec<String>,
        }
        let mut l = List {
            beds: Vec::new(),
            errors: Vec::new(),
        };
        for r in records {
            match r {
                Ok(record) => l.beds.push(Item {
                    name: record.name.clone(),
                    status: status(&record),
                    bed: record,
                }),
                Err(e) => l.errors.push(linerate_core::error::chain(&e)),
            }
        }
        return print_json(&json(l));
    }
    if records.is_empty() {
        return print("no beds (none stored in /run/linerate/beds)\n");
    }
    let mut t = Table::new([
        ("bed", Align::Left),
        ("topology", Align::Left),
        ("status", Align::Left),
        ("a", Align::Left),
        ("b", Align::Left),
        ("settings", Align::Left),
    ]);
    let mut errors = String::new();
    for r in records {
        match r {
            Ok(r) => {
                let addr = |role: &str| {
                    r.layout
                        .ipv4(role)
                        .map_or_else(|| "-".into(), |a| a.to_string())
                };
                t.row(vec![
                    r.name.clone(),
                    r.spec.topology.to_string(),
                    status(&r).into(),
                    addr("a"),
                    addr("b"),
                    settings_line(&r.spec).trim_start_matches(": ").to_string(),
                ]);
            }
            Err(e) => errors.push_str(&format!("warning: {}\n", linerate_core::error::chain(&e))),
        }
    }
    print(&format!("{}{errors}", t.render(0)))
}

fn sweep_cmd(a: &SweepArgs) -> Result<(), Failure> {
    let report = sweep::sweep(a.prefix.as_deref())?;
    if a.json {
        print_json(&json(&report))?;
    } else {
        let mut out = String::new();
        for n in &report.netns {
            out.push_str(&format!("removed namespace {n}\n"));
        }
        for l in &report.links {
            out.push_str(&format!("removed link {l}\n"));
        }
        for f in &report.files {
            out.push_str(&format!("removed {}\n", f.display()));
        }
        if out.is_empty() {
            out.push_str("nothing to sweep\n");
        }
        print(&out)?;
    }
    if report.errors.is_empty() {
        Ok(())
    } else {
        Err(Failure::Usage(anyhow!(
            "sweep incomplete: {}",
            report.errors.join("; ")
        )))
    }
}

fn exec(a: &ExecArgs) -> Result<(), Failure> {
    let bed = Bed::open(&a.name)?;
    let ns = bed.netns(&a.host).ok_or_else(|| {
        let hosts: Vec<&str> = bed.layout().hosts.iter().map(|h| h.role.as_str()).collect();
        anyhow!(
            "bed {} has no host '{}' (hosts: {})",
            bed.name(),
            a.host,
            hosts.join(", ")
        )
    })?;
    if !guard::netns_exists(ns) {
        return Err(anyhow!("namespace {ns} of bed {} is gone", bed.name()).into());
    }
    let status = std::process::Command::new("ip")
        .args(["netns", "exec", ns])
        .args(&a.command)
        .status()
        .with_context(|| format!("running ip netns exec {ns} {}", a.command.join(" ")))?;
    // The command's own exit status is ours (128 + signal if it was killed).
    let code = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt as _;
        128 + status.signal().unwrap_or(0)
    });
    if code != 0 {
        std::process::exit(code);
    }
    Ok(())
}
