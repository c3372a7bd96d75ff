//! The control logic of a running throughput session, as a state machine:
//! the I/O layer feeds it events (flows finished, control messages, ticks)
//! with the time, and executes the actions it returns. Both ends use it;
//! only the server sends a report, only the client waits for one.
//!
//! Sequence: each end's senders stop at the test time → it tells the peer
//! (`SendDone`, with what it sent) → the peer lets its receivers drain →
//! when every flow of an end has finished and both ends' senders are done,
//! the server sends its report and the client, once it has it, ends.
//! Anything else (peer gone, peer error, interrupt, time limit) ends the
//! session at once, marked incomplete, with the reason in the notes.

use crate::throughput::model::End;

/// Something that happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Time passed (the I/O loop's poll period).
    Tick,
    /// Every sending flow of this end has ended.
    OwnSendersFinished,
    /// Every flow of this end has ended.
    AllFlowsFinished,
    /// The peer's senders stopped (its `SendDone` arrived).
    PeerSendDone,
    /// The server's report arrived (client only).
    PeerReport,
    /// The peer reported an error.
    PeerError(String),
    /// A control message that does not belong here.
    Unexpected(&'static str),
    /// The control connection failed or closed.
    ControlLost(String),
    /// The user (or the server's owner) stopped the test.
    Interrupted,
}

/// What the I/O layer must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Tell the peer this end's senders stopped (with their counts).
    SendSendDone,
    /// Let this end's receivers end after a quiet period.
    DrainReceivers,
    /// Send this end's report (server).
    SendReport,
    /// Tell the peer the session is being abandoned, and why.
    SendError(String),
    /// Stop every flow now.
    StopFlows,
    /// The session is over.
    Done,
}

/// The session's control state.
#[derive(Debug, Clone)]
pub struct SessionMachine {
    end: End,
    start_ns: u64,
    limit_ns: u64,
    sent_done: bool,
    peer_done: bool,
    all_finished: bool,
    peer_report: bool,
    done: bool,
    complete: bool,
    notes: Vec<String>,
}

impl SessionMachine {
    /// A session of `end` started at `now_ns`, abandoned after `limit_ns`.
    pub fn new(end: End, now_ns: u64, limit_ns: u64) -> Self {
        Self {
            end,
            start_ns: now_ns,
            limit_ns,
            sent_done: false,
            peer_done: false,
            all_finished: false,
            peer_report: false,
            done: false,
            complete: true,
            notes: Vec::new(),
        }
    }

    /// Whether the session is over.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// False when it ended early.
    pub fn complete(&self) -> bool {
        self.complete
    }

    /// Why it ended early, and other remarks.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Adds a remark (e.g. an action that failed).
    pub fn note(&mut self, n: String) {
        self.notes.push(n);
    }

    /// When the session will be abandoned, ns on the caller's clock.
    pub fn deadline_ns(&self) -> u64 {
        self.start_ns.saturating_add(self.limit_ns)
    }

    fn abort(&mut self, note: String, tell_peer: Option<String>) -> Vec<Action> {
        self.notes.push(note);
        self.complete = false;
        self.done = true;
        let mut a = Vec::new();
        if let Some(r) = tell_peer {
            a.push(Action::SendError(r));
        }
        a.push(Action::StopFlows);
        a.push(Action::Done);
        a
    }

    /// Feeds one event at `now_ns`; returns what to do.
    pub fn handle(&mut self, now_ns: u64, ev: Event) -> Vec<Action> {
        if self.done {
            return Vec::new();
        }
        let mut out = Vec::new();
        match ev {
            Event::Tick => {
                if now_ns >= self.deadline_ns() {
                    return self.abort(
                        format!(
                            "the session exceeded its limit of {:.1} s and was stopped",
                            self.limit_ns as f64 / 1e9
                        ),
                        None,
                    );
                }
            }
            Event::OwnSendersFinished => {
                if !self.sent_done {
                    self.sent_done = true;
                    out.push(Action::SendSendDone);
                }
            }
            Event::AllFlowsFinished => {
                self.all_finished = true;
                if !self.sent_done {
                    self.sent_done = true;
                    out.push(Action::SendSendDone);
                }
            }
            Event::PeerSendDone => {
                if !self.peer_done {
                    self.peer_done = true;
                    out.push(Action::DrainReceivers);
                }
            }
            Event::PeerReport => {
                if self.end == End::Client {
                    self.peer_report = true;
                } else {
                    return self.abort(
                        "unexpected control message 'report' during the test".into(),
                        None,
                    );
                }
            }
            Event::PeerError(r) => {
                return self.abort(format!("the peer reported an error: {r}"), None);
            }
            Event::Unexpected(name) => {
                return self.abort(
                    format!("unexpected control message '{name}' during the test"),
                    None,
                );
            }
            Event::ControlLost(e) => {
                return self.abort(format!("{e}; the test ended early"), None);
            }
            Event::Interrupted => {
                let who = match self.end {
                    End::Client => "client",
                    End::Server => "server",
                };
                return self.abort(
                    "interrupted: the test was stopped before its end".into(),
                    Some(format!("the {who} was interrupted")),
                );
            }
        }
        if self.all_finished && self.sent_done && self.peer_done {
            match self.end {
                End::Server => {
                    out.push(Action::SendReport);
                    out.push(Action::Done);
                    self.done = true;
                }
                End::Client if self.peer_report => {
                    out.push(Action::Done);
                    self.done = true;
                }
                End::Client => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn server_reports_when_both_ends_are_done() {
        let mut m = SessionMachine::new(End::Server, 0, 20 * S);
        assert_eq!(m.handle(S, Event::Tick), vec![]);
        assert_eq!(
            m.handle(10 * S, Event::OwnSendersFinished),
            vec![Action::SendSendDone]
        );
        assert_eq!(m.handle(10 * S, Event::OwnSendersFinished), vec![]);
        assert_eq!(
            m.handle(10 * S, Event::PeerSendDone),
            vec![Action::DrainReceivers]
        );
        assert_eq!(
            m.handle(10 * S, Event::AllFlowsFinished),
            vec![Action::SendReport, Action::Done]
        );
        assert!(m.is_done() && m.complete());
        assert_eq!(m.handle(11 * S, Event::Tick), vec![]);
    }

    #[test]
    fn client_waits_for_the_report() {
        let mut m = SessionMachine::new(End::Client, 0, 20 * S);
        // Reverse test: no senders, so all flows finishing means SendDone too.
        m.handle(S, Event::PeerSendDone);
        assert_eq!(
            m.handle(S, Event::AllFlowsFinished),
            vec![Action::SendSendDone]
        );
        assert!(!m.is_done());
        assert_eq!(m.handle(S, Event::PeerReport), vec![Action::Done]);
        assert!(m.complete());
    }

    #[test]
    fn a_lost_peer_ends_incomplete() {
        let mut m = SessionMachine::new(End::Client, 0, 20 * S);
        m.handle(S, Event::OwnSendersFinished);
        let a = m.handle(
            S,
            Event::ControlLost("the peer closed the control connection".into()),
        );
        assert_eq!(a, vec![Action::StopFlows, Action::Done]);
        assert!(!m.complete());
        assert!(m.notes()[0].contains("closed"));
    }

    #[test]
    fn the_time_limit_and_interrupts_end_the_session() {
        let mut m = SessionMachine::new(End::Server, 5 * S, 3 * S);
        assert_eq!(m.handle(7 * S, Event::Tick), vec![]);
        assert_eq!(
            m.handle(8 * S, Event::Tick),
            vec![Action::StopFlows, Action::Done]
        );
        assert!(m.notes()[0].contains("limit"));
        let mut m = SessionMachine::new(End::Client, 0, 3 * S);
        let a = m.handle(S, Event::Interrupted);
        assert_eq!(
            a,
            vec![
                Action::SendError("the client was interrupted".into()),
                Action::StopFlows,
                Action::Done
            ]
        );
        let mut m = SessionMachine::new(End::Server, 0, 3 * S);
        assert!(!m.handle(S, Event::PeerReport).is_empty());
        assert!(!m.complete());
    }
}
