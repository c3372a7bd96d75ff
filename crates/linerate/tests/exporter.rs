//! `linerate exporter` scraped on loopback: a linerate server and the
//! exporter as children, `/probe` and `/metrics` fetched over HTTP and the
//! OpenMetrics text parsed here.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::Listening;

/// One sample: metric name, labels and value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the OpenMetrics text exposition: comment lines must be HELP,
/// TYPE, UNIT or the final EOF; every other line `name{labels} value`.
fn parse(text: &str) -> Vec<Sample> {
    assert!(text.ends_with("# EOF\n"), "no EOF line:\n{text}");
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(c) = line.strip_prefix("# ") {
            let kind = c.split(' ').next().unwrap_or_default();
            assert!(["HELP", "TYPE", "UNIT", "EOF"].contains(&kind), "{line}");
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let value = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("value in {line}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').unwrap_or_else(|| panic!("{line}"));
                let labels = body
                    .split(',')
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        let (k, v) = p.split_once('=').unwrap_or_else(|| panic!("{line}"));
                        let v = v.trim_matches('"');
                        (k.to_string(), v.to_string())
                    })
                    .collect();
                (name, labels)
            }
        };
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line}"
        );
        out.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    out
}

fn get(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(v))
        })
        .map(|s| s.value)
}

/// Sends `request` raw and returns (status, body).
fn http(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("{text}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("{head}"));
    (status, body.to_string())
}

fn fetch(addr: SocketAddr, path: &str) -> (u16, String) {
    http(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"),
    )
}

#[test]
fn probes_and_own_metrics_scrape_as_openmetrics() {
    let server = Listening::start(
        &["server", "--bind", "127.0.0.1", "--port", "0"],
        "listening on ",
    );
    let exporter = Listening::start(
        &["exporter", "--listen", "127.0.0.1:0", "--max-duration", "3"],
        "serving http://",
    );
    let (srv, exp) = (server.addr, exporter.addr);

    let mut exposed = std::collections::BTreeSet::new();
    let mut saw = |m: &[Sample]| exposed.extend(m.iter().map(|s| s.name.clone()));

    // Latency: the RTT as a histogram whose buckets add up.
    let (status, body) = fetch(
        exp,
        &format!("/probe?target={srv}&test=latency&duration=0.5"),
    );
    assert_eq!(status, 200, "{body}");
    let m = parse(&body);
    saw(&m);
    assert_eq!(get(&m, "linerate_probe_success", &[]), Some(1.0), "{body}");
    let buckets: Vec<(f64, f64)> = m
        .iter()
        .filter(|s| s.name == "linerate_latency_rtt_seconds_bucket")
        .map(|s| {
            let le = match s.labels["le"].as_str() {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap(),
            };
            (le, s.value)
        })
        .collect();
    assert!(buckets.len() >= 2, "{body}");
    assert!(
        buckets
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
        "buckets not cumulative: {buckets:?}"
    );
    let count = get(&m, "linerate_latency_rtt_seconds_count", &[]).unwrap();
    assert!(count > 0.0);
    assert_eq!(buckets.last().unwrap(), &(f64::INFINITY, count));
    let p50 = get(
        &m,
        "linerate_latency_rtt_quantile_seconds",
        &[("quantile", "0.5")],
    )
    .unwrap();
    let p99 = get(
        &m,
        "linerate_latency_rtt_quantile_seconds",
        &[("quantile", "0.99")],
    )
    .unwrap();
    assert!(0.0 < p50 && p50 <= p99, "{body}");
    let sum = get(&m, "linerate_latency_rtt_seconds_sum", &[]).unwrap();
    assert!(sum > 0.0);
    let sent = get(&m, "linerate_latency_exchanges", &[("state", "sent")]).unwrap();
    assert!(sent >= count, "{body}");

    // Throughput: the receiver's figure.
    let (status, body) = fetch(
        exp,
        &format!("/probe?target={srv}&test=throughput&duration=0.5"),
    );
    assert_eq!(status, 200, "{body}");
    let m = parse(&body);
    saw(&m);
    let rx = get(
        &m,
        "linerate_throughput_bits_per_second",
        &[("direction", "forward"), ("role", "receiver")],
    );
    assert!(rx.is_some_and(|v| v > 0.0), "{body}");
    assert!(get(&m, "linerate_probe_duration_seconds", &[]).is_some_and(|s| s > 0.0));

    // A target with no server: the probe answers, and says it failed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (status, body) = fetch(
        exp,
        &format!("/probe?target={closed}&test=latency&duration=0.5"),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        get(&parse(&body), "linerate_probe_success", &[]),
        Some(0.0),
        "{body}"
    );

    // Refusals: a target outside the allowed prefixes (no traffic is sent),
    // a bad test, too long a test, another method, an oversized head.
    let (status, body) = fetch(exp, "/probe?target=198.18.0.1&test=throughput");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("allow"), "{body}");
    assert_eq!(fetch(exp, &format!("/probe?target={srv}&test=dns")).0, 400);
    assert_eq!(
        fetch(
            exp,
            &format!("/probe?target={srv}&test=latency&duration=60")
        )
        .0,
        400
    );
    assert_eq!(fetch(exp, "/nothing").0, 404);
    assert_eq!(http(exp, "POST /probe HTTP/1.1\r\n\r\n").0, 405);
    let huge = format!("GET /?{} HTTP/1.1\r\n\r\n", "a".repeat(20_000));
    assert_eq!(http(exp, &huge).0, 413);
    // A head that never ends is cut off (after the exporter's 5 s).
    assert_eq!(http(exp, "GET /metrics HTTP/1.1\r\nHost: slow\r\n").0, 408);

    // The exporter's own counters saw all of it.
    let (status, body) = fetch(exp, "/metrics");
    assert_eq!(status, 200);
    let m = parse(&body);
    saw(&m);
    let probes = |test: &str, outcome: &str| {
        get(
            &m,
            "linerate_exporter_probes_total",
            &[("test", test), ("outcome", outcome)],
        )
        .unwrap_or(0.0)
    };
    assert_eq!(probes("latency", "success"), 1.0, "{body}");
    assert_eq!(probes("latency", "failure"), 1.0, "{body}");
    assert_eq!(probes("throughput", "success"), 1.0, "{body}");
    assert_eq!(probes("throughput", "refused"), 1.0, "{body}");
    assert_eq!(probes("latency", "refused"), 1.0, "{body}");
    assert_eq!(
        get(&m, "linerate_exporter_probes_in_flight", &[]),
        Some(0.0)
    );
    assert_eq!(
        get(
            &m,
            "linerate_exporter_http_requests_total",
            &[("path", "/probe"), ("code", "403")]
        ),
        Some(1.0),
        "{body}"
    );

    // Every metric the Grafana dashboard queries is one the exporter
    // exposes (these two only when there are flags, or a known link).
    let conditional = ["linerate_probe_flag", "linerate_throughput_line_rate_ratio"];
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../contrib/grafana/linerate.json"
    );
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut queried = 0;
    for panel in dash["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for (i, _) in expr.match_indices("linerate_") {
                let name: String = expr[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                queried += 1;
                assert!(
                    exposed.contains(&name) || conditional.contains(&name.as_str()),
                    "the dashboard queries {name}, which is not exposed: {exposed:?}"
                );
            }
        }
    }
    assert!(queried >= 10, "{queried}");
}

#[test]
fn bad_flags_are_usage_errors() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["exporter", "--allow-target", "198.18.0.0/40"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args([
            "exporter",
            "--listen",
            "127.0.0.1:0",
            "--default-duration",
            "20",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--max-duration"));
}
