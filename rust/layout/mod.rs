//! The tokenized folder (formats.md §3): how a row becomes tokens, and a task folder's arrays
//! and record.
//!
//! - `mod.rs`: the row layout (below): `LayoutTokens`, `Specials`, `encode_rows` (a run of
//!   `RowFields`, one stream of texts for the encoder) and `encode_row`, `RowLens`.
//! - `task_writer.rs`: a task folder's arrays, streamed to disk (`TaskWriter`, `TokenDtype`).
//! - `npy.rs`: the streaming `.npy` writer whose bytes equal the original tool's.
//! - `cache.rs`: a task folder's record (`metadata.json`), the decision whether its source must
//!   be tokenized again, and the `.npy` header reader that checks its arrays.
//!
//! The row layout of formats.md §3:
//!
//! ```text
//! instruction = [BOQ] + [id(tag) for tag in condition.split(",")] + encode(instruction) + [EOQ]
//! response    = encode(response) + [EOA]
//! ```

pub mod cache;
pub mod npy;
pub mod task_writer;

use serde::Serialize;

use crate::encoder::TextEncoder;
use crate::error::{Error, Result};

/// The special-token strings of the layout, as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayoutTokens {
    pub boq: String,
    pub eoq: String,
    pub eoa: String,
    /// (tag, token) pairs; the order is kept in outputs and fingerprints.
    pub conditions: Vec<(String, String)>,
}

impl Default for LayoutTokens {
    fn default() -> Self {
        LayoutTokens {
            boq: "<|im_start|>".into(),
            eoq: "<|im_end|>".into(),
            eoa: "<|box_end|>".into(),
            conditions: [
                ("direct", "<|object_ref_start|>"),
                ("cot", "<|object_ref_end|>"),
                ("noisy", "<|quad_start|>"),
                ("synth", "<|quad_end|>"),
            ]
            .iter()
            .map(|(t, k)| (t.to_string(), k.to_string()))
            .collect(),
        }
    }
}

/// One layout token as the command line gave it: its option, string, id and default.
struct Role<'a> {
    option: String,
    token: &'a str,
    id: u32,
    default: Option<&'a str>,
}

impl<'a> Role<'a> {
    fn new(option: String, token: &'a str, id: u32, default: Option<&'a String>) -> Self {
        let default = default.map(String::as_str);
        Role {
            option,
            token,
            id,
            default,
        }
    }
}

/// A layout token must be one no text encodes to (data never injects a control token): a
/// plain vocabulary token such as `a`, or an added token not marked special, is what the text
/// "a" becomes, so a row's own text could stand for the condition or the boundary.
fn check_text_cannot_spell(encoder: &dyn TextEncoder, roles: &[Role<'_>]) -> Result<()> {
    let mut ids = Vec::new();
    for role in roles {
        ids.clear();
        if encoder.encode_into(role.token, &mut ids).is_ok() && ids == [role.id] {
            let instead = match role.default {
                Some(default) => format!(", such as this option's default {default}"),
                None => String::new(),
            };
            return Err(Error::Config(format!(
                "{}: the token {:?} (id {}) is one that text encodes to: the text {:?} in a \
                 row gives that id too, so data could stand for the control token; pass a \
                 token the tokenizer marks special (an added token with \"special\": true){instead}",
                role.option, role.token, role.id, role.token
            )));
        }
    }
    Ok(())
}

/// The layout's tokens resolved to ids of one tokenizer.
#[derive(Debug, Clone)]
pub struct Specials {
    pub boq: u32,
    pub eoq: u32,
    pub eoa: u32,
    pub conditions: Vec<(String, u32)>,
}

impl Specials {
    /// Resolve every token up front: a tokenizer that lacks one is rejected before any file
    /// is read.
    pub fn resolve(encoder: &dyn TextEncoder, tokens: &LayoutTokens) -> Result<Specials> {
        let mut missing = Vec::new();
        let mut id = |token: &str, option: String| {
            encoder.token_id(token).unwrap_or_else(|| {
                missing.push(format!("{token:?} ({option})"));
                0
            })
        };
        let boq = id(&tokens.boq, "--boq".into());
        let eoq = id(&tokens.eoq, "--eoq".into());
        let eoa = id(&tokens.eoa, "--eoa".into());
        let conditions: Vec<(String, u32)> = tokens
            .conditions
            .iter()
            .map(|(tag, token)| (tag.clone(), id(token, format!("--conditions {tag}=..."))))
            .collect();
        if !missing.is_empty() {
            return Err(Error::Tokenizer(format!(
                "the tokenizer has no token for {}; train it with these special tokens or pass \
                 tokens it has",
                missing.join(", ")
            )));
        }
        let defaults = LayoutTokens::default();
        let mut roles = vec![
            Role::new("--boq".into(), &tokens.boq, boq, Some(&defaults.boq)),
            Role::new("--eoq".into(), &tokens.eoq, eoq, Some(&defaults.eoq)),
            Role::new("--eoa".into(), &tokens.eoa, eoa, Some(&defaults.eoa)),
        ];
        for ((tag, token), (_, id)) in tokens.conditions.iter().zip(&conditions) {
            let default = defaults.conditions.iter().find(|(t, _)| t == tag);
            let option = format!("--conditions {tag}=...");
            roles.push(Role::new(option, token, *id, default.map(|(_, k)| k)));
        }
        check_text_cannot_spell(encoder, &roles)?;
        for (i, (tag, _)) in tokens.conditions.iter().enumerate() {
            if tag.is_empty() || tag.contains(',') {
                return Err(Error::Config(format!(
                    "condition tag {tag:?} is invalid: tags are non-empty and contain no comma"
                )));
            }
            if tokens.conditions[..i].iter().any(|(t, _)| t == tag) {
                return Err(Error::Config(format!(
                    "condition tag {tag:?} is given twice"
                )));
            }
        }
        Ok(Specials {
            boq,
            eoq,
            eoa,
            conditions,
        })
    }

    fn condition_id(&self, tag: &str) -> Option<u32> {
        self.conditions
            .iter()
            .find_map(|(t, id)| (t == tag).then_some(*id))
    }

    fn known_tags(&self) -> String {
        let tags: Vec<_> = self.conditions.iter().map(|(t, _)| t.as_str()).collect();
        tags.join(", ")
    }
}

/// Where one row's tokens lie in a run of encoded rows: its instruction part, then its
/// response part, back to back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowLens {
    pub inst_len: usize,
    pub resp_len: usize,
}

/// One row's three fields, as the layout reads them.
#[derive(Clone, Copy)]
pub struct RowFields<'r> {
    pub condition: &'r str,
    pub instruction: &'r str,
    pub response: &'r str,
}

/// Encode one row onto the end of `tokens`, the buffer of a run of rows (no vector of its
/// own, no copy); on error `tokens` is left as it was. The error is a message; the caller
/// adds file and line.
pub fn encode_row(
    encoder: &dyn TextEncoder,
    specials: &Specials,
    condition: &str,
    instruction: &str,
    response: &str,
    tokens: &mut Vec<u32>,
) -> Result<RowLens, String> {
    let row = RowFields {
        condition,
        instruction,
        response,
    };
    let mut lens = encode_rows(encoder, specials, &[row], tokens);
    lens.pop().expect("one result per row")
}

/// `encode_row` of each of `rows` in turn, onto the end of `tokens`: each row's lengths, or why
/// it is bad (its tokens left out). The good rows' texts go to the encoder as one stream
/// (`TextEncoder::encode_texts_with`), so that a text's last pieces are looked up while the next
/// one is split, and the layout's tokens are put in between as each text closes.
pub fn encode_rows(
    encoder: &dyn TextEncoder,
    specials: &Specials,
    rows: &[RowFields<'_>],
    tokens: &mut Vec<u32>,
) -> Vec<Result<RowLens, String>> {
    // The condition tags first: a row with an unknown one is bad, and its texts are not read.
    let mut tags: Vec<u32> = Vec::new();
    let mut tag_ends = Vec::with_capacity(rows.len());
    let mut lens: Vec<Result<RowLens, String>> = Vec::with_capacity(rows.len());
    for row in rows {
        let before = tags.len();
        let known = condition_ids(specials, row.condition, &mut tags);
        if known.is_err() {
            tags.truncate(before);
        }
        tag_ends.push(tags.len());
        lens.push(known.map(|()| RowLens {
            inst_len: 0,
            resp_len: 0,
        }));
    }
    let head = |row: usize, out: &mut Vec<u32>| {
        let from = if row == 0 { 0 } else { tag_ends[row - 1] };
        out.push(specials.boq);
        out.extend_from_slice(&tags[from..tag_ends[row]]);
    };
    let good: Vec<usize> = (0..rows.len()).filter(|&r| lens[r].is_ok()).collect();
    tokens.reserve(
        good.iter()
            .map(|&r| (rows[r].instruction.len() + rows[r].response.len()) / 3 + 8)
            .sum(),
    );
    let mut next = 0; // the first good row not encoded yet
    while next < good.len() {
        // Where the row being encoded starts, where its instruction part ends, and whether its
        // response is the text being encoded.
        let (mut at, mut row_start, mut inst_end, mut in_response) = (next, tokens.len(), 0, false);
        head(good[next], tokens);
        let mut texts = good[next..]
            .iter()
            .flat_map(|&r| [rows[r].instruction, rows[r].response]);
        let outcome = encoder.encode_texts_with(&mut texts, tokens, &mut |out| {
            if !in_response {
                out.push(specials.eoq);
                inst_end = out.len();
                in_response = true;
                return;
            }
            out.push(specials.eoa);
            lens[good[at]] = Ok(RowLens {
                inst_len: inst_end - row_start,
                resp_len: out.len() - inst_end,
            });
            (at, in_response) = (at + 1, false);
            if at < good.len() {
                row_start = out.len();
                head(good[at], out);
            }
        });
        match outcome {
            Ok(()) => next = good.len(),
            Err((failed, message)) => {
                // The row being encoded is bad: its tokens go (with any ids the failed text
                // left), the rows after it go on. Every text before it closed.
                debug_assert_eq!(failed, 2 * (at - next) + usize::from(in_response));
                tokens.truncate(row_start);
                lens[good[at]] = Err(message);
                next = at + 1;
            }
        }
    }
    lens
}

/// The ids of the tags of `condition` pushed to `ids`; an empty condition means "no tags", an
/// empty tag inside a list ("cot,") is an error.
fn condition_ids(specials: &Specials, condition: &str, ids: &mut Vec<u32>) -> Result<(), String> {
    if condition.is_empty() {
        return Ok(());
    }
    for tag in condition.split(',') {
        let id = specials.condition_id(tag).ok_or_else(|| {
            format!(
                "unknown condition tag {tag:?} in condition {condition:?}; known tags: {}. Fix \
                 the row or map the tag with --conditions {tag}=<token>",
                specials.known_tags()
            )
        })?;
        ids.push(id);
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A toy encoder: one token per byte (id = byte + 100); specials from a fixed table.
    pub(crate) struct ByteEncoder;

    pub(crate) const TOY_SPECIALS: [&str; 7] = [
        "<|im_start|>",
        "<|im_end|>",
        "<|box_end|>",
        "<|object_ref_start|>",
        "<|object_ref_end|>",
        "<|quad_start|>",
        "<|quad_end|>",
    ];

    impl TextEncoder for ByteEncoder {
        fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
            Ok(text.bytes().map(|b| b as u32 + 100).collect())
        }
        fn token_id(&self, token: &str) -> Option<u32> {
            TOY_SPECIALS
                .iter()
                .position(|s| *s == token)
                .map(|i| i as u32)
        }
        fn vocab_size(&self) -> usize {
            356
        }
    }

    #[test]
    fn layout_matches_the_spec() {
        let specials = Specials::resolve(&ByteEncoder, &LayoutTokens::default()).unwrap();
        // Rows go onto the end of what the buffer holds.
        let mut tokens = vec![9];
        let row = encode_row(&ByteEncoder, &specials, "cot,noisy", "ab", "c", &mut tokens);
        assert_eq!(tokens, vec![9, 0, 4, 5, 197, 198, 1, 199, 2]);
        let lens = RowLens {
            inst_len: 6,
            resp_len: 2,
        };
        assert_eq!(row, Ok(lens));
        let no_tags = encode_row(&ByteEncoder, &specials, "", "", "", &mut tokens).unwrap();
        assert_eq!(tokens[9..], [0, 1, 2]);
        assert_eq!((no_tags.inst_len, no_tags.resp_len), (2, 1));
    }

    #[test]
    fn unknown_and_empty_tags_are_errors_that_leave_the_buffer_as_it_was() {
        let specials = Specials::resolve(&ByteEncoder, &LayoutTokens::default()).unwrap();
        let mut tokens = vec![7, 8];
        let err =
            encode_row(&ByteEncoder, &specials, "cot,math", "a", "b", &mut tokens).unwrap_err();
        assert!(err.contains("unknown condition tag \"math\""), "{err}");
        assert!(err.contains("known tags: direct, cot, noisy, synth"));
        let err = encode_row(&ByteEncoder, &specials, "cot,", "a", "b", &mut tokens).unwrap_err();
        assert!(err.contains("unknown condition tag \"\""), "{err}");
        assert_eq!(tokens, vec![7, 8]);
    }

    /// `ByteEncoder` that fails on any text holding "boom", as the HF encoder may.
    struct FailingEncoder;

    impl TextEncoder for FailingEncoder {
        fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
            match text.contains("boom") {
                true => Err(format!("cannot encode {text:?}")),
                false => ByteEncoder.encode(text),
            }
        }
        fn token_id(&self, token: &str) -> Option<u32> {
            ByteEncoder.token_id(token)
        }
        fn vocab_size(&self) -> usize {
            ByteEncoder.vocab_size()
        }
    }

    #[test]
    fn rows_encoded_together_are_the_rows_encoded_one_by_one() {
        // Good rows among rows with a bad tag, a failing instruction and a failing response,
        // empty texts, a bad first and a bad last row: the same tokens and the same results
        // as `encode_row` of each in turn (one row a stream: how rows follow each other is
        // what is compared), for both toy encoders.
        let specials = Specials::resolve(&ByteEncoder, &LayoutTokens::default()).unwrap();
        let fields = |(condition, instruction, response)| RowFields {
            condition,
            instruction,
            response,
        };
        let rows: Vec<RowFields> = [
            ("cot,math", "bad tag", "x"),
            ("cot", "ab", "c"),
            ("", "", ""),
            ("noisy", "boom", "after"),
            ("direct", "before", "boom!"),
            ("cot,noisy", "de", "f"),
            ("", "gh", ""),
            ("synth", "last", "boom"),
        ]
        .into_iter()
        .map(fields)
        .collect();
        let encoders: [(&dyn TextEncoder, usize); 2] = [(&ByteEncoder, 7), (&FailingEncoder, 4)];
        for (encoder, good) in encoders {
            let mut together = vec![9];
            let lens = encode_rows(encoder, &specials, &rows, &mut together);
            let mut alone = vec![9];
            let want: Vec<_> = rows
                .iter()
                .map(|r| {
                    let (c, i, s) = (r.condition, r.instruction, r.response);
                    encode_row(encoder, &specials, c, i, s, &mut alone)
                })
                .collect();
            assert_eq!((&together, &lens), (&alone, &want));
            assert!(lens[0].as_ref().is_err_and(|e| e.contains("\"math\"")));
            assert_eq!(lens.iter().filter(|l| l.is_ok()).count(), good);
        }
        assert!(encode_rows(&ByteEncoder, &specials, &[], &mut vec![]).is_empty());
    }

    #[test]
    fn rows_on_the_fast_encoder_are_the_layout_of_each_text_encoded_alone() {
        // The fast encoder holds a text's last pieces, and its close (the layout's tokens
        // after it), while the next text is split: every good row must still be BOQ, its tags,
        // its instruction's ids, EOQ, its response's ids, EOA, the ids from the HF encoder of
        // each text alone.
        use crate::encoder::Encoder;
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("trained_tokenizers/bpe/tokenizer.json");
        let fast = Encoder::from_file_with(&path, "fast").expect("the fast encoder");
        let hf = Encoder::from_file_with(&path, "hf").expect("the HF encoder");
        let specials = Specials::resolve(&fast, &LayoutTokens::default()).expect("specials");
        let long = " word".repeat(40);
        let nfc = "e\u{301} ".repeat(20);
        let texts = [
            "",
            "a",
            " sixteen".repeat(16).leak(),
            &long,
            &nfc,
            "<|im_end|> x",
        ];
        let mut rows = Vec::new();
        for (k, instruction) in texts.iter().enumerate() {
            for response in &texts {
                let condition = ["cot", "", "math", "noisy,synth"][(k + rows.len()) % 4];
                rows.push(RowFields {
                    condition,
                    instruction,
                    response,
                });
            }
        }
        let mut tokens = vec![];
        let lens = encode_rows(&fast, &specials, &rows, &mut tokens);
        let mut want = vec![];
        for (row, got) in rows.iter().zip(&lens) {
            let mut tags = vec![];
            if condition_ids(&specials, row.condition, &mut tags).is_err() {
                assert!(got.is_err(), "{}", row.condition);
                continue;
            }
            let start = want.len();
            want.push(specials.boq);
            want.extend(tags);
            want.extend(hf.encode(row.instruction).expect("hf encodes"));
            want.push(specials.eoq);
            let inst_len = want.len() - start;
            want.extend(hf.encode(row.response).expect("hf encodes"));
            want.push(specials.eoa);
            let resp_len = want.len() - start - inst_len;
            assert_eq!(got, &Ok(RowLens { inst_len, resp_len }));
        }
        assert_eq!(tokens, want);
    }

    #[test]
    fn missing_special_tokens_are_rejected_up_front() {
        let tokens = LayoutTokens {
            eoa: "<|nope|>".into(),
            conditions: vec![("math".into(), "<|also_nope|>".into())],
            ..LayoutTokens::default()
        };
        let err = Specials::resolve(&ByteEncoder, &tokens)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"<|nope|>\" (--eoa)"), "{err}");
        assert!(
            err.contains("\"<|also_nope|>\" (--conditions math=...)"),
            "{err}"
        );
    }

    #[test]
    fn a_layout_token_that_text_encodes_to_is_refused() {
        // The shipped tokenizer: "a" is a plain vocabulary token, "<|im_end|>" an added one
        // (which text encodes to other ids: data never injects it).
        use crate::encoder::Encoder;
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("trained_tokenizers/bpe/tokenizer.json");
        for choice in ["fast", "hf"] {
            let encoder = Encoder::from_file_with(&path, choice).expect("encoder");
            Specials::resolve(&encoder, &LayoutTokens::default()).expect("the defaults");
            let plain_condition = LayoutTokens {
                conditions: vec![("direct".into(), "a".into())],
                ..LayoutTokens::default()
            };
            let err = Specials::resolve(&encoder, &plain_condition)
                .expect_err("a plain token")
                .to_string();
            assert!(
                err.contains("--conditions direct=...: the token \"a\" (id ")
                    && err.contains("is one that text encodes to")
                    && err.contains("this option's default <|object_ref_start|>"),
                "{choice}: {err}"
            );
            let plain_eoa = LayoutTokens {
                eoa: "a".into(),
                ..LayoutTokens::default()
            };
            let err = Specials::resolve(&encoder, &plain_eoa).expect_err("a plain EOA");
            assert!(err.to_string().starts_with("--eoa: "), "{choice}: {err}");
            assert!(
                err.to_string().ends_with("default <|box_end|>"),
                "{choice}: {err}"
            );
        }
    }
}
