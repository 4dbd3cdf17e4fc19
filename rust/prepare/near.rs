//! `--dedup near`: each document's MinHash signature over word n-gram shingles, cut into LSH
//! bands. Two documents whose shingle sets have Jaccard similarity `s` share at least one
//! band with probability `1 - (1 - s^rows)^bands`; `prepare` drops a document when one of its
//! bands was seen in an earlier document (the de-duplication's sorted runs do that in bounded
//! memory, as for exact duplicates), so the first document of a group of near-duplicates stays.
//!
//! - Words: maximal runs of alphanumeric characters, lowercased; a CJK ideograph, kana or
//!   Hangul syllable is a word by itself (those scripts do not separate words by spaces).
//! - Shingles: every `ngram` consecutive words (a document with fewer words is one shingle of
//!   all of them; one without any word is its whole text), each hashed to 64 bits (xxh3) and
//!   folded to 32.
//! - Signature: `bands * rows` values, value `i` the least of `(a_i * x + b_i) >> 32` over
//!   the shingle keys `x` (multiply-shift hashing; 64-bit `a_i` odd and `b_i` drawn once from
//!   a ChaCha8 generator seeded by `seed`, so signatures never change between runs).
//! - Bands: `rows` consecutive values hashed to 64 bits (xxh3), kept as (hash, band number).
//!
//! Defaults: 5-word shingles, 14 bands of 8 rows (112 permutations): a pair of Jaccard
//! similarity `s` shares a band with chance `1 - (1 - s^8)^14`: half the time at 0.68, 65% at
//! the threshold `(1/14)^(1/8)` = 0.72, 92% at 0.8, 5.3% at 0.5, 0.1% at 0.3.

use rand::{RngCore, SeedableRng};
use xxhash_rust::xxh3::xxh3_64;

use crate::byte_masks::{low_bits, BLOCK};

/// The parameters of `--dedup near` (recorded in the output's metadata).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NearOptions {
    pub ngram: usize,
    pub bands: usize,
    pub rows: usize,
    pub seed: u64,
}

impl Default for NearOptions {
    fn default() -> Self {
        Self {
            ngram: 5,
            bands: 14,
            rows: 8,
            seed: 0,
        }
    }
}

/// Signatures and band hashes for one set of parameters.
pub struct MinHasher {
    options: NearOptions,
    multipliers: Vec<u64>,
    offsets: Vec<u64>,
    /// The same permutations eight to a block, in 32-bit halves (the AVX2 path); the last
    /// block padded with copies of its first.
    blocks: Vec<Block>,
}

/// Permutations per block: one AVX2 register of 32-bit lanes.
const LANES: usize = 8;

/// Eight permutations `(a * x + b) >> 32`, each 64-bit `a` and `b` cut into 32-bit halves: for
/// a 32-bit key `x`, bits 32..64 of `a * x + b` are `a_hi * x + b_hi + ((a_lo * x + b_lo) >> 32)`
/// (mod 2^32), one 32-bit product and one 32x32->64-bit product, where a 64-bit product
/// (which AVX2 lacks) took three.
#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct Block {
    a_low: [u32; LANES],
    a_high: [u32; LANES],
    b_low: [u32; LANES],
    b_high: [u32; LANES],
}

/// Each of `values` lowered to its lane of `least` where that is smaller.
#[cfg(target_arch = "x86_64")]
fn lower(values: &mut [u32], least: [u32; LANES]) {
    for (value, least) in values.iter_mut().zip(least) {
        *value = (*value).min(least);
    }
}

/// The `bands * rows` multipliers (odd) and offsets drawn from `seed`.
fn permutations(options: &NearOptions) -> (Vec<u64>, Vec<u64>) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(options.seed);
    let count = options.bands * options.rows;
    let multipliers = (0..count).map(|_| rng.next_u64() | 1).collect();
    let offsets = (0..count).map(|_| rng.next_u64()).collect();
    (multipliers, offsets)
}

impl MinHasher {
    pub fn new(options: NearOptions) -> Self {
        let (multipliers, offsets) = permutations(&options);
        let blocks = multipliers
            .chunks(LANES)
            .zip(offsets.chunks(LANES))
            .map(|(a, b)| {
                let mut block = Block::default();
                for lane in 0..LANES {
                    // Padding lanes repeat the block's first permutation; they are not read.
                    let (a, b) = (a.get(lane).unwrap_or(&a[0]), b.get(lane).unwrap_or(&b[0]));
                    block.a_low[lane] = *a as u32;
                    block.a_high[lane] = (a >> 32) as u32;
                    block.b_low[lane] = *b as u32;
                    block.b_high[lane] = (b >> 32) as u32;
                }
                block
            })
            .collect();
        Self {
            options,
            multipliers,
            offsets,
            blocks,
        }
    }

    /// Bands a document has (records `band_hashes` gives).
    pub fn bands(&self) -> usize {
        self.options.bands
    }

    /// The MinHash signature of `text`.
    pub fn signature(&self, text: &str) -> Vec<u32> {
        let mut signature = Vec::new();
        SCRATCH.with_borrow_mut(|buffers| {
            self.signature_into(text, &mut buffers.words_and_shingles, &mut signature)
        });
        signature
    }

    /// `signature`, into `signature`, with this thread's buffers (no allocation a document).
    fn signature_into(&self, text: &str, scratch: &mut Scratch, signature: &mut Vec<u32>) {
        signature.clear();
        signature.resize(self.multipliers.len(), u32::MAX);
        let Scratch {
            words,
            shingles,
            buffers,
        } = scratch;
        word_hashes_into(text, buffers, words);
        shingles.clear();
        if words.is_empty() {
            shingles.push(fold32(xxh3_64(text.as_bytes())));
        } else if words.len() <= self.options.ngram {
            shingles.push(fold32(xxh3_64(bytemuck::cast_slice(words))));
        } else {
            shingles.extend(
                words
                    .windows(self.options.ngram)
                    .map(|window| fold32(xxh3_64(bytemuck::cast_slice(window)))),
            );
        }
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx512dq") && std::is_x86_feature_detected!("avx512vl") {
            // SAFETY: the CPU has AVX-512 DQ and VL (both imply F; checked just above).
            unsafe { self.minimise_avx512(signature, shingles) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { self.minimise_avx2(signature, shingles) };
            return;
        }
        self.minimise(signature, shingles);
    }

    /// Each value `i` of `signature` lowered to the least `(a_i * x + b_i) >> 32` over the
    /// shingles `x`: multiply-shift hashing of 32-bit keys with 64-bit `a_i, b_i` (strongly
    /// universal), 32-bit products the vector units compute several at a time.
    #[inline(always)]
    fn minimise(&self, signature: &mut [u32], shingles: &[u32]) {
        for &x in shingles {
            let x = u64::from(x);
            for ((value, &a), &b) in signature
                .iter_mut()
                .zip(&self.multipliers)
                .zip(&self.offsets)
            {
                *value = (*value).min((a.wrapping_mul(x).wrapping_add(b) >> 32) as u32);
            }
        }
    }

    /// The same with AVX2, two `Block`s of eight permutations at a time over all the shingles,
    /// each block's minima held in one register: per shingle and eight values, two
    /// 32x32->64-bit products and one 32-bit product (see `Block`), where the 64-bit loop
    /// compiled to six products and a narrowing shuffle: 13% of `near_speed`'s time against 24%
    /// (AMD EPYC without AVX-512); two blocks a pass, band hashes +1-20% in four pairs of
    /// `near_speed` runs against one.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn minimise_avx2(&self, signature: &mut [u32], shingles: &[u32]) {
        // Two blocks a pass over the shingles: each shingle's broadcast and the loop's work
        // serve sixteen permutations, and the two chains of minima overlap.
        let mut blocks = self.blocks.chunks_exact(2);
        let mut values = signature.chunks_mut(LANES);
        for pair in blocks.by_ref() {
            let (Some(first), Some(second)) = (values.next(), values.next()) else {
                return;
            };
            // SAFETY: AVX2 is enabled for this function.
            let (low, high) = unsafe { Self::minima_avx2([&pair[0], &pair[1]], shingles) };
            lower(first, low);
            lower(second, high);
        }
        for (block, values) in blocks.remainder().iter().zip(values) {
            // SAFETY: as above; the same block twice, its second result unused.
            let (least, _) = unsafe { Self::minima_avx2([block, block], shingles) };
            lower(values, least);
        }
    }

    /// The minima over `shingles` of two blocks' eight permutations each: per shingle and
    /// eight values, two 32x32->64-bit products and one 32-bit product.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn minima_avx2(blocks: [&Block; 2], shingles: &[u32]) -> ([u32; LANES], [u32; LANES]) {
        use std::arch::x86_64::*;
        let low_halves = _mm256_set1_epi64x(0xffff_ffff);
        // SAFETY: each field is 8 u32s (32 bytes, aligned by `Block`'s repr).
        let load = |lanes: &[u32; LANES]| unsafe { _mm256_load_si256(lanes.as_ptr().cast()) };
        let constants = |block: &Block| {
            let a_low = load(&block.a_low);
            let b_low = load(&block.b_low);
            // `_mm256_mul_epu32` multiplies the even 32-bit lanes (the low half of each
            // 64-bit lane): the odd lanes are shifted down to be multiplied in a second product.
            (
                a_low,
                _mm256_srli_epi64::<32>(a_low),
                _mm256_and_si256(b_low, low_halves),
                _mm256_srli_epi64::<32>(b_low),
                load(&block.a_high),
                load(&block.b_high),
            )
        };
        let one = constants(blocks[0]);
        let two = constants(blocks[1]);
        // A block's loaded constants: a_low, a_odd, b_even, b_odd, a_high, b_high.
        type Constants = (__m256i, __m256i, __m256i, __m256i, __m256i, __m256i);
        let permuted = |(a_low, a_odd, b_even, b_odd, a_high, b_high): Constants, x: __m256i| {
            let even = _mm256_add_epi64(_mm256_mul_epu32(a_low, x), b_even);
            let odd = _mm256_add_epi64(_mm256_mul_epu32(a_odd, x), b_odd);
            // The high halves of the 64-bit sums, back in their lanes' places.
            let carries = _mm256_blend_epi32::<0b1010_1010>(_mm256_srli_epi64::<32>(even), odd);
            let high = _mm256_add_epi32(_mm256_mullo_epi32(a_high, x), b_high);
            _mm256_add_epi32(high, carries)
        };
        let mut least = [_mm256_set1_epi32(-1); 2];
        for &x in shingles {
            let x = _mm256_set1_epi32(x as i32);
            least[0] = _mm256_min_epu32(least[0], permuted(one, x));
            least[1] = _mm256_min_epu32(least[1], permuted(two, x));
        }
        let mut lanes = [[0u32; LANES]; 2];
        for (out, least) in lanes.iter_mut().zip(least) {
            // SAFETY: `out` is 32 bytes; an unaligned store.
            unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), least) };
        }
        (lanes[0], lanes[1])
    }

    /// The same, eight 64-bit products an instruction (`vpmullq`): the band hashes of a
    /// document 16% faster than with AVX2 (measured on 2M words, AMD EPYC).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512dq,avx512vl")]
    unsafe fn minimise_avx512(&self, signature: &mut [u32], shingles: &[u32]) {
        self.minimise(signature, shingles);
    }

    /// `text`'s bands as records (band hash, band number), in band order: the hash first, so
    /// that the de-duplication's sort mostly decides on the first word.
    pub fn band_hashes(&self, text: &str) -> Vec<[u64; 2]> {
        SCRATCH.with_borrow_mut(|scratch| {
            let mut signature = std::mem::take(&mut scratch.signature);
            self.signature_into(text, &mut scratch.words_and_shingles, &mut signature);
            let bands = signature
                .chunks_exact(self.options.rows)
                .enumerate()
                .map(|(band, values)| [xxh3_64(bytemuck::cast_slice(values)), band as u64])
                .collect();
            scratch.signature = signature;
            bands
        })
    }
}

/// A 64-bit hash folded to the 32-bit key of the signature's hashing.
fn fold32(hash: u64) -> u32 {
    (hash ^ (hash >> 32)) as u32
}

/// Each word of `text` (see the module doc) hashed to 64 bits.
pub fn word_hashes(text: &str) -> Vec<u64> {
    let mut hashes = Vec::new();
    word_hashes_into(text, &mut Words::default(), &mut hashes);
    hashes
}

/// A thread's buffers for reading words.
#[derive(Default)]
struct Words {
    /// The text with its ASCII capitals made small.
    lowered: Vec<u8>,
    /// A word gathered a character at a time.
    word: Vec<u8>,
}

/// `word_hashes` into `hashes`. The text is classified 64 bytes at a time into bit masks (ASCII
/// letters and digits, non-ASCII bytes) and copied with its ASCII capitals made small;
/// the masks give the runs between ASCII non-word bytes a `trailing_zeros` at a time (a test of
/// each byte ended each word with a branch the CPU guessed wrong). ASCII non-word bytes end
/// every word, so each run is read on its own: a run of ASCII letters and digits (most words of
/// most text) is hashed where it lies in the lowered copy, with no branch on its capitals; a run
/// with other characters is read a character at a time (`words_by_character`).
fn word_hashes_into(text: &str, buffers: &mut Words, hashes: &mut Vec<u64>) {
    hashes.clear();
    let bytes = text.as_bytes();
    let Words { lowered, word } = buffers;
    lowered.clear();
    // The run being read, from one block into the next: its first byte, and whether it has
    // non-ASCII bytes so far.
    let mut open: Option<usize> = None;
    let mut other = false;
    for block in (0..bytes.len()).step_by(BLOCK) {
        let classes = Classes::of(bytes, block, lowered);
        let runs = classes.word | classes.other;
        let mut from = 0;
        loop {
            if open.is_none() {
                // The next run's first byte, past the bytes already read.
                let ahead = runs & !low_bits(from);
                if ahead == 0 {
                    break;
                }
                from = ahead.trailing_zeros() as usize;
                open = Some(block + from);
                other = false;
            }
            // The shift brings in zeros, so the run stops at the block's end at the latest.
            let end = from + (!(runs >> from)).trailing_zeros() as usize;
            other |= classes.other & low_bits(end) & !low_bits(from) != 0;
            if end == BLOCK {
                break; // the run may go on in the next block
            }
            if let Some(start) = open.take() {
                hash_run(text, lowered, start..block + end, other, word, hashes);
            }
            from = end;
        }
    }
    if let Some(start) = open {
        hash_run(text, lowered, start..bytes.len(), other, word, hashes);
    }
}

/// The words of the run `text[range]` (between ASCII non-word bytes, so on character
/// boundaries) into `hashes`: the run itself as one word, taken from the `lowered` text, unless
/// it has `other` (non-ASCII) characters.
#[inline(always)]
fn hash_run(
    text: &str,
    lowered: &[u8],
    range: std::ops::Range<usize>,
    other: bool,
    word: &mut Vec<u8>,
    hashes: &mut Vec<u64>,
) {
    if !other {
        hashes.push(xxh3_64(lowered.get(range).unwrap_or_default()));
    } else if let Some(run) = text.get(range) {
        words_by_character(run, word, hashes);
    }
}

/// The words of a run of ASCII letters and digits and other characters, a character at a
/// time: alphanumeric characters lowercased and gathered, a CJK character a word by itself,
/// any other character between words.
fn words_by_character(run: &str, word: &mut Vec<u8>, hashes: &mut Vec<u64>) {
    let finish = |word: &mut Vec<u8>, hashes: &mut Vec<u64>| {
        if !word.is_empty() {
            hashes.push(xxh3_64(word));
            word.clear();
        }
    };
    word.clear();
    let two_byte = two_byte_lowercase();
    let mut utf8 = [0u8; 4];
    for c in run.chars() {
        if c.is_ascii() {
            // A letter or a digit: a run holds no other ASCII bytes.
            word.push((c as u8).to_ascii_lowercase());
            continue;
        }
        // Two bytes in UTF-8 (Latin, Greek, Cyrillic, Armenian, Hebrew, Arabic...): the table.
        match two_byte.get(c as usize - 0x80) {
            Some(&NOT_ALPHANUMERIC) => {
                finish(word, hashes);
                continue;
            }
            Some(&lower) if lower != LOWERCASE_ELSEWHERE => {
                word.extend_from_slice(&[0xC0 | (lower >> 6) as u8, 0x80 | (lower & 0x3F) as u8]);
                continue;
            }
            _ => {}
        }
        if is_word_by_itself(c) {
            finish(word, hashes);
            word.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            finish(word, hashes);
        } else if c.is_alphanumeric() {
            for lower in c.to_lowercase() {
                word.extend_from_slice(lower.encode_utf8(&mut utf8).as_bytes());
            }
        } else {
            finish(word, hashes);
        }
    }
    finish(word, hashes);
}

/// In `two_byte_lowercase`: a character that is not alphanumeric.
const NOT_ALPHANUMERIC: u16 = 0;
/// In `two_byte_lowercase`: an alphanumeric character whose lowercase is not one character of
/// two UTF-8 bytes (`İ` lowercases to two characters): asked of the standard library each time.
const LOWERCASE_ELSEWHERE: u16 = 1;

/// The characters of two UTF-8 bytes, U+0080 to U+07FF from index 0: each one's lowercase
/// (one character, U+0080 or above), or one of the two marks above (below U+0080). Made once from
/// the standard library's `is_alphanumeric` and `to_lowercase`, so it answers as they do, where
/// asking them took a binary search of the Unicode tables a character (15% of the band hashes'
/// time on the multilingual handbook).
fn two_byte_lowercase() -> &'static [u16; 0x780] {
    static TABLE: std::sync::OnceLock<[u16; 0x780]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        std::array::from_fn(|index| {
            let Some(c) = char::from_u32(0x80 + index as u32) else {
                return NOT_ALPHANUMERIC; // not reached: no surrogates below U+0800
            };
            if !c.is_alphanumeric() {
                return NOT_ALPHANUMERIC;
            }
            let mut lower = c.to_lowercase();
            match (lower.next(), lower.next()) {
                (Some(l), None) if (0x80..0x800).contains(&(l as u32)) => l as u16,
                _ => LOWERCASE_ELSEWHERE,
            }
        })
    })
}

/// The classes of a text's 64-byte block as bit masks (bit `i` for the block's byte `i`; bytes
/// past the text's end are in no class).
struct Classes {
    /// ASCII letters and digits.
    word: u64,
    /// Bytes of non-ASCII characters.
    other: u64,
}

impl Classes {
    /// The classes of the block of `bytes` from `start`, its bytes lowered onto `lowered`.
    #[inline(always)]
    fn of(bytes: &[u8], start: usize, lowered: &mut Vec<u8>) -> Self {
        let mut small = [0u8; BLOCK];
        let (word, other) = match bytes.get(start..start + BLOCK) {
            Some(block) => classify(block.as_array().unwrap_or(&[0; BLOCK]), &mut small),
            None => {
                // The text's last block, padded with bytes in no class.
                let mut block = [0u8; BLOCK];
                let tail = bytes.get(start..).unwrap_or_default();
                block[..tail.len()].copy_from_slice(tail);
                classify(&block, &mut small)
            }
        };
        let len = (bytes.len() - start).min(BLOCK);
        lowered.extend_from_slice(&small[..len]);
        Self { word, other }
    }
}

/// (letters and digits, non-ASCII) masks of 64 bytes, 16 at a time (`byte_masks::sse2`), and
/// the bytes with ASCII capitals made small into `lowered`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn classify(block: &[u8; BLOCK], lowered: &mut [u8; BLOCK]) -> (u64, u64) {
    use crate::byte_masks::sse2::{ascii_lowercase, bits, in_range, letters, load, or, store};
    let (mut word, mut other) = (0u64, 0u64);
    for part in 0..4 {
        let v = load(block, part);
        word |= bits(or(letters(v), in_range(v, b'0', 10)), part);
        other |= bits(v, part);
        store(lowered, part, ascii_lowercase(v));
    }
    (word, other)
}

#[cfg(not(target_arch = "x86_64"))]
fn classify(block: &[u8; BLOCK], lowered: &mut [u8; BLOCK]) -> (u64, u64) {
    classify_bytewise(block, lowered)
}

/// `classify` a byte at a time (elsewhere than x86-64, and the oracle of the SSE2 one).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn classify_bytewise(block: &[u8; BLOCK], lowered: &mut [u8; BLOCK]) -> (u64, u64) {
    let (mut word, mut other) = (0u64, 0u64);
    for (i, &byte) in block.iter().enumerate() {
        word |= u64::from(byte.is_ascii_alphanumeric()) << i;
        other |= u64::from(!byte.is_ascii()) << i;
        lowered[i] = byte.to_ascii_lowercase();
    }
    (word, other)
}

/// A thread's buffers for the signatures it makes.
#[derive(Default)]
struct Scratch {
    words: Vec<u64>,
    shingles: Vec<u32>,
    buffers: Words,
}

/// `Scratch` and the signature `band_hashes` cuts into bands.
#[derive(Default)]
struct Buffers {
    words_and_shingles: Scratch,
    signature: Vec<u32>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Buffers> = std::cell::RefCell::default();
}

/// CJK ideographs (and their extensions and compatibility forms), kana and Hangul syllables.
fn is_word_by_itself(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF
        | 0x20000..=0x3FFFF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn jaccard(a: &str, b: &str, n: usize) -> f64 {
        let shingles = |t: &str| -> HashSet<Vec<u64>> {
            word_hashes(t).windows(n).map(<[u64]>::to_vec).collect()
        };
        let (a, b) = (shingles(a), shingles(b));
        a.intersection(&b).count() as f64 / a.union(&b).count() as f64
    }

    #[test]
    fn words_are_alphanumeric_runs_lowercased_and_cjk_characters_alone() {
        let same = word_hashes("Hello, WORLD! Straße 42");
        assert_eq!(same, word_hashes("hello world straße 42"));
        assert_eq!(same.len(), 4);
        assert_eq!(word_hashes("日本語とhangul한국").len(), 4 + 1 + 2);
        assert!(word_hashes(" ,. ").is_empty());
    }

    #[test]
    fn signatures_estimate_the_jaccard_similarity() {
        let hasher = MinHasher::new(NearOptions {
            bands: 32,
            rows: 8,
            ..NearOptions::default()
        });
        let base: Vec<String> = (0..400)
            .map(|i| format!("w{}", (i * 7919) % 1000))
            .collect();
        let mut edited = base.clone();
        for i in (0..400).step_by(40) {
            edited[i] = format!("changed{i}");
        }
        let (a, b) = (base.join(" "), edited.join(" "));
        let exact = jaccard(&a, &b, 5);
        let (sa, sb) = (hasher.signature(&a), hasher.signature(&b));
        let estimate = sa.iter().zip(&sb).filter(|(x, y)| x == y).count() as f64 / 256.0;
        assert!((estimate - exact).abs() < 0.1, "{estimate} vs {exact}");
        assert!(exact > 0.5 && exact < 0.95, "{exact}");
    }

    /// The words character by character, as first written: the oracle of the byte-wise
    /// ASCII path.
    fn word_hashes_by_char(text: &str) -> Vec<u64> {
        let (mut hashes, mut word) = (Vec::new(), String::new());
        let finish = |word: &mut String, hashes: &mut Vec<u64>| {
            if !word.is_empty() {
                hashes.push(xxh3_64(word.as_bytes()));
                word.clear();
            }
        };
        for c in text.chars() {
            if is_word_by_itself(c) {
                finish(&mut word, &mut hashes);
                word.push(c);
                finish(&mut word, &mut hashes);
            } else if c.is_alphanumeric() {
                word.extend(c.to_lowercase());
            } else {
                finish(&mut word, &mut hashes);
            }
        }
        finish(&mut word, &mut hashes);
        hashes
    }

    #[test]
    fn bytes_are_classified_as_one_at_a_time() {
        for start in (0..=255u8).step_by(64) {
            let block: [u8; 64] = std::array::from_fn(|i| start.wrapping_add(i as u8));
            let (mut lowered, mut expected) = ([0; BLOCK], [0; BLOCK]);
            let classes = classify(&block, &mut lowered);
            assert_eq!(classes, classify_bytewise(&block, &mut expected), "{start}");
            assert_eq!(lowered, expected, "{start}");
        }
    }

    #[test]
    fn words_at_every_place_around_a_block_boundary_are_read_as_by_character() {
        // Each kind of boundary (a word's end, a capital, a two-, three- and four-byte
        // character, a CJK character alone, spaces) at every offset across the first two
        // blocks, after a word or after spaces.
        for tail in ["x", " Ab", "é", "日z", "🙂a", "aé", "A ", "  ", "ÀB"] {
            for lead in ["a", " "] {
                for pad in 0..140 {
                    let text = format!("{}{tail} end", lead.repeat(pad));
                    assert_eq!(word_hashes(&text), word_hashes_by_char(&text), "{text:?}");
                }
            }
        }
    }

    #[test]
    fn every_two_byte_character_is_read_as_by_character() {
        // The table's answers (alphanumeric, lowercase) for all of U+0080..U+07FF, alone,
        // inside a word, after a capital and between words.
        for code in 0x80..0x800u32 {
            let Some(c) = char::from_u32(code) else {
                continue;
            };
            let text = format!("{c} a{c}b X{c}{c} {c}9");
            assert_eq!(
                word_hashes(&text),
                word_hashes_by_char(&text),
                "U+{code:04X}"
            );
        }
    }

    #[test]
    fn words_read_byte_wise_equal_words_read_by_character() {
        let pieces = [
            "Hello",
            " ",
            "WORLD",
            "42",
            "café",
            "ÉCOLE",
            "日本語",
            "한국어",
            "ß",
            "İ",
            "-",
            "\n",
            "Straße",
            "ǅ",
            "٣",
            "x_y",
            "🙂",
            "\u{0301}",
            "ﬁ",
            "Ⅻ",
            "\t",
            "a.b",
            // Runs that cross the 64-byte blocks the words are classified in.
            "abcdefghijklmnopqrstuvwxyz0123456789",
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij",
            "                                   ",
            "é日本ÀÉÎ",
        ];
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        for round in 0..4000 {
            // Short texts, and texts over several blocks.
            let count = (rng.next_u32() % if round % 2 == 0 { 12 } else { 60 }) as usize;
            let text: String = (0..count)
                .map(|_| pieces[rng.next_u32() as usize % pieces.len()])
                .collect();
            assert_eq!(word_hashes(&text), word_hashes_by_char(&text), "{text:?}");
        }
    }

    /// The signature's minima as defined: 64-bit products, one permutation at a time.
    fn minima_by_definition(options: &NearOptions, shingles: &[u32]) -> Vec<u32> {
        let (multipliers, offsets) = permutations(options);
        multipliers
            .iter()
            .zip(&offsets)
            .map(|(&a, &b)| {
                shingles
                    .iter()
                    .map(|&x| (a.wrapping_mul(u64::from(x)).wrapping_add(b) >> 32) as u32)
                    .min()
                    .unwrap_or(u32::MAX)
            })
            .collect()
    }

    #[test]
    fn every_vector_path_minimises_as_the_definition() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        // The default 112 permutations (seven pairs of blocks), 15 (a block and a padded one)
        // and 20 (a pair and a padded block left over).
        for options in [
            NearOptions::default(),
            NearOptions {
                bands: 5,
                rows: 3,
                ..NearOptions::default()
            },
            NearOptions {
                bands: 4,
                rows: 5,
                ..NearOptions::default()
            },
        ] {
            let hasher = MinHasher::new(options);
            let lanes = options.bands * options.rows;
            for count in [0usize, 1, 5, 113, 1000] {
                let mut shingles: Vec<u32> = (0..count).map(|_| rng.next_u32()).collect();
                shingles.extend([0, u32::MAX].iter().take(count.min(2)));
                let expected = minima_by_definition(&options, &shingles);
                let mut plain = vec![u32::MAX; lanes];
                hasher.minimise(&mut plain, &shingles);
                assert_eq!(plain, expected, "{count} shingles");
                #[cfg(target_arch = "x86_64")]
                {
                    if std::is_x86_feature_detected!("avx2") {
                        let mut avx2 = vec![u32::MAX; lanes];
                        // SAFETY: the CPU has AVX2 (checked just above).
                        unsafe { hasher.minimise_avx2(&mut avx2, &shingles) };
                        assert_eq!(avx2, plain, "{count} shingles");
                    }
                    if std::is_x86_feature_detected!("avx512dq")
                        && std::is_x86_feature_detected!("avx512vl")
                    {
                        let mut avx512 = vec![u32::MAX; lanes];
                        // SAFETY: the CPU has AVX-512 DQ and VL (checked just above).
                        unsafe { hasher.minimise_avx512(&mut avx512, &shingles) };
                        assert_eq!(avx512, plain, "{count} shingles");
                    }
                }
            }
        }
    }

    #[test]
    fn bands_are_stable_and_identical_texts_share_all() {
        let hasher = MinHasher::new(NearOptions::default());
        let text = "the quick brown fox jumps over the lazy dog again and again";
        let bands = hasher.band_hashes(text);
        assert_eq!(bands.len(), 14);
        assert_eq!(
            bands,
            MinHasher::new(NearOptions::default()).band_hashes(text)
        );
        let other = hasher.band_hashes("an entirely different text about other things here");
        assert!(bands.iter().zip(&other).all(|(x, y)| x[0] != y[0]));
        // Texts without words are told apart by their whole text.
        assert_ne!(hasher.band_hashes("..."), hasher.band_hashes("!!!"));
    }
}
