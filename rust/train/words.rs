//! The counting pass: every text NFC-normalised (when the tokenizer has NFC) and cut by the fast
//! encoder's pre-tokenizer (`encoder::fast_bpe::pretokenize`, the same pieces as the
//! tokenizer's split regex), each piece counted; the result is the table of distinct words the
//! merge pass reads, as `tokenizers`' `BpeTrainer::feed` would have built it: each word the
//! ByteLevel string of a piece (what the ByteLevel pre-tokenizer yields), with a `u64` count.
//!
//! Threads count into tables of their own (one per worker of the rayon pool); at the end each
//! is sorted and the sorted tables are merged into one, so it is the same whatever the number
//! of threads and the order the texts came in.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::Mutex;

use rayon::prelude::*;
use unicode_normalization_alignments::{is_nfc_quick, IsNormalized, UnicodeNormalization};

use super::piece_table::PieceTable;
use crate::encoder::fast_bpe::byte_to_char;
use crate::encoder::fast_bpe::pretokenize::{self, Pattern};
use crate::error::Result;

/// Texts counted by one thread between two looks at its table's lock.
const TEXTS_PER_TASK: usize = 64;

/// Where sorted words go, one at a time, each once, in increasing order (a table, or a run on
/// disk: `counts::run_file`).
pub trait WordSink {
    fn push(&mut self, word: &str, count: u64) -> Result<()>;
}

/// Distinct words with their counts, sorted by word.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WordCounts {
    /// The words one after another.
    text: String,
    /// Where each word ends in `text` (it starts where the one before it ends).
    ends: Vec<u64>,
    counts: Vec<u64>,
}

impl WordCounts {
    /// The table of `words` (added together when one comes twice), sorted.
    pub fn from_counts<S: AsRef<str>>(words: impl IntoIterator<Item = (S, u64)>) -> WordCounts {
        let mut table = PieceTable::default();
        for (word, count) in words {
            table.add(word.as_ref().as_bytes(), count);
        }
        // Each piece came in as a `str`, so it is one again.
        let identity: [u16; 256] = std::array::from_fn(|b| b as u16);
        let mut counts = WordCounts::default();
        let pushed = Self::merge_tables(
            &[table],
            &identity,
            |bytes, out| out.push_str(std::str::from_utf8(bytes).unwrap_or_default()),
            &mut counts,
        );
        debug_assert!(pushed.is_ok(), "pushing to a table cannot fail");
        counts
    }

    pub fn len(&self) -> usize {
        self.counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// The `index`-th word and its count.
    pub fn get(&self, index: usize) -> (&str, u64) {
        let start = index
            .checked_sub(1)
            .map_or(0, |before| self.ends[before] as usize);
        (
            &self.text[start..self.ends[index] as usize],
            self.counts[index],
        )
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, u64)> + Clone + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// The sum of the counts: the number of pre-tokens counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Append `word`, which sorts after every word in the table, with `count`.
    pub fn push(&mut self, word: &str, count: u64) {
        self.text.push_str(word);
        self.ends.push(self.text.len() as u64);
        self.counts.push(count);
    }

    /// The entries of `tables` added together, sorted by the strings `write` makes of them,
    /// into `sink`. `rank` orders bytes as `write`'s characters order (UTF-8 keeps the order of
    /// code points), so each table is sorted on its own bytes, on its own thread, and the
    /// sorted tables are merged, each word written once, in its place: no table grows on the way.
    fn merge_tables(
        tables: &[PieceTable],
        rank: &[u16; 256],
        write: impl Fn(&[u8], &mut String),
        sink: &mut impl WordSink,
    ) -> Result<()> {
        let orders: Vec<Vec<u32>> = tables
            .par_iter()
            .map(|table| {
                let mut order: Vec<u32> = (0..table.len() as u32).collect();
                order.par_sort_unstable_by(|&a, &b| {
                    by_rank(table.get(a as usize).0, table.get(b as usize).0, rank)
                });
                order
            })
            .collect();
        let piece_at = |t: usize, k: usize| orders[t].get(k).map(|&i| tables[t].get(i as usize));
        // The next piece of each table, smallest first (a table at a time on equal pieces).
        let mut heads: BinaryHeap<Reverse<Head>> = (0..tables.len())
            .filter_map(|t| piece_at(t, 0).map(|(piece, _)| Reverse(Head::new(piece, t, rank))))
            .collect();
        let mut next = vec![1usize; tables.len()];
        // The word being added up: its piece and count so far.
        let mut pending: Option<(&[u8], u64)> = None;
        let mut word = String::new();
        let mut emit = |piece: &[u8], count: u64, sink: &mut dyn WordSink| {
            word.clear();
            write(piece, &mut word);
            sink.push(&word, count)
        };
        while let Some(Reverse(head)) = heads.pop() {
            let t = head.table;
            let count = orders[t]
                .get(next[t] - 1)
                .map_or(0, |&i| tables[t].get(i as usize).1);
            if let Some((piece, _)) = piece_at(t, next[t]) {
                heads.push(Reverse(Head::new(piece, t, rank)));
            }
            next[t] += 1;
            match &mut pending {
                Some((piece, total)) if *piece == head.piece => *total += count,
                _ => {
                    if let Some((piece, total)) = pending.replace((head.piece, count)) {
                        emit(piece, total, sink)?;
                    }
                }
            }
        }
        if let Some((piece, total)) = pending {
            emit(piece, total, sink)?;
        }
        Ok(())
    }
}

impl WordSink for WordCounts {
    fn push(&mut self, word: &str, count: u64) -> Result<()> {
        WordCounts::push(self, word, count);
        Ok(())
    }
}

/// `a` against `b`, byte by byte in the order of `rank` (one rank per byte): the first byte
/// that differs decides, else the shorter is first.
fn by_rank(a: &[u8], b: &[u8], rank: &[u16; 256]) -> Ordering {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => rank[a[i] as usize].cmp(&rank[b[i] as usize]),
        None => a.len().cmp(&b.len()),
    }
}

/// A table's next piece in the merge of sorted tables, ordered by `rank`, then by table.
struct Head<'a> {
    piece: &'a [u8],
    table: usize,
    rank: &'a [u16; 256],
}

impl<'a> Head<'a> {
    fn new(piece: &'a [u8], table: usize, rank: &'a [u16; 256]) -> Head<'a> {
        Head { piece, table, rank }
    }
}

impl Ord for Head<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        by_rank(self.piece, other.piece, self.rank).then(self.table.cmp(&other.table))
    }
}

impl PartialOrd for Head<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head<'_> {}

/// Counts the pre-tokens of texts, from any number of threads at once.
pub struct WordCounter {
    pattern: Pattern,
    nfc: bool,
    /// One table per worker of the pool `new` ran in, and one for callers outside it.
    tables: Vec<Mutex<PieceTable>>,
}

impl WordCounter {
    /// A counter that splits by `pattern`, after NFC when `nfc`. Call it from the rayon pool
    /// the texts will be counted in: it keeps one table per worker of that pool.
    pub fn new(pattern: Pattern, nfc: bool) -> WordCounter {
        let tables = (0..rayon::current_num_threads() + 1)
            .map(|_| Mutex::new(PieceTable::default()))
            .collect();
        WordCounter {
            pattern,
            nfc,
            tables,
        }
    }

    /// Count the pre-tokens of `texts`, on the current rayon pool.
    pub fn add_texts<S: AsRef<str> + Sync>(&self, texts: &[S]) {
        texts.par_chunks(TEXTS_PER_TASK).for_each(|chunk| {
            // A worker locks its own table: no other thread waits on it, unless the counter
            // is used from a bigger pool than the one it was made in.
            let own = rayon::current_thread_index().map_or(0, |i| i + 1) % self.tables.len();
            let mut table = self.tables[own].lock().unwrap_or_else(|p| p.into_inner());
            for text in chunk {
                self.count_text(text.as_ref(), &mut table);
            }
        });
    }

    fn count_text(&self, text: &str, table: &mut PieceTable) {
        if self.nfc && !is_nfc(text) {
            let normalized: String = text.nfc().map(|(c, _)| c).collect();
            pretokenize::split(self.pattern, &normalized, |piece| {
                table.add(piece.as_bytes(), 1)
            });
        } else {
            pretokenize::split(self.pattern, text, |piece| table.add(piece.as_bytes(), 1));
        }
    }

    /// Bytes the tables hold now.
    pub fn memory_bytes(&self) -> usize {
        self.tables
            .iter()
            .map(|t| t.lock().map_or(0, |t| t.memory_bytes()))
            .sum()
    }

    /// The threads' tables added together, as ByteLevel words, sorted.
    pub fn finish(self) -> WordCounts {
        let mut counts = WordCounts::default();
        let drained = self.drain_into(&mut counts);
        debug_assert!(drained.is_ok(), "pushing to a table cannot fail");
        counts
    }

    /// The threads' tables added together, as ByteLevel words, sorted, into `sink`; the tables
    /// are left empty (their memory given back) for the texts still to come.
    pub fn drain_into(&self, sink: &mut impl WordSink) -> Result<()> {
        let tables: Vec<PieceTable> = self
            .tables
            .iter()
            .map(|t| std::mem::take(&mut *t.lock().unwrap_or_else(|p| p.into_inner())))
            .filter(|t| t.len() > 0)
            .collect();
        let chars = byte_to_char();
        let rank = chars.map(|c| c as u16);
        WordCounts::merge_tables(
            &tables,
            &rank,
            |bytes, out| out.extend(bytes.iter().map(|&b| chars[b as usize])),
            sink,
        )
    }
}

/// The pre-tokens of `texts`, counted on the current rayon pool.
pub fn count_words<S: AsRef<str> + Sync>(texts: &[S], pattern: Pattern, nfc: bool) -> WordCounts {
    let counter = WordCounter::new(pattern, nfc);
    counter.add_texts(texts);
    counter.finish()
}

/// Whether NFC leaves `text` as it is, by the quick check of `tokenizers`' own normalisation
/// crate; "maybe" is normalised (which gives the text back when it was in NFC already).
fn is_nfc(text: &str) -> bool {
    text.is_ascii() || is_nfc_quick(text.chars()) == IsNormalized::Yes
}
