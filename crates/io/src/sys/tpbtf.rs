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

use linerate_core::journey::record;

use super::bpf::{bpf, BpfError, BpfInsn, BpfJump, BpfSize, MapCreateAttr};
use super::syscall;

/// `BPF_MAP_CREATE`.
const BPF_MAP_CREATE: libc::c_long = 0;
/// `BPF_PROG_LOAD`.
const BPF_PROG_LOAD: libc::c_long = 5;
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

fn load_value(into: u8, from: Source, size: BpfSize) -> BpfInsn {
    match from {
        Source::Arg0Member(off) => BpfInsn::ldx(size, into, ARG0, off),
        // tp_btf arguments are u64 slots of the context.
        Source::Arg(n) => BpfInsn::ldx(BpfSize::Dw, into, CTX, n * 8),
    }
}

/// The program of `spec`, writing to ring buffer `map_fd`.
pub(crate) fn program(spec: &ProgSpec, dev: &DevOffsets, map_fd: i32) -> Vec<BpfInsn> {
    let mut p = vec![
        BpfInsn::mov64_reg(CTX, 1),
        BpfInsn::ldx(BpfSize::Dw, ARG0, CTX, spec.object_arg * 8),
        load_value(LEN, spec.len, BpfSize::W),
    ];
    if matches!(spec.len, Source::Arg(_)) {
        // An int argument: its low 32 bits (a negative return is huge, so
        // it is filtered out).
        p.push(BpfInsn::mov32_reg(LEN, LEN));
    }
    // The filter: jumps to the end, patched below. The bounds are at most
    // a few thousand bytes; `as i32` keeps them (checked by the caller).
    let mut to_end = vec![p.len()];
    p.push(BpfInsn::jmp_imm(BpfJump::Lt, LEN, spec.lo as i32, 0));
    to_end.push(p.len());
    p.push(BpfInsn::jmp_imm(BpfJump::Gt, LEN, spec.hi as i32, 0));
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
        p.push(load_value(DEV, from, BpfSize::Dw));
        if let Some(off) = dev.ifindex {
            p.push(BpfInsn::ldx(BpfSize::W, 1, DEV, off));
            p.push(BpfInsn::stx(BpfSize::W, FP, slot(record::IFINDEX), 1));
        }
        if let Some((net, inum)) = dev.netns {
            p.push(BpfInsn::ldx(BpfSize::Dw, 1, DEV, net));
            p.push(BpfInsn::ldx(BpfSize::W, 1, 1, inum));
            p.push(BpfInsn::stx(BpfSize::W, FP, slot(record::NETNS), 1));
        }
        if let Some(off) = dev.name {
            p.extend([
                BpfInsn::mov64_reg(1, FP),
                BpfInsn::add64_imm(1, i32::from(slot(record::NAME))),
                BpfInsn::mov64_imm(2, 16),
                BpfInsn::mov64_reg(3, DEV),
                BpfInsn::add64_imm(3, i32::from(off)),
                BpfInsn::call(FN_PROBE_READ_KERNEL),
            ]);
        }
    }
    p.extend(BpfInsn::ld_map_fd(1, map_fd));
    p.extend([
        BpfInsn::mov64_reg(2, FP),
        BpfInsn::add64_imm(2, i32::from(-record::SIZE)),
        BpfInsn::mov64_imm(3, i32::from(record::SIZE)),
        BpfInsn::mov64_imm(4, BPF_RB_NO_WAKEUP),
        BpfInsn::call(FN_RINGBUF_OUTPUT),
    ]);
    let end = p.len();
    for at in to_end {
        // Jump offsets count from the next instruction; programs are short.
        p[at] = p[at].with_off((end - at - 1) as i16);
    }
    p.extend([BpfInsn::mov64_imm(0, 0), BpfInsn::exit()]);
    p
}

/// The `BPF_PROG_LOAD` part of `union bpf_attr` up to `attach_btf_obj_fd`.
#[repr(C)]
#[derive(Debug, Default)]
struct TracingLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    attach_btf_id: u32,
    attach_btf_obj_fd: u32,
    _pad: u32,
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

fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    let n = name.len().min(15);
    out[..n].copy_from_slice(&name.as_bytes()[..n]);
    out
}

/// Loads `insns` as a `tp_btf` program attached to BTF type
/// `attach_btf_id` (a `btf_trace_*` typedef of vmlinux). On EINVAL/EACCES it
/// loads again with the verifier log on, to say why.
pub(crate) fn load(insns: &[BpfInsn], attach_btf_id: u32, name: &str) -> Result<OwnedFd, BpfError> {
    let license = b"GPL\0";
    let load = |log: Option<&mut Vec<u8>>| -> io::Result<libc::c_long> {
        let mut attr = TracingLoadAttr {
            prog_type: BPF_PROG_TYPE_TRACING,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            prog_name: name16(name),
            expected_attach_type: BPF_TRACE_RAW_TP,
            attach_btf_id,
            ..TracingLoadAttr::default()
        };
        if let Some(buf) = log {
            attr.log_level = 1;
            attr.log_size = buf.len() as u32;
            attr.log_buf = buf.as_mut_ptr() as u64;
        }
        bpf(BPF_PROG_LOAD, &mut attr)
    };
    match load(None) {
        Ok(fd) => owned(fd).map_err(|source| BpfError {
            cmd: "BPF_PROG_LOAD",
            source,
            log: None,
        }),
        Err(source) => {
            let log = if matches!(source.raw_os_error(), Some(libc::EINVAL | libc::EACCES)) {
                let mut buf = vec![0u8; 256 * 1024];
                let _ = load(Some(&mut buf));
                let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
                let text = String::from_utf8_lossy(&buf[..end]).into_owned();
                // The last lines say why.
                let tail: Vec<&str> = text.lines().rev().take(6).collect();
                Some(tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
                    .filter(|s| !s.trim().is_empty())
            } else {
                None
            };
            Err(BpfError {
                cmd: "BPF_PROG_LOAD",
                source,
                log,
            })
        }
    }
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
            map_name: name16("lr_journey"),
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
        assert_eq!(
            std::mem::offset_of!(TracingLoadAttr, expected_attach_type),
            68
        );
        assert_eq!(std::mem::offset_of!(TracingLoadAttr, func_info), 80);
        assert_eq!(std::mem::offset_of!(TracingLoadAttr, line_info), 96);
        assert_eq!(std::mem::offset_of!(TracingLoadAttr, attach_btf_id), 108);
        assert_eq!(
            std::mem::offset_of!(TracingLoadAttr, attach_btf_obj_fd),
            112
        );
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
            drop_args: None,
            lo: 100,
            hi: 217,
        };
        let p = program(&spec, &DevOffsets::default(), 5);
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
            drop_args: None,
            lo: 100,
            hi: 217,
        };
        let dev = DevOffsets {
            ifindex: Some(200),
            name: Some(300),
            netns: Some((400, 8)),
        };
        let p = program(&spec, &dev, 5);
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
}
