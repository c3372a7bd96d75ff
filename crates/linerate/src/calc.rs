//! `linerate calc` and `linerate demo`: the line-rate model on the terminal.

use anyhow::Context as _;
use linerate_core::linerate::{BusCeiling, Frame, Row};
use linerate_report::calc::Calc;

use crate::flags::{CalcArgs, SizeList};
use crate::output::{print, print_json};
use crate::Failure;

/// Default PCIe Max_Payload_Size, the most common setting on servers.
const DEFAULT_MPS: u32 = 256;

/// Turns the flags into the frames to model.
fn frames(args: &CalcArgs) -> Result<Vec<Frame>, Failure> {
    let mut encap = args.encap;
    if let Some(b) = args.tcp_options {
        encap = encap.with_tcp_options(b)?;
    }
    if let Some(b) = args.ip_options {
        encap = encap.with_ip_options(b)?;
    }
    let mut out = Vec::new();
    if let Some(list) = &args.payload {
        for p in list.sizes() {
            out.push(encap.frame_for_payload(p, args.jumbo)?);
        }
    } else if let Some(list) = &args.mtu {
        for m in list.sizes() {
            out.push(encap.frame_for_mtu(m, args.jumbo)?);
        }
    } else {
        let list = args.frame.clone().unwrap_or(SizeList::Rfc2544);
        for f in list.sizes() {
            out.push(encap.frame_of_length(f, args.jumbo)?);
        }
    }
    Ok(out)
}

/// Builds the model for the flags.
pub(crate) fn model(args: &CalcArgs) -> Result<Calc, Failure> {
    let frames = frames(args)?;
    let mut rows = Vec::with_capacity(args.link.len() * frames.len());
    for &link in &args.link {
        for &f in &frames {
            rows.push(Row::new(link, f).with_context(|| format!("link {link}"))?);
        }
    }
    let bus = match args.bus {
        Some(b) => Some(BusCeiling::new(b, args.mps.unwrap_or(DEFAULT_MPS))?),
        None => None,
    };
    Ok(Calc {
        rows,
        frames: args.frames,
        bus,
    })
}

/// `linerate calc`.
pub(crate) fn run(args: &CalcArgs, ctx: &crate::Ctx) -> Result<(), Failure> {
    let _ = ctx.width;
    let calc = model(args)?;
    if args.json {
        print_json(&calc.to_json())
    } else if args.csv {
        print(&calc.to_csv())
    } else {
        print(&calc.to_table())
    }
}
