//! The parameters message (client → server after PARAM_EXCHANGE): a JSON
//! object whose keys are read by type as iperf3 reads them (a key of another
//! type is ignored, unknown keys are ignored), range-checked with iperf3's
//! bounds; a value out of range is refused with the error number iperf3
//! sends for it (SERVER_ERROR).

use serde_json::{Map, Value};

use super::errno;

/// Transport of the data streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// TCP (`"tcp": true`, or no protocol key).
    #[default]
    Tcp,
    /// UDP (`"udp": true`).
    Udp,
    /// SCTP (`"sctp": true`): not served by linerate.
    Sctp,
}

/// Which way the data flows, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Client sends.
    #[default]
    Forward,
    /// `-R`: server sends.
    Reverse,
    /// `--bidir` (3.7+): both, `parallel` streams each way.
    Bidir,
}

/// The largest `time`, s.
pub const MAX_TIME_S: i64 = 86_400;
/// The largest `omit`, s.
pub const MAX_OMIT_S: i64 = 600;
/// The most streams per direction.
pub const MAX_STREAMS: i64 = 128;
/// The largest `MSS`.
pub const MAX_MSS: i64 = 32 * 1024 - 1;
/// The largest `window`, bytes.
pub const MAX_WINDOW: i64 = 512 << 20;
/// The largest TCP block (`len`), bytes.
pub const MAX_TCP_BLOCK: i64 = 1 << 20;
/// The largest UDP datagram payload (`len`), bytes.
pub const MAX_UDP_BLOCK: i64 = 65_535 - 8 - 20;
/// iperf3's TCP block when `len` is absent.
pub const DEFAULT_TCP_BLOCK: u32 = 128 * 1024;
/// iperf3's UDP datagram when `len` is absent.
pub const DEFAULT_UDP_BLOCK: u32 = 1460;
/// The largest `burst`.
pub const MAX_BURST: i64 = 1000;

/// The parameters of one iperf3 test, typed. Numbers are what the client
/// sent (iperf3 sends integers as JSON numbers: int64 in its cJSON).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Params {
    /// `tcp` / `udp` / `sctp`.
    pub transport: Transport,
    /// `reverse` / `bidirectional` (3.7+).
    pub mode: Mode,
    /// `omit`: seconds at the start not counted (`-O`).
    pub omit_s: u32,
    /// `time`: test seconds (`-t`; 0 with `-n`/`-k` in some versions).
    pub time_s: u32,
    /// `num`: bytes to send (`-n`), 0 = by time.
    pub num_bytes: u64,
    /// `blockcount`: blocks to send (`-k`), 0 = by time.
    pub blockcount: u64,
    /// `parallel`: streams per direction (`-P`).
    pub parallel: u16,
    /// `MSS` (`-M`), 0 = the kernel's.
    pub mss: u32,
    /// `nodelay` (`-N`).
    pub nodelay: bool,
    /// `window` (`-w`): SO_SNDBUF/SO_RCVBUF, 0 = the kernel's.
    pub window: u32,
    /// `len` (`-l`): block or datagram size.
    pub len: u32,
    /// `bandwidth` (`-b`): bit/s per stream, 0 = unlimited.
    pub bandwidth: u64,
    /// `fqrate` (`--fq-rate`, 3.1.5+): SO_MAX_PACING_RATE, bit/s.
    pub fqrate: u64,
    /// `pacing_timer` (`--pacing-timer`, 3.2+): µs between pacing checks.
    pub pacing_timer_us: u32,
    /// `burst` (`-b RATE/N`): datagrams per pacing check.
    pub burst: u32,
    /// `TOS` (`-S`, `--dscp` << 2).
    pub tos: u8,
    /// `flowlabel` (`-L`, IPv6).
    pub flowlabel: u32,
    /// `title` (`-T`).
    pub title: Option<String>,
    /// `extra_data` (3.6+).
    pub extra_data: Option<String>,
    /// `congestion` (`-C`).
    pub congestion: Option<String>,
    /// `get_server_output` (`--get-server-output`).
    pub get_server_output: bool,
    /// `udp_counters_64bit` (`--udp-counters-64bit`, 3.1+).
    pub udp_counters_64bit: bool,
    /// `repeating_payload` (`--repeating-payload`, 3.7+).
    pub repeating_payload: bool,
    /// `zerocopy` (`-Z`, 3.11+ sent).
    pub zerocopy: bool,
    /// `dont_fragment` (`--dont-fragment`, 3.10+).
    pub dont_fragment: bool,
    /// `skip_rx_copy` (`--skip-rx-copy`, 3.19+).
    pub skip_rx_copy: bool,
    /// `authtoken` (3.2+): base64 of the RSA-encrypted credentials.
    pub authtoken: Option<String>,
    /// `client_version` (3.1+).
    pub client_version: Option<String>,
}

/// Why the parameters are refused: the iperf error number sent back in
/// SERVER_ERROR, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} (iperf error {code})")]
pub struct Refusal {
    /// iperf's error number.
    pub code: i32,
    /// What was wrong, for the server's log.
    pub reason: String,
}

fn refuse(code: i32, reason: impl Into<String>) -> Refusal {
    Refusal {
        code,
        reason: reason.into(),
    }
}

/// A number key as iperf3 reads it (only if it is a JSON number; a float
/// is truncated toward zero and saturates, as cJSON's valueint does).
fn num(o: &Map<String, Value>, k: &str) -> Option<i64> {
    match o.get(k)? {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_u64().map(|_| i64::MAX))
            .or_else(|| n.as_f64().map(|f| f as i64)),
        _ => None,
    }
}

fn is_true(o: &Map<String, Value>, k: &str) -> bool {
    matches!(o.get(k), Some(Value::Bool(true)))
}

fn text(o: &Map<String, Value>, k: &str, max: usize) -> Option<String> {
    match o.get(k)? {
        Value::String(s) => Some(s.chars().take(max).collect()),
        _ => None,
    }
}

/// A number in `lo..=hi`, or the refusal `code`.
fn ranged(
    o: &Map<String, Value>,
    k: &str,
    lo: i64,
    hi: i64,
    code: i32,
) -> Result<Option<i64>, Refusal> {
    match num(o, k) {
        None => Ok(None),
        Some(v) if (lo..=hi).contains(&v) => Ok(Some(v)),
        Some(v) => Err(refuse(code, format!("{k} = {v} is outside {lo}..={hi}"))),
    }
}

fn u32_of(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn u64_of(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl Params {
    /// Parses and checks a parameters message body.
    pub fn parse(body: &[u8]) -> Result<Self, Refusal> {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| refuse(errno::RECV_PARAMS, format!("parameters are not JSON: {e}")))?;
        let Value::Object(o) = v else {
            return Err(refuse(
                errno::RECV_PARAMS,
                "parameters are not a JSON object",
            ));
        };
        Self::from_object(&o)
    }

    /// Reads and checks the parameters from their JSON object.
    pub fn from_object(o: &Map<String, Value>) -> Result<Self, Refusal> {
        let transport = if is_true(o, "sctp") {
            Transport::Sctp
        } else if is_true(o, "udp") {
            Transport::Udp
        } else {
            Transport::Tcp
        };
        let mode = if is_true(o, "bidirectional") {
            Mode::Bidir
        } else if is_true(o, "reverse") {
            Mode::Reverse
        } else {
            Mode::Forward
        };
        let nonneg = |k: &str| ranged(o, k, 0, i64::MAX, errno::RECV_PARAMS);
        let mut p = Self {
            transport,
            mode,
            omit_s: u32_of(ranged(o, "omit", 0, MAX_OMIT_S, errno::OMIT)?.unwrap_or(0)),
            time_s: u32_of(ranged(o, "time", 0, MAX_TIME_S, errno::DURATION)?.unwrap_or(10)),
            num_bytes: u64_of(nonneg("num")?.unwrap_or(0)),
            blockcount: u64_of(nonneg("blockcount")?.unwrap_or(0)),
            parallel: ranged(o, "parallel", 1, MAX_STREAMS, errno::NUM_STREAMS)?
                .map_or(1, |v| u16::try_from(v).unwrap_or(1)),
            mss: u32_of(ranged(o, "MSS", 0, MAX_MSS, errno::MSS)?.unwrap_or(0)),
            nodelay: is_true(o, "nodelay"),
            window: u32_of(ranged(o, "window", 0, MAX_WINDOW, errno::BUF_SIZE)?.unwrap_or(0)),
            len: u32_of(ranged(o, "len", 0, i64::MAX, errno::BLOCK_SIZE)?.unwrap_or(0)),
            bandwidth: u64_of(nonneg("bandwidth")?.unwrap_or(0)),
            fqrate: u64_of(nonneg("fqrate")?.unwrap_or(0)),
            pacing_timer_us: u32_of(nonneg("pacing_timer")?.unwrap_or(0)),
            burst: u32_of(ranged(o, "burst", 1, MAX_BURST, errno::BURST)?.unwrap_or(0)),
            tos: ranged(o, "TOS", 0, 255, errno::BAD_TOS)?
                .map_or(0, |v| u8::try_from(v).unwrap_or(0)),
            flowlabel: u32_of(ranged(o, "flowlabel", 1, 0xF_FFFF, errno::SET_FLOW)?.unwrap_or(0)),
            title: text(o, "title", 256),
            extra_data: text(o, "extra_data", 1024),
            congestion: text(o, "congestion", 16),
            get_server_output: num(o, "get_server_output").is_some(),
            udp_counters_64bit: num(o, "udp_counters_64bit").is_some(),
            repeating_payload: num(o, "repeating_payload").is_some(),
            zerocopy: num(o, "zerocopy").is_some_and(|v| v != 0),
            dont_fragment: num(o, "dont_fragment").is_some_and(|v| v != 0),
            skip_rx_copy: num(o, "skip_rx_copy").is_some_and(|v| v != 0),
            authtoken: text(o, "authtoken", 4096),
            client_version: text(o, "client_version", 32),
        };
        // UDP GSO/GRO keys (3.21) are range-checked as iperf3 does; linerate
        // sends and receives plain datagrams whatever they say.
        for k in ["gso", "gso_dg_size", "gso_bf_size", "gro_bf_size"] {
            nonneg(k)?;
        }
        ranged(o, "gro", 0, 1, errno::RECV_PARAMS)?;
        if p.transport == Transport::Sctp {
            return Err(refuse(errno::PROTOCOL, "SCTP is not served by linerate"));
        }
        match p.transport {
            Transport::Udp => {
                if p.len == 0 {
                    p.len = DEFAULT_UDP_BLOCK;
                }
                if !(super::MIN_UDP_DATAGRAM as i64..=MAX_UDP_BLOCK).contains(&i64::from(p.len)) {
                    return Err(refuse(
                        errno::UDP_BLOCK_SIZE,
                        format!("UDP len {} is outside 16..={MAX_UDP_BLOCK}", p.len),
                    ));
                }
            }
            _ => {
                if p.len == 0 {
                    p.len = DEFAULT_TCP_BLOCK;
                }
                if i64::from(p.len) > MAX_TCP_BLOCK {
                    return Err(refuse(
                        errno::BLOCK_SIZE,
                        format!("TCP len {} is above {MAX_TCP_BLOCK}", p.len),
                    ));
                }
            }
        }
        Ok(p)
    }

    /// Streams per direction as a count.
    pub fn streams(&self) -> usize {
        usize::from(self.parallel.max(1))
    }

    /// The streams of the session in the order the client connects them,
    /// each true when the client sends on it (`--bidir`: the client's
    /// sending streams first).
    pub fn stream_senders(&self) -> Vec<bool> {
        let n = self.streams();
        match self.mode {
            Mode::Forward => vec![true; n],
            Mode::Reverse => vec![false; n],
            Mode::Bidir => [vec![true; n], vec![false; n]].concat(),
        }
    }

    /// Checks the server's own limits: the longest test (`time + omit`,
    /// and a test by bytes or blocks must end by then too, so it is not
    /// refused but stopped), and the total rate (`parallel × bandwidth`,
    /// doubled with `--bidir`).
    pub fn check_limits(
        &self,
        max_time_s: Option<u64>,
        max_rate_bits_per_s: Option<u64>,
    ) -> Result<(), Refusal> {
        if let Some(max) = max_time_s {
            let t = u64::from(self.time_s) + u64::from(self.omit_s);
            if t > max {
                return Err(refuse(
                    errno::MAX_DURATION,
                    format!("time + omit = {t} s is above the server's maximum of {max} s"),
                ));
            }
        }
        if let Some(max) = max_rate_bits_per_s {
            let dirs = if self.mode == Mode::Bidir { 2 } else { 1 };
            let total = u64::from(self.parallel)
                .saturating_mul(self.bandwidth.max(self.fqrate))
                .saturating_mul(dirs);
            if total > max {
                return Err(refuse(
                    errno::TOTAL_RATE,
                    format!("total rate {total} bit/s is above the server's limit of {max}"),
                ));
            }
        }
        Ok(())
    }

    /// The parameters message body a client sends (compact JSON), with
    /// every key iperf3 3.21 sends for these settings.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        match self.transport {
            Transport::Tcp => o.insert("tcp".into(), Value::Bool(true)),
            Transport::Udp => o.insert("udp".into(), Value::Bool(true)),
            Transport::Sctp => o.insert("sctp".into(), Value::Bool(true)),
        };
        let mut put = |k: &str, v: Value| {
            o.insert(k.into(), v);
        };
        put("omit", self.omit_s.into());
        put("time", self.time_s.into());
        put("num", self.num_bytes.into());
        put("blockcount", self.blockcount.into());
        if self.mss > 0 {
            put("MSS", self.mss.into());
        }
        if self.nodelay {
            put("nodelay", true.into());
        }
        put("parallel", self.parallel.into());
        match self.mode {
            Mode::Forward => {}
            Mode::Reverse => put("reverse", true.into()),
            Mode::Bidir => put("bidirectional", true.into()),
        }
        if self.window > 0 {
            put("window", self.window.into());
        }
        if self.len > 0 {
            put("len", self.len.into());
        }
        if self.bandwidth > 0 {
            put("bandwidth", self.bandwidth.into());
        }
        if self.fqrate > 0 {
            put("fqrate", self.fqrate.into());
        }
        if self.pacing_timer_us > 0 {
            put("pacing_timer", self.pacing_timer_us.into());
        }
        if self.burst > 0 {
            put("burst", self.burst.into());
        }
        if self.tos > 0 {
            put("TOS", self.tos.into());
        }
        if self.flowlabel > 0 {
            put("flowlabel", self.flowlabel.into());
        }
        for (k, v) in [
            ("title", &self.title),
            ("extra_data", &self.extra_data),
            ("congestion", &self.congestion),
        ] {
            if let Some(v) = v {
                put(k, v.clone().into());
            }
        }
        for (k, on) in [
            ("get_server_output", self.get_server_output),
            ("udp_counters_64bit", self.udp_counters_64bit),
            ("repeating_payload", self.repeating_payload),
            ("zerocopy", self.zerocopy),
            ("dont_fragment", self.dont_fragment),
            ("skip_rx_copy", self.skip_rx_copy),
        ] {
            if on {
                put(k, 1.into());
            }
        }
        if let Some(t) = &self.authtoken {
            put("authtoken", t.clone().into());
        }
        put(
            "client_version",
            self.client_version
                .clone()
                .unwrap_or_else(|| "3.21".into())
                .into(),
        );
        Value::Object(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Params, Refusal> {
        Params::parse(s.as_bytes())
    }

    #[test]
    fn a_3_12_client_s_parameters() {
        let p = parse(r#"{"tcp":true,"omit":0,"time":10,"num":0,"blockcount":0,"parallel":4,"reverse":true,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#).unwrap();
        assert_eq!(
            (p.transport, p.mode, p.parallel, p.len),
            (Transport::Tcp, Mode::Reverse, 4, 131_072)
        );
        assert_eq!(p.stream_senders(), vec![false; 4]);
        assert_eq!(p.client_version.as_deref(), Some("3.12"));
    }

    /// What clients of other versions send (from their send_parameters):
    /// 3.1.3 (`no_fq_socket_pacing`, no pacing timer), 3.21 (UDP GSO/GRO
    /// keys with every UDP test, `skip_rx_copy`, `mptcp`).
    #[test]
    fn parameters_of_3_1_and_3_21() {
        let p = parse(r#"{"tcp":true,"omit":0,"time":5,"parallel":1,"len":131072,"no_fq_socket_pacing":true,"client_version":"3.1.3"}"#).unwrap();
        assert_eq!((p.time_s, p.fqrate, p.pacing_timer_us), (5, 0, 0));
        let p = parse(r#"{"udp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":2,"bidirectional":true,"len":1448,"bandwidth":1048576,"pacing_timer":1000,"gso":0,"gso_dg_size":0,"gso_bf_size":65507,"gro":0,"gro_bf_size":65507,"skip_rx_copy":1,"mptcp":true,"udp_counters_64bit":1,"client_version":"3.21"}"#).unwrap();
        assert_eq!(
            (p.transport, p.mode, p.len, p.bandwidth),
            (Transport::Udp, Mode::Bidir, 1448, 1_048_576)
        );
        assert!(p.skip_rx_copy && p.udp_counters_64bit);
        assert_eq!(
            parse(r#"{"udp":true,"gro":2}"#).map_err(|r| r.code),
            Err(errno::RECV_PARAMS)
        );
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_ignored() {
        let p = parse(r#"{"udp":true,"time":"ten","len":1400,"new_key":[1,2],"bidirectional":true,"parallel":2}"#).unwrap();
        assert_eq!((p.transport, p.time_s, p.len), (Transport::Udp, 10, 1400));
        assert_eq!(p.stream_senders(), vec![true, true, false, false]);
    }

    #[test]
    fn out_of_range_values_are_refused_with_iperf3_s_numbers() {
        for (json, code) in [
            (r#"{"tcp":true,"parallel":129}"#, errno::NUM_STREAMS),
            (r#"{"tcp":true,"parallel":0}"#, errno::NUM_STREAMS),
            (r#"{"tcp":true,"time":86401}"#, errno::DURATION),
            (r#"{"tcp":true,"omit":601}"#, errno::OMIT),
            (r#"{"tcp":true,"MSS":40000}"#, errno::MSS),
            (r#"{"tcp":true,"window":1e12}"#, errno::BUF_SIZE),
            (r#"{"tcp":true,"len":2000000}"#, errno::BLOCK_SIZE),
            (r#"{"udp":true,"len":8}"#, errno::UDP_BLOCK_SIZE),
            (r#"{"udp":true,"burst":1001}"#, errno::BURST),
            (r#"{"tcp":true,"TOS":256}"#, errno::BAD_TOS),
            (r#"{"tcp":true,"num":-1}"#, errno::RECV_PARAMS),
            (r#"{"sctp":true}"#, errno::PROTOCOL),
            (r#"[1]"#, errno::RECV_PARAMS),
            (r#"{"tcp":"#, errno::RECV_PARAMS),
        ] {
            assert_eq!(parse(json).map_err(|r| r.code), Err(code), "{json}");
        }
    }

    #[test]
    fn server_limits() {
        let p = parse(r#"{"udp":true,"time":10,"omit":2,"parallel":4,"bandwidth":1000000,"bidirectional":true}"#).unwrap();
        assert_eq!(p.check_limits(Some(12), Some(8_000_000)), Ok(()));
        assert_eq!(
            p.check_limits(Some(11), None).map_err(|r| r.code),
            Err(errno::MAX_DURATION)
        );
        assert_eq!(
            p.check_limits(None, Some(7_999_999)).map_err(|r| r.code),
            Err(errno::TOTAL_RATE)
        );
    }

    #[test]
    fn what_a_client_sends_parses_back() {
        let p = Params {
            transport: Transport::Udp,
            mode: Mode::Bidir,
            parallel: 3,
            len: 1200,
            bandwidth: 5_000_000,
            udp_counters_64bit: true,
            title: Some("t".into()),
            time_s: 2,
            client_version: Some("3.21".into()),
            ..Params::default()
        };
        let body = serde_json::to_vec(&p.to_json()).unwrap();
        assert_eq!(Params::parse(&body).unwrap(), p);
    }
}
