//! Running the flows of a session and speaking the control protocol while
//! they run: shared by the server and the client.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linerate_core::throughput::model::{Egress, End, FlowReport, FlowRole, SideReport};
use linerate_core::throughput::session::{Action, Event, SessionMachine};
use linerate_core::wire::control::{FlowSent, Message};

use super::control::{Control, CtrlError};
use super::flow::{self, FlowJob, FlowShared};
use super::net;

/// A flow thread and its live state.
#[derive(Debug)]
pub(crate) struct RunningFlow {
    pub(crate) flow: u16,
    pub(crate) role: FlowRole,
    pub(crate) shared: Arc<FlowShared>,
    handle: Option<JoinHandle<FlowReport>>,
    report: Option<FlowReport>,
    /// The egress interface and its tx_packets before the flows started
    /// (on the first sending flow only).
    egress0: Option<(String, u64)>,
}

/// Spawns one thread per job, after reading the tx_packets counter of the
/// interface the first sender's packets leave by.
pub(crate) fn spawn(jobs: Vec<FlowJob>) -> Result<Vec<RunningFlow>, std::io::Error> {
    let mut out = Vec::new();
    let mut egress0 = jobs
        .iter()
        .find(|j| j.role == FlowRole::Sender)
        .and_then(|j| j.sock.egress_interface())
        .and_then(|i| net::tx_packets(&i).ok().map(|n| (i, n)));
    for job in jobs {
        let flow = job.flow;
        let role = job.role;
        let shared = Arc::clone(&job.shared);
        let name = format!(
            "lr-{}{flow}",
            if role == FlowRole::Sender { "tx" } else { "rx" }
        );
        let handle = std::thread::Builder::new()
            .name(name)
            .spawn(move || flow::run(job))?;
        out.push(RunningFlow {
            flow,
            role,
            shared,
            handle: Some(handle),
            report: None,
            egress0: if role == FlowRole::Sender {
                egress0.take()
            } else {
                None
            },
        });
    }
    Ok(out)
}

impl RunningFlow {
    fn finished(&self) -> bool {
        self.report.is_some() || self.handle.as_ref().is_none_or(JoinHandle::is_finished)
    }

    fn join(&mut self) {
        if let Some(h) = self.handle.take() {
            self.report = h.join().ok();
        }
    }
}

/// What happened while a session ran.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) side: SideReport,
    pub(crate) peer: Option<SideReport>,
}

/// Live totals for a progress display: (seconds since start, bytes sent,
/// bytes received) by this end.
pub type Progress<'a> = &'a mut dyn FnMut(f64, u64, u64);

/// Called once this end's flows are joined, right before it sends its
/// report: a server frees the session's slot there, so a client that runs
/// its next test as soon as it has the report is never refused as busy.
pub(crate) type BeforeReport<'a> = &'a mut dyn FnMut();

/// Drives the running flows to their end over the control connection: the
/// I/O half of `linerate_core::throughput::session::SessionMachine`, which
/// decides; this loop only observes flows and the control connection and
/// carries out the machine's actions.
pub(crate) fn drive(
    ctrl: &mut Control,
    mut flows: Vec<RunningFlow>,
    end: End,
    limit: Duration,
    mut progress: Option<Progress<'_>>,
    mut before_report: Option<BeforeReport<'_>>,
    interrupt: &AtomicBool,
) -> Outcome {
    let clock = Instant::now();
    let now = || u64::try_from(clock.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let limit_ns = u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX);
    let mut m = SessionMachine::new(end, now(), limit_ns);
    let mut peer_report = None;
    let mut last_progress = Instant::now();
    while !m.is_done() {
        if let Some(p) = progress.as_mut() {
            if last_progress.elapsed() >= Duration::from_millis(200) {
                last_progress = Instant::now();
                let (mut tx, mut rx) = (0, 0);
                for f in &flows {
                    let b = f.shared.bytes.load(Ordering::Relaxed);
                    match f.role {
                        FlowRole::Sender => tx += b,
                        FlowRole::Receiver => rx += b,
                    }
                }
                p(clock.elapsed().as_secs_f64(), tx, rx);
            }
        }
        let mut events = vec![Event::Tick];
        if interrupt.load(Ordering::Relaxed) {
            events.push(Event::Interrupted);
        }
        if flows
            .iter()
            .filter(|f| f.role == FlowRole::Sender)
            .all(RunningFlow::finished)
        {
            events.push(Event::OwnSendersFinished);
        }
        if flows.iter().all(RunningFlow::finished) {
            events.push(Event::AllFlowsFinished);
        }
        for ev in events {
            let actions = m.handle(now(), ev);
            act(ctrl, &mut flows, &mut m, end, actions, &mut before_report);
        }
        if m.is_done() {
            break;
        }
        let ev = match ctrl.recv(Duration::from_millis(100)) {
            Ok(Message::SendDone { flows: sent }) => {
                for s in sent {
                    for f in flows
                        .iter()
                        .filter(|f| f.flow == s.flow && f.role == FlowRole::Receiver)
                    {
                        f.shared.peer_sent.store(s.packets, Ordering::Relaxed);
                    }
                }
                Event::PeerSendDone
            }
            Ok(Message::Report { side }) => {
                peer_report = Some(side);
                Event::PeerReport
            }
            Ok(Message::Error { reason }) => Event::PeerError(reason),
            Ok(other) => Event::Unexpected(other.name()),
            Err(CtrlError::Timeout(_)) => continue,
            Err(e) => Event::ControlLost(e.to_string()),
        };
        let actions = m.handle(now(), ev);
        act(ctrl, &mut flows, &mut m, end, actions, &mut before_report);
    }
    // Receivers end after a quiet poll period; give them a bounded time.
    for f in &flows {
        f.shared.drain.store(true, Ordering::Relaxed);
    }
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until && !flows.iter().all(RunningFlow::finished) {
        std::thread::sleep(Duration::from_millis(10));
    }
    for f in &flows {
        f.shared.stop.store(true, Ordering::Relaxed);
    }
    for f in &mut flows {
        f.join();
    }
    Outcome {
        side: side_report(end, &flows, m.complete(), m.notes().to_vec()),
        peer: peer_report,
    }
}

/// Carries out the machine's actions.
fn act(
    ctrl: &mut Control,
    flows: &mut [RunningFlow],
    m: &mut SessionMachine,
    end: End,
    actions: Vec<Action>,
    before_report: &mut Option<BeforeReport<'_>>,
) {
    for a in actions {
        match a {
            Action::SendSendDone => {
                let mut sent = Vec::new();
                for f in flows.iter_mut().filter(|f| f.role == FlowRole::Sender) {
                    f.join();
                    if let Some(r) = &f.report {
                        sent.push(FlowSent {
                            flow: f.flow,
                            packets: r.packets,
                            bytes: r.bytes,
                        });
                    }
                }
                if let Err(e) = ctrl.send(&Message::SendDone { flows: sent }) {
                    // The machine ends the session (StopFlows, Done); the
                    // flows are stopped right here.
                    let _ = m.handle(
                        0,
                        Event::ControlLost(format!(
                            "could not tell the peer that sending ended: {e}"
                        )),
                    );
                    for f in flows.iter() {
                        f.shared.stop.store(true, Ordering::Relaxed);
                    }
                }
            }
            Action::DrainReceivers => {
                for f in flows.iter().filter(|f| f.role == FlowRole::Receiver) {
                    f.shared.drain.store(true, Ordering::Relaxed);
                }
            }
            Action::SendReport => {
                for f in flows.iter_mut() {
                    f.join();
                }
                let side = side_report(end, flows, m.complete(), m.notes().to_vec());
                if let Some(f) = before_report.take() {
                    f();
                }
                if let Err(e) = ctrl.send(&Message::Report { side }) {
                    m.note(format!("could not send the server's report: {e}"));
                }
            }
            Action::SendError(reason) => {
                let _ = ctrl.send(&Message::Error { reason });
            }
            Action::StopFlows => {
                for f in flows.iter() {
                    f.shared.stop.store(true, Ordering::Relaxed);
                }
            }
            Action::Done => {}
        }
    }
}

fn side_report(end: End, flows: &[RunningFlow], complete: bool, notes: Vec<String>) -> SideReport {
    let mut complete = complete;
    let mut notes = notes;
    let mut reports = Vec::new();
    for f in flows {
        match &f.report {
            Some(r) => {
                if let Some(e) = &r.error {
                    complete = false;
                    notes.push(format!("flow {}: {e}", r.flow));
                }
                reports.push(r.clone());
            }
            None => {
                complete = false;
                notes.push(format!("flow {} did not report (thread failed)", f.flow));
            }
        }
    }
    let egress = flows
        .iter()
        .find_map(|f| f.egress0.as_ref())
        .and_then(|(i, n0)| {
            Some(Egress {
                interface: i.clone(),
                packets: net::tx_packets(i).ok()?.saturating_sub(*n0),
            })
        });
    SideReport {
        end,
        complete,
        notes,
        flows: reports,
        egress,
    }
}

/// Waits for every flow (discard mode: no control connection).
pub(crate) fn join_all(
    mut flows: Vec<RunningFlow>,
    mut progress: Option<Progress<'_>>,
    interrupt: &AtomicBool,
) -> SideReport {
    let start = Instant::now();
    let mut interrupted = false;
    while !flows.iter().all(RunningFlow::finished) {
        if !interrupted && interrupt.load(Ordering::Relaxed) {
            interrupted = true;
            for f in &flows {
                f.shared.stop.store(true, Ordering::Relaxed);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
        if let Some(p) = progress.as_mut() {
            let tx = flows
                .iter()
                .map(|f| f.shared.bytes.load(Ordering::Relaxed))
                .sum();
            p(start.elapsed().as_secs_f64(), tx, 0);
        }
    }
    for f in &mut flows {
        f.join();
    }
    let notes = if interrupted {
        vec!["interrupted: the test was stopped before its end".to_string()]
    } else {
        Vec::new()
    };
    side_report(End::Client, &flows, !interrupted, notes)
}
