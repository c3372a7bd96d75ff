//! Memory copy methods for `linerate ceilings`: the standard copy, `rep
//! movsb` and SSE2 non-temporal stores (x86_64 only; elsewhere only the
//! standard copy exists).

/// A way to copy bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CopyMethod {
    /// `<[u8]>::copy_from_slice` (the compiler's `memcpy`).
    Standard,
    /// x86 `rep movsb` (fast with the ERMS/FSRM features).
    #[cfg(target_arch = "x86_64")]
    RepMovsb,
    /// SSE2 `movntdq` streaming stores (bypass the cache), then `sfence`.
    #[cfg(target_arch = "x86_64")]
    NonTemporal,
}

impl CopyMethod {
    /// The methods this build has (every x86_64 CPU has SSE2).
    pub(crate) fn all() -> Vec<Self> {
        #[cfg(target_arch = "x86_64")]
        return vec![Self::Standard, Self::RepMovsb, Self::NonTemporal];
        #[cfg(not(target_arch = "x86_64"))]
        return vec![Self::Standard];
    }

    /// The name a result gives it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Standard => "copy_from_slice",
            #[cfg(target_arch = "x86_64")]
            Self::RepMovsb => "rep movsb",
            #[cfg(target_arch = "x86_64")]
            Self::NonTemporal => "non-temporal (movntdq)",
        }
    }

    /// Copies `src` into `dst` (same length: panics otherwise).
    pub(crate) fn copy(self, dst: &mut [u8], src: &[u8]) {
        assert_eq!(dst.len(), src.len(), "copy between unequal lengths");
        match self {
            Self::Standard => dst.copy_from_slice(src),
            #[cfg(target_arch = "x86_64")]
            Self::RepMovsb => rep_movsb(dst, src),
            #[cfg(target_arch = "x86_64")]
            Self::NonTemporal => non_temporal(dst, src),
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn rep_movsb(dst: &mut [u8], src: &[u8]) {
    // SAFETY: `dst` is writable and `src` readable for `src.len()` bytes
    // (equal lengths, checked by the caller), and they cannot overlap (one
    // is borrowed mutably). `rep movsb` copies exactly rcx bytes from rsi to
    // rdi, forward because the ABI guarantees the direction flag is clear on
    // entry; it touches no stack and leaves the flags as they were.
    unsafe {
        std::arch::asm!(
            "rep movsb",
            inout("rcx") src.len() => _,
            inout("rdi") dst.as_mut_ptr() => _,
            inout("rsi") src.as_ptr() => _,
            options(nostack, preserves_flags)
        );
    }
}

#[cfg(target_arch = "x86_64")]
fn non_temporal(dst: &mut [u8], src: &[u8]) {
    // SAFETY: SSE2 is part of the x86_64 baseline.
    unsafe { non_temporal_sse2(dst, src) }
}

/// # Safety
/// The CPU must have SSE2 (every x86_64 CPU has).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
unsafe fn non_temporal_sse2(dst: &mut [u8], src: &[u8]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    let len = dst.len();
    // Streaming stores need a 16-byte aligned destination: the bytes before
    // the first boundary and after the last whole 64-byte step go the
    // standard way.
    let head = dst.as_ptr().align_offset(16).min(len);
    dst[..head].copy_from_slice(&src[..head]);
    let body_end = head + (len - head) / 64 * 64;
    let mut i = head;
    while i < body_end {
        // SAFETY: `i + 64 <= body_end <= len`, so the four 16-byte loads
        // read inside `src` and the four stores write inside `dst`; the
        // loads are unaligned loads, the stores' address is 16-byte aligned
        // (`head` aligns `dst`, and `i - head` is a multiple of 64).
        unsafe {
            let s = src.as_ptr().add(i).cast::<__m128i>();
            let d = dst.as_mut_ptr().add(i).cast::<__m128i>();
            let (a, b) = (_mm_loadu_si128(s), _mm_loadu_si128(s.add(1)));
            let (c, e) = (_mm_loadu_si128(s.add(2)), _mm_loadu_si128(s.add(3)));
            _mm_stream_si128(d, a);
            _mm_stream_si128(d.add(1), b);
            _mm_stream_si128(d.add(2), c);
            _mm_stream_si128(d.add(3), e);
        }
        i += 64;
    }
    // Streaming stores are weakly ordered: fence them before anything reads
    // `dst`.
    _mm_sfence();
    dst[body_end..].copy_from_slice(&src[body_end..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_copies_the_same_bytes() {
        let src: Vec<u8> = (0..70_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for method in CopyMethod::all() {
            for len in (0..300).chain([1518, 4096, 65_537]) {
                // Odd source and destination offsets: unaligned heads and tails.
                for (so, d_off) in [(0, 0), (1, 3), (5, 0), (0, 9)] {
                    let mut dst = vec![0xa5u8; len + 32];
                    method.copy(&mut dst[d_off..d_off + len], &src[so..so + len]);
                    assert_eq!(
                        &dst[d_off..d_off + len],
                        &src[so..so + len],
                        "{}",
                        method.name()
                    );
                    assert!(
                        dst[..d_off].iter().all(|&b| b == 0xa5),
                        "{} wrote before",
                        method.name()
                    );
                    assert!(
                        dst[d_off + len..].iter().all(|&b| b == 0xa5),
                        "{} wrote after",
                        method.name()
                    );
                }
            }
        }
    }
}
