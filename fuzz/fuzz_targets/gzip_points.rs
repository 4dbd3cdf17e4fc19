//! Entry points into a gzip stream (`reader::frames::gzip_points`, rust/reader/frames/
//! gzip_points/): the index pass (zlib's `Z_BLOCK` through `libz-rs-sys`) and a reader starting
//! at a point (`inflatePrime`, `inflateSetDictionary`, the member's CRC-32 finished there).
//!
//! Two modes (bit 0 of byte 0):
//! - built: the payload is text, compressed as one or two gzip members (bit 1) whose deflate
//!   blocks end every byte-1 bytes of text (1..=256), by partial, sync or full flushes or none
//!   as byte 2's bits choose (a block ending within a byte, at one, with the window reset). The
//!   index must take it; its text and newlines are the payload's; from every point the text
//!   read is the payload's rest. With bit 2, one byte (at bytes 3-4, past the first point's
//!   first byte) is flipped: from that point the read fails or, where the byte held no text
//!   (a later member's header time), gives the same rest.
//! - raw: the payload is the file. The index never panics; nor does a read from any point it
//!   gives, and when the whole file decodes (flate2's `MultiGzDecoder`, what prepare reads a
//!   file with) every point reads the rest of that text.
//!
//! Both modes also cut the text into ranges at a choice of points (`tokenize --executor`'s
//! units of a `.jsonl.gz`: rust/reader/frames/text_range.rs, `JsonlReader::open_text`): of the
//! points with `point.text + 1 < total` (at most 64 built, 16 raw), each is taken or not by a
//! generator seeded from the input's leading bytes, about 1 in 1, 2, 4 or 8 (byte 0's bits 4-5).
//! The range from a point runs from the cut for `point.text + 1` to the cut for the next
//! range's start (the first range from 0, with no point; the last to the text's end), the cut
//! for `t` being the first line start at or after `t`. Built, and raw where the whole file
//! decodes to the index's text: each range read through `frames::LinesOfText` over `FromPoint`
//! (a decoder from the file's start for the first), in calls of 1..=64 bytes or by
//! `read_to_end` (built: byte 3's bits), is exactly `text[cut(start)..cut(end)]`, and the ranges
//! joined are the text; and cut at every few of the points (at most 9 ranges),
//! `JsonlReader::open_text` reads range by range the rows (the file's line, the same fields or
//! a refusal) that `JsonlReader::open` reads from the whole file. Bit 3 (built): the text is the
//! payload's lines as JSON rows (an empty line kept blank, one starting with `!` kept as it is),
//! so that most rows are valid. Raw otherwise: neither reader panics.
#![no_main]

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use data_io_core::progress::ByteProgress;
use data_io_core::reader::frames::gzip_points::{entry_points, EntryPoint, FromPoint};
use data_io_core::reader::frames::LinesOfText;
use data_io_core::reader::{Compression as Packed, JsonlReader};
use flate2::{Compress, Compression, FlushCompress};
use libfuzzer_sys::fuzz_target;

mod common;

/// `text` as a gzip member whose blocks end every `chunk` bytes, the flush of chunk `k` chosen
/// by bits `2k..2k+2` of `flushes` (cycling).
fn member(text: &[u8], chunk: usize, flushes: u8) -> Vec<u8> {
    let mut deflate = Compress::new(Compression::default(), false);
    let mut out = Vec::new();
    let chunks: Vec<&[u8]> = text.chunks(chunk.max(1)).collect();
    for (k, piece) in chunks.iter().enumerate() {
        let flush = match (flushes >> (2 * (k % 4))) & 3 {
            0 => FlushCompress::None,
            1 => FlushCompress::Partial,
            2 => FlushCompress::Sync,
            _ => FlushCompress::Full,
        };
        let mut taken = 0;
        loop {
            out.reserve(piece.len() + 256);
            let before = deflate.total_in();
            deflate
                .compress_vec(&piece[taken..], &mut out, flush)
                .expect("deflate");
            taken += (deflate.total_in() - before) as usize;
            if taken == piece.len() && out.capacity() > out.len() {
                break;
            }
        }
    }
    loop {
        out.reserve(256);
        if deflate
            .compress_vec(&[], &mut out, FlushCompress::Finish)
            .expect("deflate")
            == flate2::Status::StreamEnd
        {
            break;
        }
    }
    let mut crc = flate2::Crc::new();
    crc.update(text);
    let mut gz = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    gz.extend(out);
    gz.extend(crc.sum().to_le_bytes());
    gz.extend((text.len() as u32).to_le_bytes());
    gz
}

fn read_from(path: &Path, point: &EntryPoint) -> std::io::Result<Vec<u8>> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(point.bit / 8))?;
    let mut out = Vec::new();
    FromPoint::new(BufReader::new(file), point)?.read_to_end(&mut out)?;
    Ok(out)
}

fn newlines(text: &[u8]) -> u64 {
    text.iter().filter(|&&b| b == b'\n').count() as u64
}

/// The cut for `target` in `text`: the first line start at or after it (0 for 0; the text's
/// end where no line starts after it).
fn cut(text: &[u8], target: u64) -> usize {
    let target = usize::try_from(target).expect("in memory").min(text.len());
    if target == 0 {
        return 0;
    }
    memchr_from(text, target - 1).map_or(text.len(), |newline| newline + 1)
}

fn memchr_from(text: &[u8], from: usize) -> Option<usize> {
    text[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map(|at| from + at)
}

/// A small generator (xorshift) for the choice of points.
struct Choice(u32);

impl Choice {
    fn take(&mut self, one_in: u32) -> bool {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0 % one_in == 0
    }
}

/// A choice of `points` within the text (`point.text + 1 < total`), at most `most`: each taken
/// or not by a generator seeded with `seed`, about 1 in `one_in`.
fn choose(
    points: &[EntryPoint],
    total: u64,
    seed: u32,
    one_in: u32,
    most: usize,
) -> Vec<&EntryPoint> {
    let mut choice = Choice(seed | 1);
    points
        .iter()
        .filter(|point| point.text + 1 < total)
        .filter(|_| choice.take(one_in))
        .take(most)
        .collect()
}

/// A range the plan cuts: its start and end (text offsets) and the point it is read from.
type Cut<'a> = (u64, u64, Option<&'a EntryPoint>);

/// The ranges the plan cuts at the points `chosen`, the first from 0 with no point.
fn ranges<'a>(chosen: &[&'a EntryPoint], total: u64) -> Vec<Cut<'a>> {
    let starts: Vec<(u64, Option<&EntryPoint>)> = [(0, None)]
        .into_iter()
        .chain(chosen.iter().map(|&point| (point.text + 1, Some(point))))
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(k, &(start, point))| {
            let end = starts.get(k + 1).map_or(total, |&(next, _)| next);
            (start, end, point)
        })
        .collect()
}

/// The range's text through `LinesOfText`: over `FromPoint` at `point`, or over a decoder from
/// the file's start; read in calls of `step` bytes (0: `read_to_end`).
fn read_range(
    path: &Path,
    (start, end, point): Cut<'_>,
    total: u64,
    step: usize,
) -> std::io::Result<Vec<u8>> {
    let mut file = File::open(path)?;
    let text: Box<dyn Read> = match point {
        Some(point) => {
            file.seek(SeekFrom::Start(point.bit / 8))?;
            Box::new(FromPoint::new(BufReader::new(file), point)?)
        }
        None => Box::new(flate2::bufread::MultiGzDecoder::new(BufReader::new(file))),
    };
    let base = point.map_or(0, |point| point.text);
    let mut lines = LinesOfText::new(text, base, start, end, total);
    let mut out = Vec::new();
    if step == 0 {
        lines.read_to_end(&mut out)?;
        return Ok(out);
    }
    let mut buf = [0u8; 64];
    loop {
        match lines.read(&mut buf[..step]) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The most ranges read through `JsonlReader::open_text` an input, besides the first.
const JSONL_RANGES: usize = 8;

/// A row as the reader gives it: its line, and its fields or that it is refused.
type Row = (u64, Option<[String; 3]>);

/// Every row of `reader`, its line counted from `lines_before`; Err: a read error.
fn rows(reader: JsonlReader, lines_before: u64) -> Result<Vec<Row>, String> {
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| e.to_string())?;
        for i in 0..batch.len() {
            let data_io_core::error::Location::Line(line) = batch.location(i) else {
                panic!("a JSONL row's location is a line");
            };
            let fields = batch.row(i).ok().map(|row| {
                [row.condition, row.instruction, row.response].map(|field| field.into_owned())
            });
            out.push((lines_before + line, fields));
        }
    }
    Ok(out)
}

/// The ranges of `text` (the file's text, `total` bytes as the index counts) cut at the points
/// `chosen`: each read through `LinesOfText` is the text between its cuts; and through
/// `JsonlReader::open_text`, cut at every few of them (each reader's buffers cost a few MiB of
/// fresh memory), the rows the whole file's reader gives between them.
fn check_ranges(path: &Path, text: &[u8], chosen: &[&EntryPoint], step: usize) {
    let total = text.len() as u64;
    let mut joined = Vec::new();
    for range in ranges(chosen, total) {
        let (start, end, _) = range;
        let read = read_range(path, range, total, step)
            .unwrap_or_else(|e| panic!("range {start}..{end} read: {e}"));
        let want = &text[cut(text, start)..cut(text, end).max(cut(text, start))];
        assert!(
            read == want,
            "range {start}..{end} (step {step}): not its cuts' text"
        );
        joined.extend(read);
    }
    assert!(joined == text, "the ranges joined are not the text");
    let whole = JsonlReader::open(path, Packed::Gzip, 3, ByteProgress::none())
        .map_err(|e| e.to_string())
        .and_then(|reader| rows(reader, 0))
        .unwrap_or_else(|e| panic!("the whole file's rows: {e}"));
    let coarse: Vec<&EntryPoint> = chosen
        .iter()
        .step_by(chosen.len().div_ceil(JSONL_RANGES).max(1))
        .copied()
        .collect();
    let mut ranged = Vec::new();
    for (k, (start, end, point)) in ranges(&coarse, total).into_iter().enumerate() {
        let lines_before = newlines(&text[..cut(text, start)]);
        let reader = JsonlReader::open_text(
            path,
            start..end,
            total,
            point.cloned(),
            1 + k % 4,
            ByteProgress::none(),
        )
        .map_err(|e| e.to_string())
        .and_then(|reader| rows(reader, lines_before))
        .unwrap_or_else(|e| panic!("range {start}..{end}'s rows: {e}"));
        ranged.extend(reader);
    }
    assert!(ranged == whole, "the ranges' rows are not the file's");
}

/// `payload`'s lines as JSON rows: an empty line stays blank, one starting with `!` stays as
/// it is (most likely a bad row); the last keeps no newline if the payload's has none.
fn json_rows(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let lines: Vec<&[u8]> = payload.split(|&b| b == b'\n').collect();
    for (k, line) in lines.iter().enumerate() {
        if line.is_empty() || line[0] == b'!' {
            out.extend_from_slice(line);
        } else {
            let instruction = String::from_utf8_lossy(line);
            let row = serde_json::json!({
                "condition": "",
                "instruction": instruction,
                "response": k.to_string(),
            });
            out.extend_from_slice(row.to_string().as_bytes());
        }
        if k + 1 < lines.len() {
            out.push(b'\n');
        }
    }
    out
}

extern "C" {
    /// glibc's: freed memory kept for the next allocation rather than given back to the
    /// system, so that each reader's buffers (MiB) are not fresh pages to fault in again.
    fn mallopt(param: std::ffi::c_int, value: std::ffi::c_int) -> std::ffi::c_int;
}

fuzz_target!(init: {
    // M_TRIM_THRESHOLD, M_MMAP_THRESHOLD.
    unsafe {
        mallopt(-1, 1 << 30);
        mallopt(-3, 1 << 30);
    }
}, |data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let [chunk, flushes, at_hi, at_lo, text @ ..] = rest else {
            return;
        };
        let rows_text;
        let text: &[u8] = if mode & 8 != 0 {
            rows_text = json_rows(text);
            &rows_text
        } else {
            text
        };
        let chunk = usize::from(*chunk) + 1;
        let mut stored = if mode & 2 == 0 {
            member(text, chunk, *flushes)
        } else {
            let half = text.len() / 2;
            [
                member(&text[..half], chunk, *flushes),
                member(&text[half..], chunk, !*flushes),
            ]
            .concat()
        };
        let path = common::scratch::write("input.gz", &stored);
        let index = entry_points(&path, 1).expect("a built file is indexed");
        assert_eq!(index.text, text.len() as u64);
        assert_eq!(index.newlines, newlines(text));
        for point in &index.points {
            let at = usize::try_from(point.text).expect("in memory");
            assert_eq!(point.newlines, newlines(&text[..at]));
            let read = read_from(&path, point).expect("read from a point");
            assert!(read == text[at..], "from the point at text {at}");
        }
        let seed = u32::from_be_bytes([mode, *at_hi, *at_lo, *flushes]);
        let chosen = choose(&index.points, index.text, seed, 1 << ((mode >> 4) & 3), 64);
        check_ranges(&path, text, &chosen, step(*at_hi));
        let Some(first) = index.points.first() else {
            return;
        };
        if mode & 4 != 0 {
            let start = first.bit / 8 + 1;
            let span = stored.len() as u64 - start;
            if span == 0 {
                return;
            }
            let flip = start + u64::from(u16::from_be_bytes([*at_hi, *at_lo])) % span;
            stored[flip as usize] ^= 0x55;
            let path = common::scratch::write("input.gz", &stored);
            if let Ok(read) = read_from(&path, first) {
                assert!(
                    read == text[first.text as usize..],
                    "a flip at {flip} read as text"
                );
            }
        }
        return;
    }
    let path = common::scratch::write("input.gz", rest);
    let Ok(index) = entry_points(&path, 1) else {
        return;
    };
    let mut whole = Vec::new();
    let decoded = flate2::bufread::MultiGzDecoder::new(rest)
        .read_to_end(&mut whole)
        .is_ok();
    for point in index.points.iter().take(64) {
        let read = read_from(&path, point);
        if decoded {
            let read = read.expect("a file that decodes reads from its points");
            assert!(read == whole[point.text as usize..]);
        }
    }
    let seed = u32::from_be_bytes([mode, rest.len() as u8, 0x5a, 0xc3]);
    let chosen = choose(&index.points, index.text, seed, 1 << ((mode >> 4) & 3), 16);
    let step = step(mode >> 1);
    if decoded && whole.len() as u64 == index.text {
        check_ranges(&path, &whole, &chosen, step);
        return;
    }
    // Whatever the file holds: an answer, never a panic.
    for range in ranges(&chosen, index.text) {
        let _ = read_range(&path, range, index.text, step);
        let (start, end, point) = range;
        if let Ok(reader) = JsonlReader::open_text(
            &path,
            start..end,
            index.text,
            point.cloned(),
            2,
            ByteProgress::none(),
        ) {
            let _ = rows(reader, 0);
        }
    }
});

/// The size of the calls a range is read in: 1..=64 bytes, or whole (0) for a quarter of the
/// values of `byte`.
fn step(byte: u8) -> usize {
    if byte & 0xc0 == 0xc0 {
        0
    } else {
        1 + usize::from(byte & 63)
    }
}
