//! The seam between the layout and the text encoder.
//!
//! Everything above this module sees only `TextEncoder`. `Encoder` picks the fast byte-level BPE
//! (`fast_bpe`) when it serves the tokenizer exactly, and the HF `tokenizers` encoder
//! otherwise; `DATA_IO_ENCODER=hf` forces the latter (benchmarks, differential tests).
//!
//! - `mod.rs`: the face: `TextEncoder`, `Encoder` (the engine choice, loaded once per process),
//!   and the process's encoder pool.
//! - `hf.rs`: `HfEncoder`, the HF `tokenizers` encoder, and the reading of a tokenizer file.
//! - `fast_bpe/`: the fast, exact byte-level BPE encoder (its own `mod.rs` lists its files).
//! - `batch.rs`: many texts at once on the calling thread and the crew (`encode_batch`), and
//!   chunk by chunk as their views are made (`encode_batch_pipelined`).
//! - `crew.rs`: the threads that help a batch's calling thread, awake a moment between batches.
//! - `per_process.rs`: the pool and the crew, one per process (a forked child makes its own).
//! - `exactness.rs` (tests only): the fast encoder against the HF one, differentially.

mod batch;
mod crew;
#[cfg(test)]
mod exactness;
pub mod fast_bpe;
mod hf;
mod per_process;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rayon::{ThreadPool, ThreadPoolBuilder};

pub use self::batch::{encode_batch, encode_batch_pipelined, EncodedBatch, Keep, Release};
use self::crew::requested_threads;
use self::fast_bpe::load_cache::LoadCache;
use self::fast_bpe::spec::TokenIds;
use self::fast_bpe::{node_tables, spec, FastBpe, Tables};
pub use self::hf::HfEncoder;
use self::hf::{read_tokenizer, read_tokenizer_bytes, tokenizer_text};
use self::per_process::{per_process, Slot};
use crate::error::{Error, Result};

pub trait TextEncoder: Sync {
    /// Token ids of `text`, with no special tokens added and special-token strings inside the
    /// text encoded as plain text.
    fn encode(&self, text: &str) -> Result<Vec<u32>, String>;
    /// `encode`, appending the ids to `out` (the fast encoder writes them there directly).
    fn encode_into(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        out.extend_from_slice(&self.encode(text)?);
        Ok(())
    }
    /// Each of `texts` encoded onto `out` in turn, then `eos_id` when given, and `out`'s
    /// length after each text pushed to `ends`; the error is the number of the first text that
    /// fails (counted from 0) and why.
    fn encode_texts_into(
        &self,
        texts: &mut dyn Iterator<Item = &str>,
        eos_id: Option<u32>,
        out: &mut Vec<u32>,
        ends: &mut Vec<usize>,
    ) -> Result<(), (usize, String)> {
        self.encode_texts_with(texts, out, &mut |out| {
            out.extend(eos_id);
            ends.push(out.len());
        })
    }
    /// Each of `texts` encoded onto `out` in turn, `close(out)` called after each text's ids
    /// (its EOS, the layout's tokens after it, where it ends); the error is the number of the
    /// first text that fails (counted from 0) and why, the texts before it closed (the failed
    /// text is not closed, and may have left some ids in `out`). `texts` and
    /// `close` must not encode on this thread themselves (the fast encoder runs them inside its
    /// thread state).
    fn encode_texts_with(
        &self,
        texts: &mut dyn Iterator<Item = &str>,
        out: &mut Vec<u32>,
        close: &mut dyn FnMut(&mut Vec<u32>),
    ) -> Result<(), (usize, String)> {
        encode_one_by_one(self, texts, out, close)
    }
    /// The id of a (special) token given by its string, if the vocabulary has it.
    fn token_id(&self, token: &str) -> Option<u32>;
    /// Vocabulary size including added tokens; every id is below it.
    fn vocab_size(&self) -> usize;
}

/// `TextEncoder::encode_texts_with` as `encode_into` of each text in turn.
fn encode_one_by_one<E: TextEncoder + ?Sized>(
    encoder: &E,
    texts: &mut dyn Iterator<Item = &str>,
    out: &mut Vec<u32>,
    close: &mut dyn FnMut(&mut Vec<u32>),
) -> Result<(), (usize, String)> {
    for (k, text) in texts.enumerate() {
        encoder
            .encode_into(text, out)
            .map_err(|message| (k, message))?;
        close(out);
    }
    Ok(())
}

/// The environment variable that chooses the engine: unset or `auto` (fast when served),
/// `hf` (always `tokenizers`), `fast` (fail when the fast encoder does not serve the tokenizer),
/// `null` (no encoding at all, for measuring the pipeline's floor; see `Engine::Null`).
pub const ENGINE_VARIABLE: &str = "DATA_IO_ENCODER";
/// The environment variable that says where the fast encoder keeps its piece tables when the
/// caller does not: `process` (the default) or `node` (one copy shared by the node's processes,
/// see `fast_bpe::node_tables`).
pub const TABLES_VARIABLE: &str = "DATA_IO_ENCODER_TABLES";

/// Which engine `Encoder` runs, as named in summaries.
pub const FAST_ENGINE: &str = "fast-bpe";
pub const HF_ENGINE: &str = "hf-tokenizers";
pub const NULL_ENGINE: &str = "null";

/// The encoder the pipeline uses: the fast byte-level BPE when it serves the tokenizer exactly,
/// the HF encoder otherwise. Both give the same ids; `engine` and `fallback_reason` say which
/// one runs and why.
pub struct Encoder {
    engine: Engine,
    fallback_reason: Option<String>,
}

enum Engine {
    /// The fast encoder, and the vocabulary read from the file for id lookups: no HF tokenizer
    /// is built (that took about half of loading Qwen's file).
    Fast(Box<FastBpe>, Box<TokenIds>),
    Hf(Box<HfEncoder>),
    /// No encoding: one id per four bytes of text (about what BPE gives on prose), the id being
    /// the top two bits of the chunk's first byte (a byte-class, always in the vocabulary). The
    /// rest of the pipeline runs as usual, so a run with it is the floor of reading, parsing and
    /// writing (issue 12). Special tokens resolve from the file as for the fast encoder.
    Null(Box<TokenIds>),
}

impl Encoder {
    /// Load `path`, choosing the engine from the file and `DATA_IO_ENCODER`.
    pub fn from_file(path: &Path) -> Result<Self> {
        Self::from_file_with(path, &engine_choice())
    }

    /// Load `path` with the engine `choice` ("", "auto", "hf", "fast" or "null").
    pub fn from_file_with(path: &Path, choice: &str) -> Result<Self> {
        Self::from_json(&read_tokenizer(path)?, path, choice, &Tables::Process)
    }

    /// The encoder for `path`, loaded once per process while the file's content and
    /// `DATA_IO_ENCODER` stay the same: a second run in the same process (a notebook, the
    /// benchmark's warm pass, prepare after tokenize) skips the load and finds each thread's
    /// piece cache warm. The last encoder loaded is kept until another file is asked for.
    /// Its piece tables are where `DATA_IO_ENCODER_TABLES` says (`shared_with` takes a place).
    pub fn shared(path: &Path) -> Result<Arc<Self>> {
        Ok(Self::shared_hashed(path)?.0)
    }

    /// `shared`, with the BLAKE3 of the file's bytes (hex): the file is read once for both.
    pub fn shared_hashed(path: &Path) -> Result<(Arc<Self>, String)> {
        Self::shared_with(path, &tables_choice())
    }

    /// `shared_hashed` with the piece tables in `tables`: "process" or "node" ("" reads
    /// `DATA_IO_ENCODER_TABLES`).
    pub fn shared_with(path: &Path, tables: &str) -> Result<(Arc<Self>, String)> {
        type Slot = Option<((PathBuf, String, String, blake3::Hash), Arc<Encoder>)>;
        static LAST: Mutex<Slot> = Mutex::new(None);
        // The bytes are hashed and compared with the loaded encoder's before anything else: a
        // run in a process that already holds this encoder (the benchmark's warm passes, a
        // notebook) neither parses nor validates the file again.
        let bytes = read_tokenizer_bytes(path)?;
        let choice = engine_choice();
        let tables = match tables {
            "" => tables_choice(),
            given => given.to_string(),
        };
        let hash = blake3::hash(&bytes);
        let place = match tables.as_str() {
            "" | "process" => Tables::Process,
            "node" => Tables::Node {
                dir: node_tables::folder(),
                key: hash,
            },
            other => {
                return Err(Error::Config(format!(
                    "piece tables {other:?} (from the tables argument or {TABLES_VARIABLE}) is \
                     not a place; use \"process\" (each process its own, the fastest) or \"node\" \
                     (one copy for all processes on the node)"
                )))
            }
        };
        let key = (
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
            choice.clone(),
            // The node's folder too: another folder is another set of tables.
            format!("{place:?}"),
            hash,
        );
        let hex = hash.to_hex().to_string();
        let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((held, encoder)) = last.as_ref() {
            if *held == key {
                return Ok((Arc::clone(encoder), hex));
            }
        }
        *last = None; // the old tables go before the new ones are built
        let json = tokenizer_text(bytes, path)?;
        let encoder = Arc::new(Self::from_json_cached(
            &json,
            path,
            &choice,
            &place,
            None,
            Some(&hash),
        )?);
        *last = Some((key, Arc::clone(&encoder)));
        Ok((encoder, hex))
    }

    fn from_json(json: &str, path: &Path, choice: &str, tables: &Tables) -> Result<Self> {
        Self::from_json_cached(json, path, choice, tables, None, None)
    }

    /// `from_json`, with the load cache in `cache_dir` (None: where the environment says),
    /// under `file_hash`, the BLAKE3 of the file's bytes when the caller made it already (None:
    /// the text's, made here when the fast encoder is built).
    fn from_json_cached(
        json: &str,
        path: &Path,
        choice: &str,
        tables: &Tables,
        cache_dir: Option<&Path>,
        file_hash: Option<&blake3::Hash>,
    ) -> Result<Self> {
        if choice == "null" {
            let spec = spec::recognise(json).map_err(|reason| {
                Error::Tokenizer(format!(
                    "{ENGINE_VARIABLE}=null needs a tokenizer the fast encoder serves (its special \
                     tokens are read the same way), and {} is not: {reason}",
                    path.display()
                ))
            })?;
            return Ok(Encoder {
                engine: Engine::Null(Box::new(spec.token_ids())),
                fallback_reason: Some(format!("{ENGINE_VARIABLE}=null: no encoding")),
            });
        }
        let fast = match choice {
            "" | "auto" | "fast" => Self::fast_for(json, tables, cache_dir, file_hash),
            "hf" => Err(format!("{ENGINE_VARIABLE}=hf")),
            other => {
                return Err(Error::Config(format!(
                    "{ENGINE_VARIABLE}={other:?} is not an encoder; use \"auto\" (the default), \
                     \"hf\", \"fast\" or \"null\" (no encoding: the pipeline's floor)"
                )))
            }
        };
        match fast {
            Ok((fast, spec)) => Ok(Encoder {
                engine: Engine::Fast(Box::new(fast), Box::new(spec)),
                fallback_reason: None,
            }),
            Err(reason) if choice == "fast" => Err(Error::Tokenizer(format!(
                "{ENGINE_VARIABLE}=fast, but the fast encoder does not serve {}: {reason}; \
                 unset {ENGINE_VARIABLE} to use the HF encoder for it",
                path.display()
            ))),
            Err(reason) => Ok(Encoder {
                engine: Engine::Hf(Box::new(HfEncoder::from_json(json, path)?)),
                // Why, in the tokenizer's terms ("normalizer NFKC"); the summary says the rest.
                fallback_reason: Some(reason),
            }),
        }
    }

    /// The fast encoder for the tokenizer file `json`, or why it would not be exact.
    fn fast_for(
        json: &str,
        tables: &Tables,
        cache_dir: Option<&Path>,
        file_hash: Option<&blake3::Hash>,
    ) -> Result<(FastBpe, TokenIds), String> {
        let spec = spec::recognise(json)?;
        let file = file_hash
            .copied()
            .unwrap_or_else(|| blake3::hash(json.as_bytes()));
        let cache = match cache_dir {
            Some(dir) => Some(LoadCache::in_dir(dir, &file)),
            None => LoadCache::from_env(&file),
        };
        // Building the tables runs on this process's pool, never rayon's global one: a forked
        // child inherits the global pool without its threads and would wait forever.
        let pool = process_pool().map_err(|e| e.to_string())?;
        // The index kept for `token_id` (the tokens copied back to back) is made beside the
        // tables, whose build leaves a core idle at times.
        let (fast, ids) = pool.install(|| {
            rayon::join(
                || {
                    FastBpe::new(
                        &spec,
                        &spec.vocab,
                        |token| spec.token_id(token),
                        tables,
                        cache.as_ref(),
                    )
                },
                || spec.token_ids(),
            )
        });
        // The spec (the merges, the vocabulary's entries and index) goes once the tables are
        // built.
        Ok((fast?, ids))
    }

    /// `FAST_ENGINE`, `HF_ENGINE` or `NULL_ENGINE`.
    pub fn engine(&self) -> &'static str {
        match self.engine {
            Engine::Fast(..) => FAST_ENGINE,
            Engine::Hf(_) => HF_ENGINE,
            Engine::Null(_) => NULL_ENGINE,
        }
    }

    /// Where the fast encoder's piece tables are ("process", "node (/dev/shm/...)", or
    /// "process (node tables unavailable: why)"); `None` for the other engines.
    pub fn tables(&self) -> Option<&str> {
        match &self.engine {
            Engine::Fast(fast, _) => Some(fast.tables()),
            _ => None,
        }
    }

    /// What the fast encoder's load cache did ("read PATH", "written PATH", "not kept (...)",
    /// "off"); `None` for the other engines.
    pub fn load_cache(&self) -> Option<&str> {
        match &self.engine {
            Engine::Fast(fast, _) => Some(fast.load_cache()),
            _ => None,
        }
    }

    /// Why the HF encoder runs (e.g. "normalizer NFKC"); `None` when the fast one does.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback_reason.as_deref()
    }
}

/// `DATA_IO_ENCODER`, empty when unset.
fn engine_choice() -> String {
    std::env::var(ENGINE_VARIABLE).unwrap_or_default()
}

/// `DATA_IO_ENCODER_TABLES`, empty when unset.
fn tables_choice() -> String {
    std::env::var(TABLES_VARIABLE).unwrap_or_default()
}

impl TextEncoder for Encoder {
    fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        let mut ids = Vec::with_capacity(text.len() / 3 + 1);
        self.encode_into(text, &mut ids)?;
        Ok(ids)
    }

    fn encode_into(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        match &self.engine {
            Engine::Fast(fast, _) => {
                fast.encode_into(text, out);
                Ok(())
            }
            Engine::Hf(hf) => hf.encode_into(text, out),
            Engine::Null(_) => {
                out.extend(
                    text.as_bytes()
                        .chunks(4)
                        .map(|chunk| u32::from(chunk[0] >> 6)),
                );
                Ok(())
            }
        }
    }

    fn encode_texts_with(
        &self,
        texts: &mut dyn Iterator<Item = &str>,
        out: &mut Vec<u32>,
        close: &mut dyn FnMut(&mut Vec<u32>),
    ) -> Result<(), (usize, String)> {
        let Engine::Fast(fast, _) = &self.engine else {
            return encode_one_by_one(self, texts, out, close);
        };
        // One text's lookups overlap the next one's split (`FastBpe::encode_texts`).
        fast.encode_texts(texts, out, close);
        Ok(())
    }

    fn token_id(&self, token: &str) -> Option<u32> {
        match &self.engine {
            Engine::Fast(_, spec) | Engine::Null(spec) => spec.token_id(token),
            Engine::Hf(hf) => hf.token_id(token),
        }
    }

    fn vocab_size(&self) -> usize {
        match &self.engine {
            Engine::Fast(_, spec) | Engine::Null(spec) => spec.vocab_size(),
            Engine::Hf(hf) => hf.vocab_size(),
        }
    }
}

/// The texts of an Arrow-style string layout: text `i` is `data[offsets[i]..offsets[i + 1]]`.
/// The bytes are checked once for UTF-8 and each text's bounds for order and character
/// boundaries, so every view is a valid `str` of `data` (nothing copied).
/// Texts given as bytes (Python `bytes` objects, read in place), each checked as UTF-8; the
/// first that is not is an error naming it and the byte where its UTF-8 breaks.
pub fn utf8_texts<'a>(texts: &[&'a [u8]]) -> Result<Vec<&'a str>> {
    texts
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            simdutf8::basic::from_utf8(bytes).map_err(|_| {
                let at = std::str::from_utf8(bytes).map_or_else(|e| e.valid_up_to(), |_| 0);
                Error::Input(format!(
                    "text {i} of the batch is not UTF-8 (byte {at} of its {}); decode it with \
                     the right encoding first, or replace the bad bytes \
                     (bytes.decode('utf-8', 'replace'))",
                    bytes.len()
                ))
            })
        })
        .collect()
}

/// Texts at `data[starts[i]..ends[i]]` (documents cut out of one buffer, the separators left
/// between them): `data` is checked as UTF-8 once, each span at its bounds.
pub fn utf8_spans<'a>(data: &'a [u8], starts: &[i64], ends: &[i64]) -> Result<Vec<&'a str>> {
    let bad = |message: String| Error::Input(format!("buffer of documents: {message}"));
    if starts.len() != ends.len() {
        return Err(bad(format!(
            "{} starts but {} ends",
            starts.len(),
            ends.len()
        )));
    }
    let text = simdutf8::basic::from_utf8(data).map_err(|_| {
        let at = std::str::from_utf8(data).map_or_else(|e| e.valid_up_to(), |_| 0);
        let document = starts.partition_point(|&start| start as usize <= at);
        bad(format!(
            "invalid UTF-8 at byte {at} (document {}); decode it with the right encoding \
             first, or replace the bad bytes",
            document.saturating_sub(1)
        ))
    })?;
    starts
        .iter()
        .zip(ends)
        .enumerate()
        .map(|(i, (&start, &end))| {
            usize::try_from(start)
                .ok()
                .zip(usize::try_from(end).ok())
                .and_then(|(start, end)| text.get(start..end))
                .ok_or_else(|| {
                    bad(format!(
                        "document {i} spans bytes {start}..{end}, not a run of whole \
                         characters inside the {} bytes",
                        data.len()
                    ))
                })
        })
        .collect()
}

pub fn utf8_views<'a>(data: &'a [u8], offsets: &[i64]) -> Result<Vec<&'a str>> {
    let bad = |message: String| Error::Input(format!("string buffer: {message}"));
    let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) else {
        return Err(bad(
            "no offsets (a string array has one more offset than texts)".into(),
        ));
    };
    if first < 0 || last < first || last as u64 > data.len() as u64 {
        return Err(bad(format!(
            "offsets run from {first} to {last}, outside the {} bytes of data",
            data.len()
        )));
    }
    let used = &data[first as usize..last as usize];
    let text = simdutf8::basic::from_utf8(used).map_err(|_| {
        let at = first + std::str::from_utf8(used).map_or_else(|e| e.valid_up_to(), |_| 0) as i64;
        // The text holding the bad byte: the last one starting at or before it.
        let i = offsets
            .partition_point(|&start| start <= at)
            .saturating_sub(1);
        bad(format!(
            "invalid UTF-8 at byte {at} (text {i}, its byte {}); decode it with the right \
             encoding first, or replace the bad bytes",
            at - offsets[i]
        ))
    })?;
    let mut views = Vec::with_capacity(offsets.len() - 1);
    for (i, pair) in offsets.windows(2).enumerate() {
        let (start, end) = ((pair[0] - first) as usize, (pair[1] - first) as usize);
        if pair[1] < pair[0] || pair[1] > last {
            return Err(bad(format!(
                "offsets of text {i} go backwards ({} then {})",
                pair[0], pair[1]
            )));
        }
        let view = text.get(start..end).ok_or_else(|| {
            bad(format!(
                "text {i} starts or ends inside a character (bytes {}..{})",
                pair[0], pair[1]
            ))
        })?;
        views.push(view);
    }
    Ok(views)
}

/// This process's rayon pool (tokenize's files, prepare's reading and cleaning, the tables'
/// prefill), started on first use.
///
/// Not rayon's global pool: a DataLoader forks its workers, and a forked child inherits the
/// parent's pool without its threads, so work handed to it would wait forever. The pool is
/// therefore kept per process (`per_process`), and a child starts its own.
pub fn process_pool() -> Result<Arc<ThreadPool>> {
    // RAYON_NUM_THREADS is read at every call, so that `prepare(threads=N)` applies within one
    // Python process.
    process_pool_with(requested_threads())
}

/// This process's pool with `wanted` threads (0: every core), started on first use and kept:
/// `tokenize` runs on it too, so that a second run in the same process finds each thread's
/// piece cache warm (the caches are thread-local; a new pool would start them cold).
pub fn process_pool_with(wanted: usize) -> Result<Arc<ThreadPool>> {
    static POOL: Slot<ThreadPool> = Mutex::new(None);
    per_process(&POOL, wanted, || {
        ThreadPoolBuilder::new()
            .num_threads(wanted)
            .thread_name(|i| format!("data_io-encode-{i}"))
            .build()
            .map_err(|e| Error::Config(format!("cannot start the encoder's threads: {e}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One id per byte; fails on texts containing "!" (to test error order and reporting).
    struct Bytes;

    impl TextEncoder for Bytes {
        fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
            if text.contains('!') {
                return Err(format!("refused {text:?}"));
            }
            Ok(text.bytes().map(u32::from).collect())
        }
        fn token_id(&self, _token: &str) -> Option<u32> {
            None
        }
        fn vocab_size(&self) -> usize {
            300
        }
    }

    #[test]
    fn batch_concatenates_in_order_with_eos_after_each_text() {
        let batch = encode_batch(&Bytes, &["ab", "", "c"], Some(299)).expect("encodes");
        assert_eq!(batch.ids, vec![97, 98, 299, 299, 99, 299]);
        assert_eq!(batch.offsets, vec![0, 3, 4, 6]);
        let plain = encode_batch(&Bytes, &["ab", "", "c"], None).expect("encodes");
        assert_eq!(plain.ids, vec![97, 98, 99]);
        assert_eq!(plain.offsets, vec![0, 2, 2, 3]);
    }

    #[test]
    fn pool_follows_the_requested_thread_count() {
        // One test touches the variable, so no other test of this binary sees it change.
        std::env::set_var("RAYON_NUM_THREADS", "1");
        let one = process_pool().expect("pool");
        assert_eq!(one.current_num_threads(), 1);
        assert!(Arc::ptr_eq(&one, &process_pool().expect("pool")), "reused");
        std::env::set_var("RAYON_NUM_THREADS", "2");
        assert_eq!(process_pool().expect("pool").current_num_threads(), 2);
        std::env::remove_var("RAYON_NUM_THREADS");
        let all = process_pool().expect("pool").current_num_threads();
        assert_eq!(
            all,
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
    }

    #[test]
    fn empty_batch_has_one_offset() {
        let batch = encode_batch::<&str>(&Bytes, &[], Some(0)).expect("encodes");
        assert!(batch.ids.is_empty());
        assert_eq!(batch.offsets, vec![0]);
    }

    #[test]
    fn many_texts_keep_their_order_across_threads() {
        let texts: Vec<String> = (0..5000).map(|i| "x".repeat(i % 7)).collect();
        let batch = encode_batch(&Bytes, &texts, Some(1)).expect("encodes");
        for (i, text) in texts.iter().enumerate() {
            let (start, end) = (batch.offsets[i] as usize, batch.offsets[i + 1] as usize);
            assert_eq!(end - start, text.len() + 1, "text {i}");
            assert_eq!(batch.ids[end - 1], 1);
        }
    }

    #[test]
    fn first_failing_text_is_reported() {
        let texts: Vec<String> = (0..100)
            .map(|i| {
                if i == 40 || i == 90 {
                    "no!".into()
                } else {
                    "ok".into()
                }
            })
            .collect();
        let err = encode_batch(&Bytes, &texts, None).expect_err("text 40 fails");
        assert_eq!(err.kind(), crate::ErrorKind::Input);
        assert!(err.to_string().starts_with("text 40 of the batch"), "{err}");
    }

    #[test]
    fn the_null_engine_emits_one_id_per_four_bytes_and_resolves_specials() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("trained_tokenizers/bpe/tokenizer.json");
        let null = Encoder::from_file_with(&path, "null").expect("null engine");
        let fast = Encoder::from_file_with(&path, "fast").expect("fast engine");
        assert_eq!(null.engine(), NULL_ENGINE);
        assert!(null.fallback_reason().is_some_and(|r| r.contains("null")));
        assert_eq!(null.encode("abcdé").expect("encodes"), vec![1, 3]);
        assert_eq!(null.encode("").expect("encodes"), Vec::<u32>::new());
        assert_eq!(null.token_id("<|im_start|>"), fast.token_id("<|im_start|>"));
        assert_eq!(null.vocab_size(), fast.vocab_size());
        let bad = Encoder::from_file_with(&path, "nul")
            .err()
            .expect("unknown engine");
        assert!(bad.to_string().contains("\"null\""), "{bad}");
    }

    #[test]
    fn a_tokenizer_file_cut_short_is_an_error_not_a_panic() {
        // fuzz/regressions/tokenizer_json: `tokenizers` panicked on JSON cut short inside
        // "decoder"; the fast path declines such a file (unreadable) and falls back to it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokenizer.json");
        for text in [r#"{"decoder":"#, r#"{"decoder": {"type": "ByteLevel", "#] {
            std::fs::write(&path, text).unwrap();
            for choice in ["auto", "hf"] {
                let err = Encoder::from_file_with(&path, choice)
                    .err()
                    .unwrap_or_else(|| panic!("{text:?} loads"));
                assert!(err.to_string().contains("cannot load tokenizer"), "{err}");
            }
        }
    }

    /// The shipped tokenizer's text and its parse.
    fn shipped_tokenizer() -> (String, serde_json::Value) {
        let shipped = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("trained_tokenizers/bpe/tokenizer.json"),
        )
        .expect("shipped tokenizer");
        let file = serde_json::from_str(&shipped).expect("json");
        (shipped, file)
    }

    #[test]
    fn an_unknown_model_type_is_named_not_left_to_serde() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokenizer.json");
        let (_, mut file) = shipped_tokenizer();
        file["model"]["type"] = serde_json::json!("Foo");
        std::fs::write(&path, file.to_string()).expect("written");
        for choice in ["auto", "hf"] {
            let err = Encoder::from_file_with(&path, choice)
                .err()
                .expect("refused");
            let message = err.to_string();
            assert!(
                message.contains(r#"its model.type "Foo" is not one of BPE, Unigram"#),
                "{message}"
            );
            assert!(!message.contains("untagged enum"), "{message}");
        }
    }

    #[test]
    fn vocab_size_bounds_every_id_where_the_ids_leave_gaps() {
        // The shipped tokenizer with every id from 100 on moved up by 1000: 1000 fewer
        // strings than the id space, which the dtype choice and the id checks must cover.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokenizer.json");
        let (shipped, mut file) = shipped_tokenizer();
        let moved = |id: u64| if id < 100 { id } else { id + 1000 };
        let vocab = file["model"]["vocab"].as_object_mut().expect("vocab");
        let count = vocab.len();
        for id in vocab.values_mut() {
            *id = serde_json::json!(moved(id.as_u64().expect("id")));
        }
        let mut largest = (vocab.values())
            .filter_map(|id| id.as_u64())
            .max()
            .expect("ids");
        for added in file["added_tokens"].as_array_mut().expect("added") {
            let id = moved(added["id"].as_u64().expect("id"));
            added["id"] = serde_json::json!(id);
            largest = largest.max(id);
        }
        std::fs::write(&path, file.to_string()).expect("written");
        for choice in ["auto", "hf"] {
            let encoder = Encoder::from_file_with(&path, choice).expect("loads");
            assert!(encoder.vocab_size() > count, "{choice}");
            assert_eq!(encoder.vocab_size() as u64, largest + 1, "{choice}");
        }
        // Without gaps it stays the count of strings (tokenizers' get_vocab_size).
        std::fs::write(&path, &shipped).expect("written");
        let fast = Encoder::from_file_with(&path, "auto").expect("loads");
        let hf = Encoder::from_file_with(&path, "hf").expect("loads");
        assert_eq!(fast.vocab_size(), hf.vocab_size());
    }

    #[test]
    fn eos_outside_the_vocabulary_is_a_config_error() {
        let err = encode_batch(&Bytes, &["a"], Some(300)).expect_err("300 >= vocab");
        assert_eq!(err.kind(), crate::ErrorKind::Config);
        assert!(err.to_string().contains("eos_id 300"), "{err}");
    }
}
