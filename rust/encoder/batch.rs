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

/// `encode_batch` for texts whose views only the calling thread can make, one at a time
/// (`view(i)`: a Python string's UTF-8, which needs the GIL, and the first time makes it).
/// The calling thread makes the views chunk by chunk and publishes each chunk; the crew's
/// helpers encode the chunks as they are published, and the calling thread, once every view is
/// made, takes chunks beside them (`release` runs its share and its waits). Making the views
/// thus overlaps the encoding (measured on Python strings in 26 languages: 1.65 cores used at 2
/// threads when made first, 1.8 when made already), and no more threads run than asked for.
/// Before, the pool's `threads` encoded while the calling thread waited, woken as each of a
/// batch's 64 chunks ended: on two vCPUs, 8% of a warm pass went to futex wakes and
/// rescheduling.
/// `lengths`: each text's length, in any unit (characters will do), to cut the chunks. The
/// first error of `view` is returned as is, after the chunks already published are done.
pub fn encode_batch_pipelined<'t, E: From<Error>>(
    encoder: &dyn TextEncoder,
    lengths: &[usize],
    eos_id: Option<u32>,
    mut view: impl FnMut(usize) -> std::result::Result<&'t str, E>,
    release: &impl Release,
) -> std::result::Result<EncodedBatch, E> {
    check_eos(encoder, eos_id)?;
    let crew = process_crew()?;
    let threads = crew.threads();
    if threads == 1 || lengths.iter().sum::<usize>() < INLINE_BYTES {
        let views = (0..lengths.len())
            .map(view)
            .collect::<std::result::Result<Vec<_>, E>>()?;
        return Ok(release.run(|| encode_inline(encoder, &views, eos_id))?);
    }
    let starts = chunk_starts(lengths.iter().copied(), threads);
    let chunk_end = |c: usize| starts.get(c + 1).copied().unwrap_or(lengths.len());
    let board = Board::new(starts.len());
    let slots: Vec<OnceLock<ChunkResult>> = starts.iter().map(|_| OnceLock::new()).collect();
    let next = AtomicUsize::new(0);
    let take = || loop {
        let c = next.fetch_add(1, Ordering::Relaxed);
        let Some(views) = board.views(c) else { break };
        // Each slot is set once, by the one thread that took its chunk.
        let _ = slots[c].set(encode_chunk(encoder, views, starts[c], eos_id));
    };
    let mut made = Ok(());
    crew.run(
        &take,
        || {
            {
                // Closed on the way out, even by a panic: a helper waiting for a chunk that
                // will never be published stops waiting.
                let _closed = board.close_on_drop();
                for (c, &start) in starts.iter().enumerate() {
                    match (start..chunk_end(c))
                        .map(&mut view)
                        .collect::<std::result::Result<Vec<_>, E>>()
                    {
                        Ok(views) => board.publish(c, views),
                        Err(error) => {
                            made = Err(error);
                            break;
                        }
                    }
                }
            }
            if made.is_ok() {
                release.run(take);
            }
        },
        release,
    );
    made?;
    let chunks = in_order(filled(slots)?)?;
    Ok(assemble(&crew, &chunks, lengths.len(), release))
}

/// The chunks' views of a pipelined batch, published one by one by the calling thread and
/// read by the threads that encode them.
struct Board<'t> {
    views: Vec<OnceLock<Vec<&'t str>>>,
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

    /// Chunk `c`'s views (chunks are published in order).
    fn publish(&self, c: usize, views: Vec<&'t str>) {
        let _ = self.views[c].set(views);
        if *self.lock() > 0 {
            self.more.notify_all();
        }
    }

    /// Closes the board when dropped: no chunk is published after.
    fn close_on_drop(&self) -> CloseOnDrop<'_, 't> {
        CloseOnDrop(self)
    }

    /// Chunk `c`'s views, once published; `None` when `c` is past the last chunk or the board
    /// was closed before publishing it.
    fn views(&self, c: usize) -> Option<&[&'t str]> {
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
        self.views[c].get().map(Vec::as_slice)
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
/// little enough for several per thread, so that uneven texts balance across threads.
const CHUNK_BYTES: std::ops::RangeInclusive<usize> = (16 << 10)..=(256 << 10);
/// Chunks a batch is cut into per thread: on a first pass a chunk of text never seen costs many
/// times one of known words, and with 8 a thread the last chunks left one thread waiting (1.66-1.76
/// cores used at two threads on the race's 4096-text calls; 32: 1.82-1.89, the warm pass alike).
const CHUNKS_PER_THREAD: usize = 32;

/// Where each chunk starts, given the texts' lengths: runs of consecutive texts of about the
/// same number of bytes (`CHUNKS_PER_THREAD` a thread, within `CHUNK_BYTES`), cut by bytes rather
/// than by count, so that a batch of a few long documents among many short ones still spreads
/// evenly.
fn chunk_starts(lengths: impl Iterator<Item = usize> + Clone, threads: usize) -> Vec<usize> {
    let weights = lengths.map(|length| length + TEXT_WEIGHT);
    let total: usize = weights.clone().sum();
    let target = (total / (threads.max(1) * CHUNKS_PER_THREAD))
        .clamp(*CHUNK_BYTES.start(), *CHUNK_BYTES.end());
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
    for (k, text) in chunk.iter().enumerate() {
        if let Some(next) = chunk.get(k + 1) {
            prefetch_start(next.as_ref().as_bytes());
        }
        encoder
            .encode_into(text.as_ref(), &mut ids)
            .map_err(|message| (first + k, message))?;
        ids.extend(eos_id);
        ends.push(ids.len());
    }
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

    fn lengths(texts: &[&str]) -> Vec<usize> {
        texts.iter().map(|text| text.len()).collect()
    }

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
            &lengths(views),
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
                &lengths(&views),
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
            &lengths(&views),
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
            &[1],
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
                &lengths(&views),
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
