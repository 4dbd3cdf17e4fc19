//! The text before a part of a compressed file, counted: its newlines and bytes. A range of
//! parts numbers its lines and offsets from its own start; when an error in it must name the
//! whole file's line (`prepare`'s rebase, a failing `tokenize` unit), this count is added.

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{parts_in, ParallelText};
use crate::error::Error;
use crate::reader::{Compression, READ_BUFFER};

/// The newlines and bytes of the text of `path` before its part at byte `start`, decompressed
/// on `lanes` threads. A file where no part starts at `start` (it changed since the plan) is an
/// error that says so; a decoding error is the caller's (`decoding`: the error and the file
/// offset where the decoder failed, `Damaged::near`, else the file's bytes read so far).
pub fn text_before(
    path: &Path,
    compression: Compression,
    start: u64,
    lanes: usize,
    decoding: impl Fn(&std::io::Error, u64) -> Error,
) -> Result<(u64, u64), Error> {
    let parts = parts_in(path, compression, 0, Some(start))?;
    let range = parts.planned(path, 0, Some(start))?;
    let read = Arc::new(AtomicU64::new(0));
    let mut text = ParallelText::new(path, Arc::new(parts), range, lanes, Arc::clone(&read));
    let mut piece = vec![0u8; READ_BUFFER];
    let (mut newlines, mut bytes) = (0u64, 0u64);
    loop {
        let n = text.read(&mut piece).map_err(|e| {
            let near = super::damaged_at(&e).map(|place| place.near);
            decoding(&e, near.unwrap_or_else(|| read.load(Ordering::Relaxed)))
        })?;
        if n == 0 {
            return Ok((newlines, bytes));
        }
        newlines += memchr::memchr_iter(b'\n', &piece[..n]).count() as u64;
        bytes += n as u64;
    }
}
