//! zstd frames, found from their headers (RFC 8878): a frame's header gives its own length,
//! each block's three-byte header the block's, and a skippable frame (a seek table, `pzstd`'s
//! sizes) its own. A skippable frame is not a part: it goes with the frame before it (or the
//! first one), where the decoder passes over it.

use super::file_bytes::Bytes;

const MAGIC: u32 = 0xFD2F_B528;
/// Skippable frames' magic numbers: this with any low four bits.
const SKIPPABLE: u32 = 0x184D_2A50;

/// The starts of the frames between bytes `from` and `until` (each a frame's start, or the
/// file's ends), or None when they are not a clean run of frames.
pub(super) fn frames(file: &Bytes<'_>, from: u64, until: u64) -> Option<Vec<u64>> {
    let mut starts = Vec::new();
    let most = super::file_bytes::most_parts(file.size);
    let mut at = from;
    while at < until {
        let magic = u32::from_le_bytes(file.array(at)?);
        if magic & 0xFFFF_FFF0 == SKIPPABLE {
            let len = u32::from_le_bytes(file.array(at + 4)?);
            at = at.checked_add(8 + u64::from(len))?;
            continue;
        }
        if magic != MAGIC {
            return None;
        }
        if starts.len() >= most {
            return None;
        }
        starts.push(at);
        at = frame_end(file, at)?;
    }
    // A part runs to the next frame's start (taking any skippable frames after it).
    (at == until).then_some(starts)
}

/// The end of the frame starting at `at`.
fn frame_end(file: &Bytes<'_>, at: u64) -> Option<u64> {
    let [descriptor] = file.array::<1>(at + 4)?;
    if descriptor & 0x08 != 0 {
        return None; // the reserved bit: not a frame this walk understands
    }
    let single_segment = descriptor & 0x20 != 0;
    let checksum = descriptor & 0x04 != 0;
    let dictionary = [0, 1, 2, 4][usize::from(descriptor & 0x03)];
    let content_size = match descriptor >> 6 {
        0 => u64::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let header = 1 + u64::from(!single_segment) + dictionary + content_size;
    let mut block = at + 4 + header;
    loop {
        let [a, b, c] = file.array::<3>(block)?;
        let header = u32::from(a) | u32::from(b) << 8 | u32::from(c) << 16;
        let size = u64::from(header >> 3);
        let content = match (header >> 1) & 0x03 {
            0 | 2 => size, // raw, compressed
            1 => 1,        // RLE: one byte, repeated
            _ => return None,
        };
        block = block.checked_add(3 + content)?;
        if header & 1 == 1 {
            break;
        }
    }
    let end = block + if checksum { 4 } else { 0 };
    (end <= file.size).then_some(end)
}

#[cfg(test)]
mod tests {
    use super::super::parts;
    use super::super::test_files::{read_runs, stored, text};
    use crate::reader::Compression;
    use std::io::Write;

    /// `text` as zstd frames of `chunk` bytes of text each, with a skippable frame after each.
    fn framed(text: &[u8], chunk: usize, skippable: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in text.chunks(chunk) {
            out.extend(zstd::encode_all(piece, 3).expect("compressed"));
            if skippable {
                out.extend(0x184D_2A5Eu32.to_le_bytes());
                out.extend(5u32.to_le_bytes());
                out.extend(b"seek!");
            }
        }
        out
    }

    #[test]
    fn as_many_frames_as_a_file_may_have_are_parts_with_a_seek_table_after_them() {
        // 4096 frames (the fewest any file may be cut into) and a skippable frame at the end,
        // as the seekable format ends: every frame a part; one frame more, and one part.
        for (frames, parts_expected) in [(4096usize, 4096usize), (4097, 1)] {
            let lines: Vec<u8> = (0..frames)
                .flat_map(|k| format!("{k}\n").into_bytes())
                .collect();
            let mut bytes = Vec::new();
            let mut at = 0;
            for k in 0..frames {
                let end = at + format!("{k}\n").len();
                bytes.extend(zstd::encode_all(&lines[at..end], 1).expect("compressed"));
                at = end;
            }
            bytes.extend(0x184D_2A5Eu32.to_le_bytes());
            bytes.extend(5u32.to_le_bytes());
            bytes.extend(b"seek!");
            let file = stored(&bytes);
            let found = parts(file.path(), Compression::Zstd).expect("parts");
            assert_eq!(found.list.len(), parts_expected, "{frames} frames");
            assert_eq!(read_runs(file.path(), &found, 1 << 40), lines);
        }
    }

    #[test]
    fn frames_are_found_and_each_run_decodes_on_its_own() {
        let plain = text(20_000);
        for skippable in [false, true] {
            let bytes = framed(&plain, 50_000, skippable);
            let file = stored(&bytes);
            let parts = parts(file.path(), Compression::Zstd).expect("parts");
            assert_eq!(parts.list.len(), plain.len().div_ceil(50_000));
            let covered: u64 = parts.list.iter().map(|p| p.len).sum();
            assert_eq!(covered, bytes.len() as u64);
            for bytes_a_run in [1, 30_000, 1 << 40] {
                assert_eq!(read_runs(file.path(), &parts, bytes_a_run), plain);
            }
        }
    }

    #[test]
    fn a_frame_with_a_checksum_and_content_size_and_a_streamed_one() {
        let plain = text(5_000);
        let mut bytes = Vec::new();
        let mut encoder = zstd::Encoder::new(Vec::new(), 1).expect("encoder");
        encoder.include_checksum(true).expect("checksum");
        encoder.write_all(&plain[..40_000]).expect("written");
        bytes.extend(encoder.finish().expect("finished"));
        // Streamed with no content size, in small blocks.
        let mut encoder = zstd::Encoder::new(Vec::new(), 19).expect("encoder");
        encoder.include_contentsize(false).expect("no size");
        for line in plain[40_000..].chunks(100) {
            encoder.write_all(line).expect("written");
            encoder.flush().expect("flushed");
        }
        bytes.extend(encoder.finish().expect("finished"));
        let file = stored(&bytes);
        let parts = parts(file.path(), Compression::Zstd).expect("parts");
        assert_eq!(parts.list.len(), 2);
        assert_eq!(read_runs(file.path(), &parts, 1), plain);
    }

    #[test]
    fn a_range_walks_only_its_own_frames() {
        use super::super::parts_in;
        let plain = text(20_000);
        let bytes = framed(&plain, 50_000, true);
        let whole = parts(stored(&bytes).path(), Compression::Zstd).expect("parts");
        let starts = whole.starts();
        // Headers past the range damaged: the whole walk gives up, the range's does not.
        let mut damaged = bytes.clone();
        let last = starts[starts.len() - 1] as usize;
        damaged[last + 4] = 0xff;
        let file = stored(&damaged);
        assert_eq!(
            parts(file.path(), Compression::Zstd)
                .expect("parts")
                .starts(),
            [0]
        );
        let range = parts_in(file.path(), Compression::Zstd, starts[1], Some(starts[3]));
        let range = range.expect("parts");
        assert_eq!(range.starts(), [starts[1], starts[2], starts[3]]);
        assert_eq!(range.between(starts[1], Some(starts[3])), Some(0..2));
        // Not a frame's start: the file is one part, and no range starts there.
        let off = parts_in(file.path(), Compression::Zstd, starts[1] + 1, None).expect("parts");
        assert_eq!(off.between(starts[1] + 1, None), None);
    }

    #[test]
    fn a_cut_or_foreign_file_is_one_part() {
        let bytes = framed(&text(20_000), 50_000, false);
        let cut = &bytes[..bytes.len() - 10];
        let garbage = [&bytes[..], b"not zstd"].concat();
        for bad in [cut, &garbage[..], b"\x28\xb5\x2f\xfd", b""] {
            let file = stored(bad);
            let parts = parts(file.path(), Compression::Zstd).expect("parts");
            assert_eq!(parts.starts(), vec![0], "{} bytes", bad.len());
        }
    }
}
