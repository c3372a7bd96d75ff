//! BTF raw tracepoint (`tp_btf`) programs for the journey tracer,
//! assembled here as raw eBPF (no compiler at run time), and the BPF ring
//! buffer they write to.
//!
//! Each program runs on one tracepoint. It reads the packet's length (the
//! skb's `len`, or a length argument of the tracepoint), returns at once
//! when it is outside the probes' lengths — so a packet that is not a probe
//! costs a few instructions and writes nothing — and otherwise writes one
//! fixed record (layout: `linerate_core::journey::record`) with
//! `bpf_ringbuf_output(…, BPF_RB_NO_WAKEUP)`: time from `bpf_ktime_get_ns`
//! (CLOCK_MONOTONIC), the skb's address, the length, the CPU, and the
//! device's ifindex, namespace inode and name. Member offsets
//! (`sk_buff.len`, `sk_buff.dev`, `net_device.ifindex`…) come from the
//! running kernel's BTF; the program attaches to the typedef
//! `btf_trace_<tracepoint>` (`attach_btf_id`) with
//! `BPF_RAW_TRACEPOINT_OPEN`. Closing the link's descriptor detaches it;
//! the kernel does that also when the process dies.

use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use std::net::IpAddr;

use linerate_core::journey::filter::{
    ip_protocols, IfaceFilter, IPPROTO_TCP, IPPROTO_UDP, IPV6_HEADER,
};
use linerate_core::journey::record;

use super::bpf::{bpf, BpfError, BpfInsn, BpfJump, BpfSize, MapCreateAttr};
use super::syscall;

/// `BPF_MAP_CREATE`.
const BPF_MAP_CREATE: libc::c_long = 0;
/// `BPF_RAW_TRACEPOINT_OPEN`.
const BPF_RAW_TRACEPOINT_OPEN: libc::c_long = 17;
/// `BPF_MAP_TYPE_RINGBUF` (Linux 5.8).
const BPF_MAP_TYPE_RINGBUF: u32 = 27;
/// `BPF_PROG_TYPE_TRACING`.
const BPF_PROG_TYPE_TRACING: u32 = 26;
/// `BPF_TRACE_RAW_TP` (enum bpf_attach_type): a `tp_btf` program.
const BPF_TRACE_RAW_TP: u32 = 23;
/// Helper ids (enum bpf_func_id).
const FN_KTIME_GET_NS: i32 = 5;
const FN_GET_SMP_PROCESSOR_ID: i32 = 8;
const FN_PROBE_READ_KERNEL: i32 = 113;
const FN_RINGBUF_OUTPUT: i32 = 130;
/// `BPF_RB_NO_WAKEUP`: no wake-up of a waiting reader per record.
const BPF_RB_NO_WAKEUP: i32 = 1;
/// Ring record header bits (`BPF_RINGBUF_BUSY_BIT`, `_DISCARD_BIT`).
const RB_BUSY: u32 = 1 << 31;
const RB_DISCARD: u32 = 1 << 30;
/// `BPF_RINGBUF_HDR_SZ`.
const RB_HDR: u64 = 8;

/// Where a program finds a value: a member of the first argument (byte
/// offset) or the n-th argument itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// `*(object + offset)`, the object being argument
    /// [`ProgSpec::object_arg`].
    Arg0Member(i16),
    /// Argument `n` (0-based).
    Arg(i16),
    /// `*(argument n + offset)`: a member of another argument (the
    /// device of a qdisc event's `netdev_queue`).
    ArgMember(i16, i16),
    /// `*(*(argument n + first) + second)`: a member of a pointer member of
    /// an argument (an IPv6 FIB result's next hop's device); only as a
    /// record's device, each pointer on the way checked for NULL.
    ArgMember2(i16, i16, i16),
}

/// Offsets in `struct net_device` (and below) of what a record shows of a
/// device; each `None` is left zero in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct DevOffsets {
    /// `net_device.ifindex`.
    pub ifindex: Option<i16>,
    /// `net_device.name`.
    pub name: Option<i16>,
    /// `net_device.nd_net.net` and `net.ns.inum`.
    pub netns: Option<(i16, i16)>,
}

/// One tracepoint's program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProgSpec {
    /// The tracepoint's index in `TRACEPOINTS` (the record's code).
    pub code: u32,
    /// Where the length the filter compares is.
    pub len: Source,
    /// Where the device pointer is (None: the record has no device).
    pub dev: Option<Source>,
    /// The argument whose members `Arg0Member` reads and whose address
    /// the record holds (0: the first).
    pub object_arg: i16,
    /// The object is not that argument but the pointer at this offset in
    /// it (`sk_data_ready`: the tail of the socket's receive queue, the
    /// skb just queued).
    pub object_member: Option<i16>,
    /// `kfree_skb`: the arguments holding the drop reason and location.
    pub drop_args: Option<(i16, i16)>,
    /// Lengths kept: `lo..=hi`.
    pub lo: u32,
    /// See `lo`.
    pub hi: u32,
}

// Registers (r6–r9 survive helper calls).
const CTX: u8 = 6;
const ARG0: u8 = 7;
const LEN: u8 = 8;
const DEV: u8 = 9;
const FP: u8 = 10;

/// The record's place on the stack: `r10 - SIZE`.
fn slot(field: i16) -> i16 {
    field - record::SIZE
}

fn load_value(into: u8, from: Source, size: BpfSize) -> Vec<BpfInsn> {
    match from {
        Source::Arg0Member(off) => vec![BpfInsn::ldx(size, into, ARG0, off)],
        // tp_btf arguments are u64 slots of the context.
        Source::Arg(n) => vec![BpfInsn::ldx(BpfSize::Dw, into, CTX, n * 8)],
        Source::ArgMember(n, off) => vec![
            BpfInsn::ldx(BpfSize::Dw, into, CTX, n * 8),
            BpfInsn::ldx(size, into, into, off),
        ],
        // A NULL pointer on the way reads as zero (the kernel's fault
        // handling of BTF pointer loads).
        Source::ArgMember2(n, first, second) => vec![
            BpfInsn::ldx(BpfSize::Dw, into, CTX, n * 8),
            BpfInsn::ldx(BpfSize::Dw, into, into, first),
            BpfInsn::ldx(size, into, into, second),
        ],
    }
}

/// The object (the skb) into `ARG0`, then the length into `LEN`.
fn load_object_and_len(spec: &ProgSpec) -> Vec<BpfInsn> {
    let mut p = vec![
        BpfInsn::mov64_reg(CTX, 1),
        BpfInsn::ldx(BpfSize::Dw, ARG0, CTX, spec.object_arg * 8),
    ];
    if let Some(off) = spec.object_member {
        p.push(BpfInsn::ldx(BpfSize::Dw, ARG0, ARG0, off));
    }
    if spec.object_arg != 0 || spec.object_member.is_some() {
        // An argument the kernel may pass as NULL (`qdisc_dequeue` of an
        // empty queue), or a pointer read from memory: none, no record.
        p.extend([
            BpfInsn::new(JMP_JNE_K, ARG0, 0, 2, 0),
            BpfInsn::mov64_imm(0, 0),
            BpfInsn::exit(),
        ]);
    }
    p.extend(load_value(LEN, spec.len, BpfSize::W));
    if matches!(spec.len, Source::Arg(_)) {
        // An int argument: its low 32 bits (a negative return is huge, so
        // it is filtered out).
        p.push(BpfInsn::mov32_reg(LEN, LEN));
    }
    p
}

/// What a probe's record also does, after it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After<'a> {
    /// Nothing more.
    Nothing,
    /// Arms the CPU's gate (a probe's receive: see [`arm_tail`]).
    Arm(&'a Arm),
    /// Counts a probe in flight in this in-flight map (a probe queued for
    /// transmission: see [`inflight_tail`]).
    Inflight(i32),
    /// Takes a probe off the in-flight count when it is dropped on its way
    /// (a probe's `kfree_skb`: see [`drop_tail`]).
    Dropped(Dropped),
}

/// What a drop's program reads to tell a probe dropped on its way (queued,
/// not yet received) from one dropped after its receive: `sk_buff.skb_iif`
/// (0 until the first receive, then the ifindex of the device last
/// received on), `sk_buff.dev` and `net_device.ifindex`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dropped {
    /// The in-flight map (see [`inflight_map`]).
    pub inflight: i32,
    /// `sk_buff.dev`.
    pub skb_dev: i16,
    /// `sk_buff.skb_iif`.
    pub skb_iif: i16,
    /// `net_device.ifindex`.
    pub ifindex: i16,
}

/// The program of `spec`, writing to ring buffer `map_fd`, then doing
/// `after` for a record written.
pub(crate) fn program(
    spec: &ProgSpec,
    dev: &DevOffsets,
    map_fd: i32,
    after: After<'_>,
) -> Vec<BpfInsn> {
    let mut p = load_object_and_len(spec);
    // The filter: jumps to the end, patched below. The bounds are at most
    // a few thousand bytes; `as i32` keeps them (checked by the caller).
    let mut to_end = vec![p.len()];
    p.push(BpfInsn::jmp_imm(BpfJump::Lt, LEN, spec.lo as i32, 0));
    to_end.push(p.len());
    p.push(BpfInsn::jmp_imm(BpfJump::Gt, LEN, spec.hi as i32, 0));
    // The `--iface` part of the record stays zero.
    p.extend([
        BpfInsn::st_imm(BpfSize::Dw, FP, slot(record::VERSION), 0),
        BpfInsn::st_imm(BpfSize::Dw, FP, slot(record::TRANSPORT), 0),
    ]);
    p.extend(record_tail(spec, dev, map_fd));
    match after {
        After::Nothing => {}
        After::Arm(arm) => p.extend(arm_tail(arm, map_fd)),
        After::Inflight(map) => p.extend(inflight_tail(map)),
        After::Dropped(d) => p.extend(drop_tail(&d)),
    }
    let end = p.len();
    for at in to_end {
        // Jump offsets count from the next instruction; programs are short.
        p[at] = p[at].with_off((end - at - 1) as i16);
    }
    p.extend([BpfInsn::mov64_imm(0, 0), BpfInsn::exit()]);
    p
}

/// The end every program shares: the record's fields (time, CPU, address,
/// length, code, drop reason, device) filled in and written to ring buffer
/// `map_fd`; r0 is then `bpf_ringbuf_output`'s result.
fn record_tail(spec: &ProgSpec, dev: &DevOffsets, map_fd: i32) -> Vec<BpfInsn> {
    let mut p = Vec::new();
    p.extend([
        BpfInsn::stx(BpfSize::Dw, FP, slot(record::ADDR), ARG0),
        BpfInsn::stx(BpfSize::W, FP, slot(record::LEN), LEN),
        BpfInsn::st_imm(BpfSize::W, FP, slot(record::CODE), spec.code as i32),
        BpfInsn::st_imm(BpfSize::W, FP, slot(record::REASON), 0),
        BpfInsn::st_imm(BpfSize::Dw, FP, slot(record::LOCATION), 0),
        BpfInsn::call(FN_KTIME_GET_NS),
        BpfInsn::stx(BpfSize::Dw, FP, slot(record::TIME), 0),
        BpfInsn::call(FN_GET_SMP_PROCESSOR_ID),
        BpfInsn::stx(BpfSize::W, FP, slot(record::CPU), 0),
        BpfInsn::st_imm(BpfSize::W, FP, slot(record::IFINDEX), 0),
        BpfInsn::st_imm(BpfSize::W, FP, slot(record::NETNS), 0),
        BpfInsn::st_imm(BpfSize::Dw, FP, slot(record::NAME), 0),
        BpfInsn::st_imm(BpfSize::Dw, FP, slot(record::NAME) + 8, 0),
    ]);
    if let Some((reason, location)) = spec.drop_args {
        p.extend([
            BpfInsn::ldx(BpfSize::Dw, 1, CTX, reason * 8),
            BpfInsn::stx(BpfSize::W, FP, slot(record::REASON), 1),
            BpfInsn::ldx(BpfSize::Dw, 1, CTX, location * 8),
            BpfInsn::stx(BpfSize::Dw, FP, slot(record::LOCATION), 1),
        ]);
    }
    if let Some(from) = spec.dev {
        let mut block = Vec::new();
        if let Some(off) = dev.ifindex {
            block.push(BpfInsn::ldx(BpfSize::W, 1, DEV, off));
            block.push(BpfInsn::stx(BpfSize::W, FP, slot(record::IFINDEX), 1));
        }
        if let Some((net, inum)) = dev.netns {
            block.push(BpfInsn::ldx(BpfSize::Dw, 1, DEV, net));
            block.push(BpfInsn::ldx(BpfSize::W, 1, 1, inum));
            block.push(BpfInsn::stx(BpfSize::W, FP, slot(record::NETNS), 1));
        }
        if let Some(off) = dev.name {
            block.extend([
                BpfInsn::mov64_reg(1, FP),
                BpfInsn::add64_imm(1, i32::from(slot(record::NAME))),
                BpfInsn::mov64_imm(2, 16),
                BpfInsn::mov64_reg(3, DEV),
                BpfInsn::add64_imm(3, i32::from(off)),
                BpfInsn::call(FN_PROBE_READ_KERNEL),
            ]);
        }
        // No device (a NULL pointer on the way: a failed FIB lookup's
        // next hop, a backlog's NAPI): its fields stay zero. Programs are
        // short: the offsets fit.
        let skip = block.len() as i16;
        match from {
            Source::ArgMember(n, off) => p.extend([
                BpfInsn::ldx(BpfSize::Dw, DEV, CTX, n * 8),
                BpfInsn::new(JMP_JEQ_K, DEV, 0, skip + 2, 0),
                BpfInsn::ldx(BpfSize::Dw, DEV, DEV, off),
            ]),
            Source::ArgMember2(n, first, second) => p.extend([
                BpfInsn::ldx(BpfSize::Dw, DEV, CTX, n * 8),
                BpfInsn::new(JMP_JEQ_K, DEV, 0, skip + 4, 0),
                BpfInsn::ldx(BpfSize::Dw, DEV, DEV, first),
                BpfInsn::new(JMP_JEQ_K, DEV, 0, skip + 2, 0),
                BpfInsn::ldx(BpfSize::Dw, DEV, DEV, second),
            ]),
            other => p.extend(load_value(DEV, other, BpfSize::Dw)),
        }
        p.push(BpfInsn::new(JMP_JEQ_K, DEV, 0, skip, 0));
        p.extend(block);
    }
    p.extend(ring_output(map_fd));
    p
}

/// `bpf_ringbuf_output(ring, record on the stack, no wake-up)`.
fn ring_output(ring: i32) -> Vec<BpfInsn> {
    let mut p = BpfInsn::ld_map_fd(1, ring).to_vec();
    p.extend([
        BpfInsn::mov64_reg(2, FP),
        BpfInsn::add64_imm(2, i32::from(-record::SIZE)),
        BpfInsn::mov64_imm(3, i32::from(record::SIZE)),
        BpfInsn::mov64_imm(4, BPF_RB_NO_WAKEUP),
        BpfInsn::call(FN_RINGBUF_OUTPUT),
    ]);
    p
}

/// Where an `--iface` program finds the packet's IP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeaderAt {
    /// At `skb->data` (`sk_buff.data`'s offset): on receive, after
    /// `eth_type_trans` pulled the link header.
    Data(i16),
    /// At `skb->head + skb->network_header` (the offsets of `head` and
    /// `network_header`); none while `network_header` is unset (0 or ~0).
    Network(i16, i16),
    /// Not read here (the skb may be gone): kept by its chain only.
    Nowhere,
}

/// An `--iface` program: the tracepoint's [`ProgSpec`] (its `lo`/`hi`
/// unused), where the headers are, and the filter's terms.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IfaceSpec<'a> {
    /// Code, length, device, arguments.
    pub base: ProgSpec,
    /// Where the IP header is.
    pub header: HeaderAt,
    /// What must hold.
    pub filter: &'a IfaceFilter,
    /// The buffer is freed here (`kfree_skb`, `consume_skb`): its address
    /// leaves the chain map, so the next buffer at that address is not
    /// taken for this packet.
    pub forget: bool,
}

/// The maps of the `--iface` programs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IfaceMaps {
    /// The ring buffer.
    pub ring: i32,
    /// skb addresses whose headers matched (LRU hash, u64 → u64).
    pub chains: i32,
    /// Records the ring refused (array of one u64).
    pub lost: i32,
}

/// Helper ids of the map calls.
const FN_MAP_LOOKUP_ELEM: i32 = 1;
const FN_MAP_UPDATE_ELEM: i32 = 2;
const FN_MAP_DELETE_ELEM: i32 = 3;

// Opcodes the `--iface` program needs beyond the builders.
const JMP_JA: u8 = 0x05;
const JMP_JEQ_K: u8 = 0x15;
const JMP_JNE_K: u8 = 0x55;
const JMP_JLT_K: u8 = 0xa5;
const JMP_JGT_K: u8 = 0x25;
const JMP_JLT_X: u8 = 0xad;
/// `BPF_JMP | BPF_JEQ | BPF_X`.
const JMP_JEQ_X: u8 = 0x1d;
const JMP32_JEQ_K: u8 = 0x16;
const JMP32_JNE_K: u8 = 0x56;
const ALU64_AND_K: u8 = 0x57;
const ALU64_LSH_K: u8 = 0x67;
const ALU64_RSH_K: u8 = 0x77;
const ALU64_OR_X: u8 = 0x4f;
const ALU64_ADD_X: u8 = 0x0f;
/// `BPF_STX | BPF_ATOMIC | BPF_DW` with `imm = BPF_ADD`.
const ATOMIC_ADD_DW: u8 = 0xdb;
/// `BPF_FETCH`: with [`ATOMIC_ADD_DW`], the source register gets the value
/// from before the add (Linux 5.12).
const BPF_FETCH: i32 = 0x01;
/// `BPF_JMP | BPF_JSLE | BPF_K` (signed).
const JMP_JSLE_K: u8 = 0xd5;
/// `BPF_JMP | BPF_JSGT | BPF_K` (signed).
const JMP_JSGT_K: u8 = 0x65;

// The `--iface` program's stack below the record (`r10 - record::SIZE`).
/// The IP header read (40 bytes: an IPv6 header, or IPv4's first 20 and more).
const IP: i16 = -record::SIZE - 40;
/// The skb address, the chain map's key.
const KEY: i16 = IP - 8;
/// The chain map's value.
const VALUE: i16 = KEY - 8;
/// The header's address, kept across the first read.
const HDR_PTR: i16 = VALUE - 8;
/// The lost counter's key (u32 0).
const LOST_KEY: i16 = HDR_PTR - 8;
/// Bytes of the IP header read.
const IP_READ: i32 = 40;

/// Instructions with forward jumps to labels, patched by [`Asm::finish`].
#[derive(Default)]
struct Asm {
    p: Vec<BpfInsn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, usize)>,
}

impl Asm {
    fn label(&mut self) -> usize {
        self.labels.push(None);
        self.labels.len() - 1
    }

    fn bind(&mut self, l: usize) {
        self.labels[l] = Some(self.p.len());
    }

    fn push(&mut self, i: BpfInsn) {
        self.p.push(i);
    }

    fn extend(&mut self, i: impl IntoIterator<Item = BpfInsn>) {
        self.p.extend(i);
    }

    /// `if reg <op> imm goto l` (`op` a `BPF_K` jump opcode).
    fn jump(&mut self, op: u8, reg: u8, imm: i32, l: usize) {
        self.fixups.push((self.p.len(), l));
        self.p.push(BpfInsn::new(op, reg, 0, 0, imm));
    }

    /// `if dst <op> src goto l` (`op` a `BPF_X` jump opcode).
    fn jump_reg(&mut self, op: u8, dst: u8, src: u8, l: usize) {
        self.fixups.push((self.p.len(), l));
        self.p.push(BpfInsn::new(op, dst, src, 0, 0));
    }

    fn goto(&mut self, l: usize) {
        self.jump(JMP_JA, 0, 0, l);
    }

    fn alu(&mut self, op: u8, dst: u8, src: u8, imm: i32) {
        self.p.push(BpfInsn::new(op, dst, src, 0, imm));
    }

    fn finish(mut self) -> Vec<BpfInsn> {
        for (at, l) in self.fixups {
            // Every label is bound and forward; programs are short.
            let to = self.labels[l].unwrap_or(at + 1);
            self.p[at] = self.p[at].with_off((to - at - 1) as i16);
        }
        self.p
    }
}

/// The program of an `--iface` tracepoint.
///
/// It reads the IP header (40 bytes) and the transport header's first 8
/// bytes with `bpf_probe_read_kernel`, copies what tells the packet apart
/// into the record, and judges the filter's terms as
/// `IfaceFilter::judge_headers` does. A match records the skb address in
/// the `chains` map and writes the record; a packet that is not IP or
/// fails a term removes its address from the map and writes nothing.
/// Where the header cannot be read (no network header yet, a read that
/// fails, [`HeaderAt::Nowhere`]), the record is written only when the
/// address is in the map (kept by chain). A record the ring refuses is
/// counted in `lost`.
pub(crate) fn iface_program(
    spec: &IfaceSpec<'_>,
    dev: &DevOffsets,
    maps: IfaceMaps,
) -> Vec<BpfInsn> {
    let b = &spec.base;
    let mut a = Asm::default();
    let (unknown, emit, exit) = (a.label(), a.label(), a.label());
    a.extend(load_object_and_len(b));
    a.extend([
        BpfInsn::stx(BpfSize::Dw, FP, KEY, ARG0),
        BpfInsn::st_imm(BpfSize::Dw, FP, VALUE, 1),
        BpfInsn::st_imm(BpfSize::Dw, FP, slot(record::VERSION), 0),
        BpfInsn::st_imm(BpfSize::Dw, FP, slot(record::TRANSPORT), 0),
    ]);
    match spec.header {
        // Straight to the chain lookup (no code in between: the verifier
        // refuses unreachable instructions).
        HeaderAt::Nowhere => {}
        HeaderAt::Data(off) => a.push(BpfInsn::ldx(BpfSize::Dw, 3, ARG0, off)),
        HeaderAt::Network(head, nh) => {
            a.push(BpfInsn::ldx(BpfSize::Dw, 3, ARG0, head));
            a.push(BpfInsn::ldx(BpfSize::H, 1, ARG0, nh));
            a.jump(JMP_JEQ_K, 1, 0xffff, unknown);
            a.jump(JMP_JEQ_K, 1, 0, unknown);
            a.alu(ALU64_ADD_X, 3, 1, 0);
        }
    }
    if spec.header != HeaderAt::Nowhere {
        judge(&mut a, spec.filter, [unknown, emit, exit], maps.chains);
    }
    a.bind(unknown);
    a.extend(BpfInsn::ld_map_fd(1, maps.chains));
    a.extend([
        BpfInsn::mov64_reg(2, FP),
        BpfInsn::add64_imm(2, i32::from(KEY)),
        BpfInsn::call(FN_MAP_LOOKUP_ELEM),
    ]);
    a.jump(JMP_JEQ_K, 0, 0, exit);
    a.extend([
        BpfInsn::st_imm(BpfSize::Dw, FP, slot(record::VERSION), 0),
        BpfInsn::st_imm(BpfSize::Dw, FP, slot(record::TRANSPORT), 0),
        BpfInsn::st_imm(
            BpfSize::B,
            FP,
            slot(record::KEPT),
            i32::from(record::KEPT_CHAIN),
        ),
    ]);
    a.bind(emit);
    a.extend(record_tail(b, dev, maps.ring));
    a.jump(JMP_JEQ_K, 0, 0, exit);
    a.push(BpfInsn::st_imm(BpfSize::W, FP, LOST_KEY, 0));
    a.extend(BpfInsn::ld_map_fd(1, maps.lost));
    a.extend([
        BpfInsn::mov64_reg(2, FP),
        BpfInsn::add64_imm(2, i32::from(LOST_KEY)),
        BpfInsn::call(FN_MAP_LOOKUP_ELEM),
    ]);
    a.jump(JMP_JEQ_K, 0, 0, exit);
    a.extend([
        BpfInsn::mov64_imm(1, 1),
        BpfInsn::new(ATOMIC_ADD_DW, 0, 1, 0, 0),
    ]);
    a.bind(exit);
    if spec.forget {
        a.extend(BpfInsn::ld_map_fd(1, maps.chains));
        a.extend([
            BpfInsn::mov64_reg(2, FP),
            BpfInsn::add64_imm(2, i32::from(KEY)),
            BpfInsn::call(FN_MAP_DELETE_ELEM),
        ]);
    }
    a.extend([BpfInsn::mov64_imm(0, 0), BpfInsn::exit()]);
    a.finish()
}

/// The header part of [`iface_program`]: reads the headers (the header's
/// address in r3) and judges the terms; on a match records the address in
/// the chain map and jumps to `emit`; jumps to `unknown` when the headers
/// cannot be read; removes the address and jumps to `exit` when they do
/// not match.
fn judge(a: &mut Asm, f: &IfaceFilter, [unknown, emit, exit]: [usize; 3], chains: i32) {
    let nomatch = a.label();
    a.extend([
        BpfInsn::stx(BpfSize::Dw, FP, HDR_PTR, 3),
        BpfInsn::mov64_reg(1, FP),
        BpfInsn::add64_imm(1, i32::from(IP)),
        BpfInsn::mov64_imm(2, IP_READ),
        BpfInsn::call(FN_PROBE_READ_KERNEL),
    ]);
    a.jump(JMP_JNE_K, 0, 0, unknown);
    // r1: version and IHL; r2: the version.
    a.push(BpfInsn::ldx(BpfSize::B, 1, FP, IP));
    a.push(BpfInsn::mov64_reg(2, 1));
    a.alu(ALU64_RSH_K, 2, 0, 4);
    let (v4, v6, transport, terms) = (a.label(), a.label(), a.label(), a.label());
    a.jump(JMP_JEQ_K, 2, 4, v4);
    a.jump(JMP_JEQ_K, 2, 6, v6);
    a.goto(nomatch);
    // Copies `size` bytes of the IP header at `from` into the record at `to`.
    let copy = |a: &mut Asm, size: BpfSize, from: i16, to: i16| {
        a.push(BpfInsn::ldx(size, 2, FP, IP + from));
        a.push(BpfInsn::stx(size, FP, slot(to), 2));
    };
    a.bind(v4);
    a.push(BpfInsn::st_imm(BpfSize::B, FP, slot(record::VERSION), 4));
    copy(a, BpfSize::B, 9, record::PROTO);
    copy(a, BpfSize::H, 2, record::IP_LEN);
    copy(a, BpfSize::H, 4, record::IDENT);
    a.alu(ALU64_AND_K, 1, 0, 0x0f);
    a.jump(JMP_JLT_K, 1, 5, nomatch);
    a.alu(ALU64_LSH_K, 1, 0, 2);
    // Fragment offset (13 bits of bytes 6–7, read little-endian): a
    // non-first fragment has no transport header.
    a.push(BpfInsn::ldx(BpfSize::H, 2, FP, IP + 6));
    a.alu(ALU64_AND_K, 2, 0, 0xff1f);
    a.jump(JMP_JNE_K, 2, 0, terms);
    a.goto(transport);
    a.bind(v6);
    a.push(BpfInsn::st_imm(BpfSize::B, FP, slot(record::VERSION), 6));
    copy(a, BpfSize::B, 6, record::PROTO);
    copy(a, BpfSize::H, 4, record::IP_LEN);
    copy(a, BpfSize::H, 2, record::IDENT);
    a.push(BpfInsn::mov64_imm(1, 40));
    a.bind(transport);
    a.extend([
        BpfInsn::ldx(BpfSize::Dw, 3, FP, HDR_PTR),
        BpfInsn::new(ALU64_ADD_X, 3, 1, 0, 0),
        BpfInsn::mov64_reg(1, FP),
        BpfInsn::add64_imm(1, i32::from(slot(record::TRANSPORT))),
        BpfInsn::mov64_imm(2, 8),
        // A failed read leaves zeros: no ports.
        BpfInsn::call(FN_PROBE_READ_KERNEL),
    ]);
    a.bind(terms);
    if let Some(p) = f.proto {
        let ok = a.label();
        a.push(BpfInsn::ldx(BpfSize::B, 1, FP, slot(record::PROTO)));
        for n in ip_protocols(p) {
            a.jump(JMP_JEQ_K, 1, i32::from(n), ok);
        }
        a.goto(nomatch);
        a.bind(ok);
    }
    if let Some(host) = f.host {
        let ok = a.label();
        a.push(BpfInsn::ldx(BpfSize::B, 1, FP, slot(record::VERSION)));
        let (version, octets, at): (i32, Vec<u8>, [i16; 2]) = match host {
            IpAddr::V4(h) => (4, h.octets().to_vec(), [12, 16]),
            IpAddr::V6(h) => (6, h.octets().to_vec(), [8, 24]),
        };
        a.jump(JMP_JNE_K, 1, version, nomatch);
        for base in at {
            let next = a.label();
            for (i, w) in octets.chunks(4).enumerate() {
                let word = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                a.push(BpfInsn::ldx(BpfSize::W, 1, FP, IP + base + 4 * i as i16));
                // A 32-bit compare: the immediate is not sign-extended.
                a.jump(JMP32_JNE_K, 1, word as i32, next);
            }
            a.goto(ok);
            a.bind(next);
        }
        a.goto(nomatch);
        a.bind(ok);
    }
    if let Some(port) = f.port {
        let (has_ports, ok) = (a.label(), a.label());
        a.push(BpfInsn::ldx(BpfSize::B, 1, FP, slot(record::PROTO)));
        a.jump(JMP_JEQ_K, 1, i32::from(IPPROTO_TCP), has_ports);
        a.jump(JMP_JEQ_K, 1, i32::from(IPPROTO_UDP), has_ports);
        a.goto(nomatch);
        a.bind(has_ports);
        // Network order read little-endian: compare with the swapped port.
        for at in [0, 2] {
            a.push(BpfInsn::ldx(
                BpfSize::H,
                1,
                FP,
                slot(record::TRANSPORT) + at,
            ));
            a.jump(JMP32_JEQ_K, 1, i32::from(port.swap_bytes()), ok);
        }
        a.goto(nomatch);
        a.bind(ok);
    }
    if let Some((lo, hi)) = f.len {
        let v4 = a.label();
        a.push(BpfInsn::ldx(BpfSize::B, 1, FP, slot(record::IP_LEN)));
        a.alu(ALU64_LSH_K, 1, 0, 8);
        a.push(BpfInsn::ldx(BpfSize::B, 2, FP, slot(record::IP_LEN) + 1));
        a.alu(ALU64_OR_X, 1, 2, 0);
        a.push(BpfInsn::ldx(BpfSize::B, 2, FP, slot(record::VERSION)));
        a.jump(JMP_JNE_K, 2, 6, v4);
        a.push(BpfInsn::add64_imm(1, IPV6_HEADER as i32));
        a.bind(v4);
        // IP lengths are at most 65535 + 40: the bounds fit an i32.
        a.jump(JMP_JLT_K, 1, lo as i32, nomatch);
        a.jump(JMP_JGT_K, 1, hi as i32, nomatch);
    }
    a.push(BpfInsn::st_imm(
        BpfSize::B,
        FP,
        slot(record::KEPT),
        i32::from(record::KEPT_HEADERS),
    ));
    a.extend(BpfInsn::ld_map_fd(1, chains));
    a.extend([
        BpfInsn::mov64_reg(2, FP),
        BpfInsn::add64_imm(2, i32::from(KEY)),
        BpfInsn::mov64_reg(3, FP),
        BpfInsn::add64_imm(3, i32::from(VALUE)),
        BpfInsn::mov64_imm(4, 0),
        BpfInsn::call(FN_MAP_UPDATE_ELEM),
    ]);
    a.goto(emit);
    a.bind(nomatch);
    // A lookup first (no lock): most packets that fail were never in the
    // map, and a delete takes the bucket's lock.
    let key = |a: &mut Asm, helper| {
        a.extend(BpfInsn::ld_map_fd(1, chains));
        a.extend([
            BpfInsn::mov64_reg(2, FP),
            BpfInsn::add64_imm(2, i32::from(KEY)),
            BpfInsn::call(helper),
        ]);
    };
    key(a, FN_MAP_LOOKUP_ELEM);
    a.jump(JMP_JEQ_K, 0, 0, exit);
    key(a, FN_MAP_DELETE_ELEM);
    a.goto(exit);
}

/// The gate's stack slot for a map key (u32), below the record.
const GATE_KEY: i16 = -record::SIZE - 8;
/// Gate map slot: the time (ns) a probe's receive armed the CPU, 0 when
/// disarmed.
pub(crate) const GATE_ARMED: i32 = 0;
/// Gate map slot: the time of the CPU's last NET_RX softirq entry (0: taken).
pub(crate) const GATE_SOFTIRQ: i32 = 1;
/// An armed gate opens for events at most this long after the arming
/// receive (the NET_RX softirq that ran it ends well before).
pub(crate) const GATE_OPEN_NS: i32 = 1_000_000;
/// A FIB lookup is written at most this long after the arming receive: a
/// probe's own lookup follows its receive within the same call chain
/// (`ip_rcv` → `ip_route_input`), a microsecond or two later; one much
/// later is another packet's (a receive with a cached route makes none).
pub(crate) const FIB_OPEN_NS: i32 = 20_000;
/// `BPF_ALU64 | BPF_SUB | BPF_X`.
const ALU64_SUB_X: u8 = 0x1f;

/// What a probe's receive does to the per-CPU gate map (`BPF_MAP_TYPE_PERCPU_ARRAY`,
/// two u64 slots): the events that carry no skb (FIB lookups, NAPI polls,
/// the NET_RX softirq's exit) are written only while their CPU is armed,
/// so the packets that are not probes cost them a map lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arm {
    /// The gate map.
    pub gate: i32,
    /// The record code of the NET_RX softirq entry (written from the time
    /// the entry program left in [`GATE_SOFTIRQ`]).
    pub softirq_code: u32,
    /// The in-flight map (see [`inflight_map`]), whose count the receive
    /// takes one off.
    pub inflight: i32,
}

/// `r0 = &map[slot]` (this CPU's for a per-CPU map); jumps to `none` when
/// the lookup fails.
fn gate_slot(a: &mut Asm, gate: i32, slot: i32, none: usize) {
    a.push(BpfInsn::st_imm(BpfSize::W, FP, GATE_KEY, slot));
    a.extend(BpfInsn::ld_map_fd(1, gate));
    a.extend([
        BpfInsn::mov64_reg(2, FP),
        BpfInsn::add64_imm(2, i32::from(GATE_KEY)),
        BpfInsn::call(FN_MAP_LOOKUP_ELEM),
    ]);
    a.jump(JMP_JEQ_K, 0, 0, none);
}

/// After a probe's record (still on the stack): takes the probe off the
/// in-flight count (it arrived; see [`take_inflight`]), arms the CPU's gate
/// with the record's time, then writes the NET_RX softirq entry the entry
/// program saw last on this CPU (once: the slot is cleared), as a second
/// record with the probe's device and no skb.
fn arm_tail(arm: &Arm, ring: i32) -> Vec<BpfInsn> {
    let mut a = Asm::default();
    let (queued, armed, done) = (a.label(), a.label(), a.label());
    take_inflight(&mut a, arm.inflight, queued);
    a.bind(queued);
    // LEN (free once the record is written): the last queue's time, 0 if none.
    a.push(BpfInsn::mov64_imm(LEN, 0));
    gate_slot(&mut a, arm.inflight, INFLIGHT_QUEUED, armed);
    a.push(BpfInsn::ldx(BpfSize::Dw, LEN, 0, 0));
    a.bind(armed);
    gate_slot(&mut a, arm.gate, GATE_ARMED, done);
    a.extend([
        BpfInsn::ldx(BpfSize::Dw, 1, FP, slot(record::TIME)),
        BpfInsn::stx(BpfSize::Dw, 0, 0, 1),
    ]);
    gate_slot(&mut a, arm.gate, GATE_SOFTIRQ, done);
    a.push(BpfInsn::ldx(BpfSize::Dw, 1, 0, 0));
    a.jump(JMP_JEQ_K, 1, 0, done);
    // An entry from before the probe was queued, or more than
    // GATE_OPEN_NS before its receive, is another softirq's: left out.
    a.jump_reg(JMP_JLT_X, 1, LEN, done);
    a.extend([
        BpfInsn::ldx(BpfSize::Dw, 2, FP, slot(record::TIME)),
        BpfInsn::new(ALU64_SUB_X, 2, 1, 0, 0),
    ]);
    a.jump(JMP_JGT_K, 2, GATE_OPEN_NS, done);
    a.extend([
        BpfInsn::st_imm(BpfSize::Dw, 0, 0, 0),
        BpfInsn::stx(BpfSize::Dw, FP, slot(record::TIME), 1),
        BpfInsn::st_imm(BpfSize::W, FP, slot(record::CODE), arm.softirq_code as i32),
        BpfInsn::st_imm(BpfSize::Dw, FP, slot(record::ADDR), 0),
        BpfInsn::st_imm(BpfSize::W, FP, slot(record::LEN), 0),
    ]);
    a.extend(ring_output(ring));
    a.bind(done);
    a.finish()
}

/// In-flight map slot: how many probes are in flight (queued, not yet
/// received nor dropped); a signed count, never left below zero.
pub(crate) const INFLIGHT_COUNT: i32 = 0;
/// In-flight map slot: the time (ns) a probe was last queued.
pub(crate) const INFLIGHT_QUEUED: i32 = 1;

/// After a probe's record queued for transmission (still on the stack):
/// its time into the in-flight map's [`INFLIGHT_QUEUED`] slot, and one more
/// probe in flight (an atomic add: every CPU shares the count), which the
/// NET_RX softirq entries look at before they read the clock. Every hop of
/// a routed or bridged bed queues (and receives) the probe once.
fn inflight_tail(inflight: i32) -> Vec<BpfInsn> {
    let mut a = Asm::default();
    let done = a.label();
    gate_slot(&mut a, inflight, INFLIGHT_QUEUED, done);
    a.extend([
        BpfInsn::ldx(BpfSize::Dw, 1, FP, slot(record::TIME)),
        BpfInsn::stx(BpfSize::Dw, 0, 0, 1),
    ]);
    gate_slot(&mut a, inflight, INFLIGHT_COUNT, done);
    a.extend([
        BpfInsn::mov64_imm(1, 1),
        BpfInsn::new(ATOMIC_ADD_DW, 0, 1, 0, 0),
    ]);
    a.bind(done);
    a.finish()
}

/// One probe fewer in flight (a receive, a drop), never below zero: an
/// atomic fetch-and-add of -1, and +1 back when the count fetched was not
/// positive (more receives than queues: a probe that entered the host
/// already queued, a drop after the receive). Between the two adds the
/// count may read -1 on another CPU, which the entry program treats as
/// zero; the pair sums to nothing, so concurrent adds are kept. Jumps to
/// `next` when done (or the lookup fails); uses r0–r5.
fn take_inflight(a: &mut Asm, inflight: i32, next: usize) {
    gate_slot(a, inflight, INFLIGHT_COUNT, next);
    a.extend([
        BpfInsn::mov64_imm(1, -1),
        BpfInsn::new(ATOMIC_ADD_DW, 0, 1, 0, BPF_FETCH),
    ]);
    a.jump(JMP_JSGT_K, 1, 0, next);
    a.extend([
        BpfInsn::mov64_imm(1, 1),
        BpfInsn::new(ATOMIC_ADD_DW, 0, 1, 0, 0),
    ]);
}

/// After a probe's drop record (the skb in `ARG0`): one probe fewer in
/// flight ([`take_inflight`]) unless the buffer was last received on the
/// device it is on (`skb_iif` is that device's ifindex): such a drop comes
/// after the receive that already took the probe off (a full socket
/// queue, a host's ingress filter, a link emulator's namespace that keeps
/// a copy). A buffer never received has `skb_iif` 0; one dropped on a
/// forwarding hop's way out is on another device than it came in by. No
/// device: left counted. A drop left counted only costs clock reads.
fn drop_tail(d: &Dropped) -> Vec<BpfInsn> {
    let mut a = Asm::default();
    let done = a.label();
    a.push(BpfInsn::ldx(BpfSize::Dw, 1, ARG0, d.skb_dev));
    a.jump(JMP_JEQ_K, 1, 0, done);
    a.extend([
        BpfInsn::ldx(BpfSize::W, 2, 1, d.ifindex),
        BpfInsn::ldx(BpfSize::W, 3, ARG0, d.skb_iif),
    ]);
    a.jump_reg(JMP_JEQ_X, 3, 2, done);
    take_inflight(&mut a, d.inflight, done);
    a.bind(done);
    a.finish()
}

/// The program of `irq:softirq_entry`: on a NET_RX entry while a probe is
/// in flight (the in-flight map's [`INFLIGHT_COUNT`] is above zero), the
/// time into the CPU's [`GATE_SOFTIRQ`] slot (no record: a probe's receive
/// writes it); while none is, it returns after one array lookup, without
/// reading the clock. A receive takes the slot's time only if it is after
/// a probe was last queued and less than [`GATE_OPEN_NS`] before the
/// receive (see [`arm_tail`]), so an entry left from an earlier probe is
/// not taken.
pub(crate) fn softirq_entry_program(gate: i32, inflight: i32) -> Vec<BpfInsn> {
    let mut a = Asm::default();
    let exit = a.label();
    a.extend([
        BpfInsn::mov64_reg(CTX, 1),
        BpfInsn::ldx(BpfSize::Dw, 1, CTX, 0),
    ]);
    a.jump(JMP32_JNE_K, 1, NET_RX, exit);
    gate_slot(&mut a, inflight, INFLIGHT_COUNT, exit);
    a.push(BpfInsn::ldx(BpfSize::Dw, 1, 0, 0));
    a.jump(JMP_JSLE_K, 1, 0, exit);
    gate_slot(&mut a, gate, GATE_SOFTIRQ, exit);
    a.extend([
        BpfInsn::mov64_reg(ARG0, 0),
        BpfInsn::call(FN_KTIME_GET_NS),
        BpfInsn::stx(BpfSize::Dw, ARG0, 0, 0),
    ]);
    a.bind(exit);
    a.extend([BpfInsn::mov64_imm(0, 0), BpfInsn::exit()]);
    a.finish()
}

/// `enum softirq` NET_RX.
const NET_RX: i32 = 3;

/// A gated event's program: what it reads once its CPU's gate is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GatedSpec {
    /// The record code.
    pub code: u32,
    /// Only for the NET_RX vector (argument 0); the gate closes after it.
    pub net_rx_exit: bool,
    /// The value in the record's length field (None: zero).
    pub len: Option<Source>,
    /// The device (None: the record has none).
    pub dev: Option<Source>,
    /// How long after the arming receive the event is written (ns; at
    /// most [`GATE_OPEN_NS`]).
    pub open_ns: i32,
    /// Whether the event disarms the gate, so the CPU's next events return
    /// without reading the clock: for the FIB lookups when the softirq's
    /// exit (which disarms it otherwise) is not opened.
    pub closes: Closes,
}

/// When a gated event disarms its CPU's gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closes {
    /// Never (the NET_RX softirq's exit does).
    No,
    /// When it finds the gate older than its bound (IPv6 lookups: a
    /// receive looks in the local table first, whose miss carries the
    /// loopback device too, then in the main one).
    WhenStale,
    /// Also once it wrote a record with a device (an IPv4 lookup that found
    /// its route: the route lookup; a reverse-path check's after it is left
    /// out).
    OnDevice,
}

/// A gated event's program: returns unless its CPU's gate was armed by a
/// probe's receive less than `spec.open_ns` ago, then writes its record
/// (the NET_RX softirq's exit, and an event that `spec.closes`, also
/// disarm the gate).
pub(crate) fn gated_program(
    spec: &GatedSpec,
    dev: &DevOffsets,
    ring: i32,
    gate: i32,
) -> Vec<BpfInsn> {
    let mut a = Asm::default();
    let (exit, stale) = (a.label(), a.label());
    a.push(BpfInsn::mov64_reg(CTX, 1));
    if spec.net_rx_exit {
        a.push(BpfInsn::ldx(BpfSize::Dw, 1, CTX, 0));
        a.jump(JMP32_JNE_K, 1, NET_RX, exit);
    }
    gate_slot(&mut a, gate, GATE_ARMED, exit);
    a.extend([
        BpfInsn::mov64_reg(ARG0, 0),
        BpfInsn::ldx(BpfSize::Dw, LEN, 0, 0),
    ]);
    a.jump(JMP_JEQ_K, LEN, 0, exit);
    if spec.net_rx_exit {
        a.push(BpfInsn::st_imm(BpfSize::Dw, ARG0, 0, 0));
    }
    a.push(BpfInsn::call(FN_KTIME_GET_NS));
    a.alu(ALU64_SUB_X, 0, LEN, 0);
    a.jump(JMP_JGT_K, 0, spec.open_ns.min(GATE_OPEN_NS), stale);
    // No skb: the record's address is zero.
    a.push(BpfInsn::mov64_imm(ARG0, 0));
    match spec.len {
        Some(from) => {
            a.extend(load_value(LEN, from, BpfSize::W));
            a.push(BpfInsn::mov32_reg(LEN, LEN));
        }
        None => a.push(BpfInsn::mov64_imm(LEN, 0)),
    }
    a.extend([
        BpfInsn::st_imm(BpfSize::Dw, FP, slot(record::VERSION), 0),
        BpfInsn::st_imm(BpfSize::Dw, FP, slot(record::TRANSPORT), 0),
    ]);
    let tail = ProgSpec {
        code: spec.code,
        len: Source::Arg(0),
        dev: spec.dev,
        object_arg: 0,
        object_member: None,
        drop_args: None,
        lo: 0,
        hi: 0,
    };
    a.extend(record_tail(&tail, dev, ring));
    if spec.closes == Closes::OnDevice {
        // A record with a device (`DEV`, which the record's device block
        // left zero when there was none) disarms the gate.
        if spec.dev.is_some() {
            a.jump(JMP_JEQ_K, DEV, 0, exit);
        }
        gate_slot(&mut a, gate, GATE_ARMED, exit);
        a.push(BpfInsn::st_imm(BpfSize::Dw, 0, 0, 0));
    }
    a.goto(exit);
    a.bind(stale);
    if spec.closes != Closes::No {
        a.push(BpfInsn::st_imm(BpfSize::Dw, ARG0, 0, 0));
    }
    a.bind(exit);
    a.extend([BpfInsn::mov64_imm(0, 0), BpfInsn::exit()]);
    a.finish()
}

/// `BPF_MAP_TYPE_PERCPU_ARRAY`.
const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;

/// Creates the per-CPU gate map (two u64 slots: [`GATE_ARMED`],
/// [`GATE_SOFTIRQ`]).
pub(crate) fn gate_map() -> Result<OwnedFd, BpfError> {
    create_map(BPF_MAP_TYPE_PERCPU_ARRAY, 4, 2, "lr_gate")
}

/// Creates the in-flight map (an array of two u64 slots, shared by every
/// CPU): [`INFLIGHT_COUNT`], the probes in flight, and
/// [`INFLIGHT_QUEUED`], the time a probe was last queued for transmission.
pub(crate) fn inflight_map() -> Result<OwnedFd, BpfError> {
    create_map(BPF_MAP_TYPE_ARRAY, 4, 2, "lr_inflight")
}

/// A map of u64 values.
fn create_map(
    map_type: u32,
    key_size: u32,
    max_entries: u32,
    name: &str,
) -> Result<OwnedFd, BpfError> {
    let mut attr = MapCreateAttr {
        map_type,
        key_size,
        value_size: 8,
        max_entries,
        map_name: super::bpf::name16(name.as_bytes()),
        ..MapCreateAttr::default()
    };
    bpf(BPF_MAP_CREATE, &mut attr)
        .and_then(owned)
        .map_err(|source| BpfError {
            cmd: "BPF_MAP_CREATE",
            source,
            log: None,
        })
}

/// `BPF_MAP_TYPE_ARRAY`.
const BPF_MAP_TYPE_ARRAY: u32 = 2;
/// `BPF_MAP_TYPE_LRU_HASH`.
const BPF_MAP_TYPE_LRU_HASH: u32 = 9;
/// `BPF_MAP_LOOKUP_ELEM`.
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
/// skb addresses the chain map holds (the least recently used go first).
pub(crate) const CHAIN_ENTRIES: u32 = 16384;

/// The `--iface` programs' two small maps: the chain map (skb addresses
/// that matched) and the lost-record counter.
#[derive(Debug)]
pub(crate) struct IfaceMapFds {
    chains: OwnedFd,
    lost: OwnedFd,
}

impl IfaceMapFds {
    /// Creates both maps.
    pub(crate) fn new() -> Result<Self, BpfError> {
        Ok(Self {
            chains: create_map(BPF_MAP_TYPE_LRU_HASH, 8, CHAIN_ENTRIES, "lr_chains")?,
            lost: create_map(BPF_MAP_TYPE_ARRAY, 4, 1, "lr_lost")?,
        })
    }

    /// The descriptors the programs name, with the ring's.
    pub(crate) fn maps(&self, ring: i32) -> IfaceMaps {
        IfaceMaps {
            ring,
            chains: self.chains.as_raw_fd(),
            lost: self.lost.as_raw_fd(),
        }
    }

    /// Records the ring refused so far.
    pub(crate) fn lost(&self) -> Result<u64, BpfError> {
        #[repr(C)]
        #[derive(Default)]
        struct LookupAttr {
            map_fd: u32,
            _pad: u32,
            key: u64,
            value: u64,
            flags: u64,
        }
        let key = 0u32;
        let mut value = 0u64;
        let mut attr = LookupAttr {
            map_fd: self.lost.as_raw_fd() as u32,
            key: std::ptr::from_ref(&key) as u64,
            value: std::ptr::from_mut(&mut value) as u64,
            ..LookupAttr::default()
        };
        bpf(BPF_MAP_LOOKUP_ELEM, &mut attr).map_err(|source| BpfError {
            cmd: "BPF_MAP_LOOKUP_ELEM",
            source,
            log: None,
        })?;
        Ok(value)
    }
}

/// The `raw_tracepoint` part of `union bpf_attr`.
#[repr(C)]
#[derive(Debug, Default)]
struct RawTpAttr {
    name: u64,
    prog_fd: u32,
    _pad: u32,
    cookie: u64,
}

fn owned(fd: libc::c_long) -> io::Result<OwnedFd> {
    let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::other("fd out of range"))?;
    // SAFETY: bpf(2) just returned this new descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Loads `insns` as a `tp_btf` program attached to BTF type
/// `attach_btf_id` (a `btf_trace_*` typedef of vmlinux). On EINVAL/EACCES it
/// loads again with the verifier log on, to say why.
pub(crate) fn load(insns: &[BpfInsn], attach_btf_id: u32, name: &str) -> Result<OwnedFd, BpfError> {
    super::bpf::load_program(
        insns,
        super::bpf::ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_TRACING,
            prog_name: super::bpf::name16(name.as_bytes()),
            expected_attach_type: BPF_TRACE_RAW_TP,
            attach_btf_id,
            ..Default::default()
        },
    )
}

/// Attaches a loaded `tp_btf` program; the returned link detaches on close.
pub(crate) fn attach(prog: &OwnedFd) -> Result<OwnedFd, BpfError> {
    let err = |source| BpfError {
        cmd: "BPF_RAW_TRACEPOINT_OPEN",
        source,
        log: None,
    };
    let mut attr = RawTpAttr {
        prog_fd: prog.as_raw_fd() as u32,
        ..RawTpAttr::default()
    };
    owned(bpf(BPF_RAW_TRACEPOINT_OPEN, &mut attr).map_err(err)?).map_err(err)
}

/// A BPF ring buffer map, mapped into this process (unmapped on drop).
#[derive(Debug)]
pub(crate) struct Ringbuf {
    map: OwnedFd,
    consumer: NonNull<u8>,
    producer: NonNull<u8>,
    size: usize,
    page: usize,
}

// SAFETY: the mappings are plain shared memory; positions are read and
// written atomically, record bytes only read between the consumer and
// producer positions, which the kernel does not write until the consumer
// position moves past them.
unsafe impl Send for Ringbuf {}

impl Ringbuf {
    /// Creates a ring of `size` bytes (a power of two, a multiple of the
    /// page size) and maps it.
    pub(crate) fn new(size: u32) -> Result<Self, BpfError> {
        let err = |cmd, source| BpfError {
            cmd,
            source,
            log: None,
        };
        let mut attr = MapCreateAttr {
            map_type: BPF_MAP_TYPE_RINGBUF,
            max_entries: size,
            map_name: super::bpf::name16(b"lr_journey"),
            ..MapCreateAttr::default()
        };
        let map = bpf(BPF_MAP_CREATE, &mut attr)
            .and_then(owned)
            .map_err(|e| err("BPF_MAP_CREATE", e))?;
        let page = super::perf::page_size();
        let size = size as usize;
        let consumer = mmap(&map, page, libc::PROT_READ | libc::PROT_WRITE, 0)
            .map_err(|e| err("mmap of the ring buffer", e))?;
        // The data pages are mapped twice in a row, so no record wraps.
        let producer = match mmap(&map, page + 2 * size, libc::PROT_READ, page) {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: `consumer` is the one-page mapping made just above.
                let _ = syscall!(munmap(consumer.as_ptr().cast(), page));
                return Err(err("mmap of the ring buffer", e));
            }
        };
        Ok(Self {
            map,
            consumer,
            producer,
            size,
            page,
        })
    }

    /// The map's descriptor (for the programs' `BPF_PSEUDO_MAP_FD`).
    pub(crate) fn fd(&self) -> i32 {
        self.map.as_raw_fd()
    }

    fn consumer_pos(&self) -> &AtomicU64 {
        // SAFETY: the consumer page is mapped read-write, page-aligned; the
        // position is its first u64, which only this process writes.
        unsafe { &*self.consumer.as_ptr().cast::<AtomicU64>() }
    }

    fn producer_pos(&self) -> &AtomicU64 {
        // SAFETY: the producer page is mapped read-only, page-aligned; the
        // kernel updates its first u64 concurrently (read atomically).
        unsafe { &*self.producer.as_ptr().cast::<AtomicU64>() }
    }

    /// Calls `each` with every complete record written since the last call
    /// (discarded ones skipped), then frees their space. Returns how many.
    pub(crate) fn drain(&self, mut each: impl FnMut(&[u8])) -> usize {
        let mask = (self.size - 1) as u64;
        let mut cons = self.consumer_pos().load(Ordering::Acquire);
        let prod = self.producer_pos().load(Ordering::Acquire);
        let mut n = 0;
        while cons < prod {
            let at = self.page + (cons & mask) as usize;
            // SAFETY: `at` is inside the data area (page + [0, size)), the
            // header is 8-byte aligned (records are rounded to 8 bytes); the
            // kernel commits the header's length atomically.
            let hdr = unsafe { &*self.producer.as_ptr().add(at).cast::<AtomicU32>() };
            let len = hdr.load(Ordering::Acquire);
            if len & RB_BUSY != 0 {
                break;
            }
            let body = (len & !(RB_BUSY | RB_DISCARD)) as usize;
            if body > self.size {
                break;
            }
            if len & RB_DISCARD == 0 {
                // SAFETY: the record is committed (not busy), lies within the
                // double mapping (at + 8 + body < page + 2 * size), and the
                // kernel does not reuse it before the consumer position moves.
                let data = unsafe {
                    std::slice::from_raw_parts(
                        self.producer.as_ptr().add(at + RB_HDR as usize),
                        body,
                    )
                };
                each(data);
                n += 1;
            }
            cons += (body as u64 + RB_HDR + 7) & !7;
            self.consumer_pos().store(cons, Ordering::Release);
        }
        n
    }
}

fn mmap(fd: &OwnedFd, len: usize, prot: libc::c_int, offset: usize) -> io::Result<NonNull<u8>> {
    let off = libc::off_t::try_from(offset).map_err(io::Error::other)?;
    // SAFETY: a fresh shared mapping of the ring buffer map at the offsets
    // the kernel defines (consumer page at 0, producer page and data at one
    // page); checked against MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            off,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))
}

impl Drop for Ringbuf {
    fn drop(&mut self) {
        // SAFETY: two mappings made in `new`, unmapped once, here.
        let _ = syscall!(munmap(self.consumer.as_ptr().cast(), self.page));
        // SAFETY: as above.
        let _ = syscall!(munmap(
            self.producer.as_ptr().cast(),
            self.page + 2 * self.size
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layouts_match_linux_bpf_h() {
        assert_eq!(std::mem::offset_of!(MapCreateAttr, map_name), 28);
        assert_eq!(size_of::<RawTpAttr>(), 24);
    }

    #[test]
    fn the_filter_jumps_to_the_exit() {
        let spec = ProgSpec {
            code: 3,
            len: Source::Arg0Member(112),
            dev: Some(Source::Arg0Member(16)),
            object_arg: 0,
            object_member: None,
            drop_args: None,
            lo: 100,
            hi: 217,
        };
        let p = program(&spec, &DevOffsets::default(), 5, After::Nothing);
        let bytes = |i: &BpfInsn| i.to_le_bytes();
        // r8 = *(u32 *)(r7 + 112): BPF_LDX|BPF_MEM|BPF_W = 0x61.
        assert_eq!(bytes(&p[2]), [0x61, 0x78, 112, 0, 0, 0, 0, 0]);
        // if r8 < 100 goto exit (BPF_JMP|BPF_JLT|BPF_K = 0xa5), and > 217.
        let exit = p.len() - 2;
        for (at, op, imm) in [(3, 0xa5, 100u8), (4, 0x25, 217)] {
            let b = bytes(&p[at]);
            assert_eq!((b[0], b[1], b[4]), (op, 0x08, imm));
            let off = i16::from_le_bytes([b[2], b[3]]);
            assert_eq!(at as i16 + 1 + off, exit as i16);
        }
        // The map load is a 16-byte ld_imm64 with BPF_PSEUDO_MAP_FD.
        let ld = p.iter().position(|i| bytes(i)[0] == 0x18).unwrap();
        assert_eq!(bytes(&p[ld]), [0x18, 0x11, 0, 0, 5, 0, 0, 0]);
        assert_eq!(bytes(&p[ld + 1]), [0; 8]);
        assert_eq!(bytes(&p[p.len() - 1])[0], 0x95);
    }

    #[test]
    fn an_argument_length_is_cut_to_32_bits_and_no_device_is_read() {
        let spec = ProgSpec {
            code: 14,
            len: Source::Arg(1),
            dev: None,
            object_arg: 0,
            object_member: None,
            drop_args: None,
            lo: 100,
            hi: 217,
        };
        let dev = DevOffsets {
            ifindex: Some(200),
            name: Some(300),
            netns: Some((400, 8)),
        };
        let p = program(&spec, &dev, 5, After::Nothing);
        let b: Vec<[u8; 8]> = p.iter().map(|i| i.to_le_bytes()).collect();
        // r8 = *(u64 *)(r6 + 8) (the second argument), then w8 = w8.
        assert_eq!(b[2], [0x79, 0x68, 8, 0, 0, 0, 0, 0]);
        assert_eq!(b[3], [0xbc, 0x88, 0, 0, 0, 0, 0, 0]);
        // No load through r9 (the device) and no bpf_probe_read_kernel.
        assert!(!b.iter().any(|i| i[0] == 0x61 && i[1] >> 4 == DEV));
        assert!(!b.iter().any(|i| i[0] == 0x85 && i[4] == 113));
        // The record's code is stored as an immediate.
        let code = b
            .iter()
            .find(|i| i[0] == 0x62 && i16::from_le_bytes([i[2], i[3]]) == slot(record::CODE))
            .unwrap();
        assert_eq!(code[4], 14);
    }

    #[test]
    fn a_gated_program_writes_only_within_its_own_bound() {
        use vm::{Vm, GATE, GATE_FD, RING_FD};
        let spec = GatedSpec {
            code: 7,
            net_rx_exit: false,
            len: None,
            dev: None,
            open_ns: FIB_OPEN_NS,
            closes: Closes::No,
        };
        let words = |spec: &GatedSpec| -> Vec<[u8; 8]> {
            gated_program(spec, &DevOffsets::default(), RING_FD, GATE_FD)
                .iter()
                .map(|i| i.to_le_bytes())
                .collect()
        };
        let prog = words(&spec);
        let now = 5_000_000_000u64;
        let mut m = Vm {
            now: Some(now),
            ..Vm::default()
        };
        // The gate armed `ago` ns before now.
        let arm = |m: &mut Vm, ago: u64| {
            m.mem
                .insert(GATE, [(now - ago).to_le_bytes(), [0; 8]].concat());
        };
        for (ago, written) in [
            (FIB_OPEN_NS as u64, 1),
            (FIB_OPEN_NS as u64 + 1, 1),
            (GATE_OPEN_NS as u64, 1),
            (10, 2),
        ] {
            arm(&mut m, ago);
            m.run(&prog, &[0]);
            assert_eq!(m.records.len(), written, "armed {ago} ns ago");
        }
        // A bound above the gate's is cut to it.
        let wide = words(&GatedSpec {
            open_ns: i32::MAX,
            ..spec
        });
        arm(&mut m, GATE_OPEN_NS as u64 + 1);
        m.run(&wide, &[0]);
        assert_eq!(m.records.len(), 2);
        // A closing program: a lookup with a device after the arming is
        // written and disarms; the next ones read no clock. One without a
        // device (a table without the route) is written and leaves the gate
        // armed; a stale gate is disarmed without a record.
        const NHC: u64 = 0x4000_0000;
        let closing = words(&GatedSpec {
            closes: Closes::OnDevice,
            dev: Some(Source::ArgMember(0, 16)),
            ..spec
        });
        m.mem.insert(NHC, vec![0; 32]);
        arm(&mut m, 10);
        m.run(&closing, &[NHC]);
        assert_eq!((m.records.len(), m.read(GATE, 8)), (3, now - 10));
        m.mem.insert(
            NHC,
            [[0; 8], [0; 8], 0x5000_0000u64.to_le_bytes(), [0; 8]].concat(),
        );
        m.run(&closing, &[NHC]);
        assert_eq!((m.records.len(), m.read(GATE, 8)), (4, 0));
        let reads = m.clock_reads;
        m.run(&closing, &[NHC]);
        assert_eq!((m.records.len(), m.clock_reads), (4, reads));
        arm(&mut m, FIB_OPEN_NS as u64 + 1);
        m.run(&closing, &[NHC]);
        assert_eq!((m.records.len(), m.read(GATE, 8)), (4, 0));
        // Closing when stale only: a record with a device leaves it armed.
        let when_stale = words(&GatedSpec {
            closes: Closes::WhenStale,
            dev: Some(Source::ArgMember(0, 16)),
            ..spec
        });
        arm(&mut m, 10);
        m.run(&when_stale, &[NHC]);
        assert_eq!((m.records.len(), m.read(GATE, 8)), (5, now - 10));
        arm(&mut m, FIB_OPEN_NS as u64 + 1);
        m.run(&when_stale, &[NHC]);
        assert_eq!((m.records.len(), m.read(GATE, 8)), (5, 0));
        // Without it the gate stays armed.
        arm(&mut m, 10);
        m.run(&prog, &[0]);
        assert_eq!((m.records.len(), m.read(GATE, 8)), (6, now - 10));
        arm(&mut m, FIB_OPEN_NS as u64 + 1);
        m.run(&prog, &[0]);
        assert_eq!(m.read(GATE, 8), now - FIB_OPEN_NS as u64 - 1);
    }

    #[test]
    fn gated_programs_write_only_while_a_probe_armed_the_cpu() {
        use vm::{Vm, GATE, GATE_FD, INFLIGHT, RING_FD};
        let words =
            |p: Vec<BpfInsn>| -> Vec<[u8; 8]> { p.iter().map(|i| i.to_le_bytes()).collect() };
        let fib = GatedSpec {
            code: 7,
            net_rx_exit: false,
            len: None,
            dev: None,
            open_ns: GATE_OPEN_NS,
            closes: Closes::No,
        };
        let exit = GatedSpec {
            code: 9,
            net_rx_exit: true,
            ..fib
        };
        let dev = DevOffsets::default();
        let (fib, exit) = (
            words(gated_program(&fib, &dev, RING_FD, GATE_FD)),
            words(gated_program(&exit, &dev, RING_FD, GATE_FD)),
        );
        let now = 5_000_000_000u64;
        let mut m = Vm {
            now: Some(now),
            ..Vm::default()
        };
        let armed = |m: &mut Vm| m.read(GATE, 8);
        // Disarmed: nothing written.
        m.run(&fib, &[0]);
        assert!(m.records.is_empty());
        // Armed 1 ms ago (the bound): written, no skb.
        m.mem
            .insert(GATE, [(now - 1_000_000).to_le_bytes(), [0; 8]].concat());
        m.run(&fib, &[0]);
        assert_eq!(m.records.len(), 1);
        let r = &m.records[0];
        assert_eq!(u32::from_le_bytes(r[20..24].try_into().unwrap()), 7);
        assert_eq!(u64::from_le_bytes(r[8..16].try_into().unwrap()), 0);
        // Armed longer ago: stale, nothing written.
        m.mem
            .insert(GATE, [(now - 1_000_001).to_le_bytes(), [0; 8]].concat());
        m.run(&fib, &[0]);
        assert_eq!(m.records.len(), 1);
        // Another softirq's exit neither writes nor disarms; NET_RX's does both.
        m.mem
            .insert(GATE, [(now - 10).to_le_bytes(), [0; 8]].concat());
        m.run(&exit, &[1]);
        assert_eq!((m.records.len(), armed(&mut m)), (1, now - 10));
        m.run(&exit, &[3]);
        assert_eq!((m.records.len(), armed(&mut m)), (2, 0));
        m.run(&fib, &[0]);
        assert_eq!(m.records.len(), 2);
        // A probe's receive arms the gate with its record's time and writes
        // the softirq entry the entry program left, once.
        let Probe { tx, rx, entry, .. } = probe_programs();
        let inflight = |m: &mut Vm| m.read(INFLIGHT, 8);
        let skb = vm::SKB;
        m.mem.insert(skb, probe_skb());
        // No probe in flight: the entry reads no clock, writes nothing.
        m.mem
            .insert(GATE, [[0; 8], (now - 900).to_le_bytes()].concat());
        let reads = m.clock_reads;
        m.run(&entry, &[3]);
        assert_eq!((m.read(GATE + 8, 8), m.clock_reads), (now - 900, reads));
        // A probe queued: counted in flight, with its record's time.
        m.now = Some(now - 800);
        m.run(&tx, &[skb]);
        assert_eq!(
            (m.records.len(), inflight(&mut m), m.read(INFLIGHT + 8, 8)),
            (3, 1, now - 800)
        );
        m.now = Some(now - 500);
        m.run(&entry, &[3]);
        m.now = Some(now);
        m.run(&rx, &[skb]);
        assert_eq!(m.records.len(), 5);
        let time = |r: &Vec<u8>| u64::from_le_bytes(r[0..8].try_into().unwrap());
        let code = |r: &Vec<u8>| u32::from_le_bytes(r[20..24].try_into().unwrap());
        assert_eq!((code(&m.records[3]), time(&m.records[3])), (3, now));
        assert_eq!((code(&m.records[4]), time(&m.records[4])), (5, now - 500));
        assert_eq!(
            (armed(&mut m), m.read(GATE + 8, 8), inflight(&mut m)),
            (now, 0, 0),
            "armed, the entry taken, the probe no longer in flight"
        );
        m.run(&rx, &[skb]);
        assert_eq!(m.records.len(), 6, "the entry is written once");
        // An entry left from before the probe was queued (the softirq that
        // takes this probe began before it), or from long before the
        // receive, is not taken.
        for (entry_at, tx_at) in [(now - 900, now - 800), (now - 2_000_000, now - 3_000_000)] {
            m.mem
                .insert(GATE, [[0; 8], entry_at.to_le_bytes()].concat());
            m.now = Some(tx_at);
            m.run(&tx, &[skb]);
            m.now = Some(now);
            m.run(&rx, &[skb]);
            assert_eq!(code(m.records.last().unwrap()), 3, "{entry_at} {tx_at}");
            assert_eq!(m.read(GATE + 8, 8), entry_at, "not consumed");
        }
        let n = m.records.len();
        // A length outside the probes' arms nothing, marks nothing.
        m.mem.insert(GATE, vec![0; 16]);
        m.mem.get_mut(&skb).unwrap()[112..116].copy_from_slice(&1472u32.to_le_bytes());
        m.run(&tx, &[skb]);
        m.run(&rx, &[skb]);
        assert_eq!(
            (m.records.len(), armed(&mut m), inflight(&mut m)),
            (n, 0, 0)
        );
    }

    /// The words of a program, as the kernel gets them.
    fn words(p: Vec<BpfInsn>) -> Vec<[u8; 8]> {
        p.iter().map(|i| i.to_le_bytes()).collect()
    }

    /// The programs of a probe's queue, receive and drop (lengths
    /// 100…217 at skb offset 112), and the NET_RX softirq entry's, on the
    /// interpreter's maps.
    struct Probe {
        tx: Vec<[u8; 8]>,
        rx: Vec<[u8; 8]>,
        drop: Vec<[u8; 8]>,
        entry: Vec<[u8; 8]>,
    }

    /// Record codes of [`probe_programs`]: queue, receive, drop, the
    /// softirq entry.
    const TX: u32 = 1;
    const RX: u32 = 3;
    const DROP: u32 = 4;
    const ENTRY: u32 = 5;

    fn probe_programs() -> Probe {
        use vm::{GATE_FD, INFLIGHT_FD, RING_FD};
        let rx = ProgSpec {
            code: RX,
            len: Source::Arg0Member(112),
            dev: None,
            object_arg: 0,
            object_member: None,
            drop_args: None,
            lo: 100,
            hi: 217,
        };
        let arm = Arm {
            gate: GATE_FD,
            softirq_code: ENTRY,
            inflight: INFLIGHT_FD,
        };
        let dev = DevOffsets::default();
        let made = |spec: &ProgSpec, after| words(program(spec, &dev, RING_FD, after));
        Probe {
            tx: made(&ProgSpec { code: TX, ..rx }, After::Inflight(INFLIGHT_FD)),
            rx: made(&rx, After::Arm(&arm)),
            drop: made(
                &ProgSpec {
                    code: DROP,
                    drop_args: Some((2, 1)),
                    ..rx
                },
                After::Dropped(Dropped {
                    inflight: INFLIGHT_FD,
                    skb_dev: SKB_DEV,
                    skb_iif: SKB_IIF,
                    ifindex: IFINDEX,
                }),
            ),
            entry: words(softirq_entry_program(GATE_FD, INFLIGHT_FD)),
        }
    }

    /// Offsets in the fake skb of `dev` and `skb_iif`, in the fake device
    /// of `ifindex`.
    const SKB_DEV: i16 = 16;
    const SKB_IIF: i16 = 144;
    const IFINDEX: i16 = 8;
    /// The fake device, and its ifindex.
    const NETDEV: u64 = 0x9000_0000;
    const NETDEV_IFINDEX: u32 = 7;

    /// A fake skb of a probe's length (142 at offset 112) on [`NETDEV`],
    /// never received (`skb_iif` 0).
    fn probe_skb() -> Vec<u8> {
        let mut b = vec![0u8; 256];
        b[112..116].copy_from_slice(&142u32.to_le_bytes());
        b[SKB_DEV as usize..][..8].copy_from_slice(&NETDEV.to_le_bytes());
        b
    }

    /// A time to start at, ns.
    const T0: u64 = 5_000_000_000;

    /// An interpreter holding one probe's skb at [`vm::SKB`].
    fn probe_vm() -> vm::Vm {
        let mut m = vm::Vm::default();
        m.mem.insert(vm::SKB, probe_skb());
        let mut dev = vec![0u8; 64];
        dev[IFINDEX as usize..][..4].copy_from_slice(&NETDEV_IFINDEX.to_le_bytes());
        m.mem.insert(NETDEV, dev);
        m
    }

    /// The in-flight count, as the programs' signed u64.
    fn in_flight(m: &mut vm::Vm) -> i64 {
        m.read(vm::INFLIGHT, 8) as i64
    }

    /// Runs `prog` with `args` at time `at`.
    fn at(m: &mut vm::Vm, at: u64, prog: &[[u8; 8]], args: &[u64]) {
        m.now = Some(at);
        m.run(prog, args);
    }

    /// A record's code, time and skb address.
    fn fields(r: &[u8]) -> (u32, u64, u64) {
        let word = |at: usize| u64::from_le_bytes(r[at..at + 8].try_into().unwrap());
        (
            u32::from_le_bytes(r[20..24].try_into().unwrap()),
            word(0),
            word(8),
        )
    }

    #[test]
    fn overlapping_probes_each_get_their_softirq_entry() {
        let p = probe_programs();
        let (first, second, t) = (vm::SKB, vm::SKB + 0x1000, T0);
        for order in [[first, second], [second, first]] {
            let mut m = probe_vm();
            m.mem.insert(second, probe_skb());
            // Two probes queued before either is received.
            at(&mut m, t, &p.tx, &[first]);
            at(&mut m, t + 10, &p.tx, &[second]);
            assert_eq!(in_flight(&mut m), 2);
            // Each received in a NET_RX softirq of its own, in the order
            // sent or the other: the first receive leaves the other probe
            // counted, so the second softirq's entry is still timed.
            for (skb, entry) in order.into_iter().zip([t + 100, t + 300]) {
                at(&mut m, entry, &p.entry, &[3]);
                at(&mut m, entry + 50, &p.rx, &[skb]);
            }
            let got: Vec<_> = m.records[2..].iter().map(|r| fields(r)).collect();
            assert_eq!(
                got,
                [
                    (RX, t + 150, order[0]),
                    (ENTRY, t + 100, 0),
                    (RX, t + 350, order[1]),
                    (ENTRY, t + 300, 0),
                ],
                "{order:x?}"
            );
            assert_eq!(in_flight(&mut m), 0);
        }
    }

    #[test]
    fn the_in_flight_count_never_goes_below_zero() {
        let (p, mut m) = (probe_programs(), probe_vm());
        let (skb, t) = (vm::SKB, T0);
        // Receives and drops with nothing counted (a packet queued outside
        // the host, a drop of one never counted) leave it at zero.
        at(&mut m, t, &p.rx, &[skb]);
        at(&mut m, t + 1, &p.drop, &[skb, 0, 2]);
        at(&mut m, t + 2, &p.rx, &[skb]);
        assert_eq!(in_flight(&mut m), 0);
        // So the next probe counts from zero: one queued is one in flight,
        // and its receive takes it back to zero.
        at(&mut m, t + 10, &p.tx, &[skb]);
        assert_eq!(in_flight(&mut m), 1);
        at(&mut m, t + 20, &p.rx, &[skb]);
        at(&mut m, t + 30, &p.rx, &[skb]);
        assert_eq!(in_flight(&mut m), 0);
    }

    #[test]
    fn a_dropped_probe_leaves_the_count_and_stops_the_clock_reads() {
        let (p, mut m) = (probe_programs(), probe_vm());
        let (skb, t) = (vm::SKB, T0);
        // With nothing in flight a NET_RX entry reads no clock and leaves
        // the gate's entry slot as it was.
        at(&mut m, t, &p.entry, &[3]);
        assert_eq!((m.clock_reads, m.read(vm::GATE + 8, 8)), (0, 0));
        // Two probes queued, one dropped (its record written, with its
        // reason), one received: none in flight.
        at(&mut m, t + 10, &p.tx, &[skb]);
        at(&mut m, t + 20, &p.tx, &[skb]);
        at(&mut m, t + 30, &p.drop, &[skb, 0, 2]);
        assert_eq!(in_flight(&mut m), 1);
        assert_eq!(fields(m.records.last().unwrap()).0, DROP);
        at(&mut m, t + 40, &p.entry, &[3]);
        assert_eq!(
            m.read(vm::GATE + 8, 8),
            t + 40,
            "one still in flight: timed"
        );
        at(&mut m, t + 50, &p.rx, &[skb]);
        assert_eq!(in_flight(&mut m), 0);
        // Then a NET_RX entry (and another vector's) reads no clock again.
        let reads = m.clock_reads;
        at(&mut m, t + 60, &p.entry, &[3]);
        at(&mut m, t + 70, &p.entry, &[2]);
        assert_eq!((m.clock_reads, m.read(vm::GATE + 8, 8)), (reads, 0));
    }

    #[test]
    fn a_count_read_between_another_cpus_two_adds_is_taken_as_signed() {
        let (p, mut m) = (probe_programs(), probe_vm());
        let (skb, t) = (vm::SKB, T0);
        // Another CPU took a receive off a zero count and has not yet added
        // its 1 back: the count reads -1.
        let minus_one = |m: &mut vm::Vm| {
            m.mem
                .insert(vm::INFLIGHT, [(-1i64).to_le_bytes(), [0; 8]].concat())
        };
        minus_one(&mut m);
        // A NET_RX entry takes it as no probe in flight (a signed compare):
        // no clock read.
        at(&mut m, t, &p.entry, &[3]);
        assert_eq!((m.clock_reads, m.read(vm::GATE + 8, 8)), (0, 0));
        // A receive here fetches -1, not above zero (a signed compare), so
        // it adds its 1 back: once the other CPU adds its own, zero again.
        at(&mut m, t + 10, &p.rx, &[skb]);
        assert_eq!(in_flight(&mut m), -1);
        // And so does a drop on the way.
        at(&mut m, t + 20, &p.drop, &[skb, 0, 2]);
        assert_eq!(in_flight(&mut m), -1);
    }

    #[test]
    #[should_panic(expected = "outside memory")]
    fn the_interpreter_refuses_r1_after_a_call() {
        // r1 holds the context before the call and nothing after it, as in
        // the kernel: a program that reads through it fails its test.
        let prog = words(vec![
            BpfInsn::call(FN_KTIME_GET_NS),
            BpfInsn::ldx(BpfSize::Dw, 0, 1, 0),
            BpfInsn::exit(),
        ]);
        probe_vm().run(&prog, &[0]);
    }

    #[test]
    fn only_a_drop_on_the_way_takes_a_probe_off() {
        let p = probe_programs();
        let skb = vm::SKB;
        let set = |m: &mut vm::Vm, dev: u64, iif: u32| {
            let b = m.mem.get_mut(&skb).unwrap();
            b[SKB_DEV as usize..][..8].copy_from_slice(&dev.to_le_bytes());
            b[SKB_IIF as usize..][..4].copy_from_slice(&iif.to_le_bytes());
        };
        // (device, skb_iif, taken off): never received; received on the
        // device it is dropped on (after its receive); received on another
        // (a forwarding hop's way out); no device.
        for (dev, iif, off) in [
            (NETDEV, 0, true),
            (NETDEV, NETDEV_IFINDEX, false),
            (NETDEV, 3, true),
            (0, 0, false),
        ] {
            let mut m = probe_vm();
            at(&mut m, T0, &p.tx, &[skb]);
            at(&mut m, T0 + 10, &p.tx, &[skb]);
            set(&mut m, dev, iif);
            at(&mut m, T0 + 20, &p.drop, &[skb, 0, 2]);
            assert_eq!(fields(m.records.last().unwrap()).0, DROP);
            assert_eq!(in_flight(&mut m), if off { 1 } else { 2 }, "{dev:#x} {iif}");
        }
    }

    /// A small eBPF interpreter for the `--iface` programs: enough of the
    /// instruction set and helpers to run them against crafted packets.
    mod vm {
        use std::collections::BTreeMap;

        pub(super) const STACK: u64 = 0x1000_0000;
        pub(super) const CTX: u64 = 0x2000_0000;
        pub(super) const SKB: u64 = 0x3000_0000;
        pub(super) const PKT: u64 = 0x4000_0000;
        const CHAIN_VALUE: u64 = 0x5000_0000;
        const LOST: u64 = 0x6000_0000;
        /// The gate map's two per-CPU slots (one CPU).
        pub(super) const GATE: u64 = 0x7000_0000;
        pub(super) const RING_FD: i32 = 100;
        pub(super) const GATE_FD: i32 = 103;
        /// The in-flight map's two slots: the count, the last queue's time.
        pub(super) const INFLIGHT: u64 = 0x8000_0000;
        pub(super) const INFLIGHT_FD: i32 = 104;
        /// What r1–r5 hold after a helper call: no address the interpreter
        /// maps, so a load through one panics.
        const CLOBBERED: u64 = 0xdead_0000_0000_0000;
        pub(super) const CHAINS_FD: i32 = 101;
        pub(super) const LOST_FD: i32 = 102;

        #[derive(Default)]
        pub(super) struct Vm {
            pub mem: BTreeMap<u64, Vec<u8>>,
            pub chains: BTreeMap<u64, u64>,
            pub records: Vec<Vec<u8>>,
            pub ring_full: bool,
            /// `bpf_ktime_get_ns` (None: 42).
            pub now: Option<u64>,
            /// Calls of `bpf_ktime_get_ns`.
            pub clock_reads: u32,
        }

        impl Vm {
            fn region(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
                let (&base, bytes) = self.mem.range_mut(..=addr).next_back()?;
                let at = usize::try_from(addr - base).ok()?;
                bytes.get_mut(at..at + len)
            }

            pub(super) fn read(&mut self, addr: u64, len: usize) -> u64 {
                let b = self
                    .region(addr, len)
                    .unwrap_or_else(|| panic!("read of {len} at {addr:#x} outside memory"));
                let mut v = [0u8; 8];
                v[..len].copy_from_slice(b);
                u64::from_le_bytes(v)
            }

            fn write(&mut self, addr: u64, len: usize, v: u64) {
                let b = self
                    .region(addr, len)
                    .unwrap_or_else(|| panic!("write of {len} at {addr:#x} outside memory"));
                b.copy_from_slice(&v.to_le_bytes()[..len]);
            }

            fn bytes(&mut self, addr: u64, len: usize) -> Option<Vec<u8>> {
                self.region(addr, len).map(|b| b.to_vec())
            }

            /// Runs `p` with `ctx` as the tracepoint's arguments.
            pub(super) fn run(&mut self, p: &[[u8; 8]], args: &[u64]) {
                self.mem.insert(STACK - 512, vec![0xaa; 512]);
                self.mem
                    .insert(CTX, args.iter().flat_map(|a| a.to_le_bytes()).collect());
                self.mem.entry(LOST).or_insert_with(|| vec![0; 8]);
                self.mem.insert(CHAIN_VALUE, vec![0; 8]);
                self.mem.entry(GATE).or_insert_with(|| vec![0; 16]);
                self.mem.entry(INFLIGHT).or_insert_with(|| vec![0; 16]);
                let mut r = [0u64; 11];
                r[1] = CTX;
                r[10] = STACK;
                let mut pc = 0usize;
                for _ in 0..10_000 {
                    let i = p[pc];
                    let (code, dst, src) = (i[0], usize::from(i[1] & 0x0f), usize::from(i[1] >> 4));
                    let off = i16::from_le_bytes([i[2], i[3]]);
                    let imm = i32::from_le_bytes([i[4], i[5], i[6], i[7]]);
                    let addr = |base: u64| base.wrapping_add(off as i64 as u64);
                    let size = |c: u8| match c & 0x18 {
                        0x00 => 4,
                        0x08 => 2,
                        0x10 => 1,
                        _ => 8,
                    };
                    pc += 1;
                    match code {
                        0x18 => {
                            // ld_imm64: a map's fd.
                            assert_eq!(src, 1);
                            r[dst] = imm as u32 as u64;
                            pc += 1;
                        }
                        0xb7 => r[dst] = imm as i64 as u64,
                        0xbf => r[dst] = r[src],
                        0xbc => r[dst] = r[src] & 0xffff_ffff,
                        0x07 => r[dst] = r[dst].wrapping_add(imm as i64 as u64),
                        0x0f => r[dst] = r[dst].wrapping_add(r[src]),
                        0x1f => r[dst] = r[dst].wrapping_sub(r[src]),
                        0x4f => r[dst] |= r[src],
                        0x57 => r[dst] &= imm as i64 as u64,
                        0x67 => r[dst] <<= imm,
                        0x77 => r[dst] >>= imm,
                        c if c & 0x07 == 0x01 => {
                            let n = size(c);
                            r[dst] = self.read(addr(r[src]), n);
                        }
                        c if c & 0x07 == 0x03 && c & 0xe0 == 0x60 => {
                            let n = size(c);
                            self.write(addr(r[dst]), n, r[src]);
                        }
                        c if c & 0x07 == 0x02 => {
                            let n = size(c);
                            self.write(addr(r[dst]), n, imm as i64 as u64);
                        }
                        0xdb => {
                            // BPF_ADD, with BPF_FETCH the old value into src.
                            let at = addr(r[dst]);
                            let old = self.read(at, 8);
                            self.write(at, 8, old.wrapping_add(r[src]));
                            match imm {
                                0x00 => {}
                                0x01 => r[src] = old,
                                other => panic!("atomic op {other:#x}"),
                            }
                        }
                        0x05 => pc = (pc as i64 + i64::from(off)) as usize,
                        0x1d => {
                            if r[dst] == r[src] {
                                pc = (pc as i64 + i64::from(off)) as usize;
                            }
                        }
                        0xad => {
                            if r[dst] < r[src] {
                                pc = (pc as i64 + i64::from(off)) as usize;
                            }
                        }
                        0x65 | 0xd5 => {
                            let (a, b) = (r[dst] as i64, i64::from(imm));
                            if (code == 0x65 && a > b) || (code == 0xd5 && a <= b) {
                                pc = (pc as i64 + i64::from(off)) as usize;
                            }
                        }
                        0x15 | 0x55 | 0xa5 | 0x25 | 0x16 | 0x56 => {
                            let (a, b) = if code & 0x07 == 0x06 {
                                (r[dst] & 0xffff_ffff, u64::from(imm as u32))
                            } else {
                                (r[dst], imm as i64 as u64)
                            };
                            let take = match code & 0xf0 {
                                0x10 => a == b,
                                0x50 => a != b,
                                0xa0 => a < b,
                                _ => a > b,
                            };
                            if take {
                                pc = (pc as i64 + i64::from(off)) as usize;
                            }
                        }
                        0x85 => {
                            r[0] = self.call(imm, &r);
                            // The kernel leaves r1–r5 undefined after a
                            // call: a program that reads one must fail here.
                            r[1..6].fill(CLOBBERED);
                        }
                        0x95 => return,
                        other => panic!("opcode {other:#x} at {}", pc - 1),
                    }
                }
                panic!("the program did not end");
            }

            fn call(&mut self, helper: i32, r: &[u64; 11]) -> u64 {
                let key = |vm: &mut Self| vm.read(r[2], 8);
                match helper {
                    super::super::FN_MAP_LOOKUP_ELEM if r[1] == CHAINS_FD as u64 => {
                        let k = key(self);
                        if self.chains.contains_key(&k) {
                            CHAIN_VALUE
                        } else {
                            0
                        }
                    }
                    super::super::FN_MAP_LOOKUP_ELEM if r[1] == GATE_FD as u64 => {
                        GATE + 8 * self.read(r[2], 4)
                    }
                    super::super::FN_MAP_LOOKUP_ELEM if r[1] == INFLIGHT_FD as u64 => {
                        let k = self.read(r[2], 4);
                        assert!(k < 2, "in-flight key {k}");
                        INFLIGHT + 8 * k
                    }
                    super::super::FN_MAP_LOOKUP_ELEM => {
                        assert_eq!(r[1], LOST_FD as u64);
                        LOST
                    }
                    super::super::FN_MAP_UPDATE_ELEM => {
                        let (k, v) = (key(self), self.read(r[3], 8));
                        self.chains.insert(k, v);
                        0
                    }
                    super::super::FN_MAP_DELETE_ELEM => {
                        let k = key(self);
                        self.chains.remove(&k);
                        0
                    }
                    super::super::FN_KTIME_GET_NS => {
                        self.clock_reads += 1;
                        self.now.unwrap_or(42)
                    }
                    super::super::FN_GET_SMP_PROCESSOR_ID => 1,
                    super::super::FN_PROBE_READ_KERNEL => {
                        let n = r[2] as usize;
                        match self.bytes(r[3], n) {
                            Some(b) => {
                                for (i, v) in b.into_iter().enumerate() {
                                    self.write(r[1] + i as u64, 1, u64::from(v));
                                }
                                0
                            }
                            None => {
                                for i in 0..n {
                                    self.write(r[1] + i as u64, 1, 0);
                                }
                                -14i64 as u64
                            }
                        }
                    }
                    super::super::FN_RINGBUF_OUTPUT => {
                        assert_eq!(r[1], RING_FD as u64);
                        if self.ring_full {
                            return -11i64 as u64;
                        }
                        let rec = self.bytes(r[2], r[3] as usize).unwrap();
                        self.records.push(rec);
                        0
                    }
                    other => panic!("helper {other}"),
                }
            }

            pub(super) fn lost(&mut self) -> u64 {
                self.read(LOST, 8)
            }
        }
    }

    use linerate_core::journey::filter::{read_headers, Verdict};

    /// Offsets in the fake skb.
    const LEN_OFF: i16 = 112;
    const DATA_OFF: i16 = 200;
    const HEAD_OFF: i16 = 192;
    const NH_OFF: i16 = 180;
    /// Where the IP header sits in the fake buffer.
    const NH: u16 = 64;

    fn iface_prog(filter: &IfaceFilter, header: HeaderAt) -> Vec<[u8; 8]> {
        iface_prog_freeing(filter, header, false)
    }

    fn iface_prog_freeing(filter: &IfaceFilter, header: HeaderAt, forget: bool) -> Vec<[u8; 8]> {
        let spec = IfaceSpec {
            base: ProgSpec {
                code: 4,
                len: Source::Arg0Member(LEN_OFF),
                dev: None,
                object_arg: 0,
                object_member: None,
                drop_args: None,
                lo: 0,
                hi: 0,
            },
            header,
            filter,
            forget,
        };
        let maps = IfaceMaps {
            ring: vm::RING_FD,
            chains: vm::CHAINS_FD,
            lost: vm::LOST_FD,
        };
        iface_program(&spec, &DevOffsets::default(), maps)
            .iter()
            .map(|i| i.to_le_bytes())
            .collect()
    }

    /// Runs `prog` on an skb at `skb` whose IP header is `ip`.
    fn run(m: &mut vm::Vm, prog: &[[u8; 8]], skb: u64, ip: &[u8], nh: u16) {
        // The buffer goes on past the packet (skb_shared_info and more), as
        // in the kernel: the 40-byte read may pass a short packet's end.
        let mut buf = vec![0u8; usize::from(NH)];
        buf.extend_from_slice(ip);
        buf.resize(buf.len() + 64, 0);
        m.mem.insert(vm::PKT, buf);
        let mut s = vec![0u8; 256];
        s[LEN_OFF as usize..][..4].copy_from_slice(&(ip.len() as u32).to_le_bytes());
        s[DATA_OFF as usize..][..8].copy_from_slice(&(vm::PKT + u64::from(NH)).to_le_bytes());
        s[HEAD_OFF as usize..][..8].copy_from_slice(&vm::PKT.to_le_bytes());
        s[NH_OFF as usize..][..2].copy_from_slice(&nh.to_le_bytes());
        m.mem.insert(skb, s);
        m.run(prog, &[skb]);
    }

    /// IPv4 header (no options) + 8 transport bytes: ports, then zeros.
    fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], ports: (u16, u16), total: u16) -> Vec<u8> {
        let t = total.to_be_bytes();
        [
            &[0x45, 0, t[0], t[1], 0x12, 0x34, 0, 0, 64, proto, 0, 0][..],
            &src,
            &dst,
            &ports.0.to_be_bytes(),
            &ports.1.to_be_bytes(),
            &[0; 4],
        ]
        .concat()
    }

    /// IPv6 header + 8 transport bytes.
    fn ipv6(
        next: u8,
        src: std::net::Ipv6Addr,
        dst: std::net::Ipv6Addr,
        ports: (u16, u16),
        payload: u16,
    ) -> Vec<u8> {
        let p = payload.to_be_bytes();
        [
            &[0x60, 0, 0, 0, p[0], p[1], next, 64][..],
            &src.octets(),
            &dst.octets(),
            &ports.0.to_be_bytes(),
            &ports.1.to_be_bytes(),
            &[0; 4],
        ]
        .concat()
    }

    #[test]
    fn the_iface_program_judges_as_the_core_reading_does() {
        let (s6, d6) = ("2001:2::1".parse().unwrap(), "2001:2::2".parse().unwrap());
        let mut frag = ipv4(17, [198, 18, 0, 1], [198, 18, 0, 2], (40000, 5201), 128);
        frag[6] = 0x00;
        frag[7] = 0x20;
        let mut opts = ipv4(17, [198, 18, 0, 1], [198, 18, 0, 2], (1, 1), 132);
        opts[0] = 0x46;
        opts.splice(20..20, [1, 1, 1, 0]);
        opts[24..26].copy_from_slice(&40000u16.to_be_bytes());
        opts[26..28].copy_from_slice(&5201u16.to_be_bytes());
        let packets: Vec<Vec<u8>> = vec![
            ipv4(17, [198, 18, 0, 1], [198, 18, 0, 2], (40000, 5201), 128),
            ipv4(17, [198, 18, 0, 1], [198, 18, 0, 200], (5201, 9), 1500),
            ipv4(6, [198, 18, 0, 1], [198, 18, 0, 2], (40000, 5201), 52),
            ipv4(1, [198, 18, 0, 1], [198, 18, 0, 2], (5201, 5201), 84),
            frag,
            opts,
            ipv6(17, s6, d6, (40000, 5201), 108),
            ipv6(58, s6, d6, (0, 0), 64),
            ipv6(6, d6, s6, (5201, 40000), 20),
            vec![0u8; 48],
        ];
        let filters = [
            "udp",
            "tcp",
            "icmp",
            "port 5201",
            "udp port 5201",
            "host 198.18.0.2",
            "host 198.18.0.200",
            "host 2001:2::1",
            "len 100..200",
            "len 84",
            "udp and port 5201 and host 198.18.0.1 and len 128",
            "tcp port 5201 host 2001:2::2 len 60",
        ];
        let mut matched = 0;
        for f in filters {
            let filter = IfaceFilter::parse(f).unwrap();
            for header in [
                HeaderAt::Data(DATA_OFF),
                HeaderAt::Network(HEAD_OFF, NH_OFF),
            ] {
                let prog = iface_prog(&filter, header);
                for (i, ip) in packets.iter().enumerate() {
                    let mut m = vm::Vm::default();
                    let skb = vm::SKB + i as u64 * 0x1000;
                    run(&mut m, &prog, skb, ip, NH);
                    let want = filter.judge_headers(ip);
                    let got = m.records.first();
                    assert_eq!(
                        got.is_some(),
                        want == Verdict::Match,
                        "`{f}` on packet {i}: {want:?}"
                    );
                    assert_eq!(m.chains.contains_key(&skb), want == Verdict::Match);
                    if let Some(rec) = got {
                        matched += 1;
                        assert_eq!(rec.len(), record::SIZE as usize);
                        let e = record::decode(rec, |_| None).unwrap();
                        assert_eq!(e.skb, Some(skb));
                        let Some(linerate_core::journey::Kept::Headers(h)) = e.kept else {
                            panic!("kept by its headers")
                        };
                        let facts = read_headers(ip).unwrap();
                        assert_eq!(Some(h.proto), facts.ip_proto);
                        assert_eq!(Some(h.len), facts.len);
                        if let Some((sp, dp)) = facts.ports {
                            assert_eq!(
                                h.transport[..4],
                                [sp.to_be_bytes(), dp.to_be_bytes()].concat()[..]
                            );
                        }
                    }
                }
            }
        }
        assert!(matched > 20, "the filters match some packets: {matched}");
    }

    #[test]
    fn events_without_headers_follow_the_chain() {
        let filter = IfaceFilter::parse("udp port 5201").unwrap();
        let udp = ipv4(17, [198, 18, 0, 1], [198, 18, 0, 2], (40000, 5201), 128);
        let other = ipv4(17, [198, 18, 0, 1], [198, 18, 0, 2], (40000, 5202), 128);
        let net = iface_prog(&filter, HeaderAt::Network(HEAD_OFF, NH_OFF));
        let nowhere = iface_prog(&filter, HeaderAt::Nowhere);
        let mut m = vm::Vm::default();
        // Not matched yet: an event without headers writes nothing.
        run(&mut m, &nowhere, vm::SKB, &udp, NH);
        assert!(m.records.is_empty());
        // No network header yet (0 or ~0): the chain decides.
        run(&mut m, &net, vm::SKB, &udp, 0);
        run(&mut m, &net, vm::SKB, &udp, 0xffff);
        assert!(m.records.is_empty());
        // A match, then the event without headers follows it.
        run(&mut m, &net, vm::SKB, &udp, NH);
        run(&mut m, &nowhere, vm::SKB, &udp, NH);
        run(&mut m, &net, vm::SKB, &udp, 0xffff);
        assert_eq!(m.records.len(), 3);
        let kept: Vec<_> = m
            .records
            .iter()
            .map(|r| record::decode(r, |_| None).unwrap().kept)
            .collect();
        use linerate_core::journey::Kept;
        assert!(matches!(kept[0], Some(Kept::Headers(_))));
        assert_eq!(kept[1..], [Some(Kept::Chain), Some(Kept::Chain)]);
        // The address reused by a packet that does not match: out of the map.
        run(&mut m, &net, vm::SKB, &other, NH);
        run(&mut m, &nowhere, vm::SKB, &other, NH);
        assert_eq!(m.records.len(), 3);
        assert!(m.chains.is_empty());
        // A full ring: the record is counted as lost.
        m.ring_full = true;
        run(&mut m, &net, vm::SKB, &udp, NH);
        assert_eq!((m.records.len(), m.lost()), (3, 1));
    }

    #[test]
    fn a_freed_buffer_leaves_the_chain() {
        let filter = IfaceFilter::parse("udp port 5201").unwrap();
        let udp = ipv4(17, [198, 18, 0, 1], [198, 18, 0, 2], (40000, 5201), 128);
        let net = iface_prog(&filter, HeaderAt::Network(HEAD_OFF, NH_OFF));
        let nowhere = iface_prog(&filter, HeaderAt::Nowhere);
        let freed = iface_prog_freeing(&filter, HeaderAt::Nowhere, true);
        let mut m = vm::Vm::default();
        run(&mut m, &net, vm::SKB, &udp, NH);
        // The free is recorded (its chain), and takes the address out.
        run(&mut m, &freed, vm::SKB, &udp, NH);
        assert_eq!(m.records.len(), 2);
        assert!(m.chains.is_empty());
        // The next buffer at that address, seen first where no header is
        // read, is not taken for the freed packet.
        run(&mut m, &nowhere, vm::SKB, &udp, NH);
        run(&mut m, &freed, vm::SKB, &udp, NH);
        assert_eq!(m.records.len(), 2);
    }
}
