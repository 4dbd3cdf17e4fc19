//! Many texts encoded by the calling thread and the process's crew (`crew.rs`): cut into chunks
//! of about equal bytes, each encoded into one buffer by one thread, and put back together in
//! order as one flat array of ids with each text's offset (what `TextEncoder.encode_batch`
//! returns to Python).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};

use super::crew::{process_crew, sleep_while, spin_while, Crew};
pub use super::crew::{Keep, Release};
use super::TextEncoder;
use crate::error::{Error, Result};

/// The token ids of many texts back to back, and where each text's ids start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedBatch {
    pub ids: Vec<u32>,
    /// `texts.len() + 1` entries: text `i` is `ids[offsets[i]..offsets[i + 1]]` (its EOS included).
    pub offsets: Vec<i64>,
}

/// Encode `texts` in parallel and concatenate their ids in order, with `eos_id` after each text
/// when given (so a flat stream of documents can be cut anywhere and still split on EOS).
pub fn encode_batch<S: AsRef<str> + Sync>(
    encoder: &dyn TextEncoder,
    texts: &[S],
    eos_id: Option<u32>,
) -> Result<EncodedBatch> {
    check_eos(encoder, eos_id)?;
    let crew = process_crew()?;
    let threads = crew.threads();
    let lengths = texts.iter().map(|text| text.as_ref().len());
    if threads == 1 || lengths.clone().sum::<usize>() < INLINE_BYTES {
        return encode_inline(encoder, texts, eos_id);
    }
    // Chunks of consecutive texts, each encoded into one buffer (no vector per text), taken in
    // turn by the calling thread and the crew's `threads - 1` helpers.
    let starts = chunk_starts(lengths, threads);
    let slots: Vec<OnceLock<ChunkResult>> = starts.iter().map(|_| OnceLock::new()).collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let c = next.fetch_add(1, Ordering::Relaxed);
        let Some(&start) = starts.get(c) else { break };
        let end = starts.get(c + 1).copied().unwrap_or(texts.len());
        // Each slot is set once, by the one thread that took its chunk.
        let _ = slots[c].set(encode_chunk(encoder, &texts[start..end], start, eos_id));
    };
    crew.run(&work, work, &Keep);
    let chunks = in_order(filled(slots)?)?;
    Ok(assemble(&crew, &chunks, texts.len(), &Keep))
}

/// `encode_batch` for texts whose views only the calling thread can make, one at a time and in
/// order (`view(i)` for `i` in `0..count`: a Python string's UTF-8, which needs the GIL, and the
/// first time makes it). The calling thread makes the views and cuts them into chunks as it
/// goes, publishing each; the crew's helpers encode the chunks as they are published, and the
/// calling thread, once every view is made, takes chunks beside them (`release` runs its share
/// and its waits). Making the views thus overlaps the encoding (measured on Python strings in
/// 26 languages: 1.65 cores used at 2 threads when made first, 1.8 when made already), and no
/// more threads run than asked for. Before, the pool's `threads` encoded while the calling
/// thread waited, woken as each of a batch's 64 chunks ended: on two vCPUs, 8% of a warm pass
/// went to futex wakes and rescheduling.
///
/// The chunks are cut as the views come, so no pass over the texts comes first (a pass over a
/// Python list for the lengths was 5% of a warm two-thread pass, the helper idle): the chunk
/// size is set from the first `INLINE_BYTES` of text, and a batch shorter than that is
/// encoded by the calling thread. The first error of `view` is returned as is, after the
/// chunks already published are done.
pub fn encode_batch_pipelined<'t, E: From<Error>>(
    encoder: &dyn TextEncoder,
    count: usize,
    eos_id: Option<u32>,
    mut view: impl FnMut(usize) -> std::result::Result<&'t str, E>,
    release: &impl Release,
) -> std::result::Result<EncodedBatch, E> {
    check_eos(encoder, eos_id)?;
    let crew = process_crew()?;
    let threads = crew.threads();
    // The views of the batch's start, up to `INLINE_BYTES` of text (all of them at one thread).
    let mut views = Vec::with_capacity(count);
    let mut weight = 0;
    while views.len() < count && (threads == 1 || weight < INLINE_BYTES) {
        let text = view(views.len())?;
        weight += text.len() + TEXT_WEIGHT;
        views.push(text);
    }
    if views.len() == count {
        return Ok(release.run(|| encode_inline(encoder, &views, eos_id))?);
    }
    // A chunk's size from the start's weight per text, as `chunk_starts` sets it from all; it
    // grows as the views come when the texts seen so far say the rest would not fit the board
    // (`Cutter`).
    let target = chunk_target(weight / views.len() * count, threads);
    // Room for four times the chunks expected; the last one takes whatever comes after.
    let most = (4 * threads * CHUNKS_PER_THREAD).min(count);
    let mut cuts = Cutter::new(target, count, most);
    let board = Board::new(most);
    let slots: Vec<OnceLock<ChunkResult>> = (0..most).map(|_| OnceLock::new()).collect();
    let next = AtomicUsize::new(0);
    let take = || loop {
        let c = next.fetch_add(1, Ordering::Relaxed);
        let Some((first, views)) = board.views(c) else {
            break;
        };
        // Each slot is set once, by the one thread that took its chunk.
        let _ = slots[c].set(encode_chunk(encoder, views, first, eos_id));
    };
    let mut made = Ok(());
    let mut published = 0;
    crew.run(
        &take,
        || {
            {
                // Closed on the way out, even by a panic: a helper waiting for a chunk that
                // will never be published stops waiting.
                let _closed = board.close_on_drop();
                let mut chunk: Vec<&'t str> = Vec::new();
                let mut start = 0;
                let mut at = 0;
                while at < count {
                    let text = if at < views.len() {
                        views[at]
                    } else {
                        match view(at) {
                            Ok(text) => text,
                            Err(error) => {
                                made = Err(error);
                                break;
                            }
                        }
                    };
                    at += 1;
                    chunk.push(text);
                    if cuts.ends_chunk(text.len()) {
                        board.publish(published, start, std::mem::take(&mut chunk));
                        (published, start) = (published + 1, at);
                    }
                }
                if made.is_ok() {
                    board.publish(published, start, chunk);
                    published += 1;
                }
            }
            if made.is_ok() {
                release.run(take);
            }
        },
        release,
    );
    made?;
    let slots: Vec<OnceLock<ChunkResult>> = slots.into_iter().take(published).collect();
    let chunks = in_order(filled(slots)?)?;
    Ok(assemble(&crew, &chunks, count, release))
}

/// The chunks' views of a pipelined batch (each with its first text's place in the batch),
/// published one by one by the calling thread and read by the threads that encode them.
struct Board<'t> {
    views: Vec<OnceLock<(usize, Vec<&'t str>)>>,
    /// Set when the calling thread is done publishing (all chunks, or up to an error).
    closed: AtomicBool,
    /// How many threads sleep waiting for a chunk: the calling thread wakes them only when some
    /// do. Publishing and closing take this lock before they look, so a thread that found
    /// nothing under it cannot miss the wake-up.
    sleepers: Mutex<usize>,
    more: Condvar,
}

impl<'t> Board<'t> {
    fn new(chunks: usize) -> Self {
        Board {
            views: (0..chunks).map(|_| OnceLock::new()).collect(),
            closed: AtomicBool::new(false),
            sleepers: Mutex::new(0),
            more: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        self.sleepers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether chunk `c` is still to come: not published, and the board open.
    fn pending(&self, c: usize) -> bool {
        self.views[c].get().is_none() && !self.closed.load(Ordering::Acquire)
    }

    /// Chunk `c`'s views, the first being text `first` (chunks are published in order).
    fn publish(&self, c: usize, first: usize, views: Vec<&'t str>) {
        let _ = self.views[c].set((first, views));
        if *self.lock() > 0 {
            self.more.notify_all();
        }
    }

    /// Closes the board when dropped: no chunk is published after.
    fn close_on_drop(&self) -> CloseOnDrop<'_, 't> {
        CloseOnDrop(self)
    }

    /// Chunk `c`'s first text and views, once published; `None` when `c` is past the last
    /// chunk or the board was closed before publishing it.
    fn views(&self, c: usize) -> Option<(usize, &[&'t str])> {
        if c >= self.views.len() {
            return None;
        }
        // A helper that caught up with the calling thread keeps watching a while before it
        // sleeps: a sleeping helper, woken, waited 0.5 ms on this VM (see `crew.rs`), and on a
        // first pass, where CPython makes each string's UTF-8, it caught up again and again.
        spin_while(|| self.pending(c));
        if self.pending(c) {
            let _published = sleep_while(
                self.lock(),
                &self.more,
                |_| self.pending(c),
                |sleepers| sleepers,
            );
        }
        self.views[c]
            .get()
            .map(|(first, views)| (*first, views.as_slice()))
    }
}

struct CloseOnDrop<'b, 't>(&'b Board<'t>);

impl Drop for CloseOnDrop<'_, '_> {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Release);
        let _sleepers = self.0.lock();
        self.0.more.notify_all();
    }
}

/// Every chunk's result, once all were encoded (a helper's panic has reached the caller in
/// `Crew::run` before this).
fn filled(slots: Vec<OnceLock<ChunkResult>>) -> Result<Vec<ChunkResult>> {
    slots
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .ok_or_else(|| Error::Config("a chunk of the batch was not encoded".into()))
        })
        .collect()
}

fn check_eos(encoder: &dyn TextEncoder, eos_id: Option<u32>) -> Result<()> {
    if let Some(eos) = eos_id {
        let vocab_size = encoder.vocab_size();
        if eos as usize >= vocab_size {
            return Err(Error::Config(format!(
                "eos_id {eos} is not an id of this tokenizer (its vocabulary has {vocab_size} \
                 tokens); pass the id of its end-of-text token, e.g. the one of \"<|endoftext|>\""
            )));
        }
    }
    Ok(())
}

/// The batch encoded by the calling thread: a hand-off to a helper wakes a sleeping thread
/// (and, on a VM, often a halted vCPU): 50-150 µs measured per call, more than the encoding of
/// a small batch, and nothing gained with one thread.
fn encode_inline<S: AsRef<str>>(
    encoder: &dyn TextEncoder,
    texts: &[S],
    eos_id: Option<u32>,
) -> Result<EncodedBatch> {
    let chunk = encode_chunk(encoder, texts, 0, eos_id).map_err(failed)?;
    let offsets = std::iter::once(0)
        .chain(chunk.ends.iter().map(|&end| end as i64))
        .collect();
    Ok(EncodedBatch {
        ids: chunk.ids,
        offsets,
    })
}

type ChunkResult = std::result::Result<EncodedChunk, (usize, String)>;

/// The chunks, or the first failing text's error (chunks are in text order).
fn in_order(chunks: Vec<ChunkResult>) -> Result<Vec<EncodedChunk>> {
    chunks
        .into_iter()
        .collect::<std::result::Result<_, _>>()
        .map_err(failed)
}

fn failed((text, message): (usize, String)) -> Error {
    Error::Input(format!("text {text} of the batch: {message}"))
}

/// Batches of fewer bytes are encoded by the calling thread: sharing them would cost more in
/// waking the helpers than it saves.
const INLINE_BYTES: usize = 64 << 10;

/// Batches of fewer ids are put together by the calling thread alone. The crew's helpers are
/// still awake from the encoding, so sharing pays from a few pages on (4096 texts, 1 MB, at
/// two threads: 0.15 ms alone).
const SERIAL_ASSEMBLY_IDS: usize = 1 << 14;

/// The chunks' ids back to back and every text's offset. A large batch is copied by the crew
/// with the calling thread, each chunk into its place: a serial copy of a batch's ids held 16
/// threads back (Amdahl). The output is written once, never zeroed first.
fn assemble(
    crew: &Crew,
    chunks: &[EncodedChunk],
    texts: usize,
    release: &impl Release,
) -> EncodedBatch {
    let total: usize = chunks.iter().map(|chunk| chunk.ids.len()).sum();
    let mut ids: Vec<u32> = Vec::with_capacity(total);
    let mut offsets: Vec<i64> = Vec::with_capacity(texts + 1);
    let mut parts = Vec::with_capacity(chunks.len());
    let mut id_rest = &mut ids.spare_capacity_mut()[..total];
    let offset_spare = &mut offsets.spare_capacity_mut()[..texts + 1];
    offset_spare[0].write(0);
    let mut offset_rest = &mut offset_spare[1..];
    let mut base = 0;
    for chunk in chunks {
        let (id_part, id_tail) = std::mem::take(&mut id_rest).split_at_mut(chunk.ids.len());
        let (offset_part, offset_tail) =
            std::mem::take(&mut offset_rest).split_at_mut(chunk.ends.len());
        parts.push(Mutex::new(Some((id_part, offset_part, base, chunk))));
        (id_rest, offset_rest) = (id_tail, offset_tail);
        base += chunk.ids.len();
    }
    let next = AtomicUsize::new(0);
    let place = || {
        while let Some(part) = parts.get(next.fetch_add(1, Ordering::Relaxed)) {
            // Each part is taken once, by the thread whose turn it was.
            let taken = part.lock().unwrap_or_else(PoisonError::into_inner).take();
            if let Some((id_part, offset_part, base, chunk)) = taken {
                id_part.write_copy_of_slice(&chunk.ids);
                for (slot, &end) in offset_part.iter_mut().zip(&chunk.ends) {
                    slot.write((base + end) as i64);
                }
            }
        }
    };
    if total <= SERIAL_ASSEMBLY_IDS {
        place();
    } else {
        release.run(|| crew.run(&place, place, &Keep));
    }
    // SAFETY: the chunks' ids cover `total` slots and their ends the `texts` offsets after the
    // first (every text is in exactly one chunk), all written above.
    unsafe {
        ids.set_len(total);
        offsets.set_len(texts + 1);
    }
    EncodedBatch { ids, offsets }
}

/// What a text weighs beyond its bytes when chunks are cut (its call, its end, its EOS).
const TEXT_WEIGHT: usize = 64;
/// Chunks hold about this many bytes of text: enough for a chunk to amortise its buffer,
/// little enough for several per thread, so that uneven texts balance across threads. The
/// floor matters on many threads: a call waits for its last chunk, and at 16 threads a 16 KiB
/// chunk was 0.25 ms of one thread's work in a 1.3 ms call of 4096 texts (one process of 16
/// threads ran 0.53 of 16 processes on such calls, 0.8 on calls of 65,536 texts: the lent
/// 16-core host, docs/performance.md); at 4 KiB the wait should be a quarter of that (not
/// measured there yet).
const CHUNK_BYTES: std::ops::RangeInclusive<usize> = (4 << 10)..=(256 << 10);
/// Chunks a batch is cut into per thread: on a first pass a chunk of text never seen costs many
/// times one of known words, and with 8 a thread the last chunks left one thread waiting (1.66-1.76
/// cores used at two threads on the race's 4096-text calls; 32: 1.82-1.89, the warm pass alike).
const CHUNKS_PER_THREAD: usize = 32;

/// The weight of text a chunk holds, for a batch of `total` weight.
fn chunk_target(total: usize, threads: usize) -> usize {
    (total / (threads.max(1) * CHUNKS_PER_THREAD)).clamp(*CHUNK_BYTES.start(), *CHUNK_BYTES.end())
}

/// Where a pipelined batch's chunks end, decided text by text as the views come.
///
/// The chunks' size is set from the batch's first texts, and the board has room for a few
/// times the chunks that size makes; the last chunk takes whatever comes after. Where the first
/// texts are shorter than the rest (a corpus whose first file holds short paragraphs) the board
/// filled long before the end and its last chunk, encoded by one thread, held half of a 150 MB
/// batch at two threads (0.45 s where 0.28 was due). So after each chunk the size grows where
/// the rest, as heavy a text as those seen so far, would not fit half the slots left.
struct Cutter {
    target: usize,
    count: usize,
    /// Slots on the board, chunks cut so far, texts seen and their weight, the open chunk's.
    most: usize,
    cut: usize,
    at: usize,
    viewed: usize,
    held: usize,
}

impl Cutter {
    fn new(target: usize, count: usize, most: usize) -> Self {
        Cutter {
            target,
            count,
            most,
            cut: 0,
            at: 0,
            viewed: 0,
            held: 0,
        }
    }

    /// Whether the next text, of `len` bytes, ends its chunk (never the batch's last text, and
    /// never while only the last slot is left).
    fn ends_chunk(&mut self, len: usize) -> bool {
        self.at += 1;
        self.held += len + TEXT_WEIGHT;
        self.viewed += len + TEXT_WEIGHT;
        if self.held < self.target || self.at >= self.count || self.cut + 1 >= self.most {
            return false;
        }
        self.cut += 1;
        self.held = 0;
        let rest = self.viewed / self.at * (self.count - self.at);
        let slots = (self.most - self.cut) / 2;
        self.target = self.target.max(rest / slots.max(1));
        true
    }
}

/// Where each chunk starts, given the texts' lengths: runs of consecutive texts of about the
/// same number of bytes (`CHUNKS_PER_THREAD` a thread, within `CHUNK_BYTES`), cut by bytes rather
/// than by count, so that a batch of a few long documents among many short ones still spreads
/// evenly.
fn chunk_starts(lengths: impl Iterator<Item = usize> + Clone, threads: usize) -> Vec<usize> {
    let weights = lengths.map(|length| length + TEXT_WEIGHT);
    let total: usize = weights.clone().sum();
    let target = chunk_target(total, threads);
    let mut starts = vec![0];
    let mut held = 0;
    let mut weights = weights.enumerate().peekable();
    while let Some((i, weight)) = weights.next() {
        held += weight;
        if held >= target && weights.peek().is_some() {
            starts.push(i + 1);
            held = 0;
        }
    }
    starts
}

/// Consecutive texts' ids in one buffer, and where each text's ids end in it.
struct EncodedChunk {
    ids: Vec<u32>,
    ends: Vec<usize>,
}

/// Encode `chunk` (whose first text is text `first` of the batch); the error names the first
/// text that fails.
fn encode_chunk<S: AsRef<str>>(
    encoder: &dyn TextEncoder,
    chunk: &[S],
    first: usize,
    eos_id: Option<u32>,
) -> Result<EncodedChunk, (usize, String)> {
    let bytes: usize = chunk.iter().map(|text| text.as_ref().len()).sum();
    let mut ids = Vec::with_capacity(bytes / 3 + chunk.len());
    let mut ends = Vec::with_capacity(chunk.len());
    let mut texts = chunk.iter().enumerate().map(|(k, text)| {
        if let Some(next) = chunk.get(k + 1) {
            prefetch_start(next.as_ref().as_bytes());
        }
        text.as_ref()
    });
    encoder
        .encode_texts_into(&mut texts, eos_id, &mut ids, &mut ends)
        .map_err(|(k, message)| (first + k, message))?;
    Ok(EncodedChunk { ids, ends })
}

/// How much of the next text is asked for ahead: the median document of the race's main slice
/// is 145 bytes, and 256 cover most of them.
const PREFETCH_BYTES: usize = 256;

/// Ask the cache for the first bytes of `text` while the text before it is encoded. Texts of a
/// Python list lie each in its own object, wherever the allocator put it; the first read of
/// each missed the cache (30% of `is_nfc`'s samples, 10% of a warm pass, on a load of its first
/// byte), which the hardware's prefetcher, working within a page, cannot foresee.
#[inline(always)]
fn prefetch_start(text: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for offset in (0..text.len().min(PREFETCH_BYTES)).step_by(64) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch reads nothing and cannot fault; the address is within `text`.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(text.as_ptr().add(offset).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = text;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_cut_by_bytes_and_cover_every_text_once() {
        let mut texts = vec![10; 5000];
        texts[100] = 1 << 20; // one long document among many short ones
        let starts = chunk_starts(texts.iter().copied(), 2);
        assert_eq!(starts[0], 0);
        assert!(starts.windows(2).all(|w| w[0] < w[1]) && *starts.last().unwrap_or(&0) < 5000);
        // The long text closes its chunk; the short ones are not one text per chunk.
        let at = starts.iter().position(|&s| s == 100 || s == 101);
        assert!(at.is_some(), "{starts:?}");
        assert!(starts.len() < 100, "{} chunks", starts.len());
        assert_eq!(chunk_starts(std::iter::empty(), 2), vec![0]);
        assert_eq!(chunk_starts(std::iter::once(1), 4), vec![0]);
    }

    /// A stand-in encoder: a text's ids are its bytes; a text holding '!' fails.
    struct Bytes;

    impl TextEncoder for Bytes {
        fn encode(&self, text: &str) -> std::result::Result<Vec<u32>, String> {
            if text.contains('!') {
                return Err("a '!'".into());
            }
            Ok(text.bytes().map(u32::from).collect())
        }
        fn token_id(&self, _token: &str) -> Option<u32> {
            None
        }
        fn vocab_size(&self) -> usize {
            256
        }
    }

    /// `encode_batch_pipelined` of `views`, each view made as asked.
    fn pipelined(views: &[&str], eos_id: Option<u32>) -> Result<EncodedBatch> {
        encode_batch_pipelined(
            &Bytes,
            views.len(),
            eos_id,
            |i| -> Result<&str> { Ok(views[i]) },
            &Keep,
        )
    }

    fn texts(count: usize) -> Vec<String> {
        // Enough bytes to go to the helpers in many chunks, of uneven lengths.
        (0..count).map(|i| "abcdefgh".repeat(1 + i % 97)).collect()
    }

    #[test]
    fn pipelined_batches_equal_the_plain_ones() {
        for count in [0, 1, 7, 3000, 20_000] {
            let texts = texts(count);
            let views: Vec<&str> = texts.iter().map(String::as_str).collect();
            let plain = encode_batch(&Bytes, &views, Some(255));
            let mut asked = Vec::new();
            let piped = encode_batch_pipelined(
                &Bytes,
                views.len(),
                Some(255),
                |i| -> Result<&str> {
                    asked.push(i);
                    Ok(views[i])
                },
                &Keep,
            );
            assert_eq!(plain.ok(), piped.ok(), "{count} texts");
            assert_eq!(
                asked,
                (0..count).collect::<Vec<_>>(),
                "each view made once, in order"
            );
        }
    }

    #[test]
    fn pipelined_chunks_cut_from_the_start_s_sizes_hold_any_later_texts() {
        // The chunk size is set from the first 64 KiB: short texts there, then long ones (a
        // chunk each, more chunks than the board has room for: the last takes the rest), then
        // short ones again.
        let mut texts: Vec<String> = (0..9000).map(|i| format!("t{i}")).collect();
        texts.extend((0..600).map(|i| "long text ".repeat(2000 + i)));
        texts.extend((0..5000).map(|i| format!("again {i}")));
        let views: Vec<&str> = texts.iter().map(String::as_str).collect();
        let plain = encode_batch(&Bytes, &views, Some(7));
        assert_eq!(plain.ok(), pipelined(&views, Some(7)).ok());
        // And long texts first, short ones after: large chunks, then the short ones.
        let reversed: Vec<&str> = views.iter().rev().copied().collect();
        let plain = encode_batch(&Bytes, &reversed, None);
        assert_eq!(plain.ok(), pipelined(&reversed, None).ok());
    }

    #[test]
    fn a_batch_heavier_than_its_first_texts_says_still_spreads_over_the_board() {
        // 100k short texts, then 100k ten times as long: the start's size would fill the
        // board's 256 slots with the first 80% of the batch's weight and leave the rest to the
        // last chunk. Grown as the views come, no chunk holds more than a few per cent.
        let lengths: Vec<usize> = (0..200_000)
            .map(|i| if i < 100_000 { 100 } else { 1000 })
            .collect();
        let total: usize = lengths.iter().map(|len| len + TEXT_WEIGHT).sum();
        let most = 256;
        let mut cuts = Cutter::new(16 << 10, lengths.len(), most);
        let mut chunks = vec![0usize];
        for &len in &lengths {
            *chunks.last_mut().unwrap_or(&mut 0) += len + TEXT_WEIGHT;
            if cuts.ends_chunk(len) {
                chunks.push(0);
            }
        }
        assert!(chunks.len() <= most, "{} chunks", chunks.len());
        assert_eq!(chunks.iter().sum::<usize>(), total);
        let largest = chunks.iter().max().copied().unwrap_or(0);
        assert!(largest * 25 < total, "a chunk of {largest} of {total}");
        // The size only grows where needed: a batch as heavy as its start keeps it.
        let mut even = Cutter::new(16 << 10, 10_000, most);
        let cut = (0..10_000).filter(|_| even.ends_chunk(100)).count();
        let per_chunk = (16usize << 10).div_ceil(100 + TEXT_WEIGHT);
        assert_eq!(cut, (10_000 - 1) / per_chunk, "the last text ends no chunk");
    }

    #[test]
    fn pipelined_errors_name_the_first_failing_text() {
        let mut texts = texts(20_000);
        texts[15_000].push('!');
        texts[17_000].push('!');
        let views: Vec<&str> = texts.iter().map(String::as_str).collect();
        let failed = pipelined(&views, None);
        let message = failed.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            message.contains("text 15000 of the batch: a '!'"),
            "{message}"
        );
        // A view that cannot be made stops the batch with its own error.
        let failed = encode_batch_pipelined(
            &Bytes,
            views.len(),
            None,
            |i| {
                if i == 9000 {
                    Err(Error::Input("no view of text 9000".into()))
                } else {
                    Ok(views[i])
                }
            },
            &Keep,
        );
        let message = failed.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("no view of text 9000"), "{message}");
        // An EOS outside the vocabulary is refused before any view is made.
        let refused = encode_batch_pipelined(
            &Bytes,
            1,
            Some(256),
            |_| -> Result<&str> { panic!("no view should be asked for") },
            &Keep,
        );
        assert!(refused.is_err());
    }

    #[test]
    fn a_view_that_panics_ends_the_batch_without_a_hang() {
        // The helpers wait for chunks the calling thread never publishes; the board closes as
        // the panic leaves, so they stop, and the panic reaches the caller.
        let texts = texts(20_000);
        let views: Vec<&str> = texts.iter().map(String::as_str).collect();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            encode_batch_pipelined(
                &Bytes,
                views.len(),
                None,
                |i| -> Result<&str> {
                    assert!(i != 5000, "view 5000");
                    Ok(views[i])
                },
                &Keep,
            )
        }));
        assert!(outcome.is_err());
        // The crew serves the next batch.
        let again = pipelined(&views, None);
        assert_eq!(again.ok(), encode_batch(&Bytes, &views, None).ok());
    }
}
