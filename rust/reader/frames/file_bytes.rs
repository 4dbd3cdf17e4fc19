//! A compressed file's bytes as the walks and decoders read them: at given offsets (headers,
//! indexes), or a section in order; and how far a decoder came in them, for its errors.

use std::fs::File;
use std::io::{BufRead, Read};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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

/// A decoder's buffered input that counts what the decoder consumed: `reached` holds the file
/// offset just past its last byte consumed. The bytes read from the file are no measure of
/// where a decoder failed: its buffer reads a mebibyte ahead (a whole small file). What it
/// consumed is what it decoded, give or take the decoder's own look-ahead (a zstd block, a few
/// bytes of bzip2's bits: `look_back`), so an error can name the damaged place in the file.
/// A zstd decoder is offered at most `ZSTD_WINDOW` bytes a call: it consumes nothing in a call
/// that fails, so its place is the start of that call's window (by then it has taken the
/// damaged block's first bytes into its own buffer). The other decoders take what the buffer
/// holds: they report what they consumed, and fewer bytes a call would only cost calls.
pub struct Consumed<R> {
    inner: R,
    at: u64,
    reached: Arc<AtomicU64>,
    window: usize,
}

impl<R: BufRead> Consumed<R> {
    /// `inner`, whose first byte is byte `at` of the file, read by `compression`'s decoder.
    pub fn new(
        inner: R,
        at: u64,
        reached: Arc<AtomicU64>,
        compression: crate::reader::Compression,
    ) -> Self {
        reached.store(at, Ordering::Relaxed);
        let window = match compression {
            crate::reader::Compression::Zstd => ZSTD_WINDOW,
            _ => usize::MAX,
        };
        Self {
            inner,
            at,
            reached,
            window,
        }
    }

    fn advance(&mut self, n: usize) {
        self.at += n as u64;
        self.reached.store(self.at, Ordering::Relaxed);
    }
}

impl<R: BufRead> Read for Consumed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.advance(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Consumed<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        let held = self.inner.fill_buf()?;
        Ok(&held[..held.len().min(self.window)])
    }

    fn consume(&mut self, n: usize) {
        self.inner.consume(n);
        self.advance(n);
    }
}

/// How far back from the offset a decoder consumed to (`Consumed`) lies the byte it was
/// decoding when it failed: xz's and gzip's decoders take their input as they need it (zlib
/// gives back what its bit buffer held), so the last byte consumed; bzip2's (libbz2-rs-sys)
/// takes up to 8 bytes ahead into its bit buffer; zstd's consumes nothing in the call that
/// fails, so the next byte it would take.
pub fn look_back(compression: crate::reader::Compression) -> u64 {
    use crate::reader::Compression;
    match compression {
        Compression::Bzip2 => 9,
        Compression::Zstd => 0,
        Compression::Xz | Compression::Gzip | Compression::None => 1,
    }
}

/// The most bytes a zstd decoder is offered a call (`Consumed`): small enough that its place,
/// the start of the failing call's window, lies inside the damaged block; large enough that the
/// calls cost nothing to speak of.
const ZSTD_WINDOW: usize = 4 << 10;

/// A decoding error and where in the file the decoder was: `reached`, the offset just past the
/// last byte it consumed (`Consumed`: a stream cut short took all the file's), `near`, the byte
/// it was decoding (`look_back`), and, where the file's parts are known, the start of the part
/// holding that byte. Every mode of reading (one stream, runs of parts on lanes or on one
/// thread, a unit's range) names the same place this way, in the file's own offsets.
#[derive(Debug)]
pub struct Damaged {
    pub reached: u64,
    pub near: u64,
    pub part: Option<u64>,
    source: std::io::Error,
}

impl std::fmt::Display for Damaged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.source)?;
        match self.part {
            Some(part) => write!(f, ", in the part from byte {part}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for Damaged {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// `error`, a decoder's, as a `Damaged` at `reached`, decoding byte `near` (of the same kind: a
/// stream cut short stays `UnexpectedEof`). One that is already located, or a `NotCompressed`
/// refusal of the file's first bytes (its own message says what is wrong), is returned as it is.
pub fn damaged(error: std::io::Error, reached: u64, near: u64) -> std::io::Error {
    if damaged_at(&error).is_some() || crate::reader::not_compressed(&error).is_some() {
        return error;
    }
    let kind = error.kind();
    std::io::Error::new(
        kind,
        Damaged {
            reached,
            near,
            part: None,
            source: error,
        },
    )
}

/// The place that `error` names, if it is a located decoding error.
pub fn damaged_at(error: &std::io::Error) -> Option<&Damaged> {
    error.get_ref()?.downcast_ref::<Damaged>()
}

/// `error` with the part holding its place named, by `part_of` (a located error that names none
/// yet; any other is returned as it is).
pub fn with_part(error: std::io::Error, part_of: impl Fn(u64) -> Option<u64>) -> std::io::Error {
    let Some(place) = damaged_at(&error).filter(|place| place.part.is_none()) else {
        return error;
    };
    let Some(part) = part_of(place.near) else {
        return error;
    };
    let kind = error.kind();
    match error.into_inner().map(|inner| inner.downcast::<Damaged>()) {
        Some(Ok(mut place)) => {
            place.part = Some(part);
            std::io::Error::new(kind, *place)
        }
        // Not reached: `damaged_at` found a `Damaged` inside.
        Some(Err(inner)) => std::io::Error::new(kind, inner),
        None => std::io::Error::from(kind),
    }
}

/// A decoder of `compression` whose errors are located (`Damaged`) at the place its `Consumed`
/// input (from file offset `from`) reached.
pub struct Located<R> {
    inner: R,
    reached: Arc<AtomicU64>,
    from: u64,
    back: u64,
}

impl<R> Located<R> {
    pub fn new(
        inner: R,
        reached: Arc<AtomicU64>,
        from: u64,
        compression: crate::reader::Compression,
    ) -> Self {
        let back = look_back(compression);
        Self {
            inner,
            reached,
            from,
            back,
        }
    }
}

impl<R> Located<R> {
    /// `error` located at the place the decoder's input had reached.
    fn locate(&self, error: std::io::Error) -> std::io::Error {
        let reached = self.reached.load(Ordering::Relaxed);
        let near = reached.saturating_sub(self.back).max(self.from);
        damaged(error, reached, near)
    }
}

impl<R: Read> Read for Located<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => Ok(n),
            Err(error) => Err(self.locate(error)),
        }
    }
}

/// Lines are read from the decoder's own buffer, so a reader that wants `BufRead` needs no
/// second buffer (and no second copy of the text) above this one.
impl<R: BufRead> BufRead for Located<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        // Asked twice (the borrow checker cannot hand out the buffer of a call whose error
        // path needs `self`), which costs nothing: the second call returns what the first filled.
        if let Err(error) = self.inner.fill_buf() {
            return Err(self.locate(error));
        }
        self.inner.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        self.inner.consume(amount);
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
