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
    /// Documents the clean-up removed control characters from (NUL and the like): counted
    /// among `whitespace_cleaned` too, and on their own so that a user sees them.
    pub controls_removed: u64,
    pub short_lines_dropped: u64,
    pub dropped_too_short: u64,
    pub dropped_empty: u64,
}

impl CleanStats {
    /// These counts and `other`'s.
    pub fn plus(mut self, other: CleanStats) -> CleanStats {
        self.unicode_normalized += other.unicode_normalized;
        self.whitespace_cleaned += other.whitespace_cleaned;
        self.controls_removed += other.controls_removed;
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
    // The short lines counted by the normalisation's pass over the lines, when the text
    // left it as it was.
    let mut short_lines = None;
    let minimum = if options.filter {
        options.min_line_chars
    } else {
        0
    };
    if options.normalize {
        (text, short_lines) = normalize(text, minimum, stats);
    }
    if options.filter {
        text = drop_short_lines(text, options.min_line_chars, short_lines, stats);
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

/// NFC, then the whitespace clean-up; with the text left as it was by the clean-up, its
/// lines with fewer than `minimum` visible characters, counted on the way (see `line_scan`).
fn normalize<'t>(
    text: Cow<'t, str>,
    minimum: usize,
    stats: &mut CleanStats,
) -> (Cow<'t, str>, Option<usize>) {
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
    if let Some(short) = line_scan(&text, minimum) {
        return (text, Some(short));
    }
    match whitespace_cleaned(&text) {
        (cleaned, controls) if cleaned != *text => {
            stats.whitespace_cleaned += 1;
            stats.controls_removed += u64::from(controls);
            (Cow::Owned(cleaned), None)
        }
        _ => (text, None),
    }
}

/// The whitespace clean-up of `text` (`line_scan` finds, without building a string, the
/// common text it leaves as it is). A line at a time, each copied whole: only a line
/// holding a control is copied a byte at a time (every character removed, a carriage return,
/// a control or a trailing space, is whole, so the result stays UTF-8). With it, whether a
/// control was removed.
fn whitespace_cleaned(text: &str) -> (String, bool) {
    let bytes = text.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    // Line ends since the last line that kept a character: at most two are written before the
    // next such line (runs of three or more become two).
    let mut pending = 0usize;
    let mut without_controls = Vec::new();
    let mut removed_controls = false;
    // Most texts hold no control (a carriage return is one): their lines are not searched.
    let controls = has_control(bytes);
    let mut start = 0;
    loop {
        let (end, next) = match memchr::memchr2(b'\n', b'\r', &bytes[start..]) {
            Some(at) => {
                let end = start + at;
                // "\r\n" is one line end
                let crlf = bytes[end] == b'\r' && bytes.get(end + 1) == Some(&b'\n');
                (end, Some(end + if crlf { 2 } else { 1 }))
            }
            None => (bytes.len(), None),
        };
        let mut line = &bytes[start..end];
        if controls && has_control(line) {
            without_controls.clear();
            without_controls.extend_from_slice(line);
            remove_controls(&mut without_controls);
            removed_controls |= without_controls.len() < line.len();
            line = &without_controls;
        }
        let kept = trimmed_of_trailing_spaces(line);
        if kept.is_empty() {
            pending += 1;
        } else {
            out.extend(std::iter::repeat_n(b'\n', pending.min(2)));
            out.extend_from_slice(kept);
            pending = 1;
        }
        match next {
            Some(next) => start = next,
            None => break,
        }
    }
    let cleaned = String::from_utf8(out)
        .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned());
    let stripped = python_strip(&cleaned);
    let cleaned = if stripped.len() == cleaned.len() {
        cleaned
    } else {
        stripped.to_string()
    };
    (cleaned, removed_controls)
}

/// Remove from `line` (no line end in it) the controls the clean-up removes: C0 but tab,
/// DEL, and the C1 controls (`0xC2` then `0x80..=0x9F`).
fn remove_controls(line: &mut Vec<u8>) {
    let mut kept = 0;
    let mut i = 0;
    while i < line.len() {
        let b = line[i];
        let removed = match b {
            0x7F => 1,
            0x00..=0x1F if b != b'\t' => 1,
            0xC2 if matches!(line.get(i + 1), Some(0x80..=0x9F)) => 2,
            _ => 0,
        };
        if removed > 0 {
            i += removed;
            continue;
        }
        line[kept] = b;
        kept += 1;
        i += 1;
    }
    line.truncate(kept);
}

/// `line` without the spaces, tabs, U+00A0 and U+3000 that end it.
fn trimmed_of_trailing_spaces(mut line: &[u8]) -> &[u8] {
    loop {
        line = match line {
            [rest @ .., b' ' | b'\t'] => rest,
            [rest @ .., 0xC2, 0xA0] => rest,
            [rest @ .., 0xE3, 0x80, 0x80] => rest,
            _ => return line,
        };
    }
}

/// `None` when the whitespace clean-up would change `text`; else its lines (`\n`-separated)
/// that are short (`is_short_line`, with `minimum` > 1; else none counted). Vectorised passes
/// for the controls, then one pass over the line ends, where a space before a newline or three
/// newlines in a row mean work, and each line is judged short or not while it is in cache.
fn line_scan(text: &str, minimum: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    if has_control(bytes) || text.starts_with(is_python_space) || text.ends_with(is_python_space) {
        return None;
    }
    let counted = minimum > 1;
    let mut short = 0;
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', bytes) {
        if text[..end].ends_with(is_trailing_space) || bytes.get(end + 1..end + 3) == Some(b"\n\n")
        {
            return None;
        }
        short += usize::from(counted && is_short_line(&text[start..end], minimum));
        start = end + 1;
    }
    short += usize::from(counted && is_short_line(&text[start..], minimum));
    Some(short)
}

/// Whether `bytes` holds a C1 control, U+0080..U+009F: 0xC2 then 0x80..0x9F.
fn has_c1_control(bytes: &[u8]) -> bool {
    memchr::memchr_iter(0xC2, bytes).any(|i| matches!(bytes.get(i + 1), Some(0x80..=0x9F)))
}

/// Whether `bytes` holds a control the clean-up removes or a carriage return: C0 but tab and
/// newline, DEL, or a C1 control. One pass 32 bytes at a time without a branch per byte (so
/// that the compiler vectorises it) finds the C0 controls and DEL (UTF-8 uses no byte below
/// 0x80 inside a longer character) and whether a C1 control's lead byte 0xC2 is there at all.
fn has_control(bytes: &[u8]) -> bool {
    let control = |b: u8| (b < 0x20) & (b != b'\t') & (b != b'\n') | (b == 0x7F);
    let flags = |(control_seen, lead_seen): (bool, bool), &b: &u8| {
        (control_seen | control(b), lead_seen | (b == 0xC2))
    };
    let mut chunks = bytes.chunks_exact(32);
    let mut lead = false;
    for chunk in chunks.by_ref() {
        let (control_seen, lead_seen) = chunk.iter().fold((false, false), flags);
        if control_seen {
            return true;
        }
        lead |= lead_seen;
    }
    let (control_seen, lead_seen) = chunks.remainder().iter().fold((false, false), flags);
    control_seen || ((lead | lead_seen) && has_c1_control(bytes))
}

/// `text` without its short lines (`counted`: how many there are, when known already).
fn drop_short_lines<'t>(
    text: Cow<'t, str>,
    minimum: usize,
    counted: Option<usize>,
    stats: &mut CleanStats,
) -> Cow<'t, str> {
    if minimum <= 1 {
        return text;
    }
    let short = |line: &str| is_short_line(line, minimum);
    let dropped = counted.unwrap_or_else(|| lines(&text).filter(|line| short(line)).count());
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
        assert_eq!(stats.controls_removed, 1);
        assert_eq!(stats.short_lines_dropped, 1);
    }

    #[test]
    fn control_characters_removed_are_counted_apart_from_spaces() {
        let nul = "a document\u{0} with a NUL and a C1 \u{85} control";
        let (kept, stats) = cleaned(nul, &DEFAULTS);
        assert_eq!(
            kept.as_deref(),
            Some("a document with a NUL and a C1  control")
        );
        assert_eq!((stats.whitespace_cleaned, stats.controls_removed), (1, 1));
        // Carriage returns and trailing spaces are clean-up, not controls removed.
        let spaces = "a document with line ends\r\nand trailing spaces   \n\n\n\nend";
        let (_, stats) = cleaned(spaces, &DEFAULTS);
        assert_eq!((stats.whitespace_cleaned, stats.controls_removed), (1, 0));
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
