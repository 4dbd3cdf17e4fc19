//! Where a compressed file can be entered (`reader::frames`, rust/reader/frames/): the walks of
//! zstd frames, BGZF members, xz indexes and bzip2 blocks over arbitrary bytes, and the text of their parts
//! decoded on several lanes (`ParallelText`) and on the calling thread (`SequentialText`).
//!
//! Two modes (bit 2 of byte 0; bits 0-1 pick zstd, gzip, xz or bzip2; bits 3-4 the lanes):
//! - built: the payload is text, cut into chunks of byte 1's size (1..=256), each chunk a zstd
//!   frame, a BGZF member (and BGZF's empty end member), an xz or a bzip2 stream. The walk must find
//!   exactly those parts (bzip2 with byte 1 at 1 modulo 8: one stream of the text repeated, each copy numbered, past 210 kB,
//!   blocks of 100 kB, parts whose bits start anywhere in a byte; their count is bzip2's), and the text of every part, read on 1-3 lanes or in order, must be
//!   the payload; so must the lines of runs of every few parts (`LinesOfParts`, what a
//!   `tokenize` unit reads), joined;
//! - raw: the payload is the file. The walk must return, never panic, and its parts must tile
//!   the file in order; when the whole file decodes (the multi-stream decoders prepare used
//!   before) and the parts decode too, both give the same text.
#![no_main]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use data_io_core::reader::frames::{parts, LinesOfParts, ParallelText, Parts, SequentialText};
use data_io_core::reader::{decompressed, Compression};
use libfuzzer_sys::fuzz_target;

mod common;

fn write(bytes: &[u8]) -> PathBuf {
    common::scratch::write("input", bytes)
}

fn bgzf_member(piece: &[u8]) -> Vec<u8> {
    let mut deflated = flate2::write::DeflateEncoder::new(Vec::new(), Default::default());
    deflated.write_all(piece).expect("deflate");
    let deflated = deflated.finish().expect("deflate");
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

fn built(text: &[u8], chunk: usize, compression: Compression) -> (Vec<u8>, usize) {
    let pieces: Vec<&[u8]> = if text.is_empty() {
        vec![text]
    } else {
        text.chunks(chunk).collect()
    };
    let mut out = Vec::new();
    for piece in &pieces {
        out.extend(match compression {
            Compression::Zstd => zstd::encode_all(*piece, 1).expect("zstd"),
            Compression::Gzip => bgzf_member(piece),
            Compression::Bzip2 => {
                let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
                bz.write_all(piece).expect("bzip2");
                bz.finish().expect("bzip2")
            }
            _ => {
                let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 0);
                xz.write_all(piece).expect("xz");
                xz.finish().expect("xz")
            }
        });
    }
    let mut count = pieces.len();
    if compression == Compression::Gzip {
        out.extend(bgzf_member(b""));
        count += 1;
    }
    (out, count)
}

/// The text of every part, on `lanes` lanes (0: in order on this thread).
fn read_parts(path: &Path, parts: &Arc<Parts>, lanes: usize) -> std::io::Result<Vec<u8>> {
    let range = 0..parts.list.len();
    let mut text = Vec::new();
    match lanes {
        0 => SequentialText::new(path.to_path_buf(), Arc::clone(parts), range, Arc::default())
            .read_to_end(&mut text)?,
        _ => ParallelText::new(path, Arc::clone(parts), range, lanes, Arc::default())
            .read_to_end(&mut text)?,
    };
    Ok(text)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let compression = [
        Compression::Zstd,
        Compression::Gzip,
        Compression::Xz,
        Compression::Bzip2,
    ][usize::from(mode & 3)];
    let lanes = usize::from(mode >> 3) % 4;
    if mode & 4 == 0 {
        let Some((&chunk, text)) = rest.split_first() else {
            return;
        };
        let one_stream = compression == Compression::Bzip2 && chunk % 8 == 1 && !text.is_empty();
        let repeated: Vec<u8>;
        let (file, count, text) = if one_stream {
            // Each copy numbered: a text repeated as it is sends bzip2 to its slow fallback
            // sort, which under coverage instrumentation took most of the target's time.
            let copies = 210_000usize.div_ceil(text.len() + 8);
            repeated = (0..copies)
                .flat_map(|k| [text, format!(" {k}\n").as_bytes()].concat())
                .collect();
            let (file, _) = built(&repeated, repeated.len(), compression);
            (file, None, &repeated[..])
        } else {
            let (file, count) = built(text, usize::from(chunk) + 1, compression);
            (file, Some(count), text)
        };
        let path = write(&file);
        let parts = Arc::new(parts(&path, compression).expect("parts"));
        if let Some(count) = count {
            assert_eq!(parts.list.len(), count, "{compression:?}");
        }
        let read = read_parts(&path, &parts, lanes).expect("a built file decodes");
        assert!(read == text, "{compression:?} on {lanes} lanes");
        // At most about six ranges (each opens the file and its lanes): the walks stay the
        // target's main work.
        let step = parts.list.len().div_ceil(6) + usize::from(chunk % 3);
        let cuts: Vec<u64> = parts.starts().into_iter().step_by(step.max(1)).collect();
        let mut joined = Vec::new();
        for (k, &start) in cuts.iter().enumerate() {
            let end = cuts.get(k + 1).copied();
            LinesOfParts::open(&path, compression, start, end, lanes.max(1), Arc::default())
                .expect("a range of a built file opens")
                .read_to_end(&mut joined)
                .expect("a range of a built file decodes");
        }
        assert!(
            joined == text,
            "{compression:?}: the ranges' lines are not the text"
        );
        return;
    }
    let path = write(rest);
    let Ok(found) = parts(&path, compression) else {
        return;
    };
    let starts = found.starts();
    assert_eq!(starts[0], 0);
    assert!(starts.windows(2).all(|w| w[0] < w[1]), "parts in order");
    let last = found.list.last().expect("a part at least");
    assert!(last.start + last.len <= rest.len() as u64);
    if found.list.len() < 2 {
        return;
    }
    let mut whole = Vec::new();
    let file = std::fs::File::open(&path).expect("open");
    let decoded = decompressed(std::io::BufReader::new(file), compression)
        .and_then(|mut text| text.read_to_end(&mut whole));
    if let (Ok(_), Ok(read)) = (decoded, read_parts(&path, &Arc::new(found), lanes)) {
        assert!(
            read == whole,
            "{compression:?}: the parts' text differs from the whole's"
        );
    }
});
