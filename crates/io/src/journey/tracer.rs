//! The tracer: every tracepoint of a journey opened on every CPU with its
//! in-kernel filter, one ring per CPU, drained by polling.

use std::ffi::CString;
use std::io;
use std::os::fd::OwnedFd;

use linerate_core::journey::format::{parse_ring, Format, RingRecords};
use linerate_core::journey::{Decoder, Event, FilterKind, Tracepoint};

use super::tracefs::Tracefs;
use super::JourneyError;
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
            FilterKind::None => None,
        }
    }
}

/// The open tracer. Dropping it closes every event (tracing stops).
#[derive(Debug)]
pub struct Tracer {
    events: Vec<OwnedFd>,
    rings: Vec<perf::Ring>,
    bytes: Vec<Vec<u8>>,
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
        let cpus = perf::cpu_count();
        let mut t = Self {
            events: Vec::new(),
            rings: Vec::new(),
            bytes: vec![Vec::new(); cpus as usize],
            decoder: Decoder::new(),
            opened: Vec::new(),
            missing: Vec::new(),
            filters: Vec::new(),
            cpus,
        };
        let mut leaders: Vec<Option<usize>> = vec![None; cpus as usize];
        for tp in tracepoints {
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

    /// Starts every event.
    pub fn enable(&self) -> io::Result<()> {
        self.events.iter().try_for_each(|fd| perf::enable(fd, true))
    }

    /// Stops every event (the rings keep what they hold).
    pub fn disable(&self) -> io::Result<()> {
        self.events
            .iter()
            .try_for_each(|fd| perf::enable(fd, false))
    }

    /// Moves what the rings hold into this process (call often enough that
    /// a ring never fills: 1 MiB each).
    pub fn poll(&mut self) -> usize {
        self.rings
            .iter()
            .zip(self.bytes.iter_mut())
            .map(|(r, b)| r.drain(b))
            .sum()
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
        events.sort_by_key(|e| e.time_ns);
        (events, lost)
    }

    /// Open perf event descriptors (for tests: zero after drop).
    pub fn descriptors(&self) -> usize {
        self.events.len()
    }
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
