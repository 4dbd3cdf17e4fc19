//! One file's work cut into spans (`scale` units): each span is encoded into a part folder
//! with the same arrays as a task folder and a record; `tokenize` then assembles a task from
//! its parts, byte for byte the folder one run over the whole file writes.
//!
//! A part is written under a temporary name and renamed when complete, so a killed unit
//! leaves no part; two units racing on one span both write, and the second rename finds the
//! first's part in place and keeps it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::encode::{canonical_tokenizer, encode_span, Context, Encoded, BAD_ROW_EXAMPLES};
use super::options::TokenizeOptions;

use crate::error::{Error, IoContext, Location, Result};
use crate::layout::cache::{self, SourceStat};
use crate::layout::task_writer::{TaskWriter, TokenDtype, ARRAY_FILES};
use crate::progress::ByteProgress;
use crate::reader::{RowReader, Span};

/// The record a part folder holds.
pub const PART_RECORD: &str = "part.json";
const PART_FORMAT: u32 = 1;

/// One unit of work: a span of a source, the task it belongs to, and where its part goes.
#[derive(Debug, Clone)]
pub struct UnitSpec {
    pub task: String,
    pub source: PathBuf,
    pub span: Span,
    /// A `Text` span's entry point's 32 KiB window (the plan keeps it; empty otherwise).
    pub window: Vec<u8>,
    /// Its place among the `count` spans of the file, in file order.
    pub index: usize,
    pub count: usize,
    /// The part folder: `PARTS/<task>/<index>`.
    pub part_dir: PathBuf,
}

/// A bad row skipped in a part, located within the part (a JSONL line counted from the span's
/// start) or in the file (a Parquet row).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadRowNote {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub row: Option<u64>,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartRecord {
    pub format: u32,
    pub task: String,
    pub source: String,
    pub source_size: u64,
    pub source_mtime_ns: u128,
    /// The source's ctime when the unit read it (as the task record keeps it): an edit whose
    /// size and mtime were put back is not taken for the content parts were made from.
    /// Absent in parts of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ctime_ns: Option<u128>,
    pub span: Span,
    pub index: usize,
    pub count: usize,
    pub tokenizer_blake3: String,
    pub options_blake3: String,
    pub fail_on_bad_rows: bool,
    pub token_dtype: String,
    pub rows: u64,
    pub tokens: u64,
    /// Lines (JSONL, blank ones included) or rows (Parquet) the span holds.
    pub lines: u64,
    pub bad_rows: u64,
    pub bad_row_examples: Vec<BadRowNote>,
    /// The whole file's hash, when the span is the whole file (the task record needs it).
    pub source_blake3: Option<String>,
    /// BLAKE3 of each array file, by name: the unit's completion record.
    pub arrays: BTreeMap<String, String>,
    pub encoder: String,
}

/// What running a unit did.
#[derive(Debug, Serialize)]
pub struct PartReport {
    pub part: PartRecord,
    /// The part was already complete and current: nothing was encoded.
    pub reused: bool,
    pub seconds: f64,
}

/// Encode `unit` into its part folder, unless a current part is already there.
pub fn tokenize_unit(options: &TokenizeOptions, unit: &UnitSpec) -> Result<PartReport> {
    let pool = crate::encoder::process_pool_with(options.threads.unwrap_or(0))?;
    pool.install(|| run_unit(options, unit))
}

fn run_unit(given: &TokenizeOptions, unit: &UnitSpec) -> Result<PartReport> {
    let started = Instant::now();
    let options = &TokenizeOptions {
        tokenizer_path: canonical_tokenizer(&given.tokenizer_path)?,
        ..given.clone()
    };
    let ctx = Context::new(options)?;
    let stat = SourceStat::of(&unit.source)?;
    if let Some(part) = read_part(&unit.part_dir) {
        if current(&ctx, &part, &unit.source, stat) && same_unit(&part, unit) {
            return Ok(PartReport {
                part,
                reused: true,
                seconds: started.elapsed().as_secs_f64(),
            });
        }
    }
    let parent = unit
        .part_dir
        .parent()
        .ok_or_else(|| Error::Config(format!("{}: no parent folder", unit.part_dir.display())))?;
    fs::create_dir_all(parent).ctx("cannot create", parent)?;
    let tmp = parent.join(format!(
        ".tmp-{}-{}-{}",
        unit.index,
        std::process::id(),
        started.elapsed().as_nanos() ^ u128::from(std::process::id()).rotate_left(40)
    ));
    fs::create_dir(&tmp).ctx("cannot create", &tmp)?;
    let result = write_part(&ctx, unit, stat, &tmp);
    let part = match result {
        Ok(part) => part,
        Err(e) => {
            let _ = fs::remove_dir_all(&tmp);
            return Err(e);
        }
    };
    if unit.part_dir.exists() {
        // A stale part (another tokenizer, an edited file), or one a racing unit just wrote.
        match read_part(&unit.part_dir) {
            Some(theirs)
                if current(&ctx, &theirs, &unit.source, stat) && same_unit(&theirs, unit) =>
            {
                let _ = fs::remove_dir_all(&tmp);
                return Ok(PartReport {
                    part: theirs,
                    reused: true,
                    seconds: started.elapsed().as_secs_f64(),
                });
            }
            _ => fs::remove_dir_all(&unit.part_dir).ctx("cannot remove", &unit.part_dir)?,
        }
    }
    if let Err(e) = fs::rename(&tmp, &unit.part_dir) {
        let _ = fs::remove_dir_all(&tmp);
        // Lost a race: the winner's part is as good as ours.
        if read_part(&unit.part_dir).is_some_and(|p| same_unit(&p, unit)) {
            return Ok(PartReport {
                part,
                reused: true,
                seconds: started.elapsed().as_secs_f64(),
            });
        }
        return Err(Error::io("cannot rename", &tmp, e));
    }
    Ok(PartReport {
        part,
        reused: false,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn write_part(
    ctx: &Context<'_>,
    unit: &UnitSpec,
    stat: SourceStat,
    tmp: &Path,
) -> Result<PartRecord> {
    let reader = RowReader::open_span(
        &unit.source,
        unit.span,
        &unit.window,
        ctx.options.batch_rows,
        ByteProgress::none(),
    )?;
    let encoded = encode_span(ctx, &unit.source, reader, tmp)
        .map_err(|e| in_file(e, &unit.source, unit.span))?;
    let mut arrays = BTreeMap::new();
    for name in ARRAY_FILES {
        arrays.insert(name.to_string(), cache::file_blake3(&tmp.join(name))?);
    }
    let source_blake3 = match unit.span {
        Span::Whole => Some(cache::file_blake3(&unit.source)?),
        _ => None,
    };
    let part = PartRecord {
        format: PART_FORMAT,
        task: unit.task.clone(),
        source: unit.source.display().to_string(),
        source_size: stat.size,
        source_mtime_ns: stat.mtime_ns,
        source_ctime_ns: Some(stat.ctime_ns),
        span: unit.span,
        index: unit.index,
        count: unit.count,
        tokenizer_blake3: ctx.fingerprint.tokenizer_blake3.clone(),
        options_blake3: ctx.fingerprint.options_blake3.clone(),
        fail_on_bad_rows: ctx.fingerprint.fail_on_bad_rows,
        token_dtype: ctx.dtype.name().into(),
        rows: encoded.rows,
        tokens: encoded.tokens,
        lines: encoded.lines,
        bad_rows: encoded.bad_rows,
        bad_row_examples: encoded.bad_row_examples.iter().filter_map(note).collect(),
        source_blake3,
        arrays,
        encoder: ctx.encoder.engine().into(),
    };
    crate::fs::write_json_atomic(&tmp.join(PART_RECORD), &part)?;
    Ok(part)
}

fn note(error: &Error) -> Option<BadRowNote> {
    match error {
        Error::BadRow {
            location, message, ..
        } => Some(match location {
            Location::Line(n) => BadRowNote {
                line: Some(*n),
                row: None,
                message: message.clone(),
            },
            Location::Row(n) => BadRowNote {
                line: None,
                row: Some(*n),
                message: message.clone(),
            },
        }),
        _ => None,
    }
}

/// A bad row that failed a unit, located in the file rather than in its span: the lines before
/// the span are counted (only on this error path).
fn in_file(error: Error, source: &Path, span: Span) -> Error {
    let Error::BadRow {
        path,
        location: Location::Line(n),
        message,
    } = &error
    else {
        return error;
    };
    let before = match span {
        Span::Bytes { start, .. } => lines_before(source, start).ok(),
        Span::Parts { start: 0, .. } => Some(0),
        // The range's first line starts past the first newline of its first part's text.
        Span::Parts { start, .. } => lines_before_part(source, start).ok().map(|n| n + 1),
        // The first line after the one the point lies in (`JsonlReader::open_text`).
        Span::Text { point, .. } => Some(point.map_or(0, |point| point.newlines + 1)),
        Span::Whole | Span::RowGroups { .. } => return error,
    };
    match before {
        Some(before) => Error::bad_row(path, Location::Line(before + n), message.clone()),
        None => error,
    }
}

/// Newlines in the text of a compressed file before its part at byte `start`.
fn lines_before_part(path: &Path, start: u64) -> Result<u64> {
    let Some(crate::reader::Format::Jsonl(compression)) = crate::reader::Format::of(path) else {
        return Err(Error::Config(format!(
            "{}: not compressed JSONL",
            path.display()
        )));
    };
    let lanes = crate::reader::frames::lanes_for(compression, rayon::current_num_threads());
    let (newlines, _) =
        crate::reader::frames::text_before(path, compression, start, lanes, |error, read| {
            Error::bad_file(
                path,
                format!("corrupt or truncated data near byte {read} ({error})"),
            )
        })?;
    Ok(newlines)
}

/// Newlines in the first `offset` bytes of a file.
fn lines_before(path: &Path, offset: u64) -> std::io::Result<u64> {
    use std::io::Read;
    let mut file = fs::File::open(path)?.take(offset);
    let mut block = vec![0u8; 1 << 20];
    let mut lines = 0;
    loop {
        let n = file.read(&mut block)?;
        if n == 0 {
            return Ok(lines);
        }
        lines += block[..n].iter().filter(|&&b| b == b'\n').count() as u64;
    }
}

fn read_part(dir: &Path) -> Option<PartRecord> {
    let text = fs::read_to_string(dir.join(PART_RECORD)).ok()?;
    serde_json::from_str::<PartRecord>(&text)
        .ok()
        .filter(|p| p.format == PART_FORMAT)
}

/// Whether `part` was made from this content of `source` with these options and tokenizer.
fn current(ctx: &Context<'_>, part: &PartRecord, source: &Path, stat: SourceStat) -> bool {
    part.source == source.display().to_string()
        && part.source_size == stat.size
        && part.source_mtime_ns == stat.mtime_ns
        && part
            .source_ctime_ns
            .is_none_or(|ctime| ctime == stat.ctime_ns)
        && part.tokenizer_blake3 == ctx.fingerprint.tokenizer_blake3
        && part.options_blake3 == ctx.fingerprint.options_blake3
        && part.fail_on_bad_rows == ctx.fingerprint.fail_on_bad_rows
        && part.token_dtype == ctx.dtype.name()
}

/// Whether the part of a whole file, not `current` only because its source's ctime moved since
/// the unit read it (a `chmod`, a copy with its times kept, a node's own copy of the inputs), is
/// of the same content after all: the file's BLAKE3, taken once into `hashed` for all the task's
/// parts, is the one the unit took. A range's part has no hash of the file: it is encoded again.
fn same_content(
    ctx: &Context<'_>,
    part: &PartRecord,
    source: &Path,
    stat: SourceStat,
    hashed: &mut Option<Option<String>>,
) -> bool {
    let (Some(theirs), Some(ctime_ns)) = (&part.source_blake3, part.source_ctime_ns) else {
        return false;
    };
    if !current(ctx, part, source, SourceStat { ctime_ns, ..stat }) {
        return false;
    }
    let ours = hashed.get_or_insert_with(|| cache::file_blake3(source).ok());
    ours.as_deref() == Some(theirs.as_str())
}

fn same_unit(part: &PartRecord, unit: &UnitSpec) -> bool {
    part.task == unit.task
        && part.span == unit.span
        && part.index == unit.index
        && part.count == unit.count
}

/// The parts of `task` under `root`, in file order, when every span of the file has a current
/// part; `None` otherwise (the task is then encoded by the run itself).
pub(super) fn complete_parts(
    ctx: &Context<'_>,
    root: &Path,
    task: &str,
    source: &Path,
    stat: SourceStat,
) -> Result<Option<Vec<(PathBuf, PartRecord)>>> {
    let dir = root.join(task);
    let Ok(entries) = fs::read_dir(&dir) else {
        return Ok(None);
    };
    let mut hashed = None;
    let mut parts: Vec<(PathBuf, PartRecord)> = entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|entry| Some((entry.path(), read_part(&entry.path())?)))
        .filter(|(_, part)| {
            part.task == task
                && (current(ctx, part, source, stat)
                    || same_content(ctx, part, source, stat, &mut hashed))
        })
        // A part whose arrays were cut short or lost since (a full disk, a copy cut off) is
        // no part: the file is then encoded by the run itself, not failed at every run.
        .filter(|(dir, part)| arrays_whole(dir, part))
        .collect();
    parts.sort_by_key(|(_, part)| part.index);
    let Some(count) = parts.first().map(|(_, p)| p.count) else {
        return Ok(None);
    };
    let in_order = parts.len() == count
        && parts
            .iter()
            .enumerate()
            .all(|(i, (_, p))| p.index == i && p.count == count);
    if !in_order || !covers_file(&parts, source, stat)? {
        return Ok(None);
    }
    Ok(Some(parts))
}

/// Whether every array file of `part` in `dir` is there, as long as its header says.
fn arrays_whole(dir: &Path, part: &PartRecord) -> bool {
    part.arrays.keys().all(|name| {
        crate::layout::cache::npy_shape(&dir.join(name)).is_ok_and(|shape| shape.complete)
    })
}

/// Whether the spans, in order, are the whole file with no gap or overlap.
fn covers_file(parts: &[(PathBuf, PartRecord)], source: &Path, stat: SourceStat) -> Result<bool> {
    let spans: Vec<Span> = parts.iter().map(|(_, p)| p.span).collect();
    Ok(match spans.as_slice() {
        [Span::Whole] => true,
        [Span::Bytes { start: 0, .. }, ..] => {
            let contiguous = spans.windows(2).all(|w| match (w[0], w[1]) {
                (Span::Bytes { end, .. }, Span::Bytes { start, .. }) => end == start,
                _ => false,
            });
            contiguous && matches!(spans.last(), Some(Span::Bytes { end, .. }) if *end == stat.size)
        }
        [Span::Parts { start: 0, .. }, ..] => {
            let contiguous = spans.windows(2).all(|w| match (w[0], w[1]) {
                (Span::Parts { end, .. }, Span::Parts { start, .. }) => end == start,
                _ => false,
            });
            contiguous && matches!(spans.last(), Some(Span::Parts { end, .. }) if *end == stat.size)
        }
        [Span::Text {
            start: 0,
            total,
            point: None,
            ..
        }, ..] => {
            let contiguous = spans.windows(2).all(|w| match (w[0], w[1]) {
                (
                    Span::Text { end, .. },
                    Span::Text {
                        start, total: t, ..
                    },
                ) => end == start && t == *total,
                _ => false,
            });
            contiguous && matches!(spans.last(), Some(Span::Text { end, .. }) if end == total)
        }
        [Span::RowGroups { start: 0, .. }, ..] => {
            let contiguous = spans.windows(2).all(|w| match (w[0], w[1]) {
                (Span::RowGroups { end, .. }, Span::RowGroups { start, .. }) => end == start,
                _ => false,
            });
            let groups = row_groups(source)?;
            contiguous
                && matches!(spans.last(), Some(Span::RowGroups { end, .. }) if *end == groups)
        }
        _ => false,
    })
}

fn row_groups(source: &Path) -> Result<usize> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let file = fs::File::open(source).map_err(|e| Error::read(source, e))?;
    let reader = SerializedFileReader::new(file)
        .map_err(|e| Error::bad_file(source, format!("not a readable Parquet file: {e}")))?;
    Ok(reader.metadata().num_row_groups())
}

/// `total + more`, a count of the parts read from their records (`part.json`, which carries no
/// checksum): past 2^64 only when a record was damaged or edited.
fn counted(total: u64, more: u64, dir: &Path) -> Result<u64> {
    total.checked_add(more).ok_or_else(|| {
        Error::Output(format!(
            "{}: its counts add up past 2^64 with the parts before it: the part's record is \
             damaged; delete the parts folder and run its units again",
            dir.join(PART_RECORD).display()
        ))
    })
}

/// Write the task folder's arrays into `tmp` from `parts`; the totals, and the source's hash.
pub(super) fn assemble(
    parts: &[(PathBuf, PartRecord)],
    source: &Path,
    tmp: &Path,
    dtype: TokenDtype,
) -> Result<(Encoded, String)> {
    let mut writer = TaskWriter::create(tmp, dtype)?;
    let mut encoded = Encoded {
        rows: 0,
        tokens: 0,
        lines: 0,
        bad_rows: 0,
        bad_row_examples: Vec::new(),
        source_blake3: None,
    };
    for (dir, part) in parts {
        writer.append_part(dir)?;
        for example in &part.bad_row_examples {
            if encoded.bad_row_examples.len() == BAD_ROW_EXAMPLES {
                break;
            }
            // A JSONL line is counted from its span's start; a Parquet row is already global.
            let location = match (example.line, example.row) {
                (Some(line), _) => Location::Line(counted(encoded.lines, line, dir)?),
                (None, Some(row)) => Location::Row(row),
                (None, None) => continue,
            };
            let error = Error::bad_row(source, location, example.message.clone());
            encoded.bad_row_examples.push(error);
        }
        encoded.rows = counted(encoded.rows, part.rows, dir)?;
        encoded.tokens = counted(encoded.tokens, part.tokens, dir)?;
        encoded.lines = counted(encoded.lines, part.lines, dir)?;
        encoded.bad_rows = counted(encoded.bad_rows, part.bad_rows, dir)?;
    }
    if writer.rows() != encoded.rows || writer.tokens() != encoded.tokens {
        return Err(Error::Output(format!(
            "the parts of {} hold other row or token counts than their records say; delete \
             them and run their units again",
            source.display()
        )));
    }
    writer.finish()?;
    let source_blake3 = match parts {
        [(_, part)] => part.source_blake3.clone(),
        _ => None,
    };
    let source_blake3 = match source_blake3 {
        Some(hash) => hash,
        None => cache::file_blake3(source)?,
    };
    Ok((encoded, source_blake3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_of_damaged_part_records_past_2_64_are_an_error_not_a_wrap() {
        let dir = Path::new("parts/a.jsonl/000001");
        assert_eq!(counted(5, 7, dir).unwrap(), 12);
        let message = counted(u64::MAX - 1, 2, dir).unwrap_err().to_string();
        assert!(
            message.contains("parts/a.jsonl/000001/part.json: its counts add up past 2^64"),
            "{message}"
        );
    }
}
