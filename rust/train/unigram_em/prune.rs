//! One pruning round: the pieces whose removal costs the corpus' likelihood least are dropped
//! (`tokenizers`' `prune_sentence_pieces`, SentencePiece's rule), on every thread.
//!
//! Each piece's second-best segmentation is what replaces it; each word's best segmentation
//! counts how often each piece is used. Both are per piece or per word, so
//! they run in parallel and come out in order: the result does not depend on the threads.

use rayon::prelude::*;

use super::lattice::Lattice;
use super::matches::Lookup;
use super::model::{Model, Piece};

/// Pieces a task of the second-best pass takes (their order is kept).
const PIECES_PER_TASK: usize = 512;

/// What a piece's own text says of it: kept whatever its loss, dropped when unused, or replaced
/// by the pieces of its second-best segmentation.
struct Fate {
    always_keep: bool,
    alternatives: Vec<u32>,
}

pub fn prune(
    pieces: &[Piece],
    words: &[(String, u32)],
    lookup: &Lookup<'_>,
    vocab_size: usize,
    shrinking_factor: f64,
) -> Vec<Piece> {
    let model = Model::new(pieces);
    let (bos, eos) = (pieces.len() as u32 + 1, pieces.len() as u32 + 2);
    let fates: Vec<Fate> = (0..pieces.len())
        .into_par_iter()
        .with_min_len(PIECES_PER_TASK)
        .map_init(Lattice::default, |lattice, id| {
            if id == 0 {
                // The unknown piece: never kept for itself.
                return Fate {
                    always_keep: false,
                    alternatives: Vec::new(),
                };
            }
            lattice.build(&model, &pieces[id].0, bos, eos);
            let best = lattice.two_best();
            match best.as_slice() {
                [_] => Fate {
                    always_keep: true,
                    alternatives: Vec::new(),
                },
                [first, ..] if first.len() >= 2 => Fate {
                    always_keep: false,
                    alternatives: Vec::new(),
                },
                [first, second, ..] if first.len() == 1 => Fate {
                    always_keep: true,
                    alternatives: second.clone(),
                },
                _ => Fate {
                    always_keep: true,
                    alternatives: Vec::new(),
                },
            }
        })
        .collect();

    // Each word's best segmentation: how often each piece is used, weighted by the words'
    // counts (whole numbers: exact in any order). `tokenizers` also lists the words each piece
    // is used in, once a use, to add their counts up again: that sum is this one.
    let share = words
        .len()
        .div_ceil(rayon::current_num_threads().max(1))
        .max(1);
    let shares: Vec<(f64, Vec<f64>)> = words
        .par_chunks(share)
        .enumerate()
        .map(|(k, some)| {
            let (mut lattice, mut path) = (Lattice::default(), Vec::new());
            let mut total = 0.0;
            let mut freq = vec![0.0; pieces.len()];
            for (i, (word, count)) in some.iter().enumerate() {
                lookup.build(&mut lattice, k * share + i, word, bos, eos);
                lattice.viterbi(&mut path);
                total += f64::from(*count);
                for &id in &path {
                    freq[id as usize] += f64::from(*count);
                }
            }
            (total, freq)
        })
        .collect();
    let mut vsum = 0.0;
    let mut freq = vec![0.0; pieces.len()];
    for (total, some_freq) in shares {
        vsum += total;
        for (f, g) in freq.iter_mut().zip(some_freq) {
            *f += g;
        }
    }

    let sum: f64 = freq.iter().sum();
    let log_sum = sum.ln();
    let mut candidates: Vec<(usize, f64)> = Vec::new();
    let mut kept: Vec<Piece> = Vec::with_capacity(vocab_size);
    kept.push(pieces[0].clone());
    for (id, (piece, score)) in pieces.iter().enumerate().skip(1) {
        let fate = &fates[id];
        if freq[id] == 0.0 && !fate.always_keep {
            continue; // on no best path: nothing is lost
        }
        if fate.alternatives.is_empty() {
            kept.push((piece.clone(), *score));
            continue;
        }
        // The counts of the words the piece is used in, a use each: `freq[id]` (see above).
        let mut f = freq[id];
        if f == 0.0 || f.is_nan() {
            continue;
        }
        f /= vsum;
        let log_prob = freq[id].ln() - log_sum;
        // `tokenizers` counts every piece's list here, not this piece's alternatives: kept so
        // that the same pieces are learned.
        let log_sum_alt = (sum + freq[id] * (pieces.len() - 1) as f64).ln();
        let mut log_prob_alt = 0.0;
        for &n in &fate.alternatives {
            log_prob_alt += (freq[n as usize] + freq[id]).ln() - log_sum_alt;
        }
        candidates.push((id, f * (log_prob - log_prob_alt)));
    }
    let desired = vocab_size * 11 / 10;
    let shrunk = (pieces.len() as f64 * shrinking_factor) as usize;
    let target = desired.max(shrunk);
    // Stable: equal losses keep the pieces' order.
    candidates.sort_by(|(_, a), (_, b)| b.partial_cmp(a).unwrap_or(std::cmp::Ordering::Equal));
    for (id, _) in candidates {
        if kept.len() == target {
            break;
        }
        kept.push(pieces[id].clone());
    }
    kept
}
