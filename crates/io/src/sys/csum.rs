//! The RFC 1071 Internet checksum vectorised with SSE2 or AVX2, chosen at run
//! time from the CPU's features (x86_64 only). The scalar reference is
//! `linerate_core::wire::testframe::internet_checksum`.
//!
//! The one's-complement sum does not depend on byte order (RFC 1071 section
//! 2(B)): the vector code adds little-endian 16-bit words into 32-bit lanes,
//! folds, and swaps the two bytes of the result at the end.

/// A vectorised checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CsumMethod {
    /// 128-bit SSE2.
    #[cfg(target_arch = "x86_64")]
    Sse2,
    /// 256-bit AVX2.
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl CsumMethod {
    /// The methods this CPU has (none off x86_64).
    pub(crate) fn available() -> Vec<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            let mut v = vec![Self::Sse2];
            if std::arch::is_x86_feature_detected!("avx2") {
                v.push(Self::Avx2);
            }
            v
        }
        #[cfg(not(target_arch = "x86_64"))]
        Vec::new()
    }

    /// `sse2`, `avx2`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            #[cfg(target_arch = "x86_64")]
            Self::Sse2 => "sse2",
            #[cfg(target_arch = "x86_64")]
            Self::Avx2 => "avx2",
        }
    }

    /// The Internet checksum of `data`.
    pub(crate) fn checksum(self, data: &[u8]) -> u16 {
        let le_sum = match self {
            #[cfg(target_arch = "x86_64")]
            Self::Sse2 => {
                // SAFETY: SSE2 is part of the x86_64 baseline.
                unsafe { sum_sse2(data) }
            }
            #[cfg(target_arch = "x86_64")]
            Self::Avx2 => {
                // SAFETY: `available` offers Avx2 only when the CPU has it.
                unsafe { sum_avx2(data) }
            }
        };
        !fold(le_sum).swap_bytes()
    }
}

/// The sum folded to 16 bits with end-around carries.
fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Little-endian 16-bit words of `tail` (a last odd byte is the low byte of
/// a zero-padded word).
#[cfg(target_arch = "x86_64")]
fn sum_le(tail: &[u8]) -> u64 {
    let mut words = tail.chunks_exact(2);
    let mut acc: u64 = (&mut words)
        .map(|w| u64::from(u16::from_le_bytes([w[0], w[1]])))
        .sum();
    if let [last] = words.remainder() {
        acc += u64::from(*last);
    }
    acc
}

/// Vectors added into 32-bit lanes before the lanes go into a u64: each
/// vector adds at most 2 × 0xffff to a lane, so 16,384 of them stay below
/// 2³².
#[cfg(target_arch = "x86_64")]
const VECTORS_PER_FOLD: usize = 16_384;

/// # Safety
/// The CPU must have SSE2 (every x86_64 CPU has).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
unsafe fn sum_sse2(data: &[u8]) -> u64 {
    use std::arch::x86_64::{
        __m128i, _mm_add_epi32, _mm_loadu_si128, _mm_setzero_si128, _mm_storeu_si128,
        _mm_unpackhi_epi16, _mm_unpacklo_epi16,
    };
    let mut chunks = data.chunks_exact(16);
    let mut total = 0u64;
    loop {
        let mut acc = _mm_setzero_si128();
        let mut n = 0;
        for c in (&mut chunks).take(VECTORS_PER_FOLD) {
            // SAFETY: `c` is 16 readable bytes; an unaligned load.
            let v = unsafe { _mm_loadu_si128(c.as_ptr().cast::<__m128i>()) };
            let zero = _mm_setzero_si128();
            acc = _mm_add_epi32(acc, _mm_unpacklo_epi16(v, zero));
            acc = _mm_add_epi32(acc, _mm_unpackhi_epi16(v, zero));
            n += 1;
        }
        let mut lanes = [0u32; 4];
        // SAFETY: `lanes` is 16 writable bytes; an unaligned store.
        unsafe { _mm_storeu_si128(lanes.as_mut_ptr().cast::<__m128i>(), acc) };
        total += lanes.iter().map(|&l| u64::from(l)).sum::<u64>();
        if n < VECTORS_PER_FOLD {
            break;
        }
    }
    total + sum_le(chunks.remainder())
}

/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sum_avx2(data: &[u8]) -> u64 {
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi32, _mm256_loadu_si256, _mm256_setzero_si256, _mm256_storeu_si256,
        _mm256_unpackhi_epi16, _mm256_unpacklo_epi16,
    };
    let mut chunks = data.chunks_exact(32);
    let mut total = 0u64;
    loop {
        let mut acc = _mm256_setzero_si256();
        let mut n = 0;
        for c in (&mut chunks).take(VECTORS_PER_FOLD) {
            // SAFETY: `c` is 32 readable bytes; an unaligned load.
            let v = unsafe { _mm256_loadu_si256(c.as_ptr().cast::<__m256i>()) };
            let zero = _mm256_setzero_si256();
            acc = _mm256_add_epi32(acc, _mm256_unpacklo_epi16(v, zero));
            acc = _mm256_add_epi32(acc, _mm256_unpackhi_epi16(v, zero));
            n += 1;
        }
        let mut lanes = [0u32; 8];
        // SAFETY: `lanes` is 32 writable bytes; an unaligned store.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast::<__m256i>(), acc) };
        total += lanes.iter().map(|&l| u64::from(l)).sum::<u64>();
        if n < VECTORS_PER_FOLD {
            break;
        }
    }
    total + sum_le(chunks.remainder())
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_core::wire::testframe::internet_checksum;

    /// xorshift64*: reproducible random bytes without a dependency.
    fn random_bytes(n: usize, mut seed: u64) -> Vec<u8> {
        (0..n)
            .map(|_| {
                seed ^= seed >> 12;
                seed ^= seed << 25;
                seed ^= seed >> 27;
                (seed.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
            })
            .collect()
    }

    #[test]
    fn vectorised_equals_scalar_for_every_length_and_alignment() {
        let methods = CsumMethod::available();
        let data = random_bytes(9_000 + 64, 0x9e37_79b9_7f4a_7c15);
        for len in 0..=9_000 {
            // Odd and even start offsets, so odd addresses are covered.
            for offset in [0, 1, 3] {
                let slice = &data[offset..offset + len];
                let want = internet_checksum(slice);
                for m in &methods {
                    assert_eq!(
                        m.checksum(slice),
                        want,
                        "{} len {len} offset {offset}",
                        m.name()
                    );
                }
            }
        }
        // All ones: the sums that fold to 0xffff; and a buffer long enough
        // to fold the lanes more than once.
        let ones = vec![0xffu8; 1_500_001];
        let big = random_bytes(3_000_001, 7);
        for m in &methods {
            assert_eq!(m.checksum(&ones), internet_checksum(&ones), "{}", m.name());
            assert_eq!(m.checksum(&big), internet_checksum(&big), "{}", m.name());
        }
        #[cfg(target_arch = "x86_64")]
        assert!(!methods.is_empty());
    }
}
