//! `linerate demo`: a short tour made of built-in scenarios, each run by
//! `linerate scenario run`'s own code (its tests and its document saved in
//! the history like any scenario run's). Everywhere the bedless `tour`
//! (the line-rate model, a loopback echo dissected, loopback throughput,
//! the quick host ceilings); where this process may build beds, shortened
//! runs (`--short`) of the notes' replays on testbeds; otherwise one line
//! says what needs root and how to run it.

use linerate_core::demo::{self, DemoResult, BED_PARTS, LOOPBACK_PART};
use linerate_core::result::{Envelope, Flag};
use linerate_report::demo as prose;

use crate::flags::DemoArgs;
use crate::output::print;
use crate::scenario::Ran;
use crate::{Ctx, Failure};

/// Runs built-in scenario `name`; prints its tables (or, with `json`,
/// only saves its document: the demo's document holds it).
fn part(name: &str, short: bool, json: bool, ctx: &Ctx) -> Result<Ran, Failure> {
    let ran = crate::scenario::run_builtin(name, short, ctx)?;
    match json {
        true => ran.save(ctx).map(drop)?,
        false => ran.output(false, ctx)?,
    }
    Ok(ran)
}

/// `linerate demo`: the tour, then (as root) the bed parts; returns every
/// part's flags, or the first part's failure (interrupted, a test that
/// could not run) once every part that could run has been shown.
pub(crate) fn run(args: &DemoArgs, ctx: &Ctx) -> Result<Vec<Flag>, Failure> {
    let t0 = linerate_io::host::unix_now_ns();
    if !args.json {
        print(&prose::heading(ctx.width))?;
    }
    let mut parts = vec![part(LOOPBACK_PART, false, args.json, ctx)?];
    let may_build = match args.no_bed {
        true => Err("--no-bed".to_string()),
        false => linerate_bed::privileges::check(),
    };
    let not_run = match may_build {
        Ok(()) => {
            for p in &BED_PARTS {
                if linerate_io::signal::interrupted() {
                    break;
                }
                if !args.json {
                    print(&prose::bed_part(p, ctx.width))?;
                }
                parts.push(part(p.scenario, true, args.json, ctx)?);
            }
            Vec::new()
        }
        Err(why) => demo::not_run(&why),
    };
    let ended: Vec<Result<Vec<Flag>, Failure>> = parts.iter().map(Ran::end).collect();
    let flags: Vec<Flag> = parts.iter().flat_map(|p| p.doc.flags.clone()).collect();
    let result = DemoResult {
        parts: parts.into_iter().map(|p| p.doc).collect(),
        not_run,
    };
    let doc = Envelope::new(demo::SCHEMA, demo::VERSION, result)
        .started(t0)
        .on(linerate_io::host::facts())
        .flagged(flags);
    ctx.output(&doc, args.json, || {
        let what: Vec<&str> = BED_PARTS.iter().map(|p| p.what).collect();
        prose::not_run(&doc.result.not_run, &what, ctx.width)
    })?;
    for e in ended {
        e?;
    }
    Ok(doc.flags)
}
