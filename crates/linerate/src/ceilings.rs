//! `linerate ceilings`: flags -> [`Config`] -> `linerate_io::ceilings::run`
//! -> `linerate_report::ceilings`, with the run's energy flag.

use anyhow::Context as _;
use clap::Args;
use linerate_bed::{Bed, BedSpec, Feature, Topology};
use linerate_core::ceilings::{self as core, Config, Part, Request, SCHEMA, VERSION};
use linerate_core::progress::Progress;
use linerate_core::result::{Envelope, Flag};
use linerate_core::units::ByteCount;
use linerate_io::ceilings::{RawPair, RawTarget};

use crate::Failure;

// Flags of `linerate ceilings`.
#[derive(Debug, Args)]
pub(crate) struct CeilingsArgs {
    /// The few-second version: fewer sizes, 3 repeats, less work per repeat.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Timed repeats per benchmark, 1 to 100 (default 7; 3 with --quick).
    #[arg(long, value_name = "N")]
    pub(crate) repeats: Option<u32>,
    /// Only these parts: copy, checksum, send, receive (default: all).
    #[arg(long, value_name = "PART[,PART…]", value_delimiter = ',', value_parser = parse_part)]
    pub(crate) only: Vec<Part>,
    /// Copy block and checksum sizes instead of the default lists (e.g.
    /// 512,1024 or 64K); the packet paths keep their frame sizes.
    #[arg(long, value_name = "BYTES[,BYTES…]", value_delimiter = ',')]
    pub(crate) sizes: Vec<ByteCount>,
    /// One JSON document (schema linerate.ceilings version 1).
    #[arg(long)]
    pub(crate) json: bool,
}

fn parse_part(s: &str) -> Result<Part, core::CeilingsError> {
    s.parse()
}

impl CeilingsArgs {
    /// The request these flags make.
    pub(crate) fn request(&self) -> Request {
        Request {
            quick: self.quick,
            repeats: self.repeats,
            parts: self.only.clone(),
            sizes: self.sizes.iter().map(|b| b.get()).collect(),
        }
    }
}

/// A temporary veth pair for the raw-frame paths (removed again on drop,
/// panic and SIGINT/SIGTERM), or why there is none.
fn veth_pair(cfg: &Config) -> (Option<Bed>, Result<RawPair, String>) {
    if !cfg.runs(Part::Send) && !cfg.runs(Part::Receive) {
        return (None, Err("no packet part asked".into()));
    }
    if let Err(why) = linerate_bed::privileges::check() {
        return (
            None,
            Err(format!("the raw-frame paths need a veth pair: {why}")),
        );
    }
    if let Err(e) = linerate_bed::guard::install_signal_teardown() {
        return (
            None,
            Err(format!("no veth pair: installing the signal guard: {e}")),
        );
    }
    let mut spec = BedSpec::new(format!("ceil{}", std::process::id()), Topology::Pair);
    // GRO gives the peer veth NAPI, without which it refuses XDP-redirected
    // frames (XDP live frames).
    spec.offloads.0.insert(Feature::Gro, true);
    match Bed::up(&spec) {
        Ok(bed) => {
            let end = |role: &str| {
                bed.iface(role).map(|iface| RawTarget {
                    netns: bed.netns(role).map(str::to_string),
                    iface: iface.to_string(),
                })
            };
            let pair = match (end("a"), end("b")) {
                (Some(tx), Some(rx)) => Ok(RawPair { tx, rx }),
                _ => Err("the veth pair lacks host a or b".to_string()),
            };
            (Some(bed), pair)
        }
        Err(e) => (None, Err(format!("could not build a veth pair: {e}"))),
    }
}

/// Measures, and returns the document (flags included: the assessment's
/// and the energy flag). With `raw`, the raw-frame paths run on a
/// temporary veth pair when this process may build one.
pub(crate) fn measure(
    cfg: &Config,
    raw: bool,
    progress: &mut dyn Progress,
) -> Result<Envelope<core::CeilingsResult>, Failure> {
    let t0 = linerate_io::host::unix_now_ns();
    let (bed, target) = match raw {
        true => veth_pair(cfg),
        false => (
            None,
            Err("`linerate ceilings` as root times the raw-frame paths on a veth pair".into()),
        ),
    };
    let meter = linerate_io::energy::Meter::start();
    let result = linerate_io::ceilings::run(cfg, target.as_ref().map_err(String::as_str), progress);
    progress.done();
    if let Some(bed) = bed {
        bed.down().context("removing the veth pair")?;
    }
    let result = result?;
    let mut flags = core::assess(&result);
    flags.push(linerate_core::energy::flag(&meter.read(), 0, 0));
    Ok(Envelope::new(SCHEMA, VERSION, result)
        .started(t0)
        .on(linerate_io::host::facts())
        .flagged(flags))
}

/// `linerate ceilings`.
pub(crate) fn run(args: &CeilingsArgs, ctx: &crate::Ctx) -> Result<Vec<Flag>, Failure> {
    let cfg = Config::new(&args.request())?;
    let mut progress = ctx.progress(crate::progress::StepLines::Replace);
    let doc = measure(&cfg, true, &mut progress)?;
    ctx.output(&doc, args.json, || {
        linerate_report::ceilings::render(&doc.result, &doc.flags, ctx.width)
    })?;
    Ok(doc.flags)
}
