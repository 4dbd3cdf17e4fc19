//! Unigram training: SentencePiece's EM algorithm as `tokenizers`' `UnigramTrainer` runs it
//! (seeds from a suffix array, E and M steps, pruning by likelihood loss, then the vocabulary
//! cut to size), with the same arithmetic, on flat lattices and on every thread.
//!
//! - `model.rs`: the pieces of a step and the trie that finds them in a word;
//! - `lattice.rs`: a word's lattice: marginals, Viterbi and the two best segmentations;
//! - `matches.rs`: every word's matches against the first pieces, found once for all steps;
//! - `seeds.rs`: the first pieces;
//! - `prune.rs`: a pruning round.
//!
//! Why not the crate's trainer: most of its time goes to building a `String` and a hash lookup
//! for every prefix it finds and an `Rc<RefCell<_>>` for every lattice node (10 MB of the race's
//! text, vocabulary 32,768: 12 s at one thread, where SentencePiece takes 6), and its E step
//! sums in as many chunks as there are threads, so that the scores move in their last bits with
//! the thread count. Here the E step's sums are taken in a fixed number of shares of the words,
//! added in order: the same file on any number of threads. With one share the sums are the
//! crate's at one thread, bit for bit, which is how the tests hold the two together.

mod lattice;
mod matches;
mod model;
mod prune;
mod seeds;

use std::collections::{HashMap, HashSet};

use rayon::prelude::*;

use crate::error::{Error, Result};
use lattice::Lattice;
use matches::{Lookup, Matches, MATCHES_BUDGET};
pub use model::Piece;

/// The shares of the words the E step sums apart, then adds in order: fixed, so that the sums
/// do not depend on the thread count, and the E step's parallelism (each share takes a table of
/// every piece: 16 × 8 bytes a piece, 128 MB at the first step's million seeds at most).
pub const E_STEP_SHARES: usize = 16;

/// The trainer's settings (`tokenizers`' `UnigramTrainer` defaults but the size).
#[derive(Debug, Clone)]
pub struct EmOptions {
    pub vocab_size: usize,
    /// The special tokens' texts: they take ids of the vocabulary.
    pub special_tokens: Vec<String>,
    /// Characters always in the vocabulary (ByteLevel's 256 symbols).
    pub initial_alphabet: Vec<char>,
    pub max_piece_length: usize,
    pub seed_size: usize,
    pub sub_iterations: usize,
    pub shrinking_factor: f64,
    /// The shares of the words the E step sums separately, then adds in order. Fixed, so that
    /// the scores do not depend on the thread count; 1 gives `tokenizers`' sums at one thread.
    pub e_step_shares: usize,
    /// Memory the words' matches may take (`matches.rs`); past it the words are walked anew.
    pub matches_budget: usize,
}

impl EmOptions {
    pub fn new(
        vocab_size: usize,
        special_tokens: Vec<String>,
        initial_alphabet: Vec<char>,
    ) -> Self {
        EmOptions {
            vocab_size,
            special_tokens,
            initial_alphabet,
            max_piece_length: 16,
            seed_size: 1_000_000,
            sub_iterations: 2,
            shrinking_factor: 0.75,
            e_step_shares: E_STEP_SHARES,
            matches_budget: MATCHES_BUDGET,
        }
    }
}

/// The vocabulary learned from `words` (distinct words with their counts, sorted: the order
/// decides ties; none at all is the caller's to refuse, as `train-tokenizer` does), as
/// `tokenizers`' trainer writes it: the special tokens (score 0) first, then the pieces by
/// score, highest first. The characters never learned get made-up scores, the lowest score
/// plus 0.0001 steps, in `required_chars`' order.
pub fn train(words: &[(String, u32)], options: &EmOptions) -> Result<Vec<Piece>> {
    let required = required_chars(words, options);
    if required.len() > options.vocab_size {
        return Err(Error::Config(format!(
            "a unigram vocabulary of {} cannot hold the {} characters of the texts and the \
             alphabet; raise --vocab-size",
            options.vocab_size,
            required.len()
        )));
    }
    let learned = learn(words, options)?;
    Ok(finalize(&learned, &required, options))
}

/// The characters every vocabulary holds: the texts', then the alphabet's, each once. The
/// crate takes them in a hash set's order; here those seen in the texts come first, each group
/// from the highest code point down, the order `unigram::canonical` deals made-up scores in.
fn required_chars(words: &[(String, u32)], options: &EmOptions) -> Vec<char> {
    let in_texts: HashSet<char> = words.iter().flat_map(|(w, _)| w.chars()).collect();
    let mut all: Vec<char> = in_texts.iter().copied().collect();
    all.extend(
        options
            .initial_alphabet
            .iter()
            .filter(|c| !in_texts.contains(c)),
    );
    all.sort_by_key(|c| (!in_texts.contains(c), std::cmp::Reverse(*c)));
    all
}

/// The pieces and scores the EM passes and prunings leave, the unknown piece first (NaN).
pub fn learn(words: &[(String, u32)], options: &EmOptions) -> Result<Vec<Piece>> {
    let mut first: Vec<Piece> = vec![("<UNK>".into(), f64::NAN)];
    first.extend(seeds::seed_pieces(
        words,
        options.max_piece_length,
        options.seed_size,
    )?);
    // The first pieces by text (a text listed twice: its last place, as the trie keeps it).
    let first_index: HashMap<&str, u32> = first
        .iter()
        .enumerate()
        .map(|(i, (piece, _))| (piece.as_str(), i as u32))
        .collect();
    let matches = Matches::find(words, &first, options.matches_budget);
    let desired = options.vocab_size * 11 / 10;
    let mut pieces = first.clone();
    loop {
        for _ in 0..options.sub_iterations {
            crate::interrupt::check()?;
            let lookup = Lookup::new(&pieces, matches.as_ref(), &first_index, first.len());
            let expected = e_step(&pieces, words, options.e_step_shares, &lookup)?;
            pieces = m_step(&pieces, &expected);
        }
        if pieces.len() <= desired {
            return Ok(pieces);
        }
        crate::interrupt::check()?;
        let lookup = Lookup::new(&pieces, matches.as_ref(), &first_index, first.len());
        let before = pieces.len();
        pieces = prune::prune(
            &pieces,
            words,
            &lookup,
            options.vocab_size,
            options.shrinking_factor,
        );
        if pieces.len() == before {
            // Nothing left to prune (the unknown piece and the single characters, which are
            // never pruned, are more than the size asked): `tokenizers` would loop for ever.
            return Ok(pieces);
        }
    }
}

/// Each piece's expected count under `pieces`: every word's lattice marginals × its count.
fn e_step(
    pieces: &[Piece],
    words: &[(String, u32)],
    shares: usize,
    lookup: &Lookup<'_>,
) -> Result<Vec<f64>> {
    let (bos, eos) = (pieces.len() as u32 + 1, pieces.len() as u32 + 2);
    let share = words.len().div_ceil(shares.max(1)).max(1);
    let sums: Vec<Result<Vec<f64>>> = words
        .par_chunks(share)
        .enumerate()
        .map(|(k, some)| {
            let mut lattice = Lattice::default();
            let mut expected = vec![0.0; pieces.len()];
            for (i, (word, count)) in some.iter().enumerate() {
                lookup.build(&mut lattice, k * share + i, word, bos, eos);
                let z = lattice.add_marginals(f64::from(*count), &mut expected);
                if z.is_nan() {
                    return Err(Error::Tokenizer(format!(
                        "unigram training: the likelihood of the word {word:?} is not a number"
                    )));
                }
            }
            Ok(expected)
        })
        .collect();
    let mut total: Option<Vec<f64>> = None;
    for sum in sums {
        let sum = sum?;
        total = Some(match total {
            None => sum,
            Some(mut total) => {
                for (t, s) in total.iter_mut().zip(sum) {
                    *t += s;
                }
                total
            }
        });
    }
    Ok(total.unwrap_or_else(|| vec![0.0; pieces.len()]))
}

/// The pieces expected at least half a time, scored by the Bayesian (digamma) update
/// SentencePiece uses as a sparse prior; the unknown piece stays first, with NaN.
fn m_step(pieces: &[Piece], expected: &[f64]) -> Vec<Piece> {
    const THRESHOLD: f64 = 0.5;
    let mut kept: Vec<Piece> = Vec::with_capacity(pieces.len());
    let mut sum = 0.0;
    for (i, (freq, (piece, _))) in expected.iter().zip(pieces).enumerate() {
        if i == 0 {
            kept.push((piece.clone(), f64::NAN));
            continue;
        }
        if *freq < THRESHOLD {
            continue;
        }
        kept.push((piece.clone(), *freq));
        sum += freq;
    }
    let log_sum = digamma(sum);
    for (_, score) in &mut kept {
        *score = digamma(*score) - log_sum;
    }
    kept
}

/// ψ(x), by the recurrence up to 7 and the asymptotic series (SentencePiece's form).
fn digamma(mut x: f64) -> f64 {
    let mut result = 0.0;
    while x < 7.0 {
        result -= 1.0 / x;
        x += 1.0;
    }
    x -= 1.0 / 2.0;
    let xx = 1.0 / x;
    let xx2 = xx * xx;
    let xx4 = xx2 * xx2;
    result += x.ln() + (1.0 / 24.0) * xx2 - 7.0 / 960.0 * xx4 + (31.0 / 8064.0) * xx4 * xx2
        - (127.0 / 30720.0) * xx4 * xx4;
    result
}

/// The vocabulary of `learned` cut to size, as `tokenizers`' `UnigramTrainer::finalize` cuts it:
/// the required characters first (learned, or with a made-up score), then the learned pieces in
/// their order until the vocabulary is full, sorted by score; the special tokens before them.
fn finalize(learned: &[Piece], required: &[char], options: &EmOptions) -> Vec<Piece> {
    const STEP: f64 = 0.0001;
    let min_score = learned
        .iter()
        .map(|(_, s)| *s)
        .fold(f64::INFINITY, |low, s| if s < low { s } else { low });
    // A text listed twice keeps its last score, as the crate's map of the model does.
    let scores: HashMap<&str, f64> = learned.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    let mut pieces: Vec<Piece> = Vec::with_capacity(options.vocab_size);
    let mut inserted: HashSet<String> = HashSet::from(["<UNK>".to_string()]);
    let mut penalty = 0.0;
    for c in required {
        let text = c.to_string();
        let score = match scores.get(text.as_str()) {
            Some(&score) => score,
            None => {
                let score = min_score + penalty;
                penalty += STEP;
                score
            }
        };
        inserted.insert(text.clone());
        pieces.push((text, score));
    }
    let room = options
        .vocab_size
        .saturating_sub(options.special_tokens.len());
    for (piece, score) in learned {
        if inserted.contains(piece) {
            continue;
        }
        inserted.insert(piece.clone());
        pieces.push((piece.clone(), if score.is_nan() { 0.0 } else { *score }));
        if pieces.len() == room {
            break;
        }
    }
    pieces.sort_by(|(_, a), (_, b)| b.partial_cmp(a).unwrap_or(std::cmp::Ordering::Equal));
    let mut all: Vec<Piece> = options
        .special_tokens
        .iter()
        .map(|t| (t.clone(), 0.0))
        .collect();
    all.extend(pieces);
    all
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use tokenizers::models::unigram::{Unigram, UnigramTrainerBuilder};
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;
    use tokenizers::AddedToken;

    use super::*;
    use crate::encoder::fast_bpe::pretokenize::Pattern;
    use crate::train::words::count_words;

    /// The words of some of the project's own prose and of made-up words in several scripts,
    /// counted by the unigram pipeline, sorted.
    fn words(scale: usize) -> Vec<(String, u32)> {
        let prose = include_str!("../../../docs/stages/train-tokenizer.md");
        let syllables = ["ka", "to", "ri", "日", "本", "кош", "ü", "é"];
        let mut texts: Vec<String> = prose.lines().take(scale).map(str::to_owned).collect();
        for i in 0..scale {
            let word: String = (0..1 + i % 4)
                .map(|k| syllables[(i * 7 + k * 3) % syllables.len()])
                .collect();
            texts.push(format!("{word} {word}{} x{i}", syllables[i % 3]));
        }
        // The Rust trainer's counting pass: the words `unigram::count_words` counts too.
        let counted = count_words(&texts, Pattern::Qwen, true);
        let mut words: Vec<(String, u32)> = counted
            .iter()
            .map(|(w, c)| (w.to_owned(), c as u32))
            .collect();
        words.sort_unstable();
        words
    }

    fn options(vocab_size: usize) -> EmOptions {
        EmOptions {
            e_step_shares: 1,
            ..EmOptions::new(
                vocab_size,
                vec!["<s>".into(), "</s>".into()],
                ByteLevel::alphabet().into_iter().collect(),
            )
        }
    }

    /// `tokenizers`' trainer on one thread: its E step sums in one chunk.
    fn theirs(words: &[(String, u32)], options: &EmOptions) -> Vec<Piece> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("pool");
        pool.install(|| {
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
            let mut model = Unigram::default();
            trainer
                .do_train(words.to_vec(), &mut model)
                .expect("trained");
            model.iter().cloned().collect()
        })
    }

    /// With one share of the E step, the pieces and their scores are `tokenizers`' to the last
    /// bit, but for the made-up scores of the characters never learned (dealt in its hash
    /// order): those are compared as a set.
    fn check_against_tokenizers(scale: usize, vocab_size: usize) {
        let words = words(scale);
        let options = options(vocab_size);
        let ours = train(&words, &options).expect("trained");
        let theirs = theirs(&words, &options);
        assert_eq!(ours.len(), theirs.len());
        let learned = learn(&words, &options).expect("learned");
        let learned: HashSet<&str> = learned.iter().map(|(p, _)| p.as_str()).collect();
        let made_up = |pieces: &[Piece]| -> Vec<u64> {
            let mut scores: Vec<u64> = pieces
                .iter()
                .filter(|(p, _)| p.chars().count() == 1 && !learned.contains(p.as_str()))
                .map(|(_, s)| s.to_bits())
                .collect();
            scores.sort_unstable();
            scores
        };
        assert_eq!(made_up(&ours), made_up(&theirs));
        let theirs_learned: HashMap<&str, u64> = theirs
            .iter()
            .filter(|(p, _)| learned.contains(p.as_str()) || options.special_tokens.contains(p))
            .map(|(p, s)| (p.as_str(), s.to_bits()))
            .collect();
        let ours_learned: HashMap<&str, u64> = ours
            .iter()
            .filter(|(p, _)| learned.contains(p.as_str()) || options.special_tokens.contains(p))
            .map(|(p, s)| (p.as_str(), s.to_bits()))
            .collect();
        assert!(ours_learned.len() > options.special_tokens.len() + 50);
        assert_eq!(ours_learned, theirs_learned);
    }

    #[test]
    fn one_share_learns_tokenizers_own_pieces_to_the_last_bit() {
        check_against_tokenizers(80, 400);
        check_against_tokenizers(300, 1000);
    }

    #[test]
    fn the_pieces_do_not_depend_on_the_thread_count() {
        let words = words(200);
        let options = EmOptions {
            e_step_shares: 8,
            ..options(700)
        };
        let on = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("pool")
                .install(|| train(&words, &options).expect("trained"))
        };
        let one = on(1);
        for threads in [2, 3, 5] {
            let many = on(threads);
            assert_eq!(one.len(), many.len());
            for (a, b) in one.iter().zip(&many) {
                assert_eq!((&a.0, a.1.to_bits()), (&b.0, b.1.to_bits()));
            }
        }
    }

    /// Words walked through the trie at every step (no room for their matches) learn what the
    /// matches found once learn.
    #[test]
    fn walking_the_words_every_step_learns_the_same_pieces() {
        let words = words(200);
        let matched = options(700);
        let walked = EmOptions {
            matches_budget: 0,
            ..matched.clone()
        };
        let first = learn(&words, &matched).expect("learned");
        let second = learn(&words, &walked).expect("learned");
        assert_eq!(first.len(), second.len());
        for (a, b) in first.iter().zip(&second) {
            assert_eq!((&a.0, a.1.to_bits()), (&b.0, b.1.to_bits()));
        }
        let seeds = seeds::seed_pieces(&words, 16, 1_000_000).expect("seeds");
        assert!(Matches::find(&words, &seeds, 0).is_none());
        assert!(Matches::find(&words, &seeds, MATCHES_BUDGET).is_some());
    }

    /// A vocabulary smaller than its characters and the unknown piece: pruning cannot reach
    /// it, and learning stops (the crate loops for ever; `train` refuses such sizes first).
    #[test]
    fn learning_stops_when_nothing_is_left_to_prune() {
        let words: Vec<(String, u32)> = ["hello", "world", "help", "yellow"]
            .iter()
            .map(|w| (w.to_string(), 2))
            .collect();
        let options = EmOptions::new(2, Vec::new(), Vec::new());
        let learned = learn(&words, &options).expect("learned");
        assert!(learned.len() > 2);
        assert!(train(&words, &options).is_err()); // 10 characters: a size of 2 is refused
    }

    #[test]
    fn digamma_follows_its_recurrence() {
        for x in [0.3, 1.0, 2.5, 7.0, 40.0] {
            let step = digamma(x + 1.0) - digamma(x) - 1.0 / x;
            assert!(step.abs() < 1e-9, "{x}: {step}");
        }
    }
}
