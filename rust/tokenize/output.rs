//! The output folder around the task folders: the lock, the temporaries of a crashed run,
//! a finished folder put in place, orphaned task folders, `tokenizer_info.json`, the totals,
//! and the tasks that mismatch the run with the command that repairs them.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::encode::Context;
use crate::error::{Error, IoContext, Result};
use crate::layout::cache::{self, Existing, TaskRecord};
use crate::layout::task_writer::TokenDtype;
use crate::layout::LayoutTokens;
use crate::reader::OnError;

/// Prefixes of this tool's temporary folders inside the output; hidden, so readers skip them.
pub(super) const TMP_PREFIX: &str = ".data_io-tmp-";
const OLD_PREFIX: &str = ".data_io-old-";
const LOCK_FILE: &str = ".data_io.lock";
pub const TOKENIZER_INFO: &str = "tokenizer_info.json";

/// The longest file name the usual file systems take (ext4, XFS, tmpfs: 255 bytes).
pub(super) const NAME_MAX: usize = 255;

/// The hidden working name `{prefix}{name}-{pid}` of task `name`'s folder, within `NAME_MAX`:
/// a task name near the limit is cut at a character boundary and a hash of the whole name
/// keeps it apart from other tasks cut the same way (only `prefix` is ever matched on).
pub(super) fn hidden_name(prefix: &str, name: &str) -> String {
    let pid = std::process::id();
    let plain = format!("{prefix}{name}-{pid}");
    if plain.len() <= NAME_MAX {
        return plain;
    }
    let hash = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(name.as_bytes()));
    let room = NAME_MAX - prefix.len() - hash.len() - format!("--{pid}").len();
    let cut = (0..=room.min(name.len()))
        .rev()
        .find(|&at| name.is_char_boundary(at))
        .unwrap_or(0);
    format!("{prefix}{}-{hash}-{pid}", &name[..cut])
}

pub(super) fn display_all(paths: &[PathBuf]) -> Vec<String> {
    paths.iter().map(|p| p.display().to_string()).collect()
}

/// The input root of a task record: recorded since `source_root` exists; for older records,
/// the source path without the trailing components whose `__`-join is the task name.
pub(super) fn record_root(record: &TaskRecord, name: &str) -> Option<PathBuf> {
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

/// Put the finished `tmp` folder in place of `output/name`: a folder is complete or absent.
pub(super) fn replace_dir(tmp: &Path, output: &Path, name: &str) -> Result<()> {
    let target = output.join(name);
    if target.exists() {
        let old = output.join(hidden_name(OLD_PREFIX, name));
        fs::rename(&target, &old).ctx("cannot move aside", &target)?;
        fs::rename(tmp, &target).ctx("cannot rename into place", &target)?;
        fs::remove_dir_all(&old).ctx("cannot remove", &old)
    } else {
        fs::rename(tmp, &target).ctx("cannot rename into place", &target)
    }
}

/// One run at a time per output folder; the lock goes with the process.
pub(super) fn lock_output(output: &Path) -> Result<fs::File> {
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
            "another data_io tokenize is writing {}, or a data_io sample is reading it (each \
             holds its .data_io.lock); wait for it to finish",
            output.display()
        ))),
        Err(fs::TryLockError::Error(e)) => Err(Error::io("cannot lock", &path, e)),
    }
}

/// Folders left by a crashed run: ours by name, never finished, safe to delete.
pub(super) fn remove_stale_temporaries(output: &Path) -> Result<()> {
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
pub(super) struct Kept {
    name: String,
    /// The input root of its source, when its record names a source that exists.
    root: Option<PathBuf>,
    reason: String,
}

impl Kept {
    pub(super) fn describe(&self) -> String {
        format!("{} ({})", self.name, self.reason)
    }
}

#[derive(Default)]
pub(super) struct Pruned {
    pub(super) removed: Vec<String>,
    pub(super) kept: Vec<Kept>,
    pub(super) left_alone: Vec<String>,
}

/// The output's task folders (name, path) in name order; `.`-folders are our temporaries.
pub(super) fn task_dirs(output: &Path) -> Result<Vec<(String, PathBuf)>> {
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
pub(super) fn remove_orphans(output: &Path, tasks: &BTreeSet<String>) -> Result<Pruned> {
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
pub(super) fn info_inputs(ctx: &Context<'_>, kept: &[Kept]) -> Vec<PathBuf> {
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
pub(super) struct Totals {
    pub(super) tasks: u64,
    pub(super) rows: u64,
    pub(super) tokens: u64,
}

/// Totals over every task folder of the output: from the records of ours, from the array
/// headers of the original pipeline's (its record holds no counts).
pub(super) fn output_totals(output: &Path) -> Result<Totals> {
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
pub(super) fn mismatched_tasks(ctx: &Context<'_>) -> Result<Vec<String>> {
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
/// differ from the defaults (`--on-error skip` too), shell-quoted: the run that makes every
/// task match.
pub(super) fn repair_command(ctx: &Context<'_>, info: &serde_json::Value) -> String {
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
    // A run that skipped bad rows is repaired as it ran: under the default `fail`, the kept
    // tasks of files holding a bad row fail again, and the output stays MIXED.
    if ctx.options.on_error == OnError::Skip {
        words.push("--on-error".into());
        words.push("skip".into());
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
pub(super) fn tokenizer_info(
    ctx: &Context<'_>,
    vocab_size: usize,
    inputs: &[PathBuf],
) -> serde_json::Value {
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
pub(super) fn write_tokenizer_info(ctx: &Context<'_>, info: &serde_json::Value) -> Result<()> {
    let path = ctx.options.output.join(TOKENIZER_INFO);
    let current = fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
    if current.as_ref() == Some(info) {
        return Ok(());
    }
    crate::fs::write_json_atomic(&path, info)
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
            source_ctime_ns: None,
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
    fn hidden_names_fit_a_file_name_and_keep_long_tasks_apart() {
        assert_eq!(
            hidden_name(TMP_PREFIX, "a.jsonl"),
            format!("{TMP_PREFIX}a.jsonl-{}", std::process::id())
        );
        // Names up to the limit, of one- to four-byte characters: cut on a boundary, within
        // 255 bytes, and two names that differ only past the cut stay apart.
        for unit in ["d", "é", "語", "𝄞"] {
            let long = format!("{}__x.jsonl", unit.repeat(250 / unit.len()));
            let other = format!("{}__y.jsonl", unit.repeat(250 / unit.len()));
            for prefix in [TMP_PREFIX, OLD_PREFIX] {
                let (a, b) = (hidden_name(prefix, &long), hidden_name(prefix, &other));
                assert!(a.len() <= NAME_MAX && b.len() <= NAME_MAX, "{a}");
                assert!(a.starts_with(prefix) && a.ends_with(&format!("-{}", std::process::id())));
                assert_ne!(a, b);
            }
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
