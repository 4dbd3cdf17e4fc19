//! The Rust trainer's run: the counting pass over the files (in a memory budget, spilling to
//! sorted runs past it; or file by file into a store of counts that re-runs and scale-out
//! units reuse), the merge of every file's counts into one table of distinct words, and the
//! merge pass over it. However the counting was cut up, the table, and so the tokenizer, is the
//! one a single pass in memory makes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::Tokenizer;

use super::counts::spill::{default_budget, Counting, SpillStats};
use super::counts::store::{self, CountKey, StoredCounts};
use super::counts::{merge_runs_to_table, merge_sources, RunWriter, Tally, WordsHeader};
use super::hf::bpe_tokenizer;
use super::merge::{train_bpe_with, BpeOptions};
use super::texts::{for_each_batch, FilePlan};
use super::words::WordCounts;
use super::{unigram, TokenizerKind, TrainFileReport, TrainOptions};
use crate::encoder::fast_bpe::pretokenize::Pattern;
use crate::error::Result;
use crate::reader::OnError;

/// Texts counted per call of the counter: it splits them across the pool's threads.
const TEXTS_PER_COUNT: usize = 8192;

/// What the counting and merge passes did (the summary's second half).
#[derive(Debug, Clone, Default, Serialize)]
pub struct CountingReport {
    /// Distinct words (pre-tokens), and pieces counted in all (the sum of their counts).
    pub words: u64,
    pub pieces: u64,
    /// UTF-8 bytes of the texts used, and of those counted in this run (not read back).
    pub text_bytes: u64,
    pub counted_bytes: u64,
    pub count_seconds: f64,
    pub merge_seconds: f64,
    /// The counting budget, in bytes, and what the counting did with it.
    pub count_memory: u64,
    pub spill: SpillStats,
    /// Files whose counts were read back (from --counts or scale-out units), not counted.
    pub reused_files: Vec<String>,
    /// Where the files' counts are kept (--counts).
    pub counts_dir: Option<String>,
}

pub fn train(
    options: &TrainOptions,
    plans: &[FilePlan],
    bar: &ProgressBar,
) -> Result<(Tokenizer, Vec<TrainFileReport>, CountingReport)> {
    let started = Instant::now();
    let header = WordsHeader::ours(true);
    let budget = options.count_memory.unwrap_or_else(default_budget);
    let mut report = CountingReport {
        count_memory: budget,
        counts_dir: options.counts_dir.as_ref().map(|d| d.display().to_string()),
        ..Default::default()
    };
    // What the merge reads: tables in memory, and runs on disk (opened by the merge, a
    // bounded number at a time).
    let mut memory: Vec<WordCounts> = Vec::new();
    let mut runs: Vec<PathBuf> = Vec::new();
    let mut files: HashMap<String, TrainFileReport> = HashMap::new();
    // The files' reports are given back in the inputs' order (the records', without inputs).
    let mut order: Vec<String> = plans.iter().map(|plan| plan.task.clone()).collect();

    if plans.is_empty() {
        // Trained from counts alone (texts counted by `source_counter`): every record of the
        // parts, in their order.
        for dir in &options.count_parts {
            for (name, dir) in store::records_in(dir)? {
                let (run, stored) = store::read_record(&dir, &name)?;
                runs.push(run);
                report.text_bytes += stored.report.text_bytes;
                report.reused_files.push(stored.report.task.clone());
                order.push(stored.report.task.clone());
                files.insert(stored.report.task.clone(), stored.report);
            }
        }
    }
    // Counts made before (a store, or scale-out units' parts) stand in for their files.
    let parts = parts_index(&options.count_parts)?;
    let keep = options.counts_dir.is_some() || !parts.is_empty();
    let mut to_count: Vec<(&FilePlan, Option<CountKey>)> = Vec::new();
    for plan in plans {
        let key = if keep {
            Some(count_key(options, plan, &header)?)
        } else {
            None
        };
        match key
            .as_ref()
            .map(|k| reusable(k, &parts, options))
            .transpose()?
        {
            Some(Some((run, stored))) => {
                runs.push(run);
                bar.inc(std::fs::metadata(&plan.path).map_or(0, |m| m.len()));
                report.reused_files.push(plan.task.clone());
                report.text_bytes += stored.report.text_bytes;
                files.insert(plan.task.clone(), stored.report);
            }
            _ => to_count.push((plan, key)),
        }
    }

    // The rest: file by file into the store, or all together in the budget.
    let spill_parent = spill_parent(options);
    let mut counting = Counting::new(Pattern::Qwen, true, budget, &spill_parent);
    match &options.counts_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| crate::Error::io("cannot create", dir, e))?;
            for (plan, key) in to_count {
                let Some(key) = key else { continue };
                let (run, stored) = count_into_store(options, plan, key, dir, budget, bar)?;
                report.text_bytes += stored.report.text_bytes;
                report.counted_bytes += stored.report.text_bytes;
                runs.push(run);
                files.insert(plan.task.clone(), stored.report);
            }
        }
        None => {
            let plans: Vec<&FilePlan> = to_count.iter().map(|(plan, _)| *plan).collect();
            let counted = for_each_batch(&plans, options, bar, TEXTS_PER_COUNT, |batch| {
                counting.add_texts(batch)
            })?;
            for file in counted {
                report.text_bytes += file.text_bytes;
                report.counted_bytes += file.text_bytes;
                files.insert(file.task.clone(), file);
            }
            crate::interrupt::check()?;
            let (tables, spilled) = counting.finish_parts()?;
            memory.extend(tables);
            runs.extend(spilled);
        }
    }
    bar.finish_and_clear();
    crate::interrupt::check()?; // each phase boundary: the phases take seconds each
    let words = merge_runs_to_table(memory, runs, &header, &spill_parent)?;
    crate::interrupt::check()?;
    report.spill = counting.stats().clone();
    drop(counting);
    report.words = words.len() as u64;
    report.pieces = words.total();
    report.count_seconds = started.elapsed().as_secs_f64();

    let merging = Instant::now();
    let tokenizer = match options.kind {
        TokenizerKind::Bpe => {
            let merge_bar = merges_bar(options.vocab_size as u64, options.progress);
            let bpe = train_bpe_with(
                words,
                &BpeOptions {
                    vocab_size: options.vocab_size,
                    min_frequency: options.min_frequency,
                    special_tokens: options.special_tokens.clone(),
                    initial_alphabet: ByteLevel::alphabet().into_iter().collect(),
                },
                |tokens| merge_bar.set_position(tokens as u64),
            )?;
            merge_bar.finish_and_clear();
            bpe_tokenizer(&bpe, &options.special_tokens)?
        }
        // data_io's EM passes (`unigram_em`) over the same words `unigram::count_words` would
        // have counted.
        TokenizerKind::Unigram => {
            let words: Vec<(String, u64)> = words.iter().map(|(w, c)| (w.to_owned(), c)).collect();
            unigram::train(options, words, unigram::Em::Ours)?
        }
    };
    report.merge_seconds = merging.elapsed().as_secs_f64();
    // The files' reports in the inputs' order.
    let files = order.iter().filter_map(|task| files.remove(task)).collect();
    Ok((tokenizer, files, report))
}

/// Count one file into `dir` (its run and sidecar); the run's path and its record.
fn count_into_store(
    options: &TrainOptions,
    plan: &FilePlan,
    key: CountKey,
    dir: &Path,
    budget: u64,
    bar: &ProgressBar,
) -> Result<(PathBuf, StoredCounts)> {
    let mut counting = Counting::new(Pattern::Qwen, true, budget, dir);
    let mut reports = for_each_batch(&[plan], options, bar, TEXTS_PER_COUNT, |batch| {
        counting.add_texts(batch)
    })?;
    let Some(file) = reports.pop() else {
        return Err(crate::Error::Input(format!(
            "{}: read no rows (a bug?)",
            plan.path.display()
        )));
    };
    let (run, _) = store::paths(dir, &plan.task);
    let mut writer = RunWriter::create(&run, &key.words)?;
    let mut tally = Tally::new(&mut writer);
    merge_sources(counting.finish()?, &key.words, &mut tally)?;
    let (words, pieces) = (tally.words, tally.pieces);
    writer.finish()?;
    let stored = StoredCounts {
        key,
        words,
        pieces,
        text_bytes: file.text_bytes,
        report: file,
    };
    store::record(dir, &plan.task, &stored)?;
    Ok((run, stored))
}

/// Count one file of a scale-out plan into the folder `part` (`store`'s layout); its record.
pub fn count_unit(options: &TrainOptions, plan: &FilePlan, part: &Path) -> Result<StoredCounts> {
    let header = WordsHeader::ours(true);
    let key = count_key(options, plan, &header)?;
    std::fs::create_dir_all(part).map_err(|e| crate::Error::io("cannot create", part, e))?;
    let budget = options.count_memory.unwrap_or_else(default_budget);
    let bar = ProgressBar::hidden();
    let (_, stored) = count_into_store(options, plan, key, part, budget, &bar)?;
    Ok(stored)
}

/// The stored counts of a file that may stand in for it: a scale-out unit's, else the store's.
fn reusable(
    key: &CountKey,
    parts: &HashMap<String, PathBuf>,
    options: &TrainOptions,
) -> Result<Option<(PathBuf, StoredCounts)>> {
    if let Some(dir) = parts.get(&key.task) {
        if let Some(found) = store::lookup(dir, key)? {
            return Ok(Some(found));
        }
    }
    match &options.counts_dir {
        Some(dir) => store::lookup(dir, key),
        None => Ok(None),
    }
}

/// Task -> the part folder holding its counts.
fn parts_index(parts: &[PathBuf]) -> Result<HashMap<String, PathBuf>> {
    let mut index = HashMap::new();
    for dir in parts {
        for (task, dir) in store::records_in(dir)? {
            index.insert(task, dir);
        }
    }
    Ok(index)
}

fn count_key(options: &TrainOptions, plan: &FilePlan, header: &WordsHeader) -> Result<CountKey> {
    let source_bytes = std::fs::metadata(&plan.path)
        .map_err(|e| crate::Error::io("cannot read", &plan.path, e))?
        .len();
    Ok(CountKey {
        task: plan.task.clone(),
        source_bytes,
        source_blake3: store::file_hash(&plan.path)?,
        words: header.clone(),
        seed: options.seed,
        limit: plan.limit,
        truncate_len: options.truncate_len,
        on_error: match options.on_error {
            OnError::Fail => "fail",
            OnError::Skip => "skip",
        }
        .into(),
    })
}

/// Where spills go: beside the tokenizer being written (not /tmp, often memory itself).
fn spill_parent(options: &TrainOptions) -> PathBuf {
    match options.output.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn merges_bar(vocab_size: u64, show: bool) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(
        Some(vocab_size),
        if show {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    if let Ok(style) = ProgressStyle::with_template(
        "merging {spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} tokens {per_sec} ETA {eta}",
    ) {
        bar.set_style(style);
    }
    bar
}
