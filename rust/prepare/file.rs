//! An uncompressed text or JSONL file (or a byte range of one) read straight into the
//! documents' buffer: no copy through Python, whose reading stays for compressed files.
//!
//! Each read appends about `limit` bytes and cuts the whole lines among them into documents
//! (`Documents::scan_from`); the last, unfinished line waits for the next read. A line longer
//! than `limit` is read whole first. As Python's reader does, a UTF-8 byte-order mark at the
//! start of the file is dropped, and a range that ends early (the file shrank since the plan)
//! is an error.

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;

use super::split::Documents;
use crate::error::Error;

const BOM: &[u8] = b"\xef\xbb\xbf";

/// A file being read into a `Documents` buffer.
pub struct FileFeed {
    file: File,
    path: PathBuf,
    /// The file offset of the next byte to read.
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
        let io = |source: std::io::Error| Error::BadFile {
            path: path.clone(),
            message: format!("cannot read it ({source}); check that it exists and is readable"),
        };
        let mut file = File::open(&path).map_err(io)?;
        if start > 0 {
            use std::io::Seek;
            file.seek(std::io::SeekFrom::Start(start)).map_err(io)?;
        }
        Ok(Self {
            file,
            path,
            next: start,
            end,
            carry: Vec::new(),
            offset: start,
            finished: false,
        })
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
        let read = (&self.file)
            .take(want)
            .read_to_end(data)
            .map_err(|source| Error::BadFile {
                path: self.path.clone(),
                message: format!("cannot read it ({source}); check that it exists and is readable"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prepare::split::{Format, SourceInfo};

    fn read_all(bytes: &[u8], start: u64, end: Option<u64>, limit: usize) -> Vec<(String, u64)> {
        let dir = std::env::temp_dir().join(format!("data_io_file_feed_{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(format!("t{start}_{limit}.jsonl"));
        std::fs::write(&path, bytes).expect("written");
        let mut docs = Documents::new();
        docs.begin_source(SourceInfo {
            name: "t".into(),
            format: Format::Lines,
            compressed: false,
            first_line: 1,
        });
        let mut feed = FileFeed::open(path.clone(), start, end).expect("opened");
        while feed.read(&mut docs, limit).expect("read") > 0 {}
        docs.end_source();
        let _ = std::fs::remove_file(&path);
        docs.entries
            .iter()
            .map(|e| {
                (
                    String::from_utf8_lossy(docs.bytes(e)).into_owned(),
                    e.offset,
                )
            })
            .collect()
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
