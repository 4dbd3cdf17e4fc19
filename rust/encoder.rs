//! The seam between the layout and the text encoder.
//!
//! Everything above this module sees only `TextEncoder`; swapping the HF `tokenizers`
//! implementation for a faster byte-level BPE later touches this file alone.

use std::path::Path;

use tokenizers::Tokenizer;

use crate::error::{Error, Result};

pub trait TextEncoder: Sync {
    /// Token ids of `text`, with no special tokens added and special-token strings inside the
    /// text encoded as plain text.
    fn encode(&self, text: &str) -> Result<Vec<u32>, String>;
    /// The id of a (special) token given by its string, if the vocabulary has it.
    fn token_id(&self, token: &str) -> Option<u32>;
    /// Vocabulary size including added tokens; every id is below it.
    fn vocab_size(&self) -> usize;
}

/// A HuggingFace `tokenizers` tokenizer loaded from its JSON file.
pub struct HfEncoder {
    tokenizer: Tokenizer,
}

impl HfEncoder {
    pub fn from_file(path: &Path) -> Result<Self> {
        let mut tokenizer = Tokenizer::from_file(path).map_err(|e| {
            Error::Tokenizer(format!(
                "cannot load tokenizer {}: {e}; pass a tokenizers JSON file (tokenizer.json)",
                path.display()
            ))
        })?;
        // Data must never inject a control token: "<|im_end|>" inside a row is plain text.
        tokenizer.set_encode_special_tokens(true);
        Ok(HfEncoder { tokenizer })
    }
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
        self.tokenizer.get_vocab_size(true)
    }
}
