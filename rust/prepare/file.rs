//! A text or JSONL file (or a byte range of an uncompressed one) read straight into the
//! documents' buffer, decompressed on the way when it is gzip, zstd, bzip2 or xz: no copy
//! through Python.
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

use super::split::Documents;
use crate::error::Error;
use crate::reader::{decompressed, Compression, READ_BUFFER};

const BOM: &[u8] = b"\xef\xbb\xbf";

/// A file's bytes as they are read, counted (before decompression: a compressed file's
/// progress is its size on disk, and an error says how far into the file it came).
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
    input: Mutex<Box<dyn Read + Send>>,
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
}

impl FileFeed {
    /// Open `path` to read bytes `start..end` (`end` None: to the end of the file).
    pub fn open(path: PathBuf, start: u64, end: Option<u64>) -> Result<Self, Error> {
        Self::open_compressed(path, Compression::None, start, end)
    }

    /// Open `path`, stored with `compression`, to read its text's bytes `start..end`; a
    /// compressed file is read whole (`start` 0, `end` None).
    pub fn open_compressed(
        path: PathBuf,
        compression: Compression,
        start: u64,
        end: Option<u64>,
    ) -> Result<Self, Error> {
        let io = |source| cannot_read(&path, source);
        if compression != Compression::None && (start > 0 || end.is_some()) {
            return Err(Error::BadFile {
                path,
                message: "a compressed file is read whole, not by byte ranges".into(),
            });
        }
        let mut file = File::open(&path).map_err(io)?;
        if start > 0 {
            use std::io::Seek;
            file.seek(std::io::SeekFrom::Start(start)).map_err(io)?;
        }
        // An empty file is an empty text, compressed or not (as Python's reader has it).
        let empty = file.metadata().map_err(io)?.len() == 0;
        let compression = if empty {
            Compression::None
        } else {
            compression
        };
        let file_read = Arc::new(AtomicU64::new(0));
        let counted = Counted {
            file,
            read: Arc::clone(&file_read),
        };
        let input: Box<dyn Read + Send> = match compression {
            Compression::None => Box::new(counted),
            _ => decompressed(BufReader::with_capacity(READ_BUFFER, counted), compression)
                .map_err(|e| Self::decoding_error(&path, compression, &file_read, &e))?,
        };
        Ok(Self {
            input: Mutex::new(input),
            compression,
            file_read,
            path,
            next: start,
            end,
            carry: Vec::new(),
            offset: start,
            finished: false,
        })
    }

    /// Bytes read from the file so far (before decompression).
    pub fn file_bytes_read(&self) -> u64 {
        self.file_read.load(Ordering::Relaxed)
    }

    /// A compressed file that does not decompress: cut short, or corrupt, and how far in.
    fn decoding_error(
        path: &std::path::Path,
        compression: Compression,
        file_read: &AtomicU64,
        error: &std::io::Error,
    ) -> Error {
        let name = match compression {
            Compression::Gzip => "gz",
            Compression::Zstd => "zst",
            Compression::Bzip2 => "bz2",
            Compression::Xz => "xz",
            Compression::None => "input",
        };
        let done = file_read.load(Ordering::Relaxed);
        let message = if error.kind() == std::io::ErrorKind::UnexpectedEof {
            format!(
                "truncated {name} file (the compressed stream ends without its end marker \
                 after {done} bytes); re-download or re-compress it"
            )
        } else {
            format!("corrupt {name} file near byte {done} ({error}); re-download or re-compress it")
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
        let before = docs.data.len();
        let at_start = self.next == 0;
        docs.data.append(&mut self.carry);
        let mut search_from = docs.data.len();
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

    /// Append up to `limit` bytes of the file (not past `end`) to `data`; how many.
    fn read_more(&mut self, data: &mut Vec<u8>, limit: usize) -> Result<usize, Error> {
        let want = match self.end {
            Some(end) => (end.saturating_sub(self.next)).min(limit as u64),
            None => limit as u64,
        };
        if want == 0 {
            return Ok(0);
        }
        let input = self.input.get_mut().unwrap_or_else(PoisonError::into_inner);
        let read = input
            .by_ref()
            .take(want)
            .read_to_end(data)
            .map_err(|source| match self.compression {
                Compression::None => cannot_read(&self.path, source),
                _ => Self::decoding_error(&self.path, self.compression, &self.file_read, &source),
            })?;
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
        let dir = std::env::temp_dir().join(format!("data_io_file_feed_{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(format!("t{start}_{limit}_{compression:?}.jsonl"));
        std::fs::write(&path, bytes).expect("written");
        let mut docs = Documents::new();
        docs.begin_source(SourceInfo {
            name: "t".into(),
            format: Format::Lines,
            compressed: false,
            first_line: 1,
        });
        let read = |docs: &mut Documents| -> Result<u64, Error> {
            let mut feed = FileFeed::open_compressed(path.clone(), compression, start, end)?;
            while feed.read(docs, limit)? > 0 {}
            Ok(feed.file_bytes_read())
        };
        let outcome = read(&mut docs);
        let _ = std::fs::remove_file(&path);
        let file_bytes = outcome?;
        // What was read of the file: all of it, or the range.
        let stored = bytes.len() as u64;
        assert_eq!(file_bytes, end.unwrap_or(stored) - start);
        docs.end_source();
        Ok(docs
            .entries
            .iter()
            .map(|e| {
                (
                    String::from_utf8_lossy(docs.bytes(e)).into_owned(),
                    e.offset,
                )
            })
            .collect())
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
        // A compressed file is read whole.
        let error = read_stored(&gzip(&text), Compression::Gzip, 5, None, 64).expect_err("fails");
        assert!(error.to_string().contains("read whole"), "{error}");
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
