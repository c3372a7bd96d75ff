//! A control connection: frames of `linerate_core::wire::control` over a
//! TCP stream, every read bounded by a timeout; and the client's side of
//! the handshake (authentication included).

use std::io::{self, Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use linerate_core::wire::control::{encode, ControlError, Decoder, Message};
use linerate_core::wire::control_auth::{hex, parse_nonce, Key};

/// Why a control exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum CtrlError {
    /// Nothing arrived in time.
    #[error("no control message within {0:?}")]
    Timeout(Duration),
    /// The peer closed the connection.
    #[error("the peer closed the control connection")]
    Closed,
    /// The peer sent something that is not the protocol.
    #[error(transparent)]
    Protocol(#[from] ControlError),
    /// A socket error.
    #[error("control connection: {0}")]
    Io(io::Error),
    /// A message that does not belong here.
    #[error("unexpected control message '{got}' (expected {want})")]
    Unexpected {
        /// What came.
        got: &'static str,
        /// What was expected.
        want: &'static str,
    },
}

impl From<io::Error> for CtrlError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// One end of a control connection.
#[derive(Debug)]
pub struct Control {
    stream: TcpStream,
    decoder: Decoder,
    buf: Vec<u8>,
}

impl Control {
    /// Wraps a connected stream.
    pub fn new(stream: TcpStream) -> Self {
        let _ = stream.set_nodelay(true);
        let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
        Self {
            stream,
            decoder: Decoder::new(),
            buf: vec![0; 64 * 1024],
        }
    }

    /// The stream (for addresses).
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Gives the stream back (a data connection after its DataHello).
    pub fn into_stream(self) -> TcpStream {
        self.stream
    }

    /// Sends one message.
    pub fn send(&mut self, msg: &Message) -> Result<(), CtrlError> {
        let frame = encode(msg)?;
        self.stream.write_all(&frame)?;
        Ok(())
    }

    /// Receives one message within `timeout` (the whole message, not each
    /// read: a slow peer dribbling bytes cannot hold the connection).
    pub fn recv(&mut self, timeout: Duration) -> Result<Message, CtrlError> {
        let start = Instant::now();
        loop {
            if let Some(m) = self.decoder.next_message()? {
                return Ok(m);
            }
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(CtrlError::Timeout(timeout));
            }
            self.stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
            // Read no further than the current frame, so bytes after it
            // (a data connection's first block) stay in the socket.
            let want = self.decoder.wanted().min(self.buf.len());
            match self.stream.read(&mut self.buf[..want]) {
                Ok(0) => return Err(CtrlError::Closed),
                Ok(n) => self.decoder.push(&self.buf[..n])?,
                Err(e) if crate::sys::sock::timed_out(&e) => {
                    return Err(CtrlError::Timeout(timeout));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// The pre-shared key this process's clients authenticate with (set once
/// by the binary from `--auth-file` or `LINERATE_AUTH_KEY`).
static CLIENT_KEY: std::sync::RwLock<Option<Key>> = std::sync::RwLock::new(None);

/// Sets (or with `None` clears) the key every client of this process
/// (throughput, latency) authenticates with.
pub fn set_client_key(key: Option<Key>) {
    *CLIENT_KEY
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = key;
}

/// The key set by [`set_client_key`], if any (an in-process server takes
/// it too, so that this process's clients can authenticate it).
pub(crate) fn client_key() -> Option<Key> {
    CLIENT_KEY
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// What a server's Welcome gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Welcome {
    /// The session's id.
    pub session_id: u32,
    /// The cookie its data connections present.
    pub cookie: u64,
}

/// Why a client's handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The connection or the protocol failed.
    #[error(transparent)]
    Ctrl(#[from] CtrlError),
    /// The server refused, with its reason (escaped).
    #[error("the server refused: {0}")]
    Refused(String),
    /// Authentication failed on this side.
    #[error("authentication: {0}")]
    Auth(String),
    /// The server answered the Hello as an iperf3 server answers a cookie.
    #[error("the server speaks iperf3, not linerate's protocol")]
    Iperf3,
}

/// The client's side of the handshake: Hello, then (a server with a key)
/// the server's proof checked and the client's sent, then Welcome. A
/// client with a key refuses a server that does not prove it knows it.
pub fn client_handshake(ctrl: &mut Control, software: &str) -> Result<Welcome, HandshakeError> {
    let key = client_key();
    let nonce = crate::token::nonce().map_err(CtrlError::Io)?;
    ctrl.send(&Message::hello(software, &hex(&nonce)))?;
    // An iperf3 server takes the Hello's first 37 bytes for its cookie and
    // answers with one state byte; linerate's answer starts with a length.
    if crate::iperf3::client::answered_as_iperf3(ctrl.stream(), super::server::STEP_TIMEOUT) {
        return Err(HandshakeError::Iperf3);
    }
    let mut authenticated = false;
    loop {
        match ctrl.recv(super::server::STEP_TIMEOUT)? {
            Message::Challenge {
                nonce: server_nonce,
                proof,
            } if !authenticated => {
                let Some(key) = &key else {
                    return Err(HandshakeError::Auth(
                        "the server requires a key: give --auth-file FILE (or LINERATE_AUTH_KEY) with the server's key".into(),
                    ));
                };
                let server_nonce = parse_nonce(&server_nonce).ok_or_else(|| {
                    HandshakeError::Auth("the server's nonce is malformed".into())
                })?;
                if !key.check_server_proof(&nonce, &server_nonce, &proof) {
                    return Err(HandshakeError::Auth(
                        "the server does not know this key (wrong key, or not the server meant)"
                            .into(),
                    ));
                }
                ctrl.send(&Message::Auth {
                    proof: key.client_proof(&server_nonce, &nonce),
                })?;
                authenticated = true;
            }
            Message::Welcome {
                session_id, cookie, ..
            } => {
                if key.is_some() && !authenticated {
                    return Err(HandshakeError::Auth(
                        "the server did not authenticate itself (it has no key); refusing it since this client has one".into(),
                    ));
                }
                return Ok(Welcome { session_id, cookie });
            }
            Message::Refused { reason } => {
                return Err(HandshakeError::Refused(linerate_core::untrusted::escape(
                    &reason,
                )))
            }
            other => {
                return Err(CtrlError::Unexpected {
                    got: other.name(),
                    want: "challenge or welcome",
                }
                .into())
            }
        }
    }
}
