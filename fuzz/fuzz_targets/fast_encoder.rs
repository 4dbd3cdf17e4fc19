//! The fast BPE encoder (rust/encoder/fast_bpe) against the HF `tokenizers` encoder on arbitrary
//! text: the same ids, always (rust/encoder/exactness.rs is the hand-written side of this). Both
//! encoders are built once per process, through `Encoder::from_file_with` with the engine
//! forced, for the shipped tokenizer (trained_tokenizers/bpe/tokenizer.json, compiled in;
//! `DATA_IO_FUZZ_TOKENIZER` names another file) and the variants exactness.rs derives from it.
//!
//! Input: byte 0 picks the variant; the rest is the text (invalid UTF-8 replaced by U+FFFD).
#![no_main]

use std::sync::OnceLock;

use data_io_core::encoder::fast_bpe::pretokenize::{CL100K_REGEX, QWEN35_REGEX};
use data_io_core::encoder::{Encoder, TextEncoder, FAST_ENGINE, HF_ENGINE};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

const SHIPPED: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../trained_tokenizers/bpe/tokenizer.json"
));

fn shipped_json() -> Value {
    let text = match std::env::var_os("DATA_IO_FUZZ_TOKENIZER") {
        Some(path) => std::fs::read_to_string(&path).expect("DATA_IO_FUZZ_TOKENIZER"),
        None => SHIPPED.to_owned(),
    };
    serde_json::from_str(&text).expect("the tokenizer is JSON")
}

fn split_then_byte_level(regex: &str) -> Value {
    json!({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}
    ]})
}

/// The variants of rust/encoder/exactness.rs, in its order of `Variant`.
const VARIANTS: [&str; 7] = [
    "shipped",
    "gpt2",
    "cl100k",
    "ignore_merges",
    "gpt2_ignore_merges",
    "qwen35",
    "added_tokens",
];

fn variant_json(variant: &str) -> Value {
    let mut file = shipped_json();
    let gpt2 = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true});
    match variant {
        "shipped" => {}
        "gpt2" => {
            file["pre_tokenizer"] = gpt2;
            file["normalizer"] = Value::Null;
        }
        "cl100k" => file["pre_tokenizer"] = split_then_byte_level(CL100K_REGEX),
        "qwen35" => file["pre_tokenizer"] = split_then_byte_level(QWEN35_REGEX),
        "ignore_merges" => file["model"]["ignore_merges"] = json!(true),
        "gpt2_ignore_merges" => {
            file["pre_tokenizer"] = gpt2;
            file["normalizer"] = Value::Null;
            file["model"]["ignore_merges"] = json!(true);
            let legacy: Vec<String> = file["model"]["merges"]
                .as_array()
                .expect("merges")
                .iter()
                .map(|pair| match pair.as_str() {
                    // Already "a b" (Qwen's files, given by DATA_IO_FUZZ_TOKENIZER).
                    Some(legacy) => legacy.to_owned(),
                    None => format!(
                        "{} {}",
                        pair[0].as_str().unwrap(),
                        pair[1].as_str().unwrap()
                    ),
                })
                .collect();
            file["model"]["merges"] = json!(legacy);
        }
        "added_tokens" => with_plain_added_tokens(&mut file),
        other => unreachable!("{other}"),
    }
    file
}

/// Make `<tool_call>`, `</tool_call>`, `<|fim_prefix|>` and `<think>` non-special, and add a
/// non-special `zqxjkv` (not in the vocabulary) and a special `<tool_call>>` (as exactness.rs).
fn with_plain_added_tokens(file: &mut Value) {
    let next_id = file["model"]["vocab"].as_object().expect("vocab").len();
    let added = file["added_tokens"].as_array_mut().expect("added tokens");
    for token in added.iter_mut() {
        let content = token["content"].as_str().unwrap_or("");
        if ["<tool_call>", "</tool_call>", "<|fim_prefix|>", "<think>"].contains(&content) {
            token["special"] = json!(false);
        }
    }
    for (offset, (content, special)) in [("zqxjkv", false), ("<tool_call>>", true)]
        .into_iter()
        .enumerate()
    {
        added.push(
            json!({"id": next_id + offset, "content": content, "single_word": false,
                          "lstrip": false, "rstrip": false, "normalized": false,
                          "special": special}),
        );
    }
}

/// The fast and the HF encoder of one variant.
struct Pair {
    fast: Encoder,
    hf: Encoder,
}

fn pair(index: usize) -> &'static Pair {
    static PAIRS: [OnceLock<Pair>; VARIANTS.len()] = [const { OnceLock::new() }; VARIANTS.len()];
    PAIRS[index].get_or_init(|| {
        let variant = VARIANTS[index];
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tokenizer.json");
        std::fs::write(&path, variant_json(variant).to_string()).expect("write tokenizer");
        let fast = Encoder::from_file_with(&path, "fast")
            .unwrap_or_else(|e| panic!("{variant}: the fast encoder does not serve it: {e}"));
        let hf = Encoder::from_file_with(&path, "hf").expect("hf encoder");
        assert_eq!((fast.engine(), hf.engine()), (FAST_ENGINE, HF_ENGINE));
        Pair { fast, hf }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, text)) = data.split_first() else {
        return;
    };
    let index = usize::from(control) % VARIANTS.len();
    let pair = pair(index);
    let text = String::from_utf8_lossy(text);
    let expected = pair.hf.encode(&text).expect("hf encodes");
    let got = pair.fast.encode(&text).expect("fast encodes");
    assert_eq!(got, expected, "{}: ids differ on {text:?}", VARIANTS[index]);
    // The batch path: texts encoded one after another, a text's last pieces looked up while
    // the next one is split (`FastBpe::encode_texts`). The input is cut into texts at U+0001;
    // each text's ids, then an EOS, and the ends must be those of each text on its own.
    const EOS: u32 = u32::MAX - 1; // no token's id
    let texts: Vec<&str> = text.split('\u{1}').collect();
    let (mut ids, mut ends) = (Vec::new(), Vec::new());
    let mut each = texts.iter().copied();
    pair.fast
        .encode_texts_into(&mut each, Some(EOS), &mut ids, &mut ends)
        .expect("fast encodes");
    let (mut want, mut want_ends) = (Vec::new(), Vec::new());
    for one in &texts {
        want.extend(pair.hf.encode(one).expect("hf encodes"));
        want.push(EOS);
        want_ends.push(want.len());
    }
    assert_eq!(
        (ids, ends),
        (want, want_ends),
        "{}: batch differs on {texts:?}",
        VARIANTS[index]
    );
});
