//! The token pool: every task's `tokens.npy` copied back to back into one `tokens.npy`.
//!
//! The original wrote its pool through 32 threads into a memory map, so every page of the
//! pool counted in its memory (8.3 GB peak RSS for 7 GB) and was faulted in one at a time.
//! Here the pool is streamed with large positional reads and writes through buffers that
//! fit a core's L2 cache: a piece is read (the kernel copies it from the page cache),
//! converted to the pool's dtype with a range check, and written while still in cache.
//! Memory stays a few MiB whatever the pool.
//!
//! Writes into one file are serialised by the kernel (tmpfs takes the inode lock for each
//! `write`), and on a RAM disk they are the costly part (page allocation plus the copy).
//! With `readers == 0` one thread does it all, which is the cheapest in CPU: on 2 cores the
//! sampler's other work keeps the other core busy. With `readers > 0`, reader threads
//! prepare pieces and hand them to the calling thread, which only writes: the fastest
//! where cores are to spare.

use std::fs::File;
use std::os::unix::fs::FileExt;
#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use crate::error::{Error, IoContext, Result};

/// Tokens per piece: 512 KiB of `<u4` read, 256 KiB of `<u2` written, both within L2, so the
/// conversion and the write never go to memory for them. (Measured on the 1.7B-token
/// benchmark: larger pieces spill out of L2 and cost more; much smaller ones pay syscalls.)
const PIECE_TOKENS: usize = 128 << 10;
/// Converted buffers each reader may have in flight towards the writer (bounds memory).
const BUFFERS_PER_READER: usize = 4;
/// Progress is reported (and cancellation checked) about this often, in tokens.
const PROGRESS_TOKENS: u64 = 32 << 20;

/// A token dtype of the tokenizer's files or of the pool (numpy names: u1, <u2, <u4, <i4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenType {
    U8,
    U16,
    U32,
    I32,
}

impl TokenType {
    /// From a numpy dtype string (`dtype.str`).
    pub fn from_numpy(descr: &str) -> Result<Self> {
        match descr {
            "|u1" | "u1" => Ok(TokenType::U8),
            "<u2" => Ok(TokenType::U16),
            "<u4" => Ok(TokenType::U32),
            "<i4" => Ok(TokenType::I32),
            other => Err(Error::Config(format!(
                "token dtype {other:?} is not one of |u1, <u2, <u4, <i4"
            ))),
        }
    }

    pub fn size(self) -> usize {
        match self {
            TokenType::U8 => 1,
            TokenType::U16 => 2,
            TokenType::U32 | TokenType::I32 => 4,
        }
    }

    /// The largest token id this type holds.
    pub fn max_id(self) -> u64 {
        match self {
            TokenType::U8 => u64::from(u8::MAX),
            TokenType::U16 => u64::from(u16::MAX),
            TokenType::U32 => u64::from(u32::MAX),
            TokenType::I32 => i32::MAX as u64,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TokenType::U8 => "uint8",
            TokenType::U16 => "uint16",
            TokenType::U32 => "uint32",
            TokenType::I32 => "int32",
        }
    }
}

/// One task's `tokens.npy` and where its tokens go in the pool.
#[derive(Debug, Clone)]
pub struct PoolSource {
    pub task: String,
    pub path: PathBuf,
    pub token_type: TokenType,
    /// Byte offset of the first token (the `.npy` header's length).
    pub data_offset: u64,
    pub length: u64,
    /// Position (in tokens) of the first token in the pool.
    pub pool_offset: u64,
}

/// The pool file, already created with its header and final size.
#[derive(Debug, Clone)]
pub struct PoolTarget {
    pub path: PathBuf,
    pub header_len: u64,
    pub token_type: TokenType,
    /// `vocab_size` of `tokenizer_info.json`, when known: every id must be below it. An id
    /// past it would fit the pool's dtype and only fail in the trainer's embedding lookup,
    /// hours later; here it is caught while the copy touches every id anyway.
    pub vocab_size: Option<u64>,
}

impl PoolTarget {
    /// The largest id the pool accepts: the dtype's maximum, or `vocab_size - 1` if lower.
    fn max_id(&self) -> u64 {
        let by_type = self.token_type.max_id();
        self.vocab_size
            .map_or(by_type, |size| by_type.min(size.saturating_sub(1)))
    }

    /// Whether the vocabulary, not the dtype, sets `max_id` (for the error message).
    fn limited_by_vocab(&self) -> bool {
        self.vocab_size
            .is_some_and(|size| size.saturating_sub(1) < self.token_type.max_id())
    }
}

/// A piece of one source: tokens `start..start + count`.
#[derive(Debug, Clone, Copy)]
struct Piece {
    source: usize,
    start: u64,
    count: usize,
}

/// A converted piece on its way to the writer; its buffer goes back through `give_back`.
struct Filled {
    piece: Piece,
    buffer: Vec<u64>,
    give_back: SyncSender<Vec<u64>>,
}

fn pieces(sources: &[PoolSource]) -> Vec<Piece> {
    let mut all = Vec::new();
    for (index, source) in sources.iter().enumerate() {
        let mut start = 0;
        while start < source.length {
            let count = (source.length - start).min(PIECE_TOKENS as u64) as usize;
            all.push(Piece {
                source: index,
                start,
                count,
            });
            start += count as u64;
        }
    }
    all
}

fn buffer_words(token_type: TokenType) -> usize {
    (PIECE_TOKENS * token_type.size()).div_ceil(8)
}

/// Copy every source into the pool, with `readers` reader threads (0: this thread alone).
/// `progress(tokens)` is called every few million tokens (from the readers, as pieces are
/// handed over); returning `false` cancels the copy.
pub fn copy_pool(
    sources: &[PoolSource],
    target: &PoolTarget,
    readers: usize,
    progress: &(dyn Fn(u64) -> bool + Sync),
) -> Result<()> {
    let out = File::options()
        .write(true)
        .open(&target.path)
        .ctx("cannot open the token pool", &target.path)?;
    let pieces = pieces(sources);
    let next = AtomicUsize::new(0);
    let cancelled = AtomicBool::new(false);
    let reader = Reader {
        sources,
        target,
        pieces: &pieces,
        next: &next,
        cancelled: &cancelled,
        progress,
    };
    if readers == 0 {
        return reader.copy_inline(&out);
    }
    let readers = readers.min(pieces.len().max(1));
    let (to_writer, from_readers) = sync_channel::<Result<Filled>>(readers * BUFFERS_PER_READER);
    std::thread::scope(|scope| {
        for _ in 0..readers {
            let to_writer = to_writer.clone();
            let reader = &reader;
            scope.spawn(move || reader.run(&to_writer));
        }
        drop(to_writer); // the channel closes when every reader is done
        let written = write_all(&out, target, sources, &from_readers);
        if written.is_err() {
            cancelled.store(true, Ordering::Relaxed);
        }
        drop(from_readers); // unblocks readers waiting to send or for a buffer
        written
    })
}

fn write_piece(
    out: &File,
    target: &PoolTarget,
    source: &PoolSource,
    piece: Piece,
    buffer: &[u64],
) -> Result<()> {
    let size = target.token_type.size();
    let position = target.header_len + (source.pool_offset + piece.start) * size as u64;
    let bytes = &bytemuck::cast_slice::<u64, u8>(buffer)[..piece.count * size];
    out.write_all_at(bytes, position)
        .ctx("cannot write the token pool", &target.path)
}

/// The writer of the threaded mode: positional writes of whatever arrives, in any order.
fn write_all(
    out: &File,
    target: &PoolTarget,
    sources: &[PoolSource],
    from_readers: &Receiver<Result<Filled>>,
) -> Result<()> {
    for filled in from_readers {
        let filled = filled?;
        let source = &sources[filled.piece.source];
        write_piece(out, target, source, filled.piece, &filled.buffer)?;
        // The reader may be gone (cancelled): then the buffer is simply freed.
        let _ = filled.give_back.send(filled.buffer);
    }
    Ok(())
}

struct Reader<'a> {
    sources: &'a [PoolSource],
    target: &'a PoolTarget,
    pieces: &'a [Piece],
    next: &'a AtomicUsize,
    cancelled: &'a AtomicBool,
    progress: &'a (dyn Fn(u64) -> bool + Sync),
}

/// A reader's open source file, kept while its pieces follow one another.
#[derive(Default)]
struct OpenSource(Option<(usize, File)>);

impl OpenSource {
    fn get(&mut self, index: usize, source: &PoolSource) -> Result<&File> {
        let slot = &mut self.0;
        if slot.as_ref().map(|(at, _)| *at) != Some(index) {
            *slot = None; // another source: close this one
        }
        let (_, file) = match slot {
            Some(open) => open,
            None => slot.insert((index, open_source(source)?)),
        };
        Ok(file)
    }
}

/// One thread's progress: reported every `PROGRESS_TOKENS` tokens and when it finishes; a
/// `false` from the callback cancels the copy.
struct Progress<'a> {
    report: &'a (dyn Fn(u64) -> bool + Sync),
    unreported: u64,
}

impl Progress<'_> {
    fn add(&mut self, tokens: usize) -> Result<()> {
        self.unreported += tokens as u64;
        if self.unreported >= PROGRESS_TOKENS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.unreported > 0 {
            if !(self.report)(self.unreported) {
                return Err(Error::Output("the token pool copy was cancelled".into()));
            }
            self.unreported = 0;
        }
        Ok(())
    }
}

impl Reader<'_> {
    /// The next piece to copy, unless none is left or the copy was cancelled.
    fn claim(&self) -> Option<Piece> {
        if self.cancelled.load(Ordering::Relaxed) {
            return None;
        }
        self.pieces
            .get(self.next.fetch_add(1, Ordering::Relaxed))
            .copied()
    }

    fn new_progress(&self) -> Progress<'_> {
        Progress {
            report: self.progress,
            unreported: 0,
        }
    }

    /// One thread reads, converts and writes every piece.
    fn copy_inline(&self, out: &File) -> Result<()> {
        let mut buffer = vec![0u64; buffer_words(self.target.token_type)];
        let mut scratch = vec![0u64; buffer_words(TokenType::U32)];
        let mut open = OpenSource::default();
        let mut progress = self.new_progress();
        while let Some(piece) = self.claim() {
            let source = &self.sources[piece.source];
            self.fill(
                open.get(piece.source, source)?,
                source,
                piece,
                &mut buffer,
                &mut scratch,
            )?;
            write_piece(out, self.target, source, piece, &buffer)?;
            progress.add(piece.count)?;
        }
        progress.flush()
    }

    /// A reader thread of the threaded mode; its error goes to the writer, which stops.
    fn run(&self, to_writer: &SyncSender<Result<Filled>>) {
        if let Err(error) = self.read_pieces(to_writer) {
            self.cancelled.store(true, Ordering::Relaxed);
            let _ = to_writer.send(Err(error)); // the writer may already have stopped
        }
    }

    fn read_pieces(&self, to_writer: &SyncSender<Result<Filled>>) -> Result<()> {
        let (give_back, free) = sync_channel::<Vec<u64>>(BUFFERS_PER_READER);
        for _ in 0..BUFFERS_PER_READER {
            let _ = give_back.send(vec![0u64; buffer_words(self.target.token_type)]);
        }
        let mut scratch = vec![0u64; buffer_words(TokenType::U32)];
        let mut open = OpenSource::default();
        let mut progress = self.new_progress();
        while let Some(piece) = self.claim() {
            let source = &self.sources[piece.source];
            let file = open.get(piece.source, source)?;
            // Waits while this reader's buffers are all with the writer; fails once the
            // writer has stopped (it holds the other ends), which reports why.
            let Ok(mut buffer) = free.recv() else {
                return Ok(());
            };
            self.fill(file, source, piece, &mut buffer, &mut scratch)?;
            let filled = Filled {
                piece,
                buffer,
                give_back: give_back.clone(),
            };
            if to_writer.send(Ok(filled)).is_err() {
                return Ok(());
            }
            progress.add(piece.count)?;
        }
        progress.flush()
    }

    /// Read one piece and convert it into `buffer` in the pool's dtype.
    fn fill(
        &self,
        file: &File,
        source: &PoolSource,
        piece: Piece,
        buffer: &mut [u64],
        scratch: &mut [u64],
    ) -> Result<()> {
        let in_size = source.token_type.size();
        let position = source.data_offset + piece.start * in_size as u64;
        let out_type = self.target.token_type;
        let same = source.token_type == out_type;
        let raw = if same { &mut *buffer } else { &mut *scratch };
        let bytes = &mut bytemuck::cast_slice_mut::<u64, u8>(raw)[..piece.count * in_size];
        file.read_exact_at(bytes, position).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                ended_early(source)
            } else {
                Error::read(&source.path, e)
            }
        })?;
        let limit = self.target.max_id();
        let checked = if same {
            // No conversion; the ids still need checking when the vocabulary is smaller
            // than the dtype (a source dtype never holds more than its own maximum).
            if limit >= source.token_type.max_id() {
                return Ok(());
            }
            check(buffer, piece.count, source.token_type, limit)
        } else {
            convert(
                scratch,
                buffer,
                piece.count,
                source.token_type,
                out_type,
                limit,
            )
        };
        checked.map_err(|(at, value)| self.out_of_range(source, piece.start + at as u64, value))
    }

    /// The error for token `position` of `source` being `value`, past what the pool accepts.
    fn out_of_range(&self, source: &PoolSource, position: u64, value: u64) -> Error {
        let target = self.target;
        let why = match target.vocab_size {
            Some(size) if target.limited_by_vocab() => format!(
                "not below vocab_size {size} of tokenizer_info.json: either this task's \
                 tokens.npy is damaged or the task was tokenized with another tokenizer than \
                 the one tokenizer_info.json names"
            ),
            _ => format!(
                "above the {} pool's maximum {} (vocab_size in tokenizer_info.json is too \
                 small for this data)",
                target.token_type.name(),
                target.token_type.max_id()
            ),
        };
        Error::bad_file(
            &source.path,
            format!("task {}: token {position} is {value}, {why}", source.task),
        )
    }
}

fn ended_early(source: &PoolSource) -> Error {
    Error::bad_file(
        &source.path,
        format!(
            "task {}: holds fewer than the {} tokens its header declares; re-run the tokenizer",
            source.task, source.length
        ),
    )
}

fn open_source(source: &PoolSource) -> Result<File> {
    let file = File::open(&source.path).map_err(|e| Error::read(&source.path, e))?;
    let size = file
        .metadata()
        .map_err(|e| Error::read(&source.path, e))?
        .len();
    let needed = source.data_offset + source.length * source.token_type.size() as u64;
    if size < needed {
        return Err(ended_early(source));
    }
    Ok(file)
}

/// Token ids of one type. Every supported id fits 32 bits, so conversions go through `u32`
/// (`i32` by its bit pattern: a negative id has bit 31 set and fails every range check).
trait Token: bytemuck::Pod {
    fn to_u32(self) -> u32;
    /// Truncating: only called once the range has been checked.
    fn from_u32(value: u32) -> Self;
}

macro_rules! token {
    ($type:ty) => {
        impl Token for $type {
            #[inline(always)]
            fn to_u32(self) -> u32 {
                <$type>::from_le(self) as u32
            }
            #[inline(always)]
            fn from_u32(value: u32) -> Self {
                (value as $type).to_le()
            }
        }
    };
}
token!(u8);
token!(u16);
token!(u32);
token!(i32);

/// The first token above `limit`, as `(position, value)`. The scan is a max over the piece,
/// which vectorises with any instruction set, and the common case never branches; only a
/// piece that fails is scanned again for the position.
#[inline(always)]
fn first_above<S: Token>(source: &[S], limit: u32) -> std::result::Result<(), (usize, u64)> {
    let largest = source
        .iter()
        .fold(0u32, |largest, &token| largest.max(token.to_u32()));
    if largest <= limit {
        return Ok(());
    }
    let at = source
        .iter()
        .position(|&token| token.to_u32() > limit)
        .unwrap_or(0);
    Err((at, u64::from(source[at].to_u32())))
}

/// The conversion loop: the range check, then the copy into the pool's dtype.
#[inline(always)]
fn convert_typed<S: Token, D: Token>(
    source: &[S],
    target: &mut [D],
    limit: u32,
) -> std::result::Result<(), (usize, u64)> {
    first_above(source, limit)?;
    for (out, &token) in target.iter_mut().zip(source) {
        *out = D::from_u32(token.to_u32());
    }
    Ok(())
}

/// The same loop compiled for AVX2, chosen at run time (packing 32-bit lanes into 16-bit
/// ones takes one instruction there, several with the baseline SSE2).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn convert_typed_avx2<S: Token, D: Token>(
    source: &[S],
    target: &mut [D],
    limit: u32,
) -> std::result::Result<(), (usize, u64)> {
    convert_typed(source, target, limit)
}

fn typed<S: Token, D: Token>(
    input: &[u64],
    output: &mut [u64],
    count: usize,
    limit: u32,
) -> std::result::Result<(), (usize, u64)> {
    let source = &bytemuck::cast_slice::<u64, S>(input)[..count];
    let target = &mut bytemuck::cast_slice_mut::<u64, D>(output)[..count];
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has just been checked for AVX2.
        return unsafe { convert_typed_avx2(source, target, limit) };
    }
    convert_typed(source, target, limit)
}

/// The range check alone (AVX2 when available, like the conversion).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn first_above_avx2<S: Token>(source: &[S], limit: u32) -> std::result::Result<(), (usize, u64)> {
    first_above(source, limit)
}

fn checked<S: Token>(
    input: &[u64],
    count: usize,
    limit: u32,
) -> std::result::Result<(), (usize, u64)> {
    let source = &bytemuck::cast_slice::<u64, S>(input)[..count];
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has just been checked for AVX2.
        return unsafe { first_above_avx2(source, limit) };
    }
    first_above(source, limit)
}

/// Check `count` tokens of `input` (as `of`) against `limit`, without converting; on a
/// token above it, `Err((position, value))` of the first one.
fn check(
    input: &[u64],
    count: usize,
    of: TokenType,
    limit: u64,
) -> std::result::Result<(), (usize, u64)> {
    let limit = u32::try_from(limit).unwrap_or(u32::MAX);
    match of {
        TokenType::U8 => checked::<u8>(input, count, limit),
        TokenType::U16 => checked::<u16>(input, count, limit),
        TokenType::U32 => checked::<u32>(input, count, limit),
        TokenType::I32 => checked::<i32>(input, count, limit),
    }
}

/// Convert `count` tokens from `input` (as `from`) into `output` (as `to`), refusing ids
/// above `limit` (at most `to`'s maximum); on such a token, `Err((position, value))` of the
/// first one.
fn convert(
    input: &[u64],
    output: &mut [u64],
    count: usize,
    from: TokenType,
    to: TokenType,
    limit: u64,
) -> std::result::Result<(), (usize, u64)> {
    let limit = u32::try_from(limit.min(to.max_id())).unwrap_or(u32::MAX);
    macro_rules! dispatch_to {
        ($source:ty) => {
            match to {
                TokenType::U8 => typed::<$source, u8>(input, output, count, limit),
                TokenType::U16 => typed::<$source, u16>(input, output, count, limit),
                TokenType::U32 => typed::<$source, u32>(input, output, count, limit),
                TokenType::I32 => typed::<$source, i32>(input, output, count, limit),
            }
        };
    }
    match from {
        TokenType::U8 => dispatch_to!(u8),
        TokenType::U16 => dispatch_to!(u16),
        TokenType::U32 => dispatch_to!(u32),
        TokenType::I32 => dispatch_to!(i32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::atomic::AtomicU64;

    /// A raw token file: `header` junk bytes, then the tokens little-endian.
    fn source(
        dir: &Path,
        name: &str,
        tokens: &[u32],
        token_type: TokenType,
        pool_offset: u64,
    ) -> PoolSource {
        let path = dir.join(name);
        let header = 48u64;
        let mut file = File::create(&path).expect("create source");
        file.write_all(&[b'#'; 48]).expect("write header");
        for &token in tokens {
            let bytes = token.to_le_bytes();
            file.write_all(&bytes[..token_type.size()])
                .expect("write token");
        }
        PoolSource {
            task: name.into(),
            path,
            token_type,
            data_offset: header,
            length: tokens.len() as u64,
            pool_offset,
        }
    }

    fn target(dir: &Path, token_type: TokenType, tokens: u64) -> PoolTarget {
        let path = dir.join("pool.bin");
        let file = File::create(&path).expect("create pool");
        file.set_len(16 + tokens * token_type.size() as u64)
            .expect("size pool");
        PoolTarget {
            path,
            header_len: 16,
            token_type,
            vocab_size: None,
        }
    }

    fn read_pool(target: &PoolTarget) -> Vec<u32> {
        let bytes = std::fs::read(&target.path).expect("read pool");
        bytes[target.header_len as usize..]
            .chunks_exact(target.token_type.size())
            .map(|chunk| {
                let mut word = [0u8; 4];
                word[..chunk.len()].copy_from_slice(chunk);
                u32::from_le_bytes(word)
            })
            .collect()
    }

    #[test]
    fn copies_and_converts_in_every_mode() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Several pieces per source, partial last pieces, an empty source.
        let a: Vec<u32> = (0..(PIECE_TOKENS as u32 * 2 + 17))
            .map(|i| i % 251)
            .collect();
        let b: Vec<u32> = (0..1000).map(|i| (i * 7) % 256).collect();
        let expected: Vec<u32> = a.iter().chain(&b).copied().collect();
        for (out_type, in_types) in [
            (TokenType::U8, [TokenType::U32, TokenType::U8]),
            (TokenType::U16, [TokenType::U16, TokenType::U32]),
            (TokenType::I32, [TokenType::U8, TokenType::U16]),
        ] {
            let sources = vec![
                source(dir.path(), "a", &a, in_types[0], 0),
                source(dir.path(), "empty", &[], in_types[1], a.len() as u64),
                source(dir.path(), "b", &b, in_types[1], a.len() as u64),
            ];
            for readers in [0, 1, 3] {
                let target = target(dir.path(), out_type, expected.len() as u64);
                let reported = AtomicU64::new(0);
                let progress = |tokens: u64| {
                    reported.fetch_add(tokens, Ordering::Relaxed);
                    true
                };
                copy_pool(&sources, &target, readers, &progress).expect("copy");
                assert_eq!(
                    read_pool(&target),
                    expected,
                    "{out_type:?} with {readers} readers"
                );
                assert_eq!(reported.load(Ordering::Relaxed), expected.len() as u64);
            }
        }
    }

    #[test]
    fn refuses_ids_the_pool_cannot_hold() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut tokens = vec![1u32; PIECE_TOKENS + 10];
        tokens[PIECE_TOKENS + 3] = 70_000;
        let sources = vec![source(dir.path(), "t", &tokens, TokenType::U32, 0)];
        for readers in [0, 2] {
            let target = target(dir.path(), TokenType::U16, tokens.len() as u64);
            let error = copy_pool(&sources, &target, readers, &|_| true).expect_err("too large");
            let message = error.to_string();
            assert!(
                message.contains(&format!("token {} is 70000", PIECE_TOKENS + 3)),
                "{message}"
            );
            assert_eq!(error.kind(), crate::error::ErrorKind::Input);
        }
        // Bit 31 of an int32 pool's maximum: u32 ids above i32::MAX are refused too.
        let big = vec![source(dir.path(), "big", &[u32::MAX], TokenType::U32, 0)];
        let target = target(dir.path(), TokenType::I32, 1);
        assert!(copy_pool(&big, &target, 0, &|_| true).is_err());
    }

    #[test]
    fn short_sources_and_cancellation_are_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut short = source(dir.path(), "short", &[1, 2, 3], TokenType::U16, 0);
        short.length = 4; // the header promises more than the file holds
        let target = target(dir.path(), TokenType::U16, 4);
        let error = copy_pool(&[short], &target, 0, &|_| true).expect_err("short");
        assert!(
            error.to_string().contains("fewer than the 4 tokens"),
            "{error}"
        );

        let fine = source(dir.path(), "fine", &[1, 2, 3], TokenType::U16, 0);
        for readers in [0, 1] {
            let error = copy_pool(std::slice::from_ref(&fine), &target, readers, &|_| false)
                .expect_err("cancelled");
            assert!(error.to_string().contains("cancelled"), "{error}");
        }
    }

    #[test]
    fn refuses_ids_at_or_above_the_vocabulary() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A vocabulary of 1000 in a uint16 pool: ids 1000.. fit the dtype but not the
        // vocabulary. Same dtype (check only) and converting sources, every mode.
        let mut tokens: Vec<u32> = (0..(PIECE_TOKENS as u32 + 50)).map(|i| i % 1000).collect();
        let bad_at = PIECE_TOKENS + 7;
        tokens[bad_at] = 1000;
        for in_type in [TokenType::U16, TokenType::U32] {
            let sources = vec![
                source(dir.path(), "ok", &[999, 0, 5], in_type, 0),
                source(dir.path(), "bad", &tokens, in_type, 3),
            ];
            for readers in [0, 2] {
                let mut target = target(dir.path(), TokenType::U16, 3 + tokens.len() as u64);
                target.vocab_size = Some(1000);
                let error =
                    copy_pool(&sources, &target, readers, &|_| true).expect_err("past vocab");
                let message = error.to_string();
                assert!(
                    message.contains(&format!(
                        "task bad: token {bad_at} is 1000, not below vocab_size 1000"
                    )),
                    "{message}"
                );
                assert!(message.contains("tokens.npy is damaged"), "{message}");
                assert_eq!(error.kind(), crate::error::ErrorKind::Input);
            }
        }
    }

    #[test]
    fn accepts_the_largest_id_of_the_vocabulary() {
        let dir = tempfile::tempdir().expect("tempdir");
        // 65,536 ids in uint16 (the dtype's limit is the vocabulary's), and 200 in uint8.
        for (vocab, out_type, in_type) in [
            (65_536u64, TokenType::U16, TokenType::U16),
            (200, TokenType::U8, TokenType::U8),
            (200, TokenType::U8, TokenType::U32),
        ] {
            let largest = vocab as u32 - 1;
            let sources = vec![source(dir.path(), "t", &[0, largest, 1], in_type, 0)];
            let mut target = target(dir.path(), out_type, 3);
            target.vocab_size = Some(vocab);
            copy_pool(&sources, &target, 0, &|_| true).expect("every id is below vocab_size");
            assert_eq!(read_pool(&target), vec![0, largest, 1]);
            // One more is refused, in the same layout.
            let over = vec![source(dir.path(), "t", &[0, largest + 1], in_type, 0)];
            if u64::from(largest + 1) <= in_type.max_id() {
                let error = copy_pool(&over, &target, 0, &|_| true).expect_err("over");
                assert!(error.to_string().contains("token 1 is"), "{error}");
            }
        }
    }
}
