//! One frame through each raw-frame send path (AF_PACKET `sendmmsg`, the
//! AF_PACKET TX ring, AF_XDP in copy mode, XDP live frames), sent as fast
//! as the path takes them by the RFC 2544 generator
//! ([`crate::packet::FrameGenerator`]) on one end of a veth pair. The frames
//! carry a destination MAC that is not the peer's, so the peer's stack drops
//! them on arrival; the time per frame is the sender's (plus veth's
//! hand-over). And the AF_PACKET receive path of the RFC 2544 receiver
//! ([`crate::packet::Receiver`], `recvmmsg` batches, each frame parsed and
//! counted) on the peer: each round queues frames there (untimed), then
//! times draining them. And the XDP receive counter's program, run by the
//! kernel on a test frame (`BPF_PROG_TEST_RUN`): its own time per frame.

use std::net::Ipv4Addr;
use std::time::Duration;

use linerate_core::ceilings::{Config, Part, Sample, Skipped};
use linerate_core::wire::testframe::TestFrameRepr;

use std::sync::mpsc;

use crate::netns::{spawn_in, NetnsError};
use crate::packet::{FrameGenerator, Generator, Receiver, RxCounter};
use crate::sys::clock::monotonic_ns;

/// One end of a veth pair: an interface and its namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawTarget {
    /// The namespace (None: this process's).
    pub netns: Option<String>,
    /// The interface.
    pub iface: String,
}

/// The two ends of a veth pair the raw paths run on: frames go from `tx`
/// to `rx`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawPair {
    /// The sending end.
    pub tx: RawTarget,
    /// The receiving end.
    pub rx: RawTarget,
}

/// Frames queued per receive round (the receiver's 32 MiB buffer holds
/// them many times over).
const RX_ROUND: u64 = 1024;
/// Time for a round's frames to reach the receiving socket before the
/// drain is timed (veth hands them over in a softirq, maybe on another CPU).
const RX_SETTLE: Duration = Duration::from_millis(2);

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
    joined(Part::Send, run)
}

/// What a part's raw paths produced: samples, and what was skipped.
type Outcome = (Vec<Sample>, Vec<Skipped>);
/// A thread started in a namespace, producing an [`Outcome`].
type Spawned = Result<std::thread::JoinHandle<Result<Outcome, NetnsError>>, NetnsError>;

/// The outcome of a thread run in a namespace; its failures skip `part`.
fn joined(part: Part, run: Spawned) -> Outcome {
    match run.map(|h| h.join()) {
        Ok(Ok(Ok(done))) => done,
        Ok(Ok(Err(e))) => skip_all(part, &format!("cannot enter the namespace: {e}")),
        Ok(Err(_)) => skip_all(part, "a benchmark thread panicked"),
        Err(e) => skip_all(part, &format!("cannot start a benchmark thread: {e}")),
    }
}

/// A request to the receiving thread: drain this many frames, reply with
/// the time it took (CLOCK_MONOTONIC) and how many came.
type Drain = (u64, mpsc::Sender<Result<(u64, u64), String>>);

/// The AF_PACKET receive path at every packet frame size: frames from the
/// generator on `pair.tx`, drained by the receiver on `pair.rx`.
pub(super) fn receive(cfg: &Config, pair: &RawPair) -> (Vec<Sample>, Vec<Skipped>) {
    let (drain_tx, drain_rx) = mpsc::channel::<Drain>();
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let iface = pair.rx.iface.clone();
    let receiver = spawn_in(pair.rx.netns.as_deref(), "lr-ceil-rx", move || {
        let mut r = match Receiver::open(&iface, Duration::from_millis(200)) {
            Ok(r) => r,
            Err(e) => {
                let _ = ready_tx.send(Err(error_chain(&e)));
                return;
            }
        };
        let _ = ready_tx.send(Ok(()));
        for (want, reply) in drain_rx {
            let t0 = monotonic_ns();
            let mut got = 0;
            let outcome = loop {
                if got >= want {
                    break Ok((monotonic_ns().saturating_sub(t0), got));
                }
                match r.poll() {
                    Ok(0) => break Ok((monotonic_ns().saturating_sub(t0), got)),
                    Ok(n) => got += n as u64,
                    Err(e) => break Err(e.to_string()),
                }
            };
            let _ = reply.send(outcome);
        }
    });
    let ready = match ready_rx.recv() {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("the receiving thread did not start".to_string()),
    };
    let done = match ready {
        Ok(()) => {
            let (cfg2, tx) = (cfg.clone(), pair.tx.clone());
            let sender = spawn_in(pair.tx.netns.as_deref(), "lr-ceil-rxgen", move || {
                receive_rounds(&cfg2, &tx, &drain_tx)
            });
            joined(Part::Receive, sender)
        }
        Err(e) => skip_all(Part::Receive, &e),
    };
    // The sender's end of the channel is gone: the receiver's loop ends.
    if let Ok(h) = receiver {
        let _ = h.join();
    }
    let (mut out, mut skipped) = done;
    let (xdp, xdp_skipped) = xdp_count(cfg);
    out.extend(xdp);
    skipped.extend(xdp_skipped);
    (out, skipped)
}

/// The name of the XDP counter's receive path.
const XDP_COUNT_METHOD: &str = "XDP counter (program)";

/// The XDP receive counter of the RFC 2544 receiver
/// ([`crate::packet::RxCounter`]) at every packet frame size: its program's
/// own time per frame, run by the kernel on a test frame
/// (`BPF_PROG_TEST_RUN`, the kernel's CLOCK_MONOTONIC mean per run), and
/// checked to have counted and dropped every run. The driver's receive path
/// before the program is not in it.
fn xdp_count(cfg: &Config) -> (Vec<Sample>, Vec<Skipped>) {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let repeat = u32::try_from(cfg.packets_per_repeat).unwrap_or(u32::MAX);
    for &frame in &cfg.packet_frames {
        let bytes = match test_frame(frame, [0x02, 0, 0, 0, 0, 0x01]) {
            Ok(t) => {
                let mut b = vec![0u8; t.buffer_len()];
                t.emit(&mut b);
                b
            }
            Err(reason) => {
                skipped.push(skip(Part::Receive, XDP_COUNT_METHOD, reason));
                continue;
            }
        };
        let times: Result<Vec<u64>, String> = (0..cfg.warmups + cfg.repeats)
            .map(|_| {
                RxCounter::program_ns(&bytes, repeat).map(|ns| u64::from(ns) * u64::from(repeat))
            })
            .skip(cfg.warmups as usize)
            .collect();
        match times {
            Ok(repeat_ns) => out.push(Sample {
                part: Part::Receive,
                method: XDP_COUNT_METHOD.to_string(),
                cache: None,
                bytes_per_op: u64::from(frame),
                frame_bytes: Some(frame),
                ops_per_repeat: u64::from(repeat),
                repeat_ns,
                energy: None,
            }),
            Err(e) => {
                // One reason for the path, not one per frame size.
                skipped.push(skip(Part::Receive, XDP_COUNT_METHOD, e));
                break;
            }
        }
    }
    (out, skipped)
}

/// The generator's side of [`receive`]: rounds of queued frames, each
/// drained by the receiver.
fn receive_rounds(
    cfg: &Config,
    tx: &RawTarget,
    drain: &mpsc::Sender<Drain>,
) -> (Vec<Sample>, Vec<Skipped>) {
    let mut generator = match FrameGenerator::open(&tx.iface, false, Generator::Sendmmsg) {
        Ok(g) => g,
        Err(e) => return skip_all(Part::Receive, &error_chain(&e)),
    };
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let rounds = cfg.packets_per_repeat.div_ceil(RX_ROUND);
    let mut stream = 1u16;
    for &frame in &cfg.packet_frames {
        let template = match test_frame(frame, generator.mac()) {
            Ok(t) => t,
            Err(reason) => {
                skipped.push(skip(Part::Receive, RX_METHOD, reason));
                continue;
            }
        };
        let mut repeat = || -> Result<u64, String> {
            let mut total = 0;
            for _ in 0..rounds {
                let rep = generator.run(&template, stream, RX_ROUND, None, MAX_REPEAT);
                stream = stream.wrapping_add(1).max(1);
                if rep.sent_frames < RX_ROUND {
                    return Err(format!(
                        "the generator sent {} of {RX_ROUND} frames",
                        rep.sent_frames
                    ));
                }
                std::thread::sleep(RX_SETTLE);
                let (reply_tx, reply_rx) = mpsc::channel();
                drain
                    .send((RX_ROUND, reply_tx))
                    .map_err(|_| "the receiver ended".to_string())?;
                let (ns, got) = reply_rx
                    .recv()
                    .map_err(|_| "the receiver ended".to_string())??;
                if got < RX_ROUND {
                    return Err(format!("{got} of {RX_ROUND} queued frames arrived"));
                }
                total += ns;
            }
            Ok(total)
        };
        let times: Result<Vec<u64>, String> = (0..cfg.warmups + cfg.repeats)
            .map(|_| repeat())
            .skip(cfg.warmups as usize)
            .collect();
        match times {
            Ok(repeat_ns) => out.push(Sample {
                part: Part::Receive,
                method: RX_METHOD.to_string(),
                cache: None,
                bytes_per_op: u64::from(frame),
                frame_bytes: Some(frame),
                ops_per_repeat: rounds * RX_ROUND,
                repeat_ns,
                energy: None,
            }),
            Err(e) => skipped.push(skip(
                Part::Receive,
                RX_METHOD,
                format!("{frame}-byte frames: {e}"),
            )),
        }
    }
    (out, skipped)
}

fn skip(part: Part, method: &str, reason: String) -> Skipped {
    Skipped {
        part,
        method: method.to_string(),
        reason,
    }
}

/// A test frame of `frame` bytes from `src_mac` to a MAC nobody has.
fn test_frame(frame: u32, src_mac: [u8; 6]) -> Result<TestFrameRepr, String> {
    TestFrameRepr::for_frame_size(
        frame,
        false,
        src_mac,
        NOBODY_MAC,
        Ipv4Addr::new(198, 18, 0, 1).into(),
        Ipv4Addr::new(198, 19, 255, 2).into(),
    )
    .map_err(|e| format!("{frame}-byte frame: {e}"))
}

/// Every raw path of `part` skipped for one reason.
pub(super) fn skip_all(part: Part, reason: &str) -> (Vec<Sample>, Vec<Skipped>) {
    let names: Vec<&str> = match part {
        Part::Send => PATHS.iter().map(|&(_, name)| name).collect(),
        _ => vec![RX_METHOD, XDP_COUNT_METHOD],
    };
    let skips = (names.into_iter())
        .map(|name| Skipped {
            part,
            method: name.to_string(),
            reason: reason.to_string(),
        })
        .collect();
    (Vec::new(), skips)
}

/// The name of the raw receive path.
const RX_METHOD: &str = "AF_PACKET recvmmsg";

const PATHS: [(Generator, &str); 4] = [
    (Generator::Sendmmsg, "AF_PACKET sendmmsg"),
    (Generator::TxRing, "AF_PACKET TX ring"),
    (Generator::AfXdp, "AF_XDP (copy mode)"),
    (Generator::XdpLive, "XDP live frames"),
];

fn send_here(cfg: &Config, target: &RawTarget) -> (Vec<Sample>, Vec<Skipped>) {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for (path, name) in PATHS {
        let mut generator = match FrameGenerator::open(&target.iface, false, path) {
            Ok(g) => g,
            Err(e) => {
                skipped.push(skip(Part::Send, name, error_chain(&e)));
                continue;
            }
        };
        for &frame in &cfg.packet_frames {
            let template = match test_frame(frame, generator.mac()) {
                Ok(t) => t,
                Err(reason) => {
                    skipped.push(skip(Part::Send, name, reason));
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
                None => skipped.push(skip(
                    Part::Send,
                    name,
                    format!("{frame}-byte frames: the device took none in {MAX_REPEAT:?}"),
                )),
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
