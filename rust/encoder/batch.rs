//! Many texts encoded on the process's pool: cut into chunks of about equal bytes, each
//! encoded into one buffer by a pool thread, and put back together in order as one flat array
//! of ids with each text's offset (what `TextEncoder.encode_batch` returns to Python).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};

use rayon::prelude::*;

use super::{process_pool, TextEncoder};
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
    let pool = process_pool()?;
    let threads = pool.current_num_threads();
    let lengths = texts.iter().map(|text| text.as_ref().len());
    if threads == 1 || lengths.clone().sum::<usize>() < INLINE_BYTES {
        return encode_inline(encoder, texts, eos_id);
    }
    // Chunks of consecutive texts, each encoded into one buffer (no vector per text), taken in
    // turn by the calling thread and `threads - 1` of the pool's. The calling thread is awake;
    // a pool thread left asleep by the caller's other work takes a while to wake (Arrow
    // batches with other Python work between them kept 1.5 of 2 cores busy on a first pass).
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
    pool.in_place_scope(|scope| {
        for _ in 1..threads.min(starts.len()) {
            scope.spawn(|_| work());
        }
        work();
    });
    let chunks = in_order(filled(slots)?)?;
    Ok(pool.install(|| assemble(&chunks, texts.len())))
}

/// Where the caller of `encode_batch_pipelined` waits for the pool (a binding releases the
/// GIL there).
pub trait Release {
    fn run<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T;
}

/// `Release` that keeps what the caller holds: the wait happens as it is.
pub struct Keep;

impl Release for Keep {
    fn run<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        work()
    }
}

/// `encode_batch` for texts whose views only the calling thread can make, one at a time
/// (`view(i)`: a Python string's UTF-8, which needs the GIL, and the first time makes it).
/// Each chunk goes to the pool as soon as its views are made, so that making them overlaps
/// the encoding instead of coming before all of it (measured on Python strings in 26
/// languages: 1.65 cores used at 2 threads when made first, 1.8 when made already).
/// `lengths`: each text's length, in any unit (characters will do), to cut the chunks;
/// `release` runs the waits for the pool. The first error of `view` is returned as is, after
/// the chunks already handed over are done.
pub fn encode_batch_pipelined<'t, E: From<Error>>(
    encoder: &dyn TextEncoder,
    lengths: &[usize],
    eos_id: Option<u32>,
    mut view: impl FnMut(usize) -> std::result::Result<&'t str, E>,
    release: &impl Release,
) -> std::result::Result<EncodedBatch, E> {
    check_eos(encoder, eos_id)?;
    let pool = process_pool()?;
    let threads = pool.current_num_threads();
    if threads == 1 || lengths.iter().sum::<usize>() < INLINE_BYTES {
        let views = (0..lengths.len())
            .map(view)
            .collect::<std::result::Result<Vec<_>, E>>()?;
        return Ok(release.run(|| encode_inline(encoder, &views, eos_id))?);
    }
    let starts = chunk_starts(lengths.iter().copied(), threads);
    let slots: Vec<OnceLock<ChunkResult>> = starts.iter().map(|_| OnceLock::new()).collect();
    let finished = Finished::default();
    let mut made = Ok(());
    pool.in_place_scope(|scope| {
        let mut handed = 0;
        for (c, &start) in starts.iter().enumerate() {
            let end = starts.get(c + 1).copied().unwrap_or(lengths.len());
            let views = match (start..end)
                .map(&mut view)
                .collect::<std::result::Result<Vec<_>, E>>()
            {
                Ok(views) => views,
                Err(error) => {
                    made = Err(error);
                    break;
                }
            };
            let (slot, finished) = (&slots[c], &finished);
            scope.spawn(move |_| {
                let _count = finished.on_drop();
                // Each slot is set once, by its own chunk's job.
                let _ = slot.set(encode_chunk(encoder, &views, start, eos_id));
            });
            handed += 1;
        }
        release.run(|| finished.wait_for(handed));
    });
    made?;
    let chunks = in_order(filled(slots)?)?;
    Ok(release.run(|| pool.install(|| assemble(&chunks, lengths.len()))))
}

/// Every chunk's result, once all were encoded (a job that panicked has carried its panic to
/// its scope's end before this).
fn filled(slots: Vec<OnceLock<ChunkResult>>) -> Result<Vec<ChunkResult>> {
    slots
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .ok_or_else(|| Error::Config("a chunk of the batch was not encoded".into()))
        })
        .collect()
}

/// Jobs of a pipelined batch that have ended, and the wait for them.
#[derive(Default)]
struct Finished {
    count: Mutex<usize>,
    changed: Condvar,
}

impl Finished {
    /// Counts the job as ended when dropped, even when the job panics (rayon carries the panic
    /// to the scope's end; the wait must not hang before it).
    fn on_drop(&self) -> FinishOnDrop<'_> {
        FinishOnDrop(self)
    }

    fn wait_for(&self, jobs: usize) {
        let mut count = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        while *count < jobs {
            count = self
                .changed
                .wait(count)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

struct FinishOnDrop<'a>(&'a Finished);

impl Drop for FinishOnDrop<'_> {
    fn drop(&mut self) {
        *self.0.count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.0.changed.notify_all();
    }
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

/// The batch encoded by the calling thread: a hand-off to the pool wakes a sleeping thread
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
/// waking the pool than it saves.
const INLINE_BYTES: usize = 64 << 10;

/// The chunks' ids back to back and every text's offset, each chunk copied into its place by
/// the pool's threads: a serial copy of a batch's ids held 16 threads back (Amdahl).
fn assemble(chunks: &[EncodedChunk], texts: usize) -> EncodedBatch {
    let total: usize = chunks.iter().map(|chunk| chunk.ids.len()).sum();
    // Zeroed memory comes from the kernel already zero for a large batch (calloc).
    let mut ids = vec![0u32; total];
    let mut offsets = vec![0i64; texts + 1];
    let mut id_parts = Vec::with_capacity(chunks.len());
    let mut offset_parts = Vec::with_capacity(chunks.len());
    let (mut id_rest, mut offset_rest) = (ids.as_mut_slice(), &mut offsets[1..]);
    let mut base = 0;
    for chunk in chunks {
        let (id_part, id_tail) = std::mem::take(&mut id_rest).split_at_mut(chunk.ids.len());
        let (offset_part, offset_tail) =
            std::mem::take(&mut offset_rest).split_at_mut(chunk.ends.len());
        id_parts.push(id_part);
        offset_parts.push((offset_part, base));
        (id_rest, offset_rest) = (id_tail, offset_tail);
        base += chunk.ids.len();
    }
    id_parts
        .into_par_iter()
        .zip(offset_parts)
        .zip(chunks)
        .for_each(|((id_part, (offset_part, base)), chunk)| {
            id_part.copy_from_slice(&chunk.ids);
            for (slot, &end) in offset_part.iter_mut().zip(&chunk.ends) {
                *slot = (base + end) as i64;
            }
        });
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
        encoder
            .encode_into(text.as_ref(), &mut ids)
            .map_err(|message| (first + k, message))?;
        ids.extend(eos_id);
        ends.push(ids.len());
    }
    Ok(EncodedChunk { ids, ends })
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

    fn texts(count: usize) -> Vec<String> {
        // Enough bytes to go to the pool in many chunks, of uneven lengths.
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
        let failed = encode_batch_pipelined(
            &Bytes,
            &lengths(&views),
            None,
            |i| -> Result<&str> { Ok(views[i]) },
            &Keep,
        );
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
}
