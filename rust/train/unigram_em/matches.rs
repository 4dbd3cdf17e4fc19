//! Every word's matches against the first pieces, found once.
//!
//! Pieces are only ever dropped (by an M step or a pruning), never added, so the pieces found
//! in a word at any step are the first pieces found there that are still pieces. Walking the
//! trie at every character of every word, every step, was most of the E steps' time; here each
//! step reads the word's list and keeps the matches whose piece is left. The lists take 12 bytes
//! a match; past `MATCHES_BUDGET` the words are walked every step instead (`Lookup::Walked`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use super::lattice::{Lattice, Match, NONE};
use super::model::{Model, Piece};

/// Memory the matches may take.
pub const MATCHES_BUDGET: usize = 1 << 30;

pub struct Matches {
    /// Word `w`'s matches are `matches[at[w]..at[w + 1]]`, by start, shortest first.
    at: Vec<usize>,
    matches: Vec<Match>,
    chars: Vec<u32>,
}

impl Matches {
    /// The matches of `words` against `first`, or `None` past `budget` bytes.
    pub fn find(words: &[(String, u32)], first: &[Piece], budget: usize) -> Option<Matches> {
        let model = Model::new(first);
        let limit = budget / std::mem::size_of::<Match>();
        let taken = AtomicUsize::new(0);
        let share = words
            .len()
            .div_ceil(rayon::current_num_threads().max(1) * 4)
            .max(1);
        let shares: Vec<Option<Matches>> = words
            .par_chunks(share)
            .map(|some| {
                let (mut at, mut matches, mut chars) = (Vec::new(), Vec::new(), Vec::new());
                let mut char_at = Vec::new();
                for (word, _) in some {
                    at.push(matches.len());
                    char_at.clear();
                    char_at.resize(word.len() + 1, u32::MAX);
                    let mut k = 0u32;
                    for (i, _) in word.char_indices() {
                        char_at[i] = k;
                        k += 1;
                    }
                    char_at[word.len()] = k;
                    chars.push(k);
                    let before = matches.len();
                    for (k, (i, _)) in word.char_indices().enumerate() {
                        model.prefixes(&word.as_bytes()[i..], |len, piece| {
                            matches.push(Match {
                                from: k as u32,
                                to: char_at[i + len],
                                first: piece,
                            });
                        });
                    }
                    // Past the budget, given up at once: the memory is never taken.
                    let found = matches.len() - before;
                    if taken.fetch_add(found, Ordering::Relaxed) + found > limit {
                        return None;
                    }
                }
                Some(Matches { at, matches, chars })
            })
            .collect();
        let mut all = Matches {
            at: Vec::with_capacity(words.len() + 1),
            matches: Vec::with_capacity(taken.load(Ordering::Relaxed).min(limit)),
            chars: Vec::with_capacity(words.len()),
        };
        for share in shares {
            let Matches { at, matches, chars } = share?;
            let base = all.matches.len();
            all.at.extend(at.into_iter().map(|a| a + base));
            all.matches.extend(matches);
            all.chars.extend(chars);
        }
        all.at.push(all.matches.len());
        Some(all)
    }
}

/// The pieces of a step as the matches name them: each first piece's id now (`NONE`: dropped).
pub struct Current<'p> {
    pub pieces: &'p [Piece],
    pub id_of: Vec<u32>,
    pub unknown: f64,
}

/// How a step finds the pieces in the words.
pub enum Lookup<'a> {
    Matched(&'a Matches, Current<'a>),
    Walked(Model<'a>),
}

impl<'a> Lookup<'a> {
    /// `pieces` found in the words: through `matches` (whose first pieces' indices by text are
    /// `first_index`) when there are, else by a trie of them.
    pub fn new(
        pieces: &'a [Piece],
        matches: Option<&'a Matches>,
        first_index: &HashMap<&str, u32>,
        first_count: usize,
    ) -> Self {
        let Some(matches) = matches else {
            return Lookup::Walked(Model::new(pieces));
        };
        let mut id_of = vec![NONE; first_count];
        for (id, (piece, _)) in pieces.iter().enumerate() {
            // A text listed twice: the last id, as the trie keeps it.
            if let Some(&first) = first_index.get(piece.as_str()) {
                id_of[first as usize] = id as u32;
            }
        }
        let min_score = pieces
            .iter()
            .map(|(_, s)| *s)
            .fold(f64::INFINITY, |low, s| if s < low { s } else { low });
        Lookup::Matched(
            matches,
            Current {
                pieces,
                id_of,
                unknown: min_score - super::model::UNKNOWN_PENALTY,
            },
        )
    }

    /// The lattice of the `w`-th word, `word`.
    pub fn build(&self, lattice: &mut Lattice, w: usize, word: &str, bos: u32, eos: u32) {
        match self {
            Lookup::Matched(matches, current) => {
                let found = &matches.matches[matches.at[w]..matches.at[w + 1]];
                lattice.build_matched(
                    found,
                    matches.chars[w],
                    &current.id_of,
                    current.pieces,
                    current.unknown,
                    bos,
                    eos,
                );
            }
            Lookup::Walked(model) => lattice.build(model, word, bos, eos),
        }
    }
}
