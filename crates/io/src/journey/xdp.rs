//! An XDP program that returns one verdict for every frame, attached to an
//! interface of a namespace: linerate's beds attach no XDP program, so this
//! is how the journey's XDP detection and events are checked (a test
//! attaches one to a bed's interface; `XDP_ABORTED` makes the kernel fire
//! `xdp:xdp_exception` for every frame).

use std::os::fd::OwnedFd;

use super::JourneyError;
use crate::netns;
use crate::sys;

/// What the program returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// `XDP_ABORTED`: the frame is dropped and `xdp:xdp_exception` fires.
    Aborted,
    /// `XDP_PASS`: the frame goes on to the stack.
    Pass,
}

/// The attached program; dropping it detaches it.
#[derive(Debug)]
pub struct XdpVerdict {
    // Drop order: the link (detaches), then the program.
    _link: OwnedFd,
    _prog: OwnedFd,
}

impl XdpVerdict {
    /// Attaches the program to `iface` in namespace `netns` (native mode
    /// where the driver has it, veth included).
    pub fn attach(netns: &str, iface: &str, verdict: Verdict) -> Result<Self, JourneyError> {
        let iface = iface.to_string();
        let code = match verdict {
            Verdict::Aborted => 0,
            Verdict::Pass => 2,
        };
        let r = netns::spawn_in(Some(netns), "lr-xdp-attach", move || {
            let ifindex = sys::packet::ifindex(&iface).map_err(|source| JourneyError::Socket {
                what: "find the interface for the XDP program",
                source,
            })?;
            let bpf = |source: sys::bpf::BpfError| JourneyError::Socket {
                what: "attach the XDP program",
                source: std::io::Error::other(linerate_core::error::chain(&source)),
            };
            let prog = sys::xdp_count::verdict_program(code).map_err(bpf)?;
            let link = sys::xdp_count::link_xdp(&prog, ifindex).map_err(bpf)?;
            Ok(Self {
                _link: link,
                _prog: prog,
            })
        })?
        .join()
        .map_err(|_| JourneyError::Thread("XDP attach"))?;
        r?
    }
}
