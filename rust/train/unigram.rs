//! Unigram training, so that the same texts, options and thread count give the same file every
//! run: by data_io's own EM passes (`unigram_em`, the default: the same file on any thread
//! count too) or by `tokenizers`' `UnigramTrainer` (`--trainer hf`, the oracle).
//!
//! The crate's own `Tokenizer::train` hands its trainer the words in a hash map's order, new
//! every run: the EM sums then round differently in the last bits (and now and then a piece is
//! pruned or not), and the byte symbols it never learned get made-up scores (the lowest learned
//! score plus 0.0001 per symbol) in that order too. Here the words are counted here and handed
//! over sorted, those symbols' scores are dealt out again (first to the symbols seen in the
//! texts, then by code point: `canonical`), and pieces of equal score are put in a fixed order.
//! A piece learned with a special token's text is kept once, at the special token, with its
//! learned score.

use std::collections::{HashMap, HashSet};

use rayon::iter::{ParallelBridge, ParallelIterator};
use tokenizers::models::unigram::Unigram;
use tokenizers::models::ModelWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{
    NormalizedString, Normalizer, OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer,
    Tokenizer,
};

use super::hf::{around_model, new_tokenizer, new_trainer};
use super::unigram_em::EmOptions;
use super::{TokenizerKind, TrainOptions};
use crate::error::{Error, Result};

/// What `tokenizers`' trainer adds to the lowest learned score for each byte symbol it did not
/// learn, one symbol after another (`UnigramTrainer::finalize`).
const UNLEARNED_STEP: f64 = 0.0001;

/// Whose EM passes learn the pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Em {
    /// data_io's (`unigram_em`): the same file on any number of threads.
    Ours,
    /// `tokenizers`' `UnigramTrainer` (`--trainer hf`): its sums move with the thread count.
    Tokenizers,
}

/// Train a unigram tokenizer with `options` on distinct words with their counts (`count_words`'s,
/// or the Rust trainer's counting pass's: the same words), in any order.
pub fn train(
    options: &TrainOptions,
    words: impl IntoIterator<Item = (String, u64)>,
    em: Em,
) -> Result<Tokenizer> {
    let mut words: Vec<(String, u32)> = words
        .into_iter()
        // A word seen more than 4 billion times is no less frequent than one seen exactly that.
        .map(|(word, count)| (word, u32::try_from(count).unwrap_or(u32::MAX)))
        .collect();
    words.sort_unstable();
    if em == Em::Ours {
        let em_options = EmOptions::new(
            options.vocab_size,
            options.special_tokens.clone(),
            ByteLevel::alphabet().into_iter().collect(),
        );
        let pieces = super::unigram_em::train(&words, &em_options)?;
        let model = Unigram::from(pieces, None, false).map_err(|e| {
            Error::Tokenizer(format!("cannot build the trained unigram model: {e}"))
        })?;
        // Its made-up scores are dealt already, and only to characters it did not learn.
        let pieces = ordered_pieces(&model, &options.special_tokens, None);
        return with_model(pieces, &options.special_tokens);
    }
    let tokenizers::models::TrainerWrapper::UnigramTrainer(trainer) = new_trainer(options)? else {
        return Err(Error::Tokenizer(
            "the unigram trainer was not built (a bug)".into(),
        ));
    };
    let in_texts: HashSet<char> = words.iter().flat_map(|(word, _)| word.chars()).collect();
    let mut model = Unigram::default();
    trainer
        .do_train(words, &mut model)
        .map_err(|e| Error::Tokenizer(format!("training failed: {e}")))?;
    let pieces = canonical(&model, &options.special_tokens, &in_texts);
    with_model(pieces, &options.special_tokens)
}

/// Distinct pre-tokens of `texts` with their counts: the texts normalised and pre-tokenized by
/// the unigram tokenizer's pipeline, as `Tokenizer::train` does before a trainer sees them.
pub fn count_words<I, S>(texts: I) -> Result<HashMap<String, u64>>
where
    I: Iterator<Item = S> + Send,
    S: AsRef<str> + Send,
{
    let tokenizer = new_tokenizer(TokenizerKind::Unigram)?;
    let (Some(normalizer), Some(pre_tokenizer)) =
        (tokenizer.get_normalizer(), tokenizer.get_pre_tokenizer())
    else {
        return Err(Error::Tokenizer(
            "the unigram pipeline is incomplete (a bug)".into(),
        ));
    };
    let failed =
        |e: tokenizers::Error| Error::Tokenizer(format!("cannot pre-tokenize a text: {e}"));
    texts
        .par_bridge()
        .try_fold(HashMap::new, |mut counts: HashMap<String, u64>, text| {
            let mut normalized = NormalizedString::from(text.as_ref());
            normalizer.normalize(&mut normalized).map_err(failed)?;
            let mut pieces = PreTokenizedString::from(normalized);
            pre_tokenizer.pre_tokenize(&mut pieces).map_err(failed)?;
            for (word, _, _) in pieces.get_splits(OffsetReferential::Original, OffsetType::Byte) {
                match counts.get_mut(word) {
                    Some(count) => *count += 1,
                    None => {
                        counts.insert(word.to_owned(), 1);
                    }
                }
            }
            Ok(counts)
        })
        .try_reduce(HashMap::new, |mut into, from| {
            if into.len() < from.len() {
                return Ok(merged(from, into));
            }
            into = merged(into, from);
            Ok(into)
        })
}

fn merged(mut into: HashMap<String, u64>, from: HashMap<String, u64>) -> HashMap<String, u64> {
    for (word, count) in from {
        *into.entry(word).or_default() += count;
    }
    into
}

/// The pieces of a trained `model` in a fixed order: the special tokens first (as the trainer
/// puts them), then the rest by score, highest first; pieces of equal score keep the trainer's
/// order, byte symbols first by code point.
///
/// The byte symbols the trainer did not learn have made-up scores, the lowest learned score
/// plus 0.0001 steps, dealt in a hash set's order; a symbol learned with exactly the lowest
/// score (the rarest piece) looks like the first of them. They are dealt again, lowest first:
/// to the symbols that occur in the texts (`in_texts`), which alone can have been learned, then
/// to those that never occur, from the highest code point down. When the trainer pruned none
/// of the symbols it saw, the learned ones keep their scores.
///
/// A piece learned with a special token's text (which the trainer lists twice) is kept once, at
/// the special token's id, with the learned score: with its placeholder 0.0 the pieces would
/// split the text around it differently.
pub fn canonical(
    model: &Unigram,
    special_tokens: &[String],
    in_texts: &HashSet<char>,
) -> Vec<(String, f64)> {
    ordered_pieces(model, special_tokens, Some(in_texts))
}

/// `canonical`'s order; the made-up scores dealt again only when `redeal` gives the characters
/// of the texts (`tokenizers`' trainer's scores), kept as they are otherwise (data_io's).
fn ordered_pieces(
    model: &Unigram,
    special_tokens: &[String],
    redeal: Option<&HashSet<char>>,
) -> Vec<(String, f64)> {
    let all: Vec<(String, f64)> = model.iter().cloned().collect();
    let (head, tail) = all.split_at(special_tokens.len().min(all.len()));
    let mut head = head.to_vec();
    let lowest = tail
        .iter()
        .map(|(_, score)| *score)
        .filter(|score| !score.is_nan())
        .fold(f64::INFINITY, f64::min);
    let mut places: HashMap<String, usize> = HashMap::new();
    for (i, (piece, _)) in head.iter().enumerate() {
        places.entry(piece.clone()).or_insert(i);
    }
    let mut learned = Vec::new();
    for (piece, score) in tail {
        match places.get(piece) {
            Some(&i) if i < head.len() => head[i].1 = *score,
            Some(_) => {} // listed twice among the learned pieces: the first kept
            None => {
                places.insert(piece.clone(), usize::MAX);
                learned.push((piece.clone(), *score));
            }
        }
    }
    head.extend(ordered(learned, lowest, redeal));
    head
}

fn ordered(
    mut pieces: Vec<(String, f64)>,
    lowest: f64,
    redeal: Option<&HashSet<char>>,
) -> Vec<(String, f64)> {
    let alphabet: HashSet<char> = ByteLevel::alphabet().into_iter().collect();
    let symbol = |piece: &str| -> Option<char> {
        let mut chars = piece.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if alphabet.contains(&c) => Some(c),
            _ => None,
        }
    };
    if let Some(in_texts) = redeal {
        redeal_made_up(&mut pieces, lowest, in_texts, &alphabet, symbol);
    }
    // Stable: pieces that tie and are not byte symbols keep the trainer's order.
    let rank = |piece: &str| symbol(piece).map_or((1, 0), |c| (0, c as u32));
    pieces.sort_by(|(a, a_score), (b, b_score)| {
        b_score
            .total_cmp(a_score)
            .then_with(|| rank(a).cmp(&rank(b)))
    });
    pieces
}

/// The made-up scores of `tokenizers`' trainer dealt again: lowest first to the symbols of the
/// texts, then to the others, each from the highest code point down.
fn redeal_made_up(
    pieces: &mut [(String, f64)],
    lowest: f64,
    in_texts: &HashSet<char>,
    alphabet: &HashSet<char>,
    symbol: impl Fn(&str) -> Option<char>,
) {
    // The scores the trainer makes up, summed step by step as it sums them (bit for bit).
    let mut made_up = HashSet::new();
    let mut penalty = 0.0;
    for _ in 0..alphabet.len() {
        made_up.insert((lowest + penalty).to_bits());
        penalty += UNLEARNED_STEP;
    }
    let mut dealt: Vec<(usize, char)> = (0..pieces.len())
        .filter(|&i| made_up.contains(&pieces[i].1.to_bits()))
        .filter_map(|i| symbol(&pieces[i].0).map(|c| (i, c)))
        .collect();
    let mut scores: Vec<f64> = dealt.iter().map(|&(i, _)| pieces[i].1).collect();
    scores.sort_by(f64::total_cmp);
    dealt.sort_by_key(|&(_, c)| (!in_texts.contains(&c), std::cmp::Reverse(c)));
    for ((i, _), score) in dealt.into_iter().zip(scores) {
        pieces[i].1 = score;
    }
}

/// The unigram tokenizer of `pieces`, with the special tokens added as `Tokenizer::train` adds
/// a trainer's.
fn with_model(pieces: Vec<(String, f64)>, special_tokens: &[String]) -> Result<Tokenizer> {
    // No unknown token: `new_trainer` names none; no byte fallback: the bytes are symbols.
    let model = Unigram::from(pieces, None, false)
        .map_err(|e| Error::Tokenizer(format!("cannot build the trained unigram model: {e}")))?;
    around_model(
        TokenizerKind::Unigram,
        ModelWrapper::Unigram(model),
        special_tokens,
    )
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use tokenizers::models::unigram::Unigram;
    use tokenizers::models::ModelWrapper;
    use tokenizers::Tokenizer;

    use super::{canonical, count_words, train, Em, UNLEARNED_STEP};
    use crate::encoder::fast_bpe::pretokenize::Pattern;
    use crate::train::differential::options;
    use crate::train::hf::{new_tokenizer, new_trainer};
    use crate::train::{TokenizerKind, TrainOptions};

    fn unigram_options(vocab_size: usize, specials: &[&str]) -> TrainOptions {
        let specials: Vec<String> = specials.iter().map(|t| t.to_string()).collect();
        TrainOptions {
            kind: TokenizerKind::Unigram,
            ..options(vocab_size, 2, &specials)
        }
    }

    /// Words of a few scripts, each text a different mix: most of the 256 byte symbols never
    /// occur, so the trainer makes up their scores.
    fn texts() -> Vec<String> {
        let syllables = [
            "ka", "to", "ri", "mu", "se", "na", "ü", "日", "本", "кош", "ка", "ï",
        ];
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        (0..600)
            .map(|_| {
                let words: Vec<String> = (0..rng.random_range(3..30))
                    .map(|_| {
                        (0..rng.random_range(1..5))
                            .map(|_| syllables[rng.random_range(0..syllables.len())])
                            .collect()
                    })
                    .collect();
                words.join(if rng.random_bool(0.2) { ", " } else { " " })
            })
            .collect()
    }

    fn pieces(tokenizer: &Tokenizer) -> Vec<(String, f64)> {
        match tokenizer.get_model() {
            ModelWrapper::Unigram(model) => model.iter().cloned().collect(),
            _ => panic!("not a unigram model"),
        }
    }

    fn ours(options: &TrainOptions, texts: &[String]) -> Tokenizer {
        train(
            options,
            count_words(texts.iter()).expect("counted"),
            Em::Tokenizers,
        )
        .expect("trained")
    }

    /// `tokenizers`' own `Tokenizer::train` (its words in a hash map's order).
    fn theirs(options: &TrainOptions, texts: &[String]) -> Tokenizer {
        let mut tokenizer = new_tokenizer(TokenizerKind::Unigram).expect("tokenizer");
        let mut trainer = new_trainer(options).expect("trainer");
        tokenizer
            .train(&mut trainer, texts.iter())
            .expect("trained");
        tokenizer.clone()
    }

    #[test]
    fn a_run_repeats_itself_and_agrees_with_tokenizers_own_training() {
        let options = unigram_options(300, &["<s>"]);
        let texts = texts();
        let first = ours(&options, &texts);
        let json = first.to_string(false).expect("json");
        for _ in 0..3 {
            assert_eq!(ours(&options, &texts).to_string(false).expect("json"), json);
        }
        let ours_pieces = pieces(&first);
        let in_texts: HashSet<char> = count_words(texts.iter())
            .expect("counted")
            .keys()
            .flat_map(|word| word.chars())
            .collect();
        assert_eq!(ours_pieces.len(), 300);
        // The oracle: the same trainer fed by `Tokenizer::train`, its pieces put in our order.
        // The same pieces with the same scores, up to the last bits of the EM sums.
        for _ in 0..3 {
            let ModelWrapper::Unigram(model) = theirs(&options, &texts).get_model().clone() else {
                panic!("not a unigram model");
            };
            let oracle: HashMap<String, f64> =
                canonical(&model, &options.special_tokens, &in_texts)
                    .into_iter()
                    .collect();
            assert_eq!(oracle.len(), ours_pieces.len());
            for (piece, score) in &ours_pieces {
                let expected = oracle
                    .get(piece)
                    .unwrap_or_else(|| panic!("{piece:?} missing"));
                assert!(
                    (score - expected).abs() < 1e-9,
                    "{piece:?}: {score} vs {expected}"
                );
            }
        }
    }

    /// The Rust trainer's counting pass (`words.rs`: the fast encoder's pre-tokenizer) counts
    /// the words `count_words` counts through `tokenizers`: the same file.
    #[test]
    fn the_rust_trainer_s_counts_train_the_same_file() {
        let options = unigram_options(300, &["<s>"]);
        let texts = texts();
        let counted = crate::train::words::count_words(&texts, Pattern::Qwen, true);
        let words = counted.iter().map(|(w, c)| (w.to_owned(), c));
        let from_counts = train(&options, words, Em::Tokenizers).expect("trained");
        assert_eq!(
            from_counts.to_string(false).expect("json"),
            ours(&options, &texts).to_string(false).expect("json")
        );
    }

    #[test]
    fn made_up_scores_and_ties_come_out_the_same_whatever_the_trainer_s_order() {
        let lowest = -5.0;
        // As the trainer sums them: the steps first, then the lowest score.
        let made_up = |k: usize| lowest + (0..k).fold(0.0, |penalty, _| penalty + UNLEARNED_STEP);
        let made_up = [made_up(0), made_up(1), made_up(2)];
        // The specials, then the learned pieces and the unlearned symbols x, b, z (in some
        // order, with the made-up scores in some order), "p" and "q" tied with "cd".
        let orders = [
            [("x", 0), ("b", 1), ("z", 2)],
            [("z", 0), ("x", 1), ("b", 2)],
            [("b", 2), ("z", 1), ("x", 0)],
        ];
        let mut results = Vec::new();
        for (n, order) in orders.iter().enumerate() {
            let mut pieces: Vec<(String, f64)> = vec![("<s>".into(), 0.0), ("ab".into(), 0.0)];
            let mut learned: Vec<(String, f64)> = vec![
                ("ab".into(), -1.0),
                ("cd".into(), -3.0),
                (if n == 1 { "p" } else { "q" }.into(), -3.0),
                (if n == 1 { "q" } else { "p" }.into(), -3.0),
                ("ef".into(), lowest),
            ];
            learned.extend(order.iter().map(|(c, k)| (c.to_string(), made_up[*k])));
            learned.rotate_left(n);
            pieces.extend(learned);
            let model = Unigram::from(pieces, None, false).expect("model");
            results.push(canonical(
                &model,
                &["<s>".into(), "ab".into()],
                &HashSet::new(),
            ));
        }
        let expected: Vec<(String, f64)> = [
            ("<s>", 0.0),
            ("ab", -1.0), // the special token's text learned too: its learned score
            ("p", -3.0),
            ("q", -3.0),
            ("cd", -3.0),
            ("b", made_up[2]),
            ("x", made_up[1]),
            ("z", made_up[0]),
            ("ef", lowest),
        ]
        .iter()
        .map(|(p, s)| (p.to_string(), *s))
        .collect();
        for result in results {
            assert_eq!(result, expected);
        }
    }

    /// A symbol learned with exactly the lowest score (the rarest piece) looks like the first
    /// of the made-up scores; it keeps its score, as every run of the trainer gives it.
    #[test]
    fn a_symbol_learned_with_the_lowest_score_keeps_it() {
        let options = unigram_options(270, &["<s>"]);
        let texts: Vec<String> = ["aaa bbb aaa (", "bbb aaa"]
            .iter()
            .map(|t| t.to_string())
            .collect();
        let lowest = |pieces: &[(String, f64)]| {
            pieces[1..]
                .iter()
                .map(|(_, s)| *s)
                .fold(f64::INFINITY, f64::min)
        };
        let score_of = |pieces: &[(String, f64)], piece: &str| {
            pieces.iter().find(|(p, _)| p == piece).expect("piece").1
        };
        for _ in 0..3 {
            let oracle = pieces(&theirs(&options, &texts));
            assert_eq!(score_of(&oracle, "("), lowest(&oracle));
        }
        let trained = pieces(&ours(&options, &texts));
        assert_eq!(score_of(&trained, "("), lowest(&trained));
        // The symbols never seen take the rest, the lowest code point the highest score.
        assert!(score_of(&trained, "!") > score_of(&trained, "~"));
        assert!(score_of(&trained, "~") > lowest(&trained));
    }

    #[test]
    fn made_up_scores_go_first_to_the_symbols_seen_in_the_texts() {
        let lowest = -5.0;
        let made_up = |k: usize| lowest + (0..k).fold(0.0, |penalty, _| penalty + UNLEARNED_STEP);
        // "c" learned at the lowest score (seen in the texts); "z" (never seen) or "b" (seen,
        // pruned by the trainer) given the first made-up score by the trainer's order.
        for order in [["z", "b", "x"], ["b", "z", "x"], ["x", "b", "z"]] {
            let mut pieces: Vec<(String, f64)> = vec![("<s>".into(), 0.0), ("ab".into(), -1.0)];
            pieces.extend(
                order
                    .iter()
                    .enumerate()
                    .map(|(k, p)| (p.to_string(), made_up(k))),
            );
            pieces.push(("c".into(), lowest));
            let model = Unigram::from(pieces, None, false).expect("model");
            let in_texts: HashSet<char> = "abc".chars().collect();
            let expected: Vec<(String, f64)> = [
                ("<s>", 0.0),
                ("ab", -1.0),
                ("x", made_up(2)),
                ("z", made_up(1)),
                // Seen in the texts: the lowest scores, "b" (pruned) too.
                ("b", lowest),
                ("c", lowest),
            ]
            .iter()
            .map(|(p, s)| (p.to_string(), *s))
            .collect();
            assert_eq!(canonical(&model, &["<s>".into()], &in_texts), expected);
        }
    }

    /// Learned symbols at the lowest score, against `tokenizers`' own training: alone in a word
    /// ("x", "q"), or needed alone inside one ("~" of "Ġ~", beside symbols the trainer dropped).
    #[test]
    fn learned_symbols_at_the_lowest_score_keep_the_trainer_s_score() {
        let options = unigram_options(300, &["<s>"]);
        let corpora: [(&[&str], &[&str]); 3] = [
            (&["x y z", "q"], &["x", "q"]),
            (&["hello world", "hello there ~ ^"], &["~", "^", "d"]),
            (
                &["ab ab abab the cat the mat ab the", "ab the ab ~"],
                &["~"],
            ),
        ];
        for (texts, learned) in corpora {
            let texts: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
            let first = ours(&options, &texts);
            let ours_pieces: HashMap<String, f64> = pieces(&first).into_iter().collect();
            for _ in 0..3 {
                let theirs: HashMap<String, f64> =
                    pieces(&theirs(&options, &texts)).into_iter().collect();
                for &symbol in learned {
                    assert_eq!(ours_pieces[symbol], theirs[symbol], "{symbol} of {texts:?}");
                }
            }
        }
    }

    /// `tokenizers`' unigram trainer lists a special token's text twice when it also learns it
    /// as a piece; it is kept once, at the special token's id, and the file loads.
    #[test]
    fn a_unigram_piece_that_is_a_special_token_is_kept_once() {
        let options = unigram_options(300, &["ab", "<b>"]);
        let texts = vec!["ab ab abab the cat the mat ab the".to_string(); 20];
        let listed = |tokenizer: &Tokenizer| -> Vec<String> {
            pieces(tokenizer)
                .into_iter()
                .map(|(piece, _)| piece)
                .collect()
        };
        // The trainer's own output holds "ab" twice.
        let trained = listed(&theirs(&options, &texts));
        assert_eq!(trained.iter().filter(|p| *p == "ab").count(), 2);
        let unique = ours(&options, &texts);
        let kept = listed(&unique);
        let set: std::collections::HashSet<&String> = kept.iter().collect();
        assert_eq!(set.len(), kept.len());
        assert_eq!(kept.len(), trained.len() - 1);
        assert_eq!(kept[..2], options.special_tokens[..]);
        assert_eq!(unique.token_to_id("ab"), Some(0));
        assert_eq!(unique.get_vocab_size(true), kept.len());
        // With the score the trainer learned for "ab", not the special token's placeholder 0.0
        // (which would make "ab" win where the trainer's own pieces split the text otherwise).
        let learned = pieces(&theirs(&options, &texts))
            .into_iter()
            .skip(2)
            .find(|(piece, _)| piece == "ab")
            .expect("learned")
            .1;
        assert!(learned < 0.0);
        assert!((pieces(&unique)[0].1 - learned).abs() < 1e-9);
        let loaded: Tokenizer = unique
            .to_string(false)
            .expect("json")
            .parse()
            .expect("loads");
        assert_eq!(loaded.token_to_id("ab"), Some(0));
    }
}
