//! `data_io train-tokenizer`'s calls: training, its input files, a scaled unit's counts and
//! the counter of raw text handed over from Python.

use std::path::PathBuf;

use pyo3::prelude::*;
use serde::Serialize;

use crate::error::Error;
use crate::train::{TokenizerKind, TrainOptions, Trainer, DEFAULT_SPECIAL_TOKENS, SPLIT_REGEX};

use super::call::{interruptible, parse_on_error, to_json, to_py_err};

/// The options of `train_tokenizer`, `train_tasks` and `train_count_unit`, as the facade
/// sends them (`data_io/tokenizer/train.py`): one JSON object, so the entry points cannot drift.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TrainArgs {
    inputs: Vec<PathBuf>,
    output: PathBuf,
    kind: String,
    vocab_size: usize,
    seed: u64,
    prefix_limits: Vec<(String, Option<u64>)>,
    truncate_len: usize,
    limit_mul_factor: u64,
    special_tokens: Vec<String>,
    #[serde(default)]
    roles: std::collections::BTreeMap<String, String>,
    min_frequency: u64,
    on_error: String,
    threads: Option<usize>,
    progress: bool,
    #[serde(default)]
    count_memory: Option<u64>,
    #[serde(default)]
    counts_dir: Option<PathBuf>,
    #[serde(default)]
    count_parts: Vec<PathBuf>,
}

fn train_options(json: &str) -> Result<TrainOptions, Error> {
    let args: TrainArgs =
        serde_json::from_str(json).map_err(|e| Error::Config(format!("train options: {e}")))?;
    Ok(TrainOptions {
        inputs: args.inputs,
        output: args.output,
        kind: match args.kind.as_str() {
            "bpe" => TokenizerKind::Bpe,
            "unigram" => TokenizerKind::Unigram,
            other => {
                return Err(Error::Config(format!(
                    "tokenizer type must be \"bpe\" or \"unigram\", not {other:?}"
                )))
            }
        },
        vocab_size: args.vocab_size,
        seed: args.seed,
        prefix_limits: args.prefix_limits,
        truncate_len: args.truncate_len,
        limit_mul_factor: args.limit_mul_factor,
        special_tokens: args.special_tokens,
        roles: args.roles.into_iter().collect(),
        min_frequency: args.min_frequency,
        on_error: parse_on_error(&args.on_error)?,
        threads: args.threads,
        progress: args.progress,
        count_memory: args.count_memory,
        counts_dir: args.counts_dir,
        count_parts: args.count_parts,
    })
}

/// Run `work` on the train options in `options` without the GIL; its result as JSON.
fn run_train<T: Serialize + Send>(
    py: Python<'_>,
    options: &str,
    work: impl FnOnce(&TrainOptions) -> Result<T, Error> + Send,
) -> PyResult<String> {
    let options = train_options(options).map_err(|e| to_py_err(py, e))?;
    let report = interruptible(py, || work(&options))?;
    to_json(&report)
}

/// Train a tokenizer on the rows under the options' inputs with `trainer` ("rust" or "hf"),
/// write it to their output; returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (options, *, trainer = "rust"))]
fn train_tokenizer(py: Python<'_>, options: &str, trainer: &str) -> PyResult<String> {
    let trainer = match trainer {
        "rust" => Trainer::Ours,
        "hf" => Trainer::Hf,
        other => {
            return Err(to_py_err(
                py,
                Error::Config(format!("trainer must be \"rust\" or \"hf\", not {other:?}")),
            ))
        }
    };
    run_train(py, options, |options| {
        crate::train::train_with(options, trainer)
    })
}

/// The input files of a training run, as a JSON list of `{task, source, size}`; reads nothing.
#[pyfunction]
fn train_tasks(py: Python<'_>, options: &str) -> PyResult<String> {
    run_train(py, options, crate::train::input_files)
}

/// Count the texts of one input file (`task` at `source`) into the folder `part`; returns the
/// counts' record as JSON.
#[pyfunction]
fn train_count_unit(
    py: Python<'_>,
    options: &str,
    task: String,
    source: PathBuf,
    part: PathBuf,
) -> PyResult<String> {
    run_train(py, options, |options| {
        crate::train::count_unit(options, task, source, &part)
    })
}

/// Counts texts handed over from Python (raw text sources), one source at a time, into a
/// folder of counts that `train_tokenizer` reads with `count_parts` and no inputs.
#[pyclass(module = "data_io._core", name = "SourceCounter")]
struct SourceCounter {
    inner: crate::train::source_counter::SourceCounter,
}

#[pymethods]
impl SourceCounter {
    #[new]
    #[pyo3(signature = (folder, *, count_memory, truncate_len, threads))]
    fn new(
        py: Python<'_>,
        folder: PathBuf,
        count_memory: Option<u64>,
        truncate_len: usize,
        threads: Option<usize>,
    ) -> PyResult<Self> {
        let inner = crate::train::source_counter::SourceCounter::new(
            &folder,
            count_memory,
            truncate_len,
            threads,
        )
        .map_err(|e| to_py_err(py, e))?;
        Ok(SourceCounter { inner })
    }

    /// Count `texts` on the counter's threads, without the GIL.
    fn add_texts(&mut self, py: Python<'_>, texts: Vec<String>) -> PyResult<()> {
        let inner = &mut self.inner;
        py.detach(|| inner.add_texts(&texts))
            .map_err(|e| to_py_err(py, e))
    }

    /// Write the counts since the last call as the run `<folder>/<name>.words` of source
    /// `task`; returns its record as JSON.
    fn finish_source(&mut self, py: Python<'_>, name: &str, task: &str) -> PyResult<String> {
        let inner = &mut self.inner;
        let stored = py
            .detach(|| inner.finish_source(name, task))
            .map_err(|e| to_py_err(py, e))?;
        to_json(&stored)
    }
}

/// This module's functions and classes, added to `data_io._core`.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(train_tokenizer, m)?)?;
    m.add_function(wrap_pyfunction!(train_tasks, m)?)?;
    m.add_function(wrap_pyfunction!(train_count_unit, m)?)?;
    m.add_class::<SourceCounter>()?;
    m.add("DEFAULT_SPECIAL_TOKENS", DEFAULT_SPECIAL_TOKENS.to_vec())?;
    m.add("SPLIT_REGEX", SPLIT_REGEX)?;
    Ok(())
}
