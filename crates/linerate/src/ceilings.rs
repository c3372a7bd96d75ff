//! `linerate ceilings`: flags -> [`Config`] -> `linerate_io::ceilings::run`
//! -> `linerate_report::ceilings`, with the run's energy flag.

use clap::Args;
use linerate_core::ceilings::{self as core, Config, Part, Request, SCHEMA, VERSION};
use linerate_core::progress::Progress;
use linerate_core::result::{Envelope, Flag};

use crate::output::{print, print_json};
use crate::progress::TickerProgress;
use crate::Failure;

/// Flags of `linerate ceilings`.
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
        }
    }
}

/// Measures, and returns the document (flags included: the assessment's
/// and the energy flag).
pub(crate) fn measure(
    cfg: &Config,
    progress: &mut dyn Progress,
) -> Result<Envelope<core::CeilingsResult>, Failure> {
    let t0 = linerate_io::host::unix_now_ns();
    let meter = linerate_io::energy::Meter::start();
    let result = linerate_io::ceilings::run(cfg, progress)?;
    progress.done();
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
    let mut progress = TickerProgress::new("linerate ceilings", None);
    let doc = measure(&cfg, &mut progress)?;
    if args.json {
        print_json(&doc)?;
    } else {
        print(&linerate_report::ceilings::render(
            &doc.result,
            &doc.flags,
            ctx.width,
        ))?;
    }
    Ok(doc.flags)
}
