//! A bzip2 file's blocks, found by walking it from a block (or the file's start) to its end:
//! each block runs from its magic to the next marker (the next block's magic, or its stream's
//! end); a stream's header must be followed by a block or its end, and a stream's end, its CRC
//! and padding by the next stream's header or the file's end. Anything else is an error, as it
//! is to a decoder of the whole file; so is a stream walked from its header whose blocks' CRCs,
//! folded, are not the CRC stored at its end (the remade streams carry CRCs of their own).

use std::borrow::Borrow;
use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use super::markers::{self, Marker, END_BITS, LOOK_AHEAD};
use super::{Block, OPEN};

/// The file is scanned this much at a time (a block is at most about 1 MB).
const CHUNK: u64 = 1 << 20;
/// A stream's header: `BZh` and its block size's digit.
pub const HEADER_BITS: u64 = 32;

/// The blocks of a file from a place on (see the module).
pub struct ScannedBlocks<F> {
    file: F,
    size_bits: u64,
    /// Where the next marker (or a stream's header) must start.
    at: u64,
    /// The markers found and not yet passed, and the bit before which every marker is found.
    found: VecDeque<(u64, Marker)>,
    scanned: u64,
    done: bool,
    /// At a place where a stream's header (or the file's end) must come: the walk's start at
    /// byte 0, and after each stream's end.
    expect_header: bool,
    /// The CRC of the stream's blocks so far, for a stream walked from its header (None for
    /// the one a walk starts inside).
    stream: Option<u32>,
    /// A last block without an end (a file cut short) is given `OPEN`, not an error: the walk's
    /// last part, whose decoder then meets the error.
    open_end: bool,
}

impl<F: Borrow<File>> ScannedBlocks<F> {
    /// The blocks of `file` (of `size` bytes) from bit `at`: the file's start (a stream's
    /// header), or a block's magic.
    pub fn new(file: F, size: u64, at: u64) -> Self {
        Self {
            file,
            size_bits: size * 8,
            at,
            found: VecDeque::new(),
            scanned: at,
            done: false,
            expect_header: at == 0,
            stream: None,
            open_end: false,
        }
    }

    /// The walk's blocks: a last block without an end is `OPEN`.
    pub fn with_open_end(self) -> Self {
        Self {
            open_end: true,
            ..self
        }
    }

    /// The first marker at or after bit `bit`, scanning on as far as needed.
    fn marker_from(&mut self, bit: u64) -> io::Result<Option<(u64, Marker)>> {
        loop {
            while let Some(&(place, marker)) = self.found.front() {
                if place >= bit {
                    return Ok(Some((place, marker)));
                }
                self.found.pop_front();
            }
            let from = self.scanned.max(bit);
            if from >= self.size_bits {
                return Ok(None);
            }
            let start = from / 8;
            let to = ((start + CHUNK) * 8).min(self.size_bits);
            let bytes = self.read(start, to.div_ceil(8) + LOOK_AHEAD)?;
            let base = start * 8;
            let found = markers::scan(&bytes, from - base, to - base);
            self.found
                .extend(found.into_iter().map(|(place, m)| (place + base, m)));
            self.scanned = to;
        }
    }

    /// The file's bytes `start..end` (or to its end).
    fn read(&self, start: u64, end: u64) -> io::Result<Vec<u8>> {
        let end = end.min(self.size_bits / 8);
        let mut bytes = vec![0u8; usize::try_from(end - start).unwrap_or(usize::MAX)];
        self.file.borrow().read_exact_at(&mut bytes, start)?;
        Ok(bytes)
    }

    /// Whether a stream's header starts at bit `bit`.
    fn header_at(&self, bit: u64) -> io::Result<bool> {
        if !bit.is_multiple_of(8) || bit + HEADER_BITS > self.size_bits {
            return Ok(false);
        }
        Ok(is_header(&self.read(bit / 8, bit / 8 + 4)?))
    }

    fn next_block(&mut self) -> io::Result<Option<Block>> {
        loop {
            if self.expect_header {
                if self.at >= self.size_bits {
                    return Ok(None);
                }
                if !self.header_at(self.at)? {
                    return Err(not_here("a stream's start", self.at, None));
                }
                self.at += HEADER_BITS;
                (self.expect_header, self.stream) = (false, Some(0));
                continue;
            }
            let marker = match self.marker_from(self.at)? {
                Some((place, marker)) if place == self.at => marker,
                _ if self.at >= self.size_bits => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "bzip2: the file ends inside a stream, at byte {}: it is cut short",
                            self.at / 8
                        ),
                    ))
                }
                other => {
                    let next = other.map(|(place, _)| place);
                    return Err(not_here("a block or a stream's end", self.at, next));
                }
            };
            match marker {
                Marker::End { crc } => {
                    // A stream walked from its header is checked whole, as a decoder of the
                    // file checks it: its blocks' CRCs folded against the one stored.
                    if self.stream.is_some_and(|blocks| blocks != crc) {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!(
                                "bzip2: the stream ending at byte {} fails its CRC: the file is \
                                 damaged",
                                self.at / 8
                            ),
                        ));
                    }
                    self.at = (self.at + END_BITS).next_multiple_of(8);
                    self.expect_header = true;
                }
                Marker::Block { crc } => {
                    let start = self.at;
                    self.stream = self.stream.map(|blocks| blocks.rotate_left(1) ^ crc);
                    let Some((end, _)) = self.marker_from(start + 48)? else {
                        if self.open_end {
                            // The walk's last part; the decoder meets the error.
                            self.done = true;
                            let end = OPEN;
                            return Ok(Some(Block { start, end, crc }));
                        }
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            format!(
                                "bzip2: the block at byte {} has no end: the file is cut short",
                                start / 8
                            ),
                        ));
                    };
                    self.at = end;
                    return Ok(Some(Block { start, end, crc }));
                }
            }
        }
    }
}

/// Whether `head` is a stream's header: `BZh` and a block size of 1-9.
pub fn is_header(head: &[u8]) -> bool {
    head.len() >= 4 && head.starts_with(b"BZh") && (b'1'..=b'9').contains(&head[3])
}

/// The error for a place where `what` should start and does not (`next`: where the next
/// marker is, if one was looked for and found).
fn not_here(what: &str, at: u64, next: Option<u64>) -> io::Error {
    let next = match next {
        Some(next) => format!(" (the next block or stream end is at byte {})", next / 8),
        None => String::new(),
    };
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "bzip2: no {what} at byte {} (bit {}){next}: the file is damaged or not bzip2",
            at / 8,
            at % 8
        ),
    )
}

impl<F: Borrow<File>> Iterator for ScannedBlocks<F> {
    type Item = io::Result<Block>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = self.next_block().transpose();
        if !matches!(next, Some(Ok(_))) {
            self.done = true;
        }
        next
    }
}
