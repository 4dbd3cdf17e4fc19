//! Compressed test files made of parts, and what their tests share.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use super::Parts;

/// Text of `lines` numbered lines, distinct enough not to compress to nothing.
pub fn text(lines: usize) -> Vec<u8> {
    (0..lines)
        .flat_map(|i| {
            format!("line {i}: {} {}\n", i * 7919 % 1013, "x".repeat(i % 37)).into_bytes()
        })
        .collect()
}

/// A file holding `bytes`, kept until the returned guard drops.
pub fn stored(bytes: &[u8]) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(bytes).expect("written");
    file
}

/// The text of every run of the parts read through `decoder`, joined.
pub fn read_runs(path: &Path, parts: &Parts, bytes: u64) -> Vec<u8> {
    let runs = parts.runs(0..parts.list.len(), bytes);
    runs.into_iter()
        .flat_map(|run| read_run(path, parts, run))
        .collect()
}

/// The text of the parts `run`, read through `decoder`.
pub fn read_run(path: &Path, parts: &Parts, run: std::ops::Range<usize>) -> Vec<u8> {
    let mut out = Vec::new();
    let file = File::open(path).expect("opened");
    parts
        .decoder(file, run)
        .expect("decoder")
        .read_to_end(&mut out)
        .expect("decoded");
    out
}

/// One BGZF member holding `piece` (at most 64 KiB compressed): a gzip member whose extra
/// field has the `BC` subfield.
pub fn bgzf_member(piece: &[u8]) -> Vec<u8> {
    let mut deflated = flate2::write::DeflateEncoder::new(Vec::new(), Default::default());
    deflated.write_all(piece).expect("compressed");
    let deflated = deflated.finish().expect("compressed");
    let mut crc = flate2::Crc::new();
    crc.update(piece);
    let size = 12 + 6 + deflated.len() + 8;
    let mut out = vec![
        0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff, 6, 0, b'B', b'C', 2, 0,
    ];
    out.extend(
        u16::try_from(size - 1)
            .expect("a small member")
            .to_le_bytes(),
    );
    out.extend(deflated);
    out.extend(crc.sum().to_le_bytes());
    out.extend((piece.len() as u32).to_le_bytes());
    out
}

/// `text` as BGZF members of `chunk` bytes each, with BGZF's empty end member.
pub fn bgzf(text: &[u8], chunk: usize) -> Vec<u8> {
    let mut out: Vec<u8> = text.chunks(chunk).flat_map(bgzf_member).collect();
    out.extend(bgzf_member(b""));
    out
}

/// `text` as one gzip member whose deflate blocks end about every `every` bytes of text,
/// some at a byte's end (a sync flush), most within one (a partial flush).
pub fn gzip_in_blocks(text: &[u8], every: usize) -> Vec<u8> {
    use flate2::{Compress, Compression as Level, FlushCompress};
    let mut deflate = Compress::new(Level::default(), false);
    let mut out = Vec::with_capacity(text.len() + 1024);
    let chunks: Vec<&[u8]> = text.chunks(every).collect();
    for (k, chunk) in chunks.iter().enumerate() {
        let flush = match (k + 1 == chunks.len(), k % 3) {
            (true, _) => FlushCompress::Finish,
            (false, 0) => FlushCompress::Sync,
            _ => FlushCompress::Partial,
        };
        let mut taken = 0;
        loop {
            out.reserve(chunk.len() + 1024);
            let before = deflate.total_in();
            deflate
                .compress_vec(&chunk[taken..], &mut out, flush)
                .expect("compressed");
            taken += (deflate.total_in() - before) as usize;
            if taken == chunk.len() && out.capacity() > out.len() {
                break;
            }
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
