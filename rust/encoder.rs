//! The seam between the layout and the text encoder.
//!
//! Everything above this module sees only `TextEncoder`; swapping the HF `tokenizers`
//! implementation for a faster byte-level BPE later touches this file alone.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use rayon::prelude::*;
use rayon::{ThreadPool, ThreadPoolBuilder};
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

/// The token ids of many texts back to back, and where each text's ids start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedBatch {
    pub ids: Vec<u32>,
    /// `texts.len() + 1` entries: text `i` is `ids[offsets[i]..offsets[i + 1]]` (its EOS included).
    pub offsets: Vec<i64>,
}

/// Encode `texts` in parallel and concatenate their ids in order, with `eos_id` after each text
/// when given (so a flat stream of documents can be cut anywhere and still split on EOS).
pub fn encode_batch<S: AsRef<str> + Sync>(
    encoder: &dyn TextEncoder,
    texts: &[S],
    eos_id: Option<u32>,
) -> Result<EncodedBatch> {
    if let Some(eos) = eos_id {
        let vocab_size = encoder.vocab_size();
        if eos as usize >= vocab_size {
            return Err(Error::Config(format!(
                "eos_id {eos} is not an id of this tokenizer (its vocabulary has {vocab_size} \
                 tokens); pass the id of its end-of-text token, e.g. the one of \"<|endoftext|>\""
            )));
        }
    }
    let pool = process_pool()?;
    let encoded: Vec<Result<Vec<u32>, String>> = pool.install(|| {
        texts
            .par_iter()
            .map(|text| encoder.encode(text.as_ref()))
            .collect()
    });
    let extra = usize::from(eos_id.is_some());
    let mut ids = Vec::with_capacity(
        encoded
            .iter()
            .map(|doc| doc.as_ref().map_or(0, Vec::len) + extra)
            .sum(),
    );
    let mut offsets = Vec::with_capacity(texts.len() + 1);
    offsets.push(0);
    // In order, so that the error reported is always the first failing text's.
    for (i, doc) in encoded.into_iter().enumerate() {
        let doc =
            doc.map_err(|message| Error::Input(format!("text {i} of the batch: {message}")))?;
        ids.extend_from_slice(&doc);
        ids.extend(eos_id);
        offsets.push(ids.len() as i64);
    }
    Ok(EncodedBatch { ids, offsets })
}

/// This process's rayon pool for `encode_batch`, started on first use.
///
/// Not rayon's global pool: a DataLoader forks its workers, and a forked child inherits the
/// parent's pool without its threads, so work handed to it would wait forever. The pool is
/// therefore keyed by process id, and a child starts its own (the parent's is leaked: its
/// threads do not exist here, so there is nothing to join).
fn process_pool() -> Result<Arc<ThreadPool>> {
    static POOL: Mutex<Option<(u32, Arc<ThreadPool>)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut slot = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    match slot.take() {
        Some((owner, pool)) if owner == pid => {
            *slot = Some((owner, Arc::clone(&pool)));
            return Ok(pool);
        }
        Some((_, inherited)) => std::mem::forget(inherited),
        None => {}
    }
    let pool = ThreadPoolBuilder::new()
        .thread_name(|i| format!("data_io-encode-{i}"))
        .build()
        .map_err(|e| Error::Config(format!("cannot start the encoder's threads: {e}")))?;
    let pool = Arc::new(pool);
    *slot = Some((pid, Arc::clone(&pool)));
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One id per byte; fails on texts containing "!" (to test error order and reporting).
    struct Bytes;

    impl TextEncoder for Bytes {
        fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
            if text.contains('!') {
                return Err(format!("refused {text:?}"));
            }
            Ok(text.bytes().map(u32::from).collect())
        }
        fn token_id(&self, _token: &str) -> Option<u32> {
            None
        }
        fn vocab_size(&self) -> usize {
            300
        }
    }

    #[test]
    fn batch_concatenates_in_order_with_eos_after_each_text() {
        let batch = encode_batch(&Bytes, &["ab", "", "c"], Some(299)).expect("encodes");
        assert_eq!(batch.ids, vec![97, 98, 299, 299, 99, 299]);
        assert_eq!(batch.offsets, vec![0, 3, 4, 6]);
        let plain = encode_batch(&Bytes, &["ab", "", "c"], None).expect("encodes");
        assert_eq!(plain.ids, vec![97, 98, 99]);
        assert_eq!(plain.offsets, vec![0, 2, 2, 3]);
    }

    #[test]
    fn empty_batch_has_one_offset() {
        let batch = encode_batch::<&str>(&Bytes, &[], Some(0)).expect("encodes");
        assert!(batch.ids.is_empty());
        assert_eq!(batch.offsets, vec![0]);
    }

    #[test]
    fn many_texts_keep_their_order_across_threads() {
        let texts: Vec<String> = (0..5000).map(|i| "x".repeat(i % 7)).collect();
        let batch = encode_batch(&Bytes, &texts, Some(1)).expect("encodes");
        for (i, text) in texts.iter().enumerate() {
            let (start, end) = (batch.offsets[i] as usize, batch.offsets[i + 1] as usize);
            assert_eq!(end - start, text.len() + 1, "text {i}");
            assert_eq!(batch.ids[end - 1], 1);
        }
    }

    #[test]
    fn first_failing_text_is_reported() {
        let texts: Vec<String> = (0..100)
            .map(|i| {
                if i == 40 || i == 90 {
                    "no!".into()
                } else {
                    "ok".into()
                }
            })
            .collect();
        let err = encode_batch(&Bytes, &texts, None).expect_err("text 40 fails");
        assert_eq!(err.kind(), crate::ErrorKind::Input);
        assert!(err.to_string().starts_with("text 40 of the batch"), "{err}");
    }

    #[test]
    fn eos_outside_the_vocabulary_is_a_config_error() {
        let err = encode_batch(&Bytes, &["a"], Some(300)).expect_err("300 >= vocab");
        assert_eq!(err.kind(), crate::ErrorKind::Config);
        assert!(err.to_string().contains("eos_id 300"), "{err}");
    }
}
