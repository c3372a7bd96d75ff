//! `linerate demo`: what linerate tells without hardware, a second host or
//! privileges: the line-rate model, and a response time dissected on loopback.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::anyhow;
use linerate_core::calc::CalcResult;
use linerate_core::latency::{LatencyReport, Responder, SCHEMA, SCHEMA_VERSION};
use linerate_core::linerate::{Encap, Row, RFC2544_FRAME_SIZES};
use linerate_core::procedure::pingpong::{Schedule, Until};
use linerate_core::units::{format_bytes_per_s, BitRate};
use linerate_io::echo::{
    run_with_local_reflector, summarize, ClientConfig, Placement, Proto, ReflectorConfig,
};
use linerate_io::stamps;
use linerate_report::calc::frames_sentence;

use crate::flags::DemoArgs;
use crate::output::print;
use crate::Failure;

/// Exchanges in the loopback latency part.
const DEMO_EXCHANGES: u64 = 1000;

/// `linerate demo`.
pub(crate) fn run(_args: &DemoArgs, ctx: &crate::Ctx) -> Result<(), Failure> {
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
    text.push_str(&frames_sentence(&max, 50));
    text.push_str(&format!(
        ";\nseed 000 (NXP AN11053) sent them in 6.25 ms (its 'ideal' scenario): {:.2} % of the \
         {} payload maximum.\n\n",
        max.share_of_payload_rate(75_000.0 / 6.25e-3) * 100.0,
        format_bytes_per_s(max.payload_bytes_per_s()),
    ));

    text.push_str(&format!(
        "2. A UDP echo on loopback, {DEMO_EXCHANGES} exchanges of 64 bytes, dissected with kernel \
         timestamps\n   (what seeds 001 and 004 measure with a scope on GPIO pins)\n\n"
    ));
    let target: SocketAddr = ([127, 0, 0, 1], 0).into();
    let session = 0x4c52_0001;
    let client = ClientConfig {
        target,
        session,
        size: 64,
        schedule: Schedule {
            until: Until::Count(DEMO_EXCHANGES),
            interval: Duration::ZERO,
            max_in_flight: 1,
            timeout: Duration::from_secs(1),
        },
        spin: false,
        no_udp_checksum: false,
        plain_echo: false,
        kernel_stamps: true,
        stamp_every: 4,
    };
    let (run, reflector) = run_with_local_reflector(
        Proto::Udp,
        target,
        ReflectorConfig::new(session),
        &client,
        &Placement::default(),
    )
    .map_err(|e| anyhow!(e).context("loopback latency"))?;
    let report = LatencyReport {
        schema: SCHEMA.into(),
        version: SCHEMA_VERSION,
        target: "127.0.0.1 (reflector in this process)".into(),
        protocol: "udp".into(),
        responder: Responder::Reflector,
        clock: stamps::CLOCK_NAME.into(),
        timestamp_source: "software (SO_TIMESTAMPING)".into(),
        hardware_timestamps: match stamps::device_stamping("lo") {
            Ok(d) if d.hardware => "lo claims hardware stamps".into(),
            Ok(_) => "none on lo (ETHTOOL_GET_TS_INFO)".into(),
            Err(e) => format!("unknown ({e})"),
        },
        same_clock: true,
        runs: vec![summarize(Vec::new(), 64, &run, Some(&reflector), true)],
        warnings: Vec::new(),
    };
    text.push_str(&linerate_report::latency::to_table(&report));
    print(&text)?;

    let mut text = String::from(
        "\n3. TCP throughput over loopback for 1 s, server and client in this process, from both ends\n\n",
    );
    let result = crate::throughput::demo_run(1)?;
    text.push_str(&linerate_report::throughput::render(&result));
    text.push_str(
        "\nNext: `linerate calc --help` for any link, encapsulation or bus; \
         `linerate latency --help` to dissect a real responder; `sudo linerate testbed up lab \
         --topo pair --link 100M` and `linerate throughput --bed lab` for a measurement against \
         an emulated 100 Mbit/s link, as % of the maximum possible.\n",
    );
    print(&text)
}
