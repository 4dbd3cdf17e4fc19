//! Characters a new piece can start from as one token each, instead of as their bytes.
//!
//! Why: a CJK pre-token is a run of 10-40 characters of three bytes each, and merging it byte by
//! byte makes two merges inside every character (six lookups in the merge table, each a likely
//! cache miss) before the merges between characters start; that was half the first pass over
//! CJK text. Starting from the characters' tokens leaves a third of the symbols and of the
//! quadratic scan, and the lookups between characters only.
//!
//! When it is exact. A merge list is *well-formed* when every token is made by one merge and
//! every merge's operands are bytes or made by earlier (lower-ranked) merges, as a trained list
//! is. Then merging applies ranks in non-decreasing order: a merge makes a token that only
//! higher-ranked merges use. Take a character `c` whose own bytes, merged alone, end as its
//! token, the last merge being rank `r_c`. Inside a piece, `c`'s bytes go through the same
//! states as alone, as long as no merge joins one of its partial tokens to a neighbour: the
//! first token of a state (a lead byte and maybe more, never a whole character) with the token
//! before it, or the last token (continuation bytes only) with the token after it. Such a merge
//! of rank below `r_c` is listed here (`Guard`); a token of those can only stand next to `c`
//! where the piece's bytes before (after) `c` end (start) with its bytes, and there `c` is left
//! as bytes. Elsewhere nothing touches `c`'s bytes before it is whole, and nothing can use its
//! token before `r_c` (well-formed), so at every rank the same merges apply as from `c`'s token:
//! the ids are the same. A list that is not well-formed gets no table (`build` returns `None`).

use rustc_hash::FxHashMap;

const NONE: u32 = u32::MAX;
/// An entry (`WholeChars::bmp`) is `id + 1` in its low 32 bits (0: no entry), these flags, and
/// where its guards start in `WholeChars::guards` in its high 32 bits.
///
/// Set in an entry whose character has guards to check in `guards` (see `Guards`).
const GUARDED: u64 = 1 << 31;
/// Set in an entry whose character stays bytes after a space. Most guards are that one: in a
/// vocabulary of words with their leading space (GPT-2's shape), a space merges with a
/// character's lead byte before the character is whole (16k of Qwen's 17.7k characters), and a
/// look at one byte is cheaper than a search of the guards.
const NOT_AFTER_SPACE: u64 = 1 << 30;
const ID_MASK: u64 = (1 << 30) - 1;
/// Code points below this are looked up in `bmp`, the rest in `astral`.
const BMP: usize = 0x1_0000;

/// Tokens next to which a character must stay bytes: their merge with one of its partial tokens
/// ranks below the merge that completes it.
#[derive(Default)]
struct Guards {
    /// Bytes of tokens that merge with a first partial token, from the left.
    before: Vec<Box<[u8]>>,
    /// Bytes of tokens that merge with a last partial token, from the right.
    after: Vec<Box<[u8]>>,
}

pub struct WholeChars {
    /// The entry of each code point below U+10000 that is one token by its own merges (0: none).
    /// CJK's 21k characters are 168 KiB of it.
    bmp: Box<[u64]>,
    /// The same entries for the code points from U+10000.
    astral: FxHashMap<u32, u64>,
    /// Each guarded character's guards, one after another: the number of tokens before, the
    /// number after, then each token as its length and bytes (`Guards::write`).
    guards: Vec<u8>,
}

impl Guards {
    /// Append the counts and tokens to `out`; `false` (nothing written) when a count or a
    /// token's length passes a byte.
    fn write(&self, out: &mut Vec<u8>) -> bool {
        let (Ok(before), Ok(after)) = (
            u8::try_from(self.before.len()),
            u8::try_from(self.after.len()),
        ) else {
            return false;
        };
        if self.before.iter().chain(&self.after).any(|t| t.len() > 255) {
            return false;
        }
        out.extend([before, after]);
        for token in self.before.iter().chain(&self.after) {
            out.push(token.len() as u8);
            out.extend_from_slice(token);
        }
        true
    }
}

/// What `build` reads of one token: its bytes' length (up to 255) and first byte, and whether
/// the bytes after the first (all of them) are continuation bytes. Four bytes a token: the
/// tables `build` makes are touched once, and on a VM a fresh page costs more than the work.
#[derive(Clone, Copy, Default)]
struct Shape {
    len: u8,
    first: u8,
    rest_continue: bool,
    all_continue: bool,
}

impl Shape {
    fn byte(b: u8) -> Shape {
        Shape {
            len: 1,
            first: b,
            rest_continue: true,
            all_continue: is_continuation(b),
        }
    }

    fn join(left: Shape, right: Shape) -> Shape {
        Shape {
            len: left.len.saturating_add(right.len),
            first: left.first,
            rest_continue: left.rest_continue && right.all_continue,
            all_continue: left.all_continue && right.all_continue,
        }
    }

    fn is_known(self) -> bool {
        self.len > 0
    }

    /// A proper prefix of one multi-byte character: its first token in a state before it is whole.
    fn is_char_prefix(self) -> bool {
        self.rest_continue && usize::from(self.len) < utf8_len(self.first)
    }
}

/// Whether `token` can end right before a character: its last character is whole, or it is
/// all continuation bytes (the end of a character before it).
fn ends_whole_or_in_continuation(token: &[u8]) -> bool {
    match token.iter().rposition(|&b| !is_continuation(b)) {
        None => true,
        Some(lead) => token.len() - lead >= utf8_len(token[lead]),
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xc0 == 0x80
}

/// The length of the UTF-8 character a lead byte starts (1 for ASCII and for bytes that start
/// none).
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    }
}

impl WholeChars {
    /// The table for merges `(left, right)` by rank making `merged[rank]`, over bytes whose token
    /// ids are `byte_ids` (all 256 present); `byte_pairs` holds the rank of each pair of bytes
    /// (`first << 8 | second`) and `rank` gives any pair's (`u32::MAX`: none).
    /// `None` when the list is not well-formed or no character qualifies.
    pub fn build(
        pairs: &[(u32, u32)],
        merged: &[u32],
        byte_ids: &[u32; 256],
        byte_pairs: &[u32],
        rank: impl Fn(u32, u32) -> u32,
    ) -> Option<WholeChars> {
        if pairs.iter().any(|&(l, r)| l == NONE || r == NONE) {
            return None; // a rank without its pair
        }
        let bound = pairs
            .iter()
            .zip(merged)
            .map(|(&(l, r), &m)| l.max(r).max(m))
            .chain(byte_ids.iter().copied())
            .max()? as usize
            + 1;
        // Each token's shape, and the rank that makes it (bytes: none), in rank order; the
        // checks of a well-formed list on the way.
        let mut shapes = vec![Shape::default(); bound];
        // Each token's merge: (left, right, rank).
        let mut parts = vec![(NONE, NONE, NONE); bound];
        for (b, &id) in byte_ids.iter().enumerate() {
            if shapes[id as usize].is_known() {
                return None; // two bytes with one token
            }
            shapes[id as usize] = Shape::byte(b as u8);
        }
        for (rank, (&(left, right), &made)) in pairs.iter().zip(merged).enumerate() {
            let (l, r) = (shapes[left as usize], shapes[right as usize]);
            if !l.is_known() || !r.is_known() {
                return None; // an operand not made yet: not well-formed
            }
            if shapes[made as usize].is_known() {
                return None; // a token made twice, or a byte's token made by a merge
            }
            shapes[made as usize] = Shape::join(l, r);
            parts[made as usize] = (left, right, rank as u32);
        }
        // Merges from the left onto a character's first partial token, from the right onto its
        // last one, by that token: (rank, other token).
        let mut onto_prefix: FxHashMap<u32, Vec<(u32, u32)>> = FxHashMap::default();
        let mut onto_suffix: FxHashMap<u32, Vec<(u32, u32)>> = FxHashMap::default();
        for (rank, &(left, right)) in pairs.iter().enumerate() {
            let shape = |id: u32| shapes[id as usize];
            if shape(right).is_char_prefix() {
                onto_prefix
                    .entry(right)
                    .or_default()
                    .push((rank as u32, left));
            }
            if shape(left).all_continue {
                onto_suffix
                    .entry(left)
                    .or_default()
                    .push((rank as u32, right));
            }
        }
        let bytes_of = |id: u32| {
            let mut out = Vec::new();
            token_bytes(id, &parts, &shapes, &mut out);
            out.into_boxed_slice()
        };
        let mut table = WholeChars {
            bmp: vec![0; BMP].into_boxed_slice(),
            astral: FxHashMap::default(),
            guards: Vec::new(),
        };
        let mut found = false;
        for (id, &shape) in shapes.iter().enumerate() {
            if !(2..=4).contains(&shape.len) || usize::from(shape.len) != utf8_len(shape.first) {
                continue;
            }
            let bytes = bytes_of(id as u32);
            let Some(c) = std::str::from_utf8(&bytes)
                .ok()
                .and_then(|s| s.chars().next())
                .filter(|c| c.len_utf8() == bytes.len())
            else {
                continue;
            };
            // The last merge can only make this token (no two tokens have the same bytes), so
            // its rank is that of the merge making it, if it is that pair.
            let (left, right, made_at) = parts[id];
            let last_pair = |l: u32, r: u32| {
                if (l, r) == (left, right) {
                    made_at
                } else {
                    NONE
                }
            };
            let Some((last_rank, boundaries)) =
                own_merges(&bytes, byte_ids, byte_pairs, &rank, last_pair, merged)
            else {
                continue;
            };
            if merged.get(last_rank as usize) != Some(&(id as u32)) {
                continue; // its bytes alone end as other tokens
            }
            let mut guard = Guards::default();
            for (first, last) in boundaries {
                for &(r, other) in onto_prefix.get(&first).into_iter().flatten() {
                    if r < last_rank {
                        guard.before.push(bytes_of(other));
                    }
                }
                for &(r, other) in onto_suffix.get(&last).into_iter().flatten() {
                    if r < last_rank {
                        guard.after.push(bytes_of(other));
                    }
                }
            }
            // A token that cannot stand next to a whole character in valid UTF-8 is no guard:
            // one ending in an unfinished character before it, one starting with a
            // continuation byte after it.
            guard.before.retain(|t| ends_whole_or_in_continuation(t));
            guard
                .after
                .retain(|t| t.first().is_some_and(|&b| !is_continuation(b)));
            guard.before.sort_unstable();
            guard.before.dedup();
            guard.after.sort_unstable();
            guard.after.dedup();
            let mut entry = u64::from(id as u32 + 1);
            if let Some(at) = guard.before.iter().position(|t| **t == *b" ") {
                guard.before.remove(at);
                entry |= NOT_AFTER_SPACE;
            }
            if !(guard.before.is_empty() && guard.after.is_empty()) {
                let Ok(start) = u32::try_from(table.guards.len()) else {
                    return None; // past 4 GiB of guards: no vocabulary comes near
                };
                if !guard.write(&mut table.guards) {
                    continue; // a guard too long to write: the character stays bytes
                }
                entry |= GUARDED | u64::from(start) << 32;
            }
            let code = u32::from(c);
            if (code as usize) < BMP {
                table.bmp[code as usize] = entry;
            } else {
                table.astral.insert(code, entry);
            }
            found = true;
        }
        found.then_some(table)
    }

    /// The token of the character of `len` bytes at `at` in `piece` (a whole UTF-8 character),
    /// when the piece may start from it.
    #[inline]
    fn token_at(&self, piece: &[u8], at: usize, len: usize, code: u32) -> Option<u32> {
        let entry = match self.bmp.get(code as usize) {
            Some(&entry) => entry,
            None => self.astral.get(&code).copied().unwrap_or(0),
        };
        if entry == 0 {
            return None;
        }
        if entry & NOT_AFTER_SPACE != 0 && at > 0 && piece[at - 1] == b' ' {
            return None;
        }
        if entry & GUARDED != 0 && self.guarded(entry, &piece[..at], &piece[at + len..]) {
            return None;
        }
        Some((entry & ID_MASK) as u32 - 1)
    }

    /// Whether `before` ends with, or `after` starts with, a guard of the entry's character.
    #[inline(never)]
    fn guarded(&self, entry: u64, before: &[u8], after: &[u8]) -> bool {
        let start = (entry >> 32) as usize;
        let Some(&[before_count, after_count]) = self.guards.get(start..start + 2) else {
            return true; // never: `build` wrote them
        };
        let mut at = start + 2;
        let mut next = || {
            let len = usize::from(*self.guards.get(at)?);
            let token = self.guards.get(at + 1..at + 1 + len)?;
            at += 1 + len;
            Some(token)
        };
        let mut hit = false;
        for _ in 0..before_count {
            hit |= next().is_none_or(|t| before.ends_with(t));
        }
        for _ in 0..after_count {
            hit |= next().is_none_or(|t| after.starts_with(t));
        }
        hit
    }

    /// `piece`'s symbols to merge: each character in the table as its token, every other byte as
    /// its own (`byte_ids`).
    pub fn symbols(&self, piece: &[u8], byte_ids: &[u32; 256], symbols: &mut Vec<u32>) {
        symbols.clear();
        let mut at = 0;
        while let Some(&lead) = piece.get(at) {
            let len = utf8_len(lead);
            if len > 1 {
                if let Some(code) = piece.get(at..at + len).and_then(decode) {
                    if let Some(id) = self.token_at(piece, at, len, code) {
                        symbols.push(id);
                        at += len;
                        continue;
                    }
                }
                let end = (at + len).min(piece.len());
                symbols.extend(piece[at..end].iter().map(|&b| byte_ids[b as usize]));
                at = end;
            } else {
                symbols.push(byte_ids[lead as usize]);
                at += 1;
            }
        }
    }
}

/// The code point of one multi-byte UTF-8 character (`None` unless continuation bytes follow
/// the lead).
#[inline]
fn decode(bytes: &[u8]) -> Option<u32> {
    let (&lead, rest) = bytes.split_first()?;
    if !rest.iter().all(|&b| is_continuation(b)) {
        return None;
    }
    let lead_bits = u32::from(lead) & (0x7f >> bytes.len());
    Some(
        rest.iter()
            .fold(lead_bits, |code, &b| code << 6 | u32::from(b & 0x3f)),
    )
}

/// A token's bytes, from the merges that make it (a byte's token: its shape's first byte).
fn token_bytes(id: u32, parts: &[(u32, u32, u32)], shapes: &[Shape], out: &mut Vec<u8>) {
    match parts.get(id as usize) {
        Some(&(left, right, _)) if left != NONE => {
            token_bytes(left, parts, shapes, out);
            token_bytes(right, parts, shapes, out);
        }
        _ => out.extend(shapes.get(id as usize).map(|s| s.first)),
    }
}

/// Merge a character's bytes alone: the rank of the last merge, and the first and last token of
/// each state before it is one token (when it ends as one). The first ranks come from
/// `byte_pairs` (`Merges`' table of byte pairs: a lookup in the merge table is a cache miss here) `last_pair` gives the rank of the last pair (two symbols left) without one: a character of
/// up to three bytes needs no lookup at all.
fn own_merges(
    bytes: &[u8],
    byte_ids: &[u32; 256],
    byte_pairs: &[u32],
    rank: impl Fn(u32, u32) -> u32,
    last_pair: impl Fn(u32, u32) -> u32,
    merged: &[u32],
) -> Option<(u32, Vec<(u32, u32)>)> {
    let mut symbols: Vec<u32> = bytes.iter().map(|&b| byte_ids[b as usize]).collect();
    let mut ranks: Vec<u32> = bytes
        .windows(2)
        .map(|w| byte_pairs[usize::from(w[0]) << 8 | usize::from(w[1])])
        .collect();
    let mut boundaries = Vec::with_capacity(3);
    let mut last = NONE;
    while symbols.len() > 1 {
        boundaries.push((symbols[0], symbols[symbols.len() - 1]));
        let (best, at) = ranks.iter().copied().zip(0..).min()?;
        if best == NONE {
            return None;
        }
        symbols[at] = *merged.get(best as usize)?;
        symbols.remove(at + 1);
        ranks.remove(at);
        let rank = |l, r| {
            if symbols.len() == 2 {
                last_pair(l, r)
            } else {
                rank(l, r)
            }
        };
        if at > 0 {
            ranks[at - 1] = rank(symbols[at - 1], symbols[at]);
        }
        if at < ranks.len() {
            ranks[at] = rank(symbols[at], symbols[at + 1]);
        }
        last = best;
    }
    Some((last, boundaries))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_characters_of_two_to_four_bytes() {
        for c in ['é', '中', '𝄞', 'ß', '\u{ffff}', '\u{10ffff}'] {
            let mut buf = [0; 4];
            let bytes = c.encode_utf8(&mut buf).as_bytes();
            assert_eq!(decode(bytes), Some(u32::from(c)), "{c}");
        }
        assert_eq!(decode(&[0xe4, 0x41, 0x80]), None);
    }

    #[test]
    fn tokens_that_cannot_touch_a_whole_character_are_no_guards() {
        assert!(ends_whole_or_in_continuation(b" "));
        assert!(ends_whole_or_in_continuation("a中".as_bytes()));
        assert!(ends_whole_or_in_continuation(&[0xa4]));
        assert!(!ends_whole_or_in_continuation(&[b'a', 0xe4, 0xb8]));
        assert!(!ends_whole_or_in_continuation(&[0xe4]));
    }
}
