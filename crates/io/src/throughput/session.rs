//! Running the flows of a session and speaking the control protocol while
//! they run: shared by the server and the client.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher as _, Hasher as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linerate_core::throughput::model::{End, FlowReport, FlowRole, SideReport};
use linerate_core::wire::control::{FlowSent, Message};

use super::control::{Control, CtrlError};
use super::flow::{self, FlowJob, FlowShared};

/// A random 64-bit value (SipHash with the process's random keys): session
/// ids and cookies. Not cryptographic: the control protocol has no
/// authentication yet.
pub(crate) fn random_u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(crate::sys::sock::monotonic_ns());
    h.finish()
}

/// A flow thread and its live state.
#[derive(Debug)]
pub(crate) struct RunningFlow {
    pub(crate) flow: u16,
    pub(crate) role: FlowRole,
    pub(crate) shared: Arc<FlowShared>,
    handle: Option<JoinHandle<FlowReport>>,
    report: Option<FlowReport>,
}

/// Spawns one thread per job.
pub(crate) fn spawn(jobs: Vec<FlowJob>) -> Result<Vec<RunningFlow>, std::io::Error> {
    let mut out = Vec::new();
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
        });
    }
    Ok(out)
}

impl RunningFlow {
    fn finished(&self) -> bool {
        self.report.is_some() || self.handle.as_ref().map_or(true, JoinHandle::is_finished)
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

/// Drives the running flows to their end over the control connection.
/// `end` says which side this is: the server sends its report when done,
/// the client waits for the server's report.
pub(crate) fn drive(
    ctrl: &mut Control,
    mut flows: Vec<RunningFlow>,
    end: End,
    limit: Duration,
    mut progress: Option<Progress<'_>>,
    interrupt: &AtomicBool,
) -> Outcome {
    let start = Instant::now();
    let mut notes = Vec::new();
    let mut complete = true;
    let mut sent_done = false;
    let mut peer_done = false;
    let mut peer_report = None;
    let mut report_sent = false;
    let mut last_progress = Instant::now();
    loop {
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
                p(start.elapsed().as_secs_f64(), tx, rx);
            }
        }
        if !sent_done
            && flows
                .iter()
                .filter(|f| f.role == FlowRole::Sender)
                .all(RunningFlow::finished)
        {
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
            sent_done = true;
            if let Err(e) = ctrl.send(&Message::SendDone { flows: sent }) {
                notes.push(format!("could not tell the peer that sending ended: {e}"));
                complete = false;
                break;
            }
        }
        let all_done = flows.iter().all(RunningFlow::finished);
        if all_done && sent_done && peer_done {
            match end {
                End::Server if !report_sent => {
                    for f in &mut flows {
                        f.join();
                    }
                    let side = side_report(end, &flows, complete, notes.clone());
                    if let Err(e) = ctrl.send(&Message::Report { side }) {
                        notes.push(format!("could not send the server's report: {e}"));
                    }
                    report_sent = true;
                    break;
                }
                End::Client if peer_report.is_some() => break,
                _ => {}
            }
        }
        if interrupt.load(Ordering::Relaxed) {
            notes.push("interrupted: the test was stopped before its end".to_string());
            complete = false;
            let _ = ctrl.send(&Message::Error {
                reason: format!(
                    "the {} was interrupted",
                    if end == End::Client {
                        "client"
                    } else {
                        "server"
                    }
                ),
            });
            break;
        }
        if start.elapsed() > limit {
            notes.push(format!(
                "the session exceeded its limit of {:.1} s and was stopped",
                limit.as_secs_f64()
            ));
            complete = false;
            break;
        }
        match ctrl.recv(Duration::from_millis(100)) {
            Ok(Message::SendDone { flows: sent }) => {
                peer_done = true;
                for s in sent {
                    for f in flows
                        .iter()
                        .filter(|f| f.flow == s.flow && f.role == FlowRole::Receiver)
                    {
                        f.shared.peer_sent.store(s.packets, Ordering::Relaxed);
                    }
                }
                for f in flows.iter().filter(|f| f.role == FlowRole::Receiver) {
                    f.shared.drain.store(true, Ordering::Relaxed);
                }
            }
            Ok(Message::Report { side }) if end == End::Client => peer_report = Some(side),
            Ok(Message::Error { reason }) => {
                notes.push(format!("the peer reported an error: {reason}"));
                complete = false;
                break;
            }
            Ok(other) => {
                notes.push(format!(
                    "unexpected control message '{}' during the test",
                    other.name()
                ));
                complete = false;
                break;
            }
            Err(CtrlError::Timeout(_)) => {}
            Err(e) => {
                notes.push(format!("{e}; the test ended early"));
                complete = false;
                break;
            }
        }
    }
    for f in &flows {
        if !complete {
            f.shared.stop.store(true, Ordering::Relaxed);
        }
        f.shared.drain.store(true, Ordering::Relaxed);
    }
    // Receivers end after a quiet poll period; give them a bounded time.
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
    if end == End::Server && !report_sent && complete {
        let side = side_report(end, &flows, complete, notes.clone());
        let _ = ctrl.send(&Message::Report { side });
    }
    Outcome {
        side: side_report(end, &flows, complete, notes),
        peer: peer_report,
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
    SideReport {
        end,
        complete,
        notes,
        flows: reports,
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
