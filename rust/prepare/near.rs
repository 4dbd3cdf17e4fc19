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
//! Defaults: 5-word shingles, 14 bands of 8 rows (112 permutations): the S-curve's midpoint
//! `(1/14)^(1/8)` is a Jaccard similarity of 0.72; pairs at 0.8 are found 92% of the time,
//! pairs at 0.5 5.3%, pairs at 0.3 0.1%.

use rand::{RngCore, SeedableRng};
use xxhash_rust::xxh3::xxh3_64;

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
}

impl MinHasher {
    pub fn new(options: NearOptions) -> Self {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(options.seed);
        let count = options.bands * options.rows;
        let multipliers = (0..count).map(|_| rng.next_u64() | 1).collect();
        let offsets = (0..count).map(|_| rng.next_u64()).collect();
        Self {
            options,
            multipliers,
            offsets,
        }
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
            word,
        } = scratch;
        word_hashes_into(text, word, words);
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

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn minimise_avx2(&self, signature: &mut [u32], shingles: &[u32]) {
        self.minimise(signature, shingles);
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
    word_hashes_into(text, &mut Vec::new(), &mut hashes);
    hashes
}

/// `word_hashes` into `hashes`, `word` holding the word being read. ASCII goes byte by byte
/// (most text is mostly ASCII); other characters are decoded one at a time.
fn word_hashes_into(text: &str, word: &mut Vec<u8>, hashes: &mut Vec<u64>) {
    hashes.clear();
    word.clear();
    let finish = |word: &mut Vec<u8>, hashes: &mut Vec<u64>| {
        if !word.is_empty() {
            hashes.push(xxh3_64(word));
            word.clear();
        }
    };
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        if byte.is_ascii() {
            if byte.is_ascii_alphanumeric() {
                word.push(byte.to_ascii_lowercase());
            } else {
                finish(word, hashes);
            }
            at += 1;
            continue;
        }
        // `at` is always a character boundary: it moves by whole characters.
        let Some(c) = text.get(at..).and_then(|rest| rest.chars().next()) else {
            break;
        };
        at += c.len_utf8();
        let mut utf8 = [0u8; 4];
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

/// A thread's buffers for the signatures it makes.
#[derive(Default)]
struct Scratch {
    words: Vec<u64>,
    shingles: Vec<u32>,
    word: Vec<u8>,
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
        ];
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        for _ in 0..2000 {
            let count = (rng.next_u32() % 12) as usize;
            let text: String = (0..count)
                .map(|_| pieces[rng.next_u32() as usize % pieces.len()])
                .collect();
            assert_eq!(word_hashes(&text), word_hashes_by_char(&text), "{text:?}");
        }
    }

    #[test]
    fn every_vector_path_minimises_as_the_plain_loop() {
        let hasher = MinHasher::new(NearOptions::default());
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for count in [0usize, 1, 5, 113, 1000] {
            let shingles: Vec<u32> = (0..count).map(|_| rng.next_u32()).collect();
            let mut plain = vec![u32::MAX; 112];
            hasher.minimise(&mut plain, &shingles);
            #[cfg(target_arch = "x86_64")]
            {
                if std::is_x86_feature_detected!("avx2") {
                    let mut avx2 = vec![u32::MAX; 112];
                    // SAFETY: the CPU has AVX2 (checked just above).
                    unsafe { hasher.minimise_avx2(&mut avx2, &shingles) };
                    assert_eq!(avx2, plain, "{count} shingles");
                }
                if std::is_x86_feature_detected!("avx512dq")
                    && std::is_x86_feature_detected!("avx512vl")
                {
                    let mut avx512 = vec![u32::MAX; 112];
                    // SAFETY: the CPU has AVX-512 DQ and VL (checked just above).
                    unsafe { hasher.minimise_avx512(&mut avx512, &shingles) };
                    assert_eq!(avx512, plain, "{count} shingles");
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
