//! The lines of a range of a compressed stream's text, read from a gzip entry point
//! (`gzip_points`) or from the text's start: what one `tokenize` unit of a large one-member
//! `.jsonl.gz` reads, decompressing only its own text and the start of the next range's.
//!
//! The plan gives each range two target offsets of the text; the range runs from the cut for
//! its start to the cut for its end, where the cut for `t` is the first line start at or after
//! `t` (0 for `t = 0`), as `prepare`'s text ranges are cut (`prepare/cuts.rs`). Neighbours cut
//! at the same place, so each line of the file is in exactly one range. A range from a point
//! starts one byte past the point's text offset: the newline that ends its cut then lies in the
//! text read from the point, never before it.

use std::io::{Error, ErrorKind, Read};

/// The error of a text that ends elsewhere than the plan found: the file changed since the
/// plan (it decompressed whole, so it is not damaged), which a reader says as a stale plan, not
/// as corrupt data (`TextChanged::of`).
#[derive(Debug)]
pub struct TextChanged {
    pub ends: u64,
    pub planned: u64,
}

impl TextChanged {
    /// The `TextChanged` that `error` holds, if it is one.
    pub fn of(error: &Error) -> Option<&TextChanged> {
        error.get_ref()?.downcast_ref::<TextChanged>()
    }
}

impl std::fmt::Display for TextChanged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the text ends at byte {}, where the plan found {} bytes: the file changed since \
             the plan",
            self.ends, self.planned
        )
    }
}

impl std::error::Error for TextChanged {}

/// A `Read` of the range's lines (see the module), over `R`, the text from offset `base` on.
pub struct LinesOfText<R> {
    text: R,
    /// The text offset of the next byte `text` gives.
    offset: u64,
    /// Until the range's first line is found: the range starts just past the first newline at
    /// or after this offset (`start - 1`).
    skip_from: Option<u64>,
    /// The range ends just past the first newline at or after this offset (`end - 1`); None:
    /// at the text's end.
    end_from: Option<u64>,
    /// The text's length as the plan found it: a text that ends elsewhere changed since.
    total: u64,
    done: bool,
}

impl<R: Read> LinesOfText<R> {
    /// The lines between the cuts for `start` and `end` (`end == total`: to the text's end) of
    /// the text `total` bytes long that `text` gives from offset `base` on (`base < start`, or
    /// both 0).
    pub fn new(text: R, base: u64, start: u64, end: u64, total: u64) -> Self {
        debug_assert!(base < start || (base == 0 && start == 0));
        Self {
            text,
            offset: base,
            skip_from: start.checked_sub(1),
            end_from: (end < total).then(|| end.saturating_sub(1)),
            total,
            // The cut for 0 is 0: a range ending there holds nothing.
            done: end == 0 && end < total,
        }
    }
}

impl<R: Read> Read for LinesOfText<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        while !self.done {
            let n = self.text.read(buf)?;
            let at = self.offset;
            self.offset += n as u64;
            if n == 0 {
                self.done = true;
                if self.offset != self.total {
                    return Err(Error::new(
                        ErrorKind::InvalidData,
                        TextChanged {
                            ends: self.offset,
                            planned: self.total,
                        },
                    ));
                }
                break;
            }
            // Offsets within `buf[..n]`, clamped to it.
            let within = |offset: u64| offset.saturating_sub(at).min(n as u64) as usize;
            let mut from = 0;
            if let Some(skip) = self.skip_from {
                let look = within(skip);
                let Some(newline) = memchr::memchr(b'\n', &buf[look..n]) else {
                    continue;
                };
                from = look + newline + 1;
                self.skip_from = None;
                // The newline ending the skip is at or past the end's offset: it ends the range
                // too, which holds no line.
                let newline_at = at + (look + newline) as u64;
                if self.end_from.is_some_and(|end| newline_at >= end) {
                    self.done = true;
                    break;
                }
            }
            let mut to = n;
            if let Some(end) = self.end_from {
                let look = within(end).max(from);
                if let Some(newline) = memchr::memchr(b'\n', &buf[look..n]) {
                    to = look + newline + 1;
                    self.done = true;
                }
            }
            if to > from {
                buf.copy_within(from..to, 0);
                return Ok(to - from);
            }
        }
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cut for `target` in `text`: the first line start at or after it.
    fn cut(text: &[u8], target: usize) -> usize {
        if target == 0 {
            return 0;
        }
        (target..=text.len())
            .find(|&p| p == text.len() || text[p - 1] == b'\n')
            .unwrap_or(text.len())
    }

    /// A reader giving `text` a few bytes a call, to cross every place a call can end.
    struct Dribble<'a> {
        text: &'a [u8],
        step: usize,
    }

    impl Read for Dribble<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.text.len());
            buf[..n].copy_from_slice(&self.text[..n]);
            self.text = &self.text[n..];
            Ok(n)
        }
    }

    fn range(text: &[u8], base: usize, start: usize, end: usize, step: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let from = Dribble {
            text: &text[base..],
            step,
        };
        LinesOfText::new(
            from,
            base as u64,
            start as u64,
            end as u64,
            text.len() as u64,
        )
        .read_to_end(&mut out)
        .expect("reads");
        out
    }

    /// Every range, from every base before its start, read in every step size, is the text
    /// between its cuts; and neighbouring ranges tile the text.
    #[test]
    fn ranges_are_the_text_between_their_cuts() {
        for text in [
            &b"ab\ncd\n\nefgh\ni\n"[..],
            b"one long line with no newline",
            b"\n\n\n",
            b"x\ny",
        ] {
            let len = text.len();
            for start in 0..=len {
                for end in start..=len {
                    let want = &text[cut(text, start)..cut(text, end).max(cut(text, start))];
                    let bases = if start == 0 { 0..1 } else { 0..start };
                    for base in bases {
                        for step in [1, 2, 5, 64] {
                            let got = range(text, base, start, end, step);
                            assert_eq!(got, want, "{text:?} {base} {start}..{end} step {step}");
                        }
                    }
                }
            }
            for middle in 0..=len {
                let mut whole = range(text, 0, 0, middle, 3);
                whole.extend(range(text, middle.saturating_sub(1), middle, len, 3));
                assert_eq!(whole, text, "cut at {middle}");
            }
        }
    }

    #[test]
    fn a_text_of_another_length_than_the_plan_found_is_refused() {
        let text = b"ab\ncd\n";
        let from = Dribble { text, step: 4 };
        let mut out = Vec::new();
        let err = LinesOfText::new(from, 0, 0, 9, 9)
            .read_to_end(&mut out)
            .expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::InvalidData);
        assert!(TextChanged::of(&err).is_some(), "{err}");
        assert!(
            err.to_string()
                .contains("ends at byte 6, where the plan found 9"),
            "{err}"
        );
    }
}
