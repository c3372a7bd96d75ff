//! `linerate demo`'s prose around the tables of its four parts.

use linerate_core::demo::{Model, LATENCY_EXCHANGES, THROUGHPUT_SECONDS};
use linerate_core::units::format_bytes_per_s;

use crate::calc::frames_sentence;
use crate::table::{paragraph, Width};

/// The heading, part 1 (the line-rate model and seed 000 against it) and
/// the heading of part 2 (the latency table follows).
pub fn model(m: &Model, width: Width) -> String {
    let mut text = String::from(
        "linerate demo (no hardware, no second host, no privileges)\n\n\
         1. The line-rate model: the maximum every linerate result is measured against\n\n",
    );
    text.push_str(&crate::calc::table(&m.calc, width));
    text.push('\n');
    text.push_str(&paragraph(
        "",
        "",
        &format!(
            "{}; seed 000 (NXP AN11053) sent them in 6.25 ms (its 'ideal' scenario): {:.2} % of \
             the {} payload maximum.",
            frames_sentence(&m.seed000, linerate_core::demo::SEED000_FRAMES),
            m.seed000_share * 100.0,
            format_bytes_per_s(m.seed000.payload_bytes_per_s()),
        ),
        width,
    ));
    text.push('\n');
    text.push_str(&paragraph(
        "2. ",
        "   ",
        &format!(
            "A UDP echo on loopback, {LATENCY_EXCHANGES} exchanges of 64 bytes, dissected with \
             kernel timestamps (what seeds 001 and 004 measure with a scope on GPIO pins)"
        ),
        width,
    ));
    text.push('\n');
    text
}

/// The heading of part 3 (the throughput result follows).
pub fn throughput_heading() -> String {
    format!(
        "\n3. TCP throughput over loopback for {THROUGHPUT_SECONDS} s, server and client in this \
         process, from both ends\n\n"
    )
}

/// The heading of part 4 (the ceilings report follows).
pub fn ceilings_heading(width: Width) -> String {
    let mut text = String::from("\n");
    text.push_str(&paragraph(
        "4. ",
        "   ",
        "This host's ceilings, quick version: copy, the Internet checksum and a packet through \
         each socket path, each against the line rates it sustains (seed 004's memcpy and \
         checksum costs, measured here)",
        width,
    ));
    text.push('\n');
    text
}

/// Where to go next.
pub fn next(width: Width) -> String {
    let mut text = String::from("\n");
    text.push_str(&paragraph(
        "",
        "",
        "Next: `linerate calc --help` for any link, encapsulation or bus; \
         `linerate latency --help` to dissect a real responder; `linerate ceilings` for every block \
         and frame size of part 4; `sudo linerate testbed up lab \
         --topo pair --link 100M` and `linerate throughput --bed lab` for a measurement against \
         an emulated 100 Mbit/s link, as % of the maximum possible.",
        width,
    ));
    text
}
