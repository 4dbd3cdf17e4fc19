//! The `tokenizers` side of training: the tokenizer pipeline every trainer fills, the HF
//! trainers (the oracle of `merge`), and the files written beside the tokenizer.

use std::fs;
use std::path::Path;

use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::{BpeTrainerBuilder, Vocab, BPE};
use tokenizers::models::unigram::{Unigram, UnigramTrainerBuilder};
use tokenizers::models::{ModelWrapper, TrainerWrapper};
use tokenizers::normalizers::{unicode::NFC, NormalizerWrapper};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::processors::PostProcessorWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

use super::merge::Bpe;
use super::{TokenizerKind, TrainOptions, SPLIT_REGEX};
use crate::error::{Error, IoContext, Result};

/// The tokenizer every trainer fills: NFC, the split regex then ByteLevel, ByteLevel post-processor
/// and decoder, around an empty model of `kind`.
pub fn new_tokenizer(kind: TokenizerKind) -> Result<Tokenizer> {
    let model = match kind {
        TokenizerKind::Bpe => ModelWrapper::BPE(BPE::default()),
        TokenizerKind::Unigram => ModelWrapper::Unigram(Unigram::default()),
    };
    let mut tokenizer = Tokenizer::new(model);
    let split = Split::new(
        SplitPattern::Regex(SPLIT_REGEX.into()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(|e| Error::Tokenizer(format!("bad split regex: {e}")))?;
    // ByteLevel after the split: no prefix space, no regex of its own.
    let byte_level = ByteLevel::new(false, true, false);
    tokenizer
        .with_normalizer(Some(NormalizerWrapper::NFC(NFC)))
        .with_pre_tokenizer(Some(PreTokenizerWrapper::Sequence(Sequence::new(vec![
            PreTokenizerWrapper::Split(split),
            PreTokenizerWrapper::ByteLevel(byte_level),
        ]))))
        .with_post_processor(Some(PostProcessorWrapper::ByteLevel(byte_level)))
        .with_decoder(Some(DecoderWrapper::ByteLevel(byte_level)));
    Ok(tokenizer)
}

/// The `tokenizers` trainer with the options of `data_io train-tokenizer`.
pub fn new_trainer(options: &TrainOptions) -> Result<TrainerWrapper> {
    let specials: Vec<AddedToken> = options
        .special_tokens
        .iter()
        .map(|t| AddedToken::from(t.clone(), true))
        .collect();
    let alphabet = ByteLevel::alphabet();
    Ok(match options.kind {
        TokenizerKind::Bpe => TrainerWrapper::BpeTrainer(
            BpeTrainerBuilder::new()
                .vocab_size(options.vocab_size)
                .min_frequency(options.min_frequency)
                .special_tokens(specials)
                .initial_alphabet(alphabet.into_iter().collect())
                .show_progress(options.progress)
                .build(),
        ),
        TokenizerKind::Unigram => TrainerWrapper::UnigramTrainer(
            UnigramTrainerBuilder::default()
                .vocab_size(options.vocab_size as u32)
                .special_tokens(specials)
                .initial_alphabet(alphabet)
                .show_progress(options.progress)
                .build()
                .map_err(|e| Error::Config(format!("bad unigram trainer options: {e}")))?,
        ),
    })
}

/// The tokenizer of a model trained by `merge::train_bpe`: the pipeline of `new_tokenizer` and
/// the special tokens added as `Tokenizer::train` adds a trainer's, so that its file is the one
/// `tokenizers`' trainer would have written.
pub fn bpe_tokenizer(bpe: &Bpe, special_tokens: &[String]) -> Result<Tokenizer> {
    let vocab: Vocab = bpe
        .vocab
        .iter()
        .enumerate()
        .map(|(id, token)| (token.clone(), id as u32))
        .collect();
    let token = |id: u32| bpe.vocab[id as usize].clone();
    let merges = bpe
        .merge_list()
        .into_iter()
        .map(|(a, b)| (token(a), token(b)))
        .collect();
    let model = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| Error::Tokenizer(format!("cannot build the trained BPE model: {e}")))?;
    around_model(TokenizerKind::Bpe, ModelWrapper::BPE(model), special_tokens)
}

/// `new_tokenizer(kind)` around a trained `model`, with the special tokens added as
/// `Tokenizer::train` adds a trainer's.
pub fn around_model(
    kind: TokenizerKind,
    model: ModelWrapper,
    special_tokens: &[String],
) -> Result<Tokenizer> {
    let mut tokenizer = new_tokenizer(kind)?;
    tokenizer.with_model(model);
    let specials: Vec<AddedToken> = special_tokens
        .iter()
        .map(|t| AddedToken::from(t.clone(), true))
        .collect();
    tokenizer.add_special_tokens(&specials);
    Ok(tokenizer)
}

/// Write the tokenizer, and `config.json` and `tokenizer_config.json` (with `roles`) beside it,
/// each through a temporary name.
pub fn save(
    tokenizer: &Tokenizer,
    output: &Path,
    special_tokens: &[String],
    roles: &[(String, String)],
) -> Result<()> {
    let folder = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(folder).ctx("cannot create", folder)?;
    let tmp = output.with_extension(format!("json.tmp-{}", std::process::id()));
    tokenizer
        .save(&tmp, false)
        .map_err(|e| Error::Output(format!("cannot write {}: {e}", tmp.display())))?;
    fs::rename(&tmp, output).ctx("cannot rename into place", output)?;
    crate::fs::write_json_atomic(
        &folder.join("config.json"),
        &serde_json::json!({"model_type": "qwen3"}),
    )?;
    crate::fs::write_json_atomic(
        &folder.join("tokenizer_config.json"),
        &tokenizer_config(special_tokens, roles),
    )
}

/// The roles `--pad-token`, `--bos-token` and `--eos-token` choose a special token for.
pub const CHOSEN_ROLES: [&str; 3] = ["pad_token", "bos_token", "eos_token"];

/// The pipeline's tokens by role (formats.md §3 defaults), for `transformers`.
const ROLES: [(&str, &str); 4] = [
    ("pad_token", "<|PAD|>"),
    ("bos_token", "<|im_start|>"),
    ("eos_token", "<|box_end|>"),
    ("eoq_token", "<|im_end|>"),
];

/// What `transformers.AutoTokenizer` needs to agree with `data_io tokenize`. Without it, the
/// folder's `config.json` (qwen3) makes it a Qwen2 tokenizer with eos/pad `<|endoftext|>`,
/// and special-token strings inside text become control tokens. Roles whose token is not
/// among `special_tokens` are left out rather than pointing at a missing token; `roles` (one of
/// `CHOSEN_ROLES`, a special token) replace the defaults, in the one file written.
pub fn tokenizer_config(
    special_tokens: &[String],
    roles: &[(String, String)],
) -> serde_json::Value {
    let has = |token: &str| special_tokens.iter().any(|t| t == token);
    let mut config = serde_json::json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        // data_io encodes special-token strings inside text as text: data cannot inject a
        // control token. This makes transformers do the same.
        "split_special_tokens": true,
        "clean_up_tokenization_spaces": false,
        "add_bos_token": false,
        "add_eos_token": false,
    });
    let mut extra = serde_json::Map::new();
    for (role, token) in ROLES {
        if !has(token) {
            continue;
        }
        if role == "eoq_token" {
            // Not a role transformers knows: exposed as `tokenizer.eoq_token`.
            extra.insert(role.into(), token.into());
        } else {
            config[role] = token.into();
        }
    }
    for (role, token) in roles {
        config[role.as_str()] = token.as_str().into();
    }
    if !extra.is_empty() {
        config["extra_special_tokens"] = extra.into();
    }
    config
}
