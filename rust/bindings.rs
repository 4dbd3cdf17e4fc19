//! The Python extension `data_io._core`: thin wrappers that convert arguments, release the GIL
//! around the work, and map `Error` once onto the classes of `data_io/errors.py`.
//! Reports cross the boundary as JSON text; the typed facade (`data_io/tokenize.py`,
//! `data_io/train_tokenizer.py`) turns them into dataclasses.

use std::path::PathBuf;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyType;
use serde::Serialize;

use crate::error::{Error, ErrorKind};
use crate::layout::LayoutTokens;
use crate::tokenize::{DtypeChoice, OnError, TokenizeOptions};
use crate::train::{TokenizerKind, TrainOptions, DEFAULT_SPECIAL_TOKENS, SPLIT_REGEX};

fn to_py_err(py: Python<'_>, error: Error) -> PyErr {
    let class = match error.kind() {
        ErrorKind::Input => "InputError",
        ErrorKind::Config => "ConfigError",
        ErrorKind::Tokenizer => "TokenizerError",
        ErrorKind::Output => "OutputError",
    };
    let message = error.to_string();
    match py
        .import("data_io.errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from))
    {
        Ok(class) => PyErr::from_type(class, message),
        Err(import_error) => import_error,
    }
}

fn to_json<T: Serialize>(value: &T) -> PyResult<String> {
    serde_json::to_string(value).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

fn parse_on_error(value: &str) -> Result<OnError, Error> {
    match value {
        "fail" => Ok(OnError::Fail),
        "skip" => Ok(OnError::Skip),
        other => Err(Error::Config(format!(
            "on_error must be \"fail\" or \"skip\", not {other:?}"
        ))),
    }
}

/// Tokenize every .jsonl/.parquet file under `inputs` into `output`; returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (inputs, output, tokenizer_path, *, boq, eoq, eoa, conditions, on_error,
                    threads, token_dtype, progress, batch_rows))]
#[allow(clippy::too_many_arguments)]
fn tokenize(
    py: Python<'_>,
    inputs: Vec<PathBuf>,
    output: PathBuf,
    tokenizer_path: PathBuf,
    boq: String,
    eoq: String,
    eoa: String,
    conditions: Vec<(String, String)>,
    on_error: &str,
    threads: Option<usize>,
    token_dtype: &str,
    progress: bool,
    batch_rows: usize,
) -> PyResult<String> {
    let options = (|| -> Result<TokenizeOptions, Error> {
        Ok(TokenizeOptions {
            inputs,
            output,
            tokenizer_path,
            layout: LayoutTokens {
                boq,
                eoq,
                eoa,
                conditions,
            },
            on_error: parse_on_error(on_error)?,
            threads,
            token_dtype: match token_dtype {
                "uint32" => DtypeChoice::Uint32,
                "auto" => DtypeChoice::Auto,
                other => {
                    return Err(Error::Config(format!(
                        "token_dtype must be \"uint32\" or \"auto\", not {other:?}"
                    )))
                }
            },
            progress,
            batch_rows,
        })
    })()
    .map_err(|e| to_py_err(py, e))?;
    let report = py
        .detach(|| crate::tokenize::tokenize(&options))
        .map_err(|e| to_py_err(py, e))?;
    to_json(&report)
}

/// Train a tokenizer on the rows under `inputs`, write it to `output`; returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (inputs, output, *, kind, vocab_size, seed, prefix_limits, truncate_len,
                    limit_mul_factor, special_tokens, min_frequency, on_error, threads, progress))]
#[allow(clippy::too_many_arguments)]
fn train_tokenizer(
    py: Python<'_>,
    inputs: Vec<PathBuf>,
    output: PathBuf,
    kind: &str,
    vocab_size: usize,
    seed: u64,
    prefix_limits: Vec<(String, Option<u64>)>,
    truncate_len: usize,
    limit_mul_factor: u64,
    special_tokens: Vec<String>,
    min_frequency: u64,
    on_error: &str,
    threads: Option<usize>,
    progress: bool,
) -> PyResult<String> {
    let options = (|| -> Result<TrainOptions, Error> {
        Ok(TrainOptions {
            inputs,
            output,
            kind: match kind {
                "bpe" => TokenizerKind::Bpe,
                "unigram" => TokenizerKind::Unigram,
                other => {
                    return Err(Error::Config(format!(
                        "tokenizer type must be \"bpe\" or \"unigram\", not {other:?}"
                    )))
                }
            },
            vocab_size,
            seed,
            prefix_limits,
            truncate_len,
            limit_mul_factor,
            special_tokens,
            min_frequency,
            on_error: parse_on_error(on_error)?,
            threads,
            progress,
        })
    })()
    .map_err(|e| to_py_err(py, e))?;
    let report = py
        .detach(|| crate::train::train(&options))
        .map_err(|e| to_py_err(py, e))?;
    to_json(&report)
}

#[pymodule]
#[pyo3(name = "_core")]
fn core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tokenize, m)?)?;
    m.add_function(wrap_pyfunction!(train_tokenizer, m)?)?;
    m.add("DEFAULT_SPECIAL_TOKENS", DEFAULT_SPECIAL_TOKENS.to_vec())?;
    m.add("SPLIT_REGEX", SPLIT_REGEX)?;
    Ok(())
}
