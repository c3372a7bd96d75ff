//! `linerate testbed up|down|list|sweep|exec`: flags -> `linerate_bed` (plans,
//! beds, the stored list, sweeps) -> `linerate_report::testbed`.

use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use linerate_bed::plan::{HostFacts, Plan};
use linerate_bed::{
    guard, parse_delay_ns, parse_pct, state, sweep, Bed, BedError, BedSpec, Impair, Offloads,
    PerDir, TcpMem, Topology,
};
use linerate_core::emu::{QueueLimit, Shaper};
use linerate_core::result::Envelope;
use linerate_core::testbed::{
    TestbedUp, DOWN_SCHEMA, LIST_SCHEMA, PLAN_SCHEMA, SWEEP_SCHEMA, UP_SCHEMA, VERSION,
};
use linerate_core::units::BitRate;
use linerate_report::table::Width;
use linerate_report::testbed as report;
use serde::Serialize;

use crate::output::{print, print_json};
use crate::Failure;

/// What to do with beds. Each action's flags are defined only when it is
/// parsed (`defer`, as `flags::Command`'s): its flags struct carries `//`
/// comments, not doc comments.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum TestbedArgs {
    /// Builds a bed: namespaces lr-NAME-a, lr-NAME-b (and lr-NAME-dut), veth links,
    /// addresses in 198.18.0.0/15 and 2001:2::/48, the settings given (each read back).
    ///
    /// Topologies: pair (a — b, 198.18.0.1/.2), bridge (a — dut with a Linux bridge — b,
    /// one subnet), router (a — dut forwarding — b; 198.18.0.0/24 and 198.19.0.0/24,
    /// 2001:2::/64 and 2001:2:0:1::/64). A failure midway, or SIGINT/SIGTERM, removes
    /// what was built.
    Up(Box<UpArgs>),
    /// Removes a bed: its namespaces (and everything in them) and its state file.
    Down {
        /// The bed's name (without "lr-").
        name: String,
        /// One JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Lists the beds stored in /run/linerate/beds.
    List {
        /// One JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Removes every leftover named lr-… (namespaces, root-namespace links, stale
    /// bed files), or only those of beds whose name starts with --prefix.
    Sweep {
        /// Only beds whose name starts with this (objects named lr-PREFIX…).
        #[arg(long, value_name = "P")]
        prefix: Option<String>,
        /// One JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Shows one bed: its hosts, settings, the link emulator and its measured limit.
    Show {
        /// The bed's name (without "lr-").
        name: String,
        /// One JSON document (the bed's description).
        #[arg(long)]
        json: bool,
    },
    /// The link emulator of a bed (started by `testbed up`; not for direct use).
    #[command(hide = true)]
    Emulate {
        /// The bed's name.
        name: String,
        /// Where the bed descriptions are.
        #[arg(long, default_value = state::STATE_DIR)]
        state_dir: std::path::PathBuf,
    },
    /// Runs a command inside one host's namespace: `testbed exec NAME a -- ip addr`.
    Exec {
        /// The bed's name.
        name: String,
        /// a, b or dut.
        host: String,
        /// The command and its arguments (after `--`).
        #[arg(last = true, required = true, value_name = "CMD")]
        cmd: Vec<String>,
    },
}

// Flags of `linerate testbed up`.
#[derive(Debug, Args)]
pub(crate) struct UpArgs {
    /// The bed's name: 1-20 characters of a-z, 0-9, '-', '_' (linerate adds "lr-").
    pub(crate) name: String,
    /// pair, bridge or router.
    #[arg(long, value_name = "TOPO")]
    pub(crate) topo: Topology,
    /// Emulated link speed (e.g. 10M, 100M, 1G), preamble, SFD, IFG and FCS counted;
    /// segmentation offloads (gso, tso, tx-udp-segmentation) and gro are turned off.
    #[arg(long, value_name = "SPEED")]
    pub(crate) link: Option<BitRate>,
    /// What makes the link: emu (linerate's emulator in namespace lr-NAME-link: every
    /// frame leaves after its serialization time, queued behind the frames before it,
    /// plus --delay; it measures the frames/s it can forward at start) or tbf (the
    /// long-term rate only, for rates the emulator cannot carry). Default: emu, or tbf
    /// when the link in full-size frames needs more frames/s than the emulator last
    /// measured on this host (said in the plan and in every result).
    #[arg(long, value_name = "emu|tbf", value_parser = parse_shaper)]
    pub(crate) shaper: Option<Shaper>,
    /// The emulator polls its ports between frames instead of sleeping (emu): it
    /// notices a frame at once instead of after a wake-up of a few µs, which matters
    /// where a frame's wire time is shorter (1 Gbit/s and faster, small frames); it
    /// takes a CPU while traffic flows (at normal priority) and sleeps again 10 ms
    /// after the last frame.
    #[arg(long)]
    pub(crate) emu_poll: bool,
    /// Propagation delay per direction (emu): 1ms, or A2B/B2A as 1ms/2ms.
    #[arg(long, value_name = "TIME")]
    pub(crate) delay: Option<String>,
    /// Jitter of the delay, uniform ± (emu; frames keep their order): 100us or A2B/B2A.
    #[arg(long, value_name = "TIME")]
    pub(crate) jitter: Option<String>,
    /// Random duplication in percent (emu): 1 or A2B/B2A.
    #[arg(long, value_name = "PCT")]
    pub(crate) duplicate: Option<String>,
    /// Random reordering in percent (emu; such frames skip the delay): 1 or A2B/B2A.
    #[arg(long, value_name = "PCT")]
    pub(crate) reorder: Option<String>,
    /// Queue limit of each direction (emu, needs --link): frames (1000, 100p) or
    /// bytes (64k, 96000b); more is dropped at the tail and counted. Default 1000 frames.
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<String>,
    /// Random loss in percent: by the emulator when it runs, else on the ingress of
    /// hosts a and b (nftables numgen).
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
    /// One JSON document: the bed built (schema linerate.testbed.up, its description inside), or with
    /// --dry-run the plan (schema linerate.testbed.plan version 2).
    #[arg(long)]
    pub(crate) json: bool,
}

/// Runs `linerate testbed …`.
pub(crate) fn run(args: &TestbedArgs, ctx: &crate::Ctx) -> Result<(), Failure> {
    let (t0, w) = (linerate_io::host::unix_now_ns(), ctx.width);
    match args {
        TestbedArgs::Up(a) => up(a, t0, w),
        TestbedArgs::Down { name, json } => {
            let d = Bed::open(name)?.remove()?;
            emit(*json, DOWN_SCHEMA, t0, &d, report::down(&d))
        }
        TestbedArgs::List { json } => {
            let l = state::listing(Path::new(state::STATE_DIR));
            let text = report::list(&state::summaries(&l), &l.errors, w);
            emit(*json, LIST_SCHEMA, t0, &l, text)
        }
        TestbedArgs::Sweep { prefix, json } => {
            let s = linerate_core::testbed::TestbedSweep::from(sweep::sweep(prefix.as_deref())?);
            emit(*json, SWEEP_SCHEMA, t0, &s, report::sweep(&s))?;
            Ok(sweep::complete(&s)?)
        }
        TestbedArgs::Show { name, json } => {
            let bed = Bed::open(name)?;
            let text = report::describe(&bed.record().summary(), w);
            let up = TestbedUp {
                bed: bed.record().clone(),
            };
            emit(*json, UP_SCHEMA, t0, &up, text)
        }
        TestbedArgs::Emulate { name, state_dir } => {
            Ok(linerate_bed::emulator::serve(name, state_dir)?)
        }
        TestbedArgs::Exec { name, host, cmd } => {
            let bed = Bed::open(name)?;
            let ns = bed.live_netns(host)?;
            let status = std::process::Command::new("ip")
                .args(["netns", "exec", ns])
                .args(cmd)
                .status()
                .with_context(|| format!("running ip netns exec {ns} {}", cmd.join(" ")))?;
            // The command's own exit status is ours (128 + signal if it was killed).
            let code = status.code();
            std::process::exit(code.unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
        }
    }
}

/// A document: in the envelope with `--json`, else `text` for people.
fn emit<T: Serialize>(json: bool, s: &str, t0: u64, doc: &T, text: String) -> Result<(), Failure> {
    if json {
        let host = linerate_io::host::facts();
        print_json(&Envelope::new(s, VERSION, doc).started(t0).on(host))
    } else {
        print(&text)
    }
}

fn parse_shaper(s: &str) -> Result<Shaper, String> {
    match s {
        "emu" => Ok(Shaper::Emu),
        "tbf" => Ok(Shaper::Tbf),
        _ => Err(format!("'{s}' is not a shaper (emu or tbf)")),
    }
}

/// The emulator's flags as the bed's impairments.
fn impairments(a: &UpArgs) -> Result<Impair, Failure> {
    fn usage(flag: &'static str) -> impl Fn(String) -> Failure {
        move |e| Failure::Usage(anyhow::anyhow!("{flag}: {e}"))
    }
    let dur = |v: &Option<String>, flag: &'static str| -> Result<PerDir<u64>, Failure> {
        v.as_deref().map_or(Ok(PerDir::default()), |s| {
            PerDir::parse(s, parse_delay_ns).map_err(usage(flag))
        })
    };
    let pct = |v: &Option<String>, flag: &'static str| -> Result<PerDir<f64>, Failure> {
        v.as_deref().map_or(Ok(PerDir::default()), |s| {
            PerDir::parse(s, parse_pct).map_err(usage(flag))
        })
    };
    let limit = a.limit.as_deref().map(QueueLimit::parse).transpose();
    Ok(Impair {
        delay_ns: dur(&a.delay, "--delay")?,
        jitter_ns: dur(&a.jitter, "--jitter")?,
        duplicate_pct: pct(&a.duplicate, "--duplicate")?,
        reorder_pct: pct(&a.reorder, "--reorder")?,
        limit: limit.map_err(usage("--limit"))?,
    })
}

/// The shaper asked for, or else the emulator unless the link is beyond
/// its last measured limit on this host (and nothing but the rate is
/// asked: tbf has no delay or impairments), with the reason.
fn shaper_for(a: &UpArgs, spec: &BedSpec) -> (Shaper, Option<String>) {
    if let Some(s) = a.shaper {
        return (s, None);
    }
    let dir = Path::new(state::STATE_DIR);
    let capacity = linerate_bed::emulator::last_capacity(dir);
    let why = match (spec.link, capacity, spec.impair.is_empty()) {
        (Some(link), Some(c), true) => {
            linerate_core::emu::tbf_instead(link, spec.mtu.unwrap_or(1500), &c)
        }
        _ => None,
    };
    match why {
        Some(why) => (Shaper::Tbf, Some(why)),
        None => (Shaper::Emu, None),
    }
}

/// The bed `testbed up`'s flags describe, validated (also used by
/// `linerate scenario` for its `[bed]`).
pub(crate) fn spec(a: &UpArgs) -> Result<BedSpec, Failure> {
    let mut spec = BedSpec::new(a.name.clone(), a.topo);
    (spec.link, spec.loss_pct, spec.mtu, spec.rps) = (a.link, a.loss, a.mtu, a.rps);
    (spec.tcp_rmem, spec.tcp_wmem) = (a.tcp_rmem, a.tcp_wmem);
    spec.emu_poll = a.emu_poll;
    spec.offloads = a.offload.clone().unwrap_or_default();
    spec.impair = impairments(a)?;
    (spec.shaper, spec.shaper_note) = shaper_for(a, &spec);
    spec.validate()?;
    Ok(spec)
}

fn up(a: &UpArgs, t0: u64, width: Width) -> Result<(), Failure> {
    let spec = spec(a)?;
    if a.dry_run {
        let plan = Plan::build(&spec, HostFacts::detect());
        let (doc, topo) = (plan.document(&spec), spec.topology.as_str());
        let text = report::dry_run(&spec.name, topo, &plan.render(true), &doc, width);
        return emit(a.json, PLAN_SCHEMA, t0, &doc, text);
    }
    guard::install_signal_teardown().context("installing the signal guard")?;
    let record = match Bed::up(&spec) {
        Ok(bed) => bed.keep(),
        // The bed was rolled back; end as the signal asked (130, 143).
        Err(BedError::Interrupted) => std::process::exit(guard::signal_exit_code().unwrap_or(130)),
        Err(e) => return Err(e.into()),
    };
    let text = report::describe(&record.summary(), width);
    emit(a.json, UP_SCHEMA, t0, &TestbedUp { bed: record }, text)
}

/// Reads bed `bed`'s link emulator counters before a test (None without a
/// bed); [`attach_link`] after it.
pub(crate) fn link_reading(bed: Option<&str>) -> Option<linerate_bed::emulator::Reading> {
    bed.and_then(linerate_bed::emulator::Reading::start)
}

/// Attaches what the bed's link emulation did during the test to its result
/// (`slot`), with its flags (emulator_limited, link_queue_drops); `offered`:
/// the most frames/s the test offered, when it knows.
pub(crate) fn attach_link(
    reading: Option<linerate_bed::emulator::Reading>,
    offered: Option<f64>,
    slot: &mut Option<linerate_core::emu::LinkAccount>,
    flags: &mut Vec<linerate_core::result::Flag>,
) {
    if let Some(r) = reading {
        let account = r.account(offered);
        flags.extend(linerate_core::emu::assess(&account));
        *slot = Some(account);
    }
}
