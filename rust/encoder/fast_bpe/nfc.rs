//! "Is this text already in NFC?" answered fast.
//!
//! The answer is the NFC quick check of `tokenizers`' normalisation crate (UAX #15): text whose
//! quick check says "yes" is left as it is, anything else is normalised. The crate looks up the
//! combining class and the quick-check property of every non-ASCII character (2.4% of a warm
//! tokenize run on documentation text, far more on CJK). Here ASCII and text below U+0300 is
//! skipped eight bytes at a time, and other characters of the BMP are one bit in a table built
//! from the crate's own answers: set for starters (combining class 0) whose quick check is
//! "yes". At the first character that is not one, the crate checks the rest: starting after a
//! starter is the same as starting at the beginning.

use std::sync::OnceLock;

use unicode_normalization_alignments::char::canonical_combining_class;
use unicode_normalization_alignments::{is_nfc_quick, IsNormalized};

/// One bit per BMP code point: set when it is a starter (combining class 0) whose quick check
/// is "yes". Built once from the crate's own tables (a few milliseconds), 8 KiB.
fn plain_starters() -> &'static [u64; 1024] {
    static TABLE: OnceLock<Box<[u64; 1024]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut bits = Box::new([0u64; 1024]);
        for c in (0..0x1_0000u32).filter_map(char::from_u32) {
            if canonical_combining_class(c) == 0
                && is_nfc_quick(std::iter::once(c)) == IsNormalized::Yes
            {
                bits[c as usize / 64] |= 1 << (c as usize % 64);
            }
        }
        bits
    })
}

/// Bytes from 0xCC up: lead bytes of U+0300 and above. Everything below (ASCII, continuation
/// bytes, leads of U+0080..U+02FF) belongs to characters that are plain starters.
#[inline(always)]
fn has_lead_from_u0300(word: u64) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Per byte: high bit set, and the low seven bits plus 0x34 carry into bit 7 (>= 0x4C).
    word & ((word & !HIGH) + 0x3434_3434_3434_3434) & HIGH != 0
}

/// Past the 64-byte blocks from `i` on that hold no byte from 0xCC up (see
/// `has_lead_from_u0300`): one unsigned maximum over the block and one compare.
#[inline(always)]
fn skip_blocks_below_u0300(bytes: &[u8], mut i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    while let Some(block) = bytes.get(i..i + 64) {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of x86-64; the four loads read the 64 bytes of `block`.
        let clean = unsafe {
            let load = |k: usize| _mm_loadu_si128(block.as_ptr().add(16 * k).cast());
            let top = _mm_max_epu8(
                _mm_max_epu8(load(0), load(1)),
                _mm_max_epu8(load(2), load(3)),
            );
            let limit = _mm_set1_epi8(0xCBu8 as i8);
            _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(top, limit), limit)) == 0xffff
        };
        if !clean {
            break;
        }
        i += 64;
    }
    i
}

/// Whether the NFC quick check of `text` says "yes" (the text is in NFC); `false` means it may
/// not be, and must be normalised.
pub fn is_nfc(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut starters = None;
    let mut i = 0;
    while let Some(&lead) = bytes.get(i) {
        if lead < 0x80 {
            let past = skip_blocks_below_u0300(bytes, i);
            if past > i {
                // The byte there may be any; look at it afresh.
                i = past;
                continue;
            }
            // ASCII: skip eight bytes at a time while they hold nothing from U+0300 on.
            match bytes.get(i..i + 8) {
                Some(chunk)
                    if !has_lead_from_u0300(u64::from_le_bytes(
                        chunk.try_into().unwrap_or([0; 8]),
                    )) =>
                {
                    i += 8
                }
                _ => i += 1,
            }
            continue;
        }
        if lead < 0xCC {
            // A continuation byte, or the lead of a character below U+0300.
            i += 1;
            continue;
        }
        if lead & 0xF0 == 0xE0 {
            // Three-byte characters one after another (CJK text is nearly all of them): the
            // lead's low bits and the second byte pick the table word of 64 code points, the
            // third byte the bit, with no full decode and no other branch.
            let table = starters.get_or_insert_with(plain_starters);
            while let Some(&[lead, second, third]) = bytes.get(i..i + 3) {
                let word = usize::from(lead & 0x0f) << 6 | usize::from(second & 0x3f);
                if lead & 0xF0 != 0xE0 || table[word] >> (third & 0x3f) & 1 == 0 {
                    break;
                }
                i += 3;
            }
            if bytes.get(i).is_none_or(|&b| b & 0xF0 != 0xE0) {
                continue;
            }
            // A three-byte character that is not a plain starter: the crate checks from here.
            return is_nfc_quick(text[i..].chars()) == IsNormalized::Yes;
        }
        // `text` is valid UTF-8, so the sequence is complete; decoded by hand.
        let cont = |k: usize| u32::from(bytes[i + k] & 0x3f);
        let (code, len) = match lead {
            0xCC..=0xDF => ((u32::from(lead & 0x1f) << 6) | cont(1), 2),
            0xE0..=0xEF => ((u32::from(lead & 0x0f) << 12) | (cont(1) << 6) | cont(2), 3),
            _ => (
                (u32::from(lead & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3),
                4,
            ),
        };
        let plain = if code < 0x1_0000 {
            let table = starters.get_or_insert_with(plain_starters);
            table[code as usize / 64] >> (code % 64) & 1 == 1
        } else {
            // Outside the BMP (emoji, rare ideographs): asked of the crate, one character.
            char::from_u32(code).is_some_and(|c| {
                canonical_combining_class(c) == 0
                    && is_nfc_quick(std::iter::once(c)) == IsNormalized::Yes
            })
        };
        if !plain {
            return is_nfc_quick(text[i..].chars()) == IsNormalized::Yes;
        }
        i += len;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_test_finds_every_byte_from_0xcc() {
        for b in 0..=255u8 {
            for lane in 0..8 {
                let mut word = [b'a'; 8];
                word[lane] = b;
                assert_eq!(
                    has_lead_from_u0300(u64::from_le_bytes(word)),
                    b >= 0xCC,
                    "{b:#x}"
                );
            }
        }
        // Common blocks are in the table: Latin, CJK, kana, Hangul, general punctuation.
        for c in ['é', '中', 'の', '한', '—', '’'] {
            assert!(
                plain_starters()[c as usize / 64] >> (c as usize % 64) & 1 == 1,
                "{c}"
            );
        }
    }

    #[test]
    fn runs_of_three_byte_characters_up_to_the_end_of_the_text() {
        // The three-byte loop stops at the end, at a shorter character, and at a character
        // that is not a plain starter (U+3099, a combining mark, and the trailing jamo U+11A8).
        for (text, nfc) in [
            ("中文", true),
            ("中文a", true),
            ("中文é", true),
            ("か\u{3099}", false),
            ("中か\u{3099}", false),
            ("中\u{3099}", false),
            ("가\u{11a8}", false),
            ("한국어\u{1f600}", true),
        ] {
            assert_eq!(is_nfc(text), nfc, "{text:?}");
            assert_eq!(
                is_nfc_quick(text.chars()) == IsNormalized::Yes,
                nfc,
                "{text:?}"
            );
        }
    }

    const PLAIN: &str = "Plain text, ASCII and Latin-1 (é, ü, ñ), with no character from U+0300 on: 1234567890 \t\n";

    #[test]
    fn agrees_with_the_quick_check_around_every_code_point() {
        // Each code point after plain text, before a combining mark, and after one.
        for c in (0..0x11_0000u32).filter_map(char::from_u32) {
            for text in [
                format!("ab中{c}"),
                format!("{c}\u{301}"),
                format!("e\u{301}x{c}"),
                format!("가{c}\u{316}\u{301}"),
            ] {
                // Also after a block of plain text, and across the end of one.
                let pad: String = PLAIN.chars().take(c as usize % 90).collect();
                let text = format!("{pad}{text}{PLAIN}");
                assert_eq!(
                    is_nfc(&text),
                    is_nfc_quick(text.chars()) == IsNormalized::Yes,
                    "{text:?}"
                );
            }
        }
    }
}
