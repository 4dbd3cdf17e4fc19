//! The Parquet reader (`reader::RowReader`, rust/reader/parquet.rs) on mutated files: seeded
//! with small valid files of the three string columns (fuzz/seeds/parquet_reader, made by
//! fuzz/make_seeds.py), every batch and row read, whole and as a span of row groups. It must
//! return `Ok` or `Err`, never panic.
//!
//! The input is the file itself (so that the seeds are plain Parquet files); its length picks
//! the batch size and whether a row-group span is read too. The reader turns panics of
//! Parquet's plain column readers into errors (`contained`); only a panic out of `RowReader`
//! is a crash here (see `common`).
#![no_main]

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use data_io_core::error::Location;
use data_io_core::progress::ByteProgress;
use data_io_core::reader::{RowReader, Span};
use libfuzzer_sys::fuzz_target;

fn path() -> &'static Path {
    static PATH: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = PATH.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("rows.parquet");
        (dir, path)
    });
    path
}

/// Read every batch and row; rows must come one after the other with their file index
/// (`first_row` when known), and `lines_read` count them.
fn read_all(mut reader: RowReader, first_row: Option<u64>) {
    let mut next = first_row;
    let mut count = 0u64;
    for batch in reader.by_ref() {
        let Ok(batch) = batch else {
            return;
        };
        for i in 0..batch.len() {
            let Location::Row(at) = batch.location(i) else {
                panic!("a Parquet row without a row index");
            };
            if let Some(expected) = next {
                assert_eq!(at, expected, "rows out of order");
            }
            next = Some(at + 1);
            count += 1;
            if let Ok(row) = batch.row(i) {
                std::hint::black_box(
                    row.condition.len() + row.instruction.len() + row.response.len(),
                );
            }
        }
    }
    assert_eq!(reader.lines_read(), count, "rows_read");
}

fn read_file(data: &[u8]) {
    let path = path();
    std::fs::write(path, data).expect("write the input file");
    let batch_rows = data.len() % 5 + 1;
    if let Ok(reader) = RowReader::open(path, batch_rows, ByteProgress::none()) {
        read_all(reader, Some(0));
    }
    if data.len().is_multiple_of(2) {
        // The second row group alone (a file of one group: a stale plan, an error). Its rows
        // keep their index in the file.
        let span = Span::RowGroups { start: 1, end: 2 };
        if let Ok(reader) = RowReader::open_span(path, span, batch_rows, ByteProgress::none()) {
            read_all(reader, None);
        }
    }
}

fuzz_target!(init: common::record_panics(), |data: &[u8]| {
    common::check(|| read_file(data));
});
