//! The 48-bit markers of a bzip2 stream, found at any bit: a block's magic (π's digits,
//! 0x314159265359) and the end-of-stream magic (√π's, 0x177245385090). Blocks are Huffman-coded
//! and not byte-aligned, so each marker is searched as eight byte patterns, one a shift: at
//! shift `s` (the marker starting at bit `s` of a byte) the marker's bits 8 - s .. 48 - s fill
//! the five bytes after that one, which `memmem` finds at gigabytes a second; each hit is then
//! checked bit by bit.
//!
//! A block's Huffman-coded bits can hold a marker's pattern by chance (about once in 2^48 bits:
//! every 35 TB of blocks) or by design. A block magic is checked further against what follows
//! it in every block that libbzip2 accepts: the randomised bit clear (no bzip2 since 0.9.5 sets
//! it), an origin pointer within the largest block, and a used-bytes map that is not empty. A
//! false marker that passes (a block's used-bytes map is spelled by which byte values its text
//! holds, so text can spell one: the tests' `spelling_a_false_marker`) adds a false CRC to its
//! stream's, so a walk from the stream's header (`scanned`) finds the folded CRCs wrong and the
//! file is read whole by the stock decoder, right. Only a marker that passes that too (its 32
//! CRC bits chosen against the stream's, or by chance one time in 2^32) cuts a block in two;
//! the halves then fail to decode (a wrong Huffman code, or the block's or the remade stream's
//! CRC, which folds in the false one): an error, never a wrong text. A walk that starts inside a
//! stream (a unit's range, the part for the rest of a file) folds no CRC: it relies on the walk
//! from the file's start that planned the ranges.

use std::sync::OnceLock;

use memchr::memmem;

pub const BLOCK: u64 = 0x3141_5926_5359;
pub const END: u64 = 0x1772_4538_5090;
/// The bits after a block magic that are checked: CRC (32), randomised (1), origin pointer
/// (24), the used-bytes map's first level (16).
const BLOCK_CHECKED_BITS: u64 = 48 + 32 + 1 + 24 + 16;
/// The end-of-stream magic and the stream's CRC.
pub const END_BITS: u64 = 48 + 32;
/// The bytes a scan must see past the last place it looks at, to check a marker there.
pub const LOOK_AHEAD: u64 = BLOCK_CHECKED_BITS.div_ceil(8) + 1;
/// The largest origin pointer a block may have (libbzip2: 10 + 100,000 × the block size).
const MOST_ORIGIN: u64 = 900_010;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    /// A block, with its CRC (the 32 bits after the magic).
    Block { crc: u32 },
    /// A stream's end, with the stream's CRC (the 32 bits after the magic).
    End { crc: u32 },
}

/// The 64 bits of `bytes` from bit `bit` (bit 0: the high bit of byte 0), zeros past the end.
pub fn bits_at(bytes: &[u8], bit: u64) -> u64 {
    let byte = usize::try_from(bit / 8).unwrap_or(usize::MAX);
    let mut window = [0u8; 16];
    let held = bytes.get(byte..).unwrap_or_default();
    let n = held.len().min(9);
    window[..n].copy_from_slice(&held[..n]);
    (u128::from_be_bytes(window) << (bit % 8) >> 64) as u64
}

/// The marker that starts at bit `bit` of `bytes`, checked as the module says, or None.
pub fn marker_at(bytes: &[u8], bit: u64) -> Option<Marker> {
    let held = (bytes.len() as u64 * 8).saturating_sub(bit);
    let head = bits_at(bytes, bit);
    let crc = (bits_at(bytes, bit + 48) >> 32) as u32;
    match head >> 16 {
        END if held >= END_BITS => Some(Marker::End { crc }),
        BLOCK if held >= BLOCK_CHECKED_BITS => {
            let after = bits_at(bytes, bit + 80);
            let randomised = after >> 63;
            let origin = (after >> 39) & 0xFF_FFFF;
            let used = (after >> 23) & 0xFFFF;
            (randomised == 0 && origin <= MOST_ORIGIN && used != 0).then_some(Marker::Block { crc })
        }
        _ => None,
    }
}

/// The markers starting at bits `from..to` of `bytes`, in order. To check a marker near `to`,
/// `bytes` holds `LOOK_AHEAD` bytes past bit `to` (or ends where the file does).
pub fn scan(bytes: &[u8], from: u64, to: u64) -> Vec<(u64, Marker)> {
    let mut found = Vec::new();
    if from >= to {
        return found;
    }
    // A hit at byte i of a shift-s needle is a marker at bit (i - 1) * 8 + s.
    let first = usize::try_from(from / 8).unwrap_or(usize::MAX);
    let last = usize::try_from(to.div_ceil(8) + 6).unwrap_or(usize::MAX);
    let Some(region) = bytes.get(first..last.min(bytes.len())) else {
        return found;
    };
    for needle in needles() {
        for i in needle.finder.find_iter(region) {
            let Some(before) = (first + i).checked_sub(1) else {
                continue;
            };
            let bit = before as u64 * 8 + u64::from(needle.shift);
            if (from..to).contains(&bit) {
                if let Some(marker) = marker_at(bytes, bit) {
                    found.push((bit, marker));
                }
            }
        }
    }
    found.sort_unstable_by_key(|&(bit, _)| bit);
    found
}

/// One marker at one shift: the five bytes it fills after its first.
struct Needle {
    finder: memmem::Finder<'static>,
    shift: u8,
}

fn needles() -> &'static [Needle] {
    static NEEDLES: OnceLock<Vec<Needle>> = OnceLock::new();
    NEEDLES.get_or_init(|| {
        [BLOCK, END]
            .into_iter()
            .flat_map(|marker| {
                (0..8u8).map(move |shift| {
                    // The marker at bit `shift` of a 7-byte window (the low 7 bytes of the u64);
                    // the window's bytes 1..6 are all the marker's own.
                    let window = (marker << (8 - shift)).to_be_bytes();
                    Needle {
                        finder: memmem::Finder::new(&window[2..7]).into_owned(),
                        shift,
                    }
                })
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bits` (a string of 0 and 1) as bytes, the last padded with zeros.
    fn packed(bits: &str) -> Vec<u8> {
        bits.as_bytes()
            .chunks(8)
            .map(|chunk| {
                let byte = chunk.iter().fold(0u8, |b, &c| b << 1 | (c - b'0'));
                byte << (8 - chunk.len())
            })
            .collect()
    }

    fn binary(value: u64, bits: usize) -> String {
        format!("{value:0bits$b}")
    }

    /// A block's head: its magic, a CRC, randomised 0, an origin pointer, a used map.
    fn block_head(crc: u32, origin: u64, used: u64) -> String {
        [
            binary(BLOCK, 48),
            binary(u64::from(crc), 32),
            "0".into(),
            binary(origin, 24),
            binary(used, 16),
        ]
        .concat()
    }

    #[test]
    fn markers_are_found_at_every_shift_and_checked() {
        for lead in 0..20 {
            let filler = "10".repeat(lead).chars().take(lead).collect::<String>();
            let bits = [
                filler.clone(),
                block_head(0xDEAD_BEEF, 5, 0x8000),
                "0110".into(),
                binary(END, 48),
                binary(7, 32),
                "0".repeat(64),
            ]
            .concat();
            let bytes = packed(&bits);
            let block = lead as u64;
            let end = block + BLOCK_CHECKED_BITS + 4;
            assert_eq!(
                scan(&bytes, 0, bytes.len() as u64 * 8),
                vec![
                    (block, Marker::Block { crc: 0xDEAD_BEEF }),
                    (end, Marker::End { crc: 7 })
                ],
                "lead {lead}"
            );
            // Only the places asked for.
            assert_eq!(scan(&bytes, block + 1, end), vec![]);
            assert_eq!(
                scan(&bytes, end, end + 1),
                vec![(end, Marker::End { crc: 7 })]
            );
        }
    }

    #[test]
    fn a_block_magic_without_a_block_after_it_is_not_a_marker() {
        for (randomised, origin, used) in [("1", 5, 1), ("0", 900_011, 1), ("0", 5, 0)] {
            let bits = [
                binary(BLOCK, 48),
                binary(1, 32),
                randomised.into(),
                binary(origin, 24),
                binary(used, 16),
                "0".repeat(64),
            ]
            .concat();
            assert_eq!(scan(&packed(&bits), 0, 64), vec![]);
        }
        // Cut short: too few bits to check.
        let whole = packed(&block_head(1, 5, 1));
        assert_eq!(scan(&whole, 0, 8).len(), 1);
        assert_eq!(scan(&whole[..whole.len() - 1], 0, 8), vec![]);
    }

    #[test]
    fn bits_are_read_across_bytes() {
        let bytes = [0b1010_1010, 0xFF, 0x00, 0x0F, 1, 2, 3, 4, 5, 6];
        assert_eq!(bits_at(&bytes, 0) >> 56, 0b1010_1010);
        assert_eq!(bits_at(&bytes, 1) >> 56, 0b0101_0101);
        assert_eq!(bits_at(&bytes, 7) >> 56, 0b0111_1111);
        assert_eq!(bits_at(&bytes, 20) >> 56, 0x00);
        assert_eq!(bits_at(&bytes, 76), 0x6000_0000_0000_0000);
        assert_eq!(bits_at(&bytes, 1000), 0);
    }
}
