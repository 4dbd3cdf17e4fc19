//! A text or JSONL file (or a range of it) read straight into the documents' buffer,
//! decompressed on the way when it is gzip, zstd, bzip2 or xz: no copy through Python. A range
//! of an uncompressed file is given by its byte offsets, cut at document boundaries by the
//! plan; a range of a compressed one by target offsets of its text, the cuts found as the text
//! is read (`cuts.rs`).
//!
//! A compressed file made of parts that decode on their own (zstd frames, BGZF members, xz
//! blocks, bzip2 blocks: `reader/frames`) is decompressed by several threads when the run has them, and a
//! range of it is given by the file offsets of two parts' starts: the range runs from the
//! first document boundary in the first part's text to the first one in the text of the part
//! at its end (the same rule, `cuts.rs`, with the target just past each part's first byte),
//! so it decompresses only its own parts and a little of the next. Its lines and offsets are
//! counted from its first part's start; `Documents::rebase` makes them the file's when an
//! error must name them.
//!
//! Each read appends about `limit` bytes and cuts the whole lines among them into documents
//! (`Documents::scan_from`); the last, unfinished line waits for the next read. A line longer
//! than `limit` is read whole first. As Python's reader does, a UTF-8 byte-order mark at the
//! start of the file is dropped, and a range that ends early (the file shrank since the plan)
//! is an error.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::cuts::CutFinder;
use super::split::{Documents, Format, PartsOrigin};
use crate::error::Error;
use crate::reader::frames::gzip_points::{EntryPoint, FromPoint};
use crate::reader::frames::{self, Consumed, Located, ParallelText, SequentialText};
use crate::reader::{decompressed, Compression, READ_BUFFER};

const BOM: &[u8] = b"\xef\xbb\xbf";

/// A file's bytes as they are read, counted (before decompression: a compressed file's
/// progress is its size on disk). Where an error is, is what the decoder consumed of them
/// (`frames::Consumed`), not this: the buffer reads ahead.
struct Counted {
    file: File,
    read: Arc<AtomicU64>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A file being read into a `Documents` buffer.
pub struct FileFeed {
    /// In a `Mutex` only so that the feed is `Sync` as its Python owner must be (a decoder is
    /// `Send` only); reached through `get_mut`, never locked.
    input: Mutex<Input>,
    compression: Compression,
    /// Bytes read from the file itself (compressed ones, for a compressed file).
    file_read: Arc<AtomicU64>,
    path: PathBuf,
    /// The text offset of the next byte to read (the file offset, when it is not compressed).
    next: u64,
    /// Where to stop (a range's end), or the end of the file.
    end: Option<u64>,
    /// The start of an unfinished line, read but not yet cut.
    carry: Vec<u8>,
    /// The text offset of the first byte of `carry` (or of the next byte read).
    offset: u64,
    finished: bool,
    /// A compressed file's range: the cuts for its target offsets, found as the text is read.
    targets: Option<Targets>,
    /// A range of parts not at the file's start: where its lines and offsets count from.
    origin: Option<PartsOrigin>,
    /// The file's newlines before the text read (a gzip entry point's): added to the start
    /// cut's line, found from where reading began.
    lines_before: u64,
}

/// The text being read, and (a range of parts) the text after the range's last part, read
/// only as far as the range's end cut.
struct Input {
    now: Box<dyn Read + Send>,
    then: Option<Box<dyn Read + Send>>,
}

/// The cuts of a compressed file's range (`cuts.rs`).
struct Targets {
    start: CutFinder,
    /// None: to the text's end (or, in a range of parts, not known until its parts are read).
    end: Option<CutFinder>,
    blocks: bool,
}

impl FileFeed {
    /// Open `path` to read bytes `start..end` (`end` None: to the end of the file).
    pub fn open(path: PathBuf, start: u64, end: Option<u64>) -> Result<Self, Error> {
        Self::open_compressed(path, Compression::None, start, end, Format::Lines, 1)
    }

    /// Open `path`, stored with `compression`, to read its text's bytes `start..end` (`end`
    /// None: to its end), read as `format`. In a compressed file `start` and `end` are targets:
    /// the range runs from the cut for `start` to the cut for `end` (`cuts.rs`). A whole
    /// compressed file of several parts is decompressed by `lanes` threads.
    pub fn open_compressed(
        path: PathBuf,
        compression: Compression,
        start: u64,
        end: Option<u64>,
        format: Format,
        lanes: usize,
    ) -> Result<Self, Error> {
        Self::open_text(path, compression, start, end, format, lanes, None)
    }

    /// Open the gzip file `path` to read the range between the cuts for targets `start` and
    /// `end` (`end` None: to the text's end), from its entry `point` (`frames::gzip_points`):
    /// only the text from the point on is decompressed, so `start` must lie past the point's
    /// text offset (the plan puts it one byte past). Lines are numbered as the file's.
    pub fn open_at_point(
        path: PathBuf,
        point: &EntryPoint,
        start: u64,
        end: Option<u64>,
        format: Format,
    ) -> Result<Self, Error> {
        if start <= point.text {
            return Err(Error::Config(format!(
                "a range from an entry point starts past its text offset {}, not at {start}",
                point.text
            )));
        }
        // A file cut short since the plan would otherwise be said to end at the point.
        let size = std::fs::metadata(&path)
            .map_err(|source| cannot_read(&path, source))?
            .len();
        if size <= point.bit / 8 {
            return Err(Error::BadFile {
                path,
                message: format!(
                    "ends at byte {size}, before the plan's entry point at byte {}; the file \
                     changed since the plan: plan again",
                    point.bit / 8
                ),
            });
        }
        Self::open_text(path, Compression::Gzip, start, end, format, 1, Some(point))
    }

    fn open_text(
        path: PathBuf,
        compression: Compression,
        start: u64,
        end: Option<u64>,
        format: Format,
        lanes: usize,
        point: Option<&EntryPoint>,
    ) -> Result<Self, Error> {
        let io = |source| cannot_read(&path, source);
        let blocks = format == Format::Blocks;
        let targets =
            (compression != Compression::None && (start > 0 || end.is_some())).then(|| Targets {
                start: CutFinder::new(start, blocks),
                end: end.map(|end| CutFinder::new(end, blocks)),
                blocks,
            });
        if targets.is_none() && compression != Compression::None && lanes > 1 {
            let parts = frames::parts(&path, compression)?;
            if parts.list.len() > 1 {
                return Self::open_parts(path, parts, 0, None, format, lanes);
            }
        }
        // A compressed file is read from its text's start (or its entry point), up to the cut
        // for `start`.
        let (start, end) = match (&targets, point) {
            (Some(_), Some(point)) => (point.text, None),
            (Some(_), None) => (0, None),
            (None, _) => (start, end),
        };
        // Where the file is read from: a byte offset of its text, or the point's first byte.
        let seek = point.map_or(start, |point| point.bit / 8);
        let mut file = File::open(&path).map_err(io)?;
        if seek > 0 {
            use std::io::Seek;
            file.seek(std::io::SeekFrom::Start(seek)).map_err(io)?;
        }
        // An empty file is an empty text, compressed or not (as Python's reader has it).
        let empty = file.metadata().map_err(io)?.len() == 0;
        let compression = if empty {
            Compression::None
        } else {
            compression
        };
        let file_read = Arc::new(AtomicU64::new(0));
        let input: Box<dyn Read + Send> = match compression {
            // The file itself, counted by `read_more` as its text: a `Read` of our own around
            // it would be read through `Read::read`, for which `read_to_end` zeroes the
            // buffer first (std's `read_buf`, which skips that, cannot be written outside std
            // yet): 12% of the reading thread's time in `memset`, now gone (the first touch of
            // the batch's fresh pages, which it also paid, is now paid in the kernel's copy).
            Compression::None => Box::new(file),
            _ => {
                let counted = Counted {
                    file,
                    read: Arc::clone(&file_read),
                };
                // Its errors name the file offset the decoder had consumed to.
                let reached = Arc::new(AtomicU64::new(seek));
                let buffered = BufReader::with_capacity(READ_BUFFER, counted);
                let consumed = Consumed::new(buffered, seek, Arc::clone(&reached), compression);
                let text: Box<dyn Read + Send> = match point {
                    Some(point) => Box::new(
                        FromPoint::new(consumed, point)
                            .map_err(|e| Self::decoding_error(&path, compression, seek, &e))?,
                    ),
                    None => decompressed(consumed, compression)
                        .map_err(|e| Self::decoding_error(&path, compression, 0, &e))?,
                };
                Box::new(Located::new(text, reached, seek, compression))
            }
        };
        Ok(Self {
            input: Mutex::new(Input {
                now: input,
                then: None,
            }),
            compression,
            file_read,
            path,
            next: start,
            end,
            carry: Vec::new(),
            offset: start,
            finished: false,
            targets,
            origin: None,
            lines_before: point.map_or(0, |point| point.newlines),
        })
    }

    /// Open the compressed `path`, whose parts are `parts` (`frames::parts`, or `parts_in` the
    /// range), to read the range
    /// between the parts starting at file offsets `start` and `end` (None: to the end),
    /// decompressed by `lanes` threads. Its documents' lines and offsets are counted from
    /// `start`'s part (`Documents::rebase`).
    pub fn open_parts(
        path: PathBuf,
        parts: frames::Parts,
        start: u64,
        end: Option<u64>,
        format: Format,
        lanes: usize,
    ) -> Result<Self, Error> {
        let range = parts.planned(&path, start, end)?;
        let file_read = Arc::new(AtomicU64::new(0));
        let rest = range.end..parts.list.len();
        let compression = parts.compression;
        let parts = Arc::new(parts);
        let now: Box<dyn Read + Send> = match lanes {
            0 | 1 => Box::new(SequentialText::new(
                path.clone(),
                Arc::clone(&parts),
                range,
                Arc::clone(&file_read),
            )),
            _ => Box::new(ParallelText::new(
                &path,
                Arc::clone(&parts),
                range,
                lanes,
                Arc::clone(&file_read),
            )),
        };
        // Past the range's parts only the end cut is looked for: decoded as it is read, on
        // this thread (usually a few kilobytes of the next part).
        let then = (!rest.is_empty()).then(|| {
            let text = SequentialText::new(path.clone(), parts, rest, Arc::default());
            Box::new(text) as Box<dyn Read + Send>
        });
        let blocks = format == Format::Blocks;
        let origin = (start > 0).then(|| PartsOrigin {
            path: path.clone(),
            compression,
            start,
        });
        // A range from the file's start is read as the whole file is: its own line numbers.
        let targets = (start > 0 || then.is_some()).then(|| Targets {
            start: CutFinder::new(u64::from(start > 0), blocks),
            end: None,
            blocks,
        });
        Ok(Self {
            input: Mutex::new(Input { now, then }),
            compression,
            file_read,
            path,
            next: 0,
            end: None,
            carry: Vec::new(),
            offset: 0,
            finished: false,
            targets,
            origin,
            lines_before: 0,
        })
    }

    /// Where this range's lines and offsets are counted from, when not from the text's start.
    pub fn origin(&self) -> Option<&PartsOrigin> {
        self.origin.as_ref()
    }

    /// Bytes read from the file so far (before decompression).
    pub fn file_bytes_read(&self) -> u64 {
        self.file_read.load(Ordering::Relaxed)
    }

    /// A compressed file that does not decompress: cut short, or corrupt, and where: the file
    /// offset the decoder had consumed to (`frames::Damaged`, which every decoder's errors
    /// carry), else `fallback`, the file's bytes read.
    fn decoding_error(
        path: &std::path::Path,
        compression: Compression,
        fallback: u64,
        error: &std::io::Error,
    ) -> Error {
        let name = match compression {
            Compression::Gzip => "gz",
            Compression::Zstd => "zst",
            Compression::Bzip2 => "bz2",
            Compression::Xz => "xz",
            Compression::None => "input",
        };
        let place = frames::damaged_at(error);
        // Cut short: the bytes the decoder took, all the file's; corrupt: the one it decoded.
        let done = place.map_or(fallback, |place| place.reached);
        let near = place.map_or(fallback, |place| place.near);
        let message = if let Some(not) = crate::reader::not_compressed(error) {
            not.to_string()
        } else if error.kind() == std::io::ErrorKind::UnexpectedEof {
            format!(
                "truncated {name} file (the compressed stream ends without its end marker \
                 after {done} bytes); re-download or re-compress it"
            )
        } else {
            format!("corrupt {name} file near byte {near} ({error}); re-download or re-compress it")
        };
        Error::BadFile {
            path: path.to_path_buf(),
            message,
        }
    }

    /// Read about `limit` more bytes into `docs` and cut its whole lines into documents;
    /// how many bytes were read. 0: the end was reached, and the last line was cut too.
    pub fn read(&mut self, docs: &mut Documents, limit: usize) -> Result<usize, Error> {
        if self.finished {
            return Ok(0);
        }
        if self
            .targets
            .as_ref()
            .is_some_and(|t| t.start.found().is_none())
            && !self.skip_to_start(docs, limit)?
        {
            self.finished = true; // the text ends before the range's start
            return Ok(0);
        }
        let before = docs.data.len();
        let at_start = self.next == 0;
        docs.data.append(&mut self.carry);
        // The carry is an unfinished line, or (after `skip_to_start`) the text past the cut.
        let mut search_from = before;
        let mut total = 0;
        loop {
            let read = self.read_more(&mut docs.data, limit)?;
            total += read;
            let cut = if read == 0 {
                self.finished = true; // the end: the last line, without its newline
                Some(docs.data.len())
            } else {
                memchr::memrchr(b'\n', &docs.data[search_from..]).map(|i| search_from + i + 1)
            };
            let Some(mut cut) = cut else {
                search_from = docs.data.len(); // a line longer than `limit`: read on
                continue;
            };
            self.carry.extend_from_slice(&docs.data[cut..]);
            docs.data.truncate(cut);
            if at_start && docs.data[before..].starts_with(BOM) {
                docs.data.drain(before..before + BOM.len());
                self.offset += BOM.len() as u64;
                cut -= BOM.len();
            }
            docs.scan_from(before, self.offset);
            self.offset += (cut - before) as u64;
            return Ok(total);
        }
    }

    /// Read and discard a compressed file's text before its range's start cut; the text read
    /// past the cut becomes the carry, and the documents' lines are numbered from the cut's.
    /// False when the text ends first (the range is empty).
    fn skip_to_start(&mut self, docs: &mut Documents, limit: usize) -> Result<bool, Error> {
        let mut piece = Vec::with_capacity(limit);
        loop {
            piece.clear();
            let offset = self.next;
            if self.read_more(&mut piece, limit)? == 0 {
                return Ok(false);
            }
            let Some(targets) = self.targets.as_mut() else {
                return Ok(true);
            };
            if let Some((start, line)) = targets.start.feed(&piece, offset) {
                // `read_more` stops at the end cut, which is never before the start's.
                let from = usize::try_from(start - offset).unwrap_or(usize::MAX);
                self.carry = piece.get(from..).unwrap_or_default().to_vec();
                self.offset = start;
                docs.number_lines_from(line + self.lines_before);
                return Ok(true);
            }
        }
    }

    /// Append up to `limit` bytes of the file (not past `end`, nor past a compressed range's
    /// end cut) to `data`; how many.
    fn read_more(&mut self, data: &mut Vec<u8>, limit: usize) -> Result<usize, Error> {
        let want = match self.end {
            Some(end) => (end.saturating_sub(self.next)).min(limit as u64),
            None => limit as u64,
        };
        if want == 0 {
            return Ok(0);
        }
        let input = self.input.get_mut().unwrap_or_else(PoisonError::into_inner);
        let read = loop {
            let read =
                input
                    .now
                    .by_ref()
                    .take(want)
                    .read_to_end(data)
                    .map_err(|source| match self.compression {
                        Compression::None => cannot_read(&self.path, source),
                        _ => Self::decoding_error(
                            &self.path,
                            self.compression,
                            self.file_read.load(Ordering::Relaxed),
                            &source,
                        ),
                    })?;
            // The range's parts are read: its end cut is the first one in the next part's
            // text, whose first byte is the next one read.
            match input.then.take() {
                Some(then) if read == 0 => {
                    input.now = then;
                    if let Some(targets) = self.targets.as_mut() {
                        targets.end = Some(CutFinder::new(self.next + 1, targets.blocks));
                    }
                }
                then => {
                    input.then = then;
                    break read;
                }
            }
        };
        if self.compression == Compression::None {
            // Read from the file itself (see `open`): its bytes are the text's.
            self.file_read.fetch_add(read as u64, Ordering::Relaxed);
        }
        let read = self.stop_at_end_cut(data, read);
        self.next += read as u64;
        if read == 0 {
            if let Some(end) = self.end {
                return Err(Error::BadFile {
                    path: self.path.clone(),
                    message: format!(
                        "ends at byte {}, before the planned range's end at {end}; the file \
                         changed since the plan: plan again",
                        self.next
                    ),
                });
            }
        }
        Ok(read)
    }

    /// The `read` bytes just appended to `data`, cut short at a compressed range's end cut if
    /// they hold it (the range then ends there: `end` is set); how many are kept.
    fn stop_at_end_cut(&mut self, data: &mut Vec<u8>, read: usize) -> usize {
        let Some(finder) = self.targets.as_mut().and_then(|t| t.end.as_mut()) else {
            return read;
        };
        let new = data.len() - read;
        let Some((end, _)) = finder.feed(&data[new..], self.next) else {
            return read;
        };
        let kept = usize::try_from(end.saturating_sub(self.next)).map_or(read, |k| k.min(read));
        data.truncate(new + kept);
        self.end = Some(end);
        kept
    }
}

/// The newlines and bytes of the text before the part at byte `origin.start` of its file (what
/// `Documents::rebase` adds to a range's lines and offsets), decompressed on `lanes` threads.
pub fn text_before(origin: &PartsOrigin, lanes: usize) -> Result<(u64, u64), Error> {
    let (path, compression) = (&origin.path, origin.compression);
    frames::text_before(path, compression, origin.start, lanes, |error, read| {
        FileFeed::decoding_error(path, compression, read, error)
    })
}

/// An estimate of the length of a compressed file's text from its first `sample` bytes of text
/// decompressed (the length itself when the text is no longer): how the plan decides how many
/// ranges to cut the file into (`cuts.rs`). The file is read through a small buffer, so that
/// the compressed bytes counted are about those the sample took.
pub fn text_length_estimate(
    path: &std::path::Path,
    compression: Compression,
    sample: u64,
) -> Result<u64, Error> {
    let io = |source| cannot_read(path, source);
    let file = File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    if size == 0 || compression == Compression::None {
        return Ok(size);
    }
    let read = Arc::new(AtomicU64::new(0));
    let counted = Counted {
        file,
        read: Arc::clone(&read),
    };
    let decoding = |e: std::io::Error| {
        FileFeed::decoding_error(path, compression, read.load(Ordering::Relaxed), &e)
    };
    let reached = Arc::new(AtomicU64::new(0));
    let buffered = BufReader::with_capacity(64 << 10, counted);
    let consumed = Consumed::new(buffered, 0, Arc::clone(&reached), compression);
    let text = decompressed(consumed, compression).map_err(decoding)?;
    let mut text = Located::new(text, reached, 0, compression);
    let sampled =
        std::io::copy(&mut (&mut text).take(sample), &mut std::io::sink()).map_err(decoding)?;
    if sampled < sample {
        return Ok(sampled);
    }
    let consumed = u128::from(read.load(Ordering::Relaxed).max(1));
    Ok(u64::try_from(u128::from(sampled) * u128::from(size) / consumed).unwrap_or(u64::MAX))
}

/// A file the system would not read.
fn cannot_read(path: &std::path::Path, source: std::io::Error) -> Error {
    Error::BadFile {
        path: path.to_path_buf(),
        message: format!("cannot read it ({source}); check that it exists and is readable"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prepare::split::{Format, SourceInfo};

    fn read_all(bytes: &[u8], start: u64, end: Option<u64>, limit: usize) -> Vec<(String, u64)> {
        read_stored(bytes, Compression::None, start, end, limit).expect("read")
    }

    /// The documents (text, offset) of a file holding `bytes`, stored with `compression`.
    fn read_stored(
        bytes: &[u8],
        compression: Compression,
        start: u64,
        end: Option<u64>,
        limit: usize,
    ) -> Result<Vec<(String, u64)>, Error> {
        let (documents, file_bytes) =
            read_as(bytes, compression, start, end, limit, Format::Lines)?;
        // What was read of the file: all of it, or the range.
        let stored = bytes.len() as u64;
        assert_eq!(file_bytes, end.unwrap_or(stored) - start);
        Ok(documents
            .into_iter()
            .map(|(text, offset, _)| (text, offset))
            .collect())
    }

    /// A document read: its text, offset and line.
    type ReadDocument = (String, u64, u64);

    /// The documents (text, offset, line) of a file holding `bytes`, stored with
    /// `compression`, read as `format` (bytes `start..end` of its text, or the range between
    /// the cuts for targets `start` and `end` when it is compressed), and the file's bytes read.
    fn read_as(
        bytes: &[u8],
        compression: Compression,
        start: u64,
        end: Option<u64>,
        limit: usize,
        format: Format,
    ) -> Result<(Vec<ReadDocument>, u64), Error> {
        let name = format!("t{start}_{end:?}_{limit}_{compression:?}_{format:?}");
        read_with(bytes, &name, limit, format, |path| {
            FileFeed::open_compressed(path, compression, start, end, format, 1)
        })
    }

    /// The documents (text, offset, line) that `open` reads from a file holding `bytes`, read
    /// as `format` `limit` bytes at a time, their lines and offsets the file's
    /// (`Documents::rebase`), and the file's bytes read.
    fn read_with(
        bytes: &[u8],
        name: &str,
        limit: usize,
        format: Format,
        open: impl FnOnce(PathBuf) -> Result<FileFeed, Error>,
    ) -> Result<(Vec<ReadDocument>, u64), Error> {
        let dir = std::env::temp_dir().join(format!("data_io_file_feed_{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(name);
        std::fs::write(&path, bytes).expect("written");
        let mut docs = Documents::new();
        docs.begin_source(SourceInfo {
            name: "t".into(),
            format,
            compressed: false,
            first_line: 1,
            origin: None,
        });
        let read = |docs: &mut Documents| -> Result<u64, Error> {
            let mut feed = open(path.clone())?;
            docs.set_origin(feed.origin().cloned());
            while feed.read(docs, limit)? > 0 {}
            docs.end_source();
            docs.rebase(|origin| text_before(origin, 2))?;
            Ok(feed.file_bytes_read())
        };
        let outcome = read(&mut docs);
        let _ = std::fs::remove_file(&path);
        let file_bytes = outcome?;
        let documents = docs
            .entries
            .iter()
            .map(|e| {
                (
                    String::from_utf8_lossy(docs.bytes(e)).into_owned(),
                    e.offset,
                    e.line,
                )
            })
            .collect();
        Ok((documents, file_bytes))
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), Default::default());
        encoder.write_all(bytes).expect("compressed");
        encoder.finish().expect("compressed")
    }

    fn zstd(bytes: &[u8]) -> Vec<u8> {
        zstd::stream::encode_all(bytes, 3).expect("compressed")
    }

    fn bzip2(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        encoder.write_all(bytes).expect("compressed");
        encoder.finish().expect("compressed")
    }

    fn xz(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut encoder = liblzma::write::XzEncoder::new(Vec::new(), 1);
        encoder.write_all(bytes).expect("compressed");
        encoder.finish().expect("compressed")
    }

    /// A compressor of test data.
    type Compress = fn(&[u8]) -> Vec<u8>;

    /// Each compression, with its function and the name messages give it.
    const STORED: [(Compression, Compress, &str); 4] = [
        (Compression::Gzip, gzip, "gz"),
        (Compression::Zstd, zstd, "zst"),
        (Compression::Bzip2, bzip2, "bz2"),
        (Compression::Xz, xz, "xz"),
    ];

    #[test]
    fn compressed_files_read_as_their_text_members_and_frames_included() {
        let text = b"\xef\xbb\xbfone\ntwo two\r\n\nthree";
        let plain = read_all(text, 0, None, 64);
        for limit in [1, 3, 64] {
            for (compression, compress, _) in STORED {
                // `cat a.gz b.gz` is one gzip file; zstd frames, bzip2 and xz streams follow
                // one another as parallel compressors write them.
                for stored in [
                    compress(text),
                    [compress(&text[..9]), compress(&text[9..])].concat(),
                ] {
                    let read = read_stored(&stored, compression, 0, None, limit).expect("read");
                    assert_eq!(read, plain, "{compression:?} limit {limit}");
                }
            }
        }
        // An empty file is an empty text, compressed or not.
        for (compression, _, _) in STORED {
            assert_eq!(read_stored(b"", compression, 0, None, 8).expect("read"), []);
        }
    }

    #[test]
    fn a_cut_or_corrupt_compressed_file_names_itself_and_how_far_it_got() {
        let text: Vec<u8> = (0..20_000)
            .flat_map(|i| format!("document number {i}\n\n").into_bytes())
            .collect();
        for (compression, compress, name) in STORED {
            let stored = compress(&text);
            let cut = &stored[..stored.len() / 2];
            let error = read_stored(cut, compression, 0, None, 1 << 16)
                .expect_err("fails")
                .to_string();
            assert!(error.contains(&format!("truncated {name} file")), "{error}");
            assert!(error.contains("re-download or re-compress it"), "{error}");
            let mut garbled = stored.clone();
            for byte in &mut garbled[20..60] {
                *byte ^= 0x5a;
            }
            let error = read_stored(&garbled, compression, 0, None, 1 << 16)
                .expect_err("fails")
                .to_string();
            assert!(error.contains(&format!(" {name} file")), "{error}");
        }
    }

    /// Documents of all lengths (one longer than a unit), blank lines of spaces, tabs and
    /// U+3000, a line of spaces that then goes on, carriage returns, a byte-order mark.
    fn documents_of_every_shape() -> Vec<u8> {
        let mut rng = 17u64;
        let mut next = move |n: u64| {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 33) % n
        };
        let mut text = b"\xef\xbb\xbf".to_vec();
        for i in 0..300 {
            let words = if i == 100 { 400 } else { next(12) };
            for w in 0..=words {
                text.extend_from_slice(format!("w{w}").as_bytes());
                text.push(if next(5) == 0 { b'\n' } else { b' ' });
            }
            let blank: &[u8] = match next(6) {
                0 => b"\n\n",
                1 => b"\n  \t\n",
                2 => b"\n\xe3\x80\x80\r\n\n",
                3 => b"\n   not blank after all\n\n",
                _ => b"\n",
            };
            text.extend_from_slice(blank);
        }
        text.extend_from_slice(b"the end, without a newline");
        text
    }

    #[test]
    fn the_ranges_of_a_file_of_parts_read_its_documents_once_each_with_the_files_lines() {
        use crate::reader::frames;
        let text = documents_of_every_shape();
        // Parts of 50 bytes of text: documents span many parts, and a range may hold none.
        let chunks: Vec<&[u8]> = text.chunks(50).collect();
        let parted: [(Compression, Vec<u8>); 3] = [
            (
                Compression::Zstd,
                chunks.iter().flat_map(|c| zstd(c)).collect(),
            ),
            (
                Compression::Gzip,
                crate::reader::frames::test_files::bgzf(&text, 50),
            ),
            (Compression::Xz, chunks.iter().flat_map(|c| xz(c)).collect()),
        ];
        for format in [Format::Blocks, Format::Lines] {
            let (whole, _) = read_as(&text, Compression::None, 0, None, 256, format).expect("read");
            for (compression, stored) in &parted {
                let name = format!("parts_{compression:?}_{format:?}");
                let path = std::env::temp_dir().join(format!("{name}_{}", std::process::id()));
                std::fs::write(&path, stored).expect("written");
                let starts = frames::parts(&path, *compression).expect("parts").starts();
                let _ = std::fs::remove_file(&path);
                assert!(starts.len() >= chunks.len(), "{compression:?}");
                // Whole, on one and on two lanes.
                for lanes in [1, 2] {
                    let (read, bytes) = read_with(stored, &name, 64, format, |path| {
                        FileFeed::open_compressed(path, *compression, 0, None, format, lanes)
                    })
                    .expect("read");
                    assert_eq!(read, whole, "{compression:?} {format:?} {lanes} lanes");
                    assert_eq!(bytes, stored.len() as u64);
                }
                // Ranges of 1, 3 and 40 parts.
                for step in [1, 3, 40] {
                    let cuts: Vec<u64> = starts.iter().copied().step_by(step).collect();
                    let mut ranges = Vec::new();
                    for (k, &start) in cuts.iter().enumerate() {
                        let end = cuts.get(k + 1).copied();
                        let limit = [64, 256, 1 << 16][k % 3];
                        let (range, _) = read_with(stored, &name, limit, format, |path| {
                            // One lane (decoded as read) and two, in turn.
                            let lanes = 1 + k % 2;
                            let parts = frames::parts_in(&path, *compression, start, end)?;
                            FileFeed::open_parts(path, parts, start, end, format, lanes)
                        })
                        .expect("read");
                        ranges.extend(range);
                    }
                    assert_eq!(ranges, whole, "{compression:?} {format:?} step {step}");
                }
            }
        }
    }

    #[test]
    fn a_range_must_start_at_a_part() {
        let stored: Vec<u8> = [b"a\n".as_slice(), b"b\n"]
            .iter()
            .flat_map(|c| zstd(c))
            .collect();
        let error = read_with(&stored, "not_a_part", 64, Format::Lines, |path| {
            let parts = crate::reader::frames::parts_in(&path, Compression::Zstd, 1, None)?;
            FileFeed::open_parts(path, parts, 1, None, Format::Lines, 1)
        })
        .expect_err("no part there")
        .to_string();
        assert!(
            error.contains("no compressed part starts at byte 1"),
            "{error}"
        );
    }

    #[test]
    fn the_ranges_of_a_compressed_file_read_its_documents_once_each() {
        let text = documents_of_every_shape();
        for format in [Format::Blocks, Format::Lines] {
            for (compression, compress, _) in STORED {
                let stored = compress(&text);
                let (whole, _) = read_as(&stored, compression, 0, None, 256, format).expect("read");
                // Every byte a target (with one compression: a unit decompresses all before it).
                let every_byte = if compression == Compression::Zstd {
                    1
                } else {
                    97
                };
                for unit in [every_byte, 97, 700, 5000, 1 << 20] {
                    let units = (text.len() as u64).div_ceil(unit);
                    let mut ranges = Vec::new();
                    for k in 0..units {
                        let end = (k + 1 < units).then_some((k + 1) * unit);
                        let limit = [64, 256, 1 << 16][k as usize % 3];
                        let (range, _) =
                            read_as(&stored, compression, k * unit, end, limit, format)
                                .expect("read");
                        ranges.extend(range);
                    }
                    assert_eq!(ranges, whole, "{format:?} {compression:?} unit {unit}");
                }
            }
        }
        assert!(
            read_as(&gzip(&text), Compression::Gzip, 0, None, 64, Format::Blocks)
                .expect("read")
                .0
                .iter()
                .any(|(_, _, line)| *line > 100)
        );
    }

    #[test]
    fn ranges_from_gzip_entry_points_read_the_documents_once_each() {
        use crate::reader::frames::gzip_points::entry_points;
        let text = documents_of_every_shape();
        let stored = crate::reader::frames::test_files::gzip_in_blocks(&text, 301);
        let file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(file.path(), &stored).expect("written");
        let points = entry_points(file.path(), 1).expect("indexed").points;
        assert!(points.len() > 20, "{}", points.len());
        assert!(points.iter().any(|p| p.bit % 8 != 0) && points.iter().any(|p| p.bit % 8 == 0));
        for format in [Format::Blocks, Format::Lines] {
            let (whole, _) =
                read_as(&stored, Compression::Gzip, 0, None, 256, format).expect("read");
            let name = format!("points_{format:?}");
            for step in [1, 2, 7, 1000] {
                let chosen: Vec<_> = points.iter().step_by(step).skip(1).collect();
                let starts: Vec<u64> = chosen.iter().map(|p| p.text + 1).collect();
                let mut ranges = Vec::new();
                for k in 0..=chosen.len() {
                    let end = starts.get(k).copied();
                    let limit = [64, 256, 1 << 16][k % 3];
                    let (range, _) = read_with(&stored, &name, limit, format, |path| match k {
                        0 => FileFeed::open_compressed(path, Compression::Gzip, 0, end, format, 1),
                        _ => {
                            FileFeed::open_at_point(path, chosen[k - 1], starts[k - 1], end, format)
                        }
                    })
                    .expect("read");
                    ranges.extend(range);
                }
                assert_eq!(ranges, whole, "{format:?} step {step}");
            }
        }
    }

    #[test]
    fn a_missing_file_is_an_input_error_naming_it() {
        let missing = std::env::temp_dir().join("data_io_file_feed_missing.txt");
        let error = FileFeed::open(missing.clone(), 0, None)
            .err()
            .expect("fails");
        assert_eq!(error.kind().name(), crate::error::ErrorKind::Input.name());
        assert!(
            error.to_string().contains("data_io_file_feed_missing.txt"),
            "{error}"
        );
    }

    #[test]
    fn lines_come_whole_with_their_offsets_for_any_read_size() {
        let text = b"\xef\xbb\xbfone\ntwo two\r\n\nthree";
        for limit in [1, 2, 3, 5, 64] {
            assert_eq!(
                read_all(text, 0, None, limit),
                [
                    ("one".into(), 3),
                    ("two two".into(), 7),
                    ("three".into(), 17)
                ],
                "limit {limit}"
            );
        }
        // A range from a line start: its own offsets, no byte-order mark to drop.
        assert_eq!(read_all(text, 7, Some(17), 4), [("two two".into(), 7)]);
    }
}
