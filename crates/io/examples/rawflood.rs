//! Benchmark helper (used by `bench/rawgen.sh`, not by the tool): the RFC
//! 2544 frame generator flooding one interface as fast as it can for a
//! bounded time, with 64-byte (or `FRAME`-byte) test frames to a MAC nobody
//! has. Prints the generator's own report on one line; the bench counts
//! what arrived at the peer itself.
//!
//! usage: rawflood IFACE packet|packet-ring|xdp|xdp-live SECONDS [FRAME]
//! (run inside the interface's namespace, as root)

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::Duration;

use linerate_core::wire::testframe::TestFrameRepr;
use linerate_io::packet::{FrameGenerator, Generator};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: rawflood IFACE packet|packet-ring|xdp|xdp-live SECONDS [FRAME]";
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
    let (Ok(secs), Ok(frame)) = (
        secs.parse::<f64>(),
        args.get(3).map_or(Ok(64), |f| f.parse::<u32>()),
    ) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let secs = secs.clamp(0.1, 60.0);
    let mut g = match FrameGenerator::open(iface, false, path) {
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
        "sent {} frames in {:.3} s: {:.0} fps (kernel-accepted; batches {}, ENOBUFS {}, errors {})",
        rep.sent_frames,
        rep.elapsed.as_secs_f64(),
        rep.offered_fps,
        rep.batches,
        rep.enobufs,
        rep.errors
    );
    ExitCode::SUCCESS
}
