//! The JSONL reader (`reader::RowReader`, rust/reader/jsonl.rs) over arbitrary bytes written to
//! a file: plain, gzip- or zstd-compressed by the target (valid streams of arbitrary text), the
//! raw bytes as a `.jsonl.gz` / `.jsonl.zst` (corrupt streams), and byte ranges of a plain file
//! cut at line starts. Every batch and every row is read; the reader must return `Ok` or `Err`,
//! never panic, hang or abort.
//!
//! Where the text is known (every mode but the raw streams) the rows are also checked against a
//! reference model of the reader written from its documentation: lines split at `\n`, a UTF-8
//! byte-order mark skipped at the start of the file, `\r`/`\n` cut from the end, blank (ASCII
//! white space) lines skipped, a row is valid when the line is UTF-8, starts (after white space)
//! with `{` and serde_json reads it as an object with the three string fields. Same line
//! numbers, same valid rows with the same text. And a whole file read to its end without an
//! error hashes (`source_blake3`) to the BLAKE3 of its bytes.
//!
//! Input: byte 0 picks the mode (low 3 bits) and the batch size in rows (1..=5, from the next
//! bits); the rest is the payload.
#![no_main]

use std::io::Write;

use data_io_core::error::Location;
use data_io_core::progress::ByteProgress;
use data_io_core::reader::{RowReader, Span};
use libfuzzer_sys::fuzz_target;

mod common;
use common::scratch::write;
use serde::Deserialize;

const BOM: &[u8] = b"\xEF\xBB\xBF";

#[derive(Deserialize)]
struct Row {
    condition: String,
    instruction: String,
    response: String,
}

type Rows = Vec<(u64, Option<[String; 3]>)>;

/// (line number, the row's three fields or `None` for a bad row) of every non-blank line.
fn reference(text: &[u8], skip_bom: bool) -> Rows {
    let mut rows = Vec::new();
    let mut line_no = 0u64;
    let mut rest = text;
    while !rest.is_empty() {
        let cut = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |i| i + 1);
        let (mut line, after) = rest.split_at(cut);
        rest = after;
        line_no += 1;
        if line_no == 1 && skip_bom {
            line = line.strip_prefix(BOM).unwrap_or(line);
        }
        while let [head @ .., b'\n' | b'\r'] = line {
            line = head;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let row = std::str::from_utf8(line)
            .ok()
            .filter(|text| text.trim_start().starts_with('{'))
            .and_then(|text| serde_json::from_str::<Row>(text).ok())
            .map(|r| [r.condition, r.instruction, r.response]);
        rows.push((line_no, row));
    }
    rows
}

/// Every row the reader gives, and whether it ended with an error (then the rows read before).
fn read(reader: &mut RowReader) -> (Rows, bool) {
    let mut rows = Vec::new();
    for batch in reader.by_ref() {
        let Ok(batch) = batch else {
            return (rows, true);
        };
        assert!(!batch.is_empty(), "an empty batch");
        for i in 0..batch.len() {
            let Location::Line(line) = batch.location(i) else {
                panic!("a JSONL row without a line number");
            };
            let row = batch.row(i).ok().map(|r| {
                [
                    r.condition.into_owned(),
                    r.instruction.into_owned(),
                    r.response.into_owned(),
                ]
            });
            rows.push((line, row));
        }
    }
    (rows, false)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

/// Open `name` (the reader picks the format by the name), read it all, check the hash; the
/// rows and the lines read when it ended without an error.
fn read_whole(name: &str, file: &[u8], batch_rows: usize) -> Option<(Rows, u64)> {
    let path = write(name, file);
    let mut reader = RowReader::open(&path, batch_rows, ByteProgress::none()).ok()?;
    let (rows, failed) = read(&mut reader);
    if let Some(hash) = reader.source_blake3() {
        assert_eq!(
            hash,
            blake3::hash(file).to_hex().to_string(),
            "{name}: wrong source hash"
        );
    }
    if failed {
        return None;
    }
    if name.ends_with(".jsonl") {
        assert!(
            reader.source_blake3().is_some(),
            "a plain file read to its end has no hash"
        );
    }
    Some((rows, reader.lines_read()))
}

/// Lines in `text` as `read_until` counts them.
fn lines(text: &[u8]) -> u64 {
    let newlines = text.iter().filter(|&&b| b == b'\n').count() as u64;
    newlines + u64::from(!text.is_empty() && !text.ends_with(b"\n"))
}

/// `file` (named `name`) holds `text`, plain or as a valid compressed stream: it reads to its
/// end, as the reference says.
fn check_whole(name: &str, file: &[u8], text: &[u8], batch_rows: usize) {
    let Some((rows, lines_read)) = read_whole(name, file, batch_rows) else {
        panic!("{name}: a valid file failed to read (only rows can be bad in it)");
    };
    assert_eq!(
        rows,
        reference(text, true),
        "{name}: rows differ from the reference"
    );
    assert_eq!(lines_read, lines(text), "{name}: lines_read");
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, payload)) = data.split_first() else {
        return;
    };
    let batch_rows = usize::from(control >> 3) % 5 + 1;
    match control & 7 {
        0 => check_whole("rows.jsonl", payload, payload, batch_rows),
        1 => check_whole("rows.jsonl.gz", &gzip(payload), payload, batch_rows),
        2 => {
            let packed = zstd::stream::encode_all(payload, 1).expect("zstd");
            check_whole("rows.jsonl.zst", &packed, payload, batch_rows);
        }
        3 => {
            read_whole("raw.jsonl.gz", payload, batch_rows);
        }
        4 => {
            read_whole("raw.jsonl.zst", payload, batch_rows);
        }
        5 => {
            // Two gzip members, cut where the payload's first byte says.
            let (cut, text) = payload.split_first().map_or((0, payload), |(&c, t)| (c, t));
            let cut = usize::from(cut).min(text.len());
            let mut file = gzip(&text[..cut]);
            file.extend(gzip(&text[cut..]));
            check_whole("two.jsonl.gz", &file, text, batch_rows);
        }
        6 => {
            // A byte range cut at line starts, as the planner cuts them.
            let [a, b, text @ ..] = payload else {
                return;
            };
            let mut starts: Vec<usize> = std::iter::once(0)
                .chain(
                    text.iter()
                        .enumerate()
                        .filter(|(_, &c)| c == b'\n')
                        .map(|(i, _)| i + 1),
                )
                .collect();
            starts.dedup();
            let start = starts[usize::from(*a) % starts.len()];
            let ends: Vec<usize> = starts
                .iter()
                .copied()
                .chain([text.len()])
                .filter(|&s| s >= start)
                .collect();
            let end = ends[usize::from(*b) % ends.len()];
            let path = write("range.jsonl", text);
            let span = Span::Bytes {
                start: start as u64,
                end: end as u64,
            };
            let mut reader = RowReader::open_span(&path, span, batch_rows, ByteProgress::none())
                .expect("a range at line starts opens");
            let (rows, failed) = read(&mut reader);
            assert!(!failed, "a plain range failed to read");
            assert_eq!(
                reader.source_blake3(),
                None,
                "a range has no whole-file hash"
            );
            assert_eq!(
                reader.lines_read(),
                lines(&text[start..end]),
                "range lines_read"
            );
            assert_eq!(
                rows,
                reference(&text[start..end], start == 0),
                "range {start}..{end}: rows differ from the reference"
            );
        }
        _ => {
            // A valid zstd stream cut short: an error, never a panic.
            let packed = zstd::stream::encode_all(payload, 1).expect("zstd");
            let keep = packed.len().saturating_sub(1 + payload.len() % 8);
            read_whole("cut.jsonl.zst", &packed[..keep], batch_rows);
        }
    }
});
