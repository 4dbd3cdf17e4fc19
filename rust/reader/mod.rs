//! Streaming readers of cleaned rows (`condition`, `instruction`, `response`).
//!
//! A reader yields batches; a batch decodes its rows on access (`Batch::row`), so that the
//! caller can decode and encode the rows of one batch in parallel. Memory is bounded by a
//! batch, never by the file.
//!
//! - `mod.rs`: the face: `RowReader` (a file, or a span of one, as batches), `Batch`, `RowText`,
//!   the input discovery (`task_files`) and `OnError` (what a bad row does, for every stage
//!   that reads rows).
//! - `jsonl.rs`: JSONL rows (plain, gzip or zstd), split into lines here, parsed per row.
//! - `parquet.rs`: Parquet rows, a row group at a time, with its page checks.
//! - `json_row.rs`: the parser of one JSONL row (public for its fuzz target).
//! - `frames/`: where a compressed file can be entered in the middle (zstd frames, BGZF
//!   members, xz blocks), and its text decompressed on several threads.

pub mod frames;
// Public for the fuzz target `fuzz/fuzz_targets/json_row.rs` (differential against serde_json).
#[doc(hidden)]
pub mod json_row;
mod jsonl;
mod parquet;

use std::borrow::Cow;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::error::{Error, Location, Result};
use crate::progress::ByteProgress;

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

/// How a file is stored on disk; decompression streams, so memory stays bounded. `tokenize`
/// reads JSONL rows stored plain, gzip or zstd (`Format::of`); `prepare` reads all five.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
    Bzip2,
    Xz,
}

/// Read size from disk (progress moves in steps of at most this much), and what a
/// decompressing reader buffers.
pub const READ_BUFFER: usize = 1 << 20;

/// The bytes of `raw`, stored with `compression`, decompressed as they are read. A file of
/// several streams (`cat a.gz b.gz`, zstd frames, bzip2 or xz streams, as `pbzip2` and `xz -T`
/// write them) is read whole; a stream cut short fails its read. Bytes that do not begin with
/// the format's magic fail at once with a [`NotCompressed`] (see [`not_compressed`]).
pub fn decompressed(
    mut raw: impl BufRead + Send + 'static,
    compression: Compression,
) -> std::io::Result<Box<dyn BufRead + Send>> {
    if compression != Compression::None {
        let head = raw.fill_buf()?;
        if !head.is_empty() && !starts_with_magic(compression, head) {
            let head = head[..head.len().min(8)].to_vec();
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                NotCompressed { compression, head },
            ));
        }
    }
    Ok(match compression {
        Compression::None => Box::new(raw),
        Compression::Gzip => Box::new(BufReader::with_capacity(
            READ_BUFFER,
            flate2::bufread::MultiGzDecoder::new(raw),
        )),
        Compression::Zstd => Box::new(BufReader::with_capacity(
            READ_BUFFER,
            zstd::stream::read::Decoder::with_buffer(raw)?,
        )),
        Compression::Bzip2 => Box::new(BufReader::with_capacity(
            READ_BUFFER,
            bzip2::bufread::MultiBzDecoder::new(raw),
        )),
        Compression::Xz => Box::new(BufReader::with_capacity(
            READ_BUFFER,
            liblzma::bufread::XzDecoder::new_multi_decoder(raw),
        )),
    })
}

/// Whether `head`, a file's first bytes, can begin a file of `compression` (a shorter head:
/// whether it begins the magic; the decoder then says the file is cut short).
fn starts_with_magic(compression: Compression, head: &[u8]) -> bool {
    let magic: &[u8] = match compression {
        Compression::None => return true,
        Compression::Gzip => &[0x1f, 0x8b],
        // A zstd file may also begin with a skippable frame (pzstd writes one first):
        // 0x184D2A50..=0x184D2A5F, little-endian (a shorter head: a prefix of one).
        Compression::Zstd if head[0] & 0xf0 == 0x50 => {
            let n = head.len().min(4);
            return head[1..n] == [0x2a, 0x4d, 0x18][..n - 1];
        }
        Compression::Zstd => &[0x28, 0xb5, 0x2f, 0xfd],
        Compression::Bzip2 => b"BZh",
        Compression::Xz => &[0xfd, b'7', b'z', b'X', b'Z', 0x00],
    };
    let n = head.len().min(magic.len());
    head[..n] == magic[..n]
}

/// A file named as compressed (`.gz`, `.zst`, `.bz2`, `.xz`) whose first bytes are not that
/// format's: most often a plain file given a compressed name, so the message shows how the file
/// begins and says to rename it, rather than calling it a corrupt archive.
#[derive(Debug)]
pub struct NotCompressed {
    pub compression: Compression,
    /// The file's first bytes (at most 8).
    pub head: Vec<u8>,
}

impl std::fmt::Display for NotCompressed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (name, ending, magic) = match self.compression {
            Compression::None => ("plain", "", ""),
            Compression::Gzip => ("gzip", ".gz", "1f 8b"),
            Compression::Zstd => ("zstd", ".zst", "28 b5 2f fd"),
            Compression::Bzip2 => ("bzip2", ".bz2", "42 5a 68 (\"BZh\")"),
            Compression::Xz => ("xz", ".xz", "fd 37 7a 58 5a 00"),
        };
        let hex: Vec<String> = self.head.iter().map(|b| format!("{b:02x}")).collect();
        let text = std::str::from_utf8(&self.head)
            .ok()
            .filter(|t| t.chars().all(|c| !c.is_control() || c.is_whitespace()))
            .map(|t| format!(", text {t:?}"))
            .unwrap_or_default();
        write!(
            f,
            "not a {name} file: it begins with {}{text}, not {name}'s magic bytes {magic}; if \
             it is not compressed, rename it without the {ending} ending, else it is damaged: \
             re-download or re-compress it",
            hex.join(" ")
        )
    }
}

impl std::error::Error for NotCompressed {}

/// The [`NotCompressed`] that `error` carries, if `decompressed` refused the file's first bytes.
pub fn not_compressed(error: &std::io::Error) -> Option<&NotCompressed> {
    error.get_ref()?.downcast_ref::<NotCompressed>()
}

/// Input formats, chosen by the end of the file name, case-insensitively.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Jsonl(Compression),
    Parquet,
}

/// The file-name endings read as rows, for messages.
pub const SUPPORTED: &str = ".jsonl, .jsonl.gz, .jsonl.zst or .parquet";

impl Format {
    pub fn of(path: &Path) -> Option<Format> {
        // `a.JSONL` is as much a JSONL file as `a.jsonl`: exports from other systems vary.
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        [
            (".jsonl", Format::Jsonl(Compression::None)),
            (".jsonl.gz", Format::Jsonl(Compression::Gzip)),
            (".jsonl.zst", Format::Jsonl(Compression::Zstd)),
            (".parquet", Format::Parquet),
        ]
        .into_iter()
        .find(|(suffix, _)| name.len() > suffix.len() && name.ends_with(suffix))
        .map(|(_, format)| format)
    }
}

/// What a bad row does: to `tokenize` and `train` alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// The first bad row fails its file; the run exits non-zero.
    Fail,
    /// Bad rows are skipped, counted per file and recorded in the task's metadata.
    Skip,
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

/// The part of a file a reader reads: all of it, the lines that start in a byte range of an
/// uncompressed JSONL file (a range cut at line starts by the planner), the lines of a run of a
/// compressed JSONL file's parts (`end`: the next part's start, or the file's size; cut at
/// line starts as the text is read, `frames::LinesOfParts`), or a range of Parquet row groups.
/// Split files are how one big file's work is shared among workers (`scale`). A `Text` span is
/// the lines between the cuts for two offsets of a gzip stream's text, `total` bytes long, read
/// from an entry point (its window handed beside the span; none: from the text's start), as
/// `frames::LinesOfText` cuts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Span {
    Whole,
    Bytes {
        start: u64,
        end: u64,
    },
    Parts {
        start: u64,
        end: u64,
    },
    Text {
        start: u64,
        end: u64,
        total: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        point: Option<frames::gzip_points::PointAt>,
    },
    RowGroups {
        start: usize,
        end: usize,
    },
}

impl RowReader {
    /// `open`, reading only `span` of the file. A JSONL span's lines are numbered from 1 at
    /// its start (the caller knows where it lies in the file); a Parquet span's rows keep their
    /// index in the file.
    /// `window`: a `Text` span's entry point's window (empty for other spans).
    pub fn open_span(
        path: &Path,
        span: Span,
        window: &[u8],
        batch_rows: usize,
        progress: ByteProgress,
    ) -> Result<RowReader> {
        let mismatch = |what: &str| {
            Err(Error::Config(format!(
                "{}: a {what} span of a {} file; the plan that cut it is stale, plan again",
                path.display(),
                match Format::of(path) {
                    Some(Format::Jsonl(Compression::None)) => "plain JSONL",
                    Some(Format::Jsonl(_)) => "compressed JSONL",
                    Some(Format::Parquet) => "Parquet",
                    None => "unsupported",
                }
            )))
        };
        match (span, Format::of(path)) {
            (Span::Whole, _) => Self::open(path, batch_rows, progress),
            (Span::Bytes { start, end }, Some(Format::Jsonl(Compression::None))) => {
                Ok(RowReader::Jsonl(JsonlReader::open_range(
                    path,
                    start..end,
                    batch_rows,
                    progress,
                )?))
            }
            (Span::Parts { start, end }, Some(Format::Jsonl(compression)))
                if compression != Compression::None =>
            {
                let size = std::fs::metadata(path)
                    .map_err(|e| Error::read(path, e))?
                    .len();
                let end = (end < size).then_some(end);
                Ok(RowReader::Jsonl(JsonlReader::open_parts(
                    path,
                    compression,
                    start,
                    end,
                    batch_rows,
                    progress,
                )?))
            }
            (
                Span::Text {
                    start,
                    end,
                    total,
                    point,
                },
                Some(Format::Jsonl(Compression::Gzip)),
            ) => Ok(RowReader::Jsonl(JsonlReader::open_text(
                path,
                start..end,
                total,
                point.map(|at| frames::gzip_points::EntryPoint::new(at, window.to_vec())),
                batch_rows,
                progress,
            )?)),
            (Span::RowGroups { start, end }, Some(Format::Parquet)) => Ok(RowReader::Parquet(
                ParquetReader::open_row_groups(path, start..end, batch_rows, progress)?,
            )),
            (Span::Bytes { .. }, _) => mismatch("byte-range"),
            (Span::Parts { .. }, _) => mismatch("compressed-parts"),
            (Span::Text { .. }, _) => mismatch("gzip text"),
            (Span::RowGroups { .. }, _) => mismatch("row-group"),
        }
    }

    /// Lines (JSONL) or rows (Parquet) read so far, blank lines included.
    pub fn lines_read(&self) -> u64 {
        match self {
            RowReader::Jsonl(r) => r.lines_read(),
            RowReader::Parquet(r) => r.rows_read(),
        }
    }

    /// The BLAKE3 (hex) of the whole file, when the reader took it while reading the file to
    /// its end (whole JSONL files); `None` otherwise.
    pub fn source_blake3(&self) -> Option<String> {
        match self {
            RowReader::Jsonl(r) => r.source_blake3(),
            RowReader::Parquet(_) => None,
        }
    }

    /// Open `path` by its name (see `Format`); reading advances `progress` by the bytes of
    /// the file consumed.
    pub fn open(path: &Path, batch_rows: usize, progress: ByteProgress) -> Result<RowReader> {
        match Format::of(path) {
            Some(Format::Jsonl(compression)) => Ok(RowReader::Jsonl(JsonlReader::open(
                path,
                compression,
                batch_rows,
                progress,
            )?)),
            Some(Format::Parquet) => Ok(RowReader::Parquet(ParquetReader::open(
                path, batch_rows, progress,
            )?)),
            None => Err(Error::bad_file(
                path,
                format!("unsupported file type; expected {SUPPORTED}"),
            )),
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

/// What a walk of the input roots found.
#[derive(Debug, Default)]
pub struct Inputs {
    /// The input roots, canonical (absolute, links resolved): records name their sources by
    /// absolute path, so that a later run can tell whether a source still exists.
    pub roots: Vec<PathBuf>,
    /// (task name, source file), in root order then path order.
    pub tasks: Vec<(String, PathBuf)>,
    /// Visible files that are not rows (by name); listed so that nothing is skipped silently.
    pub skipped: Vec<PathBuf>,
}

/// The row files under `root` (recursively, following links) and the other visible files,
/// each sorted by path so that runs are deterministic. A file given directly is a row file
/// if its name says so.
fn discover(root: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let (mut files, mut skipped) = (Vec::new(), Vec::new());
    let mut sort = |path: PathBuf| match Format::of(&path) {
        Some(_) => files.push(path),
        None => skipped.push(path),
    };
    if root.is_file() {
        sort(root.to_path_buf());
        return Ok((files, skipped));
    }
    let is_hidden = |entry: &walkdir::DirEntry| {
        entry.depth() > 0
            && entry
                .file_name()
                .to_str()
                .is_some_and(|name| name.starts_with('.'))
    };
    // Hidden files and folders (editor backups, other tools' temporaries) are not inputs; a
    // `clean` run's note of a group of files being replaced is looked for among them.
    let mut commit_notes = Vec::new();
    for entry in walkdir::WalkDir::new(root)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            let hidden = is_hidden(e);
            if hidden && is_clean_commit_note(e) {
                commit_notes.push(e.path().to_path_buf());
            }
            !hidden
        })
    {
        let entry = entry.map_err(|e| walk_error(root, &e))?;
        if entry.file_type().is_file() {
            sort(entry.into_path());
        }
    }
    if let Some(note) = commit_notes.first() {
        return Err(clean_commit_unfinished(note));
    }
    Ok((files, skipped))
}

/// The name `data_io clean` gives the note it writes beside a group of output files while it
/// replaces them one by one (`data_io/cleaning/group_commit.py`, `_GROUP_NOTE`); removed once all
/// stand.
const CLEAN_COMMIT_NOTE: &str = ".data_io-clean-commit-";

fn is_clean_commit_note(entry: &walkdir::DirEntry) -> bool {
    entry.file_type().is_file()
        && entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.starts_with(CLEAN_COMMIT_NOTE))
}

/// A folder whose files a `clean` run was replacing when it stopped (or still is) holds new
/// files beside previous ones: read as one output, it would mix two cleanings.
fn clean_commit_unfinished(note: &Path) -> Error {
    let folder = note.parent().unwrap_or(note);
    Error::Input(format!(
        "{} holds {}: a `data_io clean` run was replacing the files of that folder and has not \
         finished (it was stopped, or it is still running), so new and previous files stand \
         side by side; nothing was read. Run that cleaner again (it first puts the previous \
         files back; a note another machine wrote, once it is ten minutes old), or let the \
         running one finish, then run this again",
        folder.display(),
        note.file_name().unwrap_or_default().to_string_lossy()
    ))
}

/// A failed step of the walk of `root`, said with what to do: a link that goes nowhere or back
/// up into the folder it is in is named as such (the walk follows links), anything else as the
/// system's error.
fn walk_error(root: &Path, error: &walkdir::Error) -> Error {
    let path = error.path().unwrap_or(root);
    let why = if let Some(ancestor) = error.loop_ancestor() {
        format!(
            "{} links back to {}, a folder it is in (the walk follows links); remove the link",
            path.display(),
            ancestor.display()
        )
    } else if path.is_symlink() && !path.exists() {
        let target =
            std::fs::read_link(path).map_or_else(|_| "?".into(), |t| t.display().to_string());
        format!(
            "{} is a broken link (to {target}, which does not exist); remove it or point it at a \
             file",
            path.display()
        )
    } else {
        error.to_string()
    };
    Error::Config(format!(
        "cannot list input folder {}: {why}",
        root.display()
    ))
}

/// `root` made absolute with links resolved; a missing root is a configuration error.
fn canonical_root(root: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(root).map_err(|e| {
        Error::Config(if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "input {} does not exist; pass folders (or files) of cleaned rows ({SUPPORTED})",
                root.display()
            )
        } else {
            format!("cannot resolve input {}: {e}", root.display())
        })
    })
}

/// The files under `inputs` with their task names: the path relative to its root with every
/// `/` replaced by `__`, full file name kept (`Platypus/arb.jsonl.gz` ->
/// `Platypus__arb.jsonl.gz`). Checked before anything is read: roots must not overlap (one
/// source would become two tasks), every root must hold a row file (a wrong or emptied
/// folder must not look like an input whose files were all deleted), and task names must be
/// unique.
pub fn task_files(inputs: &[PathBuf]) -> Result<Inputs> {
    task_files_for(
        inputs,
        "an emptied input would otherwise look like one whose files were all deleted, and its \
         tasks would be removed",
    )
}

/// `task_files`, saying `why` an input without row files is refused (the stage's reason).
pub fn task_files_for(inputs: &[PathBuf], why: &str) -> Result<Inputs> {
    if inputs.is_empty() {
        return Err(Error::Config("no input folders given".into()));
    }
    let roots = inputs
        .iter()
        .map(|given| canonical_root(given))
        .collect::<Result<Vec<_>>>()?;
    check_roots_disjoint(inputs, &roots)?;
    let mut found = Inputs::default();
    let mut seen: std::collections::HashMap<String, PathBuf> = Default::default();
    // Where each file really is: a symbolic link (to a file, or to a folder) would make one
    // source two tasks, as overlapping roots would.
    let mut files_at: std::collections::HashMap<PathBuf, PathBuf> = Default::default();
    for root in roots {
        let (files, skipped) = discover(&root)?;
        if files.is_empty() {
            return Err(no_row_files(&root, &skipped, why));
        }
        for source in files {
            let real = std::fs::canonicalize(&source).unwrap_or_else(|_| source.clone());
            if let Some(previous) = files_at.insert(real.clone(), source.clone()) {
                // The path that is not the file's own goes through the link to remove.
                let link = if source != real { &source } else { &previous };
                return Err(Error::Config(format!(
                    "{} and {} are the same file ({}), reached through a symbolic link: its rows \
                     would be read twice, as two tasks. Give the file once: remove the link on \
                     the way to {} (or leave out the input that reaches it; copy the file if its \
                     rows are meant to be there twice)",
                    previous.display(),
                    source.display(),
                    real.display(),
                    link.display()
                )));
            }
            let name = task_name(&root, &source);
            if let Some(previous) = seen.insert(name.clone(), source.clone()) {
                return Err(Error::Config(format!(
                    "two input files map to the task name {name:?}: {} and {}; task names must be \
                     unique across the input folders",
                    previous.display(),
                    source.display()
                )));
            }
            found.tasks.push((name, source));
        }
        found.skipped.extend(skipped);
        found.roots.push(root);
    }
    Ok(found)
}

impl Inputs {
    /// The root `source` was found under (roots do not overlap, so there is one).
    pub fn root_of(&self, source: &Path) -> Option<&Path> {
        self.roots
            .iter()
            .find(|root| source.starts_with(root))
            .map(PathBuf::as_path)
    }
}

/// Two roots where one is, or lies inside, the other would give one source file two task
/// names (`data` and `data/Platypus` both yield `.../code.jsonl`, as `Platypus__code.jsonl`
/// and `code.jsonl`), i.e. two task folders holding the same rows.
fn check_roots_disjoint(given: &[PathBuf], roots: &[PathBuf]) -> Result<()> {
    for i in 0..roots.len() {
        for j in i + 1..roots.len() {
            let (inner, outer) = if roots[j].starts_with(&roots[i]) {
                (j, i)
            } else if roots[i].starts_with(&roots[j]) {
                (i, j)
            } else {
                continue;
            };
            let shown = |k: usize| format!("{} ({})", given[k].display(), roots[k].display());
            let message = if roots[i] == roots[j] {
                format!(
                    "the input {} and the input {} are the same folder; give it once",
                    shown(i),
                    shown(j)
                )
            } else {
                format!(
                    "the input {} is inside the input {}: its files would be tokenized twice, \
                     under two task names. Give {} alone, or {} without it",
                    shown(inner),
                    shown(outer),
                    given[outer].display(),
                    given[inner].display()
                )
            };
            return Err(Error::Config(message));
        }
    }
    Ok(())
}

fn task_name(root: &Path, source: &Path) -> String {
    let relative = if root.is_file() {
        PathBuf::from(source.file_name().unwrap_or_default())
    } else {
        source.strip_prefix(root).unwrap_or(source).to_path_buf()
    };
    relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("__")
}

fn no_row_files(root: &Path, skipped: &[PathBuf], why: &str) -> Error {
    let others = match skipped.len() {
        0 => "it holds no files at all".to_string(),
        1 => format!("it holds 1 other file, {}", examples(skipped, 3)),
        n => format!("it holds {n} other files, e.g. {}", examples(skipped, 3)),
    };
    Error::Config(format!(
        "no {SUPPORTED} files under the input {} ({others}); nothing was read, written or \
         deleted. Pass only folders (or files) that hold cleaned rows: {why}",
        root.display()
    ))
}

/// The first `n` paths, comma-separated, for messages.
pub fn examples(paths: &[PathBuf], n: usize) -> String {
    let shown: Vec<String> = paths
        .iter()
        .take(n)
        .map(|p| p.display().to_string())
        .collect();
    shown.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relative(root: &Path, paths: &[PathBuf]) -> Vec<String> {
        let root = std::fs::canonicalize(root).unwrap();
        paths
            .iter()
            .map(|p| {
                p.strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    }

    #[test]
    fn a_plain_file_with_a_compressed_name_is_named_as_such_and_real_archives_open() {
        use std::io::{Cursor, Read, Write};
        let text = b"plain text\n".to_vec();
        for (compression, name, ending) in [
            (Compression::Gzip, "gzip", ".gz"),
            (Compression::Zstd, "zstd", ".zst"),
            (Compression::Bzip2, "bzip2", ".bz2"),
            (Compression::Xz, "xz", ".xz"),
        ] {
            let Err(error) = decompressed(Cursor::new(text.clone()), compression) else {
                panic!("{name}: plain text opened as {name}");
            };
            let not = not_compressed(&error).expect("a NotCompressed");
            let message = not.to_string();
            assert!(message.starts_with(&format!("not a {name} file: it begins with 70 6c 61 69 6e 20 74 65, text \"plain te\", not {name}'s magic bytes")), "{message}");
            assert!(
                message.contains(&format!("rename it without the {ending} ending")),
                "{message}"
            );
        }
        let binary = not_compressed(
            &decompressed(Cursor::new(vec![0u8, 1, 2]), Compression::Gzip)
                .err()
                .unwrap(),
        )
        .unwrap()
        .to_string();
        assert!(
            binary.starts_with("not a gzip file: it begins with 00 01 02, not gzip's"),
            "{binary}"
        );
        // Real archives of each format open and read back, and so does a zstd file that starts
        // with a skippable frame (as pzstd writes them).
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&text).unwrap();
        let zst = zstd::encode_all(&text[..], 1).unwrap();
        let mut skippable = vec![0x5e, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4];
        skippable.extend_from_slice(&zst);
        let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        bz.write_all(&text).unwrap();
        let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 1);
        xz.write_all(&text).unwrap();
        for (compression, bytes) in [
            (Compression::Gzip, gz.finish().unwrap()),
            (Compression::Zstd, zst),
            (Compression::Zstd, skippable),
            (Compression::Bzip2, bz.finish().unwrap()),
            (Compression::Xz, xz.finish().unwrap()),
        ] {
            let mut back = Vec::new();
            decompressed(Cursor::new(bytes), compression)
                .unwrap()
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, text, "{compression:?}");
        }
        // The first bytes of a magic alone are a cut file, which the decoder reports as such.
        for (bytes, compression) in [
            (vec![0x1f], Compression::Gzip),
            (vec![0x5e], Compression::Zstd),
            (vec![0x5e, 0x2a], Compression::Zstd),
        ] {
            let cut = decompressed(Cursor::new(bytes), compression);
            let mut back = Vec::new();
            assert!(
                cut.unwrap().read_to_end(&mut back).is_err(),
                "{compression:?}"
            );
        }
        assert!(decompressed(Cursor::new(vec![0x5e, 0x2b]), Compression::Zstd).is_err());
    }

    #[test]
    fn formats_are_chosen_by_name_case_insensitively() {
        let of = |name: &str| Format::of(Path::new(name));
        assert_eq!(of("a.jsonl"), Some(Format::Jsonl(Compression::None)));
        assert_eq!(of("dir/A.JSONL"), Some(Format::Jsonl(Compression::None)));
        assert_eq!(of("a.jsonl.gz"), Some(Format::Jsonl(Compression::Gzip)));
        assert_eq!(of("a.JSONL.ZST"), Some(Format::Jsonl(Compression::Zstd)));
        assert_eq!(of("a.Parquet"), Some(Format::Parquet));
        for other in [
            "a.json",
            "a.gz",
            "a.jsonl.bz2",
            ".jsonl",
            "jsonl",
            "a.parquet.tmp",
        ] {
            assert_eq!(of(other), None, "{other}");
        }
    }

    #[test]
    fn a_broken_link_or_a_link_loop_in_an_input_folder_is_named_with_the_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::write(root.join("a.jsonl"), "{}\n").expect("written");
        std::os::unix::fs::symlink(root.join("gone.jsonl"), root.join("broken.jsonl"))
            .expect("link");
        let error = task_files(&[root.to_path_buf()]).expect_err("a broken link");
        let message = error.to_string();
        assert!(
            message.contains("broken.jsonl is a broken link"),
            "{message}"
        );
        assert!(
            message.contains("remove it or point it at a file"),
            "{message}"
        );
        std::fs::remove_file(root.join("broken.jsonl")).expect("removed");
        std::fs::create_dir(root.join("sub")).expect("folder");
        std::os::unix::fs::symlink(root, root.join("sub").join("up")).expect("link");
        let message = task_files(&[root.to_path_buf()])
            .expect_err("a loop")
            .to_string();
        assert!(message.contains("up links back to"), "{message}");
        assert!(message.contains("remove the link"), "{message}");
    }

    #[test]
    fn a_folder_that_clean_was_replacing_is_refused_until_the_note_is_gone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let group = dir.path().join("Platypus");
        std::fs::create_dir_all(&group).expect("folder");
        std::fs::write(group.join("a.parquet"), "new").expect("written");
        std::fs::write(group.join("b.parquet"), "old").expect("written");
        let note = group.join(".data_io-clean-commit-123-abc");
        std::fs::write(&note, "{}").expect("written");
        let error = task_files(&[dir.path().to_path_buf()]).expect_err("a half-replaced folder");
        assert_eq!(error.kind(), crate::error::ErrorKind::Input);
        let message = error.to_string();
        assert!(
            message.contains("Platypus holds .data_io-clean-commit-123-abc"),
            "{message}"
        );
        assert!(message.contains("Run that cleaner again"), "{message}");
        // Other hidden files are passed over as before, and without the note the folder reads.
        std::fs::remove_file(&note).expect("removed");
        std::fs::write(group.join(".notes"), "mine").expect("written");
        let found = task_files(&[dir.path().to_path_buf()]).expect("no note");
        assert_eq!(found.tasks.len(), 2);
    }

    #[test]
    fn one_file_reached_through_a_link_is_refused_not_tokenized_twice() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (inputs, other) = (dir.path().join("in"), dir.path().join("other"));
        std::fs::create_dir_all(&inputs).expect("folder");
        std::fs::create_dir_all(&other).expect("folder");
        std::fs::write(other.join("x.jsonl"), "{}\n").expect("written");
        std::fs::write(inputs.join("own.jsonl"), "{}\n").expect("written");
        // A link to a folder, and one to a file inside it: the same file twice.
        std::os::unix::fs::symlink(&other, inputs.join("dirlink")).expect("link");
        std::os::unix::fs::symlink(other.join("x.jsonl"), inputs.join("link.jsonl")).expect("link");
        let message = task_files(std::slice::from_ref(&inputs))
            .expect_err("the same file twice")
            .to_string();
        assert!(message.contains("are the same file"), "{message}");
        assert!(
            !message.contains("  "),
            "one line, no runs of spaces: {message}"
        );
        assert!(
            message.contains("x.jsonl), reached through a symbolic link"),
            "{message}"
        );
        // Both paths go through links here; the advice names one of them, not "the inputs".
        let named = |path: PathBuf| message.contains(&format!("the way to {} (", path.display()));
        assert!(
            named(inputs.join("link.jsonl")) || named(inputs.join("dirlink").join("x.jsonl")),
            "{message}"
        );
        // One link alone is a file like any other; so is a file given as a second input that
        // another input links to (two roots, one file) refused the same way.
        std::fs::remove_file(inputs.join("link.jsonl")).expect("removed");
        let found = task_files(std::slice::from_ref(&inputs)).expect("one link is fine");
        let names: Vec<&str> = found.tasks.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["dirlink__x.jsonl", "own.jsonl"]);
        let message = task_files(&[inputs.clone(), other.join("x.jsonl")])
            .expect_err("two roots, one file")
            .to_string();
        assert!(message.contains("are the same file"), "{message}");
    }

    #[test]
    fn discover_is_sorted_recursive_and_lists_what_it_skips() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("b/sub")).unwrap();
        std::fs::create_dir_all(root.join(".cache")).unwrap();
        for name in [
            "z.jsonl",
            "a.parquet",
            "b/sub/c.jsonl.gz",
            "b/D.JSONL",
            "notes.txt",
            "b/rows.json",
            ".hidden.jsonl",
            ".cache/x.txt",
        ] {
            std::fs::write(root.join(name), b"").unwrap();
        }
        let found = task_files(&[root.into()]).unwrap();
        let sources: Vec<PathBuf> = found.tasks.iter().map(|(_, p)| p.clone()).collect();
        assert_eq!(
            relative(root, &sources),
            ["a.parquet", "b/D.JSONL", "b/sub/c.jsonl.gz", "z.jsonl"]
        );
        let names: Vec<&str> = found.tasks.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["a.parquet", "b__D.JSONL", "b__sub__c.jsonl.gz", "z.jsonl"]
        );
        assert_eq!(relative(root, &found.skipped), ["b/rows.json", "notes.txt"]);
        assert!(sources.iter().all(|p| p.is_absolute()));
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
            .tasks
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["Platypus__arb.jsonl", "x.parquet"]);
        std::fs::write(a.path().join("x.parquet"), b"").unwrap();
        let err = task_files(&[a.path().into(), b.path().into()]).unwrap_err();
        assert!(err.to_string().contains("task name \"x.parquet\""), "{err}");
    }

    #[test]
    fn inputs_without_row_files_are_an_error_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        let err = task_files(&[dir.path().into()]).unwrap_err().to_string();
        assert!(
            err.contains("no .jsonl, .jsonl.gz, .jsonl.zst or .parquet files"),
            "{err}"
        );
        assert!(err.contains("it holds no files at all"), "{err}");
        std::fs::write(dir.path().join("rows.csv"), b"").unwrap();
        let err = task_files(&[dir.path().into()]).unwrap_err().to_string();
        assert!(
            err.contains("1 other file, ") && err.contains("rows.csv"),
            "{err}"
        );
    }

    #[test]
    fn one_empty_root_among_several_is_an_error_naming_it() {
        let full = tempfile::tempdir().unwrap();
        let empty = tempfile::tempdir().unwrap();
        std::fs::write(full.path().join("a.jsonl"), b"").unwrap();
        std::fs::create_dir(empty.path().join("sub")).unwrap();
        std::fs::write(empty.path().join("sub/.hidden.jsonl"), b"").unwrap();
        for order in [[full.path(), empty.path()], [empty.path(), full.path()]] {
            let inputs: Vec<PathBuf> = order.iter().map(|p| p.to_path_buf()).collect();
            let err = task_files(&inputs).unwrap_err().to_string();
            let root = std::fs::canonicalize(empty.path()).unwrap();
            assert!(
                err.contains(&format!("files under the input {} (", root.display())),
                "{err}"
            );
            assert!(!err.contains(&full.path().display().to_string()), "{err}");
        }
    }

    #[test]
    fn overlapping_roots_are_refused_naming_both() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("data/Platypus")).unwrap();
        std::fs::create_dir_all(root.join("data_clustered")).unwrap();
        std::fs::write(root.join("data/a.jsonl"), b"").unwrap();
        std::fs::write(root.join("data/Platypus/code.jsonl"), b"").unwrap();
        std::fs::write(root.join("data_clustered/b.parquet"), b"").unwrap();
        let data = root.join("data");
        let platypus = root.join("data/Platypus");
        let file = root.join("data/Platypus/code.jsonl");
        // A sibling whose name merely starts with the other's is not inside it.
        assert!(task_files(&[data.clone(), root.join("data_clustered")]).is_ok());
        for (inputs, inner, outer) in [
            (vec![data.clone(), platypus.clone()], &platypus, &data),
            (vec![platypus.clone(), data.clone()], &platypus, &data),
            (vec![platypus.clone(), file.clone()], &file, &platypus),
            (vec![data.clone(), file.clone()], &file, &data),
        ] {
            let err = task_files(&inputs).unwrap_err();
            assert_eq!(err.kind(), crate::error::ErrorKind::Config);
            let err = err.to_string();
            assert!(
                err.contains(&format!("the input {} (", inner.display()))
                    && err.contains(&format!("is inside the input {} (", outer.display())),
                "{err}"
            );
        }
        // The same folder twice, once through a different spelling.
        let err = task_files(&[data.clone(), root.join("data/Platypus/..")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("are the same folder; give it once"), "{err}");
    }

    #[test]
    fn root_of_finds_the_root_of_each_source() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("a/x")).unwrap();
        std::fs::create_dir_all(root.join("b")).unwrap();
        std::fs::write(root.join("a/x/one.jsonl"), b"").unwrap();
        std::fs::write(root.join("b/two.jsonl"), b"").unwrap();
        let found = task_files(&[root.join("a"), root.join("b/two.jsonl")]).unwrap();
        let roots: Vec<_> = found
            .tasks
            .iter()
            .map(|(_, source)| found.root_of(source).unwrap().to_path_buf())
            .collect();
        assert_eq!(roots, [root.join("a"), root.join("b/two.jsonl")]);
        assert_eq!(found.root_of(&root.join("c.jsonl")), None);
    }

    #[test]
    fn missing_root_is_a_config_error() {
        let err = task_files(&[PathBuf::from("/definitely/not/here")]).unwrap_err();
        assert!(err.to_string().contains("does not exist"));
    }
}
