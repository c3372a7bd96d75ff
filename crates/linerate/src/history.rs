//! Results that last: every measuring command hands its document to
//! [`Ctx::output`], which prints it (or ends the `--json-stream`) and saves
//! it in the history (`linerate-history`) with its environment; and
//! `linerate history list|show|export|rm`.

use std::cell::Cell;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use linerate_core::result::Envelope;
use linerate_history::{BedFacts, Entry, Filter, LoadSample, Record, Store};
use linerate_report::table::Width;
use serde_json::{json, Value};

use crate::flags::{Cli, Command};
use crate::output::{print, print_json};
use crate::progress::{Live, StepLines};
use crate::stream::{self, Stream};
use crate::{Ctx, Failure};

/// A measuring command, as the history and the progress see it.
#[derive(Debug, Clone)]
struct Measuring {
    /// `throughput`, `latency`, `rfc2544`.
    command: &'static str,
    /// The bed it runs on, with its settings as stored now.
    bed: Option<BedFacts>,
    /// How long one transfer is expected to take.
    of: Option<Duration>,
    /// The reporting interval of `--json-stream`.
    interval: Duration,
}

/// The measuring commands and what they run on: the one place that knows
/// which commands measure.
fn measuring(cmd: &Command) -> Option<Measuring> {
    let second = Duration::from_secs(1);
    let (command, bed, of, interval) = match cmd {
        Command::Throughput(a) => ("throughput", &a.bed, Some(a.time), a.interval),
        Command::Latency(a) => ("latency", &a.bed, a.time, second),
        Command::Rfc2544(a) => ("rfc2544", &a.bed, None, second),
        Command::Ceilings(_) => ("ceilings", &None, None, second),
        Command::Journey(a) => ("journey", &a.bed, None, second),
        _ => return None,
    };
    let bed = bed.as_ref().map(|name| BedFacts {
        name: name.clone(),
        settings: linerate_bed::state::read(Path::new(linerate_bed::state::STATE_DIR), name)
            .map(|r| r.settings())
            .unwrap_or_default(),
    });
    Some(Measuring {
        command,
        bed,
        of,
        interval,
    })
}

/// What `Ctx` knows about keeping and streaming results (the global flags
/// `--history`, `--no-save`, `--tag`, `--json-stream`).
#[derive(Debug)]
pub(crate) struct Results {
    path: Option<PathBuf>,
    save: bool,
    tag: Option<String>,
    stream: bool,
    /// The `--json-stream`'s `end` event is out.
    ended: Rc<Cell<bool>>,
    measuring: Option<Measuring>,
    load: LoadSample,
    /// A scenario's test: the document and the id it was saved as go here
    /// instead of to stdout.
    capture: Option<Capture>,
}

/// Where a scenario's test leaves its document ([`Results::captured`]).
pub(crate) type Capture = Rc<std::cell::RefCell<Option<(Value, Option<i64>)>>>;

impl Results {
    /// From the global flags; `--json-stream` on a command that does not
    /// run long is a usage error.
    pub(crate) fn new(cli: &Cli) -> Result<Self, Failure> {
        let measuring = measuring(&cli.command);
        let streams = measuring.is_some() || matches!(cli.command, Command::Server(_));
        if cli.json_stream && !streams {
            return Err(Failure::Usage(anyhow!(
                "--json-stream: only throughput, latency, rfc2544 and server run long enough to stream"
            )));
        }
        Ok(Self {
            path: cli.history.clone(),
            save: !cli.no_save,
            tag: cli.tag.clone(),
            stream: cli.json_stream,
            ended: Rc::default(),
            measuring,
            load: LoadSample::now(),
            capture: None,
        })
    }

    /// The results of one test of a scenario (`cli`: its own command
    /// line): saved like the command's own under `tag` (unless
    /// `--no-save`), captured instead of printed.
    pub(crate) fn captured(&self, cli: &Cli, tag: &str) -> (Self, Capture) {
        let capture = Capture::default();
        let results = Self {
            path: self.path.clone(),
            save: self.save,
            tag: Some(tag.to_string()),
            stream: false,
            ended: Rc::default(),
            measuring: measuring(&cli.command),
            load: LoadSample::now(),
            capture: Some(Rc::clone(&capture)),
        };
        (results, capture)
    }

    /// The results of a whole scenario: its document saved as command
    /// `scenario` under `tag`.
    pub(crate) fn scenario(&self, tag: &str) -> Self {
        Self {
            path: self.path.clone(),
            save: self.save,
            tag: Some(tag.to_string()),
            stream: false,
            ended: Rc::default(),
            measuring: Some(Measuring {
                command: "scenario",
                bed: None,
                of: None,
                interval: Duration::from_secs(1),
            }),
            load: LoadSample::now(),
            capture: None,
        }
    }

    /// The database: `--history PATH`, else the user's data directory.
    fn path(&self) -> anyhow::Result<PathBuf> {
        self.path.clone().or_else(linerate_history::default_path).ok_or_else(|| {
            anyhow!("no history database: neither XDG_DATA_HOME nor HOME is set; pass --history PATH")
        })
    }

    /// The history, opened.
    fn open(&self) -> Result<Store, Failure> {
        Ok(Store::open(&self.path()?)?)
    }

    /// Saves `text` (unless `--no-save`); a failure is one warning line.
    /// Returns the id it was saved as.
    pub(crate) fn save(&self, text: &str) -> Option<i64> {
        let m = self.measuring.as_ref().filter(|_| self.save)?;
        let load = self.load.until_now();
        let saved = self.path().and_then(|path| {
            let entry = Entry {
                document: text,
                tag: self.tag.as_deref(),
                bed: m.bed.as_ref(),
                load: Some(&load),
            };
            Ok(Store::open(&path)?.save(&entry)?)
        });
        match saved {
            Ok(id) => {
                if std::io::stderr().is_terminal() {
                    crate::output::elog!(
                        "linerate: saved as result {id} (`linerate history show {id}`)"
                    );
                }
                Some(id)
            }
            Err(e) => {
                crate::output::elog!("linerate: warning: the result was not saved: {e:#}");
                None
            }
        }
    }
}

impl Ctx {
    /// The progress of this command: on stderr, and with `--json-stream` as
    /// events on stdout (its `start` event now).
    pub(crate) fn progress(&self, steps: StepLines) -> Live {
        let r = &self.results;
        let (command, of, interval, bed) = match &r.measuring {
            Some(m) => (m.command, m.of, m.interval, m.bed.as_ref()),
            None => ("run", None, Duration::from_secs(1), None),
        };
        let stream = r.stream.then(|| {
            let bed = bed.map(|b| json!({ "name": b.name, "settings": b.settings }));
            let ended = Rc::clone(&r.ended);
            Stream::start(command, interval, json!({ "bed": bed }), ended)
        });
        Live::new(&format!("linerate {command}"), of, steps, stream)
    }

    /// Prints a measurement's document (`json`), or its human rendering, or
    /// with `--json-stream` the `end` event carrying it; then saves it in the
    /// history. A history that cannot be written costs one warning line,
    /// never the result or the exit code.
    pub(crate) fn output<T: serde::Serialize>(
        &self,
        doc: &Envelope<T>,
        json: bool,
        human: impl FnOnce() -> String,
    ) -> Result<(), Failure> {
        let text = document_text(doc)?;
        if let Some(capture) = &self.results.capture {
            let value = serde_json::to_value(doc).map_err(anyhow::Error::from)?;
            let id = self.results.save(&text);
            *capture.borrow_mut() = Some((value, id));
            return Ok(());
        }
        if self.results.stream {
            stream::emit(
                "end",
                serde_json::to_value(doc).map_err(anyhow::Error::from)?,
            );
            self.results.ended.set(true);
        } else if json {
            print(&text)?;
        } else {
            print(&human())?;
        }
        self.results.save(&text);
        Ok(())
    }

    /// `--tag`: the label of a saved result, the selection of `history` and
    /// `compare`.
    pub(crate) fn tag(&self) -> Option<&str> {
        self.results.tag.as_deref()
    }

    /// `linerate server`'s log: stderr lines, or `log` events with
    /// `--json-stream`.
    pub(crate) fn server_log(&self) -> std::sync::Arc<dyn Fn(&str) + Send + Sync> {
        match self.results.stream {
            true => std::sync::Arc::new(|s: &str| {
                stream::emit(
                    "log",
                    json!({ "line": linerate_core::untrusted::neutralize(s) }),
                )
            }),
            // The log never fails a session: write errors are ignored, and
            // every line is escaped once more (peer text is escaped where it
            // is quoted).
            false => std::sync::Arc::new(|s: &str| {
                crate::output::eprint_line(&format!(
                    "linerate server: {}",
                    linerate_core::untrusted::neutralize(s)
                ));
            }),
        }
    }
}

// Flags of `linerate history` (the filters and `--json` apply to every
// action; `--tag` is the global flag).
#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    #[command(subcommand)]
    action: Option<Action>,
    /// Only results of this command (throughput, latency, rfc2544).
    #[arg(long, global = true, value_name = "NAME")]
    command: Option<String>,
    /// Only results measured on this testbed.
    #[arg(long, global = true, value_name = "NAME")]
    bed: Option<String>,
    /// Only results started at or after this: a UTC date or time
    /// (2026-11-23, 2026-11-23T10:00) or a time ago (90m, 12h, 7d).
    #[arg(long, global = true, value_name = "WHEN", value_parser = parse_when)]
    since: Option<String>,
    /// Only results started before this (as --since).
    #[arg(long, global = true, value_name = "WHEN", value_parser = parse_when)]
    until: Option<String>,
    /// Only the newest N.
    #[arg(long, global = true, value_name = "N")]
    last: Option<usize>,
    /// JSON: list as an array, show as one object.
    #[arg(long, global = true)]
    json: bool,
}

// What to do with the history.
#[derive(Debug, Subcommand)]
enum Action {
    /// The stored results, oldest first (the default).
    List,
    /// One result: its environment and the result as its command shows it.
    Show {
        /// The result's id (from `linerate history list`).
        id: i64,
    },
    /// One result's document, exactly as stored (as `--json` printed it).
    Export {
        /// The result's id.
        id: i64,
    },
    /// Removes one result.
    Rm {
        /// The result's id.
        id: i64,
    },
}

/// A `--since`/`--until` value as RFC 3339 UTC text (or its prefix).
fn parse_when(s: &str) -> Result<String, String> {
    let date = s.len() >= 10
        && s.as_bytes()[..10].iter().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                *b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    if date {
        return Ok(s.to_string());
    }
    let ago = match s.strip_suffix('d') {
        Some(days) => days
            .parse::<f64>()
            .ok()
            .filter(|d| d.is_finite() && *d >= 0.0 && *d < 1e5)
            .map(|d| Duration::from_secs_f64(d * 86_400.0)),
        None => linerate_core::units::parse_duration(s).ok(),
    };
    let ago = ago.ok_or_else(|| {
        format!("'{s}' is neither a UTC date or time (2026-11-23, 2026-11-23T10:00) nor a time ago (90m, 12h, 7d)")
    })?;
    let now = linerate_io::host::unix_now_ns();
    let ago_ns = u64::try_from(ago.as_nanos()).unwrap_or(u64::MAX);
    Ok(linerate_core::result::rfc3339_utc(
        now.saturating_sub(ago_ns),
    ))
}

impl HistoryArgs {
    fn filter(&self, tag: Option<&str>) -> Filter {
        Filter {
            command: self.command.clone(),
            bed: self.bed.clone(),
            tag: tag.map(str::to_string),
            since: self.since.clone(),
            until: self.until.clone(),
            last: self.last,
        }
    }
}

/// `linerate history`.
pub(crate) fn run(args: &HistoryArgs, ctx: &Ctx) -> Result<(), Failure> {
    let mut store = ctx.results.open()?;
    match args.action.as_ref().unwrap_or(&Action::List) {
        Action::List => {
            let rows = store.list(&args.filter(ctx.results.tag.as_deref()))?;
            if args.json {
                return print_json(&rows);
            }
            let lines: Vec<linerate_report::history::Line> = rows
                .into_iter()
                .map(|s| linerate_report::history::Line {
                    id: s.id,
                    started_at: s.started_at,
                    command: s.command,
                    bed: s.bed,
                    tag: s.tag,
                    exit_code: s.exit_code,
                })
                .collect();
            print(&linerate_report::history::list(&lines, ctx.width))
        }
        Action::Show { id } => {
            let r = store.record(*id)?;
            match args.json {
                true => print_json(&r),
                false => print(&show(&r, ctx.width)),
            }
        }
        Action::Export { id } => print(&store.record(*id)?.text),
        Action::Rm { id } => {
            store.remove(*id)?;
            match args.json {
                true => print_json(&json!({ "removed": id })),
                false => print(&format!("removed result {id}\n")),
            }
        }
    }
}

/// A result's environment, then the result as its command renders it.
fn show(r: &Record, width: Width) -> String {
    let pct = |v: Option<f64>| v.map(|v| format!("{v:.2} %"));
    let s = &r.summary;
    let settings = (!r.bed_settings.is_empty()).then(|| r.bed_settings.join(", "));
    let mut out = format!("result {} ({})\n", s.id, s.schema);
    out += &linerate_report::history::environment(&[
        ("started", Some(s.started_at.clone())),
        ("saved", Some(r.saved_at.clone())),
        ("tag", s.tag.clone()),
        ("linerate", r.linerate_version.clone()),
        ("kernel", r.kernel.clone()),
        ("CPU", r.cpu_model.clone()),
        ("CPUs", r.cpus.map(|c| c.to_string())),
        ("bed", s.bed.clone()),
        ("bed settings", settings),
        ("steal", pct(r.steal_pct)),
        ("CPU pressure", pct(r.cpu_pressure_pct)),
    ]);
    out.push('\n');
    out += &render(&r.document, width).unwrap_or_else(|| {
        format!(
            "(no table for this document: `linerate history export {}` prints it)\n",
            s.id
        )
    });
    out
}

/// A stored document as its command renders it (None: unknown or unreadable).
fn render(doc: &Value, width: Width) -> Option<String> {
    use linerate_core::throughput::model as t;
    use linerate_report as r;
    fn read<T: serde::de::DeserializeOwned>(doc: &Value) -> Option<Envelope<T>> {
        serde_json::from_value(doc.clone()).ok()
    }
    Some(match doc.get("schema")?.as_str()? {
        t::SCHEMA => r::throughput::render(&read(doc)?, width),
        t::SCENARIOS_SCHEMA => r::throughput::render_scenarios(&read(doc)?, width),
        linerate_core::latency::SCHEMA => r::latency::render(&read(doc)?, width),
        linerate_core::rfc2544::SCHEMA => r::rfc2544::render(&read(doc)?, width),
        _ => return None,
    })
}

/// The documents of results `ids` and their tags (compare reads them here).
pub(crate) fn documents(ctx: &Ctx, ids: &[i64]) -> Result<Vec<(Value, Option<String>)>, Failure> {
    let store = ctx.results.open()?;
    ids.iter()
        .map(|&id| Ok((store.get(id)?, store.record(id)?.summary.tag)))
        .collect()
}

/// The ids `--last N` / `--tag` select (oldest first), for compare.
pub(crate) fn select(
    ctx: &Ctx,
    command: Option<&str>,
    last: Option<usize>,
) -> Result<Vec<linerate_history::Summary>, Failure> {
    let store = ctx.results.open()?;
    Ok(store.list(&Filter {
        command: command.map(str::to_string),
        tag: ctx.results.tag.clone(),
        last,
        ..Filter::default()
    })?)
}
/// A document as the history stores it and `--json` prints it: pretty
/// JSON ending with a newline.
pub(crate) fn document_text<T: serde::Serialize>(doc: &Envelope<T>) -> Result<String, Failure> {
    let mut text = serde_json::to_string_pretty(doc).map_err(anyhow::Error::from)?;
    text.push('\n');
    Ok(text)
}
