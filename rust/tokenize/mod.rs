//! `data_io tokenize`: cleaned rows -> one folder of token arrays per source file
//! (formats.md §3), incrementally, crash-safely and on every core.
//!
//! Parallelism is two-level on one rayon pool: files run in parallel (largest first), and the
//! rows of each batch of a file are encoded in parallel and written in source order, so one
//! huge file still uses every core.

pub mod parts;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;

use crate::encoder::{Encoder, TextEncoder};
use crate::error::{Error, ErrorKind, IoContext, Result};
use crate::layout::cache::{self, Decision, Existing, Fingerprint, SourceStat, TaskRecord};
use crate::layout::task_writer::{TaskWriter, TokenDtype};
use crate::layout::{encode_row, EncodedRow, LayoutTokens, Specials};
use crate::progress::{bytes_bar, ByteProgress};
use crate::reader::{task_files, Batch, Inputs, OnError, RowReader};

/// Prefixes of this tool's temporary folders inside the output; hidden, so readers skip them.
const TMP_PREFIX: &str = ".data_io-tmp-";
const OLD_PREFIX: &str = ".data_io-old-";
const LOCK_FILE: &str = ".data_io.lock";
pub const TOKENIZER_INFO: &str = "tokenizer_info.json";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DtypeChoice {
    /// `<u4`, as the original wrote.
    Uint32,
    /// The smallest dtype that holds the vocabulary (uint16 up to 65,536 tokens).
    Auto,
}

#[derive(Debug, Clone)]
pub struct TokenizeOptions {
    pub inputs: Vec<PathBuf>,
    pub output: PathBuf,
    /// A tokenizer JSON file (the Python facade resolves folders and Hub ids).
    pub tokenizer_path: PathBuf,
    pub layout: LayoutTokens,
    pub on_error: OnError,
    /// Worker threads; `None` uses every core.
    pub threads: Option<usize>,
    pub token_dtype: DtypeChoice,
    pub progress: bool,
    pub batch_rows: usize,
    /// Where `scale` units left encoded parts of files (`parts`): a task whose parts
    /// are all there and current is assembled from them instead of encoded.
    pub parts: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Tokenized,
    Unchanged,
    Failed,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    pub task: String,
    pub source: String,
    pub status: Status,
    /// Why the file was (re-)tokenized, or why it failed.
    pub reason: String,
    pub rows: u64,
    pub tokens: u64,
    pub bad_rows: u64,
    pub bad_row_examples: Vec<String>,
    pub warnings: Vec<String>,
    pub bytes: u64,
    pub seconds: f64,
    pub error: Option<String>,
    /// "input", "config", "tokenizer" or "output": picks the Python exception class.
    pub error_kind: Option<&'static str>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TokenizeReport {
    pub output: String,
    pub tokenizer_path: String,
    pub vocab_size: usize,
    pub token_dtype: &'static str,
    pub threads: usize,
    pub seconds: f64,
    pub files: Vec<FileReport>,
    pub removed_orphans: Vec<String>,
    /// Task folders not produced by this run that were kept, each with the reason
    /// (`"name (reason)"`): only a folder whose recorded source is gone is removed.
    pub kept: Vec<String>,
    /// Folders in the output that this tool did not write, with the reason they were kept.
    pub left_alone: Vec<String>,
    /// The input roots of this run, absolute.
    pub inputs: Vec<String>,
    /// Files under the inputs that are not rows (by name), not read.
    pub skipped_files: Vec<String>,
    /// Task folders whose tokenizer or options differ from this run's (`"name (why)"`): the
    /// output mixes two tokenizations until `repair_command` has run successfully.
    pub mixed: Vec<String>,
    /// The command that makes every task match `tokenizer_info.json`, when `mixed` is not empty.
    pub repair_command: Option<String>,
    /// What the output folder holds after the run, over every task folder (kept ones too).
    pub output_tasks: u64,
    pub output_rows: u64,
    pub output_tokens: u64,
    /// The engine that encoded (`encoder::FAST_ENGINE` or `encoder::HF_ENGINE`), and why the
    /// HF one ran when it did.
    pub encoder: &'static str,
    pub encoder_fallback: Option<String>,
}

/// One input file and the folder it becomes.
#[derive(Debug, Clone)]
struct Task {
    name: String,
    source: PathBuf,
    /// The input root the name is relative to.
    root: PathBuf,
    stat: SourceStat,
}

/// Everything the per-file work shares.
pub(crate) struct Context<'a> {
    pub(crate) options: &'a TokenizeOptions,
    pub(crate) encoder: Arc<Encoder>,
    specials: Specials,
    pub(crate) dtype: TokenDtype,
    pub(crate) fingerprint: Fingerprint,
    options_json: serde_json::Value,
}

impl<'a> Context<'a> {
    /// The encoder, the layout's ids, the dtype and the fingerprint for `options` (whose paths
    /// are already absolute).
    pub(crate) fn new(options: &'a TokenizeOptions) -> Result<Self> {
        // The tokenizer file is read once: for the encoder and for the fingerprint.
        let (encoder, tokenizer_blake3) = Encoder::shared_hashed(&options.tokenizer_path)?;
        let specials = Specials::resolve(&*encoder, &options.layout)?;
        let dtype = match options.token_dtype {
            DtypeChoice::Uint32 => TokenDtype::Uint32,
            DtypeChoice::Auto => TokenDtype::smallest_for(encoder.vocab_size()),
        };
        let options_json = serde_json::json!({
            "format_version": cache::FORMAT_VERSION,
            "layout": options.layout,
            "token_dtype": dtype,
        });
        Ok(Context {
            options,
            specials,
            dtype,
            fingerprint: Fingerprint {
                tokenizer_blake3,
                options_blake3: cache::bytes_blake3(options_json.to_string().as_bytes()),
                fail_on_bad_rows: options.on_error == OnError::Fail,
            },
            options_json,
            encoder,
        })
    }
}

pub fn tokenize(options: &TokenizeOptions) -> Result<TokenizeReport> {
    // The encoder's process-wide pool: its threads keep their piece caches between runs.
    let pool = crate::encoder::process_pool_with(options.threads.unwrap_or(0))?;
    pool.install(|| run(options, pool.current_num_threads()))
}

/// A file a run would (re-)tokenize, as `stale_tasks` finds it.
#[derive(Debug, Serialize)]
pub struct StaleTask {
    pub task: String,
    /// Absolute, links resolved: the path units and records name.
    pub source: String,
    pub size: u64,
    pub reason: String,
}

/// The files a run with `options` would (re-)tokenize, largest first, without writing
/// anything: what `scale` cuts into units. A task that cannot be planned is an error here.
pub fn stale_tasks(given: &TokenizeOptions) -> Result<Vec<StaleTask>> {
    let pool = crate::encoder::process_pool_with(given.threads.unwrap_or(0))?;
    pool.install(|| {
        let (inputs, options) = resolve(given)?;
        let ctx = Context::new(&options)?;
        let mut stale = Vec::new();
        for task in discover_tasks(&inputs)? {
            if let (Decision::Stale(reason), _) = plan_task(&ctx, &task, false)? {
                stale.push(StaleTask {
                    task: task.name.clone(),
                    source: task.source.display().to_string(),
                    size: task.stat.size,
                    reason: reason.to_string(),
                });
            }
        }
        stale.sort_by(|a, b| b.size.cmp(&a.size).then(a.task.cmp(&b.task)));
        Ok(stale)
    })
}

/// The input files, and `given` with absolute paths (records and tokenizer_info.json name
/// absolute paths, valid from any working folder); the output must lie outside the inputs.
fn resolve(given: &TokenizeOptions) -> Result<(Inputs, TokenizeOptions)> {
    let inputs = task_files(&given.inputs)?;
    let output = absolute_path(&given.output)?;
    check_output_outside_inputs(&output, &inputs.roots)?;
    let options = TokenizeOptions {
        inputs: inputs.roots.clone(),
        output,
        tokenizer_path: canonical_tokenizer(&given.tokenizer_path)?,
        ..given.clone()
    };
    Ok((inputs, options))
}

/// The tokenizer file's absolute path, links resolved (what records and fingerprints name).
pub(crate) fn canonical_tokenizer(path: &Path) -> Result<PathBuf> {
    fs::canonicalize(path)
        .map_err(|e| Error::Tokenizer(format!("cannot open tokenizer {}: {e}", path.display())))
}

fn run(given: &TokenizeOptions, threads: usize) -> Result<TokenizeReport> {
    let started = Instant::now();
    // Before anything is created or deleted: which files, and is the output clear of them.
    let (inputs, options) = resolve(given)?;
    let options = &options;
    let ctx = Context::new(options)?;
    let vocab_size = ctx.encoder.vocab_size();
    let dtype = ctx.dtype;
    let tasks = discover_tasks(&inputs)?;

    fs::create_dir_all(&options.output).ctx("cannot create output folder", &options.output)?;
    let _lock = lock_output(&options.output)?;
    remove_stale_temporaries(&options.output)?;
    // Before any record or folder is written.
    check_sources_not_held_elsewhere(&options.output, &tasks)?;

    // Plan: which tasks are fresh, which must be (re-)tokenized, which are blocked.
    let plans: Vec<(Task, Result<Plan>)> = tasks
        .into_par_iter()
        .map(|task| {
            let decision = plan(&ctx, &task);
            (task, decision)
        })
        .collect();
    let mut reports = Vec::new();
    let mut work = Vec::new();
    for (task, decision) in plans {
        match decision {
            Ok((Decision::Fresh { .. }, record)) => reports.push(unchanged_report(&task, record)),
            Ok((Decision::Stale(reason), _)) => work.push((task, reason)),
            Err(e) => reports.push(failed_report(&task, &e, 0.0)),
        }
    }
    let names: BTreeSet<String> = reports
        .iter()
        .map(|r| r.task.clone())
        .chain(work.iter().map(|(t, _)| t.name.clone()))
        .collect();
    let pruned = remove_orphans(&options.output, &names)?;
    let info = tokenizer_info(&ctx, vocab_size, &info_inputs(&ctx, &pruned.kept));
    // Before the first task folder is replaced: a run killed midway then leaves an info that
    // names the new tokenizer, and the tasks not yet redone visibly mismatch it.
    if !work.is_empty() {
        write_tokenizer_info(&ctx, &info)?;
    }

    // Largest first, so that the last file to finish is a small one.
    work.sort_by(|a, b| {
        b.0.stat
            .size
            .cmp(&a.0.stat.size)
            .then(a.0.name.cmp(&b.0.name))
    });
    let total_bytes = work.iter().map(|(t, _)| t.stat.size).sum();
    let bar = bytes_bar(total_bytes, options.progress, "tokenize");
    let files_done = AtomicUsize::new(0);
    let n_work = work.len();
    bar.set_message(format!("0/{n_work} files"));
    let done: Vec<FileReport> = work
        .par_iter()
        .map(|(task, reason)| {
            let report = tokenize_task(&ctx, task, reason, &ByteProgress::new(&bar));
            let n = files_done.fetch_add(1, Ordering::Relaxed) + 1;
            bar.set_message(format!("{n}/{n_work} files"));
            report
        })
        .collect();
    bar.finish_and_clear();
    reports.extend(done);
    reports.sort_by(|a, b| a.task.cmp(&b.task));

    write_tokenizer_info(&ctx, &info)?;
    let mixed = mismatched_tasks(&ctx)?;
    let repair_command = (!mixed.is_empty()).then(|| repair_command(&ctx, &info));
    let totals = output_totals(&options.output)?;
    Ok(TokenizeReport {
        output: options.output.display().to_string(),
        tokenizer_path: options.tokenizer_path.display().to_string(),
        vocab_size,
        token_dtype: dtype.name(),
        threads,
        seconds: started.elapsed().as_secs_f64(),
        files: reports,
        removed_orphans: pruned.removed,
        kept: pruned.kept.into_iter().map(|k| k.describe()).collect(),
        left_alone: pruned.left_alone,
        inputs: display_all(&options.inputs),
        skipped_files: display_all(&inputs.skipped),
        mixed,
        repair_command,
        output_tasks: totals.tasks,
        output_rows: totals.rows,
        output_tokens: totals.tokens,
        encoder: ctx.encoder.engine(),
        encoder_fallback: ctx.encoder.fallback_reason().map(str::to_owned),
    })
}

fn display_all(paths: &[PathBuf]) -> Vec<String> {
    paths.iter().map(|p| p.display().to_string()).collect()
}

/// `path` made absolute, with links resolved in the part that exists (the output folder
/// may not exist yet), so that it can be compared with the canonical input roots.
fn absolute_path(path: &Path) -> Result<PathBuf> {
    let absolute = std::path::absolute(path).ctx("cannot resolve", path)?;
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return Ok(absolute),
        }
    }
    let mut resolved = fs::canonicalize(existing).ctx("cannot resolve", existing)?;
    resolved.extend(rest.iter().rev());
    Ok(resolved)
}

/// An output equal to, inside or around an input would read its own outputs as inputs on
/// the next run, or replace input files with task folders.
fn check_output_outside_inputs(output: &Path, roots: &[PathBuf]) -> Result<()> {
    for root in roots {
        let relation = if output == root {
            "is the input"
        } else if output.starts_with(root) {
            "is inside the input"
        } else if root.starts_with(output) {
            "contains the input"
        } else {
            continue;
        };
        return Err(Error::Config(format!(
            "the output folder {} {relation} {}; choose an output folder outside every input \
             folder (e.g. a sibling such as data_tokenized_<name>)",
            output.display(),
            root.display()
        )));
    }
    Ok(())
}

fn discover_tasks(inputs: &Inputs) -> Result<Vec<Task>> {
    inputs
        .tasks
        .iter()
        .map(|(name, source)| {
            let stat = SourceStat::of(source)?;
            let root = inputs.root_of(source).unwrap_or(source).to_path_buf();
            Ok(Task {
                name: name.clone(),
                source: source.clone(),
                root,
                stat,
            })
        })
        .collect()
}

/// Refuse a run that would give a source a second task folder: an existing folder, not
/// rewritten by this run, whose record already names the source under another task name
/// (the same file reached through another input root). Training would see its rows twice.
fn check_sources_not_held_elsewhere(output: &Path, tasks: &[Task]) -> Result<()> {
    let names: BTreeSet<&str> = tasks.iter().map(|t| t.name.as_str()).collect();
    let mut holders = std::collections::HashMap::new();
    for (name, path) in task_dirs(output)? {
        if names.contains(name.as_str()) {
            continue;
        }
        if let Existing::Ours(record) = cache::inspect(&path) {
            let root = record_root(&record, &name);
            holders.insert(PathBuf::from(&record.source_path), (name, path, root));
        }
    }
    for task in tasks {
        let Some((held_as, folder, root)) = holders.get(&task.source) else {
            continue;
        };
        let original = root.as_ref().map_or_else(
            || "its original input root".to_string(),
            |r| format!("the original input root {}", r.display()),
        );
        return Err(Error::Config(format!(
            "{} would become the task {:?} (input {}), but the task folder {} already holds it \
             as {held_as:?}; one source must not be two tasks. Nothing was written. Give \
             {original} instead of {}, or delete {} to re-tokenize the file as {:?}",
            task.source.display(),
            task.name,
            task.root.display(),
            folder.display(),
            task.root.display(),
            folder.display(),
            task.name
        )));
    }
    Ok(())
}

/// The input root of a task record: recorded since `source_root` exists; for older records,
/// the source path without the trailing components whose `__`-join is the task name.
fn record_root(record: &TaskRecord, name: &str) -> Option<PathBuf> {
    if let Some(root) = &record.source_root {
        return Some(PathBuf::from(root));
    }
    let source = Path::new(&record.source_path);
    if !source.is_absolute() {
        return None;
    }
    let parts: Vec<String> = source
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    (1..parts.len())
        .find(|&k| parts[parts.len() - k..].join("__") == name)
        .and_then(|k| source.ancestors().nth(k))
        .map(Path::to_path_buf)
}

/// Whether a task must be (re-)tokenized, with the record of its folder when it is ours.
type Plan = (Decision, Option<TaskRecord>);

fn plan(ctx: &Context<'_>, task: &Task) -> Result<Plan> {
    plan_task(ctx, task, true)
}

/// `plan`; with `update` false, a fresh task's record is left as it is (a dry plan).
fn plan_task(ctx: &Context<'_>, task: &Task, update: bool) -> Result<Plan> {
    let dir = ctx.options.output.join(&task.name);
    match cache::inspect(&dir) {
        Existing::Absent => Ok((Decision::Stale("new"), None)),
        Existing::Original => Ok((Decision::Stale("written by another version"), None)),
        Existing::Foreign(why) => Err(Error::Output(format!(
            "{} exists but {why}; data_io only replaces folders it wrote. Move it away and re-run",
            dir.display()
        ))),
        Existing::Ours(record) => {
            let mut record = *record;
            let decision = cache::decide(&record, &dir, &task.source, task.stat, &ctx.fingerprint)?;
            if let Decision::Fresh { touch } = decision {
                // Same content, but the record must name where the source is now: a stale
                // path (a renamed root) would later make the task look orphaned.
                let (path, root) = source_names(task);
                let moved =
                    record.source_path != path || record.source_root.as_ref() != Some(&root);
                if update && (touch || moved) {
                    record.source_mtime = task.stat.mtime_seconds();
                    record.source_mtime_ns = task.stat.mtime_ns;
                    record.source_path = path;
                    record.source_root = Some(root);
                    crate::fs::write_json_atomic(&dir.join(cache::METADATA), &record)?;
                }
            }
            Ok((decision, Some(record)))
        }
    }
}

/// The source path and root a task's record names (absolute).
fn source_names(task: &Task) -> (String, String) {
    (
        task.source.display().to_string(),
        task.root.display().to_string(),
    )
}

fn tokenize_task(
    ctx: &Context<'_>,
    task: &Task,
    reason: &str,
    progress: &ByteProgress,
) -> FileReport {
    let started = Instant::now();
    let tmp = ctx
        .options
        .output
        .join(format!("{TMP_PREFIX}{}-{}", task.name, std::process::id()));
    let result = write_task(ctx, task, &tmp, progress);
    // The file's whole share, however far reading got (a failed file is done too).
    progress.advance_to(task.stat.size);
    match result {
        Ok((record, parts)) => FileReport {
            task: task.name.clone(),
            source: task.source.display().to_string(),
            status: Status::Tokenized,
            reason: match parts {
                Some(n) => format!("{reason}; assembled from {n} scale-out part(s)"),
                None => reason.to_string(),
            },
            rows: record.rows,
            tokens: record.tokens,
            bad_rows: record.bad_rows,
            bad_row_examples: record.bad_row_examples,
            warnings: record.warnings,
            bytes: task.stat.size,
            seconds: started.elapsed().as_secs_f64(),
            error: None,
            error_kind: None,
        },
        Err(e) => {
            let _ = fs::remove_dir_all(&tmp);
            failed_report(task, &e, started.elapsed().as_secs_f64())
        }
    }
}

/// Encode one file into `tmp` (or assemble it from its parts), then rename `tmp` over the task
/// folder; the record, and how many parts it was assembled from (`None`: encoded here).
fn write_task(
    ctx: &Context<'_>,
    task: &Task,
    tmp: &Path,
    progress: &ByteProgress,
) -> Result<(TaskRecord, Option<usize>)> {
    if tmp.exists() {
        fs::remove_dir_all(tmp).ctx("cannot remove", tmp)?;
    }
    fs::create_dir(tmp).ctx("cannot create", tmp)?;
    let parts = match &ctx.options.parts {
        Some(root) => self::parts::complete_parts(ctx, root, &task.name, &task.source, task.stat)?,
        None => None,
    };
    let assembled = parts.as_ref().map(Vec::len);
    let (encoded, source_blake3) = match parts {
        Some(parts) => self::parts::assemble(&parts, &task.source, tmp, ctx.dtype)?,
        None => {
            let reader = RowReader::open(&task.source, ctx.options.batch_rows, progress.clone())?;
            let mut encoded = encode_span(ctx, &task.source, reader, tmp)?;
            // Hashed while read (JSONL), or read again for it (Parquet).
            let source_blake3 = match encoded.source_blake3.take() {
                Some(hash) => hash,
                None => cache::file_blake3(&task.source)?,
            };
            (encoded, source_blake3)
        }
    };
    let mut warnings = Vec::new();
    if encoded.rows + encoded.bad_rows == 0 {
        if ctx.options.on_error == OnError::Fail {
            return Err(Error::bad_file(
                &task.source,
                "the file holds no rows; remove it, or pass --on-error skip to keep an empty task",
            ));
        }
        warnings.push("empty file: the task has no rows".to_string());
    }
    let record = TaskRecord {
        source_mtime: task.stat.mtime_seconds(),
        source_size: task.stat.size,
        tool: cache::TOOL.into(),
        format_version: cache::FORMAT_VERSION,
        source_path: task.source.display().to_string(),
        source_root: Some(task.root.display().to_string()),
        source_mtime_ns: task.stat.mtime_ns,
        source_blake3,
        tokenizer_blake3: ctx.fingerprint.tokenizer_blake3.clone(),
        options_blake3: ctx.fingerprint.options_blake3.clone(),
        options: ctx.options_json.clone(),
        token_dtype: ctx.dtype.name().into(),
        rows: encoded.rows,
        tokens: encoded.tokens,
        bad_rows: encoded.bad_rows,
        bad_row_examples: encoded
            .bad_row_examples
            .iter()
            .map(Error::to_string)
            .collect(),
        warnings,
    };
    crate::fs::write_json_atomic(&tmp.join(cache::METADATA), &record)?;
    replace_dir(tmp, &ctx.options.output, &task.name)?;
    Ok((record, assembled))
}

/// What encoding a file, or a span of it, into a folder of arrays gave.
pub(crate) struct Encoded {
    pub rows: u64,
    pub tokens: u64,
    /// Lines (JSONL, blank ones included) or rows (Parquet) read.
    pub lines: u64,
    pub bad_rows: u64,
    /// The first bad rows skipped (at most `BAD_ROW_EXAMPLES`), in file order.
    pub bad_row_examples: Vec<Error>,
    /// The source's BLAKE3, when the reader took it as it read the whole file.
    pub source_blake3: Option<String>,
}

/// Bad rows a task's record keeps as examples.
pub(crate) const BAD_ROW_EXAMPLES: usize = 10;

/// Encode the rows `reader` yields into the arrays of the (existing, empty) folder `dir`.
pub(crate) fn encode_span(
    ctx: &Context<'_>,
    source: &Path,
    mut reader: RowReader,
    dir: &Path,
) -> Result<Encoded> {
    let mut sink = RowSink {
        writer: TaskWriter::create(dir, ctx.dtype)?,
        on_error: ctx.options.on_error,
        bad_rows: 0,
        bad_row_examples: Vec::new(),
    };
    // A three-stage pipeline: while the rows of batch k are encoded in parallel, this thread
    // writes batch k-1 (in source order) and reads batch k+1. Reading and writing are serial
    // work; run between the batches they would leave cores idle (Amdahl's law).
    let mut next = reader.next();
    let mut pending: Option<Vec<Result<EncodedRow>>> = None;
    loop {
        let batch = match next.take() {
            None => break,
            Some(Ok(batch)) => batch,
            Some(Err(error)) => {
                // Bad rows of the batch before come first in the file: report them first.
                if let Some(rows) = pending.take() {
                    sink.write(rows)?;
                }
                return Err(error);
            }
        };
        let mut encoded = Vec::new();
        // The encoding is spawned into the pool (other threads pick it up at once); this
        // thread writes and reads meanwhile (the writer is not `Send`), then joins the
        // encoding until the scope ends.
        let (written, following) = rayon::in_place_scope(|scope| {
            scope.spawn(|_| encoded = encode_batch(ctx, source, &batch));
            let written = pending.take().map_or(Ok(()), |rows| sink.write(rows));
            (written, reader.next())
        });
        written?;
        pending = Some(encoded);
        next = following;
    }
    if let Some(rows) = pending.take() {
        sink.write(rows)?;
    }
    let RowSink {
        writer,
        bad_rows,
        bad_row_examples,
        ..
    } = sink;
    let (rows, tokens) = (writer.rows(), writer.tokens());
    writer.finish()?;
    Ok(Encoded {
        rows,
        tokens,
        lines: reader.lines_read(),
        bad_rows,
        bad_row_examples,
        source_blake3: reader.source_blake3(),
    })
}

/// Encode the rows of one batch in parallel (results in source order).
fn encode_batch(ctx: &Context<'_>, source: &Path, batch: &Batch) -> Vec<Result<EncodedRow>> {
    (0..batch.len())
        .into_par_iter()
        .map(|i| {
            let row = batch.row(i)?;
            encode_row(
                &*ctx.encoder,
                &ctx.specials,
                &row.condition,
                &row.instruction,
                &row.response,
            )
            .map_err(|message| Error::bad_row(source, batch.location(i), message))
        })
        .collect()
}

/// Where encoded rows go: the task's writer, or (under `--on-error skip`) the bad-row count.
struct RowSink {
    writer: TaskWriter,
    on_error: OnError,
    bad_rows: u64,
    bad_row_examples: Vec<Error>,
}

impl RowSink {
    fn write(&mut self, rows: Vec<Result<EncodedRow>>) -> Result<()> {
        for row in rows {
            match row {
                Ok(row) => self.writer.push(&row)?,
                Err(e) if self.on_error == OnError::Skip && e.kind() == ErrorKind::Input => {
                    self.bad_rows += 1;
                    if self.bad_row_examples.len() < BAD_ROW_EXAMPLES {
                        self.bad_row_examples.push(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Put the finished `tmp` folder in place of `output/name`: a folder is complete or absent.
fn replace_dir(tmp: &Path, output: &Path, name: &str) -> Result<()> {
    let target = output.join(name);
    if target.exists() {
        let old = output.join(format!("{OLD_PREFIX}{name}-{}", std::process::id()));
        fs::rename(&target, &old).ctx("cannot move aside", &target)?;
        fs::rename(tmp, &target).ctx("cannot rename into place", &target)?;
        fs::remove_dir_all(&old).ctx("cannot remove", &old)
    } else {
        fs::rename(tmp, &target).ctx("cannot rename into place", &target)
    }
}

/// One run at a time per output folder; the lock goes with the process.
fn lock_output(output: &Path) -> Result<fs::File> {
    let path = output.join(LOCK_FILE);
    // Opened without truncation: a refused run leaves even the lock file's mtime untouched.
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .ctx("cannot create", &path)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => Err(Error::Output(format!(
            "another data_io tokenize is writing {}; wait for it to finish",
            output.display()
        ))),
        Err(fs::TryLockError::Error(e)) => Err(Error::io("cannot lock", &path, e)),
    }
}

/// Folders left by a crashed run: ours by name, never finished, safe to delete.
fn remove_stale_temporaries(output: &Path) -> Result<()> {
    for entry in fs::read_dir(output).ctx("cannot list", output)? {
        let entry = entry.ctx("cannot list", output)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(TMP_PREFIX) || name.starts_with(OLD_PREFIX) {
            fs::remove_dir_all(entry.path()).ctx("cannot remove", &entry.path())?;
        }
    }
    Ok(())
}

/// A task folder not produced by this run that stays.
struct Kept {
    name: String,
    /// The input root of its source, when its record names a source that exists.
    root: Option<PathBuf>,
    reason: String,
}

impl Kept {
    fn describe(&self) -> String {
        format!("{} ({})", self.name, self.reason)
    }
}

#[derive(Default)]
struct Pruned {
    removed: Vec<String>,
    kept: Vec<Kept>,
    left_alone: Vec<String>,
}

/// The output's task folders (name, path) in name order; `.`-folders are our temporaries.
fn task_dirs(output: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut entries: Vec<_> = fs::read_dir(output)
        .ctx("cannot list", output)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(name, _)| !name.starts_with('.'))
        .collect();
    entries.sort();
    Ok(entries)
}

/// Remove the task folders not produced by this run that are provably orphaned: written by
/// data_io, and the absolute source their record names no longer exists. Anything else is
/// kept and reported: a run over a subset of the usual inputs must not delete the others.
fn remove_orphans(output: &Path, tasks: &BTreeSet<String>) -> Result<Pruned> {
    let mut pruned = Pruned::default();
    for (name, path) in task_dirs(output)? {
        if tasks.contains(&name) {
            continue;
        }
        match cache::inspect(&path) {
            Existing::Ours(record) => match orphan_check(&record.source_path) {
                Ok(()) => {
                    fs::remove_dir_all(&path).ctx("cannot remove orphan", &path)?;
                    pruned.removed.push(name);
                }
                Err((exists, reason)) => pruned.kept.push(Kept {
                    root: exists.then(|| record_root(&record, &name)).flatten(),
                    name,
                    reason,
                }),
            },
            Existing::Original => pruned.kept.push(Kept {
                name,
                root: None,
                reason: "written by the original pipeline, whose record names no source; \
                         delete it by hand if unwanted"
                    .into(),
            }),
            Existing::Foreign(why) => pruned.left_alone.push(format!("{name} ({why})")),
            Existing::Absent => {}
        }
    }
    Ok(pruned)
}

/// `Ok` when the recorded source is provably gone; otherwise why the folder stays (and
/// whether the source exists).
fn orphan_check(source_path: &str) -> std::result::Result<(), (bool, String)> {
    let source = PathBuf::from(source_path);
    if !source.is_absolute() {
        return Err((
            false,
            format!(
                "its record names the relative source path {source_path:?}, which cannot be \
                 checked; delete the folder by hand if that file is gone"
            ),
        ));
    }
    match source.try_exists() {
        Ok(false) => Ok(()),
        Ok(true) => Err((
            true,
            format!(
                "its source {source_path} still exists but is not under this run's inputs; add \
                 its folder to the inputs to update it, or delete the task folder by hand"
            ),
        )),
        Err(e) => Err((
            false,
            format!("cannot tell whether its source {source_path} exists ({e})"),
        )),
    }
}

/// The inputs `tokenizer_info.json` names: this run's roots, plus the roots of the kept
/// tasks (from their records), so that the repair command covers every task. A kept root
/// inside one of this run's roots is already covered.
fn info_inputs(ctx: &Context<'_>, kept: &[Kept]) -> Vec<PathBuf> {
    let mut inputs = ctx.options.inputs.clone();
    for root in kept.iter().filter_map(|k| k.root.as_ref()) {
        if !inputs.iter().any(|given| root.starts_with(given)) {
            inputs.push(root.clone());
        }
    }
    inputs
}

/// How many tasks, rows and tokens the output folder holds.
#[derive(Default)]
struct Totals {
    tasks: u64,
    rows: u64,
    tokens: u64,
}

/// Totals over every task folder of the output: from the records of ours, from the array
/// headers of the original pipeline's (its record holds no counts).
fn output_totals(output: &Path) -> Result<Totals> {
    let mut totals = Totals::default();
    for (_, path) in task_dirs(output)? {
        let (rows, tokens) = match cache::inspect(&path) {
            Existing::Ours(record) => (record.rows, record.tokens),
            Existing::Original => {
                let length = |name: &str| {
                    cache::npy_shape(&path.join(name))
                        .ok()
                        .and_then(|found| found.shape.first().copied())
                        .unwrap_or(0)
                };
                (length("inst_len.npy"), length("tokens.npy"))
            }
            Existing::Foreign(_) | Existing::Absent => continue,
        };
        totals.tasks += 1;
        totals.rows += rows;
        totals.tokens += tokens;
    }
    Ok(totals)
}

/// The task folders whose tokenizer or options hash differs from this run's, or that cannot
/// be checked (written by the original pipeline).
fn mismatched_tasks(ctx: &Context<'_>) -> Result<Vec<String>> {
    let output = &ctx.options.output;
    let mut mixed = Vec::new();
    for (name, path) in task_dirs(output)? {
        let why = match cache::inspect(&path) {
            Existing::Ours(record) => {
                if record.tokenizer_blake3 != ctx.fingerprint.tokenizer_blake3 {
                    "another tokenizer"
                } else if record.options_blake3 != ctx.fingerprint.options_blake3 {
                    "other layout options"
                } else {
                    continue;
                }
            }
            // The repair command cannot reach it: no record of its source or root.
            Existing::Original => {
                "the original pipeline, no record of its tokenizer or source; delete it, or \
                 tokenize the file it came from into this output"
            }
            Existing::Foreign(_) | Existing::Absent => continue,
        };
        mixed.push(format!("{name} (tokenized with {why})"));
    }
    Ok(mixed)
}

/// `data_io tokenize <inputs> -o <out> --tokenizer-path <tokenizer>` plus the options that
/// differ from the defaults, shell-quoted: the run that makes every task match.
fn repair_command(ctx: &Context<'_>, info: &serde_json::Value) -> String {
    let mut words: Vec<String> = vec!["data_io".into(), "tokenize".into()];
    if let Some(inputs) = info.get("inputs").and_then(|v| v.as_array()) {
        words.extend(inputs.iter().filter_map(|v| v.as_str()).map(String::from));
    }
    words.push("-o".into());
    words.push(ctx.options.output.display().to_string());
    words.push("--tokenizer-path".into());
    words.push(ctx.options.tokenizer_path.display().to_string());
    let layout = &ctx.options.layout;
    let default = LayoutTokens::default();
    for (flag, value, default) in [
        ("--boq", &layout.boq, &default.boq),
        ("--eoq", &layout.eoq, &default.eoq),
        ("--eoa", &layout.eoa, &default.eoa),
    ] {
        if value != default {
            words.push(flag.into());
            words.push(value.clone());
        }
    }
    if layout.conditions != default.conditions {
        let pairs: Vec<String> = layout
            .conditions
            .iter()
            .map(|(tag, token)| format!("{tag}={token}"))
            .collect();
        words.push("--conditions".into());
        words.push(pairs.join(","));
    }
    if ctx.dtype != TokenDtype::Uint32 {
        words.push("--token-dtype".into());
        words.push("auto".into());
    }
    words
        .iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `word` as one POSIX shell word.
fn shell_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:=,@+%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// `tokenizer_info.json`: the original keys (the HRM-Text trainer reads them) plus what a
/// consumer needs to check every task against the run: `tool`, `format_version`,
/// `tokenizer_blake3` and `options_blake3` (the same values as each task's record) and
/// `inputs` (absolute roots, for the repair command).
fn tokenizer_info(ctx: &Context<'_>, vocab_size: usize, inputs: &[PathBuf]) -> serde_json::Value {
    let layout = &ctx.options.layout;
    let condition_mapping: serde_json::Map<String, serde_json::Value> = layout
        .conditions
        .iter()
        .map(|(tag, token)| (tag.clone(), token.clone().into()))
        .collect();
    let condition_ids: serde_json::Map<String, serde_json::Value> = ctx
        .specials
        .conditions
        .iter()
        .map(|(tag, id)| (tag.clone(), (*id).into()))
        .collect();
    serde_json::json!({
        "tokenizer_path": ctx.options.tokenizer_path.display().to_string(),
        "boq": layout.boq,
        "eoq": layout.eoq,
        "eoa": layout.eoa,
        "condition_mapping": condition_mapping,
        "vocab_size": vocab_size,
        "boq_id": ctx.specials.boq,
        "eoq_id": ctx.specials.eoq,
        "eoa_id": ctx.specials.eoa,
        "condition_ids": condition_ids,
        "token_dtype": ctx.dtype.name(),
        "tokenizer_blake3": ctx.fingerprint.tokenizer_blake3,
        "tool": cache::TOOL,
        "format_version": cache::FORMAT_VERSION,
        "options_blake3": ctx.fingerprint.options_blake3,
        "inputs": display_all(inputs),
    })
}

/// Write `info` unless the file already holds exactly it (a run with nothing to do leaves
/// the output untouched).
fn write_tokenizer_info(ctx: &Context<'_>, info: &serde_json::Value) -> Result<()> {
    let path = ctx.options.output.join(TOKENIZER_INFO);
    let current = fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
    if current.as_ref() == Some(info) {
        return Ok(());
    }
    crate::fs::write_json_atomic(&path, info)
}

fn unchanged_report(task: &Task, record: Option<TaskRecord>) -> FileReport {
    let (rows, tokens, bad_rows, bad_row_examples, warnings) = record
        .map_or((0, 0, 0, Vec::new(), Vec::new()), |r| {
            (r.rows, r.tokens, r.bad_rows, r.bad_row_examples, r.warnings)
        });
    FileReport {
        task: task.name.clone(),
        source: task.source.display().to_string(),
        status: Status::Unchanged,
        reason: "unchanged".into(),
        rows,
        tokens,
        bad_rows,
        bad_row_examples,
        warnings,
        bytes: task.stat.size,
        seconds: 0.0,
        error: None,
        error_kind: None,
    }
}

fn failed_report(task: &Task, error: &Error, seconds: f64) -> FileReport {
    FileReport {
        task: task.name.clone(),
        source: task.source.display().to_string(),
        status: Status::Failed,
        reason: "failed".into(),
        rows: 0,
        tokens: 0,
        bad_rows: 0,
        bad_row_examples: Vec::new(),
        warnings: Vec::new(),
        bytes: task.stat.size,
        seconds,
        error: Some(error.to_string()),
        error_kind: Some(error.kind().name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(source_path: &str, source_root: Option<&str>) -> TaskRecord {
        TaskRecord {
            source_mtime: 0.0,
            source_size: 0,
            tool: cache::TOOL.into(),
            format_version: cache::FORMAT_VERSION,
            source_path: source_path.into(),
            source_root: source_root.map(String::from),
            source_mtime_ns: 0,
            source_blake3: String::new(),
            tokenizer_blake3: String::new(),
            options_blake3: String::new(),
            options: serde_json::Value::Null,
            token_dtype: "uint32".into(),
            rows: 0,
            tokens: 0,
            bad_rows: 0,
            bad_row_examples: vec![],
            warnings: vec![],
        }
    }

    #[test]
    fn record_root_is_recorded_or_derived_from_the_task_name() {
        let root = |path, recorded, name| record_root(&record(path, recorded), name);
        // Recorded: taken as is, also for a file given directly as the input.
        assert_eq!(
            root("/d/P/code.jsonl", Some("/d/P/code.jsonl"), "code.jsonl"),
            Some(PathBuf::from("/d/P/code.jsonl"))
        );
        // Older records: as many trailing components as the task name joins.
        assert_eq!(
            root("/r/data/P/code.jsonl", None, "P__code.jsonl"),
            Some(PathBuf::from("/r/data"))
        );
        assert_eq!(
            root("/r/data/a__b.jsonl", None, "a__b.jsonl"),
            Some(PathBuf::from("/r/data"))
        );
        assert_eq!(root("/r/data/x.jsonl", None, "other.jsonl"), None);
        assert_eq!(root("data/P/code.jsonl", None, "P__code.jsonl"), None);
    }
}
