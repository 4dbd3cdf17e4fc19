//! Rust core of data_io: streaming readers of cleaned rows, the tokenized layout, incremental
//! parallel tokenization, tokenizer training and the sampler's heavy loops. Plain Rust, tested
//! with `cargo test`; the Python bindings live in `bindings/` alone, behind the `python`
//! feature.

pub mod byte_masks;
pub mod encoder;
pub mod error;
pub mod fs;
pub mod interrupt;
pub mod layout;
pub mod prepare;
pub mod progress;
pub mod reader;
pub mod sampling;
pub mod table_memory;
pub mod tokenize;
pub mod tokenizer_format;
pub mod train;

#[cfg(feature = "python")]
mod bindings;

pub use error::{Error, ErrorKind, Result};
