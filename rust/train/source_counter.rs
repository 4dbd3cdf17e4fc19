//! Counting texts that Python hands over (`train-tokenizer --text-field`: raw text read the way
//! `prepare` reads it: .txt, JSONL, Parquet, compressed, `datasets` sources), one source at a
//! time: each batch is counted on the counter's threads (in the memory budget, spilling past
//! it), and at the end of a source its counts are written as one run with its record, in the
//! layout of `counts::store`, for the merge pass to read (`TrainOptions::count_parts`).

use std::path::Path;

use super::counts::spill::{default_budget, Counting};
use super::counts::store::{self, CountKey, StoredCounts};
use super::counts::{merge_sources, RunWriter, Tally};
use super::texts::truncate_chars;
use super::TrainFileReport;
use crate::encoder::fast_bpe::pretokenize::Pattern;
use crate::error::{Error, Result};

pub struct SourceCounter {
    pool: rayon::ThreadPool,
    counting: Counting,
    budget: u64,
    truncate_len: usize,
    folder: std::path::PathBuf,
    texts: u64,
    text_bytes: u64,
}

impl SourceCounter {
    /// A counter that writes into `folder` (spills included), on `threads` threads.
    pub fn new(
        folder: &Path,
        count_memory: Option<u64>,
        truncate_len: usize,
        threads: Option<usize>,
    ) -> Result<SourceCounter> {
        if truncate_len == 0 {
            return Err(Error::Config("--truncate-len must be at least 1".into()));
        }
        std::fs::create_dir_all(folder).map_err(|e| Error::io("cannot create", folder, e))?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.unwrap_or(0))
            .build()
            .map_err(|e| Error::Config(format!("cannot start {threads:?} threads: {e}")))?;
        let budget = count_memory.unwrap_or_else(default_budget);
        let counting = pool.install(|| Counting::new(Pattern::Qwen, true, budget, folder));
        Ok(SourceCounter {
            pool,
            counting,
            budget,
            truncate_len,
            folder: folder.to_path_buf(),
            texts: 0,
            text_bytes: 0,
        })
    }

    /// Count `texts` (each cut to `truncate_len` characters).
    pub fn add_texts<S: AsRef<str> + Sync>(&mut self, texts: &[S]) -> Result<()> {
        let cut: Vec<&str> = texts
            .iter()
            .map(|t| truncate_chars(t.as_ref(), self.truncate_len))
            .collect();
        self.texts += cut.len() as u64;
        self.text_bytes += cut.iter().map(|t| t.len() as u64).sum::<u64>();
        let counting = &mut self.counting;
        self.pool.install(|| counting.add_texts(&cut))
    }

    /// The counts since the last call, as the run `<folder>/<name>.words` of source `task`
    /// (and its record); the counter starts again empty.
    pub fn finish_source(&mut self, name: &str, task: &str) -> Result<StoredCounts> {
        let fresh = self
            .pool
            .install(|| Counting::new(Pattern::Qwen, true, self.budget, &self.folder));
        let mut counting = std::mem::replace(&mut self.counting, fresh);
        let header = counting.header().clone();
        let (run, _) = store::paths(&self.folder, name);
        let mut writer = RunWriter::create(&run, &header)?;
        let mut sink = Tally::new(&mut writer);
        let sources = self.pool.install(|| counting.finish())?;
        merge_sources(sources, &header, &mut sink)?;
        let (words, pieces) = (sink.words, sink.pieces);
        writer.finish()?;
        let stored = StoredCounts {
            key: CountKey {
                task: task.to_string(),
                source_bytes: 0,
                source_blake3: String::new(),
                words: header,
                seed: 0,
                limit: None,
                truncate_len: self.truncate_len,
                on_error: "fail".into(),
            },
            report: TrainFileReport {
                task: task.to_string(),
                rows: self.texts,
                texts_available: self.texts,
                texts_used: self.texts,
                text_bytes: self.text_bytes,
                bad_rows: 0,
                limited: false,
            },
            words,
            pieces,
            text_bytes: self.text_bytes,
        };
        store::record(&self.folder, name, &stored)?;
        self.texts = 0;
        self.text_bytes = 0;
        Ok(stored)
    }
}
