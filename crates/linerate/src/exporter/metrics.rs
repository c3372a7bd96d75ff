//! Results as OpenMetrics: the figures of one probe, and the exporter's
//! own counters.

use std::sync::atomic::AtomicU64;

use linerate_core::latency::{LatencyReport, Stage};
use linerate_core::result::{Flag, Severity};
use linerate_core::throughput::model::{End, FlowDir, FlowRole, ThroughputResult};
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// Label pairs.
pub(crate) type Labels = Vec<(String, String)>;
type FloatGauges = Family<Labels, Gauge<f64, AtomicU64>>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

/// Registers a family of float gauges and sets each labelled value (one
/// value without labels: a plain gauge).
fn gauges(reg: &mut Registry, name: &str, help: &str, values: Vec<(Labels, f64)>) {
    if let [(l, v)] = values.as_slice() {
        if l.is_empty() {
            let g = Gauge::<f64, AtomicU64>::default();
            g.set(*v);
            reg.register(name, help, g);
            return;
        }
    }
    if values.is_empty() {
        return;
    }
    let fam = FloatGauges::default();
    for (l, v) in values {
        fam.get_or_create(&l).set(v);
    }
    reg.register(name, help, fam);
}

/// A histogram whose buckets were counted elsewhere (a result's stored
/// distribution), exposed as classic cumulative buckets.
#[derive(Debug)]
struct FixedHistogram {
    sum: f64,
    count: u64,
    /// (upper bound, samples in this bucket alone), increasing, ending +Inf.
    buckets: Vec<(f64, u64)>,
}

impl EncodeMetric for FixedHistogram {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<NoLabelSet>(self.sum, self.count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// What every probe exposes: whether it succeeded, how long it took and
/// the result's flags.
pub(crate) fn probe_common(reg: &mut Registry, success: bool, seconds: f64, flags: &[Flag]) {
    gauges(
        reg,
        "linerate_probe_success",
        "1 when the test ran and no flag made its result invalid",
        vec![(Vec::new(), f64::from(u8::from(success)))],
    );
    gauges(
        reg,
        "linerate_probe_duration_seconds",
        "Wall time of the probe (CLOCK_MONOTONIC of the exporter)",
        vec![(Vec::new(), seconds)],
    );
    let flag_values = flags
        .iter()
        .map(|f| {
            let sev = match f.severity {
                Severity::Info => "info",
                Severity::Warning => "warning",
                Severity::Invalid => "invalid",
            };
            (labels(&[("code", &f.code), ("severity", sev)]), 1.0)
        })
        .collect();
    gauges(
        reg,
        "linerate_probe_flag",
        "A flag the result raised (1 per flag; see linerate's README for the codes)",
        flag_values,
    );
}

fn end(e: End) -> &'static str {
    match e {
        End::Client => "client",
        End::Server => "server",
    }
}

/// The figures of a throughput result: per direction, end and role.
pub(crate) fn throughput(reg: &mut Registry, r: &ThroughputResult) {
    let mut bits = Vec::new();
    let mut pps = Vec::new();
    let mut share = Vec::new();
    let mut lost = Vec::new();
    for d in &r.figures.directions {
        let dir = match d.direction {
            FlowDir::Forward => "forward",
            FlowDir::Reverse => "reverse",
        };
        let role = match d.role {
            FlowRole::Sender => "sender",
            FlowRole::Receiver => "receiver",
        };
        let l = labels(&[("direction", dir), ("end", end(d.end)), ("role", role)]);
        bits.push((l.clone(), d.bits_per_s));
        if let Some(p) = d.packets_per_s {
            pps.push((l.clone(), p));
        }
        if let Some(p) = d.pct_of_max {
            share.push((l.clone(), p / 100.0));
        }
        if d.role == FlowRole::Receiver {
            lost.push((l, d.sum.lost as f64));
        }
    }
    gauges(
        reg,
        "linerate_throughput_bits_per_second",
        "Payload throughput over the test, as each end measured it",
        bits,
    );
    gauges(
        reg,
        "linerate_throughput_packets_per_second",
        "Packets per second over the test",
        pps,
    );
    gauges(
        reg,
        "linerate_throughput_line_rate_ratio",
        "Share of the line-rate maximum for the declared link (1 = line rate)",
        share,
    );
    gauges(
        reg,
        "linerate_throughput_lost_packets",
        "Packets lost (sequence numbers; UDP) as the receiver counted them",
        lost,
    );
}

/// The figures of a latency result: the RTT distribution as a histogram
/// (classic buckets from the stored distribution: `le` is each bin's last
/// nanosecond), its quantiles, the stages' medians and the exchange counts.
pub(crate) fn latency(reg: &mut Registry, r: &LatencyReport) {
    let Some(run) = r.runs.first() else {
        return;
    };
    if let (Some(d), Some(rtt)) = (&run.rtt_distribution, run.rtt()) {
        let mut buckets: Vec<(f64, u64)> = d
            .bins
            .iter()
            .map(|b| (b.upper_ns.saturating_sub(1) as f64 / 1e9, b.count))
            .collect();
        let binned: u64 = d.bins.iter().map(|b| b.count).sum();
        buckets.push((f64::INFINITY, d.count.saturating_sub(binned)));
        reg.register(
            "linerate_latency_rtt_seconds",
            "Round-trip time of the exchanges quoted (client send call to receive return, CLOCK_REALTIME)",
            FixedHistogram {
                sum: rtt.mean_ns * rtt.count as f64 / 1e9,
                count: d.count,
                buckets,
            },
        );
        let q = [
            ("0", rtt.min_ns),
            ("0.5", rtt.p50_ns),
            ("0.9", rtt.p90_ns),
            ("0.99", rtt.p99_ns),
            ("0.999", rtt.p999_ns),
            ("1", rtt.max_ns),
        ];
        gauges(
            reg,
            "linerate_latency_rtt_quantile_seconds",
            "Round-trip time quantiles (histogram resolution 1/256)",
            q.iter()
                .map(|(k, v)| (labels(&[("quantile", k)]), *v as f64 / 1e9))
                .collect(),
        );
    }
    let stages = run
        .stages
        .iter()
        .filter(|s| s.stage != Stage::Rtt)
        .map(|s| {
            let name = serde_json::to_value(s.stage)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            (
                vec![("stage".to_string(), name)],
                s.summary.p50_ns as f64 / 1e9,
            )
        })
        .collect();
    gauges(
        reg,
        "linerate_latency_stage_median_seconds",
        "Median of each stage of a response, from kernel timestamps",
        stages,
    );
    let c = &run.counts;
    gauges(
        reg,
        "linerate_latency_exchanges",
        "Requests sent, answered and lost",
        vec![
            (labels(&[("state", "sent")]), c.sent as f64),
            (labels(&[("state", "received")]), c.received as f64),
            (labels(&[("state", "lost")]), c.lost as f64),
        ],
    );
}

/// The exporter's own counters, exposed on `/metrics`.
#[derive(Debug, Default, Clone)]
pub(crate) struct Own {
    /// Probes by test and outcome.
    pub(crate) probes: Family<Labels, Counter>,
    /// HTTP requests by path and status code.
    pub(crate) requests: Family<Labels, Counter>,
    /// Probes running now.
    pub(crate) in_flight: Gauge,
}

impl Own {
    /// A registry exposing these metrics.
    pub(crate) fn registry(&self) -> Registry {
        let mut reg = Registry::default();
        reg.register(
            "linerate_exporter_probes",
            "Probes run, by test and outcome (success, failure, refused)",
            self.probes.clone(),
        );
        reg.register(
            "linerate_exporter_http_requests",
            "HTTP requests answered, by path and status code",
            self.requests.clone(),
        );
        reg.register(
            "linerate_exporter_probes_in_flight",
            "Probes running now",
            self.in_flight.clone(),
        );
        reg
    }

    /// Counts one probe.
    pub(crate) fn probe(&self, test: &str, outcome: &str) {
        self.probes
            .get_or_create(&labels(&[("test", test), ("outcome", outcome)]))
            .inc();
    }

    /// Counts one request.
    pub(crate) fn request(&self, path: &str, status: u16) {
        let known = ["/", "/metrics", "/probe"];
        let path = if known.contains(&path) { path } else { "other" };
        self.requests
            .get_or_create(&labels(&[("path", path), ("code", &status.to_string())]))
            .inc();
    }
}

/// `reg` in the OpenMetrics text format.
pub(crate) fn encode(reg: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, reg)?;
    Ok(out)
}
