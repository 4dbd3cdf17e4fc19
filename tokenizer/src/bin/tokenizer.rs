//! `tokenizer`: the original data_io's tokenization command, with its arguments, doing what
//! `data_io tokenize` does (the same Rust function, `data_io_core::tokenize::tokenize`).
//!
//!   (cd tokenizer && cargo run --release --bin tokenizer -- ../data ../data_clustered \
//!       --tokenizer-path ../trained_tokenizers/bpe/tokenizer.json -o ../data_tokenized_bpe_65k)

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use data_io_core::layout::LayoutTokens;
use data_io_core::reader::{OnError, DEFAULT_BATCH_ROWS};
use data_io_core::tokenize::{tokenize, DtypeChoice, TokenizeOptions};
use tokenizer_cli::{parse_conditions, resolve_tokenizer, tokenize_failure, tokenize_summary};

// The allocator of the Python extension: the encoder allocates per text (see ../Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Clone, Copy, ValueEnum)]
enum OnErrorArg {
    Fail,
    Skip,
}

#[derive(Clone, Copy, ValueEnum)]
enum TokenDtypeArg {
    Uint32,
    Auto,
}

/// Tokenize every .jsonl, .jsonl.gz, .jsonl.zst and .parquet file under DIRS into
/// OUTPUT_DIR/<task>/{tokens,inst_start,inst_len,resp_start,resp_len}.npy, incrementally
/// (unchanged files are kept, folders of deleted sources removed).
///
/// The original data_io's `tokenizer` with its arguments; the work is that of
/// `data_io tokenize` (same code, same output). The .npy files are byte-identical to the
/// original's for the same rows and tokenizer (tokens <u4 unless --token-dtype auto).
#[derive(Parser)]
#[command(name = "tokenizer", version, about, long_about)]
struct Args {
    /// Folders (or files) of cleaned rows
    #[arg(required = true, num_args = 1..)]
    dirs: Vec<PathBuf>,
    /// Output folder, outside every input folder
    #[arg(short, long, required = true)]
    output_dir: PathBuf,
    /// tokenizer.json, a folder holding one, or a Hub id already in the Hugging Face cache
    /// (this binary does not download; `data_io tokenize` does)
    #[arg(short, long, default_value = "Qwen/Qwen3-Next-80B-A3B-Instruct")]
    tokenizer_path: String,
    /// Begin-of-question token
    #[arg(long, default_value = "<|im_start|>")]
    boq: String,
    /// End-of-question token
    #[arg(long, default_value = "<|im_end|>")]
    eoq: String,
    /// End-of-answer token
    #[arg(long, default_value = "<|box_end|>")]
    eoa: String,
    /// Condition tag to token map, TAG=TOKEN,...
    #[arg(long, value_delimiter = ',', num_args = 1.., default_values = [
        "direct=<|object_ref_start|>", "cot=<|object_ref_end|>",
        "noisy=<|quad_start|>", "synth=<|quad_end|>",
    ])]
    conditions: Vec<String>,
    /// [data_io] A bad row fails its file (exit status 1), or is skipped and counted
    #[arg(long, value_enum, default_value_t = OnErrorArg::Fail)]
    on_error: OnErrorArg,
    /// [data_io] Worker threads (default: every core)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    threads: Option<u32>,
    /// [data_io] tokens.npy element type: uint32 as the original, or auto, the smallest that
    /// holds the vocabulary
    #[arg(long, value_enum, default_value_t = TokenDtypeArg::Uint32)]
    token_dtype: TokenDtypeArg,
    /// [data_io] No progress bar and no summary; errors are still printed
    #[arg(short, long)]
    quiet: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("tokenizer: error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let tokenizer_path = resolve_tokenizer(&args.tokenizer_path)?;
    // As `data_io tokenize`: encoded parts that a scaled-out run left in the output are used.
    let parts = args.output_dir.join(".data_io_scale").join("parts");
    let options = TokenizeOptions {
        inputs: args.dirs.clone(),
        output: args.output_dir.clone(),
        tokenizer_path,
        layout: LayoutTokens {
            boq: args.boq.clone(),
            eoq: args.eoq.clone(),
            eoa: args.eoa.clone(),
            conditions: parse_conditions(&args.conditions)?,
        },
        on_error: match args.on_error {
            OnErrorArg::Fail => OnError::Fail,
            OnErrorArg::Skip => OnError::Skip,
        },
        threads: args.threads.map(|n| n as usize),
        token_dtype: match args.token_dtype {
            TokenDtypeArg::Uint32 => DtypeChoice::Uint32,
            TokenDtypeArg::Auto => DtypeChoice::Auto,
        },
        progress: !args.quiet && std::io::stderr().is_terminal(),
        batch_rows: DEFAULT_BATCH_ROWS,
        parts: Path::is_dir(&parts).then_some(parts),
    };
    let report = tokenize(&options).map_err(|e| e.to_string())?;
    if !args.quiet {
        println!("{}", tokenize_summary(&report));
    }
    match tokenize_failure(&report) {
        Some(message) => Err(message),
        None => Ok(()),
    }
}
