//! tokenizer.json recognition: `Encoder::from_file_with(path, "auto")` (rust/encoder/mod.rs), which
//! reads the file (UTF-8 check), asks `fast_bpe::spec::recognise` whether the fast encoder
//! serves it exactly, builds the fast encoder's tables (`FastBpe::new`, which may still
//! decline) and otherwise falls back to the HF `tokenizers` encoder. On arbitrary and mutated
//! tokenizer.json bytes (seeds: tiny tokenizers cut from the shipped one, fuzz/make_seeds.py)
//! it must return `Ok` or `Err`, never panic (the HF loader's own panics are turned into
//! errors by `HfEncoder::from_json`; only a panic out of `Encoder` is a crash here, see
//! `common`).
//!
//! When the fast encoder takes the file and the HF encoder loads it too, both must agree, as
//! the fast path promises "id for id": the same ids on a few texts (fixed ones, the file's
//! added tokens and some of its vocabulary), the same id for each added token and vocabulary
//! entry asked, and the same vocabulary size.
#![no_main]

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use data_io_core::encoder::{Encoder, TextEncoder, FAST_ENGINE};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn path() -> &'static Path {
    static PATH: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = PATH.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tokenizer.json");
        (dir, path)
    });
    path
}

const TEXTS: &[&str] = &[
    "",
    "hello world",
    "Hello, World! It's 2024: 12345 + 0.5 = ?",
    " \n\t  x\r\n\n  ",
    "don't I'LL we've 'S",
    "e\u{301}t\u{e9} \u{212b} \u{fb01}",
    "中文，日本語のテキスト 한국어",
    "😀👍🏽 \u{200d}\u{feff}",
    "<|endoftext|><|im_start|>user\nhi<|im_end|>",
    "\u{0}\u{1}\u{7f}\u{80}\u{ff}\u{fffd}",
];

/// Texts and tokens taken from the file: added tokens and a few vocabulary entries.
fn file_strings(json: &str) -> (Vec<String>, Vec<String>) {
    let Ok(file) = serde_json::from_str::<Value>(json) else {
        return (Vec::new(), Vec::new());
    };
    let added: Vec<String> = file["added_tokens"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["content"].as_str().map(str::to_owned))
        .take(16)
        .collect();
    let vocab: Vec<String> = file["model"]["vocab"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k.clone())
        .take(16)
        .collect();
    let mut texts = vec![
        added.join(""),
        added.join(" x "),
        vocab.join(""),
        vocab.join(" "),
    ];
    texts.extend(added.iter().map(|t| format!("a{t}b")));
    let mut tokens = added;
    tokens.extend(vocab);
    (texts, tokens)
}

fn load_file(data: &[u8]) {
    let path = path();
    std::fs::write(path, data).expect("write the input file");
    let Ok(auto) = Encoder::from_file_with(path, "auto") else {
        return;
    };
    if auto.engine() != FAST_ENGINE {
        return;
    }
    let Ok(hf) = Encoder::from_file_with(path, "hf") else {
        // The fast encoder takes a file `tokenizers` does not load: no oracle.
        return;
    };
    let json = std::str::from_utf8(data).expect("a served file is text");
    let (texts, tokens) = file_strings(json);
    for text in TEXTS
        .iter()
        .copied()
        .chain(texts.iter().map(String::as_str))
    {
        let Ok(expected) = hf.encode(text) else {
            continue;
        };
        let got = auto.encode(text).expect("the fast encoder does not fail");
        assert_eq!(got, expected, "ids differ on {text:?}");
    }
    for token in &tokens {
        assert_eq!(
            auto.token_id(token),
            hf.token_id(token),
            "token_id({token:?})"
        );
    }
    assert_eq!(auto.vocab_size(), hf.vocab_size(), "vocab_size");
}

fuzz_target!(init: common::record_panics(), |data: &[u8]| {
    common::check(|| load_file(data));
});
