//! `linerate demo`: what linerate tells without hardware, a second host or
//! privileges: the line-rate model, and a response time dissected on loopback.

use std::net::Ipv4Addr;

use anyhow::anyhow;
use linerate_core::calc::CalcResult;
use linerate_core::latency::{Config, EchoProtocol, Peer, Request};
use linerate_core::linerate::{Encap, Row, RFC2544_FRAME_SIZES};
use linerate_core::progress::Silent;
use linerate_core::result::Flag;
use linerate_core::units::{format_bytes_per_s, BitRate};
use linerate_report::calc::frames_sentence;
use linerate_report::table::paragraph;

use crate::flags::DemoArgs;
use crate::output::print;
use crate::Failure;

/// Exchanges in the loopback latency part.
const DEMO_EXCHANGES: u64 = 1000;

/// `linerate demo`.
pub(crate) fn run(_args: &DemoArgs, ctx: &crate::Ctx) -> Result<Vec<Flag>, Failure> {
    let mut text = String::from(
        "linerate demo (no hardware, no second host, no privileges)\n\n\
         1. The line-rate model: the maximum every linerate result is measured against\n\n",
    );
    let mut rows = Vec::new();
    for link in [
        BitRate::from_mbps(100),
        BitRate::from_gbps(1),
        BitRate::from_gbps(10),
    ] {
        for size in RFC2544_FRAME_SIZES {
            rows.push(Row::new(
                link,
                Encap::ETHERNET.frame_of_length(size, false)?,
            )?);
        }
    }
    let calc = CalcResult::new(&rows, None, None);
    text.push_str(&linerate_report::calc::table(&calc, ctx.width));
    let max = Row::new(
        BitRate::from_mbps(100),
        Encap::ETHERNET.frame_of_length(1518, false)?,
    )?;
    text.push('\n');
    text.push_str(&paragraph(
        "",
        "",
        &format!(
            "{}; seed 000 (NXP AN11053) sent them in 6.25 ms (its 'ideal' scenario): {:.2} % of \
             the {} payload maximum.",
            frames_sentence(&max, 50),
            max.share_of_payload_rate(75_000.0 / 6.25e-3) * 100.0,
            format_bytes_per_s(max.payload_bytes_per_s()),
        ),
        ctx.width,
    ));
    text.push('\n');

    text.push_str(&paragraph(
        "2. ",
        "   ",
        &format!(
            "A UDP echo on loopback, {DEMO_EXCHANGES} exchanges of 64 bytes, dissected with kernel \
             timestamps (what seeds 001 and 004 measure with a scope on GPIO pins)"
        ),
        ctx.width,
    ));
    text.push('\n');
    // The same run as `linerate latency 127.0.0.1 --in-process --count 1000`.
    let mut req = Request::new(
        Peer::InProcess(Ipv4Addr::LOCALHOST.into()),
        EchoProtocol::Udp,
    );
    req.count = Some(DEMO_EXCHANGES);
    let cfg = Config::new(&req).map_err(|e| anyhow!(e).context("loopback latency"))?;
    let latency = linerate_io::echo::run(&cfg, &mut Silent)
        .map_err(|e| anyhow::Error::new(e).context("loopback latency"))?;
    text.push_str(&linerate_report::latency::render(&latency, ctx.width));
    print(&text)?;

    let mut text = String::from(
        "\n3. TCP throughput over loopback for 1 s, server and client in this process, from both ends\n\n",
    );
    let result = crate::throughput::demo_run(1)?;
    text.push_str(&linerate_report::throughput::render(&result, ctx.width));
    text.push('\n');
    text.push_str(&paragraph(
        "",
        "",
        "Next: `linerate calc --help` for any link, encapsulation or bus; \
         `linerate latency --help` to dissect a real responder; `sudo linerate testbed up lab \
         --topo pair --link 100M` and `linerate throughput --bed lab` for a measurement against \
         an emulated 100 Mbit/s link, as % of the maximum possible.",
        ctx.width,
    ));
    print(&text)?;
    Ok(latency.flags.into_iter().chain(result.flags).collect())
}
