//! "Is this text already in NFC?" answered fast for the scripts most text is written in.
//!
//! The answer is the NFC quick check of `tokenizers`' normalisation crate (UAX #15): text whose
//! quick check says "yes" is left as it is, anything else is normalised. The crate looks up the
//! combining class and the quick-check property of every non-ASCII character (2.4% of a warm
//! tokenize run on documentation text, far more on CJK). Most characters lie in blocks where
//! every code point is a starter (combining class 0) with quick check "yes"; a scan over those
//! needs no lookup. At the first other character the crate checks the rest: starting after a
//! starter is the same as starting at the beginning.

use unicode_normalization_alignments::{is_nfc_quick, IsNormalized};

/// Blocks whose every code point is a starter with NFC quick check "yes" (checked on every code
/// point by the test below): Latin, Greek-free Latin-1 and extensions below the combining
/// diacritics, CJK symbols and punctuation before the ideographic tone marks, kana without the
/// combining voiced marks, CJK unified ideographs, Hangul syllables and fullwidth forms.
const STARTER_RANGES: [(u32, u32); 7] = [
    (0x0000, 0x02FF),
    (0x3000, 0x3029),
    (0x3041, 0x3096),
    (0x30A1, 0x30FA),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7A3),
    (0xFF01, 0xFF60),
];

#[inline(always)]
fn is_plain_starter(c: char) -> bool {
    let c = c as u32;
    STARTER_RANGES
        .iter()
        .any(|&(low, high)| (low..=high).contains(&c))
}

/// Whether the NFC quick check of `text` says "yes" (the text is in NFC); `false` means it may
/// not be, and must be normalised.
pub fn is_nfc(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        // ASCII, continuation bytes, and the lead bytes of U+0080..U+02FF (below 0xCC) are
        // skipped a byte at a time; a character from U+0300 on is decoded and looked at.
        if bytes[i] < 0xCC {
            i += 1;
            continue;
        }
        let Some(c) = text[i..].chars().next() else {
            break;
        };
        if !is_plain_starter(c) {
            return is_nfc_quick(text[i..].chars()) == IsNormalized::Yes;
        }
        i += c.len_utf8();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use unicode_normalization_alignments::char::canonical_combining_class;

    #[test]
    fn every_code_point_of_the_fast_ranges_is_a_plain_starter() {
        for &(low, high) in &STARTER_RANGES {
            for c in (low..=high).filter_map(char::from_u32) {
                assert_eq!(canonical_combining_class(c), 0, "U+{:04X}", c as u32);
                assert_eq!(
                    is_nfc_quick(std::iter::once(c)),
                    IsNormalized::Yes,
                    "U+{:04X}",
                    c as u32
                );
            }
        }
    }

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
                assert_eq!(
                    is_nfc(&text),
                    is_nfc_quick(text.chars()) == IsNormalized::Yes,
                    "{text:?}"
                );
            }
        }
    }
}
