//! The merge pass: BPE over the table of distinct words, giving the vocabulary and merges that
//! `tokenizers`' `BpeTrainer::do_train` gives on the same words and settings (no
//! `limit_alphabet`, `continuing_subword_prefix`, `end_of_word_suffix` or `max_token_length`:
//! the project sets none). Its rules, each followed here:
//!
//! - ids: the special tokens first, in order (a repeated one once); then the alphabet, every
//!   character of the words and of the initial alphabet, by code point; then one per merge
//!   whose result is a new string. A result that is a token already (the same string made by
//!   another pair) keeps that token's id and adds nothing to the vocabulary.
//! - a pair's count is the sum of the counts of the words it occurs in, once per occurrence;
//!   the next merge is the pair of the biggest count, the smallest `(left, right)` ids on a tie.
//! - the queue (`merge_queue`) holds entries whose counts were right when pushed; one whose
//!   count is no longer the pair's is pushed again at the pair's count and the next one is
//!   looked at. The pass stops at `vocab_size` tokens (checked before each pop), on an empty
//!   queue, or at the first up-to-date count below `min_frequency` (or 0).
//! - an entry is merged in its own words only. Occurrences formed by later merges are in the
//!   entries pushed then, so one pair can be merged several times, in different words, each
//!   time a merge of its own in the list (`Bpe::merges`).
//! - a merge does not take the merged pair's own occurrences off its count.
//!
//! Without `max_token_length` the last three rules never change the result: each pair's
//! occurrences are all formed by one merge (the one that made the later of its two tokens, or
//! none for two characters), so each pair has one entry at a time, whose words are every word
//! it is in; no pair is merged twice, and no two entries of one pair tie. Only a special token
//! that a merge makes again (its string is a word's piece) reuses an id. The rules are kept,
//! so that nothing here rests on that argument.

use std::collections::hash_map::Entry;

use rustc_hash::{FxHashMap, FxHashSet};

use super::merge_queue::MergeQueue;
use super::word_arena::{pair_of, Changes, PairKey, WordArena};
use super::words::WordCounts;
use crate::error::{Error, Result};

/// What the merge pass is asked for.
#[derive(Debug, Clone)]
pub struct BpeOptions {
    /// Tokens in all, special tokens and alphabet included.
    pub vocab_size: usize,
    pub min_frequency: u64,
    pub special_tokens: Vec<String>,
    /// Characters in the vocabulary whether the words have them or not.
    pub initial_alphabet: Vec<char>,
}

/// A trained BPE model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bpe {
    /// Token strings by id.
    pub vocab: Vec<String>,
    /// Every merge, in the order made: left id, right id, id of the result. A pair merged again
    /// (see the module's notes) is here each time.
    pub merges: Vec<(u32, u32, u32)>,
}

impl Bpe {
    /// The merges as `tokenizer.json` lists them: each pair once, at the place of its last
    /// merge (`tokenizers` keeps merges in a map from pair to rank, the later rank replacing
    /// the earlier).
    pub fn merge_list(&self) -> Vec<(u32, u32)> {
        let mut seen = FxHashSet::default();
        let mut list: Vec<(u32, u32)> = self
            .merges
            .iter()
            .rev()
            .filter(|&&(a, b, _)| seen.insert((a, b)))
            .map(|&(a, b, _)| (a, b))
            .collect();
        list.reverse();
        list
    }
}

/// Token ids by string and strings by id.
#[derive(Default)]
struct Vocab {
    tokens: Vec<String>,
    ids: FxHashMap<String, u32>,
}

impl Vocab {
    /// The id of `token`, added at the end when new.
    fn id(&mut self, token: String) -> u32 {
        if let Some(&id) = self.ids.get(&token) {
            return id;
        }
        let id = self.tokens.len() as u32;
        self.tokens.push(token.clone());
        self.ids.insert(token, id);
        id
    }
}

/// Train BPE on `words` as `tokenizers`' `BpeTrainer` would (see the module's notes). The
/// threads of the current rayon pool count pairs and merge big lists of words; the result is
/// the same for any number of them. The table is dropped once its words are symbols.
pub fn train_bpe(words: WordCounts, options: &BpeOptions) -> Result<Bpe> {
    train_bpe_with(words, options, |_| {})
}

/// `train_bpe`, calling `on_token` with the vocabulary's size after each merge (progress).
pub fn train_bpe_with(
    words: WordCounts,
    options: &BpeOptions,
    mut on_token: impl FnMut(usize),
) -> Result<Bpe> {
    if words.len() >= u32::MAX as usize {
        return Err(Error::Input(format!(
            "{} distinct words: the merge pass takes fewer than 2^32",
            words.len()
        )));
    }
    let mut vocab = Vocab::default();
    for token in &options.special_tokens {
        vocab.id(token.clone());
    }
    let mut alphabet: Vec<char> = options.initial_alphabet.clone();
    alphabet.extend(characters(&words));
    alphabet.sort_unstable();
    alphabet.dedup();
    for &c in &alphabet {
        vocab.id(c.to_string());
    }
    let mut arena = symbols(&words, &vocab);
    // The words are in the arena now, as symbols.
    drop(words);
    crate::interrupt::check()?;

    // A pair counted fewer than `min_frequency` times is never merged: a pair's count is
    // biggest when its occurrences are formed and only falls after, and every formation pushes
    // an entry of its own. Such pairs take no place in the queue (most pairs of a long tail of
    // rare words are seen once); their counts are kept, exact.
    let least = options.min_frequency.max(1);
    let pairs = arena.pairs(least);
    let queued = pairs
        .pairs
        .values()
        .filter(|slot| slot.count >= least)
        .count();
    // Room for the entries merges push: growing the heap later holds it twice for a moment.
    let mut queue = MergeQueue::with_words(pairs.words, 2 * queued)?;
    let mut pair_counts: FxHashMap<PairKey, u64> = FxHashMap::default();
    pair_counts.reserve(pairs.pairs.len());
    // One entry per pair: the order they go in decides no tie.
    for (key, slot) in pairs.pairs {
        pair_counts.insert(key, slot.count);
        if slot.count >= least {
            queue.push_stored(slot.count, key, slot.range());
        }
    }

    crate::interrupt::check()?;
    let mut merges = Vec::new();
    let mut in_words = Vec::new();
    let mut changes = Changes::default();
    while vocab.tokens.len() < options.vocab_size {
        let Some(top) = queue.pop() else {
            break;
        };
        let count = pair_counts.get(&top.pair).copied().unwrap_or(0);
        if top.count != count {
            queue.push_again(top, count);
            continue;
        }
        if count < 1 || options.min_frequency > count {
            break;
        }
        let (left, right) = pair_of(top.pair);
        let token = format!(
            "{}{}",
            vocab.tokens[left as usize], vocab.tokens[right as usize]
        );
        let new = vocab.id(token);
        merges.push((left, right, new));
        queue.take_words(&top, &mut in_words);
        arena.merge(&in_words, left, right, new, &mut changes);
        apply(&mut changes, &mut pair_counts, &mut queue, least)?;
        on_token(vocab.tokens.len());
        if merges.len() % 256 == 0 {
            crate::interrupt::check()?; // a large vocabulary merges for minutes
        }
    }
    Ok(Bpe {
        vocab: vocab.tokens,
        merges,
    })
}

/// Count changes into `pair_counts`, then one entry per pair formed, at its count now, with the
/// words it was formed in (`tokenizers` pushes these whatever the pair's other entries), when
/// that count is at least `least` (`min_frequency`). `changes` is left empty, for the next merge.
fn apply(
    changes: &mut Changes,
    pair_counts: &mut FxHashMap<PairKey, u64>,
    queue: &mut MergeQueue,
    least: u64,
) -> Result<()> {
    for (key, delta) in changes.delta.drain() {
        match pair_counts.entry(key) {
            // The counts are exact, so none goes below zero.
            Entry::Occupied(mut count) => match count.get().checked_add_signed(delta) {
                Some(0) | None => {
                    count.remove();
                }
                Some(sum) => *count.get_mut() = sum,
            },
            Entry::Vacant(slot) => {
                if delta > 0 {
                    slot.insert(delta as u64);
                }
            }
        }
    }
    let formed = &mut changes.formed;
    formed.sort_unstable();
    formed.dedup();
    let mut rest = formed.as_slice();
    while let Some(&(key, _)) = rest.first() {
        let run = rest.iter().take_while(|&&(k, _)| k == key).count();
        let count = pair_counts.get(&key).copied().unwrap_or(0);
        if count >= least {
            queue.push(count, key, rest[..run].iter().map(|&(_, w)| w))?;
        }
        rest = &rest[run..];
    }
    formed.clear();
    Ok(())
}

/// Every character of the words.
fn characters(words: &WordCounts) -> Vec<char> {
    let mut low = [false; 256];
    let mut high: FxHashSet<char> = FxHashSet::default();
    for (word, _) in words.iter() {
        for c in word.chars() {
            match low.get_mut(c as usize) {
                Some(seen) => *seen = true,
                None => {
                    high.insert(c);
                }
            }
        }
    }
    let low = (0..256u32)
        .filter(|&c| low[c as usize])
        .filter_map(char::from_u32);
    low.chain(high).collect()
}

/// The words as symbol ids (every character is in the vocabulary by now). Words of one symbol
/// have no pair and are left out.
fn symbols(words: &WordCounts, vocab: &Vocab) -> WordArena {
    let mut buffer = [0u8; 4];
    let mut id_of = |c: char| {
        vocab
            .ids
            .get(&*c.encode_utf8(&mut buffer))
            .copied()
            .unwrap_or(u32::MAX)
    };
    // ByteLevel words are all below U+0144: a table for those, a map for the rest.
    let low: Vec<u32> = (0..LOW_CHARS)
        .map(|c| char::from_u32(c).map_or(u32::MAX, &mut id_of))
        .collect();
    let mut high: FxHashMap<char, u32> = FxHashMap::default();
    let long = words.iter().filter(|(w, _)| w.chars().nth(1).is_some());
    let symbols = long.clone().map(|(w, _)| w.chars().count()).sum();
    let mut arena = WordArena::with_capacity(long.clone().count(), symbols);
    for (word, count) in long {
        let ids = word.chars().map(|c| match low.get(c as usize) {
            Some(&id) => id,
            None => *high.entry(c).or_insert_with(|| id_of(c)),
        });
        arena.push(ids, count);
    }
    arena
}

/// Characters below this take `symbols`' table.
const LOW_CHARS: u32 = 0x200;

#[cfg(test)]
mod tests {
    use super::*;

    fn train(words: &[(&str, u64)], vocab_size: usize, min_frequency: u64) -> Bpe {
        let options = BpeOptions {
            vocab_size,
            min_frequency,
            special_tokens: vec![],
            initial_alphabet: vec![],
        };
        train_bpe(WordCounts::from_counts(words.iter().copied()), &options).expect("trained")
    }

    /// The example of `tokenizers`' own trainer test: with `min_frequency` 2 only `r e`,
    /// `a re` and `i s` are merged, after the 22 characters by code point.
    #[test]
    fn the_tokenizers_example() {
        let words = [
            ("roses", 1),
            ("are", 2),
            ("red", 1),
            ("voilets", 1),
            ("blue", 1),
            ("BERT", 1),
            ("is", 2),
            ("big", 1),
            ("and", 1),
            ("so", 1),
            ("GPT-2", 1),
        ];
        let bpe = train(&words, 30_000, 2);
        let chars: Vec<String> = "-2BEGPRTabdegilnorstuv".chars().map(String::from).collect();
        assert_eq!(bpe.vocab[..22], chars[..]);
        assert_eq!(bpe.vocab[22..], ["re", "are", "is"]);
        let id = |t: &str| bpe.vocab.iter().position(|v| v == t).expect("token") as u32;
        assert_eq!(
            bpe.merges,
            [
                (id("r"), id("e"), 22),
                (id("a"), id("re"), 23),
                (id("i"), id("s"), 24)
            ]
        );
        // The same words given twice add up; no vocabulary smaller than the alphabet.
        let twice: Vec<(&str, u64)> = words.iter().chain(&words).copied().collect();
        assert_eq!(train(&twice, 30_000, 4), bpe);
        assert_eq!(train(&words, 5, 2).vocab.len(), 22);
    }

    #[test]
    fn merge_list_keeps_each_pair_at_its_last_merge() {
        let bpe = Bpe {
            vocab: vec![],
            merges: vec![(1, 2, 5), (3, 4, 6), (1, 2, 5), (5, 6, 7)],
        };
        assert_eq!(bpe.merge_list(), [(3, 4), (1, 2), (5, 6)]);
    }
}
