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
    let mut chars: HashMap<char, u32> = HashMap::new();
    for (word, count) in words {
        if word.is_empty() {
            continue;
        }
        joined.push_str(word);
        joined.push('\0');
        for c in word.chars().filter(|&c| c != '\0') {
            let seen = chars.entry(c).or_insert(0);
            // Wrapping, as `tokenizers`' release build adds them.
            *seen = seen.wrapping_add(*count);
        }
    }
    let suffix = esaxx_rs::suffix(&joined).map_err(|e| {
        Error::Tokenizer(format!(
            "the unigram seeds' suffix array failed ({e:?}): the words hold too many characters"
        ))
    })?;
    let mut by_count: Vec<(u32, char)> = chars.into_iter().map(|(c, n)| (n, c)).collect();
    by_count.sort_by_key(|&pair| Reverse(pair));
    let mut repeated: Vec<(u32, &[char])> = suffix
        .iter()
        .filter(|(text, _)| {
            text.len() > 1 && text.len() <= max_piece_length && !text.contains(&'\0')
        })
        .map(|(text, freq)| (freq.wrapping_mul(text.len() as u32), text))
        .collect();
    repeated.sort_by_key(|&pair| Reverse(pair));
    let mut seeds: Vec<Piece> = by_count
        .into_iter()
        .map(|(n, c)| (c.to_string(), f64::from(n)))
        .collect();
    for (score, text) in repeated {
        seeds.push((text.iter().collect(), f64::from(score)));
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
