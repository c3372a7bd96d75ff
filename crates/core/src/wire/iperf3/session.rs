//! An iperf3 session as two sans-IO state machines, [`ServerSession`] and
//! [`ClientSession`]: the caller feeds the bytes read from the control
//! connection and what its streams did, with the time; the machine answers
//! with the bytes to write and what to do with the streams. Every step has
//! a deadline, every length a cap: nothing a peer sends can panic a machine,
//! hold it forever or make it buffer without bound.
//!
//! Sequence (both ends): cookie → PARAM_EXCHANGE → parameters →
//! CREATE_STREAMS → streams connect → TEST_START, TEST_RUNNING → the client
//! sends TEST_END → EXCHANGE_RESULTS → the client writes its results, then
//! reads the server's → DISPLAY_RESULTS → IPERF_DONE.

use super::params::{Params, Refusal};
use super::results::{Results, ResultsError};
use super::{errno, frame, server_error, Cookie, State, COOKIE_LEN, LEN_BYTES};
use super::{MAX_PARAMS_BYTES, MAX_RESULTS_BYTES};

/// How long each step may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Any step but the test itself, ns.
    pub step_ns: u64,
    /// Time a test may run beyond `time + omit` before it is stopped, ns.
    pub grace_ns: u64,
    /// The longest test (and the bound of tests by bytes or blocks), ns.
    pub max_test_ns: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            step_ns: 10_000_000_000,
            grace_ns: 10_000_000_000,
            max_test_ns: 86_400 * 1_000_000_000,
        }
    }
}

/// Why the control stream is not iperf3's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// A JSON message longer than its cap.
    #[error("a JSON message of {len} bytes exceeds the {cap}-byte limit")]
    Oversize {
        /// Claimed length.
        len: usize,
        /// Cap.
        cap: usize,
    },
    /// A state byte that does not belong here.
    #[error("unexpected state byte {byte} while {during}")]
    Unexpected {
        /// The byte.
        byte: u8,
        /// What the machine was waiting for.
        during: &'static str,
    },
    /// Results that do not parse.
    #[error(transparent)]
    Results(#[from] ResultsError),
}

/// Bytes read from the control connection, not yet consumed.
#[derive(Debug, Default)]
struct Inbox {
    buf: Vec<u8>,
}

impl Inbox {
    /// Most bytes held: the largest message and its prefix, plus slack.
    const LIMIT: usize = MAX_RESULTS_BYTES + LEN_BYTES + 64;

    fn push(&mut self, b: &[u8]) -> Result<(), WireError> {
        if self.buf.len().saturating_add(b.len()) > Self::LIMIT {
            return Err(WireError::Oversize {
                len: self.buf.len().saturating_add(b.len()),
                cap: Self::LIMIT,
            });
        }
        self.buf.extend_from_slice(b);
        Ok(())
    }

    fn take(&mut self, n: usize) -> Option<Vec<u8>> {
        (self.buf.len() >= n).then(|| self.buf.drain(..n).collect())
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    /// A whole JSON message (body only), or None while incomplete; a
    /// length above `cap` is an error as soon as the prefix is in.
    fn json(&mut self, cap: usize) -> Result<Option<Vec<u8>>, WireError> {
        let Some(p) = self.buf.get(..LEN_BYTES) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) as usize;
        if len > cap {
            return Err(WireError::Oversize { len, cap });
        }
        if self.buf.len() < LEN_BYTES + len {
            return Ok(None);
        }
        self.buf.drain(..LEN_BYTES);
        Ok(self.take(len))
    }
}

/// What happened to a server session (the server's side of the story).
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEnding {
    /// Results exchanged.
    Complete,
    /// The parameters were refused (SERVER_ERROR sent).
    Refused(Refusal),
    /// Ended early: the client vanished, terminated, timed out or broke
    /// the protocol.
    Aborted(String),
}

/// Inputs of a [`ServerSession`].
#[derive(Debug)]
pub enum ServerEvent<'a> {
    /// Bytes read from the control connection.
    Bytes(&'a [u8]),
    /// The parameters passed the caller's checks (authentication, limits)
    /// and its data listener is ready.
    Accepted,
    /// The caller refuses the parameters.
    Refused(Refusal),
    /// Every stream is connected.
    StreamsReady,
    /// The flows stopped; this end's results.
    FlowsStopped(Box<Results>),
    /// The control connection closed (EOF or error).
    Closed,
    /// Time passed.
    Tick,
}

/// Outputs of a [`ServerSession`].
#[derive(Debug, Clone, PartialEq)]
pub enum ServerAction {
    /// Write these bytes on the control connection.
    Send(Vec<u8>),
    /// The session's cookie (its TCP streams will present it).
    Cookie(Cookie),
    /// Check these parameters, open the streams' listener, then answer
    /// [`ServerEvent::Accepted`] or [`ServerEvent::Refused`].
    Check(Box<Params>),
    /// Start sending and receiving on the streams.
    StartFlows,
    /// Stop the flows, close the data sockets, then answer
    /// [`ServerEvent::FlowsStopped`].
    StopFlows,
    /// The client's results (for the server's log).
    ClientResults(Box<Results>),
    /// The session is over: close the control connection.
    Finish(ServerEnding),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerStep {
    Cookie,
    Params,
    Checking,
    Streams,
    Running,
    Stopping,
    ClientResults,
    AwaitDone,
    Done,
}

impl ServerStep {
    fn during(self) -> &'static str {
        match self {
            Self::Cookie => "waiting for the cookie",
            Self::Params => "waiting for the parameters",
            Self::Checking => "checking the parameters",
            Self::Streams => "waiting for the streams",
            Self::Running => "the test ran",
            Self::Stopping => "stopping the flows",
            Self::ClientResults => "waiting for the client's results",
            Self::AwaitDone => "waiting for IPERF_DONE",
            Self::Done => "done",
        }
    }
}

/// The server's side of one iperf3 session.
#[derive(Debug)]
pub struct ServerSession {
    step: ServerStep,
    inbox: Inbox,
    timeouts: Timeouts,
    deadline_ns: u64,
    params: Option<Params>,
    ours: Option<Vec<u8>>,
}

impl ServerSession {
    /// A session whose control connection was just accepted at `now_ns`.
    pub fn new(now_ns: u64, timeouts: Timeouts) -> Self {
        Self {
            step: ServerStep::Cookie,
            inbox: Inbox::default(),
            timeouts,
            deadline_ns: now_ns.saturating_add(timeouts.step_ns),
            params: None,
            ours: None,
        }
    }

    /// Whether the session is over.
    pub fn is_done(&self) -> bool {
        self.step == ServerStep::Done
    }

    /// The parameters, once received.
    pub fn params(&self) -> Option<&Params> {
        self.params.as_ref()
    }

    fn to(&mut self, step: ServerStep, now: u64) {
        self.step = step;
        self.deadline_ns = now.saturating_add(self.timeouts.step_ns);
    }

    fn abort(&mut self, out: &mut Vec<ServerAction>, why: String) {
        if matches!(self.step, ServerStep::Running | ServerStep::Stopping) {
            out.push(ServerAction::StopFlows);
        }
        self.step = ServerStep::Done;
        out.push(ServerAction::Finish(ServerEnding::Aborted(why)));
    }

    fn refuse(&mut self, out: &mut Vec<ServerAction>, r: Refusal) {
        out.push(ServerAction::Send(server_error(r.code, 0).to_vec()));
        self.step = ServerStep::Done;
        out.push(ServerAction::Finish(ServerEnding::Refused(r)));
    }

    /// Feeds one event at `now_ns`; returns what to do, in order.
    pub fn handle(&mut self, now_ns: u64, ev: ServerEvent<'_>) -> Vec<ServerAction> {
        let mut out = Vec::new();
        if self.step == ServerStep::Done {
            return out;
        }
        match ev {
            ServerEvent::Bytes(b) => {
                if let Err(e) = self.inbox.push(b) {
                    self.abort(&mut out, e.to_string());
                    return out;
                }
                self.consume(now_ns, &mut out);
            }
            ServerEvent::Accepted if self.step == ServerStep::Checking => {
                out.push(ServerAction::Send(vec![State::CreateStreams.byte()]));
                self.to(ServerStep::Streams, now_ns);
            }
            ServerEvent::Refused(r) if self.step == ServerStep::Checking => {
                self.refuse(&mut out, r);
            }
            ServerEvent::StreamsReady if self.step == ServerStep::Streams => {
                out.push(ServerAction::Send(vec![
                    State::TestStart.byte(),
                    State::TestRunning.byte(),
                ]));
                out.push(ServerAction::StartFlows);
                self.step = ServerStep::Running;
                self.deadline_ns = now_ns.saturating_add(self.test_limit_ns());
                // Bytes may have come with the streams (TEST_END of a
                // very short test).
                self.consume(now_ns, &mut out);
            }
            ServerEvent::FlowsStopped(r) if self.step == ServerStep::Stopping => {
                self.ours = Some(frame(&serde_json::to_vec(&r.to_json()).unwrap_or_default()));
                out.push(ServerAction::Send(vec![State::ExchangeResults.byte()]));
                self.to(ServerStep::ClientResults, now_ns);
                self.consume(now_ns, &mut out);
            }
            ServerEvent::Closed => {
                if self.step == ServerStep::AwaitDone {
                    self.step = ServerStep::Done;
                    out.push(ServerAction::Finish(ServerEnding::Complete));
                } else {
                    let why = format!(
                        "the client closed the control connection while {}",
                        self.step.during()
                    );
                    self.abort(&mut out, why);
                }
            }
            ServerEvent::Tick if now_ns >= self.deadline_ns => {
                if self.step == ServerStep::Running {
                    out.push(ServerAction::Send(vec![State::ServerTerminate.byte()]));
                }
                let why = format!("timed out while {}", self.step.during());
                self.abort(&mut out, why);
            }
            // Answers that do not belong to the current step are ignored.
            _ => {}
        }
        out
    }

    /// The time a running test may take before it is stopped.
    fn test_limit_ns(&self) -> u64 {
        let t = &self.timeouts;
        let by_time = self.params.as_ref().and_then(|p| {
            (p.num_bytes == 0 && p.blockcount == 0 && p.time_s > 0)
                .then(|| (u64::from(p.time_s) + u64::from(p.omit_s)) * 1_000_000_000)
        });
        by_time
            .unwrap_or(t.max_test_ns)
            .min(t.max_test_ns)
            .saturating_add(t.grace_ns)
    }

    fn consume(&mut self, now: u64, out: &mut Vec<ServerAction>) {
        loop {
            match self.step {
                ServerStep::Cookie => {
                    let Some(b) = self.inbox.take(COOKIE_LEN) else {
                        return;
                    };
                    let Some(c) = Cookie::parse(&b) else { return };
                    out.push(ServerAction::Cookie(c));
                    out.push(ServerAction::Send(vec![State::ParamExchange.byte()]));
                    self.to(ServerStep::Params, now);
                }
                ServerStep::Params => match self.inbox.json(MAX_PARAMS_BYTES) {
                    Ok(None) => return,
                    Ok(Some(body)) => match Params::parse(&body) {
                        Ok(p) => {
                            self.params = Some(p.clone());
                            out.push(ServerAction::Check(Box::new(p)));
                            self.to(ServerStep::Checking, now);
                        }
                        Err(r) => return self.refuse(out, r),
                    },
                    Err(e) => {
                        return self.refuse(
                            out,
                            Refusal {
                                code: errno::RECV_PARAMS,
                                reason: e.to_string(),
                            },
                        )
                    }
                },
                ServerStep::ClientResults => match self.inbox.json(MAX_RESULTS_BYTES) {
                    Ok(None) => return,
                    Ok(Some(body)) => match Results::parse(&body) {
                        Ok(r) => {
                            out.push(ServerAction::ClientResults(Box::new(r)));
                            out.push(ServerAction::Send(self.ours.take().unwrap_or_default()));
                            out.push(ServerAction::Send(vec![State::DisplayResults.byte()]));
                            self.to(ServerStep::AwaitDone, now);
                        }
                        Err(e) => return self.abort(out, WireError::from(e).to_string()),
                    },
                    Err(e) => return self.abort(out, e.to_string()),
                },
                ServerStep::Stopping | ServerStep::Done => return,
                step => {
                    let Some(b) = self.inbox.byte() else { return };
                    match (step, State::from_byte(b)) {
                        (ServerStep::Running, Some(State::TestEnd)) => {
                            out.push(ServerAction::StopFlows);
                            self.to(ServerStep::Stopping, now);
                        }
                        (ServerStep::AwaitDone, Some(State::IperfDone)) => {
                            self.step = ServerStep::Done;
                            out.push(ServerAction::Finish(ServerEnding::Complete));
                            return;
                        }
                        (_, Some(State::ClientTerminate)) => {
                            return self.abort(out, "the client terminated".into());
                        }
                        _ => {
                            let e = WireError::Unexpected {
                                byte: b,
                                during: step.during(),
                            };
                            return self.abort(out, e.to_string());
                        }
                    }
                }
            }
        }
    }
}

/// How a client session ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEnding {
    /// Results exchanged.
    Complete,
    /// ACCESS_DENIED: the server is busy (or does not know the cookie).
    Denied,
    /// SERVER_ERROR with iperf's error number and the server's errno.
    ServerError {
        /// iperf error number.
        code: i32,
        /// errno on the server.
        os_errno: i32,
    },
    /// SERVER_TERMINATE.
    ServerTerminated,
    /// Ended early for another reason.
    Aborted(String),
}

/// Inputs of a [`ClientSession`].
#[derive(Debug)]
pub enum ClientEvent<'a> {
    /// Bytes read from the control connection.
    Bytes(&'a [u8]),
    /// The byte or block target (`-n`, `-k`) is reached.
    TargetReached,
    /// This end's results, after [`ClientAction::CollectResults`].
    OwnResults(Box<Results>),
    /// The control connection closed.
    Closed,
    /// The user interrupted the test.
    Interrupt,
    /// Time passed.
    Tick,
}

/// Outputs of a [`ClientSession`].
#[derive(Debug, Clone, PartialEq)]
pub enum ClientAction {
    /// Write these bytes on the control connection.
    Send(Vec<u8>),
    /// Connect the streams (TCP: each starts with the cookie; UDP: the
    /// connect handshake).
    CreateStreams,
    /// The test runs: start the flows.
    StartFlows,
    /// The test time is up: stop sending.
    StopFlows,
    /// Stop every flow and answer [`ClientEvent::OwnResults`].
    CollectResults,
    /// The server's results.
    ServerResults(Box<Results>),
    /// The session is over.
    Finish(ClientEnding),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientStep {
    ParamExchange,
    CreateStreams,
    TestStart,
    TestRunning,
    Running,
    Ending,
    Collecting,
    ServerResults,
    Display,
    Done,
}

impl ClientStep {
    fn during(self) -> &'static str {
        match self {
            Self::ParamExchange => "waiting for PARAM_EXCHANGE",
            Self::CreateStreams => "waiting for CREATE_STREAMS",
            Self::TestStart => "waiting for TEST_START",
            Self::TestRunning => "waiting for TEST_RUNNING",
            Self::Running => "the test ran",
            Self::Ending => "waiting for EXCHANGE_RESULTS",
            Self::Collecting => "collecting this end's results",
            Self::ServerResults => "waiting for the server's results",
            Self::Display => "waiting for DISPLAY_RESULTS",
            Self::Done => "done",
        }
    }
}

/// The client's side of one iperf3 session.
#[derive(Debug)]
pub struct ClientSession {
    step: ClientStep,
    inbox: Inbox,
    timeouts: Timeouts,
    deadline_ns: u64,
    params_frame: Vec<u8>,
    test_ns: Option<u64>,
}

impl ClientSession {
    /// A session on a connected control connection at `now_ns`; returns
    /// the machine and the bytes to send first (the cookie).
    pub fn new(
        now_ns: u64,
        cookie: Cookie,
        params: &Params,
        timeouts: Timeouts,
    ) -> (Self, Vec<ClientAction>) {
        let body = serde_json::to_vec(&params.to_json()).unwrap_or_default();
        let by_time = params.num_bytes == 0 && params.blockcount == 0;
        let s = Self {
            step: ClientStep::ParamExchange,
            inbox: Inbox::default(),
            timeouts,
            deadline_ns: now_ns.saturating_add(timeouts.step_ns),
            params_frame: frame(&body),
            test_ns: by_time
                .then(|| (u64::from(params.time_s) + u64::from(params.omit_s)) * 1_000_000_000),
        };
        (s, vec![ClientAction::Send(cookie.as_bytes().to_vec())])
    }

    /// Whether the session is over.
    pub fn is_done(&self) -> bool {
        self.step == ClientStep::Done
    }

    /// Whether the test is running (flows started, TEST_END not sent).
    pub fn running(&self) -> bool {
        self.step == ClientStep::Running
    }

    fn to(&mut self, step: ClientStep, now: u64) {
        self.step = step;
        self.deadline_ns = now.saturating_add(self.timeouts.step_ns);
    }

    fn finish(&mut self, out: &mut Vec<ClientAction>, e: ClientEnding) {
        if matches!(
            self.step,
            ClientStep::Running | ClientStep::Ending | ClientStep::Collecting
        ) {
            out.push(ClientAction::StopFlows);
        }
        self.step = ClientStep::Done;
        out.push(ClientAction::Finish(e));
    }

    fn end_test(&mut self, now: u64, out: &mut Vec<ClientAction>) {
        out.push(ClientAction::StopFlows);
        out.push(ClientAction::Send(vec![State::TestEnd.byte()]));
        self.to(ClientStep::Ending, now);
    }

    /// Feeds one event at `now_ns`; returns what to do, in order.
    pub fn handle(&mut self, now_ns: u64, ev: ClientEvent<'_>) -> Vec<ClientAction> {
        let mut out = Vec::new();
        if self.step == ClientStep::Done {
            return out;
        }
        match ev {
            ClientEvent::Bytes(b) => {
                if let Err(e) = self.inbox.push(b) {
                    self.finish(&mut out, ClientEnding::Aborted(e.to_string()));
                    return out;
                }
                self.consume(now_ns, &mut out);
            }
            ClientEvent::TargetReached if self.step == ClientStep::Running => {
                self.end_test(now_ns, &mut out);
            }
            ClientEvent::OwnResults(r) if self.step == ClientStep::Collecting => {
                let body = serde_json::to_vec(&r.to_json()).unwrap_or_default();
                out.push(ClientAction::Send(frame(&body)));
                self.to(ClientStep::ServerResults, now_ns);
                self.consume(now_ns, &mut out);
            }
            ClientEvent::Closed => {
                let why = format!(
                    "the server closed the control connection while {}",
                    self.step.during()
                );
                self.finish(&mut out, ClientEnding::Aborted(why));
            }
            ClientEvent::Interrupt => {
                out.push(ClientAction::Send(vec![State::ClientTerminate.byte()]));
                self.finish(&mut out, ClientEnding::Aborted("interrupted".into()));
            }
            ClientEvent::Tick => {
                if self.step == ClientStep::Running && now_ns >= self.deadline_ns {
                    if self.test_ns.is_some() {
                        self.end_test(now_ns, &mut out);
                    } else {
                        self.finish(
                            &mut out,
                            ClientEnding::Aborted(
                                "the byte or block target was not reached in time".into(),
                            ),
                        );
                    }
                } else if now_ns >= self.deadline_ns {
                    let why = format!("timed out while {}", self.step.during());
                    self.finish(&mut out, ClientEnding::Aborted(why));
                }
            }
            _ => {}
        }
        out
    }

    fn consume(&mut self, now: u64, out: &mut Vec<ClientAction>) {
        loop {
            if self.step == ClientStep::Done || self.step == ClientStep::Collecting {
                return;
            }
            if self.step == ClientStep::ServerResults {
                match self.inbox.json(MAX_RESULTS_BYTES) {
                    Ok(None) => return,
                    Ok(Some(body)) => match Results::parse(&body) {
                        Ok(r) => {
                            out.push(ClientAction::ServerResults(Box::new(r)));
                            self.to(ClientStep::Display, now);
                            continue;
                        }
                        Err(e) => {
                            let e = WireError::from(e).to_string();
                            return self.finish(out, ClientEnding::Aborted(e));
                        }
                    },
                    Err(e) => return self.finish(out, ClientEnding::Aborted(e.to_string())),
                }
            }
            let Some(&b) = self.inbox.buf.first() else {
                return;
            };
            let state = State::from_byte(b);
            if state == Some(State::ServerError) {
                let Some(m) = self.inbox.take(9) else { return };
                let code = i32::from_be_bytes([m[1], m[2], m[3], m[4]]);
                let os_errno = i32::from_be_bytes([m[5], m[6], m[7], m[8]]);
                return self.finish(out, ClientEnding::ServerError { code, os_errno });
            }
            self.inbox.buf.remove(0);
            match (self.step, state) {
                (_, Some(State::AccessDenied)) => return self.finish(out, ClientEnding::Denied),
                (_, Some(State::ServerTerminate)) => {
                    return self.finish(out, ClientEnding::ServerTerminated)
                }
                (ClientStep::ParamExchange, Some(State::ParamExchange)) => {
                    out.push(ClientAction::Send(self.params_frame.clone()));
                    self.to(ClientStep::CreateStreams, now);
                }
                (ClientStep::CreateStreams, Some(State::CreateStreams)) => {
                    out.push(ClientAction::CreateStreams);
                    self.to(ClientStep::TestStart, now);
                }
                (ClientStep::TestStart, Some(State::TestStart)) => {
                    self.to(ClientStep::TestRunning, now);
                }
                (ClientStep::TestRunning, Some(State::TestRunning)) => {
                    out.push(ClientAction::StartFlows);
                    self.step = ClientStep::Running;
                    let limit = self.test_ns.unwrap_or(self.timeouts.max_test_ns);
                    self.deadline_ns = now.saturating_add(limit.min(self.timeouts.max_test_ns));
                }
                // A server may end the test itself (its own time limit).
                (ClientStep::Running | ClientStep::Ending, Some(State::ExchangeResults)) => {
                    if self.step == ClientStep::Running {
                        out.push(ClientAction::StopFlows);
                    }
                    out.push(ClientAction::CollectResults);
                    self.to(ClientStep::Collecting, now);
                }
                (ClientStep::Display, Some(State::DisplayResults)) => {
                    out.push(ClientAction::Send(vec![State::IperfDone.byte()]));
                    self.step = ClientStep::Done;
                    out.push(ClientAction::Finish(ClientEnding::Complete));
                    return;
                }
                _ => {
                    let e = WireError::Unexpected {
                        byte: b,
                        during: self.step.during(),
                    };
                    return self.finish(out, ClientEnding::Aborted(e.to_string()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::iperf3::results::StreamResult;

    fn sent(actions: &[ServerAction]) -> Vec<u8> {
        actions
            .iter()
            .filter_map(|a| match a {
                ServerAction::Send(b) => Some(b.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    fn csent(actions: &[ClientAction]) -> Vec<u8> {
        actions
            .iter()
            .filter_map(|a| match a {
                ClientAction::Send(b) => Some(b.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    fn results() -> Box<Results> {
        Box::new(Results {
            sender_has_retransmits: -1,
            streams: vec![StreamResult {
                id: 1,
                bytes: 10,
                ..StreamResult::default()
            }],
            ..Results::default()
        })
    }

    /// The two machines talk to each other through byte pipes: a whole
    /// session, one byte at a time.
    #[test]
    fn client_and_server_complete_a_session() {
        let params = Params {
            time_s: 1,
            parallel: 1,
            len: 1000,
            ..Params::default()
        };
        let cookie = Cookie::from_random([7; 36]);
        let (mut c, first) = ClientSession::new(0, cookie, &params, Timeouts::default());
        let mut s = ServerSession::new(0, Timeouts::default());
        let mut to_server = csent(&first);
        let mut to_client = Vec::new();
        let mut now = 0;
        let mut c_done = None;
        let mut s_done = None;
        for _ in 0..10_000 {
            now += 1_000_000;
            for b in std::mem::take(&mut to_server) {
                for a in s.handle(now, ServerEvent::Bytes(&[b])) {
                    match a {
                        ServerAction::Send(x) => to_client.extend(x),
                        ServerAction::Check(p) => {
                            assert_eq!(p.len, 1000);
                            let r = s.handle(now, ServerEvent::Accepted);
                            to_client.extend(sent(&r));
                        }
                        ServerAction::StopFlows => {
                            let r = s.handle(now, ServerEvent::FlowsStopped(results()));
                            to_client.extend(sent(&r));
                        }
                        ServerAction::Cookie(k) => assert_eq!(k, cookie),
                        ServerAction::Finish(e) => s_done = Some(e),
                        _ => {}
                    }
                }
            }
            let mut evs: Vec<Vec<u8>> = std::mem::take(&mut to_client)
                .into_iter()
                .map(|b| vec![b])
                .collect();
            evs.push(Vec::new());
            for b in evs {
                let ev = if b.is_empty() {
                    ClientEvent::Tick
                } else {
                    ClientEvent::Bytes(&b)
                };
                for a in c.handle(now, ev) {
                    match a {
                        ClientAction::Send(x) => to_server.extend(x),
                        ClientAction::CreateStreams => {
                            let r = s.handle(now, ServerEvent::StreamsReady);
                            to_client.extend(sent(&r));
                        }
                        ClientAction::CollectResults => {
                            let r = c.handle(now, ClientEvent::OwnResults(results()));
                            to_server.extend(csent(&r));
                        }
                        ClientAction::Finish(e) => c_done = Some(e),
                        _ => {}
                    }
                }
            }
            if c_done.is_some() && s_done.is_some() {
                break;
            }
        }
        assert_eq!(c_done, Some(ClientEnding::Complete));
        assert_eq!(s_done, Some(ServerEnding::Complete));
        // The client ended the test after time_s (1 s), not before.
        assert!(now >= 1_000_000_000);
    }

    #[test]
    fn refused_parameters_get_server_error() {
        let mut s = ServerSession::new(0, Timeouts::default());
        let mut wire = Cookie::from_random([1; 36]).0.to_vec();
        wire.extend(frame(br#"{"tcp":true,"parallel":500}"#));
        let a = s.handle(1, ServerEvent::Bytes(&wire));
        assert_eq!(
            sent(&a),
            [&[9u8][..], &server_error(errno::NUM_STREAMS, 0)].concat()
        );
        assert!(s.is_done());
    }

    #[test]
    fn oversize_parameters_are_refused_before_their_body() {
        let mut s = ServerSession::new(0, Timeouts::default());
        let mut wire = Cookie::from_random([1; 36]).0.to_vec();
        wire.extend(u32::MAX.to_be_bytes());
        let a = s.handle(1, ServerEvent::Bytes(&wire));
        assert!(matches!(
            a.last(),
            Some(ServerAction::Finish(ServerEnding::Refused(_)))
        ));
    }

    #[test]
    fn silent_and_vanished_clients_end_the_session() {
        let t = Timeouts::default();
        let mut s = ServerSession::new(0, t);
        assert!(s.handle(t.step_ns - 1, ServerEvent::Tick).is_empty());
        let a = s.handle(t.step_ns, ServerEvent::Tick);
        assert!(matches!(
            a.last(),
            Some(ServerAction::Finish(ServerEnding::Aborted(_)))
        ));

        let mut s = ServerSession::new(0, t);
        let mut wire = Cookie::from_random([1; 36]).0.to_vec();
        wire.extend(frame(br#"{"tcp":true,"time":1}"#));
        s.handle(0, ServerEvent::Bytes(&wire));
        s.handle(0, ServerEvent::Accepted);
        s.handle(0, ServerEvent::StreamsReady);
        let a = s.handle(5, ServerEvent::Closed);
        assert_eq!(a[0], ServerAction::StopFlows);
        assert!(s.is_done());
    }

    #[test]
    fn client_reads_denials_and_errors() {
        let p = Params::default();
        let c0 = Cookie::from_random([0; 36]);
        let (mut c, _) = ClientSession::new(0, c0, &p, Timeouts::default());
        let a = c.handle(1, ClientEvent::Bytes(&[0xff]));
        assert_eq!(a, vec![ClientAction::Finish(ClientEnding::Denied)]);
        let (mut c, _) = ClientSession::new(0, c0, &p, Timeouts::default());
        let e = server_error(142, 2);
        assert!(c.handle(1, ClientEvent::Bytes(&e[..5])).is_empty());
        let a = c.handle(1, ClientEvent::Bytes(&e[5..]));
        assert_eq!(
            a,
            vec![ClientAction::Finish(ClientEnding::ServerError {
                code: 142,
                os_errno: 2
            })]
        );
    }
}
