//! The phases of an encoder's load in one process, to compare two builds: reading the
//! tokenizer file, its BLAKE3, reading its JSON (`spec::recognise`), the index kept for
//! `token_id` (`Spec::token_ids`), then a whole load (`Encoder::from_file`, the load cache
//! where the environment says), milliseconds for each of six rounds. Built without the
//! `python` feature it runs on the system's allocator (the extension uses mimalloc).
//!
//!   cargo run --release --example load_speed -- TOKENIZER.json
use std::path::Path;
use std::time::Instant;

use data_io_core::encoder::fast_bpe::spec;
use data_io_core::encoder::Encoder;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(path) = std::env::args().nth(1) else {
        return Err("usage: load_speed TOKENIZER.json".into());
    };
    let ms = |started: Instant| started.elapsed().as_secs_f64() * 1e3;
    println!("round  read  hash  recognise  token_ids  whole load (ms)");
    for round in 0..6 {
        let started = Instant::now();
        let bytes = std::fs::read(&path)?;
        let read = ms(started);
        let started = Instant::now();
        let hash = blake3::hash(&bytes);
        let hashed = ms(started);
        let json = String::from_utf8(bytes)?;
        let started = Instant::now();
        let spec = spec::recognise(&json)?;
        let recognised = ms(started);
        let started = Instant::now();
        let ids = spec.token_ids();
        let indexed = ms(started);
        drop((ids, spec));
        let started = Instant::now();
        let encoder = Encoder::from_file(Path::new(&path))?;
        let loaded = ms(started);
        drop(encoder);
        println!(
            "{round:>5} {read:>5.1} {hashed:>5.1} {recognised:>10.1} {indexed:>10.1} {loaded:>11.1}   {}",
            &hash.to_hex()[..8]
        );
    }
    Ok(())
}
