//! The text of a run of parts decoded on the calling thread, in order and only as it is read:
//! what a range reads past its last part (just far enough to find where its last document
//! ends), and a range read on one thread.

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::Parts;

/// The text of a run of parts, each xz stream's blocks (or the whole run, in the other
/// formats) one decoder opened as the last one ends.
pub struct SequentialText {
    path: PathBuf,
    parts: Arc<Parts>,
    runs: std::vec::IntoIter<std::ops::Range<usize>>,
    current: Option<Box<dyn Read + Send>>,
    /// The file's bytes of the runs opened so far (progress).
    read: Arc<AtomicU64>,
}

impl SequentialText {
    /// The text of `parts`' parts `range` of the file `path`; `read` counts the file's bytes
    /// of each run as it is opened.
    pub fn new(
        path: PathBuf,
        parts: Arc<Parts>,
        range: std::ops::Range<usize>,
        read: Arc<AtomicU64>,
    ) -> Self {
        let runs = parts.runs(range, u64::MAX).into_iter();
        Self {
            path,
            parts,
            runs,
            current: None,
            read,
        }
    }
}

impl Read for SequentialText {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let text = match self.current.as_mut() {
                Some(text) => text,
                None => {
                    let Some(run) = self.runs.next() else {
                        return Ok(0);
                    };
                    self.read
                        .fetch_add(self.parts.span(run.clone()), Ordering::Relaxed);
                    // A file that will not open is no damaged place: its error as it is. One
                    // of the decoder's start (a bad header) is placed at the run's start.
                    let at = self.parts.list.get(run.start).map_or(0, |part| part.start);
                    let file = File::open(&self.path)?;
                    let opened = self
                        .parts
                        .decoder(file, run)
                        .map_err(|error| self.parts.name_part(super::damaged(error, at, at)))?;
                    self.current.insert(opened)
                }
            };
            match text.read(buf) {
                Ok(0) if !buf.is_empty() => self.current = None,
                Ok(n) => return Ok(n),
                Err(error) => return Err(self.parts.name_part(error)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parts;
    use super::super::test_files::{stored, text};
    use super::*;
    use crate::reader::Compression;
    use std::io::Write;

    #[test]
    fn streams_are_read_in_turn_and_only_as_far_as_asked() {
        let plain = text(20_000);
        let (a, b) = plain.split_at(200_000);
        let xz = |text: &[u8]| {
            let mut encoder = liblzma::write::XzEncoder::new(Vec::new(), 1);
            encoder.write_all(text).expect("written");
            encoder.finish().expect("finished")
        };
        let file = stored(&[xz(a), xz(b)].concat());
        let parts = Arc::new(parts(file.path(), Compression::Xz).expect("parts"));
        let read = Arc::new(AtomicU64::new(0));
        let mut text = SequentialText::new(
            file.path().to_path_buf(),
            Arc::clone(&parts),
            0..2,
            Arc::clone(&read),
        );
        let mut start = [0u8; 10];
        text.read_exact(&mut start).expect("read");
        assert_eq!(&start, &plain[..10]);
        // The second stream is not opened yet.
        assert_eq!(read.load(Ordering::Relaxed), parts.span(0..1));
        let mut rest = Vec::new();
        text.read_to_end(&mut rest).expect("read");
        assert!(rest == plain[10..]);
        assert_eq!(read.load(Ordering::Relaxed), parts.span(0..2));
    }
}
