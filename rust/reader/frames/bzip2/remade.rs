//! Blocks of bzip2 streams remade into one stream of their own, which a stock decoder checks
//! as it checks a whole file: a header, the blocks' bits as they are (each keeps its own CRC),
//! then the end-of-stream magic and the CRC of the blocks together (each block's, rotated in
//! turn). The header says block size 9, the largest, so a block of any stream fits.

use std::borrow::Borrow;
use std::fs::File;
use std::io::{self, BufRead, Read};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::markers::END;
use super::Block;

/// The remade stream's text is made this much at a time.
const OUT: usize = 64 << 10;

/// A stream made of `blocks`, read from `file`.
pub struct RemadeStream<F, I> {
    file: F,
    blocks: I,
    /// The block being copied, and the bit of it to copy next.
    block: Option<(Block, u64)>,
    crc: u32,
    bits: BitWriter,
    out: Vec<u8>,
    at: usize,
    source: Vec<u8>,
    started: bool,
    done: bool,
    /// Where `out`'s bytes come from in the file, for `reached`: (index in `out`, the file bit
    /// of that byte's first bit), one a copy of block bits, in order.
    marks: Vec<(usize, u64)>,
    /// The file offset just past the byte of the last bit the decoder consumed (not past
    /// `end`, the run's end: the stream's end marker is not the file's), when counted.
    reached: Option<(Arc<AtomicU64>, u64)>,
}

impl<F: Borrow<File>, I: Iterator<Item = io::Result<Block>>> RemadeStream<F, I> {
    pub fn new(file: F, blocks: I) -> Self {
        Self {
            file,
            blocks,
            block: None,
            crc: 0,
            bits: BitWriter::default(),
            out: Vec::with_capacity(OUT + 16),
            at: 0,
            source: Vec::new(),
            started: false,
            done: false,
            marks: Vec::new(),
            reached: None,
        }
    }

    /// The stream, keeping `reached` at the file offset its consumer has come to (`Consumed`
    /// does this for a file read as it is; a remade stream's bytes are the file's bits shifted,
    /// with headers between them), never past `end`.
    pub fn counting(mut self, reached: Arc<AtomicU64>, end: u64) -> Self {
        self.reached = Some((reached, end));
        self
    }

    /// The file offset just past the byte holding the bit of `out[at - 1]`'s last bit, or None
    /// when no copied bits come before it in `out` (the stream's header).
    fn file_offset(&self, at: usize) -> Option<u64> {
        let last = at.checked_sub(1)?;
        let k = self.marks.partition_point(|&(index, _)| index <= last);
        let &(index, bit) = self.marks.get(k.checked_sub(1)?)?;
        // Bits of the last byte consumed: eight from its first one, which lies `last - index`
        // bytes past the mark's (bytes past a block's last bits, an end marker or the next
        // block's first bits, count as though the block went on: a byte or so).
        let last_bit = bit + (last - index) as u64 * 8 + 7;
        Some(last_bit / 8 + 1)
    }

    /// The stream's next `OUT` bytes or so.
    fn fill(&mut self) -> io::Result<()> {
        self.out.clear();
        self.marks.clear();
        self.at = 0;
        if !self.started {
            self.out.extend_from_slice(b"BZh9");
            self.started = true;
        }
        while self.out.len() < OUT {
            match self.block {
                Some((block, from)) if from < block.end => {
                    let bits = (block.end - from).min(OUT as u64 * 8);
                    let (first, last) = (from / 8, (from + bits).div_ceil(8));
                    self.source
                        .resize(usize::try_from(last - first).unwrap_or(0), 0);
                    self.file.borrow().read_exact_at(&mut self.source, first)?;
                    // The next byte out holds the writer's pending bits, then these.
                    let lead = u64::from(self.bits.held);
                    self.marks.push((self.out.len(), from.saturating_sub(lead)));
                    self.bits
                        .push_bits(&self.source, from % 8, bits, &mut self.out);
                    self.block = Some((block, from + bits));
                }
                _ => match self.blocks.next().transpose()? {
                    Some(block) => {
                        self.crc = self.crc.rotate_left(1) ^ block.crc;
                        self.block = Some((block, block.start));
                    }
                    None => {
                        self.bits.push(END, 48, &mut self.out);
                        self.bits.push(u64::from(self.crc), 32, &mut self.out);
                        self.bits.flush(&mut self.out);
                        self.done = true;
                        break;
                    }
                },
            }
        }
        Ok(())
    }
}

impl<F: Borrow<File>, I: Iterator<Item = io::Result<Block>>> Read for RemadeStream<F, I> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let held = self.fill_buf()?;
        let n = buf.len().min(held.len());
        buf[..n].copy_from_slice(&held[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<F: Borrow<File>, I: Iterator<Item = io::Result<Block>>> BufRead for RemadeStream<F, I> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.at == self.out.len() && !self.done {
            if let Err(error) = self.fill() {
                // Nothing more comes after an error, not even the stream's end.
                (self.done, self.at) = (true, 0);
                // A walk that found the file cut short read it to its end: so has the decoder,
                // as a decoder of the whole file would have (its error says after how many
                // bytes).
                if let (Some((reached, end)), io::ErrorKind::UnexpectedEof) =
                    (&self.reached, error.kind())
                {
                    reached.store(*end, Ordering::Relaxed);
                }
                self.out.clear();
                return Err(error);
            }
        }
        Ok(&self.out[self.at..])
    }

    fn consume(&mut self, n: usize) {
        self.at = (self.at + n).min(self.out.len());
        if let Some((reached, end)) = &self.reached {
            if let Some(offset) = self.file_offset(self.at) {
                reached.store(offset.min(*end), Ordering::Relaxed);
            }
        }
    }
}

/// Bits written high bit first, whole bytes out as they fill.
#[derive(Default)]
struct BitWriter {
    pending: u64,
    held: u32,
}

impl BitWriter {
    /// The low `count` (at most 56) bits of `value`.
    fn push(&mut self, value: u64, count: u32, out: &mut Vec<u8>) {
        let mut left = count;
        while left > 0 {
            let take = left.min(8);
            left -= take;
            let part = (value >> left) & ((1 << take) - 1);
            self.pending = self.pending << take | part;
            self.held += take;
            if self.held >= 8 {
                self.held -= 8;
                out.push((self.pending >> self.held) as u8);
                self.pending &= (1 << self.held) - 1;
            }
        }
    }

    /// `count` bits of `source` from its bit `skip`: a few bits until the writer holds whole
    /// bytes, then a byte out for each eight bits in (two source bytes shifted), then the rest.
    fn push_bits(&mut self, source: &[u8], skip: u64, count: u64, out: &mut Vec<u8>) {
        let mut bit = skip;
        let end = skip + count;
        while self.held != 0 && bit < end {
            bit += self.push_few(source, bit, end, 8 - self.held, out);
        }
        let whole = usize::try_from((end - bit) / 8).unwrap_or(0);
        let (at, shift) = ((bit / 8) as usize, (bit % 8) as u32);
        if shift == 0 {
            out.extend_from_slice(&source[at..at + whole]);
        } else {
            let pairs = source[at..=at + whole].windows(2);
            out.extend(pairs.map(|pair| pair[0] << shift | pair[1] >> (8 - shift)));
        }
        bit += whole as u64 * 8;
        while bit < end {
            bit += self.push_few(source, bit, end, 8, out);
        }
    }

    /// Up to `most` (at most 8) bits of `source` from bit `bit`, not past `end`; how many.
    fn push_few(&mut self, source: &[u8], bit: u64, end: u64, most: u32, out: &mut Vec<u8>) -> u64 {
        let take = most.min(u32::try_from(end - bit).unwrap_or(8));
        let at = (bit / 8) as usize;
        let pair = u16::from_be_bytes([source[at], source.get(at + 1).copied().unwrap_or(0)]);
        let part = (u64::from(pair) >> (16 - bit % 8 - u64::from(take))) & ((1 << take) - 1);
        self.push(part, take, out);
        u64::from(take)
    }

    /// The last bits, padded with zeros to a byte.
    fn flush(&mut self, out: &mut Vec<u8>) {
        if self.held > 0 {
            out.push((self.pending << (8 - self.held)) as u8);
            self.pending = 0;
            self.held = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_copied_from_any_offset_to_any_offset() {
        let source: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37) ^ 0x5A).collect();
        let bit = |bytes: &[u8], k: u64| (bytes[(k / 8) as usize] >> (7 - k % 8)) & 1;
        for lead in 0..9u32 {
            for skip in 0..17u64 {
                for count in [0u64, 1, 7, 8, 9, 63, 200] {
                    let mut writer = BitWriter::default();
                    let mut out = Vec::new();
                    writer.push(0b1, lead, &mut out);
                    writer.push_bits(&source, skip, count, &mut out);
                    writer.flush(&mut out);
                    assert_eq!(out.len() as u64, (u64::from(lead) + count).div_ceil(8));
                    for k in 0..count {
                        let written = bit(&out, u64::from(lead) + k);
                        assert_eq!(written, bit(&source, skip + k), "{lead} {skip} {count}");
                    }
                }
            }
        }
    }
}
