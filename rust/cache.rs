//! The cache record of a task folder (`metadata.json`) and the decision whether a source file
//! must be tokenized again.
//!
//! The original keyed only on the source's size and mtime. Ours keys on the source content
//! (BLAKE3), the tokenizer file's content and every option that changes the output. The
//! size+mtime pair is kept as a fast path: when it matches, the content is not re-read; when
//! it differs, the content hash decides (a touched-but-identical file is not re-tokenized).

use std::fs;
use std::path::Path;
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::task_writer::ARRAY_FILES;

/// Marks folders written by this tool; only those are ever deleted as orphans.
pub const TOOL: &str = "data_io";
/// Bumped when the layout or the record changes meaning.
pub const FORMAT_VERSION: u32 = 1;
pub const METADATA: &str = "metadata.json";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskRecord {
    /// Seconds since the epoch, as the original recorded it.
    pub source_mtime: f64,
    pub source_size: u64,
    pub tool: String,
    pub format_version: u32,
    pub source_path: String,
    pub source_mtime_ns: u128,
    pub source_blake3: String,
    pub tokenizer_blake3: String,
    pub options_blake3: String,
    pub options: serde_json::Value,
    pub token_dtype: String,
    pub rows: u64,
    pub tokens: u64,
    pub bad_rows: u64,
    #[serde(default)]
    pub bad_row_examples: Vec<String>,
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// Size and modification time of a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceStat {
    pub size: u64,
    pub mtime_ns: u128,
}

impl SourceStat {
    pub fn of(path: &Path) -> Result<Self> {
        let meta = fs::metadata(path).map_err(|e| Error::read(path, e))?;
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        Ok(SourceStat {
            size: meta.len(),
            mtime_ns,
        })
    }

    pub fn mtime_seconds(&self) -> f64 {
        self.mtime_ns as f64 / 1e9
    }
}

pub fn file_blake3(path: &Path) -> Result<String> {
    let mut hasher = blake3::Hasher::new();
    hasher.update_mmap(path).map_err(|e| Error::read(path, e))?;
    Ok(hasher.finalize().to_hex().to_string())
}

pub fn bytes_blake3(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// What the inputs of a run hash to; a task is fresh only if its record has the same.
pub struct Fingerprint {
    pub tokenizer_blake3: String,
    pub options_blake3: String,
    /// Whether bad rows are fatal: a task that skipped bad rows is re-checked under `fail`.
    pub fail_on_bad_rows: bool,
}

/// What to do with one task's folder.
#[derive(Debug)]
pub enum Decision {
    /// Up to date; `touch` says the record needs the new mtime (content was unchanged).
    Fresh {
        touch: bool,
    },
    Stale(&'static str),
}

/// How the existing folder of a task (if any) relates to this tool.
pub enum Existing {
    Absent,
    Ours(Box<TaskRecord>),
    /// Written by the original pipeline (same layout, size+mtime record): safe to replace.
    Original,
    /// Something this tool did not write: never touched.
    Foreign(String),
}

pub fn inspect(task_dir: &Path) -> Existing {
    if !task_dir.exists() {
        return Existing::Absent;
    }
    let path = task_dir.join(METADATA);
    let Ok(text) = fs::read_to_string(&path) else {
        return Existing::Foreign("it has no metadata.json".into());
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Existing::Foreign("its metadata.json is not JSON".into());
    };
    if value.get("tool").and_then(|t| t.as_str()) == Some(TOOL) {
        return match serde_json::from_value::<TaskRecord>(value) {
            Ok(record) => Existing::Ours(Box::new(record)),
            // Ours but from an incompatible version: rebuild it.
            Err(_) => Existing::Original,
        };
    }
    if value.get("source_mtime").is_some() && value.get("source_size").is_some() {
        return Existing::Original;
    }
    Existing::Foreign("its metadata.json was not written by data_io".into())
}

pub fn decide(
    record: &TaskRecord,
    task_dir: &Path,
    source: &Path,
    stat: SourceStat,
    fingerprint: &Fingerprint,
) -> Result<Decision> {
    if record.format_version != FORMAT_VERSION {
        return Ok(Decision::Stale("written by another data_io format version"));
    }
    if record.tokenizer_blake3 != fingerprint.tokenizer_blake3 {
        return Ok(Decision::Stale("the tokenizer changed"));
    }
    if record.options_blake3 != fingerprint.options_blake3 {
        return Ok(Decision::Stale("the layout options changed"));
    }
    if fingerprint.fail_on_bad_rows && record.bad_rows > 0 {
        return Ok(Decision::Stale(
            "it skipped bad rows and --on-error is fail",
        ));
    }
    if ARRAY_FILES.iter().any(|f| !task_dir.join(f).is_file()) {
        return Ok(Decision::Stale("an array file is missing"));
    }
    if record.source_size == stat.size && record.source_mtime_ns == stat.mtime_ns {
        return Ok(Decision::Fresh { touch: false });
    }
    if record.source_size != stat.size {
        return Ok(Decision::Stale("the source changed"));
    }
    if file_blake3(source)? == record.source_blake3 {
        Ok(Decision::Fresh { touch: true })
    } else {
        Ok(Decision::Stale("the source changed"))
    }
}

/// Write `value` as JSON to `path` through a temporary file and a rename.
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let tmp = path.with_extension(format!("json.tmp-{}", std::process::id()));
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::Output(format!("cannot serialise {}: {e}", path.display())))?;
    fs::write(&tmp, text + "\n").ctx("cannot write", &tmp)?;
    fs::rename(&tmp, path).ctx("cannot rename into place", path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(stat: SourceStat, source_blake3: String) -> TaskRecord {
        TaskRecord {
            source_mtime: stat.mtime_seconds(),
            source_size: stat.size,
            tool: TOOL.into(),
            format_version: FORMAT_VERSION,
            source_path: String::new(),
            source_mtime_ns: stat.mtime_ns,
            source_blake3,
            tokenizer_blake3: "tok".into(),
            options_blake3: "opt".into(),
            options: serde_json::Value::Null,
            token_dtype: "uint32".into(),
            rows: 1,
            tokens: 3,
            bad_rows: 0,
            bad_row_examples: vec![],
            warnings: vec![],
        }
    }

    #[test]
    fn decisions_follow_content_tokenizer_and_options() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("a.jsonl");
        fs::write(&source, b"content").unwrap();
        let task = dir.path().join("task");
        fs::create_dir(&task).unwrap();
        for f in ARRAY_FILES {
            fs::write(task.join(f), b"").unwrap();
        }
        let stat = SourceStat::of(&source).unwrap();
        let rec = record(stat, file_blake3(&source).unwrap());
        let fp = |t: &str, o: &str, fail: bool| Fingerprint {
            tokenizer_blake3: t.into(),
            options_blake3: o.into(),
            fail_on_bad_rows: fail,
        };
        let decision = |r: &TaskRecord, s: SourceStat, f: &Fingerprint| {
            format!("{:?}", decide(r, &task, &source, s, f).unwrap())
        };
        assert_eq!(
            decision(&rec, stat, &fp("tok", "opt", true)),
            "Fresh { touch: false }"
        );
        assert!(decision(&rec, stat, &fp("new", "opt", true)).contains("tokenizer changed"));
        assert!(decision(&rec, stat, &fp("tok", "new", true)).contains("options changed"));
        // Touched but identical: the hash decides, and the record is refreshed.
        let touched = SourceStat {
            mtime_ns: stat.mtime_ns + 5,
            ..stat
        };
        assert_eq!(
            decision(&rec, touched, &fp("tok", "opt", true)),
            "Fresh { touch: true }"
        );
        // Same size and mtime but another content is caught when the mtime moved.
        fs::write(&source, b"CONTENT").unwrap();
        assert!(decision(&rec, touched, &fp("tok", "opt", true)).contains("source changed"));
        let mut skipped = rec.clone();
        skipped.bad_rows = 2;
        assert!(decision(&skipped, stat, &fp("tok", "opt", true)).contains("skipped bad rows"));
        assert!(decision(&skipped, stat, &fp("tok", "opt", false)).contains("Fresh"));
        fs::remove_file(task.join("tokens.npy")).unwrap();
        assert!(decision(&rec, stat, &fp("tok", "opt", true)).contains("missing"));
    }

    #[test]
    fn inspect_tells_ours_original_and_foreign_apart() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            inspect(&dir.path().join("none")),
            Existing::Absent
        ));
        let original = dir.path().join("orig");
        fs::create_dir(&original).unwrap();
        fs::write(
            original.join(METADATA),
            r#"{"source_mtime": 1, "source_size": 2}"#,
        )
        .unwrap();
        assert!(matches!(inspect(&original), Existing::Original));
        let foreign = dir.path().join("foreign");
        fs::create_dir(&foreign).unwrap();
        assert!(matches!(inspect(&foreign), Existing::Foreign(_)));
        let ours = dir.path().join("ours");
        fs::create_dir(&ours).unwrap();
        let stat = SourceStat {
            size: 1,
            mtime_ns: 2,
        };
        write_json_atomic(&ours.join(METADATA), &record(stat, "h".into())).unwrap();
        assert!(matches!(inspect(&ours), Existing::Ours(_)));
    }
}
