//! Single-thread encoding speed of the fast encoder against the HF encoder, on the same texts
//! in the same process, first pass (fresh cache) and warm, with the ids compared text by text.
//!
//! `cargo run --release --example encode_speed -- TOKENIZER.json ROWS.jsonl [MEGABYTES]`
//! (rows as written by `python -m benchmarks.corpus`; their instruction and response texts).
//! `ENGINES=fast` leaves the HF encoder out (for profiling), `ENGINES=split` times the
//! pre-tokenizer alone; `WARM=0` times the first pass only (no warm passes, ids not compared:
//! a profile of the first pass). Built with `--features python` it runs on the extension's
//! allocator (mimalloc), without it on the system's.

use std::path::Path;
use std::time::Instant;

use data_io_core::encoder::{Encoder, TextEncoder};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, tokenizer, rows, rest @ ..] = args.as_slice() else {
        return Err("usage: encode_speed TOKENIZER.json ROWS.jsonl [MEGABYTES]".into());
    };
    let megabytes: usize = rest.first().map_or(Ok(16), |m| m.parse())?;
    let texts = read_texts(Path::new(rows), megabytes << 20)?;
    let bytes: usize = texts.iter().map(String::len).sum();
    println!(
        "{} texts, {:.1} MB from {rows}",
        texts.len(),
        bytes as f64 / 1e6
    );
    let mut results = Vec::new();
    // `ENGINES=fast` times the fast encoder alone (for profiling).
    let engines = std::env::var("ENGINES").unwrap_or_else(|_| "fast,hf".into());
    for choice in engines.split(',') {
        if choice == "split" {
            split_only(&texts, bytes);
            continue;
        }
        let start = Instant::now();
        let encoder = match Encoder::from_file_with(Path::new(tokenizer), choice) {
            Ok(encoder) => encoder,
            Err(e) => {
                println!("{choice}: {e}");
                continue;
            }
        };
        let load = start.elapsed().as_secs_f64();
        let first = timed_pass(&encoder, &texts)?;
        // Warm: the best of three more passes, to see through other load on the machine
        // (`WARM=0`: none, for profiling the first pass).
        let passes: usize = std::env::var("WARM").map_or(Ok(3), |n| n.parse())?;
        let mut warm = f64::INFINITY;
        for _ in 0..passes {
            warm = warm.min(timed_pass(&encoder, &texts)?);
        }
        let ids = if passes > 0 {
            all_ids(&encoder, &texts)?
        } else {
            Vec::new()
        };
        println!(
            "{:>14}: load {load:.2} s, first pass {:.1} MB/s, warm {:.1} MB/s, {} ids",
            encoder.engine(),
            bytes as f64 / 1e6 / first,
            bytes as f64 / 1e6 / warm,
            ids.iter().map(Vec::len).sum::<usize>()
        );
        results.push(ids);
    }
    if let [fast, hf] = results.as_slice() {
        let same = fast.iter().zip(hf).filter(|(a, b)| a == b).count();
        println!("ids identical on {same} of {} texts", hf.len());
    }
    Ok(())
}

/// The pre-tokenizer alone (the shipped pattern), to see its share.
fn split_only(texts: &[String], bytes: usize) {
    use data_io_core::encoder::fast_bpe::pretokenize::{split, Pattern};
    let start = Instant::now();
    let mut pieces = 0usize;
    for text in texts {
        split(Pattern::Qwen, text, |_| pieces += 1);
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{:>14}: {:.1} MB/s, {pieces} pieces",
        "split only",
        bytes as f64 / 1e6 / secs
    );
}

/// Seconds for one pass over `texts`, the ids going to one reused buffer (as in `tokenize`,
/// where they go straight into the task's token buffer).
fn timed_pass(encoder: &Encoder, texts: &[String]) -> Result<f64, String> {
    let mut out = Vec::with_capacity(1 << 20);
    let mut checksum = 0u64;
    let start = Instant::now();
    for text in texts {
        out.clear();
        encoder.encode_into(text, &mut out)?;
        checksum = checksum.wrapping_add(out.len() as u64);
    }
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(checksum);
    Ok(secs)
}

/// The ids of every text, for the comparison (not timed).
fn all_ids(encoder: &Encoder, texts: &[String]) -> Result<Vec<Vec<u32>>, String> {
    texts.iter().map(|text| encoder.encode(text)).collect()
}

/// The instruction and response texts of the first rows of `path`, up to `limit` bytes.
fn read_texts(path: &Path, limit: usize) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut texts = Vec::new();
    let mut total = 0;
    for line in std::fs::read_to_string(path)?.lines() {
        let row: serde_json::Value = serde_json::from_str(line)?;
        for field in ["instruction", "response"] {
            if let Some(text) = row[field].as_str() {
                total += text.len();
                texts.push(text.to_string());
            }
        }
        if total >= limit {
            break;
        }
    }
    Ok(texts)
}
