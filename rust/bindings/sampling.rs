//! The sample stage's calls: numpy's Philox, an epoch's gather and the token pool's copy.

use std::path::PathBuf;

use numpy::{PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray1, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::error::Error;
use crate::sampling::gather::{gather_epoch as gather_rows, EpochColumns, RowRecord};
use crate::sampling::philox::NumpyPhilox;
use crate::sampling::pool::{copy_pool, PoolSource, PoolTarget, TokenType};

use super::call::to_py_err;

/// numpy's `Philox` state (its `.state` fields), advanced by the sampler's shuffles.
#[pyclass(module = "data_io._core", name = "Philox")]
struct Philox {
    inner: NumpyPhilox,
}

/// The fields of numpy's `Philox.state`: counter, key, buffer, buffer_pos, has_uint32, uinteger.
type PhiloxState = ([u64; 4], [u64; 2], [u64; 4], usize, bool, u32);

#[pymethods]
impl Philox {
    #[new]
    fn new(state: PhiloxState) -> PyResult<Self> {
        let (counter, key, buffer, buffer_pos, has_uint32, uinteger) = state;
        if buffer_pos > buffer.len() {
            return Err(PyValueError::new_err(format!(
                "Philox buffer_pos must be at most 4, not {buffer_pos}"
            )));
        }
        Ok(Self {
            inner: NumpyPhilox {
                counter,
                key,
                buffer,
                buffer_pos,
                has_uint32,
                uinteger,
            },
        })
    }

    fn state(&self) -> PhiloxState {
        let rng = &self.inner;
        (
            rng.counter,
            rng.key,
            rng.buffer,
            rng.buffer_pos,
            rng.has_uint32,
            rng.uinteger,
        )
    }

    /// Shuffle a 1-D int64 array in place, as `Generator.shuffle` would.
    fn shuffle(&mut self, py: Python<'_>, mut array: PyReadwriteArray1<'_, i64>) -> PyResult<()> {
        let data = array
            .as_slice_mut()
            .map_err(|e| PyValueError::new_err(format!("shuffle needs a contiguous array: {e}")))?;
        let rng = &mut self.inner;
        py.detach(|| rng.shuffle(data));
        Ok(())
    }
}

/// Gather an epoch's four columns from the `(rows, 4)` table by row id.
#[pyfunction]
fn gather_epoch(
    py: Python<'_>,
    table: PyReadonlyArray2<'_, i64>,
    row_ids: PyReadonlyArray1<'_, i64>,
    mut inst_start: PyReadwriteArray1<'_, i64>,
    mut inst_len: PyReadwriteArray1<'_, i64>,
    mut resp_start: PyReadwriteArray1<'_, i64>,
    mut resp_len: PyReadwriteArray1<'_, i64>,
) -> PyResult<()> {
    let contiguous = |e: numpy::NotContiguousError| {
        PyValueError::new_err(format!("gather_epoch needs contiguous arrays: {e}"))
    };
    if table.shape().get(1) != Some(&4) {
        return Err(PyValueError::new_err(format!(
            "gather_epoch needs a (rows, 4) table, not {:?}",
            table.shape()
        )));
    }
    let table: &[RowRecord] = bytemuck::cast_slice(table.as_slice().map_err(contiguous)?);
    let row_ids = row_ids.as_slice().map_err(contiguous)?;
    let out = EpochColumns {
        inst_start: inst_start.as_slice_mut().map_err(contiguous)?,
        inst_len: inst_len.as_slice_mut().map_err(contiguous)?,
        resp_start: resp_start.as_slice_mut().map_err(contiguous)?,
        resp_len: resp_len.as_slice_mut().map_err(contiguous)?,
    };
    py.detach(|| gather_rows(table, row_ids, out))
        .map_err(|e| to_py_err(py, e))
}

/// One source of the token pool: task, path, numpy dtype string, data offset (bytes),
/// length and pool offset (tokens).
type PoolSourceArgs = (String, PathBuf, String, u64, u64, u64);

/// Copy every task's tokens into the pool file (created with its header and size).
/// `progress(tokens)` is called now and then; a false return cancels the copy. Ids at or
/// above `vocab_size` (when given) are refused like ids the pool's dtype cannot hold.
#[pyfunction]
#[pyo3(signature = (path, header_len, token_dtype, sources, *, readers, progress,
                    vocab_size = None))]
#[allow(clippy::too_many_arguments)]
fn copy_token_pool(
    py: Python<'_>,
    path: PathBuf,
    header_len: u64,
    token_dtype: &str,
    sources: Vec<PoolSourceArgs>,
    readers: usize,
    progress: Py<PyAny>,
    vocab_size: Option<u64>,
) -> PyResult<()> {
    let parsed = (|| -> Result<(PoolTarget, Vec<PoolSource>), Error> {
        let target = PoolTarget {
            path,
            header_len,
            token_type: TokenType::from_numpy(token_dtype)?,
            vocab_size,
        };
        let sources = sources
            .into_iter()
            .map(|(task, path, dtype, data_offset, length, pool_offset)| {
                Ok(PoolSource {
                    task,
                    path,
                    token_type: TokenType::from_numpy(&dtype)?,
                    data_offset,
                    length,
                    pool_offset,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok((target, sources))
    })();
    let (target, sources) = parsed.map_err(|e| to_py_err(py, e))?;
    // Called from the reader threads, without the GIL: take it just for the call. A
    // callback that raises cancels the copy like one that returns False.
    let report = |tokens: u64| {
        Python::attach(|py| {
            progress
                .call1(py, (tokens,))
                .and_then(|keep_going| keep_going.bind(py).is_truthy())
                .unwrap_or(false)
        })
    };
    py.detach(|| copy_pool(&sources, &target, readers, &report))
        .map_err(|e| to_py_err(py, e))
}

/// This module's functions and classes, added to `data_io._core`.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(gather_epoch, m)?)?;
    m.add_function(wrap_pyfunction!(copy_token_pool, m)?)?;
    m.add_class::<Philox>()?;
    Ok(())
}
