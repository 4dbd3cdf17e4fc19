//! `prepare`'s raw text read whole and as a scale-out run's ranges (rust/prepare/split.rs,
//! cuts.rs, file.rs, rows.rs): docs/stages/prepare.md and scale.md promise that a file cut
//! into ranges at document boundaries gives exactly the documents of the whole file, in
//! order, with the same line numbers, for any unit size.
//!
//! The payload is a text; it is read whole (`FileFeed`, one read of 64 KiB at a time), then
//! as the ranges a plan cuts it into, each read as a unit reads it (`FileFeed::read` `limit`
//! bytes at a time, a batch taken whenever `batch` bytes of documents are ready, as
//! `raw_reading.py` does), stored one of three ways:
//! - plain (`ByteRange`): the targets are cut as `formats/ranges.py`'s `document_ranges` cuts
//!   an uncompressed file (a reference model of `_boundary_from` and `_first_lines`, written
//!   here), and `cuts::CutFinder`, fed the text in pieces of any size, must find the same
//!   cut and line for every target; each range `start..end` is read with its first line's
//!   number, and the file bytes it reads are `end - start`;
//! - gzip, one stream (`TextRange`): the ranges run between the cuts for the targets, found as
//!   each unit decompresses the text before it (`FileFeed::open_compressed`);
//! - zstd frames of byte 3's size (`PartsRange`): the ranges run between part starts, each read
//!   from its own parts (`frames::parts_in`, `FileFeed::open_parts` on one or two lanes), its
//!   lines and offsets made the file's by `Documents::rebase`.
//!
//! The documents of the ranges, joined in order, must be the whole's: the same bytes, line and
//! byte offset, and the same text from `rows::read` (JSONL field, carriage returns, bad UTF-8
//! replaced and counted, or the `--invalid-utf8 fail` error, word for word); so must their
//! count from `end_source`. A compressed file read whole gives the plain file's documents.
//!
//! Input: byte 0 picks the format (bits 0-1: text blocks, a document per line, JSONL, blocks),
//! the storage (bits 2-3: plain, gzip, zstd frames, plain), the batch size (bits 5-6: 1, 16,
//! 256 bytes or never) and the zstd frames' lanes (two when bits 4 and 7 are set, else one);
//! byte 1 the read limit (1..=256; 255: 64 KiB); byte 2 the number of targets (low 3 bits)
//! and the CutFinder's piece size (1..=32); byte 3 the zstd frames' size (1..=256 bytes of
//! text, at least a 64th of it); then two bytes a target; the rest is the text.
#![no_main]

use data_io_core::error::Error;
use data_io_core::prepare::cuts::CutFinder;
use data_io_core::prepare::file::{text_before, FileFeed};
use data_io_core::prepare::rows::{self, ReadOptions};
use data_io_core::prepare::split::{Documents, Format, SourceInfo};
use data_io_core::reader::{frames, Compression};
use libfuzzer_sys::fuzz_target;

mod common;
use common::scratch::write;

/// One document as read: its bytes, line, offset, and `rows::read`'s text with bad bytes
/// replaced and under `--invalid-utf8 fail` (each as its `Debug`, or the error's message).
#[derive(Debug, PartialEq, Eq)]
struct Doc {
    bytes: Vec<u8>,
    line: u64,
    offset: u64,
    replaced: String,
    failed: String,
}

/// The newlines and bytes before each part a range starts at, counted once per input
/// (`text_before` decodes them on a thread of its own: the target's main cost otherwise).
type Before = std::collections::BTreeMap<u64, (u64, u64)>;

/// The documents of a batch taken from the reader, their lines and offsets the file's.
fn collect(mut taken: Documents, before: &mut Before, out: &mut Vec<Doc>) {
    taken
        .rebase(|origin| match before.get(&origin.start) {
            Some(&counted) => Ok(counted),
            None => {
                let counted = text_before(origin, 1)?;
                before.insert(origin.start, counted);
                Ok::<_, Error>(counted)
            }
        })
        .expect("the text before a range's part is counted");
    let row = |fail_invalid: bool, entry| {
        let options = ReadOptions {
            text_field: "text".into(),
            fail_invalid,
        };
        match rows::read(&taken, entry, &options) {
            Ok(read) => format!("{:?} {}", read.row, read.invalid_lines),
            Err(error) => error.to_string(),
        }
    };
    for entry in &taken.entries {
        out.push(Doc {
            bytes: taken.bytes(entry).to_vec(),
            line: entry.line,
            offset: entry.offset,
            replaced: row(false, entry),
            failed: row(true, entry),
        });
    }
}

/// How a unit reads: `limit` bytes a read, a batch taken at `batch` bytes ready.
#[derive(Clone, Copy)]
struct Reading {
    format: Format,
    compressed: bool,
    limit: usize,
    batch: usize,
}

/// The documents `open` reads (a source whose first line is `first_line`), their count by
/// `end_source`, and the file bytes read.
fn read(
    reading: Reading,
    first_line: u64,
    before: &mut Before,
    open: impl FnOnce() -> Result<FileFeed, Error>,
) -> (Vec<Doc>, u64, u64) {
    let mut docs = Documents::new();
    docs.begin_source(SourceInfo {
        name: "input".into(),
        format: reading.format,
        compressed: reading.compressed,
        first_line,
        origin: None,
    });
    let mut feed = open().expect("a file written here opens");
    docs.set_origin(feed.origin().cloned());
    let mut out = Vec::new();
    while feed
        .read(&mut docs, reading.limit)
        .expect("a file written here reads")
        > 0
    {
        if docs.ready_bytes() >= reading.batch {
            collect(docs.take(), before, &mut out);
        }
    }
    let count = docs.end_source();
    collect(docs.take(), before, &mut out);
    (out, count, feed.file_bytes_read())
}

/// Python's `str.isspace` of one character (Unicode's White_Space and U+001C..U+001F).
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `ranges._is_blank`: a line (with its newline) that is UTF-8 and only whitespace.
fn blank_line(line: &[u8]) -> bool {
    std::str::from_utf8(line).is_ok_and(|s| !s.is_empty() && s.chars().all(py_space))
}

/// `ranges._boundary_from` on the whole text, and the number of the line starting there
/// (`_first_lines`); None where it gives None or the text's end (no cut).
fn boundary(text: &[u8], target: usize, blocks: bool) -> Option<(u64, u64)> {
    let newline_from = |from: usize| text[from..].iter().position(|&b| b == b'\n');
    let mut at = target - 1 + newline_from(target - 1)? + 1;
    if blocks {
        loop {
            if at >= text.len() {
                return None;
            }
            let end = newline_from(at).map_or(text.len(), |i| at + i + 1);
            let blank = blank_line(&text[at..end]);
            at = end;
            if blank {
                break;
            }
        }
    }
    let line = text[..at].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    (at < text.len()).then_some((at as u64, line))
}

/// `CutFinder` fed `text` in pieces of `piece` bytes; its cut, as `boundary` gives it.
fn finder_cut(text: &[u8], target: usize, blocks: bool, piece: usize) -> Option<(u64, u64)> {
    let mut finder = CutFinder::new(target as u64, blocks);
    let mut found = None;
    for (k, chunk) in text.chunks(piece).enumerate() {
        found = finder.feed(chunk, (k * piece) as u64);
    }
    found.filter(|&(at, _)| at < text.len() as u64)
}

fn gzip(text: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(text).expect("gzip");
    encoder.finish().expect("gzip")
}

fn zstd_frames(text: &[u8], chunk: usize) -> (Vec<u8>, usize) {
    let pieces: Vec<&[u8]> = if text.is_empty() {
        vec![text]
    } else {
        text.chunks(chunk).collect()
    };
    let file = pieces
        .iter()
        .flat_map(|piece| zstd::encode_all(*piece, 1).expect("zstd"))
        .collect();
    (file, pieces.len())
}

/// Each document's bytes, line and offset (what a compressed whole file is held to).
fn spans(docs: &[Doc]) -> Vec<(&[u8], u64, u64)> {
    docs.iter()
        .map(|d| (&d.bytes[..], d.line, d.offset))
        .collect()
}

fn check_joined(whole: &(Vec<Doc>, u64, u64), ranges: &[(Vec<Doc>, u64, u64)], what: &str) {
    let joined: Vec<&Doc> = ranges.iter().flat_map(|(docs, _, _)| docs).collect();
    let expected: Vec<&Doc> = whole.0.iter().collect();
    if joined != expected {
        let at = joined
            .iter()
            .zip(&expected)
            .position(|(a, b)| a != b)
            .unwrap_or(joined.len().min(expected.len()));
        panic!(
            "{what}: the ranges' documents differ from the whole file's at document {at} \
             ({} and {} documents): {:?} vs {:?}",
            joined.len(),
            expected.len(),
            joined.get(at),
            expected.get(at)
        );
    }
    let count: u64 = ranges.iter().map(|(_, count, _)| count).sum();
    assert_eq!(count, whole.1, "{what}: end_source's counts");
}

fuzz_target!(|data: &[u8]| {
    let Some((head, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let [mode, limit, targets_byte, chunk] = *head;
    let count = usize::from(targets_byte & 7);
    let Some((targets, text)) = rest.split_at_checked(2 * count) else {
        return;
    };
    let targets: Vec<usize> = targets
        .chunks(2)
        .map(|t| usize::from(u16::from_le_bytes([t[0], t[1]])))
        .collect();
    let format =
        [Format::Blocks, Format::Lines, Format::Jsonl, Format::Blocks][usize::from(mode & 3)];
    let blocks = format == Format::Blocks;
    let storage = (mode >> 2) & 3;
    // Two lanes cost a decoding thread and its buffers (about 20 ms): one input in four.
    let lanes = 1 + usize::from((mode >> 4) & (mode >> 7) & 1);
    let batch = [1, 16, 256, usize::MAX][usize::from((mode >> 5) & 3)];
    let limit = if limit == 255 {
        64 << 10
    } else {
        usize::from(limit) + 1
    };
    let piece = 1 + usize::from(targets_byte >> 3);
    let reading = |compressed| Reading {
        format,
        compressed,
        limit,
        batch,
    };
    let whole_reading = |compressed| Reading {
        limit: 64 << 10,
        batch: usize::MAX,
        ..reading(compressed)
    };
    let size = text.len();
    let mut before = Before::new();
    let plain = write("plain", text);
    let whole = read(whole_reading(false), 1, &mut before, || {
        FileFeed::open_compressed(plain.clone(), Compression::None, 0, None, format, 1)
    });
    assert_eq!(whole.2, size as u64, "the whole file is read");

    match storage {
        1 => {
            // A compressed stream: ranges of its text, between the cuts for the targets.
            let path = write("input.gz", &gzip(text));
            let whole_gz = read(whole_reading(true), 1, &mut before, || {
                FileFeed::open_compressed(path.clone(), Compression::Gzip, 0, None, format, 1)
            });
            assert!(spans(&whole_gz.0) == spans(&whole.0), "gzip read whole");
            let mut starts: Vec<u64> = targets
                .iter()
                .map(|&t| 1 + (t % (size + 4)) as u64)
                .collect();
            starts.sort_unstable();
            starts.insert(0, 0);
            let ranges: Vec<_> = starts
                .iter()
                .enumerate()
                .map(|(k, &start)| {
                    let end = starts.get(k + 1).copied();
                    read(reading(true), 1, &mut before, || {
                        FileFeed::open_compressed(
                            path.clone(),
                            Compression::Gzip,
                            start,
                            end,
                            format,
                            1,
                        )
                    })
                })
                .collect();
            check_joined(
                &whole_gz,
                &ranges,
                &format!("gzip {format:?} targets {starts:?}"),
            );
        }
        2 => {
            // A file of parts: ranges between part starts, each from its own parts.
            // At most 64 frames: each range decodes the frames before it (`text_before`).
            let chunk = (1 + usize::from(chunk)).max(size.div_ceil(64));
            let (file, frames_written) = zstd_frames(text, chunk);
            let path = write("input.zst", &file);
            let found = frames::parts(&path, Compression::Zstd)
                .expect("parts")
                .starts();
            assert_eq!(found.len(), frames_written, "the zstd frames written");
            let whole_zst = read(whole_reading(true), 1, &mut before, || {
                FileFeed::open_compressed(path.clone(), Compression::Zstd, 0, None, format, lanes)
            });
            assert!(
                spans(&whole_zst.0) == spans(&whole.0),
                "zstd frames read whole"
            );
            // `ranges.parts_ranges`: the first part start at or after each target.
            let mut offsets: Vec<u64> = targets.iter().map(|&t| (t % file.len()) as u64).collect();
            offsets.sort_unstable();
            let mut cuts = vec![0u64];
            for offset in offsets {
                let at = found.partition_point(|&s| s < offset);
                if at < found.len() && found[at] > *cuts.last().expect("a cut") {
                    cuts.push(found[at]);
                }
            }
            let ranges: Vec<_> = cuts
                .iter()
                .enumerate()
                .map(|(k, &start)| {
                    let end = cuts.get(k + 1).copied();
                    read(reading(true), 1, &mut before, || {
                        let parts = frames::parts_in(&path, Compression::Zstd, start, end)?;
                        FileFeed::open_parts(path.clone(), parts, start, end, format, lanes)
                    })
                })
                .collect();
            check_joined(
                &whole_zst,
                &ranges,
                &format!("zstd frames {format:?} cuts {cuts:?}"),
            );
        }
        _ => {
            // An uncompressed file: cut at document boundaries as the plan cuts it.
            let mut sorted: Vec<usize> = targets
                .iter()
                .filter(|_| size > 1)
                .map(|&t| 1 + t % (size - 1))
                .collect();
            sorted.sort_unstable();
            let mut cuts = vec![(0u64, 1u64)];
            for target in sorted {
                let expected = boundary(text, target, blocks);
                let found = finder_cut(text, target, blocks, piece);
                assert_eq!(
                    found, expected,
                    "CutFinder: target {target}, {format:?}, pieces of {piece}"
                );
                if target as u64 <= cuts.last().expect("a cut").0 {
                    continue;
                }
                let Some(cut) = expected else { break };
                if cut.0 > cuts.last().expect("a cut").0 {
                    cuts.push(cut);
                }
            }
            let ranges: Vec<_> = cuts
                .iter()
                .enumerate()
                .map(|(k, &(start, line))| {
                    let end = cuts.get(k + 1).map_or(size as u64, |c| c.0);
                    let range = read(reading(false), line, &mut before, || {
                        FileFeed::open_compressed(
                            plain.clone(),
                            Compression::None,
                            start,
                            Some(end),
                            format,
                            1,
                        )
                    });
                    assert_eq!(range.2, end - start, "file bytes read of {start}..{end}");
                    range
                })
                .collect();
            check_joined(&whole, &ranges, &format!("plain {format:?} cuts {cuts:?}"));
        }
    }
});
