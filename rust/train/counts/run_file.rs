//! A sorted run of word counts on disk: what the counting pass spills when its tables pass the
//! memory budget, and what it keeps per input file (`store.rs`) for re-runs and scale-out.
//!
//! ```text
//! "DIOWORDS"  u32 LE header length  header (JSON: format, version, normalizer, pre_tokenizer, byte_level)
//! records, words strictly increasing by their UTF-8 bytes, each front-coded on the one before:
//!     varint (suffix length + 1)  varint (bytes shared with the word before)  suffix  varint count
//! varint 0                        (the end of the records)
//! u64 LE words  u64 LE total of the counts  32 bytes: BLAKE3 of every byte before them
//! ```
//!
//! Sorted words share long prefixes, so front coding halves the file without a compressor.
//! A reader checks every record (UTF-8, order, count, lengths) and, at the end, the trailer and
//! the hash: a truncated or damaged file is an error naming the file and offset, never fewer
//! counts. Files are written under a temporary name and renamed when complete.

use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::tokenizer_format::SPLIT_REGEX;

const MAGIC: &[u8; 8] = b"DIOWORDS";
const FORMAT: &str = "data_io word counts";
const VERSION: u32 = 1;
/// Longer words than this are damage, not text (the reader would otherwise allocate them).
const MAX_WORD_BYTES: u64 = 1 << 30;

/// How the words of a run were made: runs made another way cannot be added together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WordsHeader {
    pub format: String,
    pub version: u32,
    /// "NFC" or "none".
    pub normalizer: String,
    /// The split regex the pre-tokens were cut by.
    pub pre_tokenizer: String,
    /// Whether each word is the ByteLevel string of its piece.
    pub byte_level: bool,
}

impl WordsHeader {
    /// The words this crate's counting pass makes (`words.rs`).
    pub fn ours(nfc: bool) -> WordsHeader {
        WordsHeader {
            format: FORMAT.into(),
            version: VERSION,
            normalizer: if nfc { "NFC" } else { "none" }.into(),
            pre_tokenizer: SPLIT_REGEX.into(),
            byte_level: true,
        }
    }

    /// An error unless `other` (read from `path`) made its words the same way.
    pub fn check(&self, other: &WordsHeader, path: &Path) -> Result<()> {
        if self == other {
            return Ok(());
        }
        let what = if other.format != self.format || other.version != self.version {
            format!("{} version {}", other.format, other.version)
        } else if other.normalizer != self.normalizer {
            format!(
                "normalizer {} (this run uses {})",
                other.normalizer, self.normalizer
            )
        } else if other.pre_tokenizer != self.pre_tokenizer {
            format!(
                "pre-tokenizer regex {:?} (this run uses {:?})",
                other.pre_tokenizer, self.pre_tokenizer
            )
        } else {
            format!("byte_level {}", other.byte_level)
        };
        Err(Error::BadFile {
            path: path.to_path_buf(),
            message: format!(
                "these word counts were made with {what}; they cannot be added to this run's. \
                 Delete the file to count its input again"
            ),
        })
    }
}

/// Writes one run; `finish` makes it appear under its name.
pub struct RunWriter {
    path: PathBuf,
    tmp: PathBuf,
    /// None once finished.
    out: Option<HashingWriter<BufWriter<File>>>,
    last: Vec<u8>,
    record: Vec<u8>,
    renamed: bool,
    words: u64,
    total: u64,
}

impl RunWriter {
    pub fn create(path: &Path, header: &WordsHeader) -> Result<RunWriter> {
        let tmp = tmp_name(path);
        let file = File::create(&tmp).ctx("cannot create", &tmp)?;
        let mut out = HashingWriter::new(BufWriter::with_capacity(1 << 20, file));
        let header_json = serde_json::to_vec(header)
            .map_err(|e| Error::Output(format!("cannot serialise a run header: {e}")))?;
        out.write_all(MAGIC).ctx("cannot write", &tmp)?;
        out.write_all(&(header_json.len() as u32).to_le_bytes())
            .ctx("cannot write", &tmp)?;
        out.write_all(&header_json).ctx("cannot write", &tmp)?;
        Ok(RunWriter {
            path: path.to_path_buf(),
            tmp,
            out: Some(out),
            last: Vec::new(),
            record: Vec::new(),
            renamed: false,
            words: 0,
            total: 0,
        })
    }

    /// Add `word` with `count`; words must come strictly increasing, counts at least 1.
    pub fn push(&mut self, word: &str, count: u64) -> Result<()> {
        let word = word.as_bytes();
        if count == 0 || (self.words > 0 && word <= self.last.as_slice()) {
            return Err(Error::Output(format!(
                "{}: words must be written sorted, each once, with a count (a bug)",
                self.path.display()
            )));
        }
        let shared = self
            .last
            .iter()
            .zip(word)
            .take_while(|(a, b)| a == b)
            .count();
        let suffix = &word[shared..];
        let record = &mut self.record;
        record.clear();
        put_varint(record, suffix.len() as u64 + 1);
        put_varint(record, shared as u64);
        record.extend_from_slice(suffix);
        put_varint(record, count);
        if let Some(out) = self.out.as_mut() {
            out.write_all(record).ctx("cannot write", &self.tmp)?;
        }
        self.last.truncate(shared);
        self.last.extend_from_slice(suffix);
        self.words += 1;
        self.total += count;
        Ok(())
    }

    /// Words written so far.
    pub fn words(&self) -> u64 {
        self.words
    }

    /// Write the trailer, flush, and rename into place; the run's size in bytes.
    pub fn finish(mut self) -> Result<u64> {
        let mut end = vec![0u8];
        end.extend_from_slice(&self.words.to_le_bytes());
        end.extend_from_slice(&self.total.to_le_bytes());
        let Some(mut out) = self.out.take() else {
            return Err(Error::Output(format!(
                "{}: finished twice (a bug)",
                self.tmp.display()
            )));
        };
        out.write_all(&end).ctx("cannot write", &self.tmp)?;
        let hash = out.hasher.finalize();
        let mut inner = out.inner;
        inner
            .write_all(hash.as_bytes())
            .ctx("cannot write", &self.tmp)?;
        let file = inner
            .into_inner()
            .map_err(|e| Error::io("cannot write", &self.tmp, e.into_error()))?;
        file.sync_all().ctx("cannot write", &self.tmp)?;
        let size = file.metadata().ctx("cannot read", &self.tmp)?.len();
        drop(file);
        fs::rename(&self.tmp, &self.path).ctx("cannot rename into place", &self.path)?;
        self.renamed = true;
        Ok(size)
    }
}

impl Drop for RunWriter {
    /// A run not finished leaves nothing behind (a finished one was renamed already).
    fn drop(&mut self) {
        if !self.renamed {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Reads a run back, checking it as it goes.
pub struct RunReader {
    path: PathBuf,
    input: Input,
    header: WordsHeader,
    word: Vec<u8>,
    words: u64,
    total: u64,
    done: bool,
}

impl RunReader {
    pub fn open(path: &Path) -> Result<RunReader> {
        let file = File::open(path).ctx("cannot open", path)?;
        let mut input = Input::new(file);
        let bad = |message: String| Error::BadFile {
            path: path.to_path_buf(),
            message: format!("{message}; delete it to count its input again"),
        };
        let mut magic = [0u8; 8];
        if !input.read_exact(&mut magic) {
            return Err(bad("not a word-count run (too short)".into()));
        }
        if &magic != MAGIC {
            return Err(bad(
                "not a word-count run (written by data_io train-tokenizer)".into(),
            ));
        }
        let mut len = [0u8; 4];
        if !input.read_exact(&mut len) {
            return Err(bad("truncated in its header".into()));
        }
        let len = u32::from_le_bytes(len) as u64;
        if len > 1 << 20 {
            return Err(bad(format!("a header of {len} bytes: damaged")));
        }
        let mut header = vec![0u8; len as usize];
        if !input.read_exact(&mut header) {
            return Err(bad("truncated in its header".into()));
        }
        let header: WordsHeader = serde_json::from_slice(&header)
            .map_err(|e| bad(format!("its header is not a word-count header: {e}")))?;
        Ok(RunReader {
            path: path.to_path_buf(),
            input,
            header,
            word: Vec::new(),
            words: 0,
            total: 0,
            done: false,
        })
    }

    pub fn header(&self) -> &WordsHeader {
        &self.header
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn bad(&self, message: impl std::fmt::Display) -> Error {
        Error::BadFile {
            path: self.path.clone(),
            message: format!(
                "damaged word-count run at byte {}: {message}; delete it to count its input again",
                self.input.position()
            ),
        }
    }

    fn varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(byte) = self.input.byte() else {
                return Err(self.bad("the file ends inside a record"));
            };
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.bad("a number longer than 64 bits"))
    }

    /// The next word and its count, or None after the last (whose trailer checked out).
    pub fn next_word(&mut self) -> Result<Option<(&str, u64)>> {
        if self.done {
            return Ok(None);
        }
        let suffix_len = self.varint()?;
        if suffix_len == 0 {
            self.finish()?;
            return Ok(None);
        }
        let suffix_len = suffix_len - 1;
        let shared = self.varint()?;
        if shared > self.word.len() as u64 || suffix_len > MAX_WORD_BYTES {
            return Err(self.bad("a record longer than the words allow"));
        }
        // The byte the new suffix replaces: words are strictly increasing and share as much as
        // they can with the one before, so the suffix starts above it (or extends the word).
        let replaced = self.word.get(shared as usize).copied();
        self.word.truncate(shared as usize);
        let start = self.word.len();
        self.word.resize(start + suffix_len as usize, 0);
        if !self.input.read_exact(&mut self.word[start..]) {
            return Err(self.bad("the file ends inside a word"));
        }
        let ordered = self.words == 0
            || match (replaced, self.word.get(start)) {
                (None, Some(_)) => true,
                (Some(old), Some(&new)) => new > old,
                (_, None) => false,
            };
        if !ordered {
            return Err(self.bad("words out of order (runs are sorted, each word once)"));
        }
        let count = self.varint()?;
        if count == 0 {
            return Err(self.bad("a word with count 0"));
        }
        self.words += 1;
        self.total = self
            .total
            .checked_add(count)
            .ok_or_else(|| self.bad("counts that add up past 2^64"))?;
        let word =
            std::str::from_utf8(&self.word).map_err(|_| self.bad("a word that is not UTF-8"))?;
        Ok(Some((word, count)))
    }

    fn finish(&mut self) -> Result<()> {
        let mut trailer = [0u8; 16];
        if !self.input.read_exact(&mut trailer) {
            return Err(self.bad("the file ends inside its trailer"));
        }
        let words = u64::from_le_bytes(trailer[..8].try_into().unwrap_or_default());
        let total = u64::from_le_bytes(trailer[8..].try_into().unwrap_or_default());
        let expected = self.input.digest();
        let mut hash = [0u8; 32];
        if !self.input.read_exact(&mut hash) {
            return Err(self.bad("the file ends inside its checksum"));
        }
        if words != self.words || total != self.total {
            return Err(self.bad(format!(
                "its trailer says {words} words and {total} pieces, its records hold {} and {}",
                self.words, self.total
            )));
        }
        if &hash != expected.as_bytes() {
            return Err(self.bad("its checksum does not match its bytes"));
        }
        if self.input.byte().is_some() {
            return Err(self.bad("bytes after its checksum"));
        }
        self.done = true;
        Ok(())
    }
}

/// The temporary name `path` is written under: a crash never leaves a run that looks finished.
pub fn tmp_name(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp-{}", std::process::id()));
    path.with_file_name(name)
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Hashes what goes through it.
struct HashingWriter<W> {
    inner: W,
    hasher: blake3::Hasher,
}

impl<W: Write> HashingWriter<W> {
    fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hasher: blake3::Hasher::new(),
        }
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The file a run is read from, through a buffer of its own: one byte at a time is cheap, and
/// the bytes are hashed in bulk as they are consumed (not as they are buffered: the checksum at
/// the end covers every byte before it, not itself).
struct Input {
    file: File,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// Bytes of `buf` before this one are in `hasher` already.
    hashed: usize,
    hasher: blake3::Hasher,
    /// Bytes consumed before `buf[0]`.
    base: u64,
}

impl Input {
    fn new(file: File) -> Input {
        Input {
            file,
            // 256 KiB: a merge holds up to `MAX_OPEN_RUNS` of these.
            buf: vec![0; 256 << 10],
            pos: 0,
            end: 0,
            hashed: 0,
            hasher: blake3::Hasher::new(),
            base: 0,
        }
    }

    /// Bytes consumed so far (the offset errors name).
    fn position(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// More bytes into the buffer; false at the end of the file (or on a read error, which
    /// the caller reports as a file that ends early).
    fn refill(&mut self) -> bool {
        self.hasher.update(&self.buf[self.hashed..self.pos]);
        self.buf.copy_within(self.pos..self.end, 0);
        self.base += self.pos as u64;
        self.end -= self.pos;
        self.pos = 0;
        self.hashed = 0;
        loop {
            match self.file.read(&mut self.buf[self.end..]) {
                Ok(0) => return false,
                Ok(n) => {
                    self.end += n;
                    return true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            }
        }
    }

    #[inline]
    fn byte(&mut self) -> Option<u8> {
        if self.pos == self.end && !self.refill() {
            return None;
        }
        let byte = self.buf[self.pos];
        self.pos += 1;
        Some(byte)
    }

    fn read_exact(&mut self, out: &mut [u8]) -> bool {
        let mut filled = 0;
        while filled < out.len() {
            if self.pos == self.end && !self.refill() {
                return false;
            }
            let n = (out.len() - filled).min(self.end - self.pos);
            out[filled..filled + n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
            self.pos += n;
            filled += n;
        }
        true
    }

    /// The hash of every byte consumed so far.
    fn digest(&mut self) -> blake3::Hash {
        self.hasher.update(&self.buf[self.hashed..self.pos]);
        self.hashed = self.pos;
        self.hasher.finalize()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, words: &[(&str, u64)]) -> u64 {
        let mut writer = RunWriter::create(path, &WordsHeader::ours(true)).expect("create");
        for (word, count) in words {
            writer.push(word, *count).expect("push");
        }
        writer.finish().expect("finish")
    }

    fn read(path: &Path) -> Result<Vec<(String, u64)>> {
        let mut reader = RunReader::open(path)?;
        let mut words = Vec::new();
        while let Some((word, count)) = reader.next_word()? {
            words.push((word.to_string(), count));
        }
        Ok(words)
    }

    const WORDS: &[(&str, u64)] = &[
        ("", 4),
        ("a", 1),
        ("ab", 7),
        ("abc", u64::MAX / 4),
        ("abd", 2),
        ("b", 300),
        ("Ġthe", 1 << 40),
        ("Ġthere", 5),
        ("日本", 9),
    ];

    #[test]
    fn a_run_reads_back_what_was_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.words");
        let size = write(&path, WORDS);
        assert_eq!(size, fs::metadata(&path).expect("stat").len());
        let back = read(&path).expect("read");
        let expected: Vec<(String, u64)> = WORDS.iter().map(|(w, c)| (w.to_string(), *c)).collect();
        assert_eq!(back, expected);
        // Nothing but the run is left.
        assert_eq!(fs::read_dir(dir.path()).expect("ls").count(), 1);
    }

    #[test]
    fn the_writer_refuses_unsorted_or_repeated_words_and_leaves_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.words");
        let mut writer = RunWriter::create(&path, &WordsHeader::ours(true)).expect("create");
        writer.push("b", 1).expect("push");
        assert!(writer.push("a", 1).is_err());
        assert!(writer.push("b", 1).is_err());
        assert!(writer.push("c", 0).is_err());
        drop(writer);
        assert_eq!(fs::read_dir(dir.path()).expect("ls").count(), 0);
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_an_error_never_fewer_counts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.words");
        write(&path, WORDS);
        let good = fs::read(&path).expect("read");
        let damaged = dir.path().join("d.words");
        for cut in 0..good.len() {
            fs::write(&damaged, &good[..cut]).expect("write");
            let error = read(&damaged).expect_err("a truncated run must not read");
            assert!(error.to_string().contains("d.words"), "{error}");
        }
        for at in 0..good.len() {
            let mut bytes = good.clone();
            bytes[at] ^= 0x5a;
            fs::write(&damaged, &bytes).expect("write");
            assert!(
                read(&damaged).is_err(),
                "flipped byte {at} was read as a run"
            );
        }
        let mut longer = good.clone();
        longer.push(0);
        fs::write(&damaged, &longer).expect("write");
        assert!(read(&damaged).is_err());
    }

    #[test]
    fn a_run_made_another_way_is_refused_naming_what_differs() {
        let ours = WordsHeader::ours(true);
        let other = WordsHeader {
            pre_tokenizer: "\\s+".into(),
            ..ours.clone()
        };
        let message = ours
            .check(&other, Path::new("x.words"))
            .expect_err("another regex")
            .to_string();
        assert!(message.contains("pre-tokenizer regex") && message.contains("x.words"));
        let message = ours
            .check(&WordsHeader::ours(false), Path::new("x.words"))
            .expect_err("another normalizer")
            .to_string();
        assert!(message.contains("normalizer none"), "{message}");
    }
}
