//! `linerate demo`: what linerate tells without hardware, a second host or
//! privileges: the line-rate model, a response time dissected on loopback,
//! loopback throughput and this host's ceilings.

use anyhow::Context as _;
use linerate_core::demo;
use linerate_core::progress::Silent;
use linerate_core::result::Flag;
use linerate_report::demo as prose;

use crate::flags::DemoArgs;
use crate::output::print;
use crate::Failure;

/// `linerate demo`: the model, a loopback latency run, a loopback
/// throughput run and the quick host ceilings, each as its command would
/// show it.
pub(crate) fn run(_args: &DemoArgs, ctx: &crate::Ctx) -> Result<Vec<Flag>, Failure> {
    let mut text = prose::model(&demo::model()?, ctx.width);
    let cfg = linerate_core::latency::Config::new(&demo::latency_request())
        .context("loopback latency")?;
    let latency = linerate_io::echo::run(&cfg, &mut Silent).context("loopback latency")?;
    text.push_str(&linerate_report::latency::render(&latency, ctx.width));
    print(&text)?;

    let result = linerate_io::throughput::run::loopback(demo::throughput_params())?;
    let mut text = prose::throughput_heading();
    text.push_str(&linerate_report::throughput::render(&result, ctx.width));
    print(&text)?;

    let cfg = linerate_core::ceilings::Config::new(&demo::ceilings_request())?;
    let ceilings = crate::ceilings::measure(&cfg, false, &mut Silent)?;
    let mut text = prose::ceilings_heading(ctx.width);
    text.push_str(&linerate_report::ceilings::render(
        &ceilings.result,
        &ceilings.flags,
        ctx.width,
    ));
    text.push_str(&prose::next(ctx.width));
    print(&text)?;
    let flags = latency.flags.into_iter().chain(result.flags);
    Ok(flags.chain(ceilings.flags).collect())
}
