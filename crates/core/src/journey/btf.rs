//! Just enough of the kernel's BTF (`/sys/kernel/btf/vmlinux`) for the
//! `tp_btf` tracer: the type id of a tracepoint's `btf_trace_<name>`
//! typedef (what a BTF raw tracepoint program attaches to) and the byte
//! offsets of struct members (`sk_buff.len`, `sk_buff.dev`,
//! `net_device.name`…), looked through anonymous structs and unions, so the
//! programs read the running kernel's layout instead of a compiled-in one.
//!
//! Format: `include/uapi/linux/btf.h` (a header, a type section of
//! variable-length records numbered from 1, a string section).

use std::collections::HashMap;

/// The BTF magic number.
const MAGIC: u16 = 0xeb9f;

// Kinds (BTF_KIND_*).
const INT: u8 = 1;
const ARRAY: u8 = 3;
const STRUCT: u8 = 4;
const UNION: u8 = 5;
const ENUM: u8 = 6;
const TYPEDEF: u8 = 8;
const VOLATILE: u8 = 9;
const CONST: u8 = 10;
const RESTRICT: u8 = 11;
const FUNC_PROTO: u8 = 13;
const VAR: u8 = 14;
const DATASEC: u8 = 15;
const DECL_TAG: u8 = 17;
const TYPE_TAG: u8 = 18;
const ENUM64: u8 = 19;
/// The highest kind this parser knows how to skip.
const MAX_KIND: u8 = 19;

/// Why BTF could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BtfError {
    /// Not BTF, or cut short.
    #[error("not kernel BTF: {0}")]
    Malformed(&'static str),
    /// A type of a kind this parser does not know (its size is unknown, so
    /// the types after it cannot be found).
    #[error("BTF type {id} has unknown kind {kind}")]
    UnknownKind {
        /// The type id.
        id: u32,
        /// Its kind.
        kind: u8,
    },
}

/// One type record: kind, name, `size_or_type` and its members (struct and
/// union: name, type, bit offset).
#[derive(Debug, Clone)]
struct Type {
    kind: u8,
    name: u32,
    size_or_type: u32,
    members: Vec<(u32, u32, u32)>,
}

/// Parsed BTF.
#[derive(Debug, Clone)]
pub struct Btf {
    types: Vec<Type>,
    strings: Vec<u8>,
    by_name: HashMap<(u8, String), u32>,
}

/// A member's place: byte offset from the start of the outer struct and
/// byte size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// Byte offset.
    pub offset: u32,
    /// Byte size (0 when unknown).
    pub size: u32,
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, BtfError> {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or(BtfError::Malformed("cut short"))
}

impl Btf {
    /// Parses a little-endian BTF blob.
    pub fn parse(b: &[u8]) -> Result<Self, BtfError> {
        let magic = b
            .get(0..2)
            .map(|s| u16::from_le_bytes([s[0], s[1]]))
            .ok_or(BtfError::Malformed("cut short"))?;
        if magic != MAGIC {
            return Err(BtfError::Malformed("bad magic (or big-endian)"));
        }
        let hdr_len = u32_at(b, 4)? as usize;
        let (type_off, type_len) = (u32_at(b, 8)? as usize, u32_at(b, 12)? as usize);
        let (str_off, str_len) = (u32_at(b, 16)? as usize, u32_at(b, 20)? as usize);
        let section = |off: usize, len: usize| {
            b.get(hdr_len + off..hdr_len + off + len)
                .ok_or(BtfError::Malformed("section out of range"))
        };
        let tsec = section(type_off, type_len)?;
        let strings = section(str_off, str_len)?.to_vec();
        // Type 0 is `void`.
        let mut types = vec![Type {
            kind: 0,
            name: 0,
            size_or_type: 0,
            members: Vec::new(),
        }];
        let mut at = 0;
        while at + 12 <= tsec.len() {
            let name = u32_at(tsec, at)?;
            let info = u32_at(tsec, at + 4)?;
            let size_or_type = u32_at(tsec, at + 8)?;
            at += 12;
            let vlen = (info & 0xffff) as usize;
            let kind = ((info >> 24) & 0x1f) as u8;
            let bitfield = info >> 31 == 1;
            let id = types.len() as u32;
            let extra = match kind {
                INT | VAR | DECL_TAG => 4,
                ARRAY => 12,
                STRUCT | UNION | DATASEC | ENUM64 => vlen * 12,
                ENUM | FUNC_PROTO => vlen * 8,
                k if k <= MAX_KIND => 0,
                k => return Err(BtfError::UnknownKind { id, kind: k }),
            };
            let mut members = Vec::new();
            if matches!(kind, STRUCT | UNION) {
                for m in 0..vlen {
                    let o = at + m * 12;
                    let off = u32_at(tsec, o + 8)?;
                    // With kind_flag, the low 24 bits are the bit offset.
                    let off = if bitfield { off & 0x00ff_ffff } else { off };
                    members.push((u32_at(tsec, o)?, u32_at(tsec, o + 4)?, off));
                }
            }
            if at + extra > tsec.len() {
                return Err(BtfError::Malformed("type section cut short"));
            }
            at += extra;
            types.push(Type {
                kind,
                name,
                size_or_type,
                members,
            });
        }
        let mut btf = Self {
            types,
            strings,
            by_name: HashMap::new(),
        };
        for id in 1..btf.types.len() as u32 {
            let t = &btf.types[id as usize];
            if t.name != 0 && matches!(t.kind, STRUCT | UNION | TYPEDEF) {
                let key = (t.kind, btf.name(t.name).to_string());
                btf.by_name.entry(key).or_insert(id);
            }
        }
        Ok(btf)
    }

    fn name(&self, off: u32) -> &str {
        let s = self.strings.get(off as usize..).unwrap_or_default();
        let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
        std::str::from_utf8(&s[..end]).unwrap_or_default()
    }

    /// Types in the blob (with `void`).
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// True when it holds only `void`.
    pub fn is_empty(&self) -> bool {
        self.types.len() <= 1
    }

    /// The id of typedef `btf_trace_<tracepoint>`: what a `tp_btf`
    /// program of that tracepoint attaches to (`attach_btf_id`).
    pub fn trace_typedef(&self, tracepoint: &str) -> Option<u32> {
        self.by_name
            .get(&(TYPEDEF, format!("btf_trace_{tracepoint}")))
            .copied()
    }

    /// The id of struct `name`.
    pub fn struct_id(&self, name: &str) -> Option<u32> {
        self.by_name.get(&(STRUCT, name.to_string())).copied()
    }

    /// Follows typedefs and qualifiers to the type they name.
    fn resolve(&self, mut id: u32) -> u32 {
        for _ in 0..32 {
            match self.types.get(id as usize) {
                Some(t) if matches!(t.kind, TYPEDEF | VOLATILE | CONST | RESTRICT | TYPE_TAG) => {
                    id = t.size_or_type;
                }
                _ => break,
            }
        }
        id
    }

    /// Byte size of a type (0 for kinds without one).
    fn size(&self, id: u32) -> u32 {
        let id = self.resolve(id);
        match self.types.get(id as usize) {
            Some(t) if matches!(t.kind, INT | STRUCT | UNION | ENUM | ENUM64) => t.size_or_type,
            Some(t) if t.kind == 2 => 8,
            _ => 0,
        }
    }

    /// Member `name` of struct or union `id`, searched also inside its
    /// anonymous members: (bit offset from `id`'s start, member type).
    fn member(&self, id: u32, name: &str) -> Option<(u32, u32)> {
        let t = self.types.get(self.resolve(id) as usize)?;
        for &(mname, mtype, off) in &t.members {
            if mname == 0 {
                if let Some((inner, ty)) = self.member(mtype, name) {
                    return Some((off + inner, ty));
                }
            } else if self.name(mname) == name {
                return Some((off, mtype));
            }
        }
        None
    }

    /// The member at `path` (`["ns", "inum"]`) of struct `strukt`: byte offset
    /// and size. None when a step is missing or is a bitfield.
    pub fn member_path(&self, strukt: &str, path: &[&str]) -> Option<Member> {
        let mut id = self.struct_id(strukt)?;
        let mut bits = 0;
        for step in path {
            let (off, ty) = self.member(id, step)?;
            bits += off;
            id = ty;
        }
        if bits % 8 != 0 {
            return None;
        }
        Some(Member {
            offset: bits / 8,
            size: self.size(id),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A tiny BTF blob: int (1), struct inner { int inum; } (2),
    /// struct sk_buff { int pad; union { int len; struct inner ns; }; } with
    /// the union anonymous (3, 4), typedef btf_trace_x (5) -> ptr (6).
    pub(crate) fn blob() -> Vec<u8> {
        let mut strs = b"\0int\0inner\0inum\0sk_buff\0pad\0len\0ns\0btf_trace_x\0".to_vec();
        strs.push(0);
        let off = |s: &str| {
            let needle = format!("\0{s}\0");
            strs.windows(needle.len())
                .position(|w| w == needle.as_bytes())
                .unwrap() as u32
                + 1
        };
        let mut t = Vec::new();
        let mut ty = |name: u32, kind: u32, vlen: u32, sot: u32, extra: &[u32]| {
            for v in [name, (kind << 24) | vlen, sot] {
                t.extend_from_slice(&v.to_le_bytes());
            }
            for v in extra {
                t.extend_from_slice(&v.to_le_bytes());
            }
        };
        ty(off("int"), 1, 0, 4, &[32]); // 1: int
        ty(off("inner"), 4, 1, 4, &[off("inum"), 1, 0]); // 2
        ty(off("sk_buff"), 4, 2, 12, &[off("pad"), 1, 0, 0, 4, 32]); // 3
        ty(0, 5, 2, 4, &[off("len"), 1, 0, off("ns"), 2, 0]); // 4: anon union
        ty(off("btf_trace_x"), 8, 0, 6, &[]); // 5
        ty(0, 2, 0, 3, &[]); // 6: ptr to sk_buff
        let mut b = Vec::new();
        b.extend_from_slice(&MAGIC.to_le_bytes());
        b.extend_from_slice(&[1, 0]);
        for v in [24u32, 0, t.len() as u32, t.len() as u32, strs.len() as u32] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&t);
        b.extend_from_slice(&strs);
        b
    }

    #[test]
    fn members_are_found_through_anonymous_unions() {
        let btf = Btf::parse(&blob()).unwrap();
        assert_eq!(btf.len(), 7);
        assert_eq!(
            btf.member_path("sk_buff", &["len"]),
            Some(Member { offset: 4, size: 4 })
        );
        assert_eq!(
            btf.member_path("sk_buff", &["ns", "inum"]),
            Some(Member { offset: 4, size: 4 })
        );
        assert_eq!(
            btf.member_path("sk_buff", &["pad"]),
            Some(Member { offset: 0, size: 4 })
        );
        assert_eq!(btf.member_path("sk_buff", &["nope"]), None);
        assert_eq!(btf.member_path("nope", &["len"]), None);
        assert_eq!(btf.trace_typedef("x"), Some(5));
        assert_eq!(btf.trace_typedef("y"), None);
    }

    #[test]
    fn bad_blobs_are_refused() {
        assert!(Btf::parse(&[]).is_err());
        assert!(Btf::parse(&[0x9f, 0xeb, 1, 0]).is_err());
        let mut b = blob();
        b[0] = 0;
        assert_eq!(
            Btf::parse(&b).unwrap_err(),
            BtfError::Malformed("bad magic (or big-endian)")
        );
        // A kind above the known ones stops the parse with its id.
        let mut b = blob();
        b[24 + 7] = 31;
        assert_eq!(
            Btf::parse(&b).unwrap_err(),
            BtfError::UnknownKind { id: 1, kind: 31 }
        );
        // Cut short inside the type section.
        let b = blob();
        assert!(Btf::parse(&b[..40]).is_err());
    }
}
