//! The first pieces: every character, then the substrings that repeat, by count × length
//! (SentencePiece's seeds, as `tokenizers`' `make_seed_sentence_pieces` takes them: the same
//! suffix array, `esaxx-rs`, over the words joined by NUL).

use std::cmp::Reverse;
use std::collections::HashMap;

use super::model::Piece;
use crate::error::{Error, Result};

/// Up to `seed_size` seed pieces of `words` (in their order), scored by log probability.
pub fn seed_pieces(
    words: &[(String, u32)],
    max_piece_length: usize,
    seed_size: usize,
) -> Result<Vec<Piece>> {
    let mut joined = String::with_capacity(words.iter().map(|(w, _)| w.len() + 1).sum());
    // Counted in 64 bits: `tokenizers` adds `u32`s, which wrap (in its release build) past 4
    // billion occurrences of a character, some 20 GB of text; below that the counts are equal.
    let mut chars: HashMap<char, u64> = HashMap::new();
    let mut length = 0usize;
    for (word, count) in words {
        if word.is_empty() {
            continue;
        }
        joined.push_str(word);
        joined.push('\0');
        for c in word.chars() {
            length += 1;
            if c != '\0' {
                *chars.entry(c).or_insert(0) += u64::from(*count);
            }
        }
        length += 1;
    }
    // The suffix array indexes characters with `i32`s (20 bytes a character).
    if length > i32::MAX as usize {
        return Err(Error::Tokenizer(format!(
            "the unigram seeds' suffix array takes at most {} characters of distinct words, and \
             these hold {length}: train on fewer texts",
            i32::MAX
        )));
    }
    let suffix = esaxx_rs::suffix(&joined).map_err(|e| {
        Error::Tokenizer(format!(
            "the unigram seeds' suffix array failed ({e:?}): the words hold too many characters"
        ))
    })?;
    let mut by_count: Vec<(u64, char)> = chars.into_iter().map(|(c, n)| (n, c)).collect();
    by_count.sort_by_key(|&pair| Reverse(pair));
    let mut repeated: Vec<(u64, &[char])> = suffix
        .iter()
        .filter(|(text, _)| {
            text.len() > 1 && text.len() <= max_piece_length && !text.contains(&'\0')
        })
        .map(|(text, freq)| (u64::from(freq) * text.len() as u64, text))
        .collect();
    repeated.sort_by_key(|&pair| Reverse(pair));
    let mut seeds: Vec<Piece> = by_count
        .into_iter()
        .map(|(n, c)| (c.to_string(), n as f64))
        .collect();
    for (score, text) in repeated {
        seeds.push((text.iter().collect(), score as f64));
        if seeds.len() >= seed_size {
            break;
        }
    }
    let sum: f64 = seeds.iter().map(|(_, score)| score).sum();
    let log_sum = sum.ln();
    for (_, score) in &mut seeds {
        *score = score.ln() - log_sum;
    }
    Ok(seeds)
}
