//! `linerate calc`: flags -> `linerate_core::calc::Config` -> result -> render.

use linerate_core::calc::{
    CalcError, CalcResult, Carried, Config, Request, SizeList, SCHEMA, VERSION,
};
use linerate_core::result::Envelope;

use crate::flags::CalcArgs;
use crate::output::{print, print_json};
use crate::Failure;

/// The flags as a request to the model.
fn request(args: &CalcArgs) -> Request {
    let carried = if let Some(list) = &args.payload {
        Carried::Payloads(list.sizes())
    } else if let Some(list) = &args.mtu {
        Carried::Mtus(list.sizes())
    } else {
        Carried::Frames(args.frame.clone().unwrap_or(SizeList::Rfc2544))
    };
    Request {
        links: args.link.clone(),
        carried,
        encap: args.encap,
        tcp_options: args.tcp_options,
        ip_options: args.ip_options,
        jumbo: args.jumbo,
        frames: args.frames,
        bus: args.bus,
        mps: args.mps,
    }
}

/// A model error as the user reads it: core says what is wrong, this adds
/// the flag that would change it.
pub(crate) fn usage(e: CalcError) -> Failure {
    if e.jumbo_would_allow() {
        Failure::Usage(anyhow::anyhow!("{e} (add --jumbo for jumbo frames)"))
    } else {
        Failure::Usage(e.into())
    }
}

/// The validated configuration of the flags.
pub(crate) fn config(args: &CalcArgs) -> Result<Config, Failure> {
    Config::new(&request(args)).map_err(usage)
}

/// `linerate calc`.
pub(crate) fn run(args: &CalcArgs, ctx: &crate::Ctx) -> Result<(), Failure> {
    let config = config(args)?;
    let t0 = linerate_io::host::unix_now_ns();
    let result: CalcResult = config.run();
    if args.json {
        print_json(
            &Envelope::new(SCHEMA, VERSION, result)
                .started(t0)
                .on(linerate_io::host::facts()),
        )
    } else if args.csv {
        print(&linerate_report::calc::csv(&result))
    } else {
        print(&linerate_report::calc::table(&result, ctx.width))
    }
}
