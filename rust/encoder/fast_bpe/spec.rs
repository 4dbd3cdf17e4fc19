//! Which `tokenizer.json` shapes the fast encoder serves exactly, read from the file itself.
//! Anything not recognised is declined with a one-line reason, and the HF encoder runs instead.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::pretokenize::Pattern;
use super::vocab::repeated;
pub use super::vocab::{TokenIds, Vocab};

/// One merge's two tokens, borrowed from the file's text where no escape forces a copy.
pub type MergePair<'a> = (Cow<'a, str>, Cow<'a, str>);

/// A tokenizer the fast path reproduces id for id.
#[derive(Debug, Clone)]
pub struct Spec<'a> {
    pub pattern: Pattern,
    /// The normalizer is NFC (otherwise there is none).
    pub nfc: bool,
    /// A pre-token that is itself a vocabulary entry becomes that token without merging.
    pub ignore_merges: bool,
    /// The merges as the file writes them (a JSON array), read by `merge_pairs` only when the
    /// encoder's tables are built rather than found in the load cache (`load_cache`).
    pub merges_json: &'a str,
    /// `unk_token` or `byte_fallback` is set: exact only while no byte is missing from the
    /// vocabulary (then neither can trigger); the caller checks the alphabet.
    pub needs_full_alphabet: bool,
    /// The added tokens matched in the raw text before anything else, when some of them are
    /// not special (empty otherwise): every non-normalized added token, special or not, in file
    /// order, because a special match (skipped, left as text) can hide a non-special one.
    pub added: Vec<AddedToken>,
    /// The model's vocabulary (`model.vocab`).
    pub vocab: Vocab<'a>,
    /// Every added token's id, assigned as `tokenizers` assigns them on loading (see
    /// `added_token_ids`), so that no HF tokenizer has to be built to look them up.
    pub added_ids: HashMap<String, u32>,
}

impl Spec<'_> {
    /// The merges in rank order, as token strings: `[["a", "b"], ...]` or the legacy
    /// `["a b", ...]` (split on its one space). Borrowed from `merges_json` where no escape
    /// forces a copy (Qwen's 151k merges: no allocation each).
    pub fn merge_pairs(&self) -> Result<Vec<MergePair<'_>>, String> {
        let raw = self.merges_json;
        if let Ok(pairs) = serde_json::from_str::<Vec<PairJson<'_>>>(raw) {
            return Ok(pairs.into_iter().map(|PairJson(a, b)| (a, b)).collect());
        }
        let lines: Vec<LineJson<'_>> =
            serde_json::from_str(raw).map_err(|e| format!("unreadable merges: {e}"))?;
        lines
            .into_iter()
            .map(|LineJson(line)| {
                let split = |line: &str| match line.split_once(' ') {
                    Some((a, b)) if !b.contains(' ') => Some((a.len(), b.len())),
                    _ => None,
                };
                let Some((a, b)) = split(&line) else {
                    return Err(format!("merge {:?} is not two tokens", &*line));
                };
                Ok(match line {
                    Cow::Borrowed(line) => (line[..a].into(), line[a + 1..].into()),
                    Cow::Owned(line) => (
                        line[..a].to_string().into(),
                        line[line.len() - b..].to_string().into(),
                    ),
                })
            })
            .collect()
    }

    /// The id of `token` as `tokenizers`' `token_to_id`: an added token first, then the model's.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        (self.added_ids.get(token).copied()).or_else(|| self.vocab.get(token))
    }

    /// The size of the id space: `tokenizers`' `get_vocab_size(true)` (the distinct strings of
    /// the model's vocabulary and the added tokens), or one past the largest id where the ids
    /// leave gaps, so that every id is below it (the dtype and the id checks rely on that).
    pub fn vocab_size(&self) -> usize {
        let extra = self
            .added_ids
            .keys()
            .filter(|token| self.vocab.get(token).is_none())
            .count();
        let added_bound = (self.added_ids.values()).map(|&id| id as usize + 1).max();
        (self.vocab.len() + extra)
            .max(self.vocab.id_bound() as usize)
            .max(added_bound.unwrap_or(0))
    }

    /// The lookups an encoder keeps once its tables are built (`TokenIds`): the merges and
    /// the vocabulary's entries (borrowed from the file's text) are left behind.
    pub fn token_ids(&self) -> TokenIds {
        self.vocab
            .token_ids(self.added_ids.clone(), self.vocab_size())
    }
}

/// One added token of the raw-text match (see `Spec::added`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedToken {
    pub content: String,
    /// Special tokens are matched but left as text (`encode_special_tokens`).
    pub special: bool,
}

/// One merge of the `[["a", "b"], ...]` form.
#[derive(Deserialize)]
struct PairJson<'a>(#[serde(borrow)] Cow<'a, str>, #[serde(borrow)] Cow<'a, str>);

/// One merge of the legacy `["a b", ...]` form.
#[derive(Deserialize)]
struct LineJson<'a>(#[serde(borrow)] Cow<'a, str>);

#[derive(Deserialize)]
struct TokenizerJson<'a> {
    #[serde(default)]
    added_tokens: Vec<AddedTokenJson>,
    #[serde(default)]
    normalizer: Option<Value>,
    #[serde(default)]
    pre_tokenizer: Option<Value>,
    #[serde(default)]
    truncation: Option<Value>,
    #[serde(default)]
    padding: Option<Value>,
    #[serde(borrow)]
    model: ModelJson<'a>,
}

/// An added token's flags, with the defaults of `tokenizers`' `AddedToken`.
#[derive(Deserialize)]
struct AddedTokenJson {
    content: String,
    #[serde(default)]
    special: bool,
    #[serde(default = "yes")]
    normalized: bool,
    #[serde(default)]
    lstrip: bool,
    #[serde(default)]
    rstrip: bool,
    #[serde(default)]
    single_word: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct ModelJson<'a> {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    dropout: Option<f64>,
    #[serde(default)]
    unk_token: Option<String>,
    #[serde(default)]
    continuing_subword_prefix: Option<String>,
    #[serde(default)]
    end_of_word_suffix: Option<String>,
    #[serde(default)]
    byte_fallback: Option<bool>,
    #[serde(default)]
    ignore_merges: Option<bool>,
    #[serde(borrow)]
    merges: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "indexed_vocab")]
    vocab: Vocab<'a>,
}

/// A vocabulary token, borrowed from the file's text where it has no escape (Qwen's 151k
/// tokens were as many allocations to make and to free on every load).
#[derive(Deserialize)]
struct Token<'a>(#[serde(borrow)] Cow<'a, str>);

/// The vocabulary's entries in file order, indexed (`Vocab::from_file_order`: a
/// later entry of one token wins, as in a map filled in order).
fn indexed_vocab<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vocab<'de>, D::Error> {
    struct Entries;
    impl<'de> serde::de::Visitor<'de> for Entries {
        type Value = Vocab<'de>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of tokens to ids")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Vocab<'de>, A::Error> {
            let hint = map.size_hint().unwrap_or(0).min(1 << 20);
            let mut entries: Vec<(Cow<'de, str>, u32)> = Vec::with_capacity(hint);
            while let Some((Token(token), id)) = map.next_entry()? {
                entries.push((token, id));
            }
            Ok(Vocab::from_file_order(entries))
        }
    }
    deserializer.deserialize_map(Entries)
}

/// Read `json` (the text of a tokenizer.json) and decide whether it is served.
pub fn recognise(json: &str) -> Result<Spec<'_>, String> {
    let file: TokenizerJson<'_> =
        serde_json::from_str(json).map_err(|e| format!("unreadable tokenizer.json: {e}"))?;
    if file.truncation.is_some() {
        return Err("truncation is set".into());
    }
    if file.padding.is_some() {
        return Err("padding is set".into());
    }
    let nfc = normalizer_is_nfc(file.normalizer.as_ref())?;
    let added = raw_text_added_tokens(&file.added_tokens)?;
    let pattern = pre_tokenizer_pattern(file.pre_tokenizer.as_ref())?;
    let model = file.model;
    match model.kind.as_deref() {
        Some("BPE") => {}
        Some(other) => return Err(format!("a {other} model, not BPE")),
        None => return Err("model without a type".into()),
    }
    if model.dropout.is_some_and(|p| p != 0.0) {
        return Err("BPE dropout".into());
    }
    if model
        .continuing_subword_prefix
        .is_some_and(|p| !p.is_empty())
    {
        return Err("continuing_subword_prefix".into());
    }
    if model.end_of_word_suffix.is_some_and(|s| !s.is_empty()) {
        return Err("end_of_word_suffix".into());
    }
    let merges_json = model.merges.ok_or("BPE without merges")?.get();
    let added_ids = added_token_ids(&file.added_tokens, &model.vocab);
    // `tokenizers` also maps ids back to tokens (the vocabulary's reverse, the added tokens by
    // id) and, e.g., tells whether a matched added token is special by its id: with two tokens
    // on one id it follows whichever it stored last, and its ids differ from the fast path's
    // (found by fuzz/fuzz_targets/tokenizer_json.rs). Such files are left to it.
    if let Some(id) = model.vocab.repeated_id() {
        return Err(format!("two vocabulary entries have id {id}"));
    }
    if let Some(id) = repeated(added_ids.values().copied().collect()) {
        return Err(format!("two added tokens have id {id}"));
    }
    Ok(Spec {
        pattern,
        nfc,
        ignore_merges: model.ignore_merges.unwrap_or(false),
        merges_json,
        needs_full_alphabet: model.unk_token.is_some() || model.byte_fallback.unwrap_or(false),
        added,
        vocab: model.vocab,
        added_ids,
    })
}

/// The ids `tokenizers` gives the added tokens when it loads the file: it ignores their `id`
/// fields and adds them in file order, each taking its model id when it has one, else the next
/// id from the model's vocabulary size on (AddedVocabulary::add_tokens; a token listed twice
/// keeps its first id, and such files are declined anyway).
fn added_token_ids(tokens: &[AddedTokenJson], vocab: &Vocab) -> HashMap<String, u32> {
    let mut ids = HashMap::new();
    let mut next_id = vocab.len() as u32;
    for token in tokens {
        if token.content.is_empty() || ids.contains_key(&token.content) {
            continue;
        }
        let id = match vocab.get(&token.content) {
            Some(id) => id,
            None => {
                next_id += 1;
                next_id - 1
            }
        };
        ids.insert(token.content.clone(), id);
    }
    ids
}

/// Special added tokens are plain text under `encode_special_tokens`; non-special ones are cut
/// out of the raw text before normalization and pre-tokenization. The fast path does that for
/// the plain kind (not normalized, no lstrip/rstrip/single_word, as Qwen's `<tool_call>`) and
/// declines the others.
fn raw_text_added_tokens(tokens: &[AddedTokenJson]) -> Result<Vec<AddedToken>, String> {
    // Listed twice, a token's flags and matching follow `tokenizers`' bookkeeping of both
    // entries; such files are left to the HF encoder.
    let mut seen = HashSet::new();
    if let Some(token) = tokens.iter().find(|t| !seen.insert(t.content.as_str())) {
        return Err(format!("added token {:?} listed twice", token.content));
    }
    let plain = |t: &AddedTokenJson| !(t.normalized || t.lstrip || t.rstrip || t.single_word);
    if let Some(token) = tokens.iter().find(|t| !t.special && !plain(t)) {
        let flags: Vec<&str> = [
            (token.normalized, "normalized"),
            (token.lstrip, "lstrip"),
            (token.rstrip, "rstrip"),
            (token.single_word, "single_word"),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
        .collect();
        return Err(format!(
            "non-special added token {:?} with {}",
            token.content,
            flags.join(", ")
        ));
    }
    if tokens.iter().all(|t| t.special) {
        return Ok(Vec::new());
    }
    Ok(tokens
        .iter()
        .filter(|t| !t.normalized && !t.content.is_empty())
        .map(|t| AddedToken {
            content: t.content.clone(),
            special: t.special,
        })
        .collect())
}

fn type_of(value: &Value) -> &str {
    value
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("without a type")
}

fn normalizer_is_nfc(normalizer: Option<&Value>) -> Result<bool, String> {
    match normalizer {
        None | Some(Value::Null) => Ok(false),
        Some(n) if type_of(n) == "NFC" => Ok(true),
        Some(n) => Err(format!("normalizer {}", type_of(n))),
    }
}

fn flag(value: &Value, name: &str) -> Option<bool> {
    value.get(name).and_then(Value::as_bool)
}

/// `Sequence[Split(known regex, Isolated), ByteLevel(no prefix space, no regex)]`, or a bare
/// `ByteLevel(no prefix space)` with its built-in GPT-2 regex.
fn pre_tokenizer_pattern(pre: Option<&Value>) -> Result<Pattern, String> {
    let pre = match pre {
        None | Some(Value::Null) => return Err("no pre-tokenizer".into()),
        Some(pre) => pre,
    };
    match type_of(pre) {
        "ByteLevel" => {
            check_byte_level(pre)?;
            // `use_regex` defaults to true in `tokenizers`.
            if flag(pre, "use_regex").unwrap_or(true) {
                Ok(Pattern::Gpt2)
            } else {
                Err("ByteLevel alone without its regex".into())
            }
        }
        "Sequence" => {
            let steps = pre
                .get("pretokenizers")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let [split, byte_level] = steps else {
                return Err(format!(
                    "pre-tokenizer Sequence of {} steps, not Split + ByteLevel",
                    steps.len()
                ));
            };
            let pattern = split_pattern(split)?;
            if type_of(byte_level) != "ByteLevel" {
                return Err(format!(
                    "pre-tokenizer {} after Split, not ByteLevel",
                    type_of(byte_level)
                ));
            }
            check_byte_level(byte_level)?;
            if flag(byte_level, "use_regex").unwrap_or(true) {
                return Err("ByteLevel use_regex after Split".into());
            }
            Ok(pattern)
        }
        other => Err(format!("pre-tokenizer {other}")),
    }
}

fn check_byte_level(byte_level: &Value) -> Result<(), String> {
    // `add_prefix_space` has no serde default: a file without it does not load at all.
    if flag(byte_level, "add_prefix_space") != Some(false) {
        return Err("ByteLevel add_prefix_space".into());
    }
    Ok(())
}

fn split_pattern(split: &Value) -> Result<Pattern, String> {
    if type_of(split) != "Split" {
        return Err(format!("pre-tokenizer {} before ByteLevel", type_of(split)));
    }
    if split.get("behavior").and_then(Value::as_str) != Some("Isolated") {
        return Err("Split behavior is not Isolated".into());
    }
    if flag(split, "invert") != Some(false) {
        return Err("inverted Split".into());
    }
    let regex = split
        .get("pattern")
        .and_then(|p| p.get("Regex"))
        .and_then(Value::as_str)
        .ok_or("Split on a string, not a regex")?;
    Pattern::from_regex(regex).ok_or_else(|| "unknown split regex".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tokenizer(pre: Value, normalizer: Value, model_extra: Value) -> String {
        let mut model = json!({
            "type": "BPE", "dropout": null, "unk_token": null,
            "continuing_subword_prefix": null, "end_of_word_suffix": null,
            "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]
        });
        for (k, v) in model_extra.as_object().expect("object") {
            model[k] = v.clone();
        }
        json!({
            "version": "1.0", "truncation": null, "padding": null,
            "added_tokens": [{"id": 3, "content": "<|x|>", "special": true,
                              "single_word": false, "lstrip": false, "rstrip": false,
                              "normalized": false}],
            "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": null,
            "decoder": null, "model": model
        })
        .to_string()
    }

    fn split_then_byte_level(regex: &str) -> Value {
        json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}
        ]})
    }

    fn gpt2_byte_level() -> Value {
        json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})
    }

    #[test]
    fn served_shapes() {
        let qwen_json = tokenizer(
            split_then_byte_level(super::super::pretokenize::QWEN_REGEX),
            json!({"type": "NFC"}),
            json!({}),
        );
        let qwen = recognise(&qwen_json).expect("served");
        assert_eq!(qwen.pattern, Pattern::Qwen);
        assert!(qwen.nfc && !qwen.ignore_merges && !qwen.needs_full_alphabet);
        assert_eq!(qwen.merge_pairs(), Ok(vec![("a".into(), "b".into())]));

        let gpt2_json = tokenizer(
            gpt2_byte_level(),
            Value::Null,
            json!({"ignore_merges": true, "merges": ["a b"]}),
        );
        let gpt2 = recognise(&gpt2_json).expect("served");
        assert_eq!(gpt2.pattern, Pattern::Gpt2);
        assert!(!gpt2.nfc && gpt2.ignore_merges);
        assert_eq!(gpt2.merge_pairs(), Ok(vec![("a".into(), "b".into())]));

        let cl100k_json = tokenizer(
            split_then_byte_level(super::super::pretokenize::CL100K_REGEX),
            Value::Null,
            json!({"unk_token": "<unk>"}),
        );
        let cl100k = recognise(&cl100k_json).expect("served");
        assert_eq!(cl100k.pattern, Pattern::Cl100k);
        assert!(cl100k.needs_full_alphabet);
    }

    #[test]
    fn shipped_tokenizer_is_served() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/trained_tokenizers/bpe/tokenizer.json"
        );
        let json = std::fs::read_to_string(path).expect("shipped tokenizer");
        let spec = recognise(&json).expect("served");
        assert_eq!(spec.pattern, Pattern::Qwen);
        assert!(spec.nfc);
    }

    #[test]
    fn the_vocabulary_reads_as_a_map_filled_in_order() {
        fn read(json: &str) -> Result<Vocab<'_>, String> {
            indexed_vocab(&mut serde_json::Deserializer::from_str(json)).map_err(|e| e.to_string())
        }
        let vocab = read(r#"{"a": 1, "b": 2, "a": 3, "\u0063": 4}"#).expect("a map");
        let answers = ["a", "b", "c"].map(|token| vocab.get(token));
        assert_eq!((vocab.len(), answers), (3, [Some(3), Some(2), Some(4)]));
        assert!(read("{}").expect("empty").is_empty());
        assert!(read(r#"["a", 1]"#).is_err());
        assert!(read(r#"{"a": -1}"#).is_err());
    }

    /// The index an encoder keeps answers as the file says, for every token: the model's
    /// vocabulary read by `serde_json` as a map, the added tokens with their file ids (the
    /// shipped tokenizer assigns them in order, so those are the ids `tokenizers` gives them).
    #[test]
    fn token_ids_answer_as_the_file() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/trained_tokenizers/bpe/tokenizer.json"
        );
        let json = std::fs::read_to_string(path).expect("read");
        let file: Value = serde_json::from_str(&json).expect("json");
        let mut expected: HashMap<&str, u32> = (file["model"]["vocab"].as_object())
            .expect("vocab")
            .iter()
            .map(|(token, id)| (token.as_str(), id.as_u64().expect("id") as u32))
            .collect();
        let added_tokens = file["added_tokens"].as_array().expect("added");
        assert!(
            !added_tokens.is_empty(),
            "the shipped tokenizer has added tokens"
        );
        for added in added_tokens {
            let id = added["id"].as_u64().expect("id") as u32;
            expected.insert(added["content"].as_str().expect("content"), id);
        }
        let spec = recognise(&json).expect("served");
        let ids = spec.token_ids();
        assert_eq!(ids.vocab_size(), expected.len());
        for (token, id) in &expected {
            assert_eq!(ids.token_id(token), Some(*id), "{token:?}");
            assert_eq!(spec.token_id(token), Some(*id), "{token:?}");
        }
        for missing in ["", "no such token in it", "\u{10ffff}"] {
            assert_eq!(ids.token_id(missing), None, "{missing:?}");
        }
    }

    /// Tokens alike but for their last bytes, and tokens the file writes with escapes (the
    /// zero bytes: copied where the others are borrowed from the file's text), are each found.
    #[test]
    fn token_ids_find_tokens_alike_and_tokens_with_escapes() {
        let tokens = [
            "a",
            "a\u{0}",
            "a\u{0}\u{0}",
            "ab",
            "abcdefg",
            "abcdefg\u{0}",
            "abcdefgh",
            "abcdefgh\u{0}",
            "abcdefghi",
            "abcdefghh",
            "b",
            "\u{e9}t\u{e9}",
            "\u{ff}",
        ];
        let vocab: serde_json::Map<String, Value> = tokens
            .iter()
            .enumerate()
            .map(|(id, token)| (token.to_string(), json!(id)))
            .collect();
        let json = tokenizer(
            gpt2_byte_level(),
            Value::Null,
            json!({"vocab": vocab, "merges": []}),
        );
        let spec = recognise(&json).expect("served");
        let ids = spec.token_ids();
        for (id, token) in tokens.iter().enumerate() {
            assert_eq!(ids.token_id(token), Some(id as u32), "{token:?}");
        }
        for missing in ["abcdefgh\u{0}\u{0}", "abcdefg\u{1}", "", "c"] {
            assert_eq!(ids.token_id(missing), None, "{missing:?}");
        }
    }

    fn reason(pre: Value, normalizer: Value, model_extra: Value) -> String {
        recognise(&tokenizer(pre, normalizer, model_extra)).expect_err("declined")
    }

    #[test]
    fn declined_shapes_say_why() {
        let qwen = || split_then_byte_level(super::super::pretokenize::QWEN_REGEX);
        assert_eq!(
            reason(qwen(), json!({"type": "NFKC"}), json!({})),
            "normalizer NFKC"
        );
        assert_eq!(
            reason(
                qwen(),
                json!({"type": "Sequence", "normalizers": []}),
                json!({})
            ),
            "normalizer Sequence"
        );
        assert_eq!(
            reason(split_then_byte_level(r"\w+|\s+"), Value::Null, json!({})),
            "unknown split regex"
        );
        assert_eq!(
            reason(Value::Null, Value::Null, json!({})),
            "no pre-tokenizer"
        );
        assert_eq!(
            reason(json!({"type": "Whitespace"}), Value::Null, json!({})),
            "pre-tokenizer Whitespace"
        );
        assert_eq!(
            reason(
                json!({"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}),
                Value::Null,
                json!({})
            ),
            "ByteLevel add_prefix_space"
        );
        assert_eq!(
            reason(
                json!({"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}),
                Value::Null,
                json!({})
            ),
            "ByteLevel alone without its regex"
        );
        assert_eq!(
            reason(qwen(), Value::Null, json!({"dropout": 0.1})),
            "BPE dropout"
        );
        assert_eq!(
            reason(
                qwen(),
                Value::Null,
                json!({"continuing_subword_prefix": "##"})
            ),
            "continuing_subword_prefix"
        );
        assert_eq!(
            reason(qwen(), Value::Null, json!({"end_of_word_suffix": "</w>"})),
            "end_of_word_suffix"
        );
        assert_eq!(
            reason(qwen(), Value::Null, json!({"type": "WordPiece"})),
            "a WordPiece model, not BPE"
        );
        // The merges are read when the tables are built (`Spec::merge_pairs`).
        for (merges, why) in [
            (json!(["a b c"]), "merge \"a b c\" is not two tokens"),
            (json!(["ab"]), "merge \"ab\" is not two tokens"),
            (json!([1]), "unreadable merges"),
        ] {
            let json = tokenizer(qwen(), Value::Null, json!({ "merges": merges }));
            let error = recognise(&json)
                .expect("recognised")
                .merge_pairs()
                .expect_err("refused");
            assert!(error.starts_with(why), "{error}");
        }
        // Escaped tokens are read (copied, not borrowed), in both forms.
        for (merges, pairs) in [
            (json!(["a \"b"]), [("a", "\"b")]),
            (json!([["c\\", "d"]]), [("c\\", "d")]),
        ] {
            let json = tokenizer(qwen(), Value::Null, json!({ "merges": merges }));
            let spec = recognise(&json).expect("recognised");
            let read = spec.merge_pairs().expect("read");
            let read: Vec<(&str, &str)> = read.iter().map(|(a, b)| (&**a, &**b)).collect();
            assert_eq!(read, pairs);
        }
        let mut inverted = qwen();
        inverted["pretokenizers"][0]["invert"] = json!(true);
        assert_eq!(reason(inverted, Value::Null, json!({})), "inverted Split");
        let mut removed = qwen();
        removed["pretokenizers"][0]["behavior"] = json!("Removed");
        assert_eq!(
            reason(removed, Value::Null, json!({})),
            "Split behavior is not Isolated"
        );
        let mut string = qwen();
        string["pretokenizers"][0]["pattern"] = json!({"String": " "});
        assert_eq!(
            reason(string, Value::Null, json!({})),
            "Split on a string, not a regex"
        );
        let mut three = qwen();
        three["pretokenizers"]
            .as_array_mut()
            .expect("array")
            .push(json!({"type": "Digits"}));
        assert!(reason(three, Value::Null, json!({})).contains("Sequence of 3 steps"));
    }

    #[test]
    fn file_level_settings_are_declined() {
        let base = tokenizer(gpt2_byte_level(), Value::Null, json!({}));
        let with = |key: &str, value: Value| {
            let mut file: Value = serde_json::from_str(&base).expect("json");
            file[key] = value;
            recognise(&file.to_string()).expect_err("declined")
        };
        assert_eq!(
            with("truncation", json!({"max_length": 8})),
            "truncation is set"
        );
        assert_eq!(
            with("padding", json!({"strategy": "BatchLongest"})),
            "padding is set"
        );
        let reason = with(
            "added_tokens",
            json!([{"id": 3, "content": "hello", "special": false}]),
        );
        assert_eq!(reason, "non-special added token \"hello\" with normalized");
        let reason = with(
            "added_tokens",
            json!([{"id": 3, "content": "<x>", "special": false, "normalized": false,
                    "lstrip": true, "single_word": true}]),
        );
        assert_eq!(
            reason,
            "non-special added token \"<x>\" with lstrip, single_word"
        );
        assert!(recognise("{not json")
            .expect_err("bad")
            .starts_with("unreadable"));
    }

    #[test]
    fn tokens_sharing_an_id_are_declined() {
        // fuzz/regressions/tokenizer_json/duplicate_vocab_ids.json: `<|PAD|>` (special) and
        // `<|direct|>` (not special) both id 1; `tokenizers` looked the match of `<|PAD|>` up by
        // its id, found `<|direct|>`, and emitted id 1 where the fast path encoded text.
        let shared = json!({"vocab": {"a": 0, "b": 1, "ab": 2, "<|x|>": 1}});
        assert_eq!(
            reason_with(gpt2_byte_level(), shared, json!(null)),
            "two vocabulary entries have id 1"
        );
        // Ids with a hole: `<|x|>` is not in the vocabulary, so it gets the next id (4, the
        // vocabulary's size), which `<y>`, another added token, already has.
        let holed = json!({"vocab": {"a": 0, "b": 1, "ab": 2, "<y>": 4}});
        let added = json!([
            {"content": "<|x|>", "special": true, "normalized": false},
            {"content": "<y>", "special": false, "normalized": false}
        ]);
        assert_eq!(
            reason_with(gpt2_byte_level(), holed, added),
            "two added tokens have id 4"
        );
    }

    /// `recognise`'s reason for the tokenizer of `tokenizer()` with `model_extra` and, unless
    /// null, these added tokens.
    fn reason_with(pre: Value, model_extra: Value, added: Value) -> String {
        let mut file: Value =
            serde_json::from_str(&tokenizer(pre, Value::Null, model_extra)).expect("json");
        if !added.is_null() {
            file["added_tokens"] = added;
        }
        recognise(&file.to_string()).expect_err("declined")
    }
}
