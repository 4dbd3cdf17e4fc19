//! The merge pass's queue, as `tokenizers`' `BpeTrainer` keeps it: entries of (count, pair,
//! words to merge it in), the biggest count first and, among equal counts, the smallest pair
//! `(left, right)` by id. An entry's count is what the pair's count was when it was pushed;
//! the pass re-pushes an entry whose count went stale. A pair could have several entries at
//! once (one per time occurrences of it were formed), each with its own words.
//!
//! Two entries of the same pair with the same count are the one tie that order leaves open;
//! `tokenizers`' heap would settle it by its layout (which depends on hash order, seeded at
//! random), this queue by the entry first made (a stale entry pushed again keeps its place).
//! With the project's settings it does not arise (see `merge`).
//!
//! The entries' words lie in one `u32` arena: an entry is 24 bytes and 4 per word, where a
//! `Vec` per entry would add a header and an allocation to each of the hundreds of thousands
//! of entries that the long tail of rare pairs leaves in the queue. Words of merged entries are
//! garbage until the arena is compacted, which it is instead of growing when a quarter of it is.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::word_arena::PairKey;
use crate::error::{Error, Result};

/// Words the arena holds at most, so that an entry can point into it with a `u32`.
const MAX_WORDS: usize = u32::MAX as usize;

fn too_many() -> Error {
    Error::Input(format!(
        "the merge pass's lists of words outgrew {MAX_WORDS} entries: train on fewer distinct \
         words"
    ))
}

/// 24 bytes: the long tail of rare pairs leaves hundreds of thousands in the queue.
#[derive(PartialEq, Eq)]
struct Entry {
    count: u64,
    pair: PairKey,
    /// Its words: `words[at..at + len]` of the queue. Entries made later lie further on
    /// (compaction keeps the order), so a smaller `at` is an older entry and wins a tie.
    at: u32,
    len: u32,
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.count
            .cmp(&other.count)
            .then_with(|| other.pair.cmp(&self.pair))
            .then_with(|| other.at.cmp(&self.at))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// An entry taken off the queue.
pub struct Top {
    pub count: u64,
    pub pair: PairKey,
    at: u32,
    len: u32,
}

#[derive(Default)]
pub struct MergeQueue {
    heap: BinaryHeap<Entry>,
    words: Vec<u32>,
    /// Words in `words` that no entry points at any more.
    garbage: usize,
}

impl MergeQueue {
    /// A queue whose arena is `words` already; `push_stored` makes entries of parts of it,
    /// and every word no entry takes counts as garbage.
    pub fn with_words(words: Vec<u32>, entries: usize) -> Result<MergeQueue> {
        if words.len() > MAX_WORDS {
            return Err(too_many());
        }
        Ok(MergeQueue {
            heap: BinaryHeap::with_capacity(entries),
            garbage: words.len(),
            words,
        })
    }

    /// A new entry for `pair` at `count`, to be merged in `words[range]` of the arena.
    pub fn push_stored(&mut self, count: u64, pair: PairKey, range: std::ops::Range<usize>) {
        self.garbage -= range.len();
        // `with_words` took no more than `MAX_WORDS`.
        self.push_entry(count, pair, range.start as u32, range.len() as u32);
    }

    /// A new entry for `pair` at `count`, to be merged in `words` (ascending, each once).
    pub fn push(
        &mut self,
        count: u64,
        pair: PairKey,
        words: impl ExactSizeIterator<Item = u32>,
    ) -> Result<()> {
        let len = words.len();
        if self.words.len() + len > self.words.capacity() {
            // Full: compact when a quarter is garbage, and grow by half rather than double
            // (the first merges push long lists, and a doubled arena stays mostly empty).
            if 4 * self.garbage >= self.words.len() {
                self.compact();
            }
            let live = self.words.len();
            if live + len > MAX_WORDS {
                return Err(too_many());
            }
            if live + len > self.words.capacity() {
                self.words.reserve_exact((live / 2).max(len));
            }
        }
        let at = self.words.len() as u32;
        self.words.extend(words);
        self.push_entry(count, pair, at, len as u32);
        Ok(())
    }

    fn push_entry(&mut self, count: u64, pair: PairKey, at: u32, len: u32) {
        // Grown by half, as the arena: the queue ends with entries of most pairs ever formed.
        if self.heap.len() == self.heap.capacity() {
            self.heap.reserve_exact(self.heap.len() / 2 + 1);
        }
        self.heap.push(Entry {
            count,
            pair,
            at,
            len,
        });
    }

    pub fn pop(&mut self) -> Option<Top> {
        self.heap.pop().map(|e| Top {
            count: e.count,
            pair: e.pair,
            at: e.at,
            len: e.len,
        })
    }

    /// Put a stale entry back at its pair's `count` now, with the same words.
    pub fn push_again(&mut self, top: Top, count: u64) {
        self.push_entry(count, top.pair, top.at, top.len);
    }

    /// The words of an entry taken to be merged, into `out`; they are garbage from now on.
    pub fn take_words(&mut self, top: &Top, out: &mut Vec<u32>) {
        let at = top.at as usize;
        out.clear();
        out.extend_from_slice(&self.words[at..at + top.len as usize]);
        self.garbage += top.len as usize;
    }

    /// Move every entry's words down over the garbage, in the order they lie in.
    fn compact(&mut self) {
        let mut entries = std::mem::take(&mut self.heap).into_vec();
        let mut order: Vec<u32> = (0..entries.len() as u32).collect();
        order.sort_unstable_by_key(|&i| entries[i as usize].at);
        let mut end = 0;
        for i in order {
            let entry = &mut entries[i as usize];
            let (at, len) = (entry.at as usize, entry.len as usize);
            self.words.copy_within(at..at + len, end);
            // Below `at`, which fits.
            entry.at = end as u32;
            end += len;
        }
        self.words.truncate(end);
        self.garbage = 0;
        // The order keys did not change: the vector is a heap still, and this only checks it.
        self.heap = BinaryHeap::from(entries);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_by_count_then_smallest_pair_then_first_pushed_and_keeps_words_through_compaction() {
        let mut queue = MergeQueue::default();
        assert_eq!(std::mem::size_of::<Entry>(), 24);
        queue.push(5, 7, [1u32, 2].into_iter()).expect("room");
        queue.push(5, 3, [3u32].into_iter()).expect("room");
        queue.push(9, 8, [4u32, 5, 6].into_iter()).expect("room");
        queue.push(5, 3, [7u32].into_iter()).expect("room");
        let mut words = Vec::new();
        let mut seen = Vec::new();
        // Many merged entries make garbage; the live ones keep their words, and the entries of
        // one pair at one count come out oldest first.
        let mut next = 0;
        for k in 0..1000u32 {
            queue
                .push(1, 100, [k, k + 1, k + 2].into_iter())
                .expect("room");
            let top = queue.pop().expect("entry");
            queue.take_words(&top, &mut words);
            if top.pair == 100 {
                assert_eq!(words, [next, next + 1, next + 2]);
                next += 1;
            } else {
                seen.push((top.count, top.pair, words.clone()));
            }
        }
        assert!(queue.words.len() < 2000, "compacted: {}", queue.words.len());
        assert_eq!(
            seen,
            [
                (9, 8, vec![4, 5, 6]),
                (5, 3, vec![3]),
                (5, 3, vec![7]),
                (5, 7, vec![1, 2])
            ]
        );
        while let Some(top) = queue.pop() {
            queue.take_words(&top, &mut words);
            assert_eq!(words, [next, next + 1, next + 2]);
            next += 1;
        }
        assert_eq!(next, 1000);
        assert!(queue.heap.is_empty());
    }
}
