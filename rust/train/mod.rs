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
//! - `unigram.rs`: unigram training, fed and finished so that a run repeats: by `unigram_em/`
//!   (data_io's EM passes, SentencePiece's algorithm as `tokenizers` runs it) or `tokenizers`'.
//! - `words.rs`: the counting pass of our own trainer: distinct pre-tokens with their counts
//!   (`piece_table.rs`: the per-thread table of byte strings it counts into).
//! - `merge.rs`: its merge pass, the merges of `tokenizers`' `BpeTrainer` over those words
//!   (`word_arena.rs`: the words as symbols, merged in place; `merge_queue.rs`: the queue).
//! - `differential.rs` (tests): both trainers on the same texts give the same file.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::progress::{bytes_bar, ByteProgress};
use crate::reader::{task_files_for, OnError};

pub mod counts;
pub mod hf;
pub mod merge;
mod merge_queue;
mod ours;
mod piece_table;
pub mod source_counter;
pub mod texts;
pub mod unigram;
pub mod unigram_em;
mod word_arena;
pub mod words;

#[cfg(test)]
mod differential;

pub use hf::tokenizer_config;
use hf::{new_tokenizer, new_trainer, save};
pub use ours::CountingReport;
use texts::{FilePlan, FileTexts};
use tokenizers::Tokenizer;

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
    /// Special tokens chosen for `tokenizer_config.json`'s roles (`hf::CHOSEN_ROLES`), over the
    /// defaults.
    pub roles: Vec<(String, String)>,
    pub min_frequency: u64,
    pub on_error: OnError,
    pub threads: Option<usize>,
    pub progress: bool,
    /// Bytes the counting tables may hold before they spill to sorted runs on disk (None: a
    /// quarter of the machine's memory; `counts::spill`).
    pub count_memory: Option<u64>,
    /// Keep each input file's counts here and reuse the ones still valid (`counts::store`).
    pub counts_dir: Option<PathBuf>,
    /// Folders of counts that scale-out units made (read, never written).
    pub count_parts: Vec<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainFileReport {
    pub task: String,
    pub rows: u64,
    pub texts_available: u64,
    pub texts_used: u64,
    /// UTF-8 bytes of the texts used (after truncation).
    pub text_bytes: u64,
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
    /// The Rust trainer's counting and merge passes (None for `tokenizers`' trainers).
    pub counting: Option<CountingReport>,
}

/// Which trainer counts the words and learns the vocabulary; both give the same
/// `tokenizer.json` (`differential.rs`, `unigram.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trainer {
    /// This crate's counting pass (`words.rs`: in a memory budget, spilling, kept per file,
    /// cut into scale-out units) and BPE's merge pass (`merge.rs`); a unigram vocabulary is
    /// learned from the same counts by `tokenizers`' EM passes (`unigram.rs`).
    Ours,
    /// `tokenizers`' own trainers, fed the texts: the oracle.
    Hf,
}

/// Train with `tokenizers`' trainers (what `train_with(options, Trainer::Hf)` does).
pub fn train(options: &TrainOptions) -> Result<TrainReport> {
    train_with(options, Trainer::Hf)
}

pub fn train_with(options: &TrainOptions, trainer: Trainer) -> Result<TrainReport> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(options.threads.unwrap_or(0))
        .build()
        .map_err(|e| Error::Config(format!("cannot start {:?} threads: {e}", options.threads)))?;
    pool.install(|| run(options, trainer))
}

fn run(options: &TrainOptions, trainer_choice: Trainer) -> Result<TrainReport> {
    let started = Instant::now();
    validate(options)?;
    let from_counts = options.inputs.is_empty() && !options.count_parts.is_empty();
    if from_counts && trainer_choice == Trainer::Hf {
        return Err(Error::Config(
            "training from word counts alone takes the rust trainer".into(),
        ));
    }
    // Without inputs, the counts of the parts are the whole corpus (`source_counter`).
    let inputs = if from_counts {
        crate::reader::Inputs::default()
    } else {
        task_files_for(&options.inputs, NO_ROWS_REFUSED)?
    };
    let plans: Vec<FilePlan> = inputs
        .tasks
        .into_iter()
        .map(|(task, path)| FilePlan::new(options, task, path))
        .collect();
    let total_bytes = plans
        .iter()
        .map(|plan| std::fs::metadata(&plan.path).map_or(0, |m| m.len()))
        .sum();
    let bar = bytes_bar(total_bytes, options.progress, "counting");
    let (tokenizer, files, counting) = match trainer_choice {
        Trainer::Hf => {
            let (tokenizer, files) = train_hf(options, &plans, &bar)?;
            (tokenizer, files, None)
        }
        Trainer::Ours => {
            let (tokenizer, files, counting) = ours::train(options, &plans, &bar)?;
            (tokenizer, files, Some(counting))
        }
    };
    let texts_used = files.iter().map(|f| f.texts_used).sum();
    if files.iter().all(|f| f.text_bytes == 0) {
        // A tokenizer of the special tokens and the byte alphabet alone (no texts, or only
        // empty ones) would load fine and silently tokenize everything byte by byte.
        return Err(nothing_to_train_on(&files));
    }
    // `tokenizers`' trainers (`--trainer hf`, and unigram's EM passes) never look at the flag:
    // a Ctrl-C during their training is seen here, before anything is written, not after.
    crate::interrupt::check()?;
    save(
        &tokenizer,
        &options.output,
        &options.special_tokens,
        &options.roles,
    )?;
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
        counting,
    })
}

/// `tokenizers`' trainer over the texts of `plans`; the files' reports in their order.
fn train_hf(
    options: &TrainOptions,
    plans: &[FilePlan],
    bar: &ProgressBar,
) -> Result<(Tokenizer, Vec<TrainFileReport>)> {
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let reports: Mutex<Vec<TrainFileReport>> = Mutex::new(Vec::new());
    let texts = plans
        .iter()
        .flat_map(|plan| FileTexts::new(plan, options, &failure, &reports, ByteProgress::new(bar)))
        .flatten();
    let failed = || failure.lock().unwrap_or_else(|p| p.into_inner()).take();
    let tokenizer = match options.kind {
        TokenizerKind::Bpe => {
            let mut tokenizer = new_tokenizer(options.kind)?;
            let mut trainer = new_trainer(options)?;
            tokenizer
                .train(&mut trainer, texts)
                .map_err(|e| Error::Tokenizer(format!("training failed: {e}")))?;
            tokenizer
        }
        TokenizerKind::Unigram => {
            let words = unigram::count_words(texts)?;
            bar.finish_and_clear();
            // A bad file or a Ctrl-C stops the run before the EM passes, not after them.
            if let Some(error) = failed() {
                return Err(error);
            }
            crate::interrupt::check()?;
            unigram::train(options, words, unigram::Em::Tokenizers)?
        }
    };
    bar.finish_and_clear();
    if let Some(error) = failed() {
        return Err(error);
    }
    Ok((
        tokenizer,
        reports.into_inner().unwrap_or_else(|p| p.into_inner()),
    ))
}

/// One input file of a training run (what a scale-out plan cuts into units).
#[derive(Debug, Clone, Serialize)]
pub struct InputFile {
    pub task: String,
    pub source: String,
    pub size: u64,
}

/// The input files of a run with `options`, in the order they are read.
pub fn input_files(options: &TrainOptions) -> Result<Vec<InputFile>> {
    let inputs = task_files_for(&options.inputs, NO_ROWS_REFUSED)?;
    inputs
        .tasks
        .into_iter()
        .map(|(task, path)| {
            let size = std::fs::metadata(&path)
                .map_err(|e| Error::io("cannot read", &path, e))?
                .len();
            Ok(InputFile {
                task,
                source: path.display().to_string(),
                size,
            })
        })
        .collect()
}

/// Count one input file (a scale-out unit) into the folder `part`, on `options.threads` threads.
pub fn count_unit(
    options: &TrainOptions,
    task: String,
    source: PathBuf,
    part: &std::path::Path,
) -> Result<counts::store::StoredCounts> {
    validate(options)?;
    let plan = FilePlan::new(options, task, source);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(options.threads.unwrap_or(0))
        .build()
        .map_err(|e| Error::Config(format!("cannot start {:?} threads: {e}", options.threads)))?;
    pool.install(|| ours::count_unit(options, &plan, part))
}

/// Why an input without row files is refused, rather than trained without.
const NO_ROWS_REFUSED: &str = "an input without rows is most likely a wrong path, and a \
    tokenizer trained without the texts meant to be there would not show it";

fn nothing_to_train_on(files: &[TrainFileReport]) -> Error {
    let rows: u64 = files.iter().map(|f| f.rows).sum();
    let bad: u64 = files.iter().map(|f| f.bad_rows).sum();
    let texts: u64 = files.iter().map(|f| f.texts_used).sum();
    let why = if texts > 0 {
        format!("their {texts} text(s) are all empty (instruction and response \"\")")
    } else if bad > 0 {
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
    // A unigram vocabulary needs a learned piece more: asked for exactly the byte and special
    // tokens, the trainer's cut compares for equality after the bytes are in, never stops,
    // and keeps every piece it learned (`unigram_em::finalize`, as `tokenizers`' own).
    let least =
        256 + options.special_tokens.len() + usize::from(options.kind == TokenizerKind::Unigram);
    if options.vocab_size < least {
        return Err(Error::Config(format!(
            "--vocab-size {} is too small: a byte-level vocabulary needs 256 byte tokens plus {} \
             special tokens{}; ask for at least {least}",
            options.vocab_size,
            options.special_tokens.len(),
            if options.kind == TokenizerKind::Unigram {
                " and a learned piece"
            } else {
                ""
            }
        )));
    }
    if options.truncate_len == 0 || options.limit_mul_factor == 0 {
        return Err(Error::Config(
            "--truncate-len and --limit-mul-factor must be at least 1".into(),
        ));
    }
    if options.vocab_size > u32::MAX as usize {
        return Err(Error::Config(format!(
            "--vocab-size {} is too large: token ids are 32-bit (at most {})",
            options.vocab_size,
            u32::MAX
        )));
    }
    let mut seen = HashSet::new();
    if let Some(dup) = options.special_tokens.iter().find(|t| !seen.insert(*t)) {
        return Err(Error::Config(format!(
            "special token {dup:?} is given twice"
        )));
    }
    // A special token that is a byte's own symbol would take that byte's place in the
    // vocabulary (one token short, and encoders apart); an empty one matches nothing.
    let alphabet = tokenizers::pre_tokenizers::byte_level::ByteLevel::alphabet();
    let base = |t: &String| {
        let mut chars = t.chars();
        match (chars.next(), chars.next()) {
            (None, _) => true,
            (Some(c), None) => alphabet.contains(&c),
            _ => false,
        }
    };
    if let Some(token) = options.special_tokens.iter().find(|t| base(t)) {
        return Err(Error::Config(format!(
            "special token {token:?} is empty or one of the 256 byte-level symbols every \
             vocabulary starts with (it would take that byte's place); choose a longer token"
        )));
    }
    for (role, token) in &options.roles {
        if !hf::CHOSEN_ROLES.contains(&role.as_str()) {
            return Err(Error::Config(format!(
                "no role {role:?} to choose a token for (one of {})",
                hf::CHOSEN_ROLES.join(", ")
            )));
        }
        if !options.special_tokens.contains(token) {
            return Err(Error::Config(format!(
                "--{} {token:?} is not one of the special tokens; add it to --special-tokens",
                role.replace('_', "-")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::texts::{choose_texts, limit_for, truncate_chars};
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
    fn empty_or_byte_symbol_special_tokens_and_huge_vocabularies_are_refused() {
        let with = |specials: &[&str], vocab_size: usize| TrainOptions {
            special_tokens: specials.iter().map(|t| t.to_string()).collect(),
            vocab_size,
            ..super::differential::options(1000, 2, &[])
        };
        for specials in [&["a", "<b>"][..], &["<b>", "\u{120}"], &[""]] {
            let error = validate(&with(specials, 1000)).expect_err("refused");
            assert!(error.to_string().contains("byte-level symbols"), "{error}");
        }
        let error = validate(&with(&[], 5_000_000_000)).expect_err("refused");
        assert!(
            error.to_string().contains("token ids are 32-bit"),
            "{error}"
        );
        assert!(validate(&with(&["<b>", "ab", "\u{120}a"], 1000)).is_ok());
    }

    /// A unigram vocabulary of exactly the byte and special tokens would keep every learned
    /// piece (its cut compares for equality): it needs a piece more; BPE does not.
    #[test]
    fn a_unigram_vocabulary_needs_a_learned_piece_more() {
        let with = |kind: TokenizerKind, vocab_size: usize| TrainOptions {
            kind,
            ..super::differential::options(vocab_size, 2, &["<s>".to_string()])
        };
        assert!(validate(&with(TokenizerKind::Bpe, 257)).is_ok());
        let error = validate(&with(TokenizerKind::Unigram, 257)).expect_err("refused");
        assert!(error.to_string().contains("at least 258"), "{error}");
        assert!(validate(&with(TokenizerKind::Unigram, 258)).is_ok());
    }

    #[test]
    fn the_first_matching_prefix_sets_the_limit() {
        let options = TrainOptions {
            prefix_limits: vec![
                ("flan".into(), Some(3)),
                ("fl".into(), Some(100)),
                ("big".into(), None),
            ],
            limit_mul_factor: 10,
            ..super::differential::options(1000, 2, &[])
        };
        assert_eq!(limit_for(&options, "flan__x.parquet"), Some(30));
        assert_eq!(limit_for(&options, "fly.jsonl"), Some(1000));
        assert_eq!(limit_for(&options, "big.jsonl"), None);
        assert_eq!(limit_for(&options, "other.jsonl"), None);
    }
}
