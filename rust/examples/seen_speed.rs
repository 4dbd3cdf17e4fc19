//! The online de-duplication set (`prepare::seen::SeenHashes`) recording a corpus's worth of
//! records batch by batch, as `--dedup near` records its bands, on pools of 1 and N threads
//! (one thread takes the serial path, as before the set was cut into shards), then sorting
//! them (into one array, and as the kept-hashes file is written); fastest of five rounds, each
//! on a set new to the process's pages:
//!
//!   cargo run --release --example seen_speed -- [RECORDS] [BATCH] [THREADS] [BANDS]
//!
//! Defaults: 4,200,000 records (the race's main slice under `--dedup near`: 300k documents of
//! 14 bands), batches of 196,000, 2 threads; one record in seven repeats an earlier one.
//! BANDS: 0 (the default) for 128-bit records in the set for them; else (hash, band) records
//! of that many bands in the set made for near-dedup's bands (`SeenHashes::banded`).
use std::time::Instant;

use data_io_core::prepare::seen::SeenHashes;

fn main() {
    let arg = |k: usize, default: usize| {
        std::env::args()
            .nth(k)
            .map_or(default, |v| v.parse().unwrap_or(default))
    };
    let (count, batch, threads, bands) = (arg(1, 4_200_000), arg(2, 196_000), arg(3, 2), arg(4, 0));
    // splitmix64: records spread over the shards as real hashes are.
    let distinct = (count as u64 * 6 / 7).max(1);
    let records: Vec<[u64; 2]> = (0..count as u64)
        .map(|i| {
            let mut z = (i % distinct).wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            let second = if bands == 0 {
                i % distinct
            } else {
                (i % distinct) % bands as u64
            };
            [z ^ (z >> 31), second]
        })
        .collect();
    println!("{count} records in batches of {batch}, {bands} bands");
    for pool_threads in [1, threads] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(pool_threads)
            .build()
            .unwrap_or_else(|e| panic!("a pool of {pool_threads}: {e}"));
        let (mut record, mut sort, mut write) = (f64::MAX, f64::MAX, f64::MAX);
        for _ in 0..5 {
            let mut seen = match bands {
                0 => SeenHashes::new(8 << 30),
                bands => SeenHashes::banded(8 << 30, bands),
            };
            let started = Instant::now();
            pool.install(|| {
                seen.expect(records.len());
                for part in records.chunks(batch.max(1)) {
                    seen.first_seen(part);
                }
            });
            record = record.min(started.elapsed().as_secs_f64());
            let started = Instant::now();
            let sorted = pool.install(|| seen.sorted());
            sort = sort.min(started.elapsed().as_secs_f64());
            // The kept-hashes file's bytes, as prepare writes them (to nowhere here).
            let started = Instant::now();
            pool.install(|| seen.write_sorted(&mut std::io::sink()))
                .unwrap_or_else(|e| panic!("writing to a sink: {e}"));
            write = write.min(started.elapsed().as_secs_f64());
            assert_eq!(sorted.len() as u64, distinct);
        }
        println!(
            "{pool_threads} thread(s): record {record:.3} s, sort {sort:.3} s, write sorted {write:.3} s"
        );
    }
}
