//! The Python extension `data_io._core`: thin wrappers that convert arguments, release the GIL
//! around the work, and map `Error` once onto the classes of `data_io/errors.py`.
//! Reports cross the boundary as JSON text; the typed facade (`data_io/tokenize.py`,
//! `data_io/train_tokenizer.py`) turns them into dataclasses.

use std::path::PathBuf;

use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
    PyReadwriteArray1, PyReadwriteArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyType};
use serde::Serialize;

use crate::encoder::{encode_batch as encode_texts, Encoder as TextEncoderImpl, TextEncoder};
use crate::error::{Error, IoContext};
use crate::layout::LayoutTokens;
use crate::prepare::lines::LineBatch;
use crate::reader::OnError;
use crate::sampling::gather::{gather_epoch as gather_rows, EpochColumns, RowRecord};
use crate::sampling::philox::NumpyPhilox;
use crate::sampling::pool::{copy_pool, PoolSource, PoolTarget, TokenType};
use crate::tokenize::{DtypeChoice, TokenizeOptions};
use crate::train::{TokenizerKind, TrainOptions, Trainer, DEFAULT_SPECIAL_TOKENS, SPLIT_REGEX};

/// mimalloc for everything the extension allocates: the HF encoder and the readers allocate
/// per text, and glibc's malloc costs them a third of their speed (see Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn to_py_err(py: Python<'_>, error: Error) -> PyErr {
    // The kind -> exception class map is written once, in Python (`errors.error_class`).
    let message = error.to_string();
    match py
        .import("data_io.errors")
        .and_then(|m| m.call_method1("error_class", (error.kind().name(),)))
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

/// The options of `tokenize`, `tokenize_unit` and `tokenize_stale`, as the facade sends them
/// (`data_io/tokenize.py`): one JSON object, so that the three entry points cannot drift.
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

/// `work` without the GIL, on a thread of its own, while this thread asks Python for
/// signals every tenth of a second: on Ctrl-C (or any signal handler that raises) the work is
/// asked to stop (`interrupt`), awaited, and the handler's exception (`KeyboardInterrupt`)
/// raised in place of its result. A short call costs one thread start; none waits the tenth.
fn interruptible<T: Send>(
    py: Python<'_>,
    work: impl FnOnce() -> Result<T, Error> + Send,
) -> PyResult<T> {
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;
    let finished = (Mutex::new(false), Condvar::new());
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            // Said done however the work ends (a panic too), so the waiting below stops.
            struct Done<'a>(&'a (Mutex<bool>, Condvar));
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    *self.0 .0.lock().unwrap_or_else(|e| e.into_inner()) = true;
                    self.0 .1.notify_all();
                }
            }
            let _done = Done(&finished);
            work()
        });
        let wait = || {
            let (lock, signal) = &finished;
            let done = lock.lock().unwrap_or_else(|e| e.into_inner());
            let (done, _) = signal
                .wait_timeout_while(done, Duration::from_millis(100), |done| !*done)
                .unwrap_or_else(|e| e.into_inner());
            *done
        };
        let outcome = loop {
            if py.detach(wait) {
                break Ok(());
            }
            if let Err(signal) = py.check_signals() {
                break Err(signal);
            }
        };
        if outcome.is_err() {
            crate::interrupt::set(true);
        }
        let result = py.detach(|| worker.join());
        crate::interrupt::set(false);
        outcome?;
        match result {
            Ok(result) => result.map_err(|e| to_py_err(py, e)),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
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
/// folder; returns the part's report as JSON.
#[pyfunction]
fn tokenize_unit(py: Python<'_>, options: &str, unit: &str) -> PyResult<String> {
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
        index: unit.index,
        count: unit.count,
        part_dir: unit.part_dir,
    };
    run_tokenize(py, options, |options| {
        crate::tokenize::parts::tokenize_unit(options, &unit)
    })
}

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

/// numpy's `Philox` state (its `.state` fields), advanced by the sampler's shuffles.
#[pyclass(module = "data_io._core", name = "Philox")]
struct Philox {
    inner: NumpyPhilox,
}

/// The fields of numpy's `Philox.state`: counter, key, buffer, buffer_pos, has_uint32, uinteger.
type PhiloxState = ([u64; 4], [u64; 2], [u64; 4], usize, bool, u32);

#[pymethods]
impl Philox {
    #[new]
    fn new(state: PhiloxState) -> PyResult<Self> {
        let (counter, key, buffer, buffer_pos, has_uint32, uinteger) = state;
        if buffer_pos > buffer.len() {
            return Err(PyValueError::new_err(format!(
                "Philox buffer_pos must be at most 4, not {buffer_pos}"
            )));
        }
        Ok(Self {
            inner: NumpyPhilox {
                counter,
                key,
                buffer,
                buffer_pos,
                has_uint32,
                uinteger,
            },
        })
    }

    fn state(&self) -> PhiloxState {
        let rng = &self.inner;
        (
            rng.counter,
            rng.key,
            rng.buffer,
            rng.buffer_pos,
            rng.has_uint32,
            rng.uinteger,
        )
    }

    /// Shuffle a 1-D int64 array in place, as `Generator.shuffle` would.
    fn shuffle(&mut self, py: Python<'_>, mut array: PyReadwriteArray1<'_, i64>) -> PyResult<()> {
        let data = array
            .as_slice_mut()
            .map_err(|e| PyValueError::new_err(format!("shuffle needs a contiguous array: {e}")))?;
        let rng = &mut self.inner;
        py.detach(|| rng.shuffle(data));
        Ok(())
    }
}

/// Gather an epoch's four columns from the `(rows, 4)` table by row id.
#[pyfunction]
fn gather_epoch(
    py: Python<'_>,
    table: PyReadonlyArray2<'_, i64>,
    row_ids: PyReadonlyArray1<'_, i64>,
    mut inst_start: PyReadwriteArray1<'_, i64>,
    mut inst_len: PyReadwriteArray1<'_, i64>,
    mut resp_start: PyReadwriteArray1<'_, i64>,
    mut resp_len: PyReadwriteArray1<'_, i64>,
) -> PyResult<()> {
    let contiguous = |e: numpy::NotContiguousError| {
        PyValueError::new_err(format!("gather_epoch needs contiguous arrays: {e}"))
    };
    if table.shape().get(1) != Some(&4) {
        return Err(PyValueError::new_err(format!(
            "gather_epoch needs a (rows, 4) table, not {:?}",
            table.shape()
        )));
    }
    let table: &[RowRecord] = bytemuck::cast_slice(table.as_slice().map_err(contiguous)?);
    let row_ids = row_ids.as_slice().map_err(contiguous)?;
    let out = EpochColumns {
        inst_start: inst_start.as_slice_mut().map_err(contiguous)?,
        inst_len: inst_len.as_slice_mut().map_err(contiguous)?,
        resp_start: resp_start.as_slice_mut().map_err(contiguous)?,
        resp_len: resp_len.as_slice_mut().map_err(contiguous)?,
    };
    py.detach(|| gather_rows(table, row_ids, out))
        .map_err(|e| to_py_err(py, e))
}

/// One source of the token pool: task, path, numpy dtype string, data offset (bytes),
/// length and pool offset (tokens).
type PoolSourceArgs = (String, PathBuf, String, u64, u64, u64);

/// Copy every task's tokens into the pool file (created with its header and size).
/// `progress(tokens)` is called now and then; a false return cancels the copy. Ids at or
/// above `vocab_size` (when given) are refused like ids the pool's dtype cannot hold.
#[pyfunction]
#[pyo3(signature = (path, header_len, token_dtype, sources, *, readers, progress,
                    vocab_size = None))]
#[allow(clippy::too_many_arguments)]
fn copy_token_pool(
    py: Python<'_>,
    path: PathBuf,
    header_len: u64,
    token_dtype: &str,
    sources: Vec<PoolSourceArgs>,
    readers: usize,
    progress: Py<PyAny>,
    vocab_size: Option<u64>,
) -> PyResult<()> {
    let parsed = (|| -> Result<(PoolTarget, Vec<PoolSource>), Error> {
        let target = PoolTarget {
            path,
            header_len,
            token_type: TokenType::from_numpy(token_dtype)?,
            vocab_size,
        };
        let sources = sources
            .into_iter()
            .map(|(task, path, dtype, data_offset, length, pool_offset)| {
                Ok(PoolSource {
                    task,
                    path,
                    token_type: TokenType::from_numpy(&dtype)?,
                    data_offset,
                    length,
                    pool_offset,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok((target, sources))
    })();
    let (target, sources) = parsed.map_err(|e| to_py_err(py, e))?;
    // Called from the reader threads, without the GIL: take it just for the call. A
    // callback that raises cancels the copy like one that returns False.
    let report = |tokens: u64| {
        Python::attach(|py| {
            progress
                .call1(py, (tokens,))
                .and_then(|keep_going| keep_going.bind(py).is_truthy())
                .unwrap_or(false)
        })
    };
    py.detach(|| copy_pool(&sources, &target, readers, &report))
        .map_err(|e| to_py_err(py, e))
}

/// `encode_batch`'s result: the ids (uint32) and the per-text offsets (int64).
type IdsAndOffsets<'py> = (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<i64>>);

/// A tokenizers JSON file, for encoding text on the fly (the HF text datasets of the load stage).
/// Special-token strings inside a text are encoded as plain text, as in `tokenize`.
#[pyclass(module = "data_io._core", name = "Encoder", frozen)]
struct Encoder {
    inner: std::sync::Arc<TextEncoderImpl>,
}

#[pymethods]
impl Encoder {
    /// `tables`: where the fast encoder keeps its piece tables, "process" or "node" (one copy
    /// for every process on the node); "" reads `DATA_IO_ENCODER_TABLES`.
    #[new]
    #[pyo3(signature = (tokenizer_path, tables = ""))]
    fn new(py: Python<'_>, tokenizer_path: PathBuf, tables: &str) -> PyResult<Self> {
        // Shared with `tokenize` in this process (see `Encoder::shared`); loads without the GIL.
        let inner = py
            .detach(|| TextEncoderImpl::shared_with(&tokenizer_path, tables))
            .map_err(|e| to_py_err(py, e))?
            .0;
        // The parsing freed above stays in mimalloc's pages until this thread allocates again
        // (a DataLoader worker's RSS then counts it): give it back now.
        crate::table_memory::release_freed();
        Ok(Self { inner })
    }

    /// Where the fast encoder's piece tables are: "process", "node (<file>)", or
    /// "process (node tables unavailable: <why>)"; None for the other engines.
    #[getter]
    fn tables(&self) -> Option<&str> {
        self.inner.tables()
    }

    /// What the fast encoder's load cache did: "read <file>", "written <file>", "not kept
    /// (<file>: <why>)" or "off"; None for the other engines.
    #[getter]
    fn load_cache(&self) -> Option<&str> {
        self.inner.load_cache()
    }

    /// Which engine encodes: "fast-bpe" or "hf-tokenizers" (see `fallback_reason`).
    #[getter]
    fn engine(&self) -> &'static str {
        self.inner.engine()
    }

    /// Why the HF encoder runs instead of the fast one (e.g. "normalizer NFKC"), or None.
    #[getter]
    fn fallback_reason(&self) -> Option<&str> {
        self.inner.fallback_reason()
    }

    /// Vocabulary size including added tokens; every id is below it.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    /// The id of `token` (e.g. "<|endoftext|>"), or None when the vocabulary lacks it.
    fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_id(token)
    }

    /// `encode_batch` of texts laid out as Arrow lays out a string array: text `i` is
    /// `data[offsets[i]..offsets[i + 1]]` (UTF-8). Nothing is copied: `data` is read where it
    /// is (a pyarrow buffer, through numpy), checked once for UTF-8 and at each text's bounds.
    #[pyo3(signature = (data, offsets, eos_id = None))]
    fn encode_utf8<'py>(
        &self,
        py: Python<'py>,
        data: PyReadonlyArray1<'py, u8>,
        offsets: PyReadonlyArray1<'py, i64>,
        eos_id: Option<u32>,
    ) -> PyResult<IdsAndOffsets<'py>> {
        let (data, offsets) = (data.as_slice()?, offsets.as_slice()?);
        self.encode_views(py, eos_id, || crate::encoder::utf8_views(data, offsets))
    }

    /// `encode_batch` of the documents `data[starts[i]..ends[i]]` of one UTF-8 buffer (read
    /// in place, checked once): a buffer of newline- or NUL-separated documents.
    #[pyo3(signature = (data, starts, ends, eos_id = None))]
    fn encode_spans<'py>(
        &self,
        py: Python<'py>,
        data: PyReadonlyArray1<'py, u8>,
        starts: PyReadonlyArray1<'py, i64>,
        ends: PyReadonlyArray1<'py, i64>,
        eos_id: Option<u32>,
    ) -> PyResult<IdsAndOffsets<'py>> {
        let (data, starts, ends) = (data.as_slice()?, starts.as_slice()?, ends.as_slice()?);
        self.encode_views(py, eos_id, || {
            crate::encoder::utf8_spans(data, starts, ends)
        })
    }

    /// `encode_batch` of texts given as `bytes` (UTF-8), each read in place and checked.
    #[pyo3(signature = (texts, eos_id = None))]
    fn encode_bytes<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        eos_id: Option<u32>,
    ) -> PyResult<IdsAndOffsets<'py>> {
        // `held` keeps a reference to each (immutable) bytes object while the GIL is released.
        let held = Items::of(texts)?.all::<PyBytes>("bytes")?;
        let raw: Vec<&[u8]> = held.iter().map(|t| t.as_bytes()).collect();
        self.encode_views(py, eos_id, || crate::encoder::utf8_texts(&raw))
    }

    /// The ids of all `texts` back to back (uint32), `eos_id` after each text when given, and
    /// the `len(texts) + 1` offsets (int64) where each text's ids start.
    #[pyo3(signature = (texts, eos_id = None))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        eos_id: Option<u32>,
    ) -> PyResult<IdsAndOffsets<'py>> {
        // The texts' own UTF-8, not copies: a str that is ASCII is its UTF-8 already, any other
        // keeps the UTF-8 that `to_str` makes (cached on the object, made once, with the GIL:
        // text by text, while the helpers encode the chunks before). `held` keeps a reference
        // to each string until the batch is done.
        keep_freed_memory_a_while();
        let items = Items::of(texts)?;
        let held = HeldStrings::default();
        let batch = crate::encoder::encode_batch_pipelined(
            &*self.inner,
            items.len(),
            eos_id,
            |i| {
                let string = items.get::<PyString>(i, "str").map_err(ViewError::Python)?;
                held.view(string).map_err(ViewError::Python)
            },
            &Detached(py),
        )
        .map_err(|e| match e {
            ViewError::Python(e) => e,
            ViewError::Encoder(e) => to_py_err(py, e),
        })?;
        Ok((batch.ids.into_pyarray(py), batch.offsets.into_pyarray(py)))
    }
}

/// How many items of a list ahead of the one being taken `Items::get` asks the cache for.
const ITEMS_AHEAD: usize = 16;

/// The texts of a batch: a list, walked by hand, or any other sequence (a list's subclass too,
/// which may iterate otherwise), taken whole first by iterating it.
///
/// Why a list is walked by hand: each text is an object of its own, wherever the allocator put
/// it, and the first read of each missed the cache, once for its header and once for the line
/// after it (a str's UTF-8 pointer, or its first characters). Both lines of the objects a few
/// places ahead are asked for while one is taken: a warm one-thread pass of the race's main
/// slice (599,122 texts) spent 0.089-0.095 s a pass on the list without encoding
/// (`DATA_IO_ENCODER=null`), 0.063-0.066 s so; Arrow's buffers take 0.045.
enum Items<'py> {
    /// The list and its length (it cannot change: the GIL is held while the texts are taken).
    List(Bound<'py, pyo3::types::PyList>, usize),
    Other(Vec<Bound<'py, PyAny>>),
}

impl<'py> Items<'py> {
    fn of(texts: &Bound<'py, PyAny>) -> PyResult<Self> {
        Ok(match texts.cast_exact::<pyo3::types::PyList>() {
            Ok(list) => Items::List(list.clone(), list.len()),
            Err(_) => Items::Other(texts.extract()?),
        })
    }

    fn len(&self) -> usize {
        match self {
            Items::List(_, len) => *len,
            Items::Other(items) => items.len(),
        }
    }

    /// Text `i` as a `T` (a new reference), or a `TypeError` naming it (`kind`: what the
    /// batch takes). Taken in order, a list's items ahead are prefetched.
    fn get<T: pyo3::type_object::PyTypeCheck>(
        &self,
        i: usize,
        kind: &str,
    ) -> PyResult<Bound<'py, T>> {
        let item = match self {
            Items::Other(items) => items
                .get(i)
                .cloned()
                .ok_or_else(|| PyValueError::new_err(format!("no text {i} in the batch")))?,
            Items::List(list, len) => {
                #[cfg(target_arch = "x86_64")]
                if i + ITEMS_AHEAD < *len {
                    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                    // SAFETY: a borrowed pointer to an item of a list we hold, the index in
                    // range, used only as an address to prefetch (which reads nothing and
                    // cannot fault).
                    unsafe {
                        let ahead =
                            pyo3::ffi::PyList_GetItem(list.as_ptr(), (i + ITEMS_AHEAD) as isize);
                        _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                        _mm_prefetch::<_MM_HINT_T0>(ahead.cast::<u8>().wrapping_add(64).cast());
                    }
                }
                list.get_item(i)?
            }
        };
        item.cast_into::<T>().map_err(|e| {
            let found = e
                .into_inner()
                .get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |name| name.to_string());
            pyo3::exceptions::PyTypeError::new_err(format!(
                "text {i} of the batch has type {found}, not {kind}; a batch is all str, all \
                 bytes, or a pyarrow string array"
            ))
        })
    }

    /// Every text as a `T`, in order.
    fn all<T: pyo3::type_object::PyTypeCheck>(&self, kind: &str) -> PyResult<Vec<Bound<'py, T>>> {
        (0..self.len()).map(|i| self.get(i, kind)).collect()
    }
}

/// The UTF-8 of every str of `texts`, in one pass, each string held by `held`.
fn str_views<'h, 'py>(
    texts: &Bound<'py, PyAny>,
    held: &'h HeldStrings<'py>,
) -> PyResult<Vec<&'h str>> {
    let items = Items::of(texts)?;
    (0..items.len())
        .map(|i| held.view(items.get(i, "str")?))
        .collect()
}

/// Python strings held for one call, and their UTF-8 lent for as long as they are held.
#[derive(Default)]
struct HeldStrings<'py>(std::cell::RefCell<Vec<Bound<'py, PyString>>>);

impl<'py> HeldStrings<'py> {
    /// `string`'s UTF-8 (made by CPython the first time when it is not ASCII), `string` held.
    fn view(&self, string: Bound<'py, PyString>) -> PyResult<&str> {
        let text: *const str = string.to_str()?;
        self.0.borrow_mut().push(string);
        // SAFETY: the UTF-8 belongs to the str object (its characters when ASCII, else the
        // UTF-8 CPython made and keeps with it until the object is freed); a str never changes
        // or moves, and `self` holds a reference to it for as long as the view is borrowed.
        Ok(unsafe { &*text })
    }
}

/// The error of a pipelined batch: a text's view (a Python error, raised as it is) or the
/// encoder's.
enum ViewError {
    Python(PyErr),
    Encoder(crate::error::Error),
}

impl From<crate::error::Error> for ViewError {
    fn from(error: crate::error::Error) -> Self {
        ViewError::Encoder(error)
    }
}

/// The waits of a pipelined batch, with the GIL released.
struct Detached<'py>(Python<'py>);

impl crate::encoder::Release for Detached<'_> {
    fn run<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        self.0.detach(work)
    }
}

impl Encoder {
    /// Make the texts with `views` (checks included) and encode them, both without the GIL;
    /// the ids and offsets go to Python as arrays, not copied.
    fn encode_views<'py, 'a>(
        &self,
        py: Python<'py>,
        eos_id: Option<u32>,
        views: impl FnOnce() -> crate::error::Result<Vec<&'a str>> + Send,
    ) -> PyResult<IdsAndOffsets<'py>> {
        keep_freed_memory_a_while();
        let inner = &*self.inner;
        let batch = py
            .detach(|| encode_texts(inner, &views()?, eos_id))
            .map_err(|e| to_py_err(py, e))?;
        Ok((batch.ids.into_pyarray(py), batch.offsets.into_pyarray(py)))
    }
}

/// The counts of `prepare_batch`, by name.
type CleanCounts = std::collections::BTreeMap<&'static str, u64>;

/// `prepare`'s 128-bit BLAKE2b of each text's UTF-8 (`hashlib.blake2b(digest_size=16)`), as
/// `(len(texts), 2)` uint64: the digest's halves read big-endian.
#[pyfunction]
fn hash_texts<'py>(
    py: Python<'py>,
    texts: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyArray2<u64>>> {
    let held = HeldStrings::default();
    let views = str_views(texts, &held)?;
    let pool = crate::encoder::process_pool().map_err(|e| to_py_err(py, e))?;
    let hashes = py.detach(|| pool.install(|| crate::prepare::hash::hash_all(&views)));
    let rows = hashes.len();
    flat_pairs(py, hashes).reshape([rows, 2])
}

/// 128-bit values as (high, low) pairs, handed to numpy as one flat uint64 array in place.
fn flat_pairs(py: Python<'_>, pairs: Vec<[u64; 2]>) -> Bound<'_, PyArray1<u64>> {
    bytemuck::allocation::cast_vec::<[u64; 2], u64>(pairs).into_pyarray(py)
}

/// `prepare`'s documents read and not yet prepared (`rust/prepare/split.rs`): pieces of raw
/// text go in as they are read, batches of finished documents come out (`take`).
#[pyclass(module = "data_io._core", name = "RawDocuments")]
#[derive(Default)]
struct RawDocuments {
    inner: crate::prepare::split::Documents,
    /// A file being read straight into `inner` (`open_file`, `read_file`).
    file: Option<crate::prepare::file::FileFeed>,
    /// Bytes of that file read so far, before decompression.
    file_bytes_read: u64,
}

#[pymethods]
impl RawDocuments {
    /// `reserve`: bytes each batch's buffer starts with room for.
    #[new]
    #[pyo3(signature = (reserve = 0))]
    fn new(reserve: usize) -> Self {
        Self {
            inner: crate::prepare::split::Documents::with_reserve(reserve),
            file: None,
            file_bytes_read: 0,
        }
    }

    /// Start a source: `format` is "blocks", "lines", "jsonl" or "texts"; `compressed` says
    /// that byte offsets are in its decompressed text; `first_line`: the number of the first
    /// line fed (where a byte range of the file starts).
    #[pyo3(signature = (name, format, compressed, first_line = 1))]
    fn begin_source(
        &mut self,
        name: String,
        format: &str,
        compressed: bool,
        first_line: u64,
    ) -> PyResult<()> {
        use crate::prepare::split::{Format, SourceInfo};
        let format = match format {
            "blocks" => Format::Blocks,
            "lines" => Format::Lines,
            "jsonl" => Format::Jsonl,
            "texts" => Format::Texts,
            other => return Err(PyValueError::new_err(format!("unknown format {other:?}"))),
        };
        self.inner.begin_source(SourceInfo {
            name,
            format,
            compressed,
            first_line,
            origin: None,
        });
        Ok(())
    }

    /// Read the current source from the file `path` (bytes `start..end` of its text; `end`
    /// None: to its end) with `read_file`, instead of feeding it. `compression`: None, "gz",
    /// "zst", "bz2" or "xz"; in a compressed file `start` and `end` are targets, the range
    /// running between the cuts for them (`prepare/cuts.rs`).
    /// `parts`: `start` and `end` are file offsets of two of its parts (`reader/frames`), the
    /// range running between the first document boundaries in their texts. A file of several
    /// parts is decompressed by `lanes` threads (None: as many as the encoder's pool has, when
    /// one decoding thread would hold them back: `frames::lanes_for`).
    #[pyo3(signature = (path, start = 0, end = None, compression = None, parts = false,
        lanes = None))]
    #[allow(clippy::too_many_arguments)]
    fn open_file(
        &mut self,
        py: Python<'_>,
        path: PathBuf,
        start: u64,
        end: Option<u64>,
        compression: Option<&str>,
        parts: bool,
        lanes: Option<usize>,
    ) -> PyResult<()> {
        use crate::prepare::file::FileFeed;
        let compression = compression_named(compression)?;
        let lanes = match lanes {
            Some(lanes) => lanes,
            None => crate::reader::frames::lanes_for(
                compression,
                crate::encoder::process_pool()
                    .map_err(|e| to_py_err(py, e))?
                    .current_num_threads(),
            ),
        };
        let format = self.inner.format();
        let feed = py
            .detach(|| match parts {
                // Only the range's own parts are walked (`frames::parts_in`).
                true => crate::reader::frames::parts_in(&path, compression, start, end)
                    .and_then(|parts| FileFeed::open_parts(path, parts, start, end, format, lanes)),
                false => FileFeed::open_compressed(path, compression, start, end, format, lanes),
            })
            .map_err(|e| to_py_err(py, e))?;
        self.inner.set_origin(feed.origin().cloned());
        self.file_bytes_read = 0;
        self.file = Some(feed);
        Ok(())
    }

    /// Read about `limit` more bytes of the open file's text and cut its whole lines into
    /// documents, without the GIL; how many bytes of text were read (0: the file is done, its
    /// last line cut).
    fn read_file(&mut self, py: Python<'_>, limit: usize) -> PyResult<usize> {
        let Some(feed) = self.file.as_mut() else {
            return Err(PyValueError::new_err("read_file before open_file"));
        };
        let docs = &mut self.inner;
        let read = py.detach(|| feed.read(docs, limit));
        self.file_bytes_read = feed.file_bytes_read();
        let read = read.map_err(|e| to_py_err(py, e))?;
        if read == 0 {
            self.file = None;
        }
        Ok(read)
    }

    /// Bytes of the open (or last) file read so far, before decompression: its progress.
    #[getter]
    fn file_bytes_read(&self) -> u64 {
        self.file_bytes_read
    }

    /// Documents given whole as Arrow lays out a string array (text `i` is
    /// `data[offsets[i]..offsets[i + 1]]`, UTF-8), the first being row `first_row`: read where
    /// they are (a pyarrow buffer, through numpy), checked once, copied into the batch. An
    /// error (bad offsets, invalid UTF-8) feeds nothing.
    fn feed_utf8(
        &mut self,
        py: Python<'_>,
        data: PyReadonlyArray1<'_, u8>,
        offsets: PyReadonlyArray1<'_, i64>,
        first_row: u64,
    ) -> PyResult<()> {
        let (data, offsets) = (data.as_slice()?, offsets.as_slice()?);
        let views = crate::encoder::utf8_views(data, offsets).map_err(|e| to_py_err(py, e))?;
        self.inner.feed_texts(&views, first_row);
        Ok(())
    }

    /// Documents given whole ("texts" sources), the first being row `first_row`.
    fn feed_texts(&mut self, texts: &Bound<'_, PyAny>, first_row: u64) -> PyResult<()> {
        let held = HeldStrings::default();
        let views = str_views(texts, &held)?;
        self.inner.feed_texts(&views, first_row);
        Ok(())
    }

    /// End the current source; its number of documents.
    fn end_source(&mut self) -> u64 {
        self.inner.end_source()
    }

    /// Bytes of the finished documents, which `take` hands over.
    #[getter]
    fn ready_bytes(&self) -> usize {
        self.inner.ready_bytes()
    }

    /// The finished documents, as a batch for `prepare_batch`.
    fn take(&mut self) -> Self {
        Self {
            inner: self.inner.take(),
            file: None,
            file_bytes_read: 0,
        }
    }

    fn __len__(&self) -> usize {
        self.inner.entries.len()
    }
}

/// An error of `prepare_batch`: the crate's, or the one Python raised reading a row.
enum BatchError {
    Core(Error),
    Python(PyErr),
}

impl From<Error> for BatchError {
    fn from(error: Error) -> Self {
        BatchError::Core(error)
    }
}

/// What `prepare_batch` gives back: ids and offsets (with an encoder) or the kept texts
/// (without), the hashes of the kept documents, the counts by name, (with `near`) the kept
/// documents' bands as (documents, bands, 2), and (with `lines`) their `LineArrays`.
type PreparedBatch<'py> = (
    Option<IdsAndOffsets<'py>>,
    Option<Vec<Bound<'py, PyString>>>,
    Bound<'py, PyArray2<u64>>,
    CleanCounts,
    Option<Bound<'py, numpy::PyArray3<u64>>>,
    Option<LineArrays<'py>>,
);

/// A `LineBatch` (`rust/prepare/lines.rs`) as arrays: the documents' UTF-8 text back to back,
/// their byte offsets, the hashes of their lines that are not blank, and how many each has.
type LineArrays<'py> = (
    Bound<'py, PyArray1<u8>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray2<u64>>,
    Bound<'py, PyArray1<i64>>,
);

/// `prepare`'s work on a batch (`rust/prepare/batch.rs`), without the GIL: read, clean and
/// hash every document, then encode the kept ones when `encoder` is given. `resolve(line,
/// source, number)` gives the text of a JSONL row only Python reads (or raises its error).
/// `near`: (n-gram, bands, rows, seed) of `--dedup near` (`rust/prepare/near.rs`). `lines`
/// (`--dedup line`): no encoding, the kept documents' `LineArrays` instead (the lines kept
/// decide what is encoded, by `keep_lines`). `seen`: exact duplicates decided here, before
/// encoding (a duplicate is never encoded): the counts' `duplicates`, or `dedup_overflow` 1
/// (nothing recorded, nothing encoded) when the batch's hashes would not fit its budget.
/// `keep_empty`: a document that is empty or only whitespace is kept (reading alone).
/// The compression a source's suffix names: None, "gz", "zst", "bz2" or "xz".
fn compression_named(name: Option<&str>) -> PyResult<crate::reader::Compression> {
    use crate::reader::Compression;
    Ok(match name {
        None => Compression::None,
        Some("gz") => Compression::Gzip,
        Some("zst") => Compression::Zstd,
        Some("bz2") => Compression::Bzip2,
        Some("xz") => Compression::Xz,
        Some(other) => {
            return Err(PyValueError::new_err(format!(
                "compression {other:?} is not read here (None, \"gz\", \"zst\", \"bz2\" or \
                 \"xz\")"
            )))
        }
    })
}

/// The file offsets at which `path`, stored with `compression`, can be entered: the starts of
/// its parts that decode on their own (`reader/frames`: zstd frames, BGZF members, xz blocks,
/// bzip2 blocks), the first one 0; `[0]` for a file that is one part. Reads headers and
/// indexes (and searches a bzip2 file for its blocks' magics), decompresses nothing.
#[pyfunction]
fn compressed_parts(
    py: Python<'_>,
    path: PathBuf,
    compression: Option<&str>,
) -> PyResult<Vec<u64>> {
    let compression = compression_named(compression)?;
    py.detach(|| crate::reader::frames::parts(&path, compression))
        .map(|parts| parts.starts())
        .map_err(|e| to_py_err(py, e))
}

/// An estimate of the length of the text of `path`, stored with `compression`, from its first
/// `sample` bytes of text (the length itself when it is no longer), without the GIL.
#[pyfunction]
fn text_length_estimate(
    py: Python<'_>,
    path: PathBuf,
    compression: Option<&str>,
    sample: u64,
) -> PyResult<u64> {
    let compression = compression_named(compression)?;
    py.detach(|| crate::prepare::file::text_length_estimate(&path, compression, sample))
        .map_err(|e| to_py_err(py, e))
}

#[pyfunction]
#[pyo3(signature = (documents, *, text_field, fail_invalid, normalize, filter, min_line_chars,
    min_doc_chars, resolve, encoder = None, eos_id = None, near = None, lines = false,
    seen = None, keep_empty = false, split = None))]
#[allow(clippy::too_many_arguments)]
fn prepare_batch<'py>(
    py: Python<'py>,
    mut documents: PyRefMut<'py, RawDocuments>,
    text_field: String,
    fail_invalid: bool,
    normalize: bool,
    filter: bool,
    min_line_chars: usize,
    min_doc_chars: usize,
    resolve: Py<PyAny>,
    encoder: Option<PyRef<'py, Encoder>>,
    eos_id: Option<u32>,
    near: Option<(usize, usize, usize, u64)>,
    lines: bool,
    mut seen: Option<PyRefMut<'py, SeenHashes>>,
    keep_empty: bool,
    split: Option<(u64, f64)>,
) -> PyResult<PreparedBatch<'py>> {
    use crate::prepare::batch::prepare;
    use crate::prepare::clean::CleanOptions;
    use crate::prepare::file::text_before;
    use crate::prepare::near::{MinHasher, NearOptions};
    use crate::prepare::rows::ReadOptions;
    use crate::prepare::val_split::ValSplit;

    let hasher = match near {
        Some((ngram, bands, rows, seed)) if ngram >= 1 && bands >= 1 && rows >= 1 => {
            Some(MinHasher::new(NearOptions {
                ngram,
                bands,
                rows,
                seed,
            }))
        }
        Some(other) => {
            return Err(PyValueError::new_err(format!(
                "near-dedup n-gram, bands and rows must be at least 1, got {other:?}"
            )))
        }
        None => None,
    };

    keep_freed_memory_a_while();
    let docs = std::mem::take(&mut documents.inner);
    drop(documents);
    let read = ReadOptions {
        text_field,
        fail_invalid,
    };
    let clean = CleanOptions {
        normalize,
        filter,
        min_line_chars,
        min_doc_chars,
        keep_empty,
    };
    let inner = encoder.as_ref().map(|e| std::sync::Arc::clone(&e.inner));
    let pool = crate::encoder::process_pool().map_err(|e| to_py_err(py, e))?;
    // Moved into the call (the GIL released) and back: one batch at a time uses the set.
    let mut set = seen.as_mut().map(|s| std::mem::take(&mut s.inner));
    let decided_here = set.is_some();
    let (mut duplicates, mut overflow) = (0u64, false);
    let split = split.map(|(seed, fraction)| ValSplit::new(seed, fraction));
    let mut val_documents = None;
    let resolve_row = |line: &str, entry: &crate::prepare::split::Entry| {
        Python::attach(|py| {
            resolve
                .call1(py, (line, entry.source, entry.line))
                .and_then(|text| text.extract::<String>(py))
        })
        .map_err(BatchError::Python)
    };
    let outcome = py.detach(|| {
        pool.install(|| {
            // Decided here, the bands are made by the set's decision (`first_seen_near`: not
            // for a document whose exact twin came earlier); else each kept document's.
            let band_all = if decided_here { None } else { hasher.as_ref() };
            let mut prepared = prepare(&docs, &read, &clean, band_all, resolve_row)?;
            if let Some(set) = set.as_mut() {
                // Near-duplicates by their bands (a document sharing one with an earlier
                // document is one), exact duplicates by their hashes.
                let decided = match &hasher {
                    Some(hasher) => set.first_seen_near(&prepared.kept, &prepared.hashes, hasher),
                    None => set.first_seen(&prepared.hashes),
                };
                match decided {
                    Some(new) => duplicates = prepared.keep_only(&new),
                    None => {
                        overflow = true;
                        prepared.keep_only(&vec![false; prepared.hashes.len()]);
                    }
                }
            }
            let (encoded, lined) = match &inner {
                _ if lines => (None, Some(LineBatch::new(&prepared.kept))),
                Some(encoder) => match &split {
                    // The train documents first, then the val ones, each in order: the shard
                    // writers take the two runs of ids as they are, no mask, no copy.
                    Some(split) => {
                        let mut ordered = Vec::with_capacity(prepared.kept.len());
                        let mut val = Vec::new();
                        for (text, hash) in prepared.kept.iter().zip(&prepared.hashes) {
                            if split.is_val(*hash) {
                                val.push(text.as_ref());
                            } else {
                                ordered.push(text.as_ref());
                            }
                        }
                        val_documents = Some(val.len() as u64);
                        ordered.extend(val);
                        (Some(encode_texts(&**encoder, &ordered, eos_id)?), None)
                    }
                    None => (
                        Some(encode_texts(&**encoder, &prepared.kept, eos_id)?),
                        None,
                    ),
                },
                None => (None, None),
            };
            Ok::<_, BatchError>((prepared, encoded, lined))
        })
    });
    if let (Some(seen), Some(set)) = (seen.as_mut(), set) {
        seen.inner = set;
    }
    let (prepared, encoded, lined) = match outcome {
        Ok(done) => done,
        Err(error) => {
            // A range of parts counts lines from its first part: the error is made again
            // with the file's lines and offsets.
            let mut docs = docs;
            let again = py.detach(|| {
                let lanes = pool.current_num_threads();
                let rebased = docs.rebase(|origin| text_before(origin, lanes))?;
                Ok::<_, BatchError>(match rebased {
                    true => prepare(&docs, &read, &clean, None, resolve_row).err(),
                    false => None,
                })
            });
            // (When the text before cannot be counted, the first error stands.)
            let error = match again {
                Ok(Some(again)) => again,
                Ok(None) | Err(_) => error,
            };
            return Err(match error {
                BatchError::Core(error) => to_py_err(py, error),
                BatchError::Python(error) => error,
            });
        }
    };
    let ids = encoded.map(|batch| (batch.ids.into_pyarray(py), batch.offsets.into_pyarray(py)));
    let texts = match (&ids, &lined) {
        (None, None) => Some(prepared.kept.iter().map(|t| PyString::new(py, t)).collect()),
        _ => None,
    };
    let lined = match lined {
        Some(batch) => Some(line_arrays(py, batch)?),
        None => None,
    };
    let rows = prepared.hashes.len();
    let hashes = flat_pairs(py, prepared.hashes).reshape([rows, 2])?;
    // Bands decided here are not handed back: nothing after needs them.
    let bands = match near {
        Some((_, bands, _, _)) if !decided_here => {
            Some(flat_pairs(py, prepared.bands).reshape([rows, bands, 2])?)
        }
        _ => None,
    };
    let (r, c) = (prepared.read, prepared.clean);
    let counts = [
        ("documents", r.documents),
        ("text_chars", r.text_chars),
        ("invalid_utf8_lines", r.invalid_utf8_lines),
        ("unicode_normalized", c.unicode_normalized),
        ("whitespace_cleaned", c.whitespace_cleaned),
        ("controls_removed", c.controls_removed),
        ("short_lines_dropped", c.short_lines_dropped),
        ("too_short", c.dropped_too_short),
        ("empty", c.dropped_empty),
        ("duplicates", duplicates),
        ("dedup_overflow", u64::from(overflow)),
    ]
    .into_iter()
    .chain(val_documents.map(|count| ("val_documents", count)))
    .collect();
    drop(prepared.kept);
    docs.recycle(); // its buffer goes to the reader's next batch
    Ok((ids, texts, hashes, counts, bands, lined))
}

fn line_arrays(py: Python<'_>, batch: LineBatch) -> PyResult<LineArrays<'_>> {
    let lines = batch.hashes.len();
    let hashes = flat_pairs(py, batch.hashes).reshape([lines, 2])?;
    Ok((
        batch.text.into_pyarray(py),
        batch.offsets.into_pyarray(py),
        hashes,
        batch.line_counts.into_pyarray(py),
    ))
}

/// `--dedup line`'s second step (`rust/prepare/lines.rs`), without the GIL: every document of
/// a `LineArrays` batch rebuilt from the verdicts `keep` on its lines, then the ones left with
/// a line encoded when `encoder` is given. Which documents are left, and their `(ids,
/// offsets)` or, without an encoder, their texts.
#[pyfunction]
#[pyo3(signature = (text, offsets, line_counts, keep, *, encoder = None, eos_id = None))]
#[allow(clippy::type_complexity)]
fn keep_lines<'py>(
    py: Python<'py>,
    text: PyReadonlyArray1<'py, u8>,
    offsets: PyReadonlyArray1<'py, i64>,
    line_counts: PyReadonlyArray1<'py, i64>,
    keep: PyReadonlyArray1<'py, bool>,
    encoder: Option<PyRef<'py, Encoder>>,
    eos_id: Option<u32>,
) -> PyResult<(
    Bound<'py, PyArray1<bool>>,
    Option<IdsAndOffsets<'py>>,
    Option<Vec<Bound<'py, PyString>>>,
)> {
    use crate::prepare::lines::keep_all;
    let contiguous = |_| PyValueError::new_err("keep_lines takes contiguous arrays");
    let text = text.as_slice().map_err(contiguous)?;
    let offsets = offsets.as_slice().map_err(contiguous)?;
    let line_counts = line_counts.as_slice().map_err(contiguous)?;
    let keep = keep.as_slice().map_err(contiguous)?;
    let inner = encoder.as_ref().map(|e| std::sync::Arc::clone(&e.inner));
    let pool = crate::encoder::process_pool().map_err(|e| to_py_err(py, e))?;
    let outcome = py.detach(|| {
        pool.install(|| {
            let rebuilt = keep_all(text, offsets, line_counts, keep)?;
            let left: Vec<bool> = rebuilt.iter().map(Option::is_some).collect();
            let kept: Vec<_> = rebuilt.into_iter().flatten().collect();
            let encoded = match &inner {
                Some(encoder) => Some(encode_texts(&**encoder, &kept, eos_id)?),
                None => None,
            };
            Ok::<_, Error>((left, kept, encoded))
        })
    });
    let (left, kept, encoded) = outcome.map_err(|e| to_py_err(py, e))?;
    let texts = match encoded {
        Some(_) => None,
        None => Some(kept.iter().map(|t| PyString::new(py, t)).collect()),
    };
    let ids = encoded.map(|batch| (batch.ids.into_pyarray(py), batch.offsets.into_pyarray(py)));
    Ok((left.into_pyarray(py), ids, texts))
}

/// Exact de-duplication decided as documents arrive (`rust/prepare/seen.rs`): every hash seen,
/// within a budget of bytes.
#[pyclass(module = "data_io._core", name = "SeenHashes")]
struct SeenHashes {
    inner: crate::prepare::seen::SeenHashes,
}

#[pymethods]
impl SeenHashes {
    /// `bands`: a set of near-dedup's (band hash, band number) records of that many bands,
    /// which holds the hash alone (half the memory); a record of another band is refused, as
    /// one beyond the budget is. None: 128-bit hashes.
    #[new]
    #[pyo3(signature = (budget, bands=None))]
    fn new(budget: usize, bands: Option<usize>) -> Self {
        Self {
            inner: match bands {
                Some(bands) => crate::prepare::seen::SeenHashes::banded(budget, bands),
                None => crate::prepare::seen::SeenHashes::new(budget),
            },
        }
    }

    /// Record the `(n, 2)` hashes in order: True for each one not seen before; None, and
    /// nothing recorded, when they would not fit the budget.
    fn first_seen<'py>(
        &mut self,
        py: Python<'py>,
        hashes: PyReadonlyArray2<'py, u64>,
    ) -> PyResult<Option<Bound<'py, PyArray1<bool>>>> {
        let pairs: &[[u64; 2]] = bytemuck::try_cast_slice(hashes.as_slice()?)
            .map_err(|_| PyValueError::new_err("hashes must be (n, 2) uint64"))?;
        let pool = crate::encoder::process_pool().map_err(|e| to_py_err(py, e))?;
        let inner = &mut self.inner;
        let new = py.detach(|| pool.install(|| inner.first_seen(pairs)));
        Ok(new.map(|new| new.into_pyarray(py)))
    }

    /// Make room at once for `total` hashes in all, when the budget allows (else nothing);
    /// whether `total` fits. The tables grow on the encoder's threads, the GIL released (a
    /// table of hundreds of MB is made while the next batch is read).
    fn expect(&mut self, py: Python<'_>, total: usize) -> PyResult<bool> {
        let pool = crate::encoder::process_pool().map_err(|e| to_py_err(py, e))?;
        let inner = &mut self.inner;
        Ok(py.detach(|| pool.install(|| inner.expect(total))))
    }

    /// Every hash, sorted, as `(n, 2)` uint64: the kept-hashes file's content.
    fn sorted<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let rows = self.inner.len();
        let pool = crate::encoder::process_pool().map_err(|e| to_py_err(py, e))?;
        let inner = &self.inner;
        let all = py.detach(|| pool.install(|| inner.sorted()));
        flat_pairs(py, all).reshape([rows, 2])
    }

    /// Write every hash, sorted, to `path` (the kept-hashes file's bytes, as `sorted()`'s
    /// `tofile`), without an array of them all; the GIL released.
    fn write_sorted(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        let pool = crate::encoder::process_pool().map_err(|e| to_py_err(py, e))?;
        let inner = &self.inner;
        py.detach(|| {
            let file = std::fs::File::create(&path).ctx("cannot create", &path)?;
            let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
            pool.install(|| inner.write_sorted(&mut out))
                .ctx("cannot write", &path)?;
            std::io::Write::flush(&mut out).ctx("cannot write", &path)
        })
        .map_err(|e| to_py_err(py, e))
    }

    /// Bytes the table holds.
    #[getter]
    fn bytes(&self) -> usize {
        self.inner.bytes()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

/// mimalloc's `mi_option_purge_delay` (its 16th option in v2 and v3's `mimalloc.h`; the
/// crate exports no constant for it).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// mimalloc's `mi_option_allow_thp` (its 44th option in v3's `mimalloc.h`).
const MI_OPTION_ALLOW_THP: std::ffi::c_int = 43;

/// The allocator's heap on ordinary 4 KiB pages; the lookup tables keep their 2 MiB pages
/// (`table_memory.rs` maps and advises them itself). mimalloc advises transparent huge pages
/// for every arena it maps; set before its first arena (the module's first call into Rust),
/// this stops that without turning them off for the process (set at mimalloc's start, the
/// option would, for every library in it). Why: a batch's texts, buffers and ids are read in
/// order, where huge pages buy nothing, and each fault in an advised region zeroes 2 MiB and may
/// first compact memory to find them (`defrag` advises it): `prepare --dedup doc` on one
/// thread 3.98 -> 3.65 CPU seconds (median of 5, 154 MB, Qwen), on two 4.81 -> 3.58; the
/// encoder alone the same within the noise.
fn heap_on_small_pages() {
    // SAFETY: a plain call setting one of the allocator's options.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0) };
}

/// In a process that prepares or encodes batches, freed memory goes back to the system after a
/// second, not 10 ms: each batch frees and allocates again buffers of megabytes, and pages the
/// system had taken back came again zeroed, 2 MiB at a time where huge pages are on
/// (`clear_page` was 8-19% of a prepare profile; measured 47-49 -> 52-55 MB/s on one thread,
/// with MIMALLOC_PURGE_DELAY=2000 set in the environment; `encode_batch` of 4096 texts at two
/// threads, 1000 against 10 ms: 288-293 against 265-271 MB/s). A process that stops encoding
/// holds what it freed a second longer; what it keeps while encoding is the same.
fn keep_freed_memory_a_while() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: a plain call setting one of the allocator's options.
    ONCE.call_once(|| unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 1000) });
}

/// Sort `prepare`'s de-duplication records, rows of (hash high, hash low, document number),
/// in place by all three, on the encoder's threads (`data_io/prepare/dedup.py`).
#[pyfunction]
fn sort_records(py: Python<'_>, mut records: PyReadwriteArray2<'_, u64>) -> PyResult<()> {
    use rayon::slice::ParallelSliceMut;
    if records.shape()[1] != 3 {
        return Err(PyValueError::new_err("records must have 3 columns"));
    }
    let flat = records.as_slice_mut()?;
    let rows: &mut [[u64; 3]] = bytemuck::cast_slice_mut(flat);
    let pool = crate::encoder::process_pool().map_err(|e| to_py_err(py, e))?;
    // Every record's document number differs, so an unstable sort gives one order.
    py.detach(|| pool.install(|| rows.par_sort_unstable()));
    Ok(())
}

/// Let go of the node's piece-table files this process holds (`tables="node"`), removing
/// each one no other process holds; the encoders keep working. Called at a process's exit.
#[pyfunction]
fn leave_node_tables() {
    crate::encoder::fast_bpe::node_tables::leave_all();
}

#[pymodule]
#[pyo3(name = "_core")]
fn core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    heap_on_small_pages();
    m.add_function(wrap_pyfunction!(tokenize, m)?)?;
    m.add_function(wrap_pyfunction!(leave_node_tables, m)?)?;
    m.add_function(wrap_pyfunction!(hash_texts, m)?)?;
    m.add_function(wrap_pyfunction!(prepare_batch, m)?)?;
    m.add_function(wrap_pyfunction!(text_length_estimate, m)?)?;
    m.add_function(wrap_pyfunction!(compressed_parts, m)?)?;
    m.add_function(wrap_pyfunction!(keep_lines, m)?)?;
    m.add_function(wrap_pyfunction!(sort_records, m)?)?;
    m.add_class::<RawDocuments>()?;
    m.add_class::<SeenHashes>()?;
    m.add_function(wrap_pyfunction!(tokenize_stale, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize_task_files, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize_unit, m)?)?;
    m.add_function(wrap_pyfunction!(train_tokenizer, m)?)?;
    m.add_function(wrap_pyfunction!(train_tasks, m)?)?;
    m.add_function(wrap_pyfunction!(train_count_unit, m)?)?;
    m.add_function(wrap_pyfunction!(gather_epoch, m)?)?;
    m.add_function(wrap_pyfunction!(copy_token_pool, m)?)?;
    m.add_class::<Philox>()?;
    m.add_class::<Encoder>()?;
    m.add_class::<SourceCounter>()?;
    m.add("DEFAULT_SPECIAL_TOKENS", DEFAULT_SPECIAL_TOKENS.to_vec())?;
    m.add("SPLIT_REGEX", SPLIT_REGEX)?;
    Ok(())
}
