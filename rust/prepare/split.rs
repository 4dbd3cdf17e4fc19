//! Raw text cut into documents, as spans of one growing buffer: `prepare`'s reading step after
//! the bytes are read and decompressed (`data_io/formats/raw_text.py`'s `text_pieces` hands
//! over pieces of whole lines) and before anything is decoded. The rules are those of
//! `raw_text.py`, the oracle of the differential tests (`tests/prepare/test_read_rust.py`):
//!
//! - `Blocks` (`.txt`): a document is a run of lines that are not blank, joined by newlines;
//! - `Lines` (`.txt --doc-per-line`): every line that is not blank is a document;
//! - `Jsonl`: every line that is not blank is a row (decoded and parsed by `rows.rs`);
//! - `Texts`: documents handed over whole (Parquet and `datasets` sources).
//!
//! A line is blank when every character is whitespace as Python's `str.isspace` sees it (a
//! byte that is not UTF-8 would become U+FFFD, which is not). In text files one carriage
//! return before each newline, and at the end of the text, is not part of the line.
//!
//! Only the spans are found here, serially and cheaply (a line is usually known not blank by
//! its first byte); the decoding, the checks and the parsing run on the encoder's threads.

use memchr::memchr;

use super::clean::is_python_space;

/// How a source's text becomes documents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Blocks,
    Lines,
    Jsonl,
    Texts,
}

/// One source of the run, as the documents' errors name it.
#[derive(Clone, Debug)]
pub struct SourceInfo {
    pub name: String,
    pub format: Format,
    /// The text was decompressed: byte offsets are in the decompressed text.
    pub compressed: bool,
    /// The number of the first line fed (1, or where a byte range of the file starts).
    pub first_line: u64,
    /// A range of a compressed file's parts read from a part past the text's start: its lines
    /// and offsets count from there until `Documents::rebase` makes them the file's.
    pub origin: Option<PartsOrigin>,
}

/// Where a range of a compressed file's parts starts (`file.rs`): its lines and offsets are
/// counted from the text of the part at byte `start` of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartsOrigin {
    pub path: std::path::PathBuf,
    pub compression: crate::reader::Compression,
    pub start: u64,
}

/// One document: `data[start..end]`, whose first line is line `line` (from 1) of its source,
/// at byte `offset` of the (decompressed) text. A `Blocks` document's inner lines still end
/// with their carriage returns (`rows.rs` removes them); its last line's is left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub start: usize,
    pub end: usize,
    pub line: u64,
    pub offset: u64,
    pub source: u32,
}

/// The block being read: it may go on in the next piece.
#[derive(Clone, Copy, Debug)]
struct OpenBlock {
    start: usize,
    end: usize,
    line: u64,
    offset: u64,
}

/// The documents read so far and not yet taken (`take`), with the bytes they lie in.
#[derive(Debug, Default)]
pub struct Documents {
    pub data: Vec<u8>,
    pub entries: Vec<Entry>,
    /// The sources of these documents (and the current one), from source number
    /// `first_source` of the run on (`Entry::source` counts from the run's first source; the
    /// earlier ones went with the batches taken).
    sources: Vec<SourceInfo>,
    first_source: u32,
    open: Option<OpenBlock>,
    /// Documents of the current source so far.
    counted: u64,
    /// The number of the current source's next line.
    next_line: u64,
    /// Bytes a new buffer starts with room for (a batch's worth: no reallocation per piece).
    reserve: usize,
}

impl Documents {
    pub fn new() -> Self {
        Self::default()
    }

    /// Documents whose buffers start with room for `bytes` (a batch and a piece).
    pub fn with_reserve(bytes: usize) -> Self {
        Self {
            data: Vec::with_capacity(bytes),
            reserve: bytes,
            ..Self::default()
        }
    }

    /// Start reading a new source; the previous one must have been ended.
    pub fn begin_source(&mut self, info: SourceInfo) {
        debug_assert!(self.open.is_none());
        self.counted = 0;
        self.next_line = info.first_line.max(1);
        self.sources.push(info);
    }

    /// Number the current source's lines from `line` on (a range whose first line is known
    /// only once its start is found in the text, `file.rs`).
    pub fn number_lines_from(&mut self, line: u64) {
        self.next_line = line.max(1);
    }

    /// Count the current source's lines and offsets from `origin` (`FileFeed::origin`).
    pub fn set_origin(&mut self, origin: Option<PartsOrigin>) {
        if let Some(source) = self.sources.last_mut() {
            source.origin = origin;
        }
    }

    /// Make every document's line and offset its file's, where a source counts them from a
    /// part past its text's start: `text_before(origin)` gives the newlines and bytes of the
    /// text before it (it decompresses that much, so it is called only when an error must name
    /// a line). Whether anything changed.
    pub fn rebase<E>(
        &mut self,
        mut text_before: impl FnMut(&PartsOrigin) -> Result<(u64, u64), E>,
    ) -> Result<bool, E> {
        let mut changed = false;
        for (k, source) in self.sources.iter_mut().enumerate() {
            let Some(origin) = source.origin.take() else {
                continue;
            };
            let (newlines, bytes) = text_before(&origin)?;
            let number = self.first_source + k as u32;
            for entry in self.entries.iter_mut().filter(|e| e.source == number) {
                entry.line += newlines;
                entry.offset += bytes;
            }
            changed = true;
        }
        Ok(changed)
    }

    /// How the current source's text becomes documents.
    pub fn format(&self) -> Format {
        self.current().1
    }

    fn current(&self) -> (u32, Format) {
        let index = self
            .sources
            .len()
            .checked_sub(1)
            .expect("a source was begun");
        (self.first_source + index as u32, self.sources[index].format)
    }

    /// The source of `entry`.
    pub fn source(&self, entry: &Entry) -> &SourceInfo {
        &self.sources[(entry.source - self.first_source) as usize]
    }

    /// Append a piece of the current source's text: whole lines (each ending with a newline,
    /// but the source's last one), the first at byte `offset` of the text. Lines are numbered
    /// from the source's first piece on. The tests' way in: files are read straight into
    /// `data` (`file.rs`), texts come whole (`feed_texts`).
    #[cfg(test)]
    pub fn feed(&mut self, piece: &[u8], offset: u64) {
        let at = self.data.len();
        self.data.extend_from_slice(piece);
        self.scan_from(at, offset);
    }

    /// Cut into documents the bytes appended from `at` on (whole lines, the last one maybe
    /// without its newline at the end of a source),
    /// the first at byte `offset` of the text.
    pub fn scan_from(&mut self, mut at: usize, mut offset: u64) {
        let (source, format) = self.current();
        let mut line = self.next_line;
        let end = self.data.len();
        while at < end {
            let (line_end, next) = match memchr(b'\n', &self.data[at..end]) {
                Some(i) => (at + i, at + i + 1),
                None => (end, end),
            };
            let content_end = match format {
                Format::Jsonl => line_end,
                _ if line_end > at && self.data[line_end - 1] == b'\r' => line_end - 1,
                _ => line_end,
            };
            let blank = is_blank(&self.data[at..content_end]);
            let here = Entry {
                start: at,
                end: content_end,
                line,
                offset,
                source,
            };
            match format {
                Format::Blocks if blank => self.close_block(),
                Format::Blocks => match &mut self.open {
                    Some(block) => block.end = content_end,
                    None => {
                        self.open = Some(OpenBlock {
                            start: at,
                            end: content_end,
                            line,
                            offset,
                        })
                    }
                },
                _ if blank => {}
                _ => self.push(here),
            }
            line += 1;
            offset += (next - at) as u64;
            at = next;
        }
        self.next_line = line;
    }

    /// Append documents given whole (`Format::Texts`), each counted as one row.
    pub fn feed_texts<S: AsRef<[u8]>>(&mut self, texts: &[S], first_row: u64) {
        let (source, _) = self.current();
        for (k, text) in texts.iter().enumerate() {
            let start = self.data.len();
            self.data.extend_from_slice(text.as_ref());
            self.push(Entry {
                start,
                end: self.data.len(),
                line: first_row + k as u64,
                offset: 0,
                source,
            });
        }
    }

    fn push(&mut self, entry: Entry) {
        self.entries.push(entry);
        self.counted += 1;
    }

    fn close_block(&mut self) {
        if let Some(block) = self.open.take() {
            let source = self.current().0;
            self.push(Entry {
                start: block.start,
                end: block.end,
                line: block.line,
                offset: block.offset,
                source,
            });
        }
    }

    /// End the current source (its last block is a document) and say how many documents it
    /// had.
    pub fn end_source(&mut self) -> u64 {
        self.close_block();
        self.counted
    }

    /// Bytes of the buffer that belong to finished documents (what `take` would hand over).
    pub fn ready_bytes(&self) -> usize {
        self.open.map_or(self.data.len(), |block| block.start)
    }

    /// The finished documents, handed over with their bytes; a block still open stays (its
    /// bytes moved to the start of the buffer, once).
    pub fn take(&mut self) -> Documents {
        let keep_from = self.ready_bytes();
        let mut tail = spare_buffer();
        tail.reserve(self.reserve.max(self.data.len() - keep_from));
        tail.extend_from_slice(&self.data[keep_from..]);
        self.data.truncate(keep_from);
        // The batch takes the sources its documents name; the reader keeps only the current
        // one (so that many small files cost no copy of every name per batch).
        let current = self.first_source + self.sources.len().saturating_sub(1) as u32;
        let first = self.entries.first().map_or(current, |entry| entry.source);
        let sources = self.sources[(first - self.first_source) as usize..].to_vec();
        let done = self.sources.len().saturating_sub(1);
        self.sources.drain(..done);
        self.first_source = current;
        let taken = Documents {
            data: std::mem::replace(&mut self.data, tail),
            entries: std::mem::take(&mut self.entries),
            sources,
            first_source: first,
            open: None,
            counted: 0,
            next_line: 0,
            reserve: 0,
        };
        if let Some(block) = &mut self.open {
            block.start -= keep_from;
            block.end -= keep_from;
        }
        taken
    }

    /// Done with these documents: their buffer goes to the next `take` (a few are kept).
    pub fn recycle(mut self) {
        let mut data = std::mem::take(&mut self.data);
        data.clear();
        if let Ok(mut spare) = SPARE_BUFFERS.lock() {
            if spare.len() < SPARE_KEPT {
                spare.push(data);
            }
        }
    }

    /// The text of `entry`, as bytes.
    pub fn bytes(&self, entry: &Entry) -> &[u8] {
        &self.data[entry.start..entry.end]
    }
}

/// Buffers of batches already prepared, for the next batches: a new buffer of megabytes comes
/// from the system zeroed, a page fault at a time, which cost as much as reading into it.
static SPARE_BUFFERS: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
/// Batches in flight at once (one being read, one prepared, one waiting) and one more.
const SPARE_KEPT: usize = 4;

fn spare_buffer() -> Vec<u8> {
    SPARE_BUFFERS
        .lock()
        .ok()
        .and_then(|mut spare| spare.pop())
        .unwrap_or_default()
}

/// Whether every character of `line` is whitespace to Python (bytes that are not UTF-8 are
/// not). The first byte decides for nearly every line of real text.
pub fn is_blank(line: &[u8]) -> bool {
    match line.first() {
        None => return true,
        Some(&b) if b < 0x80 && !is_python_space(b as char) => return false,
        _ => {}
    }
    let (valid, whole) = match std::str::from_utf8(line) {
        Ok(text) => (text, true),
        // The part before the first bad byte is UTF-8; the bad byte makes the line not blank.
        Err(error) => (
            std::str::from_utf8(&line[..error.valid_up_to()]).unwrap_or_default(),
            false,
        ),
    };
    whole && valid.chars().all(is_python_space)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn documents(format: Format, pieces: &[&str]) -> Vec<String> {
        let mut docs = Documents::new();
        docs.begin_source(SourceInfo {
            name: "t".into(),
            format,
            compressed: false,
            first_line: 1,
            origin: None,
        });
        for piece in pieces {
            docs.feed(piece.as_bytes(), 0);
        }
        docs.end_source();
        docs.entries
            .iter()
            .map(|e| String::from_utf8(docs.bytes(e).to_vec()).expect("utf-8"))
            .collect()
    }

    #[test]
    fn blocks_are_runs_of_lines_that_are_not_blank() {
        let pieces = [
            "\n  \nfirst\nblock\r\n \u{3000}\t\n",
            "second\n",
            "goes on\r\n\n\nlast\r",
        ];
        assert_eq!(
            documents(Format::Blocks, &pieces),
            ["first\nblock", "second\ngoes on", "last"]
        );
        assert_eq!(
            documents(Format::Lines, &pieces),
            ["first", "block", "second", "goes on", "last"]
        );
        assert_eq!(
            documents(Format::Jsonl, &["{}\r\n", " \u{1c}\n", "{\"a\": 1}"]),
            ["{}\r", "{\"a\": 1}"]
        );
    }

    #[test]
    fn a_line_with_a_byte_that_is_not_utf8_is_not_blank() {
        assert!(is_blank(b" \t\xc2\xa0\r"));
        assert!(!is_blank(b" \xff"));
        assert!(!is_blank(b" \xe3\x80"));
        assert!(is_blank(b""));
    }

    #[test]
    fn an_open_block_stays_when_the_finished_documents_are_taken() {
        let mut docs = Documents::new();
        docs.begin_source(SourceInfo {
            name: "t".into(),
            format: Format::Blocks,
            compressed: false,
            first_line: 1,
            origin: None,
        });
        docs.feed(b"one\n\ntwo starts\n", 0);
        assert_eq!(docs.ready_bytes(), 5);
        let taken = docs.take();
        assert_eq!(taken.entries.len(), 1);
        assert_eq!(taken.bytes(&taken.entries[0]), b"one");
        docs.feed(b"and ends\n", 16);
        assert_eq!(docs.end_source(), 2);
        let entry = docs.entries[0];
        assert_eq!(docs.bytes(&entry), b"two starts\nand ends");
        assert_eq!((entry.line, entry.offset), (3, 5));
    }

    #[test]
    fn a_byte_range_numbers_its_lines_from_where_it_starts() {
        let mut docs = Documents::new();
        docs.begin_source(SourceInfo {
            name: "t".into(),
            format: Format::Jsonl,
            compressed: false,
            first_line: 41,
            origin: None,
        });
        docs.feed(
            b"{}

{}
", 9000,
        );
        docs.end_source();
        let lines: Vec<(u64, u64)> = docs.entries.iter().map(|e| (e.line, e.offset)).collect();
        assert_eq!(lines, [(41, 9000), (43, 9004)]);
    }

    #[test]
    fn a_batch_takes_the_sources_it_names_and_the_reader_keeps_the_current_one() {
        let mut docs = Documents::new();
        for k in 0..5 {
            docs.begin_source(SourceInfo {
                name: format!("f{k}"),
                format: Format::Lines,
                compressed: false,
                first_line: 1,
                origin: None,
            });
            if k != 1 {
                docs.feed(format!("doc {k}\n").as_bytes(), 0);
            }
            docs.end_source();
            if k == 2 || k == 4 {
                let taken = docs.take();
                let names: Vec<&str> = taken
                    .entries
                    .iter()
                    .map(|e| taken.source(e).name.as_str())
                    .collect();
                let expected: &[&str] = if k == 2 { &["f0", "f2"] } else { &["f3", "f4"] };
                assert_eq!(names, expected);
                assert_eq!(docs.sources.len(), 1);
            }
        }
    }
}
