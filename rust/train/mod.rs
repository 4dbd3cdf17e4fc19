//! `data_io train-tokenizer`: a byte-level BPE (or unigram) tokenizer trained on cleaned rows
//! (formats.md §2).
//!
//! Texts stream from the same readers as tokenization. Per file, at most
//! `limit_mul_factor × max_per_file` texts are used (max_per_file from the first matching
//! prefix of prefix_config.yaml), chosen by a shuffle seeded from (seed, file name), so the
//! choice of one file does not depend on the others.
//!
//! - `mod.rs`: the command: options, the choice of texts, training through `tokenizers`.
//! - `hf.rs`: the `tokenizers` side: the tokenizer pipeline, its trainers, the files written.
//! - `words.rs`: the counting pass of our own trainer: distinct pre-tokens with their counts
//!   (`piece_table.rs`: the per-thread table of byte strings it counts into).
//! - `merge.rs`: its merge pass, the merges of `tokenizers`' `BpeTrainer` over those words
//!   (`word_arena.rs`: the words as symbols, merged in place; `merge_queue.rs`: the queue).
//! - `differential.rs` (tests): both trainers on the same texts give the same file.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::progress::ByteProgress;
use crate::reader::{task_files, Batch, OnError, RowReader, DEFAULT_BATCH_ROWS};

pub mod hf;
pub mod merge;
mod merge_queue;
mod piece_table;
mod word_arena;
pub mod words;

#[cfg(test)]
mod differential;

pub use hf::tokenizer_config;
use hf::{bpe_tokenizer, new_tokenizer, new_trainer, save};
use merge::{train_bpe, BpeOptions};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::Tokenizer;
use words::WordCounter;

use crate::encoder::fast_bpe::pretokenize::Pattern;

// Defined below the trainer and the encoder (whose tests check them), re-exported here where
// the crate has always named them.
pub use crate::tokenizer_format::{DEFAULT_SPECIAL_TOKENS, SPLIT_REGEX};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerKind {
    Bpe,
    Unigram,
}

#[derive(Debug, Clone)]
pub struct TrainOptions {
    pub inputs: Vec<PathBuf>,
    /// The tokenizer JSON to write; `config.json` goes beside it.
    pub output: PathBuf,
    pub kind: TokenizerKind,
    pub vocab_size: usize,
    pub seed: u64,
    /// Ordered (prefix, max_per_file) rules; the first prefix that starts a task name applies.
    pub prefix_limits: Vec<(String, Option<u64>)>,
    /// Each text is cut to its first `truncate_len` characters.
    pub truncate_len: usize,
    pub limit_mul_factor: u64,
    pub special_tokens: Vec<String>,
    pub min_frequency: u64,
    pub on_error: OnError,
    pub threads: Option<usize>,
    pub progress: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct TrainFileReport {
    pub task: String,
    pub rows: u64,
    pub texts_available: u64,
    pub texts_used: u64,
    pub bad_rows: u64,
    /// Whether `limit_mul_factor × max_per_file` cut this file's texts (bad rows do not).
    pub limited: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct TrainReport {
    pub output: String,
    pub vocab_size: usize,
    pub texts_used: u64,
    pub seconds: f64,
    pub files: Vec<TrainFileReport>,
    /// Files under the inputs that are not rows (by name), not read.
    pub skipped_files: Vec<String>,
}

/// Which BPE trainer learns the merges; both give the same `tokenizer.json` (`differential.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trainer {
    /// This crate's counting and merge passes (`words.rs`, `merge.rs`): BPE only.
    Ours,
    /// `tokenizers`' own trainers: the oracle, and the one that trains unigram.
    Hf,
}

/// Train with `tokenizers`' trainers (what `train_with(options, Trainer::Hf)` does).
pub fn train(options: &TrainOptions) -> Result<TrainReport> {
    train_with(options, Trainer::Hf)
}

pub fn train_with(options: &TrainOptions, trainer: Trainer) -> Result<TrainReport> {
    if trainer == Trainer::Ours && options.kind != TokenizerKind::Bpe {
        return Err(Error::Config(
            "the Rust trainer trains BPE; train a unigram tokenizer with --trainer hf".into(),
        ));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(options.threads.unwrap_or(0))
        .build()
        .map_err(|e| Error::Config(format!("cannot start {:?} threads: {e}", options.threads)))?;
    pool.install(|| run(options, trainer))
}

fn run(options: &TrainOptions, trainer_choice: Trainer) -> Result<TrainReport> {
    let started = Instant::now();
    validate(options)?;
    let inputs = task_files(&options.inputs)?;
    // Choose each file's texts first (a counting pass), so training reads only what it uses.
    let mut plans = Vec::with_capacity(inputs.tasks.len());
    for (task, path) in inputs.tasks {
        let rows = count_rows(&path)?;
        let texts_available = 2 * rows;
        let chosen = match limit_for(options, &task) {
            Some(limit) if limit < texts_available => {
                Some(choose_texts(options.seed, &task, texts_available, limit))
            }
            _ => None,
        };
        plans.push(FilePlan {
            task,
            path,
            rows,
            chosen,
        });
    }

    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let reports: Mutex<Vec<TrainFileReport>> = Mutex::new(Vec::new());
    let texts = plans
        .iter()
        .flat_map(|plan| FileTexts::new(plan, options, &failure, &reports))
        .flatten();
    let tokenizer = match trainer_choice {
        Trainer::Hf => {
            let mut tokenizer = new_tokenizer(options.kind)?;
            let mut trainer = new_trainer(options)?;
            tokenizer
                .train(&mut trainer, texts)
                .map_err(|e| Error::Tokenizer(format!("training failed: {e}")))?;
            tokenizer
        }
        Trainer::Ours => train_ours(options, texts)?,
    };
    if let Some(error) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(error);
    }
    let files = reports.into_inner().unwrap_or_else(|p| p.into_inner());
    let texts_used = files.iter().map(|f| f.texts_used).sum();
    if texts_used == 0 {
        // A tokenizer of the special tokens and the byte alphabet alone would load fine and
        // silently tokenize everything byte by byte.
        return Err(nothing_to_train_on(&files));
    }
    save(&tokenizer, &options.output, &options.special_tokens)?;
    Ok(TrainReport {
        output: options.output.display().to_string(),
        vocab_size: tokenizer.get_vocab_size(true),
        texts_used,
        seconds: started.elapsed().as_secs_f64(),
        files,
        skipped_files: inputs
            .skipped
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
    })
}

/// Texts counted per call of the counter: it splits them across the pool's threads.
const TEXTS_PER_COUNT: usize = 8192;

/// Our trainer: count the distinct words of `texts` (read a batch at a time, counted on every
/// thread), then merge them; the tokenizer around the model is the one `tokenizers` would build.
fn train_ours(options: &TrainOptions, texts: impl Iterator<Item = String>) -> Result<Tokenizer> {
    let counter = WordCounter::new(Pattern::Qwen, true);
    let mut batch = Vec::with_capacity(TEXTS_PER_COUNT);
    for text in texts {
        batch.push(text);
        if batch.len() == TEXTS_PER_COUNT {
            counter.add_texts(&batch);
            batch.clear();
        }
    }
    counter.add_texts(&batch);
    let bpe = train_bpe(
        counter.finish(),
        &BpeOptions {
            vocab_size: options.vocab_size,
            min_frequency: options.min_frequency,
            special_tokens: options.special_tokens.clone(),
            initial_alphabet: ByteLevel::alphabet().into_iter().collect(),
        },
    )?;
    bpe_tokenizer(&bpe, &options.special_tokens)
}

fn nothing_to_train_on(files: &[TrainFileReport]) -> Error {
    let rows: u64 = files.iter().map(|f| f.rows).sum();
    let bad: u64 = files.iter().map(|f| f.bad_rows).sum();
    let why = if bad > 0 {
        format!("all {bad} row(s) were bad and skipped (--on-error skip); run with --on-error fail to see the first error")
    } else {
        format!("they hold {rows} row(s)")
    };
    Error::Input(format!(
        "no text to train on: {} input file(s), {why}; nothing was written. Point \
         train-tokenizer at folders of cleaned rows",
        files.len()
    ))
}

fn validate(options: &TrainOptions) -> Result<()> {
    if options.vocab_size < 256 + options.special_tokens.len() {
        return Err(Error::Config(format!(
            "--vocab-size {} is too small: a byte-level vocabulary needs 256 byte tokens plus {} \
             special tokens",
            options.vocab_size,
            options.special_tokens.len()
        )));
    }
    if options.truncate_len == 0 || options.limit_mul_factor == 0 {
        return Err(Error::Config(
            "--truncate-len and --limit-mul-factor must be at least 1".into(),
        ));
    }
    let mut seen = HashSet::new();
    if let Some(dup) = options.special_tokens.iter().find(|t| !seen.insert(*t)) {
        return Err(Error::Config(format!(
            "special token {dup:?} is given twice"
        )));
    }
    Ok(())
}

fn limit_for(options: &TrainOptions, task: &str) -> Option<u64> {
    options
        .prefix_limits
        .iter()
        .find(|(prefix, _)| task.starts_with(prefix.as_str()))
        .and_then(|(_, max_per_file)| *max_per_file)
        .map(|m| m.saturating_mul(options.limit_mul_factor))
}

/// The sorted indices of the `limit` texts used out of `available`, from a generator seeded
/// by (seed, task name).
fn choose_texts(seed: u64, task: &str, available: u64, limit: u64) -> Vec<u64> {
    let mut key = seed.to_le_bytes().to_vec();
    key.extend_from_slice(task.as_bytes());
    let digest = blake3::hash(&key);
    let mut seed_bytes = [0u8; 32];
    seed_bytes.copy_from_slice(digest.as_bytes());
    let mut rng = ChaCha8Rng::from_seed(seed_bytes);
    let mut chosen: Vec<u64> =
        rand::seq::index::sample(&mut rng, available as usize, limit as usize)
            .into_iter()
            .map(|i| i as u64)
            .collect();
    chosen.sort_unstable();
    chosen
}

fn count_rows(path: &Path) -> Result<u64> {
    match RowReader::open(path, DEFAULT_BATCH_ROWS, ByteProgress::none())? {
        RowReader::Parquet(reader) => Ok(reader.total_rows()),
        reader @ RowReader::Jsonl(_) => {
            let mut rows = 0u64;
            for batch in reader {
                rows += batch?.len() as u64;
            }
            Ok(rows)
        }
    }
}

struct FilePlan {
    task: String,
    path: PathBuf,
    rows: u64,
    /// Sorted indices of the texts to use (2·row for the instruction, 2·row+1 for the
    /// response); `None` uses every text.
    chosen: Option<Vec<u64>>,
}

/// The texts of one file, a batch at a time. Errors are parked in `failure` (the trainer's
/// iterator cannot return them) and end the stream.
struct FileTexts<'a> {
    plan: &'a FilePlan,
    options: &'a TrainOptions,
    reader: Option<RowReader>,
    failure: &'a Mutex<Option<Error>>,
    reports: &'a Mutex<Vec<TrainFileReport>>,
    next_row: u64,
    next_chosen: usize,
    texts_used: u64,
    bad_rows: u64,
}

impl<'a> FileTexts<'a> {
    fn new(
        plan: &'a FilePlan,
        options: &'a TrainOptions,
        failure: &'a Mutex<Option<Error>>,
        reports: &'a Mutex<Vec<TrainFileReport>>,
    ) -> Self {
        let mut this = FileTexts {
            plan,
            options,
            reader: None,
            failure,
            reports,
            next_row: 0,
            next_chosen: 0,
            texts_used: 0,
            bad_rows: 0,
        };
        match RowReader::open(&plan.path, DEFAULT_BATCH_ROWS, ByteProgress::none()) {
            Ok(reader) => this.reader = Some(reader),
            Err(e) => this.fail(e),
        }
        this
    }

    fn fail(&mut self, error: Error) {
        if let Ok(mut slot) = self.failure.lock() {
            slot.get_or_insert(error);
        }
        self.reader = None;
    }

    fn wanted(&mut self, text_index: u64) -> bool {
        let Some(chosen) = &self.plan.chosen else {
            return true;
        };
        if chosen.get(self.next_chosen) == Some(&text_index) {
            self.next_chosen += 1;
            true
        } else {
            false
        }
    }

    fn texts_of(&mut self, batch: &Batch) -> Result<Vec<String>> {
        let mut texts = Vec::new();
        for i in 0..batch.len() {
            let row_index = self.next_row;
            self.next_row += 1;
            let row = match batch.row(i) {
                Ok(row) => row,
                Err(_) if self.options.on_error == OnError::Skip => {
                    self.bad_rows += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            for (k, text) in [&row.instruction, &row.response].into_iter().enumerate() {
                if self.wanted(2 * row_index + k as u64) {
                    texts.push(truncate_chars(text, self.options.truncate_len).to_string());
                }
            }
        }
        self.texts_used += texts.len() as u64;
        Ok(texts)
    }
}

impl Iterator for FileTexts<'_> {
    type Item = Vec<String>;

    fn next(&mut self) -> Option<Vec<String>> {
        if self.failure.lock().map_or(true, |slot| slot.is_some()) {
            return None;
        }
        let next = self.reader.as_mut()?.next();
        match next {
            Some(Ok(batch)) => match self.texts_of(&batch) {
                Ok(texts) => Some(texts),
                Err(e) => {
                    self.fail(e);
                    None
                }
            },
            Some(Err(e)) => {
                self.fail(e);
                None
            }
            None => {
                self.reader = None;
                if let Ok(mut reports) = self.reports.lock() {
                    reports.push(TrainFileReport {
                        task: self.plan.task.clone(),
                        rows: self.plan.rows,
                        texts_available: 2 * self.plan.rows,
                        texts_used: self.texts_used,
                        bad_rows: self.bad_rows,
                        limited: self.plan.chosen.is_some(),
                    });
                }
                None
            }
        }
    }
}

/// The first `max_chars` characters of `text`.
pub fn truncate_chars(text: &str, max_chars: usize) -> &str {
    match text.char_indices().nth(max_chars) {
        Some((byte, _)) => &text[..byte],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_characters_not_bytes() {
        assert_eq!(truncate_chars("héllo", 2), "hé");
        assert_eq!(truncate_chars("ab", 10), "ab");
        assert_eq!(truncate_chars("日本語", 0), "");
    }

    #[test]
    fn text_choice_is_seeded_by_seed_and_name_and_sorted() {
        let a = choose_texts(0, "x.jsonl", 100, 10);
        assert_eq!(a, choose_texts(0, "x.jsonl", 100, 10));
        assert_ne!(a, choose_texts(1, "x.jsonl", 100, 10));
        assert_ne!(a, choose_texts(0, "y.jsonl", 100, 10));
        assert_eq!(a.len(), 10);
        assert!(a.windows(2).all(|w| w[0] < w[1]) && a.iter().all(|&i| i < 100));
    }

    #[test]
    fn the_first_matching_prefix_sets_the_limit() {
        let options = TrainOptions {
            inputs: vec![],
            output: PathBuf::new(),
            kind: TokenizerKind::Bpe,
            vocab_size: 1000,
            seed: 0,
            prefix_limits: vec![
                ("flan".into(), Some(3)),
                ("fl".into(), Some(100)),
                ("big".into(), None),
            ],
            truncate_len: 10,
            limit_mul_factor: 10,
            special_tokens: vec![],
            min_frequency: 2,
            on_error: OnError::Fail,
            threads: None,
            progress: false,
        };
        assert_eq!(limit_for(&options, "flan__x.parquet"), Some(30));
        assert_eq!(limit_for(&options, "fly.jsonl"), Some(1000));
        assert_eq!(limit_for(&options, "big.jsonl"), None);
        assert_eq!(limit_for(&options, "other.jsonl"), None);
    }
}
