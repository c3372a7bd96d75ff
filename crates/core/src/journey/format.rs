//! Tracepoint records as the kernel writes them: the `format` file of a
//! tracepoint in tracefs (`events/SYSTEM/NAME/format`) parsed into field
//! offsets, raw records decoded against it, and the records of a perf ring
//! buffer (`PERF_RECORD_SAMPLE` with `PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
//! PERF_SAMPLE_RAW`, `PERF_RECORD_LOST`) split from the ring's bytes.
//!
//! Everything here is pure: bytes in, typed values out.

use std::collections::BTreeMap;

/// Why a format file or a record could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The format file has no `ID:` line.
    #[error("tracepoint format without an ID line")]
    NoId,
    /// A `field:` line that does not parse.
    #[error("tracepoint format: cannot read field line `{0}`")]
    Field(String),
    /// The tracepoint lacks a field the decoder needs.
    #[error("tracepoint {event} has no field `{field}`")]
    MissingField {
        /// `system:name`.
        event: String,
        /// The field.
        field: String,
    },
}

/// How a field's bytes are to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// An integer or pointer of `size` bytes (little-endian here).
    Int,
    /// `__data_loc char[]`: a u32 whose low half is the string's offset in
    /// the record and whose high half its length (with the NUL).
    DataLocStr,
    /// `char name[N]`: a NUL-padded string in place.
    CharArray,
    /// Any other array (`__u8 src[4]`): bytes in place.
    Bytes,
}

/// One field of a tracepoint record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The field's name (`skbaddr`, `len`, `name`…).
    pub name: String,
    /// Byte offset in the raw record (common fields included).
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
    /// Signed integer.
    pub signed: bool,
    /// How to read it.
    pub kind: FieldKind,
}

/// A tracepoint's record layout, from its tracefs `format` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    /// The tracepoint's id (`config` of a `PERF_TYPE_TRACEPOINT` event, and
    /// `common_type` of its records).
    pub id: u16,
    /// Its name (the `name:` line).
    pub name: String,
    /// Every field, common ones included.
    pub fields: Vec<Field>,
    /// Symbolic values printed by `__print_symbolic(REC->FIELD, {v, "NAME"}…)`
    /// in the print format, per field: for `skb:kfree_skb` the names of
    /// `enum skb_drop_reason`, for `irq:softirq_entry` the softirq vectors.
    pub symbols: BTreeMap<String, BTreeMap<u64, String>>,
}

/// A field's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// An unsigned integer or pointer.
    U(u64),
    /// A signed integer.
    I(i64),
    /// A string.
    Str(String),
    /// Raw bytes.
    Bytes(Vec<u8>),
}

impl Format {
    /// Parses the text of a tracefs `format` file.
    pub fn parse(text: &str) -> Result<Self, FormatError> {
        let mut id = None;
        let mut name = String::new();
        let mut fields = Vec::new();
        let mut symbols = BTreeMap::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("ID:") {
                id = v.trim().parse().ok();
            } else if let Some(v) = line.strip_prefix("name:") {
                name = v.trim().to_string();
            } else if line.starts_with("field:") {
                fields.push(parse_field(line)?);
            } else if let Some(v) = line.strip_prefix("print fmt:") {
                symbols = parse_symbolic(v);
            }
        }
        Ok(Self {
            id: id.ok_or(FormatError::NoId)?,
            name,
            fields,
            symbols,
        })
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The field called `name`, or an error naming the tracepoint.
    pub fn require(&self, name: &str) -> Result<&Field, FormatError> {
        self.field(name).ok_or_else(|| FormatError::MissingField {
            event: self.name.clone(),
            field: name.to_string(),
        })
    }

    /// Reads field `name` from the raw record `raw` (None: no such field, or
    /// the record is too short for it).
    pub fn value(&self, raw: &[u8], name: &str) -> Option<Value> {
        read_field(self.field(name)?, raw)
    }

    /// Reads an integer field as u64 (a signed value is sign-extended).
    pub fn uint(&self, raw: &[u8], name: &str) -> Option<u64> {
        match self.value(raw, name)? {
            Value::U(v) => Some(v),
            Value::I(v) => Some(v as u64),
            _ => None,
        }
    }

    /// Reads an integer field as i64.
    pub fn int(&self, raw: &[u8], name: &str) -> Option<i64> {
        match self.value(raw, name)? {
            Value::U(v) => i64::try_from(v).ok(),
            Value::I(v) => Some(v),
            _ => None,
        }
    }

    /// Reads a string field (data_loc or char array).
    pub fn string(&self, raw: &[u8], name: &str) -> Option<String> {
        match self.value(raw, name)? {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The symbolic name of `value` in field `field` (e.g. a drop reason).
    pub fn symbol(&self, field: &str, value: u64) -> Option<&str> {
        self.symbols.get(field)?.get(&value).map(String::as_str)
    }
}

/// `field:unsigned int len;\toffset:16;\tsize:4;\tsigned:0;`
fn parse_field(line: &str) -> Result<Field, FormatError> {
    let bad = || FormatError::Field(line.to_string());
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, false);
    for part in line.split(';') {
        let part = part.trim();
        if let Some(v) = part.strip_prefix("field:") {
            decl = Some(v.trim());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = v.trim().parse().ok();
        } else if let Some(v) = part.strip_prefix("size:") {
            size = v.trim().parse().ok();
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let decl = decl.ok_or_else(bad)?;
    let (offset, size) = (offset.ok_or_else(bad)?, size.ok_or_else(bad)?);
    let last = decl.split_whitespace().last().ok_or_else(bad)?;
    let (name, array) = match last.find('[') {
        Some(i) => (&last[..i], true),
        None => (last, false),
    };
    let name = name.trim_start_matches('*').to_string();
    if name.is_empty() {
        return Err(bad());
    }
    let kind = if decl.starts_with("__data_loc") {
        FieldKind::DataLocStr
    } else if array && decl.starts_with("char") {
        FieldKind::CharArray
    } else if array {
        FieldKind::Bytes
    } else {
        FieldKind::Int
    };
    Ok(Field {
        name,
        offset,
        size,
        signed,
        kind,
    })
}

/// The `__print_symbolic(REC->FIELD, { 2, "NAME" }, …)` tables of a print
/// format.
fn parse_symbolic(fmt: &str) -> BTreeMap<String, BTreeMap<u64, String>> {
    let mut out = BTreeMap::new();
    let mut rest = fmt;
    while let Some(i) = rest.find("__print_symbolic(REC->") {
        rest = &rest[i + "__print_symbolic(REC->".len()..];
        let Some(comma) = rest.find(',') else { break };
        let field = rest[..comma].trim().to_string();
        rest = &rest[comma + 1..];
        let mut table = BTreeMap::new();
        // Pairs `{ value, "NAME" }` until the closing parenthesis.
        loop {
            let t = rest.trim_start();
            let Some(body) = t.strip_prefix('{') else {
                break;
            };
            let Some(close) = body.find('}') else { break };
            let pair = &body[..close];
            if let Some((v, n)) = pair.split_once(',') {
                let v = v.trim();
                let v = v
                    .strip_prefix("0x")
                    .map_or_else(|| v.parse().ok(), |h| u64::from_str_radix(h, 16).ok());
                if let Some(v) = v {
                    table.insert(v, n.trim().trim_matches('"').to_string());
                }
            }
            rest = body[close + 1..].trim_start();
            match rest.strip_prefix(',') {
                Some(r) => rest = r,
                None => break,
            }
        }
        out.insert(field, table);
    }
    out
}

fn read_field(f: &Field, raw: &[u8]) -> Option<Value> {
    let bytes = raw.get(f.offset..f.offset + f.size)?;
    Some(match f.kind {
        FieldKind::Int => {
            let mut b = [0u8; 8];
            b.get_mut(..f.size)?.copy_from_slice(bytes);
            let u = u64::from_le_bytes(b);
            if f.signed && f.size < 8 {
                let shift = 64 - 8 * f.size as u32;
                Value::I(((u << shift) as i64) >> shift)
            } else if f.signed {
                Value::I(u as i64)
            } else {
                Value::U(u)
            }
        }
        FieldKind::DataLocStr => {
            let loc = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
            let (off, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
            Value::Str(c_string(raw.get(off..off + len)?))
        }
        FieldKind::CharArray => Value::Str(c_string(bytes)),
        FieldKind::Bytes => Value::Bytes(bytes.to_vec()),
    })
}

fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// The tracepoint id of a raw record (`common_type`, its first two bytes).
pub fn record_type(raw: &[u8]) -> Option<u16> {
    Some(u16::from_le_bytes(raw.get(..2)?.try_into().ok()?))
}

/// `PERF_RECORD_LOST`.
const PERF_RECORD_LOST: u32 = 2;
/// `PERF_RECORD_SAMPLE`.
const PERF_RECORD_SAMPLE: u32 = 9;

/// One sample of a perf ring (sample_type TIME | CPU | RAW).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// The event's time, ns, on the clock the event was opened with
    /// (`use_clockid`: CLOCK_MONOTONIC here).
    pub time_ns: u64,
    /// The CPU it ran on.
    pub cpu: u32,
    /// The tracepoint record.
    pub raw: Vec<u8>,
}

/// What a span of ring bytes held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RingRecords {
    /// The samples, in ring order.
    pub samples: Vec<Sample>,
    /// Samples the kernel could not write because the ring was full
    /// (`PERF_RECORD_LOST`).
    pub lost: u64,
    /// Bytes at the end that did not form a whole record.
    pub trailing_bytes: usize,
}

/// Splits the bytes read from a perf ring (from tail to head, already
/// unwrapped) into records. Records are 8-byte aligned: `{u32 type, u16
/// misc, u16 size}` then the body. A sample's body is `u64 time, u32 cpu,
/// u32 res, u32 raw_size, raw[raw_size]` (padded).
pub fn parse_ring(bytes: &[u8]) -> RingRecords {
    let mut out = RingRecords::default();
    let mut at = 0;
    while at + 8 <= bytes.len() {
        let ty = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default());
        let size = usize::from(u16::from_le_bytes(
            bytes[at + 6..at + 8].try_into().unwrap_or_default(),
        ));
        if size < 8 || at + size > bytes.len() {
            break;
        }
        let body = &bytes[at + 8..at + size];
        match ty {
            PERF_RECORD_SAMPLE => {
                if let Some(s) = parse_sample(body) {
                    out.samples.push(s);
                }
            }
            PERF_RECORD_LOST => {
                if let Some(n) = body.get(8..16) {
                    out.lost += u64::from_le_bytes(n.try_into().unwrap_or_default());
                }
            }
            _ => {}
        }
        at += size;
    }
    out.trailing_bytes = bytes.len() - at;
    out
}

fn parse_sample(body: &[u8]) -> Option<Sample> {
    let time_ns = u64::from_le_bytes(body.get(0..8)?.try_into().ok()?);
    let cpu = u32::from_le_bytes(body.get(8..12)?.try_into().ok()?);
    let raw_size = u32::from_le_bytes(body.get(16..20)?.try_into().ok()?) as usize;
    let raw = body.get(20..20 + raw_size)?.to_vec();
    Some(Sample { time_ns, cpu, raw })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `net:netif_receive_skb` as Linux 6.18 prints it.
    pub(crate) const NETIF_RECEIVE_SKB: &str = "name: netif_receive_skb
ID: 2303
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:void * skbaddr;\toffset:8;\tsize:8;\tsigned:0;
\tfield:unsigned int len;\toffset:16;\tsize:4;\tsigned:0;
\tfield:__data_loc char[] name;\toffset:20;\tsize:4;\tsigned:0;

print fmt: \"dev=%s skbaddr=%p len=%u\", __get_str(name), REC->skbaddr, REC->len
";

    /// `skb:kfree_skb` (print fmt shortened to a few reasons).
    pub(crate) const KFREE_SKB: &str = "name: kfree_skb
ID: 2310
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:void * skbaddr;\toffset:8;\tsize:8;\tsigned:0;
\tfield:void * location;\toffset:16;\tsize:8;\tsigned:0;
\tfield:void * rx_sk;\toffset:24;\tsize:8;\tsigned:0;
\tfield:unsigned short protocol;\toffset:32;\tsize:2;\tsigned:0;
\tfield:enum skb_drop_reason reason;\toffset:36;\tsize:4;\tsigned:0;

print fmt: \"skbaddr=%p rx_sk=%p protocol=%u location=%pS reason: %s\", REC->skbaddr, REC->rx_sk, REC->protocol, REC->location, __print_symbolic(REC->reason, { 2, \"NOT_SPECIFIED\" }, { 3, \"NO_SOCKET\" }, { 6, \"SOCKET_RCVBUFF\" }, { 17, \"NETFILTER_DROP\" })
";

    /// A raw `netif_receive_skb` record captured on Linux 6.18 (dev
    /// `lr-b`, len 805, skbaddr 0xffff888003a1c300).
    pub(crate) fn netif_receive_skb_raw() -> Vec<u8> {
        let mut r = vec![0u8; 24];
        r[0..2].copy_from_slice(&2303u16.to_le_bytes());
        r[4..8].copy_from_slice(&1234i32.to_le_bytes());
        r[8..16].copy_from_slice(&0xffff_8880_03a1_c300u64.to_le_bytes());
        r[16..20].copy_from_slice(&805u32.to_le_bytes());
        // data_loc: 5 bytes ("lr-b\0") at offset 24 → high 16 bits 5, low 24.
        r[20..24].copy_from_slice(&((5u32 << 16) | 24).to_le_bytes());
        r.extend_from_slice(b"lr-b\0");
        r
    }

    #[test]
    fn a_format_file_parses_into_offsets() {
        let f = Format::parse(NETIF_RECEIVE_SKB).unwrap();
        assert_eq!(f.id, 2303);
        assert_eq!(f.name, "netif_receive_skb");
        let len = f.field("len").unwrap();
        assert_eq!((len.offset, len.size, len.signed), (16, 4, false));
        assert_eq!(f.field("name").unwrap().kind, FieldKind::DataLocStr);
        assert!(f.field("common_pid").unwrap().signed);
        assert_eq!(f.field("skbaddr").unwrap().kind, FieldKind::Int);
    }

    #[test]
    fn a_raw_record_decodes_against_its_format() {
        let f = Format::parse(NETIF_RECEIVE_SKB).unwrap();
        let raw = netif_receive_skb_raw();
        assert_eq!(record_type(&raw), Some(2303));
        assert_eq!(f.uint(&raw, "skbaddr"), Some(0xffff_8880_03a1_c300));
        assert_eq!(f.uint(&raw, "len"), Some(805));
        assert_eq!(f.string(&raw, "name").as_deref(), Some("lr-b"));
        assert_eq!(f.int(&raw, "common_pid"), Some(1234));
        assert_eq!(f.value(&raw[..18], "len"), None, "short record");
        assert!(f.require("nope").is_err());
    }

    #[test]
    fn signed_fields_sign_extend() {
        let f = parse_field("field:int rc;\toffset:0;\tsize:4;\tsigned:1;").unwrap();
        assert_eq!(read_field(&f, &(-5i32).to_le_bytes()), Some(Value::I(-5)));
    }

    #[test]
    fn arrays_and_char_arrays() {
        let f = parse_field("field:char name[16];\toffset:0;\tsize:16;\tsigned:0;").unwrap();
        assert_eq!(f.kind, FieldKind::CharArray);
        assert_eq!(f.name, "name");
        let mut b = [0u8; 16];
        b[..5].copy_from_slice(b"lr-br");
        assert_eq!(read_field(&f, &b), Some(Value::Str("lr-br".into())));
        let g = parse_field("field:__u8 dst[4];\toffset:0;\tsize:4;\tsigned:0;").unwrap();
        assert_eq!(g.kind, FieldKind::Bytes);
        assert!(parse_field("field:;offset:x;").is_err());
    }

    #[test]
    fn drop_reasons_come_from_the_print_format() {
        let f = Format::parse(KFREE_SKB).unwrap();
        assert_eq!(f.symbol("reason", 6), Some("SOCKET_RCVBUFF"));
        assert_eq!(f.symbol("reason", 17), Some("NETFILTER_DROP"));
        assert_eq!(f.symbol("reason", 99), None);
        assert_eq!(f.field("reason").unwrap().offset, 36);
    }

    #[test]
    fn a_format_without_id_is_an_error() {
        assert_eq!(Format::parse("name: x\n"), Err(FormatError::NoId));
    }

    /// A sample record as the kernel writes it into the ring.
    pub(crate) fn sample_record(time_ns: u64, cpu: u32, raw: &[u8]) -> Vec<u8> {
        let body_len = 8 + 8 + 4 + raw.len();
        let size = (8 + body_len).div_ceil(8) * 8;
        let mut r = Vec::with_capacity(size);
        r.extend_from_slice(&PERF_RECORD_SAMPLE.to_le_bytes());
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&(size as u16).to_le_bytes());
        r.extend_from_slice(&time_ns.to_le_bytes());
        r.extend_from_slice(&cpu.to_le_bytes());
        r.extend_from_slice(&0u32.to_le_bytes());
        r.extend_from_slice(&(raw.len() as u32).to_le_bytes());
        r.extend_from_slice(raw);
        r.resize(size, 0);
        r
    }

    #[test]
    fn ring_bytes_split_into_samples_and_lost_counts() {
        let raw = netif_receive_skb_raw();
        let mut ring = sample_record(1_000, 1, &raw);
        // PERF_RECORD_LOST: id, lost.
        ring.extend_from_slice(&PERF_RECORD_LOST.to_le_bytes());
        ring.extend_from_slice(&0u16.to_le_bytes());
        ring.extend_from_slice(&24u16.to_le_bytes());
        ring.extend_from_slice(&7u64.to_le_bytes());
        ring.extend_from_slice(&3u64.to_le_bytes());
        ring.extend(sample_record(2_000, 0, &raw));
        ring.extend_from_slice(&[9, 0, 0]);
        let r = parse_ring(&ring);
        assert_eq!(r.samples.len(), 2);
        assert_eq!(r.lost, 3);
        assert_eq!(r.trailing_bytes, 3);
        assert_eq!(r.samples[0].time_ns, 1_000);
        assert_eq!(r.samples[0].cpu, 1);
        assert_eq!(r.samples[1].raw, raw);
    }
}
