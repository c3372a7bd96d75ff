//! bpf(2) for the XDP "live frames" generator: a four-instruction XDP
//! program `return bpf_redirect(ifindex, 0)`, assembled here as raw eBPF
//! (no clang, no libbpf), loaded with `BPF_PROG_LOAD`, and run with
//! `BPF_PROG_TEST_RUN` + `BPF_F_TEST_XDP_LIVE_FRAMES` (Linux 5.18): the
//! kernel builds `repeat` frames from `data_in` in a page pool and runs the
//! program on each, so every frame is redirected out of `ifindex` through
//! its `ndo_xdp_xmit`, in batches of `batch_size`, skipping the qdisc.
//!
//! The program must be loaded and run from a thread inside the sending
//! interface's network namespace: the kernel resolves `ingress_ifindex` and
//! the redirect target in the caller's namespace.

use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

use super::syscall;

/// `BPF_PROG_LOAD` (linux/bpf.h, enum bpf_cmd).
const BPF_PROG_LOAD: libc::c_long = 5;
/// `BPF_PROG_TEST_RUN` (enum bpf_cmd).
const BPF_PROG_TEST_RUN: libc::c_long = 10;
/// `BPF_PROG_TYPE_XDP` (enum bpf_prog_type).
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `BPF_F_TEST_XDP_LIVE_FRAMES` (linux/bpf.h, Linux 5.18).
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
/// Helper id of `bpf_redirect` (enum bpf_func_id, `FN(redirect, 23)`).
pub(crate) const BPF_FUNC_REDIRECT: i32 = 23;
/// Largest `batch_size` the kernel takes (`TEST_XDP_MAX_BATCH`).
pub(crate) const MAX_LIVE_BATCH: u32 = 256;

// Opcode parts (linux/bpf_common.h, linux/bpf.h).
const BPF_JMP: u8 = 0x05;
const BPF_ALU64: u8 = 0x07;
const BPF_K: u8 = 0x00;
const BPF_MOV: u8 = 0xb0;
const BPF_CALL: u8 = 0x80;
const BPF_EXIT: u8 = 0x90;

// More opcode parts, for the tracer programs (linux/bpf_common.h, linux/bpf.h).
const BPF_LD: u8 = 0x00;
const BPF_LDX: u8 = 0x01;
const BPF_ST: u8 = 0x02;
const BPF_STX: u8 = 0x03;
const BPF_ALU: u8 = 0x04;
const BPF_X: u8 = 0x08;
const BPF_ADD: u8 = 0x00;
const BPF_IMM: u8 = 0x00;
const BPF_MEM: u8 = 0x60;
/// `BPF_DW` as the size of `BPF_LD | BPF_IMM` (a 64-bit immediate).
const BPF_DW_SIZE: u8 = 0x18;
/// `BPF_PSEUDO_MAP_FD`: the immediate of a 64-bit load is a map's fd.
const BPF_PSEUDO_MAP_FD: u8 = 1;

/// The size of a load or store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum BpfSize {
    /// 4 bytes (`BPF_W`).
    W = 0x00,
    /// 2 bytes (`BPF_H`).
    H = 0x08,
    /// 1 byte (`BPF_B`).
    B = 0x10,
    /// 8 bytes (`BPF_DW`).
    Dw = 0x18,
}

/// A conditional jump's comparison (against an immediate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum BpfJump {
    /// unsigned `>` (`BPF_JGT`).
    Gt = 0x20,
    /// unsigned `<` (`BPF_JLT`).
    Lt = 0xa0,
}

/// One eBPF instruction, `struct bpf_insn`: opcode, destination register in
/// the low nibble and source register in the high nibble of the second
/// byte (little-endian bitfields), a 16-bit offset and a 32-bit immediate.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BpfInsn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

impl BpfInsn {
    /// Any instruction: opcode, destination and source registers, offset
    /// and immediate.
    pub(crate) fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        Self {
            code,
            regs: (dst & 0x0f) | ((src & 0x0f) << 4),
            off,
            imm,
        }
    }

    /// The same instruction with jump offset `off`.
    pub(crate) fn with_off(self, off: i16) -> Self {
        Self { off, ..self }
    }

    /// `dst = imm` (64-bit move of a sign-extended 32-bit immediate).
    pub(crate) fn mov64_imm(dst: u8, imm: i32) -> Self {
        Self::new(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm)
    }

    /// `call helper` (arguments in r1–r5, result in r0).
    pub(crate) fn call(helper: i32) -> Self {
        Self::new(BPF_JMP | BPF_CALL, 0, 0, 0, helper)
    }

    /// `exit` (returns r0).
    pub(crate) fn exit() -> Self {
        Self::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
    }

    /// `dst = src` (64-bit register move).
    pub(crate) fn mov64_reg(dst: u8, src: u8) -> Self {
        Self::new(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0)
    }

    /// `dst = (u32) src` (32-bit move: zero-extends into the upper half).
    pub(crate) fn mov32_reg(dst: u8, src: u8) -> Self {
        Self::new(BPF_ALU | BPF_MOV | BPF_X, dst, src, 0, 0)
    }

    /// `dst += imm` (64-bit).
    pub(crate) fn add64_imm(dst: u8, imm: i32) -> Self {
        Self::new(BPF_ALU64 | BPF_ADD | BPF_K, dst, 0, 0, imm)
    }

    /// `dst = *(size *)(src + off)`; `size` is [`BpfSize`].
    pub(crate) fn ldx(size: BpfSize, dst: u8, src: u8, off: i16) -> Self {
        Self {
            code: BPF_LDX | BPF_MEM | size as u8,
            regs: (dst & 0x0f) | (src << 4),
            off,
            imm: 0,
        }
    }

    /// `*(size *)(dst + off) = src`.
    pub(crate) fn stx(size: BpfSize, dst: u8, off: i16, src: u8) -> Self {
        Self {
            code: BPF_STX | BPF_MEM | size as u8,
            regs: (dst & 0x0f) | (src << 4),
            off,
            imm: 0,
        }
    }

    /// `*(size *)(dst + off) = imm`.
    pub(crate) fn st_imm(size: BpfSize, dst: u8, off: i16, imm: i32) -> Self {
        Self {
            code: BPF_ST | BPF_MEM | size as u8,
            regs: dst & 0x0f,
            off,
            imm,
        }
    }

    /// `if dst <op> imm goto pc + 1 + off` (unsigned compare for
    /// [`BpfJump::Lt`] and [`BpfJump::Gt`]).
    pub(crate) fn jmp_imm(op: BpfJump, dst: u8, imm: i32, off: i16) -> Self {
        Self {
            code: BPF_JMP | op as u8 | BPF_K,
            regs: dst & 0x0f,
            off,
            imm,
        }
    }

    /// `dst = map` (two instructions: `BPF_LD | BPF_IMM | BPF_DW` with
    /// `BPF_PSEUDO_MAP_FD`, which the kernel replaces by the map's address).
    pub(crate) fn ld_map_fd(dst: u8, fd: i32) -> [Self; 2] {
        [
            Self {
                code: BPF_LD | BPF_IMM | BPF_DW_SIZE,
                regs: (dst & 0x0f) | (BPF_PSEUDO_MAP_FD << 4),
                off: 0,
                imm: fd,
            },
            Self {
                code: 0,
                regs: 0,
                off: 0,
                imm: 0,
            },
        ]
    }

    /// The 8 bytes the kernel reads (little-endian host).
    #[cfg(test)]
    pub(crate) fn to_le_bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = self.code;
        b[1] = self.regs;
        b[2..4].copy_from_slice(&self.off.to_le_bytes());
        b[4..8].copy_from_slice(&self.imm.to_le_bytes());
        b
    }
}

/// The program: `r1 = ifindex; r2 = 0; call bpf_redirect; exit`, so every
/// frame returns `XDP_REDIRECT` towards `ifindex`.
pub(crate) fn redirect_program(ifindex: u32) -> [BpfInsn; 4] {
    [
        // An ifindex is a positive int in the kernel; the cast keeps the bits.
        BpfInsn::mov64_imm(1, ifindex as i32),
        BpfInsn::mov64_imm(2, 0),
        BpfInsn::call(BPF_FUNC_REDIRECT),
        BpfInsn::exit(),
    ]
}

/// The `BPF_MAP_CREATE` part of `union bpf_attr`, up to `map_name` (the
/// kernel zero-fills the rest).
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct MapCreateAttr {
    pub(crate) map_type: u32,
    pub(crate) key_size: u32,
    pub(crate) value_size: u32,
    pub(crate) max_entries: u32,
    pub(crate) map_flags: u32,
    pub(crate) inner_map_fd: u32,
    pub(crate) numa_node: u32,
    pub(crate) map_name: [u8; 16],
}

/// The `BPF_PROG_LOAD` part of `union bpf_attr`, up to `attach_btf_obj_fd`
/// (the kernel zero-fills the rest): XDP programs leave the BTF fields 0.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct ProgLoadAttr {
    pub(crate) prog_type: u32,
    pub(crate) insn_cnt: u32,
    pub(crate) insns: u64,
    pub(crate) license: u64,
    pub(crate) log_level: u32,
    pub(crate) log_size: u32,
    pub(crate) log_buf: u64,
    pub(crate) kern_version: u32,
    pub(crate) prog_flags: u32,
    pub(crate) prog_name: [u8; 16],
    pub(crate) prog_ifindex: u32,
    pub(crate) expected_attach_type: u32,
    pub(crate) prog_btf_fd: u32,
    pub(crate) func_info_rec_size: u32,
    pub(crate) func_info: u64,
    pub(crate) func_info_cnt: u32,
    pub(crate) line_info_rec_size: u32,
    pub(crate) line_info: u64,
    pub(crate) line_info_cnt: u32,
    pub(crate) attach_btf_id: u32,
    pub(crate) attach_btf_obj_fd: u32,
    pub(crate) _pad: u32,
}

/// The `BPF_PROG_TEST_RUN` part of `union bpf_attr` (`test`).
#[repr(C)]
#[derive(Debug, Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// `struct xdp_md`, the XDP context as a test run takes it.
#[repr(C)]
#[derive(Debug, Default)]
struct XdpMd {
    data: u32,
    data_end: u32,
    data_meta: u32,
    ingress_ifindex: u32,
    rx_queue_index: u32,
    egress_ifindex: u32,
}

/// A failed bpf(2) command.
#[derive(Debug, thiserror::Error)]
#[error("bpf({cmd}){}{}", hint(cmd, source), log.as_deref().map(|l| format!("; verifier log: {}", l.trim())).unwrap_or_default())]
pub struct BpfError {
    /// The command (`BPF_PROG_LOAD`, `BPF_PROG_TEST_RUN`).
    pub cmd: &'static str,
    /// The error (EPERM: needs CAP_BPF and CAP_NET_ADMIN; EINVAL on a
    /// kernel older than 5.18 for live frames).
    pub source: io::Error,
    /// The verifier's log, when the load was refused.
    pub log: Option<String>,
}

fn hint(cmd: &str, e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EPERM) => " (needs root: CAP_BPF and CAP_NET_ADMIN)",
        Some(libc::EINVAL) if cmd == "BPF_PROG_TEST_RUN" => {
            " (XDP live frames need Linux 5.18 or later)"
        }
        _ => "",
    }
}

pub(crate) fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialised `repr(C)` prefix of union
    // bpf_attr for `cmd`, and its exact size is passed; every pointer inside
    // it (set by the callers) points at a buffer that outlives this call.
    syscall!(syscall(
        libc::SYS_bpf,
        cmd,
        (attr as *mut T).cast::<libc::c_void>(),
        size_of::<T>() as libc::c_uint
    ))
}

/// Loads `insns` as an XDP program named `name` (at most 15 bytes kept)
/// with `expected_attach_type`. On EINVAL/EACCES it loads again with the
/// verifier log on, to say why.
pub(crate) fn load_xdp(
    insns: &[BpfInsn],
    name: &[u8],
    expected_attach_type: u32,
) -> Result<OwnedFd, BpfError> {
    load_program(
        insns,
        ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_XDP,
            prog_name: name16(name),
            expected_attach_type,
            ..ProgLoadAttr::default()
        },
    )
}

/// A program name as the kernel takes it: at most 15 bytes and a NUL.
pub(crate) fn name16(name: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    let n = name.len().min(15);
    out[..n].copy_from_slice(&name[..n]);
    out
}

/// Loads `insns` with the type, name and attach fields of `attr` (GPL
/// licensed). On EINVAL/EACCES it loads again with the verifier log on and
/// keeps the log's last lines, which say why.
pub(crate) fn load_program(insns: &[BpfInsn], attr: ProgLoadAttr) -> Result<OwnedFd, BpfError> {
    let license = b"GPL\0";
    let load = |log: Option<&mut Vec<u8>>| -> io::Result<libc::c_long> {
        let mut a = ProgLoadAttr {
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            ..attr
        };
        if let Some(buf) = log {
            a.log_level = 1;
            a.log_size = buf.len() as u32;
            a.log_buf = buf.as_mut_ptr() as u64;
        }
        bpf(BPF_PROG_LOAD, &mut a)
    };
    let fd = match load(None) {
        Ok(fd) => fd,
        Err(source) => {
            let log = if matches!(source.raw_os_error(), Some(libc::EINVAL | libc::EACCES)) {
                let mut buf = vec![0u8; 256 * 1024];
                let _ = load(Some(&mut buf));
                let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
                let text = String::from_utf8_lossy(&buf[..end]).into_owned();
                let tail: Vec<&str> = text.lines().rev().take(6).collect();
                Some(tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
                    .filter(|s| !s.trim().is_empty())
            } else {
                None
            };
            return Err(BpfError {
                cmd: "BPF_PROG_LOAD",
                source,
                log,
            });
        }
    };
    // SAFETY: a successful BPF_PROG_LOAD returns a new descriptor that
    // nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Runs XDP program `prog` `repeat` times on a copy of `frame`
/// (`BPF_PROG_TEST_RUN` without live frames: nothing leaves the host).
/// Returns the last run's return value and the kernel's mean time per run
/// in ns (CLOCK_MONOTONIC, taken by the kernel around its loop).
pub(crate) fn test_run(prog: &OwnedFd, frame: &[u8], repeat: u32) -> Result<(u32, u32), BpfError> {
    let mut attr = TestRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: frame.len() as u32,
        data_in: frame.as_ptr() as u64,
        repeat: repeat.max(1),
        ..TestRunAttr::default()
    };
    loop {
        match bpf(BPF_PROG_TEST_RUN, &mut attr) {
            Ok(_) => return Ok((attr.retval, attr.duration)),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(BpfError {
                    cmd: "BPF_PROG_TEST_RUN",
                    source,
                    log: None,
                })
            }
        }
    }
}

/// A loaded `bpf_redirect(ifindex)` XDP program, ready for live test runs.
#[derive(Debug)]
pub(crate) struct LiveFrames {
    prog: OwnedFd,
    ifindex: u32,
}

impl LiveFrames {
    /// Loads the redirect program for `ifindex` (in the calling thread's
    /// namespace). On EINVAL/EACCES it loads again with the verifier log on,
    /// to say why.
    pub(crate) fn load(ifindex: u32) -> Result<Self, BpfError> {
        let prog = load_xdp(&redirect_program(ifindex), b"lr_live_tx", 0)?;
        Ok(Self { prog, ifindex })
    }

    /// One live test run: `repeat` copies of `frame` are redirected out of
    /// the interface, `batch` at a time (≤ 256). Returns when the kernel has
    /// run the program on all of them (the redirect queues are flushed per
    /// batch). The kernel reports no per-frame outcome.
    pub(crate) fn run(&self, frame: &[u8], repeat: u32, batch: u32) -> Result<(), BpfError> {
        let err = |source| BpfError {
            cmd: "BPF_PROG_TEST_RUN",
            source,
            log: None,
        };
        let mut ctx = XdpMd {
            data_end: frame.len() as u32,
            ingress_ifindex: self.ifindex,
            ..XdpMd::default()
        };
        let mut attr = TestRunAttr {
            prog_fd: self.prog.as_raw_fd() as u32,
            data_size_in: frame.len() as u32,
            data_in: frame.as_ptr() as u64,
            repeat: repeat.max(1),
            ctx_size_in: size_of::<XdpMd>() as u32,
            ctx_in: (&mut ctx as *mut XdpMd) as u64,
            flags: BPF_F_TEST_XDP_LIVE_FRAMES,
            batch_size: batch.clamp(1, MAX_LIVE_BATCH),
            ..TestRunAttr::default()
        };
        loop {
            match bpf(BPF_PROG_TEST_RUN, &mut attr) {
                Ok(_) => return Ok(()),
                // A signal cut the run short; the kernel restarts nothing.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(err(e)),
            }
        }
    }
}

/// `BPF_OBJ_GET_INFO_BY_FD` (enum bpf_cmd).
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
/// `BPF_ENABLE_STATS` (enum bpf_cmd, Linux 5.8).
const BPF_ENABLE_STATS: libc::c_long = 32;
/// `BPF_STATS_RUN_TIME` (enum bpf_stats_type).
const BPF_STATS_RUN_TIME: u32 = 0;
/// Bytes of `struct bpf_prog_info` read (up to `recursion_misses`, Linux 5.12).
const PROG_INFO_BYTES: usize = 216;
/// Offsets in `struct bpf_prog_info` of `run_time_ns`, `run_cnt` and
/// `recursion_misses` (u64 each).
const PROG_INFO_RUN_TIME_NS: usize = 192;
const PROG_INFO_RUN_CNT: usize = 200;
const PROG_INFO_RECURSION_MISSES: usize = 208;

/// Turns the kernel's per-program run statistics on (`BPF_ENABLE_STATS`
/// with `BPF_STATS_RUN_TIME`) for as long as the returned descriptor is
/// open: while on, every program run is counted and timed (`sched_clock`
/// around the program; it adds those two clock reads to every run).
pub(crate) fn enable_run_stats() -> Result<OwnedFd, BpfError> {
    #[repr(C)]
    struct EnableStatsAttr {
        kind: u32,
    }
    let mut attr = EnableStatsAttr {
        kind: BPF_STATS_RUN_TIME,
    };
    let fd = bpf(BPF_ENABLE_STATS, &mut attr).map_err(|source| BpfError {
        cmd: "BPF_ENABLE_STATS",
        source,
        log: None,
    })?;
    // SAFETY: a successful BPF_ENABLE_STATS returns a new descriptor that
    // nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// A program's run statistics as the kernel keeps them (`bpf_prog_info`):
/// counted only while statistics are on (see [`enable_run_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RunStats {
    /// Runs counted.
    pub(crate) runs: u64,
    /// Time spent in those runs, ns (`sched_clock` around each run).
    pub(crate) run_time_ns: u64,
    /// Runs skipped because the program was already running on that CPU.
    pub(crate) recursion_misses: u64,
}

/// The run statistics of program `prog` (`BPF_OBJ_GET_INFO_BY_FD`).
pub(crate) fn run_stats(prog: &OwnedFd) -> Result<RunStats, BpfError> {
    #[repr(C, align(8))]
    struct Info([u8; PROG_INFO_BYTES]);
    #[repr(C)]
    struct InfoAttr {
        bpf_fd: u32,
        info_len: u32,
        info: u64,
    }
    let mut info = Info([0; PROG_INFO_BYTES]);
    let mut attr = InfoAttr {
        bpf_fd: prog.as_raw_fd() as u32,
        info_len: PROG_INFO_BYTES as u32,
        info: std::ptr::from_mut(&mut info) as u64,
    };
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr).map_err(|source| BpfError {
        cmd: "BPF_OBJ_GET_INFO_BY_FD",
        source,
        log: None,
    })?;
    let word = |at: usize| {
        // An older kernel fills less of the struct: what it left is zero.
        let mut b = [0u8; 8];
        b.copy_from_slice(&info.0[at..at + 8]);
        u64::from_ne_bytes(b)
    };
    Ok(RunStats {
        runs: word(PROG_INFO_RUN_CNT),
        run_time_ns: word(PROG_INFO_RUN_TIME_NS),
        recursion_misses: word(PROG_INFO_RECURSION_MISSES),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_encode_as_the_kernel_reads_them() {
        assert_eq!(size_of::<BpfInsn>(), 8);
        // r1 = 7: BPF_ALU64|BPF_MOV|BPF_K = 0xb7, dst 1, imm 7.
        assert_eq!(
            BpfInsn::mov64_imm(1, 7).to_le_bytes(),
            [0xb7, 0x01, 0, 0, 7, 0, 0, 0]
        );
        // call 23 (bpf_redirect): BPF_JMP|BPF_CALL = 0x85.
        assert_eq!(
            BpfInsn::call(BPF_FUNC_REDIRECT).to_le_bytes(),
            [0x85, 0, 0, 0, 23, 0, 0, 0]
        );
        // exit: BPF_JMP|BPF_EXIT = 0x95.
        assert_eq!(BpfInsn::exit().to_le_bytes(), [0x95, 0, 0, 0, 0, 0, 0, 0]);
        // The in-memory struct is the same 8 bytes (little-endian host).
        let i = BpfInsn::mov64_imm(2, 0x0102_0304);
        // SAFETY: BpfInsn is repr(C), 8 bytes of plain integers.
        let raw: [u8; 8] = unsafe { std::mem::transmute(i) };
        assert_eq!(raw, i.to_le_bytes());
        assert_eq!(raw, [0xb7, 0x02, 0, 0, 4, 3, 2, 1]);
    }

    #[test]
    fn program_redirects_to_the_ifindex() {
        let p = redirect_program(0x1234);
        let bytes: Vec<u8> = p.iter().flat_map(|i| i.to_le_bytes()).collect();
        assert_eq!(
            bytes,
            [
                0xb7, 0x01, 0, 0, 0x34, 0x12, 0, 0, // r1 = ifindex
                0xb7, 0x02, 0, 0, 0, 0, 0, 0, // r2 = 0 (flags)
                0x85, 0, 0, 0, 23, 0, 0, 0, // call bpf_redirect
                0x95, 0, 0, 0, 0, 0, 0, 0, // exit (r0 = XDP_REDIRECT)
            ]
        );
    }

    #[test]
    fn errors_name_the_command_and_the_likely_cause() {
        let e = BpfError {
            cmd: "BPF_PROG_LOAD",
            source: io::Error::from_raw_os_error(libc::EPERM),
            log: None,
        };
        let m = e.to_string();
        assert!(
            m.starts_with("bpf(BPF_PROG_LOAD)") && m.contains("CAP_BPF"),
            "{m}"
        );
        let e = BpfError {
            cmd: "BPF_PROG_LOAD",
            source: io::Error::from_raw_os_error(libc::EINVAL),
            log: Some("0: R1 !read_ok\n".into()),
        };
        assert!(
            e.to_string().ends_with("verifier log: 0: R1 !read_ok"),
            "{e}"
        );
        let e = BpfError {
            cmd: "BPF_PROG_TEST_RUN",
            source: io::Error::from_raw_os_error(libc::EINVAL),
            log: None,
        };
        assert!(e.to_string().contains("5.18"), "{e}");
        // The OS error is the source: once in the chain, not in the message.
        let line = linerate_core::error::chain(&e);
        assert!(!e.to_string().contains("os error"), "{e}");
        assert_eq!(line.matches("os error 22").count(), 1, "{line}");
    }

    #[test]
    fn attr_layouts_match_linux_bpf_h() {
        // Offsets of union bpf_attr's members, from linux/bpf.h.
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, func_info), 80);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, line_info), 96);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, attach_btf_id), 108);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, attach_btf_obj_fd), 112);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, log_buf), 32);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(size_of::<TestRunAttr>(), 80);
        assert_eq!(std::mem::offset_of!(TestRunAttr, repeat), 32);
        assert_eq!(std::mem::offset_of!(TestRunAttr, ctx_in), 48);
        assert_eq!(std::mem::offset_of!(TestRunAttr, flags), 64);
        assert_eq!(std::mem::offset_of!(TestRunAttr, batch_size), 72);
        assert_eq!(size_of::<XdpMd>(), 24);
    }
}
