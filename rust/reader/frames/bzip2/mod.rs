//! bzip2 blocks. A bzip2 stream (`BZh`, a block size's digit) is a run of blocks of up to
//! 900 kB of text, each starting with a 48-bit magic at any bit (they are Huffman-coded, not
//! byte-aligned), and ends with a 48-bit end magic, the CRC of its blocks and padding to a
//! byte. The blocks decode on their own, as `lbzip2 -d` and `pbzip2 -d` show: so every bzip2
//! file, one stream of many blocks as `bzip2` and `lbzip2` write it or streams one after the
//! other as `pbzip2` does, is a run of parts, one a block.
//!
//! Nothing in the format gives a block's length, so the file is searched for the markers
//! (`markers`: eight byte patterns a marker, found by `memmem`, each hit checked bit by bit) and
//! walked from marker to marker (`scanned`). A part is a block: it starts at the byte holding
//! its magic's first bit (the first part at the start of the range walked), and its text is
//! decoded from its bits remade into a stream of their own with the other blocks of its run
//! (`remade`), the decoder checking each block's CRC and the run's. A unit's range is walked
//! from its first block to the one at its end; past that, one part stands for the rest of the
//! file, walked as it is read.

mod markers;
mod remade;
mod scanned;

use std::fs::File;
use std::io::Read;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::file_bytes::Bytes;
use super::Part;
use markers::{Marker, LOOK_AHEAD};
use remade::RemadeStream;
use scanned::ScannedBlocks;

/// A block's bits in the file: from its magic to the next marker; with `end` `OPEN`, every
/// block from `start` to the file's end (the part for the rest of the file, or a last block
/// cut short), walked as it is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub start: u64,
    pub end: u64,
    pub crc: u32,
}

pub const OPEN: u64 = u64::MAX;

/// The blocks of the file from byte `from` (0, or a byte where a block's magic starts) to the
/// one at byte `until`, as parts, then one part for the rest of the file; None when `from` or
/// `until` is not such a place, or when the walk finds anything wrong (the file is then one
/// part, whose decoder reports it).
pub(super) fn blocks(file: &Bytes<'_>, from: u64, until: u64) -> Option<Vec<Part>> {
    let first = first_at(file, from)?;
    let mut found = Vec::new();
    let most = super::file_bytes::most_parts(file.size);
    let mut at_until = None;
    for block in ScannedBlocks::new(file.file, file.size, first).with_open_end() {
        let block = block.ok()?;
        if found.len() >= most {
            return None;
        }
        if block.start >= until * 8 {
            at_until = Some(block);
            break;
        }
        found.push(block);
    }
    let starts: Vec<u64> = found.iter().map(|block| block.start / 8).collect();
    let mut parts = Part::tiling(from, &starts, until);
    for (part, block) in parts.iter_mut().zip(found) {
        part.bzip2 = Some(block);
    }
    if until < file.size {
        let next = at_until.filter(|next| next.start / 8 == until)?;
        let mut rest = Part::tiling(until, &[until], file.size);
        rest[0].bzip2 = Some(Block { end: OPEN, ..next });
        parts.extend(rest);
    }
    Some(parts)
}

/// The bit where the walk from byte `from` starts: the file's first stream's header (at 0), or
/// the block whose magic starts in that byte.
fn first_at(file: &Bytes<'_>, from: u64) -> Option<u64> {
    if from == 0 {
        let head: [u8; 4] = file.array(0)?;
        return scanned::is_header(&head).then_some(0);
    }
    let len = (8 + LOOK_AHEAD).min(file.size.checked_sub(from)?);
    let bytes = file.vec(from, len)?;
    markers::scan(&bytes, 0, 8)
        .into_iter()
        .find(|(_, marker)| matches!(marker, Marker::Block { .. }))
        .map(|(bit, _)| from * 8 + bit)
}

/// The text of the parts `run` (consecutive, ending at byte `end`), from `file` of `size`
/// bytes; `reached` follows the file offset of the bits the decoder has consumed.
pub(super) fn decoder(
    file: File,
    size: u64,
    run: &[Part],
    end: u64,
    reached: Arc<AtomicU64>,
) -> Box<dyn Read + Send> {
    let blocks: Vec<Block> = run.iter().filter_map(|part| part.bzip2).collect();
    let file = Arc::new(file);
    let open = blocks
        .iter()
        .find(|block| block.end == OPEN)
        .map(|block| ScannedBlocks::new(Arc::clone(&file), size, block.start));
    let known = blocks.into_iter().filter(|block| block.end != OPEN).map(Ok);
    let stream =
        RemadeStream::new(file, known.chain(open.into_iter().flatten())).counting(reached, end);
    Box::new(::bzip2::bufread::BzDecoder::new(stream))
}

#[cfg(test)]
mod tests {
    use super::super::test_files::{read_run, read_runs, stored, text};
    use super::super::{parts, parts_in};
    use super::*;
    use crate::reader::Compression;
    use std::io::Write;

    /// `text` compressed by bzip2 at block size `level` (100 kB a step).
    fn bz2(text: &[u8], level: u32) -> Vec<u8> {
        let level = ::bzip2::Compression::new(level);
        let mut encoder = ::bzip2::write::BzEncoder::new(Vec::new(), level);
        encoder.write_all(text).expect("compressed");
        encoder.finish().expect("compressed")
    }

    /// Text that compresses to Huffman codes of every length, so that blocks start at every bit.
    fn varied(len: usize) -> Vec<u8> {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut out = text(len / 40);
        out.extend((0..len).map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            b"aaaaaaaabbbbccd\n"[(state % 16) as usize]
        }));
        out
    }

    #[test]
    fn one_stream_of_many_blocks_is_a_part_a_block() {
        let plain = varied(700_000);
        let file = stored(&bz2(&plain, 1));
        let parts = parts(file.path(), Compression::Bzip2).expect("parts");
        assert!(parts.list.len() >= 8, "{} parts", parts.list.len());
        let shifts: std::collections::HashSet<u64> = parts
            .list
            .iter()
            .filter_map(|p| p.bzip2)
            .map(|b| b.start % 8)
            .collect();
        assert!(
            shifts.len() > 3,
            "blocks start at bits {shifts:?} of their bytes"
        );
        for bytes_a_run in [1, 150_000, 1 << 40] {
            assert!(read_runs(file.path(), &parts, bytes_a_run) == plain);
        }
    }

    #[test]
    fn streams_one_after_another_are_parts_a_block_too() {
        let plain = varied(500_000);
        // Streams of every size, an empty one among them, as pbzip2 and `cat` make them.
        let cuts = [0, 10, 10, 300_000, plain.len()];
        let bytes: Vec<u8> = cuts
            .windows(2)
            .flat_map(|w| bz2(&plain[w[0]..w[1]], 1))
            .collect();
        let file = stored(&bytes);
        let parts = parts(file.path(), Compression::Bzip2).expect("parts");
        assert!(parts.list.len() >= 6, "{} parts", parts.list.len());
        for bytes_a_run in [1, 1 << 40] {
            assert!(read_runs(file.path(), &parts, bytes_a_run) == plain);
        }
    }

    #[test]
    fn a_range_decodes_its_own_blocks_and_then_the_rest_of_the_file() {
        let plain = varied(600_000);
        let bytes: Vec<u8> = [bz2(&plain[..250_000], 1), bz2(&plain[250_000..], 2)].concat();
        let file = stored(&bytes);
        let whole = parts(file.path(), Compression::Bzip2).expect("parts");
        let starts = whole.starts();
        // Each block's text, from the whole file's walk.
        let texts: Vec<Vec<u8>> = (0..whole.list.len())
            .map(|k| read_run(file.path(), &whole, k..k + 1))
            .collect();
        assert!(texts.concat() == plain);
        for a in 0..starts.len() {
            for b in a + 1..=starts.len() {
                let until = starts.get(b).copied();
                let range =
                    parts_in(file.path(), Compression::Bzip2, starts[a], until).expect("parts");
                let run = range.between(starts[a], until).expect("a planned range");
                assert!(
                    read_run(file.path(), &range, run.clone()) == texts[a..b].concat(),
                    "{a}..{b}"
                );
                // The part for the rest of the file, walked as it is read.
                let rest = read_run(file.path(), &range, run.end..range.list.len());
                assert!(rest == texts[b..].concat(), "rest after {b}");
            }
        }
        // A byte where no block starts is not a range's start or end.
        let inside = starts[1] + 1;
        let range = parts_in(file.path(), Compression::Bzip2, inside, None).expect("parts");
        assert_eq!(range.between(inside, None), None);
        let range = parts_in(file.path(), Compression::Bzip2, 0, Some(inside)).expect("parts");
        assert_eq!(range.between(0, Some(inside)), None);
    }

    #[test]
    fn a_damaged_block_fails_to_decode_and_never_reads_as_text() {
        let plain = varied(400_000);
        let good = bz2(&plain, 1);
        let whole = {
            let file = stored(&good);
            parts(file.path(), Compression::Bzip2).expect("parts")
        };
        let middle = whole.list[whole.list.len() / 2].start + 500;
        for flip in [0x01u8, 0x10, 0x80] {
            let mut bad = good.clone();
            bad[middle as usize] ^= flip;
            let file = stored(&bad);
            let parts = parts(file.path(), Compression::Bzip2).expect("parts");
            let mut out = Vec::new();
            let file_handle = File::open(file.path()).expect("opened");
            let failed = parts
                .decoder(file_handle, 0..parts.list.len())
                .expect("decoder")
                .read_to_end(&mut out);
            assert!(failed.is_err(), "flip {flip}: {} bytes decoded", out.len());
        }
        // Cut short: the last block has no end.
        let file = stored(&good[..good.len() - 30]);
        let parts = parts(file.path(), Compression::Bzip2).expect("parts");
        let mut out = Vec::new();
        let handle = File::open(file.path()).expect("opened");
        assert!(parts
            .decoder(handle, 0..parts.list.len())
            .expect("decoder")
            .read_to_end(&mut out)
            .is_err());
    }

    #[test]
    fn a_file_a_whole_decoder_refuses_is_one_part_and_refused() {
        let first = bz2(&varied(150_000), 1);
        let second = bz2(&varied(120_000), 1);
        let mut bad_crc = [&first[..], &second[..]].concat();
        // The first stream's CRC: the 32 bits after its end magic, which ends the stream with
        // its padding; flipping a bit of its last byte may hit the padding, so flip the byte
        // before.
        bad_crc[first.len() - 2] ^= 0x10;
        let damaged = [
            // A stream's header and then the file's end.
            [&first[..], b"BZh9"].concat(),
            // A block right after a stream's end, with no header between.
            [&first[..], &second[4..]].concat(),
            bad_crc,
            // Bytes after the last stream.
            [&first[..], b"\0\0\0\0"].concat(),
        ];
        for (k, bytes) in damaged.iter().enumerate() {
            let file = stored(bytes);
            let parts = parts(file.path(), Compression::Bzip2).expect("parts");
            assert_eq!(parts.list.len(), 1, "file {k}: one part");
            assert_eq!(parts.list[0].bzip2, None, "file {k}");
            let mut out = Vec::new();
            let handle = File::open(file.path()).expect("opened");
            let read = parts
                .decoder(handle, 0..1)
                .expect("decoder")
                .read_to_end(&mut out);
            assert!(
                read.is_err(),
                "file {k}: the whole file's decoder refuses it too"
            );
        }
        // The same streams undamaged are parts a block.
        let file = stored(&[&first[..], &second[..]].concat());
        assert!(
            parts(file.path(), Compression::Bzip2)
                .expect("parts")
                .list
                .len()
                >= 3
        );
    }

    /// Text whose every block holds a false block marker that passes `markers`' checks: a
    /// block's used-bytes map (which byte values occur, sixteen bits a group of sixteen) is
    /// chosen by the text, so text made of the right byte values spells the block magic and
    /// plausible fields after it there. Returns the text and the marker's CRC field.
    fn spelling_a_false_marker(len: usize) -> (Vec<u8>, u32) {
        let crc = 0x1234_5678u32;
        let mut bits: Vec<bool> = Vec::new();
        let mut push = |value: u64, width: u32| {
            bits.extend((0..width).rev().map(|i| value >> i & 1 == 1));
        };
        push(markers::BLOCK, 48);
        push(u64::from(crc), 32);
        push(0, 1); // not randomised
        push(0x01_2345, 24); // an origin pointer within a block
        push(0xFFFF, 16); // a used-bytes map that is not empty
        push(0x7F, 7); // up to eight whole groups of sixteen: bytes 0..128, ASCII
        assert_eq!(bits.len(), 8 * 16);
        // Group k of the used map is bytes 16k..16k+16, the high bit first; each group is
        // written only when its own bits are not all zero.
        for group in bits.chunks(16) {
            assert!(group.iter().any(|&bit| bit), "every group has a byte");
        }
        let used: Vec<u8> = (0..bits.len())
            .filter(|&i| bits[i])
            .map(|i| i as u8)
            .collect();
        // The used bytes in a varied order, never one twice in a row: a run of four would add
        // its length (another byte value) to the block.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut text: Vec<u8> = Vec::with_capacity(len);
        while text.len() < len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let byte = used[(state % used.len() as u64) as usize];
            if text.last() != Some(&byte) {
                text.push(byte);
            }
        }
        (text, crc)
    }

    #[test]
    fn a_false_block_magic_in_a_block_is_caught_by_the_streams_crc_and_the_file_reads_whole() {
        let (plain, false_crc) = spelling_a_false_marker(350_000);
        let bytes = bz2(&plain, 1);
        // The first block's magic starts after the stream's header (32 bits); its used-bytes
        // map after the magic, the CRC, the randomised bit, the origin and the map's first
        // level (48 + 32 + 1 + 24 + 16 bits).
        let false_at = 32 + 121;
        assert_eq!(
            markers::marker_at(&bytes, false_at),
            Some(Marker::Block { crc: false_crc }),
            "the text spells a marker that passes the checks"
        );
        let found = markers::scan(&bytes, 0, bytes.len() as u64 * 8);
        let blocks = found
            .iter()
            .filter(|(_, marker)| matches!(marker, Marker::Block { .. }))
            .count();
        assert!(blocks >= 8, "{blocks} block magics: true and false alike");
        // Walked from its header, the stream's blocks' CRCs folded (the false ones among them)
        // are not the CRC stored at its end: the walk refuses to cut it, the file is one part,
        // and the whole file's decoder reads it right.
        let file = stored(&bytes);
        let whole = parts(file.path(), Compression::Bzip2).expect("parts");
        assert_eq!(whole.list.len(), 1);
        assert_eq!(whole.list[0].bzip2, None);
        assert!(read_runs(file.path(), &whole, 1 << 40) == plain);
        // Without the false markers (the map's first level after the false magic cleared by
        // leaving out byte values 105..=120), the same kind of text is cut into blocks.
        let honest: Vec<u8> = plain
            .iter()
            .copied()
            .filter(|byte| !(105..=120).contains(byte))
            .collect();
        let file = stored(&bz2(&honest, 1));
        let cut = parts(file.path(), Compression::Bzip2).expect("parts");
        assert!(cut.list.len() >= 3, "{} parts", cut.list.len());
        assert!(read_runs(file.path(), &cut, 1) == honest);
    }

    #[test]
    fn what_is_not_bzip2_is_one_part() {
        for bytes in [&b"BZh91AY"[..], b"plain text, not compressed", b""] {
            let file = stored(bytes);
            let parts = parts(file.path(), Compression::Bzip2).expect("parts");
            assert_eq!(parts.starts(), vec![0]);
            assert_eq!(parts.list[0].bzip2, None);
        }
    }
}
