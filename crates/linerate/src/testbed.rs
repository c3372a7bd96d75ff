//! `linerate testbed up|down|list|sweep|exec`: beds from network namespaces
//! (crate `linerate-bed`).

use std::path::Path;

use anyhow::{anyhow, Context as _};
use clap::{Args, Subcommand};
use linerate_bed::plan::{render_argv, HostFacts, Plan};
use linerate_bed::state::{self, BedRecord};
use linerate_bed::{guard, sweep, Bed, BedError, BedSpec, Offloads, TcpMem, Topology};
use linerate_core::result::Envelope;
use linerate_core::testbed::{
    BedStatus, ListedBed, TestbedDown, TestbedList, TestbedPlan, TestbedSweep, DOWN_SCHEMA,
    LIST_SCHEMA, PLAN_SCHEMA, SWEEP_SCHEMA, VERSION,
};
use linerate_core::units::BitRate;
use linerate_report::table::Width;

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
    /// --dry-run the plan (schema linerate.testbed.plan version 2).
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

/// Runs `linerate testbed …`.
pub(crate) fn run(args: &TestbedArgs, ctx: &crate::Ctx) -> Result<(), Failure> {
    let w = ctx.width;
    match &args.action {
        Action::Up(a) => up(a, w),
        Action::Down(a) => down(a),
        Action::List(a) => list(a, w),
        Action::Sweep(a) => sweep_cmd(a),
        Action::Exec(a) => exec(a),
    }
}

/// A testbed document in the envelope.
fn envelope<T>(schema: &str, t0: u64, body: T) -> Envelope<T> {
    Envelope::new(schema, VERSION, body)
        .started(t0)
        .on(linerate_io::host::facts())
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

fn up(a: &UpArgs, width: Width) -> Result<(), Failure> {
    let t0 = linerate_io::host::unix_now_ns();
    let spec = spec_of(a)?;
    if a.dry_run {
        let plan = Plan::build(&spec, HostFacts::detect());
        if a.json {
            return print_json(&envelope(
                PLAN_SCHEMA,
                t0,
                TestbedPlan {
                    dry_run: true,
                    spec: spec.clone(),
                    commands: plan.up.iter().map(ToString::to_string).collect(),
                    readbacks: plan
                        .up
                        .iter()
                        .filter_map(|s| s.readback())
                        .map(|r| render_argv(&r.argv))
                        .collect(),
                    down_commands: plan.down.iter().map(ToString::to_string).collect(),
                    notes: plan.notes.clone(),
                },
            ));
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
        print(&linerate_report::testbed::describe(
            &record.summary(),
            width,
        ))
    }
}

fn down(a: &NameArgs) -> Result<(), Failure> {
    let t0 = linerate_io::host::unix_now_ns();
    let bed = Bed::open(&a.name)?;
    let name = bed.name().to_string();
    let namespaces = bed.layout().namespaces();
    bed.down()?;
    let d = TestbedDown {
        removed: name,
        namespaces,
    };
    if a.json {
        print_json(&envelope(DOWN_SCHEMA, t0, d))
    } else {
        print(&linerate_report::testbed::down(&d))
    }
}

/// Whether every namespace of a stored bed exists.
fn status(r: &BedRecord) -> BedStatus {
    let ns = r.layout.namespaces();
    let present = ns.iter().filter(|n| guard::netns_exists(n)).count();
    BedStatus::of(r.complete, present, ns.len())
}

fn list(a: &ListArgs, width: Width) -> Result<(), Failure> {
    let t0 = linerate_io::host::unix_now_ns();
    let mut l = TestbedList {
        beds: Vec::new(),
        errors: Vec::new(),
    };
    for r in state::list(Path::new(state::STATE_DIR)) {
        match r {
            Ok(record) => l.beds.push(ListedBed {
                name: record.name.clone(),
                status: status(&record),
                bed: record,
            }),
            Err(e) => l.errors.push(linerate_core::error::chain(&e)),
        }
    }
    if a.json {
        return print_json(&envelope(LIST_SCHEMA, t0, l));
    }
    let beds: Vec<_> = l.beds.iter().map(|b| (b.bed.summary(), b.status)).collect();
    print(&linerate_report::testbed::list(&beds, &l.errors, width))
}

fn sweep_cmd(a: &SweepArgs) -> Result<(), Failure> {
    let t0 = linerate_io::host::unix_now_ns();
    let r = sweep::sweep(a.prefix.as_deref())?;
    let report = TestbedSweep {
        netns: r.netns,
        links: r.links,
        files: r.files.iter().map(|f| f.display().to_string()).collect(),
        errors: r.errors,
    };
    if a.json {
        print_json(&envelope(SWEEP_SCHEMA, t0, &report))?;
    } else {
        print(&linerate_report::testbed::sweep(&report))?;
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
