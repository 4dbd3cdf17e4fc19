//! `prepare`'s normalisation and filters (`prepare::clean`, rust/prepare/clean.rs), alone and
//! as a batch runs them (`prepare::batch::prepare`, with rows.rs's reading), against a
//! reference model written here from what `data_io/prepare/normalize.py` and
//! docs/stages/prepare.md state (the steps of `tests/prepare/clean_oracle.py`, in its order):
//! NFC (counted when it changes the text; the NFC of `tokenizers`' normalisation crate, as the
//! docs say); `\r\n` and `\r` become `\n`; the controls U+0000-U+0008, U+000B, U+000C,
//! U+000E-U+001F and U+007F-U+009F are removed (counted); spaces, tabs, U+00A0 and U+3000
//! ending a line are removed; runs of three or more newlines become two; the text is stripped
//! of Python's whitespace (counted as cleaned when any of this changed it); a line that is not
//! blank with fewer than `min_line_chars` non-space characters is dropped and the text
//! stripped again; a text left empty or whitespace (unless `keep_empty`), or shorter than
//! `min_doc_chars` characters, is dropped, counted by reason.
//!
//! Checks: never a panic; the text and every count are the model's; a text handed back
//! borrowed is the input itself (`batch.rs` keeps its own string then); with normalisation the
//! kept text has no control, no carriage return, no space ending a line, no whitespace at
//! either end; with the filters, no short line and at least `min_doc_chars` characters.
//! Batch mode: the bytes are cut into documents (text blocks or a document per line), and
//! `prepare` must keep, in order, the model's cleaning of each document as read (bad bytes
//! replaced by U+FFFD, a text line's carriage return before a newline removed), with its
//! BLAKE2b, the sum of the counts, the characters read and the lines holding bad bytes.
//!
//! Input: byte 0: normalize (bit 0), filter (bit 1), keep_empty (bit 2), batch mode (bit 3),
//! a document per line in the batch (bit 4); byte 1: `min_line_chars` (0..=5); byte 2:
//! `min_doc_chars` (0..=47); the rest is the text (invalid UTF-8 replaced by U+FFFD alone).
#![no_main]

use std::borrow::Cow;

use data_io_core::error::Error;
use data_io_core::prepare::batch::prepare;
use data_io_core::prepare::clean::{clean, CleanOptions, CleanStats};
use data_io_core::prepare::hash::hash;
use data_io_core::prepare::rows::ReadOptions;
use data_io_core::prepare::split::{Documents, Format, SourceInfo};
use libfuzzer_sys::fuzz_target;
use unicode_normalization_alignments::UnicodeNormalization;

/// Python's `str.isspace` of one character (Unicode's White_Space and U+001C..U+001F).
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The controls the clean-up removes.
fn removed_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

fn trailing_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{a0}' | '\u{3000}')
}

fn strip(text: &str) -> &str {
    text.trim_matches(py_space)
}

/// Non-space characters of `line`.
fn visible(line: &str) -> usize {
    line.chars().filter(|&c| !py_space(c)).count()
}

/// The model's normalisation: NFC, then the whitespace clean-up.
fn model_normalize(text: String, stats: &mut CleanStats) -> String {
    let composed: String = text.nfc().map(|(c, _)| c).collect();
    let text = if composed != text {
        stats.unicode_normalized += 1;
        composed
    } else {
        text
    };
    let mut cleaned = text.replace("\r\n", "\n").replace('\r', "\n");
    let without: String = cleaned.chars().filter(|&c| !removed_control(c)).collect();
    let controls = without != cleaned;
    cleaned = without;
    let trimmed: Vec<&str> = cleaned
        .split('\n')
        .map(|line| line.trim_end_matches(trailing_space))
        .collect();
    let joined = trimmed.join("\n");
    // Runs of three or more newlines become two.
    let mut collapsed = String::with_capacity(joined.len());
    let mut run = 0;
    for c in joined.chars() {
        if c == '\n' {
            run += 1;
            if run > 2 {
                continue;
            }
        } else {
            run = 0;
        }
        collapsed.push(c);
    }
    let cleaned = strip(&collapsed).to_string();
    if cleaned != text {
        stats.whitespace_cleaned += 1;
        stats.controls_removed += u64::from(controls);
    }
    cleaned
}

/// The model's whole cleaning of one document.
fn model(text: &str, options: &CleanOptions, stats: &mut CleanStats) -> Option<String> {
    let mut text = text.to_string();
    if options.normalize {
        text = model_normalize(text, stats);
    }
    if options.filter && options.min_line_chars > 1 {
        let short = |line: &str| visible(line) > 0 && visible(line) < options.min_line_chars;
        let lines: Vec<&str> = text.split('\n').collect();
        let kept: Vec<&str> = lines.iter().copied().filter(|l| !short(l)).collect();
        if kept.len() < lines.len() {
            stats.short_lines_dropped += (lines.len() - kept.len()) as u64;
            text = strip(&kept.join("\n")).to_string();
        }
    }
    if !options.keep_empty && text.chars().all(py_space) {
        stats.dropped_empty += 1;
        return None;
    }
    if options.filter && text.chars().count() < options.min_doc_chars {
        stats.dropped_too_short += 1;
        return None;
    }
    Some(text)
}

/// The invariants the docs state of a kept text.
fn check_kept(text: &str, options: &CleanOptions) {
    if options.normalize {
        assert!(
            !text.chars().any(removed_control),
            "a control kept: {text:?}"
        );
        assert!(!text.contains('\r'), "a carriage return kept: {text:?}");
        assert!(
            !text.split('\n').any(|line| line.ends_with(trailing_space)),
            "a space ending a line: {text:?}"
        );
        assert_eq!(strip(text), text, "whitespace at an end");
    }
    if options.filter {
        if options.min_line_chars > 1 {
            assert!(
                !text
                    .split('\n')
                    .any(|line| visible(line) > 0 && visible(line) < options.min_line_chars),
                "a short line kept: {text:?}"
            );
        }
        assert!(
            text.chars().count() >= options.min_doc_chars,
            "too short: {text:?}"
        );
    }
}

fn one(text: &str, options: &CleanOptions) {
    let mut stats = CleanStats::default();
    let kept = clean(text, options, &mut stats);
    let mut expected_stats = CleanStats::default();
    let expected = model(text, options, &mut expected_stats);
    if let Some(Cow::Borrowed(borrowed)) = &kept {
        assert!(
            borrowed.as_ptr() == text.as_ptr() && borrowed.len() == text.len(),
            "a borrowed text that is not the input"
        );
    }
    assert_eq!(kept.as_deref(), expected.as_deref(), "{text:?} {options:?}");
    assert_eq!(stats, expected_stats, "{text:?} {options:?}");
    assert!(stats.controls_removed <= stats.whitespace_cleaned);
    let dropped = stats.dropped_empty + stats.dropped_too_short;
    assert_eq!(dropped, u64::from(kept.is_none()));
    if let Some(kept) = kept {
        check_kept(&kept, options);
    }
}

/// The documents of `bytes` cut as `format`, read as rows.rs reads them (its own reference
/// here: per document, the lossy text with carriage returns before newlines removed in text
/// blocks, and the lines holding bad bytes).
fn batch(bytes: &[u8], format: Format, options: &CleanOptions) {
    let mut docs = Documents::new();
    docs.begin_source(SourceInfo {
        name: "input".into(),
        format,
        compressed: false,
        first_line: 1,
        origin: None,
    });
    docs.data.extend_from_slice(bytes);
    docs.scan_from(0, 0);
    docs.end_source();
    let read_options = ReadOptions {
        text_field: "text".into(),
        fail_invalid: false,
    };
    let prepared = prepare::<Error>(&docs, &read_options, options, None, |_, _| {
        panic!("no row of a text is left to Python")
    })
    .expect("a text with bad bytes replaced is read");
    let mut expected = Vec::new();
    let mut stats = CleanStats::default();
    let (mut chars, mut invalid) = (0u64, 0u64);
    for entry in &docs.entries {
        let span = docs.bytes(entry);
        invalid += span
            .split(|&b| b == b'\n')
            .filter(|line| std::str::from_utf8(line).is_err())
            .count() as u64;
        let mut text = String::from_utf8_lossy(span).into_owned();
        if format == Format::Blocks {
            text = text.replace("\r\n", "\n");
        }
        chars += text.chars().count() as u64;
        expected.extend(model(&text, options, &mut stats));
    }
    assert_eq!(prepared.kept, expected, "{options:?}");
    assert_eq!(prepared.clean, stats, "{options:?}");
    let hashes: Vec<[u64; 2]> = expected.iter().map(|t| hash(t)).collect();
    assert_eq!(prepared.hashes, hashes);
    assert_eq!(prepared.read.documents, docs.entries.len() as u64);
    assert_eq!(prepared.read.text_chars, chars);
    assert_eq!(prepared.read.invalid_utf8_lines, invalid);
}

fuzz_target!(|data: &[u8]| {
    let Some((&[flags, line_chars, doc_chars], rest)) = data.split_first_chunk::<3>() else {
        return;
    };
    let options = CleanOptions {
        normalize: flags & 1 != 0,
        filter: flags & 2 != 0,
        keep_empty: flags & 4 != 0,
        min_line_chars: usize::from(line_chars % 6),
        min_doc_chars: usize::from(doc_chars % 48),
    };
    if flags & 8 != 0 {
        let format = if flags & 16 != 0 {
            Format::Lines
        } else {
            Format::Blocks
        };
        batch(rest, format, &options);
    } else {
        one(&String::from_utf8_lossy(rest), &options);
    }
});
