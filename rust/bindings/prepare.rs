//! `data_io prepare`'s calls: raw documents read in Rust, a batch cleaned, hashed and encoded,
//! lines and documents de-duplicated, the records sorted.

use std::path::PathBuf;

use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
    PyReadwriteArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::encoder::encode_batch as encode_texts;
use crate::error::{Error, IoContext};
use crate::prepare::lines::LineBatch;

use super::allocator::keep_freed_memory_a_while;
use super::call::{to_py_err, IdsAndOffsets};
use super::encoder::{str_views, Encoder, HeldStrings};

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
    /// `point`: a gzip entry point (`gzip_entry_points`) to read from: `start` and `end` are
    /// targets past its text offset.
    #[pyo3(signature = (path, start = 0, end = None, compression = None, parts = false,
        lanes = None, point = None))]
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
        point: Option<PointTuple>,
    ) -> PyResult<()> {
        use crate::prepare::file::FileFeed;
        if parts && point.is_some() {
            return Err(PyValueError::new_err(
                "a range of parts starts at a part, not at a gzip entry point: give one",
            ));
        }
        let point = point.map(entry_point);
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
            .detach(|| match (parts, point) {
                // Only the range's own parts are walked (`frames::parts_in`).
                (true, _) => crate::reader::frames::parts_in(&path, compression, start, end)
                    .and_then(|parts| FileFeed::open_parts(path, parts, start, end, format, lanes)),
                (false, Some(point)) => FileFeed::open_at_point(path, &point, start, end, format),
                (false, None) => {
                    FileFeed::open_compressed(path, compression, start, end, format, lanes)
                }
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

/// A gzip entry point as Python holds it: bit, text offset, newlines before, its member's text
/// start, the CRC-32 of that member's text before it, and its window.
type PointTuple = (u64, u64, u64, u64, u32, pyo3::pybacked::PyBackedBytes);

fn entry_point(point: PointTuple) -> crate::reader::frames::gzip_points::EntryPoint {
    let (bit, text, newlines, member_text, crc, window) = point;
    crate::reader::frames::gzip_points::EntryPoint {
        bit,
        text,
        newlines,
        member_text,
        crc,
        window: window.to_vec(),
    }
}

/// The entry points of the gzip file `path`, about `every` compressed bytes apart
/// (`frames::gzip_points`), as tuples, and its text's length and newlines: one pass over the
/// file without the GIL, stopped by Ctrl-C.
#[pyfunction]
fn gzip_entry_points<'py>(
    py: Python<'py>,
    path: PathBuf,
    every: u64,
) -> PyResult<PointsFound<'py>> {
    let index = super::call::interruptible(py, || {
        crate::reader::frames::gzip_points::entry_points(&path, every)
    })?;
    Ok((point_tuples(py, &index)?, index.text, index.newlines))
}

/// A file's entry points as tuples, and its text's length and newlines.
type PointsFound<'py> = (Vec<Bound<'py, pyo3::types::PyTuple>>, u64, u64);

/// `gzip_entry_points` of several files at once, one file a thread (as many threads as cores,
/// at most one a file), in the order asked: a plan's passes over several big gzip streams take
/// the longest one's time, not their sum. The first failing file's error (in that order) is
/// raised; Ctrl-C stops every pass.
#[pyfunction]
fn gzip_entry_points_of<'py>(
    py: Python<'py>,
    requests: Vec<(PathBuf, u64)>,
) -> PyResult<Vec<PointsFound<'py>>> {
    use rayon::prelude::*;
    let indexes = super::call::interruptible(py, || {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(cores.min(requests.len()).max(1))
            .thread_name(|k| format!("gzip-points-{k}"))
            .build()
            .map_err(|e| Error::Config(format!("cannot start the plan's threads: {e}")))?;
        let found: Vec<_> = pool.install(|| {
            requests
                .par_iter()
                .map(|(path, every)| crate::reader::frames::gzip_points::entry_points(path, *every))
                .collect()
        });
        found.into_iter().collect::<Result<Vec<_>, Error>>()
    })?;
    indexes
        .iter()
        .map(|index| Ok((point_tuples(py, index)?, index.text, index.newlines)))
        .collect()
}

/// An index's points as `gzip_entry_points` gives them.
fn point_tuples<'py>(
    py: Python<'py>,
    index: &crate::reader::frames::gzip_points::Index,
) -> PyResult<Vec<Bound<'py, pyo3::types::PyTuple>>> {
    use pyo3::types::PyBytes;
    index
        .points
        .iter()
        .map(|p| {
            let window = PyBytes::new(py, &p.window);
            (p.bit, p.text, p.newlines, p.member_text, p.crc, window).into_pyobject(py)
        })
        .collect()
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

/// This module's functions and classes, added to `data_io._core`.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(hash_texts, m)?)?;
    m.add_function(wrap_pyfunction!(prepare_batch, m)?)?;
    m.add_function(wrap_pyfunction!(text_length_estimate, m)?)?;
    m.add_function(wrap_pyfunction!(compressed_parts, m)?)?;
    m.add_function(wrap_pyfunction!(gzip_entry_points, m)?)?;
    m.add_function(wrap_pyfunction!(gzip_entry_points_of, m)?)?;
    m.add_function(wrap_pyfunction!(keep_lines, m)?)?;
    m.add_function(wrap_pyfunction!(sort_records, m)?)?;
    m.add_class::<RawDocuments>()?;
    m.add_class::<SeenHashes>()?;
    Ok(())
}
