//! Word counts beyond one table in memory: sorted runs on disk (`run_file.rs`), the counting
//! pass that spills to them past a memory budget (`spill.rs`), the per-input counts kept for
//! re-runs and scale-out units (`store.rs`), and the merge of any number of sorted sources into
//! one table (here). However the counts were cut up (threads, spills, files, machines), the
//! merged table is the one a single in-memory pass makes: runs are sorted by the words' UTF-8
//! bytes, the order of `WordCounts`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::words::WordCounts;
pub use super::words::WordSink;
use crate::error::{Error, Result};

pub mod run_file;
pub mod spill;
pub mod store;

pub use run_file::{RunReader, RunWriter, WordsHeader};

impl WordSink for RunWriter {
    fn push(&mut self, word: &str, count: u64) -> Result<()> {
        RunWriter::push(self, word, count)
    }
}

/// A sink that counts the words and pieces it passes on to a run.
pub struct Tally<'a> {
    pub writer: &'a mut RunWriter,
    pub words: u64,
    pub pieces: u64,
}

impl<'a> Tally<'a> {
    pub fn new(writer: &'a mut RunWriter) -> Self {
        Tally {
            writer,
            words: 0,
            pieces: 0,
        }
    }
}

impl WordSink for Tally<'_> {
    fn push(&mut self, word: &str, count: u64) -> Result<()> {
        self.words += 1;
        self.pieces += count;
        self.writer.push(word, count)
    }
}

/// Sorted words with counts: a table in memory or a run on disk.
pub enum Source {
    Memory(WordCounts),
    File(Box<RunReader>),
}

/// A source being read: where it is, and its current word (moved in and out of the heap).
struct Cursor {
    source: Source,
    next: usize,
}

impl Cursor {
    /// The next word of the source into `word`, with its count; None at its end.
    fn advance(&mut self, word: &mut String) -> Result<Option<u64>> {
        let entry = match &mut self.source {
            Source::Memory(table) => {
                if self.next == table.len() {
                    return Ok(None);
                }
                self.next += 1;
                let (w, c) = table.get(self.next - 1);
                word.clear();
                word.push_str(w);
                c
            }
            Source::File(reader) => match reader.next_word()? {
                Some((w, c)) => {
                    word.clear();
                    word.push_str(w);
                    c
                }
                None => return Ok(None),
            },
        };
        Ok(Some(entry))
    }
}

/// The sources added together into `sink`: each word once, with the sum of its counts, in
/// order. Every run's header must match `header` (words made the same way).
pub fn merge_sources(
    sources: Vec<Source>,
    header: &WordsHeader,
    sink: &mut impl WordSink,
) -> Result<()> {
    for source in &sources {
        if let Source::File(reader) = source {
            header.check(reader.header(), reader.path())?;
        }
    }
    let mut cursors: Vec<Cursor> = sources
        .into_iter()
        .map(|source| Cursor { source, next: 0 })
        .collect();
    // (word, source, count): the smallest word first, then the lower source.
    let mut heap: BinaryHeap<Reverse<(String, usize, u64)>> = BinaryHeap::new();
    for (k, cursor) in cursors.iter_mut().enumerate() {
        let mut word = String::new();
        if let Some(count) = cursor.advance(&mut word)? {
            heap.push(Reverse((word, k, count)));
        }
    }
    // The word being added up and its count so far; strings swap between it and the heap, so
    // nothing is allocated per word.
    let mut last = String::new();
    let mut total: Option<u64> = None;
    while let Some(Reverse((mut word, k, count))) = heap.pop() {
        match total {
            Some(sum) if last == word => {
                total =
                    Some(sum.checked_add(count).ok_or_else(|| {
                        Error::Input(format!("the count of {word:?} passes 2^64"))
                    })?);
            }
            _ => {
                if let Some(sum) = total {
                    sink.push(&last, sum)?;
                }
                std::mem::swap(&mut last, &mut word);
                total = Some(count);
            }
        }
        if let Some(next) = cursors[k].advance(&mut word)? {
            heap.push(Reverse((word, k, next)));
        }
    }
    if let Some(sum) = total {
        sink.push(&last, sum)?;
    }
    Ok(())
}

/// The sources added together into one table (a lone table in memory is returned as it is).
pub fn merge_to_table(mut sources: Vec<Source>, header: &WordsHeader) -> Result<WordCounts> {
    if sources.len() == 1 && matches!(sources[0], Source::Memory(_)) {
        if let Some(Source::Memory(table)) = sources.pop() {
            return Ok(table);
        }
    }
    let mut table = WordCounts::default();
    merge_sources(sources, header, &mut table)?;
    Ok(table)
}
