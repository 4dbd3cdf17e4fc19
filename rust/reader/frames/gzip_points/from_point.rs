//! A gzip file's text read from one of its entry points (`EntryPoint`): the rest of the point's
//! member inflated from the block the point starts, with the point's window as its history, its
//! CRC-32 finished from the point's and checked against the member's trailer; then any later
//! members, read as a whole file's are (flate2's `MultiGzDecoder`, which checks each).

use std::io::{BufRead, Error, ErrorKind, Read};

use super::inflater::{Inflater, Stop, Wrapping};
use super::EntryPoint;

/// The text from an entry point to the end of the file, read from `input`, the file's bytes
/// from the point's first whole byte on (a `Consumed` reader, so that an error can be
/// located).
pub struct FromPoint<R> {
    stage: Stage<R>,
}

enum Stage<R> {
    /// The point's member: its inflater, and its text's CRC-32 and length so far.
    Member {
        input: R,
        inflater: Inflater,
        crc: crc32fast::Hasher,
        len: u64,
    },
    /// The members after it.
    Rest(Box<dyn Read + Send>),
    Done,
    /// Failed: a read after an error is an error again.
    Failed,
}

impl<R: BufRead + Send + 'static> FromPoint<R> {
    /// From `point`, `input` starting at byte `point.bit / 8` of the file: its first byte is
    /// the one the block starts within, when it starts within one (its unread bits are primed).
    pub fn new(mut input: R, point: &EntryPoint) -> Result<Self, Error> {
        let mut inflater = Inflater::new(Wrapping::Raw)?;
        let used = (point.bit % 8) as u8;
        if used > 0 {
            let mut byte = [0u8; 1];
            input.read_exact(&mut byte)?;
            inflater.prime(8 - used, byte[0] >> used)?;
        }
        inflater.set_window(&point.window)?;
        // A point as a plan recorded it: its member cannot start past it.
        let before = point.text.checked_sub(point.member_text).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidInput,
                "an entry point whose member starts past it: plan again",
            )
        })?;
        Ok(Self {
            stage: Stage::Member {
                input,
                inflater,
                crc: crc32fast::Hasher::new_with_initial_len(point.crc, before),
                len: before,
            },
        })
    }

    /// The point's member ended: its trailer checked, then on to the members after it.
    fn end_member(&mut self) -> std::io::Result<()> {
        let Stage::Member {
            mut input,
            crc,
            len,
            ..
        } = std::mem::replace(&mut self.stage, Stage::Failed)
        else {
            return Ok(());
        };
        let mut trailer = [0u8; 8];
        input.read_exact(&mut trailer).map_err(|_| cut_short())?;
        let (want_crc, want_len) = trailer.split_at(4);
        let crc = crc.finalize().to_le_bytes();
        // ISIZE: the member's text length modulo 2^32.
        let len = (len as u32).to_le_bytes();
        if want_crc != crc || want_len != len {
            return Err(Error::new(
                ErrorKind::InvalidData,
                "the member's text does not match its trailer's CRC-32 and length",
            ));
        }
        self.stage = match input.fill_buf()?.is_empty() {
            true => Stage::Done,
            false => Stage::Rest(Box::new(flate2::bufread::MultiGzDecoder::new(input))),
        };
        Ok(())
    }
}

impl<R: BufRead + Send + 'static> Read for FromPoint<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let (written, stop) = match &mut self.stage {
                Stage::Member {
                    input,
                    inflater,
                    crc,
                    len,
                } => {
                    let held = input.fill_buf()?;
                    if held.is_empty() {
                        self.stage = Stage::Failed;
                        return Err(cut_short());
                    }
                    let call = inflater.inflate(held, buf, false);
                    input.consume(call.consumed);
                    crc.update(&buf[..call.written]);
                    *len += call.written as u64;
                    (call.written, call.stop)
                }
                Stage::Rest(rest) => return rest.read(buf),
                Stage::Done => return Ok(0),
                Stage::Failed => return Err(Error::other("read after a decoding error")),
            };
            match stop {
                Ok(Stop::End) => self.end_member()?,
                Ok(Stop::Paused) => {}
                Err(error) => {
                    self.stage = Stage::Failed;
                    return Err(error);
                }
            }
            if written > 0 {
                return Ok(written);
            }
        }
    }
}

fn cut_short() -> Error {
    Error::new(ErrorKind::UnexpectedEof, "gzip stream cut short")
}
