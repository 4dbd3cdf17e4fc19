//! `TextEncoder`'s engine (`data_io._core.Encoder`): batches of Python strings, bytes, Arrow
//! and NumPy arrays encoded without the GIL; the node's shared tables let go at exit.

use std::path::PathBuf;

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::encoder::{encode_batch as encode_texts, Encoder as TextEncoderImpl, TextEncoder};

use super::allocator::keep_freed_memory_a_while;
use super::call::{to_py_err, IdsAndOffsets};

/// A tokenizers JSON file, for encoding text on the fly (the HF text datasets of the load stage).
/// Special-token strings inside a text are encoded as plain text, as in `tokenize`.
#[pyclass(module = "data_io._core", name = "Encoder", frozen)]
pub(super) struct Encoder {
    pub(super) inner: std::sync::Arc<TextEncoderImpl>,
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
pub(super) fn str_views<'h, 'py>(
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
pub(super) struct HeldStrings<'py>(std::cell::RefCell<Vec<Bound<'py, PyString>>>);

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

/// Let go of the node's piece-table files this process holds (`tables="node"`), removing
/// each one no other process holds; the encoders keep working. Called at a process's exit.
#[pyfunction]
fn leave_node_tables() {
    crate::encoder::fast_bpe::node_tables::leave_all();
}

/// This module's functions and classes, added to `data_io._core`.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(leave_node_tables, m)?)?;
    m.add_class::<Encoder>()?;
    Ok(())
}
