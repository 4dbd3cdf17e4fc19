//! Single-thread speed of the row readers (`RowReader`: JSONL, compressed JSONL, Parquet), best
//! of 5 passes over one file, for side-by-side comparisons of two builds:
//!
//!   python -m benchmarks.corpus work/corpus          # big.jsonl, big.parquet, many/*.jsonl
//!   cargo run --release --example read_speed -- work/corpus/big.parquet
use std::path::Path;
use std::time::Instant;

use data_io_core::progress::ByteProgress;
use data_io_core::reader::RowReader;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: read_speed FILE (.jsonl, .jsonl.gz, .jsonl.zst or .parquet)");
        std::process::exit(2);
    };
    let (mut best, mut rows, mut bytes) = (f64::MAX, 0u64, 0usize);
    for _ in 0..5 {
        let started = Instant::now();
        (rows, bytes) = (0, 0);
        let reader = RowReader::open(Path::new(&path), 1024, ByteProgress::none());
        for batch in reader.unwrap_or_else(fail) {
            let batch = batch.unwrap_or_else(fail);
            for i in 0..batch.len() {
                let row = batch.row(i).unwrap_or_else(fail);
                bytes += row.condition.len() + row.instruction.len() + row.response.len();
                rows += 1;
            }
        }
        best = best.min(started.elapsed().as_secs_f64());
    }
    let rate = bytes as f64 / best / 1e6;
    println!("{rows} rows, {bytes} bytes of text: best of 5 {best:.3} s, {rate:.0} MB/s");
}

/// A bad file ends the measurement with its error (what, where), not a panic.
fn fail<T>(error: data_io_core::error::Error) -> T {
    eprintln!("read_speed: {error}");
    std::process::exit(1)
}
