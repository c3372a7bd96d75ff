//! The `tp_btf` half of the tracer: one BPF program per length-filtered
//! tracepoint (see `crate::sys::tpbtf`), the filter run before anything is
//! written, all programs writing into one BPF ring buffer.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::sync::OnceLock;

use linerate_core::journey::btf::Btf;
use linerate_core::journey::format::Format;
use linerate_core::journey::{record, Event, Point, Tracepoint};

use super::tracer::Filters;
use crate::sys::bpf::{BpfError, RunStats};
use crate::sys::tpbtf::{
    self, After, Arm, Closes, DevOffsets, Dropped, GatedSpec, HeaderAt, IfaceMapFds, IfaceSpec,
    ProgSpec, Ringbuf, Source,
};
use linerate_core::journey::filter::IfaceFilter;

/// Where the running kernel publishes its BTF.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";
/// Bytes of the ring buffer shared by every program.
pub const RINGBUF_BYTES: u32 = 4 << 20;

/// Why the `tp_btf` programs could not be used.
#[derive(Debug, thiserror::Error)]
pub enum BtfTracerError {
    /// No kernel BTF.
    #[error("cannot read the kernel's BTF at {VMLINUX_BTF}")]
    Read {
        /// The error.
        source: io::Error,
    },
    /// The BTF did not parse.
    #[error("cannot parse the kernel's BTF")]
    Parse {
        /// What is wrong.
        source: linerate_core::journey::btf::BtfError,
    },
    /// The BTF lacks a type or member the programs need.
    #[error("the kernel's BTF has no {0}")]
    Missing(String),
    /// The kernel refused a program, the map or the attachment.
    #[error("tracepoint {name}")]
    Bpf {
        /// `SYSTEM/NAME`.
        name: String,
        /// The bpf(2) error.
        source: BpfError,
    },
}

/// The kernel's BTF, read and parsed once per process.
fn vmlinux() -> Result<&'static Btf, BtfTracerError> {
    static BTF: OnceLock<Result<Btf, String>> = OnceLock::new();
    let parsed = BTF.get_or_init(|| {
        let bytes = std::fs::read(VMLINUX_BTF).map_err(|e| format!("read: {e}"))?;
        Btf::parse(&bytes).map_err(|e| format!("parse: {e}"))
    });
    match parsed {
        Ok(b) => Ok(b),
        // The first failure is kept as text; report it again as an error.
        Err(e) if e.starts_with("read: ") => Err(BtfTracerError::Read {
            source: io::Error::other(e["read: ".len()..].to_string()),
        }),
        Err(e) => Err(BtfTracerError::Missing(format!("usable BTF ({e})"))),
    }
}

/// Where a tracepoint's program finds the length and the device, for the
/// tracepoints run as `tp_btf` programs (None: left to perf).
fn sources(point: Point, skb_len: i16, skb_dev: i16) -> Option<Spec> {
    let plain = |(len, dev)| Spec {
        len,
        dev,
        object_arg: 0,
        object_member: None,
        drop_args: None,
    };
    Some(plain(match point {
        // TP_PROTO(struct sk_buff *skb)
        Point::NetDevQueue | Point::NetifRx | Point::NetifReceiveSkb | Point::NapiGroReceive => (
            Source::Arg0Member(skb_len),
            Some(Source::Arg0Member(skb_dev)),
        ),
        // TP_PROTO(const struct sk_buff *skb, const struct net_device *dev)
        Point::NetDevStartXmit => (Source::Arg0Member(skb_len), Some(Source::Arg(1))),
        // TP_PROTO(skb, int rc, struct net_device *dev, unsigned int skb_len):
        // the skb may be freed by then; its length is an argument.
        Point::NetDevXmit => (Source::Arg(3), Some(Source::Arg(2))),
        // TP_PROTO(const struct sk_buff *skb, int len)
        Point::SkbCopyDatagramIovec => (Source::Arg(1), None),
        // TP_PROTO(struct sock *sk, int ret, int flags)
        Point::SockRecvLength => (Source::Arg(1), None),
        // TP_PROTO(struct sk_buff *skb, void *location, enum skb_drop_reason
        // reason, struct sock *rx_sk): filtered on the length the buffer has
        // where it is dropped (every layer's length of a probe is in range).
        Point::KfreeSkb => {
            return Some(Spec {
                len: Source::Arg0Member(skb_len),
                dev: None,
                object_arg: 0,
                object_member: None,
                drop_args: Some((2, 1)),
            })
        }
        // TP_PROTO(int rc, struct sock *sk, struct sk_buff *skb): a UDP
        // socket refused the datagram. Filtered on its length like the
        // others, so a flood of other traffic dropped there costs no record.
        Point::UdpFailQueueRcvSkb => {
            return Some(Spec {
                len: Source::Arg0Member(skb_len),
                dev: None,
                object_arg: 2,
                object_member: None,
                drop_args: None,
            })
        }
        // TP_PROTO(struct sock *sk, const struct sk_buff *skb): the skb's
        // length there is the TCP header and the payload.
        Point::SockRcvqueueFull | Point::TcpProbe => {
            return Some(Spec {
                len: Source::Arg0Member(skb_len),
                dev: None,
                object_arg: 1,
                object_member: None,
                drop_args: None,
            })
        }
        _ => return None,
    }))
}

/// Where a program finds what it reads.
struct Spec {
    len: Source,
    dev: Option<Source>,
    object_arg: i16,
    object_member: Option<i16>,
    drop_args: Option<(i16, i16)>,
}

/// Offsets the `--iface` chain-only programs read.
#[derive(Debug, Clone, Copy, Default)]
struct ChainOffsets {
    /// `sk_buff.len`.
    skb_len: i16,
    /// `netdev_queue.dev`.
    txq_dev: i16,
    /// `sock.sk_receive_queue.prev`: the skb queued last.
    rx_tail: i16,
}

/// The `--iface` tracepoints that follow a packet by its skb address only
/// (their programs read no headers: [`HeaderAt::Nowhere`]), where they
/// find the skb, its length and the device.
fn chain_sources(point: Point, o: ChainOffsets) -> Option<Spec> {
    let (object_arg, object_member, dev) = match point {
        // TP_PROTO(struct Qdisc *q, const struct netdev_queue *txq,
        // struct sk_buff *skb)
        Point::QdiscEnqueue => (2, None, Some(Source::ArgMember(1, o.txq_dev))),
        // TP_PROTO(q, txq, int packets, struct sk_buff *skb): skb may be
        // NULL (an empty queue), which is in no chain.
        Point::QdiscDequeue => (3, None, Some(Source::ArgMember(1, o.txq_dev))),
        // TP_PROTO(const struct sock *sk), called right after the skb was
        // appended to the receive queue (UDP, TCP, raw, ICMP): the queue's
        // tail is that skb. The skb's device is not read: UDP reuses the
        // field (`dev_scratch`).
        Point::SkDataReady => (0, Some(o.rx_tail), None),
        // TP_PROTO(struct sk_buff *skb, void *location)
        Point::ConsumeSkb => (0, None, None),
        _ => return None,
    };
    Some(Spec {
        len: Source::Arg0Member(o.skb_len),
        dev,
        object_arg,
        object_member,
        drop_args: None,
    })
}

/// Offsets the gated programs read.
#[derive(Debug, Clone, Copy, Default)]
struct GatedOffsets {
    /// `napi_struct.dev`.
    napi_dev: i16,
    /// `fib_nh_common.nhc_dev`.
    nhc_dev: i16,
    /// `fib6_result.nh`.
    fib6_nh: i16,
    /// `fib6_nh.nh_common.nhc_dev`.
    fib6_nh_dev: i16,
}

/// The events without an skb, run as gated programs (written only while a
/// probe's receive has armed their CPU: `crate::sys::tpbtf::gated_program`),
/// and what their records hold, under record `code`. `irq:softirq_entry`
/// is not one: its program only notes the time, which a probe's receive
/// writes.
fn gated_spec(point: Point, o: GatedOffsets, code: u32, exit_opened: bool) -> Option<GatedSpec> {
    let spec = |len, dev| GatedSpec {
        code,
        net_rx_exit: false,
        len,
        dev,
        open_ns: tpbtf::GATE_OPEN_NS,
        closes: Closes::No,
    };
    // Without the softirq's exit to disarm the gate (a context event), the
    // lookups do (see `Closes`); else every later lookup would read the
    // clock, and those within the bound write a record.
    let fib = |dev, closes| GatedSpec {
        open_ns: tpbtf::FIB_OPEN_NS,
        closes: if exit_opened { Closes::No } else { closes },
        ..spec(None, Some(dev))
    };
    Some(match point {
        // TP_PROTO(u32 tb_id, const struct flowi4 *flp,
        // const struct fib_nh_common *nhc, int err): the result's device
        // (none when the lookup failed).
        Point::FibTableLookup => fib(Source::ArgMember(2, o.nhc_dev), Closes::OnDevice),
        // TP_PROTO(const struct net *net, const struct fib6_result *res,
        // struct fib6_table *table, const struct flowi6 *flp): the result's
        // next hop's device (none when the lookup found no next hop).
        Point::Fib6TableLookup => fib(
            Source::ArgMember2(1, o.fib6_nh, o.fib6_nh_dev),
            Closes::WhenStale,
        ),
        // TP_PROTO(struct napi_struct *napi, int work, int budget): the
        // packets it handled, its device (none for a CPU's backlog).
        Point::NapiPoll => spec(Some(Source::Arg(1)), Some(Source::ArgMember(0, o.napi_dev))),
        // TP_PROTO(unsigned int vec_nr)
        Point::SoftirqExitNetRx => GatedSpec {
            net_rx_exit: true,
            ..spec(None, None)
        },
        _ => return None,
    })
}

/// True for the tracepoints the `tp_btf` tracer runs as programs (the
/// others go to perf).
pub fn runs_as_program(point: Point) -> bool {
    sources(point, 0, 0).is_some()
        || gated_spec(point, GatedOffsets::default(), 0, false).is_some()
        || point == Point::SoftirqNetRx
}

fn offset(btf: &Btf, strukt: &str, path: &[&str]) -> Result<i16, BtfTracerError> {
    btf.member_path(strukt, path)
        .and_then(|m| i16::try_from(m.offset).ok())
        .ok_or_else(|| BtfTracerError::Missing(format!("{strukt}.{}", path.join("."))))
}

/// The loaded programs and their ring.
#[derive(Debug)]
pub struct BtfPrograms {
    ring: Ringbuf,
    progs: Vec<(String, OwnedFd)>,
    links: Vec<OwnedFd>,
    /// The tracepoints run as programs (`net/net_dev_queue`…).
    pub opened: Vec<String>,
    /// Optional tracepoints the kernel's BTF lacks (not run).
    pub missing: Vec<String>,
    /// True when the records carry the device's namespace inode.
    pub netns: bool,
    /// `skb:kfree_skb`'s format, for naming drop reasons.
    pub reasons: Option<Format>,
    /// `--iface`: the chain map and the lost-record counter.
    iface_maps: Option<IfaceMapFds>,
    /// The per-CPU gate of the events without an skb (None: none opened).
    gate: Option<OwnedFd>,
    /// Whether a probe is in flight, for the NET_RX softirq entry (opened
    /// with the gate).
    inflight: Option<OwnedFd>,
}

/// Where an `--iface` program reads the IP header at `point`, for the
/// points that carry an skb (None: not an `--iface` tracepoint).
fn header_at(point: Point, data: i16, head: i16, nh: i16) -> Option<HeaderAt> {
    Some(match point {
        // Receive: `eth_type_trans` pulled the link header, `data` is the
        // IP header (`network_header` is set only after the tracepoint).
        Point::NetifRx | Point::NetifReceiveSkb | Point::NapiGroReceive => HeaderAt::Data(data),
        // Transmit, delivery, drops: the IP layer set `network_header`.
        Point::NetDevQueue
        | Point::NetDevStartXmit
        | Point::SkbCopyDatagramIovec
        | Point::KfreeSkb
        | Point::SockRcvqueueFull => HeaderAt::Network(head, nh),
        // The driver has the skb by then (veth: handed to the peer, maybe
        // freed): followed by its chain only.
        Point::NetDevXmit => HeaderAt::Nowhere,
        _ => return None,
    })
}

/// True for the tracepoints an `--iface` journey runs (as `tp_btf`
/// programs; it opens no perf event).
pub fn runs_for_iface(point: Point) -> bool {
    (runs_as_program(point) && header_at(point, 0, 0, 0).is_some())
        || chain_sources(point, ChainOffsets::default()).is_some()
}

impl BtfPrograms {
    /// Loads (verifies) a program for every tracepoint of `tps` that
    /// [`runs_as_program`], filtering on `filters.len`; nothing is attached
    /// until [`BtfPrograms::attach`].
    pub fn load(tps: &[Tracepoint], filters: Filters) -> Result<Self, BtfTracerError> {
        let btf = vmlinux()?;
        let skb_len = offset(btf, "sk_buff", &["len"])?;
        let skb_dev = offset(btf, "sk_buff", &["dev"])?;
        let skb_iif = offset(btf, "sk_buff", &["skb_iif"]).ok();
        let mut dev = DevOffsets {
            ifindex: Some(offset(btf, "net_device", &["ifindex"])?),
            name: Some(offset(btf, "net_device", &["name"])?),
            netns: None,
        };
        if let (Ok(net), Ok(inum)) = (
            offset(btf, "net_device", &["nd_net", "net"]),
            offset(btf, "net", &["ns", "inum"]),
        ) {
            dev.netns = Some((net, inum));
        }
        let mut out = Self::empty(None)?;
        let (lo, hi) = filters.len;
        let gated = tps
            .iter()
            .any(|t| runs_as_program(t.point) && t.point.attributed());
        if gated {
            out.gate = Some(tpbtf::gate_map().map_err(|source| BtfTracerError::Bpf {
                name: "gate map".into(),
                source,
            })?);
            out.inflight = Some(tpbtf::inflight_map().map_err(|source| BtfTracerError::Bpf {
                name: "in-flight map".into(),
                source,
            })?);
        }
        let gate_fd = out.gate.as_ref().map(|g| g.as_raw_fd());
        let inflight_fd = out.inflight.as_ref().map(|g| g.as_raw_fd());
        let arm = match (gate_fd, inflight_fd, record::code_of(Point::SoftirqNetRx)) {
            (Some(gate), Some(inflight), Some(softirq_code)) => Some(Arm {
                gate,
                softirq_code,
                inflight,
            }),
            _ => None,
        };
        // Whether the NET_RX softirq's exit disarms the gates (else the FIB
        // lookups do: see `gated_spec`).
        let exit_opened = tps.iter().any(|t| t.point == Point::SoftirqExitNetRx);
        for tp in tps {
            if !runs_as_program(tp.point) {
                continue;
            }
            let typedef = match trace_type(btf, tp) {
                Ok(t) => t,
                // An optional tracepoint this kernel lacks: left to the
                // result's `missing`.
                Err(_) if !tp.required => {
                    out.missing.push(tp.path.to_string());
                    continue;
                }
                Err(e) => return Err(e),
            };
            if let Some(gate) = gate_fd.filter(|_| tp.point.attributed()) {
                let (name, id) = typedef;
                let insns = if let (Point::SoftirqNetRx, Some(inflight)) = (tp.point, inflight_fd) {
                    tpbtf::softirq_entry_program(gate, inflight)
                } else {
                    // The IPv6 result's offsets only where they are read
                    // (a kernel without IPv6 has no such types).
                    let (fib6_nh, fib6_nh_dev) = if tp.point == Point::Fib6TableLookup {
                        (
                            offset(btf, "fib6_result", &["nh"])?,
                            offset(btf, "fib6_nh", &["nh_common", "nhc_dev"])?,
                        )
                    } else {
                        (0, 0)
                    };
                    let o = GatedOffsets {
                        napi_dev: offset(btf, "napi_struct", &["dev"])?,
                        nhc_dev: offset(btf, "fib_nh_common", &["nhc_dev"])?,
                        fib6_nh,
                        fib6_nh_dev,
                    };
                    let code = record::code_of(tp.point)
                        .ok_or_else(|| BtfTracerError::Missing(tp.path.to_string()))?;
                    let spec = gated_spec(tp.point, o, code, exit_opened)
                        .ok_or_else(|| BtfTracerError::Missing(tp.path.to_string()))?;
                    tpbtf::gated_program(&spec, &dev, out.ring.fd(), gate)
                };
                out.add(tp, &insns, (name, id))?;
                continue;
            }
            let Some(src) = sources(tp.point, skb_len, skb_dev) else {
                continue;
            };
            let Some(code) = record::code_of(tp.point) else {
                continue;
            };
            let (name, id) = typedef;
            let after = match (tp.point, &arm) {
                (Point::NetifReceiveSkb, Some(arm)) => After::Arm(arm),
                (Point::NetDevQueue, Some(arm)) => After::Inflight(arm.inflight),
                (Point::KfreeSkb, Some(arm)) => match (skb_iif, dev.ifindex) {
                    (Some(skb_iif), Some(ifindex)) => After::Dropped(Dropped {
                        inflight: arm.inflight,
                        skb_dev,
                        skb_iif,
                        ifindex,
                    }),
                    // Without them a drop is left counted: clock reads only.
                    _ => After::Nothing,
                },
                _ => After::Nothing,
            };
            let spec = ProgSpec {
                code,
                len: src.len,
                dev: src.dev,
                object_arg: src.object_arg,
                object_member: src.object_member,
                drop_args: src.drop_args,
                lo,
                hi,
            };
            let fd = load_spec(&spec, &dev, out.ring.fd(), id, name, after).or_else(|e| {
                // A kernel whose verifier will not walk to the namespace:
                // the same program without it.
                if dev.netns.is_some() {
                    let without = DevOffsets { netns: None, ..dev };
                    let fd = load_spec(&spec, &without, out.ring.fd(), id, name, after)?;
                    dev = without;
                    Ok(fd)
                } else {
                    Err(e)
                }
            });
            let fd = fd.map_err(|source| BtfTracerError::Bpf {
                name: tp.path.to_string(),
                source,
            })?;
            out.progs.push((tp.path.to_string(), fd));
            out.opened.push(tp.path.to_string());
        }
        out.netns = dev.netns.is_some();
        Ok(out)
    }

    fn empty(iface_maps: Option<IfaceMapFds>) -> Result<Self, BtfTracerError> {
        let ring = Ringbuf::new(RINGBUF_BYTES).map_err(|source| BtfTracerError::Bpf {
            name: "ring buffer".into(),
            source,
        })?;
        Ok(Self {
            ring,
            progs: Vec::new(),
            links: Vec::new(),
            opened: Vec::new(),
            missing: Vec::new(),
            netns: false,
            reasons: None,
            iface_maps,
            gate: None,
            inflight: None,
        })
    }

    /// Loads an `--iface` program for every tracepoint of `tps` that
    /// [`runs_for_iface`]: each reads the packet's headers and judges
    /// `filter` in the kernel (see `crate::sys::tpbtf::iface_program`).
    pub fn load_iface(tps: &[Tracepoint], filter: &IfaceFilter) -> Result<Self, BtfTracerError> {
        let btf = vmlinux()?;
        let skb_len = offset(btf, "sk_buff", &["len"])?;
        let skb_dev = offset(btf, "sk_buff", &["dev"])?;
        let data = offset(btf, "sk_buff", &["data"])?;
        let head = offset(btf, "sk_buff", &["head"])?;
        let nh = offset(btf, "sk_buff", &["network_header"])?;
        let dev = DevOffsets {
            ifindex: Some(offset(btf, "net_device", &["ifindex"])?),
            name: Some(offset(btf, "net_device", &["name"])?),
            netns: Some((
                offset(btf, "net_device", &["nd_net", "net"])?,
                offset(btf, "net", &["ns", "inum"])?,
            )),
        };
        let maps = IfaceMapFds::new().map_err(|source| BtfTracerError::Bpf {
            name: "chain map".into(),
            source,
        })?;
        let mut out = Self::empty(Some(maps))?;
        let fds = out
            .iface_maps
            .as_ref()
            .map(|m| m.maps(out.ring.fd()))
            .ok_or_else(|| BtfTracerError::Missing("chain map".into()))?;
        let chain = ChainOffsets {
            skb_len,
            txq_dev: offset(btf, "netdev_queue", &["dev"])?,
            rx_tail: offset(btf, "sock", &["sk_receive_queue", "prev"])?,
        };
        for tp in tps {
            let Some(code) = record::code_of(tp.point) else {
                continue;
            };
            let by_headers =
                sources(tp.point, skb_len, skb_dev).zip(header_at(tp.point, data, head, nh));
            let Some((src, header)) = by_headers
                .or_else(|| chain_sources(tp.point, chain).map(|s| (s, HeaderAt::Nowhere)))
            else {
                continue;
            };
            let (name, id) = trace_type(btf, tp)?;
            let spec = IfaceSpec {
                base: ProgSpec {
                    code,
                    len: src.len,
                    dev: src.dev,
                    object_arg: src.object_arg,
                    object_member: src.object_member,
                    drop_args: src.drop_args,
                    lo: 0,
                    hi: 0,
                },
                header,
                filter,
                forget: matches!(tp.point, Point::KfreeSkb | Point::ConsumeSkb),
            };
            let insns = tpbtf::iface_program(&spec, &dev, fds);
            out.add(tp, &insns, (name, id))?;
        }
        out.netns = true;
        Ok(out)
    }

    /// Loads `insns` for `tp` (its name and `btf_trace_` typedef id) and
    /// keeps it, to attach later.
    fn add(
        &mut self,
        tp: &Tracepoint,
        insns: &[crate::sys::bpf::BpfInsn],
        (name, id): (&str, u32),
    ) -> Result<(), BtfTracerError> {
        let short: String = name.chars().take(12).collect();
        let fd = tpbtf::load(insns, id, &format!("lr_{short}")).map_err(|source| {
            BtfTracerError::Bpf {
                name: tp.path.to_string(),
                source,
            }
        })?;
        self.progs.push((tp.path.to_string(), fd));
        self.opened.push(tp.path.to_string());
        Ok(())
    }

    /// `--iface`: records the ring refused so far (0 for a probe journey).
    pub fn lost(&self) -> Result<u64, BtfTracerError> {
        self.iface_maps.as_ref().map_or(Ok(0), |m| {
            m.lost().map_err(|source| BtfTracerError::Bpf {
                name: "lost-record counter".into(),
                source,
            })
        })
    }

    /// Attaches every program (tracing starts).
    pub fn attach(&mut self) -> Result<(), BtfTracerError> {
        for (name, prog) in &self.progs {
            let link = tpbtf::attach(prog).map_err(|source| BtfTracerError::Bpf {
                name: name.clone(),
                source,
            })?;
            self.links.push(link);
        }
        Ok(())
    }

    /// Detaches every program (the ring keeps what it holds).
    pub fn detach(&mut self) {
        self.links.clear();
    }

    /// Decodes every record written since the last call into `out`.
    pub fn drain(&self, out: &mut Vec<Event>) -> usize {
        let name = |r: u64| {
            self.reasons
                .as_ref()
                .and_then(|f| f.symbol("reason", r))
                .map(str::to_string)
        };
        self.ring.drain(|b| out.extend(record::decode(b, name)))
    }

    /// Each program's tracepoint and its run statistics so far (counted
    /// only while the kernel's BPF statistics are on).
    pub(crate) fn run_stats(&self) -> Result<Vec<(String, RunStats)>, BtfTracerError> {
        self.progs
            .iter()
            .map(|(name, fd)| {
                crate::sys::bpf::run_stats(fd)
                    .map(|s| (name.clone(), s))
                    .map_err(|source| BtfTracerError::Bpf {
                        name: name.clone(),
                        source,
                    })
            })
            .collect()
    }

    /// Each program's runs skipped by the kernel so far (already running
    /// on that CPU), for those with any; a program whose statistics cannot
    /// be read counts as none.
    pub(crate) fn recursion_misses(&self) -> BTreeMap<String, u64> {
        self.progs
            .iter()
            .filter_map(|(name, fd)| {
                let misses = crate::sys::bpf::run_stats(fd).ok()?.recursion_misses;
                (misses > 0).then(|| (name.clone(), misses))
            })
            .collect()
    }

    /// Programs attached now (for tests: zero after detach or drop).
    pub fn attached(&self) -> usize {
        self.links.len()
    }
}

/// A program that returns at once, attached to one tracepoint: its run
/// statistics are what the statistics themselves (two `sched_clock` reads)
/// add to every program's measured time, the floor of the others. Detached
/// on drop.
#[derive(Debug)]
pub(crate) struct EmptyProgram {
    prog: OwnedFd,
    _link: OwnedFd,
}

impl EmptyProgram {
    /// Loads and attaches the empty program on `tp`.
    pub(crate) fn attach(tp: &Tracepoint) -> Result<Self, BtfTracerError> {
        let btf = vmlinux()?;
        let (_, id) = trace_type(btf, tp)?;
        let err = |source| BtfTracerError::Bpf {
            name: tp.path.to_string(),
            source,
        };
        let insns = [
            crate::sys::bpf::BpfInsn::mov64_imm(0, 0),
            crate::sys::bpf::BpfInsn::exit(),
        ];
        let prog = tpbtf::load(&insns, id, "lr_empty").map_err(err)?;
        let link = tpbtf::attach(&prog).map_err(err)?;
        Ok(Self { prog, _link: link })
    }

    /// Its run statistics so far.
    pub(crate) fn run_stats(&self) -> Result<RunStats, BtfTracerError> {
        crate::sys::bpf::run_stats(&self.prog).map_err(|source| BtfTracerError::Bpf {
            name: "empty program".into(),
            source,
        })
    }
}

/// The tracepoint's name and its `btf_trace_<name>` typedef.
fn trace_type<'a>(btf: &Btf, tp: &'a Tracepoint) -> Result<(&'a str, u32), BtfTracerError> {
    let name = tp.path.rsplit('/').next().unwrap_or(tp.path);
    let id = btf
        .trace_typedef(name)
        .ok_or_else(|| BtfTracerError::Missing(format!("btf_trace_{name}")))?;
    Ok((name, id))
}

fn load_spec(
    spec: &ProgSpec,
    dev: &DevOffsets,
    ring: i32,
    id: u32,
    name: &str,
    after: After<'_>,
) -> Result<OwnedFd, BpfError> {
    let insns = tpbtf::program(spec, dev, ring, after);
    let short: String = name.chars().take(12).collect();
    tpbtf::load(&insns, id, &format!("lr_{short}"))
}
