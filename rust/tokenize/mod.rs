//! `data_io tokenize`: cleaned rows -> one folder of token arrays per source file
//! (formats.md §3), incrementally, crash-safely and on every core.
//!
//! Parallelism is two-level on one rayon pool: files run in parallel (largest first), and the
//! rows of each batch of a file are encoded in parallel and written in source order, so one
//! huge file still uses every core.
//!
//! - `mod.rs`: the face: `tokenize`, `stale_tasks`, the reports, and a run's plan (which task
//!   folders are fresh) and per-file work.
//! - `options.rs`: `TokenizeOptions` and `DtypeChoice`.
//! - `encode.rs`: the run's `Context` and `encode_span`, rows into arrays, shared with `parts.rs`.
//! - `parts.rs`: a file cut into spans (`scale` units), each encoded into a part folder; a task
//!   is assembled from its parts.
//! - `output.rs`: the output folder: lock, temporaries, orphans, `tokenizer_info.json`, totals
//!   and the repair command.

mod encode;
mod options;
mod output;
pub mod parts;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;

use crate::encoder::TextEncoder;
use crate::error::{Error, IoContext, Result};
use crate::layout::cache::{self, Decision, Existing, SourceStat, TaskRecord};
use crate::progress::{bytes_bar, ByteProgress};
use crate::reader::{task_files, Inputs, OnError, RowReader};

use self::encode::{canonical_tokenizer, encode_span, Context};
pub use self::options::{DtypeChoice, TokenizeOptions};
pub use self::output::TOKENIZER_INFO;
use self::output::{
    display_all, hidden_name, info_inputs, lock_output, mismatched_tasks, output_totals,
    record_root, remove_orphans, remove_stale_temporaries, repair_command, replace_dir, task_dirs,
    tokenizer_info, write_tokenizer_info, NAME_MAX, TMP_PREFIX,
};

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
    check_task_names_fit(&inputs)?;
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
            Err(e) => reports.push(failed_report(&task, &e, "refused before encoding", 0.0)),
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
    // Stopped by Ctrl-C: the tasks done are in place, the others as they were; nothing more
    // is written (the next run finds what is left).
    crate::interrupt::check()?;
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
            if !matches!(decision, Decision::Fresh { .. }) {
                check_folder_holds_no_other_source(&dir, &record, task)?;
            }
            if let Decision::Fresh { touch } = decision {
                // Same content, but the record must name where the source is now: a stale
                // path (a renamed root) would later make the task look orphaned.
                let (path, root) = source_names(task);
                let moved =
                    record.source_path != path || record.source_root.as_ref() != Some(&root);
                if update && (touch || moved) {
                    record.source_mtime = task.stat.mtime_seconds();
                    record.source_mtime_ns = task.stat.mtime_ns;
                    record.source_ctime_ns = Some(task.stat.ctime_ns);
                    record.source_path = path;
                    record.source_root = Some(root);
                    crate::fs::write_json_atomic(&dir.join(cache::METADATA), &record)?;
                }
            }
            Ok((decision, Some(record)))
        }
    }
}

/// A task folder whose record names another source that still exists (the same task name
/// under another input root, tokenized by an earlier run over that root) and whose content
/// differs is not this task's: redoing it would silently drop that file's rows from the
/// output, said as "the source changed". A source that is gone was moved (a renamed root), and
/// its folder is this task's.
fn check_folder_holds_no_other_source(dir: &Path, record: &TaskRecord, task: &Task) -> Result<()> {
    let held = Path::new(&record.source_path);
    if held == task.source
        || !held.is_absolute()
        || !held.exists()
        || same_file(held, &task.source)
        || same_content(held, record, &task.source)
    {
        return Ok(());
    }
    Err(Error::Output(format!(
        "{} would become the task {:?} (input {}), but the task folder {} holds another file \
         under that name, {}, which still exists; one task folder holds one source, so \
         nothing was written for it. Rename one of the two files (or a folder above it) so \
         that their task names differ, delete {} if the new file is meant to replace the \
         other, or tokenize into another output folder",
        task.source.display(),
        task.name,
        task.root.display(),
        dir.display(),
        held.display(),
        dir.display()
    )))
}

/// Whether `held` (the file `record` was made from) and `source` hold the same bytes (a copy
/// under another root: redoing its task for another reason, a new tokenizer say, loses no
/// file's rows). Sizes first; `held`'s hash is the record's while its size, mtime and ctime are
/// the record's, so one file is read, and only on this path.
fn same_content(held: &Path, record: &TaskRecord, source: &Path) -> bool {
    let (Ok(held_stat), Ok(source_stat)) = (SourceStat::of(held), SourceStat::of(source)) else {
        return false;
    };
    if held_stat.size != source_stat.size {
        return false;
    }
    let unchanged = record.source_size == held_stat.size
        && record.source_mtime_ns == held_stat.mtime_ns
        && record.source_ctime_ns == Some(held_stat.ctime_ns);
    let held_hash = if unchanged {
        Ok(record.source_blake3.clone())
    } else {
        cache::file_blake3(held)
    };
    matches!((held_hash, cache::file_blake3(source)), (Ok(x), Ok(y)) if x == y)
}

/// Whether `a` and `b` are one file (hard links: the sources' paths have their symbolic
/// links resolved already).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The source path and root a task's record names (absolute).
fn source_names(task: &Task) -> (String, String) {
    (
        task.source.display().to_string(),
        task.root.display().to_string(),
    )
}

/// A task folder is named by its file's path under the input, folders joined with `__`: a
/// deep path of legal names can make a name no file system takes. Said before any work.
fn check_task_names_fit(inputs: &Inputs) -> Result<()> {
    match (inputs.tasks.iter()).find(|(name, _)| name.len() > NAME_MAX) {
        Some((name, source)) => Err(Error::Config(format!(
            "{}: its task folder would be named {name:?}, {} bytes, and a file name may have \
             at most {NAME_MAX} (the task name is the path under the input, its folders joined \
             with __); give the file a shorter name or move it to a shallower folder",
            source.display(),
            name.len()
        ))),
        None => Ok(()),
    }
}

fn tokenize_task(
    ctx: &Context<'_>,
    task: &Task,
    reason: &str,
    progress: &ByteProgress,
) -> FileReport {
    let started = Instant::now();
    if let Err(stopped) = crate::interrupt::check() {
        return failed_report(task, &stopped, "not started: the run was stopped", 0.0);
    }
    let tmp = ctx.options.output.join(hidden_name(TMP_PREFIX, &task.name));
    let result = write_task(ctx, task, &tmp, progress);
    // The file's whole share, however far reading got (a failed file is done too).
    progress.advance_to(task.stat.size);
    match result {
        Ok((record, parts)) => FileReport {
            task: task.name.clone(),
            source: task.source.display().to_string(),
            status: Status::Tokenized,
            reason: match parts {
                Some(1) => format!("{reason}; assembled from 1 scale-out part"),
                Some(n) => format!("{reason}; assembled from {n} scale-out parts"),
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
            let why = format!("{reason}; failed while encoding");
            failed_report(task, &e, &why, started.elapsed().as_secs_f64())
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
        source_ctime_ns: Some(task.stat.ctime_ns),
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

/// A file that failed; `why` says at what point (the summary's reason column), `error` what.
fn failed_report(task: &Task, error: &Error, why: &str, seconds: f64) -> FileReport {
    FileReport {
        task: task.name.clone(),
        source: task.source.display().to_string(),
        status: Status::Failed,
        reason: why.into(),
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
