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

/// Runs merged at once at most: each holds a file open and a read buffer; more are merged in
/// tiers (`merge_runs_to_table`), so a corpus of thousands of files stays under the limit of
/// open files (often 1,024) and a few hundred MB of buffers.
const MAX_OPEN_RUNS: usize = 128;

/// Sorted words with counts: a table in memory or a run on disk.
pub enum Source {
    Memory(WordCounts),
    File(Box<RunReader>),
}

/// The tables in `memory` and the runs at `runs` added together into one table. More runs than
/// can be open at once are first merged in groups into runs of a scratch folder under
/// `scratch_parent` (removed at the end), as many tiers as it takes.
pub fn merge_runs_to_table(
    memory: Vec<WordCounts>,
    mut runs: Vec<std::path::PathBuf>,
    header: &WordsHeader,
    scratch_parent: &std::path::Path,
) -> Result<WordCounts> {
    let mut scratch: Option<spill::SpillDir> = None;
    let mut made = 0usize;
    while memory.len() + runs.len() > MAX_OPEN_RUNS {
        if scratch.is_none() {
            scratch = Some(spill::SpillDir::create(
                scratch_parent,
                spill::MERGE_PREFIX,
            )?);
        }
        let Some(folder) = scratch.as_ref().map(|s| s.path.clone()) else {
            break;
        };
        let mut next = Vec::with_capacity(runs.len().div_ceil(MAX_OPEN_RUNS));
        for group in runs.chunks(MAX_OPEN_RUNS) {
            let path = folder.join(format!("tier-{made:06}.words"));
            made += 1;
            let mut writer = RunWriter::create(&path, header)?;
            merge_sources(open_runs(group)?, header, &mut writer)?;
            writer.finish()?;
            next.push(path);
        }
        // A tier's inputs in the scratch folder are done with (the caller's are not ours).
        for old in runs.iter().filter(|p| p.starts_with(&folder)) {
            let _ = std::fs::remove_file(old);
        }
        runs = next;
    }
    let mut sources: Vec<Source> = memory.into_iter().map(Source::Memory).collect();
    sources.extend(open_runs(&runs)?);
    merge_to_table(sources, header)
}

fn open_runs(paths: &[std::path::PathBuf]) -> Result<Vec<Source>> {
    paths
        .iter()
        .map(|path| RunReader::open(path).map(|r| Source::File(Box::new(r))))
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn more_runs_than_can_be_open_merge_in_tiers_to_the_same_table() {
        let dir = tempfile::tempdir().expect("tempdir");
        let header = WordsHeader::ours(true);
        let mut expected: BTreeMap<String, u64> = BTreeMap::new();
        let mut runs = Vec::new();
        // 2.5 tiers' worth of runs, overlapping words, plus a table in memory.
        for r in 0..(2 * MAX_OPEN_RUNS + MAX_OPEN_RUNS / 2) {
            let path = dir.path().join(format!("r{r}.words"));
            let mut writer = RunWriter::create(&path, &header).expect("create");
            let words: BTreeMap<String, u64> = (0..20)
                .map(|k| {
                    (
                        format!("w{}", (r * 7 + k * 13) % 500),
                        (r + k) as u64 % 5 + 1,
                    )
                })
                .collect();
            for (word, count) in &words {
                writer.push(word, *count).expect("push");
                *expected.entry(word.clone()).or_default() += count;
            }
            writer.finish().expect("finish");
            runs.push(path);
        }
        let memory = WordCounts::from_counts([("w1", 3u64), ("zz", 9)]);
        for (word, count) in memory.iter() {
            *expected.entry(word.to_string()).or_default() += count;
        }
        let scratch = dir.path().join("scratch");
        std::fs::create_dir_all(&scratch).expect("mkdir");
        let table =
            merge_runs_to_table(vec![memory], runs.clone(), &header, &scratch).expect("merge");
        assert_eq!(table, WordCounts::from_counts(expected));
        // The tiers' folder is gone; the runs given are left as they were.
        assert_eq!(std::fs::read_dir(&scratch).expect("ls").count(), 0);
        assert!(runs.iter().all(|p| p.exists()));
    }
}
