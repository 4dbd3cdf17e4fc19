//! xz blocks (the .xz file format, 1.2.0): each stream ends with a footer that gives its
//! index's size, and the index lists every block's unpadded and uncompressed sizes; the blocks
//! lie one after the other behind the stream's 12-byte header, each padded to four bytes. A file
//! of several streams (with zero padding between them) is walked from its end.
//!
//! A run of blocks decodes as a stream of its own: the stream's header, the blocks as they are,
//! and an index and footer made for them, so the decoder checks every block and the index as it
//! checks a whole file.

use std::io::{BufRead, Cursor, Read};

use super::file_bytes::Bytes;
use super::Part;

const HEADER_MAGIC: [u8; 6] = [0xfd, b'7', b'z', b'X', b'Z', 0];
const FOOTER_MAGIC: [u8; 2] = [b'Y', b'Z'];
/// An index larger than this (a few million blocks) is not read: the file stays one part.
const MOST_INDEX_BYTES: u64 = 64 << 20;

/// A block's stream (its place in the file) and its sizes, as the index gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub stream: u32,
    pub unpadded: u64,
    pub text: u64,
}

/// The blocks of the file and its streams' headers, or None when it is not a clean run of
/// streams.
pub(super) fn blocks(file: &Bytes<'_>) -> Option<(Vec<Part>, Vec<[u8; 12]>)> {
    // Streams from the last to the first: (header, its first block's offset, blocks' sizes).
    let mut streams = Vec::new();
    let mut end = file.size;
    let mut left = super::file_bytes::most_parts(file.size);
    loop {
        while end >= 4 && file.array::<4>(end - 4)? == [0; 4] {
            end -= 4; // stream padding
        }
        if end == 0 {
            break;
        }
        let footer: [u8; 12] = file.array(end.checked_sub(12)?)?;
        if footer[10..] != FOOTER_MAGIC {
            return None;
        }
        let backward = (u64::from(u32::from_le_bytes(footer[4..8].try_into().ok()?)) + 1) * 4;
        if backward > MOST_INDEX_BYTES {
            return None;
        }
        let index_start = (end - 12).checked_sub(backward)?;
        let sizes = index(&file.vec(index_start, backward)?, left)?;
        left -= sizes.len();
        // Checked: sizes adding up past 2^64 (a damaged index) would wrap and place the blocks
        // anywhere; then the blocks end before the index, so `at += len` below cannot overflow.
        let blocks = sizes.iter().try_fold(0u64, |sum, (unpadded, _)| {
            sum.checked_add(unpadded.checked_next_multiple_of(4)?)
        })?;
        let start = index_start.checked_sub(blocks)?.checked_sub(12)?;
        let header: [u8; 12] = file.array(start)?;
        if header[..6] != HEADER_MAGIC || header[6..8] != footer[8..10] {
            return None;
        }
        streams.push((header, start + 12, sizes));
        end = start;
    }
    streams.reverse();
    let mut parts = Vec::new();
    let mut headers = Vec::new();
    for (stream, (header, mut at, sizes)) in streams.into_iter().enumerate() {
        headers.push(header);
        for (unpadded, text) in sizes {
            let len = unpadded.next_multiple_of(4);
            parts.push(Part {
                start: at,
                len,
                xz: Some(Block {
                    stream: u32::try_from(stream).ok()?,
                    unpadded,
                    text,
                }),
                bzip2: None,
            });
            at += len;
        }
    }
    Some((parts, headers))
}

/// The (unpadded, uncompressed) sizes an index lists, or None past `most` blocks.
fn index(bytes: &[u8], most: usize) -> Option<Vec<(u64, u64)>> {
    let (&indicator, mut rest) = bytes.split_first()?;
    if indicator != 0 {
        return None;
    }
    let count = varint(&mut rest)?;
    if count > u64::try_from(most).unwrap_or(u64::MAX) {
        return None;
    }
    let mut sizes = Vec::with_capacity(usize::try_from(count.min(1 << 20)).ok()?);
    for _ in 0..count {
        let unpadded = varint(&mut rest)?;
        let text = varint(&mut rest)?;
        if unpadded < 5 {
            return None;
        }
        sizes.push((unpadded, text));
    }
    Some(sizes)
}

/// A multibyte integer of the format (seven bits a byte, low first), taken from `bytes`.
fn varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for k in 0..9 {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f) << (7 * k);
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn crc32(bytes: &[u8]) -> [u8; 4] {
    let mut crc = flate2::Crc::new();
    crc.update(bytes);
    crc.sum().to_le_bytes()
}

/// The index and footer of a stream holding `blocks`, whose header is `header`.
fn index_and_footer<'a>(header: &[u8; 12], blocks: impl Iterator<Item = &'a Block>) -> Vec<u8> {
    let blocks: Vec<&Block> = blocks.collect();
    let mut index = vec![0];
    push_varint(&mut index, blocks.len() as u64);
    for block in &blocks {
        push_varint(&mut index, block.unpadded);
        push_varint(&mut index, block.text);
    }
    index.resize(index.len().next_multiple_of(4), 0);
    index.extend(crc32(&index));
    let backward = (index.len() / 4 - 1) as u32;
    let mut flags = backward.to_le_bytes().to_vec();
    flags.extend(&header[6..8]);
    index.extend(crc32(&flags));
    index.extend(flags);
    index.extend(FOOTER_MAGIC);
    index
}

/// A decoder of a run of one stream's blocks, read from `bytes` (buffered: the decoder reads
/// them through `BufRead`, so that what it consumed of them is counted, `Consumed`).
pub(super) fn decoder<'a>(
    header: [u8; 12],
    blocks: impl Iterator<Item = &'a Block>,
    bytes: impl BufRead + Send + 'static,
) -> Box<dyn Read + Send> {
    let tail = index_and_footer(&header, blocks);
    let stream = Cursor::new(header).chain(bytes).chain(Cursor::new(tail));
    Box::new(liblzma::bufread::XzDecoder::new(stream))
}

#[cfg(test)]
mod tests {
    use super::super::parts;
    use super::super::test_files::{read_runs, stored, text};
    use crate::reader::Compression;
    use std::io::Write;

    /// `text` as one xz stream of blocks of about `block` bytes of text.
    fn multi_block(text: &[u8], block: u64) -> Vec<u8> {
        let stream = liblzma::stream::MtStreamBuilder::new()
            .threads(2)
            .block_size(block)
            .preset(1)
            .encoder()
            .expect("encoder");
        let mut encoder = liblzma::write::XzEncoder::new_stream(Vec::new(), stream);
        encoder.write_all(text).expect("written");
        encoder.finish().expect("finished")
    }

    fn one_stream(text: &[u8]) -> Vec<u8> {
        let mut encoder = liblzma::write::XzEncoder::new(Vec::new(), 1);
        encoder.write_all(text).expect("written");
        encoder.finish().expect("finished")
    }

    #[test]
    fn a_file_of_more_blocks_than_one_a_kibibyte_is_one_part() {
        let plain = text(6_000);
        // Blocks of 32 bytes of text, under a hundred bytes each: more than the 4096 parts
        // any file may have.
        let file = stored(&multi_block(&plain, 32));
        let parts = parts(file.path(), Compression::Xz).expect("parts");
        assert_eq!(parts.starts(), vec![0]);
        assert_eq!(parts.list[0].xz, None);
        assert_eq!(read_runs(file.path(), &parts, 1), plain);
    }

    #[test]
    fn blocks_of_every_stream_are_found_and_each_run_decodes_on_its_own() {
        let plain = text(20_000);
        let (a, b) = plain.split_at(300_000);
        // Two multi-block streams with stream padding between them, then a one-block stream.
        let mut bytes = multi_block(a, 64 << 10);
        bytes.extend([0; 8]);
        bytes.extend(multi_block(&b[..200_000], 50_000));
        bytes.extend(one_stream(&b[200_000..]));
        let file = stored(&bytes);
        let parts = parts(file.path(), Compression::Xz).expect("parts");
        let blocks = 300_000usize.div_ceil(64 << 10) + 4 + 1;
        assert_eq!(parts.list.len(), blocks);
        assert_eq!(parts.xz_headers.len(), 3);
        for bytes_a_run in [1, 40_000, 1 << 40] {
            assert_eq!(read_runs(file.path(), &parts, bytes_a_run), plain);
        }
    }

    #[test]
    fn a_damaged_block_fails_its_run() {
        let plain = text(20_000);
        let mut bytes = multi_block(&plain, 100_000);
        let file = stored(&bytes);
        let parts = parts(file.path(), Compression::Xz).expect("parts");
        assert!(parts.list.len() > 3);
        // A byte inside the second block's compressed data.
        let at = (parts.list[1].start + parts.list[1].len / 2) as usize;
        bytes[at] ^= 0x55;
        let damaged = stored(&bytes);
        let mut out = Vec::new();
        let file = std::fs::File::open(damaged.path()).expect("opened");
        let outcome =
            std::io::Read::read_to_end(&mut parts.decoder(file, 1..2).expect("decoder"), &mut out);
        assert!(outcome.is_err());
    }

    #[test]
    fn a_cut_or_foreign_file_is_one_part() {
        let bytes = multi_block(&text(20_000), 100_000);
        for bad in [&bytes[..bytes.len() - 1], &bytes[1..], b"YZ", b"\0\0\0\0"] {
            let file = stored(bad);
            let parts = parts(file.path(), Compression::Xz).expect("parts");
            assert_eq!(parts.starts(), vec![0]);
        }
    }

    /// A stream whose index lists blocks adding up past 2^64 bytes (each size a varint under
    /// 2^63): the sum wrapped in a release build and put the stream's header back at byte 0,
    /// so the parts lay past the end of the file and out of order; now it is no index.
    #[test]
    fn an_index_of_sizes_adding_up_past_2_64_is_one_part() {
        let mut index = vec![0u8];
        super::push_varint(&mut index, 3);
        for unpadded in [(1u64 << 63) - 4, (1 << 63) - 4, 8] {
            super::push_varint(&mut index, unpadded);
            super::push_varint(&mut index, 1);
        }
        index.resize(index.len().next_multiple_of(4), 0);
        index.extend([0; 4]); // its CRC32 (not read)
        let mut header = super::HEADER_MAGIC.to_vec();
        header.extend([0, 4, 0, 0, 0, 0]); // flags (CRC64), CRC32 (not read)
        let mut bytes = header.clone();
        bytes.extend(&index);
        bytes.extend([0; 4]); // the footer's CRC32 (not read)
        bytes.extend(((index.len() / 4 - 1) as u32).to_le_bytes());
        bytes.extend(&header[6..8]);
        bytes.extend(super::FOOTER_MAGIC);
        let file = stored(&bytes);
        let parts = parts(file.path(), Compression::Xz).expect("parts");
        assert_eq!(parts.starts(), vec![0]);
    }
}
