//! A compressed file's bytes as the walks and decoders read them: at given offsets (headers,
//! indexes), or a section in order.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;

/// A file read at given offsets, as the walks read headers.
pub struct Bytes<'a> {
    pub file: &'a File,
    pub size: u64,
}

impl Bytes<'_> {
    /// `N` bytes at `at`, or None past the end (or when the read fails: the walk gives up, and
    /// the decoder meets the same error).
    pub fn array<const N: usize>(&self, at: u64) -> Option<[u8; N]> {
        let mut out = [0u8; N];
        (at.checked_add(N as u64)? <= self.size)
            .then(|| self.file.read_exact_at(&mut out, at).ok())??;
        Some(out)
    }

    /// `len` bytes at `at`.
    pub fn vec(&self, at: u64, len: u64) -> Option<Vec<u8>> {
        if at.checked_add(len)? > self.size {
            return None;
        }
        let mut out = vec![0u8; usize::try_from(len).ok()?];
        self.file.read_exact_at(&mut out, at).ok()?;
        Some(out)
    }
}

/// Bytes `at..end` of a file, read in order.
pub struct Section {
    pub file: File,
    pub at: u64,
    pub end: u64,
}

impl Read for Section {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = usize::try_from(self.end.saturating_sub(self.at)).unwrap_or(usize::MAX);
        let want = buf.len().min(left);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// The most parts a file of `size` bytes is cut into: one per `MIN_PART_BYTES` of it on average
/// (at least `FEWEST_MOST_PARTS`). A file of more (10-byte zstd frames, a `cat` of a million
/// small bzip2 files, or a file made to hold block magics) is one part, read by one decoder:
/// its list of parts would take more memory than its text is worth cutting for (a part and its
/// start cost about a hundred bytes here and in the plan), and parts that small gain nothing.
pub fn most_parts(size: u64) -> usize {
    usize::try_from(size / MIN_PART_BYTES)
        .unwrap_or(usize::MAX)
        .max(FEWEST_MOST_PARTS)
}

const MIN_PART_BYTES: u64 = 1 << 10;
const FEWEST_MOST_PARTS: usize = 1 << 12;
