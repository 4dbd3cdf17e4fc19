//! Entry points into a gzip stream, so that a file of one member (what `gzip` and `pigz` write)
//! can be cut into ranges that each decompress only their own text.
//!
//! A deflate stream only decodes from its start: each block may copy from the 32 KiB of text
//! before it, and blocks start at any bit. zlib's `examples/zran.c` shows the way in: decode the
//! stream once, and at the end of a block note where the next one starts (its bit), the text
//! offset there and the 32 KiB of text before it; a reader then starts at that bit with that
//! text as its window. Here each point also keeps what a reader entering there needs to check
//! its member whole and to number its lines as the file's: the newlines before it, and the
//! CRC-32 and length of its member's text before it (`FromPoint` finishes the member's CRC and
//! compares it with the trailer; a reader that stops before the member's end checks nothing,
//! the index pass having checked every member whole).
//!
//! `entry_points` makes the index (one pass over the file, on one thread: the plan's cost,
//! about the speed of reading the file whole); `FromPoint` reads from a point.

mod from_point;
mod inflater;

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::error::Error;
use inflater::{Inflater, Stop, Wrapping};

pub use from_point::FromPoint;

/// The most text a deflate block may copy from: what a point keeps.
pub const WINDOW: usize = 32 << 10;

/// Where a reader can enter a gzip file: the start of a deflate block that is not its
/// member's first... or is (a later member's first block: its window is empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryPoint {
    /// The block's first bit in the file: bit `bit % 8` (least significant first) of byte
    /// `bit / 8`.
    pub bit: u64,
    /// The text before it: its length, and its newlines.
    pub text: u64,
    pub newlines: u64,
    /// Where its member's text starts, and that text's CRC-32 up to the point.
    pub member_text: u64,
    pub crc: u32,
    /// The member's last `WINDOW` bytes of text before the point (fewer near its start).
    pub window: Vec<u8>,
}

/// An entry point as a plan's span records it: all but its window, which the unit is handed
/// beside the span (`EntryPoint::new`), so that a span stays a small `Copy` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PointAt {
    pub bit: u64,
    pub text: u64,
    pub newlines: u64,
    pub member_text: u64,
    pub crc: u32,
}

impl EntryPoint {
    /// The point `at`, with its `window`.
    pub fn new(at: PointAt, window: Vec<u8>) -> Self {
        Self {
            bit: at.bit,
            text: at.text,
            newlines: at.newlines,
            member_text: at.member_text,
            crc: at.crc,
            window,
        }
    }
}

/// A gzip file's entry points (rising), and its whole text's length and newlines.
#[derive(Debug, Default)]
pub struct Index {
    pub points: Vec<EntryPoint>,
    pub text: u64,
    pub newlines: u64,
}

/// The most points an index holds (about one a `size / MOST_POINTS` bytes of the file).
pub const MOST_POINTS: u64 = 4096;
/// The compressed bytes read from the file a call.
const READ: usize = 1 << 20;
/// Room for the text of a call beyond the window kept.
const ROOM: usize = 256 << 10;

/// The entry points of the gzip file `path`, about `every` compressed bytes apart (a point
/// at the first block end at or past each multiple of `every`; `every` at least the file's
/// size / `MOST_POINTS`), found by decompressing it whole: an error when it
/// does not decompress (cut short, damaged, not gzip), as reading it would be. Stops with an
/// error between reads when Ctrl-C asks (`interrupt`).
pub fn entry_points(path: &Path, every: u64) -> Result<Index, Error> {
    let io = |source| Error::read(path, source);
    let bad = |message: String| Error::BadFile {
        path: path.to_path_buf(),
        message,
    };
    let mut file = File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    // A point holds its 32 KiB window: at most `MOST_POINTS` of them (128 MiB), however
    // small `every` is asked.
    let every = every.max(size.div_ceil(MOST_POINTS)).max(1);
    let mut input = vec![0u8; READ];
    let (mut held, mut at) = (0usize, 0usize); // input[at..held] not yet taken
    let mut consumed = 0u64; // the file's bytes inflate took
    let mut out = vec![0u8; WINDOW + ROOM];
    let mut filled = 0usize; // out[..filled]: the member's latest text (the window's source)
    let mut index = Index::default();
    let mut member = Member::new(0)?;
    let mut next_point = every;
    loop {
        if at == held {
            crate::interrupt::check()?;
            held = file.read(&mut input).map_err(io)?;
            at = 0;
            if held == 0 {
                if member.started {
                    return Err(bad(format!(
                        "truncated gz file (the compressed stream ends without its end \
                         marker after {consumed} bytes); re-download or re-compress it"
                    )));
                }
                return Ok(index); // the end, between members
            }
        }
        if out.len() - filled < ROOM / 4 {
            out.copy_within(filled - WINDOW..filled, 0);
            filled = WINDOW;
        }
        member.started = true;
        let call = member
            .inflater
            .inflate(&input[at..held], &mut out[filled..], true);
        let (taken, written) = (call.consumed, call.written);
        let stop = call.stop.map_err(|e| {
            // zlib stops at the damaged byte: the last one it took.
            let near = (consumed + taken as u64).saturating_sub(1);
            bad(format!(
                "corrupt gz file near byte {near} ({e}); re-download or re-compress it"
            ))
        })?;
        at += taken;
        consumed += taken as u64;
        let text = &out[filled..filled + written];
        member.crc.update(text);
        index.newlines += memchr::memchr_iter(b'\n', text).count() as u64;
        index.text += written as u64;
        filled += written;
        if stop == Stop::End {
            member = Member::new(index.text)?;
            filled = 0;
            continue;
        }
        let state = member.inflater.data_type();
        let unused = (state & 0x3f) as u64;
        let at_block_end = state & 128 != 0 && state & 64 == 0 && unused < 8;
        let last_text = index.points.last().map_or(0, |p| p.text);
        if at_block_end && consumed >= next_point && index.text > last_text {
            let kept = filled.min(WINDOW);
            index.points.push(EntryPoint {
                bit: consumed * 8 - unused,
                text: index.text,
                newlines: index.newlines,
                member_text: member.text,
                crc: member.crc.clone().finalize(),
                window: out[filled - kept..filled].to_vec(),
            });
            // The next multiple of `every` past this point: points near the multiples, however
            // long the blocks.
            next_point = (consumed / every + 1) * every;
        }
    }
}

/// The gzip member being decompressed.
struct Member {
    inflater: Inflater,
    /// Where its text starts, and the CRC-32 of its text so far.
    text: u64,
    crc: crc32fast::Hasher,
    /// Whether any of its bytes were offered (none: the file may end here).
    started: bool,
}

impl Member {
    fn new(text: u64) -> Result<Self, Error> {
        let inflater = Inflater::new(Wrapping::Gzip).map_err(|e| Error::Input(e.to_string()))?;
        Ok(Self {
            inflater,
            text,
            crc: crc32fast::Hasher::new(),
            started: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_files::stored;
    use super::*;
    use std::io::{BufReader, ErrorKind, Seek, SeekFrom, Write};

    /// Text that compresses in many blocks: words from a small generator, lines of varied
    /// length.
    fn text(bytes: usize) -> Vec<u8> {
        let mut state = 0x9e37_79b9_u64;
        let mut out = Vec::with_capacity(bytes + 64);
        while out.len() < bytes {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let word = (state >> 33) % 5000;
            out.extend(format!("w{word} ").bytes());
            if state.is_multiple_of(11) {
                out.push(b'\n');
            }
        }
        out
    }

    fn gzip(text: &[u8], level: u32) -> Vec<u8> {
        let level = flate2::Compression::new(level);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), level);
        gz.write_all(text).expect("compressed");
        gz.finish().expect("compressed")
    }

    fn read_from(path: &Path, point: &EntryPoint) -> std::io::Result<Vec<u8>> {
        let mut file = File::open(path)?;
        file.seek(SeekFrom::Start(point.bit / 8))?;
        let mut out = Vec::new();
        FromPoint::new(BufReader::new(file), point)?.read_to_end(&mut out)?;
        Ok(out)
    }

    fn newlines(text: &[u8]) -> u64 {
        memchr::memchr_iter(b'\n', text).count() as u64
    }

    #[test]
    fn every_point_reads_the_rest_of_the_text_at_any_level() {
        let plain = text(3 << 20);
        for level in [0, 1, 6, 9] {
            let file = stored(&gzip(&plain, level));
            let index = entry_points(file.path(), 64 << 10).expect("indexed");
            assert_eq!(index.text, plain.len() as u64, "level {level}");
            assert_eq!(index.newlines, newlines(&plain));
            // zlib-rs's level 1 (zlib-ng's quick strategy) writes long blocks: one here.
            assert!(level == 1 || index.points.len() > 3, "level {level}");
            for point in &index.points {
                let at = point.text as usize;
                assert_eq!(point.newlines, newlines(&plain[..at]));
                assert_eq!(point.window, plain[at.saturating_sub(WINDOW)..at]);
                let rest = read_from(file.path(), point).expect("read from the point");
                assert!(rest == plain[at..], "level {level}, point at text {at}");
            }
        }
    }

    #[test]
    fn an_index_holds_at_most_most_points_however_small_every_is() {
        // A block every 40 bytes of text (a sync flush each): some 25,000 blocks.
        let plain = text(1 << 20);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        for piece in plain.chunks(40) {
            gz.write_all(piece).expect("compressed");
            gz.flush().expect("flushed");
        }
        let file = stored(&gz.finish().expect("compressed"));
        let index = entry_points(file.path(), 1).expect("indexed");
        let count = index.points.len() as u64;
        assert!(MOST_POINTS / 2 < count && count <= MOST_POINTS, "{count}");
        let last = index.points.last().expect("points");
        let rest = read_from(file.path(), last).expect("read from the point");
        assert!(rest == plain[last.text as usize..]);
    }

    #[test]
    fn a_point_reads_on_through_the_members_after_its_own() {
        let (a, b, c) = (text(1 << 20), text(300_000), text(700_000));
        let bytes = [gzip(&a, 6), gzip(&b, 1), gzip(&c, 9)].concat();
        let plain = [a.clone(), b.clone(), c].concat();
        let file = stored(&bytes);
        let index = entry_points(file.path(), 20_000).expect("indexed");
        assert_eq!(index.text, plain.len() as u64);
        let members: Vec<u64> = index.points.iter().map(|p| p.member_text).collect();
        let (b_at, c_at) = (a.len() as u64, (a.len() + b.len()) as u64);
        assert!(members.contains(&0) && members.contains(&b_at) && members.contains(&c_at));
        for point in &index.points {
            let rest = read_from(file.path(), point).expect("read from the point");
            assert!(
                rest == plain[point.text as usize..],
                "point at {}",
                point.text
            );
        }
    }

    #[test]
    fn a_member_whose_trailer_does_not_match_is_an_error() {
        let plain = text(1 << 20);
        let mut bytes = gzip(&plain, 6);
        let file = stored(&bytes);
        let index = entry_points(file.path(), 50_000).expect("indexed");
        let point = index.points.first().expect("a point");
        let crc_at = bytes.len() - 8;
        bytes[crc_at] ^= 1;
        let damaged = stored(&bytes);
        let error = read_from(damaged.path(), point).expect_err("the CRC-32 differs");
        assert_eq!(error.kind(), ErrorKind::InvalidData);
        assert!(error.to_string().contains("trailer"), "{error}");
        // The whole-file index pass meets it too (zlib checks the member).
        let message = entry_points(damaged.path(), 50_000)
            .expect_err("bad")
            .to_string();
        assert!(message.contains("corrupt gz file"), "{message}");
    }

    #[test]
    fn a_file_cut_short_is_an_error_from_a_point_and_for_the_index() {
        let plain = text(1 << 20);
        let bytes = gzip(&plain, 6);
        let file = stored(&bytes);
        let index = entry_points(file.path(), 50_000).expect("indexed");
        let point = index.points.first().expect("a point");
        for cut in [bytes.len() - 3, bytes.len() * 3 / 4] {
            let short = stored(&bytes[..cut]);
            let error = read_from(short.path(), point).expect_err("cut short");
            assert_eq!(error.kind(), ErrorKind::UnexpectedEof, "{error}");
            let message = entry_points(short.path(), 50_000)
                .expect_err("cut")
                .to_string();
            assert!(message.contains("truncated gz file"), "{message}");
        }
    }

    #[test]
    fn a_file_that_is_not_gzip_is_a_corrupt_one_to_the_index() {
        let file = stored(b"plain text, not gzip\n");
        let message = entry_points(file.path(), 1)
            .expect_err("not gzip")
            .to_string();
        assert!(message.contains("corrupt gz file near byte"), "{message}");
        let empty = stored(b"");
        let index = entry_points(empty.path(), 1).expect("an empty file: no text");
        assert_eq!((index.points.len(), index.text), (0, 0));
    }
}
