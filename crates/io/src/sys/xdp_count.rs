//! An XDP program that counts linerate test frames per stream in the
//! driver's receive path: assembled here as raw eBPF (no clang, no libbpf),
//! loaded with `BPF_PROG_LOAD`, attached with `BPF_LINK_CREATE` (detached
//! when the link's descriptor closes, so also when the process dies).
//!
//! The program parses Ethernet / IPv4 (no options) or IPv6 / UDP and the
//! test header's magic; for a test frame of stream `s` it adds one to entry
//! `s` of an array map (an atomic fetch-and-add) and drops the frame, except
//! one in `mask + 1` of them (by the count before the add: `old & mask ==
//! 0`, with `mask` in entry 65536), which it passes up the stack for
//! per-frame checks (sequence, payload, latency) by a sampling receiver.
//! Stream 0 (the generator's ceiling flood) is counted and never passed.
//! Every other frame (ARP, neighbour discovery, other traffic) passes.

use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

use super::bpf::{bpf, load_xdp, test_run, BpfError, BpfInsn, MapCreateAttr};

/// `BPF_MAP_CREATE` (enum bpf_cmd).
const BPF_MAP_CREATE: libc::c_long = 0;
/// `BPF_MAP_LOOKUP_ELEM`.
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
/// `BPF_MAP_UPDATE_ELEM`.
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
/// `BPF_LINK_CREATE`.
const BPF_LINK_CREATE: libc::c_long = 28;
/// `BPF_MAP_TYPE_ARRAY` (enum bpf_map_type).
const BPF_MAP_TYPE_ARRAY: u32 = 2;
/// `BPF_XDP` (enum bpf_attach_type).
const BPF_XDP: u32 = 37;
/// Entries: one counter per stream id, then the sample mask.
const ENTRIES: u32 = 65_537;
/// The entry holding the sample mask.
const MASK_KEY: u32 = 65_536;

/// `XDP_DROP`, `XDP_PASS` (enum xdp_action).
const XDP_DROP: i32 = 1;
const XDP_PASS: i32 = 2;

// Opcodes (linux/bpf_common.h, linux/bpf.h).
const LDX_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
const LDX_H: u8 = 0x69; // BPF_LDX | BPF_MEM | BPF_H
const LDX_B: u8 = 0x71; // BPF_LDX | BPF_MEM | BPF_B
const LDX_DW: u8 = 0x79; // BPF_LDX | BPF_MEM | BPF_DW
const STX_W: u8 = 0x63; // BPF_STX | BPF_MEM | BPF_W
const ST_W: u8 = 0x62; // BPF_ST | BPF_MEM | BPF_W
const ATOMIC_DW: u8 = 0xdb; // BPF_STX | BPF_ATOMIC | BPF_DW
const BPF_ADD_FETCH: i32 = 0x01; // BPF_ADD | BPF_FETCH
const ADD_K: u8 = 0x07; // BPF_ALU64 | BPF_ADD | BPF_K
const MOV_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
const MOV_X: u8 = 0xbf; // BPF_ALU64 | BPF_MOV | BPF_X
const AND_X: u8 = 0x5f; // BPF_ALU64 | BPF_AND | BPF_X
const TO_BE: u8 = 0xdc; // BPF_ALU | BPF_END | BPF_TO_BE
const LD_IMM64: u8 = 0x18; // BPF_LD | BPF_IMM | BPF_DW
const PSEUDO_MAP_FD: u8 = 1;
const JEQ_K: u8 = 0x15;
const JNE_K: u8 = 0x55;
const JGT_X: u8 = 0x2d;
const JA: u8 = 0x05;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;
/// Helper id of `bpf_map_lookup_elem`.
const MAP_LOOKUP: i32 = 1;

/// Jump targets of the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    V4,
    Common,
    Drop,
    Pass,
}

/// Instructions with jumps to labels, resolved at the end.
#[derive(Default)]
struct Asm {
    insns: Vec<BpfInsn>,
    jumps: Vec<(usize, Label)>,
    labels: Vec<(Label, usize)>,
}

impl Asm {
    fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.insns.push(BpfInsn::new(code, dst, src, off, imm));
    }
    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.op(code, dst, src, 0, imm);
    }
    fn label(&mut self, l: Label) {
        self.labels.push((l, self.insns.len()));
    }
    /// `dst = map` (a map descriptor the loader turns into the map's address).
    fn map(&mut self, dst: u8, fd: i32) {
        self.op(LD_IMM64, dst, PSEUDO_MAP_FD, 0, fd);
        self.op(0, 0, 0, 0, 0);
    }
    /// `r0 = bpf_map_lookup_elem(map, &u32 at r10 - 4)`.
    fn lookup(&mut self, fd: i32) {
        self.map(1, fd);
        self.op(MOV_X, 2, 10, 0, 0);
        self.op(ADD_K, 2, 0, 0, -4);
        self.op(CALL, 0, 0, 0, MAP_LOOKUP);
    }
    fn finish(mut self) -> Vec<BpfInsn> {
        for (at, to) in std::mem::take(&mut self.jumps) {
            let target = self
                .labels
                .iter()
                .find(|(l, _)| *l == to)
                .map(|&(_, i)| i)
                .expect("every label used is placed");
            let off = i16::try_from(target as i64 - at as i64 - 1).expect("short program");
            let i = self.insns[at];
            self.insns[at] = i.with_off(off);
        }
        self.insns
    }
}

/// The counting program for the array map `map_fd`.
pub(crate) fn count_program(map_fd: i32) -> Vec<BpfInsn> {
    use Label::*;
    let magic = i32::from_le_bytes(*b"LRT1");
    let mut a = Asm::default();
    // r2 = data, r3 = data_end (struct xdp_md, offsets 0 and 4).
    a.op(LDX_W, 2, 1, 0, 0);
    a.op(LDX_W, 3, 1, 4, 0);
    // The shortest test frame (IPv4, 60 bytes) must be there.
    a.op(MOV_X, 4, 2, 0, 0);
    a.op(ADD_K, 4, 0, 0, 60);
    a.jump(JGT_X, 4, 3, 0, Pass);
    // EtherType, as a little-endian load of the big-endian field.
    a.op(LDX_H, 5, 2, 12, 0);
    a.jump(JEQ_K, 5, 0, 0x0008, V4);
    a.jump(JNE_K, 5, 0, 0xdd86_u16 as i32, Pass);
    // IPv6: 80 bytes, next header UDP, test header at 62.
    a.op(MOV_X, 4, 2, 0, 0);
    a.op(ADD_K, 4, 0, 0, 80);
    a.jump(JGT_X, 4, 3, 0, Pass);
    a.op(LDX_B, 5, 2, 20, 0);
    a.jump(JNE_K, 5, 0, 17, Pass);
    a.op(ADD_K, 2, 0, 0, 62);
    a.jump(JA, 0, 0, 0, Common);
    // IPv4: version 4, IHL 5, protocol UDP, test header at 42.
    a.label(V4);
    a.op(LDX_B, 5, 2, 14, 0);
    a.jump(JNE_K, 5, 0, 0x45, Pass);
    a.op(LDX_B, 5, 2, 23, 0);
    a.jump(JNE_K, 5, 0, 17, Pass);
    a.op(ADD_K, 2, 0, 0, 42);
    a.label(Common);
    a.op(LDX_W, 5, 2, 0, 0);
    a.jump(JNE_K, 5, 0, magic, Pass);
    // r7 = stream id (big-endian on the wire).
    a.op(LDX_H, 7, 2, 4, 0);
    a.op(TO_BE, 7, 0, 0, 16);
    a.op(STX_W, 10, 7, -4, 0);
    a.lookup(map_fd);
    a.jump(JEQ_K, 0, 0, 0, Pass);
    // r6 = count before this frame; count += 1.
    a.op(MOV_K, 6, 0, 0, 1);
    a.op(ATOMIC_DW, 0, 6, 0, BPF_ADD_FETCH);
    a.jump(JEQ_K, 7, 0, 0, Drop);
    // Sample: pass when (old & mask) == 0.
    a.op(ST_W, 10, 0, -4, MASK_KEY as i32);
    a.lookup(map_fd);
    a.jump(JEQ_K, 0, 0, 0, Drop);
    a.op(LDX_DW, 1, 0, 0, 0);
    a.op(AND_X, 6, 1, 0, 0);
    a.jump(JEQ_K, 6, 0, 0, Pass);
    a.label(Drop);
    a.op(MOV_K, 0, 0, 0, XDP_DROP);
    a.op(EXIT, 0, 0, 0, 0);
    a.label(Pass);
    a.op(MOV_K, 0, 0, 0, XDP_PASS);
    a.op(EXIT, 0, 0, 0, 0);
    a.finish()
}

/// `BPF_MAP_*_ELEM`'s part of `union bpf_attr`.
#[repr(C)]
#[derive(Debug, Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `BPF_LINK_CREATE`'s part of `union bpf_attr` (the fields XDP uses).
#[repr(C)]
#[derive(Debug, Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// Attaches XDP program `prog` to `ifindex` (in the calling thread's
/// namespace) with `BPF_LINK_CREATE`: native mode where the driver has
/// it, else generic; detached when the returned link closes. Fails with
/// EBUSY/EEXIST when the interface already has an XDP program.
pub(crate) fn link_xdp(prog: &OwnedFd, ifindex: u32) -> Result<OwnedFd, BpfError> {
    let mut link = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags: 0,
    };
    let link = bpf(BPF_LINK_CREATE, &mut link).map_err(|source| BpfError {
        cmd: "BPF_LINK_CREATE",
        source,
        log: None,
    })?;
    // SAFETY: a successful BPF_LINK_CREATE returns a new descriptor that
    // nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(link as libc::c_int) })
}

/// Loads `return verdict` as an XDP program (`XDP_PASS` = 2, `XDP_ABORTED`
/// = 0…).
pub(crate) fn verdict_program(verdict: i32) -> Result<OwnedFd, BpfError> {
    load_xdp(
        &[BpfInsn::mov64_imm(0, verdict), BpfInsn::exit()],
        b"lr_verdict",
        BPF_XDP,
    )
}

/// The counting program with its map, attached to an interface or not.
#[derive(Debug)]
pub(crate) struct XdpCounter {
    // Drop order: the link first (detaches the program), then the program,
    // then the map.
    link: Option<OwnedFd>,
    prog: OwnedFd,
    map: OwnedFd,
}

impl XdpCounter {
    /// Creates the map, loads the program and attaches it to `ifindex` (in
    /// the calling thread's namespace; native mode where the driver has it,
    /// else generic). Fails with EBUSY/EEXIST when the interface already has
    /// an XDP program.
    pub(crate) fn attach(ifindex: u32) -> Result<Self, BpfError> {
        let mut c = Self::load()?;
        c.link = Some(link_xdp(&c.prog, ifindex)?);
        Ok(c)
    }

    /// Runs the program `repeat` times on `frame` (not attached: nothing is
    /// received or sent). Returns its verdict (`XDP_DROP` = 1, `XDP_PASS`
    /// = 2) and the kernel's mean time per run, ns.
    pub(crate) fn test_run(&self, frame: &[u8], repeat: u32) -> Result<(u32, u32), BpfError> {
        test_run(&self.prog, frame, repeat)
    }

    /// Creates the map and loads the program, attached nowhere.
    pub(crate) fn load() -> Result<Self, BpfError> {
        let mut name = [0u8; 16];
        name[..8].copy_from_slice(b"lr_count");
        let mut create = MapCreateAttr {
            map_type: BPF_MAP_TYPE_ARRAY,
            key_size: 4,
            value_size: 8,
            max_entries: ENTRIES,
            map_name: name,
            ..MapCreateAttr::default()
        };
        let map = bpf(BPF_MAP_CREATE, &mut create).map_err(|source| BpfError {
            cmd: "BPF_MAP_CREATE",
            source,
            log: None,
        })?;
        // SAFETY: a successful BPF_MAP_CREATE returns a new descriptor that
        // nothing else owns.
        let map = unsafe { OwnedFd::from_raw_fd(map as libc::c_int) };
        let insns = count_program(map.as_raw_fd());
        let prog = load_xdp(&insns, b"lr_rx_count", BPF_XDP)?;
        Ok(Self {
            link: None,
            prog,
            map,
        })
    }

    fn elem(&self, cmd: libc::c_long, key: u32, value: &mut u64) -> io::Result<()> {
        let mut attr = MapElemAttr {
            map_fd: self.map.as_raw_fd() as u32,
            key: (&key as *const u32) as u64,
            value: (value as *mut u64) as u64,
            ..MapElemAttr::default()
        };
        bpf(cmd, &mut attr).map(|_| ())
    }

    /// Frames of `stream` counted so far.
    pub(crate) fn count(&self, stream: u16) -> io::Result<u64> {
        let mut v = 0u64;
        self.elem(BPF_MAP_LOOKUP_ELEM, u32::from(stream), &mut v)?;
        Ok(v)
    }

    /// Sets the count of `stream` to zero.
    pub(crate) fn reset(&self, stream: u16) -> io::Result<()> {
        self.elem(BPF_MAP_UPDATE_ELEM, u32::from(stream), &mut 0)
    }

    /// Passes one frame in `mask + 1` up the stack (`mask` = 2^k - 1; 0:
    /// every frame; `u64::MAX`: only a stream's first).
    pub(crate) fn set_sample_mask(&self, mask: u64) -> io::Result<()> {
        self.elem(BPF_MAP_UPDATE_ELEM, MASK_KEY, &mut { mask })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layouts_match_linux_bpf_h() {
        assert_eq!(size_of::<MapCreateAttr>(), 44);
        assert_eq!(std::mem::offset_of!(MapCreateAttr, map_name), 28);
        assert_eq!(size_of::<MapElemAttr>(), 32);
        assert_eq!(std::mem::offset_of!(MapElemAttr, value), 16);
        assert_eq!(size_of::<LinkCreateAttr>(), 16);
    }

    #[test]
    fn program_jumps_land_inside_and_it_ends_in_exits() {
        let p = count_program(7);
        let bytes: Vec<[u8; 8]> = p.iter().map(|i| i.to_le_bytes()).collect();
        // The map load is a two-slot instruction with the fd and the pseudo
        // source register.
        let ld = bytes.iter().position(|b| b[0] == LD_IMM64).unwrap();
        assert_eq!(bytes[ld][1], 0x01 | (PSEUDO_MAP_FD << 4));
        assert_eq!(i32::from_le_bytes(bytes[ld][4..8].try_into().unwrap()), 7);
        assert_eq!(bytes[ld + 1], [0; 8]);
        for (i, b) in bytes.iter().enumerate() {
            let class = b[0] & 0x07;
            if class == 0x05 && b[0] != CALL && b[0] != EXIT {
                let off = i16::from_le_bytes([b[2], b[3]]);
                let to = i as i64 + 1 + i64::from(off);
                assert!(to > i as i64 && (to as usize) < p.len(), "jump {i} -> {to}");
            }
        }
        assert_eq!(bytes.last().unwrap()[0], EXIT);
        // The magic compares as the little-endian load of "LRT1".
        assert!(bytes.iter().any(|b| b[0] == JNE_K && b[4..8] == *b"LRT1"));
    }
}
