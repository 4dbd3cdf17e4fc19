//! Counts kept per input file: `<dir>/<task>.words` (a sorted run) and `<dir>/<task>.words.json`
//! (what was counted, and how). `train-tokenizer --counts DIR` keeps them there, so a re-run
//! counts only the files that are new or changed; a scale-out unit leaves one in its part, and
//! the finalize step reads them instead of counting again. A file's counts are reused only when
//! everything that made them is the same: the file's bytes (size and BLAKE3), the choice of its
//! texts (seed, limit, truncation, bad-row policy) and how words are made (normaliser, regex).

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::run_file::WordsHeader;
use crate::error::{Error, IoContext, Result};
use crate::fs::write_json_atomic;
use crate::train::TrainFileReport;

/// Everything the counts of one input file depend on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountKey {
    pub task: String,
    pub source_bytes: u64,
    /// BLAKE3 of the whole file, hex.
    pub source_blake3: String,
    pub words: WordsHeader,
    pub seed: u64,
    /// Texts used at most (limit_mul_factor × max_per_file), None for every text.
    pub limit: Option<u64>,
    pub truncate_len: usize,
    /// "fail" or "skip".
    pub on_error: String,
}

/// The sidecar of a stored run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredCounts {
    pub key: CountKey,
    pub report: TrainFileReport,
    /// Distinct words, pieces counted (the counts' sum), and bytes of text counted.
    pub words: u64,
    pub pieces: u64,
    pub text_bytes: u64,
}

/// Where the counts of `task` are kept in `dir`: the run, and its sidecar.
pub fn paths(dir: &Path, task: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{task}.words")),
        dir.join(format!("{task}.words.json")),
    )
}

/// The stored counts of `key.task` in `dir`, when they were made from the same file the same
/// way; None when there are none, or they are stale (they are then counted again).
pub fn lookup(dir: &Path, key: &CountKey) -> Result<Option<(PathBuf, StoredCounts)>> {
    let (run, sidecar) = paths(dir, &key.task);
    if !sidecar.exists() || !run.exists() {
        return Ok(None);
    }
    let (_, stored) = read_record(dir, &key.task)?;
    if stored.key.words != key.words {
        // Made by another version or with another split: not ours to mix in.
        key.words.check(&stored.key.words, &sidecar)?;
    }
    Ok((stored.key == *key).then_some((run, stored)))
}

/// Record `stored` beside its run `<dir>/<name>.words` (written first: a sidecar never names a
/// run that is not there).
pub fn record(dir: &Path, name: &str, stored: &StoredCounts) -> Result<()> {
    let (_, sidecar) = paths(dir, name);
    write_json_atomic(&sidecar, stored)
}

/// Every stored counts record in `dir` (a scale-out unit's part), by name, sorted.
pub fn records_in(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(found);
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(task) = name.strip_suffix(".words.json") {
            found.push((task.to_string(), dir.to_path_buf()));
        }
    }
    found.sort();
    Ok(found)
}

/// The record `<dir>/<name>.words.json` and its run, read back.
pub fn read_record(dir: &Path, name: &str) -> Result<(PathBuf, StoredCounts)> {
    let (run, sidecar) = paths(dir, name);
    let text = fs::read_to_string(&sidecar).ctx("cannot read", &sidecar)?;
    let stored = serde_json::from_str(&text).map_err(|e| Error::BadFile {
        path: sidecar.clone(),
        message: format!("not the record of a word-count run ({e}); delete it to count again"),
    })?;
    Ok((run, stored))
}

/// BLAKE3 of the file at `path`, hex (memory-mapped, on the current rayon pool).
pub fn file_hash(path: &Path) -> Result<String> {
    let mut hasher = blake3::Hasher::new();
    hasher.update_mmap_rayon(path).ctx("cannot read", path)?;
    Ok(hasher.finalize().to_hex().to_string())
}
