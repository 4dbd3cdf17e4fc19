//! data_io's unigram EM passes (`train::unigram_em`) against the `tokenizers` crate's own
//! `UnigramTrainer`, which they re-implement operation for operation: with the E step summed in
//! one share and the crate run in a pool of one thread, the pieces and their scores must be the
//! crate's to the last bit, but for the made-up scores of the characters never learned, which
//! the crate deals in a hash set's order (compared as a multiset).
//!
//! Byte 0 picks the vocabulary size (10 to 1030), byte 1 whether there is an initial alphabet
//! (bit 0) and a special token (bit 1); the rest, read as UTF-8 (lossy), is the words: one a
//! line (at most 48 characters, 200 lines), a line given twice counted twice.
//!
//! Checks: data_io's trainer never panics; it refuses exactly what the crate refuses (more
//! required characters than the vocabulary holds); where the crate trains (it panics on a NaN
//! likelihood, which data_io reports as an error), the two vocabularies agree as above.
#![no_main]

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use data_io_core::train::unigram_em::{learn, train, EmOptions, Piece};
use libfuzzer_sys::fuzz_target;
use tokenizers::models::unigram::{Unigram, UnigramTrainerBuilder};
use tokenizers::AddedToken;

mod common;

fn one_thread() -> &'static rayon::ThreadPool {
    static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("a pool of one thread")
    })
}

fn crate_trained(words: &[(String, u32)], options: &EmOptions) -> Option<Result<Vec<Piece>, ()>> {
    let trainer = UnigramTrainerBuilder::default()
        .vocab_size(options.vocab_size as u32)
        .special_tokens(
            options
                .special_tokens
                .iter()
                .map(|t| AddedToken::from(t.clone(), true))
                .collect(),
        )
        .initial_alphabet(options.initial_alphabet.iter().copied().collect())
        .show_progress(false)
        .build()
        .expect("trainer");
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        one_thread().install(|| {
            let mut model = Unigram::default();
            trainer
                .do_train(words.to_vec(), &mut model)
                .map(|_| model.iter().cloned().collect::<Vec<Piece>>())
                .map_err(|_| ())
        })
    }));
    run.ok() // None: the crate panicked
}

fuzz_target!(
    init: {
        common::record_panics();
    },
    |data: &[u8]| {
        if data.len() < 2 {
            return;
        }
        // From 10 up: below it the crate's pruning can loop for ever (data_io's stops).
        let vocab_size = 10 + data[0] as usize * 4;
        let alphabet: Vec<char> = if data[1] & 1 == 1 { "abc".chars().collect() } else { Vec::new() };
        let specials: Vec<String> = if data[1] & 2 == 2 { vec!["<s>".into()] } else { Vec::new() };
        let text = String::from_utf8_lossy(&data[2..]);
        let mut counts: HashMap<String, u32> = HashMap::new();
        for line in text.split('\n').filter(|l| !l.is_empty()).take(200) {
            *counts.entry(line.chars().take(48).collect()).or_default() += 1;
        }
        let mut words: Vec<(String, u32)> = counts.into_iter().collect();
        words.sort_unstable();
        let options = EmOptions {
            e_step_shares: 1,
            ..EmOptions::new(vocab_size, specials, alphabet)
        };
        let mut ours = None;
        common::check(|| ours = Some(one_thread().install(|| train(&words, &options))));
        let Some(ours) = ours else {
            return;
        };
        let Some(theirs) = crate_trained(&words, &options) else {
            return; // the crate panicked (a NaN likelihood): data_io answers with an error
        };
        let (ours, theirs) = match (ours, theirs) {
            (Ok(ours), Ok(theirs)) => (ours, theirs),
            (Err(_), Err(())) => return,
            (Ok(_), Err(())) => panic!("the crate refused what data_io trained: {words:?}"),
            (Err(e), Ok(_)) => panic!("data_io refused what the crate trained ({e}): {words:?}"),
        };
        let mut learned = None;
        common::check(|| learned = Some(one_thread().install(|| learn(&words, &options))));
        let learned: HashSet<String> = learned
            .expect("learned")
            .expect("learned once trained")
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(ours.len(), theirs.len(), "sizes for {words:?}");
        let made_up = |pieces: &[Piece]| -> Vec<u64> {
            let mut scores: Vec<u64> = pieces
                .iter()
                .filter(|(p, _)| p.chars().count() == 1 && !learned.contains(p))
                .filter(|(p, _)| !options.special_tokens.contains(p))
                .map(|(_, s)| s.to_bits())
                .collect();
            scores.sort_unstable();
            scores
        };
        assert_eq!(made_up(&ours), made_up(&theirs), "made-up scores for {words:?}");
        let kept = |pieces: &[Piece]| -> HashMap<String, u64> {
            pieces
                .iter()
                .filter(|(p, _)| learned.contains(p) || options.special_tokens.contains(p))
                .map(|(p, s)| (p.clone(), s.to_bits()))
                .collect()
        };
        assert_eq!(kept(&ours), kept(&theirs), "learned pieces for {words:?}");
    }
);
