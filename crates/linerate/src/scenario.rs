//! `linerate scenario list|show|run`: experiments as TOML files
//! (`linerate_core::scenario`), each test checked by the very flag parser
//! its command uses, run in this process through the command's own code
//! with its document captured, saved in the history, and the scenario's
//! tables printed (`linerate_report::scenario`).

use std::collections::BTreeMap;

use anyhow::anyhow;
use clap::{Args, Parser as _, Subcommand};
use linerate_core::result::{Envelope, Flag};
use linerate_core::scenario::{
    table, Loaded, ScenarioError, ScenarioResult, TestRun, SCHEMA, VERSION,
};
use serde_json::Value;

use crate::flags::{Cli, Command};
use crate::output::{elog, print, print_json};
use crate::{Ctx, Failure};

/// The built-in scenarios: name and file text.
pub(crate) const BUILTIN: [(&str, &str); 5] = [
    ("seed000", include_str!("../../../scenarios/seed000.toml")),
    ("seed001", include_str!("../../../scenarios/seed001.toml")),
    ("seed002", include_str!("../../../scenarios/seed002.toml")),
    ("seed003", include_str!("../../../scenarios/seed003.toml")),
    ("seed004", include_str!("../../../scenarios/seed004.toml")),
];

/// The built-in scenarios that need no bed and no privileges (the loopback
/// part of `linerate demo`).
pub(crate) const LOOPBACK: [(&str, &str); 1] =
    [("tour", include_str!("../../../scenarios/tour.toml"))];

/// Every built-in scenario: the seeds' replays, then the bedless ones.
fn builtins() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    BUILTIN.iter().chain(&LOOPBACK)
}

// Flags of `linerate scenario`.
#[derive(Debug, Args)]
pub(crate) struct ScenarioArgs {
    #[command(subcommand)]
    action: Action,
}

// What to do with scenarios.
#[derive(Debug, Subcommand)]
enum Action {
    /// The built-in scenarios, with what each replays.
    List {
        /// One JSON document: an array of {name, title, seed}.
        #[arg(long)]
        json: bool,
    },
    /// Prints a built-in scenario's file as it is, to copy and edit.
    Show {
        /// A built-in scenario's name (`linerate scenario list`).
        name: String,
    },
    /// Runs a scenario: brings its bed up, runs its tests (each saved in the
    /// history, tagged scenario:NAME@HASH), prints its tables, removes the bed.
    ///
    /// Every test is checked by its command's own flag parser before anything
    /// runs; a bad file is one line naming the file, line and key (exit 2).
    /// JSON: schema linerate.scenario version 1, every test's document inside.
    Run {
        /// A scenario file, or a built-in scenario's name.
        #[arg(value_name = "FILE|NAME")]
        scenario: String,
        /// Print the bed, each test's command line and the tables, run nothing.
        #[arg(long)]
        dry_run: bool,
        /// One JSON document (schema linerate.scenario, version 1).
        #[arg(long)]
        json: bool,
        /// Shortened trials (for CI and a quick look): each test's
        /// [test.short] options replace those of the same name.
        #[arg(long)]
        short: bool,
    },
}

/// Runs `linerate scenario …`.
pub(crate) fn run(args: &ScenarioArgs, ctx: &Ctx) -> Result<Vec<Flag>, Failure> {
    match &args.action {
        Action::List { json } => {
            let list: Vec<Value> = builtins()
                .filter_map(|(_, text)| Loaded::parse(text).ok())
                .map(|l| {
                    let h = l.scenario.scenario;
                    serde_json::json!({ "name": h.name, "title": h.title, "seed": h.seed })
                })
                .collect();
            if *json {
                print_json(&list)?;
            } else {
                let mut t = linerate_report::table::Table::new([
                    ("NAME", linerate_report::table::Align::Left),
                    ("REPLAYS", linerate_report::table::Align::Left),
                    ("TITLE", linerate_report::table::Align::Left),
                ]);
                for l in &list {
                    let s = |k: &str| l[k].as_str().unwrap_or("").to_string();
                    t.row(vec![s("name"), s("seed"), s("title")]);
                }
                print(&t.fit(0, ctx.width))?;
            }
            Ok(Vec::new())
        }
        Action::Show { name } => {
            let text = builtin(name).ok_or_else(|| unknown_builtin(name))?;
            print(text)?;
            Ok(Vec::new())
        }
        Action::Run {
            scenario,
            dry_run,
            json,
            short,
        } => {
            let (origin, text) = load(scenario)?;
            let loaded = Loaded::parse(&text).map_err(|e| at(&origin, &e))?;
            let plan = Plan::check(&loaded, *short).map_err(|e| at(&origin, &e))?;
            if *dry_run {
                return print_plan(&loaded, &plan, *json, ctx);
            }
            execute(&loaded, plan, *short, *json, ctx)
        }
    }
}

fn builtin(name: &str) -> Option<&'static str> {
    builtins().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

fn unknown_builtin(name: &str) -> Failure {
    let names: Vec<&str> = builtins().map(|(n, _)| *n).collect();
    Failure::Usage(anyhow!(
        "no built-in scenario '{name}' (built in: {})",
        names.join(", ")
    ))
}

/// The text of a built-in scenario or a file, and how errors name it.
fn load(what: &str) -> Result<(String, String), Failure> {
    if let Some(text) = builtin(what) {
        return Ok((format!("built-in scenario {what}"), text.to_string()));
    }
    match std::fs::read_to_string(what) {
        Ok(text) => Ok((what.to_string(), text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !what.contains(['/', '.']) => {
            Err(unknown_builtin(what))
        }
        Err(e) => Err(Failure::Usage(anyhow!("{what}: {e}"))),
    }
}

/// A scenario error as one line: `FILE:LINE: KEY: message`.
fn at(origin: &str, e: &ScenarioError) -> Failure {
    let key = e.key.as_ref().map(|k| format!("{k}: ")).unwrap_or_default();
    match e.line {
        0 => Failure::Usage(anyhow!("{origin}: {key}{}", e.message)),
        l => Failure::Usage(anyhow!("{origin}:{l}: {key}{}", e.message)),
    }
}

/// A checked scenario: the bed's name and command line, each test's
/// command line and parsed flags.
struct Plan {
    bed: Option<(String, Vec<String>, Box<crate::testbed::UpArgs>)>,
    tests: Vec<(Vec<String>, Cli)>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("bed", &self.bed.as_ref().map(|b| &b.1))
            .field(
                "tests",
                &self.tests.iter().map(|t| &t.0).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// clap's error as one line, without its "error: " prefix.
fn first_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let line = text.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_string()
}

impl Plan {
    /// Every test's command line parsed by the binary's own parser (and the
    /// bed's as `testbed up` parses it, then validated as it would be): an
    /// error names the key whose flag the parser refused.
    fn check(l: &Loaded, short: bool) -> Result<Self, ScenarioError> {
        let mut bed = None;
        if let Some(bed_name) = (l.scenario.bed.as_ref()).map(|_| bed_name(&l.hash)) {
            let argv = l.bed_argv(&bed_name).unwrap_or_default();
            let refuse = |message: String| {
                let (key, line) = l.key_of_message(None, &message).unzip();
                ScenarioError {
                    line: line.unwrap_or_else(|| l.key_line("bed", None, "")),
                    key: Some(key.map_or("bed".into(), |k| format!("bed.{k}"))),
                    message,
                }
            };
            let cli =
                Cli::try_parse_from(std::iter::once("linerate".to_string()).chain(argv.clone()))
                    .map_err(|e| refuse(first_line(&e)))?;
            let Command::Testbed(crate::testbed::TestbedArgs::Up(up)) = cli.command else {
                return Err(refuse("not a bed".into()));
            };
            crate::testbed::spec(&up).map_err(|e| refuse(failure_text(&e)))?;
            bed = Some((bed_name, argv, up));
        }
        let mut tests = Vec::new();
        for (i, t) in l.scenario.test.iter().enumerate() {
            let on_bed = bed
                .as_ref()
                .filter(|_| takes_bed(&t.command))
                .map(|b| b.0.as_str());
            let argv = l.argv(i, on_bed, short);
            let refuse = |message: String| match l.key_of_message(Some(i), &message) {
                Some((key, line)) => ScenarioError {
                    line,
                    key: Some(format!("test[{}].{key}", i + 1)),
                    message,
                },
                None => l.error_at("test", Some(i), "", message),
            };
            let cli =
                Cli::try_parse_from(std::iter::once("linerate".to_string()).chain(argv.clone()))
                    .map_err(|e| refuse(first_line(&e)))?;
            // Without a bed the commands' own validation runs now; on a bed
            // it needs the bed up and runs before the first test.
            if on_bed.is_none() {
                config_check(&cli).map_err(|e| refuse(failure_text(&e)))?;
            }
            tests.push((argv, cli));
        }
        Ok(Self { bed, tests })
    }
}

/// A failure's message as one line.
pub(crate) fn failure_text(f: &Failure) -> String {
    match f {
        Failure::Usage(e) | Failure::Check(e) => format!("{e:#}"),
        Failure::Interrupted(sig) => format!("interrupted by signal {sig}"),
    }
}

/// The bed of a scenario: `sc-` and the first 8 hex digits of its hash
/// (the bed code adds "lr-").
fn bed_name(hash: &str) -> String {
    format!("sc-{}", &hash[..hash.len().min(8)])
}

/// Whether `command` has a --bed flag (asked of its parser, built first:
/// a command's flags are defined when it is built, `flags::Command`).
fn takes_bed(command: &str) -> bool {
    use clap::CommandFactory as _;
    let mut cli = Cli::command();
    cli.build();
    cli.find_subcommand(command)
        .is_some_and(|c| c.get_arguments().any(|a| a.get_long() == Some("bed")))
}

/// The command's own flags→configuration validation, where it has one
/// that runs nothing (throughput, latency, ceilings).
fn config_check(cli: &Cli) -> Result<(), Failure> {
    match &cli.command {
        Command::Throughput(a) => a.config().map(drop),
        Command::Latency(a) => crate::latency::config(a).map(drop),
        Command::Ceilings(a) => linerate_core::ceilings::Config::new(&a.request())
            .map(drop)
            .map_err(Failure::from),
        _ => Ok(()),
    }
}

fn print_plan(l: &Loaded, plan: &Plan, json: bool, ctx: &Ctx) -> Result<Vec<Flag>, Failure> {
    let tests: Vec<(String, Vec<String>)> = (l.scenario.test.iter())
        .zip(&plan.tests)
        .map(|(t, (argv, _))| (t.id.clone(), argv.clone()))
        .collect();
    let tables: Vec<(String, Vec<String>)> = (l.scenario.table.iter())
        .map(|t| {
            let each = t.each.as_ref().map(|e| {
                format!(
                    "one per element of test {}'s {} ({})",
                    e.test, e.at, e.label
                )
            });
            (
                t.title.clone(),
                t.row.iter().map(|r| r.label.clone()).chain(each).collect(),
            )
        })
        .collect();
    let bed = plan.bed.as_ref().map(|b| b.1.clone());
    if json {
        let tests: Vec<Value> = (tests.iter())
            .map(|(id, argv)| serde_json::json!({ "id": id, "argv": argv }))
            .collect();
        let tables: Vec<Value> = (tables.iter())
            .map(|(title, rows)| serde_json::json!({ "title": title, "rows": rows }))
            .collect();
        print_json(&serde_json::json!({
            "name": l.scenario.scenario.name, "hash": l.hash, "bed": bed,
            "tests": tests, "tables": tables,
        }))?;
    } else {
        let h = &l.scenario.scenario;
        print(&linerate_report::scenario::plan(
            &h.name,
            &h.title,
            bed.as_deref(),
            &tests,
            &tables,
            ctx.width,
        ))?;
    }
    Ok(Vec::new())
}

/// Runs one test through its command's own code, its document captured.
fn run_test(cli: &Cli, tag: &str, ctx: &Ctx) -> Result<(Value, Option<i64>), Failure> {
    let (results, capture) = ctx.results.captured(cli, tag);
    let tctx = Ctx {
        width: ctx.width,
        results,
    };
    if matches!(cli.command, Command::Throughput(_) | Command::Latency(_)) {
        let key = crate::server::key(cli.auth_file.as_deref())?;
        linerate_io::throughput::control::set_client_key(key);
    }
    match &cli.command {
        Command::Throughput(a) => crate::throughput::run(a, &tctx).map(drop),
        Command::Latency(a) => crate::latency::run(a, &tctx).map(drop),
        Command::Rfc2544(a) => crate::rfc2544::run(a, &tctx).map(drop),
        Command::Journey(a) => crate::journey::run(a, &tctx).map(drop),
        Command::Ceilings(a) => crate::ceilings::run(a, &tctx).map(drop),
        Command::Calc(a) => crate::calc::run(a, &tctx),
        _ => Err(Failure::Usage(anyhow!("not a command a test can run"))),
    }?;
    let taken = capture.borrow_mut().take();
    taken.ok_or_else(|| Failure::Usage(anyhow!("the command printed no result document")))
}

/// Runs a scenario: prints its document (`--json`) or tables, saves it in
/// the history, returns its flags or why it could not end well.
fn execute(
    l: &Loaded,
    plan: Plan,
    short: bool,
    json: bool,
    ctx: &Ctx,
) -> Result<Vec<Flag>, Failure> {
    let ran = measure(l, &plan, short, ctx)?;
    ran.output(json, ctx)?;
    ran.end()
}

/// Runs built-in scenario `name` (`--short` with `short`) to its end, for
/// `linerate demo`: each test saved in the history, the scenario's document
/// returned, not printed nor saved ([`Ran::output`] does both).
pub(crate) fn run_builtin(name: &str, short: bool, ctx: &Ctx) -> Result<Ran, Failure> {
    let (origin, text) = load(name)?;
    let loaded = Loaded::parse(&text).map_err(|e| at(&origin, &e))?;
    let plan = Plan::check(&loaded, short).map_err(|e| at(&origin, &e))?;
    measure(&loaded, &plan, short, ctx)
}

/// A scenario that ran: its document, its history tag, the tests that
/// could not run.
pub(crate) struct Ran {
    /// The scenario's document (schema linerate.scenario).
    pub(crate) doc: Envelope<ScenarioResult>,
    tag: String,
    failed: Vec<String>,
}

impl Ran {
    /// The results of the scenario document: saved as command `scenario`
    /// under its tag.
    fn results(&self, ctx: &Ctx) -> Ctx {
        Ctx {
            width: ctx.width,
            results: ctx.results.scenario(&self.tag),
        }
    }

    /// Prints the document (`json`) or its tables, and saves it.
    pub(crate) fn output(&self, json: bool, ctx: &Ctx) -> Result<(), Failure> {
        self.results(ctx).output(&self.doc, json, || {
            linerate_report::scenario::render(&self.doc, ctx.width)
        })
    }

    /// The scenario's flags, or how it ended badly: interrupted (128 + the
    /// signal), a test that could not run (exit 2).
    pub(crate) fn end(&self) -> Result<Vec<Flag>, Failure> {
        if let Some(sig) = linerate_io::signal::interrupt_signal() {
            return Err(Failure::Interrupted(sig));
        }
        if !self.failed.is_empty() {
            return Err(Failure::Usage(anyhow!(
                "scenario {}: test(s) {} could not run (the error is beside each in the result)",
                self.doc.result.name,
                self.failed.join(", ")
            )));
        }
        Ok(self.doc.flags.clone())
    }

    /// Saves the document in the history without printing it (the demo
    /// prints it inside its own); the id it was saved as.
    pub(crate) fn save(&self, ctx: &Ctx) -> Result<Option<i64>, Failure> {
        let text = crate::history::document_text(&self.doc)?;
        Ok(self.results(ctx).results.save(&text))
    }
}

/// Installs the bed's signal guard once per process (`linerate demo` runs
/// several scenarios; one thread takes the signals).
fn signal_guard() -> Result<(), Failure> {
    static GUARD: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let installed = GUARD.get_or_init(|| {
        linerate_bed::guard::install_signal_interrupt_then_teardown().map_err(|e| e.to_string())
    });
    installed
        .clone()
        .map_err(|e| Failure::Usage(anyhow!("installing the signal guard: {e}")))
}

/// Brings the bed up, runs every test (each saved in the history), removes
/// the bed and fills the tables.
fn measure(l: &Loaded, plan: &Plan, short: bool, ctx: &Ctx) -> Result<Ran, Failure> {
    let t0 = linerate_io::host::unix_now_ns();
    let h = &l.scenario.scenario;
    let tag = ctx.tag().map_or_else(
        || format!("scenario:{}@{}", h.name, &l.hash[..12]),
        str::to_string,
    );
    signal_guard()?;
    // Owned: dropped (removed) at the end, on an error and while a panic
    // unwinds; the signal guard removes it on a second signal.
    let bed = match &plan.bed {
        Some((name, _, up)) => {
            let spec = crate::testbed::spec(up)?;
            elog!("linerate scenario: bringing up bed {name}");
            Some(
                linerate_bed::Bed::up(&spec)
                    .map_err(|e| anyhow!(e).context(format!("bed {name}")))?,
            )
        }
        None => None,
    };
    // With the bed up, the commands' own validation before any test runs.
    if bed.is_some() {
        for (i, (_, cli)) in plan.tests.iter().enumerate() {
            config_check(cli).map_err(|e| {
                let id = &l.scenario.test[i].id;
                Failure::Usage(anyhow!("test '{id}': {}", failure_text(&e)))
            })?;
        }
    }
    // Set by whichever thread takes the first termination signal.
    let interrupted = linerate_io::signal::interrupted;
    let mut runs = Vec::new();
    let mut docs = BTreeMap::new();
    for (t, (argv, cli)) in l.scenario.test.iter().zip(&plan.tests) {
        if interrupted() {
            docs.insert(t.id.clone(), Err("not run: interrupted".to_string()));
            continue;
        }
        elog!(
            "linerate scenario: test {} ({})",
            t.id,
            linerate_report::scenario::command_line(argv)
        );
        let (result, error, saved_as) = match run_test(cli, &tag, ctx) {
            Ok((doc, id)) => (Some(doc), None, id),
            Err(e) => (None, Some(failure_text(&e)), None),
        };
        docs.insert(
            t.id.clone(),
            result
                .clone()
                .ok_or_else(|| format!("the test failed: {}", error.clone().unwrap_or_default())),
        );
        runs.push(TestRun {
            id: t.id.clone(),
            argv: argv.clone(),
            result,
            error,
            saved_as,
        });
    }
    drop(bed);
    let tables = table::fill(&l.scenario.table, &docs);
    let failed: Vec<String> = runs
        .iter()
        .filter(|r| r.error.is_some())
        .map(|r| r.id.clone())
        .collect();
    let mut flags: Vec<Flag> = runs
        .iter()
        .filter_map(|r| r.result.as_ref())
        .flat_map(|d| {
            d.get("flags")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|f| serde_json::from_value::<Flag>(f).ok())
        .filter(|f| f.severity == linerate_core::result::Severity::Invalid)
        .collect();
    if interrupted() {
        flags.push(Flag::invalid(
            "interrupted",
            "the scenario was interrupted: later tests did not run",
        ));
    }
    let result = ScenarioResult {
        name: h.name.clone(),
        title: h.title.clone(),
        seed: h.seed.clone(),
        hash: l.hash.clone(),
        short,
        bed: plan.bed.as_ref().map(|b| b.1.clone()),
        tests: runs,
        tables,
    };
    let doc = Envelope::new(SCHEMA, VERSION, result)
        .started(t0)
        .on(linerate_io::host::facts())
        .flagged(flags);
    Ok(Ran { doc, tag, failed })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_parses_and_checks() {
        for (name, text) in builtins() {
            let l = Loaded::parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(l.scenario.scenario.name, *name);
            for short in [false, true] {
                Plan::check(&l, short).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
    }

    #[test]
    fn a_flag_the_command_refuses_names_its_key_and_line() {
        let text = "[scenario]\nname = \"x\"\ntitle = \"t\"\n\n[[test]]\nid = \"a\"\ncommand = \"latency\"\nargs = [\"127.0.0.1\"]\nin-process = true\nreflector-mode = \"sideways\"\n";
        let l = Loaded::parse(text).expect("parses");
        let e = Plan::check(&l, false).expect_err("refused");
        assert_eq!(
            (e.line, e.key.as_deref()),
            (10, Some("test[1].reflector-mode")),
            "{e}"
        );
        assert!(e.message.contains("sideways"), "{e}");
        let bad = text.replace("reflector-mode = \"sideways\"", "count = 0\ntime = \"1s\"");
        let e = Plan::check(&Loaded::parse(&bad).expect("parses"), false).expect_err("refused");
        assert!(
            e.key.as_deref().is_some_and(|k| k.starts_with("test[1].")),
            "{e}"
        );
    }

    #[test]
    fn the_bed_is_checked_as_testbed_up_checks_it() {
        let text = "[scenario]\nname = \"x\"\ntitle = \"t\"\n[bed]\ntopo = \"pair\"\nlink = \"fast\"\n[[test]]\nid = \"a\"\ncommand = \"throughput\"\n";
        let e = Plan::check(&Loaded::parse(text).expect("parses"), false).expect_err("refused");
        assert_eq!((e.line, e.key.as_deref()), (6, Some("bed.link")), "{e}");
    }
}
