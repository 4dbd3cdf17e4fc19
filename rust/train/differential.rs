//! Our trainer against `tokenizers`' `BpeTrainer`, on the same texts with the settings of
//! `data_io train-tokenizer`: the counting pass gives the words the HF pre-tokenizer gives, and
//! the merge pass the same `tokenizer.json`, byte for byte, for any number of threads.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{
    NormalizedString, Normalizer, OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer,
    Tokenizer,
};

use super::hf::{bpe_tokenizer, new_tokenizer, new_trainer, save};
use super::merge::{train_bpe, BpeOptions};
use super::words::{count_words, WordCounts};
use super::{TokenizerKind, TrainOptions, DEFAULT_SPECIAL_TOKENS};
use crate::encoder::fast_bpe::Pattern;
use crate::progress::ByteProgress;
use crate::reader::{task_files, OnError, RowReader, DEFAULT_BATCH_ROWS};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Options of a BPE run on texts in memory (no inputs, no limits), for the tests here and in
/// `mod.rs`.
pub(super) fn options(
    vocab_size: usize,
    min_frequency: u64,
    special_tokens: &[String],
) -> TrainOptions {
    TrainOptions {
        inputs: vec![],
        output: PathBuf::new(),
        kind: TokenizerKind::Bpe,
        vocab_size,
        seed: 0,
        prefix_limits: vec![],
        truncate_len: usize::MAX,
        limit_mul_factor: 1,
        special_tokens: special_tokens.to_vec(),
        roles: vec![],
        min_frequency,
        on_error: OnError::Fail,
        threads: None,
        progress: false,
        count_memory: None,
        counts_dir: None,
        count_parts: vec![],
    }
}

/// The tokenizer `data_io train-tokenizer --trainer hf` makes.
fn hf_tokenizer(
    texts: &[String],
    vocab_size: usize,
    min_frequency: u64,
    specials: &[String],
) -> Tokenizer {
    let options = options(vocab_size, min_frequency, specials);
    let mut tokenizer = new_tokenizer(TokenizerKind::Bpe).expect("tokenizer");
    let mut trainer = new_trainer(&options).expect("trainer");
    tokenizer
        .train(&mut trainer, texts.iter())
        .expect("HF training");
    tokenizer
}

fn hf_json(texts: &[String], vocab_size: usize, min_frequency: u64, specials: &[String]) -> String {
    let tokenizer = hf_tokenizer(texts, vocab_size, min_frequency, specials);
    tokenizer.to_string(false).expect("json")
}

/// Ours on `threads` threads.
fn our_tokenizer(
    texts: &[String],
    vocab_size: usize,
    min_frequency: u64,
    specials: &[String],
    threads: usize,
) -> Tokenizer {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    pool.install(|| {
        let words = count_words(texts, Pattern::Qwen, true);
        let bpe = train_bpe(
            words,
            &BpeOptions {
                vocab_size,
                min_frequency,
                special_tokens: specials.to_vec(),
                initial_alphabet: ByteLevel::alphabet().into_iter().collect(),
            },
        )
        .expect("our training");
        bpe_tokenizer(&bpe, specials).expect("tokenizer")
    })
}

fn our_json(
    texts: &[String],
    vocab_size: usize,
    min_frequency: u64,
    specials: &[String],
    threads: usize,
) -> String {
    let tokenizer = our_tokenizer(texts, vocab_size, min_frequency, specials, threads);
    tokenizer.to_string(false).expect("json")
}

/// Where two tokenizer files first differ, told by vocab and merges.
fn difference(ours: &str, theirs: &str) -> String {
    let parse = |s: &str| serde_json::from_str::<serde_json::Value>(s).expect("json");
    let (a, b) = (parse(ours), parse(theirs));
    let merges =
        |v: &serde_json::Value| v["model"]["merges"].as_array().cloned().unwrap_or_default();
    let (ma, mb) = (merges(&a), merges(&b));
    let first = ma.iter().zip(&mb).position(|(x, y)| x != y);
    format!(
        "vocab {} vs {}, merges {} vs {}, first different merge {:?}: ours {:?} theirs {:?}",
        a["model"]["vocab"].as_object().map_or(0, |v| v.len()),
        b["model"]["vocab"].as_object().map_or(0, |v| v.len()),
        ma.len(),
        mb.len(),
        first,
        first.map(|i| &ma[i]),
        first.map(|i| &mb[i]),
    )
}

/// Ours at 1 and 4 threads against HF's.
fn assert_same(
    name: &str,
    texts: &[String],
    vocab_size: usize,
    min_frequency: u64,
    specials: &[String],
) {
    let theirs = hf_json(texts, vocab_size, min_frequency, specials);
    let ours = our_json(texts, vocab_size, min_frequency, specials, 1);
    assert!(
        ours == theirs,
        "{name} (vocab {vocab_size}, min_frequency {min_frequency}, {} specials): {}",
        specials.len(),
        difference(&ours, &theirs)
    );
    let four = our_json(texts, vocab_size, min_frequency, specials, 4);
    assert!(four == ours, "{name}: 4 threads differ from 1");
}

/// The words HF's normaliser and pre-tokenizer make of `texts`, counted.
fn hf_words(texts: &[String]) -> HashMap<String, u64> {
    let tokenizer: Tokenizer = new_tokenizer(TokenizerKind::Bpe).expect("tokenizer");
    let normalizer = tokenizer.get_normalizer().expect("normalizer");
    let pre_tokenizer = tokenizer.get_pre_tokenizer().expect("pre-tokenizer");
    let mut counts = HashMap::new();
    for text in texts {
        let mut normalized = NormalizedString::from(text.as_str());
        normalizer.normalize(&mut normalized).expect("nfc");
        let mut pre = PreTokenizedString::from(normalized);
        pre_tokenizer.pre_tokenize(&mut pre).expect("split");
        for (word, _, _) in pre.get_splits(OffsetReferential::Original, OffsetType::Byte) {
            *counts.entry(word.to_string()).or_default() += 1;
        }
    }
    counts
}

fn as_map(words: &WordCounts) -> HashMap<String, u64> {
    words.iter().map(|(w, c)| (w.to_string(), c)).collect()
}

// ---- corpora ----

/// The instruction and response of every row under `folder`.
fn row_texts(folder: &Path) -> Vec<String> {
    let mut texts = Vec::new();
    let files = task_files(&[folder.to_path_buf()]).expect("rows");
    for (_, path) in files.tasks {
        let reader =
            RowReader::open(&path, DEFAULT_BATCH_ROWS, ByteProgress::none()).expect("open");
        for batch in reader {
            let batch = batch.expect("batch");
            for i in 0..batch.len() {
                let row = batch.row(i).expect("row");
                texts.push(row.instruction.to_string());
                texts.push(row.response.to_string());
            }
        }
    }
    texts
}

/// Every file under `folder` with extension `ext`, one text per paragraph.
fn file_texts(folder: &Path, ext: &str) -> Vec<String> {
    let mut paths: Vec<PathBuf> = walkdir::WalkDir::new(folder)
        .into_iter()
        .filter_map(|e| e.ok())
        .map(|e| e.into_path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    paths.sort();
    paths
        .iter()
        .flat_map(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            text.split("\n\n").map(str::to_string).collect::<Vec<_>>()
        })
        .filter(|t| !t.is_empty())
        .collect()
}

fn prose() -> Vec<String> {
    let mut texts = file_texts(&repo().join("docs"), "md");
    texts.extend(file_texts(&repo(), "md").into_iter().take(200));
    texts.extend(row_texts(&repo().join("data_io/example_data/rows")));
    texts
}

fn code() -> Vec<String> {
    let mut texts = file_texts(&repo().join("rust/encoder"), "rs");
    texts.extend(file_texts(&repo().join("data_io/scale"), "py"));
    texts
}

/// Random words of `parts`, sentences of them with `sep` between and `end` after.
fn generated(seed: u64, parts: &[&str], sep: &str, end: &str, texts: usize) -> Vec<String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..texts)
        .map(|_| {
            let mut text = String::new();
            for _ in 0..rng.random_range(1..40) {
                for _ in 0..rng.random_range(1..5) {
                    text.push_str(parts[rng.random_range(0..parts.len())]);
                }
                text.push_str(if rng.random_bool(0.1) { end } else { sep });
            }
            text
        })
        .collect()
}

fn cjk() -> Vec<String> {
    let parts = [
        "的",
        "一",
        "是",
        "在",
        "不",
        "了",
        "有",
        "人",
        "这",
        "中",
        "大",
        "为",
        "上",
        "个",
        "国",
        "日本",
        "語",
        "の",
        "テキスト",
        "です",
        "한국어",
        "텍스트",
        "입니다",
        "文本",
        "测试",
    ];
    generated(1, &parts, "", "。\n", 600)
}

fn mixed_scripts() -> Vec<String> {
    let parts = [
        "при",
        "вет",
        "мир",
        "ски",
        "مرح",
        "با",
        "عال",
        "م",
        "של",
        "ום",
        "नम",
        "स्ते",
        "καλ",
        "ημέ",
        "ρα",
        "straße",
        "café",
        "naïve",
        "e\u{301}",
        "A\u{30a}",
        "ﬁ",
        "Ⅻ",
        "½",
        "١٢",
        "ß",
        "İ",
        "ŉ",
    ];
    generated(2, &parts, " ", ".\n", 800)
}

fn emoji() -> Vec<String> {
    let parts = [
        "👨\u{200d}👩\u{200d}👧",
        "👍🏽",
        "🇫🇷",
        "🏳\u{fe0f}\u{200d}🌈",
        "❤\u{fe0f}",
        "😀",
        "🙂",
        "ok",
        "yes",
        "🧑\u{200d}💻",
        "🎉🎉",
        "\u{200d}",
    ];
    generated(3, &parts, " ", "!\n", 800)
}

/// Runs no split point cuts: long letters, punctuation, spaces, digits (each its own piece).
fn long_runs() -> Vec<String> {
    let mut texts = generated(4, &["ab", "ba", "aab", "c"], "", "\n", 200);
    texts.push("x".repeat(5000));
    texts.push("=".repeat(3000));
    texts.push(" ".repeat(2000) + "end");
    texts.push("0123456789".repeat(300));
    texts.push("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo".repeat(100));
    texts
}

fn digits() -> Vec<String> {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    (0..2000)
        .map(|_| {
            let a: u64 = rng.random_range(0..1_000_000);
            let b: u32 = rng.random_range(0..999);
            format!(
                "{a} + {b} = {}, {a}.{b}% of ١٢٣ at 12:{:02}\n",
                a + u64::from(b),
                b % 60
            )
        })
        .collect()
}

fn specials() -> Vec<String> {
    DEFAULT_SPECIAL_TOKENS
        .iter()
        .map(|s| s.to_string())
        .collect()
}

// ---- tests ----

#[test]
fn counting_gives_the_words_of_the_hf_pre_tokenizer() {
    let mut texts = prose();
    for more in [
        code(),
        cjk(),
        mixed_scripts(),
        emoji(),
        long_runs(),
        digits(),
    ] {
        texts.extend(more);
    }
    texts.push("<|endoftext|> it's 'S 'll\r\n\r\n  \t\u{3000}x \u{85}".into());
    texts.push(String::new());
    let theirs = hf_words(&texts);
    for threads in [1, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        let ours = pool.install(|| count_words(&texts, Pattern::Qwen, true));
        assert!(ours.iter().map(|w| w.0).is_sorted());
        assert_eq!(as_map(&ours), theirs, "{threads} threads");
    }
}

/// The three files `hf::save` writes, from both trainers, byte for byte.
#[test]
fn the_files_written_are_the_same() {
    let texts = prose();
    let folder = tempfile::tempdir().expect("temporary folder");
    let written = |name: &str, tokenizer: Tokenizer| {
        let output = folder.path().join(name).join("tokenizer.json");
        save(&tokenizer, &output, &specials(), &[]).expect("saved");
        ["tokenizer.json", "config.json", "tokenizer_config.json"]
            .map(|file| std::fs::read(output.with_file_name(file)).expect("read"))
    };
    let theirs = written("hf", hf_tokenizer(&texts, 2000, 2, &specials()));
    let ours = written("ours", our_tokenizer(&texts, 2000, 2, &specials(), 2));
    assert!(ours == theirs, "the files differ");
}

#[test]
fn prose_at_several_sizes_and_frequencies() {
    let texts = prose();
    assert_same("prose", &texts, 300, 2, &[]);
    assert_same("prose", &texts, 1000, 1, &specials());
    assert_same("prose", &texts, 4000, 2, &[]);
    assert_same("prose", &texts, 3000, 5, &specials());
}

#[test]
fn code_at_two_sizes() {
    assert_same("code", &code(), 2500, 1, &[]);
    assert_same("code", &code(), 1200, 5, &specials());
}

#[test]
fn other_scripts_emoji_long_runs_and_digits() {
    assert_same("cjk", &cjk(), 1500, 2, &specials());
    assert_same("mixed scripts", &mixed_scripts(), 1500, 1, &[]);
    assert_same("emoji", &emoji(), 800, 2, &[]);
    assert_same("long runs", &long_runs(), 600, 1, &[]);
    assert_same("digits", &digits(), 400, 5, &specials());
    let mut all = Vec::new();
    for more in [cjk(), mixed_scripts(), emoji(), long_runs(), digits()] {
        all.extend(more);
    }
    assert_same("all generated", &all, 3000, 2, &specials());
}

/// A special token that merges also make (here ByteLevel strings of words) keeps its id: the
/// merge adds no token, and training goes on one merge longer.
#[test]
fn special_tokens_that_merges_make_again() {
    let specials: Vec<String> = [
        "ing",
        "\u{120}the",
        "\u{120}\u{120}",
        "<|endoftext|>",
        "ing",
    ]
    .map(str::to_string)
    .to_vec();
    assert_same("prose", &prose(), 1500, 2, &specials);
}

#[test]
fn too_small_a_vocabulary_gives_specials_and_alphabet() {
    let texts = prose();
    assert_same("tiny", &texts, 10, 1, &specials());
    assert_same("no text", &[], 1000, 1, &specials());
}

/// Texts of a few characters (many ties), or of more with spaces, digits and newlines.
fn small_corpus() -> impl Strategy<Value = Vec<String>> {
    let text = prop_oneof!["[ab]{0,60}", "[abc ]{0,50}", "[abcé 1.\n']{0,40}"];
    proptest::collection::vec(text, 1..30)
}

/// No special tokens, the project's, or ones that merges make too (`Ġ` is ByteLevel's space).
fn some_specials() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![
        Just(vec![]),
        Just(specials()),
        Just(["ab", "\u{120}a", "aa", "ab"].map(String::from).to_vec()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 250, ..ProptestConfig::default() })]

    /// Random small corpora: ours (1 and 4 threads) and HF's give the same file.
    #[test]
    fn random_small_corpora(
        texts in small_corpus(),
        vocab_size in 250usize..400,
        min_frequency in 0u64..4,
        specials in some_specials(),
    ) {
        assert_same("random corpus", &texts, vocab_size, min_frequency, &specials);
    }
}

/// By hand: `TRAIN_DIFF_FILES=a.jsonl,b.jsonl cargo test --release big_corpus -- --ignored`.
#[test]
#[ignore = "by hand: trains on the files TRAIN_DIFF_FILES names (tens of MB, minutes)"]
fn big_corpus() {
    let files = std::env::var("TRAIN_DIFF_FILES").unwrap_or_default();
    let vocab_size =
        std::env::var("TRAIN_DIFF_VOCAB").map_or(32_768, |v| v.parse().unwrap_or(32_768));
    let mut texts = Vec::new();
    for file in files.split(',').filter(|f| !f.is_empty()) {
        texts.extend(row_texts(Path::new(file)));
    }
    let started = std::time::Instant::now();
    let theirs = hf_json(&texts, vocab_size, 2, &specials());
    eprintln!("HF: {:.1}s", started.elapsed().as_secs_f64());
    let started = std::time::Instant::now();
    let ours = our_json(&texts, vocab_size, 2, &specials(), 2);
    eprintln!("ours: {:.1}s", started.elapsed().as_secs_f64());
    assert!(ours == theirs, "{}", difference(&ours, &theirs));
}

/// The rows of the comma-separated files in `TRAIN_SPEED_FILES`, and the vocabulary size in
/// `TRAIN_SPEED_VOCAB` (32,768 if unset).
fn speed_inputs() -> (Vec<String>, usize) {
    let files = std::env::var("TRAIN_SPEED_FILES").unwrap_or_default();
    let vocab_size =
        std::env::var("TRAIN_SPEED_VOCAB").map_or(32_768, |v| v.parse().unwrap_or(32_768));
    let mut texts = Vec::new();
    for file in files.split(',').filter(|f| !f.is_empty()) {
        texts.extend(row_texts(Path::new(file)));
    }
    texts.shrink_to_fit();
    let bytes: usize = texts.iter().map(String::len).sum();
    eprintln!(
        "{} texts, {:.1} MB; {}",
        texts.len(),
        bytes as f64 / 1e6,
        memory()
    );
    (texts, vocab_size)
}

/// The process's resident memory now and at its peak (Linux), for the speed tests.
fn memory() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .filter(|l| l.starts_with("VmRSS") || l.starts_with("VmHWM"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(", ")
}

/// By hand, one trainer per process so that peak RSS is its own (threads: RAYON_NUM_THREADS):
/// `TRAIN_SPEED_FILES=a.jsonl,b.jsonl /usr/bin/time -v TEST_BINARY --ignored --exact
/// train::differential::speed_ours --nocapture` (and `speed_hf`).
#[test]
#[ignore = "by hand: a measurement of speed and peak RSS on TRAIN_SPEED_FILES"]
fn speed_ours() {
    let (texts, vocab_size) = speed_inputs();
    let started = std::time::Instant::now();
    let counter = super::words::WordCounter::new(Pattern::Qwen, true);
    counter.add_texts(&texts);
    eprintln!("tables {} bytes: {}", counter.memory_bytes(), memory());
    let words = counter.finish();
    let counted = started.elapsed().as_secs_f64();
    let distinct = words.len();
    eprintln!("counted: {}", memory());
    let bpe = train_bpe(
        words,
        &BpeOptions {
            vocab_size,
            min_frequency: 2,
            special_tokens: specials(),
            initial_alphabet: ByteLevel::alphabet().into_iter().collect(),
        },
    )
    .expect("training");
    let merged = started.elapsed().as_secs_f64() - counted;
    eprintln!("merged: {}", memory());
    let json = bpe_tokenizer(&bpe, &specials())
        .expect("tokenizer")
        .to_string(false);
    eprintln!(
        "ours, {} threads: count {counted:.2}s ({} distinct words), merge {merged:.2}s \
         ({} merges), total {:.2}s, json {} bytes; {}",
        rayon::current_num_threads(),
        distinct,
        bpe.merges.len(),
        started.elapsed().as_secs_f64(),
        json.map_or(0, |j| j.len()),
        memory()
    );
}

#[test]
#[ignore = "by hand: a measurement of speed and peak RSS on TRAIN_SPEED_FILES"]
fn speed_hf() {
    let (texts, vocab_size) = speed_inputs();
    let started = std::time::Instant::now();
    let json = hf_json(&texts, vocab_size, 2, &specials());
    eprintln!(
        "HF, {} threads: total {:.2}s, json {} bytes; {}",
        rayon::current_num_threads(),
        started.elapsed().as_secs_f64(),
        json.len(),
        memory()
    );
}
