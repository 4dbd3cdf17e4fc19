//! The pieces of one EM step and the byte trie that finds them in a word.
//!
//! `tokenizers`' model keeps a trie of hash maps and, for every prefix it finds, builds the
//! prefix as a `String` to look its id up in another map: most of its training time. Here the
//! trie's nodes hold the piece's id, the root's children are an array, and a deeper child is one
//! probe of a table keyed by (node, byte).

use rustc_hash::FxHashMap;

/// A piece and its score (a log probability; NaN for the unknown piece at id 0).
pub type Piece = (String, f64);

/// What a unigram model is made of while it is learned.
pub struct Model<'p> {
    pub pieces: &'p [Piece],
    /// The lowest score that is a number: the unknown piece's score is 10 below it.
    pub min_score: f64,
    trie: Trie,
}

/// The score `tokenizers` gives a character no piece covers: the lowest score less 10.
pub const UNKNOWN_PENALTY: f64 = 10.0;

impl<'p> Model<'p> {
    pub fn new(pieces: &'p [Piece]) -> Self {
        let mut trie = Trie::new();
        let mut min_score = f64::INFINITY;
        for (id, (piece, score)) in pieces.iter().enumerate() {
            // A text listed twice is found as its last id, as `tokenizers`' map keeps it.
            trie.insert(piece.as_bytes(), id as u32);
            if *score < min_score {
                min_score = *score;
            }
        }
        Model {
            pieces,
            min_score,
            trie,
        }
    }

    pub fn unknown_score(&self) -> f64 {
        self.min_score - UNKNOWN_PENALTY
    }

    /// The ids of the pieces that start `text`, shortest first, with their lengths in bytes.
    pub fn prefixes(&self, text: &[u8], mut found: impl FnMut(usize, u32)) {
        let mut node = ROOT;
        for (i, &byte) in text.iter().enumerate() {
            let Some(next) = self.trie.child(node, byte) else {
                return;
            };
            node = next;
            let id = self.trie.piece[node as usize];
            if id != NO_PIECE {
                found(i + 1, id);
            }
        }
    }
}

const ROOT: u32 = 0;
const NO_PIECE: u32 = u32::MAX;

/// A byte trie: `piece[node]` is the id ending there (or `NO_PIECE`).
struct Trie {
    piece: Vec<u32>,
    /// The root's children by byte (0: none; the root is never a child).
    first: Box<[u32; 256]>,
    deeper: FxHashMap<(u32, u8), u32>,
}

impl Trie {
    fn new() -> Self {
        Trie {
            piece: vec![NO_PIECE],
            first: Box::new([0; 256]),
            deeper: FxHashMap::default(),
        }
    }

    fn child(&self, node: u32, byte: u8) -> Option<u32> {
        if node == ROOT {
            let child = self.first[byte as usize];
            return (child != ROOT).then_some(child);
        }
        self.deeper.get(&(node, byte)).copied()
    }

    fn insert(&mut self, bytes: &[u8], id: u32) {
        let mut node = ROOT;
        for &byte in bytes {
            node = match self.child(node, byte) {
                Some(child) => child,
                None => {
                    let child = self.piece.len() as u32;
                    self.piece.push(NO_PIECE);
                    if node == ROOT {
                        self.first[byte as usize] = child;
                    } else {
                        self.deeper.insert((node, byte), child);
                    }
                    child
                }
            };
        }
        if node != ROOT {
            self.piece[node as usize] = id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_come_shortest_first_with_the_last_id_of_a_text_listed_twice() {
        let pieces: Vec<Piece> = ["a", "ab", "abc", "b", "ab"]
            .iter()
            .map(|p| (p.to_string(), -1.0))
            .collect();
        let model = Model::new(&pieces);
        let mut found = Vec::new();
        model.prefixes(b"abcd", |len, id| found.push((len, id)));
        assert_eq!(found, vec![(1, 0), (2, 4), (3, 2)]);
        found.clear();
        model.prefixes(b"xa", |len, id| found.push((len, id)));
        assert!(found.is_empty());
    }
}
