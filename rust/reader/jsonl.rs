//! JSONL rows: one JSON object per line. Lines are split here; JSON is parsed per row when
//! the batch is read (in parallel), borrowing the text where it has no escapes.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Deserialize;

use super::frames::{self, ParallelText};
use super::{Compression, RowText, FIELDS, READ_BUFFER};
use crate::error::{Error, Location, Result};
use crate::progress::ByteProgress;

/// Batches stop growing at this many bytes even if they hold fewer rows than asked: long
/// rows (books, code files) must not make a batch huge. 2 MiB rather than 8: a batch's text is
/// still in the caches when it is encoded, and the pipeline of `tokenize::encode_span` fills
/// and drains sooner (`tokenize` warm, interleaved runs: +2% at one thread, +8% on the
/// race's main slice and +10% on its CJK slice at two).
const BATCH_BYTES: usize = 2 << 20;
/// A batch buffer's room: a batch, and the chunk of the read buffer that takes it past
/// `BATCH_BYTES` (whole chunks are copied in; a buffer that grew past this is not reused).
const BATCH_CAPACITY: usize = BATCH_BYTES + READ_BUFFER;
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

pub struct JsonlReader {
    path: Arc<PathBuf>,
    compression: Compression,
    reader: Box<dyn BufRead + Send>,
    batch_rows: usize,
    line_no: u64,
    /// Where a scale-out unit's run of compressed parts starts in the file (0: the file's
    /// start): its lines are counted from there, and its messages say so.
    parts_start: u64,
    /// The file's lines before the first read, where they are known (0 at its start): its
    /// messages count the file's lines.
    lines_before: u64,
    /// A byte-order mark is skipped at the start of the file, not of a range inside it.
    skip_bom: bool,
    finished: bool,
    /// A whole file's hash, taken as it is read, and the file's size when it was opened.
    hash: Option<(SourceHash, u64)>,
}

/// The file's bytes as they are read, reported to the progress bar (before decompression,
/// so that a compressed file's share of the bar is its size on disk) and, for a whole file,
/// hashed.
struct Counting {
    file: File,
    progress: ByteProgress,
    hash: Option<SourceHash>,
}

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        self.progress.advance(n as u64);
        if let Some(hash) = &self.hash {
            hash.update(&buf[..n]);
        }
        Ok(n)
    }
}

/// A file of parts' text decompressed on several lanes, its progress the file's bytes the lanes
/// have read.
struct Progressed<T: Read> {
    text: T,
    read: Arc<AtomicU64>,
    progress: ByteProgress,
}

impl<T: Read> Read for Progressed<T> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.text.read(buf)?;
        self.progress.advance_to(self.read.load(Ordering::Relaxed));
        Ok(n)
    }
}

/// BLAKE3 of a file's bytes (as read from disk, before decompression), taken by the reader as
/// it reads them: the task's record needs the source's hash, and hashing the file before
/// reading it was a second pass over it, on one core, before any encoding started (`tokenize`
/// of 150 MB at 2 threads: 4%).
#[derive(Clone, Default)]
struct SourceHash(Arc<Mutex<blake3::Hasher>>);

impl SourceHash {
    fn hasher(&self) -> std::sync::MutexGuard<'_, blake3::Hasher> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn update(&self, bytes: &[u8]) {
        self.hasher().update(bytes);
    }

    /// The hex digest, when exactly `size` bytes went through.
    fn hex_if(&self, size: u64) -> Option<String> {
        let hasher = self.hasher();
        (hasher.count() == size).then(|| hasher.finalize().to_hex().to_string())
    }
}

impl JsonlReader {
    /// The lines of an uncompressed file that lie in `range`, which must start at a line start
    /// (0, or just after a newline) and end at one or at the end of the file.
    pub fn open_range(
        path: &Path,
        range: Range<u64>,
        batch_rows: usize,
        progress: ByteProgress,
    ) -> Result<Self> {
        let mut file = File::open(path).map_err(|e| Error::read(path, e))?;
        let size = file.metadata().map_err(|e| Error::read(path, e))?.len();
        let stale = |why: String| {
            Error::Config(format!(
                "{}: bytes {}..{} {why}; the file changed since the plan was made: run the \
                 command that made the plan again (it plans the changed file anew)",
                path.display(),
                range.start,
                range.end
            ))
        };
        if range.start > range.end || range.end > size {
            return Err(stale(format!("are not within its {size} bytes")));
        }
        if range.start > 0 {
            let mut before = [0u8; 1];
            file.seek(SeekFrom::Start(range.start - 1))
                .and_then(|_| file.read_exact(&mut before))
                .map_err(|e| Error::read(path, e))?;
            if before[0] != b'\n' {
                return Err(stale("do not start at a line start".into()));
            }
        }
        let raw = Counting {
            file,
            progress,
            hash: None,
        }
        .take(range.end - range.start);
        Ok(JsonlReader {
            path: Arc::new(path.to_path_buf()),
            compression: Compression::None,
            reader: Box::new(BufReader::with_capacity(READ_BUFFER, raw)),
            batch_rows: batch_rows.max(1),
            line_no: 0,
            parts_start: 0,
            lines_before: 0,
            skip_bom: range.start == 0,
            finished: false,
            hash: None,
        })
    }

    /// The lines of the compressed parts from byte `start` to byte `end` (None: the file's end),
    /// cut at line starts as `frames::LinesOfParts` says; its lines are numbered from 1 at
    /// the range's first, as `open_range`'s are.
    pub fn open_parts(
        path: &Path,
        compression: Compression,
        start: u64,
        end: Option<u64>,
        batch_rows: usize,
        progress: ByteProgress,
    ) -> Result<Self> {
        let lanes = frames::lanes_for(compression, rayon::current_num_threads());
        let read = Arc::new(AtomicU64::new(0));
        let text = frames::LinesOfParts::open(path, compression, start, end, lanes, read.clone())?;
        let text = Progressed {
            text,
            read,
            progress,
        };
        Ok(JsonlReader {
            path: Arc::new(path.to_path_buf()),
            compression,
            reader: Box::new(BufReader::with_capacity(READ_BUFFER, text)),
            batch_rows: batch_rows.max(1),
            line_no: 0,
            parts_start: start,
            lines_before: 0,
            skip_bom: start == 0,
            finished: false,
            hash: None,
        })
    }

    /// The lines of a gzip stream's text, `total` bytes long, between the cuts for `range`'s
    /// start and end (`frames::LinesOfText`), read from entry `point` (`frames::gzip_points`;
    /// None: from the text's start, where the range must start): only the text from the point
    /// on is decompressed. Its lines are numbered from 1 at the range's first, as
    /// `open_range`'s are; its messages count the file's lines, which the point knows.
    pub fn open_text(
        path: &Path,
        range: Range<u64>,
        total: u64,
        point: Option<frames::gzip_points::EntryPoint>,
        batch_rows: usize,
        progress: ByteProgress,
    ) -> Result<Self> {
        let stale = |why: String| {
            Error::Config(format!(
                "{}: text bytes {}..{} {why}; plan again (run the command that made the plan)",
                path.display(),
                range.start,
                range.end
            ))
        };
        // As the plan cuts: from one byte past the point, or from the text's start.
        let base = point.as_ref().map_or(0, |point| point.text);
        let planned = match &point {
            Some(point) => range.start == point.text + 1,
            None => range.start == 0,
        };
        if !planned || range.start > range.end || range.end > total {
            return Err(stale(format!(
                "are not a range the plan cuts (from {}, within {total})",
                point.as_ref().map_or(0, |point| point.text + 1)
            )));
        }
        let mut file = File::open(path).map_err(|e| Error::read(path, e))?;
        let size = file.metadata().map_err(|e| Error::read(path, e))?.len();
        let seek = point.as_ref().map_or(0, |point| point.bit / 8);
        if size <= seek {
            return Err(stale(format!(
                "start at byte {seek} of the file, which has {size}: the file changed since"
            )));
        }
        file.seek(SeekFrom::Start(seek))
            .map_err(|e| Error::read(path, e))?;
        let raw = BufReader::with_capacity(
            READ_BUFFER,
            Counting {
                file,
                progress,
                hash: None,
            },
        );
        // Its errors name the file offset the decoder had consumed to (`frames::Damaged`).
        let reached = Arc::new(AtomicU64::new(seek));
        let consumed = frames::Consumed::new(raw, seek, Arc::clone(&reached), Compression::Gzip);
        let text: Box<dyn Read + Send> = match &point {
            Some(point) => Box::new(
                frames::gzip_points::FromPoint::new(consumed, point).map_err(|e| {
                    Error::bad_file(path, format!("cannot enter at its point: {e}"))
                })?,
            ),
            None => super::decompressed(consumed, Compression::Gzip)
                .map_err(|e| Error::read(path, e))?,
        };
        let text = frames::Located::new(text, reached, seek, Compression::Gzip);
        let lines = frames::LinesOfText::new(text, base, range.start, range.end, total);
        Ok(JsonlReader {
            path: Arc::new(path.to_path_buf()),
            compression: Compression::Gzip,
            reader: Box::new(BufReader::with_capacity(READ_BUFFER, lines)),
            batch_rows: batch_rows.max(1),
            line_no: 0,
            parts_start: 0,
            // The range's first line follows the newline just past the point.
            lines_before: point.as_ref().map_or(0, |point| point.newlines + 1),
            skip_bom: range.start == 0,
            finished: false,
            hash: None,
        })
    }

    /// Lines read so far (blank ones included).
    pub fn lines_read(&self) -> u64 {
        self.line_no
    }

    /// The BLAKE3 (hex) of the whole file's bytes once it has been read to its end, as
    /// `cache::file_blake3` gives it; `None` for a range, or a file that changed size.
    pub fn source_blake3(&self) -> Option<String> {
        let (hash, size) = self.hash.as_ref()?;
        hash.hex_if(*size)
    }

    pub fn open(
        path: &Path,
        compression: Compression,
        batch_rows: usize,
        progress: ByteProgress,
    ) -> Result<Self> {
        // A compressed file of parts (zstd frames, BGZF members) decompresses
        // on the pool's threads; its hash is then taken apart (`cache::file_blake3`).
        let lanes = frames::lanes_for(compression, rayon::current_num_threads());
        if lanes > 1 {
            let parts = frames::parts(path, compression)?;
            if parts.list.len() > 1 {
                let read = Arc::new(AtomicU64::new(0));
                let range = 0..parts.list.len();
                let text = ParallelText::new(path, Arc::new(parts), range, lanes, read.clone());
                let text = Progressed {
                    text,
                    read,
                    progress,
                };
                return Ok(JsonlReader {
                    path: Arc::new(path.to_path_buf()),
                    compression,
                    reader: Box::new(BufReader::with_capacity(READ_BUFFER, text)),
                    batch_rows: batch_rows.max(1),
                    line_no: 0,
                    parts_start: 0,
                    lines_before: 0,
                    skip_bom: true,
                    finished: false,
                    hash: None,
                });
            }
        }
        let file = File::open(path).map_err(|e| Error::read(path, e))?;
        let size = file.metadata().map_err(|e| Error::read(path, e))?.len();
        let hash = SourceHash::default();
        let counting = Counting {
            file,
            progress,
            hash: Some(hash.clone()),
        };
        let raw = BufReader::with_capacity(READ_BUFFER, counting);
        let refused = |e: std::io::Error| match super::not_compressed(&e) {
            Some(not) => Error::bad_file(path, not.to_string()),
            None => Error::read(path, e),
        };
        let reader: Box<dyn BufRead + Send> = if compression == Compression::None {
            super::decompressed(raw, compression).map_err(refused)?
        } else {
            // Its errors name the file offset the decoder had consumed to (`frames::Damaged`),
            // as prepare's do; lines are cut from the decoder's own buffer (`Located` is a
            // `BufRead`), so the text is not copied into a second one.
            let reached = Arc::new(AtomicU64::new(0));
            let consumed = frames::Consumed::new(raw, 0, Arc::clone(&reached), compression);
            let text = super::decompressed(consumed, compression).map_err(refused)?;
            Box::new(frames::Located::new(text, reached, 0, compression))
        };
        Ok(JsonlReader {
            path: Arc::new(path.to_path_buf()),
            compression,
            reader,
            batch_rows: batch_rows.max(1),
            line_no: 0,
            parts_start: 0,
            lines_before: 0,
            skip_bom: true,
            finished: false,
            hash: Some((hash, size)),
        })
    }

    /// A read error: on a compressed file almost always corrupt or truncated data, so say
    /// where in the file (`frames::Damaged`: the byte the decoder was at, and its part where
    /// the file's parts are known, as prepare says it) and how far reading got.
    fn read_error(&self, error: std::io::Error) -> Error {
        // A scale-out unit's gzip text that ends elsewhere than the plan found: the plan is
        // stale (the file changed since), the file itself fine.
        if let Some(changed) = frames::TextChanged::of(&error) {
            return Error::Config(format!(
                "{}: {changed}; plan again (run the command that made the plan)",
                self.path.display()
            ));
        }
        let format = match self.compression {
            Compression::None => return Error::read(&self.path, error),
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Bzip2 => "bzip2",
            Compression::Xz => "xz",
        };
        let line = match self.parts_start {
            0 => (self.lines_before + self.line_no).to_string(),
            // Counting the lines before would mean decoding the file up to there.
            start => format!("{} of the unit's parts from byte {start} on", self.line_no),
        };
        let message = match frames::damaged_at(&error) {
            Some(place) if error.kind() == std::io::ErrorKind::UnexpectedEof => format!(
                "truncated {format} data after line {line}: the compressed stream ends without \
                 its end marker after {} bytes ({error})",
                place.reached
            ),
            Some(place) => format!(
                "corrupt {format} data near byte {} of the file, after line {line} ({error})",
                place.near
            ),
            None => format!("corrupt or truncated {format} data after line {line} ({error})"),
        };
        Error::bad_file(
            &self.path,
            format!("{message}; re-create or re-download the file"),
        )
    }

    /// The next batch: whole chunks of the reader's buffer copied at once, then cut at their
    /// newlines (a copy and a search per line cost 2% of a warm tokenize run). A batch ends
    /// after the line that fills it; what follows stays in the reader for the next one.
    fn read_batch(&mut self) -> Result<Option<JsonlBatch>> {
        let mut batch = JsonlBatch {
            path: Arc::clone(&self.path),
            buf: spare_buffer(),
            lines: Vec::with_capacity(self.batch_rows.min(1 << 16)),
        };
        // Where the line being read starts in the batch's buffer (it may span chunks).
        let mut line_start = 0;
        loop {
            if batch.lines.is_empty() && line_start > 0 {
                // Blank lines before the batch's first row are let go: a long run of them
                // neither grows the buffer nor fills the batch.
                batch.buf.drain(..line_start);
                line_start = 0;
            }
            let chunk = match self.reader.fill_buf() {
                Ok(chunk) => chunk,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.read_error(e)),
            };
            if chunk.is_empty() {
                // The end of the text: its last line may have no newline.
                if line_start < batch.buf.len() {
                    let end = batch.buf.len();
                    self.line(&batch.buf, &mut batch.lines, line_start..end);
                }
                self.finished = true;
                break;
            }
            let old = batch.buf.len();
            let len = chunk.len();
            batch.buf.extend_from_slice(chunk);
            let mut full = false;
            for newline in memchr::memchr_iter(b'\n', &batch.buf[old..]) {
                let end = old + newline + 1;
                self.line(&batch.buf, &mut batch.lines, line_start..end);
                line_start = end;
                // A batch ends with a row: one that ended empty would read as the end.
                let filled = end >= BATCH_BYTES && !batch.lines.is_empty();
                if batch.lines.len() >= self.batch_rows || filled {
                    full = true;
                    break;
                }
            }
            if full {
                // The bytes past the batch's last line are read again by the next batch.
                batch.buf.truncate(line_start);
                self.reader.consume(line_start - old);
                break;
            }
            self.reader.consume(len);
        }
        Ok((!batch.lines.is_empty()).then_some(batch))
    }

    /// Count the line `range` of a batch's buffer `buf` (its newline included, if it has
    /// one) and add it to the batch's `lines` unless it is blank.
    fn line(&mut self, buf: &[u8], lines: &mut Vec<(u64, Range<usize>)>, range: Range<usize>) {
        self.line_no += 1;
        let Range { mut start, end } = range;
        let text = &buf[..end];
        // Editors on Windows start UTF-8 files with a byte-order mark; it is not data.
        if self.line_no == 1 && self.skip_bom && text[start..].starts_with(UTF8_BOM) {
            start += UTF8_BOM.len();
        }
        let mut end = end;
        while end > start && matches!(text[end - 1], b'\n' | b'\r') {
            end -= 1;
        }
        // Blank lines carry no row (a trailing newline, an editor's empty last line).
        if !text[start..end].iter().all(u8::is_ascii_whitespace) {
            lines.push((self.line_no, start..end));
        }
    }
}

impl Iterator for JsonlReader {
    type Item = Result<JsonlBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        match self.read_batch() {
            Ok(Some(batch)) => Some(Ok(batch)),
            Ok(None) => None,
            Err(e) => {
                self.finished = true;
                Some(Err(e))
            }
        }
    }
}

/// Batch buffers given back by batches that were done, for the next ones: a fresh buffer's
/// pages are faulted in and zeroed by the kernel as it fills (3% of a warm tokenize run).
static SPARE_BUFFERS: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
/// Buffers kept for reuse at most (`BATCH_CAPACITY` each).
const MAX_SPARE_BUFFERS: usize = 4;

/// An empty buffer with room for a whole batch: a spare one, or a new one (sized at once:
/// grown line by line, the buffer was copied on every doubling; untouched capacity costs no
/// memory).
fn spare_buffer() -> Vec<u8> {
    let spare = SPARE_BUFFERS
        .lock()
        .ok()
        .and_then(|mut spares| spares.pop());
    spare.unwrap_or_else(|| Vec::with_capacity(BATCH_CAPACITY))
}

impl Drop for JsonlBatch {
    fn drop(&mut self) {
        let mut buf = std::mem::take(&mut self.buf);
        // A buffer that grew past its room for a long line is let go.
        if buf.capacity() > BATCH_CAPACITY {
            return;
        }
        buf.clear();
        if let Ok(mut spares) = SPARE_BUFFERS.lock() {
            if spares.len() < MAX_SPARE_BUFFERS {
                spares.push(buf);
            }
        }
    }
}

/// Raw lines of one batch, kept contiguous in one buffer.
pub struct JsonlBatch {
    path: Arc<PathBuf>,
    buf: Vec<u8>,
    /// (1-based line number, byte range in `buf`) of each non-blank line.
    lines: Vec<(u64, Range<usize>)>,
}

/// The three fields, parsed in one pass over the line: a field's text is borrowed from the line
/// when it has no escapes and unescaped once when it has (an earlier version kept each field's
/// raw JSON and parsed escaped strings a second time: 19% of a warm tokenize run).
#[derive(Deserialize)]
struct Row<'a> {
    #[serde(borrow, default)]
    condition: Field<'a>,
    #[serde(borrow, default)]
    instruction: Field<'a>,
    #[serde(borrow, default)]
    response: Field<'a>,
}

/// What one field held, with missing, null and each other JSON type kept apart for the
/// messages.
#[derive(Default)]
enum Field<'a> {
    #[default]
    Missing,
    Text(Cow<'a, str>),
    /// Not a string: the name of its JSON type.
    Not(&'static str),
}

impl<'de: 'a, 'a> Deserialize<'de> for Field<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(FieldVisitor(std::marker::PhantomData))
    }
}

struct FieldVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> serde::de::Visitor<'de> for FieldVisitor<'a> {
    type Value = Field<'a>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Field<'a>, E> {
        Ok(Field::Text(Cow::Borrowed(text)))
    }

    fn visit_str<E>(self, text: &str) -> Result<Field<'a>, E> {
        Ok(Field::Text(Cow::Owned(text.to_owned())))
    }

    fn visit_string<E>(self, text: String) -> Result<Field<'a>, E> {
        Ok(Field::Text(Cow::Owned(text)))
    }

    fn visit_unit<E>(self) -> Result<Field<'a>, E> {
        Ok(Field::Not("null"))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Field<'a>, E> {
        Ok(Field::Not("a boolean"))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Field<'a>, E> {
        Ok(Field::Not("a number"))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Field<'a>, E> {
        Ok(Field::Not("a number"))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Field<'a>, E> {
        Ok(Field::Not("a number"))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Field<'a>, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Field::Not("an array"))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Field<'a>, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(Field::Not("an object"))
    }
}

impl<'a> Field<'a> {
    fn text(self, name: &str) -> Result<Cow<'a, str>, String> {
        match self {
            Field::Text(text) => Ok(text),
            Field::Missing => Err(format!("missing field \"{name}\"")),
            Field::Not(found) => Err(format!("field \"{name}\" is {found}; expected a string")),
        }
    }
}

impl JsonlBatch {
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    pub fn location(&self, i: usize) -> Location {
        Location::Line(self.lines[i].0)
    }

    pub fn row(&self, i: usize) -> Result<RowText<'_>> {
        let (_, range) = &self.lines[i];
        let bad = |message: String| Error::bad_row(&self.path, self.location(i), message);
        let line = &self.buf[range.clone()];
        // SIMD validation (the line is mostly text); std's error says where it fails.
        let text = match simdutf8::basic::from_utf8(line) {
            Ok(text) => text,
            Err(_) => {
                let at = std::str::from_utf8(line)
                    .err()
                    .map_or(0, |e| e.valid_up_to());
                return Err(bad(format!(
                    "invalid UTF-8 at byte {at} of the line; files must be UTF-8 encoded"
                )));
            }
        };
        if let Some([condition, instruction, response]) = super::json_row::parse(text) {
            return Ok(RowText {
                condition,
                instruction,
                response,
            });
        }
        // serde would accept `[c, i, r]` for a struct; rows must be objects.
        if !text.trim_start().starts_with('{') {
            // Only on this error path: is it another JSON value, or not JSON at all?
            let found = match serde_json::from_str::<serde::de::IgnoredAny>(text) {
                Ok(_) => json_type_name(text.trim_start()),
                Err(e) => {
                    return Err(bad(format!(
                        "malformed JSON at column {}: {}; each line must be one JSON object \
                         with string fields condition, instruction, response",
                        e.column(),
                        without_position(&e, text)
                    )))
                }
            };
            return Err(bad(format!(
                "expected a JSON object, found {found}; each line must be one JSON object with \
                 string fields condition, instruction, response"
            )));
        }
        let row: Row<'_> = serde_json::from_str(text).map_err(|e| {
            bad(format!(
                "malformed JSON at column {}: {}; each line must be one JSON object with \
                 string fields condition, instruction, response",
                e.column(),
                without_position(&e, text)
            ))
        })?;
        if [&row.condition, &row.instruction, &row.response]
            .iter()
            .all(|field| matches!(field, Field::Missing))
        {
            return Err(bad(no_row_fields(text)));
        }
        Ok(RowText {
            condition: row.condition.text(FIELDS[0]).map_err(&bad)?,
            instruction: row.instruction.text(FIELDS[1]).map_err(&bad)?,
            response: row.response.text(FIELDS[2]).map_err(&bad)?,
        })
    }
}

/// The error for an object with none of the three fields: which fields it has, and, for raw
/// text (a `text` field, as `data_io prepare` reads it), which command takes it.
fn no_row_fields(text: &str) -> String {
    let keys: Vec<String> =
        serde_json::from_str::<std::collections::BTreeMap<String, serde::de::IgnoredAny>>(text)
            .map(|map| map.into_keys().collect())
            .unwrap_or_default();
    let shown: Vec<String> = keys.iter().take(6).map(|k| format!("{k:?}")).collect();
    let more = if keys.len() > shown.len() {
        ", ..."
    } else {
        ""
    };
    let hint = if keys.iter().any(|k| k == "text") {
        "; rows of raw text are `data_io prepare`'s input (flat token shards), not tokenize's"
    } else {
        ""
    };
    format!(
        "no condition, instruction or response field (the row has {}{more}): each line must \
         be one JSON object with string fields condition, instruction, response{hint}",
        if shown.is_empty() {
            "none".to_string()
        } else {
            shown.join(", ")
        }
    )
}

/// serde's reason without the " at line L column C" it appends: the message names the
/// file's line and the column already, and serde counts lines within the one line it was given.
/// A surrogate escape without its pair, which serde tells as a broken hex escape, is named.
fn without_position(error: &serde_json::Error, line: &str) -> String {
    let text = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    let reason = text.strip_suffix(&suffix).unwrap_or(&text);
    if reason.contains("hex escape") && has_surrogate_escape(line) {
        format!(
            "{reason}: a \\uD800..\\uDFFF escape must be one half of a pair, high then low \
             (a lone surrogate is no character); re-export the file as UTF-8"
        )
    } else {
        reason.to_string()
    }
}

/// Whether `line` holds an escape `\uD800`..`\uDFFF` (either case).
fn has_surrogate_escape(line: &str) -> bool {
    line.as_bytes().windows(4).any(|w| {
        w[0] == b'\\'
            && w[1] == b'u'
            && matches!(w[2], b'd' | b'D')
            && matches!(w[3], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
    })
}

/// What kind of value a valid JSON text is, from its first byte.
fn json_type_name(json: &str) -> &'static str {
    match json.as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b't' | b'f') => "a boolean",
        Some(b'"') => "a string",
        Some(b'n') => "null",
        _ => "a number",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn reader_over(bytes: &[u8], batch_rows: usize) -> (tempfile::TempDir, JsonlReader) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.jsonl");
        File::create(&path).unwrap().write_all(bytes).unwrap();
        let reader =
            JsonlReader::open(&path, Compression::None, batch_rows, ByteProgress::none()).unwrap();
        (dir, reader)
    }

    fn all_rows(bytes: &[u8]) -> Vec<Result<(String, String, String)>> {
        let (_dir, reader) = reader_over(bytes, 2);
        let mut out = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            for i in 0..batch.len() {
                out.push(batch.row(i).map(|r| {
                    (
                        r.condition.into_owned(),
                        r.instruction.into_owned(),
                        r.response.into_owned(),
                    )
                }));
            }
        }
        out
    }

    /// Lines across the reader's 1 MiB chunks and the batches' 2 MiB, one longer than both,
    /// blank ones, CRLF ends and a last line without a newline: every row read once, in order,
    /// with its line number, against the file split at its newlines.
    #[test]
    fn lines_across_chunks_and_batches_are_read_once_with_their_numbers() {
        let mut data = Vec::new();
        let mut expected = Vec::new();
        let mut line_no = 0u64;
        let mut k = 0usize;
        while data.len() < 7 << 20 {
            line_no += 1;
            let width = match k % 50 {
                0 => 3 << 20, // longer than a chunk and a batch
                7 => 0,       // blank
                _ => (k * 7919) % 3000,
            };
            k += 1;
            if width == 0 {
                data.extend_from_slice(if k.is_multiple_of(2) {
                    b"\n"
                } else {
                    b"  \r\n"
                });
                continue;
            }
            let text = "x".repeat(width);
            let row =
                format!(r#"{{"condition":"{line_no}","instruction":"{text}","response":"r"}}"#);
            data.extend_from_slice(row.as_bytes());
            data.extend_from_slice(if k.is_multiple_of(3) { b"\r\n" } else { b"\n" });
            expected.push((line_no, width));
        }
        // The last line has no newline.
        line_no += 1;
        data.extend_from_slice(br#"{"condition":"end","instruction":"","response":""}"#);
        for batch_rows in [1, 4096] {
            let (_dir, reader) = reader_over(&data, batch_rows);
            let mut got = Vec::new();
            for batch in reader {
                let batch = batch.unwrap();
                for i in 0..batch.len() {
                    let Location::Line(at) = batch.location(i) else {
                        panic!("a line")
                    };
                    let row = batch.row(i).unwrap();
                    got.push((at, row.condition.into_owned(), row.instruction.len()));
                }
            }
            let last = got.pop().expect("rows");
            assert_eq!(last, (line_no, "end".to_string(), 0));
            let got: Vec<(u64, usize)> = got
                .into_iter()
                .map(|(at, condition, width)| {
                    assert_eq!(condition, at.to_string());
                    (at, width)
                })
                .collect();
            assert_eq!(got, expected, "batch_rows {batch_rows}");
        }
    }

    /// Blank lines do not fill a batch: a batch that held none of the file's rows would read
    /// as its end (found by a review: 2 MiB of blank lines dropped every row after them).
    #[test]
    fn long_runs_of_blank_lines_end_no_batch_and_lose_no_row() {
        let row = |n: u32| format!(r#"{{"condition":"{n}","instruction":"i","response":"r"}}"#);
        let blank_lines = "\n".repeat((2 << 20) + 1);
        let blank_line = format!("{}\n", " ".repeat((2 << 20) + 1));
        for blanks in [&blank_lines, &blank_line] {
            let data = format!("{blanks}{}\n{blanks}{}\n{blanks}", row(1), row(2));
            for batch_rows in [1, 4096] {
                let (_dir, mut reader) = reader_over(data.as_bytes(), batch_rows);
                let mut conditions = Vec::new();
                for batch in reader.by_ref() {
                    let batch = batch.unwrap();
                    for i in 0..batch.len() {
                        conditions.push(batch.row(i).unwrap().condition.into_owned());
                    }
                }
                assert_eq!(conditions, ["1", "2"], "batch_rows {batch_rows}");
                let lines = data.matches('\n').count() as u64;
                assert_eq!(reader.lines_read(), lines);
                assert!(reader.source_blake3().is_some());
            }
        }
    }

    /// A batch's buffer keeps the room it was given (so that it is used again), however its
    /// last chunk falls.
    #[test]
    fn batch_buffers_stay_within_their_room() {
        let row = format!(
            r#"{{"condition":"c","instruction":"{}","response":"r"}}"#,
            "x".repeat(1000)
        );
        let data = format!("{row}\n").repeat(9 << 10);
        let (_dir, reader) = reader_over(data.as_bytes(), 4096);
        let mut batches = 0;
        for batch in reader {
            let batch = batch.unwrap();
            assert!(
                batch.buf.capacity() <= BATCH_CAPACITY,
                "{}",
                batch.buf.capacity()
            );
            batches += 1;
        }
        assert!(batches >= 4, "{batches}");
    }

    #[test]
    fn reads_rows_in_order_across_batches_with_escapes_and_crlf() {
        let data = "{\"condition\":\"cot\",\"instruction\":\"q1\",\"response\":\"a1\"}\r\n\
                    \n\
                    {\"response\":\"line\\nbreak \\u00e9\",\"instruction\":\"日本\",\"condition\":\"\",\"extra\":1}\n\
                    {\"condition\":\"direct\",\"instruction\":\"<|im_end|>\",\"response\":\"x\"}";
        let rows: Vec<_> = all_rows(data.as_bytes())
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0], ("cot".into(), "q1".into(), "a1".into()));
        assert_eq!(rows[1], ("".into(), "日本".into(), "line\nbreak é".into()));
        assert_eq!(rows[2].1, "<|im_end|>");
    }

    #[test]
    fn strings_with_and_without_escapes_and_whitespace_around_values() {
        let data = "{ \"condition\" : \"\" , \"instruction\" :  \"plain \u{e9}t\u{e9}\" ,\
                    \"response\":\"tab\\there \\\"q\\\" \\\\ \\u00e9 \\ud83d\\ude00\" }\n\
                    {\"condition\":\"\",\"instruction\":\"\",\"response\":\"\\\\\"}";
        let rows: Vec<_> = all_rows(data.as_bytes())
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(rows[0].1, "plain \u{e9}t\u{e9}");
        assert_eq!(rows[0].2, "tab\there \"q\" \\ \u{e9} \u{1f600}");
        assert_eq!(rows[1], ("".into(), "".into(), "\\".into()));
    }

    #[test]
    fn bad_rows_name_the_line_and_the_problem() {
        let mut data = Vec::new();
        data.extend_from_slice(
            b"{\"condition\":\"cot\",\"instruction\":\"q\",\"response\":\"a\"}\n",
        );
        data.extend_from_slice(b"{not json}\n");
        data.extend_from_slice(b"{\"condition\":\"cot\",\"instruction\":\"q\"}\n");
        data.extend_from_slice(
            b"{\"condition\":\"cot\",\"instruction\":null,\"response\":\"a\"}\n",
        );
        data.extend_from_slice(b"{\"condition\":\"cot\",\"instruction\":3,\"response\":\"a\"}\n");
        data.extend_from_slice(
            b"{\"condition\":\"cot\",\"instruction\":\"\xff\",\"response\":\"a\"}\n",
        );
        data.extend_from_slice(b"[1,2]\n");
        data.extend_from_slice(b"not json\n");
        data.extend_from_slice(b"{\"text\":\"raw text\",\"url\":\"u\"}\n");
        data.extend_from_slice(b"{\"body\":\"x\"}\n");
        // A lone high surrogate, and a short escape that is no surrogate at all.
        data.extend_from_slice(
            b"{\"condition\":\"cot\",\"instruction\":\"x\\ud800y\",\"response\":\"a\"}\n",
        );
        data.extend_from_slice(
            b"{\"condition\":\"cot\",\"instruction\":\"x\\u12\",\"response\":\"a\"}\n",
        );
        let rows = all_rows(&data);
        assert!(rows[0].is_ok());
        let messages: Vec<String> = rows[1..]
            .iter()
            .map(|r| r.as_ref().unwrap_err().to_string())
            .collect();
        assert!(
            messages[0].contains(":line 2: malformed JSON"),
            "{}",
            messages[0]
        );
        assert!(messages[1].contains(":line 3: missing field \"response\""));
        assert!(messages[2].contains(":line 4: field \"instruction\" is null"));
        assert!(messages[3].contains(":line 5: field \"instruction\" is a number"));
        assert!(messages[4].contains(":line 6: invalid UTF-8"));
        assert!(messages[5].contains(":line 7: expected a JSON object, found an array"));
        // Not "found null" because it starts with an n: not JSON at all.
        assert!(
            messages[6].contains(":line 8: malformed JSON at column 2"),
            "{}",
            messages[6]
        );
        // serde's own "at line 1 column 2" is not repeated after the file's line.
        assert!(!messages[6].contains(" at line "), "{}", messages[6]);
        // None of the three fields: what the row has, and raw text sent to prepare.
        assert!(
            messages[7].contains(
                ":line 9: no condition, instruction or response field (the row has \"text\", \
                 \"url\")"
            ) && messages[7].contains("raw text are `data_io prepare`'s input"),
            "{}",
            messages[7]
        );
        assert!(
            messages[8].contains("(the row has \"body\")") && !messages[8].contains("prepare"),
            "{}",
            messages[8]
        );
        assert!(
            messages[9].contains(":line 11: malformed JSON at column")
                && messages[9].contains("must be one half of a pair")
                && messages[9].contains("lone surrogate"),
            "{}",
            messages[9]
        );
        assert!(
            messages[10].contains(":line 12: malformed JSON") && !messages[10].contains("pair"),
            "{}",
            messages[10]
        );
    }

    /// (relative line, instruction) of every row of `range`.
    fn range_rows(path: &Path, range: std::ops::Range<u64>) -> Result<Vec<(u64, String)>> {
        let reader = JsonlReader::open_range(path, range, 2, ByteProgress::none())?;
        let mut out = Vec::new();
        for batch in reader {
            let batch = batch?;
            for i in 0..batch.len() {
                let Location::Line(line) = batch.location(i) else {
                    unreachable!("JSONL rows have lines")
                };
                out.push((line, batch.row(i)?.instruction.into_owned()));
            }
        }
        Ok(out)
    }

    #[test]
    fn byte_ranges_read_their_lines_only_and_count_from_their_start() {
        let row = |q: &str| {
            format!("{{\"condition\":\"\",\"instruction\":\"{q}\",\"response\":\"r\"}}\n")
        };
        let text = format!("\u{feff}{}{}\n{}{}", row("a"), row("b"), row("c"), row("d"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.jsonl");
        std::fs::write(&path, &text).unwrap();
        let cut = (text
            .find("{\"condition\":\"\",\"instruction\":\"c\"")
            .unwrap()) as u64;
        let size = text.len() as u64;
        // The BOM is skipped at the file's start; the blank line counts as a line.
        let first = range_rows(&path, 0..cut).unwrap();
        assert_eq!(first, vec![(1, "a".into()), (2, "b".into())]);
        let second = range_rows(&path, cut..size).unwrap();
        assert_eq!(second, vec![(1, "c".into()), (2, "d".into())]);
        assert!(range_rows(&path, cut..cut).unwrap().is_empty());
        // A range that does not start at a line start, or lies past the end, is a stale plan.
        let err = range_rows(&path, cut + 1..size).unwrap_err();
        assert!(err.to_string().contains("plan again"), "{err}");
        let err = range_rows(&path, 0..size + 1).unwrap_err();
        assert!(err.to_string().contains("plan again"), "{err}");
    }

    #[test]
    fn empty_file_yields_no_batches() {
        let (_dir, mut reader) = reader_over(b"", 8);
        assert!(reader.next().is_none());
        let (_dir, mut reader) = reader_over(b"\n\n", 8);
        assert!(reader.next().is_none());
    }

    const ROW: &str = "{\"condition\":\"cot\",\"instruction\":\"q\",\"response\":\"a\"}\n";

    fn read_file(path: &Path, compression: Compression) -> Result<Vec<String>> {
        instructions(JsonlReader::open(
            path,
            compression,
            2,
            ByteProgress::none(),
        )?)
    }

    /// Every row's instruction, in order.
    fn instructions(reader: JsonlReader) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for batch in reader {
            let batch = batch?;
            for i in 0..batch.len() {
                out.push(batch.row(i)?.instruction.into_owned());
            }
        }
        Ok(out)
    }

    #[test]
    fn gzip_and_zstd_files_stream_like_plain_ones() {
        let dir = tempfile::tempdir().unwrap();
        let text = ROW.repeat(5);
        let gz = dir.path().join("rows.jsonl.gz");
        let mut encoder =
            flate2::write::GzEncoder::new(File::create(&gz).unwrap(), Default::default());
        encoder.write_all(text.as_bytes()).unwrap();
        encoder.finish().unwrap();
        // A second gzip member appended: still one file of rows.
        let member = std::fs::read(&gz).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&gz)
            .unwrap()
            .write_all(&member)
            .unwrap();
        assert_eq!(read_file(&gz, Compression::Gzip).unwrap().len(), 10);
        let zst = dir.path().join("rows.jsonl.zst");
        std::fs::write(&zst, zstd::stream::encode_all(text.as_bytes(), 3).unwrap()).unwrap();
        assert_eq!(read_file(&zst, Compression::Zstd).unwrap(), vec!["q"; 5]);
    }

    #[test]
    fn a_file_of_zstd_frames_reads_on_the_pools_threads_as_one_stream_does() {
        let dir = tempfile::tempdir().unwrap();
        let rows: Vec<String> = (0..3000)
            .map(|i| ROW.replace("\"q\"", &format!("\"q{i}\"")))
            .collect();
        let text = rows.concat();
        let frames: Vec<u8> = text
            .as_bytes()
            .chunks(10_000)
            .flat_map(|chunk| zstd::stream::encode_all(chunk, 3).unwrap())
            .collect();
        let zst = dir.path().join("rows.jsonl.zst");
        std::fs::write(&zst, &frames).unwrap();
        let one = dir.path().join("one.jsonl.zst");
        std::fs::write(&one, zstd::stream::encode_all(text.as_bytes(), 3).unwrap()).unwrap();
        let expected: Vec<String> = (0..3000).map(|i| format!("q{i}")).collect();
        // Frames decompress on the pool's threads only past what one zstd thread keeps up
        // with (`frames::lanes_for`): 12 threads.
        for threads in [1, 12] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                assert_eq!(read_file(&zst, Compression::Zstd).unwrap(), expected);
                assert_eq!(read_file(&one, Compression::Zstd).unwrap(), expected);
                // Decompressed on the pool's threads, the hash is taken apart (None here).
                let hash = hash_after_reading(&zst, Compression::Zstd);
                assert_eq!(hash.is_none(), threads > 1);
                // A bad row is named by its line, as in one stream.
                let bad = dir.path().join("bad.jsonl.zst");
                let mut broken = rows.clone();
                broken[2500] = "{\"condition\": 1}\n".to_owned();
                let stored: Vec<u8> = broken
                    .concat()
                    .as_bytes()
                    .chunks(10_000)
                    .flat_map(|chunk| zstd::stream::encode_all(chunk, 3).unwrap())
                    .collect();
                std::fs::write(&bad, stored).unwrap();
                let reader = JsonlReader::open(&bad, Compression::Zstd, 64, ByteProgress::none());
                let located: Vec<String> = reader
                    .unwrap()
                    .flat_map(|batch| {
                        let batch = batch.unwrap();
                        (0..batch.len())
                            .filter_map(|i| batch.row(i).err().map(|e| e.to_string()))
                            .collect::<Vec<_>>()
                    })
                    .collect();
                assert_eq!(located.len(), 1);
                assert!(located[0].contains(":line 2501: "), "{}", located[0]);
            });
        }
    }

    /// Read to the end by batches, then the hash the reader took.
    fn hash_after_reading(path: &Path, compression: Compression) -> Option<String> {
        let mut reader = JsonlReader::open(path, compression, 3, ByteProgress::none()).unwrap();
        for batch in reader.by_ref() {
            batch.unwrap();
        }
        reader.source_blake3()
    }

    #[test]
    fn the_hash_taken_while_reading_is_the_files_blake3() {
        let dir = tempfile::tempdir().unwrap();
        // Several read buffers' worth, a byte-order mark and no newline at the end.
        let text = format!("\u{feff}{}{}", ROW.repeat(30_000), ROW.trim_end());
        let plain = dir.path().join("rows.jsonl");
        std::fs::write(&plain, &text).unwrap();
        let gz = dir.path().join("rows.jsonl.gz");
        let mut encoder =
            flate2::write::GzEncoder::new(File::create(&gz).unwrap(), Default::default());
        encoder.write_all(text.as_bytes()).unwrap();
        encoder.finish().unwrap();
        let zst = dir.path().join("rows.jsonl.zst");
        std::fs::write(&zst, zstd::stream::encode_all(text.as_bytes(), 3).unwrap()).unwrap();
        for (path, compression) in [
            (&plain, Compression::None),
            (&gz, Compression::Gzip),
            (&zst, Compression::Zstd),
        ] {
            let independent = blake3::hash(&std::fs::read(path).unwrap())
                .to_hex()
                .to_string();
            assert_eq!(
                hash_after_reading(path, compression),
                Some(independent),
                "{path:?}"
            );
        }
        // Part of the file read (one batch, one read buffer of the 1.8 MB) is not the file.
        let mut partly =
            JsonlReader::open(&plain, Compression::None, 3, ByteProgress::none()).unwrap();
        assert_eq!(partly.next().unwrap().unwrap().len(), 3);
        assert_eq!(partly.source_blake3(), None);
        // A range of the file is not the file.
        let size = std::fs::metadata(&plain).unwrap().len();
        let range = JsonlReader::open_range(&plain, 0..size, 3, ByteProgress::none()).unwrap();
        assert_eq!(range.source_blake3(), None);
    }

    #[test]
    fn corrupt_or_truncated_compressed_files_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let text = ROW.repeat(20_000);
        let zst = dir.path().join("rows.jsonl.zst");
        let packed = zstd::stream::encode_all(text.as_bytes(), 3).unwrap();
        std::fs::write(&zst, &packed[..packed.len() - 20]).unwrap();
        let err = read_file(&zst, Compression::Zstd).unwrap_err().to_string();
        let cut = format!("without its end marker after {} bytes (", packed.len() - 20);
        assert!(
            err.contains("rows.jsonl.zst: truncated zstd data after line ") && err.contains(&cut),
            "{err}"
        );
        let gz = dir.path().join("rows.jsonl.gz");
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), Default::default());
        encoder.write_all(text.as_bytes()).unwrap();
        let mut packed = encoder.finish().unwrap();
        std::fs::write(&gz, &packed[..packed.len() / 2]).unwrap();
        let err = read_file(&gz, Compression::Gzip).unwrap_err().to_string();
        let cut = format!("end marker after {} bytes (", packed.len() / 2);
        assert!(
            err.contains("rows.jsonl.gz: truncated gzip data after line") && err.contains(&cut),
            "{err}"
        );
        // Whole, but its CRC-32 (the trailer's first 4 bytes) damaged: the place is the trailer,
        // its last byte (the decoder checks the CRC once it has taken the length after it).
        let crc = packed.len() - 8;
        packed[crc] ^= 0xff;
        std::fs::write(&gz, &packed).unwrap();
        let err = read_file(&gz, Compression::Gzip).unwrap_err().to_string();
        let near = format!(
            "rows.jsonl.gz: corrupt gzip data near byte {} of the file",
            crc + 7
        );
        assert!(err.contains(&near) && err.contains("checksum"), "{err}");
        std::fs::write(&gz, b"plain text, not gzip\n").unwrap();
        let err = read_file(&gz, Compression::Gzip).unwrap_err().to_string();
        assert!(
            err.contains("rows.jsonl.gz: not a gzip file: it begins with 70 6c 61 69"),
            "{err}"
        );
    }

    /// Rows of every length (one spanning many deflate blocks), blank lines between some, no
    /// newline after the last: a one-member `.jsonl.gz` whose blocks end every 301 bytes.
    fn gzip_rows(dir: &Path) -> (PathBuf, Vec<String>) {
        let mut text = String::new();
        let mut wanted = Vec::new();
        for i in 0..1500 {
            let instruction = format!(
                "q{i}{}",
                "é".repeat(if i % 250 == 7 { 2000 } else { i % 41 })
            );
            text.push_str(&ROW.replace("\"q\"", &format!("\"{instruction}\"")));
            wanted.push(instruction);
            if i % 97 == 96 {
                text.push('\n');
            }
        }
        text.pop();
        let path = dir.join("rows.jsonl.gz");
        std::fs::write(
            &path,
            frames::test_files::gzip_in_blocks(text.as_bytes(), 301),
        )
        .unwrap();
        (path, wanted)
    }

    fn read_text_range(
        path: &Path,
        range: Range<u64>,
        total: u64,
        point: Option<&frames::gzip_points::EntryPoint>,
        batch_rows: usize,
    ) -> Result<Vec<String>> {
        let reader = JsonlReader::open_text(
            path,
            range,
            total,
            point.cloned(),
            batch_rows,
            ByteProgress::none(),
        )?;
        instructions(reader)
    }

    /// A gzip stream cut at entry points into text ranges, some holding no line start (the
    /// long rows), reads every row once, in order, however the points are chosen.
    #[test]
    fn text_ranges_from_gzip_entry_points_read_every_row_once() {
        let dir = tempfile::tempdir().unwrap();
        let (path, wanted) = gzip_rows(dir.path());
        let index = frames::gzip_points::entry_points(&path, 1).unwrap();
        let total = index.text;
        let points: Vec<_> = index.points.iter().filter(|p| p.text + 1 < total).collect();
        assert!(points.len() > 100, "{}", points.len());
        for step in [1, 3, 17, 1000] {
            let chosen: Vec<_> = points.iter().step_by(step).skip(1).copied().collect();
            let starts: Vec<u64> = [0]
                .into_iter()
                .chain(chosen.iter().map(|p| p.text + 1))
                .collect();
            let mut read = Vec::new();
            for (k, &start) in starts.iter().enumerate() {
                let end = starts.get(k + 1).copied().unwrap_or(total);
                let point = k.checked_sub(1).map(|k| chosen[k]);
                read.extend(read_text_range(&path, start..end, total, point, 1 + k % 5).unwrap());
            }
            assert_eq!(read, wanted, "every {step}th point");
        }
    }

    #[test]
    fn a_text_range_the_plan_would_not_cut_or_a_changed_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = gzip_rows(dir.path());
        let index = frames::gzip_points::entry_points(&path, 1).unwrap();
        let (total, point) = (index.text, &index.points[40]);
        for (range, point) in [
            (point.text..total, Some(point)),
            (point.text + 2..total, Some(point)),
            (1..total, None),
            (point.text + 1..total + 1, Some(point)),
        ] {
            let err = read_text_range(&path, range.clone(), total, point, 4).unwrap_err();
            assert!(err.to_string().contains("plan again"), "{range:?}: {err}");
        }
        // A text longer than the plan found: the range that reads to its end says so.
        let err = read_text_range(&path, point.text + 1..total - 9, total - 9, Some(point), 4)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("where the plan found") && err.contains("plan again"),
            "{err}"
        );
        // Not said to be damaged: the file is fine, the plan stale.
        assert!(
            !err.contains("corrupt") && !err.contains("re-download"),
            "{err}"
        );
        // Damaged past the point: the place in the file, and the file's line (counted from the
        // point's newlines), not the range's.
        let mut stored = std::fs::read(&path).unwrap();
        let damaged = (point.bit / 8) as usize + 2000;
        stored[damaged] ^= 0x55;
        std::fs::write(&path, &stored).unwrap();
        let err = read_text_range(&path, point.text + 1..total, total, Some(point), 4)
            .unwrap_err()
            .to_string();
        let line: u64 = err
            .split("after line ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{err}"));
        assert!(err.contains("corrupt gzip data near byte"), "{err}");
        assert!(line > point.newlines, "{line} <= {}: {err}", point.newlines);
    }

    #[test]
    fn a_damaged_run_of_parts_counts_its_lines_from_its_start_and_says_so() {
        // Two zstd frames with content checksums, the second's damaged: a scale-out unit
        // reading from the second frame on counts lines from there (the lines before it are
        // not decoded), and says so.
        let frame = |text: String| {
            let mut encoder = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
            encoder.include_checksum(true).unwrap();
            encoder.write_all(text.as_bytes()).unwrap();
            encoder.finish().unwrap()
        };
        let first = frame(ROW.repeat(1_000));
        let mut packed = first.clone();
        packed.extend_from_slice(&frame(ROW.repeat(20_000)));
        let last = packed.len() - 1;
        packed[last] ^= 0xff; // the second frame's checksum
        let dir = tempfile::tempdir().unwrap();
        let zst = dir.path().join("rows.jsonl.zst");
        std::fs::write(&zst, &packed).unwrap();
        let start = first.len() as u64;
        let err = JsonlReader::open_parts(
            &zst,
            Compression::Zstd,
            start,
            None,
            2,
            ByteProgress::none(),
        )
        .unwrap()
        .map(|batch| batch.map(|_| ()))
        .collect::<Result<Vec<()>>>()
        .unwrap_err()
        .to_string();
        let said = format!(" of the unit's parts from byte {start} on (");
        assert!(
            err.contains("corrupt zstd data near byte") && err.contains(&said),
            "{err}"
        );
        // The whole file's reader counts from the file's start, and says nothing of parts.
        let err = read_file(&zst, Compression::Zstd).unwrap_err().to_string();
        assert!(
            err.contains("after line 21000 (") && !err.contains("parts"),
            "{err}"
        );
    }

    #[test]
    fn a_byte_order_mark_at_the_start_is_not_data() {
        let mut data = UTF8_BOM.to_vec();
        data.extend_from_slice(ROW.as_bytes());
        data.extend_from_slice(ROW.as_bytes());
        let rows = all_rows(&data);
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.is_ok()));
        // Only at the very start: a BOM inside the file is a bad row, not silently dropped.
        let mut late = ROW.as_bytes().to_vec();
        late.extend_from_slice(UTF8_BOM);
        late.extend_from_slice(ROW.as_bytes());
        let rows = all_rows(&late);
        assert!(rows[1]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains(":line 2:"));
    }
}
