//! Tracing a kernel-answered echo's responder (ICMP echo on a bed) while a
//! latency run goes on: the stages its kernel spends (rx, processing, tx)
//! instead of leaving them inside "network".

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use std::os::unix::fs::MetadataExt as _;

use linerate_core::journey::{responder_stages, Point, ResponderAt, ResponderKernel, TRACEPOINTS};

use super::{Filters, JourneyError, Tracefs, Tracer};
use crate::netns;

/// The tracer running on a polling thread, and what it needs at the end.
#[derive(Debug)]
pub struct ResponderTrace {
    stop: Arc<AtomicBool>,
    poller: JoinHandle<Tracer>,
    device: String,
    netns: Option<u32>,
    ip_len: u32,
}

/// Starts tracing the responder in namespace `ns` whose address is `ip`,
/// for requests of IP length `ip_len`.
pub fn trace_responder(ns: &str, ip: IpAddr, ip_len: u32) -> Result<ResponderTrace, JourneyError> {
    let device = netns::spawn_in(Some(ns), "lr-responder-dev", move || {
        crate::sys::ifaddrs::interface_with_addr(ip)
    })?
    .join()
    .map_err(|_| JourneyError::Thread("responder device"))??
    .map_err(|source| JourneyError::Socket {
        what: "find the responder's interface",
        source,
    })?
    .ok_or(JourneyError::Thread("responder device"))?;
    // The namespace's inode: the tp_btf records carry it, and other beds
    // call their interfaces alike.
    let netns = std::fs::metadata(format!("/run/netns/{ns}"))
        .ok()
        .and_then(|m| u32::try_from(m.ino()).ok());
    let fs = Tracefs::find_or_mount().map_err(|source| JourneyError::Tracefs { source })?;
    let set: Vec<_> = TRACEPOINTS
        .into_iter()
        .filter(|t| {
            matches!(
                t.point,
                Point::NetifRx | Point::NetifReceiveSkb | Point::NetDevQueue | Point::NetDevXmit
            )
        })
        .collect();
    let mut tracer = Tracer::open(
        &fs,
        &set,
        Filters {
            len: (ip_len, ip_len + 14),
            dport: 0,
            all_events: false,
        },
    )?;
    tracer.enable()?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let poller = std::thread::spawn(move || {
        while !flag.load(Ordering::Relaxed) {
            tracer.poll();
            std::thread::sleep(Duration::from_millis(1));
        }
        tracer
    });
    Ok(ResponderTrace {
        stop,
        poller,
        device,
        netns,
        ip_len,
    })
}

impl ResponderTrace {
    /// Stops tracing (the events are closed) and returns the stages.
    pub fn finish(self) -> Option<ResponderKernel> {
        self.stop.store(true, Ordering::Relaxed);
        let mut tracer = self.poller.join().ok()?;
        tracer.disable().ok()?;
        let (events, _) = tracer.events();
        let recorded_by = if tracer.programs_opened.is_empty() {
            "perf raw samples: they carry no namespace, so another bed's interface of the same \
             name answering an echo of the same length at the same time would count"
        } else {
            "tp_btf programs, in the responder's namespace only"
        };
        drop(tracer);
        let at = ResponderAt {
            device: &self.device,
            netns: self.netns,
            recorded_by,
        };
        let r = responder_stages(&events, at, self.ip_len);
        (r.requests > 0).then_some(r)
    }
}
