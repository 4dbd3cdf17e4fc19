//! Normalisation and filtering of documents, as `data_io/prepare/normalize.py` states them:
//! the same text, kept or dropped for the same reason, as the Python cleaner that was
//! `prepare`'s before (`tests/prepare/clean_oracle.py`, the oracle of the differential tests
//! in `tests/prepare/test_clean_rust.py`).
//!
//! Normalisation: NFC (counted only when it changes the text); `\r\n` and `\r` become `\n`;
//! the controls U+0000–U+0008, U+000B, U+000C, U+000E–U+001F and U+007F–U+009F are removed;
//! spaces, tabs, U+00A0 and U+3000 at the end of every line are removed; runs of three or more
//! newlines become two; the document is stripped of Python's whitespace. Filtering: a line that
//! is not blank and has fewer than `min_line_chars` non-whitespace characters is dropped (then
//! the document is stripped again); a document left empty, or shorter than `min_doc_chars`
//! characters, is dropped. Lengths are in characters (code points), as Python counts them.
//!
//! NFC follows `tokenizers`' normalisation crate, as the encoder does; Python's `unicodedata`
//! follows the Unicode version of the running Python, so the two can differ on characters
//! added since (the tests skip the code points where this Python and the crate disagree).

use std::borrow::Cow;

use unicode_normalization_alignments::UnicodeNormalization;

use crate::encoder::fast_bpe::is_nfc;

/// What `clean` does (`CleanOptions` in Python).
#[derive(Clone, Copy, Debug)]
pub struct CleanOptions {
    pub normalize: bool,
    pub filter: bool,
    pub min_line_chars: usize,
    pub min_doc_chars: usize,
    /// Keep a document that is empty or only whitespace (the reading alone, as a tokenizer's
    /// training counts it), instead of dropping it.
    pub keep_empty: bool,
}

/// What `clean` did, counted as `CleanStats` in Python counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanStats {
    pub unicode_normalized: u64,
    pub whitespace_cleaned: u64,
    pub short_lines_dropped: u64,
    pub dropped_too_short: u64,
    pub dropped_empty: u64,
}

impl CleanStats {
    /// These counts and `other`'s.
    pub fn plus(mut self, other: CleanStats) -> CleanStats {
        self.unicode_normalized += other.unicode_normalized;
        self.whitespace_cleaned += other.whitespace_cleaned;
        self.short_lines_dropped += other.short_lines_dropped;
        self.dropped_too_short += other.dropped_too_short;
        self.dropped_empty += other.dropped_empty;
        self
    }
}

/// One document cleaned: `None` when it is dropped (counted by reason in `stats`).
pub fn clean<'t>(
    text: &'t str,
    options: &CleanOptions,
    stats: &mut CleanStats,
) -> Option<Cow<'t, str>> {
    let mut text = Cow::Borrowed(text);
    if options.normalize {
        text = normalize(text, stats);
    }
    if options.filter {
        text = drop_short_lines(text, options.min_line_chars, stats);
    }
    if !options.keep_empty && text.chars().all(is_python_space) {
        stats.dropped_empty += 1;
        return None;
    }
    // A character takes at most four bytes: a long text is long enough without counting.
    if options.filter
        && text.len() / 4 < options.min_doc_chars
        && text.chars().count() < options.min_doc_chars
    {
        stats.dropped_too_short += 1;
        return None;
    }
    Some(text)
}

/// Python's `str.isspace`: Unicode's White_Space, and the information separators
/// U+001C–U+001F (bidirectional class B or S).
pub fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn is_trailing_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{a0}' | '\u{3000}')
}

fn python_strip(text: &str) -> &str {
    text.trim_matches(is_python_space)
}

fn normalize<'t>(text: Cow<'t, str>, stats: &mut CleanStats) -> Cow<'t, str> {
    let text = if text.is_ascii() || is_nfc(&text) {
        text
    } else {
        let composed: String = text.nfc().map(|(c, _)| c).collect();
        if composed == *text {
            text
        } else {
            stats.unicode_normalized += 1;
            Cow::Owned(composed)
        }
    };
    let cleaned = whitespace_cleaned(&text);
    match cleaned {
        Some(cleaned) if cleaned != *text => {
            stats.whitespace_cleaned += 1;
            Cow::Owned(cleaned)
        }
        _ => text,
    }
}

/// The whitespace clean-up of `text`, or `None` when it changes nothing (the common case,
/// found without building a new string). One pass over the bytes: every character it removes
/// (a carriage return, a control, a trailing space) is whole, so the result stays UTF-8.
fn whitespace_cleaned(text: &str) -> Option<String> {
    if !needs_whitespace_work(text) {
        return None;
    }
    let bytes = text.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    // Line ends since the last line that kept a character: at most two are written, before
    // the next such line (runs of three or more become two). A line's newlines are written
    // with its first character and taken back if trimming leaves it empty.
    let mut pending = 0usize;
    let mut before_newlines = 0usize;
    let mut line_start = 0usize;
    let mut started = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\n' || b == b'\r' {
            trim_trailing_spaces(&mut out, line_start);
            if out.len() == line_start {
                out.truncate(before_newlines);
                pending += 1;
            } else {
                pending = 1;
            }
            started = false;
            line_start = out.len();
            before_newlines = out.len();
            // "\r\n" is one line end
            i += if b == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
                2
            } else {
                1
            };
            continue;
        }
        let removed = match b {
            0x7F => 1,
            0x00..=0x1F if b != b'\t' => 1,
            0xC2 if matches!(bytes.get(i + 1), Some(0x80..=0x9F)) => 2,
            _ => 0,
        };
        if removed > 0 {
            i += removed;
            continue;
        }
        if !started {
            before_newlines = out.len();
            out.extend(std::iter::repeat_n(b'\n', pending.min(2)));
            line_start = out.len();
            started = true;
        }
        out.push(b);
        i += 1;
    }
    trim_trailing_spaces(&mut out, line_start);
    if out.len() == line_start {
        out.truncate(before_newlines);
    }
    let cleaned = String::from_utf8(out)
        .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned());
    let stripped = python_strip(&cleaned);
    Some(if stripped.len() == cleaned.len() {
        cleaned
    } else {
        stripped.to_string()
    })
}

/// Remove the spaces, tabs, U+00A0 and U+3000 that end `out` after `line_start`.
fn trim_trailing_spaces(out: &mut Vec<u8>, line_start: usize) {
    loop {
        let line = &out[line_start..];
        let cut = match line {
            [.., b' ' | b'\t'] => 1,
            [.., 0xC2, 0xA0] => 2,
            [.., 0xE3, 0x80, 0x80] => 3,
            _ => return,
        };
        out.truncate(out.len() - cut);
    }
}

/// Whether the whitespace clean-up would change `text`: a few vectorised passes over its
/// bytes, where the clean-up itself makes a new string.
fn needs_whitespace_work(text: &str) -> bool {
    let bytes = text.as_bytes();
    if has_control_byte(bytes)
        || text.starts_with(is_python_space)
        || text.ends_with(is_python_space)
    {
        return true;
    }
    // The C1 controls, U+0080..U+009F: 0xC2 then 0x80..0x9F.
    if memchr::memchr_iter(0xC2, bytes).any(|i| matches!(bytes.get(i + 1), Some(0x80..=0x9F))) {
        return true;
    }
    // A space before a newline, or three newlines in a row.
    memchr::memchr_iter(b'\n', bytes)
        .any(|i| text[..i].ends_with(is_trailing_space) || bytes.get(i + 1..i + 3) == Some(b"\n\n"))
}

/// Whether `bytes` holds a control but tab and newline (carriage returns included) or DEL:
/// UTF-8 uses no byte below 0x80 inside a longer character. Tested 32 bytes at a time without
/// a branch per byte, so that the compiler vectorises it.
fn has_control_byte(bytes: &[u8]) -> bool {
    let control = |b: u8| (b < 0x20) & (b != b'\t') & (b != b'\n') | (b == 0x7F);
    let mut chunks = bytes.chunks_exact(32);
    let found = chunks
        .by_ref()
        .any(|chunk| chunk.iter().fold(false, |seen, &b| seen | control(b)));
    found || chunks.remainder().iter().any(|&b| control(b))
}

fn drop_short_lines<'t>(
    text: Cow<'t, str>,
    minimum: usize,
    stats: &mut CleanStats,
) -> Cow<'t, str> {
    if minimum <= 1 {
        return text;
    }
    let short = |line: &str| is_short_line(line, minimum);
    let dropped = lines(&text).filter(|line| short(line)).count();
    if dropped == 0 {
        return text;
    }
    stats.short_lines_dropped += dropped as u64;
    let kept: Vec<&str> = lines(&text).filter(|line| !short(line)).collect();
    Cow::Owned(python_strip(&kept.join("\n")).to_string())
}

/// The `\n`-separated lines of `text` (as `str::split('\n')`, found with the vectorised
/// `memchr`).
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut start = 0;
    memchr::memchr_iter(b'\n', text.as_bytes())
        .chain(std::iter::once(text.len()))
        .map(move |end| {
            let line = &text[start..end];
            start = end + 1;
            line
        })
}

/// A line that is not blank and has fewer than `minimum` characters that are not whitespace.
/// Counting stops at `minimum`, and ASCII is judged by the byte: a line of real text is known
/// long within a few bytes.
fn is_short_line(line: &str, minimum: usize) -> bool {
    let mut visible = 0;
    for (i, &b) in line.as_bytes().iter().enumerate() {
        if b >= 0x80 {
            visible += line[i..]
                .chars()
                .filter(|&c| !is_python_space(c))
                .take(minimum - visible)
                .count();
            break;
        }
        // Python's ASCII whitespace: \t \n \v \f \r, the separators 0x1C-0x1F, the space.
        if !matches!(b, b'\t'..=b'\r' | 0x1C..=0x20) {
            visible += 1;
            if visible >= minimum {
                return false;
            }
        }
    }
    visible > 0 && visible < minimum
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: CleanOptions = CleanOptions {
        normalize: true,
        filter: true,
        min_line_chars: 2,
        min_doc_chars: 20,
        keep_empty: false,
    };

    fn cleaned(text: &str, options: &CleanOptions) -> (Option<String>, CleanStats) {
        let mut stats = CleanStats::default();
        let kept = clean(text, options, &mut stats).map(Cow::into_owned);
        (kept, stats)
    }

    #[test]
    fn each_step_does_what_the_python_one_does() {
        let text =
            "  Cafe\u{301} au lait\r\n\r\nline two\t \u{3000}\n\n\n\nx\nthe end\u{1}, really  ";
        let (kept, stats) = cleaned(text, &DEFAULTS);
        assert_eq!(
            kept.as_deref(),
            Some("Caf\u{e9} au lait\n\nline two\n\nthe end, really")
        );
        assert_eq!(stats.unicode_normalized, 1);
        assert_eq!(stats.whitespace_cleaned, 1);
        assert_eq!(stats.short_lines_dropped, 1);
    }

    #[test]
    fn untouched_text_is_borrowed_and_drops_are_counted() {
        let mut stats = CleanStats::default();
        let text = "a clean document of enough characters";
        assert!(matches!(
            clean(text, &DEFAULTS, &mut stats),
            Some(Cow::Borrowed(_))
        ));
        assert_eq!(stats, CleanStats::default());
        assert_eq!(cleaned(" \u{1c}\u{3000}\n", &DEFAULTS).1.dropped_empty, 1);
        assert_eq!(cleaned("too short", &DEFAULTS).1.dropped_too_short, 1);
        let off = CleanOptions {
            normalize: false,
            filter: false,
            ..DEFAULTS
        };
        assert_eq!(cleaned("  x\r\n", &off).0.as_deref(), Some("  x\r\n"));
        let reading_alone = CleanOptions {
            keep_empty: true,
            ..off
        };
        assert_eq!(
            cleaned(" \n", &reading_alone),
            (Some(" \n".into()), CleanStats::default())
        );
        assert_eq!(cleaned("\u{1f}", &off).1.dropped_empty, 1);
    }
}
