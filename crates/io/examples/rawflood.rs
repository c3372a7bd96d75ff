//! Benchmark helper (used by `bench/rawgen.sh`, not by the tool): the RFC
//! 2544 frame generator flooding one interface as fast as it can for a
//! bounded time, with 64-byte (or `FRAME`-byte) test frames to a MAC nobody
//! has. Prints the generator's own report on one line; the bench counts
//! what arrived at the peer itself.
//!
//! usage: rawflood IFACE packet|packet-ring|xdp|xdp-live SECONDS [FRAME] [THREADS]
//!        rawflood count IFACE SECONDS
//! (run inside the interface's namespace, as root). THREADS: sender
//! threads of packet and packet-ring (default: one per CPU, as `linerate
//! rfc2544`). `count` attaches the
//! RFC 2544 receiver's XDP counter to IFACE for SECONDS (frames of test
//! stream 1 are counted and dropped in the driver, everything else
//! passes) and prints its count: a receiving peer that costs every
//! generator the same, little.

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::Duration;

use linerate_core::rfc2544::sender_threads;
use linerate_core::wire::testframe::TestFrameRepr;
use linerate_io::packet::{FrameGenerator, Generator, RxCounter};

/// `rawflood count IFACE SECONDS`.
fn count(args: &[String], usage: &str) -> ExitCode {
    let (Some(iface), Some(Ok(secs))) = (args.first(), args.get(1).map(|s| s.parse::<f64>()))
    else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let c = match RxCounter::attach(iface) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rawflood: {}", linerate_core::error::chain(&e));
            return ExitCode::from(1);
        }
    };
    if let Err(e) = c.open_stream(1, f64::INFINITY) {
        eprintln!("rawflood: {e}");
        return ExitCode::from(1);
    }
    std::thread::sleep(Duration::from_secs_f64(secs.clamp(0.1, 3600.0)));
    match c.count(1) {
        Ok(n) => {
            println!("counted {n} frames of stream 1");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rawflood: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: rawflood IFACE packet|packet-ring|xdp|xdp-live SECONDS [FRAME] [THREADS] | rawflood count IFACE SECONDS";
    if args.first().map(String::as_str) == Some("count") {
        return count(&args[1..], usage);
    }
    let (Some(iface), Some(path), Some(secs)) = (args.first(), args.get(1), args.get(2)) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let path = match path.as_str() {
        "packet" => Generator::Sendmmsg,
        "packet-ring" => Generator::TxRing,
        "xdp" => Generator::AfXdp,
        "xdp-live" => Generator::XdpLive,
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let (Ok(secs), Ok(frame), Ok(threads)) = (
        secs.parse::<f64>(),
        args.get(3).map_or(Ok(64), |f| f.parse::<u32>()),
        args.get(4).map_or(Ok(cpus), |t| t.parse::<u32>()),
    ) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let secs = secs.clamp(0.1, 60.0);
    let threads = sender_threads(path, Some(threads.clamp(1, 64)), cpus) as usize;
    let mut g = match FrameGenerator::open_threads(iface, false, path, threads) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("rawflood: {}", linerate_core::error::chain(&e));
            return ExitCode::from(1);
        }
    };
    let template = match TestFrameRepr::for_frame_size(
        frame,
        false,
        g.mac(),
        [0x02, 0, 0, 0, 0, 0x02],
        Ipv4Addr::new(198, 18, 0, 1).into(),
        Ipv4Addr::new(198, 19, 255, 2).into(),
    ) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("rawflood: {e}");
            return ExitCode::from(2);
        }
    };
    let rep = g.run(&template, 1, u64::MAX, None, Duration::from_secs_f64(secs));
    println!(
        "sent {} frames in {:.3} s: {:.0} fps (kernel-accepted; {} sender thread(s), batches {}, ENOBUFS {}, errors {})",
        rep.sent_frames,
        rep.elapsed.as_secs_f64(),
        rep.offered_fps,
        rep.sender_threads,
        rep.batches,
        rep.enobufs,
        rep.errors
    );
    ExitCode::SUCCESS
}
