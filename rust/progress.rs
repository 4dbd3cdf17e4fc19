//! Progress bars on stderr (hidden when stderr is not a terminal, or when asked to be quiet).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A byte-based bar: sources are measured in bytes, so MB/s and ETA are meaningful across
/// JSONL and Parquet files of any size. Decimal units (MB = 10^6 bytes), as in the summaries.
pub fn bytes_bar(total_bytes: u64, show: bool, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(
        Some(total_bytes),
        if show {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    let template = format!(
        "{what} {{spinner}} [{{elapsed_precise}}] {{wide_bar}} {{decimal_bytes}}/{{decimal_total_bytes}} \
         {{decimal_bytes_per_sec}} ETA {{eta}} {{msg}}"
    );
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar
}

/// One source file's share of a shared byte bar. Readers advance it as they read (so a slow
/// file moves the bar smoothly); it remembers how much it has shown, so the file's share can
/// be completed exactly once however reading ended (done, failed, or skipped ahead).
#[derive(Clone)]
pub struct ByteProgress {
    bar: ProgressBar,
    shown: Arc<AtomicU64>,
}

impl ByteProgress {
    pub fn new(bar: &ProgressBar) -> Self {
        ByteProgress {
            bar: bar.clone(),
            shown: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Progress that goes nowhere (training's counting pass, tests).
    pub fn none() -> Self {
        Self::new(&ProgressBar::hidden())
    }

    /// `bytes` more were read.
    pub fn advance(&self, bytes: u64) {
        self.shown.fetch_add(bytes, Ordering::Relaxed);
        self.bar.inc(bytes);
    }

    /// `done` bytes in total were read (for readers that only know an estimate).
    pub fn advance_to(&self, done: u64) {
        let before = self.shown.fetch_max(done, Ordering::Relaxed);
        if done > before {
            self.bar.inc(done - before);
        }
    }

    pub fn shown(&self) -> u64 {
        self.shown.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_share_is_counted_once_however_it_is_reported() {
        let bar = ProgressBar::hidden();
        bar.set_length(100);
        let progress = ByteProgress::new(&bar);
        progress.advance(10);
        progress.advance(15);
        progress.advance_to(20); // behind what was shown: no change
        assert_eq!((progress.shown(), bar.position()), (25, 25));
        progress.advance_to(60);
        assert_eq!((progress.shown(), bar.position()), (60, 60));
    }
}
