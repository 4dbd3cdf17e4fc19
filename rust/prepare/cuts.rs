//! Where a compressed text or JSONL file is cut for scale units. A compressed stream cannot be
//! entered in the middle, so the plan cannot seek to document boundaries as it does in an
//! uncompressed file (`formats/ranges.py`); instead each unit is given target offsets of the
//! text, decompresses the text before its range (discarding it), and cuts where the rule
//! below puts the cut for each target. Neighbouring units apply the same rule to the same text,
//! so one's end is the next one's start, and together they read every document once.
//!
//! The cut for target `t` (above 0): in lines and JSONL, the first line start at or after `t`;
//! in text blocks, the start of the line after the first blank line that starts at or after
//! that line start (as `formats/ranges.py` cuts an uncompressed file). The cuts rise with the
//! target, so a unit whose targets share one cut is empty.

use memchr::memchr;

use super::clean::is_python_space;
use super::split::is_blank;

/// The line being read, in text blocks once the first line start at or after the target is
/// found.
#[derive(Debug)]
enum Line {
    /// At its first byte.
    Start,
    /// Known not blank: on to its end.
    NotBlank,
    /// Its bytes so far, all of them whitespace (or an unfinished character).
    MaybeBlank(Vec<u8>),
}

#[derive(Debug)]
enum State {
    /// Looking for the first line start at or after the target.
    Seeking,
    /// Text blocks: looking for a blank line from there on.
    Lines(Line),
    /// Found: the cut's offset and the number of the line starting there (from 1).
    Found { offset: u64, line: u64 },
}

/// The cut for one target, found in the text fed to it piece by piece from its start.
#[derive(Debug)]
pub struct CutFinder {
    target: u64,
    blocks: bool,
    state: State,
    /// Newlines in the text fed before the current piece.
    newlines: u64,
}

impl CutFinder {
    /// The cut for `target` (0: the text's start) in text blocks (`blocks`) or lines.
    pub fn new(target: u64, blocks: bool) -> Self {
        let state = if target == 0 {
            State::Found { offset: 0, line: 1 }
        } else {
            State::Seeking
        };
        Self {
            target,
            blocks,
            state,
            newlines: 0,
        }
    }

    /// The cut (offset, line number), once found.
    pub fn found(&self) -> Option<(u64, u64)> {
        match self.state {
            State::Found { offset, line } => Some((offset, line)),
            _ => None,
        }
    }

    /// Look at the next `piece` of the text, which starts at byte `offset` (the pieces come in
    /// order, each where the last ended); the cut, once found (in this piece or before).
    pub fn feed(&mut self, piece: &[u8], offset: u64) -> Option<(u64, u64)> {
        if let found @ Some(_) = self.found() {
            return found;
        }
        match self.cut_in(piece, offset) {
            Some(at) => {
                let before = memchr::memchr_iter(b'\n', &piece[..at]).count() as u64;
                let line = self.newlines + before + 1;
                self.state = State::Found {
                    offset: offset + at as u64,
                    line,
                };
            }
            None => self.newlines += memchr::memchr_iter(b'\n', piece).count() as u64,
        }
        self.found()
    }

    /// The cut's index in `piece`, if it lies there (it may be `piece.len()`: a line start
    /// at the piece's end).
    fn cut_in(&mut self, piece: &[u8], offset: u64) -> Option<usize> {
        let mut at = 0;
        loop {
            match &mut self.state {
                State::Found { .. } => return None,
                State::Seeking => {
                    // The first newline at or after byte `target - 1` ends the line before it.
                    let from = (self.target - 1).saturating_sub(offset);
                    let from = usize::try_from(from).unwrap_or(usize::MAX);
                    let newline = memchr(b'\n', piece.get(from..)?)?;
                    at = from + newline + 1;
                    if !self.blocks {
                        return Some(at);
                    }
                    self.state = State::Lines(Line::Start);
                }
                State::Lines(line) => {
                    let rest = piece.get(at..).filter(|rest| !rest.is_empty())?;
                    match line {
                        Line::Start => {
                            *line = match rest[0] {
                                b'\n' => return Some(at + 1), // an empty line: blank
                                b if b < 0x80 && !is_python_space(b as char) => Line::NotBlank,
                                _ => Line::MaybeBlank(Vec::new()),
                            };
                        }
                        Line::NotBlank => {
                            at += memchr(b'\n', rest)? + 1;
                            *line = Line::Start;
                        }
                        Line::MaybeBlank(bytes) => match memchr(b'\n', rest) {
                            Some(end) => {
                                bytes.extend_from_slice(&rest[..end]);
                                if is_blank(bytes) {
                                    return Some(at + end + 1);
                                }
                                at += end + 1;
                                *line = Line::Start;
                            }
                            None => {
                                bytes.extend_from_slice(rest);
                                if !may_be_blank(bytes) {
                                    *line = Line::NotBlank;
                                }
                                return None;
                            }
                        },
                    }
                }
            }
        }
    }
}

/// Whether the start of a line, `bytes`, may still be the start of a blank one: all
/// whitespace but perhaps an unfinished character at its end (so that a long line is not
/// kept whole to be judged).
fn may_be_blank(bytes: &[u8]) -> bool {
    match std::str::from_utf8(bytes) {
        Ok(_) => is_blank(bytes),
        Err(error) => error.error_len().is_none() && is_blank(&bytes[..error.valid_up_to()]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule on the whole text at once (`formats/ranges.py`'s, offsets and line numbers).
    fn cut_by_rule(text: &[u8], target: u64, blocks: bool) -> Option<(u64, u64)> {
        let starts: Vec<usize> = std::iter::once(0)
            .chain(
                text.iter()
                    .enumerate()
                    .filter(|(_, &b)| b == b'\n')
                    .map(|(i, _)| i + 1),
            )
            .collect();
        let line_of = |at: usize| text[..at].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        let first = *starts.iter().find(|&&s| s as u64 >= target && s > 0)?;
        if !blocks {
            return Some((first as u64, line_of(first)));
        }
        let mut at = first;
        while at < text.len() {
            let end = text[at..].iter().position(|&b| b == b'\n')?;
            if is_blank(&text[at..at + end]) {
                let cut = at + end + 1;
                return Some((cut as u64, line_of(cut)));
            }
            at += end + 1;
        }
        None
    }

    #[test]
    fn every_target_is_cut_as_the_rule_says_in_pieces_of_any_size() {
        let text = "a b\n\n  \ncode\n\u{3000}\r\n x\n\n\n\u{1c}\nlast line\n\nend".as_bytes();
        for blocks in [false, true] {
            for target in 1..=text.len() as u64 + 2 {
                let expected = cut_by_rule(text, target, blocks);
                for piece in [1, 2, 3, 7, 64] {
                    let mut finder = CutFinder::new(target, blocks);
                    let mut found = None;
                    for (k, chunk) in text.chunks(piece).enumerate() {
                        found = finder.feed(chunk, (k * piece) as u64);
                    }
                    assert_eq!(
                        found, expected,
                        "target {target} blocks {blocks} piece {piece}"
                    );
                }
            }
        }
        assert_eq!(CutFinder::new(0, true).found(), Some((0, 1)));
    }

    #[test]
    fn random_texts_are_cut_as_the_rule_says() {
        use rand::{RngCore, SeedableRng};
        // Pieces that make blank lines and lines that only look blank at first: spaces,
        // U+3000 (three bytes, split across pieces), an information separator, a byte that is
        // not UTF-8, carriage returns.
        let pieces: [&[u8]; 9] = [
            b"word",
            b" ",
            b"\n",
            b"\r\n",
            b"\xe3\x80\x80",
            b"\x1c",
            b"\xff",
            b"\t",
            b"\xc3\xa9",
        ];
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for _ in 0..300 {
            let count = rng.next_u32() % 40;
            let text: Vec<u8> = (0..count)
                .flat_map(|_| {
                    pieces[rng.next_u32() as usize % pieces.len()]
                        .iter()
                        .copied()
                })
                .collect();
            for blocks in [false, true] {
                for target in 1..=text.len() as u64 + 1 {
                    let piece = 1 + rng.next_u32() as usize % 9;
                    let mut finder = CutFinder::new(target, blocks);
                    let mut found = None;
                    for (k, chunk) in text.chunks(piece).enumerate() {
                        found = finder.feed(chunk, (k * piece) as u64);
                    }
                    let expected = cut_by_rule(&text, target, blocks);
                    assert_eq!(found, expected, "{text:?} target {target} blocks {blocks}");
                }
            }
        }
    }

    #[test]
    fn a_long_line_is_not_kept_to_be_judged() {
        let mut finder = CutFinder::new(1, true);
        assert_eq!(finder.feed(b"x\n   ", 0), None);
        assert!(matches!(finder.state, State::Lines(Line::MaybeBlank(_))));
        assert_eq!(finder.feed(b"  and words", 5), None);
        assert!(matches!(finder.state, State::Lines(Line::NotBlank)));
        // An unfinished character (U+3000's first two bytes) may still be whitespace.
        let mut finder = CutFinder::new(1, true);
        assert_eq!(finder.feed(b"x\n\xe3\x80", 0), None);
        assert!(matches!(finder.state, State::Lines(Line::MaybeBlank(_))));
        assert_eq!(finder.feed(b"\x80\nnext", 4), Some((6, 3)));
    }
}
