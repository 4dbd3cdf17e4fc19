//! Entry points into a gzip stream (`reader::frames::gzip_points`, rust/reader/frames/
//! gzip_points/): the index pass (zlib's `Z_BLOCK` through `libz-rs-sys`) and a reader starting
//! at a point (`inflatePrime`, `inflateSetDictionary`, the member's CRC-32 finished there).
//!
//! Two modes (bit 0 of byte 0):
//! - built: the payload is text, compressed as one or two gzip members (bit 1) whose deflate
//!   blocks end every byte-1 bytes of text (1..=256), by partial, sync or full flushes or none
//!   as byte 2's bits choose (a block ending within a byte, at one, with the window reset). The
//!   index must take it; its text and newlines are the payload's; from every point the text
//!   read is the payload's rest. With bit 2, one byte (at bytes 3-4, past the first point's
//!   first byte) is flipped: from that point the read fails or, where the byte held no text
//!   (a later member's header time), gives the same rest.
//! - raw: the payload is the file. The index never panics; nor does a read from any point it
//!   gives, and when the whole file decodes (flate2's `MultiGzDecoder`, what prepare reads a
//!   file with) every point reads the rest of that text.
#![no_main]

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use data_io_core::reader::frames::gzip_points::{entry_points, EntryPoint, FromPoint};
use flate2::{Compress, Compression, FlushCompress};
use libfuzzer_sys::fuzz_target;

mod common;

/// `text` as a gzip member whose blocks end every `chunk` bytes, the flush of chunk `k` chosen
/// by bits `2k..2k+2` of `flushes` (cycling).
fn member(text: &[u8], chunk: usize, flushes: u8) -> Vec<u8> {
    let mut deflate = Compress::new(Compression::default(), false);
    let mut out = Vec::new();
    let chunks: Vec<&[u8]> = text.chunks(chunk.max(1)).collect();
    for (k, piece) in chunks.iter().enumerate() {
        let flush = match (flushes >> (2 * (k % 4))) & 3 {
            0 => FlushCompress::None,
            1 => FlushCompress::Partial,
            2 => FlushCompress::Sync,
            _ => FlushCompress::Full,
        };
        let mut taken = 0;
        loop {
            out.reserve(piece.len() + 256);
            let before = deflate.total_in();
            deflate
                .compress_vec(&piece[taken..], &mut out, flush)
                .expect("deflate");
            taken += (deflate.total_in() - before) as usize;
            if taken == piece.len() && out.capacity() > out.len() {
                break;
            }
        }
    }
    loop {
        out.reserve(256);
        if deflate
            .compress_vec(&[], &mut out, FlushCompress::Finish)
            .expect("deflate")
            == flate2::Status::StreamEnd
        {
            break;
        }
    }
    let mut crc = flate2::Crc::new();
    crc.update(text);
    let mut gz = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    gz.extend(out);
    gz.extend(crc.sum().to_le_bytes());
    gz.extend((text.len() as u32).to_le_bytes());
    gz
}

fn read_from(path: &Path, point: &EntryPoint) -> std::io::Result<Vec<u8>> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(point.bit / 8))?;
    let mut out = Vec::new();
    FromPoint::new(BufReader::new(file), point)?.read_to_end(&mut out)?;
    Ok(out)
}

fn newlines(text: &[u8]) -> u64 {
    text.iter().filter(|&&b| b == b'\n').count() as u64
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let [chunk, flushes, at_hi, at_lo, text @ ..] = rest else {
            return;
        };
        let chunk = usize::from(*chunk) + 1;
        let mut stored = if mode & 2 == 0 {
            member(text, chunk, *flushes)
        } else {
            let half = text.len() / 2;
            [member(&text[..half], chunk, *flushes), member(&text[half..], chunk, !*flushes)]
                .concat()
        };
        let path = common::scratch::write("input.gz", &stored);
        let index = entry_points(&path, 1).expect("a built file is indexed");
        assert_eq!(index.text, text.len() as u64);
        assert_eq!(index.newlines, newlines(text));
        for point in &index.points {
            let at = usize::try_from(point.text).expect("in memory");
            assert_eq!(point.newlines, newlines(&text[..at]));
            let read = read_from(&path, point).expect("read from a point");
            assert!(read == text[at..], "from the point at text {at}");
        }
        let Some(first) = index.points.first() else {
            return;
        };
        if mode & 4 != 0 {
            let start = first.bit / 8 + 1;
            let span = stored.len() as u64 - start;
            if span == 0 {
                return;
            }
            let flip = start + u64::from(u16::from_be_bytes([*at_hi, *at_lo])) % span;
            stored[flip as usize] ^= 0x55;
            let path = common::scratch::write("input.gz", &stored);
            if let Ok(read) = read_from(&path, first) {
                assert!(read == text[first.text as usize..], "a flip at {flip} read as text");
            }
        }
        return;
    }
    let path = common::scratch::write("input.gz", rest);
    let Ok(index) = entry_points(&path, 1) else {
        return;
    };
    let mut whole = Vec::new();
    let decoded = flate2::bufread::MultiGzDecoder::new(rest)
        .read_to_end(&mut whole)
        .is_ok();
    for point in index.points.iter().take(64) {
        let read = read_from(&path, point);
        if decoded {
            let read = read.expect("a file that decodes reads from its points");
            assert!(read == whole[point.text as usize..]);
        }
    }
});
