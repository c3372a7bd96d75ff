//! Tracing a kernel-answered echo's responder (ICMP echo on a bed) while a
//! latency run goes on: the stages its kernel spends (rx, processing, tx)
//! instead of leaving them inside "network".

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use linerate_core::journey::{responder_stages, Point, ResponderKernel, TRACEPOINTS};

use super::{Filters, JourneyError, Tracefs, Tracer};
use crate::netns;

/// The tracer running on a polling thread, and what it needs at the end.
#[derive(Debug)]
pub struct ResponderTrace {
    stop: Arc<AtomicBool>,
    poller: JoinHandle<Tracer>,
    device: String,
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
        drop(tracer);
        let r = responder_stages(&events, &self.device, self.ip_len);
        (r.requests > 0).then_some(r)
    }
}
