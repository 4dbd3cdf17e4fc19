//! The Qwen-family split (`Pattern::Qwen`, `Pattern::Qwen35`) of ASCII text, 64 bytes at a
//! time: every byte is classified at once into bit masks, and where pieces start follows from
//! the masks with a few dozen word operations. The scalar splitter takes a branch per piece on
//! its class, which mispredicts about once a piece; here a piece costs a `trailing_zeros`.
//!
//! Where a piece starts, for ASCII text without a contraction (`'` followed by a letter: those
//! bytes, and any byte of 0x80 or more, end the block and the scalar splitter goes on from the
//! last start before them). L, N, O are letters, digits and the rest but white space; SN is
//! white space other than `\r` `\n` (NL).
//! - A digit starts a piece (`\p{N}`), and so does what follows it.
//! - An O starts a piece unless it follows an O (`[^\s\p{L}\p{N}]+` takes the whole run) or a
//!   space (` ?` takes the space, which always starts a piece there: see below).
//! - A letter starts a piece unless it follows a letter, or an SN or an O that starts a piece
//!   (`[^\r\n\p{L}\p{N}]?\p{L}+` takes it as its first character).
//! - The NLs right after an O belong to the O's piece (`[\r\n]*`).
//! - In the rest of a white-space run (W), `\s*[\r\n]+` takes everything up to the last NL as
//!   one piece; the SN run left after it (B), followed by a non-space, splits as
//!   `\s+(?!\S)`: all but its last character, then the last character on its own (which, before
//!   a letter or after ` ` before an O, begins the next piece). So W starts a piece, B starts
//!   a piece, and so does the last character of a B of two or more.
//!
//! A run of white space that reaches the end of the block is left out of it (how it splits
//! depends on what follows), and the last piece of a block is never emitted: it may go on past
//! the block. The next block starts where it starts.

use crate::byte_masks::low_bits;
pub use crate::byte_masks::BLOCK;

/// One bit per byte of a block (bit k = byte k) for each class the rules need.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Classes {
    letter: u64,
    digit: u64,
    space: u64,
    /// `\t`, `\v`, `\f`: white space other than ` ` and the newlines.
    tab: u64,
    newline: u64,
    apostrophe: u64,
    /// Bytes of 0x80 or more.
    high: u64,
}

impl Classes {
    /// The masks of the bytes from `k` on (`k < 64`), moved down to bit 0: the classes of a
    /// block that starts `k` bytes into this one, whose bytes past this one's end are in no
    /// class (as the zero bytes of a padded block are).
    #[inline(always)]
    pub fn past(self, k: usize) -> Classes {
        Classes {
            letter: self.letter >> k,
            digit: self.digit >> k,
            space: self.space >> k,
            tab: self.tab >> k,
            newline: self.newline >> k,
            apostrophe: self.apostrophe >> k,
            high: self.high >> k,
        }
    }
}

/// Classify the 64 bytes of `block`.
#[inline(always)]
pub fn classify(block: &[u8; BLOCK]) -> Classes {
    #[cfg(target_arch = "x86_64")]
    {
        classify_sse2(block)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        classify_bytes(block)
    }
}

/// 16 bytes per compare (`byte_masks::sse2`), each compare's mask 16 bits of a class's.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn classify_sse2(block: &[u8; BLOCK]) -> Classes {
    use crate::byte_masks::sse2::{and_not, bits, equal, in_range, letters, load, or};
    let mut c = Classes::default();
    for part in 0..4 {
        let v = load(block, part);
        let newline = or(equal(v, b'\n'), equal(v, b'\r'));
        c.letter |= bits(letters(v), part);
        c.digit |= bits(in_range(v, b'0', 10), part);
        c.space |= bits(equal(v, b' '), part);
        c.tab |= bits(and_not(newline, in_range(v, b'\t', 5)), part);
        c.newline |= bits(newline, part);
        c.apostrophe |= bits(equal(v, b'\''), part);
        c.high |= bits(v, part);
    }
    c
}

/// The same masks a byte at a time (other targets, and the test oracle).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn classify_bytes(block: &[u8; BLOCK]) -> Classes {
    let mut c = Classes::default();
    for (k, &b) in block.iter().enumerate() {
        let bit = 1u64 << k;
        let set = |mask: &mut u64, yes: bool| {
            if yes {
                *mask |= bit
            }
        };
        set(&mut c.letter, b.is_ascii_alphabetic());
        set(&mut c.digit, b.is_ascii_digit());
        set(&mut c.space, b == b' ');
        set(&mut c.tab, matches!(b, b'\t' | 0x0b | 0x0c));
        set(&mut c.newline, matches!(b, b'\r' | b'\n'));
        set(&mut c.apostrophe, b == b'\'');
        set(&mut c.high, b >= 0x80);
    }
    c
}

/// Where pieces start in a block whose byte 0 starts one and whose first `len` bytes are text,
/// as a mask (bit 0 set), and how many bytes it knows: those before the first byte that ends
/// the block (see the module doc), less white space that reaches there. The piece at the last
/// start may go on past them.
#[inline(always)]
pub fn starts(c: &Classes, len: usize) -> (u64, usize) {
    let mut valid = low_bits(len);
    // A contraction may begin at an apostrophe before a letter; a byte at the end of a full
    // block has its next byte outside it.
    let hard = (c.high | (c.apostrophe & ((c.letter >> 1) | (1 << 63)))) & valid;
    valid &= low_bits(hard.trailing_zeros() as usize);
    let white = (c.space | c.tab | c.newline) & valid;
    let solid = valid & !white;
    // Cut the white space at the end: up to the last byte that is not white space.
    let known = 64 - solid.leading_zeros() as usize;
    if known == 0 {
        return (1, 0);
    }
    let valid = low_bits(known);
    let (letter, digit, white) = (c.letter & valid, c.digit & valid, white & valid);
    let space = c.space & valid;
    let newline = c.newline & valid;
    let blank = (c.space | c.tab) & valid;
    let other = valid & !(letter | digit | white);
    let solid = valid & !white;
    let after = |mask: u64| mask << 1;

    // Newlines right after an O are its piece's: the carry of adding each run's first bit
    // clears the run.
    let absorbed = newline & !newline.wrapping_add(newline & after(other));
    let runs = white & !absorbed;
    // B: the SN runs that end before a non-space (never at the block's end: cut above). Filled
    // backwards from their last byte, by the same carry on the reversed words.
    let b_last = blank & (solid >> 1);
    let reversed = blank.reverse_bits();
    let b = (reversed & !reversed.wrapping_add(b_last.reverse_bits())).reverse_bits();
    let white_starts = (runs & !after(runs)) | (b & !after(b)) | (b_last & after(b));

    let other_starts = other & !after(other) & !after(space);
    let letter_starts = letter & !after(letter) & !after(blank) & !after(other_starts);
    (
        (white_starts | other_starts | letter_starts | digit | 1) & valid,
        known,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse2_masks_are_the_byte_masks_for_every_byte_in_every_lane() {
        for b in 0..=255u8 {
            for lane in [0, 1, 15, 16, 31, 32, 47, 48, 63] {
                let mut block = [b'x'; BLOCK];
                block[lane] = b;
                assert_eq!(
                    classify(&block),
                    classify_bytes(&block),
                    "byte {b:#x} at {lane}"
                );
            }
        }
    }

    #[test]
    fn a_block_read_from_further_back_is_the_padded_block() {
        let text: Vec<u8> = (0..BLOCK as u8)
            .map(|k| b"a1 \t\n'\xc3.Z"[k as usize % 9])
            .collect();
        for k in 0..BLOCK {
            let mut padded = [0u8; BLOCK];
            padded[..BLOCK - k].copy_from_slice(&text[k..]);
            let window: &[u8; BLOCK] = text.as_slice().try_into().unwrap();
            assert_eq!(classify(window).past(k), classify(&padded), "{k}");
        }
    }

    #[test]
    fn byte_masks_agree_with_the_scalar_classes() {
        use super::super::unicode::{ascii_class, Class};
        for b in 0..0x80u8 {
            let mut block = [0u8; BLOCK];
            block[0] = b;
            let c = classify_bytes(&block);
            let class = match () {
                _ if c.letter & 1 == 1 => Class::Letter,
                _ if c.digit & 1 == 1 => Class::Number,
                _ if (c.space | c.tab | c.newline) & 1 == 1 => Class::Space,
                _ => Class::Other,
            };
            assert_eq!(class, ascii_class(b), "byte {b:#x}");
        }
    }
}
