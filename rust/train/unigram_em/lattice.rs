//! A word's lattice: every piece that covers part of it, in flat arrays reused from word to word.
//!
//! The arithmetic is `tokenizers`' (`models/unigram/lattice.rs`), operation for operation, so
//! that the same pieces give the same sums to the last bit: the nodes are inserted in the same
//! order (by start, shortest first, then the unknown character), the forward and backward sums
//! run over them in that order with its `log_sum_exp`, and Viterbi and the two-best search break
//! ties as it does. What differs is the layout: nodes are indices, not `Rc<RefCell<_>>`, and a
//! position's forward sum, the same for every node that starts there, is taken once.

use std::cmp::Ordering;

use dary_heap::QuaternaryHeap;

use super::model::{Model, Piece};

/// A piece found in a word: characters `from..to`, the `first`-th of the first pieces
/// (`matches.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match {
    pub from: u32,
    pub to: u32,
    pub first: u32,
}

/// The lattice of one word. Positions are the word's characters: 0 is its start, `chars` its end.
#[derive(Default)]
pub struct Lattice {
    /// Per node: the piece id, the first and the past-the-end character, the score. Node 0 is
    /// the start (BOS), node 1 the end (EOS), then the pieces by start position.
    id: Vec<u32>,
    from: Vec<u32>,
    to: Vec<u32>,
    score: Vec<f64>,
    /// The nodes starting at character `k`: `begin[k]..begin[k + 1]` (the end's is node 1).
    begin: Vec<u32>,
    /// The nodes ending at character `k`, in insertion order: `ends[end_at[k]..end_at[k + 1]]`.
    end_at: Vec<u32>,
    ends: Vec<u32>,
    chars: usize,
    /// Forward sums by position (every node starting at `k` has `alpha[k]`), backward sums by
    /// position (every node ending at `k` has `beta[k]`).
    alpha: Vec<f64>,
    beta: Vec<f64>,
    /// Viterbi's best score up to each node's end, and the node before it.
    backtrace: Vec<f64>,
    prev: Vec<u32>,
    /// While building: whether a piece covers the current character alone; each byte
    /// boundary's character; the pieces found at a character.
    single: bool,
    char_at: Vec<u32>,
    found: Vec<(usize, u32)>,
}

const BOS: u32 = 0;
const EOS: u32 = 1;
pub(super) const NONE: u32 = u32::MAX;

impl Lattice {
    /// The lattice of `text` under `model` (its trie walked at every character); `bos_id` and
    /// `eos_id` are the ends' piece ids (the model's length plus 1 and 2, as `tokenizers`
    /// numbers them).
    pub fn build(&mut self, model: &Model<'_>, text: &str, bos_id: u32, eos_id: u32) {
        let bytes = text.as_bytes();
        // The character each byte boundary is: a piece found ends on one.
        self.char_at.clear();
        self.char_at.resize(bytes.len() + 1, u32::MAX);
        let mut chars = 0u32;
        for (at, _) in text.char_indices() {
            self.char_at[at] = chars;
            chars += 1;
        }
        self.char_at[bytes.len()] = chars;
        self.start(chars as usize, bos_id, eos_id);
        let unknown = model.unknown_score();
        let mut found = std::mem::take(&mut self.found);
        for (k, (at, _)) in text.char_indices().enumerate() {
            found.clear();
            model.prefixes(&bytes[at..], |len, piece| found.push((len, piece)));
            self.open(k);
            for &(len, piece) in &found {
                let to = self.char_at[at + len];
                self.push(piece, k as u32, to, model.pieces[piece as usize].1);
            }
            self.close(k as u32, unknown);
        }
        self.found = found;
        self.finish();
    }

    /// The lattice of a word from its matches against the first pieces (`Matches`), keeping
    /// those still pieces: the nodes and their order `build` would give.
    #[allow(clippy::too_many_arguments)] // a word's matches, and the step's pieces
    pub fn build_matched(
        &mut self,
        matches: &[Match],
        chars: u32,
        id_of: &[u32],
        pieces: &[Piece],
        unknown: f64,
        bos_id: u32,
        eos_id: u32,
    ) {
        self.start(chars as usize, bos_id, eos_id);
        let mut next = 0;
        for k in 0..chars {
            self.open(k as usize);
            while let Some(m) = matches.get(next).filter(|m| m.from == k) {
                let id = id_of[m.first as usize];
                if id != NONE {
                    self.push(id, k, m.to, pieces[id as usize].1);
                }
                next += 1;
            }
            self.close(k, unknown);
        }
        self.finish();
    }

    fn start(&mut self, chars: usize, bos_id: u32, eos_id: u32) {
        self.id.clear();
        self.from.clear();
        self.to.clear();
        self.score.clear();
        self.begin.clear();
        self.chars = chars;
        for (node, id) in [(BOS, bos_id), (EOS, eos_id)] {
            debug_assert_eq!(self.id.len(), node as usize);
            let at = if node == BOS { 0 } else { chars as u32 };
            self.id.push(id);
            self.from.push(at);
            self.to.push(at);
            self.score.push(0.0);
        }
    }

    fn open(&mut self, k: usize) {
        debug_assert_eq!(self.begin.len(), k);
        self.begin.push(self.id.len() as u32);
        self.single = false;
    }

    fn push(&mut self, id: u32, from: u32, to: u32, score: f64) {
        self.id.push(id);
        self.from.push(from);
        self.to.push(to);
        self.score.push(score);
        self.single |= to == from + 1;
    }

    /// No piece is character `k` alone: the unknown piece (id 0) stands for it.
    fn close(&mut self, k: u32, unknown: f64) {
        if !self.single {
            self.push(0, k, k + 1, unknown);
        }
    }

    fn finish(&mut self) {
        self.begin.push(self.id.len() as u32);
        self.index_ends();
    }

    /// `end_at`/`ends`: the nodes by end position, each position's in insertion order.
    fn index_ends(&mut self) {
        let positions = self.chars + 1;
        self.end_at.clear();
        self.end_at.resize(positions + 1, 0);
        // BOS ends at 0; EOS ends nowhere (it starts at the end).
        self.end_at[1] += 1;
        for node in 2..self.id.len() {
            self.end_at[self.to[node] as usize + 1] += 1;
        }
        for k in 1..=positions {
            self.end_at[k] += self.end_at[k - 1];
        }
        self.ends.clear();
        self.ends.resize(self.end_at[positions] as usize, NONE);
        let mut fill: Vec<u32> = self.end_at[..positions].to_vec();
        let mut put = |node: u32, at: usize, fill: &mut Vec<u32>| {
            self.ends[fill[at] as usize] = node;
            fill[at] += 1;
        };
        put(BOS, 0, &mut fill);
        for node in 2..self.id.len() as u32 {
            put(node, self.to[node as usize] as usize, &mut fill);
        }
    }

    fn begins(&self, k: usize) -> std::ops::Range<usize> {
        if k == self.chars {
            return EOS as usize..EOS as usize + 1;
        }
        self.begin[k] as usize..self.begin[k + 1] as usize
    }

    fn ending(&self, k: usize) -> &[u32] {
        &self.ends[self.end_at[k] as usize..self.end_at[k + 1] as usize]
    }

    /// Add `freq` × each node's marginal probability to `expected[piece]`; returns the word's
    /// log likelihood (NaN when the scores are).
    pub fn add_marginals(&mut self, freq: f64, expected: &mut [f64]) -> f64 {
        let positions = self.chars + 1;
        self.alpha.clear();
        self.alpha.resize(positions, 0.0);
        for k in 0..positions {
            // What every node starting at k gets: the sum over the nodes ending at k. A node
            // of the first one's piece id restarts it (`tokenizers` compares nodes by piece).
            let ending = self.ending(k);
            let Some(&first) = ending.first() else {
                continue;
            };
            let mut sum = 0.0;
            for &l in ending {
                let l = l as usize;
                let from_here = self.score[l] + self.alpha_of(l);
                sum = log_sum_exp(sum, from_here, self.id[l] == self.id[first as usize]);
            }
            self.alpha[k] = sum;
        }
        self.beta.clear();
        self.beta.resize(positions, 0.0);
        for k in (0..positions).rev() {
            let begins = self.begins(k);
            let first = begins.start;
            let mut sum = 0.0;
            for r in begins {
                let to_end = self.score[r] + self.beta_of(r);
                sum = log_sum_exp(sum, to_end, self.id[r] == self.id[first]);
            }
            self.beta[k] = sum;
        }
        let z = self.alpha[self.chars];
        for k in 0..self.chars {
            let a = self.alpha[k];
            for node in self.begins(k) {
                let b = self.beta[self.to[node] as usize];
                let total = a + self.score[node] + b - z;
                expected[self.id[node] as usize] += freq * total.exp();
            }
        }
        freq * z
    }

    /// The forward sum up to the start of node `l` (BOS: 0).
    fn alpha_of(&self, l: usize) -> f64 {
        if l == BOS as usize {
            return 0.0;
        }
        self.alpha[self.from[l] as usize]
    }

    /// The backward sum from the end of node `r` (EOS: 0).
    fn beta_of(&self, r: usize) -> f64 {
        if r == EOS as usize {
            return 0.0;
        }
        self.beta[self.to[r] as usize]
    }

    /// The best segmentation's piece ids, in order (`tokenizers`' `Lattice::viterbi`: the first
    /// of equal scores wins).
    pub fn viterbi(&mut self, into: &mut Vec<u32>) {
        into.clear();
        self.fill_backtrace();
        let mut node = self.prev[EOS as usize];
        if node == NONE {
            return;
        }
        while self.prev[node as usize] != NONE {
            into.push(self.id[node as usize]);
            node = self.prev[node as usize];
        }
        into.reverse();
    }

    fn fill_backtrace(&mut self) {
        let nodes = self.id.len();
        self.backtrace.clear();
        self.backtrace.resize(nodes, 0.0);
        self.prev.clear();
        self.prev.resize(nodes, NONE);
        for k in 0..=self.chars {
            for r in self.begins(k) {
                let mut best = NONE;
                let mut best_score = 0.0;
                for &l in self.ending(k) {
                    let score = self.backtrace[l as usize] + self.score[r];
                    if best == NONE || score > best_score {
                        best = l;
                        best_score = score;
                    }
                }
                if best == NONE {
                    return; // no path: `tokenizers` gives none either
                }
                self.prev[r] = best;
                self.backtrace[r] = best_score;
            }
        }
    }

    /// The two best segmentations' piece ids, best first (fewer when there are fewer):
    /// `tokenizers`' A* search (`Lattice::nbest(2)`), its queue and its order of ties.
    pub fn two_best(&mut self) -> Vec<Vec<u32>> {
        const WANTED: usize = 2;
        let mut found: Vec<Vec<u32>> = Vec::new();
        let mut popped: Vec<(u32, u32)> = Vec::new(); // (node, the hypothesis after it)
        let mut agenda = QuaternaryHeap::new();
        agenda.push(Hypothesis {
            node: EOS,
            next: NONE,
            fx: self.score[EOS as usize],
            gx: self.score[EOS as usize],
        });
        self.fill_backtrace();
        while let Some(top) = agenda.pop() {
            let at = popped.len() as u32;
            popped.push((top.node, top.next));
            if self.id[top.node as usize] == self.id[BOS as usize] {
                let mut path = Vec::new();
                let mut next = top.next;
                while popped[next as usize].1 != NONE {
                    let (node, after) = popped[next as usize];
                    path.push(self.id[node as usize]);
                    next = after;
                }
                found.push(path);
                if found.len() == WANTED {
                    return found;
                }
                continue;
            }
            for &l in self.ending(self.from[top.node as usize] as usize) {
                agenda.push(Hypothesis {
                    node: l,
                    next: at,
                    fx: self.backtrace[l as usize] + top.gx,
                    gx: self.score[l as usize] + top.gx,
                });
            }
            // As `tokenizers` keeps a long word's queue from growing without end.
            if agenda.len() > 100_000 {
                let mut kept = QuaternaryHeap::new();
                for _ in 0..WANTED * 10 {
                    if let Some(h) = agenda.pop() {
                        kept.push(h);
                    }
                }
                agenda = kept;
            }
        }
        found
    }
}

/// `log(exp(x) + exp(y))`, `y` alone when `first` (as `tokenizers` writes it).
fn log_sum_exp(x: f64, y: f64, first: bool) -> f64 {
    if first {
        return y;
    }
    let (low, high) = if x > y { (y, x) } else { (x, y) };
    if high > low + 50.0 {
        high
    } else {
        high + ((low - high).exp() + 1.0).ln()
    }
}

/// A partial path of the two-best search, ordered by `fx` as `tokenizers` orders it: never
/// equal, so that the heap breaks ties the same way.
struct Hypothesis {
    node: u32,
    next: u32,
    fx: f64,
    gx: f64,
}

impl PartialEq for Hypothesis {
    fn eq(&self, other: &Self) -> bool {
        self.fx == other.fx
    }
}

impl Eq for Hypothesis {}

impl PartialOrd for Hypothesis {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Hypothesis {
    fn cmp(&self, other: &Self) -> Ordering {
        if self.fx < other.fx {
            Ordering::Less
        } else {
            Ordering::Greater
        }
    }
}
