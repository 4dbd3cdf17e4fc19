//! The raw-text path of `prepare` (issue 26), moving into Rust a step at a time; the Python
//! pipeline (`data_io/prepare/`) stays the oracle in the tests until this replaces it.
//!
//! - `clean.rs`: normalisation and filtering of documents, as `data_io/prepare/normalize.py`.
//! - `hash.rs`: the documents' 128-bit BLAKE2b, as `data_io/prepare/dedup.py`'s `hash_texts`.

pub mod clean;
pub mod hash;
