//! The counting pass in bounded memory: texts are counted into the threads' tables
//! (`words::WordCounter`) until the tables hold more than the budget; then the tables are
//! sorted, written as one run (`run_file.rs`) into a spill folder and emptied. At the end the
//! runs and the last tables are merged (`merge_sources`), giving exactly the table one pass in
//! memory would have made. Without a spill nothing touches the disk.
//!
//! The spill folder (`.data_io-train-spill-<pid>` in the folder given) is removed when the
//! counting is dropped; one left by a process that died is removed by the next run there.

use std::fs;
use std::path::{Path, PathBuf};

use super::run_file::{RunWriter, WordsHeader};
use super::Source;
use crate::encoder::fast_bpe::pretokenize::Pattern;
use crate::error::{IoContext, Result};
use crate::train::words::{WordCounter, WordCounts};

const SPILL_PREFIX: &str = ".data_io-train-spill-";
/// The scratch folder of a merge of many runs in tiers (`counts::merge_runs_to_table`).
pub const MERGE_PREFIX: &str = ".data_io-train-merge-";

/// What the counting did with its memory.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SpillStats {
    /// The most the tables held (bytes), measured after each batch of texts.
    pub peak_table_bytes: u64,
    /// Runs written, and their bytes on disk.
    pub runs: u64,
    pub run_bytes: u64,
    /// Where they went (None: no spill).
    pub spill_dir: Option<String>,
}

/// A counter that spills past `budget` bytes.
pub struct Counting {
    counter: WordCounter,
    header: WordsHeader,
    budget: u64,
    spill_parent: PathBuf,
    spill: Option<SpillDir>,
    runs: Vec<PathBuf>,
    stats: SpillStats,
}

impl Counting {
    /// Call it from the rayon pool the texts will be counted in (see `WordCounter::new`).
    pub fn new(pattern: Pattern, nfc: bool, budget: u64, spill_parent: &Path) -> Counting {
        Counting {
            counter: WordCounter::new(pattern, nfc),
            header: WordsHeader::ours(nfc),
            budget,
            spill_parent: spill_parent.to_path_buf(),
            spill: None,
            runs: Vec::new(),
            stats: SpillStats::default(),
        }
    }

    pub fn header(&self) -> &WordsHeader {
        &self.header
    }

    /// Count `texts` on the current pool; spill when the tables pass the budget.
    pub fn add_texts<S: AsRef<str> + Sync>(&mut self, texts: &[S]) -> Result<()> {
        self.counter.add_texts(texts);
        let held = self.counter.memory_bytes() as u64;
        self.stats.peak_table_bytes = self.stats.peak_table_bytes.max(held);
        if held > self.budget {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        if self.spill.is_none() {
            self.spill = Some(SpillDir::create(&self.spill_parent, SPILL_PREFIX)?);
        }
        let Some(dir) = &self.spill else {
            return Ok(());
        };
        let path = dir.path.join(format!("run-{:06}.words", self.runs.len()));
        let mut run = RunWriter::create(&path, &self.header)?;
        self.counter.drain_into(&mut run)?;
        self.stats.run_bytes += run.finish()?;
        self.stats.runs += 1;
        self.stats.spill_dir = Some(dir.path.display().to_string());
        self.runs.push(path);
        Ok(())
    }

    /// The counts as sorted sources: the tables in memory alone when nothing was spilled, else
    /// the runs, the last tables written as one more. Keep the `Counting` until the sources
    /// are read: dropping it removes the runs.
    pub fn finish(&mut self) -> Result<Vec<Source>> {
        if self.runs.is_empty() {
            let mut table = WordCounts::default();
            self.counter.drain_into(&mut table)?;
            return Ok(vec![Source::Memory(table)]);
        }
        if self.counter.memory_bytes() > 0 {
            self.spill()?;
        }
        self.runs
            .iter()
            .map(|path| super::RunReader::open(path).map(|r| Source::File(Box::new(r))))
            .collect()
    }

    /// `finish`, as the table in memory or the paths of the runs (the merge opens them).
    pub fn finish_parts(&mut self) -> Result<(Vec<WordCounts>, Vec<PathBuf>)> {
        if self.runs.is_empty() {
            let mut table = WordCounts::default();
            self.counter.drain_into(&mut table)?;
            return Ok((vec![table], Vec::new()));
        }
        if self.counter.memory_bytes() > 0 {
            self.spill()?;
        }
        Ok((Vec::new(), self.runs.clone()))
    }

    pub fn stats(&self) -> &SpillStats {
        &self.stats
    }
}

/// A scratch folder `<parent>/<prefix><pid>`, removed when dropped.
pub struct SpillDir {
    pub path: PathBuf,
}

impl SpillDir {
    /// The folder, after removing the ones of `prefix` whose process is gone (killed mid-way).
    pub fn create(parent: &Path, prefix: &str) -> Result<SpillDir> {
        remove_dead_spills(parent, prefix);
        let path = parent.join(format!("{prefix}{}", std::process::id()));
        fs::create_dir_all(&path).ctx("cannot create the spill folder", &path)?;
        Ok(SpillDir { path })
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Remove the scratch folders `prefix<pid>` under `parent` whose process is gone.
fn remove_dead_spills(parent: &Path, prefix: &str) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        if pid as u32 != std::process::id() && !process_alive(pid) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

fn process_alive(pid: i32) -> bool {
    // Signal 0 checks that the process exists; EPERM means it does, as another user's.
    // SAFETY: kill with signal 0 sends nothing.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The default counting budget: a quarter of the machine's memory (at least 256 MB); the
/// merge of the counts and the merge pass need room of their own beside it.
pub fn default_budget() -> u64 {
    let total = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
        })
        .map_or(8 << 30, |kb| kb * 1024);
    (total / 4).max(256 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::counts::merge_to_table;
    use crate::train::words::count_words;

    /// Texts with a long tail of distinct words, so the tables grow past small budgets.
    fn texts() -> Vec<String> {
        (0..4000u64)
            .map(|i| {
                format!(
                    "word{} and the same words, números {} 日本語{} again{}",
                    (i * 7919) % 3001,
                    i % 17,
                    i % 5,
                    i
                )
            })
            .collect()
    }

    #[test]
    fn spilled_counts_merge_to_the_table_of_one_pass_in_memory() {
        let texts = texts();
        let expected = count_words(&texts, Pattern::Qwen, true);
        let dir = tempfile::tempdir().expect("tempdir");
        for budget in [1u64, 64 << 10, 1 << 30] {
            let mut counting = Counting::new(Pattern::Qwen, true, budget, dir.path());
            for chunk in texts.chunks(333) {
                counting.add_texts(chunk).expect("count");
            }
            let sources = counting.finish().expect("finish");
            let header = counting.header().clone();
            let table = merge_to_table(sources, &header).expect("merge");
            assert_eq!(table, expected, "budget {budget}");
            let spilled = counting.stats().runs;
            assert_eq!(
                spilled > 0,
                budget < 1 << 30,
                "budget {budget}: {spilled} runs"
            );
            drop(counting);
            // The spill folder goes with the counting.
            assert_eq!(fs::read_dir(dir.path()).expect("ls").count(), 0);
        }
    }

    #[test]
    fn a_dead_process_spill_folder_is_removed_by_the_next_spill() {
        let dir = tempfile::tempdir().expect("tempdir");
        // No process has pid 2^22 + 1 (above Linux's pid_max default of 2^22).
        let dead = dir.path().join(format!("{SPILL_PREFIX}{}", (1 << 22) + 1));
        fs::create_dir_all(&dead).expect("mkdir");
        let mut counting = Counting::new(Pattern::Qwen, true, 1, dir.path());
        counting.add_texts(&texts()[..10]).expect("count");
        assert!(!dead.exists());
        assert!(counting.stats().spill_dir.is_some());
    }
}
