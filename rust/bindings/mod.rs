//! The Python extension `data_io._core`: thin wrappers that convert arguments, release the GIL
//! around the work, and map `Error` once onto the classes of `data_io/errors.py`.
//! Reports cross the boundary as JSON text; the typed facade (`data_io/tokenize/api.py`,
//! `data_io/tokenizer/train.py`, `data_io/_core.pyi`) turns them into dataclasses.
//! This folder is the crate's only PyO3 code, one file a stage; `call.rs` is what they share.

mod allocator;
mod call;
mod encoder;
mod prepare;
mod sampling;
mod tokenize;
mod train;

use pyo3::prelude::*;

#[pymodule]
#[pyo3(name = "_core")]
fn core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    allocator::heap_on_small_pages();
    tokenize::register(m)?;
    train::register(m)?;
    sampling::register(m)?;
    encoder::register(m)?;
    prepare::register(m)?;
    Ok(())
}
