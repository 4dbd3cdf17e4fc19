//! `data_io tokenize`'s calls: the run, the stale files, the task walk and one scaled unit.

use std::path::PathBuf;

use pyo3::prelude::*;
use serde::Serialize;

use crate::error::Error;
use crate::layout::LayoutTokens;
use crate::tokenize::{DtypeChoice, TokenizeOptions};

use super::call::{interruptible, parse_on_error, to_json, to_py_err};

/// The options of `tokenize`, `tokenize_unit` and `tokenize_stale`, as the facade sends them
/// (`TokenizeOptions.to_json`, `data_io/tokenize/options.py`, its one declaration there): one
/// JSON object, so that the three entry points cannot drift.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenizeArgs {
    inputs: Vec<PathBuf>,
    output: PathBuf,
    tokenizer_path: PathBuf,
    boq: String,
    eoq: String,
    eoa: String,
    conditions: Vec<(String, String)>,
    on_error: String,
    threads: Option<usize>,
    token_dtype: String,
    progress: bool,
    batch_rows: usize,
    #[serde(default)]
    parts: Option<PathBuf>,
}

fn tokenize_options(json: &str) -> Result<TokenizeOptions, Error> {
    let args: TokenizeArgs =
        serde_json::from_str(json).map_err(|e| Error::Config(format!("tokenize options: {e}")))?;
    Ok(TokenizeOptions {
        inputs: args.inputs,
        output: args.output,
        tokenizer_path: args.tokenizer_path,
        layout: LayoutTokens {
            boq: args.boq,
            eoq: args.eoq,
            eoa: args.eoa,
            conditions: args.conditions,
        },
        on_error: parse_on_error(&args.on_error)?,
        threads: args.threads,
        token_dtype: match args.token_dtype.as_str() {
            "uint32" => DtypeChoice::Uint32,
            "auto" => DtypeChoice::Auto,
            other => {
                return Err(Error::Config(format!(
                    "token_dtype must be \"uint32\" or \"auto\", not {other:?}"
                )))
            }
        },
        progress: args.progress,
        batch_rows: args.batch_rows,
        parts: args.parts,
    })
}

/// Run `work` on the options in `options` without the GIL; its result as JSON.
fn run_tokenize<T: Serialize + Send>(
    py: Python<'_>,
    options: &str,
    work: impl FnOnce(&TokenizeOptions) -> Result<T, Error> + Send,
) -> PyResult<String> {
    let options = tokenize_options(options).map_err(|e| to_py_err(py, e))?;
    let report = interruptible(py, || work(&options))?;
    to_json(&report)
}

/// Tokenize every row file (.jsonl, .jsonl.gz, .jsonl.zst, .parquet) under the options' inputs
/// into its output; returns the report as JSON.
#[pyfunction]
fn tokenize(py: Python<'_>, options: &str) -> PyResult<String> {
    run_tokenize(py, options, crate::tokenize::tokenize)
}

/// The files a run would (re-)tokenize, largest first (JSON list); writes nothing.
#[pyfunction]
fn tokenize_stale(py: Python<'_>, options: &str) -> PyResult<String> {
    run_tokenize(py, options, crate::tokenize::stale_tasks)
}

/// The tasks `data_io tokenize` makes of `inputs`, as its walk finds them: (task, source).
#[pyfunction]
fn tokenize_task_files(py: Python<'_>, inputs: Vec<PathBuf>) -> PyResult<Vec<(String, String)>> {
    let found = py
        .detach(|| crate::reader::task_files(&inputs))
        .map_err(|e| to_py_err(py, e))?;
    Ok(found
        .tasks
        .into_iter()
        .map(|(task, source)| (task, source.to_string_lossy().into_owned()))
        .collect())
}

/// Encode one unit (`unit`: JSON with task, source, span, index, count, part_dir) into its part
/// folder; returns the part's report as JSON. `window`: a gzip text span's entry point's window.
#[pyfunction]
#[pyo3(signature = (options, unit, window=None))]
fn tokenize_unit(
    py: Python<'_>,
    options: &str,
    unit: &str,
    window: Option<&[u8]>,
) -> PyResult<String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct UnitArgs {
        task: String,
        source: PathBuf,
        span: crate::reader::Span,
        index: usize,
        count: usize,
        part_dir: PathBuf,
    }
    let unit: UnitArgs = serde_json::from_str(unit)
        .map_err(|e| to_py_err(py, Error::Config(format!("tokenize unit: {e}"))))?;
    let unit = crate::tokenize::parts::UnitSpec {
        task: unit.task,
        source: unit.source,
        span: unit.span,
        window: window.map(<[u8]>::to_vec).unwrap_or_default(),
        index: unit.index,
        count: unit.count,
        part_dir: unit.part_dir,
    };
    run_tokenize(py, options, |options| {
        crate::tokenize::parts::tokenize_unit(options, &unit)
    })
}

/// This module's functions and classes, added to `data_io._core`.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tokenize, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize_stale, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize_task_files, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize_unit, m)?)?;
    Ok(())
}
