//! The model's vocabulary (`model.vocab`) as a load reads it, and what an encoder keeps of it.
//!
//! Both keep the tokens in the file's order with an index of their positions by hash
//! (`hashbrown::HashTable` of `u32`): made in one pass over the tokens, in order. Before, a
//! load filled a hash map of owned strings (Qwen's 151k tokens: as many allocations to make
//! and free) and then sorted its entries for the encoder's binary search, each step a random
//! read of a token; about 45 ms of a 110 ms load here.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::OnceLock;

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

/// The model's vocabulary: each distinct token's id as `tokenizers` reads the file (a token
/// listed twice keeps its last id, as in a map filled in file order). Tokens are borrowed from
/// the file's text unless an escape forces a copy.
#[derive(Clone, Default)]
pub struct Vocab<'a> {
    /// (token, id) in the file's order, a token listed again included.
    entries: Vec<(Cow<'a, str>, u32)>,
    /// Each distinct token's last entry, by `hash(token)`.
    index: HashTable<u32>,
}

impl std::fmt::Debug for Vocab<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Vocab({} tokens)", self.len())
    }
}

/// Each distinct token's last place among `len` tokens (`token(at)`), by `hash(token)`.
fn last_entries<'t>(len: usize, token: impl Fn(usize) -> &'t str) -> HashTable<u32> {
    let mut index = HashTable::with_capacity(len);
    for at in 0..len {
        let (new, place) = (token(at), at as u32);
        let hashed = hash(new);
        match index.find_mut(hashed, |old: &u32| token(*old as usize) == new) {
            Some(kept) => *kept = place,
            None => {
                index.insert_unique(hashed, place, |old| hash(token(*old as usize)));
            }
        }
    }
    index
}

/// The hash the indexes are kept by (FxHash: the 450k lookups of reading Qwen's merges made
/// SipHash a fifth of the load).
fn hash(token: &str) -> u64 {
    FxBuildHasher.hash_one(token)
}

impl<'a> Vocab<'a> {
    /// The vocabulary of `(token, id)` pairs in the file's order.
    pub fn from_file_order(entries: Vec<(Cow<'a, str>, u32)>) -> Self {
        let index = last_entries(entries.len(), |at| &entries[at].0);
        Vocab { entries, index }
    }

    /// Distinct tokens.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The id of `token`, if the vocabulary has it.
    pub fn get(&self, token: &str) -> Option<u32> {
        let at = self
            .index
            .find(hash(token), |at| *self.entries[*at as usize].0 == *token)?;
        Some(self.entries[*at as usize].1)
    }

    /// Every distinct (token, id), in the file's order of their last entries.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> + '_ {
        let every = self.index.len() == self.entries.len();
        (self.entries.iter().enumerate())
            .filter(move |(at, (token, _))| every || self.last_entry(token) == Some(*at))
            .map(|(_, (token, id))| (&**token, *id))
    }

    /// Where `token`'s last entry is.
    fn last_entry(&self, token: &str) -> Option<usize> {
        let at = self
            .index
            .find(hash(token), |at| *self.entries[*at as usize].0 == *token)?;
        Some(*at as usize)
    }

    /// One past the largest id (0 for an empty vocabulary; `u32::MAX` where the file gives
    /// that id, which then bounds nothing the load cache could hold).
    pub fn id_bound(&self) -> u32 {
        self.iter()
            .map(|(_, id)| id.saturating_add(1))
            .max()
            .unwrap_or(0)
    }

    /// An id that two tokens share, if one does.
    pub fn repeated_id(&self) -> Option<u32> {
        repeated(self.iter().map(|(_, id)| id).collect())
    }

    /// What an encoder keeps to answer `token_id` and `vocab_size`: the tokens back to back
    /// in the file's order, their ids and the same index, with the added tokens' ids.
    pub fn token_ids(&self, added: HashMap<String, u32>, size: usize) -> TokenIds {
        let mut text = String::with_capacity(self.entries.iter().map(|(t, _)| t.len()).sum());
        let ends = (self.entries.iter())
            .map(|(token, _)| {
                text.push_str(token);
                // Checked: a vocabulary of 4 GB of tokens is no tokenizer file this reads.
                u32::try_from(text.len()).unwrap_or(u32::MAX)
            })
            .collect();
        // Most files list the vocabulary in id order: then a token's place is its id.
        let in_place = (self.entries.iter().enumerate()).all(|(at, (_, id))| *id as usize == at);
        TokenIds {
            text,
            ends,
            ids: (!in_place).then(|| self.entries.iter().map(|(_, id)| *id).collect()),
            index: OnceLock::new(),
            added,
            size,
        }
    }
}

/// An id that occurs twice in `ids`, if one does: a bit per id below the largest where the ids
/// are dense (a vocabulary's are), else sorted.
pub fn repeated(mut ids: Vec<u32>) -> Option<u32> {
    let bound = ids.iter().max().map_or(0, |&id| id as usize + 1);
    if bound <= ids.len().saturating_mul(8).max(1 << 16) {
        let mut seen = vec![0u64; bound.div_ceil(64)];
        return ids.into_iter().find(|&id| {
            let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
            let before = seen[word] & bit != 0;
            seen[word] |= bit;
            before
        });
    }
    ids.sort_unstable();
    ids.windows(2)
        .find(|pair| pair[0] == pair[1])
        .map(|pair| pair[0])
}

/// Token -> id, as `Spec::token_id`: the vocabulary's tokens back to back, about a tenth of a
/// hash map of strings. What an encoder answers `token_id` and `vocab_size` from.
pub struct TokenIds {
    /// The model's tokens in the file's order, back to back; token `i` ends at `ends[i]`.
    text: String,
    ends: Vec<u32>,
    /// Token `i`'s id; `None` where it is `i` for every token (0.6 MB less for Qwen in each
    /// process).
    ids: Option<Vec<u32>>,
    /// Each distinct token's last entry, by `hash(token)`: made at the first lookup (10 ms for
    /// Qwen's), as most processes never look a token up (a DataLoader worker, given the EOS id)
    /// and it is 1.3 MiB of each one's memory.
    index: OnceLock<HashTable<u32>>,
    added: HashMap<String, u32>,
    size: usize,
}

impl TokenIds {
    pub fn token_id(&self, token: &str) -> Option<u32> {
        if let Some(&id) = self.added.get(token) {
            return Some(id);
        }
        let index = self
            .index
            .get_or_init(|| last_entries(self.ends.len(), |at| self.token_at(at)));
        let at = index.find(hash(token), |at| self.token_at(*at as usize) == token)?;
        Some(self.ids.as_ref().map_or(*at, |ids| ids[*at as usize]))
    }

    /// Token `at` of the file's order.
    fn token_at(&self, at: usize) -> &str {
        let start = match at {
            0 => 0,
            _ => self.ends[at - 1] as usize,
        };
        self.text
            .get(start..self.ends[at] as usize)
            .unwrap_or_default()
    }

    pub fn vocab_size(&self) -> usize {
        self.size
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn vocab<'a>(pairs: &[(&'a str, u32)]) -> Vocab<'a> {
        Vocab::from_file_order(
            pairs
                .iter()
                .map(|&(t, id)| (Cow::Borrowed(t), id))
                .collect(),
        )
    }

    /// Tokens alike but for a last byte, a zero byte or their length are each found, by both
    /// lookups, and tokens not in the vocabulary are not.
    #[test]
    fn every_token_is_found_and_no_other() {
        let tokens = [
            "abcdefghi",
            "a\u{0}",
            "a",
            "a\u{0}\u{0}",
            "ab",
            "abcdefg",
            "abcdefgh\u{0}",
            "b",
            "\u{e9}t\u{e9}",
            "\u{ff}",
        ];
        let pairs: Vec<(&str, u32)> = (0..).zip(tokens).map(|(id, t)| (t, id * 3)).collect();
        let vocab = vocab(&pairs);
        let ids = vocab.token_ids(HashMap::new(), vocab.len());
        for (token, id) in &pairs {
            assert_eq!(vocab.get(token), Some(*id), "{token:?}");
            assert_eq!(ids.token_id(token), Some(*id), "{token:?}");
        }
        assert_eq!(vocab.iter().collect::<Vec<_>>(), pairs);
        for missing in ["", "abcdefgh", "a\u{0}\u{0}\u{0}", "c", "\u{e9}"] {
            assert_eq!(vocab.get(missing), None, "{missing:?}");
            assert_eq!(ids.token_id(missing), None, "{missing:?}");
        }
    }

    /// As a map filled in file order: the last id of a token listed twice (or three times).
    #[test]
    fn a_token_listed_again_keeps_its_last_id() {
        let vocab = vocab(&[("a", 1), ("b", 2), ("a", 3), ("c", 4), ("a", 5), ("b", 6)]);
        assert_eq!(vocab.len(), 3);
        assert_eq!(
            vocab.iter().collect::<Vec<_>>(),
            [("c", 4), ("a", 5), ("b", 6)]
        );
        assert_eq!(vocab.id_bound(), 7);
        assert_eq!(vocab.repeated_id(), None);
        let ids = vocab.token_ids(HashMap::new(), vocab.len());
        assert_eq!(
            ["a", "b", "c"].map(|t| ids.token_id(t)),
            [Some(5), Some(6), Some(4)]
        );
    }

    #[test]
    fn shared_ids_and_empty_vocabularies() {
        assert_eq!(
            vocab(&[("a", 1), ("b", 9), ("c", 1)]).repeated_id(),
            Some(1)
        );
        // Sparse ids, past the bit map's reach.
        let sparse = [
            ("a", 7),
            ("b", u32::MAX - 1),
            ("c", 1 << 30),
            ("d", u32::MAX - 1),
        ];
        assert_eq!(vocab(&sparse).repeated_id(), Some(u32::MAX - 1));
        assert_eq!(vocab(&sparse[..3]).repeated_id(), None);
        assert_eq!(vocab(&[("a", u32::MAX)]).id_bound(), u32::MAX);
        // A token's earlier id, given up, is no second use of it.
        assert_eq!(vocab(&[("a", 1), ("a", 2), ("b", 1)]).repeated_id(), None);
        let empty = vocab(&[]);
        assert!(empty.is_empty());
        assert_eq!((empty.id_bound(), empty.repeated_id()), (0, None));
        assert_eq!(empty.get("a"), None);
        assert_eq!(empty.token_ids(HashMap::new(), 0).token_id("a"), None);
    }

    /// A vocabulary listed in id order keeps no ids; one listed otherwise keeps them.
    #[test]
    fn ids_are_kept_only_where_they_are_not_the_places() {
        let in_order = vocab(&[("a", 0), ("b", 1), ("c", 2)]);
        let ids = in_order.token_ids(HashMap::new(), 3);
        assert!(ids.ids.is_none());
        assert_eq!(
            ["a", "b", "c", "d"].map(|t| ids.token_id(t)),
            [Some(0), Some(1), Some(2), None]
        );
        let shuffled = vocab(&[("a", 2), ("b", 0), ("c", 1)]).token_ids(HashMap::new(), 3);
        assert!(shuffled.ids.is_some());
        assert_eq!(
            ["a", "b", "c"].map(|t| shuffled.token_id(t)),
            [Some(2), Some(0), Some(1)]
        );
        // A token listed again answers from its last entry, whose place is its id here too.
        let again = vocab(&[("a", 0), ("b", 1), ("a", 2)]).token_ids(HashMap::new(), 2);
        assert!(again.ids.is_none());
        assert_eq!(["a", "b"].map(|t| again.token_id(t)), [Some(2), Some(1)]);
    }

    /// The added tokens answer first.
    #[test]
    fn added_tokens_answer_before_the_model() {
        let vocab = vocab(&[("a", 0), ("<s>", 1)]);
        let added = HashMap::from([("<s>".to_string(), 7), ("</s>".to_string(), 8)]);
        let ids = vocab.token_ids(added, 4);
        let answers = ["a", "<s>", "</s>", "b"].map(|t| ids.token_id(t));
        assert_eq!(answers, [Some(0), Some(7), Some(8), None]);
        assert_eq!(ids.vocab_size(), 4);
    }

    proptest! {
        /// Against a `HashMap` filled in file order, on vocabularies of few letters (so
        /// that tokens repeat and share prefixes).
        #[test]
        fn answers_as_a_map_filled_in_order(
            pairs in prop::collection::vec(("[ab\u{e9}\u{0}]{0,4}", 0u32..40), 0..60),
            asked in prop::collection::vec("[ab\u{e9}\u{0}]{0,5}", 0..20),
        ) {
            let mut map = HashMap::new();
            for (token, id) in &pairs {
                map.insert(token.as_str(), *id);
            }
            let pairs: Vec<(&str, u32)> = pairs.iter().map(|(t, id)| (t.as_str(), *id)).collect();
            let vocab = vocab(&pairs);
            let ids = vocab.token_ids(HashMap::new(), vocab.len());
            prop_assert_eq!(vocab.len(), map.len());
            let mut listed: Vec<(&str, u32)> = vocab.iter().collect();
            listed.sort_unstable();
            let mut expected: Vec<(&str, u32)> = map.iter().map(|(t, id)| (*t, *id)).collect();
            expected.sort_unstable();
            prop_assert_eq!(listed, expected);
            for token in pairs.iter().map(|(t, _)| *t).chain(asked.iter().map(String::as_str)) {
                prop_assert_eq!(vocab.get(token), map.get(token).copied());
                prop_assert_eq!(ids.token_id(token), map.get(token).copied());
            }
            prop_assert_eq!(vocab.id_bound(), map.values().map(|id| id + 1).max().unwrap_or(0));
        }
    }
}
