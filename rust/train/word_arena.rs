//! The merge pass's words: every word's symbols in one `u32` arena, merged in place, and the
//! pair-count changes a merge makes, exactly as `tokenizers`' `Word::merge` reports them.

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

/// Fills the rest of a word's slot once merges have made the word shorter.
const END: u32 = u32::MAX;
/// Words of one merge handled by one task; a merge that touches fewer runs on one thread.
const WORDS_PER_TASK: usize = 2048;
/// How many words ahead a merge starts loading the next words.
const LOOK_AHEAD: usize = 8;

/// A pair of symbols as one key: the left id in the high half, so keys order as `(left, right)`.
pub type PairKey = u64;

#[inline]
pub fn pair_key(left: u32, right: u32) -> PairKey {
    (u64::from(left) << 32) | u64::from(right)
}

#[inline]
pub fn pair_of(key: PairKey) -> (u32, u32) {
    ((key >> 32) as u32, key as u32)
}

pub struct WordArena {
    symbols: Vec<u32>,
    /// Word `w` owns `symbols[starts[w]..starts[w + 1]]`; its symbols end there or at `END`.
    starts: Vec<usize>,
    counts: Vec<u64>,
}

/// What merging a pair in some words did to the counts of other pairs: `delta` per pair
/// (weighted by word counts), and each (pair, word) where an occurrence was formed, which is
/// where `tokenizers` looks for the pair when it is merged (its `where_to_update`).
#[derive(Default)]
pub struct Changes {
    pub delta: FxHashMap<PairKey, i64>,
    pub formed: Vec<(PairKey, u32)>,
}

impl Changes {
    #[inline]
    fn remove(&mut self, key: PairKey, count: i64) {
        *self.delta.entry(key).or_default() -= count;
    }

    #[inline]
    fn form(&mut self, key: PairKey, count: i64, word: u32) {
        *self.delta.entry(key).or_default() += count;
        self.formed.push((key, word));
    }

    fn absorb(&mut self, other: Changes) {
        for (key, delta) in other.delta {
            *self.delta.entry(key).or_default() += delta;
        }
        self.formed.extend(other.formed);
    }
}

impl WordArena {
    pub fn with_capacity(words: usize, symbols: usize) -> WordArena {
        let mut starts = Vec::with_capacity(words + 1);
        starts.push(0);
        WordArena {
            symbols: Vec::with_capacity(symbols),
            starts,
            counts: Vec::with_capacity(words),
        }
    }

    pub fn push(&mut self, symbols: impl IntoIterator<Item = u32>, count: u64) {
        self.symbols.extend(symbols);
        self.starts.push(self.symbols.len());
        self.counts.push(count);
    }

    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Word `w`'s symbols now.
    pub fn word(&self, w: usize) -> &[u32] {
        let slot = &self.symbols[self.starts[w]..self.starts[w + 1]];
        &slot[..slot.iter().position(|&s| s == END).unwrap_or(slot.len())]
    }

    /// Merge `left right` into `new` in the words `words` (ascending, each once), as
    /// `tokenizers` does, and add what changed to `changes`. Big lists are split among the
    /// threads; the changes are the same whatever the split.
    pub fn merge(&mut self, words: &[u32], left: u32, right: u32, new: u32, changes: &mut Changes) {
        let counts = &self.counts;
        let starts = &self.starts;
        debug_assert!(words.windows(2).all(|w| w[0] < w[1]));
        // Merge in the words of `chunk`, whose slots lie in `part`, which starts at `base`.
        let merge_run = |part: &mut [u32], base: usize, chunk: &[u32], changes: &mut Changes| {
            for (i, &w) in chunk.iter().enumerate() {
                // The words lie all over the arena, and waiting for each one's first load was
                // most of a merge's time: the slots of the words a few ahead are fetched while
                // this one is merged, and the starts of those further on before that.
                if let Some(&ahead) = chunk.get(i + 2 * LOOK_AHEAD) {
                    prefetch(starts, ahead as usize);
                }
                if let Some(&ahead) = chunk.get(i + LOOK_AHEAD) {
                    prefetch(part, starts[ahead as usize] - base);
                }
                let (from, to) = (starts[w as usize] - base, starts[w as usize + 1] - base);
                let slot = &mut part[from..to];
                merge_word(slot, left, right, new, counts[w as usize], w, changes);
            }
        };
        if words.len() < 2 * WORDS_PER_TASK {
            return merge_run(&mut self.symbols, 0, words, changes);
        }
        // Each task gets the part of the arena its words lie in: the words ascend, so the
        // parts follow one another and do not overlap.
        let mut tasks = Vec::with_capacity(words.len().div_ceil(WORDS_PER_TASK));
        let mut rest: &mut [u32] = &mut self.symbols;
        let mut rest_start = 0;
        for chunk in words.chunks(WORDS_PER_TASK) {
            let (Some(&first), Some(&last)) = (chunk.first(), chunk.last()) else {
                continue;
            };
            let (from, to) = (starts[first as usize], starts[last as usize + 1]);
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(from - rest_start);
            let (part, tail) = tail.split_at_mut(to - from);
            rest = tail;
            rest_start = to;
            tasks.push((chunk, part, from));
        }
        let found = tasks
            .into_par_iter()
            .map(|(chunk, part, base)| {
                let mut changes = Changes::default();
                merge_run(part, base, chunk, &mut changes);
                changes
            })
            .reduce(Changes::default, |mut a, b| {
                a.absorb(b);
                a
            });
        changes.absorb(found);
    }

    /// Every pair of the words with its count and the words it is in: counted by the threads
    /// over fixed runs of words, then the words written in one pass, each pair's together and
    /// ascending, into one arena (a `Vec` per pair would cost as much again as the words).
    /// Every pair of the words with its count; the words of those counted at least `indexed`
    /// times are listed (`PairSlot::range`), the others' range is empty.
    pub fn pairs(&self, indexed: u64) -> Pairs {
        let runs = self.len().div_ceil(WORDS_PER_TASK);
        let mut pairs = (0..runs)
            .into_par_iter()
            .map(|run| {
                let mut pairs: FxHashMap<PairKey, PairSlot> = FxHashMap::default();
                let end = ((run + 1) * WORDS_PER_TASK).min(self.len());
                let mut seen = FxHashSet::default();
                for w in run * WORDS_PER_TASK..end {
                    let count = self.counts[w];
                    self.each_pair(w, &mut seen, |key, first| {
                        let slot = pairs.entry(key).or_default();
                        slot.count += count;
                        slot.words += u32::from(first);
                    });
                }
                pairs
            })
            .reduce(FxHashMap::default, |a, b| {
                let (mut into, from) = if a.len() >= b.len() { (a, b) } else { (b, a) };
                for (key, slot) in from {
                    let total = into.entry(key).or_default();
                    total.count += slot.count;
                    total.words += slot.words;
                }
                into
            });
        let mut end = 0;
        for slot in pairs.values_mut() {
            if slot.count < indexed {
                slot.words = 0;
            }
            end += slot.words as usize;
            slot.next = end - slot.words as usize;
        }
        let mut words = vec![0u32; end];
        let mut seen = FxHashSet::default();
        for w in 0..self.len() {
            self.each_pair(w, &mut seen, |key, first| {
                let listed = pairs.get_mut(&key).filter(|slot| slot.words > 0);
                if let (true, Some(slot)) = (first, listed) {
                    words[slot.next] = w as u32;
                    slot.next += 1;
                }
            });
        }
        Pairs { pairs, words }
    }

    /// Call `f` with each pair of word `w`, and whether it is the pair's first time in the
    /// word; `seen` is scratch for long words (short ones look back instead).
    #[inline]
    fn each_pair(&self, w: usize, seen: &mut FxHashSet<PairKey>, mut f: impl FnMut(PairKey, bool)) {
        let word = self.word(w);
        if word.len() <= SHORT_WORD {
            for (i, window) in word.windows(2).enumerate() {
                let key = pair_key(window[0], window[1]);
                let first = !word[..i + 1]
                    .windows(2)
                    .any(|before| pair_key(before[0], before[1]) == key);
                f(key, first);
            }
        } else {
            seen.clear();
            for window in word.windows(2) {
                let key = pair_key(window[0], window[1]);
                f(key, seen.insert(key));
            }
        }
    }
}

/// Words up to this long find a pair's earlier occurrence by looking back.
const SHORT_WORD: usize = 16;

#[derive(Default, Clone, Copy)]
pub struct PairSlot {
    /// The pair's count: its occurrences, each weighted by its word's count.
    pub count: u64,
    /// How many words it is in.
    pub words: u32,
    /// Past the end of its words in `Pairs::words` (while they are written: where the next goes).
    next: usize,
}

impl PairSlot {
    /// Its words in `Pairs::words`.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.next - self.words as usize..self.next
    }
}

/// Every pair of the words: its count and where its words are in `words`.
pub struct Pairs {
    pub pairs: FxHashMap<PairKey, PairSlot>,
    pub words: Vec<u32>,
}

/// Merge every `left right` in one word's slot, left to right, into `new`, as
/// `tokenizers::models::bpe::Word::merge` does, and note the changes: for each merge, the pair
/// with the symbol before it loses one and the pair with `new` gains one, and the same after it.
/// The merged pair itself is not taken off (`tokenizers` does not); it loses an occurrence
/// only when it overlaps itself (`a a a` merging `a a`).
///
/// A slot is the word's symbols then `END` to its end (merging fills what it frees), so a scan
/// of the whole slot finds no pair past the word; a word without the pair (its entry is older
/// than the merge that took the pair out of it) costs one scan and no write.
#[inline]
fn merge_word(
    slot: &mut [u32],
    left: u32,
    right: u32,
    new: u32,
    count: u64,
    w: u32,
    changes: &mut Changes,
) {
    let Some(first) = slot.windows(2).position(|p| p[0] == left && p[1] == right) else {
        return;
    };
    let n = slot.len();
    let count = count as i64;
    let (mut read, mut write) = (first, first);
    while read < n {
        let symbol = slot[read];
        if symbol == END {
            break;
        }
        if symbol == left && read + 1 < n && slot[read + 1] == right {
            if write > 0 {
                let before = slot[write - 1];
                changes.remove(pair_key(before, left), count);
                changes.form(pair_key(before, new), count, w);
            }
            // The symbol after the pair is still unread (write <= read).
            if let Some(&after) = slot.get(read + 2).filter(|&&s| s != END) {
                changes.remove(pair_key(right, after), count);
                changes.form(pair_key(new, after), count, w);
            }
            slot[write] = new;
            read += 2;
        } else {
            slot[write] = symbol;
            read += 1;
        }
        write += 1;
    }
    slot[write..read].fill(END);
}

/// Ask for the cache line of `items[at]` (if there is one) without waiting for it.
#[inline(always)]
fn prefetch<T>(items: &[T], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if at < items.len() {
        // SAFETY: `at` is below the slice's length; a prefetch has no effect on state.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(items.as_ptr().add(at).cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (items, at);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merged(word: &[u32], left: u32, right: u32, new: u32) -> (Vec<u32>, Vec<(u32, u32, i64)>) {
        let mut arena = WordArena::with_capacity(1, word.len());
        arena.push(word.iter().copied(), 1);
        let mut changes = Changes::default();
        arena.merge(&[0], left, right, new, &mut changes);
        let mut delta: Vec<(u32, u32, i64)> = changes
            .delta
            .into_iter()
            .filter(|&(_, d)| d != 0)
            .map(|(k, d)| (pair_of(k).0, pair_of(k).1, d))
            .collect();
        delta.sort_unstable();
        (arena.word(0).to_vec(), delta)
    }

    #[test]
    fn merges_left_to_right_and_reports_like_tokenizers() {
        // a=1 b=2 c=3, new=9
        assert_eq!(
            merged(&[3, 1, 2, 3], 1, 2, 9),
            (
                vec![3, 9, 3],
                vec![(2, 3, -1), (3, 1, -1), (3, 9, 1), (9, 3, 1)]
            )
        );
        // Overlap: `a a a` merging `a a` leaves `aa a`, and the pair loses the occurrence the
        // merge consumed as its right neighbour.
        assert_eq!(
            merged(&[1, 1, 1], 1, 1, 9),
            (vec![9, 1], vec![(1, 1, -1), (9, 1, 1)])
        );
        assert_eq!(
            merged(&[1, 1, 1, 1], 1, 1, 9),
            (vec![9, 9], vec![(1, 1, -1), (9, 9, 1)])
        );
        // `a b a b`: the second merge sees the first one's result before it.
        assert_eq!(
            merged(&[1, 2, 1, 2], 1, 2, 9),
            (vec![9, 9], vec![(2, 1, -1), (9, 9, 1)])
        );
        assert_eq!(merged(&[1, 3], 1, 2, 9), (vec![1, 3], vec![]));
    }
}
