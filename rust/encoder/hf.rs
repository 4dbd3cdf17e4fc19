//! The HF `tokenizers` encoder (the fast encoder's oracle and fallback), and the reading of a
//! tokenizer file, which is a `tokenizers` JSON file for every engine.

use std::path::Path;
use std::str::FromStr;

use tokenizers::Tokenizer;

use super::TextEncoder;
use crate::error::{Error, Result};

/// A HuggingFace `tokenizers` tokenizer loaded from its JSON file.
pub struct HfEncoder {
    tokenizer: Tokenizer,
    /// `get_vocab_size(true)` builds the whole vocabulary map each time: asked once.
    vocab_size: usize,
}

impl HfEncoder {
    pub fn from_file(path: &Path) -> Result<Self> {
        Self::from_json(&read_tokenizer(path)?, path)
    }

    /// From the text of the file at `path` (named in errors).
    pub(super) fn from_json(json: &str, path: &Path) -> Result<Self> {
        // `tokenizers` 0.22 panics instead of failing on a file cut short or otherwise invalid
        // JSON inside its "decoder" (decoders/mod.rs: `.expect("Helper")`; `{"decoder":` is
        // enough, found by fuzz/fuzz_targets/tokenizer_json.rs): that is this file's error.
        let loaded = std::panic::catch_unwind(|| Tokenizer::from_str(json)).unwrap_or_else(|_| {
            Err("the tokenizers library failed on it (invalid JSON in its decoder?)".into())
        });
        let mut tokenizer = loaded.map_err(|e| match model_problem(json) {
            Some(problem) => cannot_load(path, problem),
            None => cannot_load(path, e),
        })?;
        // Data must never inject a control token: "<|im_end|>" inside a row is plain text.
        tokenizer.set_encode_special_tokens(true);
        // As the fast encoder's: every id below it, where the ids leave gaps too.
        let id_bound = (tokenizer.get_vocab(true).into_values())
            .map(|id| id as usize + 1)
            .max();
        let vocab_size = tokenizer.get_vocab_size(true).max(id_bound.unwrap_or(0));
        Ok(HfEncoder {
            tokenizer,
            vocab_size,
        })
    }
}

/// The text of a tokenizer file.
pub(super) fn read_tokenizer(path: &Path) -> Result<String> {
    tokenizer_text(read_tokenizer_bytes(path)?, path)
}

/// The bytes of a tokenizer file, not yet checked to be text.
pub(super) fn read_tokenizer_bytes(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| cannot_load(path, e))
}

/// A tokenizer file's bytes as text. SIMD validation: the standard library's took 5 ms of a
/// 5 MB `tokenizer.json` (byte-level vocabularies are mostly non-ASCII).
pub(super) fn tokenizer_text(bytes: Vec<u8>, path: &Path) -> Result<String> {
    if simdutf8::basic::from_utf8(&bytes).is_ok() {
        // SAFETY: just validated as UTF-8.
        return Ok(unsafe { String::from_utf8_unchecked(bytes) });
    }
    String::from_utf8(bytes).map_err(|e| cannot_load(path, e))
}

/// The model types `tokenizers` reads.
const MODEL_TYPES: [&str; 4] = ["BPE", "Unigram", "WordPiece", "WordLevel"];

/// What is wrong with a file's `model`, said plainly, when that is why it did not load: the
/// library's own message for it is serde's ("data did not match any variant of untagged enum
/// ModelUntagged at line 1 column N"). Read only once loading has failed.
fn model_problem(json: &str) -> Option<String> {
    let file: serde_json::Value = serde_json::from_str(json).ok()?;
    let Some(model) = file.get("model").and_then(serde_json::Value::as_object) else {
        return Some("it has no \"model\" object".into());
    };
    match model.get("type").and_then(serde_json::Value::as_str) {
        Some(kind) if !MODEL_TYPES.contains(&kind) => Some(format!(
            "its model.type {kind:?} is not one of {}",
            MODEL_TYPES.join(", ")
        )),
        _ => None,
    }
}

fn cannot_load(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Tokenizer(format!(
        "cannot load tokenizer {}: {e}; pass a tokenizers JSON file (tokenizer.json)",
        path.display()
    ))
}

impl TextEncoder for HfEncoder {
    fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        self.tokenizer
            .encode_fast(text, false)
            .map(|encoding| encoding.get_ids().to_vec())
            .map_err(|e| format!("the tokenizer failed on this text: {e}"))
    }

    fn token_id(&self, token: &str) -> Option<u32> {
        self.tokenizer.token_to_id(token)
    }

    fn vocab_size(&self) -> usize {
        self.vocab_size
    }
}
