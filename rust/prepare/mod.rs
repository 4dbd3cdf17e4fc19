//! The raw-text path of `prepare` (issue 26), moving into Rust a step at a time; the Python
//! pipeline (`data_io/prepare/`, `data_io/formats/raw_text.py`) stays the oracle in the tests
//! until this replaces it.
//!
//! - `split.rs`: pieces of raw text cut into documents (spans of one buffer);
//! - `file.rs`: a file (or a range of it) read straight into the buffer, decompressed on the way;
//! - `cuts.rs`: where a range of a compressed file starts and ends, found as its text is read;
//! - `rows.rs`: a document's text from its span (UTF-8, carriage returns, a JSONL field);
//! - `clean.rs`: normalisation and filtering of documents, as `data_io/prepare/normalize.py`;
//! - `hash.rs`: the documents' 128-bit BLAKE2b, as `data_io/prepare/dedup.py`'s `hash_texts`;
//! - `near.rs`: MinHash signatures and LSH bands for `--dedup near`;
//! - `lines.rs`: `--dedup line`'s line hashes, and documents rebuilt from the lines kept;
//! - `seen.rs`: exact duplicates decided as documents arrive, while their hashes fit the budget;
//! - `record_set.rs`: the flat table of 128-bit records `seen.rs` keeps, looked up a batch at a time;
//! - `batch.rs`: a batch read, cleaned and hashed on the encoder's threads;
//! - `val_split.rs`: the train/val split of `split.py`, for a batch encoded split by split.

pub mod batch;
pub mod clean;
pub mod cuts;
pub mod file;
pub mod hash;
pub mod lines;
pub mod near;
pub mod record_set;
pub mod rows;
pub mod seen;
pub mod split;
pub mod val_split;
