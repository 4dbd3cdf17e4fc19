//! Streaming readers of cleaned rows (`condition`, `instruction`, `response`).
//!
//! A reader yields batches; a batch decodes its rows on access (`Batch::row`), so that the
//! caller can decode and encode the rows of one batch in parallel. Memory is bounded by a
//! batch, never by the file.

mod jsonl;
mod parquet;

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use crate::error::{Error, Location, Result};

pub use self::jsonl::{JsonlBatch, JsonlReader};
pub use self::parquet::{ParquetBatch, ParquetReader};

/// The three text fields of one row, borrowed from the batch where possible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowText<'a> {
    pub condition: Cow<'a, str>,
    pub instruction: Cow<'a, str>,
    pub response: Cow<'a, str>,
}

/// Names of the three fields, in the order of `RowText`.
pub const FIELDS: [&str; 3] = ["condition", "instruction", "response"];

/// Input formats, chosen by file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Parquet,
}

impl Format {
    pub fn of(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()? {
            "jsonl" => Some(Format::Jsonl),
            "parquet" => Some(Format::Parquet),
            _ => None,
        }
    }
}

/// How many rows a batch holds at most. Large enough to keep every core busy, small
/// enough to bound memory.
pub const DEFAULT_BATCH_ROWS: usize = 4096;

pub enum Batch {
    Jsonl(JsonlBatch),
    Parquet(ParquetBatch),
}

impl Batch {
    pub fn len(&self) -> usize {
        match self {
            Batch::Jsonl(b) => b.len(),
            Batch::Parquet(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decode row `i` of the batch; a bad row is an `Error::BadRow` naming file and place.
    pub fn row(&self, i: usize) -> Result<RowText<'_>> {
        match self {
            Batch::Jsonl(b) => b.row(i),
            Batch::Parquet(b) => b.row(i),
        }
    }

    pub fn location(&self, i: usize) -> Location {
        match self {
            Batch::Jsonl(b) => b.location(i),
            Batch::Parquet(b) => b.location(i),
        }
    }
}

pub enum RowReader {
    Jsonl(JsonlReader),
    Parquet(ParquetReader),
}

impl RowReader {
    /// Open `path` by its extension (`.jsonl` or `.parquet`).
    pub fn open(path: &Path, batch_rows: usize) -> Result<RowReader> {
        match Format::of(path) {
            Some(Format::Jsonl) => Ok(RowReader::Jsonl(JsonlReader::open(path, batch_rows)?)),
            Some(Format::Parquet) => Ok(RowReader::Parquet(ParquetReader::open(path, batch_rows)?)),
            None => Err(Error::bad_file(
                path,
                "unsupported file type; expected .jsonl or .parquet",
            )),
        }
    }

    /// How far into the source file reading has got, in bytes (exact for JSONL, estimated
    /// from the row count for Parquet); drives progress bars.
    pub fn bytes_done(&self) -> u64 {
        match self {
            RowReader::Jsonl(r) => r.bytes_done(),
            RowReader::Parquet(r) => r.bytes_done(),
        }
    }
}

impl Iterator for RowReader {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            RowReader::Jsonl(r) => r.next().map(|b| b.map(Batch::Jsonl)),
            RowReader::Parquet(r) => r.next().map(|b| b.map(Batch::Parquet)),
        }
    }
}

/// Every `.jsonl`/`.parquet` file under `root` (recursively, following links), sorted by path
/// so that runs are deterministic. A file given directly is returned as is.
pub fn discover(root: &Path) -> Result<Vec<PathBuf>> {
    if root.is_file() {
        return Ok(vec![root.to_path_buf()]);
    }
    if !root.is_dir() {
        return Err(Error::Config(format!(
            "input {} does not exist; pass folders (or files) of cleaned .jsonl/.parquet rows",
            root.display()
        )));
    }
    let mut files = Vec::new();
    let is_hidden = |entry: &walkdir::DirEntry| {
        entry.depth() > 0
            && entry
                .file_name()
                .to_str()
                .is_some_and(|name| name.starts_with('.'))
    };
    // Hidden files and folders (editor backups, other tools' temporaries) are not inputs.
    for entry in walkdir::WalkDir::new(root)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| !is_hidden(e))
    {
        let entry = entry.map_err(|e| {
            Error::Config(format!("cannot list input folder {}: {e}", root.display()))
        })?;
        if entry.file_type().is_file() && Format::of(entry.path()).is_some() {
            files.push(entry.into_path());
        }
    }
    Ok(files)
}

/// The files under `inputs` with their task names: the path relative to its root with every
/// `/` replaced by `__`, extension kept (`Platypus/arb.jsonl` -> `Platypus__arb.jsonl`).
/// Two files with the same task name are an error.
pub fn task_files(inputs: &[PathBuf]) -> Result<Vec<(String, PathBuf)>> {
    if inputs.is_empty() {
        return Err(Error::Config("no input folders given".into()));
    }
    let mut tasks = Vec::new();
    let mut seen: std::collections::HashMap<String, PathBuf> = Default::default();
    for root in inputs {
        for source in discover(root)? {
            let relative = if root.is_file() {
                PathBuf::from(source.file_name().unwrap_or_default())
            } else {
                source.strip_prefix(root).unwrap_or(&source).to_path_buf()
            };
            let name = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("__");
            if let Some(previous) = seen.insert(name.clone(), source.clone()) {
                return Err(Error::Config(format!(
                    "two input files map to the task name {name:?}: {} and {}; task names must be \
                     unique across the input folders",
                    previous.display(),
                    source.display()
                )));
            }
            tasks.push((name, source));
        }
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discover_is_sorted_recursive_and_filters_extensions() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("b/sub")).unwrap();
        for name in [
            "z.jsonl",
            "a.parquet",
            "b/sub/c.jsonl",
            "notes.txt",
            ".hidden.jsonl",
        ] {
            std::fs::write(root.join(name), b"").unwrap();
        }
        let found: Vec<_> = discover(root)
            .unwrap()
            .into_iter()
            .map(|p| p.strip_prefix(root).unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(found, ["a.parquet", "b/sub/c.jsonl", "z.jsonl"]);
    }

    #[test]
    fn task_names_join_path_components_and_must_be_unique() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(a.path().join("Platypus")).unwrap();
        std::fs::write(a.path().join("Platypus/arb.jsonl"), b"").unwrap();
        std::fs::write(b.path().join("x.parquet"), b"").unwrap();
        let names: Vec<_> = task_files(&[a.path().into(), b.path().into()])
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["Platypus__arb.jsonl", "x.parquet"]);
        std::fs::write(a.path().join("x.parquet"), b"").unwrap();
        let err = task_files(&[a.path().into(), b.path().into()]).unwrap_err();
        assert!(err.to_string().contains("task name \"x.parquet\""), "{err}");
    }

    #[test]
    fn missing_root_is_a_config_error() {
        let err = discover(Path::new("/definitely/not/here")).unwrap_err();
        assert!(err.to_string().contains("does not exist"));
    }
}
