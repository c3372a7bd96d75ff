//! `linerate demo`: what linerate tells without hardware, a second host or
//! privileges: the line-rate model, and a response time dissected on loopback.

use anyhow::Context as _;
use linerate_core::demo;
use linerate_core::progress::Silent;
use linerate_core::result::Flag;
use linerate_report::demo as prose;

use crate::flags::DemoArgs;
use crate::output::print;
use crate::Failure;

/// `linerate demo`: the model, a loopback latency run and a loopback
/// throughput run, each as its command would show it.
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
    text.push_str(&prose::next(ctx.width));
    print(&text)?;
    Ok(latency.flags.into_iter().chain(result.flags).collect())
}
