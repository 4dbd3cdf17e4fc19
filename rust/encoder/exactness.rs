//! Differential tests: the fast encoder against the HF `tokenizers` encoder (the oracle, run
//! in-process through `Encoder` with the engine forced) on an adversarial corpus and random
//! strings, for the shipped tokenizer and GPT-2 / cl100k / ignore_merges variants of it.
//! Zero differences are allowed.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{json, Value};

use super::fast_bpe::pretokenize::{CL100K_REGEX, QWEN35_REGEX, QWEN_REGEX};
use super::fast_bpe::Tables;
use crate::encoder::{Encoder, TextEncoder, FAST_ENGINE, HF_ENGINE};
use crate::train::DEFAULT_SPECIAL_TOKENS;

fn shipped_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("trained_tokenizers/bpe/tokenizer.json")
}

fn shipped_json() -> Value {
    let text = std::fs::read_to_string(shipped_path()).expect("shipped tokenizer");
    serde_json::from_str(&text).expect("valid json")
}

fn split_then_byte_level(regex: &str) -> Value {
    json!({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}
    ]})
}

/// The tokenizer variants tested, each derived from the shipped one.
#[derive(Debug, Clone, Copy)]
enum Variant {
    /// The shipped file as is (Qwen regex, NFC).
    Shipped,
    /// GPT-2's shape: bare ByteLevel with its regex, no normalizer.
    Gpt2,
    /// cl100k's regex (`\p{N}{1,3}`), NFC.
    Cl100k,
    /// The shipped file with `ignore_merges`.
    IgnoreMerges,
    /// GPT-2's shape with `ignore_merges` and merges in the legacy "a b" form.
    Gpt2IgnoreMerges,
    /// Qwen 3.5's regex (marks count as letters), NFC.
    Qwen35,
    /// Some added tokens not special, as in Qwen 2.5 (`<tool_call>`...), one of them outside the
    /// vocabulary, and a longer special token that hides a non-special one.
    AddedTokens,
}

const VARIANTS: [Variant; 7] = [
    Variant::AddedTokens,
    Variant::Shipped,
    Variant::Gpt2,
    Variant::Cl100k,
    Variant::IgnoreMerges,
    Variant::Gpt2IgnoreMerges,
    Variant::Qwen35,
];

fn variant_json(variant: Variant) -> Value {
    let mut file = shipped_json();
    let gpt2 = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true});
    match variant {
        Variant::Shipped => {}
        Variant::Gpt2 => {
            file["pre_tokenizer"] = gpt2;
            file["normalizer"] = Value::Null;
        }
        Variant::Cl100k => file["pre_tokenizer"] = split_then_byte_level(CL100K_REGEX),
        Variant::Qwen35 => file["pre_tokenizer"] = split_then_byte_level(QWEN35_REGEX),
        Variant::AddedTokens => with_plain_added_tokens(&mut file),
        Variant::IgnoreMerges => file["model"]["ignore_merges"] = json!(true),
        Variant::Gpt2IgnoreMerges => {
            file["pre_tokenizer"] = gpt2;
            file["normalizer"] = Value::Null;
            file["model"]["ignore_merges"] = json!(true);
            let legacy: Vec<String> = file["model"]["merges"]
                .as_array()
                .expect("merges")
                .iter()
                .map(|pair| {
                    format!(
                        "{} {}",
                        pair[0].as_str().expect("a"),
                        pair[1].as_str().expect("b")
                    )
                })
                .collect();
            file["model"]["merges"] = json!(legacy);
        }
    }
    file
}

/// Make `<tool_call>`, `</tool_call>`, `<|fim_prefix|>` and `<think>` non-special, and add a
/// non-special `zqxjkv` (not in the vocabulary) and a special `<tool_call>>`.
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

/// The fast and the HF encoder of one tokenizer file.
struct Pair {
    fast: Encoder,
    hf: Encoder,
    _dir: tempfile::TempDir,
}

fn encoders_for(file: &Value) -> Pair {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, file.to_string()).expect("write tokenizer");
    let fast = Encoder::from_file_with(&path, "fast").expect("fast encoder serves it");
    let hf = Encoder::from_file_with(&path, "hf").expect("hf encoder");
    assert_eq!(fast.engine(), FAST_ENGINE);
    assert_eq!(hf.engine(), HF_ENGINE);
    Pair {
        fast,
        hf,
        _dir: dir,
    }
}

impl Pair {
    /// Assert equal ids on every text; returns how many ids were compared.
    fn check(&self, label: &str, texts: &[String]) -> usize {
        let mut compared = 0;
        for text in texts {
            let expected = self.hf.encode(text).expect("hf encodes");
            let got = self.fast.encode(text).expect("fast encodes");
            assert_eq!(got, expected, "{label}: ids differ on {text:?}");
            compared += expected.len();
        }
        compared
    }
}

/// One representative character per Unicode general category (and a few of the odd ones the
/// regexes care about), for the category-boundary part of the corpus.
const CATEGORY_SAMPLES: &[&str] = &[
    "A",
    "z",
    "ǅ",
    "ʰ",
    "中",
    "\u{301}",
    "\u{903}",
    "\u{20dd}",
    "7",
    "٣",
    "Ⅻ",
    "½",
    "_",
    "-",
    "(",
    ")",
    "«",
    "»",
    "!",
    "'",
    "+",
    "$",
    "^",
    "©",
    " ",
    "\u{a0}",
    "\u{3000}",
    "\u{2028}",
    "\u{2029}",
    "\t",
    "\n",
    "\r",
    "\u{b}",
    "\u{c}",
    "\u{85}",
    "\u{1}",
    "\u{200b}",
    "\u{200d}",
    "\u{feff}",
    "\u{e000}",
    "\u{378}",
    "\u{10ffff}",
    "ſ",
    "K",
    "İ",
    "ß",
    "ﬆ",
    "😀",
    "𝔸",
    "𝟘",
];

/// The adversarial corpus: category boundaries, digit runs, contractions in every case, long
/// unsplittable runs, white space mixes, combining marks and NFC-changing sequences, emoji, CJK,
/// right-to-left scripts and special-token strings as text.
fn adversarial_corpus() -> Vec<String> {
    let mut texts = Vec::new();
    for a in CATEGORY_SAMPLES {
        for b in CATEGORY_SAMPLES {
            texts.push(format!("{a}{b}"));
            texts.push(format!("x{a}{b}y {a} {b}{b}{a}"));
        }
    }
    let digit_sets = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "０１２３４５６７８９", "ⅠⅡⅢⅣⅤ"];
    for digits in digit_sets {
        let chars: Vec<char> = digits.chars().collect();
        for len in 1..=5 {
            let run: String = chars.iter().cycle().take(len).collect();
            for context in ["", " ", "a", "$", "\n", "'"] {
                texts.push(format!("{context}{run}"));
                texts.push(format!("{context}{run}{context}{run}x"));
            }
        }
    }
    for suffix in ["s", "t", "re", "ve", "m", "ll", "d", "ſ", "K", "x", ""] {
        for variant in case_variants(suffix) {
            for before in ["", "it", "IT", " ", "1", ".", "'"] {
                for after in ["", " ", "x", "'", "\n"] {
                    texts.push(format!("{before}'{variant}{after}"));
                }
            }
        }
    }
    for unit in [
        "a", "1", "!", "中", "é", "\u{301}", " ", "\n", "ab", "😀", "-=", "ـ",
    ] {
        texts.push(unit.repeat(3000));
        texts.push(format!("x {}", unit.repeat(257)));
    }
    let letters: String = (0..4000u32)
        .map(|i| char::from(b'a' + ((i * 7919 + i / 3) % 26) as u8))
        .collect();
    texts.push(letters);
    let spaces = [
        "", " ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\u{3000}", "\u{a0}",
    ];
    for a in spaces {
        for b in spaces {
            for c in spaces {
                texts.push(format!("{a}word{b}{c}1{a}.{c}"));
                texts.push(format!("{a}{b}{c}"));
            }
        }
    }
    for text in [
        "e\u{301}te\u{301}",
        "\u{1e0b}\u{323}",
        "\u{1100}\u{1161}\u{11a8}",
        "A\u{30a}",
        "\u{212b}",
        "\u{2126}",
        "\u{344}",
        "\u{958}",
        "\u{f900}",
        "a\u{328}\u{301}\u{307}",
        "\u{fb01}",
        "\u{301}start",
        "x\u{301}\u{301}\u{301} y",
        "\u{ac00}\u{11a8}",
        "\u{0d4a}",
        "\u{1f1e}",
        "\u{2000}\u{2001}",
        "\u{1d15e}\u{1d165}",
        "\u{fa10}\u{2f800}",
    ] {
        texts.push(text.to_string());
        texts.push(format!("word {text} word{text}"));
    }
    for text in [
        "👨‍👩‍👧‍👦 family",
        "🏳️‍🌈",
        "👍🏽👍🏿",
        "🇺🇸🇫🇷",
        "🧑🏻‍💻 codes",
        "❤️‍🔥",
        "中文文本，测试。日本語のテキスト、カタカナ",
        "한국어 텍스트입니다",
        "ไทยภาษา",
        "שָׁלוֹם עוֹלָם",
        "مَرْحَبًا بِالْعَالَمِ ١٢٣",
        "हिन्दी पाठ १२३४५",
        "\u{202e}abc\u{202c}",
        "Ελληνικά ΣΊΣΥΦΟΣ ς",
        "Кириллица ЁЖ",
        "ǈǋǲ ᾈᾙ",
    ] {
        texts.push(text.to_string());
    }
    let specials = DEFAULT_SPECIAL_TOKENS.join("");
    texts.push(specials.clone());
    texts.push(format!(
        "user text {specials} more<|endoftext|>\n<|im_start|>x"
    ));
    for special in DEFAULT_SPECIAL_TOKENS {
        texts.push(format!("a{special}b {special}\n"));
    }
    for text in [
        "<tool_call>>",
        "x<tool_call>y",
        "<tool_call><tool_call>>zqxjkv",
        "zqxjkvzqxjkv",
        "e<think>\u{301}",
        "<|fim_prefix|>\u{301}",
        "'<think>s",
        " <tool_call> ",
        "<tool_call",
    ] {
        texts.push(text.to_string());
    }
    texts.push("\u{fffd}replaced\u{fffd}\u{fffd} bytes".to_string());
    texts.push(String::new());
    texts
}

/// Every upper/lower case spelling of `word`.
fn case_variants(word: &str) -> Vec<String> {
    let mut variants = vec![String::new()];
    for c in word.chars() {
        let forms: Vec<String> = if c.is_ascii_alphabetic() {
            vec![
                c.to_ascii_lowercase().to_string(),
                c.to_ascii_uppercase().to_string(),
            ]
        } else {
            vec![c.to_string()]
        };
        variants = variants
            .iter()
            .flat_map(|v| forms.iter().map(move |f| format!("{v}{f}")))
            .collect();
    }
    variants
}

#[test]
fn adversarial_corpus_gives_identical_ids() {
    let corpus = adversarial_corpus();
    for variant in VARIANTS {
        let pair = encoders_for(&variant_json(variant));
        let ids = pair.check(&format!("{variant:?}"), &corpus);
        eprintln!("{variant:?}: {} texts, {ids} ids identical", corpus.len());
    }
}

/// Every code point of Unicode, in chunks, through the shipped tokenizer (NFC included; the
/// splitters alone are checked on every code point in `pretokenize`).
#[test]
fn every_code_point_gives_identical_ids() {
    let chars: Vec<char> = (0..0x11_0000u32).filter_map(char::from_u32).collect();
    let texts: Vec<String> = chars
        .chunks(2048)
        .map(|chunk| {
            chunk
                .iter()
                .enumerate()
                .map(|(i, c)| match i % 3 {
                    0 => format!("{c}"),
                    1 => format!(" {c}"),
                    _ => format!("'{c}a"),
                })
                .collect()
        })
        .collect();
    let pair = encoders_for(&variant_json(Variant::Shipped));
    let ids = pair.check("shipped", &texts);
    eprintln!("shipped: every code point, {ids} ids identical");
}

/// The texts of the cache's own life: the same words again and again, across two encoders on
/// one thread (each must see its own cache, not the other's).
#[test]
fn caches_do_not_leak_between_encoders() {
    let shipped = encoders_for(&variant_json(Variant::Shipped));
    let gpt2 = encoders_for(&variant_json(Variant::Gpt2));
    let texts: Vec<String> = (0..50)
        .map(|i| format!("the 123 numbers and words, again {i} and again 4567"))
        .collect();
    for _ in 0..3 {
        shipped.check("shipped", &texts);
        gpt2.check("gpt2", &texts);
    }
}

/// Atoms the random strings are built from, weighted towards the classes the splitters treat
/// specially.
fn atom() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zA-Z]{1,8}",
        2 => "[ \t\n\r]{1,4}",
        2 => "[0-9]{1,6}",
        2 => "'[sStTmMdDlLrReEvVſK]{0,2}",
        2 => "[!-/:-@\\[-`{-~]{1,3}",
        1 => "[\u{300}-\u{36f}]{1,3}",
        1 => "[\u{4e00}-\u{4e40}]{1,4}",
        1 => "[\u{5d0}-\u{5ea}\u{620}-\u{64a}]{1,4}",
        1 => "[\u{1f300}-\u{1f64f}\u{200d}\u{fe0f}]{1,3}",
        1 => "[\u{a0}\u{2000}-\u{200b}\u{2028}\u{3000}\u{85}]{1,2}",
        1 => "[ÀÉàéÅſßİı]{1,3}",
        1 => any::<char>().prop_map(String::from),
        1 => proptest::sample::select(&DEFAULT_SPECIAL_TOKENS[..]).prop_map(String::from),
        1 => proptest::sample::select(&["zqxjkv", "<tool_call>>", "\u{301}"][..])
            .prop_map(String::from),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(atom(), 0..24).prop_map(|atoms| atoms.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn random_texts_give_identical_ids(texts in prop::collection::vec(text(), 1..4)) {
        thread_local! {
            static PAIRS: Vec<Pair> = VARIANTS.iter().map(|&v| encoders_for(&variant_json(v))).collect();
        }
        PAIRS.with(|pairs| {
            for (variant, pair) in VARIANTS.iter().zip(pairs) {
                pair.check(&format!("{variant:?}"), &texts);
            }
        });
    }
}

#[test]
fn declined_tokenizers_fall_back_with_a_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut nfkc = shipped_json();
    nfkc["normalizer"] = json!({"type": "NFKC"});
    let path = dir.path().join("nfkc.json");
    std::fs::write(&path, nfkc.to_string()).expect("write");
    let encoder = Encoder::from_file_with(&path, "").expect("loads");
    assert_eq!(encoder.engine(), HF_ENGINE);
    assert_eq!(encoder.fallback_reason(), Some("normalizer NFKC"));
    let err = Encoder::from_file_with(&path, "fast")
        .err()
        .expect("fast refuses");
    assert_eq!(err.kind(), crate::ErrorKind::Tokenizer);
    assert!(err.to_string().contains("normalizer NFKC"), "{err}");
    assert!(err.to_string().contains("nfkc.json"), "{err}");

    let forced = Encoder::from_file_with(&shipped_path(), "hf").expect("loads");
    assert_eq!(forced.engine(), HF_ENGINE);
    assert_eq!(forced.fallback_reason(), Some("DATA_IO_ENCODER=hf"));
    let auto = Encoder::from_file_with(&shipped_path(), "auto").expect("loads");
    assert_eq!(auto.engine(), FAST_ENGINE);
    assert_eq!(auto.fallback_reason(), None);
    let err = Encoder::from_file_with(&shipped_path(), "tiktoken")
        .err()
        .expect("bad value");
    assert_eq!(err.kind(), crate::ErrorKind::Config);
    assert!(err.to_string().contains("DATA_IO_ENCODER"), "{err}");
}

/// Non-special added tokens are cut out of the text by `tokenizers` before normalization and
/// pre-tokenization even under `encode_special_tokens`: the fast path does the same for plain
/// ones (see `AddedTokens` in the corpus) and declines the normalized / stripping kinds.
#[test]
fn non_special_added_tokens() {
    let mut file = shipped_json();
    with_plain_added_tokens(&mut file);
    let next_id = file["model"]["vocab"].as_object().expect("vocab").len() as u32;
    let pair = encoders_for(&file);
    let ids = pair.hf.encode("say zqxjkv").expect("encodes");
    assert_eq!(
        ids.last(),
        Some(&next_id),
        "HF extracts the added token: {ids:?}"
    );
    pair.check("added", &["say zqxjkv<tool_call>>".to_string()]);

    file["added_tokens"]
        .as_array_mut()
        .expect("added tokens")
        .push(
            json!({"id": next_id + 2, "content": "Hello", "single_word": false,
                     "lstrip": false, "rstrip": true, "normalized": true, "special": false}),
        );
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, file.to_string()).expect("write");
    let auto = Encoder::from_file_with(&path, "").expect("loads");
    assert_eq!(auto.engine(), HF_ENGINE);
    assert_eq!(
        auto.fallback_reason(),
        Some("non-special added token \"Hello\" with normalized, rstrip")
    );
}

/// A vocabulary without some byte characters: `tokenizers` drops those bytes (no unk token),
/// and so must the fast path; with an unk token it is declined.
#[test]
fn bytes_missing_from_the_vocabulary() {
    let mut file = shipped_json();
    let vocab = file["model"]["vocab"].as_object_mut().expect("vocab");
    vocab.remove("Ã");
    // Merges that use the removed token must go too, or the file does not load.
    let merges: Vec<Value> = file["model"]["merges"]
        .as_array()
        .expect("merges")
        .iter()
        .filter(|pair| {
            let (a, b) = (
                pair[0].as_str().unwrap_or(""),
                pair[1].as_str().unwrap_or(""),
            );
            !a.contains('Ã') && !b.contains('Ã')
        })
        .cloned()
        .collect();
    file["model"]["merges"] = json!(merges);
    let vocab = file["model"]["vocab"].as_object_mut().expect("vocab");
    vocab.retain(|token, _| !token.contains('Ã'));
    let pair = encoders_for(&file);
    pair.check(
        "missing byte",
        &["Ãé ÃÃ Ã x Ã".to_string(), "é".to_string()],
    );

    file["model"]["unk_token"] = json!("<|PAD|>");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, file.to_string()).expect("write");
    let auto = Encoder::from_file_with(&path, "").expect("loads");
    assert_eq!(auto.engine(), HF_ENGINE);
    assert!(auto
        .fallback_reason()
        .is_some_and(|r| r.contains("unk_token")));
}

#[test]
fn encode_into_appends() {
    let pair = encoders_for(&variant_json(Variant::Shipped));
    let mut out = vec![7];
    pair.fast
        .encode_into("hello world", &mut out)
        .expect("encodes");
    pair.hf.encode_into(" again", &mut out).expect("encodes");
    let mut expected = vec![7];
    expected.extend(pair.hf.encode("hello world").expect("encodes"));
    expected.extend(pair.hf.encode(" again").expect("encodes"));
    assert_eq!(out, expected);
    let _ = QWEN_REGEX;
}

/// `encode_batch` (chunked, parallel) gives the same ids and offsets on both engines.
#[test]
fn batches_give_identical_ids_and_offsets() {
    let pair = encoders_for(&variant_json(Variant::AddedTokens));
    let corpus = adversarial_corpus();
    let fast = crate::encoder::encode_batch(&pair.fast, &corpus, Some(5)).expect("encodes");
    let hf = crate::encoder::encode_batch(&pair.hf, &corpus, Some(5)).expect("encodes");
    assert_eq!(fast, hf);
    assert_eq!(fast.offsets.len(), corpus.len() + 1);
}

/// A batch's texts encoded as one stream (`FastBpe::encode_texts`: a text's last group of
/// pieces waits while the next one is split, its close with it) give each text's own ids, then
/// the EOS, whatever its neighbours: every pair of edge texts side by side, then an empty text
/// or one of exactly sixteen pieces, with and without an EOS; and the empty batch.
#[test]
fn texts_encoded_as_one_stream_are_each_text_alone() {
    let edges: Vec<String> = vec![
        String::new(),
        " a".repeat(16),
        " b".repeat(32),
        "x".into(),
        "e\u{301} ".repeat(40), // NFC makes a copy of it, of more than two groups
        "zqxjkv".into(),        // a non-special added token alone
        format!("{}zqxjkv{}", " c".repeat(20), " d".repeat(3)),
        "<tool_call>".into(),
        "<tool_call>>".into(), // special: text
        format!("{}<think>", " e".repeat(16)),
    ];
    for variant in [Variant::AddedTokens, Variant::Shipped] {
        let pair = encoders_for(&variant_json(variant));
        let alone = |texts: &[&str], eos: Option<u32>| {
            let (mut ids, mut ends) = (Vec::new(), Vec::new());
            for text in texts {
                ids.extend(pair.hf.encode(text).expect("hf encodes"));
                ids.extend(eos);
                ends.push(ids.len());
            }
            (ids, ends)
        };
        let stream = |texts: &[&str], eos: Option<u32>| {
            let (mut ids, mut ends) = (Vec::new(), Vec::new());
            let mut each = texts.iter().copied();
            pair.fast
                .encode_texts_into(&mut each, eos, &mut ids, &mut ends)
                .expect("fast encodes");
            (ids, ends)
        };
        let sixteen = " z".repeat(16);
        for eos in [None, Some(u32::MAX - 1)] {
            assert_eq!(stream(&[], eos), (Vec::new(), Vec::new()));
            for a in &edges {
                for b in &edges {
                    for c in ["", sixteen.as_str()] {
                        let texts = [a.as_str(), b.as_str(), c, c];
                        assert_eq!(
                            stream(&texts, eos),
                            alone(&texts, eos),
                            "{variant:?} {texts:?}"
                        );
                    }
                }
            }
        }
    }
}

/// Threads that share one encoder, and so its cache of merged pieces (`shared_cache`), each
/// encode the corpus in their own order, three times: every text gives the oracle's ids, whether
/// its pieces were merged by this thread, found from another thread, or raced.
#[test]
fn threads_sharing_the_cache_give_identical_ids() {
    for variant in [
        Variant::Shipped,
        Variant::IgnoreMerges,
        Variant::AddedTokens,
    ] {
        let pair = encoders_for(&variant_json(variant));
        let corpus = adversarial_corpus();
        let expected: Vec<Vec<u32>> = corpus
            .iter()
            .map(|text| pair.hf.encode(text).expect("hf encodes"))
            .collect();
        std::thread::scope(|scope| {
            for thread in 0..4usize {
                let (pair, corpus, expected) = (&pair, &corpus, &expected);
                scope.spawn(move || {
                    for round in 0..3 {
                        for k in 0..corpus.len() {
                            let i = (k * 7919 + thread * 131 + round) % corpus.len();
                            let got = pair.fast.encode(&corpus[i]).expect("fast encodes");
                            assert_eq!(got, expected[i], "{variant:?} thread {thread}: text {i}");
                        }
                    }
                });
            }
        });
    }
}

/// Two encoders of one file on the node's tables (as two DataLoader workers would be): the
/// second maps the first one's file, each reads pieces the other merged, and every id still
/// equals the HF encoder's.
#[test]
fn encoders_sharing_node_tables_give_identical_ids() {
    for variant in VARIANTS {
        let json = variant_json(variant).to_string();
        let dir = tempfile::tempdir().expect("tempdir");
        let node = Tables::Node {
            dir: dir.path().to_path_buf(),
            key: blake3::hash(json.as_bytes()),
        };
        let path = dir.path().join("tokenizer.json");
        let load = || Encoder::from_json(&json, &path, "fast", &node).expect("fast encoder");
        let (first, second) = (load(), load());
        let hf = Encoder::from_json(&json, &path, "hf", &Tables::Process).expect("hf encoder");
        let place = first.tables().expect("fast").to_string();
        assert!(place.starts_with("node ("), "{variant:?}: {place}");
        assert_eq!(
            second.tables(),
            Some(place.as_str()),
            "{variant:?}: one file"
        );
        let corpus = adversarial_corpus();
        std::thread::scope(|scope| {
            for thread in 0..4usize {
                let (first, second, hf, corpus) = (&first, &second, &hf, &corpus);
                scope.spawn(move || {
                    for (k, text) in corpus.iter().enumerate() {
                        let encoder = if (k + thread) % 2 == 0 { first } else { second };
                        let expected = hf.encode(text).expect("hf encodes");
                        let got = encoder.encode(text).expect("fast encodes");
                        assert_eq!(got, expected, "{variant:?} thread {thread}: {text:?}");
                    }
                });
            }
        });
        drop((first, second));
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("folder")
            .filter_map(|entry| entry.ok())
            .filter(|entry| {
                entry
                    .file_name()
                    .to_string_lossy()
                    .starts_with("data_io-pieces-")
            })
            .collect();
        assert!(
            left.is_empty(),
            "{variant:?}: the last user removes the file"
        );
    }
}

/// Encoders loaded from the load cache (`fast_bpe::load_cache`) give the ids of one built
/// from the file: the first load writes the cache, the second reads it, and a damaged file is
/// built again and rewritten.
#[test]
fn encoders_from_the_load_cache_give_identical_ids() {
    let corpus = adversarial_corpus();
    for variant in VARIANTS {
        let json = variant_json(variant).to_string();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokenizer.json");
        let cache = dir.path().join("cache");
        let load = || {
            Encoder::from_json_cached(&json, &path, "fast", &Tables::Process, Some(&cache), None)
                .expect("fast encoder")
        };
        let hf = Encoder::from_json(&json, &path, "hf", &Tables::Process).expect("hf encoder");
        let built = load();
        let kept: Vec<_> = std::fs::read_dir(&cache)
            .expect("cache folder made")
            .map(|entry| entry.expect("entry").path())
            .collect();
        assert_eq!(kept.len(), 1, "{variant:?}: {kept:?}");
        let written = std::fs::read(&kept[0]).expect("kept");
        let said = |encoder: &Encoder| encoder.load_cache().expect("fast").to_string();
        assert_eq!(said(&built), format!("written {}", kept[0].display()));
        let read_back = load();
        assert_eq!(said(&read_back), format!("read {}", kept[0].display()));
        let mut damaged = written.clone();
        let last = damaged.len() - 1;
        damaged[last] ^= 0x40;
        std::fs::write(&kept[0], &damaged).expect("damaged");
        let rebuilt = load();
        assert_eq!(said(&rebuilt), format!("written {}", kept[0].display()));
        assert_eq!(
            std::fs::read(&kept[0]).expect("kept"),
            written,
            "{variant:?}"
        );
        for text in &corpus {
            let expected = hf.encode(text).expect("hf encodes");
            for (how, encoder) in [
                ("built", &built),
                ("read", &read_back),
                ("rebuilt", &rebuilt),
            ] {
                let got = encoder.encode(text).expect("fast encodes");
                assert_eq!(got, expected, "{variant:?} {how}: {text:?}");
            }
        }
    }
}
