//! "Is this text already in NFC?" answered fast.
//!
//! The answer is the NFC quick check of `tokenizers`' normalisation crate (UAX #15): text whose
//! quick check says "yes" is left as it is, anything else is normalised. The crate looks up the
//! combining class and the quick-check property of every non-ASCII character (2.4% of a warm
//! tokenize run on documentation text, far more on CJK). Here only characters from U+0300 on
//! are looked at, found by their lead bytes 64 bytes at a time, and those of the BMP are one
//! bit in a table built from the crate's own answers: set for starters (combining class 0)
//! whose quick check is "yes". At the first character that is not one, the crate checks the
//! rest: starting after a starter is the same as starting at the beginning. Lead bytes whose
//! every character is such a starter (the CJK ideographs' 0xE4..0xE9) are left out of the
//! search, so CJK text is not looked up a character at a time (2.5% of a warm `encode_batch`
//! of the race's CJK texts at one thread; 8% of its samples were in this check before).

use std::sync::OnceLock;

use unicode_normalization_alignments::char::canonical_combining_class;
use unicode_normalization_alignments::{is_nfc_quick, IsNormalized};

/// One bit per BMP code point, set when it is a starter (combining class 0) whose quick check
/// is "yes" (built once from the crate's own tables, a few milliseconds, 8 KiB); and the
/// widest run of three-byte lead bytes all of whose characters are plain starters (`lo..=hi`;
/// CJK ideographs, U+4000..U+9FFF, among them): those lead bytes are left out of the block
/// mask, so that a run of CJK text is read 64 bytes at a time, not a character at a time.
type Tables = (Box<[u64; 1024]>, (u8, u8));

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let mut bits = Box::new([0u64; 1024]);
        for c in (0..0x1_0000u32).filter_map(char::from_u32) {
            if canonical_combining_class(c) == 0
                && is_nfc_quick(std::iter::once(c)) == IsNormalized::Yes
            {
                bits[c as usize / 64] |= 1 << (c as usize % 64);
            }
        }
        // A lead byte 0xEn starts the characters U+n000..U+nFFF: 64 words of the table.
        let all_plain = |lead: u8| {
            let first = usize::from(lead & 0x0f) * 64;
            bits[first..first + 64].iter().all(|&word| word == u64::MAX)
        };
        let mut best = (0xFF, 0x00); // an empty range: no byte is in it
        let mut lead = 0xE1u8;
        while lead <= 0xEF {
            if all_plain(lead) {
                let start = lead;
                while lead < 0xEF && all_plain(lead + 1) {
                    lead += 1;
                }
                if best.0 > best.1 || lead - start > best.1 - best.0 {
                    best = (start, lead);
                }
            }
            lead += 1;
        }
        (bits, best)
    })
}

/// Text is read 64 bytes at a time.
const BLOCK: usize = 64;

/// One bit per byte of `block` from 0xCC up (bit k = byte k): the lead bytes of characters
/// from U+0300 on, but those in `plain` (`lo..=hi`, lead bytes whose every character is a
/// plain starter: `tables`). Every other byte (ASCII, continuation bytes, leads of
/// U+0080..U+02FF, the leads in `plain`) belongs to a character that is a plain starter.
#[inline(always)]
fn leads_from_u0300(block: &[u8; BLOCK], plain: (u8, u8)) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        let mut mask = 0u64;
        for part in 0..BLOCK / 16 {
            // SAFETY: SSE2 is part of x86-64; the load reads 16 bytes of `block`.
            let bits = unsafe {
                let v = _mm_loadu_si128(block.as_ptr().add(16 * part).cast());
                // Bytes at most 0xCB are unchanged by an unsigned maximum with 0xCB; those in
                // lo..=hi by a maximum with lo and a minimum with hi.
                let limit = _mm_set1_epi8(0xCBu8 as i8);
                let below = _mm_cmpeq_epi8(_mm_max_epu8(v, limit), limit);
                let (lo, hi) = (_mm_set1_epi8(plain.0 as i8), _mm_set1_epi8(plain.1 as i8));
                let within = _mm_and_si128(
                    _mm_cmpeq_epi8(_mm_max_epu8(v, lo), v),
                    _mm_cmpeq_epi8(_mm_min_epu8(v, hi), v),
                );
                !_mm_movemask_epi8(_mm_or_si128(below, within)) & 0xffff
            };
            mask |= (bits as u64) << (16 * part);
        }
        mask
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        block.iter().enumerate().fold(0, |mask, (k, &b)| {
            let lead = b >= 0xCC && !(plain.0..=plain.1).contains(&b);
            mask | (u64::from(lead) << k)
        })
    }
}

/// Whether the character whose lead byte (0xCC or more) is `bytes[i]` is a plain starter.
/// `bytes` holds the whole character (it comes from a `str`).
#[inline(always)]
fn plain_at(bytes: &[u8], i: usize, table: &[u64; 1024]) -> bool {
    let lead = bytes[i];
    let cont = |k: usize| u32::from(bytes[i + k] & 0x3f);
    let code = match lead {
        0xCC..=0xDF => (u32::from(lead & 0x1f) << 6) | cont(1),
        0xE0..=0xEF => (u32::from(lead & 0x0f) << 12) | (cont(1) << 6) | cont(2),
        _ => {
            let code = (u32::from(lead & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
            // Outside the BMP (emoji, rare ideographs): asked of the crate, one character.
            return char::from_u32(code).is_some_and(|c| {
                canonical_combining_class(c) == 0
                    && is_nfc_quick(std::iter::once(c)) == IsNormalized::Yes
            });
        }
    };
    table[code as usize / 64] >> (code % 64) & 1 == 1
}

/// Where the first character that is not a plain starter begins among the lead bytes `leads`
/// (a mask from `leads_from_u0300`, bit k = byte `base + k` of `bytes`), if any.
#[inline(always)]
fn first_not_plain(
    mut leads: u64,
    bytes: &[u8],
    base: usize,
    table: &[u64; 1024],
) -> Option<usize> {
    while leads != 0 {
        let at = base + leads.trailing_zeros() as usize;
        if !plain_at(bytes, at, table) {
            return Some(at);
        }
        leads &= leads - 1;
    }
    None
}

/// `first_not_plain` of the last bytes of `bytes`, from `at` (fewer than 64 bytes before the
/// end). A text of 64 bytes or more is read from its last 64 bytes, the mask shifted past what
/// was read already; a shorter one from a zero-padded copy, which holds every character it
/// starts (the text is whole), so a character is decoded from the copy.
#[inline(always)]
fn last_not_plain(bytes: &[u8], at: usize, table: &[u64; 1024], plain: (u8, u8)) -> Option<usize> {
    if let Some(from) = bytes.len().checked_sub(BLOCK) {
        let block: &[u8; BLOCK] = bytes[from..].try_into().unwrap_or(&[0; BLOCK]);
        let leads = leads_from_u0300(block, plain) >> (at - from) << (at - from);
        return first_not_plain(leads, bytes, from, table);
    }
    let mut last = [0u8; BLOCK];
    last[..bytes.len() - at].copy_from_slice(&bytes[at..]);
    first_not_plain(leads_from_u0300(&last, plain), &last, 0, table).map(|k| at + k)
}

/// Whether the NFC quick check of `text` says "yes" (the text is in NFC); `false` means it may
/// not be, and must be normalised.
///
/// Each 64-byte block is searched for lead bytes of characters from U+0300 on, at once, and
/// only those characters are looked up: the bytes in between cost nothing, where a loop over
/// characters mispredicted at each switch between ASCII and other text (word by word in
/// Cyrillic or Greek with spaces). At the first character that is not a plain starter the
/// crate checks the rest: starting after a starter is the same as starting at the beginning.
pub fn is_nfc(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.is_empty() {
        return true;
    }
    let (table, plain) = tables();
    let mut at = 0;
    let mut found = None;
    while let Some(block) = bytes.get(at..at + BLOCK) {
        let block: &[u8; BLOCK] = block.try_into().unwrap_or(&[0; BLOCK]);
        found = first_not_plain(leads_from_u0300(block, *plain), bytes, at, table);
        if found.is_some() {
            break;
        }
        at += BLOCK;
    }
    if found.is_none() && at < bytes.len() {
        found = last_not_plain(bytes, at, table, *plain);
    }
    match found {
        None => true,
        Some(i) => is_nfc_quick(text[i..].chars()) == IsNormalized::Yes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_mask_finds_every_byte_from_0xcc_in_every_lane() {
        let plain = tables().1;
        for b in 0..=255u8 {
            for lane in 0..BLOCK {
                let mut block = [b'a'; BLOCK];
                block[lane] = b;
                let expected = if b >= 0xCC { 1u64 << lane } else { 0 };
                assert_eq!(
                    leads_from_u0300(&block, (0xFF, 0)),
                    expected,
                    "{b:#x} in {lane}"
                );
                let left_out = (plain.0..=plain.1).contains(&b);
                let expected = if left_out { 0 } else { expected };
                assert_eq!(
                    leads_from_u0300(&block, plain),
                    expected,
                    "{b:#x} in {lane}"
                );
            }
        }
        // The CJK ideographs' lead bytes, U+4000..U+9FFF, are left out of the mask.
        assert!(plain.0 <= 0xE4 && plain.1 >= 0xE9, "{plain:x?}");
        // Common blocks are in the table: Latin, CJK, kana, Hangul, general punctuation.
        for c in ['é', '中', 'の', '한', '—', '’'] {
            assert!(
                tables().0[c as usize / 64] >> (c as usize % 64) & 1 == 1,
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
