//! The tracer: the length-filtered tracepoints as `tp_btf` programs that
//! filter before writing (see [`super::btf`]), the others opened with
//! perf_event_open on every CPU with their in-kernel filter, one ring per
//! CPU; everything drained by polling. Where BPF is refused (no BTF, no
//! permission, an older kernel), every tracepoint goes to perf and the
//! result says why.

use std::ffi::CString;
use std::io;
use std::os::fd::OwnedFd;

use linerate_core::journey::format::{parse_ring, Format, RingRecords};
use linerate_core::journey::{Backend, Decoder, Event, FilterKind, Tracepoint};

use super::btf::{runs_as_program, BtfPrograms, BtfTracerError};
use super::tracefs::Tracefs;
use super::JourneyError;
use crate::sys::bpf::RunStats;
use crate::sys::perf;

/// Data pages per CPU ring (a power of two): 1 MiB with 4 KiB pages.
pub const RING_PAGES: usize = 256;

/// What the in-kernel filters select.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filters {
    /// `len` from..=to (every length a probe shows at any layer).
    pub len: (u32, u32),
    /// The probes' UDP destination port.
    pub dport: u16,
    /// `--all-events`: without `tp_btf` programs to gate them (perf), the
    /// events without an skb are opened too, and then record every NET_RX
    /// softirq, NAPI poll and FIB lookup of the host; else perf leaves
    /// them out.
    pub all_events: bool,
}

impl Filters {
    /// The filter text for a tracepoint (None: no filter).
    pub fn text(&self, kind: FilterKind) -> Option<String> {
        match kind {
            FilterKind::Len => Some(format!("len >= {} && len <= {}", self.len.0, self.len.1)),
            FilterKind::Dport => Some(format!("dport == {}", self.dport)),
            FilterKind::NetRx => Some(format!("vec == {}", linerate_core::journey::NET_RX_VEC)),
            FilterKind::Udp => Some("protocol == 17".to_string()),
            FilterKind::Ret => Some(format!("ret >= {} && ret <= {}", self.len.0, self.len.1)),
            FilterKind::DataLen => Some(format!(
                "data_len >= {} && data_len <= {}",
                self.len.0, self.len.1
            )),
            FilterKind::None => None,
        }
    }
}

/// The open tracer. Dropping it closes every event and detaches every
/// program (tracing stops).
#[derive(Debug)]
pub struct Tracer {
    events: Vec<OwnedFd>,
    rings: Vec<perf::Ring>,
    bytes: Vec<Vec<u8>>,
    programs: Option<BtfPrograms>,
    program_events: Vec<Event>,
    /// Tracepoints run as `tp_btf` programs (empty: perf only).
    pub programs_opened: Vec<String>,
    /// True when the programs' records carry the namespace inode.
    pub program_netns: bool,
    /// Why `tp_btf` programs were not used ([`Backend::Auto`] fell back).
    pub fallback: Option<String>,
    /// Decodes the samples.
    pub decoder: Decoder,
    /// Tracepoints opened.
    pub opened: Vec<String>,
    /// Optional tracepoints this kernel lacks.
    pub missing: Vec<String>,
    /// Filters set, as `tracepoint: filter`.
    pub filters: Vec<String>,
    /// CPUs traced.
    pub cpus: u32,
}

impl Tracer {
    /// Opens `tracepoints` (all of `linerate_core::journey::TRACEPOINTS` for a journey) on every
    /// CPU, disabled. A required tracepoint that is missing, or any that
    /// cannot be opened, is an error naming it.
    pub fn open(
        fs: &Tracefs,
        tracepoints: &[Tracepoint],
        filters: Filters,
    ) -> Result<Self, JourneyError> {
        Self::open_with(fs, tracepoints, filters, Backend::Auto)
    }

    /// [`Tracer::open`] with a choice of backend for the length-filtered
    /// tracepoints.
    pub fn open_with(
        fs: &Tracefs,
        tracepoints: &[Tracepoint],
        filters: Filters,
        backend: Backend,
    ) -> Result<Self, JourneyError> {
        let cpus = perf::cpu_count();
        let (programs, fallback) = match backend {
            Backend::Perf => (None, None),
            Backend::TpBtf => (
                Some(
                    BtfPrograms::load(tracepoints, filters)
                        .map_err(|source| JourneyError::Btf { source })?,
                ),
                None,
            ),
            Backend::Auto => match BtfPrograms::load(tracepoints, filters) {
                Ok(p) => (Some(p), None),
                Err(e) => (None, Some(fallback_reason(&e))),
            },
        };
        let mut t = Self {
            events: Vec::new(),
            rings: Vec::new(),
            bytes: vec![Vec::new(); cpus as usize],
            programs_opened: programs
                .as_ref()
                .map(|p| p.opened.clone())
                .unwrap_or_default(),
            program_netns: programs.as_ref().is_some_and(|p| p.netns),
            programs,
            program_events: Vec::new(),
            fallback,
            decoder: Decoder::new(),
            opened: Vec::new(),
            missing: Vec::new(),
            filters: Vec::new(),
            cpus,
        };
        let mut leaders: Vec<Option<usize>> = vec![None; cpus as usize];
        for tp in tracepoints {
            // No program to gate it (perf asked for, or tp_btf fell back):
            // an event without an skb would record every packet.
            if t.programs.is_none() && tp.point.attributed() && !filters.all_events {
                continue;
            }
            if t.programs
                .as_ref()
                .is_some_and(|p| p.missing.iter().any(|m| m == tp.path))
            {
                t.missing.push(tp.path.to_string());
                continue;
            }
            if t.programs.is_some() && runs_as_program(tp.point) {
                if tp.point == linerate_core::journey::Point::KfreeSkb {
                    // Drop reasons are named from the tracepoint's format.
                    let reasons = fs.format(tp.path).ok().and_then(|f| Format::parse(&f).ok());
                    if let Some(p) = t.programs.as_mut() {
                        p.reasons = reasons;
                    }
                }
                t.opened.push(tp.path.to_string());
                t.filters
                    .push(if tp.point == linerate_core::journey::Point::SoftirqNetRx {
                        format!(
                            "{}: NET_RX entry time kept in BPF while a probe is in flight \
                         (queued by net_dev_queue, not yet received), written by a probe's \
                         netif_receive_skb on that CPU",
                            tp.path
                        )
                    } else if tp.point.attributed() {
                        format!(
                            "{}: only while a probe's receive armed its CPU (in BPF; no skb)",
                            tp.path
                        )
                    } else {
                        format!(
                            "{}: len >= {} && len <= {} (in BPF)",
                            tp.path, filters.len.0, filters.len.1
                        )
                    });
                continue;
            }
            let text = match fs.format(tp.path) {
                Ok(text) => text,
                Err(e) if e.kind() == io::ErrorKind::NotFound && !tp.required => {
                    t.missing.push(tp.path.to_string());
                    continue;
                }
                Err(source) => {
                    return Err(JourneyError::Tracepoint {
                        name: tp.path.to_string(),
                        path: fs.format_path(tp.path),
                        source,
                    })
                }
            };
            let format = Format::parse(&text).map_err(|source| JourneyError::Format {
                name: tp.path.to_string(),
                source,
            })?;
            let id = u64::from(format.id);
            t.decoder
                .add(tp.point, format)
                .map_err(|source| JourneyError::Format {
                    name: tp.path.to_string(),
                    source,
                })?;
            let filter = filters.text(tp.filter);
            if let Some(f) = &filter {
                t.filters.push(format!("{}: {f}", tp.path));
            }
            for cpu in 0..cpus {
                let fd =
                    perf::open_tracepoint(id, cpu).map_err(|source| open_error(tp, cpu, source))?;
                if let Some(f) = &filter {
                    let c = CString::new(f.as_str())
                        .map_err(io::Error::other)
                        .and_then(|c| perf::set_filter(&fd, &c));
                    c.map_err(|source| JourneyError::Filter {
                        name: tp.path.to_string(),
                        filter: f.clone(),
                        source,
                    })?;
                }
                match leaders[cpu as usize] {
                    Some(i) => perf::set_output(&fd, &t.events[i])
                        .map_err(|source| JourneyError::Ring { cpu, source })?,
                    None => {
                        t.rings.push(
                            perf::Ring::map(&fd, RING_PAGES)
                                .map_err(|source| JourneyError::Ring { cpu, source })?,
                        );
                        leaders[cpu as usize] = Some(t.events.len());
                    }
                }
                t.events.push(fd);
            }
            t.opened.push(tp.path.to_string());
        }
        Ok(t)
    }

    /// Starts every event and attaches every program.
    pub fn enable(&mut self) -> Result<(), JourneyError> {
        if let Some(p) = self.programs.as_mut() {
            p.attach().map_err(|source| JourneyError::Btf { source })?;
        }
        self.events
            .iter()
            .try_for_each(|fd| perf::enable(fd, true))
            .map_err(|source| JourneyError::Control { source })
    }

    /// Stops every event and detaches every program (the rings keep what
    /// they hold).
    pub fn disable(&mut self) -> Result<(), JourneyError> {
        if let Some(p) = self.programs.as_mut() {
            p.detach();
        }
        self.events
            .iter()
            .try_for_each(|fd| perf::enable(fd, false))
            .map_err(|source| JourneyError::Control { source })
    }

    /// How the events were recorded, in words (for the result).
    pub fn method(&self) -> String {
        let perf = "perf_event_open on tracepoints, raw samples, one ring per CPU, polled (no \
                    wake-up per sample)";
        if self.programs_opened.is_empty() {
            match &self.fallback {
                Some(why) => format!("{perf}; tp_btf programs not used: {why}"),
                None => perf.to_string(),
            }
        } else {
            format!(
                "tp_btf programs assembled in linerate (filter on the length in BPF — the \
                 events without an skb only while a probe's netif_receive_skb armed their CPU —, \
                 then bpf_ringbuf_output without wake-up; time bpf_ktime_get_ns) for {}; {perf} \
                 for the others",
                self.programs_opened.join(", ")
            )
        }
    }

    /// Moves what the rings hold into this process (call often enough that
    /// a ring never fills: 1 MiB each).
    pub fn poll(&mut self) -> usize {
        let programs = self
            .programs
            .as_ref()
            .map_or(0, |p| p.drain(&mut self.program_events));
        programs
            + self
                .rings
                .iter()
                .zip(self.bytes.iter_mut())
                .map(|(r, b)| r.drain(b))
                .sum::<usize>()
    }

    /// Every event recorded (sorted by time) and the samples the kernel lost.
    pub fn events(&mut self) -> (Vec<Event>, u64) {
        self.poll();
        let mut events = Vec::new();
        let mut lost = 0;
        for b in &self.bytes {
            let RingRecords {
                samples, lost: l, ..
            } = parse_ring(b);
            lost += l;
            events.extend(samples.iter().filter_map(|s| self.decoder.decode(s)));
        }
        events.append(&mut self.program_events);
        events.sort_by_key(|e| e.time_ns);
        (events, lost)
    }

    /// Each `tp_btf` program's tracepoint and run statistics so far (empty
    /// with perf only).
    pub(crate) fn program_stats(&self) -> Result<Vec<(String, RunStats)>, JourneyError> {
        self.programs.as_ref().map_or(Ok(Vec::new()), |p| {
            p.run_stats().map_err(|source| JourneyError::Btf { source })
        })
    }

    /// The `tp_btf` programs' runs the kernel skipped so far (see
    /// `TracerInfo::recursion_misses`; empty with perf only).
    pub(crate) fn recursion_misses(&self) -> std::collections::BTreeMap<String, u64> {
        self.programs
            .as_ref()
            .map_or_else(Default::default, BtfPrograms::recursion_misses)
    }

    /// Open perf event descriptors and attached programs (for tests: zero
    /// after drop).
    pub fn descriptors(&self) -> usize {
        self.events.len() + self.programs.as_ref().map_or(0, BtfPrograms::attached)
    }
}

/// Why [`Backend::Auto`] fell back to perf, in one line.
fn fallback_reason(e: &BtfTracerError) -> String {
    linerate_core::error::chain(e)
}

fn open_error(tp: &Tracepoint, cpu: u32, source: io::Error) -> JourneyError {
    match source.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => JourneyError::Permission {
            name: tp.path.to_string(),
            source,
        },
        _ => JourneyError::Open {
            name: tp.path.to_string(),
            cpu,
            source,
        },
    }
}
