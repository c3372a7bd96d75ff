//! A control connection: frames of `linerate_core::wire::control` over a
//! TCP stream, every read bounded by a timeout.

use std::io::{self, Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use linerate_core::wire::control::{encode, ControlError, Decoder, Message};

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
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(CtrlError::Timeout(timeout));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}
