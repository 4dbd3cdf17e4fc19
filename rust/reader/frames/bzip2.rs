//! bzip2 streams one after the other, as `pbzip2` writes them (and `cat a.bz2 b.bz2`). Nothing
//! in the format gives a stream's length, but each starts byte-aligned with `BZh`, its block
//! size's digit and the 48-bit magic of its first block (or of the end, when it is empty), and
//! ends with the 48-bit end-of-stream magic and a CRC, padded to a byte. So the file is searched
//! for the start pattern (memmem, gigabytes a second), and a place is taken as a stream's start
//! only when the bytes before it end a stream: the end magic and CRC finishing 0-7 bits before
//! it. A block's Huffman-coded bits could still hold both patterns by chance (about one chance
//! in 2^120 a place) or by design; then a part ends inside a stream and its decoding fails with
//! an error: never a wrong text. `lbzip2` writes one stream of many blocks, which is one part.

use memchr::memmem;

use super::file_bytes::Bytes;

const BLOCK_MAGIC: [u8; 6] = [0x31, 0x41, 0x59, 0x26, 0x53, 0x59];
const END_MAGIC: u64 = 0x1772_4538_5090;
/// The file is searched this much at a time.
const CHUNK: u64 = 8 << 20;
/// A stream start's pattern: `BZh`, a digit, a magic.
const START_LEN: usize = 10;

/// The starts of the streams between bytes `from` and `until` (each a stream's start, or the
/// file's ends), or None when either is not.
pub(super) fn streams(file: &Bytes<'_>, from: u64, until: u64) -> Option<Vec<u64>> {
    let is_start = |place: u64| {
        let pattern = file.vec(place, (START_LEN as u64).min(file.size - place));
        pattern.is_some_and(|p| starts_stream(&p)) && (place == 0 || ends_stream(file, place))
    };
    if !is_start(from) || (until < file.size && !is_start(until)) {
        return None;
    }
    let finder = memmem::Finder::new(b"BZh");
    let mut starts = vec![from];
    let mut at = from;
    while at < until {
        // The places this chunk owns, and the pattern's bytes past the last of them.
        let own = CHUNK.min(until - at);
        let bytes = file.vec(at, (own + START_LEN as u64).min(file.size - at))?;
        let own = own as usize;
        for i in finder.find_iter(&bytes).take_while(|&i| i < own) {
            let place = at + i as u64;
            if place > from && starts_stream(&bytes[i..]) && ends_stream(file, place) {
                starts.push(place);
            }
        }
        at += CHUNK;
    }
    Some(starts)
}

/// Whether `bytes` begin a stream: `BZh`, a block size of 1-9, a block's or the end's magic.
fn starts_stream(bytes: &[u8]) -> bool {
    let Some(pattern) = bytes.get(..START_LEN) else {
        return false;
    };
    let magic = &pattern[4..];
    pattern.starts_with(b"BZh")
        && (b'1'..=b'9').contains(&pattern[3])
        && (magic == BLOCK_MAGIC || magic == &END_MAGIC.to_be_bytes()[2..])
}

/// Whether a stream ends just before byte `place`: the end magic and the 32-bit CRC after it
/// finish 0 to 7 bits before `place` (the rest of the byte is padding).
fn ends_stream(file: &Bytes<'_>, place: u64) -> bool {
    let Some(before) = place.checked_sub(11).and_then(|at| file.array::<11>(at)) else {
        return false;
    };
    let bits = before
        .iter()
        .fold(0u128, |bits, &byte| bits << 8 | u128::from(byte));
    (0..8).any(|pad| (bits >> (pad + 32)) as u64 & 0xFFFF_FFFF_FFFF == END_MAGIC)
}

#[cfg(test)]
mod tests {
    use super::super::parts;
    use super::super::test_files::{read_runs, stored, text};
    use super::*;
    use crate::reader::Compression;
    use std::io::Write;

    fn bz2(text: &[u8]) -> Vec<u8> {
        let mut encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        encoder.write_all(text).expect("compressed");
        encoder.finish().expect("compressed")
    }

    #[test]
    fn streams_are_found_and_each_run_decodes_on_its_own() {
        let plain = text(20_000);
        // Streams of every size, an empty one among them.
        let pieces = [
            &plain[..10],
            &plain[10..10],
            &plain[10..300_000],
            &plain[300_000..],
        ];
        let bytes: Vec<u8> = pieces.iter().flat_map(|p| bz2(p)).collect();
        let file = stored(&bytes);
        let parts = parts(file.path(), Compression::Bzip2).expect("parts");
        assert_eq!(parts.list.len(), 4);
        for bytes_a_run in [1, 1 << 40] {
            assert_eq!(read_runs(file.path(), &parts, bytes_a_run), plain);
        }
    }

    /// The streams `streams` finds in a file holding `bytes`.
    fn found(bytes: &[u8]) -> Option<usize> {
        let file = stored(bytes);
        let at = Bytes {
            file: file.as_file(),
            size: bytes.len() as u64,
        };
        streams(&at, 0, at.size).map(|starts| starts.len())
    }

    #[test]
    fn a_start_pattern_not_after_a_stream_end_is_not_a_start() {
        let one = bz2(&text(1000));
        // The pattern right after a stream's end is a start; the same pattern one byte later
        // is not, nor is a file too short to hold the pattern.
        assert_eq!(found(&[&one[..], b"BZh91AY&SY"].concat()), Some(2));
        assert_eq!(found(&[&one[..], b"xBZh91AY&SY"].concat()), Some(1));
        assert_eq!(found(b"BZh91AY"), None);
    }
}
