//! One frame through each raw-frame send path (AF_PACKET `sendmmsg`, the
//! AF_PACKET TX ring, AF_XDP in copy mode, XDP live frames), sent as fast
//! as the path takes them by the RFC 2544 generator
//! ([`crate::packet::FrameGenerator`]) on one end of a veth pair. The frames
//! carry a destination MAC that is not the peer's, so the peer drops them
//! on arrival; the time per frame is the sender's (plus veth's hand-over).

use std::net::Ipv4Addr;
use std::time::Duration;

use linerate_core::ceilings::{Config, Part, Sample, Skipped};
use linerate_core::wire::testframe::TestFrameRepr;

use crate::netns::spawn_in;
use crate::packet::{FrameGenerator, Generator};

/// Where the raw paths send from: an interface (one end of a veth pair)
/// and its namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawTarget {
    /// The namespace (None: this process's).
    pub netns: Option<String>,
    /// The interface.
    pub iface: String,
}

/// A repeat that takes longer than this is cut short (and scaled).
const MAX_REPEAT: Duration = Duration::from_secs(5);
/// A locally administered unicast address no interface has.
const NOBODY_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

/// The raw send paths, each at every packet frame size; a path that cannot
/// open or send here is skipped with the reason.
pub(super) fn send(cfg: &Config, target: &RawTarget) -> (Vec<Sample>, Vec<Skipped>) {
    let (cfg2, t2) = (cfg.clone(), target.clone());
    let run = spawn_in(target.netns.as_deref(), "lr-ceil-raw", move || {
        send_here(&cfg2, &t2)
    });
    match run.map(|h| h.join()) {
        Ok(Ok(Ok(done))) => done,
        Ok(Ok(Err(e))) => skip_all(&format!("cannot enter the namespace: {e}")),
        Ok(Err(_)) => skip_all("the sending thread panicked"),
        Err(e) => skip_all(&format!("cannot start the sending thread: {e}")),
    }
}

/// Every raw send path skipped for one reason.
pub(super) fn skip_all(reason: &str) -> (Vec<Sample>, Vec<Skipped>) {
    let skips = PATHS
        .iter()
        .map(|&(_, name)| Skipped {
            part: Part::Send,
            method: name.to_string(),
            reason: reason.to_string(),
        })
        .collect();
    (Vec::new(), skips)
}

const PATHS: [(Generator, &str); 4] = [
    (Generator::Sendmmsg, "AF_PACKET sendmmsg"),
    (Generator::TxRing, "AF_PACKET TX ring"),
    (Generator::AfXdp, "AF_XDP (copy mode)"),
    (Generator::XdpLive, "XDP live frames"),
];

fn send_here(cfg: &Config, target: &RawTarget) -> (Vec<Sample>, Vec<Skipped>) {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let mut skip = |method: &str, reason: String| {
        skipped.push(Skipped {
            part: Part::Send,
            method: method.to_string(),
            reason,
        });
    };
    for (path, name) in PATHS {
        let mut generator = match FrameGenerator::open(&target.iface, false, path) {
            Ok(g) => g,
            Err(e) => {
                skip(name, error_chain(&e));
                continue;
            }
        };
        for &frame in &cfg.packet_frames {
            let template = match TestFrameRepr::for_frame_size(
                frame,
                false,
                generator.mac(),
                NOBODY_MAC,
                Ipv4Addr::new(198, 18, 0, 1).into(),
                Ipv4Addr::new(198, 19, 255, 2).into(),
            ) {
                Ok(t) => t,
                Err(e) => {
                    skip(name, format!("{frame}-byte frame: {e}"));
                    continue;
                }
            };
            let want = cfg.packets_per_repeat;
            let mut repeat = |stream: u16| {
                let rep = generator.run(&template, stream, want, None, MAX_REPEAT);
                // A short repeat (time limit, refusals) is scaled to the
                // frames asked: the time per frame is what counts.
                (rep.sent_frames > 0).then(|| {
                    (rep.elapsed.as_nanos() as f64 * want as f64 / rep.sent_frames as f64) as u64
                })
            };
            let mut stream = 1u16;
            let mut times = Vec::new();
            for i in 0..cfg.warmups + cfg.repeats {
                let t = repeat(stream);
                stream = stream.wrapping_add(1).max(1);
                if i >= cfg.warmups || t.is_none() {
                    times.push(t);
                }
                if t.is_none() {
                    break;
                }
            }
            match times.into_iter().collect::<Option<Vec<u64>>>() {
                Some(repeat_ns) => out.push(Sample {
                    part: Part::Send,
                    method: name.to_string(),
                    cache: None,
                    bytes_per_op: u64::from(frame),
                    frame_bytes: Some(frame),
                    ops_per_repeat: want,
                    repeat_ns,
                    energy: None,
                }),
                None => skip(
                    name,
                    format!("{frame}-byte frames: the device took none in {MAX_REPEAT:?}"),
                ),
            }
        }
    }
    (out, skipped)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
