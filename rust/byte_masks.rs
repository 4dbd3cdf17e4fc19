//! Bit masks over 64-byte blocks of text (bit `k` for byte `k`), the ground of the scanners that
//! take text a run at a time (a `trailing_zeros` a run) instead of a byte at a time (a branch a
//! byte, mispredicted about once a run): the encoder's ASCII splitter
//! (`encoder::fast_bpe::ascii_blocks`) and near-dedup's words (`prepare::near`). On x86-64 the
//! classes are compared 16 bytes at once with SSE2, which every x86-64 CPU has.

/// Bytes a block covers.
pub const BLOCK: usize = 64;

/// The lowest `len` bits set (all of them from 64 on).
#[inline(always)]
pub fn low_bits(len: usize) -> u64 {
    if len >= 64 {
        u64::MAX
    } else {
        (1u64 << len) - 1
    }
}

/// SSE2 compares of a block's 16-byte parts, each giving a mask of bytes (0xff where true).
#[cfg(target_arch = "x86_64")]
pub mod sse2 {
    pub use std::arch::x86_64::__m128i;
    use std::arch::x86_64::*;

    use super::BLOCK;

    /// Part `part` (0 to 3) of `block`: bytes `16 * part ..`.
    #[inline(always)]
    pub fn load(block: &[u8; BLOCK], part: usize) -> __m128i {
        let bytes = &block[16 * part..16 * part + 16];
        // SAFETY: SSE2 is part of x86-64; `bytes` is 16 bytes, read unaligned.
        unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
    }

    /// Each byte of `v` equal to `b`.
    #[inline(always)]
    pub fn equal(v: __m128i, b: u8) -> __m128i {
        // SAFETY: SSE2 is part of x86-64.
        unsafe { _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8)) }
    }

    /// Each byte of `v` within `lo ..= lo + span - 1` (unsigned). SSE2 compares signed bytes:
    /// the range is shifted to start at -128, then a byte must be less than -128 + span.
    #[inline(always)]
    pub fn in_range(v: __m128i, lo: u8, span: u8) -> __m128i {
        // SAFETY: SSE2 is part of x86-64.
        unsafe {
            let shifted = _mm_add_epi8(v, _mm_set1_epi8(0x80u8.wrapping_sub(lo) as i8));
            _mm_cmplt_epi8(shifted, _mm_set1_epi8(0x80u8.wrapping_add(span) as i8))
        }
    }

    /// ASCII letters of either case (`b | 0x20` folds capitals onto small letters).
    #[inline(always)]
    pub fn letters(v: __m128i) -> __m128i {
        // SAFETY: SSE2 is part of x86-64.
        in_range(unsafe { _mm_or_si128(v, _mm_set1_epi8(0x20)) }, b'a', 26)
    }

    #[inline(always)]
    pub fn or(a: __m128i, b: __m128i) -> __m128i {
        // SAFETY: SSE2 is part of x86-64.
        unsafe { _mm_or_si128(a, b) }
    }

    /// `b` where `a` is not.
    #[inline(always)]
    pub fn and_not(a: __m128i, b: __m128i) -> __m128i {
        // SAFETY: SSE2 is part of x86-64.
        unsafe { _mm_andnot_si128(a, b) }
    }

    /// `v` with its ASCII capitals made small letters (`| 0x20` where a byte is `A` to `Z`).
    #[inline(always)]
    pub fn ascii_lowercase(v: __m128i) -> __m128i {
        // SAFETY: SSE2 is part of x86-64.
        unsafe { _mm_or_si128(v, _mm_and_si128(in_range(v, b'A', 26), _mm_set1_epi8(0x20))) }
    }

    /// `v` into part `part` (0 to 3) of `block`.
    #[inline(always)]
    pub fn store(block: &mut [u8; BLOCK], part: usize, v: __m128i) {
        let bytes = &mut block[16 * part..16 * part + 16];
        // SAFETY: SSE2 is part of x86-64; `bytes` is 16 bytes, written unaligned.
        unsafe { _mm_storeu_si128(bytes.as_mut_ptr().cast(), v) }
    }

    /// The top bit of each byte of `m` (a compare's mask; of a block's own bytes, those of
    /// 0x80 or more), as the 16 bits of part `part` of a block's mask.
    #[inline(always)]
    pub fn bits(m: __m128i, part: usize) -> u64 {
        // SAFETY: SSE2 is part of x86-64.
        u64::from(unsafe { _mm_movemask_epi8(m) } as u16) << (16 * part)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_bits_counts_up_to_a_whole_word() {
        assert_eq!(low_bits(0), 0);
        assert_eq!(low_bits(3), 0b111);
        assert_eq!(low_bits(64), u64::MAX);
        assert_eq!(low_bits(100), u64::MAX);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn each_compare_agrees_with_the_byte_test_on_every_byte() {
        let mask = |block: &[u8; BLOCK], test: &dyn Fn(sse2::__m128i) -> sse2::__m128i| {
            (0..4).fold(0, |m, part| {
                m | sse2::bits(test(sse2::load(block, part)), part)
            })
        };
        let by_byte = |block: &[u8; BLOCK], test: &dyn Fn(u8) -> bool| {
            (0..BLOCK).fold(0u64, |m, k| m | u64::from(test(block[k])) << k)
        };
        for first in (0..=255u8).step_by(BLOCK) {
            let block: [u8; BLOCK] = std::array::from_fn(|k| first.wrapping_add(k as u8));
            assert_eq!(
                mask(&block, &sse2::letters),
                by_byte(&block, &|b| b.is_ascii_alphabetic())
            );
            assert_eq!(
                mask(&block, &|v| sse2::in_range(v, b'0', 10)),
                by_byte(&block, &|b| b.is_ascii_digit())
            );
            assert_eq!(
                mask(&block, &|v| sse2::equal(v, b'\n')),
                by_byte(&block, &|b| b == b'\n')
            );
            let mut lowered = [0u8; BLOCK];
            for part in 0..4 {
                sse2::store(
                    &mut lowered,
                    part,
                    sse2::ascii_lowercase(sse2::load(&block, part)),
                );
            }
            assert_eq!(lowered, block.map(|b| b.to_ascii_lowercase()));
            assert_eq!(mask(&block, &|v| v), by_byte(&block, &|b| b >= 0x80));
            assert_eq!(
                mask(&block, &|v| sse2::and_not(
                    sse2::equal(v, b' '),
                    sse2::in_range(v, b' ', 3)
                )),
                by_byte(&block, &|b| b == b'!' || b == b'"')
            );
        }
    }
}
