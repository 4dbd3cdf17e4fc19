//! The lines of a range of a compressed file's parts: what one `tokenize` unit of a large
//! `.jsonl.gz` (BGZF), `.jsonl.zst` (frames), `.jsonl.xz` (blocks) or `.jsonl.bz2` (blocks)
//! reads, decoding only its own parts and a little of the next.
//!
//! Where a range's lines start and end is found in the text, by one rule that neighbours share:
//! a range starts just past the first newline in its first part's text (at the file's start, at
//! 0) and ends just past the first newline in the text from its end part on (at the file's end,
//! there). Each line of the file is then in exactly one range; a range whose parts hold no
//! newline is empty, its text going to the range before.

use std::io::Read;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::{parts_in, ParallelText, SequentialText};
use crate::error::Error;
use crate::reader::Compression;

/// A `Read` of the range's lines (see the module).
pub struct LinesOfParts {
    /// The text of the range's own parts.
    now: Box<dyn Read + Send>,
    /// The text from the part at the range's end on (None at the file's end), read only as far
    /// as its first newline.
    then: Option<Box<dyn Read + Send>>,
    /// Still passing over the text before the range's first line start.
    skipping: bool,
    /// Reading `then`.
    tail: bool,
    done: bool,
}

impl LinesOfParts {
    /// The lines of the parts of `path` from the one at byte `start` to the one at `end` (None:
    /// the file's end), decoded on `lanes` threads (1: on the reading thread); `read` counts
    /// the file's bytes of the parts opened. An offset where no part starts (the file changed
    /// since the plan) is an error that says so.
    pub fn open(
        path: &Path,
        compression: Compression,
        start: u64,
        end: Option<u64>,
        lanes: usize,
        read: Arc<AtomicU64>,
    ) -> Result<LinesOfParts, Error> {
        let parts = parts_in(path, compression, start, end)?;
        let range = parts.planned(path, start, end)?;
        let rest = range.end..parts.list.len();
        let parts = Arc::new(parts);
        let now: Box<dyn Read + Send> = if lanes > 1 {
            Box::new(ParallelText::new(
                path,
                Arc::clone(&parts),
                range,
                lanes,
                read,
            ))
        } else {
            Box::new(SequentialText::new(
                path.to_path_buf(),
                Arc::clone(&parts),
                range,
                read,
            ))
        };
        // Past the range only its end is looked for, decoded as it is read (a few kilobytes of
        // the next part, usually); its bytes are the next unit's progress, not this one's.
        let then = (end.is_some() && !rest.is_empty()).then(|| {
            let text = SequentialText::new(path.to_path_buf(), parts, rest, Arc::default());
            Box::new(text) as Box<dyn Read + Send>
        });
        Ok(LinesOfParts {
            now,
            then,
            skipping: start > 0,
            tail: false,
            done: false,
        })
    }
}

impl Read for LinesOfParts {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        while !self.done {
            let n = match (self.tail, self.then.as_mut()) {
                (false, _) => self.now.read(buf)?,
                (true, Some(then)) => then.read(buf)?,
                (true, None) => 0,
            };
            if n == 0 {
                if self.tail {
                    self.done = true;
                } else {
                    self.tail = true;
                }
                continue;
            }
            let mut from = 0;
            if self.skipping {
                let Some(newline) = memchr::memchr(b'\n', &buf[..n]) else {
                    continue;
                };
                self.skipping = false;
                from = newline + 1;
                if self.tail {
                    // The range's first line start is its end: it holds no line.
                    self.done = true;
                    return Ok(0);
                }
            }
            let mut to = n;
            if self.tail {
                if let Some(newline) = memchr::memchr(b'\n', &buf[from..n]) {
                    to = from + newline + 1;
                    self.done = true;
                }
            }
            if to > from {
                buf.copy_within(from..to, 0);
                return Ok(to - from);
            }
        }
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::frames::test_files::bgzf;

    fn zstd_frames(text: &[u8], chunk: usize) -> Vec<u8> {
        text.chunks(chunk)
            .flat_map(|piece| zstd::encode_all(piece, 1).expect("compressed"))
            .collect()
    }

    fn lines_of(
        path: &Path,
        c: Compression,
        start: u64,
        end: Option<u64>,
        lanes: usize,
    ) -> Vec<u8> {
        let mut text = Vec::new();
        LinesOfParts::open(path, c, start, end, lanes, Arc::default())
            .expect("opens")
            .read_to_end(&mut text)
            .expect("reads");
        text
    }

    /// Every way of cutting the parts into ranges gives the whole text, each range whole lines
    /// (but the last, when the text ends without a newline).
    #[test]
    fn ranges_of_parts_tile_the_text_at_line_starts() {
        let dir = tempfile::tempdir().expect("temp dir");
        // Lines of 0-120 bytes in parts of 50: lines span parts, parts hold no line start.
        let mut text = Vec::new();
        for k in 0..400u32 {
            text.extend(std::iter::repeat_n(
                b'a' + (k % 26) as u8,
                (k * 37 % 121) as usize,
            ));
            text.push(b'\n');
        }
        text.extend_from_slice(b"no newline at the end");
        for (name, c, bytes) in [
            ("t.gz", Compression::Gzip, bgzf(&text, 50)),
            ("t.zst", Compression::Zstd, zstd_frames(&text, 50)),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).expect("write");
            let starts = super::super::parts(&path, c).expect("parts").starts();
            assert!(starts.len() > 100, "{name}: {} parts", starts.len());
            for step in [1, 3, 40, starts.len()] {
                for lanes in [1, 2] {
                    let cuts: Vec<u64> = starts.iter().copied().step_by(step).collect();
                    let mut joined = Vec::new();
                    for (k, &start) in cuts.iter().enumerate() {
                        let range = lines_of(&path, c, start, cuts.get(k + 1).copied(), lanes);
                        // Whole lines, or the text's unfinished last one (a BGZF file ends
                        // with an empty part).
                        let at_end = joined.len() + range.len() == text.len();
                        assert!(
                            range.is_empty() || range.ends_with(b"\n") || at_end,
                            "{name} {k}"
                        );
                        joined.extend(range);
                    }
                    assert_eq!(joined, text, "{name}: every {step} parts, {lanes} lanes");
                }
            }
        }
    }

    #[test]
    fn an_offset_where_no_part_starts_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.zst");
        std::fs::write(&path, zstd_frames(b"a\nb\nc\n", 2)).expect("write");
        let refused = LinesOfParts::open(&path, Compression::Zstd, 1, None, 1, Arc::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            refused.contains("no compressed part starts at byte 1"),
            "{refused}"
        );
    }
}
