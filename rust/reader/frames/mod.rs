//! Where a compressed file can be entered in the middle, and its text decompressed on several
//! threads at once.
//!
//! Most compressed files are one stream that only decodes from its start. Some are a run of
//! parts that decode on their own, and say where each part ends without being decompressed:
//! - zstd frames (`pzstd`, the seekable format of zstd's contrib, any `cat a.zst b.zst`): each
//!   frame's header and its blocks' three-byte headers give its length (`zstd.rs`);
//! - BGZF gzip members (`bgzip`, htslib): each member's `BC` extra field gives its length
//!   (`gzip.rs`); other gzip members do not, so such a file stays one part;
//! - xz blocks (`xz -T`, the default since xz 5.6): the index at the end of each stream lists
//!   its blocks' sizes (`xz.rs`);
//! - bzip2 blocks (every bzip2 file: `bzip2`, `lbzip2`, `pbzip2`): no length is written, but
//!   each block starts with a 48-bit magic, found at any bit by a fast search; a run of blocks
//!   is remade into a stream of its own (`bzip2/`).
//!
//! `parts` finds the parts (one part covering the file when it cannot be cut, or when anything
//! in the walk looks wrong: then the one decoder of the whole file reads it and reports what is
//! wrong); `ParallelText` reads the text of a run of parts with a thread a lane, in order;
//! `SequentialText` on the calling thread, only as far as it is read; `lanes_for` says when
//! lanes are worth their cores.

mod before;
mod bzip2;
mod file_bytes;
mod gzip;
pub mod gzip_points;
mod line_cut;
mod parallel;
mod sequential;
#[cfg(test)]
pub mod test_files;
mod text_range;
mod xz;
mod zstd;

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::error::Error;
use crate::reader::{decompressed, Compression, READ_BUFFER};
use file_bytes::{Bytes, Section};

pub use before::text_before;
pub use file_bytes::{damaged, damaged_at, Consumed, Damaged, Located};
pub use line_cut::LinesOfParts;
pub use parallel::ParallelText;
pub use sequential::SequentialText;
pub use text_range::{LinesOfText, TextChanged};

/// A part of a compressed file that decodes on its own: bytes `start..start + len` of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub start: u64,
    pub len: u64,
    /// An xz block's stream and sizes (the rest of the stream is remade around a run of them).
    xz: Option<xz::Block>,
    /// A bzip2 block's bits (a run of them is remade into a stream).
    bzip2: Option<bzip2::Block>,
}

impl Part {
    /// Parts from each of `starts` (rising) to the next, the last to `end`; the first one from
    /// `from` (what comes between `from` and the first start, skippable frames, is the
    /// decoder's to pass over).
    fn tiling(from: u64, starts: &[u64], end: u64) -> Vec<Part> {
        let ends = starts.iter().skip(1).copied().chain([end]);
        starts
            .iter()
            .zip(ends)
            .enumerate()
            .map(|(k, (&start, end))| {
                let start = if k == 0 { from } else { start };
                Part {
                    start,
                    len: end - start,
                    xz: None,
                    bzip2: None,
                }
            })
            .collect()
    }
}

/// The parts of a file, in order.
#[derive(Clone, Debug)]
pub struct Parts {
    pub compression: Compression,
    pub list: Vec<Part>,
    /// The file's size, and where the parts listed start (0: the whole file's; else a range's,
    /// `parts_in`).
    pub size: u64,
    from: u64,
    /// xz: each stream's header (12 bytes), which `Part::xz` points into.
    xz_headers: Vec<[u8; 12]>,
    /// The last part stands for the rest of the file past a range's parts (`parts_in`), not
    /// walked: it is no part to name in an error.
    rest: bool,
}

impl Parts {
    /// The byte offsets at which a reader may start: each part's start, the first one's being
    /// where the list starts (0 for the whole file, though an xz stream's header comes before
    /// its first block).
    pub fn starts(&self) -> Vec<u64> {
        let mut starts: Vec<u64> = self.list.iter().map(|part| part.start).collect();
        if let Some(first) = starts.first_mut() {
            *first = self.from;
        }
        starts
    }

    /// The run of parts from the one starting at byte `start` (where the list starts: the
    /// first) to the one starting at `end` (None: to the last), or None when no part starts
    /// exactly there.
    pub fn between(&self, start: u64, end: Option<u64>) -> Option<std::ops::Range<usize>> {
        let first = match start {
            _ if start == self.from => 0,
            _ => self.list.binary_search_by_key(&start, |p| p.start).ok()?,
        };
        let last = match end {
            Some(end) => self.list.binary_search_by_key(&end, |p| p.start).ok()?,
            None => self.list.len(),
        };
        (first <= last).then_some(first..last)
    }

    /// `between`, or the error that says the file changed since the plan (no part starts at
    /// `start` or `end`): what a reader of a planned range of `path` gives.
    pub fn planned(
        &self,
        path: &Path,
        start: u64,
        end: Option<u64>,
    ) -> Result<std::ops::Range<usize>, Error> {
        self.between(start, end).ok_or_else(|| {
            // Named: the offsets where no part starts.
            let missing: Vec<String> = [Some(start), end]
                .into_iter()
                .flatten()
                .filter(|&at| self.between(at, None).is_none())
                .map(|at| at.to_string())
                .collect();
            Error::BadFile {
                path: path.to_path_buf(),
                message: format!(
                    "no compressed part starts at byte {}: the file changed since the plan; \
                     plan again",
                    missing.join(" or ")
                ),
            }
        })
    }

    /// The file's bytes that the parts `run` stand for in its progress: from the first one's
    /// start (where the list starts, for the first part) to the next part's (the file's end,
    /// after the last), so that xz's stream headers, indexes and padding are counted too.
    pub fn span(&self, run: std::ops::Range<usize>) -> u64 {
        let from = match run.start {
            0 => self.from,
            k => self.list.get(k).map_or(self.size, |p| p.start),
        };
        let to = self.list.get(run.end).map_or(self.size, |p| p.start);
        to.saturating_sub(from)
    }

    /// The length of the text of the parts `run`, where the file records it (xz's index);
    /// None also when the recorded lengths add up past 2^64 (a damaged index).
    pub fn text_len(&self, run: std::ops::Range<usize>) -> Option<u64> {
        self.list[run].iter().try_fold(0u64, |total, part| {
            total.checked_add(part.xz.as_ref()?.text)
        })
    }

    /// Consecutive runs of `range`'s parts, each about `bytes` of the file (a run never joins
    /// two xz streams: each is decoded with its own stream's header).
    pub fn runs(&self, range: std::ops::Range<usize>, bytes: u64) -> Vec<std::ops::Range<usize>> {
        let mut runs = Vec::new();
        let mut first = range.start;
        let mut held = 0;
        for k in range.clone() {
            let joins = k == first
                || self.list[k].xz.as_ref().map(|b| b.stream)
                    == self.list[first].xz.as_ref().map(|b| b.stream);
            if !joins || (held >= bytes && k > first) {
                runs.push(first..k);
                first = k;
                held = 0;
            }
            held += self.list[k].len;
        }
        if first < range.end {
            runs.push(first..range.end);
        }
        runs
    }

    /// A reader of the text of the parts `run` (consecutive), from `file`. Its errors are
    /// located (`Damaged`) at the file offset its decoder had consumed to.
    pub fn decoder(
        &self,
        file: File,
        run: std::ops::Range<usize>,
    ) -> std::io::Result<Box<dyn Read + Send>> {
        let Some(first) = self.list.get(run.start) else {
            return Ok(Box::new(std::io::empty()));
        };
        let last = &self.list[run.end - 1];
        let end = last.start + last.len;
        let bytes = Section {
            file,
            at: first.start,
            end,
        };
        let reached = Arc::new(AtomicU64::new(first.start));
        let counted = |bytes| {
            let buffered = BufReader::with_capacity(READ_BUFFER, bytes);
            Consumed::new(
                buffered,
                first.start,
                Arc::clone(&reached),
                self.compression,
            )
        };
        let text: Box<dyn Read + Send> = match (&first.xz, first.bzip2) {
            (Some(block), _) => {
                let header = self.xz_headers[block.stream as usize];
                let blocks = self.list[run].iter().filter_map(|p| p.xz.as_ref());
                xz::decoder(header, blocks, counted(bytes))
            }
            (None, Some(_)) => {
                let reached = Arc::clone(&reached);
                bzip2::decoder(bytes.file, self.size, &self.list[run], end, reached)
            }
            (None, None) => decompressed(counted(bytes), self.compression)
                .map_err(|error| damaged(error, first.start, first.start))?,
        };
        let located = Located::new(text, reached, first.start, self.compression);
        Ok(Box::new(located))
    }

    /// `error` (a located one, from `decoder`) with the part holding its place named, when the
    /// file has more parts than one.
    pub fn name_part(&self, error: std::io::Error) -> std::io::Error {
        if self.list.len() < 2 {
            return error;
        }
        file_bytes::with_part(error, |at| {
            // The last part starting at or before `at` (the first, for a byte before it: an
            // xz stream's header).
            let k = self.list.partition_point(|part| part.start <= at).max(1) - 1;
            let unwalked = self.rest && k + 1 == self.list.len();
            (!unwalked).then(|| self.list.get(k).map(|part| part.start))?
        })
    }
}

/// The lanes worth decompressing a file of parts on, for a run of `threads` threads: all of
/// them where one decoding thread would be slower than the threads consuming its text, else 1.
/// On two cores more lanes than needed cost 10-17% (`tokenize` of zstd frames and BGZF:
/// docs/performance.md#compressed-files-of-parts): they share the cores with the encoder.
pub fn lanes_for(compression: Compression, threads: usize) -> usize {
    // One thread's decoding, MB/s of text on the 2-core VM (`benchmarks.prepare_compressed
    // --read-only`), and what one encoding thread consumes (tokenize and prepare: 75-120).
    const CONSUMED: usize = 110;
    let decoded = match compression {
        Compression::Zstd => 1200,
        Compression::Gzip => 580,
        Compression::Xz => 186,
        Compression::Bzip2 => 57,
        Compression::None => return 1,
    };
    if threads * CONSUMED > decoded {
        threads
    } else {
        1
    }
}

/// The parts of `path`, stored with `compression`: one covering the file when it cannot be cut.
pub fn parts(path: &Path, compression: Compression) -> Result<Parts, Error> {
    parts_in(path, compression, 0, None)
}

/// The parts of `path` from byte `from` (a part's start, or 0) to `until` (a part's start;
/// None: the end), then one part for the rest of the file: a range's own parts, found without
/// reading the headers of the whole file (a unit of a 50 GB file reads its share of them; what
/// follows the range decodes as one stream, as a run of these parts does). An xz file's index
/// lies at its end: its whole list is read. When the walk finds no part at `from` or `until`
/// (the file changed), the file is one part, and `between` says so.
pub fn parts_in(
    path: &Path,
    compression: Compression,
    from: u64,
    until: Option<u64>,
) -> Result<Parts, Error> {
    let io = |source| Error::read(path, source);
    let file = File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let at = Bytes { file: &file, size };
    let end = until.unwrap_or(size).min(size);
    let walked = |starts: Option<Vec<u64>>| {
        let mut list = Part::tiling(from, &starts?, end);
        if end < size {
            list.push(Part {
                start: end,
                len: size - end,
                xz: None,
                bzip2: None,
            });
        }
        Some(((list, vec![]), from))
    };
    let found = match compression {
        Compression::Zstd => walked(zstd::frames(&at, from, end)),
        Compression::Gzip => walked(gzip::members(&at, from, end)),
        Compression::Bzip2 => bzip2::blocks(&at, from, end).map(|list| ((list, vec![]), from)),
        Compression::Xz => xz::blocks(&at).map(|found| (found, 0)),
        Compression::None => None,
    };
    let rest = end < size && compression != Compression::Xz;
    let ((list, xz_headers), from, rest) = match found {
        Some((found, from)) if !found.0.is_empty() => (found, from, rest),
        _ => {
            let whole = Part {
                start: 0,
                len: size,
                xz: None,
                bzip2: None,
            };
            ((vec![whole], vec![]), 0, false)
        }
    };
    Ok(Parts {
        compression,
        list,
        size,
        from,
        xz_headers,
        rest,
    })
}

#[cfg(test)]
mod tests {
    use super::test_files::{read_runs, stored, text};
    use super::*;

    #[test]
    fn a_file_of_more_parts_than_one_a_kibibyte_is_one_part_read_whole() {
        use std::io::Write;
        // More parts than the fewest a file may have (4096), each far under a KiB.
        let plain = text(6_000);
        let lines: Vec<&[u8]> = plain.split_inclusive(|&b| b == b'\n').collect();
        let bz2 = |piece: &[u8]| {
            let level = ::bzip2::Compression::new(1);
            let mut encoder = ::bzip2::write::BzEncoder::new(Vec::new(), level);
            encoder.write_all(piece).expect("compressed");
            encoder.finish().expect("compressed")
        };
        let zst = |piece: &[u8]| ::zstd::encode_all(piece, 1).expect("compressed");
        type Make<'f> = &'f dyn Fn(&[u8]) -> Vec<u8>;
        let makers: [(Compression, Make<'_>); 3] = [
            (Compression::Zstd, &zst),
            (Compression::Gzip, &test_files::bgzf_member),
            (Compression::Bzip2, &bz2),
        ];
        for (compression, make) in makers {
            // A part a line: tens of bytes each, far more than one a KiB.
            let tiny: Vec<u8> = lines.iter().flat_map(|line| make(line)).collect();
            let file = stored(&tiny);
            let found = parts(file.path(), compression).expect("parts");
            assert_eq!(
                found.starts(),
                vec![0],
                "{compression:?}, {} bytes",
                tiny.len()
            );
            assert!(
                read_runs(file.path(), &found, 1) == plain,
                "{compression:?}: read whole"
            );
            // The same text in parts of 20 kB of text: parts still.
            let large: Vec<u8> = plain.chunks(20_000).flat_map(make).collect();
            let file = stored(&large);
            let found = parts(file.path(), compression).expect("parts");
            assert!(
                found.list.len() > 1,
                "{compression:?}: {} parts",
                found.list.len()
            );
            assert!(read_runs(file.path(), &found, 1) == plain);
        }
        assert_eq!(file_bytes::most_parts(0), 1 << 12);
        assert_eq!(file_bytes::most_parts(10 << 20), 10 << 10);
    }

    #[test]
    fn parts_tile_the_file_and_runs_never_join_xz_streams() {
        let parts = Parts {
            compression: Compression::Zstd,
            list: (0..5)
                .map(|k| Part {
                    start: k * 10,
                    len: 10,
                    xz: None,
                    bzip2: None,
                })
                .collect(),
            size: 50,
            from: 0,
            xz_headers: vec![],
            rest: false,
        };
        assert_eq!(parts.runs(0..5, 25), vec![0..3, 3..5]);
        assert_eq!(parts.span(0..5), 50);
        assert_eq!(parts.span(1..3), 20);
        assert_eq!(parts.runs(1..4, 1), vec![1..2, 2..3, 3..4]);
        assert_eq!(parts.runs(2..2, 1), Vec::<std::ops::Range<usize>>::new());
        assert_eq!(parts.between(10, Some(40)), Some(1..4));
        assert_eq!(parts.between(10, None), Some(1..5));
        assert_eq!(parts.between(11, None), None);
        assert_eq!(parts.between(0, Some(30)), Some(0..3));
        let mut xz = parts.clone();
        for (k, part) in xz.list.iter_mut().enumerate() {
            part.xz = Some(xz::Block {
                stream: u32::from(k >= 2),
                unpadded: 10,
                text: 1,
            });
        }
        assert_eq!(xz.runs(0..5, 1000), vec![0..2, 2..5]);
        assert_eq!((xz.text_len(1..4), parts.text_len(1..4)), (Some(3), None));
    }

    #[test]
    fn lanes_go_to_decoders_slower_than_their_consumers() {
        assert_eq!(lanes_for(Compression::Zstd, 2), 1);
        assert_eq!(lanes_for(Compression::Zstd, 16), 16);
        assert_eq!(lanes_for(Compression::Gzip, 4), 1);
        assert_eq!(lanes_for(Compression::Gzip, 8), 8);
        assert_eq!(lanes_for(Compression::Xz, 2), 2);
        assert_eq!(lanes_for(Compression::Bzip2, 2), 2);
        assert_eq!(lanes_for(Compression::Bzip2, 1), 1);
        assert_eq!(lanes_for(Compression::None, 16), 1);
    }

    #[test]
    fn a_file_that_cannot_be_cut_is_one_part() {
        let plain = text(100);
        for compression in [Compression::Bzip2, Compression::Gzip, Compression::None] {
            let file = stored(&plain);
            let parts = parts(file.path(), compression).expect("parts");
            assert_eq!(parts.starts(), vec![0]);
            assert_eq!(parts.list[0].len, plain.len() as u64);
        }
    }
}
