//! `linerate inspect [IFACE]`: an interface's settings, capabilities and the
//! ceilings that follow from them (data: `linerate_core::inspect`, read by
//! `linerate_bed::inspect`; text: `linerate_report::inspect`).

use clap::Args;
use linerate_bed::Bed;
use linerate_core::inspect::{assess, LIST_SCHEMA, LIST_VERSION, SCHEMA, VERSION};
use linerate_core::result::{Envelope, Flag};

use crate::output::{print, print_json};
use crate::Failure;

// Flags of `linerate inspect`.
#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    /// The interface; without it, a brief list of all interfaces.
    pub(crate) iface: Option<String>,
    /// Look inside this network namespace (e.g. lr-mybed-a).
    #[arg(long, value_name = "NS")]
    pub(crate) netns: Option<String>,
    /// Look at a bed's host instead: its namespace, and its test interface
    /// unless IFACE is given.
    #[arg(long, value_name = "NAME", conflicts_with = "netns")]
    pub(crate) bed: Option<String>,
    /// The bed's host: a, b or dut.
    #[arg(long, value_name = "HOST", default_value = "a", requires = "bed")]
    pub(crate) host: String,
    /// One JSON document (schema linerate.inspect version 2, or
    /// linerate.inspect.list version 1 without IFACE).
    #[arg(long)]
    pub(crate) json: bool,
}

/// Runs `linerate inspect`.
pub(crate) fn run(args: &InspectArgs, ctx: &crate::Ctx) -> Result<Vec<Flag>, Failure> {
    let bed = args.bed.as_deref().map(Bed::open).transpose()?;
    let netns = match &bed {
        Some(b) => Some(b.live_netns(&args.host)?),
        None => args.netns.as_deref(),
    };
    let iface = (args.iface.as_deref()).or(bed.as_ref().and_then(|b| b.iface(&args.host)));
    let t0 = linerate_io::host::unix_now_ns();
    let Some(iface) = iface else {
        let list = linerate_bed::inspect::list(netns)?;
        return if args.json {
            let host = linerate_io::host::facts();
            print_json(
                &Envelope::new(LIST_SCHEMA, LIST_VERSION, list)
                    .started(t0)
                    .on(host),
            )
        } else {
            print(&linerate_report::inspect::list(&list, ctx.width))
        }
        .map(|()| Vec::new());
    };
    let r = linerate_bed::inspect::inspect(iface, netns)?;
    let flags = assess(&r);
    if args.json {
        let host = linerate_io::host::facts();
        let doc = Envelope::new(SCHEMA, VERSION, r).started(t0).on(host);
        print_json(&doc.flagged(flags.clone()))?;
    } else {
        print(&linerate_report::inspect::report(&r, &flags, ctx.width))?;
    }
    Ok(flags)
}
