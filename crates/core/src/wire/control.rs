//! The control protocol between `linerate throughput` and `linerate server`.
//!
//! A control connection is a TCP stream of frames: a 4-byte big-endian
//! length, then that many bytes of one JSON-encoded [`Message`]. A frame
//! longer than [`MAX_FRAME_BYTES`] ends the connection (the decoder refuses
//! it before buffering it). The first frame of a control connection is a
//! [`Message::Hello`] carrying [`CONTROL_MAGIC`], [`CONTROL_VERSION`] and the
//! client's nonce; a server with a key answers with a [`Message::Challenge`]
//! and the client with a [`Message::Auth`] (see [`super::control_auth`])
//! before the server's [`Message::Welcome`]. The first frame of a TCP data
//! connection is a [`Message::DataHello`] naming its session and flow.
//!
//! Versions: 1 had no authentication; 2 adds the Hello's `nonce`,
//! `Challenge` and `Auth`, and `Opened` (UDP paths are opened by the
//! client's own datagrams before `Go`). A server refuses other versions with a
//! [`Message::Refused`] naming both (a version-1 Hello still decodes, so the
//! refusal is clear).
//!
//! Sessions are typed by [`SessionKind`], so later session types (latency
//! reflector, …) are new variants, and an old peer refuses them by name.
//!
//! The [`Decoder`] takes bytes as they arrive, in any chunking, and never
//! panics on garbage: it returns a [`ControlError`].

use serde::{Deserialize, Serialize};

use crate::latency::{LatencyParams, ReflectorRecord, ReflectorReport};
use crate::throughput::model::{SideReport, ThroughputParams};

/// Names the protocol in every Hello.
pub const CONTROL_MAGIC: &str = "linerate-control";
/// The protocol version this build speaks.
pub const CONTROL_VERSION: u32 = 2;
/// The port `linerate server` listens on unless told otherwise (control,
/// TCP data connections and latency sessions).
pub const DEFAULT_PORT: u16 = 5300;
/// Reflector records per `ReflectorRecords` frame: one record encodes to
/// at most ~260 bytes of JSON, so a full chunk stays far below the frame limit.
pub const MAX_RECORDS_PER_FRAME: usize = 2_000;
/// The largest frame either end accepts, bytes (length prefix excluded).
pub const MAX_FRAME_BYTES: usize = 1 << 20;
/// The length prefix, bytes.
pub const LEN_BYTES: usize = 4;

/// The kind of test a client asks for, with its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "params", rename_all = "snake_case")]
pub enum SessionKind {
    /// `linerate throughput`.
    Throughput(ThroughputParams),
    /// `linerate latency`: the server runs a reflector for this session.
    Latency(LatencyParams),
}

/// Bytes and packets one flow sent, told to the receiving end when sending
/// stopped so it can count trailing losses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowSent {
    /// The flow.
    pub flow: u16,
    /// Datagrams or blocks sent.
    pub packets: u64,
    /// Bytes sent.
    pub bytes: u64,
}

/// One control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// Client → server, first frame: who is speaking.
    Hello {
        /// Must be [`CONTROL_MAGIC`].
        magic: String,
        /// The client's [`CONTROL_VERSION`].
        version: u32,
        /// Free text: software name and version.
        software: String,
        /// The client's nonce for authentication: 32 random bytes, hex
        /// (version 2; absent in version 1).
        #[serde(default)]
        nonce: String,
    },
    /// Server → client (a server with a key): prove you know the key. The
    /// server proves it first, so a client never answers an impostor.
    Challenge {
        /// The server's nonce: 32 random bytes, hex.
        nonce: String,
        /// HMAC-SHA256 of the key over the server label and both nonces, hex.
        proof: String,
    },
    /// Client → server: the answer to a [`Message::Challenge`].
    Auth {
        /// HMAC-SHA256 of the key over the client label and both nonces, hex.
        proof: String,
    },
    /// Server → client: accepted; the session's id and the cookie data
    /// connections must present.
    Welcome {
        /// The server's protocol version.
        version: u32,
        /// Session id (also in every probe).
        session_id: u32,
        /// Shared secret of this session for its data connections.
        cookie: u64,
    },
    /// Server → client: refused, with the reason (busy, bad version, …).
    Refused {
        /// Why, for a person.
        reason: String,
    },
    /// Client → server: the test to run. `udp_ports`: the client's UDP
    /// socket port for each flow (UDP only, flow order).
    Start {
        /// What to run.
        session: SessionKind,
        /// Client UDP ports, one per flow (empty for TCP).
        udp_ports: Vec<u16>,
    },
    /// Server → client: parameters accepted; the server's UDP port per flow
    /// (empty for TCP, whose flows connect to the control port).
    Accepted {
        /// Server UDP ports, one per flow.
        udp_ports: Vec<u16>,
    },
    /// Server → client (UDP, version 2): every flow's path is open: a
    /// datagram came from each port the client named (the client sends
    /// empty datagrams from each until this arrives, then `Go`).
    Opened,
    /// First frame of a TCP data connection.
    DataHello {
        /// The session it belongs to.
        session_id: u32,
        /// The session's cookie.
        cookie: u64,
        /// Which flow this connection carries.
        flow: u16,
    },
    /// Client → server: every data connection is open; start.
    Go,
    /// Server → client: the server's flows run; the test clock starts.
    Running,
    /// Either way: this end's senders stopped; what they sent.
    SendDone {
        /// Per flow this end sent.
        flows: Vec<FlowSent>,
    },
    /// Server → client: the server's side of the result.
    Report {
        /// The server's measurements.
        side: SideReport,
    },
    /// Server → client (latency): the reflector listens on `port` of the
    /// control connection's address and answers this session's token
    /// (its session id); `boot_id` lets the client tell whether both ends
    /// share a clock (same host).
    ReflectorReady {
        /// UDP or TCP port of the reflector.
        port: u16,
        /// The server host's boot id (`/proc/sys/kernel/random/boot_id`).
        boot_id: String,
    },
    /// Server → client (latency), after the client's `SendDone`: one chunk
    /// of the reflector's per-exchange stamps (a frame holds at most
    /// [`MAX_RECORDS_PER_FRAME`]).
    ReflectorRecords {
        /// Records, in order.
        records: Vec<ReflectorRecord>,
    },
    /// Server → client (latency): the reflector's counters; ends the session.
    ReflectorDone {
        /// Counters (records were sent before, in chunks).
        report: ReflectorReport,
    },
    /// Either way: the session failed, with the reason.
    Error {
        /// Why, for a person.
        reason: String,
    },
}

impl Message {
    /// A Hello from this build, with the client's nonce (hex).
    pub fn hello(software: &str, nonce: &str) -> Self {
        Self::Hello {
            magic: CONTROL_MAGIC.to_string(),
            version: CONTROL_VERSION,
            software: software.to_string(),
            nonce: nonce.to_string(),
        }
    }

    /// Short name of the variant, for error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Hello { .. } => "hello",
            Self::Challenge { .. } => "challenge",
            Self::Auth { .. } => "auth",
            Self::Welcome { .. } => "welcome",
            Self::Refused { .. } => "refused",
            Self::Start { .. } => "start",
            Self::Accepted { .. } => "accepted",
            Self::DataHello { .. } => "data_hello",
            Self::Opened => "opened",
            Self::Go => "go",
            Self::Running => "running",
            Self::SendDone { .. } => "send_done",
            Self::Report { .. } => "report",
            Self::ReflectorReady { .. } => "reflector_ready",
            Self::ReflectorRecords { .. } => "reflector_records",
            Self::ReflectorDone { .. } => "reflector_done",
            Self::Error { .. } => "error",
        }
    }
}

/// Why a control stream is broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// A frame announced more than [`MAX_FRAME_BYTES`].
    #[error("control frame of {0} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")]
    Oversize(usize),
    /// A frame whose bytes are not a message (the parser's words, with
    /// whatever they quote of the peer's bytes escaped).
    #[error("malformed control message: {0}")]
    Malformed(String),
    /// The peer is not a linerate control client.
    #[error("not a linerate control connection (magic {0:?})")]
    BadMagic(String),
    /// The peer speaks another protocol version.
    #[error("control protocol version {peer} not supported (this build speaks {CONTROL_VERSION})")]
    BadVersion {
        /// The peer's version.
        peer: u32,
    },
}

/// Checks a Hello's magic and version.
pub fn check_hello(magic: &str, version: u32) -> Result<(), ControlError> {
    if magic != CONTROL_MAGIC {
        let shown: String = magic.chars().take(40).collect();
        return Err(ControlError::BadMagic(crate::untrusted::escape(&shown)));
    }
    if version != CONTROL_VERSION {
        return Err(ControlError::BadVersion { peer: version });
    }
    Ok(())
}

/// Encodes one message as a frame (length prefix included).
pub fn encode(msg: &Message) -> Result<Vec<u8>, ControlError> {
    let body = serde_json::to_vec(msg).map_err(|e| ControlError::Malformed(e.to_string()))?;
    if body.len() > MAX_FRAME_BYTES {
        return Err(ControlError::Oversize(body.len()));
    }
    let len = u32::try_from(body.len()).map_err(|_| ControlError::Oversize(body.len()))?;
    let mut out = Vec::with_capacity(LEN_BYTES + body.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Incremental frame decoder: push bytes as they arrive, pop messages.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
}

impl Decoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many bytes the next call to [`Decoder::next_message`] needs at
    /// least before it can return a message (for sizing reads).
    pub fn wanted(&self) -> usize {
        match self.frame_len() {
            Some(Ok(len)) => (LEN_BYTES + len).saturating_sub(self.buf.len()).max(1),
            _ => LEN_BYTES.saturating_sub(self.buf.len()).max(1),
        }
    }

    /// Bytes held that are not yet a whole frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Bytes of memory the decoder's buffer holds (its capacity): what a
    /// connection costs, bounded by what was accepted, never by what a
    /// length prefix claims.
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    fn frame_len(&self) -> Option<Result<usize, ControlError>> {
        let head = self.buf.get(..LEN_BYTES)?;
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        Some(if len > MAX_FRAME_BYTES {
            Err(ControlError::Oversize(len))
        } else {
            Ok(len)
        })
    }

    /// Appends received bytes. An oversize frame is refused here, by the
    /// push that completes its length prefix, and nothing of a refused push
    /// is buffered: memory follows what was accepted, never what a prefix
    /// claims.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), ControlError> {
        let held = self.buf.len();
        if held < LEN_BYTES {
            // The prefix from what is held and what arrives, judged before
            // either is buffered.
            let mut head = [0u8; LEN_BYTES];
            let take = (LEN_BYTES - held).min(bytes.len());
            head[..held].copy_from_slice(&self.buf);
            head[held..held + take].copy_from_slice(&bytes[..take]);
            let len = u32::from_be_bytes(head) as usize;
            if held + take == LEN_BYTES && len > MAX_FRAME_BYTES {
                return Err(ControlError::Oversize(len));
            }
        } else if let Some(Err(e)) = self.frame_len() {
            return Err(e);
        }
        // Never hold more than one whole frame plus its prefix beyond what
        // next_message() will consume.
        let total = held.saturating_add(bytes.len());
        if total > 2 * (MAX_FRAME_BYTES + LEN_BYTES) {
            return Err(ControlError::Oversize(total));
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// The next whole message, if one is buffered.
    pub fn next_message(&mut self) -> Result<Option<Message>, ControlError> {
        let len = match self.frame_len() {
            None => return Ok(None),
            Some(r) => r?,
        };
        let Some(body) = self.buf.get(LEN_BYTES..LEN_BYTES + len) else {
            return Ok(None);
        };
        // A parse error quotes the peer's bytes (an unknown variant's
        // name): escaped here, so no log line carries them raw.
        let msg = serde_json::from_slice(body)
            .map_err(|e| ControlError::Malformed(crate::untrusted::escape(&e.to_string())));
        self.buf.drain(..LEN_BYTES + len);
        msg.map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::throughput::model::ThroughputParams;

    fn sample() -> Vec<Message> {
        vec![
            Message::hello("linerate test", &"ab".repeat(32)),
            Message::Challenge {
                nonce: "00".repeat(32),
                proof: "11".repeat(32),
            },
            Message::Auth {
                proof: "22".repeat(32),
            },
            Message::Welcome {
                version: 1,
                session_id: 9,
                cookie: 77,
            },
            Message::Start {
                session: SessionKind::Throughput(ThroughputParams::default()),
                udp_ports: vec![1, 2],
            },
            Message::Go,
            Message::SendDone {
                flows: vec![FlowSent {
                    flow: 0,
                    packets: 3,
                    bytes: 4,
                }],
            },
        ]
    }

    #[test]
    fn round_trip_in_any_chunking() {
        let msgs = sample();
        let mut wire = Vec::new();
        for m in &msgs {
            wire.extend(encode(m).unwrap());
        }
        for chunk in [1, 2, 3, 7, 64, wire.len()] {
            let mut d = Decoder::new();
            let mut got = Vec::new();
            for c in wire.chunks(chunk) {
                d.push(c).unwrap();
                while let Some(m) = d.next_message().unwrap() {
                    got.push(m);
                }
            }
            assert_eq!(got, msgs, "chunk {chunk}");
            assert_eq!(d.buffered(), 0);
        }
    }

    #[test]
    fn oversize_is_refused_before_buffering() {
        let mut d = Decoder::new();
        let len = (MAX_FRAME_BYTES as u32 + 1).to_be_bytes();
        assert_eq!(
            d.push(&len),
            Err(ControlError::Oversize(MAX_FRAME_BYTES + 1))
        );
        let mut d = Decoder::new();
        assert!(d.push(&[0xFF, 0xFF, 0xFF, 0xFF, b'{']).is_err());
    }

    /// Found by tests/fuzz_control.rs: the push that completed an oversize
    /// prefix buffered its bytes (the whole chunk) before refusing it.
    #[test]
    fn regression_oversize_prefix_buffers_nothing_of_the_refused_push() {
        let mut d = Decoder::new();
        let mut wire = u32::MAX.to_be_bytes().to_vec();
        wire.extend_from_slice(&[b'{'; 4096]);
        assert_eq!(
            d.push(&wire),
            Err(ControlError::Oversize(u32::MAX as usize))
        );
        assert_eq!(d.buffered(), 0);
        assert!(d.capacity() < 64, "capacity {}", d.capacity());
        // A prefix completed across pushes: the first bytes wait, the
        // completing push is refused and not kept.
        let mut d = Decoder::new();
        d.push(&wire[..2]).unwrap();
        assert_eq!(
            d.push(&wire[2..]),
            Err(ControlError::Oversize(u32::MAX as usize))
        );
        assert_eq!(d.buffered(), 2);
        // More than two frames' worth in one push is refused unbuffered too.
        let mut d = Decoder::new();
        let big = vec![0u8; 2 * (MAX_FRAME_BYTES + LEN_BYTES) + 1];
        assert!(d.push(&big).is_err());
        assert_eq!((d.buffered(), d.capacity()), (0, 0));
    }

    #[test]
    fn truncated_frames_wait_and_garbage_is_an_error() {
        let f = encode(&Message::Go).unwrap();
        let mut d = Decoder::new();
        d.push(&f[..f.len() - 1]).unwrap();
        assert_eq!(d.next_message().unwrap(), None);
        assert!(d.wanted() >= 1);
        let mut d = Decoder::new();
        d.push(&[0, 0, 0, 3, b'a', b'b', b'c']).unwrap();
        assert!(matches!(d.next_message(), Err(ControlError::Malformed(_))));
        let mut d = Decoder::new();
        d.push(&[0, 0, 0, 0]).unwrap();
        assert!(d.next_message().is_err());
        let mut d = Decoder::new();
        let body = br#"{"type":"start","session":{"kind":"reflector","params":{}},"udp_ports":[]}"#;
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(body);
        d.push(&f).unwrap();
        assert!(
            d.next_message().is_err(),
            "unknown session kinds are refused"
        );
    }

    #[test]
    fn pseudo_random_garbage_never_panics() {
        let mut x: u64 = 0x1234_5678;
        for round in 0..2000 {
            let mut d = Decoder::new();
            let len = (round % 50) + 4;
            let mut bytes = Vec::with_capacity(len);
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                bytes.push(x as u8);
            }
            if round % 3 == 0 {
                // A plausible small length prefix, garbage body.
                bytes[0] = 0;
                bytes[1] = 0;
                bytes[2] = 0;
            }
            if d.push(&bytes).is_ok() {
                let _ = d.next_message();
            }
        }
    }

    /// Issue 16 item 6: a serde error echoing an unknown variant name
    /// carried the peer's newlines and terminal escapes into the log.
    #[test]
    fn regression_malformed_messages_quote_the_peer_escaped() {
        let body = "{\"type\":\"x\\n2026 forged line\\u001b[2J\"}";
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(body.as_bytes());
        let mut d = Decoder::new();
        d.push(&f).unwrap();
        let e = d.next_message().unwrap_err().to_string();
        assert!(e.contains("forged line"), "{e}");
        assert!(!e.chars().any(char::is_control), "{e:?}");
        assert!(matches!(
            check_hello("a\nb", CONTROL_VERSION),
            Err(ControlError::BadMagic(m)) if m == "a\\nb"
        ));
    }

    /// A version-1 Hello (no nonce) still decodes, so the server can refuse
    /// it by version rather than as garbage.
    #[test]
    fn a_version_1_hello_decodes_and_is_refused_by_version() {
        let body = br#"{"type":"hello","magic":"linerate-control","version":1,"software":"old"}"#;
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(body);
        let mut d = Decoder::new();
        d.push(&f).unwrap();
        let Some(Message::Hello { version, nonce, .. }) = d.next_message().unwrap() else {
            panic!("not a hello")
        };
        assert_eq!((version, nonce.as_str()), (1, ""));
        assert_eq!(
            check_hello(CONTROL_MAGIC, version),
            Err(ControlError::BadVersion { peer: 1 })
        );
    }

    #[test]
    fn hello_checks() {
        assert!(check_hello(CONTROL_MAGIC, CONTROL_VERSION).is_ok());
        assert!(matches!(
            check_hello("iperf", 1),
            Err(ControlError::BadMagic(_))
        ));
        assert_eq!(
            check_hello(CONTROL_MAGIC, 99),
            Err(ControlError::BadVersion { peer: 99 })
        );
    }
}
