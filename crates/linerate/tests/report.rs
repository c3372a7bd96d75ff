//! `linerate report` on stored documents (the version-1 fixtures and real
//! `--json` output), `--plot` on the measuring commands, and the HTML page
//! rendered in headless Chromium.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

fn fixture_path(file: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/v1")
        .join(file)
        .display()
        .to_string()
}

/// The fixtures of every schema `report` renders.
const FIXTURES: [&str; 9] = [
    "linerate.calc.json",
    "linerate.calc.bus.json",
    "linerate.latency.json",
    "linerate.latency.sweep.json",
    "linerate.latency.tcp.json",
    "linerate.throughput.json",
    "linerate.throughput.udp.json",
    "linerate.throughput.scenarios.json",
    "linerate.rfc2544.json",
];

fn linerate(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("linerate runs")
}

fn ok(args: &[&str]) -> Output {
    let o = linerate(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lr-report-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Text as a browser serialises a text node (`--dump-dom`): only `&`,
/// `<` and `>` escaped.
fn in_dom(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// What HTML escaping does to table text.
fn escaped(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The cells of a text line: runs separated by two or more spaces (a
/// table's columns), each of which the page must hold, whether in a
/// `<table>` or a `<pre>`.
fn cells(line: &str) -> Vec<&str> {
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// A real latency document (reflector in this process: no server needed).
fn real_latency(dir: &Path) -> PathBuf {
    let o = ok(&[
        "latency",
        "127.0.0.1",
        "--in-process",
        "--count",
        "400",
        "--sweep",
        "reflector-mode=blocking,busy",
        "--json",
    ]);
    let path = dir.join("latency.json");
    std::fs::write(&path, &o.stdout).unwrap();
    path
}

/// A real calc document.
fn real_calc(dir: &Path) -> PathBuf {
    let o = ok(&["calc", "--link", "100M,1G", "--json"]);
    let path = dir.join("calc.json");
    std::fs::write(&path, &o.stdout).unwrap();
    path
}

#[test]
fn every_fixture_renders_and_the_page_holds_each_table() {
    let dir = tmp("fixtures");
    let html = dir.join("r.html");
    let sources: Vec<String> = FIXTURES.iter().map(|f| fixture_path(f)).collect();
    let mut args = vec!["report", "--html", html.to_str().unwrap()];
    args.extend(sources.iter().map(String::as_str));
    ok(&args);
    let page = std::fs::read_to_string(&html).unwrap();
    for src in &sources {
        // The page holds every line of the text report of each document.
        let text = String::from_utf8(ok(&["report", "--wide", src]).stdout).unwrap();
        assert!(text.lines().count() > 3, "{src}: {text}");
        for cell in text.lines().flat_map(cells) {
            assert!(
                page.contains(&escaped(cell)),
                "{src}: not on the page: {cell}"
            );
        }
        assert!(page.contains(&escaped(src)), "{src} not named");
    }
    // Version-1 latency, throughput and rfc2544 documents stored no flags:
    // raised again, and said so.
    assert!(page.contains("raised again"), "no re-assessment note");
    assert!(page.contains("few_stamped_exchanges"));
    for banned in ["<script", "<link", "@import", "url(", "<img", " src="] {
        assert!(!page.contains(banned), "{banned}");
    }
    // Every table is a real table (the shared table model), none the
    // terminal's text.
    assert!(page.contains("<th class=\"num\">frame B</th>"));
    assert!(page.contains("<td class=\"num\">148,809</td>"));
    assert!(page.contains("<th>stage (µs)</th>"));
    assert!(page.contains("<th class=\"num\">% of max possible</th>"));
    assert!(page.contains("<th>interval (s)</th>"));
    assert!(!page.contains("<pre>"));
    // Calc, rfc2544 and throughput have plots even in version 1.
    assert!(page.matches("<svg").count() >= 4);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn real_documents_render_from_files_and_stdin_with_every_plot() {
    let dir = tmp("real");
    let latency = real_latency(&dir);
    let calc = real_calc(&dir);
    let plots = dir.join("plots");
    let o = ok(&[
        "report",
        latency.to_str().unwrap(),
        calc.to_str().unwrap(),
        "--plot",
        plots.to_str().unwrap(),
    ]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("Response time to 127.0.0.1"), "{text}");
    assert!(text.contains("Line rate at 100 Mbit/s"), "{text}");
    let mut files: Vec<String> = std::fs::read_dir(&plots)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "calc-vs-frame-size.svg",
            "latency-cdf.svg",
            "latency-histogram-1.svg",
            "latency-histogram-2.svg",
            "latency-stages.svg",
        ]
    );
    for f in &files {
        let svg = std::fs::read_to_string(plots.join(f)).unwrap();
        assert!(svg.starts_with("<svg") && svg.len() > 2_000, "{f}");
    }
    // The stored distribution is the quoted RTT's: every exchange counted.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&latency).unwrap()).unwrap();
    for run in doc["runs"].as_array().unwrap() {
        let d = &run["rtt_distribution"];
        let quoted = run.get("rtt_unstamped").unwrap_or(&serde_json::Value::Null);
        let count = d["count"].as_u64().unwrap();
        assert_eq!(Some(count), quoted["count"].as_u64(), "{run}");
        let binned: u64 = d["bins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["count"].as_u64().unwrap())
            .sum();
        assert_eq!(binned, count);
    }
    // stdin: `-`.
    let mut child = Command::new(BIN)
        .args(["report", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        child.stdin.as_mut().unwrap(),
        &std::fs::read(&calc).unwrap(),
    )
    .unwrap();
    drop(child.stdin.take());
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("Line rate at 1 Gbit/s"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn plot_flag_writes_bitmaps() {
    let dir = tmp("png");
    ok(&[
        "calc",
        "--link",
        "1G",
        "--plot",
        dir.to_str().unwrap(),
        "--plot-format",
        "png",
    ]);
    let png = std::fs::read(dir.join("calc-vs-frame-size.png")).unwrap();
    let (colours, _) = decode_colours(&png);
    assert!(colours > 8, "a blank bitmap: {colours} colours");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_ceilings_document_renders_as_the_command_prints_it() {
    let dir = tmp("ceilings");
    let o = ok(&["ceilings", "--quick", "--only=checksum", "--json"]);
    let path = dir.join("ceilings.json");
    std::fs::write(&path, &o.stdout).unwrap();
    let text = ok(&["report", path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("linerate ceilings"), "{text}");
    assert!(text.contains("RFC 1071 Internet checksum"), "{text}");
    let page = dir.join("page.html");
    ok(&[
        "report",
        "--html",
        page.to_str().unwrap(),
        path.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("RFC 1071 Internet checksum"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_sources_are_usage_errors() {
    let dir = tmp("bad");
    let junk = dir.join("junk.json");
    std::fs::write(&junk, "not json").unwrap();
    let cases: [(Vec<String>, &str); 5] = [
        (vec![junk.display().to_string()], "not a JSON document"),
        (
            vec![dir.join("missing.json").display().to_string()],
            "reading",
        ),
        (
            vec![fixture_path("linerate.inspect.json")],
            "not rendered by `report`",
        ),
        (vec!["-".into(), "-".into()], "once"),
        (
            vec![
                fixture_path("linerate.calc.json"),
                "--plot-format".into(),
                "png".into(),
            ],
            "--plot",
        ),
    ];
    for (args, says) in cases {
        let mut a = vec!["report"];
        a.extend(args.iter().map(String::as_str));
        let o = linerate(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {err}");
        assert!(err.contains(says), "{a:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Distinct colours of a PNG, and whether `rgb` is one of them.
fn decode_colours(png_bytes: &[u8]) -> (usize, std::collections::HashSet<[u8; 3]>) {
    let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let step = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("colour type {other:?}"),
    };
    let colours: std::collections::HashSet<[u8; 3]> = buf[..info.buffer_size()]
        .chunks(step)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    (colours.len(), colours)
}

/// Chromium's binary, if installed.
fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            let o = Command::new("which").arg(name).output().ok()?;
            o.status
                .success()
                .then(|| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        })
}

/// Runs headless Chromium on `args` (its output into files beside
/// `profile`, so a full pipe cannot stall it), killed after two minutes:
/// its status, stdout and stderr.
fn headless(bin: &Path, profile: &Path, args: &[&str]) -> Output {
    let out_path = profile.with_extension("stdout");
    let err_path = profile.with_extension("stderr");
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("chromium starts");
    let t0 = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    Output {
        status,
        stdout: std::fs::read(&out_path).unwrap(),
        stderr: std::fs::read(&err_path).unwrap(),
    }
}

#[test]
fn the_html_page_renders_in_headless_chromium() {
    let Some(bin) = chromium() else {
        assert!(
            std::env::var("LINERATE_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
            "chromium is missing and LINERATE_REQUIRE_CHROMIUM=1"
        );
        eprintln!("SKIPPED: chromium is not installed: the HTML report is not rendered in a browser (apt-get install chromium)");
        return;
    };
    let dir = tmp("chromium");
    let latency = real_latency(&dir);
    let html = dir.join("report.html");
    let sources = [
        latency.display().to_string(),
        fixture_path("linerate.calc.json"),
        fixture_path("linerate.throughput.json"),
        fixture_path("linerate.rfc2544.json"),
    ];
    let mut args = vec!["report", "--html", html.to_str().unwrap()];
    args.extend(sources.iter().map(String::as_str));
    ok(&args);
    let url = format!("file://{}", html.display());
    let profile = dir.join("profile");

    // The DOM: every table's text and every plot.
    let o = headless(&bin, &profile, &["--dump-dom", &url]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dom = String::from_utf8_lossy(&o.stdout);
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(
        dom.matches("<svg").count(),
        page.matches("<svg").count(),
        "plots lost in the DOM"
    );
    assert!(page.matches("<svg").count() >= 6);
    for src in &sources {
        let text = String::from_utf8(ok(&["report", "--wide", src]).stdout).unwrap();
        for cell in text.lines().flat_map(cells) {
            assert!(dom.contains(&in_dom(cell)), "{src}: not in the DOM: {cell}");
        }
    }
    // No console message (errors included) and nothing fetched.
    let log = String::from_utf8_lossy(&o.stderr);
    for l in log.lines() {
        assert!(!l.contains(":CONSOLE"), "console: {l}");
        assert!(!l.contains("net::ERR"), "a fetch: {l}");
    }

    // The screenshot is not blank, and the plots' colours are on it.
    let shot = dir.join("shot.png");
    let o = headless(
        &bin,
        &profile,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,4000",
            &url,
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (n, colours) = decode_colours(&std::fs::read(&shot).expect("a screenshot"));
    assert!(n > 64, "screenshot nearly blank: {n} colours");
    // The plots' series colours (Okabe–Ito blue, vermilion, green: the
    // page's own style uses none of them).
    for c in [[0, 114, 178], [213, 94, 0], [0, 158, 115]] {
        assert!(colours.contains(&c), "plot colour {c:?} not on screen");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
