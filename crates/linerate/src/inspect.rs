//! `linerate inspect [IFACE]`: an interface's settings, capabilities and the
//! ceilings that follow from them (data: `linerate_core::inspect`, read by
//! `linerate_bed::inspect`; text: `linerate_report::inspect`).

use clap::Args;
use linerate_core::inspect::{assess, InterfaceList, LIST_SCHEMA, LIST_VERSION, SCHEMA, VERSION};
use linerate_core::result::{Envelope, Flag};

use crate::output::{print, print_json};
use crate::Failure;

/// Flags of `linerate inspect`.
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
    if let Some(name) = &args.bed {
        let bed = linerate_bed::Bed::open(name)?;
        let (Some(ns), Some(iface)) = (bed.netns(&args.host), bed.iface(&args.host)) else {
            return Err(anyhow::anyhow!("bed {} has no host '{}'", bed.name(), args.host).into());
        };
        let args = InspectArgs {
            iface: Some(args.iface.clone().unwrap_or_else(|| iface.to_string())),
            netns: Some(ns.to_string()),
            bed: None,
            host: args.host.clone(),
            json: args.json,
        };
        return run(&args, ctx);
    }
    if let Some(ns) = &args.netns {
        if ns.is_empty() || ns.contains('/') || !linerate_bed::guard::netns_exists(ns) {
            return Err(
                anyhow::anyhow!("no network namespace '{ns}' (ip netns list shows them)").into(),
            );
        }
    }
    let t0 = linerate_io::host::unix_now_ns();
    let Some(iface) = &args.iface else {
        let list = InterfaceList {
            netns: args.netns.clone(),
            interfaces: linerate_bed::inspect::list(args.netns.as_deref())?,
        };
        if args.json {
            print_json(
                &Envelope::new(LIST_SCHEMA, LIST_VERSION, list)
                    .started(t0)
                    .on(linerate_io::host::facts()),
            )?;
        } else {
            print(&linerate_report::inspect::list(&list, ctx.width))?;
        }
        return Ok(Vec::new());
    };
    let r = linerate_bed::inspect::inspect(iface, args.netns.as_deref())?;
    let flags = assess(&r);
    if args.json {
        print_json(
            &Envelope::new(SCHEMA, VERSION, r)
                .started(t0)
                .on(linerate_io::host::facts())
                .flagged(flags.clone()),
        )?;
    } else {
        print(&linerate_report::inspect::report(&r, &flags, ctx.width))?;
    }
    Ok(flags)
}
