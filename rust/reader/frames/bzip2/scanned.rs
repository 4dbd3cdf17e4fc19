//! A bzip2 file's blocks, found by walking it from a block (or a stream's start) to its end:
//! each block runs from its magic to the next marker (the next block's magic, or its stream's
//! end); after a stream's end, its CRC and padding, the next stream's header must follow, or
//! the file end.

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
    /// A last block without an end (a file cut short) is given `OPEN`, not an error: the walk's
    /// last part, whose decoder then meets the error.
    open_end: bool,
}

impl<F: Borrow<File>> ScannedBlocks<F> {
    /// The blocks of `file` (of `size` bytes) from bit `at`: a block's magic, or a stream's
    /// header.
    pub fn new(file: F, size: u64, at: u64) -> Self {
        Self {
            file,
            size_bits: size * 8,
            at,
            found: VecDeque::new(),
            scanned: at,
            done: false,
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
        let head = self.read(bit / 8, bit / 8 + 4)?;
        Ok(head.starts_with(b"BZh") && (b'1'..=b'9').contains(&head[3]))
    }

    fn next_block(&mut self) -> io::Result<Option<Block>> {
        loop {
            if self.at >= self.size_bits {
                return Ok(None);
            }
            if self.header_at(self.at)? {
                self.at += HEADER_BITS;
                continue;
            }
            let marker = match self.marker_from(self.at)? {
                Some((place, marker)) if place == self.at => marker,
                other => return Err(not_here(self.at, other.map(|(place, _)| place))),
            };
            match marker {
                Marker::End => self.at = (self.at + END_BITS).next_multiple_of(8),
                Marker::Block { crc } => {
                    let start = self.at;
                    let Some((end, _)) = self.marker_from(start + 48)? else {
                        if self.open_end {
                            self.at = self.size_bits;
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

/// The error for a place where a block, a stream's end or a stream's header should start and
/// none does (`next`: where the next marker is, if any).
fn not_here(at: u64, next: Option<u64>) -> io::Error {
    let next = match next {
        Some(next) => format!("the next block or stream end is at byte {}", next / 8),
        None => "no block or stream end follows".to_string(),
    };
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "bzip2: no block, stream end or stream start at byte {} (bit {}); {next}: the file \
             is damaged or not bzip2",
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
        self.done = !matches!(next, Some(Ok(_)));
        next
    }
}
