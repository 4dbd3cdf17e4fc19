//! The counting pass: every text NFC-normalised (when the tokenizer has NFC) and cut by the fast
//! encoder's pre-tokenizer (`encoder::fast_bpe::pretokenize`, the same pieces as the
//! tokenizer's split regex), each piece counted; the result is the table of distinct words the
//! merge pass reads, as `tokenizers`' `BpeTrainer::feed` would have built it: each word the
//! ByteLevel string of a piece (what the ByteLevel pre-tokenizer yields), with a `u64` count.
//!
//! Threads count into tables of their own (one per worker of the rayon pool), added together
//! at the end; the table is then sorted, so it is the same whatever the number of threads and
//! the order the texts came in.

use std::sync::Mutex;

use rayon::prelude::*;
use unicode_normalization_alignments::{is_nfc_quick, IsNormalized, UnicodeNormalization};

use super::piece_table::PieceTable;
use crate::encoder::fast_bpe::pretokenize::{self, Pattern};

/// Texts counted by one thread between two looks at its table's lock.
const TEXTS_PER_TASK: usize = 64;

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
        Self::sorted(&table, &identity, |bytes, out| {
            out.push_str(std::str::from_utf8(bytes).unwrap_or_default())
        })
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

    /// The table's entries, sorted by the strings `write` makes of them. `rank` orders bytes
    /// as `write`'s characters order (UTF-8 keeps the order of code points), so the indices are
    /// sorted on the table's own bytes and each word is written once, in its place.
    fn sorted(
        table: &PieceTable,
        rank: &[u16; 256],
        write: impl Fn(&[u8], &mut String),
    ) -> WordCounts {
        let mut order: Vec<u32> = (0..table.len() as u32).collect();
        order.par_sort_unstable_by(|&a, &b| {
            let ranks = |i: u32| {
                table
                    .get(i as usize)
                    .0
                    .iter()
                    .map(|&byte| rank[byte as usize])
            };
            ranks(a).cmp(ranks(b))
        });
        let mut sorted = WordCounts {
            text: String::new(),
            ends: Vec::with_capacity(order.len()),
            counts: Vec::with_capacity(order.len()),
        };
        for index in order {
            let (piece, count) = table.get(index as usize);
            write(piece, &mut sorted.text);
            sorted.ends.push(sorted.text.len() as u64);
            sorted.counts.push(count);
        }
        sorted
    }
}

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
        let mut tables: Vec<PieceTable> = self
            .tables
            .into_iter()
            .map(|t| t.into_inner().unwrap_or_else(|p| p.into_inner()))
            .collect();
        // Into the biggest table, so the fewest entries are added again.
        tables.sort_by_key(|t| std::cmp::Reverse(t.len()));
        let mut tables = tables.into_iter();
        let mut all = tables.next().unwrap_or_default();
        for table in tables {
            all.absorb(&table);
        }
        let chars = byte_chars();
        let rank = chars.map(|c| c as u16);
        WordCounts::sorted(&all, &rank, |bytes, out| {
            out.extend(bytes.iter().map(|&b| chars[b as usize]))
        })
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

/// The ByteLevel character of each byte (GPT-2's table): the printable bytes stand for
/// themselves, the other 68 for U+0100 on, in byte order.
pub fn byte_chars() -> [char; 256] {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xa1..=0xac | 0xae..=0xff);
    let mut chars = ['\0'; 256];
    let mut next = 0x100u32;
    for b in 0..=255u8 {
        chars[b as usize] = if printable(b) {
            char::from(b)
        } else {
            next += 1;
            // 0x100..0x144: every one a char.
            char::from_u32(next - 1).unwrap_or('\0')
        };
    }
    chars
}
