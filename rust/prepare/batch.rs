//! A batch of documents (`split.rs`) read, cleaned and hashed on the caller's rayon pool: what
//! `prepare` does to each batch before encoding it, in one pass of the pool (each chunk of
//! documents read, cleaned and hashed together) and no Python object per document.
//!
//! Rows that only Python reads (`rows.rs`'s `Deferred`) are handed to `resolve`, in order;
//! the first error in read order is the one reported, as when Python read the whole file.

use std::borrow::Cow;

use rayon::prelude::*;

use super::clean::{clean, CleanOptions, CleanStats};
use super::hash::{hash, hash_chunk, LANES_PER_CALL};
use super::near::MinHasher;
use super::rows::{read, ReadOptions, Row};
use super::split::{Documents, Entry};
use crate::error::Error;

/// The counts of the reading step, as Python's `ReadStats` counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadCounts {
    pub documents: u64,
    /// Characters (code points) of the documents as read, before cleaning.
    pub text_chars: u64,
    pub invalid_utf8_lines: u64,
}

/// The documents of a batch that survive the cleaning, in order, with their hashes (the
/// de-duplication's and the split's), and what each step counted.
pub struct Prepared<'a> {
    pub kept: Vec<Cow<'a, str>>,
    pub hashes: Vec<[u64; 2]>,
    /// With `near`: each kept document's LSH bands (band hash, band number), back to back.
    pub bands: Vec<[u64; 2]>,
    pub read: ReadCounts,
    pub clean: CleanStats,
}

impl Prepared<'_> {
    /// Keep only the documents where `keep` (one flag per kept document, in order); how many
    /// were dropped.
    pub fn keep_only(&mut self, keep: &[bool]) -> u64 {
        let per_document = if self.hashes.is_empty() {
            0
        } else {
            self.bands.len() / self.hashes.len()
        };
        let mut flags = keep.iter();
        self.kept.retain(|_| *flags.next().unwrap_or(&false));
        let mut flags = keep.iter();
        self.hashes.retain(|_| *flags.next().unwrap_or(&false));
        if per_document > 0 {
            let mut at = 0;
            self.bands.retain(|_| {
                let kept = keep.get(at / per_document).copied().unwrap_or(false);
                at += 1;
                kept
            });
        }
        keep.iter().filter(|&&kept| !kept).count() as u64
    }
}

/// Read, clean and hash every document of `docs` (and band it, with `near`). `resolve` reads a
/// row that only Python reads (`rows.rs`); its error, or the first document's error in order,
/// ends the batch.
pub fn prepare<'a, E: From<Error> + Send>(
    docs: &'a Documents,
    read_options: &ReadOptions,
    clean_options: &CleanOptions,
    near: Option<&MinHasher>,
    mut resolve: impl FnMut(&str, &Entry) -> Result<String, E>,
) -> Result<Prepared<'a>, E> {
    // One pass per document while its text is in cache: read, clean (and band). A row
    // only Python reads waits for the serial pass below, in order.
    let finish = |text: Cow<'a, str>| -> Cleaned<'a> {
        let chars = char_count(&text);
        let mut stats = CleanStats::default();
        let kept = match text {
            Cow::Borrowed(text) => clean(text, clean_options, &mut stats),
            Cow::Owned(text) => {
                // An unchanged text keeps its own string (no copy); a changed one is new.
                let changed = clean(&text, clean_options, &mut stats).map(|kept| match kept {
                    Cow::Borrowed(_) => None,
                    Cow::Owned(changed) => Some(changed),
                });
                changed.map(|changed| Cow::Owned(changed.unwrap_or(text)))
            }
        };
        let hashed = kept.map(|text| {
            let bands = near
                .map(|hasher| hasher.band_hashes(&text))
                .unwrap_or_default();
            // The digest is filled in with the chunk's (see below).
            (text, bands, [0; 2])
        });
        (chars, hashed, stats)
    };
    // A chunk at a time, its kept texts hashed together while they are in cache, a few in the
    // SIMD lanes at a time. Each chunk's rows stay in their own small vector (collected in
    // place, by index): one vector of every row grew by doubling and was copied once more into
    // place, megabytes of fresh pages a batch.
    let chunks: Vec<Vec<Result<(Step<'a>, u64), Error>>> = docs
        .entries
        .par_chunks(LANES_PER_CALL)
        .map(|chunk| {
            let mut rows: Vec<Result<(Step<'a>, u64), Error>> = chunk
                .iter()
                .map(|entry| {
                    let read = read(docs, entry, read_options)?;
                    let step = match read.row {
                        Row::Text(text) => Step::Done(finish(text)),
                        Row::Deferred(line) => Step::Deferred(line),
                    };
                    Ok((step, read.invalid_lines))
                })
                .collect();
            let mut digests = hash_chunk(rows.iter().filter_map(kept_text)).into_iter();
            for row in &mut rows {
                if let Ok((Step::Done((_, Some(kept), _)), _)) = row {
                    kept.2 = digests.next().unwrap_or_default();
                }
            }
            rows
        })
        .collect();
    let mut prepared = Prepared {
        kept: Vec::with_capacity(docs.entries.len()),
        hashes: Vec::with_capacity(docs.entries.len()),
        bands: Vec::new(),
        read: ReadCounts {
            documents: docs.entries.len() as u64,
            ..ReadCounts::default()
        },
        clean: CleanStats::default(),
    };
    // In read order: a row only Python reads is read here, and the first error ends the batch.
    for (row, entry) in chunks.into_iter().flatten().zip(&docs.entries) {
        let (step, invalid) = row?;
        prepared.read.invalid_utf8_lines += invalid;
        let (chars, kept, stats) = match step {
            Step::Done(done) => done,
            Step::Deferred(line) => {
                let (chars, kept, stats) = finish(Cow::Owned(resolve(&line, entry)?));
                let kept = kept.map(|(text, bands, _)| {
                    let digest = hash(&text);
                    (text, bands, digest)
                });
                (chars, kept, stats)
            }
        };
        prepared.read.text_chars += chars;
        prepared.clean = prepared.clean.plus(stats);
        if let Some((text, bands, digest)) = kept {
            prepared.kept.push(text);
            prepared.bands.extend(bands);
            prepared.hashes.push(digest);
        }
    }
    Ok(prepared)
}

/// A document after cleaning: its characters as read, its text, bands and digest when it is
/// kept, and what the cleaning counted.
type Cleaned<'a> = (
    u64,
    Option<(Cow<'a, str>, Vec<[u64; 2]>, [u64; 2])>,
    CleanStats,
);

/// The text of a row read and kept in the parallel pass.
fn kept_text<'r>(row: &'r Result<(Step<'_>, u64), Error>) -> Option<&'r str> {
    match row {
        Ok((Step::Done((_, Some((text, _, _)), _)), _)) => Some(text),
        _ => None,
    }
}

/// A document after the parallel pass: finished, or a row Python must read first.
enum Step<'a> {
    Done(Cleaned<'a>),
    Deferred(Cow<'a, str>),
}

/// Characters in `text`: std's count, a word of bytes at a time (a filter over the bytes was
/// vectorised four bytes at a time, and took a tenth of the batch's reading and cleaning).
fn char_count(text: &str) -> u64 {
    text.chars().count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prepare::split::{Format, SourceInfo};

    /// A batch of one JSONL source's `bytes`.
    fn jsonl(name: &str, bytes: &[u8]) -> Documents {
        let mut docs = Documents::new();
        docs.begin_source(SourceInfo {
            name: name.into(),
            format: Format::Jsonl,
            compressed: false,
            first_line: 1,
            origin: None,
        });
        docs.feed(bytes, 0);
        docs.end_source();
        docs
    }

    fn text_field() -> ReadOptions {
        ReadOptions {
            text_field: "text".into(),
            fail_invalid: true,
        }
    }

    /// `prepare`'s default cleaning.
    fn cleaning() -> CleanOptions {
        CleanOptions {
            normalize: true,
            filter: true,
            min_line_chars: 2,
            min_doc_chars: 20,
            keep_empty: false,
        }
    }

    #[test]
    fn a_batch_is_read_cleaned_and_hashed_in_order_with_python_reading_its_odd_rows() {
        let lines = [
            r#"{"text": "the first document, long enough"}"#,
            r#"{"text": "short"}"#,
            r#"{"text": "caf\u00e9 au lait, a row with NaN", "v": NaN}"#,
            r#"{"text": "  the last document of the batch  "}"#,
        ];
        let docs = jsonl("rows.jsonl", lines.join("\n").as_bytes());
        let (options, clean) = (text_field(), cleaning());
        let mut asked = vec![];
        let prepared = prepare::<Error>(&docs, &options, &clean, None, |line, entry| {
            asked.push((line.to_owned(), entry.line));
            Ok("caf\u{e9} au lait, a row with NaN".to_owned())
        })
        .expect("prepared");
        assert_eq!(asked, [(lines[2].to_owned(), 3)]);
        assert_eq!(
            prepared.kept,
            [
                "the first document, long enough",
                "caf\u{e9} au lait, a row with NaN",
                "the last document of the batch"
            ]
        );
        // The Python row's digest is made apart from its chunk's: each is its own text's.
        let digests: Vec<[u64; 2]> = prepared.kept.iter().map(|text| hash(text)).collect();
        assert_eq!(prepared.hashes, digests);
        assert_eq!(prepared.read.documents, 4);
        assert_eq!(prepared.read.text_chars, 31 + 5 + 28 + 34);
        assert_eq!(prepared.clean.dropped_too_short, 1);
        assert_eq!(prepared.clean.whitespace_cleaned, 1);
    }

    #[test]
    fn each_kept_document_has_its_own_digest_across_chunks() {
        // Several chunks of `LANES_PER_CALL`, with documents dropped here and there (too
        // short, or blank once cleaned) so that a chunk's digests must skip them.
        let texts: Vec<String> = (0..3 * LANES_PER_CALL + 5)
            .map(|i| match i % 7 {
                0 => "tiny".to_owned(),
                3 => "   ".to_owned(),
                _ => format!("document number {i}, {}", "word ".repeat(i % 40)),
            })
            .collect();
        let lines: Vec<String> = texts
            .iter()
            .map(|text| format!(r#"{{"text": "{text}"}}"#))
            .collect();
        let docs = jsonl("rows.jsonl", lines.join("\n").as_bytes());
        let (options, clean) = (text_field(), cleaning());
        let prepared = prepare::<Error>(&docs, &options, &clean, None, |_, _| Ok(String::new()))
            .expect("prepared");
        assert!(prepared.kept.len() < texts.len() && prepared.kept.len() > 2 * LANES_PER_CALL);
        let digests: Vec<[u64; 2]> = prepared.kept.iter().map(|text| hash(text)).collect();
        assert_eq!(prepared.hashes, digests);
    }

    #[test]
    fn the_first_error_in_read_order_ends_the_batch() {
        let docs = jsonl("a.jsonl", b"{\"text\": 1}\n{\"text\": \"\xff\"}\n");
        let options = text_field();
        let clean = CleanOptions {
            normalize: false,
            filter: false,
            min_line_chars: 0,
            min_doc_chars: 0,
            keep_empty: false,
        };
        let error = prepare::<Error>(&docs, &options, &clean, None, |_, entry| {
            Err(Error::Input(format!("row at line {}", entry.line)))
        })
        .err()
        .expect("fails");
        assert_eq!(error.to_string(), "row at line 1");
    }

    #[test]
    fn keep_only_drops_documents_with_their_hashes_and_bands() {
        let mut prepared = Prepared {
            kept: vec!["a".into(), "b".into(), "c".into()],
            hashes: vec![[1, 1], [2, 2], [3, 3]],
            bands: vec![[10, 0], [11, 1], [20, 0], [21, 1], [30, 0], [31, 1]],
            read: ReadCounts::default(),
            clean: CleanStats::default(),
        };
        assert_eq!(prepared.keep_only(&[true, false, true]), 1);
        assert_eq!(prepared.kept, ["a", "c"]);
        assert_eq!(prepared.hashes, [[1, 1], [3, 3]]);
        assert_eq!(prepared.bands, [[10, 0], [11, 1], [30, 0], [31, 1]]);
    }
}
