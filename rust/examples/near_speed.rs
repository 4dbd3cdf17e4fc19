//! Single-thread speed of `--dedup near`'s MinHash (`prepare::near`): the words alone, then
//! the whole band hashes (words, shingles, the signature's minima, the bands), MB/s of text,
//! fastest of five rounds. To compare two builds, run each build's binary in turn.
//!
//!   cargo run --release --example near_speed -- ROWS.jsonl [MEGABYTES] [FIELD]
//!
//! Rows are JSON objects with the text in FIELD (default `text`, as `benchmarks.tokenize_corpus`
//! writes documents); 64 MB by default.
use std::time::Instant;

use data_io_core::prepare::near::{word_hashes, MinHasher, NearOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let Some(rows) = args.get(1) else {
        return Err("usage: near_speed ROWS.jsonl [MEGABYTES] [FIELD]".into());
    };
    let limit = args.get(2).map_or(Ok(64), |m| m.parse::<usize>())? << 20;
    let field = args.get(3).map_or("text", String::as_str);
    let mut texts = Vec::new();
    let mut bytes = 0;
    for line in std::fs::read_to_string(rows)?.lines() {
        let row: serde_json::Value = serde_json::from_str(line)?;
        if let Some(text) = row[field].as_str() {
            bytes += text.len();
            texts.push(text.to_string());
        }
        if bytes >= limit {
            break;
        }
    }
    let megabytes = bytes as f64 / 1e6;
    println!("{} texts, {megabytes:.1} MB from {rows}", texts.len());
    let hasher = MinHasher::new(NearOptions::default());
    let best = |work: &dyn Fn() -> usize| {
        let mut fastest = f64::MAX;
        let mut check = 0;
        for _ in 0..5 {
            let started = Instant::now();
            check = work();
            fastest = fastest.min(started.elapsed().as_secs_f64());
        }
        (megabytes / fastest, check)
    };
    let (words, count) = best(&|| texts.iter().map(|t| word_hashes(t).len()).sum());
    println!("words: {words:.1} MB/s ({count} words)");
    let (bands, check) = best(&|| {
        texts
            .iter()
            .map(|t| {
                hasher
                    .band_hashes(t)
                    .iter()
                    .fold(0, |a, b| a ^ b[0] as usize)
            })
            .fold(0, |a, b| a ^ b)
    });
    println!("band hashes: {bands:.1} MB/s (check {check:x})");
    Ok(())
}
