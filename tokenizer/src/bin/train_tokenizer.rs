//! `train_tokenizer`: the original data_io's tokenizer training command, with its arguments,
//! doing what `data_io train-tokenizer` does (the same Rust function,
//! `data_io_core::train::train_with`).
//!
//!   (cd tokenizer && cargo run --release --bin train_tokenizer -- ../data ../data_clustered \
//!       -o ../trained_tokenizers/bpe/tokenizer.json)

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use data_io_core::reader::OnError;
use data_io_core::train::{
    train_with, TokenizerKind, TrainOptions, Trainer, DEFAULT_SPECIAL_TOKENS,
};
use tokenizer_cli::load_prefix_limits;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `min_frequency` of the BPE trainer, as `data_io train-tokenizer` (formats.md §2).
const MIN_FREQUENCY: u64 = 2;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TrainerArg {
    Rust,
    Hf,
}

#[derive(Clone, Copy, ValueEnum)]
enum OnErrorArg {
    Fail,
    Skip,
}

/// Train a byte-level BPE (or unigram) tokenizer on the instruction and response texts of
/// every row file under DIRS; writes OUT, and config.json and tokenizer_config.json beside it.
///
/// The original data_io's `train_tokenizer` with its arguments; the work is that of
/// `data_io train-tokenizer` (same code, same tokenizer).
#[derive(Parser)]
#[command(name = "train_tokenizer", version, about, long_about)]
struct TrainArgs {
    /// Folders (or files) of cleaned rows
    #[arg(required = true, num_args = 1..)]
    dirs: Vec<PathBuf>,
    /// The tokenizer file to write (OUT/tokenizer.json); the other two go beside it
    #[arg(short, required = true)]
    out: PathBuf,
    /// Seed of the per-file choice of texts
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Per-file limits (max_per_file); 'none' uses every text
    #[arg(short, long, default_value = "../prefix_config.yaml")]
    prefix_config: PathBuf,
    /// Each text is cut to its first N characters
    #[arg(long, default_value_t = 10_000)]
    truncate_len: usize,
    /// Per file at most this many times max_per_file texts
    #[arg(long, default_value_t = 10)]
    limit_mul_factor: u64,
    /// Model type: bpe or unigram
    #[arg(long, default_value = "bpe")]
    tokenizer_type: String,
    /// Target vocabulary size, special tokens included
    #[arg(long, default_value_t = 65536)]
    vocab_size: usize,
    /// Special tokens registered first, in order (comma-separated; default: the 31 of
    /// formats.md §2)
    #[arg(long, value_delimiter = ',', default_values = DEFAULT_SPECIAL_TOKENS)]
    special_tokens: Vec<String>,
    /// [data_io] A bad row fails the run, or is skipped and counted
    #[arg(long, value_enum, default_value_t = OnErrorArg::Fail)]
    on_error: OnErrorArg,
    /// [data_io] rust (default): data_io's counting pass, then its BPE merges (equal to
    /// tokenizers') or its unigram EM (tokenizers' pieces, the same file on any thread count);
    /// hf: the tokenizers library's trainers fed the texts (BPE: the same file)
    #[arg(long, value_enum)]
    trainer: Option<TrainerArg>,
    /// [data_io] Worker threads (default: every core)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    threads: Option<u32>,
    /// [data_io] No progress bar and no summary; errors are still printed
    #[arg(short, long)]
    quiet: bool,
}

fn main() -> ExitCode {
    let args = TrainArgs::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("train_tokenizer: error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &TrainArgs) -> Result<(), String> {
    // The original lower-cased the type ("BPE" worked there).
    let kind = match args.tokenizer_type.to_lowercase().as_str() {
        "bpe" => TokenizerKind::Bpe,
        "unigram" => TokenizerKind::Unigram,
        other => {
            return Err(format!(
                "--tokenizer-type must be bpe or unigram, not {other:?}"
            ))
        }
    };
    if args.out.extension().is_none_or(|e| e != "json") {
        return Err(format!(
            "-o {} must be a .json file (e.g. ../trained_tokenizers/bpe/tokenizer.json)",
            args.out.display()
        ));
    }
    let prefix_limits = if args.prefix_config.as_os_str().eq_ignore_ascii_case("none") {
        Vec::new()
    } else {
        load_prefix_limits(&args.prefix_config)?
    };
    let options = TrainOptions {
        inputs: args.dirs.clone(),
        output: args.out.clone(),
        kind,
        vocab_size: args.vocab_size,
        seed: args.seed,
        prefix_limits,
        truncate_len: args.truncate_len,
        limit_mul_factor: args.limit_mul_factor,
        special_tokens: args.special_tokens.clone(),
        roles: vec![],
        min_frequency: MIN_FREQUENCY,
        on_error: match args.on_error {
            OnErrorArg::Fail => OnError::Fail,
            OnErrorArg::Skip => OnError::Skip,
        },
        threads: args.threads.map(|n| n as usize),
        progress: !args.quiet && std::io::stderr().is_terminal(),
        count_memory: None,
        counts_dir: None,
        count_parts: Vec::new(),
    };
    let trainer = match args.trainer {
        Some(TrainerArg::Hf) => Trainer::Hf,
        _ => Trainer::Ours,
    };
    let report = train_with(&options, trainer).map_err(|e| e.to_string())?;
    if !args.quiet {
        let limited = report.files.iter().filter(|f| f.limited).count();
        let bad: u64 = report.files.iter().map(|f| f.bad_rows).sum();
        println!(
            "train_tokenizer -> {} (+ config.json, tokenizer_config.json): vocab {}, {} texts \
             from {} file(s) ({limited} limited by max_per_file), {bad} bad row(s) skipped, \
             {:.1} s",
            report.output,
            report.vocab_size,
            report.texts_used,
            report.files.len(),
            report.seconds
        );
        if report.vocab_size < args.vocab_size {
            println!(
                "note: the vocabulary has {} tokens, not the {} asked: the texts hold no more \
                 pairs seen at least {MIN_FREQUENCY} times; train on more texts \
                 (--prefix-config none uses every text) or ask for fewer with --vocab-size",
                report.vocab_size, args.vocab_size
            );
        }
    }
    Ok(())
}
