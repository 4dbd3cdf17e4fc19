//! The cache record of a task folder (`metadata.json`) and the decision whether a source file
//! must be tokenized again.
//!
//! The original keyed only on the source's size and mtime. Ours keys on the source content
//! (BLAKE3), the tokenizer file's content and every option that changes the output. The
//! size+mtime pair is kept as a fast path: when it matches, the content is not re-read; when
//! it differs, the content hash decides (a touched-but-identical file is not re-tokenized).

use std::fs;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

use super::task_writer::ARRAY_FILES;
use crate::error::{Error, Result};

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
    /// The input root the task name is relative to (absolute), so that a later run can name
    /// the roots of the tasks it keeps. Absent in records of older data_io versions.
    #[serde(default)]
    pub source_root: Option<String>,
    pub source_mtime_ns: u128,
    /// The source's status-change time when it was read: an edit whose size and mtime were
    /// put back (`touch -d`) still moves it, so the content is hashed again. Absent in
    /// records of older data_io versions (size and mtime decide there, as they did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ctime_ns: Option<u128>,
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

/// Size, modification and status-change times of a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceStat {
    pub size: u64,
    pub mtime_ns: u128,
    /// Set by the kernel on every change of the file, never by a user (`touch -d` sets only
    /// mtime and atime): with size and mtime, the fast check that the content is unchanged.
    pub ctime_ns: u128,
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
            ctime_ns: ctime_ns(&meta),
        })
    }

    pub fn mtime_seconds(&self) -> f64 {
        self.mtime_ns as f64 / 1e9
    }
}

#[cfg(unix)]
fn ctime_ns(meta: &fs::Metadata) -> u128 {
    use std::os::unix::fs::MetadataExt;
    u128::try_from(meta.ctime()).unwrap_or(0) * 1_000_000_000
        + u128::try_from(meta.ctime_nsec()).unwrap_or(0)
}

#[cfg(not(unix))]
fn ctime_ns(_meta: &fs::Metadata) -> u128 {
    0
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
    /// The run's token dtype (`TokenDtype::name`), one of the options hashed: named apart
    /// when it is the one that changed.
    pub token_dtype: &'static str,
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
        return Ok(Decision::Stale(
            if record.token_dtype != fingerprint.token_dtype {
                "the token dtype changed (--token-dtype)"
            } else {
                "the layout options changed (--boq, --eoq, --eoa or --conditions)"
            },
        ));
    }
    if fingerprint.fail_on_bad_rows && record.bad_rows > 0 {
        return Ok(Decision::Stale(
            "it skipped bad rows and --on-error is fail",
        ));
    }
    // An empty file is an error under `fail` too: its empty task, kept under `skip`, is
    // checked again as a task that skipped bad rows is.
    if fingerprint.fail_on_bad_rows && record.rows == 0 {
        return Ok(Decision::Stale("it is empty and --on-error is fail"));
    }
    if let Some(reason) = arrays_mismatch(record, task_dir) {
        return Ok(Decision::Stale(reason));
    }
    let same_ctime = record
        .source_ctime_ns
        .is_none_or(|ctime| ctime == stat.ctime_ns);
    if record.source_size == stat.size && record.source_mtime_ns == stat.mtime_ns && same_ctime {
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

/// What the header of one `.npy` file says, and whether the file is as long as it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyShape {
    /// The numpy type string, e.g. `<u4`.
    pub dtype: String,
    pub shape: Vec<u64>,
    /// Whether the file holds exactly the bytes the header announces (a truncated or
    /// appended-to file does not).
    pub complete: bool,
}

/// Read only the header of `path` (a few hundred bytes, whatever the array's size).
pub fn npy_shape(path: &Path) -> std::io::Result<NpyShape> {
    let mut file = fs::File::open(path)?;
    let file_len = file.metadata()?.len();
    check_header(&mut file, file_len)?;
    let header = npyz::NpyHeader::from_reader(&mut file)?;
    let data_start = file.stream_position()?;
    let dtype = match header.dtype() {
        npyz::DType::Plain(ty) => ty.to_string(),
        other => other.descr(),
    };
    let item = header.dtype().num_bytes().unwrap_or(0) as u64;
    // A damaged header can announce any shape: a count past u64 is not this file's.
    let count = header
        .shape()
        .iter()
        .try_fold(1u64, |count, &n| count.checked_mul(n));
    let complete = count
        .and_then(|count| count.checked_mul(item))
        .and_then(|bytes| bytes.checked_add(data_start))
        == Some(file_len);
    Ok(NpyShape {
        dtype,
        shape: header.shape().to_vec(),
        complete,
    })
}

/// Headers longer than this are not read: numpy writes a few hundred bytes (and by default
/// refuses to read more than 10,000).
const MAX_NPY_HEADER: u64 = 1 << 20;
/// How deep `[` and `{` may nest in a header: numpy writes one dict, and a list per level of a
/// structured dtype.
const MAX_NPY_NESTING: usize = 4;

/// An error for a `.npy` header npyz must not be given (found by
/// fuzz/fuzz_targets/npy_header.rs): one whose announced length (a 16-bit field in version 1,
/// a 32-bit one in versions 2 and 3) goes past the end of the file or past `MAX_NPY_HEADER`,
/// since npyz allocates that length before reading (4 GiB for a 12-byte damaged file, an abort
/// where that much memory cannot be had); and one whose `[` / `{` nest deeper than
/// `MAX_NPY_NESTING`, since npyz's parser (py_literal) takes time exponential in that depth (a
/// 150-byte header of 50 `{` did not finish). npyz reads any header numpy writes.
fn check_header(file: &mut fs::File, file_len: u64) -> std::io::Result<()> {
    let invalid = |message: String| std::io::Error::new(std::io::ErrorKind::InvalidData, message);
    let mut start = Vec::with_capacity(12);
    Read::by_ref(file).take(12).read_to_end(&mut start)?;
    let (prefix, text_len) = match start[..] {
        [0x93, b'N', b'U', b'M', b'P', b'Y', 1, _, a, b, ..] => {
            (10, u64::from(u16::from_le_bytes([a, b])))
        }
        [0x93, b'N', b'U', b'M', b'P', b'Y', 2 | 3, _, a, b, c, d] => {
            (12, u64::from(u32::from_le_bytes([a, b, c, d])))
        }
        _ => return file.rewind(), // npyz says what is wrong
    };
    if prefix + text_len > file_len {
        return Err(invalid(format!(
            "the .npy header announces {} bytes, the file holds {file_len}",
            prefix + text_len
        )));
    }
    if text_len > MAX_NPY_HEADER {
        return Err(invalid(format!("a .npy header of {text_len} bytes")));
    }
    let mut text = Vec::with_capacity(text_len as usize);
    file.seek(std::io::SeekFrom::Start(prefix))?;
    Read::by_ref(file).take(text_len).read_to_end(&mut text)?;
    if nesting(&text) > MAX_NPY_NESTING {
        return Err(invalid(
            "a .npy header nested deeper than numpy writes".into(),
        ));
    }
    file.rewind()
}

/// The deepest nesting of `[` and `{` in a Python literal, outside its strings.
fn nesting(text: &[u8]) -> usize {
    let (mut depth, mut deepest, mut quote, mut escaped) = (0usize, 0, None, false);
    for &c in text {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == b'\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                b'\'' | b'"' => quote = Some(c),
                b'[' | b'{' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    deepest
}

/// The numpy type string of a record's `token_dtype`.
fn token_type_string(token_dtype: &str) -> Option<&'static str> {
    match token_dtype {
        "uint16" => Some("<u2"),
        "uint32" => Some("<u4"),
        _ => None,
    }
}

/// Why the task's arrays do not match its record (lengths, dtypes, truncation), or `None`.
/// Headers only: cheap enough for every task of every run, and it catches a folder damaged
/// after it was written (a shorter `tokens.npy`, an index array of another length).
pub fn arrays_mismatch(record: &TaskRecord, task_dir: &Path) -> Option<&'static str> {
    const DAMAGED: &str = "its arrays do not match its record";
    let Some(token_type) = token_type_string(&record.token_dtype) else {
        return Some(DAMAGED);
    };
    for (i, name) in ARRAY_FILES.iter().enumerate() {
        let path: PathBuf = task_dir.join(name);
        if !path.is_file() {
            return Some("an array file is missing");
        }
        let (dtype, len) = if i == 0 {
            (token_type, record.tokens)
        } else {
            ("<u8", record.rows)
        };
        match npy_shape(&path) {
            Ok(found) if found.dtype == dtype && found.shape == [len] && found.complete => {}
            _ => return Some(DAMAGED),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::write_json_atomic;

    fn record(stat: SourceStat, source_blake3: String) -> TaskRecord {
        TaskRecord {
            source_mtime: stat.mtime_seconds(),
            source_size: stat.size,
            tool: TOOL.into(),
            format_version: FORMAT_VERSION,
            source_path: String::new(),
            source_root: None,
            source_mtime_ns: stat.mtime_ns,
            source_ctime_ns: Some(stat.ctime_ns),
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

    /// A 1-D `.npy` of `values` at `path`, as the task writer and numpy write it.
    fn write_npy<T: npyz::AutoSerialize + Copy>(path: &Path, values: &[T]) {
        use npyz::WriterBuilder;
        let file = fs::File::create(path).unwrap();
        let mut writer = npyz::WriteOptions::new()
            .default_dtype()
            .writer(file)
            .begin_1d()
            .unwrap();
        writer.extend(values.iter().copied()).unwrap();
        writer.finish().unwrap();
    }

    /// A task folder matching `record(..)`: 1 row of 3 `<u4` tokens.
    fn write_arrays(task: &Path) {
        write_npy::<u32>(&task.join("tokens.npy"), &[1, 2, 3]);
        for name in &ARRAY_FILES[1..] {
            write_npy::<u64>(&task.join(name), &[0]);
        }
    }

    #[test]
    fn decisions_follow_content_tokenizer_and_options() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("a.jsonl");
        fs::write(&source, b"content").unwrap();
        let task = dir.path().join("task");
        fs::create_dir(&task).unwrap();
        write_arrays(&task);
        let stat = SourceStat::of(&source).unwrap();
        let rec = record(stat, file_blake3(&source).unwrap());
        let fp = |t: &str, o: &str, fail: bool| Fingerprint {
            tokenizer_blake3: t.into(),
            options_blake3: o.into(),
            token_dtype: "uint32",
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
        assert!(decision(&rec, stat, &fp("tok", "new", true)).contains("options changed (--boq"));
        let mut narrow = rec.clone();
        narrow.token_dtype = "uint16".into();
        assert!(decision(&narrow, stat, &fp("tok", "new", true)).contains("token dtype changed"));
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
        // An edit whose size and mtime were put back (`touch -d`) moved the ctime: hashed, caught.
        let restored = SourceStat {
            ctime_ns: stat.ctime_ns + 1,
            ..stat
        };
        assert!(decision(&rec, restored, &fp("tok", "opt", true)).contains("source changed"));
        // A record of an older version has no ctime: size and mtime decide, as they did.
        let mut older = rec.clone();
        older.source_ctime_ns = None;
        assert_eq!(
            decision(&older, restored, &fp("tok", "opt", true)),
            "Fresh { touch: false }"
        );
        let mut skipped = rec.clone();
        skipped.bad_rows = 2;
        assert!(decision(&skipped, stat, &fp("tok", "opt", true)).contains("skipped bad rows"));
        assert!(decision(&skipped, stat, &fp("tok", "opt", false)).contains("Fresh"));
        let mut empty = rec.clone();
        empty.rows = 0;
        assert!(decision(&empty, stat, &fp("tok", "opt", true)).contains("it is empty"));
        // (Its arrays, of one row, then disagree with it: that is all `skip` finds.)
        assert!(!decision(&empty, stat, &fp("tok", "opt", false)).contains("it is empty"));
        fs::remove_file(task.join("tokens.npy")).unwrap();
        assert!(decision(&rec, stat, &fp("tok", "opt", true)).contains("missing"));
    }

    #[test]
    fn arrays_are_checked_against_the_record_by_their_headers() {
        let dir = tempfile::tempdir().unwrap();
        let task = dir.path();
        write_arrays(task);
        let stat = SourceStat {
            size: 1,
            mtime_ns: 2,
            ctime_ns: 3,
        };
        let rec = record(stat, "h".into());
        assert_eq!(arrays_mismatch(&rec, task), None);
        let damaged = Some("its arrays do not match its record");
        // The record says otherwise: more tokens, fewer rows, another dtype, unknown dtype.
        for change in [
            |r: &mut TaskRecord| r.tokens = 4,
            |r: &mut TaskRecord| r.rows = 0,
            |r: &mut TaskRecord| r.token_dtype = "uint16".into(),
        ] {
            let mut other = rec.clone();
            change(&mut other);
            assert_eq!(arrays_mismatch(&other, task), damaged);
        }
        let mut unknown = rec.clone();
        unknown.token_dtype = "float32".into();
        assert_eq!(arrays_mismatch(&unknown, task), damaged);
        // A shorter array with a valid header, an index array of another length or dtype,
        // a truncated file (header intact) and a file that is not .npy at all.
        type Damage = fn(&Path);
        let cases: [(&str, Damage); 5] = [
            ("tokens.npy", |p| write_npy::<u32>(p, &[1, 2])),
            ("resp_len.npy", |p| write_npy::<u64>(p, &[0, 0])),
            ("inst_len.npy", |p| write_npy::<u32>(p, &[0])),
            ("tokens.npy", |p| {
                let bytes = fs::read(p).unwrap();
                fs::write(p, &bytes[..bytes.len() - 1]).unwrap();
            }),
            ("inst_start.npy", |p| fs::write(p, b"not npy").unwrap()),
        ];
        for (name, damage) in cases {
            write_arrays(task);
            damage(&task.join(name));
            assert_eq!(arrays_mismatch(&rec, task), damaged, "{name}");
        }
        write_arrays(task);
        fs::remove_file(task.join("resp_start.npy")).unwrap();
        assert_eq!(
            arrays_mismatch(&rec, task),
            Some("an array file is missing")
        );
    }

    /// A version 1 `.npy` file with header text `dict` (padded as numpy pads it) and `data`.
    fn npy_bytes(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut text = dict.to_string();
        while !(10 + text.len() + 1).is_multiple_of(64) {
            text.push(' ');
        }
        text.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(text.len() as u16).to_le_bytes());
        bytes.extend_from_slice(text.as_bytes());
        bytes.extend_from_slice(data);
        bytes
    }

    #[test]
    fn damaged_npy_headers_are_errors_or_incomplete_never_a_panic() {
        // fuzz/regressions/npy_header: a version 3 header announcing 4 GiB in a 12-byte file
        // was allocated in full by npyz before it read anything.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.npy");
        fs::write(&path, b"\x93NUMPY\x03\x00\xff\x00\xff\xff").unwrap();
        let err = npy_shape(&path).unwrap_err();
        assert!(
            err.to_string().contains("announces 4294902027 bytes"),
            "{err}"
        );
        let mut short = npy_bytes(
            "{'descr': '<u4', 'fortran_order': False, 'shape': (1,), }",
            b"",
        );
        short[8] = 0xff; // version 1: a 16-bit length past the end
        fs::write(&path, &short).unwrap();
        assert!(npy_shape(&path).is_err());
        // An element count past u64 (2^64 elements of 4 bytes, no data) overflowed the count:
        // a panic with overflow checks, else a wrapped count of 0 and `complete` for a file
        // holding no data.
        let huge = "{'descr': '<u4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }";
        fs::write(&path, npy_bytes(huge, b"")).unwrap();
        let found = npy_shape(&path).unwrap();
        assert_eq!(found.shape, [1 << 32, 1 << 32]);
        assert!(!found.complete);
        // `{` nested 12 deep took minutes in npyz's parser (exponential in the depth).
        let deep = format!(
            "{{'descr': '<u4', 'fortran_order': False, 'shape': (1,), 'x': {}{}}}",
            "{".repeat(12),
            "}".repeat(12)
        );
        fs::write(&path, npy_bytes(&deep, &[0; 4])).unwrap();
        let err = npy_shape(&path).unwrap_err();
        assert!(err.to_string().contains("nested deeper"), "{err}");
        // A structured dtype (a list of tuples, one level of nesting more) still reads, and
        // brackets inside strings do not count.
        let record = "{'descr': [('a[{[{', '<u2'), ('b', [('c', '<f8')])], 'fortran_order': False, 'shape': (1,), }";
        fs::write(&path, npy_bytes(record, &[0; 10])).unwrap();
        assert!(npy_shape(&path).unwrap().complete);
        // A sound file still reads.
        let sound = "{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }";
        fs::write(&path, npy_bytes(sound, &[0; 8])).unwrap();
        let found = npy_shape(&path).unwrap();
        assert_eq!(
            (found.dtype.as_str(), found.shape, found.complete),
            ("<u4", vec![2], true)
        );
    }

    #[test]
    fn records_of_older_versions_without_a_source_root_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let stat = SourceStat {
            size: 1,
            mtime_ns: 2,
            ctime_ns: 3,
        };
        let mut value = serde_json::to_value(record(stat, "h".into())).unwrap();
        value.as_object_mut().unwrap().remove("source_root");
        fs::write(dir.path().join(METADATA), value.to_string()).unwrap();
        match inspect(dir.path()) {
            Existing::Ours(record) => assert_eq!(record.source_root, None),
            _ => panic!("an older record must load as ours"),
        }
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
            ctime_ns: 3,
        };
        write_json_atomic(&ours.join(METADATA), &record(stat, "h".into())).unwrap();
        assert!(matches!(inspect(&ours), Existing::Ours(_)));
    }
}
