//! `linerate demo`: a short tour made of built-in scenarios, each run by
//! `linerate scenario run`'s own code (its tests and its document saved in
//! the history like any scenario run's). Everywhere the bedless `tour`
//! (the line-rate model, a loopback echo dissected, loopback throughput,
//! the quick host ceilings); where this process may build beds, shortened
//! runs (`--short`) of the notes' replays on testbeds; otherwise one line
//! says what needs root and how to run it.

use linerate_core::demo::{self, BedPart, DemoResult, BED_PARTS, LOOPBACK_PART};
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
/// could not run, a bed that did not come up: that part is listed as not
/// run, with the error) once every part that could run has been shown.
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
    // A bed part that cannot start (its bed does not come up) is one that
    // did not run, with its error; the tour goes on and ends with it.
    let mut unstarted = None;
    let not_run = match may_build {
        Ok(()) => {
            let mut not_run = Vec::new();
            for p in &BED_PARTS {
                if linerate_io::signal::interrupted() {
                    break;
                }
                if !args.json {
                    print(&prose::bed_part(p, ctx.width))?;
                }
                match part(p.scenario, true, args.json, ctx) {
                    Ok(ran) => parts.push(ran),
                    Err(e) => {
                        not_run.push(p.not_run(&crate::scenario::failure_text(&e)));
                        unstarted.get_or_insert(e);
                    }
                }
            }
            not_run
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
        let not_run = |p: &&BedPart| doc.result.not_run.iter().any(|n| n.scenario == p.scenario);
        let what: Vec<&str> = BED_PARTS.iter().filter(not_run).map(|p| p.what).collect();
        prose::not_run(&doc.result.not_run, &what, ctx.width)
    })?;
    for e in ended {
        e?;
    }
    match unstarted {
        Some(e) => Err(e),
        None => Ok(doc.flags),
    }
}
