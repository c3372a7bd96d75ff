//! The results message each end sends at EXCHANGE_RESULTS.

use serde_json::{Map, Value};

/// Most streams a results message may list (128 each way).
pub const MAX_RESULT_STREAMS: usize = 256;
/// Longest server output text kept, bytes.
pub const MAX_OUTPUT_TEXT: usize = 1 << 20;

/// One stream's figures.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamResult {
    /// Stream id (1, 3, 4, 5, …).
    pub id: i64,
    /// Bytes sent (a sender, after the omitted seconds) or received.
    pub bytes: u64,
    /// TCP retransmissions of a sender, −1 when not known.
    pub retransmits: i64,
    /// UDP receiver's jitter, s.
    pub jitter_s: f64,
    /// UDP receiver's lost datagrams.
    pub errors: i64,
    /// Lost during the omitted seconds (3.14+; with `omitted_packets`).
    pub omitted_errors: Option<i64>,
    /// UDP datagrams (the highest sequence number, or sent).
    pub packets: i64,
    /// Datagrams of the omitted seconds (3.14+).
    pub omitted_packets: Option<i64>,
    /// Start, s from the stream's start (3.2+; always 0).
    pub start_time_s: Option<f64>,
    /// End, s from the stream's start (3.2+).
    pub end_time_s: Option<f64>,
}

/// One end's results.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Results {
    /// CPU use of the whole process, % of one CPU.
    pub cpu_util_total: f64,
    /// User part.
    pub cpu_util_user: f64,
    /// System part.
    pub cpu_util_system: f64,
    /// 1: the sender counted retransmissions, 0: it could not, −1: it did
    /// not send.
    pub sender_has_retransmits: i64,
    /// The congestion control used (3.1.5+).
    pub congestion_used: Option<String>,
    /// The server's human output (`--get-server-output` without `-J`).
    pub server_output_text: Option<String>,
    /// The server's JSON output (its own `-J`).
    pub server_output_json: Option<Value>,
    /// Per stream.
    pub streams: Vec<StreamResult>,
}

/// Why a results message is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultsError {
    /// Not a JSON object.
    #[error("results are not a JSON object: {0}")]
    Malformed(String),
    /// A required key is missing or of the wrong type.
    #[error("results lack '{0}' (or it has the wrong type)")]
    Missing(&'static str),
    /// More streams than any session has.
    #[error("results list {0} streams, more than {MAX_RESULT_STREAMS}")]
    TooManyStreams(usize),
}

fn f(o: &Map<String, Value>, k: &'static str) -> Result<f64, ResultsError> {
    o.get(k)
        .and_then(Value::as_f64)
        .ok_or(ResultsError::Missing(k))
}

fn i(o: &Map<String, Value>, k: &'static str) -> Result<i64, ResultsError> {
    let v = o.get(k).ok_or(ResultsError::Missing(k))?;
    v.as_i64()
        .or_else(|| v.as_u64().map(|_| i64::MAX))
        .or_else(|| v.as_f64().map(|x| x as i64))
        .ok_or(ResultsError::Missing(k))
}

fn opt_i(o: &Map<String, Value>, k: &'static str) -> Option<i64> {
    i(o, k).ok()
}

impl Results {
    /// Parses a results body, with iperf3's rules: the four top-level
    /// numbers and `streams` are required; per stream `id`, `bytes`,
    /// `retransmits`, `jitter`, `errors`, `packets`; the omitted pair both
    /// or neither.
    pub fn parse(body: &[u8]) -> Result<Self, ResultsError> {
        let v: Value =
            serde_json::from_slice(body).map_err(|e| ResultsError::Malformed(e.to_string()))?;
        let Value::Object(o) = v else {
            return Err(ResultsError::Malformed("not an object".into()));
        };
        let Some(Value::Array(streams)) = o.get("streams") else {
            return Err(ResultsError::Missing("streams"));
        };
        if streams.len() > MAX_RESULT_STREAMS {
            return Err(ResultsError::TooManyStreams(streams.len()));
        }
        let mut out = Vec::with_capacity(streams.len());
        for s in streams {
            let Value::Object(s) = s else {
                return Err(ResultsError::Missing("streams[] object"));
            };
            let (oe, op) = (opt_i(s, "omitted_errors"), opt_i(s, "omitted_packets"));
            if oe.is_some() != op.is_some() {
                return Err(ResultsError::Missing("omitted_errors and omitted_packets"));
            }
            out.push(StreamResult {
                id: i(s, "id")?,
                bytes: u64::try_from(i(s, "bytes")?).unwrap_or(0),
                retransmits: i(s, "retransmits")?,
                jitter_s: f(s, "jitter")?,
                errors: i(s, "errors")?,
                omitted_errors: oe,
                packets: i(s, "packets")?,
                omitted_packets: op,
                start_time_s: s.get("start_time").and_then(Value::as_f64),
                end_time_s: s.get("end_time").and_then(Value::as_f64),
            });
        }
        Ok(Self {
            cpu_util_total: f(&o, "cpu_util_total")?,
            cpu_util_user: f(&o, "cpu_util_user")?,
            cpu_util_system: f(&o, "cpu_util_system")?,
            sender_has_retransmits: i(&o, "sender_has_retransmits")?,
            congestion_used: o
                .get("congestion_used")
                .and_then(Value::as_str)
                .map(|s| s.chars().take(64).collect()),
            server_output_text: o
                .get("server_output_text")
                .and_then(Value::as_str)
                .map(|s| s.chars().take(MAX_OUTPUT_TEXT).collect()),
            server_output_json: o.get("server_output_json").cloned(),
            streams: out,
        })
    }

    /// The message body (compact JSON).
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("cpu_util_total".into(), finite(self.cpu_util_total));
        o.insert("cpu_util_user".into(), finite(self.cpu_util_user));
        o.insert("cpu_util_system".into(), finite(self.cpu_util_system));
        o.insert(
            "sender_has_retransmits".into(),
            self.sender_has_retransmits.into(),
        );
        if let Some(c) = &self.congestion_used {
            o.insert("congestion_used".into(), c.clone().into());
        }
        if let Some(t) = &self.server_output_text {
            o.insert("server_output_text".into(), t.clone().into());
        }
        if let Some(j) = &self.server_output_json {
            o.insert("server_output_json".into(), j.clone());
        }
        let streams = self
            .streams
            .iter()
            .map(|s| {
                let mut m = Map::new();
                m.insert("id".into(), s.id.into());
                m.insert("bytes".into(), s.bytes.into());
                m.insert("retransmits".into(), s.retransmits.into());
                m.insert("jitter".into(), finite(s.jitter_s));
                m.insert("errors".into(), s.errors.into());
                if let (Some(e), Some(p)) = (s.omitted_errors, s.omitted_packets) {
                    m.insert("omitted_errors".into(), e.into());
                    m.insert("omitted_packets".into(), p.into());
                }
                m.insert("packets".into(), s.packets.into());
                if let (Some(a), Some(b)) = (s.start_time_s, s.end_time_s) {
                    m.insert("start_time".into(), finite(a));
                    m.insert("end_time".into(), finite(b));
                }
                Value::Object(m)
            })
            .collect();
        o.insert("streams".into(), Value::Array(streams));
        Value::Object(o)
    }
}

/// A JSON number, 0 for NaN and infinities (JSON has neither).
fn finite(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::from(0), Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_3_12_server_s_results() {
        let body = br#"{"cpu_util_total":1.5,"cpu_util_user":0.5,"cpu_util_system":1.0,"sender_has_retransmits":-1,"congestion_used":"cubic","streams":[{"id":1,"bytes":1000,"retransmits":-1,"jitter":0,"errors":0,"omitted_errors":0,"packets":0,"omitted_packets":0,"start_time":0,"end_time":1.0001}]}"#;
        let r = Results::parse(body).unwrap();
        assert_eq!(r.streams[0].bytes, 1000);
        assert_eq!(r.congestion_used.as_deref(), Some("cubic"));
        let again = Results::parse(&serde_json::to_vec(&r.to_json()).unwrap()).unwrap();
        assert_eq!(again, r);
    }

    #[test]
    fn required_keys_and_the_omitted_pair() {
        assert_eq!(
            Results::parse(
                br#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":0,"streams":[]}"#
            ),
            Err(ResultsError::Missing("sender_has_retransmits"))
        );
        let half = br#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":1,"retransmits":0,"jitter":0,"errors":0,"packets":0,"omitted_errors":0}]}"#;
        assert!(Results::parse(half).is_err());
        // Pre-3.2 results: no start/end times, no omitted pair.
        let old = br#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":1,"retransmits":0,"jitter":0,"errors":0,"packets":0}]}"#;
        assert_eq!(Results::parse(old).unwrap().streams[0].end_time_s, None);
    }
}
