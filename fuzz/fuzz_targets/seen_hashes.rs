//! The set of seen hashes that the online de-duplication decides with (`prepare::seen`, over
//! `prepare::record_set`'s open-addressing tables): against a `HashSet` oracle, for records no
//! hash function spread (a kept-hashes file of an earlier run is read back into it, and a
//! damaged one holds anything), so that every shard can be crowded, every record can be the
//! zero record the tables keep apart, and the budget can run out at any batch.
//!
//! Byte 0 picks the set: 128-bit records (`SeenHashes::new`), or near-dedup's banded set of
//! 1–8 bands, fed band records directly (`first_seen`) or documents (`first_seen_near`, whose
//! exact twins skip the MinHash). Byte 1 picks the budget, from a few KiB (refusals) to
//! plenty. The rest is a list of commands: a batch of records (or documents) built from few
//! distinct words, so that repeats are common (now and then one large enough to be taken on
//! the threads), or a projected total (`expect`).
//!
//! Checks: a batch taken is answered as the oracle answers (first of each record new, later
//! ones not; a band number past the bands refuses the batch); a batch refused records nothing,
//! and a later batch taken answers as if it never came; the tables never hold more bytes than
//! the budget; at the end the sorted records and the kept-hashes file's bytes are the oracle's
//! records in order, and `len` counts them.
#![no_main]

use std::collections::HashSet;
use std::sync::OnceLock;

use data_io_core::prepare::near::{MinHasher, NearOptions};
use data_io_core::prepare::seen::SeenHashes;
use libfuzzer_sys::fuzz_target;

/// Words records are built from: a crowded top (one shard), a spread one, the zero record's
/// parts, the largest value.
fn word(byte: u8) -> u64 {
    match byte % 8 {
        0 => 0,
        1 => u64::MAX,
        2 => u64::from(byte) << 56,
        3 => u64::from(byte),
        4 => 0x8000_0000_0000_0000 | u64::from(byte >> 3),
        _ => u64::from(byte).wrapping_mul(0x9e37_79b9_7f4a_7c15),
    }
}

fn hasher(bands: usize) -> &'static MinHasher {
    static HASHERS: OnceLock<Vec<MinHasher>> = OnceLock::new();
    let all = HASHERS.get_or_init(|| {
        (1..=8)
            .map(|bands| {
                MinHasher::new(NearOptions {
                    ngram: 2,
                    bands,
                    rows: 2,
                    seed: 7,
                })
            })
            .collect()
    });
    &all[bands - 1]
}

/// Documents from few words, so that exact twins and shared bands are common.
fn documents(bytes: &[u8]) -> Vec<String> {
    const WORDS: [&str; 8] = ["a", "b", "tree", "sky", "é", "漢", "a b", ""];
    bytes
        .chunks(3)
        .map(|chunk| {
            chunk
                .iter()
                .map(|&b| WORDS[usize::from(b % 8)])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn digest(text: &str) -> [u64; 2] {
    let hash = blake3::hash(text.as_bytes());
    let bytes = hash.as_bytes();
    [
        u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")),
        u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")),
    ]
}

/// The oracle's answer for `records` in order, recording them; `None` (nothing recorded) when
/// one has a band number of `bands` or more.
fn oracle_first_seen(
    kept: &mut HashSet<[u64; 2]>,
    records: &[[u64; 2]],
    bands: Option<usize>,
) -> Option<Vec<bool>> {
    if let Some(bands) = bands {
        if records.iter().any(|record| record[1] >= bands as u64) {
            return None;
        }
    }
    Some(records.iter().map(|&record| kept.insert(record)).collect())
}

/// The oracle's near decision: a document is new when none of its bands was seen before (in an
/// earlier document); every band of a new or not-new document is recorded.
fn oracle_near(kept: &mut HashSet<[u64; 2]>, texts: &[String], hasher: &MinHasher) -> Vec<bool> {
    texts
        .iter()
        .map(|text| {
            let bands = hasher.band_hashes(text);
            let new = bands.iter().all(|band| !kept.contains(band));
            kept.extend(bands);
            new
        })
        .collect()
}

/// The answers equal the oracle's; else the first that differs, with its item.
fn same<T: std::fmt::Debug>(answers: &[bool], oracle: &[bool], items: &[T]) {
    assert_eq!(
        answers.len(),
        oracle.len(),
        "an answer for each of {} items",
        items.len()
    );
    if let Some(at) = (0..answers.len()).find(|&at| answers[at] != oracle[at]) {
        panic!(
            "item {at} of {} ({:x?}): new is {}, the oracle says {}",
            items.len(),
            items[at],
            answers[at],
            oracle[at]
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let [mode, budget, commands @ ..] = data else {
        return;
    };
    let bands = usize::from(mode % 9); // 0: 128-bit records
    let near = bands > 0 && mode & 0x80 != 0;
    let budget = match budget % 4 {
        0 => 4 << 10,
        1 => 64 << 10,
        2 => 1 << 20,
        _ => 64 << 20,
    };
    let mut seen = if bands == 0 {
        SeenHashes::new(budget)
    } else {
        SeenHashes::banded(budget, bands)
    };
    let mut kept: HashSet<[u64; 2]> = HashSet::new();
    let mut rest = commands;
    while let [command, length, tail @ ..] = rest {
        let take = (usize::from(*length) * 2).min(tail.len());
        let (body, tail) = tail.split_at(take);
        rest = tail;
        // Now and then a batch large enough for the shards to take it on the threads at once
        // (`seen`'s PARALLEL_FROM, 8192 records; two bytes a record, three a document): the
        // body over and over, in four variants.
        let large: Vec<u8>;
        let body = if command % 5 == 4 && !body.is_empty() {
            large = (0..18_000)
                .map(|i| body[i % body.len()] ^ ((i / body.len()) % 4) as u8)
                .collect();
            &large[..]
        } else {
            body
        };
        if command % 5 == 0 {
            // A projected total: room made at once, within the budget, or nothing.
            let total = usize::from(*length) * 64;
            let fits = seen.expect(total);
            assert!(
                !fits || seen.bytes() <= budget,
                "expect({total}) said it fits, yet the tables hold {} bytes of a budget of \
                 {budget}",
                seen.bytes()
            );
            continue;
        }
        let before = seen.len();
        if near {
            let texts = documents(body);
            let hashes: Vec<[u64; 2]> = texts.iter().map(|text| digest(text)).collect();
            let hasher = hasher(bands);
            match seen.first_seen_near(&texts, &hashes, hasher) {
                // A batch taken after one refused must answer as if that one never came (the
                // set refuses every later batch when the refused one left document hashes).
                Some(new) => same(&new, &oracle_near(&mut kept, &texts, hasher), &texts),
                None => assert_eq!(seen.len(), before, "a refused batch recorded bands"),
            }
        } else {
            let records: Vec<[u64; 2]> = body
                .chunks(2)
                .map(|pair| {
                    let high = word(pair[0]);
                    let low = match bands {
                        0 => word(pair.get(1).copied().unwrap_or(0)),
                        // A band number, now and then one past the bands (a damaged file).
                        _ => u64::from(pair.get(1).copied().unwrap_or(0)) % (bands as u64 + 1),
                    };
                    [high, low]
                })
                .collect();
            let limit = (bands > 0).then_some(bands);
            match seen.first_seen(&records) {
                Some(new) => {
                    let expected = oracle_first_seen(&mut kept, &records, limit)
                        .expect("a record past the bands was taken");
                    same(&new, &expected, &records);
                }
                // Refused for a band past the bands, or for the budget: the oracle records
                // nothing either.
                None => assert_eq!(seen.len(), before, "a refused batch recorded records"),
            }
        }
        assert_eq!(seen.len(), kept.len(), "len counts what was recorded");
        assert!(
            seen.bytes() <= budget,
            "{} bytes held, over a budget of {budget}",
            seen.bytes()
        );
    }
    let mut expected: Vec<[u64; 2]> = kept.into_iter().collect();
    expected.sort_unstable();
    assert_eq!(seen.sorted(), expected, "the sorted records");
    let mut file = Vec::new();
    seen.write_sorted(&mut file).expect("written to memory");
    let bytes: Vec<u8> = expected
        .iter()
        .flat_map(|record| record.iter().flat_map(|word| word.to_ne_bytes()))
        .collect();
    assert_eq!(file, bytes, "the kept-hashes file's bytes");
});
