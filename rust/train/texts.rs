//! The texts training reads: per file, the instruction and response of every row, each cut to
//! `truncate_len` characters, or, where prefix_config.yaml limits the file, `limit_mul_factor ×
//! max_per_file` of them chosen by a shuffle seeded from (seed, file name), so the choice of one
//! file does not depend on the others.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{TrainFileReport, TrainOptions};
use crate::error::{Error, Result};
use crate::progress::ByteProgress;
use crate::reader::{Batch, OnError, RowReader, DEFAULT_BATCH_ROWS};

/// One input file of the run.
pub struct FilePlan {
    pub task: String,
    pub path: PathBuf,
    /// Texts used at most (None: every text).
    pub limit: Option<u64>,
}

impl FilePlan {
    pub fn new(options: &TrainOptions, task: String, path: PathBuf) -> FilePlan {
        let limit = limit_for(options, &task);
        FilePlan { task, path, limit }
    }
}

pub fn limit_for(options: &TrainOptions, task: &str) -> Option<u64> {
    options
        .prefix_limits
        .iter()
        .find(|(prefix, _)| task.starts_with(prefix.as_str()))
        .and_then(|(_, max_per_file)| *max_per_file)
        .map(|m| m.saturating_mul(options.limit_mul_factor))
}

/// The sorted indices of the `limit` texts used out of `available`, from a generator seeded
/// by (seed, task name).
pub fn choose_texts(seed: u64, task: &str, available: u64, limit: u64) -> Vec<u64> {
    let mut key = seed.to_le_bytes().to_vec();
    key.extend_from_slice(task.as_bytes());
    let digest = blake3::hash(&key);
    let mut seed_bytes = [0u8; 32];
    seed_bytes.copy_from_slice(digest.as_bytes());
    let mut rng = ChaCha8Rng::from_seed(seed_bytes);
    let mut chosen: Vec<u64> =
        rand::seq::index::sample(&mut rng, available as usize, limit as usize)
            .into_iter()
            .map(|i| i as u64)
            .collect();
    chosen.sort_unstable();
    chosen
}

fn count_rows(path: &Path) -> Result<u64> {
    match RowReader::open(path, DEFAULT_BATCH_ROWS, ByteProgress::none())? {
        RowReader::Parquet(reader) => Ok(reader.total_rows()),
        reader @ RowReader::Jsonl(_) => {
            let mut rows = 0u64;
            for batch in reader {
                rows += batch?.len() as u64;
            }
            Ok(rows)
        }
    }
}

/// The texts of one file, a batch at a time. Errors are parked in `failure` (an iterator
/// cannot return them) and end the stream; the file's report goes to `reports` at its end.
pub struct FileTexts<'a> {
    plan: &'a FilePlan,
    options: &'a TrainOptions,
    reader: Option<RowReader>,
    failure: &'a Mutex<Option<Error>>,
    reports: &'a Mutex<Vec<TrainFileReport>>,
    /// Rows in the file, known up front when a limit needs them.
    rows: Option<u64>,
    /// Sorted indices of the texts to use (2·row for the instruction, 2·row+1 for the
    /// response); `None` uses every text.
    chosen: Option<Vec<u64>>,
    next_row: u64,
    next_chosen: usize,
    texts_used: u64,
    text_bytes: u64,
    bad_rows: u64,
}

impl<'a> FileTexts<'a> {
    pub fn new(
        plan: &'a FilePlan,
        options: &'a TrainOptions,
        failure: &'a Mutex<Option<Error>>,
        reports: &'a Mutex<Vec<TrainFileReport>>,
        progress: ByteProgress,
    ) -> Self {
        let mut this = FileTexts {
            plan,
            options,
            reader: None,
            failure,
            reports,
            rows: None,
            chosen: None,
            next_row: 0,
            next_chosen: 0,
            texts_used: 0,
            text_bytes: 0,
            bad_rows: 0,
        };
        if let Err(e) = this.open(progress) {
            this.fail(e);
        }
        this
    }

    fn open(&mut self, progress: ByteProgress) -> Result<()> {
        if let Some(limit) = self.plan.limit {
            // Choosing needs the number of texts first (a quick pass: Parquet knows it).
            let rows = count_rows(&self.plan.path)?;
            self.rows = Some(rows);
            if limit < 2 * rows {
                self.chosen = Some(choose_texts(
                    self.options.seed,
                    &self.plan.task,
                    2 * rows,
                    limit,
                ));
            }
        }
        self.reader = Some(RowReader::open(
            &self.plan.path,
            DEFAULT_BATCH_ROWS,
            progress,
        )?);
        Ok(())
    }

    fn fail(&mut self, error: Error) {
        if let Ok(mut slot) = self.failure.lock() {
            slot.get_or_insert(error);
        }
        self.reader = None;
    }

    fn wanted(&mut self, text_index: u64) -> bool {
        let Some(chosen) = &self.chosen else {
            return true;
        };
        if chosen.get(self.next_chosen) == Some(&text_index) {
            self.next_chosen += 1;
            true
        } else {
            false
        }
    }

    fn texts_of(&mut self, batch: &Batch) -> Result<Vec<String>> {
        let mut texts = Vec::new();
        for i in 0..batch.len() {
            let row_index = self.next_row;
            self.next_row += 1;
            let row = match batch.row(i) {
                Ok(row) => row,
                Err(_) if self.options.on_error == OnError::Skip => {
                    self.bad_rows += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            for (k, text) in [&row.instruction, &row.response].into_iter().enumerate() {
                if self.wanted(2 * row_index + k as u64) {
                    let text = truncate_chars(text, self.options.truncate_len);
                    self.text_bytes += text.len() as u64;
                    texts.push(text.to_string());
                }
            }
        }
        self.texts_used += texts.len() as u64;
        Ok(texts)
    }
}

impl Iterator for FileTexts<'_> {
    type Item = Vec<String>;

    fn next(&mut self) -> Option<Vec<String>> {
        if self.failure.lock().map_or(true, |slot| slot.is_some()) {
            return None;
        }
        let next = self.reader.as_mut()?.next();
        match next {
            Some(Ok(batch)) => match self.texts_of(&batch) {
                Ok(texts) => Some(texts),
                Err(e) => {
                    self.fail(e);
                    None
                }
            },
            Some(Err(e)) => {
                self.fail(e);
                None
            }
            None => {
                self.reader = None;
                let rows = self.rows.unwrap_or(self.next_row);
                if let Ok(mut reports) = self.reports.lock() {
                    reports.push(TrainFileReport {
                        task: self.plan.task.clone(),
                        rows,
                        texts_available: 2 * rows,
                        texts_used: self.texts_used,
                        text_bytes: self.text_bytes,
                        bad_rows: self.bad_rows,
                        limited: self.chosen.is_some(),
                    });
                }
                None
            }
        }
    }
}

/// The first `max_chars` characters of `text`.
pub fn truncate_chars(text: &str, max_chars: usize) -> &str {
    match text.char_indices().nth(max_chars) {
        Some((byte, _)) => &text[..byte],
        None => text,
    }
}

/// The texts of `plans`, in order, in batches of about `batch_texts`, to `each`; the files'
/// reports in the order of `plans`. `bar` advances by the bytes read. The files are read on a
/// thread of their own, a batch ahead, so reading overlaps with what `each` does (counting, on
/// the pool's threads); memory holds at most three batches.
pub fn for_each_batch(
    plans: &[&FilePlan],
    options: &TrainOptions,
    bar: &indicatif::ProgressBar,
    batch_texts: usize,
    mut each: impl FnMut(&[String]) -> Result<()>,
) -> Result<Vec<TrainFileReport>> {
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let reports: Mutex<Vec<TrainFileReport>> = Mutex::new(Vec::new());
    let counted = std::thread::scope(|scope| {
        let (batches, received) = std::sync::mpsc::sync_channel::<Vec<String>>(1);
        let (failure, reports) = (&failure, &reports);
        scope.spawn(move || {
            let mut batch: Vec<String> = Vec::with_capacity(batch_texts);
            for plan in plans {
                for texts in FileTexts::new(plan, options, failure, reports, ByteProgress::new(bar))
                {
                    batch.extend(texts);
                    if batch.len() >= batch_texts {
                        let full = std::mem::replace(&mut batch, Vec::with_capacity(batch_texts));
                        if batches.send(full).is_err() {
                            return; // the counting stopped on an error of its own
                        }
                    }
                }
            }
            let _ = batches.send(batch);
        });
        // The reader ends when the receiver goes (here, on an error) or its files do.
        while let Ok(batch) = received.recv() {
            crate::interrupt::check()?; // dropping the receiver stops the reader too
            each(&batch)?;
        }
        Ok::<(), Error>(())
    });
    if let Some(error) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(error);
    }
    counted?;
    Ok(reports.into_inner().unwrap_or_else(|p| p.into_inner()))
}
