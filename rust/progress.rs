//! Progress bars on stderr (hidden when stderr is not a terminal, or when asked to be quiet).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A byte-based bar: sources are measured in bytes, so MB/s and ETA are meaningful across
/// JSONL and Parquet files of any size.
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
        "{what} {{spinner}} [{{elapsed_precise}}] {{wide_bar}} {{binary_bytes}}/{{binary_total_bytes}} \
         {{binary_bytes_per_sec}} ETA {{eta}} {{msg}}"
    );
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar
}
