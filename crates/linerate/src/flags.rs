//! Every flag of every command, defined once, parsed into typed values from
//! `linerate-core` right here so no string parsing happens past `main`.

use clap::{Args, Parser, Subcommand};
use linerate_core::calc::SizeList;
use linerate_core::linerate::{parse_mps, Encap, PcieLink};
use linerate_core::units::BitRate;

/// linerate: how fast is a link, a stack or a box really, how close is that to
/// the physical maximum, and where does the time go?
#[derive(Debug, Parser)]
#[command(name = "linerate", version, propagate_version = true)]
pub(crate) struct Cli {
    /// Human output as wide as it needs to be, every column shown (default:
    /// at most 100 columns, notes wrapped, less important columns left out).
    #[arg(long, global = true)]
    pub(crate) wide: bool,

    /// The results history to save to and read from [default:
    /// $XDG_DATA_HOME/linerate/history.sqlite, else
    /// ~/.local/share/linerate/history.sqlite].
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) history: Option<std::path::PathBuf>,

    /// Do not save this measurement in the history.
    #[arg(long, global = true)]
    pub(crate) no_save: bool,

    /// A label saved with the measurement; with `history` and `compare`,
    /// the results so labelled.
    #[arg(long, global = true, value_name = "TEXT")]
    pub(crate) tag: Option<String>,

    /// One JSON object per line on stdout while the command runs, iperf3's
    /// convention ({"event": …, "data": …}): start, interval, step, and end
    /// with the whole result (throughput, latency, rfc2544; server: log).
    /// Instead of the usual output: the end event carries what --json prints.
    #[arg(long, global = true)]
    pub(crate) json_stream: bool,

    /// A file holding the pre-shared key of `linerate server` and its
    /// clients (at least 16 bytes; white space around it ignored). Default:
    /// the key in LINERATE_AUTH_KEY, if set.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) auth_file: Option<std::path::PathBuf>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Each command's flags are defined only when that command is parsed
/// (`defer`): the others are named with their help line, but their flags
/// are never built, which keeps start-up from running (and keeping
/// resident) the code and heap of every other command's definitions
/// (docs/METHODOLOGY.md, "Memory"). A deferred definition is applied after
/// the variant's doc comment, so the flags structs a command takes (and the
/// structs and action enums they flatten or nest) carry `//` comments, not
/// doc comments, which clap would take for the command's help.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum Command {
    /// The line-rate model: frames/s, wire time and payload throughput a link can carry at best.
    ///
    /// Counts every byte on the wire: frame (header to FCS) + 8 B preamble/SFD + 12 B
    /// inter-frame gap (IEEE 802.3). Frames shorter than 64 B are padded, and the
    /// output says so.
    ///
    /// JSON (`--json`, schema "linerate.calc" version 1, in the common envelope) has one
    /// object per row with
    /// unit-suffixed fields: link_bits_per_s, encap, frame_bytes, wire_bytes,
    /// payload_bytes, padding_bytes, l3_bytes, frames_per_s, frame_time_ns,
    /// payload_bytes_per_s, l1_bits_per_s, l2_bits_per_s, l3_bits_per_s,
    /// payload_bits_per_s, efficiency_pct, and with --frames: frames, frames_time_ns;
    /// with --bus: bus_frames_per_s, bottleneck. `--csv` has the same columns.
    Calc(CalcArgs),
    /// Runs the built-in demonstration, a short tour made of built-in scenarios: the
    /// loopback part without hardware, second host or privileges; as root, shortened
    /// replays of the notes on testbeds.
    Demo(DemoArgs),
    /// Response time dissected into stages with kernel timestamps (UDP, TCP, ICMP echo).
    Latency(crate::latency::LatencyArgs),
    /// Serves `linerate throughput` clients and iperf3 clients (several at once, each on its own threads).
    Server(crate::server::ServerArgs),
    /// TCP/UDP throughput against a `linerate server`, from both ends, as % of the line rate.
    ///
    /// Prints per-interval and total figures per stream and direction from both ends
    /// (the server sends its receive-side figures back), loss/reorder/duplicates/corrupt
    /// from sequence numbers and a verified fill pattern, CPU time per byte and per
    /// packet (getrusage RUSAGE_THREAD of each flow thread), and the seed-000 table with
    /// % of max possible for --link. JSON: schema linerate.throughput version 1.
    Throughput(crate::throughput::ThroughputArgs),
    /// Testbeds from network namespaces: up, down, list, sweep, exec.
    #[command(subcommand)]
    Testbed(crate::testbed::TestbedArgs),
    /// An interface's driver, speed, offloads, rings, coalescing, timestamping, PCIe link,
    /// NUMA node and IRQs, with the ceilings that follow and warnings for settings that cap
    /// performance. Without IFACE: a brief list.
    Inspect(crate::inspect::InspectArgs),
    /// RFC 2544 device-under-test suite with raw frames: throughput, latency, frame loss, back-to-back.
    Rfc2544(crate::rfc2544::Rfc2544Args),
    /// The stored results: list (the default), show ID, export ID, rm ID.
    ///
    /// Every throughput, latency and rfc2544 measurement is saved with its
    /// environment (kernel, CPU, linerate version, the bed and its settings,
    /// steal and CPU pressure) unless --no-save.
    History(crate::history::HistoryArgs),
    /// Stored results' figures side by side, each against the first, with
    /// whether the change is beyond the runs' spread.
    Compare(crate::compare::CompareArgs),
    /// Host ceilings: copy, Internet checksum and per-packet send/receive costs, each
    /// against the line rates it sustains.
    ///
    /// Socket paths on loopback; as root also the raw-frame paths (AF_PACKET, AF_XDP, XDP live
    /// frames) on a temporary veth pair, removed afterwards. Each figure: median and min–max of
    /// the repeats (CLOCK_MONOTONIC), with energy per operation where the host has RAPL.
    /// JSON: schema linerate.ceilings version 1 (docs/schema/linerate.ceilings.schema.json).
    Ceilings(crate::ceilings::CeilingsArgs),
    /// Result documents (`--json` output) rendered again: tables, plots, or one
    /// self-contained HTML page with tables, plots, flags and environment.
    Report(crate::report::ReportArgs),
    /// OpenMetrics exporter: /probe?target=HOST&test=throughput|latency runs a short test
    /// against a `linerate server` and exposes its figures; /metrics the exporter's own.
    Exporter(crate::exporter::ExporterArgs),
    /// The packet journey through the kernel: UDP, TCP or ICMP probes from host a to host b of a bed,
    /// followed tracepoint by tracepoint (tp_btf programs or perf raw samples, CLOCK_MONOTONIC), one row per
    /// step with the time from the send (IDT AN-367's Table 5), gaps named, drops with
    /// their kernel reasons, hints and the tracer's own cost. JSON: schema linerate.journey
    /// version 1.
    Journey(crate::journey::JourneyArgs),
    /// Experiments as TOML files: a bed, tests (each a command's options), tables with
    /// reference figures; built-in replays of the seed notes (list, show NAME, run FILE|NAME).
    ///
    /// JSON: schema linerate.scenario version 1 (docs/SCENARIOS.md documents the file format).
    Scenario(crate::scenario::ScenarioArgs),
}

// Flags of `linerate calc`.
#[derive(Debug, Args)]
pub(crate) struct CalcArgs {
    /// Link speeds in bit/s, comma-separated, with k/M/G/T suffixes (decimal).
    ///
    /// Standard Ethernet speeds: 10M, 100M, 1G, 2.5G, 5G, 10G, 25G, 40G, 50G,
    /// 100G, 200G, 400G, 800G. Any rate is accepted: 100M, 2.5G, 10Gbit, 1Gbps,
    /// 12.5MB/s (bytes).
    #[arg(
        long,
        value_name = "SPEED[,SPEED…]",
        value_delimiter = ',',
        default_value = "100M,1G,10G"
    )]
    pub(crate) link: Vec<BitRate>,
    /// Ethernet frame lengths, header to FCS (e.g. 64,1518), or `rfc2544` for
    /// 64,128,256,512,1024,1280,1518. The default when nothing else is given.
    #[arg(long, value_name = "BYTES[,…]|rfc2544", group = "carried")]
    pub(crate) frame: Option<SizeList>,
    /// Payload sizes above the innermost header of --encap (e.g. 18,1472 with udp4).
    #[arg(long, value_name = "BYTES[,…]", group = "carried")]
    pub(crate) payload: Option<SizeList>,
    /// MTUs (L2 payload, as `ip link` sets it): the largest payload of --encap
    /// that fits, and what it yields.
    #[arg(long, value_name = "BYTES[,…]", group = "carried")]
    pub(crate) mtu: Option<SizeList>,
    /// What wraps the payload: eth, vlan, qinq, ipv4, ipv6, udp4, udp6, tcp4,
    /// tcp6, or a tag plus an IP layer such as vlan+udp4.
    #[arg(long, value_name = "ENCAP", default_value = "eth")]
    pub(crate) encap: Encap,
    /// TCP option bytes in every segment (default 12: timestamps, as Linux sends).
    #[arg(long, value_name = "BYTES")]
    pub(crate) tcp_options: Option<u32>,
    /// IPv4 option bytes (or IPv6 extension header bytes).
    #[arg(long, value_name = "BYTES")]
    pub(crate) ip_options: Option<u32>,
    /// Also show how long N back-to-back frames take on the wire.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) frames: Option<u64>,
    /// A PCIe bus to set beside the link: pcie<GEN>x<LANES>, generations 1-6,
    /// widths 1-16 (e.g. pcie3x4).
    #[arg(long, value_name = "SPEC")]
    pub(crate) bus: Option<PcieLink>,
    /// PCIe Max_Payload_Size in bytes (128, 256, 512; up to 4096) [default: 256].
    #[arg(long, value_name = "BYTES", requires = "bus", value_parser = parse_mps)]
    pub(crate) mps: Option<u32>,
    /// Allow frames above the 1518-byte IEEE maximum (up to 16384).
    #[arg(long)]
    pub(crate) jumbo: bool,
    /// One JSON document (schema linerate.calc, version 1).
    #[arg(long, conflicts_with = "csv")]
    pub(crate) json: bool,
    /// CSV with a header line.
    #[arg(long)]
    pub(crate) csv: bool,
    #[command(flatten)]
    pub(crate) plot: crate::report::PlotArgs,
}

// Flags of `linerate demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// One JSON document (schema linerate.demo, version 1): each part's
    /// scenario document, and the parts that did not run.
    #[arg(long)]
    pub(crate) json: bool,
    /// Only the parts that need no testbed (what runs without root), also
    /// as root.
    #[arg(long)]
    pub(crate) no_bed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    #[test]
    fn flag_definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    /// Each command's (and testbed action's) help text as its variant's doc
    /// comment gives it, and as it is once its deferred flags are defined: a
    /// flags struct (or one it flattens or nests) with a doc comment of its
    /// own would replace it.
    #[test]
    fn deferred_flags_keep_each_commands_help() {
        type Help = (Option<String>, Option<String>);
        fn abouts(cmd: &clap::Command, path: &str, out: &mut Vec<(String, Help)>) {
            for c in cmd.get_subcommands() {
                let path = format!("{path} {}", c.get_name());
                let help = (
                    c.get_about().map(ToString::to_string),
                    c.get_long_about().map(ToString::to_string),
                );
                out.push((path.clone(), help));
                abouts(c, &path, out);
            }
        }
        let mut cli = Cli::command();
        let mut declared = Vec::new();
        abouts(&cli, "linerate", &mut declared);
        assert!(declared.iter().all(|(_, (about, _))| about.is_some()));
        assert!(declared
            .iter()
            .any(|(path, _)| path == "linerate testbed up"));
        cli.build();
        let mut built = Vec::new();
        abouts(&cli, "linerate", &mut built);
        for (path, help) in &declared {
            let now = built.iter().find(|(p, _)| p == path).map(|(_, h)| h);
            assert_eq!(now, Some(help), "{path}");
        }
    }
}
