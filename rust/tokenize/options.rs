//! What a `tokenize` run is asked to do: the options `bindings/tokenize.rs` builds from Python's JSON
//! and the tokenizer/ binaries from their command lines.

use std::path::PathBuf;

use crate::layout::LayoutTokens;
use crate::reader::OnError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DtypeChoice {
    /// `<u4`, as the original wrote.
    Uint32,
    /// The smallest dtype that holds the vocabulary (uint16 up to 65,536 tokens).
    Auto,
}

#[derive(Debug, Clone)]
pub struct TokenizeOptions {
    pub inputs: Vec<PathBuf>,
    pub output: PathBuf,
    /// A tokenizer JSON file (the Python facade resolves folders and Hub ids).
    pub tokenizer_path: PathBuf,
    pub layout: LayoutTokens,
    pub on_error: OnError,
    /// Worker threads; `None` uses every core.
    pub threads: Option<usize>,
    pub token_dtype: DtypeChoice,
    pub progress: bool,
    pub batch_rows: usize,
    /// Where `scale` units left encoded parts of files (`parts.rs`): a task whose parts
    /// are all there and current is assembled from them instead of encoded.
    pub parts: Option<PathBuf>,
}
