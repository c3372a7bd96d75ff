//! `linerate calc`: flags -> `linerate_core::calc::Config` -> result -> render.

use linerate_core::calc::{Carried, Config, Request, SizeList, SCHEMA, VERSION};
use linerate_core::result::Envelope;

use crate::flags::CalcArgs;
use crate::output::print;
use crate::Failure;

/// `linerate calc`.
pub(crate) fn run(args: &CalcArgs, ctx: &crate::Ctx) -> Result<(), Failure> {
    let carried = match (&args.payload, &args.mtu) {
        (Some(list), _) => Carried::Payloads(list.sizes()),
        (None, Some(list)) => Carried::Mtus(list.sizes()),
        _ => Carried::Frames(args.frame.clone().unwrap_or(SizeList::Rfc2544)),
    };
    let request = Request {
        links: args.link.clone(),
        carried,
        encap: args.encap,
        tcp_options: args.tcp_options,
        ip_options: args.ip_options,
        jumbo: args.jumbo,
        frames: args.frames,
        bus: args.bus,
        mps: args.mps,
    };
    // Core says what is wrong; the flag that would change it is added here.
    let config = Config::new(&request).map_err(|e| match e.jumbo_would_allow() {
        true => anyhow::anyhow!("{e} (add --jumbo for jumbo frames)"),
        false => e.into(),
    })?;
    let t0 = linerate_io::host::unix_now_ns();
    let result = config.run();
    args.plot.write(&linerate_core::plot::of_calc(&result))?;
    if args.csv {
        return print(&linerate_report::calc::csv(&result));
    }
    let host = linerate_io::host::facts();
    let doc = Envelope::new(SCHEMA, VERSION, result).started(t0).on(host);
    ctx.output(&doc, args.json, || {
        linerate_report::calc::table(&doc.result, ctx.width)
    })
}
