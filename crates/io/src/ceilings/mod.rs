//! The timed loops of `linerate ceilings`: copies, checksums and packets
//! through the socket send and receive paths on loopback. What to time and
//! what the times mean is `linerate_core::ceilings`; every repeat is timed
//! with CLOCK_MONOTONIC.

mod packets;
mod raw;

use std::fs;
use std::hint::black_box;

use linerate_core::ceilings::{
    Cache, CeilingsResult, Check, Config, Machine, Part, Sample, Skipped,
};
use linerate_core::progress::Progress;
use linerate_core::wire::testframe::internet_checksum;

use crate::energy::Meter;
use crate::sys::clock::monotonic_ns;
use crate::sys::copy::CopyMethod;
use crate::sys::csum::CsumMethod;

pub use packets::PacketError;
pub use raw::{RawPair, RawTarget};

/// Runs every part `cfg` asks, reporting each benchmark through `progress`.
/// The raw-frame paths run on `raw` (a veth pair), or are skipped for the
/// reason given.
pub fn run(
    cfg: &Config,
    raw: Result<&RawPair, &str>,
    progress: &mut dyn Progress,
) -> Result<CeilingsResult, PacketError> {
    let machine = machine();
    let mut checks = Vec::new();
    let mut samples = Vec::new();
    let mut skipped = Vec::new();
    let note = |s: &Sample, progress: &mut dyn Progress| {
        let c = linerate_core::ceilings::Ceiling::from_sample(s);
        progress.step(&format!(
            "{} {} {}{} B: {:.1} ns/op",
            s.part,
            s.method,
            s.cache
                .map_or("", |c| if c == Cache::Hot { "hot " } else { "cold " }),
            s.bytes_per_op,
            c.ns_per_op.median
        ));
    };
    if cfg.runs(Part::Copy) {
        checks.push(check_copies(cfg));
        for s in copies(cfg, machine.llc_bytes) {
            note(&s, progress);
            samples.push(s);
        }
        #[cfg(not(target_arch = "x86_64"))]
        skipped.push(Skipped {
            part: Part::Copy,
            method: "rep movsb, non-temporal".into(),
            reason: format!("x86_64 only; this CPU is {}", std::env::consts::ARCH),
        });
    }
    if cfg.runs(Part::Checksum) {
        checks.push(check_checksums(cfg));
        for s in checksums(cfg) {
            note(&s, progress);
            samples.push(s);
        }
        if CsumMethod::available().is_empty() {
            skipped.push(Skipped {
                part: Part::Checksum,
                method: "vectorised".into(),
                reason: format!(
                    "built for x86_64 (SSE2, AVX2) only; this CPU is {}",
                    std::env::consts::ARCH
                ),
            });
        }
    }
    for part in [Part::Send, Part::Receive] {
        if cfg.runs(part) {
            let (mut got, mut skips) = packets::run(cfg, part)?;
            let (raw_got, raw_skips) = match (raw, part) {
                (Ok(pair), Part::Send) => raw::send(cfg, &pair.tx),
                (Ok(pair), _) => raw::receive(cfg, pair),
                (Err(reason), _) => raw::skip_all(part, reason),
            };
            got.extend(raw_got);
            skips.extend(raw_skips);
            for s in got {
                note(&s, progress);
                samples.push(s);
            }
            skipped.extend(skips);
        }
    }
    Ok(CeilingsResult::new(cfg, machine, checks, &samples, skipped))
}

/// The CPU architecture, the features the methods can use, and the
/// last-level cache.
pub fn machine() -> Machine {
    Machine {
        arch: std::env::consts::ARCH.to_string(),
        cpu_features: cpu_features(),
        llc_bytes: llc_bytes(),
    }
}

#[cfg(target_arch = "x86_64")]
fn cpu_features() -> Vec<String> {
    let mut f = Vec::new();
    macro_rules! probe {
        ($($name:tt),*) => {$(
            if std::arch::is_x86_feature_detected!($name) {
                f.push($name.to_string());
            }
        )*};
    }
    probe!("sse2", "ssse3", "avx", "avx2", "avx512f", "avx512bw", "ermsb");
    // Fast short `rep movsb` (Ice Lake, Zen 3 on): not probed by std.
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo.lines().find(|l| l.starts_with("flags"));
    if flags.is_some_and(|l| l.split_whitespace().any(|w| w == "fsrm")) {
        f.push("fsrm".to_string());
    }
    f
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_features() -> Vec<String> {
    Vec::new()
}

/// The largest cache of CPU 0 (sysfs `cache/index*/size`, e.g. `32768K`).
fn llc_bytes() -> Option<u64> {
    let dir = fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.filter_map(Result::ok)
        .filter_map(|e| fs::read_to_string(e.path().join("size")).ok())
        .filter_map(|s| parse_cache_size(s.trim()))
        .max()
}

fn parse_cache_size(s: &str) -> Option<u64> {
    let (num, mult) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

/// Runs `op` over `ops` operations `warmups` times untimed, then `repeats`
/// times timed (CLOCK_MONOTONIC around each repeat), metering energy over
/// the timed ones.
pub(crate) fn time_repeats(
    cfg: &Config,
    ops: u64,
    mut op: impl FnMut(u64),
) -> (Vec<u64>, Option<linerate_core::energy::Energy>) {
    for _ in 0..cfg.warmups {
        (0..ops).for_each(&mut op);
    }
    let meter = Meter::start();
    let repeat_ns = (0..cfg.repeats)
        .map(|_| {
            let t0 = monotonic_ns();
            (0..ops).for_each(&mut op);
            monotonic_ns().saturating_sub(t0)
        })
        .collect();
    (repeat_ns, meter.is_available().then(|| meter.read()))
}

/// Bytes that are not all alike (a copy or checksum of zeros could be
/// special-cased by nothing, but random data is what frames carry).
fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

/// Every copy method copies exactly the source, at every block size up to
/// 1 MiB, at odd offsets too.
fn check_copies(cfg: &Config) -> Check {
    let methods = CopyMethod::all();
    let largest = cfg
        .copy_blocks
        .iter()
        .copied()
        .filter(|&b| b <= 1 << 20)
        .max()
        .unwrap_or(0) as usize;
    let src = pattern(largest + 1, 11);
    let passed = cfg
        .copy_blocks
        .iter()
        .map(|&b| b as usize)
        .filter(|&b| b <= largest)
        .all(|b| {
            [(0, 0), (1, 3)].into_iter().all(|(off, pad)| {
                methods.iter().all(|m| {
                    let mut dst = vec![0u8; b + pad];
                    m.copy(&mut dst[pad..], &src[off..off + b]);
                    dst[pad..] == src[off..off + b]
                })
            })
        });
    let names: Vec<&str> = methods.iter().map(|m| m.name()).collect();
    Check {
        part: Part::Copy,
        what: format!("{} copy the same bytes", names.join(", ")),
        passed,
    }
}

/// Copies by method, block size and cache state.
fn copies(cfg: &Config, llc: Option<u64>) -> Vec<Sample> {
    let mut out = Vec::new();
    let arena = cfg.cold_arena_bytes(llc) as usize;
    // Touched once here (written), so no page fault is timed.
    let cold_src = vec![0xa5u8; arena];
    let mut cold_dst = vec![1u8; arena];
    let mut cursor = 0usize;
    for method in CopyMethod::all() {
        for &block in &cfg.copy_blocks {
            let b = block as usize;
            let ops = cfg.ops_per_repeat(block);
            let src = pattern(b, block);
            let mut dst = vec![0u8; b];
            let (repeat_ns, energy) = time_repeats(cfg, ops, |_| {
                method.copy(black_box(&mut dst), black_box(&src));
            });
            out.push(sample(
                Part::Copy,
                method.name(),
                Some(Cache::Hot),
                block,
                ops,
                repeat_ns,
                energy,
            ));
            // Cold: each copy on the next block of the arenas, so nothing
            // copied is touched again before `arena` bytes were.
            let (repeat_ns, energy) = time_repeats(cfg, ops, |_| {
                if cursor + b > arena {
                    cursor = 0;
                }
                method.copy(
                    black_box(&mut cold_dst[cursor..cursor + b]),
                    black_box(&cold_src[cursor..cursor + b]),
                );
                cursor += b;
            });
            out.push(sample(
                Part::Copy,
                method.name(),
                Some(Cache::Cold),
                block,
                ops,
                repeat_ns,
                energy,
            ));
        }
    }
    out
}

fn sample(
    part: Part,
    method: &str,
    cache: Option<Cache>,
    bytes: u64,
    ops: u64,
    repeat_ns: Vec<u64>,
    energy: Option<linerate_core::energy::Energy>,
) -> Sample {
    Sample {
        part,
        method: method.to_string(),
        cache,
        bytes_per_op: bytes,
        frame_bytes: None,
        ops_per_repeat: ops,
        repeat_ns,
        energy,
    }
}

/// The vectorised checksums against the scalar one on random frames of
/// every size the part times, at an even and an odd address.
fn check_checksums(cfg: &Config) -> Check {
    let methods = CsumMethod::available();
    let largest = cfg.checksum_frames.iter().copied().max().unwrap_or(0) as usize;
    let data = pattern(largest + 1, 5);
    let passed = cfg.checksum_frames.iter().all(|&f| {
        [0, 1].into_iter().all(|off| {
            let frame = &data[off..off + f as usize];
            let want = internet_checksum(frame);
            methods.iter().all(|m| m.checksum(frame) == want)
        })
    });
    let names: Vec<&str> = methods.iter().map(|m| m.name()).collect();
    Check {
        part: Part::Checksum,
        what: if names.is_empty() {
            "scalar only: nothing to compare".to_string()
        } else {
            format!("{} against scalar", names.join(", "))
        },
        passed,
    }
}

/// The scalar and every vectorised checksum at every frame size.
fn checksums(cfg: &Config) -> Vec<Sample> {
    let mut out = Vec::new();
    let vector = CsumMethod::available();
    for &frame in &cfg.checksum_frames {
        let data = pattern(frame as usize, u64::from(frame));
        let ops = cfg.ops_per_repeat(u64::from(frame));
        let (repeat_ns, energy) = time_repeats(cfg, ops, |_| {
            black_box(internet_checksum(black_box(&data)));
        });
        out.push(sample(
            Part::Checksum,
            "scalar",
            None,
            u64::from(frame),
            ops,
            repeat_ns,
            energy,
        ));
        for m in &vector {
            let (repeat_ns, energy) = time_repeats(cfg, ops, |_| {
                black_box(m.checksum(black_box(&data)));
            });
            out.push(sample(
                Part::Checksum,
                m.name(),
                None,
                u64::from(frame),
                ops,
                repeat_ns,
                energy,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes() {
        assert_eq!(parse_cache_size("32768K"), Some(32 << 20));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("x"), None);
    }
}
