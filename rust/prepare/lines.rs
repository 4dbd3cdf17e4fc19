//! `--dedup line` (MyPT's mode): exact lines across the corpus. The first occurrence of a line
//! is kept, every later one is dropped; a document left without a line is dropped.
//!
//! Lines are the cleaned document's `\n`-separated lines. A blank line (only whitespace, as
//! Python's `str.isspace` counts it) is never a duplicate: it separates paragraphs. A document
//! whose lines are all kept is unchanged; one that lost a line is rebuilt from its kept lines,
//! with one empty line between two kept lines that a blank line separated, and none at either
//! end.
//!
//! The decision needs every earlier line, so it is made by the caller in document order
//! (`seen.rs` or the sorted runs of `data_io/prepare/dedup.py`) from the hashes this module
//! gives (xxh3, 128 bits: lines are short, and a folder's line hashes never meet BLAKE2b's
//! document hashes); then `keep_lines` rebuilds each document from the verdicts.

use std::borrow::Cow;

use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_128;

use super::clean::is_python_space;
use crate::error::Error;

/// The hash of one line, as (high, low) halves.
pub fn line_hash(line: &str) -> [u64; 2] {
    let hash = xxh3_128(line.as_bytes());
    [(hash >> 64) as u64, hash as u64]
}

fn is_blank(line: &str) -> bool {
    line.chars().all(is_python_space)
}

/// The hashes of `text`'s lines that are not blank, in order.
pub fn line_hashes(text: &str) -> Vec<[u64; 2]> {
    text.split('\n')
        .filter(|line| !is_blank(line))
        .map(line_hash)
        .collect()
}

/// `text` with only the lines `keep` keeps (one verdict per line that is not blank, in order):
/// itself when every line is kept, `None` when none is.
pub fn keep_lines<'t>(text: &'t str, keep: &[bool]) -> Option<Cow<'t, str>> {
    if keep.iter().all(|&kept| kept) {
        return (!keep.is_empty()).then_some(Cow::Borrowed(text));
    }
    let mut rebuilt = String::with_capacity(text.len());
    let mut verdicts = keep.iter();
    let mut blank_since_kept = false;
    for line in text.split('\n') {
        if is_blank(line) {
            blank_since_kept = true;
            continue;
        }
        if !verdicts.next().copied().unwrap_or(false) {
            continue;
        }
        if !rebuilt.is_empty() {
            rebuilt.push_str(if blank_since_kept { "\n\n" } else { "\n" });
        }
        rebuilt.push_str(line);
        blank_since_kept = false;
    }
    (!rebuilt.is_empty()).then_some(Cow::Owned(rebuilt))
}

/// Documents back to back as one UTF-8 buffer, with their line hashes: what pass 1 of
/// `--dedup line` gives for a batch (and spools when the decision waits for the whole run).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LineBatch {
    pub text: Vec<u8>,
    /// Document `i` is `text[offsets[i]..offsets[i + 1]]`.
    pub offsets: Vec<i64>,
    /// The hashes of every document's lines that are not blank, document after document.
    pub hashes: Vec<[u64; 2]>,
    /// How many of `hashes` each document has.
    pub line_counts: Vec<i64>,
}

impl LineBatch {
    /// The documents' text and line hashes, hashed on the caller's rayon pool.
    pub fn new<S: AsRef<str> + Sync>(documents: &[S]) -> Self {
        let per_document: Vec<Vec<[u64; 2]>> = documents
            .par_iter()
            .map(|text| line_hashes(text.as_ref()))
            .collect();
        let bytes = documents.iter().map(|t| t.as_ref().len()).sum();
        let mut batch = LineBatch {
            text: Vec::with_capacity(bytes),
            offsets: Vec::with_capacity(documents.len() + 1),
            hashes: Vec::with_capacity(per_document.iter().map(Vec::len).sum()),
            line_counts: Vec::with_capacity(documents.len()),
        };
        batch.offsets.push(0);
        for (text, hashes) in documents.iter().zip(per_document) {
            batch.text.extend_from_slice(text.as_ref().as_bytes());
            batch.offsets.push(batch.text.len() as i64);
            batch.line_counts.push(hashes.len() as i64);
            batch.hashes.extend(hashes);
        }
        batch
    }
}

/// Every document of `text` (cut at `offsets`) rebuilt from the verdicts `keep` on its lines
/// (`line_counts[i]` of them for document `i`), on the caller's rayon pool: `None` for a
/// document left without a line. The arrays come from a spool: they are checked, not trusted.
pub fn keep_all<'t>(
    text: &'t [u8],
    offsets: &[i64],
    line_counts: &[i64],
    keep: &[bool],
) -> Result<Vec<Option<Cow<'t, str>>>, Error> {
    let bad = |what: String| Error::Input(format!("line dedup: {what}"));
    if offsets.len() != line_counts.len() + 1 {
        return Err(bad(format!(
            "{} offsets for {} documents (one more than the documents is needed)",
            offsets.len(),
            line_counts.len()
        )));
    }
    let mut starts = Vec::with_capacity(line_counts.len());
    let mut first_line = 0usize;
    for (i, &count) in line_counts.iter().enumerate() {
        let (start, end) = (offsets[i], offsets[i + 1]);
        if start < 0 || end < start || end as u64 > text.len() as u64 || count < 0 {
            return Err(bad(format!(
                "document {i}: bytes {start}..{end} of {} or {count} lines is out of range",
                text.len()
            )));
        }
        starts.push(first_line);
        first_line += count as usize;
    }
    if first_line != keep.len() {
        return Err(bad(format!(
            "{} verdicts for {first_line} lines",
            keep.len()
        )));
    }
    (0..line_counts.len())
        .into_par_iter()
        .map(|i| {
            let bytes = &text[offsets[i] as usize..offsets[i + 1] as usize];
            let document = std::str::from_utf8(bytes)
                .map_err(|e| bad(format!("document {i} is not UTF-8 ({e})")))?;
            let verdicts = &keep[starts[i]..starts[i] + line_counts[i] as usize];
            Ok(keep_lines(document, verdicts))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_lines_are_not_hashed_and_equal_lines_hash_equal() {
        let hashes = line_hashes("a line\n\n  \nanother\na line");
        assert_eq!(hashes.len(), 3);
        assert_eq!(hashes[0], hashes[2]);
        assert_ne!(hashes[0], hashes[1]);
        assert!(line_hashes(" \u{3000}\n").is_empty());
    }

    #[test]
    fn a_document_keeps_its_text_unless_a_line_is_dropped() {
        let text = "first\n\nsecond\nthird\n\n\nfourth";
        assert!(matches!(
            keep_lines(text, &[true; 4]),
            Some(Cow::Borrowed(t)) if t == text
        ));
        // Blank runs collapse to one empty line between kept lines, none at the ends.
        assert_eq!(
            keep_lines(text, &[true, false, true, true]).as_deref(),
            Some("first\n\nthird\n\nfourth")
        );
        assert_eq!(
            keep_lines(text, &[false, false, false, true]).as_deref(),
            Some("fourth")
        );
        assert_eq!(
            keep_lines(text, &[true, true, false, false]).as_deref(),
            Some("first\n\nsecond")
        );
        assert_eq!(keep_lines(text, &[false; 4]), None);
        assert_eq!(keep_lines("\n \n", &[]), None);
    }

    #[test]
    fn a_batch_round_trips_through_its_buffer() {
        let documents = ["one\ntwo", "two\n\nthree", "one"];
        let batch = LineBatch::new(&documents);
        assert_eq!(batch.offsets, [0, 7, 17, 20]);
        assert_eq!(batch.line_counts, [2, 2, 1]);
        let keep = [true, true, false, true, false];
        let kept = keep_all(&batch.text, &batch.offsets, &batch.line_counts, &keep)
            .expect("consistent arrays");
        assert_eq!(
            kept.iter().map(|k| k.as_deref()).collect::<Vec<_>>(),
            [Some("one\ntwo"), Some("three"), None]
        );
    }

    #[test]
    fn inconsistent_arrays_are_errors_not_panics() {
        let text = b"one\ntwo";
        for (offsets, counts, keep) in [
            (&[0, 7][..], &[2][..], &[true][..]),
            (&[0, 8][..], &[2][..], &[true, true][..]),
            (&[0][..], &[2][..], &[true, true][..]),
            (&[3, 1][..], &[1][..], &[true][..]),
            (&[0, 7][..], &[-1][..], &[][..]),
        ] {
            assert!(keep_all(text, offsets, counts, keep).is_err());
        }
        assert!(keep_all(b"\xff", &[0, 1], &[0], &[]).is_err());
    }
}
